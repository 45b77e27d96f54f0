"""numpy.creation: arrays made from a shape and a few numbers (ranges, grids, identity and triangular masks).

Nothing here builds host data for a pattern: fills are CONST nodes, ranges are an IOTA node scaled and
shifted, and masks (eye, tri, tril, triu) compare IOTAs, so each result is a small graph that fuses into its
consumer. The numbers that fix a result's shape (lengths, `num`, `k`) must be concrete Python values;
`start`/`stop` of `linspace` may be arrays. `full`, `zeros`, `ones` and their `_like` forms live in core.
"""
from __future__ import annotations
import builtins, math, operator
import numpy as np
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops
from tinyjx.numpy.core import (asarray, promote, full, zeros, zeros_like, where, normalize_axis,
                               broadcast_shapes)

__all__ = ['arange', 'linspace', 'eye', 'identity', 'tri', 'tril', 'triu', 'meshgrid', 'empty', 'empty_like', 'copy']

def _iota(dtype, shape: tuple, axis: int = 0) -> UOp: return UOp(Ops.IOTA, dtype, (), (tuple(shape), axis))

def _concrete(x, name: str):
  """A Python number from `x` (an Array must be concrete: its value fixes the result's shape)."""
  if isinstance(x, Array):
    if x.ndim: raise TypeError(f"{name} must be a scalar, got an array of shape {x.shape}")
    return x.concrete_numpy(f"the {name} argument of arange (it fixes the result's length)").item()
  if isinstance(x, np.ndarray) or isinstance(x, np.generic): return x.item()
  return x

def arange(start, stop=None, step=None, dtype=None) -> Array:
  """Evenly spaced values in [start, stop) by `step`: `start + step * iota`, computed in `dtype` (float32 for
  16-bit floats), as JAX does; an IOTA node, no host data.

  Integer arguments give the default int type, any float argument the default float type.

  >>> arange(2, 10, 3).tolist()
  [2, 5, 8]
  """
  dt = dtypes.to_dtype(dtype) if dtype is not None else promote(*(v for v in (start, stop, step) if v is not None))[1]
  start, stop, step = (_concrete(v, n) for v, n in ((start, 'start'), (stop, 'stop'), (step, 'step')))
  if stop is None: start, stop = 0, start
  if step == 0: raise ValueError("arange: step must not be zero")
  n = builtins.max(0, math.ceil((stop - start) / (1 if step is None else step)))
  work = dtypes.float32 if dtypes.is_float(dt) and dt.itemsize < 4 else dt
  out = _iota(work, (n,))
  if step is not None and step != 1: out = UOp.const(step, work, (n,)).alu(Ops.MUL, out)
  if start != 0: out = UOp.const(start, work, (n,)).alu(Ops.ADD, out)
  return Array(out.cast(dt))

def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype=None, axis: int = 0):
  """`num` evenly spaced values from `start` to `stop` (included when `endpoint`); arrays give a grid along `axis`.

  With `retstep` also returns the spacing (NaN when it is undefined, as for num=1 with endpoint).
  Integer dtypes round down, as in numpy and JAX.

  >>> linspace(0.0, 1.0, 5).tolist()
  [0.0, 0.25, 0.5, 0.75, 1.0]
  """
  num = operator.index(num)
  if num < 0: raise ValueError(f"linspace: num must not be negative, got {num}")
  dt = dtypes.to_dtype(dtype) if dtype is not None else promote(start, stop, 1.0)[1]
  calc = dt if dtypes.is_float(dt) else dtypes.default_float()
  lo, hi = asarray(start).astype(calc), asarray(stop).astype(calc)
  bounds = broadcast_shapes(lo.shape, hi.shape, names=('start', 'stop'))
  ax = normalize_axis(axis, len(bounds) + 1)
  shape = bounds[:ax] + (num,) + bounds[ax:]
  lo_u, hi_u = (u.uop.broadcast_to(bounds).reshape(bounds[:ax] + (1,) + bounds[ax:]).expand(shape) for u in (lo, hi))
  div = num - 1 if endpoint else num
  if num > 1:
    t = _iota(calc, shape, ax).alu(Ops.MUL, UOp.const(1 / div, calc, shape))   # XLA folds / div into * (1 / div)
    one_minus_t = UOp.const(1, calc, shape).alu(Ops.SUB, t)
    out = lo_u.alu(Ops.MUL, one_minus_t).alu(Ops.ADD, hi_u.alu(Ops.MUL, t))
    if endpoint:
      last = _iota(dtypes.int32, shape, ax).alu(Ops.CMPEQ, UOp.const(div, dtypes.int32, shape))
      out = UOp(Ops.WHERE, calc, (last, hi_u, out))
  else:
    out = lo_u
  if dtypes.is_int(dt): out = UOp(Ops.FLOOR, calc, (out,))
  result = Array(out.cast(dt))
  if not retstep: return result
  step = (hi - lo) / div if div > 0 else full(bounds, math.nan, calc)
  return result, step

def eye(N: int, M: int | None = None, k: int = 0, dtype=None) -> Array:
  """A 2-d array with ones on diagonal `k` (0: the main diagonal, positive: above it) and zeros elsewhere.

  >>> eye(2, 3, k=1).tolist()
  [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
  """
  on = _diagonal_mask(N, M, k, Ops.CMPEQ)
  return Array(on.cast(dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_float()))

def identity(n: int, dtype=None) -> Array:
  """The n x n identity matrix."""
  return eye(n, dtype=dtype)

def _diagonal_mask(N, M, k, cmp: Ops) -> UOp:
  """bool mask of (N, M): column `cmp` row + k (CMPEQ: one diagonal, CMPLE: on and below it)."""
  N = operator.index(N)
  M = N if M is None else operator.index(M)
  k = operator.index(k)
  if N < 0 or M < 0: raise ValueError(f"negative dimensions are not allowed, got N={N}, M={M}")
  shape = (N, M)
  rows = _iota(dtypes.int32, shape, 0).alu(Ops.ADD, UOp.const(k, dtypes.int32, shape))
  return _iota(dtypes.int32, shape, 1).alu(cmp, rows)

def tri(N: int, M: int | None = None, k: int = 0, dtype=None) -> Array:
  """An (N, M) array with ones at and below diagonal `k` and zeros above it.

  >>> tri(3, dtype=int).tolist()
  [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
  """
  dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_float()
  return Array(_diagonal_mask(N, M, k, Ops.CMPLE).cast(dt))

def _triangle(m, k: int, lower: bool, name: str) -> Array:
  a = asarray(m)
  if a.ndim < 2: raise ValueError(f"{name} needs an array of at least 2 dimensions, got shape {a.shape}")
  mask = _diagonal_mask(a.shape[-2], a.shape[-1], k if lower else k - 1, Ops.CMPLE)
  mask = Array(mask.broadcast_to(a.shape))
  zero = zeros_like(a)
  return where(mask, a, zero) if lower else where(mask, zero, a)

def tril(m, k: int = 0) -> Array:
  """`m` with the elements above diagonal `k` of its last two axes set to zero."""
  return _triangle(m, k, True, "tril")

def triu(m, k: int = 0) -> Array:
  """`m` with the elements below diagonal `k` of its last two axes set to zero."""
  return _triangle(m, k, False, "triu")

def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = 'xy') -> list[Array]:
  """Coordinate grids from 1-d arrays; `indexing='xy'` (Cartesian, first two axes swapped) or 'ij' (matrix).

  >>> [g.shape for g in meshgrid(arange(3), arange(2))]
  [(2, 3), (2, 3)]
  """
  if indexing not in ('xy', 'ij'): raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
  arrs = [asarray(x) for x in xi]
  if builtins.any(a.ndim != 1 for a in arrs):
    raise ValueError(f"meshgrid: arguments must be 1-d, got shapes {[a.shape for a in arrs]}")
  shape = [a.size for a in arrs]
  if indexing == 'xy' and len(arrs) > 1: shape[0], shape[1] = shape[1], shape[0]
  out = []
  for i, a in enumerate(arrs):
    pos = {0: 1, 1: 0}.get(i, i) if indexing == 'xy' and len(arrs) > 1 else i
    u = a.uop.reshape(tuple(a.size if d == pos else 1 for d in range(len(arrs))))
    out.append(Array(u if sparse else u.expand(tuple(shape)), a.weak))
  return out

def empty(shape, dtype=None, device=None) -> Array:
  """Same as `zeros` (tinyjx arrays are immutable, so there is nothing to leave uninitialized)."""
  return zeros(shape, dtype)

def empty_like(prototype, dtype=None, shape=None) -> Array:
  """Same as `zeros_like`."""
  return zeros_like(prototype, dtype, shape)

def copy(a, order=None) -> Array:
  """A copy of `a`. Arrays are immutable, so this is the same value under a new Array object."""
  a = asarray(a)
  return Array(a.uop, a.weak)
