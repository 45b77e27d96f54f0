"""Tests of tinyjx.nn (activations, as jax.nn): values against numpy formulas over hypothesis-drawn inputs,
against JAX's outputs (generated once with JAX 0.10 and written in as data), numerical stability at large
inputs, masks (where=), weights (b=), gradients at the kinks, and errors."""
import doctest, math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from hypothesis.extra import numpy as hnp

import tinyjx
import tinyjx.numpy as jnp
from tinyjx import nn
from conftest import examples

SETTINGS = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])

X = [-5.0, -2.5, -1.0, -0.30000001192092896, 0.0, 0.30000001192092896, 1.0, 2.5, 5.0, 20.0]
JAX_VALUES = {
  'relu': [0.0, 0.0, 0.0, 0.0, 0.0, 0.30000001192092896, 1.0, 2.5, 5.0, 20.0],
  'relu6': [0.0, 0.0, 0.0, 0.0, 0.0, 0.30000001192092896, 1.0, 2.5, 5.0, 6.0],
  'sigmoid': [0.006692850962281227, 0.07585817575454712, 0.2689414322376251, 0.4255574941635132, 0.5,
              0.5744425058364868, 0.7310585975646973, 0.9241418242454529, 0.9933071732521057, 1.0],
  'silu': [-0.033464252948760986, -0.1896454393863678, -0.2689414322376251, -0.12766724824905396, 0.0,
           0.172332763671875, 0.7310585975646973, 2.310354471206665, 4.966536045074463, 20.0],
  'softplus': [0.006715348456054926, 0.07888973504304886, 0.3132616877555847, 0.554355263710022, 0.6931471824645996,
               0.8543552756309509, 1.3132617473602295, 2.578889846801758, 5.006715297698975, 20.0],
  'soft_sign': [-0.8333333134651184, -0.7142857313156128, -0.5, -0.23076924681663513, 0.0, 0.23076924681663513, 0.5,
                0.7142857313156128, 0.8333333134651184, 0.9523809552192688],
  'log_sigmoid': [-5.006715297698975, -2.578889846801758, -1.3132617473602295, -0.8543552756309509,
                  -0.6931471824645996, -0.554355263710022, -0.3132616877555847, -0.07888973504304886,
                  -0.006715348456054926, -2.06115369216775e-09],
  'elu': [-0.9932620525360107, -0.9179149866104126, -0.6321205496788025, -0.25918176770210266, 0.0,
          0.30000001192092896, 1.0, 2.5, 5.0, 20.0],
  'celu': [-0.9932620525360107, -0.9179149866104126, -0.6321205496788025, -0.25918176770210266, 0.0,
           0.30000001192092896, 1.0, 2.5, 5.0, 20.0],
  'selu': [-1.7462533712387085, -1.613785743713379, -1.1113307476043701, -0.45566728711128235, 0.0,
           0.3152103126049042, 1.0507010221481323, 2.6267526149749756, 5.253505229949951, 21.014020919799805],
  'hard_tanh': [-1.0, -1.0, -1.0, -0.30000001192092896, 0.0, 0.30000001192092896, 1.0, 1.0, 1.0, 1.0],
  'hard_sigmoid': [0.0, 0.0833333358168602, 0.3333333432674408, 0.45000001788139343, 0.5, 0.550000011920929,
                   0.6666666865348816, 0.9166666865348816, 1.0, 1.0],
  'hard_silu': [-0.0, -0.2083333432674408, -0.3333333432674408, -0.13500000536441803, 0.0, 0.16500000655651093,
                0.6666666865348816, 2.2916667461395264, 5.0, 20.0],
  'mish': [-0.03357623517513275, -0.19681617617607117, -0.3034014403820038, -0.15113317966461182, 0.0,
           0.20800136029720306, 0.8650984764099121, 2.4713923931121826, 4.999552249908447, 20.0],
  'squareplus': [0.192582368850708, 0.35078108310699463, 0.6180340051651001, 0.8611874580383301, 1.0,
                 1.1611874103546143, 1.6180340051651, 2.850780963897705, 5.192582130432129, 20.049875259399414],
  'leaky_relu': [-0.04999999701976776, -0.02499999850988388, -0.009999999776482582, -0.003000000026077032, 0.0,
                 0.30000001192092896, 1.0, 2.5, 5.0, 20.0],
  'gelu_tanh': [-0.0, -0.015084296464920044, -0.15880796313285828, -0.11462908238172531, 0.0, 0.18537092208862305,
                0.8411920070648193, 2.4849157333374023, 5.0, 20.0],
  'gelu_erf': [-1.4332579212350538e-06, -0.015524164773523808, -0.15865527093410492, -0.11462658643722534, 0.0,
               0.1853734254837036, 0.8413447141647339, 2.48447585105896, 4.999998569488525, 20.0],
  'softmax': [1.3887938542234135e-11, 1.6918974554691601e-10, 7.582557359775421e-10, 1.5269407960261105e-09,
              2.061153026033935e-09, 2.7822633086316273e-09, 5.602794228565244e-09, 2.5109981649507063e-08,
              3.0590220490012143e-07, 0.9999996423721313],
  'log_softmax': [-25.0, -22.5, -21.0, -20.299999237060547, -20.0, -19.700000762939453, -19.0, -17.5, -15.0,
                  -3.576278118089249e-07],
  'logsumexp': 20.0,
  'standardize': [-1.074155330657959, -0.690528392791748, -0.4603522717952728, -0.3529367446899414,
                  -0.3069015145301819, -0.26086628437042236, -0.15345075726509094, 0.07672537863254547,
                  0.4603522717952728, 2.762113571166992],
}
CALLS = {'gelu_tanh': lambda x: nn.gelu(x, approximate=True), 'gelu_erf': lambda x: nn.gelu(x, approximate=False)}

@pytest.mark.parametrize('name', sorted(JAX_VALUES))
def test_matches_jax_values(name):
  f = CALLS.get(name, getattr(nn, name, None))
  got = np.asarray(f(jnp.asarray(np.array(X, np.float32))))
  np.testing.assert_allclose(got, JAX_VALUES[name], rtol=2e-6, atol=1e-6)   # XLA's tanh saturates a little earlier
  assert got.dtype == np.float32

# ---------------------------------------------------------------- against numpy formulas
def sigmoid(x): return 1 / (1 + np.exp(-x))
def softplus(x): return np.logaddexp(x, 0)
FORMULAS = {
  'relu': lambda x: np.maximum(x, 0), 'relu6': lambda x: np.clip(x, 0, 6), 'sigmoid': sigmoid,
  'silu': lambda x: x * sigmoid(x), 'swish': lambda x: x * sigmoid(x), 'softplus': softplus,
  'soft_sign': lambda x: x / (np.abs(x) + 1), 'log_sigmoid': lambda x: -softplus(-x),
  'leaky_relu': lambda x: np.where(x >= 0, x, 0.01 * x),
  'elu': lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
  'celu': lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0)), 'hard_tanh': lambda x: np.clip(x, -1, 1),
  'selu': lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(np.minimum(x, 0))),
  'hard_sigmoid': lambda x: np.clip(x + 3, 0, 6) / 6, 'hard_silu': lambda x: x * np.clip(x + 3, 0, 6) / 6,
  'mish': lambda x: x * np.tanh(softplus(x)), 'squareplus': lambda x: (x + np.sqrt(x * x + 4)) / 2,
  'gelu': lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
}
floats = hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                    elements=st.floats(-30, 30, width=32))

@SETTINGS
@given(floats, st.sampled_from(sorted(FORMULAS)))
def test_matches_numpy_formulas(x, name):
  got = np.asarray(getattr(nn, name)(jnp.asarray(x.astype(np.float32))))
  np.testing.assert_allclose(got, FORMULAS[name](x), rtol=2e-5, atol=2e-6)

@SETTINGS
@given(floats)
def test_gelu_exact(x):
  from math import erf
  want = np.array([v * 0.5 * (1 + erf(v / math.sqrt(2))) for v in x.reshape(-1)]).reshape(x.shape)
  np.testing.assert_allclose(np.asarray(nn.gelu(jnp.asarray(x.astype(np.float32)), approximate=False)), want,
                             rtol=2e-5, atol=2e-6)

@SETTINGS
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
                  elements=st.floats(-80, 80, width=32)), st.data())
def test_softmax_family_matches_numpy(x, data):
  axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
  shifted = x - x.max(axis, keepdims=True)
  lse = np.log(np.exp(shifted).sum(axis, keepdims=True))
  xj = jnp.asarray(x.astype(np.float32))
  np.testing.assert_allclose(np.asarray(nn.softmax(xj, axis)), np.exp(shifted - lse), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(np.asarray(nn.log_softmax(xj, axis)), shifted - lse, rtol=1e-5, atol=1e-5)
  want = (lse + x.max(axis, keepdims=True)).squeeze(axis)
  np.testing.assert_allclose(np.asarray(nn.logsumexp(xj, axis)), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(nn.logsumexp(xj, axis, keepdims=True)), np.expand_dims(want, axis),
                             rtol=1e-5, atol=1e-5)
  total = np.log(np.exp(x - x.max()).sum()) + x.max()
  np.testing.assert_allclose(np.asarray(nn.logsumexp(xj)), total, rtol=1e-5, atol=1e-5)

def test_stable_at_large_inputs():
  # from JAX 0.10: softmax([1000, 1000, -1000]) == [0.5, 0.5, 0]; logsumexp of all -inf is -inf
  assert nn.softmax(jnp.asarray([1000., 1000., -1000.])).tolist() == [0.5, 0.5, 0.0]
  assert float(nn.logsumexp(jnp.asarray([-np.inf, -np.inf]))) == -np.inf
  assert np.isfinite(np.asarray(nn.log_softmax(jnp.asarray([1e4, 0.])))).all()
  assert float(nn.softplus(100.0)) == 100.0 and float(nn.log_sigmoid(-100.0)) == -100.0
  assert np.isnan(np.asarray(nn.softmax(jnp.asarray([-np.inf, -np.inf])))).all()

M = np.array([[1., 2., 3.], [4., -1., 0.5]], np.float32)
W = np.array([[True, False, True], [False, False, True]])
B = np.array([[1., -2., 0.5], [0., 1., -1.]], np.float32)

def test_masks_weights_and_signs_like_jax():
  # all from JAX 0.10
  np.testing.assert_allclose(np.asarray(nn.softmax(jnp.asarray(M), where=jnp.asarray(W))),
                             [[0.11920291185379028, 0.0, 0.8807970285415649], [0.0, 0.0, 1.0]], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(nn.log_softmax(jnp.asarray(M), where=W)),
                             [[-2.1269280910491943, -np.inf, -0.12692804634571075], [-np.inf, -np.inf, 0.0]], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(nn.logsumexp(jnp.asarray(M), axis=0)),
                             [4.048587322235107, 2.0485873222351074, 3.078889846801758], rtol=1e-6)
  assert np.isnan(np.asarray(nn.logsumexp(jnp.asarray(M), axis=1, b=jnp.asarray(B)))).all()
  out, sign = nn.logsumexp(jnp.asarray(M), axis=1, b=B, return_sign=True)
  # the float64 value is 0.70164195: JAX's float32 result is 3.2e-7 above it, ours (the sum accumulated wide) 3.9e-7
  # below, so the two float32 answers are 1.1e-6 apart
  np.testing.assert_allclose(np.asarray(out), [0.7016422748565674, 0.24751752614974976], rtol=2e-6)
  assert sign.tolist() == [-1.0, -1.0]
  np.testing.assert_allclose(np.asarray(nn.logsumexp(jnp.asarray(M), axis=1, where=W, keepdims=True)),
                             [[3.1269280910491943], [0.5]], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(nn.glu(jnp.asarray(M), axis=0)),
                             [[0.9820137619972229, 0.5378828644752502, 1.8673779964447021]], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(nn.standardize(jnp.asarray(M), axis=0)),
                             [[-0.9999977946281433, 0.9999977946281433, 0.9999967813491821],
                              [0.9999977946281433, -0.9999977946281433, -0.9999967813491821]], rtol=1e-6)

def test_logsumexp_with_weights_matches_numpy():
  x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
  b = np.abs(np.random.default_rng(1).standard_normal((4,))).astype(np.float32)
  want = np.log((np.exp(x) * b).sum(1))
  np.testing.assert_allclose(np.asarray(nn.logsumexp(jnp.asarray(x), axis=1, b=b)), want, rtol=1e-5)

def test_one_hot_like_jax():
  # from JAX 0.10
  assert nn.one_hot(jnp.asarray([[0, 2], [-1, 3]]), 3, axis=0).tolist() == \
    [[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [0.0, 0.0]]]
  assert nn.one_hot(jnp.asarray([0., 1.5, 2.]), 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
  out = nn.one_hot(jnp.asarray([1, 0]), 2, dtype=jnp.int8)
  assert out.dtype is jnp.int8 and out.tolist() == [[0, 1], [1, 0]]
  np.testing.assert_array_equal(np.asarray(nn.one_hot(jnp.asarray(np.arange(6).reshape(2, 3)), 4, axis=1)),
                                np.moveaxis((np.arange(6).reshape(2, 3, 1) == np.arange(4)).astype(np.float32), -1, 1))
  with pytest.raises(ValueError, match="axis 3 is out of bounds"):
    nn.one_hot(jnp.asarray([1, 2]), 3, axis=3)

def test_standardize_with_given_statistics():
  x = jnp.asarray([1., 2., 4.])
  want = (np.array([1., 2., 4.]) - 7 / 3) / np.sqrt(np.var([1., 2., 4.]) + 1e-5)
  np.testing.assert_allclose(np.asarray(nn.standardize(x)), want, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(nn.standardize(x, mean=1.0, variance=4.0, epsilon=0.0)), [0.0, 0.5, 1.5])

def test_integer_inputs_become_float():
  assert nn.sigmoid(jnp.asarray([0, 1])).dtype is jnp.float32
  assert nn.relu(jnp.asarray([-1, 2])).dtype is jnp.int32
  assert nn.softmax(jnp.asarray([1, 1])).tolist() == [0.5, 0.5]

def test_gradients_at_kinks_like_jax():
  # from JAX 0.10: relu'(0) = 0, relu6'(0) = relu6'(6) = 0, leaky_relu'(0) = 1, hard_tanh'(+-1) = 1
  grad = tinyjx.grad
  assert [float(grad(nn.relu)(v)) for v in (0., 1., -1.)] == [0.0, 1.0, 0.0]
  assert [float(grad(nn.relu6)(v)) for v in (0., 6., 3.)] == [0.0, 0.0, 1.0]
  assert [float(grad(nn.leaky_relu)(v)) for v in (0., -1.)] == [1.0, pytest.approx(0.01)]
  assert [float(grad(nn.hard_tanh)(v)) for v in (1., -1., 0.)] == [1.0, 1.0, 1.0]
  np.testing.assert_allclose(np.asarray(grad(lambda v: nn.softmax(v)[0])(jnp.asarray([1., 2., 3.]))),
                             [0.08192507177591324, -0.022033045068383217, -0.05989202484488487], rtol=1e-5)
  np.testing.assert_allclose(np.asarray(grad(nn.logsumexp)(jnp.asarray([1., 2., 3.]))),
                             [0.09003057330846786, 0.2447284758090973, 0.6652409434318542], rtol=1e-5)

def test_errors():
  with pytest.raises(ValueError, match="even size"):
    nn.glu(jnp.ones(3))
  with pytest.raises(ValueError, match="axis 2 is out of bounds"):
    nn.softmax(jnp.ones((2, 2)), axis=2)

def test_doctests():
  assert doctest.testmod(nn, optionflags=doctest.ELLIPSIS).failed == 0
