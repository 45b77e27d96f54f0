"""Elementwise functions of tinyjx.numpy against numpy: hypothesis draws shapes (scalars and size-0 axes
included), broadcasting and dtypes; result dtypes must match JAX's, written below as data (generated once with
JAX 0.10: `jnp.<name>(jnp.ones((2,), dtype)).dtype`, '-' where JAX raises)."""
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from hypothesis.extra import numpy as hnp
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import dtypes
from conftest import examples

pytestmark = pytest.mark.usefixtures('semantics_device')

DTYPES = ['bool', 'int8', 'int32', 'uint8', 'uint32', 'float16', 'bfloat16', 'float32']
SHORT = {'b': 'bool', 'i8': 'int8', 'i32': 'int32', 'u8': 'uint8', 'u32': 'uint32', 'f16': 'float16',
         'bf16': 'bfloat16', 'f32': 'float32'}

UNARY_DTYPES = """
   negative    -   i8  i32   u8  u32  f16 bf16  f32
   positive    b   i8  i32   u8  u32  f16 bf16  f32
 reciprocal  f32  f32  f32  f32  f32  f16 bf16  f32
        exp  f32  f32  f32  f32  f32  f16 bf16  f32
       exp2  f32  f32  f32  f32  f32  f16 bf16  f32
      expm1  f32  f32  f32  f32  f32  f16 bf16  f32
        log  f32  f32  f32  f32  f32  f16 bf16  f32
       log2  f32  f32  f32  f32  f32  f16 bf16  f32
      log10  f32  f32  f32  f32  f32  f16 bf16  f32
      log1p  f32  f32  f32  f32  f32  f16 bf16  f32
       sqrt  f32  f32  f32  f32  f32  f16 bf16  f32
       cbrt  f32  f32  f32  f32  f32  f16 bf16  f32
     square  i32   i8  i32   u8  u32  f16 bf16  f32
        abs    b   i8  i32   u8  u32  f16 bf16  f32
       fabs  f32  f32  f32  f32  f32  f16 bf16  f32
       sign    -   i8  i32   u8  u32  f16 bf16  f32
    signbit    b    b    b    b    b    b    b    b
        sin  f32  f32  f32  f32  f32  f16 bf16  f32
        cos  f32  f32  f32  f32  f32  f16 bf16  f32
        tan  f32  f32  f32  f32  f32  f16 bf16  f32
     arcsin  f32  f32  f32  f32  f32  f16 bf16  f32
     arccos  f32  f32  f32  f32  f32  f16 bf16  f32
     arctan  f32  f32  f32  f32  f32  f16 bf16  f32
       sinh  f32  f32  f32  f32  f32  f16 bf16  f32
       cosh  f32  f32  f32  f32  f32  f16 bf16  f32
       tanh  f32  f32  f32  f32  f32  f16 bf16  f32
    arcsinh  f32  f32  f32  f32  f32  f16 bf16  f32
    arccosh  f32  f32  f32  f32  f32  f16 bf16  f32
    arctanh  f32  f32  f32  f32  f32  f16 bf16  f32
    deg2rad  f32  f32  f32  f32  f32  f16 bf16  f32
    rad2deg  f32  f32  f32  f32  f32  f16 bf16  f32
       sinc  f32  f32  f32  f32  f32  f16 bf16  f32
      floor    b   i8  i32   u8  u32  f16 bf16  f32
       ceil    b   i8  i32   u8  u32  f16 bf16  f32
      trunc    b   i8  i32   u8  u32  f16 bf16  f32
      round    -   i8  i32   u8  u32  f16 bf16  f32
       rint  f32  f32  f32  f32  f32  f16 bf16  f32
      isnan    b    b    b    b    b    b    b    b
      isinf    b    b    b    b    b    b    b    b
   isfinite    b    b    b    b    b    b    b    b
 nan_to_num    b   i8  i32   u8  u32  f16 bf16  f32
logical_not    b    b    b    b    b    b    b    b
bitwise_not    b   i8  i32   u8  u32    -    -    -
"""

BINARY_DTYPES = """
          add    b   i8  i32   u8  u32  f16 bf16  f32
     subtract    -   i8  i32   u8  u32  f16 bf16  f32
     multiply    b   i8  i32   u8  u32  f16 bf16  f32
       divide  f32  f32  f32  f32  f32  f16 bf16  f32
  true_divide  f32  f32  f32  f32  f32  f16 bf16  f32
 floor_divide  i32   i8  i32   u8  u32  f16 bf16  f32
          mod  i32   i8  i32   u8  u32  f16 bf16  f32
         fmod  i32   i8  i32   u8  u32  f16 bf16  f32
        power  i32   i8  i32   u8  u32  f16 bf16  f32
  float_power  f32  f32  f32  f32  f32  f16 bf16  f32
      maximum    b   i8  i32   u8  u32  f16 bf16  f32
      minimum    b   i8  i32   u8  u32  f16 bf16  f32
      arctan2  f32  f32  f32  f32  f32  f16 bf16  f32
        hypot  f32  f32  f32  f32  f32  f16 bf16  f32
     copysign  f32  f32  f32  f32  f32  f16 bf16  f32
    logaddexp  f32  f32  f32  f32  f32  f16 bf16  f32
    heaviside  f32  f32  f32  f32  f32  f16 bf16  f32
        equal    b    b    b    b    b    b    b    b
    not_equal    b    b    b    b    b    b    b    b
         less    b    b    b    b    b    b    b    b
   less_equal    b    b    b    b    b    b    b    b
      greater    b    b    b    b    b    b    b    b
greater_equal    b    b    b    b    b    b    b    b
  logical_and    b    b    b    b    b    b    b    b
   logical_or    b    b    b    b    b    b    b    b
  logical_xor    b    b    b    b    b    b    b    b
  bitwise_and    b   i8  i32   u8  u32    -    -    -
   bitwise_or    b   i8  i32   u8  u32    -    -    -
  bitwise_xor    b   i8  i32   u8  u32    -    -    -
   left_shift  i32   i8  i32   u8  u32    -    -    -
  right_shift  i32   i8  i32   u8  u32    -    -    -
"""

def parse(table):
  out = {}
  for line in table.strip('\n').splitlines():
    name, *cols = line.split()
    out[name] = {d: (SHORT[c] if c != '-' else None) for d, c in zip(DTYPES, cols)}
  return out

UNARY_OUT, BINARY_OUT = parse(UNARY_DTYPES), parse(BINARY_DTYPES)

# --- value domains: (low, high) for floats; ints are clipped to their type's range ---
# (bounds are exact in float16, as hypothesis requires)
DOMAINS = {'any': (-100, 100), 'small': (-8, 8), 'pos': (0.125, 100), 'nonneg': (0, 100), 'unit': (-1, 1),
           'open_unit': (-0.96875, 0.96875), 'ge1': (1, 100), 'tan': (-1.375, 1.375), 'nonzero': (-100, 100),
           'base': (0.125, 8), 'exponent': (-3, 3), 'int_exponent': (0, 5), 'int_base': (-6, 6),
           'intlike': (-100, 100), 'divisor': (-9, 9), 'special': (-100, 100), 'shift': (0, 0)}

def elements(dtype: str, domain: str):
  lo, hi = DOMAINS[domain]
  if dtype == 'bool': return st.just(True) if domain in ('nonzero', 'divisor') else st.booleans()
  npd = np.dtype(dtype if dtype != 'bfloat16' else 'float32')
  if npd.kind in 'iu':
    info = np.iinfo(npd)
    if domain == 'shift': return st.integers(0, info.bits - 1)
    if domain in ('any', 'special'): lo, hi = info.min, info.max
    out = st.integers(builtins_max(info.min, math.ceil(lo)), builtins_min(info.max, math.floor(hi)))
    return out.filter(lambda v: v != 0) if domain in ('nonzero', 'divisor') else out
  if domain in ('intlike', 'divisor', 'int_exponent', 'int_base'):
    out = st.integers(int(lo), int(hi)).map(float)
    return out.filter(lambda v: v != 0) if domain == 'divisor' else out
  width = 16 if dtype == 'float16' else 32
  special = domain == 'special'
  out = st.floats(lo, hi, width=width) if not special else \
    st.one_of(st.floats(lo, hi, width=width), st.sampled_from([math.nan, math.inf, -math.inf, -0.0]))
  return out.filter(lambda v: abs(v) > 0.05) if domain == 'nonzero' else out

builtins_max, builtins_min = max, min

def draw_array(draw, dtype: str, shape, domain: str) -> np.ndarray:
  host = 'float32' if dtype == 'bfloat16' else dtype
  x = draw(hnp.arrays(np.dtype(host), shape, elements=elements(dtype, domain)))
  return dtypes.round_bf16(x) if dtype == 'bfloat16' else x

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=3)

TOL = {'float16': (2e-3, 2e-3), 'bfloat16': (2e-2, 2e-2), 'float32': (2e-5, 1e-5)}

def assert_matches(got, want: np.ndarray, dtype: str, tol_scale: float = 1.0):
  assert got.dtype.name == dtype, (got.dtype, dtype)
  assert got.shape == want.shape
  value = np.asarray(got)
  if dtype in TOL:
    rtol, atol = TOL[dtype]
    want = want.astype(np.float64)
    if dtype == 'bfloat16': want = dtypes.round_bf16(want.astype(np.float32)).astype(np.float64)
    np.testing.assert_allclose(value.astype(np.float64), want, rtol=rtol * tol_scale, atol=atol * tol_scale,
                               equal_nan=True)
  else:
    np.testing.assert_array_equal(value, want.astype(np.dtype(dtype)))

def reference(fn, inputs, compute: str):
  """numpy's answer with the inputs converted to `compute` (bfloat16 computes in float32)."""
  host = np.float32 if compute == 'bfloat16' else np.dtype(compute)
  with np.errstate(all='ignore'):
    return np.asarray(fn(*[x.astype(host) for x in inputs]))

def as_input(x: np.ndarray, dtype: str):
  return jnp.asarray(x, dtype=dtype)

# name -> (numpy function, domain of each input, tolerance scale)
UNARY = {
  'negative': (np.negative, 'special', 1), 'positive': (lambda v: v, 'any', 1),
  'reciprocal': (np.reciprocal, 'nonzero', 1), 'exp': (np.exp, 'small', 1), 'exp2': (np.exp2, 'small', 1),
  'expm1': (np.expm1, 'small', 1), 'log': (np.log, 'pos', 1),
  'log2': (np.log2, 'pos', 1), 'log10': (np.log10, 'pos', 1), 'log1p': (np.log1p, 'nonneg', 1),
  'sqrt': (np.sqrt, 'nonneg', 1), 'cbrt': (np.cbrt, 'any', 2), 'square': (np.square, 'any', 1),
  'abs': (np.abs, 'special', 1), 'fabs': (np.fabs, 'any', 1), 'sign': (np.sign, 'special', 1),
  'signbit': (np.signbit, 'special', 1), 'sin': (np.sin, 'any', 1), 'cos': (np.cos, 'any', 1),
  'tan': (np.tan, 'tan', 2),
  'arcsin': (np.arcsin, 'unit', 1), 'arccos': (np.arccos, 'unit', 1), 'arctan': (np.arctan, 'any', 1),
  'sinh': (np.sinh, 'small', 1), 'cosh': (np.cosh, 'small', 1), 'tanh': (np.tanh, 'any', 1),
  'arcsinh': (np.arcsinh, 'any', 2), 'arccosh': (np.arccosh, 'ge1', 2), 'arctanh': (np.arctanh, 'open_unit', 2),
  'deg2rad': (np.deg2rad, 'any', 1), 'rad2deg': (np.rad2deg, 'any', 1), 'sinc': (np.sinc, 'small', 4),
  'floor': (np.floor, 'special', 1), 'ceil': (np.ceil, 'special', 1), 'trunc': (np.trunc, 'special', 1),
  'round': (np.round, 'any', 1), 'rint': (np.rint, 'any', 1), 'isnan': (np.isnan, 'special', 1),
  'isinf': (np.isinf, 'special', 1), 'isfinite': (np.isfinite, 'special', 1), 'nan_to_num': (None, 'special', 1),
  'logical_not': (np.logical_not, 'any', 1), 'bitwise_not': (np.invert, 'any', 1),
}

def nan_to_num_ref(x):
  fi = np.finfo(x.dtype)
  return np.nan_to_num(x, nan=0.0, posinf=fi.max, neginf=fi.min)

def unary_case(name, dtype):
  out = UNARY_OUT[name][dtype]
  fn, domain, scale = UNARY[name]
  return out, fn or nan_to_num_ref, domain, scale

@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_unary(name, data):
  ok = [d for d in DTYPES if UNARY_OUT[name][d] is not None and d != 'bfloat16']
  dtype = data.draw(st.sampled_from(ok))
  out, fn, domain, scale = unary_case(name, dtype)
  x = draw_array(data.draw, dtype, data.draw(SHAPES), domain)
  got = getattr(jnp, name)(as_input(x, dtype))
  compute = out if out != 'bool' else dtype
  if name == 'nan_to_num' and dtype not in TOL: fn = lambda v: v  # noqa: E731 - integers pass through
  assert_matches(got, reference(fn, [x], compute), out, scale)

FLOAT_UNARY = sorted(n for n in UNARY if UNARY_OUT[n]['bfloat16'] is not None and n != 'bitwise_not')

@pytest.mark.parametrize("name", FLOAT_UNARY)
@settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_unary_bfloat16(name, data):
  out, fn, domain, _ = unary_case(name, 'bfloat16')
  x = draw_array(data.draw, 'bfloat16', data.draw(SHAPES), domain)
  got = getattr(jnp, name)(as_input(x, 'bfloat16'))
  if name == 'nan_to_num': fn = lambda v: np.nan_to_num(v, nan=0.0, posinf=jnp.finfo('bfloat16').max,  # noqa: E731
                                                     neginf=jnp.finfo('bfloat16').min)
  assert_matches(got, reference(fn, [x], 'bfloat16' if out != 'bool' else 'float32'), out)

BINARY = {
  'add': (np.add, 'special', 'special', 1), 'subtract': (np.subtract, 'special', 'special', 1),
  'multiply': (np.multiply, 'any', 'any', 1), 'divide': (np.divide, 'any', 'nonzero', 1),
  'true_divide': (np.true_divide, 'any', 'nonzero', 1), 'floor_divide': (np.floor_divide, 'intlike', 'divisor', 1),
  'mod': (np.mod, 'intlike', 'divisor', 1), 'fmod': (np.fmod, 'intlike', 'divisor', 1),
  'power': (np.power, 'base', 'exponent', 2), 'float_power': (np.power, 'base', 'exponent', 2),
  'maximum': (np.maximum, 'special', 'special', 1), 'minimum': (np.minimum, 'special', 'special', 1),
  'arctan2': (np.arctan2, 'any', 'any', 1), 'hypot': (np.hypot, 'special', 'any', 1),
  'copysign': (np.copysign, 'any', 'special', 1), 'logaddexp': (np.logaddexp, 'any', 'any', 1),
  'heaviside': (np.heaviside, 'intlike', 'any', 1), 'equal': (np.equal, 'special', 'special', 1),
  'not_equal': (np.not_equal, 'special', 'special', 1), 'less': (np.less, 'special', 'special', 1),
  'less_equal': (np.less_equal, 'special', 'special', 1), 'greater': (np.greater, 'special', 'special', 1),
  'greater_equal': (np.greater_equal, 'special', 'special', 1), 'logical_and': (np.logical_and, 'special', 'any', 1),
  'logical_or': (np.logical_or, 'special', 'any', 1), 'logical_xor': (np.logical_xor, 'special', 'any', 1),
  'bitwise_and': (np.bitwise_and, 'any', 'any', 1), 'bitwise_or': (np.bitwise_or, 'any', 'any', 1),
  'bitwise_xor': (np.bitwise_xor, 'any', 'any', 1), 'left_shift': (np.left_shift, 'any', 'shift', 1),
  'right_shift': (np.right_shift, 'any', 'shift', 1),
}
INT_DOMAINS = {'power': ('int_base', 'int_exponent'), 'floor_divide': ('intlike', 'divisor'),
               'mod': ('intlike', 'divisor'), 'fmod': ('intlike', 'divisor')}

def binary_inputs(data, name, dtype):
  fn, da, db, scale = BINARY[name]
  if dtype != 'bool' and not dtype.startswith('float') and dtype != 'bfloat16' and name in INT_DOMAINS:
    da, db = INT_DOMAINS[name]
  sa, sb = data.draw(PAIRS).input_shapes
  return fn, draw_array(data.draw, dtype, sa, da), draw_array(data.draw, dtype, sb, db), scale

@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_binary(name, data):
  ok = [d for d in DTYPES if BINARY_OUT[name][d] is not None and d != 'bfloat16']
  dtype = data.draw(st.sampled_from(ok))
  out = BINARY_OUT[name][dtype]
  fn, a, b, scale = binary_inputs(data, name, dtype)
  got = getattr(jnp, name)(as_input(a, dtype), as_input(b, dtype))
  compute = out if out != 'bool' else dtype
  assert_matches(got, reference(fn, [a, b], compute), out, scale)

FLOAT_BINARY = sorted(n for n in BINARY if BINARY_OUT[n]['bfloat16'] is not None)

@pytest.mark.parametrize("name", FLOAT_BINARY)
@settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_binary_bfloat16(name, data):
  out = BINARY_OUT[name]['bfloat16']
  fn, a, b, _ = binary_inputs(data, name, 'bfloat16')
  got = getattr(jnp, name)(as_input(a, 'bfloat16'), as_input(b, 'bfloat16'))
  assert_matches(got, reference(fn, [a, b], 'bfloat16' if out != 'bool' else 'float32'), out)

@pytest.mark.parametrize("name,dtype", [(n, d) for n, row in {**UNARY_OUT, **BINARY_OUT}.items()
                                        for d, out in row.items() if out is None])
def test_unsupported_dtype_raises(name, dtype):
  arity = 1 if name in UNARY_OUT else 2
  with pytest.raises(TypeError, match=r"bool|float"):
    getattr(jnp, name)(*[jnp.ones((2,), dtype)] * arity)

# --- operators with Python scalars: weak types do not widen the array's dtype ---
@settings(max_examples=examples(30), deadline=None)
@given(data=st.data())
def test_python_scalar_operands(data):
  dtype = data.draw(st.sampled_from(['int8', 'uint8', 'int32', 'float16', 'float32']))
  x = draw_array(data.draw, dtype, data.draw(SHAPES), 'small')
  s = data.draw(st.integers(0, 5))
  a = as_input(x, dtype)
  for got, fn in ((a + s, np.add), (s + a, lambda u, v: np.add(v, u)), (a * s, np.multiply), (a - s, np.subtract),
                  (s - a, lambda u, v: np.subtract(v, u)), (jnp.maximum(a, s), np.maximum)):
    assert not got.weak
    assert_matches(got, reference(lambda u: fn(u, np.asarray(s, u.dtype)), [x], dtype), dtype)
  f = a * 0.5
  want = 'float32' if dtype.startswith('int') or dtype.startswith('uint') else dtype
  assert f.dtype.name == want and f.weak == (want != dtype)

# --- where and clip, with three-way broadcasting ---
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data(), shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3))
def test_where(data, shapes):
  dtype = data.draw(st.sampled_from(['bool', 'int8', 'uint32', 'float16', 'float32']))
  sc, sa, sb = shapes.input_shapes
  c = data.draw(hnp.arrays(np.bool_, sc))
  a, b = draw_array(data.draw, dtype, sa, 'special'), draw_array(data.draw, dtype, sb, 'special')
  got = jnp.where(jnp.asarray(c), as_input(a, dtype), as_input(b, dtype))
  assert_matches(got, np.where(c, a, b), dtype)

def test_where_promotes_and_keeps_weak_types():
  out = jnp.where(jnp.asarray([True, False]), 1, 2.0)
  assert out.dtype is jnp.float32 and out.weak and out.tolist() == [1.0, 2.0]
  out = jnp.where(1, jnp.asarray([1], jnp.int8), 2)
  assert out.dtype is jnp.int8 and not out.weak
  assert jnp.where(jnp.asarray([0, 3]), 1, 0).tolist() == [0, 1]   # a non-bool condition means != 0
  with pytest.raises(TypeError, match="one argument or three"):
    jnp.where(True, 1)

@settings(max_examples=examples(30), deadline=None)
@given(data=st.data())
def test_clip(data):
  dtype = data.draw(st.sampled_from(['int8', 'int32', 'uint8', 'float16', 'float32']))
  x = draw_array(data.draw, dtype, data.draw(SHAPES), 'any')
  lo = data.draw(st.one_of(st.none(), st.integers(-50, 0)))
  hi = data.draw(st.one_of(st.none(), st.integers(1, 50)))
  if dtype.startswith('uint') and lo is not None: lo = 0
  got = jnp.clip(as_input(x, dtype), lo, hi)
  want = x if lo is None and hi is None else np.clip(x, lo, hi)
  assert_matches(got, want, dtype)

def test_clip_weak_float_bounds_promote_ints():
  out = jnp.clip(jnp.asarray([1, 5, 9]), 2.5, 7)
  assert out.dtype is jnp.float32 and out.tolist() == [2.5, 5.0, 7.0]
  assert jnp.clip(jnp.asarray([1, 5, 9], jnp.uint8), 2, 7).dtype is jnp.uint8

# --- integer and float semantics that numpy leaves to warnings: JAX's answers, generated with JAX ---
def test_integer_division_by_zero_matches_jax():
  x, zero = jnp.asarray([7, -7, 0]), jnp.asarray([0, 0, 0])
  assert jnp.floor_divide(x, zero).tolist() == [-2, -2, -1]
  assert jnp.mod(x, zero).tolist() == [0, 0, 0]

def test_float_floor_division_matches_jax():
  assert jnp.floor_divide(jnp.asarray([1.0, -1.0]), 0.0).tolist() == [math.inf, -math.inf]
  assert math.isnan(jnp.floor_divide(0.0, jnp.asarray(0.0)).item())
  assert jnp.floor_divide(jnp.asarray([1.0]), 0.1).tolist() == [9.0]   # not floor(1 / 0.1) == 10
  assert all(math.isnan(v) for v in jnp.mod(jnp.asarray([1.0, -1.0]), 0.0).tolist())
  q, r = jnp.divmod(jnp.asarray([7.5, -7.5]), 2.0)
  assert q.tolist() == [3.0, -4.0] and r.tolist() == [1.5, 0.5]

def test_integer_power_matches_jax():
  assert jnp.power(jnp.asarray([2, 3, 1, -1]), jnp.asarray([-1, 2, -3, -3])).tolist() == [0, 9, 1, -1]
  assert jnp.power(jnp.asarray([2], jnp.int8), 9).tolist() == [0]       # wraps in int8
  assert jnp.power(jnp.asarray([True]), 2).dtype is jnp.int32
  out = jnp.power(jnp.asarray([2], jnp.int8), 2.0)
  assert out.dtype is jnp.float32 and out.weak and out.tolist() == [4.0]
  assert jnp.power(2, jnp.asarray([0.5])).tolist() == [pytest.approx(math.sqrt(2))]
  assert (jnp.asarray([3.0]) ** 2).tolist() == [9.0] and (2 ** jnp.asarray([3])).tolist() == [8]
  for base in (jnp.asarray([2, 3]), jnp.asarray([2], jnp.uint8), jnp.asarray([True])):   # a static negative exponent
    with pytest.raises(TypeError, match=r"Integers cannot be raised to negative powers, got \w+\[\d\] \*\* -2"):
      base ** -2
  assert (jnp.asarray([2.0]) ** -2).tolist() == [0.25]

@pytest.mark.parametrize("dt", [np.float32, np.float16, np.float64])
def test_nextafter_matches_numpy_bit_for_bit(dt):
  """jnp.nextafter: one step of the bit pattern toward x2; x2 where equal (so -0.0 after 0.0 toward -0.0), NaN where
  either is, the smallest subnormal with x2's sign after a zero, the largest finite after an infinity; eager and
  jitted, broadcasting, and bfloat16 (a float32's top half: steps of 2**-7 at 1, as JAX's)."""
  info = np.finfo(dt)
  xs = np.array([1.0, -1.0, 0.0, -0.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, info.max, info.smallest_subnormal,
                 -info.smallest_subnormal, 5.0, info.tiny, 2.0], dt)
  ys = np.array([2.0, 0.0, 1.0, 1.0, -1.0, -0.0, 0.0, np.inf, 1.0, 1.0, np.inf, 0.0, 0.0, np.nan, 0.0, -3.0], dt)
  want = np.nextafter(xs, ys).view(f'u{np.dtype(dt).itemsize}')
  with tinyjx.settings.Context(JAX_ENABLE_X64=dt is np.float64):
    for got in (jnp.nextafter(jnp.asarray(xs), jnp.asarray(ys)), tinyjx.jit(jnp.nextafter)(xs, ys)):
      assert got.dtype.name == np.dtype(dt).name
      np.testing.assert_array_equal(np.asarray(got).view(want.dtype), want)
  assert jnp.nextafter(jnp.ones((2, 1)), jnp.zeros(3)).shape == (2, 3)
  b = jnp.nextafter(jnp.asarray([1.0, 0.0, -1.0], jnp.bfloat16), jnp.asarray([2.0, -1.0, 0.0], jnp.bfloat16))
  assert b.dtype is jnp.bfloat16 and np.asarray(b.astype(jnp.float32)).tolist() == [1.0078125, -2.0 ** -133, -0.99609375]
  with pytest.raises(TypeError, match="complex"):
    jnp.nextafter(jnp.asarray([1j]), 0.0)

def test_exact_results_where_jax_is_exact():
  assert jnp.exp2(jnp.asarray([3.0, -1.0])).tolist() == [8.0, 0.5]
  assert jnp.log2(jnp.asarray([8.0])).tolist() == [3.0]
  assert jnp.sign(jnp.asarray([-0.0])).tolist() == [0.0]
  assert np.signbit(np.asarray(jnp.arcsinh(jnp.asarray([-0.0])))).all()
  assert jnp.hypot(jnp.asarray([300.0], jnp.float16), 400.0).tolist() == [500.0]   # no overflow in x*x
  assert jnp.hypot(jnp.asarray([math.inf]), math.nan).tolist() == [math.inf]
  assert jnp.round(jnp.asarray([0.5, 1.5, 2.5, -0.5])).tolist() == [0.0, 2.0, 2.0, -0.0]
  assert jnp.round(jnp.asarray([1.25, 2.5, -0.5]), 1).tolist() == [pytest.approx(1.2), 2.5, -0.5]
  assert jnp.nan_to_num(jnp.asarray([math.nan, math.inf, -math.inf], jnp.float16)).tolist() == [0.0, 65504.0, -65504.0]
  assert jnp.nan_to_num(jnp.asarray([math.nan, math.inf]), nan=1.0, posinf=2.0).tolist() == [1.0, 2.0]

def test_unary_functions_on_python_scalars_are_weak():
  out = jnp.exp(2)
  assert out.dtype is jnp.float32 and out.weak and out.item() == pytest.approx(math.exp(2))
  assert jnp.negative(jnp.asarray(2.0)).weak
  assert not jnp.sin(jnp.asarray([1], jnp.uint32)).weak
  assert not jnp.true_divide(jnp.asarray([1], jnp.uint32), 2).weak

def test_broadcasting_error_names_both_shapes():
  with pytest.raises(ValueError, match=r"add.*\(3,\).*\(4,\)"):
    jnp.zeros(3) + jnp.zeros(4)
  with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
    jnp.multiply(jnp.zeros((2, 3)), jnp.zeros((3, 2)))
  with pytest.raises(ValueError, match=r"condition: \(2,\).*x: \(3,\)"):
    jnp.where(jnp.zeros(2, bool), jnp.zeros(3), 0.0)

def test_bitwise_on_floats_names_the_dtype():
  with pytest.raises(TypeError, match="float32"):
    jnp.bitwise_and(jnp.ones(2), jnp.ones(2))
  with pytest.raises(TypeError, match="float32"):
    jnp.left_shift(jnp.ones(2), 1)

def test_shifts_past_the_bit_width():
  x = jnp.asarray([1, -8], jnp.int8)
  assert jnp.left_shift(x, jnp.asarray([8, 9], jnp.int8)).tolist() == [0, 0]
  assert jnp.right_shift(x, jnp.asarray([8, 9], jnp.int8)).tolist() == [0, -1]
