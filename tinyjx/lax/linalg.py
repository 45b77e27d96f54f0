"""lax.linalg: matrix factorizations (cholesky, triangular_solve, lu, qr, eigh, svd) built from tinyjx's own ops.

Every factorization but one is a loop of masked whole-matrix (or whole-panel) updates written with `lax.fori_loop`,
so it lowers like any other program: the loop body is compiled once and runs as real loop iterations; nothing calls
numpy or LAPACK at run time. Inputs are (..., m, n) arrays: leading dims are batch dims and every update
broadcasts over them, so `vmap` batches the loops too. Integer inputs are promoted to the default float (as JAX).

Two are not, for float32 and float64: LU (an `Ops.LU` node, JAX's lu primitive) and the lower, left-side
triangular solve every solve reduces to (`Ops.TRIANGULAR_SOLVE`). Each is a runtime step that the CPU runs in C
(devices/cpu.py `LINALG`: LU panel by panel, the solve by slabs of columns, rows' updates held in registers) and
other devices through the PYTHON device's rule (`lu_factor`, `lower_solve`); both give the bits of the plain
step-by-step algorithm. A loop step cannot do that well: it updates the whole masked matrix at every step, where
LU touches only the shrinking trailing block. 256 x 256, against JAX through LAPACK: LU 3.0 ms as a `fori_loop`,
0.28 as a node (JAX 0.62-0.71); `jnp.linalg.solve` 4.2 -> 0.62 (JAX 1.25); `inv` 4.1 -> 0.60 (JAX 1.24). Other
dtypes (complex, through the complex split) keep the loops.

The algorithms: Cholesky by columns, and for n > BLOCK by panels of BLOCK columns (the panel's diagonal block by
columns, the rows below it with a matmul by that block's inverse) with one matmul per trailing update; triangular
solves by forward substitution, and for n > BLOCK by blocks of rows with matmuls (upper triangles are solved as
lower ones of the reversed matrix); LU with partial pivoting (LAPACK's pivot choice: the first entry of largest
magnitude); Householder QR with LAPACK's reflector convention (so signs match numpy); eigh by cyclic Jacobi in
round-robin order, n/2 disjoint rotations at a time, for a fixed number of sweeps; SVD by one-sided Jacobi in the
same order, then a Householder QR of the orthogonalized columns for U (complete and orthonormal even when A is
rank deficient).

Derivatives: each public function is a `custom_jvp` whose rule is the closed form (JAX's rules). A rule computes
its primal outputs with the public (custom) functions, so higher derivatives use the rules again, and its
tangents with the raw loops (`_..._raw`), which are linear in the tangent and transpose as scans.
"""
from __future__ import annotations
import functools
from dataclasses import dataclass
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.numpy import base as jnp
from tinyjx.transforms.control_flow import fori_loop, dynamic_index_in_dim, dynamic_slice_in_dim
from tinyjx.transforms.control_flow import dynamic_update_slice_in_dim
from tinyjx.transforms.custom import custom_jvp
from tinyjx.transforms import ad, batching
from tinyjx.transforms.control_flow import bind
from tinyjx.uop import UOp, Ops

BLOCK = 32          # Cholesky and triangular solves work in panels of this many columns once n exceeds it
PANELS = 8          # ... and of more where n > PANELS * BLOCK (a triangular solve: at most PANELS blocks)
SWEEPS = {4: 2, 8: 3}     # Jacobi sweeps past log2(n), by itemsize (float32, float64); the convergence is quadratic

__all__ = ['cholesky', 'triangular_solve', 'lu', 'lu_pivots_to_permutation', 'qr', 'eigh', 'svd']

# ---------------------------------------------------------------- argument checks and small helpers

def as_float_matrix(x, fn: str, square: bool = True, complex_ok: bool = False) -> Array:
  """`x` as a float (or, where `complex_ok`, complex) array of rank >= 2 (integers promote to the default float);
  square when `square`."""
  x = jnp.asarray(x)
  if x.dtype.kind not in 'fiub' and not (complex_ok and x.dtype.kind == 'c'):
    tip = (" (complex matrices: only cholesky, jnp.linalg.solve and inv take them)" if x.dtype.kind == 'c' else "")
    raise TypeError(f"{fn}: dtype {x.dtype} is not supported{tip}; convert the input to a float dtype")
  if x.dtype.kind in 'iub': x = jnp.astype(x, dtypes.default_float())
  if x.ndim < 2 or (square and x.shape[-1] != x.shape[-2]):
    want = "a square matrix (..., n, n)" if square else "a matrix (..., m, n)"
    raise ValueError(f"{fn}: expected {want}, got shape {x.shape}; leading dims are batch dims"
                     + ("; for a non-square matrix use qr, svd or lstsq" if square and x.ndim >= 2 else ""))
  return x

def mT(x: Array) -> Array: return jnp.swapaxes(x, -1, -2)
def mH(x: Array) -> Array: return jnp.conj(mT(x)) if x.dtype.kind == 'c' else mT(x)
def conj(x: Array) -> Array: return jnp.conj(x) if x.dtype.kind == 'c' else x
def pivot_sqrt(d: Array) -> Array:
  """sqrt of a Cholesky pivot: of its real part (a Hermitian matrix's diagonal is real; rounding leaves an
  imaginary part of a few ulps, which LAPACK drops too)."""
  return jnp.sqrt(jnp.real(d)) if d.dtype.kind == 'c' else jnp.sqrt(d)
def col(a: Array, j) -> Array: return dynamic_index_in_dim(a, j, axis=a.ndim - 1, keepdims=False)
def row(a: Array, i) -> Array: return dynamic_index_in_dim(a, i, axis=a.ndim - 2, keepdims=False)
def entry(v: Array, i) -> Array: return dynamic_index_in_dim(v, i, axis=v.ndim - 1, keepdims=False)
def outer(u: Array, v: Array) -> Array: return u[..., :, None] * v[..., None, :]
def flip2(a: Array) -> Array: return jnp.flip(a, (-2, -1))
def eye_like(a: Array, n: int) -> Array: return jnp.broadcast_to(jnp.eye(n, dtype=a.dtype), a.shape[:-2] + (n, n))
def pad_identity(a: Array, big: int) -> Array:
  """Square `a` (..., n, n) padded to (..., big, big) with the identity past n (its factors and inverses are a's,
  padded the same way)."""
  n = a.shape[-1]
  return jnp.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, big - n)] * 2) + jnp.diag((jnp.arange(big) >= n).astype(a.dtype))

def sweeps(dtype, n: int) -> int:
  """A fixed sweep count, enough for random matrices to converge to rounding (measured up to n = 64, where
  float32 needs 7 and float64 8), whatever the data: the loops have no data-dependent exit."""
  return max(5, (n - 1).bit_length() + SWEEPS.get(dtype.itemsize, 3))

def safe_div(x: Array, d: Array) -> Array:
  """x / d where d != 0, else x (the caller has made x 0 there): a singular pivot leaves its column alone."""
  return x / jnp.where(d == 0, jnp.ones_like(d), d)

# ---------------------------------------------------------------- Cholesky

def cholesky_columns(a: Array) -> Array:
  """Lower Cholesky factor by columns: step j scales column j by sqrt(a[j, j]) and subtracts its outer product
  (with its conjugate, for a Hermitian `a`) from the trailing matrix. Only the lower triangle of `a` is read."""
  n = a.shape[-1]
  rows = jnp.arange(n)
  def step(j, l):
    c = col(l, j)
    d = pivot_sqrt(entry(c, j))[..., None]
    c = jnp.where(rows > j, c / d, jnp.where(rows == j, d, 0))
    trailing = (rows[:, None] > j) & (rows[None, :] > j)
    l = jnp.where(trailing, l - outer(c, conj(c)), l)
    return jnp.where(rows == j, c[..., :, None], l)
  return jnp.tril(fori_loop(0, n, step, jnp.tril(a)))

def cholesky_blocked(a: Array, b: int = BLOCK) -> Array:
  """Right-looking blocked Cholesky: the matrix is padded with identity to a multiple of `b`; block k factors the
  panel of columns [kb, kb + b) (`factor_panel`), then updates the trailing matrix with one (N x b) @ (b x N) matmul."""
  n = a.shape[-1]
  big = -(-n // b) * b
  a = pad_identity(jnp.tril(a), big)
  rows, cols = jnp.arange(big), jnp.arange(b)
  def block(k, l):
    j0 = k * b
    panel = factor_panel(dynamic_slice_in_dim(l, j0, b, axis=l.ndim - 1), j0, rows, cols)
    below = jnp.where((rows >= j0 + b)[:, None], panel, 0)
    trailing = (rows[:, None] >= j0 + b) & (rows[None, :] >= j0 + b)
    l = jnp.where(trailing, l - below @ mH(below), l)
    return dynamic_update_slice_in_dim(l, panel, j0, axis=l.ndim - 1)
  l = fori_loop(0, big // b, block, a)
  return jnp.tril(l[..., :n, :n])

def factor_panel(panel: Array, j0, rows: Array, cols: Array) -> Array:
  """Cholesky of the panel of columns [j0, j0 + b) (shape (..., N, b)), its earlier columns already applied: the
  diagonal block by columns (b steps on b x b), then the rows below it with one matmul by the block's inverse,
  L21 = A21 L11^-H (LAPACK's potf2 and trsm; by columns, each of the b steps updated the whole N x b panel)."""
  b = cols.shape[0]
  l11 = cholesky_columns(dynamic_slice_in_dim(panel, j0, b, axis=panel.ndim - 2))
  inv = lower_inverse(l11)
  below = (rows >= j0 + b)[:, None]
  out = jnp.where(below, jnp.where(below, panel, 0) @ mH(inv), panel)
  return dynamic_update_slice_in_dim(out, l11, j0, axis=out.ndim - 2)

def _cholesky_raw(a: Array) -> Array:
  return cholesky_blocked(a) if a.shape[-1] > BLOCK else cholesky_columns(a)

@custom_jvp
def _cholesky(a):
  return _cholesky_raw(a)

@_cholesky.defjvp
def cholesky_jvp(primals, tangents):
  """L' = L Phi(L^-1 A' L^-H), Phi taking the lower triangle with the diagonal halved (L^-H: L^-T for real a)."""
  (a,), (da,) = primals, tangents
  l = _cholesky(a)
  x = mH(_lower_solve(l, mH(_lower_solve(l, da))))           # L^-1 dA L^-H
  phi = jnp.tril(x, -1) + 0.5 * x * jnp.eye(a.shape[-1], dtype=a.dtype)
  return l, l @ phi

def cholesky(x, *, symmetrize_input: bool = True) -> Array:
  """Lower Cholesky factor L of the symmetric (complex: Hermitian) positive-definite `x` (..., n, n): x = L @ L.T
  (L @ L.conj().T), as `jax.lax.linalg.cholesky`. A matrix that is not positive definite gives NaNs (no error, as
  JAX).

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.linalg.cholesky(jnp.array([[4., 2.], [2., 5.]])).tolist()
  [[2.0, 0.0], [1.0, 2.0]]
  """
  a = as_float_matrix(x, "cholesky", complex_ok=True)
  if symmetrize_input: a = (a + mH(a)) / 2
  return _cholesky(a)

# ---------------------------------------------------------------- triangular solves

def panel_width(n: int) -> int:
  """The block width of a blocked triangular solve of order n: BLOCK, or n / PANELS rounded up to 8."""
  return max(BLOCK, -(-n // (8 * PANELS)) * 8)

def lower_solve_node(l: Array, b: Array, unit: bool) -> Array:
  """X with tril(l) @ X = b (float32 or float64, one dtype) as one TRIANGULAR_SOLVE node, batch dims broadcast: a
  runtime step the CPU runs in C (`tjx_trsm`: forward substitution, sixty-four columns of a row in registers through
  its products) and other devices through the PYTHON device's `lower_solve`, in the same order."""
  shape = jnp.broadcast_shapes(l.shape[:-2], b.shape[:-2])
  l, b = jnp.broadcast_to(l, shape + l.shape[-2:]), jnp.broadcast_to(b, shape + b.shape[-2:])
  return Array(UOp(Ops.TRIANGULAR_SOLVE, b.dtype, (l.uop, b.uop), bool(unit)))

def lower_solve_jvp(node, ts):
  """X' = tril(l)^-1 (b' - tril(l') X), l' restricted to the triangle the solve reads."""
  (l, b), (dl, db), unit = node.src, ts, node.arg
  rhs = Array(db) if db is not None else jnp.zeros(b.shape, b.dtype)
  if dl is not None: rhs = rhs - jnp.tril(Array(dl), -1 if unit else 0) @ Array(node)
  return lower_solve_node(Array(l), rhs, unit).uop

def lower_solve_vjp(ct, node):
  """b's cotangent tril(l)^-T ct (the upper system solved as the lower one of the reversed matrix), l's
  -tril(that X^T)."""
  (l, _), unit = node.src, node.arg
  gb = jnp.flip(lower_solve_node(flip2(mT(Array(l))), jnp.flip(Array(ct), -2), unit), -2)
  gl = -jnp.tril(gb @ mT(Array(node)), -1 if unit else 0)
  return (gl.uop, gb.uop)

def lower_solve_batch(node, srcs, bdims):
  """vmap of a TRIANGULAR_SOLVE node: both operands with the batch axis in front (an unbatched one broadcast)."""
  size = batching.batch_size(srcs, bdims)
  moved = tuple(batching.match_axis(s, b, 0, size) for s, b in zip(srcs, bdims))
  return node.replace(src=moved), 0

ad.jvp_rules[Ops.TRIANGULAR_SOLVE], ad.vjp_rules[Ops.TRIANGULAR_SOLVE] = lower_solve_jvp, lower_solve_vjp
batching.batch_rules[Ops.TRIANGULAR_SOLVE] = lower_solve_batch

def _lower_solve(l: Array, b: Array, unit: bool = False) -> Array:
  """X with tril(l) @ X = b; l (..., n, n), b (..., n, k), batch dims broadcast. Only the lower triangle of l is
  read (only its strict lower triangle when `unit`). float32 and float64 (one dtype) are one TRIANGULAR_SOLVE node
  (`lower_solve_node`). Other dtypes: up to BLOCK rows, forward substitution row by row; past it,
  by blocks of rows: the inverses of all the diagonal blocks in one loop (substitution on the identity, the
  blocks stacked), then per block one matmul with its block's inverse and one that takes the block's part out of
  the rows below (LAPACK's trtri and gemm; the loop runs w steps on w x w blocks where substitution would run n
  on n x k)."""
  if l.dtype == b.dtype and l.dtype in (dtypes.float32, dtypes.float64): return lower_solve_node(l, b, unit)
  n = l.shape[-1]
  if n <= BLOCK: return _lower_solve_rows(l, b, unit)
  w = panel_width(n)
  nb = -(-n // w)
  lp = pad_identity(l, nb * w)
  inv = lower_inverse(jnp.stack([lp[..., i * w:(i + 1) * w, i * w:(i + 1) * w] for i in range(nb)], axis=-3), unit)
  shape = jnp.broadcast_shapes(l.shape[:-2], b.shape[:-2])
  rest, xs = jnp.broadcast_to(b, shape + b.shape[-2:]), []      # rest: b's rows not yet solved, updated
  for i in range(nb):
    r0, r1 = i * w, min(n, (i + 1) * w)
    xs.append(inv[..., i, :r1 - r0, :r1 - r0] @ rest[..., :r1 - r0, :])
    if r1 < n: rest = rest[..., r1 - r0:, :] - l[..., r1:, r0:r1] @ xs[-1]
  return jnp.concatenate(xs, -2)

def lower_inverse(l: Array, unit: bool = False) -> Array:
  """tril(l)^-1 (a stack of them for l (..., w, w)), by substitution on the identity: w steps on w x w."""
  return _lower_solve_rows(l, jnp.eye(l.shape[-1], dtype=l.dtype), unit)

def _lower_solve_rows(l: Array, b: Array, unit: bool = False) -> Array:
  """`_lower_solve` by forward substitution over rows."""
  n = l.shape[-1]
  l = jnp.tril(l, -1) if unit else jnp.tril(l)
  shape = jnp.broadcast_shapes(l.shape[:-2], b.shape[:-2])
  b = jnp.broadcast_to(b, shape + b.shape[-2:])
  rows = jnp.arange(n)
  def step(i, x):
    li = row(l, i)
    r = row(b, i) - jnp.einsum('...j,...jk->...k', li, x)
    xi = r if unit else r / entry(li, i)[..., None]
    return jnp.where((rows == i)[:, None], xi[..., None, :], x)
  return fori_loop(0, n, step, jnp.zeros_like(b))

def _solve_raw(a: Array, b: Array, left_side: bool, lower: bool, transpose_a: bool, unit: bool) -> Array:
  """op(a) X = b (left side) or X op(a) = b, op transposing when `transpose_a`, with one lower forward solve:
  X op(a) = b is op(a)^T X^T = b^T, and an upper system U X = b is the lower system (J U J)(J X) = J b, J the
  reversal."""
  if not left_side: return mT(_solve_raw(a, mT(b), True, lower, not transpose_a, unit))
  tri = jnp.tril(a) if lower else jnp.triu(a)
  if transpose_a: tri, lower = mT(tri), not lower
  if lower: return _lower_solve(tri, b, unit)
  return jnp.flip(_lower_solve(flip2(tri), jnp.flip(b, -2), unit), -2)

@functools.lru_cache(maxsize=None)
def _triangular_solve_fn(left_side: bool, lower: bool, transpose_a: bool, unit: bool):
  """The custom_jvp function for one setting of the static flags."""
  @custom_jvp
  def solve(a, b):
    return _solve_raw(a, b, left_side, lower, transpose_a, unit)
  @solve.defjvp
  def triangular_solve_jvp(primals, tangents):
    """X' = op(A)^-1 (B' - op(A') X) on the left, (B' - X op(A')) op(A)^-1 on the right; A' restricted to the
    triangle the solve reads."""
    (a, b), (da, db) = primals, tangents
    x = solve(a, b)
    da = (jnp.tril(da, -1 if unit else 0) if lower else jnp.triu(da, 1 if unit else 0))
    op_da = mT(da) if transpose_a else da
    rhs = db - (op_da @ x if left_side else x @ op_da)
    return x, _solve_raw(a, rhs, left_side, lower, transpose_a, unit)
  return solve

def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False) -> Array:
  """Solve op(a) @ x = b (`left_side=True`) or x @ op(a) = b for x, with `a` triangular (..., n, n), as
  `jax.lax.linalg.triangular_solve`. Only the `lower` (or upper) triangle of `a` is read; op(a) is a.T when
  `transpose_a`; `unit_diagonal` takes the diagonal as ones. `b` is (..., n, k) on the left, (..., k, n) on the
  right; batch dims broadcast. `conjugate_a` is accepted (tinyjx has no complex dtypes).

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.linalg.triangular_solve(jnp.array([[2., 0.], [1., 1.]]), jnp.array([[2.], [3.]]),
  ...                             left_side=True, lower=True).tolist()
  [[1.0], [2.0]]
  """
  a = as_float_matrix(a, "triangular_solve")
  b = jnp.asarray(b)
  if b.ndim < 2:
    raise ValueError(f"triangular_solve: b must be a matrix (..., n, k) (or (..., k, n) with left_side=False), "
                     f"got shape {b.shape}; add a trailing axis with b[..., None]")
  n, k = a.shape[-1], (b.shape[-2] if left_side else b.shape[-1])
  if n != k:
    side = "b.shape[-2]" if left_side else "b.shape[-1]"
    raise ValueError(f"triangular_solve: a of shape {a.shape} needs {side} == {n}, got b of shape {b.shape}")
  dt = jnp.promote_types(a.dtype, b.dtype if dtypes.is_float(b.dtype) else a.dtype)
  a, b = jnp.astype(a, dt), jnp.astype(b, dt)
  return _triangular_solve_fn(bool(left_side), bool(lower), bool(transpose_a), bool(unit_diagonal))(a, b)

# ---------------------------------------------------------------- LU with partial pivoting

@dataclass(frozen=True)
class LuArg:
  """The arg of an LU node: its outputs' (shape, dtype), the factors, the pivots and the permutation."""
  out_avals: tuple
  @property
  def key(self) -> str: return "lu" + "".join(f"|{d.short}{list(s)}" for s, d in self.out_avals)
  def pretty_params(self) -> str: return ""    # (as JAX prints its lu)
  @staticmethod
  def of(shape: tuple, dtype) -> 'LuArg':
    """The arg of an LU node of matrices of `shape` (..., m, n) and `dtype`."""
    batch, (m, n) = shape[:-2], shape[-2:]
    return LuArg(((shape, dtype), (batch + (min(m, n),), dtypes.int32), (batch + (m,), dtypes.int32)))

def lu_node(a: Array) -> tuple[Array, Array, Array]:
  """(lu, pivots, permutation) of float32 or float64 matrices (..., m, n) as one LU node: a runtime step, which
  the CPU runs in C (`tjx_lu`: the trailing rows and columns alone at each step, where the `fori_loop` form of
  `_lu_raw` updates the whole masked matrix) and other devices through the PYTHON device's `lu_factor`."""
  return tuple(Array(u) for u in bind(Ops.LU, LuArg.of(a.shape, a.dtype), [a.uop]))

def lu_batch(node, srcs, bdims):
  """vmap of an LU node: the batch axis moves to the front, where LU takes its batch dims."""
  (x,), (b,) = srcs, bdims
  x = batching.moveaxis(x, b, 0)
  return node.replace(src=(x,), arg=LuArg.of(x.shape, x.dtype)), (0, 0, 0)

batching.batch_rules[Ops.LU] = lu_batch

def _lu_raw(a: Array) -> tuple[Array, Array, Array]:
  """(lu, pivots, permutation) of a (..., m, n): step j swaps row j with the row of largest |a[r, j]| (r >= j;
  the first such, as LAPACK), then eliminates below the pivot. A zero pivot column is left as is. float32 and
  float64 matrices are one LU node (`lu_node`); other types take this `fori_loop`, whose steps update the whole
  matrix under masks (they differ only where a NaN or an infinity meets a pivoted row: there the loop's products
  with zero bring NaNs into rows LAPACK leaves alone)."""
  if a.dtype in (dtypes.float32, dtypes.float64): return lu_node(a)
  m, n = a.shape[-2:]
  k = min(m, n)
  rows, cols, steps = jnp.arange(m), jnp.arange(n), jnp.arange(k)
  batch = a.shape[:-2]
  def step(j, carry):
    a, piv, perm = carry
    p = jnp.argmax(jnp.where(rows >= j, jnp.abs(col(a, j)), -1), axis=-1).astype(jnp.int32)
    a, perm = swap_rows(a, j, p, rows), swap_entries(perm, j, p, rows)
    piv = jnp.where(steps == j, p[..., None], piv).astype(jnp.int32)
    d = entry(col(a, j), j)[..., None]
    l = jnp.where(rows > j, safe_div(col(a, j), d), 0)
    u = jnp.where(cols > j, row(a, j), 0)
    a = a - outer(l, u)
    return jnp.where((rows[:, None] > j) & (cols[None, :] == j), l[..., :, None], a), piv, perm
  piv0 = jnp.zeros(batch + (k,), jnp.int32)
  perm0 = jnp.broadcast_to(jnp.arange(m, dtype=jnp.int32), batch + (m,))
  return fori_loop(0, k, step, (a, piv0, perm0))

def swap_rows(a: Array, i, p: Array, rows: Array) -> Array:
  """a with rows i (a loop index) and p (one per batch entry) exchanged."""
  ri = row(a, i)
  rp = row(a, p) if p.ndim == 0 else jnp.sum(jnp.where(rows[:, None] == p[..., None, None], a, 0), axis=-2)
  out = jnp.where((rows == p[..., None])[..., :, None], ri[..., None, :], a)
  return jnp.where((rows == i)[:, None], rp[..., None, :], out)

def swap_entries(v: Array, i, p: Array, rows: Array) -> Array:
  vi = entry(v, i)[..., None]
  vp = jnp.sum(jnp.where(rows == p[..., None], v, 0), axis=-1, keepdims=True)
  return jnp.where(rows == i, vp, jnp.where(rows == p[..., None], vi, v)).astype(v.dtype)

@custom_jvp
def _lu(a):
  return _lu_raw(a)

@_lu.defjvp
def lu_jvp(primals, tangents):
  """With P A = L U: X = L^-1 P A' U^-1, L' = L tril(X, -1), U' = triu(X) U (square matrices)."""
  (a,), (da,) = primals, tangents
  lu_, piv, perm = _lu(a)
  if a.shape[-1] != a.shape[-2]:
    raise NotImplementedError(f"lu: the derivative is implemented for square matrices only, got shape {a.shape}")
  l, u = unit_lower(lu_), jnp.triu(lu_)
  pda = permute_rows(da, perm)
  x = _solve_raw(u, _lower_solve(l, pda, unit=True), False, False, False, False)
  dlu = l @ jnp.tril(x, -1) + jnp.triu(x) @ u
  return (lu_, piv, perm), (dlu, jnp.zeros_like(piv), jnp.zeros_like(perm))

def unit_lower(lu_: Array) -> Array: return jnp.tril(lu_, -1) + jnp.eye(lu_.shape[-1], dtype=lu_.dtype)

def lu(x) -> tuple[Array, Array, Array]:
  """LU decomposition with partial pivoting of x (..., m, n), as `jax.lax.linalg.lu`: (lu, pivots, permutation),
  lu holding L (unit diagonal, below) and U (on and above the diagonal), pivots (int32, LAPACK's: row j was
  swapped with row pivots[j]) and the permutation with x[permutation] == L @ U.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> [v.tolist() for v in lax.linalg.lu(jnp.array([[1., 2.], [3., 4.]]))[1:]]
  [[1, 1], [1, 0]]
  """
  return _lu(as_float_matrix(x, "lu", square=False))

def lu_pivots_to_permutation(pivots, permutation_size: int) -> Array:
  """The permutation that LAPACK-style `pivots` (row j swapped with pivots[j], in order) apply, as
  `jax.lax.linalg.lu_pivots_to_permutation`.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.linalg.lu_pivots_to_permutation(jnp.array([2, 2], dtype=jnp.int32), 3).tolist()
  [2, 0, 1]
  """
  piv = jnp.astype(jnp.asarray(pivots), jnp.int32)
  rows = jnp.arange(permutation_size)
  def step(j, perm): return swap_entries(perm, j, entry(piv, j), rows)
  perm0 = jnp.broadcast_to(jnp.arange(permutation_size, dtype=jnp.int32), piv.shape[:-1] + (permutation_size,))
  return fori_loop(0, piv.shape[-1], step, perm0)

# ---------------------------------------------------------------- Householder QR

def _qr_raw(a: Array) -> tuple[Array, Array]:
  """(Q (..., m, m), R (..., m, n)) by Householder reflectors H = I - tau v v^T, v[j] = 1, chosen as LAPACK's
  dlarfg: R[j, j] = -sign(a[j, j]) * norm (sign(0) = +), and no reflection when the column is zero below j."""
  m, n = a.shape[-2:]
  rows = jnp.arange(m)
  def step(j, carry):
    r, q = carry
    x = jnp.where(rows >= j, col(r, j), 0)
    alpha = entry(x, j)
    below = jnp.sqrt(jnp.sum(jnp.where(rows > j, x * x, 0), axis=-1))
    beta = jnp.where(alpha >= 0, -1, 1) * jnp.sqrt(alpha * alpha + below * below)
    none = below == 0
    tau = jnp.where(none, 0, (beta - alpha) / jnp.where(none, 1, beta))
    v = jnp.where(rows > j, x / jnp.where(none, 1, alpha - beta)[..., None], jnp.where(rows == j, 1, 0))
    r = r - tau[..., None, None] * outer(v, jnp.einsum('...i,...ij->...j', v, r))
    q = q - tau[..., None, None] * outer(jnp.einsum('...ij,...j->...i', q, v), v)
    return r, q
  r, q = fori_loop(0, min(m, n), step, (a, eye_like(a, m)))
  return q, jnp.triu(r)

@functools.lru_cache(maxsize=None)
def _qr_fn(full_matrices: bool):
  @custom_jvp
  def qr_(a):
    q, r = _qr_raw(a)
    if full_matrices: return q, r
    k = min(a.shape[-2:])
    return q[..., :, :k], r[..., :k, :]
  @qr_.defjvp
  def qr_jvp(primals, tangents):
    """C = Q^T A' R^-1, Omega = tril(C, -1) - tril(C, -1)^T: R' = (C - Omega) R, Q' = A' R^-1 + Q (Omega - C)."""
    (a,), (da,) = primals, tangents
    q, r = qr_(a)
    m, n = a.shape[-2:]
    if m < n or (full_matrices and m != n):
      raise NotImplementedError(f"qr: the derivative is implemented for m >= n with reduced Q (mode='reduced'), "
                                f"got shape {a.shape} with full_matrices={full_matrices}")
    da_rinv = _solve_raw(r, da, False, False, False, False)
    c = mT(q) @ da_rinv
    omega = jnp.tril(c, -1) - mT(jnp.tril(c, -1))
    return (q, r), (da_rinv + q @ (omega - c), (c - omega) @ r)
  return qr_

def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None) -> tuple[Array, Array]:
  """QR decomposition of x (..., m, n) by Householder reflections, as `jax.lax.linalg.qr`: (Q, R) with Q
  (..., m, m) orthogonal and R (..., m, n) upper triangular; `full_matrices=False` gives Q (..., m, k) and
  R (..., k, n), k = min(m, n). Signs follow LAPACK (so numpy's). Column pivoting is not supported.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> q, r = lax.linalg.qr(jnp.array([[3., 1.], [4., 2.]]))
  >>> [round(v, 4) for v in r[0].tolist()]
  [-5.0, -2.2]
  """
  if pivoting:
    raise NotImplementedError("qr: pivoting=True (column-pivoted QR) is not supported in tinyjx; use pivoting=False")
  return _qr_fn(bool(full_matrices))(as_float_matrix(x, "qr", square=False))

# ---------------------------------------------------------------- Jacobi: round-robin order and rotations

@functools.lru_cache(maxsize=None)
def round_robin(n: int) -> tuple:
  """For even n: positions (2k, 2k + 1) are paired; after each step the contents move to new positions
  (new[p] = old[src[p]]) so that n - 1 steps pair every two indices once (the circle method: the first index
  stays, the others rotate)."""
  h = n // 2
  if h == 1: return (0, 1)
  top, bot = list(range(0, n, 2)), list(range(1, n, 2))
  new_top = [top[0]] + [bot[0]] + top[1:h - 1]
  new_bot = bot[1:] + [top[h - 1]]
  src = [0] * n
  for k in range(h): src[2 * k], src[2 * k + 1] = new_top[k], new_bot[k]
  return tuple(src)

def rotation(app: Array, aqq: Array, apq: Array) -> tuple[Array, Array]:
  """(c, s) of the Jacobi rotation J = [[c, s], [-s, c]] with J^T [[app, apq], [apq, aqq]] J diagonal
  (Golub & Van Loan's sym.schur2); the identity where apq == 0."""
  zero = apq == 0
  theta = (aqq - app) / (2 * jnp.where(zero, 1, apq))
  big = jnp.abs(theta) > 1
  safe = jnp.where(big, theta, 1)
  root = jnp.where(big, jnp.abs(theta) * jnp.sqrt(1 + (1 / safe) ** 2), jnp.sqrt(1 + theta * theta))
  t = jnp.where(zero, 0, jnp.where(theta >= 0, 1, -1) / (jnp.abs(theta) + root))
  c = 1 / jnp.sqrt(1 + t * t)
  return c, t * c

def pairs(x: Array) -> tuple[Array, Array]:
  """The even and odd columns of x (..., m, n): the two halves of each round-robin pair."""
  p = jnp.reshape(x, x.shape[:-1] + (x.shape[-1] // 2, 2))
  return p[..., 0], p[..., 1]

def rotate_columns(x: Array, c: Array, s: Array) -> Array:
  """x @ J for the block-diagonal J of the n/2 rotations (c[k], s[k]) on column pairs (2k, 2k + 1)."""
  x0, x1 = pairs(x)
  c, s = c[..., None, :], s[..., None, :]
  return jnp.reshape(jnp.stack([c * x0 - s * x1, s * x0 + c * x1], axis=-1), x.shape)

def pad_to_even(a: Array, both: bool) -> Array:
  """a with one zero column (and row, when `both`) appended if its column count is odd: a decoupled dummy index
  that rotations leave alone (its off-diagonal entries are exactly zero)."""
  if a.shape[-1] % 2 == 0: return a
  pad = [(0, 0)] * (a.ndim - 2) + [(0, 1 if both else 0), (0, 1)]
  return jnp.pad(a, pad)

# ---------------------------------------------------------------- eigh by two-sided Jacobi

def _eigh_raw(a: Array) -> tuple[Array, Array]:
  """(w ascending, V) with a = V diag(w) V^T, a symmetric: cyclic Jacobi sweeps of n - 1 round-robin steps, each
  zeroing n/2 disjoint off-diagonal pairs at once."""
  n, a0 = a.shape[-1], a
  a = pad_to_even(a, both=True)
  big = a.shape[-1]
  src = jnp.array(round_robin(big), dtype=jnp.int32)
  def step(_, carry):
    a, v = carry
    diag = jnp.diagonal(a, axis1=-2, axis2=-1)
    off = jnp.diagonal(a, offset=1, axis1=-2, axis2=-1)[..., ::2]
    c, s = rotation(diag[..., 0::2], diag[..., 1::2], off)
    a = mT(rotate_columns(mT(rotate_columns(a, c, s)), c, s))
    v = rotate_columns(v, c, s)
    return jnp.take(jnp.take(a, src, axis=-1), src, axis=-2), jnp.take(v, src, axis=-1)
  a, v = fori_loop(0, sweeps(a.dtype, big) * (big - 1), step, (a, eye_like(a, big)))
  key = jnp.diagonal(a, axis1=-2, axis2=-1)
  if big != n: key = jnp.where(v[..., n, :] == 1, jnp.inf, key)   # the dummy sorts last, then is cut off
  order = jnp.argsort(key, axis=-1)[..., :n]
  v = jnp.take_along_axis(v, order[..., None, :], axis=-1)[..., :n, :]
  v = v / jnp.sqrt(jnp.sum(v * v, axis=-2, keepdims=True))
  return rayleigh(a0, v), v

def rayleigh(a: Array, v: Array) -> Array:
  """v_i^T a v_i for each (unit) column: eigenvalues from the original matrix, with an error quadratic in
  the eigenvectors' (the rotated diagonal carries the rounding of every rotation)."""
  return jnp.sum(v * (a @ v), axis=-2)

@custom_jvp
def _eigh(a):
  return _eigh_raw(a)

@_eigh.defjvp
def eigh_jvp(primals, tangents):
  """With A = V diag(w) V^T and S = V^T A' V: w' = diag(S), V' = V (F * S), F[i, j] = 1 / (w[j] - w[i]) off the
  diagonal and 0 on it (A' symmetric)."""
  (a,), (da,) = primals, tangents
  w, v = _eigh(a)
  s = mT(v) @ da @ v
  eye = jnp.eye(a.shape[-1], dtype=a.dtype)
  f = 1 / (w[..., None, :] - w[..., :, None] + eye) - eye
  return (w, v), (jnp.diagonal(s, axis1=-2, axis2=-1), v @ (f * s))

def symmetric_from(a: Array, lower: bool, symmetrize_input: bool) -> Array:
  """The symmetric matrix eigh factors: (a + a^T) / 2, or the one given by a's lower (upper) triangle."""
  if symmetrize_input: return (a + mT(a)) / 2
  tri = jnp.tril(a) if lower else jnp.triu(a)
  return tri + mT(tri) - tri * jnp.eye(a.shape[-1], dtype=a.dtype)

def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index=None) -> tuple[Array, Array]:
  """Eigenvectors and eigenvalues of the symmetric x (..., n, n), as `jax.lax.linalg.eigh`: (v, w) with
  x = v @ diag(w) @ v.T and w ascending. `symmetrize_input` uses (x + x.T) / 2; otherwise only the `lower` (or
  upper) triangle is read. Computed by cyclic Jacobi with a fixed number of sweeps; eigenvalues are Rayleigh
  quotients of the original matrix. As in JAX, the derivative of v is infinite where eigenvalues repeat.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> [round(e, 4) for e in lax.linalg.eigh(jnp.array([[2., 1.], [1., 2.]]))[1].tolist()]
  [1.0, 3.0]
  """
  if subset_by_index is not None:
    raise NotImplementedError("eigh: subset_by_index is not supported in tinyjx; slice the full result instead")
  a = symmetric_from(as_float_matrix(x, "eigh"), lower, symmetrize_input)
  w, v = _eigh(a)
  return v, w

# ---------------------------------------------------------------- SVD by one-sided Jacobi

def orthogonalize_columns(a: Array) -> tuple[Array, Array]:
  """(W, V) with W = a V of mutually orthogonal columns and V orthogonal (a has m >= n columns... any shape): the
  one-sided (Hestenes) Jacobi method, each rotation computed from the 2 x 2 Gram matrix of a column pair."""
  n = a.shape[-1]
  src = jnp.array(round_robin(n), dtype=jnp.int32)
  def step(_, carry):
    w, v = carry
    w0, w1 = pairs(w)
    c, s = rotation(jnp.sum(w0 * w0, axis=-2), jnp.sum(w1 * w1, axis=-2), jnp.sum(w0 * w1, axis=-2))
    return jnp.take(rotate_columns(w, c, s), src, axis=-1), jnp.take(rotate_columns(v, c, s), src, axis=-1)
  return fori_loop(0, sweeps(a.dtype, n) * (n - 1), step, (a, eye_like(a, n)))

def _svd_tall(a: Array, compute_uv: bool) -> tuple:
  """(U (..., m, m), s, V (..., n, n)) of a (..., m, n) with m >= n, or s alone."""
  n = a.shape[-1]
  padded = pad_to_even(a, both=False)
  _, v = orthogonalize_columns(padded)
  v = v / jnp.sqrt(jnp.sum(v * v, axis=-2, keepdims=True))
  w = padded @ v              # from the original matrix: the rotated columns carry the rounding of every rotation
  s = jnp.sqrt(jnp.sum(w * w, axis=-2))
  key = jnp.where(v[..., n, :] == 1, -1, s) if w.shape[-1] != n else s
  order = jnp.argsort(-key, axis=-1)[..., :n]
  s = jnp.take_along_axis(s, order, axis=-1)
  if not compute_uv: return (s,)
  w = jnp.take_along_axis(w, order[..., None, :], axis=-1)
  v = jnp.take_along_axis(v, order[..., None, :], axis=-1)[..., :n, :]
  q, r = _qr_raw(w)
  sign = jnp.where(jnp.diagonal(r, axis1=-2, axis2=-1) < 0, -1, 1).astype(a.dtype)
  u = q * jnp.concatenate([sign, jnp.ones(q.shape[:-2] + (q.shape[-1] - n,), a.dtype)], axis=-1)[..., None, :]
  return u, s, v

def _svd_raw(a: Array, full_matrices: bool, compute_uv: bool) -> tuple:
  """(U, s, Vh) (or (s,)) for any m, n: a wide matrix is factored through its transpose."""
  m, n = a.shape[-2:]
  k = min(m, n)
  if m < n:
    out = _svd_tall(mT(a), compute_uv)
    if not compute_uv: return out
    v, s, u = out
  else:
    out = _svd_tall(a, compute_uv)
    if not compute_uv: return out
    u, s, v = out
  if not full_matrices: u, v = u[..., :, :k], v[..., :, :k]
  return u, s, mT(v)

@functools.lru_cache(maxsize=None)
def _svd_fn(full_matrices: bool, compute_uv: bool):
  @custom_jvp
  def svd_(a):
    return _svd_raw(a, full_matrices, compute_uv)
  @svd_.defjvp
  def svd_jvp(primals, tangents):
    """With A = U S V^T (reduced) and D = U^T A' V: s' = diag(D); U' = U (F * (D S + S D^T) + J) + (I - U U^T)
    A' V S^-1 and V' = V (F * (S D + D^T S)) + (I - V V^T) A'^T U S^-1, F[i, j] = 1 / (s_j^2 - s_i^2) off the
    diagonal, J = (D - D^T) / 2 S^-1."""
    (a,), (da,) = primals, tangents
    out = svd_(a)
    if not compute_uv:
      u, s, vh = _svd_fn(False, True)(a)
      return out, (jnp.diagonal(mT(u) @ da @ mT(vh), axis1=-2, axis2=-1),)
    if full_matrices:
      raise NotImplementedError("svd: the derivative of U and Vh is implemented for full_matrices=False only (as "
                                "JAX); call svd(a, full_matrices=False)")
    u, s, vh = out
    return out, svd_tangents(da, u, s, mT(vh))
  return svd_

def svd_tangents(da: Array, u: Array, s: Array, v: Array) -> tuple:
  m, n = da.shape[-2:]
  eye = jnp.eye(s.shape[-1], dtype=s.dtype)
  d = mT(u) @ da @ v
  sr, sc = s[..., None, :], s[..., :, None]
  f = 1 / ((sr - sc) * (sr + sc) + eye) - eye
  s_inv = jnp.where(s == 0, 0, 1 / jnp.where(s == 0, 1, s))
  j = 0.5 * (d - mT(d)) * s_inv[..., None, :] * eye
  du = u @ (f * (d * sr + sc * mT(d)) + j)
  dv = v @ (f * (sc * d + mT(d) * sr))
  if m > n: du = du + (da @ v - u @ (mT(u) @ da @ v)) * s_inv[..., None, :]
  if n > m: dv = dv + (mT(da) @ u - v @ (mT(v) @ mT(da) @ u)) * s_inv[..., None, :]
  return du, jnp.diagonal(d, axis1=-2, axis2=-1), mT(dv)

def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None, algorithm=None):
  """Singular value decomposition of x (..., m, n), as `jax.lax.linalg.svd`: (u, s, vh) with
  x = u[..., :, :k] * s[..., None, :] @ vh[..., :k, :] and s descending; `full_matrices=False` keeps k = min(m, n)
  columns of u and rows of vh; `compute_uv=False` returns s alone. One-sided Jacobi, then QR for u.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> [round(v, 4) for v in lax.linalg.svd(jnp.array([[3., 0.], [0., -4.]]), compute_uv=False).tolist()]
  [4.0, 3.0]
  """
  if subset_by_index is not None:
    raise NotImplementedError("svd: subset_by_index is not supported in tinyjx; slice the full result instead")
  a = as_float_matrix(x, "svd", square=False)
  out = _svd_fn(bool(full_matrices), bool(compute_uv))(a)
  return out[0] if not compute_uv else tuple(out)

# ---------------------------------------------------------------- solves built on the factorizations

def permute_rows(b: Array, perm: Array) -> Array:
  """b[..., perm, :] with one permutation per batch entry (b (..., n, k), perm (..., n); batch dims broadcast)."""
  if perm.ndim == 1: return jnp.take(b, perm, axis=-2, mode='clip')     # one row index per row: a row gather
  shape = jnp.broadcast_shapes(b.shape[:-2], perm.shape[:-1]) + b.shape[-2:]
  idx = jnp.broadcast_to(perm[..., :, None], shape)
  return jnp.take_along_axis(jnp.broadcast_to(b, shape), idx, axis=-2)

def _lu_solve_raw(lu_: Array, perm: Array, b: Array) -> Array:
  """X with A X = b from A's (lu, permutation): U^-1 L^-1 b[perm]; b (..., n, k), batch dims broadcast."""
  shape = jnp.broadcast_shapes(lu_.shape[:-2], b.shape[:-2])
  b = jnp.broadcast_to(b, shape + b.shape[-2:])
  y = _lower_solve(lu_, permute_rows(b, perm), unit=True)
  return _solve_raw(lu_, y, True, False, False, False)

@custom_jvp
def solve_via_lu(a, b):
  """A^-1 B for batched square `a`, by LU with partial pivoting (jnp.linalg.solve and inv are built on it)."""
  lu_, _, perm = _lu(a)
  return _lu_solve_raw(lu_, perm, b)

@solve_via_lu.defjvp
def solve_jvp(primals, tangents):
  """X = A^-1 B: X' = A^-1 (B' - A' X), with the same LU factors."""
  (a, b), (da, db) = primals, tangents
  lu_, _, perm = _lu(a)
  x = solve_via_lu(a, b)
  return x, _lu_solve_raw(lu_, perm, db - da @ x)

def det_from_lu(lu_: Array, piv: Array) -> Array:
  """prod(diag U) times the sign of the row swaps."""
  swaps = jnp.sum((piv != jnp.arange(piv.shape[-1], dtype=piv.dtype)).astype(jnp.int32), axis=-1)
  sign = jnp.where(swaps % 2 == 1, -1, 1).astype(lu_.dtype)
  return sign * jnp.prod(jnp.diagonal(lu_, axis1=-2, axis2=-1), axis=-1)

@custom_jvp
def det_via_lu(a):
  """det(A) from the LU factors (jnp.linalg.det)."""
  lu_, piv, _ = _lu(a)
  return det_from_lu(lu_, piv)

@det_via_lu.defjvp
def det_jvp(primals, tangents):
  """det(A)' = det(A) tr(A^-1 A') (NaN at a singular A)."""
  (a,), (da,) = primals, tangents
  lu_, piv, perm = _lu(a)
  y = det_via_lu(a)
  return y, y * jnp.trace(_lu_solve_raw(lu_, perm, da), axis1=-2, axis2=-1)

@custom_jvp
def slogdet_via_lu(a):
  """(sign, log|det A|) from the LU factors (jnp.linalg.slogdet)."""
  lu_, piv, _ = _lu(a)
  diag = jnp.diagonal(lu_, axis1=-2, axis2=-1)
  sign = jnp.sign(det_from_lu(jnp.sign(lu_), piv))
  return sign, jnp.sum(jnp.log(jnp.abs(diag)), axis=-1)

@slogdet_via_lu.defjvp
def slogdet_jvp(primals, tangents):
  """log|det A|' = tr(A^-1 A'); the sign is locally constant."""
  (a,), (da,) = primals, tangents
  lu_, _, perm = _lu(a)
  sign, logdet = slogdet_via_lu(a)
  return (sign, logdet), (jnp.zeros_like(sign), jnp.trace(_lu_solve_raw(lu_, perm, da), axis1=-2, axis2=-1))
