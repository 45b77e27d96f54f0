"""steps: the runtime steps of compiled programs for the nodes that are not kernels: control flow and collectives.

`step_rules` (tinyjx.lower.runtime) gets one entry per kind here, when the lowering is imported. A COND, WHILE or
SCAN node becomes a `LoopStep`: its sub-jaxprs are compiled once, when the enclosing program is lowered, and the
loop around them runs at run time over the slots' arrays, by the PYTHON device's `run_loop` (the one statement of
what the loops mean) with the compiled sub-programs in place of the interpreter; nothing is unrolled. On a device
with a loop driver (the CPU's `loop_call`) a WHILE or SCAN whose sub-programs are only kernels runs whole in one
foreign call instead (`CompiledLoop`: no Python between iterations), with the same meaning. A
collective becomes a `CollectiveStep`: the values of its slots go to the pmap runtime that the API layer registers
(`tinyjx.array.collective_hook`, reached through the PYTHON device's rule), so this layer never imports it.
"""
from __future__ import annotations
import ctypes
import numpy as np
from tinyjx import counters, settings as config
from tinyjx.uop import UOp, Ops, GroupOp
from tinyjx.devices.python import LOOPS, run_loop, host_empty, address
from tinyjx.lower.runtime import InterpretedStep, KernelCall, step_rules

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
    # jit's hit path for each sub-program that has one (kernels and loops, on host memory): an iteration of a small
    # body then costs a few microseconds of Python instead of about 20 (Executable.run's general binding). (A
    # compile that stops at a Lowering, CUDA's PTX check on a machine without a GPU, has no runner.)
    self.runners = [exe.direct_runner() if hasattr(exe, 'direct_runner') else None for exe in self.exes]
    compiled = node.op is not Ops.COND and hasattr(self.device, 'loop_call') and all(self.runners) and \
      all(isinstance(k, KernelCall) and k.slots is None for exe in self.exes for k in exe.steps)
    self.compiled = CompiledLoop(node, self.exes) if compiled else None

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

class CompiledLoop:
  """A WHILE or SCAN whose sub-programs are only kernels (each has `Executable.direct_runner`), on a device with
  `loop_call` (the CPU): the whole loop is one foreign call, which calls the sub-programs' entry points on
  argument tables made here, and no Python runs between iterations. The carry lives in two sets of arrays; the
  body reads one and writes the other, and they swap at each iteration. A scan's body reads its slice of xs in
  place and writes its row of ys in place (the driver moves those two pointers of the table before each
  iteration). An output of a sub-program that is not a slot of its own (an input, a constant or a repeat passed
  through) is copied after the body. `run(args, dests)` copies the results into `dests` (None: not wanted) and
  returns True, or returns False when an executable's arena is in use by another thread (the caller then runs
  the loop step by step).

  The two carry sets, the argument tables, the cond's flag and the driver's arguments are made at the first run and
  kept (`_prepare`), with the carries' addresses in place; a run writes in the addresses of its arguments (the
  constants, a scan's xs and its fresh ys), copies the initial carry in and the results out, all under the
  executables' locks. A while loop of one iteration spent 106 us a call in `_run` when each call made the tables,
  38 when they were kept and the driver's arguments were not, 22 now (11 of them in the driver's call)."""
  def __init__(self, node: UOp, exes: list):
    self.node, self.exes, a = node, exes, node.arg
    self.nc = a.n_carry
    self.parallel = any('omp parallel' in e.source for e in exes)
    self.body_exe = exes[-1]
    self.cond_exe = exes[0] if node.op is Ops.WHILE else None
    self._kept = None   # (_prepare)

  def run(self, args: list, dests: list) -> bool:
    locks = [e._lock for e in self.exes]
    got = [lock.acquire(blocking=False) for lock in locks]
    try:
      if not all(got): return False
      for dest, value in zip(dests, self._run(args)):
        if dest is not None: np.copyto(dest, value)
      return True
    finally:
      for lock, g in zip(locks, got):
        if g: lock.release()

  def _prepare(self):
    """The carry sets, the cond's flag, per parity the body's and the cond's argument tables, and the driver's
    arguments (the device's `loop_call`: the slides and copies of each parity, the flags), with every address that
    is the same at each run written in (the carries', the flag's, the sub-programs' constants'). What a run writes
    in place, its own arrays' addresses, is listed as patches (object, index or field, what), `what` (kind, index):
    'k' a constant argument, 'c' a constant of the cond, 'x' a scan's xs, 'y' its ys (these two move by their
    stride, a slice's bytes, each iteration: slides; not at all in a scan of no iterations)."""
    a, nc, body, jx, ce = self.node.arg, self.nc, self.body_exe, self.node.arg.body, self.cond_exe
    scan, n_xs = ce is None, (a.n_xs if ce is None else 0)
    carry = [[host_empty(o.shape, o.dtype.np) for o in jx.outs[:nc]] for _ in range(2)]
    flag = np.zeros((), np.bool_)
    tables = [type(body._template).from_buffer_copy(body._template) for _ in range(2)]
    ctables = [type(ce._template).from_buffer_copy(ce._template) for _ in range(2)] if not scan else []
    def stride(what):
      if not isinstance(what, tuple) or what[0] not in 'xy' or not a.length: return 0
      v = jx.params[nc + what[1]] if what[0] == 'x' else jx.outs[nc + what[1]]
      return v.size * v.dtype.np.itemsize
    patches, slides, copies, flags = [], [[], []], [[], []], []
    for p in range(2):
      table = tables[p]
      def source(r):   # the body's input r at parity p: an address, or what the run supplies
        if r < nc: return carry[p][r][1]
        return ('x', r - nc) if r < nc + n_xs else ('k', r - nc - n_xs)
      outs = [carry[1 - p][j][1] if j < nc else ('y', j - nc) for j in range(len(jx.outs))]
      def bind(slot, what):
        if isinstance(what, int): table[slot] = what
        elif stride(what): slides[p].append((slot, what))
        else: patches.append((table, slot, what))
      for r, slot in enumerate(body.program.in_slots): bind(slot, source(r))
      for j, (kind, ref, _) in enumerate(body.program.out_plan):
        if kind == 'slot':
          bind(ref, outs[j])
          continue
        src = source(ref) if kind == 'input' else outs[ref] if kind == 'dup' else address(body._const_arrays[ref])
        copies[p].append((src, outs[j], jx.outs[j].size * jx.outs[j].dtype.np.itemsize))
      if not scan:
        for r, slot in enumerate(ce.program.in_slots):
          if r < nc: ctables[p][slot] = carry[p][r][1]
          else: patches.append((ctables[p], slot, ('c', r - nc)))
        kind, ref, _ = ce.program.out_plan[0]
        if kind == 'slot':
          ctables[p][ref] = address(flag)
          flags.append(address(flag))
        elif kind == 'input': flags.append(carry[p][ref][1] if ref < nc else ('c', ref - nc))
        else: flags.append(address(ce._const_arrays[ref]))
    call = body.device.loop_call(([st.program for st in ce.steps], ctables) if not scan else None,
                                 ([st.program for st in body.steps], tables), [len(s) for s in slides],
                                 [len(c) for c in copies])
    for p in range(2):
      for i, (slot, what) in enumerate(slides[p]):
        sl = call.slides[p][i]
        sl.table, sl.slot, sl.stride = ctypes.addressof(tables[p]), slot, stride(what)
        patches.append((sl, 'base', what))
      for i, (src, dst, nbytes) in enumerate(copies[p]):
        cp = call.copies[p][i]
        cp.src_stride, cp.dst_stride, cp.bytes = stride(src), stride(dst), nbytes
        for field, what in (('src', src), ('dst', dst)):
          if isinstance(what, int): setattr(cp, field, what)
          else: patches.append((cp, field, what))
      if not scan:
        if isinstance(flags[p], int): call.flags[p] = flags[p]
        else: patches.append((call.flags, p, flags[p]))
    per_run = lambda e: (len(e.program.kernels), e.program.flops, e.program.nbytes) if e is not None else (0, 0, 0)
    counts = list(zip(('kernels', 'flops', 'bytes'), per_run(body), per_run(ce)))
    self._kept = ([[c for c, _ in cs] for cs in carry], flag, tables, ctables, call, patches, counts)

  def _run(self, args: list):
    a, nc, ce = self.node.arg, self.nc, self.cond_exe
    jx = a.body
    if self._kept is None: self._prepare()
    carry, _, _, _, call, patches, counts = self._kept   # (_: the flag and tables, kept alive)
    for dst, src in zip(carry[0], args[:nc]): np.copyto(dst, np.asarray(src).reshape(dst.shape), casting='unsafe')
    scan = ce is None
    def operands(values, params):    # as the sub-program binds them: contiguous, in its dtype and shape
      return [np.ascontiguousarray(v, p.dtype.np).reshape(p.shape) for v, p in zip(values, params)]
    arrays = {'x': [], 'y': [], 'c': []}
    if scan:
      arrays['x'] = [np.ascontiguousarray(v, p.dtype.np) for v, p in zip(args[nc:nc + a.n_xs], jx.params[nc:])]
      arrays['k'] = operands(args[nc + a.n_xs:], jx.params[nc + a.n_xs:])
      arrays['y'] = [host_empty((a.length,) + o.shape, o.dtype.np)[0] for o in jx.outs[nc:]]
    else:
      ncc = a.n_cond_consts
      arrays['c'] = operands(args[nc:nc + ncc], a.cond.params[nc:])
      arrays['k'] = operands(args[nc + ncc:], jx.params[nc:])
    addrs = {k: [address(v) for v in vs] for k, vs in arrays.items()}
    for target, key, (kind, i) in patches:
      if type(key) is str: setattr(target, key, addrs[kind][i])
      else: target[key] = addrs[kind][i]
    n = call.run(a.length if scan else -1, a.reverse if scan else False, self.parallel)
    counters.add_many([(name, n * body + (n + 1) * cond) for name, body, cond in counts])
    return tuple(carry[n & 1]) + tuple(arrays['y'])

class CollectiveStep(InterpretedStep):
  """A collective in a compiled program: this device's value goes to the running pmap's runtime (the PYTHON
  device's rule calls `tinyjx.array.collective_hook`) and the result comes back into the output slot."""
  def __init__(self, node: UOp, st, slots: list): super().__init__(node, [st.slot_of[s] for s in node.src], slots)
  def __repr__(self): return f"{self.node.op.name.lower()} step over axis {self.node.arg[0]!r}"

step_rules.update({op: LoopStep for op in LOOPS})
step_rules.update({op: CollectiveStep for op in GroupOp.Collective})

__all__ = ['LoopStep', 'CollectiveStep']
