"""transforms/jit: trace once, compile once, replay (DESIGN section 5).

`jit(f)(*args)` splits the arguments into static values (hashed into the key, passed to `f` as they are) and
dynamic pytree leaves (traced as PARAMs at their avals). The cache key is
`(treedef, avals incl. weak type, static values, device name, codegen knobs)`; the function itself keys the
outer cache (shared by every `jit(f)` of the same `f` and static spec). On a miss jit traces `f` into a jaxpr
and the device compiles it into an Executable (`device.compile_jaxpr`, see docs/internals.md); on a hit it
binds one input Buffer per leaf, runs the Executable and wraps its fresh output Buffers as new Arrays. A new
signature always retraces; a stale trace is never reused.

Under an outer transform (an input whose graph holds a PARAM or a grad TAG, or a function that closes over
such a value) jit does not run an executable: it inlines its jaxpr by substituting the caller's nodes for
its PARAMs, so grad, vmap and jit compose with it in every order.

Closures: a closed-over concrete array becomes a constant of the jaxpr at trace time. As in JAX, the value
seen by the first trace is used until something in the key changes; re-binding the Python variable does
not retrace (pass the array as an argument if it changes).

The hit path (`replay_key`, the table `_Cache.replays`, `Executable.direct_runner`) is a tuple build, a dict lookup
and the device's replay of the kernels: no graph walks, no binding checks, no logging (DEBUG takes the full path).
Host arguments (a training loop's numpy batches, a Python step count or learning rate) take it too: keyed by shape
and dtype (a Python scalar by its type), copied to the device as the full path copies them.
"""
from __future__ import annotations
import functools, inspect, time, weakref
import numpy as np
from tinyjx import array, counters, devices, dtypes, settings, tracing, tree_util
from tinyjx.array import Array, buffer_uop
from tinyjx.devices import nans
from tinyjx.transforms import retrace
from tinyjx.uop import Ops, GroupOp, toposort

FIX = ("mark that argument static with static_argnums/static_argnames (its value must be hashable), or replace "
       "the Python branch on a traced value with lax.cond (or jnp.where for elementwise choices)")
CODEGEN_KNOBS = ('JAX_ENABLE_X64',)          # settings that change the traced program or its code; DEBUG does not
_OUTER_FLAGS = frozenset({'PARAM', 'TAG', 'AXIS_INDEX'})   # an input holding one of these belongs to an outer transform

class StaticArgError(TypeError, ValueError):
  """A static argument cannot be hashed (JAX raises ValueError; tinyjx's error is both kinds)."""

# ---------------------------------------------------------------- the cache

class _Entry:
  """One traced signature: its jaxpr and, once compiled, the device's Executable."""
  __slots__ = ('jaxpr', 'exe', 'inline')
  def __init__(self, jaxpr, inline: bool):
    self.jaxpr, self.exe, self.inline = jaxpr, None, inline

class _Cache:
  """The entries of one function (and static spec), plus the last key and the signatures traced (the latest
  `SIGNATURES_KEPT`), for the miss reasons of DEBUG and jax_explain_cache_misses (transforms/retrace.py).
  `replays` is the hit path's table (see `replay_key`), valid for the settings epoch `replay_epoch`."""
  __slots__ = ('entries', 'last', 'seen', 'warned', 'replays', 'replay_epoch')
  def __init__(self):
    self.entries, self.last, self.seen, self.warned = {}, None, [], False
    self.replays, self.replay_epoch = {}, -1

SIGNATURES_KEPT = 64

_shared: 'weakref.WeakKeyDictionary' = weakref.WeakKeyDictionary()
# Executables by content (jaxpr.key, device, codegen knobs): a new function object with the same program (a lambda
# made in a loop) retraces but does not recompile. Held weakly: an executable lives as long as some entry uses it.
_executables: 'weakref.WeakValueDictionary' = weakref.WeakValueDictionary()

def _cache_for(fun, spec) -> _Cache:
  """The cache shared by every jit of `fun` with this static spec (a private one if `fun` cannot be weakly keyed)."""
  try:
    per_fun = _shared.setdefault(fun, {})
  except TypeError:
    return _Cache()
  return per_fun.setdefault(spec, _Cache())

# ---------------------------------------------------------------- static arguments

def _index_tuple(x, what: str) -> tuple:
  xs = (x,) if isinstance(x, int) else tuple(x if x is not None else ())
  for i in xs:
    if not isinstance(i, int) or isinstance(i, bool):
      raise TypeError(f"jit: {what} must be an int or a tuple of ints, got {x!r}")
  return xs

def _name_tuple(x, what: str) -> tuple:
  xs = (x,) if isinstance(x, str) else tuple(x if x is not None else ())
  for n in xs:
    if not isinstance(n, str): raise TypeError(f"jit: {what} must be a str or a tuple of str, got {x!r}")
  return xs

def _signature(fun):
  try:
    return inspect.signature(fun)
  except (TypeError, ValueError):
    return None

def _static_spec(name: str, sig, nums: tuple, names: tuple) -> tuple[tuple, tuple]:
  """Static positions and names, each completed from the other through the signature (as JAX infers them)."""
  if sig is None: return tuple(sorted(set(nums))), tuple(sorted(set(names)))
  params = list(sig.parameters.values())
  positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  has_varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
  has_varkw = any(p.kind is p.VAR_KEYWORD for p in params)
  for i in nums:
    if not has_varargs and not -len(positional) <= i < len(positional):
      raise ValueError(f"jit({name}) has static_argnums={nums}, but {name} only accepts {len(positional)} "
                       f"positional arguments; use indices in range({len(positional)}) (or negative ones)")
  known = {p.name for p in params if p.kind is not p.VAR_POSITIONAL and p.kind is not p.VAR_KEYWORD}
  if not has_varkw and (bad := set(names) - known):
    raise ValueError(f"jit({name}) has static_argnames {sorted(bad)} that {name} does not take; "
                     f"its parameters are {sorted(known)}")
  nums_out = set(nums) | {i for i, p in enumerate(positional) if p.name in names and p.kind is p.POSITIONAL_OR_KEYWORD}
  names_out = set(names) | {p.name for i, p in enumerate(positional)
                            if i in nums and p.kind is p.POSITIONAL_OR_KEYWORD}
  return tuple(sorted(nums_out)), tuple(sorted(names_out))

def _static_label(k, sig) -> str:
  """How a static key entry reads in messages: the parameter's name, else its position."""
  if isinstance(k, str): return k
  names = list(sig.parameters) if sig is not None else []
  return names[k] if k < len(names) else f"argument {k}"

# ---------------------------------------------------------------- one call, bound

class _Call:
  """One call's arguments: static values by position/name, flat dynamic leaves, and the cache key."""
  __slots__ = ('args', 'kwargs', 'static_pos', 'static_kw', 'leaves', 'treedef', 'device', 'key')

def _aval_text(aval) -> str:
  shape, dt, weak = aval
  return f"{'~' if weak else ''}{dt.short}[{','.join(map(str, shape))}]"

def spec_aval(x, path: str) -> tuple:
  """An aval from an argument or from an abstract spec (anything with .shape and .dtype, e.g. ShapeDtypeStruct)."""
  if not isinstance(x, (Array, np.ndarray, np.generic)) and hasattr(x, 'shape') and hasattr(x, 'dtype'):
    return (tuple(x.shape), dtypes.to_dtype(x.dtype, path), bool(getattr(x, 'weak_type', False)))
  return tracing.aval_of(x, path)

def _is_traced(x) -> bool:
  return isinstance(x, Array) and not x.uop.flags.isdisjoint(_OUTER_FLAGS)

def _leaf_uop(x):
  """The node standing for a dynamic leaf when the jaxpr is inlined into an outer trace."""
  if isinstance(x, Array): return x.uop
  from tinyjx.numpy import base as jnp
  return jnp.asarray(x).uop

_FOREIGN_FLAGS = _OUTER_FLAGS | {op.name for op in GroupOp.Collective}

def _closes_over_a_trace(jaxpr) -> bool:
  """Whether the traced graph holds a value of an outer trace (a foreign PARAM, a grad TAG, a collective)."""
  if all(o.flags.isdisjoint(_FOREIGN_FLAGS) for o in jaxpr.roots): return False
  own = set(jaxpr.params)
  return any(n.op is Ops.TAG or n.op in GroupOp.Collective or (n.op is Ops.PARAM and n not in own)
             for n in toposort(list(jaxpr.roots)))

# ---------------------------------------------------------------- input and output buffers

def host_buffer(data: np.ndarray, dt, dev):
  """A Buffer on device `dev` holding host `data` as dtype `dt` (bfloat16 rounded)."""
  if dt is dtypes.bfloat16: data = dtypes.round_bf16(data.astype(np.float32))
  return dev.from_numpy(np.array(data, dtype=dt.np, order='C'), dt)   # (np.ascontiguousarray makes 0-d arrays 1-d)

def _placed_on(leaves: list) -> str | None:
  """Where a jit without `device=` runs: as in JAX, on the accelerator its arguments were put on (the first one
  whose memory is on a device, not the host's), else on the default device (None). Host arrays (CPU, PYTHON) do
  not pull a computation to their device: the default device (TINYJX_DEVICE) decides."""
  for x in leaves:
    u = x.uop if isinstance(x, Array) else None
    if u is not None and u.op is Ops.BUFFER and isinstance(array.buffers[u.arg[0]], devices.DeviceBuffer):
      return u.arg[2]
  return None

def input_buffers(leaves: list, avals: tuple, dev) -> list:
  """One Buffer on `dev` per dynamic leaf: buffers as they are, lazy graphs realized together, host data copied in."""
  bufs, lazy = [], []
  for i, x in enumerate(leaves):
    u = x.uop if isinstance(x, Array) else None
    if u is None: bufs.append(host_buffer(np.asarray(x), avals[i][1], dev))
    elif u.op is Ops.BUFFER: bufs.append(array.buffers[u.arg[0]])
    elif u.op is Ops.CONST:   # a filled array (jnp.ones) is filled once: the Array keeps the buffer for later calls
      bufs.append(host_buffer(np.full(u.shape, u.arg[0], u.dtype.np), u.dtype, dev))
      x.uop = buffer_uop(bufs[-1])
    else: bufs.append(None); lazy.append(i)
  if lazy:
    done = array.realize_uops([leaves[i].uop for i in lazy], "passing an array to a jitted function")
    for i, b in zip(lazy, done):
      leaves[i].uop = b   # what Array.realize does: the graph is cut to its buffer (no TAG: the input is not traced)
      bufs[i] = array.buffers[b.arg[0]]
  return [b if b.device == dev.name else dev.from_numpy(b.numpy(), b.dtype) for b in bufs]

# ---------------------------------------------------------------- the hit path

def replay_key(args: tuple, kwargs: dict, device: str | None = None) -> tuple | None:
  """The hit path's key of a call whose dynamic leaves are all computed Arrays or host values, with their Buffers (a
  host leaf, a numpy array or scalar or a Python scalar, stands for itself: the replay copies it in); None for any
  other call. Everything `bind` puts in a key is in it or fixed by it: the jit's `device=` (jits of one function
  share a cache), the argument structure (the count of positional arrays, or `tree_util.structure_key`), and per
  leaf its Buffer's `key` (shape, device, dtype name) and its weak type, or a host leaf's shape and dtype (a Python
  scalar's type), from which its aval follows. The device the call runs on and the codegen knobs follow from those
  and the settings epoch."""
  if kwargs: return _tree_replay_key(args, kwargs, device)
  key, bufs = [device, len(args)], []
  for x in args:
    if type(x) is not Array: return _tree_replay_key(args, kwargs, device)
    b = x._buffer or x.realized_buffer()   # (an Array's `_buffer`, when set, is its computed value)
    if b is None: return None
    key.append(b.key)
    key.append(x.weak)
    bufs.append(b)
  return tuple(key), bufs

def _tree_replay_key(args: tuple, kwargs: dict, device: str | None) -> tuple | None:
  """`replay_key` of a call with pytree arguments or keywords: `tree_util.structure_key` (plain tuples, hashed in C)
  stands for the argument structure."""
  leaves: list = []
  try:
    structure = tree_util.structure_key((args, kwargs), leaves)
    hash(structure)
  except TypeError:   # unhashable aux data: such calls take the full path
    return None
  return _leaves_key([device, structure], leaves)

_SCALARS = (bool, int, float, complex)

def _host(x) -> bool:
  """A leaf the hit path copies in: a numpy array or scalar, or a Python scalar (a step count, a learning rate)."""
  return type(x) is np.ndarray or type(x) in _SCALARS or isinstance(x, np.generic)

def _leaves_key(key: list, leaves) -> tuple | None:
  """`replay_key`'s per-leaf part, appended to `key` (which holds the structure). A host leaf stands for itself:
  a numpy array or scalar by its shape and dtype, a Python scalar by its type (weak unless a bool, as `aval_of`)."""
  bufs = []
  for x in leaves:
    if type(x) is Array:
      if (b := x.realized_buffer()) is None: return None
      key.append(b.key)
      key.append(x.weak)
      bufs.append(b)
      continue
    if type(x) is np.ndarray or isinstance(x, np.generic): key += [('host', x.shape, x.dtype), False]
    elif type(x) in _SCALARS: key += [('host', type(x)), type(x) is not bool]
    else: return None
    bufs.append(x)
  return tuple(key), bufs

HIT = (('cache_hits', 1),)

def _replayer(entry: _Entry, runner, hosts: tuple = (), dev=None):
  """The hit path of one cache entry: `replay(buffers)` runs the executable's direct runner on the leaves' buffers
  and returns the outputs as `_execute` does (Arrays whose node is made when first needed), or None when the runner
  declines (then the call takes the full path). The runner counts the hit (HIT) with its kernels. `hosts` holds
  (position, dtype) of the host leaves, copied to `dev` first as `input_buffers` copies them."""
  out_weak, out_tree = entry.jaxpr.out_weak, entry.jaxpr.out_tree
  of_buffer = Array.of_buffer
  if hosts:
    run = runner
    bounds = {i: dtypes.iinfo(dt) for i, dt in hosts if dt.kind in 'iu'}
    def runner(inputs: list):
      inputs = list(inputs)
      for i, dt in hosts:
        x = inputs[i]
        # a Python int past its dtype's range declines: the full path says which argument (`tracing.aval_of`)
        if type(x) is int and i in bounds and not bounds[i].min <= x <= bounds[i].max: return None
        inputs[i] = host_buffer(x, dt, dev)
      return run(inputs)
  if out_tree == tree_util.tree_structure(0):
    weak = out_weak[0]
    def replay_one(inputs: list):
      if array.nan_hook is not None: return None
      bufs = runner(inputs)
      return None if bufs is None else of_buffer(bufs[0], weak)
    return replay_one
  def replay(inputs: list):
    if array.nan_hook is not None: return None
    bufs = runner(inputs)
    if bufs is None: return None
    return tree_util.tree_unflatten(out_tree, [of_buffer(b, w) for b, w in zip(bufs, out_weak)])
  return replay

@functools.lru_cache(None)
def _positional_treedef(n: int):
  """The structure of `n` positional array arguments and no keywords; one object per n, so its hash is computed
  once and cache look-ups compare it by identity."""
  return tree_util.tree_structure((tuple(range(n)), {}))

# ---------------------------------------------------------------- jit

class JitFunction:
  """A jitted function: call it like `f`; `.trace`, `.lower`, `.eval_shape` expose the stages."""

  def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(), donate_argnames=(),
               device=None, inline=False, keep_unused=False):
    if not callable(fun): raise TypeError(f"jit expects a callable, got {type(fun).__name__} {fun!r}")
    functools.update_wrapper(self, fun, updated=())
    self.fun, self._sig = fun, _signature(fun)
    self.label = f"jit({getattr(fun, '__name__', type(fun).__name__)})"
    nums, names = _index_tuple(static_argnums, 'static_argnums'), _name_tuple(static_argnames, 'static_argnames')
    self.static_argnums, self.static_argnames = _static_spec(self.label[4:-1], self._sig, nums, names)
    # donation is accepted for JAX compatibility; the devices here allocate fresh outputs and never reuse inputs
    self.donate_argnums = _index_tuple(donate_argnums, 'donate_argnums')
    self.donate_argnames = _name_tuple(donate_argnames, 'donate_argnames')
    self.device = device if device is None or isinstance(device, str) else device.name
    self.inline, self.keep_unused = inline, keep_unused   # jit always inlines into an outer trace
    self._cache = _cache_for(fun, (self.static_argnums, self.static_argnames))

  def __repr__(self): return f"<{self.label}>"
  def __get__(self, obj, objtype=None):
    """As a method: bind `self` as the first positional argument (count it in static_argnums)."""
    return self if obj is None else functools.partial(self, obj)

  # --- calling ---
  def __call__(self, *args, **kwargs):
    cache = self._cache
    if cache.replays and cache.replay_epoch == settings.epoch() and \
       (found := replay_key(args, kwargs, self.device)) is not None:
      replay = cache.replays.get(found[0])
      out = replay(found[1]) if replay is not None else None
      if out is not None: return out
    if settings.get('NOJIT'): return self.fun(*args, **kwargs)
    call = self.bind(args, kwargs, tracing.aval_of)
    entry = self._entry(call)
    out = self._execute(entry, call)
    self._learn_replay(entry, call, args)
    return out

  def _learn_replay(self, entry: _Entry, call: _Call, args: tuple) -> None:
    """After a call through `bind`: enter it in the hit path's table when a later call with the same `replay_key`
    would do the same work, skipping the binding and the checks (see `replay_key` and `Executable.direct_runner`).
    Not for static arguments (their values key the cache), inside a Context (its knobs are this thread's), while
    DEBUG or NOJIT is on, or for inputs that live on another device than the call runs on."""
    epoch = settings.epoch()
    if epoch is None or self.static_argnums or self.static_argnames or entry.exe is None: return
    if settings.get('DEBUG') or settings.get('NOJIT'): return
    found = replay_key(args, call.kwargs, self.device)
    runner = getattr(entry.exe, 'direct_runner', None)
    if found is None or runner is None: return
    hosts = tuple((i, call.key[1][i][1]) for i, b in enumerate(found[1]) if _host(b))
    if any(not _host(b) and b.device != call.device.name for b in found[1]): return
    if len(found[1]) != len(call.leaves) or any(b is not (x if _host(b) else x.realized_buffer())
                                                for b, x in zip(found[1], call.leaves)):
      return   # (the key's leaves are not the ones bind traced with, in order: never replay such a key)
    if self._cache.replay_epoch != epoch: self._cache.replays, self._cache.replay_epoch = {}, epoch
    key = found[0]
    if key in self._cache.replays: return   # known already (its runner declined this call): no second runner
    runner = runner(HIT)
    if runner is None: return
    self._cache.replays[key] = _replayer(entry, runner, hosts, call.device)

  def bind(self, args: tuple, kwargs: dict, aval_fn) -> _Call:
    call = _Call()
    call.args, call.static_pos, call.static_kw = args, {}, {}
    if self.static_argnums or self.static_argnames: args, kwargs = self._split_static(call, args, kwargs)
    call.kwargs = kwargs
    if not kwargs and all(type(a) is Array for a in args):   # the common call: arrays only, no flattening to do
      call.leaves, call.treedef = list(args), _positional_treedef(len(args))
    else:
      call.leaves, call.treedef = tree_util.tree_flatten((args, kwargs))
    try:
      avals = tuple(aval_fn(x, "argument") for x in call.leaves)
    except (TypeError, OverflowError):   # (again, with each leaf's path in the message)
      paths = self._paths(call)
      avals = tuple(aval_fn(x, p) for x, p in zip(call.leaves, paths))
    statics = ()
    if call.static_pos or call.static_kw:
      named = sorted(call.static_kw.items())
      statics = tuple((k, type(v), v) for k, v in list(call.static_pos.items()) + named)
    call.device = devices.get(self.device or _placed_on(call.leaves))
    call.key = (call.treedef, avals, statics, call.device.name, tuple(settings.get(k) for k in CODEGEN_KNOBS))
    return call

  def _split_static(self, call: _Call, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    n = len(args)
    for i in self.static_argnums:
      if i < -n:
        raise ValueError(f"{self.label}: static_argnums index {i} is out of range for a call with {n} positional "
                         f"arguments; negative indices count from the last positional argument")
      j = i + n if i < 0 else i
      if j < n: call.static_pos[j] = args[j]
    call.static_pos = dict(sorted(call.static_pos.items()))
    call.static_kw = {k: v for k, v in kwargs.items() if k in self.static_argnames}
    dyn_args = tuple(a for i, a in enumerate(args) if i not in call.static_pos)
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in call.static_kw}
    return dyn_args, dyn_kwargs

  def _paths(self, call: _Call) -> list[str]:
    """Readable names of the dynamic leaves (`params['w']`), for errors and DEBUG."""
    return tracing.arg_paths(self.fun, call.args, call.kwargs, skip=set(call.static_pos))

  def _entry(self, call: _Call) -> _Entry:
    """The cache entry for this call's key: looked up on a hit, traced (and kept) on a miss."""
    try:
      entry = self._cache.entries.get(call.key)
    except TypeError:
      self._check_hashable(call)
      raise
    debug = settings.get('DEBUG')
    if entry is not None:
      counters.add('cache_hits')
      if debug >= 1: print(f"{self.label}: hit")
      return entry
    counters.add('cache_misses')
    explaining = debug >= 1 or settings.get('JAX_EXPLAIN_CACHE_MISSES')
    new = retrace.Signature(call.key, self._paths(call))
    if explaining: self._explain_miss(new, call, debug)
    call.device.prepare()               # (one-time set-up, the CPU compiler probe, beside the tracing)
    entry = self.trace_call(call)
    key = (call.treedef.detached(),) + call.key[1:]   # unhashable aux data (a dict) is copied: the caller may mutate it
    self._cache.last = key
    self._remember(retrace.Signature(key, new.paths), explaining)
    if not entry.inline: self._cache.entries[key] = entry   # a graph over an outer trace dies with that trace
    return entry

  def trace_call(self, call: _Call) -> _Entry:
    """Trace the function for the bound call `call` (no cache look-up): the cache entry holding its jaxpr."""
    fun, treedef, static_pos, static_kw, n = self.fun, call.treedef, call.static_pos, call.static_kw, len(call.args)
    def flat_fun(*flat):
      dyn_args, dyn_kwargs = tree_util.tree_unflatten(treedef, list(flat))
      it = iter(dyn_args)
      full = [static_pos[i] if i in static_pos else next(it) for i in range(n)]
      return fun(*full, **dyn_kwargs, **static_kw)
    counters.add('traces')
    jaxpr = tracing.trace_flat(flat_fun, call.key[1], self.label, self._paths(call), FIX)
    jaxpr.in_tree = treedef
    return _Entry(jaxpr, _closes_over_a_trace(jaxpr))

  def _compile(self, entry: _Entry, call: _Call):
    dev, content_key = call.device, (entry.jaxpr.key, call.device.name, call.key[4])
    if (exe := _executables.get(content_key)) is not None:
      if settings.get('DEBUG') >= 1: print(f"{self.label}: reusing the executable of an equal program")
      entry.exe = exe
      return exe
    compile_jaxpr = getattr(dev, 'compile_jaxpr', None)
    if compile_jaxpr is None:
      raise NotImplementedError(f"device {dev.name} cannot compile jitted functions (it has no compile_jaxpr); "
                                "run with TINYJX_DEVICE=CPU or TINYJX_DEVICE=PYTHON")
    t0 = time.perf_counter()
    entry.exe = compile_jaxpr(entry.jaxpr)
    counters.add('compiles')
    if settings.get('DEBUG') >= 1:
      n = len(entry.exe.kernels)
      print(f"{self.label}: compiled {n} kernel{'' if n == 1 else 's'} on {dev.name} "
            f"in {(time.perf_counter() - t0) * 1e3:.1f} ms")
    try:
      _executables[content_key] = entry.exe
    except TypeError:   # an Executable that cannot be weakly referenced is simply not shared
      pass
    return entry.exe

  def _execute(self, entry: _Entry, call: _Call):
    jaxpr, leaves = entry.jaxpr, call.leaves
    if entry.inline or any(_is_traced(x) for x in leaves):
      ins = [_leaf_uop(x) for x in leaves]
      jaxpr.emit_effects(*ins)
      outs = [Array(u, w) for u, w in zip(jaxpr(*ins), jaxpr.out_weak)]
    else:
      exe = entry.exe or self._compile(entry, call)
      bufs = exe.run(input_buffers(leaves, call.key[1], call.device))
      if array.nan_hook is not None: self._check_nans(call, bufs)
      outs = [Array(buffer_uop(b), w) for b, w in zip(bufs, jaxpr.out_weak)]
    return tree_util.tree_unflatten(jaxpr.out_tree, outs)

  def _check_nans(self, call: _Call, bufs: list) -> None:
    """jax_debug_nans/infs: on a bad output, trace again with source lines recorded and run op by op."""
    bad = nans.outputs_bad(bufs)
    if not bad: return
    jaxpr = self.trace_call(call).jaxpr
    raise nans.hunt(jaxpr, [np.asarray(x) for x in call.leaves], self.label, bad[0])

  # --- errors and DEBUG ---
  def _check_hashable(self, call: _Call):
    for k, v in list(call.static_pos.items()) + list(call.static_kw.items()):
      try:
        hash(v)
      except TypeError as e:
        raise StaticArgError(f"{self.label}: static argument {_static_label(k, self._sig)!r} of type "
                             f"{type(v).__name__} is not hashable ({e}); static arguments key the jit cache, so "
                             "make it hashable (e.g. a tuple instead of a list) or pass it as a regular "
                             "(traced) argument") from None

  def _miss_reason(self, call: _Call, old=None) -> str:
    old = self._cache.last if old is None else old
    if old is None: return "first call"
    (tree0, avals0, st0, dev0, cg0), (tree1, avals1, st1, dev1, cg1) = old, call.key
    if cg0 != cg1:
      return ", ".join(f"{k} changed: {a} -> {b}" for k, a, b in zip(CODEGEN_KNOBS, cg0, cg1) if a != b)
    if dev0 != dev1: return f"device changed: {dev0} -> {dev1}"
    if st0 != st1: return _static_reason(st0, st1, self._sig)
    if tree0 != tree1: return f"new argument structure: {_tree_text(tree0)} -> {_tree_text(tree1)}"
    paths = self._paths(call)
    changed = [f"{p} {_aval_text(a)} -> {_aval_text(b)}" for p, a, b in zip(paths, avals0, avals1) if a != b]
    return "new: " + ", ".join(changed)

  def _differences(self, old: 'retrace.Signature', new: 'retrace.Signature') -> list:
    return retrace.differences(old, new, lambda k: _static_label(k, self._sig), _tree_text, CODEGEN_KNOBS)

  def _explain_miss(self, new: 'retrace.Signature', call: _Call, debug: int) -> None:
    """DEBUG>=1 or jax_explain_cache_misses: why this call traces, against the closest signature traced before."""
    seen = self._cache.seen
    if not seen:
      if debug >= 1: print(f"{self.label}: miss (first call)")
      return
    i, diffs = retrace.closest(seen, new, self._differences)
    if debug >= 1: print(f"{self.label}: miss ({self._miss_reason(call, seen[i].key)})")
    text = "; ".join(t for _, t in diffs) or ("the same signature as before: this function closes over a value of an "
                                              "enclosing transform, so it is traced at every call")
    print(f"{self.label}: retrace {len(seen) + 1}: {text} (against earlier signature {i + 1} of {len(seen)})")

  def _remember(self, sig: 'retrace.Signature', explaining: bool) -> None:
    """Keep the traced signature; warn once when there are more than `retrace.MANY` of them (while explaining)."""
    seen = self._cache.seen
    if any(s.key == sig.key for s in seen): return
    seen.append(sig)
    if len(seen) > SIGNATURES_KEPT: del seen[0]
    if explaining and len(seen) > retrace.MANY and not self._cache.warned:
      self._cache.warned = True
      kinds = {k for j in range(1, len(seen)) for k, _ in retrace.closest(seen[:j], seen[j], self._differences)[1]}
      retrace.warn_many(self.label, len(seen), kinds)

  # --- the staged API ---
  def trace(self, *args, **kwargs) -> 'Traced':
    """Stage 1: the jaxpr of `f` at these arguments (arrays or ShapeDtypeStructs). `print(jit(f).trace(x))`."""
    call = self.bind(args, kwargs, spec_aval)
    return Traced(self, self._entry(call), call)

  def lower(self, *args, **kwargs) -> 'Lowered':
    """Stage 2: `jit(f).lower(x)` is `jit(f).trace(x).lower()`; print it to see the kernels."""
    return self.trace(*args, **kwargs).lower()

  def eval_shape(self, *args, **kwargs):
    """Output ShapeDtypeStructs of `f` at these arguments, by tracing only."""
    return self.trace(*args, **kwargs).out_info

  def clear_cache(self) -> None:
    """Forget every traced and compiled signature of this function."""
    self._cache.entries.clear()
    self._cache.last, self._cache.seen, self._cache.warned = None, [], False
    self._cache.replays, self._cache.replay_epoch = {}, -1

  def _cache_size(self) -> int: return len(self._cache.entries)

def _tree_text(treedef) -> str:
  """The structure of (args, kwargs) as `(*, [*])` plus `**{'k': *}` when there are keyword arguments."""
  args, kwargs = (repr(t)[len('PyTreeDef('):-1] for t in treedef.children())
  return args if kwargs == '{}' else f"{args}, **{kwargs}"

def _static_reason(st0: tuple, st1: tuple, sig) -> str:
  old, new = {k: v for k, _, v in st0}, {k: v for k, _, v in st1}
  for k in sorted(set(old) | set(new), key=str):
    if k not in old or k not in new:
      return f"static arg {_static_label(k, sig)} {'added' if k not in old else 'removed'}"
    if (type(old[k]), old[k]) != (type(new[k]), new[k]):
      return f"static arg {_static_label(k, sig)} changed: {old[k]!r} -> {new[k]!r}"
  return "static args changed"

def jit(fun=None, static_argnums=(), static_argnames=(), donate_argnums=(), donate_argnames=(), device=None,
        inline=False, keep_unused=False):
  """Compile `fun` for the device: trace once per signature, then replay the compiled executable.

  Arguments are pytrees of arrays (traced), except those named by `static_argnums`/`static_argnames`, which
  must be hashable and are passed to `fun` as Python values (a new value retraces). Python scalars are
  traced as weakly typed arguments, as in JAX. `donate_*` are accepted and ignored (outputs are always fresh);
  `inline` and `keep_unused` are accepted for compatibility. `jit(f)` keeps `f`'s name and docstring and can be
  used as a decorator, also through `functools.partial(jit, static_argnums=...)`.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> f = tinyjx.jit(lambda x, n: x * n, static_argnums=1)
  >>> f(jnp.arange(3.0), 2).tolist()
  [0.0, 2.0, 4.0]
  """
  if fun is None:
    return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, donate_argnames=donate_argnames, device=device,
                             inline=inline, keep_unused=keep_unused)
  return JitFunction(fun, static_argnums, static_argnames, donate_argnums, donate_argnames, device, inline,
                     keep_unused)

# ---------------------------------------------------------------- stages

def _out_info(jaxpr):
  from tinyjx.tracing import ShapeDtypeStruct
  return tree_util.tree_unflatten(jaxpr.out_tree, [ShapeDtypeStruct(o.shape, o.dtype) for o in jaxpr.outs])

explainer = None   # tinyjx.explain.explain_call, registered by tinyjx.explain when it is imported

class Traced:
  """`jit(f).trace(*args)`: the jaxpr (`.jaxpr`, printed by `str`), `.out_info`, and `.lower()`."""
  def __init__(self, fn: JitFunction, entry: _Entry, call: _Call):
    self._fn, self._entry, self._call = fn, entry, call
  @property
  def jaxpr(self): return self._entry.jaxpr
  @property
  def out_info(self): return _out_info(self._entry.jaxpr)
  def lower(self) -> 'Lowered': return Lowered(self._fn, self._entry, self._call)
  def as_text(self) -> str: return str(self._entry.jaxpr)
  def __str__(self): return self.as_text()
  __repr__ = __str__

class Lowered:
  """`jit(f).lower(*args)`: the program for the device. `as_text()` lists its kernels; `.compile()` builds it.

  A device that can lower without compiling offers `lower_jaxpr(jaxpr)` (printable); otherwise the Executable
  is built here (once: `.compile()` and later calls reuse it) and its description up to the first blank line
  is shown: the kernel list (the generated source after it is what `Compiled` prints).
  """
  def __init__(self, fn: JitFunction, entry: _Entry, call: _Call):
    self._fn, self._entry, self._call = fn, entry, call
    self.device = call.device
  @property
  def jaxpr(self): return self._entry.jaxpr
  @property
  def out_info(self): return _out_info(self._entry.jaxpr)
  def compile(self) -> 'Compiled':
    if self._entry.inline:
      raise ValueError(f"{self._fn.label} closes over a value of an enclosing transform and cannot be compiled "
                       "on its own; call it inside that transform instead")
    exe = self._entry.exe or self._fn._compile(self._entry, self._call)
    return Compiled(self._fn, self._entry, self._call, exe)
  def explain(self):
    """One row per jaxpr equation (source line, transform, kernel, its flops, bytes and time), then the kernels:
    a `tinyjx.explain.Explanation`. `print(jit(f).lower(x).explain())`."""
    if explainer is None: raise RuntimeError("Lowered.explain() needs tinyjx.explain; import tinyjx first")
    return explainer(self._fn, self._call)
  def as_text(self) -> str:
    lower = getattr(self.device, 'lower_jaxpr', None)
    if lower is not None: return str(lower(self._entry.jaxpr))
    summary = str(self.compile().executable).split("\n\n")[0]
    return f"{self._fn.label} lowered for {self.device.name}:\n{summary}"
  def __str__(self): return self.as_text()
  __repr__ = __str__

class Compiled:
  """`jit(f).lower(*args).compile()`: callable with the lowered signature; `as_text()` shows the Executable."""
  def __init__(self, fn: JitFunction, entry: _Entry, call: _Call, exe):
    self._fn, self._entry, self._call, self.executable = fn, entry, call, exe
  @property
  def out_info(self): return _out_info(self._entry.jaxpr)
  def __call__(self, *args, **kwargs):
    call = self._fn.bind(args, kwargs, tracing.aval_of)
    if call.key != self._call.key:
      saved, self._fn._cache.last = self._fn._cache.last, self._call.key
      try:
        reason = self._fn._miss_reason(call)
      finally:
        self._fn._cache.last = saved
      raise TypeError(f"{self._fn.label}: this Compiled was lowered for other arguments ({reason}); "
                      "lower and compile again for these arguments, or call the jitted function itself")
    return self._fn._execute(self._entry, call)
  def as_text(self) -> str: return str(self.executable)
  def __str__(self): return self.as_text()
  __repr__ = __str__

# ---------------------------------------------------------------- related API

def disable_jit(disable: bool = True):
  """Run jitted functions eagerly inside the block (same as the setting NOJIT=1).

  >>> import tinyjx
  >>> with tinyjx.disable_jit():
  ...   tinyjx.jit(lambda x: x + 1)(1.0)
  2.0
  """
  return settings.Context(NOJIT=int(bool(disable)))

def eval_shape(fun, *args, **kwargs):
  """The output shapes and dtypes of `fun(*args, **kwargs)` as a pytree of ShapeDtypeStructs; nothing is computed.

  Arguments may be arrays, scalars or ShapeDtypeStructs.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.eval_shape(lambda x: x.sum(0), jnp.ShapeDtypeStruct((2, 3), jnp.float32))
  ShapeDtypeStruct(shape=(3,), dtype=float32)
  """
  leaves, treedef = tree_util.tree_flatten((args, kwargs))
  paths = tracing.arg_paths(fun, args, kwargs)
  avals = [spec_aval(x, p) for x, p in zip(leaves, paths)]
  def flat_fun(*flat):
    a, kw = tree_util.tree_unflatten(treedef, list(flat))
    return fun(*a, **kw)
  name = f"eval_shape({getattr(fun, '__name__', type(fun).__name__)})"
  return _out_info(tracing.trace_flat(flat_fun, avals, name, paths))

def block_until_ready(x):
  """Compute every concrete Array in the pytree `x` now (in one schedule) and return `x`; traced ones pass through.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.block_until_ready({'a': jnp.ones(2) * 2})['a'].tolist()
  [2.0, 2.0]
  """
  todo = [a for a in tree_util.tree_leaves(x) if isinstance(a, Array) and a.uop.op is not Ops.BUFFER
          and a.uop.is_concrete]
  for a, b in zip(todo, array.realize_uops([a.uop for a in todo], "block_until_ready()")):
    if 'TAG' not in a.uop.flags: a.uop = b
  return x

def device_put(x, device=None):
  """Place every leaf of the pytree `x` on `device` (default: the default device) as a realized Array.

  >>> import tinyjx
  >>> tinyjx.device_put([1.0, 2.0])[1].item()
  2.0
  """
  dev = devices.get(device if device is None or isinstance(device, str) else device.name)
  return tree_util.tree_map(lambda leaf: _put(leaf, dev), x)

def _put(x, dev) -> Array:
  from tinyjx.numpy import base as jnp
  arr = x if isinstance(x, Array) else jnp.asarray(x)
  if not arr.uop.is_concrete: return arr
  (b,) = array.realize_uops([arr.uop], "device_put()")
  buf = array.buffers[b.arg[0]]
  if buf.device != dev.name: b = buffer_uop(dev.from_numpy(np.array(buf.numpy()), buf.dtype))
  return Array(b, arr.weak)
