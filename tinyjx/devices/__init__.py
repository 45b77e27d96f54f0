"""devices: the device contract, the registry of device kinds, and realization on a device.

A device kind is one file here with one `Backend` subclass; `get(name)` returns the one instance per name
(`KIND` or `KIND:index`, e.g. `CPU:3`). A compiled device implements the nine methods of the contract
(`Backend`'s docstring); the lowering (`tinyjx.lower`, a higher layer) renders, compiles and runs programs
through them alone. The PYTHON device is the exception: it interprets graphs with numpy and is the executable
spec the others are checked against.

Realizing a graph means handing it to `run_graph` of its device. For a compiled device that is the
lowering pipeline, which registers itself once with `register_pipeline` when it is imported; `realize` is
what the array layer calls (`tinyjx.array.realize_hook`).
"""
from __future__ import annotations
import importlib
import numpy as np
from tinyjx import settings as config, array
from tinyjx.uop import UOp, Ops

class DeviceBuffer(array.Buffer):
  """An array's memory on a device that is not the host's: a handle from `allocate`, read with `copy_out`."""
  def __init__(self, backend: 'Backend', handle, shape: tuple, dtype):
    super().__init__(backend.name, shape, dtype)
    self.backend, self.handle = backend, handle
  def numpy(self) -> np.ndarray:
    host = np.empty(self.shape, self.dtype.np)
    self.backend.copy_out(self.handle, host)
    return host
  def __del__(self):
    try: self.backend.free(self.handle)
    except Exception: pass   # interpreter shutdown: the device may be gone already

class Backend:
  """One device: what programs run through. A compiled device implements these nine methods (the contract):

    allocate(nbytes) -> handle              device memory
    free(handle)                            give it back
    copy_in(handle, host, offset=0)         host numpy array -> device memory at byte `offset`
    copy_out(handle, host, offset=0)        device memory at byte `offset` -> host numpy array
    compile(source) -> binary               source in the device's dialect to a binary (own toolchain, own cache)
    load(binary, entry) -> program          one entry point of a binary
    arguments(count, handles, base=None)    an argument table of `count` buffer slots: `handles` maps slot ->
                                            handle (or (handle, byte offset)); other slots as in table `base`
    launch(program, args, global_size=None, local_size=None)   run a program on an argument table
    synchronize()                           wait for everything queued

  and says how the lowering should treat it: `renderer` (a dialect name in tinyjx.lower.render.RENDERERS),
  `kernel_shape` ('loops': a loop nest with a parallel outer loop), `vector_bytes` (SIMD width matmul tiles
  for), `host_memory` (True when handles are numpy uint8 arrays in host memory, so runtime steps read and write
  them in place: CPU). `from_numpy` and `wrap` build array Buffers on top of the contract.
  """
  kind = "?"
  renderer: str | None = None
  kernel_shape = "loops"
  vector_bytes = 32
  host_memory = False

  def prepare(self) -> None:
    """Optional: start one-time toolchain set-up in the background; jit calls it on a cache miss before tracing, and
    the lowering before its first pass."""
  def __init__(self, name: str):
    self.name = name
    self.index = int(name.split(':')[1]) if ':' in name else 0
  def __repr__(self): return f"Backend({self.name})"
  @property
  def id(self) -> int: return self.index
  @property
  def platform(self) -> str: return self.kind.lower()

  def run_graph(self, roots: list[UOp]) -> list[array.Buffer]:
    """Compute the concrete graphs `roots` on this device and return one Buffer per root."""
    return pipeline(self).realize(self, roots)
  def compile_jaxpr(self, jaxpr):
    """The jaxpr lowered and compiled for this device: `exe.run(list_of_input_Buffers) -> fresh output Buffers`."""
    return pipeline(self).compile_jaxpr(self, jaxpr)
  def from_numpy(self, data: np.ndarray, dtype) -> array.Buffer:
    """A Buffer on this device holding host `data` (already in `dtype`'s storage type)."""
    handle = self.allocate(max(data.nbytes, 1))
    self.copy_in(handle, np.ascontiguousarray(data))
    return DeviceBuffer(self, handle, data.shape, dtype)
  def wrap(self, handle, shape: tuple, dtype) -> array.Buffer:
    """A Buffer owning `handle` (from `allocate`), holding an array of `shape` and `dtype`."""
    return DeviceBuffer(self, handle, shape, dtype)

  def allocate(self, nbytes: int): raise NotImplementedError
  def free(self, handle): raise NotImplementedError
  def copy_in(self, handle, host, offset: int = 0): raise NotImplementedError
  def copy_out(self, handle, host, offset: int = 0): raise NotImplementedError
  def compile(self, source: str): raise NotImplementedError
  def load(self, binary, entry: str): raise NotImplementedError
  def arguments(self, count: int, handles: dict, base=None): raise NotImplementedError
  def launch(self, program, args, global_size=None, local_size=None): raise NotImplementedError
  def synchronize(self): pass

class Pipeline:
  """What the lowering registers: `compile_jaxpr(backend, jaxpr) -> Executable`, `realize(backend, roots)`."""
  def __init__(self, compile_jaxpr, realize):
    self.compile_jaxpr, self.realize = compile_jaxpr, realize

_pipeline: list = []

def register_pipeline(compile_jaxpr, realize) -> None:
  """Called once by `tinyjx.lower` when it is imported: how compiled devices lower and run programs."""
  _pipeline[:] = [Pipeline(compile_jaxpr, realize)]

def pipeline(backend: Backend) -> Pipeline:
  if not _pipeline:
    raise RuntimeError(f"device {backend.name} needs the lowering pipeline to run programs: import tinyjx (or "
                       "tinyjx.lower) first")
  return _pipeline[0]

KINDS: dict[str, str] = {'PYTHON': 'tinyjx.devices.python', 'CPU': 'tinyjx.devices.cpu',   # kind -> its module
                         'CL': 'tinyjx.devices.cl', 'CUDA': 'tinyjx.devices.cuda'}
_instances: dict[str, Backend] = {}

def canonical_name(name: str) -> str:
  name = name.upper()
  return name if ':' in name else name + ':0'

def get(name: str | None = None) -> Backend:
  """The device called `name` ('CPU', 'CPU:1', 'PYTHON' ...); None means the default device."""
  name = canonical_name(name or default_name())
  if name not in _instances:
    kind = name.split(':')[0]
    if kind not in KINDS:
      raise ValueError(f"unknown device {name!r}; device kinds are {', '.join(KINDS)}")
    cls = importlib.import_module(KINDS[kind]).DEVICE_CLASS
    _instances[name] = cls(name)
  return _instances[name]

def physical_count(kind: str) -> int | None:
  """How many devices of `kind` the machine has, for kinds with real devices (CL, CUDA); None for the virtual ones
  (CPU, PYTHON: as many as TINYJX_CPU_DEVICES asks for)."""
  count = getattr(importlib.import_module(KINDS[kind]), 'device_count', None)
  return None if count is None else count()

def default_name() -> str:
  """TINYJX_DEVICE if set, else CPU when the compiled CPU device is available (a C compiler), else PYTHON."""
  if name := config.get('TINYJX_DEVICE'): return name
  if not _pipeline: return 'PYTHON'
  return 'CPU' if importlib.import_module(KINDS['CPU']).available() else 'PYTHON'

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
