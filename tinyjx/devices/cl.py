"""CL device: OpenCL C kernels, built by the OpenCL driver, through ctypes to `libOpenCL.so.1` (no pyopencl).

Each `CL:i` is device i of the first OpenCL platform that has a device (TINYJX_CL_PLATFORM picks another by number).
A handle is a `cl_mem`; an argument table is a list with one `(cl_mem, byte offset)` per buffer slot (an
intermediate is a region of the executable's arena, so every kernel takes a base pointer and an offset per buffer);
a program is one `cl_kernel` of a built program, and `launch` sets its arguments and enqueues it on the device's
in-order queue over its global size, in work groups of its local size (both chosen by the lowering,
lower/optimize_gpu.py, from the device's `max_local_size`, `local_memory_size` and `local_multiple`). Copies to the
device are blocking writes, copies back blocking reads (the queue is in order, so a read sees every kernel queued
before it); kernels of one run are queued back to back with no host synchronization between them, and `synchronize`
is `clFinish`.

Programs are cached on disk like the CPU device's libraries (`diskcache`): the first build of a source keeps
the driver's program binary (`clGetProgramInfo(CL_PROGRAM_BINARIES)`) under a key of (source, platform,
device, driver version, build options), so a second process loads the binary instead of compiling. A build
that fails raises `CLBuildError` with the driver's build log and the path of the source.

On the CPU, Debian's `pocl-opencl-icd` and `ocl-icd-libopencl1` packages provide a platform (PoCL).
"""
from __future__ import annotations
import ctypes, hashlib, os, threading
import numpy as np
from tinyjx import settings as config
from tinyjx.devices import Backend, diskcache

class NoOpenCLError(RuntimeError):
  """No OpenCL library, platform or device is available."""

class CLBuildError(RuntimeError):
  """The OpenCL driver rejected a program's source."""

class CLError(RuntimeError):
  """An OpenCL call returned an error code (`.code`)."""
  def __init__(self, message: str, code: int = 0):
    super().__init__(message)
    self.code = code

SUCCESS, BUILD_PROGRAM_FAILURE = 0, -11
DEVICE_TYPE_ALL = 0xFFFFFFFF
PLATFORM_NAME, DEVICE_NAME, DRIVER_VERSION = 0x0902, 0x102B, 0x102D
DEVICE_EXTENSIONS, DEVICE_MAX_WORK_GROUP_SIZE, DEVICE_LOCAL_MEM_SIZE, DEVICE_TYPE = 0x1030, 0x1004, 0x1023, 0x1000
DEVICE_TYPE_GPU = 4
MEM_READ_WRITE = 1
OUT_OF_MEMORY = (-4, -5, -6, -61)   # mem object allocation failure, out of resources, of host memory, bad size
PROGRAM_BUILD_LOG, PROGRAM_BINARY_SIZES, PROGRAM_BINARIES = 0x1183, 0x1165, 0x1166
BUILD_OPTIONS = b"-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt"   # results match the CPU's
INSTALL_HINT = ("install an OpenCL driver (Debian/Ubuntu: `apt-get install pocl-opencl-icd ocl-icd-libopencl1` runs "
                "OpenCL on the CPU), or choose another device with TINYJX_DEVICE=CPU or TINYJX_DEVICE=PYTHON")

_lib: list = []

def library() -> ctypes.CDLL:
  """libOpenCL with the argument types of the calls used here (loaded once)."""
  if _lib: return _lib[0]
  try:
    lib = ctypes.CDLL('libOpenCL.so.1')
  except OSError as e:
    raise NoOpenCLError(f"the CL device needs libOpenCL.so.1, which could not be loaded ({e}); {INSTALL_HINT}") from None
  P, U, S, Z = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int32)
  sig = {'clGetPlatformIDs': [U, P, P], 'clGetDeviceIDs': [P, ctypes.c_uint64, U, P, P],
         'clGetPlatformInfo': [P, U, S, P, P], 'clGetDeviceInfo': [P, U, S, P, P],
         'clCreateContext': [P, U, P, P, P, Z], 'clCreateCommandQueue': [P, P, ctypes.c_uint64, Z],
         'clCreateBuffer': [P, ctypes.c_uint64, S, P, Z], 'clReleaseMemObject': [P],
         'clEnqueueWriteBuffer': [P, P, U, S, S, P, U, P, P], 'clEnqueueReadBuffer': [P, P, U, S, S, P, U, P, P],
         'clCreateProgramWithSource': [P, U, P, P, Z], 'clCreateProgramWithBinary': [P, U, P, P, P, P, Z],
         'clBuildProgram': [P, U, P, ctypes.c_char_p, P, P], 'clGetProgramBuildInfo': [P, P, U, S, P, P],
         'clGetProgramInfo': [P, U, S, P, P], 'clCreateKernel': [P, ctypes.c_char_p, Z],
         'clSetKernelArg': [P, U, S, P], 'clEnqueueNDRangeKernel': [P, P, U, P, P, P, U, P, P],
         'clFinish': [P]}
  for name, args in sig.items():
    fn = getattr(lib, name)
    fn.argtypes = args
    fn.restype = P if name.startswith('clCreate') else ctypes.c_int32
  _lib.append(lib)
  return lib

def check(code: int, what: str) -> None:
  if code != SUCCESS: raise CLError(f"OpenCL {what} failed with error {code}", code)

def created(fn, *args, what: str):
  """Call a clCreate* function (its last argument is the error code) and return the new object."""
  err = ctypes.c_int32(0)
  out = fn(*args, ctypes.byref(err))
  check(err.value, what)
  return out

def info_text(fn, obj, param: int) -> str:
  size = ctypes.c_size_t(0)
  check(fn(obj, param, 0, None, ctypes.byref(size)), "info query")
  buf = ctypes.create_string_buffer(size.value)
  check(fn(obj, param, size.value, buf, None), "info query")
  return buf.value.decode(errors='replace')

def id_list(fn, *args) -> list:
  n = ctypes.c_uint32(0)
  code = fn(*args, 0, None, ctypes.byref(n))
  if code != SUCCESS or n.value == 0: return []
  ids = (ctypes.c_void_p * n.value)()
  check(fn(*args, n.value, ids, None), "listing")
  return list(ids)

def cl_devices() -> tuple:
  """(platform, [device ids]) of the OpenCL platform to use, with the error that says what is missing."""
  lib = library()
  platforms = id_list(lib.clGetPlatformIDs)
  if not platforms: raise NoOpenCLError(f"the CL device found no OpenCL platform; {INSTALL_HINT}")
  with_devices = [(p, id_list(lib.clGetDeviceIDs, p, DEVICE_TYPE_ALL)) for p in platforms]
  with_devices = [(p, ds) for p, ds in with_devices if ds]
  if not with_devices: raise NoOpenCLError(f"the OpenCL platforms have no devices; {INSTALL_HINT}")
  pick = config.get('TINYJX_CL_PLATFORM')
  return with_devices[min(pick, len(with_devices) - 1)]

def device_count() -> int:
  """The OpenCL devices of the chosen platform (an error saying what to install when there are none)."""
  return len(cl_devices()[1])

def available() -> bool:
  try:
    cl_devices()
    return True
  except (NoOpenCLError, CLError):
    return False

class CLProgram:
  """One kernel of a built program; setting its arguments and enqueueing it is one locked step, so several
  threads (pmap's devices) may launch it."""
  __slots__ = ('kernel', 'lock', 'name')
  def __init__(self, kernel, name: str): self.kernel, self.lock, self.name = kernel, threading.Lock(), name

class CLDevice(Backend):
  """An OpenCL device through the contract's nine methods."""
  kind = "CL"
  renderer = "OpenCL"
  kernel_shape = "grid"
  host_memory = False

  def __init__(self, name: str):
    super().__init__(name)
    lib, (platform, ids) = library(), cl_devices()
    if self.index >= len(ids):
      raise NoOpenCLError(f"there is no OpenCL device {self.index}: the platform has {len(ids)}; use CL:0 .. "
                          f"CL:{len(ids) - 1}")
    self.lib, self.platform_id, self.device_id = lib, platform, ids[self.index]
    dev = ctypes.c_void_p(self.device_id)
    self.context = created(lib.clCreateContext, None, 1, ctypes.byref(dev), None, None, what="clCreateContext")
    self.queue = created(lib.clCreateCommandQueue, self.context, self.device_id, 0, what="clCreateCommandQueue")
    self.description = "|".join([info_text(lib.clGetPlatformInfo, platform, PLATFORM_NAME),
                                 info_text(lib.clGetDeviceInfo, self.device_id, DEVICE_NAME),
                                 info_text(lib.clGetDeviceInfo, self.device_id, DRIVER_VERSION)])
    self.extensions = info_text(lib.clGetDeviceInfo, self.device_id, DEVICE_EXTENSIONS).split()
    # the facts the GPU kernel shape is chosen for (lower/optimize_gpu.py)
    self.max_local_size = self.number(DEVICE_MAX_WORK_GROUP_SIZE, ctypes.c_size_t)
    self.local_memory_size = self.number(DEVICE_LOCAL_MEM_SIZE, ctypes.c_uint64)
    self.local_multiple = 32 if self.number(DEVICE_TYPE, ctypes.c_uint64) & DEVICE_TYPE_GPU else 8  # warp or SIMD
    self._programs: dict = {}
    self._lock = threading.Lock()

  def number(self, param: int, ctype) -> int:
    """A numeric fact of the device (clGetDeviceInfo)."""
    v = ctype(0)
    check(self.lib.clGetDeviceInfo(self.device_id, param, ctypes.sizeof(v), ctypes.byref(v), None), "clGetDeviceInfo")
    return v.value

  @property
  def has_float64(self) -> bool: return 'cl_khr_fp64' in self.extensions

  # --- memory ---
  def allocate(self, nbytes: int):
    try:
      return created(self.lib.clCreateBuffer, self.context, MEM_READ_WRITE, max(int(nbytes), 1), None,
                     what=f"clCreateBuffer of {nbytes} bytes")
    except CLError as e:   # the contract: memory the device cannot give is a MemoryError (the caller names the array)
      if e.code in OUT_OF_MEMORY: raise MemoryError(str(e)) from None
      raise
  def free(self, handle) -> None: self.lib.clReleaseMemObject(handle)
  def copy_in(self, handle, host: np.ndarray, offset: int = 0) -> None:
    host = np.ascontiguousarray(host)
    if host.nbytes: check(self.lib.clEnqueueWriteBuffer(self.queue, handle, 1, offset, host.nbytes,
                                                        host.ctypes.data, 0, None, None), "clEnqueueWriteBuffer")
  def copy_out(self, handle, host: np.ndarray, offset: int = 0) -> None:
    if host.nbytes: check(self.lib.clEnqueueReadBuffer(self.queue, handle, 1, offset, host.nbytes,
                                                       host.ctypes.data, 0, None, None), "clEnqueueReadBuffer")

  # --- programs ---
  def compile(self, source: str):
    """A built cl_program for `source`: from memory, from the disk cache (the driver's binary), or built now."""
    key = hashlib.sha256("\0".join([source, self.description, BUILD_OPTIONS.decode()]).encode()).hexdigest()[:32]
    with self._lock:
      if key not in self._programs: self._programs[key] = self._build(source, key)
      return self._programs[key]

  def _build(self, source: str, key: str):
    d = diskcache.cache_dir()
    entry = os.path.join(d, key + '.clbin')
    binary = diskcache.read_checked(entry)
    if binary is not None:
      program = self._from_binary(binary)
      if program is not None: return program
    src = os.path.join(d, key + '.cl')
    diskcache.atomic_write(src, source.encode())
    text = source.encode()
    program = created(self.lib.clCreateProgramWithSource, self.context, 1, ctypes.byref(ctypes.c_char_p(text)),
                      ctypes.byref(ctypes.c_size_t(len(text))), what="clCreateProgramWithSource")
    self._build_program(program, src)
    diskcache.write_checked(entry, self._binary_of(program))
    return program

  def _build_program(self, program, src_path: str) -> None:
    dev = ctypes.c_void_p(self.device_id)
    code = self.lib.clBuildProgram(program, 1, ctypes.byref(dev), BUILD_OPTIONS, None, None)
    if code == SUCCESS: return
    log = info_text(lambda o, p, n, v, r: self.lib.clGetProgramBuildInfo(o, self.device_id, p, n, v, r), program,
                    PROGRAM_BUILD_LOG)
    raise CLBuildError(f"the OpenCL driver ({self.description}) could not build the generated kernels ({src_path}), "
                       f"error {code}:\n{log.strip()}")

  def _binary_of(self, program) -> bytes:
    size = ctypes.c_size_t(0)
    check(self.lib.clGetProgramInfo(program, PROGRAM_BINARY_SIZES, ctypes.sizeof(size), ctypes.byref(size), None),
          "clGetProgramInfo")
    buf = ctypes.create_string_buffer(size.value)
    ptr = ctypes.c_char_p(ctypes.addressof(buf))
    check(self.lib.clGetProgramInfo(program, PROGRAM_BINARIES, ctypes.sizeof(ptr), ctypes.byref(ptr), None),
          "clGetProgramInfo")
    return buf.raw

  def _from_binary(self, binary: bytes):
    """A program built from a cached driver binary, or None if the driver no longer accepts it."""
    dev, status, err = ctypes.c_void_p(self.device_id), ctypes.c_int32(0), ctypes.c_int32(0)
    data = ctypes.c_char_p(binary)
    program = self.lib.clCreateProgramWithBinary(self.context, 1, ctypes.byref(dev),
                                                 ctypes.byref(ctypes.c_size_t(len(binary))), ctypes.byref(data),
                                                 ctypes.byref(status), ctypes.byref(err))
    if err.value != SUCCESS or status.value != SUCCESS: return None
    return program if self.lib.clBuildProgram(program, 1, ctypes.byref(dev), BUILD_OPTIONS, None, None) == 0 else None

  def load(self, binary, entry: str) -> CLProgram:
    return CLProgram(created(self.lib.clCreateKernel, binary, entry.encode(), what=f"clCreateKernel {entry}"), entry)

  # --- running ---
  def arguments(self, count: int, handles: dict, base=None) -> list:
    """One (cl_mem, byte offset) per slot."""
    table = list(base) if base is not None else [(None, 0)] * count
    for slot, h in handles.items(): table[slot] = h if type(h) is tuple else (h, 0)
    return table

  def launch(self, program: CLProgram, args, global_size=None, local_size=None) -> None:
    """Run `program` on the buffers `args` (a list of (cl_mem, offset), in the kernel's parameter order: each
    buffer is two kernel arguments, the base and the byte offset) over `global_size` work items, in work groups of
    `local_size` (a multiple of which `global_size` is; None lets the driver choose)."""
    gsize = tuple(global_size or (1,))
    g = (ctypes.c_size_t * len(gsize))(*gsize)
    loc = (ctypes.c_size_t * len(gsize))(*local_size) if local_size else None
    with program.lock:
      for i, (mem, offset) in enumerate(args):
        check(self.lib.clSetKernelArg(program.kernel, 2 * i, ctypes.sizeof(ctypes.c_void_p),
                                      ctypes.byref(ctypes.c_void_p(mem))), f"clSetKernelArg of {program.name}")
        check(self.lib.clSetKernelArg(program.kernel, 2 * i + 1, 8, ctypes.byref(ctypes.c_uint64(offset))),
              f"clSetKernelArg of {program.name}")
      check(self.lib.clEnqueueNDRangeKernel(self.queue, program.kernel, len(gsize), None, g, loc, 0, None, None),
            f"clEnqueueNDRangeKernel of {program.name}")

  def synchronize(self) -> None: check(self.lib.clFinish(self.queue), "clFinish")

DEVICE_CLASS = CLDevice
