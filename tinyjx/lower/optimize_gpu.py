"""optimize_gpu: the kernel shape of devices that run a kernel as a grid of work items (`kernel_shape == 'grid'`:
OpenCL, CUDA). The CPU heuristics (matmul packing, OpenMP loops) are in optimize.py; these are the GPU ones, and
the per-device facts they read come from the device object (`device_facts`).

Input: a kernel's statement tree (index.py). Output: the same kernel with its GPU shape filled in (`Kernel.grid`,
`global_size`, `local_size`, `groups`, `strided`) and, where a heuristic chose them, the GPU statements below. The
renderer (dialects.py) only writes out what is decided here. Every kernel gets one of three shapes:

- work items (`groups` False): the kernel's outermost perfect nest of independent loops (at most three, none
  `serial`) is its grid, one work item per point. The loops stay in the statement tree, listed in `k.grid`
  (outermost first); the renderer runs each as a grid-stride loop from the work item's global id, so any launch
  covers it; the innermost loop is dimension 0, so neighbouring work items touch neighbouring memory. The local
  size is a block of up to `GROUP` threads along dimension 0 first; the global size is rounded up to a multiple of
  it. A kernel with no such loop (a sort, a scatter) runs as one work item.
- work groups (`groups` True): each point of the grid is a work group of `local_size[0]` threads that share its
  work: a long reduction loop runs strided over the threads (`strided`: loop -> first value, step), each thread
  accumulating a part, and a `GroupReduce` combines the parts in local memory (a tree, halving with a barrier per
  step), after which every thread holds the whole; independent inner loops (softmax's output row) are strided too,
  and stores of one value per group are made by thread 0. The grid loops stride over work groups, so every thread
  of a group runs the same trip counts and reaches every barrier. A long reduction to a few values (a full sum, a
  batch norm's statistics per channel: fewer than SPREAD_POINTS, at least TWO_STAGE_MIN long) runs as two kernels
  (`spread_reductions`): many groups per value each write a partial result, then one group (or work item) per value
  combines its partials. Sums are trees of short sequential runs, so float32 stays close to float64.
- tiled matmul: a sum of products whose operands each miss some output axis (a matmul, batched, transposed, with
  fused producers and epilogue; a convolution's window contraction too) becomes a `TiledMatmul`: each group owns a
  TM x TN tile of the output, each of its THREADS x THREADS threads a register tile of RM x RN results, and the
  contraction runs in steps of TK, staging a TK x TM slice of x and a TK x TN slice of y in local memory between two
  barriers. Any m, n, k: loads past an edge read zeros, stores past an edge are skipped. The register tiles add in
  the operands' type (float32 as GPU BLAS libraries do). A contraction with fewer tiles than SPREAD_POINTS and a
  long k (a convolution's weight gradient: a small output summed over batch and image) is split first
  (`split_contraction`, split-K): a tiled matmul over equal slices of k, the slice a batch axis, writes partial
  results, and the original kernel adds each output's partials and applies its epilogue.
Results do not depend on the launch: the grid, local size and the order of every sum are fixed here.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops, toposort, substitute
from tinyjx.lower import symbolic as sym
from tinyjx.lower.index import (Loop, Decl, Update, Store, Kernel, Contraction, unflatten, load, flat_index,
                                is_reduce_then_store, walk)

MAX_DIMS = 3
GROUP = 256                # threads of a work group, where the device allows that many
GROUP_REDUCE_MIN = 64      # a reduction at least this long is shared by the threads of a work group
SMALL_GRID = 2048          # grids of fewer points share even a strided reduction over a group's threads
TWO_STAGE_MIN = 1 << 15    # a reduction at least this long to fewer than SPREAD_POINTS values runs on many groups
SPREAD_POINTS = 128        # fewer work groups than this would leave most of a big GPU idle (an H200 has 132 SMs)
PER_THREAD = 16            # elements each thread sums in the first stage of a two-stage reduction (at least)
MAX_PARTIALS = 1024        # work groups of a first stage, at most
SPLIT_K_MIN = 1 << 12      # a contraction at least this long over fewer tiles than SPREAD_POINTS is split (split-K)
SLICE_MIN = 256            # contraction values in each slice of a split contraction, at least
MATMUL_MIN_WORK = 1 << 12  # multiply-adds below which a sum of products stays a plain reduction
MATMUL_MIN_K = 4           # a shorter contraction is an elementwise product: no tiles
THREADS = 16               # a tiled matmul's group is THREADS x THREADS threads (8 x 8 on a small device)
TK = 16                    # contraction values per staged slice of a tiled matmul
LID = sym.special('lid', GROUP)   # the thread's index in its work group (rendered by the dialect)

@dataclass(frozen=True)
class DeviceFacts:
  """What the GPU heuristics need to know about a device."""
  max_local: int           # threads of a work group, at most
  local_memory: int        # bytes of local (shared) memory a work group may use
  multiple: int            # the preferred multiple of a work group's size (a warp, a wavefront, a SIMD width)

def device_facts(device) -> DeviceFacts:
  """The facts of `device` (`max_local_size`, `local_memory_size`, `local_multiple`), CUDA's usual ones where it
  does not say."""
  return DeviceFacts(getattr(device, 'max_local_size', 1024), getattr(device, 'local_memory_size', 48 << 10),
                     getattr(device, 'local_multiple', 32))

# --- the GPU statements ---
@dataclass(eq=False)
class GroupReduce:
  """Every thread of the work group holds a part of `acc`; afterwards each holds the whole: the parts meet in local
  memory and are combined in a tree, halving the active threads with a barrier per step. Reached by every thread."""
  acc: UOp

@dataclass(eq=False)
class TiledMatmul(Contraction):
  """out(b, i, j) = epilogue(sum_k x(b, i, k) * y(b, j, k)) for the output tile (ti, tj) of one work group.

  `x` is an expression of the template variables `mi` (flat row) and `mk` (flat contraction index), `y` of `mj` and
  `mk`; both may read the batch loop variable. `store` is in `mi`, `mj` and `cv` (the result). The group's threads
  are `threads` x `threads`; thread (ty, tx) owns rows ti * tm + ty + r * threads (r < rm) and columns
  tj * tn + tx + c * threads (c < rn), so neighbouring threads store neighbouring columns."""
  ti: UOp = None            # loop variable of the group's row tile
  tj: UOp = None            # loop variable of the group's column tile
  threads: int = THREADS
  rm: int = 1               # rows of a thread's register tile
  rn: int = 1               # columns of a thread's register tile
  tk: int = TK
  x_k_inner: bool = False   # x is contiguous along the contraction: threads load it k fastest
  y_k_inner: bool = False
  @property
  def tm(self) -> int: return self.threads * self.rm
  @property
  def tn(self) -> int: return self.threads * self.rn
  @property
  def work(self) -> int:
    """One group's share (the statement runs once per tile of the grid loops around it)."""
    return 2 * self.m * self.n * self.k // (self.ti.arg[1] * self.tj.arg[1])

# --- helpers ---
def pow2_at_least(n: int) -> int: return 1 << max(0, (int(n) - 1).bit_length())

def group_size(facts: DeviceFacts, n: int) -> int:
  """Threads of a work group sharing a reduction of length `n`: a power of two, a multiple of the device's preferred
  multiple where it can be, at most GROUP and the device's limit."""
  cap = 1 << (min(GROUP, facts.max_local).bit_length() - 1)
  return max(1, min(cap, max(pow2_at_least(facts.multiple), pow2_at_least(n))))

def grid_loops(stmts: list, most: int = MAX_DIMS) -> list:
  """The outermost perfect nest of independent loops (at most `most`), outermost first."""
  loops: list = []
  while len(stmts) == 1 and isinstance(stmts[0], Loop) and not stmts[0].serial and len(loops) < most:
    loops.append(stmts[0])
    stmts = stmts[0].body
  return loops

def fresh_var(stmts: list, size: int, taken: list) -> UOp:
  """A loop variable of `size` numbered past every loop variable of `stmts` and of `taken`."""
  used = [s.var.arg[0] for s in walk(stmts) if isinstance(s, Loop)] + [v.arg[0] for v in taken]
  return sym.loop_var(max(used, default=-1) + 1, size)

def rewrite(u: UOp, mapping: dict) -> UOp: return sym.resimplify(substitute([u], mapping)[0])

def reads_own_output(k: Kernel) -> bool:
  """Some statement loads a buffer the kernel writes (a scatter, a bfloat16 rounding pass): order matters."""
  roots = [e for s in walk(k.body) for e in _exprs(s)]
  return any(n.op is Ops.LOAD and n.src[0].arg in k.outs for n in toposort(roots))

def _exprs(s) -> list:
  if isinstance(s, Update): return [s.value] + ([s.at] if s.at is not None else [])
  if isinstance(s, Store): return [s.idx, s.value, s.valid]
  return []

def is_reduction(loop: Loop) -> bool:
  """A serial loop nest that only accumulates (no stores: a cumulative sum or a scatter is not one)."""
  inner = list(walk(loop.body))
  return loop.serial and all(isinstance(s, (Loop, Decl, Update)) for s in inner) and \
    all(s.at is None for s in inner if isinstance(s, Update)) and any(isinstance(s, Update) for s in inner)

def flatten(loop: Loop, taken: list) -> Loop:
  """A perfect nest of reduction loops around updates as one loop over the product of their sizes (so all of it can
  be strided over a group's threads); any other loop as it is."""
  loops, body = [loop], loop.body
  while len(body) == 1 and isinstance(body[0], Loop):
    loops.append(body[0])
    body = body[0].body
  if len(loops) == 1 or not all(isinstance(s, Update) for s in body): return loop
  flat = fresh_var([loop], math.prod(l.size for l in loops), taken)
  taken.append(flat)
  mapping = dict(zip([l.var for l in loops], unflatten(flat, [l.size for l in loops])))
  return Loop(flat, [Update(u.acc, rewrite(u.value, mapping)) for u in body], acc=loops[-1].acc, serial=True)

def reduction_length(stmts: list) -> int:
  """The longest reduction loop nest directly in `stmts` (0 if none)."""
  return max((math.prod(l.size for l in walk([s]) if isinstance(l, Loop) and l.serial)
              for s in stmts if isinstance(s, Loop) and is_reduction(s)), default=0)

def innermost_updates(stmts: list, loop: Loop | None = None):
  """(the innermost loop around it, update) for every update of the reduction loops in `stmts`."""
  for s in stmts:
    if isinstance(s, Update) and loop is not None: yield loop, s
    if isinstance(s, Loop) and (loop is not None or is_reduction(s)): yield from innermost_updates(s.body, s)

def contiguous_along(u: UOp, var: UOp) -> bool:
  """Every load of `u` walks memory in order along loop variable `var`."""
  loads = [sym.linear(n.src[1])[0] for n in toposort([u]) if n.op is Ops.LOAD]
  return bool(loads) and all(t.get(var) == 1 for t in loads)

# --- the passes ---
def as_grid(k: Kernel, device=None) -> None:
  """The GPU shape of kernel `k` (in place; see the module doc): a tiled matmul, a grid of work groups sharing
  reductions, or a grid of work items. A pass of `tinyjx.lower.PASSES` (`grid`). Kernels shaped already (the first
  stage of a two-stage reduction) are left alone.

  >>> from tinyjx import dtypes
  >>> from tinyjx.uop import UOp, Ops
  >>> from tinyjx.lower.index import build_kernel
  >>> x = UOp(Ops.PARAM, dtypes.float32, (), (0, (6, 4), 0))
  >>> y = UOp(Ops.EXP, dtypes.float32, (x,)).reduce(Ops.ADD, (1,))
  >>> k = build_kernel("k0", [y], {x: 0, y: 1})
  >>> as_grid(k); k.global_size, k.local_size, k.groups
  ((8,), (8,), False)
  >>> x = UOp(Ops.PARAM, dtypes.float32, (), (0, (6, 4096), 0))
  >>> y = UOp(Ops.EXP, dtypes.float32, (x,)).reduce(Ops.ADD, (1,))
  >>> k = build_kernel("k0", [y], {x: 0, y: 1})
  >>> as_grid(k); k.global_size, k.local_size, k.groups
  ((1536,), (256,), True)
  """
  if k.local_size is not None: return
  facts = device_facts(device)
  if tile_matmul(k, facts) or share_reductions(k, facts): return
  k.grid = grid_loops(k.body)
  sizes = [l.size for l in reversed(k.grid)] or [1]
  local, room = [], min(GROUP, facts.max_local)
  for d, n in enumerate(sizes):
    local.append(max(1, min(pow2_at_least(n), room, 64 if d == 2 else room)))
    room //= local[-1]
  k.local_size = tuple(local)
  k.global_size = tuple(-(-n // l) * l for n, l in zip(sizes, local))

def share_reductions(k: Kernel, facts: DeviceFacts) -> bool:
  """Make `k` a grid of work groups whose threads share each grid point's long reductions, where that pays: a
  reduction of at least GROUP_REDUCE_MIN elements, read in order along it (or a grid too small to fill the device
  with one work item per point). False (and `k` unchanged) otherwise."""
  grid = grid_loops(k.body)
  stmts = grid[-1].body if grid else k.body
  n = reduction_length(stmts)
  if n < GROUP_REDUCE_MIN or reads_own_output(k): return False
  points = math.prod(l.size for l in grid)
  ordered = all(contiguous_along(u.value, l.var) for l, u in innermost_updates(stmts))
  if points >= SMALL_GRID and not ordered: return False
  size = group_size(facts, n)
  shared = shared_statements(stmts, size, k.body)
  if shared is None: return False
  body, strided = shared
  if grid: grid[-1].body = body
  else: k.body = body
  set_groups(k, grid, size, strided)
  return True

def set_groups(k: Kernel, grid: list, size: int, strided: dict) -> None:
  """`k` runs one work group of `size` threads per point of its grid loops `grid` (outermost first)."""
  k.grid, k.groups, k.strided = grid, True, strided
  sizes = [l.size for l in reversed(grid)] or [1]
  k.local_size = (size,) + (1,) * (len(sizes) - 1)
  k.global_size = (sizes[0] * size, *sizes[1:])

def shared_statements(stmts: list, size: int, kernel_body: list):
  """The statements of one grid point with their work shared by the `size` threads of a group, and the loops now
  strided over them; None where some statement cannot be shared (a sort, a cumulative loop, an array of
  accumulators)."""
  first = sym.lt(LID, 1)
  mine = {s.acc for s in stmts if isinstance(s, Decl)}
  last = {u.acc: i for i, s in enumerate(stmts) if isinstance(s, Loop) for u in walk([s]) if isinstance(u, Update)}
  out, strided, taken = [], {}, [l.var for l in walk(kernel_body) if isinstance(l, Loop)]
  for i, s in enumerate(stmts):
    if isinstance(s, Decl) and not s.size: out.append(s)
    elif isinstance(s, Store): out.append(Store(s.buf, s.idx, s.value, sym.and_(s.valid, first)))
    elif isinstance(s, Loop) and not s.serial:
      if any(isinstance(u, Update) and u.acc in mine for u in walk([s])): return None
      strided[id(s)] = (LID, size)
      out.append(s)
    elif isinstance(s, Loop) and is_reduction(s):
      loop = flatten(s, taken)
      strided[id(loop)] = (LID, size)
      done = [a for a in mine if last.get(a) == i]    # combined once its last loop is done, never twice
      out += [loop] + [GroupReduce(a) for a in sorted(done, key=lambda a: a.arg[0])]
    else: return None
  return out, strided

def spread_reductions(st) -> None:
  """A long reduction to a few values (a full sum to a scalar, a batch norm's statistics per channel: a kernel that is
  only accumulations and stores below fewer than SPREAD_POINTS grid points) becomes two kernels on a grid device:
  many work groups per point, each thread summing a strided part and each group its threads' parts, write one
  partial result per group into a new intermediate buffer; then one group (or work item) per point combines that
  point's partials and stores. Likewise a long contraction with few output tiles (a convolution's weight gradient:
  a small output, a contraction over batch and image) is split into slices (`split_contraction`). In place on the
  `Lowering` `st` (its slots, kernels and schedule items)."""
  from tinyjx.lower.schedule import KernelItem
  facts = device_facts(st.device)
  kernels, items, at = [], [], 0
  for it in st.items:
    if isinstance(it, KernelItem):
      k = st.kernels[at]
      at += 1
      if (found := few_long_reductions(k)) is not None:
        kernels.append(first_stage(k, *found, st, facts))
        items.append(KernelItem([]))
      elif (split := split_of(k, facts)) is not None:
        kernels.append(split_contraction(k, *split, st))
        items.append(KernelItem([]))
      kernels.append(k)
    items.append(it)
  st.kernels, st.items = kernels, items

def few_long_reductions(k: Kernel):
  """(grid loops, the statements below them) where `k` has only declarations, reductions and stores below fewer than
  SPREAD_POINTS grid points, and a reduction at least TWO_STAGE_MIN long; else None."""
  grid = grid_loops(k.body)
  stmts = grid[-1].body if grid else k.body
  if not all(isinstance(s, (Decl, Store)) or isinstance(s, Loop) and is_reduction(s) for s in stmts): return None
  if any(isinstance(s, Decl) and s.size for s in stmts) or reads_own_output(k): return None
  if math.prod(l.size for l in grid) >= SPREAD_POINTS or reduction_length(stmts) < TWO_STAGE_MIN: return None
  return grid, stmts

def rewritten(stmts: list, mapping: dict) -> list:
  """Reduction statements (loops, declarations, updates) with their expressions' variables replaced by `mapping`."""
  out = []
  for s in stmts:
    if isinstance(s, Loop): out.append(Loop(s.var, rewritten(s.body, mapping), acc=s.acc, serial=s.serial))
    elif isinstance(s, Update): out.append(Update(s.acc, rewrite(s.value, mapping)))
    else: out.append(s)
  return out

def first_stage(k: Kernel, grid: list, stmts: list, st, facts: DeviceFacts) -> Kernel:
  """The kernel writing the per-group partials of `k`'s reductions (`grid` and `stmts` from `few_long_reductions`):
  one grid loop q over points x groups, point q / groups, group q % groups. `k` then combines the partials (in
  place)."""
  from tinyjx.lower.runtime import Slot
  n, points, sizes = reduction_length(stmts), math.prod(l.size for l in grid), [l.size for l in grid]
  size = group_size(facts, n)
  groups = max(2, min(MAX_PARTIALS // points, n // (size * PER_THREAD)))
  taken = [l.var for l in walk(k.body) if isinstance(l, Loop)]
  q = fresh_var(k.body, points * groups, [])
  taken.append(q)
  point = dict(zip([l.var for l in grid], unflatten(sym.floordiv(q, groups), sizes)))
  first = sym.add(sym.mul(sym.mod(q, groups), size), LID)
  body, strided, partial, final = [], {}, {}, []
  for s in stmts:
    if isinstance(s, Decl): body.append(Decl(s.acc))
    elif isinstance(s, Loop):
      body += rewritten([flatten(s, taken)], point)
      strided[id(body[-1])] = (first, groups * size)
  row = sym.mul(flat_index([l.var for l in grid], sizes), groups)
  for a in [s.acc for s in stmts if isinstance(s, Decl)]:
    st.slots.append(Slot('tmp', (points * groups,), a.dtype))
    partial[a] = UOp(Ops.DEFINE_GLOBAL, a.dtype, (), len(st.slots) - 1)
    body += [GroupReduce(a), Store(partial[a], q, a, sym.lt(LID, 1))]
    p = fresh_var(k.body, groups, taken)
    taken.append(p)
    final += [Decl(a), Loop(p, [Update(a, load(partial[a], sym.add(row, p)))], acc=a, serial=True)]
  reads = [x for x in k.args if x.arg not in k.outs]
  stage = Kernel(k.name + "_partial", [Loop(q, body)], sorted(reads + list(partial.values()), key=lambda x: x.arg),
                 tuple(x.arg for x in partial.values()), k.nodes)
  set_groups(stage, stage.body, size, strided)
  final += [s for s in stmts if isinstance(s, Store)]
  if grid: grid[-1].body = final
  else: k.body = final
  k.args = sorted(k.args + list(partial.values()), key=lambda x: x.arg)
  return stage

def split_of(k: Kernel, facts: DeviceFacts):
  """(slices, the sum of products) where split-K pays for `k`, else None: a sum of products with no batch axis (other
  than one of size 1), fewer tiles than SPREAD_POINTS work groups and a contraction at least SPLIT_K_MIN long gets
  about 2 * SPREAD_POINTS groups in all, each slice at least SLICE_MIN long and all slices of one length."""
  if reads_own_output(k) or (found := sum_of_products(k)) is None or (found_sides := sides(found)) is None: return None
  iv, jv, bv, kv = found_sides[:4]
  m, n, kn = (math.prod(v.arg[1] for v in vs) for vs in (iv, jv, kv))
  tiles = tile_count(m, n, facts)
  batch = math.prod(v.arg[1] for v in bv)
  if batch > 1 or tiles >= SPREAD_POINTS or kn < SPLIT_K_MIN or m * n * kn < MATMUL_MIN_WORK: return None
  want = min(-(-2 * SPREAD_POINTS // tiles), kn // SLICE_MIN)
  slices = next((d for d in range(want, 1, -1) if kn % d == 0), 1)
  return (slices, found) if slices > 1 else None

def split_contraction(k: Kernel, slices: int, found: tuple, st) -> Kernel:
  """Split-K: the kernel that sums the products of `k` over each of `slices` equal slices of its contraction into a
  new intermediate buffer (slice-major, one partial per output point and slice; the slice is a batch axis of its
  tiled matmul, so there are `slices` times as many work groups). `k` then adds each output point's partials and
  stores as before (in place)."""
  from tinyjx.lower.runtime import Slot
  loops, red, acc, stores, _, _ = found
  sizes = [l.size for l in loops]
  points, outer = math.prod(sizes), [l.var for l in loops]
  taken = [l.var for l in walk(k.body) if isinstance(l, Loop)]
  whole = flatten(red[0], taken)
  kc = whole.size // slices
  s = fresh_var(k.body, slices, taken)
  taken.append(s)
  kk = fresh_var(k.body, kc, taken)
  taken.append(kk)
  part = rewritten([Loop(kk, whole.body, acc=acc, serial=True)], {whole.var: sym.add(sym.mul(s, kc), kk)})
  st.slots.append(Slot('tmp', (slices * points,), acc.dtype))
  partial = UOp(Ops.DEFINE_GLOBAL, acc.dtype, (), len(st.slots) - 1)
  body = [Decl(acc), *part, Store(partial, sym.add(sym.mul(s, points), flat_index(outer, sizes)), acc)]
  for v in reversed([s] + outer): body = [Loop(v, body)]
  reads = [x for x in k.args if x.arg not in k.outs]
  stage = Kernel(k.name + "_split", body, sorted(reads + [partial], key=lambda x: x.arg), (partial.arg,), k.nodes)
  p = fresh_var(k.body, slices, taken)
  add = Update(acc, load(partial, sym.add(sym.mul(p, points), flat_index(outer, sizes))))
  loops[-1].body = [Decl(acc), Loop(p, [add], acc=acc, serial=True), *stores]
  k.args = sorted(k.args + [partial], key=lambda x: x.arg)
  return stage

def spread_of(k: Kernel) -> int:
  """How many work groups share each of `k`'s strided loops: 1, but in the first stage of a two-stage reduction
  (where the loop counted once per group would count each element that many times)."""
  return max([step // k.local_size[0] for _, step in k.strided.values()] + [1])

def sum_of_products(k: Kernel):
  """(output loops, contraction loops, accumulator, stores, x, y) where `k` is a perfect nest of independent loops
  around `acc = sum(x * y)` over a perfect nest of contraction loops and stores at one index (several: an optimizer's
  update of a weight gradient); else None."""
  loops = grid_loops(k.body, most=len(list(walk(k.body))))
  inner = loops[-1].body if loops else []
  if not is_reduce_then_store(inner, several=True) or not is_reduction(inner[1]) or inner[0].size: return None
  acc, red = inner[0].acc, [l for l in walk([inner[1]]) if isinstance(l, Loop)]
  body = red[-1].body
  if acc.arg[1] is not Ops.ADD or acc.dtype not in (dtypes.float32, dtypes.float64): return None
  if any(l.body != [red[i + 1]] for i, l in enumerate(red[:-1])) or len(body) != 1 or body[0].acc is not acc or \
     body[0].value.op is not Ops.MUL:
    return None
  x, y = body[0].value.src
  if any(n.op is Ops.DEFINE_ACC for n in toposort([x, y])): return None
  return loops, red, acc, inner[2:], x, y

def sides(found) -> tuple | None:
  """(iv, jv, bv, kv, x, y) of a sum of products (`sum_of_products`): the output axes only x reads, those only y
  reads, those both read (a batch) and the contraction axes, with x and y swapped so that the innermost output axis
  is in jv (it runs along the threads' x); None where an operand reads every output axis."""
  loops, red, acc, store, x, y = found
  vx, vy, outer = sym.loop_vars(x), sym.loop_vars(y), [l.var for l in loops]
  iv = [v for v in outer if v in vx and v not in vy]
  jv = [v for v in outer if v in vy and v not in vx]
  bv = [v for v in outer if v not in iv and v not in jv]
  if not iv or not jv: return None
  if outer[-1] in iv: (x, y), (iv, jv) = (y, x), (jv, iv)
  return iv, jv, bv, [l.var for l in red], x, y

def matmul_threads(facts: DeviceFacts) -> int:
  return THREADS if THREADS * THREADS <= facts.max_local else THREADS // 2

def tile_count(m: int, n: int, facts: DeviceFacts) -> int:
  """Work groups of a tiled m x n matmul."""
  t = matmul_threads(facts)
  return -(-m // (t * register_tile(m, t))) * -(-n // (t * register_tile(n, t)))

def tile_matmul(k: Kernel, facts: DeviceFacts) -> bool:
  """Make `k` a grid of work groups each computing one output tile of a `TiledMatmul`, if it is a big enough sum of
  products whose operands each miss some output axis. False (and `k` unchanged) otherwise."""
  if (found := sum_of_products(k)) is None or (found_sides := sides(found)) is None: return False
  loops, red, acc, stores = found[:4]
  iv, jv, bv, kv, x, y = found_sides
  m, n, kn = (math.prod(v.arg[1] for v in vs) for vs in (iv, jv, kv))
  if m * n * kn < MATMUL_MIN_WORK or kn < MATMUL_MIN_K: return False
  threads = matmul_threads(facts)
  rm, rn = register_tile(m, threads), register_tile(n, threads)
  if (rm + rn) * threads * TK * acc.dtype.itemsize > facts.local_memory: return False
  outer = [l.var for l in loops]
  base = max(v.arg[0] for v in outer + kv) + 1
  ti, tj = sym.loop_var(base, -(-m // (threads * rm))), sym.loop_var(base + 1, -(-n // (threads * rn)))
  b = sym.loop_var(base + 2, math.prod(v.arg[1] for v in bv)) if bv else None
  mapping = {v: e for name, vs in (('mi', iv), ('mj', jv), ('mk', kv))
             for v, e in zip(vs, unflatten(sym.special(name, math.prod(u.arg[1] for u in vs)), [u.arg[1] for u in vs]))}
  if b is not None: mapping.update(zip(bv, unflatten(b, [v.arg[1] for v in bv])))
  cv = UOp(Ops.SPECIAL, acc.dtype, (), ('cv', 0))
  out, *also = (Store(st.buf, rewrite(st.idx, mapping), rewrite(st.value, {**mapping, acc: cv}),
                      rewrite(st.valid, mapping)) for st in stores)
  mm = TiledMatmul(m, n, kn, rewrite(x, mapping), rewrite(y, mapping), out, acc.dtype, ti, tj, threads, rm, rn,
                   x_k_inner=contiguous_along(x, kv[-1]), y_k_inner=contiguous_along(y, kv[-1]), also=also)
  grid = [Loop(ti, [Loop(tj, [mm])])]
  grid.append(grid[0].body[0])
  if b is not None: grid.insert(0, Loop(b, [grid[0]]))
  k.body = [grid[0]]
  set_groups(k, grid, threads * threads, {})
  return True

def register_tile(size: int, threads: int) -> int:
  """Results per thread along one side of a matmul tile: 4 for a big side, fewer for a short one."""
  return 4 if size > 2 * threads else 2 if size > threads else 1
