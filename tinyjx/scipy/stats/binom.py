"""The binomial distribution of `n` trials with success probability `p`, as `jax.scipy.stats.binom`."""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx.array import Array
from tinyjx.scipy import special
from tinyjx.scipy.stats._common import promote

def logpmf(k, n, p, loc=0) -> Array:
  """log C(n, y) + y log p + (n - y) log(1 - p) for y = k - loc in [0, n], -inf outside; log C(n, y) is
  -log(n + 1) - betaln(y + 1, n - y + 1), accurate for large n.

  >>> from tinyjx.scipy.stats import binom
  >>> round(float(binom.logpmf(2, 5, 0.3)), 4)
  -1.1754
  """
  k, n, p, loc = promote(k, n, p, loc)
  y = k - loc
  inside = (y >= 0) & (y <= n)
  safe = jnp.clip(y, 0.0, n)
  log_comb = -jnp.log1p(n) - special.betaln(safe + 1.0, n - safe + 1.0)
  value = log_comb + special.xlogy(safe, p) + special.xlog1py(n - safe, -p)
  return jnp.where(inside, value, -math.inf)

def pmf(k, n, p, loc=0) -> Array:
  """P(K = k).

  >>> from tinyjx.scipy.stats import binom
  >>> round(float(binom.pmf(0, 2, 0.5)), 6)
  0.25
  """
  return jnp.exp(logpmf(k, n, p, loc))
