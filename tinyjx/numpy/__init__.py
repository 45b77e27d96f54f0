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
from tinyjx.tracing import ShapeDtypeStruct  # noqa: F401  (jax.ShapeDtypeStruct, also jnp's)
from tinyjx.numpy.core import *  # noqa: F401,F403
from tinyjx.numpy.creation import *  # noqa: F401,F403
from tinyjx.numpy.shape import *  # noqa: F401,F403
from tinyjx.numpy.shape import _method_reshape, _method_transpose, _method_flatten  # noqa: F401
from tinyjx.numpy.indexing import *  # noqa: F401,F403
from tinyjx.numpy.linalg import *  # noqa: F401,F403
from tinyjx.numpy.signal import convolve, correlate  # noqa: F401
from tinyjx.numpy.core import abs, all, any, max, min, round, sum, pow, divmod  # noqa: F401,A004
from tinyjx.numpy.core import scalar_type_call as _scalar_type_call, check_arraylike as _check_arraylike
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

# --- JAX's argument check: array parameters take arrays or scalars, not lists (see core.check_arraylike) ---
# The public functions are wrapped here, so the modules' own calls to each other pay nothing. Parameters are
# recognized by name: one array each, or (_SEQUENCES) a sequence or *args of arrays.
_ARRAYS = frozenset('x y a b v m A arr ary array ar x1 x2 h0 condition values indices prototype repeats fill_value '
                    'min max a_min a_max where'.split())
_SEQUENCES = frozenset('arrays tup keys args arys xi operands'.split())
_LISTS_ALLOWED = frozenset('array asarray arange linspace eye identity tri zeros ones empty broadcast_shapes '
                           'result_type issubdtype promote_types shape ndim size array_equal array_equiv '
                           'einsum'.split())  # einsum: its interleaved form passes index lists; checked below

def _array_slots(fn) -> list:
  import inspect
  slots = []
  for i, p in enumerate(inspect.signature(fn).parameters.values()):
    star = p.kind is inspect.Parameter.VAR_POSITIONAL
    if p.name in _ARRAYS or p.name in _SEQUENCES: slots.append((i, p.name, star, p.name in _SEQUENCES))
  return slots

def _checking_arraylike(fn):
  """`fn` with its array arguments checked first, as JAX checks them."""
  import functools
  slots, name = _array_slots(fn), fn.__name__
  @functools.wraps(fn)
  def checked(*args, **kwargs):
    found = []
    for i, param, star, seq in slots:
      if star: found.extend(args[i:])
      elif i < len(args) or param in kwargs:
        v = args[i] if i < len(args) else kwargs[param]
        if seq and isinstance(v, (list, tuple)): found.extend(v)
        else: found.append(v)
    _check_arraylike(name, *found)
    return fn(*args, **kwargs)
  return checked

def _einsum_checked(fn):
  import functools
  @functools.wraps(fn)
  def einsum(subscripts, *operands, **kwargs):
    if isinstance(subscripts, str): _check_arraylike('einsum', *operands)
    return fn(subscripts, *operands, **kwargs)
  return einsum

def _wrap_public_functions() -> None:
  import types
  scope = globals()
  for n, f in list(scope.items()):
    if isinstance(f, types.FunctionType) and not n.startswith('_') and n not in _LISTS_ALLOWED and _array_slots(f) \
       and f.__module__.startswith('tinyjx.numpy.'):
      scope[n] = _checking_arraylike(f)
  scope['einsum'] = _einsum_checked(einsum)

_wrap_public_functions()

from tinyjx import numpy as _this_module   # this package, complete now
_array.register_numpy(_this_module)
_dtypes.register_scalar_constructor(_scalar_type_call)
