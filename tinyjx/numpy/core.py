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
from tinyjx.uop import UOp, Ops, GroupOp, ShapeError, normalize_axis, jnp_name

ArrayLike = "Array | np.ndarray | bool | int | float | list | tuple"

__all__ = [
  'asarray', 'array', 'astype', 'broadcast_shapes',
  'add', 'subtract', 'multiply', 'maximum', 'minimum', 'true_divide', 'divide', 'floor_divide', 'mod', 'remainder',
  'fmod', 'divmod', 'power', 'pow', 'float_power', 'negative', 'positive', 'reciprocal', 'exp', 'exp2', 'expm1', 'log',
  'log2', 'log10', 'log1p', 'sqrt', 'rsqrt', 'cbrt', 'square', 'abs', 'absolute', 'fabs', 'sign', 'sin', 'cos', 'tan',
  'arcsin', 'arccos', 'arctan', 'arctan2', 'sinh', 'cosh', 'tanh', 'arcsinh', 'arccosh', 'arctanh', 'asin', 'acos',
  'atan', 'atan2', 'asinh', 'acosh', 'atanh', 'floor', 'ceil', 'trunc', 'fix', 'round', 'around', 'rint', 'clip',
  'where', 'equal', 'not_equal', 'less', 'less_equal', 'greater', 'greater_equal', 'logical_and', 'logical_or',
  'logical_xor', 'logical_not', 'bitwise_and', 'bitwise_or', 'bitwise_xor', 'invert', 'bitwise_not', 'bitwise_invert',
  'left_shift', 'right_shift', 'bitwise_left_shift', 'bitwise_right_shift', 'isnan', 'isinf', 'isfinite', 'isposinf',
  'isneginf', 'nan_to_num', 'signbit', 'copysign', 'nextafter', 'heaviside', 'hypot', 'deg2rad', 'rad2deg', 'radians', 'degrees',
  'logaddexp', 'sinc', 'full', 'zeros', 'ones', 'full_like', 'zeros_like', 'ones_like',
  'sum', 'prod', 'max', 'min', 'amax', 'amin', 'any', 'all', 'mean', 'var', 'std', 'argmax', 'argmin', 'cumsum',
  'cumprod', 'cumulative_sum', 'cumulative_prod', 'isclose', 'allclose', 'array_equal', 'array_equiv',
  'real', 'imag', 'conj', 'conjugate', 'angle', 'iscomplexobj', 'isrealobj', 'iscomplex', 'isreal',
]

# --- conversion ---
def _from_host(data: np.ndarray, dt: DType, device=None) -> Array:
  if dt is dtypes.bfloat16: data = dtypes.round_bf16(data.astype(np.float32))
  data = np.array(data, dtype=dt.np, order='C', copy=True)   # a copy: the caller may mutate its array later
  return Array(buffer_uop(devices.get(device).from_numpy(data, dt)))

def _host_dtype(x) -> DType:
  """The dtype of host data: numpy's (canonicalized), but Python ints in lists become the default int."""
  arr = np.asarray(x)
  if arr.dtype == object:
    raise TypeError(f"cannot convert {type(x).__name__} with ragged or non-numeric contents to an array")
  if isinstance(x, (list, tuple)) and arr.dtype.kind in 'iu':
    dt = dtypes.default_int()
    if arr.size: _check_int_range(int(arr.min()), dt), _check_int_range(int(arr.max()), dt)
    return dt
  return dtypes.to_dtype(arr.dtype, "array")

def _holds_none(x) -> bool:
  return x is None or (isinstance(x, (list, tuple)) and builtins.any(_holds_none(v) for v in x))

def _number_fits(v, dt: DType) -> None:
  """A Python number given for an integer dtype (`jnp.asarray(3e10, dtype=jnp.int32)`, `jnp.uint8(300)`) must fit
  it, a float once truncated, as numpy (and so JAX) require; a cast of an array saturates instead."""
  if isinstance(v, float):
    if math.isnan(v): raise ValueError(f"cannot convert float NaN to {dt}: an integer type has no NaN")
    if math.isinf(v): raise OverflowError(f"cannot convert float {v} to {dt}")
  ii = dtypes.iinfo(dt)
  if not ii.min <= math.trunc(v) <= ii.max:
    raise OverflowError(f"Python {type(v).__name__} {v!r} out of bounds for {dt} (range {ii.min} to {ii.max}); use "
                        f"a wider type, clip it first, or convert an array with .astype({dt.name}), which saturates")

def _check_int_range(v: int, dt: DType) -> None:
  ii = dtypes.iinfo(dt)
  if not ii.min <= v <= ii.max: raise OverflowError(f"Python int {v} is too large to convert to {dt}; pass dtype= "
                                                    "or enable 64-bit mode (jax_enable_x64)")

def asarray(x, dtype=None, copy=None, device=None) -> Array:
  """Convert `x` (Array, numpy array, Python scalar or nested list) to an Array, optionally of `dtype`.

  >>> asarray([1, 2]).dtype
  dtypes.int32
  """
  dt = None if dtype is None else dtypes.to_dtype(dtype)
  if isinstance(x, Array): return x if dt is None or dt is x.dtype else astype(x, dt)
  if x is None: raise ValueError("None is not a valid value for jnp.array or jnp.asarray; pass a number, a list or an array")
  if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
    weak_dt = dtypes.python_scalar_dtype(x)
    if dt is None and isinstance(x, int) and not isinstance(x, bool): _check_int_range(x, weak_dt)
    if dt is None: return Array(UOp.const(x, weak_dt), weak=not isinstance(x, bool))
    if dt.kind in 'iu' and not isinstance(x, bool): _number_fits(x, dt)
    return Array(UOp.const(x, dt))
  if isinstance(x, (list, tuple)) and builtins.any(isinstance(e, Array) for e in _flat(x)):
    arrs = [asarray(e, dt) for e in x]
    if len({a.shape for a in arrs}) != 1:
      raise ValueError(f"array: the elements of a list must have one shape, got {[a.shape for a in arrs]}")
    arrs, joined_dt, _ = promote(*arrs)
    return Array(join_along([a.uop.cast(joined_dt).reshape((1,) + a.shape) for a in arrs], 0))
  try:
    if isinstance(x, np.generic) and x.dtype.kind in 'biufc': return Array(UOp.const(x.item(), dt or _host_dtype(x)))
    if hasattr(x, '__jax_array__'): return asarray(x.__jax_array__(), dtype)
    target = dt or _host_dtype(x)
    if isinstance(x, (list, tuple)) and target.kind in 'iu':   # Python floats in a list: numpy's checks, as JAX
      return _from_host(np.asarray(x, dtype=target.np), target, device)
    return _from_host(np.asarray(x), target, device)
  except (TypeError, ValueError):   # JAX names a None first, even in a ragged list; looked for only on failure
    if isinstance(x, (list, tuple)) and _holds_none(x):
      raise ValueError("None is not a valid value for jnp.array; the list holds a None (pass numbers or "
                       "arrays)") from None
    raise

def scalar_type_call(x, dtype: DType) -> Array:
  """`jnp.float32(x)`, `jnp.int32(x)`, ...: `x` (a scalar, nested list or array) as a strongly typed array of
  `dtype`; floats to ints truncate toward zero, and a Python int outside the type's range is an error, as in JAX.

  >>> scalar_type_call(3.7, dtypes.int32).tolist(), scalar_type_call([1, 2], dtypes.float32).tolist()
  (3, [1.0, 2.0])
  """
  dt = dtypes.to_dtype(dtype)
  if x is None: raise ValueError(f"None is not a valid value for {dt}(...); pass a number, a list or an array")
  if isinstance(x, float) and math.isnan(x) and not dtypes.is_float(dt):
    raise ValueError(f"cannot convert float NaN to {dt}: an integer or bool type has no NaN")
  out = asarray(x, dt)   # (a Python number that does not fit an integer type is asarray's error)
  return Array(out.uop, False)

def check_arraylike(fn_name: str, *args) -> None:
  """JAX's argument rule for most jnp functions: arrays, numpy arrays and scalars are accepted, lists and tuples are
  not (converting a long list implicitly is slow and often a bug). `jnp.array`, `jnp.asarray` and the creation
  functions convert lists; call one of them first.

  >>> check_arraylike('sum', asarray([1, 2]), 3.0)
  >>> check_arraylike('sum', [1, 2])  # doctest: +ELLIPSIS
  Traceback (most recent call last):
  TypeError: sum requires ndarray or scalar arguments, got <class 'list'> at position 0. Convert it with ...
  """
  for i, x in enumerate(args):
    if isinstance(x, (list, tuple)):
      raise TypeError(f"{fn_name} requires ndarray or scalar arguments, got {type(x)} at position {i}. Convert it "
                      "with jnp.asarray(...) first.")

def _flat(x):
  for e in x:
    if isinstance(e, (list, tuple)): yield from _flat(e)
    else: yield e

def array(x, dtype=None, copy=True, ndmin=0) -> Array:
  """Like `asarray`; `ndmin` prepends size-1 axes."""
  out = asarray(x, dtype)
  if out.ndim < ndmin: out = Array(out.uop.reshape((1,) * (ndmin - out.ndim) + out.shape), out.weak)
  return out

def astype(x, dtype, copy: bool = False, device=None) -> Array:
  """`x` converted to `dtype`: floats to ints truncate toward zero and saturate, NaN becomes 0 (as XLA).

  >>> astype(asarray([1.7, -1.7]), 'int32').tolist()
  [1, -1]
  """
  x = asarray(x)
  return Array(_cast_scalar_or(x, dtypes.to_dtype(dtype)))

# --- promotion and broadcasting ---
def promote(*xs) -> tuple[list[Array], DType, bool]:
  """Arrays for `xs`, all of their joined dtype (JAX's lattice, Python scalars weak).

  >>> promote(asarray([True]), 1)[1:]    # bool with a weak int is the default int, still weak, as in JAX
  (dtypes.int32, True)
  """
  arrs = [asarray(x) for x in xs]
  dt, weak = dtypes.promote(*[(a.dtype, a.weak) for a in arrs])
  return [a if (a.dtype, a.weak) == (dt, weak) else Array(_cast_scalar_or(a, dt), weak) for a in arrs], dt, weak

def _cast_scalar_or(a: Array, dt: DType) -> UOp:
  u = a.uop
  return UOp.const(u.arg[0], dt, u.shape) if u.op is Ops.CONST else u.cast(dt)

def broadcast_shapes(*shapes, names=None, op: str | None = None) -> tuple:
  """The numpy broadcast of `shapes`; the error names every shape (and argument, given `names`).

  >>> broadcast_shapes((2, 1), (3,))
  (2, 3)
  """
  shapes = [tuple(s) for s in shapes]
  nd = builtins.max((len(s) for s in shapes), default=0)
  out = []
  for i in range(-nd, 0):
    dims = {s[i] for s in shapes if len(s) >= -i} - {1}
    if len(dims) > 1:
      shown = ", ".join(f"{n}: {s}" for n, s in zip(names, shapes)) if names else ", ".join(map(str, shapes))
      raise ValueError(f"{op + ': ' if op else ''}incompatible shapes for broadcasting: {shown} (axis {i} has sizes "
                       f"{sorted(dims)}); "
                       "align them with reshape or expand_dims")
    out.append(dims.pop() if dims else 1)
  return tuple(out)

def broadcast_uops(arrs: list[Array], names=None, op: str | None = None) -> list[UOp]:
  shape = broadcast_shapes(*[a.shape for a in arrs], names=names, op=op)
  return [_broadcast_uop(a.uop, shape) for a in arrs]

def _broadcast_uop(u: UOp, shape: tuple) -> UOp:
  if u.op is Ops.CONST: return UOp.const(u.arg[0], u.dtype, shape)
  return u.broadcast_to(shape)

def no_complex(name: str, dt: DType, why: str = "it is not defined for complex numbers") -> None:
  """JAX's TypeError for an op that refuses complex operands (an ordering, a rounding, ...)."""
  if dtypes.is_complex(dt):
    raise TypeError(f"{name} does not accept dtype {dt}: {why}; apply it to jnp.real(x), jnp.imag(x) or jnp.abs(x)")

_UNORDERED = "complex numbers have no order"

def elementwise(op: Ops, *xs, out_dtype: DType | None = None, names=None, name: str | None = None) -> Array:
  """One elementwise primitive over promoted, broadcast operands; errors name `name` (default: the op's jnp name)."""
  arrs, dt, weak = promote(*xs)
  if op not in GroupOp.AcceptsComplex: no_complex(name or jnp_name(op), dt, _UNORDERED if op in GroupOp.Comparison or
                                             op in (Ops.MAX, Ops.MIN) else "it is not defined for complex numbers")
  srcs = broadcast_uops(arrs, names, name or jnp_name(op))
  if builtins.all(s.op is Ops.CONST for s in srcs): return _fold(op, srcs, weak)
  out = out_dtype or (dtypes.bool_ if op in GroupOp.Comparison else dt)
  return Array(UOp(op, out, tuple(srcs)), weak and out_dtype is None)

def _fold(op: Ops, srcs: list[UOp], weak: bool) -> Array:
  """Constant-fold an op on CONST operands with the reference interpreter (keeps scalar math out of kernels)."""
  from tinyjx.devices.python import evaluate_node
  dt = dtypes.bool_ if op in GroupOp.Comparison else srcs[-1].dtype
  node = UOp(op, dt, tuple(srcs))
  with np.errstate(all='ignore'):
    v = evaluate_node(node, *[np.array(s.arg[0], dtype=s.dtype.np) for s in srcs])
  return Array(UOp.const(v.item(), dt, srcs[0].shape), weak)   # a comparison of weak operands is weak, as in JAX

def unary(op: Ops, x) -> Array:
  """A unary primitive; ops in `GroupOp.FloatOnly` (exp, sin ...) promote integer and bool inputs to the default
  float. On a complex `x`, the functions of `COMPLEX_COMPOSED` are formulas in exp, log, sin and cos."""
  x = asarray(x)
  if op in GroupOp.FloatOnly: x = promote_inexact(x)[0]
  if dtypes.is_complex(x.dtype) and op in COMPLEX_COMPOSED: return COMPLEX_COMPOSED[op](x)
  if op not in GroupOp.AcceptsComplex: no_complex(jnp_name(op), x.dtype)
  if x.uop.op is Ops.CONST: return _fold(op, [x.uop], x.weak)
  return Array(UOp(op, x.dtype, (x.uop,)), x.weak)

def _complex_sinh(z): return multiply(0.5, subtract(exp(z), exp(negative(z))))
def _complex_cosh(z): return multiply(0.5, add(exp(z), exp(negative(z))))

def _complex_expm1(z):
  """exp(z) - 1 accurate near 0: its real part e^x cos y - 1 is expm1(x) cos y - 2 sin(y/2)^2."""
  x, y = real_part(z), imag_part(z)
  s = sin(multiply(y, 0.5))
  return from_parts(subtract(multiply(expm1(x), cos(y)), multiply(2.0, multiply(s, s))), multiply(exp(x), sin(y)))

def _complex_log1p(z):
  """log(1 + z) accurate near 0: log|1 + z| is log1p(x (x + 2) + y^2) / 2 there (log(1 + z) itself further out).
  1 is added to the real part alone, so a -0.0 imaginary part keeps its sign (the side of the branch cut, as C99)."""
  x, y = real_part(z), imag_part(z)
  near = less(abs(z), 0.5)
  sx, sy = where(near, x, 0.0), where(near, y, 0.0)   # the other branch sees harmless values (finite gradients)
  small = from_parts(multiply(0.5, log1p(add(multiply(sx, add(sx, 2.0)), multiply(sy, sy)))), arctan2(sy, add(sx, 1.0)))
  far = log(from_parts(add(where(near, 0.0, x), 1.0), where(near, 0.0, y)))
  return where(near, small, far)

def _halved(z):
  """z / 2 part by part (a complex product with 0.5 + 0j would turn an infinite part's partner into NaN)."""
  return from_parts(multiply(real_part(z), 0.5), multiply(imag_part(z), 0.5))

def _times_i(z, sign: int = 1):
  """i z (or -i z for sign -1), exactly: the parts swap and one changes sign."""
  x, y = real_part(z), imag_part(z)
  return from_parts(negative(y), x) if sign == 1 else from_parts(y, negative(x))

def _complex_arcsinh(z):
  """log(z + s), s = sqrt(z + i) sqrt(z - i) (the root of z^2 + 1 with a real part >= 0), on the right half-plane,
  as log1p(z + z^2 / (1 + s)) (accurate near 0); odd symmetry on the left (by the sign bit: -0.0 is left), where
  the sum would cancel. The sides of the branch cuts are C99's and JAX's."""
  flip = signbit(real_part(z))
  w = where(flip, negative(z), z)
  x, y = real_part(w), imag_part(w)
  s = multiply(sqrt(from_parts(x, add(y, 1.0))), sqrt(from_parts(x, subtract(y, 1.0))))
  r = _complex_log1p(add(w, divide(multiply(w, w), add(s, 1.0))))
  return where(flip, negative(r), r)

def _complex_arccosh(z):
  """log(z + sqrt(z + 1) sqrt(z - 1)), written with log1p for accuracy near z = 1, on the upper half-plane; the
  lower one (a -0.0 imaginary part included) by conjugate symmetry, so the cut's sides are C99's."""
  flip = signbit(imag_part(z))
  w = where(flip, conj(z), z)
  x, y = real_part(w), imag_part(w)
  below, above = from_parts(subtract(x, 1.0), y), from_parts(add(x, 1.0), y)
  r = _complex_log1p(add(below, multiply(sqrt(above), sqrt(below))))
  return where(flip, conj(r), r)

def _complex_arcsin(z): return _times_i(_complex_arcsinh(_times_i(z)), -1)        # -i asinh(i z)
def _complex_arctanh(z): return _halved(subtract(_complex_log1p(z), _complex_log1p(negative(z))))

# complex forms of unary functions that are no primitive on complex operands (the split lowering has no rule for
# them): compositions of the ones that are, so they lower and differentiate with no rules of their own
COMPLEX_COMPOSED = {
  Ops.TAN: lambda z: divide(sin(z), cos(z)), Ops.SINH: _complex_sinh, Ops.COSH: _complex_cosh,
  Ops.TANH: lambda z: divide(_complex_sinh(z), _complex_cosh(z)), Ops.EXPM1: _complex_expm1,
  Ops.LOG1P: _complex_log1p, Ops.RECIP: lambda z: divide(1, z), Ops.ASIN: _complex_arcsin,
  Ops.ACOS: lambda z: subtract(math.pi / 2, _complex_arcsin(z)),
  Ops.ATAN: lambda z: _times_i(_complex_arctanh(_times_i(z)), -1),                  # -i atanh(i z)
}

def promote_inexact(*xs) -> list[Array]:
  """`xs` promoted together and then to a float type (ints and bool become the default float); weakness kept."""
  arrs, dt, weak = promote(*xs)
  if dtypes.is_inexact(dt): return arrs
  fdt = dtypes.default_float()
  return [Array(_cast_scalar_or(a, fdt), weak) for a in arrs]

def _numeric(*xs) -> list[Array]:
  """`xs` promoted together, with bool becoming the default int (JAX's promote_args_numeric)."""
  arrs, dt, weak = promote(*xs)
  if not dtypes.is_bool(dt): return arrs
  return [Array(_cast_scalar_or(a, dtypes.default_int()), weak) for a in arrs]

def _no_bool(name: str, *xs) -> None:
  for x in xs:
    if dtypes.is_bool(asarray(x).dtype):
      raise TypeError(f"{name} does not accept bool arrays; cast with .astype(int) first (or use logical_not / "
                      "logical_xor for booleans)")

def _binary_float(op: Ops, x, y) -> Array: return elementwise(op, *promote_inexact(x, y))

# --- elementwise functions ---
def add(x, y):
  """`x + y`, broadcasting; bool + bool is logical or.

  >>> add(asarray([1, 2]), 1).tolist()
  [2, 3]
  """
  return elementwise(Ops.ADD, x, y)
def subtract(x, y):
  """`x - y`. Bool operands promote first (`b - 1` is int32, as in JAX); only bool minus bool is refused."""
  (a, b), dt, _ = promote(x, y)
  if dtypes.is_bool(dt):
    raise TypeError(f"subtract does not accept bool operands (x: {a.dtype}{list(a.shape)}, y: {b.dtype}{list(b.shape)}); "
                    "use logical_xor(x, y) for booleans, or cast one side with .astype(int) first")
  return elementwise(Ops.SUB, a, b)
def multiply(x, y): return elementwise(Ops.MUL, x, y)
def maximum(x, y): return elementwise(Ops.MAX, x, y)
def minimum(x, y): return elementwise(Ops.MIN, x, y)
def true_divide(x, y):
  """`x / y`; integer inputs give the default float type, as in numpy and JAX."""
  return _binary_float(Ops.DIV, x, y)
divide = true_divide
def _sign_differs(a, b): return not_equal(sign(a), sign(b))
def _float_divmod(a: Array, b: Array) -> tuple[Array, Array]:
  """Float floor division and modulo from the C remainder, corrected like CPython's float_divmod (JAX's rule)."""
  m = elementwise(Ops.REM, a, b, name='floor_divide')
  exact = where(equal(b, 0), a, subtract(a, m))
  q = elementwise(Ops.DIV, exact, b)
  fix = logical_and(not_equal(m, 0), _sign_differs(b, m))
  return unary(Ops.ROUND, where(fix, subtract(q, 1), q)), where(fix, add(m, b), m)
def floor_divide(x, y):
  """`x // y`: division rounded toward negative infinity (integers and floats, as `jnp.floor_divide`).

  >>> floor_divide(asarray([7, -7]), 2).tolist()
  [3, -4]
  """
  a, b = _numeric(x, y)
  no_complex('floor_divide', a.dtype, _UNORDERED)
  if dtypes.is_float(a.dtype): return _float_divmod(a, b)[0]
  q = elementwise(Ops.DIV, a, b, name='floor_divide')
  if dtypes.is_unsigned(a.dtype): return q
  fix = logical_and(_sign_differs(a, b), not_equal(elementwise(Ops.REM, a, b), 0))
  return where(fix, subtract(q, 1), q)
def mod(x, y):
  """`x % y` with the sign of the divisor (numpy's `mod`, JAX's `jnp.remainder`); an integer `x % 0` is 0.

  >>> mod(asarray([7, -7]), 3).tolist()
  [1, 2]
  """
  a, b = _numeric(x, y)
  no_complex('remainder', a.dtype, _UNORDERED)
  if dtypes.is_int(b.dtype): b = where(equal(b, 0), ones_like(b), b)
  r = elementwise(Ops.REM, a, b, name='remainder')
  if dtypes.is_unsigned(a.dtype): return r
  fix = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(b, 0)))
  return where(fix, add(r, b), r)
remainder = mod
def fmod(x, y):
  """The C remainder `x - trunc(x / y) * y`, with the sign of `x`."""
  a, b = _numeric(x, y)
  if dtypes.is_int(b.dtype): b = where(equal(b, 0), ones_like(b), b)
  return elementwise(Ops.REM, a, b)
def divmod(x, y): return floor_divide(x, y), mod(x, y)  # noqa: A001 - numpy's name
def power(x, y):
  """`x ** y`. A concrete Python int exponent keeps the base's dtype (like `lax.integer_pow`); small ones are exact
  products, and a negative one on an integer array is a TypeError, as in JAX. Integer bases with negative array
  exponents give 0 (but 1 and -1), as in JAX.

  >>> power(asarray([2, 3]), 2).tolist()
  [4, 9]
  """
  if isinstance(y, int) and not isinstance(y, bool) and not isinstance(x, (int, float)):
    (x,) = _numeric(x)
    if y < 0 and (dtypes.is_int(x.dtype) or x.dtype is dtypes.bool_):   # (lax.integer_pow's rule, as JAX)
      raise TypeError(f"Integers cannot be raised to negative powers, got {x.dtype}{list(x.shape)} ** {y}; use a "
                      "float base (x.astype(float) ** y), or an array exponent (integer bases give 0 but 1 and -1)")
    if 0 <= y <= 4: return _product_power(x, y)
  a, b = _numeric(x, y)
  if dtypes.is_complex(a.dtype): return _complex_power(a, b)
  out = elementwise(Ops.POW, a, b)
  # JAX's integer power is weak only when both operands are: `2 ** bool_array` is a strong int32.
  if dtypes.is_int(out.dtype) and not (asarray(x).weak and asarray(y).weak): out = Array(out.uop, False)
  return out
def _complex_power(x: Array, y: Array) -> Array:
  """x ** y for complex operands as exp(y log x), with 0 ** y = 0 for y != 0 and x ** 0 = 1, as numpy's."""
  zero_base = equal(x, 0)
  out = exp(multiply(y, log(where(zero_base, ones_like(x), x))))
  return where(equal(y, 0), ones_like(out), where(zero_base, zeros_like(out), out))
def _product_power(x: Array, y: int) -> Array:
  if y == 0: return ones_like(x)
  out = x
  for _ in range(y - 1): out = multiply(out, x)
  return out
pow = power  # noqa: A001
def float_power(x, y):
  """`x ** y` computed in a float type (ints and bool promote to the default float)."""
  a, b = promote_inexact(x, y)
  return _complex_power(a, b) if dtypes.is_complex(a.dtype) else elementwise(Ops.POW, a, b)
def negative(x): _no_bool('negative', x); return unary(Ops.NEG, x)
def positive(x): return asarray(x)
def reciprocal(x): return unary(Ops.RECIP, x)
def exp(x):
  """e to the power `x`, elementwise; integer and bool inputs give the default float.

  >>> print(exp(asarray([0.0, 1.0])).round(5))     # the last bit of exp may differ between devices
  [1.      2.71828]
  """
  return unary(Ops.EXP, x)
def exp2(x):
  (x,) = promote_inexact(x)
  if dtypes.is_complex(x.dtype): return exp(multiply(x, math.log(2.0)))
  return elementwise(Ops.POW, Array(UOp.const(2, x.dtype, x.shape), x.weak), x)
def expm1(x): return unary(Ops.EXPM1, x)
def log(x): return unary(Ops.LOG, x)
def log2(x): return divide(log(x), math.log(2.0))
def log10(x): return divide(log(x), math.log(10.0))
def log1p(x): return unary(Ops.LOG1P, x)
def sqrt(x): return unary(Ops.SQRT, x)
def rsqrt(x): return reciprocal(sqrt(x))
def cbrt(x):
  (x,) = promote_inexact(x)
  no_complex('cbrt', x.dtype)
  return multiply(sign(x), power(abs(x), 1.0 / 3.0))
def square(x):
  (x,) = _numeric(x)
  return multiply(x, x)
def abs(x):  # noqa: A001 - numpy's name
  """|x|; the modulus of a complex `x` is real (float32 for complex64), computed without overflow (`hypot`)."""
  x = asarray(x)
  if dtypes.is_complex(x.dtype): return hypot(real_part(x), imag_part(x))
  return x if dtypes.is_unsigned(x.dtype) or dtypes.is_bool(x.dtype) else unary(Ops.ABS, x)
absolute = abs
def fabs(x): return abs(promote_inexact(x)[0])
def sign(x):
  """-1, 0 or 1 by the sign of `x`; for a complex `x`, z / |z| (0 at 0), as JAX's."""
  _no_bool('sign', x)
  x = asarray(x)
  if not dtypes.is_complex(x.dtype): return unary(Ops.SIGN, x)
  m = abs(x)
  return where(equal(m, 0), zeros_like(x), divide(x, astype(where(equal(m, 0), ones_like(m), m), x.dtype)))
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
def _sqrt_max(dt: DType) -> float:
  """Past this magnitude x*x overflows `dt`; inverse hyperbolics switch to their log(2x) asymptote there."""
  return math.sqrt(dtypes.finfo(dt).max) / 2
def arcsinh(x):
  """Inverse hyperbolic sine, accurate near 0 (log1p form) and without overflow for large |x|."""
  (x,) = promote_inexact(x)
  if dtypes.is_complex(x.dtype): return _complex_arcsinh(x)
  ax = abs(x)
  big = greater(ax, _sqrt_max(x.dtype))
  safe = where(big, zeros_like(ax), ax)
  near = log1p(add(safe, divide(square(safe), add(1.0, sqrt(add(square(safe), 1.0))))))
  out = multiply(sign(x), where(big, add(log(ax), math.log(2.0)), near))
  return where(equal(x, 0), x, out)   # keeps the sign of -0.0
def arccosh(x):
  """Inverse hyperbolic cosine (NaN below 1), accurate near 1 and without overflow for large x."""
  (x,) = promote_inexact(x)
  if dtypes.is_complex(x.dtype): return _complex_arccosh(x)
  big = greater(x, _sqrt_max(x.dtype))
  safe = where(big, ones_like(x), x)
  t = subtract(safe, 1.0)
  return where(big, add(log(x), math.log(2.0)), log1p(add(t, sqrt(multiply(t, add(safe, 1.0))))))
def arctanh(x):
  (x,) = promote_inexact(x)
  if dtypes.is_complex(x.dtype): return _complex_arctanh(x)
  return multiply(0.5, subtract(log1p(x), log1p(negative(x))))
asin, acos, atan, atan2, asinh, acosh, atanh = arcsin, arccos, arctan, arctan2, arcsinh, arccosh, arctanh
def _rounding(op):
  def f(x):
    x = asarray(x)
    no_complex(jnp_name(op), x.dtype)
    return x if not dtypes.is_float(x.dtype) else unary(op, x)
  return f
floor, ceil, trunc = _rounding(Ops.FLOOR), _rounding(Ops.CEIL), _rounding(Ops.TRUNC)
fix = trunc
def round(x, decimals: int = 0):  # noqa: A001 - numpy's name
  """Round half to even, to `decimals` places (as `jnp.round`); integers are returned unchanged.

  >>> print(round(asarray([0.5, 1.5, 2.25]), 1))
  [0.5 1.5 2.2]
  """
  x = asarray(x)
  if dtypes.is_bool(x.dtype): raise TypeError("round does not accept bool arrays; cast them to a number type first")
  if dtypes.is_complex(x.dtype): return from_parts(round(real_part(x), decimals), round(imag_part(x), decimals))
  if not dtypes.is_float(x.dtype):
    if decimals < 0: raise NotImplementedError("round of integers with decimals < 0 is not implemented")
    return x
  if decimals == 0: return unary(Ops.ROUND, x)
  scale = 10.0 ** decimals
  return divide(unary(Ops.ROUND, multiply(x, scale)), scale)
around = round
def rint(x): return unary(Ops.ROUND, x)
def clip(x, min=None, max=None, a_min=None, a_max=None):  # noqa: A002 - numpy's names
  """Limit values to [min, max]; either bound may be None.

  >>> clip(asarray([1, 5, 9]), 2, 7).tolist()
  [2, 5, 7]
  """
  lo, hi = (min if min is not None else a_min), (max if max is not None else a_max)
  x = asarray(x)
  if lo is not None: x = maximum(x, lo)
  if hi is not None: x = minimum(x, hi)
  return x
def where(condition, x=None, y=None, *, size=None, fill_value=None):
  """Elementwise `x if condition else y`, broadcasting all three. `jnp.where` is `indexing.where`, which also
  takes the one-argument form (`nonzero`).

  >>> where(asarray([True, False]), 1, 2).tolist()
  [1, 2]
  """
  if x is None and y is None:
    raise TypeError("numpy.core.where takes three arguments; the one-argument form is jnp.where (indexing.where)")
  if x is None or y is None: raise TypeError("where takes one argument or three (condition, x, y), not two")
  c = asarray(condition)
  if c.dtype is not dtypes.bool_: c = not_equal(c, 0)
  (a, b), dt, weak = promote(x, y)
  cu, au, bu = broadcast_uops([c, a, b], names=('condition', 'x', 'y'), op='where')
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
def logical_and(x, y): return elementwise(Ops.AND, _to_bool(x), _to_bool(y), name='logical_and')
def logical_or(x, y): return elementwise(Ops.OR, _to_bool(x), _to_bool(y), name='logical_or')
def logical_xor(x, y): return elementwise(Ops.XOR, _to_bool(x), _to_bool(y), name='logical_xor')
def logical_not(x): return unary(Ops.NOT, _to_bool(x))
def _int_or_bool(name, *xs):
  for x in xs:
    a = asarray(x)
    if dtypes.is_float(a.dtype): raise TypeError(f"{name} needs integer or bool arrays, got {a.dtype}")
def bitwise_and(x, y): _int_or_bool('bitwise_and', x, y); return elementwise(Ops.AND, x, y)
def bitwise_or(x, y): _int_or_bool('bitwise_or', x, y); return elementwise(Ops.OR, x, y)
def bitwise_xor(x, y): _int_or_bool('bitwise_xor', x, y); return elementwise(Ops.XOR, x, y)
def invert(x): _int_or_bool('invert', x); return unary(Ops.NOT, x)
bitwise_not = bitwise_invert = invert
def left_shift(x, y):
  """`x << y`; shifting by the bit width or more gives 0."""
  _int_or_bool('left_shift', x, y)
  return elementwise(Ops.SHL, *_numeric(x, y))
def right_shift(x, y):
  """`x >> y` (arithmetic for signed types); shifting by the bit width or more gives 0 or -1."""
  _int_or_bool('right_shift', x, y)
  return elementwise(Ops.SHR, *_numeric(x, y))
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
def real_part(x) -> Array:
  """The real part (`jnp.real`): a float array for a complex `x`, `x` itself otherwise."""
  x = asarray(x)
  if not dtypes.is_complex(x.dtype): return x
  return _part(Ops.REAL, x)
def imag_part(x) -> Array:
  """The imaginary part (`jnp.imag`): a float array for a complex `x`, zeros like `x` otherwise."""
  x = asarray(x)
  if not dtypes.is_complex(x.dtype): return zeros_like(x)
  return _part(Ops.IMAG, x)
def from_parts(re: Array, im: Array) -> Array:
  """re + i im for float arrays of one shape and dtype."""
  return Array(UOp(Ops.COMPLEX, dtypes.complex_dtype(re.dtype), (re.uop, im.uop)), re.weak and im.weak)
def _part(op: Ops, z: Array) -> Array:
  dt = dtypes.real_dtype(z.dtype)
  if z.uop.op is Ops.CONST:
    v = z.uop.arg[0]
    return Array(UOp.const(v.real if op is Ops.REAL else v.imag, dt, z.shape), z.weak)
  return Array(UOp(op, dt, (z.uop,)), z.weak)
real, imag = real_part, imag_part
def conj(x) -> Array:
  """The complex conjugate, x - iy (a real `x` is returned as it is).

  >>> conj(asarray([1 + 2j])).tolist()
  [(1-2j)]
  """
  x = asarray(x)
  if not dtypes.is_complex(x.dtype): return x
  return Array(from_parts(real_part(x), negative(imag_part(x))).uop, x.weak)
conjugate = conj
def angle(z, deg: bool = False) -> Array:
  """The argument of `z` in radians (degrees with `deg`), in (-pi, pi]; a float array.

  >>> print(round(angle(asarray([1j, -1.0])), 4))
  [1.5708 3.1416]
  """
  z = asarray(z)
  re, im = (real_part(z), imag_part(z)) if dtypes.is_complex(z.dtype) else (promote_inexact(z)[0], zeros_like(z))
  out = arctan2(im, re)
  return rad2deg(out) if deg else out
def iscomplexobj(x) -> bool:
  """Whether `x` (an array, a numpy array, a scalar) has a complex dtype, whatever its values."""
  dt = getattr(x, 'dtype', None)
  if dt is None: return isinstance(x, complex) or np.iscomplexobj(x)
  return np.dtype(dt).kind == 'c'
def isrealobj(x) -> bool: return not iscomplexobj(x)
def iscomplex(x) -> Array:
  """True where the imaginary part is nonzero (always False for a real array)."""
  return not_equal(imag_part(x), 0)
def isreal(x) -> Array:
  """True where the imaginary part is zero (always True for a real array)."""
  return equal(imag_part(x), 0)
def _complex_parts(op, x: Array) -> Array:
  """isnan/isinf for complex: true where either part is."""
  return logical_or(op(real_part(x)), op(imag_part(x)))
def isnan(x):
  x = asarray(x)
  if dtypes.is_complex(x.dtype): return _complex_parts(isnan, x)
  return not_equal(x, x) if dtypes.is_float(x.dtype) else zeros_like(x, dtype=dtypes.bool_)
def isinf(x):
  x = asarray(x)
  if dtypes.is_complex(x.dtype): return _complex_parts(isinf, x)
  return equal(abs(x), math.inf) if dtypes.is_float(x.dtype) else zeros_like(x, dtype=dtypes.bool_)
def isfinite(x):
  x = asarray(x)
  return logical_not(logical_or(isnan(x), isinf(x))) if dtypes.is_inexact(x.dtype) else ones_like(x, dtype=dtypes.bool_)
def isposinf(x): return equal(x, math.inf)
def isneginf(x): return equal(x, -math.inf)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
  """Replace NaN by `nan` and infinities by `posinf`/`neginf` (default: the dtype's largest finite values).

  >>> nan_to_num(asarray([float('nan'), 1.0])).tolist()
  [0.0, 1.0]
  """
  x = asarray(x)
  if dtypes.is_complex(x.dtype):
    return from_parts(*(nan_to_num(p, copy, nan, posinf, neginf) for p in (real_part(x), imag_part(x))))
  if not dtypes.is_float(x.dtype): return x
  fi = dtypes.finfo(x.dtype)
  x = where(isnan(x), nan, x)
  x = where(equal(x, math.inf), fi.max if posinf is None else posinf, x)
  return where(equal(x, -math.inf), fi.min if neginf is None else neginf, x)
def signbit(x):
  """True where the sign bit is set (negative numbers, -0.0 and negative NaN are not told apart from NaN)."""
  x = asarray(x)
  if not dtypes.is_float(x.dtype): return less(x, 0)
  return logical_or(less(x, 0), logical_and(equal(x, 0), less(reciprocal(x), 0)))
def copysign(x, y):
  x, y = promote_inexact(x, y)
  return where(signbit(y), negative(abs(x)), abs(x))
def nextafter(x1, x2):
  """The next representable value after `x1` toward `x2` (numpy's): `x2` where they are equal, NaN where either is,
  the smallest subnormal with `x2`'s sign after a zero; one step of the bit pattern otherwise.

  >>> float(nextafter(asarray(1.0), 2.0) - 1.0) == 2.0 ** -23
  True
  """
  x, y = promote_inexact(x1, x2)
  if dtypes.is_complex(x.dtype): raise TypeError(f"nextafter does not accept complex inputs (got {x.dtype})")
  shape = broadcast_shapes(x.shape, y.shape, op='nextafter')
  x, y = broadcast_to(x, shape), broadcast_to(y, shape)
  store = dtypes.float32 if x.dtype is dtypes.bfloat16 else x.dtype   # (a bfloat16 is a float32's top half)
  uint = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[store.itemsize]
  bits = Array(UOp(Ops.BITCAST, uint, (astype(x, store).uop,)))
  one = asarray(1 << 16 if x.dtype is dtypes.bfloat16 else 1, uint)
  away = logical_or(logical_and(greater(x, 0), greater(y, x)), logical_and(less(x, 0), less(y, x)))
  stepped = where(away, add(bits, one), subtract(bits, one))
  sign = asarray(1 << (8 * store.itemsize - 1), uint)
  stepped = where(equal(x, 0), where(signbit(y), bitwise_or(sign, one), one), stepped)
  out = astype(Array(UOp(Ops.BITCAST, store, (stepped.uop,))), x.dtype)
  out = where(equal(x, y), y, out)
  return where(logical_or(isnan(x), isnan(y)), full_like(x, math.nan), out)
def heaviside(x, h0):
  """0 where `x < 0`, `h0` where `x == 0`, 1 where `x > 0`."""
  x, h0 = promote_inexact(x, h0)
  return where(less(x, 0), zeros_like(x), where(equal(x, 0), h0, ones_like(x)))
def hypot(x, y):
  """`sqrt(x*x + y*y)` without overflow or underflow in between (inf wins over NaN, as in C)."""
  x, y = promote_inexact(x, y)
  ax, ay = abs(x), abs(y)
  hi, lo = maximum(ax, ay), minimum(ax, ay)
  ratio = divide(lo, where(equal(hi, 0), ones_like(hi), hi))
  out = multiply(hi, sqrt(add(1.0, square(ratio))))
  return where(logical_or(isinf(ax), isinf(ay)), math.inf, out)
def deg2rad(x): return multiply(promote_inexact(x)[0], math.pi / 180.0)
def rad2deg(x): return multiply(promote_inexact(x)[0], 180.0 / math.pi)
radians, degrees = deg2rad, rad2deg
def logaddexp(x, y):
  """`log(exp(x) + exp(y))` without overflow."""
  x, y = promote_inexact(x, y)
  # max + log1p(exp(min - max)): accurate when one term is tiny (softplus(-30) is 9.4e-14, not 0), and at a tie
  # max and min share the gradient equally, so it is 1/2 each, as JAX's. min - max is NaN only for two
  # infinities of one sign (or a NaN), where x + y is the answer; the other arm then sees 0, keeping grads finite.
  hi, lo = maximum(x, y), minimum(x, y)
  delta = subtract(lo, hi)
  bad = isnan(delta)
  return where(bad, add(x, y), add(hi, log1p(exp(where(bad, zeros_like(delta), delta)))))
def sinc(x):
  """`sin(pi x) / (pi x)`, with sinc(0) = 1."""
  (x,) = promote_inexact(x)
  px = multiply(math.pi, where(equal(x, 0), ones_like(x), x))
  return where(equal(x, 0), ones_like(x), divide(sin(px), px))

# --- fills (creation.py has the rest; these are here because the functions above need them) ---
def full(shape, fill_value, dtype=None) -> Array:
  """An array of `shape` filled with `fill_value` (a constant node: nothing is allocated until needed).

  A Python scalar fill without `dtype` gives a weak-typed result, as in JAX.

  >>> full((2,), 7).tolist()
  [7, 7]
  """
  shape = shape_arg(shape)
  # (a Python number fill for an integer type converts as lax.full converts it, a float saturating and an int
  # wrapping, where asarray would refuse one that does not fit)
  dt = None if dtype is None else dtypes.to_dtype(dtype)
  if dt is not None and dt.kind in 'iu' and type(fill_value) in (int, float):
    v = astype(fill_value, dt) if type(fill_value) is float else Array(UOp.const(fill_value, dt))
  else: v = asarray(fill_value, dtype)
  if v.uop.op is Ops.CONST: return Array(UOp.const(v.uop.arg[0], v.dtype, shape), v.weak)
  return broadcast_to(v, shape)
def zeros(shape, dtype=None, device=None) -> Array:
  """An array of zeros (the default float type unless `dtype` is given).

  >>> zeros((2, 3)).shape
  (2, 3)
  """
  return full(shape, 0, dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_float())
def ones(shape, dtype=None, device=None) -> Array:
  """An array of ones (the default float type unless `dtype` is given)."""
  return full(shape, 1, dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_float())
def full_like(x, fill_value, dtype=None, shape=None) -> Array:
  """An array like `x` (its shape and dtype, and weak type when `dtype` is None) filled with `fill_value`."""
  x = asarray(x)
  out = full(x.shape if shape is None else shape, fill_value, x.dtype if dtype is None else dtype)
  return Array(out.uop, x.weak and dtype is None)
def zeros_like(x, dtype=None, shape=None) -> Array: return full_like(x, 0, dtype, shape)
def ones_like(x, dtype=None, shape=None) -> Array: return full_like(x, 1, dtype, shape)

def shape_arg(shape) -> tuple:
  """A shape argument (an int or a sequence of ints) as a tuple of non-negative Python ints.

  >>> shape_arg(3), shape_arg([2, np.int64(4)])
  ((3,), (2, 4))
  """
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
def normalize_axes(axis, ndim: int) -> tuple:
  """Sorted non-negative axes from None (all), an int or a tuple; duplicates are an error."""
  if axis is None: return tuple(range(ndim))
  axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
  out = tuple(normalize_axis(a, ndim) for a in axes)
  if len(set(out)) != len(out): raise ValueError(f"repeated axis in {axis} for an array of ndim {ndim}")
  return tuple(sorted(out))

def _keep(u: UOp, axes: tuple, shape: tuple) -> UOp:
  return u.reshape(tuple(1 if i in axes else s for i, s in enumerate(shape)))

def _identity(op: Ops, dt: DType):
  """The value that leaves `op` unchanged: what masked-out elements (where=False) become."""
  if op is Ops.ADD: return 0
  if op is Ops.MUL: return 1
  if dtypes.is_float(dt): return -math.inf if op is Ops.MAX else math.inf
  if dtypes.is_bool(dt): return op is Ops.MIN
  ii = dtypes.iinfo(dt)
  return ii.min if op is Ops.MAX else ii.max

def _no_out(out) -> None:
  if out is not None: raise NotImplementedError("out= is not supported: tinyjx arrays are immutable; use the result")

def _mask(where, x: Array) -> Array:
  return broadcast_to(_to_bool(where), x.shape)

def _reduce(op: Ops, x, axis, keepdims: bool, dtype=None, where=None, initial=None) -> Array:
  """REDUCE `x` over `axis` with ALU `op`: elements where `where` is False count as the identity, and `initial`
  joins the result (the reductions' common path)."""
  x = asarray(x)
  if dtype is not None: x = astype(x, dtype)
  axes = normalize_axes(axis, x.ndim)
  if where is not None: x = where_fn(_mask(where, x), x, Array(UOp.const(_identity(op, x.dtype), x.dtype, x.shape)))
  u = x.uop.reduce(op, axes)
  if initial is not None: u = elementwise(op, Array(u), asarray(initial, x.dtype)).uop
  if keepdims: u = _keep(u, axes, x.shape)
  return Array(u)
where_fn = where

def _sum_dtype(x: Array, dtype) -> DType:
  """JAX's accumulator type: bool and ints narrower than the default int widen to it (unsigned to unsigned)."""
  if dtype is not None: return dtypes.to_dtype(dtype)
  if dtypes.is_bool(x.dtype) or (dtypes.is_int(x.dtype) and x.dtype.itemsize < dtypes.default_int().itemsize):
    return dtypes.canonicalize(dtypes.uint64) if dtypes.is_unsigned(x.dtype) else dtypes.default_int()
  return x.dtype

def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
  """Sum over `axis` (an int, a tuple or None for all); bool and small ints sum in the default int type, as JAX.

  >>> sum(asarray([[1, 2], [3, 4]]), axis=0).tolist()
  [4, 6]
  """
  _no_out(out)
  a = asarray(a)
  return _reduce(Ops.ADD, a, axis, keepdims, _sum_dtype(a, dtype), where, initial)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
  """Product over `axis`; the product of an empty axis is 1."""
  _no_out(out)
  a = asarray(a)
  if dtypes.is_complex(_sum_dtype(a, dtype)): return _complex_prod(a, axis, keepdims, dtype, where, initial)
  return _reduce(Ops.MUL, a, axis, keepdims, _sum_dtype(a, dtype), where, initial)
def _complex_prod(a: Array, axis, keepdims: bool, dtype, where, initial) -> Array:
  """A complex product as a tree of multiplies (the parts of a product are no reductions of the parts): the
  reduced axes moved last and flattened, padded with ones to a power of two, then halved until one is left."""
  a = astype(a, dtype) if dtype is not None else a
  if where is not None: a = where_fn(_mask(where, a), a, ones_like(a))
  axes = normalize_axes(axis, a.ndim)
  rest = [d for d in range(a.ndim) if d not in axes]
  n = math.prod(a.shape[d] for d in axes)
  u = a.uop.permute(rest + list(axes)).reshape(tuple(a.shape[d] for d in rest) + (n,))
  width = 1 << builtins.max(n - 1, 0).bit_length()
  x = Array(u.pad(((0, 0),) * len(rest) + ((0, width - n),)))
  x = where_fn(less(Array(UOp(Ops.IOTA, dtypes.int32, (), (x.shape, x.ndim - 1))), n), x, ones_like(x))
  while x.shape[-1] > 1:
    half, keep = x.shape[-1] // 2, [(0, s) for s in x.shape[:-1]]
    x = multiply(Array(x.uop.shrink(keep + [(0, half)])), Array(x.uop.shrink(keep + [(half, 2 * half)])))
  out = Array(x.uop.reshape(x.shape[:-1]))
  if initial is not None: out = multiply(out, asarray(initial, out.dtype))
  return Array(_keep(out.uop, axes, a.shape)) if keepdims else out
def _extreme(op: Ops, name: str, a, axis, out, keepdims, initial, where) -> Array:
  _no_out(out)
  a = asarray(a)
  no_complex(name, a.dtype, _UNORDERED)
  axes = normalize_axes(axis, a.ndim)
  if initial is None and where is not None:
    raise ValueError(f"reduction operation {name} does not have an identity, so to use a where mask one has to "
                     "specify 'initial'")
  if initial is None and builtins.any(a.shape[i] == 0 for i in axes):
    raise ValueError(f"zero-size array to reduction operation {name} which has no identity: shape {a.shape}, "
                     f"axis {axis} (pass initial= to give empty reductions a value)")
  return _reduce(op, a, axes, keepdims, None, where, initial)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
  """The largest element over `axis` (NaN propagates); an empty reduction needs `initial`.

  >>> max(asarray([[1, 5], [3, 2]]), axis=1).tolist()
  [5, 3]
  """
  return _extreme(Ops.MAX, 'max', a, axis, out, keepdims, initial, where)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
  """The smallest element over `axis` (NaN propagates); an empty reduction needs `initial`."""
  return _extreme(Ops.MIN, 'min', a, axis, out, keepdims, initial, where)
amax, amin = max, min
def any(a, axis=None, out=None, keepdims=False, where=None):  # noqa: A001
  """Whether any element over `axis` is nonzero (False for an empty axis)."""
  _no_out(out)
  return _reduce(Ops.MAX, _to_bool(a), axis, keepdims, None, where)
def all(a, axis=None, out=None, keepdims=False, where=None):  # noqa: A001
  """Whether every element over `axis` is nonzero (True for an empty axis)."""
  _no_out(out)
  return _reduce(Ops.MIN, _to_bool(a), axis, keepdims, None, where)

def _mean_dtypes(a: Array, dtype) -> tuple[DType, DType]:
  """(result dtype, computation dtype) of mean/var/std: ints give the default float; 16-bit floats compute in
  float32, as JAX does."""
  inexact = a.dtype if dtypes.is_inexact(a.dtype) else dtypes.default_float()
  out = dtypes.to_dtype(dtype) if dtype is not None else inexact
  calc = out if dtypes.is_inexact(out) else dtypes.default_float()
  return out, (dtypes.float32 if calc.itemsize < 4 else calc)

def _count(a: Array, axis, keepdims: bool, where, dt: DType):
  """How many elements a reduction over `axis` sees: a Python int, or an array when `where` masks some out."""
  if where is not None: return sum(astype(_mask(where, a), dt), axis, keepdims=keepdims)
  return math.prod(a.shape[i] for i in normalize_axes(axis, a.ndim))

def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
  """Arithmetic mean over `axis`; integer inputs give the default float, an empty axis gives NaN.

  >>> mean(asarray([1, 2, 3, 4])).item()
  2.5
  """
  _no_out(out)
  a = asarray(a)
  out_dt, calc = _mean_dtypes(a, dtype)
  x = astype(a, calc)
  n = _count(x, axis, keepdims, where, calc)
  return astype(divide(sum(x, axis, keepdims=keepdims, where=where), n), out_dt)

def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
  """Variance over `axis` with `ddof` (or `correction`) degrees of freedom removed from the count (NaN when none
  are left); the variance of complex values is the mean squared modulus of their deviations, a float.

  >>> var(asarray([1.0, 2.0, 3.0, 4.0]), ddof=1).item()
  1.6666666269302368
  """
  _no_out(out)
  if correction is not None: ddof = correction
  a = asarray(a)
  out_dt, calc = _mean_dtypes(a, dtype)
  x = astype(a, calc)
  centered = subtract(x, mean(x, axis, keepdims=True, where=where))
  if dtypes.is_complex(calc): centered = abs(centered)
  ss = sum(multiply(centered, centered), axis, keepdims=keepdims, where=where)
  n = _count(x, axis, keepdims, where, dtypes.real_dtype(calc))
  if isinstance(n, int): result = divide(ss, n - ddof if n > ddof else math.nan)
  else: result = where_fn(greater(n, ddof), divide(ss, subtract(n, ddof)), math.nan)
  return astype(result, dtypes.real_dtype(out_dt))

def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
  """Standard deviation over `axis`: the square root of `var` with the same arguments."""
  return sqrt(var(a, axis, dtype, out, ddof, keepdims, where, correction))

def _arg_extreme(a, axis, keepdims, op: Ops, name: str) -> Array:
  a = asarray(a)
  no_complex(name, a.dtype, _UNORDERED)
  if axis is None and a.ndim != 1:
    flat = _arg_extreme(Array(a.uop.reshape((a.size,))), 0, False, op, name)
    return Array(flat.uop.reshape((1,) * a.ndim)) if keepdims else flat
  if axis is None: axis = 0
  ax = normalize_axis(axis, a.ndim)
  if a.shape[ax] == 0: raise ValueError(f"attempt to get {name} of an empty sequence: axis {ax} of shape {a.shape}")
  best = _reduce(op, a, ax, True)
  hit = equal(a, best)
  if dtypes.is_float(a.dtype): hit = logical_or(hit, logical_and(isnan(a), isnan(best)))
  idx = Array(UOp(Ops.IOTA, dtypes.int32, (), (a.shape, ax)))
  return _reduce(Ops.MIN, where(hit, idx, a.shape[ax]), ax, keepdims)
def argmax(a, axis=None, out=None, keepdims=False):
  """Index of the first maximum along `axis` (None: of the flattened array); NaN counts as the maximum.

  >>> argmax(asarray([1, 3, 3])).item()
  1
  """
  _no_out(out)
  return _arg_extreme(a, axis, keepdims, Ops.MAX, 'argmax')
def argmin(a, axis=None, out=None, keepdims=False):
  """Index of the first minimum along `axis` (None: of the flattened array); NaN counts as the minimum."""
  _no_out(out)
  return _arg_extreme(a, axis, keepdims, Ops.MIN, 'argmin')

def _cumulative(op: Ops, a, axis, dtype, reverse=False) -> Array:
  a = asarray(a)
  if op in (Ops.MAX, Ops.MIN): no_complex('cummax' if op is Ops.MAX else 'cummin', a.dtype, _UNORDERED)
  if axis is None: a, axis = Array(a.uop.reshape((a.size,))), 0
  dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_int() if dtypes.is_bool(a.dtype) else a.dtype
  a = astype(a, dt)
  ax = normalize_axis(axis, a.ndim)
  return Array(UOp(Ops.CUMULATIVE, a.dtype, (a.uop,), (op, ax, bool(reverse))))
def cumsum(a, axis=None, dtype=None, out=None):
  """Running sums along `axis` (None: of the flattened array); bool counts in the default int type.

  >>> cumsum(asarray([1, 2, 3])).tolist()
  [1, 3, 6]
  """
  _no_out(out)
  return _cumulative(Ops.ADD, a, axis, dtype)
def cumprod(a, axis=None, dtype=None, out=None):
  """Running products along `axis` (None: of the flattened array)."""
  _no_out(out)
  return _cumulative(Ops.MUL, a, axis, dtype)
cumulative_sum, cumulative_prod = cumsum, cumprod

# --- comparisons of whole arrays ---
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False) -> Array:
  """Elementwise `|a - b| <= atol + rtol * |b|` for finite `b`, or `a == b` (so equal infinities are close); NaN is
  close to NaN only with `equal_nan`. Integer and bool inputs compare exactly. As numpy's and JAX's isclose.

  >>> isclose(asarray([1.0, float('inf'), float('nan')]), asarray([1.0 + 1e-6, float('inf'), float('nan')])).tolist()
  [True, True, False]
  """
  (x, y), dt, _ = promote(a, b)
  if not dtypes.is_inexact(dt): return equal(x, y)
  tol = add(atol, multiply(rtol, abs(y)))
  out = logical_or(logical_and(less_equal(abs(subtract(x, y)), tol), isfinite(y)), equal(x, y))
  return logical_or(out, logical_and(isnan(x), isnan(y))) if equal_nan else out

def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False) -> Array:
  """Whether every element of `a` is close to the matching one of `b` (see `isclose`): a 0-d bool array.

  >>> allclose(asarray([1.0, 2.0]), 2.0).item(), allclose(asarray([1.0, 2.0]), asarray([1.0, 2.0 + 1e-6])).item()
  (False, True)
  """
  return all(isclose(a, b, rtol, atol, equal_nan))

def array_equal(a1, a2, equal_nan: bool = False) -> Array:
  """Whether `a1` and `a2` have one shape and equal elements (lists are accepted, as in JAX): a 0-d bool array.

  >>> array_equal([1, 2], asarray([1.0, 2.0])).item(), array_equal(asarray([1, 2]), asarray([[1, 2]])).item()
  (True, False)
  """
  x, y = asarray(a1), asarray(a2)
  if x.shape != y.shape: return asarray(False)
  eq = equal(x, y)
  if equal_nan and dtypes.is_float(promote(x, y)[1]): eq = logical_or(eq, logical_and(isnan(x), isnan(y)))
  return all(eq)

def array_equiv(a1, a2) -> Array:
  """Whether `a1` and `a2` broadcast together and are equal everywhere: a 0-d bool array. Shapes that do not
  broadcast give False, as numpy's array_equiv (JAX raises there).

  >>> array_equiv(asarray([1, 2]), asarray([[1, 2], [1, 2]])).item(), array_equiv([1, 2], [1, 2, 3]).item()
  (True, False)
  """
  x, y = asarray(a1), asarray(a2)
  try: broadcast_shapes(x.shape, y.shape)
  except ValueError: return asarray(False)
  return all(equal(x, y))

# --- views and joins the other numpy modules build on ---
def broadcast_to(array, shape) -> Array:
  """A view of `array` broadcast to `shape` (numpy rules: leading axes are added, size-1 axes grow).

  >>> broadcast_to(asarray([0, 1, 2]), (2, 3)).shape
  (2, 3)
  """
  a = asarray(array)
  shape = shape_arg(shape)
  ok = len(shape) >= a.ndim and builtins.all(s in (1, t) for s, t in zip(a.shape[::-1], shape[::-1]))
  if not ok:
    raise ValueError(f"cannot broadcast an array of shape {a.shape} to shape {shape}: each trailing axis must "
                     "match or be 1 (use reshape or expand_dims to line the axes up)")
  u = a.uop
  if u.op is Ops.CONST: return Array(UOp.const(u.arg[0], u.dtype, shape), a.weak)
  return Array(u.broadcast_to(shape), a.weak)

def axis_pads(ndim: int, axis: int, lo: int, hi: int) -> tuple:
  return tuple((lo, hi) if d == axis else (0, 0) for d in range(ndim))

def join_along(pieces: list[UOp], axis: int) -> UOp:
  """Pieces of one dtype laid end to end along `axis`: each is padded into place and the pads are summed."""
  total = builtins.sum(p.shape[axis] for p in pieces)
  nonempty = [(i, p) for i, p in enumerate(pieces) if p.shape[axis] or total == 0]
  offsets = np.cumsum([0] + [p.shape[axis] for p in pieces]).tolist()
  join_op = Ops.OR if pieces[0].dtype is dtypes.bool_ else Ops.ADD
  out = None
  for i, p in nonempty:
    placed = p.pad(axis_pads(p.ndim, axis, offsets[i], total - offsets[i + 1]))
    out = placed if out is None else out.alu(join_op, placed)
  return out
