"""jax.debug.print and jax.debug.callback: when they run, how often, and with which values.

The expected outputs are JAX 0.10.2's, recorded as data (JAX itself is not imported here). Every case runs on
the PYTHON reference device, on the compiled CPU device, and on the CPU device compiling eager graphs at once.
"""
import numpy as np
import pytest
import tinyjx
import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx import lax

DEVICES = {'python': dict(TINYJX_DEVICE='PYTHON'), 'cpu': dict(TINYJX_DEVICE='CPU'),
           'cpu_eager_compiled': dict(TINYJX_DEVICE='CPU', TINYJX_EAGER_COMPILE_MS=0)}

@pytest.fixture(params=list(DEVICES))
def device(request):
  with tinyjx.Context(**DEVICES[request.param]):
    yield request.param

def lines(capsys) -> list:
  return capsys.readouterr().out.splitlines()

def f(x):
  jax.debug.print("x={x}", x=x)
  return x * 2

def body(c, x):
  jax.debug.print("c={} x={}", c, x)
  return c + x, c

def while_body(c):
  jax.debug.print("w={}", c)
  return c + 1

def fori_sum(n):
  return lax.fori_loop(0, n, lambda i, c: (jax.debug.print("i={}", i), c + i)[1], 0)

def cond_fn(p, x):
  return lax.cond(p, lambda x: (jax.debug.print("T {}", x), x)[1], lambda x: (jax.debug.print("F {}", x), x)[1], x)

# name: (program, what JAX 0.10.2 prints)
CASES = {
  'eager_scalar': (lambda: f(jnp.float32(1.5)), ["x=1.5"]),
  'eager_array': (lambda: f(jnp.arange(3.)), ["x=[0. 1. 2.]"]),
  'vmap': (lambda: jax.vmap(f)(jnp.arange(3.)), ["x=0.0", "x=1.0", "x=2.0"]),
  'jit_vmap': (lambda: jax.jit(jax.vmap(f))(jnp.arange(3.)), ["x=0.0", "x=1.0", "x=2.0"]),
  'vmap_unbatched_arg': (lambda: jax.vmap(lambda x, y: (jax.debug.print("{} {}", x, y), x)[1], in_axes=(0, None))(
      jnp.arange(2.), jnp.float32(7.)), ["0.0 7.0", "1.0 7.0"]),
  'vmap_nothing_batched': (lambda: jax.vmap(lambda x: jax.debug.print("u {}", 5.0))(jnp.arange(2.)), ["u 5.0"]),
  'vmap_nested': (lambda: jax.vmap(jax.vmap(lambda x: jax.debug.print("n {}", x)))(jnp.arange(4.).reshape(2, 2)),
                  ["n 0.0", "n 2.0", "n 1.0", "n 3.0"]),
  'grad': (lambda: jax.grad(lambda x: f(x) ** 2)(3.), ["x=3.0"]),
  'jit_grad': (lambda: jax.jit(jax.grad(lambda x: f(x) ** 2))(3.), ["x=3.0"]),
  'jvp': (lambda: jax.jvp(f, (1.,), (1.,)), ["x=1.0"]),
  'scan': (lambda: lax.scan(body, 0., jnp.arange(3.)), ["c=0.0 x=0.0", "c=0.0 x=1.0", "c=1.0 x=2.0"]),
  'jit_scan': (lambda: jax.jit(lambda xs: lax.scan(body, 0., xs))(jnp.arange(3.)),
               ["c=0.0 x=0.0", "c=0.0 x=1.0", "c=1.0 x=2.0"]),
  'grad_scan': (lambda: jax.grad(lambda xs: lax.scan(body, 0., xs)[0])(jnp.arange(3.)),
                ["c=0.0 x=0.0", "c=0.0 x=1.0", "c=1.0 x=2.0"]),
  'jit_grad_scan': (lambda: jax.jit(jax.grad(lambda xs: lax.scan(body, 0., xs)[0]))(jnp.arange(3.)),
                    ["c=0.0 x=0.0", "c=0.0 x=1.0", "c=1.0 x=2.0"]),
  'vmap_scan': (lambda: jax.vmap(lambda xs: lax.scan(body, 0., xs))(jnp.arange(4.).reshape(2, 2)),
                ["c=0.0 x=0.0", "c=0.0 x=2.0", "c=0.0 x=1.0", "c=2.0 x=3.0"]),
  'fori': (lambda: fori_sum(3), ["i=0", "i=1", "i=2"]),
  'jit_fori': (lambda: jax.jit(fori_sum)(3), ["i=0", "i=1", "i=2"]),
  'while': (lambda: lax.while_loop(lambda c: c < 3, while_body, 0), ["w=0", "w=1", "w=2"]),
  'jit_while': (lambda: jax.jit(lambda c: lax.while_loop(lambda c: c < 3, while_body, c))(0), ["w=0", "w=1", "w=2"]),
  'cond': (lambda: (cond_fn(True, 1.), cond_fn(False, 2.), jax.jit(cond_fn)(True, 3.), jax.jit(cond_fn)(False, 4.)),
           ["T 1.0", "F 2.0", "T 3.0", "F 4.0"]),
  'formats': (lambda: (jax.debug.print("{x:.2f}", x=jnp.float32(3.14159)), jax.debug.print("{}", jnp.arange(4)),
                       jax.debug.print("{} and {}", jnp.ones((2, 2)), 3),
                       jax.jit(lambda x: jax.debug.print("{x:.2f}", x=x))(jnp.float32(2.71828)),
                       jax.jit(lambda x: jax.debug.print("{}", x))(jnp.arange(4)),
                       jax.debug.print("{}", jnp.float32(1.5)), jax.debug.print("{}", jnp.int32(3)),
                       jax.debug.print("{}", jnp.bool_(True))),
              ["3.14", "[0 1 2 3]", "[[1. 1.]", " [1. 1.]] and 3", "2.72", "[0 1 2 3]", "1.5", "3", "True"]),
  'no_args': (lambda: (jax.debug.print("no args"), jax.jit(lambda: jax.debug.print("no args jit"))()),
              ["no args", "no args jit"]),
  'ordered': (lambda: jax.jit(lambda x: (jax.debug.print("a {}", x, ordered=True),
                                         jax.debug.print("b {}", x + 1, ordered=True),
                                         jax.debug.print("c {}", x * 10, ordered=True), x)[-1])(1.),
              ["a 1.0", "b 2.0", "c 10.0"]),
  'inlined_jit_twice': (lambda: jax.jit(lambda x: G(x) + G(x))(1.), ["g 1.0", "g 1.0"]),
  'grad_of_jit': (lambda: jax.grad(lambda x: G(x) * 3)(2.), ["g 2.0"]),
}
G = jax.jit(lambda x: (jax.debug.print("g {}", x), x)[1])

# callbacks inside custom rules, checkpoint, a cond whose index is batched, and bodies that return nothing
@jax.custom_vjp
def V(x):
  jax.debug.print("V {}", x)
  return jnp.sin(x)
def V_fwd(x):
  jax.debug.print("fwd {}", x)
  return jnp.sin(x), jnp.cos(x)
def V_bwd(c, g):
  jax.debug.print("bwd {} {}", c, g)
  return (c * g,)
V.defvjp(V_fwd, V_bwd)

@jax.custom_jvp
def H(x):
  jax.debug.print("H {}", x)
  return x * x
@H.defjvp
def H_jvp(p, t):
  jax.debug.print("Hjvp {}", p[0])
  return H(p[0]), 2 * p[0] * t[0]

def branchy(x):
  return lax.cond(x > 1, lambda x: (jax.debug.print("t {}", x), x * 2)[1],
                  lambda x: (jax.debug.print("e {}", x), x - 1)[1], x)

def prints_only(x):
  lax.cond(x > 1, lambda x: jax.debug.print("tn {}", x), lambda x: jax.debug.print("en {}", x), x)
  return x

CASES.update({
  'custom_vjp_grad': (lambda: jax.grad(V)(1.), ["fwd 1.0", "bwd 0.5403022766113281 1.0"]),
  'custom_vjp_jit_grad': (lambda: jax.jit(jax.grad(V))(1.), ["fwd 1.0", "bwd 0.5403022766113281 1.0"]),
  'custom_vjp_vmap_grad': (lambda: jax.vmap(jax.grad(V))(jnp.arange(2.)),
                           ["fwd 0.0", "fwd 1.0", "bwd 1.0 1.0", "bwd 0.5403022766113281 1.0"]),
  'custom_vjp_vmap': (lambda: jax.vmap(V)(jnp.arange(2.)), ["V 0.0", "V 1.0"]),
  'custom_vjp_jit': (lambda: jax.jit(V)(2.), ["V 2.0"]),
  'custom_jvp_grad': (lambda: jax.grad(H)(3.), ["Hjvp 3.0", "H 3.0"]),
  'custom_jvp_jit_grad': (lambda: jax.jit(jax.grad(H))(3.), ["Hjvp 3.0", "H 3.0"]),
  'custom_jvp_vmap_grad': (lambda: jax.vmap(jax.grad(H))(jnp.arange(2.)), ["Hjvp 0.0", "Hjvp 1.0", "H 0.0", "H 1.0"]),
  'custom_jvp_vmap': (lambda: jax.vmap(H)(jnp.arange(2.)), ["H 0.0", "H 1.0"]),
  'checkpoint_jit': (lambda: jax.jit(jax.checkpoint(lambda x: (jax.debug.print("ck {}", x), x * x)[1]))(4.),
                     ["ck 4.0"]),
  'checkpoint_vmap': (lambda: jax.vmap(jax.checkpoint(lambda x: (jax.debug.print("ck {}", x), x * x)[1]))(
      jnp.arange(2.)), ["ck 0.0", "ck 1.0"]),
  # a batched index runs every branch on every example (JAX, unjitted, prints branch by branch)
  'vmap_cond_batched_index': (lambda: jax.vmap(branchy)(jnp.arange(3.)),
                              ["e 0.0", "e 1.0", "e 2.0", "t 0.0", "t 1.0", "t 2.0"]),
  'grad_cond': (lambda: jax.grad(branchy)(2.), ["t 2.0"]),
  'cond_without_outputs': (lambda: (prints_only(2.), jax.jit(prints_only)(0.)), ["tn 2.0", "en 0.0"]),
  'vmap_cond_without_outputs': (lambda: jax.vmap(prints_only)(jnp.arange(3.)),
                                ["en 0.0", "en 1.0", "en 2.0", "tn 0.0", "tn 1.0", "tn 2.0"]),
  'scan_without_outputs': (lambda: (lax.scan(lambda c, x: (jax.debug.print("x {}", x), (c, None))[1], None,
                                             jnp.arange(2.)),
                                    jax.jit(lambda xs: lax.scan(lambda c, x: (jax.debug.print("j {}", x), (c, None))[1],
                                                                None, xs))(jnp.arange(2.))),
                           ["x 0.0", "x 1.0", "j 0.0", "j 1.0"]),
})

def test_a_custom_jvp_rule_that_prints_its_tangents_is_refused_clearly():
  @jax.custom_jvp
  def k(x): return x * 2
  @k.defjvp
  def k_jvp(p, t):
    jax.debug.print("t {}", t[0])
    return k(p[0]), 2 * t[0]
  with pytest.raises(NotImplementedError, match="reads the tangents"):
    jax.grad(k)(1.)

def test_grad_of_checkpoint_prints_the_forward_once(capsys):
  # JAX prints twice here (its rematerialized forward runs the callback again); tinyjx's callback belongs to the
  # forward pass only, and the recomputation in the backward pass computes values without it
  assert float(jax.grad(jax.checkpoint(lambda x: (jax.debug.print("ck {}", x), x * x)[1]))(3.)) == 6.0
  assert lines(capsys) == ["ck 3.0"]

@pytest.mark.parametrize("name", list(CASES))
def test_prints_as_jax(name, device, capsys):
  program, expected = CASES[name]
  out = program()
  tinyjx.tree_util.tree_map(lambda a: np.asarray(a), out)   # reading the results must not print again
  assert lines(capsys) == expected

def test_jit_runs_every_call_and_tracing_never(device, capsys):
  g = jax.jit(f)
  assert float(g(jnp.float32(1.))) == 2.0
  assert float(g(jnp.float32(2.))) == 4.0
  assert lines(capsys) == ["x=1.0", "x=2.0"]
  text = str(jax.make_jaxpr(f)(1.))
  jax.eval_shape(f, 1.)
  jax.jit(f).lower(jnp.float32(1.))
  assert lines(capsys) == []
  assert "debug_callback" in text

def test_vjp_prints_in_forward_only(device, capsys):
  _, f_vjp = jax.vjp(f, 1.)
  assert lines(capsys) == ["x=1.0"]
  assert float(f_vjp(1.)[0]) == 2.0
  assert lines(capsys) == []

def test_callback_gets_numpy_pytrees_and_kwargs(device):
  seen = []
  def cb(t, k=None): seen.append((t, k))
  jax.debug.callback(cb, {'a': jnp.ones(2), 'b': 3}, k=(jnp.zeros(1),))
  jax.jit(lambda x: jax.debug.callback(cb, {'a': x * 2}, k=[x]))(jnp.ones(2))
  (t0, k0), (t1, k1) = seen
  assert isinstance(t0['a'], np.ndarray) and isinstance(t0['b'], np.ndarray) and t0['b'].shape == ()
  np.testing.assert_array_equal(t0['a'], [1., 1.])
  assert int(t0['b']) == 3 and isinstance(k0, tuple) and k0[0].tolist() == [0.]
  np.testing.assert_array_equal(t1['a'], [2., 2.])
  assert isinstance(k1, list) and k1[0].tolist() == [1., 1.]

def test_callback_returns_none_and_vmap_calls_per_example(device):
  seen = []
  def h(x):
    assert jax.debug.callback(lambda v: seen.append(v.tolist()), x) is None
    return x
  jax.vmap(h)(jnp.arange(3.))
  jax.jit(jax.vmap(h))(jnp.arange(3.))
  assert seen == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]

def test_exception_surfaces_with_a_clear_message(device):
  def bad(v): return 1 / 0
  for run in (lambda: jax.debug.callback(bad, 1.), lambda: jax.jit(lambda x: jax.debug.callback(bad, x))(1.)):
    with pytest.raises(tinyjx.debug.DebugCallbackError, match="bad.*ZeroDivisionError: division by zero") as e:
      run()
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert "test_debug_callback.py" in str(e.value)   # names the call site

def test_pmap_prints_once_per_device(capsys):
  with tinyjx.Context(TINYJX_CPU_DEVICES=2):
    g = jax.pmap(lambda x: (jax.debug.print("p {}", x), x * 2)[1])
    np.testing.assert_array_equal(np.asarray(g(jnp.arange(2.))), [0., 2.])
    assert sorted(lines(capsys)) == ["p 0.0", "p 1.0"]   # devices run concurrently, as in JAX: any order
    g(jnp.arange(2.))
    assert sorted(lines(capsys)) == ["p 0.0", "p 1.0"]
