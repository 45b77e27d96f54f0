"""devices: the device contract, the registry of device kinds, and realization on a device.

A device kind is one file here with one class. A compiled device implements eight methods (see
`Device`): allocate, free, copy_in, copy_out, compile, load, launch, synchronize. The PYTHON device is
the exception: it interprets a graph with numpy and is the executable spec the others are checked
against. Names are `KIND` or `KIND:index` (`CPU:3`); `get(name)` returns the one instance per name.

Realizing a graph means handing it to `run_graph` of its device: PYTHON evaluates it; a compiled device
asks `lowering_hook` (registered by `tinyjx.lower`, which sits above this layer) to schedule, compile and
run it. `realize` is registered as `tinyjx.array.realize_hook`.
"""
from __future__ import annotations
import importlib
from tinyjx import settings as config, array
from tinyjx.uop import UOp, Ops

class Device:
  """One device. A compiled device implements these eight methods; buffers are opaque handles.

  allocate(nbytes) -> handle; free(handle); copy_in(handle, host_array); copy_out(handle, host_array);
  compile(source) -> binary; load(binary, entry_name) -> program; launch(program, handles, sizes, vals);
  synchronize().
  """
  kind = "?"
  def __init__(self, name: str):
    self.name = name
    self.index = int(name.split(':')[1]) if ':' in name else 0
  def __repr__(self): return f"Device({self.name})"
  @property
  def id(self) -> int: return self.index
  @property
  def platform(self) -> str: return self.kind.lower()
  def run_graph(self, roots: list[UOp]) -> list[array.Buffer]:
    """Compute the concrete graphs `roots` on this device and return one Buffer per root."""
    if lowering_hook is None:
      raise RuntimeError(f"device {self.name} needs the lowering pipeline (import tinyjx.lower) to run graphs")
    return lowering_hook(self, roots)
  def allocate(self, nbytes: int): raise NotImplementedError
  def free(self, handle): raise NotImplementedError
  def copy_in(self, handle, host): raise NotImplementedError
  def copy_out(self, handle, host): raise NotImplementedError
  def compile(self, source: str): raise NotImplementedError
  def load(self, binary, entry: str): raise NotImplementedError
  def launch(self, program, handles, sizes, vals=()): raise NotImplementedError
  def synchronize(self): pass

lowering_hook = None   # set by tinyjx.lower: (device, roots) -> list of Buffers
KINDS: dict[str, str] = {'PYTHON': 'tinyjx.devices.python', 'CPU': 'tinyjx.devices.cpu',
                         'CL': 'tinyjx.devices.cl', 'CUDA': 'tinyjx.devices.cuda'}
_instances: dict[str, Device] = {}

def canonical_name(name: str) -> str:
  name = name.upper()
  return name if ':' in name else name + ':0'

def get(name: str | None = None) -> Device:
  """The device called `name` ('CPU', 'CPU:1', 'PYTHON' ...); None means the default device."""
  name = canonical_name(name or default_name())
  if name not in _instances:
    kind = name.split(':')[0]
    if kind not in KINDS:
      raise ValueError(f"unknown device {name!r}; device kinds are {', '.join(KINDS)}")
    cls = importlib.import_module(KINDS[kind]).DEVICE_CLASS
    _instances[name] = cls(name)
  return _instances[name]

def default_name() -> str:
  """TINYJX_DEVICE if set, else CPU when the compiled CPU device is available, else PYTHON."""
  if name := config.get('TINYJX_DEVICE'): return name
  return 'CPU' if lowering_hook is not None else 'PYTHON'

def device_of(u: UOp) -> str | None:
  """The device name of the first BUFFER below `u`, or None for graphs of constants only."""
  from tinyjx.uop import toposort
  for n in toposort([u]):
    if n.op is Ops.BUFFER: return n.arg[2]
  return None

def realize(roots: list[UOp], device: str | None = None) -> list[array.Buffer]:
  """The array layer's realize hook: run `roots` on `device` (default: where their buffers live)."""
  name = device or next((d for r in roots if (d := device_of(r)) is not None), None)
  return get(name).run_graph(roots)

array.realize_hook = realize
