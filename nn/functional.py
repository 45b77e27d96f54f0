"""nn.functional: the array math behind the layers: convolution, transposed convolution, pooling, dropout and
normalization, as pure functions of arrays (like `torch.nn.functional`).

Layout is PyTorch's: inputs (N, C, *spatial), convolution weights (out, in / groups, *kernel), transposed
convolution weights (in, out / groups, *kernel). A convolution is im2col as one view of the padded input
(the sliding windows, shape (N, C, *kernel, *out), built from broadcast, reshape and slices: no copy, and
index arithmetic without a remainder once lowered) contracted with the weight by one `einsum`; pooling
reduces strided slices of the input with maximum or sum. Everything is tinyjx.numpy, so gradients,
vmap and jit come from tinyjx's transforms.
"""
from __future__ import annotations
import functools, itertools, math
import tinyjx.numpy as jnp
from tinyjx import random, custom_jvp, custom_vjp
from tinyjx.lax import window_view   # the sliding windows of a convolution, as one view

__all__ = ['conv', 'conv_transpose', 'max_pool', 'avg_pool', 'max_pool1d', 'max_pool2d', 'avg_pool1d', 'avg_pool2d',
           'dropout', 'batch_norm', 'layer_norm', 'rms_norm', 'group_norm', 'flatten', 'cross_entropy']

def int_tuple(v, n: int, name: str) -> tuple:
  if isinstance(v, int): return (v,) * n
  v = tuple(v)
  if len(v) != n or not all(isinstance(i, int) for i in v):
    raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v!r}")
  return v

def _padding(padding, n: int, sizes: tuple, kernel: tuple, stride: tuple, dilation: tuple) -> list:
  """One (low, high) pair per spatial axis from 'valid', 'same', an int, a tuple of ints or of pairs."""
  if isinstance(padding, str):
    mode = padding.lower()
    if mode == 'valid': return [(0, 0)] * n
    if mode != 'same': raise ValueError(f"padding must be 'same', 'valid', an int or a tuple, got {padding!r}")
    pads = []
    for i, k, s, d in zip(sizes, kernel, stride, dilation):  # out = ceil(in / stride), as JAX's 'SAME'
      total = max((-(-i // s) - 1) * s + d * (k - 1) + 1 - i, 0)
      pads.append((total // 2, total - total // 2))
    return pads
  if isinstance(padding, int): return [(padding, padding)] * n
  padding = tuple(padding)
  if len(padding) == n and all(isinstance(p, int) for p in padding): return [(p, p) for p in padding]
  if len(padding) == n and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in padding):
    return [tuple(p) for p in padding]
  raise ValueError(f"padding must be 'same', 'valid', an int, {n} ints or {n} (low, high) pairs, got {padding!r}")

def _out_sizes(sizes: tuple, kernel: tuple, stride: tuple, dilation: tuple, what: str, shape: tuple) -> tuple:
  out = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(sizes, kernel, stride, dilation))
  if any(o <= 0 for o in out):
    raise ValueError(f"{what}: the (padded) input of shape {shape} is smaller than the kernel {kernel} with "
                     f"dilation {dilation}; pad the input or use a smaller kernel")
  return out

def _windows(x, kernel: tuple, stride: tuple, dilation: tuple, out: tuple) -> list:
  """One strided slice of `x` (N, C, *spatial) per kernel offset, each of shape (N, C, *out)."""
  views = []
  for offset in itertools.product(*[range(k) for k in kernel]):
    idx = tuple(slice(o * d, o * d + (n - 1) * s + 1, s) for o, d, n, s in zip(offset, dilation, out, stride))
    views.append(x[(slice(None), slice(None)) + idx])
  return views

def _pad_spatial(x, pads: list, value=0.0):
  if all(p == (0, 0) for p in pads): return x
  if any(lo < 0 or hi < 0 for lo, hi in pads):   # negative padding crops
    crop = tuple(slice(max(-lo, 0), x.shape[2 + i] - max(-hi, 0)) for i, (lo, hi) in enumerate(pads))
    x = x[(slice(None), slice(None)) + crop]
    pads = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
  return jnp.pad(x, [(0, 0), (0, 0)] + list(pads), constant_values=value)

def conv(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
  """N-d convolution (cross-correlation, as in PyTorch and `lax.conv`): x (N, C, *S), weight (O, C // groups, *K).

  >>> import tinyjx.numpy as jnp
  >>> conv(jnp.ones((1, 1, 4, 4)), jnp.ones((1, 1, 3, 3))).tolist()
  [[[[9.0, 9.0], [9.0, 9.0]]]]
  """
  n = weight.ndim - 2
  if n < 1 or x.ndim != n + 2:
    raise ValueError(f"conv: input of shape {x.shape} and weight of shape {weight.shape} do not fit; want input "
                     f"(N, C, *spatial) with {n} spatial axes for a weight (out, in / groups, *kernel)")
  c, (o, cg), kernel = x.shape[1], weight.shape[:2], tuple(weight.shape[2:])
  if c != cg * groups or o % groups:
    raise ValueError(f"conv: input channels {c} (shape {x.shape}) must equal weight.shape[1] * groups = "
                     f"{cg} * {groups}, and out channels {o} must be divisible by groups={groups}")
  stride, dilation = int_tuple(stride, n, 'stride'), int_tuple(dilation, n, 'dilation')
  x = _pad_spatial(x, _padding(padding, n, x.shape[2:], kernel, stride, dilation))
  out = _out_sizes(x.shape[2:], kernel, stride, dilation, 'conv', x.shape)
  y = _conv_op(kernel, stride, dilation, out, groups)(x, weight)
  return y if bias is None else y + bias.reshape((1, o) + (1,) * n)

# The convolution of a padded input as a custom_jvp function whose tangent map is a custom_vjp one: that is
# what makes the backward pass cheap. Derived by AD from `_contract`, the input gradient would be the
# transpose of the window view applied to einsum(weight, ct): a (N, C, *kernel, *out) array, kernel-size
# times bigger than the input, written and then summed. Given by hand, it is a transposed convolution: one
# more convolution over the (dilated, padded) output gradient with the flipped weight, nothing materialized.
# Forward mode differentiates the (bilinear) function itself, so jvp, jacfwd and hessian work too.
@functools.lru_cache(maxsize=None)
def _conv_op(kernel: tuple, stride: tuple, dilation: tuple, out: tuple, groups: int):
  def plain(x, w): return _contract(x, w, kernel, stride, dilation, out, groups)

  def lin_fwd(x, w): return plain(x, w), (x, w)
  def lin_bwd(res, g):
    x, w = res
    return (_input_grad(g, w, x.shape, kernel, stride, dilation, groups).astype(x.dtype),
            _weight_grad(x, g, kernel, stride, dilation, out, groups).astype(w.dtype))
  lin = custom_vjp(plain)
  lin.defvjp(lin_fwd, lin_bwd)
  lin.forward_mode_differentiates_fun = True

  op = custom_jvp(plain)
  @op.defjvp
  def op_jvp(primals, tangents):
    (x, w), (tx, tw) = primals, tangents
    return op(x, w), lin(tx, w) + lin(x, tw)
  return op

def _input_grad(g, w, shape: tuple, kernel, stride, dilation, groups):
  """d conv / d x applied to g: a stride-1 convolution of g dilated by the stride and padded by the kernel's
  reach, with the weight flipped and its two channel axes swapped (per group); `extra` covers the input rows
  past the last window."""
  extra = [(s - d * (k - 1) - 1) % st for s, k, st, d in zip(shape[2:], kernel, stride, dilation)]
  pads = [(d * (k - 1), d * (k - 1) + e) for k, d, e in zip(kernel, dilation, extra)]
  gp, wt = _pad_spatial(_dilate(g, stride), pads), _flip_weight(w, groups)
  return _contract(gp, wt, kernel, (1,) * len(kernel), dilation, tuple(shape[2:]), groups)

def _weight_grad(x, g, kernel, stride, dilation, out, groups):
  """d conv / d weight applied to g: the windows of x contracted with g over the batch and output positions."""
  (nb, c), o, n = x.shape[:2], g.shape[1], len(kernel)
  cols = window_view(x, kernel, stride, dilation, out)
  ks, ls = 'hijk'[:n], 'pqrs'[:n]
  if groups == 1: return jnp.einsum(f'nc{ks}{ls},no{ls}->oc{ks}', cols, g)
  cols = cols.reshape((nb, groups, c // groups) + cols.shape[2:])
  gg = g.reshape((nb, groups, o // groups) + g.shape[2:])
  return jnp.einsum(f'ngc{ks}{ls},ngo{ls}->goc{ks}', cols, gg).reshape((o, c // groups) + tuple(kernel))

def _flip_weight(w, groups: int):
  """(A, B, *K) grouped as (groups, A / groups, B) -> (groups * B, A / groups, *K) with every kernel axis
  reversed: the weight of the transposed convolution."""
  a, b, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
  w = w.reshape((groups, a // groups, b) + kernel)
  w = jnp.flip(jnp.swapaxes(w, 1, 2), axis=tuple(range(3, 3 + len(kernel))))
  return w.reshape((groups * b, a // groups) + kernel)

def _contract(x, weight, kernel, stride, dilation, out, groups):
  """im2col: the windows stacked on a kernel axis, contracted over (channel, kernel offset) with the weight."""
  (nb, c), o, n = x.shape[:2], weight.shape[0], len(kernel)
  cols = window_view(x, kernel, stride, dilation, out)           # (N, C, *kernel, *out)
  ks, ls = 'hijk'[:n], 'pqrs'[:n]        # kernel and output axes stay apart: their loops index the view affinely
  if groups == 1: return jnp.einsum(f'nc{ks}{ls},oc{ks}->no{ls}', cols, weight)
  cols = cols.reshape((nb, groups, c // groups) + cols.shape[2:])
  w = weight.reshape((groups, o // groups, c // groups) + tuple(kernel))
  return jnp.einsum(f'ngc{ks}{ls},goc{ks}->ngo{ls}', cols, w).reshape((nb, o) + tuple(out))

def _dilate(x, stride: tuple):
  """Insert stride-1 zeros between the elements of each spatial axis of x (N, C, *S)."""
  for axis, s in enumerate(stride, start=2):
    if s == 1: continue
    size = x.shape[axis]
    x = jnp.expand_dims(x, axis + 1)
    x = jnp.pad(x, [(0, 0)] * (axis + 1) + [(0, s - 1)] + [(0, 0)] * (x.ndim - axis - 2))
    x = x.reshape(x.shape[:axis] + (size * s,) + x.shape[axis + 2:])
    x = x[(slice(None),) * axis + (slice(0, (size - 1) * s + 1),)]
  return x

def conv_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0, dilation=1, groups: int = 1):
  """N-d transposed convolution (the gradient of `conv` with respect to its input), PyTorch's semantics:
  x (N, C_in, *S), weight (C_in, C_out // groups, *K); out size (S - 1) * stride - 2 * padding +
  dilation * (K - 1) + output_padding + 1.

  >>> import tinyjx.numpy as jnp
  >>> conv_transpose(jnp.ones((1, 1, 2)), jnp.ones((1, 1, 2)), stride=2).tolist()
  [[[1.0, 1.0, 1.0, 1.0]]]
  """
  n = weight.ndim - 2
  if x.ndim != n + 2 or x.shape[1] != weight.shape[0] or weight.shape[0] % groups:
    raise ValueError(f"conv_transpose: input {x.shape} and weight {weight.shape} do not fit; want input "
                     f"(N, C_in, *spatial) and weight (C_in, C_out / groups, *kernel) with C_in divisible by groups")
  kernel = tuple(weight.shape[2:])
  stride, dilation = int_tuple(stride, n, 'stride'), int_tuple(dilation, n, 'dilation')
  padding, output_padding = int_tuple(padding, n, 'padding'), int_tuple(output_padding, n, 'output_padding')
  for op, s, d in zip(output_padding, stride, dilation):
    if op >= max(s, d): raise ValueError(f"conv_transpose: output_padding {output_padding} must be smaller than "
                                         f"stride {stride} or dilation {dilation}")
  w = _flip_weight(weight, groups)
  pads = [(d * (k - 1) - p, d * (k - 1) - p + op) for k, p, op, d in zip(kernel, padding, output_padding, dilation)]
  return conv(_pad_spatial(_dilate(x, stride), pads), w, bias, 1, 0, dilation, groups)

# ---------------------------------------------------------------- pooling

def _pool_args(x, kernel_size, stride, padding, n: int, what: str):
  if x.ndim < n + 1: raise ValueError(f"{what}: input of shape {x.shape} needs at least {n + 1} axes")
  kernel = int_tuple(kernel_size, n, 'kernel_size')
  stride = kernel if stride is None else int_tuple(stride, n, 'stride')
  pads = _padding(padding, n, x.shape[-n:], kernel, stride, (1,) * n)
  for (lo, hi), k in zip(pads, kernel):
    if lo > k // 2 or hi > k // 2:
      raise ValueError(f"{what}: padding {padding} must be at most half the kernel {kernel}")
  return kernel, stride, pads

def _as_nc(x, n: int):
  """x viewed as (B, 1, *spatial) so the windowing code sees (N, C, *S); returns the view and the lead shape."""
  lead = x.shape[:-n]
  return x.reshape((math.prod(lead), 1) + x.shape[-n:]), lead

def max_pool(x, kernel_size, stride=None, padding=0, n: int = 2):
  """Max over windows of the last `n` axes (padding counts as -inf). stride defaults to kernel_size."""
  kernel, stride, pads = _pool_args(x, kernel_size, stride, padding, n, 'max_pool')
  if all(p == (0, 0) for p in pads) and kernel == stride and all(s % k == 0 for s, k in zip(x.shape[-n:], kernel)):
    return _tiled_reduce(x, kernel, jnp.max)
  y, lead = _as_nc(x, n)
  y = _pad_spatial(y, pads, -math.inf)
  out = _out_sizes(y.shape[2:], kernel, stride, (1,) * n, 'max_pool', y.shape)
  views = _windows(y, kernel, stride, (1,) * n, out)
  result = views[0]
  for v in views[1:]: result = jnp.maximum(result, v)
  return result.reshape(lead + tuple(out))

def _tiled_reduce(x, kernel: tuple, reduce):
  """Non-overlapping windows that tile the input: a reshape to (..., H/k, k, W/k, k) and one reduction."""
  n, shape = len(kernel), x.shape[:x.ndim - len(kernel)]
  split = sum(((s // k, k) for s, k in zip(x.shape[-n:], kernel)), ())
  y = x.reshape(shape + split)
  return reduce(y, axis=tuple(len(shape) + 2 * i + 1 for i in range(n)))

def avg_pool(x, kernel_size, stride=None, padding=0, count_include_pad: bool = True, n: int = 2):
  """Mean over windows of the last `n` axes; padding is zeros, counted in the mean unless `count_include_pad`
  is False. stride defaults to kernel_size."""
  kernel, stride, pads = _pool_args(x, kernel_size, stride, padding, n, 'avg_pool')
  if all(p == (0, 0) for p in pads) and kernel == stride and all(s % k == 0 for s, k in zip(x.shape[-n:], kernel)):
    return _tiled_reduce(x, kernel, jnp.mean)
  y, lead = _as_nc(x, n)
  total = _window_sum(_pad_spatial(y, pads), kernel, stride, n)
  if count_include_pad or all(p == (0, 0) for p in pads): count = float(math.prod(kernel))
  else: count = _window_sum(_pad_spatial(jnp.ones((1, 1) + y.shape[2:], y.dtype), pads), kernel, stride, n)
  return (total / count).reshape(lead + total.shape[2:])

def _window_sum(y, kernel, stride, n):
  out = _out_sizes(y.shape[2:], kernel, stride, (1,) * n, 'avg_pool', y.shape)
  views = _windows(y, kernel, stride, (1,) * n, out)
  total = views[0]
  for v in views[1:]: total = total + v
  return total

def max_pool2d(x, kernel_size=2, stride=None, padding=0):
  """2-D max pooling over the last two axes of x (N, C, H, W), as `F.max_pool2d` (stride defaults to kernel).

  >>> import tinyjx.numpy as jnp
  >>> max_pool2d(jnp.arange(16.0).reshape(1, 1, 4, 4)).tolist()
  [[[[5.0, 7.0], [13.0, 15.0]]]]
  """
  return max_pool(x, kernel_size, stride, padding, 2)

def avg_pool2d(x, kernel_size=2, stride=None, padding=0, count_include_pad: bool = True):
  """2-D average pooling over the last two axes of x (N, C, H, W), as `F.avg_pool2d`."""
  return avg_pool(x, kernel_size, stride, padding, count_include_pad, 2)

def max_pool1d(x, kernel_size=2, stride=None, padding=0): return max_pool(x, kernel_size, stride, padding, 1)
def avg_pool1d(x, kernel_size=2, stride=None, padding=0, count_include_pad: bool = True):
  return avg_pool(x, kernel_size, stride, padding, count_include_pad, 1)

# ---------------------------------------------------------------- dropout and normalization

def dropout(x, rate: float, key=None):
  """Zero each element with probability `rate` and scale the rest by 1 / (1 - rate); identity when `key` is None
  (evaluation) or rate is 0."""
  if not 0.0 <= rate < 1.0: raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
  if key is None or rate == 0.0: return x
  keep = random.bernoulli(key, 1.0 - rate, x.shape)
  return jnp.where(keep, x / (1.0 - rate), jnp.zeros((), x.dtype))

def _channel_shape(x, axis: int = 1) -> tuple: return tuple(s if i == axis else 1 for i, s in enumerate(x.shape))

def batch_norm(x, mean, var, weight=None, bias=None, eps: float = 1e-5):
  """(x - mean) / sqrt(var + eps) * weight + bias with per-channel statistics on axis 1 of x (N, C, ...)."""
  shape = _channel_shape(x)
  y = (x - mean.reshape(shape)) * jnp.reciprocal(jnp.sqrt(var.reshape(shape) + eps))
  if weight is not None: y = y * weight.reshape(shape)
  return y if bias is None else y + bias.reshape(shape)

def layer_norm(x, normalized_shape: tuple, weight=None, bias=None, eps: float = 1e-5):
  """Normalize over the trailing axes `normalized_shape` (biased variance), then scale and shift."""
  axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
  mean = jnp.mean(x, axis=axes, keepdims=True)
  centered = x - mean
  y = centered * jnp.reciprocal(jnp.sqrt(jnp.mean(jnp.square(centered), axis=axes, keepdims=True) + eps))
  if weight is not None: y = y * weight
  return y if bias is None else y + bias

def rms_norm(x, normalized_shape: tuple, weight=None, eps: float = 1e-6):
  """x / sqrt(mean(x^2) + eps) over the trailing axes `normalized_shape`, times weight."""
  axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
  y = x * jnp.reciprocal(jnp.sqrt(jnp.mean(jnp.square(x), axis=axes, keepdims=True) + eps))
  return y if weight is None else y * weight

def group_norm(x, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
  """Normalize each group of channels of x (N, C, ...) over its channels and spatial axes."""
  nb, c = x.shape[:2]
  if c % num_groups:
    raise ValueError(f"group_norm: {c} channels (shape {x.shape}) do not split into {num_groups} groups")
  g = x.reshape((nb, num_groups, -1))
  mean = jnp.mean(g, axis=2, keepdims=True)
  centered = g - mean
  inv_std = jnp.reciprocal(jnp.sqrt(jnp.mean(jnp.square(centered), axis=2, keepdims=True) + eps))
  y = (centered * inv_std).reshape(x.shape)
  shape = _channel_shape(x)
  if weight is not None: y = y * weight.reshape(shape)
  return y if bias is None else y + bias.reshape(shape)

def flatten(x, start_axis: int = 1):
  """x with the axes from `start_axis` on merged into one: (N, C, H, W) -> (N, C*H*W)."""
  return x.reshape(x.shape[:start_axis] + (-1,))

def cross_entropy(logits, labels, axis: int = -1, label_smoothing: float = 0.0):
  """Mean softmax cross-entropy of `logits` against integer class `labels` (optionally smoothed).

  >>> import tinyjx.numpy as jnp
  >>> round(float(cross_entropy(jnp.zeros((2, 4)), jnp.array([0, 3]))), 4)
  1.3863
  """
  from tinyjx import nn as jnn
  logp = jnn.log_softmax(logits, axis=axis)
  onehot = jnn.one_hot(labels, logits.shape[axis], dtype=logp.dtype, axis=axis)
  if label_smoothing: onehot = onehot * (1 - label_smoothing) + label_smoothing / logits.shape[axis]
  return -jnp.mean(jnp.sum(onehot * logp, axis=axis))
