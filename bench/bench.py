"""bench: tinyjx against numpy (and JAX and PyTorch, when they are importable) on the workloads of DESIGN section 11.

Run from the repository root: `python bench/bench.py`, or with a Python that has JAX and PyTorch installed (a
test-only virtual environment, never a dependency: `pip install jax torch==2.13.0`) to add them. A peer that is not
installed is said so and skipped. Prints one table, a row per workload of issue 13 (W1-W7, and fft2 and a transpose): the median
time per library (of at least 20 calls and a quarter second of them; each library timed in a process of its own, the
best of two turns), tinyjx's speedup over numpy and over the best peer (above 1: faster), tinyjx's GFLOP/s where the
flop count is well defined and its GB/s (the bytes the workload must read and write, at least) for the memory-bound
rows, and the issue's bar with the ratio it is judged on and whether it is met (`yes`, `no`, or `?` where a peer it
needs is not installed). The `limit` column is the machine's, measured in tinyjx's worker beside it: for W1 a C loop
on two threads that reads W1's three inputs and writes its output (the memory stream of the same bytes, timed
alternately with tinyjx's calls: W1's copy ratio is tinyjx's time from those alternate calls over the stream's,
while the tinyjx column, like every peer's, is timed without the stream in between, which evicts the inputs from
cache and wakes its own threads), for the W2 matmuls the time of their flops at the float32 FMA peak measured by a C
loop on all cores (the bar prints that peak and tinyjx's share of it), for W4 the same for its step's matmuls; both
probes are built by tinyjx's CPU toolchain. Below the table, W1's floor: the same loop with streaming stores (about
the least time in which a program can move W1's bytes), against the time W1's bar asks for; and W4's: the share of
the FMA peak its bar asks of the step's matmuls. W5 is examples/mnist.py's CNN step (batch 128, Adam) against
first_call.py's JAX version and mnist_torch.py's PyTorch model; W6 is `vmap(grad(loss))` of a linear 1024-to-10
model over 256 examples (torch.func for PyTorch). The W7 row is 1000 calls of a jitted `x + 1` on a one-element
array: its milliseconds are microseconds per call. Then W8: the first call of the jitted MLP training step in a
fresh process, with a cold and with a warm disk cache, and JAX's; W9 (the CNN step's and the evaluation's first
calls, tens of seconds of compiling) is bench/first_call.py's. Options: `--quick` (fewer repeats, the whole table in
a few minutes), `--only NAME`, `--no-first-call`, `--device CPU|CL|CUDA` (where tinyjx runs: its inputs are put on
that device and its jitted functions run there; numpy and the peers are unchanged).

Timing assertions do not belong in tests; the floors this project aims for are in the issue notes.
"""
from __future__ import annotations
import argparse, os, subprocess, sys, tempfile, time
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MIN_SECONDS = 0.25   # a median is of at least `repeats` calls and at least this much time of calls (at most 100x)

def enough(times: list, repeats: int, spent: float) -> bool:
  """Whether a median of `times` (`spent` seconds in all) has its samples: 20 calls of a 0.2 ms matmul are 4 ms of
  a machine whose neighbours come and go by the second, so short workloads are called until MIN_SECONDS have passed."""
  return len(times) >= repeats and (spent >= MIN_SECONDS or len(times) >= 100 * repeats)

def median_time(fn, repeats: int) -> float:
  """The median time of `fn()` after a warm-up call, over `repeats` calls or more (`enough`)."""
  fn()
  times: list = []
  spent = 0.0
  while not enough(times, repeats, spent):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
    spent += times[-1]
  return float(np.median(times))

def load_jax():
  if os.environ.get('TINYJX_BENCH_NO_JAX'): return None, None
  try:
    import jax
    jax.config.update('jax_platforms', 'cpu')
    import jax.numpy as jjnp
    return jax, jjnp
  except Exception:
    return None, None

def load_torch():
  """PyTorch (CPU build) when installed and wanted in this process, else None."""
  if os.environ.get('TINYJX_BENCH_NO_TORCH'): return None
  try:
    import torch
    return torch
  except Exception:
    return None

# --- workloads: each returns {library: zero-argument callable}, plus the flop count ---
def gelu_np(y): return 0.5 * y * (1.0 + np.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))

def gelu_chain(n=4 * 1024 * 1024):
  import tinyjx, tinyjx.numpy as jnp
  from tinyjx import nn
  rng = np.random.default_rng(0)
  x, a, b = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
  f = tinyjx.jit(lambda x, a, b: nn.gelu(x * a + b, approximate=True))
  tx, ta, tb = jnp.asarray(x), jnp.asarray(a), jnp.asarray(b)
  fns = {'numpy': lambda: gelu_np(x * a + b), 'tinyjx': lambda: f(tx, ta, tb).block_until_ready()}
  jax, jjnp = load_jax()
  if jax:
    jf = jax.jit(lambda x, a, b: jax.nn.gelu(x * a + b, approximate=True))
    jx, ja, jb = jjnp.asarray(x), jjnp.asarray(a), jjnp.asarray(b)
    fns['jax'] = lambda: jf(jx, ja, jb).block_until_ready()
  torch = load_torch()
  if torch:
    tgx, tga, tgb = (torch.from_numpy(v) for v in (x, a, b))
    tgelu = torch.nn.functional.gelu
    fns['torch'] = lambda: tgelu(tgx * tga + tgb, approximate='tanh')
  check = np.asarray(f(tx, ta, tb))
  np.testing.assert_allclose(check, gelu_np(x * a + b), rtol=1e-4, atol=1e-5)
  return fns, 12 * n, 4 * 4 * n                 # reads x, a, b and writes the result

def matmul(n):
  import tinyjx, tinyjx.numpy as jnp
  rng = np.random.default_rng(1)
  a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
  f = tinyjx.jit(lambda a, b: a @ b)
  ta, tb = jnp.asarray(a), jnp.asarray(b)
  fns = {'numpy': lambda: a @ b, 'tinyjx': lambda: f(ta, tb).block_until_ready()}
  jax, jjnp = load_jax()
  if jax:
    jf = jax.jit(lambda a, b: a @ b)
    ja, jb = jjnp.asarray(a), jjnp.asarray(b)
    fns['jax'] = lambda: jf(ja, jb).block_until_ready()
  torch = load_torch()
  if torch:
    pa, pb = torch.from_numpy(a), torch.from_numpy(b)
    fns['torch'] = lambda: pa @ pb
  np.testing.assert_allclose(np.asarray(f(ta, tb)), a @ b, rtol=2e-3, atol=2e-3)
  return fns, 2 * n ** 3, 3 * 4 * n * n

def softmax_np(x):
  e = np.exp(x - x.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)

def softmax_rows(shape=(4096, 1024)):
  import tinyjx, tinyjx.numpy as jnp
  from tinyjx import nn
  x = np.random.default_rng(2).standard_normal(shape, dtype=np.float32)
  f = tinyjx.jit(lambda x: nn.softmax(x, axis=-1))
  tx = jnp.asarray(x)
  fns = {'numpy': lambda: softmax_np(x), 'tinyjx': lambda: f(tx).block_until_ready()}
  jax, jjnp = load_jax()
  if jax:
    jf = jax.jit(lambda x: jax.nn.softmax(x, axis=-1))
    jx = jjnp.asarray(x)
    fns['jax'] = lambda: jf(jx).block_until_ready()
  torch = load_torch()
  if torch:
    px = torch.from_numpy(x)
    fns['torch'] = lambda: torch.softmax(px, dim=-1)
  np.testing.assert_allclose(np.asarray(f(tx)), softmax_np(x), rtol=1e-5, atol=1e-7)
  return fns, 5 * x.size, 2 * x.nbytes         # reads x once and writes the result, at best

def fft2(n=512):
  """A 2-D complex FFT (jnp.fft is jnp ops: Cooley-Tukey stages as small complex matmuls, on float pairs)."""
  import tinyjx, tinyjx.numpy as jnp
  rng = np.random.default_rng(3)
  x = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(np.complex64)
  f = tinyjx.jit(jnp.fft.fft2)
  tx = jnp.asarray(x)
  fns = {'numpy': lambda: np.fft.fft2(x), 'tinyjx': lambda: f(tx).block_until_ready()}
  jax, jjnp = load_jax()
  if jax:
    jf = jax.jit(jjnp.fft.fft2)
    jx = jjnp.asarray(x)
    fns['jax'] = lambda: jf(jx).block_until_ready()
  torch = load_torch()
  if torch:
    px = torch.from_numpy(x)
    fns['torch'] = lambda: torch.fft.fft2(px)
  want = np.fft.fft2(x)
  assert np.abs(np.asarray(f(tx)) - want).max() <= 1e-4 * np.abs(want).max()
  return fns, int(5 * n * n * np.log2(n * n)), 0   # the usual 5 N log2 N of a complex FFT

def transpose(n=2048):
  """A materialized float32 transpose (`tile_transposes` reads it a cache line at a time)."""
  import tinyjx, tinyjx.numpy as jnp
  x = np.random.default_rng(4).standard_normal((n, n), dtype=np.float32)
  f = tinyjx.jit(lambda v: v.T)
  tx = jnp.asarray(x)
  fns = {'numpy': lambda: np.ascontiguousarray(x.T), 'tinyjx': lambda: f(tx).block_until_ready()}
  jax, jjnp = load_jax()
  if jax:
    jf = jax.jit(lambda v: v.T)
    jx = jjnp.asarray(x)
    fns['jax'] = lambda: jf(jx).block_until_ready()
  torch = load_torch()
  if torch:
    px = torch.from_numpy(x)
    fns['torch'] = lambda: px.t().contiguous()
  assert np.array_equal(np.asarray(f(tx)), x.T)
  return fns, 0, 2 * x.nbytes                 # reads x once and writes the result

# --- the MLP training step (784-512-512-10, batch 512, Adam) ---
SIZES, BATCH, LR, B1, B2, EPS = (784, 512, 512, 10), 512, 1e-3, 0.9, 0.999, 1e-8
# the step's matmul flops: every layer's forward and weight gradient, and the input gradient of every layer but the
# first (x is data, not a parameter: no library computes its gradient)
MLP_MATMUL_FLOPS = 2 * BATCH * (2 * sum(a * b for a, b in zip(SIZES, SIZES[1:])) +
                                sum(a * b for a, b in zip(SIZES[1:], SIZES[2:])))

def mlp_init(rng):
  params = []
  for fan_in, fan_out in zip(SIZES, SIZES[1:]):
    params.append((rng.standard_normal((fan_in, fan_out), dtype=np.float32) * np.float32(np.sqrt(2 / fan_in)),
                   np.zeros(fan_out, np.float32)))
  return params

def mlp_data(rng):
  x = rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32)
  y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
  return x, y

def make_step(xp, nn_mod, grad_fn):
  """The jitted-style step written once for any numpy-like module `xp` (tinyjx.numpy or jax.numpy)."""
  def loss_fn(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
      h = h @ w + b
      if i < len(params) - 1: h = nn_mod.relu(h)
    return -xp.mean(xp.sum(y * nn_mod.log_softmax(h, axis=-1), axis=-1))
  def step(params, m, v, t, x, y):
    loss, g = grad_fn(loss_fn)(params, x, y)
    t = t + 1
    new_p, new_m, new_v = [], [], []
    for (w, b), (gw, gb), (mw, mb), (vw, vb) in zip(params, g, m, v):
      layer_p, layer_m, layer_v = [], [], []
      for p_, g_, m_, v_ in ((w, gw, mw, vw), (b, gb, mb, vb)):
        m_ = B1 * m_ + (1 - B1) * g_
        v_ = B2 * v_ + (1 - B2) * g_ * g_
        mhat, vhat = m_ / (1 - B1 ** t), v_ / (1 - B2 ** t)
        layer_p.append(p_ - LR * mhat / (xp.sqrt(vhat) + EPS)); layer_m.append(m_); layer_v.append(v_)
      new_p.append(tuple(layer_p)); new_m.append(tuple(layer_m)); new_v.append(tuple(layer_v))
    return new_p, new_m, new_v, t, loss
  return step

def numpy_step(params, m, v, t, x, y):
  """The same step by hand in numpy: forward, backward, Adam."""
  hs, h = [x], x
  for i, (w, b) in enumerate(params):
    h = h @ w + b
    if i < len(params) - 1: h = np.maximum(h, 0)
    hs.append(h)
  z = h - h.max(axis=-1, keepdims=True)
  logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
  loss = -np.mean(np.sum(y * logp, axis=-1))
  dh = (np.exp(logp) - y) / BATCH
  grads = []
  for i in reversed(range(len(params))):
    w, _ = params[i]
    grads.append((hs[i].T @ dh, dh.sum(axis=0)))
    if i: dh = (dh @ w.T) * (hs[i] > 0)
  grads.reverse()
  t += 1
  new_p, new_m, new_v = [], [], []
  for (w, b), (gw, gb), (mw, mb), (vw, vb) in zip(params, grads, m, v):
    out = []
    for p_, g_, m_, v_ in ((w, gw, mw, vw), (b, gb, mb, vb)):
      m_ = B1 * m_ + (1 - B1) * g_
      v_ = B2 * v_ + (1 - B2) * g_ * g_
      out.append((p_ - LR * (m_ / (1 - B1 ** t)) / (np.sqrt(v_ / (1 - B2 ** t)) + EPS), m_, v_))
    new_p.append((out[0][0], out[1][0])); new_m.append((out[0][1], out[1][1])); new_v.append((out[0][2], out[1][2]))
  return new_p, new_m, new_v, t, loss

def mlp_step_bench():
  import tinyjx, tinyjx.numpy as jnp
  from tinyjx import nn
  rng = np.random.default_rng(3)
  params, (x, y) = mlp_init(rng), mlp_data(rng)
  zeros = [(np.zeros_like(w), np.zeros_like(b)) for w, b in params]
  step = tinyjx.jit(make_step(jnp, nn, lambda f: tinyjx.value_and_grad(f)))
  tp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
  tz = [(jnp.asarray(w), jnp.asarray(b)) for w, b in zeros]
  tx, ty = jnp.asarray(x), jnp.asarray(y)
  state = {'np': (params, zeros, zeros, 0), 'tj': (tp, tz, tz, jnp.asarray(0.0))}
  def run_tj():
    p, m, v, t = state['tj']
    p, m, v, t, loss = step(p, m, v, t, tx, ty)
    loss.block_until_ready()
    state['tj'] = (p, m, v, t)
  def run_np():
    p, m, v, t = state['np']
    p, m, v, t, loss = numpy_step(p, m, v, t, x, y)
    state['np'] = (p, m, v, t)
  loss_np = numpy_step(params, zeros, zeros, 0, x, y)[-1]
  loss_tj = step(tp, tz, tz, jnp.asarray(0.0), tx, ty)[-1]
  np.testing.assert_allclose(float(loss_tj), loss_np, rtol=1e-4)
  fns = {'numpy': run_np, 'tinyjx': run_tj}
  jax, jjnp = load_jax()
  if jax:
    jstep = jax.jit(make_step(jjnp, jax.nn, lambda f: jax.value_and_grad(f)))
    jp = [(jjnp.asarray(w), jjnp.asarray(b)) for w, b in params]
    jz = [(jjnp.asarray(w), jjnp.asarray(b)) for w, b in zeros]
    jx, jy = jjnp.asarray(x), jjnp.asarray(y)
    state['jax'] = (jp, jz, jz, jjnp.asarray(0.0))
    def run_jax():
      p, m, v, t = state['jax']
      p, m, v, t, loss = jstep(p, m, v, t, jx, jy)
      loss.block_until_ready()
      state['jax'] = (p, m, v, t)
    fns['jax'] = run_jax
  torch = load_torch()
  if torch: fns['torch'] = torch_mlp_step(torch, params, x, y, loss_np)
  flops = 3 * 2 * BATCH * sum(a * b for a, b in zip(SIZES, SIZES[1:]))
  return fns, flops, 0

def torch_mlp_step(torch, params, x, y, loss_np):
  """The same step in PyTorch eager (autograd and torch.optim.Adam with the same hyperparameters)."""
  ps = [torch.from_numpy(a.copy()).requires_grad_() for layer in params for a in layer]
  opt = torch.optim.Adam(ps, lr=LR, betas=(B1, B2), eps=EPS)
  px, py = torch.from_numpy(x), torch.from_numpy(y)
  def loss_fn():
    h = px
    for i in range(0, len(ps), 2):
      h = h @ ps[i] + ps[i + 1]
      if i < len(ps) - 2: h = torch.relu(h)
    return -(py * torch.log_softmax(h, dim=-1)).sum(-1).mean()
  np.testing.assert_allclose(float(loss_fn()), loss_np, rtol=1e-4)
  def run():
    opt.zero_grad(set_to_none=True)
    loss = loss_fn()
    loss.backward()
    opt.step()
  return run

# --- W5: examples/mnist.py's CNN training step (batch 128, Adam), jitted; JAX's from first_call.py, PyTorch's from
# mnist_torch.py ---
CNN_BATCH = 128

def cnn_data():
  rng = np.random.default_rng(5)
  return rng.integers(0, 255, (CNN_BATCH, 1, 28, 28)).astype(np.uint8), rng.integers(0, 10, CNN_BATCH).astype(np.int32)

def cnn_step_bench():
  import tinyjx, tinyjx.numpy as jnp
  import tinyjx.random as random
  sys.path[:0] = [os.path.join(ROOT, 'examples'), os.path.dirname(os.path.abspath(__file__))]
  import nn, mnist
  x, y = cnn_data()
  state = {'tj': nn.optim.Adam(mnist.make_model(random.PRNGKey(0)), lr=1e-3)}
  step, tx, ty = mnist.make_train_step(), jnp.asarray(x), jnp.asarray(y)
  def run_tj():
    state['tj'], loss, _ = step(state['tj'], tx, ty)
    loss.block_until_ready()
  run_tj()
  _, loss, _ = step(state['tj'], tx, ty)
  assert np.isfinite(float(loss)), "the tinyjx CNN step's loss is not finite"
  fns = {'tinyjx': run_tj}
  jax, jjnp = load_jax()
  if jax: fns['jax'] = jax_cnn_runner(jax, x, y)
  torch = load_torch()
  if torch: fns['torch'] = torch_cnn_runner(torch, x, y)
  return fns, 0, 0

def jax_cnn_runner(jax, x, y):
  """first_call.py's JAX mirror of the CNN step (lax.conv_general_dilated, BatchNorm, Adam), jitted."""
  import first_call as fc
  import jax.numpy as jjnp
  params, stats = fc.jax_cnn_init(np.random.default_rng(0))
  zeros = jax.tree_util.tree_map(np.zeros_like, params)
  state = {'s': jax.device_put((params, stats, zeros, zeros, jjnp.asarray(0.0)))}
  step, jx, jy = jax.jit(fc.jax_cnn_step), jax.device_put(x), jax.device_put(y)
  def run():
    params, stats, m, v, t = state['s']
    params, stats, m, v, t, loss, _ = step(params, stats, m, v, t, jx, jy)
    loss.block_until_ready()
    state['s'] = (params, stats, m, v, t)
  return run

def torch_cnn_runner(torch, x, y):
  """mnist_torch.py's model, trained in eager PyTorch (autograd, torch.optim.Adam) on the same batch."""
  import mnist_torch
  torch.manual_seed(0)
  model = mnist_torch.make_model(torch)
  model.train()
  opt, loss_fn = torch.optim.Adam(model.parameters(), lr=1e-3), torch.nn.CrossEntropyLoss()
  px, py = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
  def run():
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(px.float() * (1.0 / 255.0)), py)
    loss.backward()
    opt.step()
  return run

# --- W6: per-example gradients of a 1024-to-10 linear model (softmax cross-entropy), batch 256 ---
PEG_IN, PEG_OUT, PEG_BATCH = 1024, 10, 256

def per_example_grads_bench():
  import tinyjx, tinyjx.numpy as jnp
  from tinyjx import nn
  rng = np.random.default_rng(6)
  w = (rng.standard_normal((PEG_IN, PEG_OUT)) / 32).astype(np.float32)
  b = np.zeros(PEG_OUT, np.float32)
  x = rng.standard_normal((PEG_BATCH, PEG_IN), dtype=np.float32)
  y = np.eye(PEG_OUT, dtype=np.float32)[rng.integers(0, PEG_OUT, PEG_BATCH)]
  def loss(xp, nn_mod):
    return lambda params, x, y: -xp.sum(y * nn_mod.log_softmax(x @ params[0] + params[1]))
  f = tinyjx.jit(tinyjx.vmap(tinyjx.grad(loss(jnp, nn)), in_axes=(None, 0, 0)))
  tp, tx, ty = (jnp.asarray(w), jnp.asarray(b)), jnp.asarray(x), jnp.asarray(y)
  want = numpy_per_example_grads(w, b, x, y)
  got = f(tp, tx, ty)
  for g, e in zip(got, want): np.testing.assert_allclose(np.asarray(g), e, rtol=1e-4, atol=1e-6)
  fns = {'numpy': lambda: numpy_per_example_grads(w, b, x, y),
         'tinyjx': lambda: tinyjx.block_until_ready(f(tp, tx, ty))}
  jax, jjnp = load_jax()
  if jax:
    jf = jax.jit(jax.vmap(jax.grad(loss(jjnp, jax.nn)), in_axes=(None, 0, 0)))
    jp, jx, jy = jax.device_put(((w, b), x, y))
    fns['jax'] = lambda: jax.block_until_ready(jf(jp, jx, jy))
  torch = load_torch()
  if torch:
    from torch.func import grad as tgrad, vmap as tvmap
    def tloss(params, x, y): return -(y * torch.log_softmax(x @ params[0] + params[1], dim=-1)).sum()
    tf = tvmap(tgrad(tloss), in_dims=(None, 0, 0))
    pp, px, py = (torch.from_numpy(w), torch.from_numpy(b)), torch.from_numpy(x), torch.from_numpy(y)
    fns['torch'] = lambda: tf(pp, px, py)
  nbytes = 4 * (PEG_BATCH * (PEG_IN + PEG_OUT) * 2 + PEG_IN * PEG_OUT)   # reads x, y, w; writes the gradients
  return fns, 4 * PEG_BATCH * PEG_IN * PEG_OUT, nbytes

def numpy_per_example_grads(w, b, x, y):
  """The same gradients by hand: d loss / d logits = softmax - y, per example an outer product with x."""
  z = x @ w + b
  p = np.exp(z - z.max(-1, keepdims=True))
  d = p / p.sum(-1, keepdims=True) - y
  return x[:, :, None] * d[:, None, :], d

# --- the machine's limits: a memory stream of W1's bytes and the float32 FMA peak, measured in C on all cores ---
PROBES = r"""
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX__) && defined(__FMA__)
#include <immintrin.h>
#endif
void tjx_stream(const float* x, const float* a, const float* b, float* out, int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = x[i] + a[i] + b[i];
}
/* W1's floor: the same bytes with streaming stores, which write the output without first reading it into the
   cache first (a fifth less traffic than tjx_stream); `out` 32-byte aligned */
void tjx_stream_nt(const float* x, const float* a, const float* b, float* out, int64_t n, int threads) {
#if defined(__AVX__) && defined(__FMA__)
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n / 8; i++)
    _mm256_stream_ps(out + 8 * i, _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x + 8 * i), _mm256_loadu_ps(a + 8 * i)),
                                                _mm256_loadu_ps(b + 8 * i)));
  _mm_sfence();
  for (int64_t i = n / 8 * 8; i < n; i++) out[i] = x[i] + a[i] + b[i];
#else
  tjx_stream(x, a, b, out, n, threads);
#endif
}
/* float32 multiply-adds on 12 independent vectors per thread (more than latency times ports on current cores);
   each iteration is 12 * 8 multiply-adds, 192 flops, or with AVX-512 12 * 16, 384 flops (`tjx_fma_lanes`) */
int tjx_fma_lanes(void) {
#if defined(__AVX512F__)
  return 16;
#else
  return 8;
#endif
}
double tjx_fma(int64_t iters, int threads) {
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+:total)
  {
#if defined(__AVX512F__)
    __m512 acc[12], m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
    for (int j = 0; j < 12; j++) acc[j] = _mm512_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++)
      for (int j = 0; j < 12; j++) acc[j] = _mm512_fmadd_ps(acc[j], m, c);
    for (int j = 0; j < 12; j++) total += _mm512_reduce_add_ps(acc[j]);
#elif defined(__AVX__) && defined(__FMA__)
    __m256 acc[12], m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
    for (int j = 0; j < 12; j++) acc[j] = _mm256_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++)
      for (int j = 0; j < 12; j++) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
    float lanes[8];
    for (int j = 0; j < 12; j++) { _mm256_storeu_ps(lanes, acc[j]); for (int k = 0; k < 8; k++) total += lanes[k]; }
#else
    typedef float v8 __attribute__((vector_size(32)));
    v8 acc[12], m = {0}, c = {0};
    for (int k = 0; k < 8; k++) { m[k] = 0.999f; c[k] = 1e-3f; }
    for (int j = 0; j < 12; j++) for (int k = 0; k < 8; k++) acc[j][k] = (float)j;
    for (int64_t i = 0; i < iters; i++)
      for (int j = 0; j < 12; j++) acc[j] = acc[j] * m + c;
    for (int j = 0; j < 12; j++) for (int k = 0; k < 8; k++) total += acc[j][k];
#endif
  }
  return total;
}
"""

def cores() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1)

def probes():
  """The probes' library, built by tinyjx's CPU toolchain (its flags: -O3 -march=native, OpenMP)."""
  import ctypes
  from tinyjx.devices import cpu
  lib = cpu.load_library(PROBES)
  lib.tjx_stream.argtypes = lib.tjx_stream_nt.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_int]
  lib.tjx_fma.argtypes, lib.tjx_fma.restype = [ctypes.c_int64, ctypes.c_int], ctypes.c_double
  return lib

def stream_probe(n: int, streaming: bool = False):
  """W1's memory limit, a callable to time: a C loop on two threads reading three float32 arrays of `n` and writing a
  fourth (the bytes W1 must move, into an output allocated once); with `streaming`, W1's floor: the output written
  with streaming stores."""
  lib = probes()
  arrays = [np.ones(n + 8, np.float32) for _ in range(4)]
  arrays = [v[(-v.ctypes.data % 32) // 4:][:n] for v in arrays]        # 32-byte aligned (the streaming stores')
  ptrs = [v.ctypes.data for v in arrays]
  fn = lib.tjx_stream_nt if streaming else lib.tjx_stream
  def run():
    fn(*ptrs, n, 2)
    return arrays   # (the closure keeps the arrays alive)
  return run

def fma_limit(flops: int, repeats: int) -> float:
  """The time `flops` take at the measured float32 FMA peak of all cores: the best rate of many short runs (under a
  millisecond each) of a C loop of independent FMAs, on all cores at once or, if better, on one core times the count
  of cores. A peak is a best case: on a shared machine short runs find the quiet moments (other processes only ever
  lower the rate), and a run on every core waits for whichever core another process holds."""
  import time
  lib, threads, iters = probes(), cores(), 50_000
  per_iter = 2 * 12 * lib.tjx_fma_lanes()
  lib.tjx_fma(iters, threads)
  best = 0.0
  for _ in range(10 * max(repeats, 5)):
    for n in {1, threads}:
      t0 = time.perf_counter()
      lib.tjx_fma(iters, n)
      best = max(best, per_iter * iters * n / (time.perf_counter() - t0) * threads / n)   # (n cores' rate, scaled)
  return flops / best

FIRST_CALL = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
import numpy as np, tinyjx, tinyjx.numpy as jnp
from tinyjx import nn
import bench
t1 = time.perf_counter()
rng = np.random.default_rng(3)
params, (x, y) = bench.mlp_init(rng), bench.mlp_data(rng)
step = tinyjx.jit(bench.make_step(jnp, nn, lambda f: tinyjx.value_and_grad(f)))
tp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
tz = [(jnp.zeros_like(w), jnp.zeros_like(b)) for w, b in tp]
out = step(tp, tz, tz, jnp.asarray(0.0), jnp.asarray(x), jnp.asarray(y))
out[-1].block_until_ready()
t2 = time.perf_counter()
print(f"{{t1 - t0:.3f}} {{t2 - t1:.3f}}")
"""

def first_call_times(device: str = '') -> dict:
  """Import time and first-call time of the jitted MLP step in fresh processes (tinyjx on `device`): cold, then warm
  disk cache."""
  out = {}
  with tempfile.TemporaryDirectory() as cache:
    env = dict(os.environ, TINYJX_CACHE_DIR=cache, TINYJX_DEVICE=device)
    code = FIRST_CALL.format(root=ROOT, bench=os.path.dirname(os.path.abspath(__file__)))
    for label in ('cold', 'warm'):
      res = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True)
      if res.returncode != 0:
        out[label] = f"failed: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}"
        continue
      imp, first = map(float, res.stdout.split()[-2:])
      out[label] = (imp, first)
  return out

CALLS = 1000

def jit_call_overhead():
  """A jitted `x + 1` on a one-element array, called CALLS times: the time per call is the jit hit path (binding,
  one foreign call, a fresh output), what DESIGN section 11 wants to be a dict lookup and a ctypes call."""
  import tinyjx, tinyjx.numpy as jnp
  x = np.ones(1, np.float32)
  f, tx = tinyjx.jit(lambda x: x + 1), jnp.asarray(x)
  f(tx)
  def loop(call):
    def run():
      for _ in range(CALLS): call()
    return run
  fns = {'numpy': loop(lambda: x + 1), 'tinyjx': loop(lambda: f(tx))}
  jax, jjnp = load_jax()
  if jax:
    jf, jx = jax.jit(lambda x: x + 1), jjnp.asarray(x)
    jf(jx)
    fns['jax'] = loop(lambda: jf(jx))
  torch = load_torch()
  if torch:
    px = torch.from_numpy(x)
    fns['torch'] = loop(lambda: px + 1)
  assert float(f(tx)[0]) == 2.0
  return fns, 0, 0

GELU_N = 4 * 1024 * 1024

WORKLOADS = {
  'W1 gelu(x*a+b) 4M f32': gelu_chain,
  'W2 matmul 1024 f32': lambda: matmul(1024),
  'W2 matmul 256 f32': lambda: matmul(256),
  'W3 softmax rows 4096x1024': softmax_rows,
  'fft2 complex64 512x512': fft2,
  'transpose 2048x2048 f32': transpose,
  'W4 MLP step 784-512-512-10 b512': mlp_step_bench,
  'W5 CNN step b128 Adam': cnn_step_bench,
  'W6 vmap(grad) 1024->10 b256': per_example_grads_bench,
  f'W7 jit x+1, 1 elem, {CALLS} calls': jit_call_overhead,
}

# The machine's limit for a row, in seconds, measured in tinyjx's worker right beside tinyjx (memory bandwidth on a
# shared machine changes by several times from one second to the next, so a limit timed in another process is no
# yardstick): ('paired', make) times the callable `make()` alternately with tinyjx's calls, W1's memory stream;
# ('after', limit) is `limit(repeats)` right after tinyjx's timing, the matmuls' flops at the FMA peak.
LIMITS = {
  'W1 gelu(x*a+b) 4M f32': ('paired', lambda: stream_probe(GELU_N)),
  'W2 matmul 1024 f32': ('after', lambda repeats: fma_limit(2 * 1024 ** 3, repeats)),
  'W2 matmul 256 f32': ('after', lambda repeats: fma_limit(2 * 256 ** 3, repeats)),
  'W4 MLP step 784-512-512-10 b512': ('after', lambda repeats: fma_limit(MLP_MATMUL_FLOPS, repeats)),
}

def paired_medians(fn, probe, repeats: int) -> tuple[float, float]:
  """The median times of `fn` and of `probe`, called alternately."""
  import time
  fn(); probe()
  a: list = []
  b: list = []
  t_start = time.perf_counter()
  while not enough(a, repeats, time.perf_counter() - t_start):
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    probe()
    a.append(t1 - t0)
    b.append(time.perf_counter() - t1)
  return float(np.median(a)), float(np.median(b))

def worker(name: str, lib: str, repeats: int) -> None:
  """One library on one workload, alone in this process: prints `RESULT seconds flops bytes limit-seconds
  beside-seconds` (its median time; for tinyjx the row's limit, else 0, and its own median from the calls timed
  alternately with a paired limit, else its median time again), or `absent` where that library has no version of
  it."""
  if lib != 'jax': os.environ['TINYJX_BENCH_NO_JAX'] = '1'
  if lib != 'torch': os.environ['TINYJX_BENCH_NO_TORCH'] = '1'
  fns, flops, nbytes = WORKLOADS[name]()
  if lib not in fns:
    print('absent')
    return
  limit = 0.0
  if lib == 'tinyjx':   # a program first built at -O1 is timed on its optimized build (devices/cpu.py tiers)
    from tinyjx.devices import cpu
    cpu.finish_upgrades()
  kind, make = LIMITS.get(name, (None, None)) if lib == 'tinyjx' else (None, None)
  t = beside = median_time(fns[lib], repeats)           # timed as every library is: calls back to back
  if kind == 'paired': beside, limit = paired_medians(fns[lib], make(), repeats)
  if kind == 'after': limit = make(repeats)
  print('RESULT', t, flops, nbytes, limit, beside)

PEERS = ('jax', 'torch')

def measure(name: str, repeats: int, device: str = '', rounds: int = 2) -> tuple[dict, int, int]:
  """Each library in a process of its own (three thread pools in one process fight over two cores: the one
  that ran last still spins while the next one starts), in `rounds` alternating turns; the best median. tinyjx
  runs on `device` ('' for its default)."""
  import importlib.util
  wanted = [lib for lib in PEERS if not os.environ.get(f'TINYJX_BENCH_NO_{lib.upper()}')]
  libs = ['numpy', 'tinyjx'] + [lib for lib in wanted if importlib.util.find_spec(lib)]
  times: dict = {}
  flops = nbytes = 0
  for _ in range(rounds):
    for lib in libs:
      env = dict(os.environ, TINYJX_DEVICE=device) if lib == 'tinyjx' and device else None
      res = subprocess.run([sys.executable, os.path.abspath(__file__), '--worker', name, lib, '--repeats',
                            str(repeats)], capture_output=True, text=True, cwd=ROOT, env=env)
      if res.returncode: raise RuntimeError(f"{lib} worker failed: {res.stderr.strip().splitlines()[-1:]}")
      last = res.stdout.strip().splitlines()[-1].split()
      if last[0] == 'absent': continue
      t, limit, beside = float(last[1]), float(last[4]), float(last[5])
      if lib == 'tinyjx': flops, nbytes = int(last[2]), int(last[3])
      if t < times.get(lib, float('inf')): times[lib] = t
      if lib == 'tinyjx' and limit and beside < times.get('beside', float('inf')):
        times['limit'], times['beside'] = limit, beside    # the limit, and tinyjx's time measured beside it
  return times, flops, nbytes

# --- the bars of issue 13: [(text, met)] from a row's times (tinyjx's, the peers', the limit's, numpy's) and flops ---
def bar_ratio(times: dict, lib: str, factor: float) -> tuple[str, bool | None]:
  """tinyjx's time at most `factor` times `lib`'s."""
  if lib not in times: return f"<={factor:g}x {lib}: no {lib}", None
  r = times['tinyjx'] / times[lib]
  return f"<={factor:g}x {lib} ({r:.2f}x)", r <= factor

def bar_best_peer(times: dict, factor: float = 1.0) -> tuple[str, bool | None]:
  peers = [lib for lib in PEERS if lib in times]
  if not peers: return "<= best peer: no peer", None
  best = min(peers, key=times.get)
  text, met = bar_ratio(times, best, factor)
  return text.replace(best, f"best ({best})", 1), met

def bars_w1(times, flops):
  """At most 0.7x JAX's time, and tinyjx's calls timed alternately with the memory stream at most 2x its time."""
  copy_text, copy_met = bar_ratio({**times, 'tinyjx': times.get('beside', times['tinyjx'])}, 'limit', 2)
  return [bar_ratio(times, 'jax', 0.7), (copy_text.replace('limit', 'copy'), copy_met)]

def bars_w7(times, flops):
  out = [bar_ratio(times, 'torch', 1.5)]
  if 'jax' in times: out.append((f"< jax ({times['tinyjx'] / times['jax']:.2f}x)", times['tinyjx'] < times['jax']))
  else: out.append(("< jax: no jax", None))
  return out

def bars_matmul(times, flops):
  """tinyjx's GFLOP/s at least numpy's (the ratio is numpy's time over tinyjx's), and its share of the FMA peak."""
  r = times['numpy'] / times['tinyjx']
  peak = f", {times['limit'] / times['tinyjx'] * 100:.0f}% of FMA peak {flops / times['limit'] / 1e9:.0f} GFLOP/s" \
    if 'limit' in times else ""
  return [(f">=numpy GFLOP/s ({r:.2f}x){peak}", r >= 1)]

BARS = {
  'W1': bars_w1, 'W2': bars_matmul, 'W3': lambda t, _: [bar_best_peer(t)],
  'W4': lambda t, _: [bar_ratio(t, 'jax', 0.8)], 'W5': lambda t, _: [bar_ratio(t, 'torch', 1.0)],
  'W6': lambda t, _: [bar_best_peer(t)], 'W7': bars_w7,
}

def bar_text(name: str, times: dict, flops: int) -> str:
  """`W1 <=0.7x jax (0.62x), <=2x copy (1.40x): yes`; `-` for a row without a bar; `?` where a peer is missing."""
  rule = BARS.get(name.split()[0])
  if rule is None or 'tinyjx' not in times: return "-"
  parts = rule(times, flops)
  mets = [m for _, m in parts]
  verdict = "?" if None in mets else ("yes" if all(mets) else "no")
  return f"{name.split()[0]} {', '.join(t for t, _ in parts)}: {verdict}"

def fmt_ms(times: dict, lib: str, width: int) -> str:
  return f"{times[lib] * 1e3:{width}.2f}" if lib in times else f"{'-':>{width}}"

def print_table(rows: list) -> None:
  print(f"{'workload':<34}{'numpy ms':>9}{'tinyjx ms':>10}{'jax ms':>9}{'torch ms':>9}{'limit ms':>9}"
        f"{'vs numpy':>9}{'vs best':>8}{'GFLOP/s':>8}{'GB/s':>6}  bar (issue 13)")
  for name, times, flops, nbytes, err in rows:
    if err:
      print(f"{name:<34}  error: {err[:100]}")
      continue
    t_tj = times.get('tinyjx')
    peers = [times[lib] for lib in PEERS if lib in times]
    vs_np = f"{times['numpy'] / t_tj:8.2f}x" if 'numpy' in times and t_tj else f"{'-':>9}"
    best = f"{min(peers) / t_tj:7.2f}x" if peers and t_tj else f"{'-':>8}"   # above 1: faster than every peer
    gflops = f"{flops / t_tj / 1e9:8.1f}" if flops and t_tj else f"{'-':>8}"
    gbs = f"{nbytes / t_tj / 1e9:6.1f}" if nbytes and t_tj and 'matmul' not in name else f"{'-':>6}"
    cols = "".join(fmt_ms(times, lib, w) for lib, w in (('numpy', 9), ('tinyjx', 10), ('jax', 9), ('torch', 9),
                                                         ('limit', 9)))
    print(f"{name:<34}{cols}{vs_np}{best}{gflops}{gbs}  {bar_text(name, times, flops)}")

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument('--quick', action='store_true', help='fewer repeats')
  ap.add_argument('--only', default='', help='run workloads whose name contains this text')
  ap.add_argument('--no-first-call', action='store_true', help='skip the fresh-process first-call timing')
  ap.add_argument('--device', default='', type=str.upper, choices=['', 'CPU', 'CL', 'CUDA'],
                  help="the device tinyjx runs on (numpy and the peers run as always)")
  ap.add_argument('--worker', nargs=2, metavar=('WORKLOAD', 'LIB'), help=argparse.SUPPRESS)
  ap.add_argument('--repeats', type=int, default=0, help=argparse.SUPPRESS)
  args = ap.parse_args()
  repeats = args.repeats or (5 if args.quick else 20)
  if args.worker: return worker(args.worker[0], args.worker[1], repeats)
  rows = []
  for name in WORKLOADS:
    if args.only and args.only not in name: continue
    try:
      times, flops, nbytes = measure(name, repeats, args.device)
    except Exception as e:  # a missing feature shows as a row, the other rows still run
      rows.append((name, {}, 0, 0, f"{type(e).__name__}: {e}"))
      continue
    rows.append((name, times, flops, nbytes, ""))
  import importlib.util
  missing = [lib for lib in PEERS if not importlib.util.find_spec(lib)]
  if missing: print(f"not installed, skipped: {', '.join(missing)} (install them in a test-only venv to compare)")
  print(f"\ntinyjx on {args.device or 'its default device'}; {cores()} cores; limit: W1 a two-thread C stream of its "
        f"bytes, W2 and W4 their matmuls' flops at the measured float32 FMA peak")
  print_table(rows)
  print_w1_floor(rows, repeats)
  print_w4_floor(rows)
  if not args.no_first_call and not args.only: print_first_call(args.device)

def print_w1_floor(rows: list, repeats: int) -> None:
  """W1's floor beside its bar: no program that reads its inputs and writes its output in memory can take less
  than the streaming-store loop (no arithmetic at all), so a bar below it cannot be met on this machine."""
  jax_t = next((times.get('jax') for name, times, *_ in rows if name.startswith('W1')), None)
  if jax_t is None: return
  floor = median_time(stream_probe(GELU_N, streaming=True), repeats)
  print(f"W1 floor: {floor * 1e3:.2f} ms, its bytes moved by a two-thread C loop with streaming stores and no "
        f"arithmetic; the bar, 0.7x jax, is {0.7 * jax_t * 1e3:.2f} ms" + ("" if 0.7 * jax_t >= floor else
                                                                            ", below the floor"))

def print_w4_floor(rows: list) -> None:
  """W4's floor beside its bar: the step's matmuls alone at the FMA peak (its `limit`), and the share of that peak
  its bar asks of them were they the whole step (they are most of it: the rest is a softmax, bias sums and Adam's
  updates, fused into the matmuls' epilogues). A library's 512-cube matmul reaches about 80% of the peak on the
  two-core Xeon of issue 13 (tinyjx, PyTorch and JAX alike), so a bar that asks more cannot be met by faster
  glue around them."""
  times = next((times for name, times, *_ in rows if name.startswith('W4')), {})
  if 'jax' not in times or 'limit' not in times: return
  bar, peak_t = 0.8 * times['jax'], times['limit']
  print(f"W4 floor: its matmuls ({MLP_MATMUL_FLOPS / 1e6:,.0f} MFLOP) at the FMA peak take {peak_t * 1e3:.2f} ms; "
        f"the bar, 0.8x jax, is {bar * 1e3:.2f} ms: the matmuls alone at {peak_t / bar * 100:.0f}% of the peak "
        f"(tinyjx's whole step: {peak_t / times['tinyjx'] * 100:.0f}%, jax's: {peak_t / times['jax'] * 100:.0f}%)")

def print_first_call(device: str) -> None:
  """W8: the MLP step's first call in a fresh process, cold and warm disk cache, against JAX's (cold: JAX keeps no
  cache). W9 (the CNN step's and the batch-1000 evaluation's first calls) compiles for tens of seconds per run:
  bench/first_call.py measures it."""
  fc = first_call_times(device)
  jax_first = jax_first_call()
  for label, v in fc.items():
    txt = v if isinstance(v, str) else f"import {v[0]:.2f} s, first call {v[1]:.2f} s"
    print(f"W8 MLP step, fresh process, {label} disk cache: {txt}")
  if jax_first is not None: print(f"W8 MLP step, fresh process, JAX: first call {jax_first:.2f} s")
  cold, warm = fc.get('cold'), fc.get('warm')
  cold_met = None if isinstance(cold, str) or cold is None or jax_first is None else cold[1] <= jax_first
  warm_met = None if isinstance(warm, str) or warm is None else warm[1] < 0.2
  verdict = lambda m: "?" if m is None else ("yes" if m else "no")
  print(f"W8 bar: cold at most JAX's: {verdict(cold_met)}; warm under 0.2 s: {verdict(warm_met)}")
  print("W9 (first calls of the CNN step and of the batch-1000 evaluation): python bench/first_call.py")

def jax_first_call() -> float | None:
  """JAX's first call of the MLP step in a fresh process (first_call.py's script), or None without JAX."""
  import importlib.util
  if os.environ.get('TINYJX_BENCH_NO_JAX') or not importlib.util.find_spec('jax'): return None
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import first_call as fc
  t = fc.run(fc.JAX.format(root=ROOT, which='mlp'), dict(os.environ), sys.executable)
  return t if isinstance(t, float) else None

if __name__ == '__main__':
  main()
