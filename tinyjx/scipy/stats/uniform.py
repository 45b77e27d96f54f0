"""The uniform distribution on [loc, loc + scale], as `jax.scipy.stats.uniform`."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy.stats._common import promote

def logpdf(x, loc=0, scale=1) -> Array:
  """-log(scale) on [loc, loc + scale], -inf elsewhere.

  >>> from tinyjx.scipy.stats import uniform
  >>> round(float(uniform.logpdf(0.5, 0.0, 2.0)), 6)
  -0.693147
  """
  x, loc, scale = promote(x, loc, scale)
  inside = (x >= loc) & (x <= loc + scale)
  return jnp.where(inside, -jnp.log(scale), -math.inf)

def pdf(x, loc=0, scale=1) -> Array:
  """1 / scale on [loc, loc + scale], 0 elsewhere.

  >>> from tinyjx.scipy.stats import uniform
  >>> float(uniform.pdf(0.5))
  1.0
  """
  return jnp.exp(logpdf(x, loc, scale))

def cdf(x, loc=0, scale=1) -> Array:
  """(x - loc) / scale clipped to [0, 1].

  >>> from tinyjx.scipy.stats import uniform
  >>> float(uniform.cdf(0.25))
  0.25
  """
  x, loc, scale = promote(x, loc, scale)
  return jnp.clip((x - loc) / scale, 0.0, 1.0)

def ppf(q, loc=0, scale=1) -> Array:
  """loc + q * scale for q in [0, 1], NaN outside.

  >>> from tinyjx.scipy.stats import uniform
  >>> float(uniform.ppf(0.5, 1.0, 2.0))
  2.0
  """
  q, loc, scale = promote(q, loc, scale)
  return jnp.where((q >= 0) & (q <= 1), loc + q * scale, math.nan)
