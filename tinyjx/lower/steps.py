"""steps: the runtime steps of compiled programs for the nodes that are not kernels: control flow and collectives.

`step_rules` (tinyjx.lower.runtime) gets one entry per kind here, when the lowering is imported. A COND, WHILE or
SCAN node becomes a `LoopStep`: its sub-jaxprs are compiled once, when the enclosing program is lowered, and the
loop around them runs at run time over the slots' arrays, by the PYTHON device's `run_loop` (the one statement of
what the loops mean) with the compiled sub-programs in place of the interpreter; nothing is unrolled. On a device
with a loop driver (the CPU's `loop_node`) a COND, WHILE or SCAN whose sub-programs are kernels and such loops runs
whole in one foreign call instead (`CompiledLoop`: no Python between iterations), with the same meaning. A
collective becomes a `CollectiveStep`: the values of its slots go to the pmap runtime that the API layer registers
(`tinyjx.array.collective_hook`, reached through the PYTHON device's rule), so this layer never imports it.
"""
from __future__ import annotations
import ctypes, math
import numpy as np
from tinyjx import counters, settings as config
from tinyjx.uop import UOp, Ops, GroupOp
from tinyjx.devices.python import LOOPS, run_loop, host_empty, address, evaluate_node
from tinyjx.lower.runtime import InterpretedStep, KernelCall, step_rules
from tinyjx.lower.schedule import input_view

class LoopStep:
  """A COND, WHILE or SCAN node in a compiled program (the step interface of tinyjx.lower.runtime).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax, devices
  >>> f = tinyjx.make_jaxpr(lambda xs: lax.scan(lambda c, x: (c + x, None), 0.0, xs)[0])
  >>> exe = devices.get('CPU').compile_jaxpr(f(jnp.ones(3)))
  >>> [st for st in exe.steps if isinstance(st, LoopStep)]
  [scan step (1 compiled sub-programs)]
  """
  def __init__(self, node: UOp, st, slots: list):
    self.node, self.device = node, st.device
    self.src_slots, self.out_slots = [st.slot_of[s] for s in node.src], list(slots)
    self.reads, self.writes = set(self.src_slots), {s for s in slots if s is not None}
    self.exes = [st.device.compile_jaxpr(j) for j in node.arg.jaxprs]
    # jit's hit path for each sub-program that has one (kernels and steps that run on arrays, on host memory): a small
    # body's iteration then costs a few microseconds of Python instead of about 20 (Executable.run's binding). (A
    # compile that stops at a Lowering, CUDA's PTX check on a machine without a GPU, has no runner.)
    self.runners = [exe.direct_runner() if hasattr(exe, 'direct_runner') else None for exe in self.exes]
    self.compiled = CompiledLoop(self) if CompiledLoop.eligible(self) else None

  def run(self, frame) -> None:
    self.run_arrays([frame.array(s) for s in self.src_slots],
                    [None if slot is None else frame.array(slot) for slot in self.out_slots])

  def run_arrays(self, args: list, dests: list) -> None:
    """The loop on the arrays of its input slots, its results copied into `dests` (None: an output not wanted); what
    `run` does with a Frame's arrays, and jit's hit path with its own (`Executable.direct_runner`)."""
    debug = config.get('DEBUG') >= 2                          # DEBUG=2 times each kernel: every call goes through run
    if self.compiled is not None and not debug and self.compiled.run(args, dests): return
    runners = [None] * len(self.exes) if debug else self.runners
    outs = run_loop(self.node, lambda i, values: self.call(i, values, runners[i]), args)
    for dest, value in zip(dests, outs):
      if dest is not None: np.copyto(dest, value)

  def call(self, i: int, args, runner=None) -> list:
    """Run compiled sub-program `i` on numpy arrays (through `runner`, its hit path, where given); returns fresh
    arrays."""
    jaxpr = self.node.arg.jaxprs[i]
    bufs = [self.device.from_numpy(np.ascontiguousarray(a, p.dtype.np).reshape(p.shape), p.dtype)
            for a, p in zip(args, jaxpr.params)]
    outs = runner(bufs) if runner is not None else None     # None: it declined (another thread has the arena)
    if outs is None: outs = self.exes[i].run(bufs)
    return [b.numpy().reshape(o.shape) for b, o in zip(outs, jaxpr.outs)]

  def __repr__(self): return f"{self.node.op.name.lower()} step ({len(self.exes)} compiled sub-programs)"

def _fits(shape: tuple, dtype, v) -> bool:
  """Whether a value of `shape` and `dtype` is, byte for byte, what jaxpr value `v` holds (the driver copies bytes)."""
  return dtype == v.dtype and math.prod(shape) == math.prod(v.shape)

class CompiledLoop:
  """A COND, WHILE or SCAN whose sub-programs are kernels and such compiled loops, on a device with `loop_node` (the
  CPU): the whole node, nested loops and conds included, is one foreign call, which calls the sub-programs' entry
  points on argument tables made here; no Python runs between iterations. The carry lives in two sets of arrays;
  the body reads one and writes the other, and they swap at each iteration. A scan's body reads its slice of xs in
  place and writes its row of ys in place (the driver moves those two pointers of the table before each
  iteration). An output of a sub-program that is not a slot of its own (an input, a constant or a repeat passed
  through) is copied after it. A cond runs the branch its index picks (clamped into range) on tables whose inputs
  and outputs are the cond's own slots.

  A node's sources and results are slots of the table it runs on: the enclosing sub-program's, for a nested one,
  and one made for the call (`run(args, dests)`: the arrays of the step's slots) at the top. Before it runs, the
  driver puts those addresses where the node's tables, slides, copies and flags read them (`binds`), copies the
  initial carry in, and after the last iteration the carry out. `run` returns True, or False when an executable's
  arena is in use by another thread (the caller then runs the node step by step). The plan (carry sets, tables,
  the driver's structures) is made at the first run and kept; every executable of the tree is locked while it
  runs. A while loop of one iteration spent 106 us a call in `_run` when each call made its tables, 22 once they
  were kept; a scan of 1000 steps with a cond in its body took 22.6 ms when only loops of kernels were compiled."""
  KINDS = {Ops.WHILE: 0, Ops.SCAN: 1, Ops.COND: 2}

  def __init__(self, step: 'LoopStep'):
    self.node, self.exes, self.src_slots, self.out_slots = step.node, step.exes, step.src_slots, step.out_slots
    self.kind = self.KINDS[step.node.op]
    self.nested = [st.compiled for e in self.exes for st in e.steps if isinstance(st, LoopStep)]
    self.parallel = any('omp parallel' in e.source for e in self.exes) or any(c.parallel for c in self.nested)
    self._plan, self._outer = None, None

  @staticmethod
  def eligible(step: 'LoopStep') -> bool:
    """Whether `step` can run whole in the device's loop driver: every sub-program is kernels (one entry on one
    table) and compiled loops, with one slot per param and output, and each source and result has its sub-jaxpr
    value's dtype and size (anything else goes through Python, which converts); a cond's index is an 8-bit, 32-bit
    or 64-bit signed integer or a bool."""
    node, a = step.node, step.node.arg
    if not hasattr(step.device, 'loop_node') or not all(step.runners): return False
    for exe, jx in zip(step.exes, a.jaxprs):
      if len(exe.program.in_slots) != len(jx.params) or len(exe.program.out_plan) != len(jx.outs): return False
      for st in exe.steps:
        kernels = isinstance(st, KernelCall) and st.slots is None
        if not (kernels or isinstance(st, LoopStep) and st.compiled): return False
    src = [(s.shape, s.dtype) for s in node.src]
    outs = [(tuple(shape), dt) for shape, dt in a.out_avals]
    if node.op is Ops.COND:
      if src[0][1].name not in ('bool', 'int8', 'int32', 'int64'): return False
      return all(_fits(*x, p) for jx in a.jaxprs for x, p in zip(src[1:], jx.params)) and \
        all(_fits(*o, v) for jx in a.jaxprs for o, v in zip(outs, jx.outs))
    nc, jx = a.n_carry, a.body
    if node.op is Ops.WHILE:
      ncc = a.n_cond_consts
      feeds = list(zip(src[:nc], jx.params)) + list(zip(src[:nc], a.cond.params)) + \
        list(zip(src[nc:nc + ncc], a.cond.params[nc:])) + list(zip(src[nc + ncc:], jx.params[nc:]))
      return all(_fits(*x, p) for x, p in feeds) and all(_fits(*o, v) for o, v in zip(outs, jx.outs))
    rows = lambda vals: [(shape[1:], dt) for shape, dt in vals]   # a scan's xs and ys, a slice at a time
    nx = nc + a.n_xs
    feeds = list(zip(src[:nc] + rows(src[nc:nx]) + src[nx:], jx.params))
    return all(_fits(*x, p) for x, p in feeds) and all(_fits(*o, v) for o, v in zip(outs[:nc] + rows(outs[nc:]),
                                                                                   jx.outs))

  def locks(self) -> list:
    """The locks of every executable the node runs, nested ones' included."""
    return [e._lock for e in self.exes] + [lock for c in self.nested for lock in c.locks()]

  def run(self, args: list, dests: list) -> bool:
    locks = self.locks()
    got = [lock.acquire(blocking=False) for lock in locks]
    try:
      if not all(got) or not all(x.flags.c_contiguous for x in args): return False
      self._run(args, dests)
      return True
    finally:
      for lock, g in zip(locks, got):
        if g: lock.release()

  def _run(self, args: list, dests: list) -> None:
    plan = self.plan()
    node = plan.get('node') or self.exes[0].device.loop_node(plan)
    plan['node'] = node
    if self._outer is None:
      self._outer = (ctypes.c_void_p * (max(s for s in self.src_slots + self.out_slots if s is not None) + 1))()
    outer = self._outer
    for slot, x in zip(self.src_slots, args): outer[slot] = address(x)
    for slot, d in zip(self.out_slots, dests):
      if slot is not None: outer[slot] = address(d)
    for prog, n in node.run(outer, self.parallel):
      if n:
        e = prog['exe']
        counters.add_many((('kernels', n * len(e.program.kernels)), ('flops', n * e.program.flops),
                           ('bytes', n * e.program.nbytes)))

  def plan(self) -> dict:
    """The node as the device's `loop_node` takes it (see tinyjx.devices.cpu.LoopNode), made once: sub-programs in
    `progs` (a while loop's cond first), each with its two argument tables, its steps (a kernel's program, or a
    nested node's plan), and per parity its slides and copies; `binds` say where the node puts an address of the
    enclosing table (a source's or a result's slot) before it runs, `ins` and `outs` which carries come in and go
    out. The memory the tables point at (carry sets, the flag, scratch rows for results nobody reads) is kept
    with the plan."""
    if self._plan is None: self._plan = self._cond_plan() if self.kind == 2 else self._loop_plan()
    return self._plan

  @staticmethod
  def _programs(exe) -> list:
    return [st.compiled.plan() if isinstance(st, LoopStep) else st.program for st in exe.steps]

  @staticmethod
  def _nbytes(v) -> int: return v.size * v.dtype.np.itemsize

  def _bind_to(self, prog: dict, pi: int, p: int, slot: int, end: tuple, binds: list) -> None:
    """Put endpoint `end` in `prog`'s table of parity p at `slot`: (address, stride) is fixed, ('outer', slot,
    stride) read from the enclosing table at each run; a nonzero stride makes it a slide (moved each iteration)."""
    table = prog['tables'][p]
    if end[0] == 'outer':
      _, outer, stride = end
      if not stride: return binds.append((('table', pi, p, slot), outer))
      binds.append((('slide', pi, p, len(prog['slides'][p]), 'base'), outer))
      return prog['slides'][p].append((ctypes.addressof(table), slot, 0, stride))
    addr, stride = end
    if stride: prog['slides'][p].append((ctypes.addressof(table), slot, addr, stride))
    else: table[slot] = addr

  def _copy_to(self, prog: dict, pi: int, p: int, src: tuple, dst: tuple, nbytes: int, binds: list) -> None:
    """A copy of `nbytes` after `prog` runs, from endpoint `src` to endpoint `dst` (as in `_bind_to`)."""
    i, row = len(prog['copies'][p]), []
    for field, end in (('src', src), ('dst', dst)):
      if end[0] == 'outer':
        binds.append((('copy', pi, p, i, field), end[1]))
        row += [0, end[2]]
      else: row += list(end)
    prog['copies'][p].append((*row, nbytes))

  @staticmethod
  def _prog(exe, tables: list) -> dict:
    return {'exe': exe, 'programs': CompiledLoop._programs(exe), 'tables': tables, 'slides': [[], []],
            'copies': [[], []]}

  @staticmethod
  def _table(exe):
    return type(exe._template).from_buffer_copy(exe._template)

  def _loop_plan(self) -> dict:
    a, nc, srcs, outs = self.node.arg, self.node.arg.n_carry, self.src_slots, self.out_slots
    jx, scan = a.body, self.kind == 1
    body, ce = self.exes[-1], (None if scan else self.exes[0])
    carry = [[host_empty(o.shape, o.dtype.np) for o in jx.outs[:nc]] for _ in range(2)]
    flag = np.zeros((), np.bool_)
    keep = [carry, flag]
    progs = ([] if scan else [self._prog(ce, [self._table(ce), self._table(ce)])]) + \
      [self._prog(body, [self._table(body), self._table(body)])]
    bi, bprog, binds, flags = len(progs) - 1, progs[-1], [], []
    row = lambda v: self._nbytes(v) if a.length else 0    # (xs and ys do not move in a scan of no iterations)
    n_xs = a.n_xs if scan else 0
    consts = nc + (n_xs if scan else a.n_cond_consts)     # where the body's constants start among the sources
    ys = [None if outs[nc + j] is not None else host_empty((a.length,) + o.shape, o.dtype.np)
          for j, o in enumerate(jx.outs[nc:])]
    keep.append(ys)
    for p in range(2):
      def source(r):   # the body's input r at parity p, as an endpoint
        if r < nc: return (carry[p][r][1], 0)
        if r < nc + n_xs: return ('outer', srcs[r], row(jx.params[r]))
        return ('outer', srcs[consts + r - nc - n_xs], 0)
      def result(j):   # the body's output j at parity p
        if j < nc: return (carry[1 - p][j][1], 0)
        y = ys[j - nc]
        return ('outer', outs[j], row(jx.outs[j])) if y is None else (y[1], row(jx.outs[j]))
      for r, slot in enumerate(body.program.in_slots): self._bind_to(bprog, bi, p, slot, source(r), binds)
      for j, (kind, ref, _) in enumerate(body.program.out_plan):
        if kind == 'slot':
          self._bind_to(bprog, bi, p, ref, result(j), binds)
          continue
        src = source(ref) if kind == 'input' else result(ref) if kind == 'dup' else \
          (address(body._const_arrays[ref]), 0)
        self._copy_to(bprog, bi, p, src, result(j), self._nbytes(jx.outs[j]), binds)
      if scan: continue
      for r, slot in enumerate(ce.program.in_slots):
        end = (carry[p][r][1], 0) if r < nc else ('outer', srcs[r], 0)
        self._bind_to(progs[0], 0, p, slot, end, binds)
      kind, ref, _ = ce.program.out_plan[0]
      if kind == 'slot':
        progs[0]['tables'][p][ref] = address(flag)
        flags.append(address(flag))
      elif kind == 'input' and ref < nc: flags.append(carry[p][ref][1])
      elif kind == 'input':
        binds.append((('flag', p), srcs[ref]))
        flags.append(0)
      else: flags.append(address(ce._const_arrays[ref]))
    ins = [(carry[0][r][1], srcs[r], self._nbytes(jx.outs[r])) for r in range(nc)]
    out_moves = [[(carry[q][j][1], outs[j], self._nbytes(jx.outs[j])) for j in range(nc) if outs[j] is not None]
                 for q in range(2)]
    return {'kind': self.kind, 'length': a.length if scan else 0, 'reverse': a.reverse if scan else False,
            'progs': progs, 'flags': flags, 'binds': binds, 'ins': ins, 'outs': out_moves, 'keep': keep}

  def _cond_plan(self) -> dict:
    a, srcs, outs = self.node.arg, self.src_slots, self.out_slots
    progs, binds, keep = [], [], []
    for bi, (exe, jx) in enumerate(zip(self.exes, a.jaxprs)):
      table = self._table(exe)
      prog = self._prog(exe, [table, table])
      progs.append(prog)
      scratch = [host_empty(o.shape, o.dtype.np) if outs[j] is None else None for j, o in enumerate(jx.outs)]
      keep.append(scratch)
      source = lambda r: ('outer', srcs[1 + r], 0)
      result = lambda j: ('outer', outs[j], 0) if scratch[j] is None else (scratch[j][1], 0)
      for r, slot in enumerate(exe.program.in_slots): self._bind_to(prog, bi, 0, slot, source(r), binds)
      for j, (kind, ref, _) in enumerate(exe.program.out_plan):
        if kind == 'slot':
          self._bind_to(prog, bi, 0, ref, result(j), binds)
          continue
        src = source(ref) if kind == 'input' else result(ref) if kind == 'dup' else \
          (address(exe._const_arrays[ref]), 0)
        self._copy_to(prog, bi, 0, src, result(j), self._nbytes(jx.outs[j]), binds)
    index = (srcs[0], self.node.src[0].dtype.np.itemsize)
    return {'kind': 2, 'progs': progs, 'binds': binds, 'ins': [], 'outs': [[], []], 'index': index, 'keep': keep}

class CollectiveStep(InterpretedStep):
  """A collective in a compiled program: this device's value goes to the running pmap's runtime (the PYTHON
  device's rule calls `tinyjx.array.collective_hook`) and the result comes back into the output slot."""
  def __init__(self, node: UOp, st, slots: list): super().__init__(node, [st.slot_of[s] for s in node.src], slots)
  def __repr__(self): return f"{self.node.op.name.lower()} step over axis {self.node.arg[0]!r}"

class NativeStep(InterpretedStep):
  """A linear-algebra node of lax.linalg in a compiled program: the device's native routine named `NATIVE` where it
  has one (the CPU's, in C; `call`), else the PYTHON device's rule on the slots' arrays."""
  NATIVE = ''
  def __init__(self, node: UOp, st, slots: list):
    super().__init__(node, [st.slot_of[s if s in st.slot_of else input_view(s)] for s in node.src], slots)
    self.src_slots = self.in_slots              # (as a LoopStep names them: jit's hit path reads them)
    self.native = getattr(st.device, self.NATIVE, None)
    self.views = [s.shape if s not in st.slot_of else None for s in node.src]   # sources read as a reshaped input
    self.reshapes = any(v is not None for v in self.views)      # (else the hit path's calls skip the reshaping)

  def run(self, frame) -> None:
    self.run_arrays([frame.array(s) for s in self.in_slots],
                    [None if s is None else frame.array(s) for s in self.out_slots])

  def run_arrays(self, args: list, dests: list) -> None:
    """The results into `dests` (None: not read); what `run` does with a Frame's arrays, and jit's hit path with its
    own."""
    if self.reshapes: args = [a if shape is None else a.reshape(shape) for a, shape in zip(args, self.views)]
    if self.native is not None: return self.call(args, dests)
    outs = evaluate_node(self.node, *args)
    for dest, value in zip(dests, outs if isinstance(outs, tuple) else (outs,)):
      if dest is not None: np.copyto(dest, value)

  def call(self, args: list, dests: list) -> None: raise NotImplementedError

  def __repr__(self): return f"{self.node.op.name.lower()} step ({'native' if self.native else 'reference'})"

class LuStep(NativeStep):
  """The LU node: factors, pivots and permutation (an output nobody reads is still written, into memory of the
  step's own)."""
  NATIVE = 'lu'
  _spare: list | None = None
  def call(self, args: list, dests: list) -> None:
    if self._spare is None: self._spare = [np.empty(shape, dt.np) for shape, dt in self.node.arg.out_avals]
    self.native(args[0], *[d if d is not None else spare for d, spare in zip(dests, self._spare)])

class LowerSolveStep(NativeStep):
  """The TRIANGULAR_SOLVE node: X with tril(l) X = b."""
  NATIVE = 'lower_solve'
  def call(self, args: list, dests: list) -> None:
    if dests[0] is not None: self.native(args[0], args[1], dests[0], self.node.arg)

class FftStep(NativeStep):
  """The FFT node (jnp.fft's transforms of lengths of 2, 3, 5 and 7 along one axis), on interleaved parts."""
  NATIVE = 'fft'
  def call(self, args: list, dests: list) -> None:
    if dests[0] is not None: self.native(args[0], dests[0], *self.node.arg)

step_rules.update({op: LoopStep for op in LOOPS})
step_rules.update({op: CollectiveStep for op in GroupOp.Collective})
step_rules[Ops.LU] = LuStep
step_rules[Ops.TRIANGULAR_SOLVE] = LowerSolveStep
step_rules[Ops.FFT] = FftStep

__all__ = ['LoopStep', 'CollectiveStep', 'NativeStep', 'LuStep', 'LowerSolveStep', 'FftStep']
