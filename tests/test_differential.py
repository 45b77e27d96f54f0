"""Differential tests: the same programs on each compiled device (CPU, CL where OpenCL is installed, CUDA where a GPU
is) and on the PYTHON reference device.

Every elementwise op of `python_rules` on every dtype it accepts (with edge values: zeros of both signs,
infinities, NaN, subnormals, integer extremes), every cast between dtypes, reductions, scans, sorts,
views, gather, scatter and dot_general, and random op graphs drawn by hypothesis. Many checks share one
compiled program so the suite calls the C compiler only a few times.
"""
import math
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st, HealthCheck
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import dtypes, devices
from tinyjx.array import buffer_uop
from tinyjx.devices.python import NumpyBuffer, UNARY, BINARY
from tinyjx.uop import UOp, Ops, GroupOp
from conftest import examples

D = dtypes
FLOAT_ONLY = {Ops.EXP, Ops.LOG, Ops.EXPM1, Ops.LOG1P, Ops.SIN, Ops.COS, Ops.TAN, Ops.ASIN, Ops.ACOS, Ops.ATAN,
              Ops.SINH, Ops.COSH, Ops.TANH, Ops.SQRT, Ops.FLOOR, Ops.CEIL, Ops.ROUND, Ops.TRUNC, Ops.ERF, Ops.ATAN2}
TRANSCENDENTAL = FLOAT_ONLY - {Ops.SQRT, Ops.FLOOR, Ops.CEIL, Ops.ROUND, Ops.TRUNC} | {Ops.POW}
BITWISE = {Ops.NOT, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR}
NOT_ON_BOOL = {Ops.NEG, Ops.SUB, Ops.DIV, Ops.REM, Ops.POW, Ops.RECIP, Ops.SIGN, Ops.ABS, Ops.SHL, Ops.SHR}
RTOL = {D.float16: 2e-3, D.bfloat16: 1e-2, D.float32: 3e-6, D.float64: 1e-13, D.complex64: 2e-6, D.complex128: 1e-13}

def edge_values(dt, n=24, seed=0) -> np.ndarray:
  """`n` values of `dt` that start with the edge cases of its kind, then random ones."""
  rng = np.random.default_rng(seed)
  if dt.kind == 'b': return rng.integers(0, 2, n).astype(bool)
  if dt.kind in 'iu':
    ii = np.iinfo(dt.np)
    base = [v for v in (0, 1, -1, 2, -2, 3, 7, -7, ii.min, ii.max, ii.min + 1, ii.max - 1) if ii.min <= v <= ii.max]
    rand = [int(v) for v in rng.integers(max(ii.min, -100), min(ii.max, 100), n)]
    return np.array((base + rand)[:n], dtype=object).astype(dt.np)
  base = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1.5, 2.5, math.inf, -math.inf, math.nan, 1e-3, 3.7, -7.25, 100.0, 1e5,
          65504.0, -3e38, 1e-40]
  v = np.array(base + list(rng.normal(0, 3, n)), dtype=np.float64)[:n]
  with np.errstate(over='ignore'):
    return dtypes.round_bf16(v.astype(np.float32)) if dt is D.bfloat16 else v.astype(dt.np)

def buf(values: np.ndarray, dt) -> UOp:
  return buffer_uop(NumpyBuffer('CPU:0', np.ascontiguousarray(values.astype(dt.np)), dt))

def opencl_missing() -> str:
  try:
    from tinyjx.devices import cl
    cl.cl_devices()
    return ""
  except Exception as e:   # no library, no platform
    return f"no OpenCL: {e}"

def cuda_missing() -> str:
  try:
    from tinyjx.devices import cuda
    return "" if cuda.available() else "no CUDA: no NVIDIA GPU with a driver and NVRTC"
  except Exception as e:
    return f"no CUDA: {e}"

COMPILED_DEVICES = [pytest.param('CPU'),
                    pytest.param('CL', marks=pytest.mark.skipif(bool(opencl_missing()),
                                                                reason=opencl_missing() or "OpenCL available")),
                    pytest.param('CUDA', marks=pytest.mark.skipif(bool(cuda_missing()),
                                                                  reason=cuda_missing() or "CUDA available"))]

@pytest.fixture(params=COMPILED_DEVICES)
def compiled(request, cpu):
  """Each compiled device in turn, with eager graphs compiled at once."""
  with tinyjx.Context(TINYJX_DEVICE=request.param, TINYJX_EAGER_COMPILE_MS=0):
    yield request.param

def run_both(roots: list, device: str) -> tuple[list, list]:
  """Values of `roots` computed by a compiled device (one program) and by the PYTHON device."""
  with tinyjx.Context(TINYJX_DEVICE=device, TINYJX_EAGER_COMPILE_MS=0):
    out = devices.get(device).run_graph(roots)
  ref = devices.get('PYTHON').run_graph(roots)
  return [b.numpy() for b in out], [b.numpy() for b in ref]

def check(names, roots, device, approx=lambda r, name: False):
  got, want = run_both(roots, device)
  failures = []
  for name, r, g, w in zip(names, roots, got, want):
    assert g.shape == w.shape and g.dtype == w.dtype, f"{name}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
    try:
      if approx(r, name):
        scale = float(np.nanmax(np.abs(w[np.isfinite(w)]), initial=1.0)) if approx(r, name) == 'sum' else 0.0
        wide = np.complex128 if g.dtype.kind == 'c' else np.float64
        np.testing.assert_allclose(g.astype(wide), w.astype(wide), rtol=RTOL[r.dtype],
                                   atol=RTOL[r.dtype] * scale + 1e-30)
      else: np.testing.assert_array_equal(g, w)
    except AssertionError as e:
      failures.append(f"{name}: {str(e).strip().splitlines()[-2:]}")
  assert not failures, "\n".join(failures)

def ops_for(dt) -> list:
  out = []
  for op in list(UNARY) + list(BINARY):
    if op in (Ops.CAST, Ops.BITCAST): continue
    if (dt.kind == 'f' and op in BITWISE) or (dt.kind != 'f' and op in FLOAT_ONLY): continue
    if dt.kind == 'b' and op in NOT_ON_BOOL: continue
    out.append(op)
  return out

REAL_DTYPES = [d for d in D.ALL if d.kind != 'c']   # complex: test_complex_ops_and_casts below

def test_every_elementwise_op_and_cast_on_every_dtype(compiled):
  roots, names = [], []
  for dt in REAL_DTYPES:
    a, b = buf(edge_values(dt, seed=1), dt), buf(edge_values(dt, seed=2)[::-1].copy(), dt)
    for op in ops_for(dt):
      out_dt = D.bool_ if op in GroupOp.Comparison else dt
      roots.append(UOp(op, dt, (a,)) if op in UNARY else UOp(op, out_dt, (a, b)))
      names.append(f"{op.name} {dt}")
    for to in REAL_DTYPES:
      if to is not dt:
        roots.append(UOp(Ops.CAST, to, (a,)))
        names.append(f"CAST {dt}->{to}")
    roots.append(UOp(Ops.WHERE, dt, (buf(edge_values(D.bool_, seed=3), D.bool_), a, b)))
    names.append(f"WHERE {dt}")
  for src, to in [(D.float32, D.int32), (D.int32, D.float32), (D.uint16, D.int16), (D.float16, D.uint16),
                  (D.float64, D.uint64), (D.int8, D.uint8)]:
    roots.append(UOp(Ops.BITCAST, to, (buf(edge_values(src, seed=4), src),)))
    names.append(f"BITCAST {src}->{to}")
  check(names, roots, compiled, approx=lambda r, name: r.op in TRANSCENDENTAL and r.dtype.kind == 'f')

def complex_values(dt, seed: int) -> np.ndarray:
  """Finite complex values: zeros of both signs on each part, pure real and imaginary ones, random ones. (Infinite
  parts are left out: IEEE complex products with them are NaN in ways that differ between formulas.)"""
  rng = np.random.default_rng(seed)
  base = [0j, complex(-0.0, 0.0), complex(0.0, -0.0), 1 + 0j, -1j, 2.5 - 0.5j, -3 + 4j, 1e-3 + 1e3j]
  return np.array(base + list(rng.normal(0, 2, 16) + 1j * rng.normal(0, 2, 16)), dt.np)

def test_complex_ops_and_casts(compiled):
  """Every op a complex operand may reach, and casts to and from every dtype, split into float pairs by the
  lowering, against numpy's complex arithmetic on the reference device."""
  roots, names = [], []
  for dt in (D.complex64, D.complex128):
    a, b = buf(complex_values(dt, 1), dt), buf(complex_values(dt, 2)[::-1].copy(), dt)
    for op in (GroupOp.AcceptsComplex - GroupOp.Complex - {Ops.CAST, Ops.WHERE}):
      out_dt = D.bool_ if op in GroupOp.Comparison else dt
      roots.append(UOp(op, dt, (a,)) if op in UNARY else UOp(op, out_dt, (a, b)))
      names.append(f"{op.name} {dt}")
    part = D.real_dtype(dt)
    roots += [UOp(Ops.REAL, part, (a,)), UOp(Ops.IMAG, part, (b,)), UOp(Ops.COMPLEX, dt, (UOp(Ops.IMAG, part, (a,)),
                                                                                            UOp(Ops.REAL, part, (b,))))]
    names += [f"REAL {dt}", f"IMAG {dt}", f"COMPLEX {dt}"]
    roots.append(UOp(Ops.WHERE, dt, (buf(edge_values(D.bool_, seed=3), D.bool_), a, b)))
    names.append(f"WHERE {dt}")
    for other in D.ALL:
      if other is dt: continue
      roots.append(UOp(Ops.CAST, other, (a,)))
      names.append(f"CAST {dt}->{other}")
      if other.kind != 'b':
        roots.append(UOp(Ops.CAST, dt, (buf(edge_values(other, seed=5), other),)))
        names.append(f"CAST {other}->{dt}")
  exact = (Ops.REAL, Ops.IMAG, Ops.COMPLEX, Ops.WHERE, Ops.NEG, Ops.CMPEQ, Ops.CMPNE, Ops.CAST, Ops.ADD, Ops.SUB)
  check(names, roots, compiled, approx=lambda r, name: 'sum' if r.op not in exact else False)

def test_reductions_scans_sorts_views_gather_scatter_dot(compiled):
  rng = np.random.default_rng(0)
  roots, names = [], []
  def add(name, r): roots.append(r); names.append(name)
  for dt in (D.float32, D.float16, D.bfloat16, D.int32, D.int8, D.uint8, D.bool_, D.float64, D.int64):
    v = rng.normal(0, 3, (3, 4, 5))
    v = v > 0 if dt.kind == 'b' else dtypes.round_bf16(v.astype(np.float32)) if dt is D.bfloat16 else v
    x = buf(v, dt)
    for op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN):
      for axes in ((0,), (1,), (2,), (0, 2), (0, 1, 2)): add(f"reduce {op.name} {axes} {dt}", x.reduce(op, axes))
      for ax in (0, 2):
        for rev in (False, True):
          if dt.kind != 'b': add(f"cumulative {op.name} {ax} {rev} {dt}", UOp(Ops.CUMULATIVE, dt, (x,), (op, ax, rev)))
    for ax in (0, 1, 2):
      for desc in (False, True): add(f"argsort {ax} {desc} {dt}", UOp(Ops.ARGSORT, D.int32, (x,), (ax, desc)))
    add(f"permute {dt}", x.permute((2, 0, 1)))
    add(f"reshape {dt}", x.reshape((4, 15)))
    add(f"permute-reshape-shrink-flip {dt}", x.permute((1, 0, 2)).reshape((12, 5)).shrink(((1, 11), (2, 5))).flip((0,)))
    add(f"pad-flip {dt}", x.pad(((1, 2), (0, 0), (3, 1))).flip((2,)))
    add(f"expand {dt}", x.reshape((3, 4, 1, 5)).expand((3, 4, 2, 5)).reshape((6, 4, 5)))
    add(f"pad-reshape-shrink {dt}", x.pad(((0, 1), (1, 0), (0, 0))).reshape((4, 25)).shrink(((1, 3), (3, 20))))
    idx = buf(rng.integers(-2, 5, (2, 6)), D.int32)
    add(f"gather {dt}", UOp(Ops.GATHER, dt, (x, idx)))
    if dt.kind != 'b':
      u = rng.normal(0, 3, (2, 6, 4, 5))
      upd = buf(dtypes.round_bf16(u.astype(np.float32)) if dt is D.bfloat16 else u, dt)
      for mode in ('add', 'set', 'mul', 'min', 'max'):
        add(f"scatter {mode} {dt}", UOp(Ops.SCATTER, dt, (x, idx, upd), mode))
    w = rng.normal(0, 3, (5, 4, 6))
    y = buf(w > 0 if dt.kind == 'b' else dtypes.round_bf16(w.astype(np.float32)) if dt is D.bfloat16 else w, dt)
    for arg in [(((2,), (0,)), ((), ())), (((1, 2), (1, 0)), ((), ())), (((2,), (0,)), ((1,), (1,)))]:
      add(f"dot_general {arg} {dt}", UOp(Ops.DOT_GENERAL, dt, (x, y), arg))
  add("iota int32", UOp(Ops.IOTA, D.int32, (), ((3, 4), 1)))
  add("iota float16", UOp(Ops.IOTA, D.float16, (), ((3, 4), 0)))
  inexact = ('reduce', 'cumulative', 'dot_general')
  check(names, roots, compiled,
        approx=lambda r, name: 'sum' if r.dtype.kind == 'f' and name.startswith(inexact) else False)

def test_documented_edge_semantics_known_answers(compiled):
  """The spec's edge cases, as known answers (so the CPU device and the reference both match them)."""
  i32 = lambda v: jnp.asarray(np.array(v, np.int32))
  f32 = lambda v: jnp.asarray(np.array(v, np.float32))
  imin = -2 ** 31
  got = {
    'div0': (i32([7, -7, 0]) // 1 * 0 + lax_div(i32([7, -7, 0]), i32([0, 0, 0]))).tolist(),
    'min_div': lax_div(i32([imin]), i32([-1])).tolist(),
    'rem0': lax_rem(i32([7, -7]), i32([0, 0])).tolist(),
    'shift': (i32([1, -8, 1]) << i32([40, 1, -1])).tolist(),
    'shr': (i32([-8, 8]) >> i32([40, 40])).tolist(),
    'sat': f32([1e30, -1e30, np.nan, np.inf, -3.9, 3.9]).astype(jnp.int32).tolist(),
    'u8': f32([300.0, -5.0, 255.5]).astype(jnp.uint8).tolist(),
    'round': jnp.round(f32([0.5, 1.5, 2.5, -0.5, -1.5])).tolist(),
    'max_nan': jnp.maximum(f32([np.nan, 1.0]), f32([1.0, np.nan])).tolist(),
    'min_nan': jnp.minimum(f32([np.nan, 1.0]), f32([1.0, np.nan])).tolist(),
    'bf16': f32([1.00390625, 1.01171875]).astype(jnp.bfloat16).astype(jnp.float32).tolist(),
    'f16_sum': jnp.ones(4096, jnp.float16).sum().astype(jnp.float32).item(),
    'gather': tinyjx.Array(UOp(Ops.GATHER, D.int32, (i32([10, 20, 30]).uop, i32([-1, 5, 1]).uop))).tolist(),
    'scatter': jnp.zeros(3, jnp.int32).at[jnp.asarray([0, 0, 2, 7])].add(1, mode='drop').tolist(),
    'argsort_desc': jnp.argsort(jnp.asarray([2, 1, 2, 1]), descending=True).tolist(),
    'argsort_nan': jnp.argsort(f32([1.0, np.nan, 0.0])).tolist(),
  }
  assert got['div0'] == [-1, -1, -1]
  assert got['min_div'] == [imin]
  assert got['rem0'] == [7, -7]
  assert got['shift'] == [0, -16, 0]
  assert got['shr'] == [-1, 0]
  assert got['sat'] == [2 ** 31 - 1, imin, 0, 2 ** 31 - 1, -3, 3]
  assert got['u8'] == [255, 0, 255]
  assert got['round'] == [0.0, 2.0, 2.0, -0.0, -2.0]
  assert all(math.isnan(v) for v in got['max_nan'] + got['min_nan'])
  assert got['bf16'] == [1.0, 1.015625]            # ties round to even
  assert got['f16_sum'] == 4096.0                  # float16 sums accumulate in float32
  assert got['gather'] == [10, 30, 20]
  assert got['scatter'] == [2, 0, 1]              # duplicates accumulate, out of range is dropped
  assert got['argsort_desc'] == [0, 2, 1, 3]
  assert got['argsort_nan'] == [2, 0, 1]

def lax_div(a, b): return tinyjx.Array(UOp(Ops.DIV, a.dtype, (a.uop, b.uop)))
def lax_rem(a, b): return tinyjx.Array(UOp(Ops.REM, a.dtype, (a.uop, b.uop)))

def test_float16_buffers_are_two_bytes_and_round_trip(compiled):
  x = np.array([1.0, 65504.0, 6e-8, -0.0, np.inf], np.float16)
  y = jnp.asarray(x) * jnp.asarray(np.float16(1.0))
  out = np.asarray(y)
  assert out.dtype == np.float16 and out.nbytes == 10
  np.testing.assert_array_equal(out, x)

# --- random op graphs ---
UNARY_OPS = ('exp', 'tanh', 'sin', 'neg', 'abs', 'sqrt_abs', 'square', 'relu', 'cast_roundtrip')
BINARY_OPS = ('add', 'sub', 'mul', 'max', 'div_safe')

@st.composite
def graphs(draw):
  """A random program over 1-3 float32 or float64 inputs: (input arrays, function of jnp arrays). Short rows of
  doubles are where GCC 12 once gave masked vector loads the wrong masks."""
  n_in = draw(st.integers(1, 3))
  shapes = [tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))) for _ in range(n_in)]
  steps = draw(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 1 << 30)), min_size=1, max_size=7))
  seed = draw(st.integers(0, 1 << 30))
  return shapes, steps, seed, draw(st.sampled_from([np.float32, np.float64]))

def _apply(kind: int, r: int, vals: list, rng) -> None:
  """One random step: appends a new array computed from the existing ones."""
  x = vals[r % len(vals)]
  if kind == 0:
    name = UNARY_OPS[r % len(UNARY_OPS)]
    f = {'exp': lambda a: jnp.exp(jnp.clip(a, -5, 5)), 'tanh': jnp.tanh, 'sin': jnp.sin, 'neg': jnp.negative,
         'abs': jnp.abs, 'sqrt_abs': lambda a: jnp.sqrt(jnp.abs(a)), 'square': jnp.square,
         'relu': lambda a: jnp.maximum(a, 0.0), 'cast_roundtrip': lambda a: a.astype(jnp.float16).astype(jnp.float32)}
    vals.append(f[name](x))
  elif kind == 1:
    y = vals[(r >> 3) % len(vals)]
    y = y.reshape((-1, y.shape[-1]))[0] if y.ndim and x.ndim and y.shape[-1] == x.shape[-1] else y.sum()
    name = BINARY_OPS[r % len(BINARY_OPS)]
    f = {'add': jnp.add, 'sub': jnp.subtract, 'mul': jnp.multiply, 'max': jnp.maximum,
         'div_safe': lambda a, b: a / (jnp.abs(b) + 1.0)}
    vals.append(f[name](x, y))
  elif kind == 2 and x.ndim:
    axes = tuple(a for a in range(x.ndim) if (r >> a) & 1) or None
    fn = [jnp.sum, jnp.max, jnp.min, jnp.mean][(r >> 4) % 4]
    vals.append(fn(x, axis=axes, keepdims=bool((r >> 6) & 1)))
  elif kind == 3 and x.ndim > 1:
    vals.append(jnp.transpose(x, tuple(rng.permutation(x.ndim))))
  elif kind == 4:
    vals.append(x.reshape(-1) if x.ndim != 1 else x.reshape((1, x.shape[0], 1)))
  elif kind == 5 and x.ndim:
    pads = [(r % 3, (r >> 2) % 2)] + [(0, 0)] * (x.ndim - 1)
    vals.append(jnp.flip(jnp.pad(x, pads), axis=0)[:max(1, x.shape[0])])
  elif kind == 6 and x.ndim:
    k = x.shape[-1]
    w = jnp.asarray(rng.standard_normal((k, 1 + r % 4)).astype(np.float32))
    vals.append(x @ w)
  elif kind == 7:
    vals.append(jnp.where(x > 0, x, x * 0.5 + vals[0].sum()))
  elif kind == 8 and x.ndim:
    idx = jnp.asarray(rng.integers(-1, x.shape[0] + 1, (3,)).astype(np.int32))
    vals.append(jnp.take(x, idx, axis=0, mode='clip') + jnp.cumsum(x, axis=0)[0])
  else:
    vals.append(x * 2.0)

@pytest.mark.parametrize('device', COMPILED_DEVICES)
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
@example(g=([(2, 4), (1,)], [(5, 0), (1, 228), (0, 1), (1, 0), (5, 212)], 0, np.float32))  # GCC 12 masked load
def test_random_graphs_match_the_reference(device, g):
  shapes, steps, seed, dt = g
  rng = np.random.default_rng(seed)
  inputs = [rng.standard_normal(s).astype(dt) for s in shapes]
  def build():
    vals = [jnp.asarray(v) for v in inputs]
    step_rng = np.random.default_rng(seed + 1)
    for kind, r in steps: _apply(kind, r, vals, step_rng)
    return [v.uop for v in vals[len(inputs):]]
  with tinyjx.Context(TINYJX_DEVICE=device, JAX_ENABLE_X64=dt is np.float64):
    roots = build()
    got, want = run_both(roots, device)
  for g_, w in zip(got, want):
    scale = max(1.0, float(np.nanmax(np.abs(w)))) if w.size and np.isfinite(w).any() else 1.0
    np.testing.assert_allclose(g_, w, rtol=1e-4, atol=1e-4 * scale)

def test_parallel_kernels_match_the_reference(compiled):
  """Sizes past the parallel threshold: parallel loops, chunked full reductions, column reductions, matmul
  tiles and a scatter whose duplicate updates must stay in order."""
  rng = np.random.default_rng(7)
  x = buf(rng.standard_normal((300, 700)), D.float32)
  w = buf(rng.standard_normal((700, 150)), D.float32)
  idx = buf(rng.integers(0, 4, (5000,)), D.int32)
  upd = buf(rng.standard_normal((5000, 700)), D.float32)
  roots = [x.reduce(Ops.ADD, (0,)), x.reduce(Ops.MAX, (1,)), x.reduce(Ops.ADD, (0, 1)),
           UOp(Ops.EXP, D.float32, (x,)).reduce(Ops.MIN, (0, 1)),
           UOp(Ops.DOT_GENERAL, D.float32, (x, w), (((1,), (0,)), ((), ()))),
           UOp(Ops.SCATTER, D.float32, (x.shrink(((0, 4), (0, 700))), idx, upd), 'add'),
           UOp(Ops.CUMULATIVE, D.float32, (x,), (Ops.ADD, 0, False))]
  names = ['column sum', 'row max', 'full sum', 'full min of exp', 'matmul', 'scatter add', 'cumsum']
  with tinyjx.Context(TINYJX_THREADS=2):             # several threads even on a busy machine
    check(names, roots, compiled, approx=lambda r, name: 'sum' if name != 'row max' else False)
