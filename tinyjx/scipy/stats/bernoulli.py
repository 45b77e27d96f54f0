"""The Bernoulli distribution with success probability `p`, as `jax.scipy.stats.bernoulli`. As JAX, logpmf
interpolates k log p + (1-k) log(1-p) for k in [0, 1] (it is -inf outside) rather than checking integrality."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpmf(k, p, loc=0) -> Array:
  """k log p + (1 - k) log(1 - p) for k - loc in [0, 1] (0 * log 0 = 0), -inf outside.

  >>> from tinyjx.scipy.stats import bernoulli
  >>> round(float(bernoulli.logpmf(1, 0.25)), 6)
  -1.386294
  """
  k, p, loc = promote(k, p, loc)
  y = k - loc
  value = special.xlogy(y, p) + special.xlog1py(1.0 - y, -p)
  return jnp.where((y < 0) | (y > 1), -math.inf, value)

def pmf(k, p, loc=0) -> Array:
  """P(K = k).

  >>> from tinyjx.scipy.stats import bernoulli
  >>> float(bernoulli.pmf(0, 0.25))
  0.75
  """
  return jnp.exp(logpmf(k, p, loc))

def cdf(k, p) -> Array:
  """0 below 0, 1 - p on [0, 1), 1 from 1 on.

  >>> from tinyjx.scipy.stats import bernoulli
  >>> float(bernoulli.cdf(0, 0.25))
  0.75
  """
  k, p = promote(k, p)
  return jnp.where(k < 0, 0.0, jnp.where(k < 1, 1.0 - p, 1.0))

def ppf(q, p) -> Array:
  """The smallest k in {0, 1} with cdf(k) >= q (0 at q = 0, as JAX); NaN for q outside [0, 1].

  >>> from tinyjx.scipy.stats import bernoulli
  >>> float(bernoulli.ppf(0.9, 0.25))
  1.0
  """
  q, p = promote(q, p)
  return jnp.where((q < 0) | (q > 1), math.nan, jnp.where(q > 1.0 - p, 1.0, 0.0))
