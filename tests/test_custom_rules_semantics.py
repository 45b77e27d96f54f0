"""When custom_jvp / custom_vjp call the user's functions (tinyjx/transforms/custom.py): a Python log records every
call of the function, its rules and a marker between `vjp` and its pullback, under each transform, and the log
must equal JAX's. The expected logs are data, generated once with JAX 0.10.2 by running these same scenarios
(the test never imports JAX)."""
import math
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax

pytestmark = pytest.mark.usefixtures('semantics_device')

# ---------------------------------------------------------------- the functions, each logging its calls

def make_custom_jvp(rule_calls_f: bool):
  log = []
  @tinyjx.custom_jvp
  def f(x):
    log.append('f')
    return jnp.sin(x) * 2.0
  @f.defjvp
  def f_jvp(primals, tangents):
    log.append('jvp')
    x, = primals
    return (f(x) if rule_calls_f else jnp.sin(x) * 2.0), jnp.cos(x) * 3.0 * tangents[0]
  return f, log

def make_custom_vjp():
  log = []
  @tinyjx.custom_vjp
  def f(x):
    log.append('f')
    return jnp.sin(x) * 2.0
  def fwd(x):
    log.append('fwd')
    return jnp.sin(x) * 2.0, jnp.cos(x)
  def bwd(cos_x, g):
    log.append('bwd')
    return (3.0 * cos_x * g,)
  f.defvjp(fwd, bwd)
  return f, log

MAKERS = {'custom_jvp': lambda: make_custom_jvp(False), 'custom_jvp_rule_calls_f': lambda: make_custom_jvp(True),
          'custom_vjp': make_custom_vjp}

X, XS = 0.5, np.array([0.1, 0.2, 0.3], np.float32)

def vjp_then_pullback(f, log):
  y, pullback = tinyjx.vjp(f, jnp.array(X))
  log.append('|')
  return pullback(jnp.array(1.0))[0]

def jit_called_twice(f, log):
  g = tinyjx.jit(lambda v: f(v))
  g(X)
  del log[:]
  return g(X)

SCENARIOS = {   # name -> (run(f, log), the value it returns: sin(x) * 2, whose custom derivative is 3 cos(x))
  'call': (lambda f, log: f(jnp.array(X)), 2 * math.sin(X)),
  'jit': (lambda f, log: tinyjx.jit(lambda v: f(v))(X), 2 * math.sin(X)),
  'jit_second_call': (jit_called_twice, 2 * math.sin(X)),
  'vmap': (lambda f, log: tinyjx.vmap(f)(XS), 2 * np.sin(XS)),
  'grad': (lambda f, log: tinyjx.grad(f)(X), 3 * math.cos(X)),
  'jvp': (lambda f, log: tinyjx.jvp(f, (jnp.array(X),), (jnp.array(X),))[1], 3 * math.cos(X) * X),
  'vjp': (vjp_then_pullback, 3 * math.cos(X)),
  'jit_grad': (lambda f, log: tinyjx.jit(tinyjx.grad(f))(X), 3 * math.cos(X)),
  'grad_jit': (lambda f, log: tinyjx.grad(tinyjx.jit(f))(X), 3 * math.cos(X)),
  'grad_grad': (lambda f, log: tinyjx.grad(tinyjx.grad(f))(X), None),
  'vmap_grad': (lambda f, log: tinyjx.vmap(tinyjx.grad(f))(XS), 3 * np.cos(XS)),
  'jvp_jit': (lambda f, log: tinyjx.jvp(tinyjx.jit(lambda v: f(v)), (jnp.array(X),), (jnp.array(X),))[1],
              3 * math.cos(X) * X),
}

# What JAX 0.10.2 logs for each scenario (jvp/jvp_jit are forward mode, which custom_vjp does not have).
JAX_LOGS = {
  'custom_jvp': {
    'call': ['f'], 'jit': ['f'], 'jit_second_call': [], 'vmap': ['f'], 'grad': ['jvp'], 'jvp': ['jvp'],
    'vjp': ['jvp', '|'], 'jit_grad': ['jvp'], 'grad_jit': ['f', 'jvp'], 'grad_grad': ['jvp'], 'vmap_grad': ['jvp'],
    'jvp_jit': ['f', 'jvp']},
  'custom_jvp_rule_calls_f': {
    'call': ['f'], 'jit': ['f'], 'jit_second_call': [], 'vmap': ['f'], 'grad': ['jvp', 'f'], 'jvp': ['jvp', 'f'],
    'vjp': ['jvp', 'f', '|'], 'jit_grad': ['jvp', 'f'], 'grad_jit': ['f', 'jvp', 'f'],
    'grad_grad': ['jvp', 'jvp', 'f'], 'vmap_grad': ['jvp', 'f'], 'jvp_jit': ['f', 'jvp', 'f']},
  'custom_vjp': {
    'call': ['f'], 'jit': ['f'], 'jit_second_call': [], 'vmap': ['f'], 'grad': ['fwd', 'bwd'],
    'vjp': ['fwd', '|', 'bwd'], 'jit_grad': ['fwd', 'bwd'], 'grad_jit': ['f', 'fwd', 'bwd'],
    'grad_grad': ['fwd', 'bwd'], 'vmap_grad': ['fwd', 'bwd']},
}
CASES = [(kind, name) for kind, logs in JAX_LOGS.items() for name in logs]

@pytest.mark.parametrize('kind,scenario', CASES, ids=[f"{k}-{s}" for k, s in CASES])
def test_user_functions_run_as_often_and_in_the_order_jax_runs_them(kind, scenario):
  f, log = MAKERS[kind]()
  run, want = SCENARIOS[scenario]
  out = run(f, log)
  assert log == JAX_LOGS[kind][scenario]
  if scenario == 'grad_grad':
    want = -3 * math.sin(X)              # d/dx of the custom derivative 3 cos(x)
  np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-6)

def test_custom_vjp_has_no_forward_mode():
  f, log = make_custom_vjp()
  with pytest.raises(TypeError, match="forward-mode"):
    tinyjx.jvp(f, (jnp.array(X),), (jnp.array(X),))

# ---------------------------------------------------------------- rules see what JAX's rules see

def test_custom_jvp_rule_branches_on_concrete_primals_under_eager_grad():
  log = []
  @tinyjx.custom_jvp
  def f(x):
    log.append('f')
    return jnp.maximum(x, 0.0)
  @f.defjvp
  def f_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    log.append('jvp')
    if x > 0: return x, 2.0 * t          # a Python `if` on the primal: it is concrete here
    return jnp.zeros_like(x), 0.5 * t
  assert tinyjx.grad(f)(3.0).item() == 2.0 and tinyjx.grad(f)(-3.0).item() == 0.5
  assert tinyjx.jvp(f, (jnp.array(1.0),), (jnp.array(1.0),))[1].item() == 2.0
  assert log == ['jvp', 'jvp', 'jvp']    # JAX: the rule once per derivative, the function never
  with pytest.raises(tinyjx.ConcretizationError):
    tinyjx.jit(tinyjx.grad(f))(3.0)      # traced primals, as under JAX's jit

def test_grad_of_grad_through_a_custom_vjp_whose_forward_loops_uses_the_rule():
  log = []
  @tinyjx.custom_vjp
  def newton_sqrt(x):
    log.append('f')
    return lax.while_loop(lambda s: jnp.abs(s * s - x) > 1e-5, lambda s: 0.5 * (s + x / s), x)
  def fwd(x):
    log.append('fwd')
    y = newton_sqrt(x)
    return y, y
  def bwd(y, g):
    log.append('bwd')
    return (g / (2 * y),)
  newton_sqrt.defvjp(fwd, bwd)
  assert math.isclose(tinyjx.grad(newton_sqrt)(4.0).item(), 0.25, rel_tol=1e-5)
  assert log == ['fwd', 'f', 'bwd']
  for g in (tinyjx.grad(tinyjx.grad(newton_sqrt)), tinyjx.jit(tinyjx.grad(tinyjx.grad(newton_sqrt)))):
    del log[:]
    assert math.isclose(g(4.0).item(), -1 / 32, rel_tol=1e-4)    # d/dx 1 / (2 sqrt x): the loop is not differentiated
    assert log == ['fwd', 'fwd', 'f', 'bwd', 'bwd']               # JAX's log

def test_prints_come_in_jax_order(capsys):
  @tinyjx.custom_vjp
  def g(x):
    print('g body')
    return x * 2.0
  def g_fwd(x):
    print('g fwd')
    return x * 2.0, x
  def g_bwd(r, ct):
    print('g bwd')
    return (ct * 3.0,)
  g.defvjp(g_fwd, g_bwd)
  v, d = tinyjx.value_and_grad(lambda x: g(x) ** 2)(jnp.array(1.0))
  assert (v.item(), d.item()) == (4.0, 12.0)
  assert capsys.readouterr().out.split('\n') == ['g fwd', 'g bwd', '']
  y, pullback = tinyjx.vjp(g, jnp.array(1.0))
  print('pullback')
  pullback(jnp.array(1.0))
  assert capsys.readouterr().out.split('\n') == ['g fwd', 'pullback', 'g bwd', '']

def test_bwd_runs_only_when_the_pullback_runs_and_each_time():
  f, log = make_custom_vjp()
  _, pullback = tinyjx.vjp(f, jnp.array(X))
  assert log == ['fwd']
  pullback(jnp.array(1.0)), pullback(jnp.array(2.0))
  assert log == ['fwd', 'bwd', 'bwd']

def test_a_rule_staged_under_vmap_runs_when_the_batched_node_is_differentiated():
  f, log = make_custom_vjp()
  batched = tinyjx.jit(tinyjx.vmap(f))
  g = tinyjx.grad(lambda xs: jnp.sum(batched(xs)))(XS)
  np.testing.assert_allclose(np.asarray(g), 3 * np.cos(XS), rtol=1e-5)
  assert log == ['f', 'fwd', 'bwd']      # JAX's log: f traced by jit(vmap), each rule once for the gradient

def test_a_python_branch_on_the_primal_in_both_the_function_and_its_rule_under_grad():
  """JAX's custom-derivative tutorial: f and its jvp rule both branch on x in Python; eager grad gives 2 and 3."""
  @tinyjx.custom_jvp
  def f(x):
    return jnp.sin(x) if x > 0 else jnp.cos(x)
  @f.defjvp
  def f_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return f(x), (2. if x > 0 else 3.) * t
  assert float(tinyjx.grad(f)(1.)) == 2.0 and float(tinyjx.grad(f)(-1.)) == 3.0
  assert float(f(1.)) == pytest.approx(np.sin(1.0)) and float(f(-1.)) == pytest.approx(np.cos(1.0))
