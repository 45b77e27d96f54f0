"""Derivatives at extreme inputs (+-1e4, +-100, +-1e-30, 0) against JAX's published derivative formulas, evaluated
in float64 with numpy: no NaN where the formula is finite (a derivative written as 0 * inf or inf / inf overflows
long before the function does), and the same value, eagerly and under jit. Large negative logits are common in
training: sigmoid's derivative once was NaN at x <= -89."""
import math
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax, nn

XS = np.array([-1e4, -100., -1e-30, 0., 1e-30, 100., 1e4])

def sig(x):   # the logistic function in float64, each arm where its exponential cannot overflow
  z = np.exp(-np.abs(x))
  return np.where(x >= 0, 1 / (1 + z), z / (1 + z))
def phi(x): return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
def erf(x): return np.vectorize(math.erf)(x)
GELU_C = math.sqrt(2 / math.pi)
def gelu_tanh_grad(x):
  t = np.tanh(GELU_C * (x + 0.044715 * x ** 3))
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x)
def pair(f):   # f applied to the stack [x, 0] along a new leading axis: logsumexp and softmax of two logits
  return lambda x: f(jnp.stack([x, jnp.zeros_like(x)]))

# name: (function of a float32 array, derivative formula of x in float64); JAX's jvp rules give the same formulas
CASES = {
  'sigmoid': (nn.sigmoid, lambda x: sig(x) * sig(-x)),
  'silu': (nn.silu, lambda x: sig(x) + x * sig(x) * sig(-x)),
  'softplus': (nn.softplus, sig),
  'log_sigmoid': (nn.log_sigmoid, lambda x: sig(-x)),
  'logsumexp': (pair(lambda v: nn.logsumexp(v, axis=0)), sig),
  'softmax': (pair(lambda v: nn.softmax(v, axis=0)[0]), lambda x: sig(x) * sig(-x)),
  'log_softmax': (pair(lambda v: nn.log_softmax(v, axis=0)[0]), lambda x: sig(-x)),
  'tanh': (jnp.tanh, lambda x: 1 - np.tanh(x) ** 2),
  'gelu_tanh': (nn.gelu, gelu_tanh_grad),
  'gelu_erf': (lambda x: nn.gelu(x, approximate=False), lambda x: 0.5 * (1 + erf(x / math.sqrt(2))) + x * phi(x)),
  'erf': (lax.erf, lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x)),
  'log1p': (jnp.log1p, lambda x: 1 / (1 + x)),
  'expm1': (jnp.expm1, np.exp),
  'square': (lambda x: x ** 2, lambda x: 2 * x),
  'cube': (lambda x: x ** 3, lambda x: 3 * x * x),
  'pow_zero': (lambda x: x ** 0, np.zeros_like),
  'reciprocal': (lambda x: 1.0 / x, lambda x: -1 / (x * x)),
  'sqrt': (jnp.sqrt, lambda x: 0.5 / np.sqrt(x)),
  'elu': (nn.elu, lambda x: np.where(x > 0, 1.0, np.exp(np.minimum(x, 0)))),
  'mish': (nn.mish, lambda x: np.tanh(np.logaddexp(x, 0)) + x * sig(x) * (1 - np.tanh(np.logaddexp(x, 0)) ** 2)),
  # JAX differentiates x / (|x| + 1) by the quotient rule too, which cancels to ~1e-4 relative at |x| = 1e4
  'soft_sign': (nn.soft_sign, lambda x: 1 / (1 + np.abs(x)) ** 2, 2e-4),
}

def expected(formula) -> np.ndarray:
  with np.errstate(all='ignore'):
    return formula(XS).astype(np.float32)

@pytest.mark.parametrize('compiled', [False, True], ids=['eager', 'jit'])
@pytest.mark.parametrize('name', sorted(CASES))
def test_derivative_at_extreme_inputs_matches_the_formula(name, compiled):
  f, formula, rtol = (CASES[name] + (2e-5,))[:3]
  g = tinyjx.grad(lambda x: f(x).sum())
  got = np.asarray((tinyjx.jit(g) if compiled else g)(jnp.asarray(XS, jnp.float32)))
  want = expected(formula)
  finite = np.isfinite(want)
  assert not np.isnan(got[finite]).any(), f"{name}: NaN derivative at {XS[finite & np.isnan(got)]}"
  # values below float32's normal range may be flushed to zero by the compiler, as XLA does: compare above it
  np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-36, err_msg=name)

@pytest.mark.parametrize('name', ['sigmoid', 'silu', 'softplus', 'log_sigmoid'])
def test_forward_values_at_extreme_inputs_are_accurate(name):
  f = CASES[name][0]
  ref = {'sigmoid': sig, 'silu': lambda x: x * sig(x), 'softplus': lambda x: np.logaddexp(x, 0),
         'log_sigmoid': lambda x: -np.logaddexp(-x, 0)}[name]
  xs = np.array([-1e4, -100., -30., -10., -1., 0., 1., 10., 30., 100., 1e4])
  np.testing.assert_allclose(np.asarray(f(jnp.asarray(xs, jnp.float32))), ref(xs).astype(np.float32),
                             rtol=2e-6, atol=1e-37)

def test_sigmoid_gradient_under_vmap_and_jvp_at_large_negative_logits():
  x = jnp.array([-200., -100., -90.])
  assert np.isfinite(np.asarray(tinyjx.vmap(tinyjx.grad(nn.sigmoid))(x))).all()
  _, t = tinyjx.jvp(nn.silu, (x,), (jnp.ones_like(x),))
  assert np.isfinite(np.asarray(t)).all()
