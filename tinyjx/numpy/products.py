"""numpy.products: contractions (dot, matmul, tensordot, einsum, ...) and their `precision=` (lax.Precision).

Every contraction is one DOT_GENERAL on operands first promoted to one dtype (bool and integer products
are allowed, as in JAX). DOT_GENERAL's arg is ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)) and
its output dims are batch, then lhs free, then rhs free; everything around it (broadcasting batch dims,
diagonals, dropping the axes of 1-D operands) is movement ops. `einsum` takes repeated labels as
diagonals (views), sums labels no one else needs, then contracts the operands pairwise, left to right.

`Precision` and `canonicalize_precision` live here, below lax, which re-exports them (`lax.Precision`).
"""
from __future__ import annotations
import builtins, collections, enum, math, operator
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops
from tinyjx.numpy import core
from tinyjx.numpy.core import asarray, normalize_axis
from tinyjx.numpy.indexing import broadcast_uop, diagonal_uop, index

__all__ = ['dot', 'matmul', 'vdot', 'vecdot', 'inner', 'outer', 'tensordot', 'einsum', 'kron', 'cross']

def dot_general_uop(a: UOp, b: UOp, contract, batch=((), ())) -> UOp:
  """DOT_GENERAL of two uops of one dtype; output dims are batch, a's free, b's free."""
  arg = ((tuple(contract[0]), tuple(contract[1])), (tuple(batch[0]), tuple(batch[1])))
  return UOp(Ops.DOT_GENERAL, a.dtype, (a, b), arg)

def _check_precision(precision, fn: str) -> None:
  """Checks `precision=` (lax.Precision, its strings, or a pair); devices compute float32 fully at every precision."""
  if precision is None: return
  canonicalize_precision(precision, fn)

def _promoted(*xs, preferred=None) -> tuple[list[Array], bool]:
  arrs, _, weak = core.promote(*xs)
  if preferred is not None: arrs = [core.astype(a, preferred) for a in arrs]
  return arrs, weak

def dot(a, b, *, precision=None, preferred_element_type=None) -> Array:
  """numpy's dot: scalars multiply; otherwise sum over a's last axis and b's second-to-last (or only) axis.

  >>> import tinyjx.numpy as jnp
  >>> jnp.dot(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 1])).tolist()
  [3, 7]
  """
  _check_precision(precision, 'dot')
  (a, b), weak = _promoted(a, b, preferred=preferred_element_type)
  if a.ndim == 0 or b.ndim == 0: return core.multiply(a, b)
  cb = builtins.max(b.ndim - 2, 0)
  if a.shape[-1] != b.shape[cb]:
    raise ValueError(f"dot: shapes {a.shape} and {b.shape} are not aligned: a's last axis has size {a.shape[-1]} "
                     f"but axis {cb} of b has size {b.shape[cb]}")
  return Array(dot_general_uop(a.uop, b.uop, ((a.ndim - 1,), (cb,))), weak)

def matmul(a, b, *, precision=None, preferred_element_type=None) -> Array:
  """`a @ b`: matrix product over the last two axes with broadcast batch axes; a 1-D operand is a vector.

  >>> import tinyjx.numpy as jnp
  >>> (jnp.ones((5, 2, 3)) @ jnp.ones((3, 4))).shape
  (5, 2, 4)
  """
  _check_precision(precision, 'matmul')
  (a, b), weak = _promoted(a, b, preferred=preferred_element_type)
  for name, x in (('a', a), ('b', b)):
    if x.ndim == 0:
      raise ValueError(f"matmul: operand {name} must have at least 1 dimension, got a scalar (shape ()); "
                       "use jnp.multiply or `*` for scalars")
  au = a.uop if a.ndim > 1 else a.uop.reshape((1,) + a.shape)
  bu = b.uop if b.ndim > 1 else b.uop.reshape(b.shape + (1,))
  if au.shape[-1] != bu.shape[-2]:
    where = "second-to-last" if b.ndim > 1 else "only"
    raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align: a's last axis has size {a.shape[-1]} "
                     f"but b's {where} axis has size {bu.shape[-2]}")
  out = _matmul_uop(au, bu, a.shape, b.shape)
  if a.ndim == 1: out = out.reshape(out.shape[:-2] + out.shape[-1:])
  if b.ndim == 1: out = out.reshape(out.shape[:-1])
  return Array(out, weak)

def _matmul_uop(au: UOp, bu: UOp, ashape: tuple, bshape: tuple) -> UOp:
  ba, bb = au.shape[:-2], bu.shape[:-2]
  if not bb: return dot_general_uop(au, bu, ((au.ndim - 1,), (0,)))   # a's batch axes are free axes
  if not ba:                                                         # (n, B..., m), then B to the front
    out = dot_general_uop(au, bu, ((1,), (bu.ndim - 2,)))
    return out.permute(tuple(range(1, len(bb) + 1)) + (0, len(bb) + 1))
  try:
    batch = core.broadcast_shapes(ba, bb)
  except ValueError:
    raise ValueError(f"matmul: the batch axes of shapes {ashape} and {bshape} do not broadcast "
                     f"({ba} and {bb})") from None
  au, bu = au.broadcast_to(batch + au.shape[-2:]), bu.broadcast_to(batch + bu.shape[-2:])
  nb = len(batch)
  return dot_general_uop(au, bu, ((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))

def vdot(a, b, *, precision=None, preferred_element_type=None) -> Array:
  """Dot product of the flattened arrays (which must have one size); a complex `a` is conjugated first, as numpy's."""
  _check_precision(precision, 'vdot')
  a, b = core.conj(asarray(a)), asarray(b)
  if a.size != b.size: raise ValueError(f"vdot: arrays of shapes {a.shape} and {b.shape} differ in size")
  flat = lambda x: Array(x.uop.reshape((x.size,)), x.weak)
  return dot(flat(a), flat(b), preferred_element_type=preferred_element_type)

def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None) -> Array:
  """Dot product along `axis` of two broadcast arrays (the array API's vecdot: a complex `x1` is conjugated)."""
  _check_precision(precision, 'vecdot')
  (a, b), weak = _promoted(core.conj(asarray(x1)), x2, preferred=preferred_element_type)
  shape = core.broadcast_shapes(a.shape, b.shape, names=('x1', 'x2'))
  ax = normalize_axis(axis, len(shape))
  au, bu = a.uop.broadcast_to(shape), b.uop.broadcast_to(shape)
  batch = tuple(i for i in range(len(shape)) if i != ax)
  return Array(dot_general_uop(au, bu, ((ax,), (ax,)), (batch, batch)), weak)

def inner(a, b, *, precision=None, preferred_element_type=None) -> Array:
  """Sum over the last axes of both: shape a.shape[:-1] + b.shape[:-1] (scalars multiply)."""
  _check_precision(precision, 'inner')
  (a, b), weak = _promoted(a, b, preferred=preferred_element_type)
  if a.ndim == 0 or b.ndim == 0: return core.multiply(a, b)
  if a.shape[-1] != b.shape[-1]:
    raise ValueError(f"inner: the last axes of shapes {a.shape} and {b.shape} differ ({a.shape[-1]} != {b.shape[-1]})")
  return Array(dot_general_uop(a.uop, b.uop, ((a.ndim - 1,), (b.ndim - 1,))), weak)

def outer(a, b, out=None) -> Array:
  """Outer product of the flattened arrays: shape (a.size, b.size)."""
  a, b = asarray(a), asarray(b)
  return core.multiply(Array(a.uop.reshape((a.size, 1)), a.weak), Array(b.uop.reshape((1, b.size)), b.weak))

def _axes_arg(axes, ndim: int, name: str) -> tuple:
  axes = (axes,) if isinstance(axes, int) else tuple(axes)
  return tuple(normalize_axis(x, ndim, name) for x in axes)

def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None) -> Array:
  """Sum over axes pairs: `axes=n` pairs a's last n with b's first n; or `axes=(a_axes, b_axes)`.

  >>> import tinyjx.numpy as jnp
  >>> jnp.tensordot(jnp.ones((2, 3, 4)), jnp.ones((3, 4, 5))).shape
  (2, 5)
  """
  _check_precision(precision, 'tensordot')
  (a, b), weak = _promoted(a, b, preferred=preferred_element_type)
  if isinstance(axes, int):
    if not 0 <= axes <= builtins.min(a.ndim, b.ndim):
      raise ValueError(f"tensordot: axes={axes} must be between 0 and the smaller ndim of shapes {a.shape} "
                       f"and {b.shape}")
    ca, cb = tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes))
  else:
    if len(axes) != 2: raise ValueError(f"tensordot: axes must be an int or a pair of axis lists, got {axes!r}")
    ca, cb = _axes_arg(axes[0], a.ndim, 'axes[0]'), _axes_arg(axes[1], b.ndim, 'axes[1]')
  if [a.shape[i] for i in ca] != [b.shape[i] for i in cb]:
    raise ValueError(f"tensordot: axes {ca} of a (shape {a.shape}) and {cb} of b (shape {b.shape}) differ in size")
  return Array(dot_general_uop(a.uop, b.uop, (ca, cb)), weak)

def kron(a, b) -> Array:
  """Kronecker product: blocks a[i, j] * b laid out in a grid."""
  (a, b), weak = _promoted(a, b)
  nd = builtins.max(a.ndim, b.ndim)
  sa, sb = (1,) * (nd - a.ndim) + a.shape, (1,) * (nd - b.ndim) + b.shape
  au = a.uop.reshape(tuple(d for s in sa for d in (s, 1)))
  bu = b.uop.reshape(tuple(d for s in sb for d in (1, s)))
  prod = core.multiply(Array(au, weak), Array(bu, weak))
  return Array(prod.uop.reshape(tuple(x * y for x, y in zip(sa, sb))), weak)

def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis=None) -> Array:
  """Cross product of 3-vectors (or 2-vectors, padded with a zero z) along the given axes."""
  if axis is not None: axisa = axisb = axisc = axis
  (a, b), weak = _promoted(a, b)
  a, b = _to_last(a, axisa, 'axisa'), _to_last(b, axisb, 'axisb')
  n, m = a.shape[-1], b.shape[-1]
  if n not in (2, 3) or m not in (2, 3):
    raise ValueError(f"cross: vectors must have 2 or 3 components, got shapes {a.shape} and {b.shape} "
                     "on the given axes")
  comp = lambda v, i: index(v, (Ellipsis, i)) if i < v.shape[-1] else core.zeros(v.shape[:-1], v.dtype)
  (a0, a1, a2), (b0, b1, b2) = [comp(a, i) for i in range(3)], [comp(b, i) for i in range(3)]
  det2 = lambda p, q, r, s: core.subtract(core.multiply(p, q), core.multiply(r, s))
  z = det2(a0, b1, a1, b0)
  if n == 2 and m == 2: return z
  parts = [det2(a1, b2, a2, b1), det2(a2, b0, a0, b2), z]
  from tinyjx.numpy.shape import stack
  return stack([Array(broadcast_uop(p.uop, z.shape)) for p in parts], axis=axisc)

def _to_last(x: Array, axis: int, name: str) -> Array:
  ax = normalize_axis(axis, x.ndim, name)
  return Array(x.uop.permute(tuple(i for i in range(x.ndim) if i != ax) + (ax,)), x.weak)

# --- einsum ---
def einsum(subscripts, *operands, out=None, optimize=True, precision=None, preferred_element_type=None,
           _dot_general=None) -> Array:
  """Einstein summation: `einsum('ij,jk->ik', a, b)`; implicit output, '...', repeated labels (diagonals).

  Operands are contracted pairwise, left to right, each pair by one DOT_GENERAL. The interleaved form
  `einsum(a, [0, 1], b, [1, 2], [0, 2])` works too.

  >>> import tinyjx.numpy as jnp
  >>> jnp.einsum('ii->i', jnp.arange(9).reshape(3, 3)).tolist()
  [0, 4, 8]
  >>> jnp.einsum('bij,bjk->bik', jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5))).shape
  (2, 3, 5)
  """
  _check_precision(precision, 'einsum')
  if not isinstance(subscripts, str): subscripts, operands = _interleaved(subscripts, operands)
  if not operands: raise ValueError("einsum needs at least one operand")
  arrs, weak = _promoted(*operands, preferred=preferred_element_type)
  ins, outl = _parse_subscripts(subscripts, [a.ndim for a in arrs])
  sizes = _label_sizes(ins, arrs)
  ops = [_diagonals(*_squeeze_broadcast(a.uop, labels, sizes)) for a, labels in zip(arrs, ins)]
  cur = ops[0]
  for k in range(1, len(ops)):
    needed = set(outl).union(*[set(ls) for _, ls in ops[k + 1:]])
    cur = _sum_except(cur, needed | set(ops[k][1]))
    cur = _contract(cur, _sum_except(ops[k], needed | set(cur[1])), needed)
  u, labels = _sum_except(cur, set(outl))
  return Array(u.permute(tuple(labels.index(l) for l in outl)), weak)

_LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'

def _interleaved(first, rest) -> tuple[str, tuple]:
  """einsum(a, [0, 1], b, [1, 2], [0, 2]) -> ('ab,bc->ac', (a, b))."""
  args = (first,) + tuple(rest)
  ops, subs = args[0::2], list(args[1::2])
  out = args[-1] if len(args) % 2 == 1 else None
  if out is not None: ops = ops[:-1]
  def term(sub):
    return "".join('...' if s is Ellipsis else _LETTERS[operator.index(s)] for s in sub)
  text = ",".join(term(s) for s in subs) + ("" if out is None else "->" + term(out))
  return text, ops

def _expand_term(term: str, ndim: int, k: int) -> list:
  letters = term.replace('...', '')
  bad = [c for c in letters if not c.isalpha()]
  if bad or term.count('...') > 1:
    raise ValueError(f"einsum: invalid subscripts {term!r} for operand {k}: use letters and at most one '...'")
  if '...' not in term:
    if len(term) != ndim:
      raise ValueError(f"einsum: operand {k} has {ndim} dimensions but its subscripts {term!r} name {len(term)}")
    return list(term)
  n_ell = ndim - len(letters)
  if n_ell < 0:
    raise ValueError(f"einsum: operand {k} has {ndim} dimensions but its subscripts {term!r} name "
                     f"{len(letters)} besides '...'")
  pre, post = term.split('...')
  return list(pre) + [('...', i) for i in reversed(range(n_ell))] + list(post)

def _parse_subscripts(subscripts: str, ndims: list) -> tuple[list, list]:
  s = subscripts.replace(' ', '')
  lhs, rhs = s.split('->') if '->' in s else (s, None)
  terms = lhs.split(',')
  if len(terms) != len(ndims):
    raise ValueError(f"einsum: subscripts {subscripts!r} name {len(terms)} operands but {len(ndims)} were given")
  ins = [_expand_term(t, nd, k) for k, (t, nd) in enumerate(zip(terms, ndims))]
  n_ell = builtins.max((sum(isinstance(l, tuple) for l in ls) for ls in ins), default=0)
  ell = [('...', i) for i in reversed(range(n_ell))]
  if rhs is None:
    counts = collections.Counter(l for ls in ins for l in ls if isinstance(l, str))
    return ins, ell + sorted(c for c, n in counts.items() if n == 1)
  if rhs.count('...') > 1 or any(not c.isalpha() for c in rhs.replace('...', '')):
    raise ValueError(f"einsum: invalid output subscripts {rhs!r}: use letters and at most one '...'")
  pre, post = rhs.split('...') if '...' in rhs else (rhs, None)
  outl = list(pre) + (ell + list(post) if post is not None else [])
  known = {l for ls in ins for l in ls}
  for c in outl:
    if outl.count(c) > 1: raise ValueError(f"einsum: output subscript {c!r} appears more than once in {rhs!r}")
    if c not in known:
      raise ValueError(f"einsum: output subscript {c!r} does not appear in any input of {subscripts!r}")
  return ins, outl

def _label_name(l) -> str: return repr(l) if isinstance(l, str) else f"'...' axis {l[1]}"

def _label_sizes(ins: list, arrs: list) -> dict:
  sizes, seen = {}, {}
  for k, (labels, a) in enumerate(zip(ins, arrs)):
    for l, n in zip(labels, a.shape):
      if l in sizes and n != sizes[l] and 1 not in (n, sizes[l]):
        raise ValueError(f"einsum: label {_label_name(l)} has size {sizes[l]} in operand {seen[l]} and size {n} in "
                         f"operand {k} (shapes {[x.shape for x in arrs]})")
      if l not in sizes or sizes[l] == 1: sizes[l], seen[l] = n, k
  return sizes

def _squeeze_broadcast(u: UOp, labels: list, sizes: dict) -> tuple[UOp, list]:
  """Drop size-1 axes whose label is bigger elsewhere: the operand is constant along them (broadcasting)."""
  keep = [i for i, l in enumerate(labels) if not (u.shape[i] == 1 and sizes[l] > 1)]
  return u.reshape(tuple(u.shape[i] for i in keep)), [labels[i] for i in keep]

def _diagonals(u: UOp, labels: list) -> tuple[UOp, list]:
  """Take the diagonal for every label repeated within one operand ('ii->i')."""
  while dup := next((l for l in labels if labels.count(l) > 1), None):
    p = labels.index(dup)
    q = labels.index(dup, p + 1)
    if u.shape[p] != u.shape[q]:
      raise ValueError(f"einsum: repeated label {_label_name(dup)} names axes of sizes {u.shape[p]} and {u.shape[q]}")
    u = diagonal_uop(u, 0, p, q)
    labels = [l for i, l in enumerate(labels) if i not in (p, q)] + [dup]
  return u, labels

def _sum_except(op: tuple, keep: set) -> tuple[UOp, list]:
  u, labels = op
  axes = [i for i, l in enumerate(labels) if l not in keep]
  return u.reduce(Ops.ADD, axes), [l for l in labels if l in keep]

def _contract(a: tuple, b: tuple, needed: set) -> tuple[UOp, list]:
  (ua, la), (ub, lb) = a, b
  shared = [l for l in la if l in lb]
  batch = [l for l in shared if l in needed]
  summed = [l for l in shared if l not in needed]
  pick = lambda labels, ls: tuple(labels.index(l) for l in ls)
  u = dot_general_uop(ua, ub, (pick(la, summed), pick(lb, summed)), (pick(la, batch), pick(lb, batch)))
  return u, batch + [l for l in la if l not in shared] + [l for l in lb if l not in shared]

# --- precision (lax.Precision) ---
class Precision(enum.Enum):
  """How precisely a contraction (dot, matmul, einsum, conv) should compute, as `jax.lax.Precision`.

  The string forms name the same values: 'default' and 'bfloat16' (and 'fastest') are DEFAULT, 'high',
  'tensorfloat32' and 'bfloat16_3x' are HIGH, 'highest' and 'float32' are HIGHEST. `precision=` also takes a pair,
  one value for each operand. tinyjx's devices compute float32 contractions in full float32 at every precision
  (what HIGHEST asks for); the argument is checked and kept for JAX code that passes it.

  >>> Precision('highest'), Precision('bfloat16'), str(Precision.HIGH)
  (<Precision.HIGHEST: 2>, <Precision.DEFAULT: 0>, 'HIGH')
  """
  DEFAULT = 0
  HIGH = 1
  HIGHEST = 2

  @classmethod
  def _missing_(cls, value):
    return cls[_PRECISION_NAMES[value]] if isinstance(value, str) and value in _PRECISION_NAMES else None

  def __str__(self): return self.name

_PRECISION_NAMES = {'default': 'DEFAULT', 'bfloat16': 'DEFAULT', 'fastest': 'DEFAULT', 'high': 'HIGH',
                    'tensorfloat32': 'HIGH', 'bfloat16_3x': 'HIGH', 'highest': 'HIGHEST', 'float32': 'HIGHEST'}

def canonicalize_precision(precision, fn: str = 'dot') -> tuple | None:
  """`precision=` of `fn` as None or a pair of Precisions (one per operand); a bad value is a ValueError.

  >>> canonicalize_precision('high', 'matmul')
  (<Precision.HIGH: 1>, <Precision.HIGH: 1>)
  """
  if precision is None: return None
  if isinstance(precision, (str, Precision)): return (_one_precision(precision, fn),) * 2
  if isinstance(precision, (tuple, list)) and len(precision) == 2 and builtins.all(p is not None for p in precision):
    return tuple(_one_precision(p, fn) for p in precision)
  raise ValueError(_precision_message(precision, fn))

def _one_precision(p, fn: str) -> Precision:
  if isinstance(p, Precision): return p
  if isinstance(p, str) and p in _PRECISION_NAMES: return Precision(p)
  raise ValueError(_precision_message(p, fn))

def _precision_message(bad, fn: str) -> str:
  return (f"{fn}: precision={bad!r} is not a valid precision. Pass None, a lax.Precision (DEFAULT, HIGH, HIGHEST), "
          f"one of the strings {sorted(_PRECISION_NAMES)} (lower case), or a pair of those, one per operand.")
