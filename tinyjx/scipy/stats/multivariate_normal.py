"""The multivariate normal distribution, as `jax.scipy.stats.multivariate_normal`: a Cholesky factor of `cov`
(jnp.linalg.cholesky) and one triangular solve (tinyjx.scipy.linalg.solve_triangular) give the Mahalanobis term
and the log determinant. Batch axes of x, mean and cov broadcast; the event axis is the last one (of cov, the
last two). Singular covariances are not supported (as JAX): the Cholesky factor of one has a zero or NaN."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy.stats._common import promote

def _check_singular(allow_singular) -> None:
  if allow_singular:
    raise NotImplementedError("multivariate_normal.logpdf: allow_singular=True is not supported (nor in JAX); pass "
                              "a positive definite cov, e.g. cov + eps * jnp.eye(n)")

def logpdf(x, mean, cov, allow_singular=None) -> Array:
  """log N(x; mean, cov). mean may be a scalar (then x and cov are scalars too, a one-dimensional normal), and
  cov a scalar (an isotropic covariance cov * I) or an (..., n, n) matrix.

  >>> import tinyjx.numpy as jnp; from tinyjx.scipy.stats import multivariate_normal as mvn
  >>> round(float(mvn.logpdf(jnp.array([1.0, 2.0]), jnp.zeros(2), jnp.array([[2.0, 0.5], [0.5, 1.0]]))), 4)
  -4.1177
  """
  _check_singular(allow_singular)
  x, mean, cov = promote(x, mean, cov)
  if mean.ndim == 0:
    return -0.5 * jnp.square(x - mean) / cov - 0.5 * (math.log(2 * math.pi) + jnp.log(cov))
  n = mean.shape[-1]
  diff = x - mean
  if diff.shape[-1:] != (n,):
    raise ValueError(f"multivariate_normal.logpdf: x of shape {x.shape} and mean of shape {mean.shape} must end in "
                     f"one event axis of size {n}")
  if cov.ndim == 0:
    return -0.5 * jnp.sum(diff * diff, axis=-1) / cov - 0.5 * n * (math.log(2 * math.pi) + jnp.log(cov))
  if cov.ndim < 2 or cov.shape[-2:] != (n, n):
    raise ValueError(f"multivariate_normal.logpdf: cov must be a scalar or have shape (..., {n}, {n}) for mean of "
                     f"shape {mean.shape}, got cov of shape {cov.shape}")
  from tinyjx.scipy.linalg import solve_triangular
  chol = jnp.linalg.cholesky(cov)
  batch = jnp.broadcast_shapes(diff.shape[:-1], cov.shape[:-2])
  chol = jnp.broadcast_to(chol, batch + (n, n))
  y = solve_triangular(chol, jnp.broadcast_to(diff, batch + (n,))[..., None], lower=True)[..., 0]
  log_det = jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
  return -0.5 * jnp.sum(y * y, axis=-1) - 0.5 * n * math.log(2 * math.pi) - log_det

def pdf(x, mean, cov, allow_singular=None) -> Array:
  """N(x; mean, cov) = exp(logpdf).

  >>> import tinyjx.numpy as jnp; from tinyjx.scipy.stats import multivariate_normal as mvn
  >>> round(float(mvn.pdf(jnp.zeros(2), jnp.zeros(2), jnp.eye(2))), 6)
  0.159155
  """
  return jnp.exp(logpdf(x, mean, cov, allow_singular))
