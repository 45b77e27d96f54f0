"""Tests of tinyjx.explain: one row per jaxpr equation with its source line, transform, kernel and cost, and the
kernels with their source, on known programs (and of the provenance recording it is built on)."""
import inspect, json, re
import numpy as np

import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx import lax, provenance, uop
from tinyjx.explain import Explanation, FOLDED, VIEW, STEP, WIDTH

def line_of(fn, text: str) -> int:
  """The line of this file holding `text` inside `fn`."""
  lines, start = inspect.getsourcelines(fn)
  return start + next(i for i, l in enumerate(lines) if text in l)

def n_equations(f, *args) -> int:
  """Top-level equations of the printed jaxpr (a scan's body is indented deeper)."""
  lines = str(jax.make_jaxpr(f)(*args)).splitlines()
  return sum(bool(re.match(r"    [a-z]+:(\(.*?\)|\S+) = ", line)) for line in lines)

def check_table(e: Explanation, f, *args):
  """What every explanation must satisfy."""
  assert isinstance(e, Explanation)
  assert len(e.rows) == n_equations(f, *args) > 0
  names = {k['name'] for k in e.kernels}
  for r in e.rows:
    assert r['kernel'] in names or r['kernel'] in (FOLDED, VIEW) or r['kernel'].startswith(STEP), r
    if r['kernel'] in names: assert r['flops'] >= 0 and r['bytes'] > 0 and r['time_us'] >= 0
  for k in e.kernels:
    assert k['bytes'] > 0 and k['source'] and k['name'] in k['source']
    assert all(e.rows[i]['kernel'] == k['name'] for i in k['eqns'])
  json.dumps(e.to_records())                                    # plain data
  text = str(e)
  assert text.startswith("explain ") and "equation" in text and "kernel" in text.splitlines()[1]
  assert all(k['source'] in text for k in e.kernels)
  assert max(len(l) for l in text.split("\n\n")[0].splitlines()[1:]) <= WIDTH <= 120

X, W, B = (jnp.asarray(np.random.RandomState(0).randn(*s).astype(np.float32)) for s in ((4, 8), (8, 3), (3,)))

def mlp(x, w, b):
  return jnp.sum(jnp.tanh(x @ w + b))

def test_fused_chain_is_one_kernel_with_its_source_lines():
  e = jax.explain(mlp)(X, W, B)
  check_table(e, mlp, X, W, B)
  prims = [r['primitive'] for r in e.rows]
  assert prims == ['dot_general', 'reshape', 'broadcast', 'add', 'tanh', 'reduce_sum']
  assert len({r['kernel'] for r in e.rows}) == 1 and len(e.kernels) == 1   # matmul, bias, tanh and sum: one kernel
  line = line_of(mlp, "jnp.tanh")
  assert all(r['line'] == line and r['file'] == __file__ and 'jnp.tanh(x @ w + b)' in r['code'] for r in e.rows)
  assert all(r['transform'] == '' for r in e.rows)
  assert e.kernels[0]['flops'] > 0 and e.kernels[0]['eqns'] == list(range(6))

def softmax(x):
  m = jnp.max(x, axis=-1, keepdims=True)
  z = jnp.exp(x - m)
  return z / jnp.sum(z, axis=-1, keepdims=True)

def test_softmax_rows_name_their_own_lines():
  e = jax.explain(softmax)(X)
  check_table(e, softmax, X)
  by_prim = {r['primitive']: r for r in e.rows}
  assert by_prim['reduce_max']['line'] == line_of(softmax, "jnp.max")
  assert by_prim['exp']['line'] == line_of(softmax, "jnp.exp")
  assert by_prim['div']['line'] == line_of(softmax, "z / jnp.sum")
  assert by_prim['exp']['kernel'] in {k['name'] for k in e.kernels}

def test_grad_rows_are_named_grad_and_keep_the_forward_line():
  g = jax.grad(mlp, argnums=1)
  e = jax.explain(g)(X, W, B)
  check_table(e, g, X, W, B)
  line = line_of(mlp, "jnp.tanh")
  transforms = {r['transform'] for r in e.rows}
  assert transforms == {'', 'grad'}
  assert all(r['line'] == line for r in e.rows)
  dots = [r for r in e.rows if r['primitive'] == 'dot_general']
  assert [d['transform'] for d in dots] == ['', 'grad']            # the forward matmul, and the one for dw
  assert all(d['kernel'] in {k['name'] for k in e.kernels} for d in dots)
  # the backward matmul's transpose is folded into its reduction by the lowering: same kernel as the matmul
  transpose = next(r for r in e.rows if r['primitive'] == 'transpose')
  assert transpose['kernel'] == dots[1]['kernel']

def per_example(x):
  return jnp.sum(jnp.sin(x) ** 2)

def test_vmap_and_grad_of_vmap_are_named():
  xs = jnp.ones((3, 4))
  v = jax.vmap(per_example)
  e = jax.explain(v)(xs)
  check_table(e, v, xs)
  assert {r['transform'] for r in e.rows} == {'vmap'}
  assert all(r['line'] == line_of(per_example, "jnp.sin") for r in e.rows)
  gv = jax.grad(lambda xs: jax.vmap(per_example)(xs).sum())
  e = jax.explain(gv)(xs)
  check_table(e, gv, xs)
  by_prim = {}
  for r in e.rows: by_prim.setdefault(r['primitive'], set()).add(r['transform'])
  assert by_prim['sin'] == {'vmap'} and by_prim['cos'] == {'grad of vmap'}
  vg = jax.vmap(jax.grad(per_example))
  e = jax.explain(vg)(xs)
  assert {r['transform'] for r in e.rows if r['primitive'] == 'cos'} == {'vmap of grad'}

def test_scan_is_a_host_step():
  def step(c, x): return c + jnp.sin(x), c * 2
  f = lambda xs: lax.scan(step, 0.0, xs)
  e = jax.explain(f)(jnp.ones(5))
  check_table(e, f, jnp.ones(5))
  assert [r['kernel'] for r in e.rows if r['primitive'] == 'scan'] == [STEP + 'scan']
  assert e.steps == [STEP + 'scan'] and "host steps: scan" in str(e)

def test_folded_equations_are_marked():
  f = lambda x: (x * 1.0 + jnp.zeros(3)).sum()     # x * 1 is an exact identity: simplify removes it
  e = jax.explain(f)(jnp.ones(3))
  check_table(e, f, jnp.ones(3))
  assert next(r for r in e.rows if r['primitive'] == 'mul')['kernel'] == FOLDED

def test_lowered_explain_and_abstract_arguments():
  e = jax.jit(mlp).lower(X, W, B).explain()
  assert [r['primitive'] for r in e.rows][-1] == 'reduce_sum' and len(e.kernels) == 1
  spec = [jnp.ShapeDtypeStruct(a.shape, a.dtype) for a in (X, W, B)]
  e = jax.jit(mlp).lower(*spec).explain()             # timed on zeros
  assert e.kernels[0]['time_us'] is not None and e.rows[0]['line'] == line_of(mlp, "jnp.tanh")

def test_jit_kwargs_and_static_arguments():
  def f(x, n): return jnp.sum(x ** n)
  e = jax.explain(f, static_argnums=1)(X, 3)
  assert [r['primitive'] for r in e.rows][-1] == 'reduce_sum'
  assert 'explain jit(f)' in str(e)

def test_recording_is_off_outside_explain_and_the_results_are_unchanged():
  assert uop.watcher is None
  jax.explain(mlp)(X, W, B)
  assert uop.watcher is None
  want = np.tanh(np.asarray(X) @ np.asarray(W) + np.asarray(B)).sum()
  np.testing.assert_allclose(np.asarray(jax.jit(mlp)(X, W, B)), want, rtol=1e-5)
  with provenance.record():
    y = jnp.sin(X) * 3.25
  assert provenance.site_of(y.uop).line == line_of(test_recording_is_off_outside_explain_and_the_results_are_unchanged,
                                                   "jnp.sin(X) * 3.25")
  assert uop.watcher is None
