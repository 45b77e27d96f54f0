"""Soak: run a jitted training step and eager small ops in a loop and print resident memory, open files, threads,
live buffers, IR nodes and cache entries as it goes. Release mode: `python bench/soak.py --minutes 60`.
`tests/test_soak.py` runs the same loops for 10,000 steps each and asserts that nothing grows."""
from __future__ import annotations
import argparse, gc, os, threading, time
import numpy as np
import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx import array
from tinyjx.uop import UOp
from tinyjx.devices import diskcache
from nn import optim

def resources() -> dict:
  """What a leak would grow: resident bytes, open file descriptors, threads, live buffers, nodes, cache entries."""
  gc.collect()
  with open('/proc/self/statm') as f:
    rss = int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
  d = diskcache.cache_dir()
  return {'rss': rss, 'fds': len(os.listdir('/proc/self/fd')), 'threads': threading.active_count(),
          'buffers': len(array.buffers), 'uops': len(UOp._cache), 'realized': len(array.realized_cache),
          'disk_entries': len(os.listdir(d)) if os.path.isdir(d) else 0}

def _loss(p, x, y):
  h = jax.nn.relu(x @ p['w1'] + p['b1'])
  return jnp.mean((h @ p['w2'] - y) ** 2)

def training_step():
  """A jitted Adam step of a small MLP and its starting (params, optimizer state, loss, x, y)."""
  k1, k2 = jax.random.split(jax.random.PRNGKey(0))
  params = {'w1': jax.random.normal(k1, (16, 32)) * 0.1, 'b1': jnp.zeros(32), 'w2': jax.random.normal(k2, (32, 4)) * 0.1}
  tx = optim.adam(1e-3)
  @jax.jit
  def step(p, s, x, y):
    loss, g = jax.value_and_grad(_loss)(p, x, y)
    updates, s = tx.update(g, s, p)
    return optim.apply_updates(p, updates), s, loss
  rng = np.random.default_rng(0)
  x, y = rng.random((8, 16), np.float32), rng.random((8, 4), np.float32)
  return step, (params, tx.init(params), jnp.zeros(()), x, y)

def run_steps(step, state, n: int):
  p, s, loss, x, y = state
  for _ in range(n):
    p, s, loss = step(p, s, x, y)
  loss.block_until_ready()
  return p, s, loss, x, y

def run_eager(n: int):
  """`n` small eager ops (a multiply-add chain), each value computed before the next op is written."""
  z = jnp.ones(4)
  for i in range(n // 2):
    z = (z * 0.5 + 1).block_until_ready()
  return z

def main():
  ap = argparse.ArgumentParser(description=__doc__)
  ap.add_argument('--minutes', type=float, default=1.0)
  ap.add_argument('--every', type=int, default=10_000, help="steps between reports")
  args = ap.parse_args()
  step, state = training_step()
  state = run_steps(step, state, 1000)
  run_eager(1000)
  first, t0, total = resources(), time.time(), 0
  print("start", first)
  while time.time() - t0 < args.minutes * 60:
    state = run_steps(step, state, args.every)
    run_eager(args.every)
    total += args.every
    now = resources()
    grew = {k: now[k] - first[k] for k in now}
    print(f"{total} steps and eager ops, {time.time() - t0:.0f} s: {now}; growth {grew}", flush=True)

if __name__ == '__main__':
  main()
