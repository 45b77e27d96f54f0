"""Shape functions of tinyjx.numpy against numpy (hypothesis over shapes, axes and dtypes), the promise that
views are movement UOps (never copies), and the errors for bad shapes and axes."""
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from hypothesis.extra import numpy as hnp
import tinyjx
import tinyjx.numpy as jnp
from tinyjx.uop import Ops, GroupOp
from conftest import examples

pytestmark = pytest.mark.usefixtures('semantics_device')

SETTINGS = settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
DTYPES = ['bool', 'int8', 'uint8', 'int32', 'float16', 'float32']
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)

@st.composite
def arrays(draw, shapes=SHAPES, dtypes=DTYPES):
  dtype = draw(st.sampled_from(dtypes))
  shape = draw(shapes)
  el = st.booleans() if dtype == 'bool' else st.integers(-100, 100) if dtype != 'uint8' else st.integers(0, 255)
  return draw(hnp.arrays(np.dtype(dtype), shape, elements=el))

def same(got, want):
  want = np.asarray(want)
  assert got.shape == want.shape, (got.shape, want.shape)
  assert got.dtype.name == want.dtype.name, (got.dtype, want.dtype)
  np.testing.assert_array_equal(np.asarray(got), want)

def ops_in(x) -> set: return {n.op for n in x.uop.toposort()}

def assert_view(x, extra=()):
  """Only movement ops (and `extra`) between the result and the input buffer: no copy, no computation."""
  assert ops_in(x) <= GroupOp.Movement | {Ops.BUFFER, Ops.CONST} | set(extra), ops_in(x)

# --- reshape and friends ---
@SETTINGS
@given(x=arrays(), data=st.data())
def test_reshape(x, data):
  dims = [d for d in x.shape]
  target = tuple(data.draw(st.permutations(dims))) if dims else ()
  if target and data.draw(st.booleans()) and math.prod(d for i, d in enumerate(target) if i != 0) != 0:
    target = (-1,) + target[1:]
  got = jnp.reshape(jnp.asarray(x), target)
  same(got, np.reshape(x, target))
  assert_view(got)
  same(jnp.asarray(x).reshape(*target) if target else jnp.asarray(x).reshape(()), np.reshape(x, target))
  same(jnp.ravel(jnp.asarray(x)), np.ravel(x))
  same(jnp.asarray(x).flatten(), x.flatten())

def test_reshape_errors_name_both_sizes():
  with pytest.raises(ValueError, match=r"shape \(6,\) \(size 6\) into shape \(4, 2\) \(size 8\)"):
    jnp.zeros(6).reshape(4, 2)
  with pytest.raises(ValueError, match=r"size 6.*\(4, -1\)"):
    jnp.zeros(6).reshape((4, -1))
  with pytest.raises(ValueError, match="one unknown dimension"):
    jnp.zeros(6).reshape(-1, -1)
  assert jnp.zeros((0, 3)).reshape(-1, 3).shape == (0, 3)

@SETTINGS
@given(x=arrays(), data=st.data())
def test_transpose_swapaxes_moveaxis(x, data):
  a, nd = jnp.asarray(x), x.ndim
  perm = data.draw(st.permutations(range(nd)))
  neg = [p - nd if data.draw(st.booleans()) else p for p in perm]
  same(jnp.transpose(a, neg), np.transpose(x, perm))
  same(a.transpose(), x.T)
  same(a.T, x.T)
  if nd:
    same(a.transpose(*neg), np.transpose(x, perm))
    i, j = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
    same(jnp.swapaxes(a, i, j), np.swapaxes(x, i, j))
    k = data.draw(st.integers(0, nd))
    src = data.draw(st.lists(st.integers(0, nd - 1), unique=True, min_size=k, max_size=k))
    dst = data.draw(st.lists(st.integers(-nd, nd - 1), unique_by=lambda v: v % nd, min_size=k, max_size=k))
    got = jnp.moveaxis(a, src, dst)
    same(got, np.moveaxis(x, src, dst))
    assert_view(got)
  if nd >= 2: same(a.mT, np.swapaxes(x, -1, -2))

@SETTINGS
@given(x=arrays(), data=st.data())
def test_expand_dims_squeeze(x, data):
  a = jnp.asarray(x)
  out_nd = x.ndim + data.draw(st.integers(1, 2))
  axes = tuple(data.draw(st.lists(st.integers(-out_nd, out_nd - 1), unique_by=lambda v: v % out_nd,
                                  min_size=out_nd - x.ndim, max_size=out_nd - x.ndim)))
  e = jnp.expand_dims(a, axes)
  same(e, np.expand_dims(x, axes))
  same(jnp.squeeze(e), np.squeeze(np.expand_dims(x, axes)))
  same(jnp.squeeze(e, axes), x)
  same(e.squeeze(axes[0]), np.squeeze(np.expand_dims(x, axes), axes[0]))
  assert_view(jnp.squeeze(e))

def test_squeeze_and_axis_errors():
  with pytest.raises(ValueError, match=r"axis 0 of an array of shape \(2, 3\).*size is 2"):
    jnp.squeeze(jnp.zeros((2, 3)), 0)
  with pytest.raises(ValueError, match=r"axis 3 .*ndim 3"):
    jnp.expand_dims(jnp.zeros(3), (0, 3))
  with pytest.raises(ValueError, match=r"source 2 .*ndim 2"):
    jnp.moveaxis(jnp.zeros((2, 3)), 2, 0)
  with pytest.raises(ValueError, match=r"not a permutation.*\(2, 3\)"):
    jnp.transpose(jnp.zeros((2, 3)), (0, 0))
  with pytest.raises(ValueError, match=r"axis1 -3 .*ndim 2"):
    jnp.swapaxes(jnp.zeros((2, 3)), -3, 0)

# --- broadcasting ---
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=3))
def test_broadcast_to_and_arrays(shapes):
  xs = [np.arange(math.prod(s), dtype=np.int32).reshape(s) for s in shapes.input_shapes]
  for x in xs:
    got = jnp.broadcast_to(jnp.asarray(x), shapes.result_shape)
    same(got, np.broadcast_to(x, shapes.result_shape))
    assert_view(got)
  for g, w in zip(jnp.broadcast_arrays(*[jnp.asarray(x) for x in xs]), np.broadcast_arrays(*xs)): same(g, w)
  assert jnp.broadcast_shapes(*shapes.input_shapes) == shapes.result_shape

def test_broadcast_errors_name_both_shapes():
  with pytest.raises(ValueError, match=r"shape \(2, 3\) to shape \(3, 3\)"):
    jnp.broadcast_to(jnp.zeros((2, 3)), (3, 3))
  with pytest.raises(ValueError, match=r"shape \(2, 3\) to shape \(3,\)"):
    jnp.broadcast_to(jnp.zeros((2, 3)), (3,))
  with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
    jnp.broadcast_arrays(jnp.zeros(2), jnp.zeros(3))
  assert jnp.broadcast_to(5.0, (2,)).tolist() == [5.0, 5.0]

# --- joining ---
@st.composite
def joinable(draw, same_shape=False):
  nd = draw(st.integers(1, 3))
  base = list(draw(hnp.array_shapes(min_dims=nd, max_dims=nd, min_side=0, max_side=3)))
  axis = draw(st.integers(-nd, nd - 1))
  xs = []
  for _ in range(draw(st.integers(1, 4))):
    shape = list(base)
    if not same_shape: shape[axis] = draw(st.integers(0, 3))
    dtype = draw(st.sampled_from(DTYPES))
    xs.append(draw(hnp.arrays(np.dtype(dtype), tuple(shape), elements=st.integers(0, 1) if dtype == 'bool' else
                              st.integers(-100, 100) if dtype != 'uint8' else st.integers(0, 255))))
  return xs, axis

def promoted(xs):
  return jnp.result_type(*[jnp.asarray(x) for x in xs]).name

@SETTINGS
@given(case=joinable())
def test_concatenate(case):
  xs, axis = case
  got = jnp.concatenate([jnp.asarray(x) for x in xs], axis=axis)
  dt = promoted(xs)
  same(got, np.concatenate([x.astype(dt) for x in xs], axis=axis))
  assert_view(got, extra={Ops.ADD, Ops.OR, Ops.CAST})   # pieces are padded into place and summed: no copies
  same(jnp.concatenate([jnp.asarray(x) for x in xs], axis=None), np.concatenate([x.astype(dt).ravel() for x in xs]))

@SETTINGS
@given(case=joinable(same_shape=True))
def test_stacking(case):
  xs, axis = case
  dt = promoted(xs)
  ys = [x.astype(dt) for x in xs]
  arrs = [jnp.asarray(x) for x in xs]
  same(jnp.stack(arrs, axis=axis), np.stack(ys, axis=axis))
  same(jnp.stack(arrs, axis=-1), np.stack(ys, axis=-1))
  same(jnp.vstack(arrs), np.vstack(ys))
  same(jnp.hstack(arrs), np.hstack(ys))
  same(jnp.dstack(arrs), np.dstack(ys))
  if ys[0].ndim <= 2: same(jnp.column_stack(arrs), np.column_stack(ys))

def test_stacking_scalars_and_1d():
  same(jnp.stack([1, 2]), np.asarray([1, 2], np.int32))
  same(jnp.vstack([jnp.arange(3), jnp.arange(3)]), np.vstack([np.arange(3)] * 2).astype(np.int32))
  same(jnp.hstack([jnp.asarray(1.0), jnp.asarray([2.0])]), np.asarray([1.0, 2.0], np.float32))
  same(jnp.column_stack([jnp.arange(2), jnp.arange(2)]), np.column_stack([np.arange(2)] * 2).astype(np.int32))
  same(jnp.dstack([jnp.arange(2), jnp.arange(2)]), np.dstack([np.arange(2)] * 2).astype(np.int32))
  out = jnp.concatenate([jnp.asarray([-0.0, 1.5]), jnp.asarray([2.5], jnp.float16)])
  assert out.dtype is jnp.float32 and out.tolist() == [0.0, 1.5, 2.5]
  assert jnp.concatenate([jnp.asarray([1], jnp.int8), jnp.asarray([2], jnp.uint8)]).dtype is jnp.int16
  assert jnp.concatenate([jnp.asarray([1]), jnp.asarray([2])], dtype=jnp.float16).dtype is jnp.float16
  assert jnp.append(jnp.arange(2), 5).tolist() == [0, 1, 5]

def test_join_errors_name_the_shapes():
  with pytest.raises(ValueError, match=r"axis 0, got \[\(2, 3\), \(2, 4\)\]"):
    jnp.concatenate([jnp.zeros((2, 3)), jnp.zeros((2, 4))])
  with pytest.raises(ValueError, match=r"number of dimensions.*\(2, 3\), \(2, 4, 1\)"):
    jnp.concatenate([jnp.zeros((2, 3)), jnp.zeros((2, 4, 1))], axis=1)
  with pytest.raises(ValueError, match="zero-dimensional"):
    jnp.concatenate([jnp.asarray(1.0), jnp.asarray(2.0)])
  with pytest.raises(ValueError, match=r"same shape.*\(2,\), \(3,\)"):
    jnp.stack([jnp.zeros(2), jnp.zeros(3)])
  with pytest.raises(ValueError, match="at least one"):
    jnp.concatenate([])

# --- splitting ---
@SETTINGS
@given(x=arrays(shapes=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6)), data=st.data())
def test_split(x, data):
  axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
  n = x.shape[axis]
  a = jnp.asarray(x)
  k = data.draw(st.integers(1, 4))
  for g, w in zip(jnp.array_split(a, k, axis), np.array_split(x, k, axis)): same(g, w)
  if n % k == 0:
    for g, w in zip(jnp.split(a, k, axis), np.split(x, k, axis)): same(g, w)
  idx = sorted(data.draw(st.lists(st.integers(-n - 2, n + 2), max_size=3)))
  pieces = jnp.split(a, idx, axis)
  assert len(pieces) == len(idx) + 1
  for g, w in zip(pieces, np.split(x, idx, axis)):
    same(g, w)
    assert_view(g)

def test_split_errors_and_helpers():
  with pytest.raises(ValueError, match=r"equal division: axis 0 of size 7 into 3 sections"):
    jnp.split(jnp.zeros(7), 3)
  x = np.arange(24).reshape(2, 4, 3)
  for g, w in zip(jnp.hsplit(jnp.asarray(x), 2), np.hsplit(x, 2)): same(g, w.astype(np.int32))
  for g, w in zip(jnp.vsplit(jnp.asarray(x), 2), np.vsplit(x, 2)): same(g, w.astype(np.int32))
  for g, w in zip(jnp.dsplit(jnp.asarray(x), [1]), np.dsplit(x, [1])): same(g, w.astype(np.int32))

# --- padding ---
@st.composite
def pad_widths(draw, ndim, big=False):
  hi = 9 if big else 3
  form = draw(st.sampled_from(['int', 'pair', 'per_axis', 'single_pair_list'] if ndim else ['int', 'pair']))
  if form == 'int': return draw(st.integers(0, hi))
  if form == 'pair': return (draw(st.integers(0, hi)), draw(st.integers(0, hi)))
  if form == 'single_pair_list': return ((draw(st.integers(0, hi)), draw(st.integers(0, hi))),)
  return tuple((draw(st.integers(0, hi)), draw(st.integers(0, hi))) for _ in range(ndim))

@SETTINGS
@given(x=arrays(shapes=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)), data=st.data())
def test_pad_constant(x, data):
  widths = data.draw(pad_widths(x.ndim))
  cv = data.draw(st.one_of(st.just(0), st.integers(-5, 5), st.tuples(st.integers(-5, 5), st.integers(-5, 5)),
                           st.tuples(*[st.tuples(st.integers(-5, 5), st.integers(-5, 5))] * x.ndim)))
  if x.dtype == np.uint8 or x.ndim == 0: cv = 7
  if x.dtype == np.bool_: cv = True
  got = jnp.pad(jnp.asarray(x), widths, constant_values=cv)
  same(got, np.pad(x, widths, constant_values=cv))
  assert_view(got, extra={Ops.WHERE, Ops.IOTA, Ops.CMPLT})

@pytest.mark.parametrize("mode", ['edge', 'reflect', 'symmetric', 'wrap'])
@SETTINGS
@given(x=arrays(shapes=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)), data=st.data())
def test_pad_modes(mode, x, data):
  widths = data.draw(pad_widths(x.ndim, big=True))   # wider than the array: numpy keeps reflecting
  got = jnp.pad(jnp.asarray(x), widths, mode=mode)
  same(got, np.pad(x, widths, mode=mode))
  assert_view(got, extra={Ops.ADD, Ops.OR})

def test_pad_errors_and_forms():
  with pytest.raises(ValueError, match="empty axis 0"):
    jnp.pad(jnp.zeros(0), 2, mode='reflect')
  with pytest.raises(NotImplementedError, match="supported modes are constant, edge"):
    jnp.pad(jnp.zeros(2), 1, mode='median')
  with pytest.raises(ValueError, match="negative"):
    jnp.pad(jnp.zeros(2), -1)
  with pytest.raises(ValueError, match="one pair per axis"):
    jnp.pad(jnp.zeros((2, 2)), ((1, 2), (1, 2), (3, 4)))
  same(jnp.pad(jnp.zeros(2), 0, mode='reflect'), np.zeros(2, np.float32))
  same(jnp.pad(jnp.ones(2), 1, constant_values=jnp.asarray(3.0)), np.pad(np.ones(2, np.float32), 1, constant_values=3))
  same(jnp.pad(jnp.ones(2, jnp.int32), 1, constant_values=1.5), np.asarray([1, 1, 1, 1], np.int32))

# --- tile, repeat, flip, roll, rot90 ---
@SETTINGS
@given(x=arrays(shapes=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)), data=st.data())
def test_tile(x, data):
  reps = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=1, max_size=4).map(tuple)))
  got = jnp.tile(jnp.asarray(x), reps)
  same(got, np.tile(x, reps))
  assert_view(got)

@SETTINGS
@given(x=arrays(shapes=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)), data=st.data())
def test_repeat(x, data):
  axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1))) if x.ndim else None
  r = data.draw(st.integers(0, 3))
  got = jnp.repeat(jnp.asarray(x), r, axis=axis)
  same(got, np.repeat(x, r, axis=axis))
  assert_view(got)
  n = x.size if axis is None else x.shape[axis]
  counts = data.draw(hnp.arrays(np.int32, (n,), elements=st.integers(0, 3)))
  same(jnp.repeat(jnp.asarray(x), jnp.asarray(counts), axis=axis), np.repeat(x, counts, axis=axis))
  same(jnp.asarray(x).repeat(jnp.asarray(counts), axis=axis), np.repeat(x, counts, axis=axis))

def test_repeat_total_length_and_errors():
  assert jnp.repeat(jnp.arange(3), jnp.asarray([1, 2, 0]), total_repeat_length=5).tolist() == [0, 1, 1, 1, 1]
  assert jnp.repeat(jnp.arange(3), 2, total_repeat_length=4).tolist() == [0, 0, 1, 1]
  with pytest.raises(ValueError, match="negative"):
    jnp.repeat(jnp.arange(3), -1)
  with pytest.raises(ValueError, match="3 elements"):
    jnp.repeat(jnp.arange(3), jnp.asarray([1, 2]))

@SETTINGS
@given(x=arrays(), data=st.data())
def test_flip_and_roll(x, data):
  a, nd = jnp.asarray(x), x.ndim
  axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                             st.lists(st.integers(0, nd - 1), unique=True).map(tuple))) if nd else None
  got = jnp.flip(a, axis)
  same(got, np.flip(x, axis))
  assert_view(got)
  if nd >= 1: same(jnp.flipud(a), np.flipud(x))
  if nd >= 2: same(jnp.fliplr(a), np.fliplr(x))
  shift = data.draw(st.integers(-7, 7))
  same(jnp.roll(a, shift), np.roll(x, shift))
  if nd:
    axes = tuple(data.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=3)))
    shifts = tuple(data.draw(st.lists(st.integers(-7, 7), min_size=len(axes), max_size=len(axes))))
    got = jnp.roll(a, shifts, axes)
    same(got, np.roll(x, shifts, axes))
    assert_view(got)
    same(jnp.roll(a, shift, axes), np.roll(x, shift, axes))

@SETTINGS
@given(x=arrays(shapes=hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=3)), data=st.data())
def test_rot90(x, data):
  k = data.draw(st.integers(-5, 5))
  i, j = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), unique_by=lambda v: v % x.ndim, min_size=2, max_size=2))
  got = jnp.rot90(jnp.asarray(x), k, (i, j))
  same(got, np.rot90(x, k, (i, j)))
  assert_view(got)

# --- dimensions ---
@SETTINGS
@given(x=arrays())
def test_atleast_and_sizes(x):
  a = jnp.asarray(x)
  same(jnp.atleast_1d(a), np.atleast_1d(x))
  same(jnp.atleast_2d(a), np.atleast_2d(x))
  same(jnp.atleast_3d(a), np.atleast_3d(x))
  assert jnp.shape(a) == x.shape and jnp.ndim(a) == x.ndim and jnp.size(a) == x.size
  if x.ndim: assert jnp.size(a, -1) == x.shape[-1]
  assert jnp.shape([[1, 2, 3]]) == (1, 3) and jnp.ndim(2.0) == 0

def test_atleast_with_several_arrays():
  a, b = jnp.atleast_2d(1.0, jnp.arange(3))
  assert a.shape == (1, 1) and b.shape == (1, 3)

def test_views_keep_weak_types():
  w = jnp.asarray(2.0)
  assert jnp.reshape(w, (1,)).weak and jnp.expand_dims(w, 0).weak and jnp.broadcast_to(w, (3,)).weak
  assert not jnp.reshape(jnp.asarray([1.0]), ()).weak
