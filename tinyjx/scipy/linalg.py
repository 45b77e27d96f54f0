"""tinyjx.scipy.linalg: `jax.scipy.linalg`'s factorizations and solvers, with scipy's conventions.

scipy's differ from numpy's: `cholesky` returns the upper factor unless `lower=True`, `qr` defaults to
mode='full' and returns a tuple even for mode='r', `eigh` returns (w, v), `lu` returns (p, l, u), and a 1-D `b`
is one right-hand side. The work is done by `tinyjx.lax.linalg` (loops with derivative rules); arguments that
only tune LAPACK (overwrite_a, check_finite, lwork, lapack_driver, ...) are accepted and ignored, as JAX does.
"""
from __future__ import annotations
from tinyjx.array import Array
import tinyjx.numpy as jnp
from tinyjx.lax import linalg as ll
from tinyjx.lax.linalg import as_float_matrix, mT
from tinyjx.numpy import linalg_decomp as nl

__all__ = ['cholesky', 'cho_factor', 'cho_solve', 'solve_triangular', 'solve', 'inv', 'det', 'lu', 'lu_factor',
           'lu_solve', 'qr', 'eigh', 'svd']

def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Array:
  """Cholesky factor of the symmetric (complex: Hermitian) positive-definite a (..., n, n): upper U with
  a = U^H @ U, or lower L with a = L @ L^H when `lower=True` (^H: the transpose, conjugated for complex a).

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg
  >>> tinyjx.scipy.linalg.cholesky(jnp.array([[4., 2.], [2., 5.]])).tolist()
  [[2.0, 1.0], [0.0, 2.0]]
  """
  l = ll.cholesky(as_float_matrix(a, "scipy.linalg.cholesky", complex_ok=True))
  return l if lower else ll.mH(l)

def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Array, bool]:
  """(c, lower) for `cho_solve`: c is the Cholesky factor (upper unless `lower`), zeros in the other triangle.

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg
  >>> tinyjx.scipy.linalg.cho_factor(jnp.array([[4., 2.], [2., 5.]]))[1]
  False
  """
  return cholesky(a, lower=lower), lower

def rhs(b, n: int, fn: str, dtype) -> tuple[Array, bool]:
  """b as (..., n, k) in `dtype`, and whether it was one vector (n,) (scipy's rule)."""
  b = jnp.asarray(b)
  vector = b.ndim == 1
  if b.ndim == 0 or b.shape[-1 if vector else -2] != n:
    raise ValueError(f"{fn}: the matrix has {n} rows, so b must have shape ({n},) or (..., {n}, k), got b of shape "
                     f"{b.shape}")
  b = jnp.astype(b, dtype)
  return (b[:, None] if vector else b), vector

def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True) -> Array:
  """x with a @ x = b, given `cho_factor(a)`'s (c, lower): two triangular solves.

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> [round(v, 4) for v in sl.cho_solve(sl.cho_factor(jnp.array([[4., 2.], [2., 5.]])), jnp.array([6., 7.])).tolist()]
  [1.0, 1.0]
  """
  c, lower = c_and_lower
  c = as_float_matrix(c, "scipy.linalg.cho_solve")
  b2, vector = rhs(b, c.shape[-1], "scipy.linalg.cho_solve", c.dtype)
  y = ll.triangular_solve(c, b2, left_side=True, lower=lower, transpose_a=not lower)
  x = ll.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower)
  return x[..., 0] if vector else x

TRANS = {0: False, 'N': False, 1: True, 'T': True, 2: True, 'C': True}

def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False, overwrite_b: bool = False,
                     debug=None, check_finite: bool = True) -> Array:
  """x with op(a) @ x = b for triangular a (..., n, n): op is a itself (trans=0 or 'N') or a.T (1, 'T', 2, 'C');
  only the `lower` (or upper) triangle of a is read; b is (n,) or (..., n, k).

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> sl.solve_triangular(jnp.array([[2., 1.], [0., 1.]]), jnp.array([4., 2.])).tolist()
  [1.0, 2.0]
  """
  if trans not in TRANS:
    raise ValueError(f"scipy.linalg.solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
  a = as_float_matrix(a, "scipy.linalg.solve_triangular")
  b2, vector = rhs(b, a.shape[-1], "scipy.linalg.solve_triangular", a.dtype)
  x = ll.triangular_solve(a, b2, left_side=True, lower=lower, transpose_a=TRANS[trans], unit_diagonal=unit_diagonal)
  return x[..., 0] if vector else x

def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False, debug: bool = False,
          check_finite: bool = True, assume_a: str = 'gen') -> Array:
  """x with a @ x = b: LU with partial pivoting (assume_a 'gen', 'sym' or 'her') or Cholesky ('pos', reading the
  `lower` or upper triangle); b is (n,) or (..., n, k).

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> [round(v, 4) for v in sl.solve(jnp.array([[4., 2.], [2., 5.]]), jnp.array([6., 7.]), assume_a='pos').tolist()]
  [1.0, 1.0]
  """
  if assume_a not in ('gen', 'sym', 'her', 'pos'):
    raise ValueError(f"scipy.linalg.solve: assume_a must be 'gen', 'sym', 'her' or 'pos', got {assume_a!r}")
  a = as_float_matrix(a, "scipy.linalg.solve")
  if assume_a != 'pos':
    b2, vector = rhs(b, a.shape[-1], "scipy.linalg.solve", a.dtype)
    return nl.solve(a, b2)[..., 0] if vector else nl.solve(a, b2)
  tri = jnp.tril(a) if lower else jnp.triu(a)
  full = tri + mT(tri) - tri * jnp.eye(a.shape[-1], dtype=a.dtype)
  return cho_solve((ll.cholesky(full, symmetrize_input=False), True), b)

def inv(a, overwrite_a: bool = False, check_finite: bool = True) -> Array:
  """The inverse of the square a (..., n, n), as `jnp.linalg.inv`.

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> sl.inv(jnp.array([[2., 0.], [0., 4.]])).tolist()
  [[0.5, 0.0], [0.0, 0.25]]
  """
  return nl.inv(a)

def det(a, overwrite_a: bool = False, check_finite: bool = True) -> Array:
  """The determinant of the square a (..., n, n), as `jnp.linalg.det`.

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> float(sl.det(jnp.array([[2., 0.], [0., 4.]])))
  8.0
  """
  return nl.det(a)

def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Array, Array]:
  """(lu, piv) of a (..., n, n) for `lu_solve`: L (unit diagonal) below and U on and above the diagonal of lu; row i
  was swapped with row piv[i] (int32).

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> sl.lu_factor(jnp.array([[1., 2.], [3., 4.]]))[1].tolist()
  [1, 1]
  """
  lu_, piv, _ = ll.lu(as_float_matrix(a, "scipy.linalg.lu_factor", square=False))
  return lu_, piv

def lu_solve(lu_and_piv, b, trans: int = 0, overwrite_b: bool = False, check_finite: bool = True) -> Array:
  """x with a @ x = b (trans=0) or a.T @ x = b (trans=1 or 2), given `lu_factor(a)`; b is (n,) or (..., n, k).

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> [round(v, 4) for v in sl.lu_solve(sl.lu_factor(jnp.array([[1., 2.], [3., 4.]])), jnp.array([5., 11.])).tolist()]
  [1.0, 2.0]
  """
  if trans not in (0, 1, 2):
    raise ValueError(f"scipy.linalg.lu_solve: trans must be 0, 1 or 2, got {trans!r}")
  lu_, piv = lu_and_piv
  lu_ = as_float_matrix(lu_, "scipy.linalg.lu_solve")
  b2, vector = rhs(b, lu_.shape[-1], "scipy.linalg.lu_solve", lu_.dtype)
  perm = ll.lu_pivots_to_permutation(piv, lu_.shape[-1])
  if trans == 0:
    y = ll.triangular_solve(lu_, ll.permute_rows(b2, perm), left_side=True, lower=True, unit_diagonal=True)
    x = ll.triangular_solve(lu_, y, left_side=True, lower=False)
  else:   # a[perm] = L U, so a^T x = b is U^T L^T x[perm] = b
    y = ll.triangular_solve(lu_, b2, left_side=True, lower=False, transpose_a=True)
    z = ll.triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
    x = ll.permute_rows(z, jnp.argsort(perm, axis=-1).astype(jnp.int32))
  return x[..., 0] if vector else x

def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
  """(p, l, u) with a = p @ l @ u for a (..., m, n): p a permutation matrix, l unit lower (m, k), u upper (k, n);
  `permute_l=True` gives (p @ l, u).

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> sl.lu(jnp.array([[1., 2.], [3., 4.]]))[0].tolist()
  [[0.0, 1.0], [1.0, 0.0]]
  """
  a = as_float_matrix(a, "scipy.linalg.lu", square=False)
  lu_, _, perm = ll.lu(a)
  m, n = a.shape[-2:]
  k = min(m, n)
  l = jnp.tril(lu_[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
  u = jnp.triu(lu_[..., :k, :])
  p = mT((perm[..., :, None] == jnp.arange(m)).astype(a.dtype))    # a[perm] = l @ u, so a = p @ l @ u
  return (p @ l, u) if permute_l else (p, l, u)

def qr(a, overwrite_a: bool = False, lwork=None, mode: str = 'full', pivoting: bool = False,
       check_finite: bool = True) -> tuple:
  """QR decomposition of a (..., m, n) with scipy's modes: 'full' (Q (m, m), R (m, n)), 'economic' (Q (m, k),
  R (k, n)), 'r' ((R,), a one-tuple, R (m, n)).

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> [x.shape for x in sl.qr(jnp.ones((3, 2)), mode='economic')]
  [(3, 2), (2, 2)]
  """
  if mode not in ('full', 'economic', 'r'):
    raise ValueError(f"scipy.linalg.qr: mode={mode!r} is not supported; use 'full', 'economic' or 'r'")
  q, r = ll.qr(as_float_matrix(a, "scipy.linalg.qr", square=False), pivoting=pivoting,
               full_matrices=mode != 'economic')
  return (r,) if mode == 'r' else (q, r)

def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1,  # noqa: A002 - scipy's name
         check_finite: bool = True):
  """(w, v) of the symmetric a (..., n, n): eigenvalues ascending and eigenvectors as columns (`eigvals_only=True`:
  w alone). Only the `lower` (or upper) triangle is read. The generalized problem (b given) is not supported.

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> [round(v, 4) for v in sl.eigh(jnp.array([[2., 1.], [1., 2.]]), eigvals_only=True).tolist()]
  [1.0, 3.0]
  """
  if b is not None or eigvals is not None:
    raise NotImplementedError("scipy.linalg.eigh: the generalized problem (b=...) and eigvals= are not supported in "
                              "tinyjx; for b positive definite, solve with L^-1 a L^-T, L = cholesky(b, lower=True)")
  v, w = ll.eigh(as_float_matrix(a, "scipy.linalg.eigh"), lower=lower, symmetrize_input=False)
  return w if eigvals_only else (w, v)

def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False, check_finite: bool = True,
        lapack_driver: str = 'gesdd'):
  """(U, s, Vh) of a (..., m, n), s descending (`compute_uv=False`: s alone), as `jnp.linalg.svd`.

  >>> import tinyjx.numpy as jnp, tinyjx.scipy.linalg as sl
  >>> [round(v, 4) for v in sl.svd(jnp.array([[3., 0.], [0., -4.]]), compute_uv=False).tolist()]
  [4.0, 3.0]
  """
  out = ll.svd(as_float_matrix(a, "scipy.linalg.svd", square=False), full_matrices=full_matrices,
               compute_uv=compute_uv)
  return out if not compute_uv else tuple(out)
