"""numpy.indexing: `x[idx]`, `x.at[idx].set/add/...`, and the gather family (take, sort, nonzero ...).

An index is parsed once into one entry per output-producing item. Its static part (ints, slices of any
step, None, Ellipsis) becomes movement ops only (SHRINK, FLIP, PAD, RESHAPE, PERMUTE): basic indexing is
a view, never a gather. Integer-array (advanced) indices, concrete or traced, become one GATHER: the
indexed axes are permuted to the front and merged into one, and one flat index is computed from the
per-axis indices. numpy's placement rule holds: the broadcast index dims replace the advanced axes when
the advanced indices are adjacent in the index, and go first otherwise.

Out-of-range indices follow JAX: gathers clamp (`x[5]` on 3 elements reads `x[2]`), updates are dropped,
`take` and `take_along_axis` fill (NaN, INT_MIN, ...) unless told `mode='clip'` or `mode='wrap'`.
Negative indices wrap once (`-1` is the last element), traced ones too.

`x.at[idx]` updates reuse the same parsing: the index picks flat positions out of an IOTA (-1 where out
of range), and one SCATTER writes the updates there; duplicate indices accumulate as in JAX. Boolean
masks need a concrete value, because the result's shape depends on it.
"""
from __future__ import annotations
import builtins, math, operator
import numpy as np
from tinyjx import dtypes
from tinyjx.array import Array, ConcretizationError, concretization_error
from tinyjx.uop import UOp, Ops
from tinyjx.numpy import core
from tinyjx.numpy.core import asarray, normalize_axis, where as core_where

__all__ = ['take', 'take_along_axis', 'put_along_axis', 'sort', 'argsort',
           'lexsort', 'where', 'nonzero', 'argwhere', 'flatnonzero', 'searchsorted', 'diagonal', 'diag', 'trace', 'unique',
           'unravel_index']

SUPPORTED = ("integers, slices, None (jnp.newaxis), Ellipsis (...), integer arrays or lists of integers, "
             "and concrete boolean arrays")
_FULL = slice(None)

# --- parsing an index into entries ---
# ('slice', s) and ('int', i) consume one axis of x; ('new',) adds a size-1 axis; ('adv', array) indexes one
# axis with an integer array; ('newadv', n) adds a size-1 axis indexed by n zeros (a 0-d boolean mask);
# ('mask', ndarray) consumes mask.ndim axes and becomes 'adv' entries; ('ellipsis',) stands for full slices.

def _entries(idx, shape: tuple) -> list:
  """The index as a list of entries covering every axis of an array of `shape` (ellipsis expanded)."""
  items = idx if isinstance(idx, tuple) else (idx,)
  out = [_classify(e, k) for k, e in enumerate(items)]
  if sum(e[0] == 'ellipsis' for e in out) > 1: raise IndexError("an index can only have a single ellipsis ('...')")
  used = sum(_consumed(e) for e in out)
  if used > len(shape):
    raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but {used} were indexed")
  fill = [('slice', _FULL)] * (len(shape) - used)
  at = next((k for k, e in enumerate(out) if e[0] == 'ellipsis'), len(out))
  return _expand_masks(out[:at] + fill + out[at + 1:], shape)

def _consumed(e) -> int:
  if e[0] == 'mask': return e[1].ndim
  return 0 if e[0] in ('new', 'newadv', 'ellipsis') else 1

def _classify(e, k: int) -> tuple:
  if e is None: return ('new',)
  if e is Ellipsis: return ('ellipsis',)
  if isinstance(e, slice): return ('slice', _check_slice(e))
  if isinstance(e, (bool, np.bool_)): return ('newadv', int(bool(e)))
  if isinstance(e, (int, np.integer)): return ('int', int(e))
  if isinstance(e, (list, tuple)): e = _sequence_index(e, k)
  if isinstance(e, (Array, np.ndarray)):
    kind = e.dtype.kind
    if kind == 'b': return _mask_entry(e)
    if kind in 'iu': return ('adv', e)
    raise TypeError(f"index {k}: indexer must have integer or boolean type, got an array of {e.dtype}; "
                    f"supported indices are {SUPPORTED}")
  if isinstance(e, str):
    raise TypeError(f"index {k}: string index {e!r} is not supported; supported indices are {SUPPORTED}")
  raise TypeError(f"index {k}: {type(e).__name__} {e!r} is not a supported index; supported indices are {SUPPORTED}")

def _sequence_index(e, k: int):
  """A list (or a tuple inside the index tuple) is an integer array index, as in numpy."""
  if any(isinstance(v, Array) for v in _leaves(e)): return asarray(e)
  arr = np.asarray(e)
  if arr.size == 0: return arr.astype(np.int32)
  if arr.dtype.kind not in 'iub':
    raise TypeError(f"index {k}: the sequence {e!r} is not a list of integers or booleans; "
                    f"supported indices are {SUPPORTED}")
  return arr

def _leaves(seq):
  for v in seq:
    if isinstance(v, (list, tuple)): yield from _leaves(v)
    else: yield v

def _check_slice(s: slice) -> slice:
  vals = []
  for name, v in (('start', s.start), ('stop', s.stop), ('step', s.step)):
    if v is not None and (isinstance(v, (float, bool)) or not hasattr(v, '__index__')):
      raise TypeError(f"slice {name} must be an integer or None, got {v!r}; for a traced start use lax.dynamic_slice")
    vals.append(None if v is None else operator.index(v))
  if vals[2] == 0: raise ValueError("slice step cannot be zero")
  return slice(*vals)

class NonConcreteBooleanIndexError(IndexError, ConcretizationError):
  """x[mask] with a traced boolean mask (inside jit, vmap ...): the result's shape would depend on its values.
  An IndexError, as JAX's is, and a ConcretizationError (a TypeError), as tinyjx's other traced-value errors."""

def _mask_entry(e) -> tuple:
  if isinstance(e, Array):
    if not e.uop.is_concrete:
      err = concretization_error(e.uop, "boolean mask indexing x[mask]")
      raise NonConcreteBooleanIndexError(f"{err} The result's shape depends on how many entries of the mask are True, so the mask "
                      "must be concrete: use jnp.where(mask, x, 0) to keep the shape, or jnp.nonzero(mask, size=N) "
                      "for a fixed number of indices.") from None
    e = np.asarray(e)
  return ('mask', np.asarray(e)) if np.ndim(e) else ('newadv', int(bool(e)))

def _expand_masks(entries: list, shape: tuple) -> list:
  """Replace each boolean mask by the integer arrays of its nonzero positions (one per axis it covers)."""
  out, axis = [], 0
  for e in entries:
    if e[0] != 'mask':
      out.append(e); axis += _consumed(e); continue
    mask = e[1]
    covered = shape[axis:axis + mask.ndim]
    if tuple(covered) != mask.shape:
      raise IndexError(f"boolean index of shape {mask.shape} does not match the indexed axes {axis}.. of the array "
                       f"(sizes {tuple(covered)})")
    out += [('adv', nz.astype(np.int32)) for nz in np.nonzero(mask)]
    axis += mask.ndim
  return out

# --- static (basic) indexing: movement ops only ---
def shrink_axis(u: UOp, axis: int, lo: int, hi: int) -> UOp:
  """`u[..., lo:hi, ...]` along `axis` (a SHRINK view); lax's slicing uses it too."""
  return u.shrink(tuple((lo, hi) if i == axis else (0, s) for i, s in enumerate(u.shape)))

def strided_slice_axis(u: UOp, axis: int, start: int, length: int, step: int) -> UOp:
  """Elements start, start+step, ... (`length` of them, step > 0) along `axis`, as SHRINK/PAD/RESHAPE views."""
  if length == 0 or step == 1: return shrink_axis(u, axis, start, start + length)
  n, end = u.shape[axis], start + length * step
  u = shrink_axis(u, axis, start, builtins.min(end, n))
  if end > n: u = u.pad(tuple((0, end - n) if i == axis else (0, 0) for i in range(u.ndim)))
  s = u.shape
  u = u.reshape(s[:axis] + (length, step) + s[axis + 1:])
  u = u.shrink(tuple((0, 1) if i == axis + 1 else (0, d) for i, d in enumerate(u.shape)))
  return u.reshape(s[:axis] + (length,) + s[axis + 1:])

def slice_axis(u: UOp, axis: int, s: slice) -> UOp:
  """`x[..., s, ...]` on one axis for a slice with any step (negative steps flip first)."""
  n = u.shape[axis]
  start, stop, step = s.indices(n)
  length = len(range(start, stop, step))
  if step < 0: u, start, step = u.flip((axis,)), n - 1 - start, -step
  return strided_slice_axis(u, axis, start, length, step)

def _basic(u: UOp, entries: list) -> tuple[UOp, list, bool]:
  """Apply slices, static ints and new axes; returns the view, [(axis, index)] of advanced entries, and
  whether a static int was out of range (the result then has no valid element)."""
  out_shape, adv, axis, out_of_range = [], [], 0, False
  for e in entries:
    if e[0] == 'new': out_shape.append(1); continue
    if e[0] == 'newadv':
      adv.append((len(out_shape), np.zeros(e[1], np.int32))); out_shape.append(1); continue
    if e[0] == 'slice':
      u = slice_axis(u, axis, e[1]); out_shape.append(u.shape[axis])
    elif e[0] == 'int':
      n = u.shape[axis]
      if n == 0: raise IndexError(f"index {e[1]} is out of bounds for axis {axis} with size 0")
      i = e[1] + n if e[1] < 0 else e[1]
      out_of_range |= not 0 <= i < n
      i = builtins.min(builtins.max(i, 0), n - 1)
      u = shrink_axis(u, axis, i, i + 1)
    else:
      adv.append((len(out_shape), e[1])); out_shape.append(u.shape[axis])
    axis += 1
  return u.reshape(tuple(out_shape)), adv, out_of_range

# --- advanced indexing: one GATHER ---
def _index_arrays(adv: list) -> tuple[list[Array], tuple]:
  arrs = [asarray(v) for _, v in adv]
  for a in arrs:
    if not dtypes.is_int(a.dtype): raise TypeError(f"index arrays must be integers, got {a.dtype}")
  try:
    shape = core.broadcast_shapes(*[a.shape for a in arrs])
  except ValueError:
    raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                     + " ".join(str(a.shape) for a in arrs)) from None
  return arrs, shape

def _flat_index(arrs: list[Array], sizes: list[int], mode: str) -> tuple[Array, Array | None]:
  """The row-major flat index into the merged advanced axes, and (for mode 'fill') where all are in range."""
  flat, valid = None, None
  for a, n, st in zip(arrs, sizes, _strides(sizes)):
    if not dtypes.is_unsigned(a.dtype): a = core.where(core.less(a, 0), core.add(a, n), a)
    if mode == 'fill':
      ok = core.logical_and(core.greater_equal(a, 0), core.less(a, n))
      valid = ok if valid is None else core.logical_and(valid, ok)
    a = core.clip(a, 0, builtins.max(n - 1, 0))
    term = core.multiply(a, st) if st != 1 else a
    flat = term if flat is None else core.add(flat, term)
  return flat, valid

def _strides(sizes: list[int]) -> list[int]:
  out, acc = [], 1
  for n in reversed(sizes): out.append(acc); acc *= n
  return out[::-1]

def broadcast_uop(u: UOp, shape: tuple) -> UOp:
  """`u` broadcast numpy-style to `shape` (a constant stays one CONST node)."""
  return UOp.const(u.arg[0], u.dtype, shape) if u.op is Ops.CONST else u.broadcast_to(shape)

def shape_tuple(shape, name: str = "shape") -> tuple:
  """A shape argument (an int or a sequence of ints) as a tuple of non-negative ints."""
  try:
    if not isinstance(shape, (tuple, list)): shape = (shape,)
    shape = tuple(operator.index(s) for s in shape)
  except TypeError:
    raise TypeError(f"{name} must be an int or a sequence of ints, got {shape!r}") from None
  if any(s < 0 for s in shape): raise ValueError(f"{name} {shape} has a negative dimension")
  return shape

def default_fill(dt) -> float | int | bool:
  """JAX's fill for out-of-range reads: NaN for floats, the minimum for signed, the maximum for unsigned, True."""
  if dtypes.is_float(dt): return math.nan
  if dtypes.is_bool(dt): return True
  info = dtypes.iinfo(dt)
  return info.max if dtypes.is_unsigned(dt) else info.min

def _gather(u: UOp, adv: list, adjacent: bool, mode: str, fill_value) -> UOp:
  arrs, bshape = _index_arrays(adv)
  axes = [a for a, _ in adv]
  sizes = [u.shape[a] for a in axes]
  rest = [a for a in range(u.ndim) if a not in axes]
  total = math.prod(sizes)
  if total == 0 and math.prod(bshape) > 0 and mode != 'fill':
    raise IndexError(f"cannot take indices of shape {bshape} from axes of size {tuple(sizes)}: "
                     "an axis of size 0 has no elements")
  flat, valid = _flat_index(arrs, sizes, mode)
  data = u.permute(axes + rest).reshape((total,) + tuple(u.shape[a] for a in rest))
  if mode == 'fill':
    flat = core.where(valid, flat, total)
    data = _append_fill_row(data, default_fill(u.dtype) if fill_value is None else fill_value)
  idx = broadcast_uop((core.astype(flat, dtypes.int32) if total < 2 ** 31 else flat).uop, bshape)
  out = UOp(Ops.GATHER, u.dtype, (data, idx))
  if not adjacent: return out
  nb, before = len(bshape), sum(1 for a in rest if a < axes[0])
  perm = list(range(nb, nb + before)) + list(range(nb)) + list(range(nb + before, out.ndim))
  return out.permute(perm)

def _append_fill_row(data: UOp, fill_value) -> UOp:
  """`data` with one more row along axis 0 holding `fill_value` (where out-of-range reads land)."""
  n = data.shape[0]
  padded = data.pad(((0, 1),) + ((0, 0),) * (data.ndim - 1))
  last = UOp(Ops.IOTA, dtypes.int32, (), (padded.shape, 0)).alu(Ops.CMPEQ, UOp.const(n, dtypes.int32, padded.shape))
  return UOp(Ops.WHERE, data.dtype, (last, UOp.const(fill_value, data.dtype, padded.shape), padded))

def index(x, idx, mode: str = 'clip', fill_value=None) -> Array:
  """`x[idx]` with JAX's out-of-range rule `mode`: 'clip' clamps, 'fill' reads `fill_value` instead."""
  x = asarray(x)
  entries = _entries(idx, x.shape)
  if all(e == ('slice', _FULL) for e in entries): return x
  if any(e[0] in ('adv', 'newadv') for e in entries):
    entries = [('adv', e[1]) if e[0] == 'int' else e for e in entries]
  u, adv, out_of_range = _basic(x.uop, entries)
  if out_of_range and mode == 'fill':
    return Array(UOp.const(default_fill(x.dtype) if fill_value is None else fill_value, x.dtype, u.shape), x.weak)
  if adv:
    kinds = [k for k, e in enumerate(entries) if e[0] in ('adv', 'newadv')]
    u = _gather(u, adv, kinds == list(range(kinds[0], kinds[0] + len(kinds))), mode, fill_value)
  return Array(u, x.weak)

def getitem(x: Array, idx) -> Array:
  """`Array.__getitem__`: numpy indexing with JAX's clamping of out-of-range indices.

  >>> import tinyjx.numpy as jnp
  >>> jnp.arange(10)[1:8:3].tolist(), jnp.arange(6).reshape(2, 3)[:, [2, 0]].tolist()
  ([1, 4, 7], [[2, 0], [5, 3]])
  """
  return index(x, idx, 'clip')

# --- x.at[idx] ---
_GET_MODES = {None: 'clip', 'clip': 'clip', 'promise_in_bounds': 'clip', 'fill': 'fill', 'drop': 'fill'}
_SET_MODES = {None: 'drop', 'drop': 'drop', 'fill': 'drop', 'promise_in_bounds': 'drop', 'clip': 'clip'}

def _mode(mode, table: dict, what: str) -> str:
  if mode not in table:
    raise ValueError(f"{what}: mode={mode!r} is not one of {', '.join(repr(m) for m in table if m)} or None")
  return table[mode]

def scatter(x, idx, values, how: str, mode=None) -> Array:
  """`x` with `values` combined into `x[idx]` by `how` ('set', 'add', 'mul', 'min', 'max'); out-of-range
  updates are dropped (mode 'clip' clamps them instead) and duplicate indices accumulate."""
  x = asarray(x)
  oob = _mode(mode, _SET_MODES, f"x.at[idx].{how}")
  if (rows := _row_index(idx, x, oob)) is not None:
    upd = _fit_updates(asarray(values), x.dtype, rows.shape + x.shape[1:])
    return Array(UOp(Ops.SCATTER, x.dtype, (x.uop, rows.uop, upd), how), x.weak)
  positions = Array(UOp(Ops.IOTA, dtypes.int32, (), ((x.size,), 0)).reshape(x.shape))
  sel = index(positions, idx, 'clip' if oob == 'clip' else 'fill', -1)
  upd = _fit_updates(asarray(values), x.dtype, sel.shape)
  n = sel.size
  srcs = (x.uop.reshape((x.size,)), sel.uop.reshape((n,)), upd.reshape((n,)))
  return Array(UOp(Ops.SCATTER, x.dtype, srcs, how).reshape(x.shape), x.weak)

def _row_index(idx, x: Array, oob: str) -> Array | None:
  """For an index that is one integer array along axis 0 (`x.at[i]`, the rest whole): the rows it updates, each
  update a whole row of x (SCATTER's own form, its updates the size of the rows). Negative rows count from the end;
  past either end they are dropped (moved to x.shape[0], which SCATTER skips) or, with mode 'clip', clamped. The
  general path writes every element through its flat position instead, and then reshapes a copy of x's size."""
  if x.ndim == 0 or isinstance(idx, tuple) and len(idx) != 1: return None
  entries = _entries(idx, x.shape)
  if entries[0][0] != 'adv' or any(e != ('slice', _FULL) for e in entries[1:]): return None
  (arr,), _ = _index_arrays([(0, entries[0][1])])
  if arr.ndim == 0: return None
  flat, valid = _flat_index([arr], [x.shape[0]], 'clip' if oob == 'clip' else 'fill')
  return flat if valid is None else core.where(valid, flat, x.shape[0])

def _fit_updates(v: Array, dt, shape: tuple) -> UOp:
  """The updates cast to x's dtype and broadcast to the indexed shape (extra leading size-1 dims dropped)."""
  u = core.astype(v, dt).uop if v.dtype is not dt else v.uop
  while u.ndim > len(shape) and u.shape[0] == 1: u = u.reshape(u.shape[1:])
  fits = u.ndim <= len(shape) and all(a in (1, b) for a, b in zip(reversed(u.shape), reversed(shape)))
  if not fits:
    raise ValueError(f"x.at[idx]: updates of shape {v.shape} cannot be broadcast to the indexed shape {tuple(shape)}; "
                     "reshape the updates to fit x[idx]")
  return u.broadcast_to(shape)

class _IndexUpdateRef:
  """`x.at[idx]`, ready for one of `set`, `add`, `multiply`, `min`, `max`, `divide`, `power`, `get`."""
  __slots__ = ('array', 'index')
  def __init__(self, array, idx): self.array, self.index = array, idx
  def __repr__(self): return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

  def get(self, *, mode=None, fill_value=None, indices_are_sorted=False, unique_indices=False) -> Array:
    """`x[idx]`; mode 'fill' reads `fill_value` (default NaN / INT_MIN ...) for out-of-range indices."""
    return index(self.array, self.index, _mode(mode, _GET_MODES, "x.at[idx].get"), fill_value)
  def set(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False) -> Array:
    """`x[idx] = values`, functionally: `jnp.zeros(3).at[1].set(5.0)` is `[0, 5, 0]`."""
    return scatter(self.array, self.index, values, 'set', mode)
  def add(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False) -> Array:
    """`x[idx] += values`; repeated indices add up: `jnp.zeros(2).at[jnp.array([0, 0])].add(1.0)` is `[2, 0]`."""
    return scatter(self.array, self.index, values, 'add', mode)
  def multiply(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False) -> Array:
    """`x[idx] *= values` (repeated indices multiply)."""
    return scatter(self.array, self.index, values, 'mul', mode)
  mul = multiply
  def min(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False) -> Array:  # noqa: A003
    """`x[idx] = minimum(x[idx], values)`."""
    return scatter(self.array, self.index, values, 'min', mode)
  def max(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False) -> Array:  # noqa: A003
    """`x[idx] = maximum(x[idx], values)`."""
    return scatter(self.array, self.index, values, 'max', mode)
  def divide(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False) -> Array:
    """`x[idx] /= values` (as JAX: x divided by the product of the values scattered onto ones)."""
    x = asarray(self.array)
    return core.divide(x, scatter(core.ones_like(x), self.index, values, 'mul', mode))
  def power(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False) -> Array:
    """`x[idx] **= values` (as JAX: x to the product of the values scattered onto ones)."""
    x = asarray(self.array)
    return core.power(x, scatter(core.ones_like(x), self.index, values, 'mul', mode))

class IndexUpdateHelper:
  """`x.at`: index it (`x.at[idx]`) to update a copy of x. tinyjx arrays are immutable, as in JAX.

  >>> import tinyjx.numpy as jnp
  >>> jnp.zeros(4).at[jnp.array([1, 1, 3])].add(1.0).tolist()
  [0.0, 2.0, 0.0, 1.0]
  """
  __slots__ = ('array',)
  def __init__(self, array): self.array = array
  def __getitem__(self, idx) -> _IndexUpdateRef: return _IndexUpdateRef(self.array, idx)
  def __repr__(self): return f"_IndexUpdateHelper({self.array!r})"

# --- take and friends ---
def _ravel(a: Array) -> Array: return Array(a.uop.reshape((a.size,)), a.weak)

def _int_indices(indices, name: str) -> Array:
  i = asarray(indices)
  if not dtypes.is_int(i.dtype): raise TypeError(f"{name}: indices must be integers, got {i.dtype}")
  return i

def _take_mode(mode, name: str) -> str:
  if mode == 'raise':
    raise NotImplementedError(f"{name}(mode='raise') is not supported (it needs every index concrete); "
                              "use mode='fill', 'clip' or 'wrap'")
  if mode not in (None, 'fill', 'clip', 'wrap', 'promise_in_bounds', 'drop'):
    raise ValueError(f"{name}: mode={mode!r} is not one of 'fill', 'clip', 'wrap' or None")
  return {None: 'fill', 'drop': 'fill', 'promise_in_bounds': 'clip'}.get(mode, mode)

def take(a, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False,
         fill_value=None) -> Array:
  """Elements of `a` at `indices` along `axis` (None: of the flattened array).

  mode 'fill' (the default, as JAX) reads `fill_value` (NaN, INT_MIN, ...) out of range; 'clip' clamps;
  'wrap' takes indices modulo the axis size. Negative indices count from the end.

  >>> import tinyjx.numpy as jnp
  >>> jnp.take(jnp.array([4., 5., 6.]), jnp.array([2, -1, 7])).tolist()
  [6.0, 6.0, nan]
  """
  a = asarray(a)
  if axis is None: a, axis = _ravel(a), 0
  ax = normalize_axis(axis, a.ndim)
  i, m = _int_indices(indices, 'take'), _take_mode(mode, 'take')
  if m == 'wrap': i, m = _wrap(i, a.shape[ax], 'take'), 'clip'
  elif m == 'clip' and a.shape[ax] > 0: i = core.clip(i, 0, a.shape[ax] - 1)   # as JAX: negatives clip to 0, no wrap
  return index(a, (_FULL,) * ax + (i,), m, fill_value)

def _wrap(i: Array, n: int, name: str) -> Array:
  if n == 0: raise IndexError(f"{name}(mode='wrap') cannot wrap indices into an axis of size 0")
  return core.mod(i, n)

def _iota_index(shape: tuple, axis: int) -> Array:
  """arange(shape[axis]) laid along `axis` of an array of rank len(shape) (size-1 elsewhere)."""
  n = shape[axis]
  u = UOp(Ops.IOTA, dtypes.int32, (), ((n,), 0))
  return Array(u.reshape(tuple(n if d == axis else 1 for d in range(len(shape)))))

def _along_axis_index(arr: Array, idx: Array, axis: int, name: str) -> tuple:
  if idx.ndim != arr.ndim:
    raise ValueError(f"{name}: indices must have as many dimensions as arr ({arr.ndim}, shape {arr.shape}), "
                     f"got {idx.ndim} (shape {idx.shape})")
  return tuple(idx if d == axis else _iota_index(arr.shape, d) for d in range(arr.ndim))

def take_along_axis(arr, indices, axis, mode=None, fill_value=None) -> Array:
  """`arr` gathered along `axis` at `indices` (same rank as arr; other axes broadcast), as numpy.

  >>> import tinyjx.numpy as jnp
  >>> x = jnp.array([[10, 30, 20], [60, 40, 50]])
  >>> jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1).tolist()
  [[10, 20, 30], [40, 50, 60]]
  """
  arr, idx = asarray(arr), _int_indices(indices, 'take_along_axis')
  if axis is None: arr, idx, axis = _ravel(arr), _ravel(idx), 0
  ax = normalize_axis(axis, arr.ndim)
  m = _take_mode(mode, 'take_along_axis')
  if m == 'wrap': idx, m = _wrap(idx, arr.shape[ax], 'take_along_axis'), 'clip'
  return index(arr, _along_axis_index(arr, idx, ax, 'take_along_axis'), m, fill_value)

def put_along_axis(arr, indices, values, axis, inplace: bool = True, *, mode=None) -> Array:
  """`arr` with `values` written at `indices` along `axis` (pass inplace=False: JAX arrays are immutable)."""
  if inplace:
    raise ValueError("jnp.put_along_axis cannot update arrays in place (they are immutable); pass inplace=False")
  arr, idx = asarray(arr), _int_indices(indices, 'put_along_axis')
  if axis is None: arr, idx, axis = _ravel(arr), _ravel(idx), 0
  ax = normalize_axis(axis, arr.ndim)
  return scatter(arr, _along_axis_index(arr, idx, ax, 'put_along_axis'), values, 'set', mode)

# --- sorting ---
def argsort(a, axis: int | None = -1, kind=None, order=None, *, stable: bool = True, descending: bool = False) -> Array:
  """Indices that sort `a` along `axis` (None: flattened); always stable, so ties keep their order.

  >>> import tinyjx.numpy as jnp
  >>> jnp.argsort(jnp.array([3, 1, 2, 1])).tolist()
  [1, 3, 2, 0]
  """
  if order is not None: raise TypeError("argsort: order= (sorting structured arrays) is not supported")
  a = asarray(a)
  if axis is None: a, axis = _ravel(a), 0
  ax = normalize_axis(axis, a.ndim)
  if a.ndim == 0: raise ValueError("argsort needs an array of at least one dimension, got a 0-d array")
  if dtypes.is_complex(a.dtype):   # lexicographic, by the real part, then the imaginary part, as numpy and JAX
    parts = (core.real(a), core.imag(a))
    return lexsort(tuple(core.negative(p) if descending else p for p in reversed(parts)), ax)
  return Array(UOp(Ops.ARGSORT, dtypes.int32, (a.uop,), (ax, bool(descending))))

def sort(a, axis: int | None = -1, kind=None, order=None, *, stable: bool = True, descending: bool = False) -> Array:
  """`a` sorted along `axis` (None: flattened); NaNs sort to the end (to the front when descending).

  >>> import tinyjx.numpy as jnp
  >>> jnp.sort(jnp.array([[3, 1], [0, 2]]), axis=0).tolist()
  [[0, 1], [3, 2]]
  """
  a = asarray(a)
  if axis is None: a, axis = _ravel(a), 0
  perm = argsort(a, axis, kind, order, stable=stable, descending=descending)
  return Array(take_along_axis(a, perm, axis, mode='clip').uop, a.weak)

def lexsort(keys, axis: int = -1) -> Array:
  """Indices sorting by several keys; the last key is the primary one (numpy's lexsort).

  >>> import tinyjx.numpy as jnp
  >>> jnp.lexsort((jnp.array([2, 1, 0]), jnp.array([1, 0, 1]))).tolist()
  [1, 2, 0]
  """
  keys = [asarray(k) for k in keys]
  if not keys: raise TypeError("lexsort needs at least one key")
  perm = argsort(keys[0], axis)
  for k in keys[1:]:
    perm = take_along_axis(perm, argsort(take_along_axis(k, perm, axis, mode='clip'), axis), axis, mode='clip')
  return perm

def searchsorted(a, v, side: str = 'left', sorter=None, *, method: str = 'scan') -> Array:
  """Where `v` would go into the sorted 1-D `a` to keep it sorted (NaN sorts last), as int32 of v's shape.

  method 'compare_all' compares every pair; the others run a binary search of log2(len(a)) gathers.

  >>> import tinyjx.numpy as jnp
  >>> jnp.searchsorted(jnp.array([1., 2., 3.]), jnp.array([2., 0., 9.]), side='right').tolist()
  [2, 0, 3]
  """
  if side not in ('left', 'right'): raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
  if method not in ('scan', 'scan_unrolled', 'sort', 'compare_all'):
    raise ValueError(f"searchsorted: method must be 'scan', 'scan_unrolled', 'sort' or 'compare_all', got {method!r}")
  a, v = asarray(a), asarray(v)
  if a.ndim != 1: raise ValueError(f"searchsorted: a must be 1-D, got shape {a.shape}")
  if sorter is not None: a = take(a, sorter, mode='clip')
  (a, v), _, _ = core.promote(a, v)
  if dtypes.is_float(a.dtype) and method != 'compare_all': a, v = _order_keys(a), _order_keys(v)
  goes_after = _total_less if side == 'left' else lambda x, y: core.logical_not(_total_less(y, x))
  if method == 'compare_all':
    hits = goes_after(Array(a.uop.reshape((1,) * v.ndim + a.shape)), Array(v.uop.reshape(v.shape + (1,))))
    return core.sum(hits, axis=-1, dtype=dtypes.int32)
  return _binary_search(a, v, goes_after)

def _order_keys(x: Array) -> Array:
  """Integers in the order of numpy's sort of the floats `x` (NaN last, every NaN alike, -0 as 0): their bits, with
  the magnitude bits of negatives flipped. A binary search over them compares integers, one compare a step where a
  float compare that places NaN took three (searchsorted of 1M in 4096, jitted, with the branch-free step below:
  30 -> 8 ms)."""
  if x.dtype.itemsize < 4: x = core.astype(x, dtypes.float32)     # float16 and bfloat16: exact in float32
  it = dtypes.int64 if x.dtype.itemsize == 8 else dtypes.int32
  x = core_where(core.equal(x, 0), core.zeros_like(x), x)
  bits = Array(UOp(Ops.BITCAST, it, (x.uop,)))
  top = core.full_like(bits, np.iinfo(it.np).max)
  keys = core_where(core.less(bits, core.zeros_like(bits)), core.bitwise_xor(bits, top), bits)
  return core_where(core.isnan(x), top, keys)

def _total_less(x: Array, y: Array) -> Array:
  """x < y in numpy's sort order, where NaN is the largest value."""
  if not dtypes.is_float(x.dtype): return core.less(x, y)
  return core.logical_or(core.less(x, y), core.logical_and(core.isnan(y), core.logical_not(core.isnan(x))))

def _binary_search(a: Array, v: Array, goes_after) -> Array:
  """The count of entries of `a` that `v` goes after, by halving a window [base, base + size) whose sizes are known
  when tracing: each step reads one entry (always in range: no clamping, no test for an empty window) and moves
  base past the lower half where v goes after its last entry; log2(len(a)) + 1 reads."""
  n = a.shape[0]
  base = core.zeros(v.shape, dtypes.int32)
  if n == 0: return base
  size = n
  while size > 1:
    half = size // 2
    probe = index(a, (core.add(base, half - 1),), 'clip', None)
    # (base + half * step, not a where: C compilers branch on the where, which a random query mispredicts half the
    # time; the product is a flag, a shift and an add)
    base = core.add(base, core.multiply(core.astype(goes_after(probe, v), dtypes.int32), half))
    size -= half
  return core.add(base, core.astype(goes_after(index(a, (base,), 'clip', None), v), dtypes.int32))

# --- nonzero and friends ---
def _concrete_value(a: Array, name: str, fix: str) -> np.ndarray:
  if not a.uop.is_concrete:
    err = concretization_error(a.uop, name)
    raise type(err)(f"{err} {name} returns a shape that depends on the values; {fix}") from None
  return np.asarray(a)

def where(condition, x=None, y=None, *, size=None, fill_value=None):
  """`jnp.where`: with three arguments elementwise `x if condition else y` (`numpy.core.where`); with one, the
  indices where `condition` is true (`nonzero`, which needs a concrete condition unless `size` is given).

  >>> where(asarray([True, False]), 1, 2).tolist(), [i.tolist() for i in where(asarray([0, 3, 4]))]
  ([1, 2], [[1, 2]])
  """
  if x is None and y is None: return nonzero(condition, size=size, fill_value=fill_value)
  return core_where(condition, x, y)

def nonzero(a, *, size: int | None = None, fill_value=None) -> tuple:
  """Indices of the nonzero elements, one int32 array per axis.

  Without `size` the input must be concrete; with `size` (works under jit) the result has exactly `size`
  entries: the first `size` nonzeros, padded with `fill_value` (default 0; a scalar or one per axis).

  >>> import tinyjx.numpy as jnp
  >>> [i.tolist() for i in jnp.nonzero(jnp.array([[0, 3], [4, 0]]))]
  [[0, 1], [1, 0]]
  """
  a = asarray(a)
  if a.ndim == 0: raise ValueError("nonzero of a 0-d array is not allowed; use jnp.atleast_1d(x).nonzero()")
  if size is None:
    value = _concrete_value(a, "jnp.nonzero", "pass size= (and fill_value=) for a fixed number of indices, "
                            "or use jnp.where(cond, x, y) to keep the shape")
    return tuple(asarray(i.astype(np.int32)) for i in np.nonzero(value))
  return _nonzero_sized(a, operator.index(size), fill_value)

def _nonzero_sized(a: Array, size: int, fill_value) -> tuple:
  mask = core.not_equal(_ravel(a), 0) if a.dtype is not dtypes.bool_ else _ravel(a)
  count = core.cumsum(mask, dtype=dtypes.int32)
  slot = core.where(mask, core.subtract(count, 1), size)   # slots past the end are dropped by the scatter
  iota = Array(UOp(Ops.IOTA, dtypes.int32, (), ((a.size,), 0)))
  flat = scatter(core.zeros((size,), dtypes.int32), slot, iota, 'set')
  filled = core.less(Array(UOp(Ops.IOTA, dtypes.int32, (), ((size,), 0))), core.sum(mask, dtype=dtypes.int32))
  fills = fill_value if isinstance(fill_value, (tuple, list)) else [0 if fill_value is None else fill_value] * a.ndim
  if len(fills) != a.ndim:
    raise ValueError(f"nonzero: fill_value has {len(fills)} entries for an array of ndim {a.ndim}")
  coords = []
  for n, st, f in zip(a.shape, _strides(list(a.shape)), fills):
    c = core.floor_divide(flat, st) if st != 1 else flat
    c = core.mod(c, n) if n > 1 else core.zeros_like(c)
    coords.append(core.where(filled, c, core.asarray(f, dtypes.int32)))
  return tuple(coords)

def flatnonzero(a, *, size: int | None = None, fill_value=None) -> Array:
  """Indices of the nonzero elements of the flattened array (`size` as in `nonzero`)."""
  return nonzero(_ravel(asarray(a)), size=size, fill_value=fill_value)[0]

def argwhere(a, *, size: int | None = None, fill_value=None) -> Array:
  """Indices of the nonzero elements as rows of a (count, ndim) int32 array (`size` as in `nonzero`).

  >>> import tinyjx.numpy as jnp
  >>> jnp.argwhere(jnp.array([[0, 3], [4, 0]])).tolist()
  [[0, 1], [1, 0]]
  """
  a = asarray(a)
  if a.ndim == 0:
    n = size if size is not None else int(bool(_concrete_value(a, "jnp.argwhere", "pass size=")))
    return core.zeros((n, 0), dtypes.int32)
  cols = nonzero(a, size=size, fill_value=fill_value)
  return Array(_stack_last([c.uop for c in cols]))

def _stack_last(us: list[UOp]) -> UOp:
  """Stack equal-shape 1-D uops as the columns of a 2-D array (pad each into place and add: no overlap)."""
  k, out = len(us), None
  for j, u in enumerate(us):
    col = u.reshape(u.shape + (1,)).pad(((0, 0), (j, k - 1 - j)))
    out = col if out is None else out.alu(Ops.ADD, col)
  return out

def unravel_index(indices, shape) -> tuple:
  """The coordinates in an array of `shape` of flat `indices` (negative ones count from the end)."""
  i = _int_indices(indices, 'unravel_index')
  shape = shape_tuple(shape)
  total = math.prod(shape)
  if total: i = core.where(core.less(i, 0), core.add(i, total), i)
  out = []
  for n, st in zip(shape, _strides(list(shape))):
    c = core.floor_divide(i, st) if st != 1 else i
    out.append(core.mod(c, n) if n > 1 else core.zeros_like(c))
  return tuple(out)

def unique(ar, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False, axis=None,
           *, equal_nan: bool = True):
  """Sorted unique values (concrete input only: the count depends on the values), as numpy's unique.

  >>> import tinyjx.numpy as jnp
  >>> jnp.unique(jnp.array([3, 1, 3, 2])).tolist()
  [1, 2, 3]
  """
  a = asarray(ar)
  value = _concrete_value(a, "jnp.unique", "compute it outside the transformed function")
  res = np.unique(value, return_index=True, return_inverse=True, return_counts=True, axis=axis, equal_nan=equal_nan)
  vals, first, inverse, counts = res
  if axis is None: inverse = inverse.reshape(a.shape)
  out = [asarray(vals, dtype=a.dtype)]
  for want, v in ((return_index, first), (return_inverse, inverse), (return_counts, counts)):
    if want: out.append(asarray(v.astype(np.int32)))
  return out[0] if len(out) == 1 else tuple(out)

# --- diagonals ---
def diagonal_uop(u: UOp, offset: int, axis1: int, axis2: int) -> UOp:
  """The diagonal of axes (axis1, axis2) moved to the last axis, by movement ops: the (L, L) block is
  flattened, padded by L and viewed as (L, L + 1), whose first column is the diagonal."""
  rest = [i for i in range(u.ndim) if i not in (axis1, axis2)]
  u = u.permute(rest + [axis1, axis2])
  lead, (n, m) = u.shape[:-2], u.shape[-2:]
  r0, c0 = (0, builtins.min(offset, m)) if offset >= 0 else (builtins.min(-offset, n), 0)
  size = builtins.max(0, builtins.min(n - r0, m - c0))
  keep = tuple((0, s) for s in lead)
  u = u.shrink(keep + ((r0, r0 + size), (c0, c0 + size)))
  if size == 0: return u.reshape(lead + (0,))
  u = u.reshape(lead + (size * size,)).pad(((0, 0),) * len(lead) + ((0, size),))
  u = u.reshape(lead + (size, size + 1)).shrink(keep + ((0, size), (0, 1)))
  return u.reshape(lead + (size,))

def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
  """The diagonal (shifted by `offset`) of axes axis1 and axis2, appended as the last axis (a view).

  >>> import tinyjx.numpy as jnp
  >>> jnp.diagonal(jnp.arange(9).reshape(3, 3), offset=1).tolist()
  [1, 5]
  """
  a = asarray(a)
  if a.ndim < 2: raise ValueError(f"diagonal needs an array of at least 2 dimensions, got shape {a.shape}")
  ax1, ax2 = normalize_axis(axis1, a.ndim, 'axis1'), normalize_axis(axis2, a.ndim, 'axis2')
  if ax1 == ax2: raise ValueError(f"diagonal: axis1 and axis2 must differ, both are {ax1}")
  return Array(diagonal_uop(a.uop, operator.index(offset), ax1, ax2), a.weak)

def diag(v, k: int = 0) -> Array:
  """A 2-D array with the 1-D `v` on diagonal `k`, or the diagonal `k` of a 2-D `v`.

  >>> import tinyjx.numpy as jnp
  >>> jnp.diag(jnp.array([1, 2])).tolist()
  [[1, 0], [0, 2]]
  """
  v = asarray(v)
  if v.ndim == 2: return diagonal(v, k)
  if v.ndim != 1: raise ValueError(f"diag needs a 1-D or 2-D array, got shape {v.shape}")
  n, k = v.shape[0], operator.index(k)
  u = v.uop.reshape((n, 1)).pad(((0, 0), (0, n))).reshape((n * (n + 1),)).shrink(((0, n * n),)).reshape((n, n))
  u = u.pad(((0, k), (k, 0)) if k >= 0 else ((-k, 0), (0, -k)))
  return Array(u, v.weak)

def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None) -> Array:
  """Sum of the diagonal `offset` of axes axis1 and axis2.

  >>> import tinyjx.numpy as jnp
  >>> int(jnp.trace(jnp.arange(9).reshape(3, 3)))
  12
  """
  return core.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
