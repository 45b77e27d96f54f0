"""CUDA device: CUDA C++ kernels compiled by NVRTC, loaded and launched through ctypes to the driver's `libcuda.so.1`.

Each `CUDA:i` is GPU i of the driver, in its primary context (made current in whichever thread calls, so pmap's
threads may share a device). A handle is a `CUdeviceptr` (an int); an argument table is a list with one device
pointer per buffer slot, an intermediate's arena offset already added; a program is one `CUfunction` of a loaded
module, and `launch` runs it on the legacy default stream over blocks of at most `BLOCK` threads (the kernels'
grid loops stride, so a grid capped at CUDA's limits still covers every work item). Copies in return once the
data is staged, copies out once it has arrived; both are ordered after the kernels queued before them, so kernels
of one run go back to back with no host synchronization; `synchronize` is `cuCtxSynchronize`.

NVRTC (`libnvrtc.so.*`: the `nvidia-cuda-nvrtc-cu12` wheel's `nvidia/cuda_nvrtc/lib`, `nvidia-cuda-nvrtc`'s
`nvidia/cu13/lib`, a CUDA toolkit's, or the loader's) compiles a program's source to a cubin for the GPU's
architecture (`sm_90`), which any driver of the same CUDA major version loads; a GPU newer than the NVRTC gets
PTX for the newest architecture it knows, which the driver compiles. With a driver present, the newest NVRTC
whose CUDA major version the driver supports is used. The compile options keep the reference's rounding
(`OPTIONS`: no fused multiply-add, no flush to zero, IEEE division and square root). What NVRTC made is cached
on disk (`diskcache`) under a key of (source, NVRTC version, architecture, options), with the source beside it;
a program that does not compile raises `CUDABuildError` with NVRTC's log, the kernel it points at and the path
of the source.

Without a GPU the lowering and NVRTC still run: `compile_check(fn, *args)` renders a program's kernels (those of
its control flow's sub-programs too) in the CUDA dialect and compiles them to PTX (`compile_only_available()`
says whether NVRTC is installed).
"""
from __future__ import annotations
import ctypes, glob, hashlib, os, re, site, sys, threading
from dataclasses import dataclass, field
import numpy as np
from tinyjx.devices import Backend, diskcache

class NoCUDAError(RuntimeError):
  """No CUDA driver, GPU or NVRTC is available."""

class CUDABuildError(RuntimeError):
  """NVRTC rejected a program's source."""

class CUDAError(RuntimeError):
  """A CUDA driver or NVRTC call returned an error code (`.code`)."""
  def __init__(self, message: str, code: int = 0):
    super().__init__(message)
    self.code = code

OPTIONS = ("--fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-default-device")
NVRTC_HINT = ("install NVRTC with `pip install nvidia-cuda-nvrtc-cu12` (or tinyjx's extra: `pip install "
              "tinyjx[cuda]`), or put a CUDA toolkit's libnvrtc.so on the library path")
SELECT_HINT = ("choose another device with TINYJX_DEVICE=CPU or TINYJX_DEVICE=PYTHON; without a GPU, "
               "tinyjx.devices.cuda.compile_check(fn, *args) still compiles a program's CUDA kernels to PTX")
DRIVER_HINT = f"install the NVIDIA driver on a machine with an NVIDIA GPU, or {SELECT_HINT}"
BLOCK = 256                              # threads per block when a kernel can have that many
MAX_GRID = (2**31 - 1, 65535, 65535)     # CUDA's grid limits per dimension
SUCCESS, OUT_OF_MEMORY, NO_DEVICE = 0, 2, 100
BAD_IMAGE = (200, 209, 218, 222)         # invalid image, no binary for the GPU, invalid PTX, unsupported PTX version
CC_MAJOR, CC_MINOR, MAX_THREADS_PER_BLOCK, MAX_SHARED_PER_BLOCK, WARP_SIZE = 75, 76, 1, 8, 10   # CUdevice_attribute
FUNC_MAX_THREADS = 0                                       # CUfunction_attribute
NVRTC_FILE = re.compile(r'libnvrtc\.so\.(\d+(?:\.\d+)*)')

# --- NVRTC ---
def nvrtc_paths() -> list[str]:
  """Every libnvrtc found on disk, newest first (pip wheels under sys.path, CUDA toolkits), then the bare name
  for the loader's own search."""
  site_dirs = [*getattr(site, 'getsitepackages', list)(), getattr(site, 'getusersitepackages', str)()]
  bases = dict.fromkeys([*sys.path, *site_dirs])
  found: dict = {}
  patterns = [os.path.join(b, 'nvidia', '*', 'lib', 'libnvrtc.so.*') for b in bases if b]
  patterns += ['/usr/local/cuda*/lib*/libnvrtc.so.*', '/usr/local/cuda*/targets/*/lib/libnvrtc.so.*',
               '/usr/lib/x86_64-linux-gnu/libnvrtc.so.*']
  for pattern in patterns:
    for p in glob.glob(pattern):
      m = NVRTC_FILE.fullmatch(os.path.basename(p))
      if m: found.setdefault(os.path.realpath(p), tuple(int(v) for v in m.group(1).split('.')))
  return sorted(found, key=found.get, reverse=True) + ['libnvrtc.so']

class NVRTC:
  """One loaded libnvrtc: its version, the architectures it compiles for, and `compile`."""
  def __init__(self, lib: ctypes.CDLL, path: str):
    self.lib, self.path = lib, path
    P, I, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    sig = {'nvrtcVersion': [P, P], 'nvrtcCreateProgram': [P, ctypes.c_char_p, ctypes.c_char_p, I, P, P],
           'nvrtcCompileProgram': [P, I, P], 'nvrtcDestroyProgram': [P], 'nvrtcGetProgramLogSize': [P, P],
           'nvrtcGetProgramLog': [P, P], 'nvrtcGetPTXSize': [P, P], 'nvrtcGetPTX': [P, P],
           'nvrtcGetCUBINSize': [P, P], 'nvrtcGetCUBIN': [P, P], 'nvrtcGetNumSupportedArchs': [P],
           'nvrtcGetSupportedArchs': [P], 'nvrtcGetErrorString': [I]}
    for name, args in sig.items():
      fn = getattr(lib, name)
      fn.argtypes, fn.restype = args, (ctypes.c_char_p if name == 'nvrtcGetErrorString' else I)
    major, minor = I(0), I(0)
    self.check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    self.version = (major.value, minor.value)
    n = I(0)
    self.check(lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
    archs = (I * n.value)()
    self.check(lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    self.archs = sorted(archs)
  def __repr__(self): return f"NVRTC {self.version[0]}.{self.version[1]} ({self.path})"

  def check(self, code: int, what: str) -> None:
    if code != SUCCESS: raise CUDAError(f"NVRTC {what} failed: {self.lib.nvrtcGetErrorString(code).decode()}", code)

  def default_arch(self) -> str:
    """PTX for compile-only checks: Hopper's (the H100/H200) where this NVRTC knows it, else its newest."""
    return f"compute_{90 if 90 in self.archs else self.archs[-1]}"

  def compile(self, source: str, arch: str, src_path: str = "") -> bytes:
    """`source` compiled for `arch`: a cubin for 'sm_XY', PTX for 'compute_XY'; CUDABuildError with the log."""
    prog = ctypes.c_void_p()
    self.check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"tinyjx.cu", 0, None, None),
               "nvrtcCreateProgram")
    try:
      opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in OPTIONS)]
      code = self.lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
      if code != SUCCESS: raise CUDABuildError(build_message(self, arch, source, self.log(prog), src_path))
      cubin = arch.startswith('sm_')
      get_size, get = ((self.lib.nvrtcGetCUBINSize, self.lib.nvrtcGetCUBIN) if cubin else
                       (self.lib.nvrtcGetPTXSize, self.lib.nvrtcGetPTX))
      size = ctypes.c_size_t(0)
      self.check(get_size(prog, ctypes.byref(size)), "getting the binary's size")
      out = ctypes.create_string_buffer(size.value)
      self.check(get(prog, out), "getting the binary")
      return out.raw if cubin else out.value   # PTX is text, NUL-terminated
    finally:
      self.lib.nvrtcDestroyProgram(ctypes.byref(prog))

  def log(self, prog) -> str:
    size = ctypes.c_size_t(0)
    self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(max(size.value, 1))
    self.lib.nvrtcGetProgramLog(prog, buf)
    return buf.value.decode(errors='replace').strip()

def build_message(nv: NVRTC, arch: str, source: str, log: str, src_path: str) -> str:
  """NVRTC's log with the kernels its errors point at (by line) and where the source is."""
  starts = [(i + 1, m.group(1)) for i, line in enumerate(source.splitlines())
            if (m := re.search(r'__global__ (?:__launch_bounds__\(\d+\) )?void (\w+)\(', line))]
  lines = [int(n) for n in re.findall(r'tinyjx\.cu\((\d+)\)', log)]
  kernels = dict.fromkeys(next((k for s, k in reversed(starts) if s <= n), 'the prelude') for n in lines)
  where = f" in {', '.join(kernels)}" if kernels else ""
  return (f"{nv!r} could not compile the generated CUDA kernels{where} for {arch} "
          f"({src_path or 'source not saved'}):\n{log}")

_nvrtc: dict = {}

def nvrtc(max_major: int | None = None) -> NVRTC:
  """The newest loadable NVRTC (of CUDA major version at most `max_major`: what the driver supports), loaded once;
  NoCUDAError saying how to install one when there is none."""
  if max_major in _nvrtc: return _nvrtc[max_major]
  tried = []
  for path in nvrtc_paths():
    try:
      nv = NVRTC(ctypes.CDLL(path), path)
    except (OSError, AttributeError, CUDAError) as e:
      tried.append(f"{path}: {e}")
      continue
    if max_major is not None and nv.version[0] > max_major:
      tried.append(f"{path}: NVRTC {nv.version[0]}.{nv.version[1]} is newer than the driver (CUDA {max_major})")
      continue
    _nvrtc[max_major] = nv
    return nv
  newer = f" of CUDA {max_major} or older (`pip install nvidia-cuda-nvrtc-cu{max_major}`)" if max_major else ""
  raise NoCUDAError(f"the CUDA device needs NVRTC{newer}, and none could be loaded ({'; '.join(tried)}); "
                    f"{NVRTC_HINT}; or {SELECT_HINT}")

def compile_only_available() -> bool:
  """Whether NVRTC is installed, so CUDA kernels can be compiled (to PTX) even without a GPU."""
  try:
    nvrtc()
    return True
  except NoCUDAError:
    return False

def build(source: str, arch: str, nv: NVRTC) -> bytes:
  """`source` compiled by `nv` for `arch`, through the disk cache (the source is kept beside the binary)."""
  key = hashlib.sha256("\0".join([source, repr(nv.version), arch, *OPTIONS]).encode()).hexdigest()[:32]
  d = diskcache.cache_dir()
  entry = os.path.join(d, key + ('.cubin' if arch.startswith('sm_') else '.ptx'))
  binary = diskcache.read_checked(entry)
  if binary is not None: return binary
  src = os.path.join(d, key + '.cu')
  diskcache.atomic_write(src, source.encode())
  binary = nv.compile(source, arch, src)
  diskcache.write_checked(entry, binary)
  return binary

# --- the driver ---
_driver: list = []

def driver() -> ctypes.CDLL:
  """libcuda with the argument types of the calls used here, initialized (once); NoCUDAError when there is no
  driver or no GPU."""
  if _driver: return _driver[0]
  try:
    lib = ctypes.CDLL('libcuda.so.1')
  except OSError as e:
    raise NoCUDAError(f"the CUDA device needs the NVIDIA driver's libcuda.so.1, which could not be loaded ({e}); "
                      f"{DRIVER_HINT}") from None
  P, I, U, S, Q = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_uint64
  sig = {'cuInit': [U], 'cuDriverGetVersion': [P], 'cuDeviceGetCount': [P], 'cuDeviceGet': [P, I],
         'cuDeviceGetName': [ctypes.c_char_p, I, I], 'cuDeviceGetAttribute': [P, I, I],
         'cuDevicePrimaryCtxRetain': [P, I], 'cuCtxSetCurrent': [P], 'cuCtxSynchronize': [],
         'cuMemAlloc_v2': [P, S], 'cuMemFree_v2': [Q], 'cuMemcpyHtoD_v2': [Q, P, S], 'cuMemcpyDtoH_v2': [P, Q, S],
         'cuModuleLoadData': [P, P], 'cuModuleGetFunction': [P, P, ctypes.c_char_p],
         'cuFuncGetAttribute': [P, I, P], 'cuLaunchKernel': [P, U, U, U, U, U, U, U, P, P, P],
         'cuGetErrorString': [I, P]}
  for name, args in sig.items():
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = args, I
  code = lib.cuInit(0)
  if code == NO_DEVICE: raise NoCUDAError(f"the NVIDIA driver is installed but found no GPU; {SELECT_HINT}")
  if code != SUCCESS:
    raise NoCUDAError(f"the NVIDIA driver did not start (cuInit: {error_text(lib, code)}); {DRIVER_HINT}")
  _driver.append(lib)
  return lib

def error_text(lib, code: int) -> str:
  text = ctypes.c_char_p()
  if lib.cuGetErrorString(code, ctypes.byref(text)) != SUCCESS or not text.value: return f"error {code}"
  return f"{text.value.decode()} (error {code})"

def check(code: int, what: str) -> None:
  if code != SUCCESS: raise CUDAError(f"CUDA {what} failed: {error_text(_driver[0], code)}", code)

def device_count() -> int:
  """The GPUs the driver sees (an error saying what to install when there is no driver or no GPU)."""
  n = ctypes.c_int(0)
  check(driver().cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
  if n.value == 0: raise NoCUDAError(f"the NVIDIA driver found no GPU; {SELECT_HINT}")
  return n.value

def available() -> bool:
  """Whether programs can run on CUDA here: a driver, a GPU, and an NVRTC it supports."""
  try:
    device_count()
    nvrtc(driver_version(driver())[0])
    return True
  except (NoCUDAError, CUDAError):
    return False

def driver_version(lib) -> tuple:
  v = ctypes.c_int(0)
  check(lib.cuDriverGetVersion(ctypes.byref(v)), "cuDriverGetVersion")
  return v.value // 1000, v.value % 1000 // 10

def launch_shape(global_size: tuple, local_size: tuple | None = None, max_threads: int = BLOCK) -> tuple:
  """(grid, block) for `global_size` work items (dimension 0 first): blocks of at most `max_threads` threads filled
  along dimension 0 first, grids capped at CUDA's limits (the kernels' grid loops stride over the rest).

  >>> launch_shape((1000,)), launch_shape((3, 1000)), launch_shape((1,))
  (((4, 1, 1), (256, 1, 1)), ((1, 12, 1), (3, 85, 1)), ((1, 1, 1), (1, 1, 1)))
  """
  g = tuple(max(1, int(n)) for n in (*global_size, 1, 1, 1)[:3])
  if local_size: b = tuple(int(n) for n in (*local_size, 1, 1, 1)[:3])
  else:
    limit = min(BLOCK, max_threads)
    bx = min(g[0], limit)
    by = min(g[1], limit // bx)
    b = (bx, by, min(g[2], limit // (bx * by), 64))
  return tuple(min(-(-n // m), cap) for n, m, cap in zip(g, b, MAX_GRID)), b

# --- the device ---
@dataclass
class CUDAProgram:
  """One kernel of a loaded module, with the most threads per block it can run with."""
  function: int
  name: str
  max_threads: int

class CUDADevice(Backend):
  """An NVIDIA GPU through the contract's nine methods."""
  kind = "CUDA"
  renderer = "CUDA"
  kernel_shape = "grid"
  host_memory = False
  has_float64 = True

  def __init__(self, name: str):
    super().__init__(name)
    self.lib = lib = driver()
    n = device_count()
    if self.index >= n:
      raise NoCUDAError(f"there is no CUDA device {self.index}: the driver sees {n} GPUs; use CUDA:0 .. CUDA:{n - 1}")
    dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
    check(lib.cuDeviceGet(ctypes.byref(dev), self.index), "cuDeviceGet")
    check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value), "cuDevicePrimaryCtxRetain")
    self.cu_device, self.context = dev.value, ctx
    self.capability = (self.attribute(CC_MAJOR), self.attribute(CC_MINOR))
    self.max_threads = self.attribute(MAX_THREADS_PER_BLOCK)
    # the facts the GPU kernel shape is chosen for (lower/optimize_gpu.py)
    self.max_local_size, self.local_memory_size = self.max_threads, self.attribute(MAX_SHARED_PER_BLOCK)
    self.local_multiple = self.attribute(WARP_SIZE)
    text = ctypes.create_string_buffer(256)
    check(lib.cuDeviceGetName(text, 256, self.cu_device), "cuDeviceGetName")
    self.gpu_name, self.driver_version = text.value.decode(), driver_version(lib)
    self.nvrtc = nvrtc(self.driver_version[0])
    self.arch = self.target_arch()
    self._modules: dict = {}
    self._lock = threading.Lock()

  def attribute(self, which: int) -> int:
    v = ctypes.c_int(0)
    check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), which, self.cu_device), "cuDeviceGetAttribute")
    return v.value

  def target_arch(self) -> str:
    """A cubin for this GPU's architecture where NVRTC knows it, else PTX of the newest one it knows."""
    cc = 10 * self.capability[0] + self.capability[1]
    if cc in self.nvrtc.archs: return f"sm_{cc}"
    if cc > self.nvrtc.archs[-1]: return f"compute_{self.nvrtc.archs[-1]}"
    raise NoCUDAError(f"{self.nvrtc!r} cannot compile for {self.gpu_name} (compute capability "
                      f"{self.capability[0]}.{self.capability[1]}): install an older NVRTC, or {SELECT_HINT}")

  def current(self) -> None:
    """Make this device's context the calling thread's (every call into the driver is made in it)."""
    check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

  # --- memory ---
  def allocate(self, nbytes: int) -> int:
    self.current()
    ptr = ctypes.c_uint64(0)
    code = self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(int(nbytes), 1))
    if code == OUT_OF_MEMORY: raise MemoryError(f"{self.name} ({self.gpu_name}): no {nbytes} bytes of GPU memory left")
    check(code, f"cuMemAlloc of {nbytes} bytes")
    return ptr.value
  def free(self, handle: int) -> None:
    self.current()
    self.lib.cuMemFree_v2(handle)
  def copy_in(self, handle: int, host: np.ndarray, offset: int = 0) -> None:
    host = np.ascontiguousarray(host)
    self.current()
    if host.nbytes: check(self.lib.cuMemcpyHtoD_v2(handle + offset, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
  def copy_out(self, handle: int, host: np.ndarray, offset: int = 0) -> None:
    self.current()
    if host.nbytes: check(self.lib.cuMemcpyDtoH_v2(host.ctypes.data, handle + offset, host.nbytes), "cuMemcpyDtoH")

  # --- programs ---
  def compile(self, source: str):
    """The loaded CUmodule for `source`: from memory, or NVRTC's binary (from the disk cache or built now)."""
    key = hashlib.sha256("\0".join([source, repr(self.nvrtc.version), self.arch]).encode()).hexdigest()
    with self._lock:
      if key not in self._modules: self._modules[key] = self._load_module(build(source, self.arch, self.nvrtc))
      return self._modules[key]

  def _load_module(self, binary: bytes):
    self.current()
    module = ctypes.c_void_p()
    code = self.lib.cuModuleLoadData(ctypes.byref(module), ctypes.create_string_buffer(binary))   # PTX wants a NUL
    if code in BAD_IMAGE:
      raise CUDAError(f"the driver (CUDA {self.driver_version[0]}.{self.driver_version[1]}) cannot load what "
                      f"{self.nvrtc!r} compiled for {self.arch} ({error_text(self.lib, code)}): install the NVRTC "
                      f"of the driver's CUDA version (`pip install nvidia-cuda-nvrtc-cu{self.driver_version[0]}=="
                      f"{self.driver_version[0]}.{self.driver_version[1]}.*`), or update the driver", code)
    check(code, "cuModuleLoadData")
    return module

  def load(self, binary, entry: str) -> CUDAProgram:
    self.current()
    fn, most = ctypes.c_void_p(), ctypes.c_int(0)
    check(self.lib.cuModuleGetFunction(ctypes.byref(fn), binary, entry.encode()), f"cuModuleGetFunction {entry}")
    check(self.lib.cuFuncGetAttribute(ctypes.byref(most), FUNC_MAX_THREADS, fn), f"cuFuncGetAttribute {entry}")
    return CUDAProgram(fn.value, entry, most.value)

  # --- running ---
  def arguments(self, count: int, handles: dict, base=None) -> list:
    """One device pointer per slot, its byte offset added."""
    table = list(base) if base is not None else [0] * count
    for slot, h in handles.items(): table[slot] = h[0] + h[1] if type(h) is tuple else h
    return table

  def launch(self, program: CUDAProgram, args, global_size=None, local_size=None) -> None:
    """Run `program` on the device pointers `args` (in the kernel's parameter order) over `global_size` work items, in
    blocks of `local_size` threads (kernels with work groups rely on it; others get blocks from `launch_shape`)."""
    grid, block = launch_shape(tuple(global_size or (1,)), local_size, program.max_threads)
    if block[0] * block[1] * block[2] > program.max_threads:
      raise CUDAError(f"{program.name} needs blocks of {block} threads, but this GPU runs it with at most "
                      f"{program.max_threads} (registers): set TINYJX_DEVICE=CPU for this program, or report the "
                      f"kernel so its work groups get smaller")
    values = (ctypes.c_uint64 * max(len(args), 1))(*args)
    slots = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(values) + 8 * i for i in range(len(args))])
    self.current()
    check(self.lib.cuLaunchKernel(program.function, *grid, *block, 0, None, slots, None),
          f"cuLaunchKernel of {program.name} (grid {grid}, block {block})")

  def synchronize(self) -> None:
    self.current()
    check(self.lib.cuCtxSynchronize(), "running the kernels (cuCtxSynchronize)")

DEVICE_CLASS = CUDADevice

# --- compile-only mode ---
class CUDACompileOnly(Backend):
  """The CUDA lowering with NVRTC and no GPU: `compile` gives PTX for `arch` (a cubin for an 'sm_XY' arch);
  control flow's sub-programs are lowered and compiled too (`lowered` keeps every one); nothing runs."""
  kind = "CUDA"
  renderer = "CUDA"
  kernel_shape = "grid"
  max_local_size, local_memory_size, local_multiple = 1024, 48 << 10, 32   # every CUDA GPU since compute 2.0

  def __init__(self, arch: str | None = None):
    super().__init__("CUDA:0")
    self.nvrtc = nvrtc()
    self.arch = arch or self.nvrtc.default_arch()
    self.lowered: list = []
  def compile(self, source: str) -> bytes: return build(source, self.arch, self.nvrtc)
  def compile_jaxpr(self, jaxpr):
    from tinyjx.lower import lower
    st = lower(self, jaxpr.params, jaxpr.outs)
    self.lowered.append(st)
    return st

@dataclass
class CompileReport:
  """What `compile_check` lowered and compiled: one translation unit per (sub-)program."""
  arch: str
  nvrtc: str
  kernels: list = field(default_factory=list)     # kernel names, of every unit
  sources: list = field(default_factory=list)     # CUDA source per unit
  binaries: list = field(default_factory=list)    # PTX (or cubin) per unit

def compile_check(fn, *args, arch: str | None = None) -> CompileReport:
  """Render the kernels of `fn(*args)` (a function, traced like `jit` traces it, or a Jaxpr) in the CUDA dialect
  and compile them with NVRTC, without a GPU; CUDABuildError (with NVRTC's log) when one does not compile.

  >>> import tinyjx.numpy as jnp
  >>> r = compile_check(lambda x: jnp.tanh(x).sum(), jnp.ones(8)) if compile_only_available() else None
  >>> r is None or (r.kernels == ['k0_reduce_sum'] and b'.entry k0_reduce_sum' in r.binaries[0])
  True
  """
  from tinyjx.tracing import Jaxpr, make_jaxpr
  jaxpr = fn if isinstance(fn, Jaxpr) else make_jaxpr(fn)(*args)
  target = CUDACompileOnly(arch)
  target.compile_jaxpr(jaxpr)
  report = CompileReport(target.arch, repr(target.nvrtc))
  for st in target.lowered:
    report.kernels += [k.name for k in st.kernels]
    report.sources.append(st.source)
    report.binaries.append(st.binary)
  return report
