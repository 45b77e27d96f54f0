"""jnp.linalg's decompositions and solvers: cholesky, solve, inv, det, slogdet, qr, eigh, eigvalsh, svd, pinv,
matrix_power, matrix_rank, lstsq (reached as `jnp.linalg.<name>`; `tinyjx/numpy/linalg.py` loads this module on
first use, since it builds on `lax.linalg`, which imports `tinyjx.numpy`).

Everything here is argument handling (numpy's conventions: batch dims lead, a 1-D `b` is a vector) around the
factorizations of `tinyjx.lax.linalg`, whose loops and derivative rules do the work. Results that numpy returns as
named tuples (`SlogdetResult`, `QRResult`, `EighResult`, `SVDResult`) are named tuples here too. Array arguments
are arrays or scalars: a list is a TypeError, as in JAX (scipy.linalg accepts lists, as JAX's does).
"""
from __future__ import annotations
import operator
from typing import NamedTuple
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.numpy import base as jnp
from tinyjx.lax import linalg as ll
from tinyjx.lax.linalg import as_float_matrix, mT
from tinyjx.numpy.core import check_arraylike, from_parts

__all__ = ['cholesky', 'solve', 'inv', 'det', 'slogdet', 'qr', 'eigh', 'eigvalsh', 'svd', 'svdvals', 'pinv',
           'matrix_power', 'matrix_rank', 'lstsq', 'SlogdetResult', 'QRResult', 'EighResult', 'SVDResult']

class SlogdetResult(NamedTuple):
  sign: Array
  logabsdet: Array

class QRResult(NamedTuple):
  Q: Array
  R: Array

class EighResult(NamedTuple):
  eigenvalues: Array
  eigenvectors: Array

class SVDResult(NamedTuple):
  U: Array
  S: Array
  Vh: Array

def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True) -> Array:
  """Cholesky factor of the symmetric (complex: Hermitian) positive-definite a (..., n, n): lower L with
  a = L @ L^H (`upper=True`: U = L^H, a = U^H @ U); L^H is L.T for real a. Not positive definite: NaNs, as JAX.

  >>> import tinyjx.numpy as jnp
  >>> jnp.linalg.cholesky(jnp.array([[4., 2.], [2., 5.]])).tolist()
  [[2.0, 0.0], [1.0, 2.0]]
  """
  check_arraylike("jnp.linalg.cholesky", a)
  l = ll.cholesky(as_float_matrix(a, "jnp.linalg.cholesky", complex_ok=True), symmetrize_input=symmetrize_input)
  return ll.mH(l) if upper else l

def solve_operands(a, b, fn: str) -> tuple[Array, Array, bool]:
  """(a, b as (..., n, k), whether b was a vector) in one float dtype; numpy's rule: only a 1-D b is a vector."""
  a = as_float_matrix(a, fn)
  b = jnp.asarray(b)
  if b.ndim == 0:
    raise ValueError(f"{fn}: b must be a vector (n,) or matrices (..., n, k), got a scalar; a has shape {a.shape}")
  vector = b.ndim == 1
  n = a.shape[-1]
  if b.shape[-1 if vector else -2] != n:
    want = f"({n},)" if vector else f"(..., {n}, k)"
    tip = (f"; for a batch of vectors of shape {b.shape} write solve(a, b[..., None])[..., 0]"
           if not vector and b.shape[-1] == n else "")
    raise ValueError(f"{fn}: a of shape {a.shape} needs b of shape {want}, got b of shape {b.shape}{tip}")
  dt = jnp.promote_types(a.dtype, b.dtype) if dtypes.is_float(b.dtype) else a.dtype
  b = jnp.astype(b, dt)[..., None] if vector else jnp.astype(b, dt)
  return jnp.astype(a, dt), b, vector

def solve(a, b) -> Array:
  """x with a @ x = b, by LU with partial pivoting: a (..., n, n); b a vector (n,) or matrices (..., n, k), batch
  dims broadcast (as numpy 2 and JAX: a stack of vectors is b[..., None]).

  >>> import tinyjx.numpy as jnp
  >>> [round(v, 4) for v in jnp.linalg.solve(jnp.array([[2., 1.], [1., 3.]]), jnp.array([3., 5.])).tolist()]
  [0.8, 1.4]
  """
  check_arraylike("jnp.linalg.solve", a, b)
  if jnp.iscomplexobj(a) or jnp.iscomplexobj(b): return complex_solve(a, b)
  a, b, vector = solve_operands(a, b, "jnp.linalg.solve")
  x = ll.solve_via_lu(a, jnp.broadcast_to(b, jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:]))
  return x[..., 0] if vector else x

def complex_solve(a, b) -> Array:
  """`solve` for complex operands, as the real system of twice the size: (Ar + i Ai)(Xr + i Xi) = Br + i Bi is
  [[Ar, -Ai], [Ai, Ar]] [Xr; Xi] = [Br; Bi] (so it compiles, differentiates and batches as the real solve does)."""
  a, b = jnp.asarray(a), jnp.asarray(b)
  dt = dtypes.complex_dtype(dtypes.real_dtype(jnp.result_type(a, b, 1.0)))
  a, b = a.astype(dt), b.astype(dt)
  _, _, vector = solve_operands(jnp.real(a), jnp.real(b), "jnp.linalg.solve")   # shapes checked as for real ones
  if vector: b = b[:, None]
  ar, ai, br, bi = jnp.real(a), jnp.imag(a), jnp.real(b), jnp.imag(b)
  big = jnp.concatenate([jnp.concatenate([ar, -ai], -1), jnp.concatenate([ai, ar], -1)], -2)
  x = solve(big, jnp.concatenate([br, bi], -2))
  n = a.shape[-1]
  out = from_parts(x[..., :n, :], x[..., n:, :])
  return out[..., 0] if vector else out

def inv(a) -> Array:
  """The inverse of a (..., n, n), by LU with partial pivoting (a singular matrix gives infs or NaNs).

  >>> import tinyjx.numpy as jnp
  >>> jnp.linalg.inv(jnp.array([[2., 0.], [0., 4.]])).tolist()
  [[0.5, 0.0], [0.0, 0.25]]
  """
  check_arraylike("jnp.linalg.inv", a)
  if jnp.iscomplexobj(a):
    a = jnp.asarray(a)
    return complex_solve(a, jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape))
  a = as_float_matrix(a, "jnp.linalg.inv")
  return ll.solve_via_lu(a, jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape))

def det(a) -> Array:
  """The determinant of a (..., n, n), from its LU factors.

  >>> import tinyjx.numpy as jnp
  >>> round(float(jnp.linalg.det(jnp.array([[1., 2.], [3., 4.]]))), 4)
  -2.0
  """
  check_arraylike("jnp.linalg.det", a)
  return ll.det_via_lu(as_float_matrix(a, "jnp.linalg.det"))

def slogdet(a, *, method=None) -> SlogdetResult:
  """(sign, log|det|) of a (..., n, n), from its LU factors: sign 0 and logabsdet -inf for a singular matrix.

  >>> import tinyjx.numpy as jnp
  >>> [round(float(v), 4) for v in jnp.linalg.slogdet(jnp.array([[1., 2.], [3., 4.]]))]
  [-1.0, 0.6931]
  """
  check_arraylike("jnp.linalg.slogdet", a)
  if method not in (None, 'lu'):
    raise ValueError(f"jnp.linalg.slogdet: method={method!r} is not supported; use method='lu' (or None)")
  return SlogdetResult(*ll.slogdet_via_lu(as_float_matrix(a, "jnp.linalg.slogdet")))

def qr(a, mode: str = 'reduced'):
  """QR decomposition of a (..., m, n) by Householder reflections (LAPACK's signs, so numpy's): mode 'reduced'
  (Q (..., m, k), R (..., k, n), k = min(m, n)), 'complete' (Q (..., m, m), R (..., m, n)) or 'r' (R alone).

  >>> import tinyjx.numpy as jnp
  >>> q, r = jnp.linalg.qr(jnp.array([[3., 1.], [4., 2.]]))
  >>> [round(v, 4) for v in q[:, 0].tolist()]
  [-0.6, -0.8]
  """
  check_arraylike("jnp.linalg.qr", a)
  if mode not in ('reduced', 'complete', 'r'):
    raise ValueError(f"jnp.linalg.qr: mode={mode!r} is not supported; use 'reduced', 'complete' or 'r'")
  q, r = ll.qr(as_float_matrix(a, "jnp.linalg.qr", square=False), full_matrices=mode == 'complete')
  return r if mode == 'r' else QRResult(q, r)

def uplo_lower(UPLO, fn: str) -> bool:
  if UPLO not in (None, 'L', 'U'): raise ValueError(f"{fn}: UPLO must be 'L' or 'U', got {UPLO!r}")
  return UPLO != 'U'

def eigh(a, UPLO=None, symmetrize_input: bool = True) -> EighResult:
  """Eigenvalues (ascending) and eigenvectors (columns) of the symmetric a (..., n, n), by Jacobi rotations.
  `symmetrize_input` uses (a + a.T) / 2; otherwise the triangle `UPLO` ('L', the default, or 'U') is read.

  >>> import tinyjx.numpy as jnp
  >>> [round(v, 4) for v in jnp.linalg.eigh(jnp.array([[2., 1.], [1., 2.]])).eigenvalues.tolist()]
  [1.0, 3.0]
  """
  check_arraylike("jnp.linalg.eigh", a)
  a = as_float_matrix(a, "jnp.linalg.eigh")
  v, w = ll.eigh(a, lower=uplo_lower(UPLO, "jnp.linalg.eigh"), symmetrize_input=symmetrize_input)
  return EighResult(w, v)

def eigvalsh(a, UPLO='L', *, symmetrize_input: bool = True) -> Array:
  """The eigenvalues (ascending) of the symmetric a (..., n, n).

  >>> import tinyjx.numpy as jnp
  >>> [round(v, 4) for v in jnp.linalg.eigvalsh(jnp.array([[2., 1.], [1., 2.]])).tolist()]
  [1.0, 3.0]
  """
  check_arraylike("jnp.linalg.eigvalsh", a)
  return eigh(a, UPLO, symmetrize_input).eigenvalues

def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False, subset_by_index=None):
  """Singular value decomposition of a (..., m, n) by one-sided Jacobi: (U, S, Vh) with S descending and
  a = U[..., :, :k] * S[..., None, :] @ Vh[..., :k, :]; `full_matrices=False` keeps k = min(m, n) columns of U and
  rows of Vh; `compute_uv=False` returns S alone. `hermitian` is accepted (the general method is used).

  >>> import tinyjx.numpy as jnp
  >>> [round(v, 4) for v in jnp.linalg.svd(jnp.array([[3., 0.], [0., -4.]])).S.tolist()]
  [4.0, 3.0]
  """
  check_arraylike("jnp.linalg.svd", a)
  a = as_float_matrix(a, "jnp.linalg.svd", square=False)
  out = ll.svd(a, full_matrices=full_matrices, compute_uv=compute_uv, subset_by_index=subset_by_index)
  return SVDResult(*out) if compute_uv else out

def svdvals(x) -> Array:
  """The singular values of x (..., m, n), descending.

  >>> import tinyjx.numpy as jnp
  >>> jnp.linalg.svdvals(jnp.array([[0., 2.], [1., 0.]])).tolist()
  [2.0, 1.0]
  """
  check_arraylike("jnp.linalg.svdvals", x)
  return svd(x, compute_uv=False)

def default_rtol(a: Array) -> float: return float(max(a.shape[-2:])) * float(jnp.finfo(a.dtype).eps)

def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None) -> Array:
  """The Moore-Penrose pseudo-inverse of a (..., m, n), from its SVD: singular values at most rtol * max(s) are
  dropped (rtol defaults to max(m, n) * eps; `rcond` is its older name).

  >>> import tinyjx.numpy as jnp
  >>> [[round(v, 4) for v in r] for r in jnp.linalg.pinv(jnp.array([[1., 0.], [0., 0.]])).tolist()]
  [[1.0, 0.0], [0.0, 0.0]]
  """
  check_arraylike("jnp.linalg.pinv", a)
  a = as_float_matrix(a, "jnp.linalg.pinv", square=False)
  rtol = rcond if rtol is None else rtol
  u, s, vh = svd(a, full_matrices=False)
  cutoff = (default_rtol(a) if rtol is None else jnp.asarray(rtol)[..., None]) * s[..., :1]
  keep = s > cutoff
  s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0)
  return (mT(vh) * s_inv[..., None, :]) @ mT(u)

def matrix_power(a, n: int) -> Array:
  """a multiplied by itself n times (n a Python int; n = 0 gives the identity, n < 0 powers the inverse), by
  repeated squaring.

  >>> import tinyjx.numpy as jnp
  >>> jnp.linalg.matrix_power(jnp.array([[1, 1], [0, 1]]), 3).tolist()
  [[1, 3], [0, 1]]
  """
  check_arraylike("jnp.linalg.matrix_power", a)
  try:
    n = operator.index(n)
  except TypeError:
    raise TypeError(f"jnp.linalg.matrix_power: the exponent must be a Python int, got {type(n).__name__}") from None
  x = jnp.asarray(a)
  if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
    raise ValueError(f"jnp.linalg.matrix_power: expected a square matrix (..., n, n), got shape {x.shape}")
  if n == 0: return jnp.broadcast_to(jnp.eye(x.shape[-1], dtype=x.dtype), x.shape)
  if n < 0: x, n = inv(x), -n
  out = None
  while n:
    if n & 1: out = x if out is None else out @ x
    n >>= 1
    if n: x = x @ x
  return out

def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None) -> Array:
  """The number of singular values of M (..., m, n) above tol (default rtol * max(s), rtol = max(m, n) * eps).

  >>> import tinyjx.numpy as jnp
  >>> int(jnp.linalg.matrix_rank(jnp.ones((3, 3))))
  1
  """
  check_arraylike("jnp.linalg.matrix_rank", M)
  a = as_float_matrix(M, "jnp.linalg.matrix_rank", square=False)
  s = svd(a, compute_uv=False)
  if tol is None:
    tol = (default_rtol(a) if rtol is None else jnp.asarray(rtol)[..., None]) * s[..., :1]
  else:
    tol = jnp.asarray(tol)[..., None]
  return jnp.sum(s > tol, axis=-1).astype(jnp.int32)

def lstsq(a, b, rcond=None, *, numpy_resid: bool = False) -> tuple:
  """Least-squares solution x of a @ x ~= b, from the SVD of a (m, n): (x, residuals, rank, s), b (m,) or (m, k).
  Singular values at most rcond * max(s) count as zero (rcond defaults to max(m, n) * eps). residuals are the
  squared 2-norms of b - a @ x per column, always (JAX's default); `numpy_resid=True` gives numpy's (empty unless
  m > n).

  >>> import tinyjx.numpy as jnp
  >>> [round(v, 4) for v in jnp.linalg.lstsq(jnp.array([[1., 0.], [0., 1.], [0., 0.]]),
  ...                                          jnp.array([1., 2., 3.]))[0].tolist()]
  [1.0, 2.0]
  """
  check_arraylike("jnp.linalg.lstsq", a, b)
  a = as_float_matrix(a, "jnp.linalg.lstsq", square=False)
  if a.ndim != 2: raise ValueError(f"jnp.linalg.lstsq: a must be a 2-D matrix (m, n), got shape {a.shape}")
  b = jnp.asarray(b)
  vector = b.ndim == 1
  if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
    raise ValueError(f"jnp.linalg.lstsq: a of shape {a.shape} needs b of shape ({a.shape[0]},) or "
                     f"({a.shape[0]}, k), got b of shape {b.shape}")
  b = jnp.astype(b, a.dtype)[:, None] if vector else jnp.astype(b, a.dtype)
  u, s, vh = svd(a, full_matrices=False)
  cutoff = (default_rtol(a) if rcond is None else float(rcond)) * s[..., :1]
  keep = s > cutoff
  s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0)
  x = mT(vh) @ (s_inv[:, None] * (mT(u) @ b))
  resid = jnp.sum((b - a @ x) ** 2, axis=0)
  if numpy_resid and a.shape[0] <= a.shape[1]: resid = jnp.zeros((0,), a.dtype)
  rank = jnp.sum(keep).astype(jnp.int32)
  return (x[:, 0] if vector else x), resid, rank, s
