"""test_util: `check_grads`, `check_jvp` and `check_vjp`, JAX's helpers that test a function's derivatives against
finite differences.

Inputs: a function of float arrays (pytrees allowed) and a tuple of arguments. The checks draw random tangents and
cotangents from a fixed seed, so a run is reproducible, and compare in float64 on the host:

- forward mode: `jvp(f, args, t)` against the central difference `(f(x + eps t) - f(x - eps t)) / 2 eps`;
- reverse mode: `<vjp(ct), t>` against `<ct, finite-difference jvp(t)>` (the dot-product identity);
- `order > 1` repeats both on the derivative functions themselves (the jvp as a function of primals and tangents,
  and the vjp applied to the primal output).

A mismatch raises AssertionError naming the mode and order, as JAX's do. Defaults depend on the arguments' dtype:
float32 uses eps=1e-3 and atol=rtol=2e-3 (JAX uses eps=1e-4; float32 central differences lose less to rounding
with the larger step).

Complex arguments and outputs are checked as JAX checks them: complex tangents, and the pairing of a cotangent c
with a tangent t is Re(sum(c * t)) (no conjugate), the one under which JAX's vjp is the transpose of its jvp; a
complex dtype takes the tolerances of its float parts.
"""
from __future__ import annotations
import functools
from typing import Any, Callable
import numpy as np
from tinyjx import dtypes, tree_util

__all__ = ['check_grads', 'check_jvp', 'check_vjp']

_TOL = {'float16': 5e-2, 'bfloat16': 1e-1, 'float32': 2e-3, 'float64': 1e-5}
_EPS = {'float16': 1e-1, 'bfloat16': 1e-1, 'float32': 1e-3, 'float64': 1e-6}

def _api():
  import tinyjx, tinyjx.numpy as jnp   # the transforms sit above this module's imports
  return tinyjx, jnp

def _dtype_of(x):
  _, jnp = _api()
  d = dtypes.to_dtype(jnp.asarray(x).dtype)
  if not dtypes.is_inexact(d):
    raise TypeError(f'check_grads: arguments must be float or complex arrays, got a {d} leaf; differentiate with '
                    f'respect to float inputs only (close over the integer ones, e.g. with functools.partial)')
  return d

def _widest(tree) -> str:
  leaves = [_dtype_of(x) for x in tree_util.tree_leaves(tree)]
  parts = [dtypes.real_dtype(d) for d in leaves]
  return max(parts, key=lambda d: d.itemsize).name if parts else 'float32'

def _like(tree, rng: np.random.RandomState):
  """A random tree of `tree`'s structure, shapes and dtypes (standard normal values)."""
  _, jnp = _api()
  def draw(x):
    x = jnp.asarray(x)
    if dtypes.is_complex(x.dtype):
      return jnp.asarray(rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape), dtype=x.dtype)
    return jnp.asarray(rng.standard_normal(x.shape), dtype=x.dtype)
  return tree_util.tree_map(draw, tree)

def _host(tree) -> list:
  """The leaves as float64 (complex128 for complex leaves) host arrays."""
  def wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == 'c' else np.float64)
  return [wide(x) for x in tree_util.tree_leaves(tree)]

def _pair(x: np.ndarray, y: np.ndarray) -> float:
  """Re(sum(x * y)): the pairing of a cotangent with a tangent (the dot product for real arrays)."""
  return float(np.real(np.sum(x * y)))

def _inner(a, b) -> float:
  return sum(_pair(x, y) for x, y in zip(_host(a), _host(b)))

def _step(args, tangents, scale: float):
  _, jnp = _api()
  return tree_util.tree_map(lambda x, t: jnp.asarray(x) + scale * t, args, tangents)

def numerical_jvp(f: Callable, args: tuple, tangents: tuple, eps: float) -> list:
  """The central-difference directional derivative of `f` at `args` along `tangents`, as float64 host leaves."""
  hi, lo = f(*_step(args, tangents, eps)), f(*_step(args, tangents, -eps))
  return [(h - l) / (2 * eps) for h, l in zip(_host(hi), _host(lo))]

def _close(actual: list, expected: list, atol: float, rtol: float, err_msg: str) -> None:
  if len(actual) != len(expected): raise AssertionError(f'{err_msg}: {len(actual)} leaves, expected {len(expected)}')
  for x, y in zip(actual, expected): np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=err_msg)

def _defaults(args, atol, rtol, eps) -> tuple[float, float, float]:
  name = _widest(args)
  return (_TOL[name] if atol is None else atol), (_TOL[name] if rtol is None else rtol), (
    _EPS[name] if eps is None else eps)

def check_jvp(f: Callable, f_jvp: Callable, args: tuple, atol=None, rtol=None, eps=None, err_msg: str = '') -> None:
  """Checks `f_jvp(primals, tangents) -> (out, tangent_out)` against `f` and finite differences at `args`.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> check_jvp(jnp.sin, functools.partial(tinyjx.jvp, jnp.sin), (jnp.arange(3.0),))
  """
  atol, rtol, eps = _defaults(args, atol, rtol, eps)
  tangents = _like(args, np.random.RandomState(0))
  out, tangent_out = f_jvp(args, tangents)
  _close(_host(out), _host(f(*args)), atol, rtol, f'{err_msg} primal output'.strip())
  _close(_host(tangent_out), numerical_jvp(f, args, tangents, eps), atol, rtol, f'{err_msg} tangent output'.strip())

def check_vjp(f: Callable, f_vjp: Callable, args: tuple, atol=None, rtol=None, eps=None, err_msg: str = '') -> None:
  """Checks `f_vjp(*args) -> (out, vjp_fun)` by `<vjp_fun(ct), t> == <ct, J t>`, J t by finite differences.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> check_vjp(jnp.sin, functools.partial(tinyjx.vjp, jnp.sin), (jnp.arange(3.0),))
  """
  atol, rtol, eps = _defaults(args, atol, rtol, eps)
  rng = np.random.RandomState(1)
  out, vjp_fun = f_vjp(*args)
  _close(_host(out), _host(f(*args)), atol, rtol, f'{err_msg} primal output'.strip())
  cotangent, tangents = _like(out, rng), _like(args, rng)
  lhs = _inner(vjp_fun(cotangent), tangents)
  rhs = sum(_pair(c, j) for c, j in zip(_host(cotangent), numerical_jvp(f, args, tangents, eps)))
  _close([np.float64(lhs)], [np.float64(rhs)], atol, rtol, f'{err_msg} <vjp(ct), t> vs <ct, jvp(t)>'.strip())

def check_grads(f: Callable, args: tuple, order: int, modes=('fwd', 'rev'), atol=None, rtol=None, eps=None) -> None:
  """Checks the derivatives of `f` at `args` (a tuple of arguments) up to `order`, in forward ('fwd') and reverse
  ('rev') mode, against finite differences; raises AssertionError on a mismatch.

  >>> import tinyjx.numpy as jnp
  >>> check_grads(lambda x: jnp.sum(jnp.exp(x) * x), (jnp.arange(3.0),), order=2)
  >>> check_grads(lambda x: x * x, (3.0,), order=1, modes=['rev'])
  """
  if not isinstance(args, (tuple, list)):
    raise TypeError(f'check_grads: args must be a tuple of the arguments of f, got {type(args).__name__}; pass '
                    f'(x,) for a single argument')
  if not isinstance(order, int) or isinstance(order, bool) or order < 1:
    raise ValueError(f'check_grads: order must be an int >= 1 (1 checks first derivatives), got {order!r}')
  modes = (modes,) if isinstance(modes, str) else tuple(modes)
  if not modes or any(m not in ('fwd', 'rev') for m in modes):
    raise ValueError(f"check_grads: modes must name 'fwd' and/or 'rev', got {modes!r}")
  _check_order(f, tuple(args), order, modes, (atol, rtol, eps), 1, '')

def _check_order(f, args: tuple, order: int, modes: tuple, tols: tuple, level: int, of: str) -> None:
  tinyjx, _ = _api()
  if 'fwd' in modes:
    check_jvp(f, functools.partial(tinyjx.jvp, f), args, *tols, err_msg=f'check_grads: forward mode, order {level}{of}')
    if order > 1:
      def jvp_of_f(primals, tangents): return tinyjx.jvp(f, primals, tangents)
      _check_order(jvp_of_f, (args, args), order - 1, modes, tols, level + 1, ' (of the jvp)')
  if 'rev' in modes:
    check_vjp(f, functools.partial(tinyjx.vjp, f), args, *tols, err_msg=f'check_grads: reverse mode, order {level}{of}')
    if order > 1:
      def vjp_of_f(*primals):
        out, vjp_fun = tinyjx.vjp(f, *primals)
        return vjp_fun(out)
      _check_order(vjp_of_f, args, order - 1, modes, tols, level + 1, ' (of the vjp)')
