"""Reductions of tinyjx.numpy against numpy: axis as None, an int (negative too) or a tuple, keepdims, where=,
initial=, size-0 axes, and JAX's result dtypes (written below as data, generated once with JAX 0.10)."""
import math, re, warnings
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from hypothesis.extra import numpy as hnp
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import dtypes
from conftest import examples

pytestmark = pytest.mark.usefixtures('semantics_device')

DTYPES = ['bool', 'int8', 'int32', 'uint8', 'uint32', 'float16', 'bfloat16', 'float32']
SHORT = {'b': 'bool', 'i8': 'int8', 'i32': 'int32', 'u8': 'uint8', 'u32': 'uint32', 'f16': 'float16',
         'bf16': 'bfloat16', 'f32': 'float32'}

# `jnp.<name>(jnp.ones((2,), dtype)).dtype` for each dtype above, from JAX
REDUCTION_DTYPES = """
    sum  i32  i32  i32  u32  u32  f16 bf16  f32
   prod  i32  i32  i32  u32  u32  f16 bf16  f32
    max    b   i8  i32   u8  u32  f16 bf16  f32
    min    b   i8  i32   u8  u32  f16 bf16  f32
   mean  f32  f32  f32  f32  f32  f16 bf16  f32
    var  f32  f32  f32  f32  f32  f16 bf16  f32
    std  f32  f32  f32  f32  f32  f16 bf16  f32
 argmax  i32  i32  i32  i32  i32  i32  i32  i32
 argmin  i32  i32  i32  i32  i32  i32  i32  i32
    any    b    b    b    b    b    b    b    b
    all    b    b    b    b    b    b    b    b
 cumsum  i32   i8  i32   u8  u32  f16 bf16  f32
cumprod  i32   i8  i32   u8  u32  f16 bf16  f32
"""
OUT = {line.split()[0]: dict(zip(DTYPES, (SHORT[c] for c in line.split()[1:])))
       for line in REDUCTION_DTYPES.strip().splitlines()}

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)

def host(dtype): return np.dtype('float32' if dtype == 'bfloat16' else dtype)

def values(draw, dtype, shape, lo=-50, hi=50, special=False):
  if dtype == 'bool': el = st.booleans()
  elif host(dtype).kind in 'iu':
    info = np.iinfo(host(dtype))
    el = st.integers(max(info.min, lo), min(info.max, hi))
  else:
    el = st.floats(lo, hi, width=16 if dtype == 'float16' else 32)
    if special: el = st.one_of(el, st.sampled_from([math.nan, math.inf, -math.inf]))
  x = draw(hnp.arrays(host(dtype), shape, elements=el))
  return dtypes.round_bf16(x) if dtype == 'bfloat16' else x

@st.composite
def axes_for(draw, ndim):
  """None, an int (possibly negative) or a tuple of distinct axes (possibly negative)."""
  if ndim == 0: return None
  kind = draw(st.sampled_from(['none', 'int', 'tuple']))
  if kind == 'none': return None
  if kind == 'int': return draw(st.integers(-ndim, ndim - 1))
  picked = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
  return tuple(a - ndim if draw(st.booleans()) else a for a in picked)

def reduced(axis, ndim):
  if axis is None: return tuple(range(ndim))
  return tuple(a % ndim for a in ((axis,) if isinstance(axis, int) else axis))

TOL = {'float16': 3e-3, 'bfloat16': 2e-2, 'float32': 2e-5}

def check(got, want, dtype, scale=1.0):
  """`want` was computed in float64 (floats) or in the result dtype (ints); float tolerance scales with `scale`."""
  assert got.dtype.name == dtype
  want = np.asarray(want)
  assert got.shape == want.shape
  v = np.asarray(got)
  if dtype in TOL:
    tol = TOL[dtype]
    if dtype != 'bfloat16': want = want.astype(dtype)   # rounded to the result's dtype: past its range, an infinity
    np.testing.assert_allclose(v.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol * scale,
                               equal_nan=True)
  else:
    np.testing.assert_array_equal(v, want.astype(np.dtype(dtype)))

def ref_sum_like(fn, x, axis, keepdims, out):
  if out in TOL: return fn(x.astype(np.float64), axis=axis, keepdims=keepdims)
  return fn(x.astype(np.dtype(out)), axis=axis, keepdims=keepdims)

@pytest.mark.parametrize("name", ['sum', 'prod'])
@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_sum_prod(name, data):
  dtype = data.draw(st.sampled_from(DTYPES))
  shape = data.draw(SHAPES)
  x = values(data.draw, dtype, shape, *((-50, 50) if name == 'sum' else (-2, 2)))
  axis, keepdims = data.draw(axes_for(len(shape))), data.draw(st.booleans())
  got = getattr(jnp, name)(jnp.asarray(x, dtype), axis=axis, keepdims=keepdims)
  out = OUT[name][dtype]
  scale = np.abs(x.astype(np.float64)).sum() + 1 if name == 'sum' else 4.0 ** max(x.size, 1)
  check(got, ref_sum_like(getattr(np, name), x, reduced(axis, len(shape)), keepdims, out), out, min(scale, 1e6))

@pytest.mark.parametrize("name", ['max', 'min', 'any', 'all'])
@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_extremes_and_logical(name, data):
  dtype = data.draw(st.sampled_from(DTYPES))
  shape = data.draw(SHAPES)
  x = values(data.draw, dtype, shape, special=True)
  axis, keepdims = data.draw(axes_for(len(shape))), data.draw(st.booleans())
  axes = reduced(axis, len(shape))
  if name in ('max', 'min') and any(shape[a] == 0 for a in axes):
    with pytest.raises(ValueError, match=rf"zero-size.*{name}.*shape {re_shape(shape)}"):
      getattr(jnp, name)(jnp.asarray(x, dtype), axis=axis)
    return
  got = getattr(jnp, name)(jnp.asarray(x, dtype), axis=axis, keepdims=keepdims)
  want = getattr(np, name)(x, axis=axes, keepdims=keepdims)
  check(got, want, OUT[name][dtype])

def re_shape(shape): return re.escape(str(tuple(shape)))

@pytest.mark.parametrize("name", ['mean', 'var', 'std'])
@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mean_var_std(name, data):
  dtype = data.draw(st.sampled_from(DTYPES))
  shape = data.draw(SHAPES)
  x = values(data.draw, dtype, shape)
  axis, keepdims = data.draw(axes_for(len(shape))), data.draw(st.booleans())
  kw = {} if name == 'mean' else {'ddof': data.draw(st.integers(0, 2))}
  got = getattr(jnp, name)(jnp.asarray(x, dtype), axis=axis, keepdims=keepdims, **kw)
  with np.errstate(all='ignore'), warnings.catch_warnings():
    warnings.simplefilter('ignore')
    want = getattr(np, name)(x.astype(np.float64), axis=reduced(axis, len(shape)), keepdims=keepdims, **kw)
  n = math.prod(shape[a] for a in reduced(axis, len(shape)))
  if kw and n - kw['ddof'] <= 0: want = np.full_like(want, np.nan)   # JAX: no degrees of freedom left gives NaN
  check(got, want, OUT[name][dtype], 50.0)

@pytest.mark.parametrize("name", ['argmax', 'argmin'])
@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_argmax_argmin(name, data):
  # few distinct values, so ties are common; NaN counts as the extreme (first NaN wins), as numpy and JAX
  dtype = data.draw(st.sampled_from(DTYPES))
  shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
  x = values(data.draw, dtype, shape, -2, 2, special=True)
  axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1))) if shape else None
  keepdims = data.draw(st.booleans())
  got = getattr(jnp, name)(jnp.asarray(x, dtype), axis=axis, keepdims=keepdims)
  check(got, getattr(np, name)(x, axis=axis, keepdims=keepdims), 'int32')

@pytest.mark.parametrize("name", ['cumsum', 'cumprod'])
@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_cumulative(name, data):
  dtype = data.draw(st.sampled_from(DTYPES))
  shape = data.draw(SHAPES)
  x = values(data.draw, dtype, shape, *((-50, 50) if name == 'cumsum' else (-2, 2)))
  axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1))) if shape else None
  got = getattr(jnp, name)(jnp.asarray(x, dtype), axis=axis)
  out = OUT[name][dtype]
  want = getattr(np, name)(x.astype(np.float64 if out in TOL else np.dtype(out)), axis=axis)
  check(got, want, out, 1e3)

@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_where_and_initial(data):
  dtype = data.draw(st.sampled_from(['int8', 'int32', 'uint8', 'float16', 'float32']))
  shape = data.draw(SHAPES)
  x = values(data.draw, dtype, shape)
  mask = data.draw(hnp.arrays(np.bool_, shape[data.draw(st.integers(0, len(shape))):]))   # broadcasts against x
  axis, keepdims = data.draw(axes_for(len(shape))), data.draw(st.booleans())
  axes = reduced(axis, len(shape))
  a, m = jnp.asarray(x, dtype), jnp.asarray(mask)
  full_mask = np.broadcast_to(mask, shape)
  check(jnp.sum(a, axis=axis, keepdims=keepdims, where=m),
        ref_sum_like(lambda v, **k: np.sum(v, where=full_mask, **k), x, axes, keepdims, OUT['sum'][dtype]),
        OUT['sum'][dtype], np.abs(x.astype(float)).sum() + 1)
  check(jnp.any(a, axis=axis, where=m), np.any(x, axis=axes, where=full_mask), 'bool')
  check(jnp.all(a, axis=axis, where=m), np.all(x, axis=axes, where=full_mask), 'bool')
  init = data.draw(st.integers(-3, 3)) if not dtype.startswith('uint') else 3
  check(jnp.max(a, axis=axis, keepdims=keepdims, where=m, initial=init),
        np.max(x, axis=axes, keepdims=keepdims, where=full_mask, initial=init), dtype)
  check(jnp.sum(a, axis=axis, initial=init),
        ref_sum_like(np.sum, x, axes, False, OUT['sum'][dtype]) + init, OUT['sum'][dtype],
        np.abs(x.astype(float)).sum() + 1)
  if dtype.startswith('float'):
    with np.errstate(all='ignore'):
      want = np.mean(x.astype(np.float64), axis=axes, keepdims=keepdims, where=full_mask)
    check(jnp.mean(a, axis=axis, keepdims=keepdims, where=m), want, dtype, 50.0)

def test_empty_reductions_have_identities():
  assert jnp.sum(jnp.zeros((2, 0)), axis=1).tolist() == [0.0, 0.0]
  assert jnp.prod(jnp.zeros((0,))).item() == 1.0
  assert jnp.any(jnp.zeros((0,))).item() is False and jnp.all(jnp.zeros((0,))).item() is True
  assert math.isnan(jnp.mean(jnp.zeros((0,))).item())
  assert jnp.max(jnp.zeros((2, 0)), axis=0).shape == (0,)
  assert jnp.max(jnp.zeros((0,)), initial=3.0).item() == 3.0
  assert jnp.cumsum(jnp.zeros((0, 3)), axis=0).shape == (0, 3)

def test_max_of_empty_names_shape_and_axis():
  with pytest.raises(ValueError, match=r"max.*shape \(2, 0\).*axis 1"):
    jnp.max(jnp.zeros((2, 0)), axis=1)
  with pytest.raises(ValueError, match=r"min.*shape \(0,\)"):
    jnp.zeros((0,)).min()
  with pytest.raises(ValueError, match=r"argmax.*empty.*\(0,\)"):
    jnp.argmax(jnp.zeros((0,)))

def test_max_with_where_needs_initial():
  with pytest.raises(ValueError, match="initial"):
    jnp.max(jnp.ones(2), where=jnp.asarray([False, False]))
  assert jnp.max(jnp.ones(2), where=jnp.asarray([False, False]), initial=-1.0).item() == -1.0

def test_axis_errors_name_axis_and_ndim():
  with pytest.raises(ValueError, match=r"axis 2 .*ndim 2"):
    jnp.sum(jnp.ones((2, 3)), axis=2)
  with pytest.raises(ValueError, match=r"axis -3 .*ndim 2"):
    jnp.ones((2, 3)).mean(axis=(0, -3))
  with pytest.raises(ValueError, match=r"axis 0 .*ndim 0"):
    jnp.sum(jnp.asarray(1.0), axis=0)
  with pytest.raises(ValueError, match="repeated axis"):
    jnp.sum(jnp.ones((2, 3)), axis=(1, -1))
  with pytest.raises(ValueError, match=r"axis 1 .*ndim 1"):
    jnp.cumsum(jnp.ones(3), axis=1)

def test_reduction_dtypes_and_x64():
  assert jnp.sum(jnp.ones(3, jnp.int8), dtype=jnp.int8).dtype is jnp.int8
  assert jnp.mean(jnp.asarray([1, 2], jnp.int8), dtype=jnp.int32).tolist() == 1
  x16 = jnp.asarray([1000.0, 1000.0, 1.0], jnp.float16)
  assert jnp.mean(x16).dtype is jnp.float16 and jnp.mean(x16).item() == pytest.approx(667.0, abs=0.5)
  assert jnp.var(jnp.asarray([1.0, 2.0, 3.0]), ddof=3).item() != jnp.var(jnp.asarray([1.0, 2.0, 3.0]), ddof=3).item()
  with tinyjx.Context(JAX_ENABLE_X64=True):
    assert jnp.sum(jnp.ones(3, jnp.int32)).dtype is jnp.int64
    assert jnp.sum(jnp.ones(3, jnp.uint8)).dtype is jnp.uint64
    assert jnp.mean(jnp.ones(3, jnp.int32)).dtype is jnp.float64

def test_methods_match_functions():
  x = jnp.asarray([[3.0, 1.0], [2.0, 5.0]])
  assert x.sum(axis=0).tolist() == [5.0, 6.0] and x.max().item() == 5.0 and x.argmin(axis=1).tolist() == [1, 0]
  assert x.mean(axis=-1, keepdims=True).shape == (2, 1) and x.cumsum().tolist() == [3.0, 4.0, 6.0, 11.0]
  assert x.std(ddof=1).item() == pytest.approx(np.std([3.0, 1.0, 2.0, 5.0], ddof=1))
  assert x.any() and jnp.argmax(x, keepdims=True).shape == (1, 1) and x.prod().item() == 30.0

def test_out_argument_is_rejected():
  with pytest.raises(NotImplementedError, match="immutable"):
    jnp.sum(jnp.ones(2), out=np.zeros(()))
