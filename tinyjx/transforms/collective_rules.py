"""collective_rules: how vmap and autodiff see the collectives (psum, pmax, pmin, all_gather, psum_scatter,
ppermute, all_to_all, axis_index).

Under vmap a collective over the axis being mapped is computed on the batch axis itself (a psum is a sum over
it, an axis_index an iota); over an enclosing axis it stays a collective, with the batch axis moved in front.
The vjp of a collective is its transpose (psum's is psum, all_gather's psum_scatter, a permutation's the
inverse permutation); pmax and pmin send the cotangent to the devices that hold the extreme, shared between
ties. What the collectives compute at run time lives with the runtime (`tinyjx.collectives`).
"""
from __future__ import annotations
import functools
from tinyjx import dtypes
from tinyjx.transforms import ad, batching
from tinyjx.transforms.batching import moveaxis, match_axis
from tinyjx.uop import UOp, Ops

# ---------------------------------------------------------------- batch rules

def is_current(node: UOp) -> bool:
  """Whether the collective's axis is the one being vmapped now (else it belongs to an enclosing map)."""
  return bool(batching.axis_stack) and batching.current_axis_name() == node.arg[0]

def scale(u: UOp, n: int) -> UOp: return UOp(Ops.MUL, u.dtype, (u, UOp.const(n, u.dtype, u.shape)))

REDUCE_ALU = {Ops.PSUM: Ops.ADD, Ops.PMAX: Ops.MAX, Ops.PMIN: Ops.MIN}

def reduction_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  if not is_current(node): return node.replace(src=(x,)), b
  if b is not None: return x.reduce(REDUCE_ALU[node.op], (b,)), None
  return (scale(x, batching.current_axis_size()) if node.op is Ops.PSUM else x), None

def all_gather_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  name, axis, tiled, n = node.arg
  if not is_current(node):
    return UOp(Ops.ALL_GATHER, node.dtype, (moveaxis(x, b, 0),), (name, axis + 1, tiled, n)), 0
  out = moveaxis(match_axis(x, b, 0, n), 0, axis)
  return out.reshape(node.shape), None

def psum_scatter_batch(node, srcs, bdims):
  (x,), (b,) = srcs, bdims
  name, dim, tiled, n = node.arg
  if not is_current(node):
    return UOp(Ops.PSUM_SCATTER, node.dtype, (moveaxis(x, b, 0),), (name, dim + 1, tiled, n)), 0
  total = x.reduce(Ops.ADD, (b,)) if b is not None else scale(x, n)
  if not tiled: return total, dim
  s = total.shape
  return total.reshape(s[:dim] + (n, s[dim] // n) + s[dim + 1:]), dim

def ppermute_batch(node, srcs, bdims):
  """Entry d of the result is entry s of x for each pair (s, d): a padded one-entry slice per pair, summed."""
  (x,), (b,) = srcs, bdims
  if not is_current(node): return node.replace(src=(x,)), b
  n = batching.current_axis_size()
  x = match_axis(x, b, 0, n)
  rest = tuple((0, s) for s in x.shape[1:])
  terms = [x.shrink(((s, s + 1),) + rest).pad(((d, n - 1 - d),) + tuple((0, 0) for _ in rest))
           for s, d in node.arg[1]]
  join = Ops.OR if x.dtype is dtypes.bool_ else Ops.ADD
  if not terms: return UOp.const(0, x.dtype, x.shape), 0
  return functools.reduce(lambda a, t: UOp(join, x.dtype, (a, t)), terms), 0

def all_to_all_batch(node, srcs, bdims):
  """With every device's x stacked at axis 0 (k), entry j of the result gathers block j of each x along `split`
  and joins them along `concat` in order of k: a permutation (and, tiled, two reshapes)."""
  (x,), (b,) = srcs, bdims
  name, split, concat, tiled, n = node.arg
  if not is_current(node):
    return UOp(Ops.ALL_TO_ALL, node.dtype, (moveaxis(x, b, 0),), (name, split + 1, concat + 1, tiled, n)), 0
  x = match_axis(x, b, 0, n)
  s = x.shape[1:]
  if not tiled:
    others = [1 + i for i in range(len(s)) if i != split]
    return x.permute([1 + split] + others[:concat] + [0] + others[concat:]), 0
  xs = x.reshape((n,) + s[:split] + (n, s[split] // n) + s[split + 1:])   # k, ..., j, block, ...
  pos = [1 + i if i < split else 2 + i for i in range(len(s))]           # where each per-example axis went
  y = xs.permute([1 + split] + pos[:concat] + [0] + pos[concat:])
  return y.reshape((n,) + node.shape), 0

def axis_index_batch(node, srcs, bdims):
  if not is_current(node): return node, None
  return UOp(Ops.IOTA, dtypes.int32, (), ((batching.current_axis_size(),), 0)), 0

batching.batch_rules.update({
  Ops.PSUM: reduction_batch, Ops.PMAX: reduction_batch, Ops.PMIN: reduction_batch,
  Ops.ALL_GATHER: all_gather_batch, Ops.PSUM_SCATTER: psum_scatter_batch, Ops.PPERMUTE: ppermute_batch,
  Ops.ALL_TO_ALL: all_to_all_batch, Ops.AXIS_INDEX: axis_index_batch,
})

# ---------------------------------------------------------------- vjp and jvp rules

def psum_of(u: UOp, name) -> UOp: return UOp(Ops.PSUM, u.dtype, (u,), (name,))

def psum_vjp(ct, node): return (psum_of(ct, node.arg[0]),)

def extreme_share(node: UOp) -> UOp:
  """Where x holds the max (min) over the devices, divided by how many devices tie there."""
  x = node.src[0]
  hit = UOp(Ops.CMPEQ, dtypes.bool_, (x, node)).cast(x.dtype)
  return UOp(Ops.DIV, x.dtype, (hit, psum_of(hit, node.arg[0])))

def extreme_vjp(ct, node):
  return (UOp(Ops.MUL, ct.dtype, (psum_of(ct, node.arg[0]), extreme_share(node))),)
def extreme_jvp(node, ts):
  return psum_of(UOp(Ops.MUL, ts[0].dtype, (ts[0], extreme_share(node))), node.arg[0])

def all_gather_vjp(ct, node): return (UOp(Ops.PSUM_SCATTER, ct.dtype, (ct,), node.arg),)
def psum_scatter_vjp(ct, node): return (UOp(Ops.ALL_GATHER, ct.dtype, (ct,), node.arg),)
def ppermute_vjp(ct, node):
  name, perm = node.arg
  return (UOp(Ops.PPERMUTE, ct.dtype, (ct,), (name, tuple((d, s) for s, d in perm))),)
def all_to_all_vjp(ct, node):
  name, split, concat, tiled, n = node.arg
  return (UOp(Ops.ALL_TO_ALL, ct.dtype, (ct,), (name, concat, split, tiled, n)),)
def linear_jvp(node, ts): return node.replace(src=(ts[0],))

ad.vjp_rules.update({
  Ops.PSUM: psum_vjp, Ops.PMAX: extreme_vjp, Ops.PMIN: extreme_vjp, Ops.ALL_GATHER: all_gather_vjp,
  Ops.PSUM_SCATTER: psum_scatter_vjp, Ops.PPERMUTE: ppermute_vjp, Ops.ALL_TO_ALL: all_to_all_vjp,
  Ops.AXIS_INDEX: ad.no_vjp,
})
ad.jvp_rules.update({
  **{op: linear_jvp for op in (Ops.PSUM, Ops.ALL_GATHER, Ops.PSUM_SCATTER, Ops.PPERMUTE, Ops.ALL_TO_ALL)},
  Ops.PMAX: extreme_jvp, Ops.PMIN: extreme_jvp, Ops.AXIS_INDEX: ad.no_jvp,
})
