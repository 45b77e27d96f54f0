"""tinyjx.numpy: the `jax.numpy` subset, building lazy UOp graphs.

>>> import tinyjx.numpy as jnp
>>> float(jnp.sum(jnp.arange(4.0) * 2))
12.0

Modules: `core` (conversion, promotion, elementwise, reductions), `creation`, `shape`, `indexing`,
`linalg`. This file re-exports them and registers the Array operators and methods with the core.
"""
import builtins as _builtins
from tinyjx import array as _array, dtypes as _dtypes
from tinyjx.array import Array
from tinyjx.numpy.core import *  # noqa: F401,F403
from tinyjx.numpy.creation import *  # noqa: F401,F403
from tinyjx.numpy.shape import *  # noqa: F401,F403
from tinyjx.numpy.shape import _method_reshape, _method_transpose, _method_flatten  # noqa: F401
from tinyjx.numpy.indexing import *  # noqa: F401,F403
from tinyjx.numpy.linalg import *  # noqa: F401,F403
from tinyjx.numpy.core import abs, all, any, max, min, round, sum, pow, divmod  # noqa: F401,A004
from tinyjx.dtypes import (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16,  # noqa
                           float32, float64, finfo, iinfo, promote_types)
from tinyjx.dtypes import DType as dtype  # noqa: F401

ndarray = Array
pi, e, inf, nan, euler_gamma = 3.141592653589793, 2.718281828459045, float('inf'), float('nan'), 0.5772156649015329
newaxis = None
bool = bool_  # noqa: A001
int_, float_, uint = int32, float32, uint32

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
  if a is int or a is float: return (_dtypes.default_int() if a is int else _dtypes.default_float()), True
  if isinstance(a, (_builtins.bool, int, float)) and not isinstance(a, _np.generic):
    return _dtypes.python_scalar_dtype(a), not isinstance(a, _builtins.bool)
  if isinstance(a, (_np.ndarray, _np.generic)): return _dtypes.to_dtype(a.dtype), False
  if isinstance(getattr(a, 'dtype', None), (_dtypes.DType, _np.dtype)): return _dtypes.to_dtype(a.dtype), False
  return _dtypes.to_dtype(a), False

def issubdtype(a, b) -> "builtins.bool":
  """Whether dtype `a` is of kind `b` (jnp.floating, jnp.integer, ... or a dtype)."""
  a = _dtypes.to_dtype(a)
  kinds = {floating: 'f', inexact: 'f', integer: 'iu', signedinteger: 'i', unsignedinteger: 'u', bool_: 'b',
           number: 'iuf'}
  if b in kinds: return a.kind in kinds[b]
  return a is _dtypes.to_dtype(b)

class floating: pass
class inexact: pass
class integer: pass
class signedinteger: pass
class unsignedinteger: pass
class number: pass

class ShapeDtypeStruct:
  """A shape and dtype without a value (what `jax.eval_shape` returns)."""
  def __init__(self, shape, dtype):
    self.shape, self.dtype = tuple(shape), _dtypes.to_dtype(dtype)
  def __repr__(self): return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype})"
  def __eq__(self, o): return isinstance(o, ShapeDtypeStruct) and (o.shape, o.dtype) == (self.shape, self.dtype)
  def __hash__(self): return hash((self.shape, self.dtype))

import sys as _sys
_array.api = _sys.modules[__name__]
