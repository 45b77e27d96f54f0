"""settings: every knob of tinyjx, each an environment variable and a scoped context.

`get(name)` reads the innermost `Context` that set the knob, else the environment variable of the same
name, else the default below. `Context(DEBUG=2)` is a `with` block; `set(name, value)` changes the
process-wide value (what `jax.config.update` does). This module imports nothing else of tinyjx.

The environment is read once per knob (the first time it is asked for), as JAX reads its flags once: a knob
read costs a few dictionary look-ups, cheap enough for every jit call. `reload_environment()` forgets what
was read. A layer that must react when a knob changes (the NaN checker installs its hooks only while it is
on) registers a function in `watchers[name]`; it runs after every `set` and `Context` enter or exit that
touches that knob.
"""
from __future__ import annotations
import contextlib, os, threading

# name -> (default, parser). Values from the environment are strings and go through the parser.
def _bool(s): return str(s).lower() not in ('0', 'false', 'no', 'off', '')
def _mode(s): return str(s).lower() if _bool(s) else ''   # a named mode, or '' for off ('0', 'off' ...)
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
  'JAX_DEBUG_NANS': (False, _bool),  # raise FloatingPointError naming the first equation that made a NaN
  'JAX_DEBUG_INFS': (False, _bool),  # the same for +-inf
  'JAX_EXPLAIN_CACHE_MISSES': (False, _bool),  # print why each jit retrace happened (also at DEBUG>=1)
  'VIZ': ('', _mode),               # '1': serve a page of each jitted function's pipeline; 'file': write it as HTML
  'TINYJX_VIZ_DIR': ('', str),      # where VIZ=file writes its pages ('' means a new temporary directory)
  'TINYJX_VIZ_PORT': (0, int),      # the localhost port VIZ=1 serves on (0: one the system picks)
}
_process: dict = {}
class _Local(threading.local):
  def __init__(self): self.stack = []   # runs once in each thread that touches it
_local = _Local()

def _stack() -> list: return _local.stack

_from_env: dict = {}   # name -> the value the environment (or the default) gave, read once
watchers: dict = {}    # name -> [function()] run after the knob changes (set, Context enter and exit)
_epoch = [0]           # bumped by every process-wide change (set, reload_environment)

def epoch() -> int | None:
  """A number that stays the same while no knob's value can change for this thread: None inside a Context (its
  values are this thread's alone), else a count that `set` and `reload_environment` bump. A cache of values
  derived from knobs (jit's hit path) is valid while `epoch()` returns the number it was filled under."""
  return None if _local.stack else _epoch[0]

def get(name: str):
  """The current value of knob `name`: innermost Context, then process setting, then environment, then default."""
  stack = _local.stack
  if stack:
    for frame in reversed(stack):
      if name in frame: return frame[name]
  if name in _process: return _process[name]
  try:
    return _from_env[name]
  except KeyError:
    return _read_env(name)

def _read_env(name: str):
  default, parse = KNOBS[name]
  env = os.environ.get(name)
  _from_env[name] = default if env is None else parse(env)
  return _from_env[name]

def reload_environment() -> None:
  """Read every knob's environment variable again at its next use (after changing os.environ in-process)."""
  _from_env.clear()
  _epoch[0] += 1
  for name in list(watchers): _notify(name)

def set(name: str, value) -> None:  # noqa: A001 - mirrors jax.config.update
  """Set knob `name` for the whole process (like `jax.config.update(name, value)`)."""
  _check(name)
  _process[name] = value
  _epoch[0] += 1
  _notify(name)

def _notify(name: str) -> None:
  for fn in watchers.get(name, ()): fn()

def _check(name):
  if name not in KNOBS:
    raise KeyError(f"unknown tinyjx setting {name!r}; known settings: {', '.join(sorted(KNOBS))}")

def scoped() -> dict:
  """The knobs this thread's open Contexts set (innermost wins): what a worker thread needs to act for this one,
  with `Context(**scoped())`."""
  out: dict = {}
  for frame in _local.stack: out.update(frame)
  return out

class Context(contextlib.ContextDecorator):
  """Scoped settings: `with tinyjx.Context(DEBUG=2): ...` (also usable as a decorator)."""
  def __init__(self, **kwargs):
    for k in kwargs: _check(k)
    self.kwargs = kwargs
  def __enter__(self):
    _stack().append(self.kwargs)
    self._tell()
    return self
  def __exit__(self, *exc):
    _stack().pop()
    self._tell()
    return False
  def _tell(self):
    if watchers:
      for k in self.kwargs: _notify(k)

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
