"""runtime: the Executable, a compiled program replayed as a list of steps over a table of buffer slots.

A program has one slot per buffer: inputs (bound per run), constants (BUFFER leaves of the jaxpr, bound at
compile time), outputs (fresh device memory on every run, so no result ever aliases an earlier one) and
intermediates (placed in one arena by `memory.plan`; an arena up to `KEEP_ARENA` bytes is kept and reused
by the next run unless another thread is using it). Everything touching device memory or running code goes
through the device's contract (`tinyjx.devices.Backend`): `allocate` for outputs and arenas, `arguments` for
the table of slot handles a run launches its programs on (built once per executable for the constants and
the arena, then per run for inputs and outputs), `load` and `launch` for kernels, `synchronize` at the end.

The step interface, for runtime steps that are not kernels (control flow, collectives):

    class Step:
      reads: set[int]; writes: set[int]          # slots, for memory planning
      def run(self, frame: Frame) -> None: ...    # read frame.array(slot), write into frame.array(slot)

`Frame.array(slot)` is a numpy array of a slot's value (shape and dtype from the program): on a device whose
memory is the host's (CPU) a view of the slot's memory, else a host copy written back after the step. A step
writes its results into the arrays of its output slots (`np.copyto`), which are allocated before it runs.
`step_rules[op](node, program, slots)` builds the step for a scheduled node of kind `op` (COND, WHILE, SCAN,
collectives ...): `program` is the `Lowering` (its `slot_of` maps the node's sources to slots, `device` is
the device), `slots` the output slots (None where an output is unused). `tinyjx.lower.steps` fills that table in
for control flow and collectives; a kind with no entry runs as an `InterpretedStep` (the PYTHON device's
rule on the step's buffers), correct but not compiled. `KernelCall` (a run of consecutive
kernels, one launch of the generated `tjx_run_N` entry) is the step every program has.
"""
from __future__ import annotations
import math, threading, time
from dataclasses import dataclass, field
import numpy as np
from tinyjx import counters, settings as config
from tinyjx.devices.python import python_rules, evaluate_node, NumpyBuffer

step_rules: dict = {}   # Ops -> fn(node, program, slots) -> Step
KEEP_ARENA = 256 << 20  # an executable keeps its intermediates' memory between runs up to this size (a bigger arena
                         # is allocated per run, and its first touch zeroes every page: ~35 ms of a CNN step of 143 MB)

@dataclass
class Slot:
  kind: str                       # 'in', 'const', 'out', 'tmp'
  shape: tuple
  dtype: object
  @property
  def nbytes(self) -> int: return math.prod(self.shape) * self.dtype.np.itemsize

@dataclass
class KernelCall:
  """Consecutive kernels run by one call into the generated entry `tjx_run_<entry>`; on a grid device one kernel
  (`entry` is its name), launched over `global_size` work items in groups of `local_size` on the buffers of `slots`,
  in its parameter order."""
  entry: int | str
  kernels: list                   # indices into program.kernels
  reads: set = field(default_factory=set)
  writes: set = field(default_factory=set)
  program: object = None          # the device's loaded entry
  slots: list | None = None
  global_size: tuple | None = None
  local_size: tuple | None = None     # work items per work group (the kernel's code may rely on it)
  def run(self, frame: 'Frame') -> None:
    if self.slots is None: frame.device.launch(self.program, frame.args)
    else: frame.device.launch(self.program, [frame.args[s] for s in self.slots], self.global_size, self.local_size)
  @property
  def name(self) -> str: return self.entry if isinstance(self.entry, str) else f"tjx_run_{self.entry}"

class InterpretedStep:
  """A node kind without a compiled step (control flow, collectives, until their layers register one) runs
  through the PYTHON device's rule for it, on the numpy arrays of its input and output slots."""
  def __init__(self, node, in_slots: list, out_slots: list):
    self.node, self.in_slots, self.out_slots = node, in_slots, out_slots
    self.reads, self.writes = set(in_slots), {s for s in out_slots if s is not None}
  def run(self, frame: 'Frame') -> None:
    if self.node.op not in python_rules:
      raise NotImplementedError(f"{self.node.op.name} has no runtime step and no reference rule")
    with np.errstate(all='ignore'): out = evaluate_node(self.node, *[frame.array(s) for s in self.in_slots])
    for slot, value in zip(self.out_slots, out if isinstance(out, tuple) else (out,)):
      if slot is not None: np.copyto(frame.array(slot), np.asarray(value).reshape(frame.exe.slots[slot].shape))

class Frame:
  """The buffers of one run: `args` (the device's argument table) for kernels, `array(slot)` for runtime steps."""
  def __init__(self, exe: 'Executable', args, handles: dict, arena):
    self.exe, self.device, self.args, self.handles, self.arena = exe, exe.device, args, handles, arena
    self.arrays: dict = {}

  def array(self, slot: int) -> np.ndarray:
    a = self.arrays.get(slot)
    if a is None:
      s, exe = self.exe.slots[slot], self.exe
      if s.kind == 'const': a = exe._const_arrays[slot]
      elif self.device.host_memory: a = self._view(slot, s)
      else:
        a = np.empty(s.shape, s.dtype.np)
        handle, offset = self._where(slot)
        self.device.copy_out(handle, a, offset)
      self.arrays[slot] = a
    return a

  def _where(self, slot: int) -> tuple:
    h = self.handles.get(slot)
    return (h, 0) if h is not None else (self.arena, self.exe.offsets[slot])

  def _view(self, slot: int, s: 'Slot') -> np.ndarray:
    handle, offset = self._where(slot)
    if handle.dtype != np.uint8: return handle.reshape(s.shape)    # an input bound as it is
    return handle[offset:offset + s.nbytes].view(s.dtype.np).reshape(s.shape)

  def flush(self, slots) -> None:
    """Write the host copies of `slots` back to device memory (devices whose memory is not the host's)."""
    for slot in slots:
      if slot in self.arrays and self.exe.slots[slot].kind != 'const':
        handle, offset = self._where(slot)
        self.device.copy_in(handle, np.ascontiguousarray(self.arrays.pop(slot)), offset)

class Executable:
  """A lowered, compiled program: `exe.run(list_of_input_Buffers) -> list of fresh output Buffers`."""
  def __init__(self, device, program, binary, n_effects: int = 0):
    self.device, self.program, self.binary = device, program, binary
    self.n_effects = n_effects     # the program's first roots are effect tokens (debug callbacks), not results
    self.slots, self.steps, self.kernels = program.slots, program.steps, program.kernels
    self.offsets, self.arena_bytes = program.offsets, program.arena_bytes
    self.source = program.source
    self._lock = threading.Lock()
    self._keep: list = []          # device copies of host constants, alive as long as the executable
    # (reshaped: np.ascontiguousarray makes a 0-d array 1-d)
    self._const_arrays = {s: np.ascontiguousarray(b.numpy()).reshape(self.slots[s].shape)
                          for s, b in program.consts.items()}
    self._const_handles = {s: self._handle(a, self.slots[s].dtype) for s, a in self._const_arrays.items()}
    self._arena = device.allocate(self.arena_bytes) if self.arena_bytes <= KEEP_ARENA else None
    self._template = self._table(self._arena) if self._arena is not None else None
    for st in self.steps:
      if isinstance(st, KernelCall): st.program = device.load(binary, st.name)
    # DEBUG=2 times each kernel: a grid program launches kernels one by one already; a loop-shaped one has an
    # entry per kernel for that
    self._timed = {st.kernels[0]: st for st in self.steps if isinstance(st, KernelCall) and st.slots is not None}
    if not self._timed:
      self._timed = {i: KernelCall(f"tjx_kernel_{i}", [i], program=device.load(binary, f"tjx_kernel_{i}"))
                     for i in range(len(self.kernels))}
    self._ins = [(s, int(np.prod(self.slots[s].shape, dtype=np.int64)), self.slots[s]) for s in program.in_slots]
    self._outs = [(s, self.slots[s].nbytes) for s in program.out_slots]
    self._out_index = {s: i for i, s in enumerate(program.out_slots)}
    self.n_intermediates = sum(1 for s in self.slots if s.kind == 'tmp')
    self.timing_hook = None        # VIZ: the next run is timed and its step times handed to this function, once

  def _allocate(self, nbytes: int, slot: int | None):
    """Device memory for output `slot` (None: the arena of intermediates), or a MemoryError that says how much."""
    try:
      return self.device.allocate(nbytes)
    except MemoryError:
      pass
    if slot is None:
      big = max((s for s in self.slots if s.kind == 'tmp'), key=lambda s: s.nbytes, default=None)
      what = (f"the {self.n_intermediates} intermediate arrays of the program (the largest "
              f"{big.dtype.short}[{','.join(map(str, big.shape))}])" if big is not None else "the program's arena")
    else:
      s = self.slots[slot]
      what = f"output {self._out_index[slot]}, a {s.dtype.short}[{','.join(map(str, s.shape))}] array"
    raise MemoryError(f"{self.device.name}: cannot allocate {nbytes} bytes ({nbytes / 2**30:.2f} GiB) for {what}; "
                      "the machine does not have that much free memory. Use smaller shapes (a smaller batch, or "
                      "split the work with lax.map or a Python loop)") from None

  def _handle(self, host: np.ndarray, dtype):
    """Device memory holding `host`: the array itself where device memory is the host's, else a copy."""
    if self.device.host_memory: return host
    buf = self.device.from_numpy(host, dtype)
    self._keep.append(buf)
    return buf.handle

  def _table(self, arena):
    """The argument table of the constants and the intermediates (at their offsets in `arena`)."""
    return self.device.arguments(len(self.slots), {**self._const_handles,
                                                   **{s: (arena, off) for s, off in self.offsets.items()}})

  def run(self, inputs: list) -> list:
    """Bind `inputs` (Buffers, one per jaxpr param), run every step, return fresh output Buffers.

    >>> import numpy as np, tinyjx, tinyjx.numpy as jnp
    >>> from tinyjx import devices, dtypes
    >>> cpu = devices.get('CPU')
    >>> exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda x: jnp.cumsum(x))(jnp.ones(4)))
    >>> exe.run([cpu.from_numpy(np.ones(4, np.float32), dtypes.float32)])[0].numpy()
    array([1., 2., 3., 4.], dtype=float32)
    """
    prog, dev = self.program, self.device
    if len(inputs) != len(prog.in_slots):
      raise TypeError(f"this executable takes {len(prog.in_slots)} input buffers, got {len(inputs)}")
    own_arena = self._arena is not None and self._lock.acquire(blocking=False)
    try:
      arena = self._arena if own_arena else self._allocate(self.arena_bytes, None)
      handles = {s: self._bind(i, s, size, want, b) for i, ((s, size, want), b) in enumerate(zip(self._ins, inputs))}
      outs = [self._allocate(nbytes, s) for s, nbytes in self._outs]
      handles.update((s, h) for (s, _), h in zip(self._outs, outs))
      args = dev.arguments(len(self.slots), handles, self._template if own_arena else self._table(arena))
      frame = Frame(self, args, handles, arena)
      timed = config.get('DEBUG') >= 2 or self.timing_hook is not None
      if timed: times = self._run_timed(frame)
      elif dev.host_memory:
        for st in self.steps: st.run(frame)
      else:
        for st in self.steps:
          st.run(frame)
          if not isinstance(st, KernelCall): frame.flush(st.writes)
      dev.synchronize()
    finally:
      if own_arena: self._lock.release()
    _count(prog)
    if timed and self.timing_hook is not None:
      hook, self.timing_hook = self.timing_hook, None
      hook(times)
    return self._results(inputs, outs)[self.n_effects:]

  def direct_runner(self, counts: tuple = ()):
    """For jit's hit path: `run(input_buffers) -> fresh output Buffers`, or None where the program needs what only `run`
    does. It does `run`'s work with everything that is the same at every call decided here, once: the program is
    foreign calls of kernels and runtime steps that run on their slots' arrays (`run_arrays`: a COND, WHILE or SCAN,
    an LU, a triangular solve, an FFT) on host memory (no other runtime step, no effect), with an arena of its own, and
    every output a slot of its own or a copy of an input, a constant or an earlier output. The caller vouches for
    the inputs: Buffers of this device with the program's shapes and dtypes (jit keys its cache on them); `counts`
    are the caller's own (name, n) counter pairs, added with the run's. `run` returns None, and the caller falls
    back to `Executable.run`, when an input is not contiguous, another thread has the arena, or VIZ asked for a
    timed run. The device's `replayer` is all of `run` where it has one (the CPU's); else the binding goes through
    `arguments`."""
    dev, prog = self.device, self.program
    if not dev.host_memory or self._arena is None or self.n_effects: return None
    outs = [(ref, self.slots[ref].shape, dt, None) if kind == 'slot' else (None, None, dt, self._copier(kind, ref))
            for kind, ref, dt in prog.out_plan]
    own = [slot for slot, _, _, copy in outs if copy is None]
    steps = [(st.program, None) if isinstance(st, KernelCall) and st.slots is None else
             (None, self._direct_step(st, own)) for st in self.steps]
    if any(program is None and act is None for program, act in steps): return None
    counts = (('kernels', len(prog.kernels)), ('flops', prog.flops), ('bytes', prog.nbytes)) + tuple(counts)
    replayer = getattr(dev, 'replayer', None)
    if replayer is not None:
      return replayer(self._template, steps, list(prog.in_slots), outs, 'omp parallel' in self.source, self, counts)
    replay, add_many, lock = self._generic_replay(steps, outs), counters.add_many, self._lock
    def run(inputs: list):
      if self.timing_hook is not None or not lock.acquire(blocking=False): return None
      try:
        results = replay(inputs)
      except MemoryError:
        return None   # `run` says how much could not be had, and for what
      finally:
        lock.release()
      if results is not None: add_many(counts)
      return results
    return run

  def _direct_step(self, st, own: list):
    """For `direct_runner`: `act(inputs, outputs)`, runtime step `st` run on its slots' arrays, given the call's input
    arrays (in `in_slots` order) and its fresh output arrays (slots `own`, in order); None for a step that runs only
    in a Frame. An intermediate's array is a view of the kept arena (the hit path holds the executable's lock), made
    here once, as are the constants'."""
    run = getattr(st, 'run_arrays', None)
    if run is None: return None
    ins, outs = {s: i for i, s in enumerate(self.program.in_slots)}, {s: i for i, s in enumerate(own)}
    kept = Frame(self, None, {}, self._arena)      # the constants and the kept arena's intermediates
    def where(slot):   # (0, fixed array) | (1, input index, shape) | (2, output index)
      if slot is None: return (0, None)
      if slot in ins: return (1, ins[slot], self.slots[slot].shape)
      if slot in outs: return (2, outs[slot])
      return (0, kept.array(slot))
    reads, writes = [where(s) for s in st.src_slots], [where(s) for s in st.out_slots]
    pick = lambda w, inputs, outputs: w[1] if w[0] == 0 else inputs[w[1]].reshape(w[2]) if w[0] == 1 else outputs[w[1]]
    def act(inputs: list, outputs: list) -> None:
      run([pick(w, inputs, outputs) for w in reads], [pick(w, inputs, outputs) for w in writes])
    return act

  def _copier(self, kind: str, ref: int):
    """For `direct_runner`: `copy(inputs, results)`, a fresh host copy of an output that is not a slot of its own (what
    `_results` makes of it): input `ref`, constant slot `ref` or the earlier output `ref`."""
    if kind == 'input': return lambda inputs, results: np.array(inputs[ref].numpy(), copy=True, order='C')
    if kind == 'const':
      const = self._const_arrays[ref]
      return lambda inputs, results: np.array(const, copy=True, order='C')
    return lambda inputs, results: np.array(results[ref].numpy(), copy=True, order='C')

  def _generic_replay(self, steps: list, outs: list):
    """`direct_runner`'s binding through the device contract's `arguments` (a host-memory device without `replayer`):
    output arrays are the numpy arrays their Buffers hold; `steps` as the CPU's `replayer` takes them."""
    dev, ins, count, template = self.device, self.program.in_slots, len(self.slots), self._template
    own = [(slot, shape, dt) for slot, shape, dt, copy in outs if copy is None]
    slots = list(ins) + [slot for slot, _, _ in own]
    def replay(inputs: list):
      arrays = [buf.numpy() for buf in inputs]
      for a in arrays:
        if not a.flags.c_contiguous: return None
      made = [NumpyBuffer(dev.name, np.empty(shape, dt.np), dt) for _, shape, dt in own]
      args = dev.arguments(count, dict(zip(slots, arrays + [r.data for r in made])), template)
      for program, act in steps:
        if act is None: dev.launch(program, args)
        else: act(arrays, [r.data for r in made])
      dev.synchronize()
      results, it = [], iter(made)
      for _, _, dt, copy in outs:
        results.append(next(it) if copy is None else NumpyBuffer(dev.name, copy(inputs, results), dt))
      return results
    return replay

  def _bind(self, i: int, slot: int, size: int, want: Slot, buf):
    """Input `i` as the handle kernels read: on host memory the contiguous array of the program's dtype and shape
    (runtime steps read inputs through frame.array: they see the program's shape)."""
    host = self.device.host_memory
    if not host and getattr(buf, 'backend', None) is self.device: return buf.handle
    a = buf.numpy()
    if a.size != size:
      raise TypeError(f"input {i} has shape {a.shape}, but this executable was compiled for shape {want.shape} "
                      f"({want.dtype}); compile it again for the new shape")
    if a.dtype != want.dtype.np or not a.flags.c_contiguous: a = np.ascontiguousarray(a, want.dtype.np)
    if a.shape != want.shape: a = a.reshape(want.shape)
    return a if host else self._handle(a, want.dtype)

  def _results(self, inputs, outs) -> list:
    """One fresh Buffer per jaxpr output (outputs that are inputs, constants or repeats are copied)."""
    prog, dev, res = self.program, self.device, []
    for kind, ref, dt in prog.out_plan:
      if kind == 'slot':
        res.append(dev.wrap(outs[self._out_index[ref]], self.slots[ref].shape, dt))
        continue
      if kind == 'input': a = inputs[ref].numpy().reshape(self._ins[ref][2].shape)   # as _bind sees it
      elif kind == 'const': a = self._const_arrays[ref]
      else: a = res[ref].numpy()
      res.append(dev.from_numpy(np.array(a, copy=True, order='C'), dt))
    return res

  def _run_timed(self, frame: Frame) -> list:
    """Run every step, each kernel alone and synchronized (DEBUG=2 prints its time); returns (name, kind, start,
    seconds) per kernel and runtime step, start in seconds from the beginning of the run."""
    dev, times, begin, show = self.device, [], time.perf_counter(), config.get('DEBUG') >= 2
    for st in self.steps:
      if not isinstance(st, KernelCall):
        t0 = time.perf_counter()
        st.run(frame)
        if not dev.host_memory: frame.flush(st.writes)
        times.append((type(st).__name__, 'step', t0 - begin, time.perf_counter() - t0))
        continue
      for i in st.kernels:
        k, call = self.kernels[i], self._timed[i]
        t0 = time.perf_counter()
        call.run(frame)
        dev.synchronize()
        dt = time.perf_counter() - t0
        times.append((k.name, 'kernel', t0 - begin, dt))
        if not show: continue
        print(f"*** {dev.name} {k.name:<28} {dt * 1e6:9.1f} us  {k.flops / dt / 1e9:8.2f} GFLOP/s  "
              f"{k.nbytes / dt / 1e9:8.2f} GB/s")
    return times

  @property
  def flops(self) -> int: return sum(k.flops for k in self.kernels)

  def __str__(self) -> str:
    lines = [f"Executable on {self.device.name}: {len(self.kernels)} kernels, {len(self.steps)} steps, "
             f"{self.n_intermediates} intermediate buffers ({self.arena_bytes} bytes of arena)"]
    for i, k in enumerate(self.kernels):
      ops = f"{len(k.nodes)} ops, " if k.nodes else ""   # (a program loaded from its plan keeps no nodes)
      lines.append(f"  kernel {i} {k.name}: {ops}{k.flops} flops, {k.nbytes} bytes")
    return "\n".join(lines) + "\n\n" + self.source
  __repr__ = __str__

def _count(prog) -> None:
  counters.add('kernels', len(prog.kernels))
  counters.add('flops', prog.flops)
  counters.add('bytes', prog.nbytes)
