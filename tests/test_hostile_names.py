"""Names that a user controls (function names, pytree keys, static strings, custom-rule and loop functions) never
reach generated source: kernels are named after ops and slots, so no name can inject code into the C program."""
import numpy as np
import pytest
import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx import lax
from tinyjx.devices import cpu

pytestmark = pytest.mark.skipif(not cpu.available(), reason="no C compiler for the CPU device")

EVIL = ['*/ int main(void) { return system("touch /tmp/pwned"); } /*', '\n#define float double\n', 'a"b\\',
        '); } void tjx_run_0(void) { (', '\x00nul', '${HOME}`id`', 'caf\u00e9 \u2603']

def source_of(fn, *args) -> str:
  return jax.jit(fn).lower(*args).compile().executable.source

@pytest.mark.parametrize("name", EVIL)
def test_function_names_and_pytree_keys_stay_out_of_the_source(name):
  def f(tree, s):
    y = jnp.sin(tree[name]) * 2 + len(s)
    y = lax.fori_loop(0, 3, lambda i, c: c + i, y)
    return {name: y, 'other': jnp.cumsum(tree[name])}
  f.__name__ = f.__qualname__ = name
  x = np.arange(5, dtype=np.float32)
  g = jax.jit(f, static_argnums=1)
  out = g({name: jnp.asarray(x)}, name)
  np.testing.assert_allclose(np.asarray(out[name]), np.sin(x) * 2 + len(name) + 3, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(out['other']), np.cumsum(x), rtol=1e-6)
  src = jax.jit(f, static_argnums=1).lower({name: jnp.asarray(x)}, name).compile().executable.source
  for piece in (name, name.strip(), 'system(', 'pwned'):
    if piece.strip(): assert piece not in src

def test_custom_rule_names_stay_out_of_the_source():
  @jax.custom_jvp
  def f(x): return jnp.exp(x)
  f.defjvp(lambda p, t: (jnp.exp(p[0]), jnp.exp(p[0]) * t[0]))
  f.__name__ = EVIL[0]
  src = source_of(jax.grad(lambda x: f(x).sum()), jnp.ones(3))
  assert 'system(' not in src and 'pwned' not in src

def test_nothing_is_loaded_with_pickle_or_evaluated():
  """No module of tinyjx or nn imports pickle/marshal/shelve, calls np.load (which can unpickle), eval or exec."""
  import ast, pathlib
  root = pathlib.Path(jax.__file__).parent.parent
  banned_modules, banned_calls = {'pickle', 'marshal', 'shelve', 'dill', 'cloudpickle'}, {'eval', 'exec'}
  found = []
  for path in list((root / 'tinyjx').rglob('*.py')) + list((root / 'nn').rglob('*.py')):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or '']
        found += [f"{path}: import {n}" for n in names if n.split('.')[0] in banned_modules]
      if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name) and f.id in banned_calls: found.append(f"{path}:{node.lineno}: {f.id}()")
        if isinstance(f, ast.Attribute) and f.attr == 'load' and getattr(f.value, 'id', '') in ('np', 'numpy'):
          found.append(f"{path}:{node.lineno}: np.load()")
  assert not found, found
