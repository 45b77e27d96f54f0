"""Tests of custom_vjp, custom_jvp and checkpoint/remat (tinyjx/transforms/custom.py)."""
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
from tinyjx.uop import Ops
from tinyjx.transforms import ad, batching
from conftest import examples

needs_batch_rules = pytest.mark.skipif(
  not {Ops.CUSTOM_VJP, Ops.CUSTOM_JVP, Ops.CHECKPOINT} <= set(batching.batch_rules),
  reason="vmap batch rules for custom-rule and checkpoint nodes are not registered yet")

# ---------------------------------------------------------------- custom_vjp

@tinyjx.custom_vjp
def clip_gradient(x, lo, hi):
  return x
def clip_fwd(x, lo, hi): return x, (lo, hi)
def clip_bwd(res, g):
  lo, hi = res
  return (jnp.clip(g, lo, hi), None, None)
clip_gradient.defvjp(clip_fwd, clip_bwd)

def test_custom_vjp_replaces_the_gradient():
  f = lambda x: jnp.sum(clip_gradient(x, -0.5, 0.5) * jnp.array([2.0, 0.1, -3.0]))
  x = jnp.array([1.0, 2.0, 3.0])
  assert tinyjx.grad(f)(x).tolist() == [0.5, pytest.approx(0.1), -0.5]
  assert clip_gradient(x, 0.0, 1.0).tolist() == [1.0, 2.0, 3.0]

@tinyjx.custom_vjp
def log1pexp(x):
  return jnp.log1p(jnp.exp(x))
log1pexp.defvjp(lambda x: (log1pexp(x), x), lambda x, g: (g * (1 - 1 / (1 + jnp.exp(x))),))

def test_custom_vjp_stable_gradient_and_value():
  assert tinyjx.grad(log1pexp)(100.0).item() == 1.0       # the naive gradient is nan here
  assert math.isclose(log1pexp(1.0).item(), math.log1p(math.e), rel_tol=1e-6)

def test_custom_vjp_nondiff_argnums_pass_python_values_to_bwd():
  @tinyjx.custom_vjp
  def scale(k, x): return x * k
  scale.defvjp(lambda k, x: (x * k, None), lambda k, res, g: (g * k * 10,))
  scale = tinyjx.custom_vjp(scale.fun, nondiff_argnums=(0,))
  scale.defvjp(lambda k, x: (x * k, None), lambda k, res, g: (g * k * 10,))
  assert tinyjx.grad(lambda x: scale(3, x))(1.0).item() == 30.0

def test_custom_vjp_pytrees_in_and_out():
  @tinyjx.custom_vjp
  def f(p):
    return {'y': p['a'] * p['b'], 'z': p['a']}
  def fwd(p): return f(p), p
  def bwd(p, ct): return ({'a': ct['y'] * 100.0 + ct['z'], 'b': ct['y'] * 0.0},)
  f.defvjp(fwd, bwd)
  g = tinyjx.grad(lambda p: jnp.sum(f(p)['y']) + f(p)['z'][0])({'a': jnp.array([1.0, 2.0]), 'b': jnp.array([3.0, 4.0])})
  assert g['a'].tolist() == [101.0, 100.0] and g['b'].tolist() == [0.0, 0.0]

def test_custom_vjp_second_order_differentiates_bwd_and_residuals():
  @tinyjx.custom_vjp
  def f(x): return jnp.sin(x)
  f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (3.0 * g * c,))
  # d/dx of the custom derivative 3 cos(x) is -3 sin(x): flows through the residual computed by fwd
  assert math.isclose(tinyjx.grad(tinyjx.grad(f))(0.7).item(), -3 * math.sin(0.7), rel_tol=1e-6)
  assert math.isclose(tinyjx.grad(f)(0.7).item(), 3 * math.cos(0.7), rel_tol=1e-6)

def test_custom_vjp_under_jit_and_make_jaxpr():
  f = lambda x: jnp.sum(log1pexp(x))
  x = jnp.array([0.0, 50.0])
  np.testing.assert_allclose(np.asarray(tinyjx.jit(tinyjx.grad(f))(x)), [0.5, 1.0])
  np.testing.assert_allclose(np.asarray(tinyjx.grad(tinyjx.jit(f))(x)), [0.5, 1.0])
  assert 'custom_vjp' in str(tinyjx.make_jaxpr(f)(x))

def test_custom_vjp_bwd_with_wrong_structure_names_expected_and_got():
  @tinyjx.custom_vjp
  def f(x, y): return x * y
  f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g * res[1],))
  with pytest.raises(TypeError, match=r"one cotangent per differentiable argument.*expected.*\(\*, \*\).*length 1"):
    tinyjx.grad(f)(2.0, 3.0)
  @tinyjx.custom_vjp
  def h(p): return p['a']
  h.defvjp(lambda p: (p['a'], None), lambda res, g: ({'b': g},))
  with pytest.raises(TypeError, match=r"cotangent 0 must have the structure of argument 0.*'a'.*'b'"):
    tinyjx.grad(h)({'a': 1.0})
  @tinyjx.custom_vjp
  def k(x): return x
  k.defvjp(lambda x: (x, None), lambda res, g: (jnp.ones(3),))
  with pytest.raises(TypeError, match=r"cotangent 0 has shape \(3,\).*shape \(\)"):
    tinyjx.grad(k)(1.0)

def test_custom_vjp_fwd_errors_and_missing_rule():
  @tinyjx.custom_vjp
  def f(x): return x * 2
  with pytest.raises(AttributeError, match="defvjp"):
    tinyjx.grad(f)(1.0)
  f.defvjp(lambda x: x * 2, lambda r, g: (g,))
  with pytest.raises(TypeError, match=r"pair \(output, residuals\)"):
    tinyjx.grad(f)(1.0)
  f.defvjp(lambda x: ((x, x), None), lambda r, g: (g,))
  with pytest.raises(TypeError, match="one scalar array"):   # as in JAX, grad runs fwd and not f: its pair is the output
    tinyjx.grad(f)(1.0)
  with pytest.raises(TypeError, match="output first"):       # f was traced by jit: fwd must match its output
    tinyjx.grad(tinyjx.jit(f))(1.0)

def test_custom_vjp_closing_over_a_differentiated_value_is_an_error():
  def outer(w):
    @tinyjx.custom_vjp
    def f(x): return x * w
    f.defvjp(lambda x: (x * w, None), lambda r, g: (g,))
    return f(w * 2.0)
  with pytest.raises(TypeError, match="closed over a value that is being differentiated"):
    tinyjx.grad(outer)(3.0)

def test_custom_vjp_forward_mode_is_an_error():
  with pytest.raises(TypeError, match="forward-mode"):
    tinyjx.jvp(log1pexp, (1.0,), (1.0,))

@needs_batch_rules
def test_custom_vjp_under_vmap():
  xs = jnp.array([0.0, 50.0, -3.0])
  sigmoid = 1 / (1 + np.exp(-np.asarray(xs)))
  np.testing.assert_allclose(np.asarray(tinyjx.vmap(tinyjx.grad(log1pexp))(xs)), sigmoid, rtol=1e-6)
  g = tinyjx.grad(lambda x: jnp.sum(tinyjx.vmap(log1pexp)(x)))(xs)
  np.testing.assert_allclose(np.asarray(g), sigmoid, rtol=1e-6)

# ---------------------------------------------------------------- custom_jvp

@tinyjx.custom_jvp
def safe_norm(x):
  return jnp.sqrt(jnp.sum(x * x))
@safe_norm.defjvp
def safe_norm_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  n = safe_norm(x)
  return n, jnp.where(n == 0, 0.0, jnp.sum(x * t) / jnp.where(n == 0, 1.0, n))

def test_custom_jvp_forward_and_reverse():
  x = jnp.array([3.0, 4.0])
  y, t = tinyjx.jvp(safe_norm, (x,), (jnp.array([1.0, 0.0]),))
  assert y.item() == 5.0 and math.isclose(t.item(), 0.6, rel_tol=1e-6)
  np.testing.assert_allclose(np.asarray(tinyjx.grad(safe_norm)(x)), [0.6, 0.8], rtol=1e-6)
  assert tinyjx.grad(safe_norm)(jnp.zeros(2)).tolist() == [0.0, 0.0]      # the plain rule gives nan

def test_custom_jvp_higher_order_and_jacobians():
  @tinyjx.custom_jvp
  def f(x): return jnp.sin(x)
  f.defjvps(lambda t, ans, x: 2.0 * jnp.cos(x) * t)
  assert math.isclose(tinyjx.grad(tinyjx.grad(f))(0.3).item(), -2 * math.sin(0.3), rel_tol=1e-6)
  x = jnp.array([0.1, 0.2])
  np.testing.assert_allclose(np.asarray(tinyjx.jacfwd(f)(x)), np.diag(2 * np.cos([0.1, 0.2])), rtol=1e-6)
  _, t = tinyjx.jvp(tinyjx.grad(f), (0.3,), (1.0,))
  assert math.isclose(t.item(), -2 * math.sin(0.3), rel_tol=1e-6)

def test_custom_jvp_defjvps_with_several_arguments_and_none():
  @tinyjx.custom_jvp
  def f(x, y): return x * y
  f.defjvps(lambda tx, ans, x, y: tx * y * 10.0, None)
  gx, gy = tinyjx.grad(f, argnums=(0, 1))(2.0, 3.0)
  assert gx.item() == 30.0 and gy.item() == 0.0

def test_custom_jvp_nondiff_argnums():
  @tinyjx.custom_jvp
  def power(n, x): return x ** n
  power = tinyjx.custom_jvp(power.fun, nondiff_argnums=(0,))
  power.defjvp(lambda n, p, t: (p[0] ** n, n * p[0] ** (n - 1) * t[0] * 100.0))
  assert tinyjx.grad(lambda x: power(3, x))(2.0).item() == 1200.0

def test_custom_jvp_rule_with_wrong_output_names_expected_and_got():
  @tinyjx.custom_jvp
  def f(x): return x * 2
  f.defjvp(lambda p, t: (p[0] * 2, (t[0], t[0])))
  with pytest.raises(TypeError, match=r"tangent output must match.*expected.*got"):
    tinyjx.jvp(f, (1.0,), (1.0,))
  f.defjvp(lambda p, t: p[0])
  with pytest.raises(TypeError, match=r"pair \(primal_out, tangent_out\)"):
    tinyjx.grad(f)(1.0)
  g = tinyjx.custom_jvp(lambda x: x)
  with pytest.raises(AttributeError, match="defjvp"):
    tinyjx.grad(g)(1.0)

@needs_batch_rules
def test_custom_jvp_under_vmap():
  xs = jnp.array([[3.0, 4.0], [0.0, 0.0]])
  np.testing.assert_allclose(np.asarray(tinyjx.vmap(tinyjx.grad(safe_norm))(xs)), [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(tinyjx.jacrev(safe_norm)(jnp.array([3.0, 4.0]))), [0.6, 0.8], rtol=1e-6)

# ---------------------------------------------------------------- checkpoint / remat

def mlp(w, x):
  for _ in range(2): x = jnp.tanh(x @ w)
  return jnp.sum(x ** 2)

@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1))
def test_checkpoint_gives_the_same_values_and_derivatives(seed):
  rng = np.random.default_rng(seed)
  w = jnp.asarray(rng.normal(size=(3, 3)).astype(np.float32))
  x = jnp.asarray(rng.normal(size=(2, 3)).astype(np.float32))
  remat_mlp = tinyjx.checkpoint(mlp)
  np.testing.assert_allclose(remat_mlp(w, x).item(), mlp(w, x).item(), rtol=1e-6)
  for a, b in zip(tinyjx.grad(remat_mlp, argnums=(0, 1))(w, x), tinyjx.grad(mlp, argnums=(0, 1))(w, x)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
  v = jnp.asarray(rng.normal(size=(3, 3)).astype(np.float32))
  a = tinyjx.jvp(tinyjx.grad(remat_mlp), (w, x), (v, jnp.zeros((2, 3))))[1]
  b = tinyjx.jvp(tinyjx.grad(mlp), (w, x), (v, jnp.zeros((2, 3))))[1]
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(np.asarray(tinyjx.grad(tinyjx.grad(lambda s: remat_mlp(w * s, x)))(1.0)),
                             np.asarray(tinyjx.grad(tinyjx.grad(lambda s: mlp(w * s, x)))(1.0)), rtol=1e-4, atol=1e-5)

def test_checkpoint_backward_pass_recomputes_the_forward():
  f = tinyjx.checkpoint(lambda x: jnp.sin(jnp.sin(x)))
  text = str(tinyjx.make_jaxpr(tinyjx.value_and_grad(lambda x: jnp.sum(f(x))))(jnp.ones(3)))
  # two checkpoint nodes: the forward (sin twice), and the backward, whose jaxpr computes the inner sin again
  assert text.count('checkpoint[') == 2 and text.count('sin') == 3
  backward = text.split('checkpoint[')[2]
  assert backward.count('sin') == 1 and backward.count('cos') == 2
  plain = str(tinyjx.make_jaxpr(tinyjx.value_and_grad(lambda x: jnp.sum(jnp.sin(jnp.sin(x)))))(jnp.ones(3)))
  assert plain.count('sin') == 2 and 'checkpoint' not in plain   # without remat the forward's sin is reused

def test_checkpoint_static_argnums_decorator_form_and_remat_alias():
  @tinyjx.remat
  def f(x): return jnp.exp(x) * 2
  assert math.isclose(tinyjx.grad(f)(0.5).item(), 2 * math.exp(0.5), rel_tol=1e-6)
  g = tinyjx.checkpoint(lambda x, n: x ** n if n > 1 else x, static_argnums=(1,))
  assert tinyjx.grad(g)(2.0, 3).item() == 12.0 and tinyjx.grad(g)(2.0, 1).item() == 1.0

def test_checkpoint_closing_over_a_differentiated_value():
  def outer(w):
    f = tinyjx.checkpoint(lambda x: jnp.sin(x * w))
    return jnp.sum(f(jnp.array([1.0, 2.0])))
  expected = np.sum(np.array([1.0, 2.0]) * np.cos(np.array([1.0, 2.0]) * 0.5))
  assert math.isclose(tinyjx.grad(outer)(0.5).item(), expected, rel_tol=1e-6)

def test_checkpoint_vjp_jaxpr_is_memoized():
  f = tinyjx.checkpoint(lambda x: jnp.cos(x) * 3.0)
  tinyjx.grad(f)(0.1)
  before = dict(ad.jaxpr_cache_stats)
  tinyjx.grad(f)(0.2)
  assert ad.jaxpr_cache_stats['hits'] > before['hits'] and ad.jaxpr_cache_stats['misses'] == before['misses']

def test_checkpoint_under_jit():
  f = tinyjx.checkpoint(lambda x: jnp.sum(jnp.tanh(x) ** 2))
  x = jnp.array([0.2, -0.4])
  np.testing.assert_allclose(np.asarray(tinyjx.jit(tinyjx.grad(f))(x)),
                             np.asarray(tinyjx.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2))(x)), rtol=1e-6)

@needs_batch_rules
def test_checkpoint_under_vmap():
  f = tinyjx.checkpoint(lambda x: jnp.sum(jnp.tanh(x) ** 2))
  xs = jnp.array([[0.2, -0.4], [1.0, 2.0]])
  expected = [np.asarray(tinyjx.grad(f)(x)) for x in xs]
  np.testing.assert_allclose(np.asarray(tinyjx.vmap(tinyjx.grad(f))(xs)), expected, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(tinyjx.jacrev(lambda x: tinyjx.checkpoint(jnp.sin)(x))(xs[0])),
                             np.diag(np.cos(np.asarray(xs[0]))), rtol=1e-6)


def test_custom_vjp_forward_mode_by_differentiating_the_function():
  """JAX has no forward mode for custom_vjp; tinyjx's `forward_mode_differentiates_fun` opts in to jvp of the
  function itself (nn's convolution uses it), while reverse mode still uses the given bwd."""
  @tinyjx.custom_vjp
  def f(x): return jnp.sin(x) * 2.0
  f.defvjp(lambda x: (f(x), x), lambda x, g: (g * 2.0 * jnp.cos(x),))
  with pytest.raises(TypeError, match="forward-mode"):
    tinyjx.jvp(f, (jnp.asarray(0.5),), (jnp.asarray(1.0),))
  f.forward_mode_differentiates_fun = True
  _, t = tinyjx.jvp(f, (jnp.asarray(0.5),), (jnp.asarray(1.0),))
  np.testing.assert_allclose(float(t), 2 * np.cos(0.5), rtol=1e-6)
  np.testing.assert_allclose(float(tinyjx.jacfwd(tinyjx.grad(f))(jnp.asarray(0.5))), -2 * np.sin(0.5), rtol=1e-5)
