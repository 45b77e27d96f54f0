"""CPU device: kernels in C, compiled by the system compiler into one shared library per program,
called through ctypes, the outer loop parallel with OpenMP.

Buffers are `NumpyBuffer`s (host memory owned by numpy), so moving data between CPU and PYTHON costs
nothing and kernels receive plain pointers. The lowering pipeline (tinyjx.lower, a higher layer) registers
`compile_hook` (jaxpr -> Executable) and `devices.lowering_hook` (eager realization) when it is imported.

>>> import numpy as np, tinyjx
>>> from tinyjx import devices
>>> cpu = devices.get('CPU')
>>> cpu.from_numpy(np.arange(3.0, dtype=np.float32), tinyjx.dtypes.float32).numpy()
array([0., 1., 2.], dtype=float32)
"""
from __future__ import annotations
import ctypes
import numpy as np
from tinyjx import devices
from tinyjx.devices import Device
from tinyjx.devices.python import NumpyBuffer

compile_hook = None   # set by tinyjx.lower: (device, jaxpr) -> Executable

class CPUDevice(Device):
  """The compiled CPU device. The eight device methods work on numpy-owned host memory."""
  kind = "CPU"

  def allocate(self, nbytes: int) -> np.ndarray: return np.empty(nbytes, np.uint8)
  def free(self, handle) -> None: pass
  def copy_in(self, handle: np.ndarray, host: np.ndarray) -> None: np.copyto(handle, host.reshape(-1).view(np.uint8))
  def copy_out(self, handle: np.ndarray, host: np.ndarray) -> None: np.copyto(host.reshape(-1).view(np.uint8), handle)
  def compile(self, source: str):
    """A loaded shared library built from C `source` (through the disk cache)."""
    from tinyjx.lower.compile import load_library
    return load_library(source)
  def load(self, binary, entry: str): return getattr(binary, entry)
  def launch(self, program, handles, sizes=(), vals=()) -> None:
    ptrs = (ctypes.c_void_p * max(len(handles), 1))(*[h.ctypes.data for h in handles])
    program(ptrs)

  def from_numpy(self, data: np.ndarray, dtype) -> NumpyBuffer:
    """A buffer holding `data` (already in `dtype`'s storage type): no copy when it is C-contiguous and owned."""
    if not (data.flags.c_contiguous and data.flags.owndata and data.flags.aligned): data = np.array(data, order='C')
    return NumpyBuffer(self.name, data, dtype)

  def compile_jaxpr(self, jaxpr):
    """The jaxpr lowered and compiled: `exe.run(list_of_input_Buffers) -> list of fresh output Buffers`."""
    if compile_hook is None: raise RuntimeError("the CPU device needs the lowering pipeline: import tinyjx.lower")
    return compile_hook(self, jaxpr)

  def run_graph(self, roots):
    if devices.lowering_hook is None:
      from tinyjx.lower.compile import find_compiler
      find_compiler()   # raises the error that says how to install a compiler
    return super().run_graph(roots)

DEVICE_CLASS = CPUDevice
