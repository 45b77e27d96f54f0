"""tinyjx.Array as users hold it: values out (np.asarray, item, tolist, printing), every operator (reflected ones
too) against numpy, numpy-style methods, Python protocols (len, iteration, bool, int, hash) and their errors."""
import math, operator, pickle
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from hypothesis.extra import numpy as hnp
import tinyjx
import tinyjx.numpy as jnp
from conftest import examples

pytestmark = pytest.mark.usefixtures('semantics_device')

SETTINGS = settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))

# --- values out ---
def test_asarray_item_tolist():
  x = jnp.asarray([[1.5, 2.0], [3.0, 4.0]])
  v = np.asarray(x)
  assert isinstance(v, np.ndarray) and v.dtype == np.float32 and v.tolist() == [[1.5, 2.0], [3.0, 4.0]]
  assert np.asarray(x, dtype=np.float64).dtype == np.float64
  assert x.tolist() == [[1.5, 2.0], [3.0, 4.0]] and x[1, 0].item() == 3.0 and x.item(3) == 4.0
  assert isinstance(jnp.asarray(3).item(), int) and isinstance(jnp.asarray(True).item(), bool)
  assert np.asarray(jnp.asarray([1.0, 2.0], jnp.bfloat16)).dtype == np.float32   # numpy has no bfloat16
  assert jnp.asarray(7).tolist() == 7

def test_repr_like_jax():
  assert repr(jnp.asarray([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
  assert repr(jnp.asarray(3)) == "Array(3, dtype=int32, weak_type=True)"
  assert repr(jnp.zeros((2, 0))) == "Array([], shape=(2, 0), dtype=float32)"
  assert repr(jnp.asarray([True])) == "Array([ True], dtype=bool)"
  assert repr(jnp.asarray([1, 2], jnp.uint8)) == "Array([1, 2], dtype=uint8)"
  assert repr(jnp.arange(4.0).reshape(2, 2)) == "Array([[0., 1.],\n       [2., 3.]], dtype=float32)"
  assert str(jnp.asarray([1.0, 2.0])) == "[1. 2.]"
  assert f"{jnp.asarray(3.14159):.2f}" == "3.14" and f"{jnp.asarray([1, 2])}" == "[1 2]"

def test_traced_arrays_print_their_aval_and_refuse_values():
  seen = []
  def f(x):
    seen.append(repr(x))
    with pytest.raises(tinyjx.ConcretizationError, match=r"bool\(x\).*x"):
      bool(x.sum() > 0)
    with pytest.raises(tinyjx.ConcretizationError, match="np.asarray"):
      np.asarray(x)
    return x * 2
  tinyjx.make_jaxpr(f)(jnp.ones(3))
  assert seen == ["Traced<f32[3]>"]

# --- operators against numpy ---
BINARY_OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
              operator.pow, operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]
INT_OPS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]

def np_ref(op, a, b):
  with np.errstate(all='ignore'):
    return np.asarray(op(a, b))

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(['int32', 'float32']),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3))
def test_binary_operators_and_reflections(data, dtype, shapes):
  el = st.integers(1, 6) if dtype == 'int32' else st.floats(0.5, 4.0, width=32)
  a = data.draw(hnp.arrays(np.dtype(dtype), shapes.input_shapes[0], elements=el))
  b = data.draw(hnp.arrays(np.dtype(dtype), shapes.input_shapes[1], elements=el))
  s = data.draw(st.integers(1, 3))
  x, y = jnp.asarray(a), jnp.asarray(b)
  for op in BINARY_OPS + (INT_OPS if dtype == 'int32' else []):
    want = np_ref(op, a, b)
    for got in (op(x, y), op(x, b), op(a, y)):   # Array with Array, with numpy on the right, on the left
      assert isinstance(got, tinyjx.Array), op
      np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, err_msg=op.__name__)
    left, right = op(x, s), op(s, x)             # Python scalars on either side are weak
    np.testing.assert_allclose(np.asarray(left), np_ref(op, a, np.asarray(s, dtype)), rtol=1e-5, err_msg=op.__name__)
    np.testing.assert_allclose(np.asarray(right), np_ref(op, np.asarray(s, dtype), a), rtol=1e-5, err_msg=op.__name__)

def test_operator_result_dtypes():
  i, f = jnp.asarray([1, 2]), jnp.asarray([1.0, 2.0])
  assert (i / 2).dtype is jnp.float32 and (i // 2).dtype is jnp.int32 and (i ** 2).dtype is jnp.int32
  assert (i * 2.5).dtype is jnp.float32 and (2.5 * i).weak and (f < 1).dtype is jnp.bool_
  assert (jnp.asarray([1], jnp.int8) + 1).dtype is jnp.int8 and (1 - jnp.asarray([1], jnp.uint8)).dtype is jnp.uint8

def test_unary_operators():
  x = jnp.asarray([-1.5, 2.0])
  assert (-x).tolist() == [1.5, -2.0] and (+x) is x and abs(x).tolist() == [1.5, 2.0]
  assert (~jnp.asarray([0, 5])).tolist() == [-1, -6] and (~jnp.asarray([True, False])).tolist() == [False, True]
  with pytest.raises(TypeError, match="float32"):
    ~x
  q, r = divmod(jnp.asarray([7, -7]), 2)
  assert q.tolist() == [3, -4] and r.tolist() == [1, 1]
  q, r = divmod(7, jnp.asarray([2, -2]))
  assert q.tolist() == [3, -4] and r.tolist() == [1, -1]

def test_matmul_operator():
  a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
  np.testing.assert_allclose(np.asarray(jnp.asarray(a) @ jnp.asarray(b)), a @ b)
  np.testing.assert_allclose(np.asarray(a @ jnp.asarray(a).T), a @ a.T)

# --- attributes and methods ---
def test_attributes():
  x = jnp.zeros((2, 3), jnp.float16)
  assert (x.shape, x.dtype, x.ndim, x.size, x.nbytes) == ((2, 3), jnp.float16, 2, 6, 12)
  assert x.T.shape == (3, 2) and jnp.zeros((4, 2, 3)).mT.shape == (4, 3, 2)
  assert x.real is x and x.imag.tolist() == [[0.0] * 3] * 2 and x.conj() is x

def test_methods_dispatch_to_numpy_functions():
  x = jnp.arange(6)
  assert x.reshape(2, 3).shape == (2, 3) and x.reshape((3, 2)).shape == (3, 2) and x.reshape(-1, 2).shape == (3, 2)
  m = x.reshape(2, 3)
  assert m.transpose().shape == (3, 2) and m.transpose(1, 0).tolist() == [[0, 3], [1, 4], [2, 5]]
  assert m.transpose((1, 0)).shape == (3, 2) and m.flatten().tolist() == list(range(6)) and m.ravel().shape == (6,)
  assert m.copy().tolist() == m.tolist() and m.astype(jnp.float16).dtype is jnp.float16
  assert m.reshape(1, 2, 3).squeeze().shape == (2, 3) and m.reshape(1, 6).squeeze(0).shape == (6,)
  assert m.swapaxes(0, 1).shape == (3, 2) and m.sum(axis=1).tolist() == [3, 12] and m.max() == 5
  assert m.clip(1, 4).tolist() == [[1, 1, 2], [3, 4, 4]]
  assert jnp.asarray([1.26]).round(1).tolist() == [pytest.approx(1.3)]
  assert x.repeat(2)[:4].tolist() == [0, 0, 1, 1]
  assert m.cumsum(axis=1).tolist() == [[0, 1, 3], [3, 7, 12]] and m.argmax() == 5 and m.any() and not m.all()

# --- Python protocols ---
def test_len_and_iteration():
  x = jnp.arange(6).reshape(3, 2)
  assert len(x) == 3 and [r.tolist() for r in x] == [[0, 1], [2, 3], [4, 5]]
  with pytest.raises(TypeError, match="len.*0-d"):
    len(jnp.asarray(1.0))
  with pytest.raises(TypeError, match="iteration over a 0-d array"):
    iter(jnp.asarray(1.0))

def test_bool_int_float_index():
  assert bool(jnp.asarray(2)) and not bool(jnp.asarray([0.0]))
  with pytest.raises(ValueError, match=r"shape \(2,\) is ambiguous.*any\(\).*all\(\)"):
    bool(jnp.asarray([1, 2]))
  assert int(jnp.asarray(3.7)) == 3 and float(jnp.asarray(2)) == 2.0 and bool(jnp.asarray([2.0]))
  for x in (jnp.asarray([1, 2]), jnp.asarray([2])):   # as JAX: only 0-d arrays convert (bool takes any size 1)
    with pytest.raises(TypeError, match=r"only scalar \(0-d\).*shape \("):
      int(x)
  assert [10, 20, 30][jnp.asarray(1)] == 20 and operator.index(jnp.asarray(2, jnp.uint8)) == 2
  with pytest.raises(TypeError, match="integer"):
    operator.index(jnp.asarray(1.0))

def test_immutable_and_unhashable():
  x = jnp.zeros(3)
  with pytest.raises(TypeError, match=r"immutable.*\.at\[idx\]\.set"):
    x[0] = 1.0
  with pytest.raises(TypeError, match="unhashable"):
    hash(x)

def test_pickle_and_copy_round_trip():
  import copy
  for x in (jnp.asarray([1.5, -2.0]), jnp.asarray(3), jnp.asarray([1.0], jnp.bfloat16)):
    y = pickle.loads(pickle.dumps(x))
    assert (y.dtype, y.weak, y.tolist()) == (x.dtype, x.weak, x.tolist())
    assert copy.deepcopy(x) is x

def test_numpy_interop():
  x = jnp.asarray([1.0, 4.0])
  assert np.sqrt(x).tolist() == [1.0, 2.0]          # numpy functions see the value through __array__
  assert isinstance(np.ones(2) * x, tinyjx.Array)   # numpy defers to Array's reflected operators
  assert math.isclose(float(np.sum(x)), 5.0)

def test_numpy_views_of_an_array_are_read_only_and_copies_are_writable():
  """np.asarray(x) shares the array's memory (no copy) but cannot write to it, as in JAX: a write through it would
  change an immutable Array (and, on the jit hit path, every array sharing its block)."""
  a = jnp.arange(3.0)
  view = np.asarray(a)
  with pytest.raises(ValueError, match="read-only"): view[0] = 5.0
  mine = np.array(a)
  mine[0] = 7.0
  np.testing.assert_array_equal(np.asarray(a), [0.0, 1.0, 2.0])
  assert np.asarray(a, dtype=np.float64).flags.writeable and mine.flags.writeable
