"""Checks every device kind passes the same way (tests/test_cl_device.py, tests/test_cuda_device.py)."""
import numpy as np
import tinyjx
from tinyjx import devices

def results_stay_on_the_device(kind: str, repr_name: str) -> None:
  """Devices looked up by kind; a jitted result stays in device memory until read; arrays of two devices mix."""
  found = tinyjx.devices(kind)
  assert found and found[0].platform == kind and repr(found[0]) == f'{repr_name}(id=0)'
  x = tinyjx.device_put(np.arange(4, dtype=np.float32), found[0])
  y = tinyjx.jit(lambda v: v * 2)(x)
  assert x.device == found[0] and y.device == found[0]
  assert isinstance(tinyjx.array.buffers[y.uop.arg[0]], devices.DeviceBuffer)   # not copied back until read
  back = tinyjx.device_put(y, 'CPU')
  assert back.device.platform == 'cpu' and np.asarray(back).tolist() == [0, 2, 4, 6]
  assert np.asarray(x + back).tolist() == [0, 3, 6, 9]   # arrays of two devices in one computation: moved

def second_process_reuses_the_binary(tmp_path, kind: str, patch: str, suffixes: tuple) -> None:
  """Two fresh processes run one jitted program on device `kind`: the first builds it (counted by `patch`, a line of
  Python that wraps the device's build step to append to `builds`), the second loads the cached binary, builds
  nothing and gets the same value; the cache then holds files of every suffix in `suffixes`."""
  import os, subprocess, sys, textwrap
  script = textwrap.dedent(f"""
    import tinyjx, tinyjx.numpy as jnp
    builds = []
    {patch}
    with tinyjx.Context(TINYJX_DEVICE={kind!r}):
      print(float(tinyjx.jit(lambda x: jnp.sum(jnp.cos(x) * 3))(jnp.arange(5.0))), len(builds))
  """)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ, TINYJX_CACHE_DIR=str(tmp_path / 'cache'), PYTHONPATH=root)
  runs = [subprocess.run([sys.executable, '-c', script], env=env, capture_output=True, text=True, timeout=300)
          for _ in range(2)]
  for r in runs: assert r.returncode == 0, r.stderr
  (v1, n1), (v2, n2) = [r.stdout.split() for r in runs]
  assert v1 == v2 and int(n1) >= 1 and int(n2) == 0
  for suffix in suffixes: assert list((tmp_path / 'cache').glob(f'*{suffix}')), suffix

# --- the GPU kernel shape (lower/optimize_gpu.py): results at every tile edge, and the shape the heuristics chose ---
EDGES = (1, 7, 31, 33, 255, 257)     # around the 16-thread and 64-row tiles and the 256-thread work groups
# (m, n, k) with each of m, n and k at every edge, the other two sizes awkward too
MATMUL_SIZES = sorted({(e, 33, 257) for e in EDGES} | {(255, e, 31) for e in EDGES} | {(31, 257, e) for e in EDGES})

def kernels_for(device, fn, *args, x64: bool = False) -> list:
  """The kernels `fn(*args)` lowers to on `device` (nothing is compiled or run)."""
  from tinyjx.lower import passes
  from tinyjx.lower import Lowering
  with tinyjx.Context(JAX_ENABLE_X64=x64):
    jaxpr = tinyjx.make_jaxpr(fn)(*args)
    st = Lowering(device, list(jaxpr.params), list(jaxpr.outs))
    for _, p in passes(last='estimate'): st = p(st)
  return st.kernels

def is_tiled_matmul(k) -> bool:
  from tinyjx.lower.optimize_gpu import TiledMatmul, walk
  return k.groups and any(isinstance(s, TiledMatmul) for s in walk(k.body))

def reduces_in_groups(k) -> bool:
  from tinyjx.lower.optimize_gpu import GroupReduce, walk
  return k.groups and k.local_size[0] > 1 and any(isinstance(s, GroupReduce) for s in walk(k.body))

def run_on(device: str, fn, *args, x64: bool = False):
  """`jit(fn)(*args)` on `device`, as numpy arrays, and the PYTHON reference's result."""
  import tinyjx.numpy as jnp
  with tinyjx.Context(JAX_ENABLE_X64=x64):
    with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
      want = [np.asarray(v) for v in tinyjx.tree_util.tree_leaves(fn(*map(jnp.asarray, args)))]
    with tinyjx.Context(TINYJX_DEVICE=device):
      got = [np.asarray(v) for v in tinyjx.tree_util.tree_leaves(tinyjx.jit(fn)(*map(jnp.asarray, args)))]
  return got, want

def assert_close(got: list, want: list, rtol: float, scale: float = 1.0) -> None:
  """Results equal in dtype and shape, and close: relative `rtol`, absolute `rtol * scale` (a sum of products of
  unit normals rounds about as much as its terms are big, even where it is near zero)."""
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=rtol * scale)

def matmul_matches_at_the_edges(device: str, m: int, n: int, k: int, dtype=np.float32) -> None:
  """x @ y against numpy in float64; tiled (where big enough for a tile) and with every edge handled."""
  from tinyjx.lower import optimize_gpu
  rng = np.random.default_rng(m * 1000003 + n * 1009 + k)
  x, y = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
  [kern] = kernels_for(devices.get(device), lambda a, b: a @ b, x, y, x64=dtype == np.float64)
  big = m * n * k >= optimize_gpu.MATMUL_MIN_WORK and k >= optimize_gpu.MATMUL_MIN_K
  assert is_tiled_matmul(kern) == (big and m > 1 and n > 1)   # a vector's product is a reduction per output
  got, _ = run_on(device, lambda a, b: a @ b, x, y, x64=dtype == np.float64)
  rtol = 1e-12 if dtype == np.float64 else 2e-5
  assert got[0].dtype == dtype
  np.testing.assert_allclose(got[0], x.astype(np.float64) @ y.astype(np.float64), rtol=rtol, atol=rtol * np.sqrt(k))

def transposed_and_batched_matmuls(device: str) -> None:
  """Operands read along either axis, a batch, a broadcast batch, a fused producer and epilogue."""
  rng = np.random.default_rng(7)
  a, b = rng.standard_normal((257, 33)).astype(np.float32), rng.standard_normal((31, 257)).astype(np.float32)
  bias = rng.standard_normal(31).astype(np.float32)
  ba, bb = rng.standard_normal((3, 33, 70)).astype(np.float32), rng.standard_normal((3, 70, 65)).astype(np.float32)
  flipped = lambda bb: bb.transpose(0, 2, 1)[:, ::-1].transpose(0, 2, 1)
  fns = lambda a, b, bias, ba, bb: (a.T @ b.T, b @ a, a.T @ a, tinyjx.nn.relu(a.T @ b.T + bias) * 2,
                                    ba @ bb, ba @ bb[0], jnp_exp(ba) @ flipped(bb))
  got, want = run_on(device, fns, a, b, bias, ba, bb)
  assert_close(got, want, 2e-5, scale=20)

def jnp_exp(x):
  import tinyjx.numpy as jnp
  return jnp.exp(x * 0.1)

def long_reductions_match(device: str) -> None:
  """Rows of a softmax and of sums, maxima and integer sums long enough to be shared by a work group."""
  rng = np.random.default_rng(3)
  x, i = rng.standard_normal((7, 1000)).astype(np.float32), rng.integers(-50, 50, (5, 257)).astype(np.int32)
  col = rng.standard_normal((3000, 3)).astype(np.float32)
  fns = lambda x, i, col: (tinyjx.nn.softmax(x, axis=-1), x[:, :255].sum(1), x[:, :257].max(1), i.sum(1), i.min(1),
                           x.reshape(7, 10, 100).sum((0, 2)), col.sum(0), (x > 0).any(1), x.sum(0))
  got, want = run_on(device, fns, x, i, col)
  assert_close(got, want, 2e-5, scale=10)

def a_million_float32s_sum_like_float64(device: str, n: int = 1_000_000) -> None:
  """A long full sum in float32 stays as close to the float64 sum as the float32 result can be: many work groups'
  partial sums of short strided runs, combined as trees, not one long running total."""
  x = np.random.default_rng(5).random(n).astype(np.float32)
  import tinyjx.numpy as jnp
  with tinyjx.Context(TINYJX_DEVICE=device):
    got = tinyjx.jit(lambda v: (jnp.sum(v), jnp.max(v), jnp.mean(v * v), v.reshape(-1, 10, 100).sum((0, 2))))(
      jnp.asarray(x))
  exact = x.astype(np.float64)
  assert got[0].dtype == np.float32
  assert abs(float(got[0]) - exact.sum()) <= 4 * np.spacing(np.float32(exact.sum()))
  assert float(got[1]) == x.max()
  assert abs(float(got[2]) - (exact * exact).mean()) <= 1e-6 * (exact * exact).mean()
  channels = exact.reshape(-1, 10, 100).sum((0, 2))              # per-channel sums of 1/10 of the elements each
  assert np.all(np.abs(np.asarray(got[3]) - channels) <= 4 * np.spacing(channels.astype(np.float32)))

def split_contractions_match(device: str) -> None:
  """Contractions with few output tiles and a long contraction (split-K: partial sums over slices, then their sum):
  a matmul with an epilogue, one with a batch of one, and a convolution's weight gradient (a small output, a
  contraction over batch and image), against the reference."""
  import tinyjx.numpy as jnp
  rng = np.random.default_rng(11)
  a, b, bias = (rng.standard_normal(s).astype(np.float32) for s in ((20, 8192), (8192, 40), (40,)))
  x, w = rng.standard_normal((64, 8, 16, 16)).astype(np.float32), rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
  wgrad = tinyjx.grad(lambda w, x: jnp.sum(tinyjx.lax.conv(x, w, (1, 1), 'VALID') ** 2))
  fns = lambda a, b, bias, x, w: (jnp.tanh((a @ b) * 0.01 + bias), (a[None] @ b[None])[0], wgrad(w, x))
  got, want = run_on(device, fns, a, b, bias, x, w)
  assert_close(got, want, 1e-4, scale=100)

def the_heuristics_chose_the_gpu_shapes(device) -> None:
  """Work groups for long reductions, two stages for a long full sum, tiles for a matmul and a convolution, local
  sizes for every kernel: a regression to one work item per output point shows here."""
  from tinyjx.lower import optimize_gpu
  import tinyjx.numpy as jnp
  f32 = lambda *s: np.ones(s, np.float32)
  [soft] = kernels_for(device, lambda x: tinyjx.nn.softmax(x, axis=-1), f32(7, 1000))
  assert reduces_in_groups(soft) and soft.global_size == (7 * soft.local_size[0],)
  [short] = kernels_for(device, lambda x: x.sum(1), f32(17, 9))
  assert not short.groups and short.global_size[0] % short.local_size[0] == 0 and short.global_size[0] >= 17
  first, last = kernels_for(device, jnp.sum, f32(1_000_000))
  assert first.name.endswith('_partial') and reduces_in_groups(first)
  assert first.flops // 1000 == 1000               # each element added once (DEBUG=2), not once per group
  assert first.global_size[0] // first.local_size[0] >= 64      # many work groups, each writing one partial sum
  first, last = kernels_for(device, lambda x: x.mean((0, 2)), f32(64, 8, 4096))   # a batch norm's means
  assert first.name.endswith('_partial') and first.global_size[0] // first.local_size[0] >= 8 * 16
  assert reduces_in_groups(last) and last.global_size[0] // last.local_size[0] == 8   # a group per channel
  [mm] = kernels_for(device, lambda a, b: a @ b, f32(257, 255), f32(255, 33))
  assert is_tiled_matmul(mm) and mm.local_size == (optimize_gpu.THREADS ** 2, 1)
  assert mm.global_size == (mm.local_size[0], 5)               # 33 columns: one tile of 64; 257 rows: five
  conv = kernels_for(device, lambda x, w: tinyjx.lax.conv(x, w, (1, 1), 'SAME'), f32(2, 8, 16, 16), f32(16, 8, 3, 3))
  assert any(is_tiled_matmul(k) for k in conv)                 # a convolution is an implicit GEMM
  split, add = kernels_for(device, lambda a, b: a @ b, f32(32, 8192), f32(8192, 48))   # one tile, a long contraction
  assert split.name.endswith('_split') and is_tiled_matmul(split) and split.global_size[2] == 32   # 32 slices
  assert not is_tiled_matmul(add) and add.name == split.name[:-len('_split')]
  wgrad = tinyjx.grad(lambda w, x: jnp.sum(tinyjx.lax.conv(x, w, (1, 1), 'VALID') ** 2))
  assert any(k.name.endswith('_split') for k in kernels_for(device, wgrad, f32(16, 8, 3, 3), f32(64, 8, 16, 16)))
  [ew] = kernels_for(device, lambda x: jnp.tanh(x) * 2, f32(70, 3))
  assert not ew.groups and 1 < int(np.prod(ew.local_size)) <= optimize_gpu.GROUP
  assert all(g % l == 0 and g >= n for g, l, n in zip(ew.global_size, ew.local_size, (3, 70)))

def barriers_are_uniform(source: str) -> int:
  """Every barrier of a CUDA source is reached by every thread of its block: no loop or branch around it depends on
  the thread (only on the block: a grid-stride loop over blocks, a contraction step, a tree step). Returns how many
  barriers there are."""
  stack, count = [], 0
  for line in source.splitlines():
    if '__syncthreads()' in line:
      count += 1
      assert not any('threadIdx' in h or 'lid' in h or h.lstrip().startswith('if') for h in stack), (line, stack)
    stack += [line] * (line.count('{') - line.count('}')) if line.count('{') > line.count('}') else []
    for _ in range(max(0, line.count('}') - line.count('{'))): stack.pop()
  return count
