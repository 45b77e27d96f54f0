"""steps: the runtime steps of compiled programs for the nodes that are not kernels: control flow and collectives.

`step_rules` (tinyjx.lower.runtime) gets one entry per kind here, when the lowering is imported. A COND, WHILE or
SCAN node becomes a `LoopStep`: its sub-jaxprs are compiled once, when the enclosing program is lowered, and the
loop around them runs at run time over the slots' arrays, by the PYTHON device's `run_loop` (the one statement of
what the loops mean) with the compiled sub-programs in place of the interpreter; nothing is unrolled. On a device
with a loop driver (the CPU's `drive_loop`) a WHILE or SCAN whose sub-programs are only kernels runs whole in one
foreign call instead (`CompiledLoop`: no Python between iterations), with the same meaning. A
collective becomes a `CollectiveStep`: the values of its slots go to the pmap runtime that the API layer registers
(`tinyjx.array.collective_hook`, reached through the PYTHON device's rule), so this layer never imports it.
"""
from __future__ import annotations
import ctypes
import numpy as np
from tinyjx import counters, settings as config
from tinyjx.uop import UOp, Ops, GroupOp
from tinyjx.devices.python import LOOPS, run_loop, host_empty
from tinyjx.lower.runtime import InterpretedStep, step_rules

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
    # jit's hit path for each sub-program that has one (only kernels, on host memory): an iteration of a small
    # body then costs a few microseconds of Python instead of about 20 (Executable.run's general binding). (A
    # compile that stops at a Lowering, CUDA's PTX check on a machine without a GPU, has no runner.)
    self.runners = [exe.direct_runner() if hasattr(exe, 'direct_runner') else None for exe in self.exes]
    compiled = node.op is not Ops.COND and hasattr(self.device, 'drive_loop') and all(self.runners)
    self.compiled = CompiledLoop(node, self.exes) if compiled else None

  def run(self, frame) -> None:
    debug = config.get('DEBUG') >= 2                          # DEBUG=2 times each kernel: every call goes through run
    args = [frame.array(s) for s in self.src_slots]
    outs = self.compiled.run(args) if self.compiled is not None and not debug else None
    if outs is None:
      runners = [None] * len(self.exes) if debug else self.runners
      outs = run_loop(self.node, lambda i, values: self.call(i, values, runners[i]), args)
    for slot, value in zip(self.out_slots, outs):
      if slot is not None: np.copyto(frame.array(slot), value)

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

class CompiledLoop:
  """A WHILE or SCAN whose sub-programs are only kernels (each has `Executable.direct_runner`), on a device with
  `drive_loop` (the CPU): the whole loop is one foreign call, which calls the sub-programs' entry points on
  argument tables made here, and no Python runs between iterations. The carry lives in two sets of arrays; the
  body reads one and writes the other, and they swap at each iteration. A scan's body reads its slice of xs in
  place and writes its row of ys in place (the driver moves those two pointers of the table before each
  iteration). An output of a sub-program that is not a slot of its own (an input, a constant or a repeat passed
  through) is copied after the body. `run(args) -> outputs`, or None when an executable's arena is in use by
  another thread (the caller then runs the loop step by step)."""
  def __init__(self, node: UOp, exes: list):
    self.node, self.exes, a = node, exes, node.arg
    self.nc = a.n_carry
    self.parallel = any('omp parallel' in e.source for e in exes)
    self.body_exe = exes[-1]
    self.cond_exe = exes[0] if node.op is Ops.WHILE else None

  def run(self, args: list):
    locks = [e._lock for e in self.exes]
    got = [lock.acquire(blocking=False) for lock in locks]
    try:
      if not all(got): return None
      return self._run(args)
    finally:
      for lock, g in zip(locks, got):
        if g: lock.release()

  def _run(self, args: list):
    a, nc, body = self.node.arg, self.nc, self.body_exe
    jx = a.body
    carry = [[host_empty(o.shape, o.dtype.np)[0] for o in jx.outs[:nc]] for _ in range(2)]   # (aligned: host_empty)
    for dst, src in zip(carry[0], args[:nc]): np.copyto(dst, np.asarray(src).reshape(dst.shape), casting='unsafe')
    scan = self.cond_exe is None
    length = a.length if scan else -1
    def operands(values, params):    # as the sub-program binds them: contiguous, in its dtype and shape
      return [np.ascontiguousarray(v, p.dtype.np).reshape(p.shape) for v, p in zip(values, params)]
    if scan:
      xs = [np.ascontiguousarray(v, p.dtype.np) for v, p in zip(args[nc:nc + a.n_xs], jx.params[nc:])]
      consts = operands(args[nc + a.n_xs:], jx.params[nc + a.n_xs:])
    else:
      xs, ncc = [], a.n_cond_consts
      ccon = operands(args[nc:nc + ncc], a.cond.params[nc:])
      consts = operands(args[nc + ncc:], jx.params[nc:])
    ys = [host_empty((a.length,) + o.shape, o.dtype.np)[0] for o in jx.outs[nc:]] if scan else []
    addr = lambda x: x.ctypes.data
    slides, copies, tables = [[], []], [[], []], []
    for p in range(2):
      table = type(body._template).from_buffer_copy(body._template)
      tables.append(table)
      def source(r):   # (address, stride per iteration) of the body's input r at parity p
        if r < nc: return addr(carry[p][r]), 0
        if scan and r < nc + len(xs): return addr(xs[r - nc]), xs[r - nc].strides[0] if a.length else 0
        return addr(consts[r - nc - len(xs)]), 0
      for r, slot in enumerate(body.program.in_slots):
        base, stride = source(r)
        if stride: slides[p].append((ctypes.addressof(table), slot, base, stride))
        else: table[slot] = base
      outs = []     # (address, stride) of each output's destination
      for j, o in enumerate(jx.outs):
        if j < nc: outs.append((addr(carry[1 - p][j]), 0))
        else: outs.append((addr(ys[j - nc]), ys[j - nc].strides[0]))
      for j, (kind, ref, _) in enumerate(body.program.out_plan):
        dst, dstride = outs[j]
        if kind == 'slot':
          if dstride: slides[p].append((ctypes.addressof(table), ref, dst, dstride))
          else: table[ref] = dst
          continue
        src, sstride = (source(ref) if kind == 'input' else outs[ref] if kind == 'dup' else
                        (addr(body._const_arrays[ref]), 0))
        copies[p].append((src, sstride, dst, dstride, jx.outs[j].size * jx.outs[j].dtype.np.itemsize))
    cond = None
    if not scan:
      ce = self.cond_exe
      flag = np.zeros((), np.bool_)
      ctables, flags = [], []
      for p in range(2):
        table = type(ce._template).from_buffer_copy(ce._template)
        ctables.append(table)
        for r, slot in enumerate(ce.program.in_slots):
          table[slot] = addr(carry[p][r]) if r < nc else addr(ccon[r - nc])
        kind, ref, _ = ce.program.out_plan[0]
        if kind == 'slot':
          table[ref] = addr(flag)
          flags.append(addr(flag))
        elif kind == 'input': flags.append(addr(carry[p][ref]) if ref < nc else addr(ccon[ref - nc]))
        else: flags.append(addr(ce._const_arrays[ref]))
      cond = ([st.program for st in ce.steps], ctables, flags)
    n = self.exes[0].device.drive_loop(length, a.reverse if scan else False, cond,
                                       ([st.program for st in body.steps], tables), slides, copies, self.parallel)
    for e, times in ((body, n), (self.cond_exe, n + 1)):
      if e is None: continue
      counters.add_many((('kernels', times * len(e.program.kernels)), ('flops', times * e.program.flops),
                         ('bytes', times * e.program.nbytes)))
    return tuple(carry[n & 1]) + tuple(ys)

class CollectiveStep(InterpretedStep):
  """A collective in a compiled program: this device's value goes to the running pmap's runtime (the PYTHON
  device's rule calls `tinyjx.array.collective_hook`) and the result comes back into the output slot."""
  def __init__(self, node: UOp, st, slots: list): super().__init__(node, [st.slot_of[s] for s in node.src], slots)
  def __repr__(self): return f"{self.node.op.name.lower()} step over axis {self.node.arg[0]!r}"

step_rules.update({op: LoopStep for op in LOOPS})
step_rules.update({op: CollectiveStep for op in GroupOp.Collective})

__all__ = ['LoopStep', 'CollectiveStep']
