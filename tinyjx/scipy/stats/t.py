"""Student's t distribution with `df` degrees of freedom, as `jax.scipy.stats.t` (logpdf, pdf)."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpdf(x, df, loc=0, scale=1) -> Array:
  """gammaln((df+1)/2) - gammaln(df/2) - log(pi df)/2 - (df+1)/2 log1p(z^2/df) - log(scale).

  >>> from tinyjx.scipy.stats import t
  >>> round(float(t.logpdf(0.0, 3.0)), 6)
  -1.000889
  """
  x, df, loc, scale = promote(x, df, loc, scale)
  z = (x - loc) / scale
  norm = special.gammaln(0.5 * (df + 1.0)) - special.gammaln(0.5 * df) - 0.5 * jnp.log(math.pi * df)
  return norm - 0.5 * (df + 1.0) * jnp.log1p(z * z / df) - jnp.log(scale)

def pdf(x, df, loc=0, scale=1) -> Array:
  """The t density.

  >>> from tinyjx.scipy.stats import t
  >>> round(float(t.pdf(0.0, 1.0)), 6)
  0.31831
  """
  return jnp.exp(logpdf(x, df, loc, scale))
