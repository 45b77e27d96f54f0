"""Transforms composed in every order: grad, vmap, jvp (and jit) stacked two and three deep must agree with each
other and with the math, since each one is a rewrite of an ordinary graph and none needs to know the others.

The permutation test uses an elementwise f, where every order has a closed form: grad (of the sum) and jvp
(with tangent ones) each take one derivative, vmap and jit change nothing, so a stack of them is f^(d) with d the
number of derivative transforms. The other tests use functions that mix examples' values (matmul, reductions)."""
import itertools
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import vmap
from tinyjx.transforms.ad import grad, jvp, jacfwd, jacrev, hessian
from conftest import examples

FEW = settings(max_examples=examples(8), deadline=None)

def close(a, b, rtol=2e-4, atol=2e-5):
  np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=rtol, atol=atol)

# ---------------------------------------------------------------- every order of two and three transforms

def f(x): return jnp.sin(2.0 * x) + jnp.exp(0.5 * x) + x * x * x

def f_derivative(x: np.ndarray, d: int) -> np.ndarray:
  """The d-th derivative of f, in numpy."""
  cubic = [x ** 3, 3 * x ** 2, 6 * x, np.full_like(x, 6.0)][d] if d <= 3 else np.zeros_like(x)
  return 2.0 ** d * np.sin(2 * x + d * np.pi / 2) + 0.5 ** d * np.exp(0.5 * x) + cubic

TRANSFORMS = {
  'grad': lambda g: grad(lambda x: jnp.sum(g(x))),
  'jvp': lambda g: (lambda x: jvp(g, (x,), (jnp.ones_like(x),))[1]),
  'vmap': vmap,
}
TRANSFORMS['jit'] = tinyjx.jit
DERIVATIVES = {'grad', 'jvp'}
ORDERS = [seq for n in (2, 3) for seq in itertools.product(sorted(TRANSFORMS), repeat=n)]

@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_every_order_agrees_with_the_closed_form(order):
  g = f
  for name in reversed(order): g = TRANSFORMS[name](g)   # order[0] is the outermost transform
  nmaps = order.count('vmap')
  x = np.random.default_rng(len(order)).uniform(-1, 1, (2,) * nmaps + (3,)).astype(np.float32)
  d = sum(name in DERIVATIVES for name in order)
  close(g(x), f_derivative(x.astype(np.float64), d), rtol=1e-3, atol=1e-3)

# ---------------------------------------------------------------- per-example gradients

def loss(params, x, y):
  h = jnp.tanh(x @ params['w'] + params['b'])
  return jnp.sum((h - y) ** 2) + 0.1 * jnp.sum(params['w'] ** 2)

def problem(seed, n=4):
  rng = np.random.default_rng(seed)
  params = {'w': rng.normal(size=(3, 2)).astype(np.float32), 'b': rng.normal(size=(2,)).astype(np.float32)}
  return params, rng.normal(size=(n, 3)).astype(np.float32), rng.normal(size=(n, 2)).astype(np.float32)

def loop_grads(params, xs, ys):
  per = [grad(loss)(params, xs[i], ys[i]) for i in range(len(xs))]
  return {k: np.stack([np.asarray(p[k]) for p in per]) for k in params}

@FEW
@given(st.integers(0, 2**16))
def test_vmap_of_grad_is_per_example_gradients(seed):
  params, xs, ys = problem(seed)
  got = vmap(grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
  ref = loop_grads(params, xs, ys)
  for k in params: close(got[k], ref[k])

@FEW
@given(st.integers(0, 2**16))
def test_grad_of_vmap_is_the_summed_gradient(seed):
  params, xs, ys = problem(seed)
  got = grad(lambda p: jnp.sum(vmap(loss, in_axes=(None, 0, 0))(p, xs, ys)))(params)
  ref = loop_grads(params, xs, ys)
  for k in params: close(got[k], ref[k].sum(0))

def test_vmap_of_vmap_of_grad_is_a_double_loop():
  params, xs, ys = problem(1, n=6)
  xss, yss = xs.reshape(2, 3, 3), ys.reshape(2, 3, 2)
  got = vmap(vmap(grad(loss), in_axes=(None, 0, 0)), in_axes=(None, 0, 0))(params, xss, yss)
  ref = loop_grads(params, xs, ys)
  for k in params: close(got[k], ref[k].reshape((2, 3) + ref[k].shape[1:]))

def test_vmap_of_grad_of_a_function_that_uses_vmap():
  """The tag grad puts on w (inside the outer vmap's trace) is closed over, unbatched, by the inner vmap."""
  ws, xs = np.linspace(-1, 1, 3).astype(np.float32), np.linspace(0, 2, 4).astype(np.float32)
  inner = lambda w: jnp.sum(vmap(lambda x: jnp.sin(w * x) * x)(xs))
  got = vmap(grad(inner))(ws)
  close(got, [(np.cos(w * xs) * xs * xs).sum() for w in ws])
  close(grad(lambda v: jnp.sum(vmap(grad(inner))(v)))(ws), [(-np.sin(w * xs) * xs ** 3).sum() for w in ws])

def test_per_example_gradients_with_the_batch_on_another_axis():
  params, xs, ys = problem(2)
  got = vmap(grad(loss), in_axes=(None, 1, 1), out_axes=-1)(params, xs.T, ys.T)
  ref = loop_grads(params, xs, ys)
  for k in params: close(got[k], np.moveaxis(ref[k], 0, -1))

# ---------------------------------------------------------------- forward mode and vmap

def mix(x, w):
  return jnp.sin(x @ w) * jnp.sum(x * x) + jnp.cumsum(x)[-1]

@FEW
@given(st.integers(0, 2**16))
def test_jvp_of_vmap_equals_vmap_of_jvp_and_a_loop(seed):
  rng = np.random.default_rng(seed)
  xs, ts = rng.normal(size=(2, 5, 3)).astype(np.float32)
  w = rng.normal(size=(3, 4)).astype(np.float32)
  outer = jvp(lambda v: vmap(mix, in_axes=(0, None))(v, w), (xs,), (ts,))
  inner = vmap(lambda x, t: jvp(lambda v: mix(v, w), (x,), (t,)), in_axes=(0, 0))(xs, ts)
  for a, b in zip(outer, inner): close(a, b)
  for i in range(len(xs)):
    y, dy = jvp(lambda v: mix(v, w), (xs[i],), (ts[i],))
    close(outer[0][i], y), close(outer[1][i], dy)

def test_jvp_of_grad_is_a_hessian_vector_product():
  rng = np.random.default_rng(3)
  x, t = rng.normal(size=(2, 4)).astype(np.float32)
  g = lambda v: jnp.sum(jnp.sin(v)) * jnp.sum(v * v)
  _, hvp = jvp(grad(g), (x,), (t,))
  close(hvp, np.asarray(hessian(g)(x)) @ t)

# ---------------------------------------------------------------- jacobians and the Hessian

def s_times_q(x): return jnp.sum(jnp.sin(x)) * jnp.sum(x * x)

def s_times_q_hessian(x: np.ndarray) -> np.ndarray:
  s, q = np.sin(x).sum(), (x * x).sum()
  cross = 2 * np.outer(np.cos(x), x)
  return np.diag(-np.sin(x) * q + 2 * s) + cross + cross.T

@FEW
@given(st.integers(0, 2**16))
def test_jacfwd_of_jacrev_equals_hessian_and_the_formula(seed):
  x = np.random.default_rng(seed).normal(size=(4,)).astype(np.float32)
  ref = s_times_q_hessian(x.astype(np.float64))
  for h in (jacfwd(jacrev(s_times_q)), jacrev(jacfwd(s_times_q)), jacfwd(jacfwd(s_times_q)),
            jacrev(jacrev(s_times_q)), hessian(s_times_q)):
    close(h(x), ref, rtol=1e-3, atol=1e-3)

def test_vmap_of_hessian_is_a_loop_of_hessians():
  xs = np.random.default_rng(5).normal(size=(3, 4)).astype(np.float32)
  got = vmap(hessian(s_times_q))(xs)
  for i in range(3): close(got[i], s_times_q_hessian(xs[i].astype(np.float64)), rtol=1e-3, atol=1e-3)

def test_grad_of_grad_under_vmap_and_jit():
  g = lambda x: jnp.sin(x) * x
  xs = np.linspace(-2, 2, 5).astype(np.float32)
  ref = -np.sin(xs) * xs + 2 * np.cos(xs)
  close(vmap(grad(grad(g)))(xs), ref)
  close(tinyjx.jit(vmap(grad(grad(g))))(xs), ref)
  close(vmap(tinyjx.jit(grad(grad(g))))(xs), ref)
  close(grad(lambda v: jnp.sum(tinyjx.jit(vmap(grad(g)))(v)))(xs), ref)

# ---------------------------------------------------------------- jit around and inside the per-example step

def test_jit_in_every_position_of_per_example_gradients():
  params, xs, ys = problem(4)
  ref = loop_grads(params, xs, ys)
  jit = tinyjx.jit
  variants = [jit(vmap(grad(loss), in_axes=(None, 0, 0))), vmap(jit(grad(loss)), in_axes=(None, 0, 0)),
              vmap(grad(jit(loss)), in_axes=(None, 0, 0))]
  for fn in variants:
    got = fn(params, xs, ys)
    for k in params: close(got[k], ref[k])
