"""collectives: psum, pmean, pmax, pmin, all_gather, psum_scatter, ppermute, pshuffle, all_to_all, axis_index, and
what each of them does between the devices of a running pmap.

A collective is an op whose `arg` starts with its axis name (sizes that shapes need come last):

  PSUM, PMAX, PMIN  (name,)                             sum / max / min over the axis, the same on every device
  ALL_GATHER        (name, axis, tiled, size)           every device's value, stacked at `axis` (tiled: joined)
  PSUM_SCATTER      (name, dim, tiled, size)            the sum, of which device j keeps block j along `dim`
  PPERMUTE          (name, ((src, dst), ...))           device dst gets the value of src; zeros where none is sent
  ALL_TO_ALL        (name, split, concat, tiled, size)  device k's block j along `split` goes to device j, which
                                                        joins the blocks it gets along `concat`, in order of k
  AXIS_INDEX        (name,)                             this device's position along the axis (int32, no source)

The functions below check the axis name against the mapped axes (`batching.axis_stack`: vmap and pmap push their
axis while they trace) and build one node per array leaf, so pytrees go through leaf by leaf. A tuple of names is
one axis of the product of their sizes (first name major); psum, pmax, pmin, pmean and axis_index accept it.
A reduction of a value that is the same on every device (a constant or a closed-over array, like `psum(1, 'i')`)
is computed at trace time, as JAX does.

The runtime: pmap runs one copy of the program per device, each on its own thread, with `on_device(group, pos)`
naming the device's `Group` and position. Every device reaches the same collectives in the same order. At each one
`Group.exchange` is a barrier: every device leaves its value, the last to arrive computes all the local results
(`combine`; across MPI processes through `Group.gather`, an all-gather of the local values) and everyone goes on.
A device that fails aborts the barrier, so the others raise at once; a device that never arrives makes them raise
after TINYJX_COLLECTIVE_TIMEOUT seconds. This module registers `run` as `tinyjx.array.collective_hook`, through
which the devices reach it without importing it: the PYTHON device's rule for a collective, and on compiled
devices a runtime step (`CollectiveStep`, tinyjx.lower.steps).
"""
from __future__ import annotations
import contextlib, math, threading
import numpy as np
from tinyjx import array, dtypes, settings, tracing, tree_util
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops, GroupOp
from tinyjx.transforms import batching

class AxisNameError(NameError):
  """A collective names an axis that no enclosing pmap or vmap maps."""

class CollectiveError(RuntimeError):
  """A collective could not complete: another device failed, or it waited longer than the timeout."""

class PeerFailed(CollectiveError):
  """This device stopped because another device of the same pmap failed (that device raises the real error)."""

# ---------------------------------------------------------------- checking axis names and arguments

def axis_names_of(axis_name) -> tuple:
  return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)

def axis_size(axis_name, what: str = "axis_size") -> int:
  """The size of the mapped axis `axis_name` (a tuple of names: the product), with errors naming the known axes.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.vmap(lambda x: x * axis_size('i'), axis_name='i')(jnp.ones(3)).tolist()
  [3.0, 3.0, 3.0]
  """
  names, known = axis_names_of(axis_name), batching.axis_names()
  for name in names:
    if name in known: continue
    if not known:
      raise AxisNameError(f"{what}: unbound axis name {name!r}: collectives run only inside a mapped function, and "
                          f"this call is outside any. Call it inside pmap(f, axis_name={name!r}) or "
                          f"vmap(f, axis_name={name!r}).")
    raise AxisNameError(f"{what}: unknown axis name {name!r}; the mapped axes here are "
                        f"{', '.join(map(repr, known))}. Use one of those, or give the enclosing pmap or vmap "
                        f"axis_name={name!r}.")
  return math.prod(batching.axis_size(n) for n in names)

def one_axis(axis_name, what: str):
  names = axis_names_of(axis_name)
  if len(names) != 1:
    raise NotImplementedError(f"{what} over several axes {names} is not supported; nest one {what} per axis")
  axis_size(names[0], what)
  return names[0]

def no_groups(axis_index_groups, what: str) -> None:
  if axis_index_groups is not None:
    raise NotImplementedError(f"{what}: axis_index_groups is not supported; map over a smaller axis instead")

def norm_axis(axis: int, ndim: int, what: str, arg: str, shape: tuple) -> int:
  if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
    raise ValueError(f"{what}: {arg}={axis!r} is out of range for an operand of shape {shape} (valid: "
                     f"{-ndim} to {ndim - 1})")
  return int(axis) % ndim

def device_invariant(u: UOp) -> bool:
  """True when `u` is the same on every device: no traced input, no axis index, no earlier collective."""
  return u.flags.isdisjoint({'PARAM', *(op.name for op in GroupOp.Collective)})

def as_array(leaf) -> Array:
  """An Array for a leaf (a Python scalar stays weakly typed, as in JAX)."""
  if isinstance(leaf, Array): return leaf
  from tinyjx.numpy import base as jnp
  return Array(jnp.asarray(leaf).uop, tracing.aval_of(leaf, "a collective's operand")[2])

def leaves_map(fn, x): return tree_util.tree_map(lambda leaf: fn(as_array(leaf)), x)

def bind(op: Ops, x: Array, arg) -> Array:
  return Array(UOp(op, x.dtype, (x.uop,), arg), x.weak)

# ---------------------------------------------------------------- the public collectives

REDUCTIONS = {Ops.PSUM: 'psum', Ops.PMAX: 'pmax', Ops.PMIN: 'pmin'}

def reduce_leaf(op: Ops, x: Array, names: tuple) -> Array:
  if op is Ops.PSUM and x.dtype is dtypes.bool_: x = x.astype(dtypes.int32)   # as JAX: psum counts
  for name in reversed(names):
    if not device_invariant(x.uop): x = bind(op, x, (name,))
    elif op is Ops.PSUM: x = x * batching.axis_size(name)
  return x

def _reduction(op: Ops, doc_example: str):
  name = REDUCTIONS[op]
  def collective(x, axis_name, *, axis_index_groups=None):
    no_groups(axis_index_groups, name)
    names = axis_names_of(axis_name)
    axis_size(names, name)
    return leaves_map(lambda leaf: reduce_leaf(op, leaf, names), x)
  collective.__name__ = collective.__qualname__ = name
  what = {'psum': 'sum', 'pmax': 'maximum', 'pmin': 'minimum'}[name]
  collective.__doc__ = (f"The {what} of every leaf of `x` over the mapped axis `axis_name` (a name or a tuple of "
                        f"names), the same on every device.\n\n>>> import tinyjx, tinyjx.numpy as jnp\n"
                        f">>> from tinyjx import lax\n{doc_example}\n")
  return collective

psum = _reduction(Ops.PSUM, ">>> tinyjx.vmap(lambda x: lax.psum(x, 'i'), axis_name='i')(jnp.arange(4.0)).tolist()\n"
                            "[6.0, 6.0, 6.0, 6.0]")
pmax = _reduction(Ops.PMAX, ">>> tinyjx.vmap(lambda x: lax.pmax(x, 'i'), axis_name='i')(jnp.arange(3.0)).tolist()\n"
                            "[2.0, 2.0, 2.0]")
pmin = _reduction(Ops.PMIN, ">>> tinyjx.vmap(lambda x: lax.pmin(x, 'i'), axis_name='i')(jnp.arange(3.0)).tolist()\n"
                            "[0.0, 0.0, 0.0]")

def pmean(x, axis_name, *, axis_index_groups=None):
  """The mean of every leaf of `x` over the mapped axis (`psum / axis size`; integers give floats, as in JAX).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> tinyjx.vmap(lambda x: lax.pmean(x, 'i'), axis_name='i')(jnp.arange(4)).tolist()
  [1.5, 1.5, 1.5, 1.5]
  """
  n = axis_size(axis_name, 'pmean')
  return tree_util.tree_map(lambda s: s / n, psum(x, axis_name, axis_index_groups=axis_index_groups))

def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False):
  """Every device's value of each leaf, stacked along a new axis `axis` (tiled: concatenated along `axis`).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> tinyjx.vmap(lambda x: lax.all_gather(x, 'i'), axis_name='i')(jnp.arange(2.0))[0].tolist()
  [0.0, 1.0]
  """
  no_groups(axis_index_groups, 'all_gather')
  name = one_axis(axis_name, 'all_gather')
  n = batching.axis_size(name)
  def gather(a: Array) -> Array:
    if tiled and a.ndim == 0:
      raise ValueError("all_gather(tiled=True) needs an operand with at least one axis, got a scalar; use tiled=False")
    ax = norm_axis(axis, a.ndim if tiled else a.ndim + 1, 'all_gather', 'axis', a.shape)
    return bind(Ops.ALL_GATHER, a, (name, ax, bool(tiled), n))
  return leaves_map(gather, x)

def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None, tiled: bool = False):
  """The sum over the axis, scattered: device j keeps block j along `scatter_dimension` (whose size must equal the
  axis size, or with tiled=True be a multiple of it; untiled, that dimension is removed).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> tinyjx.vmap(lambda x: lax.psum_scatter(x, 'i'), axis_name='i')(jnp.ones((2, 2))).tolist()
  [2.0, 2.0]
  """
  no_groups(axis_index_groups, 'psum_scatter')
  name = one_axis(axis_name, 'psum_scatter')
  n = batching.axis_size(name)
  def scatter(a: Array) -> Array:
    dim = norm_axis(scatter_dimension, a.ndim, 'psum_scatter', 'scatter_dimension', a.shape)
    if (a.shape[dim] % n if tiled else a.shape[dim] != n):
      need = f"a multiple of the axis size {n}" if tiled else f"the axis size {n} (or pass tiled=True)"
      raise ValueError(f"psum_scatter: dimension {dim} of the operand of shape {a.shape} must be {need}")
    return bind(Ops.PSUM_SCATTER, a, (name, dim, bool(tiled), n))
  return leaves_map(scatter, x)

def check_perm(perm, n: int) -> tuple:
  pairs = tuple((int(s), int(d)) for s, d in perm)
  srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
  if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
    raise ValueError(f"ppermute: sources and destinations must each be unique, got perm={pairs}")
  if any(not 0 <= i < n for i in srcs + dsts):
    raise ValueError(f"ppermute: every index in perm={pairs} must be in range({n}) (the axis size)")
  return pairs

def ppermute(x, axis_name, perm):
  """Send each leaf along the pairs `(source, destination)` of `perm`; a device that no pair sends to gets zeros.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> tinyjx.vmap(lambda x: lax.ppermute(x, 'i', [(0, 1), (1, 2), (2, 0)]), axis_name='i')(jnp.arange(3.0)).tolist()
  [2.0, 0.0, 1.0]
  """
  name = one_axis(axis_name, 'ppermute')
  pairs = check_perm(perm, batching.axis_size(name))
  return leaves_map(lambda a: bind(Ops.PPERMUTE, a, (name, pairs)), x)

def pshuffle(x, axis_name, perm):
  """Device i gets the value of device `perm[i]` (`perm` is a permutation of the axis): ppermute with (perm[i], i).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> tinyjx.vmap(lambda x: lax.pshuffle(x, 'i', [1, 2, 0]), axis_name='i')(jnp.arange(3.0)).tolist()
  [1.0, 2.0, 0.0]
  """
  n = axis_size(axis_name, 'pshuffle')
  if sorted(int(p) for p in perm) != list(range(n)):
    raise ValueError(f"pshuffle: perm={list(perm)} must be a permutation of range({n}) (the axis size)")
  return ppermute(x, axis_name, [(int(p), i) for i, p in enumerate(perm)])

def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None, tiled: bool = False):
  """Split each leaf into axis-size blocks along `split_axis`, send block j to device j, and join what arrives
  along `concat_axis` in device order. Untiled, `split_axis` must have the axis size and is replaced by a new
  axis at `concat_axis`; tiled, it must be a multiple and `concat_axis` grows by the axis size.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> xs = jnp.arange(4.0).reshape(2, 2)
  >>> tinyjx.vmap(lambda x: lax.all_to_all(x, 'i', 0, 0), axis_name='i')(xs).tolist()
  [[0.0, 2.0], [1.0, 3.0]]
  """
  no_groups(axis_index_groups, 'all_to_all')
  name = one_axis(axis_name, 'all_to_all')
  n = batching.axis_size(name)
  def exchange(a: Array) -> Array:
    split = norm_axis(split_axis, a.ndim, 'all_to_all', 'split_axis', a.shape)
    concat = norm_axis(concat_axis, a.ndim, 'all_to_all', 'concat_axis', a.shape)
    if (a.shape[split] % n if tiled else a.shape[split] != n):
      need = f"a multiple of the axis size {n}" if tiled else f"the axis size {n} (or pass tiled=True)"
      raise ValueError(f"all_to_all: split_axis {split} of the operand of shape {a.shape} must be {need}")
    return bind(Ops.ALL_TO_ALL, a, (name, split, concat, bool(tiled), n))
  return leaves_map(exchange, x)

def axis_index(axis_name) -> Array:
  """This device's position along the mapped axis (int32); for a tuple of names, the position in their product.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> tinyjx.vmap(lambda x: x + lax.axis_index('i'), axis_name='i')(jnp.zeros(3, jnp.int32)).tolist()
  [0, 1, 2]
  """
  names = axis_names_of(axis_name)
  axis_size(names, 'axis_index')
  out = None
  for name in names:
    idx = Array(UOp(Ops.AXIS_INDEX, dtypes.int32, (), (name,)))
    out = idx if out is None else out * batching.axis_size(name) + idx
  return out

# ---------------------------------------------------------------- what each collective computes, on numpy values

UFUNCS = {Ops.PSUM: np.add, Ops.PMAX: np.maximum, Ops.PMIN: np.minimum, Ops.PSUM_SCATTER: np.add}

def finish(value: np.ndarray, node: UOp) -> np.ndarray:
  out = np.asarray(value).astype(node.dtype.np, copy=False)
  return dtypes.round_bf16(out) if node.dtype is dtypes.bfloat16 else out

def block(x: np.ndarray, dim: int, j: int, n: int, tiled: bool) -> np.ndarray:
  """Block j of n along `dim` (untiled: the index j, the dimension dropped)."""
  if not tiled: return np.take(x, j, axis=dim)
  m = x.shape[dim] // n
  return np.take(x, range(j * m, (j + 1) * m), axis=dim)

def all_to_all_one(vals: list, j: int, node: UOp) -> np.ndarray:
  _, split, concat, tiled, n = node.arg
  parts = [block(v, split, j, n, tiled) for v in vals]
  return np.concatenate(parts, axis=concat) if tiled else np.stack(parts, axis=concat)

def permute_one(vals: list, j: int, node: UOp) -> np.ndarray:
  src = {d: s for s, d in node.arg[1]}.get(j)
  return vals[src] if src is not None else np.zeros_like(vals[0])

def combine(node: UOp, values: list, indices: list, gather) -> list:
  """The results of collective `node` on the local devices (global positions `indices`), given their inputs
  `values`. `gather(stack)` stacks the `stack`s of every process (within one process it returns `stack`)."""
  if node.op in UFUNCS:
    ufunc = UFUNCS[node.op]
    total = ufunc.reduce(gather(ufunc.reduce(np.stack(values), axis=0)[None]), axis=0)
    if node.op is not Ops.PSUM_SCATTER: return [finish(total, node)] * len(values)
    _, dim, tiled, n = node.arg
    return [finish(block(total, dim, j, n, tiled), node) for j in indices]
  everyone = list(gather(np.stack(values)))
  if node.op is Ops.ALL_GATHER:
    _, axis, tiled, _ = node.arg
    out = np.concatenate(everyone, axis=axis) if tiled else np.stack(everyone, axis=axis)
    return [finish(out, node)] * len(values)
  one = permute_one if node.op is Ops.PPERMUTE else all_to_all_one
  return [finish(one(everyone, j, node), node) for j in indices]

# ---------------------------------------------------------------- the runtime: devices meeting at each collective

class Group:
  """The local devices of one pmap call, meeting at its collectives. Device `pos` of this process is at global
  position `first + pos` of the axis (of `size` devices in all); `gather` is None within one process, else the
  cross-process all-gather of a local stack (tinyjx.distributed.allgather_array)."""
  def __init__(self, axis_name, size: int, first: int, n_local: int, gather=None):
    self.axis_name, self.size, self.first, self.n_local = axis_name, size, first, n_local
    self.gather = gather or (lambda stack: stack)
    self.timeout = float(settings.get('TINYJX_COLLECTIVE_TIMEOUT'))
    self.inbox: list = [None] * n_local
    self.outbox: list = [None] * n_local
    self.error: BaseException | None = None
    self.barrier = threading.Barrier(n_local, action=self._combine)

  def run(self, pos: int, node: UOp, vals: tuple) -> np.ndarray:
    """Device `pos`'s result of collective `node` on its input values `vals`."""
    if node.arg[0] != self.axis_name:
      raise AxisNameError(f"{node.op.name.lower()} over axis {node.arg[0]!r} ran inside a pmap over axis "
                          f"{self.axis_name!r}")
    if node.op is Ops.AXIS_INDEX: return np.array(self.first + pos, np.int32)
    self.inbox[pos] = (node, vals[0])
    self._wait(node)
    return self.outbox[pos]

  def _wait(self, node: UOp) -> None:
    try:
      self.barrier.wait(self.timeout)
    except threading.BrokenBarrierError:
      if self.error is not None: raise PeerFailed(str(self.error)) from None   # the failing device raises the cause
      raise CollectiveError(f"{node.op.name.lower()} over axis {self.axis_name!r} waited {self.timeout:g} s for the "
                            "other devices, which did not arrive (one failed, hangs, or runs a different program). "
                            "Set TINYJX_COLLECTIVE_TIMEOUT to wait longer.") from None

  def _combine(self) -> None:
    """Barrier action, run by the last device to arrive while the others wait."""
    try:
      kinds = {(n.op.name.lower(), n.arg, n.dtype.short, n.src[0].shape) for n, _ in self.inbox}
      if len(kinds) != 1:
        seen = sorted(f"{op}{list(arg)} of {dt}{list(shape)}" for op, arg, dt, shape in kinds)
        raise CollectiveError(f"the devices reached different collectives at the same point: {seen}; every device "
                              "must run the same collectives in the same order (a collective inside lax.cond may not)")
      node = self.inbox[0][0]
      values = [v for _, v in self.inbox]
      indices = [self.first + i for i in range(self.n_local)]
      self.outbox = combine(node, values, indices, self.gather)
    except BaseException as e:
      self.error = e
      raise

  def abort(self, pos: int, exc: BaseException) -> None:
    """Device `pos` failed: wake the others with an error instead of letting them wait for it."""
    if self.error is None: self.error = PeerFailed(f"device {self.first + pos} of the pmap failed: "
                                                   f"{type(exc).__name__}: {exc}")
    self.barrier.abort()

_context = threading.local()

@contextlib.contextmanager
def on_device(group: Group, pos: int):
  """Run the block as device `pos` of `group` (pmap wraps each device's run in this)."""
  _context.current = (group, pos)
  try: yield
  finally: _context.current = None

def run(node: UOp, vals) -> np.ndarray:
  """This device's result of collective `node` on input values `vals` (one array, or none for axis_index)."""
  current = getattr(_context, 'current', None)
  if current is None:
    raise CollectiveError(f"{node.op.name.lower()} over axis {node.arg[0]!r} has no devices to talk to: it can only "
                          "be computed inside pmap (or vmap) with that axis_name, not on its own")
  group, pos = current
  return group.run(pos, node, tuple(vals))

array.collective_hook = run   # how the PYTHON device's rule and the compiled collective steps reach this runtime

__all__ = ['psum', 'pmean', 'pmax', 'pmin', 'all_gather', 'psum_scatter', 'ppermute', 'pshuffle', 'all_to_all',
           'axis_index', 'axis_size']
