"""nn.init: weight initializers, as `jax.nn.initializers`: `init(key, shape, dtype=float32) -> Array`.

Weights are in PyTorch's layout, (out_features, in_features, *kernel), so fan_in = shape[1] * prod(kernel) and
fan_out = shape[0] * prod(kernel); a 1-D shape has fan_in = fan_out = shape[0]. `kaiming_uniform` with its
default `a=sqrt(5)` is what PyTorch and tinygrad use for Linear and Conv weights: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Every random initializer takes a `tinyjx.random` key.
"""
from __future__ import annotations
import math
import tinyjx.numpy as jnp
from tinyjx import random

__all__ = ['fans', 'zeros', 'ones', 'constant', 'uniform', 'normal', 'truncated_normal', 'variance_scaling',
           'glorot_uniform', 'glorot_normal', 'xavier_uniform', 'xavier_normal', 'lecun_uniform', 'lecun_normal',
           'he_uniform', 'he_normal', 'kaiming_uniform', 'kaiming_normal', 'bound_uniform']

def fans(shape: tuple) -> tuple[int, int]:
  """(fan_in, fan_out) of a weight of `shape` in (out, in, *kernel) layout.

  >>> fans((32, 16, 3, 3))
  (144, 288)
  """
  if len(shape) == 0: return 1, 1
  if len(shape) == 1: return shape[0], shape[0]
  receptive = math.prod(shape[2:])
  return shape[1] * receptive, shape[0] * receptive

def zeros(key, shape, dtype=jnp.float32): return jnp.zeros(shape, dtype)
def ones(key, shape, dtype=jnp.float32): return jnp.ones(shape, dtype)

def constant(value: float):
  """An initializer that fills with `value`."""
  return lambda key, shape, dtype=jnp.float32: jnp.full(shape, value, dtype)

def bound_uniform(bound: float):
  """U(-bound, bound)."""
  return lambda key, shape, dtype=jnp.float32: random.uniform(key, shape, dtype, -bound, bound)

def uniform(scale: float = 1e-2):
  """U(0, scale), as `jax.nn.initializers.uniform`."""
  return lambda key, shape, dtype=jnp.float32: random.uniform(key, shape, dtype, 0.0, scale)

def normal(stddev: float = 1e-2):
  """N(0, stddev^2)."""
  return lambda key, shape, dtype=jnp.float32: random.normal(key, shape, dtype) * stddev

def truncated_normal(stddev: float = 1e-2, lower: float = -2.0, upper: float = 2.0):
  """N(0, stddev^2) truncated to [lower, upper] standard deviations."""
  return lambda key, shape, dtype=jnp.float32: random.truncated_normal(key, lower, upper, shape, dtype) * stddev

def variance_scaling(scale: float, mode: str, distribution: str):
  """Samples with variance scale / n, n = fan_in, fan_out or their mean (`mode`), from a 'uniform', 'normal' or
  'truncated_normal' `distribution` (the truncated one corrected to keep that variance), as in JAX.

  >>> import tinyjx.random as random
  >>> w = variance_scaling(2.0, 'fan_in', 'normal')(random.PRNGKey(0), (256, 512))
  >>> round(float(w.std() ** 2 * 512), 1)
  2.0
  """
  if mode not in ('fan_in', 'fan_out', 'fan_avg'):
    raise ValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
  def init(key, shape, dtype=jnp.float32):
    fan_in, fan_out = fans(tuple(shape))
    n = {'fan_in': fan_in, 'fan_out': fan_out, 'fan_avg': (fan_in + fan_out) / 2}[mode]
    var = scale / max(n, 1)
    if distribution == 'uniform': return random.uniform(key, shape, dtype, -math.sqrt(3 * var), math.sqrt(3 * var))
    if distribution == 'normal': return random.normal(key, shape, dtype) * math.sqrt(var)
    if distribution == 'truncated_normal':  # std of N(0,1) truncated to [-2, 2]
      return random.truncated_normal(key, -2.0, 2.0, shape, dtype) * (math.sqrt(var) / 0.87962566103423978)
    raise ValueError(f"variance_scaling: distribution must be 'uniform', 'normal' or 'truncated_normal', "
                     f"got {distribution!r}")
  return init

def glorot_uniform(): return variance_scaling(1.0, 'fan_avg', 'uniform')
def glorot_normal(): return variance_scaling(1.0, 'fan_avg', 'truncated_normal')
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
def lecun_uniform(): return variance_scaling(1.0, 'fan_in', 'uniform')
def lecun_normal(): return variance_scaling(1.0, 'fan_in', 'truncated_normal')
def he_uniform(): return variance_scaling(2.0, 'fan_in', 'uniform')
def he_normal(): return variance_scaling(2.0, 'fan_in', 'truncated_normal')

def kaiming_uniform(a: float = math.sqrt(5)):
  """PyTorch's kaiming_uniform_: U(-b, b), b = sqrt(6 / ((1 + a^2) fan_in)); the default a gives 1/sqrt(fan_in)."""
  def init(key, shape, dtype=jnp.float32):
    bound = math.sqrt(6.0 / ((1 + a * a) * max(fans(tuple(shape))[0], 1)))
    return random.uniform(key, shape, dtype, -bound, bound)
  return init

def kaiming_normal(a: float = 0.0):
  """PyTorch's kaiming_normal_ (fan_in mode): N(0, 2 / ((1 + a^2) fan_in))."""
  def init(key, shape, dtype=jnp.float32):
    return random.normal(key, shape, dtype) * math.sqrt(2.0 / ((1 + a * a) * max(fans(tuple(shape))[0], 1)))
  return init
