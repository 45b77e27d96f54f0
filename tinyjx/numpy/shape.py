"""numpy.shape: shape manipulation (reshape, transpose, concatenate, pad ...). All are views or cheap graphs."""
from __future__ import annotations
from tinyjx.array import Array
from tinyjx.numpy.core import asarray, promote

def stack(arrays, axis: int = 0) -> Array:
  """Join arrays of one shape along a new axis."""
  from tinyjx.numpy.core import normalize_axis
  arrs, dt, weak = promote(*arrays)
  shapes = {a.shape for a in arrs}
  if len(shapes) != 1: raise ValueError(f"stack needs arrays of one shape, got {[a.shape for a in arrs]}")
  shape = arrs[0].shape
  ax = normalize_axis(axis, len(shape) + 1)
  n = len(arrs)
  out = None
  for i, a in enumerate(arrs):
    u = a.uop.reshape(shape[:ax] + (1,) + shape[ax:])
    u = u.pad(tuple((i, n - 1 - i) if d == ax else (0, 0) for d in range(len(shape) + 1)))
    out = u if out is None else out.alu(__import__('tinyjx').uop.Ops.ADD, u) if dt.kind != 'b' else out.alu(__import__('tinyjx').uop.Ops.OR, u)
  return Array(out, weak)
