"""tinyjx against JAX's recorded behaviour (issue 15): bool with weak scalars on the promotion lattice, the shape,
dtype and weak type of jit outputs on every output path (Python scalars, 0-d and size-0 arrays, inputs passed
through, constants, repeated and aliasing outputs, pytrees; eager, jit, jit(vmap), pmap; PYTHON and CPU), and the
accuracy of float32 sums on every path (eager interpreted, eager compiled, jit; both devices).

The expected values were produced by JAX 0.10.2 on the CPU and are written here as data: JAX is not imported.
"""
import math
import numpy as np
import pytest

import tinyjx
import tinyjx.numpy as jnp

def _env():
  b = jnp.array([True, False])
  return dict(b=b, f16=jnp.array([1.5, 2.0], jnp.float16), bf16=jnp.array([1.5, 2.0], jnp.bfloat16),
              i8=jnp.array([1, 2], jnp.int8), u8=jnp.array([1, 2], jnp.uint8), i32=jnp.array([1, 2], jnp.int32),
              f32=jnp.array([1.5, -2.0], jnp.float32), wi=jnp.asarray(3), wf=jnp.asarray(2.0))

NAN, INF = math.nan, math.inf

BOOL_PROMOTION = [   # (expression, dtype, weak, values) or (expression, 'TypeError'), from JAX 0.10.2
  ('1 - b', 'int32', True, [0, 1]),
  ('b - 1', 'int32', True, [0, -1]),
  ('b + 1', 'int32', True, [2, 1]),
  ('1 + b', 'int32', True, [2, 1]),
  ('True + b', 'bool', False, [True, True]),
  ('b + True', 'bool', False, [True, True]),
  ('b + b', 'bool', False, [True, False]),
  ('b * b', 'bool', False, [True, False]),
  ('b * 2', 'int32', True, [2, 0]),
  ('b * 2.5', 'float32', True, [2.5, 0.0]),
  ('2.5 * b', 'float32', True, [2.5, 0.0]),
  ('True + f16', 'float16', False, [2.5, 3.0]),
  ('b + f16', 'float16', False, [2.5, 2.0]),
  ('b - f16', 'float16', False, [-0.5, -2.0]),
  ('b - bf16', 'bfloat16', False, [-0.5, -2.0]),
  ('b * bf16', 'bfloat16', False, [1.5, 0.0]),
  ('b + i8', 'int8', False, [2, 2]),
  ('b - i8', 'int8', False, [0, -2]),
  ('b + u8', 'uint8', False, [2, 2]),
  ('b - u8', 'uint8', False, [0, 254]),
  ('b + i32', 'int32', False, [2, 2]),
  ('b - f32', 'float32', False, [-0.5, 2.0]),
  ('b / 2', 'float32', True, [0.5, 0.0]),
  ('b / b', 'float32', False, [1.0, NAN]),
  ('2 / b', 'float32', True, [2.0, INF]),
  ('b // 2', 'int32', True, [0, 0]),
  ('b % 2', 'int32', True, [1, 0]),
  ('b ** 2', 'int32', False, [1, 0]),
  ('b ** 2.0', 'float32', True, [1.0, 0.0]),
  ('2 ** b', 'int32', False, [2, 1]),
  ('2.0 ** b', 'float32', True, [2.0, 1.0]),
  ('b - 1.5', 'float32', True, [-0.5, -1.5]),
  ('1.5 - b', 'float32', True, [0.5, 1.5]),
  ('b + wi', 'int32', True, [4, 3]),
  ('b - wi', 'int32', True, [-2, -3]),
  ('b * wf', 'float32', True, [2.0, 0.0]),
  ('wf - b', 'float32', True, [1.0, 2.0]),
  ('jnp.maximum(b, 2)', 'int32', True, [2, 2]),
  ('jnp.minimum(b, 2.5)', 'float32', True, [1.0, 0.0]),
  ('b < 1', 'bool', True, [False, True]),
  ('b == 1.0', 'bool', True, [True, False]),
  ('b & 1', 'int32', True, [1, 0]),
  ('b | True', 'bool', False, [True, True]),
  ('b ^ 1', 'int32', True, [0, 1]),
  ('b << 1', 'int32', True, [2, 0]),
  ('jnp.square(b)', 'int32', False, [1, 0]),
  ('jnp.where(b, 1, 2.0)', 'float32', True, [1.0, 2.0]),
  ('jnp.where(b, b, 1)', 'int32', True, [1, 1]),
  ('b * np.float32(2)', 'float32', False, [2.0, 0.0]),
  ('b + np.int8(1)', 'int8', False, [2, 1]),
  ('jnp.subtract(True, 1)', 'int32', True, 0),
  ('jnp.subtract(b, 1.0)', 'float32', True, [0.0, -1.0]),
  ('jnp.multiply(True, 2)', 'int32', True, 2),
  ('jnp.add(b, 1)', 'int32', True, [2, 1]),
  ('jnp.fmod(b, 2)', 'int32', True, [1, 0]),
  ('jnp.float_power(b, 2)', 'float32', True, [1.0, 0.0]),
  ('jnp.clip(b, 0, 1)', 'int32', True, [1, 0]),
  ('abs(b)', 'bool', False, [True, False]),
  ('+b', 'bool', False, [True, False]),
  ('~b', 'bool', False, [False, True]),
  ('b.sum()', 'int32', False, 1),
  ('b.mean()', 'float32', False, 0.5),
  ('(b - 1).sum()', 'int32', False, -1),
  ('jnp.arange(2) - b', 'int32', False, [-1, 1]),
  ('b - b', 'TypeError'),
  ('b - True', 'TypeError'),
  ('jnp.subtract(True, True)', 'TypeError'),
  ('-b', 'TypeError'),
  ('jnp.negative(b)', 'TypeError'),
  ('jnp.sign(b)', 'TypeError'),
]

def _check_promoted(row, out):
  expr, dtype, weak, values = row
  got = (str(out.dtype), out.weak)
  assert got == (dtype, weak), f"{expr}: got {out.dtype} weak={out.weak}, JAX {dtype} weak={weak}"
  np.testing.assert_array_equal(np.asarray(out, dtype=np.float64), np.asarray(values, dtype=np.float64), err_msg=expr)

@pytest.mark.usefixtures('semantics_device')
@pytest.mark.parametrize('row', BOOL_PROMOTION, ids=[r[0] for r in BOOL_PROMOTION])
def test_bool_promotion_eager(row):
  env = {**_env(), 'jnp': jnp, 'np': np}
  if row[1] == 'TypeError':
    with pytest.raises(TypeError, match=r"bool"):
      eval(row[0], env)
    return
  _check_promoted(row, jnp.asarray(eval(row[0], env)))

@pytest.mark.usefixtures('semantics_device')
@pytest.mark.parametrize('row', [r for r in BOOL_PROMOTION if r[1] != 'TypeError'], ids=lambda r: r[0])
def test_bool_promotion_under_jit(row):
  names = list(_env())
  f = tinyjx.jit(lambda *xs: eval(row[0], {**dict(zip(names, xs)), 'jnp': jnp, 'np': np}))
  _check_promoted(row, f(*_env().values()))

def test_bool_subtract_error_names_dtypes_and_fix():
  with pytest.raises(TypeError, match=r"subtract.*bool\[2\].*bool\[\].*logical_xor"):
    jnp.array([True, False]) - True

def test_weak_complex_promotes_as_in_jax():
  # JAX's lattice: a Python complex joins bool and int arrays above them (weak complex64, as int + 1.0 is a weak
  # float32) and float arrays at complex64 (strong)
  for x, weak in ((jnp.array([True]), True), (jnp.array([1]), True), (jnp.array([1.0]), False),
                  (jnp.array([1.0], jnp.float16), False), (jnp.array([1j]), False)):
    out = x + 1j
    assert out.dtype is jnp.complex64 and out.weak is weak, x.dtype
  assert (jnp.asarray(1.0) + 1j).weak and jnp.asarray(1j).weak and jnp.asarray(1j).dtype is jnp.complex64

JIT_OUTPUTS = [   # (function, arguments, (shape, dtype, weak) of each output leaf), from jax.jit
  ('lambda x: x', '(4.,)', ((), 'float32', True)),
  ('lambda x: x', '(4,)', ((), 'int32', True)),
  ('lambda x: x', '(True,)', ((), 'bool', False)),
  ('lambda x: x', '(np.float32(4.),)', ((), 'float32', False)),
  ('lambda x: x', '(np.int32(3),)', ((), 'int32', False)),
  ('lambda x: x', '(jnp.asarray(3.),)', ((), 'float32', True)),
  ('lambda x: x', '(jnp.asarray(3., jnp.float32),)', ((), 'float32', False)),
  ('lambda x: x * 2', '(4.,)', ((), 'float32', True)),
  ('lambda x: x + 1.5', '(4,)', ((), 'float32', True)),
  ('lambda x: jnp.mean(x)', '(2.,)', ((), 'float32', False)),
  ('lambda x: x > 0', '(2.,)', ((), 'bool', True)),
  ('lambda x: x', '(np.zeros((0,), np.float32),)', ((0,), 'float32', False)),
  ('lambda x: x', '(np.ones((2, 0, 3), np.float32),)', ((2, 0, 3), 'float32', False)),
  ('lambda x: x + 1', '(np.ones((2, 0, 3), np.float32),)', ((2, 0, 3), 'float32', False)),
  ('lambda x: x.sum()', '(np.zeros((0,), np.float32),)', ((), 'float32', False)),
  ('lambda x: x.sum(1)', '(np.ones((2, 0, 3), np.float32),)', ((2, 3), 'float32', False)),
  ('lambda x: x.sum(0)', '(np.ones((2, 0, 3), np.float32),)', ((0, 3), 'float32', False)),
  ('lambda x: 1.', '(np.ones(3, np.float32),)', ((), 'float32', True)),
  ('lambda x: 1', '(np.ones(3, np.float32),)', ((), 'int32', True)),
  ('lambda x: jnp.zeros(2)', '(np.ones(3, np.float32),)', ((2,), 'float32', False)),
  ('lambda x: jnp.zeros((0,))', '(np.ones(3, np.float32),)', ((0,), 'float32', False)),
  ('lambda x: jnp.full((2,), 3)', '(np.ones(3, np.float32),)', ((2,), 'int32', True)),
  ('lambda x: (x, x)', '(np.ones(3, np.float32),)', (((3,), 'float32', False), ((3,), 'float32', False))),
  ('lambda x: (x * 2, x * 2)', '(np.ones(3, np.float32),)', (((3,), 'float32', False), ((3,), 'float32', False))),
  ('lambda x: (x, x.reshape(3, 1))', '(np.ones(3, np.float32),)',
   (((3,), 'float32', False), ((3, 1), 'float32', False))),
  ('lambda x: (x + 1, (x + 1).reshape(1, 3))', '(np.ones(3, np.float32),)',
   (((3,), 'float32', False), ((1, 3), 'float32', False))),
  ("lambda x, y: {'a': x, 'b': (y, x + y, 2.), 'c': [jnp.zeros((0, 2))]}", '(np.ones(3, np.float32), 3.)',
   {'a': ((3,), 'float32', False),
    'b': (((), 'float32', True), ((3,), 'float32', False), ((), 'float32', True)),
    'c': [((0, 2), 'float32', False)]}),
  ('lambda x: (x, None)', '(np.ones(3, np.float32),)', (((3,), 'float32', False), None)),
  ("lambda x: {'s': x, 'e': jnp.zeros((0,)) + x}", '(1.5,)',
   {'e': ((0,), 'float32', False), 's': ((), 'float32', True)}),
  ('lambda x: x[0]', '(np.ones(3, np.float32),)', ((), 'float32', False)),
  ('lambda x: (x[0], x[1:1], x.sum())', '(np.ones(3, np.float32),)',
   (((), 'float32', False), ((0,), 'float32', False), ((), 'float32', False))),
]
MAPPED_OUTPUTS = [   # the same signature under vmap, jit(vmap) and pmap over 2 devices
  ('lambda x: x', '(np.ones((2, 3), np.float32),)', ((2, 3), 'float32', False)),
  ('lambda x: 1.', '(np.ones((2,), np.float32),)', ((2,), 'float32', True)),
  ('lambda x: jnp.zeros(3)', '(np.ones((2,), np.float32),)', ((2, 3), 'float32', False)),
  ('lambda x: x.sum()', '(np.ones((2, 3), np.float32),)', ((2,), 'float32', False)),
  ('lambda x: x', '(np.zeros((2, 0), np.float32),)', ((2, 0), 'float32', False)),
  ('lambda x: (x, x, x + 1.)', '(np.ones((2,), np.float32),)',
   (((2,), 'float32', False), ((2,), 'float32', False), ((2,), 'float32', False))),
  ("lambda x: {'a': x * 2, 'b': [x, 3]}", '(np.arange(2, dtype=np.float32),)',
   {'a': ((2,), 'float32', False), 'b': [((2,), 'float32', False), ((2,), 'int32', True)]}),
]

def _sig(r):
  """(shape, dtype name, weak) of every leaf, in the containers of JAX's recorded results."""
  if r is None: return None
  if isinstance(r, (tuple, list)): return type(r)(_sig(e) for e in r)
  if isinstance(r, dict): return {k: _sig(v) for k, v in r.items()}
  assert isinstance(r, tinyjx.Array), f"a jit output is a {type(r).__name__}, not an Array"
  return (tuple(r.shape), str(r.dtype), bool(r.weak))

def _leaves(r):
  if r is None: return []
  if isinstance(r, (tuple, list)): return [x for e in r for x in _leaves(e)]
  if isinstance(r, dict): return [x for k in sorted(r) for x in _leaves(r[k])]
  return [r]

PATHS = [('PYTHON', 50.0), ('CPU', 50.0), ('CPU', 0.0)]   # (device, TINYJX_EAGER_COMPILE_MS): 0 compiles eager code

@pytest.fixture(params=PATHS, ids=[f"{d}-eager{'compiled' if ms == 0 else 'interpreted'}" for d, ms in PATHS])
def path(request):
  device, ms = request.param
  if device == 'CPU': request.getfixturevalue('cpu')
  with tinyjx.Context(TINYJX_DEVICE=device, TINYJX_EAGER_COMPILE_MS=ms):
    yield device

@pytest.mark.parametrize('src,args,want', JIT_OUTPUTS, ids=[f"{f} {a}" for f, a, _ in JIT_OUTPUTS])
def test_jit_output_avals(path, src, args, want):
  env = {'jnp': jnp, 'np': np}
  f = eval(src, env)
  g = tinyjx.jit(f)
  first, again = g(*eval(args, env)), g(*eval(args, env))       # a miss, then the cache-hit path
  assert _sig(first) == want and _sig(again) == want
  eager = f(*[jnp.asarray(a) for a in eval(args, env)])
  for got, ref in zip(_leaves(first), _leaves(eager)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    if isinstance(ref, tinyjx.Array): assert (ref.shape, ref.dtype, ref.weak) == (got.shape, got.dtype, got.weak)
  outs = _leaves(first)
  assert len({id(o.uop) for o in outs}) == len(outs)            # repeated outputs are separate, fresh arrays

def test_jit_scalar_passthrough_is_0d(path):
  out = tinyjx.jit(lambda x: x)(4.)
  assert out.shape == () and out.dtype == jnp.float32 and out.weak and out.item() == 4.0

def test_jit_closed_over_0d_and_size0_buffers(path):
  c0, c1 = jnp.ones(()) * 3, jnp.ones((0, 2)) + 1
  c0.block_until_ready(), c1.block_until_ready()
  out = tinyjx.jit(lambda x: (c0, c0 * 2 + x[0], c1, c1 * 2))(jnp.ones(3))
  assert [o.shape for o in out] == [(), (), (0, 2), (0, 2)]
  assert [float(o) for o in out[:2]] == [3.0, 7.0]

@pytest.mark.usefixtures('semantics_device')
@pytest.mark.parametrize('src,args,want', MAPPED_OUTPUTS, ids=[f"{f} {a}" for f, a, _ in MAPPED_OUTPUTS])
@pytest.mark.parametrize('how', ['vmap', 'jit(vmap)', 'vmap(jit)'])
def test_mapped_output_avals(src, args, want, how):
  f = eval(src, {'jnp': jnp, 'np': np})
  g = {'vmap': tinyjx.vmap(f), 'jit(vmap)': tinyjx.jit(tinyjx.vmap(f)), 'vmap(jit)': tinyjx.vmap(tinyjx.jit(f))}[how]
  assert _sig(g(*[jnp.asarray(a) for a in eval(args, {'np': np})])) == want

@pytest.mark.parametrize('src,args,want', MAPPED_OUTPUTS, ids=[f"{f} {a}" for f, a, _ in MAPPED_OUTPUTS])
def test_pmap_output_avals(cpu, src, args, want):
  with tinyjx.Context(TINYJX_CPU_DEVICES=2):
    out = tinyjx.pmap(eval(src, {'jnp': jnp, 'np': np}))(*eval(args, {'np': np}))
    assert _sig(out) == want

# ---------------------------------------------------------------- accuracy of float32 sums
# The old code summed float32 in float32: a column sum of 1e6 rows (numpy, and the compiled kernels) was off by
# 4e-4, a long row in a compiled kernel by 4e-4, and whole sums by up to 2e-7. Now every path keeps the sum in
# double (blocks of float32 partials in the compiled kernels), so results are correctly rounded or nearly so.

def _data(kind, shape, seed=0):
  rng = np.random.default_rng(seed)
  n = math.prod(shape)
  x = rng.standard_normal(n) if kind == 'normal' else 1 + 1e-3 * rng.random(n)
  return x.astype(np.float32).reshape(shape)

SUMS = [((10**6,), None), ((10**7,), None), ((10**6, 4), 0), ((4, 10**6), 1), ((10**5, 100), 0), ((10, 10**5, 10), 1),
        ((1000, 1000), None)]

def _sum_errors(got, x, axis):
  """Error relative to the float64 sum, and relative to sum |x| (the right scale for sums that cancel)."""
  ref, scale = x.astype(np.float64).sum(axis), np.abs(x.astype(np.float64)).sum(axis)
  err = np.abs(np.asarray(got, np.float64) - ref)
  return float(np.max(err / np.abs(ref))), float(np.max(err / scale))

@pytest.mark.parametrize('shape,axis', SUMS, ids=[f"{s}-axis{a}" for s, a in SUMS])
@pytest.mark.parametrize('kind', ['normal', 'ones+1e-3'])
def test_float32_sum_accuracy_on_every_path(path, kind, shape, axis):
  x = _data(kind, shape)
  a = jnp.asarray(x)
  results = {'eager': jnp.sum(a, axis), 'jit': tinyjx.jit(lambda v: jnp.sum(v, axis))(a)}
  for how, got in results.items():
    rel, scaled = _sum_errors(got, x, axis)
    if kind == 'ones+1e-3': assert rel < 1e-7, f"{how} {path}: relative error {rel:.1e}"
    else: assert scaled < 1e-8, f"{how} {path}: error {scaled:.1e} of sum |x| (the sum cancels)"

@pytest.mark.parametrize('shape,axis', [((10**6,), None), ((10**7,), None), ((10**6, 4), 0)])
def test_float32_mean_accuracy_on_every_path(path, shape, axis):
  x = _data('ones+1e-3', shape, seed=1)
  ref = x.astype(np.float64).mean(axis)
  a = jnp.asarray(x)
  for how, got in {'eager': jnp.mean(a, axis), 'jit': tinyjx.jit(lambda v: jnp.mean(v, axis))(a)}.items():
    rel = float(np.max(np.abs(np.asarray(got, np.float64) - ref) / ref))
    assert rel < 2e-7, f"{how} {path}: relative error {rel:.1e}"

def test_compiled_sums_keep_float32_inner_loops(cpu):
  """Accuracy does not cost vector width: the innermost loop of a long sum still adds float32 (a block partial)."""
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    src = tinyjx.jit(lambda v: v.sum(-1)).lower(jnp.ones((8, 5000))).compile().executable.source
  assert "float acc" in src and "double acc" in src and "#pragma omp simd reduction(+:" in src
