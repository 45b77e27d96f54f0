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
`-fno-math-errno` and `-fno-trapping-math` (neither changes a value; they let conditional code vectorize), and
512-bit vectors where the host has AVX-512 (`vector_width`).
Libraries live in the per-user cache (`diskcache`): `<key>.so` with its checksum, key = sha256(source, compiler
path and version, flags, host CPU); a corrupt or unsafe entry is rebuilt. The source of every build is kept as
`<key>.c` next to it, so a compiler error can point at it. What the compiler says about itself (version, macros) is
remembered there too, so a process whose libraries are all cached starts no compiler.

Compile time: a big source is cut at the renderer's unit marks into as many translation units as there are cores,
compiled at once and linked (`split_units`); a big program that is not in the cache is built at -O1 first (about
half the compiler's time), and only when it runs a second time does a background thread build it at -O3 and move
its entry points there (`Library`): one-off programs stay cheap, training steps end up optimized.

>>> import numpy as np, tinyjx
>>> from tinyjx import devices
>>> cpu = devices.get('CPU')
>>> cpu.from_numpy(np.arange(3.0, dtype=np.float32), tinyjx.dtypes.float32).numpy()
array([0., 1., 2.], dtype=float32)
"""
from __future__ import annotations
import ctypes, hashlib, json, math, os, platform, re, shutil, subprocess, tempfile, threading, time
from functools import lru_cache
import numpy as np
from tinyjx import counters, settings as config
from tinyjx.devices import Backend, diskcache
from tinyjx.devices.python import NumpyBuffer, host_empty, address, fft_twiddles, PAGE, PAGE_FROM  # noqa: F401 (tests)

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
def compiler_facts(cc: str) -> dict:
  """What tinyjx asks the compiler before it builds anything: the first line of `cc --version` and the predefined
  macros (`vector_width` and `tuning` read them). Remembered in the cache directory per compiler binary (its real
  path, size, inode and modification time: an upgrade changes them), so a process that finds its libraries in the
  cache starts no compiler process at all."""
  real = os.path.realpath(cc)
  try:
    st = os.stat(real)
    ident = f"{real}|{st.st_size}|{st.st_ino}|{st.st_mtime_ns}"
  except OSError:
    ident = real
  memo = os.path.join(diskcache.cache_dir(), f"compiler-{hashlib.sha256(ident.encode()).hexdigest()[:16]}.json")
  if diskcache.safe_file(memo):
    try:
      with open(memo) as f: facts = json.load(f)
      if isinstance(facts, dict) and all(isinstance(facts.get(k), str) for k in ('version', 'macros')): return facts
    except (OSError, ValueError):
      pass   # unreadable or damaged: asked again and written anew
  out = subprocess.run([cc, '--version'], capture_output=True, text=True)
  text = out.stdout or out.stderr
  facts = {'version': text.splitlines()[0] if text else 'unknown',
           'macros': subprocess.run([cc, '-dM', '-E', '-x', 'c', os.devnull], capture_output=True, text=True).stdout}
  diskcache.atomic_write(memo, json.dumps(facts).encode())
  return facts

def compiler_version(cc: str) -> str: return compiler_facts(cc)['version']

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

def vector_width(cc: str) -> list:
  """512-bit vectors for the vectorizer where the host has AVX-512. GCC and clang tune Intel cores for 256-bit
  vectors (older parts slow their clock for 512-bit ones) and so leave half of every register unused: on a 2-core
  Xeon (Emerald Rapids) the gelu of 4M floats took 1.23 ms with 256-bit vectors and 1.08 with 512, a row softmax
  of 4096 x 1024 1.45 and 1.10.

  GCC 12 gave the masked loads of if-converted small loops the wrong masks, with AVX-512 masks and with AVX's
  (found by the differential tests): the renderer writes no load into an arm of a select and no conditional load
  (render.py `uses`, `masked_load`), so there is nothing to if-convert into one, and tests/test_lower.py keeps
  the case."""
  macros = compiler_facts(cc)['macros']
  if ('__GNUC__' not in macros or '__x86_64__' not in macros or platform.machine() not in ('x86_64', 'AMD64')
      or ' avx512f ' not in f" {host_cpu()} "):
    return []
  return ['-mprefer-vector-width=512']

ALIAS_CHECKS = 256   # pairs of buffers GCC may check for overlap at run time before it gives up vectorizing a loop

def tuning(cc: str) -> list:
  """Flags that let GCC vectorize what it otherwise would not. A kernel's parallel loop runs in a function GCC
  outlines for OpenMP, where its buffers lose `restrict`: GCC then vectorizes a loop only after checking at run
  time that every buffer it writes does not overlap any other buffer it touches, and by default it gives up past
  10 pairs. A fused Adam update (three outputs, five inputs: 15 pairs) ran scalar, 8x slower."""
  macros = compiler_facts(cc)['macros']
  if '__clang__' in macros or '__GNUC__' not in macros: return []
  return [f'--param=vect-max-version-for-alias-checks={ALIAS_CHECKS}']

def half_precision(cc: str) -> list:
  """GCC 12 with AVX512-FP16 (Sapphire Rapids and later) vectorizes a short float32 -> float16 -> float32 round trip
  into a plain copy (`(float)(_Float16)x` over 4 elements lost its rounding: a jitted `astype` pair returned its
  input; found by tests/test_differential.py). tinyjx computes half precision in float32 and only converts, which
  F16C does as well, so the FP16 instructions are turned off."""
  macros = compiler_facts(cc)['macros']
  if '__clang__' in macros or '__GNUC__' not in macros or ' avx512_fp16 ' not in f" {host_cpu()} ": return []
  return ['-mno-avx512fp16']

def red_zone(cc: str) -> list:
  """No red zone for GCC on x86-64. GCC 12 laid a kernel's local accumulator array (`float acc0[20]`, zeroed by one
  64-byte store and one aligned 16-byte store) into a leaf function's red zone at an address 8 past a multiple of 16,
  and the aligned store faulted: `jit(jnp.fft.ifft)` of a (4, 10) complex64 array killed the process with a
  segmentation fault on a Zen 4 EPYC (found by tests/test_fft.py's random shapes in the compiled pass). Without the
  red zone the array is on a frame GCC aligns itself."""
  macros = compiler_facts(cc)['macros']
  if '__clang__' in macros or '__GNUC__' not in macros or '__x86_64__' not in macros: return []
  return ['-mno-red-zone']

@lru_cache(None)
def _flag_sets(cc: str) -> list:
  """The flag sets a build may use, best first: with OpenMP, with only its `simd` pragmas, without, and without
  `-march=native`."""
  base = BASE_FLAGS + vector_width(cc) + tuning(cc) + half_precision(cc) + red_zone(cc)
  return [tuple(base + ['-fopenmp']), tuple(base + ['-fopenmp-simd']), tuple(base),
          tuple(f for f in base if f != '-march=native')]

def _memo(cc: str) -> str:
  """The disk cache's file of the flags this compiler was seen to accept."""
  tag = hashlib.sha256(f"{cc}|{compiler_version(cc)}|{_flag_sets(cc)[2]}".encode()).hexdigest()[:16]
  return os.path.join(diskcache.cache_dir(), f"flags-{tag}.txt")

_good_flags: dict = {}          # compiler -> flags it has built with (from the memo, a probe, or a build)

def _remember(cc: str, flags: tuple) -> tuple:
  _good_flags[cc] = flags
  memo = _memo(cc)
  if not diskcache.safe_file(memo): diskcache.atomic_write(memo, " ".join(flags).encode())
  return flags

def compiler_flags(cc: str) -> tuple:
  """The flags this compiler accepts, best first (probed by building a small library, result cached on disk)."""
  if cc in _good_flags: return _good_flags[cc]
  memo = _memo(cc)
  if diskcache.safe_file(memo):
    with open(memo) as f: return _good_flags.setdefault(cc, tuple(f.read().split()))
  for flags in _flag_sets(cc):
    with tempfile.TemporaryDirectory() as tmp:
      src, out = os.path.join(tmp, 'p.c'), os.path.join(tmp, 'p.so')
      with open(src, 'w') as f: f.write(PROBE)
      if subprocess.run([cc, *flags, src, '-o', out], capture_output=True).returncode == 0:
        return _remember(cc, flags)
  raise NoCompilerError(f"the C compiler {cc} ({compiler_version(cc)}) cannot build shared libraries; install gcc "
                        "(`apt-get install gcc`) or set TINYJX_DEVICE=PYTHON")

def build_flags(cc: str) -> tuple[tuple, bool]:
  """(the flags to build with now, whether this compiler is known to accept them). Unknown (no memo on disk, no
  build yet in this process), the best set is tried without a probe: it is what a working GCC or clang accepts, and
  probing first cost the MLP step's cold first call 55 of its 400 ms (the probe's compile, which the Python
  lowering finished before). A build that fails with flags not known good probes then (`compiler_flags`)."""
  if cc in _good_flags: return _good_flags[cc], True
  if diskcache.safe_file(_memo(cc)): return compiler_flags(cc), True
  return _flag_sets(cc)[0], False

_probes: dict = {}              # compiler -> the thread finding its flag sets ahead of the first build (`prepare`)
_probes_lock = threading.Lock()

def prepare() -> None:
  """Find the compiler's flag sets in a background thread (its version and predefined macros: two compiler
  processes, about 15 ms), so that the lowering of the first program, Python on this thread, overlaps them;
  `load_library` waits for it."""
  try:
    cc = find_compiler()
  except NoCompilerError:
    return                            # load_library raises it, with its advice, when something is built
  with _probes_lock:
    if cc in _probes: return
    thread = threading.Thread(target=_probe, args=(cc, config.scoped()), daemon=True)
    thread.start()
    _probes[cc] = thread             # published once started: `load_library` (no lock) may join it at once

def _probe(cc: str, scoped: dict) -> None:
  try:
    with config.Context(**scoped):    # the caller's settings (its cache directory)
      build_flags(cc)
  except Exception:
    pass                              # asked again by load_library, which reports what is wrong

# --- building and loading ---
def cache_key(source: str, cc: str, flags: tuple) -> str:
  text = "\0".join([source, cc, compiler_version(cc), " ".join(flags), host_cpu()])
  return hashlib.sha256(text.encode()).hexdigest()[:32]

def load_library(source: str) -> 'Library':
  """The shared library built from `source` (from memory, from the disk cache, or compiled now). Threads of one
  process take turns (`_lock`); processes compiling the same source take turns on the entry's lock, so it is built
  once. A new entry can evict old ones (`diskcache.evict`), never a library this process has loaded.

  >>> load_library("int tjx_seven(void) { return 7; }").tjx_seven()
  7
  """
  cc = find_compiler()
  if (probe := _probes.get(cc)) is not None: probe.join()
  flags, known = build_flags(cc)
  key = cache_key(source, cc, flags)
  if key in _loaded: return _loaded[key]
  with _lock:
    if key not in _loaded:
      try:
        _loaded[key] = _library(cc, flags, source, key)
      except CompileError:
        if known or (good := compiler_flags(cc)) == flags: raise      # (the flags are good: the source is at fault)
        key = cache_key(source, cc, good)
        if key not in _loaded: _loaded[key] = _library(cc, good, source, key)
        return _loaded[key]
      if not known: _remember(cc, flags)
    return _loaded[key]

# --- tiers: a big program not in the cache is built quickly first, and optimized once it runs again ---
QUICK_LEVEL = '-O1'       # about half the compiler's time of -O3; kernels that lean on the vectorizer run slower
TIER_MIN_CHARS = 20000    # kernel text from which a cold build goes through the quick tier first
_upgrades: list = []      # the threads building optimized libraries now
_pending: list = []       # quick builds whose optimized build has not started

def _library(cc: str, flags: tuple, source: str, key: str) -> 'Library':
  """The library of `source`: the optimized build from the cache, or for a big program not there yet a quick build
  (cached under its own flags). A program run once (an evaluation, an initialization) keeps the quick build; when
  one of its entries runs a second time, a background thread makes the optimized build and `Library.upgrade` moves
  the entries to it. The thread is not a daemon: a process that exits first waits for it, so the cache is left
  whole (the next process starts on the optimized build) and no half-built file is left behind."""
  so = os.path.join(diskcache.cache_dir(), key + '.so')
  lib = _load_checked(so)
  if lib is not None or UNIT not in source or len(source) - source.find(UNIT) < TIER_MIN_CHARS:
    return Library(lib if lib is not None else _load_or_build(cc, flags, source, key))
  quick = tuple(QUICK_LEVEL if f == '-O3' else f for f in flags) + ('-DTJX_QUICK',)   # (prelude.py TJX_PACKING_FN)
  quick_key = cache_key(source, cc, quick)
  library = Library(_load_or_build(cc, quick, source, quick_key), (cc, flags, source, key, config.scoped()))
  _loaded[quick_key] = library      # kept from eviction as long as this process may run it
  _pending.append(library)
  return library

def _upgrade(library: 'Library', cc: str, flags: tuple, source: str, key: str, scoped: dict) -> None:
  try:
    with config.Context(**scoped):   # the caller's settings (its cache directory)
      library.upgrade(_load_or_build(cc, flags, source, key))
  except Exception:     # (a compiler that fails at -O3 and not at -O1): the quick build goes on serving
    pass
  finally:
    _upgrades.remove(threading.current_thread())

def finish_upgrades() -> None:
  """Build every optimized library this process has a quick build of, and wait until all are in use (benchmarks
  call this before timing steady state).

  >>> finish_upgrades()
  """
  for library in list(_pending): library.start_upgrade()
  for thread in list(_upgrades): thread.join()

class Library:
  """A loaded shared library whose entry points, once `load`ed, can be moved to a better build of the same source:
  `getattr(library, name)` is the symbol in the current build, `program(entry)` a launchable entry. `pending` is
  what building the better one needs (None: this build is final); `programs` the entries loaded until then."""
  def __init__(self, cdll: ctypes.CDLL, pending: tuple | None = None):
    self.cdll, self.pending, self.programs, self.lock = cdll, pending, [], threading.Lock()
  @property
  def final(self) -> bool: return self.pending is None
  def __getattr__(self, name: str): return getattr(self.cdll, name)
  def program(self, entry: str) -> 'CProgram':
    with self.lock:
      p = CProgram(getattr(self.cdll, entry), self.cdll.tjx_set_threads, None if self.final else self)
      if not self.final: self.programs.append((p, entry))
      return p
  def start_upgrade(self) -> None:
    """Start building the optimized library in a background thread (once)."""
    with self.lock:
      if self not in _pending: return
      _pending.remove(self)
      thread = threading.Thread(target=_upgrade, args=(self, *self.pending), name='tinyjx-optimize')
      _upgrades.append(thread)
    thread.start()
  def upgrade(self, cdll: ctypes.CDLL) -> None:
    """Run the build `cdll` from now on: each program's next launch calls it (a launch under way finishes in the old
    build, which stays mapped)."""
    with self.lock:
      for p, entry in self.programs: p.fn, p.set_threads, p.library = getattr(cdll, entry), cdll.tjx_set_threads, None
      self.cdll, self.programs, self.pending = cdll, [], None

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
  """Compile `source` into the cache entry `so` (the caller holds its `diskcache.entry_lock`): in parallel pieces
  where it is big enough to gain from that (`split_units`), else, or when a piece fails, as one translation unit,
  whose errors point at the kept source."""
  c_path = so[:-3] + '.c'
  diskcache.atomic_write(c_path, source.encode())
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(so), prefix='.tmp-', suffix='.so')
  os.close(fd)
  try:
    quick = '-DTJX_QUICK' in flags          # one copy of each micro-kernel, in the first unit (prelude.py MATMUL)
    micro = len(re.findall(r"^TJX_MICRO\w*\(", source.split(UNIT)[0], re.M)) if quick else 0
    units = split_units(source, compile_jobs(), MICRO_CHARS * micro)
    if len(units) < 2 or not _build_units(cc, flags, units, tmp, quick):
      res = subprocess.run([cc, *flags, c_path, '-o', tmp, '-lm'], capture_output=True, text=True)
      if res.returncode != 0:
        raise CompileError(f"the C compiler failed on generated kernel source ({c_path}):\n{res.stderr.strip()}\n"
                           f"command: {cc} {' '.join(flags)} {c_path} -o {so} -lm")
    diskcache.install(tmp, so)
  finally:
    if os.path.exists(tmp): os.unlink(tmp)

UNIT = "/* tjx:unit */"    # lower.render.UNIT, the renderer's cut points (the device layer does not import lower)
SPLIT_MIN_CHARS = 12000    # below this much kernel text one compiler call is quicker than several and a link

def usable_cores() -> int:
  """The cores this process may run on."""
  return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1)

def compile_jobs() -> int:
  """How many compiler processes one build runs at once: the cores this process may use."""
  return usable_cores()

def split_units(source: str, jobs: int, first: int = 0) -> list[str]:
  """`source` as up to `jobs` translation units of about equal size, each the common prelude (the text before the
  first `UNIT` mark) plus some of the pieces between the marks; `[source]` when it has no marks, one job, or too
  little kernel text to be worth it. A piece is a kernel with its entry, or the program's entries, which reach the
  kernels through declared entries only, so the pieces link in any grouping. `first`: characters' worth of work the
  first unit has besides its pieces (a quick build's micro-kernels)."""
  head, *pieces = source.split(UNIT)
  if jobs < 2 or len(pieces) < 2 or len(source) - len(head) < SPLIT_MIN_CHARS: return [source]
  groups: list = [[first if i == 0 else 0, []] for i in range(min(jobs, len(pieces)))]
  for piece in sorted(pieces, key=len, reverse=True):   # the longest first, each to the lightest unit so far
    lightest = min(groups, key=lambda g: g[0])
    lightest[0] += len(piece)
    lightest[1].append(piece)
  return [head + "".join(UNIT + piece for piece in g[1]) for g in groups]

MICRO_CHARS = 7000         # a micro-kernel instantiation (one line) compiles as long as this much kernel text: about
                           # 36 ms at -O3, where a matmul kernel of 4000 characters takes 20 ms at -O1

def _build_units(cc: str, flags: tuple, units: list, so: str, shared_micro: bool = False) -> bool:
  """Compile `units` to objects, all at once, and link them into `so`; False when any step fails. With
  `shared_micro` (a quick build) only the first unit defines the micro-kernels, the others declare them."""
  compile_flags = [f for f in flags if f != '-shared']
  with tempfile.TemporaryDirectory(dir=os.path.dirname(so), prefix='.tmp-units-') as d:
    procs, objs = [], []
    for i, text in enumerate(units):
      src, obj = os.path.join(d, f'u{i}.c'), os.path.join(d, f'u{i}.o')
      with open(src, 'w') as f: f.write(text)
      elsewhere = ['-DTJX_MICRO_ELSEWHERE'] if shared_micro and i else []
      procs.append(subprocess.Popen([cc, *compile_flags, *elsewhere, '-c', src, '-o', obj], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL))
      objs.append(obj)
    if any(p.wait() != 0 for p in procs): return False
    return subprocess.run([cc, *flags, *objs, '-o', so, '-lm'], capture_output=True).returncode == 0

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

  @property
  def cores(self) -> int:
    """Cores the kernels' threads may use: a matmul plan shares its panels out among them (optimize.wide_tile)."""
    return usable_cores()

  def allocate(self, nbytes: int) -> np.ndarray: return host_empty((nbytes,), np.dtype(np.uint8))[0]
  def free(self, handle) -> None: pass
  def copy_in(self, handle: np.ndarray, host: np.ndarray, offset: int = 0) -> None:
    np.copyto(handle[offset:offset + host.nbytes], host.reshape(-1).view(np.uint8))
  def copy_out(self, handle: np.ndarray, host: np.ndarray, offset: int = 0) -> None:
    np.copyto(host.reshape(-1).view(np.uint8), handle[offset:offset + host.nbytes])
  def prepare(self) -> None: prepare()
  def compile(self, source: str) -> 'Library':
    """A loaded shared library built from C `source` (through the disk cache; a big cold program in two tiers)."""
    return load_library(source)
  def load(self, binary: 'Library', entry: str) -> 'CProgram': return binary.program(entry)

  def arguments(self, count: int, handles: dict, base=None):
    """A ctypes table of pointers. A run builds its table before it launches anything, so the thread count of
    its kernels is chosen here, once per run."""
    table = type(base).from_buffer_copy(base) if base is not None else _tables(count)()
    for slot, h in handles.items():
      if type(h) is tuple:
        table[slot] = address(h[0]) + h[1]
        continue
      try:   # address(h), inline: this loop is on the path of every jit call
        table[slot] = ctypes.addressof(ctypes.c_char.from_buffer(h))
      except (TypeError, ValueError, BufferError):
        table[slot] = h.ctypes.data
    _threads[1] = config.get('TINYJX_THREADS') or thread_count()
    return table

  def replayer(self, base, steps: list, in_slots: list, outs: list, parallel: bool, owner, counts: tuple):
    """Not part of the contract: jit's hit path on this device (`Executable.direct_runner`). `run(inputs)` binds the
    input Buffers and fresh outputs into a table of its own, copied from `base` once, runs `steps` in order (a
    (program, None) is launched on the table; a (None, act) is a loop, `act(input arrays, output arrays)`), adds
    `counts` to the counters and returns the output Buffers (`outs`, in order: (slot, shape, dtype, None) for an
    output slot, (None, None, dtype, copy) for one that `copy(inputs, results so far)` makes after the launch); None
    when it declines and the caller takes `Executable.run`: an input is not C-contiguous, another thread holds
    `owner._lock` (the table and the executable's arena are reused), `owner.timing_hook` is set, or memory ran out
    (`run` says how much, for what). The caller vouches for the inputs: NumpyBuffers of this device with the
    program's shapes and dtypes. Everything fixed between calls is decided here: an input's address is read once per
    Buffer (`NumpyBuffer.address`), the thread count is set only for a program with a parallel region (TINYJX_THREADS is
    fixed while jit's replay table is valid: it is keyed on the settings epoch), and a launch is synchronous."""
    table, launch, lock = type(base).from_buffer_copy(base), self.launch, owner._lock
    makers = [(slot, _output_maker(self.name, shape, dt)) for slot, shape, dt, copy in outs if copy is None]
    copies = [(i, copy, dt) for i, (_, _, dt, copy) in enumerate(outs) if copy is not None]
    name = self.name
    knob, add_many = config.get('TINYJX_THREADS'), counters.add_many
    def run(inputs: list):
      if owner.timing_hook is not None or not lock.acquire(blocking=False): return None
      try:
        for slot, b in zip(in_slots, inputs):
          addr = b.address
          if addr is None: addr = b.address = contiguous_address(b.data)
          if not addr: return None
          table[slot] = addr
        results = []
        for slot, make in makers:
          r = make()
          table[slot] = r.address
          results.append(r)
        if parallel: _threads[1] = knob or thread_count()
        for program, act in steps:
          if act is None: launch(program, table)
          else: act([b.data for b in inputs], [r.data for r in results])
        for i, copy, dt in copies: results.insert(i, NumpyBuffer(name, copy(inputs, results), dt))
      except MemoryError:
        return None
      finally:
        lock.release()
      add_many(counts)
      return results
    return run

  def lu(self, a: np.ndarray, lu: np.ndarray, piv: np.ndarray, perm: np.ndarray) -> None:
    """Not part of the contract: LU with partial pivoting of float32 or float64 matrices `a` (..., m, n) into the
    C-contiguous arrays `lu`, `piv` (int32, (..., min(m, n))) and `perm` (int32, (..., m)), in C (`LINALG`)."""
    m, n = a.shape[-2:]
    np.copyto(lu, a)
    self._threads()
    fn = _linalg('tjx_lu_f32' if a.dtype == np.float32 else 'tjx_lu_f64')
    fn(address(lu), address(piv), address(perm), math.prod(a.shape[:-2]), m, n)

  def lower_solve(self, l: np.ndarray, b: np.ndarray, x: np.ndarray, unit: bool) -> None:
    """Not part of the contract: X with tril(l) X = b into the C-contiguous `x`, for float32 or float64 `l` (..., n,
    n) and `b` (..., n, k) of one batch shape, in C (`LINALG`)."""
    n, k = b.shape[-2:]
    self._threads()
    fn = _linalg('tjx_trsm_f32' if b.dtype == np.float32 else 'tjx_trsm_f64')
    fn(address(np.ascontiguousarray(l)), address(np.ascontiguousarray(b)), address(x), math.prod(b.shape[:-2]), n, k,
       int(unit))

  def fft(self, x: np.ndarray, y: np.ndarray, axis: int, inverse: bool, scale: float = 1.0) -> None:
    """Not part of the contract: the DFT along `axis` (counted from the end; inverse: exp(+2 pi i ..)), times
    `scale`, of complex vectors whose length's prime factors are 2, 3, 5 and 7, stored as their interleaved parts:
    float32 or float64 `x` (..., 2), into the C-contiguous `y` of its shape, in C (`FFT`)."""
    shape = x.shape[:-1]
    n, ax = shape[axis], len(shape) + axis
    outer, inner = math.prod(shape[:ax]), math.prod(shape[ax + 1:])
    sfx = 'f32' if x.dtype == np.float32 else 'f64'
    self._threads(FFT_SOURCES[sfx])
    fn = _linalg(f'tjx_fft_{sfx}')
    rc = fn(address(np.ascontiguousarray(x)), address(y), address(fft_twiddles(n, x.dtype)), outer, n, inner,
            int(inverse), float(scale)) if n >= 2 else -2
    if rc == -2:
      raise ValueError(f"fft: the native transform takes lengths of 2 or more whose prime factors are 2, 3, 5 and "
                       f"7, got {n} (shape {shape}, axis {axis}); jnp.fft composes other lengths of smaller ones")
    if rc != 0: raise MemoryError(f"fft: no memory for the scratch of a {n}-point transform ({x.dtype}, shape {shape})")

  def _threads(self, source: str | None = None) -> None:
    """OpenMP's thread count for the routines of `source` (LINALG, one of FFT_SOURCES; process-wide: set through any
    library of ours)."""
    _threads[1] = config.get('TINYJX_THREADS') or thread_count()
    if _threads[0] != _threads[1]:
      load_library(source or LINALG).tjx_set_threads(int(_threads[1]))
      _threads[0] = _threads[1]

  def loop_node(self, plan: dict) -> 'LoopNode':
    """Not part of the contract: a compiled loop or cond, and the loops and conds nested in it, as one foreign call
    (`LoopNode`)."""
    return LoopNode(plan)

  def launch(self, program: 'CProgram', args, global_size=None, local_size=None) -> None:
    if _threads[0] != _threads[1]:   # OpenMP's thread count is process-wide: any library of ours can set it
      program.set_threads(int(_threads[1]))
      _threads[0] = _threads[1]
    program.fn(args)
    if program.library is not None:   # a quick build: its second run shows the program is not a one-off
      program.runs += 1
      if program.runs == 2: program.library.start_upgrade()

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

POOL_BYTES, POOL_ROWS = 64, 64   # outputs this small are rows of a shared block (see `_output_maker`)

# --- compiled loops: a COND, WHILE or SCAN whose sub-programs are kernels and such loops runs in one foreign call ---
LOOP_DRIVER = r"""#include <stdint.h>
#include <string.h>
typedef void (*tjx_entry)(void **);
typedef struct tjx_node tjx_node;
/* a step of a sub-program: a kernel entry called on the program's table, or (fn NULL) a nested loop or cond, whose
   sources and results are slots of that table */
typedef struct { tjx_entry fn; tjx_node *node; } tjx_step;
/* before an iteration t: table[slot] = base + t * stride (a scan's slice of xs, its row of ys) */
typedef struct { void **table; int64_t slot; char *base; int64_t stride; } tjx_slide;
/* after the program: bytes from src + t * src_stride to dst + t * dst_stride (an output that is no slot of its own) */
typedef struct { char *src; int64_t src_stride; char *dst; int64_t dst_stride; int64_t bytes; } tjx_copy;
/* before a node runs: *where = outer[slot], an address of the enclosing table put in one of the node's pointers */
typedef struct { void **where; int64_t slot; } tjx_bind;
/* bytes between outer[slot] and the node's own memory (a carry in, a carry out) */
typedef struct { char *own; int64_t slot; int64_t bytes; } tjx_move;
/* a sub-program: its steps, per parity its argument table, slides and copies; `runs` counts its runs */
typedef struct {
  int64_t n_steps; tjx_step *steps; void **tables[2];
  int64_t n_slides[2]; tjx_slide *slides[2];
  int64_t n_copies[2]; tjx_copy *copies[2];
  int64_t runs;
} tjx_prog;
/* kind 0: a while loop (progs: cond, body), 1: a scan of `length` (progs: body), 2: a cond (progs: the branches,
   the index a signed integer of index_bytes at outer[index_slot], clamped into range) */
struct tjx_node {
  int64_t kind, length, reverse, n_progs; tjx_prog *progs;
  uint8_t *flags[2];
  int64_t n_binds; tjx_bind *binds;
  int64_t n_ins; tjx_move *ins;
  int64_t n_outs; tjx_move *outs[2];
  int64_t index_slot, index_bytes;
};
int64_t tjx_run_node(tjx_node *n, void **outer);
static void tjx_run_prog(tjx_prog *g, int p, int64_t t) {
  for (int64_t i = 0; i < g->n_slides[p]; i++) {
    tjx_slide *s = &g->slides[p][i];
    s->table[s->slot] = s->base + t * s->stride;
  }
  void **table = g->tables[p];
  for (int64_t i = 0; i < g->n_steps; i++) {
    if (g->steps[i].fn) g->steps[i].fn(table);
    else tjx_run_node(g->steps[i].node, table);
  }
  for (int64_t i = 0; i < g->n_copies[p]; i++) {
    tjx_copy *c = &g->copies[p][i];
    memmove(c->dst + t * c->dst_stride, c->src + t * c->src_stride, (size_t)c->bytes);
  }
  g->runs++;
}
/* A loop's iterations alternate between two argument tables (parity p = it & 1): the body reads the carry of table
   p and writes the other one's. A while loop runs the condition first and stops when its flag is 0; a scan runs
   `length` iterations, t counting down when `reverse`. The carries come in before the first iteration and go out
   from the set the last one wrote. Returns the iterations run (1 for a cond). */
int64_t tjx_run_node(tjx_node *n, void **outer) {
  for (int64_t i = 0; i < n->n_binds; i++) *n->binds[i].where = outer[n->binds[i].slot];
  for (int64_t i = 0; i < n->n_ins; i++) memcpy(n->ins[i].own, outer[n->ins[i].slot], (size_t)n->ins[i].bytes);
  if (n->kind == 2) {
    const char *at = (const char *)outer[n->index_slot];
    int64_t b = n->index_bytes;
    int64_t i = b == 1 ? *(const int8_t *)at : b == 4 ? *(const int32_t *)at : *(const int64_t *)at;
    tjx_run_prog(&n->progs[i < 0 ? 0 : i >= n->n_progs ? n->n_progs - 1 : i], 0, 0);
    return 1;
  }
  tjx_prog *cond = n->kind == 0 ? &n->progs[0] : 0, *body = &n->progs[n->n_progs - 1];
  int64_t it = 0;
  for (;; it++) {
    int p = (int)(it & 1);
    if (!cond && it >= n->length) break;
    if (cond) {
      tjx_run_prog(cond, p, 0);
      if (!*n->flags[p]) break;
    }
    tjx_run_prog(body, p, n->reverse ? n->length - 1 - it : it);
  }
  tjx_move *outs = n->outs[it & 1];
  for (int64_t i = 0; i < n->n_outs; i++) memcpy(outer[outs[i].slot], outs[i].own, (size_t)outs[i].bytes);
  return it;
}
"""

_I64, _PTR, _I64x2, _PTRx2 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64 * 2, ctypes.c_void_p * 2
def _struct(name: str, fields: list):
  """LOOP_DRIVER's structure `name` as a ctypes Structure; `fields` (name, type) in the C order."""
  return type(name, (ctypes.Structure,), {'_fields_': fields})
_Step = _struct('tjx_step', [('fn', _PTR), ('node', _PTR)])
_Slide = _struct('tjx_slide', [('table', _PTR), ('slot', _I64), ('base', _PTR), ('stride', _I64)])
_Copy = _struct('tjx_copy', [('src', _PTR), ('src_stride', _I64), ('dst', _PTR), ('dst_stride', _I64),
                             ('bytes', _I64)])
_Bind = _struct('tjx_bind', [('where', _PTR), ('slot', _I64)])
_Move = _struct('tjx_move', [('own', _PTR), ('slot', _I64), ('bytes', _I64)])
_Prog = _struct('tjx_prog', [('n_steps', _I64), ('steps', _PTR), ('tables', _PTRx2), ('n_slides', _I64x2),
                             ('slides', _PTRx2), ('n_copies', _I64x2), ('copies', _PTRx2), ('runs', _I64)])
_Node = _struct('tjx_node', [('kind', _I64), ('length', _I64), ('reverse', _I64), ('n_progs', _I64), ('progs', _PTR),
                             ('flags', _PTRx2), ('n_binds', _I64), ('binds', _PTR), ('n_ins', _I64), ('ins', _PTR),
                             ('n_outs', _I64), ('outs', _PTRx2), ('index_slot', _I64), ('index_bytes', _I64)])

@lru_cache(None)
def _run_node():
  fn = load_library(LOOP_DRIVER).tjx_run_node
  fn.restype, fn.argtypes = ctypes.c_int64, [ctypes.c_void_p, ctypes.c_void_p]
  return fn

def _array(kind, rows: list):
  """A ctypes array of `kind` structures made from tuples of their fields (at least one element: never NULL)."""
  return (kind * max(len(rows), 1))(*[kind(*r) for r in rows])

class LoopNode:
  """A loop or cond as LOOP_DRIVER runs it, built from a plan (tinyjx.lower.steps.CompiledLoop.plan) and kept: the
  ctypes structures, the plan's tables and buffers alive with them. A plan is a dict: 'kind' (0 while, 1 scan, 2
  cond), 'length', 'reverse', 'progs' (each {'programs': a kernel's program or a nested plan per step, 'tables': two
  ctypes tables, 'slides' and 'copies': per parity lists of the fields' tuples}), 'flags' (two addresses), 'ins' and
  'outs' (per parity) lists of (own address, outer slot, bytes), 'index' (slot, bytes) and 'binds', (target, outer
  slot) with target ('table', prog, parity, slot), ('slide', prog, parity, i, 'base'), ('copy', prog, parity, i,
  'src' or 'dst') or ('flag', parity): where the node puts an address of the enclosing table before it runs.
  Quick builds count a program's runs after each call (`finish`), so the optimized build starts as after any second
  launch; entry points are read again when an upgrade has replaced them."""
  def __init__(self, plan: dict):
    self.plan, self.children, self.kernels = plan, [], []   # kernels: (step structure, program, fn it holds)
    progs = _array(_Prog, [()] * len(plan['progs']))
    self._keep = [progs]
    for g, prog in zip(progs, plan['progs']):
      steps = _array(_Step, [()] * len(prog['programs']))
      for st, item in zip(steps, prog['programs']):
        if isinstance(item, dict):
          child = item.get('node') or LoopNode(item)
          item['node'] = child
          self.children.append(child)
          st.node = ctypes.addressof(child.node)
        else:
          st.fn = ctypes.cast(item.fn, ctypes.c_void_p).value
          self.kernels.append((st, item, item.fn))
      slides = [_array(_Slide, rows) for rows in prog['slides']]
      copies = [_array(_Copy, rows) for rows in prog['copies']]
      g.n_steps, g.steps = len(prog['programs']), ctypes.addressof(steps)
      for p in range(2):
        g.tables[p] = ctypes.addressof(prog['tables'][p])
        g.n_slides[p], g.slides[p] = len(prog['slides'][p]), ctypes.addressof(slides[p])
        g.n_copies[p], g.copies[p] = len(prog['copies'][p]), ctypes.addressof(copies[p])
      self._keep += [steps, slides, copies]
      prog['structs'] = (slides, copies)
    self.progs = progs
    node = self.node = _Node(kind=plan['kind'], length=plan.get('length', 0), reverse=int(plan.get('reverse', 0)),
                             n_progs=len(plan['progs']), progs=ctypes.addressof(progs))
    for p, flag in enumerate(plan.get('flags', ())): node.flags[p] = flag
    binds = _array(_Bind, [(self._where(t), slot) for t, slot in plan['binds']])
    ins = _array(_Move, plan['ins'])
    outs = [_array(_Move, rows) for rows in plan['outs']]
    node.n_binds, node.binds = len(plan['binds']), ctypes.addressof(binds)
    node.n_ins, node.ins = len(plan['ins']), ctypes.addressof(ins)
    node.n_outs = len(plan['outs'][0])
    for p in range(2): node.outs[p] = ctypes.addressof(outs[p])
    node.index_slot, node.index_bytes = plan.get('index', (0, 0))
    self._keep += [binds, ins, outs]

  def _where(self, target: tuple) -> int:
    """The address of the pointer a bind sets."""
    kind, rest = target[0], target[1:]
    if kind == 'flag': return ctypes.addressof(self.node) + _Node.flags.offset + 8 * rest[0]
    prog = self.plan['progs'][rest[0]]
    if kind == 'table': return ctypes.addressof(prog['tables'][rest[1]]) + 8 * rest[2]
    slides, copies = prog['structs']
    row = (slides if kind == 'slide' else copies)[rest[1]][rest[2]]
    return ctypes.addressof(row) + getattr(type(row), rest[3]).offset

  def _refresh(self) -> None:
    """Entry points replaced by an upgrade since the last run are read again."""
    for i, (st, program, fn) in enumerate(self.kernels):
      if program.fn is not fn:
        st.fn = ctypes.cast(program.fn, ctypes.c_void_p).value
        self.kernels[i] = (st, program, program.fn)
    for child in self.children: child._refresh()

  def _first_program(self):
    """A kernel's program of the tree (any library of ours sets OpenMP's process-wide thread count), or None."""
    if self.kernels: return self.kernels[0][1]
    return next((p for p in (c._first_program() for c in self.children) if p is not None), None)

  def runs(self) -> list:
    """(plan of a sub-program, its runs since the last call) for every sub-program of the tree, the counts reset."""
    out = []
    for g, prog in zip(self.progs, self.plan['progs']):
      out.append((prog, g.runs))
      g.runs = 0
    for child in self.children: out += child.runs()
    return out

  def run(self, outer, parallel: bool) -> list:
    """Run the node on `outer` (a ctypes table of addresses by slot); returns `runs()`."""
    if parallel: _threads[1] = config.get('TINYJX_THREADS') or thread_count()
    first = self._first_program()
    if first is not None and _threads[0] != _threads[1]:
      first.set_threads(int(_threads[1]))
      _threads[0] = _threads[1]
    self._refresh()
    _run_node()(ctypes.addressof(self.node), ctypes.addressof(outer))
    done = self.runs()
    for prog, n in done:
      for item in prog['programs']:
        if n and not isinstance(item, dict) and item.library is not None:
          item.runs += n
          if item.runs >= 2: item.library.start_upgrade()
    return done

# --- linear algebra the CPU runs natively: lax.linalg's LU node (a runtime step, tinyjx.lower.steps.LuStep) ---
NATIVE_HEAD = r"""#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#else
#define omp_get_max_threads() 1
#define omp_get_thread_num() 0
#endif
int tjx_set_threads(int n) {   /* OpenMP's thread count is process-wide: as every library of ours, it can set it */
#ifdef _OPENMP
  if (n > 0) omp_set_num_threads(n);
  return omp_get_max_threads();
#else
  return 1;
#endif
}
"""

LINALG = NATIVE_HEAD + r"""
/* LU with partial pivoting of `batch` row-major m x n matrices, in place (lu holds a copy of the input), as the
   PYTHON device's lu_factor: step j takes the first row r >= j of largest |lu[r][j]| (the first NaN, if any), swaps
   it with row j, divides the entries below the pivot by it (by 1 where it is 0) and subtracts their products with
   the pivot row from the rows below, right of column j. The steps go in panels of TJX_LU_NB columns (LAPACK's
   getrf order): a panel's steps update only its own columns; then its rows right of it take their updates in
   step order (a forward substitution), and the rows below take the panel's TJX_LU_NB updates while each row is in
   L1, rather than one sweep of the whole trailing matrix per step. Every entry gets the same products subtracted
   in the same order as step by step, so the results are the same bit for bit. Rows are split among threads where
   the update is large enough to pay for it. */
#define TJX_LU_NB 16
#define TJX_LU_CHUNK(T, W) \
  for (; c + W <= n; c += W) { \
    T v[W]; \
    for (int q = 0; q < W; q++) v[q] = x[c + q]; \
    for (int64_t t = 0; t < count; t++) \
      for (int q = 0; q < W; q++) v[q] = v[q] - l[t] * u[t * n + c + q]; \
    for (int q = 0; q < W; q++) x[c + q] = v[q]; \
  }
#define TJX_LU(T, N, ABS) \
/* row x, right of column je: the products of its multipliers x[jb + t] with rows u + t * n (t < count) \
   subtracted in order t, W entries at a time held in registers through the count of them (64: four chains of \
   dependent subtractions to overlap, where one waits on the latency of each) */ \
static void tjx_lu_rows_##N(T *x, const T *u, int64_t count, int64_t jb, int64_t je, int64_t n) { \
  T l[TJX_LU_NB]; \
  for (int64_t t = 0; t < count; t++) l[t] = x[jb + t]; \
  int64_t c = je; \
  TJX_LU_CHUNK(T, 64) \
  TJX_LU_CHUNK(T, 16) \
  for (; c < n; c++) { \
    T v = x[c]; \
    for (int64_t t = 0; t < count; t++) v = v - l[t] * u[t * n + c]; \
    x[c] = v; \
  } \
} \
void tjx_lu_##N(T *lu, int32_t *piv, int32_t *perm, int64_t batch, int64_t m, int64_t n) { \
  const int64_t k = m < n ? m : n; \
  T *w = (T *)malloc((size_t)(TJX_LU_NB * (m > 0 ? m : 1)) * sizeof(T)); /* a panel, by columns */ \
  for (int64_t b = 0; b < batch; b++) { \
    T *a = lu + b * m * n; \
    int32_t *pv = piv + b * k, *pm = perm + b * m; \
    for (int64_t r = 0; r < m; r++) pm[r] = (int32_t)r; \
    for (int64_t jb = 0; jb < k; jb += TJX_LU_NB) { \
      const int64_t je = jb + TJX_LU_NB < k ? jb + TJX_LU_NB : k, nb = je - jb; \
      for (int64_t q = 0; q < nb; q++) \
        for (int64_t r = jb; r < m; r++) w[q * m + r] = a[r * n + jb + q]; \
      for (int64_t j = jb; j < je; j++) { \
        T *col = w + (j - jb) * m; \
        T best = 0; \
        int nan = 0; \
        _Pragma("omp simd reduction(max:best) reduction(|:nan)") \
        for (int64_t r = j; r < m; r++) { \
          const T v = ABS(col[r]); \
          best = v > best ? v : best; \
          nan |= v != v; \
        } \
        int64_t p = j; \
        if (nan) while (col[p] == col[p]) p++; \
        else while (ABS(col[p]) != best) p++; \
        if (p != j) { \
          for (int64_t c = 0; c < n; c++) { T t = a[j * n + c]; a[j * n + c] = a[p * n + c]; a[p * n + c] = t; } \
          for (int64_t q = 0; q < nb; q++) { T t = w[q * m + j]; w[q * m + j] = w[q * m + p]; w[q * m + p] = t; } \
          int32_t t = pm[j]; pm[j] = pm[p]; pm[p] = t; \
        } \
        pv[j] = (int32_t)p; \
        const T d = col[j] == 0 ? (T)1 : col[j]; \
        for (int64_t r = j + 1; r < m; r++) col[r] = col[r] / d; \
        for (int64_t q = j - jb + 1; q < nb; q++) { \
          T *other = w + q * m; \
          const T u = other[j]; \
          for (int64_t r = j + 1; r < m; r++) other[r] = other[r] - col[r] * u; \
        } \
      } \
      for (int64_t r = jb; r < m; r++) \
        for (int64_t q = 0; q < nb; q++) a[r * n + jb + q] = w[q * m + r]; \
      for (int64_t i = jb + 1; i < je; i++) tjx_lu_rows_##N(a + i * n, a + jb * n, i - jb, jb, je, n); \
      _Pragma("omp parallel for schedule(static) if((m - je) * (n - je) * (je - jb) > 1000000)") \
      for (int64_t r = je; r < m; r++) tjx_lu_rows_##N(a + r * n, a + jb * n, je - jb, jb, je, n); \
    } \
  } \
  free(w); \
}
TJX_LU(float, f32, fabsf)
TJX_LU(double, f64, fabs)
/* X with tril(l) X = b for `batch` pairs of row-major l (n x n) and b (n x k), into x (unit: the diagonal is taken
   as ones), as the PYTHON device's lower_solve: row i is b[i] less l[i][t] times row t of X for t = 0, 1, ... in
   order, then divided by l[i][i]. Columns go in slabs of TJX_TRSM_W (a slab of X stays in L1 while its rows are
   solved; threads take slabs where there are enough of them), rows four at a time: the four take the products of
   the rows above them together (eight independent chains of subtractions to overlap, where one row's chain waits
   on each subtraction's latency), then finish among themselves in order. */
#define TJX_TRSM_W 32
#define TJX_TRSM(T, N) \
static void tjx_trsm_slab_##N(const T *l, const T *b, T *x, int64_t n, int64_t k, int64_t unit, int64_t c0, \
                              int64_t w) { \
  int64_t i = 0; \
  for (; i + 4 <= n && w == TJX_TRSM_W; i += 4) { \
    T v[4][TJX_TRSM_W]; \
    for (int r = 0; r < 4; r++) \
      for (int q = 0; q < TJX_TRSM_W; q++) v[r][q] = b[(i + r) * k + c0 + q]; \
    for (int64_t t = 0; t < i; t++) { \
      const T *xt = x + t * k + c0; \
      const T l0 = l[i * n + t], l1 = l[(i + 1) * n + t], l2 = l[(i + 2) * n + t], l3 = l[(i + 3) * n + t]; \
      for (int q = 0; q < TJX_TRSM_W; q++) { \
        v[0][q] = v[0][q] - l0 * xt[q]; v[1][q] = v[1][q] - l1 * xt[q]; \
        v[2][q] = v[2][q] - l2 * xt[q]; v[3][q] = v[3][q] - l3 * xt[q]; \
      } \
    } \
    for (int r = 0; r < 4; r++) { \
      const T *li = l + (i + r) * n; \
      for (int s = 0; s < r; s++) \
        for (int q = 0; q < TJX_TRSM_W; q++) v[r][q] = v[r][q] - li[i + s] * x[(i + s) * k + c0 + q]; \
      for (int q = 0; q < TJX_TRSM_W; q++) x[(i + r) * k + c0 + q] = unit ? v[r][q] : v[r][q] / li[i + r]; \
    } \
  } \
  for (; i < n; i++) { \
    const T *li = l + i * n; \
    for (int64_t q = 0; q < w; q++) { \
      T v = b[i * k + c0 + q]; \
      for (int64_t t = 0; t < i; t++) v = v - li[t] * x[t * k + c0 + q]; \
      x[i * k + c0 + q] = unit ? v : v / li[i]; \
    } \
  } \
} \
void tjx_trsm_##N(const T *l0, const T *b0, T *x0, int64_t batch, int64_t n, int64_t k, int64_t unit) { \
  const int64_t slabs = (k + TJX_TRSM_W - 1) / TJX_TRSM_W; \
  for (int64_t g = 0; g < batch; g++) { \
    const T *l = l0 + g * n * n, *b = b0 + g * n * k; \
    T *x = x0 + g * n * k; \
    _Pragma("omp parallel for schedule(static) if(slabs > 1 && n * n * k > 200000)") \
    for (int64_t h = 0; h < slabs; h++) { \
      const int64_t c0 = h * TJX_TRSM_W; \
      tjx_trsm_slab_##N(l, b, x, n, k, unit, c0, c0 + TJX_TRSM_W < k ? TJX_TRSM_W : k - c0); \
    } \
  } \
}
TJX_TRSM(float, f32)
TJX_TRSM(double, f64)
"""

# --- jnp.fft's transforms of lengths of 2, 3, 5 and 7: the FFT node (a runtime step, tinyjx.lower.steps.FftStep) ---
FFT = NATIVE_HEAD + r"""
/* The DFT of `outer * inner` complex vectors of n points (n at least 2, its prime factors 2, 3, 5 and 7), the
   parts of point t of vector (o, i) interleaved at 2 (o n inner + t inner + i) of x, as complex values lie in memory,
   into y laid out the same; tw holds exp(-2 pi i k / n) for k < n, its real parts then its imaginary parts. The
   PYTHON device's fft_packed is the reference: the same operations in the same order.
   Vectors go a vector register's worth of lanes at a time (64 bytes with AVX-512: 16 float32, 8 float64; else 32
   bytes: 8 and 4; each lane is its own transform, so the width changes no result) through Stockham stages
   (decimation in frequency: x[p + k m] for k < radix -> y[radix p + r], the output in order, no bit reversal): the
   power of two in n as stages of radix 8 and one of radix 4 or 2 when its log2 is not a multiple of 3, then a stage
   for each odd prime factor, smallest first (`tjx_fft_radices`), point t of the lanes one vector of real parts and
   one of imaginary parts in a scratch, so every butterfly works on whole vectors. Lanes of adjacent
   columns (inner >= lanes) are read by the first stage and written by the last, pairs taken apart and put together
   by two shuffles; whole rows (inner = 1) go in and out of the scratch a lanes x lanes tile at a time, transposed in
   registers; anything else lane by lane. The twiddles of p = 0 are ones, and those products are skipped. The inverse
   (inv: exp(+2 pi i ...)) swaps the parts on the way in and on the way out (that is z -> i conj z, and DFT(i conj z)
   = i conj(IDFT z)): the shuffles' masks swap them. The results are multiplied by `scale` (rounded to T) as they are
   written (a norm: 1 / n). Threads take blocks of lanes. Returns -1 when the scratch cannot be had, -2 when n has a
   prime factor past TJX_FFT_ODD. */
#ifndef TJX_FFT_BYTES   /* (a test builds both widths) */
#ifdef __AVX512F__
#define TJX_FFT_BYTES 64
#else
#define TJX_FFT_BYTES 32   /* 64-byte vectors on AVX2 are pairs of registers: the 512 x 512 fft2 ran 5.5x slower */
#endif
#endif
typedef float tjx_vf32 __attribute__((vector_size(TJX_FFT_BYTES)));
typedef float tjx_uf32 __attribute__((vector_size(TJX_FFT_BYTES), aligned(4)));
typedef int32_t tjx_if32 __attribute__((vector_size(TJX_FFT_BYTES)));
typedef double tjx_vf64 __attribute__((vector_size(TJX_FFT_BYTES)));
typedef double tjx_uf64 __attribute__((vector_size(TJX_FFT_BYTES), aligned(8)));
typedef int64_t tjx_if64 __attribute__((vector_size(TJX_FFT_BYTES)));
#define TJX_LD(N, p) (*(const tjx_u##N *)(p))
#define TJX_ST(N, p, v) (*(tjx_u##N *)(p) = (v))
/* A lanes x lanes tile transposed in registers by swapping its off-diagonal blocks of h x h for h = lanes / 2, ...,
   1 (two-source shuffles with constant masks). */
#define TJX_FFT_SWAP(v, V, h, lo, hi) \
  _Pragma("GCC unroll 16") for (int i_ = 0; i_ < V; i_++) \
    if (!(i_ & h)) { const __typeof__(v[0]) a_ = v[i_], b_ = v[i_ + h]; \
                     v[i_] = __builtin_shuffle(a_, b_, lo); v[i_ + h] = __builtin_shuffle(a_, b_, hi); }
/* the 8-lane transpose: float32 in 32-byte vectors, float64 in 64-byte ones */
#define TJX_FFT_TRANSPOSE8(N) \
static inline __attribute__((always_inline)) void tjx_fft_transpose_##N(tjx_v##N *v) { \
  const tjx_i##N lo4 = {0, 1, 2, 3, 8, 9, 10, 11}, hi4 = {4, 5, 6, 7, 12, 13, 14, 15}; \
  const tjx_i##N lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15}; \
  const tjx_i##N lo1 = {0, 8, 2, 10, 4, 12, 6, 14}, hi1 = {1, 9, 3, 11, 5, 13, 7, 15}; \
  TJX_FFT_SWAP(v, 8, 4, lo4, hi4) TJX_FFT_SWAP(v, 8, 2, lo2, hi2) TJX_FFT_SWAP(v, 8, 1, lo1, hi1) \
}
#if TJX_FFT_BYTES == 64
static inline __attribute__((always_inline)) void tjx_fft_transpose_f32(tjx_vf32 *v) {
  const tjx_if32 lo8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
  const tjx_if32 hi8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
  const tjx_if32 lo4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27};
  const tjx_if32 hi4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31};
  const tjx_if32 lo2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
  const tjx_if32 hi2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
  const tjx_if32 lo1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30};
  const tjx_if32 hi1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
  TJX_FFT_SWAP(v, 16, 8, lo8, hi8) TJX_FFT_SWAP(v, 16, 4, lo4, hi4)
  TJX_FFT_SWAP(v, 16, 2, lo2, hi2) TJX_FFT_SWAP(v, 16, 1, lo1, hi1)
}
TJX_FFT_TRANSPOSE8(f64)
#else
TJX_FFT_TRANSPOSE8(f32)
static inline __attribute__((always_inline)) void tjx_fft_transpose_f64(tjx_vf64 *v) {
  const tjx_if64 lo2 = {0, 1, 4, 5}, hi2 = {2, 3, 6, 7}, lo1 = {0, 4, 2, 6}, hi1 = {1, 5, 3, 7};
  TJX_FFT_SWAP(v, 4, 2, lo2, hi2) TJX_FFT_SWAP(v, 4, 1, lo1, hi1)
}
#endif
/* A row of the scratch: a padding row after each eighth of the points of a power-of-two length (else the 8 rows a
   radix-8 butterfly reads lie a multiple of 4 KiB apart, in one set of the L1 cache); other lengths have no
   padding. */
#define TJX_ROW(e, sh, pad) ((e) + ((e) >> (sh)) * (pad))
/* Butterflies on vectors of lanes (of type tjx_v##N): X##k, point k of the source, at row i0 + k o; output r stored
   by Y(N, r, re, im) at row e0 + r s: TJX_YP as it is, TJX_YW times its twiddle (wr[r], wi[r]). A row is a vector
   of real parts at sr0 and one of imaginary parts at si0 (pk_in: a row of pairs at sr0), and the same for the
   destination (pk_out). TJX_DFT4: the radix-4 DFT of u0..u3 as outputs R0..R3; TJX_BFLY8: radix 8, as radix 2 (with
   the eighth roots of unity c8 (1 - i), -i, -c8 (1 + i)) and two radix-4 DFTs. */
#define TJX_PUT(N, a, re, im) { \
  const tjx_v##N pr_ = pk_out ? (re) * scale : (re), pi_ = pk_out ? (im) * scale : (im); \
  if (pk_out) { TJX_ST(N, dr0 + (a), __builtin_shuffle(pr_, pi_, lo)); \
                TJX_ST(N, dr0 + (a) + V, __builtin_shuffle(pr_, pi_, hi)); } \
  else { TJX_ST(N, dr0 + (a), pr_); TJX_ST(N, di0 + (a), pi_); } }
#define TJX_YP(N, r, re, im) TJX_PUT(N, TJX_ROW(e0 + (r) * s, shd, padd) * ds, re, im)
#define TJX_YW(N, r, re, im) { const tjx_v##N tr_ = re, ti_ = im; \
  TJX_PUT(N, TJX_ROW(e0 + (r) * s, shd, padd) * ds, wr[r] * tr_ - wi[r] * ti_, wr[r] * ti_ + wi[r] * tr_) }
#define TJX_CPLX(N, X, k) const int64_t X##a = TJX_ROW(i0 + (k) * o, shs, pads) * ss; \
  tjx_v##N X##r, X##i; \
  if (pk_in) { const tjx_v##N u_ = TJX_LD(N, sr0 + X##a), v_ = TJX_LD(N, sr0 + X##a + V); \
               X##r = __builtin_shuffle(u_, v_, ev); X##i = __builtin_shuffle(u_, v_, od); } \
  else { X##r = TJX_LD(N, sr0 + X##a); X##i = TJX_LD(N, si0 + X##a); }
#define TJX_DFT4(N, Y, Y0, u0, u1, u2, u3, R0, R1, R2, R3) { \
  const tjx_v##N apcr = u0##r + u2##r, apci = u0##i + u2##i, amcr = u0##r - u2##r, amci = u0##i - u2##i; \
  const tjx_v##N bpdr = u1##r + u3##r, bpdi = u1##i + u3##i, bmdr = u1##r - u3##r, bmdi = u1##i - u3##i; \
  Y0(N, R0, apcr + bpdr, apci + bpdi) Y(N, R1, amcr + bmdi, amci - bmdr) \
  Y(N, R2, apcr - bpdr, apci - bpdi) Y(N, R3, amcr - bmdi, amci + bmdr) }
#define TJX_BFLY8(N, Y) { \
  TJX_CPLX(N, x0, 0) TJX_CPLX(N, x1, 1) TJX_CPLX(N, x2, 2) TJX_CPLX(N, x3, 3) \
  TJX_CPLX(N, x4, 4) TJX_CPLX(N, x5, 5) TJX_CPLX(N, x6, 6) TJX_CPLX(N, x7, 7) \
  const tjx_v##N a0r = x0r + x4r, a0i = x0i + x4i, a1r = x1r + x5r, a1i = x1i + x5i; \
  const tjx_v##N a2r = x2r + x6r, a2i = x2i + x6i, a3r = x3r + x7r, a3i = x3i + x7i; \
  const tjx_v##N b0r = x0r - x4r, b0i = x0i - x4i, z1r = x1r - x5r, z1i = x1i - x5i; \
  const tjx_v##N z2r = x2r - x6r, z2i = x2i - x6i, z3r = x3r - x7r, z3i = x3i - x7i; \
  const tjx_v##N b1r = c8 * (z1r + z1i), b1i = c8 * (z1i - z1r), b2r = z2i, b2i = -z2r; \
  const tjx_v##N b3r = c8 * (z3i - z3r), b3i = -(c8 * (z3r + z3i)); \
  TJX_DFT4(N, Y, TJX_YP, a0, a1, a2, a3, 0, 2, 4, 6) TJX_DFT4(N, Y, Y, b0, b1, b2, b3, 1, 3, 5, 7) }
#define TJX_BFLY4(N, Y) { \
  TJX_CPLX(N, x0, 0) TJX_CPLX(N, x1, 1) TJX_CPLX(N, x2, 2) TJX_CPLX(N, x3, 3) \
  TJX_DFT4(N, Y, TJX_YP, x0, x1, x2, x3, 0, 1, 2, 3) }
/* An odd prime radix R (3, 5, 7): with the pairs' sums t_k = x_k + x_(R-k) and differences d_k = x_k - x_(R-k) for
   k = 1..R/2, output 0 is x_0 + the sums, and outputs r and R - r are A -+ i B, A = x_0 + sum_k cos(2 pi r k / R)
   t_k, B = sum_k sin(2 pi r k / R) d_k (the cosines and sines from tw: cs and sn). The arrays are indexed by
   constants once the loops are unrolled, so they stay in registers. */
#define TJX_BFLY_ODD(N, Y) { \
  tjx_v##N xr_[TJX_FFT_ODD], xi_[TJX_FFT_ODD], sr_[TJX_FFT_ODD / 2], si_[TJX_FFT_ODD / 2]; \
  tjx_v##N fr_[TJX_FFT_ODD / 2], fi_[TJX_FFT_ODD / 2]; \
  _Pragma("GCC unroll 8") for (int k = 0; k < R; k++) { TJX_CPLX(N, u, k) xr_[k] = ur; xi_[k] = ui; } \
  tjx_v##N y0r_ = xr_[0], y0i_ = xi_[0]; \
  _Pragma("GCC unroll 8") for (int k = 1; k <= R / 2; k++) { \
    sr_[k - 1] = xr_[k] + xr_[R - k]; si_[k - 1] = xi_[k] + xi_[R - k]; \
    fr_[k - 1] = xr_[k] - xr_[R - k]; fi_[k - 1] = xi_[k] - xi_[R - k]; \
    y0r_ = y0r_ + sr_[k - 1]; y0i_ = y0i_ + si_[k - 1]; } \
  TJX_YP(N, 0, y0r_, y0i_) \
  _Pragma("GCC unroll 8") for (int r = 1; r <= R / 2; r++) { \
    tjx_v##N ar_ = xr_[0] + cs[r] * sr_[0], ai_ = xi_[0] + cs[r] * si_[0], br_ = sn[r] * fr_[0], bi_ = sn[r] * fi_[0]; \
    _Pragma("GCC unroll 8") for (int k = 2; k <= R / 2; k++) { \
      const int j_ = r * k % R; \
      ar_ = ar_ + cs[j_] * sr_[k - 1]; ai_ = ai_ + cs[j_] * si_[k - 1]; \
      br_ = br_ + sn[j_] * fr_[k - 1]; bi_ = bi_ + sn[j_] * fi_[k - 1]; } \
    Y(N, r, ar_ + bi_, ai_ - br_) Y(N, R - r, ar_ - bi_, ai_ + br_) } }
/* a stage with its radix and its source's and destination's kinds as constants (each its own compiled loop) */
#define TJX_FFT_CALL(N, r, a, b) tjx_fft_stage_##N(r, a, b, sr0, si0, ss, shs, pads, dr0, di0, ds, shd, padd, \
                                                  twr, twi, n, len, s, ev, od, lo, hi, scale);
#define TJX_FFT_KINDS(N, r) { \
  if (!pk_out) { if (pk_in) TJX_FFT_CALL(N, r, 1, 0) else TJX_FFT_CALL(N, r, 0, 0) } \
  else { if (pk_in) TJX_FFT_CALL(N, r, 1, 1) else TJX_FFT_CALL(N, r, 0, 1) } }
#define TJX_FFT_ODD 7   /* the largest odd prime radix */
/* The radices of an n-point transform, in order, into radix (at most 64); their count, or 0 where n has a prime
   factor past TJX_FFT_ODD (python.py `fft_radices`, the same). */
static int tjx_fft_radices(int64_t n, int *radix) {
  int stages = 0, bits = __builtin_ctzll((unsigned long long)n);
  for (; bits >= 3; bits -= 3) radix[stages++] = 8;
  if (bits) radix[stages++] = 1 << bits;
  n >>= __builtin_ctzll((unsigned long long)n);
  for (int p = 3; p <= TJX_FFT_ODD; p += 2)
    for (; n % p == 0; n /= p) radix[stages++] = p;
  return n == 1 ? stages : 0;
}
#define TJX_FFT(T, N) \
/* The masks that take two vectors of pairs apart (even entries: real parts, odd: imaginary) and put two vectors of \
   parts together into pairs (the low halves, the high halves); `swap` (the inverse) exchanges the parts. */ \
static void tjx_fft_masks_##N(int swap, tjx_i##N *ev, tjx_i##N *od, tjx_i##N *lo, tjx_i##N *hi) { \
  enum { V = sizeof(tjx_v##N) / sizeof(T) }; \
  for (int j = 0; j < V; j++) { \
    (*ev)[j] = 2 * j + swap; (*od)[j] = 2 * j + 1 - swap; \
    (*lo)[j] = j / 2 + (j % 2 != swap) * V; (*hi)[j] = V / 2 + j / 2 + (j % 2 != swap) * V; \
  } \
} \
/* One stage of radix R (8, 4, 2 or an odd prime) of a transform of `len` points (n in all) on s interleaved \
   subsequences: source rows ss elements apart, destination rows ds apart. */ \
static inline __attribute__((always_inline)) void tjx_fft_stage_##N(const int R, const int pk_in, const int pk_out, \
    const T *sr0, const T *si0, int64_t ss, int shs, int64_t pads, T *dr0, T *di0, int64_t ds, int shd, int64_t padd, \
    const T *twr, const T *twi, int64_t n, int64_t len, int64_t s, tjx_i##N ev, tjx_i##N od, tjx_i##N lo, \
    tjx_i##N hi, T scale) { \
  enum { V = sizeof(tjx_v##N) / sizeof(T) }; \
  const int64_t m = len / R, step = n / len, o = s * m; \
  const T c8 = twr[n % 8 == 0 ? n / 8 : 0]; \
  T cs[TJX_FFT_ODD], sn[TJX_FFT_ODD]; \
  if (R % 2) for (int j = 0; j < R; j++) { cs[j] = twr[j * (n / R)]; sn[j] = -twi[j * (n / R)]; } \
  for (int64_t p = 0; p < m; p++) { \
    T wr[8], wi[8];   /* (R <= 8) */ \
    for (int r = 0; r < R; r++) { wr[r] = twr[r * p * step]; wi[r] = twi[r * p * step]; } \
    for (int64_t q = 0; q < s; q++) { \
      const int64_t i0 = q + s * p, e0 = q + R * s * p; \
      if (R == 2) { \
        TJX_CPLX(N, x0, 0) TJX_CPLX(N, x1, 1) \
        TJX_YP(N, 0, x0r + x1r, x0i + x1i) \
        if (p == 0) TJX_YP(N, 1, x0r - x1r, x0i - x1i) else TJX_YW(N, 1, x0r - x1r, x0i - x1i) \
      } else if (R == 4) { \
        if (p == 0) TJX_BFLY4(N, TJX_YP) else TJX_BFLY4(N, TJX_YW) \
      } else if (R == 8) { \
        if (p == 0) TJX_BFLY8(N, TJX_YP) else TJX_BFLY8(N, TJX_YW) \
      } else { \
        if (p == 0) TJX_BFLY_ODD(N, TJX_YP) else TJX_BFLY_ODD(N, TJX_YW) \
      } \
    } \
  } \
} \
static void tjx_fft_any_##N(int R, int pk_in, int pk_out, const T *sr0, const T *si0, int64_t ss, int shs, \
    int64_t pads, T *dr0, T *di0, int64_t ds, int shd, int64_t padd, const T *twr, const T *twi, int64_t n, \
    int64_t len, int64_t s, tjx_i##N ev, tjx_i##N od, tjx_i##N lo, tjx_i##N hi, T scale) { \
  if (R == 8) TJX_FFT_KINDS(N, 8) \
  else if (R == 4) TJX_FFT_KINDS(N, 4) \
  else if (R == 2) TJX_FFT_KINDS(N, 2) \
  else if (R == 3) TJX_FFT_KINDS(N, 3) \
  else if (R == 5) TJX_FFT_KINDS(N, 5) \
  else TJX_FFT_KINDS(N, 7) \
} \
int tjx_fft_##N(const T *x, T *y, const T *tw, int64_t outer, int64_t n, int64_t inner, int64_t inv, double scale_) { \
  const T scale = (T)scale_; \
  enum { V = sizeof(tjx_v##N) / sizeof(T) }; \
  const int64_t count = outer * inner; \
  const int64_t per = (inner + V - 1) / V, blocks = inner >= V ? outer * per : (count + V - 1) / V; \
  int radix[64]; \
  const int stages = tjx_fft_radices(n, radix); \
  if (stages == 0) return -2; \
  const int sh = n >= 8 ? (int)__builtin_ctzll((unsigned long long)n) - 3 : 0; \
  const int64_t pad = n >= 64 && (n & (n - 1)) == 0, rows = n + 8 * pad + 1;   /* one more row between the planes */ \
  const int threads = blocks > 1 && count * n > 4096 ? omp_get_max_threads() : 1; \
  T *scratch = aligned_alloc(64, (size_t)threads * 4 * rows * V * sizeof(T)); \
  if (scratch == NULL) return -1; \
  const T *twr = tw, *twi = tw + n; \
  tjx_i##N ev, od, lo, hi; \
  tjx_fft_masks_##N((int)inv, &ev, &od, &lo, &hi); \
  _Pragma("omp parallel num_threads(threads)") \
  { \
    T *mine = scratch + (int64_t)omp_get_thread_num() * 4 * rows * V; \
    T *buf[2][2] = {{mine, mine + rows * V}, {mine + 2 * rows * V, mine + 3 * rows * V}}; \
    _Pragma("omp for schedule(static)") \
    for (int64_t g = 0; g < blocks; g++) { \
      int64_t base[V], w; \
      int kind;   /* 0: lanes are V adjacent columns, 1: V whole rows (tiles), 2: lane by lane */ \
      if (inner >= V) { \
        const int64_t o = g / per, i0 = (g % per) * V; \
        w = inner - i0 < V ? inner - i0 : V; \
        for (int l = 0; l < V; l++) base[l] = o * n * inner + i0 + l; \
        kind = w == V ? 0 : 2; \
      } else { \
        const int64_t b0 = g * V; \
        w = count - b0 < V ? count - b0 : V; \
        for (int l = 0; l < V; l++) base[l] = ((b0 + l) / inner) * n * inner + (b0 + l) % inner; \
        kind = inner == 1 && w == V && n % V == 0 ? 1 : 2; \
      } \
      T *ar = buf[1][0], *ai = buf[1][1]; \
      if (kind == 1) { \
        for (int64_t t0 = 0; t0 < n; t0 += V) { \
          tjx_v##N vr[V], vi[V]; \
          for (int l = 0; l < V; l++) { \
            const T *src = x + 2 * (base[l] + t0); \
            const tjx_v##N u0 = TJX_LD(N, src), u1 = TJX_LD(N, src + V); \
            vr[l] = __builtin_shuffle(u0, u1, ev); vi[l] = __builtin_shuffle(u0, u1, od); \
          } \
          tjx_fft_transpose_##N(vr); tjx_fft_transpose_##N(vi); \
          for (int l = 0; l < V; l++) { \
            const int64_t a = TJX_ROW(t0 + l, sh, pad) * V; \
            TJX_ST(N, ar + a, vr[l]); TJX_ST(N, ai + a, vi[l]); \
          } \
        } \
      } else if (kind == 2) { \
        for (int64_t t = 0; t < n; t++) { \
          tjx_v##N vr = {0}, vi = {0}; \
          for (int l = 0; l < w; l++) { \
            vr[l] = x[2 * (base[l] + t * inner) + inv]; vi[l] = x[2 * (base[l] + t * inner) + 1 - inv]; \
          } \
          const int64_t a = TJX_ROW(t, sh, pad) * V; \
          TJX_ST(N, ar + a, vr); TJX_ST(N, ai + a, vi); \
        } \
      } \
      int64_t len = n, s = 1; \
      for (int k = 0; k < stages; k++) { \
        const int pk_in = kind == 0 && k == 0, pk_out = kind == 0 && k == stages - 1; \
        const T *sr = pk_in ? x + 2 * base[0] : buf[(k + 1) % 2][0], *si = buf[(k + 1) % 2][1]; \
        T *dr = pk_out ? y + 2 * base[0] : buf[k % 2][0], *di = buf[k % 2][1]; \
        tjx_fft_any_##N(radix[k], pk_in, pk_out, sr, si, pk_in ? 2 * inner : V, sh, pk_in ? 0 : pad, dr, di, \
                        pk_out ? 2 * inner : V, sh, pk_out ? 0 : pad, twr, twi, n, len, s, ev, od, lo, hi, scale); \
        len /= radix[k]; s *= radix[k]; \
      } \
      ar = buf[(stages + 1) % 2][0]; ai = buf[(stages + 1) % 2][1]; \
      if (kind == 1) { \
        for (int64_t t0 = 0; t0 < n; t0 += V) { \
          tjx_v##N vr[V], vi[V]; \
          for (int l = 0; l < V; l++) { \
            const int64_t a = TJX_ROW(t0 + l, sh, pad) * V; \
            vr[l] = TJX_LD(N, ar + a) * scale; vi[l] = TJX_LD(N, ai + a) * scale; \
          } \
          tjx_fft_transpose_##N(vr); tjx_fft_transpose_##N(vi); \
          for (int l = 0; l < V; l++) { \
            T *dst = y + 2 * (base[l] + t0); \
            TJX_ST(N, dst, __builtin_shuffle(vr[l], vi[l], lo)); \
            TJX_ST(N, dst + V, __builtin_shuffle(vr[l], vi[l], hi)); \
          } \
        } \
      } else if (kind == 2) { \
        for (int64_t t = 0; t < n; t++) { \
          const int64_t a = TJX_ROW(t, sh, pad) * V; \
          const tjx_v##N vr = TJX_LD(N, ar + a) * scale, vi = TJX_LD(N, ai + a) * scale; \
          for (int l = 0; l < w; l++) { \
            y[2 * (base[l] + t * inner) + inv] = vr[l]; y[2 * (base[l] + t * inner) + 1 - inv] = vi[l]; \
          } \
        } \
      } \
    } \
  } \
  free(scratch); \
  return 0; \
}
"""
# one library for each type, so a float32 program compiles only its half (GCC takes about half of the 9 s of both)
FFT_SOURCES = {sfx: FFT + f"TJX_FFT({t}, {sfx})\n" for sfx, t in (('f32', 'float'), ('f64', 'double'))}

_P, _I = ctypes.c_void_p, ctypes.c_int64
NATIVE_ROUTINES = {   # a routine of LINALG or FFT (its type suffix, _f32 or _f64, left off): source (or the sources by
  'tjx_lu': (LINALG, None, [_P] * 3 + [_I] * 3),          # suffix), result, arguments
  'tjx_trsm': (LINALG, None, [_P] * 3 + [_I] * 4),
  'tjx_fft': (FFT_SOURCES, ctypes.c_int, [_P] * 3 + [_I] * 4 + [ctypes.c_double]),
}

@lru_cache(None)
def _linalg(name: str):
  """The foreign function `name` (a NATIVE_ROUTINES entry with its type suffix) of its library, typed."""
  source, restype, argtypes = NATIVE_ROUTINES[name[:-4]]
  fn = getattr(load_library(source[name[-3:]] if isinstance(source, dict) else source), name)
  fn.restype, fn.argtypes = restype, argtypes
  return fn

def _output_maker(device: str, shape: tuple, dt):
  """`make()` -> a fresh NumpyBuffer of `shape` and `dt` with its `address` known. Its fields that are the same at
  every call (device, shape, dtype, key) are class attributes of a NumpyBuffer subclass made here, so a call sets
  only `data` and `address` (an instance attribute still overrides one: pmap relabels a buffer's device). An output
  of at most POOL_BYTES is the next unused row of a block of POOL_ROWS made at once (its address is the block's plus
  the row's offset; no row is handed out twice), so a tiny result costs no allocation and no address look-up; a row
  kept alive keeps its block (POOL_ROWS * POOL_BYTES bytes at most) alive. Larger outputs are arrays of their own,
  aligned by `host_empty`."""
  nbytes, np_dt = int(np.prod(shape, dtype=np.int64)) * dt.np.itemsize, dt.np
  fixed = {'_device': device, 'shape': shape, 'dtype': dt, 'key': (shape, device, dt.name)}
  new, kind = object.__new__, type('NumpyBuffer', (NumpyBuffer,), fixed)
  if nbytes == 0 or nbytes > POOL_BYTES:
    def make() -> NumpyBuffer:
      b = new(kind)
      b.data, b.address = host_empty(shape, np_dt)
      return b
    return make
  pool = [None, 0, POOL_ROWS]   # the block, its address, the next row
  def make() -> NumpyBuffer:
    block, base, i = pool
    if i == POOL_ROWS:
      block = np.empty((POOL_ROWS,) + shape, np_dt)
      base, i = address(block), 0
      pool[0], pool[1] = block, base
    pool[2] = i + 1
    b = new(kind)
    b.data, b.address = block[i, ...], base + i * nbytes
    return b
  return make

def contiguous_address(a: np.ndarray) -> int:
  """`address(a)` for a C-contiguous array, 0 for any other (a kernel reads its operands as dense rows)."""
  return address(a) if a.flags.c_contiguous else 0

class CProgram:
  """A loaded entry point and the library's thread-count setter; `library` is its quick build's Library until the
  optimized build replaces it (None after, and for a final build), `runs` counts its launches until then."""
  __slots__ = ('fn', 'set_threads', 'library', 'runs')
  def __init__(self, fn, set_threads, library=None): self.fn, self.set_threads, self.library, self.runs = \
    fn, set_threads, library, 0

@lru_cache(None)
def _tables(count: int): return ctypes.c_void_p * max(count, 1)

_threads = [None, 1]   # the count OpenMP has now, the count the current run asked for
_auto = [-1.0, 1, 0]    # [when last read, the thread count, the other processes' running threads seen then]

def thread_count() -> int:
  """Threads for kernels when TINYJX_THREADS is 0: the usable cores minus the threads other processes are
  running right now, so a busy machine does not leave kernels waiting at their barriers for descheduled
  threads. Re-read at most once a second; a thread counts as busy when two readings in a row see it (a process
  that runs for an instant, the very moment of one reading, would otherwise halve a second of kernels). (Not the
  load average: it is a minute long and counts this process's own work, so after a busy minute a quiet machine
  still looked full.)"""
  now = time.monotonic()
  if now - _auto[0] > 1.0:
    cores = usable_cores()
    others = _others_running()
    _auto[:] = [now, max(1, min(cores, cores - min(others, _auto[2]))), others]
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
