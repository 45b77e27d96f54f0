"""signal: numpy's 1-D `convolve` and `correlate`, as one `lax.conv_general_dilated` each.

Both take two non-empty 1-D arrays, promote them to one dtype, and return 1-D arrays whose length the mode
sets ('full': n + m - 1, 'same': max(n, m), 'valid': max(n, m) - min(n, m) + 1), with numpy's centering
for 'same' and its order when the second operand is the longer one.
"""
from __future__ import annotations
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.numpy import core

__all__ = ['convolve', 'correlate']

def _operands(name: str, a, v, mode: str, preferred_element_type):
  a, v = core.asarray(a), core.asarray(v)
  if a.ndim != 1 or v.ndim != 1 or a.size == 0 or v.size == 0:
    raise ValueError(f"jnp.{name} takes two non-empty 1-D arrays, got shapes {a.shape} and {v.shape}; "
                     "use lax.conv_general_dilated for N-d convolutions")
  if mode not in ('full', 'same', 'valid'):
    raise ValueError(f"jnp.{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
  dt = preferred_element_type or dtypes.promote((a.dtype, a.weak), (v.dtype, v.weak))[0]
  return core.astype(a, dt), core.astype(v, dt)

def _correlate_long_short(a: Array, v: Array, mode: str) -> Array:
  """c[k] = sum_j a[k + j - lo] v[j] for len(a) >= len(v), lo set by the mode."""
  from tinyjx import lax
  m = v.shape[0]
  pads = {'valid': (0, 0), 'full': (m - 1, m - 1), 'same': (m // 2, (m - 1) // 2)}[mode]
  return lax.conv_general_dilated(a.reshape((1, 1, -1)), v.reshape((1, 1, -1)), (1,), [pads]).reshape((-1,))

def correlate(a, v, mode: str = 'valid', *, precision=None, preferred_element_type=None) -> Array:
  """Cross-correlation of two 1-D arrays, `c[k] = sum_n a[n + k] * conj(v[n])` (numpy's `correlate`).

  >>> import tinyjx.numpy as jnp
  >>> jnp.correlate(jnp.array([1., 2., 3.]), jnp.array([0., 1.]), 'full').tolist()
  [1.0, 2.0, 3.0, 0.0]
  """
  a, v = _operands('correlate', a, v, mode, preferred_element_type)
  v = core.conj(v)
  if v.shape[0] > a.shape[0]: return _correlate_long_short(v, a, mode)[::-1]
  return _correlate_long_short(a, v, mode)

def convolve(a, v, mode: str = 'full', *, precision=None, preferred_element_type=None) -> Array:
  """Discrete linear convolution of two 1-D arrays (numpy's `convolve`): correlation with `v` reversed.

  >>> import tinyjx.numpy as jnp
  >>> jnp.convolve(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5])).tolist()
  [0.0, 1.0, 2.5, 4.0, 1.5]
  """
  a, v = _operands('convolve', a, v, mode, preferred_element_type)
  if v.shape[0] > a.shape[0]: a, v = v, a
  return _correlate_long_short(a, v[::-1], mode)
