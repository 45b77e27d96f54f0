"""Accuracy of the float32 transcendental functions of the C prelude (lower/prelude.py FAST_MATH) that jitted
float32 exp, log, log1p, expm1, tanh and erf compile to: the largest error in ulp against float64 over a dense
sweep of float32 inputs (every 61st float32 bit pattern, every 613th for erf, from 0 to past the clamp, both
signs), plus the special values +-0, subnormals, +-inf, NaN. The bounds stated here are the measured maxima,
rounded up."""
import numpy as np
import pytest

import tinyjx
import tinyjx.numpy as jnp
import tinyjx.scipy.special

# bench/fit_rational.py's rationals; a sweep of every float32 in [0, 10) measured tanh 5.66 ulp, erf 6.80 ulp
TANH_MAX_ULP = 6
ERF_MAX_ULP = 7
EXP_MAX_ULP = 1       # bench/fit_exp.py's degree 6: measured 0.86 here, 0.90 over every float32 input
LOG_MAX_ULP = 1       # measured 0.82
LOG1P_MAX_ULP = 1.5   # log's polynomial and a rounding correction: measured 1.44
EXPM1_MAX_ULP = 1.5   # exp's polynomial without its 1, an exact 2^n - 1: measured 1.42 (1.47 over every 3rd float32)

def sweep(lo: float, hi: float, stride: int = 61) -> np.ndarray:
  """float32 values of both signs whose magnitudes run from lo to hi, every `stride`th bit pattern"""
  bits = np.arange(np.float32(lo).view(np.uint32), np.float32(hi).view(np.uint32), stride, dtype=np.uint32)
  x = bits.view(np.float32)
  return np.concatenate([x, -x])

def ulp_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """|got - want| in units of the float32 spacing at want (want in float64); got equal to want rounded to float32
  (an overflow to inf included) counts 0"""
  with np.errstate(over='ignore'):
    want32 = want.astype(np.float32)
  spacing = np.spacing(np.where(np.isinf(want32), np.float32(3e38), np.abs(want32))).astype(np.float64)
  same = (got == want32) | (np.isnan(got) & np.isnan(want))
  return np.where(same, 0.0, np.abs(got.astype(np.float64) - want) / spacing)

def run(fn, x: np.ndarray) -> np.ndarray:
  return np.asarray(tinyjx.jit(fn)(jnp.asarray(x)))

def test_tanh_ulp_over_dense_sweep():
  x = sweep(1e-30, 12.0)
  err = ulp_error(run(jnp.tanh, x), np.tanh(x.astype(np.float64)))
  assert err.max() <= TANH_MAX_ULP, (x[err.argmax()], err.max())

def test_tanh_near_the_clamp_and_saturation():
  x = np.linspace(8.5, 10.0, 20001, dtype=np.float32)
  x = np.concatenate([x, -x])
  got = run(jnp.tanh, x)
  assert ulp_error(got, np.tanh(x.astype(np.float64))).max() <= TANH_MAX_ULP
  assert np.all(np.abs(got) <= 1.0)
  assert np.all(got[np.abs(x) >= 9.5] == np.sign(x[np.abs(x) >= 9.5]))        # past the clamp: exactly +-1

def test_tanh_special_values():
  sub = np.float32(1e-40)
  x = np.array([0.0, -0.0, sub, -sub, 1e-30, np.inf, -np.inf, np.nan, 3e38, -3e38], np.float32)
  got = run(jnp.tanh, x)
  np.testing.assert_array_equal(got[:5], x[:5])             # exact, and -0 keeps its sign
  assert np.signbit(got[1]) and not np.signbit(got[0])
  np.testing.assert_array_equal(got[5:7], [1.0, -1.0])
  assert np.isnan(got[7])
  np.testing.assert_array_equal(got[8:], [1.0, -1.0])

def test_erf_ulp_and_special_values():
  import math
  x = sweep(1e-30, 5.0, stride=613)
  err = ulp_error(run(tinyjx.scipy.special.erf, x), np.vectorize(math.erf)(x.astype(np.float64)))
  assert err.max() <= ERF_MAX_ULP, (x[err.argmax()], err.max())
  sub = np.float32(1e-40)
  special = np.array([0.0, -0.0, sub, np.inf, -np.inf, np.nan, 4.5, -30.0], np.float32)
  got = run(tinyjx.scipy.special.erf, special)
  assert got[0] == 0 and not np.signbit(got[0]) and got[1] == 0 and np.signbit(got[1])
  assert abs(float(got[2]) - 2 / math.sqrt(math.pi) * float(sub)) <= 1.5e-45       # one subnormal step
  np.testing.assert_array_equal(got[3:5], [1.0, -1.0])
  assert np.isnan(got[5])
  np.testing.assert_array_equal(got[6:], [1.0, -1.0])

def test_exp_ulp():
  x = sweep(1e-30, 89.0)
  x = x[x > -103.0]
  err = ulp_error(run(jnp.exp, x), np.exp(x.astype(np.float64)))
  assert err.max() <= EXP_MAX_ULP, (x[err.argmax()], err.max())

def test_exp_special_values():
  x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 100.0, -200.0, 88.72, -87.3], np.float32)
  got = run(jnp.exp, x)
  np.testing.assert_array_equal(got[:4], [1.0, 1.0, np.inf, 0.0])
  assert np.isnan(got[4])
  assert got[5] == np.inf and got[6] == 0.0
  assert ulp_error(got[7:], np.exp(x[7:].astype(np.float64))).max() <= EXP_MAX_ULP

def test_log_ulp():
  x = sweep(1e-44, 3e38)
  x = x[x > 0]
  err = ulp_error(run(jnp.log, x), np.log(x.astype(np.float64)))
  assert err.max() <= LOG_MAX_ULP, (x[err.argmax()], err.max())

@pytest.mark.parametrize('approximate', [True, False])
def test_gelu_float32_matches_float64(approximate):
  x = np.linspace(-12.0, 12.0, 100001, dtype=np.float32)
  got = run(lambda v: tinyjx.nn.gelu(v, approximate=approximate), x)
  want = np.asarray(tinyjx.nn.gelu(jnp.asarray(x.astype(np.float64)), approximate=approximate))
  # 0.5 x (1 + tanh(.)) cancels for x < 0: its error is |x| times tanh's near -1
  assert np.all(np.abs(got - want) <= 2e-6 * np.abs(want) + 4e-7 * np.abs(x))

def test_log1p_ulp_and_special_values():
  x = sweep(1e-44, 3e38)
  x = x[x > -1]
  err = ulp_error(run(jnp.log1p, x), np.log1p(x.astype(np.float64)))
  assert err.max() <= LOG1P_MAX_ULP, (x[err.argmax()], err.max())
  sub = np.float32(1e-40)
  special = np.array([0.0, -0.0, sub, -sub, 1e-30, np.inf, -1.0, -2.0, -np.inf, np.nan, -0.99999994], np.float32)
  got = run(jnp.log1p, special)
  np.testing.assert_array_equal(got[:5], special[:5])         # exact below an ulp of 1, -0 keeping its sign
  assert np.signbit(got[1]) and not np.signbit(got[0])
  np.testing.assert_array_equal(got[5:7], [np.inf, -np.inf])
  assert np.all(np.isnan(got[7:10]))
  assert ulp_error(got[10:], np.log1p(special[10:].astype(np.float64))).max() <= LOG1P_MAX_ULP

def test_expm1_ulp_and_special_values():
  x = sweep(1e-44, 89.0)
  x = x[x > -104.0]
  with np.errstate(over='ignore'):
    err = ulp_error(run(jnp.expm1, x), np.expm1(x.astype(np.float64)))
  assert err.max() <= EXPM1_MAX_ULP, (x[err.argmax()], err.max())
  sub = np.float32(1e-40)
  special = np.array([0.0, -0.0, sub, -sub, np.inf, -np.inf, np.nan, 100.0, -200.0, 88.72, 88.5, 1e-8], np.float32)
  got = run(jnp.expm1, special)
  np.testing.assert_array_equal(got[:4], special[:4])
  assert np.signbit(got[1]) and not np.signbit(got[0])
  np.testing.assert_array_equal(got[4:6], [np.inf, -1.0])
  assert np.isnan(got[6]) and got[7] == np.inf and got[8] == -1.0
  assert ulp_error(got[9:], np.expm1(special[9:].astype(np.float64))).max() <= EXPM1_MAX_ULP   # up to overflow

@pytest.mark.parametrize('name', ['exp', 'tanh', 'erf', 'log1p', 'expm1'])
def test_nans_of_either_sign_come_back_nan(name):
  """The clamps compare float bits as integers, where a NaN is a number (a positive one past the top clamp, a
  negative one, such as the NaN x86 makes of 0 * inf, past the bottom one); the NaN still comes back, at every
  position of a vectorized loop, beside finite values that are unchanged."""
  fn = {'exp': jnp.exp, 'tanh': jnp.tanh, 'erf': tinyjx.scipy.special.erf, 'log1p': jnp.log1p, 'expm1': jnp.expm1}[name]
  x = np.linspace(-0.9 if name == 'log1p' else -3.0, 3.0, 64, dtype=np.float32)     # (log1p is NaN below -1)
  nans = np.array([0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345, 0x7fffffff, 0xffffffff], np.uint32)
  where = np.array([0, 9, 17, 30, 46, 63])
  x[where] = nans.view(np.float32)
  got = run(fn, x)
  assert np.all(np.isnan(got[where]))
  finite = np.setdiff1d(np.arange(64), where)
  assert not np.any(np.isnan(got[finite]))
  np.testing.assert_array_equal(got[finite], run(fn, x[finite]))
