"""bench/first_call: how long the first call of a jitted program takes in a fresh process, tinyjx against JAX.

Run from the repository root: `python bench/first_call.py` (with a Python that has JAX installed, e.g. a test-only
virtual environment, to add JAX's column; `--runs 3` repeats every measurement and prints the medians). Each row
is measured in a process of its own that imports the library, builds the inputs, and times one call of the
jitted function until its result is ready:

  MLP step        the bench's 784-512-512-10 MLP training step, batch 512, Adam (bench.py's `make_step`)
  CNN step        examples/mnist.py's training step (two conv blocks with BatchNorm, Adam), batch 128
  CNN eval b1000  examples/mnist.py's `predict`, batch 1000

`cold` starts on an empty tinyjx kernel cache (TINYJX_CACHE_DIR, a new temporary directory), `warm` on the cache
the cold run left. JAX has no persistent cache by default, so each of its runs is cold. Timing assertions do not
belong in tests: the goals are in issue 13 (cold at most JAX's, warm MLP step under 0.2 s).
"""
from __future__ import annotations
import argparse, os, subprocess, sys, tempfile
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINYJX = """
import sys, time
sys.path[:0] = [{root!r}, {root!r} + '/bench', {root!r} + '/examples']
import numpy as np, tinyjx, tinyjx.numpy as jnp
rng = np.random.default_rng(0)
which = {which!r}
if which == 'mlp':
  import bench
  from tinyjx import nn
  params, (x, y) = bench.mlp_init(rng), bench.mlp_data(rng)
  f = tinyjx.jit(bench.make_step(jnp, nn, lambda g: tinyjx.value_and_grad(g)))
  tp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
  tz = [(jnp.zeros_like(w), jnp.zeros_like(b)) for w, b in tp]
  args = (tp, tz, tz, jnp.asarray(0.0), jnp.asarray(x), jnp.asarray(y))
else:
  import nn, mnist, tinyjx.random as random
  X = rng.integers(0, 255, (1000, 1, 28, 28)).astype(np.uint8); Y = rng.integers(0, 10, 1000).astype(np.int32)
  model = mnist.make_model(random.PRNGKey(0))
  if which == 'cnn':
    opt = nn.optim.Adam(model, lr=1e-3)
    f, args = mnist.make_train_step(), (opt, X[:128], Y[:128])
  else:
    f, args = mnist.predict, (model, X)
tinyjx.block_until_ready(args)
t0 = time.perf_counter()
tinyjx.block_until_ready(f(*args))
print(time.perf_counter() - t0)
"""

JAX = """
import sys, time
sys.path[:0] = [{root!r} + '/bench']
import numpy as np, jax, jax.numpy as jnp
jax.config.update('jax_platforms', 'cpu')
rng = np.random.default_rng(0)
which = {which!r}
if which == 'mlp':
  import bench
  params, (x, y) = bench.mlp_init(rng), bench.mlp_data(rng)
  f = jax.jit(bench.make_step(jnp, jax.nn, lambda g: jax.value_and_grad(g)))
  jp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
  jz = [(jnp.zeros_like(w), jnp.zeros_like(b)) for w, b in jp]
  args = (jp, jz, jz, jnp.asarray(0.0), jnp.asarray(x), jnp.asarray(y))
else:
  import first_call as fc
  X = rng.integers(0, 255, (1000, 1, 28, 28)).astype(np.uint8); Y = rng.integers(0, 10, 1000).astype(np.int32)
  params, stats = fc.jax_cnn_init(rng)
  if which == 'cnn':
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    f, args = jax.jit(fc.jax_cnn_step), (params, stats, zeros, zeros, jnp.asarray(0.0), X[:128], Y[:128])
  else:
    f, args = jax.jit(fc.jax_cnn_predict), (params, stats, X)
  args = jax.device_put(args)
jax.block_until_ready(args)
t0 = time.perf_counter()
jax.block_until_ready(f(*args))
print(time.perf_counter() - t0)
"""

# --- examples/mnist.py's CNN written for JAX (same layers, shapes, BatchNorm and Adam) ---
CONVS = ((1, 32, 5), (32, 32, 5), (32, 64, 3), (64, 64, 3))

def jax_cnn_init(rng):
  params = {f'c{i}': {'w': (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32),
                      'b': np.zeros(o, np.float32)} for i, (c, o, k) in enumerate(CONVS)}
  params.update({f'bn{i}': {'g': np.ones(n, np.float32), 'b': np.zeros(n, np.float32)} for i, n in ((1, 32), (3, 64))})
  params['fc'] = {'w': (rng.standard_normal((10, 576)) / 24).astype(np.float32), 'b': np.zeros(10, np.float32)}
  stats = {f'bn{i}': {'mean': np.zeros(n, np.float32), 'var': np.ones(n, np.float32)} for i, n in ((1, 32), (3, 64))}
  return params, stats

def jax_cnn(params, stats, x, train):
  import jax, jax.numpy as jnp
  def conv(p, h):
    out = jax.lax.conv_general_dilated(h, p['w'], (1, 1), 'VALID', dimension_numbers=('NCHW', 'OIHW', 'NCHW'))
    return jax.nn.relu(out + p['b'][None, :, None, None])
  def norm(name, h):
    if train: mean, var = h.mean((0, 2, 3)), h.var((0, 2, 3))
    else: mean, var = stats[name]['mean'], stats[name]['var']
    n = h.size // h.shape[1]
    new[name] = {'mean': 0.9 * stats[name]['mean'] + 0.1 * jax.lax.stop_gradient(mean),
                 'var': 0.9 * stats[name]['var'] + 0.1 * jax.lax.stop_gradient(var) * n / (n - 1)}
    p, c = params[name], (None, slice(None), None, None)
    return (h - mean[c]) * jax.lax.rsqrt(var[c] + 1e-5) * p['g'][c] + p['b'][c]
  def pool(h): return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), 'VALID')
  new: dict = {}
  h = x.astype(jnp.float32) * (1.0 / 255.0)
  h = pool(norm('bn1', conv(params['c1'], conv(params['c0'], h))))
  h = pool(norm('bn3', conv(params['c3'], conv(params['c2'], h))))
  return h.reshape(h.shape[0], -1) @ params['fc']['w'].T + params['fc']['b'], new

def jax_cnn_step(params, stats, m, v, t, x, y):
  import jax, jax.numpy as jnp
  def loss_fn(p):
    logits, new = jax_cnn(p, stats, x, True)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1)), (new, logits)
  (loss, (new, logits)), g = jax.value_and_grad(loss_fn, has_aux=True)(params)
  t = t + 1
  m = jax.tree_util.tree_map(lambda m_, g_: 0.9 * m_ + 0.1 * g_, m, g)
  v = jax.tree_util.tree_map(lambda v_, g_: 0.999 * v_ + 0.001 * g_ * g_, v, g)
  params = jax.tree_util.tree_map(lambda p, m_, v_: p - 1e-3 * (m_ / (1 - 0.9 ** t)) / (jnp.sqrt(v_ / (1 - 0.999 ** t))
                                                                                         + 1e-8), params, m, v)
  return params, new, m, v, t, loss, jnp.mean(jnp.argmax(logits, -1) == y)

def jax_cnn_predict(params, stats, x):
  import jax.numpy as jnp
  return jnp.argmax(jax_cnn(params, stats, x, False)[0], -1)

# --- the runs ---
def run(code: str, env: dict, python: str) -> float | str:
  res = subprocess.run([python, '-c', code], env=env, capture_output=True, text=True, cwd=ROOT)
  if res.returncode != 0:
    return f"failed: {(res.stderr.strip().splitlines() or [res.returncode])[-1]}"
  return float(res.stdout.split()[-1])

def jax_python() -> str | None:
  """A Python that can import JAX: this one, or $TINYJX_BENCH_JAX_PYTHON."""
  for py in (sys.executable, os.environ.get('TINYJX_BENCH_JAX_PYTHON')):
    if py and subprocess.run([py, '-c', 'import jax'], capture_output=True).returncode == 0: return py
  return None

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument('--runs', type=int, default=1, help='repeat each measurement and print the median')
  ap.add_argument('--only', default='', help='rows whose name contains this text')
  args = ap.parse_args()
  jpy = jax_python()
  if jpy is None: print("JAX not importable (set TINYJX_BENCH_JAX_PYTHON to a Python that has it): skipped")
  rows = [('MLP step', 'mlp'), ('CNN step b128', 'cnn'), ('CNN eval b1000', 'eval')]
  print(f"{'first call, fresh process':<28}{'tinyjx cold s':>14}{'tinyjx warm s':>14}{'jax s':>9}")
  for label, which in rows:
    if args.only and args.only not in label: continue
    times: dict = {'cold': [], 'warm': [], 'jax': []}
    for _ in range(args.runs):
      with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TINYJX_CACHE_DIR=cache)
        code = TINYJX.format(root=ROOT, which=which)
        times['cold'].append(run(code, env, sys.executable))
        times['warm'].append(run(code, env, sys.executable))
      if jpy: times['jax'].append(run(JAX.format(root=ROOT, which=which), dict(os.environ), jpy))
    cells = []
    for k in ('cold', 'warm', 'jax'):
      vals = [t for t in times[k] if isinstance(t, float)]
      bad = [t for t in times[k] if isinstance(t, str)]
      cells.append(f"{np.median(vals):.2f}" if vals else (bad[0][:40] if bad else '-'))
    print(f"{label:<28}{cells[0]:>14}{cells[1]:>14}{cells[2]:>9}")

if __name__ == '__main__':
  main()
