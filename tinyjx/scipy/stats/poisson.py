"""The Poisson distribution with mean `mu`, as `jax.scipy.stats.poisson` (logpmf, pmf)."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpmf(k, mu, loc=0) -> Array:
  """k log(mu) - mu - gammaln(k + 1) at the non-negative integers k - loc, -inf elsewhere.

  >>> from tinyjx.scipy.stats import poisson
  >>> round(float(poisson.logpmf(1, 2.0)), 6)
  -1.306853
  """
  k, mu, loc = promote(k, mu, loc)
  y = k - loc
  safe = jnp.maximum(y, 0.0)
  value = special.xlogy(safe, mu) - mu - special.gammaln(safe + 1.0)
  return jnp.where((y < 0) | (y != jnp.floor(y)), -math.inf, value)

def pmf(k, mu, loc=0) -> Array:
  """P(K = k).

  >>> from tinyjx.scipy.stats import poisson
  >>> round(float(poisson.pmf(0, 2.0)), 6)
  0.135335
  """
  return jnp.exp(logpmf(k, mu, loc))
