"""fit_rational: the float32 tanh and erf of lower/prelude.py (FAST_MATH `tjx_tanh_f32`, `tjx_erf_f32`), reproducibly.

f(x) = x * P(x^2) / Q(x^2) on |x| <= CLAMP, an odd rational with one division and no exp. With s = x^2 this fits
g(s) = f(sqrt(s)) / (f'(0) sqrt(s)) on [0, CLAMP^2] by P(s) / Q(s), P(0) = Q(0) = 1 (so a tiny x comes back exactly
times f'(0): tanh's is 1, erf's 2 / sqrt(pi), which the kernel multiplies in first),
minimising the largest relative error: an iterated weighted least squares on the linearised error
(P - g Q) / (g Q_prev), with Lawson's update of the weights, which converges to the equioscillating minimax fit.
Beyond CLAMP the float32 function is +-1 (1 - tanh(x) < 2^-25 past x = 13 ln 2 = 9.01, erfc(x) < 2^-25 past 3.92),
so the kernel clamps x there.

Run `python bench/fit_rational.py [tanh|erf] [NUM DEN]` (degrees in s; defaults: tanh 4 5 clamp 9.5, erf 4 5 clamp
4): prints the float64 minimax relative error and
the coefficients rounded to float32 as C literals, numerator then denominator, lowest degree first (the prelude
evaluates them by Horner in that order reversed). tests/test_fast_math.py measures the float32 kernel's ulp error.
"""
from __future__ import annotations
import math, sys
import numpy as np

FUNCTIONS = {'tanh': (np.tanh, 1.0, 9.5), 'erf': (np.vectorize(math.erf), 2 / math.sqrt(math.pi), 4.0)}
FN, CLAMP = 'tanh', 9.5

def target(s: np.ndarray) -> np.ndarray:
  fn, slope, _ = FUNCTIONS[FN]
  x = np.sqrt(s)
  return np.where(s > 0, fn(x) / (slope * np.where(s > 0, x, 1.0)), 1.0)

def sample(n: int = 40000) -> np.ndarray:
  """points in s = x^2, dense in x near both ends (Chebyshev nodes in x on [0, CLAMP])"""
  x = CLAMP * (1 - np.cos(np.linspace(0, np.pi / 2, n))) ** 1.0
  x = np.unique(np.concatenate([x, np.linspace(0, CLAMP, n)]))
  return x * x

def solve(s, g, w, num: int, den: int, fixed: dict) -> tuple[np.ndarray, np.ndarray]:
  """least squares of w * (P(s) - g Q(s)) with P(0) = Q(0) = 1 and the coefficients in `fixed` (index into
  p[1:] + q[1:] -> value) held; returns (p, q) lowest degree first"""
  cols = [s ** k for k in range(1, num + 1)] + [-g * s ** k for k in range(1, den + 1)]
  rhs = g - 1.0 - sum(cols[i] * v for i, v in fixed.items())
  free = [i for i in range(num + den) if i not in fixed]
  a = np.stack([cols[i] for i in free], 1) * w[:, None]
  scale = np.abs(a).max(0)
  c = dict(fixed)
  c.update(zip(free, np.linalg.lstsq(a / scale, rhs * w, rcond=None)[0] / scale))
  c = [c[i] for i in range(num + den)]
  return np.concatenate([[1.0], c[:num]]), np.concatenate([[1.0], c[num:]])

def rel_error(p, q, s, g) -> np.ndarray:
  return np.polyval(p[::-1], s) / np.polyval(q[::-1], s) / g - 1.0

def fit(num: int, den: int, fixed: dict | None = None, steps: int = 200) -> tuple[np.ndarray, np.ndarray, float]:
  s = sample()
  g = target(s)
  lawson = np.ones_like(s)
  q = np.ones(1)
  best = (None, None, np.inf)
  for _ in range(steps):
    p, q = solve(s, g, np.sqrt(lawson) / (g * np.polyval(q[::-1], s)), num, den, fixed or {})
    err = np.abs(rel_error(p, q, s, g))
    if err.max() < best[2]: best = (p, q, err.max())
    lawson = lawson * err / np.sum(lawson * err)
  return best

def fit_float32(num: int, den: int) -> tuple[np.ndarray, np.ndarray, float]:
  """the minimax fit with every coefficient a float32: round one coefficient at a time, highest degree first,
  and refit the others around it"""
  fixed = {}
  order = [i for pair in zip(range(num + den - 1, num - 1, -1), range(num - 1, -1, -1)) for i in pair]
  order += [i for i in range(num + den) if i not in order]
  for i in order[:num + den]:
    p, q, _ = fit(num, den, fixed)
    fixed[i] = float(np.float32(np.concatenate([p[1:], q[1:]])[i]))
  c = [fixed[i] for i in range(num + den)]
  p, q = np.array([1.0] + c[:num]), np.array([1.0] + c[num:])
  s = sample()
  return p, q, float(np.abs(rel_error(p, q, s, target(s))).max())

def c_literal(v: float) -> str:
  return f"{np.float32(v)!r}".replace('np.float32(', '').rstrip(')') + 'f'

if __name__ == '__main__':
  args = sys.argv[1:]
  if args and args[0] in FUNCTIONS: FN, args = args[0], args[1:]
  CLAMP = FUNCTIONS[FN][2]
  num, den = (int(v) for v in args[:2]) if len(args) > 1 else (4, 5)
  p, q, err = fit(num, den)
  print(f"{FN}: degrees {num}/{den} in x^2, clamp {CLAMP}: max relative error {err:.3e} ({err / 2.0 ** -24:.3f} ulp "
        f"at 1)")
  p, q, err = fit_float32(num, den)
  print(f"with float32 coefficients: {err:.3e} ({err / 2.0 ** -24:.3f} ulp at 1)")
  print("P:", ", ".join(c_literal(v) for v in p))
  print("Q:", ", ".join(c_literal(v) for v in q))
