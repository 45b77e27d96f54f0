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
from tinyjx.uop import UOp, Ops, toposort, substitute
from tinyjx.lower import symbolic as sym
from tinyjx.lower.index import Loop, Decl, Update, Store, Sort, Kernel, Matmul, unflatten
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

def _perfect_nest(stmts: list) -> tuple[list, list]:
  """The loops of a chain where each loop holds only the next one, and the innermost body."""
  loops = []
  while len(stmts) == 1 and isinstance(stmts[0], Loop):
    loops.append(stmts[0])
    stmts = stmts[0].body
  return loops, stmts

def _flat_vars(vars_: list, name: str) -> tuple[UOp, dict]:
  """One template variable running over the product of `vars_`, and each var as an expression of it."""
  size = math.prod(v.arg[1] for v in vars_)
  flat = sym.special(name, size)
  return flat, dict(zip(vars_, unflatten(flat, [v.arg[1] for v in vars_])))

def _rewrite(u: UOp, mapping: dict) -> UOp: return sym.resimplify(substitute([u], mapping)[0])

def as_matmul(k: Kernel):
  """The kernel as nested batch loops around a `Matmul`, if it is a big enough sum of products; else None."""
  loops, inner = _perfect_nest(k.body)
  if len(inner) != 3 or not (isinstance(inner[0], Decl) and isinstance(inner[1], Loop) and isinstance(inner[2], Store)):
    return None
  acc, store = inner[0].acc, inner[2]
  red, body = _perfect_nest([inner[1]])
  if acc.arg[1] is not Ops.ADD or acc.dtype not in (dtypes.float32, dtypes.float64): return None
  if len(body) != 1 or not isinstance(body[0], Update) or body[0].value.op is not Ops.MUL: return None
  x, y = body[0].value.src
  vx, vy = sym.loop_vars(x), sym.loop_vars(y)
  if any(n.op is Ops.DEFINE_ACC for n in toposort([x, y])): return None
  outer = [l.var for l in loops]
  iv = [v for v in outer if v in vx and v not in vy]
  jv = [v for v in outer if v in vy and v not in vx]
  if not iv or not jv: return None
  if outer[-1] in iv: (x, y), (iv, jv) = (y, x), (jv, iv)    # the contiguous output axis runs along the vector tile
  kv = [l.var for l in red]
  (si, mi), (sj, mj), (sk, mk) = _flat_vars(iv, 'i'), _flat_vars(jv, 'j'), _flat_vars(kv, 'k')
  if si.arg[1] * sj.arg[1] * sk.arg[1] < MATMUL_MIN_WORK: return None
  cv = UOp(Ops.SPECIAL, acc.dtype, (), ('cv', 0))
  out_map = {**mi, **mj, acc: cv}
  new_store = Store(store.buf, _rewrite(store.idx, out_map), _rewrite(store.value, out_map), store.valid)
  mm = Matmul(si.arg[1], sj.arg[1], sk.arg[1], _rewrite(x, {**mi, **mk}), _rewrite(y, {**mj, **mk}), new_store, acc.dtype)
  batch = [Loop(l.var) for l in loops if l.var not in iv and l.var not in jv]
  stmts: list = [mm]
  for b in reversed(batch): stmts = [Loop(b.var, stmts)]
  if batch and mm.work < PARALLEL_WORK * 16 and math.prod(b.size for b in batch) > 1:
    mm.parallel, stmts[0].parallel = False, True       # many small matmuls: one per thread
  return stmts

def optimize(k: Kernel, slot_bytes: dict) -> Kernel:
  """Speed decisions for one kernel (in place); also fills in its flops and bytes."""
  k.nbytes = sum(slot_bytes.get(g.arg, 0) for g in k.args)
  if (mm := as_matmul(k)) is not None: k.body = mm
  else: mark_parallel(k)
  k.flops = work(k.body)
  return k
