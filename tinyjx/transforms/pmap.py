"""transforms/pmap: `pmap` (DESIGN section 8); the collectives' rules under vmap and grad are in collective_rules.py.

`pmap(f, axis_name)(*args)` runs `f` once per device on one entry of the mapped axis of its arguments:
1. flatten the arguments (`static_broadcasted_argnums` are hashed into the cache key and passed as they are); the
   per-device avals drop the mapped axis;
2. trace `f` once at those avals, with the axis pushed on `batching.axis_stack` (collectives find its size there),
   and compile the jaxpr once per device kind: the virtual devices of one kind share one Executable;
3. give each device its entry of every mapped argument (the pieces of an earlier pmap result over the same devices
   are used as they are; unmapped arguments are shared, not copied) and run the executable on every device at
   once, one worker thread per device, each inside `collectives.on_device`, where its collectives meet the
   other devices' (collectives.py has the runtime);
4. return each output as a lazy stack of the per-device result buffers: nothing moves until it is read, and
   `devices_api.shards` remembers the pieces for the next pmap.

Across MPI processes (tinyjx.distributed) the axis spans every process's devices: each process passes its local
shard (mapped axis = local_device_count(), as in JAX), the processes first agree on the signature (a clear error on
every process if they differ), and collectives exchange values through MPI.

pmap means vmap with an axis name, one entry per device. Under an outer transform (an argument traced by jit, vmap
or an enclosing pmap, or tagged by grad) pmap *is* `vmap(f, in_axes, out_axes, axis_name=...)`: its collectives go
through the batch rules below, so grad of a pmapped function differentiates ordinary ops.

Collective rules, one entry per op in each table:
- batch: a collective over the axis being vmapped now acts across the batch dim (psum becomes a REDUCE, and of an
  unbatched x, x * size); a collective over an enclosing axis is rebuilt over the batched operand;
- vjp: psum <-> psum, all_gather <-> psum_scatter, ppermute <-> the inverse permutation, all_to_all <-> the same with
  split and concat swapped (JAX's rules); pmax and pmin give the summed cotangent to the devices that hold the
  extreme, split among ties (JAX defines no rule for them; this is its reduce_max rule across devices);
- jvp: the linear collectives apply themselves to the tangent; pmax and pmin take the tangent where the extreme is.
"""
from __future__ import annotations
import concurrent.futures, functools, threading, weakref
import numpy as np
from tinyjx import array, collectives, counters, devices as devices_mod, devices_api, distributed
from tinyjx import settings, tracing, tree_util
from tinyjx.array import Array, buffer_uop
from tinyjx.collectives import PeerFailed
from tinyjx.transforms import batching
from tinyjx.uop import UOp, Ops, toposort

# ---------------------------------------------------------------- running on devices: one worker thread each

_workers: dict = {}
_submit_lock = threading.Lock()   # every pmap queues its devices' runs in one order, so two calls never cross

def worker(name: str) -> concurrent.futures.ThreadPoolExecutor:
  if name not in _workers:
    _workers[name] = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"tinyjx-{name}")
  return _workers[name]

def run_one(exe, inputs: list, group, pos: int, knobs: dict) -> list:
  try:
    with settings.Context(**knobs), collectives.on_device(group, pos): return exe.run(inputs)
  except BaseException as e:
    group.abort(pos, e)
    raise

def run_on_devices(exes: list, inputs: list, group, names: list) -> list:
  """Run `exes[d]` on every device d at once (inputs[d] on device names[d]); one list of output Buffers per device.
  If a device fails, its own error is raised (the others only report that it failed)."""
  knobs = settings.scoped()   # the caller's Contexts hold in the worker threads too (DEBUG, device knobs ...)
  with _submit_lock:
    futures = [worker(name).submit(run_one, exe, ins, group, pos, knobs)
               for pos, (exe, name, ins) in enumerate(zip(exes, names, inputs))]
  results, errors = [], []
  for f in futures:
    try: results.append(f.result())
    except BaseException as e: errors.append(e)
  if errors: raise next((e for e in errors if not isinstance(e, PeerFailed)), errors[0])
  for bufs, name in zip(results, names):   # host memory: one executable ran for every virtual device
    for b in bufs:
      if not isinstance(b, devices_mod.DeviceBuffer): b.device = name
  return results

# ---------------------------------------------------------------- pmap

FIX = ("inside pmap each device traces one entry of the mapped axis, so a Python branch on its value cannot pick "
       "one path for all of them; use jnp.where or lax.cond, or pass the argument with "
       "static_broadcasted_argnums if it is a Python value")
_OUTER_FLAGS = frozenset({'PARAM', 'TAG'})
# (jaxpr.key, device kind, x64) -> Executable: equal programs share one, for as long as some pmap uses it
_executables: 'weakref.WeakValueDictionary' = weakref.WeakValueDictionary()

counters.define('pmap_traces', "Python functions traced by pmap")
counters.define('pmap_compiles', "executables built for pmap (one per program and device kind)")

class _Entry:
  __slots__ = ('jaxpr', 'exe')
  def __init__(self, jaxpr, exe): self.jaxpr, self.exe = jaxpr, exe

def closes_over_a_trace(jaxpr) -> bool:
  """Whether the traced graph holds a value of an enclosing transform (a foreign PARAM or a grad TAG)."""
  if all(o.flags.isdisjoint(_OUTER_FLAGS) for o in jaxpr.outs): return False
  own = set(jaxpr.params)
  return any(n.op is Ops.TAG or (n.op is Ops.PARAM and n not in own) for n in toposort(list(jaxpr.outs)))

def aval_text(aval) -> str:
  shape, dt, weak = aval
  return f"{'~' if weak else ''}{dt.short}[{','.join(map(str, shape))}]"

class PmapFunction:
  """A pmapped function: call it like `f`, with the mapped axis (one entry per device) added to its arguments."""

  def __init__(self, fun, axis_name, in_axes, out_axes, static_broadcasted_argnums, devices, backend, axis_size):
    if not callable(fun): raise TypeError(f"pmap expects a callable, got {type(fun).__name__} {fun!r}")
    functools.update_wrapper(self, fun, updated=())
    self.fun, self.axis_name, self.in_axes, self.out_axes = fun, axis_name, in_axes, out_axes
    nums = static_broadcasted_argnums
    self.static = (nums,) if isinstance(nums, int) else tuple(nums)
    self.devices = None if devices is None else list(devices)
    self.backend, self.axis_size = backend, axis_size
    self.name = f"pmap({getattr(fun, '__name__', type(fun).__name__)})"
    self._cache: dict = {}

  def __repr__(self): return f"<{self.name}>"

  def __call__(self, *args, **kwargs):
    statics = self._statics(args)
    dyn = tuple(a for i, a in enumerate(args) if i not in statics)
    leaves, treedef = tree_util.tree_flatten((dyn, kwargs))
    if any(isinstance(x, Array) and not x.uop.flags.isdisjoint(_OUTER_FLAGS) for x in leaves):
      return self._as_vmap(args, kwargs, statics)
    paths = tracing.arg_paths(self.fun, args, kwargs, skip=statics)
    avals = [tracing.aval_of(x, p) for x, p in zip(leaves, paths)]
    spec = self._flat_axes(dyn, kwargs)
    axes = [None if a is None else self._axis(av[0], a, p) for av, a, p in zip(avals, spec, paths)]
    n = self._size(avals, axes, paths)
    devs, size, first = self._place(n)
    per_device = tuple(av if a is None else (av[0][:a] + av[0][a + 1:],) + av[1:] for av, a in zip(avals, axes))
    static_key = tuple((i, type(v), v) for i, v in sorted(statics.items()))
    key = (treedef, per_device, tuple(axes), static_key, tuple(devs), size, settings.get('JAX_ENABLE_X64'))
    if distributed.process_count() > 1: self._agree(paths, per_device, axes, statics)
    entry = self._entry(key, per_device, paths, treedef, statics, len(args), devs, size)
    if entry is None: return self._as_vmap(args, kwargs, statics)
    group = collectives.Group(self.axis_name, size, first, len(devs), self._gather())
    names = [d.name for d in devs]
    results = run_on_devices(entry.exe, self._inputs(leaves, axes, devs), group, names)
    return self._outputs(entry.jaxpr, results, devs)

  # --- arguments ---
  def _statics(self, args: tuple) -> dict:
    out = {}
    for i in self.static:
      if not -len(args) <= i < len(args):
        raise ValueError(f"{self.name}: static_broadcasted_argnums index {i} is out of range for a call with "
                         f"{len(args)} positional arguments")
      j = i % len(args)
      try:
        hash(args[j])
      except TypeError as e:
        raise TypeError(f"{self.name}: static argument {j} of type {type(args[j]).__name__} is not hashable ({e}); "
                        "static arguments key the cache, so pass a hashable value (a tuple, not a list)") from None
      out[j] = args[j]
    return out

  def _flat_axes(self, dyn: tuple, kwargs: dict) -> list:
    in_axes = self.in_axes
    if isinstance(in_axes, (tuple, list)) and self.static and len(in_axes) == len(dyn) + len(self.static):
      in_axes = tuple(a for i, a in enumerate(in_axes) if i not in {j % (len(in_axes)) for j in self.static})
    try:
      return batching.flat_in_axes(in_axes, dyn, kwargs)
    except (ValueError, TypeError) as e:
      raise type(e)(str(e).replace('vmap', 'pmap')) from None

  def _axis(self, shape: tuple, axis: int, path: str) -> int:
    if not -len(shape) <= axis < len(shape):
      raise ValueError(f"{self.name} was asked to map argument {path} along axis {axis}, but its shape is {shape}; "
                       "pass in_axes=None for arguments that are the same on every device")
    return axis % len(shape)

  def _size(self, avals, axes, paths) -> int:
    sizes = [(av[0][a], f"axis {a} of {p} of shape {av[0]}") for av, a, p in zip(avals, axes, paths) if a is not None]
    if self.axis_size is not None: sizes.insert(0, (int(self.axis_size), "the axis_size argument"))
    if not sizes:
      raise ValueError(f"{self.name} needs at least one mapped argument (in_axes not None) or axis_size=...")
    if len({s for s, _ in sizes}) > 1:
      lines = "\n".join(f"  * size {s}: {what}" for s, what in sizes)
      raise ValueError(f"{self.name} got inconsistent sizes for the mapped axes:\n{lines}\nEvery mapped axis must "
                       "have one size (the number of devices); fix in_axes or the arguments' shapes.")
    if sizes[0][0] < 1: raise ValueError(f"{self.name} cannot map an axis of size 0 ({sizes[0][1]})")
    return sizes[0][0]

  def _place(self, n: int) -> tuple:
    """(local devices to run on, size of the whole axis, global position of the first local one)."""
    kind = devices_api.kind_of(self.backend)
    nprocs, local = distributed.process_count(), devices_api.local_devices(backend=kind)
    if self.devices is not None:
      if nprocs > 1:
        raise NotImplementedError(f"{self.name}: devices=... is not supported across processes; leave it None to "
                                  "map over every process's devices")
      if n != len(self.devices):
        raise ValueError(f"{self.name}: the mapped axis has size {n}, but devices= lists {len(self.devices)} "
                         f"devices {self.devices}; map an axis of size {len(self.devices)} or pass {n} devices")
      return [devices_api.as_local(d, self.name) for d in self.devices], n, 0
    if nprocs > 1:
      if n != len(local):
        raise ValueError(f"{self.name}: the mapped axis has size {n} on process {distributed.process_index()}, but "
                         f"across processes each process passes one entry per local device: local_device_count() "
                         f"is {len(local)} ({nprocs * len(local)} devices in all)")
      return local, nprocs * n, distributed.process_index() * n
    if n > len(local):
      raise ValueError(f"{self.name}: the mapped axis has size {n}, but there {'is' if len(local) == 1 else 'are'} "
                       f"only {len(local)} {kind} device{'' if len(local) == 1 else 's'}. Map at most {len(local)} "
                       f"entries, or configure more virtual devices before first use: TINYJX_CPU_DEVICES={n} or "
                       f"tinyjx.set_cpu_devices({n})")
    return local[:n], n, 0

  def _agree(self, paths, per_device, axes, statics) -> None:
    lines = [f"{p}: {aval_text(av)}{'' if a is None else f' mapped at axis {a}'}"
             for p, av, a in zip(paths, per_device, axes)]
    lines += [f"static argument {i} = {v!r}" for i, v in sorted(statics.items())]
    distributed.check_same(f"{self.name} over axis {self.axis_name!r} with " + "; ".join(lines), self.name)

  # --- tracing and compiling ---
  def _entry(self, key, per_device, paths, treedef, statics, nargs, devs, size):
    entry = self._cache.get(key)
    if entry is not None:
      if settings.get('DEBUG') >= 1: print(f"{self.name}: hit")
      return entry
    if settings.get('DEBUG') >= 1: print(f"{self.name}: miss, tracing for {len(devs)} of {size} devices")
    fun = self.fun
    def flat_fun(*flat):
      dyn, kw = tree_util.tree_unflatten(treedef, list(flat))
      it = iter(dyn)
      return fun(*[statics[i] if i in statics else next(it) for i in range(nargs)], **kw)
    counters.add('pmap_traces')
    with batching.axis_frame(self.axis_name, size):
      jaxpr = tracing.trace_flat(flat_fun, per_device, self.name, paths, FIX)
    if closes_over_a_trace(jaxpr): return None
    entry = _Entry(jaxpr, [self._compile(jaxpr, d) for d in devs])
    self._cache[(key[0].detached(),) + key[1:]] = entry   # unhashable aux data is copied: callers may mutate it
    return entry

  def _compile(self, jaxpr, dev):
    """One executable per device kind where devices share the host's memory (virtual CPU devices), else one per
    device (an OpenCL program and its buffers belong to one device's context)."""
    backend = devices_mod.get(dev.name)
    content = (jaxpr.key, dev.kind if backend.host_memory else dev.name, settings.get('JAX_ENABLE_X64'))
    exe = _executables.get(content)
    if exe is None:
      counters.add('pmap_compiles')
      exe = _executables[content] = backend.compile_jaxpr(jaxpr)
    return exe

  def _gather(self):
    if distributed.process_count() == 1: return None
    what = f"a collective of {self.name} over axis {self.axis_name!r}"
    return lambda stack: distributed.allgather_array(stack, what).reshape((-1,) + stack.shape[1:])

  def _as_vmap(self, args: tuple, kwargs: dict, statics: dict):
    """Under an outer transform pmap is vmap with the axis name (one process: the axis is not split over processes)."""
    if distributed.process_count() > 1:
      raise NotImplementedError(f"{self.name} under another transform (grad, vmap or jit of a pmapped function, or a "
                                "pmap that closes over a traced value) is not supported across processes; put the "
                                "transform inside the pmapped function instead (e.g. pmap(grad(loss)))")
    in_axes = self.in_axes
    if isinstance(in_axes, (tuple, list)) and statics and len(in_axes) == len(args):
      in_axes = tuple(a for i, a in enumerate(in_axes) if i not in statics)
    def dynamic(*dyn, **kw):
      it = iter(dyn)
      return self.fun(*[statics[i] if i in statics else next(it) for i in range(len(args))], **kw)
    dyn = tuple(a for i, a in enumerate(args) if i not in statics)
    vmapped = batching.vmap(dynamic, in_axes, self.out_axes, axis_name=self.axis_name, axis_size=self.axis_size)
    return vmapped(*dyn, **kwargs)

  # --- buffers in and out ---
  def _inputs(self, leaves: list, axes: list, devs: list) -> list:
    """One list of input Buffers per device."""
    per_device = [[None] * len(leaves) for _ in devs]
    hosts = host_values([x for x, a in zip(leaves, axes) if devices_api.pieces_of(x, devs, a) is None])
    for i, (x, a) in enumerate(zip(leaves, axes)):
      pieces = devices_api.pieces_of(x, devs, a)
      if pieces is None:
        buf = hosts.pop(0)
        pieces = [buf] * len(devs) if a is None else [split(buf, a, j, d) for j, d in enumerate(devs)]
      for d, piece in enumerate(pieces): per_device[d][i] = piece
    return per_device

  def _outputs(self, jaxpr, results: list, devs: list):
    per_device = [Array(u) for u in jaxpr.outs]
    spec, spec_paths = batching.out_axes_leaves(self.out_axes, tree_util.tree_unflatten(jaxpr.out_tree, per_device))
    outs = []
    for i, (o, axis, path, weak) in enumerate(zip(jaxpr.outs, spec, spec_paths, jaxpr.out_weak)):
      pieces = [buffer_uop(r[i]) for r in results]
      if axis is None:
        outs.append(Array(pieces[0], weak))
        continue
      if not -(o.ndim + 1) <= axis <= o.ndim:
        raise ValueError(f"{self.name}: {path}={axis} is out of bounds for an output of rank {o.ndim + 1} "
                         "(mapped axis included)")
      outs.append(devices_api.stack_pieces(pieces, devs, axis % (o.ndim + 1), weak))
    return tree_util.tree_unflatten(jaxpr.out_tree, outs)

def host_values(xs: list) -> list:
  """A Buffer with the value of each argument (lazy arrays computed together, host data copied in once)."""
  from tinyjx.numpy import base as jnp
  arrs = [x if isinstance(x, Array) else jnp.asarray(x) for x in xs]
  done = array.realize_uops([a.uop for a in arrs], "passing an array to a pmapped function")
  for a, b in zip(arrs, done):
    if 'TAG' not in a.uop.flags: a.uop = b   # as Array.realize: the graph is cut to its buffer
  return [array.buffers[b.arg[0]] for b in done]

def split(buf, axis: int, j: int, dev):
  """Entry j of `buf` along `axis`, as a Buffer of device `dev`."""
  piece = np.take(buf.numpy(), j, axis=axis)
  piece = np.ascontiguousarray(piece).reshape(piece.shape)   # (ascontiguousarray makes 0-d arrays 1-d)
  return devices_mod.get(dev.name).from_numpy(piece, buf.dtype)

def pmap(fun=None, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(), devices=None,
         backend=None, axis_size=None, donate_argnums=(), global_arg_shapes=None):
  """Run `fun` on several devices at once, one entry of the mapped axis per device (SPMD), with collectives
  (`lax.psum` ...) over `axis_name` between them.

  The mapped axis of the arguments (`in_axes`, as in vmap: an int, None for an argument every device shares, or a
  pytree prefix) must have at most `local_device_count()` entries (`devices=` picks the devices; across MPI
  processes each process passes one entry per local device). Outputs get the mapped axis at `out_axes` (None: the
  value of the first device) and stay on their devices until read. `static_broadcasted_argnums` are passed as
  Python values (hashable; a new value retraces). The function is traced once per signature and compiled once per
  device kind. Inside jit, vmap or grad, pmap runs as `vmap(fun, in_axes, out_axes, axis_name=axis_name)`, which
  means the same. `donate_argnums` and `global_arg_shapes` are accepted for JAX compatibility and ignored.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> n = tinyjx.local_device_count()
  >>> tinyjx.pmap(lambda x: x / lax.psum(x, 'i'), axis_name='i')(jnp.ones(n)).tolist() == [1 / n] * n
  True
  """
  if fun is None:
    return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                             static_broadcasted_argnums=static_broadcasted_argnums, devices=devices, backend=backend,
                             axis_size=axis_size, donate_argnums=donate_argnums)
  return PmapFunction(fun, axis_name, in_axes, out_axes, static_broadcasted_argnums, devices, backend, axis_size)

__all__ = ['pmap']
