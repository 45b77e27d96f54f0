"""Collectives inside pmap against numpy, for every device count from 1 to 8 (eight virtual devices), with pytrees and
several dtypes, on the compiled CPU device and the PYTHON reference device; known answers from JAX; vmap with an
axis_name against pmap; and the collectives' errors.

Each device count compiles one program holding every collective, so the CPU side stays a handful of compiles."""
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax
from tinyjx.collectives import AxisNameError

pytestmark = pytest.mark.usefixtures('eight_devices')   # fixtures eight_devices, device: conftest.py

# ---------------------------------------------------------------- numpy meaning, per device (xs[j] is device j's)

def ref_block(x, dim, j, n, tiled):
  if not tiled: return np.take(x, j, axis=dim)
  m = x.shape[dim] // n
  return np.take(x, range(j * m, (j + 1) * m), axis=dim)

def ref_psum(xs): return [xs.sum(0, dtype=xs.dtype)] * len(xs)
def ref_all_gather(xs, axis, tiled):
  return [np.concatenate(list(xs), axis) if tiled else np.stack(list(xs), axis)] * len(xs)
def ref_psum_scatter(xs, dim, tiled):
  return [ref_block(xs.sum(0, dtype=xs.dtype), dim, j, len(xs), tiled) for j in range(len(xs))]
def ref_ppermute(xs, perm):
  src = {d: s for s, d in perm}
  return [xs[src[j]] if j in src else np.zeros_like(xs[0]) for j in range(len(xs))]
def ref_all_to_all(xs, split, concat, tiled):
  n = len(xs)
  join = np.concatenate if tiled else np.stack
  return [join([ref_block(xs[k], split, j, n, tiled) for k in range(n)], concat) for j in range(n)]

def ring(n): return [(j, (j + 1) % n) for j in range(n - 1)]   # the last device sends nothing: device 0 gets zeros

def every_collective(n):
  """A function of a pytree that returns every collective of it, and the numpy answers for global values xs."""
  shuffle = [(3 * j + 1) % n for j in range(n)] if np.gcd(3, n) == 1 else list(reversed(range(n)))
  def f(tree):
    x, y = tree['x'], tree['pair'][1]
    return {'psum': lax.psum(tree, 'i'), 'pmax': lax.pmax(x, 'i'), 'pmin': lax.pmin(y, 'i'),
            'gather': lax.all_gather(x, 'i', axis=1), 'gather_tiled': lax.all_gather(y, 'i', axis=-1, tiled=True),
            'scatter': lax.psum_scatter(x, 'i', scatter_dimension=0),
            'scatter_tiled': lax.psum_scatter(y, 'i', scatter_dimension=1, tiled=True),
            'permute': lax.ppermute(x, 'i', ring(n)), 'shuffle': lax.pshuffle(y, 'i', shuffle),
            'a2a': lax.all_to_all(x, 'i', 0, 1), 'a2a_tiled': lax.all_to_all(y, 'i', 1, 0, tiled=True),
            'index': lax.axis_index('i')}
  def expected(xs, ys):
    return {'pmax': [xs.max(0)] * n, 'pmin': [ys.min(0)] * n,
            'gather': ref_all_gather(xs, 1, False), 'gather_tiled': ref_all_gather(ys, -1, True),
            'scatter': ref_psum_scatter(xs, 0, False), 'scatter_tiled': ref_psum_scatter(ys, 1, True),
            'permute': ref_ppermute(xs, ring(n)), 'shuffle': ref_ppermute(ys, [(shuffle[j], j) for j in range(n)]),
            'a2a': ref_all_to_all(xs, 0, 1, False), 'a2a_tiled': ref_all_to_all(ys, 1, 0, True),
            'index': [np.int32(j) for j in range(n)]}
  return f, expected

def inputs(n, dtype, rng):
  """Device j's x has shape (n, 3) (split and scattered along the axis size), y shape (2, 2n)."""
  def draw(shape):
    if np.dtype(dtype).kind == 'f': return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)
  return draw((n, n, 3)), draw((n, 2, 2 * n)), draw((n, 4))

def check(result, n, xs, ys, zs, rtol):
  """`result` of every_collective(n) on {'x': xs, 'pair': (zs, ys)} against numpy."""
  want = every_collective(n)[1](xs, ys)
  want['psum'] = {'x': ref_psum(xs), 'pair': (ref_psum(zs), ref_psum(ys))}
  flat_want = tinyjx.tree_util.tree_leaves(want, is_leaf=lambda v: isinstance(v, list))
  paths = [tinyjx.tree_util.keystr(p) for p, _ in tinyjx.tree_util.tree_flatten_with_path(result)[0]]
  for path, got, exp in zip(paths, tinyjx.tree_util.tree_leaves(result), flat_want):
    got, exp = np.asarray(got), np.stack(exp)
    assert got.dtype == exp.dtype, path
    np.testing.assert_allclose(got, exp, rtol=rtol, atol=rtol, err_msg=path)

@pytest.mark.parametrize('n', range(1, 9))
def test_every_collective_matches_numpy_for_each_device_count(device, n):
  rng = np.random.default_rng(n)
  xs, ys, zs = inputs(n, np.float32, rng)
  f, _ = every_collective(n)
  result = tinyjx.pmap(f, axis_name='i')({'x': xs, 'pair': (zs, ys)})
  check(result, n, xs, ys, zs, rtol=1e-5)

@pytest.mark.parametrize('dtype,ns', [(np.int32, (3,)), (np.float16, (2,)), (np.int8, (5,))])
def test_other_dtypes(device, dtype, ns):
  for n in ns if device == 'CPU' else range(1, 9):
    rng = np.random.default_rng(n)
    xs, ys, zs = inputs(n, dtype, rng)
    if dtype == np.int8: xs, ys, zs = xs // 8, ys // 8, zs // 8   # no overflow in the sums
    f, _ = every_collective(n)
    result = tinyjx.pmap(f, axis_name='i')({'x': xs, 'pair': (zs, ys)})
    check(result, n, xs, ys, zs, rtol=2e-3 if dtype == np.float16 else 0)

def test_bool_reductions(device):
  xs = np.array([[True, False, False], [False, False, True], [False, False, True]])
  f = tinyjx.pmap(lambda x: (lax.pmax(x, 'i'), lax.pmin(x, 'i'), lax.psum(x, 'i')), axis_name='i')
  mx, mn, total = (np.asarray(a) for a in f(xs))
  assert mx.dtype == np.bool_ and (mx == xs.any(0)).all() and (mn == xs.all(0)).all()
  assert total.dtype == np.int32 and (total == xs.sum(0)).all()   # as JAX: psum of bools counts them

# ---------------------------------------------------------------- known answers from JAX 0.10 (3 devices)

X3 = np.arange(3 * 3 * 6, dtype=np.float32).reshape(3, 3, 6) - 20
JAX_ANSWERS = {
  'a2a': [[[-20, -2, 16], [-19, -1, 17], [-18, 0, 18]], [[-14, 4, 22], [-13, 5, 23], [-12, 6, 24]],
          [[-8, 10, 28], [-7, 11, 29], [-6, 12, 30]]],
  'a2a_tiled': [[[-20, -19], [-14, -13], [-8, -7], [-2, -1], [4, 5], [10, 11], [16, 17], [22, 23], [28, 29]],
                [[-18, -17], [-12, -11], [-6, -5], [0, 1], [6, 7], [12, 13], [18, 19], [24, 25], [30, 31]],
                [[-16, -15], [-10, -9], [-4, -3], [2, 3], [8, 9], [14, 15], [20, 21], [26, 27], [32, 33]]],
  'gather_tiled': [[[-20, -19, -2, -1, 16, 17], [-14, -13, 4, 5, 22, 23], [-8, -7, 10, 11, 28, 29]]] * 3,
  'permute': [[0, 0], [16, 17], [-20, -19]],
  'shuffle': [[23, 24], [-13, -12], [5, 6]],
  'scatter': [[-6, -3, 0, 3, 6, 9], [12, 15, 18, 21, 24, 27], [30, 33, 36, 39, 42, 45]],
  'scatter_tiled': [[[-6, -3], [12, 15], [30, 33]], [[0, 3], [18, 21], [36, 39]], [[6, 9], [24, 27], [42, 45]]],
}

def known_answer_collectives(x):
  return {'a2a': lax.all_to_all(x[:, :3], 'i', 0, 1), 'a2a_tiled': lax.all_to_all(x, 'i', 1, 0, tiled=True),
          'scatter': lax.psum_scatter(x, 'i', scatter_dimension=0),
          'scatter_tiled': lax.psum_scatter(x, 'i', scatter_dimension=1, tiled=True),
          'gather_tiled': lax.all_gather(x[:, :2], 'i', axis=1, tiled=True),
          'permute': lax.ppermute(x[0, :2], 'i', [(0, 2), (2, 1)]), 'shuffle': lax.pshuffle(x[1, 1:3], 'i', [2, 0, 1])}

def test_known_answers_from_jax(device):
  got = tinyjx.pmap(known_answer_collectives, axis_name='i')(X3)
  for k, want in JAX_ANSWERS.items(): np.testing.assert_array_equal(np.asarray(got[k]), np.array(want), err_msg=k)

def test_known_answers_under_vmap():
  got = tinyjx.vmap(known_answer_collectives, axis_name='i')(X3)
  for k, want in JAX_ANSWERS.items(): np.testing.assert_array_equal(np.asarray(got[k]), np.array(want), err_msg=k)

# ---------------------------------------------------------------- vmap with an axis name means the same as pmap

@pytest.mark.parametrize('n', [1, 3, 8])
def test_vmap_with_axis_name_equals_pmap(device, n):
  rng = np.random.default_rng(10 + n)
  xs, ys, zs = inputs(n, np.float32, rng)
  f, _ = every_collective(n)
  tree = {'x': xs, 'pair': (zs, ys)}
  by_pmap = tinyjx.pmap(f, axis_name='i')(tree)
  by_vmap = tinyjx.block_until_ready(tinyjx.vmap(f, axis_name='i')(tree))
  check(by_vmap, n, xs, ys, zs, rtol=1e-5)
  for a, b in zip(tinyjx.tree_util.tree_leaves(by_pmap), tinyjx.tree_util.tree_leaves(by_vmap)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

def test_collectives_of_unmapped_values_under_vmap():
  xs = jnp.arange(4.0)
  out = tinyjx.vmap(lambda x, c: (lax.psum(c, 'i'), lax.pmax(c, 'i'), lax.all_gather(c, 'i'), lax.axis_index('i'),
                                  lax.ppermute(c, 'i', [(0, 1)])), in_axes=(0, None), axis_name='i')(xs, 2.0)
  s, m, g, idx, p = (np.asarray(a) for a in out)
  assert s.tolist() == [8.0] * 4 and m.tolist() == [2.0] * 4 and g.shape == (4, 4) and (g == 2).all()
  assert idx.tolist() == [0, 1, 2, 3] and p.tolist() == [0.0, 2.0, 0.0, 0.0]

def test_psum_of_a_constant_is_computed_at_trace_time():
  f = tinyjx.pmap(lambda x: x * lax.psum(1, 'i'), axis_name='i')
  assert np.asarray(f(jnp.ones(3))).tolist() == [3.0, 3.0, 3.0]
  assert 'psum' not in str(tinyjx.make_jaxpr(lambda x: tinyjx.vmap(lambda y: y * lax.psum(1, 'i'),
                                                                    axis_name='i')(x))(jnp.ones(3)))

def test_tuple_of_axis_names():
  xs = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
  def f(x):
    return lax.psum(x, ('i', 'j')), lax.axis_index(('i', 'j')), lax.pmean(x, ('i', 'j'))
  s, idx, m = tinyjx.pmap(tinyjx.vmap(f, axis_name='j'), axis_name='i')(xs)
  np.testing.assert_allclose(np.asarray(s), np.broadcast_to(xs.sum((0, 1)), xs.shape))
  np.testing.assert_allclose(np.asarray(m), np.broadcast_to(xs.mean((0, 1)), xs.shape), rtol=1e-6)
  assert np.asarray(idx).tolist() == [[0, 1, 2], [3, 4, 5]]   # JAX: i major

# ---------------------------------------------------------------- errors

def test_unknown_axis_name_names_the_known_ones():
  with pytest.raises(AxisNameError, match=r"unknown axis name 'j'.*'i'"):
    tinyjx.pmap(lambda x: lax.psum(x, 'j'), axis_name='i')(jnp.ones(2))
  with pytest.raises(AxisNameError, match=r"unknown axis name 'k'.*'rows'"):
    tinyjx.vmap(lambda x: lax.all_gather(x, 'k'), axis_name='rows')(jnp.ones(2))

def test_collective_outside_any_mapped_context():
  for call in (lambda: lax.psum(jnp.ones(2), 'i'), lambda: lax.axis_index('i'), lambda: lax.pmean(1.0, 'i')):
    with pytest.raises(AxisNameError, match="outside any"):
      call()

def test_bad_collective_arguments():
  f = lambda g: tinyjx.pmap(g, axis_name='i')(jnp.ones((2, 3)))
  with pytest.raises(ValueError, match="unique"):
    f(lambda x: lax.ppermute(x, 'i', [(0, 1), (0, 0)]))
  with pytest.raises(ValueError, match=r"range\(2\)"):
    f(lambda x: lax.ppermute(x, 'i', [(0, 2)]))
  with pytest.raises(ValueError, match="permutation"):
    f(lambda x: lax.pshuffle(x, 'i', [0, 0]))
  with pytest.raises(ValueError, match=r"dimension 0 of the operand of shape \(3,\) must be the axis size 2"):
    f(lambda x: lax.psum_scatter(x, 'i'))
  with pytest.raises(ValueError, match=r"split_axis 0 of the operand of shape \(3,\) must be a multiple"):
    f(lambda x: lax.all_to_all(x, 'i', 0, 0, tiled=True))
  with pytest.raises(ValueError, match="out of range"):
    f(lambda x: lax.all_gather(x, 'i', axis=3))
