"""compile: C source to a loaded shared library, through a per-user disk cache.

The compiler is `$CC`, else the first of `cc`, `gcc`, `clang` on PATH. Flags are probed once per compiler
version (the result is cached): `-O3 -march=native -fopenmp` where the compiler has them, falling back to
`-fopenmp-simd` and then to no OpenMP; always `-fwrapv` (integer overflow wraps, as numpy's does),
`-ffp-contract=off` (no fused multiply-add unless a kernel asks for one: results match the reference),
`-fno-math-errno` and `-fno-trapping-math` (neither changes a value; they let conditional code vectorize).

The cache directory is `TINYJX_CACHE_DIR`, else `~/.cache/tinyjx`. It is created with mode 0700 and used
only if the current user owns it and nobody else can write to it: a library planted by someone else is
never loaded (a private temporary directory is used instead, with a warning). An entry is
`<key>.so` plus `<key>.sha256`, the library's checksum, where key = sha256(source, compiler path and
version, flags, host CPU). Both are written to a temporary name and renamed, so a crash never leaves a
half-written entry under the final name; an entry whose checksum does not match, or that fails to load,
is rebuilt. The source of every build is kept as `<key>.c` next to it, so a compiler error can point at it.
"""
from __future__ import annotations
import ctypes, hashlib, os, platform, re, shutil, subprocess, tempfile, threading, warnings
from functools import lru_cache
from tinyjx import settings as config

class NoCompilerError(RuntimeError):
  """No C compiler is available for the CPU device."""

class CompileError(RuntimeError):
  """The C compiler rejected generated source."""

BASE_FLAGS = ['-O3', '-march=native', '-fPIC', '-shared', '-std=gnu11', '-fwrapv', '-fno-strict-aliasing',
              '-fno-math-errno', '-fno-trapping-math', '-ffp-contract=off']
_lock = threading.Lock()
_loaded: dict = {}
_private_dir: list = []

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
  d = cache_dir()
  base_flags = BASE_FLAGS + workarounds(cc)
  tag = hashlib.sha256(f"{cc}|{compiler_version(cc)}|{base_flags}".encode()).hexdigest()[:16]
  memo = os.path.join(d, f"flags-{tag}.txt")
  if _safe_file(memo):
    with open(memo) as f: return tuple(f.read().split())
  for extra, base in ((['-fopenmp'], base_flags), (['-fopenmp-simd'], base_flags), ([], base_flags),
                      ([], [f for f in base_flags if f != '-march=native'])):
    flags = tuple(base + extra)
    with tempfile.TemporaryDirectory() as tmp:
      src, out = os.path.join(tmp, 'p.c'), os.path.join(tmp, 'p.so')
      with open(src, 'w') as f: f.write(PROBE)
      if subprocess.run([cc, *flags, src, '-o', out], capture_output=True).returncode == 0:
        _atomic_write(memo, " ".join(flags).encode())
        return flags
  raise NoCompilerError(f"the C compiler {cc} ({compiler_version(cc)}) cannot build shared libraries; install gcc "
                        "(`apt-get install gcc`) or set TINYJX_DEVICE=PYTHON")

# --- the cache directory ---
def cache_dir() -> str:
  """The per-user cache directory, created 0700; a private temporary one if the configured one is not safe."""
  d = os.path.abspath(os.path.expanduser(config.get('TINYJX_CACHE_DIR') or os.path.join('~', '.cache', 'tinyjx')))
  try:
    os.makedirs(d, mode=0o700, exist_ok=True)
    if _safe_dir(d): return d
    why = "it is not owned by you or other users can write to it"
  except OSError as e:
    why = str(e)
  if not _private_dir:
    _private_dir.append(tempfile.mkdtemp(prefix='tinyjx-'))
    warnings.warn(f"tinyjx: not using the cache directory {d} ({why}); compiled kernels go to {_private_dir[0]} "
                  "for this process. Fix the directory's owner and permissions (chmod 700) or set TINYJX_CACHE_DIR.")
  return _private_dir[0]

def _safe_dir(d: str) -> bool:
  st = os.stat(d)
  return st.st_uid == os.getuid() and not st.st_mode & 0o022

def _safe_file(path: str) -> bool:
  try:
    st = os.stat(path)
  except OSError:
    return False
  return st.st_uid == os.getuid() and not st.st_mode & 0o022

def _atomic_write(path: str, data: bytes) -> None:
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.tmp-')
  try:
    with os.fdopen(fd, 'wb') as f: f.write(data)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp): os.unlink(tmp)
    raise

# --- building and loading ---
def cache_key(source: str, cc: str, flags: tuple) -> str:
  text = "\0".join([source, cc, compiler_version(cc), " ".join(flags), host_cpu()])
  return hashlib.sha256(text.encode()).hexdigest()[:32]

def load_library(source: str) -> ctypes.CDLL:
  """The shared library built from `source` (from memory, from the disk cache, or compiled now).

  >>> load_library("int tjx_seven(void) { return 7; }").tjx_seven()
  7
  """
  cc = find_compiler()
  flags = compiler_flags(cc)
  key = cache_key(source, cc, flags)
  if key in _loaded: return _loaded[key]
  with _lock:
    d = cache_dir()
    so = os.path.join(d, key + '.so')
    lib = _load_checked(so)
    if lib is None:
      _build(cc, flags, source, so)
      lib = _load_checked(so)
      if lib is None: raise CompileError(f"the library {so} was built but cannot be loaded")
    _loaded[key] = lib
    return lib

def _load_checked(so: str):
  """The library at `so` if its checksum matches and it loads; None if it is absent, corrupt or unsafe."""
  sha = so[:-3] + '.sha256'
  if not (_safe_file(so) and _safe_file(sha)): return None
  with open(so, 'rb') as f: digest = hashlib.sha256(f.read()).hexdigest()
  with open(sha) as f:
    if f.read().strip() != digest: return None
  try:
    return ctypes.CDLL(so)
  except OSError:
    return None

def _build(cc: str, flags: tuple, source: str, so: str) -> None:
  c_path = so[:-3] + '.c'
  _atomic_write(c_path, source.encode())
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(so), prefix='.tmp-', suffix='.so')
  os.close(fd)
  try:
    res = subprocess.run([cc, *flags, c_path, '-o', tmp, '-lm'], capture_output=True, text=True)
    if res.returncode != 0:
      raise CompileError(f"the C compiler failed on generated kernel source ({c_path}):\n{res.stderr.strip()}\n"
                         f"command: {cc} {' '.join(flags)} {c_path} -o {so} -lm")
    with open(tmp, 'rb') as f: digest = hashlib.sha256(f.read()).hexdigest()
    os.replace(tmp, so)
    _atomic_write(so[:-3] + '.sha256', digest.encode())
  finally:
    if os.path.exists(tmp): os.unlink(tmp)
