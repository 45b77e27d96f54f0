"""dialects: the C renderer's other dialects. Each changes only what differs from C (`render.CRenderer`): kernel
qualifiers and parameters, how a work item finds its loop variables, type names, math function names, loads, and
the few statements C runs with host facilities (malloc, OpenMP). `RENDERERS` maps a device's `renderer` name to
its class.

OpenCL C: every buffer is a `__global` base pointer plus a byte offset (intermediates are regions of one arena),
turned into a typed pointer at the top of the kernel; the loops in `k.grid` (optimize_gpu.py) are read from
`get_global_id`; bool is stored as uchar, float16 as its bits in ushort (converted in software, as C does where
the compiler has no _Float16); f-suffixed C math names map to OpenCL's overloaded builtins; a sort is an in-place
stable insertion sort per row (no scratch memory); nothing is contracted into a fused multiply-add (FP_CONTRACT OFF, as the
CPU device compiles with -ffp-contract=off), so results match the reference.

CUDA C++ (NVRTC): what differs from OpenCL C. Kernels are `extern "C" __global__` (unmangled names for
cuModuleGetFunction) and take plain typed pointers: the host adds an intermediate's arena offset to the device
pointer. A grid loop is a grid-stride loop over `blockIdx/blockDim/threadIdx` of its dimension (x innermost), so
any launch shape is correct and the device may cap the grid at CUDA's limits. NVRTC has no libc headers: the
prelude defines the fixed-width types, their limits, NAN and INFINITY; the prelude's helpers are device
functions through NVRTC's `-default-device`; bool is C++ bool, float16 its bits in uint16_t (the soft-half code);
a bitcast is a union in a template (C++ has no compound literals). The device compiles with `--fmad=false`
(nothing contracted), `-ftz=false`, `-prec-div=true`, `-prec-sqrt=true`, so results match the reference.
"""
from __future__ import annotations
import math
from tinyjx import dtypes
from tinyjx.lower.index import Loop, Sort, Kernel
from tinyjx.uop import UOp, Ops
from tinyjx.lower.render import CRenderer, RENDERERS as C_RENDERERS, TYPES
from tinyjx.lower.prelude import PORTABLE, SOFT_HALF

CL_PRELUDE = r"""
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF
typedef char int8_t; typedef short int16_t; typedef int int32_t; typedef long int64_t;
typedef uchar uint8_t; typedef ushort uint16_t; typedef uint uint32_t; typedef ulong uint64_t;
#define INT8_MIN SCHAR_MIN
#define INT8_MAX SCHAR_MAX
#define INT16_MIN SHRT_MIN
#define INT16_MAX SHRT_MAX
#define INT32_MIN INT_MIN
#define INT32_MAX INT_MAX
#define INT64_MIN LONG_MIN
#define INT64_MAX LONG_MAX
#define UINT8_MAX UCHAR_MAX
#define UINT16_MAX USHRT_MAX
#define UINT32_MAX UINT_MAX
#define UINT64_MAX ULONG_MAX
#define expf exp
#define logf log
#define expm1f expm1
#define log1pf log1p
#define sinf sin
#define cosf cos
#define tanf tan
#define asinf asin
#define acosf acos
#define atanf atan
#define sinhf sinh
#define coshf cosh
#define tanhf tanh
#define sqrtf sqrt
#define floorf floor
#define ceilf ceil
#define rintf rint
#define truncf trunc
#define fabsf fabs
#define fmodf fmod
#define powf pow
#define atan2f atan2
#define nearbyint rint
#define tjx_exp_f32 exp
#define tjx_log_f32 log
#define tjx_tanh_f32 tanh
static inline float tjx_u32_as_f32(uint b) { return as_float(b); }
""" + SOFT_HALF + r"""
static inline float tjx_bf16(float x) {
  if (x != x) return x;
  uint b = as_uint(x);
  return as_float((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
}
""" + PORTABLE

class OpenCLRenderer(CRenderer):
  """OpenCL C for the CL device (see the module doc)."""
  kernel_prefix = "__kernel void"
  short_loop_guard = ""   # the GCC bug that TJX_KEEP_LOOP keeps away is the C compiler's
  type_names = {**TYPES, dtypes.bool_: 'uchar', dtypes.float16: 'ushort'}
  wide_sums: dict = {}   # double is optional in OpenCL (cl_khr_fp64): float32 sums stay float32 here

  def render(self, kernels: list[Kernel], entries: list) -> str:
    self.micro: dict = {}
    return "\n".join([CL_PRELUDE, *[self.kernel(k) for k in kernels]])

  def pointer(self, g, written: bool) -> str:
    return f"__global {'' if written else 'const '}{self.type_names[g.dtype]}*"

  def kernel_params(self, k: Kernel) -> str:
    return ", ".join(f"{self.pointer(g, g.arg in k.outs)} b{g.arg}_, ulong o{g.arg}" for g in k.args)

  def kernel_prologue(self, k: Kernel) -> list:
    lines = []
    for g in k.args:
      ptr, const = self.pointer(g, g.arg in k.outs), '' if g.arg in k.outs else 'const '
      lines.append(f"  {ptr} restrict b{g.arg} = ({ptr})((__global {const}char*)b{g.arg}_ + o{g.arg});")
    return lines

  def loop_open(self, s: Loop, pad: str) -> list:
    d, v = self.grid.get(id(s)), self.name(s.var)
    if d is None: return [f"{pad}for (int64_t {v} = 0; {v} < {s.size}; {v}++) {{"]
    return [f"{pad}{{ const int64_t {v} = get_global_id({d});"]

  def masked_load(self, ref: str, valid: str, dt) -> str:
    return f"({valid} ? {ref} : ({self.type_names[dt]})0)"

  def sort(self, s: Sort, lines: list, pad: str) -> None:
    """Row by row, a stable insertion sort of indices written straight into the output (numpy's NaN order)."""
    n, inner = s.shape[s.axis], math.prod(s.shape[s.axis + 1:])
    rows = math.prod(s.shape) // max(n, 1)
    kind = 'f' if s.src.dtype.kind == 'f' else s.src.dtype.kind
    key_t = {'f': 'double', 'u': 'ulong', 'i': 'long', 'b': 'long'}[kind]
    key = lambda j: (f"TJX_H2F(b{s.src.arg}[base + ({j}) * {inner}])" if s.src.dtype is dtypes.float16
                     else f"({key_t})b{s.src.arg}[base + ({j}) * {inner}]")
    out, nans = f"b{s.out.arg}", int(kind == 'f')
    before = (f"(x > y || ({nans} && x != x && y == y))" if s.descending else
              f"(x < y || ({nans} && y != y && x == x))")
    lines += [f"{pad}for (int64_t r = 0; r < {rows}; r++) {{",
              f"{pad}  const int64_t base = (r / {inner}) * {n * inner} + r % {inner};",
              f"{pad}  for (int64_t j = 0; j < {n}; j++) {out}[base + j * {inner}] = (int)j;",
              f"{pad}  for (int64_t j = 1; j < {n}; j++) {{",
              f"{pad}    const int idx = {out}[base + j * {inner}]; const {key_t} x = {key('idx')};",
              f"{pad}    int64_t m = j - 1;",
              f"{pad}    while (m >= 0) {{",
              f"{pad}      const int other = {out}[base + m * {inner}]; const {key_t} y = {key('other')};",
              f"{pad}      if (!{before}) break;",
              f"{pad}      {out}[base + (m + 1) * {inner}] = other; m--;",
              f"{pad}    }}",
              f"{pad}    {out}[base + (m + 1) * {inner}] = idx;",
              f"{pad}  }}",
              f"{pad}}}"]

  def parallel_for(self, loop: Loop) -> str: return ""
  def simd_reduction(self, loop: Loop) -> str: return ""

CUDA_PRELUDE = r"""
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef uint64_t ulong;   /* the OpenCL sort's key type */
#define INT8_MIN (-128)
#define INT8_MAX 127
#define INT16_MIN (-32768)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295u
#define UINT64_MAX 18446744073709551615ULL
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fc00000)
#define tjx_exp_f32 expf
#define tjx_log_f32 logf
#define tjx_tanh_f32 tanhf
static inline float tjx_u32_as_f32(uint32_t b) { return __uint_as_float(b); }
""" + SOFT_HALF + r"""
static inline float tjx_bf16(float x) {
  if (x != x) return x;
  uint32_t b = __float_as_uint(x);
  return __uint_as_float((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
}
template <class B, class A> static inline B tjx_bitcast(A a) { union { A a; B b; } u; u.a = a; return u.b; }
""" + PORTABLE

class CUDARenderer(OpenCLRenderer):
  """CUDA C++ for the CUDA device, compiled by NVRTC (see the module doc). From OpenCL it keeps the masked loads,
  the scratch-free sort and the absence of OpenMP; the rest is C's or CUDA's own."""
  kernel_prefix = 'extern "C" __global__ void'
  buffer_qualifier = "__restrict__"
  type_names = {**TYPES, dtypes.bool_: 'bool', dtypes.float16: 'uint16_t'}
  wide_sums = {dtypes.float32: 'double'}   # GPUs have double: float32 sums accumulate as the CPU's do
  barrier = "__syncthreads();"             # for reductions through shared memory (none renders one yet)
  kernel_params = CRenderer.kernel_params  # plain typed pointers: the device adds the byte offsets
  kernel_prologue = CRenderer.kernel_prologue

  def render(self, kernels: list[Kernel], entries: list) -> str:
    self.micro: dict = {}
    return "\n".join([CUDA_PRELUDE, *[self.kernel(k) for k in kernels]])

  def loop_open(self, s: Loop, pad: str) -> list:
    """A grid loop strides over the threads of its grid dimension; any other loop is C's."""
    d = self.grid.get(id(s))
    if d is None: return CRenderer.loop_open(self, s, pad)
    a, v = "xyz"[d], self.name(s.var)
    return [f"{pad}for (int64_t {v} = blockIdx.{a} * (int64_t)blockDim.{a} + threadIdx.{a}; {v} < {s.size}; "
            f"{v} += (int64_t)blockDim.{a} * gridDim.{a}) {{"]

  def render_node(self, u: UOp) -> str:
    if u.op is Ops.BITCAST: return f"tjx_bitcast<{self.type_names[u.dtype]}>({self.expr(u.src[0])})"
    return super().render_node(u)

RENDERERS = {**C_RENDERERS, 'OpenCL': OpenCLRenderer, 'CUDA': CUDARenderer}
