"""batching: `vmap` and `batch_rules`, the table that adds a batch dimension to one node at a time.

`vmap(f)(*args)` traces `f` once at the per-example avals (the mapped axis removed), then rewrites the
jaxpr in toposort order: a node that depends on a mapped input goes through
`batch_rules[op](node, srcs, bdims) -> (new_node, out_bdim)`, where `srcs` are the already batched
sources and `bdims` their batch axis (None: not batched); every other node is kept as it is. The PARAMs
are finally replaced by the caller's own UOps, so the result is a plain graph over the caller's values:
vmap composes with grad (a TAG is one more node), with jit and with itself.

Invariants of the rules:
- a batch dim may sit at any axis of a source; a rule reports where it sits in its output, and moves it
  (a PERMUTE, free as a view) only where that is simpler;
- at least one source of a node given to a rule is batched; an unbatched operand that must match the
  batched shape is broadcast with RESHAPE+EXPAND (a CONST just gets the bigger shape);
- rules emit only ops that have rules in every table (grad, jvp, batching), so transforms compose;
- a multi-output node (control flow, custom rules) returns `(node, tuple_of_bdims)`; GETITEM picks one.

Axis context: while vmap traces and rewrites, `(axis_name, size)` is pushed on `axis_stack`. A collective
(psum, all_gather ...) whose arg names an axis finds it there (`axis_size(name)`, `axis_names()`), and its
batch rule decides by name: if the collective's axis is the one being batched now (`current_axis_name()`),
it acts across the batch dim (psum of a batched x is a REDUCE ADD over `bdims[0]`, an unbatched result);
otherwise the collective belongs to an enclosing vmap or pmap, and the rule rebuilds it over the batched
source, keeping the batch dim where it was.

Unmapped arguments (in_axes None) are handed to `f` as they are, as in JAX: a Python branch on them works,
and only mapped values are traced (branching on one raises ConcretizationError, whose fix says to use
`jnp.where` or `lax.cond`).
"""
from __future__ import annotations
import contextlib, functools, operator
import numpy as np
from tinyjx import tree_util, tracing, uop as uop_module
from tinyjx.array import Array, api   # api: tinyjx.numpy, registered with the array layer
from tinyjx.memo import LRU
from tinyjx.uop import UOp, Ops, GroupOp, toposort, substitute, fresh_id

# ---------------------------------------------------------------- axis context

axis_stack: list[tuple] = []   # (axis_name or None, size) of each active vmap, outermost first

@contextlib.contextmanager
def axis_frame(name, size: int):
  """Make `name` (of `size`) the innermost mapped axis for the duration of the block."""
  axis_stack.append((name, size))
  try: yield
  finally: axis_stack.pop()

def current_axis_size() -> int:
  """The size of the innermost axis being mapped (by vmap here, or by pmap, which pushes frames too)."""
  if not axis_stack: raise RuntimeError("current_axis_size() was called outside vmap; no axis is being mapped")
  return axis_stack[-1][1]

def current_axis_name():
  """The name of the innermost mapped axis (None when that vmap was given no axis_name)."""
  if not axis_stack: raise RuntimeError("current_axis_name() was called outside vmap; no axis is being mapped")
  return axis_stack[-1][0]

def axis_names() -> tuple:
  """The names of every active mapped axis, outermost first (unnamed vmaps left out)."""
  return tuple(n for n, _ in axis_stack if n is not None)

def axis_size(name) -> int:
  """The size of the mapped axis called `name` (the innermost one with that name)."""
  for n, size in reversed(axis_stack):
    if n == name: return size
  known = ", ".join(repr(n) for n in axis_names()) or "none"
  raise NameError(f"unbound axis name {name!r}: the mapped axes here are {known}. Give the enclosing vmap or pmap "
                  f"axis_name={name!r}, or use the collective inside it.")

# ---------------------------------------------------------------- helpers for rules

def moveaxis(u: UOp, src: int, dst: int) -> UOp:
  """`u` with axis `src` moved to position `dst` (a PERMUTE view; nothing when src == dst)."""
  perm = [i for i in range(u.ndim) if i != src]
  perm.insert(dst, src)
  return u.permute(perm)

def add_axis(u: UOp, dim: int, size: int) -> UOp:
  """`u` broadcast along a new axis of `size` at position `dim`."""
  shape = u.shape[:dim] + (size,) + u.shape[dim:]
  if u.op is Ops.CONST: return u.replace(arg=(u.arg[0], shape))
  return u.reshape(u.shape[:dim] + (1,) + u.shape[dim:]).expand(shape)

def match_axis(u: UOp, bdim, dst: int, size: int) -> UOp:
  """`u` with its batch axis at `dst`; an unbatched `u` (bdim None) is broadcast to get one there."""
  return add_axis(u, dst, size) if bdim is None else moveaxis(u, bdim, dst)

def batch_size(srcs, bdims) -> int:
  return next(s.shape[b] for s, b in zip(srcs, bdims) if b is not None)

def shift(axis: int, bdim: int) -> int:
  """Where per-example axis `axis` sits in an array whose batch axis is `bdim`."""
  return axis + (axis >= bdim)

# ---------------------------------------------------------------- rules

def elementwise_batch(node, srcs, bdims):
  """Operands of one shape: move every batch axis to the first one's position, broadcast the unbatched."""
  d, size = next(b for b in bdims if b is not None), batch_size(srcs, bdims)
  return node.replace(src=tuple(match_axis(s, b, d, size) for s, b in zip(srcs, bdims))), d

def passthrough_batch(node, srcs, bdims):
  """TAG and STOP_GRADIENT are identities: same arg (a TAG keeps its id, so grad still finds it), batched source."""
  return node.replace(src=(srcs[0],)), bdims[0]

def reduce_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  op, axes = node.arg
  axes = tuple(sorted(shift(a, b) for a in axes))
  return UOp(Ops.REDUCE, node.dtype, (x,), (op, axes)), b - sum(a < b for a in axes)

def cumulative_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  op, axis, reverse = node.arg
  return node.replace(src=(x,), arg=(op, shift(axis, b), reverse)), b

def argsort_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  axis, descending = node.arg
  return node.replace(src=(x,), arg=(shift(axis, b), descending)), b

def reshape_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  return moveaxis(x, b, 0).reshape((x.shape[b],) + node.arg), 0

def permute_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  return x.permute((b,) + tuple(shift(p, b) for p in node.arg)), 0

def expand_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  return x.expand(node.arg[:b] + (x.shape[b],) + node.arg[b:]), b

def pad_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  return x.pad(node.arg[:b] + ((0, 0),) + node.arg[b:]), b

def shrink_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  return x.shrink(node.arg[:b] + ((0, x.shape[b]),) + node.arg[b:]), b

def flip_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  return x.flip(tuple(shift(a, b) for a in node.arg)), b

def dot_general_batch(node, srcs, bdims):
  """Both operands batched: the batch axis joins the dot's batch dims (output axis 0). One batched: it is a
  free dim of that operand, and the output keeps free dims in operand order (batch, lhs free, rhs free)."""
  (lhs, rhs), (lb, rb) = srcs, bdims
  (lc, rc), (lbatch, rbatch) = node.arg
  if lb is not None and rb is not None:
    lhs, rhs = moveaxis(lhs, lb, 0), moveaxis(rhs, rb, 0)
    up = lambda axes: tuple(a + 1 for a in axes)
    arg = ((up(lc), up(rc)), ((0,) + up(lbatch), (0,) + up(rbatch)))
    return UOp(Ops.DOT_GENERAL, node.dtype, (lhs, rhs), arg), 0
  if lb is not None:
    lc, lbatch = tuple(shift(a, lb) for a in lc), tuple(shift(a, lb) for a in lbatch)
    out = len(lbatch) + sum(1 for i in range(lb) if i not in lc and i not in lbatch)
  else:
    rc, rbatch = tuple(shift(a, rb) for a in rc), tuple(shift(a, rb) for a in rbatch)
    lhs_free = lhs.ndim - len(lc) - len(lbatch)
    out = len(rbatch) + lhs_free + sum(1 for i in range(rb) if i not in rc and i not in rbatch)
  return UOp(Ops.DOT_GENERAL, node.dtype, (lhs, rhs), ((lc, rc), (lbatch, rbatch))), out

def flat_indices(idx: UOp, n: int) -> UOp:
  """Per-example indices (batch at axis 0) into one flat axis of size batch*n: example b's row i is b*n + i."""
  iota = UOp(Ops.IOTA, idx.dtype, (), (idx.shape, 0))
  return idx.alu(Ops.ADD, iota.alu(Ops.MUL, UOp.const(n, idx.dtype, idx.shape)))

def merge_leading(u: UOp) -> UOp: return u.reshape((u.shape[0] * u.shape[1],) + u.shape[2:])

def gather_batch(node, srcs, bdims):
  """GATHER reads axis 0 of x. Batched x only: put the batch at axis 1, so it rides along each gathered row.
  Batched indices only: the output simply has more index dims. Both: flatten (batch, rows) into one axis and
  offset each example's (clamped) indices by its batch number times the row count."""
  (x, idx), (xb, ib) = srcs, bdims
  if ib is None: return UOp(Ops.GATHER, node.dtype, (moveaxis(x, xb, 1), idx)), idx.ndim
  if xb is None: return UOp(Ops.GATHER, node.dtype, (x, idx)), ib
  x, idx = moveaxis(x, xb, 0), moveaxis(idx, ib, 0)
  n = x.shape[1]
  lo, hi = UOp.const(0, idx.dtype, idx.shape), UOp.const(max(n - 1, 0), idx.dtype, idx.shape)
  clamped = idx.alu(Ops.MAX, lo).alu(Ops.MIN, hi)
  return UOp(Ops.GATHER, node.dtype, (merge_leading(x), flat_indices(clamped, n))), 0

def scatter_batch(node, srcs, bdims):
  """SCATTER writes rows of x's axis 0. Unbatched indices: the batch rides along each row (x at axis 1, the
  updates right after the index dims). Batched indices: flatten (batch, rows) as in GATHER; an index out of
  its example's range is sent past the end of the flat axis, so it is still dropped."""
  (x, idx, upd), (xb, ib, ub) = srcs, bdims
  size = batch_size(srcs, bdims)
  if ib is None:
    x, upd = match_axis(x, xb, 1, size), match_axis(upd, ub, idx.ndim, size)
    return UOp(Ops.SCATTER, node.dtype, (x, idx, upd), node.arg), 1
  x, idx, upd = match_axis(x, xb, 0, size), moveaxis(idx, ib, 0), match_axis(upd, ub, 0, size)
  n = x.shape[1]
  zero, top = UOp.const(0, idx.dtype, idx.shape), UOp.const(n, idx.dtype, idx.shape)
  valid = zero.alu(Ops.CMPLE, idx).alu(Ops.AND, idx.alu(Ops.CMPLT, top))
  flat = UOp(Ops.WHERE, idx.dtype, (valid, flat_indices(idx, n), UOp.const(size * n, idx.dtype, idx.shape)))
  out = UOp(Ops.SCATTER, node.dtype, (merge_leading(x), flat, upd), node.arg)
  return out.reshape(x.shape), 0

def getitem_batch(node, srcs, bdims):
  """Pick output `node.arg` of a batched multi-output node; its rule returned one bdim per output (and may have
  returned a tuple of plain nodes instead of one node, e.g. a cond with a batched predicate becomes selects)."""
  if isinstance(srcs[0], tuple): return srcs[0][node.arg], bdims[0][node.arg]
  return node.replace(src=(srcs[0],)), bdims[0][node.arg]

def debug_callback_batch(node, srcs, bdims):
  """A host callback (tinyjx.debug): every argument gets the new batch axis in front (broadcast where unbatched),
  and the node's record (`with_batch`) calls the host function once per example."""
  size = batch_size(srcs, bdims)
  srcs = [match_axis(u, d, 0, size) for u, d in zip(srcs, bdims)]
  return UOp(Ops.DEBUG_CALLBACK, node.dtype, tuple(srcs), node.arg.with_batch(size)), None

batch_rules: dict = {
  **{op: elementwise_batch for op in GroupOp.Elementwise | GroupOp.Complex},
  Ops.TAG: passthrough_batch, Ops.STOP_GRADIENT: passthrough_batch,
  Ops.REDUCE: reduce_batch, Ops.CUMULATIVE: cumulative_batch, Ops.ARGSORT: argsort_batch,
  Ops.RESHAPE: reshape_batch, Ops.PERMUTE: permute_batch, Ops.EXPAND: expand_batch, Ops.PAD: pad_batch,
  Ops.SHRINK: shrink_batch, Ops.FLIP: flip_batch,
  Ops.DOT_GENERAL: dot_general_batch, Ops.GATHER: gather_batch, Ops.SCATTER: scatter_batch,
  Ops.GETITEM: getitem_batch, Ops.DEBUG_CALLBACK: debug_callback_batch,
}

# ---------------------------------------------------------------- the graph rewrite

def is_batched(bdim) -> bool:
  return bdim is not None and (not isinstance(bdim, tuple) or any(b is not None for b in bdim))

def batch_node(node: UOp, srcs: list, bdims: list) -> tuple:
  rule = batch_rules.get(node.op)
  if rule is None:
    raise NotImplementedError(f"vmap has no batching rule for {node.op.name} ({node!r}); add one to tinyjx."
                              "transforms.batching.batch_rules, or move this operation out of the vmapped function")
  w = uop_module.watcher   # provenance, while recorded: the batched nodes keep `node`'s source line, plus 'vmap'
  new, bdim = rule(node, srcs, bdims) if w is None else w.attributed(node, None, rule, node, srcs, bdims,
                                                                     transform='vmap')
  return new, (bdim if is_batched(bdim) else None)

def acts_on_current_axis(node: UOp) -> bool:
  """A collective over the axis being mapped now needs its rule even when its operand is not batched: psum(c, 'i')
  is size * c, and axis_index has no operand at all."""
  return node.op in GroupOp.Collective and bool(axis_stack) and node.arg[0] == axis_stack[-1][0]

def batch_graph(outs, params, batched_params, in_dims) -> tuple[list, list]:
  """Rewrite the graph of `outs`: `params` become `batched_params` (batch axis at `in_dims`), every node that
  depends on them goes through its batch rule. Returns the new outputs and their batch axes (None: unbatched)."""
  env = {p: (q, d) for p, q, d in zip(params, batched_params, in_dims)}
  for node in toposort(list(outs)):
    if node in env: continue
    pairs = [env[s] for s in node.src]
    srcs, bdims = [p[0] for p in pairs], [p[1] for p in pairs]
    if any(is_batched(b) for b in bdims) or acts_on_current_axis(node): env[node] = batch_node(node, srcs, bdims)
    else: env[node] = (node if tuple(srcs) == node.src else node.replace(src=tuple(srcs)), None)
  return [env[o][0] for o in outs], [env[o][1] for o in outs]

CACHE_SIZE = 256
_cache = LRU(CACHE_SIZE)
cache_stats = _cache.stats

def batch_jaxpr(jaxpr, in_dims: tuple, size: int) -> tuple[list, list, list]:
  """The batched graph of `jaxpr` over fresh PARAMs: (params, outs, out_bdims), memoized by content
  (jaxpr.key, in_dims, size and the active axes) so the same function is rewritten once. The outs start
  with the batched effects of `jaxpr` (`len(jaxpr.effects)` of them; their bdims say nothing)."""
  def build():
    tid = fresh_id()
    params = [UOp(Ops.PARAM, p.dtype, (), (i, p.shape[:d] + (size,) + p.shape[d:], tid))
              for i, (p, d) in enumerate(zip(jaxpr.params, in_dims))]
    return (params, *batch_graph(jaxpr.roots, jaxpr.params, params, in_dims))
  reuse = uop_module.watcher is None   # while provenance records, batch again: fresh sites
  return _cache.memo((jaxpr.key, tuple(in_dims), size, tuple(axis_stack)), build, reuse)

def batch_sub(jaxpr: Jaxpr, in_dims, size: int, force=None) -> tuple[Jaxpr, list]:
  """`jaxpr` with inputs batched at `in_dims` (None: unbatched); each batched output gets its batch axis at 0,
  and outputs marked in `force` are broadcast to have one. Returns the jaxpr and which outputs are batched."""
  tid = fresh_id()
  params = [UOp(Ops.PARAM, p.dtype, (), (i, p.shape if d is None else p.shape[:d] + (size,) + p.shape[d:], tid))
            for i, (p, d) in enumerate(zip(jaxpr.params, in_dims))]
  n = len(jaxpr.effects)
  roots, bdims = batch_graph(jaxpr.roots, jaxpr.params, params, in_dims)
  effects, outs, bdims = roots[:n], roots[n:], bdims[n:]
  batched = [b is not None or bool(force and force[i]) for i, b in enumerate(bdims)]
  outs = [match_axis(u, b, 0, size) if want else u for u, b, want in zip(outs, bdims, batched)]
  return tracing.Jaxpr(params, outs, out_weak=jaxpr.out_weak, name=f"vmap({jaxpr.name})", effects=effects), batched

# ---------------------------------------------------------------- in_axes / out_axes as pytree prefixes

def is_axis_spec(a) -> bool:
  return a is None or (isinstance(a, (int, np.integer)) and not isinstance(a, bool))

def one_level(x) -> tuple[list, object]:
  """The children of node `x` with their keys, and (node type, aux data); a leaf gives ([], None)."""
  pairs, td = tree_util.tree_flatten_with_path(x, is_leaf=lambda y: y is not x)
  return ([(p[0], c) for p, c in pairs] if td.node_data() is not None else []), td.node_data()

def describe_node(data, nkids: int) -> str:
  kind, aux = data
  if kind is dict: return f"a dict with keys {tuple(aux)}"
  if kind is type(None): return "None"
  return f"a {kind.__name__} of {nkids} entries"

def broadcast_prefix(spec, tree, path: str, what: str) -> list:
  """One axis spec per leaf of `tree`; `spec` is a pytree prefix of `tree` whose leaves are ints or None."""
  if is_axis_spec(spec): return [None if spec is None else operator.index(spec)] * len(tree_util.tree_leaves(tree))
  skids, sdata = one_level(spec)
  if sdata is None:
    raise TypeError(f"vmap {path} must be an int, None, or a container of those, got {spec!r}")
  tkids, tdata = one_level(tree)
  if tdata is None or tdata[0] is not sdata[0] or tdata[1] != sdata[1] or len(tkids) != len(skids):
    got = describe_node(tdata, len(tkids)) if tdata is not None else f"a leaf of type {type(tree).__name__}"
    raise ValueError(f"vmap {path.split('[')[0]} must be a pytree prefix of the {what}: at {path} it is "
                     f"{describe_node(sdata, len(skids))}, but the {what[:-1]} there is {got}. Give an int or None "
                     "for a whole subtree, or a container of the same type and keys.")
  out = []
  for (k, s), (_, t) in zip(skids, tkids): out += broadcast_prefix(s, t, path + tree_util.keystr((k,)), what)
  return out

def flat_in_axes(in_axes, args: tuple, kwargs: dict) -> list:
  """One axis (int or None) per flat leaf of (args, kwargs); keyword arguments are mapped over axis 0."""
  if isinstance(in_axes, list): in_axes = tuple(in_axes)
  if is_axis_spec(in_axes): axes = broadcast_prefix(in_axes, args, "in_axes", "arguments")
  elif isinstance(in_axes, tuple):
    if len(in_axes) != len(args):
      raise ValueError(f"vmap in_axes must be an int, None, or a tuple with one entry per positional argument, "
                       f"but got len(in_axes)={len(in_axes)} for {len(args)} positional arguments")
    axes = [a for i, (s, x) in enumerate(zip(in_axes, args))
            for a in broadcast_prefix(s, x, f"in_axes[{i}]", "arguments")]
  else:
    raise TypeError(f"vmap in_axes must be an int, None, or a tuple (or list) of entries corresponding to the "
                    f"positional arguments, got {in_axes!r}")
  return axes + [0] * len(tree_util.tree_leaves(kwargs))

# ---------------------------------------------------------------- vmap

BRANCH_FIX = ("under vmap this value holds one entry per example, so a Python branch or conversion (if, while, "
              "bool(), int(), np.asarray) cannot pick one path for all of them. Use jnp.where(cond, x, y) to select "
              "elementwise, or lax.cond(pred, true_fun, false_fun, *operands), which vmap turns into a select; or pass "
              "the argument with in_axes=None if it is the same for every example")

def mapped_size(shapes, axes, paths, axis_size) -> int:
  """The one size of every mapped axis (and axis_size); the error lists each argument and its size."""
  sizes = [(shape[a], f"axis {a} of argument {p} of shape {shape}") for shape, a, p in zip(shapes, axes, paths)
           if a is not None]
  if axis_size is not None: sizes.insert(0, (axis_size, "the axis_size argument"))
  if not sizes:
    raise ValueError("vmap must have at least one non-None value in in_axes, or axis_size must be specified")
  if len({s for s, _ in sizes}) > 1:
    lines = "\n".join(f"  * size {s}: {what}" for s, what in sizes)
    raise ValueError(f"vmap got inconsistent sizes for the array axes to be mapped:\n{lines}\nEvery mapped axis must "
                     "have one size; fix in_axes (None for an argument that is not mapped) or the arguments' shapes.")
  return sizes[0][0]

def normalize_in_axis(shape: tuple, axis: int, path: str) -> int:
  ndim = len(shape)
  if not -ndim <= axis < ndim:
    raise ValueError(f"vmap was asked to map argument {path} along axis {axis}, which needs rank at least "
                     f"{axis + 1 if axis >= 0 else -axis}, but its shape is {shape}; pass in_axes=None "
                     "for arguments that are not mapped")
  return axis % ndim

def move_out(u: UOp, bdim, out_axis, size: int, path: str) -> UOp:
  """An output with its batch axis at `out_axis`: moved, broadcast when unbatched, or left alone for None."""
  if out_axis is None:
    if bdim is not None:
      raise ValueError(f"vmap {path} is None, but that output is batched (on axis {bdim}); give it an int out_axes, "
                       "or make the output independent of the mapped arguments")
    return u
  ndim = u.ndim if bdim is not None else u.ndim + 1
  if not -ndim <= out_axis < ndim:
    raise ValueError(f"vmap {path}={out_axis} is out of bounds for an output of rank {ndim} (batch axis included)")
  return moveaxis(u, bdim, out_axis % ndim) if bdim is not None else add_axis(u, out_axis % ndim, size)

def out_axes_leaves(out_axes, outputs) -> tuple[list, list]:
  """One out axis per leaf of the pytree `outputs`, and the paths that name them in errors."""
  if isinstance(out_axes, list): out_axes = tuple(out_axes)
  axes = broadcast_prefix(out_axes, outputs, "out_axes", "outputs")
  paths = ["out_axes" + tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(outputs)[0]]
  return axes, paths

def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
  """Vectorize `fun` over a mapped axis of its arguments: `vmap(f)(xs)` equals stacking `f(x)` for each x in xs.

  `in_axes` / `out_axes`: an int (negative counts from the end), None (not mapped / not stacked), or a pytree
  prefix of the arguments / outputs with those at its leaves; a list counts as a tuple. Keyword arguments are
  mapped over axis 0. `axis_size` is needed when no argument is mapped. `axis_name` names the axis for
  collectives (psum ...). `spmd_axis_name` is accepted for JAX compatibility and ignored (one device).

  >>> import tinyjx.numpy as jnp
  >>> vmap(lambda x, y: x * y, in_axes=(0, None))(jnp.arange(3.0), 2.0).tolist()
  [0.0, 2.0, 4.0]
  """
  name = f"vmap({getattr(fun, '__name__', 'fun')})"

  @functools.wraps(fun)
  def batched(*args, **kwargs):
    jnp = api
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    axes = flat_in_axes(in_axes, args, kwargs)
    paths = tracing.arg_paths(fun, args, kwargs)
    avals = [tracing.aval_of(x, p) for x, p in zip(leaves, paths)]
    axes = [None if a is None else normalize_in_axis(av[0], a, p) for av, a, p in zip(avals, axes, paths)]
    size = mapped_size([av[0] for av in avals], axes, paths, axis_size)
    mapped = [i for i, a in enumerate(axes) if a is not None]
    per_example = [(avals[i][0][:axes[i]] + avals[i][0][axes[i] + 1:],) + tuple(avals[i][1:]) for i in mapped]

    def flat_fun(*xs):
      full = list(leaves)
      for i, x in zip(mapped, xs): full[i] = x
      a, kw = tree_util.tree_unflatten(in_tree, full)
      return fun(*a, **kw)

    with axis_frame(axis_name, size):
      jaxpr = tracing.trace_flat(flat_fun, per_example, name, [paths[i] for i in mapped], fix=BRANCH_FIX)
      params, outs, out_bdims = batch_jaxpr(jaxpr, tuple(axes[i] for i in mapped), size)
    outs = substitute(outs, {p: jnp.asarray(leaves[i]).uop for p, i in zip(params, mapped)})
    n = len(jaxpr.effects)
    for e in outs[:n]: tracing.emit_effect(e)
    outs, out_bdims = outs[n:], out_bdims[n:]
    spec, spec_paths = out_axes_leaves(out_axes, tree_util.tree_unflatten(jaxpr.out_tree, [Array(u) for u in outs]))
    outs = [move_out(u, b, s, size, p) for u, b, s, p in zip(outs, out_bdims, spec, spec_paths)]
    return tree_util.tree_unflatten(jaxpr.out_tree, [Array(u, w) for u, w in zip(outs, jaxpr.out_weak)])
  return batched
