"""The chi-squared distribution with `df` degrees of freedom, as `jax.scipy.stats.chi2` (logpdf, pdf)."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpdf(x, df, loc=0, scale=1) -> Array:
  """(k/2 - 1) log y - y/2 - gammaln(k/2) - (k/2) log 2 - log(scale), k = df, y = (x - loc) / scale >= 0.
  At y = 0 with df = 2 this is -log 2, as scipy (JAX gives NaN there).

  >>> from tinyjx.scipy.stats import chi2
  >>> round(float(chi2.logpdf(1.0, 2.0)), 6)
  -1.193147
  """
  x, df, loc, scale = promote(x, df, loc, scale)
  y = (x - loc) / scale
  half = 0.5 * df
  value = special.xlogy(half - 1.0, y) - 0.5 * y - special.gammaln(half) - half * math.log(2.0) - jnp.log(scale)
  return jnp.where(y < 0, -math.inf, value)

def pdf(x, df, loc=0, scale=1) -> Array:
  """The chi-squared density.

  >>> from tinyjx.scipy.stats import chi2
  >>> float(chi2.pdf(0.0, 2.0))
  0.5
  """
  return jnp.exp(logpdf(x, df, loc, scale))
