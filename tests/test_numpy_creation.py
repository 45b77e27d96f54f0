"""Array creation in tinyjx.numpy: conversions, fills, ranges, grids and masks, against numpy (hypothesis) and
against JAX's exact float32 answers (written here as data, generated once with JAX 0.10)."""
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
import tinyjx
import tinyjx.numpy as jnp
from tinyjx.uop import Ops
from conftest import examples

pytestmark = pytest.mark.usefixtures('semantics_device')

SETTINGS = settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))

def same(got, want, dtype=None):
  want = np.asarray(want)
  assert got.shape == want.shape, (got.shape, want.shape)
  if dtype is not None: assert got.dtype.name == dtype, (got.dtype, dtype)
  np.testing.assert_array_equal(np.asarray(got), want)

def leaves(x) -> set: return {n.op for n in x.uop.toposort() if not n.src}

# --- conversion ---
def test_asarray_dtypes_and_weak_types():
  cases = [(3, 'int32', True), (2.5, 'float32', True), (True, 'bool', False), ([1, 2], 'int32', False),
           ([1.0, 2], 'float32', False), ([True, 2], 'int32', False), ([[1, 2.5], [3, 4]], 'float32', False),
           (np.float64(1.5), 'float32', False), (np.int8(1), 'int8', False), (np.bool_(True), 'bool', False),
           (np.arange(3, dtype=np.uint16), 'uint16', False), (np.zeros(2, np.float64), 'float32', False),
           ([], 'float32', False)]
  for value, dtype, weak in cases:
    out = jnp.asarray(value)
    assert (out.dtype.name, out.weak) == (dtype, weak), value
    np.testing.assert_array_equal(np.asarray(out), np.asarray(value).astype(dtype))
  assert jnp.asarray([[], []]).shape == (2, 0)

def test_asarray_with_arrays_inside_lists():
  out = jnp.asarray([[1, jnp.asarray(2.5)], [3, 4]])
  assert out.dtype is jnp.float32 and not out.weak and out.tolist() == [[1.0, 2.5], [3.0, 4.0]]
  assert jnp.asarray([jnp.asarray(1.0), 2]).tolist() == [1.0, 2.0]

def test_asarray_dtype_argument_and_identity():
  x = jnp.asarray([1, 2])
  assert jnp.asarray(x) is x and jnp.asarray(x, jnp.float16).dtype is jnp.float16
  assert jnp.asarray(1.7, dtype=jnp.int32).item() == 1 and not jnp.asarray(1.7, dtype=jnp.int32).weak
  for big in ([300], 300, [1.0, 300.0], [-1]):   # a Python number that does not fit: an error, as numpy's and JAX's
    with pytest.raises(OverflowError, match="out of bounds for uint8"):
      jnp.asarray(big, dtype=jnp.uint8)
  assert jnp.asarray(np.array([300]), dtype=jnp.uint8).tolist() == [44]   # a numpy array's cast wraps, as numpy's
  assert jnp.asarray(2**31, dtype=jnp.uint32).item() == 2**31

def test_array_ndmin_and_copy():
  assert jnp.array([[1, 2], [3, 4]], ndmin=3).shape == (1, 2, 2)
  assert jnp.array(jnp.asarray(2.0)).weak            # as JAX: copying keeps the weak type
  x = jnp.arange(3)
  y = jnp.copy(x)
  assert y is not x and y.tolist() == [0, 1, 2] and x.copy().tolist() == [0, 1, 2]

def test_conversion_errors():
  with pytest.raises(OverflowError, match="2147483648.*int32"):
    jnp.asarray(2**31)
  with pytest.raises(OverflowError, match="int32"):
    jnp.asarray([1, 2**40])
  with pytest.raises((TypeError, ValueError)):
    jnp.asarray([1, [2]])
  assert jnp.asarray(1 + 2j).dtype is jnp.complex64
  with pytest.raises(TypeError, match="str"):
    jnp.asarray(np.array(['a']))
  with tinyjx.Context(JAX_ENABLE_X64=True):
    assert jnp.asarray(2**40).item() == 2**40

# --- fills ---
@SETTINGS
@given(shape=st.one_of(st.integers(0, 4), st.lists(st.integers(0, 3), max_size=3).map(tuple)),
       dtype=st.sampled_from([None, 'bool', 'int8', 'uint8', 'int32', 'float16', 'bfloat16', 'float32']))
def test_fills(shape, dtype):
  np_shape = (shape,) if isinstance(shape, int) else shape
  want = 'float32' if dtype is None else dtype
  host = np.float32 if want == 'bfloat16' else want
  same(jnp.zeros(shape, dtype), np.zeros(np_shape, host), want)
  same(jnp.ones(shape, dtype), np.ones(np_shape, host), want)
  same(jnp.empty(shape, dtype), np.zeros(np_shape, host), want)
  same(jnp.full(shape, 7, dtype), np.full(np_shape, 7 if want != 'bool' else True, host), want if dtype else 'int32')
  x = jnp.zeros(shape, dtype)
  same(jnp.ones_like(x), np.ones(np_shape, host), want)
  same(jnp.zeros_like(x, dtype=jnp.int8), np.zeros(np_shape, np.int8), 'int8')
  same(jnp.full_like(x, 3, shape=(2,)), np.full((2,), 3, host), want)
  same(jnp.empty_like(x), np.zeros(np_shape, host), want)
  assert leaves(jnp.ones(shape, dtype)) == {Ops.CONST}   # a fill allocates nothing

def test_full_weak_types_and_array_fills():
  assert jnp.full((2,), 1).weak and jnp.full((2,), 1).dtype is jnp.int32
  assert not jnp.full((2,), 1, jnp.int32).weak and not jnp.zeros(2).weak
  assert jnp.full((2,), 1.5, jnp.int32).tolist() == [1, 1]
  assert jnp.full((2,), True).dtype is jnp.bool_ and jnp.full((2,), np.float32(1.5)).tolist() == [1.5, 1.5]
  same(jnp.full((2, 2), jnp.asarray([1, 2]), dtype=jnp.float32), np.asarray([[1.0, 2.0], [1.0, 2.0]], np.float32))
  assert jnp.zeros_like(jnp.asarray(2.0)).weak and jnp.ones((2,), int).dtype is jnp.int32
  with pytest.raises(ValueError, match="negative dimension"):
    jnp.zeros((2, -1))
  with pytest.raises(TypeError, match="shape"):
    jnp.zeros((2.5,))

# --- arange ---
ARANGE_JAX = {  # jnp.arange(*args).tolist() from JAX: start + step * iota in float32
  (0, 1, 0.1): [0.0, 0.10000000149011612, 0.20000000298023224, 0.30000001192092896, 0.4000000059604645, 0.5,
                0.6000000238418579, 0.699999988079071, 0.800000011920929, 0.9000000357627869],
  (1.5, 7.3, 0.7): [1.5, 2.200000047683716, 2.9000000953674316, 3.5999999046325684, 4.300000190734863, 5.0,
                    5.699999809265137, 6.400000095367432, 7.099999904632568],
  (-1.0, -5.0, -0.3): [-1.0, -1.2999999523162842, -1.600000023841858, -1.9000000953674316, -2.200000047683716, -2.5,
                       -2.8000001907348633, -3.1000001430511475, -3.4000000953674316, -3.700000047683716, -4.0,
                       -4.300000190734863, -4.600000381469727, -4.900000095367432],
  (10, 2, -3): [10, 7, 4], (0.5, 3): [0.5, 1.5, 2.5], (5,): [0, 1, 2, 3, 4], (2.5,): [0.0, 1.0, 2.0],
}

@pytest.mark.parametrize("args", sorted(ARANGE_JAX, key=str))
def test_arange_matches_jax(args):
  out = jnp.arange(*args)
  assert leaves(out) <= {Ops.IOTA, Ops.CONST}   # an IOTA node, not host data
  assert out.tolist() == ARANGE_JAX[args]
  assert out.dtype is (jnp.int32 if all(isinstance(a, int) for a in args) else jnp.float32)

def test_arange_dtypes_match_jax():
  assert jnp.arange(0.5, 3, dtype=jnp.int32).tolist() == [0, 1, 2]
  assert jnp.arange(0.5, 3, 0.7, dtype=jnp.int32).tolist() == [0, 0, 0, 0]   # JAX casts the step first
  assert jnp.arange(1, 2, 0.25, dtype=jnp.float16).tolist() == [1.0, 1.25, 1.5, 1.75]
  assert jnp.arange(jnp.asarray(3)).tolist() == [0, 1, 2] and jnp.arange(3, dtype=float).dtype is jnp.float32
  with tinyjx.Context(JAX_ENABLE_X64=True):
    assert jnp.arange(3).dtype is jnp.int64 and jnp.arange(0.5, 2).dtype is jnp.float64
  with pytest.raises(ValueError, match="step"):
    jnp.arange(0, 5, 0)

@SETTINGS
@given(start=st.integers(-20, 20), stop=st.integers(-20, 20), step=st.integers(-5, 5).filter(bool))
def test_arange_integers(start, stop, step):
  same(jnp.arange(start, stop, step), np.arange(start, stop, step, dtype=np.int32), 'int32')
  same(jnp.arange(stop), np.arange(stop, dtype=np.int32), 'int32')

@SETTINGS
@given(start=st.floats(-10, 10), span=st.floats(-10, 10), step=st.floats(0.1, 3),
       dtype=st.sampled_from(['float32', 'int8']))
def test_arange_floats(start, span, step, dtype):
  step = step if span >= 0 else -step
  n = max(0, math.ceil(span / step))
  out = jnp.arange(start, start + span, step, dtype=dtype)
  assert out.shape == (max(0, math.ceil(((start + span) - start) / step)),) and abs(out.size - n) <= 1
  want = (np.float32(start if dtype == 'float32' else int(start)) +
          np.float32(step if dtype == 'float32' else int(step)) * np.arange(out.size, dtype=np.float32))
  np.testing.assert_allclose(np.asarray(out), want.astype(dtype), rtol=1e-6, atol=1e-6)

# --- linspace ---
LINSPACE_JAX = {  # jnp.linspace(*args).tolist() from JAX
  (0.0, 1.0, 7): [0.0, 0.1666666716337204, 0.3333333432674408, 0.5, 0.6666666865348816, 0.8333333730697632, 1.0],
  (-2.5, 3.3, 5): [-2.5, -1.0499999523162842, 0.3999999761581421, 1.8499999046325684, 3.299999952316284],
  (1, 10, 4): [1.0, 4.0, 7.000000476837158, 10.0],
  (0.0, 1.0, 6, False): [0.0, 0.1666666716337204, 0.3333333432674408, 0.5, 0.6666666865348816, 0.8333333730697632],
}

@pytest.mark.parametrize("args", sorted(LINSPACE_JAX, key=str))
def test_linspace_matches_jax(args):
  out = jnp.linspace(*args)
  assert out.dtype is jnp.float32 and out.tolist() == LINSPACE_JAX[args]

def test_linspace_forms():
  assert jnp.linspace(0, 10, 4, dtype=jnp.int32).tolist() == [0, 3, 6, 10]
  assert jnp.linspace(-3, 10, 7, dtype=jnp.int32).tolist() == [-3, -1, 1, 3, 5, 7, 10]
  assert jnp.linspace(jnp.asarray([0.0, 1.0]), 5.0, 3, axis=-1).tolist() == [[0.0, 2.5, 5.0], [1.0, 3.0, 5.0]]
  assert jnp.linspace(jnp.asarray([0.0, 1.0]), jnp.asarray([1.0, 3.0]), 3).tolist() == [[0.0, 1.0], [0.5, 2.0],
                                                                                        [1.0, 3.0]]
  assert jnp.linspace(0, 1, 3, dtype=jnp.float16).tolist() == [0.0, 0.5, 1.0]
  vals, step = jnp.linspace(0, 1, 4, retstep=True)
  assert step.item() == pytest.approx(1 / 3) and vals.shape == (4,)
  vals, step = jnp.linspace(0, 1, 1, retstep=True)
  assert vals.tolist() == [0.0] and math.isnan(step.item())
  vals, step = jnp.linspace(0, 1, 1, endpoint=False, retstep=True)
  assert vals.tolist() == [0.0] and step.item() == 1.0
  vals, step = jnp.linspace(0, 1, 0, retstep=True)
  assert vals.shape == (0,) and math.isnan(step.item())
  with pytest.raises(ValueError, match="negative"):
    jnp.linspace(0, 1, -1)

@SETTINGS
@given(a=st.floats(-100, 100), b=st.floats(-100, 100), num=st.integers(0, 12), endpoint=st.booleans())
def test_linspace_against_numpy(a, b, num, endpoint):
  out = jnp.linspace(a, b, num, endpoint=endpoint)
  np.testing.assert_allclose(np.asarray(out), np.linspace(a, b, num, endpoint=endpoint), rtol=1e-5, atol=1e-4)
  if num > 1 and endpoint: assert out.tolist()[-1] == np.float32(b)

# --- eye, identity, tri, tril, triu ---
@SETTINGS
@given(n=st.integers(0, 5), m=st.one_of(st.none(), st.integers(0, 5)), k=st.integers(-6, 6),
       dtype=st.sampled_from([None, 'bool', 'int8', 'float16']))
def test_eye_and_tri(n, m, k, dtype):
  want = 'float32' if dtype is None else dtype
  same(jnp.eye(n, m, k, dtype), np.eye(n, m, k, dtype=want), want)
  same(jnp.tri(n, m, k, dtype), np.tri(n, m, k, dtype=want), want)
  assert leaves(jnp.eye(n, m, k)) <= {Ops.IOTA, Ops.CONST}
  if m is None and k == 0: same(jnp.identity(n, dtype), np.identity(n, dtype=want), want)

@SETTINGS
@given(shape=st.lists(st.integers(0, 4), min_size=2, max_size=4).map(tuple), k=st.integers(-5, 5))
def test_tril_triu(shape, k):
  x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape) - 3
  same(jnp.tril(jnp.asarray(x), k), np.tril(x, k), 'int32')
  same(jnp.triu(jnp.asarray(x), k), np.triu(x, k), 'int32')

def test_triangle_errors():
  with pytest.raises(ValueError, match=r"at least 2 dimensions.*\(3,\)"):
    jnp.tril(jnp.zeros(3))
  with pytest.raises(ValueError, match="negative"):
    jnp.eye(-1)

# --- meshgrid ---
@SETTINGS
@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=3), indexing=st.sampled_from(['xy', 'ij']),
       sparse=st.booleans())
def test_meshgrid(sizes, indexing, sparse):
  xs = [np.arange(n, dtype=np.int32) + 10 * i for i, n in enumerate(sizes)]
  got = jnp.meshgrid(*[jnp.asarray(x) for x in xs], indexing=indexing, sparse=sparse)
  want = np.meshgrid(*xs, indexing=indexing, sparse=sparse)
  assert len(got) == len(want)
  for g, w in zip(got, want): same(g, w, 'int32')

def test_meshgrid_errors():
  with pytest.raises(ValueError, match="indexing"):
    jnp.meshgrid(jnp.arange(2), indexing='xx')
  with pytest.raises(ValueError, match=r"1-d.*\(2, 2\)"):
    jnp.meshgrid(jnp.zeros((2, 2)))

def test_docstring_examples():
  # the modules' docstring examples, run with the names of tinyjx.numpy in scope (`from tinyjx.numpy import *`)
  import doctest, importlib
  for name in ('tinyjx.numpy.core', 'tinyjx.numpy.shape', 'tinyjx.numpy.creation', 'tinyjx.dtypes', 'tinyjx.numpy'):
    result = doctest.testmod(importlib.import_module(name), extraglobs=dict(vars(jnp)), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, name
