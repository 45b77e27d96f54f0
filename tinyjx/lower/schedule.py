"""schedule: which nodes get buffers, and the ordered list of kernels and runtime steps that fill them.

Every node that is not materialized is computed inside each kernel that reads it (fusion): elementwise
chains and views fuse into their consumers and into reductions, and a reduction fuses into its
elementwise consumers as an accumulator (index.py decides where that is legal). Materialized are:
- the outputs;
- nodes that need a kernel of their own: SCATTER (a copy, then a sequential update loop), ARGSORT (and
  its input, which the sort reads at random) and CUMULATIVE (a scan loop);
- runtime steps (multi-output control flow, collectives, debug callbacks: ops in `STEP_OPS`) with their inputs and the
  GETITEM nodes that name their outputs;
- a reduction read by more than one kernel (computed once instead of once per reader), and a column reduction
  (over axes that leave the last) or a contraction read in a kernel by more elements than it has (`x - x.mean(0)`,
  the sum of squares of `x.var(0)`, `where(rows == i, b[i] - l[i] @ x, x)`);
- an elementwise node with transcendental work read by several kernels through different views, and the gradient of
  a max (a max pool's) read by several kernels;
- a computed node that gathers read more times than it has elements (`_gathered`: a binary search's keys);
- the operand of a contraction read through a view that repeats its elements (a convolution's sliding
  windows): packing the operand evaluates every repeat, so what the view reads is computed once instead; where
  the view pads (a padded convolution, an input gradient), the padded array too, so the windows read a plain
  buffer without masks (a CPU matmul then reads them in place, optimize.window_reuse);
- a contraction (a matmul's sum of products) read by another reduction: fused into it, it would not be tiled (a
  contraction under a buffer is computed in that buffer's kernel: a convolution's bias and ReLU in its epilogue);
  where such a contraction, or one read by several kernels, has an epilogue only its last node leaves
  (`relu(x @ w + b)`; for a plain matmul also a ReLU's gradient mask, `where(0 < h, dz @ w.T, 0)`), that node gets
  the buffer instead (`_activation`), and the contraction is computed in its kernel; a plain matmul whose epilogue
  has several outputs and nothing else reads it (an optimizer's update of a weight gradient) gets none: one kernel
  computes it and writes them all (`_shared_epilogue`);
- a contraction's operand that computes a reduction (`softmax(s)` in `softmax(s) @ v`, `layer_norm(x) @ w`): fused,
  the contraction would not be tiled and would redo the reduction for every product;
- anything the kernel builder reported it cannot compute in place (`forced`, from `index.NeedsBuffer`).

The result is a list of `KernelItem`s and `StepItem`s in dependency order.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from tinyjx.uop import UOp, Ops, GroupOp, toposort

INPUT_OPS = {Ops.BUFFER, Ops.PARAM}
OWN_KERNEL = {Ops.SCATTER, Ops.ARGSORT, Ops.CUMULATIVE}
STEP_OPS = GroupOp.MultiOutput | GroupOp.Collective | {Ops.DEBUG_CALLBACK, Ops.TRIANGULAR_SOLVE, Ops.FFT}   # host calls

@dataclass(eq=False)
class KernelItem:
  outs: list                        # array nodes this kernel writes
  inline: set = field(default_factory=set)   # small materialized nodes it recomputes instead of reading

@dataclass(eq=False)
class StepItem:
  node: UOp                         # the multi-output or collective node run by the runtime
  outs: list = field(default_factory=list)   # its GETITEM nodes by output index (None where unused)

def _needs_buffer(n: UOp) -> bool:
  return n.op in OWN_KERNEL or n.op in STEP_OPS or n.op is Ops.GETITEM

def input_view(s: UOp) -> UOp | None:
  """The input (a parameter or a constant buffer) that `s` is a reshape of (through reshapes only), else None: its
  memory holds `s` as it is, row-major."""
  while s.op is Ops.RESHAPE: s = s.src[0]
  return s if s.op in INPUT_OPS else None

def _forced_sources(n: UOp) -> list:
  """The sources of `n` that get buffers of their own: a step's, and a sort's, but not inputs, and not an FFT's
  reshape of an input (rfft of a real parameter reads its memory as complex pairs, steps.NativeStep)."""
  if n.op is Ops.ARGSORT or n.op in STEP_OPS:
    return [s for s in n.src if s.op not in INPUT_OPS and not (n.op is Ops.FFT and input_view(s) is not None)]
  return []

def _inlined(root: UOp, materialized: set) -> list:
  """Nodes computed inside the kernel of `root` (everything up to buffers and inputs), sources before readers."""
  seen, stack, out = {root}, [(s, False) for s in root.src], []
  while stack:
    n, done = stack.pop()
    if done: out.append(n); continue
    if n in seen or n in materialized or n.op in INPUT_OPS: continue
    seen.add(n)
    stack.append((n, True))
    stack.extend((s, False) for s in n.src)
  return out

def _reader_sizes(root: UOp, inside: list) -> dict:
  """For each node of `inside` (`_inlined(root, ...)`, sources before readers): the most elements of a node of
  root's kernel that reads it, directly or through others (the loops a fused node's value is needed in)."""
  members, sizes = set(inside), {}
  for u in [root, *reversed(inside)]:      # readers first
    for s in u.src:
      if s in members: sizes[s] = max(sizes.get(s, 0), u.size, sizes.get(u, 0))
  return sizes

def decide_buffers(roots: list, forced: set) -> set:
  """The set of materialized nodes (see the module docstring)."""
  nodes = toposort(roots)
  users: dict = {}
  for n in nodes:
    for s in n.src: users.setdefault(s, set()).add(n)
  order = {n: i for i, n in enumerate(nodes)}
  m = {n for n in list(roots) + list(forced) if n.op not in INPUT_OPS}
  for n in nodes:
    if _needs_buffer(n): m.add(n)
    m.update(_forced_sources(n))
    m.update(_repeated_operands(n))
    if _gathered(n, users): m.add(n)
    m.update(_activation(c, users, m, order) for c in _contractions_below(n, m))
  contractions = [n for n in nodes if _is_contraction(n)]
  while True:
    readers, above = {}, {}     # the kernels each inlined node is computed in; (kernel, node): what reads it there
    for k in (n for n in nodes if n in m and n.op not in STEP_OPS):
      inside = _inlined(k, m)
      for n, e in _reader_sizes(k, inside).items(): above[k, n] = e
      for n in inside: readers.setdefault(n, set()).add(k)
    extra = {n for n, ks in readers.items()
             if (len(ks) > 1 and _worth_buffer(n, users) and not ks <= set(_shared_epilogue(n, users, m)))
             or _spread_column(n, [above[k, n] for k in ks])}
    if not extra: extra = {v for k in contractions for v in _operand_reductions(k, m)}   # once the rest is settled
    if not extra: return m
    m |= {e if _is_contraction(n) and (e := _activation(n, users, m, order)) not in m else n for n in extra}

def _activation(c: UOp, users: dict, m: set, order: dict) -> UOp:
  """What to materialize for contraction `c`, which several kernels read: the last node of its epilogue, where only
  that node is read from outside. The epilogue is the elementwise nodes of c's shape above it whose other sources
  are constants or broadcasts of something smaller (a bias): `relu(x @ w + b)`, once `simplify.relu_masks` has
  made the ReLU's gradient test the ReLU. Materialized, that node's kernel computes c as a tiled matmul with the
  epilogue on its tiles (as_matmul), and the readers load one buffer instead of recomputing the bias and ReLU each
  (the next layer's matmul then reads its x in place, as it reads no expression). c itself where nothing fits.

  Where c is a plain matmul (no operand a window view), a source may also be a few elementwise nodes over buffers
  (`_of_buffers`): the backward pass's `where(0 < h, dz @ w.T, 0)`, the mask of a ReLU h, is then stored by the
  matmul's kernel, and its readers (the next gradient matmuls, a bias's sum) read one buffer, the first of them in
  place (the MLP step 1-2% faster). A convolution keeps such masks out: its tiles are stored column by column, and
  reading the mask that way cost the input gradient of mnist's second convolution 10-18%, twice what its two
  readers saved."""
  region, grew, masks = {c}, True, not _repeated_views(c)
  while grew:
    grew = False
    for v in list(region):
      for u in users.get(v, ()):
        if u in region or u in m or u.op not in GroupOp.Elementwise or u.shape != c.shape: continue
        if all(s in region or s.op is Ops.CONST or _under_views(s).size < c.size or (masks and _of_buffers(s, m))
               for s in u.src):
          region.add(u)
          grew = True
  for e in sorted((u for u in region if u is not c and u.dtype == c.dtype), key=order.__getitem__, reverse=True):
    below, stack = set(), [s for s in e.src if s in region]
    while stack:
      v = stack.pop()
      if v in below: continue
      below.add(v)
      stack.extend(s for s in v.src if s in region)
    if c in below and all(users.get(v, set()) <= below | {e} for v in below): return e
  return c

def _shared_epilogue(c: UOp, users: dict, m: set) -> list:
  """The outputs of plain matmul `c`'s epilogue where it has several and nothing else reads c or the nodes between:
  an optimizer's update of a weight gradient (Adam's parameter and two moments, each elementwise in the gradient and
  its own inputs). One kernel computes c as a tiled matmul and writes them all from its tiles (schedule groups
  them), so the gradient is never stored and read again, and the update's loads and stores overlap the matmul's
  arithmetic (the MLP step's first weight gradient 1.53 ms and its Adam update 0.40 ms; fused, with its tiles in
  rows, `MatmulPlan.by_rows`, 1.75 ms)."""
  if not _is_contraction(c) or _repeated_views(c): return []
  region, grew = {c}, True
  while grew:
    grew = False
    for v in list(region):
      for u in users.get(v, ()):
        if u in region or u.op not in GroupOp.Elementwise or u.shape != c.shape: continue
        if all(s in region or s.op is Ops.CONST or _under_views(s).size < c.size or _of_buffers(s, m) for s in u.src):
          region.add(u)
          grew = True
  outs = [u for u in region if u in m]
  inner_users = all(users.get(v, set()) <= region for v in region if v not in m)
  return outs if inner_users and 2 <= len(outs) <= MAX_OUTPUTS else []

def _of_buffers(n: UOp, m: set, most: int = 8) -> bool:
  """n is a few elementwise nodes and views (at most `most`) over buffers, inputs and constants: `0 < h` of a
  materialized ReLU h, the mask of its gradient."""
  seen, stack = set(), [n]
  while stack:
    v = stack.pop()
    if v in seen or v in m or v.op in INPUT_OPS or v.op is Ops.CONST: continue
    if (v.op not in GroupOp.Elementwise and v.op not in GroupOp.Movement) or len(seen) >= most: return False
    seen.add(v)
    stack.extend(v.src)
  return True

def _repeated_operands(n: UOp) -> list:
  """For a sum of products (a contraction), each operand's computed source that the operand's view reads
  more than once per element (the view, without the broadcast over the other operand, is bigger than it)."""
  out = []
  for base, padded in _repeated_views(n):
    if padded is not None: out.append(padded)
    if base.op not in INPUT_OPS: out.append(base)
  return out

def _repeated_views(n: UOp) -> list:
  """For a contraction, (source, its first PAD or None) of each operand whose view repeats the source's elements."""
  if n.op is not Ops.REDUCE or n.arg[0] is not Ops.ADD: return []
  prod = _product(n)
  if prod.op is not Ops.MUL: return []
  out = []
  for v in prod.src:
    while v.op is Ops.EXPAND: v = v.src[0]
    base, padded = v, None
    while base.op in GroupOp.Movement:
      if base.op is Ops.PAD and padded is None: padded = base
      base = base.src[0]
    if base.op is not Ops.CONST and v.size >= 2 * base.size: out.append((base, padded))
  return out

def _product(n: UOp) -> UOp:
  """What sum `n` adds up, under fold_permutes' layout change (a PERMUTE of it)."""
  return n.src[0].src[0] if n.src[0].op is Ops.PERMUTE else n.src[0]

def _is_contraction(n: UOp) -> bool:
  """A sum of products big enough to be a matmul (index.py tiles it only when it writes its own buffer), some
  operand broadcast over an axis of the product (a sum of squares, `((x - m) ** 2).sum(0)`, is no contraction)."""
  if n.op is not Ops.REDUCE or n.arg[0] is not Ops.ADD: return False
  prod = _product(n)
  return prod.op is Ops.MUL and n.size >= 64 and n.src[0].size >= 8 * n.size and any(map(_broadcast, prod.src))

def _broadcast(v: UOp) -> bool:
  """Some EXPAND under the views of `v` (where a matmul's operand misses an axis of the product)."""
  while v.op in GroupOp.Movement:
    if v.op is Ops.EXPAND: return True
    v = v.src[0]
  return False

def _contractions_below(n: UOp, m: set) -> list:
  """Contractions that a reduction would otherwise swallow (`sum(tanh(a @ b))`): fused, the matmul becomes a plain
  loop nest inside the outer reduction (10-45x slower than the tiled kernel), so each gets a buffer. The walk stops
  at buffers already decided (`m`): a contraction under one is computed in that buffer's kernel, not in `n`'s."""
  if n.op is not Ops.REDUCE: return []
  out, seen, stack = [], set(), list(n.src)
  while stack:
    v = stack.pop()
    if v in seen or v.op in INPUT_OPS or v in m: continue
    seen.add(v)
    if _is_contraction(v): out.append(v)
    elif v.op is not Ops.REDUCE: stack.extend(v.src)
  return out

def _operand_reductions(n: UOp, m: set) -> list:
  """The operands of contraction `n` that compute a reduction in place (down to the buffers `m` and the inputs;
  a contraction below gets a buffer of its own): fused, the reduction would run again for every product
  (`softmax(s) @ v`: 85 ms where the softmax and a tiled matmul take 1.5), so each such operand (under its views)
  gets a buffer, written by a kernel of its own (a softmax's, a layer norm's)."""
  out = []
  for v in _product(n).src:
    while v.op is Ops.EXPAND or v.op in GroupOp.Movement: v = v.src[0]
    if v in m or v.op in INPUT_OPS or _is_contraction(v): continue
    seen, stack = set(), [v]
    while stack:
      u = stack.pop()
      if u in seen or u in m or u.op in INPUT_OPS or _is_contraction(u): continue
      seen.add(u)
      if u.op is Ops.REDUCE:
        out.append(v)
        break
      stack.extend(u.src)
  return out

def _spread_column(n: UOp, extents: list) -> bool:
  """n reduces over axes that leave the last one (a column reduction, `x.mean(0)`) and a kernel that walks more
  elements than it (`extents`: each reader's) reads it (`x - x.mean(0)`, or `((x - x.mean(0)) ** 2).sum(0)`, a
  reduction that walks x again): fused there, the kernel walks the input down its columns twice, once to sum and once
  to store (30 ms for 4096 x 1024 float32), where a column reduction of its own keeps a row of sums (1 ms). So
  does a contraction a bigger kernel reads (a row of a triangular solve, `where(rows == i, b[i] - l[i] @ x, x)`):
  fused, the kernel runs in the contraction's order, down x's columns, to store it as well (380 us a row at
  256 x 256); on its own it is a column reduction, or a matmul, and the bigger kernel walks its rows (75 us)."""
  if n.op is not Ops.REDUCE or not any(e > n.size for e in extents): return False
  return n.src[0].ndim - 1 not in n.arg[1] or _is_contraction(n)

def _gathered(n: UOp, users: dict) -> bool:
  """n computes something (it is not a view or a cast of a buffer) and gathers read it, at places known only at run
  time, more times than it has elements: fused into them, every read would compute its element again (a binary
  search's keys, `searchsorted`: 13 reads a query of 4096 keys); a buffer computes each once."""
  if n.op in GroupOp.Movement or n.op in INPUT_OPS or n.op in (Ops.CONST, Ops.CAST): return False
  reads = [u.size for u in users.get(n, ()) if u.op is Ops.GATHER and u.src[0] is n]
  return bool(reads) and sum(reads) > n.size

def _worth_buffer(n: UOp, users: dict) -> bool:
  """A reduction read by several kernels, transcendental work read by several kernels through several ops, or the
  gradient of a max (or min) read by several kernels."""
  if n.op is Ops.REDUCE: return True
  if _selects_extremum(n): return n.size >= 1024
  return n.op in GroupOp.Transcendental and n.size >= 1024 and len(users.get(n, ())) > 1

def _under_views(n: UOp) -> UOp:
  while n.op is Ops.CAST or n.op in GroupOp.Movement: n = n.src[0]
  return n

def _selects_extremum(n: UOp) -> bool:
  """n is a product with a max's (or min's) selection mask, `x == broadcast(max(x))`: a max pool's gradient. Each
  reader would redo the comparison through the pool window's index arithmetic (divisions, no vectors), and a
  batch norm's backward reads it several times; a buffer computes it once."""
  if n.op is not Ops.MUL: return False
  masks = [m for m in map(_under_views, n.src) if m.op is Ops.CMPEQ]
  return any(_under_views(t).op is Ops.REDUCE and _under_views(t).arg[0] in (Ops.MAX, Ops.MIN)
             for m in masks for t in m.src)

MAX_OUTPUTS = 8   # outputs one elementwise kernel may write

def _reads(n: UOp, m: set) -> set:
  """The buffers (inputs and materialized nodes) the kernel computing `n` reads."""
  out, seen, stack = set(), {n}, list(n.src)
  while stack:
    u = stack.pop()
    if u in seen: continue
    seen.add(u)
    if u in m or u.op in INPUT_OPS: out.add(u)
    else: stack.extend(u.src)
  return out

def _joins(n: UOp, item: KernelItem, reads: dict, position: dict, here: int) -> bool:
  """Whether elementwise node `n` can be computed by the (earlier) kernel `item`, in the same loops. What it
  reads must be ready by then, or be recomputed in place: the kernel's own outputs, and small elementwise
  nodes (a step counter) whose inputs are ready (they join `item.inline`)."""
  first = item.outs[0]
  if n.shape != first.shape or len(item.outs) >= MAX_OUTPUTS or first.op in OWN_KERNEL or first.op is Ops.REDUCE:
    return False
  if not reads[n] & set().union(set(item.outs), *(reads[o] for o in item.outs)): return False
  return _ready(n, item, reads, position, here)

def _ready(n: UOp, item: KernelItem, reads: dict, position: dict, here: int) -> bool:
  """Whether what `n` reads is ready at kernel `item` (at `here`), or recomputed there (it joins `item.inline`)."""
  late = [d for d in reads[n] if position.get(d, -1) >= here and d not in item.outs and d not in item.inline]
  if not all(_recomputable(d, reads, position, here) for d in late): return False
  item.inline.update(late)
  return True

def _recomputable(d: UOp, reads: dict, position: dict, here: int) -> bool:
  if d.size > 64 or d not in reads or any(position.get(r, -1) >= here for r in reads[d]): return False
  return all(u.op in GroupOp.Elementwise | GroupOp.Movement | {Ops.CONST, Ops.IOTA} for u in _region(d, reads[d]))

def _region(d: UOp, stop: set) -> list:
  """The nodes a kernel computing `d` evaluates (down to the buffers in `stop`)."""
  out, seen, stack = [], set(), [d]
  while stack:
    u = stack.pop()
    if u in seen or (u in stop and u is not d): continue
    seen.add(u)
    out.append(u)
    stack.extend(u.src)
  return out

def schedule(roots: list, forced: set = frozenset()) -> list:
  """Kernels and steps, in dependency order, that compute every materialized node of `roots`.

  Elementwise outputs of one shape that read a common buffer share a kernel (horizontal fusion: the
  three updates of an Adam step read the gradient once) when that keeps every dependency in order.

  >>> from tinyjx import dtypes
  >>> x = UOp(Ops.PARAM, dtypes.float32, (), (0, (4, 4), 0))
  >>> y = UOp(Ops.EXP, dtypes.float32, (x,)).reduce(Ops.ADD, (1,))
  >>> [[n.op.name for n in item.outs] for item in schedule([y, UOp(Ops.ARGSORT, dtypes.int32, (y,), (0, False))])]
  [['REDUCE'], ['ARGSORT']]
  """
  m = decide_buffers(roots, set(forced))
  users: dict = {}
  for n in toposort(roots):
    for s in n.src: users.setdefault(s, set()).add(n)
  shared = {o: c for c in users if c not in m and _is_contraction(c) for o in _shared_epilogue(c, users, m)}
  items, steps, position, reads, sealed, computes = [], {}, {}, {}, set(), {}
  for n in toposort(roots):
    if n not in m: continue
    if n.op is Ops.GETITEM:
      steps[n.src[0]].outs[n.arg] = n
      position[n] = position[n.src[0]]
    elif n.op in STEP_OPS:
      from tinyjx.uop import out_avals
      steps[n] = StepItem(n, [None] * len(out_avals(n)) if n.op in GroupOp.MultiOutput else [n])
      position[n] = len(items)
      items.append(steps[n])
    else:
      reads[n] = _reads(n, m)
      # a contraction's epilogue (`_activation`) is a matmul kernel: it joins no other kernel, and only the other
      # outputs of a shared epilogue (`_shared_epilogue`, the contraction in no buffer) join it
      c = shared.get(n)
      epilogue = c is not None or (n.op is not Ops.REDUCE and any(_is_contraction(u) for u in _region(n, reads[n])))
      if c is not None and (i := computes.get(c)) is not None and _ready(n, items[i], reads, position, i):
        items[i].outs.append(n)
        position[n] = i
        continue
      if n.op not in OWN_KERNEL and n.op is not Ops.REDUCE and not epilogue:
        target = next((i for i in range(len(items) - 1, max(len(items) - 16, 0) - 1, -1)
                       if isinstance(items[i], KernelItem) and items[i] not in sealed and
                       _joins(n, items[i], reads, position, i)), None)
        if target is not None:
          items[target].outs.append(n)
          position[n] = target
          continue
      position[n] = len(items)
      items.append(KernelItem([n]))
      if epilogue: sealed.add(items[-1])
      if c is not None: computes[c] = len(items) - 1
  return items
