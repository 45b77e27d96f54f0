"""Fusion users can count on: kernel counts, views that allocate nothing, buffers reused by liveness."""
import re
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import nn, counters

def compiled(cpu, f, *args):
  """The CPU executable of `f` at the avals of `args` (via make_jaxpr, so nothing here depends on jit)."""
  return cpu.compile_jaxpr(tinyjx.make_jaxpr(f)(*args))

def run(exe, *args):
  from tinyjx.devices.python import NumpyBuffer
  from tinyjx import dtypes
  bufs = [NumpyBuffer('CPU:0', np.ascontiguousarray(a), dtypes.to_dtype(a.dtype)) for a in args]
  return [b.numpy() for b in exe.run(bufs)]

def rand(*shape, seed=0):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def test_elementwise_chain_is_one_kernel(cpu):
  x, a, b = rand(1000), rand(1000, seed=1), rand(1000, seed=2)
  exe = compiled(cpu, lambda x, a, b: nn.gelu(x * a + b, approximate=True), x, a, b)
  assert len(exe.kernels) == 1 and exe.n_intermediates == 0
  y = x * a + b
  want = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
  np.testing.assert_allclose(run(exe, x, a, b)[0], want, rtol=1e-5, atol=1e-6)

def test_views_never_copy(cpu):
  x = rand(6, 8)
  def f(x):
    v = jnp.flip(jnp.pad(x.T[1:7, ::1], ((1, 2), (0, 3))), axis=0)     # transpose, slice, pad, flip
    w = jnp.broadcast_to(x.reshape(6, 1, 8), (6, 4, 8)).reshape(24, 8)   # reshape, broadcast
    return v.sum() + w[3:9].mean(axis=0)
  exe = compiled(cpu, f, x)
  assert exe.n_intermediates == 0 and exe.arena_bytes == 0
  v = np.flip(np.pad(x.T[1:7], ((1, 2), (0, 3))), axis=0)
  w = np.broadcast_to(x.reshape(6, 1, 8), (6, 4, 8)).reshape(24, 8)
  np.testing.assert_allclose(run(exe, x)[0], v.sum() + w[3:9].mean(axis=0), rtol=1e-5)

def test_broadcast_multiply_sum_is_one_matmul_kernel(cpu):
  n = 64
  a, b = rand(n, n), rand(n, n, seed=1)
  exe = compiled(cpu, lambda a, b: (a.reshape(n, 1, n) * b.T.reshape(1, n, n)).sum(axis=2), a, b)
  assert len(exe.kernels) == 1 and 'tjx_mmr_f32' in exe.source        # (a small x is read in place, by rows)
  np.testing.assert_allclose(run(exe, a, b)[0], a @ b, rtol=1e-4, atol=1e-4)

def test_matmul_bias_relu_is_one_kernel(cpu):
  x, w, b = rand(40, 50), rand(50, 30, seed=1), rand(30, seed=2)
  exe = compiled(cpu, lambda x, w, b: jnp.maximum(x @ w + b, 0.0), x, w, b)
  assert len(exe.kernels) == 1
  np.testing.assert_allclose(run(exe, x, w, b)[0], np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-5)

@pytest.mark.parametrize('axis', [-1, 0])
def test_softmax_is_two_kernels_along_rows_and_three_down_columns(cpu, axis):
  """Along rows, at most two kernels; down columns three (the max and the sum each a column reduction of its own,
  schedule `_spread_column`, then the scaling: 7-11x faster than walking each column, at every size)."""
  x = rand(33, 17)
  exe = compiled(cpu, lambda x: nn.softmax(x, axis=axis), x)
  assert len(exe.kernels) <= (2 if axis == -1 else 3)
  if axis == -1:                                 # one pass for the max, one for exp and its sum, one to scale
    kernel = exe.source[exe.source.index('static void k0'):exe.source.index('void tjx_run_0')]
    assert kernel.count('tjx_exp_f32(') == 1
  e = np.exp(x - x.max(axis=axis, keepdims=True))
  np.testing.assert_allclose(run(exe, x)[0], e / e.sum(axis=axis, keepdims=True), rtol=1e-5, atol=1e-7)

def _layer_norm(x):
  mu = x.mean(axis=-1, keepdims=True)
  return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)

@pytest.mark.parametrize('fn', ['softmax', 'log_softmax', 'layer_norm'])
def test_each_row_is_first_reduced_inside_the_loop_of_the_row_before(cpu, monkeypatch, fn):
  """optimize.pipeline_rows: a row's max (a layer norm's mean) is reduced inside the exp-and-sum loop (the squared
  deviations' loop) of the row before: one vector loop with both reductions. 600 rows of 512 float32 (1.2 MB) run
  as 64 chunks of 9 rows and 24 rows left over; the values of the kernel without the rewrite, NaN and infinite rows
  included, wherever they fall (a chunk's last and first rows, the leftovers): bit for bit where the first pass is a
  max (exact in any order), and to the rounding of a float32 sum where it is a mean (the next row's sum is added in
  the lanes of the loop it joins, which the compiler may vectorize otherwise)."""
  from tinyjx.lower import optimize
  x = rand(600, 512)
  x[8, 3], x[9, 100], x[590, 0] = np.nan, np.nan, np.nan     # a chunk's last row, the next chunk's first, leftovers
  x[17, 5], x[300] = np.inf, -np.inf
  f = {'softmax': lambda x: nn.softmax(x, axis=-1), 'log_softmax': lambda x: nn.log_softmax(x, axis=-1),
       'layer_norm': _layer_norm}[fn]
  exe = compiled(cpu, f, x)
  got = run(exe, x)[0]
  assert re.search(r'#pragma omp simd reduction\(\+:acc\d+\) reduction\(tjx_f?(max|min)_f32|'
                   r'#pragma omp simd reduction\(\+:acc\d+\) reduction\(\+:acc\d+\)', exe.source), fn
  monkeypatch.setattr(optimize, 'PIPELINE_MIN_BYTES', 1 << 62)
  plain = compiled(cpu, f, x)
  assert plain.source != exe.source
  if fn == 'layer_norm': np.testing.assert_allclose(got, run(plain, x)[0], rtol=1e-6, atol=1e-6)
  else: np.testing.assert_array_equal(got, run(plain, x)[0])
  ok = np.isfinite(x).all(axis=1)
  x64 = x[ok].astype(np.float64)
  z = x64 - (x64.mean(-1, keepdims=True) if fn == 'layer_norm' else x64.max(-1, keepdims=True))
  e = np.exp(z).sum(-1, keepdims=True)
  want = {'softmax': np.exp(z) / e, 'log_softmax': z - np.log(e),
          'layer_norm': z / np.sqrt((z * z).mean(-1, keepdims=True) + 1e-5)}[fn]
  np.testing.assert_allclose(got[ok], want, rtol=2e-5, atol=2e-5)
  assert np.isnan(got[[8, 9, 590]]).all()

@pytest.mark.parametrize('rows,cols', [(16, 256), (17, 300), (127, 1000), (513, 333), (1030, 1024)])
def test_pipelined_rows_of_every_chunk_and_leftover_count(cpu, monkeypatch, rows, cols):
  """pipeline_rows at sizes that make 2 chunks of 8 rows, a leftover row, chunks of 1 row short of a power of two,
  64 chunks and 6 rows left over, rows of 1 to 4 KB (the byte floor lifted, so small arrays pipeline too): the same
  bits as the plain kernel, a NaN in every 7th row and the next row clean. (A float32 row of more than 1024 elements
  sums in blocks, `block_sums`: its second pass is a loop of loops, which stays as it is.)"""
  from tinyjx.lower import optimize
  x = rand(rows, cols, seed=rows)
  x[::7, cols // 2] = np.nan
  f = lambda x: nn.log_softmax(x, axis=-1)
  monkeypatch.setattr(optimize, 'PIPELINE_MIN_BYTES', 0)
  exe = compiled(cpu, f, x)
  assert re.search(r'reduction\(\+:acc\d+\) reduction\(tjx_fmax_f32', exe.source)
  monkeypatch.setattr(optimize, 'PIPELINE_MIN_BYTES', 1 << 62)
  got, want = run(exe, x)[0], run(compiled(cpu, f, x), x)[0]
  np.testing.assert_array_equal(got, want)
  assert np.isnan(got[::7]).all() and np.isfinite(got[1::7]).all()

@pytest.mark.parametrize('rows,cols,dt', [(16, 256, np.float32), (17, 304, np.float32), (127, 1008, np.float32),
                                         (513, 336, np.float32), (600, 512, np.float32), (130, 704, np.float64)])
def test_a_row_softmax_computes_each_rows_results_in_the_next_rows_loop(cpu, monkeypatch, rows, cols, dt):
  """optimize.defer_row_stores: where a pipelined softmax streams its results, each row's division by its sum runs
  inside the next row's exp loop (the row buffer doubled, rows alternating halves), the chunk's last row after it.
  With the byte floors lifted, at sizes that make chunks of 2 and of 9 rows, leftover rows, rows of 1 to 4 KB (whole
  cache lines: a row that is not streams nothing, and is left as it is), and float64: NaN and infinite rows wherever
  they fall (a chunk's first and last rows), the same bits as the kernel without the rewrite, on one, two and three
  threads, and numpy's values."""
  from tinyjx.lower import optimize
  x = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(dt)
  x[::7, cols // 2] = np.nan
  x[8, 3], x[rows - 1, 1], x[5] = np.inf, np.nan, -np.inf
  f = lambda x: nn.softmax(x, axis=-1)
  monkeypatch.setattr(optimize, 'PIPELINE_MIN_BYTES', 0)
  monkeypatch.setattr(optimize, 'STREAM_BYTES', 0)
  with tinyjx.Context(JAX_ENABLE_X64=True):
    exe = compiled(cpu, f, x)
    kernel = exe.source[exe.source.index('static void k0'):exe.source.index('void tjx_run_0')]
    assert re.search(rf'\w+\[{2 * cols}\];', kernel) and re.search(r'% 2LL', kernel), (rows, cols)
    assert kernel.count('tjx_stream_') >= 2           # a later row's and the chunk's last row's (and leftovers')
    got = [run(exe, x)[0]]
    for threads in (1, 3):
      with tinyjx.Context(TINYJX_THREADS=threads): got.append(run(compiled(cpu, f, x), x)[0])
    monkeypatch.setattr(optimize, '_deferred', lambda rows, k: None)
    plain = compiled(cpu, f, x)
  assert plain.source != exe.source
  want = run(plain, x)[0]
  for g in got: np.testing.assert_array_equal(g, want)
  ok = np.isfinite(x).all(axis=1)
  z = x[ok].astype(np.float64) - x[ok].max(-1, keepdims=True)
  np.testing.assert_allclose(got[0][ok], np.exp(z) / np.exp(z).sum(-1, keepdims=True), rtol=2e-5, atol=2e-6)
  assert np.isnan(got[0][~ok]).all()

def test_small_rows_are_not_pipelined(cpu):
  exe = compiled(cpu, lambda x: nn.softmax(x, axis=-1), rand(64, 512))      # 128 KB: in cache already
  assert not re.search(r'reduction\(\+:acc\d+\) reduction', exe.source)

def test_reduction_fuses_with_producers_and_consumers(cpu):
  x = rand(20, 30)
  exe = compiled(cpu, lambda x: (x - (x * 2 + 1).mean(axis=1, keepdims=True)) / (1 + jnp.abs(x).max()), x)
  assert len(exe.kernels) == 1
  want = (x - (x * 2 + 1).mean(axis=1, keepdims=True)) / (1 + np.abs(x).max())
  np.testing.assert_allclose(run(exe, x)[0], want, rtol=1e-5, atol=1e-6)

def test_layer_norm_is_at_most_two_kernels(cpu):
  x = rand(16, 64)
  def ln(x):
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
  exe = compiled(cpu, ln, x)
  assert len(exe.kernels) <= 2
  mu = x.mean(-1, keepdims=True)
  np.testing.assert_allclose(run(exe, x)[0], (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), rtol=1e-4, atol=1e-5)

def test_a_reduction_read_by_two_kernels_is_computed_once(cpu):
  x = rand(50, 40)
  exe = compiled(cpu, lambda x: (x / x.sum(axis=0), jnp.argsort(x.sum(axis=0))), x)
  # the sum is a buffer read by the division and by the sort's input: 3 kernels, one of them the sum
  assert sum(k.name.endswith('reduce_sum') for k in exe.kernels) == 1
  a, s = run(exe, x)
  np.testing.assert_allclose(a, x / x.sum(axis=0), rtol=1e-4)
  np.testing.assert_array_equal(s, np.argsort(x.sum(axis=0), kind='stable'))

def _stable_argsort(x, axis, descending):
  """numpy's stable argsort, descending as JAX's: ties keep their order (lower index first), NaN first."""
  if not descending: return np.argsort(x, axis=axis, kind='stable')
  n = x.shape[axis]
  return n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind='stable'), axis)

def _hard_row(rng, shape, dtype):
  """Values with ties, NaNs, infinities and both zeros (floats), or a few small integers."""
  if np.dtype(dtype).kind != 'f': return rng.integers(0, 5, shape).astype(dtype)
  x = np.round(rng.standard_normal(shape) * 2) / 2
  m = rng.random(shape)
  x[m < 0.05], x[(m > 0.05) & (m < 0.08)], x[(m > 0.08) & (m < 0.1)] = np.nan, np.inf, -np.inf
  x[(m > 0.1) & (m < 0.15)] = -0.0
  return x.astype(dtype)

@pytest.mark.parametrize("n, k", [(1, 1), (7, 3), (31, 1), (33, 4), (255, 31), (257, 64), (1024, 128), (4096, 512)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
def test_an_argsort_read_in_its_first_places_selects_them(cpu, n, k, dtype):
  """lax.top_k and argsort(x)[:k] sort only the first k places of each row (tjx_topk): the indices and values of
  a full stable sort's first k, ties, NaNs and both zeros included, ascending and descending, along the last axis
  and along the first; a row sorted the other way (more indices get in than the budget) falls back to the sort."""
  from tinyjx import lax
  from tinyjx.lower.render import TOPK_FRACTION, TOPK_MAX
  rng = np.random.default_rng(n * 7 + k)
  x = _hard_row(rng, (5, n), dtype)
  x[-1] = np.sort(x[-1])           # ascending: top_k's every element comes first so far
  exe = compiled(cpu, lambda x: lax.top_k(x, k), x)
  assert bool(re.search(r'tjx_topk_\w\(key', exe.source)) == (k <= min(n // TOPK_FRACTION, TOPK_MAX))
  vals, idx = run(exe, x)
  want = _stable_argsort(x, 1, True)[:, :k]
  np.testing.assert_array_equal(idx, want)
  np.testing.assert_array_equal(vals, np.take_along_axis(x, want, 1))
  y = _hard_row(rng, (n, 3), dtype)
  exe = compiled(cpu, lambda y: jnp.argsort(y, axis=0)[:k] + 0, y)
  np.testing.assert_array_equal(run(exe, y)[0], _stable_argsort(y, 0, False)[:k])

def test_an_argsort_also_read_whole_is_sorted_whole(cpu):
  x = _hard_row(np.random.default_rng(1), (4, 100), np.float32)
  exe = compiled(cpu, lambda x: (jnp.argsort(x, axis=1)[:, :5], jnp.argsort(x, axis=1)), x)
  assert not re.search(r'tjx_topk_\w\(key', exe.source)
  head, whole = run(exe, x)
  np.testing.assert_array_equal(whole, _stable_argsort(x, 1, False))
  np.testing.assert_array_equal(head, whole[:, :5])

def test_what_gathers_read_more_often_than_it_has_elements_is_computed_once(cpu):
  """searchsorted's keys (integers made of the sorted floats) are a buffer of their own: the search kernel reads
  them with 13 gathers a query, and fused each gather would compute its key again."""
  a, v = np.sort(rand(4096)), rand(3000, seed=1)
  exe = compiled(cpu, jnp.searchsorted, a, v)
  assert len(exe.kernels) == 2
  search = exe.source[exe.source.index('static void k1'):exe.source.index('void tjx_kernel_1')]
  assert search.count('union') == 1       # one bit cast a query (its own key), none for the 13 probes
  np.testing.assert_array_equal(run(exe, a, v)[0], np.searchsorted(a, v))
  small = compiled(cpu, lambda a, i: jnp.exp(a)[i], rand(100), np.arange(10, dtype=np.int32))
  assert len(small.kernels) == 1    # (ten reads of a hundred: computed where they are read)

def test_intermediate_buffers_are_reused_by_liveness(cpu):
  x = rand(256)
  def f(x):
    for _ in range(4): x = jnp.sort(x * 1.5 + 1.0)    # each sort reads a materialized buffer
    return x
  exe = compiled(cpu, f, x)
  sizes = [s.nbytes for s in exe.slots if s.kind == 'tmp']
  assert len(sizes) >= 4 and exe.arena_bytes < sum(sizes)
  want = x
  for _ in range(4): want = np.sort(want * 1.5 + 1.0)
  np.testing.assert_allclose(run(exe, x)[0], want, rtol=1e-6)

def test_eager_code_fuses_and_counts_one_kernel(cpu):
  x = jnp.asarray(rand(100))
  y = jnp.tanh(x * 2 + 1) - 0.5                    # lazy: nothing has run yet
  with counters.measure() as c, tinyjx.Context(TINYJX_EAGER_COMPILE_MS=0):
    np.asarray(y)
  assert c['kernels'] == 1 and c['flops'] > 0 and c['bytes'] >= 2 * 100 * 4

def test_an_adam_update_is_one_kernel(cpu):
  p, g, m, v = (rand(64, 32, seed=s) for s in range(4))
  v = np.abs(v)
  t = np.array(3.0, np.float32)
  def adam(p, g, m, v, t):
    t = t + 1
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    return p - 1e-3 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8), m, v, t
  exe = compiled(cpu, adam, p, g, m, v, t)
  assert len(exe.kernels) == 2                      # the step counter, then p, m and v in one pass
  got = run(exe, p, g, m, v, t)
  m2, v2 = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
  want = p - 1e-3 * (m2 / (1 - 0.9 ** 4)) / (np.sqrt(v2 / (1 - 0.999 ** 4)) + 1e-8)
  np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(got[1], m2, rtol=1e-6)
  np.testing.assert_allclose(got[3], 4.0)

def test_stacked_convolutions_compute_each_contraction_once(cpu):
  """The gradient of conv -> conv -> linear: each dot_general of the jaxpr is one matmul kernel and none is
  computed twice (folding a transpose into one reduction must not leave the unfolded one alive below it)."""
  from nn import functional as F
  x, w1, w2, w3 = rand(8, 2, 16, 16), rand(4, 2, 3, 3, seed=1), rand(6, 4, 3, 3, seed=2), rand(864, 10, seed=3)
  def loss(w1, w2, w3, x):
    h = F.conv(F.conv(x, w1), w2).reshape(8, -1)
    return jnp.sum(jnp.tanh(h @ w3))
  g = tinyjx.grad(loss, argnums=(0, 1, 2))
  exe = compiled(cpu, g, w1, w2, w3, x)
  # forward: conv1, conv2, linear; backward: three weight gradients, the linear's input gradient and conv2's
  # (a transposed convolution); conv1's input gradient is never needed
  assert len(re.findall(r'tjx_mm[dr]?_f32_\d+x\d+\((K|kn),', exe.source)) == 8   # mmd: windows; mmr: x in place
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = g(*map(jnp.asarray, (w1, w2, w3, x)))
  for a, b in zip(run(exe, w1, w2, w3, x), want): np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-4)

def test_a_relu_gradient_tests_the_relu_so_a_convolution_writes_its_bias_and_relu(cpu):
  """relu_masks: the gradient of relu(conv(x, w) + b) masks with 0 < relu, so the convolution's raw output has no
  reader but the ReLU, and the convolution's kernel writes relu(cv + b) from its tiles (nothing else stores the raw
  convolution); every gradient matches PYTHON."""
  from nn import functional as F
  x, w1, b1, w2 = rand(8, 3, 20, 20), rand(32, 3, 3, 3, seed=1), rand(32, seed=2), rand(8, 32, 3, 3, seed=3)
  def loss(w1, b1, w2, x):
    h = nn.relu(F.conv(x, w1) + b1[None, :, None, None])
    return jnp.sum(jnp.tanh(F.conv(h, w2)))
  g = tinyjx.grad(loss, argnums=(0, 1, 2))
  exe = compiled(cpu, g, w1, b1, w2, x)
  epilogue = r'const float (t\d+) = \(cv \+ t\d+\);\s+b\d+\[\(io \+ jo\)\] = \(\(0\.0f < \1\) \? \1 : 0\.0f\);'
  src = exe.source
  assert re.search(epilogue, src[src.index('void k0_select_n('):src.index('void tjx_kernel_0(')])
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = g(*map(jnp.asarray, (w1, b1, w2, x)))
  for a, b in zip(run(exe, w1, b1, w2, x), want): np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-4)

@pytest.mark.parametrize('pre_activation', [False, True])
def test_a_layers_bias_and_relu_are_the_epilogue_of_its_matmul(cpu, pre_activation):
  """The gradient of a two-layer MLP: each hidden layer's relu(x @ w + b), which the next layer and the backward pass
  both read, is what gets a buffer (schedule._activation), so its matmul writes it from the tiles and the next
  layer's matmul reads it in place (`tjx_mmr`); where the pre-activation z = x @ w1 + b1 has another reader (the
  loss adds sum(z * z)), the matmul stores z, the last node only its epilogue reads, and the readers recompute the
  ReLU. The gradients match PYTHON either way."""
  x, w1, b1, w2, b2 = rand(200, 70), rand(70, 64, seed=1), rand(64, seed=2), rand(64, 48, seed=3), rand(48, seed=4)
  def loss(w1, b1, w2, b2, x):
    z = x @ w1 + b1
    h = nn.relu(z)
    out = jnp.sum(jnp.tanh(nn.relu(h @ w2 + b2)))
    return (out, jnp.sum(z * z)) if pre_activation else (out, out)
  g = tinyjx.grad(lambda *a: loss(*a)[0] + 1e-3 * loss(*a)[1], argnums=(0, 1, 2, 3))
  exe = compiled(cpu, g, w1, b1, w2, b2, x)
  src = exe.source
  assert len(exe.kernels) == 7          # two forward matmuls, their four weight and bias gradients, h's gradient
  first = src[src.index('void k0_'):src.index('void tjx_kernel_0(')]
  relu_store = r'b\d+\[\(io \+ jo\)\] = \(\(0\.0f < (t\d+)\) \? \1 : 0\.0f\);'
  bias_store = r'b\d+\[\(io \+ jo\)\] = \(cv \+ b\d+\[j\]\);'   # z = x @ w1 + b1, which z * z reads too
  assert re.search(bias_store if pre_activation else relu_store, first) and 'tjx_mm' in first
  assert ('tjx_mmr_f32' in src[src.index('void k1_'):src.index('void tjx_kernel_1(')]) != pre_activation
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = g(*map(jnp.asarray, (w1, b1, w2, b2, x)))
  for a, b in zip(run(exe, w1, b1, w2, b2, x), want): np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-4)

def test_a_relus_gradient_mask_is_the_epilogue_of_the_matmul_below_it(cpu):
  """In the backward pass of a three-layer MLP, each hidden ReLU's gradient `where(0 < h, dz @ w.T, 0)` is stored by
  the kernel of that matmul, its mask read at the store's own index (io + jo), so the next gradient matmul reads it
  in place (`tjx_mmr`) and the weight and bias gradients read one buffer, not two; the gradients match PYTHON."""
  x, w1, b1, w2, b2, w3 = (rand(200, 70), rand(70, 64, seed=1), rand(64, seed=2), rand(64, 64, seed=3),
                           rand(64, seed=4), rand(64, 48, seed=5))
  def loss(w1, b1, w2, b2, w3, x):
    return jnp.sum(jnp.tanh(nn.relu(nn.relu(x @ w1 + b1) @ w2 + b2) @ w3))
  g = tinyjx.grad(loss, argnums=(0, 1, 2, 3, 4))
  exe = compiled(cpu, g, w1, b1, w2, b2, w3, x)
  src = exe.source
  masked = r'b\d+\[\(io \+ jo\)\] = \(\(0\.0f < b\d+\[\(io \+ jo\)\]\) \? cv : 0\.0f\);'
  kernels = [src[src.index(f'void k{i}_'):src.index(f'void tjx_kernel_{i}(')] for i in range(len(exe.kernels))]
  stores = [k for k in kernels if re.search(masked, k)]
  assert len(stores) == 2 and any('tjx_mmr_f32' in k for k in stores)     # dz2, then dz1 from dz2 read in place
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = g(*map(jnp.asarray, (w1, b1, w2, b2, w3, x)))
  for a, b in zip(run(exe, w1, b1, w2, b2, w3, x), want):   # (float32 sums of 200 products in two orders: an entry
    b = np.asarray(b)                                       # that cancels differs by up to 2e-5 of the largest)
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-4 * np.abs(b).max())

def test_an_epilogue_kernel_takes_no_other_output(cpu):
  """An Adam step of an MLP whose batch is its width (h1 has w2's shape): the elementwise updates of that shape must
  not join relu(x @ w1 + b1)'s kernel (horizontal fusion), which is a matmul's and writes one output; both hidden
  layers stay epilogues, and the step matches PYTHON."""
  shapes = [(70, 64), (64,), (64, 64), (64,), (64, 10), (10,)]
  ps = [rand(*sh, seed=i) * 0.1 for i, sh in enumerate(shapes)]
  x, y = rand(64, 70, seed=9), np.eye(10, dtype=np.float32)[np.arange(64) % 10]
  def loss(ps, x, y):
    h = x
    for i in range(0, 6, 2):
      h = h @ ps[i] + ps[i + 1]
      if i < 4: h = nn.relu(h)
    return -jnp.mean(jnp.sum(y * nn.log_softmax(h, axis=-1), axis=-1))
  def step(*a):
    ps, m, v = list(a[:6]), list(a[6:12]), list(a[12:18])
    g = tinyjx.grad(loss)(ps, a[18], a[19])
    m = [0.9 * m_ + 0.1 * g_ for m_, g_ in zip(m, g)]
    v = [0.999 * v_ + 0.001 * g_ * g_ for v_, g_ in zip(v, g)]
    return [p - 1e-3 * m_ / (jnp.sqrt(v_) + 1e-8) for p, m_, v_ in zip(ps, m, v)] + m + v
  args = [*ps, *(np.zeros_like(p) for p in ps), *(np.zeros_like(p) for p in ps), x, y]
  exe = compiled(cpu, step, *args)
  assert [m.group(1) for m in re.finditer(r'void (k\d+_\w+)\(', exe.source)][:2] == ['k0_select_n', 'k1_select_n']
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = step(*map(jnp.asarray, args))
  for a, b in zip(run(exe, *args), want): np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-5)

def test_an_adam_update_is_the_epilogue_of_its_weight_gradient(cpu):
  """An Adam step with bias correction (a step counter t, itself an output): each weight gradient is a matmul whose
  kernel writes the new parameter and both moments from its tiles (`_shared_epilogue`; the gradient gets no buffer),
  its tiles in rows (`by_rows`) where the plan packs x whole; the step matches PYTHON."""
  shapes = [(300, 128), (128,), (128, 96), (96,)]
  ps = [rand(*sh, seed=i) * 0.1 for i, sh in enumerate(shapes)]
  x, y = rand(256, 300, seed=9), rand(256, 96, seed=8)
  def loss(ps, x, y): return jnp.mean((nn.relu(x @ ps[0] + ps[1]) @ ps[2] + ps[3] - y) ** 2)
  def step(ps, m, v, t, x, y):
    g, t = tinyjx.grad(loss)(ps, x, y), t + 1
    m = [0.9 * m_ + 0.1 * g_ for m_, g_ in zip(m, g)]
    v = [0.999 * v_ + 0.001 * g_ * g_ for v_, g_ in zip(v, g)]
    return [p - 1e-3 * (m_ / (1 - 0.9 ** t)) / (jnp.sqrt(v_ / (1 - 0.999 ** t)) + 1e-8)
            for p, m_, v_ in zip(ps, m, v)], m, v, t
  m0 = [rand(*sh, seed=20 + i) * 0.01 for i, sh in enumerate(shapes)]
  v0 = [np.abs(rand(*sh, seed=30 + i)) * 0.01 for i, sh in enumerate(shapes)]
  args = (ps, m0, v0, np.float32(3), x, y)
  exe = compiled(cpu, step, *args)
  src = exe.source
  kernels = [src[src.index(f'void k{i}_'):src.index(f'void tjx_kernel_{i}(')] for i in range(len(exe.kernels))]
  fused = [k for k in kernels if 'tjx_mm' in k and 'sqrtf' in k]
  assert len(fused) == 2 and all(len(re.findall(r'b\d+\[\(io \+ jo\)\] =', k)) >= 3 for k in fused)
  assert any('panels + bb *' in k for k in fused)
  assert any('tjx_mmp_f32' in k for k in fused)                   # (by rows: it prefetches the next tile's operands)
  flat = lambda tree: [np.asarray(a) for a in tinyjx.tree_util.tree_leaves(tree)]
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = flat(step(*tinyjx.tree_util.tree_map(jnp.asarray, args)))
  got = run(exe, *flat(args))
  for a, b in zip(got, want): np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)
  for a, b in zip(flat(tinyjx.jit(step)(*args)), got): np.testing.assert_array_equal(a, b)

@pytest.mark.parametrize('other_use', [None, 'x is an output', 'x read again'])
def test_relu_masks_gives_the_same_bits_and_needs_x_used_only_by_the_relu(cpu, other_use):
  """The rewritten mask, 0 < relu(x), is 0 < x for NaN, -0.0, 0.0, infinities and tiny values; it applies only where
  x has no use but the ReLU and its mask (x an output, or read by another op: the mask keeps testing x)."""
  from tinyjx.lower import Lowering, do_simplify
  from tinyjx.uop import Ops, toposort
  a = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-30, -1e-30, 3.0, -2.0, -np.nan], np.float32)
  b, w = np.zeros_like(a), np.arange(1, 11, dtype=np.float32)
  def f(a, b):
    x = a + b
    loss = jnp.sum(nn.relu(x) ** 2 * w) / 2            # its gradient: where(0 < x, relu(x) * w, 0)
    return loss + (jnp.sum(jnp.where(jnp.isfinite(x), x, 0.0)) if other_use == 'x read again' else 0.0)
  g = (lambda a, b: (tinyjx.grad(f)(a, b), a + b)) if other_use == 'x is an output' else tinyjx.grad(f)
  jp = tinyjx.make_jaxpr(g)(a, b)
  roots = do_simplify(Lowering(cpu, list(jp.params), list(jp.outs))).roots
  masks = [n for n in toposort(roots) if n.op is Ops.CMPLT and n.src[1].op is Ops.WHERE]
  assert bool(masks) == (other_use is None)
  got = np.asarray(tinyjx.jit(g)(a, b)[0] if other_use == 'x is an output' else tinyjx.jit(g)(a, b))
  want = np.where(a > 0, a * w, 0) + (np.isfinite(a) if other_use == 'x read again' else 0)
  np.testing.assert_array_equal(got, want.astype(np.float32))
