"""The logistic distribution, as `jax.scipy.stats.logistic`; written with expit/logit and softplus forms so
neither tail overflows."""
from __future__ import annotations
import tinyjx.numpy as jnp
from tinyjx import nn
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote, standardized

def logpdf(x, loc=0, scale=1) -> Array:
  """-|z| - 2 log1p(exp(-|z|)) - log(scale) (the density is symmetric).

  >>> from tinyjx.scipy.stats import logistic
  >>> round(float(logistic.logpdf(0.0)), 6)
  -1.386294
  """
  z, scale = standardized(x, loc, scale)
  a = jnp.abs(z)
  return -a - 2.0 * jnp.log1p(jnp.exp(-a)) - jnp.log(scale)

def pdf(x, loc=0, scale=1) -> Array:
  """The logistic density.

  >>> from tinyjx.scipy.stats import logistic
  >>> float(logistic.pdf(0.0))
  0.25
  """
  return jnp.exp(logpdf(x, loc, scale))

def cdf(x, loc=0, scale=1) -> Array:
  """expit(z).

  >>> from tinyjx.scipy.stats import logistic
  >>> float(logistic.cdf(0.0))
  0.5
  """
  return special.expit(standardized(x, loc, scale)[0])

def sf(x, loc=0, scale=1) -> Array:
  """expit(-z).

  >>> from tinyjx.scipy.stats import logistic
  >>> float(logistic.sf(0.0))
  0.5
  """
  return special.expit(-standardized(x, loc, scale)[0])

def logcdf(x, loc=0, scale=1) -> Array:
  """log expit(z) = -softplus(-z).

  >>> from tinyjx.scipy.stats import logistic
  >>> round(float(logistic.logcdf(0.0)), 6)
  -0.693147
  """
  return nn.log_sigmoid(standardized(x, loc, scale)[0])

def logsf(x, loc=0, scale=1) -> Array:
  """log expit(-z).

  >>> from tinyjx.scipy.stats import logistic
  >>> round(float(logistic.logsf(0.0)), 6)
  -0.693147
  """
  return nn.log_sigmoid(-standardized(x, loc, scale)[0])

def ppf(x, loc=0, scale=1) -> Array:
  """loc + scale * logit(q) (JAX names the probability `x` here).

  >>> from tinyjx.scipy.stats import logistic
  >>> float(logistic.ppf(0.5))
  0.0
  """
  q, loc, scale = promote(x, loc, scale)
  return loc + scale * special.logit(q)

def isf(x, loc=0, scale=1) -> Array:
  """loc - scale * logit(q), the inverse of sf.

  >>> from tinyjx.scipy.stats import logistic
  >>> float(logistic.isf(0.5))
  0.0
  """
  q, loc, scale = promote(x, loc, scale)
  return loc - scale * special.logit(q)
