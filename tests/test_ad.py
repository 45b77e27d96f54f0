"""Tests of grad, vjp, jvp, linearize, the jacobians and stop_gradient (tinyjx/transforms/ad.py).

Every differentiable op is built directly as a UOp and checked in float64 (64-bit mode) over hypothesis-drawn
shapes and values: jvp against central finite differences, vjp against jvp by the dot-product identity
<vjp(ct), t> == <ct, jvp(t)>, and second derivatives (forward-over-reverse and reverse-over-reverse) against
finite differences of the gradient. Known answers from JAX (ties, zeros, duplicates) are written in as data.
"""
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax, nn as jnn, dtypes
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops, GroupOp
from tinyjx.transforms import ad
from conftest import SEMANTICS_DEVICE, examples

X64 = dict(JAX_ENABLE_X64=True)
# The property tests build thousands of distinct graphs; they run on the PYTHON reference device, which
# interprets instead of compiling each one. test_default_device_matches_python_on_derivatives then runs the
# same derivative graphs on the default (compiled) device and compares.
REFERENCE = dict(JAX_ENABLE_X64=True, TINYJX_DEVICE=SEMANTICS_DEVICE)
H = 1e-6

def prim(op, *xs, arg=None):
  """One primitive node over Arrays (the op under test, nothing else)."""
  us = [x.uop for x in xs]
  dt = us[1].dtype if op is Ops.WHERE else us[0].dtype
  return Array(UOp(op, dt, tuple(us), arg))

def f64(a) -> np.ndarray: return np.asarray(a, dtype=np.float64)

# ---------------------------------------------------------------- op cases: (f, float args) from a rng and shape

def uniform(rng, shape, lo, hi): return rng.uniform(lo, hi, shape)
def away_from_zero(rng, shape, gap, hi=2.0): return rng.choice([-1.0, 1.0], shape) * rng.uniform(gap, hi, shape)

UNARY_DOMAINS = {
  Ops.NEG: (-2, 2), Ops.EXP: (-2, 2), Ops.LOG: (0.2, 3), Ops.EXPM1: (-2, 2), Ops.LOG1P: (-0.5, 2),
  Ops.SIN: (-3, 3), Ops.COS: (-3, 3), Ops.TAN: (-1.2, 1.2), Ops.ASIN: (-0.9, 0.9), Ops.ACOS: (-0.9, 0.9),
  Ops.ATAN: (-3, 3), Ops.SINH: (-2, 2), Ops.COSH: (-2, 2), Ops.TANH: (-2, 2), Ops.SQRT: (0.2, 3),
  Ops.ERF: (-2, 2), Ops.RECIP: None, Ops.ABS: None,
}

def unary_case(op):
  def make(rng, shape):
    dom = UNARY_DOMAINS[op]
    x = uniform(rng, shape, *dom) if dom else away_from_zero(rng, shape, 0.3)
    return (lambda a: prim(op, a)), [x]
  return make

def binary_args(op, rng, shape):
  a = uniform(rng, shape, -2, 2)
  if op is Ops.DIV: return a, away_from_zero(rng, shape, 0.3)
  if op is Ops.POW: return uniform(rng, shape, 0.5, 2), uniform(rng, shape, -2, 2)
  if op in (Ops.MAX, Ops.MIN): return a, a + away_from_zero(rng, shape, 0.1, 1.0)
  if op is Ops.REM:   # keep a/b away from integers, where fmod jumps
    b = away_from_zero(rng, shape, 0.5, 1.5)
    return b * (rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.9, shape)), b
  if op is Ops.ATAN2:  # away from the origin and from the branch cut on the negative x axis
    r, th = rng.uniform(0.5, 2, shape), rng.uniform(-2.8, 2.8, shape)
    return r * np.sin(th), r * np.cos(th)
  return a, uniform(rng, shape, -2, 2)

def binary_case(op):
  def make(rng, shape): return (lambda a, b: prim(op, a, b)), list(binary_args(op, rng, shape))
  return make

def where_case(rng, shape):
  c = jnp.asarray(rng.random(shape) < 0.5)
  return (lambda a, b: prim(Ops.WHERE, c, a, b)), [uniform(rng, shape, -2, 2), uniform(rng, shape, -2, 2)]

def random_axes(rng, ndim): return tuple(i for i in range(ndim) if rng.random() < 0.5)

def reduce_case(op):
  def make(rng, shape):
    axes = random_axes(rng, len(shape))
    return (lambda a: Array(a.uop.reduce(op, axes))), [uniform(rng, shape, -2, 2)]
  return make

def cumulative_case(op):
  def make(rng, shape):
    shape = shape or (3,)
    arg = (op, int(rng.integers(len(shape))), bool(rng.random() < 0.5))
    return (lambda a: prim(Ops.CUMULATIVE, a, arg=arg)), [uniform(rng, shape, -2, 2)]
  return make

def movement_case(op):
  def make(rng, shape):
    shape = shape or (2,)
    x = uniform(rng, shape, -2, 2)
    if op is Ops.RESHAPE: return (lambda a: Array(a.uop.reshape(tuple(reversed(shape)) + (1,)))), [x]
    if op is Ops.PERMUTE:
      perm = tuple(int(i) for i in rng.permutation(len(shape)))
      return (lambda a: Array(UOp(Ops.PERMUTE, a.dtype, (a.uop,), perm))), [x]
    if op is Ops.EXPAND:
      small = tuple(1 if rng.random() < 0.5 else s for s in shape)
      return (lambda a: Array(UOp(Ops.EXPAND, a.dtype, (a.uop,), tuple(shape)))), [uniform(rng, small, -2, 2)]
    if op is Ops.PAD:
      pads = tuple((int(rng.integers(3)), int(rng.integers(3))) for _ in shape)
      return (lambda a: Array(UOp(Ops.PAD, a.dtype, (a.uop,), pads))), [x]
    if op is Ops.SHRINK:
      bounds = tuple((lo, int(rng.integers(lo + 1, s + 1))) for s in shape for lo in [int(rng.integers(s))])
      return (lambda a: Array(UOp(Ops.SHRINK, a.dtype, (a.uop,), bounds))), [x]
    axes = random_axes(rng, len(shape))
    return (lambda a: Array(UOp(Ops.FLIP, a.dtype, (a.uop,), axes))), [x]
  return make

# dimension numbers ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)) with operand shapes
DOT_CONFIGS = [
  (((1,), (0,)), ((), ()), (2, 3), (3, 4)),             # matmul
  (((2,), (1,)), ((0,), (0,)), (2, 3, 4), (2, 4, 3)),   # batched matmul
  (((0, 2), (2, 0)), ((), ()), (2, 3, 4), (4, 3, 2)),   # two contractions, listed out of order
  (((2,), (0,)), ((1,), (1,)), (3, 2, 4), (4, 2, 3)),   # batch dims not leading
  (((), ()), ((), ()), (3,), (2,)),                      # outer product
  (((0,), (0,)), ((), ()), (3,), (3,)),                  # inner product to a scalar
]
def dot_case(rng, shape):
  contract, batch, sa, sb = DOT_CONFIGS[int(rng.integers(len(DOT_CONFIGS)))]
  f = lambda a, b: Array(UOp(Ops.DOT_GENERAL, a.dtype, (a.uop, b.uop), (contract, batch)))
  return f, [uniform(rng, sa, -2, 2), uniform(rng, sb, -2, 2)]

def gather_case(rng, shape):
  shape = shape or (2,)
  idx = jnp.asarray(rng.integers(0, shape[0], tuple(rng.integers(1, 4, rng.integers(0, 3)))).astype(np.int32))
  return (lambda a: prim(Ops.GATHER, a, idx)), [uniform(rng, shape, -2, 2)]

def scatter_case(mode):
  def make(rng, shape):
    shape = shape or (2,)
    k = int(rng.integers(1, 5))
    idx = jnp.asarray(rng.integers(-1, shape[0] + 1, (k,)).astype(np.int32))   # duplicates and dropped ones
    f = lambda a, u: Array(UOp(Ops.SCATTER, a.dtype, (a.uop, idx.uop, u.uop), mode))
    return f, [uniform(rng, shape, -2, 2), uniform(rng, (k,) + tuple(shape[1:]), -2, 2)]
  return make

CASES = {
  **{f"unary_{op.name}": unary_case(op) for op in UNARY_DOMAINS},
  **{f"binary_{op.name}": binary_case(op) for op in ad.BINARY_DERIVATIVES},
  "where": where_case,
  **{f"reduce_{op.name}": reduce_case(op) for op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN)},
  **{f"cumulative_{op.name}": cumulative_case(op) for op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN)},
  **{f"movement_{op.name}": movement_case(op) for op in GroupOp.Movement},
  "dot_general": dot_case, "gather": gather_case,
  **{f"scatter_{m}": scatter_case(m) for m in ('add', 'set', 'mul', 'min', 'max')},
}

# ---------------------------------------------------------------- the derivative checks

def along(args, ts, h): return [jnp.asarray(a + h * t) for a, t in zip(args, ts)]
def dot(a, b) -> float: return float(np.sum(f64(a) * f64(b)))

def check_first_order(f, args, rng):
  xs = [jnp.asarray(a) for a in args]
  ts = [rng.normal(size=np.shape(a)) for a in args]
  y, ty = tinyjx.jvp(f, xs, [jnp.asarray(t) for t in ts])
  fd = (f64(f(*along(args, ts, H))) - f64(f(*along(args, ts, -H)))) / (2 * H)
  np.testing.assert_allclose(f64(ty), fd, rtol=1e-5, atol=1e-5)
  ct = rng.normal(size=y.shape)
  _, f_vjp = tinyjx.vjp(f, *xs)
  cts = f_vjp(jnp.asarray(ct))
  lhs = sum(dot(g, t) for g, t in zip(cts, ts))
  assert math.isclose(lhs, dot(ct, ty), rel_tol=1e-9, abs_tol=1e-9)
  return ts, ct

def check_second_order(f, args, ts, ct, finite_differences=True):
  xs = [jnp.asarray(a) for a in args]
  nums = tuple(range(len(args)))
  g = tinyjx.grad(lambda *a: jnp.sum(f(*a) * ct), argnums=nums)
  _, hv = tinyjx.jvp(g, xs, [jnp.asarray(t) for t in ts])                  # forward over reverse
  rr = tinyjx.grad(lambda *a: sum(jnp.sum(gi * t) for gi, t in zip(g(*a), ts)), argnums=nums)(*xs)  # reverse twice
  for i in nums:
    np.testing.assert_allclose(f64(rr[i]), f64(hv[i]), rtol=1e-8, atol=1e-8)
    if finite_differences:
      fd = (f64(g(*along(args, ts, H))[i]) - f64(g(*along(args, ts, -H))[i])) / (2 * H)
      np.testing.assert_allclose(f64(hv[i]), fd, rtol=1e-4, atol=1e-4)

shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)

@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1), shape=shapes)
def test_op_derivatives(name, seed, shape):
  rng = np.random.default_rng(seed)
  with tinyjx.Context(**REFERENCE):
    f, args = CASES[name](rng, shape)
    ts, ct = check_first_order(f, args, rng)
    check_second_order(f, args, ts, ct)

def derivative_roots(rng) -> list:
  """(label, graph) of the jvp and vjp of every op case and API function at one random point each."""
  roots = []
  programs = {n: CASES[n](rng, (2, 3)) for n in sorted(CASES)}
  idx = np.array([0, 2, 1, 1, 0], np.int32)
  programs.update({n: ((lambda x, y, f=f: f(x, y, idx)), [rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4, 2))])
                   for n, f in API_FUNCTIONS.items()})
  for name, (f, args) in programs.items():
    xs = [jnp.asarray(a) for a in args]
    y, ty = tinyjx.jvp(f, xs, [jnp.asarray(rng.normal(size=np.shape(a))) for a in args])
    _, f_vjp = tinyjx.vjp(f, *xs)
    roots.append((f"jvp of {name}", ty.uop))
    cts = f_vjp(jnp.asarray(rng.normal(size=y.shape)))
    roots += [(f"vjp of {name}, argument {i}", g.uop) for i, g in enumerate(cts)]
  return roots

def test_default_device_matches_python_on_derivatives():
  from tinyjx import devices
  from tinyjx.array import strip_tags, realize_uops, buffers
  from tinyjx.devices.python import evaluate
  if devices.default_name().startswith('PYTHON'): pytest.skip("the default device is the PYTHON reference itself")
  with tinyjx.Context(**X64):
    labels, roots = zip(*derivative_roots(np.random.default_rng(0)))
    expected = evaluate(strip_tags(list(roots)))
    got = [buffers[b.arg[0]].numpy() for b in realize_uops(list(roots))]   # one schedule for all of them
  wrong = [label for label, r, e, g in zip(labels, roots, expected, got)
           if not np.allclose(g.reshape(r.shape), e, rtol=1e-9, atol=1e-12, equal_nan=True)]
  assert not wrong, f"the default device disagrees with PYTHON on: {wrong}"

def test_every_differentiable_elementwise_op_has_a_case():
  covered = set(UNARY_DOMAINS) | set(ad.BINARY_DERIVATIVES) | {Ops.WHERE}
  smooth = GroupOp.Elementwise - GroupOp.NonDifferentiable - {Ops.CAST}
  assert smooth == covered

# ---------------------------------------------------------------- non-differentiable ops and casts

@pytest.mark.parametrize("op", [Ops.SIGN, Ops.FLOOR, Ops.CEIL, Ops.ROUND, Ops.TRUNC])
def test_rounding_and_sign_have_zero_gradient(op):
  x = jnp.array([-1.7, -0.5, 0.3, 2.5])
  g = tinyjx.grad(lambda a: jnp.sum(prim(op, a) * a))(x)   # d(op(x) * x) = op(x) when op' = 0
  np.testing.assert_allclose(np.asarray(g), np.asarray(prim(op, x)))

def test_comparison_and_int_cast_stop_gradients():
  x = jnp.array([1.5, -2.0])
  assert tinyjx.grad(lambda a: jnp.sum((a > 0) * a))(x).tolist() == [1.0, 0.0]
  assert tinyjx.grad(lambda a: jnp.sum(a.astype(jnp.int32) * 1.0 + a))(x).tolist() == [1.0, 1.0]

def test_float_cast_sends_cotangent_back_in_the_input_dtype():
  x = jnp.array([1.0, 2.0], dtype=jnp.float16)
  g = tinyjx.grad(lambda a: jnp.sum(a.astype(jnp.float32) ** 2))(x)
  assert g.dtype == jnp.float16 and g.tolist() == [2.0, 4.0]

def test_gradient_keeps_input_dtype_and_weak_type():
  g = tinyjx.grad(lambda a: a * 2.0)(3.0)
  assert g.dtype == jnp.float32 and g.weak
  with tinyjx.Context(**X64):
    assert tinyjx.grad(jnp.sin)(jnp.asarray(np.float64(1.0))).dtype == jnp.float64

# ---------------------------------------------------------------- known answers from JAX

JAX_GRADS = {   # name: (function, args, JAX's gradients)
  'cummax_ties': (lambda x: lax.cummax(x, 0).sum(), ([1., 1, 1, 1, 1],), [[2.125, 1.125, 0.875, 0.375, 0.5]]),
  'cummax': (lambda x: (lax.cummax(x, 0) * np.arange(7.)).sum(), ([3., 1, 3, 2, 3, 3, 0],),
             [[7.25, 0.0, 6.25, 0.0, 4.75, 2.75, 0.0]]),
  'cummax_reverse': (lambda x: (lax.cummax(x, 0, reverse=True) * np.arange(7.)).sum(), ([3., 1, 3, 2, 3, 3, 0],),
                     [[0.0, 0.0, 1.5, 0.0, 4.25, 9.25, 6.0]]),
  'cummin': (lambda x: (lax.cummin(x, 0) * np.arange(7.)).sum(), ([-3., -1, -3, -2, -3, -3, 0],),
             [[7.25, 0.0, 6.25, 0.0, 4.75, 2.75, 0.0]]),
  'cumprod_zeros': (lambda x: (jnp.cumprod(x) * np.arange(5.)).sum(), ([2., 0, 3, 0, 5],),
                    [[0.0, 14.0, 0.0, 0.0, 0.0]]),
  'prod_zero': (lambda x: jnp.prod(x), ([2., 0, 3, 4],), [[0.0, 24.0, 0.0, 0.0]]),
  'prod_two_zeros': (lambda x: jnp.prod(x), ([2., 0, 3, 0],), [[0.0, 0.0, 0.0, 0.0]]),
  'max_ties': (lambda x: jnp.max(x), ([1., 3, 3],), [[0.0, 0.5, 0.5]]),
  'min_ties_axis': (lambda x: (jnp.min(x, axis=0) * np.arange(3.)).sum(), ([[1., 2, 0], [1, 0, 0]],),
                    [[[0.0, 0.0, 1.0], [0.0, 1.0, 1.0]]]),
  'abs_at_zero': (lambda x: jnp.abs(x).sum(), ([0., -0., 1, -2],), [[1.0, 1.0, 1.0, -1.0]]),
  'clip_bounds': (lambda x: jnp.clip(x, 0., 1.).sum(), ([0., 1, .5, 2],), [[0.5, 0.5, 1.0, 0.0]]),
  'maximum_ties': (lambda x, y: jnp.maximum(x, y).sum() + jnp.minimum(x, y * 2).sum(), ([1., 2, 3], [1., 3, 1.5]),
                   [[1.5, 1.0, 1.5], [0.5, 1.0, 1.0]]),
  'pow_at_zero': (lambda x, y: (x ** y).sum(), ([0., 0, 0, 2, 3], [0., 1, 2, .5, 1.5]),
                  [[math.nan, 1.0, 0.0, 0.353553, 2.598076], [0.0, 0.0, 0.0, 0.980258, 5.708556]]),
  'fmod': (lambda x, y: jnp.fmod(x, y).sum(), ([5.5, -3.2], [2., 1.5]), [[1.0, 1.0], [-2.0, 2.0]]),
  'sort_ties': (lambda x: (jnp.sort(x) * np.arange(4.)).sum(), ([1., 1, 0, 1],), [[1.0, 2.0, 0.0, 3.0]]),
  'argmax_index': (lambda x: x[jnp.argmax(x)] * 2, ([1., 3, 3, 0],), [[0.0, 2.0, 0.0, 0.0]]),
  'set_duplicates': (lambda x, u: (x.at[np.array([0, 0, 1])].set(u) * np.array([1., 2, 3])).sum(),
                     ([1., 1, 1], [1., 2, 3]), [[0.0, 0.0, 3.0], [0.0, 1.0, 2.0]]),
  'add_duplicates': (lambda x, u: (x.at[np.array([0, 0, 2])].add(u) * np.array([1., 2, 3])).sum(),
                     ([1., 1, 1], [1., 1, .5]), [[1.0, 2.0, 3.0], [1.0, 1.0, 3.0]]),
  'max_duplicates': (lambda x, u: (x.at[np.array([0, 0, 1])].max(u) * np.array([1., 2, 3])).sum(),
                     ([1., 1, 1], [1., 1, .5]), [[1 / 3, 2.0, 3.0], [1 / 3, 1 / 3, 0.0]]),
  'min_duplicates': (lambda x, u: (x.at[np.array([0, 0, 1])].min(u) * np.array([1., 2, 3])).sum(),
                     ([1., 1, 1], [1., 1, .5]), [[1 / 3, 0.0, 3.0], [1 / 3, 1 / 3, 2.0]]),
  'mul_operand': (lambda x: (x.at[np.array([0, 0, 2])].mul(np.array([2., 3, 4])) * np.array([1., 2, 3])).sum(),
                  ([1., 1, 1],), [[6.0, 2.0, 12.0]]),
  'softmax': (lambda x: (jnn.softmax(x) * np.arange(4.)).sum(), ([1., 2, 2, -1],),
              [[-0.198214, -0.125181, 0.288441, 0.034954]]),
  'log_softmax': (lambda x: (jnn.log_softmax(x) * np.arange(4.)).sum(), ([1., 2, 2, -1],),
                  [[-0.912978, -1.481732, -0.481732, 2.876442]]),
  'logsumexp': (lambda x: jnn.logsumexp(x), ([1., 2, 2, -1],), [[0.152163, 0.413622, 0.413622, 0.020593]]),
}

@pytest.mark.parametrize("name", sorted(JAX_GRADS))
def test_gradients_match_jax(name):
  f, args, expected = JAX_GRADS[name]
  got = tinyjx.grad(f, argnums=tuple(range(len(args))))(*[jnp.asarray(np.array(a, np.float32)) for a in args])
  for g, e in zip(got, expected):
    np.testing.assert_allclose(np.asarray(g), np.array(e), rtol=1e-5, atol=1e-6)

def test_gather_transpose_drops_out_of_range_indices_as_jax():
  # lax-level GATHER clamps an out-of-range index when reading, and its transpose drops that cotangent (JAX)
  x, idx = jnp.arange(3.0), jnp.asarray(np.array([5, 2, 1], np.int32))
  g = tinyjx.grad(lambda a: jnp.sum(prim(Ops.GATHER, a, idx) * jnp.array([1., 2., 3.])))(x)
  assert g.tolist() == [0.0, 3.0, 2.0]

def test_scatter_mul_update_gradient_with_duplicates_and_zeros():
  # d/du of x[i] * prod(u at i) is x[i] times the product of the *other* updates, zeros included
  idx = np.array([0, 0, 0, 1], np.int32)
  def f(u): return jnp.sum(jnp.array([2., 3.]).at[idx].mul(u) * jnp.array([1., 10.]))
  for u in ([2., 3., 5., 7.], [0., 3., 5., 7.], [0., 0., 5., 7.]):
    u = np.array(u)
    expected = [2 * np.prod(np.delete(u[:3], j)) for j in range(3)] + [30.0]
    np.testing.assert_allclose(np.asarray(tinyjx.grad(f)(jnp.asarray(u))), expected)

# ---------------------------------------------------------------- the API through numpy, nn, indexing

API_FUNCTIONS = {   # functions of x: (3, 4) and y: (4, 2); idx is 5 row indices into x
  'matmul': lambda x, y, idx: jnp.matmul(x, y),
  'einsum': lambda x, y, idx: jnp.einsum('ij,jk->ki', x, y) + jnp.einsum('ij,ij->', x, x),
  'indexing': lambda x, y, idx: x[1:, ::2] * 2 + x[idx, 1:3].sum() + x[-1, None, ..., 2],
  'at_add_set': lambda x, y, idx: x.at[idx, 0].add(y[:4, 0].sum()).at[0, 1:3].set(y[0]),
  'sort': lambda x, y, idx: jnp.sort(x, axis=1),
  'take_along_argsort': lambda x, y, idx: jnp.take_along_axis(x, jnp.argsort(x, axis=0), axis=0),
  'cumsum_cumprod': lambda x, y, idx: jnp.cumsum(x, axis=0) * jnp.cumprod(x, axis=1),
  'softmax': lambda x, y, idx: jnn.softmax(x * 3, axis=0),
  'logsumexp': lambda x, y, idx: jnn.logsumexp(x * 3, axis=1),
  'where': lambda x, y, idx: jnp.where(x > 0, jnp.sqrt(jnp.abs(x) + 1), x ** 3),
  'max_min': lambda x, y, idx: jnp.max(x, axis=1) * jnp.min(y),
  'norm_var': lambda x, y, idx: jnp.linalg.norm(x) + jnp.var(y, axis=0, ddof=1),
  'concat_pad': lambda x, y, idx: jnp.concatenate([jnp.pad(x, ((1, 0), (0, 2))), jnp.pad(y.T, ((0, 0), (1, 1)))], 0),
}

@pytest.mark.parametrize("name", sorted(API_FUNCTIONS))
@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1))
def test_api_functions_derivatives(name, seed):
  # first order against finite differences; second order: forward-over-reverse equals reverse-over-reverse
  rng = np.random.default_rng(seed)
  idx = np.array(rng.integers(0, 3, 5), np.int32)
  f = lambda x, y: API_FUNCTIONS[name](x, y, idx)
  with tinyjx.Context(**REFERENCE):
    args = [rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4, 2))]
    ts, ct = check_first_order(f, args, rng)
    check_second_order(f, args, ts, ct, finite_differences=False)

def test_boolean_mask_on_concrete_values():
  x = jnp.array([1.0, -2.0, 3.0])
  assert tinyjx.grad(lambda a: jnp.sum(a[a > 0] ** 2))(x).tolist() == [2.0, 0.0, 6.0]

def test_size_zero_arrays():
  x = jnp.zeros((0, 3))
  assert tinyjx.grad(lambda a: jnp.sum(a * 2))(x).shape == (0, 3)
  assert tinyjx.grad(lambda a: jnp.sum(jnp.prod(a, axis=0)))(x).shape == (0, 3)

# ---------------------------------------------------------------- the transforms

def test_eager_grad_follows_python_control_flow():
  def f(x):
    y = x
    while jnp.sum(y) < 10.0:   # a Python loop on concrete values
      y = y * 2.0
    return jnp.sum(jnp.sin(y)) if float(y[0]) > 0 else jnp.sum(y)
  x = jnp.array([1.0, 2.0])   # doubled twice: y = 4x, f = sum(sin(4x))
  np.testing.assert_allclose(np.asarray(tinyjx.grad(f)(x)), 4 * np.cos(4 * np.array([1.0, 2.0])), rtol=1e-5)
  assert tinyjx.grad(f)(jnp.array([-5.0, 20.0])).tolist() == [1.0, 1.0]

def test_grad_of_grad_and_third_order():
  f = lambda x: x ** 4 + jnp.sin(x)
  x = 0.7
  assert math.isclose(tinyjx.grad(tinyjx.grad(f))(x).item(), 12 * x ** 2 - math.sin(x), rel_tol=1e-5)
  assert math.isclose(tinyjx.grad(tinyjx.grad(tinyjx.grad(f)))(x).item(), 24 * x - math.cos(x), rel_tol=1e-5)

def test_jvp_of_grad_is_a_hessian_vector_product():
  f = lambda x: jnp.sum(x ** 3) * x[0]
  x, v = jnp.array([1.0, 2.0]), jnp.array([1.0, -1.0])
  _, hv = tinyjx.jvp(tinyjx.grad(f), (x,), (v,))
  h = np.array([[12 * 1.0 + 3 * 1 * 0, 12.0], [12.0, 6 * 2.0 * 1.0]])   # H = [[12x0, 3x1^2], [3x1^2, 6x1 x0]]
  np.testing.assert_allclose(np.asarray(hv), h @ np.array([1.0, -1.0]), rtol=1e-6)

def test_value_and_grad_argnums_and_has_aux():
  def f(x, y, scale):
    return jnp.sum(x * y) * scale, {'norm': jnp.sum(x * x)}
  x, y = jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0])
  (v, aux), (gx, gy) = tinyjx.value_and_grad(f, argnums=(0, 1), has_aux=True)(x, y, 2.0)
  assert v.item() == 22.0 and aux['norm'].item() == 5.0
  assert gx.tolist() == [6.0, 8.0] and gy.tolist() == [2.0, 4.0]
  g, aux = tinyjx.grad(f, argnums=-2, has_aux=True)(x, y, 2.0)
  assert g.tolist() == [2.0, 4.0] and 'TAG' not in aux['norm'].uop.flags

def test_grad_over_pytrees_and_keyword_arguments():
  params = {'w': jnp.array([1.0, 2.0]), 'b': (jnp.array(0.5), [jnp.array(1.0)])}
  def loss(p, x, offset=0.0): return jnp.sum(p['w'] * x) + p['b'][0] * p['b'][1][0] + offset
  g = tinyjx.grad(loss)(params, jnp.array([3.0, 4.0]), offset=1.0)
  assert g['w'].tolist() == [3.0, 4.0] and g['b'][0].item() == 1.0 and g['b'][1][0].item() == 0.5

def test_vjp_with_structured_outputs_and_aux():
  f = lambda x: ((x * 2, jnp.sum(x)), x[0])
  (out, f_vjp, aux) = tinyjx.vjp(f, jnp.array([1.0, 2.0]), has_aux=True)
  (g,) = f_vjp((jnp.array([1.0, 10.0]), 1.0))
  assert g.tolist() == [3.0, 21.0] and aux.item() == 1.0 and out[1].item() == 3.0

def test_jvp_and_linearize():
  f = lambda x, y: (jnp.sin(x) * y, x + y)
  (a, b), (ta, tb) = tinyjx.jvp(f, (0.5, 2.0), (1.0, 0.0))
  assert math.isclose(ta.item(), math.cos(0.5) * 2, rel_tol=1e-6) and tb.item() == 1.0
  out, f_jvp = tinyjx.linearize(f, 0.5, 2.0)
  ta2, tb2 = f_jvp(1.0, 0.0)
  assert ta2.item() == ta.item() and tb2.item() == 1.0 and out[1].item() == 2.5
  assert math.isclose(f_jvp(0.0, 1.0)[0].item(), math.sin(0.5), rel_tol=1e-6)

def test_integer_inputs_to_vjp_and_jvp_get_zero_cotangents():
  f = lambda x, n: x * n
  out, f_vjp = tinyjx.vjp(f, jnp.array([1.0, 2.0]), jnp.array([3, 4]))
  gx, gn = f_vjp(jnp.ones(2))
  assert gx.tolist() == [3.0, 4.0] and gn.tolist() == [0, 0]
  assert tinyjx.jvp(f, (jnp.array([1.0]), jnp.array([3])), (jnp.array([1.0]), jnp.array([0])))[1].tolist() == [3.0]
  g = tinyjx.grad(lambda x, n: jnp.sum(x * n), argnums=(0, 1), allow_int=True)(jnp.ones(2), jnp.array([1, 2]))
  assert g[1].tolist() == [0, 0]

def test_stop_gradient():
  f = lambda x: jnp.sum(x * lax.stop_gradient(x))
  x = jnp.array([1.0, 2.0])
  assert tinyjx.grad(f)(x).tolist() == [1.0, 2.0]
  assert tinyjx.jvp(f, (x,), (jnp.ones(2),))[1].item() == 3.0
  assert tinyjx.grad(tinyjx.grad(lambda x: x * lax.stop_gradient(x * x)))(3.0).item() == 0.0
  tree = lax.stop_gradient({'a': x, 'n': jnp.array([1, 2])})
  assert tree['a'].tolist() == [1.0, 2.0] and tree['n'].tolist() == [1, 2]
  assert 'b:f32[] = stop_gradient a' in str(tinyjx.make_jaxpr(lambda x: lax.stop_gradient(x) * 2)(1.0))

def test_jacobians_and_hessian():
  f = lambda x: jnp.sin(x) * x[::-1]
  x = jnp.array([0.3, -1.2, 2.0])
  xv = np.asarray(x)
  expected = np.diag(np.cos(xv) * xv[::-1]) + np.diag(np.sin(xv))[:, ::-1]
  np.testing.assert_allclose(np.asarray(tinyjx.jacrev(f)(x)), expected, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(tinyjx.jacfwd(f)(x)), expected, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(tinyjx.jacobian(f)(x)), expected, rtol=1e-6)
  h = tinyjx.hessian(lambda x: jnp.sum(x ** 3) * x[0])(jnp.array([1.0, 2.0]))
  np.testing.assert_allclose(np.asarray(h), [[12.0, 12.0], [12.0, 12.0]], rtol=1e-6)

def test_jacobian_pytree_layout():
  f = lambda p: {'s': jnp.sum(p['a'] * p['b']), 'v': p['a'] * 2}
  p = {'a': jnp.array([1.0, 2.0]), 'b': jnp.array(3.0)}
  for jac in (tinyjx.jacrev, tinyjx.jacfwd):
    j = jac(f)(p)
    assert j['s']['a'].tolist() == [3.0, 3.0] and j['s']['b'].item() == 3.0
    assert j['v']['a'].tolist() == [[2.0, 0.0], [0.0, 2.0]] and j['v']['b'].tolist() == [0.0, 0.0]
  j, aux = tinyjx.jacrev(lambda x, y: (x * y, y), argnums=(0, 1), has_aux=True)(jnp.array([1.0, 2.0]), 3.0)
  assert j[0].tolist() == [[3.0, 0.0], [0.0, 3.0]] and j[1].tolist() == [1.0, 2.0] and aux.item() == 3.0

def test_jacfwd_of_jacrev_equals_jacrev_of_jacfwd():
  f = lambda x: jnp.sum(jnp.exp(x) * jnp.roll(x, 1))
  x = jnp.array([0.1, 0.2, -0.3])
  a = tinyjx.jacfwd(tinyjx.jacrev(f))(x)
  b = tinyjx.jacrev(tinyjx.jacfwd(f))(x)
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

def test_vmap_of_grad_is_per_example_gradients():
  w = jnp.array([1.0, -2.0])
  loss = lambda w, x: jnp.sum(jnp.tanh(w * x))
  xs = jnp.array([[0.1, 0.2], [0.3, -0.4], [1.0, 2.0]])
  per_example = tinyjx.vmap(tinyjx.grad(loss), in_axes=(None, 0))(w, xs)
  for i in range(3):
    np.testing.assert_allclose(np.asarray(per_example[i]), np.asarray(tinyjx.grad(loss)(w, xs[i])), rtol=1e-6)
  g = tinyjx.grad(lambda w: jnp.sum(tinyjx.vmap(loss, in_axes=(None, 0))(w, xs)))(w)
  np.testing.assert_allclose(np.asarray(g), np.asarray(per_example).sum(0), rtol=1e-6)

def test_grad_under_jit_and_jit_under_grad():
  f = lambda x: jnp.sum(jnp.sin(x) ** 2)
  x = jnp.array([0.5, 1.0])
  expected = np.sin(2 * np.array([0.5, 1.0]))
  np.testing.assert_allclose(np.asarray(tinyjx.jit(tinyjx.grad(f))(x)), expected, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(tinyjx.grad(tinyjx.jit(f))(x)), expected, rtol=1e-6)

def test_make_jaxpr_shows_the_gradient_graph():
  text = str(tinyjx.make_jaxpr(tinyjx.grad(lambda x: jnp.sin(x) * x))(1.0))
  assert 'cos' in text and 'sin' in text and 'tag' not in text
  text = str(tinyjx.make_jaxpr(tinyjx.grad(lambda x: jnp.sum(jnp.exp(x))))(jnp.ones(3)))
  assert 'exp' in text and 'broadcast' in text

def test_transformed_jaxprs_are_memoized_by_content():
  def build():
    return tinyjx.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0)
  j1, j2 = build(), build()
  assert j1.key == j2.key and j1 is not j2
  assert ad.vjp_jaxpr(j1, (True,), (True,)) is ad.vjp_jaxpr(j2, (True,), (True,))
  assert ad.jvp_jaxpr(j1, (True,)) is ad.jvp_jaxpr(j2, (True,))
  assert ad.vjp_jaxpr(j1, (True,), (True,)) is not ad.vjp_jaxpr(j1, (False,), (True,))
  (ct,) = ad.vjp_jaxpr(j1, (True,), (True,))(UOp.const(0.0, dtypes.float32), UOp.const(3.0, dtypes.float32))
  assert Array(ct).item() == 6.0

# ---------------------------------------------------------------- errors

def test_grad_of_non_scalar_output_says_to_use_jacrev():
  with pytest.raises(TypeError, match=r"scalar output.*shape \(2,\).*jacrev.*vjp"):
    tinyjx.grad(lambda x: x * 2)(jnp.ones(2))
  with pytest.raises(TypeError, match="jacrev or vjp"):
    tinyjx.grad(lambda x: (x, x))(1.0)

def test_grad_with_integer_input_names_the_argument():
  with pytest.raises(TypeError, match=r"argument n is i32\[3\].*allow_int"):
    tinyjx.grad(lambda x, n: jnp.sum(x * n), argnums=1)(1.0, jnp.array([1, 2, 3]))
  with pytest.raises(TypeError, match=r"params\['k'\] is i32\[\]"):
    tinyjx.grad(lambda params: params['w'] * params['k'])({'w': 1.0, 'k': 2})

def test_grad_of_integer_output_and_bad_argnums():
  with pytest.raises(TypeError, match="float"):
    tinyjx.grad(lambda x: jnp.sum(x > 0))(jnp.ones(2))
  with pytest.raises(ValueError, match="argnums"):
    tinyjx.grad(lambda x: x, argnums=3)(1.0)

def test_jvp_and_vjp_argument_errors():
  with pytest.raises(TypeError, match="tuple or list"):
    tinyjx.jvp(jnp.sin, 1.0, 1.0)
  with pytest.raises(TypeError, match=r"equal shapes and dtypes.*f32\[2\].*f32\[3\]"):
    tinyjx.jvp(jnp.sin, (jnp.ones(2),), (jnp.ones(3),))
  _, f_vjp = tinyjx.vjp(lambda x: x * 2, jnp.ones(2))
  with pytest.raises(ValueError, match=r"cotangent 0 is f32\[3\].*f32\[2\]"):
    f_vjp(jnp.ones(3))
  with pytest.raises(TypeError, match="structure"):
    f_vjp((jnp.ones(2), jnp.ones(2)))
  with pytest.raises(TypeError, match="has_aux"):
    tinyjx.grad(lambda x: x, has_aux=True)(1.0)

def test_tracer_used_after_its_transform_returned():
  leaked = []
  def f(x):
    g = tinyjx.grad(lambda y: jnp.sum(y * x))(x)
    leaked.append(g)
    return g
  tinyjx.make_jaxpr(f)(jnp.ones(2))
  with pytest.raises(tinyjx.UnexpectedTracerError, match="returned"):
    np.asarray(leaked[0] + 1)
