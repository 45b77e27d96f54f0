"""The geometric distribution (trials up to the first success, k >= 1), as `jax.scipy.stats.geom`."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpmf(k, p, loc=0) -> Array:
  """(k - 1) log(1 - p) + log p for y = k - loc >= 1, -inf below.

  >>> from tinyjx.scipy.stats import geom
  >>> round(float(geom.logpmf(1, 0.25)), 6)
  -1.386294
  """
  k, p, loc = promote(k, p, loc)
  y = k - loc
  value = special.xlog1py(y - 1.0, -p) + jnp.log(p)
  return jnp.where(y < 1, -math.inf, value)

def pmf(k, p, loc=0) -> Array:
  """P(K = k).

  >>> from tinyjx.scipy.stats import geom
  >>> float(geom.pmf(2, 0.5))
  0.25
  """
  return jnp.exp(logpmf(k, p, loc))
