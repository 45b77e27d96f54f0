"""bench: tinyjx against numpy (and JAX and PyTorch, when they are importable) on the workloads of DESIGN section 11.

Run from the repository root: `python bench/bench.py`, or with a Python that has JAX and PyTorch installed (a
test-only virtual environment, never a dependency: `pip install jax torch==2.13.0`) to add them. A peer that is not
installed is said so and skipped.
Prints one table: the median time of each workload per library (each library timed in a process of its
own, the best of two turns), tinyjx's speedup over numpy, tinyjx's GFLOP/s where the flop count is well defined
and its GB/s (the bytes the workload must read and write, at least) for the memory-bound rows. Then the first call
of the jitted MLP training step in a fresh process, with a cold and with a warm disk cache (bench/first_call.py
compares first calls with JAX's). The `jit x+1` row is 1000 calls of a jitted function on a one-element array: its
milliseconds are microseconds per call. Options: `--quick` (fewer repeats), `--only NAME`, `--device CPU|CL|CUDA`
(where tinyjx runs: its inputs are put on that device and its jitted functions run there; numpy and the peers are
unchanged).

Timing assertions do not belong in tests; the floors this project aims for are in the issue notes.
"""
from __future__ import annotations
import argparse, os, subprocess, sys, tempfile, time
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

def median_time(fn, repeats: int) -> float:
  fn()
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
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

# --- the MLP training step (784-512-512-10, batch 512, Adam) ---
SIZES, BATCH, LR, B1, B2, EPS = (784, 512, 512, 10), 512, 1e-3, 0.9, 0.999, 1e-8

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

WORKLOADS = {
  'gelu(x*a+b) 4M f32': gelu_chain,
  'matmul 1024 f32': lambda: matmul(1024),
  'matmul 256 f32': lambda: matmul(256),
  'softmax rows 4096x1024': softmax_rows,
  'fft2 complex64 512x512': fft2,
  'MLP step 784-512-512-10 b512 Adam': mlp_step_bench,
  f'jit x+1, 1 elem, {CALLS} calls': jit_call_overhead,
}

def worker(name: str, lib: str, repeats: int) -> None:
  """One library on one workload, alone in this process: prints its median time in seconds."""
  if lib != 'jax': os.environ['TINYJX_BENCH_NO_JAX'] = '1'
  if lib != 'torch': os.environ['TINYJX_BENCH_NO_TORCH'] = '1'
  fns, flops, nbytes = WORKLOADS[name]()
  if lib == 'tinyjx':   # a program first built at -O1 is timed on its optimized build (devices/cpu.py tiers)
    from tinyjx.devices import cpu
    cpu.finish_upgrades()
  print(median_time(fns[lib], repeats), flops, nbytes)

PEERS = ('jax', 'torch')

def measure(name: str, repeats: int, device: str = '', rounds: int = 2) -> tuple[dict, int, int]:
  """Each library in a process of its own (three thread pools in one process fight over two cores: the one
  that ran last still spins while the next one starts), in `rounds` alternating turns; the best median. tinyjx
  runs on `device` ('' for its default)."""
  import importlib.util
  wanted = [lib for lib in PEERS if not os.environ.get(f'TINYJX_BENCH_NO_{lib.upper()}')]
  libs = ['numpy', 'tinyjx'] + [lib for lib in wanted if importlib.util.find_spec(lib)]
  times: dict = {}
  for _ in range(rounds):
    for lib in libs:
      env = dict(os.environ, TINYJX_DEVICE=device) if lib == 'tinyjx' and device else None
      res = subprocess.run([sys.executable, os.path.abspath(__file__), '--worker', name, lib, '--repeats',
                            str(repeats)], capture_output=True, text=True, cwd=ROOT, env=env)
      if res.returncode: raise RuntimeError(f"{lib} worker failed: {res.stderr.strip().splitlines()[-1:]}")
      t, flops, nbytes = float(res.stdout.split()[-3]), int(res.stdout.split()[-2]), int(res.stdout.split()[-1])
      times[lib] = min(times.get(lib, t), t)
  return times, flops, nbytes

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
  print(f"\ntinyjx on {args.device or 'its default device'}")
  print(f"{'workload':<36}{'numpy ms':>10}{'tinyjx ms':>11}{'jax ms':>9}{'torch ms':>10}{'vs numpy':>10}"
        f"{'vs best peer':>14}{'tinyjx GFLOP/s':>16}{'tinyjx GB/s':>13}")
  for name, times, flops, nbytes, err in rows:
    if err:
      print(f"{name:<36}  error: {err[:100]}")
      continue
    t_np, t_tj = times.get('numpy'), times.get('tinyjx')
    peers = [times[lib] for lib in PEERS if lib in times]
    cols = "".join(f"{times[lib] * 1e3:{w}.2f}" if lib in times else f"{'-':>{w}}"
                   for lib, w in (('jax', 9), ('torch', 10)))
    best = f"{min(peers) / t_tj:13.2f}x" if peers else f"{'-':>14}"   # above 1: faster than every peer
    gflops = f"{flops / t_tj / 1e9:16.1f}" if flops else f"{'-':>16}"
    gbs = f"{nbytes / t_tj / 1e9:13.1f}" if nbytes and 'matmul' not in name else f"{'-':>13}"
    print(f"{name:<36}{t_np * 1e3:10.2f}{t_tj * 1e3:11.2f}{cols}{t_np / t_tj:9.2f}x{best}{gflops}{gbs}")
  if not args.no_first_call and not args.only:
    fc = first_call_times(args.device)
    for label, v in fc.items():
      txt = v if isinstance(v, str) else f"import {v[0]:.2f} s, first call {v[1]:.2f} s"
      print(f"MLP step, fresh process, {label} disk cache: {txt}")

if __name__ == '__main__':
  main()
