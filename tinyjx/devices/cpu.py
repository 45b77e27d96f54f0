"""CPU device: kernels in C, compiled by the system compiler into one shared library per program, called
through ctypes, the outer loop parallel with OpenMP. This file owns the C toolchain and its disk cache.

Buffers are `NumpyBuffer`s (host memory owned by numpy), so moving data between CPU and PYTHON costs nothing
and kernels receive plain pointers: a handle is a numpy array, an argument table a ctypes array of pointers,
a program a ctypes function of the generated library (`void tjx_run_N(void **args)` runs several kernels in
one foreign call). Before each launch the OpenMP thread count is set from TINYJX_THREADS, or when that is 0,
from the cores other processes are not using right now (`thread_count`).

The toolchain: the compiler is `$CC`, else the first of `cc`, `gcc`, `clang` on PATH. Flags are probed once per
compiler version (the result is cached): `-O3 -march=native -fopenmp` where the compiler has them, falling
back to `-fopenmp-simd` and then to no OpenMP; always `-fwrapv` (integer overflow wraps, as numpy's does),
`-ffp-contract=off` (no fused multiply-add unless a kernel asks for one: results match the reference),
`-fno-math-errno` and `-fno-trapping-math` (neither changes a value; they let conditional code vectorize).
Libraries live in the per-user cache (`diskcache`): `<key>.so` with its checksum, key = sha256(source, compiler
path and version, flags, host CPU); a corrupt or unsafe entry is rebuilt. The source of every build is kept as
`<key>.c` next to it, so a compiler error can point at it.

>>> import numpy as np, tinyjx
>>> from tinyjx import devices
>>> cpu = devices.get('CPU')
>>> cpu.from_numpy(np.arange(3.0, dtype=np.float32), tinyjx.dtypes.float32).numpy()
array([0., 1., 2.], dtype=float32)
"""
from __future__ import annotations
import ctypes, hashlib, os, platform, re, shutil, subprocess, tempfile, threading, time
from functools import lru_cache
import numpy as np
from tinyjx import settings as config
from tinyjx.devices import Backend, diskcache
from tinyjx.devices.python import NumpyBuffer

# --- the toolchain ---
class NoCompilerError(RuntimeError):
  """No C compiler is available for the CPU device."""

class CompileError(RuntimeError):
  """The C compiler rejected generated source."""

BASE_FLAGS = ['-O3', '-march=native', '-fPIC', '-shared', '-std=gnu11', '-fwrapv', '-fno-strict-aliasing',
              '-fno-math-errno', '-fno-trapping-math', '-ffp-contract=off']
_lock = threading.Lock()
_loaded: dict = {}

def find_compiler() -> str:
  """Path of the C compiler, or a NoCompilerError that says how to get one."""
  for name in ([os.environ['CC']] if os.environ.get('CC') else []) + ['cc', 'gcc', 'clang']:
    if path := shutil.which(name): return path
  raise NoCompilerError("the CPU device needs a C compiler and none was found (tried $CC, cc, gcc, clang). Install "
                        "one (Debian/Ubuntu: `apt-get install gcc`; Fedora: `dnf install gcc`; macOS: "
                        "`xcode-select --install`), or run on the reference interpreter with TINYJX_DEVICE=PYTHON.")

@lru_cache(None)
def compiler_version(cc: str) -> str:
  out = subprocess.run([cc, '--version'], capture_output=True, text=True)
  return (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else 'unknown'

@lru_cache(None)
def host_cpu() -> str:
  """A description of the host CPU that changes when generated code could (model and instruction set flags)."""
  try:
    with open('/proc/cpuinfo') as f: lines = f.read().splitlines()
    keep = [next((ln for ln in lines if ln.startswith(k)), '') for k in ('model name', 'flags', 'Features')]
    return platform.machine() + '|' + '|'.join(keep)
  except OSError:
    return platform.machine() + '|' + platform.processor()

PROBE = """#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
int tjx_probe(int n) {
  int s = 0;
#pragma omp parallel for reduction(+:s)
  for (int i = 0; i < n; i++) s += i;
  return s + (int)sqrtf(n);
}
"""

def workarounds(cc: str) -> list:
  """Flags that keep known compiler bugs away. GCC 12 miscompiles some small conditional loops when it
  vectorizes them with AVX-512VL masks (found by the differential tests): before GCC 13 the vectorizer gets
  no AVX-512, and only the matmul micro-kernel (explicit vectors, nothing for the vectorizer to mask) uses
  it, where the host has it."""
  macros = subprocess.run([cc, '-dM', '-E', '-x', 'c', os.devnull], capture_output=True, text=True).stdout
  gnuc = re.search(r'#define __GNUC__ (\d+)', macros)
  if '__clang__' in macros or gnuc is None or '__x86_64__' not in macros or int(gnuc.group(1)) >= 13: return []
  return ['-mno-avx512f'] + (['-DTJX_AVX512_MICROKERNEL'] if ' avx512f ' in host_cpu() + ' ' else [])

@lru_cache(None)
def compiler_flags(cc: str) -> tuple:
  """The flags this compiler accepts, best first (probed by building a small library, result cached on disk)."""
  d = diskcache.cache_dir()
  base_flags = BASE_FLAGS + workarounds(cc)
  tag = hashlib.sha256(f"{cc}|{compiler_version(cc)}|{base_flags}".encode()).hexdigest()[:16]
  memo = os.path.join(d, f"flags-{tag}.txt")
  if diskcache.safe_file(memo):
    with open(memo) as f: return tuple(f.read().split())
  for extra, base in ((['-fopenmp'], base_flags), (['-fopenmp-simd'], base_flags), ([], base_flags),
                      ([], [f for f in base_flags if f != '-march=native'])):
    flags = tuple(base + extra)
    with tempfile.TemporaryDirectory() as tmp:
      src, out = os.path.join(tmp, 'p.c'), os.path.join(tmp, 'p.so')
      with open(src, 'w') as f: f.write(PROBE)
      if subprocess.run([cc, *flags, src, '-o', out], capture_output=True).returncode == 0:
        diskcache.atomic_write(memo, " ".join(flags).encode())
        return flags
  raise NoCompilerError(f"the C compiler {cc} ({compiler_version(cc)}) cannot build shared libraries; install gcc "
                        "(`apt-get install gcc`) or set TINYJX_DEVICE=PYTHON")

# --- building and loading ---
def cache_key(source: str, cc: str, flags: tuple) -> str:
  text = "\0".join([source, cc, compiler_version(cc), " ".join(flags), host_cpu()])
  return hashlib.sha256(text.encode()).hexdigest()[:32]

def load_library(source: str) -> ctypes.CDLL:
  """The shared library built from `source` (from memory, from the disk cache, or compiled now). Threads of one
  process take turns (`_lock`); processes compiling the same source take turns on the entry's lock, so it is built
  once. A new entry can evict old ones (`diskcache.evict`), never a library this process has loaded.

  >>> load_library("int tjx_seven(void) { return 7; }").tjx_seven()
  7
  """
  cc = find_compiler()
  flags = compiler_flags(cc)
  key = cache_key(source, cc, flags)
  if key in _loaded: return _loaded[key]
  with _lock:
    if key not in _loaded: _loaded[key] = _load_or_build(cc, flags, source, key)
    return _loaded[key]

def _load_or_build(cc: str, flags: tuple, source: str, key: str) -> ctypes.CDLL:
  d = diskcache.cache_dir()
  so = os.path.join(d, key + '.so')
  lib = _load_checked(so)
  if lib is not None: return lib
  with diskcache.entry_lock(so):
    lib = _load_checked(so)          # another process may have built it while this one waited for the lock
    if lib is not None: return lib
    _build(cc, flags, source, so)
    lib = _load_checked(so)
  if lib is None: raise CompileError(f"the library {so} was built but cannot be loaded; remove it and run again")
  diskcache.evict(d, keep=set(_loaded) | {key})
  return lib

def _load_checked(so: str):
  """The library at `so` if its checksum matches and it loads; None if it is absent, corrupt or unsafe."""
  if diskcache.read_checked(so) is None: return None
  try:
    return ctypes.CDLL(so)
  except OSError:
    return None

def _build(cc: str, flags: tuple, source: str, so: str) -> None:
  """Compile `source` into the cache entry `so` (the caller holds its `diskcache.entry_lock`)."""
  c_path = so[:-3] + '.c'
  diskcache.atomic_write(c_path, source.encode())
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(so), prefix='.tmp-', suffix='.so')
  os.close(fd)
  try:
    res = subprocess.run([cc, *flags, c_path, '-o', tmp, '-lm'], capture_output=True, text=True)
    if res.returncode != 0:
      raise CompileError(f"the C compiler failed on generated kernel source ({c_path}):\n{res.stderr.strip()}\n"
                         f"command: {cc} {' '.join(flags)} {c_path} -o {so} -lm")
    diskcache.install(tmp, so)
  finally:
    if os.path.exists(tmp): os.unlink(tmp)

# --- the device ---
class CPUDevice(Backend):
  """The compiled CPU device: the contract's methods on numpy-owned host memory."""
  kind = "CPU"
  renderer = "C"            # the dialect of tinyjx.lower.render.RENDERERS
  kernel_shape = "loops"    # kernels are loop nests with a parallel outer loop (GPU devices: a grid of threads)
  host_memory = True

  @property
  def vector_bytes(self) -> int:
    """SIMD register width the matmul plan tiles for: 64 with AVX-512, else 32 (two 16-byte vectors on NEON)."""
    return 64 if ' avx512f ' in f" {host_cpu()} " and platform.machine() in ('x86_64', 'AMD64') else 32

  def allocate(self, nbytes: int) -> np.ndarray: return np.empty(nbytes, np.uint8)
  def free(self, handle) -> None: pass
  def copy_in(self, handle: np.ndarray, host: np.ndarray, offset: int = 0) -> None:
    np.copyto(handle[offset:offset + host.nbytes], host.reshape(-1).view(np.uint8))
  def copy_out(self, handle: np.ndarray, host: np.ndarray, offset: int = 0) -> None:
    np.copyto(host.reshape(-1).view(np.uint8), handle[offset:offset + host.nbytes])
  def compile(self, source: str) -> ctypes.CDLL:
    """A loaded shared library built from C `source` (through the disk cache)."""
    return load_library(source)
  def load(self, binary: ctypes.CDLL, entry: str): return CProgram(getattr(binary, entry), binary.tjx_set_threads)

  def arguments(self, count: int, handles: dict, base=None):
    """A ctypes table of pointers. A run builds its table before it launches anything, so the thread count of
    its kernels is chosen here, once per run."""
    table = type(base).from_buffer_copy(base) if base is not None else _tables(count)()
    for slot, h in handles.items():
      table[slot] = address(h[0]) + h[1] if type(h) is tuple else address(h)
    _threads[1] = config.get('TINYJX_THREADS') or thread_count()
    return table

  def launch(self, program: 'CProgram', args, global_size=None, local_size=None) -> None:
    if _threads[0] != _threads[1]:   # OpenMP's thread count is process-wide: any library of ours can set it
      program.set_threads(int(_threads[1]))
      _threads[0] = _threads[1]
    program.fn(args)

  def from_numpy(self, data: np.ndarray, dtype) -> NumpyBuffer:
    """A buffer holding `data` (already in `dtype`'s storage type; callers pass arrays nobody mutates later): no
    copy when it is C-contiguous and aligned."""
    if not (data.flags.c_contiguous and data.flags.aligned): data = np.array(data, order='C')
    return NumpyBuffer(self.name, data, dtype)
  def wrap(self, handle: np.ndarray, shape: tuple, dtype) -> NumpyBuffer:
    return NumpyBuffer(self.name, handle.view(dtype.np).reshape(shape), dtype)

  def run_graph(self, roots):
    find_compiler()   # without one, the error that says how to install a compiler
    return super().run_graph(roots)

def address(a: np.ndarray) -> int:
  """Where `a`'s memory starts. Through ctypes' buffer export, a third of the cost of `a.ctypes.data` (which builds
  a helper object each time); read-only and empty arrays, which cannot be exported so, take the long way."""
  try:
    return ctypes.addressof(ctypes.c_char.from_buffer(a))
  except (TypeError, ValueError, BufferError):
    return a.ctypes.data

class CProgram:
  """A loaded entry point and the library's thread-count setter."""
  __slots__ = ('fn', 'set_threads')
  def __init__(self, fn, set_threads): self.fn, self.set_threads = fn, set_threads

@lru_cache(None)
def _tables(count: int): return ctypes.c_void_p * max(count, 1)

_threads = [None, 1]   # the count OpenMP has now, the count the current run asked for
_auto = [-1.0, 1]

def thread_count() -> int:
  """Threads for kernels when TINYJX_THREADS is 0: the usable cores minus the threads other processes are
  running right now, so a busy machine does not leave kernels waiting at their barriers for descheduled
  threads. Re-read at most once a second. (Not the load average: it is a minute long and counts this
  process's own work, so after a busy minute a quiet machine still looked full.)"""
  now = time.monotonic()
  if now - _auto[0] > 1.0:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1)
    _auto[:] = [now, max(1, min(cores, cores - _others_running()))]
  return _auto[1]

def _others_running() -> int:
  """Runnable threads of other processes now: the kernel's count of running tasks less this process's own."""
  try:
    with open('/proc/loadavg') as f: running = int(f.read().split()[3].split('/')[0])
    ours = 0
    for task in os.listdir('/proc/self/task'):
      try:
        with open(f'/proc/self/task/{task}/stat') as f: ours += f.read().rsplit(')', 1)[1].split()[0] == 'R'
      except OSError: pass
    return max(0, running - ours)
  except (OSError, ValueError, IndexError):
    return 0

_available: list = []

def available() -> bool:
  """Whether this machine has a C compiler (checked once per process): without one PYTHON is the default device."""
  if not _available:
    try:
      find_compiler()
      _available.append(True)
    except NoCompilerError:
      _available.append(False)
  return _available[0]

DEVICE_CLASS = CPUDevice
