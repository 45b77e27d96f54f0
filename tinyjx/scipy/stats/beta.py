"""The beta distribution on [loc, loc + scale], as `jax.scipy.stats.beta` (logpdf and pdf; the CDF needs the
incomplete beta function, which tinyjx does not have yet)."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpdf(x, a, b, loc=0, scale=1) -> Array:
  """(a-1) log y + (b-1) log(1-y) - betaln(a, b) - log(scale) for y = (x - loc) / scale in [0, 1]; -inf outside.
  At the ends, xlogy's convention: a = 1 gives a finite value at y = 0.

  >>> from tinyjx.scipy.stats import beta
  >>> round(float(beta.logpdf(0.5, 2.0, 2.0)), 6)
  0.405465
  """
  x, a, b, loc, scale = promote(x, a, b, loc, scale)
  y = (x - loc) / scale
  inside = (y >= 0) & (y <= 1)
  value = special.xlogy(a - 1.0, y) + special.xlog1py(b - 1.0, -y) - special.betaln(a, b) - jnp.log(scale)
  return jnp.where(inside, value, -math.inf)

def pdf(x, a, b, loc=0, scale=1) -> Array:
  """The beta density.

  >>> from tinyjx.scipy.stats import beta
  >>> round(float(beta.pdf(0.5, 2.0, 2.0)), 6)
  1.5
  """
  return jnp.exp(logpdf(x, a, b, loc, scale))
