"""The lowering passes one by one: index algebra, simplify, decompose, schedule, memory planning, rendering."""
import re
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import dtypes, lower
from tinyjx.lower import symbolic as sym, memory, optimize
from tinyjx.lower.index import unflatten, flat_index
from tinyjx.lower.simplify import pm_simplify, pm_decompose, fold_permutes
from tinyjx.lower.schedule import schedule, KernelItem
from tinyjx.rewrite import graph_rewrite
from tinyjx.uop import UOp, Ops, toposort
from conftest import examples

F32, F16, I32 = dtypes.float32, dtypes.float16, dtypes.int32
P = lambda shape, dt=F32, slot=0: UOp(Ops.PARAM, dt, (), (slot, shape, 0))

# --- index algebra ---
def test_split_then_merge_of_an_axis_is_free():
  i = sym.loop_var(0, 60)
  assert sym.add(sym.mul(sym.floordiv(i, 5), 5), sym.mod(i, 5)) is i
  a, b = sym.loop_var(1, 12), sym.loop_var(2, 5)
  assert unflatten(flat_index((a, b), (12, 5)), (12, 5)) == (a, b)
  assert sym.pretty(unflatten(flat_index((a, b), (12, 5)), (60,))[0]) == "((i1*5)+i2)"

@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(2, 5), min_size=2, max_size=4), st.integers(0, 10 ** 6), st.integers(-1, 3))
def test_an_axis_split_in_several_and_merged_back_is_the_plain_index(factors, seed, drop):
  """An axis split into several parts (a 3 x 3 kernel's flattened taps: i % 3, (i / 3) % 3, i / 9) and merged back,
  its terms added in any order, is the plain index (a weight gradient's panel packing divided per element before);
  with one term left out (`drop`) what remains still evaluates as the arithmetic written."""
  i = sym.loop_var(0, int(np.prod(factors)) * 3)
  terms, stride = [], 1
  for f in factors:
    terms.append(sym.mul(sym.mod(sym.floordiv(i, stride), f), stride))
    stride *= f
  terms.append(sym.mul(sym.floordiv(i, stride), stride))
  order = np.random.default_rng(seed).permutation(len(terms))
  kept = [terms[k] for k in order if k != drop]
  got = sym.add(*kept)
  if drop < 0: assert got is i, sym.pretty(got)
  for v in range(i.arg[1]):
    want = sum(_eval(t, {i: v}) for t in kept)
    assert _eval(got, {i: v}) == want, (sym.pretty(got), v)

def test_padding_offsets_simplify_through_reshapes():
  r, c = sym.loop_var(0, 2), sym.loop_var(1, 17)
  src = unflatten(flat_index((sym.add(r, sym.const(1)), sym.add(c, sym.const(3))), (4, 25)), (4, 5, 5))
  assert [sym.pretty(x) for x in src] == ["(i0+1)", "((i1+3)/5)", "((i1+3)%5)"]

@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.integers(0, 10 ** 6))
def test_reshape_index_arithmetic_matches_numpy(shape, seed):
  size = int(np.prod(shape))
  divisors = [d for d in range(1, size + 1) if size % d == 0]
  target = (divisors[seed % len(divisors)], size // divisors[seed % len(divisors)])
  vars_ = [sym.loop_var(k, s) for k, s in enumerate(target)]
  exprs = unflatten(flat_index(vars_, target), shape)
  rng = np.random.default_rng(seed)
  point = tuple(int(rng.integers(0, s)) for s in target)
  got = tuple(_eval(e, dict(zip(vars_, point))) for e in exprs)
  assert got == tuple(int(v) for v in np.unravel_index(np.ravel_multi_index(point, target), shape))

def _eval(e, env):
  if e.op is Ops.CONST: return e.arg[0]
  if e.op is Ops.RANGE: return env[e]
  a, b = (_eval(s, env) for s in e.src)
  ops = {Ops.ADD: lambda: a + b, Ops.MUL: lambda: a * b, Ops.DIV: lambda: a // b, Ops.REM: lambda: a % b}
  return ops[e.op]()

def _c_eval(e, env):
  """Index arithmetic evaluated as C does it (division truncates toward zero)."""
  if e.op is Ops.CONST: return e.arg[0]
  if e.op in (Ops.RANGE, Ops.SPECIAL): return env[e]
  a, b = (_c_eval(s, env) for s in e.src)
  if e.op is Ops.DIV: return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
  if e.op is Ops.REM: return a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1))
  return {Ops.ADD: a + b, Ops.MUL: a * b}[e.op]

@settings(max_examples=examples(200), deadline=None)
@given(st.integers(2, 40), st.integers(1, 6), st.integers(1, 7), st.integers(0, 9), st.integers(1, 9),
       st.integers(1, 9), st.integers(0, 40), st.integers(0, 40), st.booleans())
def test_an_index_simplified_given_its_mask_agrees_where_the_mask_holds(n, m, a, c, d, e, lo, hi, both):
  """sym.given: a masked load's index rebuilt for the narrower range its mask allows equals the index it
  replaces at every point the mask lets through (and concatenations' divisions fold away)."""
  i, j = sym.loop_var(0, n), sym.loop_var(1, m)
  x = sym.add(sym.mul(sym.mod(sym.floordiv(sym.add(sym.mul(i, a), j, sym.const(c)), d), e), 7), sym.floordiv(i, d))
  valid = sym.ge(i, lo) if not both else sym.and_(sym.ge(i, lo), sym.lt(sym.add(i, sym.const(1)), hi))
  y = sym.given(x, valid)
  for pi in range(n):
    for pj in range(m):
      if pi >= lo and (not both or pi + 1 < hi):
        env = {i: pi, j: pj}
        assert _c_eval(y, env) == _c_eval(x, env), (sym.pretty(x), sym.pretty(y), pi, pj)

def test_a_concatenation_reads_at_affine_indices():
  """The second half of a concatenation along an axis of 2 x 16 reads x[(i - 16) % 16 ...] under i >= 16:
  given the mask, the remainder and the quotient fold away."""
  i, r = sym.loop_var(0, 32), sym.loop_var(1, 8)
  shifted = sym.add(i, sym.const(-16))
  idx = sym.add(sym.mul(sym.mod(shifted, 16), 8), sym.mul(sym.floordiv(shifted, 16), 999), r)
  assert sym.pretty(sym.given(idx, sym.ge(i, 16))) == sym.pretty(sym.add(sym.mul(i, 8), r, sym.const(-128)))
  assert sym.given(idx, sym.TRUE) is idx

def test_a_reversed_axis_under_its_mask_reads_at_affine_indices():
  """rfft's `flip(z[..., 1:])` over the interleaved parts: 512 i + 512 - j split into a row and a column of 512,
  under 1 <= j <= 511, is row i, column 512 - j. The negative coefficient is kept, not reduced to 511 j modulo 512,
  so `given` folds it (before, the kernel divided and took remainders at every element: 1.4 ms of an rfft2 of
  1024 x 1024 whose transforms take 0.5)."""
  i, j = sym.loop_var(0, 1024), sym.loop_var(1, 513)
  flat = sym.add(sym.mul(i, 512), sym.const(512), sym.mul(j, -1))
  idx = sym.add(sym.mul(sym.mod(sym.floordiv(flat, 512), 1024), 1024), sym.mul(sym.mod(flat, 512), 2))
  valid = sym.and_(sym.ge(sym.add(j, sym.const(-1)), 0), sym.lt(sym.add(j, sym.const(-1)), 511))
  assert sym.pretty(sym.given(idx, valid)) == sym.pretty(sym.add(sym.mul(i, 1024), sym.mul(j, -2), sym.const(1024)))

@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 30), st.integers(1, 9), st.integers(-9, 9), st.integers(-9, 9), st.integers(-20, 60),
       st.integers(1, 16), st.integers(0, 30), st.integers(0, 30))
def test_division_and_remainder_with_signed_coefficients_match_c(n, m, a, b, c, d, lo, hi):
  """`floordiv` and `mod` of a x + b y + c (either sign) are C's `/` and `%` of it at every point, and so are their
  forms `given` a mask lo <= x < hi, wherever it holds."""
  i, j = sym.loop_var(0, n), sym.loop_var(1, m)
  x = sym.add(sym.mul(i, a), sym.mul(j, b), sym.const(c))
  valid = sym.and_(sym.ge(i, lo), sym.lt(i, hi))
  for op, e in ((Ops.DIV, sym.floordiv(x, d)), (Ops.REM, sym.mod(x, d))):
    raw = UOp(op, sym.IDX, (x, sym.const(d)))
    masked = sym.given(e, valid)
    for pi in range(n):
      for pj in range(m):
        env = {i: pi, j: pj}
        assert _c_eval(e, env) == _c_eval(raw, env), (sym.pretty(e), pi, pj)
        if lo <= pi < hi: assert _c_eval(masked, env) == _c_eval(raw, env), (sym.pretty(masked), pi, pj)

def test_bounds_decide_comparisons():
  i = sym.loop_var(0, 4)
  assert sym.lt(i, 4) is sym.TRUE and sym.is_const(sym.ge(i, 4)) and sym.lt(i, 3).op is Ops.CMPLT
  assert sym.clamp(sym.add(i, sym.const(1)), 10) == sym.add(i, sym.const(1))

# --- simplify and decompose ---
def rewrite(x, pm): return graph_rewrite(x, pm)

def test_simplify_keeps_every_bit():
  x = P((3,))
  assert rewrite(UOp(Ops.MUL, F32, (x, UOp.const(1.0, F32, (3,)))), pm_simplify) is x
  assert rewrite(UOp(Ops.ADD, F32, (x, UOp.const(-0.0, F32, (3,)))), pm_simplify) is x
  keep = UOp(Ops.ADD, F32, (x, UOp.const(0.0, F32, (3,))))      # -0.0 + 0.0 is +0.0: not an identity
  assert rewrite(keep, pm_simplify) is keep
  xi = P((3,), I32)
  assert rewrite(xi.cast(dtypes.int64).cast(F32), pm_simplify) is xi.cast(F32)         # lossless first cast
  lossy = x.cast(F16).cast(F32)
  assert rewrite(lossy, pm_simplify) is lossy
  folded = rewrite(UOp(Ops.MUL, F32, (UOp.const(3.0, F32, (2,)), UOp.const(0.5, F32, (2,)))), pm_simplify)
  assert folded.op is Ops.CONST and folded.arg == (1.5, (2,))
  assert rewrite(UOp(Ops.STOP_GRADIENT, F32, (UOp(Ops.TAG, F32, (x,), 5),)), pm_simplify) is x

def test_decompose_turns_dot_general_into_a_sum_of_products():
  a, b = P((4, 5)), P((5, 6), slot=1)
  d = rewrite(UOp(Ops.DOT_GENERAL, F32, (a, b), (((1,), (0,)), ((), ()))), pm_decompose)
  assert d.op is Ops.REDUCE and d.arg == (Ops.ADD, (2,)) and d.src[0].op is Ops.MUL and d.shape == (4, 6)

def test_decompose_computes_float16_in_float32_and_accumulates_sums_there():
  x = P((8,), F16)
  y = rewrite(UOp(Ops.ADD, F16, (x, x)).reduce(Ops.ADD, (0,)), pm_decompose)
  ops = [n.op for n in toposort([y])]
  assert y.op is Ops.CAST and y.dtype is F16
  assert all(n.dtype is F32 for n in toposort([y]) if n.op in (Ops.ADD, Ops.REDUCE))
  assert ops.count(Ops.CAST) >= 3

def test_a_reduction_read_transposed_is_computed_transposed():
  x = P((4, 5, 6))
  r = x.reduce(Ops.ADD, (1,)).permute((1, 0))
  (out,) = fold_permutes([r])
  assert out.op is Ops.REDUCE and out.shape == (6, 4) and out.src[0].op is Ops.PERMUTE

# --- schedule ---
def test_schedule_materializes_outputs_sort_inputs_and_shared_reductions():
  x = P((10, 10))
  s = x.reduce(Ops.ADD, (1,))
  a = UOp(Ops.ARGSORT, I32, (UOp(Ops.EXP, F32, (s,)),), (0, False))
  y = UOp(Ops.DIV, F32, (x, s.reshape((10, 1)).expand((10, 10))))
  items = schedule([a, y])
  outs = [it.outs[0] for it in items]
  assert all(isinstance(it, KernelItem) for it in items)
  assert s in outs and a in outs and y in outs and outs.index(s) < outs.index(a)
  assert sum(1 for o in outs if o.op is Ops.EXP) == 1      # the sort reads a buffer

def test_schedule_fuses_a_private_reduction_into_its_consumer():
  x = P((10, 10))
  y = UOp(Ops.DIV, F32, (x, x.reduce(Ops.MAX, (1,)).reshape((10, 1)).expand((10, 10))))
  assert [it.outs for it in schedule([y])] == [[y]]

# --- memory ---
@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7),
                          st.one_of(st.integers(1, 300), st.integers(60000, 70000))), min_size=1, max_size=12))
def test_buffers_live_at_the_same_time_never_overlap(spans):
  spans = [(min(a, b), max(a, b), n) for a, b, n in spans]
  steps = [(set(), set()) for _ in range(8)]
  for slot, (first, last, _) in enumerate(spans):
    steps[first][1].add(slot)
    steps[last][0].add(slot)
  offsets, total = memory.plan(steps, {s: n for s, (_, _, n) in enumerate(spans)})
  for s, (f1, l1, n1) in enumerate(spans):
    assert offsets[s] % (memory.PAGE if n1 >= memory.PAGE_FROM else memory.ALIGN) == 0 and offsets[s] + n1 <= total
    for t, (f2, l2, n2) in enumerate(spans[:s]):
      if f1 <= l2 and f2 <= l1:
        assert offsets[s] + n1 <= offsets[t] or offsets[t] + n2 <= offsets[s]

def test_memory_reuses_dead_buffers():
  steps = [(set(), {0}), ({0}, {1}), ({1}, {2}), ({2}, {3})]
  offsets, total = memory.plan(steps, {0: 1000, 1: 1000, 2: 1000, 3: 1000})
  assert total <= 2 * memory._round(1000) and offsets[0] == offsets[2]

# --- the pipeline ---
def test_the_pipeline_is_an_ordered_list_of_named_passes():
  names = [name for name, _ in lower.PASSES]
  assert names[:4] == ['simplify', 'split_complex', 'decompose', 'schedule+index']
  assert names[-2:] == ['render', 'compile']
  assert [n for n, _ in lower.passes('as_matmul', 'estimate')] == [
    'as_matmul', 'unroll_windows', 'merge_nests', 'split_guards', 'as_column_reduction', 'as_column_scan',
    'split_reductions', 'stash_shared', 'split_chains', 'tile_transposes',
    'block_sums', 'pipeline_rows', 'reduce_in_memory_order',
    'mark_parallel', 'stream_stores', 'defer_row_stores', 'block_transposes', 'spread_reductions', 'grid',
    'estimate']                                   # the sub-passes of optimize, each a named entry
  assert all(callable(fn) for _, fn in lower.PASSES)
  with pytest.raises(KeyError, match="no lowering pass 'optimize'"): lower.passes(last='optimize')

def test_the_same_program_renders_the_same_source(cpu):
  f = lambda x: jnp.tanh(x) @ x.T + x.sum()
  a = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(jnp.zeros((8, 8))))
  b = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(jnp.ones((8, 8))))
  assert a.source == b.source

def test_eager_programs_are_cached_by_structure_not_by_values(cpu):
  from tinyjx import counters
  x = jnp.asarray(np.arange(5, dtype=np.float32))
  before, launched = len(lower._eager), []
  with tinyjx.Context(TINYJX_EAGER_COMPILE_MS=1e-9):         # compile once the interpreter ran it at all
    for scale in (3.0, 4.5, 7.25):                            # scalars become inputs: one structure
      with counters.measure() as c: out = np.asarray(jnp.sin(x) * scale + 0.25)
      launched.append(c['kernels'])
  assert len(lower._eager) - before == 1
  assert launched == [0, 1, 1]                # interpreted the first time, compiled from the second time on
  np.testing.assert_allclose(out, np.sin(np.arange(5)) * 7.25 + 0.25, rtol=1e-6)

def test_eager_realization_runs_the_passes_of_the_one_list(cpu, monkeypatch):
  """Eager values are simplified by the `simplify` entry of PASSES (a slice of the list), not by a call of its own."""
  runs = []
  def simplify(st):
    runs.append([r.op for r in st.outs])
    return lower.do_simplify(st)
  monkeypatch.setattr(lower, 'PASSES', [('simplify', simplify)] + lower.PASSES[1:])
  x = jnp.asarray(np.arange(4, dtype=np.float32))
  with tinyjx.Context(TINYJX_DEVICE='CPU', TINYJX_EAGER_COMPILE_MS=50):
    out = np.asarray(jnp.cos(x) * 2.5 + 1.0)
  assert runs and runs[0] == [Ops.ADD]
  np.testing.assert_allclose(out, np.cos(np.arange(4)) * 2.5 + 1.0, rtol=1e-6, atol=1e-6)

def test_docstring_examples_run(cpu):
  import doctest, importlib
  names = ['symbolic', 'memory', 'schedule', 'index', 'optimize', 'optimize_gpu', 'render', 'runtime', 'steps']
  modules = [lower] + [importlib.import_module(f'tinyjx.devices.{n}') for n in ('cpu', 'diskcache', 'python')]
  for m in modules + [importlib.import_module(f'tinyjx.lower.{n}') for n in names]:
    assert doctest.testmod(m, optionflags=doctest.ELLIPSIS).failed == 0, m.__name__

def test_deep_graphs_lower_without_recursion(cpu):
  x = jnp.asarray(np.ones(4, np.float32))
  y = x
  for _ in range(400): y = jnp.tanh(y * 1.5 + 0.25)        # 1200 nodes deep
  with tinyjx.Context(TINYJX_EAGER_COMPILE_MS=0):
    got = np.asarray(y)
  want = np.ones(4, np.float32)
  for _ in range(400): want = np.tanh(want * np.float32(1.5) + np.float32(0.25))
  np.testing.assert_allclose(got, want, rtol=1e-5)

@pytest.mark.parametrize('m, k, n, how', [
  (96, 70, 130, 'both operands in cache, y small: y packed whole first, then blocks of rows (by_rows)'),
  (96, 300, 130, 'both operands in cache: x whole, y in panels'),
  (517, 10, 515, 'a contraction of 10 (y 20 KB): by rows, rows and columns past the last whole tile'),
  (3000, 300, 20, 'x too big for the cache: y whole, x in panels'),
  (200, 1500, 150, 'a long contraction in chunks'),
  (40, 30000, 20, 'few panels, long contraction: split into fixed groups'),
  (13, 9, 1000, 'below one block in each direction')])
def test_matmul_paths_match_numpy(cpu, m, k, n, how):
  """Every way the renderer packs and blocks a matmul gives numpy's result, in float32 and float64, with a
  fused epilogue and with a transposed operand. Its parallel work goes to whichever thread is free
  (`schedule(dynamic)`, MatmulEmitter.work_loop), and the bits are the same on one, two and three threads."""
  rng = np.random.default_rng(m + k + n)
  f = lambda a, b: jnp.tanh(a @ b.T / np.sqrt(k)) * 2.0
  for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-11)):
    a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((n, k)).astype(dt)
    with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
      got = np.asarray(tinyjx.jit(f)(a, b))
      for threads in (1, 2, 3):
        with tinyjx.Context(TINYJX_THREADS=threads): np.testing.assert_array_equal(tinyjx.jit(f)(a, b), got)
      source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(a, b)).source
    assert ('schedule(dynamic' in source) == ('tjx_mm' in source), how
    want = np.tanh(a.astype(np.float64) @ b.T.astype(np.float64) / np.sqrt(k)) * 2.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=how)

def test_split_contraction_does_not_depend_on_the_thread_count(cpu):
  a = np.random.default_rng(0).standard_normal((8, 40000)).astype(np.float32)
  b = np.random.default_rng(1).standard_normal((40000, 9)).astype(np.float32)
  outs = []
  for threads in (1, 2, 3):
    with tinyjx.Context(TINYJX_THREADS=threads, TINYJX_DEVICE='CPU'):
      outs.append(np.asarray(tinyjx.jit(lambda a, b: a @ b)(a, b)))
  assert all((o == outs[0]).all() for o in outs)

def _matmul_kernel(name: str, m: int, n: int, ks: tuple, dt=F32, slot: int = 0, xt: bool = False):
  """The kernel of `a @ b.T` for a of shape (m, *ks) and b of shape (n, *ks) (slots slot, slot + 1; out slot + 2),
  before optimize; with `xt`, a given transposed (shape (*ks, m), one contraction axis): x is then packed."""
  from tinyjx.lower.index import build_kernel
  a = P((*ks, m), dt, slot).permute((1, 0)) if xt else P((m, *ks), dt, slot)
  b = P((n, *ks), dt, slot + 1)
  full = (m, n, *ks)
  ab = UOp(Ops.MUL, dt, (a.reshape((m, 1, *ks)).expand(full), b.reshape((1, n, *ks)).expand(full)))
  out = ab.reduce(Ops.ADD, tuple(range(2, 2 + len(ks))))
  return build_kernel(name, [out], {a.src[0] if xt else a: slot, b: slot + 1, out: slot + 2})

def _optimized(kernel, **device):
  """`kernel` after the optimize passes of the pipeline (as_matmul through estimate), for a loop-nest device with
  the attributes `device`."""
  import types
  st = lower.Lowering(types.SimpleNamespace(kernel_shape='loops', **device), [], [], kernels=[kernel])
  for _, fn in lower.passes('as_matmul', 'estimate'): st = fn(st)
  return st.kernels[0]

def _planned(kernel, vector_bytes: int):
  """The kernel optimized for a device of SIMD width `vector_bytes`, and its Matmul statement."""
  from tinyjx.lower.index import Matmul
  k = _optimized(kernel, vector_bytes=vector_bytes)
  (mm,) = [s for s in k.body if isinstance(s, Matmul)]
  return k, mm

@pytest.mark.parametrize('vector_bytes', [32, 64])
def test_the_matmul_plan_is_chosen_in_optimize_and_carried_on_the_statement(vector_bytes):
  """Tiles follow the device's vector width (two vectors of columns; 12 rows with 32 vector registers, 6 with 16, so
  the accumulators, two loads of y and a broadcast of x stay in registers); which side is whole, the chunks and
  the split follow the shape and do not depend on the width: a contraction over 512 rows runs in chunks of about
  KC_MATMUL (512) rows where x is packed; a split one (few panels, many chunks), in chunks of KC_TARGET (256). An x
  read in place runs a contraction unchunked while a panel of y fits ROWS_PANEL (1 MiB: a panel of 32 columns of
  float32 over 8000 rows; over 16896 rows, panels of 16 or 32 columns are past it). (None of these x's rows alias
  in L1: see the wide tile's test.)"""
  F64 = dtypes.float64
  cases = [((96, 130, (70,), F32), dict(x_panels=False, chunked=False, chunk=70, chunks=1, split_groups=0)),
           ((3000, 20, (300,), F32), dict(x_panels=True, chunked=False, chunk=300, chunks=1, split_groups=0)),
           ((200, 150, (512,), F32), dict(x_panels=False, chunked=False, chunk=512, chunks=1, split_groups=0)),
           ((200, 150, (600,), F32, True), dict(x_panels=False, chunked=True, chunk=300, chunks=2, split_groups=0)),
           ((200, 150, (1500,), F32, True), dict(x_panels=False, chunked=True, chunk=500, chunks=3, split_groups=0)),
           ((200, 150, (600,), F32), dict(x_panels=False, chunked=False, chunk=600, chunks=1, x_rows=True)),
           ((200, 150, (10, 100), F64), dict(x_panels=False, chunked=False, chunk=10, chunks=1, x_rows=True)),
           ((40, 150, (8000,), F32), dict(x_panels=False, chunked=False, chunk=8000, chunks=1, x_rows=True)),
           ((40, 150, (16896,), F32), dict(x_panels=False, chunked=True, chunk=512, chunks=33, x_rows=True)),
           ((40, 20, (30000,), F32), dict(x_panels=False, chunked=True, chunk=255, chunks=118, split_groups=16))]
  for (m, n, ks, dt, *xt), want in cases:
    _, mm = _planned(_matmul_kernel("k0", m, n, ks, dt, xt=bool(xt)), vector_bytes)
    rows = 12 if vector_bytes >= 64 else 6
    assert (mm.plan.mr, mm.plan.nr, mm.plan.vector_bytes) == (rows, 2 * vector_bytes // dt.itemsize, vector_bytes)
    assert {f: getattr(mm.plan, f) for f in want} == want, (m, n, ks)

def test_a_matmul_runs_by_rows_for_several_outputs_or_a_small_y_given_two_blocks_of_rows():
  from tinyjx.lower.optimize import plan_matmul
  assert plan_matmul(512, 512, 10, F32, 10, 64).by_rows                  # y of 20 KB: tiles store whole rows
  assert not plan_matmul(512, 512, 512, F32, 512, 64).by_rows            # y of 1 MB, one output: y in panels
  assert plan_matmul(512, 512, 512, F32, 512, 64, stores=3).by_rows      # an Adam update's three outputs
  assert not plan_matmul(10, 512, 512, F32, 512, 64, stores=3).by_rows   # one block of rows: panels on every thread
  # the micro-kernel prefetches the next tile's epilogue operands where the epilogue loads and stores several arrays
  assert plan_matmul(512, 512, 512, F32, 512, 64, stores=3).prefetch
  assert not plan_matmul(512, 512, 512, F32, 512, 64, rows=True, stores=3).prefetch    # (x in place: no room for it)
  assert not plan_matmul(512, 512, 10, F32, 10, 64).prefetch

def test_gcc_on_x86_64_builds_without_a_red_zone(cpu, monkeypatch):
  """GCC 12 put a kernel's local accumulator array in a leaf function's red zone 8 bytes off the alignment one of
  its stores needed (a segmentation fault: jit(jnp.fft.ifft) of (4, 10) complex64 values on a Zen 4 EPYC); GCC on
  x86-64 builds with -mno-red-zone, other compilers and targets as they were. The program itself runs."""
  from tinyjx.devices import cpu as cpu_module
  for macros, want in ((['__GNUC__', '__x86_64__'], ['-mno-red-zone']), (['__GNUC__', '__clang__', '__x86_64__'], []),
                       (['__GNUC__', '__aarch64__'], [])):
    monkeypatch.setattr(cpu_module, 'compiler_facts', lambda cc, macros=macros: {'macros': macros})
    assert cpu_module.red_zone('cc') == want, macros
  monkeypatch.undo()
  x = (np.random.default_rng(0).standard_normal((4, 10)) + 1j).astype(np.complex64)
  with tinyjx.Context(TINYJX_DEVICE='CPU', TINYJX_EAGER_COMPILE_MS=0):
    got = np.asarray(tinyjx.jit(jnp.fft.ifft)(jnp.asarray(x))), np.asarray(jnp.fft.ifft(jnp.asarray(x)))
  for g in got: np.testing.assert_allclose(g, np.fft.ifft(x), rtol=1e-5, atol=1e-6)

def test_a_target_without_a_vector_width_gets_32_byte_tiles():
  (mm,) = _optimized(_matmul_kernel("k0", 96, 130, (70,))).body
  assert (mm.plan.mr, mm.plan.nr, mm.plan.vector_bytes) == (6, 16, 32)

def test_matmul_plans_of_both_vector_widths_compile_into_one_unit_and_match_numpy(cpu):
  """Each plan instantiates its own micro-kernel (once per translation unit, shared by kernels with the same
  tiles); every path (whole x, x in panels, chunks, a split contraction) gives numpy's result at both widths."""
  from tinyjx.lower.render import CRenderer
  F64 = dtypes.float64
  # the chunked ones run groups of panels: 19 or 10 panels of y (a group of 2 with a last group of 1, or groups of
  # 1), 117 panels of x (groups of 8, the last of 5), and tiles that divide the output (no padding guard at all)
  # (and x given transposed, so packed, for the plain micro-kernel: the last two)
  shapes = [(13, 1000, (9,), F32), (3000, 20, (300,), F32), (200, 150, (1500,), F32), (40, 20, (30000,), F64),
            (40, 300, (600,), F32), (700, 50, (1100,), F64), (48, 256, (520,), F32), (96, 130, (70,), F32, True),
            (200, 150, (1500,), F64, True)]
  kernels, cases = [], []
  for vb in (32, 64):
    for m, n, ks, dt, *xt in shapes:
      k, mm = _planned(_matmul_kernel(f"k{len(kernels)}", m, n, ks, dt, slot=3 * len(kernels), xt=bool(xt)), vb)
      kernels.append(k)
      cases.append((m, n, ks, dt, bool(xt), mm.plan))
  assert len({c[-1] for c in cases}) == len(cases)
  src = CRenderer().render(kernels, [list(range(len(kernels)))])
  for inst in ("(float, tjx_vf32_32, f32_6x16, 6, 16)", "(float, tjx_vf32_64, f32_12x32, 12, 32)",
               "(double, tjx_vf64_32, f64_6x8, 6, 8)", "(double, tjx_vf64_64, f64_12x16, 12, 16)"):
    assert src.count("TJX_MICRO_ROWS" + inst) == 1 and src.count("TJX_MICRO" + inst) == 1, inst
  assert "TJX_MR" not in src and "TJX_NR" not in src and "TJX_VBYTES" not in src
  rng, handles, wants = np.random.default_rng(7), {}, []
  for i, (m, n, ks, dt, xt, _) in enumerate(cases):
    a, b = rng.standard_normal((m, *ks)).astype(dt.np), rng.standard_normal((n, *ks)).astype(dt.np)
    handles.update({3 * i: a.T.copy() if xt else a, 3 * i + 1: b, 3 * i + 2: np.zeros((m, n), dt.np)})
    wants.append(a.reshape(m, -1).astype(np.float64) @ b.reshape(n, -1).T.astype(np.float64))
  program = cpu.load(cpu.compile(src), "tjx_run_0")
  cpu.launch(program, cpu.arguments(3 * len(cases), handles))
  for i, (m, n, ks, dt, _, plan) in enumerate(cases):
    tol = 1e-4 if dt is F32 else 1e-11
    np.testing.assert_allclose(handles[3 * i + 2], wants[i], rtol=tol, atol=tol * np.sqrt(np.prod(ks)), err_msg=plan)

def test_rows_of_x_that_would_evict_each_other_from_l1_take_a_wide_tile():
  """Twelve rows of x read in place, a multiple of 4 KiB apart, fall in one L1 set of eight ways, and each is read
  from L2 again: such an x takes tiles of 6 rows x 4 vectors (`wide_tile`). Elsewhere the tile stays 12 x 2
  vectors, which was the faster one where rows do not alias."""
  from tinyjx.lower.optimize import plan_matmul
  F64 = dtypes.float64
  def tile(m, n, k, dt=F32, vb=64, rows=True, cores=2):
    p = plan_matmul(m, n, k, dt, k, vb, rows=rows, row_stride=k * dt.itemsize, cores=cores)
    return p.mr, p.nr
  assert tile(1024, 1024, 1024) == tile(1024, 1024, 2048) == (6, 64)   # 4 and 8 KiB apart: twelve in one set
  assert tile(64, 100, 512, F64) == (6, 32)
  assert tile(1024, 1024, 1040) == (12, 32)            # 4160 bytes apart: twelve sets
  assert tile(512, 512, 512) == (12, 32)               # 2 KiB apart: six in each of two sets, which hold them
  assert tile(1024, 1024, 1024, vb=32) == (6, 16)      # 16 registers: six rows already
  assert tile(1024, 1024, 1024, rows=False) == (12, 32)    # x packed: its panels are contiguous
  # padding: 128 and 192 columns for 96 and 160 are too many; 256 for 200 (8/7) and 128 for 128 are not
  assert tile(1024, 96, 1024) == tile(1024, 160, 1024) == (12, 32)
  assert tile(1024, 200, 1024) == tile(1024, 128, 1024) == (6, 64)
  # turns of the panels on the cores: 3 wide panels take 2 turns of twice the work on two cores, 6 narrow ones 3
  assert tile(1024, 192, 1024) == tile(1024, 320, 1024) == tile(100, 63, 1024) == (12, 32)
  assert tile(1024, 192, 1024, cores=1) == tile(1024, 192, 1024, cores=4) == tile(1024, 640, 1024) == (6, 64)
  assert tile(1024, 256, 1024, cores=16) == (12, 32) and tile(1024, 1024, 1024, cores=16) == (6, 64)
  assert tile(1024, 63, 1024) == (6, 64)               # x streams (y whole): its blocks are the parallel work
  assert plan_matmul(300, 192, 1024, F32, 1024, 64, rows=True, row_stride=4096, stores=3, cores=2).mr == 6  # by rows
  # from a kernel: x's row stride is its index's step along the innermost row variable
  for ks, want in (((1024,), (6, 64)), ((32, 32), (6, 64)), ((1000,), (12, 32))):
    _, mm = _planned(_matmul_kernel("k0", 100, 100, ks), 64)
    assert mm.plan.x_rows and (mm.plan.mr, mm.plan.nr) == want, ks

def test_the_wide_tile_matches_numpy_at_every_edge(cpu):
  """Wide tiles (planned for 64-byte vectors, whatever this machine has) at the edges of 6 rows and 64 columns, in
  every plan an x read in place takes with them (whole contraction; y whole and x streaming; chunked), in float32 and
  float64, give numpy's results (one row of x is a matrix-vector product, not tiled); so does the device's own plan
  of a transposed y, a batch, and an optimizer-like epilogue that writes two outputs (by rows), on one, two and
  three threads alike."""
  from tinyjx.lower.render import CRenderer
  F64 = dtypes.float64
  shapes = [(7, 127, (1024,), F32), (31, 128, (1024,), F32), (33, 320, (1024,), F32), (6, 192, (1024,), F32),
            (255, 64, (1024,), F32), (257, 255, (1024,), F32), (1024, 40, (1024,), F32), (33, 127, (8192,), F32),
            (13, 100, (32, 32), F32), (7, 64, (512,), F64), (257, 95, (512,), F64), (257, 97, (512,), F64)]
  kernels, plans = [], []
  for i, (m, n, ks, dt) in enumerate(shapes):
    k, mm = _planned(_matmul_kernel(f"k{i}", m, n, ks, dt, slot=3 * i), 64)
    assert mm.plan.x_rows and mm.plan.mr == 6 and mm.plan.nr == 4 * 64 // dt.itemsize, (m, n, ks)
    kernels.append(k)
    plans.append(mm.plan)
  assert {p.x_panels for p in plans} == {True, False} and {p.chunked for p in plans} == {True, False}
  src = CRenderer().render(kernels, [list(range(len(kernels)))])
  assert "TJX_MICRO_ROWS(float, tjx_vf32_64, f32_6x64, 6, 64)" in src
  assert "TJX_MICRO_ROWS(double, tjx_vf64_64, f64_6x32, 6, 32)" in src
  rng, handles, wants = np.random.default_rng(8), {}, []
  for i, (m, n, ks, dt) in enumerate(shapes):
    a, b = rng.standard_normal((m, *ks)).astype(dt.np), rng.standard_normal((n, *ks)).astype(dt.np)
    handles.update({3 * i: a, 3 * i + 1: b, 3 * i + 2: np.zeros((m, n), dt.np)})
    wants.append(a.reshape(m, -1).astype(np.float64) @ b.reshape(n, -1).T.astype(np.float64))
  cpu.launch(cpu.load(cpu.compile(src), "tjx_run_0"), cpu.arguments(3 * len(shapes), handles))
  for i, (m, n, ks, dt) in enumerate(shapes):
    tol = 1e-4 if dt is F32 else 1e-11
    np.testing.assert_allclose(handles[3 * i + 2], wants[i], rtol=tol, atol=tol * np.sqrt(np.prod(ks)),
                               err_msg=plans[i])
  # jitted on this device: y transposed, a batch, two outputs of one contraction
  x, bt = rng.standard_normal((257, 1024)).astype(np.float32), rng.standard_normal((449, 1024)).astype(np.float32)
  bx, by = rng.standard_normal((3, 13, 1024)).astype(np.float32), rng.standard_normal((3, 1024, 128)).astype(np.float32)
  p = rng.standard_normal((257, 449)).astype(np.float32)
  f = lambda x, bt, bx, by, p: (x @ bt.T, bx @ by, p * 0.9 + x @ bt.T, p - 0.5 * (x @ bt.T))
  xy = x.astype(np.float64) @ bt.T.astype(np.float64)
  wants = [xy, np.einsum('bik,bkj->bij', bx.astype(np.float64), by.astype(np.float64)), p * 0.9 + xy, p - 0.5 * xy]
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = [np.asarray(o) for o in tinyjx.jit(f)(x, bt, bx, by, p)]
    for threads in (1, 3):
      with tinyjx.Context(TINYJX_THREADS=threads):
        for g, o in zip(got, tinyjx.jit(f)(x, bt, bx, by, p)): np.testing.assert_array_equal(o, g)
  for g, w in zip(got, wants): np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * 32)

def _avx512_plans(cpu, monkeypatch) -> None:
  """Plan for AVX-512's 64-byte vectors on any machine: a test whose asserts name the kernels that plan takes (12-row
  tiles, which paths a shape gets) checks the same source on an AVX2 machine too, where GCC runs those vectors as
  pairs of registers (the same values; the native width's plans are checked by every other test)."""
  monkeypatch.setattr(type(cpu), 'vector_bytes', property(lambda self: 64))

def test_a_tile_stored_column_by_column_is_transposed_in_vector_registers(cpu, monkeypatch):
  """`transpose_fn` for every tile a plan makes (12 x 32, 6 x 64, 10 and 8 rows of a direct plan; float64's 12 x 16,
  whose 12 rows span two vectors of 8 lanes; 32-byte vectors: 6 x 16 and 6 x 8) and for tiles one vector wide
  (12 x 16 float32, 12 x 8 float64), compiled whatever this machine has, gives
  numpy's transpose, each column padded to whole vectors; so does its `block_transpose_fn` between strided rows, with
  a row short; and a plan whose result is stored column by column (a turned thin result, a convolution's channels)
  calls it and matches numpy."""
  from tinyjx.lower.matmul import block_transpose_fn, transpose_fn
  from tinyjx.lower.prelude import C_PRELUDE, SET_THREADS
  shapes = [('f32', 64, 12, 32), ('f32', 64, 6, 64), ('f32', 64, 12, 16), ('f32', 64, 10, 32), ('f32', 64, 8, 32),
            ('f64', 64, 12, 16), ('f64', 64, 12, 8), ('f32', 32, 6, 16), ('f64', 32, 6, 8)]
  defs, calls = [], []
  for i, (sfx, vb, mr, nr) in enumerate(shapes):
    t, size = ('float', 4) if sfx == 'f32' else ('double', 8)
    vec, mask = f"tv{i}", f"tm{i}"
    lanes = vb // size
    defs += [f"typedef {t} {vec} __attribute__((vector_size({vb})));",
             f"typedef int{8 * size}_t {mask} __attribute__((vector_size({vb})));",
             block_transpose_fn(f"b{i}", t, vec, mask, lanes), transpose_fn(f"t{i}", f"b{i}", t, lanes, mr, nr)]
    calls += [f"void tjx_call_{i}(void **a) {{ tjx_tr_t{i}((const {t}*)a[0], ({t}*)a[1]); }}",
              f"void tjx_block_{i}(void **a) {{ tjx_trb_b{i}((const {t}*)a[0] + 1, {lanes + 5}, ({t}*)a[1] + 2, "
              f"{lanes + 3}, {lanes - 1}); }}"]
  lib = cpu.compile(C_PRELUDE + "\n".join(defs + calls) + "\n" + SET_THREADS)
  rng = np.random.default_rng(11)
  for i, (sfx, vb, mr, nr) in enumerate(shapes):
    dt = np.float32 if sfx == 'f32' else np.float64
    lanes = vb // np.dtype(dt).itemsize
    mrp = -(-mr // lanes) * lanes
    c, ct = rng.standard_normal((mr, nr)).astype(dt), np.full((nr, mrp), np.nan, dt)
    cpu.launch(cpu.load(lib, f"tjx_call_{i}"), cpu.arguments(2, {0: c, 1: ct}))
    np.testing.assert_array_equal(ct[:, :mr], c.T, err_msg=str(shapes[i]))
    np.testing.assert_array_equal(ct[:, mr:], 0, err_msg=str(shapes[i]))
    # one block between strided rows: the first lanes - 1 rows of src at column 1, into dst at column 2
    src, dst = rng.standard_normal((lanes, lanes + 5)).astype(dt), np.full((lanes, lanes + 3), np.nan, dt)
    cpu.launch(cpu.load(lib, f"tjx_block_{i}"), cpu.arguments(2, {0: src, 1: dst}))
    want = np.full_like(dst, np.nan)
    want[:, 2:lanes + 1], want[:, lanes + 1] = src[:lanes - 1, 1:lanes + 1].T, 0
    np.testing.assert_array_equal(dst, want, err_msg=str(shapes[i]))
  _avx512_plans(cpu, monkeypatch)
  rng = np.random.default_rng(12)
  x, w = rng.standard_normal((2, 3, 14, 14)).astype(np.float32), rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
  g, a = rng.standard_normal((512, 10)).astype(np.float32), rng.standard_normal((512, 300)).astype(np.float32)
  conv = lambda x, w: tinyjx.lax.conv_general_dilated(x, w, (1, 1), 'VALID')
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    for f, args in ((conv, (x, w)), (lambda a, g: a.T @ g, (a, g))):
      assert 'tjx_tr_f' in cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args)).source
    got_conv, got_grad = np.asarray(tinyjx.jit(conv)(x, w)), np.asarray(tinyjx.jit(lambda a, g: a.T @ g)(a, g))
  want = np.zeros((2, 16, 12, 12))
  for i in range(3):
    for j in range(3): want += np.einsum('nchw,oc->nohw', x[:, :, i:i + 12, j:j + 12].astype(np.float64), w[:, :, i, j])
  np.testing.assert_allclose(got_conv, want, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(got_grad, a.T.astype(np.float64) @ g, rtol=1e-4, atol=1e-3)

def test_max_and_min_of_a_constant_over_an_empty_axis_is_the_identity(cpu):
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    assert tinyjx.jit(lambda x: jnp.all(x != 0))(jnp.zeros((0,))).item() is True
    assert tinyjx.jit(lambda x: jnp.any(x == 0))(jnp.zeros((0,))).item() is False
    assert tinyjx.jit(lambda x: jnp.max(x * 0, axis=1, initial=-2.0))(jnp.zeros((3, 0))).tolist() == [-2.0] * 3

@pytest.mark.parametrize('dt', ['float16', 'bfloat16'])
def test_a_jitted_half_precision_round_trip_rounds_at_every_length(cpu, dt):
  """float32 -> half -> float32 rounds, at every length about the vectors' (GCC 12 with AVX512-FP16 vectorized a
  4-element float16 round trip into a copy; devices/cpu.py `half_precision` turns those instructions off)."""
  rng = np.random.default_rng(2)
  def rounded(x):
    if dt == 'float16': return x.astype(np.float16).astype(np.float32)
    u = x.view(np.uint32)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    f = tinyjx.jit(lambda a: a.astype(getattr(jnp, dt)).astype(jnp.float32))
    for n in range(1, 34):
      x = rng.standard_normal(n).astype(np.float32)
      np.testing.assert_array_equal(np.asarray(f(x)), rounded(x), err_msg=f"{dt} length {n}")

def test_select_between_a_constant_and_a_load_over_short_rows(cpu):
  """GCC 12 gave the masked AVX loads of an if-converted loop the wrong masks (rows of 3 doubles): the renderer
  reads an arm's load as a temporary, so there is nothing to if-convert into one (render.py `uses`). Then rows of
  every length about the vectors' (8 and 16 lanes, 4 and 8 doubles; devices/cpu.py `vector_width`)."""
  b4 = jnp.asarray(np.array([[1.0, 1, 1], [0, 0, 0]]))
  with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
    f = tinyjx.jit(lambda b0, b4, b5: jnp.where(b4 == 1.0, 0.0, b0) + b5)
    got = f(np.full((2, 3), 2.0), np.array([[1.0, 1, 1], [0, 0, 0]]), np.array([[3.0, 3, 3], [0, 0, 0]]))
  assert np.asarray(got).tolist() == [[3.0] * 3, [2.0] * 3]
  a, b = np.array([[1.0, 2, 3], [4, 5, 6]]), np.array([[0.0, 2, 0], [4, 0, 0]])
  with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
    g = tinyjx.jit(lambda a, b, c, t: jnp.where(a == b, c * (1.0 / jnp.where(t == 0.0, 1.0, t)), 0.0))
    got = g(a, b, np.arange(6.0).reshape(2, 3), np.full((2, 3), 2.0))
  assert np.asarray(got).tolist() == [[0.0, 0.5, 0.0], [1.5, 0.0, 0.0]]
  rng = np.random.default_rng(5)
  for width in (1, 3, 5, 7, 9, 15, 17, 31, 33):
    for dt in (np.float32, np.float64):
      x, c = (rng.standard_normal((6, width)).astype(dt) for _ in range(2))
      b = (rng.random((6, width)) < 0.5).astype(dt)
      with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
        got = tinyjx.jit(lambda x, b, c: jnp.where(b == 1.0, 0.0, x) + jnp.where(b == 0.0, c, 1.0))(x, b, c)
      np.testing.assert_array_equal(np.asarray(got), np.where(b == 1.0, 0.0, x) + np.where(b == 0.0, c, 1.0))

def test_a_reduction_over_a_matmul_keeps_the_matmul_kernel():
  """`sum(tanh(a @ b))`: the contraction gets a buffer of its own (and so the tiled Matmul statement) instead of
  being fused into the outer sum as a plain loop nest (found in the docs: 10-45x slower)."""
  from tinyjx.lower.index import Matmul
  a = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
  exe = tinyjx.jit(lambda a, b: jnp.tanh(a @ b).sum()).lower(a, a).compile().executable
  assert len(exe.kernels) == 2
  assert any(isinstance(s, Matmul) for s in exe.kernels[0].body)
  an = np.asarray(a).astype(np.float64)
  np.testing.assert_allclose(float(tinyjx.jit(lambda a, b: jnp.tanh(a @ b).sum())(a, a)), np.tanh(an @ an).sum(),
                             rtol=1e-4)

REDUCING_OPERANDS = [  # f, its args' shapes, numpy's f, kernels
  (lambda q, k, v: tinyjx.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / 8.0, axis=-1) @ v, [(4, 96, 32)] * 3,
   lambda q, k, v: _np_softmax(q @ np.swapaxes(k, -1, -2) / 8.0) @ v, 3),
  (lambda x, w: (x * (1.0 / jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6))) @ w, [(200, 96), (96, 80)],
   lambda x, w: (x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)) @ w, 2),            # an RMS norm
  (lambda x, w: jnp.exp(x - x.max()) @ w, [(200, 96), (96, 80)], lambda x, w: np.exp(x - x.max()) @ w, 2),
]

def _np_softmax(s):
  e = np.exp(s - s.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

@pytest.mark.parametrize('case', range(len(REDUCING_OPERANDS)))
def test_a_contraction_operand_that_reduces_gets_a_kernel_of_its_own(case):
  """A contraction's operand that computes a reduction (attention's softmax, an RMS norm) is written by a kernel of
  its own, and the contraction stays a tiled Matmul: fused, the reduction ran again for every product (attention
  of 8 x 256 x 64: 85 ms, now 1.2). Values are numpy's."""
  from tinyjx.lower.optimize import is_matmul
  f, shapes, ref, kernels = REDUCING_OPERANDS[case]
  rng = np.random.default_rng(case)
  args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    exe = tinyjx.jit(f).lower(*args).compile().executable
    got = np.asarray(tinyjx.jit(f)(*args))
  assert len(exe.kernels) == kernels
  assert is_matmul(exe.kernels[-1])
  np.testing.assert_allclose(got, ref(*[a.astype(np.float64) for a in args]), rtol=2e-4, atol=2e-4)

@pytest.mark.parametrize('shape, axes, kernels', [((300, 200), (0,), 2), ((8, 40, 96), (0, 1), 2),
                                                   ((8, 40, 96), (1,), 2), ((300, 200), (1,), 1),
                                                   ((8, 40, 96), (0, 2), 1)])
def test_a_column_mean_spread_back_over_its_input_gets_a_kernel_of_its_own(shape, axes, kernels):
  """`x - x.mean(0)`: a reduction over axes that leave the last one, read by a kernel bigger than it, is a column
  reduction of its own (a row of sums) instead of a walk down each column to sum and again to store (30 -> 1.5 ms
  at 4096 x 1024); a reduction that includes the last axis stays fused (one walk along each row)."""
  x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
  f = lambda x: x - x.mean(axes, keepdims=True)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    exe = tinyjx.jit(f).lower(x).compile().executable
    got = np.asarray(tinyjx.jit(f)(x))
  assert len(exe.kernels) == kernels
  np.testing.assert_allclose(got, x - x.astype(np.float64).mean(axes, keepdims=True), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize('shape, axes, kernels', [((4096, 256), (0,), 2), ((8, 40, 96), (0, 1), 2),
                                                   ((300, 200), (1,), 1)])
def test_a_column_variance_is_a_mean_then_one_sum_of_squares_that_never_stores_the_differences(shape, axes, kernels):
  """`x.var(0)`: the mean is a column reduction of its own (the sum of squares walks x again, more elements than
  the mean has), and the differences are squared and summed in one more kernel, never stored: a sum of squares
  is no contraction (neither factor is broadcast), so nothing gives its factors a buffer. Along rows, one
  kernel. Results match numpy's."""
  x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
  f = lambda x: jnp.sqrt(((x - x.mean(axes, keepdims=True)) ** 2).mean(axes))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    exe = tinyjx.jit(f).lower(x).compile().executable
    got = np.asarray(tinyjx.jit(f)(x))
  assert len(exe.kernels) == kernels and exe.n_intermediates == kernels - 1
  np.testing.assert_allclose(got, x.astype(np.float64).std(axes), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize('n, k, kernels', [(256, 256, 2), (96, 64, 2), (33, 7, 1)])
def test_a_contraction_a_bigger_kernel_reads_gets_a_kernel_of_its_own(n, k, kernels):
  """A row of a forward substitution, `where(rows == i, (b[i] - l[i] @ x) / l[i, i], x)`: the contraction
  `l[i] @ x` is read by a kernel bigger than it, so it is computed by a kernel of its own (a column reduction
  along x's rows) and the select walks its rows, instead of one kernel in the contraction's order that stores x
  down its columns; one too small to be a matmul (schedule `_is_contraction`) stays fused. Results match numpy's."""
  rng = np.random.default_rng(n)
  l = np.tril(rng.standard_normal((n, n))).astype(np.float32) + n * np.eye(n, dtype=np.float32)
  b, x = rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
  rows = np.arange(n)
  def step(i, l, b, x):
    r = b[i] - jnp.einsum('j,jk->k', l[i], x)
    return jnp.where((jnp.arange(n) == i)[:, None], (r / l[i, i])[None, :], x)
  i = n // 3
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    exe = tinyjx.jit(step).lower(i, l, b, x).compile().executable
    got = np.asarray(tinyjx.jit(step)(i, l, b, x))
  assert len(exe.kernels) == kernels and exe.kernels[0].name.startswith('k0_reduce_sum') == (kernels == 2)
  want = np.where((rows == i)[:, None], (b[i] - l[i].astype(np.float64) @ x) / l[i, i], x)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

# --- the GPU kernel shape (optimize_gpu.py) ---
def test_a_work_group_combines_an_accumulator_once_after_its_last_loop():
  """Threads' parts meet in one tree after the last loop that adds to them: combined after each loop, the second
  tree would add every thread's copy of the first total."""
  from tinyjx.lower.index import Loop, Decl, Update, Store, Kernel, load
  from tinyjx.lower.optimize_gpu import as_grid, GroupReduce, walk
  x, out = UOp(Ops.DEFINE_GLOBAL, F32, (), 0), UOp(Ops.DEFINE_GLOBAL, F32, (), 1)
  acc = UOp(Ops.DEFINE_ACC, F32, (), (0, Ops.ADD))
  i, j, k = sym.loop_var(0, 4), sym.loop_var(1, 300), sym.loop_var(2, 200)
  halves = [Loop(v, [Update(acc, load(x, sym.add(sym.mul(i, 500), sym.add(v, sym.const(lo)))))], acc=acc, serial=True)
            for v, lo in ((j, 0), (k, 300))]
  kern = Kernel("k0", [Loop(i, [Decl(acc), *halves, Store(out, i, acc)])], [x, out], (1,), [])
  as_grid(kern)
  row = kern.body[0].body
  assert kern.groups and [type(s).__name__ for s in row] == ['Decl', 'Loop', 'Loop', 'GroupReduce', 'Store']
  assert sum(isinstance(s, GroupReduce) for s in walk(kern.body)) == 1

def test_packing_a_padded_panel_reads_nothing_past_the_last_row(cpu):
  """A panel's padding rows (past the operand's last row) are zeros: the guard comes before any read, also before
  a read the operand shares between its value and its mask (once read before the guard, past the buffer's end)."""
  import re
  def f(g, z, bias, a):   # a convolution's weight gradient: the ReLU mask reads z and the bias per channel c
    return jnp.einsum('nchw,nkhw->ck', jnp.where(z + bias[None, :, None, None] > 0, g, 0.0), a)
  rng = np.random.default_rng(0)
  g, z, a = (rng.standard_normal((8, 10, 12, 12)).astype(np.float32) for _ in range(3))
  bias = rng.standard_normal(10).astype(np.float32)
  jaxpr = tinyjx.make_jaxpr(f)(g, z, bias, a)
  src = lower.lower(cpu, jaxpr.params, jaxpr.outs).source
  rows = re.findall(r"const int64_t (i\d+|r) = bb \* \d+ \+ q;\n\s*(.*)", src)   # either packing order
  assert rows and all(nxt.startswith(f"if ({v} >= ") for v, nxt in rows), rows
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = np.asarray(tinyjx.jit(f)(g, z, bias, a))
  want = np.einsum('nchw,nkhw->ck', np.where(z + bias[None, :, None, None] > 0, g, 0), a)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)

def _on_cpu_and_python(cpu, f, x, w):
  """(the CPU's C source for f(x, w), its outputs jitted on the CPU, and on PYTHON)."""
  source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x, w)).source
  with tinyjx.Context(TINYJX_DEVICE='CPU'): got = [np.asarray(a) for a in tinyjx.jit(f)(x, w)]
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'): want = [np.asarray(a) for a in tinyjx.jit(f)(x, w)]
  return source, got, want

def _conv_grads(x, w, padding):
  """The convolution's value and the gradients of <conv(x, w), ct> for a fixed random ct, as one function."""
  from tinyjx import lax
  ct = np.random.default_rng(3).standard_normal(np.asarray(lax.conv(x, w, (1, 1), padding)).shape).astype(x.dtype)
  def f(x, w): return jnp.sum(lax.conv(x, w, (1, 1), padding) * ct)
  return lambda x, w: (lax.conv(x, w, (1, 1), padding), *tinyjx.grad(f, argnums=(0, 1))(x, w))

@pytest.mark.parametrize('n, c, o, hw, k, padding, how', [
  (1, 520, 1, (1, 15), (1, 9), 'VALID', '7 output positions, one output channel'),
  (1, 20, 7, (1, 39), (1, 9), 'VALID', '31 positions, 7 channels'),
  (1, 12, 17, (1, 41), (1, 9), 'VALID', '33 positions, 17 channels'),
  (3, 2, 33, (1, 93), (1, 9), 'VALID', '255 positions (3 x 85), 33 channels'),
  (1, 5, 16, (1, 265), (1, 9), 'SAME', '257 positions, padded: the padded input is a buffer'),
  (2, 6, 5, (12, 12), (3, 3), 'SAME', 'a padded 2-D convolution'),
  (128, 8, 16, (10, 10), (3, 3), 'VALID', 'weight gradient over a long contraction: chunked'),
  (64, 3, 5, (18, 18), (3, 3), 'VALID', 'weight gradient over 64 chunks of one image: chunked, split')])
def test_convolutions_read_their_windows_in_place_and_match_the_python_device(cpu, n, c, o, hw, k, padding, how):
  """A convolution's windows are x of a direct matmul (forward, input gradient and weight gradient): read in place
  through offset tables, never packed; a tile whose rows are consecutive in the output is stored a column at a time
  as one run (blocks within an image, blocks across two images and partial blocks here); tile edges in both
  directions, float32 and float64, against PYTHON."""
  rng = np.random.default_rng(n + c + o)
  for dt, tol in ((np.float32, 2e-5), (np.float64, 1e-12)):
    x, w = rng.standard_normal((n, c, *hw)).astype(dt), rng.standard_normal((o, c, *k)).astype(dt)
    with tinyjx.Context(JAX_ENABLE_X64=True):
      f = _conv_grads(x, w, padding)
      source, got, want = _on_cpu_and_python(cpu, f, x, w)
    assert 'tjx_mmd_f' in source and 'const int64_t io = ioff[0] + r' in source, how   # columns stored as runs
    assert ('for (int64_t cc = ' in source) == ('chunked' in how), how
    assert ('tg + (ib * NB + sb)' in source) == ('split' in how), how
    for g, v in zip(got, want):
      np.testing.assert_allclose(g, v, rtol=tol, atol=tol * np.abs(v).max(), err_msg=f"{how} {dt.__name__}")

def test_the_direct_plan_follows_the_window_and_the_cache():
  """A plain matmul operand reads each element once (no window); a convolution's windows reuse each input element
  once per tap and become x of a direct plan: y whole where it fits DIRECT_WHOLE, else chunked."""
  from tinyjx.lower import optimize
  a = sym.loop_var(0, 64)
  kk = sym.loop_var(1, 32)
  plain = UOp(Ops.LOAD, F32, (UOp(Ops.DEFINE_GLOBAL, F32, (), 0), sym.add(sym.mul(a, 32), kk)))
  assert optimize.window_reuse(plain, [a], [kk]) == 1
  p, t = sym.loop_var(2, 20), sym.loop_var(3, 5)                      # output position p, tap t: x[p + t]
  window = UOp(Ops.LOAD, F32, (UOp(Ops.DEFINE_GLOBAL, F32, (), 1), sym.add(p, t)))
  assert optimize.window_reuse(window, [p], [t]) == 100 / 24
  plan = optimize.plan_matmul(102400, 32, 800, F32, 32, 32, direct=True)
  assert (plan.direct, plan.chunked) == (True, False)
  plan = optimize.plan_matmul(800, 32, 102400, F32, 256, 32, direct=True)
  assert (plan.direct, plan.chunked, plan.chunk * 400) == (True, True, 400)
  assert plan.split_groups == optimize.SPLIT_GROUPS             # 2 panels of y, 256 chunks: split among groups
  plan = optimize.plan_matmul(800, 64, 102400, F32, 256, 32, direct=True)
  assert (plan.chunked, plan.split_groups) == (True, 0)          # 4 panels: packed in parallel, chunk by chunk
  plan = optimize.plan_matmul(800, 32, 12800, F32, 32, 32, direct=True)
  assert (plan.chunked, plan.split_groups) == (True, 0)          # 32 chunks: too few to split

@pytest.mark.parametrize('vector_bytes', [32, 64])
def test_a_direct_tile_takes_its_rows_from_the_runs_of_x(cpu, monkeypatch, vector_bytes):
  """With 64-byte vectors a direct plan takes 12 or else 10 rows a tile where 90% of its blocks lie in one run of
  consecutive elements of x (TJX_MICRO_DIRECT's one-pointer path), else 8 (a pointer per row, all in registers);
  with 32-byte vectors always 6. Forward (runs of 10: 10), input gradient (runs of 12: 12) and weight gradient
  (taps: 8) against
  PYTHON at either width (64-byte vectors compile on any host: GCC splits them where it has no AVX-512)."""
  from tinyjx.lower import optimize
  runs = [(147456, 24), (102400, 20), (800, 5), (25600, 10), (10 ** 6, 120), (30, 64), (96, 1)]
  assert [optimize._direct_rows(m, r) for m, r in runs] == [12, 10, 8, 10, 12, 12, 8]
  plan = optimize.plan_matmul(800, 32, 102400, F32, 256, vector_bytes, direct=True, run=5)
  assert plan.mr == (8 if vector_bytes == 64 else 6)
  monkeypatch.setattr(type(cpu), 'vector_bytes', property(lambda self: vector_bytes))
  rng = np.random.default_rng(11)
  for dt, tol in ((np.float32, 2e-5), (np.float64, 1e-12)):
    x, w = rng.standard_normal((3, 4, 14, 12)).astype(dt), rng.standard_normal((5, 4, 3, 3)).astype(dt)
    with tinyjx.Context(JAX_ENABLE_X64=True):
      f = _conv_grads(x, w, 'VALID')
      source, got, want = _on_cpu_and_python(cpu, f, x, w)
    rows = sorted({int(r) for r in re.findall(r'tjx_mmd_f(?:32|64)_(\d+)x\d+\(', source)})
    assert rows == ([8, 10, 12] if vector_bytes == 64 else [6]), rows
    for g, v in zip(got, want):
      np.testing.assert_allclose(g, v, rtol=tol, atol=tol * np.abs(v).max(), err_msg=f"{vector_bytes} {dt.__name__}")

def test_a_short_direct_contraction_puts_its_rows_in_the_lanes():
  """`lane_rows_tile`: a direct matmul of at most LANE_ROWS_K contraction rows whose runs of x are one to three whole
  vectors (four with 32 registers) takes tiles of one run by what is left of 12 (24) accumulators; else None."""
  f64 = dtypes.float64
  assert optimize.lane_rows_tile(147456, 32, 25, 24, F32, F32, 32) == (24, 4)     # mnist's first convolution
  assert optimize.lane_rows_tile(1000, 7, 27, 8, F32, F32, 32) == (8, 7)          # 12 columns, 7 channels
  assert optimize.lane_rows_tile(1024, 64, 9, 16, F32, F32, 32) == (16, 6)
  assert optimize.lane_rows_tile(1200, 64, 9, 12, f64, f64, 32) == (12, 4)
  assert optimize.lane_rows_tile(4096, 64, 9, 64, F32, F32, 64) == (64, 6)
  for args in ((147456, 32, 33, 24, F32, F32, 32),      # a longer contraction: the 6 x 16 direct tile
               (1000, 32, 25, 20, F32, F32, 32),         # runs of 20: no whole vectors
               (1000, 32, 25, 32, F32, F32, 32),         # four vectors need 16 accumulators and 4 more registers
               (1000, 32, 25, 24, F32, F32, 64),         # 24 is no whole number of 16-lane vectors
               (1000, 32, 25, 8, dtypes.float16, F32, 32)):
    assert optimize.lane_rows_tile(*args) is None, args

@pytest.mark.parametrize('vector_bytes', [32, 64])
@pytest.mark.parametrize('n, c, o, hw, k, padding, lanes', [
  (2, 1, 32, (28, 28), (5, 5), 'VALID', {32: ('f32',), 64: ('f64',)}),
  (3, 1, 7, (12, 12), (5, 5), 'VALID', {32: ('f32', 'f64'), 64: ('f64',)}),
  (7, 3, 33, (18, 18), (3, 3), 'VALID', {32: ('f32',), 64: ('f32', 'f64')}),
  (1, 2, 13, (12, 12), (4, 4), 'SAME', {32: ('f64',), 64: ()}),
  (8, 2, 9, (6, 10), (3, 3), 'VALID', {32: ('f32', 'f64'), 64: ('f64',)})])
def test_first_convolutions_with_their_rows_in_the_lanes_match_the_python_device(cpu, monkeypatch, vector_bytes, n,
                                                                                  c, o, hw, k, padding, lanes):
  """A convolution with a short contraction (one or a few input channels) whose output rows are whole vectors runs
  its forward pass with an output row in the lanes and the channels broadcast (`TJX_MICRO_LANES`): one to four
  vectors a row, channel counts that leave a partial tile (7, 33, 13, 9), a padded input, two input channels, both
  vector widths; its value and both gradients against PYTHON, float32 and float64, and unpadded, bit for bit what the
  direct tile (rows across a tile's columns) gives where the plan is turned off: the same products in the same order."""
  monkeypatch.setattr(type(cpu), 'vector_bytes', property(lambda self: vector_bytes))
  rng = np.random.default_rng(n * 100 + o)
  for dt, tol in ((np.float32, 2e-5), (np.float64, 1e-12)):
    x, w = rng.standard_normal((n, c, *hw)).astype(dt), rng.standard_normal((o, c, *k)).astype(dt)
    with tinyjx.Context(JAX_ENABLE_X64=True):
      f = _conv_grads(x, w, padding)
      source, got, want = _on_cpu_and_python(cpu, f, x, w)
      jaxpr = tinyjx.make_jaxpr(f)(x, w)
      monkeypatch.setattr(optimize, 'LANE_ROWS_K', 0)
      plain = cpu.compile_jaxpr(jaxpr)
      monkeypatch.setattr(optimize, 'LANE_ROWS_K', 32)
      lanes_exe = cpu.compile_jaxpr(jaxpr)
      dtype = dtypes.float32 if dt is np.float32 else dtypes.float64
      bufs = [cpu.from_numpy(a, dtype) for a in (x, w)]
      by_lanes, by_tiles = ([b.numpy() for b in exe.run(bufs)] for exe in (lanes_exe, plain))
    sfx = 'f32' if dt is np.float32 else 'f64'
    called = lambda src: re.search(rf'tjx_mml_{sfx}_\d+x\d+\(K, ', src) is not None
    assert called(source) == (sfx in lanes[vector_bytes]), (sfx, vector_bytes)
    assert not called(plain.source) and lanes_exe.source == source
    for g, v in zip(got, want):
      np.testing.assert_allclose(g, v, rtol=tol, atol=tol * np.abs(v).max(), err_msg=f"{vector_bytes} {sfx}")
    for a, b in zip(by_lanes, by_tiles):     # (padded, the tiles skip the padding's rows, summing in another order)
      if padding == 'VALID': np.testing.assert_array_equal(a, b)
      else: np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max())

@pytest.mark.parametrize('n, hw, split', [(128, 10, False), (64, 18, True)])
def test_a_chunked_direct_matmul_does_not_depend_on_the_thread_count(cpu, n, hw, split):
  """A weight gradient's chunks are added into each block's tiles in chunk order, whichever thread runs the block;
  split among groups, each group adds its chunks in order and the groups are added in order."""
  from tinyjx import lax
  rng = np.random.default_rng(5)
  x = rng.standard_normal((n, 8, hw, hw)).astype(np.float32)
  g = rng.standard_normal((n, 16, hw - 2, hw - 2)).astype(np.float32)
  w = np.zeros((16, 8, 3, 3), np.float32)
  f = tinyjx.jit(lambda x, w, g: tinyjx.grad(lambda w: jnp.sum(lax.conv(x, w, (1, 1), 'VALID') * g))(w))
  outs = []
  for threads in (1, 2, 3):
    with tinyjx.Context(TINYJX_THREADS=threads, TINYJX_DEVICE='CPU'): outs.append(np.asarray(f(x, w, g)))
  assert all((o == outs[0]).all() for o in outs)
  source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x, w, g)).source
  assert 'koff + k0' in source and ('tg + (ib * NB + sb)' in source) == split

@pytest.mark.parametrize('how, fn', [
  ('one-sided padding', lambda x, w: _lax().conv_general_dilated(x, w, (1, 1), ((3, 0), (0, 5)))),
  ('padding wider than the window: blocks of only padding',
   lambda x, w: _lax().conv_general_dilated(x, w, (1, 1), ((6, 6), (5, 7)))),
  ('strided, padded', lambda x, w: _lax().conv_general_dilated(x, w, (2, 3), ((2, 1), (1, 2)))),
  ('channels last', lambda x, w: _lax().conv_general_dilated(
    x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), (1, 1), ((2, 2), (1, 3)),
    dimension_numbers=('NHWC', 'HWIO', 'NHWC'))),
  ('windows of a flipped padded array', lambda x, w: _lax().conv(
    jnp.flip(jnp.pad(x, ((0, 0), (0, 0), (4, 1), (2, 3))), (2, 3)), w, (1, 1), 'VALID')),
  ('transposed (lhs dilation)', lambda x, w: _lax().conv_general_dilated(x, w, (1, 1), ((2, 2), (2, 2)),
                                                                       lhs_dilation=(2, 2)))])
def test_a_direct_matmul_skips_the_padding_of_its_windows(cpu, how, fn):
  """Windows over a zero-padded array (a padded convolution, every input gradient): each block of rows runs only the
  run of the contraction where one of its rows reads data, not padding (Matmul.skip); forward, input and weight
  gradients against PYTHON, float32 and float64."""
  rng = np.random.default_rng(len(how))
  for dt, tol in ((np.float32, 2e-5), (np.float64, 1e-12)):
    x, w = rng.standard_normal((3, 4, 13, 11)).astype(dt), rng.standard_normal((5, 4, 3, 3)).astype(dt)
    def f(x, w):
      out = fn(x, w)
      ct = jnp.cos(jnp.arange(out.size, dtype=out.dtype).reshape(out.shape))
      return out, *tinyjx.grad(lambda x, w: jnp.sum(fn(x, w) * ct), argnums=(0, 1))(x, w)
    with tinyjx.Context(JAX_ENABLE_X64=True):
      source, got, want = _on_cpu_and_python(cpu, f, x, w)
    assert 'const int64_t pq = ' in source, how
    for g, v in zip(got, want):
      np.testing.assert_allclose(g, v, rtol=tol, atol=tol * np.abs(v).max(), err_msg=f"{how} {dt.__name__}")

def test_the_padding_skip_reads_the_window_offset_of_a_padded_axis():
  """`_padding_skip` finds the outermost padded axis whose position is a row variable plus or minus one contraction
  variable, and none where the offset is scaled (a dilated window) or two contraction variables share the axis."""
  from tinyjx.lower import optimize
  y, x, ky, kx = sym.loop_var(0, 6), sym.loop_var(1, 8), sym.loop_var(2, 3), sym.loop_var(3, 3)
  buf, pads = UOp(Ops.DEFINE_GLOBAL, F32, (), 7), {7: ((8, 10), ((2, 0), (1, 1)))}
  at = lambda row, col: UOp(Ops.LOAD, F32, (buf, sym.add(sym.mul(row, 10), col)))
  v, part, lo, hi = optimize._padding_skip(at(sym.add(y, ky), sym.add(x, kx)), [ky, kx], pads)
  assert (v, part, lo, hi) == (ky, y, 2, 8)                             # rows 2..7 hold data
  flipped = sym.add(sym.const(7), sym.mul(sym.add(y, ky), -1))         # row 7 - (y + ky): 2 <= 7 - y - ky < 8
  v, part, lo, hi = optimize._padding_skip(at(flipped, sym.add(x, kx)), [ky, kx], pads)
  assert (v, sym.linear(part), lo, hi) == (ky, ({y: 1}, -7), -7, -1)    # -7 <= y + ky - 7 < -1
  assert optimize._padding_skip(at(y, sym.add(x, sym.mul(kx, 2))), [ky, kx], pads) is None
  assert optimize._padding_skip(at(sym.add(ky, kx), x), [ky, kx], pads) is None
  assert optimize._padding_skip(at(sym.add(y, ky), sym.add(x, kx)), [ky, kx], {}) is None

def _lax():
  from tinyjx import lax
  return lax

EDGES = (1, 7, 31, 33, 255, 257)

@pytest.mark.parametrize('m, k, n', [(1, 1000, 7), (33, 1000, 31), (7, 257, 255), (31, 2049, 33)])
def test_panels_bigger_than_l1_are_staged_and_match_numpy(cpu, monkeypatch, m, k, n):
  """A panel packed row by row whose bytes pass STAGE_PANEL is staged (its rows computed in order, then moved in
  blocks of a vector's lanes square through vector registers, `block_transpose_fn`, and the contraction rows past
  the last whole block one by one): transposed operands, a computed operand (a relu mask of a gradient),
  contraction lengths that do not divide by the block, every tile edge; float32 and float64 against numpy."""
  _avx512_plans(cpu, monkeypatch)
  from tinyjx.lower import matmul
  rng = np.random.default_rng(m + k + n)
  for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-11)):
    a, b, g = (rng.standard_normal(sh).astype(dt) for sh in ((m, k), (k, n), (k, n)))
    bt, gt = b.T.copy(), g.T.copy()                               # y contiguous along the contraction: row by row
    cases = [(lambda a, b, g: a @ b, (a, b, g), a.astype(np.float64) @ b),
             (lambda a, bt, gt: jnp.tanh(a @ bt.T), (a, bt, gt), np.tanh(a.astype(np.float64) @ b)),
             (lambda a, bt, gt: a @ jnp.where(bt > 0, gt, 0.0).T, (a, bt, gt),
              a.astype(np.float64) @ np.where(b > 0, g, 0.0))]
    panel = 2 * cpu.vector_bytes * k                             # bytes of a y panel of nr columns, whole
    for i, (f, args, want) in enumerate(cases):
      with tinyjx.Context(JAX_ENABLE_X64=True):
        source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args)).source
        with tinyjx.Context(TINYJX_DEVICE='CPU'): got = np.asarray(tinyjx.jit(f)(*args))
      np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(k), err_msg=f"{m}x{k}x{n} {dt.__name__}")
      if i and 'tjx_mm' in source and k <= 512: assert ('stage[' in source) == (panel > matmul.STAGE_PANEL), (m, k, n)
      if 'stage[' in source: assert 'tjx_trb_f' in source.split('stage[', 1)[1], (m, k, n)

@pytest.mark.parametrize('m, k, n', sorted({(e, 33, 257) for e in EDGES} | {(255, e, 31) for e in EDGES[1:]} |
                                           {(31, 257, e) for e in EDGES}))
def test_a_small_x_read_in_place_by_rows_matches_numpy(cpu, m, k, n):
  """A small x contiguous along the contraction is not packed: the micro-kernel reads its rows in place (plan
  `x_rows`, `TJX_MICRO_ROWS`), padding rows of the last block reading the last row. Every tile edge, float32 and
  float64, y transposed or not, with a fused epilogue, gives numpy's result."""
  from tinyjx.lower import optimize
  rng = np.random.default_rng(m * 7 + k * 3 + n)
  for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-11)):
    a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
    want = a.astype(np.float64) @ b
    cases = [(lambda a, b: a @ b, b, want), (lambda a, bt: jnp.tanh(a @ bt.T) * 2.0, b.T.copy(), np.tanh(want) * 2)]
    with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
      for f, y, ref in cases:
        source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(a, y)).source
        matmul = m > 1 and n > 1 and m * n * k >= optimize.MATMUL_MIN_WORK and k >= optimize.MATMUL_MIN_K
        if optimize.pads_less_turned(m, n, np.dtype(dt), cpu.vector_bytes):
          # (a thin result is tiled turned, x and y swapped: x is then y's columns, read in place where y was given
          # transposed; test_a_thin_result_is_tiled_turned_and_matches_numpy)
          assert ('tjx_mm_f' in source or 'tjx_mmr_f' in source) == matmul
        else:
          # (one row or one column: a matrix-vector loop, no matmul)
          assert ('tjx_mmr_f' in source) == matmul and 'tjx_mm_f' not in source
        np.testing.assert_allclose(np.asarray(tinyjx.jit(f)(a, y)), ref, rtol=tol, atol=tol * np.sqrt(k),
                                   err_msg=dt.__name__)

@pytest.mark.parametrize('m, k, n', sorted({(e, 33, 257) for e in EDGES} | {(255, e, 31) for e in EDGES[2:]} |
                                           {(33, 257, e) for e in EDGES[1:]}))
def test_a_weight_gradient_with_its_update_prefetches_and_matches_numpy(cpu, monkeypatch, m, k, n):
  """A matmul whose Adam-style update is its epilogue (the parameter and both moments loaded and stored at each
  result) runs by rows, with the prefetching micro-kernel where x is packed (`MatmulPlan.prefetch`: it fetches the
  next tile's lines of all six arrays, a row block's last tile the next block's first): x packed (a weight gradient,
  x.T @ d) or read in place (x given transposed, no prefetch). Every tile edge, float32 and float64, one thread and
  three, gives numpy's result. Where it prefetches, an optimized build whose compiler has a vector multiply-add runs
  each whole tile's update between the next tile's contraction rows (`overlapped_tiles`, prefetching each tile's
  own lines): the same bits as the kernel without that path."""
  _avx512_plans(cpu, monkeypatch)
  from tinyjx.lower import optimize, matmul
  from tinyjx.devices.python import NumpyBuffer
  rng = np.random.default_rng(m * 5 + k * 3 + n)
  def update(g, p, mo, v):
    mo, v = 0.9 * mo + 0.1 * g, 0.999 * v + 0.001 * g * g
    return p - 1e-3 * mo / (jnp.sqrt(v) + 1e-8), mo, v
  steps = [(lambda x, d, *s: update(x.T @ d, *s), lambda x: x), (lambda xt, d, *s: update(xt @ d, *s), np.transpose)]
  for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-11)):
    x, d = rng.standard_normal((k, m)).astype(dt), rng.standard_normal((k, n)).astype(dt)
    state = [rng.standard_normal((m, n)).astype(dt), rng.standard_normal((m, n)).astype(dt),
             rng.random((m, n)).astype(dt)]
    g = x.astype(np.float64).T @ d
    want_m, want_v = 0.9 * state[1] + 0.1 * g, 0.999 * state[2] + 0.001 * g * g
    want = (state[0] - 1e-3 * want_m / (np.sqrt(want_v) + 1e-8), want_m, want_v)
    for step, layout in steps:
      args = (np.ascontiguousarray(layout(x)), d, *state)
      with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
        source = cpu.compile_jaxpr(tinyjx.make_jaxpr(step)(*args)).source
        turned = optimize.pads_less_turned(m, n, np.dtype(dt), cpu.vector_bytes)   # (then a thin result's 7 rows)
        if m > 12 and not turned: assert 'panels + bb *' in source, (m, k, n)
        by_rows, in_place = 'panels + bb *' in source, 'tjx_mmr_f' in source
        assert ('tjx_mmp_f' in source) == (by_rows and not in_place), (m, k, n)
        overlapped = '#ifdef TJX_VFMA_' in source
        assert overlapped == ('tjx_mmp_f' in source), (m, k, n)
        if overlapped:       # two lines a row of 2 * vector_bytes, in each of the six arrays, in both paths' tables
          assert source.count('pf[npf++] = ') == 2 * 6 * max(1, 2 * cpu.vector_bytes // 64)
        for threads in (1, 3):
          with tinyjx.Context(TINYJX_THREADS=threads): got = tinyjx.jit(step)(*args)
          for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), b, rtol=tol, atol=tol * np.sqrt(k), err_msg=dt.__name__)
        if overlapped:     # the same bits either way, with this machine's vectors and with 32-byte ones (AVX2's)
          jaxpr, width = tinyjx.make_jaxpr(step)(*args), type(cpu).__dict__['vector_bytes']
          bufs = [NumpyBuffer('CPU:0', a, dtypes.to_dtype(a.dtype)) for a in args]
          for vb in sorted({cpu.vector_bytes, 32}):
            monkeypatch.setattr(type(cpu), 'vector_bytes', property(lambda self, vb=vb: vb))
            bits = []
            for on in (True, False):
              monkeypatch.setattr(matmul, 'OVERLAP_EPILOGUE', on)
              exe = cpu.compile_jaxpr(jaxpr)
              assert ('#ifdef TJX_VFMA_' in exe.source) == on, vb
              for threads in (1, 3):
                with tinyjx.Context(TINYJX_THREADS=threads): bits.append([b.numpy() for b in exe.run(bufs)])
            for other in bits[1:]:
              for a, b in zip(bits[0], other): np.testing.assert_array_equal(a, b, err_msg=f"{dt.__name__} {vb}")
            for a, b in zip(bits[0], want):
              np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.sqrt(k), err_msg=f"{dt.__name__} {vb}")
          monkeypatch.setattr(matmul, 'OVERLAP_EPILOGUE', True)
          monkeypatch.setattr(type(cpu), 'vector_bytes', width)

@pytest.mark.parametrize('m, k, n', [(512, 64, 10), (257, 33, 7), (10, 40, 300), (33, 255, 9), (7, 31, 257),
                                     (3000, 300, 10), (1001, 257, 7)])
def test_a_thin_result_is_tiled_turned_and_matches_numpy(cpu, m, k, n):
  """A result with few columns (a batch's logits) is tiled turned, x and y swapped, so its few columns run along a
  tile's 12 rows and not its 32 columns (`pads_less_turned`); a result with few rows keeps them on the rows; and a
  big x whose rows run along the contraction keeps its orientation, streaming in place, not packed (the last two
  shapes' forward). The forward with a bias and ReLU, and the weight gradient, whose result is thin the other way,
  give numpy's result in float32 and float64, x given transposed or not."""
  from tinyjx.lower import optimize
  def streams(rows, cols, size):   # (x in place, big; y packed whole: optimize.plan_matmul's x_panels)
    return rows * k * size > optimize.PACK_CACHE and cols * k * size <= optimize.PACK_CACHE
  rng = np.random.default_rng(m + 3 * k + 7 * n)
  for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-11)):
    a, w, b = (rng.standard_normal(s).astype(dt) for s in ((m, k), (k, n), (n,)))
    g = rng.standard_normal((m, n)).astype(dt)
    cases = [(lambda a, w, b: jnp.maximum(a @ w + b, 0), (a, w, b), np.maximum(a.astype(np.float64) @ w + b, 0), (m, n),
              True),
             (lambda at, w, b: at.T @ w + b, (a.T.copy(), w, b), a.astype(np.float64) @ w + b, (m, n), False),
             (lambda a, g: a.T @ g, (a, g), a.T.astype(np.float64) @ g, (k, n), False)]
    with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
      for f, args, want, (rows, cols), in_place in cases:
        source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args)).source
        kept = in_place and streams(rows, cols, np.dtype(dt).itemsize)
        turned = optimize.pads_less_turned(rows, cols, np.dtype(dt), cpu.vector_bytes) and not kept
        if (rows, cols, dt) == (512, 10, np.float32): assert turned      # (with 16- and 32-column tiles alike)
        if in_place and (rows, cols) in ((3000, 10), (1001, 7)):
          assert kept and 'tjx_mmr_f' in source and 'free(pb);' in source
        assert (f"M = {cols}, N = {rows}," if turned else f"M = {rows}, N = {cols},") in source, (rows, cols, turned)
        np.testing.assert_allclose(np.asarray(tinyjx.jit(f)(*args)), want, rtol=tol, atol=tol * np.sqrt(k),
                                   err_msg=f"{rows}x{cols} {dt.__name__}")

def test_rows_in_place_with_a_batch_and_two_row_and_contraction_variables(cpu):
  """x's row part may be several variables (einsum rows a, b) and a batch loop's; its contraction part several
  variables whose flat index walks each row in order; an x transposed (strided along the contraction) is packed."""
  rng = np.random.default_rng(3)
  x3, w = rng.standard_normal((5, 7, 33)).astype(np.float32), rng.standard_normal((33, 40)).astype(np.float32)
  xb, yb = rng.standard_normal((3, 31, 65)).astype(np.float32), rng.standard_normal((3, 65, 64)).astype(np.float32)
  x2k, y2k = rng.standard_normal((37, 4, 9)).astype(np.float32), rng.standard_normal((4, 9, 70)).astype(np.float32)
  xt = rng.standard_normal((33, 50)).astype(np.float32)
  cases = [(lambda x, w: jnp.einsum('abk,kn->abn', x, w), (x3, w), np.einsum('abk,kn->abn', x3, w), True),
           (lambda x, y: x @ y, (xb, yb), xb @ yb, True),
           (lambda x, y: jnp.einsum('mab,abn->mn', x, y), (x2k, y2k), np.einsum('mab,abn->mn', x2k, y2k), True),
           (lambda x, w: x.T @ w, (xt, w), xt.T @ w, False)]
  for f, args, want, rows in cases:
    source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args)).source
    assert ('tjx_mmr_f' in source) == rows
    with tinyjx.Context(TINYJX_DEVICE='CPU'): got = np.asarray(tinyjx.jit(f)(*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * 8)

def test_x_contiguous_along_the_contraction_is_read_in_place_at_any_size():
  """x contiguous along the contraction is read in place whatever its size, and where it is big and y small (y packed
  whole, x streaming a block at a time as the parallel work). It runs the contraction whole unless a panel of y is
  past ROWS_PANEL; streaming, in chunks."""
  from tinyjx.lower import optimize
  for m, n, k, chunked in ((255, 33, 31, False), (300, 33, 300, False), (1024, 1024, 1024, False),
                           (200, 150, 1500, False), (40, 150, 16896, True), (8192, 64, 512, False),
                           (2000, 40, 1100, True)):
    _, mm = _planned(_matmul_kernel("k0", m, n, (k,)), 32)
    assert (mm.plan.x_rows, mm.plan.chunked, mm.plan.x_panels) == (True, chunked, m >= 2000), (m, n, k)
  assert optimize.plan_matmul(256, 256, 256, F32, 256, 32).x_rows is False       # x not known to be rows in place

@pytest.mark.parametrize('m, k, n, how', [
  (7, 1100, 33, 'whole'), (33, 1030, 31, 'whole'), (257, 513, 300, 'whole'), (255, 1025, 257, 'whole'),
  (7, 16896, 33, 'chunked'),
  (31, 2000, 1, 'a matrix-vector loop'), (3000, 300, 20, 'streaming'), (1001, 700, 40, 'streaming, chunked'),
  (2000, 1100, 40, 'streaming, chunked')])
def test_x_read_in_place_matches_numpy_at_any_thread_count(cpu, monkeypatch, m, k, n, how):
  """x is read in place (`TJX_MICRO_ROWS`) over a long contraction whole, or in chunks (from x + k0) where a panel of y
  is past ROWS_PANEL, and where it is big and y small (y packed whole, each block of x streaming in place, no panel
  of it packed): every tile edge, float32 and float64, y transposed or not, with an epilogue, gives numpy's result,
  the same bits on one thread or three."""
  _avx512_plans(cpu, monkeypatch)
  rng = np.random.default_rng(m + k + n)
  for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-11)):
    a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
    want = a.astype(np.float64) @ b
    for f, y, ref in ((lambda a, b: a @ b, b, want), (lambda a, bt: jnp.tanh(a @ bt.T) * 2.0, b.T.copy(),
                                                     np.tanh(want) * 2)):
      with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
        source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(a, y)).source
        assert ('tjx_mmr_f' in source) == (n > 1), how
        assert ('for (int64_t cc = ' in source) == ('chunked' in how) and ('free(pb);' in source) == ('stream' in how)
        outs = []
        for threads in (1, 3):
          with tinyjx.Context(TINYJX_THREADS=threads): outs.append(np.asarray(tinyjx.jit(f)(a, y)))
      assert (outs[0] == outs[1]).all()
      np.testing.assert_allclose(outs[0], ref, rtol=tol, atol=tol * np.sqrt(k), err_msg=dt.__name__)

def _run_exe(exe, *args, threads: int = 0):
  """Run a CPU executable (compiled by the test itself, past jit's caches) on numpy arrays; `threads` (0: the
  default count) sets TINYJX_THREADS."""
  from tinyjx.devices.python import NumpyBuffer
  bufs = [NumpyBuffer('CPU:0', np.ascontiguousarray(a), dtypes.to_dtype(a.dtype)) for a in args]
  with tinyjx.Context(TINYJX_THREADS=threads): return [b.numpy() for b in exe.run(bufs)]

def _gelu(v): return 0.5 * v * (1 + jnp.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))

@pytest.mark.parametrize('n', [1, 7, 31, 33, 255, 257, 4096 + 33])
def test_blocks_stored_past_the_caches_give_the_same_bits(cpu, monkeypatch, n):
  """optimize.stream_stores: with STREAM_BYTES lowered so that small kernels qualify, a split chain's blocks (a gelu)
  and a transpose's rows are stored with streaming stores (`tjx_stream_f32`, a fence per thread) where a block is
  STREAM_MIN elements or more that starts a cache line, float32 and float64, on one thread and on three, and give the
  bits of the plain stores. A transpose to rows of n, and a pad of an image to n + 2 columns, stream only where
  each row starts a cache line: rows that share a line would mix streaming and plain stores in it. (The pads are
  kept whole here: `split_guards` would cut their rows into pieces, which then store plainly.)"""
  from tinyjx.lower import optimize
  monkeypatch.setattr(optimize, 'SPLIT_MIN', 1 << 30)
  rng = np.random.default_rng(n)
  wide = -(-n // 16) * 16                                   # n rounded up to whole lines of float32 and float64
  progs = [('gelu', lambda x, a: _gelu(x * a + 1.0), lambda: [rng.standard_normal(n * 3) for _ in range(2)]),
           ('rows of n', lambda x: (x * 2.0).T, lambda: [rng.standard_normal((n, 35))]),
           ('rows of lines', lambda x: (x * 2.0).T, lambda: [rng.standard_normal((wide, 35))]),
           ('pad to n + 2', lambda x: jnp.pad(x, ((0, 0), (2, 1), (1, 1))), lambda: [rng.standard_normal((3, 5, n))]),
           ('pad to lines', lambda x: jnp.pad(x, ((0, 0), (2, 1), (1, wide + 15 - n))),
            lambda: [rng.standard_normal((3, 5, n))])]
  for name, f, make in progs:
    for dt in (np.float32, np.float64):
      args = [v.astype(dt) for v in make()]
      with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
        jaxpr = tinyjx.make_jaxpr(f)(*args)
        plain = cpu.compile_jaxpr(jaxpr)
        assert 'tjx_stream_f32(b' not in plain.source and 'tjx_stream_f64(b' not in plain.source
        with monkeypatch.context() as m:
          m.setattr(optimize, 'STREAM_BYTES', 64)
          exe = cpu.compile_jaxpr(jaxpr)
      size = np.dtype(dt).itemsize
      streamed = f'tjx_stream_{"f32" if size == 4 else "f64"}(b' in exe.source   # a call (the prelude defines it)
      row = n + 2 if name == 'pad to n + 2' else n
      if n <= 257 and (name == 'gelu' and n >= 255 or name in ('rows of lines', 'pad to lines')):
        assert streamed, (name, n, dt)       # (4129: a parallel loop, or a transposed read in blocks, may store)
      if name in ('rows of n', 'pad to n + 2'): assert streamed == (row * size % 64 == 0 and row >= 16), (name, n, dt)
      if streamed: assert exe.source.count('tjx_sfence();') >= 1
      want = _run_exe(plain, *args)[0]
      for threads in (1, 3): np.testing.assert_array_equal(_run_exe(exe, *args, threads=threads)[0], want)

def test_streaming_stores_write_whole_lines_only_at_any_alignment(cpu):
  """The prelude's `tjx_stream_f32` and `_f64` (streaming stores for the whole lines inside the block, one line at a
  time, and plain stores for the lines it covers in part) at every start within a cache line and lengths around
  its edges: every value lands, and nothing outside the block is touched."""
  from tinyjx.devices import cpu as comp
  from tinyjx.lower.prelude import HEADERS, STREAM
  import ctypes
  body = """
void tjx_copy_f32(float* d, const float* s, int64_t n) { tjx_stream_f32(d, s, n); tjx_sfence(); }
void tjx_copy_f64(double* d, const double* s, int64_t n) { tjx_stream_f64(d, s, n); tjx_sfence(); }
"""
  wide, avx = (comp.load_library(HEADERS + head + STREAM + body) for head in ("", "#undef __AVX512F__\n"))
  for dt, fn in ((np.float32, wide.tjx_copy_f32), (np.float64, wide.tjx_copy_f64),
                 (np.float32, avx.tjx_copy_f32), (np.float64, avx.tjx_copy_f64)):   # (a line as two AVX stores)
    per_line = 64 // np.dtype(dt).itemsize
    for n in (0, 1, per_line - 1, per_line, per_line + 1, 2 * per_line, 3 * per_line + 5, 100):
      for start in range(per_line + 1):
        raw = np.full(start + n + 3 * per_line, -7.0, dt)
        d = raw[(-raw.ctypes.data % 64) // raw.itemsize:]             # d[0] starts a line
        src = np.arange(1, n + 1, dtype=dt)
        fn(ctypes.c_void_p(d.ctypes.data + start * d.itemsize), ctypes.c_void_p(src.ctypes.data), ctypes.c_int64(n))
        np.testing.assert_array_equal(d[start:start + n], src)
        assert (d[:start] == -7).all() and (d[start + n:] == -7).all(), (dt, n, start)

def test_only_a_kernel_that_stores_more_than_the_caches_hold_streams():
  """A gelu of 4M float32 (16 MiB stored, in the blocks of its split chain) streams; of 1M, it stores as usual."""
  from tinyjx.lower.optimize import STREAM_BYTES
  assert STREAM_BYTES == 1 << 24
  for n, want in ((4 << 20, True), (1 << 20, False)):
    with tinyjx.Context(TINYJX_DEVICE='CPU'):
      src = tinyjx.jit(lambda x: _gelu(x)).lower(jnp.zeros(n)).compile().executable.source
    assert ('tjx_stream_f32(b' in src) == want, n

@pytest.mark.parametrize('n', [70001, 200000])
def test_a_big_parallel_loop_goes_to_free_threads_with_the_same_bits(cpu, monkeypatch, n):
  """optimize.mark_parallel: a parallel loop with DYNAMIC_WORK operations or more hands its iterations out in pieces
  (`schedule(dynamic, size / 64)`); a smaller one keeps fixed shares. With the threshold lowered so that these
  sizes qualify, a gelu, a row softmax (sums inside each parallel iteration) and a transpose give the bits of the
  fixed shares on one, two and three threads."""
  from tinyjx.lower import optimize
  rng = np.random.default_rng(n)
  progs = [(lambda x: _gelu(x * 1.5 + 0.5), [rng.standard_normal(n)]),
           (lambda x: tinyjx.nn.softmax(x, axis=-1), [rng.standard_normal((n // 100, 100))]),
           (lambda x: (x * 2.0).T, [rng.standard_normal((n // 35, 35))])]
  for f, args in progs:
    with tinyjx.Context(TINYJX_DEVICE='CPU'):
      args = [a.astype(np.float32) for a in args]
      jaxpr = tinyjx.make_jaxpr(f)(*args)
      fixed = cpu.compile_jaxpr(jaxpr)
      assert 'schedule(static)' in fixed.source and 'schedule(dynamic' not in fixed.source, n
      monkeypatch.setattr(optimize, 'DYNAMIC_WORK', 1 << 12)
      exe = cpu.compile_jaxpr(jaxpr)
      monkeypatch.undo()
      assert 'schedule(dynamic' in exe.source and 'schedule(static)' not in exe.source, n
      want = _run_exe(fixed, *args, threads=2)[0]
      for threads in (1, 2, 3): np.testing.assert_array_equal(_run_exe(exe, *args, threads=threads)[0], want)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    src = tinyjx.jit(lambda x: _gelu(x)).lower(jnp.zeros(4 << 20)).compile().executable.source
  blocks = (4 << 20) // optimize.FISSION_BLOCK                  # the gelu's split chain: 65536 blocks of 64
  assert f'schedule(dynamic, {blocks // 64})' in src            # handed out in 64 pieces

def test_a_fused_update_with_many_buffers_is_vectorized_inside_its_parallel_loop(cpu, tmp_path):
  """An Adam-style update (five inputs, three outputs: 15 pairs of buffers that may overlap) in a loop big enough
  to run in parallel. GCC outlines the parallel loop, where the buffers lose `restrict`, and by default gives up
  on vectorizing past 10 run-time overlap checks (it ran scalar, 8x slower); `cpu.tuning` raises the limit. The
  compiler's own report on the kernel's source says whether the inner loop was vectorized."""
  import subprocess
  from tinyjx.devices import cpu as comp
  cc = comp.find_compiler()
  if not comp.tuning(cc): pytest.skip("not GCC: its vectorizer report is what this test reads")
  def adam(p, m, v, g, t):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    return p - 1e-3 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8), m, v
  a = jnp.ones((256, 512))
  jaxpr = tinyjx.make_jaxpr(adam)(a, a, a, a, jnp.asarray(1.0))
  st = lower.Lowering(cpu, jaxpr.params, jaxpr.outs)
  for name, fn in lower.PASSES:
    st = fn(st)
    if name == 'render': break
  assert "#pragma omp parallel" in st.source
  src = tmp_path / "k.c"
  src.write_text(st.source)
  flags = [f for f in comp.compiler_flags(cc) if f not in ('-shared', '-fPIC')]
  res = subprocess.run([cc, *flags, '-c', str(src), '-o', str(tmp_path / "k.o"), '-fopt-info-vec-optimized'],
                       capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  lines = st.source.splitlines()
  start = next(i for i, ln in enumerate(lines, 1) if ln.startswith("#pragma omp parallel"))
  end = next(i for i, ln in enumerate(lines, 1) if i > start and ln.startswith("}"))
  vectorized = [int(m) for m in re.findall(r"k\.c:(\d+):\d+: optimized: loop vectorized", res.stderr)]
  assert any(start < n < end for n in vectorized), (start, end, res.stderr[-2000:])   # a loop of the parallel nest

MERGED = [  # f of x (3, 4, h, w), numpy's f
  (lambda x: jnp.tanh(x) * 2.0 + 1.0, lambda x: np.tanh(x) * 2.0 + 1.0),
  (lambda x: x.sum((2, 3)), lambda x: x.sum((2, 3))),
  (lambda x: x.max((2, 3)), lambda x: x.max((2, 3))),
  (lambda x: (x - x.mean((0, 2, 3), keepdims=True)) * (x * x).sum((0, 2, 3), keepdims=True),
   lambda x: (x - x.mean((0, 2, 3), keepdims=True)) * (x * x).sum((0, 2, 3), keepdims=True)),
  (lambda x: jnp.where(x > 0, x, 0.0).sum((0, 2, 3)), lambda x: np.where(x > 0, x, 0.0).sum((0, 2, 3)))]

@pytest.mark.parametrize('h, w', [(20, 20), (7, 33), (31, 1), (1, 7), (33, 255)])
def test_nested_loops_that_walk_memory_as_one_run_as_one_loop(cpu, h, w):
  """`merge_nests`: the last two axes of a contiguous array (elementwise, a sum or max over them, batch-norm
  statistics over the others) run as one loop of h * w; every tile edge, float32 and float64, against numpy."""
  rng = np.random.default_rng(h * 100 + w)
  for dt, tol in ((np.float32, 2e-5), (np.float64, 1e-12)):
    x = rng.standard_normal((3, 4, h, w)).astype(dt)
    for f, npf in MERGED:
      with tinyjx.Context(JAX_ENABLE_X64=True):
        source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x)).source
        with tinyjx.Context(TINYJX_DEVICE='CPU'): got = np.asarray(tinyjx.jit(f)(x))
      want = npf(x.astype(np.float64))
      np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max(), err_msg=f"{h}x{w} {dt}")
      if h > 1 and w > 1: assert not re.search(rf"for \(int64_t i\d+ = 0; i\d+ < {w};", source), (h, w)

def _windows(x, k, op):
  n, c, h, w = x.shape
  return op(x[:, :, :h // k * k, :w // k * k].reshape(n, c, h // k, k, w // k, k), axis=(3, 5))

@pytest.mark.parametrize('k, written_out', [(1, True), (2, True), (3, True), (4, False)])
def test_small_windows_are_written_out_and_keep_every_value(cpu, k, written_out):
  """`unroll_windows`: a max or sum over a window of at most SMALL_REDUCE elements per output (a 2 x 2 or 3 x 3
  pool, a reduction over an axis of one) is its updates written out, so the loop over outputs vectorizes; a 4 x 4
  window keeps its loops. NaN (anywhere, and a whole window of them), infinities and zeros of both signs give
  numpy's result, and a max the PYTHON device's bit for bit, in float32 and float64, at widths about a vector's."""
  rng = np.random.default_rng(k)
  for dt in (np.float32, np.float64):
    for h, w in ((20, 20), (7, 33), (12, 5)):
      x = rng.standard_normal((2, 3, h, w)).astype(dt)
      x.flat[rng.integers(0, x.size, 6)] = np.nan
      x.flat[rng.integers(0, x.size, 4)] = -np.inf
      x.flat[rng.integers(0, x.size, 4)] = -0.0
      x[0, 0, 0, :k] = np.nan                                     # a window that is NaN throughout
      for op, npop in ((jnp.max, np.max), (jnp.sum, np.sum)):
        f = lambda x: _windows(x, k, op) * 2.0
        with tinyjx.Context(JAX_ENABLE_X64=True):
          source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x)).source
          with tinyjx.Context(TINYJX_DEVICE='CPU'): got = np.asarray(tinyjx.jit(f)(x))
          with tinyjx.Context(TINYJX_DEVICE='PYTHON'): ref = np.asarray(tinyjx.jit(f)(x))
        want = _windows(x, k, npop) * 2.0
        tol = 2e-6 if dt is np.float32 else 1e-14                # a float32 sum's rounding, of terms about 1
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k * k * 8, err_msg=f"{k} {op.__name__}")
        if op is jnp.max: np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))   # every bit
        kernel = source[source.index('static void k0'):]
        assert ('#pragma omp simd reduction' not in kernel) == written_out, (k, op.__name__)

def test_loops_whose_addresses_do_not_walk_as_one_stay_nested(cpu):
  """A transposed read, a broadcast along one of the two axes and a padding mask each use a loop variable in a way
  one flat loop cannot: those nests keep their loops, and their results."""
  rng = np.random.default_rng(3)
  x, y = rng.standard_normal((3, 4, 20, 20)).astype(np.float32), rng.standard_normal((3, 4, 20)).astype(np.float32)
  cases = [(lambda x, y: jnp.swapaxes(x, 2, 3) + 1.0, lambda x, y: np.swapaxes(x, 2, 3) + 1.0, 400),
           (lambda x, y: x * y[..., None], lambda x, y: x * y[..., None], 400),
           (lambda x, y: jnp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))) * 2.0,
            lambda x, y: np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))) * 2.0, 484)]
  for f, npf, flat in cases:
    source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x, y)).source
    assert not re.search(rf"< ({flat}|{12 * flat});", source)
    with tinyjx.Context(TINYJX_DEVICE='CPU'): np.testing.assert_allclose(np.asarray(tinyjx.jit(f)(x, y)), npf(x, y))

@pytest.mark.parametrize('dt', [np.float32, np.float64])
def test_a_vectorized_max_keeps_its_nan_in_a_flag(cpu, dt):
  """A max or min reduction vectorizes as a max that lets a NaN fall out plus an int flag that remembers one
  (render.py `simd_reduction`), and the flag sets the result after the loop. A NaN anywhere in a row (first, last,
  the only one, every element, in the second of two reduced axes, where the inner loop runs once per outer
  value) gives NaN; rows without one give numpy's max and min."""
  rng = np.random.default_rng(3)
  x = rng.standard_normal((7, 9, 130)).astype(dt)
  x[1, 0, 0] = x[2, 8, 129] = x[3, 4, 77] = np.nan
  x[4] = np.nan
  x[5, 3, 5] = np.inf
  x[6, 2, 9] = -np.inf
  with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='CPU'):
    f = tinyjx.jit(lambda a: (jnp.max(a, axis=2), jnp.min(a, axis=2), jnp.max(a, axis=(1, 2)), jnp.min(a, axis=(1, 2)),
                              jnp.max(a, axis=(0, 2))))
    got = [np.asarray(g) for g in f(x)]
    src = f.lower(x).compile().executable.source
  assert "reduction(|:" in src and f"tjx_fmax_{'f32' if dt is np.float32 else 'f64'}" in src
  want = [np.max(x, axis=2), np.min(x, axis=2), np.max(x, axis=(1, 2)), np.min(x, axis=(1, 2)), np.max(x, axis=(0, 2))]
  for g, w in zip(got, want): np.testing.assert_array_equal(g, w)

def _gelu_chain(x, a, b): return tinyjx.nn.gelu(x * a + b, approximate=True)

@pytest.mark.parametrize('n', [1, 7, 127, 128, 129, 191, 1000, 4133])
def test_a_long_chain_before_a_tanh_splits_into_blocks_of_two_loops_with_the_same_results(cpu, n, monkeypatch):
  """`split_chains`: a loop of at least two blocks whose tanh waits on a long argument runs in blocks of
  FISSION_BLOCK, each as a loop that keeps the arguments (and `x * a + b`, which the rest needs) in local arrays
  and a loop that runs the tanh and stores; the elements past the last whole block run the plain loop. Every
  block edge gives bit for bit the result of the unsplit kernel, and numpy's."""
  from tinyjx.lower import optimize
  rng = np.random.default_rng(n)
  x, a, b = (rng.standard_normal(n).astype(np.float32) * 3 for _ in range(3))
  x[:3] = [np.nan, np.inf, -np.inf][:n]
  def build():
    exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(_gelu_chain)(x, a, b))
    return exe.source, _run_exe(exe, x, a, b)[0]
  source, got = build()
  blocks = n // optimize.FISSION_BLOCK
  assert (f"[{optimize.FISSION_BLOCK}];" in source) == (blocks >= 2)
  monkeypatch.setattr(optimize, 'FISSION_MIN_OPS', 10 ** 6)
  plain_source, plain = build()
  assert f"[{optimize.FISSION_BLOCK}];" not in plain_source
  np.testing.assert_array_equal(got, plain)
  y = (x * a + b).astype(np.float64)
  with np.errstate(invalid='ignore'):                  # gelu(-inf) is -inf * 0: NaN, as in numpy
    want = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

def test_split_chains_covers_exp_log_two_outputs_and_rows_and_leaves_what_would_not_pay(cpu, monkeypatch):
  """An exp and a log whose arguments take several operations, two outputs of one loop, and the inner loop of
  a row-broadcast (rows of 700) are split; a tanh of a short argument, a float64 one, and one whose rest needs
  more than FISSION_MAX_CARRIED values of the first loop's work are not. Split or not, results are the unsplit
  kernel's bit for bit, and numpy's."""
  from tinyjx.lower import optimize
  rng = np.random.default_rng(5)
  x, y = rng.standard_normal(3000).astype(np.float32), rng.standard_normal(3000).astype(np.float32)
  r, c = rng.standard_normal((3, 700)).astype(np.float32), rng.standard_normal((3, 1)).astype(np.float32)
  def many(x, y):
    p = [x * k for k in (1.5, 2.5, 3.5, 4.5, 5.5)]
    return jnp.tanh(p[0] + p[1] + p[2] + p[3] + p[4]) * p[0] * p[1] * p[2] * p[3] * p[4]
  cases = [  # f, args, numpy's, split
    (lambda x, y: jnp.exp(-(x * x + y * y) * 0.5 + 1.0) * x, (x, y),
     lambda x, y: np.exp(-(x * x + y * y) * 0.5 + 1.0) * x, True),
    (lambda x, y: (jnp.log(x * x + y * y + 1.0) + x, jnp.tanh(x * y * 0.5 + y * 2.0 - 1.0)), (x, y),
     lambda x, y: (np.log(x * x + y * y + 1.0) + x, np.tanh(x * y * 0.5 + y * 2.0 - 1.0)), True),
    (lambda r, c: jnp.tanh((r * c + 1.0) * (r - c) * 0.25) * r, (r, c),
     lambda r, c: np.tanh((r * c + 1.0) * (r - c) * 0.25) * r, True),
    (lambda x, y: jnp.tanh(x * y) * x, (x, y), lambda x, y: np.tanh(x * y) * x, False),
    (lambda x, y: jnp.tanh(x * y * 0.5 + y * 2.0 - 1.0), (x.astype(np.float64), y.astype(np.float64)),
     lambda x, y: np.tanh(x * y * 0.5 + y * 2.0 - 1.0), False),
    (many, (x, y), lambda x, y: many(x, y), False)]
  mark = f"[{optimize.FISSION_BLOCK}];"
  with tinyjx.Context(JAX_ENABLE_X64=True):
    for i, (f, args, ref, split) in enumerate(cases):
      exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args))
      assert (mark in exe.source) == split, i
      got = _run_exe(exe, *args)
      with monkeypatch.context() as m:
        m.setattr(optimize, 'FISSION_MIN_OPS', 10 ** 6)
        plain = _run_exe(cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args)), *args)
      want = ref(*[np.asarray(a, np.float64) for a in args])
      for g, p, w in zip(got, plain, want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, p, err_msg=str(i))
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=str(i))

@pytest.mark.parametrize('n', [513, 4133])
def test_a_function_of_a_function_splits_between_them_with_the_same_results(cpu, n, monkeypatch):
  """softplus (`log1p(exp(-|x|))`), log_sigmoid, softplus beside a sigmoid, and logaddexp: a float32 function of
  another runs in blocks whose first loop computes the inner functions, whatever their arguments; the NaN test
  logaddexp makes is computed again in the second loop rather than kept. Results are the unsplit kernel's bit
  for bit (infinities and NaN included), and numpy's."""
  from tinyjx.lower import optimize
  rng = np.random.default_rng(n)
  x, y = (rng.standard_normal(n).astype(np.float32) * 30 for _ in range(2))
  x[:4], y[:4] = [np.nan, np.inf, -np.inf, np.inf], [1.0, np.inf, -np.inf, -np.inf]
  def softplus(v): return np.logaddexp(v, 0.0)
  def sigmoid(v): return 1 / (1 + np.exp(-v))
  cases = [(tinyjx.nn.softplus, (x,), softplus), (tinyjx.nn.log_sigmoid, (x,), lambda v: -softplus(-v)),
           (lambda v: tinyjx.nn.sigmoid(v) + tinyjx.nn.softplus(v), (x,), lambda v: sigmoid(v) + softplus(v)),
           (jnp.logaddexp, (x, y), np.logaddexp)]
  mark = f"[{optimize.FISSION_BLOCK}];"
  for i, (f, args, ref) in enumerate(cases):
    exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args))
    assert mark in exe.source and "tjx_log1p_f32(acc" in exe.source, i
    got = _run_exe(exe, *args)[0]
    with monkeypatch.context() as m:
      m.setattr(optimize, '_split_chain', lambda l, k: None)
      plain_exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args))
    assert mark not in plain_exe.source
    np.testing.assert_array_equal(got, _run_exe(plain_exe, *args)[0], err_msg=str(i))
    with np.errstate(over='ignore', invalid='ignore'):
      want = ref(*[a.astype(np.float64) for a in args])
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30, err_msg=str(i))

CHANNEL_SUMS = [  # (shape, dtype, the group of kept values each thread's loop walks an image's runs of; 0: unchanged)
  ((256, 32, 400), np.float32, 16),     # runs of 1600 bytes: 16 of them make an image's 25 KB
  ((64, 48, 100), np.float32, 24),      # runs of 400 bytes: at most half the channels (two cores: two groups)
  ((128, 32, 100), np.float64, 16),
  ((128, 16, 20, 20), np.float32, 8),   # H x W merged into one run of 400
  ((300, 7, 200), np.float32, 0),       # 7 channels: no groups of two or more that leave two groups
  ((16, 32, 400), np.float32, 0),       # 0.8 MB: in cache already
  ((64, 32, 4096), np.float32, 0)]      # runs of 16 KB: each is a stream of its own already

@pytest.mark.parametrize('case', range(len(CHANNEL_SUMS)))
def test_channel_sums_read_each_image_in_order_with_the_same_bits(cpu, case, monkeypatch):
  """`reduce_in_memory_order`: a sum over every axis but the second of an (N, C, ...) array, big and with short runs
  per channel, walks groups of channels with the batch outside them (an array of the group's totals); the mean of a
  masked array's channels, a sum that reads a per-channel input in its loop (a batch norm's gradient reads the
  mean), a max (its loop reduces straight into the total) and float64 sums (likewise) give the bits of the unchanged
  kernel on one, two and three threads, and numpy's."""
  from tinyjx.lower import optimize
  monkeypatch.setattr(type(cpu), 'cores', property(lambda self: 2))      # (the groups: two a core at most)
  shape, dt, group = CHANNEL_SUMS[case]
  rng = np.random.default_rng(case)
  x, m = rng.standard_normal(shape).astype(dt), rng.standard_normal(shape).astype(dt)
  mu = rng.standard_normal(shape[1]).astype(dt)
  axes = tuple(a for a in range(len(shape)) if a != 1)
  bshape = (1, shape[1]) + (1,) * (len(shape) - 2)
  def f(x, m, mu):
    v = jnp.where(m > 0, x, 0.0)
    centred = (x - mu.reshape(bshape)) * m                  # reads each channel's mean in the loop
    return jnp.mean(v, axis=axes), jnp.sum(centred, axis=axes), jnp.max(x * 2.0, axis=axes)
  with tinyjx.Context(JAX_ENABLE_X64=True):
    jaxpr = tinyjx.make_jaxpr(f)(x, m, mu)
    exe = cpu.compile_jaxpr(jaxpr)
    groups = re.findall(r"(double|float) acc\d+\[(\d+)\];", exe.source)
    kinds = ['double', 'double', 'double' if dt == np.float64 else 'float']     # sums kept in double, the max not
    assert sorted(groups) == (sorted((t, str(group)) for t in kinds) if group else []), groups
    with monkeypatch.context() as p:
      p.setattr(optimize, '_in_memory_order', lambda *a: None)
      plain = _run_exe(cpu.compile_jaxpr(jaxpr), x, m, mu, threads=2)
    for threads in (1, 2, 3):
      for got, want in zip(_run_exe(exe, x, m, mu, threads=threads), plain): np.testing.assert_array_equal(got, want)
  x64, m64 = x.astype(np.float64), m.astype(np.float64)
  np.testing.assert_allclose(plain[0], np.where(m64 > 0, x64, 0).mean(axes), rtol=1e-5, atol=1e-6)
  terms = (x64 - mu.astype(np.float64).reshape(bshape)) * m64
  np.testing.assert_allclose(plain[1], terms.sum(axes), rtol=1e-5, atol=1e-6 * np.abs(terms).sum(axes).max())
  np.testing.assert_array_equal(plain[2], (x * 2).max(axes))

def test_both_loops_of_a_split_chain_are_vectorized(cpu, tmp_path):
  """The two loops of each block of a split gelu are vectorized (GCC's own report on the kernel's source)."""
  import subprocess
  from tinyjx.devices import cpu as comp
  cc = comp.find_compiler()
  if not comp.tuning(cc): pytest.skip("not GCC: its vectorizer report is what this test reads")
  x = np.ones(1 << 16, np.float32)
  source = cpu.compile_jaxpr(tinyjx.make_jaxpr(_gelu_chain)(x, x, x)).source
  (tmp_path / "k.c").write_text(source)
  flags = [f for f in comp.compiler_flags(cc) if f not in ('-shared', '-fPIC')]
  res = subprocess.run([cc, *flags, '-c', str(tmp_path / "k.c"), '-o', str(tmp_path / "k.o"),
                        '-fopt-info-vec-optimized'], capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  lines = source.splitlines()
  block = next(i for i, ln in enumerate(lines) if ln.startswith("#pragma omp parallel for"))
  inner = [i + 1 for i, ln in enumerate(lines) if i > block and ln.startswith("    for (int64_t i")][:2]
  assert len(inner) == 2, source
  for loop in inner: assert f"k.c:{loop}:" in res.stderr, (loop, res.stderr[-2000:])

TRANSPOSES = [  # f(xp, *args), the args' shapes and dtypes, whether tile_transposes cuts the nest
  (lambda xp, x: x.T * 2, [((1000, 1000), np.float32)], True),                       # a tail of 8 columns
  (lambda xp, x, y: x.T + y, [((513, 300), np.float32), ((300, 513), np.float32)], True),
  (lambda xp, x, y: (x.T + y) / 2, [((512, 640), np.float32), ((640, 512), np.float32)], True),  # whole lines
  (lambda xp, x: x.T * 3, [((601, 257), np.float64)], True),                         # 8 per line, a tail of 1
  (lambda xp, x: x.T * 3, [((700, 600), np.int8)], True),                            # 64 per line, wrapping
  (lambda xp, x: x.T * 2, [((520, 520), np.float16)], True),
  (lambda xp, x: xp.transpose(x, (2, 1, 0)) - 1, [((64, 64, 80), np.float32)], True),  # contiguous two loops out
  (lambda xp, x: xp.pad(x, ((1, 2), (3, 0))).T * 2, [((600, 500), np.float32)], True),  # masked reads
  (lambda xp, x: xp.transpose(x, (0, 2, 1)) * 2, [((64, 128, 96), np.float32)], False),  # back in 128 rows: L1
  (lambda xp, x: x.T * 2, [((100, 100), np.float32)], False),                        # small: in cache as it is
  (lambda xp, x: xp.transpose(x, (1, 0, 2)) * 2, [((300, 300, 16), np.float32)], False),  # lines read whole
]

@pytest.mark.parametrize('case', range(len(TRANSPOSES)))
def test_a_transposed_read_runs_a_cache_line_at_a_time_with_the_same_results(cpu, case, monkeypatch):
  """`tile_transposes`: a nest that reads some input across its innermost loop runs that loop in blocks of one
  cache line of the read, outside the loop along which the read is contiguous (a tail nest for the rest of a
  size that is no multiple of the block); nests whose reads come back to their lines while they are in L1, or
  that are small, are left as they are. Results are numpy's bit for bit either way, also with the lines streamed
  past the caches (`stream_stores`, its floor lifted), where each line's short loop fills a local block and, no
  elementwise loop over outputs, is left to the compiler to unroll (render.py `loop_open`)."""
  from tinyjx.lower import optimize
  f, specs, tiled = TRANSPOSES[case]
  rng = np.random.default_rng(case)
  args = [(rng.standard_normal(shape) * 50).astype(dt) for shape, dt in specs]
  def build():
    with tinyjx.Context(JAX_ENABLE_X64=True):
      return cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda *a: f(jnp, *a))(*args))
  exe = build()
  got = _run_exe(exe, *args)[0]
  stream_bytes = optimize.STREAM_BYTES
  monkeypatch.setattr(optimize, 'STREAM_BYTES', 0)
  streamed = build()
  monkeypatch.setattr(optimize, 'STREAM_BYTES', stream_bytes)
  kernel = streamed.source[streamed.source.index('static void k0'):]
  if tiled and got.dtype in (np.float32, np.float64) and got.shape[-1] * got.itemsize % 64 == 0 and \
     64 // got.itemsize >= optimize.STREAM_MIN:
    assert 'tjx_stream_' in kernel and not re.search(r'TJX_KEEP_LOOP\n\s*for [^\n]*\n\s*acc\d+\[', kernel), kernel
  monkeypatch.setattr(optimize, 'TRANSPOSE_MIN_BYTES', 1 << 62)
  plain = build()
  assert (exe.source != plain.source) == tiled
  with np.errstate(over='ignore'):
    want = f(np, *args)
  assert got.dtype == want.dtype
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(_run_exe(streamed, *args)[0], want)
  np.testing.assert_array_equal(_run_exe(plain, *args)[0], want)

TRANSPOSE_COPIES = [  # shape, permutation, dtype: a materialized transpose, the source's last axis along `a`
  ((512, 640), (1, 0), np.float32),
  ((600, 520), (1, 0), np.float32),          # 520 columns: whole blocks of 8 lanes, not of 16
  ((520, 600), (1, 0), np.float32),          # 520 rows: each line's tail of 8 (16 lanes) gathered as before
  ((256, 1000), (1, 0), np.float64),
  ((64, 48, 80), (2, 1, 0), np.float32),
  ((300, 512), (1, 0), np.int32),            # no float: left as it is
]

@pytest.mark.parametrize('case', range(len(TRANSPOSE_COPIES)))
def test_a_transposed_copy_moves_square_blocks_through_vector_registers(cpu, case, monkeypatch):
  """`block_transposes`: a copy `tile_transposes` made a cache line of the output at a time moves lanes x lanes
  blocks through vector registers (`tjx_trb_`), stored (`Transpose`) or streamed past the caches (`stream_stores`'
  form, where the output's rows are whole lines of float32), with this machine's vectors and with 32-byte ones; a
  float copy whose source rows do not divide into blocks, and an integer one, keep their gathers. numpy's values,
  bit for bit, on one thread and three."""
  from tinyjx.lower import optimize
  shape, perm, dt = TRANSPOSE_COPIES[case]
  x = (np.random.default_rng(case).standard_normal(shape) * 100).astype(dt)
  want, width = np.transpose(x, perm), type(cpu).__dict__['vector_bytes']
  for vb in sorted({cpu.vector_bytes, 32}):
    monkeypatch.setattr(type(cpu), 'vector_bytes', property(lambda self, vb=vb: vb))
    lanes = vb // x.dtype.itemsize
    for streamed in (False, True):
      monkeypatch.setattr(optimize, 'STREAM_BYTES', 0 if streamed else 1 << 62)
      with tinyjx.Context(JAX_ENABLE_X64=True):
        exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda x: jnp.transpose(x, perm))(x))
      kernel = exe.source[exe.source.index('static void k0'):]
      blocks = dt in (np.float32, np.float64) and shape[-1] % lanes == 0
      assert bool(re.search(rf'tjx_trb_f\d+_{vb}\(b0 \+', kernel)) == blocks, (vb, streamed)
      lines = want.shape[-1] * want.itemsize % 64 == 0 and 64 // want.itemsize >= optimize.STREAM_MIN  # (float32's)
      assert ('tjx_stream_' in kernel) == (streamed and lines and dt is not np.int32), (vb, streamed)
      for threads in (1, 3): np.testing.assert_array_equal(_run_exe(exe, x, threads=threads)[0], want)
  monkeypatch.setattr(type(cpu), 'vector_bytes', width)

@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.lists(st.sampled_from([1, 3, 16, 17, 33, 64, 100, 257, 300, 600]), min_size=2, max_size=4),
       st.randoms(use_true_random=False), st.sampled_from([np.float32, np.int32, np.float64]))
def test_any_permutation_of_a_big_array_matches_numpy(shape, r, dt):
  """Random permutations of arrays big enough for `tile_transposes` (whether it cuts the nest or not), with an
  elementwise op on the read and a second operand read in order, on the compiled CPU: numpy's values, bit for bit."""
  from tinyjx.devices.cpu import find_compiler, NoCompilerError
  try:
    find_compiler()
  except NoCompilerError as e:
    pytest.skip(str(e))
  size = int(np.prod(shape))
  assume(1 << 16 <= size <= 1 << 21)
  perm = list(range(len(shape)))
  r.shuffle(perm)
  rng = np.random.default_rng(size)
  x = (rng.standard_normal(shape) * 100).astype(dt)
  y = (rng.standard_normal([shape[p] for p in perm]) * 100).astype(dt)
  with tinyjx.Context(TINYJX_DEVICE='CPU', JAX_ENABLE_X64=True):
    got = tinyjx.jit(lambda x, y: jnp.transpose(x, perm) * 3 - y)(jnp.asarray(x), jnp.asarray(y))
  np.testing.assert_array_equal(np.asarray(got), np.transpose(x, perm) * 3 - y)

CONST_DOTS = [  # f, its args' shapes, numpy's f (on float64)
  (lambda x: x @ jnp.ones((96, 70), jnp.float32), [(130, 96)], lambda x: x @ np.ones((96, 70))),
  (lambda y: jnp.full((50, 96), -1.0, jnp.float32) @ y, [(96, 70)], lambda y: np.full((50, 96), -1.0) @ y),
  (lambda x: jnp.einsum('bij,jk->bik', x, jnp.full((40, 24), 0.5, jnp.float32)), [(3, 30, 40)],
   lambda x: np.einsum('bij,jk->bik', x, np.full((40, 24), 0.5))),
  (tinyjx.grad(lambda x, w: (x @ w).sum(), argnums=(0, 1)), [(64, 96), (96, 80)],
   lambda x, w: (np.ones((64, 80)) @ w.T, x.T @ np.ones((64, 80)))),
  (tinyjx.grad(lambda q, k, v: (tinyjx.nn.softmax(q @ jnp.swapaxes(k, -1, -2), axis=-1) @ v).sum(), argnums=2),
   [(2, 40, 16)] * 3, lambda q, k, v: np.swapaxes(_np_softmax(q @ np.swapaxes(k, -1, -2)), -1, -2) @ np.ones((2, 40, 16))),
]

@pytest.mark.parametrize('case', range(len(CONST_DOTS)))
def test_a_contraction_with_a_constant_operand_sums_once_and_broadcasts(case):
  """dot_general with a constant operand (the ones of a sum's gradient, `grad((x @ w).sum())`): the products do
  not vary along the constant's free axes, so the sums run once and are broadcast, with no matmul (grad of the
  sum of an 8 x 256 x 64 attention: 28 -> 2.5 ms). Values are numpy's."""
  from tinyjx.lower.optimize import is_matmul
  f, shapes, ref = CONST_DOTS[case]
  rng = np.random.default_rng(case)
  args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    exe = tinyjx.jit(f).lower(*args).compile().executable
    got = tinyjx.jit(f)(*args)
  if case < 3: assert not any(is_matmul(k) for k in exe.kernels)
  want = ref(*[a.astype(np.float64) for a in args])
  for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=2e-4)

def test_a_packed_operand_can_read_at_the_flat_contraction_index(cpu):
  """A weight gradient through a layer norm, `grad(w -> sum((ln(x) @ w) ** 2))`, packs ln(x) contraction-outer over
  two contraction variables, and reads the norm's statistics at their flattened index: the load hoisted out of the
  packing's row loop must come after that index's temporary (the C did not compile: `t1` undeclared)."""
  def ln(x): return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
  rng = np.random.default_rng(0)
  x, w = rng.standard_normal((4, 16, 32)).astype(np.float32), rng.standard_normal((32, 48)).astype(np.float32)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = tinyjx.jit(tinyjx.grad(lambda w, x: ((ln(x) @ w) ** 2).sum()))(w, x)
  x64 = x.astype(np.float64)
  n = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
  want = np.einsum('btd,bte->de', n, 2 * (n @ w.astype(np.float64)))
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-3)

SCANS = [  # f, the arg's shape and dtype
  (lambda x: jnp.cumsum(x, axis=0), (300, 40), np.float32),          # two tiles of 20 running sums
  (lambda x: jnp.cumsum(x, axis=1), (8, 600, 5), np.float32),        # 5 columns: one tile, per batch
  (lambda x: tinyjx.lax.cumsum(x, axis=0, reverse=True), (257, 64), np.float64),
  (lambda x: jnp.cumprod(x * 0.01 + 1, axis=0), (100, 96), np.float32),
  (lambda x: tinyjx.lax.cummax(x, axis=0), (99, 48), np.float32),     # with NaNs
  (lambda x: tinyjx.lax.cummin(x, axis=1, reverse=True), (4, 50, 32), np.int32),
  (lambda x: jnp.cumsum(x, axis=1), (300, 40), np.float32),          # along rows: left as it is
]

@pytest.mark.parametrize('case', range(len(SCANS)))
def test_a_scan_down_columns_keeps_a_row_of_running_values_with_the_same_results(cpu, case, monkeypatch):
  """`as_column_scan`: a scan along an axis that is not the last keeps a row of running values (in tiles, the
  innermost loop along memory); each column combines the same values in the same order, in the same accumulator
  type, so the results are the plain scan's bit for bit, and the reference device's."""
  from tinyjx.lower import optimize
  f, shape, dt = SCANS[case]
  rng = np.random.default_rng(case)
  x = (rng.standard_normal(shape) * 100).astype(dt)
  if dt == np.float32: x.reshape(-1)[::37] = np.nan if case == 4 else x.reshape(-1)[::37]
  def build():
    with tinyjx.Context(JAX_ENABLE_X64=True):
      return cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x))
  exe = build()
  got = _run_exe(exe, x)[0]
  monkeypatch.setattr(optimize, '_column_scan', lambda k: None)
  plain = build()
  assert (exe.source != plain.source) == (case != 6)
  np.testing.assert_array_equal(got, _run_exe(plain, x)[0])
  with tinyjx.Context(JAX_ENABLE_X64=True, TINYJX_DEVICE='PYTHON'):
    np.testing.assert_array_equal(got, np.asarray(f(jnp.asarray(x))))

@pytest.mark.parametrize('dt', ['int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64'])
def test_a_float32_to_int_cast_compares_in_float32_and_saturates_as_the_float64_cast(cpu, dt):
  """A float32 value cast to an integer type compiles to `tjx_f32_to_*` (compares in float32, so the loop
  vectorizes), and gives the float64 path's result on every edge: NaN to 0, the largest float32 below each bound,
  each bound (the float32 of INT32_MAX is 2^31), infinities, truncation toward zero, -0."""
  edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.7, -0.7, 1.5, -1.5, 127.9, -128.9, 255.5, 32767.5, -32768.5,
           65535.9, 2147483520.0, 2.0 ** 31, -2.0 ** 31, -2147483904.0, 4294967040.0, 2.0 ** 32,
           9223371487098961920.0, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 3e38, -3e38]
  x = np.array(edges * 40, np.float32)        # long enough to run the vector loop, not only its scalar tail
  with tinyjx.Context(JAX_ENABLE_X64=True):
    target = dtypes.to_dtype(np.dtype(dt))
    exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda v: v.astype(target))(x))
    assert f"tjx_f32_to_{lower.render.SUFFIX[target]}(" in exe.source
    got = _run_exe(exe, x)[0]
    via64 = _run_exe(cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda v: v.astype(target))(x.astype(np.float64))),
                     x.astype(np.float64))[0]
  info = np.iinfo(dt)
  want = [0 if v != v else info.max if v >= info.max else info.min if v <= info.min else int(v) for v in x.tolist()]
  np.testing.assert_array_equal(got, via64)
  assert got.tolist() == want

def test_a_short_sum_its_enclosing_loop_carries_is_kept_from_the_vectorizer(cpu):
  """The kernel gradient of a 1 x 1 convolution with stride 2 and padding under a ReLU sums, over the output's
  positions, terms that read x at stride 2 and select on the ReLU; its loop over the 3 columns of a row carries the
  sum of the whole gradient. GCC 12 unrolled that loop into a chain of three in-order sums and then vectorized the
  loop over rows wrongly (-0.46 for 0.97: tests/test_contraction_fuzz.py found it). The short loop now keeps
  TJX_KEEP_LOOP, and the jitted gradient is the reference's."""
  from tinyjx import lax
  rng = np.random.default_rng(0)
  x, k = rng.standard_normal((1, 1, 4, 5)).astype(np.float32), rng.standard_normal((1, 1, 1, 1)).astype(np.float32)
  ct = rng.standard_normal((1, 1, 7, 3)).astype(np.float32)
  def loss(x, k): return jnp.sum(jnp.maximum(lax.conv_general_dilated(x, k, (1, 2), [(1, 2), (0, 1)]), 0) * ct)
  g = tinyjx.grad(loss, argnums=1)
  exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(g)(x, k))
  assert re.search(r"TJX_KEEP_LOOP\n *for \(int64_t i\d+ = 0; i\d+ < 3;", exe.source), exe.source
  xp = np.pad(x[0, 0].astype(np.float64), ((1, 2), (0, 1)))[:, ::2]
  want = np.sum(ct[0, 0] * (xp * k.item() > 0) * xp)
  np.testing.assert_allclose(_run_exe(exe, x, k)[0].ravel(), [want], rtol=1e-5)

def test_a_short_loop_around_other_loops_is_not_kept_from_the_vectorizer(cpu, tmp_path):
  """TJX_KEEP_LOOP (the prelude's guard against a GCC bug) goes only before short elementwise loops: a size-1 loop
  around a matvec's row sums (`m @ c / norm(m @ c)`) kept so stopped GCC vectorizing the row sum inside it (55 us
  a call on 256 x 256; 7.5 us vectorized). GCC's own report on the kernel's source says the row sum is vectorized;
  the result matches numpy's."""
  import subprocess
  from tinyjx.devices import cpu as comp
  rng = np.random.default_rng(0)
  m, c = rng.standard_normal((256, 256)).astype(np.float32), rng.standard_normal(256).astype(np.float32)
  f = lambda m, c: (m @ c) / jnp.linalg.norm(m @ c)
  exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(m, c))
  lines = exe.source.splitlines()
  for i, ln in enumerate(lines):
    if ln.strip() == "TJX_KEEP_LOOP":        # the loop it guards holds no loop of its own
      depth, j = 0, i + 1
      while True:
        depth += lines[j].count('{') - lines[j].count('}')
        assert j == i + 1 or "for (" not in lines[j], exe.source
        if depth == 0: break
        j += 1
  want = m.astype(np.float64) @ c
  np.testing.assert_allclose(_run_exe(exe, m, c)[0], want / np.linalg.norm(want), rtol=1e-5, atol=1e-6)
  cc = comp.find_compiler()
  if not comp.tuning(cc): return                   # not GCC: its vectorizer report is what the rest reads
  (tmp_path / "k.c").write_text(exe.source)
  flags = [f for f in comp.compiler_flags(cc) if f not in ('-shared', '-fPIC')]
  res = subprocess.run([cc, *flags, '-c', str(tmp_path / "k.c"), '-o', str(tmp_path / "k.o"),
                        '-fopt-info-vec-optimized'], capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  row_sum = next(i + 1 for i, ln in enumerate(lines) if "omp simd reduction(+:" in ln) + 1
  assert f"k.c:{row_sum}:" in res.stderr or f"k.c:{row_sum - 1}:" in res.stderr, res.stderr[-2000:]

@pytest.mark.parametrize('case', ['astype', 'where', 'clip'])
def test_an_index_made_of_a_bool_reads_the_right_element(cpu, case):
  """GCC 12's vectorizer indexes a load with a compare's mask (-1) where the index is a bool made 0 or 1, and
  read a[-1] for `a[(v > a[0]).astype(int)]` (a wrong value, out of bounds). Such an index is rendered through
  `tjx_opaque_index`; on vectors long enough to take the vector loop, every element is numpy's."""
  a = np.array([3., 7., 8., 9.], np.float32)
  v = np.linspace(0, 10, 1001).astype(np.float32)
  fns = {'astype': lambda a, v: a[(v > a[0]).astype(jnp.int32)] + (v > 5),
         'where': lambda a, v: jnp.take(a, jnp.where(v > a[0], 1, 0)),
         'clip': lambda a, v: a[jnp.clip((v < a[1]).astype(jnp.int32) + 1, 0, 3)]}
  refs = {'astype': lambda a, v: a[(v > a[0]).astype(np.int32)] + (v > 5),
          'where': lambda a, v: a[np.where(v > a[0], 1, 0)],
          'clip': lambda a, v: a[np.clip((v < a[1]).astype(np.int32) + 1, 0, 3)]}
  exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(fns[case])(a, v))
  assert "tjx_opaque_index(" in exe.source
  np.testing.assert_array_equal(_run_exe(exe, a, v)[0], refs[case](a, v))

def test_a_clamp_by_a_nonzero_constant_is_one_compare_and_keeps_every_value(cpu):
  """`max(x, c)` and `min(x, c)` with c a number other than zero render as tjx_max(c, x): `c > x ? c : x`, one
  vector instruction, where tjx_max(x, c) tested x for NaN and blended (clip, round, astype of 4M: 1.39 -> 1.0 ms).
  Every value stays: NaN of either sign passes, +-inf, values equal to the bounds, zeros of both signs; and a bound
  of zero keeps the old order (max(-0., 0.) is +0., which `0 > x ? 0 : x` would make -0.)."""
  specials = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, -100.0, 100.0, 99.99, -100.01, 1e-45, 3e38, -3e38]
  x = np.concatenate([np.array(specials, np.float32), np.linspace(-150, 150, 1000, dtype=np.float32)])
  f = lambda x: (jnp.clip(x, -100.0, 100.0), jnp.maximum(x, 0.0), jnp.minimum(-0.0, x), jnp.maximum(x, -jnp.inf),
                 jnp.round(jnp.clip(x * 10, -100, 100)).astype(jnp.int32))
  exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x))
  assert "tjx_min_f32(100.0f, tjx_max_f32(-100.0f," in exe.source and "tjx_max_f32((-INFINITY)," in exe.source
  assert re.search(r"tjx_max_f32\(\w+, 0\.0f\)", exe.source)      # zero: the old order
  got = _run_exe(exe, x)
  with np.errstate(invalid='ignore', over='ignore'):
    want = (np.clip(x, np.float32(-100), np.float32(100)), np.maximum(x, np.float32(0)),
            np.minimum(np.float32(-0.0), x), np.maximum(x, np.float32(-np.inf)),
            np.nan_to_num(np.round(np.clip(x * np.float32(10), -100, 100)), nan=0).astype(np.int32))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g.view(np.int32), np.asarray(w).view(np.int32))    # bit for bit, NaN signs too

@pytest.mark.parametrize('n', [0, 1, 2, 3, 4, 5, 7, 8, 9, 100, 4096])
def test_a_compiled_searchsorted_matches_numpy_at_every_size(cpu, n):
  """The binary search halves a window whose sizes are known when tracing (log2(n) + 1 reads): both sides, NaN
  sorting last, values below, between, equal to and above the entries, compiled on vectors long enough to take
  the vector loop."""
  rng = np.random.default_rng(n)
  a = np.sort(rng.integers(0, 20, n).astype(np.float32))
  if n > 3: a[-2:] = np.nan
  v = np.concatenate([rng.integers(-2, 23, 300).astype(np.float32), a, [np.nan, np.inf, -np.inf]]).astype(np.float32)
  for side in ('left', 'right'):
    exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda a, v: jnp.searchsorted(a, v, side=side))(a, v))
    np.testing.assert_array_equal(_run_exe(exe, a, v)[0], np.searchsorted(a, v, side=side), err_msg=side)

@pytest.mark.parametrize('rows, cols, tiles', [(1100, 1024, 2), (1100, 2000, 2), (8100, 130, 2), (9000, 127, 1),
                                               (600, 64, 1), (400, 3000, 3), (500, 1024, 1)])
def test_a_big_column_sum_runs_its_tiles_on_all_threads(cpu, rows, cols, tiles):
  """`x.sum(0)` reading COLUMN_SPLIT elements or more: the row of accumulators is cut into tiles of 64 to 1024
  columns, at least two where the row has 128 columns or more (a prime one stays whole), and the loop over tiles
  is the parallel one; a smaller one keeps a row of up to 1024. Each column is summed in the same order whatever
  the tiles; results match numpy's."""
  x = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32)
  exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda x: x.sum(0))(x))
  src = exe.source[exe.source.find('k0_reduce_sum('):]
  if tiles > 1:
    assert f"< {tiles}; " in src.split('\n')[2] and src.split('\n')[1].startswith('#pragma omp parallel for'), src
  else:
    assert '#pragma omp parallel' not in src.split('\n')[1], src
  np.testing.assert_allclose(_run_exe(exe, x)[0], x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-4)

GUARDED = [   # (function of a (rows, w) array, numpy's), masks on the loops' variables; exact arithmetic only
  (lambda x: jnp.concatenate([x[:, :1] * 2.0, jnp.sqrt(jnp.abs(x[:, 1:])), x[:, -1:] - 1.0], -1),
   lambda x: np.concatenate([x[:, :1] * 2.0, np.sqrt(np.abs(x[:, 1:])), x[:, -1:] - 1.0], -1)),
  (lambda x: jnp.pad(x * x, ((2, 1), (3, 5))) * 3.0, lambda x: np.pad(x * x, ((2, 1), (3, 5))) * 3.0),
  (lambda x: jnp.concatenate([x, jnp.flip(x, -1)], -1) + 1.0,
   lambda x: np.concatenate([x, np.flip(x, -1)], -1) + 1.0),
  (lambda x: jnp.where((jnp.arange(x.shape[-1]) < 5) | (jnp.arange(x.shape[-1]) > x.shape[-1] - 3), x, -x),
   lambda x: np.where((np.arange(x.shape[-1]) < 5) | (np.arange(x.shape[-1]) > x.shape[-1] - 3), x, -x))]

def _first_kernel_and_reference_bits(cpu, f, x):
  """The C of f's first kernel on the CPU, and f(x) there, checked against the PYTHON device bit for bit."""
  with tinyjx.Context(JAX_ENABLE_X64=True):
    source = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x)).source
    with tinyjx.Context(TINYJX_DEVICE='CPU'): got = np.asarray(tinyjx.jit(f)(x))
    with tinyjx.Context(TINYJX_DEVICE='PYTHON'): ref = np.asarray(tinyjx.jit(f)(x))
  np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8), err_msg=f"{x.shape} {x.dtype}")
  return source[source.index('static void k0'):source.index('void tjx_kernel_0')], got

@pytest.mark.parametrize('w', [1, 7, 31, 33, 255, 257])
def test_a_loop_over_masked_pieces_runs_as_one_loop_a_piece(cpu, w):
  """`split_guards`: a loop whose masks compare its variable with constants (a concatenation's pieces, a pad's
  edges, a where on an iota) runs as one loop for each range where every mask is constant, with the masks folded:
  no select is left where every loop was long enough to split (a loop of 2 is written out instead, a loop of 7 to
  15 stays whole); the values are the PYTHON device's bit for bit and numpy's, float32 and float64, at every tile
  edge."""
  rng = np.random.default_rng(w)
  for dt in (np.float32, np.float64):
    x = rng.standard_normal((13, w)).astype(dt)                 # the pad has 16 rows: split too
    for i, (f, npf) in enumerate(GUARDED):
      kernel, got = _first_kernel_and_reference_bits(cpu, f, x)
      tol = 1e-6 if dt is np.float32 else 1e-14
      np.testing.assert_allclose(got, npf(x), rtol=tol, atol=tol, err_msg=f"{w} {i} {dt}")
      if w > 1: assert ('?' not in kernel) == (w > 8), (w, i, dt, kernel)   # no select left where all were split

def test_masks_that_do_not_split_a_loop_keep_it_whole(cpu):
  """A mask on two variables (a triangle), more pieces than SPLIT_RANGES, or pieces all shorter than SPLIT_LONG
  leave the loop as it was; a pad on two axes splits both loops."""
  x = np.random.default_rng(1).standard_normal((40, 40)).astype(np.float32)
  def kernel(f):
    src = cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(x)).source
    return src[src.index('static void k0'):src.index('void tjx_kernel_0')]
  tri = kernel(lambda x: jnp.where(jnp.arange(40)[:, None] < jnp.arange(40)[None, :], x, 0.0) + 1.0)
  many = kernel(lambda x: jnp.concatenate([x[:, 4 * j:4 * j + 4] * (j + 1) for j in range(10)], -1))
  pad2 = kernel(lambda x: jnp.pad(x * 2.0, ((3, 4), (5, 6))))
  assert tri.count('for (') == 2 and many.count('for (') == 2
  assert pad2.count('for (') == 3 + 3 * 3 and 'tjx_zero' not in pad2          # 3 row loops of 3 column loops
  for f in (lambda x: jnp.pad(x * 2.0, ((3, 4), (5, 6))),
            lambda x: jnp.concatenate([x[:, 4 * j:4 * j + 4] * (j + 1) for j in range(10)], -1)):
    with tinyjx.Context(TINYJX_DEVICE='CPU'): got = np.asarray(tinyjx.jit(f)(x))
    with tinyjx.Context(TINYJX_DEVICE='PYTHON'): ref = np.asarray(tinyjx.jit(f)(x))
    np.testing.assert_array_equal(got, ref)

@pytest.mark.parametrize('w', [1, 7, 33, 256])
def test_interleaved_pieces_and_single_points_fold_their_masks(cpu, w):
  """`split_guards` on two more shapes of mask: pieces interleaved by a merged reshape (`stack([a, b], -1)`, complex
  parts written as pairs: the loop over v runs over v / 2 with both stores written out, their masks on v % 2
  folded) and a single point (`arange(w) == 3`, the frequencies of rfft's ends: three ranges). No select is left
  and the values are the PYTHON device's bit for bit and numpy's, float32 and float64."""
  rng = np.random.default_rng(w)
  cases = [(lambda x: jnp.stack([x * 2.0, -x], -1).reshape(x.shape[0], -1),
            lambda x: np.stack([x * 2.0, -x], -1).reshape(x.shape[0], -1)),
           (lambda x: jnp.where((jnp.arange(x.shape[-1]) == 3) | (jnp.arange(x.shape[-1]) >= x.shape[-1] - 1), 0.0, x),
            lambda x: np.where((np.arange(x.shape[-1]) == 3) | (np.arange(x.shape[-1]) >= x.shape[-1] - 1), 0.0, x))]
  for dt in (np.float32, np.float64):
    x = rng.standard_normal((6, w)).astype(dt)
    for i, (f, npf) in enumerate(cases):
      kernel, got = _first_kernel_and_reference_bits(cpu, f, x)
      np.testing.assert_array_equal(got, npf(x))
      if i == 0 or w >= optimize.SPLIT_MIN: assert '?' not in kernel, (w, i, kernel)
