"""lax_primitives: JAX's low-level operations without control flow: strict dtypes, explicit shapes.

Unlike `tinyjx.numpy`, lax does not promote: the operands of one operation must share one dtype (a
Python scalar counts as its default dtype, int32 or float32, as in JAX) and one shape (only 0-d operands
broadcast). A mismatch is a TypeError naming both. Each function builds one UOp or a short composition
of them, so `make_jaxpr` shows lax-level equations. `tinyjx.lax` re-exports this module with the families
built on it (control flow, collectives, convolutions, linalg); lax_conv imports this module as `lax`.
"""
from __future__ import annotations
import builtins, enum, math, operator
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops, jnp_name
from tinyjx.numpy import core
from tinyjx.numpy.core import asarray, normalize_axis, normalize_axes
from tinyjx.numpy import indexing
from tinyjx.numpy.products import Precision, canonicalize_precision  # noqa: F401  (lax.Precision)

# --- operand checks: one dtype, one shape (0-d broadcasts) ---
def _operands(name: str, similar: str | None, *xs) -> tuple[list[UOp], bool]:
  arrs = [asarray(x) for x in xs]
  dts = [a.dtype for a in arrs]
  if builtins.any(d is not dts[0] for d in dts):
    tip = f" (jnp.{similar} is a similar function that promotes its inputs)" if similar else ""
    got = ', '.join(str(d) for d in dts)
    raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got {got}; convert one with "
                    f"lax.convert_element_type(x, dtype){tip}")
  return _same_shape(name, arrs), builtins.all(a.weak for a in arrs)

def _same_shape(name: str, arrs: list[Array]) -> list[UOp]:
  shapes = [a.shape for a in arrs]
  full = {s for s in shapes if s}
  if len(full) > 1:
    got = ', '.join(str(s) for s in shapes)
    raise TypeError(f"lax.{name} requires operands of one shape (0-d operands broadcast), got shapes {got}; "
                    "use jnp functions for numpy broadcasting, or lax.broadcast_in_dim")
  shape = full.pop() if full else ()
  return [indexing.broadcast_uop(a.uop, shape) for a in arrs]

def _build(op: Ops, out_dtype, srcs: list[UOp], weak: bool) -> Array:
  return Array(UOp(op, out_dtype, tuple(srcs)), weak)

def _require(name: str, x: Array, kinds: str, what: str) -> Array:
  if x.dtype.kind not in kinds:
    raise TypeError(f"lax.{name} does not accept dtype {x.dtype}; it needs {what} "
                    "(convert with lax.convert_element_type)")
  return x

_FLOAT = ('f', 'a float dtype')
_INT = ('iu', 'an integer dtype')
_INT_BOOL = ('iub', 'an integer or bool dtype')
_NUMBER = ('iuf', 'a real numeric (not bool) dtype')
_ARITH = ('iufc', 'a numeric (not bool) dtype')
_INEXACT = ('fc', 'a float or complex dtype')
_ANY = ('iufb', 'a dtype with an order (not complex)')
_EQ = ('iufbc', 'any dtype')

# --- elementwise ---
def _unary(name: str, op: Ops, accepts: tuple, doc: str, example: tuple):
  def f(x) -> Array:
    x = _require(name, asarray(x), *accepts)
    return _build(op, x.dtype, [x.uop], x.weak)
  f.__name__ = f.__qualname__ = name
  f.__doc__ = (f"Elementwise {doc}, keeping the dtype ({accepts[1]}).\n\n"
               f">>> from tinyjx import lax\n>>> lax.{name}({example[0]}).item()\n{example[1]}\n")
  return f

def _binary(name: str, op: Ops, accepts: tuple, doc: str, example: tuple, compare: bool = False):
  def f(x, y) -> Array:
    (a, b), weak = _operands(name, jnp_name(op), x, y)
    _require(name, Array(a), *accepts)
    return _build(op, dtypes.bool_ if compare else a.dtype, [a, b], weak and not compare)
  f.__name__ = f.__qualname__ = name
  f.__doc__ = (f"Elementwise {doc}; both operands have one dtype and one shape (no promotion, unlike "
               f"jnp.{jnp_name(op)}).\n\n"
               f">>> from tinyjx import lax\n>>> lax.{name}({example[0]}).item()\n{example[1]}\n")
  return f

neg = _unary('neg', Ops.NEG, _ARITH, "-x", ("2", "-2"))
exp = _unary('exp', Ops.EXP, _INEXACT, "e**x", ("0.0", "1.0"))
log = _unary('log', Ops.LOG, _INEXACT, "natural logarithm", ("1.0", "0.0"))
expm1 = _unary('expm1', Ops.EXPM1, _FLOAT, "e**x - 1, accurate near 0", ("0.0", "0.0"))
log1p = _unary('log1p', Ops.LOG1P, _FLOAT, "log(1 + x), accurate near 0", ("0.0", "0.0"))
sin = _unary('sin', Ops.SIN, _INEXACT, "sine", ("0.0", "0.0"))
cos = _unary('cos', Ops.COS, _INEXACT, "cosine", ("0.0", "1.0"))
tan = _unary('tan', Ops.TAN, _FLOAT, "tangent", ("0.0", "0.0"))
asin = _unary('asin', Ops.ASIN, _FLOAT, "arcsine", ("0.0", "0.0"))
acos = _unary('acos', Ops.ACOS, _FLOAT, "arccosine", ("1.0", "0.0"))
atan = _unary('atan', Ops.ATAN, _FLOAT, "arctangent", ("0.0", "0.0"))
sinh = _unary('sinh', Ops.SINH, _FLOAT, "hyperbolic sine", ("0.0", "0.0"))
cosh = _unary('cosh', Ops.COSH, _FLOAT, "hyperbolic cosine", ("0.0", "1.0"))
tanh = _unary('tanh', Ops.TANH, _FLOAT, "hyperbolic tangent", ("0.0", "0.0"))
sqrt = _unary('sqrt', Ops.SQRT, _INEXACT, "square root", ("4.0", "2.0"))
erf = _unary('erf', Ops.ERF, _FLOAT, "error function", ("0.0", "0.0"))
floor = _unary('floor', Ops.FLOOR, _FLOAT, "rounding toward -inf", ("-1.5", "-2.0"))
ceil = _unary('ceil', Ops.CEIL, _FLOAT, "rounding toward +inf", ("-1.5", "-1.0"))
sign = _unary('sign', Ops.SIGN, _NUMBER, "sign (-1, 0 or 1)", ("-3.0", "-1.0"))
bitwise_not = _unary('bitwise_not', Ops.NOT, _INT_BOOL, "bitwise (or logical) not", ("0", "-1"))

add = _binary('add', Ops.ADD, _ARITH, "x + y", ("1.0, 2.0", "3.0"))
sub = _binary('sub', Ops.SUB, _ARITH, "x - y", ("1.0, 2.0", "-1.0"))
mul = _binary('mul', Ops.MUL, _ARITH, "x * y", ("3.0, 2.0", "6.0"))
div = _binary('div', Ops.DIV, _ARITH, "x / y (integers round toward zero, as in C)", ("-7, 2", "-3"))
rem = _binary('rem', Ops.REM, _NUMBER, "remainder with the sign of x (C's fmod)", ("-7, 2", "-1"))
max = _binary('max', Ops.MAX, _ANY, "maximum", ("1.0, 2.0", "2.0"))  # noqa: A001 - JAX's name
min = _binary('min', Ops.MIN, _ANY, "minimum", ("1.0, 2.0", "1.0"))  # noqa: A001 - JAX's name
atan2 = _binary('atan2', Ops.ATAN2, _FLOAT, "arctan(x / y) in the right quadrant", ("0.0, 1.0", "0.0"))
eq = _binary('eq', Ops.CMPEQ, _EQ, "x == y", ("1, 2", "False"), compare=True)
ne = _binary('ne', Ops.CMPNE, _EQ, "x != y", ("1, 2", "True"), compare=True)
lt = _binary('lt', Ops.CMPLT, _ANY, "x < y", ("1, 2", "True"), compare=True)
le = _binary('le', Ops.CMPLE, _ANY, "x <= y", ("2, 2", "True"), compare=True)
bitwise_and = _binary('bitwise_and', Ops.AND, _INT_BOOL, "bitwise (or logical) and", ("6, 3", "2"))
bitwise_or = _binary('bitwise_or', Ops.OR, _INT_BOOL, "bitwise (or logical) or", ("6, 3", "7"))
bitwise_xor = _binary('bitwise_xor', Ops.XOR, _INT_BOOL, "bitwise (or logical) xor", ("6, 3", "5"))
shift_left = _binary('shift_left', Ops.SHL, _INT, "x << y (0 once y reaches the bit width)", ("1, 3", "8"))

def complex(x, y) -> Array:  # noqa: A001 - JAX's name
  """x + iy from float operands of one dtype and shape: float32 parts give complex64, float64 ones complex128.

  >>> from tinyjx import lax
  >>> lax.complex(1.0, 2.0).item()
  (1+2j)
  """
  (a, b), weak = _operands('complex', None, x, y)
  _require('complex', Array(a), *_FLOAT)
  return _build(Ops.COMPLEX, dtypes.complex_dtype(a.dtype), [a.cast(dtypes.real_dtype(dtypes.complex_dtype(a.dtype))),
                                                            b.cast(dtypes.real_dtype(dtypes.complex_dtype(a.dtype)))],
                weak)

def real(x) -> Array:
  """The real part of a complex array (lax refuses a real one, as JAX's)."""
  return core.real(_require('real', asarray(x), 'c', 'a complex dtype'))

def imag(x) -> Array:
  """The imaginary part of a complex array."""
  return core.imag(_require('imag', asarray(x), 'c', 'a complex dtype'))

def conj(x) -> Array:
  """The complex conjugate; a real array gives itself as a complex array, as JAX's lax.conj."""
  x = _require('conj', asarray(x), 'iufc', 'a numeric dtype')
  return core.conj(x if dtypes.is_complex(x.dtype) else core.astype(x, dtypes.complex_dtype(x.dtype)))

def gt(x, y) -> Array:
  """Elementwise x > y (one dtype, one shape). `lax.gt(2., 1.)` is True."""
  return lt(y, x)
def ge(x, y) -> Array:
  """Elementwise x >= y (one dtype, one shape). `lax.ge(1., 1.)` is True."""
  return le(y, x)

def abs(x) -> Array:  # noqa: A001 - JAX's name
  """Elementwise |x|; unsigned values are returned unchanged, complex ones give their (float) modulus.
  `lax.abs(-2.)` is 2."""
  x = _require('abs', asarray(x), *_ARITH)
  if dtypes.is_complex(x.dtype): return core.abs(x)
  return x if dtypes.is_unsigned(x.dtype) else _build(Ops.ABS, x.dtype, [x.uop], x.weak)

def rsqrt(x) -> Array:
  """Elementwise 1 / sqrt(x). `float(lax.rsqrt(4.))` is 0.5."""
  s = sqrt(x)
  return _build(Ops.RECIP, s.dtype, [s.uop], s.weak)

def exp2(x) -> Array:
  """Elementwise 2**x (float dtypes). `float(lax.exp2(3.))` is 8.0."""
  x = _require('exp2', asarray(x), *_FLOAT)
  return exp(core.multiply(x, math.log(2.0)))

def logistic(x) -> Array:
  """Elementwise sigmoid 1 / (1 + exp(-x)). `float(lax.logistic(0.))` is 0.5."""
  x = _require('logistic', asarray(x), *_FLOAT)
  # exp(-|x|) never overflows, so neither the value nor its derivative meets inf * 0 (a NaN gradient at x <= -89
  # in float32 if written 1 / (1 + exp(-x))); the two arms are sigmoid(|x|) and 1 - sigmoid(|x|).
  z = core.exp(core.negative(core.abs(x)))
  positive = core.reciprocal(core.add(z, 1.0))
  return core.where(core.greater_equal(x, 0), positive, core.multiply(z, positive))

def is_finite(x) -> Array:
  """Elementwise: neither infinite nor NaN (float dtypes). `bool(lax.is_finite(1.))` is True."""
  return core.isfinite(_require('is_finite', asarray(x), *_FLOAT))

class RoundingMethod(enum.IntEnum):
  """How `lax.round` breaks ties: away from zero (JAX's default) or to the nearest even value."""
  AWAY_FROM_ZERO = 0
  TO_NEAREST_EVEN = 1

def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO) -> Array:  # noqa: A001 - JAX's name
  """Round to the nearest integer value; ties go away from zero unless rounding_method=TO_NEAREST_EVEN.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.round(jnp.array([0.5, 1.5, -0.5])).tolist()
  [1.0, 2.0, -1.0]
  """
  x = _require('round', asarray(x), *_FLOAT)
  if RoundingMethod(rounding_method) is RoundingMethod.TO_NEAREST_EVEN:
    return _build(Ops.ROUND, x.dtype, [x.uop], x.weak)
  t = core.trunc(x)
  return core.where(core.greater_equal(core.abs(core.subtract(x, t)), 0.5), core.add(t, core.sign(x)), t)

def pow(x, y) -> Array:  # noqa: A001 - JAX's name
  """Elementwise x**y; y has x's dtype or is an integer (then it is converted). `lax.pow(2., 3)` is 8."""
  x, y = asarray(x), asarray(y)
  if dtypes.is_float(x.dtype) and dtypes.is_int(y.dtype): y = core.astype(y, x.dtype)
  (a, b), weak = _operands('pow', jnp_name(Ops.POW), x, y)
  return _build(Ops.POW, a.dtype, [a, b], weak)

_UNSIGNED = {dtypes.int8: dtypes.uint8, dtypes.int16: dtypes.uint16, dtypes.int32: dtypes.uint32,
             dtypes.int64: dtypes.uint64}
_SIGNED = {v: k for k, v in _UNSIGNED.items()}

def _shift_right(name: str, x, y, table: dict) -> Array:
  (a, b), weak = _operands(name, jnp_name(Ops.SHR), x, y)
  _require(name, Array(a), *_INT)
  if a.dtype not in table: return _build(Ops.SHR, a.dtype, [a, b], weak)
  other = table[a.dtype]
  a2, b2 = UOp(Ops.BITCAST, other, (a,)), UOp(Ops.BITCAST, other, (b,))
  return Array(UOp(Ops.BITCAST, a.dtype, (UOp(Ops.SHR, other, (a2, b2)),)), weak)

def shift_right_logical(x, y) -> Array:
  """x >> y filling with zeros, also for signed integers. `lax.shift_right_logical(-8, 28)` is 15."""
  return _shift_right('shift_right_logical', x, y, _UNSIGNED)

def shift_right_arithmetic(x, y) -> Array:
  """x >> y copying the sign bit, also for unsigned integers. `lax.shift_right_arithmetic(-8, 1)` is -4."""
  return _shift_right('shift_right_arithmetic', x, y, _SIGNED)

def convert_element_type(operand, new_dtype) -> Array:
  """`operand` converted to `new_dtype` (floats to ints truncate toward zero). The result is not weak.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.convert_element_type(jnp.array([1.7, -1.7]), jnp.int32).tolist()
  [1, -1]
  """
  return core.astype(operand, new_dtype)

def bitcast_convert_type(operand, new_dtype) -> Array:
  """The bits of `operand` read as `new_dtype`, which must have the same width (e.g. float32 <-> int32)."""
  x, dt = asarray(operand), dtypes.to_dtype(new_dtype, 'new_dtype')
  if dt.itemsize != x.dtype.itemsize:
    raise ValueError(f"lax.bitcast_convert_type: {x.dtype} ({x.dtype.itemsize * 8} bits) and {dt} ({dt.itemsize * 8} "
                     "bits) differ in width; tinyjx bitcasts only between types of one width")
  if dtypes.bfloat16 in (dt, x.dtype): raise TypeError("lax.bitcast_convert_type does not support bfloat16 yet")
  return Array(UOp(Ops.BITCAST, dt, (x.uop,)))

def select(pred, on_true, on_false) -> Array:
  """Elementwise `on_true if pred else on_false`; pred is bool, 0-d or of the cases' shape.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.select(jnp.array([True, False]), jnp.ones(2), jnp.zeros(2)).tolist()
  [1.0, 0.0]
  """
  p = asarray(pred)
  if p.dtype is not dtypes.bool_: raise TypeError(f"lax.select: pred must be bool, got {p.dtype}")
  (t, f), weak = _operands('select', jnp_name(Ops.WHERE), on_true, on_false)
  (pu, tu, fu) = _same_shape('select', [p, Array(t), Array(f)])
  return Array(UOp(Ops.WHERE, t.dtype, (pu, tu, fu)), weak)

def select_n(which, *cases) -> Array:
  """`cases[which]` elementwise; `which` is bool (two cases) or int32 (any number of cases)."""
  if not cases: raise ValueError("lax.select_n needs at least one case")
  w = asarray(which)
  if w.dtype is dtypes.bool_:
    if len(cases) != 2: raise ValueError(f"lax.select_n with a bool selector takes 2 cases, got {len(cases)}")
    return select(w, cases[1], cases[0])
  _require('select_n', w, *_INT)
  out = cases[-1]
  for k in reversed(range(len(cases) - 1)): out = select(core.equal(w, k), cases[k], out)
  return asarray(out)

def clamp(min, x, max) -> Array:  # noqa: A002 - JAX's names
  """Elementwise `min(max(x, min), max)`; the bounds are 0-d or of x's shape. `lax.clamp(0., x, 1.)`."""
  (lo, v, hi), weak = _operands('clamp', 'clip', min, x, max)
  return Array(UOp(Ops.MIN, v.dtype, (UOp(Ops.MAX, v.dtype, (v, lo)), hi)), weak)

def integer_pow(x, y: int) -> Array:
  """x**y for a static Python int y, by repeated multiplication (negative y: the reciprocal, floats only).

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.integer_pow(jnp.array([2., 3.]), 3).tolist()
  [8.0, 27.0]
  """
  x, y = asarray(x), operator.index(y)
  _require('integer_pow', x, *_NUMBER)
  if y < 0 and not dtypes.is_float(x.dtype):
    raise TypeError(f"lax.integer_pow: a negative exponent ({y}) needs a float dtype, got {x.dtype}")
  out, base, n = None, x, builtins.abs(y)
  while n:
    if n & 1: out = base if out is None else core.multiply(out, base)
    n >>= 1
    if n: base = core.multiply(base, base)
  if out is None: return core.ones_like(x)
  return core.reciprocal(out) if y < 0 else out

def square(x) -> Array:
  """Elementwise x * x. `float(lax.square(3.))` is 9.0."""
  return integer_pow(x, 2)

# --- reductions and scans ---
def _reduce(name: str, op: Ops, operand, axes) -> Array:
  x = asarray(operand)
  if op in (Ops.MAX, Ops.MIN): core.no_complex(f"lax.{name}", x.dtype, "complex numbers have no order")
  if op is Ops.MUL and dtypes.is_complex(x.dtype): return core.prod(x, tuple(axes))   # a tree of multiplies
  return Array(x.uop.reduce(op, normalize_axes(tuple(axes), x.ndim)), x.weak)

def reduce_sum(operand, axes) -> Array:
  """Sum over `axes` (a tuple of ints), keeping the dtype. `lax.reduce_sum(jnp.ones((2, 3)), (1,))` is [3, 3]."""
  return _reduce('reduce_sum', Ops.ADD, operand, axes)
def reduce_prod(operand, axes) -> Array:
  """Product over `axes`, keeping the dtype."""
  return _reduce('reduce_prod', Ops.MUL, operand, axes)
def reduce_max(operand, axes) -> Array:
  """Maximum over `axes` (-inf or the dtype's minimum for an empty axis)."""
  return _reduce('reduce_max', Ops.MAX, operand, axes)
def reduce_min(operand, axes) -> Array:
  """Minimum over `axes` (+inf or the dtype's maximum for an empty axis)."""
  return _reduce('reduce_min', Ops.MIN, operand, axes)
def reduce_and(operand, axes) -> Array:
  """Logical and over `axes` of a bool array."""
  return _reduce('reduce_and', Ops.MIN, _require('reduce_and', asarray(operand), 'b', 'a bool dtype'), axes)
def reduce_or(operand, axes) -> Array:
  """Logical or over `axes` of a bool array."""
  return _reduce('reduce_or', Ops.MAX, _require('reduce_or', asarray(operand), 'b', 'a bool dtype'), axes)

def argmax(operand, axis: int, index_dtype) -> Array:
  """Index of the first maximum along `axis` (NaN counts as the maximum), as `index_dtype`."""
  return core.astype(core.argmax(operand, axis), index_dtype)
def argmin(operand, axis: int, index_dtype) -> Array:
  """Index of the first minimum along `axis` (NaN counts as the minimum), as `index_dtype`."""
  return core.astype(core.argmin(operand, axis), index_dtype)

def _cumulative(op: Ops, operand, axis: int, reverse: bool) -> Array:
  x = asarray(operand)
  ax = normalize_axis(axis, x.ndim)
  return Array(UOp(Ops.CUMULATIVE, x.dtype, (x.uop,), (op, ax, builtins.bool(reverse))), x.weak)

def cumsum(operand, axis: int = 0, reverse: bool = False) -> Array:
  """Running sum along `axis` (from the end when `reverse`), keeping the dtype.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.cumsum(jnp.array([1, 2, 3]), reverse=True).tolist()
  [6, 5, 3]
  """
  return _cumulative(Ops.ADD, operand, axis, reverse)
def cumprod(operand, axis: int = 0, reverse: bool = False) -> Array:
  """Running product along `axis`."""
  return _cumulative(Ops.MUL, operand, axis, reverse)
def cummax(operand, axis: int = 0, reverse: bool = False) -> Array:
  """Running maximum along `axis`."""
  return _cumulative(Ops.MAX, operand, axis, reverse)
def cummin(operand, axis: int = 0, reverse: bool = False) -> Array:
  """Running minimum along `axis`."""
  return _cumulative(Ops.MIN, operand, axis, reverse)

# --- contractions ---

def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, out_sharding=None) -> Array:
  """General contraction: dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)).

  The output dims are the batch dims, then lhs's free dims, then rhs's free dims. Both operands must
  have one dtype unless `preferred_element_type` is given (both are then converted to it).

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.dot_general(jnp.ones((2, 3)), jnp.ones((3, 4)), (((1,), (0,)), ((), ()))).shape
  (2, 4)
  """
  canonicalize_precision(precision, 'lax.dot_general')
  a, b = asarray(lhs), asarray(rhs)
  if preferred_element_type is not None:
    a, b = core.astype(a, preferred_element_type), core.astype(b, preferred_element_type)
  if a.dtype is not b.dtype:
    raise TypeError(f"lax.dot_general requires operands of one dtype, got {a.dtype} and {b.dtype}; pass "
                    "preferred_element_type= or convert one with lax.convert_element_type (jnp.matmul promotes)")
  (lc, rc), (lb, rb) = dimension_numbers
  lc, lb = [tuple(normalize_axis(i, a.ndim, 'lhs dimension') for i in d) for d in (lc, lb)]
  rc, rb = [tuple(normalize_axis(i, b.ndim, 'rhs dimension') for i in d) for d in (rc, rb)]
  for kind, l, r in (('contracting', lc, rc), ('batch', lb, rb)):
    if [a.shape[i] for i in l] != [b.shape[i] for i in r]:
      raise TypeError(f"lax.dot_general requires {kind} dimensions of one shape, got {tuple(a.shape[i] for i in l)} "
                      f"and {tuple(b.shape[i] for i in r)} (lhs shape {a.shape}, rhs shape {b.shape})")
  if len(set(lc + lb)) != len(lc + lb) or len(set(rc + rb)) != len(rc + rb):
    raise ValueError(f"lax.dot_general: a dimension is named twice in {dimension_numbers}")
  from tinyjx.numpy.products import dot_general_uop
  return Array(dot_general_uop(a.uop, b.uop, (lc, rc), (lb, rb)))

def dot(lhs, rhs, precision=None, preferred_element_type=None) -> Array:
  """Contract lhs's last axis with rhs's first (vector-vector, matrix-vector, matrix-matrix products)."""
  canonicalize_precision(precision, 'lax.dot')
  a, b = asarray(lhs), asarray(rhs)
  if a.ndim == 0 or b.ndim == 0:
    raise TypeError(f"lax.dot needs arrays of at least 1 dimension, got shapes {a.shape} and {b.shape}")
  return dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())), precision, preferred_element_type)

# --- shapes ---
def broadcast(operand, sizes) -> Array:
  """`operand` with new leading axes of `sizes`. `lax.broadcast(jnp.ones(3), (2,)).shape` is (2, 3)."""
  x, sizes = asarray(operand), tuple(sizes)
  return Array(x.uop.reshape((1,) * len(sizes) + x.shape).expand(sizes + x.shape), x.weak)

def broadcast_in_dim(operand, shape, broadcast_dimensions, out_sharding=None) -> Array:
  """`operand` laid into `shape`: its axis i becomes axis broadcast_dimensions[i] (size 1 or equal).

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.broadcast_in_dim(jnp.ones(3), (2, 3), (1,)).shape
  (2, 3)
  """
  x, shape, dims = asarray(operand), indexing.shape_tuple(shape), tuple(broadcast_dimensions)
  ok = len(dims) == x.ndim and list(dims) == sorted(set(dims)) and builtins.all(0 <= d < len(shape) for d in dims)
  if not ok or builtins.any(x.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
    raise TypeError(f"lax.broadcast_in_dim: cannot place an operand of shape {x.shape} into shape {shape} with "
                    f"broadcast_dimensions={dims} (one strictly increasing dim per operand axis, sizes equal or 1)")
  target = [1] * len(shape)
  for i, d in enumerate(dims): target[d] = x.shape[i]
  u = x.uop if x.uop.op is Ops.CONST else x.uop.reshape(tuple(target))
  return Array(indexing.broadcast_uop(u, shape), x.weak)

def reshape(operand, new_sizes, dimensions=None) -> Array:
  """`operand` reshaped (row-major) to `new_sizes`, after transposing by `dimensions` if given."""
  x, shape = asarray(operand), indexing.shape_tuple(new_sizes, 'new_sizes')
  if dimensions is not None: x = transpose(x, dimensions)
  if math.prod(shape) != x.size:
    raise TypeError(f"lax.reshape: new_sizes {shape} (size {math.prod(shape)}) do not fit an operand of shape "
                    f"{x.shape} (size {x.size}); the total size must stay the same")
  return Array(x.uop.reshape(shape), x.weak)

def transpose(operand, permutation) -> Array:
  """Axes reordered: output axis i is input axis permutation[i]."""
  x, perm = asarray(operand), tuple(operator.index(p) for p in permutation)
  if sorted(perm) != list(range(x.ndim)):
    raise ValueError(f"lax.transpose: permutation {perm} is not a permutation of the {x.ndim} axes of shape {x.shape}")
  return Array(x.uop.permute(perm), x.weak)

def squeeze(array, dimensions) -> Array:
  """Remove the size-1 axes `dimensions`."""
  x = asarray(array)
  dims = normalize_axes(tuple(dimensions), x.ndim)
  for d in dims:
    if x.shape[d] != 1: raise ValueError(f"lax.squeeze: axis {d} of shape {x.shape} has size {x.shape[d]}, not 1")
  return Array(x.uop.reshape(tuple(s for i, s in enumerate(x.shape) if i not in dims)), x.weak)

def expand_dims(array, dimensions) -> Array:
  """Insert size-1 axes at `dimensions` (positions in the output)."""
  x = asarray(array)
  dims = normalize_axes(tuple(dimensions), x.ndim + len(tuple(dimensions)))
  it = iter(x.shape)
  return Array(x.uop.reshape(tuple(1 if i in dims else next(it) for i in range(x.ndim + len(dims)))), x.weak)

def slice(operand, start_indices, limit_indices, strides=None) -> Array:  # noqa: A001 - JAX's name
  """`operand[start:limit:stride]` on every axis, with static bounds (a view).

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.slice(jnp.arange(10), (1,), (8,), (3,)).tolist()
  [1, 4, 7]
  """
  x = asarray(operand)
  strides = (1,) * x.ndim if strides is None else tuple(strides)
  if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
    raise TypeError(f"lax.slice: start_indices, limit_indices and strides need {x.ndim} entries for shape {x.shape}")
  u = x.uop
  for ax, (lo, hi, st) in enumerate(zip(start_indices, limit_indices, strides)):
    if not 0 <= lo <= hi <= x.shape[ax] or st < 1:
      raise ValueError(f"lax.slice: bounds {lo}:{hi}:{st} are not valid for axis {ax} of size {x.shape[ax]} "
                       "(need 0 <= start <= limit <= size and stride >= 1)")
    u = indexing.strided_slice_axis(u, ax, lo, -(-(hi - lo) // st), st)
  return Array(u, x.weak)

def slice_in_dim(operand, start_index, limit_index, stride: int = 1, axis: int = 0) -> Array:
  """`lax.slice` along one axis; None means the start or the end, negative indices count from the end."""
  x = asarray(operand)
  ax = normalize_axis(axis, x.ndim)
  n = x.shape[ax]
  lo = 0 if start_index is None else (start_index + n if start_index < 0 else start_index)
  hi = n if limit_index is None else (limit_index + n if limit_index < 0 else limit_index)
  starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
  starts[ax], limits[ax], strides[ax] = lo, hi, stride
  return slice(x, starts, limits, strides)

def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True) -> Array:
  """Element `index` (static; negative counts from the end) along `axis`, keeping the axis unless told."""
  x = asarray(operand)
  ax = normalize_axis(axis, x.ndim)
  i = index + x.shape[ax] if index < 0 else index
  out = slice_in_dim(x, i, i + 1, 1, ax)
  return out if keepdims else squeeze(out, (ax,))

def pad(operand, padding_value, padding_config) -> Array:
  """Pad with `padding_value`: padding_config has one (low, high, interior) per axis; negative low/high
  remove elements, interior puts that many values between neighbours.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.pad(jnp.array([1., 2.]), 0., [(1, 0, 1)]).tolist()
  [0.0, 1.0, 0.0, 2.0]
  """
  (u, pv), weak = _operands_pad(operand, padding_value)
  config = [tuple(c) for c in padding_config]
  if len(config) != u.ndim or builtins.any(len(c) != 3 for c in config):
    raise ValueError(f"lax.pad: padding_config needs one (low, high, interior) per axis of shape {u.shape}, "
                     f"got {config}")
  inside = UOp.const(True, dtypes.bool_, u.shape)
  for ax, (lo, hi, interior) in enumerate(config):
    if interior < 0: raise ValueError(f"lax.pad: interior padding must be >= 0, got {interior} on axis {ax}")
    u, inside = (_pad_axis(t, ax, lo, hi, interior) for t in (u, inside))
  if pv.op is Ops.CONST and pv.arg[0] == 0 and not (isinstance(pv.arg[0], float) and math.copysign(1, pv.arg[0]) < 0):
    return Array(u, weak)
  return Array(UOp(Ops.WHERE, u.dtype, (inside, u, indexing.broadcast_uop(pv, u.shape))), weak)

def _operands_pad(operand, padding_value):
  x, pv = asarray(operand), asarray(padding_value)
  if pv.ndim: raise TypeError(f"lax.pad: padding_value must be a scalar, got shape {pv.shape}")
  if pv.dtype is not x.dtype:
    raise TypeError(f"lax.pad requires the operand and padding_value to have one dtype, got {x.dtype} and {pv.dtype}")
  return (x.uop, pv.uop), x.weak

def _pad_axis(u: UOp, ax: int, lo: int, hi: int, interior: int) -> UOp:
  n = u.shape[ax]
  if interior and n > 1:
    s = u.shape
    widths = tuple((0, interior) if i == ax + 1 else (0, 0) for i in range(u.ndim + 1))
    u = u.reshape(s[:ax] + (n, 1) + s[ax + 1:]).pad(widths)
    u = u.reshape(s[:ax] + (n * (1 + interior),) + s[ax + 1:])
    u = indexing.shrink_axis(u, ax, 0, n * (1 + interior) - interior)
  u = u.pad(tuple((builtins.max(lo, 0), builtins.max(hi, 0)) if i == ax else (0, 0) for i in range(u.ndim)))
  size = u.shape[ax]
  start, stop = builtins.max(-lo, 0), size - builtins.max(-hi, 0)
  if stop < start:
    raise ValueError(f"lax.pad: negative padding ({lo}, {hi}) removes more than the {size} elements of axis {ax}")
  return indexing.shrink_axis(u, ax, start, stop)

def rev(operand, dimensions) -> Array:
  """Reverse the order of elements along `dimensions`."""
  x = asarray(operand)
  return Array(x.uop.flip(normalize_axes(tuple(dimensions), x.ndim)), x.weak)

def concatenate(operands, dimension: int) -> Array:
  """Join arrays of one dtype along `dimension` (other axes must match)."""
  arrs = [asarray(o) for o in operands]
  if not arrs: raise ValueError("lax.concatenate needs at least one operand")
  if builtins.any(a.dtype is not arrs[0].dtype for a in arrs):
    raise TypeError(f"lax.concatenate requires operands of one dtype, got {', '.join(str(a.dtype) for a in arrs)}")
  from tinyjx.numpy.shape import concatenate as jnp_concatenate
  return jnp_concatenate(arrs, axis=dimension)

# --- creation ---
def iota(dtype, size: int, dimension: int = 0, sharding=None) -> Array:
  """[0, 1, ..., size - 1] of `dtype`. `lax.iota(jnp.int32, 3).tolist()` is [0, 1, 2]."""
  return broadcasted_iota(dtype, (size,), 0)

def broadcasted_iota(dtype, shape, dimension: int, sharding=None) -> Array:
  """An array of `shape` counting 0, 1, ... along `dimension` (constant along the others)."""
  shape = indexing.shape_tuple(shape)
  return Array(UOp(Ops.IOTA, dtypes.to_dtype(dtype), (), (shape, normalize_axis(dimension, len(shape), 'dimension'))))

def full(shape, fill_value, dtype=None, sharding=None) -> Array:
  """An array of `shape` filled with `fill_value` (of `dtype`, default the value's own)."""
  return core.full(shape, fill_value, dtype)

def full_like(x, fill_value, dtype=None, shape=None, sharding=None) -> Array:
  """Like `full`, with x's shape and dtype unless given."""
  return core.full_like(x, fill_value, dtype, shape)

# --- sorting ---
def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
  """Sort along `dimension`. Given a sequence of arrays, sort all of them by the first `num_keys`
  (lexicographically) and return them all.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> [v.tolist() for v in lax.sort((jnp.array([3, 1, 1]), jnp.array([0, 5, 4])), num_keys=2)]
  [[1, 1, 3], [4, 5, 0]]
  """
  single = not isinstance(operand, (tuple, list))
  arrs = [asarray(o) for o in ([operand] if single else operand)]
  if builtins.any(a.shape != arrs[0].shape for a in arrs):
    raise TypeError(f"lax.sort requires operands of one shape, got {[a.shape for a in arrs]}")
  if not 1 <= num_keys <= len(arrs):
    raise ValueError(f"lax.sort: num_keys={num_keys} must be between 1 and {len(arrs)}")
  ax = normalize_axis(dimension, arrs[0].ndim, 'dimension')
  perm = indexing.argsort(arrs[num_keys - 1], ax)
  for k in reversed(range(num_keys - 1)):
    perm = _take(perm, indexing.argsort(_take(arrs[k], perm, ax), ax), ax)
  outs = [_take(a, perm, ax) for a in arrs]
  return outs[0] if single else tuple(outs)

def _take(x: Array, perm: Array, ax: int) -> Array: return indexing.take_along_axis(x, perm, ax, mode='clip')

def sort_key_val(keys, values, dimension: int = -1) -> tuple:
  """`keys` sorted along `dimension`, and `values` permuted the same way."""
  return sort((keys, values), dimension, num_keys=1)

def top_k(operand, k: int) -> tuple:
  """The `k` largest entries along the last axis and their indices (ties: lower index first).

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> [v.tolist() for v in lax.top_k(jnp.array([1, 3, 3, 2]), 2)]
  [[3, 3], [1, 2]]
  """
  x, k = asarray(operand), operator.index(k)
  if x.ndim == 0 or not 0 <= k <= x.shape[-1]:
    raise ValueError(f"lax.top_k: k={k} must be between 0 and the last axis size of shape {x.shape}")
  perm = indexing.argsort(x, -1, descending=True)
  idx = Array(indexing.shrink_axis(perm.uop, x.ndim - 1, 0, k))
  return _take(x, idx, x.ndim - 1), idx
