"""settings: every knob of tinyjx, each an environment variable and a scoped context.

`get(name)` reads the innermost `Context` that set the knob, else the environment variable of the same
name, else the default below. `Context(DEBUG=2)` is a `with` block; `set(name, value)` changes the
process-wide value (what `jax.config.update` does). This module imports nothing else of tinyjx.
"""
from __future__ import annotations
import contextlib, os, threading

# name -> (default, parser). Values from the environment are strings and go through the parser.
def _bool(s): return str(s).lower() not in ('0', 'false', 'no', 'off', '')
KNOBS: dict = {
  'DEBUG': (0, int),               # 1 jit cache hits/misses, 2 kernel timing, 3 kernels, 4 source, 5+ pass IR
  'NOJIT': (0, int),               # run jit-decorated functions eagerly
  'JAX_ENABLE_X64': (False, _bool),  # 64-bit types stay 64-bit instead of canonicalizing to 32-bit
  'TINYJX_DEVICE': ('', str),       # default device name ('' picks the best available)
  'TINYJX_CACHE_DIR': ('', str),    # compiled-kernel cache ('' means ~/.cache/tinyjx)
  'TINYJX_CACHE_MAX_MB': (1024.0, float),  # bound on the kernel cache; least recently used entries go (0: none)
  'TINYJX_CPU_DEVICES': (1, int),   # number of virtual CPU devices
  'TINYJX_CL_PLATFORM': (0, int),   # which OpenCL platform (of those with devices) the CL device uses
  'TINYJX_COLLECTIVE_TIMEOUT': (120.0, float),  # seconds a collective waits for the other devices/processes
  'TINYJX_THREADS': (0, int),       # OpenMP threads for CPU kernels (0: the cores other processes leave idle)
  'TINYJX_EAGER_COMPILE_MS': (50.0, float),  # interpreter time after which an eager program is compiled (0: at once)
}
_process: dict = {}
_local = threading.local()

def _stack() -> list:
  try:
    return _local.stack
  except AttributeError:
    _local.stack = []
    return _local.stack

_parsed: dict = {}   # (name, raw environment string) -> parsed value, so a read costs two dict lookups

def get(name: str):
  """The current value of knob `name`: innermost Context, then process setting, then environment, then default."""
  stack = _stack()
  for frame in reversed(stack):
    if name in frame: return frame[name]
  if name in _process: return _process[name]
  env = os.environ.get(name)
  key = (name, env)
  if key not in _parsed:
    default, parse = KNOBS[name]
    _parsed[key] = default if env is None else parse(env)
  return _parsed[key]

def set(name: str, value) -> None:  # noqa: A001 - mirrors jax.config.update
  """Set knob `name` for the whole process (like `jax.config.update(name, value)`)."""
  _check(name)
  _process[name] = value

def _check(name):
  if name not in KNOBS:
    raise KeyError(f"unknown tinyjx setting {name!r}; known settings: {', '.join(sorted(KNOBS))}")

class Context(contextlib.ContextDecorator):
  """Scoped settings: `with tinyjx.Context(DEBUG=2): ...` (also usable as a decorator)."""
  def __init__(self, **kwargs):
    for k in kwargs: _check(k)
    self.kwargs = kwargs
  def __enter__(self):
    _stack().append(self.kwargs)
    return self
  def __exit__(self, *exc):
    _stack().pop()
    return False

class _Config:
  """`tinyjx.config.update('jax_enable_x64', True)`, as in JAX."""
  def update(self, name: str, value) -> None:
    set(name.upper(), value)
  def read(self, name: str):
    return get(name.upper())
  def __getattr__(self, name):
    if name.upper() in KNOBS: return get(name.upper())
    raise AttributeError(name)

config = _Config()
