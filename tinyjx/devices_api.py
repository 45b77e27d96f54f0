"""devices_api: the devices users see (`tinyjx.devices()`, `local_devices()`, `device_count()` ...), the number of
virtual devices, and where an Array lives (`Array.device`, `Array.devices()`).

Each process has `local_device_count()` devices of the default kind (CPU, or PYTHON with TINYJX_DEVICE=PYTHON),
named `CPU:0` ... `CPU:n-1` in the device registry (`tinyjx.devices.get`). Their number comes from
TINYJX_CPU_DEVICES (or `set_cpu_devices(n)`, or `tinyjx.config.update('tinyjx_cpu_devices', n)`), read when
devices are listed, so set it before the first pmap. Virtual devices share the host's memory and cores, but pmap
runs each one on its own thread, so one device's kernels never wait for another's. Across MPI processes
(`tinyjx.distributed`) the device list holds every process's devices: process p's local device i has the global
id p * local_device_count() + i. A `Device` is a small handle (id, platform, process_index); only the devices of
this process (`local_devices()`) can hold this process's arrays.

A pmap result stays split over its devices until read: `shards` maps its graph (a lazy stack of per-device BUFFERs)
to a `PmapSharding`, so a later pmap over the same devices takes the pieces as they are.

`tinyjx.devices` is both the package of device kinds (`tinyjx.devices.get('CPU:3')`) and, as in JAX, the function
that lists the devices: importing this module makes that package callable.
"""
from __future__ import annotations
import sys, types, weakref
from tinyjx import array, devices as devices_mod, distributed, settings, tree_util

class Device:
  """A device as users see it: `tinyjx.devices()[0]` is `CpuDevice(id=0)`.

  `id` is global (unique across processes), `process_index` the process that owns it, `local_index` its number
  there; `name` is its name in the device registry ('CPU:3'), for this process's devices only.

  >>> import tinyjx
  >>> d = tinyjx.local_devices()[0]
  >>> d.id, d.process_index
  (0, 0)
  """
  __slots__ = ('kind', 'process_index', 'local_index', 'id')

  def __init__(self, kind: str, process_index: int, local_index: int, local_count: int):
    self.kind, self.process_index, self.local_index = kind, process_index, local_index
    self.id = process_index * local_count + local_index

  @property
  def platform(self) -> str: return self.kind.lower()
  @property
  def device_kind(self) -> str: return self.kind.lower()
  @property
  def is_local(self) -> bool: return self.process_index == distributed.process_index()

  @property
  def name(self) -> str:
    if not self.is_local:
      raise ValueError(f"{self!r} belongs to process {self.process_index}, and this is process "
                       f"{distributed.process_index()}: only this process's devices (tinyjx.local_devices()) can "
                       "hold its arrays")
    return f"{self.kind}:{self.local_index}"

  def __repr__(self): return f"{self.kind.capitalize()}Device(id={self.id})"
  def __eq__(self, other): return isinstance(other, Device) and (self.kind, self.id) == (other.kind, other.id)
  def __hash__(self): return hash((self.kind, self.id))

# ---------------------------------------------------------------- how many devices, of which kind

def kind_of(backend=None) -> str:
  """The device kind for `backend` (a kind of the device registry, 'cpu' or 'python', or None for the default
  device's kind)."""
  if backend is None: return devices_mod.default_name().split(':')[0].upper()
  kind = str(backend).upper()
  if kind not in devices_mod.KINDS:
    raise ValueError(f"unknown backend {backend!r}; the device kinds are "
                     f"{', '.join(repr(k.lower()) for k in devices_mod.KINDS)}")
  return kind

def local_device_count(backend=None) -> int:
  """The number of devices of this process: for CPU and PYTHON the virtual devices of TINYJX_CPU_DEVICES (fixed by
  `distributed.initialize()`), for CL the OpenCL devices of the platform, for CUDA the driver's GPUs.

  >>> import tinyjx
  >>> tinyjx.local_device_count() >= 1
  True
  """
  physical = devices_mod.physical_count(kind_of(backend))
  if physical is not None: return physical
  n = distributed.fixed_local_count() or settings.get('TINYJX_CPU_DEVICES')
  if not isinstance(n, int) or isinstance(n, bool) or n < 1:
    raise ValueError(f"TINYJX_CPU_DEVICES must be a positive integer, got {n!r}")
  return n

def set_cpu_devices(n: int) -> None:
  """Use `n` virtual CPU devices (the same as TINYJX_CPU_DEVICES=n); call it before the first pmap.

  >>> import tinyjx
  >>> tinyjx.set_cpu_devices(2); tinyjx.local_device_count()
  2
  >>> tinyjx.set_cpu_devices(1)
  """
  if not isinstance(n, int) or isinstance(n, bool) or n < 1:
    raise ValueError(f"set_cpu_devices needs a positive integer, got {n!r}")
  fixed = distributed.fixed_local_count()
  if fixed and n != fixed:
    raise RuntimeError(f"set_cpu_devices({n}) after tinyjx.distributed.initialize() fixed {fixed} devices per "
                       "process; call it before initialize (every process needs the same number)")
  settings.set('TINYJX_CPU_DEVICES', n)

def local_devices(process_index: int | None = None, backend=None) -> list[Device]:
  """The devices of one process (default: this one).

  >>> import tinyjx
  >>> tinyjx.local_devices()[0]
  CpuDevice(id=0)
  """
  p = distributed.process_index() if process_index is None else process_index
  if not 0 <= p < distributed.process_count():
    raise ValueError(f"process_index={p} is out of range: there are {distributed.process_count()} processes")
  kind, n = kind_of(backend), local_device_count(backend)
  return [Device(kind, p, i, n) for i in range(n)]

def devices(backend=None) -> list[Device]:
  """Every device of every process, by global id (`tinyjx.devices()`).

  >>> import tinyjx
  >>> len(tinyjx.devices()) == tinyjx.device_count()
  True
  """
  return [d for p in range(distributed.process_count()) for d in local_devices(p, backend)]

def device_count(backend=None) -> int:
  """The number of devices of all processes together.

  >>> import tinyjx
  >>> tinyjx.device_count() == tinyjx.process_count() * tinyjx.local_device_count()
  True
  """
  return distributed.process_count() * local_device_count(backend)

def by_name(name: str) -> Device:
  """The Device of this process called `name` in the registry ('CPU:3')."""
  kind, index = devices_mod.canonical_name(name).split(':')
  return Device(kind, distributed.process_index(), int(index), local_device_count(kind))

def as_local(device, what: str) -> Device:
  """`device` (a Device or a registry name) as a Device of this process, with a clear error otherwise."""
  if isinstance(device, str): return by_name(device)
  if not isinstance(device, Device):
    raise TypeError(f"{what}: expected a device from tinyjx.devices(), got {type(device).__name__} {device!r}")
  device.name   # raises for another process's device
  return device

# ---------------------------------------------------------------- where arrays live

class PmapSharding:
  """How a pmap result is laid out: piece j (a BUFFER node) on `devices[j]`, stacked along `axis`."""
  __slots__ = ('devices', 'pieces', 'axis')
  def __init__(self, devices: tuple, pieces: tuple, axis: int):
    self.devices, self.pieces, self.axis = devices, pieces, axis
  @property
  def device_set(self) -> set: return set(self.devices)
  def __repr__(self): return f"PmapSharding(devices={list(self.devices)}, axis={self.axis})"

shards: 'weakref.WeakKeyDictionary' = weakref.WeakKeyDictionary()   # stacked graph -> PmapSharding

def pieces_of(x, devs: list, axis) -> list | None:
  """The per-device Buffers of `x` if it is a pmap result split over `devs` along `axis`, else None."""
  sharding = shards.get(x.uop) if isinstance(x, array.Array) else None
  if sharding is None or axis is None or sharding.axis != axis or list(sharding.devices) != list(devs): return None
  return [array.buffers[p.arg[0]] for p in sharding.pieces]

def stack_pieces(pieces: list, devs: list, axis: int, weak: bool = False):
  """An Array stacking the BUFFER nodes `pieces` (one per device of `devs`) along `axis`, lazily: it remembers
  its pieces in `shards`, so a pmap over the same devices takes them as they are."""
  from tinyjx.numpy import base as jnp
  stacked = array.Array(jnp.stack([array.Array(p) for p in pieces], axis=axis).uop, weak)
  shards[stacked.uop] = PmapSharding(tuple(devs), tuple(pieces), axis)
  return stacked

def put_pieces(values: list, devs: list):
  """Stack host values (each an array-like, one per device) as pieces placed on `devs`."""
  from tinyjx.numpy import base as jnp
  arrs = [v if isinstance(v, array.Array) else jnp.asarray(v) for v in values]
  if len({(a.shape, a.dtype) for a in arrs}) != 1:
    kinds = [f"{a.dtype.short}{list(a.shape)}" for a in arrs]
    raise ValueError(f"device_put_sharded: the shards of one leaf must share shape and dtype, got {kinds}")
  bufs = [array.buffers[b.arg[0]] for b in array.realize_uops([a.uop for a in arrs], "device_put_sharded()")]
  pieces = [array.buffer_uop(devices_mod.get(d.name).from_numpy(b.numpy().copy(), b.dtype)) for b, d in zip(bufs, devs)]
  return stack_pieces(pieces, devs, 0, all(a.weak for a in arrs))

def device_put_sharded(shards_list: list, devices: list):
  """Put `shards_list[i]` (a pytree, the same structure for every i) on `devices[i]`; each leaf becomes the stack
  of its shards along a new leading axis, ready to be a pmap argument that stays where it is.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.device_put_sharded([jnp.ones(2)], tinyjx.local_devices()[:1]).shape
  (1, 2)
  """
  devs = [as_local(d, 'device_put_sharded') for d in devices]
  if len(shards_list) != len(devs):
    raise ValueError(f"device_put_sharded got {len(shards_list)} shards for {len(devs)} devices; give one per device")
  return tree_util.tree_map(lambda *leaves: put_pieces(list(leaves), devs), *shards_list)

def device_put_replicated(x, devices: list):
  """A copy of every leaf of `x` on each of `devices`, stacked along a new leading axis (the usual way to give
  every device of a pmap the same parameters).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.device_put_replicated({'w': jnp.ones(3)}, tinyjx.local_devices())['w'].shape[1:]
  (3,)
  """
  devs = [as_local(d, 'device_put_replicated') for d in devices]
  return tree_util.tree_map(lambda leaf: put_pieces([leaf] * len(devs), devs), x)

def array_device(x):
  """`x.device`: the Device holding `x`, or for a pmap result split over devices its PmapSharding (as JAX's
  `.device` gives the sharding of an array on several devices)."""
  sharding = shards.get(x.uop)
  if sharding is not None: return sharding
  return by_name(devices_mod.device_of(x.uop) or devices_mod.default_name())

def array_devices(x) -> set:
  """`x.devices()`: the set of Devices holding (pieces of) `x`."""
  sharding = shards.get(x.uop)
  return sharding.device_set if sharding is not None else {array_device(x)}

# ---------------------------------------------------------------- tinyjx.devices(), callable

class _CallableDevicesModule(types.ModuleType):
  """The `tinyjx.devices` package (device kinds and the registry), callable as JAX's `jax.devices()`."""
  def __call__(self, backend=None) -> list[Device]: return devices(backend)

devices_mod.__class__ = _CallableDevicesModule   # an API shim for `jax.devices()`, not wiring between floors

# what the floors below call at run time (DESIGN section 12: registered once, here)
array.register_placement(types.SimpleNamespace(array_device=array_device, array_devices=array_devices))
distributed.count_local_devices = local_device_count

__all__ = ['Device', 'devices', 'local_devices', 'device_count', 'local_device_count', 'set_cpu_devices',
           'device_put_sharded', 'device_put_replicated']
