"""prelude: the C runtime every generated translation unit starts with, in pieces a dialect can reuse.

The pieces give the PYTHON device's exact semantics where C's differ: integer division and remainder by zero and of
INT_MIN by -1, shifts past the width, saturating float-to-int casts, NaN-propagating max/min, bfloat16 rounding and
float16 conversion (in software where the compiler has no _Float16), numpy's sort order. `PORTABLE` is plain C that
OpenCL C accepts too (a dialect adds its own typedefs); the rest is for the CPU's C compiler: headers, OpenMP
reductions, the float32 exp/log/log1p/expm1/tanh/erf functions (`FAST_F32`), the matmul micro-kernel macro (sized
by the plan, instantiated by the renderer) and the merge sort. `SET_THREADS` is the entry the CPU device sets
OpenMP's thread count through.
"""
from tinyjx.uop import Ops

# the ops whose float32 form is FAST_MATH's `tjx_<name>_f32` (a dialect maps each name to its own library's)
FAST_F32 = {Ops.EXP: 'exp', Ops.LOG: 'log', Ops.LOG1P: 'log1p', Ops.EXPM1: 'expm1', Ops.TANH: 'tanh', Ops.ERF: 'erf'}

# float16 <-> float in software, for compilers without a half type; `tjx_u32_as_f32` is the dialect's bit cast
SOFT_HALF = r"""static inline float TJX_H2F(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, b;
  if (e == 0x1f) b = s | 0x7f800000u | (m << 13);
  else if (e) b = s | ((e + 112) << 23) | (m << 13);
  else { float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; }
  return tjx_u32_as_f32(b);
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
"""

HEADERS = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
/* GCC (12 at least) miscompiles some loop nests whose short inner loop it unrolls completely and whose outer loop
   it then vectorizes (a pad, a hypot and a where fused in one kernel lost rows; found by tests/test_fuzz.py; and a
   sum the outer loop carries became a chain of in-order sums of strided, selected terms, vectorized wrongly: a
   strided convolution's ReLU gradient, found by tests/test_contraction_fuzz.py). Short elementwise inner loops
   (also those around loops of one iteration), and short sums whose accumulator the outer loop carries, keep their
   loop: then the outer one is not vectorized. */
/* GCC 12's vectorizer also indexes a load with a compare's mask (-1) where the index is a bool made 0 or 1
   (`a[(v > a[0]).astype(int)]` read a[-1]: a wrong value, out of bounds). Such an index goes through an empty asm
   statement, which GCC cannot look through: that loop stays scalar, and right. */
#if defined(__GNUC__)
static inline int64_t tjx_opaque_index(int64_t i) { __asm__("" : "+r"(i)); return i; }
#else
static inline int64_t tjx_opaque_index(int64_t i) { return i; }
#endif
#if defined(__GNUC__) && !defined(__clang__)
#define TJX_KEEP_LOOP _Pragma("GCC unroll 1")
#else
#define TJX_KEEP_LOOP
#endif
#ifdef __FLT16_MANT_DIG__
typedef _Float16 half;
#define TJX_H2F(x) ((float)(x))
#define TJX_F2H(x) ((half)(x))
#else
typedef uint16_t half;
static inline float tjx_u32_as_f32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
""" + SOFT_HALF + """#endif
"""

BF16 = r"""static inline float tjx_bf16(float x) {
  if (x != x) return x;
  uint32_t b; memcpy(&b, &x, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &b, 4); return x;
}
"""

FLOAT_OPS = r"""/* NaN-propagating max/min as two selects, not `a > b || a != a` (GCC branches on that ||: a relu or
   a max pool of random-signed data then mispredicts half the time, 4-8x slower) */
#define TJX_FLOAT_OPS(T, N, ONE) \
static inline T tjx_max_##N(T a, T b) { T m = a > b ? a : b; return a != a ? a : m; } \
static inline T tjx_min_##N(T a, T b) { T m = a < b ? a : b; return a != a ? a : m; } \
static inline T tjx_sign_##N(T x) { return x > 0 ? ONE : (x < 0 ? -ONE : (x == 0 ? (T)0 : x)); }
TJX_FLOAT_OPS(float, f32, 1.0f)
TJX_FLOAT_OPS(double, f64, 1.0)
"""

OMP_REDUCTIONS = r"""/* NaN-propagating max/min as OpenMP reductions, so `omp simd` may vectorize them */
#pragma omp declare reduction(tjx_max_f32 : float : omp_out = tjx_max_f32(omp_out, omp_in)) \
  initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(tjx_min_f32 : float : omp_out = tjx_min_f32(omp_out, omp_in)) \
  initializer(omp_priv = INFINITY)
#pragma omp declare reduction(tjx_max_f64 : double : omp_out = tjx_max_f64(omp_out, omp_in)) \
  initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(tjx_min_f64 : double : omp_out = tjx_min_f64(omp_out, omp_in)) \
  initializer(omp_priv = INFINITY)
/* max/min that let a NaN fall out, for a reduction that keeps a NaN flag of its own beside them (render.py
   `simd_reduction`): one compare-and-select on the loop's chain of dependent vector ops instead of three */
#pragma omp declare reduction(tjx_fmax_f32 : float : omp_out = omp_out > omp_in ? omp_out : omp_in) \
  initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(tjx_fmin_f32 : float : omp_out = omp_out < omp_in ? omp_out : omp_in) \
  initializer(omp_priv = INFINITY)
#pragma omp declare reduction(tjx_fmax_f64 : double : omp_out = omp_out > omp_in ? omp_out : omp_in) \
  initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(tjx_fmin_f64 : double : omp_out = omp_out < omp_in ? omp_out : omp_in) \
  initializer(omp_priv = INFINITY)
"""

INT_OPS = r"""#define TJX_INT_OPS(T, U, N, BITS, SIGNED) \
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
/* float to integer, saturating, NaN to 0 (XLA's conversion). The float32 form compares in float32, so it
   vectorizes (a round trip through double did not): (float)HI is HI or, rounded, the next power of two, and no
   float32 lies between HI and that, so both forms agree on every float32. */
#define TJX_F2I_FROM(F, NAME, T, LO, HI) \
static inline T NAME(F x) { return x != x ? (T)0 : (x >= (F)HI ? HI : (x <= (F)LO ? LO : (T)x)); }
#define TJX_F2I(T, N, LO, HI) \
  TJX_F2I_FROM(double, tjx_f2i_##N, T, LO, HI) TJX_F2I_FROM(float, tjx_f32_to_##N, T, LO, HI)
TJX_F2I(int8_t, i8, INT8_MIN, INT8_MAX)
TJX_F2I(int16_t, i16, INT16_MIN, INT16_MAX)
TJX_F2I(int32_t, i32, INT32_MIN, INT32_MAX)
TJX_F2I(int64_t, i64, INT64_MIN, INT64_MAX)
TJX_F2I(uint8_t, u8, 0, UINT8_MAX)
TJX_F2I(uint16_t, u16, 0, UINT16_MAX)
TJX_F2I(uint32_t, u32, 0, UINT32_MAX)
TJX_F2I(uint64_t, u64, 0, UINT64_MAX)
"""

FAST_MATH = r"""/* float32 exp and expm1 (bench/fit_exp.py), log and log1p (Cephes' coefficients) as polynomials,
   about 1-2 ulp, and tanh and erf as rationals, all branch-free so that they vectorize */
#ifdef __FMA__
#define TJX_FMA(a, b, c) fmaf(a, b, c)
#else
#define TJX_FMA(a, b, c) ((a) * (b) + (c))
#endif
static inline float tjx_f32_bits(int32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline int32_t tjx_bits_f32(float f) { int32_t b; memcpy(&b, &f, 4); return b; }
/* The clamps below compare float bits as integers: one vector integer min each. GCC vectorizes a float clamp
   (`x > c ? c : x`, which must let a NaN through) as compares and blends: exp's two clamps were 10 of its 40
   instructions, and a softmax ran 10% faster without them. A NaN clamps to a number there, so each function
   returns x where x is NaN. Every float32 input gives the float clamps' result bit for bit (NaN for NaN). */
/* tanh's and erf's end: t (>= 0, or NaN) at most 1, with x's sign; x where x is NaN */
static inline float tjx_unit_signed(float t, float x) {
  int32_t tb = tjx_bits_f32(t);
  tb = tb < 0x3f800000 ? tb : 0x3f800000;
  float res = tjx_f32_bits(tb | (tjx_bits_f32(x) & INT32_MIN));
  return x != x ? x : res;
}
/* exp(x) = 2^n exp(r), r = x - n ln 2 (Cody-Waite, in two parts); n from the float 1.5 * 2^23 + x / ln 2, whose low
   bits hold n (no float-to-int conversion); 2^n in two factors, so that results near overflow and subnormal ones
   come out right. The clamp keeps n in range: x <= 89 as signed bits (negative floats are negative integers), then
   x >= -104 as unsigned bits (positive floats are below every negative one; larger negative magnitudes are
   larger). `tjx_exp_reduce` is the part exp and expm1 share: it returns r, sets *t to n + 254 (the two factors'
   biased exponents, t >> 1 and t - (t >> 1), then need no further add) and *q to Q(r), where
   exp(r) = 1 + r + r^2 Q(r): a degree-6 minimax fit of exp on |r| <= 0.35 (bench/fit_exp.py, relative error 3.4e-9),
   which exp evaluates as (Q r + 1) r + 1 (two fused multiply-adds; at most 0.90 ulp over every float32 input) and
   expm1 as r + r^2 Q (no cancellation). Together 20 vector instructions per 16 values, where the previous form
   (Cephes' degree 7, biases added to each factor) took 24: a row softmax ran 8-10% faster. */
static inline float tjx_exp_reduce(float x, int32_t* t_out, float* q_out) {
  int32_t xb = tjx_bits_f32(x);
  xb = xb < 0x42b20000 ? xb : 0x42b20000;
  uint32_t ub = (uint32_t)xb;
  ub = ub < 0xc2d00000u ? ub : 0xc2d00000u;
  float xc = tjx_f32_bits((int32_t)ub);
  float k = TJX_FMA(xc, 1.44269504088896341f, 12582912.0f), n = k - 12582912.0f;
  *t_out = tjx_bits_f32(k) - (0x4b400000 - 254);
  float r = TJX_FMA(n, -0.693145751953125f, xc);
  r = TJX_FMA(n, -1.428606765330187045e-06f, r);
  float q = 1.3820792083e-03f;
  q = TJX_FMA(q, r, 8.3692483604e-03f); q = TJX_FMA(q, r, 4.1668280959e-02f); q = TJX_FMA(q, r, 1.6666516662e-01f);
  *q_out = TJX_FMA(q, r, 4.9999994040e-01f);
  return r;
}
static inline float tjx_exp_f32(float x) {
  int32_t t;
  float q, r = tjx_exp_reduce(x, &t, &q);
  float p = TJX_FMA(TJX_FMA(q, r, 1.0f), r, 1.0f);
  int32_t n1 = t >> 1, n2 = t - n1;
  float res = p * tjx_f32_bits(n1 << 23) * tjx_f32_bits(n2 << 23);
  return x != x ? x : res;
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
/* log1p(x) = log(u) + (x - (u - 1)) / u, u = 1 + x rounded: the second term puts back what rounding u lost (x
   itself where u is 1, which also keeps -0's sign), so the result keeps log's accuracy down to the smallest x.
   u = 0 (x = -1) and u = inf take log(u) alone, where the correction would be 0/0 or inf/inf. */
static inline float tjx_log1p_f32(float x) {
  float u = 1.0f + x, lu = tjx_log_f32(u);
  float res = u == 1.0f ? x : lu + (x - (u - 1.0f)) / u;
  return (u == 0.0f || u == INFINITY) ? lu : res;
}
/* expm1(x) = 2^n expm1(r) + (2^n - 1), with exp's n, r and polynomial: expm1(r) = r + r^2 Q(r) is never near a
   cancellation, and 2^n - 1 is exact. Past n = 24 the -1 is below half an ulp of exp(x), so exp's result (its
   two-factor scale, right up to overflow) is the answer. +-0 and NaN come back as they are. */
static inline float tjx_expm1_f32(float x) {
  int32_t t;
  float q, r = tjx_exp_reduce(x, &t, &q);
  float em = TJX_FMA(q, r * r, r);
  int32_t n1 = t >> 1, n2 = t - n1;
  float s1 = tjx_f32_bits(n1 << 23), s2 = tjx_f32_bits(n2 << 23), s = s1 * s2;
  float res = t > 254 + 24 ? TJX_FMA(TJX_FMA(q, r, 1.0f), r, 1.0f) * s1 * s2 : TJX_FMA(em, s, s - 1.0f);
  return (x != x || x == 0.0f) ? x : res;
}
/* tanh(x) = x P(x^2) / Q(x^2) on |x| <= 9.5 (float32 tanh is +-1 past 9.02), at most 1; a NaN passes. The
   coefficients are bench/fit_rational.py's minimax fit (relative error 7e-9); float32 evaluation makes it at most
   5 ulp (tests/test_fast_math.py). P(0) = Q(0) = 1, so a tiny x, -0 or a subnormal comes back exactly. */
static inline float tjx_tanh_f32(float x) {
  int32_t ab = tjx_bits_f32(x) & INT32_MAX;
  ab = ab < 0x41180000 ? ab : 0x41180000;                   /* |x| <= 9.5 */
  float a = tjx_f32_bits(ab), s = a * a, p = 4.8676142e-08f;
  p = TJX_FMA(p, s, 3.099189e-05f); p = TJX_FMA(p, s, 0.0039810007f); p = TJX_FMA(p, s, 0.13763775f);
  p = TJX_FMA(p, s, 1.0f);
  float q = 6.9566697e-10f;
  q = TJX_FMA(q, s, 1.571292e-06f); q = TJX_FMA(q, s, 0.0004157695f); q = TJX_FMA(q, s, 0.027638044f);
  q = TJX_FMA(q, s, 0.47097108f); q = TJX_FMA(q, s, 1.0f);
  return tjx_unit_signed(a * p / q, x);
}
/* erf(x) = (2 / sqrt(pi)) x P(x^2) / Q(x^2) on |x| <= 4 (float32 erf is +-1 past 3.92), the same kind of fit
   (bench/fit_rational.py erf 6 5: relative error 4e-9); a tiny x comes back as 2 x / sqrt(pi) rounded once. */
static inline float tjx_erf_f32(float x) {
  int32_t ab = tjx_bits_f32(x) & INT32_MAX;
  ab = ab < 0x40800000 ? ab : 0x40800000;                   /* |x| <= 4 */
  float a = tjx_f32_bits(ab), s = a * a, p = -1.1604119e-08f;
  p = TJX_FMA(p, s, 4.1319936e-06f); p = TJX_FMA(p, s, 0.0003357741f); p = TJX_FMA(p, s, 0.0034134611f);
  p = TJX_FMA(p, s, 0.048133105f); p = TJX_FMA(p, s, 0.1642283f); p = TJX_FMA(p, s, 1.0f);
  float q = 6.290063e-05f;
  q = TJX_FMA(q, s, 0.0013070264f); q = TJX_FMA(q, s, 0.015463534f); q = TJX_FMA(q, s, 0.11398657f);
  q = TJX_FMA(q, s, 0.4975617f); q = TJX_FMA(q, s, 1.0f);
  return tjx_unit_signed(a * 1.12837917f * p / q, x);
}
"""

MASKED_ZERO = r"""/* what a masked-off load reads: zero bits of any element type */
static const uint64_t tjx_zero[2] __attribute__((aligned(16))) = {0, 0};
"""

MATMUL = r"""/* matmul: the micro-kernel keeps an MR x NR tile of results in MR x NV vector registers of type V
   (NV = NR / V's lanes: two, or four for a wide tile), multiply-adds fused (only here, on purpose); `more` continues
   the sums already in c. Every size comes from the kernel's MatmulPlan (lower/optimize.py): `render` instantiates
   one micro-kernel per plan. */
#if defined(__clang__)
#define TJX_CONTRACT_FN
#define TJX_CONTRACT_BODY _Pragma("clang fp contract(fast)")
#define TJX_SHUFFLE(M, x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#else
#define TJX_CONTRACT_FN __attribute__((optimize("O3", "fp-contract=fast")))
#define TJX_CONTRACT_BODY
#define TJX_SHUFFLE(M, x, y, ...) __builtin_shuffle(x, y, (M){__VA_ARGS__})
#endif
/* TJX_SHUFFLE: lanes of x (0 to L - 1) and y (L to 2L - 1) picked by constant indices of the integer vector type M,
   in GCC's and clang's spellings (a tile's transpose, `tjx_tr_*`) */
/* The rest of a matmul kernel (packing, the stores and the epilogue) is elementwise, with no sum to reorder: in a
   quick build (devices/cpu.py tiers, -DTJX_QUICK) GCC compiles it at -Og, in about a third of -O1's time, and its
   results are the optimized build's, bit for bit. */
#if defined(TJX_QUICK) && defined(__GNUC__) && !defined(__clang__)
#define TJX_PACKING_FN __attribute__((optimize("Og")))
#else
#define TJX_PACKING_FN
#endif
static inline void* tjx_alloc(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64 + 64); }
/* the n offsets of a block's rows are consecutive (a convolution's block within one image row): the direct
   micro-kernel then reads x, and a tile stored column by column writes each column, from one offset */
static inline int tjx_consecutive(const int64_t* off, int64_t n) {
  int run = 1;
  for (int64_t r = 1; r < n; r++) run &= off[r] == off[0] + r;
  return run; }
#if defined(__GNUC__) && !defined(__clang__)
#define TJX_UNROLL4 _Pragma("GCC unroll 4")
#else
#define TJX_UNROLL4
#endif
/* One contraction row k of an MR x NR tile kept in acc (NV vectors a row): y's row k of the panel b, and X, x's
   element at row r of the block and contraction row k, broadcast as X - 0 (x - 0 is x exactly, so it folds; x + 0
   turns -0 to +0); each product added by MAC(a, b, acc): the micro-kernels' TJX_MAC, which their contraction makes
   one multiply-add, or lower/matmul.py `overlapped_tiles`' explicit TJX_VFMA_*. */
#define TJX_MAC(a, b, acc) ((acc) + (a) * (b))
#define TJX_MICRO_ROW(V, MR, NR, NV, X, MAC) { \
    V bv[NV]; \
    for (int j = 0; j < NV; j++) memcpy(&bv[j], b + k * NR + j * (NR / NV), sizeof(V)); \
    for (int r = 0; r < MR; r++) { \
      V av = (X) - (V){0}; \
      for (int j = 0; j < NV; j++) acc[r][j] = MAC(av, bv[j], acc[r][j]); } }
/* The loop of every micro-kernel: the MR x NR tile in acc (continuing c's sums where `more`), then in c. */
#define TJX_MICRO_LOOP(V, MR, NR, X) TJX_MICRO_LOOP_PF(V, MR, NR, X, )
#define TJX_MICRO_LOOP_PF(V, MR, NR, X, PF) \
  enum { NV = NR * sizeof(*b) / sizeof(V) }; \
  V acc[MR][NV]; \
  if (more) memcpy(acc, c, sizeof acc); \
  else for (int r = 0; r < MR; r++) for (int j = 0; j < NV; j++) acc[r][j] = (V){0}; \
  TJX_UNROLL4 for (int64_t k = 0; k < K; k++) { \
    PF \
    TJX_MICRO_ROW(V, MR, NR, NV, X, TJX_MAC) } \
  memcpy(c, acc, sizeof acc);
/* A prefetching micro-kernel (`MatmulPlan.prefetch`: an epilogue that loads and stores several arrays, an
   optimizer's update) also fetches the lines of those arrays that the next tile's epilogue will touch, one every
   other contraction row, so their misses overlap the arithmetic instead of stalling the epilogue (prefetched all
   at once before the tile, they fill the miss queue and stall it as well). pf holds the lines' addresses: the
   first nin to be read, the rest to be written. */
#define TJX_PREFETCH_STEP \
  if (!(k & 1) && pq < npf) { \
    if (pq < nin) __builtin_prefetch(pf[pq], 0, 3); else __builtin_prefetch(pf[pq], 1, 3); \
    pq++; }
#define TJX_PF_ARGS const char* const* pf, int nin, int npf
/* An explicit vector multiply-add (TJX_VFMA_<dtype>_<vector bytes>), for a matmul whose tiles' epilogues run between
   the next tile's contraction rows, inline in a kernel compiled without contraction (lower/matmul.py
   `overlapped_tiles`). Defined only in an optimized build (a quick one runs the shared micro-kernels) and where the
   compiler has the instruction as a builtin, with no header (<immintrin.h> alone takes 0.13 s to compile); where it
   is not defined the kernel takes the micro-kernel's path. */
#if !defined(TJX_QUICK) && defined(__clang__) && defined(__has_builtin)
#if __has_builtin(__builtin_elementwise_fma)
#define TJX_VFMA_f32_64(a, b, c) __builtin_elementwise_fma(a, b, c)
#define TJX_VFMA_f64_64(a, b, c) __builtin_elementwise_fma(a, b, c)
#define TJX_VFMA_f32_32(a, b, c) __builtin_elementwise_fma(a, b, c)
#define TJX_VFMA_f64_32(a, b, c) __builtin_elementwise_fma(a, b, c)
#endif
#elif !defined(TJX_QUICK) && defined(__GNUC__) && defined(__x86_64__)
#if defined(__AVX512F__)
#define TJX_VFMA_f32_64(a, b, c) __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4)
#define TJX_VFMA_f64_64(a, b, c) __builtin_ia32_vfmaddpd512_mask(a, b, c, (unsigned char)-1, 4)
#endif
#if defined(__FMA__)
#define TJX_VFMA_f32_32(a, b, c) __builtin_ia32_vfmaddps256(a, b, c)
#define TJX_VFMA_f64_32(a, b, c) __builtin_ia32_vfmaddpd256(a, b, c)
#endif
#endif
/* A micro-kernel is static in each translation unit, where GCC specializes it for the unit's calls (a copy shared
   by all units made the 1024 matmul 8% slower). A quick build (-DTJX_QUICK), which runs a few times at most, shares
   one: compiled at -O3 it takes longer than most kernels, and every unit compiling it would double that. There the
   micro-kernels are defined (hidden) in the first unit and declared in the others (devices/cpu.py compiles them
   with -DTJX_MICRO_ELSEWHERE). */
#ifdef TJX_QUICK
#define TJX_MICRO_LINK __attribute__((visibility("hidden")))
#else
#define TJX_MICRO_LINK static
#endif
#ifdef TJX_MICRO_ELSEWHERE
#define TJX_MICRO(T, V, N, MR, NR) \
TJX_MICRO_LINK void tjx_mm_##N(int64_t K, const T* restrict a, const T* restrict b, T* restrict c, int more);
#define TJX_MICRO_DIRECT(T, V, N, MR, NR) \
TJX_MICRO_LINK void tjx_mmd_##N(int64_t K, const T* restrict a, const int64_t* restrict roff, \
                                const int64_t* restrict koff, const T* restrict b, T* restrict c, int more);
#define TJX_MICRO_ROWS(T, V, N, MR, NR) \
TJX_MICRO_LINK void tjx_mmr_##N(int64_t K, const T* restrict a, const int64_t* restrict roff, const T* restrict b, \
                                T* restrict c, int more);
#define TJX_MICRO_PF(T, V, N, MR, NR) \
TJX_MICRO_LINK void tjx_mmp_##N(int64_t K, const T* restrict a, const T* restrict b, T* restrict c, int more, \
                                TJX_PF_ARGS);
#else
/* x packed: row r of the block at k is a[k * MR + r] */
#define TJX_MICRO(T, V, N, MR, NR) \
TJX_CONTRACT_FN TJX_MICRO_LINK void tjx_mm_##N(int64_t K, const T* restrict a, const T* restrict b, \
                                              T* restrict c, int more) { \
  TJX_CONTRACT_BODY \
  TJX_MICRO_LOOP(V, MR, NR, a[k * MR + r]) }
/* x read in place (a direct matmul: x is a sliding window, never packed): row r of the block at k is
   a[roff[r] + koff[k]]; rows that are consecutive (a block within one image row) are read from one pointer at
   constant offsets, which keeps twelve row pointers out of the general-purpose registers */
#define TJX_MICRO_DIRECT(T, V, N, MR, NR) \
TJX_CONTRACT_FN TJX_MICRO_LINK void tjx_mmd_##N(int64_t K, const T* restrict a, const int64_t* restrict roff, \
                                       const int64_t* restrict koff, const T* restrict b, \
                                       T* restrict c, int more) { \
  TJX_CONTRACT_BODY \
  if (tjx_consecutive(roff, MR)) { \
    const T* row = a + roff[0]; \
    TJX_MICRO_LOOP(V, MR, NR, row[koff[k] + r]) \
  } else { \
    const T* row[MR]; \
    for (int r = 0; r < MR; r++) row[r] = a + roff[r]; \
    TJX_MICRO_LOOP(V, MR, NR, row[r][koff[k]]) } }
/* x read in place along its rows (a small x that stays in cache, never packed): row r of the block at k is
   a[roff[r] + k] */
#define TJX_MICRO_ROWS(T, V, N, MR, NR) \
TJX_CONTRACT_FN TJX_MICRO_LINK void tjx_mmr_##N(int64_t K, const T* restrict a, const int64_t* restrict roff, \
                                       const T* restrict b, T* restrict c, int more) { \
  TJX_CONTRACT_BODY \
  const T* row[MR]; \
  for (int r = 0; r < MR; r++) row[r] = a + roff[r]; \
  TJX_MICRO_LOOP(V, MR, NR, row[r][k]) }
/* TJX_MICRO, prefetching the next tile's epilogue operands */
#define TJX_MICRO_PF(T, V, N, MR, NR) \
TJX_CONTRACT_FN TJX_MICRO_LINK void tjx_mmp_##N(int64_t K, const T* restrict a, const T* restrict b, \
                                               T* restrict c, int more, TJX_PF_ARGS) { \
  TJX_CONTRACT_BODY \
  int pq = 0; \
  TJX_MICRO_LOOP_PF(V, MR, NR, a[k * MR + r], TJX_PREFETCH_STEP) }
#endif
/* A direct tile with its rows in the lanes (`MatmulPlan.lane_rows`: a short contraction, a first convolution's 25
   taps): MR consecutive elements of x from x + koff[k] as MR / L vectors (VU: unaligned), each of y's NR values of
   row k of the panel w broadcast, NR x MR / L sums; the tile goes to ct by columns (ct[q * MR + r]), as a tile
   stored column by column wants it. Each result's products are added in the contraction's order, multiply-adds
   fused, as TJX_MICRO_DIRECT adds them. Small: each translation unit compiles its own. */
#define TJX_MICRO_LANES(T, V, VU, N, MR, NR, L) \
TJX_CONTRACT_FN static void tjx_mml_##N(int64_t K, const T* restrict x, const int64_t* restrict koff, \
                                        const T* restrict w, T* restrict ct) { \
  TJX_CONTRACT_BODY \
  enum { NV = MR / L }; \
  V acc[NR][NV]; \
  for (int q = 0; q < NR; q++) for (int v = 0; v < NV; v++) acc[q][v] = (V){0}; \
  for (int64_t k = 0; k < K; k++) { \
    V xv[NV]; \
    for (int v = 0; v < NV; v++) xv[v] = *(const VU*)(x + koff[k] + v * L); \
    for (int q = 0; q < NR; q++) { \
      const V wv = w[k * NR + q] - (V){0}; \
      for (int v = 0; v < NV; v++) acc[q][v] = TJX_MAC(wv, xv[v], acc[q][v]); } } \
  memcpy(ct, acc, sizeof acc); }
"""

SORT = r"""/* the sorts' order: x comes strictly before y (NaN last ascending and first descending, numpy's order); index i
   comes before index j where its key does, or where neither key does and i < j (a stable sort's order, a total one) */
#define TJX_ORDER(K, N, NANS) \
static inline int tjx_ahead_##N(K x, K y, int desc) { \
  return desc ? (x > y || (NANS && x != x && y == y)) : (x < y || (NANS && y != y && x == x)); } \
static inline int tjx_before_##N(const K* key, int32_t i, int32_t j, int desc) { \
  return tjx_ahead_##N(key[i], key[j], desc) || (i < j && !tjx_ahead_##N(key[j], key[i], desc)); }
/* stable merge sort of row indices by key */
#define TJX_SORT(K, N) \
static void tjx_sort_##N(const K* key, int32_t* idx, int32_t* tmp, int64_t n, int desc) { \
  for (int64_t w = 1; w < n; w *= 2) { \
    for (int64_t lo = 0; lo < n; lo += 2 * w) { \
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, o = lo; \
      while (a < mid && b < hi) tmp[o++] = tjx_ahead_##N(key[idx[b]], key[idx[a]], desc) ? idx[b++] : idx[a++]; \
      while (a < mid) tmp[o++] = idx[a++]; \
      while (b < hi) tmp[o++] = idx[b++]; } \
    int32_t* t = idx; idx = tmp; tmp = t; \
    if (2 * w >= n) { memcpy(tmp, idx, n * sizeof(int32_t)); } } }
/* the first k positions of that sort (lax.top_k, argsort(x)[:k]), in one pass over the row: h holds the k indices
   that come first so far, in order; an index that comes before the last of them is put in its place (a binary
   search, then a move of the rest by one). The order is total, so the k are exactly the sort's first k. On a random
   row few indices get in (about k (1 + ln(n / k))); where more than `budget` do (a row sorted the other way: every
   one, each moving k), it returns 0 and the caller sorts the row instead. */
#define TJX_TOPK(K, N) \
static inline int tjx_topk_run_##N(const K* key, int32_t* h, int64_t n, int64_t k, int desc, int64_t budget) { \
  int64_t m = 0; \
  K last = 0; \
  for (int64_t j = 0; j < n; j++) { \
    const K x = key[j]; /* (j comes after every index in h: a tie with the last does not get in) */ \
    if (m == k && !tjx_ahead_##N(x, last, desc)) continue; \
    if (--budget < 0) return 0; \
    int64_t lo = 0, len = m < k ? m : k - 1; \
    while (len > 0) { \
      int64_t half = len / 2, b = tjx_before_##N(key, h[lo + half], (int32_t)j, desc); \
      lo = b ? lo + half + 1 : lo; len = b ? len - half - 1 : half; } \
    int64_t end = m < k ? m++ : k - 1; \
    memmove(h + lo + 1, h + lo, (end - lo) * sizeof(int32_t)); \
    h[lo] = (int32_t)j; \
    last = key[h[m - 1]]; } \
  return 1; } \
static int tjx_topk_##N(const K* key, int32_t* h, int64_t n, int64_t k, int desc, int64_t budget) { \
  return desc ? tjx_topk_run_##N(key, h, n, k, 1, budget) : tjx_topk_run_##N(key, h, n, k, 0, budget); }
#define TJX_SORTS(K, N, NANS) TJX_ORDER(K, N, NANS) TJX_SORT(K, N) TJX_TOPK(K, N)
TJX_SORTS(double, d, 1)
TJX_SORTS(int64_t, i, 0)
TJX_SORTS(uint64_t, u, 0)
"""

# optimize.stream_stores: a block of results stored past the caches (streaming stores write whole lines without
# reading them first), a line at a time; a line the block covers only in part, and targets without AVX, store as
# usual (a streaming store of part of a line, or one beside plain stores in a line, sends the line to memory and
# back).
# Streaming stores are weakly ordered: each thread that made them runs tjx_sfence before its work counts as done.
# The instructions are written as inline assembly: <immintrin.h> would add about 0.2 s of parsing to every
# translation unit of every program.
STREAM = r"""
#if defined(__AVX__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TJX_NT(V, INSN, d, s) { V v; memcpy(&v, s, sizeof v); __asm__ volatile(INSN " %1, %0" : "=m"(*(V*)(d)) : "v"(v)); }
#ifdef __AVX512F__
#define TJX_NT_LINE(T, N, INSN, d, s) TJX_NT(tjx_nt16_##N, INSN, d, s)
#else
#define TJX_NT_LINE(T, N, INSN, d, s) \
  { TJX_NT(tjx_nt8_##N, INSN, d, s) TJX_NT(tjx_nt8_##N, INSN, (d) + 32 / sizeof(T), (s) + 32 / sizeof(T)) }
#endif
#define TJX_STREAM(T, N, INSN) \
typedef T tjx_nt8_##N __attribute__((vector_size(32))); \
typedef T tjx_nt16_##N __attribute__((vector_size(64))); \
static inline void tjx_stream_##N(T* restrict d, const T* restrict s, int64_t n) { \
  const int64_t w = 64 / sizeof(T); \
  int64_t i = 0; \
  for (; i < n && ((uintptr_t)(d + i) & 63); i++) d[i] = s[i]; \
  for (; i + w <= n; i += w) TJX_NT_LINE(T, N, INSN, d + i, s + i) \
  for (; i < n; i++) d[i] = s[i]; }
TJX_STREAM(float, f32, "vmovntps")
TJX_STREAM(double, f64, "vmovntpd")
#define tjx_sfence() __asm__ volatile("sfence" ::: "memory")
#else
static inline void tjx_stream_f32(float* d, const float* s, int64_t n) { memcpy(d, s, n * sizeof(float)); }
static inline void tjx_stream_f64(double* d, const double* s, int64_t n) { memcpy(d, s, n * sizeof(double)); }
#define tjx_sfence() ((void)0)
#endif
"""

PORTABLE = FLOAT_OPS + INT_OPS
C_PRELUDE = HEADERS + BF16 + FLOAT_OPS + OMP_REDUCTIONS + INT_OPS + FAST_MATH + MASKED_ZERO + MATMUL + SORT + STREAM

# the CPU device picks the thread count (devices/cpu.py thread_count) and sets it here; OpenMP is process-wide
SET_THREADS = """int tjx_set_threads(int n) {
#ifdef _OPENMP
  if (n > 0) omp_set_num_threads(n);
  return omp_get_max_threads();
#else
  return 1;
#endif
}
"""

