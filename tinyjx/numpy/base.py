"""numpy.base: every `jnp` function and name that does not need lax (core, creation, shape, indexing, products,
the dtypes), as one namespace.

The modules lax is built from, and that jnp's own package builds on in turn (lax_conv, lax.linalg,
linalg_decomp, collectives, jit), import this namespace as `jnp`: importing the package `tinyjx.numpy` would
close a circle, since it also holds jnp.linalg's decompositions and signal's convolutions, which use lax. The
package re-exports everything here, with the argument check of public functions added.
"""
import builtins as _builtins
from tinyjx import array as _array, dtypes as _dtypes
from tinyjx.array import Array
from tinyjx.tracing import ShapeDtypeStruct  # noqa: F401  (jax.ShapeDtypeStruct, also jnp's)
from tinyjx.numpy.core import *  # noqa: F401,F403
from tinyjx.numpy.creation import *  # noqa: F401,F403
from tinyjx.numpy.shape import *  # noqa: F401,F403
from tinyjx.numpy.indexing import *  # noqa: F401,F403
from tinyjx.numpy.products import *  # noqa: F401,F403
from tinyjx.numpy.core import abs, all, any, max, min, round, sum, pow, divmod  # noqa: F401,A004
from tinyjx.dtypes import (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16,  # noqa
                           float32, float64, complex64, complex128, finfo, iinfo, promote_types)
from tinyjx.dtypes import DType as dtype  # noqa: F401

ndarray = Array
pi, e, inf, nan, euler_gamma = 3.141592653589793, 2.718281828459045, float('inf'), float('nan'), 0.5772156649015329
newaxis = None
bool = bool_  # noqa: A001
int_, float_, uint, complex_ = int32, float32, uint32, complex64

def result_type(*args):
  """The dtype `args` promote to (arrays, dtypes or Python scalars; Python scalars and `int`/`float` are weak).

  >>> result_type(int8, 1.0)
  dtypes.float32
  """
  if not args: raise ValueError("result_type: at least one array or dtype is required")
  return _dtypes.promote(*[_typed(a) for a in args])[0]

def _typed(a) -> tuple:
  """(dtype, weak) of one result_type argument."""
  import numpy as _np
  if isinstance(a, Array): return a.dtype, a.weak
  if a is int or a is float or a is complex: return _dtypes.to_dtype(a), True
  if isinstance(a, (_builtins.bool, int, float, complex)) and not isinstance(a, _np.generic):
    return _dtypes.python_scalar_dtype(a), not isinstance(a, _builtins.bool)
  if isinstance(a, (_np.ndarray, _np.generic)): return _dtypes.to_dtype(a.dtype), False
  if isinstance(getattr(a, 'dtype', None), (_dtypes.DType, _np.dtype)): return _dtypes.to_dtype(a.dtype), False
  return _dtypes.to_dtype(a), False

def issubdtype(a, b) -> "builtins.bool":
  """Whether dtype `a` is of kind `b` (jnp.floating, jnp.integer, ... or a dtype)."""
  a = _dtypes.to_dtype(a)
  kinds = {floating: 'f', complexfloating: 'c', inexact: 'fc', integer: 'iu', signedinteger: 'i',
           unsignedinteger: 'u', bool_: 'b', number: 'iufc'}
  if b in kinds: return a.kind in kinds[b]
  return a is _dtypes.to_dtype(b)

class floating: pass
class complexfloating: pass
class inexact: pass
class integer: pass
class signedinteger: pass
class unsignedinteger: pass
class number: pass
