"""nn.layers: the layer Modules, each a pytree of its weights with a pure `__call__`.

Weights follow PyTorch's layouts and default initializers (U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for Linear,
convolutions and LSTM; N(0, 1) for Embedding; ones and zeros for norms), drawn from a `tinyjx.random` key passed
as `key=`.

Training-mode state, one rule for the whole library: a layer with running state (`BatchNorm`, and `Sequential`
holding one) is called as `y = layer(x)` in evaluation and as `y, layer = layer(x, train=True)` in training; the
second result is the same layer with updated statistics. The running statistics are ordinary fields (named in
`state_fields`), so the updated model is an output of a jitted step like any other pytree, and optimizers skip
them (`nn.trainable_mask`). Randomness is explicit too: `Dropout` drops only when given a `key`.
"""
from __future__ import annotations
import math
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import random, lax
from nn import init, functional as F
from nn.module import Module

__all__ = ['Linear', 'Conv1d', 'Conv2d', 'ConvTranspose2d', 'BatchNorm', 'BatchNorm1d', 'BatchNorm2d', 'LayerNorm',
           'RMSNorm', 'GroupNorm', 'Embedding', 'Dropout', 'LSTMCell', 'MultiHeadAttention', 'Sequential']

def _need_key(key, layer: str):
  if key is None:
    raise TypeError(f"{layer} needs a random key for its initial weights: pass key=tinyjx.random.PRNGKey(seed) "
                    "(split one key with tinyjx.random.split to build several layers)")
  return key

def _bias_or_none(use: bool, key, shape: tuple, bound: float, dtype):
  return init.bound_uniform(bound)(key, shape, dtype) if use else None

class Linear(Module):
  """y = x @ weight.T + bias, with weight of shape (out_features, in_features).

  >>> import tinyjx.random as random, tinyjx.numpy as jnp
  >>> Linear(3, 2, key=random.PRNGKey(0))(jnp.ones((4, 3))).shape
  (4, 2)
  """
  def __init__(self, in_features: int, out_features: int, bias: bool = True, *, key=None, dtype=jnp.float32):
    wkey, bkey = random.split(_need_key(key, 'Linear'))
    self.weight = init.kaiming_uniform()(wkey, (out_features, in_features), dtype)
    self.bias = _bias_or_none(bias, bkey, (out_features,), 1 / math.sqrt(max(in_features, 1)), dtype)
    self.in_features, self.out_features = in_features, out_features

  def __call__(self, x):
    y = jnp.matmul(x, self.weight.T)
    return y if self.bias is None else y + self.bias

class _ConvNd(Module):
  """Shared by Conv1d and Conv2d: weight (out, in / groups, *kernel), `F.conv` in the forward pass."""
  ndim = 2
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
               groups: int = 1, bias: bool = True, *, key=None, dtype=jnp.float32):
    name, n = type(self).__name__, self.ndim
    if in_channels % groups or out_channels % groups:
      raise ValueError(f"{name}: in_channels {in_channels} and out_channels {out_channels} must both be divisible "
                       f"by groups={groups}")
    kernel = F.int_tuple(kernel_size, n, 'kernel_size')
    wkey, bkey = random.split(_need_key(key, name))
    shape = (out_channels, in_channels // groups) + kernel
    self.weight = init.kaiming_uniform()(wkey, shape, dtype)
    self.bias = _bias_or_none(bias, bkey, (out_channels,), 1 / math.sqrt(init.fans(shape)[0]), dtype)
    self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel
    self.stride, self.dilation = F.int_tuple(stride, n, 'stride'), F.int_tuple(dilation, n, 'dilation')
    self.padding, self.groups = padding if isinstance(padding, (str, int)) else tuple(padding), groups

  def __call__(self, x):
    return F.conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

class Conv1d(_ConvNd):
  """1-D convolution over x (N, C, L); padding is 'same', 'valid', an int or a tuple."""
  ndim = 1

class Conv2d(_ConvNd):
  """2-D convolution over x (N, C, H, W) with stride, padding ('same', 'valid', int, tuple), dilation, groups.

  >>> import tinyjx.random as random, tinyjx.numpy as jnp
  >>> Conv2d(1, 4, 3, padding='same', key=random.PRNGKey(0))(jnp.ones((2, 1, 5, 5))).shape
  (2, 4, 5, 5)
  """
  ndim = 2

class ConvTranspose2d(Module):
  """2-D transposed convolution, weight (in, out / groups, kH, kW), PyTorch's output size
  (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.

  >>> import tinyjx.random as random, tinyjx.numpy as jnp
  >>> ConvTranspose2d(1, 2, 3, stride=2, key=random.PRNGKey(0))(jnp.ones((1, 1, 4, 4))).shape
  (1, 2, 9, 9)
  """
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
               groups: int = 1, bias: bool = True, dilation=1, *, key=None, dtype=jnp.float32):
    if in_channels % groups or out_channels % groups:
      raise ValueError(f"ConvTranspose2d: in_channels {in_channels} and out_channels {out_channels} must both be "
                       f"divisible by groups={groups}")
    kernel = F.int_tuple(kernel_size, 2, 'kernel_size')
    wkey, bkey = random.split(_need_key(key, 'ConvTranspose2d'))
    shape = (in_channels, out_channels // groups) + kernel
    self.weight = init.kaiming_uniform()(wkey, shape, dtype)
    self.bias = _bias_or_none(bias, bkey, (out_channels,), 1 / math.sqrt(init.fans(shape)[0]), dtype)
    self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel
    self.stride, self.padding = F.int_tuple(stride, 2, 'stride'), F.int_tuple(padding, 2, 'padding')
    self.output_padding = F.int_tuple(output_padding, 2, 'output_padding')
    self.dilation = F.int_tuple(dilation, 2, 'dilation')
    self.groups = groups

  def __call__(self, x):
    return F.conv_transpose(x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.dilation,
                            self.groups)

class BatchNorm(Module):
  """Batch normalization over axis 1 of x (N, C, ...), with running statistics.

  `y = bn(x)` normalizes with the running statistics (evaluation). `y, bn = bn(x, train=True)` normalizes with
  the batch's statistics and returns the layer with running_mean and running_var moved toward them:
  running = (1 - momentum) * running + momentum * batch (the unbiased variance, as PyTorch).

  >>> import tinyjx.numpy as jnp
  >>> bn = BatchNorm(3)
  >>> y, bn = bn(jnp.arange(24.0).reshape(4, 3, 2), train=True)
  >>> [round(v, 2) for v in bn.running_mean.tolist()]
  [0.95, 1.15, 1.35]
  """
  state_fields = ('running_mean', 'running_var')
  stateful = True

  def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
               track_running_stats: bool = True, dtype=jnp.float32):
    self.weight = jnp.ones((num_features,), dtype) if affine else None
    self.bias = jnp.zeros((num_features,), dtype) if affine else None
    self.running_mean = jnp.zeros((num_features,), dtype) if track_running_stats else None
    self.running_var = jnp.ones((num_features,), dtype) if track_running_stats else None
    self.num_features, self.eps, self.momentum = num_features, eps, momentum

  def __call__(self, x, train: bool = False):
    if x.ndim < 2 or x.shape[1] != self.num_features:
      raise ValueError(f"BatchNorm({self.num_features}): input of shape {x.shape} must be "
                       f"(N, {self.num_features}, ...)")
    if not train and self.running_mean is not None:
      return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.eps)
    axes = (0,) + tuple(range(2, x.ndim))
    mean, var = jnp.mean(x, axis=axes), jnp.var(x, axis=axes)
    y = F.batch_norm(x, mean, var, self.weight, self.bias, self.eps)
    if not train: return y
    if self.running_mean is None: return y, self
    n = x.size // x.shape[1]
    m = self.momentum
    mean, var = lax.stop_gradient(mean), lax.stop_gradient(var) * (n / max(n - 1, 1))
    return y, self.replace(running_mean=(1 - m) * self.running_mean + m * mean,
                           running_var=(1 - m) * self.running_var + m * var)

BatchNorm1d = BatchNorm2d = BatchNorm

class LayerNorm(Module):
  """Normalize over the trailing `normalized_shape` axes, then scale by weight and shift by bias."""
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
               dtype=jnp.float32):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    self.weight = jnp.ones(shape, dtype) if elementwise_affine else None
    self.bias = jnp.zeros(shape, dtype) if elementwise_affine and bias else None
    self.normalized_shape, self.eps = shape, eps

  def __call__(self, x): return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

class RMSNorm(Module):
  """x / sqrt(mean(x^2) + eps) over the trailing `normalized_shape` axes, times weight."""
  def __init__(self, normalized_shape, eps: float = 1e-6, elementwise_affine: bool = True, dtype=jnp.float32):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    self.weight = jnp.ones(shape, dtype) if elementwise_affine else None
    self.normalized_shape, self.eps = shape, eps

  def __call__(self, x): return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

class GroupNorm(Module):
  """Normalize groups of channels of x (N, C, ...), then a per-channel scale and shift."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, dtype=jnp.float32):
    if num_channels % num_groups:
      raise ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by num_groups {num_groups}")
    self.weight = jnp.ones((num_channels,), dtype) if affine else None
    self.bias = jnp.zeros((num_channels,), dtype) if affine else None
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps

  def __call__(self, x): return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

class Embedding(Module):
  """A lookup table: integer ids (any shape) -> rows of weight (num_embeddings, embedding_dim).

  >>> import tinyjx.random as random, tinyjx.numpy as jnp
  >>> Embedding(10, 4, key=random.PRNGKey(0))(jnp.array([[1, 2, 3]])).shape
  (1, 3, 4)
  """
  def __init__(self, num_embeddings: int, embedding_dim: int, *, key=None, dtype=jnp.float32):
    self.weight = random.normal(_need_key(key, 'Embedding'), (num_embeddings, embedding_dim), dtype)
    self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim

  def __call__(self, ids): return jnp.take(self.weight, ids, axis=0)

class Dropout(Module):
  """Zero elements with probability p, scaling the rest by 1 / (1 - p), when called with a `key`; without a key
  (evaluation) it is the identity."""
  takes_key = True
  def __init__(self, p: float = 0.5):
    if not 0.0 <= p < 1.0: raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
    self.p = p

  def __call__(self, x, key=None): return F.dropout(x, self.p, key)

class LSTMCell(Module):
  """One LSTM step, PyTorch's gates (input, forget, cell, output): `h, c = cell(x, (h, c))`; state None = zeros.

  >>> import tinyjx.random as random, tinyjx.numpy as jnp
  >>> h, c = LSTMCell(3, 5, key=random.PRNGKey(0))(jnp.ones((2, 3)))
  >>> h.shape, c.shape
  ((2, 5), (2, 5))
  """
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True, *, key=None, dtype=jnp.float32):
    keys = random.split(_need_key(key, 'LSTMCell'), 4)
    u = init.bound_uniform(1 / math.sqrt(hidden_size))
    self.weight_ih = u(keys[0], (4 * hidden_size, input_size), dtype)
    self.weight_hh = u(keys[1], (4 * hidden_size, hidden_size), dtype)
    self.bias_ih = u(keys[2], (4 * hidden_size,), dtype) if bias else None
    self.bias_hh = u(keys[3], (4 * hidden_size,), dtype) if bias else None
    self.input_size, self.hidden_size = input_size, hidden_size

  def __call__(self, x, state=None):
    if state is None:
      zeros = jnp.zeros(x.shape[:-1] + (self.hidden_size,), x.dtype)
      state = (zeros, zeros)
    h, c = state
    gates = jnp.matmul(x, self.weight_ih.T) + jnp.matmul(h, self.weight_hh.T)
    if self.bias_ih is not None: gates = gates + self.bias_ih + self.bias_hh
    i, f, g, o = jnp.split(gates, 4, axis=-1)
    c = tinyjx.nn.sigmoid(f) * c + tinyjx.nn.sigmoid(i) * jnp.tanh(g)
    return tinyjx.nn.sigmoid(o) * jnp.tanh(c), c

class MultiHeadAttention(Module):
  """Multi-head scaled dot-product attention over (..., L, E) inputs (batch first).

  `mha(query, key_, value, mask)`: key_ and value default to query (self-attention); mask is a bool array
  broadcastable to (..., heads, L, S), True where attention is allowed.

  >>> import tinyjx.random as random, tinyjx.numpy as jnp
  >>> MultiHeadAttention(8, 2, key=random.PRNGKey(0))(jnp.ones((3, 5, 8))).shape
  (3, 5, 8)
  """
  def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, kdim: int | None = None,
               vdim: int | None = None, *, key=None, dtype=jnp.float32):
    if embed_dim % num_heads:
      raise ValueError(f"MultiHeadAttention: embed_dim {embed_dim} must be divisible by num_heads {num_heads}")
    keys = random.split(_need_key(key, 'MultiHeadAttention'), 4)
    self.q_proj = Linear(embed_dim, embed_dim, bias, key=keys[0], dtype=dtype)
    self.k_proj = Linear(kdim or embed_dim, embed_dim, bias, key=keys[1], dtype=dtype)
    self.v_proj = Linear(vdim or embed_dim, embed_dim, bias, key=keys[2], dtype=dtype)
    self.out_proj = Linear(embed_dim, embed_dim, bias, key=keys[3], dtype=dtype)
    self.embed_dim, self.num_heads = embed_dim, num_heads

  def _heads(self, x):
    return jnp.swapaxes(x.reshape(x.shape[:-1] + (self.num_heads, self.embed_dim // self.num_heads)), -2, -3)

  def __call__(self, query, key_=None, value=None, mask=None):
    key_ = query if key_ is None else key_
    value = key_ if value is None else value
    q, k, v = self._heads(self.q_proj(query)), self._heads(self.k_proj(key_)), self._heads(self.v_proj(value))
    out = scaled_dot_product_attention(q, k, v, mask)
    out = jnp.swapaxes(out, -2, -3)
    return self.out_proj(out.reshape(out.shape[:-2] + (self.embed_dim,)))

def scaled_dot_product_attention(q, k, v, mask=None):
  """softmax(q k^T / sqrt(d), masked) v over the last two axes: q (..., L, d), k (..., S, d), v (..., S, dv)."""
  scores = jnp.matmul(q, jnp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
  if mask is not None: scores = jnp.where(mask, scores, jnp.full((), -1e30, scores.dtype))
  return jnp.matmul(tinyjx.nn.softmax(scores, axis=-1), v)

class Sequential(Module):
  """Layers applied in order; entries may be Modules or plain functions (`jnn.relu`, `nn.max_pool2d`, lambdas).

  `seq(x)` evaluates. `seq(x, train=True, key=k)` trains: layers with running state (`stateful`) run in training
  mode and come back updated, `Dropout` layers get keys split from `k`; it returns `(y, new_seq)`.

  >>> import tinyjx.random as random, tinyjx.numpy as jnp, tinyjx.nn as jnn
  >>> seq = Sequential(Linear(3, 4, key=random.PRNGKey(0)), jnn.relu, BatchNorm(4))
  >>> y, seq = seq(jnp.ones((2, 3)), train=True)
  >>> y.shape
  (2, 4)
  """
  stateful = True
  takes_key = True

  def __init__(self, *layers):
    self.layers = list(layers[0]) if len(layers) == 1 and isinstance(layers[0], (list, tuple)) else list(layers)

  def __len__(self) -> int: return len(self.layers)
  def __getitem__(self, i): return self.layers[i]
  def __iter__(self): return iter(self.layers)

  def __call__(self, x, train: bool = False, key=None):
    keyed = [i for i, layer in enumerate(self.layers) if getattr(layer, 'takes_key', False)]
    keys = dict(zip(keyed, random.split(key, len(keyed)))) if key is not None and keyed else {}
    new_layers = []
    for i, layer in enumerate(self.layers):
      kwargs = {'key': keys[i]} if i in keys else {}
      if train and getattr(layer, 'stateful', False):
        x, layer = layer(x, train=True, **kwargs)
      else:
        x = layer(x, **kwargs)
      new_layers.append(layer)
    return (x, self.replace(layers=new_layers)) if train else x
