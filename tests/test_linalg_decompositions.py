"""Tests of the factorizations: jnp.linalg (cholesky, solve, inv, det, slogdet, qr, eigh, eigvalsh, svd, pinv,
matrix_power, matrix_rank, lstsq), lax.linalg (cholesky, triangular_solve, lu, qr, eigh, svd) and
tinyjx.scipy.linalg. Values against numpy.linalg computed here (LU against a few lines of numpy partial
pivoting), float32 and float64, batch dims, gradients against finite differences (float64), jvp against vjp,
vmap against a loop, jit on the compiled CPU device against the PYTHON reference, the blocked Cholesky path
(n = 64), the blocked triangular solves (n = 33 to 257), and the errors."""
import doctest
import numpy as np
import pytest

import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax
import tinyjx.scipy.linalg as sl
from tinyjx.test_util import check_grads
from tinyjx.lax import linalg as lax_linalg
from tinyjx.numpy import linalg_decomp

pytestmark = pytest.mark.usefixtures('semantics_device')

def rng(seed=0): return np.random.default_rng(seed)

def spd(n, batch=(), dtype=np.float32, seed=0):
  x = rng(seed).standard_normal(batch + (n, n))
  return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(dtype)

def general(shape, dtype=np.float32, seed=1):
  """A well-conditioned (diagonally shifted) matrix when square."""
  x = rng(seed).standard_normal(shape)
  if len(shape) >= 2 and shape[-1] == shape[-2]: x = x + 3 * np.eye(shape[-1])
  return x.astype(dtype)

def close(got, want, tol):
  got = np.asarray(got)
  assert got.shape == np.shape(want), (got.shape, np.shape(want))
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

def scale(a): return max(1.0, float(np.abs(a).max()))

TOL = {np.float32: 2e-5, np.float64: 1e-11}

@pytest.fixture
def x64():
  with tinyjx.Context(JAX_ENABLE_X64=True):
    yield

def numpy_lu(a):
  """LAPACK's getrf in numpy: (lu, pivots), pivot = first row of largest magnitude."""
  a = a.astype(np.float64).copy()
  m, n = a.shape
  piv = np.zeros(min(m, n), np.int32)
  for j in range(min(m, n)):
    p = j + int(np.argmax(np.abs(a[j:, j])))
    piv[j] = p
    a[[j, p]] = a[[p, j]]
    if a[j, j] != 0:
      a[j + 1:, j] /= a[j, j]
      a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
  return a, piv

# ---------------------------------------------------------------- values against numpy

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('n', [1, 2, 3, 8])
def test_cholesky_solve_inv_det(request, dtype, n):
  if dtype == np.float64: request.getfixturevalue('x64')
  a, g = spd(n, dtype=dtype), general((n, n), dtype)
  b, v = general((n, 3), dtype, seed=2), general((n, 1), dtype, seed=3)[:, 0]
  tol = TOL[dtype]
  close(jnp.linalg.cholesky(a), np.linalg.cholesky(a), tol * scale(a))
  close(jnp.linalg.cholesky(a, upper=True), np.linalg.cholesky(a).T, tol * scale(a))
  close(jnp.linalg.solve(g, b), np.linalg.solve(g, b), tol * 10)
  close(jnp.linalg.solve(g, v), np.linalg.solve(g, v), tol * 10)
  close(jnp.linalg.inv(g), np.linalg.inv(g), tol * 10)
  close(jnp.linalg.det(g), np.linalg.det(g), tol * abs(np.linalg.det(g)))
  sign, logdet = jnp.linalg.slogdet(g)
  close(sign, np.linalg.slogdet(g)[0], 0)
  close(logdet, np.linalg.slogdet(g)[1], tol * 10)
  assert np.asarray(jnp.linalg.det(g)).dtype == dtype

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(1, 1), (3, 3), (6, 4), (4, 7), (8, 8)])
def test_qr_matches_numpy_signs(request, dtype, shape):
  if dtype == np.float64: request.getfixturevalue('x64')
  a = general(shape, dtype)
  tol = TOL[dtype] * 10
  for mode in ('reduced', 'complete'):
    q, r = jnp.linalg.qr(a, mode=mode)
    q0, r0 = np.linalg.qr(a, mode=mode)
    close(q, q0, tol)
    close(r, r0, tol * scale(a))
  close(jnp.linalg.qr(a, mode='r'), np.linalg.qr(a, mode='r'), tol * scale(a))

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('n', [1, 2, 5, 8])
def test_eigh(request, dtype, n):
  if dtype == np.float64: request.getfixturevalue('x64')
  x = rng(4).standard_normal((n, n)).astype(dtype)
  a = x + x.T
  w, v = jnp.linalg.eigh(a)
  w0, v0 = np.linalg.eigh(a)
  tol = TOL[dtype] * scale(a)
  close(w, w0, tol)
  close(jnp.linalg.eigvalsh(a), w0, tol)
  v = np.asarray(v)
  close(v.T @ v, np.eye(n), TOL[dtype] * 5)
  close(a @ v, v * np.asarray(w), tol * 5)
  close(np.abs(v), np.abs(v0), TOL[dtype] * 100)    # distinct eigenvalues: each column up to its sign

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(1, 1), (3, 1), (1, 4), (4, 4), (7, 5), (5, 8)])
def test_svd(request, dtype, shape):
  if dtype == np.float64: request.getfixturevalue('x64')
  a = general(shape, dtype, seed=5)
  m, n = shape
  k = min(m, n)
  tol = TOL[dtype] * scale(a)
  s0 = np.linalg.svd(a, compute_uv=False)
  close(jnp.linalg.svd(a, compute_uv=False), s0, tol)
  for full in (True, False):
    u, s, vh = map(np.asarray, jnp.linalg.svd(a, full_matrices=full))
    u0, _, vh0 = np.linalg.svd(a, full_matrices=full)
    assert (u.shape, vh.shape) == (u0.shape, vh0.shape)
    close(s, s0, tol)
    close((u[:, :k] * s) @ vh[:k], a, tol * 5)
    close(u.T @ u, np.eye(u.shape[1]), TOL[dtype] * 10)
    close(vh @ vh.T, np.eye(vh.shape[0]), TOL[dtype] * 10)
    close(np.abs(u[:, :k]), np.abs(u0[:, :k]), TOL[dtype] * 100)

def test_svd_rank_deficient_keeps_u_orthonormal():
  a = np.outer(np.arange(1., 5.), np.arange(1., 4.)).astype(np.float32)
  u, s, vh = map(np.asarray, jnp.linalg.svd(a))
  close(s, np.linalg.svd(a, compute_uv=False), 1e-5 * scale(a))
  close(u.T @ u, np.eye(4), 1e-5)
  close((u[:, :3] * s) @ vh, a, 1e-4)
  assert int(jnp.linalg.matrix_rank(a)) == 1

@pytest.mark.parametrize('lower', [True, False])
@pytest.mark.parametrize('left_side', [True, False])
@pytest.mark.parametrize('transpose_a', [True, False])
@pytest.mark.parametrize('unit_diagonal', [True, False])
def test_triangular_solve_flags(lower, left_side, transpose_a, unit_diagonal):
  n = 5
  g = general((n, n))
  a = g + 50 * np.triu(np.ones((n, n)), 1) * (1 if lower else 0)   # garbage in the unread triangle
  tri = np.tril(g) if lower else np.triu(g)
  if unit_diagonal: tri = tri - np.diag(np.diag(tri)) + np.eye(n, dtype=np.float32)
  if not lower: a = g + 50 * np.tril(np.ones((n, n)), -1)
  op = tri.T if transpose_a else tri
  b = general((n, 3), seed=6) if left_side else general((3, n), seed=6)
  x = lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                                  unit_diagonal=unit_diagonal)
  want = np.linalg.solve(op, b) if left_side else np.linalg.solve(op.T, b.T).T
  close(x, want, 1e-4)

@pytest.mark.parametrize('shape', [(1, 1), (4, 4), (6, 4), (4, 6)])
def test_lu_matches_partial_pivoting(shape):
  a = rng(7).standard_normal(shape).astype(np.float32)
  lu_, piv, perm = map(np.asarray, lax.linalg.lu(a))
  lu0, piv0 = numpy_lu(a)
  close(lu_, lu0.astype(np.float32), 1e-5)
  assert piv.dtype == np.int32 and perm.dtype == np.int32 and piv.tolist() == piv0.tolist()
  k = min(shape)
  l, u = np.tril(lu_[:, :k], -1) + np.eye(shape[0], k), np.triu(lu_[:k])
  close(l @ u, a[perm], 1e-5)
  close(lax.linalg.lu_pivots_to_permutation(piv, shape[0]), perm, 0)

def _lu_cases(dtype):
  r = rng(11)
  ints = lambda shape: r.integers(-2, 3, shape).astype(dtype)            # ties, zero columns, singular blocks
  nan = r.standard_normal((6, 6)).astype(dtype)
  nan[3, 0], nan[4, 2] = np.nan, np.nan
  return [r.standard_normal((1, 1)).astype(dtype), r.standard_normal((37, 53)).astype(dtype),
          r.standard_normal((53, 37)).astype(dtype), r.standard_normal((3, 40, 40)).astype(dtype),
          r.standard_normal((70, 70)).astype(dtype), ints((33, 33)), ints((2, 5, 19)), np.zeros((4, 4), dtype), nan,
          np.zeros((3, 0), dtype), np.zeros((2, 3, 0), dtype), np.zeros((0, 0), dtype)]

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_native_lu_matches_the_reference_bit_for_bit(cpu, x64, dtype):
  """lax.linalg.lu of float32 and float64 matrices is one LU node: on the CPU a C routine that goes in panels of
  columns (devices/cpu.py LINALG), on the PYTHON device numpy step by step (`lu_factor`). Every entry gets the same
  products subtracted in the same order, so both give the same bits: square, wide, tall and batched matrices,
  integer ones (ties in the pivot search, zero columns, singular blocks), NaNs (the first NaN is the pivot) and
  empty ones."""
  from tinyjx.lower.steps import LuStep
  f = tinyjx.jit(lax.linalg.lu)
  for a in _lu_cases(dtype):
    with tinyjx.Context(TINYJX_DEVICE='CPU'):
      got = [np.asarray(v) for v in f(a)]
      steps = f.lower(a).compile().executable.steps
    with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
      want = [np.asarray(v) for v in f(a)]
    assert any(isinstance(s, LuStep) and s.native is not None for s in steps)
    for g, w in zip(got, want):
      assert g.dtype == w.dtype and g.shape == w.shape
      np.testing.assert_array_equal(g, w)
  assert ' lu ' in str(tinyjx.make_jaxpr(lax.linalg.lu)(_lu_cases(dtype)[1]))

def test_native_lu_under_vmap():
  """vmap of an LU node moves the batch axis to the front (`lu_batch`)."""
  a = rng(12).standard_normal((4, 3, 6, 6)).astype(np.float32)
  got = tinyjx.vmap(lax.linalg.lu, in_axes=1, out_axes=1)(a)
  for g, w in zip(got, lax.linalg.lu(a)): np.testing.assert_array_equal(np.asarray(g), np.asarray(w))

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_native_triangular_solves_match_the_reference_bit_for_bit(cpu, x64, dtype):
  """A triangular solve of float32 or float64 is one TRIANGULAR_SOLVE node (lower, left side; the other flags are
  flips and transposes around it): on the CPU a C routine (slabs of columns, rows four at a time), on the PYTHON
  device numpy row by row, the same products in the same order, so the same bits; batch dims broadcast."""
  from tinyjx.lower.steps import LowerSolveStep
  r = rng(13)
  for n, k, lb, bb in [(1, 1, (), ()), (7, 3, (), ()), (33, 70, (2,), (2,)), (40, 32, (), (3,)), (9, 1, (2,), ())]:
    l = (np.tril(r.standard_normal(lb + (n, n))) + 3 * np.eye(n)).astype(dtype)
    flags = [(True, True, False, False), (False, False, True, True), (True, False, True, False)]
    for left, lower, trans, unit in flags:
      b = r.standard_normal(bb + ((n, k) if left else (k, n))).astype(dtype)
      a = l if lower else np.swapaxes(l, -1, -2)
      f = tinyjx.jit(lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left, lower=lower, transpose_a=trans,
                                                              unit_diagonal=unit))
      with tinyjx.Context(TINYJX_DEVICE='CPU'):
        got = np.asarray(f(a, b))
        steps = f.lower(a, b).compile().executable.steps
      with tinyjx.Context(TINYJX_DEVICE='PYTHON'):
        want = np.asarray(f(a, b))
      assert any(isinstance(s, LowerSolveStep) and s.native is not None for s in steps)
      np.testing.assert_array_equal(got, want)

def test_triangular_solve_node_derivatives_and_vmap(x64):
  """The TRIANGULAR_SOLVE node's own rules: jvp and vjp (first and second order) against finite differences, and
  vmap with either operand unbatched."""
  l = np.tril(rng(14).standard_normal((4, 4))) + 3 * np.eye(4)
  b = rng(15).standard_normal((4, 2))
  for unit in (False, True):
    check_grads(lambda l, b: lax_linalg.lower_solve_node(l, b, unit), (l, b), order=2, modes=('fwd', 'rev'))
  ls = np.stack([l, 2 * l, l + np.eye(4)])
  want = np.stack([np.linalg.solve(np.tril(m), b) for m in ls])
  close(tinyjx.vmap(lambda m: lax_linalg.lower_solve_node(m, b, False))(ls), want, 1e-10)
  close(tinyjx.vmap(lambda v: lax_linalg.lower_solve_node(l, v, False), in_axes=1, out_axes=1)(np.stack([b, 2 * b], 1)),
        np.stack([np.linalg.solve(l, b), np.linalg.solve(l, 2 * b)], 1), 1e-10)

def test_singular_matrices():
  s = np.array([[1., 2.], [2., 4.]], np.float32)
  assert float(jnp.linalg.det(s)) == 0.0
  sign, logdet = jnp.linalg.slogdet(s)
  assert float(sign) == 0.0 and float(logdet) == -np.inf
  assert np.isnan(np.asarray(jnp.linalg.cholesky(-np.eye(2, dtype=np.float32)))).any()

def test_pinv_matrix_power_rank_lstsq():
  a = general((6, 4), seed=8)
  close(jnp.linalg.pinv(a), np.linalg.pinv(a), 1e-5)
  sq = general((3, 3), seed=9)
  for p in (0, 1, 2, 5, -1, -3):
    close(jnp.linalg.matrix_power(sq, p), np.linalg.matrix_power(sq.astype(np.float64), p), 1e-4 * 3 ** abs(p))
  assert jnp.linalg.matrix_power(np.arange(4, dtype=np.int32).reshape(2, 2), 3).dtype == jnp.int32
  assert int(jnp.linalg.matrix_rank(a)) == 4 and int(jnp.linalg.matrix_rank(np.zeros((3, 3)))) == 0
  b = general((6, 2), seed=10)
  x, resid, rank, s = jnp.linalg.lstsq(a, b)
  x0, resid0, rank0, s0 = np.linalg.lstsq(a, b, rcond=None)
  close(x, x0, 1e-5)
  close(resid, resid0, 1e-4)
  assert int(rank) == rank0
  close(s, s0, 1e-5)
  assert jnp.linalg.lstsq(a, b[:, 0])[0].shape == (4,)

# ---------------------------------------------------------------- batch dims

def test_batch_dims_match_numpy():
  a, g = spd(3, (2, 3)), general((2, 3, 3, 3))
  b = general((2, 3, 3, 2), seed=2)
  close(jnp.linalg.cholesky(a), np.linalg.cholesky(a), 1e-4)
  close(jnp.linalg.solve(g, b), np.linalg.solve(g, b), 1e-4)
  close(jnp.linalg.solve(g, b[0, 0]), np.linalg.solve(g, b[0, 0]), 1e-4)       # b broadcasts over a's batch
  close(jnp.linalg.inv(g), np.linalg.inv(g), 1e-4)
  close(jnp.linalg.det(g), np.linalg.det(g), 1e-3)
  close(jnp.linalg.slogdet(g)[1], np.linalg.slogdet(g)[1], 1e-5)
  close(jnp.linalg.eigvalsh(a), np.linalg.eigvalsh(a), 1e-4)
  tall = general((2, 3, 5, 3), seed=3)
  close(jnp.linalg.svd(tall, compute_uv=False), np.linalg.svd(tall, compute_uv=False), 1e-5)
  close(jnp.linalg.qr(tall).R, np.linalg.qr(tall).R, 1e-5)
  close(sl.lu_factor(g)[0], np.stack([np.stack([numpy_lu(m)[0] for m in row]) for row in g]), 1e-5)

# ---------------------------------------------------------------- the blocked Cholesky (n > BLOCK), compiled

def test_blocked_cholesky_n64_compiled(cpu):
  assert 64 > lax_linalg.BLOCK
  a = spd(64, seed=11)
  want = np.linalg.cholesky(a.astype(np.float64))
  f = tinyjx.jit(lambda a: jnp.linalg.cholesky(a))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got_cpu = np.asarray(f(a))
  got_py = np.asarray(f(a))
  close(got_cpu, want, 1e-5 * scale(want))
  close(got_cpu, got_py, 1e-5 * scale(want))
  close(jnp.linalg.eigvalsh(a), np.linalg.eigvalsh(a.astype(np.float64)), 2e-5 * scale(a))

def test_blocked_cholesky_pads_and_takes_hermitian_panels(cpu, x64):
  """The panels' diagonal blocks by columns and the rows below by one matmul with the block's inverse: n = 100
  (the last panel padded) in float64, and a complex Hermitian n = 40, on the compiled CPU against numpy."""
  a = spd(100, dtype=np.float64, seed=12)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    close(jnp.linalg.cholesky(a), np.linalg.cholesky(a), 1e-12 * scale(a))
    x = rng(13).standard_normal((40, 40)) + 1j * rng(14).standard_normal((40, 40))
    h = (x @ x.conj().T + 40 * np.eye(40)).astype(np.complex64)
    close(lax.linalg.cholesky(h), np.linalg.cholesky(h.astype(np.complex128)), 1e-5 * scale(h))

# ---------------------------------------------------------------- blocked triangular solves (n > BLOCK)

def triangle(n, lower, unit, seed, dtype=np.float32):
  """A well-conditioned triangle: off-diagonal entries of size 1/sqrt(n), a diagonal of 2 (or 1 when unit)."""
  off = rng(seed).standard_normal((n, n)) / np.sqrt(n)
  t = (np.tril(off, -1) if lower else np.triu(off, 1)) + (1 if unit else 2) * np.eye(n)
  return t.astype(dtype)

@pytest.mark.parametrize('n, flags', [(33, (True, True, False, False)), (64, (False, False, True, True)),
                                      (100, (True, False, True, False)), (100, (False, True, False, True)),
                                      (257, (True, True, False, True)), (257, (False, True, True, False))])
def test_blocked_triangular_solve_matches_numpy_compiled(cpu, n, flags):
  """Past BLOCK rows a triangular solve goes by blocks of rows (the diagonal blocks' inverses in one loop, then a
  matmul per block); sizes a multiple of the block and not (the last block padded), every flag, on the compiled
  CPU against numpy. The unread triangle holds garbage."""
  lower, left_side, transpose_a, unit = flags
  assert n > lax_linalg.BLOCK
  t = triangle(n, lower, unit, seed=n)
  a = t + 50 * (np.triu(np.ones((n, n)), 1) if lower else np.tril(np.ones((n, n)), -1)).astype(np.float32)
  if unit: a = a + 7 * np.eye(n, dtype=np.float32)                    # the diagonal is not read either
  b = general((n, 5) if left_side else (5, n), seed=n + 1)
  op = (t.T if transpose_a else t).astype(np.float64)
  want = np.linalg.solve(op, b) if left_side else np.linalg.solve(op.T, b.T).T
  f = tinyjx.jit(lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower,
                                                          transpose_a=transpose_a, unit_diagonal=unit))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    close(f(a, b), want, 1e-5 * scale(want))

def test_blocked_solves_batch_float64_and_the_reference_device(cpu, x64):
  """The blocked path with batch dims on either operand (broadcast), in float64, through jnp.linalg.solve and inv
  (LU, then a unit lower and an upper solve), and on the PYTHON reference device as on the compiled CPU."""
  n = 70
  ls = np.stack([triangle(n, True, False, seed=s, dtype=np.float64) for s in (1, 2)])
  b = general((n, 3), np.float64, seed=3)
  got = lax.linalg.triangular_solve(ls, b, left_side=True, lower=True)
  close(got, np.linalg.solve(ls, np.broadcast_to(b, (2, n, 3))), 1e-12)
  bs = np.stack([b, 2 * b, -b])
  close(lax.linalg.triangular_solve(ls[0], bs, left_side=True, lower=True), np.linalg.solve(ls[0], bs), 1e-12)
  g, v = general((2, n, n), np.float64, seed=4) + 8 * np.eye(n), general((2, n, 2), np.float64, seed=5)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    x_cpu, inv_cpu = np.asarray(jnp.linalg.solve(g, v)), np.asarray(jnp.linalg.inv(g))
  close(x_cpu, np.linalg.solve(g, v), 1e-11)
  close(inv_cpu, np.linalg.inv(g), 1e-11)
  close(jnp.linalg.solve(g, v), x_cpu, 1e-11)

def test_blocked_triangular_solve_gradients_and_vmap(x64):
  """Derivatives through the blocked path (its loop inverts the diagonal blocks, linear in b) against finite
  differences, and vmap against a loop."""
  n = 40
  t = triangle(n, True, False, seed=8, dtype=np.float64)
  b = general((n, 2), np.float64, seed=9)
  solve = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True)
  check_grads(solve, (t, b), order=1, modes=('fwd', 'rev'))
  bs = np.stack([b, 3 * b + 1])
  close(tinyjx.vmap(solve, in_axes=(None, 0))(t, bs), np.stack([np.linalg.solve(t, x) for x in bs]), 1e-12)

# ---------------------------------------------------------------- gradients (float64)

def wide_svd_term(a):
  u, s, vh = jnp.linalg.svd(a, full_matrices=False)
  return u[0][:, None] * vh, s    # sign-invariant: each u_i, v_i pair flips together

def eigh_term(a):
  w, v = jnp.linalg.eigh(a)
  return w, v * v[0:1]            # sign-invariant products of eigenvector entries

GRAD_CASES = {
  'cholesky': (lambda a: jnp.linalg.cholesky(a), lambda: (spd(4, dtype=np.float64),)),
  'solve': (jnp.linalg.solve, lambda: (general((4, 4), np.float64), general((4, 2), np.float64, 2))),
  'inv': (jnp.linalg.inv, lambda: (general((4, 4), np.float64),)),
  'det': (jnp.linalg.det, lambda: (general((4, 4), np.float64),)),
  'slogdet': (lambda a: jnp.linalg.slogdet(a).logabsdet, lambda: (general((4, 4), np.float64),)),
  'eigh': (eigh_term, lambda: (spd(4, dtype=np.float64),)),
  'qr': (lambda a: tuple(jnp.linalg.qr(a)), lambda: (general((6, 3), np.float64),)),
  'svd_s': (lambda a: jnp.linalg.svd(a, compute_uv=False), lambda: (general((5, 3), np.float64),)),
  'svd_tall': (lambda a: wide_svd_term(a.T), lambda: (general((3, 5), np.float64),)),
  'svd_wide': (wide_svd_term, lambda: (general((3, 5), np.float64),)),
  'triangular_solve': (lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
                       lambda: (np.tril(general((4, 4), np.float64)), general((4, 2), np.float64, 2))),
  'triangular_solve_right_upper_T': (
      lambda a, b: lax.linalg.triangular_solve(a, b, lower=False, transpose_a=True),
      lambda: (np.triu(general((4, 4), np.float64)), general((2, 4), np.float64, 2))),
  'lu': (lambda a: lax.linalg.lu(a)[0], lambda: (general((4, 4), np.float64),)),
  'cho_solve': (lambda a, b: sl.cho_solve(sl.cho_factor(a), b),
                lambda: (spd(4, dtype=np.float64), general((4, 2), np.float64, 2))),
  'pinv': (jnp.linalg.pinv, lambda: (general((5, 3), np.float64),)),
}

@pytest.mark.usefixtures('x64')
@pytest.mark.parametrize('name', sorted(GRAD_CASES))
def test_grads_against_finite_differences(name):
  f, args = GRAD_CASES[name]
  check_grads(f, args(), order=1, modes=('fwd', 'rev'))

@pytest.mark.usefixtures('x64')
def test_second_order_and_closed_forms():
  a = general((3, 3), np.float64)
  check_grads(lambda a: jnp.linalg.det(a), (a,), order=2)
  check_grads(lambda a: jnp.sum(jnp.linalg.cholesky(a)), (spd(3, dtype=np.float64),), order=2, modes=('rev',))
  close(tinyjx.grad(jnp.linalg.det)(a), np.linalg.det(a) * np.linalg.inv(a).T, 1e-10)
  close(tinyjx.grad(lambda a: jnp.linalg.slogdet(a)[1])(a), np.linalg.inv(a).T, 1e-10)
  s = spd(3, dtype=np.float64)
  w, v = np.linalg.eigh(s)
  close(tinyjx.grad(lambda a: jnp.linalg.eigvalsh(a)[-1])(s), np.outer(v[:, -1], v[:, -1]), 1e-8)

# ---------------------------------------------------------------- vmap against a loop

VMAP_CASES = {
  'cholesky': (jnp.linalg.cholesky, lambda: spd(3, (3,))),
  'inv': (jnp.linalg.inv, lambda: general((3, 4, 4))),
  'det': (jnp.linalg.det, lambda: general((3, 4, 4))),
  'eigh': (lambda a: eigh_term(a), lambda: spd(4, (3,))),
  'qr': (lambda a: tuple(jnp.linalg.qr(a)), lambda: general((3, 5, 3))),
  'svd': (lambda a: wide_svd_term(a), lambda: general((3, 3, 5))),
  'lu': (lambda a: lax.linalg.lu(a), lambda: general((3, 4, 4))),
  'grad_slogdet': (tinyjx.grad(lambda a: jnp.linalg.slogdet(a)[1]), lambda: general((3, 3, 3))),
}

@pytest.mark.parametrize('name', sorted(VMAP_CASES))
def test_vmap_against_loop(name):
  f, xs = VMAP_CASES[name]
  xs = xs()
  got = tinyjx.vmap(f)(xs)
  want = [f(x) for x in xs]
  flat_got = tinyjx.tree_util.tree_leaves(got)
  for i, leaf in enumerate(flat_got):
    close(leaf, np.stack([np.asarray(tinyjx.tree_util.tree_leaves(w)[i]) for w in want]), 1e-5)

def test_vmap_solve_with_unbatched_b():
  g, b = general((3, 4, 4)), general((4, 2), seed=2)
  close(tinyjx.vmap(jnp.linalg.solve, in_axes=(0, None))(g, b), np.linalg.solve(g, b), 1e-5)

def test_jvp_against_vjp():
  a, t, ct = general((4, 4), seed=12), general((4, 4), seed=13), general((4, 4), seed=14)
  for f in (jnp.linalg.inv, lambda a: jnp.linalg.cholesky(a @ a.T)):
    _, jv = tinyjx.jvp(f, (a,), (t,))
    _, pull = tinyjx.vjp(f, a)
    lhs = float(np.sum(np.asarray(pull(ct)[0]) * t))
    assert abs(lhs - float(np.sum(np.asarray(jv) * ct))) < 1e-3 * max(1.0, abs(lhs))

# ---------------------------------------------------------------- jit: compiled CPU against the PYTHON reference

def everything(a, g, b, tall):
  w, v = jnp.linalg.eigh(a)
  u, s, vh = jnp.linalg.svd(tall)
  q, r = jnp.linalg.qr(tall)
  return dict(chol=jnp.linalg.cholesky(a), solve=jnp.linalg.solve(g, b), inv=jnp.linalg.inv(g),
              det=jnp.linalg.det(g), slogdet=jnp.linalg.slogdet(g)[1], w=w, vv=v * v[0:1], s=s,
              usv=(u[:, :3] * s) @ vh, q=q, r=r, lu=lax.linalg.lu(g)[0],
              tri=lax.linalg.triangular_solve(g, b, left_side=True, lower=True),
              cho=sl.cho_solve(sl.cho_factor(a), b), grad_det=tinyjx.grad(jnp.linalg.det)(g))

def test_jit_cpu_matches_python_device(cpu):
  args = (spd(5), general((5, 5)), general((5, 2), seed=2), general((6, 3), seed=3))
  f = tinyjx.jit(everything)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = {k: np.asarray(v) for k, v in f(*args).items()}
  want = {k: np.asarray(v) for k, v in f(*args).items()}
  assert got.keys() == want.keys()
  for k in got:
    close(got[k], want[k], 1e-5 * scale(want[k]))
  close(got['w'], np.linalg.eigvalsh(args[0]), 1e-4)

# ---------------------------------------------------------------- scipy.linalg

def test_scipy_linalg():
  a, g = spd(4), general((4, 4))
  b, v = general((4, 2), seed=2), general((4,), seed=3)
  l0 = np.linalg.cholesky(a)
  close(sl.cholesky(a), l0.T, 1e-5 * scale(a))
  close(sl.cholesky(a, lower=True), l0, 1e-5 * scale(a))
  c, lower = sl.cho_factor(a)
  assert lower is False
  close(sl.cho_solve((c, lower), b), np.linalg.solve(a, b), 1e-5)
  close(sl.cho_solve(sl.cho_factor(a, lower=True), v), np.linalg.solve(a, v), 1e-5)
  up = np.triu(g)
  close(sl.solve_triangular(up, v), np.linalg.solve(up, v), 1e-5)
  close(sl.solve_triangular(up, b, trans='T'), np.linalg.solve(up.T, b), 1e-5)
  close(sl.solve_triangular(np.tril(g), b, lower=True, trans=1), np.linalg.solve(np.tril(g).T, b), 1e-5)
  for assume_a in ('gen', 'sym', 'pos'):
    close(sl.solve(a, b, assume_a=assume_a), np.linalg.solve(a, b), 1e-5)
  close(sl.solve(np.triu(a), v, assume_a='pos'), np.linalg.solve(a, v), 1e-5)     # reads the upper triangle
  close(sl.inv(g), np.linalg.inv(g), 1e-5)
  close(sl.det(g), np.linalg.det(g), 1e-4 * abs(np.linalg.det(g)))
  lu_piv = sl.lu_factor(g)
  close(sl.lu_solve(lu_piv, b), np.linalg.solve(g, b), 1e-5)
  close(sl.lu_solve(lu_piv, v, trans=1), np.linalg.solve(g.T, v), 1e-5)
  p, l, u = map(np.asarray, sl.lu(g))
  close(p @ l @ u, g, 1e-5)
  pl, u2 = sl.lu(g, permute_l=True)
  close(np.asarray(pl) @ np.asarray(u2), g, 1e-5)
  q, r = sl.qr(general((5, 3)))
  assert (q.shape, r.shape) == ((5, 5), (5, 3))
  assert [x.shape for x in sl.qr(general((5, 3)), mode='economic')] == [(5, 3), (3, 3)]
  (r_only,) = sl.qr(general((5, 3)), mode='r')
  close(r_only, r, 1e-6)
  w, vv = sl.eigh(a)
  close(w, np.linalg.eigvalsh(a), 1e-5 * scale(a))
  close(sl.eigh(np.tril(a), eigvals_only=True), np.linalg.eigvalsh(a), 1e-5 * scale(a))   # lower triangle read
  close(sl.svd(g, compute_uv=False), np.linalg.svd(g, compute_uv=False), 1e-5 * scale(g))
  assert [x.shape for x in sl.svd(general((5, 3)), full_matrices=False)] == [(5, 3), (3,), (3, 3)]

def test_eigh_uplo_and_symmetrize():
  a = spd(4)
  lower_only = np.tril(a) + 7 * np.triu(np.ones((4, 4)), 1)
  close(jnp.linalg.eigh(lower_only, symmetrize_input=False).eigenvalues, np.linalg.eigvalsh(a), 1e-4)
  close(jnp.linalg.eigvalsh(lower_only.T, UPLO='U', symmetrize_input=False), np.linalg.eigvalsh(a), 1e-4)
  close(jnp.linalg.eigvalsh(lower_only), np.linalg.eigvalsh((lower_only + lower_only.T) / 2), 1e-4)

# ---------------------------------------------------------------- dtypes and errors

def test_integer_inputs_promote_to_float():
  i = np.array([[2, 1], [1, 3]], np.int32)
  for out in (jnp.linalg.det(i), jnp.linalg.inv(i), jnp.linalg.cholesky(i), jnp.linalg.eigvalsh(i),
              jnp.linalg.svd(i, compute_uv=False), jnp.linalg.solve(i, np.array([1, 2])), jnp.linalg.qr(i).R):
    assert np.asarray(out).dtype == np.float32
  close(jnp.linalg.det(i), 5.0, 1e-5)

@pytest.mark.parametrize('call, words', [
  (lambda: jnp.linalg.cholesky(np.ones((2, 3))), ['cholesky', '(2, 3)', 'square']),
  (lambda: jnp.linalg.inv(np.ones(3)), ['inv', '(3,)']),
  (lambda: jnp.linalg.det(np.ones((2, 3))), ['det', '(2, 3)', 'qr, svd or lstsq']),
  (lambda: jnp.linalg.eigh(np.ones((2, 3))), ['eigh', '(2, 3)']),
  (lambda: jnp.linalg.solve(np.eye(3), np.ones(4)), ['solve', '(3, 3)', '(4,)']),
  (lambda: jnp.linalg.solve(np.eye(3)[None].repeat(2, 0), np.ones((2, 3))), ['solve', 'b[..., None]']),
  (lambda: lax.linalg.triangular_solve(np.eye(3), np.ones((4, 2)), left_side=True), ['triangular_solve', '(4, 2)']),
  (lambda: lax.linalg.triangular_solve(np.eye(3), np.ones(3)), ['triangular_solve', 'b[..., None]']),
  (lambda: jnp.linalg.qr(np.eye(3), mode='raw'), ['qr', "'raw'"]),
  (lambda: jnp.linalg.svd(np.ones(3)), ['svd', '(3,)']),
  (lambda: sl.solve_triangular(np.eye(2), np.ones(3)), ['solve_triangular', '(3,)']),
  (lambda: sl.solve(np.eye(2), np.ones(2), assume_a='banded'), ['assume_a', "'banded'"]),
  (lambda: jnp.linalg.eigh(np.eye(2), UPLO='X'), ['UPLO']),
])
def test_errors_name_function_shapes_and_fix(call, words):
  with pytest.raises(ValueError) as e:
    call()
  for w in words: assert w in str(e.value), (w, str(e.value))

def test_lists_refused_by_jnp_linalg_accepted_by_scipy():
  with pytest.raises(TypeError, match='jnp.linalg.det requires ndarray'):
    jnp.linalg.det([[1., 2.], [3., 4.]])
  with pytest.raises(TypeError, match='jnp.linalg.solve requires ndarray'):
    jnp.linalg.solve(np.eye(2), [1., 2.])
  close(sl.cholesky([[4., 0.], [0., 9.]]), np.diag([2., 3.]), 1e-6)

def test_unsupported_derivatives_say_so():
  a = general((3, 3))
  with pytest.raises(NotImplementedError, match='full_matrices=False'):
    tinyjx.grad(lambda a: jnp.sum(jnp.linalg.svd(a)[0]))(a)
  with pytest.raises(NotImplementedError, match="mode='reduced'"):
    tinyjx.grad(lambda a: jnp.sum(jnp.linalg.qr(a, mode='complete')[0]))(general((4, 3)))
  with pytest.raises(TypeError, match='float'):
    jnp.linalg.det(np.array([['a']]))

def test_namespaces():
  import tinyjx.lax.linalg as by_import
  import tinyjx.scipy
  from tinyjx.lax import linalg as by_from
  assert by_import is by_from is lax.linalg is lax_linalg and tinyjx.scipy.linalg is sl
  for name in linalg_decomp.__all__: assert getattr(jnp.linalg, name) is getattr(linalg_decomp, name)
  with pytest.raises(AttributeError, match='jnp.linalg'):
    jnp.linalg.no_such_function

def test_doctests():
  for module in (lax_linalg, linalg_decomp, sl):
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__


# ---------------------------------------------------------------- complex Cholesky

@pytest.mark.parametrize('n', [3, 40])
def test_complex_cholesky_against_numpy(n):
  """Hermitian positive-definite input, column-wise (n <= 32) and blocked: L @ L^H, upper and scipy's upper U^H U."""
  rng = np.random.default_rng(n)
  b = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
  a = (b @ b.conj().T + n * np.eye(n)).astype(np.complex64)
  want = np.linalg.cholesky(a.astype(np.complex128))
  l = jnp.linalg.cholesky(jnp.asarray(a))
  assert l.dtype == jnp.complex64
  np.testing.assert_allclose(np.asarray(l), want, rtol=1e-5, atol=1e-5 * np.sqrt(n))
  np.testing.assert_allclose(np.asarray(jnp.linalg.cholesky(jnp.asarray(a), upper=True)), want.conj().T,
                             rtol=1e-5, atol=1e-5 * np.sqrt(n))
  np.testing.assert_allclose(np.asarray(sl.cholesky(jnp.asarray(a))), want.conj().T, rtol=1e-5, atol=1e-5 * np.sqrt(n))

def test_complex_cholesky_holomorphic_gradient_as_jax():
  """The autodiff cookbook's example; JAX 0.10.2's result written in as data."""
  A = jnp.array([[5., 2. + 3j, 5j], [2. - 3j, 7., 1. + 7j], [-5j, 1. - 7j, 12.]])
  def f(X):
    L = jnp.linalg.cholesky(X)
    return jnp.sum((L - jnp.sin(L)) ** 2)
  jax_says = np.array([[-0.75341904 + 0j, -3.0509028 - 10.940545j, 5.9896846 + 3.5423026j],
                       [-3.0509028 + 10.940545j, -8.904491 + 0j, -5.1351523 - 6.559373j],
                       [5.9896846 - 3.5423026j, -5.1351523 + 6.559373j, 0.01320427 + 0j]])
  got = tinyjx.grad(f, holomorphic=True)(A)
  assert got.dtype == jnp.complex64
  np.testing.assert_allclose(np.asarray(got), jax_says, rtol=2e-5, atol=2e-6)

def test_complex_cholesky_jvp_against_finite_differences():
  rng = np.random.default_rng(7)
  b = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
  a = jnp.asarray(b @ b.conj().T + 4 * np.eye(4), dtype=jnp.complex64)
  t = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
  t = jnp.asarray(t + t.conj().T, dtype=jnp.complex64)          # a Hermitian direction
  _, dl = tinyjx.jvp(jnp.linalg.cholesky, (a,), (t,))
  eps = 1e-3
  fd = (np.linalg.cholesky(np.asarray(a, np.complex128) + eps * np.asarray(t)) -
        np.linalg.cholesky(np.asarray(a, np.complex128) - eps * np.asarray(t))) / (2 * eps)
  np.testing.assert_allclose(np.asarray(dl), fd, rtol=2e-3, atol=2e-3)

def test_other_decompositions_refuse_complex_with_the_fix():
  a = jnp.eye(3, dtype=jnp.complex64)
  with pytest.raises(TypeError, match="complex64 is not supported.*only cholesky"):
    jnp.linalg.qr(a)
