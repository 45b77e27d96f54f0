"""dialects: the C renderer's other dialects. Each changes only what differs from C (`render.CRenderer`): kernel
qualifiers and parameters, how a work item finds its loop variables, type names, math function names, loads, and
the few statements C runs with host facilities (malloc, OpenMP). `RENDERERS` maps a device's `renderer` name to
its class.

OpenCL C: every buffer is a `__global` base pointer plus a byte offset (intermediates are regions of one arena),
turned into a typed pointer at the top of the kernel; bool is stored as uchar, float16 as its bits in ushort
(converted in software, as C does where the compiler has no _Float16); f-suffixed C math names map to OpenCL's
overloaded builtins; a sort is an in-place stable insertion sort per row (no scratch memory); nothing is contracted
into a fused multiply-add (FP_CONTRACT OFF, as the CPU device compiles with -ffp-contract=off), so results match the
reference.

The GPU kernel shape (optimize_gpu.py decides it; both dialects write it the same way, with their own `indices`,
`local_qualifier` and `barrier`): a grid loop of `k.grid` is a grid-stride loop from the work item's global id
(`get_global_id`), or from its group's id (`get_group_id`) when grid points are work groups, so any launch covers the
grid and every thread of a group runs the same trip counts; a loop split over a group's threads (`k.strided`) starts
at its first value (the thread's `lid`) and steps over the others; the group's local memory is declared at the
kernel's top (a `tjx_red_<type>` array per accumulator type of a `GroupReduce`, the `tjx_xs`/`tjx_ys` slices of a
`TiledMatmul`); a `GroupReduce` is a tree in local memory with a barrier per step; a `TiledMatmul` is written out as
its statement says (slices staged between barriers, a register tile per thread, the epilogue per result).

CUDA C++ (NVRTC): what differs from OpenCL C. Kernels are `extern "C" __global__` (unmangled names for
cuModuleGetFunction) and take plain typed pointers: the host adds an intermediate's arena offset to the device
pointer. Ids are `blockIdx/blockDim/threadIdx/gridDim` of the grid dimension (x innermost), local memory is
`__shared__`, the barrier `__syncthreads()`, and `__launch_bounds__` says the block size; the device may cap the
grid at CUDA's limits (the grid loops stride). NVRTC has no libc headers: the prelude defines the fixed-width types,
their limits, NAN and INFINITY; the prelude's helpers are device functions through NVRTC's `-default-device`; bool
is C++ bool, float16 its bits in uint16_t (the soft-half code); a bitcast is a union in a template (C++ has no
compound literals). The device compiles with `--fmad=false` (nothing contracted), `-ftz=false`, `-prec-div=true`,
`-prec-sqrt=true`, so results match the reference.
"""
from __future__ import annotations
import math
from tinyjx import dtypes
from tinyjx.lower.index import Loop, Sort, Kernel
from tinyjx.lower.optimize_gpu import GroupReduce, TiledMatmul, walk
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
#define tjx_log1p_f32 log1p
#define tjx_expm1_f32 expm1
#define tjx_tanh_f32 tanh
#define tjx_erf_f32 erf
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
  matmul_prefix = ""
  kernel_head = "__kernel __attribute__((reqd_work_group_size({x}, {y}, {z}))) void"   # launched in groups of that size
  short_loop_guard = ""   # the GCC bug that TJX_KEEP_LOOP keeps away is the C compiler's
  index_barrier = ""      # and so is the one tjx_opaque_index keeps away
  type_names = {**TYPES, dtypes.bool_: 'uchar', dtypes.float16: 'ushort'}
  wide_sums: dict = {}   # double is optional in OpenCL (cl_khr_fp64): float32 sums stay float32 here
  local_qualifier = "__local"
  barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
  indices = {'global': "(int64_t)get_global_id({d})", 'global_count': "(int64_t)get_global_size({d})",
             'group': "(int64_t)get_group_id({d})", 'groups': "(int64_t)get_num_groups({d})",
             'local': "(int64_t)get_local_id(0)"}

  def render(self, kernels: list[Kernel], entries: list) -> str:
    self.micro: dict = {}
    return "\n".join([CL_PRELUDE, *[self.kernel(k) for k in kernels]])

  def pointer(self, g, written: bool) -> str:
    return f"__global {'' if written else 'const '}{self.type_names[g.dtype]}*"

  def kernel_params(self, k: Kernel) -> str:
    return ", ".join(f"{self.pointer(g, g.arg in k.outs)} b{g.arg}_, ulong o{g.arg}" for g in k.args)

  def buffer_setup(self, k: Kernel) -> list:
    """Typed pointers from the base pointers and byte offsets."""
    lines = []
    for g in k.args:
      ptr, const = self.pointer(g, g.arg in k.outs), '' if g.arg in k.outs else 'const '
      lines.append(f"  {ptr} restrict b{g.arg} = ({ptr})((__global {const}char*)b{g.arg}_ + o{g.arg});")
    return lines

  def loop_open(self, s: Loop, pad: str) -> list:
    """A grid loop strides from the work item's global id (or its group's id) over the grid; a loop split over a
    group's threads strides from its first value (optimize_gpu's `strided`); any other loop is C's."""
    d, v = self.grid.get(id(s)), self.name(s.var)
    if d is not None:
      first, step = ('group', 'groups') if self.groups else ('global', 'global_count')
      return [f"{pad}for (int64_t {v} = {self.index(first, d)}; {v} < {s.size}; {v} += {self.index(step, d)}) {{"]
    if id(s) in self.strided:
      first, step = self.strided[id(s)]
      return [f"{pad}for (int64_t {v} = {self.expr(first)}; {v} < {s.size}; {v} += {step}) {{"]
    return CRenderer.loop_open(self, s, pad)

  def index(self, which: str, d: int) -> str: return self.indices[which].format(d=d, a="xyz"[d])

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

  # --- the GPU kernel shape: work groups, local memory, barriers (decided by optimize_gpu.py) ---
  def kernel(self, k: Kernel) -> str:
    self.groups, self.strided, self.local_size = k.groups, k.strided, (k.local_size or (1,))[0]
    self.local = (*(k.local_size or ()), 1, 1, 1)[:3]
    return super().kernel(k)

  @property
  def kernel_prefix(self) -> str:
    """The kernel's qualifiers, with the work-group size it is always launched with (the compiler may rely on it)."""
    x, y, z = self.local
    return self.kernel_head.format(x=x, y=y, z=z, threads=x * y * z)

  def kernel_prologue(self, k: Kernel) -> list:
    return self.buffer_setup(k) + self.group_setup(k)

  def group_setup(self, k: Kernel) -> list:
    """The thread's index in its group and the group's local memory (declared at the kernel's top, as OpenCL wants)."""
    if not k.groups: return []
    arrays: dict = {}
    for s in walk(k.body):
      if isinstance(s, GroupReduce):
        t = self.acc_type(s.acc)
        arrays[f"tjx_red_{t}"] = (t, k.local_size[0])
      if isinstance(s, TiledMatmul):
        t = self.type_names[s.dtype]
        arrays.update(tjx_xs=(t, s.tk * s.tm), tjx_ys=(t, s.tk * s.tn))
    return [f"  const int64_t lid = {self.indices['local']};",
            *[f"  {self.local_qualifier} {t} {name}[{n}];" for name, (t, n) in arrays.items()]]

  def custom(self, s, lines: list, depth: int) -> None:
    if isinstance(s, GroupReduce): self.group_reduce(s, lines, "  " * depth)
    elif isinstance(s, TiledMatmul): self.tiled_matmul(s, lines, "  " * depth)
    else: super().custom(s, lines, depth)

  def group_reduce(self, s: GroupReduce, lines: list, pad: str) -> None:
    """Each thread's part of the accumulator into local memory, then a tree: half the threads combine two parts per
    step, a barrier between steps, until part 0 is the whole, which every thread reads back."""
    t, acc = self.acc_type(s.acc), self.name(s.acc)
    buf = f"tjx_red_{t}"
    both = self.binary(s.acc.arg[1], s.acc.dtype, f"{buf}[lid]", f"{buf}[lid + h]")
    lines += [f"{pad}{buf}[lid] = {acc};", f"{pad}{self.barrier}",
              f"{pad}for (int64_t h = {self.local_size // 2}; h > 0; h >>= 1) {{",
              f"{pad}  if (lid < h) {buf}[lid] = {both};", f"{pad}  {self.barrier}", f"{pad}}}",
              f"{pad}{acc} = {buf}[0];", f"{pad}{self.barrier}"]

  def tiled_matmul(self, s: TiledMatmul, lines: list, pad: str) -> None:
    """The group's output tile: per slice of TK contraction values, the group stages x's and y's slices in local
    memory (barrier), each thread multiplies its register tile from them (barrier); then each thread stores its
    results that fall inside the output."""
    t, th, p = self.type_names[s.dtype], s.threads, pad + "  "
    lines += [f"{pad}{{", f"{p}const int64_t tx = lid % {th}, ty = lid / {th};",
              f"{p}{t} tjx_c[{s.rm}][{s.rn}];",
              f"{p}for (int r = 0; r < {s.rm}; r++) for (int q = 0; q < {s.rn}; q++) "
              f"tjx_c[r][q] = {self.const(0, s.dtype)};",
              f"{p}for (int64_t k0 = 0; k0 < {s.k}; k0 += {s.tk}) {{"]
    self.stage(s, 'x', lines, p + "  ")
    self.stage(s, 'y', lines, p + "  ")
    lines += [f"{p}  {self.barrier}", f"{p}  for (int kk = 0; kk < {s.tk}; kk++) {{",
              f"{p}    {t} tjx_a[{s.rm}], tjx_b[{s.rn}];",
              f"{p}    for (int r = 0; r < {s.rm}; r++) tjx_a[r] = tjx_xs[kk * {s.tm} + ty + r * {th}];",
              f"{p}    for (int q = 0; q < {s.rn}; q++) tjx_b[q] = tjx_ys[kk * {s.tn} + tx + q * {th}];",
              f"{p}    for (int r = 0; r < {s.rm}; r++) for (int q = 0; q < {s.rn}; q++) "
              f"tjx_c[r][q] = tjx_c[r][q] + tjx_a[r] * tjx_b[q];",
              f"{p}  }}", f"{p}  {self.barrier}", f"{p}}}",
              f"{p}for (int r = 0; r < {s.rm}; r++) for (int q = 0; q < {s.rn}; q++) {{",
              f"{p}  const int64_t mi = {self.name(s.ti)} * {s.tm} + ty + r * {th}, "
              f"mj = {self.name(s.tj)} * {s.tn} + tx + q * {th};",
              f"{p}  const {t} cv = tjx_c[r][q];",
              f"{p}  if (mi < {s.m} && mj < {s.n}) {{",
              *self.scoped(lambda out: [self.stmt(st, out, len(p) // 2 + 2) for st in s.stores], p + "    "),
              f"{p}  }}", f"{p}}}", f"{pad}}}"]

  def stage(self, s: TiledMatmul, which: str, lines: list, pad: str) -> None:
    """The group's threads copy the current slice of one operand into local memory, zeros past its edges; threads
    walk the operand's contiguous axis fastest, so their loads coalesce."""
    x, rows, tile, var, tvar, k_inner, buf = ((s.x, s.m, s.tm, 'mi', s.ti, s.x_k_inner, 'tjx_xs') if which == 'x' else
                                              (s.y, s.n, s.tn, 'mj', s.tj, s.y_k_inner, 'tjx_ys'))
    kk, rr = (f"e % {s.tk}", f"e / {s.tk}") if k_inner else (f"e / {tile}", f"e % {tile}")
    at = f"{buf}[({kk}) * {tile} + {rr}]"
    lines += [f"{pad}for (int64_t e = lid; e < {s.tk * tile}; e += {s.threads * s.threads}) {{",
              f"{pad}  const int64_t {var} = {self.name(tvar)} * {tile} + {rr}, mk = k0 + {kk};",
              f"{pad}  if ({var} < {rows} && mk < {s.k}) {{",
              *self.scoped(lambda out: out.append(f"{pad}    {at} = {self.expr(x)};"), pad + "    "),
              f"{pad}  }} else {at} = {self.const(0, s.dtype)};", f"{pad}}}"]

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
#define tjx_log1p_f32 log1pf
#define tjx_expm1_f32 expm1f
#define tjx_tanh_f32 tanhf
#define tjx_erf_f32 erff
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
  kernel_head = 'extern "C" __global__ __launch_bounds__({threads}) void'
  buffer_qualifier = "__restrict__"
  type_names = {**TYPES, dtypes.bool_: 'bool', dtypes.float16: 'uint16_t'}
  wide_sums = {dtypes.float32: 'double'}   # GPUs have double: float32 sums accumulate as the CPU's do
  local_qualifier = "__shared__"
  barrier = "__syncthreads();"
  indices = {'global': "blockIdx.{a} * (int64_t)blockDim.{a} + threadIdx.{a}",
             'global_count': "(int64_t)blockDim.{a} * gridDim.{a}", 'group': "(int64_t)blockIdx.{a}",
             'groups': "(int64_t)gridDim.{a}", 'local': "(int64_t)threadIdx.x"}
  kernel_params = CRenderer.kernel_params  # plain typed pointers: the device adds the byte offsets
  def buffer_setup(self, k: Kernel) -> list: return []

  def render(self, kernels: list[Kernel], entries: list) -> str:
    self.micro: dict = {}
    return "\n".join([CUDA_PRELUDE, *[self.kernel(k) for k in kernels]])

  def render_node(self, u: UOp) -> str:
    if u.op is Ops.BITCAST: return f"tjx_bitcast<{self.type_names[u.dtype]}>({self.expr(u.src[0])})"
    return super().render_node(u)

RENDERERS = {**C_RENDERERS, 'OpenCL': OpenCLRenderer, 'CUDA': CUDARenderer}
