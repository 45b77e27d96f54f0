"""numpy.shape: reshaping, transposing, broadcasting, joining, splitting, padding and reordering arrays.

Every function here returns a view: its graph is movement UOps (RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP)
over the input, never a copy. Joining (concatenate, stack, pad with edge or reflected values) places each
piece with PAD and sums the pieces with ADD (OR for bool); the pieces cover disjoint ranges, so the sum is
exact and the lowering fuses it into one kernel. Periodic padding (reflect, symmetric, wrap) and roll are a
window (SHRINK) of the input tiled with RESHAPE and EXPAND. The only exception is `repeat` with an array of
repeats, which gathers along the axis with concrete indices. Weak types pass through unchanged.
"""
from __future__ import annotations
import builtins, math, operator
import numpy as np
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops
from tinyjx.numpy.core import (asarray, promote, normalize_axis, normalize_axes, broadcast_shapes, broadcast_to,
                               join_along, axis_pads, shape_arg)

__all__ = ['reshape', 'ravel', 'transpose', 'permute_dims', 'matrix_transpose', 'swapaxes', 'moveaxis', 'expand_dims',
           'squeeze', 'broadcast_to', 'broadcast_arrays', 'concatenate', 'stack', 'vstack', 'row_stack', 'hstack',
           'dstack', 'column_stack', 'append', 'split', 'array_split', 'vsplit', 'hsplit', 'dsplit', 'pad', 'tile',
           'repeat', 'flip', 'fliplr', 'flipud', 'roll', 'rot90', 'atleast_1d', 'atleast_2d', 'atleast_3d', 'shape',
           'ndim', 'size']

def _view(a: Array, u: UOp) -> Array: return Array(u, a.weak)

def _axis_bounds(shape: tuple, axis: int, start: int, stop: int) -> tuple:
  return tuple((start, stop) if d == axis else (0, s) for d, s in enumerate(shape))

def _iota(shape: tuple, axis: int) -> UOp: return UOp(Ops.IOTA, dtypes.int32, (), (tuple(shape), axis))

# --- reshape ---
def _reshape_target(a: Array, shape) -> tuple:
  """`shape` with its one -1 inferred; the error names both shapes and sizes."""
  try:
    shape = tuple(operator.index(s) for s in shape) if isinstance(shape, (tuple, list)) else (operator.index(shape),)
  except TypeError:
    raise TypeError(f"reshape: shape must be an int or a sequence of ints, got {shape!r}") from None
  if shape.count(-1) > 1: raise ValueError(f"reshape: can only specify one unknown dimension (-1), got {shape}")
  if builtins.any(s < -1 for s in shape): raise ValueError(f"reshape: negative dimension in shape {shape}")
  known = math.prod(s for s in shape if s != -1)
  if -1 in shape and known and a.size % known == 0: shape = tuple(a.size // known if s == -1 else s for s in shape)
  if -1 in shape or math.prod(shape) != a.size:
    want = "unknown" if -1 in shape else math.prod(shape)
    raise ValueError(f"cannot reshape array of shape {a.shape} (size {a.size}) into shape {shape} (size {want})")
  return shape

def reshape(a, shape=None, order: str = 'C', *, newshape=None, copy=None) -> Array:
  """A view of `a` with a new shape of the same size; one dimension may be -1 (inferred).

  >>> reshape(arange(6), (2, -1)).shape
  (2, 3)
  """
  if order != 'C': raise NotImplementedError(f"reshape: only order='C' is supported, got order={order!r}")
  shape = newshape if shape is None else shape
  if shape is None: raise TypeError("reshape() needs a shape")
  a = asarray(a)
  return _view(a, a.uop.reshape(_reshape_target(a, shape)))

def method_reshape(self, *shape, order: str = 'C') -> Array:
  """`x.reshape(2, 3)` or `x.reshape((2, 3))`."""
  return reshape(self, shape[0] if len(shape) == 1 else shape, order)

def ravel(a, order: str = 'C') -> Array:
  """The elements of `a` as a 1-d view, in row-major order.

  >>> ravel(zeros((2, 3))).shape
  (6,)
  """
  a = asarray(a)
  return reshape(a, (a.size,), order)

def method_flatten(self, order: str = 'C') -> Array: return ravel(self, order)

# --- axes ---
def transpose(a, axes=None) -> Array:
  """Permute the axes of `a` (reverse them when `axes` is None).

  >>> transpose(zeros((2, 3, 4)), (1, 0, 2)).shape
  (3, 2, 4)
  """
  a = asarray(a)
  if axes is None: return _view(a, a.uop.permute(tuple(reversed(range(a.ndim)))))
  perm = tuple(normalize_axis(ax, a.ndim, "transpose axis") for ax in axes)
  if sorted(perm) != list(range(a.ndim)):
    raise ValueError(f"transpose: axes {tuple(axes)} are not a permutation of the {a.ndim} axes of an array of "
                     f"shape {a.shape}")
  return _view(a, a.uop.permute(perm))
permute_dims = transpose

def method_transpose(self, *axes) -> Array:
  """`x.transpose()`, `x.transpose(1, 0)` or `x.transpose((1, 0))`."""
  if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))): axes = axes[0]
  return transpose(self, axes if axes else None)

def matrix_transpose(x) -> Array:
  """Swap the last two axes (`x.mT`)."""
  return swapaxes(x, -1, -2)

def swapaxes(a, axis1: int, axis2: int) -> Array:
  """Exchange two axes of `a`.

  >>> swapaxes(zeros((2, 3, 4)), 0, -1).shape
  (4, 3, 2)
  """
  a = asarray(a)
  perm = list(range(a.ndim))
  i, j = normalize_axis(axis1, a.ndim, "axis1"), normalize_axis(axis2, a.ndim, "axis2")
  perm[i], perm[j] = j, i
  return _view(a, a.uop.permute(perm))

def moveaxis(a, source, destination) -> Array:
  """Move axes `source` to positions `destination` (ints or sequences of equal length), keeping the others' order.

  >>> moveaxis(zeros((2, 3, 4)), 0, -1).shape
  (3, 4, 2)
  """
  a = asarray(a)
  src = (source,) if not isinstance(source, (tuple, list)) else tuple(source)
  dst = (destination,) if not isinstance(destination, (tuple, list)) else tuple(destination)
  if len(src) != len(dst):
    raise ValueError(f"moveaxis: source {source} and destination {destination} need the same number of axes")
  src = [normalize_axis(s, a.ndim, "source") for s in src]
  dst = [normalize_axis(d, a.ndim, "destination") for d in dst]
  if len(set(src)) != len(src) or len(set(dst)) != len(dst):
    raise ValueError(f"moveaxis: repeated axis in source {source} or destination {destination}")
  rest = [i for i in range(a.ndim) if i not in src]
  perm = [None] * a.ndim
  for s, d in zip(src, dst): perm[d] = s
  it = iter(rest)
  return _view(a, a.uop.permute(tuple(p if p is not None else next(it) for p in perm)))

def expand_dims(a, axis) -> Array:
  """Insert size-1 axes at the positions `axis` (an int or a tuple) of the result.

  >>> expand_dims(zeros((2, 3)), (0, -1)).shape
  (1, 2, 3, 1)
  """
  a = asarray(a)
  axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
  out_ndim = a.ndim + len(axes)
  axes = normalize_axes(axes, out_ndim)
  dims = iter(a.shape)
  return _view(a, a.uop.reshape(tuple(1 if i in axes else next(dims) for i in range(out_ndim))))

def squeeze(a, axis=None) -> Array:
  """Remove size-1 axes (all of them, or those in `axis`); squeezing an axis whose size is not 1 is an error.

  >>> squeeze(zeros((1, 3, 1)), 0).shape
  (3, 1)
  """
  a = asarray(a)
  if axis is None: axes = tuple(i for i, s in enumerate(a.shape) if s == 1)
  else: axes = normalize_axes(axis, a.ndim)
  for i in axes:
    if a.shape[i] != 1:
      raise ValueError(f"squeeze: cannot squeeze axis {i} of an array of shape {a.shape}: its size is "
                       f"{a.shape[i]}, not 1")
  return _view(a, a.uop.reshape(tuple(s for i, s in enumerate(a.shape) if i not in axes)))

# --- broadcasting ---
def broadcast_arrays(*args) -> list[Array]:
  """The arguments broadcast to their common shape."""
  arrs = [asarray(a) for a in args]
  shape = broadcast_shapes(*[a.shape for a in arrs], names=[f"args[{i}]" for i in range(len(arrs))])
  return [broadcast_to(a, shape) for a in arrs]

# --- joining ---
def concatenate(arrays, axis=0, dtype=None) -> Array:
  """Join arrays along an existing axis (`axis=None` flattens them first); dtypes promote as in JAX.

  >>> concatenate([zeros((2, 3)), ones((1, 3))]).shape
  (3, 3)
  """
  arrs = [asarray(a) for a in arrays]
  if not arrs: raise ValueError("concatenate needs at least one array")
  if axis is None: arrs, axis = [ravel(a) for a in arrs], 0
  if builtins.any(a.ndim == 0 for a in arrs):
    raise ValueError(f"concatenate: zero-dimensional arrays cannot be concatenated (shapes "
                     f"{[a.shape for a in arrs]}); use stack, or atleast_1d first")
  if len({a.ndim for a in arrs}) != 1:
    raise ValueError(f"concatenate: arrays must have the same number of dimensions, got shapes "
                     f"{[a.shape for a in arrs]}")
  ax = normalize_axis(axis, arrs[0].ndim)
  rest = {a.shape[:ax] + a.shape[ax + 1:] for a in arrs}
  if len(rest) != 1:
    raise ValueError(f"concatenate: shapes must agree except along axis {ax}, got {[a.shape for a in arrs]}")
  arrs, dt, weak = promote(*arrs)
  if dtype is not None: dt, weak = dtypes.to_dtype(dtype), False
  return Array(join_along([a.uop.cast(dt) for a in arrs], ax), weak)

def stack(arrays, axis: int = 0, dtype=None) -> Array:
  """Join arrays of one shape along a new axis.

  >>> stack([zeros(3), ones(3)], axis=1).shape
  (3, 2)
  """
  arrs = [asarray(a) for a in arrays]
  if not arrs: raise ValueError("stack needs at least one array")
  if len({a.shape for a in arrs}) != 1:
    raise ValueError(f"stack: all input arrays must have the same shape, got {[a.shape for a in arrs]}")
  ax = normalize_axis(axis, arrs[0].ndim + 1)
  return concatenate([expand_dims(a, ax) for a in arrs], ax, dtype)

def vstack(tup, dtype=None) -> Array:
  """Stack arrays row-wise: 1-d arrays become rows, then concatenate along axis 0."""
  return concatenate([atleast_2d(a) for a in tup], 0, dtype)
row_stack = vstack

def hstack(tup, dtype=None) -> Array:
  """Stack arrays column-wise: along axis 1, or axis 0 for 1-d arrays."""
  arrs = [atleast_1d(a) for a in tup]
  return concatenate(arrs, 0 if arrs and arrs[0].ndim == 1 else 1, dtype)

def dstack(tup, dtype=None) -> Array:
  """Stack arrays depth-wise, along a third axis (arrays are raised to 3-d first)."""
  return concatenate([atleast_3d(a) for a in tup], 2, dtype)

def column_stack(tup) -> Array:
  """Stack 1-d arrays as columns of a 2-d array (2-d arrays join as they are)."""
  arrs = [asarray(a) for a in tup]
  return concatenate([a.reshape((a.size, 1)) if a.ndim < 2 else a for a in arrs], 1)

def append(arr, values, axis=None) -> Array:
  """`values` joined to the end of `arr` (both flattened when `axis` is None)."""
  return concatenate([arr, values], axis)

# --- splitting ---
def _split_bounds(n: int, indices) -> list[tuple[int, int]]:
  edges = [0] + [int(i) for i in indices] + [n]
  out = []
  for lo, hi in zip(edges, edges[1:]):
    start, stop, _ = slice(lo, hi).indices(n)
    out.append((start, builtins.max(start, stop)))
  return out

def _split(a, indices_or_sections, axis, equal: bool) -> list[Array]:
  a = asarray(a)
  ax = normalize_axis(axis, a.ndim)
  n = a.shape[ax]
  if isinstance(indices_or_sections, (int, np.integer)) or (hasattr(indices_or_sections, 'ndim') and
                                                             np.ndim(indices_or_sections) == 0):
    k = int(indices_or_sections)
    if k <= 0: raise ValueError(f"split: the number of sections must be positive, got {k}")
    if equal and n % k:
      raise ValueError(f"array split does not result in an equal division: axis {ax} of size {n} into {k} sections "
                       "(use array_split for unequal pieces)")
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    indices = np.cumsum(sizes)[:-1].tolist()
  else:
    indices = [int(i) for i in np.asarray(indices_or_sections).reshape(-1)]
  return [_view(a, a.uop.shrink(_axis_bounds(a.shape, ax, lo, hi))) for lo, hi in _split_bounds(n, indices)]

def split(ary, indices_or_sections, axis: int = 0) -> list[Array]:
  """Split into equal sections (an int that must divide the axis) or at the given indices.

  >>> [p.shape for p in split(arange(6), [1, 4])]
  [(1,), (3,), (2,)]
  """
  return _split(ary, indices_or_sections, axis, True)

def array_split(ary, indices_or_sections, axis: int = 0) -> list[Array]:
  """Like `split`, but an int number of sections need not divide the axis (the first pieces are one longer)."""
  return _split(ary, indices_or_sections, axis, False)

def vsplit(ary, indices_or_sections): return split(ary, indices_or_sections, 0)
def hsplit(ary, indices_or_sections):
  a = asarray(ary)
  return split(a, indices_or_sections, 1 if a.ndim > 1 else 0)
def dsplit(ary, indices_or_sections): return split(ary, indices_or_sections, 2)

# --- padding ---
def _as_pairs(x, ndim: int, name: str) -> list:
  """numpy's rule for pad_width and constant_values: a scalar, (before, after), or one pair per axis."""
  if ndim == 0: return []
  arr = np.asarray(x, dtype=object if not isinstance(x, np.ndarray) else None)
  try:
    pairs = np.broadcast_to(arr, (ndim, 2))
  except ValueError:
    raise ValueError(f"pad: {name} {x!r} must be a scalar, a (before, after) pair or one pair per axis "
                     f"({ndim} axes)") from None
  return [tuple(p) for p in pairs.tolist()]

def _pad_widths(pad_width, ndim: int) -> list[tuple[int, int]]:
  if isinstance(pad_width, Array): pad_width = np.asarray(pad_width)
  pairs = [(operator.index(lo), operator.index(hi)) for lo, hi in _as_pairs(pad_width, ndim, "pad_width")]
  if builtins.any(v < 0 for p in pairs for v in p):
    raise ValueError(f"pad: pad_width {pad_width!r} has a negative width")
  return pairs

def _pad_constant(a: Array, widths, constant_values) -> Array:
  u = a.uop
  if isinstance(constant_values, Array) and constant_values.ndim == 0:
    mask = UOp.const(True, dtypes.bool_, a.shape).pad(widths)
    c = constant_values.uop.cast(a.dtype).broadcast_to(mask.shape)
    return _view(a, UOp(Ops.WHERE, a.dtype, (mask, u.pad(widths), c)))
  for axis, ((lo, hi), (clo, chi)) in enumerate(zip(widths, _as_pairs(constant_values, a.ndim, "constant_values"))):
    n = u.shape[axis]
    u = u.pad(axis_pads(u.ndim, axis, lo, hi))
    idx = _iota(u.shape, axis)
    for c, width, side in ((clo, lo, Ops.CMPLT), (chi, hi, None)):
      c = UOp.const(c, a.dtype, u.shape)
      if not width or _is_plain_zero(c.arg[0]): continue
      if side is Ops.CMPLT: cond = idx.alu(Ops.CMPLT, UOp.const(lo, dtypes.int32, u.shape))
      else: cond = UOp.const(lo + n - 1, dtypes.int32, u.shape).alu(Ops.CMPLT, idx)
      u = UOp(Ops.WHERE, a.dtype, (cond, c, u))
  return _view(a, u)

def _is_plain_zero(v) -> bool: return v == 0 and not (isinstance(v, float) and math.copysign(1.0, v) < 0)

def _tile_axis(u: UOp, axis: int, reps: int) -> UOp:
  """`u` repeated `reps` times end to end along `axis` (RESHAPE, EXPAND, RESHAPE: a view)."""
  s = u.shape
  grown = u.reshape(s[:axis] + (1,) + s[axis:]).expand(s[:axis] + (reps,) + s[axis:])
  return grown.reshape(s[:axis] + (reps * s[axis],) + s[axis + 1:])

def _periodic_window(period: UOp, axis: int, start: int, length: int) -> UOp:
  """ext[start:start+length] along `axis`, where ext[k] = period[k mod p] for every integer k."""
  p = period.shape[axis]
  s0 = start % p
  reps = -(-(s0 + length) // p)
  return _tile_axis(period, axis, reps).shrink(_axis_bounds(period.shape[:axis] + (reps * p,) + period.shape[axis + 1:],
                                                            axis, s0, s0 + length))

def _slice_axis(u: UOp, axis: int, start: int, stop: int) -> UOp:
  return u.shrink(_axis_bounds(u.shape, axis, start, stop))

def _pad_axis(u: UOp, axis: int, lo: int, hi: int, mode: str) -> UOp:
  n = u.shape[axis]
  if not lo and not hi: return u
  if n == 0: raise ValueError(f"pad: cannot extend the empty axis {axis} with mode {mode!r}; only mode='constant' can")
  if mode == 'edge' or (mode == 'reflect' and n == 1):
    first, last = _slice_axis(u, axis, 0, 1), _slice_axis(u, axis, n - 1, n)
    grow = lambda e, k: e.expand(e.shape[:axis] + (k,) + e.shape[axis + 1:])  # noqa: E731
    return join_along([grow(first, lo), u, grow(last, hi)], axis)
  if mode == 'wrap': period = u
  elif mode == 'symmetric': period = join_along([u, u.flip((axis,))], axis)
  else: period = join_along([u, _slice_axis(u, axis, 1, n - 1).flip((axis,))], axis)  # reflect
  return _periodic_window(period, axis, -lo, lo + n + hi)

PAD_MODES = ('constant', 'edge', 'reflect', 'symmetric', 'wrap', 'empty')

def pad(array, pad_width, mode: str = 'constant', **kwargs) -> Array:
  """Pad an array: `mode` is 'constant' (with `constant_values`), 'edge', 'reflect', 'symmetric' or 'wrap'.

  `pad_width` is an int, a (before, after) pair, or one pair per axis; a view of the input, never a copy.

  >>> pad(arange(3), (1, 2), mode='reflect').tolist()
  [1, 0, 1, 2, 1, 0]
  """
  a = asarray(array)
  widths = _pad_widths(pad_width, a.ndim)
  if mode not in PAD_MODES:
    raise NotImplementedError(f"pad: mode {mode!r} is not supported; supported modes are {', '.join(PAD_MODES)}")
  allowed = {'constant': {'constant_values'}, 'reflect': {'reflect_type'}, 'symmetric': {'reflect_type'}}
  allowed = allowed.get(mode, set())
  if set(kwargs) - allowed:
    raise TypeError(f"pad: unexpected keyword arguments {sorted(set(kwargs) - allowed)} for mode {mode!r}")
  if kwargs.get('reflect_type', 'even') != 'even':
    raise NotImplementedError(f"pad: reflect_type={kwargs['reflect_type']!r} is not supported, only 'even'")
  if mode in ('constant', 'empty'): return _pad_constant(a, widths, kwargs.get('constant_values', 0))
  u = a.uop
  for axis, (lo, hi) in enumerate(widths): u = _pad_axis(u, axis, lo, hi, mode)
  return _view(a, u)

# --- repeating and reordering ---
def tile(A, reps) -> Array:
  """`A` repeated `reps` times along each axis (reps and A's shape are padded with leading 1s to one length).

  >>> tile(arange(2), (2, 2)).tolist()
  [[0, 1, 0, 1], [0, 1, 0, 1]]
  """
  a = asarray(A)
  reps = (operator.index(reps),) if not isinstance(reps, (tuple, list)) else tuple(operator.index(r) for r in reps)
  if builtins.any(r < 0 for r in reps): raise ValueError(f"tile: reps {reps} must not be negative")
  nd = builtins.max(len(reps), a.ndim)
  reps, shape = (1,) * (nd - len(reps)) + reps, (1,) * (nd - a.ndim) + a.shape
  inter = tuple(d for s in shape for d in (1, s))
  grown = a.uop.reshape(inter).expand(tuple(d for r, s in zip(reps, shape) for d in (r, s)))
  return _view(a, grown.reshape(tuple(r * s for r, s in zip(reps, shape))))

def repeat(a, repeats, axis=None, *, total_repeat_length=None) -> Array:
  """Repeat each element `repeats` times along `axis` (None: flattened first).

  `repeats` is an int (a view) or a concrete array with one count per element (a gather).
  `total_repeat_length` truncates the result or repeats its last element to that length, as in JAX.

  >>> repeat(arange(3), 2).tolist()
  [0, 0, 1, 1, 2, 2]
  """
  a = asarray(a)
  if axis is None: a, axis = ravel(a), 0
  ax = normalize_axis(axis, a.ndim)
  n = a.shape[ax]
  counts = np.asarray(repeats).reshape(-1) if not isinstance(repeats, Array) else \
    np.asarray(repeats.concrete_numpy("jnp.repeat with an array of repeats (pass total_repeat_length or an int)")).reshape(-1)
  if counts.size == 0: counts = counts.astype(np.int64)
  if counts.dtype.kind not in 'iub': raise TypeError(f"repeat: repeats must be integers, got {counts.dtype}")
  if (counts < 0).any(): raise ValueError(f"repeat: repeats must not be negative, got {repeats!r}")
  if counts.size == 1 and total_repeat_length is None:
    r, s = int(counts[0]), a.shape
    grown = a.uop.reshape(s[:ax + 1] + (1,) + s[ax + 1:]).expand(s[:ax + 1] + (r,) + s[ax + 1:])
    return _view(a, grown.reshape(s[:ax] + (n * r,) + s[ax + 1:]))
  if counts.size not in (1, n):
    raise ValueError(f"repeat: repeats has {counts.size} entries but axis {ax} of shape {a.shape} has {n} elements")
  idx = np.repeat(np.arange(n), np.broadcast_to(counts, (n,)))
  if total_repeat_length is not None:
    idx = np.concatenate([idx, np.full(builtins.max(total_repeat_length - idx.size, 0), idx[-1] if idx.size else 0)])
    idx = idx[:total_repeat_length]
  moved = moveaxis(a, ax, 0)
  taken = UOp(Ops.GATHER, a.dtype, (moved.uop, asarray(idx.astype(np.int32)).uop))
  return moveaxis(_view(a, taken), 0, ax)

def flip(m, axis=None) -> Array:
  """Reverse the order of elements along `axis` (None: every axis; an int or a tuple).

  >>> flip(arange(3)).tolist()
  [2, 1, 0]
  """
  a = asarray(m)
  return _view(a, a.uop.flip(normalize_axes(axis, a.ndim)))

def fliplr(m) -> Array:
  """Reverse axis 1 (left and right); needs at least 2 dimensions."""
  a = asarray(m)
  if a.ndim < 2: raise ValueError(f"fliplr needs an array of at least 2 dimensions, got shape {a.shape}")
  return flip(a, 1)

def flipud(m) -> Array:
  """Reverse axis 0 (up and down); needs at least 1 dimension."""
  a = asarray(m)
  if a.ndim < 1: raise ValueError(f"flipud needs an array of at least 1 dimension, got shape {a.shape}")
  return flip(a, 0)

def _roll_axis(u: UOp, axis: int, shift: int) -> UOp:
  n = u.shape[axis]
  if n == 0 or shift % n == 0: return u
  s = shift % n
  return _slice_axis(_tile_axis(u, axis, 2), axis, n - s, 2 * n - s)

def roll(a, shift, axis=None) -> Array:
  """Shift elements along `axis` with wrap-around; `shift` and `axis` may be tuples (None: the flattened array).

  >>> roll(arange(4), 1).tolist()
  [3, 0, 1, 2]
  """
  a = asarray(a)
  if axis is None: return reshape(roll(ravel(a), shift, 0), a.shape)
  if isinstance(shift, Array): shift = shift.concrete_numpy("jnp.roll with an array shift (it must be concrete)")
  shifts = np.asarray(shift).reshape(-1)
  axes = np.asarray(axis).reshape(-1)
  try:
    shifts, axes = np.broadcast_arrays(shifts, axes)
  except ValueError:
    raise ValueError(f"roll: shift {shift!r} and axis {axis!r} must have matching lengths") from None
  u = a.uop
  for s, ax in zip(shifts.tolist(), axes.tolist()): u = _roll_axis(u, normalize_axis(ax, a.ndim), int(s))
  return _view(a, u)

def rot90(m, k: int = 1, axes=(0, 1)) -> Array:
  """Rotate by 90 degrees `k` times in the plane of `axes`, from the first axis toward the second.

  >>> rot90(array([[1, 2], [3, 4]])).tolist()
  [[2, 4], [1, 3]]
  """
  a = asarray(m)
  if len(axes) != 2: raise ValueError(f"rot90: axes must be two axes, got {axes!r}")
  if a.ndim < 2: raise ValueError(f"rot90 needs an array of at least 2 dimensions, got shape {a.shape}")
  i, j = normalize_axis(axes[0], a.ndim, "axes[0]"), normalize_axis(axes[1], a.ndim, "axes[1]")
  if i == j: raise ValueError(f"rot90: axes must be different, got {axes!r}")
  k = operator.index(k) % 4
  if k == 0: return a
  if k == 2: return flip(a, (i, j))
  perm = list(range(a.ndim))
  perm[i], perm[j] = j, i
  return transpose(flip(a, j), perm) if k == 1 else flip(transpose(a, perm), j)

# --- dimensions ---
def _atleast(arys, shape_of) -> Array | list[Array]:
  out = []
  for x in arys:
    a = asarray(x)
    out.append(_view(a, a.uop.reshape(shape_of(a.shape))))
  return out[0] if len(out) == 1 else out

def atleast_1d(*arys):
  """Each input with at least one dimension (a 0-d array becomes shape (1,))."""
  return _atleast(arys, lambda s: s or (1,))
def atleast_2d(*arys):
  """Each input with at least two dimensions: (n,) becomes (1, n)."""
  return _atleast(arys, lambda s: (1,) * (2 - len(s)) + s if len(s) < 2 else s)
def atleast_3d(*arys):
  """Each input with at least three dimensions: (n,) becomes (1, n, 1) and (m, n) becomes (m, n, 1)."""
  return _atleast(arys, lambda s: {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s))

def shape(a) -> tuple:
  """The shape of an array or array-like."""
  return a.shape if isinstance(a, Array) else np.shape(a)
def ndim(a) -> int:
  """The number of dimensions of an array or array-like."""
  return len(shape(a))
def size(a, axis=None) -> int:
  """The number of elements, in total or along `axis`."""
  s = shape(a)
  return math.prod(s) if axis is None else s[normalize_axis(axis, len(s))]
