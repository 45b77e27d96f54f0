"""`tinyjx.nn.initializers` (jax.nn.initializers): the values JAX 0.10 draws for one key (tinyjx's PRNG is JAX's,
so they agree to float32 rounding), the variance of every variance-scaling initializer over a large sample, the fans
for every axis argument, orthogonality, exact constants, jit, and the errors."""
import math
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import random
from tinyjx.nn import initializers as init

pytestmark = pytest.mark.usefixtures('semantics_device')
KEY = random.PRNGKey(0)

def test_importable_as_attribute_module_and_from_import():
  import tinyjx.nn.initializers as by_import
  assert tinyjx.nn.initializers is init is by_import
  for name in ['glorot_normal', 'glorot_uniform', 'xavier_normal', 'xavier_uniform', 'he_normal', 'he_uniform',
               'kaiming_normal', 'kaiming_uniform', 'lecun_normal', 'lecun_uniform', 'normal', 'uniform',
               'truncated_normal', 'zeros', 'ones', 'constant', 'orthogonal', 'delta_orthogonal', 'variance_scaling']:
    assert callable(getattr(init, name)), name
  assert init.xavier_normal is init.glorot_normal and init.kaiming_uniform is init.he_uniform

REFERENCE = [   # JAX 0.10.2, jax.random.PRNGKey(0)
  (lambda: init.lecun_normal()(KEY, (3, 4)), [[0.955632, 1.125491, -0.270863, -0.049249],
                                              [0.110269, -0.599002, -0.309126, 0.308556],
                                              [0.413277, -0.585994, 1.174859, -1.099968]]),
  (lambda: init.glorot_uniform()(KEY, (2, 3)), [[0.980789, 1.048516, -0.367431], [-0.068644, 0.153118, -0.732846]]),
  (lambda: init.normal(0.5)(KEY, (4,)), [0.811321, 1.012632, -0.216797, -0.039309]),
  (lambda: init.uniform(2.0)(KEY, (4,)), [1.895334, 1.957160, 0.664583, 0.937337]),
  (lambda: init.truncated_normal(1.0)(KEY, (4,)), [1.455959, 1.714749, -0.412675, -0.075033]),
  (lambda: init.he_normal(in_axis=0, out_axis=1)(KEY, (3, 4)), [[1.351468, 1.591684, -0.383058, -0.069648],
                                                                [0.155944, -0.847118, -0.43717, 0.436364],
                                                                [0.584462, -0.828721, 1.661501, -1.555591]]),
  (lambda: init.variance_scaling(1.0, 'fan_geo_avg', 'uniform')(KEY, (2, 8))[0, :4], [0.775382, 0.828925, -0.29048,
                                                                                       -0.05428]),
  (lambda: init.orthogonal()(KEY, (3, 3)), [[0.95541, 0.29414, 0.026], [-0.04629, 0.23614, -0.97062],
                                           [-0.29163, 0.92613, 0.23923]]),
]

@pytest.mark.parametrize('i', range(len(REFERENCE)))
def test_values_match_jax(i):
  make, expected = REFERENCE[i]
  np.testing.assert_allclose(np.asarray(make()), expected, rtol=1e-4, atol=2e-5)

@pytest.mark.parametrize('make, variance', [
  (lambda: init.glorot_normal(), lambda fi, fo: 2 / (fi + fo)),
  (lambda: init.glorot_uniform(), lambda fi, fo: 2 / (fi + fo)),
  (lambda: init.xavier_normal(), lambda fi, fo: 2 / (fi + fo)), (lambda: init.he_normal(), lambda fi, fo: 2 / fi),
  (lambda: init.he_uniform(), lambda fi, fo: 2 / fi), (lambda: init.kaiming_normal(), lambda fi, fo: 2 / fi),
  (lambda: init.lecun_normal(), lambda fi, fo: 1 / fi), (lambda: init.lecun_uniform(), lambda fi, fo: 1 / fi),
  (lambda: init.variance_scaling(3.0, 'fan_out', 'normal'), lambda fi, fo: 3 / fo),
  (lambda: init.variance_scaling(0.5, 'fan_avg', 'truncated_normal'), lambda fi, fo: 1 / (fi + fo)),
  (lambda: init.variance_scaling(1.0, 'fan_geo_avg', 'uniform'), lambda fi, fo: 1 / math.sqrt(fi * fo)),
  (lambda: init.normal(0.5), lambda fi, fo: 0.25),
])
def test_variance_over_a_large_sample(make, variance):
  shape = (3, 64, 128)   # a 1-D conv kernel: window 3, 64 in, 128 out
  fan_in, fan_out = 3 * 64, 3 * 128
  w = np.asarray(make()(KEY, shape))
  assert w.shape == shape and w.dtype == np.float32
  assert abs(w.mean()) < 0.02 * math.sqrt(variance(fan_in, fan_out))
  assert abs(w.var() / variance(fan_in, fan_out) - 1) < 0.03

def test_distribution_shapes():
  w = np.asarray(init.variance_scaling(1.0, 'fan_in', 'uniform')(KEY, (100, 400)))
  assert abs(w).max() <= math.sqrt(3 / 100) + 1e-6 and abs(w).max() > 0.99 * math.sqrt(3 / 100)
  t = np.asarray(init.variance_scaling(1.0, 'fan_in', 'truncated_normal')(KEY, (100, 400)))
  assert abs(t).max() <= 2 * 0.1 / 0.87962566103423978 + 1e-6   # within two standard deviations of the untruncated
  u = np.asarray(init.uniform(2.0)(KEY, (10000,)))
  assert u.min() >= 0 and u.max() < 2 and abs(u.mean() - 1) < 0.03
  tn = np.asarray(init.truncated_normal(0.5, lower=-1.0, upper=1.0)(KEY, (10000,)))
  assert abs(tn).max() <= 0.5 and abs(tn.std() - 0.5 * 0.5399) < 0.01   # std of N(0,1) cut at +-1, not corrected

@pytest.mark.parametrize('shape, axes, fans', [
  ((4, 5), {}, (4, 5)), ((3, 3, 16, 32), {}, (144, 288)), ((32, 16, 3, 3), dict(in_axis=1, out_axis=0), (144, 288)),
  ((4, 5, 6), dict(in_axis=0, out_axis=1, batch_axis=2), (4, 5)),
  ((2, 3, 4, 5), dict(in_axis=(0, 1), out_axis=-1), (24, 20)),   # receptive field 120 / (6 * 5) = 4
  ((7,), dict(in_axis=(), out_axis=()), (7, 7)),
])
def test_compute_fans(shape, axes, fans):
  assert init.compute_fans(shape, **axes) == fans

def test_batch_axis_scales_each_copy():
  # batch_axis=2 copies are independent weights of fans (4, 5): variance 1/4, not 1/(4*6)
  w = np.asarray(init.variance_scaling(1.0, 'fan_in', 'normal', in_axis=0, out_axis=1, batch_axis=2)(KEY, (40, 50, 60)))
  assert abs(w.var() * 40 - 1) < 0.03

@pytest.mark.parametrize('shape, column_axis', [((5, 3), -1), ((3, 5), -1), ((64, 64), -1), ((5, 3), 0),
                                                ((2, 4, 3), -1)])
def test_orthogonal(shape, column_axis):
  w = np.asarray(init.orthogonal(scale=2.0, column_axis=column_axis)(KEY, shape), np.float64)
  assert w.shape == shape
  mat = np.moveaxis(w, column_axis, -1).reshape(-1, shape[column_axis])
  gram = mat.T @ mat if mat.shape[0] >= mat.shape[1] else mat @ mat.T
  np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=2e-5)

def test_orthogonal_under_jit_and_delta_orthogonal():
  w = np.asarray(tinyjx.jit(lambda k: init.orthogonal()(k, (8, 8)))(KEY), np.float64)
  np.testing.assert_allclose(w.T @ w, np.eye(8), atol=2e-5)
  d = np.asarray(init.delta_orthogonal()(KEY, (3, 3, 4, 6)), np.float64)
  np.testing.assert_allclose(d[1, 1] @ d[1, 1].T, np.eye(4), atol=2e-5)
  assert np.abs(d).sum() == pytest.approx(np.abs(d[1, 1]).sum())   # zero away from the window's center

def test_constants_are_exact():
  assert np.asarray(init.zeros(KEY, (2, 3))).tolist() == [[0.0] * 3] * 2 and init.zeros(KEY, (2,)).dtype is jnp.float32
  assert np.asarray(init.ones(KEY, (2,), jnp.int32)).tolist() == [1, 1]
  assert init.ones(KEY, 2, jnp.int32).dtype is jnp.int32
  assert np.asarray(init.constant(0.25)(KEY, (2,))).tolist() == [0.25, 0.25]
  assert init.constant(3, dtype=jnp.int8)(KEY, (1,)).dtype is jnp.int8
  assert init.glorot_normal(dtype=jnp.float16)(KEY, (4, 4)).dtype is jnp.float16
  assert init.normal()(KEY, (3,), jnp.bfloat16).dtype is jnp.bfloat16

def test_initializer_errors():
  with pytest.raises(ValueError, match="mode must be 'fan_in'"): init.variance_scaling(1.0, 'fan', 'normal')
  with pytest.raises(ValueError, match='distribution must be'): init.variance_scaling(1.0, 'fan_in', 'cauchy')
  with pytest.raises(ValueError, match='at least 2 dimensions, or in_axis'): init.lecun_normal()(KEY, (3,))
  with pytest.raises(ValueError, match='in_axis=5 is out of range'): init.lecun_normal(in_axis=5)(KEY, (3, 4))
  with pytest.raises(TypeError, match='dtype must be a float type'): init.normal()(KEY, (3,), jnp.int32)
  with pytest.raises(ValueError, match='at least 2 dimensions'): init.orthogonal()(KEY, (3,))
  with pytest.raises(ValueError, match='in=6 must be at most out=4'): init.delta_orthogonal()(KEY, (3, 6, 4))
