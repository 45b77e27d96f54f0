"""sweep: the breadth check beside bench.py. About fifty common jitted programs (reductions, scans, indexing,
scatters, attention and its gradient, layer norms, convolutions, a transformer block and its gradient, softplus,
random numbers, batch norm, pooling, loops, linear solves, searchsorted, top_k, FFTs), each timed
in tinyjx and in JAX, each library in a process of its own. bench.py races the issue's workloads; this catches the
programs no row covers, where a fusion or a schedule decision can cost 10-50x (attention's softmax fused into its
second matmul ran 85 ms against JAX's 1.7).

    python bench/sweep.py                       # tinyjx, and JAX where this interpreter has it
    python bench/sweep.py --jax /path/to/python  # JAX from another interpreter (a test-only virtual environment)
    python bench/sweep.py --only grad            # the programs whose name contains this text

Prints each program's median time per library (at least 10 calls and half a second, after a warm-up that waits
for tinyjx's optimized builds) and tinyjx's time over JAX's (below 1: tinyjx is faster). Timing assertions do not
belong in tests; the figures go in the issue notes.
"""
from __future__ import annotations
import argparse, os, subprocess, sys, time
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def programs(jax, jnp, lax, nn, logsumexp) -> dict:
  """name -> (function, args): the same text for both libraries."""
  rng = np.random.default_rng(0)
  f32 = lambda *s: jnp.asarray(rng.standard_normal(s).astype(np.float32))
  i32 = lambda hi, *s: jnp.asarray(rng.integers(0, hi, s).astype(np.int32))
  a, b, c, e, idx = f32(2048, 2048), f32(4096, 1024), f32(64, 128, 256), f32(50000, 128), i32(50000, 8192)
  q, k, v, img, w = f32(8, 256, 64), f32(8, 256, 64), f32(8, 256, 64), f32(32, 64, 56, 56), f32(64, 64, 3, 3)
  x1, bm, g = f32(1 << 22), f32(64, 256, 256), f32(1024)
  def ln(x, g): return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * g
  def attention(q, k, v): return nn.softmax(q @ jnp.swapaxes(k, -1, -2) / 8.0, axis=-1) @ v
  d, heads, t, n = 256, 4, 128, 8
  def block(p, x):
    h = ln(x, p['g1']) @ p['wqkv']
    q, k, v = (h[..., i * d:(i + 1) * d].reshape(n, t, heads, d // heads).transpose(0, 2, 1, 3) for i in range(3))
    x = x + attention(q, k, v).transpose(0, 2, 1, 3).reshape(n, t, d) @ p['wo']
    return x + nn.gelu(ln(x, p['g2']) @ p['w1']) @ p['w2']
  params = {'g1': f32(d), 'g2': f32(d), 'wqkv': f32(d, 3 * d) * 0.05, 'wo': f32(d, d) * 0.05,
            'w1': f32(d, 4 * d) * 0.05, 'w2': f32(4 * d, d) * 0.05}
  xb = f32(n, t, d)
  sq, x1m, sorted_row, W, xs = f32(256, 256), f32(1 << 20), jnp.sort(f32(4096)), f32(256, 256) * 0.05, f32(128, 64, 256)
  def rnn(W, xs):
    def cell(h, x):
      h = jnp.tanh(h @ W + x)
      return h, h
    return lax.scan(cell, jnp.zeros((64, 256), jnp.float32), xs)[1]
  def power(m):
    def step(c): return m @ c[0] / jnp.linalg.norm(m @ c[0]), c[1] + 1
    return lax.while_loop(lambda c: c[1] < 50, step, (jnp.ones(256, jnp.float32), 0))[0]
  def slices(a):
    add = lambda i, s: s + lax.dynamic_slice(a, (i, 0), (16, 2048))
    return lax.fori_loop(0, 100, add, jnp.zeros((16, 2048), jnp.float32))
  def branchy(xs):   # a cond in a scan's body, and a loop nested in it
    def cell(c, x):
      c = lax.cond(x.sum() > 0, lambda: c * 0.9 + x, lambda: c - x)
      return lax.fori_loop(0, 3, lambda i, v: jnp.tanh(v + x), c), c.sum()
    return lax.scan(cell, jnp.zeros(64, jnp.float32), xs)
  def bn(x): return (x - x.mean((0, 2, 3), keepdims=True)) / jnp.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
  spd = sq + 256 * jnp.eye(256, dtype=jnp.float32)
  return {
    'sum axis 0 2048x2048': (lambda a: a.sum(0), a),
    'sum axis 1 2048x2048': (lambda a: a.sum(1), a),
    'max 4096x1024': (lambda b: b.max(), b),
    'argmax rows 4096x1024': (lambda b: jnp.argmax(b, axis=1), b),
    'cumsum axis 1 4096x1024': (lambda b: jnp.cumsum(b, axis=1), b),
    'cumsum axis 0 4096x1024': (lambda b: jnp.cumsum(b, axis=0), b),
    'x - x.mean(0) 4096x1024': (lambda b: b - b.mean(0, keepdims=True), b),
    'logsumexp rows 4096x1024': (lambda b: logsumexp(b, axis=1), b),
    'layer norm 4096x1024': (ln, b, g),
    'where(x > 0, exp x, x / 10) 4M': (lambda x: jnp.where(x > 0, jnp.exp(x), x * 0.1), x1),
    'reverse 4M': (lambda x: x[::-1] * 2, x1),
    'x.T 2048x2048': (lambda a: a.T, a),
    'x.T * 2 2048x2048': (lambda a: a.T * 2, a),
    'swapaxes(1, 2) + 1 64x128x256': (lambda c: jnp.swapaxes(c, 1, 2) + 1, c),
    'concatenate + pad 4096x1024': (lambda b: jnp.pad(jnp.concatenate([b, b], 1), ((1, 1), (1, 1))), b),
    'gather 8192 rows of 50000x128': (lambda e, i: e[i], e, idx),
    'scatter-add 8192 rows': (lambda e, i: jnp.zeros((50000, 128), jnp.float32).at[i].add(e[:8192]), e, idx),
    'sort 4M': (jnp.sort, x1),
    'batched matmul 64x256x256': (lambda x, y: x @ y, bm, bm),
    'x.T @ x 2048': (lambda a: a.T @ a, a),
    'layer norm @ w 4096x1024x1024': (lambda b, g, a: ln(b, g) @ a, b, g, a[:1024, :1024]),
    'gelu MLP 4096x1024x1024': (lambda b, a: nn.gelu(b @ a) @ a, b, a[:1024, :1024]),
    'attention 8x256x64': (attention, q, k, v),
    'conv 3x3 32x64x56x56': (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), 'SAME'), img, w),
    'cross-entropy, int labels 4096x1024':
      (lambda b, i: -jnp.take_along_axis(nn.log_softmax(b, axis=-1), i[:4096, None] % 1024, axis=-1).mean(), b, idx),
    'grad attention 8x256x64': (jax.grad(lambda q, k, v: attention(q, k, v).sum(), argnums=(0, 1, 2)), q, k, v),
    'grad layer norm 4096x1024': (jax.grad(lambda b, g: (ln(b, g) ** 2).sum(), argnums=(0, 1)), b, g),
    'grad embedding 8192 of 50000x128': (jax.grad(lambda e, i: (e[i] ** 2).sum()), e, idx),
    'grad conv 3x3 32x64x56x56':
      (jax.grad(lambda x, w: (lax.conv_general_dilated(x, w, (1, 1), 'SAME') ** 2).sum(), argnums=(0, 1)), img, w),
    'transformer block 8x128x256': (block, params, xb),
    'grad transformer block 8x128x256': (jax.grad(lambda p, x: (block(p, x) ** 2).mean()), params, xb),
    'softplus + sigmoid 4M': (lambda x: nn.softplus(x) + nn.sigmoid(x), x1),
    'clip, round, astype int32 4M': (lambda x: jnp.round(jnp.clip(x * 10, -100, 100)).astype(jnp.int32), x1),
    'random.normal 4M': (lambda k: jax.random.normal(k, (1 << 22,)), jax.random.PRNGKey(0)),
    'std axis 0 4096x1024': (lambda b: b.std(0), b),
    'softmax axis 0 4096x1024': (lambda b: nn.softmax(b, axis=0), b),
    'batch norm 32x64x56x56': (bn, img),
    'grad batch norm 32x64x56x56': (jax.grad(lambda x: (bn(x) ** 2).sum()), img),
    'max pool 2x2 32x64x56x56':
      (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), 'VALID'), img),
    'depthwise conv 3x3 32x64x56x56':
      (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), 'SAME', feature_group_count=64), img, w[:, :1]),
    'rnn scan 128 steps 64x256': (rnn, W, xs),
    'while loop power iteration 256': (power, sq),
    'fori_loop of 100 dynamic slices': (slices, a),
    'scan 1000, cond + fori_loop inside': (branchy, xs[:4].reshape(1024, 64)[:1000]),
    'linalg.solve 256': (lambda m, y: jnp.linalg.solve(m, y), spd, sq),
    'linalg.inv 256': (jnp.linalg.inv, spd),
    'searchsorted 1M in 4096': (jnp.searchsorted, sorted_row, x1m),
    'top_k 64 of 4096x1024': (lambda b: lax.top_k(b, 64)[0], b),
    'fft 16384 points': (jnp.fft.fft, (x1[:16384] + 1j * x1[16384:32768]).astype(jnp.complex64)),
    'ifft2 64x256x256': (jnp.fft.ifft2, (bm + 1j * bm).astype(jnp.complex64)),
    'rfft2 1024x1024': (jnp.fft.rfft2, a[:1024, :1024]),
    'irfft rows 1024x513': (jnp.fft.irfft, jnp.fft.rfft(b[:1024])),
    'fft 1000 points of 4096x1000': (jnp.fft.fft, b[:, :1000].astype(jnp.complex64)),
  }

def worker(lib: str, only: str) -> None:
  """Time every program in library `lib` in this process; prints `RESULT name seconds` lines."""
  if lib == 'jax':
    import jax, jax.numpy as jnp, jax.nn as nn
    from jax import lax
    from jax.scipy.special import logsumexp
    settle = lambda: None
  else:
    sys.path.insert(0, ROOT)
    import tinyjx as jax, tinyjx.numpy as jnp
    from tinyjx import lax, nn
    from tinyjx.scipy.special import logsumexp
    from tinyjx.devices import cpu
    settle = cpu.finish_upgrades
  for name, (f, *args) in programs(jax, jnp, lax, nn, logsumexp).items():
    if only and only not in name: continue
    try:
      g = jax.jit(f)
      for _ in range(2): jax.block_until_ready(g(*args))
      settle()
      jax.block_until_ready(g(*args))
      ts, end = [], time.perf_counter() + 0.5
      while len(ts) < 10 or (time.perf_counter() < end and len(ts) < 200):
        t = time.perf_counter()
        jax.block_until_ready(g(*args))
        ts.append(time.perf_counter() - t)
      print(f"RESULT {name}\t{sorted(ts)[len(ts) // 2]}", flush=True)
    except Exception as e:    # a program one library cannot run is reported, not fatal to the sweep
      print(f"RESULT {name}\tERROR {type(e).__name__}: {str(e)[:80]}", flush=True)

def run(python: str, lib: str, only: str) -> dict:
  out = subprocess.run([python, os.path.abspath(__file__), '--worker', lib, '--only', only], capture_output=True,
                       text=True, timeout=1800)
  rows = [ln[len('RESULT '):].split('\t') for ln in out.stdout.splitlines() if ln.startswith('RESULT ')]
  if not rows and out.returncode: print(f"{lib}: the worker failed:\n{out.stderr[-2000:]}")
  return {name: (float(t) if not t.startswith('ERROR') else t) for name, t in rows}

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument('--jax', metavar='PYTHON', default=sys.executable, help="an interpreter with JAX installed")
  ap.add_argument('--only', default='', help='programs whose name contains this text')
  ap.add_argument('--worker', choices=('tinyjx', 'jax'), help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(args.worker, args.only)
  ours = run(sys.executable, 'tinyjx', args.only)
  has_jax = subprocess.run([args.jax, '-c', 'import jax'], capture_output=True).returncode == 0
  theirs = run(args.jax, 'jax', args.only) if has_jax else {}
  if not has_jax: print(f"JAX is not installed for {args.jax}: tinyjx's times only")
  print(f"{'program':40}{'tinyjx ms':>11}{'jax ms':>10}{'tinyjx/jax':>12}")
  for name, t in ours.items():
    j = theirs.get(name)
    fmt = lambda v: f"{v * 1e3:10.3f}" if isinstance(v, float) else f"{'error':>10}" if v else f"{'-':>10}"
    ratio = f"{t / j:11.2f}x" if isinstance(t, float) and isinstance(j, float) else f"{'-':>12}"
    print(f"{name:40}{fmt(t):>11}{fmt(j)}{ratio}")
  for name, t in list(ours.items()) + list(theirs.items()):
    if isinstance(t, str): print(f"{name}: {t}")

if __name__ == '__main__':
  main()
