"""ad: automatic differentiation. `vjp_rules` and `jvp_rules` (one entry per op), the two graph walks that use
them, and the public transforms grad, value_and_grad, vjp, jvp, linearize, jacfwd, jacrev, hessian.

How a transform differentiates (DESIGN section 4): each differentiated input `x` becomes
`TAG(x, arg=fresh_id())`, `f` runs on Arrays of those tags (eagerly on concrete values, so Python control flow
works, or on traced values inside jit/vmap), and the output graph is walked: in reverse toposort from the outputs
for vjp (`backward_pass`), forward from the tags for jvp (`forward_pass`). Only nodes on a path from one of the
walk's own tags are visited; other tags are identities. Results then get the walk's own tags replaced by their
sources (`untag`), so no dead tag stays behind, and a gradient graph built inside an outer transform still
contains that transform's tag: grad of grad needs nothing special.

Rule contracts (docs/internals.md):
- `vjp_rules[op](ct, node) -> tuple`, one cotangent per `node.src`: a UOp, None (zero), or an Exception that the
  walk raises if that source really needs a cotangent. A multi-output node gets `ct` as a tuple (None entries).
- `jvp_rules[op](node, tangents) -> UOp | None` (None is zero), tangents one per source (None is zero); a
  multi-output node returns a tuple. GETITEM picks from it.
- cotangents and tangents exist only for float values: the walks drop them for int and bool nodes.
- a rule emits only ops that have rules in every table (closure), so the transforms compose.

Ops whose derivative JAX defines as the derivative of a composition (reduce_prod, cumprod, cummax, cummin)
differentiate the same composition here (`decomposed_vjp`/`decomposed_jvp`), so values, zeros and ties match JAX.
"""
from __future__ import annotations
import functools, math
from tinyjx import array as array_module, dtypes, tree_util, tracing, uop as uop_module
from tinyjx.array import Array, realize_uops
from tinyjx.tracing import Jaxpr
from tinyjx.memo import LRU
from tinyjx.uop import UOp, Ops, GroupOp, substitute, fresh_id, out_avals

# ---------------------------------------------------------------- small UOp arithmetic for rules

class E:
  """A UOp with arithmetic operators, so rules read like the math; Python numbers become constants of its dtype."""
  __slots__ = ('u',)
  def __init__(self, u: UOp): self.u = u
  def lift(self, v) -> UOp:
    if isinstance(v, E): return v.u
    return v if isinstance(v, UOp) else UOp.const(v, self.u.dtype, self.u.shape)
  def bin(self, op, o, flip=False) -> 'E':
    a, b = (self.lift(o), self.u) if flip else (self.u, self.lift(o))
    return E(UOp(op, a.dtype, (a, b)))
  def __add__(self, o): return self.bin(Ops.ADD, o)
  def __radd__(self, o): return self.bin(Ops.ADD, o, True)
  def __sub__(self, o): return self.bin(Ops.SUB, o)
  def __rsub__(self, o): return self.bin(Ops.SUB, o, True)
  def __mul__(self, o): return self.bin(Ops.MUL, o)
  def __rmul__(self, o): return self.bin(Ops.MUL, o, True)
  def __truediv__(self, o): return self.bin(Ops.DIV, o)
  def __rtruediv__(self, o): return self.bin(Ops.DIV, o, True)
  def __neg__(self): return self.un(Ops.NEG)
  def un(self, op) -> 'E': return E(UOp(op, self.u.dtype, (self.u,)))
  def pow(self, o): return self.bin(Ops.POW, o)
  def eq(self, o) -> UOp: return UOp(Ops.CMPEQ, dtypes.bool_, (self.u, self.lift(o)))
  def lt(self, o) -> UOp: return UOp(Ops.CMPLT, dtypes.bool_, (self.u, self.lift(o)))
  def le(self, o) -> UOp: return UOp(Ops.CMPLE, dtypes.bool_, (self.u, self.lift(o)))
  def ge(self, o) -> UOp: return UOp(Ops.CMPLE, dtypes.bool_, (self.lift(o), self.u))

def where(c: UOp, a, b, like: UOp) -> UOp:
  """WHERE(c, a, b) where `a`/`b` may be Python numbers (constants shaped like `like`)."""
  shaped = E(like)
  return UOp(Ops.WHERE, like.dtype, (c, shaped.lift(a), shaped.lift(b)))

def zeros(shape, dtype) -> UOp: return UOp.const(0, dtype, shape)
def add(a: UOp | None, b: UOp | None) -> UOp | None:
  """Sum of two cotangents where None means zero."""
  if a is None: return b
  if b is None: return a
  return UOp(Ops.ADD, a.dtype, (a, b))
def keep_dims(u: UOp, axes, shape) -> UOp:
  """`u` reduced over `axes` of `shape`, reshaped so that it broadcasts against `shape` again."""
  return u.reshape(tuple(1 if i in axes else s for i, s in enumerate(shape)))
def inverse_perm(perm) -> tuple: return tuple(sorted(range(len(perm)), key=lambda i: perm[i]))
def is_float(dt) -> bool: return dtypes.is_inexact(dt)   # has a tangent space: float or complex
def in_range(idx: UOp, n: int) -> UOp:
  """Bool mask of the SCATTER indices that land in [0, n); out-of-range updates are dropped."""
  i = E(idx)
  return UOp(Ops.AND, dtypes.bool_, (i.ge(0), i.lt(n)))
def per_update(mask: UOp, upd_shape) -> UOp:
  """An index-shaped mask broadcast over the trailing (slice) dims of the updates."""
  return mask.reshape(mask.shape + (1,) * (len(upd_shape) - mask.ndim)).expand(upd_shape)
def gather(x: UOp, idx: UOp) -> UOp: return UOp(Ops.GATHER, x.dtype, (x, idx))
def scatter(x: UOp, idx: UOp, upd: UOp, mode: str) -> UOp: return UOp(Ops.SCATTER, x.dtype, (x, idx, upd), mode)

# ---------------------------------------------------------------- elementwise rules

# Derivatives of unary ops as linear maps of the tangent g at input x and output y (all `E`). The same map is
# the vjp (the Jacobian is diagonal). Formulas follow JAX's, so edge values (0, inf, nan) agree.
UNARY_DERIVATIVES = {
  Ops.NEG: lambda g, x, y: -g,
  Ops.EXP: lambda g, x, y: g * y,
  Ops.LOG: lambda g, x, y: g / x,
  Ops.EXPM1: lambda g, x, y: g * (y + 1),
  Ops.LOG1P: lambda g, x, y: g / (x + 1),
  Ops.SIN: lambda g, x, y: g * x.un(Ops.COS),
  Ops.COS: lambda g, x, y: -g * x.un(Ops.SIN),
  Ops.TAN: lambda g, x, y: g * (y * y + 1),
  Ops.ASIN: lambda g, x, y: g * (1 - x * x).un(Ops.SQRT).un(Ops.RECIP),
  Ops.ACOS: lambda g, x, y: -g * (1 - x * x).un(Ops.SQRT).un(Ops.RECIP),
  Ops.ATAN: lambda g, x, y: g / (x * x + 1),
  Ops.SINH: lambda g, x, y: g * x.un(Ops.COSH),
  Ops.COSH: lambda g, x, y: g * x.un(Ops.SINH),
  Ops.TANH: lambda g, x, y: (g + g * y) * (1 - y),
  Ops.SQRT: lambda g, x, y: g * (0.5 / y),
  Ops.RECIP: lambda g, x, y: -g * (y * y),
  Ops.ABS: lambda g, x, y: E(where(x.ge(0), g, -g, g.u)),   # sign with d|x|/dx = 1 at 0
  Ops.ERF: lambda g, x, y: g * (2 / math.sqrt(math.pi)) * (-(x * x)).un(Ops.EXP),
}

def balanced(a: E, y: E, b: E) -> E:
  """JAX's tie rule for max/min: a gets 1 where it equals the result, halved where b equals it too."""
  one = where(a.eq(y), 1, 0, y.u)
  return E(one) / E(where(b.eq(y), 2, 1, y.u))

def pow_lhs(g, a, b, y):
  return g * (b * a.pow(b - 1))
def pow_rhs(g, a, b, y):
  safe_log = E(where(a.eq(0), 1, a, a.u)).un(Ops.LOG)
  return g * (safe_log * y)

# Binary ops: one linear map per operand, (g, a, b, y) -> that operand's contribution.
BINARY_DERIVATIVES = {
  Ops.ADD: (lambda g, a, b, y: g, lambda g, a, b, y: g),
  Ops.SUB: (lambda g, a, b, y: g, lambda g, a, b, y: -g),
  Ops.MUL: (lambda g, a, b, y: g * b, lambda g, a, b, y: a * g),
  Ops.DIV: (lambda g, a, b, y: g / b, lambda g, a, b, y: (-g * a) / (b * b)),
  Ops.REM: (lambda g, a, b, y: g, lambda g, a, b, y: -g * (a / b).un(Ops.TRUNC)),
  Ops.POW: (pow_lhs, pow_rhs),
  Ops.MAX: (lambda g, a, b, y: g * balanced(a, y, b), lambda g, a, b, y: g * balanced(b, y, a)),
  Ops.MIN: (lambda g, a, b, y: g * balanced(a, y, b), lambda g, a, b, y: g * balanced(b, y, a)),
  Ops.ATAN2: (lambda g, a, b, y: g * (b / (a * a + b * b)), lambda g, a, b, y: g * (-a / (a * a + b * b))),
}

def unary_vjp(ct, node):
  return (UNARY_DERIVATIVES[node.op](E(ct), E(node.src[0]), E(node)).u,)
def unary_jvp(node, ts):
  return UNARY_DERIVATIVES[node.op](E(ts[0]), E(node.src[0]), E(node)).u

def binary_vjp(ct, node):
  a, b = E(node.src[0]), E(node.src[1])
  return tuple(d(E(ct), a, b, E(node)).u for d in BINARY_DERIVATIVES[node.op])
def binary_jvp(node, ts):
  a, b = E(node.src[0]), E(node.src[1])
  parts = [d(E(t), a, b, E(node)).u for d, t in zip(BINARY_DERIVATIVES[node.op], ts) if t is not None]
  return functools.reduce(add, parts)

def no_vjp(ct, node): return (None,) * len(node.src)
def no_jvp(node, ts): return None

def where_vjp(ct, node):
  c = node.src[0]
  return (None, where(c, ct, 0, ct), where(c, 0, ct, ct))
def where_jvp(node, ts):
  _, ta, tb = ts
  return where(node.src[0], ta if ta is not None else 0, tb if tb is not None else 0, node)

def cast_vjp(ct, node):
  src = node.src[0]
  return (ct.cast(src.dtype) if is_float(src.dtype) and is_float(node.dtype) else None,)
def cast_jvp(node, ts):
  return ts[0].cast(node.dtype) if is_float(node.dtype) else None

# ---------------------------------------------------------------- complex parts
# JAX's convention: a cotangent c of a complex value pairs with a tangent t as Re(c * t), no conjugate. So a
# holomorphic op's vjp is its jvp (the products above hold for complex operands unchanged), and the parts'
# rules follow from Re(c * (tx + i ty)) = Re(c) tx - Im(c) ty.

def real(z: UOp) -> UOp: return UOp(Ops.REAL, dtypes.real_dtype(z.dtype), (z,))
def imag(z: UOp) -> UOp: return UOp(Ops.IMAG, dtypes.real_dtype(z.dtype), (z,))
def complex_of(x: UOp | None, y: UOp | None, like: UOp) -> UOp:
  """x + iy of the complex type of `like`; None is zero."""
  x, y = (v if v is not None else zeros(like.shape, dtypes.real_dtype(like.dtype)) for v in (x, y))
  return UOp(Ops.COMPLEX, like.dtype, (x, y))

def real_vjp(ct, node): return (complex_of(ct, None, node.src[0]),)
def imag_vjp(ct, node): return (complex_of(None, UOp(Ops.NEG, ct.dtype, (ct,)), node.src[0]),)
def complex_vjp(ct, node): return (real(ct), UOp(Ops.NEG, node.src[1].dtype, (imag(ct),)))
def complex_jvp(node, ts): return complex_of(ts[0], ts[1], node)

# ---------------------------------------------------------------- reductions

def reduce_vjp(ct, node):
  op, axes = node.arg
  x = node.src[0]
  if op is Ops.ADD: return (keep_dims(ct, axes, x.shape).expand(x.shape),)
  if op is Ops.MUL: return decomposed_vjp(ct, node)
  mask, counts = chooser_mask(node)
  share = keep_dims((E(ct) / counts).u, axes, x.shape).expand(x.shape)
  return ((E(share) * mask).u,)

def reduce_jvp(node, ts):
  op, axes = node.arg
  if op is Ops.ADD: return ts[0].reduce(Ops.ADD, axes)
  if op is Ops.MUL: return decomposed_jvp(node, ts)
  mask, counts = chooser_mask(node)
  return (E((E(ts[0]) * mask).u.reduce(Ops.ADD, axes)) / counts).u

def chooser_mask(node):
  """For reduce max/min: where x equals the result (as floats) and how many places tie, as JAX's chooser rule."""
  _, axes = node.arg
  x = node.src[0]
  hit = UOp(Ops.CMPEQ, dtypes.bool_, (x, keep_dims(node, axes, x.shape).expand(x.shape))).cast(x.dtype)
  return hit, hit.reduce(Ops.ADD, axes)

def cumulative_vjp(ct, node):
  op, axis, reverse = node.arg
  if op is Ops.ADD: return (UOp(Ops.CUMULATIVE, ct.dtype, (ct,), (Ops.ADD, axis, not reverse)),)
  return decomposed_vjp(ct, node)

def cumulative_jvp(node, ts):
  op, axis, reverse = node.arg
  if op is Ops.ADD: return UOp(Ops.CUMULATIVE, ts[0].dtype, (ts[0],), node.arg)
  return decomposed_jvp(node, ts)

# --- the compositions JAX differentiates for reduce_prod and cumprod/cummax/cummin ---

def every_other(x: UOp, axis: int, start: int, count: int) -> UOp:
  """Elements start, start+2, ... (`count` of them) along `axis` (a strided slice from views)."""
  if count == 0: return x.shrink(tuple((0, 0) if i == axis else (0, s) for i, s in enumerate(x.shape)))
  span = x.shrink(tuple((start, start + 2 * count - 1) if i == axis else (0, s) for i, s in enumerate(x.shape)))
  span = span.pad(tuple((0, 1) if i == axis else (0, 0) for i in range(x.ndim)))
  pairs = span.reshape(x.shape[:axis] + (count, 2) + x.shape[axis + 1:])
  firsts = pairs.shrink(tuple((0, 1) if i == axis + 1 else (0, s) for i, s in enumerate(pairs.shape)))
  return firsts.reshape(x.shape[:axis] + (count,) + x.shape[axis + 1:])

def interleave(even: UOp, odd: UOp, axis: int) -> UOp:
  """even[0], odd[0], even[1], odd[1], ... along `axis` (even has as many elements as odd, or one more)."""
  ne, no = even.shape[axis], odd.shape[axis]
  split = lambda u: u.reshape(u.shape[:axis + 1] + (1,) + u.shape[axis + 1:])
  pads = lambda ax, lo, hi, nd: tuple((lo, hi) if i == ax else (0, 0) for i in range(nd))
  e = split(even).pad(pads(axis + 1, 0, 1, even.ndim + 1))
  o = split(odd).pad(pads(axis + 1, 1, 0, odd.ndim + 1)).pad(pads(axis, 0, ne - no, odd.ndim + 1))
  both = UOp(Ops.ADD, e.dtype, (e, o)).reshape(even.shape[:axis] + (2 * ne,) + even.shape[axis + 1:])
  return both.shrink(tuple((0, ne + no) if i == axis else (0, s) for i, s in enumerate(both.shape)))

def associative_scan(x: UOp, op: Ops, axis: int) -> UOp:
  """Inclusive scan of `op` along `axis` by pairwise recursion: combine neighbours, scan the half, fill in the
  even positions. The same combination order as JAX's `associative_scan`, whose derivative JAX uses."""
  n = x.shape[axis]
  if n < 2: return x
  combine = lambda a, b: UOp(op, a.dtype, (a, b))
  odd = associative_scan(combine(every_other(x, axis, 0, n // 2), every_other(x, axis, 1, n // 2)), op, axis)
  rest = (n - 1) // 2
  first_odd = odd.shrink(tuple((0, rest) if i == axis else (0, s) for i, s in enumerate(odd.shape)))
  even = combine(first_odd, every_other(x, axis, 2, rest))
  head = x.shrink(tuple((0, 1) if i == axis else (0, s) for i, s in enumerate(x.shape)))
  return interleave(head.concat(even, axis), odd, axis)

def cumulative_composition(x: UOp, node: UOp) -> UOp:
  op, axis, reverse = node.arg
  if not reverse: return associative_scan(x, op, axis)
  return associative_scan(x.flip((axis,)), op, axis).flip((axis,))

def product_tree(x: UOp, node: UOp) -> UOp:
  """reduce_prod as JAX differentiates it: reduced axes flattened to the front, then halves multiplied."""
  _, axes = node.arg
  rest = tuple(i for i in range(x.ndim) if i not in axes)
  n = math.prod(x.shape[i] for i in axes)
  y = x.permute(axes + rest).reshape((n,) + tuple(x.shape[i] for i in rest))
  if n == 0: return UOp.const(1, x.dtype, y.shape[1:])
  while y.shape[0] > 1:
    m = y.shape[0]
    half = (m + 1) // 2
    lo = y.shrink(((0, half),) + tuple((0, s) for s in y.shape[1:]))
    hi = y.shrink(((half, m),) + tuple((0, s) for s in y.shape[1:]))
    if m - half != half: hi = hi.concat(UOp.const(1, y.dtype, (1,) + y.shape[1:]), 0)
    y = UOp(Ops.MUL, y.dtype, (lo, hi))
  return y.reshape(y.shape[1:])

def composition(node: UOp):
  return product_tree if node.op is Ops.REDUCE else cumulative_composition

def decomposed_vjp(ct, node):
  x = node.src[0]
  tag = UOp(Ops.TAG, x.dtype, (x,), fresh_id())
  (g,) = backward_pass([composition(node)(tag, node)], [ct], [tag])
  return (untag([g], [tag])[0],)

def decomposed_jvp(node, ts):
  x = node.src[0]
  tag = UOp(Ops.TAG, x.dtype, (x,), fresh_id())
  (t,) = forward_pass([composition(node)(tag, node)], [tag], [ts[0]])
  return untag([t], [tag])[0]

# ---------------------------------------------------------------- movement ops

def expand_vjp(ct, node):
  src = node.src[0]
  axes = tuple(i for i, (a, b) in enumerate(zip(src.shape, node.shape)) if a != b)
  return (ct.reduce(Ops.ADD, axes).reshape(src.shape),)

MOVEMENT_VJPS = {
  Ops.RESHAPE: lambda ct, node: (ct.reshape(node.src[0].shape),),
  Ops.PERMUTE: lambda ct, node: (ct.permute(inverse_perm(node.arg)),),
  Ops.EXPAND: expand_vjp,
  Ops.PAD: lambda ct, node: (ct.shrink(tuple((lo, lo + s) for (lo, _), s in zip(node.arg, node.src[0].shape))),),
  Ops.SHRINK: lambda ct, node: (ct.pad(tuple((a, s - b) for (a, b), s in zip(node.arg, node.src[0].shape))),),
  Ops.FLIP: lambda ct, node: (ct.flip(node.arg),),
}
def linear_jvp(node, ts):
  """Movement ops are linear: the tangent goes through the same op."""
  return UOp(node.op, ts[0].dtype, (ts[0],), node.arg)

# ---------------------------------------------------------------- dot_general

def dot_general(a: UOp, b: UOp, contract, batch) -> UOp:
  arg = ((tuple(contract[0]), tuple(contract[1])), (tuple(batch[0]), tuple(batch[1])))
  return UOp(Ops.DOT_GENERAL, a.dtype, (a, b), arg)

def dot_operand_ct(ct, other, mine_c, other_c, mine_b, other_b, mine_ndim, nb, ct_other_free):
  """Cotangent of one dot_general operand: ct contracted with the other operand over the other's free dims."""
  other_free = [i for i in range(other.ndim) if i not in other_c and i not in other_b]
  g = dot_general(ct, other, (ct_other_free, other_free), (range(nb), other_b))
  mine_free = [i for i in range(mine_ndim) if i not in mine_c and i not in mine_b]
  axes = list(mine_b) + mine_free + [mine_c[other_c.index(r)] for r in sorted(other_c)]
  return g.permute(inverse_perm(axes))

def dot_general_vjp(ct, node):
  a, b = node.src
  (lc, rc), (lb, rb) = node.arg
  nb, na_free = len(lb), a.ndim - len(lc) - len(lb)
  a_free_in_ct = list(range(nb, nb + na_free))
  b_free_in_ct = list(range(nb + na_free, ct.ndim))
  ga = dot_operand_ct(ct, b, list(lc), list(rc), list(lb), list(rb), a.ndim, nb, b_free_in_ct)
  gb = dot_operand_ct(ct, a, list(rc), list(lc), list(rb), list(lb), b.ndim, nb, a_free_in_ct)
  return (ga.cast(a.dtype), gb.cast(b.dtype))

def dot_general_jvp(node, ts):
  a, b = node.src
  (lc, rc), (lb, rb) = node.arg
  parts = [dot_general(ts[0], b, (lc, rc), (lb, rb)) if ts[0] is not None else None,
           dot_general(a, ts[1], (lc, rc), (lb, rb)) if ts[1] is not None else None]
  return functools.reduce(add, parts)

# ---------------------------------------------------------------- gather and scatter

def gather_vjp(ct, node):
  # JAX's transpose of a clamped gather is a scatter-add that drops out-of-range indices (their ct is lost)
  x, idx = node.src
  return (scatter(zeros(x.shape, ct.dtype), idx, ct, 'add'), None)
def gather_jvp(node, ts):
  return gather(ts[0], node.src[1]) if ts[0] is not None else None

def landed(node) -> UOp:
  """Per update element: whether its index is in range (scatter drops the others)."""
  x, idx, upd = node.src
  return per_update(in_range(idx, x.shape[0]), upd.shape)

def scatter_add_vjp(ct, node):
  return (ct, None, where(landed(node), gather(ct, node.src[1]), 0, node.src[2]))

def set_winners(node) -> UOp:
  """Per update element: whether it is the one a 'set' scatter kept (duplicates: one wins), found by scattering
  each element's id and reading the ids back, as JAX's scatter rule does."""
  x, idx, upd = node.src
  ids = UOp(Ops.IOTA, dtypes.int32, (), ((upd.size,), 0)).reshape(upd.shape)
  ids = UOp(Ops.ADD, dtypes.int32, (ids, UOp.const(1, dtypes.int32, upd.shape)))
  kept = scatter(zeros(x.shape, dtypes.int32), idx, ids, 'set')
  return UOp(Ops.AND, dtypes.bool_, (UOp(Ops.CMPEQ, dtypes.bool_, (gather(kept, idx), ids)), landed(node)))

def overwritten(node) -> UOp:
  x, idx, upd = node.src
  hit = scatter(zeros(x.shape, x.dtype), idx, UOp.const(1, x.dtype, upd.shape), 'set')
  return E(hit).eq(1)

def scatter_set_vjp(ct, node):
  return (where(overwritten(node), 0, ct, ct), None, where(set_winners(node), gather(ct, node.src[1]), 0, node.src[2]))

def others_product(node) -> UOp:
  """Per update element j at row i: x[i] times the product of the other updates into row i (exact with zeros:
  the product of the nonzero ones and a count of zeros)."""
  x, idx, upd = node.src
  u = E(upd)
  is_zero = u.eq(0)
  nonzero = where(is_zero, 1, upd, upd)
  prod_nz = E(gather(scatter(UOp.const(1, x.dtype, x.shape), idx, nonzero, 'mul'), idx))
  n_zero = E(gather(scatter(zeros(x.shape, x.dtype), idx, where(is_zero, 1, 0, upd), 'add'), idx))
  if_zero = where(n_zero.eq(1), prod_nz, 0, upd)
  if_nonzero = where(n_zero.eq(0), prod_nz / E(nonzero), 0, upd)
  return (E(gather(x, idx)) * E(where(is_zero, if_zero, if_nonzero, upd))).u

def scatter_mul_vjp(ct, node):
  x, idx, upd = node.src
  ct_x = (E(ct) * scatter(UOp.const(1, x.dtype, x.shape), idx, upd, 'mul')).u
  ct_u = where(landed(node), (E(gather(ct, idx)) * others_product(node)).u, 0, upd)
  return (ct_x, None, ct_u)

def extremal_shares(node):
  """For scatter min/max (JAX's rule): which of x and the updates equal the result, and the share each gets
  (ties split the derivative equally among x and every update that reached the result)."""
  x, idx, upd = node.src
  won = UOp(Ops.AND, dtypes.bool_, (E(upd).eq(gather(node, idx)), landed(node)))
  kept = E(x).eq(node)
  count = E(scatter(zeros(x.shape, x.dtype), idx, where(won, 1, 0, upd), 'add')) + E(where(kept, 1, 0, x))
  share = E(where(count.eq(0), 1, count, x)).un(Ops.RECIP)
  return won, kept, share

def scatter_extremal_vjp(ct, node):
  x, idx, upd = node.src
  won, kept, share = extremal_shares(node)
  scaled = (E(ct) * share).u
  return (where(kept, scaled, 0, x), None, where(won, gather(scaled, idx), 0, upd))

SCATTER_VJPS = {'add': scatter_add_vjp, 'set': scatter_set_vjp, 'mul': scatter_mul_vjp,
                'min': scatter_extremal_vjp, 'max': scatter_extremal_vjp}
def scatter_vjp(ct, node): return SCATTER_VJPS[node.arg](ct, node)

def scatter_jvp(node, ts):
  x, idx, upd = node.src
  tx = ts[0] if ts[0] is not None else zeros(x.shape, x.dtype)
  tu = ts[2] if ts[2] is not None else zeros(upd.shape, upd.dtype)
  if node.arg == 'add': return scatter(tx, idx, tu, 'add')
  if node.arg == 'set':   # the winners found by id, so the tangent follows the value whatever order a device uses
    kept = where(overwritten(node), 0, tx, tx)
    won = scatter(zeros(x.shape, x.dtype), idx, where(set_winners(node), tu, 0, upd), 'add')
    return UOp(Ops.ADD, x.dtype, (kept, won))
  if node.arg == 'mul':
    from_x = (E(tx) * scatter(UOp.const(1, x.dtype, x.shape), idx, upd, 'mul')).u
    from_u = scatter(zeros(x.shape, x.dtype), idx, where(landed(node), (E(tu) * others_product(node)).u, 0, upd), 'add')
    return UOp(Ops.ADD, x.dtype, (from_x, from_u))
  won, kept, share = extremal_shares(node)
  from_u = scatter(zeros(x.shape, x.dtype), idx, where(won, tu, 0, upd), 'add')
  total = UOp(Ops.ADD, x.dtype, (where(kept, tx, 0, x), from_u))
  return (E(total) * share).u

# ---------------------------------------------------------------- multi-output nodes, tags, stop_gradient

def getitem_vjp(ct, node):
  n = len(out_avals(node.src[0]))
  return (tuple(ct if i == node.arg else None for i in range(n)),)
def getitem_jvp(node, ts):
  return ts[0][node.arg] if ts[0] is not None else None

vjp_rules: dict = {
  **{op: no_vjp for op in GroupOp.NonDifferentiable | GroupOp.Leaf | {Ops.STOP_GRADIENT}},
  **{op: unary_vjp for op in UNARY_DERIVATIVES},
  **{op: binary_vjp for op in BINARY_DERIVATIVES},
  **{op: rule for op, rule in MOVEMENT_VJPS.items()},
  Ops.WHERE: where_vjp, Ops.CAST: cast_vjp, Ops.TAG: lambda ct, node: (ct,),
  Ops.REDUCE: reduce_vjp, Ops.CUMULATIVE: cumulative_vjp, Ops.DOT_GENERAL: dot_general_vjp,
  Ops.GATHER: gather_vjp, Ops.SCATTER: scatter_vjp, Ops.GETITEM: getitem_vjp,
  Ops.REAL: real_vjp, Ops.IMAG: imag_vjp, Ops.COMPLEX: complex_vjp,
}
jvp_rules: dict = {
  **{op: no_jvp for op in GroupOp.NonDifferentiable | GroupOp.Leaf | {Ops.STOP_GRADIENT}},
  **{op: unary_jvp for op in UNARY_DERIVATIVES},
  **{op: binary_jvp for op in BINARY_DERIVATIVES},
  **{op: linear_jvp for op in GroupOp.Movement},
  Ops.WHERE: where_jvp, Ops.CAST: cast_jvp, Ops.TAG: lambda node, ts: ts[0],
  Ops.REDUCE: reduce_jvp, Ops.CUMULATIVE: cumulative_jvp, Ops.DOT_GENERAL: dot_general_jvp,
  Ops.GATHER: gather_jvp, Ops.SCATTER: scatter_jvp, Ops.GETITEM: getitem_jvp,
  Ops.REAL: lambda node, ts: real(ts[0]), Ops.IMAG: lambda node, ts: imag(ts[0]), Ops.COMPLEX: complex_jvp,
}

# ---------------------------------------------------------------- the walks

def dependents(outs, tags: set) -> list[UOp]:
  """The nodes on a path from one of `tags` up to `outs`, each after its sources. Only nodes whose flags
  contain 'TAG' are explored, so the concrete rest of a big graph costs nothing."""
  order, seen = [], set()
  for root in outs:
    stack = [(root, False)]
    while stack:
      node, done = stack.pop()
      if done: order.append(node); continue
      if node in seen or 'TAG' not in node.flags: continue
      seen.add(node)
      stack.append((node, True))
      if node not in tags: stack.extend((s, False) for s in reversed(node.src) if s not in seen)
  dep = set(tags)
  for node in order:
    if node not in dep and any(s in dep for s in node.src): dep.add(node)
  return [n for n in order if n in dep]

def has_tangent_space(node: UOp, i: int | None = None) -> bool:
  if node.op in GroupOp.MultiOutput: return i is not None and is_float(out_avals(node)[i][1])
  return is_float(node.dtype)

def accumulate(cts: dict, node: UOp, ct) -> None:
  if node.op in GroupOp.MultiOutput:
    old = cts.get(node) or (None,) * len(ct)
    new = tuple(add(a, b) if has_tangent_space(node, i) else None for i, (a, b) in enumerate(zip(old, ct)))
    cts[node] = new
    return
  if not is_float(node.dtype): return
  if ct.shape != node.shape:
    raise RuntimeError(f"internal error: a vjp rule gave a cotangent of shape {ct.shape} for a {node.op.name} "
                       f"operand of shape {node.shape}")
  cts[node] = add(cts.get(node), ct.cast(node.dtype))

def backward_pass(outs, cts, tags) -> list:
  """Cotangents of `tags` (None where none arrived) given cotangents `cts` of `outs` (None: zero)."""
  tagset = {t for t in tags if t is not None}
  order = dependents(outs, tagset)
  dep = set(order)
  ct_of: dict = {}
  for o, c in zip(outs, cts):
    if c is not None and o in dep: accumulate(ct_of, o, c)
  for node in reversed(order):
    if node in tagset: continue
    ct = ct_of.pop(node, None)
    if ct is None or (isinstance(ct, tuple) and all(c is None for c in ct)): continue
    rule = vjp_rules.get(node.op)
    if rule is None:
      raise NotImplementedError(f"reverse-mode differentiation (grad/vjp) of {node.op.name} is not implemented: "
                                "tinyjx.transforms.ad.vjp_rules has no rule for it")
    w = uop_module.watcher   # provenance, while recorded: the rule's nodes get `node`'s source line and 'grad'
    src_cts = rule(ct, node) if w is None else w.attributed(node, "the backward pass (vjp)", rule, ct, node,
                                                            transform='grad')
    for s, c in zip(node.src, src_cts):
      if c is None or s not in dep: continue
      if isinstance(c, Exception): raise c
      if w is None: accumulate(ct_of, s, c)
      else: w.attributed(s, "the backward pass (vjp)", accumulate, ct_of, s, c, transform='grad')
  return [ct_of.get(t) if t is not None else None for t in tags]

def forward_pass(outs, tags, tangents) -> list:
  """Tangents of `outs` (None: zero) given `tangents` of `tags` (None: zero)."""
  tan = {t: v for t, v in zip(tags, tangents) if t is not None and v is not None}
  for node in dependents(outs, set(tan)):
    if node in tan: continue
    ts = [tan.get(s) for s in node.src]
    if all(t is None or (isinstance(t, tuple) and all(e is None for e in t)) for t in ts): continue
    if node.op not in GroupOp.MultiOutput and not is_float(node.dtype): continue
    rule = jvp_rules.get(node.op)
    if rule is None:
      raise NotImplementedError(f"forward-mode differentiation (jvp) of {node.op.name} is not implemented: "
                                "tinyjx.transforms.ad.jvp_rules has no rule for it")
    w = uop_module.watcher
    out = rule(node, ts) if w is None else w.attributed(node, "the forward-mode derivative (jvp)", rule, node, ts,
                                                        transform='jvp')
    if out is not None: tan[node] = out
  return [tan.get(o) for o in outs]

def untag(uops, tags) -> list:
  """`uops` with each of `tags` replaced by its source (None entries stay None)."""
  mapping = {t: t.src[0] for t in tags if t is not None}
  present = [u for u in uops if u is not None]
  done = dict(zip(present, substitute(present, mapping)))
  return [done[u] if u is not None else None for u in uops]

# ---------------------------------------------------------------- transformed jaxprs, memoized by content

JAXPR_CACHE_SIZE = 256
_jaxpr_cache = LRU(JAXPR_CACHE_SIZE)
jaxpr_cache_stats = _jaxpr_cache.stats

def memoized(kind: str, jaxpr: Jaxpr, masks: tuple, build):
  reuse = uop_module.watcher is None   # while provenance records, build again: fresh sites
  return _jaxpr_cache.memo((kind, jaxpr.key, masks), build, reuse)

def vjp_jaxpr(jaxpr: Jaxpr, wrt: tuple, ct_mask: tuple) -> Jaxpr:
  """The reverse-mode jaxpr of `jaxpr`: inputs are jaxpr's inputs then one cotangent per output where
  `ct_mask`; outputs are the cotangents of the inputs where `wrt` (zeros where none arrives)."""
  def build():
    n = len(jaxpr.params)
    avals = [(p.shape, p.dtype) for p in jaxpr.params] + [(o.shape, o.dtype) for o, m in zip(jaxpr.outs, ct_mask) if m]
    def body(*args):
      ins = [a.uop for a in args[:n]]
      tags = [UOp(Ops.TAG, u.dtype, (u,), fresh_id()) if w and is_float(u.dtype) else None for u, w in zip(ins, wrt)]
      outs = jaxpr(*[t if t is not None else u for t, u in zip(tags, ins)])
      it = iter(args[n:])
      cts = [next(it).uop if m else None for m in ct_mask]
      grads = untag(backward_pass(outs, cts, tags), tags)
      return [Array(g if g is not None else zeros(u.shape, u.dtype)) for g, u, w in zip(grads, ins, wrt) if w]
    return tracing.trace_flat(body, avals, f"vjp({jaxpr.name})")
  return memoized('vjp', jaxpr, (tuple(wrt), tuple(ct_mask)), build)

def jvp_jaxpr(jaxpr: Jaxpr, t_mask: tuple) -> Jaxpr:
  """The forward-mode jaxpr of `jaxpr`: inputs are jaxpr's inputs then one tangent per input where `t_mask`;
  outputs are jaxpr's outputs then one tangent per output (zeros where none)."""
  def build():
    n = len(jaxpr.params)
    avals = [(p.shape, p.dtype) for p in jaxpr.params] + [(p.shape, p.dtype) for p, m in zip(jaxpr.params, t_mask) if m]
    def body(*args):
      ins = [a.uop for a in args[:n]]
      tags = [UOp(Ops.TAG, u.dtype, (u,), fresh_id()) if m and is_float(u.dtype) else None for u, m in zip(ins, t_mask)]
      outs = jaxpr(*[t if t is not None else u for t, u in zip(tags, ins)])
      it = iter(args[n:])
      ts = [next(it).uop if m else None for m in t_mask]
      tangents = untag(forward_pass(outs, tags, ts), tags)
      primals = untag(outs, tags)
      return [Array(u) for u in primals] + [Array(t if t is not None else zeros(o.shape, o.dtype))
                                            for t, o in zip(tangents, primals)]
    return tracing.trace_flat(body, avals, f"jvp({jaxpr.name})")
  return memoized('jvp', jaxpr, tuple(t_mask), build)

# ---------------------------------------------------------------- the public transforms

def as_array(x, path: str) -> Array:
  """An Array for a differentiated argument (Array, numpy array or Python scalar), with a clear error otherwise."""
  if isinstance(x, Array): return x
  _, _, weak = tracing.aval_of(x, path)
  a = array_module.api.asarray(x)
  return Array(a.uop, weak)

def aval_text(u) -> str: return f"{u.dtype.short}[{','.join(map(str, u.shape))}]"

class Tape:
  """`fun` called once on tagged inputs: its output graph, from which backward and forward walks start.

  `primals` is a tuple of pytrees (the differentiated arguments); their float leaves get fresh tags.
  """
  def __init__(self, fun, primals: tuple, has_aux: bool, name: str, paths=None):
    leaves, self.in_tree = tree_util.tree_flatten(tuple(primals))
    paths = paths or [f"argument {i}" for i in range(len(leaves))]
    self.ins = [as_array(x, p) for x, p in zip(leaves, paths)]
    self.tags = [UOp(Ops.TAG, a.dtype, (a.uop,), fresh_id()) if is_float(a.dtype) else None for a in self.ins]
    args = [Array(t, a.weak) if t is not None else a for t, a in zip(self.tags, self.ins)]
    out = fun(*tree_util.tree_unflatten(self.in_tree, args))
    self.aux = None
    if has_aux:
      if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"{name} with has_aux=True needs the function to return a pair (output, aux), "
                        f"got {type(out).__name__}")
      out, self.aux = out
    out_leaves, self.out_tree = tree_util.tree_flatten(out)
    pairs = [tracing.to_out_uop(x, f"output {i} of {name}") for i, x in enumerate(out_leaves)]
    self.outs, self.out_weak = [p[0] for p in pairs], [p[1] for p in pairs]

  def untag(self, uops) -> list: return untag(uops, self.tags)
  def primal_out(self): return self.out_tree, [Array(u, w) for u, w in zip(self.untag(self.outs), self.out_weak)]
  def aux_out(self):
    def clean(x): return Array(self.untag([x.uop])[0], x.weak) if isinstance(x, Array) else x
    return tree_util.tree_map(clean, self.aux)

  def pullback(self, cts: list) -> list[Array]:
    """Flat cotangents of the inputs (zeros where none arrives) for flat cotangent UOps of the outputs."""
    grads = self.untag(backward_pass(self.outs, cts, self.tags))
    return [Array(g if g is not None else zeros(a.shape, a.dtype), a.weak) for g, a in zip(grads, self.ins)]

  def pushforward(self, tangents: list) -> list[Array]:
    """Flat tangents of the outputs (zeros where none) for flat tangent UOps of the inputs."""
    outs = self.untag(forward_pass(self.outs, self.tags, tangents))
    return [Array(t if t is not None else zeros(o.shape, o.dtype), w)
            for t, o, w in zip(outs, self.outs, self.out_weak)]

def argnums_tuple(argnums, nargs: int, name: str) -> tuple:
  nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
  for n in nums:
    if not isinstance(n, int) or not -nargs <= n < nargs:
      raise ValueError(f"{name}: argnums={argnums!r} is out of range for a call with {nargs} positional "
                       f"argument(s); pass argnums between {-nargs} and {nargs - 1}")
  return tuple(n % nargs for n in nums)

def split_args(fun, args: tuple, kwargs: dict, argnums, name: str):
  """(differentiated args, the function of only those, their leaf paths) for argnums of a call."""
  nums = argnums_tuple(argnums, len(args), name)
  paths = tracing.arg_paths(fun, args, kwargs)
  leaf_counts = [len(tree_util.tree_leaves(a)) for a in args]
  starts = [sum(leaf_counts[:i]) for i in range(len(args))]
  diff_paths = [p for i in nums for p in paths[starts[i]:starts[i] + leaf_counts[i]]]
  def f_diff(*diff):
    full = list(args)
    for i, d in zip(nums, diff): full[i] = d
    return fun(*full, **kwargs)
  return tuple(args[i] for i in nums), f_diff, diff_paths

def check_float_inputs(diff: tuple, paths, name: str, allow_int: bool) -> None:
  """Differentiated arguments must be floats (before `fun` runs, so the error names the argument)."""
  for x, p in zip(tree_util.tree_leaves(diff), paths):
    shape, dt, _ = tracing.aval_of(x, p)
    if not is_float(dt) and not allow_int:
      raise TypeError(f"{name} requires real-valued (float) inputs, but argument {p} is "
                      f"{dt.short}[{','.join(map(str, shape))}]. "
                      f"Differentiate with respect to float inputs (e.g. {p}.astype(jnp.float32)), use vjp, or pass "
                      f"allow_int=True to get zero gradients for integer inputs")

def check_complex_inputs(diff: tuple, paths, name: str = "grad") -> None:
  """grad/jacrev/jacfwd(holomorphic=True) differentiate complex inputs only, as JAX."""
  for x, p in zip(tree_util.tree_leaves(diff), paths):
    shape, dt, _ = tracing.aval_of(x, p)
    if not dtypes.is_complex(dt):
      raise TypeError(f"{name} with holomorphic=True requires complex inputs, but argument {p} is "
                      f"{dt.short}[{','.join(map(str, shape))}]; convert it with x.astype(jnp.complex64), or drop "
                      "holomorphic=True for a real input")

def check_real_inputs(diff: tuple, paths) -> None:
  """jacfwd without holomorphic=True differentiates real inputs only: its basis tangents would be real."""
  for x, p in zip(tree_util.tree_leaves(diff), paths):
    shape, dt, _ = tracing.aval_of(x, p)
    if dtypes.is_complex(dt):
      raise TypeError(f"jacfwd requires real-valued inputs, but argument {p} is "
                      f"{dt.short}[{','.join(map(str, shape))}]; pass holomorphic=True for a holomorphic function, or "
                      "use jvp for a non-holomorphic one")

def check_output_kind(out: UOp, holomorphic: bool, name: str = "grad") -> None:
  """A real output for grad and jacrev; a complex one with holomorphic=True."""
  if holomorphic and not dtypes.is_complex(out.dtype):
    raise TypeError(f"{name} with holomorphic=True requires a complex output, got {aval_text(out)}; drop "
                    "holomorphic=True for a real-valued function")
  if not holomorphic and dtypes.is_complex(out.dtype) and name != "jacfwd":
    raise TypeError(f"{name} requires a real-valued output, got {aval_text(out)}; pass holomorphic=True for a "
                    "holomorphic function, or use vjp for a complex output of a non-holomorphic function")
  if name == "grad" and not is_float(out.dtype):
    raise TypeError(f"{name} requires a real-valued (float) output, got {aval_text(out)}")

def realize_together(arrays: list) -> None:
  """Compute concrete results in one schedule (value and gradient share the forward pass); graphs that
  still carry a grad tag keep it, with their value cached."""
  todo = [a for a in arrays if isinstance(a, Array) and a.uop.is_concrete and a.uop.op is not Ops.BUFFER]
  if not todo: return
  bufs = realize_uops([a.uop for a in todo], "value_and_grad")
  for a, b in zip(todo, bufs):
    if 'TAG' not in a.uop.flags: a.uop = b

def gradient(fun, args, kwargs, argnums, has_aux, allow_int, name, holomorphic=False):
  """The shared core of grad and value_and_grad: (value, aux, gradient pytree)."""
  diff, f_diff, paths = split_args(fun, args, kwargs, argnums, "grad")
  check_float_inputs(diff, paths, "grad", allow_int)
  if holomorphic: check_complex_inputs(diff, paths)
  tape = Tape(f_diff, diff, has_aux, name, paths)
  if len(tape.outs) != 1 or not tree_util.treedef_is_leaf(tape.out_tree):
    raise TypeError(f"grad requires the function to return one scalar array, got {tape.out_tree}; "
                    "use jacrev or vjp for functions with several or non-scalar outputs")
  out = tape.outs[0]
  if out.shape != ():
    raise TypeError(f"grad requires a scalar output, but the output has shape {out.shape} ({aval_text(out)}); "
                    "use jacrev (or jacobian) or vjp for non-scalar outputs, or reduce it first (e.g. .sum())")
  check_output_kind(out, holomorphic)
  grads = tape.pullback([UOp.const(1, out.dtype, ())])
  g = tree_util.tree_unflatten(tape.in_tree, grads)
  return tape.primal_out()[1][0], tape.aux_out() if has_aux else None, g[0] if isinstance(argnums, int) else g

def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
  """`value_and_grad(f)(*args)` returns `(f(*args), grad(f)(*args))`, computing the forward pass once.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> v, g = tinyjx.value_and_grad(lambda x: jnp.sum(x * x))(jnp.array([1.0, 2.0]))
  >>> float(v), g.tolist()
  (5.0, [2.0, 4.0])
  """
  name = f"grad({getattr(fun, '__name__', 'fun')})"
  @functools.wraps(fun)
  def value_and_grad_f(*args, **kwargs):
    value, aux, g = gradient(fun, args, kwargs, argnums, has_aux, allow_int, name, holomorphic)
    realize_together([value] + tree_util.tree_leaves(g) + tree_util.tree_leaves(aux))
    return ((value, aux), g) if has_aux else (value, g)
  return value_and_grad_f

def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
  """The gradient of a scalar function with respect to argument(s) `argnums` (an int or a tuple of ints).

  Works eagerly (Python control flow on values is fine), under jit and vmap, and on itself (grad of grad).
  With has_aux=True, `fun` returns `(value, aux)` and grad returns `(gradient, aux)`. The result is lazy.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.grad(lambda x: jnp.sin(x) * x)(0.0).item()
  0.0
  """
  name = f"grad({getattr(fun, '__name__', 'fun')})"
  @functools.wraps(fun)
  def grad_f(*args, **kwargs):
    _, aux, g = gradient(fun, args, kwargs, argnums, has_aux, allow_int, name, holomorphic)
    return (g, aux) if has_aux else g
  return grad_f

def cotangent_uops(ct, tape: Tape, name: str) -> list:
  leaves, tree = tree_util.tree_flatten(ct)
  if tree != tape.out_tree:
    raise TypeError(f"{name}: the cotangent must have the structure of the primal output, {tape.out_tree}, "
                    f"got {tree}")
  out = []
  for i, (c, o) in enumerate(zip(leaves, tape.outs)):
    c = as_array(c, f"cotangent {i}")
    if c.shape != o.shape or (c.dtype is not o.dtype and not c.weak and is_float(o.dtype)):
      raise ValueError(f"{name}: cotangent {i} is {aval_text(c.uop)} but the primal output {i} is "
                       f"{aval_text(o)}; pass a cotangent of the same shape and dtype")
    out.append(c.uop.cast(o.dtype) if is_float(o.dtype) else None)
  return out

def vjp(fun, *primals, has_aux=False, reduce_axes=()):
  """`out, f_vjp = vjp(f, *primals)`: `f_vjp(ct)` maps an output cotangent to one cotangent per primal.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> out, f_vjp = tinyjx.vjp(jnp.sin, 0.0)
  >>> f_vjp(1.0)[0].item()
  1.0
  """
  name = f"vjp({getattr(fun, '__name__', 'fun')})"
  tape = Tape(fun, primals, has_aux, name)
  out_tree, outs = tape.primal_out()
  def f_vjp(ct):
    grads = tape.pullback(cotangent_uops(ct, tape, name))
    return tree_util.tree_unflatten(tape.in_tree, grads)
  out = tree_util.tree_unflatten(out_tree, outs)
  return (out, f_vjp, tape.aux_out()) if has_aux else (out, f_vjp)

def tangent_uops(tape: Tape, tangents, name: str) -> list:
  leaves, tree = tree_util.tree_flatten(tuple(tangents))
  if tree != tape.in_tree:
    raise TypeError(f"{name}: primals and tangents must have the same pytree structure, got {tape.in_tree} "
                    f"and {tree}")
  out = []
  for i, (t, a) in enumerate(zip(leaves, tape.ins)):
    if not is_float(a.dtype): out.append(None); continue
    t = as_array(t, f"tangent {i}")
    if t.shape != a.shape or (t.dtype is not a.dtype and not t.weak):
      raise TypeError(f"{name}: primal and tangent arguments must have equal shapes and dtypes, but primal {i} is "
                      f"{aval_text(a.uop)} and its tangent is {aval_text(t.uop)}")
    out.append(t.uop.cast(a.dtype))
  return out

def jvp(fun, primals, tangents, has_aux=False):
  """Forward mode: `jvp(f, (x,), (t,))` returns `(f(x), df(x) @ t)`; primals and tangents are tuples.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> y, t = tinyjx.jvp(jnp.sin, (0.0,), (2.0,))
  >>> t.item()
  2.0
  """
  name = f"jvp({getattr(fun, '__name__', 'fun')})"
  for what, v in (("primals", primals), ("tangents", tangents)):
    if not isinstance(v, (tuple, list)):
      raise TypeError(f"{name}: {what} must be a tuple or list with one entry per argument, got {type(v).__name__}")
  tape = Tape(fun, tuple(primals), has_aux, name)
  touts = tape.pushforward(tangent_uops(tape, tangents, name))
  out_tree, outs = tape.primal_out()
  res = (tree_util.tree_unflatten(out_tree, outs), tree_util.tree_unflatten(out_tree, touts))
  return res + (tape.aux_out(),) if has_aux else res

def linearize(fun, *primals, has_aux=False):
  """`out, f_jvp = linearize(f, *primals)`: f runs once; `f_jvp(*tangents)` is the jvp at those primals.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> out, f_jvp = tinyjx.linearize(jnp.exp, 0.0)
  >>> f_jvp(3.0).item()
  3.0
  """
  name = f"linearize({getattr(fun, '__name__', 'fun')})"
  tape = Tape(fun, primals, has_aux, name)
  out_tree, outs = tape.primal_out()
  def f_jvp(*tangents):
    return tree_util.tree_unflatten(out_tree, tape.pushforward(tangent_uops(tape, tangents, name)))
  out = tree_util.tree_unflatten(out_tree, outs)
  return (out, f_jvp, tape.aux_out()) if has_aux else (out, f_jvp)

# ---------------------------------------------------------------- jacobians (vmap over the walks)

def standard_basis(avals) -> list[UOp]:
  """Rows of the identity over all elements of `avals`: for each (shape, dtype), a (N,)+shape block."""
  sizes = [math.prod(s) for s, _ in avals]
  n = sum(sizes)
  out, start = [], 0
  for (shape, dt), size in zip(avals, sizes):
    rows = UOp(Ops.IOTA, dtypes.int32, (), ((n, size), 0))
    cols = UOp(Ops.IOTA, dtypes.int32, (), ((n, size), 1))
    shifted = UOp(Ops.ADD, dtypes.int32, (cols, UOp.const(start, dtypes.int32, (n, size))))
    out.append(UOp(Ops.CMPEQ, dtypes.bool_, (rows, shifted)).cast(dt).reshape((n,) + tuple(shape)))
    start += size
  return out

def block(u: UOp, start: int, size: int, shape: tuple) -> UOp:
  """Rows [start, start+size) of a (N, ...) array, reshaped to `shape` + the rest."""
  rows = u.shrink(((start, start + size),) + tuple((0, s) for s in u.shape[1:]))
  return rows.reshape(tuple(shape) + u.shape[1:])

def offsets(sizes) -> list[int]: return [sum(sizes[:i]) for i in range(len(sizes))]

def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
  """The Jacobian by reverse mode: `vmap` of the vjp over the rows of the identity. Each output leaf gets
  the argument structure with blocks of shape `out.shape + arg.shape`. Outputs are real, or complex with
  `holomorphic=True` (complex inputs and outputs; the blocks are then the complex derivatives).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.jacrev(lambda x: x * x)(jnp.array([1.0, 2.0])).tolist()
  [[2.0, 0.0], [0.0, 4.0]]
  """
  name = f"jacrev({getattr(fun, '__name__', 'fun')})"
  @functools.wraps(fun)
  def jac_f(*args, **kwargs):
    from tinyjx.transforms.batching import vmap
    diff, f_diff, paths = split_args(fun, args, kwargs, argnums, "jacrev")
    check_float_inputs(diff, paths, "jacrev", allow_int)
    if holomorphic: check_complex_inputs(diff, paths, "jacrev")
    tape = Tape(f_diff, diff, has_aux, name, paths)
    for o in tape.outs: check_output_kind(o, holomorphic, "jacrev")
    avals = [(o.shape, o.dtype) for o in tape.outs]
    cts = vmap(lambda *c: tape.pullback([x.uop for x in c]))(*[Array(b) for b in standard_basis(avals)])
    sizes = [math.prod(s) for s, _ in avals]
    per_out = [tree_util.tree_unflatten(tape.in_tree, [Array(block(g.uop, st, sz, shape), g.weak) for g in cts])
               for (shape, _), st, sz in zip(avals, offsets(sizes), sizes)]
    per_out = [p[0] if isinstance(argnums, int) else p for p in per_out]
    jac = tree_util.tree_unflatten(tape.out_tree, per_out)
    return (jac, tape.aux_out()) if has_aux else jac
  return jac_f

jacobian = jacrev

def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
  """The Jacobian by forward mode: `vmap` of the jvp over the columns of the identity; the same layout as
  `jacrev` (each output leaf gets the argument structure with blocks of shape `out.shape + arg.shape`). Inputs are
  real, or complex with `holomorphic=True` (complex outputs too).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.jacfwd(lambda x: x * x)(jnp.array([1.0, 2.0])).tolist()
  [[2.0, 0.0], [0.0, 4.0]]
  """
  name = f"jacfwd({getattr(fun, '__name__', 'fun')})"
  @functools.wraps(fun)
  def jac_f(*args, **kwargs):
    from tinyjx.transforms.batching import vmap
    diff, f_diff, paths = split_args(fun, args, kwargs, argnums, "jacfwd")
    check_float_inputs(diff, paths, "jacfwd", False)
    if holomorphic: check_complex_inputs(diff, paths, "jacfwd")
    else: check_real_inputs(diff, paths)
    tape = Tape(f_diff, diff, has_aux, name, paths)
    for o in tape.outs: check_output_kind(o, holomorphic, "jacfwd")
    avals = [(a.shape, a.dtype) for a in tape.ins]
    touts = vmap(lambda *t: tape.pushforward([x.uop for x in t]))(*[Array(b) for b in standard_basis(avals)])
    sizes = [math.prod(s) for s, _ in avals]
    def arrange(t: Array, shape, start, size):
      b = block(t.uop, start, size, shape)   # arg.shape + out.shape
      k = len(shape)
      return Array(b.permute(tuple(range(k, b.ndim)) + tuple(range(k))), t.weak)
    per_out = []
    for t in touts:
      blocks = [arrange(t, shape, st, sz) for (shape, _), st, sz in zip(avals, offsets(sizes), sizes)]
      tree = tree_util.tree_unflatten(tape.in_tree, blocks)
      per_out.append(tree[0] if isinstance(argnums, int) else tree)
    jac = tree_util.tree_unflatten(tape.out_tree, per_out)
    return (jac, tape.aux_out()) if has_aux else jac
  return jac_f

def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
  """The Hessian, `jacfwd(jacrev(f))`: blocks of shape `out.shape + arg.shape + arg.shape`.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.hessian(lambda x: jnp.sum(x ** 3))(jnp.array([1.0, 2.0])).tolist()
  [[6.0, 0.0], [0.0, 12.0]]
  """
  return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)

# ---------------------------------------------------------------- stop_gradient

def stop_gradient(x):
  """The identity on values, with zero derivative: `STOP_GRADIENT(x)`, which both rule tables map to no
  gradient. Works on pytrees; integer leaves pass through unchanged.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import lax
  >>> tinyjx.grad(lambda x: x * lax.stop_gradient(x))(3.0).item()
  3.0
  """
  def stop(leaf):
    a = as_array(leaf, "stop_gradient argument")
    if not is_float(a.dtype) or (a.uop.is_concrete and 'TAG' not in a.uop.flags): return a
    return Array(UOp(Ops.STOP_GRADIENT, a.dtype, (a.uop,)), a.weak)
  return tree_util.tree_map(stop, x)

