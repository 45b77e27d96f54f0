"""dtypes: JAX's promotion table (written here as data, generated once with JAX 0.10), weak Python scalars,
result_type, astype, finfo/iinfo and the 64-bit switch."""
import math
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import dtypes

pytestmark = pytest.mark.usefixtures('semantics_device')

SHORT = {'b': 'bool', 'i8': 'int8', 'i16': 'int16', 'i32': 'int32', 'i64': 'int64', 'u8': 'uint8', 'u16': 'uint16',
         'u32': 'uint32', 'u64': 'uint64', 'f16': 'float16', 'bf16': 'bfloat16', 'f32': 'float32', 'f64': 'float64'}

# jnp.promote_types(row, column), then the dtype of `jnp.zeros((), row) + 1`, `+ 1.0` and `+ True`
# (a trailing * marks a weak-typed result). Generated with JAX, jax_enable_x64 off.
TABLE_X32 = """
        b   i8  i16  i32  i64   u8  u16  u32  u64  f16 bf16  f32  f64  int  flt bool
   b    b   i8  i16  i32  i64   u8  u16  u32  u64  f16 bf16  f32  f64 i32* f32*    b
  i8   i8   i8  i16  i32  i64  i16  i32  i32  f64  f16 bf16  f32  f64   i8 f32*   i8
 i16  i16  i16  i16  i32  i64  i16  i32  i32  f64  f16 bf16  f32  f64  i16 f32*  i16
 i32  i32  i32  i32  i32  i64  i32  i32  i32  f64  f16 bf16  f32  f64  i32 f32*  i32
 i64  i64  i64  i64  i64  i64  i64  i64  i64  f64  f16 bf16  f32  f64  i32 f32*  i32
  u8   u8  i16  i16  i32  i64   u8  u16  u32  u64  f16 bf16  f32  f64   u8 f32*   u8
 u16  u16  i32  i32  i32  i64  u16  u16  u32  u64  f16 bf16  f32  f64  u16 f32*  u16
 u32  u32  i32  i32  i32  i64  u32  u32  u32  u64  f16 bf16  f32  f64  u32 f32*  u32
 u64  u64  f64  f64  f64  f64  u64  u64  u64  u64  f16 bf16  f32  f64  u32 f32*  u32
 f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f32  f64  f16  f16  f16
bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16  f32 bf16  f32  f64 bf16 bf16 bf16
 f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64  f32  f32  f32
 f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f32  f32  f32
"""

# The same with jax_enable_x64 on.
TABLE_X64 = """
        b   i8  i16  i32  i64   u8  u16  u32  u64  f16 bf16  f32  f64  int  flt bool
   b    b   i8  i16  i32  i64   u8  u16  u32  u64  f16 bf16  f32  f64 i64* f64*    b
  i8   i8   i8  i16  i32  i64  i16  i32  i64  f64  f16 bf16  f32  f64   i8 f64*   i8
 i16  i16  i16  i16  i32  i64  i16  i32  i64  f64  f16 bf16  f32  f64  i16 f64*  i16
 i32  i32  i32  i32  i32  i64  i32  i32  i64  f64  f16 bf16  f32  f64  i32 f64*  i32
 i64  i64  i64  i64  i64  i64  i64  i64  i64  f64  f16 bf16  f32  f64  i64 f64*  i64
  u8   u8  i16  i16  i32  i64   u8  u16  u32  u64  f16 bf16  f32  f64   u8 f64*   u8
 u16  u16  i32  i32  i32  i64  u16  u16  u32  u64  f16 bf16  f32  f64  u16 f64*  u16
 u32  u32  i64  i64  i64  i64  u32  u32  u32  u64  f16 bf16  f32  f64  u32 f64*  u32
 u64  u64  f64  f64  f64  f64  u64  u64  u64  u64  f16 bf16  f32  f64  u64 f64*  u64
 f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f32  f64  f16  f16  f16
bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16  f32 bf16  f32  f64 bf16 bf16 bf16
 f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64  f32  f32  f32
 f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64
"""

def parse(table):
  lines = table.strip('\n').splitlines()
  cols = lines[0].split()
  return {row.split()[0]: dict(zip(cols, row.split()[1:])) for row in lines[1:]}

def cases(table):
  return [(r, c, v) for r, row in parse(table).items() for c, v in row.items()]

def check_entry(row, col, expected):
  if col in ('int', 'flt', 'bool'):
    scalar = {'int': 1, 'flt': 1.0, 'bool': True}[col]
    out = jnp.zeros((), SHORT[row]) + scalar
    assert (out.dtype.name, out.weak) == (SHORT[expected.rstrip('*')], expected.endswith('*')), (row, col)
    rev = scalar + jnp.zeros((), SHORT[row])
    assert (rev.dtype, rev.weak) == (out.dtype, out.weak)
  else:
    assert jnp.promote_types(SHORT[row], SHORT[col]).name == SHORT[expected], (row, col)
    assert jnp.promote_types(SHORT[col], SHORT[row]).name == SHORT[expected]

@pytest.mark.parametrize("row,col,expected", cases(TABLE_X32))
def test_promotion_table_x32(row, col, expected):
  check_entry(row, col, expected)

@pytest.mark.parametrize("row,col,expected", cases(TABLE_X64))
def test_promotion_table_x64(row, col, expected):
  with tinyjx.Context(JAX_ENABLE_X64=True):
    check_entry(row, col, expected)

def test_array_ops_promote_like_the_table():
  # binary ops on arrays canonicalize both inputs (64-bit types become 32-bit) and then join
  table = parse(TABLE_X32)
  names = ['b', 'i8', 'i32', 'u8', 'u32', 'f16', 'bf16', 'f32']
  for a in names:
    for b in names:
      out = jnp.ones((2,), SHORT[a]) * jnp.ones((2,), SHORT[b])
      want = dtypes.canonicalize(dtypes.NAMES[SHORT[table[a][b]]])
      assert out.dtype is want and not out.weak, (a, b)

def test_weak_scalars_with_each_other():
  # Python scalars combine to a weak result of the widest kind; two bools stay bool and strong
  assert (jnp.asarray(1) + 1.0).dtype is jnp.float32 and (jnp.asarray(1) + 1.0).weak
  assert (jnp.asarray(True) + 1).dtype is jnp.int32 and (jnp.asarray(True) + 1).weak
  assert (jnp.asarray(1) + 2).weak and (jnp.asarray(1) + 2).dtype is jnp.int32
  assert jnp.result_type(True, True) is jnp.bool_

def test_result_type():
  assert jnp.result_type(jnp.int8, int) is jnp.int8
  assert jnp.result_type(jnp.int8, float) is jnp.float32
  assert jnp.result_type(int, float) is jnp.float32
  assert jnp.result_type(jnp.uint32, jnp.int32) is jnp.int32
  assert jnp.result_type(jnp.uint32, jnp.int8, 1.0) is jnp.float32
  assert jnp.result_type(jnp.float16, jnp.asarray(1.0)) is jnp.float16   # a weak array stays weak
  assert jnp.result_type(jnp.float16, np.float32(1.0)) is jnp.float32    # numpy scalars are strong
  assert jnp.result_type(jnp.float16, jnp.zeros(2)) is jnp.float32
  assert jnp.result_type(np.int64) is jnp.int32
  assert jnp.result_type(np.zeros(2)) is jnp.float32
  assert jnp.result_type(np.zeros(2, np.int64), 1.0) is jnp.float32
  assert jnp.result_type('bfloat16', 'int8') is jnp.bfloat16
  assert jnp.result_type(jnp.uint8, jnp.int8, jnp.float16) is jnp.float16
  assert jnp.result_type(1) is jnp.int32 and jnp.result_type(True) is jnp.bool_
  with pytest.raises(ValueError, match="at least one"):
    jnp.result_type()

def test_unsupported_dtypes_name_the_dtype():
  for bad, name in [('str', 'str'), (object, 'object'), ('U3', 'str96')]:
    with pytest.raises(TypeError, match=name) as e:
      jnp.zeros(3, bad)
    assert "supports bool" in str(e.value) and "complex64" in str(e.value)

# --- astype: JAX's conversions (floats to ints saturate and truncate, NaN becomes 0), generated with JAX ---
FLOATS = [math.nan, math.inf, -math.inf, -1.7, 1.7, 300.5, -300.5, 0.5, -0.0, 3e9, -3e9]
FLOAT_TO = {
  'bool': [True, True, True, True, True, True, True, True, False, True, True],
  'int8': [0, 127, -128, -1, 1, 127, -128, 0, 0, 127, -128],
  'int32': [0, 2147483647, -2147483648, -1, 1, 300, -300, 0, 0, 2147483647, -2147483648],
  'uint8': [0, 255, 0, 0, 1, 255, 0, 0, 0, 255, 0],
  'uint32': [0, 4294967295, 0, 0, 1, 300, 0, 0, 0, 3000000000, 0],
  'float16': [math.nan, math.inf, -math.inf, -1.7001953125, 1.7001953125, 300.5, -300.5, 0.5, -0.0, math.inf,
              -math.inf],
  'bfloat16': [math.nan, math.inf, -math.inf, -1.703125, 1.703125, 300.0, -300.0, 0.5, -0.0, 3003121664.0,
               -3003121664.0],
}
INTS = [-129, 128, 255, 256, -1, 70000, 2**31 - 1, -2**31]
INT_TO = {
  'bool': [True] * 8,
  'int8': [127, -128, -1, 0, -1, 112, -1, 0],
  'uint8': [127, 128, 255, 0, 255, 112, 255, 0],
  'uint32': [4294967167, 128, 255, 256, 4294967295, 70000, 2147483647, 2147483648],
  'float16': [-129.0, 128.0, 255.0, 256.0, -1.0, math.inf, math.inf, -math.inf],
  'bfloat16': [-129.0, 128.0, 255.0, 256.0, -1.0, 70144.0, 2147483648.0, -2147483648.0],
  'float32': [-129.0, 128.0, 255.0, 256.0, -1.0, 70000.0, 2147483648.0, -2147483648.0],
}

@pytest.mark.parametrize("dtype", sorted(FLOAT_TO))
def test_astype_from_float32(dtype):
  out = jnp.asarray(FLOATS, jnp.float32).astype(dtype)
  assert out.dtype.name == dtype
  np.testing.assert_array_equal(np.asarray(out, np.float64), np.asarray(FLOAT_TO[dtype], np.float64))
  np.testing.assert_array_equal(np.signbit(np.asarray(out, np.float64)), np.signbit(np.asarray(FLOAT_TO[dtype], float)))

@pytest.mark.parametrize("dtype", [d for d in sorted(FLOAT_TO) if d in ('int8', 'int32', 'uint8', 'uint32')])
def test_a_constant_converts_as_an_array_does(dtype):
  """A scalar or a filled array is a constant node, converted when it is made: it once wrapped where the array
  cast saturates (jnp.asarray(3e10).astype(jnp.int32) was -64770048, jnp.full((2,), 300.0, jnp.uint8) 44); now both
  saturate, NaN to 0, as JAX. A float fill for an integer type converts the same way, as lax.full."""
  want = FLOAT_TO[dtype]
  for v, w in zip(FLOATS, want):
    scalar = jnp.asarray(v).astype(dtype)
    assert scalar.uop.op is tinyjx.uop.Ops.CONST and scalar.tolist() == w, (v, scalar.tolist(), w)
    assert jnp.full((3,), v, dtype).tolist() == [w] * 3 and not jnp.full((3,), v, dtype).weak
    assert (jnp.ones(2) * v).astype(dtype).tolist() == [w] * 2          # folded eagerly, constant times constant
    assert tinyjx.jit(lambda x: (x * v).astype(dtype))(jnp.ones(2)).tolist() == [w] * 2   # compiled
  assert jnp.full((2,), 2**40, jnp.int32).tolist() == [0, 0]            # a Python int fill still wraps, as JAX's

@pytest.mark.parametrize("make", [lambda v, dt: jnp.asarray(v, dtype=dt), lambda v, dt: jnp.array([1.0, v], dt),
                                  lambda v, dt: dt(v)], ids=['asarray', 'array', 'scalar_type'])
def test_a_python_float_out_of_an_integer_types_range_is_an_error(make):
  """jnp.asarray(3e10, dtype=jnp.int32), jnp.array([.., 3e10], jnp.int32) and jnp.int32(3e10) convert as numpy does
  (and so JAX): a Python float that does not fit once truncated is an OverflowError, a NaN a ValueError (they
  returned wrapped values); within range it truncates toward zero."""
  for v, dt in ((3e10, jnp.int32), (300.0, jnp.uint8), (-1.5, jnp.uint32), (-129.5, jnp.int8), (math.inf, jnp.int32)):
    with pytest.raises(OverflowError, match="out of bounds|infinity|cannot convert"):
      make(v, dt)
  with pytest.raises(ValueError, match="NaN"):
    make(math.nan, jnp.int32)
  for v, dt, w in ((2.7, jnp.int32, 2), (-0.5, jnp.uint8, 0), (127.9, jnp.int8, 127), (-2147483648.9, jnp.int32,
                   -2147483648)):
    assert np.asarray(make(v, dt)).ravel()[-1] == w

@pytest.mark.parametrize("dtype", sorted(INT_TO))
def test_astype_from_int32(dtype):
  out = jnp.asarray(INTS, jnp.int32).astype(dtype)
  assert out.dtype.name == dtype
  assert out.tolist() == INT_TO[dtype]

def test_astype_accepts_every_dtype_spelling():
  x = jnp.asarray([1.5, 2.5])
  for spelling in (jnp.int32, 'int32', np.int32, np.dtype('int32'), int, dtypes.int32):
    assert x.astype(spelling).dtype is jnp.int32
  assert x.astype(float).dtype is jnp.float32 and x.astype(bool).dtype is jnp.bool_
  assert jnp.astype(x, jnp.float16).dtype is jnp.float16
  assert not jnp.asarray(1.0).astype(jnp.float32).weak   # an explicit dtype makes the result strong

# --- finfo / iinfo, values from JAX ---
FINFO = {  # bits, eps, max, min, tiny, resolution, smallest_normal
  'float16': (16, 0.0009765625, 65504.0, -65504.0, 6.103515625e-05, 0.0010004043579101562, 6.103515625e-05),
  'bfloat16': (16, 0.0078125, 3.3895313892515355e+38, -3.3895313892515355e+38, 1.1754943508222875e-38,
               0.010009765625, 1.1754943508222875e-38),
  'float32': (32, 1.1920928955078125e-07, 3.4028234663852886e+38, -3.4028234663852886e+38, 1.1754943508222875e-38,
              9.999999974752427e-07, 1.1754943508222875e-38),
}

@pytest.mark.parametrize("name", sorted(FINFO))
def test_finfo(name):
  fi = jnp.finfo(name)
  got = (fi.bits, fi.eps, fi.max, fi.min, fi.tiny, fi.resolution, fi.smallest_normal)
  assert got == FINFO[name]
  assert fi.dtype.name == name

def test_finfo_float64_needs_x64():
  assert jnp.finfo(jnp.float64).bits == 32   # canonicalized, as the dtype itself is
  with tinyjx.Context(JAX_ENABLE_X64=True):
    fi = jnp.finfo(jnp.float64)
    assert (fi.bits, fi.eps, fi.max) == (64, 2.220446049250313e-16, 1.7976931348623157e+308)

IINFO = {'int8': (8, -128, 127), 'int16': (16, -32768, 32767), 'int32': (32, -2**31, 2**31 - 1), 'uint8': (8, 0, 255),
         'uint16': (16, 0, 65535), 'uint32': (32, 0, 2**32 - 1)}

@pytest.mark.parametrize("name", sorted(IINFO))
def test_iinfo(name):
  ii = jnp.iinfo(name)
  assert (ii.bits, ii.min, ii.max) == IINFO[name]

def test_info_errors_name_the_dtype():
  with pytest.raises(TypeError, match="int32.*iinfo"):
    jnp.finfo(jnp.int32)
  with pytest.raises(TypeError, match="float32.*finfo"):
    jnp.iinfo(jnp.float32)
  assert jnp.iinfo(jnp.asarray([1], jnp.uint8)).max == 255
  assert jnp.finfo(jnp.zeros(2, jnp.float16)).bits == 16

# --- the 64-bit switch ---
def test_x64_off_by_default_canonicalizes():
  assert jnp.zeros(2, jnp.int64).dtype is jnp.int32
  assert jnp.zeros(2, jnp.float64).dtype is jnp.float32
  assert jnp.asarray(np.arange(3, dtype=np.int64)).dtype is jnp.int32
  assert jnp.asarray([1.5]).dtype is jnp.float32 and jnp.arange(3).dtype is jnp.int32

def test_x64_context_keeps_64_bit():
  with tinyjx.Context(JAX_ENABLE_X64=True):
    assert jnp.zeros(2, jnp.int64).dtype is jnp.int64
    assert jnp.zeros(2, jnp.uint64).dtype is jnp.uint64
    assert jnp.asarray([1.5]).dtype is jnp.float64
    assert jnp.arange(3).dtype is jnp.int64
    assert (jnp.zeros(2, jnp.int64) + 1).dtype is jnp.int64
    assert jnp.sum(jnp.ones(3, jnp.int8)).dtype is jnp.int64
    big = jnp.asarray([2**40], jnp.int64) * 2
    assert big.tolist() == [2**41]
    x = jnp.asarray(np.array([1 / 3]))
    assert x.dtype is jnp.float64 and x.item() == 1 / 3
  assert jnp.zeros(2, jnp.int64).dtype is jnp.int32

def test_x64_config_update():
  try:
    tinyjx.config.update('jax_enable_x64', True)
    assert tinyjx.config.jax_enable_x64
    assert jnp.ones(2, jnp.float64).dtype is jnp.float64
    assert jnp.result_type(1) is jnp.int64
  finally:
    tinyjx.config.update('jax_enable_x64', False)
  assert jnp.ones(2, jnp.float64).dtype is jnp.float32
