"""nn: activation functions and their friends, as `jax.nn` (relu, gelu, softmax, logsumexp, one_hot ...).

Each is a short composition of `tinyjx.numpy` and `tinyjx.lax` operations, written to be numerically
stable: softmax, log_softmax and logsumexp subtract the maximum (under `lax.stop_gradient` where it
exists, so the shift adds nothing to gradients); softplus and log_sigmoid never exponentiate a large
positive number. Functions with a kink (relu, relu6, leaky_relu, hard_tanh) are written with `where`,
so the gradient at the kink is the one JAX gives (0 for relu at 0 and for relu6 at 0 and 6).
Integer inputs of the float-valued functions become the default float type.
`tinyjx.nn.initializers` is jax.nn.initializers (defined in nn/initializers.py).
"""
from __future__ import annotations
import math, operator
import tinyjx.numpy as jnp
from tinyjx import dtypes, lax
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops
from tinyjx.numpy.core import normalize_axis
from tinyjx.numpy.indexing import broadcast_uop
from tinyjx.nn import initializers  # noqa: F401  (jax.nn.initializers)

__all__ = ['relu', 'relu6', 'gelu', 'sigmoid', 'silu', 'swish', 'softplus', 'soft_sign', 'leaky_relu', 'elu', 'celu',
           'selu', 'hard_tanh', 'hard_sigmoid', 'hard_silu', 'hard_swish', 'log_sigmoid', 'mish', 'squareplus', 'glu',
           'softmax', 'log_softmax', 'logsumexp', 'one_hot', 'standardize']

def _float(x) -> Array:
  x = jnp.asarray(x)
  return x if dtypes.is_float(x.dtype) else jnp.astype(x, dtypes.default_float())

def _stop_gradient(x):
  """`lax.stop_gradient` once the autodiff code provides it; the value is the same either way."""
  stop = getattr(lax, 'stop_gradient', None)
  return x if stop is None else stop(x)

def relu(x) -> Array:
  """max(x, 0), with gradient 0 at 0 (as JAX).

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> nn.relu(jnp.array([-1., 0., 2.])).tolist()
  [0.0, 0.0, 2.0]
  """
  x = jnp.asarray(x)
  return jnp.where(jnp.greater(x, 0), x, jnp.zeros_like(x))

def relu6(x) -> Array:
  """min(max(x, 0), 6), with gradient 0 at 0 and at 6 (as JAX).

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> nn.relu6(jnp.array([-1., 3., 8.])).tolist()
  [0.0, 3.0, 6.0]
  """
  x = jnp.asarray(x)
  inside = jnp.where(jnp.less(x, 6), x, jnp.full_like(x, 6))
  return jnp.where(jnp.greater(x, 0), inside, jnp.zeros_like(x))

def sigmoid(x) -> Array:
  """The logistic function 1 / (1 + exp(-x)).

  >>> from tinyjx import nn
  >>> float(nn.sigmoid(0.0))
  0.5
  """
  return lax.logistic(_float(x))

def silu(x) -> Array:
  """x * sigmoid(x) (also called swish).

  >>> from tinyjx import nn
  >>> float(nn.silu(0.0))
  0.0
  """
  x = _float(x)
  return jnp.multiply(x, sigmoid(x))
swish = silu

def softplus(x) -> Array:
  """log(1 + exp(x)), computed as logaddexp(x, 0) so that large x does not overflow.

  >>> from tinyjx import nn
  >>> float(nn.softplus(1000.0))
  1000.0
  """
  return jnp.logaddexp(_float(x), 0.0)

def soft_sign(x) -> Array:
  """x / (|x| + 1).

  >>> from tinyjx import nn
  >>> float(nn.soft_sign(3.0))
  0.75
  """
  x = _float(x)
  return jnp.divide(x, jnp.add(jnp.abs(x), 1.0))

def log_sigmoid(x) -> Array:
  """log(sigmoid(x)) = -softplus(-x), stable for large |x|.

  >>> from tinyjx import nn
  >>> float(nn.log_sigmoid(-1000.0))
  -1000.0
  """
  return jnp.negative(softplus(jnp.negative(_float(x))))

def leaky_relu(x, negative_slope: float = 1e-2) -> Array:
  """x where x >= 0, else negative_slope * x.

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> nn.leaky_relu(jnp.array([-2., 3.]), 0.5).tolist()
  [-1.0, 3.0]
  """
  x = jnp.asarray(x)
  return jnp.where(jnp.greater_equal(x, 0), x, jnp.multiply(negative_slope, x))

def elu(x, alpha: float = 1.0) -> Array:
  """x where x > 0, else alpha * (exp(x) - 1).

  >>> from tinyjx import nn
  >>> float(nn.elu(0.0)), float(nn.elu(2.0))
  (0.0, 2.0)
  """
  x = _float(x)
  positive = jnp.greater(x, 0)
  return jnp.where(positive, x, jnp.multiply(alpha, jnp.expm1(jnp.where(positive, 0.0, x))))

def celu(x, alpha: float = 1.0) -> Array:
  """max(x, 0) + alpha * expm1(min(x, 0) / alpha): a continuously differentiable elu.

  >>> from tinyjx import nn
  >>> float(nn.celu(2.0))
  2.0
  """
  x = _float(x)
  return jnp.add(jnp.maximum(x, 0.0), jnp.multiply(alpha, jnp.expm1(jnp.divide(jnp.minimum(x, 0.0), alpha))))

_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

def selu(x) -> Array:
  """scale * elu(x, alpha) with the self-normalizing constants of Klambauer et al.

  >>> from tinyjx import nn
  >>> round(float(nn.selu(1.0)), 4)
  1.0507
  """
  return jnp.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA))

def gelu(x, approximate: bool = True) -> Array:
  """Gaussian error linear unit: x * Phi(x); `approximate=True` uses the tanh form, False the exact erf.

  >>> from tinyjx import nn
  >>> round(float(nn.gelu(1.0, approximate=False)), 5)
  0.84134
  """
  x = _float(x)
  if approximate:
    cube = jnp.multiply(x, jnp.multiply(x, x))
    inner = jnp.multiply(math.sqrt(2.0 / math.pi), jnp.add(x, jnp.multiply(0.044715, cube)))
    return jnp.multiply(jnp.multiply(0.5, x), jnp.add(1.0, jnp.tanh(inner)))
  cdf = jnp.multiply(0.5, jnp.add(1.0, lax.erf(jnp.multiply(x, 1.0 / math.sqrt(2.0)))))
  return jnp.multiply(x, cdf)

def hard_tanh(x) -> Array:
  """x clipped to [-1, 1].

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> nn.hard_tanh(jnp.array([-3., 0.5, 3.])).tolist()
  [-1.0, 0.5, 1.0]
  """
  x = jnp.asarray(x)
  return jnp.where(jnp.greater(x, 1), jnp.ones_like(x), jnp.where(jnp.less(x, -1), jnp.full_like(x, -1), x))

def hard_sigmoid(x) -> Array:
  """relu6(x + 3) / 6, a piecewise-linear sigmoid.

  >>> from tinyjx import nn
  >>> float(nn.hard_sigmoid(0.0))
  0.5
  """
  return jnp.divide(relu6(jnp.add(_float(x), 3.0)), 6.0)

def hard_silu(x) -> Array:
  """x * hard_sigmoid(x) (also called hard_swish).

  >>> from tinyjx import nn
  >>> float(nn.hard_silu(3.0))
  3.0
  """
  x = _float(x)
  return jnp.multiply(x, hard_sigmoid(x))
hard_swish = hard_silu

def mish(x) -> Array:
  """x * tanh(softplus(x)).

  >>> from tinyjx import nn
  >>> float(nn.mish(0.0))
  0.0
  """
  x = _float(x)
  return jnp.multiply(x, jnp.tanh(softplus(x)))

def squareplus(x, b: float = 4) -> Array:
  """(x + sqrt(x**2 + b)) / 2, a smooth relu.

  >>> from tinyjx import nn
  >>> float(nn.squareplus(0.0))
  1.0
  """
  x = _float(x)
  return jnp.multiply(0.5, jnp.add(x, jnp.sqrt(jnp.add(jnp.multiply(x, x), b))))

def glu(x, axis: int = -1) -> Array:
  """Gated linear unit: the first half of `axis` times the sigmoid of the second half.

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> nn.glu(jnp.array([2., 0.])).tolist()
  [1.0]
  """
  x = _float(x)
  ax = normalize_axis(axis, x.ndim)
  n = x.shape[ax]
  if n % 2: raise ValueError(f"glu: axis {axis} of shape {x.shape} must have an even size, got {n}")
  half = lambda lo, hi: Array(x.uop.shrink(tuple((lo, hi) if i == ax else (0, s) for i, s in enumerate(x.shape))))
  return jnp.multiply(half(0, n // 2), sigmoid(half(n // 2, n)))

def _shifted(x: Array, axis, where) -> Array:
  """x minus its (stop-gradient) maximum over `axis` (the maximum taken only where `where`)."""
  x_max = jnp.max(x, axis, keepdims=True, where=where, initial=-math.inf)
  return jnp.subtract(x, _stop_gradient(x_max))

def softmax(x, axis: int | tuple | None = -1, where=None) -> Array:
  """exp(x) / sum(exp(x)) over `axis`, shifted by the maximum for stability; masked entries are 0.

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> nn.softmax(jnp.array([0., 0.])).tolist()
  [0.5, 0.5]
  """
  x = _float(x)
  unnormalized = jnp.exp(_shifted(x, axis, where))
  if where is not None: unnormalized = jnp.where(where, unnormalized, 0.0)
  result = jnp.divide(unnormalized, jnp.sum(unnormalized, axis, keepdims=True))
  return result if where is None else jnp.where(where, result, 0.0)

def log_softmax(x, axis: int | tuple | None = -1, where=None) -> Array:
  """x - logsumexp(x) over `axis`, shifted by the maximum for stability; masked entries are -inf.

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> [round(v, 4) for v in nn.log_softmax(jnp.array([0., 0.])).tolist()]
  [-0.6931, -0.6931]
  """
  x = _float(x)
  shifted = _shifted(x, axis, where)
  exps = jnp.exp(shifted)
  if where is not None: exps = jnp.where(where, exps, 0.0)
  result = jnp.subtract(shifted, jnp.log(jnp.sum(exps, axis, keepdims=True)))
  return result if where is None else jnp.where(where, result, -math.inf)

def logsumexp(a, axis: int | tuple | None = None, b=None, keepdims: bool = False, return_sign: bool = False,
              where=None):
  """log(sum(b * exp(a))) over `axis`, computed without overflow; with `return_sign` also the sign of
  the sum (without it, a negative sum gives NaN, as JAX).

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> float(nn.logsumexp(jnp.array([1000., 1000.])))
  1000.6931762695312
  """
  a = _float(a)
  if b is not None: a, b = _broadcast_pair(a, jnp.asarray(b))
  amax = jnp.max(a, axis, keepdims=True, where=where, initial=-math.inf)
  amax = _stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0.0))
  exps = jnp.exp(jnp.subtract(a, amax))
  if b is not None: exps = jnp.multiply(exps, b)
  total = jnp.sum(exps, axis, keepdims=keepdims, where=where)
  sign = jnp.sign(total)
  shift = amax if keepdims else Array(amax.uop.reshape(total.shape))
  out = jnp.add(jnp.log(jnp.abs(total)), shift)
  if return_sign: return out, sign
  return out if b is None else jnp.where(jnp.less(sign, 0), math.nan, out)

def _broadcast_pair(a: Array, b: Array) -> tuple[Array, Array]:
  """a and b promoted to one dtype and broadcast to one shape (the weights b of logsumexp)."""
  dt = dtypes.promote((a.dtype, a.weak), (b.dtype, b.weak))[0]
  shape = jnp.broadcast_shapes(a.shape, b.shape)
  return tuple(Array(broadcast_uop(jnp.astype(v, dt).uop, shape)) for v in (a, b))

def one_hot(x, num_classes: int, *, dtype=None, axis: int | tuple = -1) -> Array:
  """`x`'s integer entries as one-hot vectors along a new axis; out-of-range entries give all zeros.

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> nn.one_hot(jnp.array([0, 2, 5]), 3).tolist()
  [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
  """
  x, n = jnp.asarray(x), operator.index(num_classes)
  if not isinstance(axis, int): raise TypeError(f"one_hot: axis must be an int, got {axis!r}")
  ax = axis % (x.ndim + 1) if -(x.ndim + 1) <= axis <= x.ndim else None
  if ax is None: raise ValueError(f"one_hot: axis {axis} is out of bounds for the output of ndim {x.ndim + 1}")
  shape = x.shape[:ax] + (n,) + x.shape[ax:]
  classes = Array(UOp(Ops.IOTA, dtypes.int32, (), (shape, ax)))
  hits = jnp.equal(Array(x.uop.reshape(x.shape[:ax] + (1,) + x.shape[ax:])), classes)
  return jnp.astype(hits, dtypes.default_float() if dtype is None else dtype)

def standardize(x, axis: int | tuple | None = -1, mean=None, variance=None, epsilon: float = 1e-5, where=None) -> Array:
  """(x - mean) / sqrt(variance + epsilon) over `axis`; mean and variance are computed when not given.

  >>> import tinyjx.numpy as jnp; from tinyjx import nn
  >>> [round(v, 3) for v in nn.standardize(jnp.array([1., 3.])).tolist()]
  [-1.0, 1.0]
  """
  x = _float(x)
  if mean is None: mean = jnp.mean(x, axis, keepdims=True, where=where)
  if variance is None:
    variance = jnp.subtract(jnp.mean(jnp.square(x), axis, keepdims=True, where=where), jnp.square(mean))
  return jnp.multiply(jnp.subtract(x, mean), lax.rsqrt(jnp.add(variance, epsilon)))
