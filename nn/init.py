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
from tinyjx.nn import initializers as jax_init

__all__ = ['fans', 'zeros', 'ones', 'constant', 'uniform', 'normal', 'truncated_normal', 'variance_scaling',
           'glorot_uniform', 'glorot_normal', 'xavier_uniform', 'xavier_normal', 'lecun_uniform', 'lecun_normal',
           'he_uniform', 'he_normal', 'kaiming_uniform', 'kaiming_normal', 'bound_uniform']

# zeros, ones, constant, uniform and normal do not depend on the layout: they are jax.nn.initializers' own.
zeros, ones, constant = jax_init.zeros, jax_init.ones, jax_init.constant
uniform, normal = jax_init.uniform, jax_init.normal

def _layout_axes(ndim: int) -> tuple:
  """(in_axis, out_axis) of the (out, in, *kernel) layout; below 2 dimensions every axis is receptive field."""
  return (1, 0) if ndim >= 2 else ((), ())

def fans(shape: tuple) -> tuple[int, int]:
  """(fan_in, fan_out) of a weight of `shape` in (out, in, *kernel) layout.

  >>> fans((32, 16, 3, 3))
  (144, 288)
  """
  return jax_init.compute_fans(shape, *_layout_axes(len(shape)))

def bound_uniform(bound: float):
  """U(-bound, bound)."""
  return lambda key, shape, dtype=jnp.float32: random.uniform(key, shape, dtype, -bound, bound)

def truncated_normal(stddev: float = 1e-2, lower: float = -2.0, upper: float = 2.0):
  """N(0, stddev^2) truncated to [lower, upper] standard deviations."""
  return jax_init.truncated_normal(stddev, None, lower, upper)

def variance_scaling(scale: float, mode: str, distribution: str):
  """Samples with variance scale / n, n = fan_in, fan_out or their mean (`mode`), from a 'uniform', 'normal' or
  'truncated_normal' `distribution` (the truncated one corrected to keep that variance): JAX's variance_scaling
  with this module's layout.

  >>> import tinyjx.random as random
  >>> w = variance_scaling(2.0, 'fan_in', 'normal')(random.PRNGKey(0), (256, 512))
  >>> round(float(w.std() ** 2 * 512), 1)
  2.0
  """
  by_ndim = {big: jax_init.variance_scaling(scale, mode, distribution, *_layout_axes(2 if big else 0))
             for big in (False, True)}
  return lambda key, shape, dtype=jnp.float32: by_ndim[len(tuple(shape)) >= 2](key, shape, dtype)

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
