"""Random contractions big enough for the CPU's tiled paths, and their gradients, against numpy in float64.

The differential fuzzer (tests/fuzz.py) keeps every value under 96 elements, so its matmuls and convolutions run as
plain loops and never reach a `MatmulPlan`. Here hypothesis draws the shapes the plans are made of instead: sizes
around the tile edges (12 rows, 32 columns, 16 with AVX2's 6 x 16 tiles) and the chunk lengths, x and y given
transposed or not, a batch, an epilogue (bias, ReLU, tanh), float32 and float64, and each program's gradients;
convolutions of any stride, padding and dilation, whose windows are x of a direct plan (forward, input gradient,
weight gradient, chunked or split); a weight gradient whose epilogue is an Adam update with three outputs. Every
result is the same bits on one thread and on three (`TINYJX_THREADS`): plans never let the thread count change a
sum's order."""
import numpy as np
from hypothesis import HealthCheck, example, given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax
from conftest import examples
from test_lax_conv import ref_conv

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
EDGES = [1, 2, 7, 11, 12, 13, 15, 16, 17, 31, 32, 33, 255, 256, 257, 513]
size = st.one_of(st.sampled_from(EDGES), st.integers(1, 600))

def on_threads(f, *args) -> list:
  """f's outputs (a tuple) jitted on the CPU device with one thread and with three: asserted the same bits."""
  outs = []
  for threads in (1, 3):
    with tinyjx.Context(TINYJX_DEVICE='CPU', TINYJX_THREADS=threads):
      outs.append([np.asarray(a) for a in tinyjx.jit(f)(*args)])
  for a, b in zip(*outs): assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), "threads changed bits"
  return outs[0]

@settings(max_examples=examples(40), **SETTINGS)
@given(m=size, k=size, n=size, batch=st.sampled_from([0, 0, 1, 3]), xt=st.booleans(), yt=st.booleans(),
       epilogue=st.sampled_from(['none', 'bias', 'relu', 'bias_relu', 'tanh']), f64=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_random_matmuls_and_their_gradients_match_numpy(cpu, m, k, n, batch, xt, yt, epilogue, f64, seed):
  """x @ y (x given as (k, m) and transposed where `xt`, y as (n, k) where `yt`), under an epilogue, and the
  gradients of <result, ct> with respect to x and y, against numpy in float64."""
  if m * k * n * max(batch, 1) > 3 * 10 ** 7: m = max(1, 3 * 10 ** 7 // (k * n * max(batch, 1)))
  dt = np.float64 if f64 else np.float32
  rng = np.random.default_rng(seed)
  lead = (batch,) if batch else ()
  x = rng.standard_normal(lead + ((k, m) if xt else (m, k))).astype(dt)
  y = rng.standard_normal(lead + ((n, k) if yt else (k, n))).astype(dt)
  b = rng.standard_normal(n).astype(dt)
  ct = rng.standard_normal(lead + (m, n)).astype(dt)
  swap = lambda a: jnp.swapaxes(a, -1, -2)
  def f(x, y, b):
    z = (swap(x) if xt else x) @ (swap(y) if yt else y)
    if epilogue in ('bias', 'bias_relu'): z = z + b
    if epilogue in ('relu', 'bias_relu'): z = jnp.maximum(z, 0)
    return jnp.tanh(z) * 2 if epilogue == 'tanh' else z
  def loss(x, y, b): return jnp.sum(f(x, y, b) * ct)
  both = lambda x, y, b: (f(x, y, b), *tinyjx.grad(loss, argnums=(0, 1))(x, y, b))
  with tinyjx.Context(JAX_ENABLE_X64=True):
    got = on_threads(both, x, y, b)
  x64, y64 = (np.swapaxes(a, -1, -2) if t else a for a, t in ((x.astype(np.float64), xt), (y.astype(np.float64), yt)))
  z = x64 @ y64
  pre = z + b if epilogue in ('bias', 'bias_relu') else z
  # (the ReLU's gradient is taken on the side of 0 tinyjx's own value is on: a pre-activation within rounding of 0
  # may land on either side, and its whole row of products with it)
  if epilogue in ('relu', 'bias_relu'): want, slope = np.maximum(pre, 0), got[0] > 0
  elif epilogue == 'tanh': want, slope = np.tanh(pre) * 2, 2 * (1 - np.tanh(pre) ** 2)
  else: want, slope = pre, 1.0
  dz = ct * slope
  dx, dy = dz @ np.swapaxes(y64, -1, -2), np.swapaxes(x64, -1, -2) @ dz
  if xt: dx = np.swapaxes(dx, -1, -2)
  if yt: dy = np.swapaxes(dy, -1, -2)
  tol = (1e-11 if f64 else 2e-5) * np.sqrt(k)
  for name, g, w in (('value', got[0], want), ('dx', got[1], dx), ('dy', got[2], dy)):
    assert g.shape == w.shape and g.dtype == dt, name
    scale = 1 + np.abs(w).max()
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"{name} m={m} k={k} n={n} {dt.__name__}")

@settings(max_examples=examples(25), **SETTINGS)
@given(m=size, k=size, n=size, f64=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_random_weight_gradients_under_an_adam_update_match_numpy(cpu, m, k, n, f64, seed):
  """A weight gradient g = x.T @ d read only by an Adam update of w and its moments, the three outputs of the
  matmul's epilogue (schedule `_shared_epilogue`: one kernel stores all three from each tile and g is never
  written), against numpy in float64; the same bits on one thread and on three."""
  if m * k * n > 3 * 10 ** 7: m = max(1, 3 * 10 ** 7 // (k * n))
  dt = np.float64 if f64 else np.float32
  rng = np.random.default_rng(seed)
  x, d = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((m, n)).astype(dt)
  w, mo = rng.standard_normal((k, n)).astype(dt), rng.standard_normal((k, n)).astype(dt)
  v = rng.uniform(0.5, 1.5, (k, n)).astype(dt)            # sqrt(v) well away from 0: the update is well conditioned
  b1, b2, lr, t = 0.9, 0.999, 1e-3, 3
  def adam(w, mo, v, x, d):
    g = x.T @ d
    mo2, v2 = b1 * mo + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    return w - lr * (mo2 / (1 - b1 ** t)) / (jnp.sqrt(v2 / (1 - b2 ** t)) + 1e-8), mo2, v2
  with tinyjx.Context(JAX_ENABLE_X64=True):
    got = on_threads(adam, w, mo, v, x, d)
  g = x.astype(np.float64).T @ d.astype(np.float64)
  mo2, v2 = b1 * mo + (1 - b1) * g, b2 * v + (1 - b2) * g * g
  want = (w - lr * (mo2 / (1 - b1 ** t)) / (np.sqrt(v2 / (1 - b2 ** t)) + 1e-8), mo2, v2)
  tol = (1e-11 if f64 else 2e-5) * np.sqrt(m)
  for name, a, b in zip(('w', 'm', 'v'), got, want):
    assert a.shape == b.shape and a.dtype == dt, name
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * (1 + np.abs(b).max()),
                               err_msg=f"{name} m={m} k={k} n={n} {dt.__name__}")

def ref_conv_grads(x, k, dz, strides, pads, dilation):
  """The gradients of <conv(x, k), dz> (NCHW, OIHW, explicit non-negative pads) with respect to x and k, in float64,
  one kernel tap at a time: each tap's window of the padded input is what it multiplies."""
  (lo0, hi0), (lo1, hi1) = pads
  xp = np.pad(x, ((0, 0), (0, 0), (lo0, hi0), (lo1, hi1)))
  dxp, dk = np.zeros_like(xp), np.zeros_like(k)
  oh, ow = dz.shape[2:]
  for a in range(k.shape[2]):
    for b in range(k.shape[3]):
      rows = slice(a * dilation[0], a * dilation[0] + (oh - 1) * strides[0] + 1, strides[0])
      cols = slice(b * dilation[1], b * dilation[1] + (ow - 1) * strides[1] + 1, strides[1])
      dk[:, :, a, b] = np.einsum('nopq,ncpq->oc', dz, xp[:, :, rows, cols])
      dxp[:, :, rows, cols] += np.einsum('nopq,oc->ncpq', dz, k[:, :, a, b])
  return dxp[:, :, lo0:lo0 + x.shape[2], lo1:lo1 + x.shape[3]], dk

@settings(max_examples=examples(30), **SETTINGS)
@given(n=st.integers(1, 4), c=st.sampled_from([1, 2, 3, 8, 13, 32]), o=st.sampled_from([1, 5, 12, 16, 33, 40]),
       h=st.integers(4, 24), w=st.integers(4, 24), kh=st.integers(1, 5), kw=st.integers(1, 5),
       stride=st.sampled_from([(1, 1), (1, 1), (2, 2), (1, 2)]), dilation=st.sampled_from([(1, 1), (1, 1), (2, 1)]),
       padding=st.sampled_from(['VALID', 'SAME', 'explicit']), f64=st.booleans(), seed=st.integers(0, 2 ** 16))
@example(n=1, c=1, o=1, h=4, w=5, kh=1, kw=1, stride=(1, 2), dilation=(1, 1), padding='explicit', f64=False, seed=0)
def test_random_convolutions_and_their_gradients_match_the_references(cpu, n, c, o, h, w, kh, kw, stride, dilation,
                                                                       padding, f64, seed):
  """lax.conv_general_dilated (NCHW, OIHW) with a bias and ReLU after it, and the gradients of <result, ct> with
  respect to the input, the kernel and the bias, against numpy loops over the kernel's taps in float64. (The
  example is the first program this found wrong: GCC 12 vectorized the kernel gradient's sum wrongly, kept away
  by TJX_KEEP_LOOP; tests/test_lower.py has it too.)"""
  if (h - 1) < (kh - 1) * dilation[0] or (w - 1) < (kw - 1) * dilation[1]: kh, kw = 1, 1
  dt = np.float64 if f64 else np.float32
  rng = np.random.default_rng(seed)
  x, k = rng.standard_normal((n, c, h, w)).astype(dt), rng.standard_normal((o, c, kh, kw)).astype(dt)
  bias = rng.standard_normal(o).astype(dt)
  window = ((kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1)
  pads = [(1, 2), (0, 1)] if padding == 'explicit' else lax.padtype_to_pads((h, w), window, stride, padding)
  def f(x, k, bias):
    return jnp.maximum(lax.conv_general_dilated(x, k, stride, pads, rhs_dilation=dilation) + bias[:, None, None], 0)
  x64, k64 = x.astype(np.float64), k.astype(np.float64)
  pre = ref_conv(x64, k64, stride, pads, (1, 1), dilation) + bias[:, None, None]
  ct = rng.standard_normal(pre.shape).astype(dt)
  loss = lambda *a: jnp.sum(f(*a) * ct)
  both = lambda x, k, bias: (f(x, k, bias), *tinyjx.grad(loss, argnums=(0, 1, 2))(x, k, bias))
  with tinyjx.Context(JAX_ENABLE_X64=True):
    got = on_threads(both, x, k, bias)
  dz = ct * (got[0] > 0)                          # (the ReLU's side of 0 is tinyjx's own, as for the matmuls)
  dx, dk = ref_conv_grads(x64, k64, dz, stride, pads, dilation)
  tol = (1e-11 if f64 else 3e-5) * np.sqrt(c * kh * kw * n)
  for name, g, v in (('value', got[0], np.maximum(pre, 0)), ('dx', got[1], dx), ('dk', got[2], dk),
                     ('dbias', got[3], dz.sum((0, 2, 3)))):
    assert g.shape == v.shape and g.dtype == dt, name
    np.testing.assert_allclose(g, v, rtol=tol, atol=tol * (1 + np.abs(v).max()),
                               err_msg=f"{name} x {x.shape} k {k.shape} {stride} {pads} {dilation} {dt.__name__}")
