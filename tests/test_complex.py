"""Complex numbers: the dtypes and JAX's promotion with them, the ops against numpy on the PYTHON reference device
and compiled (CPU, and OpenCL where PoCL is installed), the errors of ops that refuse complex operands, and
autodiff with JAX's convention (values JAX documents, written in as data), with jit, grad and vmap in every order."""
import os
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax, dtypes
from tinyjx.test_util import check_grads

RNG = np.random.default_rng(0)
def crandn(*shape, dtype=np.complex64):
  return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dtype)

Z = crandn(3, 4)
W = crandn(4, 2)

# ---------------------------------------------------------------- dtypes and promotion

def test_complex_dtypes_and_scalar_constructors():
  assert jnp.complex64(1).dtype is jnp.complex64 and jnp.complex64(1).item() == 1 + 0j
  assert jnp.complex64([1, 2j]).tolist() == [1 + 0j, 2j]
  assert jnp.dtype('complex64') is jnp.complex64 and jnp.complex64 == np.complex64
  assert np.dtype(jnp.complex128) == np.complex128
  assert jnp.issubdtype(jnp.complex64, jnp.complexfloating) and jnp.issubdtype(jnp.complex64, jnp.inexact)
  assert not jnp.issubdtype(jnp.complex64, jnp.floating) and not jnp.issubdtype(jnp.float32, jnp.complexfloating)
  assert jnp.issubdtype(jnp.asarray(1j).dtype, jnp.complexfloating) and jnp.issubdtype(jnp.complex128, jnp.number)
  assert jnp.finfo(jnp.complex64).eps == np.finfo(np.float32).eps

# (operands, result dtype, weak) as jax.numpy gives them with x64 off
PROMOTIONS = [
  (lambda: jnp.ones(2) + 1j, 'complex64', False),
  (lambda: jnp.ones(2, jnp.float16) + 1j, 'complex64', False),
  (lambda: jnp.ones(2, jnp.bfloat16) + 1j, 'complex64', False),
  (lambda: jnp.arange(2) + 1j, 'complex64', True),
  (lambda: jnp.asarray(2.0) * 1j, 'complex64', True),
  (lambda: jnp.ones(2) + jnp.complex64(1j), 'complex64', False),
  (lambda: jnp.complex64(1j) + 2.5, 'complex64', False),
  (lambda: jnp.asarray(np.array([1j], np.complex128)), 'complex64', False),   # canonicalized, x64 off
]

@pytest.mark.parametrize("i", range(len(PROMOTIONS)))
def test_promotion_with_complex(i):
  f, dt, weak = PROMOTIONS[i]
  out = f()
  assert (out.dtype.name, out.weak) == (dt, weak)

def test_promote_types_and_x64():
  assert jnp.promote_types('float64', 'complex64') is jnp.complex128   # promote_types does not canonicalize
  assert jnp.promote_types(jnp.float32, complex) is jnp.complex64
  assert jnp.result_type(jnp.float32, 1j) is jnp.complex64
  tinyjx.config.update('jax_enable_x64', True)
  try:
    assert jnp.asarray(np.array([1j])).dtype is jnp.complex128
    assert (jnp.ones(2) + 1j).dtype is jnp.complex128 and (jnp.ones(2, jnp.float32) + 1j).dtype is jnp.complex64
    assert jnp.fft.fft(jnp.ones(4)).dtype is jnp.complex128
  finally:
    tinyjx.config.update('jax_enable_x64', False)

def test_iscomplex_and_isreal():
  z = jnp.asarray(np.array([1 + 1j, 2, 3j], np.complex64))
  assert jnp.iscomplexobj(z) and not jnp.iscomplexobj(jnp.ones(2)) and jnp.iscomplexobj(1j) and not jnp.isrealobj(z)
  assert jnp.iscomplexobj(np.ones(2, np.complex64)) and not jnp.iscomplexobj(3.0)
  assert jnp.iscomplex(z).tolist() == [True, False, True] and jnp.isreal(z).tolist() == [False, True, False]
  assert jnp.isreal(jnp.ones(2)).tolist() == [True, True] and jnp.iscomplex(jnp.ones(2)).tolist() == [False, False]

# ---------------------------------------------------------------- ops against numpy, reference and compiled

UNARY = {
  'neg': (lambda z: -z, lambda z: -z), 'exp': (jnp.exp, np.exp), 'log': (jnp.log, np.log), 'sqrt': (jnp.sqrt, np.sqrt),
  'sin': (jnp.sin, np.sin), 'cos': (jnp.cos, np.cos), 'abs': (jnp.abs, np.abs), 'angle': (jnp.angle, np.angle),
  'real': (jnp.real, np.real), 'imag': (jnp.imag, np.imag), 'conj': (jnp.conj, np.conj),
  'conjugate': (jnp.conjugate, np.conjugate), 'square': (jnp.square, np.square),
  'pow2': (lambda z: z ** 2, lambda z: z ** 2),
  'pow_half': (lambda z: z ** 0.5, lambda z: z ** 0.5), 'sum': (lambda z: jnp.sum(z, 0), lambda z: np.sum(z, 0)),
  'mean': (jnp.mean, np.mean), 'prod': (lambda z: jnp.prod(z, 1), lambda z: np.prod(z, 1)),
  'prod_all': (jnp.prod, np.prod), 'cumsum': (lambda z: jnp.cumsum(z, 1), lambda z: np.cumsum(z, 1)),
  'astype_f32': (lambda z: z.astype(jnp.float32), lambda z: z.real),
  'astype_bool': (lambda z: z.astype(bool), lambda z: z != 0),
  'eq': (lambda z: z == z[0], lambda z: z == z[0]), 'ne': (lambda z: z != z[:, :1], lambda z: z != z[:, :1]),
  'where': (lambda z: jnp.where(jnp.real(z) > 0, z, 1j), lambda z: np.where(z.real > 0, z, 1j)),
  'views': (lambda z: jnp.concatenate([z.T[1:], z[:, ::-1].T], 0).reshape(-1, 3)[::2],
            lambda z: np.concatenate([z.T[1:], z[:, ::-1].T], 0).reshape(-1, 3)[::2]),
  'gather_scatter': (lambda z: z[jnp.array([2, 0, 2])].at[jnp.array([0, 0])].add(1j),
                     lambda z: (lambda g: (g.__setitem__(0, g[0] + 2j), g)[1])(z[[2, 0, 2]].copy())),
  'isnan': (jnp.isnan, np.isnan), 'isfinite': (lambda z: jnp.isfinite(z / 0), lambda z: np.isfinite(z / 0)),
  # composed from the primitive ones
  'tan': (jnp.tan, np.tan), 'tanh': (jnp.tanh, np.tanh), 'sinh': (jnp.sinh, np.sinh), 'cosh': (jnp.cosh, np.cosh),
  'expm1': (jnp.expm1, np.expm1), 'log1p': (jnp.log1p, np.log1p), 'log10': (jnp.log10, np.log10),
  'reciprocal': (jnp.reciprocal, np.reciprocal), 'sign': (jnp.sign, lambda z: z / np.abs(z)),
  'round': (lambda z: jnp.round(z, 1), lambda z: np.round(z, 1)),
  'var': (lambda z: jnp.var(z, 0), lambda z: np.var(z, 0)),
  'std': (jnp.std, np.std), 'vdot': (lambda z: jnp.vdot(z, z[::-1]), lambda z: np.vdot(z, z[::-1])),
  'vecdot': (lambda z: jnp.vecdot(z, z[::-1]), lambda z: np.sum(np.conj(z) * z[::-1], -1)),
  'norm': (jnp.linalg.norm, np.linalg.norm),
  'norm_1': (lambda z: jnp.linalg.norm(z, 1, axis=1), lambda z: np.linalg.norm(z, 1, axis=1)),
  'correlate': (lambda z: jnp.correlate(z[0], z[1], 'full'), lambda z: np.correlate(z[0], z[1], 'full')),
  'convolve': (lambda z: jnp.convolve(z[0], z[1][:2]), lambda z: np.convolve(z[0], z[1][:2])),
  'lax_reduce_prod': (lambda z: lax.reduce_prod(z, (1,)), lambda z: np.prod(z, 1)),
  'lax_abs': (lax.abs, np.abs), 'sort': (lambda z: jnp.sort(z, 1), lambda z: np.sort(z, 1)),
  'exp2': (jnp.exp2, np.exp2), 'arctanh': (jnp.arctanh, np.arctanh), 'sinc': (jnp.sinc, np.sinc),
  'arcsin': (jnp.arcsin, np.arcsin), 'arccos': (jnp.arccos, np.arccos), 'arctan': (jnp.arctan, np.arctan),
  'arcsinh': (jnp.arcsinh, np.arcsinh), 'arccosh': (jnp.arccosh, np.arccosh),
  'nan_to_num': (lambda z: jnp.nan_to_num(jnp.log(z * 0)), lambda z: np.nan_to_num(np.log(z * 0))),
}

@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_numpy(name, device):
  f, g = UNARY[name]
  with np.errstate(all='ignore'):
    want = g(Z)
  got = tinyjx.jit(f)(jnp.asarray(Z))
  narrowed = {np.dtype(np.complex128): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.float32)}
  assert got.dtype == narrowed.get(want.dtype, want.dtype), (got.dtype, want.dtype)
  np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)

BINARY = {
  'add': lambda a, b: a + b, 'sub': lambda a, b: a - b, 'mul': lambda a, b: a * b, 'div': lambda a, b: a / b,
  'pow': lambda a, b: a ** b, 'mixed': lambda a, b: a.real * b + 2 - 1j * a,
}

@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_against_numpy(name, device):
  f = BINARY[name]
  a, b = Z, crandn(3, 4)
  np.testing.assert_allclose(np.asarray(tinyjx.jit(f)(jnp.asarray(a), jnp.asarray(b))), f(a, b), rtol=3e-5, atol=3e-5)

INVERSE = ['arcsin', 'arccos', 'arctan', 'arcsinh', 'arccosh', 'arctanh', 'expm1', 'log1p']

@pytest.mark.parametrize("name", INVERSE)
def test_inverse_functions_near_zero_and_on_the_cuts(name, device):
  """Accurate to float32 relative error near 0 (log1p and expm1 forms); on a branch cut the side is the sign of the
  zero part, as numpy's (C99's) values say."""
  small = (Z.ravel() * 1e-4).astype(np.complex64)
  cuts = np.array([2 + 0j, complex(2, -0.0), -2 + 0j, complex(-2, -0.0), 2j, complex(-0.0, 2), -2j, 1.5 + 0j],
                  np.complex64)
  f, g = getattr(jnp, name), getattr(np, name)
  for z in (small, cuts):
    want = g(z.astype(np.complex128))
    got = np.asarray(tinyjx.jit(f)(jnp.asarray(z)))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30 if z is small else 1e-6)

def test_division_by_large_and_small_numbers(device):
  """Smith's division: |b|^2 overflows float32 here, the quotient does not."""
  a = np.array([1e30 + 1e30j, 1 + 1j, 3 - 4j], np.complex64)
  b = np.array([2e30 - 1e30j, 1e-30 + 2e-30j, 0.5 + 0j], np.complex64)
  want = (a.astype(np.complex128) / b.astype(np.complex128))
  got = tinyjx.jit(lambda x, y: x / y)(jnp.asarray(a), jnp.asarray(b))
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)

def test_special_values(device):
  z = jnp.asarray(np.array([-4 + 0j, 0j, 1e-30 + 0j, complex(-1, -0.0)], np.complex64))
  got = np.asarray(tinyjx.jit(jnp.sqrt)(z))
  np.testing.assert_allclose(got, [2j, 0, 1e-15, 1j], atol=1e-7)   # JAX's sqrt(-1-0j) is 1j (numpy's: -1j)
  assert np.asarray(tinyjx.jit(jnp.abs)(jnp.asarray([3e30 + 4e30j]))).tolist() == [pytest.approx(5e30, rel=1e-6)]

def test_contractions(device):
  a, b = jnp.asarray(Z), jnp.asarray(W)
  np.testing.assert_allclose(np.asarray(tinyjx.jit(jnp.dot)(a, b)), Z @ W, rtol=2e-5, atol=2e-5)
  np.testing.assert_allclose(np.asarray(tinyjx.jit(jnp.matmul)(a, b)), Z @ W, rtol=2e-5, atol=2e-5)
  np.testing.assert_allclose(np.asarray(tinyjx.jit(lambda x: jnp.einsum('ij,kj->ik', x, x))(a)),
                             np.einsum('ij,kj->ik', Z, Z), rtol=2e-5, atol=2e-5)
  real = RNG.normal(size=(2, 3)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(tinyjx.jit(jnp.matmul)(jnp.asarray(real), a)), real @ Z, rtol=2e-5, atol=2e-5)

def test_contractions_of_every_shape(device):
  """Batched, vector, several contracting axes, none (an outer product): a complex dot_general compiles as two real
  ones on the parts joined along a contracting axis (lower/complex.py), or as four products without one."""
  x, y = crandn(2, 3, 4), crandn(2, 4, 5)
  cases = [(lambda a, b: a @ b, (x, y)), (jnp.vdot, (x[0, 0], y[0, :, 0])), (jnp.inner, (x[0], x[1])),
           (lambda a, b: jnp.tensordot(a, b, ((1, 2), (0, 1))), (x, crandn(3, 4, 2))),
           (jnp.outer, (x[0, 0], y[0, 0])), (lambda a, b: jnp.einsum('bij,bjk->bik', a, jnp.conj(b)), (x, y))]
  npf = {jnp.vdot: np.vdot, jnp.inner: np.inner, jnp.outer: np.outer}
  for f, args in cases:
    want = npf[f](*args) if f in npf else None
    got = np.asarray(tinyjx.jit(f)(*map(jnp.asarray, args)))
    with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
      ref = np.asarray(f(*map(jnp.asarray, args)))
    if want is not None: np.testing.assert_allclose(ref, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)

def test_a_complex_matmul_is_tiled(cpu):
  """Each part of a complex matmul is one tiled matmul kernel (the four real products fused into one kernel ran as
  plain loops: a 512 x 512 product took 0.9 s); a third kernel puts the parts side by side as the result's pairs."""
  a = jnp.asarray(crandn(64, 48))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    text = tinyjx.jit(lambda p, q: p @ q).lower(a, a.T).compile().as_text()
  assert text.count('static void k') == 3 and text.count('tjx_mm_f32_') >= 2

def test_creation_and_lax_complex(device):
  assert jnp.asarray(np.array([1 + 2j], np.complex64)).tolist() == [1 + 2j]
  assert jnp.array([1, 2j, 3.5]).tolist() == [1, 2j, 3.5] and jnp.zeros(2, jnp.complex64).tolist() == [0j, 0j]
  got = tinyjx.jit(lax.complex)(jnp.arange(3.0), -jnp.arange(3.0))
  assert got.dtype is jnp.complex64 and got.tolist() == [0j, 1 - 1j, 2 - 2j]
  assert tinyjx.jit(lambda x: lax.conj(x))(jnp.arange(2.0)).tolist() == [0j, 1 + 0j]
  assert lax.real(jnp.complex64(1 + 2j)).item() == 1.0 and lax.imag(jnp.complex64(1 + 2j)).item() == 2.0
  inf = tinyjx.jit(lax.complex)(jnp.asarray([1.0]), jnp.asarray([np.inf]))
  assert np.asarray(inf).real[0] == 1.0 and np.isinf(np.asarray(inf).imag[0])   # not (nan + inf j)

def test_complex_constants_and_closures_under_jit(device):
  c = jnp.asarray(W[:, 0])
  f = tinyjx.jit(lambda x: x * c + (2 - 1j))
  np.testing.assert_allclose(np.asarray(f(jnp.asarray(W[:, 1]))), W[:, 1] * W[:, 0] + (2 - 1j), rtol=1e-5)
  assert f(jnp.asarray(W[:, 1])).dtype is jnp.complex64

def test_compiled_matches_reference_on_a_mixed_program(cpu):
  def f(z, x):
    y = jnp.exp(z) * jnp.sqrt(z + 2) / (z - 3j) + jnp.sum(jnp.conj(z) * z, 1, keepdims=True)
    return jnp.abs(y) * x, jnp.angle(y), y @ jnp.ones((4, 2), jnp.complex64)
  args = (jnp.asarray(Z), jnp.asarray(RNG.normal(size=(3, 4)).astype(np.float32)))
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = [np.asarray(v) for v in tinyjx.jit(f)(*args)]
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = [np.asarray(v) for v in tinyjx.jit(f)(*args)]
  for g, w in zip(got, want): np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)

def test_opencl_runs_complex_programs():
  from tinyjx import devices
  try:
    devices.get('CL')
  except Exception as e:   # noqa: BLE001 - no OpenCL platform here
    pytest.skip(f"no OpenCL device: {e}")
  with tinyjx.Context(TINYJX_DEVICE='CL'):
    got = tinyjx.jit(lambda z, w: jnp.exp(z) @ w / 2j)(jnp.asarray(Z), jnp.asarray(W))
    np.testing.assert_allclose(np.asarray(got), np.exp(Z) @ W / 2j, rtol=1e-4, atol=1e-4)

def test_cuda_compile_check_of_a_complex_program():
  from tinyjx.devices import cuda
  if not cuda.compile_only_available(): pytest.skip("NVRTC is not installed (pip install nvidia-cuda-nvrtc-cu12)")
  report = cuda.compile_check(lambda z: jnp.sum(jnp.exp(z) * jnp.conj(z)), jnp.asarray(Z))
  assert report.kernels

# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("f", [lambda z: z < 1, lambda z: jnp.greater_equal(z, z), lambda z: jnp.maximum(z, 1),
                               lambda z: jnp.max(z), lambda z: jnp.argmin(z), lambda z: lax.lt(z, z),
                               lambda z: jnp.floor(z), lambda z: jnp.ceil(z), lambda z: jnp.fmod(z, 2),
                               lambda z: jnp.clip(z, 0), lambda z: z // 2, lambda z: z % 2, lambda z: jnp.cbrt(z),
                               lambda z: jnp.arctan2(z, z), lambda z: lax.reduce_max(z, (0,))])
def test_ops_without_complex_meaning_raise_type_error(f):
  with pytest.raises(TypeError, match="complex64"):
    f(jnp.asarray(Z))

def test_ordering_error_names_the_fix():
  with pytest.raises(TypeError, match=r"less does not accept dtype complex64: complex numbers have no order.*jnp.abs"):
    jnp.asarray(Z) < 0

def test_lax_complex_refuses_complex_and_mixed_operands():
  with pytest.raises(TypeError, match="complex"):
    lax.complex(jnp.asarray(Z), jnp.asarray(Z))
  with pytest.raises(TypeError, match="same dtypes"):
    lax.complex(jnp.ones(2), jnp.ones(2, jnp.int32))

def test_an_op_without_a_split_rule_says_the_fix(cpu):
  f = tinyjx.jit(lambda z: jnp.cumprod(z, 1))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    msg = r"running product \(cumprod\) with complex64 operands does not run on the CPU:0 device.*TINYJX_DEVICE=PYTHON"
    with pytest.raises(NotImplementedError, match=msg):
      f(jnp.asarray(Z))
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    np.testing.assert_allclose(np.asarray(f(jnp.asarray(Z))), np.cumprod(Z, 1), rtol=1e-5)

LOOPS = {   # complex carries, xs, ys and branch operands: the compiled loop steps take them as packed floats
  'fori_loop': lambda z: lax.fori_loop(0, 3, lambda i, c: c * 1j + i, z),
  'scan': lambda z: lax.scan(lambda c, x: (c * x, c + jnp.real(x)), jnp.ones(4, jnp.complex64), z),
  'scan_real_xs': lambda z: lax.scan(lambda c, x: (c + lax.complex(x, -x), jnp.imag(c)), z[0], jnp.real(z)),
  'cond': lambda z: lax.cond(jnp.real(z[0, 0]) > 0, lambda v: v * 2j, lambda v: jnp.conj(v), z),
  'while_loop': lambda z: lax.while_loop(lambda c: jnp.sum(jnp.abs(c)) < 50, lambda c: c * (1 + 1j), z),
  'grad_of_loop': tinyjx.grad(lambda z: jnp.sum(jnp.abs(lax.fori_loop(0, 2, lambda i, c: c * c + 1j, z)) ** 2)),
}

@pytest.mark.parametrize("name", sorted(LOOPS))
def test_control_flow_with_complex_values_compiled(name, cpu):
  f = tinyjx.jit(LOOPS[name])
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = [np.asarray(v) for v in tinyjx.tree_util.tree_leaves(f(jnp.asarray(Z)))]
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = [np.asarray(v) for v in tinyjx.tree_util.tree_leaves(f(jnp.asarray(Z)))]
  for g, w in zip(got, want):
    assert g.dtype == w.dtype
    np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)

def test_pmap_collectives_of_complex_values():
  z = jnp.asarray(crandn(2, 3))
  with tinyjx.Context(TINYJX_CPU_DEVICES=2):
    # on the virtual CPU devices whatever the default device is (a machine has one GPU, and PoCL one CL device)
    summed = tinyjx.pmap(lambda v: lax.psum(v, 'i'), axis_name='i', backend='cpu')(z)
    gathered = tinyjx.pmap(lambda v: lax.all_gather(v, 'i'), axis_name='i', backend='cpu')(z)
  np.testing.assert_allclose(np.asarray(summed), np.broadcast_to(np.asarray(z).sum(0), (2, 3)), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(gathered), np.broadcast_to(np.asarray(z), (2, 2, 3)), rtol=1e-6)

# ---------------------------------------------------------------- autodiff, JAX's convention

def test_grad_values_as_jax_documents_them():
  # JAX: grad of a real function of z = x + iy is df/dx - i df/dy (the conjugate of the steepest-ascent direction)
  z = jnp.complex64(3 + 4j)
  assert tinyjx.grad(lambda z: jnp.abs(z) ** 2)(z).item() == pytest.approx(6 - 8j)
  assert tinyjx.grad(lambda z: jnp.real(z))(z).item() == pytest.approx(1)
  assert tinyjx.grad(lambda z: jnp.imag(z))(z).item() == pytest.approx(-1j)
  # holomorphic: the complex derivative f'(z)
  assert tinyjx.grad(lambda z: z ** 2, holomorphic=True)(z).item() == pytest.approx(6 + 8j)
  assert tinyjx.grad(jnp.sin, holomorphic=True)(z).item() == pytest.approx(np.cos(3 + 4j), rel=1e-5)
  assert tinyjx.grad(jnp.log, holomorphic=True)(z).item() == pytest.approx(1 / (3 + 4j), rel=1e-6)

def test_grad_errors_for_complex_outputs_and_holomorphic_inputs():
  with pytest.raises(TypeError, match="real-valued output.*holomorphic=True"):
    tinyjx.grad(lambda z: z * z)(jnp.complex64(1j))
  with pytest.raises(TypeError, match="holomorphic=True requires complex inputs.*astype"):
    tinyjx.grad(lambda x: x * 1j, holomorphic=True)(1.0)
  with pytest.raises(TypeError, match="holomorphic=True requires a complex output"):
    tinyjx.grad(lambda z: jnp.abs(z), holomorphic=True)(jnp.complex64(1j))

def test_jvp_and_vjp_of_complex_functions():
  z, t = jnp.complex64(1 + 2j), jnp.complex64(0.5 - 1j)
  out, tan = tinyjx.jvp(lambda z: z * z, (z,), (t,))
  assert out.item() == pytest.approx((1 + 2j) ** 2) and tan.item() == pytest.approx(2 * (1 + 2j) * (0.5 - 1j))
  out, f_vjp = tinyjx.vjp(lambda z: jnp.exp(z), z)
  assert f_vjp(jnp.complex64(1j))[0].item() == pytest.approx(1j * np.exp(1 + 2j), rel=1e-6)
  _, f_vjp = tinyjx.vjp(jnp.conj, z)
  assert f_vjp(jnp.complex64(2 + 3j))[0].item() == pytest.approx(2 - 3j)

FUNCS = {
  'holomorphic': lambda z: jnp.exp(z) * z / (z + 3) + jnp.sqrt(z + 4) * jnp.log(z + 5) - jnp.sin(z) * jnp.cos(z),
  'parts': lambda z: jnp.conj(z) * jnp.abs(z) + jnp.angle(z) + lax.complex(jnp.imag(z), jnp.real(z) ** 2),
  'inverse': lambda z: jnp.arcsin(z) + jnp.arccos(z / 3) * jnp.arctan(z) + jnp.arcsinh(z) - jnp.arccosh(z + 3),
  'reductions': lambda z: jnp.prod(z, 0) + jnp.mean(z * z, 0) + jnp.sum(z @ jnp.conj(z).T, 0) / 4,
}

@pytest.mark.parametrize("name", sorted(FUNCS))
def test_derivatives_against_finite_differences(name):
  check_grads(FUNCS[name], (jnp.asarray(crandn(2, 2) + 2),), order=2)

def test_real_to_complex_and_back_against_finite_differences():
  f = lambda x, y: jnp.abs(jnp.exp(lax.complex(x, y)) + jnp.sqrt(lax.complex(y, x) + 3)) ** 2
  x, y = (jnp.asarray(RNG.normal(size=3).astype(np.float32)) for _ in range(2))
  check_grads(f, (x, y), order=2)

def loss(z, x):
  return jnp.sum(jnp.abs(jnp.exp(z) * x + jnp.conj(z)) ** 2)

def test_jit_grad_vmap_agree_in_every_order():
  zs, xs = jnp.asarray(crandn(3, 4)), jnp.asarray(RNG.normal(size=(3, 4)).astype(np.float32))
  loop = np.stack([np.asarray(tinyjx.grad(loss)(zs[i], xs[i])) for i in range(3)])
  g = tinyjx.grad(loss)
  versions = {
    'vmap(grad)': tinyjx.vmap(g)(zs, xs), 'jit(vmap(grad))': tinyjx.jit(tinyjx.vmap(g))(zs, xs),
    'vmap(jit(grad))': tinyjx.vmap(tinyjx.jit(g))(zs, xs),
    'vmap(grad(jit))': tinyjx.vmap(tinyjx.grad(tinyjx.jit(loss)))(zs, xs),
    'grad(sum vmap)': tinyjx.grad(lambda z, x: jnp.sum(tinyjx.vmap(loss)(z, x)))(zs, xs),
  }
  # by hand: JAX's gradient df/da - i df/db (z = a + ib) is 2 df/dz (Wirtinger); with w = exp(z) x + conj(z),
  # d|w|^2/dz = conj(w) exp(z) x + w
  z0, x0 = np.asarray(zs[0], np.complex128), np.asarray(xs[0], np.float64)
  w0 = np.exp(z0) * x0 + np.conj(z0)
  assert np.allclose(loop[0], 2 * (np.conj(w0) * np.exp(z0) * x0 + w0), rtol=1e-4)
  for name, v in versions.items(): np.testing.assert_allclose(np.asarray(v), loop, rtol=1e-5, atol=1e-5, err_msg=name)

def test_vmap_of_holomorphic_grad_and_of_jvp():
  zs = jnp.asarray(crandn(5))
  g = tinyjx.vmap(tinyjx.grad(lambda z: z ** 3, holomorphic=True))(zs)
  np.testing.assert_allclose(np.asarray(g), 3 * np.asarray(zs) ** 2, rtol=1e-5)
  t = tinyjx.vmap(lambda z: tinyjx.jvp(jnp.exp, (z,), (1j * z,))[1])(zs)
  np.testing.assert_allclose(np.asarray(t), 1j * np.asarray(zs) * np.exp(np.asarray(zs)), rtol=1e-5)

def test_compiled_gradient_matches_reference(cpu):
  zs, xs = jnp.asarray(crandn(3, 4)), jnp.asarray(RNG.normal(size=(3, 4)).astype(np.float32))
  with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
    want = np.asarray(tinyjx.jit(tinyjx.grad(loss))(zs, xs))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = np.asarray(tinyjx.jit(tinyjx.grad(loss))(zs, xs))
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
  assert dtypes.is_complex(tinyjx.jit(tinyjx.grad(loss))(zs, xs).dtype)

def test_linalg_solve_and_inv_of_complex_matrices(device):
  a, b, bs = crandn(3, 4, 4), crandn(4), crandn(3, 4, 2)
  np.testing.assert_allclose(np.asarray(tinyjx.jit(jnp.linalg.solve)(jnp.asarray(a[0]), jnp.asarray(b))),
                             np.linalg.solve(a[0], b), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(np.asarray(tinyjx.jit(jnp.linalg.solve)(jnp.asarray(a), jnp.asarray(bs))),
                             np.linalg.solve(a, bs), rtol=1e-4, atol=1e-4)
  inverse = tinyjx.jit(jnp.linalg.inv)(jnp.asarray(a))
  np.testing.assert_allclose(np.asarray(inverse), np.linalg.inv(a), rtol=1e-4, atol=1e-4)
  mixed = jnp.linalg.solve(jnp.asarray(a[0].real), jnp.asarray(b))   # a real matrix, a complex right-hand side
  np.testing.assert_allclose(np.asarray(mixed), np.linalg.solve(a[0].real, b), rtol=1e-4, atol=1e-4)
  with pytest.raises(ValueError, match=r"needs b of shape \(4,\)"):
    jnp.linalg.solve(jnp.asarray(a[0]), jnp.ones(3, jnp.complex64))
  with pytest.raises(TypeError, match="complex matrices: only cholesky, jnp.linalg.solve and inv"):
    jnp.linalg.det(jnp.asarray(a[0]))

def test_complex_solve_derivatives():
  a, b = crandn(3, 3) + 3 * np.eye(3, dtype=np.complex64), crandn(3)
  check_grads(lambda m, v: jnp.linalg.solve(m, v), (jnp.asarray(a), jnp.asarray(b)), order=1)

def test_holomorphic_jacobians_and_hessian():
  z = jnp.asarray(crandn(3))
  want = np.diag(2 * np.asarray(z))
  for jac in (tinyjx.jacrev, tinyjx.jacfwd):
    np.testing.assert_allclose(np.asarray(jac(lambda v: v * v, holomorphic=True)(z)), want, rtol=1e-6)
  h = tinyjx.hessian(lambda v: jnp.sum(v ** 3), holomorphic=True)(z)
  np.testing.assert_allclose(np.asarray(h), np.diag(6 * np.asarray(z)), rtol=1e-5)
  # a real function of complex inputs: jacrev rows are JAX's gradients (conjugated Wirtinger derivatives, times 2)
  rows = tinyjx.jacrev(lambda v: jnp.abs(v) ** 2)(z)
  np.testing.assert_allclose(np.asarray(rows), np.diag(2 * np.conj(z)), rtol=1e-5)
  # a complex function of real inputs: jacfwd's columns are its (complex) partial derivatives
  np.testing.assert_allclose(np.asarray(tinyjx.jacfwd(lambda x: x * (1 + 2j))(jnp.ones(2))), np.eye(2) * (1 + 2j))

def test_jacobian_errors_say_holomorphic():
  z = jnp.asarray(crandn(2))
  with pytest.raises(TypeError, match="jacfwd requires real-valued inputs.*holomorphic=True"):
    tinyjx.jacfwd(jnp.abs)(z)
  with pytest.raises(TypeError, match="jacrev requires a real-valued output.*holomorphic=True"):
    tinyjx.jacrev(lambda v: v * v)(z)
  with pytest.raises(TypeError, match="jacrev with holomorphic=True requires a complex output"):
    tinyjx.jacrev(jnp.abs, holomorphic=True)(z)
  with pytest.raises(TypeError, match="jacfwd with holomorphic=True requires complex inputs"):
    tinyjx.jacfwd(lambda x: x * 1j, holomorphic=True)(jnp.ones(2))

def test_complex_normal_draws():
  from tinyjx import random
  key = random.PRNGKey(0)
  z = random.normal(key, (20000,), jnp.complex64)
  assert z.dtype is jnp.complex64
  np.testing.assert_allclose(np.asarray(random.normal(key, (3,), jnp.complex64)),   # jax.random's own values
                             [0.70994526 - 1.727077j, -0.6408772 - 1.4394435j, -0.52903765 + 0.14534172j], rtol=1e-6)
  halves = random.split(key)   # JAX's construction: (x + iy) / sqrt(2) from the two halves of the key
  want = (np.asarray(random.normal(halves[0], (20000,))) + 1j * np.asarray(random.normal(halves[1], (20000,))))
  np.testing.assert_allclose(np.asarray(z), want / np.sqrt(2), rtol=1e-6)
  assert abs(float(jnp.mean(jnp.abs(z) ** 2)) - 1) < 0.03

def test_debug_nans_explain_and_staged_api_with_complex_programs(cpu):
  z = jnp.asarray(Z[0])
  tinyjx.config.update('jax_debug_nans', True)
  try:
    with pytest.raises(FloatingPointError, match=r"nan\) encountered in mul \(c64\[4\]\)"):
      tinyjx.jit(lambda v: jnp.log(v * 0) * 0)(z)
  finally:
    tinyjx.config.update('jax_debug_nans', False)
  f = lambda v: jnp.sum(jnp.exp(v) * jnp.conj(v))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    report = tinyjx.explain(f)(z)
    compiled = tinyjx.jit(f).lower(z).compile()
    assert report.kernels and 'float' in compiled.as_text()
    np.testing.assert_allclose(np.asarray(compiled(z)), np.sum(np.exp(Z[0]) * np.conj(Z[0])), rtol=1e-5)

def test_log_and_sqrt_of_huge_and_tiny_values(device):
  """|z|^2 of these over- or underflows float32; the compiled formulas scale by the larger part first."""
  z = np.array([3e30 + 4e30j, 3e-30 - 4e-30j, -1e25 + 1e-25j], np.complex64)
  for f, g in ((jnp.log, np.log), (jnp.sqrt, np.sqrt)):
    np.testing.assert_allclose(np.asarray(tinyjx.jit(f)(jnp.asarray(z))), g(z.astype(np.complex128)), rtol=2e-6)

# ---------------------------------------------------------------- JAX as an oracle, where it is installed

ORACLE = {   # name: (the library, its numpy) -> a function of a complex array; values and grads of |f|^2 compared
  'exp': lambda j, jn: jn.exp, 'log': lambda j, jn: jn.log, 'sqrt': lambda j, jn: jn.sqrt,
  'tanh': lambda j, jn: jn.tanh,
  'arctan': lambda j, jn: jn.arctan, 'arcsinh': lambda j, jn: jn.arcsinh, 'angle': lambda j, jn: jn.angle,
  'abs': lambda j, jn: jn.abs, 'prod': lambda j, jn: jn.prod, 'var': lambda j, jn: jn.var,
  'sort': lambda j, jn: jn.sort,
  'fft': lambda j, jn: jn.fft.fft, 'ihfft': lambda j, jn: (lambda v: jn.fft.ihfft(jn.real(v))),
  'irfft': lambda j, jn: (lambda v: jn.fft.irfft(v, n=9)), 'power': lambda j, jn: (lambda v: v ** (0.3 - 0.2j)),
}

@pytest.mark.parametrize("name", sorted(ORACLE))
def test_values_and_gradients_match_jax(name):
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')   # the oracle on the CPU: a GPU JAX would take the GPU under test
  jax = pytest.importorskip('jax', reason="JAX is not installed (a test-only oracle: pip install jax)")
  import jax.numpy as jjnp
  z = crandn(7) + 0.5
  mine, theirs = ORACLE[name](tinyjx, jnp), ORACLE[name](jax, jjnp)
  want = np.asarray(theirs(jjnp.asarray(z)))
  np.testing.assert_allclose(np.asarray(mine(jnp.asarray(z))), want, rtol=1e-4, atol=1e-5)
  def loss(f, xnp): return lambda v: xnp.sum(xnp.abs(f(v)) ** 2)
  g_mine = tinyjx.grad(loss(mine, jnp))(jnp.asarray(z))
  g_theirs = jax.grad(loss(theirs, jjnp))(jjnp.asarray(z))
  np.testing.assert_allclose(np.asarray(g_mine), np.asarray(g_theirs), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize('shape', [(1,), (7,), (33, 5), (31, 257)])
def test_a_complex_result_is_stored_as_pairs_by_its_kernel(cpu, shape):
  """A complex result comes out of the kernel that computes it as its float pairs (one kernel, no select left
  between the parts: `split_guards` writes out its two stores), which are the complex result's memory as they are;
  elementwise, transposed (`tile_transposes` with pairs of stores) and padded, against numpy."""
  z = crandn(*shape)
  progs = [(lambda z: z * z + 1, lambda z: z * z + 1), (lambda z: z.T * (2 - 1j), lambda z: z.T * (2 - 1j)),
           (lambda z: jnp.pad(z, [(1, 2)] * z.ndim) * 1j, lambda z: np.pad(z, [(1, 2)] * z.ndim) * 1j)]
  for i, (f, npf) in enumerate(progs):
    with tinyjx.Context(TINYJX_DEVICE='CPU'):
      text = tinyjx.jit(f).lower(jnp.asarray(z)).compile().as_text()
      got = np.asarray(tinyjx.jit(f)(jnp.asarray(z)))
    assert text.count('static void k') == 1
    if i < 2 or min(shape) >= 16: assert ' ? ' not in text[text.index('static void k0'):], text   # pads: long rows
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, npf(z), rtol=1e-6, atol=1e-6)
