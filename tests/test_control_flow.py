"""Tests of lax.cond / switch / while_loop / fori_loop / scan / map and the dynamic slices: values against Python
loops on the same data, gradients against finite differences, jvp against vjp, vmap against loops, every
combination with jit, the errors, and that loops are traced once and never unrolled."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import dtypes, lax, grad, jit, jvp, vjp, vmap
from tinyjx.uop import Ops, toposort
from conftest import examples

RNG = np.random.default_rng(0)

def close(a, b, tol=1e-5):
  np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=tol, atol=tol)

def fd_grad(f, x, eps=1e-6):
  """Central finite differences of scalar f at float64 numpy x."""
  x = np.asarray(x, np.float64)
  g = np.zeros_like(x)
  for i in np.ndindex(x.shape):
    e = np.zeros_like(x)
    e[i] = eps
    g[i] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
  return g

@pytest.fixture
def x64():
  with tinyjx.Context(JAX_ENABLE_X64=True): yield

# ---------------------------------------------------------------- cond and switch: values

def test_cond_picks_branch():
  f = lambda p, x: lax.cond(p, lambda v: v * 10.0, lambda v: v - 1.0, x)
  assert float(f(True, 3.0)) == 30.0 and float(f(False, 3.0)) == 2.0
  assert float(f(jnp.asarray(1) > 0, 3.0)) == 30.0
  assert float(lax.cond(2, lambda: 1.0, lambda: 0.0)) == 1.0          # a nonzero number is true

def test_cond_pytrees_and_closure():
  w = jnp.asarray([1.0, 2.0])
  def f(p, tree):
    return lax.cond(p, lambda t: {'a': t[0] * w, 'b': t[1] + 1}, lambda t: {'a': t[0] - w, 'b': t[1] * 2}, tree)
  x = (jnp.asarray([3.0, 4.0]), jnp.asarray(5))
  out = f(True, x)
  assert set(out) == {'a', 'b'} and out['a'].tolist() == [3.0, 8.0] and out['b'].tolist() == 6
  out = f(False, x)
  assert out['a'].tolist() == [2.0, 2.0] and out['b'].tolist() == 10

def test_switch_clamps_index():
  branches = [lambda x: x + 1, lambda x: x * 2, lambda x: x - 3]
  for i, want in [(-5, 11), (0, 11), (1, 20), (2, 7), (9, 7)]:
    assert int(lax.switch(i, branches, 10)) == want
  assert int(lax.switch(jnp.asarray(1), branches[:1], 10)) == 11

def test_cond_runs_only_the_taken_branch_on_the_device():
  big = lambda x: jnp.log(x)                        # would give NaN on the operand if it ran and was selected
  assert float(lax.cond(True, lambda x: x, big, -1.0)) == -1.0

# ---------------------------------------------------------------- while_loop and fori_loop: values

def collatz_steps(n):
  steps = 0
  while n != 1:
    n = n // 2 if n % 2 == 0 else 3 * n + 1
    steps += 1
  return steps

def collatz(n):
  body = lambda c: (jnp.where(c[0] % 2 == 0, c[0] // 2, 3 * c[0] + 1), c[1] + 1)
  return lax.while_loop(lambda c: c[0] != 1, body, (n, 0))[1]

@pytest.mark.parametrize("n", [1, 6, 27])
def test_while_loop_against_python(n):
  assert int(collatz(jnp.asarray(n))) == collatz_steps(n)

def test_while_loop_pytree_carry_and_closure():
  step = jnp.asarray([0.5, 1.5])
  body = lambda c: {'i': c['i'] + 1, 'x': c['x'] + step}
  out = lax.while_loop(lambda c: c['i'] < 4, body, {'i': 0, 'x': jnp.zeros(2)})
  assert int(out['i']) == 4 and out['x'].tolist() == [2.0, 6.0]

def test_fori_loop_static_and_traced_bounds():
  body = lambda i, acc: acc * 2.0 + i
  want = 0.5
  for i in range(2, 7): want = want * 2.0 + i
  assert float(lax.fori_loop(2, 7, body, 0.5)) == want
  assert float(jit(lambda lo, hi: lax.fori_loop(lo, hi, body, 0.5))(2, 7)) == want
  assert float(lax.fori_loop(5, 3, body, 0.5)) == 0.5        # an empty range leaves the carry alone
  assert float(lax.fori_loop(0, 3, lambda i, x: x + 0.5, 0)) == 1.5   # a weak int carry is promoted, as in JAX

def test_weakly_typed_body_result_fits_a_strong_carry_of_the_same_dtype():
  # weak type is not part of a carry's type (JAX's rule): the body may return i * 1.0 for a float32 carry, and
  # the result keeps the carry's strong type
  strong = jnp.zeros((), jnp.float32)
  out = lax.fori_loop(0, 4, lambda i, c: i * 1.0, strong)
  assert float(out) == 3.0 and out.dtype == jnp.float32 and not out.weak
  out = jit(lambda c: lax.fori_loop(0, 4, lambda i, c: c + 0 * c + 2.0 - c, c))(strong)
  assert float(out) == 2.0 and not out.weak
  c, ys = lax.scan(lambda c, x: (x * 1.0, c), strong, jnp.arange(3))
  assert float(c) == 2.0 and not c.weak and ys.tolist() == [0.0, 0.0, 1.0]
  out = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, 5.0), (jnp.zeros((), jnp.int32), strong))
  assert int(out[0]) == 3 and float(out[1]) == 5.0 and not out[0].weak and not out[1].weak
  vec = lax.fori_loop(0, 2, lambda i, c: jnp.full((2,), 1.5), jnp.zeros(2))   # jnp.full of a Python float is strong
  assert vec.tolist() == [1.5, 1.5]

def test_cond_branches_may_differ_in_weak_type_only():
  out = lax.cond(True, lambda x: 1.0, lambda x: x, jnp.zeros((), jnp.float32))
  assert float(out) == 1.0 and out.dtype == jnp.float32 and not out.weak   # weak only if every branch is weak
  out = lax.switch(1, [lambda: 2.0, lambda: jnp.asarray(3.0, jnp.float32)])
  assert float(out) == 3.0 and not out.weak
  with pytest.raises(TypeError, match="same shapes and dtypes"):
    lax.cond(True, lambda: jnp.zeros(2), lambda: jnp.zeros(3))

# ---------------------------------------------------------------- scan and map: values

def scan_reference(f, init, xs, reverse=False):
  carry, ys = init, [None] * len(xs)
  for t in (reversed(range(len(xs))) if reverse else range(len(xs))):
    carry, ys[t] = f(carry, xs[t])
  return carry, np.stack(ys)

@settings(max_examples=examples(25), deadline=None)
@given(n=st.integers(1, 7), d=st.integers(1, 3), reverse=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_scan_against_python(n, d, reverse, seed):
  rng = np.random.default_rng(seed)
  xs, w, c0 = (rng.normal(size=s).astype(np.float32) for s in ((n, d), (d,), (d,)))
  f_np = lambda c, x: (np.tanh(c * w + x), (c * x).sum())
  f = lambda c, x: (jnp.tanh(c * jnp.asarray(w) + x), (c * x).sum())
  c, ys = lax.scan(f, jnp.asarray(c0), jnp.asarray(xs), reverse=reverse)
  c_ref, ys_ref = scan_reference(f_np, c0, xs, reverse)
  close(c, c_ref)
  close(ys, ys_ref)

def test_scan_pytrees_none_xs_length_and_unroll():
  xs = {'a': jnp.arange(4.0), 'b': jnp.ones((4, 2))}
  (i, s), ys = lax.scan(lambda c, x: ((c[0] + 1, c[1] + x['a'] * x['b']), {'y': x['a'] * 2}), (0, jnp.zeros(2)), xs,
                        unroll=2)
  assert int(i) == 4 and s.tolist() == [6.0, 6.0] and ys['y'].tolist() == [0.0, 2.0, 4.0, 6.0]
  c, ys = lax.scan(lambda c, _: (c * 2, c), 1, None, length=5)
  assert int(c) == 32 and ys.tolist() == [1, 2, 4, 8, 16]
  c, ys = lax.scan(lambda c, x: (c + x, None), 0.0, jnp.arange(3.0))
  assert float(c) == 3.0 and ys is None
  c, ys = lax.scan(lambda c, x: (c + x, x), 0.0, jnp.zeros((0,)))
  assert float(c) == 0.0 and ys.shape == (0,)

def test_map():
  xs = jnp.asarray(RNG.normal(size=(5, 3)).astype(np.float32))
  want = (np.asarray(xs) ** 2).sum(1)
  close(lax.map(lambda x: jnp.sum(x * x), xs), want)
  for b in (1, 2, 5, 8):
    close(lax.map(lambda x: jnp.sum(x * x), xs, batch_size=b), want)

# ---------------------------------------------------------------- dynamic slices

@settings(max_examples=examples(25), deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_dynamic_slice_and_update_against_numpy(shape, data):
  x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
  sizes = [data.draw(st.integers(0, s)) for s in shape]
  starts = [data.draw(st.integers(-7, 7)) for _ in shape]
  fit = [min(max(s + d if s < 0 else s, 0), d - n) for s, n, d in zip(starts, sizes, shape)]
  want = x[tuple(slice(s, s + n) for s, n in zip(fit, sizes))]
  traced = [jnp.asarray(s) for s in starts]
  assert np.array_equal(lax.dynamic_slice(x, starts, sizes), want)
  assert np.array_equal(jit(lambda x, *s: lax.dynamic_slice(x, s, sizes))(x, *traced), want)
  upd = -np.ones(sizes, np.float32)
  ref = x.copy()
  ref[tuple(slice(s, s + n) for s, n in zip(fit, sizes))] = upd
  assert np.array_equal(lax.dynamic_update_slice(x, upd, starts), ref)
  assert np.array_equal(jit(lambda x, u, *s: lax.dynamic_update_slice(x, u, s))(x, upd, *traced), ref)

def test_dynamic_index_helpers():
  x = jnp.arange(12).reshape(3, 4)
  assert lax.dynamic_index_in_dim(x, jnp.asarray(2), axis=1, keepdims=False).tolist() == [2, 6, 10]
  assert lax.dynamic_slice_in_dim(x, jnp.asarray(1), 2, axis=0).tolist() == [[4, 5, 6, 7], [8, 9, 10, 11]]
  y = lax.dynamic_update_index_in_dim(x, jnp.asarray([-1, -2, -3, -4]), jnp.asarray(1), 0)
  assert y.tolist()[1] == [-1, -2, -3, -4] and y.tolist()[0] == [0, 1, 2, 3]

def test_scan_writes_rows_with_dynamic_update():
  out = lax.fori_loop(0, 4, lambda i, buf: lax.dynamic_update_index_in_dim(buf, i * i * 1.0, i, 0), jnp.zeros(4))
  assert out.tolist() == [0.0, 1.0, 4.0, 9.0]

# ---------------------------------------------------------------- gradients against finite differences

def test_grad_cond_and_switch(x64):
  f = lambda x: lax.cond(x[0] > 0, lambda v: jnp.sum(jnp.sin(v) * v), lambda v: jnp.sum(v ** 3), x)
  for x0 in ([0.3, -1.2, 2.0], [-0.3, 0.7, 1.1]):
    x = np.asarray(x0)
    close(grad(f)(x), fd_grad(f, x), 1e-6)
  g = lambda i, x: lax.switch(i, [lambda v: v * v, lambda v: jnp.exp(v), lambda v: -v], x)
  for i, want in [(0, 2 * 1.5), (1, np.exp(1.5)), (2, -1.0)]:
    close(grad(g, argnums=1)(i, 1.5), want, 1e-9)

def test_grad_scan_all_inputs(x64):
  xs0, w0 = RNG.normal(size=(6, 3)), RNG.normal(size=(3,))
  def f(c0, xs, w):
    c, ys = lax.scan(lambda c, x: (jnp.tanh(c * w + x), jnp.sum(c * x)), c0, xs)
    return jnp.sum(c) + jnp.sum(ys * ys)
  c0 = np.asarray([0.1, -0.2, 0.3])
  gc, gx, gw = grad(f, argnums=(0, 1, 2))(c0, xs0, w0)
  close(gc, fd_grad(lambda c: f(c, xs0, w0), c0), 1e-6)
  close(gx, fd_grad(lambda x: f(c0, x, w0), xs0), 1e-6)
  close(gw, fd_grad(lambda w: f(c0, xs0, w), w0), 1e-6)

def test_grad_reverse_scan_and_closure(x64):
  def f(w):
    c, ys = lax.scan(lambda c, x: (c * w + x, c), 1.0, jnp.arange(4.0), reverse=True)
    return c + jnp.sum(ys)
  close(grad(f)(0.7), fd_grad(f, 0.7), 1e-6)
  close(grad(lambda w: lax.scan(lambda c, _: (c * w, None), 1.0, None, length=3)[0])(2.0), 12.0, 1e-12)

def test_grad_fori_loop_static_bounds(x64):
  f = lambda x: lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) * x + i, 0.5)
  close(grad(f)(1.3), fd_grad(f, 1.3), 1e-6)

def test_second_derivative_through_scan(x64):
  f = lambda x: lax.scan(lambda c, _: (c * x + jnp.sin(c), None), 0.3, None, length=3)[0]
  d1 = lambda x: grad(f)(x)
  close(grad(d1)(0.9), fd_grad(d1, 0.9, 1e-5), 1e-5)
  close(tinyjx.hessian(f)(0.9), grad(d1)(0.9), 1e-9)

def test_grad_nested_control_flow(x64):
  def f(x):
    def body(c, xi):
      return lax.cond(xi > 0, lambda v: v * xi, lambda v: v + xi, c), c
    c, ys = lax.scan(body, x, jnp.asarray([1.5, -0.5, 2.0]))
    return c + jnp.sum(ys)
  close(grad(f)(0.8), fd_grad(f, 0.8), 1e-6)

def test_grad_while_loop_raises_with_fix():
  f = lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)
  with pytest.raises(ValueError, match="fori_loop"):
    grad(f)(1.0)
  with pytest.raises(ValueError, match="scan"):
    grad(lambda x: jit(lambda lo: lax.fori_loop(lo, 3, lambda i, c: c * x, 1.0))(0))(2.0)

# ---------------------------------------------------------------- jvp: through everything, and against vjp

def test_jvp_while_loop(x64):
  f = lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1]) * x), (0, x))[1]
  p, t = jvp(f, (0.7,), (1.0,))
  close(p, f(0.7), 1e-12)
  close(t, fd_grad(f, 0.7), 1e-6)

@pytest.mark.parametrize("name", ["cond", "scan", "fori"])
def test_jvp_vjp_dot_product(name, x64):
  fns = {
    'cond': lambda x: lax.cond(x[0] < 0, lambda v: jnp.cos(v) * v[::-1], lambda v: v * v, x),
    'scan': lambda x: lax.scan(lambda c, xi: (c * xi + jnp.sin(c), c * c), x[0], x)[1],
    'fori': lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c) * x + c[::-1], x),
  }
  f = fns[name]
  x, t, ct = RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=4)
  _, tangent = jvp(f, (x,), (t,))
  _, pull = vjp(f, x)
  (cotangent,) = pull(jnp.asarray(ct))
  close(np.dot(np.asarray(cotangent), t), np.dot(ct, np.asarray(tangent)), 1e-9)

# ---------------------------------------------------------------- vmap against loops

def loop(f, *xs):
  return np.stack([np.asarray(f(*[x[i] for x in xs])) for i in range(len(xs[0]))])

def test_vmap_cond_batched_predicate_and_operand():
  f = lambda x: lax.cond(x > 0, lambda v: v * v, lambda v: -3.0 * v, x)
  xs = jnp.asarray([-1.0, 2.0, 0.0, 3.0])
  close(vmap(f)(xs), loop(f, np.asarray(xs)))
  g = lambda p, x: lax.cond(p, lambda v: v + 1.0, lambda v: v * 2.0, x)
  ps = jnp.asarray([True, False, True])
  close(vmap(g, in_axes=(None, 0))(True, jnp.arange(3.0)), [1.0, 2.0, 3.0])
  close(vmap(g)(ps, jnp.arange(3.0)), [1.0, 2.0, 3.0])
  close(vmap(g, in_axes=(0, None))(ps, 5.0), [6.0, 10.0, 6.0])

def test_vmap_switch_batched_index():
  f = lambda i, x: lax.switch(i, [lambda v: v + 1, lambda v: v * 10, lambda v: v - 100], x)
  idx, xs = jnp.asarray([2, 0, 1, 5, -1]), jnp.arange(5)
  assert vmap(f)(idx, xs).tolist() == [int(f(int(i), int(x))) for i, x in zip(idx.tolist(), xs.tolist())]

def test_vmap_while_batched_predicate_keeps_finished_lanes():
  ns = jnp.asarray([1, 6, 27, 9])
  assert vmap(collatz)(ns).tolist() == [collatz_steps(n) for n in ns.tolist()]
  f = lambda limit, x: lax.while_loop(lambda c: c < limit, lambda c: c * 2.0, x)
  close(vmap(f, in_axes=(0, None))(jnp.asarray([1.0, 5.0, 100.0]), 1.0), [1.0, 8.0, 128.0])
  close(vmap(f, in_axes=(None, 0))(10.0, jnp.asarray([1.0, 3.0, 20.0])), [16.0, 12.0, 20.0])

def test_vmap_scan_carry_xs_and_consts():
  xs, ws, cs = RNG.normal(size=(3, 5, 2)).astype(np.float32), RNG.normal(size=(3, 2)).astype(np.float32), \
               RNG.normal(size=(3, 2)).astype(np.float32)
  def f(c0, x, w):
    return lax.scan(lambda c, xi: (jnp.tanh(c * w + xi), jnp.sum(c)), c0, x)
  for axes in [(0, 0, 0), (None, 0, None), (0, None, None), (None, None, 0)]:
    args = [a if ax is not None else a[0] for a, ax in zip((cs, xs, ws), axes)]
    got_c, got_y = vmap(f, in_axes=axes)(*args)
    ref = [f(*[a[i] if ax is not None else a for a, ax in zip(args, axes)]) for i in range(3)]
    close(got_c, np.stack([np.asarray(r[0]) for r in ref]))
    close(got_y, np.stack([np.asarray(r[1]) for r in ref]))

def test_vmap_scan_xs_mapped_on_other_axis():
  xs = RNG.normal(size=(4, 3)).astype(np.float32)        # scan over axis 0 of each column
  f = lambda x: lax.scan(lambda c, xi: (c + xi, c * xi), 0.0, x)
  c, ys = vmap(f, in_axes=1)(xs)
  close(c, xs.sum(0))
  close(ys, np.stack([np.asarray(f(xs[:, j])[1]) for j in range(3)]))

def test_vmap_fori_and_grad_compositions():
  f = lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * x + i, x)
  xs = jnp.asarray([0.1, 0.5, 1.5])
  close(vmap(f)(xs), loop(f, np.asarray(xs)))
  close(vmap(grad(f))(xs), loop(grad(f), np.asarray(xs)))
  close(grad(lambda v: jnp.sum(vmap(f)(v)))(xs), loop(grad(f), np.asarray(xs)))

# ---------------------------------------------------------------- jit in every combination

def scan_fn(w, xs):
  c, ys = lax.scan(lambda c, x: (c * w + jnp.sin(x), c * x), 1.0, xs)
  return c + jnp.sum(ys)

def cond_fn(w, xs):
  return lax.cond(jnp.sum(xs) > 1.0, lambda v: jnp.sum(v * w), lambda v: jnp.sum(v) - w, xs)

def while_fn(w, xs):
  return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * w + jnp.sum(xs)), (0, 1.0))[1]

@pytest.mark.parametrize("fn", [scan_fn, cond_fn, while_fn], ids=['scan', 'cond', 'while'])
def test_jit_compositions(fn):
  xs = jnp.asarray(np.linspace(0.1, 0.9, 5).astype(np.float32))
  ws = jnp.asarray([0.5, 0.7])
  close(jit(fn)(0.7, xs), fn(0.7, xs))
  close(vmap(jit(fn), in_axes=(0, None))(ws, xs), loop(lambda w: fn(w, xs), np.asarray(ws)))
  close(jit(vmap(fn, in_axes=(0, None)))(ws, xs), loop(lambda w: fn(w, xs), np.asarray(ws)))
  close(jvp(jit(fn), (0.7, xs), (1.0, jnp.zeros(5)))[1], jvp(fn, (0.7, xs), (1.0, jnp.zeros(5)))[1])
  if fn is while_fn: return
  close(jit(grad(fn))(0.7, xs), grad(fn)(0.7, xs))
  close(grad(jit(fn))(0.7, xs), grad(fn)(0.7, xs))
  close(jit(vmap(grad(fn), in_axes=(0, None)))(ws, xs), loop(lambda w: grad(fn)(w, xs), np.asarray(ws)))

def test_pmap_of_control_flow_matches_vmap():
  n = tinyjx.device_count()
  xs = jnp.asarray(RNG.normal(size=(n, 4)).astype(np.float32))
  f = lambda x: lax.scan(lambda c, y: (c * 0.5 + y, lax.cond(y > 0, jnp.sin, jnp.cos, y)), 0.0, x)
  for got, want in zip(tinyjx.pmap(f)(xs), vmap(f)(xs)): close(got, want)

def test_control_flow_inside_jit_over_closed_arrays():
  table = jnp.asarray([1.0, 2.0, 3.0])
  f = jit(lambda x: lax.scan(lambda c, i: (c + table[i] * x, None), 0.0, jnp.arange(3))[0])
  assert float(f(2.0)) == 12.0
  assert float(f(1.0)) == 6.0

# ---------------------------------------------------------------- loops are traced once and run as loops

def test_long_scan_traces_body_once():
  calls = []
  def body(c, x):
    calls.append(1)
    return c + x, None
  xs = jnp.ones(10_000)
  c, _ = jit(lambda xs: lax.scan(body, jnp.zeros(()), xs))(xs)   # a strong carry: no weak-type retrace
  assert float(c) == 10_000.0 and len(calls) == 1
  jaxpr = tinyjx.make_jaxpr(lambda xs: lax.scan(body, jnp.zeros(()), xs))(xs)
  assert len([n for n in toposort(list(jaxpr.outs)) if n.op is Ops.SCAN]) == 1
  assert len(toposort(list(jaxpr.outs))) < 10            # the body is a sub-jaxpr, not 10,000 inlined copies

def test_make_jaxpr_prints_sub_jaxprs():
  text = str(tinyjx.make_jaxpr(lambda x: lax.cond(x > 0, jnp.sin, jnp.cos, x))(1.0))
  assert 'cond[' in text and 'branches=(' in text and 'sin' in text and 'cos' in text
  text = str(tinyjx.make_jaxpr(lambda x: lax.while_loop(lambda c: c < 5.0, lambda c: c * 2.0, x))(1.0))
  assert 'while[' in text and 'body_jaxpr' in text

def test_closed_over_values_become_operands():
  w = jnp.asarray([2.0, 3.0])
  jaxpr = tinyjx.make_jaxpr(lambda x: lax.scan(lambda c, xi: (c * w + xi, None), x, jnp.ones((2, 2)))[0])(jnp.ones(2))
  node = next(n for n in toposort(list(jaxpr.outs)) if n.op is Ops.SCAN)
  body = node.arg.body
  assert len(node.src) == len(body.params) == 3        # carry, xs and the hoisted w
  assert all(n.op is not Ops.BUFFER for n in toposort(list(body.outs)))

# ---------------------------------------------------------------- errors

def test_cond_branch_mismatch_errors():
  with pytest.raises(TypeError, match=r"true_fun returned f32\[3\].*|false_fun returned"):
    lax.cond(True, lambda x: x, lambda x: x[:2], jnp.ones(3))
  with pytest.raises(TypeError, match="i32"):
    lax.cond(True, lambda x: x, lambda x: x.astype(jnp.int32), jnp.ones(3))
  with pytest.raises(TypeError, match="structure"):
    lax.cond(True, lambda x: (x, x), lambda x: x, 1.0)
  with pytest.raises(TypeError, match=r"output\['b'\]"):
    lax.cond(True, lambda x: {'a': x, 'b': x}, lambda x: {'a': x, 'b': x > 0}, 1.0)

def test_predicate_errors():
  with pytest.raises(TypeError, match=r"scalar.*\(2,\)"):
    lax.cond(jnp.asarray([True, False]), lambda: 1.0, lambda: 0.0)
  with pytest.raises(TypeError, match="boolean scalar"):
    lax.while_loop(lambda c: c, lambda c: c + 1, 0)
  with pytest.raises(TypeError, match="boolean scalar"):
    lax.while_loop(lambda c: jnp.ones(2) > 0, lambda c: c + 1, 0)
  with pytest.raises(TypeError, match="integer"):
    lax.switch(1.5, [lambda: 1.0, lambda: 2.0])
  with pytest.raises(ValueError, match="non-empty"):
    lax.switch(0, [])

def test_carry_type_change_errors():
  with pytest.raises(TypeError, match=r"init_val\[1\].*f32\[\].*f32\[2\]"):
    lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.ones(2) * c[1]), (0, 1.0))
  with pytest.raises(TypeError, match=r"init\['x'\].*i32\[\].*f32\[\]"):
    lax.scan(lambda c, x: ({'x': c['x'] * 1.5}, None), {'x': jnp.ones((), jnp.int32)}, jnp.ones(3))
  with pytest.raises(TypeError, match="pytree structure"):
    lax.scan(lambda c, x: ((c, c), None), 1.0, jnp.ones(3))
  with pytest.raises(TypeError, match="pair"):
    lax.scan(lambda c, x: c + x, 0.0, jnp.ones(3))

def test_scan_length_errors():
  with pytest.raises(ValueError, match="leading size"):
    lax.scan(lambda c, x: (c, None), 0.0, (jnp.ones(3), jnp.ones(4)))
  with pytest.raises(ValueError, match="length"):
    lax.scan(lambda c, x: (c, None), 0.0, None)
  with pytest.raises(ValueError, match="leading axis"):
    lax.scan(lambda c, x: (c, None), 0.0, jnp.asarray(1.0))

def test_python_branch_in_body_names_the_fix():
  with pytest.raises(tinyjx.ConcretizationError, match="lax.cond"):
    lax.scan(lambda c, x: (c + 1 if x > 0 else c, None), 0.0, jnp.ones(3))

# ---------------------------------------------------------------- the compiled CPU device against the PYTHON reference

@pytest.fixture(scope="module")
def cpu():
  """The compiled CPU device (importing the lowering registers it and the control-flow runtime steps)."""
  lower = pytest.importorskip("tinyjx.lower")
  from tinyjx.devices.cpu import find_compiler, NoCompilerError
  try:
    find_compiler()
  except NoCompilerError:
    pytest.skip("no C compiler, so no compiled CPU device")
  return lower

def nested_fn(w, xs):
  def body(c, x):
    inner = lax.fori_loop(0, 2, lambda i, v: v * w + x, c)
    return lax.cond(x > 0.5, lambda v: v * 0.5, lambda v: v + 1.0, inner), inner
  c, ys = lax.scan(body, 0.1, xs, reverse=True)
  return c + jnp.sum(ys)

CPU_PROGRAMS = {
  'scan': scan_fn, 'cond': cond_fn, 'while': while_fn, 'nested': nested_fn,
  'grad_scan': grad(scan_fn), 'grad_nested': grad(nested_fn),
  'vmap_while': lambda w, xs: vmap(lambda n: collatz(n))(jnp.asarray([1, 6, 27])) * w,
  'vmap_cond': lambda w, xs: vmap(lambda x: lax.cond(x > 0.4, jnp.sin, jnp.cos, x * w))(xs),
  'switch': lambda w, xs: lax.switch(jnp.argmax(xs), [lambda v: v * w, lambda v: v - w, jnp.exp], xs),
  'dynamic_slice': lambda w, xs: lax.dynamic_slice(xs * w, (jnp.argmax(xs) - 1,), (3,)),
}

@pytest.mark.parametrize("name", list(CPU_PROGRAMS))
def test_cpu_matches_python(cpu, name):
  fn, xs = CPU_PROGRAMS[name], jnp.asarray(np.linspace(0.1, 0.9, 5).astype(np.float32))
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = np.asarray(jit(fn)(0.7, xs))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = np.asarray(jit(fn)(0.7, xs))
  close(got, want)

def test_cpu_runs_loops_as_runtime_steps_not_unrolled(cpu):
  from tinyjx.lower.steps import LoopStep
  calls = []
  def body(c, x):
    calls.append(1)
    return c * 0.5 + x, None
  exes = []
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    for n in (10, 10_000):
      f = jit(lambda xs: lax.scan(body, jnp.zeros(()), xs)[0])
      exes.append(f.lower(jnp.ones(n)).compile().executable)
      assert float(f(jnp.ones(n))) == pytest.approx(2.0 * (1 - 0.5 ** n), rel=1e-6)
  assert len(calls) == 2                                   # one trace per length, none per step
  assert len(exes[0].kernels) == len(exes[1].kernels) and len(exes[0].source) == len(exes[1].source)
  assert any(isinstance(s, LoopStep) and s.node.op is Ops.SCAN for s in exes[1].steps)

def test_cpu_loops_run_in_one_foreign_call_and_fall_back_to_calls_per_iteration(cpu, monkeypatch):
  """A while loop whose sub-programs are only kernels runs whole in the CPU's loop driver (CompiledLoop): no
  Python between iterations. Where an arena is in use by another thread the driver declines, and the loop runs
  an iteration at a time: each sub-program through its `Executable.direct_runner` (jit's hit path), or through
  `Executable.run` where that declines too. Under DEBUG=2 every call takes `run` (it times each kernel). The
  results are the same every way, and the reference interpreter's."""
  from tinyjx.lower.steps import LoopStep
  def f(m, v):
    def body(c):
      w = m @ c[0]
      return w / jnp.linalg.norm(w), c[1] + 1
    return lax.while_loop(lambda c: c[1] < 30, body, (v, 0))[0]
  rng = np.random.default_rng(0)
  m, v = rng.standard_normal((16, 16)).astype(np.float32), np.ones(16, np.float32)
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = np.asarray(jit(f)(m, v))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    exe = jit(f).lower(m, v).compile().executable
  step = next(s for s in exe.steps if isinstance(s, LoopStep))
  assert step.compiled is not None and all(r is not None for r in step.runners)
  used, ran = [], []
  def counting(r):
    def run(bufs):
      used.append(1)
      return r(bufs)
    return run
  step.runners = [counting(r) for r in step.runners]
  for e in step.exes: monkeypatch.setattr(e, 'run', lambda bufs, run=e.run: (ran.append(1), run(bufs))[1])
  dev = tinyjx.devices.get('CPU')
  run_once = lambda: exe.run([dev.from_numpy(m, dtypes.float32), dev.from_numpy(v, dtypes.float32)])[0].numpy()
  close(run_once(), want)
  assert not used and not ran                           # one call of the driver
  with step.exes[1]._lock:                              # the body's arena is taken: iteration by iteration
    close(run_once(), want)
  assert len(used) == 61 and len(ran) == 30             # 31 conditions and 30 bodies; each body took `run`
  used.clear(), ran.clear()
  with tinyjx.Context(DEBUG=2):
    close(run_once(), want)
  assert not used and len(ran) == 61

def test_compiled_loop_results_stay_fresh_across_calls(cpu):
  """The driver keeps its carry sets and argument tables from call to call (CompiledLoop._prepare): each call's
  results are copies, so a result kept from one call keeps its values after the next calls, with other
  arguments, write into those carries again."""
  def f(m, v):
    def body(c):
      w = m @ c[0]
      return w / jnp.linalg.norm(w), c[1] + 1
    return lax.while_loop(lambda c: c[1] < 12, body, (v, 0))
  rng = np.random.default_rng(1)
  args = [(rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32))
          for _ in range(3)]
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = [[np.asarray(r) for r in jit(f)(m, v)] for m, v in args]
  g = jit(f)
  kept = [g(m, v) for m, v in args] + [g(*args[0])]
  for got, w_ in zip(kept, want + want[:1]):
    close(got[0], w_[0])
    assert int(got[1]) == 12
  assert not np.shares_memory(np.asarray(kept[0][0]), np.asarray(kept[3][0]))

def test_a_nested_loop_whose_arena_is_taken_runs_the_enclosing_loop_step_by_step(cpu):
  """The driver locks every executable of a loop's tree; where another thread holds one (here the nested loop's
  body), the enclosing loop runs an iteration at a time in Python, and the nested loop as its own foreign call or,
  while its lock is held, step by step too. The values are the same every way."""
  rng = np.random.default_rng(4)
  xs = rng.standard_normal((5, 3)).astype(np.float32)
  fn = lambda xs: lax.scan(lambda c, x: (lax.fori_loop(0, 4, lambda i, v: jnp.tanh(v + x * i), c), c), jnp.ones(3),
                           xs)
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = jax_tree_leaves(jit(fn)(xs))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    exe = jit(fn).lower(xs).compile().executable
  outer, inner = _loop_steps(exe)[:2]
  assert outer.compiled is not None and inner.compiled is not None and inner in outer.exes[0].steps
  dev = tinyjx.devices.get('CPU')
  run_once = lambda: [b.numpy() for b in exe.run([dev.from_numpy(xs, dtypes.float32)])]
  for held in (None, inner.exes[-1]._lock, outer.exes[0]._lock):
    if held is not None: held.acquire()
    try:
      for g, w_ in zip(run_once(), want): close(g, w_)
    finally:
      if held is not None: held.release()

def _loop_cases():
  """Loops that stress the compiled driver's bindings, each (function, args)."""
  rng = np.random.default_rng(3)
  xs = rng.standard_normal((7, 3)).astype(np.float32)
  w = rng.standard_normal((3, 3)).astype(np.float32)
  def passes(c, x):        # ys: a slice of xs as it is, a constant, the new carry twice; an int and a bool carry
    h, n, flag = c
    h2 = jnp.tanh(h @ w + x)
    return (h2, n + 1, jnp.logical_not(flag)), (x, jnp.float32(2.0), h2, h2)
  return {
    'scan passes inputs, constants and repeats': (lambda xs: lax.scan(passes, (jnp.zeros(3), 0, True), xs), (xs,)),
    'reverse scan': (lambda xs: lax.scan(passes, (jnp.ones(3), 5, False), xs, reverse=True), (xs,)),
    'scan of length 0': (lambda xs: lax.scan(passes, (jnp.ones(3), 0, True), xs[:0]), (xs,)),
    'carry unchanged': (lambda xs: lax.scan(lambda c, x: (c, c * x), jnp.arange(3.0), xs), (xs,)),
    'fori with a scalar carry': (lambda xs: lax.fori_loop(0, 20, lambda i, s: s * 0.9 + xs[i % 7, 0], 1.0), (xs,)),
    'while with cond and body consts': (lambda xs: lax.while_loop(
        lambda c: jnp.sum(c[0]) < xs[0, 0] + 40.0, lambda c: (c[0] + jnp.abs(xs[c[1] % 7]), c[1] + 1),
        (jnp.zeros(3), 0)), (xs,)),
    'while whose condition is a carry': (lambda xs: lax.while_loop(
        lambda c: c[1], lambda c: (c[0] * 2.0, c[0][0] < 100.0), (jnp.abs(xs[0]) + 1.0, True)), (xs,)),
    'while that never runs': (lambda xs: lax.while_loop(lambda c: c.max() > 10.0, lambda c: c + 1.0, xs), (xs,)),
    'cond passes an input, a constant and a repeat': (lambda xs: lax.cond(
        xs[0, 0] > 0, lambda a: (a, jnp.float32(2.0), jnp.tanh(a), jnp.tanh(a)),
        lambda a: (a * 2, jnp.float32(3.0), a, a + 1), xs), (xs,)),
    'cond whose outputs are partly unused': (lambda xs: lax.cond(
        xs[0, 0] < 0, lambda a: (a.sum(), a * 3, a - 1), lambda a: (a.max(), a, a + 1), xs)[::2], (xs,)),
    'switch clamps its index': (lambda xs, ix: [lax.switch(ix[k], [lambda a: a + 1, lambda a: a * 2,
                                                                  lambda a: jnp.sin(a)], xs) for k in range(3)],
                                (xs, np.array([-3, 1, 7], np.int32))),
    'scan with a cond in its body': (lambda xs: lax.scan(
        lambda c, x: (lax.cond(x.sum() > 0, lambda: c * 0.9 + x, lambda: c - x), c.sum()), jnp.zeros(3), xs), (xs,)),
    'scan with a while loop in its body': (lambda xs: lax.scan(
        lambda c, x: (lax.fori_loop(0, 3, lambda i, v: v * 0.5 + x * i, c), c), jnp.ones(3), xs), (xs,)),
    'while with a scan in its body': (lambda xs: lax.while_loop(
        lambda c: c[1] < 4, lambda c: (lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h), c[0], xs)[1].mean(0),
                                      c[1] + 1), (jnp.zeros(3), 0)), (xs,)),
    'three levels, reversed, ys unused inside': (lambda xs: lax.fori_loop(0, 2, lambda i, c: lax.scan(
        lambda h, x: (lax.cond(i > 0, lambda: lax.scan(lambda g, y: (g + y, g * 2), h, xs)[0], lambda: h - x), x),
        c, xs, reverse=True)[0], jnp.ones(3)), (xs,)),
    'scan of length 0 with a loop inside': (lambda xs: lax.scan(
        lambda c, x: (lax.fori_loop(0, 2, lambda i, v: v + x, c), x * 2), jnp.ones(3), xs[:0]), (xs,)),
  }

def _loop_steps(exe) -> list:
  """Every LoopStep of `exe` and of its loops' sub-programs."""
  from tinyjx.lower.steps import LoopStep
  found = [s for s in exe.steps if isinstance(s, LoopStep)]
  return found + [n for s in found for e in s.exes for n in _loop_steps(e)]

@pytest.mark.parametrize('name', list(_loop_cases()))
def test_compiled_loops_match_the_reference_on_every_binding(cpu, name):
  """Each loop runs in the CPU's loop driver (its step, and every loop nested in it, has a CompiledLoop) and gives
  the reference interpreter's values: scans whose ys are a slice of xs, a constant, or the carry twice (outputs
  that are no slot of their own, copied by the driver into their row), reverse and empty scans, int and bool
  carries, a carry passed through, a while loop with condition and body constants, one whose condition is a carry,
  one that never runs; conds whose outputs are inputs, constants, repeats or unused, a switch whose index is out of
  range both ways; and loops and conds nested in loops, three deep. The kernels counted are the same as when the
  loops run step by step in Python (under DEBUG=2)."""
  fn, args = _loop_cases()[name]
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = jax_tree_leaves(jit(fn)(*args))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    exe = jit(fn).lower(*args).compile().executable
    got = jax_tree_leaves(jit(fn)(*args))
    with tinyjx.counters.measure() as driver: jit(fn)(*args)
    with tinyjx.Context(DEBUG=2), tinyjx.counters.measure() as stepwise: jit(fn)(*args)
  steps = _loop_steps(exe)
  assert steps and all(s.compiled is not None for s in steps)
  assert driver['kernels'] == stepwise['kernels'] and driver['flops'] == stepwise['flops']
  assert len(got) == len(want)
  for g, w_ in zip(got, want):
    assert np.asarray(g).dtype == np.asarray(w_).dtype and np.asarray(g).shape == np.asarray(w_).shape
    close(np.asarray(g, np.float64), np.asarray(w_, np.float64))

def jax_tree_leaves(tree): return tinyjx.tree_util.tree_leaves(tree)
