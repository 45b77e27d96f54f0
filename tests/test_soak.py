"""Soak: 10,000 jitted training steps and 10,000 eager ops leave resident memory flat after warm-up and leak no
open files, threads, live buffers, IR nodes or cache entries. `python bench/soak.py --minutes 60` runs the
same loops for as long as asked (the release mode)."""
import os, sys
import numpy as np
import pytest
import tinyjx as jax
import tinyjx.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'bench'))
import soak  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists('/proc/self/statm'), reason="needs Linux /proc for RSS")

RSS_SLACK = 64 << 20   # generous: the allocator may keep a few arenas, but a leak per step would be far above

def check_flat(before: dict, after: dict, what: str):
  print(f"{what}: before {before}, after {after}")
  assert after['rss'] - before['rss'] < RSS_SLACK, (what, before, after)
  for k in ('fds', 'threads', 'buffers', 'realized', 'disk_entries'):
    assert after[k] <= before[k], (what, k, before, after)
  assert after['uops'] <= before['uops'] + 64, (what, before, after)   # a few nodes of the last step may be live

@pytest.fixture(autouse=True)
def private_cache(tmp_path):
  with jax.Context(TINYJX_CACHE_DIR=str(tmp_path / "cache")):   # other processes' compiles stay out of the count
    yield

def test_ten_thousand_jitted_steps_stay_flat():
  step, state = soak.training_step()
  state = soak.run_steps(step, state, 1000)            # warm-up: compile, caches, allocator arenas
  before = soak.resources()
  state = soak.run_steps(step, state, 10_000)
  after = soak.resources()
  check_flat(before, after, "jitted steps")
  assert step._cache.entries and len(step._cache.entries) == 1
  assert np.isfinite(float(state[2]))

def test_ten_thousand_eager_ops_stay_flat():
  z = soak.run_eager(4000)              # warm-up: long enough for the eager program to be compiled
  before = soak.resources()
  z = soak.run_eager(10_000)
  after = soak.resources()
  check_flat(before, after, "eager ops")
  assert np.isfinite(np.asarray(z)).all()

@pytest.mark.parametrize("device", ["PYTHON", "CPU"])
def test_an_allocation_too_large_names_the_bytes_and_the_shape(device):
  from tinyjx.devices import cpu
  if device == "CPU" and not cpu.available(): pytest.skip("no C compiler")
  huge = (1 << 20, 1 << 20)   # 4 TiB of float32
  with jax.Context(TINYJX_DEVICE=device):
    with pytest.raises(MemoryError, match=r"4\.00 TiB|4398046511104 bytes") as e:
      jax.jit(lambda a: jnp.broadcast_to(a, huge) * 2)(jnp.ones(1 << 20)).block_until_ready()
    assert "1048576" in str(e.value)             # the array's shape is in the message
    with pytest.raises(MemoryError, match=r"4\.00 TiB|4398046511104 bytes"):
      (jnp.zeros(huge) + 1).block_until_ready()
    np.testing.assert_allclose(np.asarray(jnp.ones(3) + 1), 2.0)   # the process is fine afterwards
