"""The gamma distribution with shape `a`, as `jax.scipy.stats.gamma` (logpdf and pdf; the CDF needs the
incomplete gamma function, which tinyjx does not have yet)."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpdf(x, a, loc=0, scale=1) -> Array:
  """(a-1) log y - y - gammaln(a) - log(scale) for y = (x - loc) / scale >= 0, -inf below.

  >>> from tinyjx.scipy.stats import gamma
  >>> round(float(gamma.logpdf(1.0, 2.0)), 6)
  -1.0
  """
  x, a, loc, scale = promote(x, a, loc, scale)
  y = (x - loc) / scale
  value = special.xlogy(a - 1.0, y) - y - special.gammaln(a) - jnp.log(scale)
  return jnp.where(y < 0, -math.inf, value)

def pdf(x, a, loc=0, scale=1) -> Array:
  """The gamma density.

  >>> from tinyjx.scipy.stats import gamma
  >>> round(float(gamma.pdf(1.0, 1.0)), 6)
  0.367879
  """
  return jnp.exp(logpdf(x, a, loc, scale))
