"""The CUDA device (NVRTC and the driver through ctypes).

Without a GPU (CI): every program of `PROGRAMS` (each dtype's elementwise ops, reductions, matmul, movement,
gather/scatter, cumsum, sort, control flow, random bits, a jitted MLP training step, a convolution and its grad)
is lowered for CUDA and compiled by NVRTC to PTX; a source NVRTC rejects gives CUDABuildError with its log; a
missing driver or NVRTC gives an error that says what to install. Skipped where NVRTC is not installed (`.ci/run`
installs the `nvidia-cuda-nvrtc-cu12` wheel). The same programs also run on an emulated GPU: the CUDA device itself,
its ctypes calls included, on a fake `libcuda` (`FAKE_DRIVER`: host memory, the blocks of a launch run in turn, the
threads of a block as host threads meeting at a barrier for `__syncthreads()`)
with the generated CUDA source compiled by g++ against a small header standing in for CUDA's built-ins, so what the
renderer writes and how the device launches it are checked against the reference here too, not only that it compiles.

With a GPU (`cuda.available()`): the same programs run on CUDA and are compared with the PYTHON reference, as
tests/test_cl_device.py does for OpenCL, with the device lookup, results staying on the device, eager code, the
cubin disk cache across processes and build errors.
"""
import ctypes, hashlib, os, re, shutil, subprocess, sys, textwrap
import numpy as np
import pytest
import tinyjx
import device_checks  # tests/ is on the path under pytest
import tinyjx.numpy as jnp
from tinyjx import devices, lax, nn, random
from tinyjx.devices import cuda
from nn import functional as F

NO_NVRTC = "" if cuda.compile_only_available() else "NVRTC is not installed (pip install nvidia-cuda-nvrtc-cu12)"
needs_nvrtc = pytest.mark.skipif(bool(NO_NVRTC), reason=NO_NVRTC or "NVRTC available")
needs_gpu = pytest.mark.skipif(not cuda.available(), reason="no NVIDIA GPU with a driver and NVRTC here")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng(0)

def rand(*shape, dtype=np.float32): return rng.standard_normal(shape).astype(dtype)
def ints(*shape, dtype=np.int32, lo=-9, hi=10):
  return rng.integers(max(lo, np.iinfo(dtype).min), hi, shape).astype(dtype)

def float_ops(x, y):
  return (x * y + 1 - jnp.abs(x), jnp.maximum(x, y), x / (y * y + 1), jnp.sqrt(jnp.abs(x)), jnp.exp(-x * x),
          jnp.floor(x), x < y, x.astype(jnp.int32))

def int_ops(x, y):
  return (x + y, x * y - x, x // y, x % y, jnp.minimum(x, y), x ^ y, x >> 1, x << 2, x == y, -x, abs(x),
          x.astype(jnp.float32))

def mlp_step(params, x, labels):
  """One SGD step of a two-layer MLP on softmax cross-entropy: the training loop's jitted body."""
  def loss(p):
    h = nn.relu(x @ p['w1'] + p['b1'])
    return F.cross_entropy(h @ p['w2'] + p['b2'], labels)
  value, grads = tinyjx.value_and_grad(loss)(params)
  return value, tinyjx.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

def conv_and_grad(x, w):
  loss = lambda w: jnp.sum(F.max_pool2d(nn.relu(F.conv(x, w, padding=1)), 2) ** 2)
  return loss(w), tinyjx.grad(loss)(w)

def loops(x):
  total = lax.fori_loop(0, 4, lambda i, c: c + x * i, jnp.zeros_like(x))
  halve = lax.while_loop(lambda v: jnp.max(v) > 1.0, lambda v: v * 0.5, jnp.abs(x) + 3)
  return total, halve, lax.cond(x.sum() > 0, lambda v: v + 1, lambda v: v - 1, x)

def random_bits(key):
  a, b = random.split(key)
  return random.bits(a, (7,)), random.uniform(b, (3, 5)), random.normal(key, (6,))

MLP_PARAMS = {'w1': rand(12, 16) * 0.3, 'b1': np.zeros(16, np.float32), 'w2': rand(16, 4) * 0.3,
              'b2': np.zeros(4, np.float32)}

# name: (function, arguments, 64-bit types on, relative tolerance on the GPU)
PROGRAMS = {
  'elementwise': (lambda x, y: jnp.tanh(x * y + 1) - jnp.exp(-x * x), (rand(33, 7), rand(33, 7)), False, 2e-5),
  'float32': (float_ops, (rand(40), rand(40)), False, 2e-5),
  'float16': (float_ops, (rand(40, dtype=np.float16), rand(40, dtype=np.float16)), False, 2e-3),
  'bfloat16': (lambda x, y: float_ops(x.astype(jnp.bfloat16), y.astype(jnp.bfloat16)), (rand(40), rand(40)), False,
               1e-2),
  'float64': (lambda x, y: float_ops(x, y) + (jnp.sin(x) * 2,), (rand(40, dtype=np.float64),) * 2, True, 1e-12),
  'int8': (int_ops, (ints(30, dtype=np.int8), ints(30, dtype=np.int8)), False, 0),
  'int16': (int_ops, (ints(30, dtype=np.int16), ints(30, dtype=np.int16)), False, 0),
  'int32': (int_ops, (ints(30), ints(30)), False, 0),
  'int64': (int_ops, (ints(30, dtype=np.int64), ints(30, dtype=np.int64)), True, 0),
  'uint8': (int_ops, (ints(30, dtype=np.uint8, hi=255), ints(30, dtype=np.uint8, hi=9)), False, 0),
  'uint32': (int_ops, (ints(30, dtype=np.uint32, hi=1000), ints(30, dtype=np.uint32, hi=9)), False, 0),
  'uint64': (int_ops, (ints(30, dtype=np.uint64, hi=1000), ints(30, dtype=np.uint64, hi=9)), True, 0),
  'bool': (lambda a, b: (a & b | ~a, a ^ b, jnp.where(a, 1.5, -2.0), a.sum(), jnp.any(a & b)),
           (rng.random(20) > 0.5, rng.random(20) > 0.3), False, 0),
  'bitcast': (lambda x: (lax.bitcast_convert_type(x, jnp.int32) >> 3, lax.bitcast_convert_type(x.astype(jnp.float16),
                                                                                                jnp.int16)),
              (rand(9),), False, 0),
  'reduce_rows': (lambda x: (jnp.max(x, axis=1) + jnp.sum(x, axis=1), jnp.argmax(x, axis=0), jnp.prod(x[:3], axis=0)),
                  (rand(17, 9),), False, 2e-5),
  'reduce_all': (lambda x: (jnp.sum(x * x), jnp.min(x), jnp.mean(x)), (rand(1000),), False, 2e-5),
  'softmax': (lambda x: nn.softmax(x, axis=-1), (rand(8, 33),), False, 2e-5),
  'matmul': (lambda x, w: (x @ w, jnp.einsum('bij,bjk->bik', x[None], w[None] * 2)), (rand(20, 16), rand(16, 12)),
             False, 2e-5),
  'matmul_grad': (tinyjx.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w))), (rand(16, 4), rand(8, 16)), False, 2e-5),
  'movement': (lambda x: jnp.pad(x.T[::-1], ((1, 2), (0, 1)))[1:, ::2].reshape(-1), (rand(5, 6),), False, 0),
  'concat_broadcast': (lambda x, y: jnp.concatenate([x, y[None] + x], 0) * y, (rand(3, 4), rand(4)), False, 0),
  'gather_scatter': (lambda x, i: x[i].sum(0) + x.at[i].add(1.0)[0], (rand(6, 3), np.array([0, 5, 0, 2])), False,
                     2e-5),
  'cumsum': (lambda x: (jnp.cumsum(x, axis=0), lax.cumsum(x, axis=1, reverse=True)), (rand(6, 4),), False, 2e-5),
  'sort': (lambda x: (jnp.sort(x), jnp.argsort(-x)), (np.array([3., np.nan, -1., 2., 2., 0.], np.float32),), False,
           0),
  'scan': (lambda xs: lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(3), xs), (rand(5, 3),), False, 2e-5),
  'loops': (loops, (rand(4),), False, 2e-5),
  'random': (random_bits, (np.asarray(random.PRNGKey(3)),), False, 2e-5),
  'mlp_step': (mlp_step, (MLP_PARAMS, rand(10, 12), ints(10, lo=0, hi=4)), False, 1e-4),
  'conv': (conv_and_grad, (rand(2, 3, 6, 6), rand(4, 3, 3, 3)), False, 1e-4),
  # the GPU kernel shape: a tiled matmul (transposed, batched), rows shared by work groups, a two-stage full sum
  'matmul_tiles': (lambda x, w, b: (x @ w, x.T @ x, jnp.einsum('bij,bjk->bik', b, b.transpose(0, 2, 1))),
                   (rand(70, 33), rand(33, 65), rand(3, 20, 40)), False, 1e-4),
  'long_rows': (lambda x: (nn.softmax(x, axis=-1), x.sum(1), x.max(1), x.sum(0)), (rand(3, 700),), False, 1e-4),
  'full_sum': (lambda x: (jnp.sum(x), jnp.min(x), x.reshape(32, 4, 1024).sum((0, 2))), (rand(1 << 17),), False,
               1e-4),
}

def as_arrays(args): return tinyjx.tree_util.tree_map(jnp.asarray, args)

# --- without a GPU: NVRTC compiles every kernel ---
@needs_nvrtc
@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_every_kernel_compiles_to_ptx(name, tmp_path):
  f, args, x64, _ = PROGRAMS[name]
  with tinyjx.Context(JAX_ENABLE_X64=x64, TINYJX_CACHE_DIR=str(tmp_path)):
    report = cuda.compile_check(tinyjx.jit(f), *as_arrays(args))
  assert report.kernels and report.arch.startswith('compute_'), name
  ptx = b"".join(report.binaries)
  assert all(f".entry {k}(".encode() in ptx for k in report.kernels), name   # every kernel made it, unmangled
  assert "#include" not in "".join(report.sources)                             # NVRTC has no libc headers
  assert list(tmp_path.glob('*.ptx')) and list(tmp_path.glob('*.cu'))

@needs_nvrtc
def test_control_flow_sub_programs_are_compiled_too():
  report = cuda.compile_check(loops, jnp.ones(4))
  assert len(report.binaries) >= 4      # the program, the fori and while bodies and conditions, the cond branches

@needs_nvrtc
def test_a_cubin_for_hopper(tmp_path):
  """ptxas runs too for an sm_ architecture: what an H100/H200 loads."""
  nv = cuda.nvrtc()
  if 90 not in nv.archs: pytest.skip(f"{nv!r} does not know sm_90")
  for name in ('mlp_step', 'matmul_tiles', 'long_rows', 'full_sum'):   # with work groups, shared memory, barriers
    f, args, _, _ = PROGRAMS[name]
    with tinyjx.Context(TINYJX_CACHE_DIR=str(tmp_path)):
      report = cuda.compile_check(tinyjx.jit(f), *as_arrays(args), arch='sm_90')
    assert all(b[:4] == b'\x7fELF' for b in report.binaries), name
  assert list(tmp_path.glob('*.cubin'))

@needs_nvrtc
def test_the_source_is_the_cuda_dialect():
  src = cuda.compile_check(lambda x, y: jnp.where(x > 0, x, y).sum(1), rand(70, 5), rand(70, 5)).sources[0]
  assert re.search(r'extern "C" __global__ __launch_bounds__\(\d+\) void k0_', src) and '__restrict__' in src
  assert 'blockIdx.x * (int64_t)blockDim.x + threadIdx.x' in src and 'gridDim.x' in src   # a grid-stride loop
  assert '#pragma omp' not in src and 'malloc' not in src

@needs_nvrtc
def test_a_source_nvrtc_rejects_shows_the_log_the_kernel_and_the_path(tmp_path):
  good = 'extern "C" __global__ void fine(float* b) { b[0] = 1.0f; }\n'
  bad = good + 'extern "C" __global__ void broken(float* b) {\n  b[0] = undefined_name;\n}\n'
  with tinyjx.Context(TINYJX_CACHE_DIR=str(tmp_path)):
    assert b'.entry fine' in cuda.CUDACompileOnly().compile(good)
    with pytest.raises(cuda.CUDABuildError) as e:
      cuda.CUDACompileOnly().compile(bad)
  msg = str(e.value)
  assert 'undefined_name' in msg and 'in broken' in msg and 'NVRTC' in msg
  path = msg.split('compute_')[1].split('(')[1].split(')')[0]
  assert path.endswith('.cu') and 'broken' in open(path).read()

@needs_nvrtc
def test_ptx_comes_from_the_disk_cache_the_second_time(tmp_path, monkeypatch):
  calls = []
  original = cuda.NVRTC.compile
  monkeypatch.setattr(cuda.NVRTC, 'compile', lambda self, *a: (calls.append(a[1]), original(self, *a))[1])
  src = 'extern "C" __global__ void twice(float* b) { b[threadIdx.x] *= 2.0f; }\n'
  nv = cuda.nvrtc()
  with tinyjx.Context(TINYJX_CACHE_DIR=str(tmp_path)):
    first, again = cuda.build(src, nv.default_arch(), nv), cuda.build(src, nv.default_arch(), nv)
  assert first == again and len(calls) == 1

def test_docstring_examples_run():
  import doctest
  assert doctest.testmod(cuda, optionflags=doctest.ELLIPSIS).failed == 0

def test_launch_shapes_cover_the_grid():
  for size in [(1,), (7,), (1000,), (3, 1000), (5, 7, 9), (2**33,), (1, 70000)]:
    grid, block = cuda.launch_shape(size)
    assert np.prod(block) <= cuda.BLOCK and block[2] <= 64
    assert all(g <= cap for g, cap in zip(grid, cuda.MAX_GRID))
    # a thread per work item, unless the grid is capped at CUDA's limit (the kernels' grid loops stride past it)
    padded = (*size, 1, 1)[:3]
    assert all(g * b >= n or g == cap for g, b, n, cap in zip(grid, block, padded, cuda.MAX_GRID))
  assert cuda.launch_shape((1000,), max_threads=128)[1] == (128, 1, 1)

def test_without_a_driver_the_error_says_what_to_install(monkeypatch):
  monkeypatch.setattr(cuda, '_driver', [])
  real = cuda.ctypes.CDLL
  def no_driver(name, *a, **k):
    if 'libcuda' in str(name): raise OSError(f"{name}: cannot open shared object file")
    return real(name, *a, **k)
  monkeypatch.setattr(cuda.ctypes, 'CDLL', no_driver)
  with pytest.raises(cuda.NoCUDAError, match="libcuda.so.1.*NVIDIA driver.*TINYJX_DEVICE=CPU.*compile_check"):
    cuda.CUDADevice('CUDA:3')
  assert not cuda.available()
  with pytest.raises(cuda.NoCUDAError, match="libcuda.so.1"):
    tinyjx.devices('cuda')

def test_without_nvrtc_the_error_says_what_to_install(monkeypatch):
  monkeypatch.setattr(cuda, '_nvrtc', {})
  monkeypatch.setattr(cuda, 'nvrtc_paths', lambda: ['/nowhere/libnvrtc.so.12'])
  assert not cuda.compile_only_available()
  with pytest.raises(cuda.NoCUDAError, match="NVRTC.*pip install nvidia-cuda-nvrtc-cu12.*TINYJX_DEVICE=CPU"):
    cuda.compile_check(lambda x: x + 1, jnp.ones(2))

@pytest.mark.skipif(cuda.available(), reason="a GPU is here")
def test_tinyjx_device_cuda_without_a_gpu_names_what_is_missing():
  devices._instances.pop('CUDA:0', None)
  with tinyjx.Context(TINYJX_DEVICE='CUDA', TINYJX_EAGER_COMPILE_MS=0):
    with pytest.raises(cuda.NoCUDAError, match="NVIDIA driver|no GPU|NVRTC"):
      np.asarray(jnp.arange(3.0) * 2)

# --- without a GPU: the CUDA device on an emulated GPU (a fake driver; the kernels run on the host) ---
MATH = ("exp log expm1 log1p sin cos tan asin acos atan sinh cosh tanh sqrt floor ceil rint trunc fabs fmod pow "
        "atan2 erf nearbyint frexp").split()
# Prepended to the kernels' source: CUDA's built-ins. Thread indices are per host thread; `__shared__` memory is one
# static array per kernel (blocks run one after another); `__syncthreads()` waits at the launcher's barrier.
EMULATION_HEADER = "\n".join([
  "struct tjx_dim3 { unsigned x, y, z; };",
  "extern thread_local tjx_dim3 blockIdx, threadIdx;",
  "extern tjx_dim3 blockDim, gridDim;",
  "void tjx_syncthreads();",
  "#define __global__",
  "#define __launch_bounds__(threads)",
  "#define __shared__ static",
  "#define __syncthreads() tjx_syncthreads()",
  "template <class B, class A> static inline B tjx_pun(A a) { B b; __builtin_memcpy(&b, &a, sizeof b); return b; }",
  "#define __int_as_float(b) tjx_pun<float>((int)(b))",
  "#define __uint_as_float(b) tjx_pun<float>((unsigned)(b))",
  "#define __float_as_uint(f) tjx_pun<unsigned>((float)(f))",
  "#define signbit __builtin_signbit",
  *[f"#define {m}{f} __builtin_{m}{f}" for m in MATH for f in ('', 'f')], ""])
MAX_ARGS = 24
# A translation unit of its own (the kernels' prelude defines int64_t its own way, pthread.h another): a launch runs
# each thread of a block as a host thread, the block's threads meeting at one barrier for `__syncthreads()`; each
# thread runs its part of every block in turn, and the threads meet again between blocks, so one block's shared
# memory is done with before the next block uses it.
EMULATION_LAUNCHER = f"""
#include <pthread.h>
#include <vector>
struct tjx_dim3 {{ unsigned x, y, z; }};
thread_local tjx_dim3 blockIdx, threadIdx;
tjx_dim3 blockDim, gridDim;
static pthread_barrier_t block_barrier;
void tjx_syncthreads() {{ pthread_barrier_wait(&block_barrier); }}
typedef void (*tjx_kernel)({', '.join(['void*'] * MAX_ARGS)});
struct tjx_thread {{ void* kernel; void** a; unsigned t; }};
static void* run_thread(void* p) {{
  const tjx_thread* me = (const tjx_thread*)p;
  threadIdx = {{me->t % blockDim.x, me->t / blockDim.x % blockDim.y, me->t / (blockDim.x * blockDim.y)}};
  void** a = me->a;
  for (unsigned bz = 0; bz < gridDim.z; bz++) for (unsigned by = 0; by < gridDim.y; by++)
  for (unsigned bx = 0; bx < gridDim.x; bx++) {{
    blockIdx = {{bx, by, bz}};
    ((tjx_kernel)me->kernel)({', '.join(f'a[{i}]' for i in range(MAX_ARGS))});
    pthread_barrier_wait(&block_barrier);
  }}
  return 0;
}}
extern "C" void tjx_emulate(void* k, void** a, const unsigned* g, const unsigned* b) {{
  gridDim = {{g[0], g[1], g[2]}}; blockDim = {{b[0], b[1], b[2]}};
  const unsigned n = b[0] * b[1] * b[2];
  pthread_barrier_init(&block_barrier, 0, n);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 18);
  std::vector<pthread_t> threads(n);
  std::vector<tjx_thread> work(n);
  for (unsigned t = 0; t < n; t++) {{
    work[t] = {{k, a, t}};
    pthread_create(&threads[t], &attr, run_thread, &work[t]);
  }}
  for (unsigned t = 0; t < n; t++) pthread_join(threads[t], 0);
  pthread_attr_destroy(&attr);
  pthread_barrier_destroy(&block_barrier);
}}
"""

# A stand-in for libcuda.so.1: memory is host memory, a "module" is the path of a shared library of the kernels
# (see `emulated_module`), and a launch runs the grid's blocks in turn, each block's threads as host threads, through
# the module's `tjx_emulate`.
FAKE_DRIVER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef unsigned long long CUdeviceptr;
typedef void (*emulate_fn)(void*, void**, const unsigned*, const unsigned*);
int cuInit(unsigned flags) { return 0; }
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
int cuDeviceGetCount(int* n) { *n = 64; return 0; }
int cuDeviceGet(int* d, int i) { *d = i; return 0; }
int cuDeviceGetName(char* s, int n, int d) { snprintf(s, n, "emulated GPU %d", d); return 0; }
int cuDeviceGetAttribute(int* v, int a, int d) {   /* compute 9.0, 1024 threads, 48 KiB shared memory, warps of 32 */
  *v = a == 75 ? 9 : a == 76 ? 0 : a == 1 ? 1024 : a == 8 ? 49152 : a == 10 ? 32 : 0;
  return 0;
}
int cuDevicePrimaryCtxRetain(void** c, int d) { *c = (void*)(size_t)(d + 1); return 0; }
int cuCtxSetCurrent(void* c) { return c ? 0 : 201; }
int cuCtxSynchronize(void) { return 0; }
int cuMemAlloc_v2(CUdeviceptr* p, size_t n) { *p = (CUdeviceptr)calloc(1, n); return *p ? 0 : 2; }
int cuMemFree_v2(CUdeviceptr p) { free((void*)p); return 0; }
int cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) { memcpy((void*)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) { memcpy(d, (const void*)s, n); return 0; }
int cuModuleLoadData(void** m, const void* image) {
  *m = dlopen((const char*)image, RTLD_NOW | RTLD_LOCAL);
  return *m ? 0 : 200;
}
int cuModuleGetFunction(void** f, void* m, const char* name) { *f = dlsym(m, name); return *f ? 0 : 500; }
int cuFuncGetAttribute(int* v, int a, void* f) { *v = 1024; return 0; }
int cuGetErrorString(int code, const char** s) { *s = "an error of the fake driver"; return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  Dl_info info;
  if (!dladdr(f, &info) || !info.dli_sname) return 400;
  void* h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  char name[300];
  snprintf(name, sizeof name, "tjx_nargs_%s", info.dli_sname);
  const int* n = h ? (const int*)dlsym(h, name) : 0;
  emulate_fn run = h ? (emulate_fn)dlsym(h, "tjx_emulate") : 0;
  if (!n || !run || *n > 24) return 500;
  void* a[24] = {0};
  for (int i = 0; i < *n; i++) a[i] = *(void**)params[i];
  unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
  run(f, a, g, b);
  dlclose(h);
  return 0;
}
"""
FAKE_INDEX = 63   # the fake GPU is CUDA:63, so nothing compiled for it is cached under a real GPU's name

def emulated_module(source: str, directory: str) -> bytes:
  """What the fake driver loads for `source`: the path of a library of its kernels, compiled by g++ with the
  emulation header, each kernel's parameter count exported, and linked with the launcher."""
  params = re.findall(r'__global__ __launch_bounds__\(\d+\) void (\w+)\(([^)]*)\)', source)
  counts = "".join(f'extern "C" const int tjx_nargs_{k} = {len(p.split(","))};\n' for k, p in params)
  path = os.path.join(directory, hashlib.sha256(source.encode()).hexdigest()[:16])
  if not os.path.exists(path + '.so'):
    with open(path + '.cpp', 'w') as f: f.write(EMULATION_HEADER + source + counts)
    with open(path + '_launch.cpp', 'w') as f: f.write(EMULATION_LAUNCHER)
    subprocess.run(['g++', '-std=c++17', '-O1', '-w', '-ffp-contract=off', '-fPIC', '-shared', path + '.cpp',
                    path + '_launch.cpp', '-o', path + '.so', '-lm', '-pthread'], check=True, capture_output=True)
  return (path + '.so').encode()

@pytest.fixture(scope='module')
def fake_driver(tmp_path_factory) -> tuple:
  """The fake libcuda, built once, and the directory of the emulated modules."""
  if not (shutil.which('gcc') and shutil.which('g++')): pytest.skip("the CUDA emulation needs gcc and g++")
  d = tmp_path_factory.mktemp('fake-cuda')
  lib = str(d / 'libcuda_fake.so')
  subprocess.run(['gcc', '-shared', '-fPIC', '-x', 'c', '-', '-o', lib, '-ldl'], input=FAKE_DRIVER, text=True,
                 check=True, capture_output=True)
  return lib, str(d)

@pytest.fixture
def fake_gpu(fake_driver, monkeypatch):
  """The CUDA device, unchanged, on the fake driver for one test: its ctypes calls, memory, argument tables, launch
  parameters and shapes are the real ones; only NVRTC's binary is replaced by the emulated module."""
  lib, d = fake_driver
  real_cdll = ctypes.CDLL
  class Redirect(real_cdll):
    def __init__(self, name, *a, **k): super().__init__(lib if name == 'libcuda.so.1' else name, *a, **k)
  monkeypatch.setattr(ctypes, 'CDLL', Redirect)
  monkeypatch.setattr(cuda, '_driver', [])
  monkeypatch.setattr(cuda, 'build', lambda source, arch, nv: emulated_module(source, d))
  dev = cuda.CUDADevice(f'CUDA:{FAKE_INDEX}')
  monkeypatch.setitem(devices._instances, dev.name, dev)
  return dev

@needs_nvrtc
@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_the_cuda_device_matches_the_reference_on_an_emulated_gpu(name, fake_gpu):
  check_against_the_reference(name, fake_gpu.name)

@needs_nvrtc
def test_the_emulated_gpu_keeps_results_on_the_device(fake_gpu):
  assert (fake_gpu.arch, fake_gpu.gpu_name) == ('sm_90', f'emulated GPU {FAKE_INDEX}')
  x = tinyjx.device_put(np.arange(6, dtype=np.float32), fake_gpu.name)
  y = tinyjx.jit(lambda v: v[1:] * 2)(x)
  assert isinstance(tinyjx.array.buffers[y.uop.arg[0]], devices.DeviceBuffer) and y.device.platform == 'cuda'
  assert np.asarray(tinyjx.device_put(y, 'CPU')).tolist() == [2, 4, 6, 8, 10]
  with tinyjx.Context(TINYJX_DEVICE=fake_gpu.name, TINYJX_EAGER_COMPILE_MS=0):
    z = jnp.asarray(rand(3, 5))
    np.testing.assert_allclose(np.asarray(nn.softmax(z, axis=1).sum(1)), np.ones(3), rtol=1e-6)

# --- with a GPU: the programs run and match the reference ---
@needs_gpu
@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_jit_on_cuda_matches_the_reference(name):
  check_against_the_reference(name, 'CUDA')

def check_against_the_reference(name: str, device: str) -> None:
  f, args, x64, rtol = PROGRAMS[name]
  with tinyjx.Context(JAX_ENABLE_X64=x64):
    with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
      want = tinyjx.tree_util.tree_leaves(f(*as_arrays(args)))
    with tinyjx.Context(TINYJX_DEVICE=device):
      got = tinyjx.tree_util.tree_leaves(tinyjx.jit(f)(*as_arrays(args)))
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.dtype == w.dtype, name
    g, w = np.asarray(g), np.asarray(w)
    if rtol == 0: np.testing.assert_array_equal(g, w, err_msg=name)
    else: np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=rtol, err_msg=name)

@needs_gpu
def test_devices_by_kind_and_results_stay_on_the_device():
  device_checks.results_stay_on_the_device('cuda', 'CudaDevice')

@needs_gpu
def test_eager_code_runs_on_cuda():
  with tinyjx.Context(TINYJX_DEVICE='CUDA', TINYJX_EAGER_COMPILE_MS=0):
    x = jnp.asarray(rand(4, 5))
    out = (jnp.exp(x) / jnp.exp(x).sum(axis=1, keepdims=True)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(out), np.ones(4), rtol=1e-5)

@needs_gpu
def test_a_big_grid_strides_past_the_launch_limits():
  x = rng.standard_normal((70000, 3)).astype(np.float32)
  with tinyjx.Context(TINYJX_DEVICE='CUDA'):
    got = np.asarray(tinyjx.jit(lambda v: (v * 2).T + 1)(jnp.asarray(x)))
  np.testing.assert_array_equal(got, (x * 2).T + 1)

@needs_gpu
def test_a_second_process_loads_the_cached_binary(tmp_path):
  patch = ("from tinyjx.devices import cuda; original = cuda.NVRTC.compile; "
           "cuda.NVRTC.compile = lambda self, *a: (builds.append(a[1]), original(self, *a))[1]")
  device_checks.second_process_reuses_the_binary(tmp_path, 'CUDA', patch, ('.cu',))

@needs_gpu
def test_a_kernel_that_fails_to_build_on_the_gpu_shows_the_log(tmp_path):
  with tinyjx.Context(TINYJX_CACHE_DIR=str(tmp_path)):
    with pytest.raises(cuda.CUDABuildError, match="undefined_name"):
      devices.get('CUDA').compile('extern "C" __global__ void broken(float* b) { b[0] = undefined_name; }')

# --- the GPU kernel shape (lower/optimize_gpu.py) ---
@needs_nvrtc
def test_the_heuristics_chose_the_gpu_shapes_for_cuda():
  device_checks.the_heuristics_chose_the_gpu_shapes(cuda.CUDACompileOnly())

@needs_nvrtc
def test_every_thread_of_a_block_reaches_every_barrier():
  """Barriers (`__syncthreads()`) sit only in loops every thread of the block runs alike, never in a thread's own
  strided loop or a branch on the thread: a block never deadlocks, even with its grid capped."""
  f = lambda x, a, b, v: (nn.softmax(x, axis=-1), a @ b, jnp.einsum('bij,bkj->bik', b[None], a.T[None].repeat(2, 0)),
                          jnp.sum(v))
  src = cuda.compile_check(f, rand(9, 500), rand(70, 40), rand(40, 70), rand(1 << 16)).sources[0]
  assert '__shared__' in src and device_checks.barriers_are_uniform(src) >= 8

@needs_nvrtc
@pytest.mark.parametrize('m,n,k,dtype', [(1, 33, 257, np.float32), (33, 7, 255, np.float32), (257, 31, 33, np.float32),
                                         (31, 257, 7, np.float32), (33, 65, 40, np.float64)])
def test_tiled_matmul_at_the_edges_on_an_emulated_gpu(m, n, k, dtype, fake_gpu):
  device_checks.matmul_matches_at_the_edges(fake_gpu.name, m, n, k, dtype)

@needs_nvrtc
def test_a_capped_grid_strides_over_work_groups_on_an_emulated_gpu(fake_gpu, monkeypatch):
  """With CUDA's grid limits made tiny, each block strides over several work groups (rows, tiles, partial sums), its
  threads meeting at every barrier of each."""
  monkeypatch.setattr(cuda, 'MAX_GRID', (2, 2, 2))
  f = lambda x, a, b, v: (nn.softmax(x, axis=-1), a @ b, jnp.einsum('bij,bjk->bik', a[None].repeat(3, 0), b[None]),
                          jnp.sum(v))
  got, want = device_checks.run_on(fake_gpu.name, f, rand(5, 300), rand(70, 40), rand(40, 70), rand(1 << 16))
  device_checks.assert_close(got, want, 1e-4, scale=10)

@needs_nvrtc
def test_split_contractions_on_an_emulated_gpu(fake_gpu):
  device_checks.split_contractions_match(fake_gpu.name)

@needs_gpu
@pytest.mark.parametrize('m,n,k', device_checks.MATMUL_SIZES)
def test_tiled_matmul_at_every_edge_on_the_gpu(m, n, k):
  device_checks.matmul_matches_at_the_edges('CUDA', m, n, k)
  device_checks.matmul_matches_at_the_edges('CUDA', m, n, k, np.float64)

@needs_gpu
def test_the_gpu_shapes_on_the_gpu():
  device_checks.the_heuristics_chose_the_gpu_shapes(devices.get('CUDA'))
  device_checks.transposed_and_batched_matmuls('CUDA')
  device_checks.long_reductions_match('CUDA')
  device_checks.split_contractions_match('CUDA')
  device_checks.a_million_float32s_sum_like_float64('CUDA', n=10_000_000)

@needs_gpu
def test_a_large_matmul_and_softmax_on_the_gpu():
  a, b = rand(1024, 1536), rand(1536, 2048)
  x = rand(4096, 4096)
  with tinyjx.Context(TINYJX_DEVICE='CUDA'):
    got = tinyjx.jit(lambda a, b: a @ b)(jnp.asarray(a), jnp.asarray(b))
    s = tinyjx.jit(lambda x: nn.softmax(x, axis=-1))(jnp.asarray(x))
  np.testing.assert_allclose(np.asarray(got), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3 * np.sqrt(1536))
  np.testing.assert_allclose(np.asarray(s).sum(1), np.ones(4096), rtol=1e-5)
  e = np.exp(x - x.max(1, keepdims=True))
  np.testing.assert_allclose(np.asarray(s), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
