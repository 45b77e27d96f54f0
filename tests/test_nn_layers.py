"""nn layers and functional ops against numpy references on small inputs: forward values, and gradients against
finite differences of the numpy reference (in float64)."""
import itertools, math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.random as random
import nn
from nn import functional as F
from conftest import examples

RNG = np.random.default_rng(0)
def rand(*shape): return RNG.standard_normal(shape).astype(np.float32)
def close(a, b, tol=1e-4): np.testing.assert_allclose(np.asarray(a), b, rtol=tol, atol=tol)

# ---------------------------------------------------------------- numpy references (float64, written as loops)

def ref_conv(x, w, b=None, stride=(1, 1), pads=((0, 0), (0, 0)), dilation=(1, 1), groups=1):
  n = w.ndim - 2
  x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [tuple(p) for p in pads])
  N, C = x.shape[:2]
  O, Cg, K = w.shape[0], w.shape[1], w.shape[2:]
  out = [(x.shape[2 + i] - dilation[i] * (K[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
  y = np.zeros((N, O, *out))
  og = O // groups
  for o in range(O):
    g = o // og
    for pos in itertools.product(*[range(s) for s in out]):
      acc = np.zeros(N)
      for k in itertools.product(*[range(s) for s in K]):
        idx = tuple(p * s + kk * d for p, s, kk, d in zip(pos, stride, k, dilation))
        acc += np.einsum('nc,c->n', x[(slice(None), slice(g * Cg, (g + 1) * Cg)) + idx], w[(o, slice(None)) + k])
      y[(slice(None), o) + pos] = acc
  return y if b is None else y + b.reshape((1, O) + (1,) * n)

def ref_conv_transpose(x, w, b, stride, padding, output_padding, dilation, groups):
  """Scatter form: each input element adds x * kernel at output position i * stride + k * dilation - padding."""
  N, Cin, H, W = x.shape
  cout_g, (kh, kw) = w.shape[1], w.shape[2:]
  OH = (H - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
  OW = (W - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
  y = np.zeros((N, cout_g * groups, OH, OW))
  cin_g = Cin // groups
  for c, i, j, ki, kj in itertools.product(range(Cin), range(H), range(W), range(kh), range(kw)):
    oi, oj = i * stride[0] + ki * dilation[0] - padding[0], j * stride[1] + kj * dilation[1] - padding[1]
    if 0 <= oi < OH and 0 <= oj < OW:
      g = c // cin_g
      y[:, g * cout_g:(g + 1) * cout_g, oi, oj] += x[:, c, i, j, None] * w[c, :, ki, kj][None]
  return y if b is None else y + b.reshape(1, -1, 1, 1)

def ref_pool(x, k, s, pads, reduce, pad_value):
  x = np.pad(x.astype(np.float64), [(0, 0)] * (x.ndim - 2) + list(pads), constant_values=pad_value)
  H, W = x.shape[-2:]
  oh, ow = (H - k[0]) // s[0] + 1, (W - k[1]) // s[1] + 1
  out = np.zeros(x.shape[:-2] + (oh, ow))
  for i, j in itertools.product(range(oh), range(ow)):
    out[..., i, j] = reduce(x[..., i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]], axis=(-2, -1))
  return out

def numeric_grad(f, x, eps=1e-3):
  """d sum(f(x)) / dx by central differences in float64."""
  x = x.astype(np.float64)
  g = np.zeros_like(x)
  for i in np.ndindex(x.shape):
    d = np.zeros_like(x); d[i] = eps
    g[i] = (np.sum(f(x + d)) - np.sum(f(x - d))) / (2 * eps)
  return g

def check_grads(model_fn, ref_fn, args: list, tol=2e-3):
  """grad of sum(model_fn(*args) * r) by tinyjx against finite differences of the numpy reference."""
  r = RNG.standard_normal(np.shape(ref_fn(*[a.astype(np.float64) for a in args])))
  grads = tinyjx.grad(lambda *a: jnp.sum(model_fn(*a) * r.astype(np.float32)), argnums=tuple(range(len(args))))(
    *[jnp.asarray(a) for a in args])
  for i, a in enumerate(args):
    def f(v, i=i): return ref_fn(*[v if j == i else b.astype(np.float64) for j, b in enumerate(args)]) * r
    np.testing.assert_allclose(np.asarray(grads[i]), numeric_grad(f, a), rtol=tol, atol=tol)

# ---------------------------------------------------------------- Linear

def test_linear_forward_and_grad():
  layer = nn.Linear(4, 3, key=random.PRNGKey(0))
  w, b = np.asarray(layer.weight), np.asarray(layer.bias)
  assert np.all(np.abs(w) <= 0.5) and w.shape == (3, 4) and b.shape == (3,)   # U(+-1/sqrt(4))
  x = rand(5, 4)
  close(layer(jnp.asarray(x)), x @ w.T + b)
  check_grads(lambda x, w, b: nn.Linear(4, 3, key=random.PRNGKey(0)).replace(weight=w, bias=b)(x),
              lambda x, w, b: x @ w.T + b, [x, w, b])
  assert nn.Linear(4, 3, bias=False, key=random.PRNGKey(0)).bias is None

def test_linear_grad_through_module():
  layer = nn.Linear(3, 2, key=random.PRNGKey(1))
  x = rand(4, 3)
  g = tinyjx.grad(lambda m: jnp.sum(m(jnp.asarray(x)) ** 2))(layer)
  assert isinstance(g, nn.Linear) and g.in_features == 3
  y = x @ np.asarray(layer.weight).T + np.asarray(layer.bias)
  close(g.weight, 2 * y.T @ x)
  close(g.bias, 2 * y.sum(0))

def test_missing_key_is_a_clear_error():
  with pytest.raises(TypeError, match=r'key=tinyjx.random.PRNGKey'): nn.Linear(2, 3)

# ---------------------------------------------------------------- convolutions

CONV_CASES = [  # (in, out, kernel, stride, padding, dilation, groups, spatial)
  (2, 3, (3, 3), 1, 0, 1, 1, (6, 5)),
  (2, 4, (3, 2), (2, 1), 1, 1, 2, (7, 6)),
  (3, 3, (3, 3), 1, 'same', 2, 3, (6, 6)),
  (1, 2, (5, 5), 1, 'valid', 1, 1, (8, 8)),
  (4, 2, (1, 1), 2, ((1, 0), (0, 2)), 1, 2, (5, 5)),
  (2, 2, (2, 3), 2, 'same', 1, 1, (5, 7)),
]

@pytest.mark.parametrize('cin, cout, k, stride, padding, dilation, groups, spatial', CONV_CASES)
def test_conv2d_forward(cin, cout, k, stride, padding, dilation, groups, spatial):
  layer = nn.Conv2d(cin, cout, k, stride, padding, dilation, groups, key=random.PRNGKey(3))
  x = rand(2, cin, *spatial)
  w, b = np.asarray(layer.weight), np.asarray(layer.bias)
  pads = F._padding(layer.padding, 2, spatial, layer.kernel_size, layer.stride, layer.dilation)
  want = ref_conv(x, w, b, layer.stride, pads, layer.dilation, groups)
  close(layer(jnp.asarray(x)), want)
  if padding == 'same' and stride == 1: assert want.shape[2:] == spatial

def test_conv2d_grad():
  layer = nn.Conv2d(2, 4, 3, stride=2, padding=1, groups=2, key=random.PRNGKey(4))
  x, w, b = rand(1, 2, 5, 5), np.asarray(layer.weight), np.asarray(layer.bias)
  check_grads(lambda x, w, b: F.conv(x, w, b, 2, 1, 1, 2),
              lambda x, w, b: ref_conv(x, w, b, (2, 2), ((1, 1), (1, 1)), (1, 1), 2), [x, w, b])

def test_conv1d_forward_and_grad():
  layer = nn.Conv1d(2, 3, 3, stride=2, padding=2, dilation=2, key=random.PRNGKey(5))
  x, w, b = rand(2, 2, 9), np.asarray(layer.weight), np.asarray(layer.bias)
  ref = lambda x, w, b: ref_conv(x, w, b, (2,), ((2, 2),), (2,), 1)
  close(layer(jnp.asarray(x)), ref(x, w, b))
  check_grads(lambda x, w, b: F.conv(x, w, b, 2, 2, 2), ref, [x[:1], w, b])

@settings(max_examples=examples(25), deadline=None)
@given(st.integers(1, 3), st.integers(1, 2), st.integers(1, 3), st.integers(1, 2), st.integers(0, 2), st.integers(1, 2),
       st.integers(5, 8))
def test_conv2d_random_configs(cin, cout, k, stride, pad, dilation, size):
  if size + 2 * pad < dilation * (k - 1) + 1: return
  x, w = rand(1, cin, size, size), rand(cout, cin, k, k)
  close(F.conv(jnp.asarray(x), jnp.asarray(w), None, stride, pad, dilation),
        ref_conv(x, w, None, (stride, stride), ((pad, pad), (pad, pad)), (dilation, dilation)))

def _conv_by_ad(x, w, stride, padding, dilation, groups):
  """The convolution with every derivative left to tinyjx's AD (no custom rules): the reference for them."""
  n, kernel = w.ndim - 2, tuple(w.shape[2:])
  st, di = F.int_tuple(stride, n, 'stride'), F.int_tuple(dilation, n, 'dilation')
  x = F._pad_spatial(x, F._padding(padding, n, x.shape[2:], kernel, st, di))
  return F._contract(x, w, kernel, st, di, F._out_sizes(x.shape[2:], kernel, st, di, 'conv', x.shape), groups)

@pytest.mark.parametrize('xs, ws, stride, padding, dilation, groups', [
  ((2, 3, 9, 10), (4, 3, 3, 3), 1, 0, 1, 1), ((2, 4, 11, 9), (6, 2, 3, 2), 2, 1, 1, 2),
  ((1, 2, 12, 13), (3, 2, 2, 3), (3, 2), 'same', (2, 1), 1), ((2, 2, 7), (2, 2, 3), 2, 0, 2, 1)])
def test_conv_custom_rules_match_autodiff(xs, ws, stride, padding, dilation, groups):
  """conv's hand-written derivatives (the input gradient as a transposed convolution; forward mode through the
  function itself) agree with AD of the plain formulation in every mode and order, under jit and vmap."""
  x, w = jnp.asarray(rand(*xs)), jnp.asarray(rand(*ws))
  f = lambda x, w: jnp.sum(jnp.tanh(F.conv(x, w, None, stride, padding, dilation, groups)))
  g = lambda x, w: jnp.sum(jnp.tanh(_conv_by_ad(x, w, stride, padding, dilation, groups)))
  def modes(f):
    return [tinyjx.grad(f, (0, 1))(x, w), tinyjx.jit(tinyjx.grad(f, (0, 1)))(x, w),
            tinyjx.jvp(f, (x, w), (x * 0.3, w * 0.7))[1],
            tinyjx.grad(lambda w: jnp.sum(tinyjx.grad(f)(x, w) ** 2))(w),
            tinyjx.jvp(lambda w: tinyjx.grad(f, 1)(x, w), (w,), (w * 0.5,))[1],
            tinyjx.jvp(lambda w: tinyjx.jvp(lambda w: f(x, w), (w,), (w,))[1], (w,), (w * 0.5,))[1],
            tinyjx.vmap(tinyjx.grad(lambda xi, w: f(xi[None], w), 1), (0, None))(x, w)]
  for got, want in zip(modes(f), modes(g)):
    for a, b in zip(tinyjx.tree_util.tree_leaves(got), tinyjx.tree_util.tree_leaves(want)):
      b = np.asarray(b)
      np.testing.assert_allclose(np.asarray(a), b, rtol=1e-4, atol=1e-4 * (np.abs(b).max() + 1))

TRANSPOSE_CASES = [  # (in, out, kernel, stride, padding, output_padding, dilation, groups)
  (2, 3, 3, 1, 0, 0, 1, 1),
  (2, 2, 3, 2, 1, 1, 1, 1),
  (4, 2, 2, 2, 0, 0, 1, 2),
  (1, 2, 3, 3, 2, 0, 2, 1),
]

@pytest.mark.parametrize('cin, cout, k, stride, padding, output_padding, dilation, groups', TRANSPOSE_CASES)
def test_conv_transpose2d_forward(cin, cout, k, stride, padding, output_padding, dilation, groups):
  layer = nn.ConvTranspose2d(cin, cout, k, stride, padding, output_padding, groups, dilation=dilation,
                             key=random.PRNGKey(6))
  x = rand(2, cin, 4, 3)
  want = ref_conv_transpose(x, np.asarray(layer.weight), np.asarray(layer.bias), layer.stride, layer.padding,
                            layer.output_padding, layer.dilation, groups)
  got = layer(jnp.asarray(x))
  assert got.shape == want.shape
  close(got, want)

def test_conv_transpose_is_the_transpose_of_conv():
  x, w = rand(1, 2, 4, 4), rand(2, 3, 3, 3)   # conv_transpose weight (in=2, out=3): conv weight (out=2, in=3)
  ct = lambda y: F.conv_transpose(y, jnp.asarray(w), None, 2, 1)
  y = jnp.asarray(rand(1, 3, 7, 7))
  _, vjp = tinyjx.vjp(lambda v: F.conv(v, jnp.asarray(w), None, 2, 1), y)
  close(vjp(jnp.asarray(x))[0], np.asarray(ct(jnp.asarray(x))))

def test_conv_transpose_grad():
  x, w = rand(1, 2, 3, 3), rand(2, 1, 2, 2)
  check_grads(lambda x, w: F.conv_transpose(x, w, None, 2, 0),
              lambda x, w: ref_conv_transpose(x, w, None, (2, 2), (0, 0), (0, 0), (1, 1), 1), [x, w])

def test_conv_errors():
  with pytest.raises(ValueError, match=r'input channels 3 .* must equal weight.shape\[1\] \* groups'):
    F.conv(jnp.ones((1, 3, 5, 5)), jnp.ones((2, 2, 3, 3)))
  with pytest.raises(ValueError, match='smaller than the kernel'):
    F.conv(jnp.ones((1, 1, 2, 2)), jnp.ones((1, 1, 3, 3)))
  with pytest.raises(ValueError, match="padding must be 'same', 'valid'"):
    F.conv(jnp.ones((1, 1, 5, 5)), jnp.ones((1, 1, 3, 3)), padding='full')
  with pytest.raises(ValueError, match='divisible by groups=2'): nn.Conv2d(3, 4, 3, groups=2, key=random.PRNGKey(0))

# ---------------------------------------------------------------- pooling

@pytest.mark.parametrize('k, s, p', [(2, None, 0), (3, 2, 1), (2, 1, 0), ((3, 2), (1, 2), (1, 0))])
def test_pooling_forward(k, s, p):
  x = rand(2, 3, 7, 6)
  kk = F.int_tuple(k, 2, 'k'); ss = kk if s is None else F.int_tuple(s, 2, 's')
  pads = [(pp, pp) for pp in F.int_tuple(p, 2, 'p')]
  if x.shape[2] % kk[0] == 0 or s is not None or p:
    close(F.max_pool2d(jnp.asarray(x), k, s, p), ref_pool(x, kk, ss, pads, np.max, -np.inf))
    close(F.avg_pool2d(jnp.asarray(x), k, s, p), ref_pool(x, kk, ss, pads, np.sum, 0.0) / math.prod(kk))

def test_tiled_pooling_and_grad():
  # distinct values 0.1 apart: no window holds a near-tie, so finite differences of max pooling are exact
  x = (np.random.default_rng(7).permutation(96).reshape(2, 2, 4, 6) * 0.1).astype(np.float32)
  close(F.max_pool2d(jnp.asarray(x), 2), ref_pool(x, (2, 2), (2, 2), [(0, 0)] * 2, np.max, -np.inf))
  close(F.avg_pool2d(jnp.asarray(x), (2, 3)), ref_pool(x, (2, 3), (2, 3), [(0, 0)] * 2, np.mean, 0.0))
  check_grads(lambda x: F.max_pool2d(x, 2), lambda x: ref_pool(x, (2, 2), (2, 2), [(0, 0)] * 2, np.max, -np.inf), [x])
  check_grads(lambda x: F.avg_pool2d(x, 3, 2, 1),
              lambda x: ref_pool(x, (3, 3), (2, 2), [(1, 1)] * 2, np.sum, 0.0) / 9, [x[:1, :1]])

def test_avg_pool_without_padding_in_count():
  x = rand(1, 1, 4, 4)
  counts = ref_pool(np.ones_like(x), (3, 3), (2, 2), [(1, 1)] * 2, np.sum, 0.0)
  close(F.avg_pool2d(jnp.asarray(x), 3, 2, 1, count_include_pad=False),
        ref_pool(x, (3, 3), (2, 2), [(1, 1)] * 2, np.sum, 0.0) / counts)

def test_pool1d():
  x = rand(2, 3, 7)
  close(F.max_pool1d(jnp.asarray(x), 3, 2), np.stack([x[..., i:i + 3].max(-1) for i in (0, 2, 4)], -1))

# ---------------------------------------------------------------- normalization

def test_batchnorm_train_and_eval():
  bn = nn.BatchNorm(3, momentum=0.1)
  bn = bn.replace(weight=jnp.asarray([1.0, 2.0, 0.5]), bias=jnp.asarray([0.0, 1.0, -1.0]))
  x = rand(4, 3, 2, 2) * 3 + 1
  y, new = bn(jnp.asarray(x), train=True)
  mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
  shape = (1, 3, 1, 1)
  want = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * np.array([1, 2, 0.5]).reshape(shape) + \
    np.array([0, 1, -1]).reshape(shape)
  close(y, want)
  close(new.running_mean, 0.1 * mean)
  close(new.running_var, 0.9 + 0.1 * var * 16 / 15)   # unbiased, as PyTorch
  np.testing.assert_array_equal(np.asarray(bn.running_mean), np.zeros(3))   # the old layer is unchanged
  y_eval = new(jnp.asarray(x))
  rm, rv = np.asarray(new.running_mean).reshape(shape), np.asarray(new.running_var).reshape(shape)
  scale, shift = np.array([1, 2, 0.5]).reshape(shape), np.array([0, 1, -1]).reshape(shape)
  close(y_eval, (x - rm) / np.sqrt(rv + 1e-5) * scale + shift)

def test_batchnorm_grad_and_state_mask():
  x = rand(3, 2, 2)
  def ref(x, w, b):
    m, v = x.mean((0, 2), keepdims=True), x.var((0, 2), keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * w.reshape(1, 2, 1) + b.reshape(1, 2, 1)
  w, b = rand(2), rand(2)
  check_grads(lambda x, w, b: nn.BatchNorm(2).replace(weight=w, bias=b)(x, train=True)[0], ref, [x, w, b])
  mask = nn.trainable_mask(nn.BatchNorm(2))
  assert (mask.weight, mask.bias, mask.running_mean, mask.running_var) == (True, True, False, False)

def test_batchnorm_in_jit_carries_state():
  bn = nn.BatchNorm(2)
  step = tinyjx.jit(lambda bn, x: bn(x, train=True))
  x = jnp.asarray(rand(8, 2) + 5)
  for _ in range(3): _, bn = step(bn, x)
  close(bn.running_mean, (1 - 0.9 ** 3) * np.asarray(x).mean(0))

def test_layernorm_rmsnorm_groupnorm():
  x = rand(2, 4, 3)
  ln = nn.LayerNorm((4, 3)).replace(weight=jnp.asarray(rand(4, 3)), bias=jnp.asarray(rand(4, 3)))
  m, v = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
  close(ln(jnp.asarray(x)), (x - m) / np.sqrt(v + 1e-5) * np.asarray(ln.weight) + np.asarray(ln.bias))
  rms = nn.RMSNorm(3, eps=1e-6)
  close(rms(jnp.asarray(x)), x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6))
  gn = nn.GroupNorm(2, 4).replace(weight=jnp.asarray(rand(4)), bias=jnp.asarray(rand(4)))
  g = x.reshape(2, 2, 6)
  want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(2, 4, 3)
  close(gn(jnp.asarray(x)), want * np.asarray(gn.weight)[None, :, None] + np.asarray(gn.bias)[None, :, None])

def test_norm_grads():
  x = rand(2, 3)
  check_grads(lambda x: F.layer_norm(x, (3,)),
              lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), [x])
  check_grads(lambda x: F.rms_norm(x, (3,)), lambda x: x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6), [x])

# ---------------------------------------------------------------- Embedding, Dropout, LSTMCell, attention

def test_embedding():
  emb = nn.Embedding(5, 3, key=random.PRNGKey(0))
  ids = np.array([[0, 4, 4], [2, 1, 0]])
  close(emb(jnp.asarray(ids)), np.asarray(emb.weight)[ids])
  g = tinyjx.grad(lambda e: jnp.sum(e(jnp.asarray(ids))))(emb)
  close(g.weight, np.bincount(ids.ravel(), minlength=5)[:, None] * np.ones((1, 3)))

def test_dropout():
  d = nn.Dropout(0.25)
  x = jnp.ones((200, 50))
  assert d(x) is x
  y = np.asarray(d(x, key=random.PRNGKey(0)))
  assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1) / np.float32(0.75))}
  assert abs((y == 0).mean() - 0.25) < 0.02
  assert not np.array_equal(y, np.asarray(d(x, key=random.PRNGKey(1))))
  with pytest.raises(ValueError, match=r'p must be in \[0, 1\)'): nn.Dropout(1.0)

def ref_lstm(x, h, c, wih, whh, bih, bhh):
  sig = lambda v: 1 / (1 + np.exp(-v))
  i, f, g, o = np.split(x @ wih.T + h @ whh.T + bih + bhh, 4, axis=-1)
  c = sig(f) * c + sig(i) * np.tanh(g)
  return sig(o) * np.tanh(c), c

def test_lstm_cell():
  cell = nn.LSTMCell(3, 4, key=random.PRNGKey(2))
  x, h, c = rand(2, 3), rand(2, 4), rand(2, 4)
  p = [np.asarray(a) for a in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
  h2, c2 = cell(jnp.asarray(x), (jnp.asarray(h), jnp.asarray(c)))
  wh, wc = ref_lstm(x, h, c, *p)
  close(h2, wh); close(c2, wc)
  check_grads(lambda x, h: cell(x, (h, jnp.asarray(c)))[0], lambda x, h: ref_lstm(x, h, c, *p)[0], [x, h])

def ref_mha(q, k, v, mha, mask=None):
  W = lambda lin: (np.asarray(lin.weight), np.asarray(lin.bias))
  heads = mha.num_heads
  def proj(x, lin): w, b = W(lin); return x @ w.T + b
  def split(x): return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)
  Q, K, V = split(proj(q, mha.q_proj)), split(proj(k, mha.k_proj)), split(proj(v, mha.v_proj))
  s = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(Q.shape[-1])
  if mask is not None: s = np.where(mask, s, -1e30)
  a = np.exp(s - s.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
  o = (a @ V).transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], -1)
  return proj(o, mha.out_proj)

def test_multihead_attention():
  mha = nn.MultiHeadAttention(8, 2, key=random.PRNGKey(3))
  q, kv = rand(2, 3, 8), rand(2, 5, 8)
  close(mha(jnp.asarray(q), jnp.asarray(kv)), ref_mha(q, kv, kv, mha))
  causal = np.tril(np.ones((3, 3), bool))
  close(mha(jnp.asarray(q), mask=jnp.asarray(causal)), ref_mha(q, q, q, mha, causal))

# ---------------------------------------------------------------- Sequential and Module behaviour

def test_sequential_threads_state_and_keys():
  keys = random.split(random.PRNGKey(0), 2)
  seq = nn.Sequential([nn.Linear(3, 4, key=keys[0]), tinyjx.nn.relu, nn.BatchNorm(4), nn.Dropout(0.5),
                       nn.Linear(4, 2, key=keys[1])])
  x = jnp.asarray(rand(6, 3))
  y_eval = seq(x)
  assert y_eval.shape == (6, 2)
  y, new = seq(x, train=True, key=random.PRNGKey(1))
  assert isinstance(new, nn.Sequential) and new[1] is tinyjx.nn.relu
  assert not np.allclose(np.asarray(new[2].running_mean), 0)
  np.testing.assert_array_equal(np.asarray(new[0].weight), np.asarray(seq[0].weight))
  y2, _ = seq(x, train=True)   # no key: dropout is off
  h = np.maximum(np.asarray(x) @ np.asarray(seq[0].weight).T + np.asarray(seq[0].bias), 0)
  hn = (h - h.mean(0)) / np.sqrt(h.var(0) + 1e-5)
  close(y2, hn @ np.asarray(seq[4].weight).T + np.asarray(seq[4].bias))

def test_module_repr_and_tree():
  seq = nn.Sequential(nn.Conv2d(1, 2, 3, key=random.PRNGKey(0)), tinyjx.nn.relu, nn.max_pool2d)
  text = repr(seq)
  assert 'Conv2d(' in text and 'weight=f32[2,1,3,3]' in text and 'relu' in text and 'max_pool2d' in text
  leaves = tinyjx.tree_util.tree_leaves(seq)
  assert [l.shape for l in leaves] == [(2, 1, 3, 3), (2,)]
  mapped = tinyjx.tree_util.tree_map(lambda l: 0, seq)   # leaves replaced by anything keep the structure
  assert tinyjx.tree_util.tree_structure(mapped) == tinyjx.tree_util.tree_structure(seq)

def test_module_through_vmap_and_jit():
  lin = nn.Linear(3, 2, key=random.PRNGKey(0))
  xs = jnp.asarray(rand(5, 3))
  close(tinyjx.vmap(lin)(xs), np.asarray(lin(xs)))
  close(tinyjx.jit(lambda m, x: m(x))(lin, xs), np.asarray(lin(xs)))
  stacked = tinyjx.tree_util.tree_map(lambda a: jnp.stack([a, a * 2]), lin)   # a batch of two models
  out = tinyjx.vmap(lambda m, x: m(x), in_axes=(0, None))(stacked, xs)
  close(out[1], np.asarray(xs) @ (2 * np.asarray(lin.weight)).T + 2 * np.asarray(lin.bias))

def test_static_fields_retrace_jit():
  class Scale(nn.Module):
    def __init__(self, factor): self.w, self.factor = jnp.ones(2), factor
    def __call__(self, x): return self.w * x * self.factor
  f = tinyjx.jit(lambda m, x: m(x))
  assert np.asarray(f(Scale(2.0), jnp.ones(2))).tolist() == [2.0, 2.0]
  assert np.asarray(f(Scale(3.0), jnp.ones(2))).tolist() == [3.0, 3.0]

def test_replace_unknown_field():
  with pytest.raises(AttributeError, match="no field 'wieght'"):
    nn.Linear(2, 2, key=random.PRNGKey(0)).replace(wieght=1)
