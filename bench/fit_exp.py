"""fit_exp: the float32 exp polynomial of lower/prelude.py (FAST_MATH `tjx_exp_reduce`), reproducibly.

exp(r) = 1 + r + r^2 Q(r) on |r| <= 0.35 (the kernel's r = x - n ln 2 lies within ln 2 / 2 = 0.3466 and a rounding),
Q of degree DEG - 2: the coefficients of r^2 .. r^DEG minimise the largest relative error, by an iterated weighted
least squares with Lawson's update of the weights (which converges to the equioscillating minimax fit). Keeping the
1 and the r exact makes exp(0) = 1 exactly and expm1(r) = r + r^2 Q(r) exact in its leading term. The coefficients
are then rounded to float32 one at a time, lowest degree first, refitting the higher ones around each.

Run `python bench/fit_exp.py [DEG]` (default 6): prints the float64 minimax relative error, the error with float32
coefficients and those coefficients as C literals, r^2's first (the prelude evaluates them by Horner from the last).
tests/test_fast_math.py measures the float32 kernel's ulp error.
"""
from __future__ import annotations
import sys
import numpy as np

HALF_WIDTH = 0.35

def sample(n: int = 20001) -> np.ndarray:
  """Chebyshev nodes and an even grid on [-HALF_WIDTH, HALF_WIDTH]"""
  grid = np.linspace(-HALF_WIDTH, HALF_WIDTH, n)
  return np.unique(np.concatenate([HALF_WIDTH * np.cos(np.linspace(0, np.pi, n)), grid]))

def rel_error(c: dict, r: np.ndarray) -> np.ndarray:
  return (1.0 + r + sum(v * r ** k for k, v in c.items())) / np.exp(r) - 1.0

def fit(deg: int, fixed: dict, steps: int = 300) -> tuple[dict, float]:
  """the coefficients of r^2 .. r^deg (a dict degree -> value), those in `fixed` held, and their largest error"""
  r = sample()
  g = np.exp(r)
  free = [k for k in range(2, deg + 1) if k not in fixed]
  rhs = (g - 1.0 - r - sum(v * r ** k for k, v in fixed.items())) / g
  a = np.stack([r ** k / g for k in free], 1)
  lawson, best = np.ones_like(r), ({}, np.inf)
  for _ in range(steps):
    w = np.sqrt(lawson)
    c = dict(fixed)
    c.update(zip(free, np.linalg.lstsq(a * w[:, None], rhs * w, rcond=None)[0]))
    err = np.abs(rel_error(c, r))
    if err.max() < best[1]: best = (c, err.max())
    lawson = lawson * err / np.sum(lawson * err)
  return best

def fit_float32(deg: int) -> tuple[dict, float]:
  fixed: dict = {}
  for k in range(2, deg + 1):
    c, _ = fit(deg, fixed)
    fixed[k] = float(np.float32(c[k]))
  return fixed, float(np.abs(rel_error(fixed, sample())).max())

if __name__ == '__main__':
  deg = int(sys.argv[1]) if len(sys.argv) > 1 else 6
  _, err = fit(deg, {})
  print(f"exp, degree {deg} on |r| <= {HALF_WIDTH}: max relative error {err:.3e} ({err / 2.0 ** -23:.3f} ulp at 1)")
  c, err = fit_float32(deg)
  print(f"with float32 coefficients: {err:.3e}")
  print("Q:", ", ".join(f"{np.float32(c[k]):.10e}f" for k in range(2, deg + 1)))
