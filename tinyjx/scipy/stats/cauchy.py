"""The Cauchy distribution, as `jax.scipy.stats.cauchy`. The CDF uses arctan of z (and of -1/z in the far
tails, where 1/2 + arctan(z)/pi would cancel)."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy.stats._common import promote, standardized

def logpdf(x, loc=0, scale=1) -> Array:
  """-log(pi scale (1 + z^2)).

  >>> from tinyjx.scipy.stats import cauchy
  >>> round(float(cauchy.logpdf(0.0)), 6)
  -1.14473
  """
  z, scale = standardized(x, loc, scale)
  return -math.log(math.pi) - jnp.log(scale) - jnp.log1p(z * z)

def pdf(x, loc=0, scale=1) -> Array:
  """1 / (pi scale (1 + z^2)).

  >>> from tinyjx.scipy.stats import cauchy
  >>> round(float(cauchy.pdf(0.0)), 6)
  0.31831
  """
  return jnp.exp(logpdf(x, loc, scale))

def _lower(z):
  """P(Z <= z) for the standard Cauchy: arctan(-1/z)/pi for z < -1 keeps the far lower tail's accuracy."""
  safe = jnp.where(z < -1.0, z, -2.0)
  return jnp.where(z < -1.0, jnp.arctan(-1.0 / safe) / math.pi, 0.5 + jnp.arctan(z) / math.pi)

def cdf(x, loc=0, scale=1) -> Array:
  """1/2 + arctan(z) / pi.

  >>> from tinyjx.scipy.stats import cauchy
  >>> float(cauchy.cdf(1.0))
  0.75
  """
  return _lower(standardized(x, loc, scale)[0])

def logcdf(x, loc=0, scale=1) -> Array:
  """log cdf.

  >>> from tinyjx.scipy.stats import cauchy
  >>> round(float(cauchy.logcdf(1.0)), 6)
  -0.287682
  """
  return jnp.log(cdf(x, loc, scale))

def sf(x, loc=0, scale=1) -> Array:
  """P(X > x) = cdf(-z).

  >>> from tinyjx.scipy.stats import cauchy
  >>> float(cauchy.sf(1.0))
  0.25
  """
  return _lower(-standardized(x, loc, scale)[0])

def logsf(x, loc=0, scale=1) -> Array:
  """log sf.

  >>> from tinyjx.scipy.stats import cauchy
  >>> round(float(cauchy.logsf(1.0)), 6)
  -1.386294
  """
  return jnp.log(sf(x, loc, scale))

def ppf(q, loc=0, scale=1) -> Array:
  """loc + scale tan(pi (q - 1/2)): -inf at 0 and inf at 1 (as scipy; JAX returns +-2.3e7 there), NaN outside.

  >>> from tinyjx.scipy.stats import cauchy
  >>> round(float(cauchy.ppf(0.75)), 6)
  1.0
  """
  q, loc, scale = promote(q, loc, scale)
  inside = loc + scale * jnp.tan(math.pi * (q - 0.5))
  edge = jnp.where(q == 0, -math.inf, jnp.where(q == 1, math.inf, math.nan))
  return jnp.where((q > 0) & (q < 1), inside, edge)

def isf(q, loc=0, scale=1) -> Array:
  """The inverse of sf: loc - scale tan(pi (q - 1/2)).

  >>> from tinyjx.scipy.stats import cauchy
  >>> round(float(cauchy.isf(0.25)), 6)
  1.0
  """
  q, loc, scale = promote(q, loc, scale)
  return 2.0 * loc - ppf(q, loc, scale)
