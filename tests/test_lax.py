"""Tests of tinyjx.lax (the part without control flow): each op against numpy, lax's strict dtype and shape
rules (errors name both dtypes or shapes), pad with negative and interior padding against a numpy reference,
and JAX's outputs for the tricky cases (generated once with JAX 0.10, written in as data)."""
import doctest, math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from hypothesis.extra import numpy as hnp

import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax
from tinyjx.uop import Ops
from conftest import examples

SETTINGS = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)

def check(got, want, tol=1e-6):
  got = np.asarray(got)
  assert got.shape == np.shape(want)
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

# ---------------------------------------------------------------- elementwise against numpy
UNARY = {'neg': np.negative, 'exp': np.exp, 'log': np.log, 'expm1': np.expm1, 'log1p': np.log1p, 'sin': np.sin,
         'cos': np.cos, 'tan': np.tan, 'tanh': np.tanh, 'sinh': np.sinh, 'cosh': np.cosh, 'atan': np.arctan,
         'sqrt': np.sqrt, 'rsqrt': lambda x: 1 / np.sqrt(x), 'abs': np.abs, 'sign': np.sign, 'floor': np.floor,
         'ceil': np.ceil, 'logistic': lambda x: 1 / (1 + np.exp(-x)), 'exp2': np.exp2, 'square': np.square,
         'is_finite': np.isfinite, 'erf': np.vectorize(math.erf, otypes=[np.float64])}
POSITIVE = {'log', 'sqrt', 'rsqrt', 'log1p'}

@SETTINGS
@given(shapes, st.sampled_from(sorted(UNARY)), st.data())
def test_unary_ops_match_numpy(shape, name, data):
  lo = 0.125 if name in POSITIVE else -5
  x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(lo, 5, width=32)))
  got = getattr(lax, name)(jnp.asarray(x))
  assert got.dtype is (jnp.bool_ if name == 'is_finite' else jnp.float32)
  check(got, UNARY[name](x.astype(np.float64)).astype(np.float32) if name != 'is_finite' else UNARY[name](x), 2e-5)

BINARY = {'add': np.add, 'sub': np.subtract, 'mul': np.multiply, 'max': np.maximum, 'min': np.minimum,
          'atan2': np.arctan2, 'eq': np.equal, 'ne': np.not_equal, 'lt': np.less, 'le': np.less_equal,
          'gt': np.greater, 'ge': np.greater_equal, 'pow': np.power}

@SETTINGS
@given(shapes, st.sampled_from(sorted(BINARY)), st.booleans(), st.data())
def test_binary_ops_match_numpy(shape, name, scalar_rhs, data):
  elements = st.floats(0.5, 3, width=32) if name == 'pow' else st.floats(-4, 4, width=32)
  x = data.draw(hnp.arrays(np.float32, shape, elements=elements))
  y = data.draw(hnp.arrays(np.float32, () if scalar_rhs else shape, elements=elements))
  check(getattr(lax, name)(jnp.asarray(x), jnp.asarray(y)), BINARY[name](x, y), 2e-5)

@SETTINGS
@given(hnp.arrays(np.int32, st.integers(0, 8), elements=st.integers(-100, 100)),
       hnp.arrays(np.int32, st.integers(0, 8), elements=st.integers(-9, 9)))
def test_integer_div_rem_are_c_semantics(a, b):
  n = min(len(a), len(b))
  a, b = a[:n], np.where(b[:n] == 0, 1, b[:n]).astype(np.int32)
  q = (np.abs(a) // np.abs(b)) * np.sign(a) * np.sign(b)
  assert lax.div(jnp.asarray(a), jnp.asarray(b)).tolist() == q.tolist()
  assert lax.rem(jnp.asarray(a), jnp.asarray(b)).tolist() == np.fmod(a, b).tolist()

def test_rem_and_div_like_jax():
  assert lax.div(jnp.asarray([-7]), jnp.asarray([2])).tolist() == [-3]   # JAX 0.10
  assert lax.rem(jnp.asarray([-7., 7., -7.5]), jnp.asarray([2., -2., 2.])).tolist() == [-1.0, 1.0, -1.5]

@SETTINGS
@given(hnp.arrays(np.int32, st.integers(0, 6), elements=st.integers(-2 ** 31, 2 ** 31 - 1)), st.integers(0, 31))
def test_shifts_match_numpy(x, s):
  xs = jnp.asarray(x)
  assert lax.shift_left(xs, np.int32(s)).tolist() == (x.astype(np.int64) << s).astype(np.int32).tolist()
  assert lax.shift_right_arithmetic(xs, np.int32(s)).tolist() == (x >> s).tolist()
  assert lax.shift_right_logical(xs, np.int32(s)).tolist() == (x.view(np.uint32) >> s).view(np.int32).tolist()
  u = x.view(np.uint32)
  assert lax.shift_right_arithmetic(jnp.asarray(u), np.uint32(s)).tolist() == (x >> s).view(np.uint32).tolist()

def test_shift_edge_cases_like_jax():
  # JAX 0.10: shift_right_arithmetic(uint32 0x80000000, 4) == 4160749568; int8 shifts past the width
  scalar = lambda v, dt: jnp.asarray(np.array(v, dt))
  assert int(lax.shift_right_arithmetic(scalar(0x80000000, np.uint32), scalar(4, np.uint32))) == 4160749568
  assert int(lax.shift_right_logical(scalar(-128, np.int8), scalar(9, np.int8))) == 0
  assert int(lax.shift_right_arithmetic(scalar(-128, np.int8), scalar(9, np.int8))) == -1
  assert int(lax.shift_left(scalar(1, np.int32), scalar(40, np.int32))) == 0
  assert int(lax.shift_right_logical(scalar(-8, np.int32), scalar(1, np.int32))) == 2147483644

def test_bitwise_ops():
  a, b = np.array([6, -1, 0], np.int32), np.array([3, 5, -7], np.int32)
  assert lax.bitwise_and(jnp.asarray(a), jnp.asarray(b)).tolist() == (a & b).tolist()
  assert lax.bitwise_or(jnp.asarray(a), jnp.asarray(b)).tolist() == (a | b).tolist()
  assert lax.bitwise_xor(jnp.asarray(a), jnp.asarray(b)).tolist() == (a ^ b).tolist()
  assert lax.bitwise_not(jnp.asarray(a)).tolist() == (~a).tolist()
  assert lax.bitwise_not(jnp.asarray([True, False])).tolist() == [False, True]

def test_round_like_jax():
  x = jnp.asarray([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -1.4])
  assert lax.round(x).tolist() == [1.0, 2.0, 3.0, -1.0, -3.0, 0.0, -1.0]
  assert lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 0.0, -1.0]

def test_select_clamp_integer_pow_like_jax():
  assert lax.select(jnp.asarray([True, False]), jnp.ones(2), jnp.zeros(2)).tolist() == [1.0, 0.0]
  assert lax.select(jnp.asarray(True), jnp.ones(2), jnp.zeros(2)).tolist() == [1.0, 1.0]
  assert lax.select_n(jnp.asarray([0, 1, 2, 1]), jnp.zeros(4), jnp.ones(4), jnp.full(4, 2.)).tolist() == [0, 1, 2, 1]
  assert lax.select_n(jnp.asarray([True, False]), jnp.zeros(2), jnp.ones(2)).tolist() == [1.0, 0.0]
  assert lax.clamp(np.int32(0), jnp.asarray([-3, 5, 20]), np.int32(10)).tolist() == [0, 5, 10]
  assert lax.clamp(0., jnp.asarray([-1., 0.5, 2.]), 1.).tolist() == [0.0, 0.5, 1.0]
  assert lax.integer_pow(jnp.asarray([0., 1., 2.]), -2).tolist() == [math.inf, 1.0, 0.25]
  for y in range(0, 8):
    assert lax.integer_pow(jnp.asarray([3, -2]), y).tolist() == [3 ** y, (-2) ** y]
  ops = [n.op for n in lax.integer_pow(jnp.asarray([3.]), 5).uop.toposort()]
  assert Ops.POW not in ops and ops.count(Ops.MUL) == 3

def test_conversions():
  assert lax.convert_element_type(jnp.asarray([1.7, -1.7]), jnp.int32).tolist() == [1, -1]
  assert not lax.convert_element_type(1.5, jnp.float32).weak
  assert int(lax.bitcast_convert_type(np.float32(1.0), jnp.int32)) == 1065353216
  back = lax.bitcast_convert_type(lax.bitcast_convert_type(jnp.asarray([1.5, -2.]), jnp.uint32), jnp.float32)
  assert back.tolist() == [1.5, -2.0]
  with pytest.raises(ValueError, match=r"float32 \(32 bits\) and int8 \(8 bits\) differ in width"):
    lax.bitcast_convert_type(jnp.ones(2), jnp.int8)

# ---------------------------------------------------------------- strict dtypes and shapes
def test_dtype_mismatch_names_both_dtypes():
  # JAX 0.10: lax.add(f32, 1) raises ("got float32, int32"); lax.add(int32, 1) and lax.add(f32, 1.0) work
  with pytest.raises(TypeError, match="lax.add requires arguments to have the same dtypes, got float32, int32"):
    lax.add(jnp.ones(3), 1)
  with pytest.raises(TypeError, match="got float16, float32"):
    lax.mul(jnp.ones(3, jnp.float16), 1.0)
  with pytest.raises(TypeError, match="got float32, int32, float32"):
    lax.clamp(0., jnp.asarray([1, 2]), 1.)
  assert lax.add(jnp.ones(3, jnp.int32), 1).dtype is jnp.int32
  assert lax.add(jnp.ones(3), 1.0).tolist() == [2.0, 2.0, 2.0]
  with pytest.raises(TypeError, match="operands of one dtype, got float32 and int32"):
    lax.dot_general(jnp.ones((2, 3)), jnp.ones(3, jnp.int32), (((1,), (0,)), ((), ())))
  with pytest.raises(TypeError, match="one dtype, got float32 and int32"):
    lax.pad(jnp.ones(3), 0, [(1, 1, 0)])

def test_shape_mismatch_and_unsupported_dtypes():
  with pytest.raises(TypeError, match=r"shapes \(3,\), \(2,\)"):
    lax.add(jnp.ones(3), jnp.ones(2))
  with pytest.raises(TypeError, match=r"shapes \(2, 3\), \(3,\)"):
    lax.add(jnp.ones((2, 3)), jnp.ones(3))
  assert lax.add(jnp.ones(3), jnp.ones(())).tolist() == [2.0, 2.0, 2.0]
  with pytest.raises(TypeError, match="lax.exp does not accept dtype int32"):
    lax.exp(jnp.ones(3, jnp.int32))
  with pytest.raises(TypeError, match="lax.shift_left does not accept dtype float32"):
    lax.shift_left(1.0, 2.0)
  with pytest.raises(TypeError, match="pred must be bool"):
    lax.select(jnp.ones(2), jnp.ones(2), jnp.ones(2))

# ---------------------------------------------------------------- reductions, scans, sorting
@SETTINGS
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
                  elements=st.floats(-5, 5, width=32)), st.data())
def test_reductions_scans_and_argmax(x, data):
  axes = tuple(sorted(data.draw(st.sets(st.integers(0, x.ndim - 1)))))
  check(lax.reduce_sum(jnp.asarray(x), axes), x.sum(axes), 1e-5)
  check(lax.reduce_max(jnp.asarray(x), axes), x.max(axes) if axes else x)
  check(lax.reduce_min(jnp.asarray(x), axes), x.min(axes) if axes else x)
  check(lax.reduce_prod(jnp.asarray(x), axes), x.prod(axes), 1e-4)
  axis = data.draw(st.integers(0, x.ndim - 1))
  assert lax.argmax(jnp.asarray(x), axis, jnp.int32).tolist() == np.argmax(x, axis).tolist()
  assert lax.argmin(jnp.asarray(x), axis, jnp.int8).dtype is jnp.int8
  rev = data.draw(st.booleans())
  flip = (lambda v: np.flip(v, axis)) if rev else (lambda v: v)
  check(lax.cumsum(jnp.asarray(x), axis, rev), flip(np.cumsum(flip(x), axis)), 1e-5)
  check(lax.cummax(jnp.asarray(x), axis, rev), flip(np.maximum.accumulate(flip(x), axis)))
  check(lax.cummin(jnp.asarray(x), axis, rev), flip(np.minimum.accumulate(flip(x), axis)))
  check(lax.cumprod(jnp.asarray(x), axis, rev), flip(np.cumprod(flip(x), axis)), 1e-4)
  check(lax.sort(jnp.asarray(x), axis), np.sort(x, axis))

def test_boolean_reductions_and_scans_like_jax():
  b = jnp.asarray([[True, False], [True, True]])
  assert lax.reduce_and(b, (1,)).tolist() == [False, True] and lax.reduce_or(b, (0, 1)).tolist() is True
  assert lax.cumprod(jnp.asarray([[1, 2], [3, 4]]), axis=1, reverse=True).tolist() == [[2, 2], [12, 4]]
  assert lax.argmin(jnp.asarray([[3., np.nan, 1.], [2., 2., 5.]]), 1, jnp.int32).tolist() == [1, 0]

def test_multi_operand_sort_and_top_k_like_jax():
  k, v = lax.sort((jnp.asarray([3, 1, 1]), jnp.asarray([0, 5, 4])), num_keys=1)
  assert k.tolist() == [1, 1, 3] and v.tolist() == [5, 4, 0]
  k, v = lax.sort((jnp.asarray([3, 1, 1]), jnp.asarray([0, 5, 4])), num_keys=2)
  assert k.tolist() == [1, 1, 3] and v.tolist() == [4, 5, 0]
  keys, vals = lax.sort_key_val(jnp.asarray([2., 0., 1.]), jnp.asarray([10, 20, 30]))
  assert keys.tolist() == [0., 1., 2.] and vals.tolist() == [20, 30, 10]
  vals, idx = lax.top_k(jnp.asarray([1, 3, 3, 2]), 2)
  assert vals.tolist() == [3, 3] and idx.tolist() == [1, 2] and idx.dtype is jnp.int32
  x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
  vals, idx = lax.top_k(jnp.asarray(x), 3)
  np.testing.assert_array_equal(np.asarray(idx), np.argsort(-x, axis=1, kind='stable')[:, :3])
  with pytest.raises(ValueError, match="k=7"):
    lax.top_k(jnp.asarray(x), 7)

# ---------------------------------------------------------------- contractions and shapes
@SETTINGS
@given(st.integers(0, 2 ** 16), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))
def test_dot_general_matches_einsum(seed, nb, nc, nfa, nfb):
  rng = np.random.default_rng(seed)
  sizes = rng.integers(0, 4, nb + nc + nfa + nfb)
  b, c, fa, fb = np.split(sizes, np.cumsum([nb, nc, nfa]))
  la, lb = list(b) + list(c) + list(fa), list(b) + list(c) + list(fb)
  pa, pb = rng.permutation(len(la)), rng.permutation(len(lb))
  lhs = rng.standard_normal([la[i] for i in pa]).astype(np.float32)
  rhs = rng.standard_normal([lb[i] for i in pb]).astype(np.float32)
  pos_a, pos_b = np.argsort(pa), np.argsort(pb)   # where each logical dim sits after the permutation
  dn = ((tuple(pos_a[nb:nb + nc]), tuple(pos_b[nb:nb + nc])), (tuple(pos_a[:nb]), tuple(pos_b[:nb])))
  letters = 'abcdefgh'
  sa = "".join(letters[i] for i in pa)
  sb = "".join(letters[i] if i < nb + nc else letters[i + nfa] for i in pb)
  free_a = "".join(sa[j] for j in range(len(pa)) if pa[j] >= nb + nc)   # free dims come in their physical order
  free_b = "".join(sb[j] for j in range(len(pb)) if pb[j] >= nb + nc)
  out = letters[:nb] + free_a + free_b
  check(lax.dot_general(jnp.asarray(lhs), jnp.asarray(rhs), dn), np.einsum(f"{sa},{sb}->{out}", lhs, rhs), 1e-4)

def test_dot_and_preferred_type():
  a = np.arange(6, dtype=np.int8).reshape(2, 3)
  out = lax.dot(jnp.asarray(a), jnp.asarray(a.T), preferred_element_type=jnp.int32)
  assert out.dtype is jnp.int32 and out.tolist() == (a.astype(np.int32) @ a.T).tolist()
  with pytest.raises(TypeError, match=r"contracting dimensions of one shape, got \(3,\) and \(2,\)"):
    lax.dot_general(jnp.ones((2, 3)), jnp.ones((2, 3)), (((1,), (0,)), ((), ())))

def test_shape_ops_match_numpy():
  x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  X = jnp.asarray(x)
  assert lax.broadcast(X, (5,)).shape == (5, 2, 3, 4)
  want = np.broadcast_to(np.arange(3.)[:, None], (2, 3, 4))
  check(lax.broadcast_in_dim(jnp.asarray(np.arange(3.)), (2, 3, 4), (1,)), want)
  want = np.broadcast_to(x[:, None, :1], (2, 5, 3, 4))
  check(lax.broadcast_in_dim(jnp.asarray(x[:, :1]), (2, 5, 3, 4), (0, 2, 3)), want)
  check(lax.reshape(X, (4, 6)), x.reshape(4, 6))
  check(lax.reshape(X, (4, 6), dimensions=(2, 0, 1)), x.transpose(2, 0, 1).reshape(4, 6))
  check(lax.transpose(X, (1, 2, 0)), x.transpose(1, 2, 0))
  check(lax.squeeze(jnp.asarray(x[:, :1]), (1,)), x[:, 0])
  check(lax.expand_dims(X, (0, 4)), x[None, :, :, :, None])
  check(lax.rev(X, (0, 2)), x[::-1, :, ::-1])
  check(lax.slice(X, (0, 1, 1), (2, 3, 4), (1, 1, 2)), x[:, 1:3, 1:4:2])
  check(lax.slice_in_dim(X, 1, None, 2, axis=2), x[:, :, 1::2])
  check(lax.slice_in_dim(X, -2, -1, axis=1), x[:, -2:-1])
  check(lax.index_in_dim(X, -1, 1, keepdims=False), x[:, -1])
  check(lax.concatenate([X, X[:, :1]], 1), np.concatenate([x, x[:, :1]], 1))
  assert lax.iota(jnp.int32, 4).tolist() == [0, 1, 2, 3]
  check(lax.broadcasted_iota(jnp.float32, (2, 3), 1), np.broadcast_to(np.arange(3.), (2, 3)))
  assert lax.full((2,), 3, jnp.int8).dtype is jnp.int8 and lax.full_like(X, 1.5).shape == x.shape

def test_shape_op_errors():
  X = jnp.ones((2, 3))
  with pytest.raises(TypeError, match=r"shape \(2, 3\) into shape \(3, 2\)"):
    lax.broadcast_in_dim(X, (3, 2), (0, 1))
  with pytest.raises(ValueError, match="not a permutation"):
    lax.transpose(X, (0, 0))
  with pytest.raises(ValueError, match="axis 1 of shape \\(2, 3\\) has size 3"):
    lax.squeeze(X, (1,))
  with pytest.raises(ValueError, match="bounds 1:5:1 are not valid for axis 1 of size 3"):
    lax.slice(X, (0, 1), (2, 5))
  with pytest.raises(TypeError, match="one dtype"):
    lax.concatenate([X, jnp.ones((2, 3), jnp.int32)], 0)
  with pytest.raises(TypeError, match=r"new_sizes \(5,\) \(size 5\) do not fit .* shape \(2, 3\) \(size 6\)"):
    lax.reshape(X, (5,))

# ---------------------------------------------------------------- pad
def numpy_pad(x, value, config):
  """Reference: interior padding, then low/high padding (negative: cropping), one axis at a time."""
  for ax, (lo, hi, interior) in enumerate(config):
    n = x.shape[ax]
    if n > 1 and interior:
      shape = list(x.shape)
      shape[ax] = n + (n - 1) * interior
      out = np.full(shape, value, x.dtype)
      sl = [slice(None)] * x.ndim
      sl[ax] = slice(None, None, interior + 1)
      out[tuple(sl)] = x
      x = out
    widths = [(0, 0)] * x.ndim
    widths[ax] = (max(lo, 0), max(hi, 0))
    x = np.pad(x, widths, constant_values=value)
    sl = [slice(None)] * x.ndim
    sl[ax] = slice(max(-lo, 0), x.shape[ax] - max(-hi, 0))
    x = x[tuple(sl)]
  return x

@SETTINGS
@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), st.data())
def test_pad_matches_reference(shape, data):
  x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1
  config = []
  for n in shape:
    interior = data.draw(st.integers(0, 2))
    full = n + max(n - 1, 0) * interior
    lo = data.draw(st.integers(-full, 3))
    hi = data.draw(st.integers(-(full + max(lo, 0) + min(lo, 0)), 3))
    config.append((lo, hi, interior))
  value = data.draw(st.sampled_from([0.0, -1.5]))
  check(lax.pad(jnp.asarray(x), np.float32(value), config), numpy_pad(x, value, config))

def test_pad_like_jax():
  # JAX 0.10
  x = jnp.asarray(np.arange(1., 4., dtype=np.float32))
  assert lax.pad(x, 0., [(1, -1, 1)]).tolist() == [0.0, 1.0, 0.0, 2.0, 0.0]
  assert lax.pad(x, 9., [(-2, 2, 2)]).tolist() == [9.0, 2.0, 9.0, 9.0, 3.0, 9.0, 9.0]
  assert lax.pad(jnp.asarray(np.arange(6.).reshape(2, 3)), -1., [(1, 0, 1), (0, -1, 2)]).tolist() == \
    [[-1.0] * 6, [0.0, -1.0, -1.0, 1.0, -1.0, -1.0], [-1.0] * 6, [3.0, -1.0, -1.0, 4.0, -1.0, -1.0]]
  assert lax.pad(jnp.asarray(np.arange(6).reshape(2, 3)), np.int32(7), [(-1, 2, 0), (2, -2, 1)]).tolist() == \
    [[7, 7, 3, 7, 4], [7, 7, 7, 7, 7], [7, 7, 7, 7, 7]]
  with pytest.raises(ValueError, match="interior padding must be >= 0"):
    lax.pad(x, 0., [(0, 0, -1)])
  with pytest.raises(ValueError, match="removes more than"):
    lax.pad(x, 0., [(-2, -2, 0)])

def test_doctests():
  from tinyjx import lax_primitives
  for module in (lax, lax_primitives):
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__
