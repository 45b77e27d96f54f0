"""nn.initializers: `jax.nn.initializers` (reached as `tinyjx.nn.initializers`): weight initializers with JAX's
layout and signatures.

Every factory (`glorot_normal()`, `normal(0.1)`, ...) returns `init(key, shape, dtype=<its dtype>) -> Array`;
`zeros` and `ones` are initializers themselves, as in JAX. Fans follow JAX: a weight's input axes are `in_axis`
(default -2), its output axes `out_axis` (default -1), `batch_axis` axes are independent copies, and the remaining
axes are the receptive field, which multiplies both fans. So a Dense kernel is (in, out) and a conv kernel
(*window, in, out). `nn/init.py` (PyTorch's (out, in, *kernel) layout) builds on `variance_scaling` with its axes.
Random initializers take a `tinyjx.random` key and work under jit (nothing here needs concrete values).
"""
from __future__ import annotations
import math
from typing import Any, Protocol, Sequence
import tinyjx.numpy as jnp
from tinyjx import dtypes, lax, random

__all__ = ['Initializer', 'zeros', 'ones', 'constant', 'uniform', 'normal', 'truncated_normal', 'variance_scaling',
           'glorot_uniform', 'glorot_normal', 'xavier_uniform', 'xavier_normal', 'lecun_uniform', 'lecun_normal',
           'he_uniform', 'he_normal', 'kaiming_uniform', 'kaiming_normal', 'orthogonal', 'delta_orthogonal',
           'compute_fans']

class Initializer(Protocol):
  """What every initializer is: `init(key, shape, dtype) -> Array`."""
  def __call__(self, key: Any, shape: Sequence[int], dtype: Any = None) -> Any: ...

def _shape(shape) -> tuple:
  return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)

def _float_dtype(dtype, name: str):
  d = dtypes.default_float() if dtype is None else dtypes.to_dtype(dtype)
  if not dtypes.is_float(d):
    raise TypeError(f'{name}: dtype must be a float type, got {d}; random initializers draw real numbers (cast the '
                    f'result with .astype if you need integers)')
  return d

def zeros(key, shape, dtype=None) -> Any:
  """An initializer: all zeros (the key is ignored).

  >>> zeros(None, (2,)).tolist()
  [0.0, 0.0]
  """
  return jnp.zeros(_shape(shape), dtypes.default_float() if dtype is None else dtype)

def ones(key, shape, dtype=None) -> Any:
  """An initializer: all ones (the key is ignored).

  >>> ones(None, (2,), 'int32').tolist()
  [1, 1]
  """
  return jnp.ones(_shape(shape), dtypes.default_float() if dtype is None else dtype)

def constant(value, dtype=None) -> Initializer:
  """An initializer filling with `value`.

  >>> constant(3.0)(None, (2,)).tolist()
  [3.0, 3.0]
  """
  def init(key, shape, dtype=dtype):
    return jnp.full(_shape(shape), value, dtypes.default_float() if dtype is None else dtype)
  return init

def uniform(scale=1e-2, dtype=None) -> Initializer:
  """An initializer drawing from U[0, scale).

  >>> bool((uniform(1.0)(random.PRNGKey(0), (100,)) >= 0).all())
  True
  """
  def init(key, shape, dtype=dtype):
    return random.uniform(key, _shape(shape), _float_dtype(dtype, 'uniform'), 0.0, scale)
  return init

def normal(stddev=1e-2, dtype=None) -> Initializer:
  """An initializer drawing from N(0, stddev^2).

  >>> normal(0.5)(random.PRNGKey(0), (3, 4)).shape
  (3, 4)
  """
  def init(key, shape, dtype=dtype):
    d = _float_dtype(dtype, 'normal')
    return random.normal(key, _shape(shape), d) * jnp.asarray(stddev, d)
  return init

def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0) -> Initializer:
  """An initializer drawing `stddev` times a standard normal truncated to [lower, upper] (as in JAX, the result's
  standard deviation is below `stddev`: the truncation is not corrected for).

  >>> bool((abs(truncated_normal(1.0)(random.PRNGKey(0), (100,))) <= 2.0).all())
  True
  """
  def init(key, shape, dtype=dtype):
    d = _float_dtype(dtype, 'truncated_normal')
    return random.truncated_normal(key, lower, upper, _shape(shape), d) * jnp.asarray(stddev, d)
  return init

def _axes(axis, ndim: int, name: str) -> tuple:
  axes = (axis,) if isinstance(axis, int) else tuple(axis)
  for a in axes:
    if not -ndim <= a < ndim:
      raise ValueError(f'variance_scaling: {name}={axis!r} is out of range for a weight of {ndim} dimensions; pass '
                       f'{name} within -{ndim}..{ndim - 1}')
  return tuple(a % ndim for a in axes)

def compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()) -> tuple[float, float]:
  """(fan_in, fan_out) of a weight of `shape`: the sizes of its input and output axes, each times the receptive
  field (the product of the axes that are neither input, output nor batch).

  >>> compute_fans((3, 3, 16, 32))
  (144, 288)
  >>> compute_fans((32, 16, 3, 3), in_axis=1, out_axis=0)
  (144, 288)
  """
  shape = _shape(shape)
  if len(shape) < 2 and (in_axis, out_axis) == (-2, -1):
    raise ValueError(f"can't compute the input and output sizes of a {len(shape)}-dimensional weight with the default "
                     f"in_axis=-2, out_axis=-1: pass a shape of at least 2 dimensions, or in_axis/out_axis")
  ins, outs, batch = (_axes(a, len(shape), n) for a, n in ((in_axis, 'in_axis'), (out_axis, 'out_axis'),
                                                           (batch_axis, 'batch_axis')))
  fan_in, fan_out = math.prod(shape[i] for i in ins), math.prod(shape[i] for i in outs)
  receptive = math.prod(shape) // max(fan_in * fan_out * math.prod(shape[i] for i in batch), 1)
  return fan_in * receptive, fan_out * receptive

_MODES = {'fan_in': lambda i, o: i, 'fan_out': lambda i, o: o, 'fan_avg': lambda i, o: (i + o) / 2,
          'fan_geo_avg': lambda i, o: math.sqrt(i * o)}
_DISTRIBUTIONS = ('truncated_normal', 'normal', 'uniform')
_TRUNCATED_STD = 0.87962566103423978   # the standard deviation of N(0, 1) truncated to [-2, 2]

def variance_scaling(scale, mode: str, distribution: str, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None) -> Initializer:
  """An initializer with variance `scale / n`, n = fan_in, fan_out, their mean ('fan_avg') or geometric mean
  ('fan_geo_avg') as `mode` says, drawn from `distribution`: 'truncated_normal' (within two standard deviations,
  rescaled to keep the variance), 'normal' or 'uniform'. See `compute_fans` for the axes.

  >>> w = variance_scaling(2.0, 'fan_in', 'normal')(random.PRNGKey(0), (512, 256))
  >>> round(float(w.var() * 512), 1)
  2.0
  """
  if mode not in _MODES:
    raise ValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out', 'fan_avg' or 'fan_geo_avg', got {mode!r}")
  if distribution not in _DISTRIBUTIONS:
    raise ValueError(f"variance_scaling: distribution must be 'truncated_normal', 'normal' or 'uniform', got "
                     f"{distribution!r}")
  def init(key, shape, dtype=dtype):
    shape, d = _shape(shape), _float_dtype(dtype, 'variance_scaling')
    variance = scale / max(_MODES[mode](*compute_fans(shape, in_axis, out_axis, batch_axis)), 1e-30)
    if distribution == 'uniform':
      bound = math.sqrt(3 * variance)
      return random.uniform(key, shape, d, -bound, bound)
    if distribution == 'normal': return random.normal(key, shape, d) * jnp.asarray(math.sqrt(variance), d)
    std = math.sqrt(variance) / _TRUNCATED_STD
    return random.truncated_normal(key, -2.0, 2.0, shape, d) * jnp.asarray(std, d)
  return init

def glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
  """Glorot (Xavier) uniform: `variance_scaling(1.0, 'fan_avg', 'uniform')`.

  >>> glorot_uniform()(random.PRNGKey(0), (4, 5)).shape
  (4, 5)
  """
  return variance_scaling(1.0, 'fan_avg', 'uniform', in_axis, out_axis, batch_axis, dtype)

def glorot_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
  """Glorot (Xavier) normal: `variance_scaling(1.0, 'fan_avg', 'truncated_normal')`.

  >>> glorot_normal()(random.PRNGKey(0), (4, 5)).shape
  (4, 5)
  """
  return variance_scaling(1.0, 'fan_avg', 'truncated_normal', in_axis, out_axis, batch_axis, dtype)

def lecun_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
  """LeCun uniform: `variance_scaling(1.0, 'fan_in', 'uniform')`.

  >>> lecun_uniform()(random.PRNGKey(0), (4, 5)).shape
  (4, 5)
  """
  return variance_scaling(1.0, 'fan_in', 'uniform', in_axis, out_axis, batch_axis, dtype)

def lecun_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
  """LeCun normal: `variance_scaling(1.0, 'fan_in', 'truncated_normal')`.

  >>> lecun_normal()(random.PRNGKey(0), (4, 5)).shape
  (4, 5)
  """
  return variance_scaling(1.0, 'fan_in', 'truncated_normal', in_axis, out_axis, batch_axis, dtype)

def he_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
  """He (Kaiming) uniform: `variance_scaling(2.0, 'fan_in', 'uniform')`.

  >>> he_uniform()(random.PRNGKey(0), (4, 5)).shape
  (4, 5)
  """
  return variance_scaling(2.0, 'fan_in', 'uniform', in_axis, out_axis, batch_axis, dtype)

def he_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
  """He (Kaiming) normal: `variance_scaling(2.0, 'fan_in', 'truncated_normal')`.

  >>> he_normal()(random.PRNGKey(0), (4, 5)).shape
  (4, 5)
  """
  return variance_scaling(2.0, 'fan_in', 'truncated_normal', in_axis, out_axis, batch_axis, dtype)

xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal = glorot_uniform, glorot_normal, he_uniform, he_normal

def _orthonormal_columns(a):
  """The Q of a's QR decomposition with R's diagonal positive (Gram-Schmidt, each column projected twice for
  float32 accuracy), for a of shape (rows, cols), rows >= cols. A loop op, so the graph does not grow with cols."""
  def column(j, q):
    v = lax.dynamic_slice_in_dim(a, j, 1, axis=1)
    for _ in range(2): v = v - q @ (q.T @ v)   # the columns of q not yet filled are zero
    return lax.dynamic_update_slice_in_dim(q, v / jnp.sqrt(jnp.sum(v * v)), j, axis=1)
  return lax.fori_loop(0, a.shape[1], column, jnp.zeros_like(a))

def orthogonal(scale=1.0, column_axis=-1, dtype=None) -> Initializer:
  """An initializer of (scaled) orthogonal matrices: the weight, reshaped to (everything else, shape[column_axis]),
  has orthonormal columns (or rows, when it has more columns than rows), uniformly distributed.

  >>> w = orthogonal()(random.PRNGKey(0), (5, 3))
  >>> bool(jnp.allclose(w.T @ w, jnp.eye(3), atol=1e-5))
  True
  """
  def init(key, shape, dtype=dtype):
    shape, d = _shape(shape), _float_dtype(dtype, 'orthogonal')
    if len(shape) < 2:
      raise ValueError(f'orthogonal: the weight must have at least 2 dimensions, got shape {shape}')
    axis = column_axis % len(shape)
    n_cols = shape[axis]
    n_rows = math.prod(shape) // n_cols
    tall = (max(n_rows, n_cols), min(n_rows, n_cols))
    q = _orthonormal_columns(random.normal(key, tall, d if d.itemsize >= 4 else dtypes.float32))
    if n_rows < n_cols: q = q.T
    q = q.reshape(shape[:axis] + shape[axis + 1:] + (n_cols,))
    return (jnp.moveaxis(q, -1, axis) * scale).astype(d)
  return init

def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None) -> Initializer:
  """An initializer for conv kernels (*window, in, out), 3 to 5 dimensions, in <= out: an orthogonal (in, out) matrix
  at the window's center and zeros elsewhere, so the convolution starts as an orthogonal map.

  >>> w = delta_orthogonal()(random.PRNGKey(0), (3, 3, 4))
  >>> bool(jnp.allclose(w[1] @ w[1].T, jnp.eye(3), atol=1e-5)), float(abs(w[0]).sum())
  (True, 0.0)
  """
  def init(key, shape, dtype=dtype):
    shape = _shape(shape)
    if len(shape) not in (3, 4, 5):
      raise ValueError(f'delta_orthogonal: the kernel must have 3, 4 or 5 dimensions (*window, in, out), got {shape}')
    if shape[-2] > shape[-1]:
      raise ValueError(f'delta_orthogonal: in={shape[-2]} must be at most out={shape[-1]} for shape {shape}')
    center = tuple(s // 2 for s in shape[:-2])
    ortho = orthogonal(scale, column_axis, dtype)(key, shape[-2:])
    return jnp.zeros(shape, ortho.dtype).at[center].set(ortho)
  return init
