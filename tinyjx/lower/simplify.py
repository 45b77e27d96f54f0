"""simplify and decompose: the two array-level rewrite passes that run before scheduling.

`pm_simplify` removes work without changing a single bit of any result: constant folding (with the
PYTHON device's rules, so folding means exactly what running would mean), identities that are exact in
IEEE arithmetic (`x*1`, `x/1`, `x-0.0`, `x+(-0.0)`, integer `x+0`), casts of casts where the first cast
is lossless, movement ops on constants, chains of reshapes and permutes, grad tags. After it, `relu_masks`
(a rewrite of the whole graph): a ReLU's gradient tests the ReLU's output, not its input.

`pm_decompose` rewrites ops the C renderer does not run natively into ones it does:
- DOT_GENERAL becomes a product of two broadcast views summed over the contracting axes (the schedule
  and the optimizer recognize that shape and emit a tiled matmul);
- float16/bfloat16 arithmetic runs in float32 and rounds back after each op; their sums and products
  accumulate in float32 (as the PYTHON device and XLA on the CPU do);
- integer reciprocal is integer division of one.
"""
from __future__ import annotations
import math
import numpy as np
from tinyjx import dtypes, uop
from tinyjx.uop import UOp, Ops, GroupOp, toposort, substitute
from tinyjx.rewrite import UPat, PatternMatcher

LOW = (dtypes.float16, dtypes.bfloat16)
f32 = dtypes.float32

# --- simplify ---
def fold(x: UOp):
  """An elementwise op on constants is a constant, computed by the reference rules."""
  if not x.src or not all(s.op is Ops.CONST for s in x.src): return None
  from tinyjx.devices.python import evaluate_node
  with np.errstate(all='ignore'):
    v = evaluate_node(x, *[np.array(s.arg[0], dtype=s.dtype.np) for s in x.src])
  return UOp.const(v.item(), x.dtype, x.shape)

def _is(c: UOp, v) -> bool:
  if c.op is not Ops.CONST: return False
  if isinstance(v, float) and v == 0: return c.arg[0] == 0 and math.copysign(1, c.arg[0]) == math.copysign(1, v)
  return c.arg[0] == v

def add_zero(x: UOp, c: UOp):
  if x.dtype.kind in 'iu' and _is(c, 0): return x
  return x if x.dtype.kind == 'f' and _is(c, -0.0) else None

def sub_zero(x: UOp, c: UOp): return x if (x.dtype.kind in 'iu' and _is(c, 0)) or _is(c, 0.0) else None
def mul_one(x: UOp, c: UOp): return x if x.dtype.kind != 'b' and _is(c, 1) else None
def int_mul_zero(x: UOp, c: UOp): return c if x.dtype.kind in 'iu' and _is(c, 0) else None

def lossless(a, b) -> bool:
  """Every value of dtype `a` is exactly representable in dtype `b`."""
  if a is b or a.kind == 'b': return True
  if a.kind == b.kind and a.kind in 'iu': return b.itemsize >= a.itemsize
  if a.kind == 'u' and b.kind == 'i': return b.itemsize > a.itemsize
  if a.kind == 'f' and b.kind == 'f':
    return b.itemsize > a.itemsize and not (a is dtypes.float16 and b is dtypes.bfloat16)
  if a.kind in 'iu' and b.kind == 'f':
    mantissa = {dtypes.float16: 11, dtypes.bfloat16: 8, dtypes.float32: 24, dtypes.float64: 53}[b]
    return 8 * a.itemsize - (a.kind == 'i') <= mantissa
  return False

def const_view(c: UOp, v: UOp):
  if v.op is Ops.PAD and c.arg[0] != 0: return None
  return UOp.const(c.arg[0], c.dtype, v.shape)

def permute_permute(x: UOp, p: UOp, q: UOp): return x.permute(tuple(p.arg[i] for i in q.arg))
def reduce_unit_axes(x: UOp, r: UOp):
  """A reduction over size-1 axes is a reshape (not a float sum: 0 + -0.0 is +0.0)."""
  if r.arg[0] is Ops.ADD and x.dtype.kind == 'f': return None
  return x.reshape(r.shape) if all(x.shape[a] == 1 for a in r.arg[1]) else None
def reduce_const(c: UOp, r: UOp):
  """The max or min of a constant is the constant, unless the reduced axes are empty (then it is the identity)."""
  if r.arg[0] not in (Ops.MAX, Ops.MIN) or any(c.shape[a] == 0 for a in r.arg[1]): return None
  return UOp.const(c.arg[0], r.dtype, r.shape)
def where_const(c: UOp, a: UOp, b: UOp): return a if c.arg[0] else b

def inline_call(call: UOp, g: UOp) -> UOp:
  """Custom-rule and checkpoint nodes compute their primal sub-jaxpr: inline it (the schedule fuses it)."""
  return call.arg.jaxpr(*call.src)[g.arg]

x, c = UPat.var('x'), UPat.cvar('c')
pm_simplify = PatternMatcher([
  (UPat((Ops.TAG, Ops.STOP_GRADIENT), src=(x,)), lambda x: x),
  (UPat(Ops.GETITEM, src=(UPat((Ops.CUSTOM_JVP, Ops.CUSTOM_VJP, Ops.CHECKPOINT), name='call'),), name='g'),
   inline_call),
  (UPat(GroupOp.Elementwise - {Ops.BITCAST}, name='x'), fold),
  (UPat(Ops.ADD, src=(x, c), commutative=True), add_zero),
  (UPat(Ops.SUB, src=(x, c)), sub_zero),
  (UPat(Ops.MUL, src=(x, c), commutative=True), mul_one),
  (UPat(Ops.MUL, src=(x, c), commutative=True), int_mul_zero),
  (UPat(Ops.DIV, src=(x, c)), lambda x, c: x if _is(c, 1) and x.dtype.kind != 'b' else None),
  (UPat(Ops.CAST, src=(UPat(Ops.CAST, src=(x,), name='inner'),), name='top'),
   lambda x, inner, top: x.cast(top.dtype) if lossless(x.dtype, inner.dtype) else None),
  (UPat(GroupOp.Movement, src=(c,), name='v'), const_view),
  (UPat(Ops.RESHAPE, src=(UPat(Ops.RESHAPE, src=(x,)),), name='r'), lambda x, r: x.reshape(r.arg)),
  (UPat(Ops.PERMUTE, src=(UPat(Ops.PERMUTE, src=(x,), name='p'),), name='q'), permute_permute),
  (UPat(Ops.EXPAND, src=(UPat(Ops.EXPAND, src=(x,)),), name='e'), lambda x, e: x.expand(e.arg)),
  (UPat(Ops.REDUCE, src=(x,), name='r'), reduce_unit_axes),
  (UPat(Ops.REDUCE, src=(c,), name='r'), reduce_const),
  (UPat(Ops.WHERE, src=(c, UPat.var('a'), UPat.var('b'))), where_const),
])

# --- decompose ---
def dot_general(a: UOp, b: UOp, d: UOp) -> UOp:
  """dot_general as sum(a_view * b_view) over the contracting axes of the (batch, a free, b free, k) space."""
  (lc, rc), (lb, rb) = d.arg
  lf = [i for i in range(a.ndim) if i not in lc and i not in lb]
  rf = [i for i in range(b.ndim) if i not in rc and i not in rb]
  nb, nfa, nfb, nk = len(lb), len(lf), len(rf), len(lc)
  acc = f32 if d.dtype in LOW else d.dtype
  av = a.cast(acc).permute(tuple(lb) + tuple(lf) + tuple(lc))
  bv = b.cast(acc).permute(tuple(rb) + tuple(rf) + tuple(rc))
  av = av.reshape(av.shape[:nb + nfa] + (1,) * nfb + av.shape[nb + nfa:])
  bv = bv.reshape(bv.shape[:nb] + (1,) * nfa + bv.shape[nb:])
  full = tuple(q if p == 1 else p for p, q in zip(av.shape, bv.shape))
  kaxes = tuple(range(nb + nfa + nfb, nb + nfa + nfb + nk))
  if nk and (a.op is Ops.CONST or b.op is Ops.CONST):
    # a constant operand (the ones of a sum's gradient): the products do not vary along its free axes, so the sums
    # run once over the other operand's shape and are broadcast (the same products, added in the same order)
    small = UOp(Ops.MUL, acc, (av, UOp.const(b.arg[0], acc, av.shape)) if b.op is Ops.CONST else
                (UOp.const(a.arg[0], acc, bv.shape), bv))
    sums = UOp(Ops.REDUCE, acc, (small,), (Ops.ADD, kaxes))
    return sums.expand(full[:nb + nfa + nfb]).reshape(d.shape).cast(d.dtype)
  prod = UOp(Ops.MUL, acc, (av.expand(full), bv.expand(full)))
  out = UOp(Ops.REDUCE, acc, (prod,), (Ops.ADD, kaxes))
  return out.reshape(d.shape).cast(d.dtype) if nk else prod.reshape(d.shape).cast(d.dtype)

def low_precision_alu(n: UOp):
  """f16/bf16 arithmetic: compute in float32, round back (comparisons just compare in float32)."""
  if n.op in (Ops.WHERE, Ops.CAST, Ops.BITCAST) or not any(s.dtype in LOW for s in n.src): return None
  src = tuple(s.cast(f32) if s.dtype in LOW else s for s in n.src)
  out_dtype = f32 if n.dtype in LOW else n.dtype
  return UOp(n.op, out_dtype, src, n.arg).cast(n.dtype)

def low_precision_reduce(n: UOp):
  if n.dtype not in LOW: return None
  return UOp(n.op, f32, (n.src[0].cast(f32),), n.arg).cast(n.dtype)

def low_precision_cast(x: UOp, n: UOp):
  """Casts to and from f16/bf16 go through float32, as the reference does (float64 to float16 is direct)."""
  a, b = x.dtype, n.dtype
  if a is b or f32 in (a, b) or (a is dtypes.float64 and b is dtypes.float16): return None
  if a not in LOW and b not in LOW: return None
  return x.cast(f32).cast(b)

def low_precision_iota(n: UOp): return UOp(Ops.IOTA, f32, (), n.arg).cast(n.dtype) if n.dtype in LOW else None
def int_recip(x: UOp, n: UOp):
  return UOp(Ops.DIV, n.dtype, (UOp.const(1, n.dtype, n.shape), x)) if n.dtype.kind in 'iu' else None

pm_decompose = PatternMatcher([
  (UPat(Ops.DOT_GENERAL, src=(UPat.var('a'), UPat.var('b')), name='d'), dot_general),
  (UPat(GroupOp.Elementwise, name='n'), low_precision_alu),
  (UPat((Ops.REDUCE, Ops.CUMULATIVE), name='n'), low_precision_reduce),
  (UPat(Ops.CAST, src=(x,), name='n'), low_precision_cast),
  (UPat(Ops.IOTA, name='n'), low_precision_iota),
  (UPat(Ops.RECIP, src=(x,), name='n'), int_recip),
])

def _zero(n: UOp) -> bool: return n.op is Ops.CONST and n.dtype.kind == 'f' and n.arg[0] == 0

def relu_masks(roots: list) -> list:
  """A ReLU's other uses of its mask read the ReLU's output: where relu = where(0 < x, x, 0) and x is used by
  nothing else, every other where(0 < x, ...) (the ReLU's gradient) tests 0 < relu instead, so x is read only
  by the ReLU and can be computed in the kernel that writes it (a convolution's bias and ReLU in its epilogue)
  instead of being stored for the gradient. Exact: 0 < relu is 0 < x for every x, NaN included (both false).
  One rebuild for all ReLUs, visiting each ReLU before the other users of its mask (none of them can be among the
  ReLU's sources: they read the mask, which reads x)."""
  nodes = toposort(roots)
  users: dict = {}
  for n in nodes:
    for s in n.src: users.setdefault(s, set()).add(n)
  relu_of = {}                                   # mask -> its ReLU, where the rewrite applies
  for w in nodes:
    if w.op is not Ops.WHERE: continue
    c, x, z = w.src
    if not (c.op is Ops.CMPLT and _zero(c.src[0]) and c.src[1] is x and _zero(z)) or c in relu_of: continue
    if users.get(x) == {c, w} and users[c] != {w} and not any(n in roots for n in (x, c, w)): relu_of[c] = w
  if not relu_of: return list(roots)
  after = {}                                     # each user of a rewritten mask, after that mask's ReLU
  for c, w in relu_of.items():
    for u in users[c] - {w}: after.setdefault(u, []).append(w)
  new: dict = {}
  for n in toposort(roots, after):               # each ReLU before the other users of its mask
    src = tuple(UOp(Ops.CMPLT, s.dtype, (s.src[0], new[relu_of[s]])) if s in relu_of and relu_of[s] in after.get(n, ())
                else new[s] for s in n.src)
    new[n] = n if src == n.src else n.replace(src=src)
    if uop.watcher is not None and new[n] is not n: uop.watcher.derived(new[n], n)   # (provenance, explain)
  return [new[r] for r in roots]

def fold_permutes(roots: list) -> list:
  """A reduction read only through one PERMUTE reduces a permuted input instead, so the kernel that
  computes it writes the layout its readers want (a matmul's transposed gradient is stored transposed).
  Folds run in graph order and each new reduction is built on the already-folded graph below it, or the
  unfolded reduction would stay alive there and be computed twice."""
  users: dict = {}
  for n in toposort(roots):
    for s in n.src: users.setdefault(s, set()).add(n)
  mapping = {}
  for p in [n for n in toposort(roots) if n.op is Ops.PERMUTE and n.src[0].op is Ops.REDUCE]:
    r = p.src[0]
    if users.get(r) != {p} or r in roots: continue
    op, axes = r.arg
    kept = [d for d in range(r.src[0].ndim) if d not in axes]
    order = [kept[i] for i in p.arg] + list(axes)
    n_kept = len(kept)
    src = substitute([r.src[0]], mapping)[0] if mapping else r.src[0]
    mapping[p] = UOp(Ops.REDUCE, r.dtype, (src.permute(order),), (op, tuple(range(n_kept, n_kept + len(axes)))))
  return substitute(roots, mapping)
