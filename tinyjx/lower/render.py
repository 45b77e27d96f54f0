"""render: kernel statements to C source. One C-style renderer; a dialect changes only what differs.

`CRenderer.render(kernels, entries)` returns one translation unit: a prelude of small inline helpers
(the exact semantics of the PYTHON device for integer division, shifts, saturating casts, NaN-propagating
max/min, bfloat16 rounding, float16 conversion, stable argsort), one function per kernel, and one exported
entry per run of consecutive kernels, `void tjx_run_N(void **args)`, which casts buffer pointers out of
the slot table and calls its kernels in order (one foreign call runs many kernels). Each kernel also gets
an entry `tjx_kernel_N(void **args)` for per-kernel timing at DEBUG=2.

Dialect hooks (`OpenCLRenderer`/`CUDARenderer` later override these): `kernel_prefix`, `buffer_qualifier`,
`parallel_for` (how the outermost parallel loop is expressed), `type_names`, `prelude_extra`.
Expressions: a node read more than once, or one that does not depend on the innermost loop, becomes a
`const` temporary in the outermost block where everything it reads is defined (loop-invariant code motion:
a `powf` of a scalar runs once per kernel, not once per element); everything else is rendered inline. Names
come from per-kernel numbers, so the same program renders to the same text in every process (the disk
cache is keyed by that text).
"""
from __future__ import annotations
import math
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops, toposort
from tinyjx.lower.index import Loop, Decl, Update, Store, Sort, Matmul, Kernel, Local, Assign, identity
from tinyjx.lower import symbolic as sym

TYPES = {dtypes.bool_: '_Bool', dtypes.int8: 'int8_t', dtypes.int16: 'int16_t', dtypes.int32: 'int32_t',
         dtypes.int64: 'int64_t', dtypes.uint8: 'uint8_t', dtypes.uint16: 'uint16_t', dtypes.uint32: 'uint32_t',
         dtypes.uint64: 'uint64_t', dtypes.float16: 'half', dtypes.bfloat16: 'float', dtypes.float32: 'float',
         dtypes.float64: 'double'}
SUFFIX = {dtypes.int8: 'i8', dtypes.int16: 'i16', dtypes.int32: 'i32', dtypes.int64: 'i64', dtypes.uint8: 'u8',
          dtypes.uint16: 'u16', dtypes.uint32: 'u32', dtypes.uint64: 'u64', dtypes.float32: 'f32',
          dtypes.bfloat16: 'f32', dtypes.float64: 'f64', dtypes.bool_: 'b'}

PRELUDE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __FLT16_MANT_DIG__
typedef _Float16 half;
#define TJX_H2F(x) ((float)(x))
#define TJX_F2H(x) ((half)(x))
#else
typedef uint16_t half;
static inline float TJX_H2F(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, b;
  if (e == 0x1f) b = s | 0x7f800000u | (m << 13);
  else if (e) b = s | ((e + 112) << 23) | (m << 13);
  else { float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; }
  float f; memcpy(&f, &b, 4); return f;
}
static inline uint16_t TJX_F2H(double d) {
  uint16_t s = signbit(d) ? 0x8000 : 0; double a = fabs(d); int e;
  if (a != a) return s | 0x7e00;
  if (a >= 65520.0) return s | 0x7c00;
  if (a < 6.103515625e-05) return s | (uint16_t)nearbyint(a * 16777216.0);
  double q = nearbyint(frexp(a, &e) * 2048.0);
  if (q == 2048.0) { q = 1024.0; e++; }
  return s | (uint16_t)(((e + 14) << 10) + ((int)q - 1024));
}
#endif
static inline float tjx_bf16(float x) {
  if (x != x) return x;
  uint32_t b; memcpy(&b, &x, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &b, 4); return x;
}
#define TJX_FLOAT_OPS(T, N, ONE) \
static inline T tjx_max_##N(T a, T b) { return (a > b || a != a) ? a : b; } \
static inline T tjx_min_##N(T a, T b) { return (a < b || a != a) ? a : b; } \
static inline T tjx_sign_##N(T x) { return x > 0 ? ONE : (x < 0 ? -ONE : (x == 0 ? (T)0 : x)); }
TJX_FLOAT_OPS(float, f32, 1.0f)
TJX_FLOAT_OPS(double, f64, 1.0)
/* NaN-propagating max/min as OpenMP reductions, so `omp simd` may vectorize them */
#pragma omp declare reduction(tjx_max_f32 : float : omp_out = tjx_max_f32(omp_out, omp_in)) \
  initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(tjx_min_f32 : float : omp_out = tjx_min_f32(omp_out, omp_in)) \
  initializer(omp_priv = INFINITY)
#pragma omp declare reduction(tjx_max_f64 : double : omp_out = tjx_max_f64(omp_out, omp_in)) \
  initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(tjx_min_f64 : double : omp_out = tjx_min_f64(omp_out, omp_in)) \
  initializer(omp_priv = INFINITY)
#define TJX_INT_OPS(T, U, N, BITS, SIGNED) \
static inline T tjx_max_##N(T a, T b) { return a > b ? a : b; } \
static inline T tjx_min_##N(T a, T b) { return a < b ? a : b; } \
static inline T tjx_div_##N(T a, T b) { \
  if (b == 0) return (T)-1; \
  if (SIGNED && b == (T)-1) return (T)(0 - (U)a); \
  return (T)(a / b); } \
static inline T tjx_rem_##N(T a, T b) { \
  if (b == 0) return a; \
  if (SIGNED && b == (T)-1) return 0; \
  return (T)(a % b); } \
static inline T tjx_shl_##N(T a, int64_t b) { return (b >= 0 && b < BITS) ? (T)((U)a << b) : (T)0; } \
static inline T tjx_shr_##N(T a, int64_t b) { return (b >= 0 && b < BITS) ? (T)(a >> b) : (T)(a < 0 ? -1 : 0); } \
static inline T tjx_abs_##N(T a) { return a < 0 ? (T)(0 - (U)a) : a; } \
static inline T tjx_pow_##N(T a, T b) { \
  if (b < 0) return a == 1 ? (T)1 : (a == (T)-1 ? (((uint64_t)b & 1) ? (T)-1 : (T)1) : (T)0); \
  uint64_t r = 1, x = (uint64_t)a, e = (uint64_t)b; \
  while (e) { if (e & 1) r *= x; x *= x; e >>= 1; } \
  return (T)r; }
TJX_INT_OPS(int8_t, uint8_t, i8, 8, 1)
TJX_INT_OPS(int16_t, uint16_t, i16, 16, 1)
TJX_INT_OPS(int32_t, uint32_t, i32, 32, 1)
TJX_INT_OPS(int64_t, uint64_t, i64, 64, 1)
TJX_INT_OPS(uint8_t, uint8_t, u8, 8, 0)
TJX_INT_OPS(uint16_t, uint16_t, u16, 16, 0)
TJX_INT_OPS(uint32_t, uint32_t, u32, 32, 0)
TJX_INT_OPS(uint64_t, uint64_t, u64, 64, 0)
#define TJX_F2I(T, N, LO, HI) \
static inline T tjx_f2i_##N(double x) { return x != x ? (T)0 : (x >= (double)HI ? HI : (x <= (double)LO ? LO : (T)x)); }
TJX_F2I(int8_t, i8, INT8_MIN, INT8_MAX)
TJX_F2I(int16_t, i16, INT16_MIN, INT16_MAX)
TJX_F2I(int32_t, i32, INT32_MIN, INT32_MAX)
TJX_F2I(int64_t, i64, INT64_MIN, INT64_MAX)
TJX_F2I(uint8_t, u8, 0, UINT8_MAX)
TJX_F2I(uint16_t, u16, 0, UINT16_MAX)
TJX_F2I(uint32_t, u32, 0, UINT32_MAX)
TJX_F2I(uint64_t, u64, 0, UINT64_MAX)
/* float32 exp, log and tanh as polynomials (Cephes' minimax coefficients) that vectorize; about 1-2 ulp */
#ifdef __FMA__
#define TJX_FMA(a, b, c) fmaf(a, b, c)
#else
#define TJX_FMA(a, b, c) ((a) * (b) + (c))
#endif
static inline float tjx_f32_bits(int32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline float tjx_exp_f32(float x) {
  float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  xc = x == x ? xc : 0.0f;
  float n = rintf(xc * 1.44269504088896341f);
  float r = TJX_FMA(n, -0.693145751953125f, xc);
  r = TJX_FMA(n, -1.428606765330187045e-06f, r);
  float p = 1.9875691500e-4f;
  p = TJX_FMA(p, r, 1.3981999507e-3f); p = TJX_FMA(p, r, 8.3334519073e-3f); p = TJX_FMA(p, r, 4.1665795894e-2f);
  p = TJX_FMA(p, r, 1.6666665459e-1f); p = TJX_FMA(p, r, 5.0000001201e-1f);
  p = TJX_FMA(p, r * r, r) + 1.0f;
  int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
  float res = p * tjx_f32_bits((n1 + 127) << 23) * tjx_f32_bits((n2 + 127) << 23);
  return x == x ? res : x;
}
static inline float tjx_log_f32(float x) {
  int32_t b; memcpy(&b, &x, 4);
  int sub = x < 1.17549435e-38f;
  float xs = sub ? x * 8388608.0f : x;
  memcpy(&b, &xs, 4);
  int32_t e = ((b >> 23) & 0xff) - 127 - (sub ? 23 : 0);
  float m = tjx_f32_bits((b & 0x7fffff) | 0x3f800000);
  int big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  float fe = (float)(e + big), f = m - 1.0f, z = f * f;
  float p = 7.0376836292e-2f;
  p = TJX_FMA(p, f, -1.1514610310e-1f); p = TJX_FMA(p, f, 1.1676998740e-1f); p = TJX_FMA(p, f, -1.2420140846e-1f);
  p = TJX_FMA(p, f, 1.4249322787e-1f); p = TJX_FMA(p, f, -1.6668057665e-1f); p = TJX_FMA(p, f, 2.0000714765e-1f);
  p = TJX_FMA(p, f, -2.4999993993e-1f); p = TJX_FMA(p, f, 3.3333331174e-1f);
  float y = f * z * p;
  y = TJX_FMA(fe, -2.12194440e-4f, y);
  y = TJX_FMA(z, -0.5f, y);
  float res = TJX_FMA(fe, 0.693359375f, f + y);
  res = x == 0.0f ? -INFINITY : res;
  res = x < 0.0f ? NAN : res;
  return (x != x || x == INFINITY) ? x : res;
}
static inline float tjx_tanh_f32(float x) {
  float a = fabsf(x), z = x * x;
  float p = -5.70498872745e-3f;
  p = TJX_FMA(p, z, 2.06390887954e-2f); p = TJX_FMA(p, z, -5.37397155531e-2f);
  p = TJX_FMA(p, z, 1.33314422036e-1f); p = TJX_FMA(p, z, -3.33332819422e-1f);
  float small = TJX_FMA(p * z, x, x);
  float big = 1.0f - 2.0f / (tjx_exp_f32(2.0f * a) + 1.0f);
  big = x < 0.0f ? -big : big;
  return a < 0.625f ? small : big;
}
/* what a masked-off load reads: zero bits of any element type */
static const uint64_t tjx_zero[2] __attribute__((aligned(16))) = {0, 0};
/* matmul: operands packed into panels of TJX_MR rows and TJX_NR_* columns; the micro-kernel keeps a
   TJX_MR x TJX_NR tile of results in vector registers (the compiler unrolls and vectorizes the q loop) */
#if defined(__AVX512F__) || defined(TJX_AVX512_MICROKERNEL)
#define TJX_VBYTES 64
#define TJX_MR 12
#else
#define TJX_VBYTES 32
#define TJX_MR 12
#endif
#if defined(TJX_AVX512_MICROKERNEL) && !defined(__AVX512F__)
#define TJX_MICRO_TARGET __attribute__((target("avx512f")))
#else
#define TJX_MICRO_TARGET
#endif
typedef float tjx_vf32 __attribute__((vector_size(TJX_VBYTES)));
typedef double tjx_vf64 __attribute__((vector_size(TJX_VBYTES)));
#define TJX_NR_F32 (2 * TJX_VBYTES / 4)
#define TJX_NR_F64 (2 * TJX_VBYTES / 8)
#if defined(__clang__)
#define TJX_CONTRACT_FN
#define TJX_CONTRACT_BODY _Pragma("clang fp contract(fast)")
#else
#define TJX_CONTRACT_FN __attribute__((optimize("fp-contract=fast")))
#define TJX_CONTRACT_BODY
#endif
static inline void* tjx_alloc(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64 + 64); }
/* the micro-kernel: 2 x TJX_MR vector accumulators, multiply-adds fused (only here, on purpose); `more`
   continues the sums already in c */
#define TJX_MICRO(T, V, N, NR) \
TJX_CONTRACT_FN TJX_MICRO_TARGET static void tjx_mm_##N(int64_t K, const T* restrict a, const T* restrict b, \
                                                       T* restrict c, int more) { \
  TJX_CONTRACT_BODY \
  V acc[TJX_MR][2]; \
  if (more) memcpy(acc, c, sizeof acc); \
  else for (int r = 0; r < TJX_MR; r++) { acc[r][0] = (V){0}; acc[r][1] = (V){0}; } \
  for (int64_t k = 0; k < K; k++) { \
    V b0, b1; \
    memcpy(&b0, b + k * NR, sizeof(V)); memcpy(&b1, b + k * NR + NR / 2, sizeof(V)); \
    for (int r = 0; r < TJX_MR; r++) { \
      V av = (V){0} + a[k * TJX_MR + r]; \
      acc[r][0] += av * b0; acc[r][1] += av * b1; } } \
  memcpy(c, acc, sizeof acc); }
TJX_MICRO(float, tjx_vf32, f32, TJX_NR_F32)
TJX_MICRO(double, tjx_vf64, f64, TJX_NR_F64)
/* stable merge sort of row indices by key; NaN sorts last ascending and first descending (numpy's order) */
#define TJX_SORT(K, N, NANS) \
static void tjx_sort_##N(const K* key, int32_t* idx, int32_t* tmp, int64_t n, int desc) { \
  for (int64_t w = 1; w < n; w *= 2) { \
    for (int64_t lo = 0; lo < n; lo += 2 * w) { \
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, o = lo; \
      while (a < mid && b < hi) { \
        K x = key[idx[b]], y = key[idx[a]]; \
        int before = desc ? (x > y || (NANS && x != x && y == y)) : (x < y || (NANS && y != y && x == x)); \
        tmp[o++] = before ? idx[b++] : idx[a++]; } \
      while (a < mid) tmp[o++] = idx[a++]; \
      while (b < hi) tmp[o++] = idx[b++]; } \
    int32_t* t = idx; idx = tmp; tmp = t; \
    if (2 * w >= n) { memcpy(tmp, idx, n * sizeof(int32_t)); } } }
TJX_SORT(double, d, 1)
TJX_SORT(int64_t, i, 0)
TJX_SORT(uint64_t, u, 0)
"""

# the runtime picks the thread count (runtime.thread_count) and sets it here; OpenMP itself is process-wide
SET_THREADS = """int tjx_set_threads(int n) {
#ifdef _OPENMP
  if (n > 0) omp_set_num_threads(n);
  return omp_get_max_threads();
#else
  return 1;
#endif
}
"""

UNARY_F = {Ops.EXP: 'exp', Ops.LOG: 'log', Ops.EXPM1: 'expm1', Ops.LOG1P: 'log1p', Ops.SIN: 'sin', Ops.COS: 'cos',
           Ops.TAN: 'tan', Ops.ASIN: 'asin', Ops.ACOS: 'acos', Ops.ATAN: 'atan', Ops.SINH: 'sinh', Ops.COSH: 'cosh',
           Ops.TANH: 'tanh', Ops.SQRT: 'sqrt', Ops.FLOOR: 'floor', Ops.CEIL: 'ceil', Ops.ROUND: 'rint',
           Ops.TRUNC: 'trunc', Ops.ABS: 'fabs'}
INFIX = {Ops.ADD: '+', Ops.SUB: '-', Ops.MUL: '*', Ops.AND: '&', Ops.OR: '|', Ops.XOR: '^', Ops.CMPLT: '<',
         Ops.CMPLE: '<=', Ops.CMPEQ: '==', Ops.CMPNE: '!='}
FAST_F32 = {Ops.EXP: 'exp', Ops.LOG: 'log', Ops.TANH: 'tanh'}
NARROW = {dtypes.bool_, dtypes.int8, dtypes.int16, dtypes.uint8, dtypes.uint16}

PACK_CACHE = 1 << 19          # bytes of a packed operand that stay in cache while the other side streams past
KC_TARGET = 256               # contraction rows per chunk of a long contraction
SPLIT_GROUPS = 16             # groups of chunks of a split contraction (fixed: results never depend on threads)
SIZES = {dtypes.float32: 4, dtypes.float64: 8}

def _flat(vars_: list) -> UOp:
  """The flat (row-major) index over loop variables `vars_`: affine, sum of var * stride."""
  out, stride = sym.const(0), 1
  for v in reversed(vars_):
    out, stride = sym.add(out, sym.mul(v, stride)), stride * v.arg[1]
  return out

def c_float(v: float, dt) -> str:
  if math.isnan(v): return 'NAN'
  if math.isinf(v): return 'INFINITY' if v > 0 else '(-INFINITY)'
  return repr(float(v)) + ('' if dt is dtypes.float64 else 'f')

def c_int(v: int, dt) -> str:
  lo = -(1 << (8 * dt.itemsize - 1))
  if dt.kind == 'i' and v == lo: return f"({TYPES[dt]})({v + 1}LL-1)"
  if dt.itemsize == 8: return f"{v}{'ULL' if dt.kind == 'u' else 'LL'}"
  if dt.kind == 'u' and dt.itemsize == 4: return f"{v}u"
  return str(v)

class Scope:
  """A C block being rendered: its lines, where hoisted temporaries go, and what it defines."""
  def __init__(self, lines: list, pad: str, defines: set | None = None):
    self.lines, self.pad, self.defines, self.cache, self.hoist = lines, pad, set(defines or ()), {}, len(lines)

class CRenderer:
  """C for the CPU device (OpenMP for the parallel loop)."""
  kernel_prefix = "static void"
  buffer_qualifier = "restrict"
  type_names = TYPES
  prelude_extra = ""

  def parallel_for(self, loop: Loop) -> str: return "#pragma omp parallel for schedule(static)"

  # --- program ---
  def render(self, kernels: list[Kernel], entries: list[list[int]]) -> str:
    """One translation unit: the prelude, the kernels, and an entry per group of kernel indices.

    >>> from tinyjx.lower.index import build_kernel
    >>> x = UOp(Ops.PARAM, dtypes.float32, (), (0, (4,), 0))
    >>> y = UOp(Ops.SQRT, dtypes.float32, (x,))
    >>> src = CRenderer().render([build_kernel("k0", [y], {x: 0, y: 1})], [[0]])
    >>> print(src[src.index("static void k0"):src.index("void tjx_run_0")].strip())
    static void k0(const float* restrict b0, float* restrict b1) {
      for (int64_t i0 = 0; i0 < 4; i0++) {
        b1[i0] = sqrtf(b0[i0]);
      }
    }
    """
    parts = [PRELUDE, self.prelude_extra]
    parts += [self.kernel(k) for k in kernels]
    for e, group in enumerate(entries):
      calls = "".join(f"  {kernels[i].name}({self.call_args(kernels[i])});\n" for i in group)
      parts.append(f"void tjx_run_{e}(void **a) {{\n{calls}}}\n")
    for i, k in enumerate(kernels):
      parts.append(f"void tjx_kernel_{i}(void **a) {{ {k.name}({self.call_args(k)}); }}\n")
    parts.append(SET_THREADS)
    return "\n".join(parts)

  def call_args(self, k: Kernel) -> str:
    return ", ".join(f"({self.ptr_type(g, g.arg in k.outs)})a[{g.arg}]" for g in k.args)

  def ptr_type(self, g: UOp, written: bool) -> str:
    return f"{'' if written else 'const '}{self.type_names[g.dtype]}*"

  # --- kernels ---
  def kernel(self, k: Kernel) -> str:
    self.uses = _count_uses(k.body)
    self.written = {g.arg for g in k.args if g.arg in k.outs}
    self.deps: dict = {}
    self.depth: dict = {}
    self.ntmp = 0
    params = ", ".join(f"{self.ptr_type(g, g.arg in k.outs)} {self.buffer_qualifier} b{g.arg}" for g in k.args)
    lines = [f"{self.kernel_prefix} {k.name}({params}) {{"]
    self.scopes: list[Scope] = [Scope(lines, "  ")]
    self.block(k.body, lines, 1)
    lines.append("}")
    return "\n".join(lines) + "\n"

  def block(self, stmts: list, lines: list, depth: int) -> None:
    for s in stmts:
      self.scopes[-1].hoist = len(self.scopes[-1].lines)   # invariant temporaries of inner loops go here
      self.stmt(s, lines, depth)

  def stmt(self, s, lines: list, depth: int) -> None:
    pad = "  " * depth
    if isinstance(s, Loop):
      if s.parallel: lines.append(self.parallel_for(s))
      elif s.acc is not None and (pragma := self.simd_reduction(s)): lines.append(pragma)
      v = self.name(s.var)
      lines.append(f"{pad}for (int64_t {v} = 0; {v} < {s.size}; {v}++) {{")
      self.scopes.append(Scope(lines, pad + "  ", {s.var} | ({s.acc} if s.acc is not None else set())))
      self.block(s.body, lines, depth + 1)
      self.scopes.pop()
      lines.append(f"{pad}}}")
    elif isinstance(s, Decl):
      self.scopes[-1].defines.add(s.acc)
      t, name = self.type_names[s.acc.dtype], self.name(s.acc)
      init = self.const(identity(s.acc.arg[1], s.acc.dtype), s.acc.dtype)
      if not s.size: lines.append(f"{pad}{t} {name} = {init};")
      else: lines.append(f"{pad}{t} {name}[{s.size}]; for (int64_t z = 0; z < {s.size}; z++) {name}[z] = {init};")
    elif isinstance(s, Update):
      v = self.expr(s.value)
      ref = self.name(s.acc) if s.at is None else f"{self.name(s.acc)}[{self.expr(s.at)}]"
      lines.append(f"{pad}{ref} = {self.binary(s.acc.arg[1], s.acc.dtype, ref, v)};")
    elif isinstance(s, Store):
      idx, v = self.expr(s.idx), self.expr(s.value)
      if s.valid.op is Ops.CONST and not s.valid.arg[0]: return      # a store that never happens
      if s.valid.op is Ops.CONST: lines.append(f"{pad}b{s.buf.arg}[{idx}] = {v};")
      else: lines.append(f"{pad}if ({self.expr(s.valid)}) b{s.buf.arg}[{idx}] = {v};")
    elif isinstance(s, Local):
      self.scopes[-1].defines.add(s.acc)
      lines.append(f"{pad}{self.type_names[s.acc.dtype]} {self.name(s.acc)}[{s.size}];")
    elif isinstance(s, Assign):
      at, v = self.expr(s.at), self.expr(s.value)
      lines.append(f"{pad}{self.name(s.acc)}[{at}] = {v};")
    elif isinstance(s, Sort): self.sort(s, lines, pad)
    elif isinstance(s, Matmul): self.matmul(s, lines, pad)
    else: self.custom(s, lines, depth)

  def custom(self, s, lines: list, depth: int) -> None:
    raise NotImplementedError(f"no C rendering for statement {type(s).__name__}")

  def simd_reduction(self, loop: Loop) -> str:
    """Lets the compiler reorder a float reduction into vector lanes (numpy's own sums are not sequential either)."""
    acc = loop.acc
    if acc.dtype not in (dtypes.float32, dtypes.float64) or not all(isinstance(s, (Update, Assign)) for s in loop.body):
      return ""
    if acc.arg[1] in (Ops.ADD, Ops.MUL): op = '+' if acc.arg[1] is Ops.ADD else '*'
    else: op = f"tjx_{acc.arg[1].name.lower()}_{SUFFIX[acc.dtype]}"
    return f"#pragma omp simd reduction({op}:{self.name(acc)})"

  def sort(self, s: Sort, lines: list, pad: str) -> None:
    shape, ax = s.shape, s.axis
    n, inner = shape[ax], math.prod(shape[ax + 1:])
    rows = math.prod(shape) // max(n, 1)
    kind = 'd' if s.src.dtype.kind == 'f' else ('u' if s.src.dtype.kind == 'u' else 'i')
    key_t = {'d': 'double', 'u': 'uint64_t', 'i': 'int64_t'}[kind]
    val = f"b{s.src.arg}[base + j * {inner}]"
    if s.src.dtype is dtypes.float16: val = f"TJX_H2F({val})"
    lines += [f"{pad}if ({n} > 0) {{",
              f"#pragma omp parallel if({int(rows > 1 and rows * n > 4096)})",
              f"{pad}{{",
              f"{pad}  {key_t}* key = malloc({n} * sizeof({key_t}));",
              f"{pad}  int32_t* idx = malloc({2 * n} * sizeof(int32_t));",
              "#pragma omp for",
              f"{pad}  for (int64_t r = 0; r < {rows}; r++) {{",
              f"{pad}    int64_t base = (r / {inner}) * {n * inner} + r % {inner};",
              f"{pad}    for (int64_t j = 0; j < {n}; j++) {{ key[j] = ({key_t}){val}; idx[j] = (int32_t)j; }}",
              f"{pad}    tjx_sort_{kind}(key, idx, idx + {n}, {n}, {int(s.descending)});",
              f"{pad}    for (int64_t j = 0; j < {n}; j++) b{s.out.arg}[base + j * {inner}] = idx[j];",
              f"{pad}  }}",
              f"{pad}  free(key); free(idx);",
              f"{pad}}}}}"]

  def scoped(self, fn, pad: str) -> list:
    """Lines rendered by `fn(lines)` in a scope of their own (its temporaries do not leak out)."""
    out: list = []
    self.scopes.append(Scope(out, pad))
    fn(out)
    self.scopes.pop()
    return out

  def pack_panel(self, s: Matmul, which: str, lines: list, pad: str, chunk: bool = False) -> None:
    """Pack one panel (block `bb` of MR rows of x, or NR columns of y) at `dst`: dst[k * MR + r] = x(row, k),
    zeros past the last row. Row-outer (each row's loop variables recovered once, then the kernel's own
    contraction loops, so a view's index arithmetic stays affine) unless the operand runs along its single row
    variable: then contraction-outer, so both the reads and the writes stay in order. With `chunk`, only the
    contraction rows of the current chunk: the outermost contraction variable runs over [c0, c1) and k counts
    from k0 (C variables of the chunk loop)."""
    x, rows, n, blk, k_inner = ((s.x, s.ivars, s.m, 'TJX_MR', s.x_k_inner) if which == 'a' else
                                (s.y, s.jvars, s.n, f"TJX_NR_{SUFFIX[s.dtype].upper()}", s.y_k_inner))
    klen = "kn" if chunk else "K"
    flat_k = lambda: self.expr(_flat(s.kvars)) + (" - k0" if chunk else "")
    def nest(vars_, p, body):
      for d, v in enumerate(vars_):
        lo, hi = ("c0", "c1") if chunk and d == 0 and vars_ is s.kvars else ("0", v.arg[1])
        lines.append(f"{p}for (int64_t {self.name(v)} = {lo}; {self.name(v)} < {hi}; {self.name(v)}++) {{")
        p += "  "
        self.scopes.append(Scope(lines, p, {v}))
      body(p)
      for _ in vars_:
        self.scopes.pop()
        p = p[:-2]
        lines.append(f"{p}}}")
    if k_inner or len(rows) > 1:
      sizes = [v.arg[1] for v in rows]
      lines += [f"{pad}for (int64_t q = 0; q < {blk}; q++) {{", f"{pad}  const int64_t r = bb * {blk} + q;",
                f"{pad}  if (r >= {n}) {{ for (int64_t k = 0; k < {klen}; k++) dst[k * {blk} + q] = 0; continue; }}"]
      for d, v in enumerate(rows):
        stride, part = math.prod(sizes[d + 1:]), "r"
        if stride > 1: part = f"(r / {stride})"
        if d > 0: part = f"({part} % {sizes[d]})"
        lines.append(f"{pad}  const int64_t {self.name(v)} = {part};")
      self.scopes.append(Scope(lines, pad + "  ", set(rows)))
      nest(s.kvars, pad + "  ", lambda p: lines.append(
        f"{p}dst[({flat_k()}) * {blk} + q] = {self.expr(x)};"))
      self.scopes.pop()
      lines.append(f"{pad}}}")
      return
    def body(p):
      k = f"({flat_k()})"
      lines.append(f"{p}for (int64_t q = 0; q < {blk}; q++) {{")
      lines.append(f"{p}  const int64_t {self.name(rows[0])} = bb * {blk} + q;")
      self.scopes.append(Scope(lines, p + "  ", set(rows)))
      lines.append(f"{p}  if ({self.name(rows[0])} < {n}) dst[{k} * {blk} + q] = {self.expr(x)};")
      lines.append(f"{p}  else dst[{k} * {blk} + q] = 0;")
      self.scopes.pop()
      lines.append(f"{p}}}")
    nest(s.kvars, pad, body)

  def matmul(self, s: Matmul, lines: list, pad: str) -> None:
    """One side is packed whole first; the other is packed a panel at a time inside the parallel loop over its
    blocks, right before the micro-kernel runs that panel against every block of the first (the panel stays
    in cache, and no buffer the size of the big operand is ever written). The whole side is x unless x is
    big and y fits in cache. A long contraction runs in chunks of the outermost contraction variable (about
    KC_TARGET rows each) so the whole side's rows of one chunk stay in cache while every panel chunk passes;
    the results then accumulate in a per-thread row of tiles until the last chunk."""
    t, nr = self.type_names[s.dtype], f"TJX_NR_{SUFFIX[s.dtype].upper()}"
    size = SIZES[s.dtype]
    panels_of_x = s.m * s.k * size > PACK_CACHE and s.n * s.k * size <= PACK_CACHE
    whole, part = ('b', 'a') if panels_of_x else ('a', 'b')
    wbuf, wblk, pblk = ('pb', nr, 'TJX_MR') if panels_of_x else ('pa', 'TJX_MR', nr)
    p2, p3 = pad + "    ", pad + "      "
    nblocks, other = ('MB', 'NB') if panels_of_x else ('NB', 'MB')
    outer, inner = s.kvars[0].arg[1], s.k // s.kvars[0].arg[1]
    whole_rows = s.n if panels_of_x else s.m
    chunked = s.k > 2 * KC_TARGET and outer > 1 and (whole_rows + 16) * 32 * size <= PACK_CACHE
    per = max(1, KC_TARGET // inner) if chunked else outer
    per = -(-outer // -(-outer // per))          # the same number of chunks, of even sizes
    panel_rows = s.m if panels_of_x else s.n
    # few panels but a long contraction (a weight gradient): the chunks themselves are the parallel work
    split = chunked and -(-panel_rows // 32) < 4 and -(-outer // per) >= 4 * SPLIT_GROUPS
    ib, jb = ("bb", "sb") if panels_of_x else ("sb", "bb")
    tile = "cl + sb * TJX_MR * {}".format(nr) if chunked else "c"
    wptr = f"{wbuf} + sb * {wblk} * K" + (f" + k0 * {wblk}" if chunked else "")
    a_ptr, b_ptr = ("panel", wptr) if panels_of_x else (wptr, "panel")
    store = self.scoped(lambda out: self.stmt(s.store, out, len(p3) // 2 + 2), p3 + "    ")
    lines += [f"{pad}{{",
              f"{pad}  const int64_t M = {s.m}, N = {s.n}, K = {s.k};",
              f"{pad}  const int64_t NB = (N + {nr} - 1) / {nr}, MB = (M + TJX_MR - 1) / TJX_MR;",
              f"{pad}  {t}* {wbuf} = tjx_alloc({'MB' if wbuf == 'pa' else 'NB'} * {wblk} * K * sizeof({t}));",
              *([f"{pad}  {t}* parts = tjx_alloc({SPLIT_GROUPS} * MB * NB * TJX_MR * {nr} * sizeof({t}));"]
                if split else []),
              f"#pragma omp parallel if({int(s.parallel)})",
              f"{pad}  {{"]
    lines += ["#pragma omp for schedule(static)", f"{pad}  for (int64_t bb = 0; bb < {other}; bb++) {{",
              f"{p2}{t}* dst = {wbuf} + bb * {wblk} * K;"]
    self.pack_panel(s, whole, lines, p2)
    lines += [f"{pad}  }}",
              f"{pad}  {t}* panel = tjx_alloc({pblk} * {per * inner} * sizeof({t}));"]
    chunk = (outer, per, inner)
    if split:
      self.split_k(s, lines, pad, part, a_ptr, b_ptr, nr, t, chunk, store, ib, jb)
      return
    if chunked: lines.append(f"{pad}  {t}* cl = tjx_alloc({other} * TJX_MR * {nr} * sizeof({t}));")
    lines += ["#pragma omp for schedule(static)",
              f"{pad}  for (int64_t bb = 0; bb < {nblocks}; bb++) {{", f"{p2}{t}* dst = panel;"]
    if chunked:
      lines.append(f"{p2}for (int64_t cc = 0; cc < {-(-outer // per)}; cc++) {{")
      self.chunk_panel(s, part, lines, p2 + "  ", chunk)
      lines += [f"{p2}  for (int64_t sb = 0; sb < {other}; sb++)",
                f"{p2}    tjx_mm_{SUFFIX[s.dtype]}(kn, {a_ptr}, {b_ptr}, {tile}, cc > 0);",
                f"{p2}}}"]
    else:
      self.pack_panel(s, part, lines, p2)
    lines += [f"{p2}for (int64_t sb = 0; sb < {other}; sb++) {{"]
    if chunked: lines.append(f"{p3}const {t}* c = {tile};")
    else: lines += [f"{p3}{t} c[TJX_MR * {nr}] __attribute__((aligned(64)));",
                    f"{p3}tjx_mm_{SUFFIX[s.dtype]}(K, {a_ptr}, {b_ptr}, c, 0);"]
    self.tile_store(lines, p3, ib, jb, nr, t, store)
    lines += [f"{p2}}}", f"{pad}  }}", f"{pad}  free(panel);"]
    if chunked: lines.append(f"{pad}  free(cl);")
    lines += [f"{pad}  }}", f"{pad}  free({wbuf});", f"{pad}}}"]

  def chunk_panel(self, s: Matmul, part: str, lines: list, p: str, chunk: tuple) -> None:
    """Inside a loop over chunk `cc`: its bounds (outer contraction variable in [c0, c1), k from k0, kn rows)
    and its panel."""
    outer, per, inner = chunk
    lines += [f"{p}const int64_t c0 = cc * {per}, c1 = c0 + {per} < {outer} ? c0 + {per} : {outer};",
              f"{p}const int64_t k0 = c0 * {inner}, kn = (c1 - c0) * {inner};"]
    self.pack_panel(s, part, lines, p, chunk=True)

  def tile_store(self, lines: list, p: str, ib: str, jb: str, nr: str, t: str, store: list) -> None:
    """The epilogue of one result tile `c` (block ib of rows, jb of columns): `store` for each element in range."""
    lines += [f"{p}const int64_t rows = M - {ib} * TJX_MR < TJX_MR ? M - {ib} * TJX_MR : TJX_MR;",
              f"{p}const int64_t cols = N - {jb} * {nr} < {nr} ? N - {jb} * {nr} : {nr};",
              f"{p}for (int64_t r = 0; r < rows; r++) {{",
              f"{p}  const int64_t i = {ib} * TJX_MR + r;",
              f"{p}  for (int64_t q = 0; q < cols; q++) {{",
              f"{p}    const int64_t j = {jb} * {nr} + q;",
              f"{p}    const {t} cv = c[r * {nr} + q];", *store,
              f"{p}  }}", f"{p}}}"]

  def split_k(self, s: Matmul, lines, pad, part, a_ptr, b_ptr, nr, t, chunk, store, ib, jb) -> None:
    """The split-contraction matmul: SPLIT_GROUPS fixed groups of chunks run in parallel, each into its own
    row of tiles; the groups are then added in order, so the result does not depend on the thread count."""
    p2 = pad + "    "
    nblocks, other = ('MB', 'NB') if part == 'a' else ('NB', 'MB')
    g, (outer, per, _) = SPLIT_GROUPS, chunk
    lines += ["#pragma omp for schedule(static)",
              f"{pad}  for (int64_t g = 0; g < {g}; g++) {{",
              f"{p2}{t}* dst = panel;",
              f"{p2}const int64_t nc = {-(-outer // per)}, g0 = g * nc / {g}, g1 = (g + 1) * nc / {g};",
              f"{p2}for (int64_t bb = 0; bb < {nblocks}; bb++) for (int64_t cc = g0; cc < g1; cc++) {{"]
    self.chunk_panel(s, part, lines, p2 + "  ", chunk)
    tile = f"parts + ((g * {nblocks} + bb) * {other} + sb) * TJX_MR * {nr}"
    lines += [f"{p2}  for (int64_t sb = 0; sb < {other}; sb++)",
              f"{p2}    tjx_mm_{SUFFIX[s.dtype]}(kn, {a_ptr}, {b_ptr}, {tile}, cc > g0);",
              f"{p2}}}",
              f"{pad}  }}",
              "#pragma omp for schedule(static)",
              f"{pad}  for (int64_t bs = 0; bs < {nblocks} * {other}; bs++) {{",
              f"{p2}const int64_t bb = bs / {other}, sb = bs % {other};",
              f"{p2}{t} c[TJX_MR * {nr}] __attribute__((aligned(64)));",
              f"{p2}memcpy(c, parts + bs * TJX_MR * {nr}, sizeof c);",
              f"{p2}for (int64_t g = 1; g < {g}; g++) for (int64_t z = 0; z < TJX_MR * {nr}; z++) "
              f"c[z] += parts[(g * {nblocks} * {other} + bs) * TJX_MR * {nr} + z];"]
    self.tile_store(lines, p2, ib, jb, nr, t, store)
    lines += [f"{pad}  }}", f"{pad}  free(panel);", f"{pad}  }}", f"{pad}  free(parts);"]
    lines.append(f"{pad}  free({'pb' if part == 'a' else 'pa'});")
    lines.append(f"{pad}}}")

  # --- expressions ---
  def name(self, u: UOp) -> str:
    if u.op is Ops.RANGE: return f"i{u.arg[0]}"
    if u.op is Ops.DEFINE_ACC: return f"acc{u.arg[0]}"
    if u.op is Ops.SPECIAL: return u.arg[0]
    raise ValueError(f"{u.op} has no name")

  def cached(self, u: UOp) -> str | None:
    for scope in reversed(self.scopes):
      if u in scope.cache: return scope.cache[u]
    return None

  def expr(self, u: UOp) -> str:
    """C text for `u`; a node used twice, or invariant in the current loop, becomes a temporary in the
    outermost scope where everything it reads is defined (loop-invariant code motion). Sources are rendered
    first, by a loop, so deep expressions need no deep recursion; every 32 levels of inline text a
    temporary keeps the C expressions short."""
    if (text := self.cached(u)) is not None: return text
    for n in toposort([u]):
      if n.op is not Ops.DEFINE_GLOBAL and self.cached(n) is None: self.render_one(n)
    return self.cached(u)

  def render_one(self, u: UOp) -> None:
    home = self.home(u)
    text = self.render_node(u)
    self.depth[u] = 1 + max((self.depth.get(s, 0) for s in u.src), default=0)
    inner = home < len(self.scopes) - 1
    if (self.uses.get(u, 0) > 1 or inner or self.depth[u] > 32) and \
       u.op not in (Ops.CONST, Ops.RANGE, Ops.DEFINE_ACC, Ops.SPECIAL, Ops.DEFINE_GLOBAL):
      tmp = f"t{self.ntmp}"
      self.ntmp += 1
      self.emit(home, f"const {self.type_names.get(u.dtype, 'int64_t')} {tmp} = {text};")
      text = tmp
      self.depth[u] = 0
    self.scopes[home].cache[u] = text

  def emit(self, home: int, line: str) -> None:
    sc = self.scopes[home]
    if home == len(self.scopes) - 1:
      sc.lines.append(sc.pad + line)
      return
    sc.lines.insert(sc.hoist, sc.pad + line)
    for deeper in self.scopes[home:]:
      if deeper.lines is sc.lines and deeper.hoist >= sc.hoist and deeper is not sc: deeper.hoist += 1
    sc.hoist += 1

  def home(self, u: UOp) -> int:
    """The index of the innermost scope that defines something `u` reads."""
    deps = self.dependencies(u)
    for i in range(len(self.scopes) - 1, -1, -1):
      if deps & self.scopes[i].defines or None in deps and i == len(self.scopes) - 1: return i
    return 0

  def dependencies(self, u: UOp) -> frozenset:
    """Loop variables and accumulators below `u`; None stands for what must stay where it is used (template
    variables, loads from a buffer this kernel writes)."""
    if u in self.deps: return self.deps[u]
    for n in (toposort([u]) if any(s not in self.deps for s in u.src) else [u]):
      if n in self.deps: continue
      if n.op in (Ops.RANGE, Ops.DEFINE_ACC): d = frozenset({n})
      elif n.op is Ops.SPECIAL or (n.op is Ops.LOAD and n.src[0].arg in self.written): d = frozenset({None})
      else: d = frozenset().union(*[self.deps[s] for s in n.src])
      self.deps[n] = d
    return self.deps[u]

  def render_node(self, u: UOp) -> str:
    if u.op in (Ops.RANGE, Ops.DEFINE_ACC, Ops.SPECIAL): return self.name(u)
    if u.op is Ops.CONST: return self.const(u.arg[0], u.dtype)
    if u.op is Ops.INDEX: return f"{self.name(u.src[0])}[{self.expr(u.src[1])}]"
    if u.op is Ops.LOAD:
      src = [self.expr(s) for s in u.src[1:]]
      ref = f"b{u.src[0].arg}[{src[0]}]"
      if len(src) == 1: return ref
      # a masked load reads either the element or a static zero, always: as `c ? b[i] : 0` GCC 12 if-converts
      # it into a masked AVX load and, in short rows, gives it its neighbour's mask (found by the random
      # graph test with padding)
      return f"(*({src[1]} ? &{ref} : (const {self.type_names[u.src[0].dtype]}*)tjx_zero))"
    src = [self.expr(s) for s in u.src]
    if u.op is Ops.WHERE: return f"({src[0]} ? {src[1]} : {src[2]})"
    if u.op is Ops.CAST: return self.cast(u.src[0].dtype, u.dtype, src[0])
    if u.op is Ops.BITCAST:
      return f"((union {{ {self.type_names[u.src[0].dtype]} a; {self.type_names[u.dtype]} b; }}){{ .a = {src[0]} }}).b"
    if len(src) == 1: return self.unary(u.op, u.dtype, src[0])
    if u.op in (Ops.SHL, Ops.SHR): return f"tjx_{u.op.name.lower()}_{SUFFIX[u.dtype]}({src[0]}, (int64_t)({src[1]}))"
    return self.binary(u.op, u.src[0].dtype if u.op in INFIX and u.dtype is dtypes.bool_ else u.dtype, *src, u=u)

  def const(self, v, dt) -> str:
    if dt.kind == 'b': return '1' if v else '0'
    if dt is dtypes.float16: return f"TJX_F2H({c_float(float(v), dtypes.float32)})"
    if dt.kind == 'f': return c_float(float(v), dt)
    return c_int(int(v), dt)

  def cast(self, src, dst, x: str) -> str:
    if dst.kind == 'b': return f"({x} != 0)"
    if src is dtypes.float16: x, src = f"TJX_H2F({x})", dtypes.float32
    if dst is dtypes.float16: return f"TJX_F2H({x})"
    if dst is dtypes.bfloat16: return f"tjx_bf16((float)({x}))"
    if src.kind == 'f' and dst.kind in 'iu': return f"tjx_f2i_{SUFFIX[dst]}({x})"
    return f"(({self.type_names[dst]})({x}))"

  def unary(self, op: Ops, dt, x: str) -> str:
    t, sfx = self.type_names[dt], SUFFIX.get(dt, '')
    if dt.kind == 'f':
      f = 'f' if dt is not dtypes.float64 else ''
      if op is Ops.NEG: return f"(-{x})"
      if op is Ops.RECIP: return f"({self.const(1, dt)} / {x})"
      if op is Ops.SIGN: return f"tjx_sign_{sfx}({x})"
      if op is Ops.ERF: return f"(({t})erf((double)({x})))"
      if op in FAST_F32 and dt is dtypes.float32: return f"tjx_{FAST_F32[op]}_f32({x})"
      return f"{UNARY_F[op]}{f}({x})"
    if op is Ops.NEG: return f"(({t})(0 - {x}))" if dt.kind == 'u' else f"(({t})(-{x}))"
    if op is Ops.NOT: return f"(!{x})" if dt.kind == 'b' else f"(({t})(~{x}))"
    if op is Ops.ABS: return x if dt.kind in 'ub' else f"tjx_abs_{sfx}({x})"
    if op is Ops.SIGN: return f"(({t})(({x}) > 0) - ({t})(({x}) < 0))" if dt.kind == 'i' else f"(({t})(({x}) > 0))"
    raise NotImplementedError(f"no C rendering for {op.name} on {dt}")

  def binary(self, op: Ops, dt, a: str, b: str, u: UOp | None = None) -> str:
    t, sfx = self.type_names[dt], SUFFIX.get(dt, '')
    if dt is dtypes.bool_ and op in (Ops.ADD, Ops.MAX): op = Ops.OR
    if dt is dtypes.bool_ and op in (Ops.MUL, Ops.MIN): op = Ops.AND
    if op in INFIX:
      out = f"({a} {INFIX[op]} {b})"
      return f"(({t})({a} {INFIX[op]} {b}))" if dt in NARROW and u is not None and u.dtype is not dtypes.bool_ else out
    if op in (Ops.MAX, Ops.MIN): return f"tjx_{op.name.lower()}_{sfx}({a}, {b})"
    if dt.kind == 'f':
      f = '' if dt is dtypes.float64 else 'f'
      if op is Ops.DIV: return f"({a} / {b})"
      if op is Ops.REM: return f"fmod{f}({a}, {b})"
      if op is Ops.POW: return f"pow{f}({a}, {b})"
      if op is Ops.ATAN2: return f"atan2{f}({a}, {b})"
    if op in (Ops.DIV, Ops.REM) and u is not None and _positive_const(u.src[1]):
      return f"({a} {'/' if op is Ops.DIV else '%'} {b})"
    if op in (Ops.DIV, Ops.REM, Ops.POW): return f"tjx_{op.name.lower()}_{sfx}({a}, {b})"
    raise NotImplementedError(f"no C rendering for {op.name} on {dt}")

def _positive_const(u: UOp) -> bool: return u.op is Ops.CONST and u.arg[0] > 0

def _count_uses(stmts: list) -> dict:
  """How many parents each expression node has across a kernel (a node used twice becomes a temporary)."""
  roots = []
  def walk(ss):
    for s in ss:
      if isinstance(s, Loop): walk(s.body)
      elif isinstance(s, Update): roots.extend([s.value] + ([s.at] if s.at is not None else []))
      elif isinstance(s, Assign): roots.extend([s.value, s.at])
      elif isinstance(s, Store): roots.extend([s.idx, s.value, s.valid])
      elif isinstance(s, Matmul): roots.extend([s.x, s.y, s.store.idx, s.store.value, s.store.valid])
  walk(stmts)
  uses: dict = {}
  for r in roots: uses[r] = uses.get(r, 0) + 1          # a statement reading a node is a use too
  for n in toposort(roots):
    for s in n.src: uses[s] = uses.get(s, 0) + 1
  # A load inside an arm of a select becomes a temporary, read whatever the condition (an unmasked load is in
  # bounds, a masked one reads a static zero when masked off): in the arm, GCC 12 if-converts it into a
  # masked AVX load and, in short unrolled rows, gives it the mask of its neighbour (`c ? 0.0 : b[i]` over
  # rows of 3 doubles read zeros; found by the compiled pass of the suites and the random graph test).
  in_arm: set = set()
  for n in reversed(toposort(roots)):          # users before their sources: one pass marks every arm's nodes
    if n.op is Ops.WHERE: in_arm.update(n.src[1:])
    if n in in_arm: in_arm.update(n.src)
  for n in in_arm:
    if n.op is Ops.LOAD: uses[n] = uses.get(n, 0) + 1
  return uses
