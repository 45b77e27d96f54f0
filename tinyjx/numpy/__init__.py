"""tinyjx.numpy: the `jax.numpy` subset, building lazy UOp graphs.

>>> import tinyjx.numpy as jnp
>>> float(jnp.sum(jnp.arange(4.0) * 2))
12.0

Modules: `core` (conversion, promotion, elementwise, reductions), `creation`, `shape`, `indexing`,
`products` (dot, matmul, einsum), gathered in `base`; `linalg` (jnp.linalg), `signal`. This file re-exports
them, checks the arguments of the public functions, and registers itself with the array layer.
"""
from tinyjx import array as _array, dtypes as _dtypes
from tinyjx.numpy.base import *  # noqa: F401,F403
from tinyjx.numpy.base import abs, all, any, max, min, round, sum, pow, divmod, bool  # noqa: F401,A004
from tinyjx.numpy.shape import method_reshape as _reshape, method_transpose as _transpose, method_flatten as _flatten
from tinyjx.numpy.indexing import getitem as _getitem, IndexUpdateHelper as _IndexUpdateHelper   # x[i] and x.at[i]
from tinyjx.numpy.core import scalar_type_call as _scalar_type_call, check_arraylike as _check_arraylike
from tinyjx.numpy import linalg  # noqa: F401  (jnp.linalg)
from tinyjx.numpy import fft  # noqa: F401  (jnp.fft)
from tinyjx.numpy.signal import convolve, correlate  # noqa: F401

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
_array.register_numpy(_this_module, _getitem, _IndexUpdateHelper,
                      {'reshape': _reshape, 'transpose': _transpose, 'flatten': _flatten})
_dtypes.register_scalar_constructor(_scalar_type_call)
