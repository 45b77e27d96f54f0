"""runtime: the Executable, a compiled program replayed as a list of steps over a table of buffer slots.

A program has one slot per buffer: inputs (bound per run), constants (BUFFER leaves of the jaxpr, bound at
compile time), outputs (fresh numpy arrays on every run, so no result ever aliases an earlier one) and
intermediates (placed in one arena by `memory.plan`; an arena up to `KEEP_ARENA` bytes is kept and reused
by the next run unless another thread is using it). `run` fills a ctypes array of slot pointers and runs
the steps in order.

The step interface, for runtime steps that are not kernels (control flow, collectives):

    class Step:
      reads: set[int]; writes: set[int]          # slots, for memory planning
      def run(self, frame: Frame) -> None: ...    # read frame.array(slot), write into frame.array(slot)

`Frame.array(slot)` is a numpy view of a slot's memory (shape and dtype from the program), and
`frame.ptrs` the ctypes pointer table kernels receive. A step writes its results into the arrays of its
output slots (`np.copyto`), which are allocated before it runs. `step_rules[op](node, program, slots)`
builds the step for a scheduled node of kind `op` (COND, WHILE, SCAN, collectives ...): `program` is the
`Lowering` (its `slot_of` maps the node's sources to slots), `slots` the output slots (None where an output
is unused). That table is how the control-flow and collective layers plug their runtime steps in; a kind
with no entry runs as an `InterpretedStep` (the PYTHON device's rule on the step's buffers), correct but
not compiled. `KernelCall` (a run of consecutive kernels, one foreign call into the generated `tjx_run_N`
entry) is the step every program has.
"""
from __future__ import annotations
import ctypes, os, threading, time
from dataclasses import dataclass, field
import numpy as np
from tinyjx import settings as config
from tinyjx.devices.python import NumpyBuffer

step_rules: dict = {}   # Ops -> fn(node, program, slots) -> Step
KEEP_ARENA = 64 << 20   # an executable keeps its intermediates' memory between runs up to this size

@dataclass
class Slot:
  kind: str                       # 'in', 'const', 'out', 'tmp'
  shape: tuple
  dtype: object
  @property
  def nbytes(self) -> int: return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.np.itemsize

@dataclass
class KernelCall:
  """Consecutive kernels run by one call into the generated entry `tjx_run_<entry>`."""
  entry: int
  kernels: list                   # indices into program.kernels
  reads: set = field(default_factory=set)
  writes: set = field(default_factory=set)
  fn: object = None
  def run(self, frame: 'Frame') -> None: self.fn(frame.ptrs)

class InterpretedStep:
  """A node kind without a compiled step (control flow, collectives, until their layers register one) runs
  through the PYTHON device's rule for it, on the numpy arrays of its input and output slots."""
  def __init__(self, node, in_slots: list, out_slots: list):
    self.node, self.in_slots, self.out_slots = node, in_slots, out_slots
    self.reads, self.writes = set(in_slots), {s for s in out_slots if s is not None}
  def run(self, frame: 'Frame') -> None:
    from tinyjx.devices.python import python_rules, _finish
    rule = python_rules.get(self.node.op)
    if rule is None: raise NotImplementedError(f"{self.node.op.name} has no runtime step and no reference rule")
    with np.errstate(all='ignore'):
      out = _finish(self.node, rule(self.node, *[frame.array(s) for s in self.in_slots]))
    for slot, value in zip(self.out_slots, out if isinstance(out, tuple) else (out,)):
      if slot is not None: np.copyto(frame.array(slot), np.asarray(value).reshape(frame.exe.slots[slot].shape))

class Frame:
  """The buffers of one run: `ptrs` for kernels, `array(slot)` for runtime steps."""
  def __init__(self, exe: 'Executable', ptrs, arrays: list, arena: np.ndarray):
    self.exe, self.ptrs, self.arrays, self.arena = exe, ptrs, arrays, arena
  def array(self, slot: int) -> np.ndarray:
    if self.arrays[slot] is None:
      s = self.exe.slots[slot]
      if s.kind == 'const': self.arrays[slot] = self.exe._const_arrays[slot]
      else:
        off = self.exe.offsets[slot]
        self.arrays[slot] = self.arena[off:off + s.nbytes].view(_storage(s.dtype)).reshape(s.shape)
    return self.arrays[slot]

class Executable:
  """A lowered, compiled program: `exe.run(list_of_input_Buffers) -> list of fresh output Buffers`."""
  def __init__(self, device, program, lib):
    self.device, self.program, self.lib = device, program, lib
    self.slots, self.steps, self.kernels = program.slots, program.steps, program.kernels
    self.offsets, self.arena_bytes = program.offsets, program.arena_bytes
    self.source = program.source
    self._ptr_type = ctypes.c_void_p * max(len(self.slots), 1)
    self._lock = threading.Lock()
    self._arena = np.empty(self.arena_bytes, np.uint8) if self.arena_bytes <= KEEP_ARENA else None
    self._template = self._ptr_type()
    self._const_arrays = {s: b.numpy() for s, b in program.consts.items()}
    for s, a in self._const_arrays.items(): self._template[s] = a.ctypes.data
    if self._arena is not None: self._fill_arena(self._template, self._arena)
    for st in self.steps:
      if isinstance(st, KernelCall): st.fn = getattr(lib, f"tjx_run_{st.entry}")
    self._kernel_fns = [getattr(lib, f"tjx_kernel_{i}") for i in range(len(self.kernels))]
    self._out_arrays = [(s, self.slots[s].shape, _storage(self.slots[s].dtype)) for s in program.out_slots]
    self._out_index = {s: i for i, s in enumerate(program.out_slots)}
    self.n_intermediates = sum(1 for s in self.slots if s.kind == 'tmp')

  def _fill_arena(self, ptrs, arena: np.ndarray) -> None:
    base = arena.ctypes.data
    for s, off in self.offsets.items(): ptrs[s] = base + off

  def run(self, inputs: list) -> list:
    """Bind `inputs` (Buffers, one per jaxpr param), run every step, return fresh output Buffers.

    >>> import numpy as np, tinyjx, tinyjx.numpy as jnp
    >>> from tinyjx import devices, dtypes
    >>> cpu = devices.get('CPU')
    >>> exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda x: jnp.cumsum(x))(jnp.ones(4)))
    >>> exe.run([cpu.from_numpy(np.ones(4, np.float32), dtypes.float32)])[0].numpy()
    array([1., 2., 3., 4.], dtype=float32)
    """
    prog = self.program
    if len(inputs) != len(prog.in_slots):
      raise TypeError(f"this executable takes {len(prog.in_slots)} input buffers, got {len(inputs)}")
    own_arena = self._arena is not None and self._lock.acquire(blocking=False)
    try:
      if own_arena: ptrs, arena = self._ptr_type.from_buffer_copy(self._template), self._arena
      else:
        ptrs, arena = self._ptr_type.from_buffer_copy(self._template), np.empty(self.arena_bytes, np.uint8)
        self._fill_arena(ptrs, arena)
      arrays: list = [None] * len(self.slots)
      for i, (s, b) in enumerate(zip(prog.in_slots, inputs)):
        arrays[s] = a = self._bind(i, s, b.numpy())
        ptrs[s] = a.ctypes.data
      outs = []
      for s, shape, npdt in self._out_arrays:
        a = np.empty(shape, npdt)
        arrays[s] = a
        ptrs[s] = a.ctypes.data
        outs.append(a)
      frame = Frame(self, ptrs, arrays, arena)
      self._set_threads()
      if config.get('DEBUG') >= 2: self._run_timed(frame)
      else:
        for st in self.steps: st.run(frame)
    finally:
      if own_arena: self._lock.release()
    _count(prog)
    return self._results(inputs, outs, arrays)

  def _bind(self, i: int, slot: int, a: np.ndarray) -> np.ndarray:
    """Input `i` as the contiguous array of the program's dtype that kernels read through a plain pointer."""
    want = self.slots[slot]
    if a.size != int(np.prod(want.shape)):
      raise TypeError(f"input {i} has shape {a.shape}, but this executable was compiled for shape {want.shape} "
                      f"({want.dtype}); compile it again for the new shape")
    if a.dtype != _storage(want.dtype) or not a.flags.c_contiguous: a = np.ascontiguousarray(a, _storage(want.dtype))
    return a.reshape(want.shape)   # runtime steps read inputs through frame.array: they see the program's shape

  def _results(self, inputs, outs, arrays) -> list:
    """One fresh Buffer per jaxpr output (outputs that are inputs, constants or repeats are copied)."""
    prog, name, res = self.program, self.device.name, []
    for kind, ref, dt in prog.out_plan:
      if kind == 'slot': a = outs[self._out_index[ref]]
      elif kind == 'input': a = np.array(inputs[ref].numpy(), copy=True)
      elif kind == 'const': a = np.array(self._const_arrays[ref], copy=True)
      else: a = np.array(res[ref].data, copy=True)
      res.append(NumpyBuffer(name, a, dt))
    return res

  def _run_timed(self, frame: Frame) -> None:
    for st in self.steps:
      if not isinstance(st, KernelCall):
        st.run(frame)
        continue
      for i in st.kernels:
        k = self.kernels[i]
        t0 = time.perf_counter()
        self._kernel_fns[i](frame.ptrs)
        dt = time.perf_counter() - t0
        print(f"*** {self.device.name} {k.name:<28} {dt * 1e6:9.1f} us  {k.flops / dt / 1e9:8.2f} GFLOP/s  "
              f"{k.nbytes / dt / 1e9:8.2f} GB/s")

  _threads = [None]
  def _set_threads(self) -> None:
    n = config.get('TINYJX_THREADS') or thread_count()
    if Executable._threads[0] != n:
      self.lib.tjx_set_threads(int(n))
      Executable._threads[0] = n

  @property
  def flops(self) -> int: return sum(k.flops for k in self.kernels)

  def __str__(self) -> str:
    lines = [f"Executable on {self.device.name}: {len(self.kernels)} kernels, {len(self.steps)} steps, "
             f"{self.n_intermediates} intermediate buffers ({self.arena_bytes} bytes of arena)"]
    for i, k in enumerate(self.kernels):
      lines.append(f"  kernel {i} {k.name}: {len(k.nodes)} ops, {k.flops} flops, {k.nbytes} bytes")
    return "\n".join(lines) + "\n\n" + self.source
  __repr__ = __str__

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

def _storage(dt) -> np.dtype: return dt.np

def _count(prog) -> None:
  try:
    from tinyjx import counters
  except ImportError:
    return
  counters.add('kernels', len(prog.kernels))
  counters.add('flops', prog.flops)
  counters.add('bytes', prog.nbytes)
