"""The normal distribution, as `jax.scipy.stats.norm`; the tails come from special.log_ndtr and ndtri."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote, standardized

def logpdf(x, loc=0, scale=1) -> Array:
  """log of the normal density with mean `loc` and standard deviation `scale`.

  >>> from tinyjx.scipy.stats import norm
  >>> round(float(norm.logpdf(1.0, 1.0, 2.0)), 6)
  -1.612086
  """
  z, scale = standardized(x, loc, scale)
  return -0.5 * (z * z) - jnp.log(scale) - 0.5 * math.log(2 * math.pi)

def pdf(x, loc=0, scale=1) -> Array:
  """The normal density.

  >>> from tinyjx.scipy.stats import norm
  >>> round(float(norm.pdf(0.0)), 6)
  0.398942
  """
  return jnp.exp(logpdf(x, loc, scale))

def cdf(x, loc=0, scale=1) -> Array:
  """P(X <= x), relatively accurate far into the lower tail.

  >>> from tinyjx.scipy.stats import norm
  >>> float(norm.cdf(0.0))
  0.5
  """
  return special.ndtr(standardized(x, loc, scale)[0])

def logcdf(x, loc=0, scale=1) -> Array:
  """log P(X <= x) (finite for any finite x).

  >>> from tinyjx.scipy.stats import norm
  >>> round(float(norm.logcdf(-40.0)), 3)
  -804.608
  """
  return special.log_ndtr(standardized(x, loc, scale)[0])

def sf(x, loc=0, scale=1) -> Array:
  """P(X > x) = cdf(-x) for the standardized x (accurate in the upper tail).

  >>> from tinyjx.scipy.stats import norm
  >>> float(norm.sf(0.0))
  0.5
  """
  return special.ndtr(-standardized(x, loc, scale)[0])

def logsf(x, loc=0, scale=1) -> Array:
  """log P(X > x).

  >>> from tinyjx.scipy.stats import norm
  >>> round(float(norm.logsf(40.0)), 3)
  -804.608
  """
  return special.log_ndtr(-standardized(x, loc, scale)[0])

def ppf(q, loc=0, scale=1) -> Array:
  """The quantile function, the inverse of cdf (-inf at 0, inf at 1, NaN outside [0, 1]).

  >>> from tinyjx.scipy.stats import norm
  >>> round(float(norm.ppf(0.975)), 4)
  1.96
  """
  q, loc, scale = promote(q, loc, scale)
  return loc + scale * special.ndtri(q)

def isf(q, loc=0, scale=1) -> Array:
  """The inverse of sf: ppf(1 - q), computed as -ndtri(q) so small q keep their accuracy.

  >>> from tinyjx.scipy.stats import norm
  >>> round(float(norm.isf(0.025)), 4)
  1.96
  """
  q, loc, scale = promote(q, loc, scale)
  return loc - scale * special.ndtri(q)
