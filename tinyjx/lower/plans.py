"""plans: a jitted program's lowering kept on disk, so a new process that traces the same program skips the passes.

DESIGN section 11 wants a warm disk cache to make a second process start fast. The compiled library is cached by
its source (devices/cpu.py); this module caches what leads to the source: the plan, everything the `Executable`
reads from a `Lowering` (the slots and which are inputs and outputs, the runs of kernels, each kernel's name and
cost estimate, the arena layout) and the source itself. A warm process traces, finds the plan, loads the library
by the plan's source, and runs: no simplify, schedule, index, optimize or render.

Keys and safety: the plan's key is a hash of the jaxpr's content key, the device's kind and the facts the lowering
reads off it, the settings that change code (x64), and the text of tinyjx's own modules, so a changed tinyjx never
reads a plan an older one wrote. Plans are JSON (loading one runs nothing) in the device's disk cache with the
cache's checksums and ownership checks; a plan that is missing, damaged, not JSON of the expected form, or that
records another key is ignored, and the program is lowered again and its plan written anew. Only programs made of
kernels alone are kept (no runtime steps, no constants of the trace, no effects), and only from `MIN_KERNELS`
kernels up; a lowering that must be watched (DEBUG of 3 and up, VIZ) always runs its passes.
"""
from __future__ import annotations
import functools, hashlib, json, os
from tinyjx import dtypes, settings as config
from tinyjx.devices import diskcache
from tinyjx.lower.index import Kernel
from tinyjx.lower.runtime import Slot, KernelCall

FORMAT = 1

@functools.lru_cache(None)
def code_version() -> str:
  """A hash of the text of every module of the tinyjx package: what the plans of this tinyjx are keyed by."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  h = hashlib.sha256()
  for folder, dirs, files in sorted(os.walk(root)):
    dirs.sort()
    for name in sorted(f for f in files if f.endswith('.py')):
      with open(os.path.join(folder, name), 'rb') as f: h.update(name.encode() + b'\0' + f.read())
  return h.hexdigest()

MIN_KERNELS = 4   # a program of fewer kernels lowers in a few milliseconds: no plan is written for it

def key_of(device, jaxpr, passes: list) -> str | None:
  """The plan key of `jaxpr` on `device` lowered by `passes` (the pipeline's list: a pass replaced at run time makes
  another key), or None where plans are not used (see the module docstring)."""
  if jaxpr.name == "eager" or jaxpr.effects or device.kernel_shape != 'loops' or device.renderer != 'C': return None
  if config.get('DEBUG') >= 3 or config.get('VIZ'): return None
  pipeline = [(name, fn.__module__, fn.__qualname__) for name, fn in passes]
  text = "|".join(map(str, (FORMAT, jaxpr.key, device.kind, device.renderer, device.vector_bytes,
                            config.get('JAX_ENABLE_X64'), pipeline, code_version())))
  return hashlib.sha256(text.encode()).hexdigest()[:32]

def _path(key: str) -> str: return os.path.join(diskcache.cache_dir(), key + '.plan')

def save(key: str, st) -> None:
  """Write the plan of the finished lowering `st`, when its program is made of kernels alone."""
  if st.consts or len(st.kernels) < MIN_KERNELS: return
  if not all(isinstance(s, KernelCall) and s.slots is None for s in st.steps): return
  plan = {'format': FORMAT, 'key': key, 'source': st.source,
          'slots': [[s.kind, list(s.shape), s.dtype.name] for s in st.slots],
          'in_slots': st.in_slots, 'out_slots': st.out_slots,
          'out_plan': [[kind, ref, dt.name] for kind, ref, dt in st.out_plan],
          'offsets': [[slot, off] for slot, off in st.offsets.items()], 'arena_bytes': st.arena_bytes,
          'steps': [[s.entry, s.kernels] for s in st.steps],
          'kernels': [[k.name, list(k.outs), int(k.flops), int(k.nbytes)] for k in st.kernels]}
  diskcache.write_checked(_path(key), json.dumps(plan).encode())

def load(key: str, st):
  """Fill the empty lowering `st` from the plan stored under `key`; returns it, or None when there is no usable
  plan (the caller lowers the program then)."""
  data = diskcache.read_checked(_path(key))
  if data is None: return None
  try:
    plan = json.loads(data)
    if plan['format'] != FORMAT or plan['key'] != key: return None
    st.source = plan['source']
    st.slots = [Slot(kind, tuple(shape), dtypes.NAMES[dt]) for kind, shape, dt in plan['slots']]
    st.in_slots, st.out_slots = list(plan['in_slots']), list(plan['out_slots'])
    st.out_plan = [(kind, ref, dtypes.NAMES[dt]) for kind, ref, dt in plan['out_plan']]
    st.offsets, st.arena_bytes = {slot: off for slot, off in plan['offsets']}, int(plan['arena_bytes'])
    st.steps = [KernelCall(entry, list(kernels)) for entry, kernels in plan['steps']]
    st.kernels = [Kernel(name, [], [], tuple(outs), [], flops, nbytes) for name, outs, flops, nbytes in plan['kernels']]
  except (ValueError, KeyError, TypeError):   # not JSON, or not a plan of this form: lowered again
    return None
  if not isinstance(st.source, str) or len(st.in_slots) != len(st.params): return None
  return st
