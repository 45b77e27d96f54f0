"""The exponential distribution, as `jax.scipy.stats.expon` (rate 1 / scale, shifted by loc)."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy.stats._common import promote, standardized

def logpdf(x, loc=0, scale=1) -> Array:
  """-z - log(scale) for z = (x - loc) / scale >= 0, -inf below.

  >>> from tinyjx.scipy.stats import expon
  >>> float(expon.logpdf(1.0))
  -1.0
  """
  z, scale = standardized(x, loc, scale)
  return jnp.where(z < 0, -math.inf, -z - jnp.log(scale))

def pdf(x, loc=0, scale=1) -> Array:
  """exp(-z) / scale for z >= 0, 0 below.

  >>> from tinyjx.scipy.stats import expon
  >>> float(expon.pdf(0.0))
  1.0
  """
  return jnp.exp(logpdf(x, loc, scale))

def cdf(x, loc=0, scale=1) -> Array:
  """1 - exp(-z) (as -expm1(-z), accurate near 0), 0 below loc.

  >>> from tinyjx.scipy.stats import expon
  >>> round(float(expon.cdf(1.0)), 6)
  0.632121
  """
  z = standardized(x, loc, scale)[0]
  return jnp.where(z < 0, 0.0, -jnp.expm1(-jnp.maximum(z, 0.0)))

def logcdf(x, loc=0, scale=1) -> Array:
  """log(1 - exp(-z)), -inf at and below loc.

  >>> from tinyjx.scipy.stats import expon
  >>> round(float(expon.logcdf(1.0)), 6)
  -0.458675
  """
  z = standardized(x, loc, scale)[0]
  safe = jnp.where(z > 0, z, 1.0)
  # log1p(-exp(-z)) for large z, log(-expm1(-z)) for small z: both accurate on their side of log 2
  value = jnp.where(safe > math.log(2.0), jnp.log1p(-jnp.exp(-safe)), jnp.log(-jnp.expm1(-safe)))
  return jnp.where(z > 0, value, -math.inf)

def sf(x, loc=0, scale=1) -> Array:
  """exp(-z), 1 below loc.

  >>> from tinyjx.scipy.stats import expon
  >>> round(float(expon.sf(1.0)), 6)
  0.367879
  """
  z = standardized(x, loc, scale)[0]
  return jnp.exp(-jnp.maximum(z, 0.0))

def logsf(x, loc=0, scale=1) -> Array:
  """-z, 0 below loc.

  >>> from tinyjx.scipy.stats import expon
  >>> float(expon.logsf(2.0))
  -2.0
  """
  z = standardized(x, loc, scale)[0]
  return -jnp.maximum(z, 0.0)

def ppf(q, loc=0, scale=1) -> Array:
  """loc - scale * log1p(-q) for q in [0, 1] (inf at 1), NaN outside.

  >>> from tinyjx.scipy.stats import expon
  >>> round(float(expon.ppf(0.5)), 6)
  0.693147
  """
  q, loc, scale = promote(q, loc, scale)
  return jnp.where((q >= 0) & (q <= 1), loc - scale * jnp.log1p(-q), math.nan)
