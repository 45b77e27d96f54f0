"""optimize: per-kernel rewrites of the statement tree that change speed, never results (but see `block_sums`).

Each rewrite is `name(kernel, device)` and changes the kernel in place. Each is a named pass of
`tinyjx.lower.PASSES`, which alone knows their order and runs them on every kernel of a loop-nest device
(`kernel_shape == 'loops'`; GPU grids are optimize_gpu.py), skipping the kernels `as_matmul` made a `Matmul`:
- `as_matmul`: a sum of products whose operands each miss some output axis (a matmul, a batched matmul,
  `(a[:, None, :] * b.T[None]).sum(-1)`) becomes a `Matmul`: both operands are packed into panels (evaluating
  whatever elementwise producers were fused into them), a register-blocked micro-kernel multiplies the
  panels, and the rest of the kernel (bias, activation, a transposed store) runs on each result tile. Its
  tiling (`plan_matmul`: tile sizes for the device's `vector_bytes`, which side is packed whole, chunks of a long
  contraction, a split contraction) travels on the statement as a `MatmulPlan`; lower/matmul.py only writes
  it out. A convolution's windows are read in place (a direct plan); where they lie over a zero-padded array
  (`Kernel.zero_pads`), `Matmul.skip` says which contraction rows a block of rows can skip; a short one (a first
  convolution's 25 taps) puts an output row in the vector lanes instead (`lane_rows_tile`);
- `unroll_windows`: a reduction of at most SMALL_REDUCE elements per iteration of an enclosing loop (a 2 x 2 pool's
  window) is its updates written out, so the loop over the outputs vectorizes;
- `merge_nests`: two nested loops that walk every address as one loop would (the last two axes of a contiguous
  array) become one loop: a 20 x 20 image is one vector loop of 400, not 20 of 20 with a remainder each;
- `split_guards`: a loop whose masks compare its variable with constants (a concatenation's pieces, a pad's edges)
  runs as one loop for each range where the masks are constant, masks folded: plain loads, which vectorize; an
  inner loop of two that selects on its variable, or a loop whose masks test its variable modulo two (complex
  parts interleaved), has its stores written out for each value, folded;
- `as_column_reduction`: a reduction over a strided axis (`x.sum(0)`) keeps a row of accumulators, so the
  innermost loop walks memory in order and vectorizes;
- `as_column_scan`: a scan along an axis that is not the last (`cumsum(x, 0)`) keeps a row of running values, so
  the innermost loop walks memory in order and vectorizes;
- `split_reductions`: a big reduction at the top of a kernel runs as a fixed number of parallel chunks,
  combined in order (the result does not depend on the thread count);
- `stash_shared`: an expensive expression two sibling loops both compute (softmax's exp) is computed once;
- `split_chains`: an elementwise loop whose exp, log, tanh or erf waits on a long computation of its argument runs in
  blocks, each as two loops (the arguments into local arrays, then the functions): shorter dependent chains; a
  function of a function (softplus' log1p of an exp) is cut between the two;
- `tile_transposes`: an elementwise nest that reads some input across its innermost loop (a transpose) runs that
  loop in blocks of one cache line, outside the loop along which the read is contiguous;
- `block_sums`: the one rewrite here that changes rounding, on purpose: a float32 sum adds float32 partials of at
  most BLOCK elements (COLUMN_BLOCK rows for a column sum) into a total the renderer keeps in double, so sums are
  as accurate as the PYTHON device's (which sums float32 in float64) whatever their length and layout;
- `pipeline_rows`: a loop over rows that first reduces each row from memory (softmax's max) and then walks it again
  (the sum of exps) runs each row's first pass inside the row before's second loop: the next row's loads overlap
  this row's arithmetic;
- `reduce_in_memory_order`: a reduction that keeps an axis lying between the axes it reduces (a batch norm's channel
  sums over N, H and W) walks groups of adjacent kept values with the outer reduced axis outside, reading memory in
  order instead of a short run per value and image;
- `mark_parallel`: the outermost independent loop with enough work runs on all threads (OpenMP), a big one handing
  out its iterations to whichever thread is free (`Loop.dynamic`);
- `stream_stores`: a kernel that stores STREAM_BYTES or more in blocks (a split chain's second loop, a transpose's
  cache line) writes them with streaming stores, past the caches (a `Stream` statement);
- `defer_row_stores`: in pipelined rows whose results are streamed (softmax's division by the sum), each row's
  results are computed inside the next row's second loop, where the divisions overlap its arithmetic;
- `block_transposes`: a transpose's copy, a cache line of the output at a time, moves square blocks (a vector's
  lanes on a side) through vector registers (a `Transpose` statement) instead of gathering each line one element a
  row;
- `estimate(kernel, slot_bytes)`, a pass on every device: work estimates (flops, bytes) for DEBUG=2, the counters
  and VIZ.
Loops marked `serial` (reductions, scatters with duplicate indices) are never run in parallel.
"""
from __future__ import annotations
import collections, dataclasses, itertools, math
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops, GroupOp, toposort, substitute
from tinyjx.lower import symbolic as sym
from tinyjx.lower.prelude import FAST_F32
from tinyjx.lower.index import (Loop, Decl, Update, Store, Sort, Kernel, Matmul, MatmulPlan, Local, Assign, Stream,
                                Transpose, unflatten, strides, is_reduce_then_store, identity, scalar, walk)
from tinyjx.lower.symbolic import IDX

PARALLEL_WORK = 1 << 16          # below this many operations a parallel region costs more than it saves
DYNAMIC_WORK = 1 << 22           # operations from which a parallel loop's iterations go to whichever thread is free
MATMUL_MIN_WORK = 1 << 15        # multiply-adds below which the plain loop nest is as fast
MATMUL_MIN_K = 4                 # a shorter contraction is a column reduction: packing would cost more
MICRO_ROWS = 12                  # rows of a matmul micro-tile: 2 x 12 vector accumulators fit 32 registers (AVX-512)
MICRO_ROWS_16 = 6                # with 16 vector registers (AVX2): 2 x 6 accumulators, two loads and a broadcast
MICRO_ROWS_RUN = 10              # rows of a direct micro-tile (AVX-512) whose runs of x fit 10 rows, not 12
MICRO_ROWS_SCATTERED = 8         # rows of a direct micro-tile (AVX-512) whose rows are not one run of x
PACK_CACHE = 1 << 19             # bytes of a packed operand that stay in cache while the other side streams past
KC_TARGET = 256                  # contraction rows per chunk of a long contraction (a convolution's direct plan)
KC_MATMUL = 512                  # contraction rows per chunk of a plain matmul's contraction longer than 2 * KC_TARGET
ROWS_PANEL = 1 << 20             # bytes of a panel of y up to which an x read in place runs its contraction unchunked
L1_SPAN = 4096                   # bytes after which an address falls in the same L1 set again (32 KiB of 8 ways)
ALIAS_ROWS = 6                   # rows of x read in place that may share an L1 set before they evict each other
GROUP_WORK = 8                   # parallel work items a chunked matmul keeps when it groups panels (up to 8 a group)
SPLIT_GROUPS = 16                # groups of chunks of a split contraction (fixed: results never depend on threads)
WINDOW_REUSE = 4                 # an operand that reads each element this many times is a sliding window (im2col)
DIRECT_WHOLE = 1 << 18           # bytes of packed y a direct matmul keeps in L2 (whole, or one chunk of every panel)
DIRECT_TILES = 1 << 20           # bytes of result tiles a chunked direct matmul keeps between its chunks
DIRECT_SPLIT_PANELS = 4          # a chunked direct matmul with fewer panels of y splits its chunks among threads
LANE_ROWS_K = 32                 # a direct matmul's contraction up to this long may put its rows in the lanes
BY_ROWS_Y = 1 << 16              # bytes of y below which an unchunked matmul packs it all and runs by rows
COLUMN_SPLIT = 1 << 20           # elements read from which a column reduction runs its row in tiles on all threads
STREAM_BYTES = 1 << 24           # bytes a kernel stores in blocks from which those blocks are written past the caches
STREAM_MIN = 16                  # elements of the shortest block stored so (one cache line of float32)
LINE = 64                        # bytes of a cache line (streamed blocks; a transposed read runs in blocks of a line)

NOT_ARITHMETIC = {Ops.CONST, Ops.RANGE, Ops.SPECIAL, Ops.DEFINE_ACC, Ops.DEFINE_GLOBAL, Ops.LOAD, Ops.INDEX}

def expr_cost(u: UOp) -> int:
  """Arithmetic operations on values in an expression (index arithmetic, masks and loads are not counted)."""
  def counts(n: UOp) -> bool:
    if n.op in NOT_ARITHMETIC or n.dtype is IDX: return False
    return n.dtype is not dtypes.bool_ or n.src[0].dtype not in (IDX, dtypes.bool_)
  return sum(1 for n in toposort([u]) if counts(n))

def work(stmts: list, trips: int = 1) -> int:
  """Estimated operations of a statement list executed `trips` times."""
  total = 0
  for s in stmts:
    if isinstance(s, Loop): total += work(s.body, trips * s.size)
    elif isinstance(s, Update): total += trips * (expr_cost(s.value) + 1)
    elif isinstance(s, Store): total += trips * max(expr_cost(s.value), 1)
    elif isinstance(s, Assign): total += trips * expr_cost(s.value)
    elif isinstance(s, Sort): total += math.prod(s.shape) * max(1, math.ceil(math.log2(max(s.shape[s.axis], 2))))
    elif hasattr(s, 'work'): total += trips * s.work
  return total

def _streamable(s) -> bool:
  """A loop of STREAM_MIN or more iterations, run by one thread, whose body is one unconditional float store at an
  index that moves by one element with the loop's variable (and with nothing else of it), and whose block starts
  at a multiple of LINE bytes into the buffer wherever the other loops are: then no two blocks share a cache line.
  (Blocks that do, the 28-float rows of a padded 28 x 28 image, would mix streaming and plain stores in one line,
  and each such line is read back from memory: a CNN step's pad of 26 MB took 11 ms instead of 1.)"""
  if not isinstance(s, Loop) or s.parallel or s.serial or s.acc is not None or s.size < STREAM_MIN: return False
  if len(s.body) != 1 or not isinstance(st := s.body[0], Store): return False
  if st.valid.op is not Ops.CONST or not st.valid.arg[0]: return False
  if st.buf.dtype not in (dtypes.float32, dtypes.float64): return False
  terms, c = sym.linear(st.idx)
  rest = {a: v for a, v in terms.items() if a is not s.var}
  if terms.get(s.var) != 1 or s.var in sym.loop_vars(sym.from_linear(rest, c)): return False
  size = st.buf.dtype.itemsize
  return all(v * size % LINE == 0 for v in (*rest.values(), c))

def _stream_blocks(stmts: list, trips: int, found: list) -> None:
  """(statement list, index, bytes stored) of each `_streamable` loop below `stmts`, run `trips` times."""
  for i, s in enumerate(stmts):
    if _streamable(s): found.append((stmts, i, trips * s.size * s.body[0].buf.dtype.itemsize))
    elif isinstance(s, Loop): _stream_blocks(s.body, trips * s.size, found)

def stream_stores(k: Kernel, device=None) -> None:
  """A kernel that stores STREAM_BYTES or more in blocks (`_streamable`: a split chain's second loop, a transpose's
  cache line) writes each block past the caches: the loop assigns a local array, and a `Stream` statement stores it
  with streaming stores, which write whole lines without first reading them into the cache. Far more than the
  caches hold would have been read for nothing and evicted again: on a Zen 4 EPYC, a 2048 x 2048 transpose ran
  3.2-3.7 -> 1.6-2.3 ms (kernel alone, alternated), the gelu of 4M float32 (16 MiB written, 64 MiB moved) 5-8%
  faster (jitted, medians of alternated runs 1.32-1.40 -> 1.24-1.32 ms). Results are the same bits: only where the
  stores go changes."""
  found: list = []
  _stream_blocks(k.body, 1, found)
  if sum(nbytes for _, _, nbytes in found) < STREAM_BYTES: return
  na = _max_acc(k.body) + 1
  for n, (stmts, i, _) in reversed(list(enumerate(found))):   # (later blocks of one list first: indices hold)
    loop, st = stmts[i], stmts[i].body[0]
    acc = UOp(Ops.DEFINE_ACC, st.buf.dtype, (), (na + n, None))
    base = sym.resimplify(substitute([st.idx], {loop.var: sym.const(0)})[0])
    stmts[i:i + 1] = [Local(acc, loop.size), Loop(loop.var, [Assign(acc, loop.var, st.value)]),
                      Stream(st.buf, base, acc, loop.size)]

def defer_row_stores(k: Kernel, device=None) -> None:
  """In a chunk of rows `pipeline_rows` made (a serial loop over rows whose second loop also reduces the next row),
  a row's last pass, which streams its results past the caches (`stream_stores`) from the second loop's row buffer
  and the row's totals (softmax's division by the sum), computes them inside the next row's second loop instead.
  After that loop, the division pass kept the divider busy while the multiply-add units idled (64 divisions a
  1024-float row); inside it, the two overlap. The row buffer is doubled (rows alternate halves), the totals the
  pass reads are kept for the next row (`prev`, copied into the row's own scalars: the renderer never hoists them
  out of the row loop), the chunk's first row runs before the loop without results, and its last row's results are
  computed after it. Every result is the same operation on the same values: results do not change. A row softmax of
  4096 x 1024 float32 (jitted, alternated): 1.11-1.20 -> 0.91-1.02 ms median. Rows whose results stay in cache gain
  nothing (1024 x 1024 ran 0.218 ms either way) and are left as they are."""
  for s in walk(k.body):
    if isinstance(s, Loop):
      for i, r in enumerate(s.body):
        if isinstance(r, Loop) and r.serial and (new := _deferred(r, k)) is not None:
          s.body[i:i + 1] = new
          return

def _deferred(rows: Loop, k: Kernel) -> list | None:
  """The statements replacing `rows` for `defer_row_stores`, or None where its body is not such a row."""
  body = rows.body
  loops = [j for j, st in enumerate(body) if isinstance(st, Loop)]
  if rows.size < 2 or len(loops) != 2 or loops[1] < 1: return None
  a, last, out, stream = body[loops[0]], body[loops[1]], body[loops[1] - 1], body[loops[1] + 1:]
  if not a.extra or a.acc is None or last.acc is not None or len(last.body) != 1 or last.size != a.size: return None
  st = last.body[0]
  if not (isinstance(st, Assign) and st.at is last.var and isinstance(out, Local) and out.acc is st.acc and
          len(stream) == 1 and isinstance(stream[0], Stream) and stream[0].acc is st.acc): return None
  # the row buffer: a Local of the row, assigned whole by the second loop at its variable
  bufs = [b for b in a.body if isinstance(b, Assign) and b.at is a.var]
  locals_ = {d.acc: d for d in body if isinstance(d, Local)}
  if len(bufs) != 1 or bufs[0].acc not in locals_ or locals_[bufs[0].acc].size != a.size: return None
  buf, n, value, base = bufs[0].acc, a.size, st.value, stream[0].base
  nodes = toposort([value])
  if any(x.op is Ops.INDEX and (x.src[0] is not buf or x.src[1] is not last.var) for x in nodes) or \
     _reads_outputs(value, k): return None
  # nothing else reads the buffer (it moves into the doubled one); the totals read are numbers kept in a scalar
  others = [b for b in walk(body) if b is not bufs[0] and b is not st and isinstance(b, (Assign, Update, Store))]
  if any(buf in toposort([b.value]) for b in others): return None
  inside = {d.acc for d in walk(body) if isinstance(d, (Decl, Local, Assign, Update))}
  scalars = [x for x in nodes if x.op is Ops.DEFINE_ACC and x is not buf and x in inside]
  if any(x in locals_ or x.dtype is dtypes.bool_ for x in scalars): return None
  nv, na = _max_var(k.body) + 1, _max_acc(k.body) + 1
  half = UOp(Ops.DEFINE_ACC, buf.dtype, (), (na, None))
  prev = {x: UOp(Ops.DEFINE_ACC, x.dtype, (), (na + 1 + j, Ops.MAX)) for j, x in enumerate(scalars)}
  seen = {x: UOp(Ops.DEFINE_ACC, x.dtype, (), (na + 1 + len(scalars) + j, Ops.MAX)) for j, x in enumerate(scalars)}
  slot = lambda row: sym.mul(sym.mod(row, 2), n)          # (constants fold: the chunk's last row's half)
  def results(row: UOp, at: UOp, totals: dict) -> UOp:
    """The last pass's value for row `row` at element `at`, its totals read from `totals`."""
    v = _rewrite(value, {rows.var: row, last.var: at})
    moved = UOp(Ops.INDEX, buf.dtype, (half, sym.add(slot(row), at)))
    return substitute([v], {UOp(Ops.INDEX, buf.dtype, (buf, at)): moved, **totals})[0]
  def row_body(row: UOp, before: UOp | None) -> list:
    """The row's statements at row `row` up to its last pass, its buffer in its half; with `before`, the results of
    that row inside the second loop."""
    stmts = []
    for x in _moved(body[:loops[1] - 1], {rows.var: row}):
      if isinstance(x, Local) and x.acc is buf: continue
      if isinstance(x, Loop) and x.var is a.var:
        fill = [Assign(half, sym.add(slot(row), a.var), b.value) if isinstance(b, Assign) and b.acc is buf else b
                for b in x.body]
        if before is not None: fill.append(Assign(st.acc, a.var, results(before, a.var, seen)))
        x = dataclasses.replace(x, body=fill)
      stmts.append(x)
    return stmts
  keep = [Assign(prev[x], None, x) for x in scalars]
  r2 = sym.loop_var(nv, rows.size - 1)
  later = [*(s0 for x in scalars for s0 in (Decl(seen[x]), Assign(seen[x], None, prev[x]))),
           *row_body(sym.add(r2, sym.const(1)), r2), Stream(stream[0].buf, _rewrite(base, {rows.var: r2}), st.acc, n),
           *keep]
  end = sym.const(rows.size - 1)
  # (the first row in a loop of one: its own C block, so its declarations and the renderer's temporaries of them do
  # not meet the later rows')
  return [Local(half, 2 * n), Local(st.acc, n), *(Decl(prev[x]) for x in scalars),
          Loop(sym.loop_var(nv + 1, 1), row_body(sym.const(0), None) + keep, serial=True), Loop(r2, later, serial=True),
          Loop(last.var, [Assign(st.acc, last.var, results(end, last.var, prev))]),
          Stream(stream[0].buf, _rewrite(base, {rows.var: end}), st.acc, n)]

def block_transposes(k: Kernel, device=None) -> None:
  """A copy that `tile_transposes` made a cache line of the output at a time (a materialized transpose: each line
  gathered from a column of lanes source rows, one load and one insert an element, into a local block the line is
  then streamed from) moves lanes x lanes blocks through vector registers instead (`Transpose`, the C renderer's
  `tjx_trb`: lanes loads, log2(lanes) rounds of shuffles, lanes stores), a line's worth of them at a time: the loop
  along the source's rows steps lanes rows. On the C device only, for float32 and float64 copies whose blocks
  divide that loop and the line: the same values go to the same places, so results do not change. A 2048 x 2048
  float32 transpose, jitted: 2.07 -> 0.91 ms best (median 3.44 -> 1.01 on a busy machine)."""
  if device is None or device.renderer != 'C': return
  for s in [k, *(l for l in walk(k.body) if isinstance(l, Loop))]:
    for i, a in enumerate(s.body):
      if isinstance(a, Loop) and (new := _block_transpose(a, k, device.vector_bytes)) is not None: s.body[i] = new

def _block_transpose(a: Loop, k: Kernel, vector_bytes: int) -> Loop | None:
  """`a` stepping a block at a time over `Transpose` statements, or None where its body is no such copy: one line
  (loop `bi` of lanes) of an output assigned from a source that moves lanes or more elements with bi and one with
  a, streamed (`stream_stores`) or stored."""
  body, stream = a.body, len(a.body) == 3
  if a.parallel or a.serial or a.acc is not None or not body or not isinstance(body[-2 if stream else 0], Loop):
    return None
  bi = body[-2 if stream else 0]
  if len(bi.body) != 1: return None
  st = bi.body[0]
  if stream:
    local, out = body[0], body[2]
    if not (isinstance(local, Local) and isinstance(out, Stream) and isinstance(st, Assign) and st.acc is local.acc
            and out.acc is local.acc and st.at is bi.var and out.size == bi.size): return None
    dst, base = out.buf, out.base
  else:
    if not isinstance(st, Store) or st.valid.op is not Ops.CONST or not st.valid.arg[0]: return None
    terms, _ = sym.linear(st.idx)
    if terms.get(bi.var) != 1: return None
    dst, base = st.buf, sym.resimplify(substitute([st.idx], {bi.var: sym.const(0)})[0])
  load = st.value
  if load.op is not Ops.LOAD or len(load.src) != 2 or load.dtype is not dst.dtype: return None
  lanes = vector_bytes // load.dtype.itemsize
  if load.dtype not in (dtypes.float32, dtypes.float64) or bi.size % lanes or a.size % lanes: return None
  (src_terms, _), (dst_terms, _) = sym.linear(load.src[1]), sym.linear(base)
  stride, along, step = src_terms.get(bi.var, 0), src_terms.get(a.var), dst_terms.get(a.var, 0)
  mixed = [v for terms in (src_terms, dst_terms) for t in terms if t is not bi.var and t is not a.var
           for v in sym.loop_vars(t) if v is bi.var or v is a.var]
  if mixed or bi.var in dst_terms or along != 1 or stride <= 0 or step <= 0: return None
  blocks = sym.loop_var(_max_var(k.body) + 1, a.size // lanes)
  at = {a.var: sym.mul(blocks, lanes), bi.var: sym.const(0)}
  src_base, dst_base = (sym.resimplify(substitute([e], at)[0]) for e in (load.src[1], base))
  return Loop(blocks, [Transpose(load.src[0], src_base, stride, dst, dst_base, step, lanes, bi.size, stream)])

def mark_parallel(k: Kernel, device=None) -> None:
  """The outermost independent loops with enough work run on all threads, unless some top-level loop already does.
  One with DYNAMIC_WORK or more is `dynamic`: its iterations are handed out in pieces to whichever thread is free,
  so a thread on a busy core (another process, a neighbour on a shared host) does not hold up the rest (a gelu of
  4M float32 with one of two cores kept busy: 1.8-2.1 ms against 1.9-3.1 in fixed halves; idle, the same). Its
  iterations are independent, so results do not change. Smaller loops keep fixed shares: the next kernel's thread
  then finds its share of a small intermediate in its own cache."""
  if any(isinstance(s, Loop) and s.parallel for s in k.body): return
  for s in k.body:
    if isinstance(s, Loop) and not s.serial and s.size > 1 and (w := work([s])) >= PARALLEL_WORK:
      s.parallel, s.dynamic = True, w >= DYNAMIC_WORK

def _perfect_nest(stmts: list) -> tuple[list, list]:
  """The loops of a chain where each loop holds only the next one, and the innermost body."""
  loops = []
  while len(stmts) == 1 and isinstance(stmts[0], Loop):
    loops.append(stmts[0])
    stmts = stmts[0].body
  return loops, stmts

def _flat_vars(vars_: list, name: str) -> tuple[UOp, dict]:
  """One template variable running over the product of `vars_`, and each var as an expression of it."""
  size = math.prod(v.arg[1] for v in vars_)
  flat = sym.special(name, size)
  return flat, dict(zip(vars_, unflatten(flat, [v.arg[1] for v in vars_])))

def _rewrite(u: UOp, mapping: dict) -> UOp: return sym.resimplify(substitute([u], mapping)[0])

def _contiguous_along(u: UOp, along: UOp, other: UOp) -> bool:
  """The loads of `u` that move with variable `along` walk memory in order along it, but not along `other` (a load
  that does not move with it, a bias of a fused relu gradient, reads one element for the whole walk)."""
  loads = [sym.linear(n.src[1])[0] for n in toposort([u]) if n.op is Ops.LOAD and along in sym.loop_vars(n.src[1])]
  return bool(loads) and all(t.get(along) == 1 and t.get(other) != 1 for t in loads)

def _row_run(x: UOp, iv: list) -> int:
  """How many consecutive rows of x (row variables `iv`, innermost last) are consecutive elements of its buffer: the
  innermost row variables' extents while each moves x by the run so far (a convolution's output width)."""
  terms, run = sym.linear(x.src[1])[0], 1
  for v in reversed(iv):
    if terms.get(v) != run: break
    run *= v.arg[1]
  return run

def lane_rows_tile(m: int, n: int, k: int, run: int, xdtype, dtype, vector_bytes: int) -> tuple[int, int] | None:
  """(rows, columns) of a direct matmul's tile with its rows in the vector lanes (`MatmulPlan.lane_rows`), or None
  where it does not take one: a short contraction (at most LANE_ROWS_K: a first convolution, one input channel and
  25 taps) whose x runs `run` consecutive rows (an output row of the convolution) that are whole vectors, at most
  three (four with 32 registers). A tile is one run of rows by as many columns as leave 12 (24) accumulators: a
  step of the contraction loads the run's vectors of x in place and broadcasts each column's value of y, and the
  tile is already stored by columns (a convolution's output runs along its positions) with no transpose. With the
  rows across a tile's columns instead, each tile's 25 steps cost about what its transpose and stores did: the first
  convolution of the mnist step (256 x 1 x 28 x 28 -> 32 x 24 x 24, with its bias and ReLU) 4.4 -> 2.5 ms."""
  lanes, wide = vector_bytes // dtype.itemsize, vector_bytes >= 64
  if k > LANE_ROWS_K or xdtype is not dtype or dtype not in (dtypes.float32, dtypes.float64) or lanes < 2: return None
  vectors = run // lanes
  if run % lanes or not 1 <= vectors <= (4 if wide else 3) or m % run: return None
  return run, min((24 if wide else 12) // vectors, n)

def _direct_rows(m: int, run: int) -> int:
  """The rows of a direct plan's micro-tile (AVX-512), for x's runs of `run` consecutive rows: MICRO_ROWS, or else
  MICRO_ROWS_RUN, where at least 90% of the blocks lie in one run (TJX_MICRO_DIRECT then reads a block from one
  pointer at constant offsets), else MICRO_ROWS_SCATTERED: a block read through a pointer per row keeps its eight
  pointers in registers, where twelve spill (a weight gradient's rows of taps, runs of the kernel's width: 9%
  faster; the input gradient of 8 x 8 images, 21%). Runs of 10 or 20 (an input gradient of 10 x 10 images, the
  forward convolution of 20 x 20 outputs) take 10 rows: 16% faster than 8 on the first."""
  if run >= m: return MICRO_ROWS
  for mr in (MICRO_ROWS, MICRO_ROWS_RUN):
    period = math.lcm(mr, run)
    if sum(b % run + mr <= run for b in range(0, period, mr)) >= 0.9 * (period // mr): return mr
  return MICRO_ROWS_SCATTERED

def plan_matmul(m: int, n: int, k: int, dtype, outer: int, vector_bytes: int, direct: bool = False,
                rows: bool = False, run: int = 0, stores: int = 1, row_stride: int = 0, cores: int = 1) -> MatmulPlan:
  """The tiling of an (m x k) @ (k x n) contraction whose outermost contraction variable has `outer` values.

  Tiles are MICRO_ROWS x (two vectors), or half the rows and twice the columns (`wide_tile`) where x is read in
  place and its rows, `row_stride` bytes apart, would evict each other from L1 (and the panels, where they are the
  parallel work, still go round the machine's `cores` as few times). x is packed whole unless it is big
  and y fits in cache (then y is whole and x streams a panel at a time). A contraction longer than 2 * KC_TARGET runs
  in chunks of the outermost contraction variable of about KC_MATMUL rows, so the whole side's rows of one chunk stay
  in cache while every panel passes (512 rather than 256: half the micro-kernel calls and passes over the result
  tiles, and a block of 12 rows of x is still 24 KB, in L1; the 1024 matmul 3.5% faster, x packed or in place). With
  few panels but many chunks (a weight gradient) the chunks, of KC_TARGET rows, are the parallel work, in SPLIT_GROUPS
  groups; otherwise the parallel work is a `group` of up to 8 panels (keeping GROUP_WORK items), so each block of the
  whole side is read from cache once for all the group's panels.

  Which operand is x is `as_matmul`'s (`_packed_orientation`: the output's contiguous axis along the tile's columns,
  unless turning the tile pads far fewer products). An x that is one load contiguous along the contraction (`rows`,
  see `_rows_in_place`) is read in place, a block of rows at a time, chunked or not, whole or streaming (`x_rows`):
  packing it is a pass over x (a transpose, 1 ms of a 1024 matmul's 7.7 on the Xeon) and a barrier, and the
  micro-kernel reads a block's rows from cache as fast as a packed panel (kernels alone: the 1024 matmul 11% faster,
  512 x 784 x 512 18%, 4096 x 1024 x 256 40%; streaming, with y packed whole, 8192 x 1024 x 64 35%). Not streaming,
  such an x takes the whole contraction unchunked while a panel of y fits ROWS_PANEL: each thread's panel stays in
  its L2, and no result tile goes out to memory and back between chunks (on a Zen 4 EPYC with 1 MiB of L2 a core:
  the 1024 matmul 8% faster, 512 x 784 x 512 6%, 512 x 8192 x 512 5%; a packed x keeps its chunks, 2048 ran 7% slower
  whole).

  An unchunked plan with x packed whole (or read in place) runs `by_rows`, each thread a block of rows against every
  panel of y, packed first, where the epilogue writes several outputs (`stores`: an optimizer's update loads and
  stores three arrays at each result, which then run along rows: the MLP step's first weight gradient with its Adam
  update 2.01 -> 1.75 ms) or where all of y is small (BY_ROWS_Y bytes: a contraction of 10, whose tiles are mostly
  their stores, stores whole rows; the MLP step's 512 x 10 x 512 gradient 204 -> 75 us), as long as there are two
  blocks of rows or more (with one, a thread's block would be the whole work: the logits layer's weight gradient,
  10 x 512 x 512 with its Adam update, ran on one thread). With several outputs and x packed it also `prefetch`es:
  the micro-kernel fetches the next tile's epilogue lines, one every other contraction row (the MLP step's weight
  gradients with their Adam updates 7-10% faster; with x read in place, 4% slower: the table's pointers and counters
  join twelve row pointers in the registers); an optimized build also runs each tile's update inside the next tile's
  contraction (lower/matmul.py `overlapped_tiles`: 4-7% faster again).

  A `direct` plan (x a sliding window that `direct_fits`, in runs of `run` consecutive rows) reads x in place
  (`_direct_rows` rows a tile) and packs only y: whole where it is
  small enough for L2, and every block of x runs the whole contraction; otherwise the contraction runs in chunks
  (as above), outermost: each chunk of y is packed, then every block of x adds it into its row of result tiles.
  With fewer than DIRECT_SPLIT_PANELS panels of y and many chunks (a convolution's weight gradient) the chunks are
  split among SPLIT_GROUPS groups instead, each packing its own.

  >>> from tinyjx import dtypes
  >>> plan_matmul(1024, 1024, 1024, dtypes.float32, 1024, 64)
  MatmulPlan(mr=12, nr=32, vector_bytes=64, x_panels=False, chunked=True, chunk=512, chunks=2, split_groups=0, \
direct=False, group=4, x_rows=False, by_rows=False, prefetch=False, lane_rows=False)
  >>> plan_matmul(256, 256, 256, dtypes.float32, 256, 32, rows=True).x_rows
  True
  >>> wide = plan_matmul(1024, 1024, 1024, dtypes.float32, 1024, 64, rows=True, row_stride=4096); wide.mr, wide.nr
  (6, 64)
  """
  size, (mr, nr) = dtype.itemsize, _tile(dtype, vector_bytes)
  x_panels = m * k * size > PACK_CACHE and n * k * size <= PACK_CACHE
  if rows and wide_tile(mr, nr, n, row_stride, cores if not x_panels and stores == 1 else 0):
    mr, nr = mr // 2, 2 * nr
  if direct:
    if vector_bytes >= 64: mr = _direct_rows(m, run)
    if -(-n // nr) * nr * k * size <= DIRECT_WHOLE:
      return MatmulPlan(mr, nr, vector_bytes, False, chunk=outer, direct=True)
    per, chunks = _chunks(outer, k // outer)
    split = -(-n // nr) < DIRECT_SPLIT_PANELS and chunks >= 4 * SPLIT_GROUPS
    return MatmulPlan(mr, nr, vector_bytes, False, True, per, chunks, SPLIT_GROUPS if split else 0, direct=True)
  whole_rows, panel_rows, inner = (n, m, k // outer) if x_panels else (m, n, k // outer)
  chunked = k > 2 * KC_TARGET and outer > 1 and (whole_rows + 16) * 32 * size <= PACK_CACHE
  if chunked:
    per, chunks = _chunks(outer, inner)
    if -(-panel_rows // 32) < 4 and chunks >= 4 * SPLIT_GROUPS:    # split: the chunks are the parallel work
      return MatmulPlan(mr, nr, vector_bytes, x_panels, True, per, chunks, SPLIT_GROUPS, x_rows=rows)
    chunked = not (rows and not x_panels and nr * k * size <= ROWS_PANEL)
  if not chunked:
    by_rows = not x_panels and m > mr and (stores > 1 or n * k * size <= BY_ROWS_Y)
    return MatmulPlan(mr, nr, vector_bytes, x_panels, chunk=outer, x_rows=rows, by_rows=by_rows,
                      prefetch=by_rows and stores > 1 and not rows)
  per, chunks = _chunks(outer, inner, KC_MATMUL)
  panels = -(-panel_rows // (mr if x_panels else nr))
  group = next(g for g in (8, 4, 2, 1) if panels >= GROUP_WORK * g or g == 1)
  return MatmulPlan(mr, nr, vector_bytes, x_panels, True, per, chunks, group=group, x_rows=rows)

def window_reuse(u: UOp, own: list, kvars: list) -> float:
  """How many times operand `u` reads each element it reads, where it is one unmasked load at an index affine in
  loop variables (else 0): the trips of its own row and contraction variables over the span of its addresses. A
  convolution's windows read each input element about once per kernel tap; a plain matmul operand, once."""
  if u.op is not Ops.LOAD or len(u.src) != 2: return 0
  terms, _ = sym.linear(u.src[1])
  if not all(v.op is Ops.RANGE for v in terms): return 0
  vs = [*own, *kvars]
  return math.prod(v.arg[1] for v in vs) / (1 + sum(abs(c) * (v.arg[1] - 1) for v, c in terms.items() if v in vs))

def _chunks(outer: int, inner: int, target: int = KC_TARGET) -> tuple[int, int]:
  """(values of the outermost contraction variable per chunk, chunks): chunks of about `target` contraction rows
  (`inner` rows per value), of even sizes."""
  per = max(1, target // inner)
  per = -(-outer // -(-outer // per))          # the same number of chunks, of even sizes
  return per, -(-outer // per)

def direct_fits(m: int, n: int, k: int, outer: int, dtype, vector_bytes: int) -> bool:
  """A direct matmul of this shape keeps its packed y in L2: whole, or (chunked, each chunk packed in turn) one
  chunk of every panel while its result tiles fit DIRECT_TILES."""
  size, (mr, nr) = dtype.itemsize, _tile(dtype, vector_bytes)
  cols = -(-n // nr) * nr
  if cols * k * size <= DIRECT_WHOLE: return True
  rows = _chunks(outer, k // outer)[0] * (k // outer)
  return cols * rows * size <= DIRECT_WHOLE and -(-m // mr) * mr * cols * size <= DIRECT_TILES

def is_matmul(k: Kernel) -> bool:
  """The kernel is batch loops around one `Matmul` (as_matmul made it): the other loop rewrites leave it alone."""
  _, inner = _perfect_nest(k.body)
  return len(inner) == 1 and isinstance(inner[0], Matmul)

def as_matmul(k: Kernel, device=None) -> None:
  """The kernel as nested batch loops around a `Matmul`, if it is a big enough sum of products (tiles for the
  device's `vector_bytes`, 32 if it has none).

  >>> from tinyjx.lower.index import build_kernel
  >>> a, b = (UOp(Ops.PARAM, dtypes.float32, (), (i, (64, 64), 0)) for i in range(2))
  >>> ab = UOp(Ops.MUL, dtypes.float32, (a.reshape((64, 1, 64)).expand((64, 64, 64)),
  ...                                      b.permute((1, 0)).reshape((1, 64, 64)).expand((64, 64, 64))))
  >>> out = ab.reduce(Ops.ADD, (2,))
  >>> k = build_kernel("k0", [out], {a: 0, b: 1, out: 2})
  >>> as_matmul(k); type(k.body[0]).__name__, is_matmul(k)
  ('Matmul', True)
  """
  if (stmts := _matmul_nest(k, getattr(device, 'vector_bytes', 32), getattr(device, 'cores', 1))) is not None:
    k.body = stmts

def _matmul_nest(k: Kernel, vector_bytes: int, cores: int = 1):
  """The statements of `as_matmul`, or None where the kernel is no big enough sum of products."""
  loops, inner = _perfect_nest(k.body)
  if not is_reduce_then_store(inner, several=True): return None
  acc, store = inner[0].acc, inner[2]
  red, body = _perfect_nest([inner[1]])
  if acc.arg[1] is not Ops.ADD or acc.dtype not in (dtypes.float32, dtypes.float64): return None
  if len(body) != 1 or not isinstance(body[0], Update) or body[0].value.op is not Ops.MUL: return None
  x, y = body[0].value.src
  vx, vy = sym.loop_vars(x), sym.loop_vars(y)
  if any(n.op is Ops.DEFINE_ACC for n in toposort([x, y])): return None
  outer = [l.var for l in loops]
  iv = [v for v in outer if v in vx and v not in vy]
  jv = [v for v in outer if v in vy and v not in vx]
  if not iv or not jv: return None
  kv = [l.var for l in red]
  direct, swap = _orientation(x, y, iv, jv, kv, acc.dtype, vector_bytes)
  if not direct: swap = _packed_orientation(x, y, iv, jv, kv, outer[-1] in iv, acc.dtype, vector_bytes)
  if swap: (x, y), (iv, jv) = (y, x), (jv, iv)
  (si, mi), (sj, mj), kn = _flat_vars(iv, 'i'), _flat_vars(jv, 'j'), math.prod(l.size for l in red)
  if si.arg[1] * sj.arg[1] * kn < MATMUL_MIN_WORK or kn < MATMUL_MIN_K: return None
  cv = UOp(Ops.SPECIAL, acc.dtype, (), ('cv', 0))
  out_map = {**mi, **mj, acc: cv}
  new_store, *also = (Store(st.buf, _rewrite(st.idx, out_map), _rewrite(st.value, out_map), st.valid)
                      for st in inner[2:])
  run = _row_run(x, iv) if direct else 0
  rows = not direct and _rows_in_place(x, kv, acc.dtype)
  tile = lane_rows_tile(si.arg[1], sj.arg[1], kn, run, x.dtype, acc.dtype, vector_bytes) if direct else None
  plan = MatmulPlan(*tile, vector_bytes, False, chunk=kv[0].arg[1], direct=True, lane_rows=True) if tile else \
    plan_matmul(si.arg[1], sj.arg[1], kn, acc.dtype, kv[0].arg[1], vector_bytes, direct, rows, run, 1 + len(also),
                _row_stride(x, iv) * acc.dtype.itemsize if rows else 0, cores)
  skip = _padding_skip(x, kv, k.zero_pads) if plan.direct and not plan.chunked and not plan.lane_rows else None
  if skip is not None:   # its variable outermost: the values to skip are one run of the contraction
    kv = [skip[0], *(v for v in kv if v is not skip[0])]
    plan = plan_matmul(si.arg[1], sj.arg[1], kn, acc.dtype, kv[0].arg[1], vector_bytes, True, run=run)
  mm = Matmul(si.arg[1], sj.arg[1], kn, x, y, new_store, acc.dtype,
              x_k_inner=_contiguous_along(x, kv[-1], iv[-1]), y_k_inner=_contiguous_along(y, kv[-1], jv[-1]),
              ivars=iv, jvars=jv, kvars=kv, plan=plan, skip=skip, also=also)
  batch = [Loop(l.var) for l in loops if l.var not in iv and l.var not in jv]
  stmts: list = [mm]
  for b in reversed(batch): stmts = [Loop(b.var, stmts)]
  if batch and mm.work < PARALLEL_WORK * 16 and math.prod(b.size for b in batch) > 1:
    mm.parallel, stmts[0].parallel = False, True       # many small matmuls: one per thread
  return stmts

def wide_tile(mr: int, nr: int, n: int, row_stride: int, cores: int = 0) -> bool:
  """Whether a matmul whose x is read in place, a block of mr rows `row_stride` bytes apart, takes tiles of mr / 2
  rows and 2 nr columns (four vectors a row): where more than ALIAS_ROWS of the mr rows fall in one L1 set (a row
  stride that is a multiple of L1_SPAN: 1024 float32), each k's twelve lines evict each other before the next
  fifteen k read them again, and every row is read from L2. Six rows share the set's eight ways with the panel.
  Only with 32 registers (12 x 2 accumulators then 6 x 4), where the wider panels pad the columns at most 8/7 as
  much (n = 200: 256 columns against 224), and, where the panels are the parallel work (`cores` > 0: not where x
  streams or the epilogue runs by rows, whose blocks of x are), where the half as many panels, each twice the work,
  take no more turns on `cores` threads: on two, 6 panels of 32 columns are 3 turns each, 3 of 64 2 turns of twice
  the work. On a Zen 4 EPYC (kernel alone, C harness, two threads): the 1024 matmul 200 -> 217 GFLOP/s (x's rows
  1040 floats apart, 12 x 32 gives the same 217), 1024 x 1024 x 2048 and 1024 x 512 x 4096 8%; with no aliasing
  6 x 64 was slower (512 x 512 x 512 7%, 256 x 256 x 256 10%: each product reads twice the panel's bytes, from L2).
  Jitted, 1024 x 1024 x n (two cores): n = 64, 100, 128, 200, 256, 1024 5-25% faster wide; slower wide were n = 70
  and 96 (128 columns against 96) 10-13%, 130 and 160 (192 against 160) 20%, 192 15-20% (3 panels against 6), 320
  7-10% (5 against 10), 448 0-4%: those keep 12 x 32."""
  wide, cols = -(-n // (2 * nr)) * 2 * nr, -(-n // nr) * nr
  if mr != MICRO_ROWS or row_stride <= 0 or wide * 7 > cols * 8: return False
  if cores and 2 * -(-wide // (2 * nr * cores)) > -(-cols // (nr * cores)): return False
  return max(collections.Counter(r * row_stride % L1_SPAN // 64 for r in range(mr)).values()) > ALIAS_ROWS

def _row_stride(x: UOp, iv: list) -> int:
  """Elements between consecutive rows of x: its index's step along the innermost row variable (0 if none)."""
  return abs(sym.linear(x.src[1])[0].get(iv[-1], 0)) if x.op is Ops.LOAD and len(x.src) == 2 else 0

def _tile(dtype, vector_bytes: int) -> tuple[int, int]:
  """(rows, columns) of a micro-tile: MICRO_ROWS (MICRO_ROWS_16 with 16 vector registers) x two vectors."""
  return MICRO_ROWS if vector_bytes >= 64 else MICRO_ROWS_16, 2 * vector_bytes // dtype.itemsize

def _packed_orientation(x: UOp, y: UOp, iv: list, jv: list, kv: list, swap: bool, dtype, vector_bytes: int) -> bool:
  """Whether a packed matmul swaps x and y: `swap` (the output's contiguous axis runs along the vector tile's
  columns, so a tile's rows are stored as runs), unless the other orientation pads far fewer products
  (`pads_less_turned`) and this one does not stream x in place (a big x whose rows run along the contraction, y
  small enough to pack whole: the logits of a big activation). Turned, that x would be packed, a transpose of all
  of it, which costs more than the padded products: 512 x 512 x 10 logits 0.18 -> 0.10 ms, 4096 x 1024 x 10 and
  1000 x 576 x 10 39% and 47% faster. Each result's sum runs over the contraction in the same order either way."""
  first, rows, cols = (y, jv, iv) if swap else (x, iv, jv)
  m, n, k = (math.prod(v.arg[1] for v in vs) for vs in (rows, cols, kv))
  if not pads_less_turned(m, n, dtype, vector_bytes): return swap
  streams = _rows_in_place(first, kv, dtype) and plan_matmul(m, n, k, dtype, kv[0].arg[1], vector_bytes).x_panels
  return swap if streams else not swap

def pads_less_turned(m: int, n: int, dtype, vector_bytes: int) -> bool:
  """An (m x n) result tiled as (n x m) pads at least a quarter fewer products: a thin result (ten logits of a batch)
  along a tile's 32 columns multiplies 22 columns of zeros, along its 12 rows two."""
  mr, nr = _tile(dtype, vector_bytes)
  padded = lambda rows, cols: -(-rows // mr) * mr * -(-cols // nr) * nr
  return padded(n, m) * 4 <= padded(m, n) * 3

def _orientation(x: UOp, y: UOp, iv: list, jv: list, kv: list, dtype, vector_bytes: int) -> tuple[bool, bool]:
  """(direct, swap): whether the operand that is more of a sliding window (WINDOW_REUSE) is read in place as x
  (`direct_fits` its shape), and whether that operand is y now."""
  rx, ry = window_reuse(x, iv, kv), window_reuse(y, jv, kv)
  if max(rx, ry) < WINDOW_REUSE: return False, False
  swap = ry > rx
  (rows, cols), window = ((jv, iv), y) if swap else ((iv, jv), x)
  if window.dtype is not dtype: return False, False
  m, n, k = (math.prod(v.arg[1] for v in vs) for vs in (rows, cols, kv))
  return direct_fits(m, n, k, kv[0].arg[1], dtype, vector_bytes), swap

def _padding_skip(x: UOp, kv: list, zero_pads: dict) -> tuple | None:
  """`Matmul.skip` where x (a direct matmul's windows) reads a zero-padded array (`Kernel.zero_pads`: an input
  gradient's padded output gradient, a padded convolution's input) along an axis whose window offset is one
  contraction variable v, by +1 or -1, and whose position is otherwise in the other loop variables: the outermost
  such axis (a block of rows runs along the inner axes, so its position on an outer one varies least). A block of
  rows then skips the values of v where all its rows read padding, whose products are zeros."""
  if x.op is not Ops.LOAD or len(x.src) != 2 or x.src[0].arg not in zero_pads: return None
  shape, pads = zero_pads[x.src[0].arg]
  coords = _coordinates(x.src[1], shape)
  for (terms, c), size, (lo, hi) in zip(coords or (), shape, pads):
    ks = [u for u in terms if u in kv]
    if min(lo, hi) < 0 or lo + hi == 0 or len(ks) != 1 or abs(terms[ks[0]]) != 1: continue
    v, sgn = ks[0], terms[ks[0]]
    part = sym.from_linear({u: t * sgn for u, t in terms.items() if u is not v}, c * sgn)   # sgn * position - v
    return (v, part, lo, size - hi) if sgn > 0 else (v, part, hi - size + 1, 1 - lo)
  return None

def _coordinates(idx: UOp, shape: tuple) -> list | None:
  """An index affine in loop variables into a row-major array of `shape` as its position on each axis, [(terms,
  const)] per axis; None where a term is not a whole multiple of some axis's stride or a position could leave its
  axis (then the split would not be the index's)."""
  terms, c = sym.linear(idx)
  if not all(v.op is Ops.RANGE for v in terms): return None
  st, out = strides(shape), [[{}, 0] for _ in shape]
  for v, t in terms.items():
    d = next((d for d, s in enumerate(st) if t % s == 0), None)
    if d is None: return None
    out[d][0][v] = t // st[d]
  for d, s in enumerate(st): out[d][1], c = divmod(c, s)
  for (ts, c0), size in zip(out, shape):
    span = [t * (v.arg[1] - 1) for v, t in ts.items()]
    if c0 + sum(min(0, x) for x in span) < 0 or c0 + sum(max(0, x) for x in span) >= size: return None
  return [tuple(o) for o in out]

def _rows_in_place(x: UOp, kv: list, dtype) -> bool:
  """x is one unmasked load of `dtype` at an index affine in loop variables whose contraction part is the flat
  contraction index (each row is K consecutive elements), so the micro-kernel can read its rows in place."""
  if x.op is not Ops.LOAD or len(x.src) != 2 or x.dtype is not dtype: return False
  terms, _ = sym.linear(x.src[1])
  if not all(v.op is Ops.RANGE for v in terms): return False
  stride = 1
  for v in reversed(kv):
    if terms.get(v) != stride: return False
    stride *= v.arg[1]
  return True

def _max_var(stmts: list) -> int:
  out = -1
  for s in stmts:
    if isinstance(s, Loop): out = max(out, s.var.arg[0], _max_var(s.body))
  return out

def merge_nests(k: Kernel, device=None, stmts: list | None = None) -> None:
  """Two perfectly nested loops that walk every address as one loop would (each address moves by the inner loop's
  stride times its trip count when the outer loop steps: the last two axes of a contiguous array) run as one
  loop. The 20 x 20 images of a convolution net's activations are then one vector loop of 400 elements, not 20
  loops of 20, each with a remainder after one 16-lane vector (and, in a sum, a horizontal add). `stmts` (default
  the kernel's body) is the statement list being walked."""
  stmts = k.body if stmts is None else stmts
  for i, s in enumerate(stmts):
    if not isinstance(s, Loop): continue
    merge_nests(k, device, s.body)                         # innermost first: a merged pair can join its parent
    if (merged := _merged(s, k)) is not None: stmts[i] = merged

def _merged(a: Loop, k: Kernel) -> Loop | None:
  """Loop `a` and the one loop it holds as one loop, where every expression of their variables is the same
  function of the flat index a * size(b) + b (`_flat_safe`), else None."""
  if len(a.body) != 1 or not isinstance(a.body[0], Loop): return None
  b = a.body[0]
  if a.parallel or b.parallel or a.acc is not None or a.serial != b.serial: return None
  if not all(isinstance(x, Store) or (isinstance(x, Update) and x.at is None) or (isinstance(x, Decl) and not x.size)
             for x in b.body): return None
  roots = [r for x in b.body for r in ((x.idx, x.value, x.valid) if isinstance(x, Store) else
                                       (x.value,) if isinstance(x, Update) else ())]
  if not _flat_safe(roots, a.var, b.var): return None
  c = sym.loop_var(_max_var(k.body) + 1, a.size * b.size)
  at = {a.var: sym.const(0), b.var: c}
  body = [Store(x.buf, _rewrite(x.idx, at), _rewrite(x.value, at), _rewrite(x.valid, at)) if isinstance(x, Store)
          else Update(x.acc, _rewrite(x.value, at)) if isinstance(x, Update) else x for x in b.body]
  return Loop(c, body, acc=b.acc, serial=b.serial)

def _flat_safe(roots: list, a: UOp, b: UOp) -> bool:
  """Every expression under `roots` gives the same values with (a, b) -> (0, a * size(b) + b): an index
  arithmetic node whose linear form has a's coefficient size(b) times b's, over atoms that are themselves safe;
  any other node, when all its sources are. A variable alone (a mask `a < 3`, an index along a alone) is not."""
  size, safe, dep = b.arg[1], {}, {}
  for n in toposort(roots):
    dep[n] = n is a or n is b or any(dep[x] for x in n.src)
    if n is a or n is b: safe[n] = False
    elif not dep[n]: safe[n] = True
    elif n.dtype is IDX and n.op in (Ops.ADD, Ops.MUL):
      terms, _ = sym.linear(n)
      atoms = all(safe.get(t, False) or not dep.get(t, True) for t in terms if t is not a and t is not b)
      safe[n] = atoms and terms.get(a, 0) == terms.get(b, 0) * size
    else: safe[n] = all(safe[x] for x in n.src)
  return all(safe[r] for r in roots)

SMALL_REDUCE = 9                 # a reduction of at most this many elements (a 3 x 3 window) is written out, unrolled

def unroll_windows(k: Kernel, device=None, stmts: list | None = None, inside: bool = False) -> None:
  """A reduction of at most SMALL_REDUCE elements for each iteration of an enclosing loop (a 2 x 2 max pool's
  window, a sum over an axis of one) becomes its updates written out, in the loop's order: the enclosing loop is
  then elementwise and vectorizes across its outputs, where a loop of 2 inside a loop of 2 per output ran scalar,
  with a NaN flag and a horizontal step each. `stmts` (default the kernel's body) is the list being walked,
  `inside` whether it is a loop's body."""
  stmts = k.body if stmts is None else stmts
  for i, s in enumerate(stmts):
    if not isinstance(s, Loop): continue
    acc = _reduce_acc(s)
    if inside and acc is not None and _declared_just_before(stmts, i, acc, 0) and _trips(s) <= SMALL_REDUCE:
      stmts[i:i + 1] = _written_out(s)
      if acc.arg[1] is Ops.ADD: k.narrow_sums.add(acc)         # a handful of float32 terms: its own partial
    else: unroll_windows(k, device, s.body, True)

def _reduce_acc(l: Loop) -> UOp | None:
  """The accumulator of a perfect nest of reduce loops whose innermost body only updates it, else None."""
  loops, body = _perfect_nest([l])
  acc = loops[-1].acc
  if acc is None or not all(isinstance(b, Update) and b.acc is acc and b.at is None for b in body): return None
  return acc if all(x.serial for x in loops) else None

def _trips(l: Loop) -> int: return math.prod(x.size for x in _perfect_nest([l])[0])

def _written_out(l: Loop) -> list:
  """The updates of reduce nest `l`, one for each iteration, in the loops' order."""
  loops, body = _perfect_nest([l])
  return [Update(b.acc, _rewrite(b.value, {x.var: sym.const(v) for x, v in zip(loops, values)}))
          for values in itertools.product(*(range(x.size) for x in loops)) for b in body]

def _strided_inner(value: UOp, j: UOp, r: UOp) -> bool:
  """Some load is contiguous along output variable `j` but strided along reduce variable `r`."""
  for n in toposort([value]):
    if n.op is not Ops.LOAD: continue
    terms, _ = sym.linear(n.src[1])
    if terms.get(j) == 1 and terms.get(r, 0) not in (0, 1): return True
  return False

def as_column_reduction(k: Kernel, device=None) -> None:
  """A reduction whose input is contiguous along an output axis (a sum over rows, `x.sum(0)`) keeps a tile of
  accumulators along that axis, so the innermost loop reads memory in order and vectorizes; a big one (COLUMN_SPLIT)
  with a row of 128 columns or more is cut into two tiles or more, so that the tiles run on all threads
  (`x.sum(0)` of 4096 x 1024 float32 ran on one: 0.65 -> 0.35 ms)."""
  if (stmts := _column_nest(k)) is not None: k.body = stmts

def _column_nest(k: Kernel):
  """The statements of `as_column_reduction`, or None where the kernel is no such reduction."""
  loops, inner = _perfect_nest(k.body)
  if not loops or not is_reduce_then_store(inner): return None
  acc, store = inner[0].acc, inner[2]
  red, body = _perfect_nest([inner[1]])
  if len(body) != 1 or not isinstance(body[0], Update) or not _strided_inner(body[0].value, loops[-1].var, red[-1].var):
    return None
  size = loops[-1].size
  # tiles of 64 to 1024 columns, at least two where the reduction reads COLUMN_SPLIT elements or more (the loop over
  # tiles is what runs in parallel; below that, the barriers cost more than a second core saves: W4's bias
  # gradients over 512 x 512 ran slower split); each column is summed in the same order whatever the tile
  most = size // 2 if math.prod(l.size for l in loops + red) >= COLUMN_SPLIT else 1024
  tile = max((d for d in range(64, min(most, 1024) + 1) if size % d == 0), default=size if size <= 1024 else 0)
  if not tile: return None
  def tile_stmts(at, n: int) -> list:
    ju, js = sym.loop_var(n, tile), sym.loop_var(n + 1, tile)
    nest: list = [Loop(ju, [Update(acc, _rewrite(body[0].value, at(ju)), ju)])]
    for l in reversed(red): nest = [Loop(l.var, nest, serial=True)]
    return [Decl(acc, tile), *nest, Loop(js, [_store_element(store, at(js), acc, js)])]
  return _column_tiles(k, loops, tile, tile_stmts)

def _column_tiles(k: Kernel, loops: list, tile: int, tile_stmts) -> list:
  """The nest of a column rewrite (`as_column_reduction`, `as_column_scan`): the innermost of `loops` cut into tiles
  of `tile` (a loop over them where there are several), inside the other loops. `tile_stmts(at, n)` gives one
  tile's statements: `at(v)` maps the innermost variable to element v of the tile, n is the first free variable."""
  size, j = loops[-1].size, loops[-1].var
  n = _max_var(k.body) + 1
  jt = sym.loop_var(n, size // tile) if size > tile else sym.const(0)
  stmts = tile_stmts(lambda v: {j: sym.add(sym.mul(jt, tile), v)}, n + 1)
  if size > tile: stmts = [Loop(jt, stmts)]
  for l in reversed(loops[:-1]): stmts = [Loop(l.var, stmts)]
  return stmts

def _store_element(store: Store, at: dict, acc: UOp, v: UOp) -> Store:
  """`store` at the element `at` picks, storing accumulator `acc`'s element v where it stored `acc`."""
  element = UOp(Ops.INDEX, acc.dtype, (acc, v))
  return Store(store.buf, _rewrite(store.idx, at), _rewrite(store.value, {**at, acc: element}), store.valid)

def as_column_scan(k: Kernel, device=None) -> None:
  """A scan along an axis that is not the last (`jnp.cumsum(x, axis=0)`) keeps a row of running values along the
  axis after it, so the innermost loop reads and writes memory in order and vectorizes, where each column was
  scanned on its own down a stride (4096 x 1024 float32: 20 -> 1.5 ms). Each column's values are combined in the
  same order, in the same accumulator type: results do not change."""
  if (stmts := _column_scan(k)) is not None: k.body = stmts

def _column_scan(k: Kernel):
  """The statements of `as_column_scan`, or None where the kernel is no such scan."""
  loops, inner = _perfect_nest(k.body)
  if not loops or len(inner) != 2 or not isinstance(inner[0], Decl) or inner[0].size: return None
  scan = inner[1]
  if not isinstance(scan, Loop) or scan.acc is not inner[0].acc or len(scan.body) != 2: return None
  update, store = scan.body
  if not isinstance(update, Update) or update.at is not None or not isinstance(store, Store): return None
  acc, kv = scan.acc, scan.var
  terms = sym.linear(store.idx)[0]
  if terms.get(loops[-1].var) != 1 or terms.get(kv, 0) in (0, 1): return None
  size = loops[-1].size
  tile = max((d for d in range(16, 513) if size % d == 0 and size // d >= 2), default=size if size <= 512 else 0)
  if not tile: return None
  def tile_stmts(at, n: int) -> list:
    js = sym.loop_var(n, tile)
    body = [Update(acc, _rewrite(update.value, at(js)), js), _store_element(store, at(js), acc, js)]
    return [Decl(acc, tile), Loop(kv, [Loop(js, body)], serial=True)]
  return _column_tiles(k, loops, tile, tile_stmts)

def _max_acc(stmts: list) -> int:
  out = -1
  for s in stmts:
    if isinstance(s, (Decl, Local)): out = max(out, s.acc.arg[0])
    if isinstance(s, Loop): out = max(out, _max_acc(s.body))
  return out

def split_reductions(k: Kernel, device=None) -> None:
  """A big reduction at the top of a kernel (a full sum) runs as a parallel loop over a fixed number of chunks,
  each with its own partial result, combined in order afterwards: the result does not depend on the thread
  count, and every chunk's inner loop still vectorizes."""
  for pos in range(len(k.body) - 1):
    decl, loop = k.body[pos], k.body[pos + 1]
    if not (isinstance(decl, Decl) and not decl.size and isinstance(loop, Loop)): continue
    if work([loop]) < PARALLEL_WORK: continue
    red, body = _perfect_nest([loop])
    if len(body) != 1 or not isinstance(body[0], Update) or body[0].acc is not decl.acc: continue
    chunks = max((d for d in range(16, 257) if loop.size % d == 0 and loop.size // d >= 16), default=0)
    if not chunks: continue
    acc, nv, na = decl.acc, _max_var(k.body) + 1, _max_acc(k.body) + 1
    c, inner, c2 = sym.loop_var(nv, chunks), sym.loop_var(nv + 1, loop.size // chunks), sym.loop_var(nv + 2, chunks)
    part = UOp(Ops.DEFINE_ACC, acc.dtype, (), (na, acc.arg[1]))
    parts = UOp(Ops.DEFINE_ACC, acc.dtype, (), (na + 1, acc.arg[1]))
    value = _rewrite(body[0].value, {loop.var: sym.add(sym.mul(c, loop.size // chunks), inner)})
    nest: list = [Update(part, value)]
    for l in reversed(red[1:]): nest = [Loop(l.var, nest, acc=part if l is red[-1] else None, serial=True)]
    nest = [Loop(inner, nest, acc=part if len(red) == 1 else None, serial=True)]
    per_chunk = Loop(c, [Decl(part), *nest, Update(parts, part, c)], parallel=True)
    combine = Loop(c2, [Update(acc, UOp(Ops.INDEX, acc.dtype, (parts, c2)))], serial=True)
    k.body[pos + 1:pos + 2] = [Decl(parts, chunks), per_chunk, combine]
    return

BLOCK = 1024                     # elements a float32 partial sum takes before it joins its double total

def _float_sum_loop(l: Loop) -> bool:
  """The innermost loop of a float32 sum (only updates of its accumulator, and stashes), as `omp simd` wants."""
  acc = l.acc
  if acc is None or acc.arg[1] is not Ops.ADD or acc.dtype is not dtypes.float32: return False
  return all((isinstance(b, Update) and b.acc is acc and b.at is None) or isinstance(b, Assign) for b in l.body)

def _declared_just_before(stmts: list, i: int, acc: UOp, size: int) -> bool:
  """stmts[i] is the whole of `acc`'s reduction: the statement before it declares `acc` (of `size` elements)."""
  return i > 0 and isinstance(stmts[i - 1], Decl) and stmts[i - 1].acc is acc and stmts[i - 1].size == size

def block_sums(k: Kernel, device=None, stmts: list | None = None) -> None:
  """The innermost loop of a float32 sum adds at most BLOCK elements into a float32 partial (full-width vector
  adds); partials join the sum's total, which the renderer keeps in double (`wide_sums`). A sum is then as
  accurate as a pairwise one at the speed of a float32 loop. A sum of one short loop is its own partial.
  `stmts` (default the kernel's body) is the statement list being walked."""
  stmts = k.body if stmts is None else stmts
  for i, s in enumerate(stmts):
    if not isinstance(s, Loop): continue
    if (acc := _column_sum(s)) is not None: _block_columns(stmts, i, acc, k)
    elif not _float_sum_loop(s): block_sums(k, device, s.body)
    elif s.size <= BLOCK and _declared_just_before(stmts, i, s.acc, 0): k.narrow_sums.add(s.acc)
    else: stmts[i:i + 1] = _blocked(s, k)

def _blocked(l: Loop, k: Kernel) -> list:
  """Loop `l` as blocks of at most BLOCK iterations, each summed into a fresh float32 partial."""
  full, tail, nv, na = l.size // BLOCK, l.size % BLOCK, _max_var(k.body) + 1, _max_acc(k.body) + 1
  def block(start: UOp, size: int, n: int) -> list:
    iv, part = sym.loop_var(n, size), UOp(Ops.DEFINE_ACC, l.acc.dtype, (), (na + n - nv, Ops.ADD))
    k.narrow_sums.add(part)
    at = {l.var: sym.add(start, iv)}
    body = [Update(part, _rewrite(b.value, at)) if isinstance(b, Update) else
            Assign(b.acc, _rewrite(b.at, at), _rewrite(b.value, at)) for b in l.body]
    return [Decl(part), Loop(iv, body, acc=part, serial=True), Update(l.acc, part)]
  out = []
  if full == 1: out += block(sym.const(0), BLOCK, nv)
  if full > 1:
    ob = sym.loop_var(nv, full)
    out.append(Loop(ob, block(sym.mul(ob, BLOCK), BLOCK, nv + 1), serial=True))
  if tail: out += block(sym.const(full * BLOCK), tail, nv + 2)
  return out

COLUMN_BLOCK = 64                # rows a float32 tile of column partials takes (each column adds them in order)

def _column_sum(l: Loop) -> UOp | None:
  """The accumulator of a column sum's innermost reduce loop (as_column_reduction: a row of float32 partials)."""
  if len(l.body) != 1 or not isinstance(l.body[0], Loop) or not l.serial: return None
  ups = l.body[0].body
  acc = ups[0].acc if ups and isinstance(ups[0], Update) else None
  if acc is None or not all(isinstance(u, Update) and u.acc is acc and u.at is l.body[0].var for u in ups): return None
  return acc if acc.arg[1] is Ops.ADD and acc.dtype is dtypes.float32 else None

def _block_columns(stmts: list, i: int, acc: UOp, k: Kernel) -> None:
  """A column sum's rows in blocks of COLUMN_BLOCK, each into a fresh float32 tile of partials that then joins the
  (double) totals; a sum of at most COLUMN_BLOCK rows in all is its own partial."""
  l, cols = stmts[i], stmts[i].body[0]
  if l.size <= COLUMN_BLOCK and _declared_just_before(stmts, i, acc, cols.size):
    k.narrow_sums.add(acc)
    return
  nv, na = _max_var(k.body) + 1, _max_acc(k.body) + 1
  def block(start: UOp, size: int, n: int) -> list:
    rv, jv, jc = (sym.loop_var(n + d, s) for d, s in enumerate((size, cols.size, cols.size)))
    part = UOp(Ops.DEFINE_ACC, acc.dtype, (), (na + (n - nv) // 4, Ops.ADD))
    k.narrow_sums.add(part)
    at = {l.var: sym.add(start, rv), cols.var: jv}
    rows = Loop(rv, [Loop(jv, [Update(part, _rewrite(u.value, at), jv) for u in cols.body])], serial=True)
    return [Decl(part, cols.size), rows, Loop(jc, [Update(acc, UOp(Ops.INDEX, acc.dtype, (part, jc)), jc)])]
  full, tail = l.size // COLUMN_BLOCK, l.size % COLUMN_BLOCK
  out = []
  if full == 1: out += block(sym.const(0), COLUMN_BLOCK, nv)
  if full > 1:
    ob = sym.loop_var(nv + 3, full)
    out.append(Loop(ob, block(sym.mul(ob, COLUMN_BLOCK), COLUMN_BLOCK, nv), serial=True))
  if tail: out += block(sym.const(full * COLUMN_BLOCK), tail, nv + 4)
  stmts[i:i + 1] = out

MAX_STASH = 8192                 # elements of a per-iteration local array

def _values(loop: Loop) -> list:
  return [s.value for s in loop.body if isinstance(s, (Update, Store, Assign))]

def _reads_outputs(u: UOp, k: Kernel) -> bool:
  return any(n.op is Ops.LOAD and n.src[0].arg in k.outs for n in toposort([u]))

def stash_shared(k: Kernel, device=None, stmts: list | None = None) -> None:
  """Two sibling loops over the same range that compute the same expensive expression (softmax's exp, in the
  sum and again in the store) compute it once: the first loop keeps it in a local array the second one reads.
  `stmts` (default the kernel's body) is the statement list being walked."""
  stmts = k.body if stmts is None else stmts
  for s in stmts:
    if isinstance(s, Loop): stash_shared(k, device, s.body)
  loops = [s for s in stmts if isinstance(s, Loop) and not any(isinstance(b, Loop) for b in s.body)]
  for i, a in enumerate(loops):
    if a.size > MAX_STASH: continue
    stashed: dict = {}
    for b in loops[i + 1:]:
      if b.size == a.size: _stash(a, b, stmts, k, stashed)

def _stash(a: Loop, b: Loop, stmts: list, k: Kernel, stashed: dict) -> None:
  in_a = set(toposort(_values(a)))
  found = [n for n in toposort([_rewrite(v, {b.var: a.var}) for v in _values(b)])
           if n.op in GroupOp.Transcendental and n in in_a and a.var in sym.loop_vars(n) and not _reads_outputs(n, k)]
  for n in [n for n in found if not any(n is not m and n in toposort([m]) for m in found)]:
    if n not in stashed:
      stashed[n] = UOp(Ops.DEFINE_ACC, n.dtype, (), (_max_acc(k.body) + 1, None))
      stmts.insert(stmts.index(a), Local(stashed[n], a.size))
      a.body.insert(0, Assign(stashed[n], a.var, n))
    use = {_rewrite(n, {a.var: b.var}): UOp(Ops.INDEX, n.dtype, (stashed[n], b.var))}
    for st in b.body:
      if isinstance(st, (Update, Store, Assign)): st.value = _rewrite(st.value, use)

TRANSPOSE_MIN_BYTES = 1 << 18    # bytes a nest writes below which its transposed reads stay in cache as they are
TRANSPOSE_MIN_ROWS = 256         # a read that comes back to a line within fewer rows finds it in L1 (16 KB of lines)

def tile_transposes(k: Kernel, device=None) -> None:
  """An elementwise nest that writes in order along its innermost loop but reads some input across it, a line or
  more apart (a materialized transpose, `x.T * 2`, fft's last reorder), walks that input a cache line at a time:
  the innermost loop is cut into blocks of one line of the read, and the blocks run outside the loop along which
  the read is contiguous. Each line the read brings in is used whole before it leaves L1 (`x.T * 2` of 2048 x 2048
  float32: 17 -> 3.5 ms). The stores may be pairs (a complex result's parts, written out by `split_guards`). The
  same stores of the same values: results do not change."""
  for i, s in reversed(list(enumerate(k.body))):
    if isinstance(s, Loop) and (nest := _transpose_nest(s, k)) is not None: k.body[i:i + 1] = nest

def _across(load: UOp, b: UOp) -> int:
  """The stride of `load` along variable `b` where it is affine there and at least a cache line; else 0."""
  terms, _ = sym.linear(load.src[1])
  if any(b in sym.loop_vars(t) for t in terms if t is not b): return 0
  stride = abs(terms.get(b, 0))
  return stride if stride * load.dtype.itemsize >= LINE else 0

def _along(load: UOp, loops: list, stride: int) -> Loop | None:
  """Of `loops`, the one along which `load` walks memory most closely (less than `stride` apart): the smallest
  affine stride, or else the innermost loop the index uses in a division or remainder (fft's digit reversal)."""
  terms, _ = sym.linear(load.src[1])
  best = min((l for l in reversed(loops) if terms.get(l.var)), key=lambda l: abs(terms[l.var]), default=None)
  if best is not None and abs(terms[best.var]) < stride: return best
  mixed = set().union(*(sym.loop_vars(t) for t in terms if t.op is not Ops.RANGE)) if terms else set()
  return next((l for l in reversed(loops) if l.var in mixed), None)

def _transpose_nest(top: Loop, k: Kernel) -> list | None:
  """The statements replacing nest `top` (see tile_transposes), or None where it is no such nest."""
  loops, inner = _perfect_nest([top])
  if len(loops) < 2 or not inner or any(l.serial or l.acc is not None for l in loops): return None
  if not all(isinstance(s, Store) and s.valid.op is Ops.CONST for s in inner): return None
  b = loops[-1].var
  steps = {sym.linear(s.idx)[0].get(b) for s in inner}          # 1, or 2: complex parts stored as pairs
  if steps not in ({1}, {2}) or any(_reads_outputs(s.value, k) for s in inner): return None
  reads = [(n, stride) for n in toposort([s.value for s in inner]) if n.op is Ops.LOAD and (stride := _across(n, b))]
  if not reads: return None
  load, stride = reads[0]
  line = LINE // load.dtype.itemsize
  size = loops[-1].size
  written = math.prod(l.size for l in loops) * max(s.value.dtype.itemsize for s in inner)
  if size < 2 * line or written < TRANSPOSE_MIN_BYTES: return None
  if (a := _along(load, loops[:-1], stride)) is None: return None
  if math.prod(l.size for l in loops[loops.index(a) + 1:]) < TRANSPOSE_MIN_ROWS: return None
  n = _max_var(k.body) + 1
  def stores(at: UOp, va: UOp) -> list:
    m = {b: at, a.var: va}
    return [Store(s.buf, _rewrite(s.idx, m), _rewrite(s.value, m), s.valid) for s in inner]
  blocks, bi = sym.loop_var(n, size // line), sym.loop_var(n + 1, line)
  body: list = [Loop(blocks, [Loop(a.var, [Loop(bi, stores(sym.add(sym.mul(blocks, line), bi), a.var))])])]
  if size % line:
    tail, ta = sym.loop_var(n + 2, size % line), sym.loop_var(n + 3, a.size)
    body.append(Loop(ta, [Loop(tail, stores(sym.add(sym.const(size - size % line), tail), ta))]))
  for l in reversed([l for l in loops[:-1] if l is not a]): body = [Loop(l.var, body)]
  return body

FISSION_BLOCK = 64               # elements per block of a split elementwise loop (4 vectors of 16, 8 of 8)
FISSION_MIN_OPS = 4              # operations before a transcendental's argument is done that make a split pay
FISSION_MAX_CARRIED = 4          # values one block hands from the first loop to the second

def split_chains(k: Kernel, device=None, stmts: list | None = None) -> None:
  """An elementwise loop whose float32 exp, log, tanh or erf waits on a long computation of its argument (the
  tanh-form gelu of `x * a + b`) runs in blocks of FISSION_BLOCK elements, each as two loops: the first computes
  the arguments (and whatever else the rest needs of that work) into local arrays, the second the functions and
  the stores. One element's whole chain of dependent operations is longer than a core's out-of-order window can
  overlap across elements; split, each loop's chain is short (the gelu: 21 cycles a vector of 8 down to 16 in
  cache, 1.14x at 4M elements). The blocks are small enough that the window holds a whole one, so the next
  block's loads go out while this one's tanh computes: 4M gelu on two AVX-512 cores took 1.15-1.16 ms in blocks of
  256, 0.98-1.04 in blocks of 64 (in cache too, 6.8 -> 6.3 ns a vector of 16). A function of a function (softplus,
  `log1p(exp(-|x|))`) is cut between the two instead, whatever the arguments: the first loop runs the inner
  functions (4M softplus: 7.3 -> 5.4 ms). A value
  of the first loop's work that is not a float (a NaN test) and cheap is computed again in the second, not kept.
  Results do not change: every operation is the same one, in the same order, on the same values.
  `stmts` (default the kernel's body) is the statement list being walked."""
  stmts = k.body if stmts is None else stmts
  for s in list(stmts):
    if not isinstance(s, Loop): continue
    if any(isinstance(b, Loop) for b in s.body): split_chains(k, device, s.body)
    elif (split := _split_chain(s, k)) is not None:
      i = stmts.index(s)
      stmts[i:i + 1] = split

def _split_chain(l: Loop, k: Kernel) -> list | None:
  """Loop `l` split at its transcendentals' arguments (see split_chains), or None where that does not pay."""
  if l.serial or l.acc is not None or l.size < 2 * FISSION_BLOCK or not l.body: return None
  if not all(isinstance(b, Store) and b.valid.op is Ops.CONST for b in l.body): return None
  values = [b.value for b in l.body]
  if any(_reads_outputs(v, k) for v in values): return None       # a block's loads would run ahead of its stores
  nodes = toposort(values)
  heavy = {n for n in nodes if n.op in FAST_F32 and n.dtype is dtypes.float32}     # the prelude's inline ones
  first = [h for h in nodes if h in heavy and not any(m in heavy for m in toposort([h.src[0]]))]
  if not first: return None
  args = list(dict.fromkeys(h.src[0] for h in first))
  if len(heavy) > len(first): before = set(toposort(first))            # a function of a function: cut after the first
  elif max(expr_cost(a) for a in args) >= FISSION_MIN_OPS: before = set(toposort(args))   # cut before the functions
  else: return None
  def carried(n: UOp) -> bool:
    return n in before and n.op not in NOT_ARITHMETIC and n.dtype is not IDX and l.var in sym.loop_vars(n)
  handed = list(dict.fromkeys(s for n in nodes if n not in before for s in n.src if carried(s)))
  kept = {n for n in handed if n.dtype.kind == 'f'}
  def again(n: UOp) -> bool:      # computed again in the second loop (from the kept values): not a float, cheap,
    seen, todo, ops = set(), [n], 0   # and no function in it
    while todo:
      m = todo.pop()
      if m in seen or (m in kept and m is not n): continue
      seen.add(m)
      if m in heavy: return False
      ops += m.op not in NOT_ARITHMETIC and m.dtype is not IDX
      todo.extend(m.src)
    return n.dtype.kind != 'f' and ops <= FISSION_MIN_OPS
  frontier = [n for n in handed if not again(n)]
  if not frontier or len(frontier) > FISSION_MAX_CARRIED or any(n.dtype.kind != 'f' for n in frontier): return None
  nv, na, size = _max_var(k.body) + 1, _max_acc(k.body) + 1, FISSION_BLOCK
  blocks = sym.loop_var(nv, l.size // size)
  first_v, second_v = sym.loop_var(nv + 1, size), sym.loop_var(nv + 2, size)
  arrays = [UOp(Ops.DEFINE_ACC, n.dtype, (), (na + i, None)) for i, n in enumerate(frontier)]
  def at(v: UOp) -> dict: return {l.var: sym.add(sym.mul(blocks, size), v)}
  def stores(moved: dict, reads: dict) -> list:
    return [Store(b.buf, _rewrite(b.idx, moved), _rewrite(b.value, {**moved, **reads}), b.valid) for b in l.body]
  fill = Loop(first_v, [Assign(a, first_v, _rewrite(n, at(first_v))) for a, n in zip(arrays, frontier)])
  reads = {n: UOp(Ops.INDEX, n.dtype, (a, second_v)) for a, n in zip(arrays, frontier)}
  use = Loop(second_v, stores(at(second_v), reads))
  out: list = [Loop(blocks, [*(Local(a, size) for a in arrays), fill, use])]
  if tail := l.size % size:
    rest = sym.loop_var(nv + 3, tail)
    out.append(Loop(rest, stores({l.var: sym.add(sym.const(l.size - tail), rest)}, {})))
  return out

PIPELINE_ROW_BYTES = (1 << 10, 1 << 14)   # bytes a row's first pass reads: enough to pay, and two rows fit in L1
PIPELINE_MIN_BYTES = 1 << 20     # bytes all rows' first passes read: less is in cache already, and nothing waits
PIPELINE_CHUNKS = 64             # chunks of rows (the parallel work), at most
PIPELINE_CHUNK_ROWS = 8          # rows of a chunk, at least

def pipeline_rows(k: Kernel, device=None) -> None:
  """A loop over rows whose body first reduces its row from an input (softmax's and log-softmax's max, layer norm's
  mean) and then walks the same row again in a loop that reduces too (the sum of exps, of squared deviations) runs
  each row's first pass inside the second loop of the row before, as that loop's `extra` accumulator. One after the
  other, the first pass mostly waits for memory and the second computes on the row in L1 while memory idles;
  together, the next row's loads overlap this row's arithmetic (a row softmax of 4096 x 1024 float32: 1.06 -> 0.85
  ms). The rows run in chunks of PIPELINE_CHUNK_ROWS rows or more (at most PIPELINE_CHUNKS chunks, the parallel
  work), each beginning with the first pass of its first row; the last row of a chunk reduces itself again as its
  next row (in cache; the value is not used), and rows left over past the last whole chunk run as before. Every
  accumulator sees the same values: a first pass that is a max or a min gives the same result in any order (softmax's
  results do not change), a sum is added in the vector lanes of the loop it joins, which the compiler may vectorize
  otherwise than the loop it left (a float64 mean next to a `sin`, which does not vectorize): its last bits can
  differ, as between any two vectorizations of one sum."""
  for i, s in reversed(list(enumerate(k.body))):
    if isinstance(s, Loop) and (new := _pipelined(s, k)) is not None: k.body[i:i + 1] = new

def _moved(stmts: list, at: dict) -> list:
  """A copy of `stmts` with the loop variables in `at` replaced (the statements `_pipelined` accepts)."""
  def one(s):
    if isinstance(s, Loop): return dataclasses.replace(s, body=_moved(s.body, at))
    if isinstance(s, Store): return dataclasses.replace(s, idx=_rewrite(s.idx, at), value=_rewrite(s.value, at),
                                                        valid=_rewrite(s.valid, at))
    if isinstance(s, (Update, Assign)):
      return dataclasses.replace(s, value=_rewrite(s.value, at), at=None if s.at is None else _rewrite(s.at, at))
    return s                                            # Decl, Local: no expressions
  return [one(s) for s in stmts]

def _vector_reduction(l: Loop) -> bool:
  """An innermost loop the renderer reduces in vector lanes (`omp simd`): float accumulators updated whole."""
  accs = [a for a in (l.acc, *l.extra) if a is not None]
  return bool(accs) and all(a.dtype in (dtypes.float32, dtypes.float64) for a in accs) and \
    all(isinstance(b, Assign) or (isinstance(b, Update) and b.at is None) for b in l.body)

def _kept_wide(acc: UOp, k: Kernel) -> bool:
  """`acc` is a float32 sum the renderer keeps in double (`block_sums`' totals), whose reads round to float32."""
  return acc.arg[1] is Ops.ADD and acc.dtype is dtypes.float32 and acc not in k.narrow_sums

def _pipelined(rows: Loop, k: Kernel) -> list | None:
  """The statements of `pipeline_rows` for loop `rows`, or None where it has no such pair of passes."""
  if rows.serial or rows.parallel or rows.size < 2 * PIPELINE_CHUNK_ROWS: return None
  body = rows.body
  if not all(isinstance(s, (Loop, Decl, Local, Update, Store, Assign)) for s in walk(body)): return None
  at = [i for i, s in enumerate(body) if isinstance(s, Loop)]
  if len(at) < 2: return None
  first, second = body[at[0]], body[at[1]]
  acc = first.acc
  if acc is None or first.extra or not _declared_just_before(body, at[0], acc, 0) or second.size != first.size or \
     not _vector_reduction(first) or not _vector_reduction(second) or \
     any(isinstance(b, Loop) for b in first.body + second.body): return None
  if not all(isinstance(b, Update) and b.acc is acc for b in first.body) or \
     any(isinstance(s, (Update, Assign)) and s.acc is acc for s in walk(body[at[0] + 1:])): return None
  if _kept_wide(acc, k): return None                # (copied out of `ahead`, it would be read rounded to float32)
  values = [b.value for b in first.body]
  nodes = toposort(values)
  if any(n.op in (Ops.DEFINE_ACC, Ops.INDEX) for n in nodes) or any(_reads_outputs(v, k) for v in values) or \
     not any(rows.var in sym.loop_vars(v) for v in values): return None
  row_bytes = first.size * sum(n.dtype.itemsize for n in nodes if n.op is Ops.LOAD)
  if not PIPELINE_ROW_BYTES[0] <= row_bytes <= PIPELINE_ROW_BYTES[1] or row_bytes * rows.size < PIPELINE_MIN_BYTES:
    return None
  chunks = min(PIPELINE_CHUNKS, rows.size // PIPELINE_CHUNK_ROWS)
  per = rows.size // chunks
  nv, na = _max_var(k.body) + 1, _max_acc(k.body) + 1
  c, r = sym.loop_var(nv, chunks), sym.loop_var(nv + 1, per)
  ahead = UOp(Ops.DEFINE_ACC, acc.dtype, (), (na, acc.arg[1]))
  if acc in k.narrow_sums: k.narrow_sums.add(ahead)
  start = sym.mul(c, per)
  moved = _moved(body, {rows.var: sym.add(start, r)})
  nxt = sym.add(start, sym.clamp(sym.add(r, sym.const(1)), per))
  pipe = moved[at[1]]
  pipe.body += [Update(ahead, _rewrite(v, {first.var: second.var, rows.var: nxt})) for v in values]
  pipe.extra = (*pipe.extra, ahead)
  restart = scalar(identity(acc.arg[1], acc.dtype), acc.dtype)
  moved[at[0]:at[0] + 1] = [Assign(acc, None, ahead), Assign(ahead, None, restart)]
  prologue = Loop(first.var, [Update(ahead, _rewrite(v, {rows.var: start})) for v in values], acc=ahead, serial=True)
  out = [Loop(c, [Decl(ahead), prologue, Loop(r, moved, serial=True)])]
  done = chunks * per
  if done < rows.size:
    t = sym.loop_var(nv + 2, rows.size - done)
    out.append(Loop(t, _moved(body, {rows.var: sym.add(sym.const(done), t)})))
  return out

ORDER_RUN_BYTES = 8 << 10        # runs of one kept value shorter than this are walked in groups, reduced axis outside
ORDER_GROUP_BYTES = 16 << 10     # bytes of adjacent runs a group reads at a time (an image's run of channels)
ORDER_MIN_BYTES = 1 << 20        # bytes the reduction reads: less is in cache already, where the order matters less

def reduce_in_memory_order(k: Kernel, device=None) -> None:
  """A reduction that keeps an axis lying between the axes it sums (a batch norm's statistics or a bias gradient of
  an (N, C, H, W) array: a sum over N, H and W for each channel) reads, for one kept value, a short run (H x W
  elements) then jumps a whole image: every run starts a new stream for the prefetcher, and memory waits on each
  (a CNN step's 32 x 24 x 24 channel sums at batch 256 took 1.6 ms for 38 MB). Such a loop walks the kept values in
  groups of adjacent runs (ORDER_GROUP_BYTES of an image at a time) with the outer summed axis outside the group:
  a group keeps an array of its totals, and each image adds its partial of each value in turn. Every value's total
  sees the same partials in the same order, so results do not change; the groups are the parallel work, two at
  least and as many as the machine's cores."""
  cores = getattr(device, 'cores', 1)
  for i, s in enumerate(k.body):
    if isinstance(s, Loop) and (new := _in_memory_order(s, k, cores)) is not None: k.body[i] = new

def _in_memory_order(l0: Loop, k: Kernel, cores: int = 1) -> Loop | None:
  """`reduce_in_memory_order`'s loop for the kept loop `l0` (a total declared, one serial loop reducing into it, then
  stores of it), or None where it is not such a loop, its runs are long or its data small. The total's updates
  either add partials (a float32 sum's blocks: each adds into its element of the group's array) or are the body of
  an innermost reduce loop (a float64 sum, a max: the element is loaded into the total's scalar around the loop, so
  the loop reduces in vector lanes as before); a float32 sum kept in double is read rounded, so it takes partials."""
  if l0.parallel or l0.serial or l0.acc is not None or len(l0.body) < 3: return None
  decl, l1, stores = l0.body[0], l0.body[1], l0.body[2:]
  if not (isinstance(decl, Decl) and decl.size == 0 and isinstance(l1, Loop) and l1.serial and l1.acc is None
          and not l1.extra and all(isinstance(s, Store) for s in stores)): return None
  acc, inner = decl.acc, list(walk(l1.body))
  if not all(isinstance(s, (Loop, Decl, Update, Assign)) for s in inner): return None
  ups = [s for s in inner if isinstance(s, Update) and s.acc is acc]
  direct = any(isinstance(s, Loop) and (s.acc is acc or acc in s.extra) for s in inner)
  if not ups or (direct and _kept_wide(acc, k)) or any(s.at is not None for s in ups) or \
     any(isinstance(s, (Decl, Assign)) and s.acc is acc for s in inner): return None
  nodes = toposort([v for s in inner if isinstance(s, (Update, Assign)) for v in (s.value, s.at) if v is not None])
  if acc in nodes: return None                                     # (the total is only ever added to)
  runs = []
  for n in nodes:
    if n.op is not Ops.LOAD or len(n.src) != 2 or l0.var not in sym.loop_vars(n.src[1]): continue
    terms = sym.linear(n.src[1])[0]
    c0, c1 = terms.get(l0.var, 0), terms.get(l1.var, 0)
    if c1 == 0: continue                                          # (a per-channel parameter: a batch norm's mean)
    if c0 <= 0 or c1 < c0 * l0.size: return None                  # a kept value's data is not one run per image
    runs.append(c0 * n.dtype.itemsize)
  if not runs or max(runs) >= ORDER_RUN_BYTES or max(runs) * l0.size * l1.size < ORDER_MIN_BYTES: return None
  groups = [d for d in range(2, l0.size // max(2, cores) + 1) if l0.size % d == 0]   # (a group or more a core)
  if not groups: return None
  size = next((d for d in groups if d * max(runs) >= ORDER_GROUP_BYTES), groups[-1])
  nv, na = _max_var(k.body) + 1, _max_acc(k.body) + 1
  g, v, w = sym.loop_var(nv, l0.size // size), sym.loop_var(nv + 1, size), sym.loop_var(nv + 2, size)
  totals = UOp(Ops.DEFINE_ACC, acc.dtype, (), (na, acc.arg[1]))
  if acc in k.narrow_sums: k.narrow_sums.add(totals)
  at, out = {l0.var: sym.add(sym.mul(g, size), v)}, {l0.var: sym.add(sym.mul(g, size), w)}
  element = lambda i: UOp(Ops.INDEX, acc.dtype, (totals, i))
  if direct: body = [Decl(acc), Assign(acc, None, element(v)), *_moved(l1.body, at), Assign(totals, v, acc)]
  else: body = _retarget(_moved(l1.body, at), acc, lambda u: Update(totals, u.value, v))
  sums = Loop(l1.var, [Loop(v, body)], serial=True)
  # each total goes back into the scalar the stores read (a wide sum's reads round to its dtype; an array's do not),
  # declared in the loop that assigns it (the renderer hoists what reads a scalar declared outside)
  ends = [Decl(acc), Assign(acc, None, element(w)), *_moved(stores, out)]
  return Loop(g, [Decl(totals, size), sums, Loop(w, ends)])

def _retarget(stmts: list, acc: UOp, update) -> list:
  """`stmts` with every update of `acc` (in loops too) replaced by `update(it)`."""
  def one(s):
    if isinstance(s, Loop): return dataclasses.replace(s, body=_retarget(s.body, acc, update))
    return update(s) if isinstance(s, Update) and s.acc is acc else s
  return [one(s) for s in stmts]

def estimate(k: Kernel, slot_bytes: dict) -> None:
  """The kernel's work estimates (any device): the bytes of the buffers it touches, its operations."""
  k.nbytes = sum(slot_bytes.get(g.arg, 0) for g in k.args)
  k.flops = work(k.body)

SPLIT_MIN = 16                   # a loop of at least this many iterations is split where its masks change
SPLIT_RANGES = 5                 # into at most this many loops
SPLIT_LONG = 8                   # one of which runs at least this many iterations
WRITE_OUT = 2                    # an inner loop this short that selects on its variable is written out, folded

def split_guards(k: Kernel, device=None, stmts: list | None = None) -> None:
  """A loop nest that only stores (elementwise work) whose masks compare a loop's variable with constants (the
  pieces of a concatenation, a pad's edges, rfft's separation of its first and last frequencies) runs that loop as
  one loop for each range of its values over which every such mask is constant, with the masks folded there: a
  load whose mask holds is a plain load, one whose mask fails is its zero, a select with a decided condition is
  its chosen side. The loads along the loop are then plain and the loop vectorizes, where a select of pointers for
  every element (`*(c ? &x[i] : zero)`) kept it scalar. Two shapes of mask are written out instead: an inner loop of
  WRITE_OUT iterations that compares its variable (complex parts as pairs, `i == 0 ? re : im`), and a loop whose
  masks test its variable modulo two (`_interleaved`: the same pairs after a reshape merged them into the row). The
  same values are loaded and computed either way. It runs before the passes that read loops' shapes (`tile_transposes`
  then sees a complex transpose's pairs of stores as one elementwise nest) and before `mark_parallel`; `stmts`
  (default the kernel's body) is the list being walked."""
  stmts = k.body if stmts is None else stmts
  i = 0
  while i < len(stmts):
    s = stmts[i]
    if not isinstance(s, Loop) or not _stores_only(s):
      if isinstance(s, Loop): split_guards(k, device, s.body)
      i += 1
      continue
    pieces = (_written_out_stores(s) if stmts is not k.body and s.size <= WRITE_OUT else
              _split_at_guards(s, k) or _interleaved(s, k))
    if pieces is None: pieces = [s]
    stmts[i:i + 1] = pieces                   # in place first: the loops inside take variables past theirs
    for p in pieces:
      if isinstance(p, Loop): split_guards(k, device, p.body)
    i += len(pieces)

def _written_out_stores(l: Loop) -> list | None:
  """The stores of inner loop `l` (no loops inside) written out for each value of its variable, folded, where some
  comparison in them depends on it (complex parts interleaved: `i == 0 ? re : im`), else None."""
  if any(isinstance(x, Loop) for x in l.body): return None
  roots = _store_roots(l.body)
  dep = {}
  for n in toposort(roots): dep[n] = n is l.var or any(dep[x] for x in n.src)
  if not any(dep[n] for n in dep if _compared(n) is not None): return None
  return _stores_at(l, [{l.var: sym.const(v)} for v in range(l.size)])

def _interleaved(l: Loop, k: Kernel) -> list | None:
  """Innermost loop `l` over v whose masks compare v % m (m up to WRITE_OUT, dividing its size: two arrays
  interleaved, `stack([re, im], -1).reshape(...)`) as a loop over v / m whose body is the m stores of v = m q + r,
  each folded for its r, else None."""
  if any(isinstance(x, Loop) for x in l.body): return None
  roots = _store_roots(l.body)
  for n in toposort(roots):
    if (cmp := _compared(n)) is None: continue
    terms, _ = sym.linear(cmp[1])
    if len(terms) != 1: continue
    (a, coef), = terms.items()
    if a.op is Ops.REM and a.src[0] is l.var and coef == 1 and (m := a.src[1].arg[0]) <= WRITE_OUT and \
       l.size % m == 0:
      q = sym.loop_var(_max_var(k.body) + 1, l.size // m)
      body = _stores_at(l, [{l.var: sym.add(sym.mul(q, m), sym.const(r))} for r in range(m)])
      return None if body is None else [Loop(q, body)]
  return None

def _stores_at(l: Loop, points: list) -> list | None:
  """The stores of loop `l` (no loops inside) at each substitution of `points`, folded; None where a masked load
  is left in them: GCC 12 miscompiled outer loops it vectorized around such stores (TJX_KEEP_LOOP in the prelude)."""
  out = [st for at in points for x in l.body if (st := _store_at(x, at)) is not None]
  if any(n.op is Ops.LOAD and len(n.src) == 3 for n in toposort(_store_roots(out))):
    return None
  return out

def _store_at(x: Store, at: dict) -> Store | None:
  """Store `x` with the substitution `at` made and folded; None where its mask then always fails."""
  valid = _folded(substitute([x.valid], at)[0])
  if sym.is_const(valid) and not valid.arg[0]: return None
  return Store(x.buf, _folded(substitute([x.idx], at)[0]), _folded(substitute([x.value], at)[0]),
               sym.TRUE if sym.is_const(valid) else valid)

def _store_roots(stores) -> list:
  """The expressions of `stores`: each one's index, value and mask."""
  return [r for x in stores for r in (x.idx, x.value, x.valid)]

def _stores_only(l: Loop) -> bool:
  """Loop `l` and every loop in it store and nothing else (no accumulator, no order between iterations)."""
  if l.acc is not None or l.serial or l.extra: return False
  return all(isinstance(x, Store) or (isinstance(x, Loop) and _stores_only(x)) for x in l.body)

def _index_of(u: UOp) -> UOp | None:
  """The index expression `u` is (itself, an integer constant, or an integer cast of an index whose values the cast
  keeps: an iota), else None."""
  if u.dtype is IDX: return u
  if u.op is Ops.CONST and u.dtype.kind in 'iu': return sym.const(u.arg[0])
  if u.op is Ops.CAST and u.src[0].dtype is IDX and u.dtype.kind in 'iu':
    lo, hi = sym.bounds(u.src[0])
    if sym.dtype_bounds(u.dtype)[0] <= lo and hi <= sym.dtype_bounds(u.dtype)[1]: return u.src[0]
  return None

def _compared(n: UOp) -> tuple | None:
  """(op, x, e) where node `n` compares the index x with the constant e as `x op e`, op one of '<', '>=', '==' and
  '!=' (`e < x` is `x >= e + 1`, `x <= e` is `x < e + 1`), else None."""
  if n.op not in (Ops.CMPLT, Ops.CMPLE, Ops.CMPEQ, Ops.CMPNE): return None
  a, b = n.src
  if sym.is_const(b) and (x := _index_of(a)) is not None: e, swapped = b.arg[0], False
  elif sym.is_const(a) and (x := _index_of(b)) is not None: e, swapped = a.arg[0], True
  else: return None
  if n.op in (Ops.CMPEQ, Ops.CMPNE): return ('==' if n.op is Ops.CMPEQ else '!=', x, e)
  strict = n.op is Ops.CMPLT
  if swapped: return '>=', x, e + 1 if strict else e
  return '<', x, e if strict else e + 1

def _decided(cmp: tuple) -> bool | None:
  """The value of comparison `cmp` (`_compared`) where the bounds of its index decide it, else None."""
  op, x, e = cmp
  lo, hi = sym.bounds(x)
  if op in ('<', '>='): is_lt = True if hi < e else False if lo >= e else None
  else: is_lt = (lo == hi == e) if (lo == hi == e or e < lo or e > hi) else None   # (x == e)
  if is_lt is None: return None
  return is_lt if op in ('<', '==') else not is_lt

def _cuts(l: Loop) -> list:
  """The values of l's variable v at which some comparison `c * v + d < e` (v its only variable) changes."""
  roots = _store_roots(x for x in walk(l.body) if isinstance(x, Store))
  cuts = set()
  for n in toposort(roots):
    if (cmp := _compared(n)) is None: continue
    op, x, e = cmp
    terms, c0 = sym.linear(x)
    if set(terms) != {l.var}: continue
    c = terms[l.var]
    for t in ((e, e + 1) if op in ('==', '!=') else (e,)):   # where x < t changes: c * v < t - c0
      at = -(-(t - c0) // c) if c > 0 else (t - c0) // c + 1   # v < at (c > 0), v >= at (c < 0)
      if 0 < at < l.size: cuts.add(at)
  return sorted(cuts)

def _split_at_guards(l: Loop, k: Kernel) -> list | None:
  if l.size < SPLIT_MIN: return None
  if not any(isinstance(x, Loop) for x in l.body) and \
     any(n.op is Ops.LOAD and _across(n, l.var) for x in l.body for n in toposort([x.value])):
    return None                          # a transposed read: `tile_transposes` blocks this nest, masks and all
  cuts = _cuts(l)
  edges = [0] + cuts + [l.size]
  if not cuts or len(edges) - 1 > SPLIT_RANGES or max(b - a for a, b in zip(edges, edges[1:])) < SPLIT_LONG:
    return None
  fresh = itertools.count(_max_var(k.body) + 1)
  return [_shifted(l, a, b, fresh) for a, b in zip(edges, edges[1:])]

def _shifted(l: Loop, start: int, end: int, fresh) -> Loop:
  """Loop `l` over the values start .. end - 1 of its variable, its masks folded there; it and each loop inside it
  get new variables (numbered by `fresh`), so no two loops of the kernel share one."""
  def copy(x: Loop, at: dict, lo: int, size: int) -> Loop:
    w = sym.loop_var(next(fresh), size)
    at = {**at, x.var: sym.add(w, sym.const(lo))}
    out = []
    for y in x.body:
      if isinstance(y, Loop): out.append(copy(y, at, 0, y.size))
      elif (st := _store_at(y, at)) is not None: out.append(st)
    return Loop(w, out)
  return copy(l, {}, start, end - start)

def _folded(u: UOp) -> UOp:
  """`u` rebuilt with its index arithmetic simplified (`sym.rebuilt`, resimplify's step) and every comparison its
  variables' ranges decide folded, with what depends on it: masks, selects and masked loads."""
  done: dict = {}
  for n in toposort([u]):
    src = tuple(done[s] for s in n.src)
    m = sym.rebuilt(n, src)
    if (cmp := _compared(m)) is not None: done[n] = m if (v := _decided(cmp)) is None else scalar(v, n.dtype)
    elif n.op is Ops.NOT and sym.is_const(src[0]): done[n] = scalar(not src[0].arg[0], n.dtype)
    elif n.op in (Ops.AND, Ops.OR) and n.dtype is dtypes.bool_ and any(sym.is_const(x) for x in src):
      c, other = (src[0], src[1]) if sym.is_const(src[0]) else (src[1], src[0])
      done[n] = other if bool(c.arg[0]) == (n.op is Ops.AND) else c
    elif n.op is Ops.WHERE and sym.is_const(src[0]): done[n] = src[1] if src[0].arg[0] else src[2]
    elif n.op is Ops.LOAD and len(src) == 3 and sym.is_const(src[2]):
      done[n] = UOp(Ops.LOAD, n.dtype, src[:2]) if src[2].arg[0] else _zero(n.dtype)
    else: done[n] = m
  return done[u]

def _zero(dtype) -> UOp:
  """The value a masked load reads where its mask fails: zero bits."""
  return scalar(False if dtype is dtypes.bool_ else 0.0 if dtypes.is_float(dtype) else 0, dtype)
