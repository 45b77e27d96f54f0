"""Coverage of the autodiff rule tables: every array-level op has a vjp and a jvp rule, but for an explicit
allow-list, and the rules are closed (what a rule emits has rules itself), so transforms compose."""
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops, GroupOp, toposort
from tinyjx.transforms import ad, batching
from tinyjx.numpy import fft as fft_module

# Array-level ops: everything but the kernel-level ops of the lowering.
ARRAY_LEVEL = set(Ops) - GroupOp.Kernel

# Ops without autodiff rules yet, each with the reason. Remove an entry when its rules land.
NOT_YET: dict = {
  Ops.LU: "made only by lax.linalg._lu, a custom_jvp function: its rule differentiates the factors (an LU node is "
          "never differentiated itself, as JAX's lu primitive has its own jvp rule)",
}

@pytest.mark.parametrize("table_name", ["vjp_rules", "jvp_rules"])
def test_ops_missing_a_rule_are_exactly_the_allow_list(table_name):
  table = getattr(ad, table_name)
  missing = {op for op in ARRAY_LEVEL if op not in table}
  assert missing == set(NOT_YET), (
    f"ops without an entry in ad.{table_name}: {sorted(o.name for o in missing)}; allow-listed: "
    f"{sorted(o.name for o in NOT_YET)}. Add the rule, or update NOT_YET (with the reason) in this test")

def test_tables_hold_only_array_level_ops():
  for table in (ad.vjp_rules, ad.jvp_rules):
    assert set(table) <= ARRAY_LEVEL

# ---------------------------------------------------------------- closure: rules emit only ruled ops

def ops_in(outs) -> set:
  """Every op in the graphs of `outs`, looking inside the sub-jaxprs of multi-output nodes."""
  found = set()
  for n in toposort(list(outs)):
    found.add(n.op)
    if n.op in GroupOp.MultiOutput:
      for j in getattr(n.arg, 'jaxprs', ()): found |= ops_in(j.outs)
  return found

def a(*shape, lo=-1.0, hi=1.0, seed=0):
  return jnp.asarray(np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32))

def raw(op, *xs, arg=None):
  return Array(UOp(op, xs[0].dtype if op is not Ops.WHERE else xs[1].dtype, tuple(x.uop for x in xs), arg))

IDX = jnp.array([0, 2, 2, 5], dtype=jnp.int32)
SAMPLES = {   # name: (function, args), together using every op that has rules
  'triangular_solve': (lambda l, b: lax.linalg.lower_solve_node(l, b, False) + lax.linalg.lower_solve_node(l, b, True),
                       (np.tril(a(4, 4, lo=0.1)) + 3 * np.eye(4, dtype=np.float32), a(4, 2, seed=1))),
  'fft': (lambda x: jnp.real(fft_module.fft_node(x.astype(jnp.complex64), -1, False)
                             * fft_module.fft_node(x.astype(jnp.complex64), -2, True, 0.25)), (a(4, 8),)),
  'unary': (lambda x: sum(raw(op, x) for op in ad.UNARY_DERIVATIVES), (a(3, lo=0.2, hi=0.8),)),
  'binary': (lambda x, y: sum(raw(op, x, y) for op in ad.BINARY_DERIVATIVES), (a(3, lo=0.5), a(3, lo=0.5, seed=1))),
  'nondiff': (lambda x: sum(raw(op, x) for op in (Ops.SIGN, Ops.FLOOR, Ops.CEIL, Ops.ROUND, Ops.TRUNC)) * x
              + jnp.where(x > 0, x, -x) + (x.astype(jnp.int32) * 2).astype(jnp.float32) + x.astype(jnp.float16),
              (a(3),)),
  'reduce': (lambda x: sum(Array(x.uop.reduce(op, (0,))) for op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN)), (a(3, 2),)),
  'cumulative': (lambda x: sum(raw(Ops.CUMULATIVE, x, arg=(op, 0, r)) for op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN)
                               for r in (False, True)), (a(5),)),
  'movement': (lambda x: jnp.flip(jnp.pad(x.T.reshape(6, 1), ((1, 2), (0, 0)))[1:4], 0)
               * jnp.broadcast_to(x[:1, :1], (3, 1)), (a(2, 3),)),
  'dot_gather_scatter': (lambda x, y: jnp.sum(x @ y) + raw(Ops.GATHER, x, IDX[:2]).sum()
                         + sum(Array(UOp(Ops.SCATTER, x.dtype, (x.uop, IDX.uop, y.T.uop), m)).sum()
                               for m in ('add', 'set', 'mul', 'min', 'max')), (a(6, 4), a(4, 4, seed=2))),
  'argsort_iota': (lambda x: jnp.sort(x) * jnp.arange(4.0), (a(4),)),
  'stop_gradient': (lambda x: lax.stop_gradient(x) * x, (a(3),)),
  'collectives': (lambda x: collectives_sample(x), (a(2, 3),)),
  'complex': (lambda x, y: complex_sample(x, y), (a(3), a(3, seed=1))),
}

def complex_sample(x, y):
  """COMPLEX, REAL and IMAG, and complex values through holomorphic ops, back to a real output."""
  z = lax.complex(x, y)
  w = jnp.exp(z) * z / (z + 2.0) + jnp.sqrt(z + 3.0) + jnp.log(z + 3.0) + jnp.sin(z) * jnp.cos(z)
  return lax.real(w) + lax.imag(w) * x

def collectives_sample(x):
  """Every collective, traced with axis 'i' (of size 2) bound as pmap binds it, so the ops stay in the graph."""
  with batching.axis_frame('i', 2):
    y = lax.psum(x, 'i') + lax.pmax(x, 'i') * lax.pmin(x, 'i') + lax.ppermute(x, 'i', [(0, 1)])
    y = y + lax.all_gather(x, 'i', tiled=True)[1:3] + lax.psum_scatter(x, 'i', tiled=True)
    return y * lax.all_to_all(x, 'i', 0, 0, tiled=True) + lax.axis_index('i').astype(x.dtype)

def custom_samples():
  @tinyjx.custom_vjp
  def cv(x): return jnp.sin(x)
  cv.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))
  @tinyjx.custom_jvp
  def cj(x): return jnp.exp(x)
  cj.defjvps(lambda t, ans, x: t * ans)
  ck = tinyjx.checkpoint(lambda x: jnp.tanh(x) * 2)
  return {'custom_vjp': (cv, (a(3),)), 'custom_jvp': (cj, (a(3),)), 'checkpoint': (ck, (a(3),))}

def derivative_jaxprs(f, args):
  """Jaxprs of the second-order derivatives of `f` in both modes: every rule fires, and so do the rules of
  what the first-order rules emitted."""
  nums = tuple(range(len(args)))
  s = lambda *xs: jnp.sum(f(*xs))
  g = tinyjx.grad(s, argnums=nums)
  outs = [tinyjx.make_jaxpr(tinyjx.grad(lambda *xs: sum(jnp.sum(gi) for gi in g(*xs)), argnums=nums))(*args)]
  if not f.__class__.__name__ == 'custom_vjp':   # forward mode of custom_vjp is an error, as in JAX
    outs.append(tinyjx.make_jaxpr(lambda *xs: tinyjx.jvp(g, xs, xs)[1])(*args))
  return outs

@pytest.mark.parametrize("name", sorted(SAMPLES) + ['custom_vjp', 'custom_jvp', 'checkpoint'])
def test_rules_emit_only_ops_with_rules(name):
  f, args = {**SAMPLES, **custom_samples()}[name]
  ruled = set(ad.vjp_rules) & set(ad.jvp_rules)
  for jaxpr in derivative_jaxprs(f, args):
    emitted = ops_in(jaxpr.outs)
    assert emitted <= ruled, f"{name}: derivative graphs use ops without autodiff rules: {emitted - ruled}"
    unbatched = emitted - set(batching.batch_rules) - GroupOp.Leaf
    assert unbatched <= BATCH_NOT_YET, f"{name}: derivative graphs use ops without batch rules: {unbatched}"

# Ops that autodiff rules emit but vmap cannot batch yet (tinyjx/transforms/batching.py owns the rules).
BATCH_NOT_YET = {Ops.CUSTOM_VJP, Ops.CUSTOM_JVP, Ops.CHECKPOINT} - set(batching.batch_rules)

def test_samples_exercise_every_op_with_a_derivative():
  used = set()
  for f, args in list(SAMPLES.values()) + list(custom_samples().values()):
    used |= ops_in(tinyjx.make_jaxpr(f)(*args).outs)   # the derivative graphs differentiate these
  # leaves, TAG (removed from results) and ops whose derivative is zero by definition need no sample
  trivial = GroupOp.Leaf | GroupOp.NonDifferentiable | {Ops.TAG, Ops.PARAM, Ops.BUFFER}
  trivial |= {Ops.COND, Ops.WHILE, Ops.SCAN}   # control flow: tinyjx/transforms/control_flow.py and its tests own these
  with_derivative = (set(ad.vjp_rules) & set(ad.jvp_rules)) - trivial
  assert with_derivative - used == set(), f"no sample differentiates {sorted(o.name for o in with_derivative - used)}"
