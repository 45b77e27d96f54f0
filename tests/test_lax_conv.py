"""lax convolutions, conv_transpose, reduce_window and jnp.convolve/correlate (tinyjx/lax_conv.py) against plain
numpy references written as loops over kernel offsets (float64), with gradients against finite differences of
those references, vmap against a loop and jit against eager."""
import itertools
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax
from conftest import examples

pytestmark = pytest.mark.usefixtures('semantics_device')
RNG = np.random.default_rng(0)
def rand(*shape): return RNG.standard_normal(shape).astype(np.float32)
def close(a, b, tol=1e-4): np.testing.assert_allclose(np.asarray(a), b, rtol=tol, atol=tol)

# ---------------------------------------------------------------- numpy references

def ref_dilate_pad(x, pads, dilation, value=0.0):
  """x (*lead, *S) with dilation - 1 `value`s between the elements of each of the last axes, then padded by
  (low, high) pairs (negative crops)."""
  n = len(pads)
  lead = x.shape[:x.ndim - n]
  shape = lead + tuple((s - 1) * d + 1 for s, d in zip(x.shape[-n:], dilation))
  out = np.full(shape, value, np.float64)
  out[(Ellipsis,) + tuple(slice(None, None, d) for d in dilation)] = x
  for i, (lo, hi) in enumerate(pads):
    ax = len(lead) + i
    widths = [(0, 0)] * out.ndim
    widths[ax] = (max(lo, 0), max(hi, 0))
    out = np.pad(out, widths, constant_values=value)
    out = out[(slice(None),) * ax + (slice(max(-lo, 0), out.shape[ax] - max(-hi, 0)),)]
  return out

def ref_conv(x, w, strides, pads, ld, rd, fgc=1, bgc=1):
  """conv_general_dilated on x (N, C, *S) and w (O, I, *K), one kernel offset at a time."""
  x = ref_dilate_pad(x, pads, ld)
  (n, c), (o, i), kernel = x.shape[:2], w.shape[:2], w.shape[2:]
  out = [(s - (k - 1) * d - 1) // st + 1 for s, k, d, st in zip(x.shape[2:], kernel, rd, strides)]
  y = np.zeros((n // bgc, o, *out))
  og = o // (fgc * bgc)
  for oc in range(o):
    g = oc // og
    xs = x[g * (n // bgc):(g + 1) * (n // bgc)] if bgc > 1 else x[:, g * i:(g + 1) * i]
    for k in itertools.product(*[range(s) for s in kernel]):
      idx = tuple(slice(kk * d, kk * d + (m - 1) * st + 1, st) for kk, d, m, st in zip(k, rd, out, strides))
      y[:, oc] += np.einsum('nc...,c->n...', xs[(slice(None), slice(None)) + idx], w[(oc, slice(None)) + k])
  return y

def ref_reduce_window(x, init, op, window, strides, pads, bd, wd):
  identity = {np.add: 0.0, np.multiply: 1.0, np.maximum: -np.inf, np.minimum: np.inf}[op]
  x = ref_dilate_pad(x, pads, bd, identity)
  out = [(s - (k - 1) * d - 1) // st + 1 for s, k, d, st in zip(x.shape, window, wd, strides)]
  y = np.full(out, float(init))
  for k in itertools.product(*[range(s) for s in window]):
    y = op(y, x[tuple(slice(kk * d, kk * d + (m - 1) * st + 1, st) for kk, d, m, st in zip(k, wd, out, strides))])
  return y

def to_layout(a, spec: str, canonical: str):
  """a in the canonical layout (e.g. 'NCHW') transposed to the layout string `spec` (e.g. 'NHWC')."""
  return np.transpose(a, [canonical.index(ch) for ch in spec])

def fd_grad(f, x, eps=1e-3):
  """Central finite differences of a float64 numpy function."""
  x = x.astype(np.float64)
  g = np.zeros_like(x)
  for i in np.ndindex(*x.shape):
    d = np.zeros_like(x); d[i] = eps
    g[i] = (f(x + d) - f(x - d)) / (2 * eps)
  return g

# ---------------------------------------------------------------- conv_general_dilated

LAYOUTS = [  # (lhs, rhs, out) as JAX strings, and the canonical spatial letters
  (('NCHW', 'OIHW', 'NCHW'), 'HW'), (('NHWC', 'HWIO', 'NHWC'), 'HW'), (('NHWC', 'OIHW', 'NCHW'), 'HW'),
  (('NWC', 'WIO', 'NWC'), 'W'), (('NCDHW', 'OIDHW', 'NCDHW'), 'DHW'), (('NDHWC', 'DHWIO', 'NDHWC'), 'DHW'),
]

@pytest.mark.parametrize('dn,sp', LAYOUTS)
def test_layouts_match_reference(dn, sp):
  n = len(sp)
  x, w = rand(2, 4, *[5] * n), rand(6, 2, *[3 if j == 0 else 2 for j in range(n)])
  strides, rd = (2,) + (1,) * (n - 1), (1,) * (n - 1) + (2,)
  want = ref_conv(x, w, strides, [(1, 0)] + [(0, 1)] * (n - 1), (1,) * n, rd, fgc=2)
  got = lax.conv_general_dilated(to_layout(x, dn[0], 'NC' + sp), to_layout(w, dn[1], 'OI' + sp), strides,
                                 [(1, 0)] + [(0, 1)] * (n - 1), rhs_dilation=rd, dimension_numbers=dn,
                                 feature_group_count=2)
  close(got, to_layout(want, dn[2], 'NC' + sp))

def test_default_and_tuple_dimension_numbers_and_conv():
  x, w = rand(2, 3, 6, 5), rand(4, 3, 3, 2)
  want = ref_conv(x, w, (1, 1), [(0, 0), (0, 0)], (1, 1), (1, 1))
  close(lax.conv(x, w, (1, 1), 'VALID'), want)
  dn = lax.conv_dimension_numbers(x.shape, w.shape, ('NCHW', 'OIHW', 'NCHW'))
  assert dn == lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3))
  close(lax.conv_general_dilated(x, w, (1, 1), 'VALID', dimension_numbers=dn), want)
  close(lax.conv_general_dilated(x, w, (1, 1), 'VALID', dimension_numbers=((0, 1, 2, 3),) * 3), want)
  close(lax.conv_with_general_padding(x, w, (2, 1), [(2, -1), (1, 1)], (1, 2), (2, 1)),
        ref_conv(x, w, (2, 1), [(2, -1), (1, 1)], (1, 2), (2, 1)))

@pytest.mark.parametrize('padding,pads', [('SAME', [(1, 1), (0, 1)]), ('SAME_LOWER', [(1, 1), (1, 0)]),
                                          ('VALID', [(0, 0), (0, 0)]), ('same', [(1, 1), (0, 1)])])
def test_string_padding(padding, pads):
  x, w = rand(1, 2, 7, 6), rand(3, 2, 3, 2)
  y = lax.conv_general_dilated(x, w, (2, 1), padding)
  close(y, ref_conv(x, w, (2, 1), pads, (1, 1), (1, 1)))
  if padding.upper().startswith('SAME'): assert y.shape[2:] == (4, 6)   # ceil(in / stride)

def test_padtype_to_pads():
  assert lax.padtype_to_pads((7, 6), (3, 2), (2, 1), 'SAME') == [(1, 1), (0, 1)]
  assert lax.padtype_to_pads((7, 6), (3, 2), (2, 1), 'SAME_LOWER') == [(1, 1), (1, 0)]
  assert lax.padtype_to_pads((4,), (2,), (2,), 'SAME') == [(0, 0)]

def test_depthwise_and_batch_groups():
  x, w = rand(2, 4, 6, 6), rand(8, 1, 3, 3)        # depthwise: 2 filters per input channel
  close(lax.conv_general_dilated(x, w, (1, 1), 'SAME', feature_group_count=4),
        ref_conv(x, w, (1, 1), [(1, 1), (1, 1)], (1, 1), (1, 1), fgc=4))
  x, w = rand(4, 3, 6), rand(6, 3, 3)
  close(lax.conv_general_dilated(x, w, (1,), 'VALID', batch_group_count=2),
        ref_conv(x, w, (1,), [(0, 0)], (1,), (1,), bgc=2))

@settings(max_examples=examples(12), deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 2), groups=st.integers(1, 2), size=st.integers(3, 6),
       k=st.integers(1, 3), s=st.integers(1, 2), ld=st.integers(1, 2), rd=st.integers(1, 2),
       lo=st.integers(-1, 2), hi=st.integers(-1, 2))
def test_random_configs_match_reference(n, c, groups, size, k, s, ld, rd, lo, hi):
  x, w = rand(2, c * groups, *[size] * n), rand(2 * groups, c, *[k] * n)
  dilated = (size - 1) * ld + 1 + lo + hi
  if dilated < (k - 1) * rd + 1: return
  args = ((s,) * n, [(lo, hi)] * n, (ld,) * n, (rd,) * n)
  close(lax.conv_general_dilated(x, w, *args, feature_group_count=groups), ref_conv(x, w, *args, fgc=groups))

# ---------------------------------------------------------------- transforms of the convolution

CONFIGS = [  # window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count, batch_group_count
  ((2, 1), [(1, 0), (1, 2)], (1, 1), (1, 2), 1, 1),
  ((1, 2), [(2, 1), (-1, 1)], (2, 1), (1, 1), 2, 1),
  ((1, 1), [(0, 0), (1, 1)], (1, 1), (1, 1), 1, 2),
]

@pytest.mark.parametrize('cfg', CONFIGS)
def test_grad_of_both_operands_matches_finite_differences(cfg):
  strides, pads, ld, rd, fgc, bgc = cfg
  x, w = rand(2, 4, 4, 5), rand(4, 4 // fgc, 2, 2)
  ref = lambda a, b: ref_conv(a, b, strides, pads, ld, rd, fgc, bgc)
  r = RNG.standard_normal(ref(x, w).shape)
  loss = lambda a, b: jnp.sum(lax.conv_general_dilated(a, b, strides, pads, ld, rd, None, fgc, bgc) * r)
  gx, gw = tinyjx.grad(loss, argnums=(0, 1))(x, w)
  close(gx, fd_grad(lambda a: np.sum(ref(a, w) * r), x), 1e-3)
  close(gw, fd_grad(lambda b: np.sum(ref(x, b) * r), w), 1e-3)

def test_jvp_matches_vjp_by_the_dot_product_identity():
  x, w, tx, tw = rand(1, 2, 5, 5), rand(3, 2, 2, 2), rand(1, 2, 5, 5), rand(3, 2, 2, 2)
  f = lambda a, b: lax.conv_general_dilated(a, b, (2, 1), 'SAME', rhs_dilation=(1, 2))
  y, ty = tinyjx.jvp(f, (x, w), (tx, tw))
  ct = rand(*y.shape)
  cx, cw = tinyjx.vjp(f, x, w)[1](ct)
  lhs = float(np.sum(np.asarray(cx) * tx) + np.sum(np.asarray(cw) * tw))
  assert abs(lhs - float(np.sum(ct * np.asarray(ty)))) < 1e-3 * max(1.0, abs(lhs))

def test_second_order_gradient_matches_finite_differences():
  x, w = rand(1, 1, 5), rand(1, 1, 3)
  g = lambda b: tinyjx.grad(lambda a: jnp.sum(jnp.sin(lax.conv(a, b, (1,), 'SAME'))))(x)
  gw = tinyjx.grad(lambda b: jnp.sum(g(b) ** 2))(w)
  def ref_x(b):          # d/da sum(sin(y)), y[j] = sum_t a[j + t - 1] b[t]: sum_t cos(y[i - t + 1]) b[t]
    cy = np.cos(ref_conv(x, b, (1,), [(1, 1)], (1,), (1,)))[0, 0]
    return np.array([sum(cy[i - t + 1] * b[0, 0, t] for t in range(3) if 0 <= i - t + 1 < 5) for i in range(5)])
  close(gw, fd_grad(lambda b: np.sum(ref_x(b) ** 2), w), 2e-3)

@pytest.mark.parametrize('dn', [('NHWC', 'HWIO', 'NHWC'), None])
def test_vmap_over_either_operand_matches_a_loop(dn):
  xs, w = rand(3, 2, 5, 5, 2), rand(2, 2, 2, 4)
  if dn is None: xs, w = xs.transpose(0, 1, 4, 2, 3), w.transpose(3, 2, 0, 1)
  f = lambda a, b: lax.conv_general_dilated(a, b, (1, 2), 'SAME', dimension_numbers=dn)
  close(tinyjx.vmap(f, (0, None))(xs, w), np.stack([np.asarray(f(x, w)) for x in xs]))
  ws = np.stack([w, 2 * w, -w])
  close(tinyjx.vmap(f, (None, 0))(xs[0], ws), np.stack([np.asarray(f(xs[0], v)) for v in ws]))
  g = tinyjx.vmap(tinyjx.grad(lambda a, b: jnp.sum(f(a, b) ** 2), argnums=1), (0, None))(xs, w)
  close(g, np.stack([np.asarray(tinyjx.grad(lambda b: jnp.sum(f(x, b) ** 2))(w)) for x in xs]), 1e-3)

def test_jit_compiled_on_cpu_matches_the_python_reference(cpu):
  x, w = rand(2, 6, 6, 4), rand(3, 3, 2, 4)
  def loss(a, b):
    y = lax.conv_general_dilated(a, b, (2, 2), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC'),
                                 feature_group_count=2)
    return jnp.sum(lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), 'VALID') ** 2)
  step = tinyjx.jit(tinyjx.value_and_grad(loss, argnums=(0, 1)))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    v, (gx, gw) = step(x, w)
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    v2, (gx2, gw2) = tinyjx.value_and_grad(loss, argnums=(0, 1))(x, w)
  close(v, float(v2), 1e-3); close(gx, np.asarray(gx2), 1e-3); close(gw, np.asarray(gw2), 1e-3)

# ---------------------------------------------------------------- conv_transpose

def ref_conv_transpose(x, w, strides, pads, rd):
  """JAX's conv_transpose on canonical layouts: the input dilated by the strides, convolved at stride 1."""
  return ref_conv(x, w, (1,) * len(strides), pads, strides, rd)

# (input size, kernel, stride, rhs dilation) -> the output sizes JAX 0.10.2 gives for 'SAME' and 'VALID'
TRANSPOSE_SIZES = [((5, 3, 2, 1), 10, 11), ((4, 4, 3, 1), 12, 13), ((3, 2, 3, 1), 9, 9), ((4, 2, 2, 2), 8, 9)]

@pytest.mark.parametrize('case', TRANSPOSE_SIZES)
def test_conv_transpose_sizes_and_values(case):
  (size, k, s, d), same, valid = case
  x, w = rand(2, size, 3), rand(k, 3, 2)              # NWC, WIO (JAX's default layout for rank 3)
  for padding, want_size in (('SAME', same), ('VALID', valid)):
    y = lax.conv_transpose(x, w, (s,), padding, rhs_dilation=(d,))
    assert y.shape == (2, want_size, 2)
  pads = [(1, 2)]
  want = ref_conv_transpose(x.transpose(0, 2, 1), w.transpose(2, 1, 0), (s,), pads, (d,))
  close(lax.conv_transpose(x, w, (s,), pads, rhs_dilation=(d,)), want.transpose(0, 2, 1))

def test_conv_transpose_with_transpose_kernel_is_the_input_gradient():
  x, w = rand(1, 7, 6, 2), rand(3, 2, 2, 4)             # NHWC, HWIO: 2 -> 4 features; the windows fit exactly
  dn = ('NHWC', 'HWIO', 'NHWC')
  f = lambda a: lax.conv_general_dilated(a, w, (2, 2), 'VALID', dimension_numbers=dn)
  ct = rand(*f(x).shape)
  got = lax.conv_transpose(ct, w, (2, 2), 'VALID', dimension_numbers=dn, transpose_kernel=True)
  close(got, np.asarray(tinyjx.vjp(f, x)[1](ct)[0]))

# ---------------------------------------------------------------- reduce_window

WINDOWS = [  # init, computation (tinyjx, numpy), window, strides, padding, base dilation, window dilation
  (-np.inf, lax.max, np.maximum, (1, 3, 3, 1), (1, 2, 2, 1), 'SAME', None, None),
  (0.0, lax.add, np.add, (1, 2, 3, 1), (1, 1, 2, 1), ((0, 0), (1, 0), (2, 1), (0, 0)), (1, 2, 1, 1), (1, 1, 2, 1)),
  (np.inf, jnp.minimum, np.minimum, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID', None, None),
  (1.0, lax.mul, np.multiply, (1, 2, 1, 2), (1, 1, 1, 1), 'SAME_LOWER', None, None),
  (2.0, jnp.add, np.add, (1, 2, 2, 1), (1, 1, 1, 1), 'SAME', None, None),     # init enters each window once
  (-np.inf, lambda a, b: jnp.maximum(a, b), np.maximum, (2, 1, 2, 1), (1, 1, 1, 1), 'VALID', None, (1, 1, 2, 1)),
]

@pytest.mark.parametrize('case', WINDOWS)
def test_reduce_window_matches_reference(case):
  init, comp, np_op, window, strides, padding, bd, wd = case
  x = rand(2, 5, 6, 3)
  y = lax.reduce_window(x, init, comp, window, strides, padding, bd, wd)
  r = len(window)
  sizes = [(s - 1) * d + 1 for s, d in zip(x.shape, bd or (1,) * r)]
  wins = [(k - 1) * d + 1 for k, d in zip(window, wd or (1,) * r)]
  pads = lax.padtype_to_pads(sizes, wins, strides, padding)
  close(y, ref_reduce_window(x, init, np_op, window, strides, pads, bd or (1,) * r, wd or (1,) * r), 1e-3)

def test_pooling_forms_and_their_gradients():
  x = (RNG.permutation(216).reshape(2, 6, 6, 3) * 0.1).astype(np.float32)   # no near-ties: max has no kink near x
  maxpool = lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID')
  avgpool = lambda a: lax.reduce_window(a, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), 'SAME') / 9.0
  for f, op, init, win, st_, pads, scale in ((maxpool, np.maximum, -np.inf, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID', 1.0),
                                            (avgpool, np.add, 0.0, (1, 3, 3, 1), (1, 2, 2, 1), 'SAME', 9.0)):
    p = lax.padtype_to_pads(x.shape, win, st_, pads)
    ref = lambda a: ref_reduce_window(a, init, op, win, st_, p, (1,) * 4, (1,) * 4) / scale
    r = RNG.standard_normal(ref(x).shape)
    close(f(x), ref(x))
    close(tinyjx.grad(lambda a: jnp.sum(f(a) * r))(x), fd_grad(lambda a: np.sum(ref(a) * r), x), 1e-3)
    close(tinyjx.jit(f)(x), ref(x))
    close(tinyjx.vmap(f)(np.stack([x, -x])), np.stack([ref(x), ref(-x)]))

def test_reduce_window_on_integers():
  x = np.arange(12, dtype=np.int32).reshape(3, 4)
  y = lax.reduce_window(x, jnp.iinfo(jnp.int32).min, lax.max, (2, 2), (1, 2), 'VALID')
  assert y.dtype == jnp.int32 and y.tolist() == [[5, 7], [9, 11]]
  assert lax.reduce_window(x, 0, lax.add, (1, 4), (1, 1), 'VALID').tolist() == [[6], [22], [38]]

# ---------------------------------------------------------------- jnp.convolve / jnp.correlate

@pytest.mark.parametrize('n,m', [(5, 2), (6, 3), (6, 4), (2, 5), (1, 1)])
@pytest.mark.parametrize('mode', ['full', 'same', 'valid'])
def test_convolve_and_correlate_match_numpy(n, m, mode):
  a, v = rand(n), rand(m)
  close(jnp.convolve(a, v, mode), np.convolve(a, v, mode))
  close(jnp.correlate(a, v, mode), np.correlate(a, v, mode))

def test_convolve_integers_grad_and_defaults():
  assert jnp.convolve(jnp.array([1, 2, 3]), jnp.array([0, 1, 2])).tolist() == [0, 1, 4, 7, 6]
  assert jnp.correlate(jnp.array([1., 2., 3.]), jnp.array([0., 1.])).tolist() == [2.0, 3.0]   # 'valid'
  a, v = rand(6), rand(3)
  r = rand(8)
  close(tinyjx.grad(lambda b: jnp.sum(jnp.convolve(a, b) * r))(v),
        fd_grad(lambda b: np.sum(np.convolve(a, b) * r), v), 1e-3)

# ---------------------------------------------------------------- errors name the argument and the fix

def test_errors():
  x, w = rand(1, 5, 5, 3), rand(3, 3, 3, 8)
  with pytest.raises(ValueError, match=r"rhs layout 'HWO'.*3 letters.*rank 4"):
    lax.conv_general_dilated(x, w, (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWO', 'NHWC'))
  with pytest.raises(ValueError, match=r"lhs layout 'NHWX'.*'N', 'C'"):
    lax.conv_general_dilated(x, w, (1, 1), 'SAME', dimension_numbers=('NHWX', 'HWIO', 'NHWC'))
  with pytest.raises(ValueError, match=r"lhs has 3 input features but rhs has 2.*feature_group_count=1"):
    lax.conv_general_dilated(x, rand(3, 3, 2, 8), (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC'))
  with pytest.raises(ValueError, match=r"window_strides must be 2 positive ints"):
    lax.conv(rand(1, 1, 4, 4), rand(1, 1, 2, 2), (1,), 'VALID')
  with pytest.raises(ValueError, match=r"smaller than the dilated kernel"):
    lax.conv(rand(1, 1, 2, 2), rand(1, 1, 3, 3), (1, 1), 'VALID')
  with pytest.raises(ValueError, match=r"string padding 'SAME' with lhs_dilation"):
    lax.conv_general_dilated(rand(1, 1, 4), rand(1, 1, 2), (1,), 'SAME', lhs_dilation=(2,))
  with pytest.raises(TypeError, match=r"one dtype"):
    lax.conv(rand(1, 1, 4), rand(1, 1, 2).astype(np.float16), (1,), 'VALID')
  with pytest.raises(TypeError, match=r"none of add, mul, max, min"):
    lax.reduce_window(rand(4), 0.0, lambda a, b: a - b, (2,), (1,), 'VALID')
  with pytest.raises(TypeError, match=r"does not fit the integer operand dtype"):
    lax.reduce_window(np.arange(4, dtype=np.int32), -np.inf, lax.max, (2,), (1,), 'VALID')
  with pytest.raises(ValueError, match=r"mode must be 'full', 'same' or 'valid'"):
    jnp.convolve(rand(3), rand(2), 'circular')

def test_docstring_examples():
  import doctest
  from tinyjx import lax_conv
  assert doctest.testmod(lax_conv, extraglobs={'lax': lax, 'jnp': jnp}, optionflags=doctest.ELLIPSIS).failed == 0
