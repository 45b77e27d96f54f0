"""tinyjx.scipy.special: `jax.scipy.special`, special functions built from `tinyjx.numpy` operations.

Every function here is an elementwise composition of jnp/lax ops (no new primitive), so it traces, jits, vmaps
and lowers like any other code. Integer and bool inputs become the default float type (JAX's
`promote_args_inexact`); the result has the promoted dtype of the arguments.

Methods (all published mathematics; the coefficient tables were computed for this file with mpmath):
- gammaln: the Taylor series of log Gamma(1+z) (coefficients (zeta(k)-1)/k) around 1 and 2, reached by up to six
  steps of the recurrence; Stirling's series from 8.5 on; reflection for x < 0.5.
- digamma: recurrence up to x >= 10, the asymptotic (Bernoulli) series there, a Taylor series at the positive
  root, reflection for x < 0. zeta (Hurwitz) and polygamma: Euler-Maclaurin summation.
- erfc, erfcx, ndtr, log_ndtr: erf near 0; elsewhere exp(-x^2) * erfcx(x) with erfcx a Chebyshev series in
  t = (x - 4) / (x + 4), and exp(-x^2) computed from a split of x so that x^2 carries no rounding error.
- ndtri, erfinv: Acklam's rational approximation (relative error 1.2e-9) and one Halley step on ndtr / erf.
- i0e, i1e: Chebyshev series in t = (x - 8) / (x + 8) of the scaled functions.

Derivatives are JAX's (custom_jvp where the formula's own derivative would be less accurate or NaN):
d gammaln = digamma, d digamma = polygamma(1), d erf = 2/sqrt(pi) exp(-x^2), d xlogy(x, y) = (log y, x / y)
also at x = 0, d entr(0) = +inf, d ndtri(p) = 1 / pdf(ndtri(p)), and so on.
"""
from __future__ import annotations
import math, operator
import numpy as np
import tinyjx.numpy as jnp
from tinyjx import dtypes, lax
from tinyjx.array import Array
from tinyjx.numpy.core import promote_inexact
from tinyjx.transforms.custom import custom_jvp
from tinyjx.nn import logsumexp, softmax, log_softmax  # noqa: F401  (the same functions as jax.scipy.special's)

__all__ = ['logsumexp', 'softmax', 'log_softmax', 'erf', 'erfc', 'erfcx', 'erfinv', 'ndtr', 'ndtri', 'log_ndtr',
           'gammaln', 'gamma', 'gammasgn', 'digamma', 'polygamma', 'zeta', 'betaln', 'multigammaln', 'factorial',
           'expit', 'logit', 'xlogy', 'xlog1py', 'entr', 'kl_div', 'rel_entr', 'i0e', 'i1e', 'i0', 'i1']

# ---------------------------------------------------------------- coefficient tables and evaluation
ERFCX_L = 4.0   # erfcx(x) * (x + 4) as a Chebyshev series in t = (x - 4) / (x + 4), x >= 0
ERFCX_CHEB = (
  1.6320978781965259, -1.5054329427054698, 0.5903214182888945, -0.19828527172011035,
  0.0569084302284687, -0.013773973050870096, 0.002729016733135232, -0.00041361807903024755,
  3.89141838079606e-05, 4.795485503364818e-07, -8.699107081379825e-07, 1.2116707094396558e-07,
  3.79196702608182e-09, -3.4533646779963824e-09, 2.748862570381361e-10, 6.813959375318511e-11,
  -1.3568522747316355e-11, -1.0463235067416098e-12, 4.851070321243456e-13, 8.458758172979236e-15,
  -1.6469363733616713e-14, 2.5314850886802834e-16, 5.757244393379938e-16, -1.8245979193136522e-17,
  -2.135637703191254e-17,
)
BESSEL_L = 8.0  # i0e(x) sqrt(x + 8) and i1e(x) / x (x + 8)^1.5 as Chebyshev series in t = (x - 8) / (x + 8)
I0E_CHEB = (
  0.9501481452168764, -0.8659789539786619, 0.49486568049726637, -0.27612728856948454,
  0.14192055518192762, -0.06478438425690407, 0.025225642807792464, -0.007834843458643775,
  0.0016377488245861206, -5.325030241042887e-05, -0.00011347270594547879, 4.001812449915254e-05,
  -3.7411337348501605e-07, -3.9890472013143744e-06, 9.141529202881819e-07, 2.834607753059725e-07,
  -1.568490330393804e-07, -1.4228329126322296e-08, 2.232656267513037e-08, -4.096203661638355e-11,
  -3.1799653046347826e-09, 1.4788371274739435e-10, 4.808780579160903e-10, -2.4716947125038817e-11,
  -7.804428074662737e-11, 1.3355052314179188e-12, 1.3341606284467375e-11, 7.189370153329751e-13,
  -2.3128843656852114e-12, -3.7348882891380344e-13, 3.8451227829374035e-13, 1.2321058480002018e-13,
  -5.5560374204098436e-14, -3.343919596418376e-14, 5.0812243141989096e-15, 7.782251785250773e-15,
  5.647130530354142e-16, -1.5072248699278427e-15, -4.714815002788609e-16, 2.095447332534932e-16,
  1.5709933736489685e-16, -4.1609623764307904e-18, -3.6440511824536895e-17, -9.68718905204924e-18,
)
I1E_CHEB = (
  2.999266522908967, -4.159562494925607, 2.351869616328978, -1.1357632604160202,
  0.46627208862566194, -0.15722433995794327, 0.0398438159960508, -0.0054685217966510035,
  -0.0008240842991271585, 0.0006650659500223962, -0.00011884337352976581, -2.9273814694851646e-05,
  1.7958664923096668e-05, -5.7119738872739e-07, -1.8482066827083244e-06, 3.3973419627795906e-07,
  1.7976065329940235e-07, -6.105709333606208e-08, -1.8707493335982373e-08, 9.423391618550712e-09,
  2.289493900701405e-09, -1.4202257294958e-09, -3.4789812247944577e-10, 2.1414218779635909e-10,
  6.389281322546048e-11, -3.16645199790984e-11, -1.3081385073934535e-11, 4.304239606613771e-12,
  2.765384562901574e-12, -4.4355347626091583e-13, -5.702755310133235e-13, -2.4294712068053005e-15,
  1.0891609065762745e-13, 1.9940632732264633e-14, -1.7798015273703314e-14, -7.682777370360508e-15,
  1.975579744026124e-15, 2.056847062048604e-15, 8.179721650294553e-17, -4.2046594540297657e-16,
  -1.298083487307312e-16, 5.66451825378661e-17, 4.5347714016488743e-17,
)
# log Gamma(1 + z) = -log1p(z) + (1 - euler_gamma) z + sum_k LGAMMA1P[k-2] z^k, LGAMMA1P[k-2] = (-1)^k (zeta(k) - 1) / k
ONE_MINUS_EULER = 0.42278433509846713
LGAMMA1P = (
  0.3224670334241132, -0.0673523010531981, 0.020580808427784546, -0.007385551028673986,
  0.0028905103307415234, -0.001192753911703261, 0.0005096695247430425, -0.00022315475845357939,
  9.945751278180853e-05, -4.492623673813314e-05, 2.050721277567069e-05, -9.439488275268397e-06,
  4.374866789907488e-06, -2.039215753801366e-06, 9.55141213040742e-07, -4.492469198764566e-07,
  2.1207184805554665e-07, -1.0043224823968099e-07, 4.7698101693639804e-08, -2.2711094608943164e-08,
  1.0838659214896955e-08, -5.183475041970047e-09, 2.4836745438024785e-09, -1.1921401405860912e-09,
  5.731367241678862e-10, -2.7595228851242334e-10,
)
DIGAMMA_ROOT = 1.4616321449683622   # the positive zero of digamma; DIGAMMA_ROOT_SERIES[n-1] = psi^(n)(root) / n!
DIGAMMA_ROOT_SERIES = (
  0.9676722454476212, -0.4427631689835921, 0.258499760955651, -0.16394270544240652,
  0.10782405069126237, -0.07219956125645471, 0.04880428816414311, -0.03316112647484736,
  0.022597648232218104, -0.01542476590494896, 0.010538791616612175, -0.007204534386356869,
  0.004926781395729853, -0.003369801655439328, 0.002305126326734928, -0.0015769367714301972,
  0.0010788252019162967, -0.0007380709389960052, 0.000504953265834602, -0.0003454680251063077,
  0.00023635601564027053, -0.00016170622091974803, 0.0001106337276874741, -7.569179582195066e-05,
  5.178575795222081e-05, -3.5430070947659604e-05,
)
B2K_OVER_2K = (0.08333333333333333, -0.008333333333333333, 0.003968253968253968, -0.004166666666666667,
               0.007575757575757576, -0.021092796092796094, 0.08333333333333333, -0.4432598039215686)
B2K_OVER_2K_FACTORIAL = (0.08333333333333333, -0.001388888888888889, 3.306878306878307e-05, -8.267195767195768e-07,
                         2.08767569878681e-08, -5.284190138687493e-10, 1.3382536530684679e-11,
                         -3.3896802963225827e-13, 8.586062056277845e-15, -2.174868698558062e-16,
                         5.5090028283602295e-18, -1.3954464685812522e-19)
STIRLING_CORRECTION = (0.08333333333333333, -0.002777777777777778, 0.0007936507936507937, -0.0005952380952380953,
                       0.0008417508417508417, -0.0019175269175269176, 0.00641025641025641, -0.029550653594771242,
                       0.17964437236883057)   # B_2k / (2k (2k - 1))
# Acklam's rational approximation of the normal quantile (relative error below 1.15e-9 everywhere)
ACKLAM_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
            -3.066479806614716e+01, 2.506628277459239e+00)
ACKLAM_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
            -1.328068155288572e+01, 1.0)
ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
            4.374664141464968e+00, 2.938163982698783e+00)
ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00, 1.0)
ACKLAM_LOW = 0.02425

SQRT_PI, SQRT_2, SQRT_2PI = math.sqrt(math.pi), math.sqrt(2.0), math.sqrt(2.0 * math.pi)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

def _tol(x: Array) -> float:
  """The size below which a series term cannot change a result of x's dtype."""
  return 1e-18 if x.dtype is dtypes.float64 else 3e-9

def _truncated(coeffs: tuple, x: Array, scale: float = 1.0) -> tuple:
  """`coeffs` without the trailing terms (at |argument| <= `scale`) that x's dtype cannot see."""
  n = len(coeffs)
  while n > 1 and abs(coeffs[n - 1]) * scale ** (n - 1) < _tol(x): n -= 1
  return coeffs[:n]

def _horner(coeffs: tuple, x: Array) -> Array:
  """sum_k coeffs[k] x^k."""
  out = jnp.full_like(x, coeffs[-1])
  for c in reversed(coeffs[:-1]): out = out * x + c
  return out

def _chebyshev(coeffs: tuple, t: Array) -> Array:
  """sum_k coeffs[k] T_k(t) by Clenshaw's recurrence (t in [-1, 1]), dropping terms t's dtype cannot see."""
  coeffs = _truncated(coeffs, t)
  b1, b2 = jnp.zeros_like(t), jnp.zeros_like(t)
  for c in reversed(coeffs[1:]): b1, b2 = 2.0 * t * b1 - b2 + c, b1
  return t * b1 - b2 + coeffs[0]

def _float(*xs) -> list[Array]:
  """The arguments promoted together to an inexact dtype (JAX's promote_args_inexact)."""
  return promote_inexact(*xs)

def _is_nonpositive_integer(x: Array) -> Array:
  return (x <= 0) & (x == jnp.floor(x))

def _reduced(x: Array) -> Array:
  """x minus its nearest integer (exact), for sin(pi x) and tan(pi x) without the rounding of pi * x."""
  return x - jnp.round(x)

# ---------------------------------------------------------------- error function family
def erf(x) -> Array:
  """The error function 2/sqrt(pi) * integral_0^x exp(-t^2) dt.

  >>> from tinyjx.scipy import special
  >>> round(float(special.erf(0.5)), 6)
  0.5205
  """
  return lax.erf(_float(x)[0])

def _exp_neg_sq(a: Array, scale: float = 1.0) -> Array:
  """exp(-scale * a^2) for a >= 0 (scale may be negative) without the rounding error of a^2, which exp would
  multiply by a^2: a = hi + lo with hi on a 1/64 grid, so hi^2 is exact (in float32 too) for a < 64."""
  a = jnp.minimum(a, 60.0)
  hi = jnp.round(a * 64.0) / 64.0
  return jnp.exp(-scale * (hi * hi)) * jnp.exp(-scale * ((a - hi) * (a + hi)))

def _erfcx_nonneg(a: Array) -> Array:
  """exp(a^2) erfc(a) for a >= 0 (inf allowed)."""
  t = 1.0 - (2.0 * ERFCX_L) / (a + ERFCX_L)
  return _chebyshev(ERFCX_CHEB, t) / (a + ERFCX_L)

@custom_jvp
def _erfc(x: Array) -> Array:
  a = jnp.abs(x)
  tail = _exp_neg_sq(a) * _erfcx_nonneg(a)
  return jnp.where(a < 0.5, 1.0 - lax.erf(x), jnp.where(x > 0, tail, 2.0 - tail))

@_erfc.defjvp
def _erfc_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _erfc(x), t * (-2.0 / SQRT_PI) * _exp_neg_sq(jnp.abs(x))

def erfc(x) -> Array:
  """The complementary error function 1 - erf(x), accurate (relatively) where it is tiny, up to x = 27 in float64.

  >>> from tinyjx.scipy import special
  >>> float(special.erfc(10.0)) > 0
  True
  """
  return _erfc(_float(x)[0])

@custom_jvp
def _erfcx(x: Array) -> Array:
  a = jnp.abs(x)
  pos = _erfcx_nonneg(a)
  neg = 2.0 * _exp_neg_sq(a, -1.0) - pos
  return jnp.where(x >= 0, pos, neg)

@_erfcx.defjvp
def _erfcx_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  y = _erfcx(x)
  return y, t * (2.0 * x * y - 2.0 / SQRT_PI)

def erfcx(x) -> Array:
  """The scaled complementary error function exp(x^2) erfc(x) (about 1 / (x sqrt(pi)) for large x).

  >>> from tinyjx.scipy import special
  >>> round(float(special.erfcx(0.0)), 6)
  1.0
  """
  return _erfcx(_float(x)[0])

@custom_jvp
def _ndtr(x: Array) -> Array:
  a = jnp.abs(x)
  half_tail = 0.5 * _exp_neg_sq(a, 0.5) * _erfcx_nonneg(a / SQRT_2)
  center = 0.5 + 0.5 * lax.erf(x / SQRT_2)
  return jnp.where(a < 1.0, center, jnp.where(x < 0, half_tail, 1.0 - half_tail))

def _normal_pdf(x: Array) -> Array: return _exp_neg_sq(jnp.abs(x), 0.5) / SQRT_2PI

@_ndtr.defjvp
def _ndtr_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _ndtr(x), t * _normal_pdf(x)

def ndtr(x) -> Array:
  """The standard normal CDF, accurate in the lower tail (ndtr(-37) is 5.7e-300 in float64).

  >>> from tinyjx.scipy import special
  >>> float(special.ndtr(0.0))
  0.5
  """
  return _ndtr(_float(x)[0])

@custom_jvp
def _log_ndtr(x: Array) -> Array:
  a = jnp.abs(x)
  lower = jnp.log(0.5 * _erfcx_nonneg(a / SQRT_2)) - 0.5 * (x * x)
  return jnp.where(x < -1.0, lower, jnp.log1p(-_ndtr(-x)))

@_log_ndtr.defjvp
def _log_ndtr_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  # pdf / cdf; in the lower tail 2 / (sqrt(2 pi) erfcx(-x / sqrt 2)), which neither underflows nor cancels
  lower = (2.0 / SQRT_2PI) / _erfcx_nonneg(jnp.abs(x) / SQRT_2)
  center = jnp.maximum(x, -1.0)                # the unused branch stays finite, for second derivatives
  ratio = jnp.where(x < -1.0, lower, _normal_pdf(center) / _ndtr(center))
  return _log_ndtr(x), t * ratio

def log_ndtr(x) -> Array:
  """log(ndtr(x)), finite far into the lower tail (about -x^2/2) and accurate near 0 for large x.

  >>> from tinyjx.scipy import special
  >>> round(float(special.log_ndtr(-40.0)), 3)
  -804.608
  """
  return _log_ndtr(_float(x)[0])

def _ndtri_guess(q: Array) -> Array:
  """Acklam's approximation of ndtri(q) for 0 < q <= 0.5 (a value <= 0)."""
  r = q - 0.5
  s = r * r
  central = _horner(ACKLAM_A[::-1], s) * r / _horner(ACKLAM_B[::-1], s)
  u = jnp.sqrt(-2.0 * jnp.log(jnp.maximum(q, jnp.finfo(q.dtype).tiny)))
  tail = _horner(ACKLAM_C[::-1], u) / _horner(ACKLAM_D[::-1], u)
  return jnp.where(q < ACKLAM_LOW, tail, central)

def _ndtri_lower(q: Array) -> Array:
  """ndtri(q) for 0 < q <= 0.5: Acklam's guess and one Halley step on ndtr(x) = q (cubic convergence)."""
  x = _ndtri_guess(q)
  e = _ndtr(x) - q
  # u = e / pdf(x), as exp(log|e| + x^2/2) so that a tiny q (pdf(x) underflowing) never gives inf / inf
  u = jnp.sign(e) * SQRT_2PI * jnp.exp(jnp.log(jnp.abs(e)) + 0.5 * (x * x))
  return x - u / (1.0 + 0.5 * x * u)

@custom_jvp
def _ndtri(p: Array) -> Array:
  q = jnp.where(p > 0.5, 1.0 - p, p)
  x = _ndtri_lower(jnp.clip(q, jnp.finfo(p.dtype).tiny, 0.5))
  x = jnp.where(p > 0.5, -x, x)
  edge = jnp.where(p == 0, -math.inf, jnp.where(p == 1, math.inf, math.nan))
  return jnp.where((p > 0) & (p < 1), x, edge)

@_ndtri.defjvp
def _ndtri_jvp(primals, tangents):
  (p,), (t,) = primals, tangents
  x = _ndtri(p)
  return x, t * SQRT_2PI * jnp.exp(0.5 * (x * x))

def ndtri(p) -> Array:
  """The inverse of ndtr (the standard normal quantile): -inf at 0, inf at 1, NaN outside [0, 1].

  >>> from tinyjx.scipy import special
  >>> round(float(special.ndtri(0.975)), 5)
  1.95996
  """
  return _ndtri(_float(p)[0])

@custom_jvp
def _erfinv(y: Array) -> Array:
  a = jnp.abs(y)
  w = -_ndtri_guess(jnp.clip(0.5 * (1.0 - a), jnp.finfo(y.dtype).tiny, 0.5)) / SQRT_2
  # one Halley step on erf(w) = a; the residual from erfc where a > 0.5 (1 - a is exact there)
  f = jnp.where(a < 0.5, lax.erf(w) - a, (1.0 - a) - _erfc(w))
  u = f * (SQRT_PI / 2.0) * jnp.exp(w * w)
  w = w - u / (1.0 + w * u)
  edge = jnp.where(a == 1, math.inf, math.nan)
  return jnp.sign(y) * jnp.where(a < 1, w, edge)

@_erfinv.defjvp
def _erfinv_jvp(primals, tangents):
  (y,), (t,) = primals, tangents
  x = _erfinv(y)
  return x, t * (SQRT_PI / 2.0) * jnp.exp(x * x)

def erfinv(x) -> Array:
  """The inverse error function on [-1, 1] (+-inf at +-1, NaN outside).

  >>> from tinyjx.scipy import special
  >>> round(float(special.erfinv(special.erf(0.3))), 6)
  0.3
  """
  return _erfinv(_float(x)[0])

# ---------------------------------------------------------------- gamma family
def _lgamma1p_small(z: Array) -> Array:
  """log Gamma(1 + z) for |z| <= 0.5, by its Taylor series."""
  series = _horner(_truncated(LGAMMA1P, z, 0.5), z)
  return -jnp.log1p(z) + z * (ONE_MINUS_EULER + z * series)

def _lgamma_from_half(x: Array) -> Array:
  """log Gamma(x) for x >= 0.5 (other inputs give garbage, to be masked by the caller): the series at 1 below 1.5;
  up to 8.5 the series at 2 after up to six steps of Gamma(x) = (x - 1) Gamma(x - 1) (a sum of positive terms, so
  no cancellation); Stirling's series above."""
  x = jnp.maximum(x, 0.5)
  steps = jnp.clip(jnp.floor(x - 1.5), 0.0, 6.0)
  z = x - 2.0 - steps
  product = jnp.ones_like(x)
  for j in range(1, 7): product = product * jnp.where(steps >= j, x - float(j), 1.0)
  near2 = jnp.log(product) + jnp.log1p(z) + _lgamma1p_small(z)
  near1 = _lgamma1p_small(x - 1.0)
  big = jnp.maximum(x, 8.5)
  # (x - 1/2) log x - x + log sqrt(2 pi), written so that x = inf gives inf, not inf - inf
  stirling = (big - 0.5) * (jnp.log(big) - 1.0) + (LOG_SQRT_2PI - 0.5) + _stirling_correction(big)
  return jnp.where(x < 1.5, near1, jnp.where(x < 8.5, near2, stirling))

@custom_jvp
def _gammaln(x: Array) -> Array:
  reflected = math.log(math.pi) - jnp.log(jnp.abs(jnp.sin(math.pi * _reduced(x)))) - _lgamma_from_half(1.0 - x)
  out = jnp.where(x >= 0.5, _lgamma_from_half(x), reflected)
  return jnp.where(_is_nonpositive_integer(x) | jnp.isinf(x), math.inf, out)

@_gammaln.defjvp
def _gammaln_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _gammaln(x), t * _digamma(x)

def gammaln(x) -> Array:
  """log|Gamma(x)| (inf at 0 and the negative integers); its derivative is digamma.

  >>> from tinyjx.scipy import special
  >>> round(float(special.gammaln(5.0)), 5)    # log(4!)
  3.17805
  """
  return _gammaln(_float(x)[0])

def gammasgn(x) -> Array:
  """The sign of Gamma(x): 1 for x > 0, alternating between the negative integers (NaN at them).

  >>> from tinyjx.scipy import special
  >>> special.gammasgn(-0.5).item()
  -1.0
  """
  x = _float(x)[0]
  odd = jnp.remainder(jnp.floor(x), 2.0) == 1.0
  sign = jnp.where((x > 0) | ~odd, 1.0, -1.0)
  sign = jnp.where(x == 0, jnp.where(jnp.signbit(x), -1.0, 1.0), sign)
  return jnp.where(_is_nonpositive_integer(x) & (x != 0), math.nan, sign).astype(x.dtype)

def gamma(x) -> Array:
  """The gamma function, with its sign for negative x (+-inf at +-0, NaN at the negative integers).

  >>> from tinyjx.scipy import special
  >>> round(float(special.gamma(5.0)), 3)
  24.0
  """
  x = _float(x)[0]
  return gammasgn(x) * jnp.exp(gammaln(x))

def factorial(n, exact: bool = False) -> Array:
  """n! = Gamma(n + 1) for n >= 0 (0 for negative n, as scipy); `exact=True` is not supported (as in JAX).

  >>> from tinyjx.scipy import special
  >>> round(float(special.factorial(5)), 3)
  120.0
  """
  if exact: raise NotImplementedError("factorial: exact=True is not supported (as in JAX); use exact=False")
  n = _float(n)[0]
  return jnp.where(n < 0, 0.0, jnp.exp(gammaln(jnp.maximum(n, 0.0) + 1.0)))

def _digamma_positive(x: Array) -> Array:
  """psi(x) for x > 0: shift to x >= 10, then log x - 1/(2x) - sum B_2k / (2k x^2k)."""
  small = x < 10.0
  shifted = jnp.where(small, x + 10.0, x)
  correction = jnp.zeros_like(x)
  for k in range(10): correction = correction + 1.0 / (x + float(k))
  inv2 = 1.0 / (shifted * shifted)
  asym = jnp.log(shifted) - 0.5 / shifted - inv2 * _horner(_truncated(B2K_OVER_2K, x, 0.01), inv2)
  return asym - jnp.where(small, correction, 0.0)

def _digamma_near_root(x: Array) -> Array:
  """psi(x) for |x - root| <= 0.25, by its Taylor series at the root (relative accuracy where psi is ~0)."""
  hi = float(np.float32(DIGAMMA_ROOT))   # exact in float32 and float64; the rest goes in the second term
  dx = (x - hi) - (DIGAMMA_ROOT - hi)
  return dx * _horner(_truncated(DIGAMMA_ROOT_SERIES, x, 0.25), dx)

def _digamma_positive_root(x: Array) -> Array:
  return jnp.where(jnp.abs(x - DIGAMMA_ROOT) <= 0.25, _digamma_near_root(x), _digamma_positive(x))

@custom_jvp
def _digamma(x: Array) -> Array:
  positive = _digamma_positive_root(jnp.maximum(x, jnp.finfo(x.dtype).tiny))
  reflected = _digamma_positive_root(jnp.maximum(1.0 - x, 1.0)) - math.pi / jnp.tan(math.pi * _reduced(x))
  out = jnp.where(x > 0, positive, reflected)
  return jnp.where(_is_nonpositive_integer(x), math.nan, out)

@_digamma.defjvp
def _digamma_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _digamma(x), t * _trigamma(x)

def digamma(x) -> Array:
  """The digamma function psi(x) = d/dx log Gamma(x) (NaN at 0 and the negative integers, as JAX).

  >>> from tinyjx.scipy import special
  >>> round(float(special.digamma(1.0)), 6)    # -euler_gamma
  -0.577216
  """
  return _digamma(_float(x)[0])

# Euler-Maclaurin for the Hurwitz zeta: ZETA_TERMS explicit terms, then the integral and Bernoulli corrections
ZETA_TERMS = 12

def _signed_power(b: Array, s: Array) -> Array:
  """b^(-s), also for negative b when s is an integer (NaN for a negative b and a fractional s)."""
  mag = jnp.power(jnp.abs(b), -s)
  odd = jnp.remainder(s, 2.0) == 1.0
  neg = jnp.where(s == jnp.floor(s), jnp.where(odd, -mag, mag), math.nan)
  return jnp.where(b < 0, neg, mag)

def _zeta(s: Array, q: Array) -> Array:
  total = jnp.zeros_like(q + s)
  for k in range(ZETA_TERMS): total = total + _signed_power(q + float(k), s)
  a = q + float(ZETA_TERMS)
  a_s = jnp.power(a, -s)
  tail = jnp.power(a, 1.0 - s) / (s - 1.0) + 0.5 * a_s
  factor = s / a                        # s (s+1) ... (s+2j-2) / a^(2j-1)
  for j, c in enumerate(_truncated(B2K_OVER_2K_FACTORIAL, s, 0.1), start=1):
    tail = tail + c * factor * a_s
    factor = factor * (s + (2.0 * j - 1.0)) * (s + 2.0 * j) / (a * a)
  out = total + tail
  out = jnp.where(s == 1.0, math.inf, jnp.where(s < 1.0, math.nan, out))
  return jnp.where(_is_nonpositive_integer(q) & (s >= 1.0), math.inf, out)

def zeta(x, q=None) -> Array:
  """The Hurwitz zeta function sum_k (k + q)^-x for x > 1 (the Riemann zeta when q is None, as scipy).

  >>> from tinyjx.scipy import special
  >>> round(float(special.zeta(2.0, 1.0)), 6)    # pi^2 / 6
  1.644934
  """
  s, q = _float(x, 1.0 if q is None else q)
  return _zeta(s, q)

def _trigamma(x: Array) -> Array:
  """psi'(x) = zeta(2, x) for x > 0; pi^2 / sin^2(pi x) - psi'(1 - x) for x <= 0. Each branch sees only inputs
  in its own domain, so the unused one has a finite gradient (the derivative of digamma's rule is this)."""
  two = jnp.full_like(x, 2.0)
  positive = _zeta(two, jnp.where(x > 0, x, 1.0))
  neg = jnp.where(x > 0, -0.5, x)
  s = jnp.sin(math.pi * _reduced(neg))
  reflected = math.pi ** 2 / (s * s) - _zeta(two, 1.0 - neg)
  return jnp.where(_is_nonpositive_integer(x), math.inf, jnp.where(x > 0, positive, reflected))

def polygamma(n, x) -> Array:
  """The n-th derivative of digamma: psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x); n a non-negative integer.

  Orders 0 and 1 hold for every x; higher orders for x > -12 (the Euler-Maclaurin sum's reach).

  >>> from tinyjx.scipy import special
  >>> round(float(special.polygamma(1, 1.0)), 6)    # pi^2 / 6
  1.644934
  """
  if isinstance(n, (int, float)) and not isinstance(n, bool) and float(n).is_integer():
    if n < 0: raise ValueError(f"polygamma: the order n must be a non-negative integer, got n={n}")
    x = _float(x)[0]
    if n == 0: return _digamma(x)
    if n == 1: return _trigamma(x)
    return (-1.0) ** (n + 1) * math.factorial(int(n)) * _zeta(jnp.full_like(x, n + 1.0), x)
  n, x = _float(n, x)
  s = jnp.where(n >= 1, n + 1.0, 2.0)   # a safe order for the zeta branch, so its gradient is finite where unused
  general = jnp.where(jnp.remainder(n, 2.0) == 1.0, 1.0, -1.0) * jnp.exp(_gammaln(s)) * _zeta(s, x)
  out = jnp.where(n == 0, _digamma(x), jnp.where(n == 1, _trigamma(x), general))
  return jnp.where((n < 0) | (n != jnp.floor(n)), math.nan, out)

def _stirling_correction(x: Array) -> Array:
  """log Gamma(x) - ((x - 1/2) log x - x + log sqrt(2 pi)) for x >= 8.5."""
  inv = 1.0 / x
  return inv * _horner(_truncated(STIRLING_CORRECTION, x, 1.0 / 72.0), inv * inv)

def betaln(a, b) -> Array:
  """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b), without the cancellation of that sum when a or b
  is large (Stirling's series for the large arguments).

  >>> from tinyjx.scipy import special
  >>> round(float(special.betaln(1.0, 1e10)), 4)    # -log(1e10)
  -23.0259
  """
  a, b = _float(a, b)
  lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
  direct = _gammaln(lo) + _gammaln(hi) - _gammaln(lo + hi)
  hi_big = jnp.maximum(hi, 10.0)
  lo_big, lo_small = jnp.maximum(lo, 10.0), jnp.clip(lo, jnp.finfo(a.dtype).tiny, 10.0)
  # one large argument: gammaln(hi) - gammaln(lo + hi) by Stirling, with the -lo and +lo terms cancelled exactly
  total = lo_small + hi_big
  mixed = (_gammaln(lo_small) - (hi_big - 0.5) * jnp.log1p(lo_small / hi_big) - lo_small * jnp.log(total)
           + lo_small + _stirling_correction(hi_big) - _stirling_correction(total))
  total = lo_big + hi_big
  both = (LOG_SQRT_2PI - 0.5 * jnp.log(total) + (lo_big - 0.5) * jnp.log(lo_big / total)
          + (hi_big - 0.5) * jnp.log1p(-lo_big / total)
          + _stirling_correction(lo_big) + _stirling_correction(hi_big) - _stirling_correction(total))
  return jnp.where(hi < 10.0, direct, jnp.where(lo < 10.0, jnp.where(lo > 0, mixed, direct), both))

def multigammaln(a, d: int) -> Array:
  """The log of the multivariate gamma function of dimension d: d(d-1)/4 log(pi) + sum_j gammaln(a - j/2).

  >>> from tinyjx.scipy import special
  >>> round(float(special.multigammaln(3.0, 2)), 4)
  1.5502
  """
  try:
    d = operator.index(d)
  except TypeError:
    raise TypeError(f"multigammaln: the dimension d must be a Python int, got {d!r}; pass it as a static "
                    "integer (e.g. an array's shape entry)") from None
  if d < 1: raise ValueError(f"multigammaln: the dimension d must be >= 1, got d={d}")
  a = _float(a)[0]
  total = jnp.full_like(a, d * (d - 1) / 4.0 * math.log(math.pi))
  for j in range(d): total = total + _gammaln(a - j / 2.0)
  return total

# ---------------------------------------------------------------- logistic and entropy
def expit(x) -> Array:
  """The logistic sigmoid 1 / (1 + exp(-x)).

  >>> from tinyjx.scipy import special
  >>> float(special.expit(0.0))
  0.5
  """
  return lax.logistic(_float(x)[0])

def logit(x) -> Array:
  """log(p / (1 - p)), the inverse of expit (-inf at 0, inf at 1, NaN outside [0, 1]); accurate near p = 1/2.

  >>> from tinyjx.scipy import special
  >>> float(special.logit(0.5))
  0.0
  """
  p = _float(x)[0]
  # near 1/2, log1p of (2p - 1) / (1 - p) (both exact there) keeps the small result's relative accuracy
  return jnp.where(p < 0.25, jnp.log(p) - jnp.log1p(-p), jnp.log1p((2.0 * p - 1.0) / (1.0 - p)))

@custom_jvp
def _xlogy(x: Array, y: Array) -> Array:
  return jnp.where(x == 0, 0.0, x * jnp.log(y))

@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
  (x, y), (tx, ty) = primals, tangents
  return _xlogy(x, y), tx * jnp.log(y) + ty * x / y

def xlogy(x, y) -> Array:
  """x * log(y), and 0 where x == 0 (whatever y); the derivative is (log y, x / y) there too, as JAX.

  >>> from tinyjx.scipy import special
  >>> float(special.xlogy(0.0, 0.0))
  0.0
  """
  x, y = _float(x, y)
  shape = jnp.broadcast_shapes(x.shape, y.shape)
  return _xlogy(jnp.broadcast_to(x, shape), jnp.broadcast_to(y, shape))

@custom_jvp
def _xlog1py(x: Array, y: Array) -> Array:
  return jnp.where(x == 0, 0.0, x * jnp.log1p(y))

@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
  (x, y), (tx, ty) = primals, tangents
  return _xlog1py(x, y), tx * jnp.log1p(y) + ty * x / (1.0 + y)

def xlog1py(x, y) -> Array:
  """x * log1p(y), and 0 where x == 0 (whatever y); derivatives (log1p y, x / (1 + y)), as JAX.

  >>> from tinyjx.scipy import special
  >>> float(special.xlog1py(0.0, -1.0))
  0.0
  """
  x, y = _float(x, y)
  shape = jnp.broadcast_shapes(x.shape, y.shape)
  return _xlog1py(jnp.broadcast_to(x, shape), jnp.broadcast_to(y, shape))

@custom_jvp
def _xlogx(x: Array) -> Array:
  return jnp.where(x == 0, 0.0, x * jnp.log(x))

@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _xlogx(x), t * (jnp.log(x) + 1.0)

def entr(x) -> Array:
  """The elementwise entropy -x log x: 0 at 0, -inf for x < 0; derivative -(1 + log x) (+inf at 0, as JAX).

  >>> from tinyjx.scipy import special
  >>> round(float(special.entr(0.5)), 6)
  0.346574
  """
  x = _float(x)[0]
  return jnp.where(x < 0, -math.inf, -_xlogx(x))

def rel_entr(p, q) -> Array:
  """p log(p / q) for p, q > 0; 0 where p == 0 and q >= 0; inf otherwise (scipy's relative entropy).

  >>> from tinyjx.scipy import special
  >>> float(special.rel_entr(0.0, 2.0))
  0.0
  """
  p, q = _float(p, q)
  both = (p > 0) & (q > 0)
  safe_p, safe_q = jnp.where(both, p, 1.0), jnp.where(both, q, 1.0)
  value = safe_p * jnp.log(safe_p / safe_q)
  return jnp.where(both, value, jnp.where((p == 0) & (q >= 0), 0.0, math.inf))

def kl_div(p, q) -> Array:
  """p log(p / q) - p + q for p, q > 0; q where p == 0 and q >= 0; inf otherwise (scipy's kl_div).

  >>> from tinyjx.scipy import special
  >>> float(special.kl_div(1.0, 1.0))
  0.0
  """
  p, q = _float(p, q)
  both = (p > 0) & (q > 0)
  value = rel_entr(p, q) - p + q
  return jnp.where(both, value, jnp.where((p == 0) & (q >= 0), q, math.inf))

# ---------------------------------------------------------------- modified Bessel functions, scaled
def _bessel_t(a: Array) -> Array: return 1.0 - (2.0 * BESSEL_L) / (a + BESSEL_L)

@custom_jvp
def _i0e(x: Array) -> Array:
  a = jnp.abs(x)
  return _chebyshev(I0E_CHEB, _bessel_t(a)) / jnp.sqrt(a + BESSEL_L)

@custom_jvp
def _i1e(x: Array) -> Array:
  a = jnp.abs(x)
  return x * _chebyshev(I1E_CHEB, _bessel_t(a)) / ((a + BESSEL_L) * jnp.sqrt(a + BESSEL_L))

@_i0e.defjvp
def _i0e_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  y = _i0e(x)
  return y, t * (_i1e(x) - jnp.sign(x) * y)

@_i1e.defjvp
def _i1e_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  y = _i1e(x)
  safe = jnp.where(x == 0, 1.0, x)
  slope = jnp.where(x == 0, 0.5, _i0e(x) - y * (jnp.sign(x) + 1.0 / safe))
  return y, t * slope

def i0e(x) -> Array:
  """The exponentially scaled modified Bessel function of order 0, exp(-|x|) I0(x).

  >>> from tinyjx.scipy import special
  >>> round(float(special.i0e(0.0)), 6)
  1.0
  """
  return _i0e(_float(x)[0])

def i1e(x) -> Array:
  """The exponentially scaled modified Bessel function of order 1, exp(-|x|) I1(x).

  >>> from tinyjx.scipy import special
  >>> round(float(special.i1e(1.0)), 6)
  0.20791
  """
  return _i1e(_float(x)[0])

def i0(x) -> Array:
  """The modified Bessel function of order 0, I0(x) = exp(|x|) i0e(x).

  >>> from tinyjx.scipy import special
  >>> round(float(special.i0(1.0)), 5)
  1.26607
  """
  x = _float(x)[0]
  return jnp.exp(jnp.abs(x)) * _i0e(x)

def i1(x) -> Array:
  """The modified Bessel function of order 1, I1(x) = exp(|x|) i1e(x).

  >>> from tinyjx.scipy import special
  >>> round(float(special.i1(1.0)), 5)
  0.56516
  """
  x = _float(x)[0]
  return jnp.exp(jnp.abs(x)) * _i1e(x)
