"""tinyjx.scipy.stats: `jax.scipy.stats`, one module per distribution family, each with JAX's functions and
argument names (`norm.logpdf(x, loc=0, scale=1)`, `poisson.logpmf(k, mu, loc=0)`, ...).

Densities are written in log space from `tinyjx.scipy.special` (xlogy, gammaln, log_ndtr ...), so they are
finite where scipy's are, differentiable, and trace under jit and vmap. Outside a distribution's support the log
density is -inf and the CDF 0 or 1, as in scipy; out-of-range parameters give NaN through the formulas, as JAX.

>>> from tinyjx.scipy import stats
>>> round(float(stats.norm.logpdf(0.0)), 6)
-0.918939
"""
from tinyjx.scipy.stats import (bernoulli, beta, binom, cauchy, chi2, dirichlet, expon, gamma, geom, laplace,  # noqa
                                logistic, multivariate_normal, norm, poisson, t, uniform)
