"""counters: process-wide event counts that tests and users read from Python (DESIGN section 10).

Every layer counts what it does with `counters.add(name, n)`; `snapshot()` returns a copy of all counts
and `reset()` zeroes them. `measure()` counts one block: `with counters.measure() as c: f(x)` leaves the
counts of that block in `c`. The names are fixed in `NAMES` (a misspelled name is an error, not a
silent new counter); a layer that needs a new one registers it once with `define(name, meaning)`.

Who counts what:
- jit (`transforms/jit.py`): traces, compiles, cache_hits, cache_misses.
- compiled devices (`lower/`, `devices/cpu.py`): kernels, flops, bytes, per kernel launch. The PYTHON
  device interprets jaxprs op by op and launches no kernels, so it counts none of these.

Counting is one dict update; it is always on (no DEBUG level needed), so `add` must stay that cheap.
"""
from __future__ import annotations
import contextlib

NAMES: dict[str, str] = {
  'kernels': "compiled kernels launched",
  'flops': "floating-point (and integer) operations done by launched kernels, as the lowering estimates them",
  'bytes': "bytes read and written by launched kernels (global memory traffic)",
  'traces': "Python functions traced by jit (a cache miss, or the staged API's trace)",
  'compiles': "executables built by a device's compile_jaxpr for jit",
  'cache_hits': "jit calls that found their executable in the cache",
  'cache_misses': "jit calls that had to trace (a new signature, static value, device or setting)",
}
_counts: dict[str, int] = {name: 0 for name in NAMES}

def define(name: str, meaning: str) -> None:
  """Register a new counter `name` (starting at 0); defining an existing name again keeps its count.

  >>> define('disk_cache_hits', "compiled libraries loaded from the disk cache")
  >>> get('disk_cache_hits') >= 0
  True
  """
  NAMES.setdefault(name, meaning)
  _counts.setdefault(name, 0)

def add(name: str, n: int = 1) -> None:
  """Add `n` to counter `name`.

  >>> before = get('kernels'); add('kernels', 2); get('kernels') - before
  2
  """
  try:
    _counts[name] += n
  except KeyError:
    raise KeyError(f"unknown counter {name!r}; counters are {', '.join(sorted(NAMES))} "
                   "(register a new one with tinyjx.counters.define(name, meaning))") from None

def add_many(pairs: tuple) -> None:
  """`add(name, n)` for each (name, n) of `pairs`, in one call (the jit hit path counts a run this way).

  >>> before = get('kernels'); add_many((('kernels', 2), ('flops', 0))); get('kernels') - before
  2
  """
  try:
    for name, n in pairs: _counts[name] += n
  except KeyError:
    for name, _ in pairs: add(name, 0)   # raises the helpful KeyError

def get(name: str) -> int:
  """The current value of counter `name`."""
  if name not in _counts: add(name, 0)  # raises the helpful KeyError
  return _counts[name]

def snapshot() -> dict[str, int]:
  """A copy of every counter: `{'kernels': 3, 'traces': 1, ...}`.

  >>> isinstance(snapshot()['traces'], int)
  True
  """
  return dict(_counts)

def reset() -> None:
  """Set every counter to 0."""
  for name in _counts: _counts[name] = 0

def diff(before: dict, after: dict | None = None) -> dict[str, int]:
  """Counts since the snapshot `before` (up to `after`, default now), one entry per counter."""
  after = snapshot() if after is None else after
  return {name: after.get(name, 0) - before.get(name, 0) for name in after}

@contextlib.contextmanager
def measure():
  """Count one block: on exit the yielded dict holds what happened inside it, one entry per counter.

  >>> with measure() as c: add('traces')
  >>> c['traces']
  1
  """
  before, counts = snapshot(), {}
  try:
    yield counts
  finally:
    counts.update(diff(before))
