"""steps: the runtime steps of compiled programs for the nodes that are not kernels: control flow and collectives.

`step_rules` (tinyjx.lower.runtime) gets one entry per kind here, when the lowering is imported. A COND, WHILE or
SCAN node becomes a `LoopStep`: its sub-jaxprs are compiled once, when the enclosing program is lowered, and the
loop around them runs at run time over the slots' arrays, by the PYTHON device's `run_loop` (the one statement of
what the loops mean) with the compiled sub-programs in place of the interpreter; nothing is unrolled. A
collective becomes a `CollectiveStep`: the values of its slots go to the pmap runtime that the API layer registers
(`tinyjx.array.collective_hook`, reached through the PYTHON device's rule), so this layer never imports it.
"""
from __future__ import annotations
import numpy as np
from tinyjx import settings as config
from tinyjx.uop import UOp, Ops, GroupOp
from tinyjx.devices.python import LOOPS, run_loop
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
    self.fast = self.runners

  def run(self, frame) -> None:
    self.fast = self.runners if config.get('DEBUG') < 2 else [None] * len(self.exes)   # DEBUG=2 times each kernel
    outs = run_loop(self.node, self.call, [frame.array(s) for s in self.src_slots])
    for slot, value in zip(self.out_slots, outs):
      if slot is not None: np.copyto(frame.array(slot), value)

  def call(self, i: int, args) -> list:
    """Run compiled sub-program `i` on numpy arrays; returns fresh arrays."""
    jaxpr = self.node.arg.jaxprs[i]
    bufs = [self.device.from_numpy(np.ascontiguousarray(a, p.dtype.np).reshape(p.shape), p.dtype)
            for a, p in zip(args, jaxpr.params)]
    runner = self.fast[i]
    outs = runner(bufs) if runner is not None else None     # None: it declined (another thread has the arena)
    if outs is None: outs = self.exes[i].run(bufs)
    return [b.numpy().reshape(o.shape) for b, o in zip(outs, jaxpr.outs)]

  def __repr__(self): return f"{self.node.op.name.lower()} step ({len(self.exes)} compiled sub-programs)"

class CollectiveStep(InterpretedStep):
  """A collective in a compiled program: this device's value goes to the running pmap's runtime (the PYTHON
  device's rule calls `tinyjx.array.collective_hook`) and the result comes back into the output slot."""
  def __init__(self, node: UOp, st, slots: list): super().__init__(node, [st.slot_of[s] for s in node.src], slots)
  def __repr__(self): return f"{self.node.op.name.lower()} step over axis {self.node.arg[0]!r}"

step_rules.update({op: LoopStep for op in LOOPS})
step_rules.update({op: CollectiveStep for op in GroupOp.Collective})

__all__ = ['LoopStep', 'CollectiveStep']
