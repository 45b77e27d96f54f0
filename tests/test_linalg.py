"""Tests of tinyjx.numpy.linalg: matmul, dot, tensordot, einsum ... against numpy over random shapes (batch
broadcasting and size-0 axes included), result dtypes as JAX's (written in as data), the DOT_GENERAL lowering
of contractions, jnp.linalg.norm, and the errors."""
import doctest
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import tinyjx
import tinyjx.numpy as jnp
from tinyjx.uop import Ops
from tinyjx.numpy import linalg
from conftest import examples

SETTINGS = settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])

def rand(rng, shape, dtype=np.float32):
  if np.dtype(dtype) == np.bool_: return rng.integers(0, 2, shape).astype(bool)
  if np.dtype(dtype).kind in 'iu': return rng.integers(-3, 4, shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)

def close(got, want, tol=1e-4):
  got = np.asarray(got)
  assert got.shape == np.shape(want), (got.shape, np.shape(want))
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

def ops_of(x) -> list:
  return [n.op for n in x.uop.toposort()]

dims = st.integers(0, 4)

# ---------------------------------------------------------------- matmul and dot
@st.composite
def matmul_shapes(draw):
  n, k, m = draw(dims), draw(dims), draw(dims)
  batch = draw(st.lists(st.integers(1, 3), max_size=2))
  ba = [b if draw(st.booleans()) else 1 for b in batch][draw(st.integers(0, len(batch))):]
  bb = [b if draw(st.booleans()) else 1 for b in batch][draw(st.integers(0, len(batch))):]
  a = tuple(ba) + (n, k) if draw(st.integers(0, 3)) else (k,)
  b = tuple(bb) + (k, m) if draw(st.integers(0, 3)) else (k,)
  return a, b

@SETTINGS
@given(matmul_shapes(), st.integers(0, 2 ** 16))
def test_matmul_matches_numpy(shapes, seed):
  rng = np.random.default_rng(seed)
  a, b = rand(rng, shapes[0]), rand(rng, shapes[1])
  got = jnp.matmul(jnp.asarray(a), jnp.asarray(b))
  assert Ops.DOT_GENERAL in ops_of(got)
  close(got, np.matmul(a, b))
  close(jnp.asarray(a) @ b, a @ b)

@SETTINGS
@given(st.lists(dims, max_size=3), st.lists(dims, max_size=3), st.integers(0, 2 ** 16))
def test_dot_matches_numpy(sa, sb, seed):
  rng = np.random.default_rng(seed)
  if sa and sb: sb[max(len(sb) - 2, 0)] = sa[-1]
  a, b = rand(rng, tuple(sa)), rand(rng, tuple(sb))
  close(jnp.dot(jnp.asarray(a), jnp.asarray(b)), np.dot(a, b))
  close(jnp.asarray(a).dot(b), np.dot(a, b))

# result dtypes from JAX 0.10: int8 @ int8 -> int8, bool @ bool -> bool, int32 @ float32 -> float32, ...
DTYPE_TABLE = [('int8', 'int8', 'int8'), ('bool', 'bool', 'bool'), ('int32', 'float32', 'float32'),
               ('uint8', 'int8', 'int16'), ('float16', 'float32', 'float32'), ('bfloat16', 'float16', 'float32'),
               ('bool', 'int32', 'int32')]

@pytest.mark.parametrize('da, db, want', DTYPE_TABLE)
def test_contraction_result_dtypes(da, db, want):
  rng = np.random.default_rng(0)
  a = jnp.asarray(rand(rng, (2, 3), np.float32 if da == 'bfloat16' else da), dtype=da)
  b = jnp.asarray(rand(rng, (3, 2), np.float32 if db == 'bfloat16' else db), dtype=db)
  for out in (jnp.matmul(a, b), jnp.dot(a, b), jnp.einsum('ij,jk', a, b), jnp.tensordot(a, b, 1)):
    assert out.dtype.name == want

def test_bool_and_int_matmul_values():
  a = np.array([[True, False], [False, False]])
  assert jnp.matmul(jnp.asarray(a), jnp.asarray(a)).tolist() == np.matmul(a, a).tolist()
  x = np.arange(6, dtype=np.int32).reshape(2, 3)
  assert jnp.matmul(jnp.asarray(x), jnp.asarray(x.T)).tolist() == (x @ x.T).tolist()
  assert jnp.matmul(jnp.asarray(x), jnp.asarray(x.T), preferred_element_type=jnp.float32).dtype is jnp.float32

def test_matmul_errors_name_both_shapes():
  with pytest.raises(ValueError, match=r"\(2, 3\) and \(4, 5\)"):
    jnp.matmul(jnp.ones((2, 3)), jnp.ones((4, 5)))
  with pytest.raises(ValueError, match=r"\(2, 2, 3\) and \(3, 3, 4\).*do not broadcast"):
    jnp.ones((2, 2, 3)) @ jnp.ones((3, 3, 4))
  with pytest.raises(ValueError, match="scalar"):
    jnp.ones((2, 3)) @ jnp.ones(())
  with pytest.raises(ValueError, match=r"\(2, 3\) and \(2,\)"):
    jnp.dot(jnp.ones((2, 3)), jnp.ones(2))

def test_matmul_with_2d_rhs_does_not_broadcast_it():
  # a batched lhs and a plain weight matrix: one DOT_GENERAL with no batch dims and no EXPAND of the weight
  out = jnp.ones((5, 2, 3)) @ jnp.asarray(np.ones((3, 4), np.float32))
  node = next(n for n in out.uop.toposort() if n.op is Ops.DOT_GENERAL)
  assert node.arg[1] == ((), ()) and Ops.EXPAND not in ops_of(out)

# ---------------------------------------------------------------- other products
@SETTINGS
@given(st.lists(dims, min_size=1, max_size=3), st.lists(dims, min_size=1, max_size=3), st.integers(0, 2 ** 16))
def test_inner_outer_kron_vdot(sa, sb, seed):
  rng = np.random.default_rng(seed)
  sb[-1] = sa[-1]
  a, b = rand(rng, tuple(sa)), rand(rng, tuple(sb))
  close(jnp.inner(jnp.asarray(a), jnp.asarray(b)), np.inner(a, b))
  close(jnp.outer(jnp.asarray(a), jnp.asarray(b)), np.outer(a, b))
  close(jnp.kron(jnp.asarray(a), jnp.asarray(b)), np.kron(a, b))
  if a.size == b.size: close(jnp.vdot(jnp.asarray(a), jnp.asarray(b.reshape(a.shape))), np.vdot(a, b.reshape(a.shape)))

@SETTINGS
@given(st.lists(dims, min_size=0, max_size=4), st.integers(0, 4), st.integers(0, 2 ** 16))
def test_tensordot_int_and_pair_axes(shape, n, seed):
  rng = np.random.default_rng(seed)
  n = min(n, len(shape))
  a = rand(rng, tuple(shape))
  b = rand(rng, tuple(shape[len(shape) - n:]) + (2,))
  close(jnp.tensordot(jnp.asarray(a), jnp.asarray(b), n), np.tensordot(a, b, n))
  if len(shape) >= 2:
    perm = rng.permutation(len(shape))
    c = rand(rng, tuple(shape[i] for i in perm))
    axes = (list(range(len(shape))), [int(np.argwhere(perm == i)[0, 0]) for i in range(len(shape))])
    close(jnp.tensordot(jnp.asarray(a), jnp.asarray(c), axes), np.tensordot(a, c, axes))

def test_tensordot_errors():
  with pytest.raises(ValueError, match="differ in size"):
    jnp.tensordot(jnp.ones((2, 3)), jnp.ones((4, 3)), ([1], [0]))
  with pytest.raises(ValueError, match="axes=3"):
    jnp.tensordot(jnp.ones((2, 3)), jnp.ones((2, 3)), 3)

def test_vecdot_and_cross():
  rng = np.random.default_rng(1)
  a, b = rand(rng, (4, 1, 3)), rand(rng, (5, 3))
  close(jnp.vecdot(jnp.asarray(a), jnp.asarray(b)), np.sum(a * b, axis=-1))
  close(jnp.cross(jnp.asarray(a), jnp.asarray(b)), np.cross(a, b))
  close(jnp.cross(jnp.asarray(a[..., :2]), jnp.asarray(b)), np.cross(np.pad(a[..., :2], ((0, 0), (0, 0), (0, 1))), b))
  c, d = rand(rng, (3, 4)), rand(rng, (3, 4))
  close(jnp.cross(jnp.asarray(c), jnp.asarray(d), axis=0), np.cross(c, d, axis=0))
  with pytest.raises(ValueError, match="2 or 3 components"):
    jnp.cross(jnp.ones(4), jnp.ones(3))

# ---------------------------------------------------------------- einsum
@st.composite
def einsum_case(draw):
  labels = 'abcde'
  sizes = {l: draw(st.integers(0 if l == 'e' else 1, 3)) for l in labels}
  n_ops = draw(st.integers(1, 3))
  terms = [draw(st.lists(st.sampled_from(labels), max_size=4)) for _ in range(n_ops)]
  used = sorted({l for t in terms for l in t})
  if draw(st.booleans()):
    spec = ",".join("".join(t) for t in terms)
  else:
    out = draw(st.permutations(used))[:draw(st.integers(0, len(used)))]
    spec = ",".join("".join(t) for t in terms) + "->" + "".join(out)
  shapes = [tuple(sizes[l] for l in t) for t in terms]
  return spec, shapes

@SETTINGS
@given(einsum_case(), st.integers(0, 2 ** 16))
def test_einsum_matches_numpy(case, seed):
  spec, shapes = case
  rng = np.random.default_rng(seed)
  ops = [rand(rng, s) for s in shapes]
  got = jnp.einsum(spec, *[jnp.asarray(o) for o in ops])
  assert not any(n.op is Ops.GATHER for n in got.uop.toposort())   # diagonals are views
  close(got, np.einsum(spec, *ops), tol=1e-3)

@pytest.mark.parametrize('spec, shapes', [
  ('...ij,...jk->...ik', [(2, 1, 3, 4), (5, 4, 2)]),
  ('...i,...i', [(3, 4), (4,)]),
  ('i...->...', [(3, 2, 2)]),
  ('ij...,jk...->ik...', [(2, 3, 4), (3, 5, 1)]),
  ('ii->i', [(4, 4)]), ('ii', [(4, 4)]), ('iij->ji', [(3, 3, 2)]), ('ijij->ij', [(2, 3, 2, 3)]),
  ('ij,ij,ij->i', [(2, 3)] * 3), ('i,i,i', [(0,)] * 3), ('ab,bc,cd,de->ae', [(2, 3), (3, 4), (4, 1), (1, 2)]),
  ('bij,bjk->bik', [(0, 2, 3), (0, 3, 4)]), ('ij->', [(3, 0)]), ('', [()]), (',->', [(), ()]),
])
def test_einsum_cases(spec, shapes):
  rng = np.random.default_rng(0)
  ops = [rand(rng, s) for s in shapes]
  close(jnp.einsum(spec, *[jnp.asarray(o) for o in ops]), np.einsum(spec, *ops), tol=1e-4)

def test_einsum_contracts_with_dot_general_pairwise():
  a, b, c = jnp.ones((2, 3)), jnp.ones((3, 4)), jnp.ones((4, 5))
  out = jnp.einsum('ij,jk,kl->il', a, b, c)
  assert ops_of(out).count(Ops.DOT_GENERAL) == 2 and Ops.REDUCE not in ops_of(out) and Ops.MUL not in ops_of(out)
  assert out.tolist() == (np.ones((2, 3)) @ np.ones((3, 4)) @ np.ones((4, 5))).tolist()

def test_einsum_interleaved_form():
  rng = np.random.default_rng(2)
  a, b = rand(rng, (2, 3)), rand(rng, (3, 4))
  close(jnp.einsum(jnp.asarray(a), [0, 1], jnp.asarray(b), [1, 2], [0, 2]), a @ b)
  close(jnp.einsum(jnp.asarray(a), [Ellipsis, 1], [Ellipsis]), a.sum(1))

def test_einsum_errors():
  with pytest.raises(ValueError, match="name 2 operands but 1 were given"):
    jnp.einsum('ij,jk', jnp.ones((2, 2)))
  with pytest.raises(ValueError, match="operand 0 has 2 dimensions but its subscripts 'ijk' name 3"):
    jnp.einsum('ijk->i', jnp.ones((2, 2)))
  with pytest.raises(ValueError, match="label 'j' has size 3 in operand 0 and size 4 in operand 1"):
    jnp.einsum('ij,jk', jnp.ones((2, 3)), jnp.ones((4, 5)))
  with pytest.raises(ValueError, match="output subscript 'z' does not appear"):
    jnp.einsum('ij->z', jnp.ones((2, 3)))
  with pytest.raises(ValueError, match="more than once"):
    jnp.einsum('ij->ii', jnp.ones((2, 3)))
  with pytest.raises(ValueError, match="letters"):
    jnp.einsum('i1->i', jnp.ones((2, 3)))

# ---------------------------------------------------------------- norm
@pytest.mark.parametrize('ord_', [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5])
@pytest.mark.parametrize('axis', [None, 0, -1])
def test_vector_norms(ord_, axis):
  x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
  x[0, 1] = 0
  if axis is None and ord_ is not None:
    close(jnp.linalg.norm(jnp.asarray(x[0]), ord_), np.linalg.norm(x[0], ord_), 1e-4)
  else:
    close(jnp.linalg.norm(jnp.asarray(x), ord_, axis), np.linalg.norm(x, ord_, axis), 1e-4)
  close(jnp.linalg.norm(jnp.asarray(x), ord_, axis if axis is not None else 1, keepdims=True),
        np.linalg.norm(x, ord_, axis if axis is not None else 1, keepdims=True), 1e-4)

@pytest.mark.parametrize('ord_', [None, 'fro', 1, -1, np.inf, -np.inf])
def test_matrix_norms(ord_):
  x = np.random.default_rng(4).standard_normal((3, 4, 5)).astype(np.float32)
  close(jnp.linalg.norm(jnp.asarray(x[0]), ord_), np.linalg.norm(x[0], ord_), 1e-4)
  close(jnp.linalg.norm(jnp.asarray(x), ord_, (2, 0)), np.linalg.norm(x, ord_, (2, 0)), 1e-4)
  want = np.linalg.norm(x, ord_, (1, 2), keepdims=True)
  close(jnp.linalg.norm(jnp.asarray(x), ord_, (1, 2), keepdims=True), want, 1e-4)
  close(jnp.linalg.matrix_norm(jnp.asarray(x), ord='fro' if ord_ is None else ord_),
        np.linalg.matrix_norm(x, ord='fro' if ord_ is None else ord_), 1e-4)

@pytest.mark.parametrize("ord_", ['nuc', 2, -2])
@pytest.mark.parametrize("axis", [(1, 2), (2, 1), (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norms_from_singular_values(ord_, axis, keepdims):
  a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
  want = np.linalg.norm(a.astype(np.float64), ord=ord_, axis=axis, keepdims=keepdims)
  got = np.asarray(jnp.linalg.norm(jnp.asarray(a), ord=ord_, axis=axis, keepdims=keepdims))
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, rtol=2e-5)

def test_norm_of_ints_and_errors():
  assert float(jnp.linalg.norm(jnp.asarray([3, 4]))) == 5.0
  assert float(jnp.linalg.vector_norm(jnp.asarray([[3, 4]]))) == 5.0
  with pytest.raises(ValueError, match="not a matrix norm"):
    jnp.linalg.norm(jnp.ones((2, 2)), 3)
  with pytest.raises(ValueError, match="needs axis="):
    jnp.linalg.norm(jnp.ones((2, 2, 2)), 1)
  with pytest.raises(ValueError, match="must differ"):
    jnp.linalg.norm(jnp.ones((2, 2)), 1, (0, -2))
  assert not hasattr(jnp, 'norm')

def test_doctests():
  from tinyjx.numpy import products
  for module in (linalg, products):
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__
