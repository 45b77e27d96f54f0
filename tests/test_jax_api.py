"""JAX API surface that real programs use: jnp scalar-type constructors (`jnp.float32(1)`), `lax.Precision` in every
contraction, `jnp.isclose`/`allclose`/`array_equal`/`array_equiv`, `tinyjx.test_util.check_grads`, and JAX's
rejection of Python lists where jnp functions take arrays. Expected values come from JAX 0.10 (run once, written in
as data here)."""
import numpy as np
import pytest
import tinyjx
import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx import lax, dtypes
from tinyjx.test_util import check_grads, check_jvp, check_vjp

pytestmark = pytest.mark.usefixtures('semantics_device')
inf, nan = float('inf'), float('nan')

# ---------------------------------------------------------------- scalar types are callable and stay dtypes

@pytest.mark.parametrize('make, value, dtype', [
  (lambda: jnp.float32(1), 1.0, 'float32'), (lambda: jnp.int32(3.7), 3, 'int32'),
  (lambda: jnp.int32(-3.7), -3, 'int32'),
  (lambda: jnp.bool_(2), True, 'bool'), (lambda: jnp.uint8(255), 255, 'uint8'), (lambda: jnp.int8(-1.5), -1, 'int8'),
  (lambda: jnp.float16(1 / 3), 0.333251953125, 'float16'), (lambda: jnp.bfloat16(1 / 3), 0.333984375, 'bfloat16'),
  (lambda: jnp.float32('1.5'), 1.5, 'float32'), (lambda: jnp.int64(2), 2, 'int32'),          # 64-bit mode off
  (lambda: jnp.float32(True), 1.0, 'float32'), (lambda: jnp.float32(1e40), inf, 'float32'),
  (lambda: jnp.int32(jnp.array(3.7)), 3, 'int32'), (lambda: jnp.int32(jnp.float32(2.5)), 2, 'int32'),
  (lambda: jax.jit(lambda x: jnp.int32(x))(2.7), 2, 'int32'),
])
def test_scalar_type_constructors_match_jax(make, value, dtype):
  out = make()
  assert isinstance(out, jax.Array) and out.shape == () and out.dtype.name == dtype and not out.weak
  assert out.item() == value

def test_scalar_types_make_arrays_from_lists_and_stay_strong():
  assert jnp.float32([1, 2]).tolist() == [1.0, 2.0] and jnp.float32([1, 2]).dtype is jnp.float32
  assert jnp.int32([[1], [2]]).shape == (2, 1) and jnp.bool_([0, 1]).tolist() == [False, True]
  assert (jnp.float32(1) + 1.0).dtype is jnp.float32 and not (jnp.float32(1) + 1.0).weak
  assert (jnp.float16(1) * 2.0).dtype is jnp.float16   # strong, so a Python float does not widen it

def test_scalar_type_errors_name_the_fix():
  with pytest.raises(OverflowError, match='300 out of bounds for uint8'): jnp.uint8(300)
  with pytest.raises(OverflowError, match='out of bounds for int32'): jnp.int32(2 ** 40)
  with pytest.raises(OverflowError, match='-1 out of bounds for uint32'): jnp.uint32(-1)
  with pytest.raises(ValueError, match='NaN'): jnp.int32(nan)
  with pytest.raises(ValueError, match='None is not a valid value'): jnp.float32(None)

def test_scalar_types_are_still_dtypes():
  assert jnp.zeros(3, jnp.float32).dtype == jnp.float32 and jnp.ones(2).astype(jnp.int32).dtype is jnp.int32
  assert jnp.dtype(jnp.float32) is jnp.float32 and jnp.dtype('float32') is jnp.float32
  assert jnp.dtype('float64') is dtypes.float64 and jnp.dtype(np.int8) is jnp.int8   # like np.dtype: not narrowed
  assert isinstance(jnp.float32, jnp.dtype) and isinstance(jnp.ones(2).dtype, jnp.dtype)
  assert np.dtype(jnp.float32) == np.float32 and np.dtype(jnp.uint8) == np.uint8 and jnp.float32.dtype == np.float32
  assert jnp.issubdtype(jnp.ones(2).dtype, jnp.floating) and jnp.issubdtype(jnp.int32, jnp.integer)
  assert np.zeros(2, dtype=jnp.int16).dtype == np.int16
  assert jnp.dtype('complex64') is jnp.complex64 and jnp.issubdtype(jnp.complex64, jnp.complexfloating)
  with pytest.raises(TypeError, match='not a supported dtype'): jnp.dtype('str')

# ---------------------------------------------------------------- lax.Precision

def test_precision_enum_matches_jax():
  P = lax.Precision
  assert [p.name for p in P] == ['DEFAULT', 'HIGH', 'HIGHEST'] and [p.value for p in P] == [0, 1, 2]
  assert str(P.HIGHEST) == 'HIGHEST' and repr(P.HIGH) == '<Precision.HIGH: 1>' and P(2) is P.HIGHEST
  names = {'default': P.DEFAULT, 'bfloat16': P.DEFAULT, 'fastest': P.DEFAULT, 'high': P.HIGH,
           'tensorfloat32': P.HIGH, 'bfloat16_3x': P.HIGH, 'highest': P.HIGHEST, 'float32': P.HIGHEST}
  for s, p in names.items(): assert P(s) is p
  with pytest.raises(ValueError, match="'nope' is not a valid Precision"): P('nope')

A = np.arange(4.0, dtype=np.float32).reshape(2, 2)

CONTRACTIONS = {
  'jnp.dot': lambda a, p: jnp.dot(a, a, precision=p), 'jnp.matmul': lambda a, p: jnp.matmul(a, a, precision=p),
  'jnp.einsum': lambda a, p: jnp.einsum('ij,jk', a, a, precision=p),
  'jnp.tensordot': lambda a, p: jnp.tensordot(a, a, 1, precision=p),
  'jnp.inner': lambda a, p: jnp.inner(a, a, precision=p),
  'jnp.vdot': lambda a, p: jnp.vdot(a, a, precision=p), 'lax.dot': lambda a, p: lax.dot(a, a, precision=p),
  'lax.dot_general': lambda a, p: lax.dot_general(a, a, (((1,), (0,)), ((), ())), precision=p),
}

@pytest.mark.parametrize('name', list(CONTRACTIONS))
@pytest.mark.parametrize('precision', [None, lax.Precision.HIGHEST, 'highest', 'bfloat16', 'tensorfloat32', 'float32',
                                       'default', ('highest', 'default'), (lax.Precision.HIGH, lax.Precision.DEFAULT)])
def test_precision_is_accepted_by_every_contraction(name, precision):
  a = jnp.asarray(A)
  expected = np.asarray(CONTRACTIONS[name](a, None))
  np.testing.assert_array_equal(np.asarray(CONTRACTIONS[name](a, precision)), expected)

@pytest.mark.parametrize('name', list(CONTRACTIONS))
@pytest.mark.parametrize('bad', ['HIGHEST', 3, 1.5, (lax.Precision.HIGH,), ('high', 'high', 'high'), (None, 'high')])
def test_bad_precision_is_a_clear_error(name, bad):
  with pytest.raises(ValueError, match=r"precision=.* is not a valid precision.*lax\.Precision"):
    CONTRACTIONS[name](jnp.asarray(A), bad)

# ---------------------------------------------------------------- isclose, allclose, array_equal, array_equiv

X = [1.0, inf, -inf, nan, 1e10, 1e-8, 0.0, 2.0]
Y = [1.0 + 1e-6, inf, inf, nan, 1.00001e10, 1e-9, 1e-9, 2.1]

@pytest.mark.parametrize('kwargs, expected', [   # JAX 0.10.2 (and numpy 2)
  ({}, [True, True, False, False, False, True, True, False]),
  ({'equal_nan': True}, [True, True, False, True, False, True, True, False]),
  ({'rtol': 0.1, 'atol': 0}, [True, True, False, False, True, False, False, True]),
  ({'rtol': 0, 'atol': 0}, [False, True, False, False, False, False, False, False]),
])
def test_isclose_matches_jax(kwargs, expected):
  got = jnp.isclose(jnp.asarray(X), jnp.asarray(Y), **kwargs)
  assert got.dtype is jnp.bool_ and got.tolist() == expected

def test_isclose_dtypes_and_infinities():
  assert jnp.isclose(jnp.arange(3), jnp.asarray([0, 1, 3])).tolist() == [True, True, False]
  assert jnp.isclose(jnp.asarray([1, 2], jnp.int32), 2.0).tolist() == [False, True]
  assert jnp.isclose(jnp.asarray([True, False]), jnp.asarray([True, True])).tolist() == [True, False]
  assert jnp.isclose(jnp.asarray([1.0], jnp.float16), jnp.asarray([1.0005], jnp.float16)).tolist() == [False]
  big = jnp.isclose(jnp.asarray([inf, -inf, inf]), jnp.asarray([inf, -inf, 1e38]), rtol=1e10, atol=1e38)
  assert big.tolist() == [True, True, True]   # the tolerance itself overflows to inf, as in JAX and numpy
  assert jnp.isclose(1.0, 1.0 + 1e-7).item() is True
  with pytest.raises(ValueError, match='broadcast'): jnp.isclose(jnp.ones(2), jnp.ones(3))

def test_allclose_array_equal_array_equiv_match_jax():
  x = jnp.asarray(X)
  assert jnp.allclose(x, x).item() is False and jnp.allclose(x, x, equal_nan=True).item() is True
  assert jnp.allclose(jnp.ones(3), 1).item() is True and jnp.allclose(jnp.ones(3), 1.1).item() is False
  assert jax.jit(jnp.allclose)(jnp.ones(2), jnp.ones(2)).item() is True
  assert jnp.array_equal(jnp.ones(2), jnp.ones(2)).item() is True
  assert jnp.array_equal(jnp.ones(2), jnp.ones(3)).item() is False
  assert jnp.array_equal([1, 2], [1, 2]).item() is True
  assert jnp.array_equal(jnp.ones(2), jnp.ones((1, 2))).item() is False
  assert jnp.array_equal(x, x).item() is False and jnp.array_equal(x, x, equal_nan=True).item() is True
  assert jnp.array_equal(jnp.asarray([1, 2]), jnp.asarray([1.0, 2.0])).item() is True
  assert jnp.array_equiv(jnp.ones(2), jnp.ones((3, 2))).item() is True and jnp.array_equiv([1, 2], 1).item() is False
  assert jnp.array_equiv(jnp.ones(2), jnp.ones(3)).item() is False   # numpy's answer (JAX raises here)

# ---------------------------------------------------------------- check_grads

def test_check_grads_passes_on_correct_derivatives():
  check_grads(lambda x: jnp.sum(jnp.exp(x) * x), (jnp.arange(3.0),), order=2)
  check_grads(lambda x, y: {'a': x * y, 'b': jnp.sin(x)}, (jnp.arange(3.0), 2.0), order=2)
  check_grads(lambda x: jnp.tanh(x) @ x, (jnp.linspace(-1.0, 1.0, 4),), order=3, modes=['rev'])
  check_jvp(jnp.sin, lambda p, t: jax.jvp(jnp.sin, p, t), (jnp.arange(3.0),))
  check_vjp(jnp.cos, lambda *a: jax.vjp(jnp.cos, *a), (jnp.arange(3.0),))

def _wrong_rule():
  @jax.custom_jvp
  def f(x): return jnp.sin(x)
  f.defjvp(lambda p, t: (jnp.sin(p[0]), 2 * jnp.cos(p[0]) * t[0]))   # twice the true derivative
  return f

@pytest.mark.parametrize('mode, where', [('fwd', 'forward mode, order 1'), ('rev', 'reverse mode, order 1')])
def test_check_grads_catches_a_wrong_derivative(mode, where):
  with pytest.raises(AssertionError, match=where):   # JAX raises AssertionError in both modes too
    check_grads(_wrong_rule(), (jnp.arange(3.0),), 1, modes=[mode])

def test_check_grads_catches_a_wrong_second_derivative():
  @jax.custom_jvp
  def f(x): return x ** 3
  f.defjvp(lambda p, t: (p[0] ** 3, 3 * lax.stop_gradient(p[0]) ** 2 * t[0]))   # right slope, but no curvature
  x = (jnp.asarray([-1.0, 0.5, 2.0]),)
  check_grads(f, x, 1)
  for mode in ('fwd', 'rev'):
    with pytest.raises(AssertionError, match='order 2'):
      check_grads(f, x, 2, modes=[mode])

def test_check_grads_argument_errors():
  with pytest.raises(TypeError, match='tuple of the arguments'): check_grads(jnp.sin, jnp.ones(2), 1)
  with pytest.raises(ValueError, match='order must be an int >= 1'): check_grads(jnp.sin, (jnp.ones(2),), 0)
  with pytest.raises(ValueError, match="modes must name 'fwd' and/or 'rev'"):
    check_grads(jnp.sin, (jnp.ones(2),), 1, modes=['both'])
  with pytest.raises(TypeError, match='float or complex arrays'): check_grads(jnp.sin, (jnp.arange(3),), 1)

# ---------------------------------------------------------------- lists where jnp takes arrays (JAX's check_arraylike)

A2 = jnp.ones(2)
# (call, position JAX reports): every one raises TypeError "<name> requires ndarray or scalar arguments" in JAX 0.10.2
REJECTED = {
  'sum': (lambda: jnp.sum([1, 2, 3]), 0), 'sum_tuple': (lambda: jnp.sum((1, 2)), 0),
  'mean': (lambda: jnp.mean([1.0]), 0), 'max': (lambda: jnp.max([1]), 0), 'argmax': (lambda: jnp.argmax([1]), 0),
  'cumsum': (lambda: jnp.cumsum([1, 2]), 0), 'add': (lambda: jnp.add(A2, [1, 2]), 1),
  'add_scalar_first': (lambda: jnp.add(1, [1, 2]), 1), 'power': (lambda: jnp.power(A2, [1, 2]), 1),
  'maximum': (lambda: jnp.maximum(A2, [1, 2]), 1), 'exp': (lambda: jnp.exp([1.0]), 0),
  'round': (lambda: jnp.round([1.5]), 0), 'where': (lambda: jnp.where(A2 > 1, A2, [0.0, 1.0]), 2),
  'where_1arg': (lambda: jnp.where([True, False]), 0), 'concatenate': (lambda: jnp.concatenate((A2, [1, 2])), 1),
  'stack_of_lists': (lambda: jnp.stack(([1, 2], [3, 4])), 0), 'take': (lambda: jnp.take(A2, [0]), 1),
  'sort': (lambda: jnp.sort([3, 1]), 0), 'matmul': (lambda: jnp.matmul(A2, [1.0, 2.0]), 1),
  'dot': (lambda: jnp.dot(A2, (1, 2)), 1), 'einsum': (lambda: jnp.einsum('i,i', [1, 2], A2), 0),
  'isclose': (lambda: jnp.isclose(A2, [1, 2]), 1), 'allclose': (lambda: jnp.allclose([1, 2], A2), 0),
  'reshape': (lambda: jnp.reshape([1, 2], (2, 1)), 0), 'ones_like': (lambda: jnp.ones_like([1]), 0),
  'full_like': (lambda: jnp.full_like(A2, [1, 2]), 1), 'full': (lambda: jnp.full((2,), [1, 2]), 0),
  'repeat': (lambda: jnp.repeat(A2, [1, 2]), 1), 'searchsorted': (lambda: jnp.searchsorted(A2, [1.5]), 1),
  'broadcast_arrays': (lambda: jnp.broadcast_arrays(A2, [1, 2]), 1), 'atleast_1d': (lambda: jnp.atleast_1d([1]), 0),
  'meshgrid': (lambda: jnp.meshgrid([1], [2]), 0), 'nan_to_num': (lambda: jnp.nan_to_num([1.0]), 0),
  'heaviside': (lambda: jnp.heaviside(A2, [1, 1]), 1), 'trace': (lambda: jnp.trace([[1]]), 0),
  'unique': (lambda: jnp.unique([1, 1]), 0), 'nonzero': (lambda: jnp.nonzero([1, 0]), 0),
  'copy': (lambda: jnp.copy([1]), 0), 'unravel_index': (lambda: jnp.unravel_index([1], (2,)), 0),
  'put_along_axis': (lambda: jnp.put_along_axis(A2, jnp.asarray([0]), [5.0], 0, inplace=False), 2),
  'operator': (lambda: A2 + [1, 2], 1), 'operator_eq': (lambda: A2 == [1, 1], 1),
}

@pytest.mark.parametrize('name', list(REJECTED))
def test_lists_are_rejected_like_jax(name):
  call, position = REJECTED[name]
  with pytest.raises(TypeError, match=rf"requires ndarray or scalar arguments, got <class '(list|tuple)'> at position "
                                      rf"{position}\. Convert it with jnp\.asarray"):
    call()

ACCEPTED = {   # JAX 0.10.2 accepts these lists: shapes, axes, index lists, sequences of arrays, creation functions
  'array': lambda: jnp.array([1, 2]), 'asarray': lambda: jnp.asarray((1, 2)), 'zeros': lambda: jnp.zeros([2, 3]),
  'scalar_type': lambda: jnp.float32([1, 2]), 'stack': lambda: jnp.stack([A2, A2]),
  'reshape_shape': lambda: jnp.reshape(A2, [2, 1]), 'tile_reps': lambda: jnp.tile(A2, [2]),
  'pad_width': lambda: jnp.pad(A2, [[1, 1]]), 'roll_shift': lambda: jnp.roll(A2, [1], axis=[0]),
  'split_indices': lambda: jnp.split(A2, [1]), 'lexsort': lambda: jnp.lexsort([A2, A2]),
  'array_equal': lambda: jnp.array_equal([1, 2], [1, 2]), 'array_equiv': lambda: jnp.array_equiv([1, 2], [1, 2]),
  'tensordot_axes': lambda: jnp.tensordot(A2, A2, axes=[[0], [0]]),
  'sum_axis': lambda: jnp.sum(jnp.ones((2, 2)), axis=(0, 1)),
  'shape': lambda: jnp.shape([1, 2]), 'einsum_interleaved': lambda: jnp.einsum(A2, [0], A2, [0]),
  'scalars': lambda: jnp.add(1, 2.0), 'numpy': lambda: jnp.sum(np.arange(3)),
  'transpose_axes': lambda: jnp.transpose(jnp.ones((2, 3)), [1, 0]),
}

@pytest.mark.parametrize('name', list(ACCEPTED))
def test_lists_are_accepted_where_jax_accepts_them(name):
  ACCEPTED[name]()

def test_wrapped_functions_keep_their_names_and_docs():
  assert jnp.sum.__name__ == 'sum' and 'Sum over' in jnp.sum.__doc__
  assert jnp.einsum.__name__ == 'einsum' and 'Einstein' in jnp.einsum.__doc__

# ---- found by running JAX's tutorials and examples with the imports changed (issue 15's report)

def test_dtypes_equal_numpys_spellings():
  x = jnp.ones(3)
  assert x.dtype == np.float32 and x.dtype == 'float32' and x.dtype == np.dtype('float32')
  assert np.float32 == x.dtype and np.dtype('float32') == x.dtype
  assert x.dtype != np.float64 and x.dtype != 'int32' and not (x.dtype == None)  # noqa: E711
  assert jnp.bfloat16 != np.float32 and jnp.bfloat16 == jnp.bfloat16
  assert len({jnp.float32, jnp.dtype('float32'), x.dtype}) == 1

def test_a_zero_d_array_formats_as_its_python_scalar():
  assert f"{jnp.array(0.1)}" == "0.10000000149011612" and "{}".format(jnp.array(0.1)) == "0.10000000149011612"
  assert f"{jnp.array(2.5):.2f}" == "2.50" and f"{jnp.array(3)}" == "3" and f"{jnp.ones(2)}" == "[1. 1.]"

def test_only_zero_d_arrays_convert_to_python_scalars():
  assert float(jnp.array(1.5)) == 1.5 and int(jnp.array(3)) == 3
  for fn in (float, int):
    with pytest.raises(TypeError, match="only scalar"):
      fn(jnp.ones((1, 1)))

def test_error_classes_of_jax():
  with pytest.raises(ValueError, match="sorts dict keys"):
    tinyjx.tree.map(lambda x: x + 1, {1: 7, "y": 42})
  with pytest.raises(ValueError, match="None is not a valid value"):
    jnp.asarray(None)
  for nested in ([None, 1.0], [1.0, [2.0, None]], ([1.0], None)):   # JAX checks for None first, even in ragged lists
    with pytest.raises(ValueError, match="None is not a valid value for jnp.array"):
      jnp.asarray(nested)
  with pytest.raises(IndexError) as e:
    tinyjx.jit(lambda x: x[x > 0].sum())(jnp.arange(3.))
  assert type(e.value).__name__ == 'NonConcreteBooleanIndexError' and isinstance(e.value, tinyjx.ConcretizationError)

def test_stax_shape_helpers():
  assert lax.conv_general_shape_tuple((1, 8, 8, 3), (3, 3, 3, 16), (1, 1), 'SAME', ('NHWC', 'HWIO', 'NHWC')) == (1, 8, 8, 16)
  dn = lax.conv_dimension_numbers((1, 8, 8, 3), (3, 3, 3, 16), ('NHWC', 'HWIO', 'NHWC'))
  assert lax.conv_general_shape_tuple((1, 8, 8, 3), (3, 3, 3, 16), (2, 2), ((1, 1), (1, 1)), dn) == (1, 4, 4, 16)
  assert lax.conv_transpose_shape_tuple((1, 4, 4, 3), (3, 3, 3, 8), (2, 2), 'SAME', ('NHWC', 'HWIO', 'NHWC')) == (1, 8, 8, 8)
  assert lax.reduce_window_shape_tuple((1, 8, 8, 3), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4) == (1, 4, 4, 3)
  assert lax.conv_general_shape_tuple((-1, 8, 8, 3), (3, 3, 3, 16), (1, 1), "SAME", dn) == (-1, 8, 8, 16)   # stax: batch -1
  assert lax.reduce_window_shape_tuple((-1, 8, 8, 3), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4) == (-1, 4, 4, 3)
