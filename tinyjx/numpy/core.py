"""numpy.core: array conversion, dtype promotion, broadcasting, elementwise math and reductions.

Every function takes arrays or Python scalars, promotes them on JAX's lattice (Python scalars are
weak), broadcasts them numpy-style with RESHAPE/EXPAND, and builds one UOp per primitive. Nothing is
computed here: the result is a lazy `Array`. Other numpy modules build on `asarray`, `promote`,
`broadcast_uops` and `elementwise` from this file.
"""
from __future__ import annotations
import builtins, math
import numpy as np
from tinyjx import dtypes, devices
from tinyjx.array import Array, buffer_uop
from tinyjx.dtypes import DType
from tinyjx.uop import UOp, Ops, ShapeError

ArrayLike = "Array | np.ndarray | bool | int | float | list | tuple"

# --- conversion ---
def _from_host(data: np.ndarray, dt: DType, device=None) -> Array:
  if dt is dtypes.bfloat16: data = dtypes.round_bf16(data.astype(np.float32))
  data = np.ascontiguousarray(data.astype(dt.np, copy=False))
  return Array(buffer_uop(devices.get(device).from_numpy(data, dt)))

def _host_dtype(x) -> DType:
  arr = np.asarray(x)
  if arr.dtype == object: raise TypeError(f"cannot convert {type(x).__name__} with ragged or non-numeric contents to an array")
  if arr.dtype.kind == 'f' and arr.dtype.itemsize == 8 and not isinstance(x, np.ndarray) and not dtypes.x64_enabled():
    return dtypes.float32
  if arr.dtype.kind == 'i' and not isinstance(x, np.ndarray): return dtypes.default_int()
  return dtypes.to_dtype(arr.dtype, "array")

def asarray(x, dtype=None, copy=None, device=None) -> Array:
  """Convert `x` (Array, numpy array, Python scalar or nested list) to an Array, optionally of `dtype`.

  >>> asarray([1, 2]).dtype
  dtypes.int32
  """
  dt = None if dtype is None else dtypes.to_dtype(dtype)
  if isinstance(x, Array): return x if dt is None or dt is x.dtype else astype(x, dt)
  if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
    weak_dt = dtypes.python_scalar_dtype(x)
    if dt is None: return Array(UOp.const(x, weak_dt), weak=True)
    return Array(UOp.const(x, dt))
  if isinstance(x, (list, tuple)) and builtins.any(isinstance(e, Array) for e in _flat(x)):
    from tinyjx.numpy.shape import stack
    return stack([asarray(e, dt) for e in x])
  if isinstance(x, complex) or np.iscomplexobj(x): raise dtypes.DTypeError("complex values are not supported by tinyjx")
  if hasattr(x, '__jax_array__'): return asarray(x.__jax_array__(), dtype)
  target = dt or _host_dtype(x)
  return _from_host(np.asarray(x), target, device)

def _flat(x):
  for e in x:
    if isinstance(e, (list, tuple)): yield from _flat(e)
    else: yield e

def array(x, dtype=None, copy=True, ndmin=0) -> Array:
  """Like `asarray`; `ndmin` prepends size-1 axes."""
  out = asarray(x, dtype)
  if out.ndim < ndmin: out = Array(out.uop.reshape((1,) * (ndmin - out.ndim) + out.shape), out.weak)
  return out

def astype(x, dtype) -> Array:
  """`x` converted to `dtype` (floats to ints truncate toward zero; NaN becomes 0)."""
  x = asarray(x)
  return Array(x.uop.cast(dtypes.to_dtype(dtype)))

# --- promotion and broadcasting ---
def promote(*xs) -> tuple[list[Array], DType, bool]:
  """Arrays for `xs`, all of their joined dtype (JAX's lattice, Python scalars weak)."""
  arrs = [asarray(x) for x in xs]
  dt, weak = dtypes.promote(*[(a.dtype, a.weak) for a in arrs])
  return [a if a.dtype is dt else Array(_cast_scalar_or(a, dt), a.weak) for a in arrs], dt, weak

def _cast_scalar_or(a: Array, dt: DType) -> UOp:
  u = a.uop
  return UOp.const(u.arg[0], dt, u.shape) if u.op is Ops.CONST else u.cast(dt)

def broadcast_shapes(*shapes, names=None) -> tuple:
  """The numpy broadcast of `shapes`; the error names every shape (and argument, given `names`)."""
  nd = builtins.max((len(s) for s in shapes), default=0)
  out = []
  for i in range(-nd, 0):
    dims = {s[i] for s in shapes if len(s) >= -i} - {1}
    if len(dims) > 1:
      shown = ", ".join(f"{n}: {s}" for n, s in zip(names, shapes)) if names else ", ".join(map(str, shapes))
      raise ValueError(f"incompatible shapes for broadcasting: {shown} (axis {i} has sizes {sorted(dims)}); "
                       "align them with reshape or expand_dims")
    out.append(dims.pop() if dims else 1)
  return tuple(out)

def broadcast_uops(arrs: list[Array], names=None) -> list[UOp]:
  shape = broadcast_shapes(*[a.shape for a in arrs], names=names)
  return [_broadcast_uop(a.uop, shape) for a in arrs]

def _broadcast_uop(u: UOp, shape: tuple) -> UOp:
  if u.op is Ops.CONST: return UOp.const(u.arg[0], u.dtype, shape)
  return u.broadcast_to(shape)

def elementwise(op: Ops, *xs, out_dtype: DType | None = None, names=None) -> Array:
  """One elementwise primitive over promoted, broadcast operands."""
  arrs, dt, weak = promote(*xs)
  srcs = broadcast_uops(arrs, names)
  if builtins.all(s.op is Ops.CONST for s in srcs): return _fold(op, srcs, weak)
  return Array(UOp(op, out_dtype or (dtypes.bool_ if op in _CMP else dt), tuple(srcs)), weak and out_dtype is None)

_CMP = {Ops.CMPLT, Ops.CMPLE, Ops.CMPEQ, Ops.CMPNE}

def _fold(op: Ops, srcs: list[UOp], weak: bool) -> Array:
  """Constant-fold an op on CONST operands with the reference interpreter (keeps scalar math out of kernels)."""
  from tinyjx.devices.python import python_rules, _finish
  dt = dtypes.bool_ if op in _CMP else srcs[-1].dtype
  node = UOp(op, dt, tuple(srcs))
  with np.errstate(all='ignore'):
    vals = [np.array(s.arg[0], dtype=s.dtype.np) for s in srcs]
    v = _finish(node, python_rules[op](node, *vals))
  return Array(UOp.const(v.item(), dt, srcs[0].shape), weak and op not in _CMP)

def unary(op: Ops, x, float_only: bool = True) -> Array:
  """A unary primitive; `float_only` ops (exp, sin ...) promote integer and bool inputs to the default float."""
  x = asarray(x)
  if float_only and not dtypes.is_float(x.dtype): x = Array(_cast_scalar_or(x, dtypes.default_float()), x.weak)
  if x.uop.op is Ops.CONST: return _fold(op, [x.uop], x.weak)
  return Array(UOp(op, x.dtype, (x.uop,)), x.weak)

def _float_args(*xs):
  arrs, dt, weak = promote(*xs)
  if not dtypes.is_float(dt): return promote(*[astype(a, dtypes.default_float()) for a in arrs])
  return arrs, dt, weak

def _binary_float(op: Ops, x, y) -> Array:
  arrs, _, _ = _float_args(x, y)
  return elementwise(op, *arrs)

# --- elementwise functions ---
def add(x, y): return elementwise(Ops.ADD, x, y)
def subtract(x, y): return elementwise(Ops.SUB, x, y)
def multiply(x, y): return elementwise(Ops.MUL, x, y)
def maximum(x, y): return elementwise(Ops.MAX, x, y)
def minimum(x, y): return elementwise(Ops.MIN, x, y)
def true_divide(x, y):
  """`x / y`; integer inputs give the default float type, as in numpy and JAX."""
  return _binary_float(Ops.DIV, x, y)
divide = true_divide
def floor_divide(x, y):
  """`x // y`: division rounded toward negative infinity (numpy's semantics, integer and float)."""
  (a, b), dt, weak = promote(x, y)
  if dtypes.is_float(dt): return floor(true_divide(a, b))
  if dtypes.is_bool(dt): raise TypeError("floor_divide is not defined for bool arrays; cast them to int first")
  q = elementwise(Ops.DIV, a, b)
  if dtypes.is_unsigned(dt): return q
  fix = logical_and(not_equal(elementwise(Ops.REM, a, b), 0), not_equal(less(a, 0), less(b, 0)))
  return where(fix, subtract(q, 1), q)
def mod(x, y):
  """`x % y` with the sign of the divisor (numpy's `mod`, JAX's `jnp.remainder`)."""
  (a, b), dt, _ = promote(x, y)
  r = elementwise(Ops.REM, a, b)
  if dtypes.is_unsigned(dt): return r
  fix = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(b, 0)))
  return where(fix, add(r, b), r)
remainder = mod
def fmod(x, y): return elementwise(Ops.REM, x, y)
def divmod(x, y): return floor_divide(x, y), mod(x, y)  # noqa: A001 - numpy's name
def power(x, y):
  """`x ** y`; an integer exponent on a float base stays exact for small Python ints (like `lax.integer_pow`)."""
  if isinstance(y, int) and not isinstance(y, bool) and 0 <= y <= 4 and not isinstance(x, (int, float)):
    x = asarray(x)
    if y == 0: return ones_like(x)
    out = x
    for _ in range(y - 1): out = multiply(out, x)
    return out
  return elementwise(Ops.POW, x, y)
pow = power  # noqa: A001
def float_power(x, y): return power(astype(x, dtypes.default_float()), y)
def negative(x): return unary(Ops.NEG, x, float_only=False)
def positive(x): return asarray(x)
def reciprocal(x): return unary(Ops.RECIP, x, float_only=False)
def exp(x): return unary(Ops.EXP, x)
def exp2(x): return exp(multiply(x, math.log(2.0)))
def expm1(x): return unary(Ops.EXPM1, x)
def log(x): return unary(Ops.LOG, x)
def log2(x): return divide(log(x), math.log(2.0))
def log10(x): return divide(log(x), math.log(10.0))
def log1p(x): return unary(Ops.LOG1P, x)
def sqrt(x): return unary(Ops.SQRT, x)
def rsqrt(x): return reciprocal(sqrt(x))
def cbrt(x):
  x = asarray(x)
  return multiply(sign(x), power(abs(x), 1.0 / 3.0))
def square(x): return multiply(x, x)
def abs(x):  # noqa: A001 - numpy's name
  x = asarray(x)
  return x if dtypes.is_unsigned(x.dtype) or dtypes.is_bool(x.dtype) else unary(Ops.ABS, x, float_only=False)
absolute = abs
def fabs(x): return abs(astype(x, dtypes.default_float()) if not dtypes.is_float(asarray(x).dtype) else x)
def sign(x): return unary(Ops.SIGN, x, float_only=False)
def sin(x): return unary(Ops.SIN, x)
def cos(x): return unary(Ops.COS, x)
def tan(x): return unary(Ops.TAN, x)
def arcsin(x): return unary(Ops.ASIN, x)
def arccos(x): return unary(Ops.ACOS, x)
def arctan(x): return unary(Ops.ATAN, x)
def arctan2(y, x): return _binary_float(Ops.ATAN2, y, x)
def sinh(x): return unary(Ops.SINH, x)
def cosh(x): return unary(Ops.COSH, x)
def tanh(x): return unary(Ops.TANH, x)
def arcsinh(x):
  x = asarray(x)
  return log(add(x, sqrt(add(square(x), 1.0))))
def arccosh(x): return log(add(x, sqrt(subtract(square(x), 1.0))))
def arctanh(x): return multiply(0.5, subtract(log1p(x), log1p(negative(x))))
asin, acos, atan, atan2, asinh, acosh, atanh = arcsin, arccos, arctan, arctan2, arcsinh, arccosh, arctanh
def _rounding(op):
  def f(x):
    x = asarray(x)
    return x if not dtypes.is_float(x.dtype) else unary(op, x)
  return f
floor, ceil, trunc = _rounding(Ops.FLOOR), _rounding(Ops.CEIL), _rounding(Ops.TRUNC)
fix = trunc
def round(x, decimals: int = 0):  # noqa: A001 - numpy's name
  """Round half to even, to `decimals` places (as `jnp.round`)."""
  x = asarray(x)
  if not dtypes.is_float(x.dtype): return x
  if decimals == 0: return unary(Ops.ROUND, x)
  scale = 10.0 ** decimals
  return divide(unary(Ops.ROUND, multiply(x, scale)), scale)
around = round
def rint(x): return round(x)
def clip(x, min=None, max=None, a_min=None, a_max=None):  # noqa: A002 - numpy's names
  """Limit values to [min, max]; either bound may be None."""
  lo, hi = (min if min is not None else a_min), (max if max is not None else a_max)
  x = asarray(x)
  if lo is not None: x = maximum(x, lo)
  if hi is not None: x = minimum(x, hi)
  return x
def where(condition, x=None, y=None):
  """Elementwise `x if condition else y`, broadcasting all three (the one-argument form needs concrete input)."""
  if x is None and y is None:
    from tinyjx.numpy.indexing import nonzero
    return nonzero(condition)
  if x is None or y is None: raise TypeError("where takes one argument or three (condition, x, y), not two")
  c = asarray(condition)
  if c.dtype is not dtypes.bool_: c = not_equal(c, 0)
  (a, b), dt, weak = promote(x, y)
  cu, au, bu = broadcast_uops([c, a, b], names=('condition', 'x', 'y'))
  return Array(UOp(Ops.WHERE, dt, (cu, au, bu)), weak)
def equal(x, y): return elementwise(Ops.CMPEQ, x, y)
def not_equal(x, y): return elementwise(Ops.CMPNE, x, y)
def less(x, y): return elementwise(Ops.CMPLT, x, y)
def less_equal(x, y): return elementwise(Ops.CMPLE, x, y)
def greater(x, y): return elementwise(Ops.CMPLT, y, x)
def greater_equal(x, y): return elementwise(Ops.CMPLE, y, x)
def _to_bool(x):
  x = asarray(x)
  return x if x.dtype is dtypes.bool_ else not_equal(x, 0)
def logical_and(x, y): return elementwise(Ops.AND, _to_bool(x), _to_bool(y))
def logical_or(x, y): return elementwise(Ops.OR, _to_bool(x), _to_bool(y))
def logical_xor(x, y): return elementwise(Ops.XOR, _to_bool(x), _to_bool(y))
def logical_not(x): return unary(Ops.NOT, _to_bool(x), float_only=False)
def _int_or_bool(name, *xs):
  for x in xs:
    a = asarray(x)
    if dtypes.is_float(a.dtype): raise TypeError(f"{name} needs integer or bool arrays, got {a.dtype}")
def bitwise_and(x, y): _int_or_bool('bitwise_and', x, y); return elementwise(Ops.AND, x, y)
def bitwise_or(x, y): _int_or_bool('bitwise_or', x, y); return elementwise(Ops.OR, x, y)
def bitwise_xor(x, y): _int_or_bool('bitwise_xor', x, y); return elementwise(Ops.XOR, x, y)
def invert(x): _int_or_bool('invert', x); return unary(Ops.NOT, x, float_only=False)
bitwise_not = bitwise_invert = invert
def left_shift(x, y): _int_or_bool('left_shift', x, y); return elementwise(Ops.SHL, x, y)
def right_shift(x, y): _int_or_bool('right_shift', x, y); return elementwise(Ops.SHR, x, y)
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
def isnan(x):
  x = asarray(x)
  return not_equal(x, x) if dtypes.is_float(x.dtype) else zeros_like(x, dtype=dtypes.bool_)
def isinf(x):
  x = asarray(x)
  return equal(abs(x), math.inf) if dtypes.is_float(x.dtype) else zeros_like(x, dtype=dtypes.bool_)
def isfinite(x):
  x = asarray(x)
  return logical_not(logical_or(isnan(x), isinf(x))) if dtypes.is_float(x.dtype) else ones_like(x, dtype=dtypes.bool_)
def isposinf(x): return equal(x, math.inf)
def isneginf(x): return equal(x, -math.inf)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
  """Replace NaN by `nan` and infinities by `posinf`/`neginf` (default: the dtype's largest finite values)."""
  x = asarray(x)
  if not dtypes.is_float(x.dtype): return x
  fi = dtypes.finfo(x.dtype)
  x = where(isnan(x), nan, x)
  x = where(equal(x, math.inf), fi.max if posinf is None else posinf, x)
  return where(equal(x, -math.inf), fi.min if neginf is None else neginf, x)
def signbit(x):
  x = asarray(x)
  return less(x, 0) if not dtypes.is_float(x.dtype) else logical_or(less(x, 0), logical_and(equal(x, 0), less(reciprocal(x), 0)))
def copysign(x, y): return where(signbit(y), negative(abs(x)), abs(x))
def heaviside(x, h0): return where(less(x, 0), 0.0, where(equal(x, 0), h0, 1.0))
def hypot(x, y): return sqrt(add(square(x), square(y)))
def deg2rad(x): return multiply(x, math.pi / 180.0)
def rad2deg(x): return multiply(x, 180.0 / math.pi)
radians, degrees = deg2rad, rad2deg
def logaddexp(x, y):
  m = maximum(x, y)
  safe = where(isfinite(m), m, 0.0)
  return add(safe, log(add(exp(subtract(x, safe)), exp(subtract(y, safe)))))
def sinc(x):
  x = asarray(x)
  px = multiply(math.pi, where(equal(x, 0), 1.0, x))
  return where(equal(x, 0), 1.0, divide(sin(px), px))

# --- creation needed by the functions above (the rest live in creation.py) ---
def full(shape, fill_value, dtype=None) -> Array:
  """An array of `shape` filled with `fill_value` (a constant node: nothing is allocated until needed)."""
  shape = _shape_arg(shape)
  if isinstance(fill_value, Array) or isinstance(fill_value, np.ndarray):
    v = asarray(fill_value, dtype)
    return Array(v.uop.broadcast_to(shape))
  dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.python_scalar_dtype(fill_value) \
    if not isinstance(fill_value, np.generic) else dtypes.to_dtype(np.asarray(fill_value).dtype)
  return Array(UOp.const(fill_value, dt, shape))
def zeros(shape, dtype=None) -> Array: return full(shape, 0, dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_float())
def ones(shape, dtype=None) -> Array: return full(shape, 1, dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_float())
def full_like(x, fill_value, dtype=None, shape=None) -> Array:
  x = asarray(x)
  return full(x.shape if shape is None else shape, fill_value, x.dtype if dtype is None else dtype)
def zeros_like(x, dtype=None, shape=None) -> Array: return full_like(x, 0, dtype, shape)
def ones_like(x, dtype=None, shape=None) -> Array: return full_like(x, 1, dtype, shape)

def _shape_arg(shape) -> tuple:
  if isinstance(shape, (int, np.integer)): shape = (int(shape),)
  try:
    shape = tuple(int(operator_index(s)) for s in shape)
  except TypeError:
    raise TypeError(f"shape must be a sequence of Python ints, got {shape!r}") from None
  if builtins.any(s < 0 for s in shape): raise ValueError(f"negative dimension in shape {shape}")
  return shape

def operator_index(s):
  import operator
  return operator.index(s)

# --- reductions ---
def normalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
  """A non-negative axis; the error names the axis and the array's ndim."""
  try:
    axis = operator_index(axis)
  except TypeError:
    raise TypeError(f"{name} must be an int, got {axis!r}") from None
  if not -ndim <= axis < builtins.max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
    raise ValueError(f"{name} {axis} is out of bounds for an array of ndim {ndim} (valid: {-ndim} to {ndim - 1})")
  return axis % ndim if ndim else 0

def normalize_axes(axis, ndim: int) -> tuple:
  """Sorted non-negative axes from None (all), an int or a tuple; duplicates are an error."""
  if axis is None: return tuple(range(ndim))
  axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
  out = tuple(normalize_axis(a, ndim) for a in axes)
  if len(set(out)) != len(out): raise ValueError(f"repeated axis in {axis} for an array of ndim {ndim}")
  return tuple(sorted(out))

def _keep(u: UOp, axes: tuple, shape: tuple) -> UOp:
  return u.reshape(tuple(1 if i in axes else s for i, s in enumerate(shape)))

def _reduce(op: Ops, x, axis, keepdims: bool, dtype=None, where=None, initial=None) -> Array:
  x = asarray(x)
  if dtype is not None: x = astype(x, dtype)
  axes = normalize_axes(axis, x.ndim)
  if where is not None:
    identity = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: -math.inf, Ops.MIN: math.inf}[op]
    if not dtypes.is_float(x.dtype) and op in (Ops.MAX, Ops.MIN):
      ii = dtypes.iinfo(x.dtype) if dtypes.is_int(x.dtype) else None
      identity = (ii.min if op is Ops.MAX else ii.max) if ii else op is Ops.MIN
    x = where_fn(where, x, identity)
  u = x.uop.reduce(op, axes)
  if initial is not None: u = elementwise(op, Array(u), asarray(initial, x.dtype)).uop
  if keepdims: u = _keep(u, axes, x.shape)
  return Array(u)
where_fn = where

def _sum_dtype(x: Array, dtype):
  if dtype is not None: return dtypes.to_dtype(dtype)
  if dtypes.is_bool(x.dtype) or (dtypes.is_int(x.dtype) and x.dtype.itemsize < 4):
    return dtypes.default_int() if not dtypes.is_unsigned(x.dtype) else dtypes.canonicalize(dtypes.uint32)
  return x.dtype

def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
  """Sum over `axis` (None: all); bool and small ints sum in the default int type, as JAX."""
  a = asarray(a)
  return _reduce(Ops.ADD, a, axis, keepdims, _sum_dtype(a, dtype), where, initial)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
  a = asarray(a)
  return _reduce(Ops.MUL, a, axis, keepdims, _sum_dtype(a, dtype), where, initial)
def _empty_check(a: Array, axis, name):
  axes = normalize_axes(axis, a.ndim)
  if builtins.any(a.shape[i] == 0 for i in axes):
    raise ValueError(f"zero-size array to reduction operation {name} which has no identity (shape {a.shape}, "
                     f"axis {axis}); pass initial=")
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
  a = asarray(a)
  if initial is None and where is None: _empty_check(a, axis, 'max')
  return _reduce(Ops.MAX, a, axis, keepdims, None, where, initial)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
  a = asarray(a)
  if initial is None and where is None: _empty_check(a, axis, 'min')
  return _reduce(Ops.MIN, a, axis, keepdims, None, where, initial)
amax, amin = max, min
def any(a, axis=None, out=None, keepdims=False, where=None):  # noqa: A001
  return _reduce(Ops.MAX, _to_bool(a), axis, keepdims, None, where)
def all(a, axis=None, out=None, keepdims=False, where=None):  # noqa: A001
  return _reduce(Ops.MIN, _to_bool(a), axis, keepdims, None, where)
def _count(a: Array, axes: tuple) -> int: return math.prod(a.shape[i] for i in axes)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
  """Arithmetic mean over `axis`; integer inputs give the default float."""
  a = asarray(a)
  if dtype is None and not dtypes.is_float(a.dtype): dtype = dtypes.default_float()
  if dtype is not None: a = astype(a, dtype)
  axes = normalize_axes(axis, a.ndim)
  total = sum(a, axis, keepdims=keepdims, where=where)
  n = sum(broadcast_to_shape(where, a.shape), axis, keepdims=keepdims) if where is not None else _count(a, axes)
  return divide(total, n) if where is not None else divide(total, float(n) if n else math.nan)
def broadcast_to_shape(x, shape): return Array(_broadcast_uop(asarray(x).uop, tuple(shape)))
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
  """Variance with `ddof` (or `correction`) degrees of freedom removed from the count."""
  if correction is not None: ddof = correction
  a = asarray(a)
  if not dtypes.is_float(a.dtype): a = astype(a, dtypes.default_float())
  centered = subtract(a, mean(a, axis, keepdims=True, where=where))
  axes = normalize_axes(axis, a.ndim)
  ss = sum(square(centered), axis, keepdims=keepdims, where=where)
  n = sum(broadcast_to_shape(where, a.shape), axis, keepdims=keepdims) if where is not None else _count(a, axes)
  denom = subtract(n, ddof) if where is not None else builtins.max(n - ddof, 0)
  return divide(ss, denom if where is not None else (float(denom) if denom else 0.0))
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
  return sqrt(var(a, axis, dtype, out, ddof, keepdims, where, correction))

def _arg_extreme(a, axis, keepdims, op: Ops, name: str) -> Array:
  a = asarray(a)
  if axis is None: a, axis = Array(a.uop.reshape((a.size,))), 0
  ax = normalize_axis(axis, a.ndim)
  if a.shape[ax] == 0: raise ValueError(f"attempt to get {name} of an empty sequence (axis {axis}, shape {a.shape})")
  best = _reduce(op, a, ax, True)
  hit = equal(a, best)
  if dtypes.is_float(a.dtype): hit = logical_or(hit, logical_and(isnan(a), isnan(best)))
  n = a.shape[ax]
  idx = Array(UOp(Ops.IOTA, dtypes.int32, (), (a.shape, ax)))
  first = _reduce(Ops.MIN, where(hit, idx, n), ax, keepdims)
  return first
def argmax(a, axis=None, out=None, keepdims=False):
  """Index of the first maximum along `axis` (NaN counts as the maximum, as in numpy and JAX)."""
  return _arg_extreme(a, axis, keepdims, Ops.MAX, 'argmax')
def argmin(a, axis=None, out=None, keepdims=False):
  """Index of the first minimum along `axis` (NaN counts as the minimum, as in numpy and JAX)."""
  return _arg_extreme(a, axis, keepdims, Ops.MIN, 'argmin')

def _cumulative(op: Ops, a, axis, dtype, reverse=False) -> Array:
  a = asarray(a)
  if axis is None: a, axis = Array(a.uop.reshape((a.size,))), 0
  if op is Ops.ADD or op is Ops.MUL: a = astype(a, _sum_dtype(a, dtype))
  ax = normalize_axis(axis, a.ndim)
  return Array(UOp(Ops.CUMULATIVE, a.dtype, (a.uop,), (op, ax, bool(reverse))))
def cumsum(a, axis=None, dtype=None, out=None): return _cumulative(Ops.ADD, a, axis, dtype)
def cumprod(a, axis=None, dtype=None, out=None): return _cumulative(Ops.MUL, a, axis, dtype)
cumulative_sum, cumulative_prod = cumsum, cumprod
