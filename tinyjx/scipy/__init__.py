"""tinyjx.scipy: the `jax.scipy` subset: `linalg` (factorizations and solves), `special` (gammaln, digamma, erf,
erfinv, xlogy, logsumexp, ...) and `stats` (norm, multivariate_normal, bernoulli, beta, gamma, t, ...), as in JAX:
`import tinyjx.scipy as jsp; jsp.special.gammaln(x)` or `from tinyjx.scipy.stats import norm`.
"""
from tinyjx.scipy import linalg, special, stats  # noqa: F401
