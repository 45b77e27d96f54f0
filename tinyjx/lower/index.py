"""index: one scheduled kernel becomes loops, accumulators and stores over scalar expressions.

Input: the array-level nodes a kernel must write and the buffer slot of every node it may read
(inputs, constants and nodes earlier kernels materialized). Output: a `Kernel`, a small tree of
statements (`Loop`, `Decl`, `Update`, `Store`, `Sort`) whose expressions are scalar UOps over loop
variables, `LOAD`s from `DEFINE_GLOBAL` buffers and accumulators (`DEFINE_ACC`).

`KernelBuilder.value(node, idx)` is the whole idea: the value of an array node at an index (a tuple of
index expressions). Elementwise ops apply to the values of their sources at the same index; movement ops
only change the index (RESHAPE by div/mod, PERMUTE by reordering, EXPAND by a zero, SHRINK by an offset,
FLIP by reflection, PAD by a bounds check that also guards the load), so views never copy; GATHER loads
at a clamped, data-dependent index; a REDUCE becomes an accumulator loop placed at the loop depth its
index needs. An accumulator is legal only where it is computed once per element of the reduction's
output (the enclosing loops are exactly the loops its index uses, and their sizes multiply to its size);
otherwise `Misplaced` asks for a different loop order, and `NeedsBuffer` asks the schedule to
materialize the node.
"""
from __future__ import annotations
import math
from dataclasses import dataclass, field
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops, GroupOp, toposort
from tinyjx.lower import symbolic as sym
from tinyjx.lower.symbolic import TRUE, IDX

class NeedsBuffer(Exception):
  """The schedule must materialize `node`: this kernel cannot compute it in place."""
  def __init__(self, node: UOp, why: str = ""):
    super().__init__(f"{node.op.name} {node.shape} needs a buffer: {why}")
    self.node = node

class Misplaced(Exception):
  """A reduction's index needs the loops in `dims` outermost."""
  def __init__(self, node: UOp, used: set):
    self.node, self.used = node, used

# --- statements ---
@dataclass(eq=False)
class Loop:
  var: UOp                                  # Ops.RANGE, arg (n, size)
  body: list = field(default_factory=list)
  parallel: bool = False                    # set by optimize: the outermost loop of parallel work
  dynamic: bool = False                     # set by optimize: parallel work big enough to hand out in pieces
  acc: UOp | None = None                    # the accumulator this (innermost reduce) loop updates
  serial: bool = False                      # iterations depend on earlier ones (reductions, scatters)
  extra: tuple = ()                         # more accumulators it updates (optimize.pipeline_rows: the next row's)
  @property
  def size(self) -> int: return self.var.arg[1]

@dataclass(eq=False)
class Decl:
  acc: UOp                                  # DEFINE_ACC arg (n, alu op): `T acc = identity;`
  size: int = 0                             # > 0: an array `T acc[size]` of accumulators (see optimize)

@dataclass(eq=False)
class Update:
  acc: UOp
  value: UOp                                # acc = acc <op> value
  at: UOp | None = None                     # which element, for an array of accumulators

@dataclass(eq=False)
class Store:
  buf: UOp                                  # DEFINE_GLOBAL
  idx: UOp
  value: UOp
  valid: UOp = TRUE                         # stores only where valid (scatter's dropped updates)

@dataclass(eq=False)
class Sort:
  out: UOp                                  # DEFINE_GLOBAL of int32 indices
  src: UOp                                  # DEFINE_GLOBAL of the values
  shape: tuple
  axis: int
  descending: bool
  top: int = 0                              # positions along the axis anything reads (0: all): lower.sorted_prefix

@dataclass(eq=False)
class Local:
  acc: UOp                                  # DEFINE_ACC naming a local array `T acc[size];` (see optimize.stash)
  size: int

@dataclass(eq=False)
class Assign:
  acc: UOp
  at: UOp | None
  value: UOp                                # acc[at] = value (acc = value where at is None: a scalar accumulator)

@dataclass(eq=False)
class Stream:
  buf: UOp                                  # DEFINE_GLOBAL: buf[base : base + size] = acc[0 : size], stored past the
  base: UOp                                 # caches (optimize.stream_stores; the C renderer's tjx_stream)
  acc: UOp                                  # the Local array a loop assigned the block's values to
  size: int

@dataclass(eq=False)
class Transpose:
  src: UOp                                  # DEFINE_GLOBAL: a block of `rows` x lanes copied transposed: element c of
  src_base: UOp                             # row r, src[src_base + r * src_stride + c], to dst[dst_base + c *
  src_stride: int                           # dst_stride + r], lanes x lanes at a time through vector registers
  dst: UOp                                  # (optimize.block_transposes; the C renderer's tjx_trb); with `stream`,
  dst_base: UOp                             # each of dst's lanes rows is stored past the caches (tjx_stream)
  dst_stride: int
  lanes: int
  rows: int
  stream: bool = False
  @property
  def work(self) -> int: return self.lanes * self.rows   # (one store an element, as the loops it replaces)

@dataclass(frozen=True)
class MatmulPlan:
  """How a `Matmul` is tiled, chosen by optimize (`plan_matmul`) and only written out by lower/matmul.py."""
  mr: int                                   # rows of a micro-tile (and of an x panel)
  nr: int                                   # columns of a micro-tile (and of a y panel): two vectors (four, wide)
  vector_bytes: int                         # the micro-kernel's vector width
  x_panels: bool                            # x is packed a panel at a time inside the parallel loop, y whole
  chunked: bool = False                     # the contraction runs in chunks of its outermost variable
  chunk: int = 0                            # values of the outermost contraction variable per chunk
  chunks: int = 1
  split_groups: int = 0                     # > 0: the chunks are the parallel work, in this many fixed groups
  direct: bool = False                      # x (a sliding window) is read in place through offset tables, not packed
  group: int = 1                            # chunked, packed: panels of the streamed side per parallel work item
  x_rows: bool = False                      # x (contiguous along the contraction) is read in place by rows
  by_rows: bool = False                     # y packed whole first, then each thread's blocks of rows against it all
  prefetch: bool = False                    # by_rows: the micro-kernel fetches the next tile's epilogue operands
  lane_rows: bool = False                   # direct, a short contraction: a tile's mr rows (one run of x's
                                            # consecutive elements) lie in the vector lanes, its nr
                                            # columns are broadcast (optimize.lane_rows_tile)

@dataclass(eq=False)
class Contraction:
  """out = epilogue(sum_k x * y) over an m x n output and a contraction of k: what a matmul statement of any device
  (`Matmul` on a CPU, `optimize_gpu.TiledMatmul` on a GPU) computes; `store` writes one result `cv`, and `also`
  writes more outputs at the same index (an optimizer's update of a weight gradient: the parameter and its moments)."""
  m: int
  n: int
  k: int
  x: UOp
  y: UOp
  store: Store
  dtype: object
  also: list = field(default_factory=list, kw_only=True)
  @property
  def stores(self) -> list: return [self.store, *self.also]
  @property
  def work(self) -> int: return 2 * self.m * self.n * self.k

@dataclass(eq=False)
class Matmul(Contraction):
  """out[b, i, j] = epilogue(sum_k x(b, i, k) * y(b, j, k)), made by optimize from a sum-of-products kernel.

  `x` is in the kernel's own loop variables `ivars` (the rows) and `kvars` (the contraction), `y` in `jvars`
  and `kvars`, both may use the enclosing (batch) loop variables: packing walks those loops, so a view's
  index arithmetic stays affine (no division to split a flat index). `store` is in the template variables
  `i` and `j` (SPECIALs, the flat row and column) and writes one result `cv`.
  """
  parallel: bool = True
  x_k_inner: bool = False                   # pack x with k innermost (it is contiguous along k, not along i)
  y_k_inner: bool = False
  ivars: list = field(default_factory=list)
  jvars: list = field(default_factory=list)
  kvars: list = field(default_factory=list)
  plan: MatmulPlan | None = None
  skip: tuple | None = None                 # direct: (v, part, lo, hi): x is zero (padding) for every value of the
                                            # outermost contraction variable v where part + v (part in the row
                                            # variables, `v` negated where it runs backwards) is outside [lo, hi)

@dataclass(eq=False)
class Kernel:
  name: str
  body: list
  args: list                                # DEFINE_GLOBALs, ordered by slot
  outs: tuple                               # slots written
  nodes: list                               # the array-level nodes computed here (DEBUG=3)
  flops: int = 0
  nbytes: int = 0
  narrow_sums: set = field(default_factory=set)   # float32 sums the renderer keeps in float32 (optimize.block_sums)
  zero_pads: dict = field(default_factory=dict)   # slot -> (shape, pads) of an input that is a materialized PAD
  # the GPU kernel shape (optimize_gpu.py; kernel_shape 'grid' devices only)
  grid: list = field(default_factory=list)         # the loops run as the grid, outermost first
  global_size: tuple = (1,)                        # work items per grid dimension, dimension 0 first
  local_size: tuple | None = None                  # work items per work group (None: not shaped yet)
  groups: bool = False                             # a grid point is a work group (its threads share it), not an item
  strided: dict = field(default_factory=dict)      # id(loop) -> (first value, step): a loop split over threads

def is_reduce_then_store(stmts: list, several: bool = False) -> bool:
  """[Decl(acc), the reduce loops, Store]: the innermost body of a reduction kernel; with `several`, also more stores
  at the first one's index (a weight gradient's optimizer update writes the parameter and its moments)."""
  if len(stmts) < 3 or not isinstance(stmts[0], Decl) or not isinstance(stmts[1], Loop): return False
  stores = stmts[2:]
  return all(isinstance(st, Store) and st.idx is stores[0].idx and st.valid is stores[0].valid for st in stores) and \
    (len(stores) == 1 or several)

def walk(stmts: list):
  """Every statement below `stmts`, loops before their bodies."""
  for s in stmts:
    yield s
    if isinstance(s, Loop): yield from walk(s.body)

# --- helpers ---
def strides(shape) -> list[int]:
  out, acc = [], 1
  for s in reversed(shape):
    out.append(acc)
    acc *= s
  return out[::-1]

def flat_index(idx, shape) -> UOp: return sym.add(*[sym.mul(i, st) for i, st in zip(idx, strides(shape))])

def unflatten(flat: UOp, shape) -> tuple:
  return tuple(sym.mod(sym.floordiv(flat, st), s) for st, s in zip(strides(shape), shape))

def scalar(value, dtype) -> UOp: return UOp(Ops.CONST, dtype, (), (value, ()))

def identity(op: Ops, dtype):
  if op is Ops.ADD: return False if dtype.kind == 'b' else 0
  if op is Ops.MUL: return True if dtype.kind == 'b' else 1
  if dtype.kind == 'f': return -math.inf if op is Ops.MAX else math.inf
  if dtype.kind == 'b': return op is Ops.MIN
  lo, hi = sym.dtype_bounds(dtype)
  return lo if op is Ops.MAX else hi

def alu(op: Ops, a: UOp, b: UOp) -> UOp:
  """A binary op on kernel values; float16/bfloat16 compute in float32 and round back."""
  if a.dtype in (dtypes.float16, dtypes.bfloat16):
    f = dtypes.float32
    return UOp(op, f, (a.cast(f), b.cast(f))).cast(a.dtype)
  return UOp(op, a.dtype, (a, b))

def load(buf: UOp, idx: UOp, valid: UOp = TRUE) -> UOp:
  """A read of `buf` at `idx` where `valid` holds (zero bits elsewhere); the index is simplified given `valid`."""
  if valid is TRUE: return UOp(Ops.LOAD, buf.dtype, (buf, idx))
  return UOp(Ops.LOAD, buf.dtype, (buf, sym.given(idx, valid), valid))

class KernelBuilder:
  """Builds the statements of one kernel; `slots` maps each node readable from a buffer to its slot."""
  def __init__(self, slots: dict):
    self.slots = slots
    self.memo: dict = {}
    self.accs: dict = {}
    self.nvars = self.nacc = 0
    self.top: list = []
    self.chain: list[Loop] = []
    self.fused: dict = {}
    self.globals: dict = {}
    self.own: set = set()                 # the kernel's outputs: computed here, never loaded

  def var(self, size: int) -> UOp:
    self.nvars += 1
    return sym.loop_var(self.nvars - 1, size)

  def glob(self, node: UOp) -> UOp:
    slot = self.slots[node]
    g = UOp(Ops.DEFINE_GLOBAL, node.dtype, (), slot)
    self.globals[slot] = g
    return g

  def value(self, n: UOp, idx: tuple, valid: UOp = TRUE) -> UOp:
    key = (n, idx, valid)
    if key not in self.memo:
      for u in self._elementwise_below(n, idx, valid): self.memo[(u, idx, valid)] = self._value(u, idx, valid)
    return self.memo[key]

  def _elementwise_below(self, n: UOp, idx: tuple, valid: UOp) -> list:
    """The elementwise nodes under `n` evaluated at the same index, sources first, so a chain thousands of
    ops deep is evaluated by a loop instead of by recursion."""
    order, seen, stack = [], set(), [(n, False)]
    while stack:
      u, expanded = stack.pop()
      if expanded:
        order.append(u)
        continue
      if u in seen or (u, idx, valid) in self.memo: continue
      seen.add(u)
      stack.append((u, True))
      if u.op in GroupOp.Elementwise and u.size and (u not in self.slots or u in self.own):
        stack.extend((s, False) for s in u.src)
    return order

  def _value(self, n: UOp, idx: tuple, valid: UOp) -> UOp:
    if n.size == 0: return scalar(0, n.dtype)       # never evaluated: a loop over an empty axis
    if n in self.slots and n not in self.own: return load(self.glob(n), flat_index(idx, n.shape), valid)
    self.fused[n] = None
    if n.op is Ops.CONST: return scalar(n.arg[0], n.dtype)
    if n.op is Ops.IOTA: return idx[n.arg[1]].cast(n.dtype)
    if n.op in (Ops.ADD, Ops.OR) and (pieces := self.join_pieces(n)) is not None:
      return self.join(n, pieces, idx, valid)
    if n.op in GroupOp.Elementwise: return UOp(n.op, n.dtype, tuple(self.value(s, idx, valid) for s in n.src), n.arg)
    if n.op in GroupOp.Movement: return self.view(n, idx, valid)
    if n.op is Ops.REDUCE: return self.accumulate(n, idx, valid)
    if n.op is Ops.GATHER: return self.gather(n, idx, valid)
    raise NeedsBuffer(n, "computed by its own kernel or runtime step")

  def view(self, n: UOp, idx: tuple, valid: UOp) -> UOp:
    src = n.src[0]
    if n.op is Ops.RESHAPE: return self.value(src, unflatten(flat_index(idx, n.shape), src.shape), valid)
    if n.op is Ops.PERMUTE:
      new = [None] * len(idx)
      for d, p in enumerate(n.arg): new[p] = idx[d]
      return self.value(src, tuple(new), valid)
    if n.op is Ops.EXPAND:
      return self.value(src, tuple(sym.const(0) if s == 1 else i for i, s in zip(idx, src.shape)), valid)
    if n.op is Ops.SHRINK:
      return self.value(src, tuple(sym.add(i, sym.const(lo)) for i, (lo, _) in zip(idx, n.arg)), valid)
    if n.op is Ops.FLIP:
      return self.value(src, tuple(sym.add(sym.const(s - 1), sym.mul(i, -1)) if d in n.arg else i
                                   for d, (i, s) in enumerate(zip(idx, src.shape))), valid)
    new = tuple(sym.add(i, sym.const(-lo)) for i, (lo, _) in zip(idx, n.arg))   # PAD
    ok = TRUE
    for i, s in zip(new, src.shape): ok = sym.and_(ok, sym.in_range(i, s))
    if ok is TRUE: return self.value(src, new, valid)
    if sym.is_const(ok): return scalar(0, n.dtype)
    return UOp(Ops.WHERE, n.dtype, (ok, self.value(src, new, sym.and_(valid, ok)), scalar(0, n.dtype)))

  def join_pieces(self, n: UOp):
    """A sum of zero-padded pieces that do not overlap along one axis (how concatenate and stack are built):
    (axis, [(start, piece source), ...]); else None."""
    leaves, stack = [], [n]
    while stack:
      u = stack.pop()
      if u.op is n.op and (u is n or u not in self.slots): stack.extend(u.src)
      else: leaves.append(u)
    if len(leaves) < 2 or any(u.op is not Ops.PAD or u in self.slots for u in leaves): return None
    axes = {d for u in leaves for d, p in enumerate(u.arg) if p != (0, 0)}
    if len(axes) != 1: return None
    axis = axes.pop()
    spans = sorted(((u.arg[axis][0], u.arg[axis][0] + u.src[0].shape[axis], u.src[0]) for u in leaves
                    if u.src[0].shape[axis]), key=lambda t: t[:2])      # empty pieces add nothing
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:])): return None
    return axis, spans

  def join(self, n: UOp, pieces, idx: tuple, valid: UOp) -> UOp:
    """The piece that covers the index, chosen by its range: one load instead of one per piece. A float piece
    still gets `+ 0` (as the sum would: -0.0 + 0.0 is +0.0), so the result is bit for bit the sum's."""
    axis, spans = pieces
    out = scalar(False if n.dtype.kind == 'b' else 0, n.dtype)
    for lo, hi, src in reversed(spans):
      i = sym.add(idx[axis], sym.const(-lo))
      inside = sym.in_range(i, hi - lo)
      if sym.is_const(inside) and not inside.arg[0]: continue
      v = self.value(src, idx[:axis] + (i,) + idx[axis + 1:], sym.and_(valid, inside))
      if n.dtype.kind != 'b': v = UOp(Ops.ADD, n.dtype, (v, scalar(0, n.dtype)))
      out = v if inside is TRUE else UOp(Ops.WHERE, n.dtype, (inside, v, out))
    return out

  def gather(self, n: UOp, idx: tuple, valid: UOp) -> UOp:
    x, ind = n.src
    k = ind.ndim
    row = self.value(ind, idx[:k], valid)
    row = sym.clamp(row if row.dtype is IDX else row.cast(IDX), x.shape[0])
    return self.value(x, (row,) + idx[k:], valid)

  def accumulate(self, r: UOp, idx: tuple, valid: UOp) -> UOp:
    """An accumulator for REDUCE `r` at `idx`, placed in the loop its index needs (computed once per element)."""
    if valid is not TRUE: raise NeedsBuffer(r, "read under a padding mask")
    if (r, idx) in self.accs: return self.accs[(r, idx)]
    nodes = toposort(list(idx))
    if any(u.op is Ops.LOAD for u in nodes): raise NeedsBuffer(r, "read at a data-dependent index")
    used = {u for u in nodes if u.op is Ops.RANGE}
    depth = max((k for k, l in enumerate(self.chain) if l.var in used), default=-1)
    enclosing = self.chain[:depth + 1]
    if {l.var for l in enclosing} != used or math.prod(l.size for l in enclosing) != r.size: raise Misplaced(r, used)
    op, axes = r.arg
    acc = UOp(Ops.DEFINE_ACC, r.dtype, (), (self.nacc, op))
    self.nacc += 1
    loops = [Loop(self.var(r.src[0].shape[a]), serial=True) for a in axes]
    rest = iter(idx)
    src_idx = tuple(loops[axes.index(d)].var if d in axes else next(rest) for d in range(r.src[0].ndim))
    saved, self.chain = self.chain, enclosing + loops
    try:
      v = self.value(r.src[0], src_idx)
    finally:
      self.chain = saved
    loops[-1].body.append(Update(acc, v))
    loops[-1].acc = acc
    for outer, inner in zip(loops, loops[1:]): outer.body.append(inner)
    (enclosing[-1].body if enclosing else self.top).extend([Decl(acc), loops[0]])
    self.accs[(r, idx)] = acc
    return acc

  # --- loop nests ---
  def nest(self, shape, order, make_body, serial: bool = False) -> None:
    """Loops over `shape` (outermost first in `order`); `make_body(vars)` returns the innermost statements."""
    vars_ = [self.var(s) for s in shape]
    loops = [Loop(vars_[d], serial=serial) for d in order]
    saved, self.chain = self.chain, loops
    try:
      stmts = make_body(tuple(vars_))
    finally:
      self.chain = saved
    (loops[-1].body if loops else self.top).extend(stmts)
    for outer, inner in zip(loops, loops[1:]): outer.body.append(inner)
    if loops: self.top.append(loops[0])

  def store(self, nodes: list, order) -> None:
    shape = nodes[0].shape
    self.nest(shape, order, lambda v: [Store(self.glob(n), flat_index(v, shape), self.value(n, v)) for n in nodes])

  def cumulative(self, n: UOp) -> None:
    op, axis, reverse = n.arg
    shape, src = n.shape, n.src[0]
    outer = [d for d in range(len(shape)) if d != axis]
    def body(vars_):
      acc = UOp(Ops.DEFINE_ACC, n.dtype, (), (self.nacc, op))
      self.nacc += 1
      k = self.var(shape[axis])
      pos = sym.add(sym.const(shape[axis] - 1), sym.mul(k, -1)) if reverse else k
      full = tuple(pos if d == axis else vars_[outer.index(d)] for d in range(len(shape)))
      loop = Loop(k, acc=acc, serial=True)
      self.chain = self.chain + [loop]
      loop.body += [Update(acc, self.value(src, full)), Store(self.glob(n), flat_index(full, shape), acc)]
      return [Decl(acc), loop]
    self.nest([shape[d] for d in outer], range(len(outer)), body)

  def scatter(self, n: UOp) -> None:
    x, ind, upd = n.src
    self.nest(x.shape, range(x.ndim), lambda v: [Store(self.glob(n), flat_index(v, x.shape), self.value(x, v))])
    k = ind.ndim
    def body(v):
      row = self.value(ind, v[:k])
      row = row if row.dtype is IDX else row.cast(IDX)
      ok = sym.in_range(row, x.shape[0])
      at = flat_index((row,) + v[k:], x.shape)
      new = self.value(upd, v)
      old = load(self.glob(n), at, ok)
      if n.arg != 'set':
        new = UOp(_SCATTER_OPS[n.arg], n.dtype, (old, new)) if bf16 else alu(_SCATTER_OPS[n.arg], old, new)
      return [Store(self.glob(n), at, new, ok)]
    # bfloat16 lives in float32 storage: like the reference, duplicates accumulate unrounded, then round once
    bf16 = n.dtype is dtypes.bfloat16 and n.arg != 'set'
    self.nest(upd.shape, range(upd.ndim), body, serial=True)    # duplicate indices: updates run in order
    if bf16:
      def round_all(v):
        at = flat_index(v, x.shape)
        return [Store(self.glob(n), at, load(self.glob(n), at).cast(dtypes.float32).cast(n.dtype))]
      self.nest(x.shape, range(x.ndim), round_all)

_SCATTER_OPS = {'add': Ops.ADD, 'mul': Ops.MUL, 'min': Ops.MIN, 'max': Ops.MAX}

def _order_for(shape, used_dims: set) -> tuple:
  first = [d for d in range(len(shape)) if d in used_dims]
  return tuple(first + [d for d in range(len(shape)) if d not in used_dims])

def build_kernel(name: str, outs: list, slots: dict, inline=()) -> Kernel:
  """The statements of the kernel writing `outs` (array nodes), reading the nodes in `slots` (but computing
  those in `inline` again instead of reading them).

  >>> x = UOp(Ops.PARAM, dtypes.float32, (), (0, (2, 3), 0))
  >>> y = UOp(Ops.EXP, dtypes.float32, (x.permute((1, 0)),))
  >>> k = build_kernel("k0", [y], {x: 0, y: 1})
  >>> [type(s).__name__ for s in k.body], sym.pretty(k.body[0].body[0].body[0].value.src[0].src[1])
  (['Loop'], '(i0+(i1*3))')
  """
  node = outs[0]
  order = tuple(range(node.ndim))
  for attempt in range(2):
    b = KernelBuilder(slots)
    b.own = (set(outs) | set(inline)) if node.op not in (Ops.SCATTER, Ops.CUMULATIVE, Ops.ARGSORT) else set()
    try:
      if node.op is Ops.SCATTER: b.scatter(node)
      elif node.op is Ops.CUMULATIVE: b.cumulative(node)
      elif node.op is Ops.ARGSORT: b.top.append(Sort(b.glob(node), b.glob(node.src[0]), node.shape, *node.arg))
      else: b.store(outs, order)
      break
    except Misplaced as e:
      vars_ = [sym.loop_var(i, s) for i, s in enumerate(node.shape)]
      dims = {d for d, v in enumerate(vars_) if v in e.used}
      new_order = _order_for(node.shape, dims)
      if attempt == 1 or new_order == order or node.op in (Ops.SCATTER, Ops.CUMULATIVE):
        raise NeedsBuffer(e.node, "no loop order computes it once per element") from None
      order = new_order
  args = [b.globals[s] for s in sorted(b.globals)]
  fused = [n for n in toposort(outs) if n in b.fused or n in outs]
  return Kernel(name, b.top, args, tuple(slots[o] for o in outs), fused)
