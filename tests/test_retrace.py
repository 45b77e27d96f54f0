"""Tests of retrace explanations: with DEBUG=1 or jax_explain_cache_misses, each retrace of a jitted function names
the argument that changed (by pytree path) and how, against the closest signature traced before; more than a few
signatures warn once with a hint."""
import warnings
import numpy as np
import pytest

import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx.transforms.retrace import RetraceWarning, MANY

def retraces(capsys) -> list[str]:
  return [l for l in capsys.readouterr().out.splitlines() if ': retrace ' in l]

@pytest.fixture
def explaining():
  with jax.Context(JAX_EXPLAIN_CACHE_MISSES=True):
    yield

def test_shape_change(capsys, explaining):
  g = jax.jit(lambda x: x * 2)
  g(jnp.ones(3)); g(jnp.ones(4))
  assert retraces(capsys) == ["jit(<lambda>): retrace 2: x: shape f32[3] -> f32[4] (against earlier signature 1 of 1)"]

def test_dtype_change_names_the_pytree_path(capsys, explaining):
  def f(params, x): return params['w'] * x
  g = jax.jit(f)
  g({'w': jnp.ones(2)}, 1.0); g({'w': jnp.ones(2, dtype=jnp.int32)}, 1.0)
  assert retraces(capsys) == ["jit(f): retrace 2: params['w']: dtype f32[2] -> i32[2] "
                              "(against earlier signature 1 of 1)"]

def test_weak_type_change(capsys, explaining):
  g = jax.jit(lambda x: x + 1)
  g(jnp.float32(2.0)); g(2.0)
  (line,) = retraces(capsys)
  assert "x: weak type f32[] -> ~f32[]" in line and "Python scalar" in line

def test_tree_structure_change_names_added_and_removed_paths(capsys, explaining):
  def f(*args): return args[0] + sum(a.sum() for a in args[1])
  g = jax.jit(f)
  g(jnp.ones(2), (jnp.ones(1),)); g(jnp.ones(2), (jnp.ones(1), jnp.ones(1)))
  h = jax.jit(lambda *args: f(*args))          # another function: its own signatures
  h(jnp.ones(2), (jnp.ones(1),)); h(jnp.ones(2), [jnp.ones(1)])
  g(jnp.ones(2), (jnp.ones(3),))
  lines = retraces(capsys)
  assert "tree structure: args[1][1] added" in lines[0]
  assert "tree structure: (*, (*,)) -> (*, [*])" in lines[1]      # the same paths, another container
  assert "args[1][0]: shape f32[1] -> f32[3] (against earlier signature 1 of 2)" in lines[2]

def test_static_value_change(capsys, explaining):
  def f(x, n): return x * n
  g = jax.jit(f, static_argnums=1)
  g(jnp.ones(2), 3); g(jnp.ones(2), 4)
  assert retraces(capsys) == ["jit(f): retrace 2: static argument n: 3 -> 4 (against earlier signature 1 of 1)"]

def test_compares_with_the_closest_signature_not_the_last(capsys, explaining):
  def f(x, y): return x + y.sum()
  g = jax.jit(f)
  g(jnp.ones(3), jnp.ones(2))
  g(jnp.ones(4), jnp.ones(5, dtype=jnp.int32))
  g(jnp.ones(3), jnp.ones(7))          # one change from signature 1, three from signature 2
  assert retraces(capsys)[-1] == "jit(f): retrace 3: y: shape f32[2] -> f32[7] (against earlier signature 1 of 2)"

def test_debug1_prints_the_miss_and_its_explanation(capsys):
  g = jax.jit(lambda x: x * 2)
  with jax.Context(DEBUG=1):
    g(jnp.ones(3)); g(jnp.ones(4))
  out = capsys.readouterr().out
  assert "jit(<lambda>): miss (new: x f32[3] -> f32[4])" in out and "retrace 2: x: shape f32[3] -> f32[4]" in out

def test_many_signatures_warn_once_with_a_hint(capsys, explaining):
  g = jax.jit(lambda x: x.sum())
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    for n in range(1, MANY + 4): g(jnp.ones(n))
  mine = [w for w in caught if issubclass(w.category, RetraceWarning)]
  assert len(mine) == 1 and issubclass(RetraceWarning, UserWarning)
  msg = str(mine[0].message)
  assert f"{MANY + 1} different signatures" in msg and "pad" in msg and "fixed shapes" in msg
  assert mine[0].filename == __file__                        # it points at the user's call
  g2 = jax.jit(lambda x, n: x * n, static_argnums=1)
  with pytest.warns(RetraceWarning, match="static"):
    for n in range(MANY + 1): g2(jnp.ones(2), n)

def test_nothing_is_printed_or_warned_when_off(capsys):
  g = jax.jit(lambda x: x.sum())
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    for n in range(1, MANY + 4): g(jnp.ones(n))
  assert capsys.readouterr().out == ""
  assert not [w for w in caught if issubclass(w.category, RetraceWarning)]

def test_the_knob_is_an_environment_variable_and_a_config_entry(monkeypatch, capsys):
  from tinyjx import settings
  monkeypatch.setenv('JAX_EXPLAIN_CACHE_MISSES', '1')
  settings.reload_environment()
  try:
    assert jax.config.jax_explain_cache_misses is True
    g = jax.jit(lambda x: x * 2)
    g(jnp.ones(1)); g(jnp.ones(2))
    assert len(retraces(capsys)) == 1
  finally:
    monkeypatch.delenv('JAX_EXPLAIN_CACHE_MISSES')
    settings.reload_environment()
  jax.config.update('jax_explain_cache_misses', True)
  try:
    assert jax.config.read('jax_explain_cache_misses') is True
  finally:
    jax.config.update('jax_explain_cache_misses', False)
