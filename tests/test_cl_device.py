"""The CL device (OpenCL through ctypes): device lookup, results against the PYTHON reference on programs that
exercise every statement kind, the program-binary disk cache across processes, build errors, a missing OpenCL,
movement between devices, and pmap over two OpenCL devices. Skipped where no OpenCL platform is installed
(`.ci/run` installs PoCL, which runs OpenCL on the CPU)."""
import os, subprocess, sys, textwrap
import numpy as np
import pytest
import tinyjx
import device_checks  # tests/ is on the path under pytest
import tinyjx.numpy as jnp
from tinyjx import devices, lax, nn
from tinyjx.devices import cl

def opencl_missing() -> str:
  try:
    cl.cl_devices()
    return ""
  except (cl.NoOpenCLError, cl.CLError) as e:
    return str(e)

pytestmark = pytest.mark.skipif(bool(opencl_missing()), reason=opencl_missing() or "OpenCL available")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng(0)

def rand(*shape, dtype=np.float32): return rng.standard_normal(shape).astype(dtype)

PROGRAMS = {
  'elementwise': (lambda x, y: jnp.tanh(x * y + 1) - jnp.exp(-x * x), (rand(33, 7), rand(33, 7))),
  'reduce_rows': (lambda x: jnp.max(x, axis=1) + jnp.sum(x, axis=1), (rand(17, 9),)),
  'reduce_all': (lambda x: jnp.sum(x * x), (rand(1000),)),
  'softmax': (lambda x: nn.softmax(x, axis=-1), (rand(8, 33),)),
  'matmul_grad': (tinyjx.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w))), (rand(16, 4), rand(8, 16))),
  'movement': (lambda x: jnp.pad(x.T[::-1], ((1, 2), (0, 1)))[1:, ::2].reshape(-1), (rand(5, 6),)),
  'gather_scatter': (lambda x, i: x[i].sum(0) + x.at[i].add(1.0)[0], (rand(6, 3), np.array([0, 5, 0, 2]))),
  'integers': (lambda a, b: (a // b, a % b, a << 3, jnp.maximum(a, b), a.astype(jnp.float32)),
               (np.array([7, -7, 5, -1], np.int32), np.array([2, 2, -3, 0], np.int32))),
  'float16': (lambda x: (x.astype(jnp.float16) * 3).astype(jnp.float32), (rand(10),)),
  'bool_where': (lambda x: jnp.where(x > 0, x, 0.5 * x) + (x > 1).sum(), (rand(12),)),
  'sort': (lambda x: (jnp.sort(x), jnp.argsort(-x)), (np.array([3., np.nan, -1., 2., 2., 0.], np.float32),)),
  'scan': (lambda xs: lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(3), xs), (rand(5, 3),)),
  'cumsum': (lambda x: jnp.cumsum(x, axis=0), (rand(6, 4),)),
  'float64': (lambda x: jnp.sin(x) * 2, (np.linspace(0, 3, 7),)),
}

@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_jit_on_cl_matches_the_reference(name):
  f, args = PROGRAMS[name]
  with tinyjx.Context(JAX_ENABLE_X64=name == 'float64'):
    with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
      want = tinyjx.tree_util.tree_leaves(f(*map(jnp.asarray, args)))
    with tinyjx.Context(TINYJX_DEVICE='CL'):
      got = tinyjx.tree_util.tree_leaves(tinyjx.jit(f)(*map(jnp.asarray, args)))
  for g, w in zip(got, want):
    assert g.dtype == w.dtype
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6, err_msg=name)

def test_devices_by_kind_and_results_stay_on_the_device():
  device_checks.results_stay_on_the_device('cl', 'ClDevice')

def test_eager_code_runs_on_cl():
  with tinyjx.Context(TINYJX_DEVICE='CL', TINYJX_EAGER_COMPILE_MS=0):
    x = jnp.asarray(rand(4, 5))
    out = (jnp.exp(x) / jnp.exp(x).sum(axis=1, keepdims=True)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(out), np.ones(4), rtol=1e-5)

def test_a_second_process_loads_the_program_binary(tmp_path):
  patch = ("from tinyjx.devices import cl; original = cl.CLDevice._build_program; "
           "cl.CLDevice._build_program = lambda self, p, src: (builds.append(src), original(self, p, src))[1]")
  device_checks.second_process_reuses_the_binary(tmp_path, 'CL', patch, ('.clbin', '.cl'))

def test_a_kernel_that_fails_to_build_shows_the_log_and_the_source(tmp_path):
  with tinyjx.Context(TINYJX_CACHE_DIR=str(tmp_path)):
    with pytest.raises(cl.CLBuildError) as e:
      devices.get('CL').compile("__kernel void broken(__global float* b) { b[0] = undefined_name; }")
  msg = str(e.value)
  assert 'undefined_name' in msg and '.cl' in msg
  path = msg.split('kernels (')[1].split(')')[0]
  assert os.path.exists(path) and 'broken' in open(path).read()

def test_without_opencl_the_error_says_what_to_install(monkeypatch):
  monkeypatch.setattr(cl, '_lib', [])
  def no_library(name, *a, **k): raise OSError(f"{name}: cannot open shared object file")
  monkeypatch.setattr(cl.ctypes, 'CDLL', no_library)
  with pytest.raises(cl.NoOpenCLError, match="pocl-opencl-icd.*TINYJX_DEVICE=CPU"):
    cl.CLDevice('CL:5')

def test_pmap_over_two_opencl_devices():
  script = textwrap.dedent("""
    import json, numpy as np, tinyjx, tinyjx.numpy as jnp
    from tinyjx import lax
    f = tinyjx.pmap(lambda v: (lax.psum(v, 'i'), lax.all_gather(v * 2, 'i'), lax.axis_index('i')),
                    axis_name='i', backend='cl')
    s, g, i = f(jnp.arange(6.0).reshape(2, 3))
    again = f(g[:, 0])[0]     # a pmap result fed to the next pmap, still split over the devices
    print(json.dumps([len(tinyjx.devices('cl')), np.asarray(s).tolist(), np.asarray(g).tolist(),
                      np.asarray(i).tolist(), np.asarray(again).tolist()]))
  """)
  env = dict(os.environ, POCL_DEVICES='pthread pthread', PYTHONPATH=ROOT)
  r = subprocess.run([sys.executable, '-c', script], env=env, capture_output=True, text=True, timeout=300)
  if 'no OpenCL' in r.stderr or r.returncode and 'POCL' in r.stderr: pytest.skip("PoCL cannot expose two devices")
  assert r.returncode == 0, r.stderr
  import json
  n, s, g, i, again = json.loads(r.stdout.splitlines()[-1])
  x = np.arange(6.0).reshape(2, 3)
  assert n == 2 and s == [x.sum(0).tolist()] * 2 and i == [0, 1]
  assert g == [(2 * x).tolist()] * 2 and again == [(2 * 2 * x[0]).tolist()] * 2   # g[:, 0] is 2x[0] twice

# --- the GPU kernel shape: work groups, reductions in local memory, tiled matmul (lower/optimize_gpu.py) ---
@pytest.mark.parametrize('m,n,k', device_checks.MATMUL_SIZES)
def test_tiled_matmul_at_every_edge(m, n, k):
  device_checks.matmul_matches_at_the_edges('CL', m, n, k)

@pytest.mark.parametrize('m,n,k', [(1, 257, 33), (257, 7, 255), (33, 31, 257)])
def test_tiled_matmul_in_float64(m, n, k):
  if not devices.get('CL').has_float64: pytest.skip("the OpenCL device has no cl_khr_fp64")
  device_checks.matmul_matches_at_the_edges('CL', m, n, k, np.float64)

def test_transposed_and_batched_matmuls():
  device_checks.transposed_and_batched_matmuls('CL')

def test_long_reductions_shared_by_a_work_group():
  device_checks.long_reductions_match('CL')

def test_a_million_float32s_sum_like_float64():
  device_checks.a_million_float32s_sum_like_float64('CL')

def test_split_contractions_match():
  device_checks.split_contractions_match('CL')

def test_the_heuristics_chose_the_gpu_shapes():
  device_checks.the_heuristics_chose_the_gpu_shapes(devices.get('CL'))

def test_the_opencl_source_shares_rows_and_tiles_through_local_memory():
  from tinyjx.lower import lower
  jaxpr = tinyjx.make_jaxpr(lambda x, w: (nn.softmax(x, axis=-1), x @ w))(rand(9, 500), rand(500, 70))
  src = lower(devices.get('CL'), jaxpr.params, jaxpr.outs).source
  assert '__local float tjx_red_float[256];' in src and '__local float tjx_xs[' in src
  assert 'reqd_work_group_size(256, 1, 1)' in src and src.count('barrier(CLK_LOCAL_MEM_FENCE);') >= 8
  assert 'get_group_id(0)' in src and 'get_local_id(0)' in src

def test_a_convolution_runs_as_a_tiled_matmul():
  x, w = rand(2, 8, 12, 12), rand(16, 8, 3, 3)
  conv = lambda x, w: (nn.relu(tinyjx.lax.conv(x, w, (1, 1), 'SAME')), tinyjx.grad(
    lambda w: jnp.sum(tinyjx.lax.conv(x, w, (2, 2), 'VALID') ** 2))(w))
  got, want = device_checks.run_on('CL', conv, x, w)
  device_checks.assert_close(got, want, 2e-5, scale=50)
