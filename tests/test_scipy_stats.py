"""Tests of tinyjx.scipy.stats (jax.scipy.stats): densities against closed forms computed here with math and numpy,
sweeps against scipy.stats where it is installed, JAX's values at the support edges (generated once with JAX 0.10
and written in), gradients against their closed forms, the multivariate normal against numpy's linear algebra
(batched x, mean and cov), and the functions under jit and vmap."""
import math
import numpy as np
import pytest

import tinyjx
import tinyjx.numpy as jnp
from tinyjx.scipy import stats

pytestmark = pytest.mark.usefixtures('semantics_device')

def close(got, want, rtol=2e-6, atol=0.0):
  np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)

def same(got, want):
  np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))

# ---------------------------------------------------------------- closed forms
def test_norm_closed_forms():
  x = np.array([-3.0, -0.5, 0.0, 1.0, 4.0])
  z = (x - 0.5) / 2.0
  close(stats.norm.logpdf(x, 0.5, 2.0), -0.5 * z * z - math.log(2.0) - 0.5 * math.log(2 * math.pi))
  close(stats.norm.pdf(x, 0.5, 2.0), np.exp(-0.5 * z * z) / (2.0 * math.sqrt(2 * math.pi)))
  cdf = [0.5 * math.erfc(-v / math.sqrt(2)) for v in z]
  close(stats.norm.cdf(x, 0.5, 2.0), cdf)
  close(stats.norm.sf(x, 0.5, 2.0), [1 - c for c in cdf], 3e-6)
  close(stats.norm.logcdf(x, 0.5, 2.0), np.log(cdf), 3e-6)
  z975 = 1.959963984540054
  close(stats.norm.ppf(jnp.array([0.025, 0.5, 0.975]), 1.0, 2.0), [1 - 2 * z975, 1.0, 1 + 2 * z975])
  close(stats.norm.isf(0.025), 1.959963984540054)
  close(stats.norm.logcdf(-40.0), -804.6084420137538)                   # far tail: finite and exact
  close(stats.norm.logsf(40.0), -804.6084420137538)

def test_simple_families_closed_forms():
  x = np.array([0.25, 1.0, 3.0])
  close(stats.expon.logpdf(x, 0.0, 2.0), -x / 2 - math.log(2.0))
  close(stats.expon.cdf(x, 0.0, 2.0), 1 - np.exp(-x / 2))
  close(stats.expon.logcdf(x), np.log(-np.expm1(-x)))
  close(stats.expon.logcdf(1e-6), math.log(-math.expm1(-1e-6)))          # accurate next to the support's edge
  close(stats.expon.ppf(0.5, 1.0, 2.0), 1 + 2 * math.log(2.0))
  close(stats.laplace.logpdf(x, 1.0, 2.0), -np.abs(x - 1) / 2 - math.log(4.0))
  close(stats.laplace.cdf(jnp.array([-1.0, 3.0]), 1.0, 2.0), [0.5 * math.exp(-1), 1 - 0.5 * math.exp(-1)])
  close(stats.uniform.logpdf(x, 0.0, 4.0), [-math.log(4.0)] * 3)
  close(stats.cauchy.logpdf(x, 1.0, 2.0), -np.log(math.pi * 2 * (1 + ((x - 1) / 2) ** 2)))
  close(stats.cauchy.cdf(-1e10), 1 / (math.pi * 1e10))                    # the far tail keeps its digits
  close(stats.cauchy.ppf(0.75, 1.0, 2.0), 3.0)
  close(stats.logistic.logpdf(jnp.array([-100.0, 0.0, 100.0])), [-100.0, -math.log(4.0), -100.0])
  close(stats.logistic.ppf(0.3), math.log(0.3 / 0.7))
  close(stats.t.logpdf(0.5, 1.0), -math.log(math.pi * 1.25))             # df = 1 is the Cauchy
  close(stats.t.logpdf(1.0, 3.0), math.lgamma(2) - math.lgamma(1.5) - 0.5 * math.log(3 * math.pi) - 2 * math.log(4 / 3))

def test_shape_families_closed_forms():
  close(stats.beta.logpdf(0.3, 2.0, 3.0), math.log(12 * 0.3 * 0.7 ** 2))
  close(stats.beta.logpdf(1.25, 2.0, 3.0, 1.0, 0.5), math.log(2 * 12 * 0.5 * 0.5 ** 2))
  close(stats.gamma.logpdf(2.0, 3.0, 0.0, 0.5), math.log(4.0 ** 2 * math.exp(-4.0) / 2 / 0.5))
  close(stats.chi2.logpdf(3.0, 4.0), math.log(3.0 * math.exp(-1.5) / 4))
  close(stats.poisson.logpmf(jnp.array([0.0, 3.0]), 2.5), [-2.5, 3 * math.log(2.5) - 2.5 - math.log(6)])
  close(stats.binom.logpmf(3.0, 10.0, 0.3), math.log(math.comb(10, 3) * 0.3 ** 3 * 0.7 ** 7))
  close(stats.binom.logpmf(500.0, 1000.0, 0.5), math.log(math.comb(1000, 500)) - 1000 * math.log(2), 1e-5)
  close(stats.geom.logpmf(3.0, 0.25), math.log(0.75 ** 2 * 0.25))
  close(stats.bernoulli.logpmf(jnp.array([0.0, 1.0]), 0.25), [math.log(0.75), math.log(0.25)])
  alpha, x = np.array([1.0, 2.0, 3.0]), np.array([0.2, 0.3, 0.5])
  want = math.lgamma(6) - sum(math.lgamma(a) for a in alpha) + sum((a - 1) * math.log(v) for a, v in zip(alpha, x))
  close(stats.dirichlet.logpdf(x, alpha), want)
  close(stats.dirichlet.logpdf(x[:2], alpha), want)                     # K - 1 components: the last is 1 - sum
  reverse = math.lgamma(6) - math.log(2) + 1 * math.log(0.3) + 2 * math.log(0.2)
  close(stats.dirichlet.pdf(np.stack([x, x[::-1]], axis=1), alpha), [math.exp(want), math.exp(reverse)])

# ---------------------------------------------------------------- JAX's values at the edges
def test_support_edges_match_jax():
  inf = math.inf
  same(stats.expon.logpdf(jnp.array([-1.0, 0.0, 1.0])), [-inf, 0.0, -1.0])
  same(stats.expon.cdf(jnp.array([-1.0, 0.0])), [0.0, 0.0])
  same(stats.expon.logcdf(jnp.array([-1.0, 0.0])), [-inf, -inf])
  same(stats.expon.sf(jnp.array([-1.0, 0.0])), [1.0, 1.0])
  same(stats.expon.ppf(jnp.array([-0.5, 0.0, 1.0, 2.0])), [math.nan, 0.0, inf, math.nan])
  same(stats.uniform.logpdf(jnp.array([-1.0, 0.0, 1.0, 2.0])), [-inf, 0.0, 0.0, -inf])
  same(stats.uniform.cdf(jnp.array([-1.0, 2.0])), [0.0, 1.0])
  same(stats.uniform.ppf(jnp.array([-1.0, 2.0])), [math.nan, math.nan])
  close(stats.bernoulli.logpmf(jnp.array([-1.0, 2.0, 0.5]), 0.3), [-inf, -inf, -0.78032386], 1e-6)
  same(stats.bernoulli.logpmf(jnp.array([0.0, 1.0]), 0.0), [0.0, -inf])
  same(stats.bernoulli.logpmf(jnp.array([0.0, 1.0]), 1.0), [-inf, 0.0])
  close(stats.bernoulli.cdf(jnp.array([-1.0, 0.0, 0.5, 1.0, 2.0]), 0.3), [0.0, 0.7, 0.7, 1.0, 1.0], 1e-6)
  same(stats.bernoulli.ppf(jnp.array([0.0, 0.5, 0.7, 0.8, 1.0]), 0.3), [0.0, 0.0, 0.0, 1.0, 1.0])
  same(stats.beta.logpdf(jnp.array([-0.1, 1.1]), 1.0, 1.0), [-inf, -inf])
  same(stats.beta.logpdf(jnp.array([0.0, 1.0]), 2.0, 3.0), [-inf, -inf])
  same(stats.beta.logpdf(jnp.array([0.0, 1.0]), 0.5, 0.5), [inf, inf])
  same(stats.gamma.logpdf(jnp.array([-1.0]), 1.0), [-inf])
  same(stats.gamma.logpdf(jnp.array([0.0, 0.0]), jnp.array([2.0, 0.5])), [-inf, inf])
  same(stats.poisson.logpmf(jnp.array([-1.0, 1.5]), 2.0), [-inf, -inf])
  same(stats.poisson.logpmf(jnp.array([0.0, 1.0]), 0.0), [0.0, -inf])
  same(stats.binom.logpmf(jnp.array([-1.0, 6.0]), 5.0, 0.3), [-inf, -inf])
  close(stats.binom.logpmf(2.5, 5.0, 0.3), -1.5160742, 1e-6)           # as JAX: no integrality check
  same(stats.binom.logpmf(jnp.array([0.0, 5.0]), 5.0, 0.0), [0.0, -inf])
  same(stats.geom.logpmf(0.0, 0.3), -inf)
  same(stats.chi2.logpdf(-1.0, 2.0), -inf)
  same(stats.dirichlet.logpdf(jnp.array([0.2, 0.3, 0.6]), jnp.array([1.0, 2.0, 3.0])), -inf)
  same(stats.cauchy.ppf(jnp.array([0.0, 1.0])), [-inf, inf])          # scipy's values (JAX: +-2.3e7)

# ---------------------------------------------------------------- multivariate normal
def mvn_reference(x, mean, cov):
  diff = x - mean
  sol = np.linalg.solve(cov, diff[..., None])[..., 0]
  n = mean.shape[-1]
  return -0.5 * np.sum(diff * sol, -1) - 0.5 * n * math.log(2 * math.pi) - 0.5 * np.linalg.slogdet(cov)[1]

def spd(rng, n, batch=()):
  a = rng.normal(size=batch + (n, n))
  return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)

def test_multivariate_normal_against_numpy():
  rng = np.random.default_rng(0)
  cov, mean = spd(rng, 4), rng.normal(size=4)
  x = rng.normal(size=(6, 4))
  close(stats.multivariate_normal.logpdf(x, mean, cov), mvn_reference(x, mean, cov), 1e-5)
  close(stats.multivariate_normal.pdf(x[0], mean, cov), np.exp(mvn_reference(x[0], mean, cov)), 1e-5)
  covs = spd(rng, 3, (2,))                                               # batched covariances broadcast with x
  x3 = rng.normal(size=(5, 1, 3))
  close(stats.multivariate_normal.logpdf(x3, np.zeros(3), covs), mvn_reference(x3, np.zeros(3), covs), 1e-5)

def test_multivariate_normal_scalar_forms_match_jax():
  close(stats.multivariate_normal.logpdf(1.0, 0.0, 2.0), -1.5155121, 1e-6)
  close(stats.multivariate_normal.logpdf(jnp.ones(2), jnp.zeros(2), 2.0), -3.0310242, 1e-6)
  close(stats.multivariate_normal.logpdf(jnp.array([1.0, 2.0]), jnp.zeros(2), jnp.array([[2.0, 0.5], [0.5, 1.0]])),
        -4.117685, 1e-6)

def test_multivariate_normal_errors():
  with pytest.raises(ValueError, match=r"cov must be a scalar or have shape \(\.\.\., 2, 2\)"):
    stats.multivariate_normal.logpdf(jnp.ones(2), jnp.zeros(2), jnp.eye(3))
  with pytest.raises(NotImplementedError, match="allow_singular=True"):
    stats.multivariate_normal.logpdf(jnp.ones(2), jnp.zeros(2), jnp.eye(2), allow_singular=True)
  stats.multivariate_normal.logpdf(jnp.ones(2), jnp.zeros(2), jnp.eye(2), allow_singular=False)
  with pytest.raises(ValueError, match="dirichlet.logpdf: x must have shape"):
    stats.dirichlet.logpdf(jnp.ones(5), jnp.ones(3))
  with pytest.raises(ValueError, match="alpha must be one-dimensional"):
    stats.dirichlet.logpdf(jnp.ones(3), jnp.ones((3, 1)))

def test_multivariate_normal_gradient_is_the_precision_times_residual():
  rng = np.random.default_rng(1)
  cov, mean, x = spd(rng, 3), rng.normal(size=3), rng.normal(size=3)
  g = tinyjx.grad(stats.multivariate_normal.logpdf)(jnp.asarray(x, jnp.float32), jnp.asarray(mean, jnp.float32),
                                                     jnp.asarray(cov, jnp.float32))
  close(g, -np.linalg.solve(cov, x - mean), 1e-4)
  batched = tinyjx.vmap(stats.multivariate_normal.logpdf, in_axes=(0, None, None))(jnp.asarray(rng.normal(size=(4, 3))),
                                                                                   jnp.asarray(mean), jnp.asarray(cov))
  assert batched.shape == (4,)

# ---------------------------------------------------------------- gradients and transforms
def test_gradients_closed_forms():
  dx, dloc, dscale = tinyjx.grad(stats.norm.logpdf, (0, 1, 2))(1.0, 0.5, 2.0)
  close([dx, dloc, dscale], [-0.125, 0.125, -0.5 + 0.25 ** 2 / 2.0], 1e-6)
  close(tinyjx.grad(stats.norm.logcdf)(-30.0), 30.03323, 1e-5)           # pdf / cdf in the far tail
  close(tinyjx.grad(stats.gamma.logpdf, 1)(2.0, 3.0), math.log(2.0) - 0.9227843350984671, 3e-6)
  da = tinyjx.grad(stats.beta.logpdf, 1)(0.3, 2.0, 3.0)
  close(da, math.log(0.3) - (0.42278433509846713 - 1.5061176684318003), 1e-5)     # log x - (psi(a) - psi(a+b))
  close(tinyjx.grad(stats.poisson.logpmf, 1)(3.0, 2.5), 3 / 2.5 - 1, 1e-6)
  close(tinyjx.grad(stats.bernoulli.logpmf, 1)(1.0, 0.25), 4.0, 1e-6)
  g = tinyjx.grad(lambda a: stats.dirichlet.logpdf(jnp.array([0.2, 0.3, 0.5]), a))(jnp.array([1.0, 2.0, 3.0]))
  digamma = {1.0: -0.5772156649015329, 2.0: 0.42278433509846713, 3.0: 0.9227843350984671, 6.0: 1.7061176684318003}
  close(g, [math.log(v) - digamma[a] + digamma[6.0] for v, a in zip([0.2, 0.3, 0.5], [1.0, 2.0, 3.0])], 1e-5)

FAMILIES = [(stats.norm.logpdf, (0.5, 2.0)), (stats.norm.cdf, (0.5, 2.0)), (stats.norm.logsf, ()),
            (stats.expon.logcdf, ()), (stats.logistic.logpdf, (1.0,)), (stats.cauchy.cdf, ()),
            (stats.t.logpdf, (4.0,)), (stats.gamma.logpdf, (2.5,)), (stats.beta.logpdf, (2.0, 2.0)),
            (stats.laplace.logpdf, (0.2,)), (stats.chi2.logpdf, (3.0,))]

@pytest.mark.parametrize('f,params', FAMILIES, ids=lambda v: getattr(v, '__module__', '').split('.')[-1] + '.'
                         + getattr(v, '__name__', '') if callable(v) else '')
def test_jit_vmap_grad_agree(f, params):
  xs = jnp.array([0.1, 0.35, 0.6, 0.85])
  g = lambda x: f(x, *params)
  eager = np.asarray(g(xs))
  close(tinyjx.jit(g)(xs), eager, 1e-6)
  close(tinyjx.vmap(g)(xs), eager, 1e-6)
  loop = [float(tinyjx.grad(g)(float(v))) for v in np.asarray(xs)]
  close(tinyjx.jit(tinyjx.vmap(tinyjx.grad(g)))(xs), loop, 1e-5)
  # the derivative against a central difference in float64
  with tinyjx.Context(JAX_ENABLE_X64=True):
    x64 = np.asarray(xs, np.float64)
    fd = (np.asarray(g(jnp.asarray(x64 + 1e-6))) - np.asarray(g(jnp.asarray(x64 - 1e-6)))) / 2e-6
    close(tinyjx.vmap(tinyjx.grad(g))(jnp.asarray(x64)), fd, 1e-6, 1e-9)

# ---------------------------------------------------------------- sweeps against scipy
X = np.linspace(-6, 6, 49)
Q = np.linspace(0, 1, 21)
K = np.arange(-2.0, 30.0)
SWEEPS = [  # (tinyjx module.fn, scipy name, args after x, inputs)
  ('norm', ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf'], (0.5, 2.0), X), ('norm', ['ppf', 'isf'], (0.5, 2.0), Q),
  ('expon', ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf'], (-1.0, 2.0), X), ('expon', ['ppf'], (1.0, 2.0), Q),
  ('uniform', ['logpdf', 'pdf', 'cdf'], (-1.0, 3.0), X), ('uniform', ['ppf'], (1.0, 2.0), Q),
  ('laplace', ['logpdf', 'pdf', 'cdf'], (0.5, 2.0), X),
  ('logistic', ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf'], (0.5, 2.0), X),
  ('logistic', ['ppf', 'isf'], (0.5, 2.0), Q),
  ('cauchy', ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf'], (0.5, 2.0), X),
  ('t', ['logpdf', 'pdf'], (3.5, 0.5, 2.0), X), ('t', ['logpdf'], (50.0,), X),
  ('beta', ['logpdf', 'pdf'], (2.0, 3.0), np.linspace(-0.1, 1.1, 25)),
  ('beta', ['logpdf'], (30.0, 0.7), np.linspace(0.01, 0.99, 25)),
  ('gamma', ['logpdf', 'pdf'], (3.5, 0.5, 2.0), np.linspace(-1, 20, 43)),
  ('chi2', ['logpdf'], (5.0,), np.linspace(-1, 20, 43)),
  ('poisson', ['logpmf', 'pmf'], (3.0,), K), ('binom', ['logpmf'], (20.0, 0.3), K),
  ('geom', ['logpmf'], (0.3,), K), ('bernoulli', ['logpmf', 'cdf'], (0.3,), K),
]

@pytest.mark.parametrize('family,names,args,xs', SWEEPS, ids=lambda v: v if isinstance(v, str) else None)
def test_sweep_against_scipy(family, names, args, xs):
  sst = pytest.importorskip('scipy.stats')
  for name in names:
    want = getattr(getattr(sst, family), name)(xs, *args)
    got = getattr(getattr(stats, family), name)(jnp.asarray(xs.astype(np.float32)), *args)
    # near-zero log densities: relative to max(|value|, 1)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=3e-6, atol=3e-6, err_msg=f"{family}.{name}")

def test_doctests():
  import doctest, importlib
  for name in ['norm', 'uniform', 'expon', 'laplace', 'logistic', 'cauchy', 'beta', 'gamma', 'chi2', 't', 'poisson',
               'bernoulli', 'binom', 'geom', 'dirichlet', 'multivariate_normal']:
    failures, _ = doctest.testmod(importlib.import_module(f'tinyjx.scipy.stats.{name}'))
    assert failures == 0, name
