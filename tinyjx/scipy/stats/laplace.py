"""The Laplace (double exponential) distribution, as `jax.scipy.stats.laplace`."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy.stats._common import standardized

def logpdf(x, loc=0, scale=1) -> Array:
  """-|z| - log(2 scale).

  >>> from tinyjx.scipy.stats import laplace
  >>> round(float(laplace.logpdf(0.0)), 6)
  -0.693147
  """
  z, scale = standardized(x, loc, scale)
  return -jnp.abs(z) - jnp.log(scale) - math.log(2.0)

def pdf(x, loc=0, scale=1) -> Array:
  """exp(-|z|) / (2 scale).

  >>> from tinyjx.scipy.stats import laplace
  >>> float(laplace.pdf(0.0))
  0.5
  """
  return jnp.exp(logpdf(x, loc, scale))

def cdf(x, loc=0, scale=1) -> Array:
  """exp(z) / 2 below loc, 1 - exp(-z) / 2 above.

  >>> from tinyjx.scipy.stats import laplace
  >>> float(laplace.cdf(0.0))
  0.5
  """
  z = standardized(x, loc, scale)[0]
  half = 0.5 * jnp.exp(-jnp.abs(z))
  return jnp.where(z < 0, half, 1.0 - half)
