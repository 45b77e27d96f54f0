"""The Dirichlet distribution, as `jax.scipy.stats.dirichlet`: `alpha` has shape (K,), `x` has shape (K, ...)
or (K - 1, ...) (then the last component is 1 - sum, as JAX); the batch axes of x come after the first."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpdf(x, alpha) -> Array:
  """sum_i (alpha_i - 1) log x_i - (sum_i gammaln(alpha_i) - gammaln(sum_i alpha_i)) on the simplex, -inf off it.

  >>> import tinyjx.numpy as jnp; from tinyjx.scipy.stats import dirichlet
  >>> round(float(dirichlet.logpdf(jnp.array([0.2, 0.3, 0.5]), jnp.array([1.0, 2.0, 3.0]))), 5)
  1.50408
  """
  x, alpha = promote(x, alpha)
  if alpha.ndim != 1:
    raise ValueError(f"dirichlet.logpdf: alpha must be one-dimensional (K,), got shape {alpha.shape}")
  k = alpha.shape[0]
  if x.ndim == 0 or x.shape[0] not in (k, k - 1):
    raise ValueError(f"dirichlet.logpdf: x must have shape ({k}, ...) or ({k - 1}, ...) for alpha of shape ({k},), "
                     f"got x of shape {x.shape}; put the K components on x's first axis")
  if x.shape[0] == k - 1: x = jnp.concatenate([x, 1.0 - jnp.sum(x, axis=0, keepdims=True)], axis=0)
  a = jnp.reshape(alpha, (k,) + (1,) * (x.ndim - 1))
  log_norm = jnp.sum(special.gammaln(alpha)) - special.gammaln(jnp.sum(alpha))
  value = jnp.sum(special.xlogy(a - 1.0, x), axis=0) - log_norm
  tolerance = max(1e-6, 16 * float(dtypes.finfo(x.dtype).eps))
  simplex = jnp.all(x >= 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1.0) <= tolerance)
  return jnp.where(simplex, value, -math.inf)

def pdf(x, alpha) -> Array:
  """The Dirichlet density.

  >>> import tinyjx.numpy as jnp; from tinyjx.scipy.stats import dirichlet
  >>> round(float(dirichlet.pdf(jnp.array([0.5, 0.5]), jnp.array([1.0, 1.0]))), 6)
  1.0
  """
  return jnp.exp(logpdf(x, alpha))
