"""jax_debug_nans / jax_debug_infs: the first equation that made a NaN (or inf), with the user's source line, in
eager and jitted code, forward and backward; nothing recorded or checked while the knobs are off."""
import inspect, os, subprocess, sys
import numpy as np
import pytest
import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx import uop, array

def line_of(fn, text: str) -> int:
  """The file line number of the line of `fn`'s source that contains `text`."""
  lines, first = inspect.getsourcelines(fn)
  return first + next(i for i, l in enumerate(lines) if text in l)

def forward(x):
  y = jnp.sin(x)
  z = jnp.log(y - 2.0)
  return z * 2

def backward_only(x):
  a = x * x
  return jnp.sqrt(a).sum()

def expect(fn, *args, op: str, line: int, kind: str = 'nan', phase: str | None = None):
  with pytest.raises(FloatingPointError) as e:
    np.asarray(fn(*args))
  msg = str(e.value)
  assert f"invalid value ({kind}) encountered in {op}" in msg, msg
  assert f"{__file__}:{line}" in msg, msg
  if phase: assert phase in msg, msg
  return msg

X = np.array([1., 2.], np.float32)

@pytest.mark.parametrize("wrap", [lambda f: f, jax.jit], ids=["eager", "jit"])
def test_forward_nan_names_the_equation_and_line(wrap):
  with jax.Context(JAX_DEBUG_NANS=True):
    msg = expect(wrap(forward), jnp.asarray(X), op="log", line=line_of(forward, "jnp.log"))
  assert "z = jnp.log(y - 2.0)" in msg

@pytest.mark.parametrize("wrap", [jax.grad, lambda f: jax.jit(jax.grad(f)), lambda f: jax.grad(jax.jit(f))],
                         ids=["grad", "jit(grad)", "grad(jit)"])
def test_backward_nan_names_the_forward_line_and_the_pass(wrap):
  # sqrt(x*x) at 0: the forward pass is finite, the backward pass multiplies inf (d sqrt at 0) by 0 (d x*x at 0)
  with jax.Context(JAX_DEBUG_NANS=True):
    expect(wrap(backward_only), jnp.array([0., 2.]), op="mul", line=line_of(backward_only, "a = x * x"),
           phase="backward pass (vjp) of mul")

def test_jvp_nan_is_named_in_the_forward_mode_pass():
  with jax.Context(JAX_DEBUG_NANS=True):
    # forward mode meets the inf at sqrt's own derivative: its tangent is 0 (from x*x) times inf
    fn = lambda x: jax.jvp(backward_only, (x,), (jnp.ones_like(x),))[1]
    expect(fn, jnp.array([0., 2.]), op="mul", line=line_of(backward_only, "jnp.sqrt(a)"),
           phase="forward-mode derivative (jvp) of sqrt")

def test_vmap_nan_is_found():
  with jax.Context(JAX_DEBUG_NANS=True):
    expect(jax.vmap(forward), jnp.asarray(X)[:, None], op="log", line=line_of(forward, "jnp.log"))

def test_infs_are_a_separate_knob():
  def inv(x): return 1.0 / x
  x = jnp.array([0., 1.])
  with jax.Context(JAX_DEBUG_NANS=True):
    assert np.isinf(np.asarray(inv(x))[0])            # an inf is not a NaN
  with jax.Context(JAX_DEBUG_INFS=True):
    expect(jax.jit(inv), x, op="div", line=line_of(inv, "1.0 / x"), kind="inf")

def test_integer_and_finite_results_pass_and_match():
  with jax.Context(JAX_DEBUG_NANS=True, JAX_DEBUG_INFS=True):
    f = jax.jit(lambda x, i: (jnp.tanh(x).sum(), i // 2))
    s, q = f(jnp.asarray(X), jnp.arange(4))
    np.testing.assert_allclose(float(s), np.tanh(X).sum(), rtol=1e-6)
    assert np.asarray(q).tolist() == [0, 0, 1, 1]

def test_config_update_and_hooks_only_while_on():
  assert uop.watcher is None and array.nan_hook is None       # off: nothing recorded, nothing checked
  jax.config.update('jax_debug_nans', True)
  try:
    assert uop.watcher is not None and array.nan_hook is not None
    with pytest.raises(FloatingPointError):
      np.asarray(jnp.log(jnp.array([-1.])))
  finally:
    jax.config.update('jax_debug_nans', False)
  assert uop.watcher is None and array.nan_hook is None
  assert np.isnan(np.asarray(jnp.log(jnp.array([-1.])))[0])  # off again: NaN is just a value

def test_a_nan_input_is_blamed_on_the_first_equation_that_passes_it_on():
  with jax.Context(JAX_DEBUG_NANS=True):
    with pytest.raises(FloatingPointError, match="encountered in add"):
      jax.jit(lambda x: x + 1)(jnp.array([np.nan]))

def test_environment_variable_turns_it_on(tmp_path):
  script = tmp_path / "prog.py"
  script.write_text("import tinyjx.numpy as jnp\nimport tinyjx as jax\n"
                    "f = jax.jit(lambda x: jnp.sqrt(x))\n"
                    "try:\n  f(jnp.array([-1.]))\nexcept FloatingPointError as e:\n  print('raised:', e)\n")
  env = dict(os.environ, JAX_DEBUG_NANS="1", PYTHONPATH=os.path.dirname(os.path.dirname(jax.__file__)))
  out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
  assert "raised: invalid value (nan) encountered in sqrt" in out.stdout, out.stdout + out.stderr
  assert f"{script}:3" in out.stdout
