"""numpy.linalg: the `jnp.linalg` namespace: norms (`norm`, `vector_norm`, `matrix_norm`, not exported into `jnp`
itself, as in JAX), the decompositions and solvers of `linalg_decomp`, and the contractions of `products` that
`jax.numpy.linalg` also has.
"""
from __future__ import annotations
import math
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.numpy import core
from tinyjx.numpy.core import asarray, normalize_axis
from tinyjx.numpy.shape import moveaxis, expand_dims
from tinyjx.numpy.products import matmul, vecdot, outer, tensordot, cross  # noqa: F401  (jnp.linalg has them too)
from tinyjx.numpy.linalg_decomp import *  # noqa: F401,F403
from tinyjx.numpy import linalg_decomp

# --- jnp.linalg ---
def _float(x) -> Array:
  """`x` as floats; complex values as their moduli (every norm here but the spectral ones is a norm of those)."""
  x = asarray(x)
  if dtypes.is_complex(x.dtype): return core.abs(x)
  return x if dtypes.is_float(x.dtype) else core.astype(x, dtypes.default_float())

def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2) -> Array:
  """The `ord`-norm of vectors along `axis` (None: the whole flattened array): 2, 1, inf, -inf, 0 or any p."""
  x = _float(x)
  axes = core.normalize_axes(axis, x.ndim)
  a = core.abs(x)
  if ord is None or ord == 2: return core.sqrt(core.sum(core.multiply(x, x), axes, keepdims=keepdims))
  if ord == math.inf: return core.max(a, axes, keepdims=keepdims)
  if ord == -math.inf: return core.min(a, axes, keepdims=keepdims)
  if ord == 0: return core.sum(core.astype(core.not_equal(x, 0), x.dtype), axes, keepdims=keepdims)
  if ord == 1: return core.sum(a, axes, keepdims=keepdims)
  if isinstance(ord, str):
    raise ValueError(f"norm: ord={ord!r} is not a vector norm; use 2, 1, inf, -inf, 0 or a number")
  return core.power(core.sum(core.power(a, float(ord)), axes, keepdims=keepdims), 1.0 / float(ord))

def matrix_norm(x, /, *, keepdims: bool = False, ord='fro') -> Array:
  """The `ord`-norm of the matrices in the last two axes: 'fro', 1, -1, inf or -inf."""
  return norm(x, ord, (-2, -1), keepdims)

def norm(x, ord=None, axis=None, keepdims: bool = False) -> Array:
  """`jnp.linalg.norm`: vector norms (ord None/2, 1, inf, -inf, 0, p) and matrix norms ('fro', 1, -1, inf, -inf).

  >>> import tinyjx.numpy as jnp
  >>> float(jnp.linalg.norm(jnp.array([3., 4.])))
  5.0
  """
  if dtypes.is_complex(asarray(x).dtype) and ord in (2, -2, 'nuc') and (axis is None and asarray(x).ndim == 2 or
                                                                        not isinstance(axis, int) and axis is not None):
    raise NotImplementedError(f"norm: ord={ord!r} of a complex matrix needs its singular values, and tinyjx's svd "
                              "is real only; use ord='fro', 1 or inf")
  x = _float(x)
  if axis is None:
    if ord is None:
      out = core.sqrt(core.sum(core.multiply(x, x)))
      return Array(out.uop.reshape((1,) * x.ndim)) if keepdims else out
    if x.ndim not in (1, 2):
      raise ValueError(f"norm: ord={ord!r} needs axis= for an array of ndim {x.ndim} "
                       "(only 1-D and 2-D arrays have a default)")
    axis = tuple(range(x.ndim))
  axes = (axis,) if isinstance(axis, int) else tuple(axis)
  if len(axes) == 1: return vector_norm(x, axis=axes[0], keepdims=keepdims, ord=ord)
  if len(axes) != 2: raise ValueError(f"norm: axis must be an int or a pair of ints, got {axis!r}")
  axes = tuple(normalize_axis(a, x.ndim) for a in axes)
  if axes[0] == axes[1]: raise ValueError(f"norm: the two matrix axes must differ, got {axis}")
  return _matrix_norm(x, ord, axes, keepdims)

def _matrix_norm(x: Array, ord, axes: tuple, keepdims: bool) -> Array:
  rows, cols = axes
  a = core.abs(x)
  if ord in (None, 'fro'): out = core.sqrt(core.sum(core.multiply(x, x), axes, keepdims=True))
  elif ord in (1, -1):
    pick = core.max if ord == 1 else core.min
    out = pick(core.sum(a, rows, keepdims=True), cols, keepdims=True)
  elif ord in (math.inf, -math.inf):
    pick = core.max if ord == math.inf else core.min
    out = pick(core.sum(a, cols, keepdims=True), rows, keepdims=True)
  elif ord in ('nuc', 2, -2):   # from the singular values of the matrices, moved to the last two axes
    sv = linalg_decomp.svdvals(moveaxis(x, (rows, cols), (-2, -1)))
    out = core.sum(sv, -1) if ord == 'nuc' else (core.max if ord == 2 else core.min)(sv, -1)
    out = expand_dims(out, tuple(sorted(axes)))
  else:
    raise ValueError(f"norm: ord={ord!r} is not a matrix norm; use 'fro', 'nuc', 1, -1, 2, -2, inf or -inf")
  if keepdims: return out
  return Array(out.uop.reshape(tuple(s for i, s in enumerate(out.shape) if i not in axes)))

def __getattr__(name: str):
  raise AttributeError(f"module 'tinyjx.numpy.linalg' (jnp.linalg) has no attribute {name!r}")
