"""vmap against a Python loop: `vmap(f)(xs)` must equal stacking `f(x)` for each example, for every array-level
op (built directly as UOps, so each batch rule is reached), with the mapped axis drawn at every position
(negative ones too) and some arguments unmapped. Then in_axes/out_axes pytree prefixes, nesting, axis_size,
axis_name, memoization, and the errors vmap promises."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import vmap, dtypes
from tinyjx.array import Array, ConcretizationError
from tinyjx.uop import UOp, Ops, GroupOp, fresh_id, toposort
from tinyjx.transforms import batching
from conftest import examples

FEW = settings(max_examples=examples(12), deadline=None)
MANY = settings(max_examples=examples(40), deadline=None)

# ---------------------------------------------------------------- value generators and node builders

def floats(lo=-2.0, hi=2.0): return lambda rng, shape: rng.uniform(lo, hi, shape).astype(np.float32)
def ints(lo, hi): return lambda rng, shape: rng.integers(lo, hi, shape).astype(np.int32)  # hi exclusive
def bools(): return lambda rng, shape: rng.random(shape) < 0.5

def arr(x) -> Array: return jnp.asarray(x)   # one example of a vector is a numpy scalar: it must stay 0-d
def u(x) -> UOp: return arr(x).uop
def node(op, *xs, dtype=None, arg=None) -> Array:
  srcs = tuple(u(x) for x in xs)
  return Array(UOp(op, dtype or srcs[0].dtype, srcs, arg))

shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)
nonempty_shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)

# ---------------------------------------------------------------- the loop oracle

def insert_axis(shape, axis, n):
  axis = axis % (len(shape) + 1)
  return shape[:axis] + (n,) + shape[axis:]

def make_args(specs, axes, n, rng):
  return [gen(rng, shape if ax is None else insert_axis(shape, ax, n)) for (shape, gen), ax in zip(specs, axes)]

def loop(f, args, axes, n):
  """Stack f over the examples: example i takes slice i of each mapped argument, the whole of the others."""
  def example(i): return [a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes)]
  return np.stack([np.asarray(f(*[arr(x) for x in example(i)])) for i in range(n)])

def assert_same(got, ref):
  got_np = np.asarray(got)
  assert got_np.shape == ref.shape, (got_np.shape, ref.shape)
  assert got_np.dtype == ref.dtype, (got_np.dtype, ref.dtype)
  if got_np.dtype.kind == 'f': np.testing.assert_allclose(got_np, ref, rtol=1e-5, atol=1e-6, equal_nan=True)
  else: np.testing.assert_array_equal(got_np, ref)

def draw_axes(draw, specs):
  """A mapped axis (any position, negative included) or None per argument; at least one is mapped."""
  axes = [draw(st.one_of(st.none(), st.integers(-len(s) - 1, len(s)))) for s, _ in specs]
  if all(a is None for a in axes):
    k = draw(st.integers(0, len(axes) - 1))
    axes[k] = draw(st.integers(-len(specs[k][0]) - 1, len(specs[k][0])))
  return axes

def check_case(draw, f, specs):
  axes = draw_axes(draw, specs)
  n = draw(st.integers(1, 3))
  rng = np.random.default_rng(draw(st.integers(0, 2**16)))
  args = make_args(specs, axes, n, rng)
  assert_same(vmap(f, in_axes=tuple(axes))(*args), loop(f, args, axes, n))

# ---------------------------------------------------------------- elementwise family

UNARY_FLOAT = sorted(GroupOp.Unary - {Ops.NOT}, key=lambda o: o.name)
BINARY_FLOAT = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.REM, Ops.POW, Ops.MAX, Ops.MIN, Ops.ATAN2,
                Ops.CMPLT, Ops.CMPLE, Ops.CMPEQ, Ops.CMPNE]
BINARY_INT = [Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR]

@pytest.mark.parametrize("op", UNARY_FLOAT, ids=lambda o: o.name)
@FEW
@given(st.data())
def test_unary(op, data):
  shape = data.draw(shapes)
  check_case(data.draw, lambda x: Array(u(x).alu(op)), [(shape, floats(0.1, 0.9))])

@FEW
@given(st.data())
def test_not(data):
  shape = data.draw(shapes)
  check_case(data.draw, lambda x: Array(u(x).alu(Ops.NOT)), [(shape, bools())])

@pytest.mark.parametrize("op", BINARY_FLOAT, ids=lambda o: o.name)
@FEW
@given(st.data())
def test_binary_float(op, data):
  shape = data.draw(shapes)
  check_case(data.draw, lambda x, y: Array(u(x).alu(op, u(y))), [(shape, floats(0.5, 2.0)), (shape, floats(0.5, 2.0))])

@pytest.mark.parametrize("op", BINARY_INT, ids=lambda o: o.name)
@FEW
@given(st.data())
def test_binary_int(op, data):
  shape = data.draw(shapes)
  check_case(data.draw, lambda x, y: Array(u(x).alu(op, u(y))), [(shape, ints(-50, 50)), (shape, ints(0, 8))])

@pytest.mark.parametrize("to", [dtypes.int32, dtypes.bool_, dtypes.float16], ids=str)
@FEW
@given(st.data())
def test_cast(to, data):
  shape = data.draw(shapes)
  check_case(data.draw, lambda x: Array(u(x).cast(to)), [(shape, floats(-5.0, 5.0))])

@FEW
@given(st.data())
def test_bitcast(data):
  shape = data.draw(shapes)
  check_case(data.draw, lambda x: node(Ops.BITCAST, x, dtype=dtypes.int32), [(shape, floats())])

@MANY
@given(st.data())
def test_where(data):
  shape = data.draw(shapes)
  f = lambda c, a, b: node(Ops.WHERE, c, a, b, dtype=dtypes.float32)
  check_case(data.draw, f, [(shape, bools()), (shape, floats()), (shape, floats())])

# ---------------------------------------------------------------- reductions, scans, sorting

@MANY
@given(st.data())
def test_reduce(data):
  shape = data.draw(shapes)
  axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))) if shape else ()
  op = data.draw(st.sampled_from([Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN]))
  if not axes: return
  check_case(data.draw, lambda x: node(Ops.REDUCE, x, arg=(op, axes)), [(shape, floats())])

@MANY
@given(st.data())
def test_cumulative(data):
  shape = data.draw(nonempty_shapes)
  axis, reverse = data.draw(st.integers(0, len(shape) - 1)), data.draw(st.booleans())
  op = data.draw(st.sampled_from([Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN]))
  check_case(data.draw, lambda x: node(Ops.CUMULATIVE, x, arg=(op, axis, reverse)), [(shape, floats())])

@MANY
@given(st.data())
def test_argsort(data):
  shape = data.draw(nonempty_shapes)
  arg = (data.draw(st.integers(0, len(shape) - 1)), data.draw(st.booleans()))
  ties = lambda rng, s: rng.integers(0, 3, s).astype(np.float32)   # many ties: the sort must stay stable
  check_case(data.draw, lambda x: node(Ops.ARGSORT, x, dtype=dtypes.int32, arg=arg), [(shape, ties)])

# ---------------------------------------------------------------- movement ops

@MANY
@given(st.data())
def test_reshape(data):
  shape = data.draw(shapes)
  size = int(np.prod(shape))
  target = data.draw(st.sampled_from([(size,), tuple(reversed(shape)), (1,) + shape + (1,)]))
  check_case(data.draw, lambda x: Array(u(x).reshape(target)), [(shape, floats())])

@MANY
@given(st.data())
def test_permute(data):
  shape = data.draw(shapes)
  perm = tuple(data.draw(st.permutations(range(len(shape)))))
  check_case(data.draw, lambda x: Array(u(x).permute(perm)), [(shape, floats())])

@MANY
@given(st.data())
def test_expand(data):
  shape = data.draw(st.lists(st.sampled_from([1, 2]), min_size=0, max_size=3).map(tuple))
  target = tuple(data.draw(st.integers(0, 3)) if s == 1 else s for s in shape)
  check_case(data.draw, lambda x: Array(u(x).expand(target)), [(shape, floats())])

@MANY
@given(st.data())
def test_pad(data):
  shape = data.draw(shapes)
  pads = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape)
  check_case(data.draw, lambda x: Array(u(x).pad(pads)), [(shape, floats())])

@MANY
@given(st.data())
def test_shrink(data):
  shape = data.draw(shapes)
  bounds = []
  for s in shape:
    lo = data.draw(st.integers(0, s))
    bounds.append((lo, data.draw(st.integers(lo, s))))
  check_case(data.draw, lambda x: Array(u(x).shrink(bounds)), [(shape, floats())])

@MANY
@given(st.data())
def test_flip(data):
  shape = data.draw(shapes)
  axes = tuple(sorted(data.draw(st.sets(st.integers(0, max(len(shape) - 1, 0)), max_size=len(shape)))))
  check_case(data.draw, lambda x: Array(u(x).flip(axes)), [(shape, floats())])

# ---------------------------------------------------------------- dot_general, gather, scatter

def dot_cases(m, k, n, b):
  """(lhs shape, rhs shape, dimension numbers): matvec, matmul, contracting axis 0, outer, batched matmul."""
  return [((m, k), (k,), (((1,), (0,)), ((), ()))),
          ((m, k), (k, n), (((1,), (0,)), ((), ()))),
          ((k, m), (k, n), (((0,), (0,)), ((), ()))),
          ((m,), (n,), (((), ()), ((), ()))),
          ((b, m, k), (b, k, n), (((2,), (1,)), ((0,), (0,)))),
          ((m, b, k), (k, b), (((2,), (0,)), ((1,), (1,))))]

@MANY
@given(st.data())
def test_dot_general(data):
  dims = [data.draw(st.integers(1, 3)) for _ in range(4)]
  lshape, rshape, arg = data.draw(st.sampled_from(dot_cases(*dims)))
  f = lambda a, b: node(Ops.DOT_GENERAL, a, b, arg=arg)
  check_case(data.draw, f, [(lshape, floats()), (rshape, floats())])

@MANY
@given(st.data())
def test_gather(data):
  rows, rest, ishape = data.draw(st.integers(0, 3)), data.draw(shapes), data.draw(shapes)
  f = lambda x, i: node(Ops.GATHER, x, i)
  # indices past both ends: GATHER clamps them, per example, also when the batch is flattened into one axis
  check_case(data.draw, f, [((rows,) + rest, floats()), (ishape, ints(-2, rows + 2))])

@pytest.mark.parametrize("mode", ['add', 'set', 'mul', 'min', 'max'])
@FEW
@given(st.data())
def test_scatter(mode, data):
  rows, rest = data.draw(st.integers(1, 3)), data.draw(st.lists(st.integers(1, 2), max_size=2).map(tuple))
  ishape = data.draw(st.lists(st.integers(0, 3), max_size=2).map(tuple))
  f = lambda x, i, v: node(Ops.SCATTER, x, i, v, arg=mode)
  # out-of-range indices are dropped, and must not land in a neighbouring example's rows
  specs = [((rows,) + rest, floats()), (ishape, ints(-1, rows + 1)), (ishape + rest, floats())]
  check_case(data.draw, f, specs)

# ---------------------------------------------------------------- leaves and identities

@FEW
@given(st.data())
def test_iota_and_const_combine_with_batched(data):
  shape = data.draw(nonempty_shapes)
  iota = UOp(Ops.IOTA, dtypes.float32, (), (shape, len(shape) - 1))
  f = lambda x: Array(u(x).alu(Ops.ADD, iota).alu(Ops.MUL, UOp.const(2.0, dtypes.float32, shape)))
  check_case(data.draw, f, [(shape, floats())])

def test_tag_keeps_its_id_and_wraps_the_batched_source():
  tag = fresh_id()
  xs = np.arange(6.0, dtype=np.float32).reshape(2, 3)
  out = vmap(lambda x: Array(UOp(Ops.TAG, dtypes.float32, (u(x),), tag)).__mul__(2.0), in_axes=1)(xs)
  tags = [n for n in toposort([out.uop]) if n.op is Ops.TAG]
  assert [t.arg for t in tags] == [tag] and tags[0].shape == (2, 3)
  np.testing.assert_allclose(np.asarray(out), (xs * 2.0).T)

def test_stop_gradient_passes_through():
  x = UOp(Ops.PARAM, dtypes.float32, (), (0, (4, 3), fresh_id()))
  per_example = UOp(Ops.STOP_GRADIENT, dtypes.float32, (UOp(Ops.PARAM, dtypes.float32, (), (0, (3,), 7)),))
  new, bdim = batching.batch_rules[Ops.STOP_GRADIENT](per_example, [x], [0])
  assert (new.op, new.arg, new.src, bdim) == (Ops.STOP_GRADIENT, None, (x,), 0)

class FakeOuts:
  """The arg of a stand-in multi-output node: output avals, hashable, as control-flow args are."""
  def __init__(self, out_avals): self.out_avals = tuple(out_avals)
  def __eq__(self, o): return isinstance(o, FakeOuts) and o.out_avals == self.out_avals
  def __hash__(self): return hash(self.out_avals)
  def __repr__(self): return f"FakeOuts({self.out_avals})"

def test_getitem_picks_the_bdim_of_its_output(monkeypatch):
  def multi_batch(node, srcs, bdims):   # a multi-output rule: one bdim per output, here the inputs' own
    avals = tuple((s.shape, s.dtype) for s in srcs)
    return node.replace(src=tuple(srcs), arg=FakeOuts(avals)), tuple(bdims)
  monkeypatch.setitem(batching.batch_rules, Ops.CHECKPOINT, multi_batch)
  p, q = (UOp(Ops.PARAM, dtypes.float32, (), (i, s, 99)) for i, s in enumerate([(3,), (2,)]))
  multi = UOp(Ops.CHECKPOINT, dtypes.float32, (p, q), FakeOuts([((3,), dtypes.float32), ((2,), dtypes.float32)]))
  picks = [UOp(Ops.GETITEM, dtypes.float32, (multi,), i) for i in range(2)]
  bp, bq = UOp(Ops.PARAM, dtypes.float32, (), (0, (3, 5), 98)), UOp(Ops.PARAM, dtypes.float32, (), (1, (4, 2), 98))
  outs, bdims = batching.batch_graph(picks, [p, q], [bp, bq], [1, 0])
  assert [o.shape for o in outs] == [(3, 5), (4, 2)] and bdims == [1, 0]

# ---------------------------------------------------------------- through tinyjx.numpy

@MANY
@given(st.data())
def test_numpy_functions(data):
  shape = data.draw(nonempty_shapes)
  def f(x, y):
    z = jnp.where(x > y, jnp.exp(x) - y * 2, jnp.sum(y, axis=-1, keepdims=True))
    cum = jnp.max(jnp.cumsum(x, axis=-1), axis=-1)
    return jnp.mean(z, axis=-1) + jnp.argmax(x, axis=-1).astype(jnp.float32) + cum - jnp.std(y, axis=-1)
  check_case(data.draw, f, [(shape, floats()), (shape, floats())])

def test_python_scalar_and_weak_type_with_unmapped_argument():
  xs = np.arange(3.0, dtype=np.float32)
  out = vmap(lambda x, y: x * y, in_axes=(0, None))(xs, 2.0)
  assert out.dtype is dtypes.float32 and out.tolist() == [0.0, 2.0, 4.0]

# ---------------------------------------------------------------- pytrees, in_axes, out_axes

def test_pytree_in_axes_prefix_and_pytree_outputs():
  rng = np.random.default_rng(0)
  params = {'w': rng.normal(size=(4, 2)).astype(np.float32), 'b': rng.normal(size=(2,)).astype(np.float32)}
  xs = rng.normal(size=(3, 4)).astype(np.float32)
  def f(p, x): return {'sum': jnp.sum(p['w']) * jnp.sum(x), 'pair': (p['b'] + jnp.sum(x), x * 2.0)}
  out = vmap(f, in_axes=({'w': 0, 'b': None}, 1), out_axes={'sum': 0, 'pair': (1, -1)})(params, xs)
  assert out['sum'].shape == (4,) and out['pair'][0].shape == (2, 4) and out['pair'][1].shape == (3, 4)
  for i in range(4):
    ref = f({'w': jnp.asarray(params['w'][i]), 'b': jnp.asarray(params['b'])}, jnp.asarray(xs[:, i]))
    np.testing.assert_allclose(np.asarray(out['sum'])[i], np.asarray(ref['sum']), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(out['pair'][0])[:, i], np.asarray(ref['pair'][0]), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(out['pair'][1])[..., i], np.asarray(ref['pair'][1]), rtol=1e-5)

def test_namedtuple_arguments_and_outputs():
  import collections
  Pair = collections.namedtuple('Pair', 'a b')
  p = Pair(np.arange(6.0, dtype=np.float32).reshape(3, 2), np.float32(2.0) * np.ones(2, np.float32))
  out = vmap(lambda q: Pair(q.a * q.b, jnp.sum(q.a)), in_axes=(Pair(0, None),), out_axes=Pair(1, 0))(p)
  assert isinstance(out, Pair) and out.a.shape == (2, 3) and out.b.shape == (3,)
  np.testing.assert_allclose(np.asarray(out.a), (p.a * p.b).T)
  np.testing.assert_allclose(np.asarray(out.b), p.a.sum(1))

def test_in_axes_list_is_a_tuple_and_kwargs_map_over_axis_0():
  xs, ys = np.arange(6.0, dtype=np.float32).reshape(3, 2), np.arange(3.0, dtype=np.float32)
  out = vmap(lambda x, s, b=None: x * s + b, in_axes=[0, None])(xs, 2.0, b=ys)
  np.testing.assert_allclose(np.asarray(out), xs * 2.0 + ys[:, None])

def test_unbatched_output_is_broadcast_and_out_axes_none_returns_it_whole():
  xs = np.ones((3, 2), np.float32)
  a, b = vmap(lambda x, c: (jnp.sum(x) * 0 + 1.0, c), in_axes=(0, None), out_axes=(-1, None))(xs, 5.0)
  assert a.shape == (3,) and np.asarray(b).shape == () and float(b) == 5.0
  c = vmap(lambda x: jnp.full((2,), 7.0), out_axes=1)(np.ones((4, 2), np.float32))
  assert c.shape == (2, 4) and c.tolist() == [[7.0] * 4] * 2

def test_axis_size_with_no_mapped_argument():
  out = vmap(lambda c: c * 2.0, in_axes=None, axis_size=3)(np.float32(1.5))
  assert out.tolist() == [3.0, 3.0, 3.0]

def test_out_axes_move_the_batch_axis():
  xs = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
  for out_axis in range(-3, 3):
    out = vmap(lambda x: x + 1.0, in_axes=1, out_axes=out_axis)(xs)
    np.testing.assert_array_equal(np.asarray(out), np.moveaxis(np.moveaxis(xs, 1, 0) + 1.0, 0, out_axis))

def test_identity_returns_the_argument_with_its_axis_moved():
  xs = np.arange(6.0, dtype=np.float32).reshape(2, 3)
  np.testing.assert_array_equal(np.asarray(vmap(lambda a: a, in_axes=1)(xs)), xs.T)
  np.testing.assert_array_equal(np.asarray(vmap(lambda a: a, in_axes=1, out_axes=1)(xs)), xs)

def test_size_zero_batch():
  out = vmap(lambda x: jnp.sum(x * 2.0))(np.zeros((0, 3), np.float32))
  assert out.shape == (0,)

# ---------------------------------------------------------------- nesting and context

def test_nested_vmap_outer_product_and_closure():
  xs, ys = np.arange(3.0, dtype=np.float32), np.arange(4.0, dtype=np.float32) + 1
  out = vmap(lambda x: vmap(lambda y: x * y + jnp.sin(x))(ys))(xs)
  np.testing.assert_allclose(np.asarray(out), np.outer(xs, ys) + np.sin(xs)[:, None], rtol=1e-6)

@FEW
@given(st.data())
def test_nested_vmap_equals_double_loop(data):
  shape = data.draw(nonempty_shapes)
  a1, a2 = data.draw(st.integers(-len(shape) - 2, len(shape) + 1)), data.draw(st.integers(-len(shape) - 1, len(shape)))
  rng = np.random.default_rng(data.draw(st.integers(0, 999)))
  x = rng.normal(size=insert_axis(insert_axis(shape, a2, 2), a1, 3)).astype(np.float32)
  f = lambda v: jnp.sum(jnp.exp(v) * v, axis=-1)
  ref = np.stack([np.stack([np.asarray(f(arr(np.take(np.take(x, i, a1), j, a2)))) for j in range(2)])
                  for i in range(3)])
  np.testing.assert_allclose(np.asarray(vmap(vmap(f, in_axes=a2), in_axes=a1)(x)), ref, rtol=1e-5, atol=1e-6)

def test_axis_name_and_size_are_visible_while_tracing():
  seen = []
  def f(x):
    seen.append((batching.axis_names(), batching.current_axis_size(), batching.axis_size('rows')))
    return x
  vmap(vmap(f, axis_name='cols'), axis_name='rows')(np.ones((2, 5), np.float32))
  assert seen == [(('rows', 'cols'), 5, 2)] and batching.axis_stack == []
  with pytest.raises(NameError, match="'rows', 'cols'"):
    vmap(vmap(lambda x: batching.axis_size('k') * x, axis_name='cols'), axis_name='rows')(np.ones((2, 5)))

def test_rewrite_is_memoized_by_content():
  f = lambda x: jnp.sum(jnp.tanh(x) * 3.0, axis=0)
  vmap(f, in_axes=1)(np.ones((4, 3), np.float32))
  before = dict(batching.cache_stats)
  out = vmap(f, in_axes=1)(np.full((4, 3), 2.0, np.float32))
  assert batching.cache_stats['misses'] == before['misses'] and batching.cache_stats['hits'] == before['hits'] + 1
  np.testing.assert_allclose(np.asarray(out), np.full(3, 4 * np.tanh(2.0) * 3.0), rtol=1e-6)

def test_make_jaxpr_shows_the_batched_graph():
  text = str(tinyjx.make_jaxpr(vmap(lambda x: jnp.sum(jnp.sin(x)), in_axes=1))(np.ones((4, 3), np.float32)))
  assert "f32[4,3] = sin" in text and "reduce_sum[axes=(0,)]" in text

# ---------------------------------------------------------------- errors

def test_python_branch_raises_concretization_error_with_the_fix():
  with pytest.raises(ConcretizationError, match=r"jnp\.where.*lax\.cond"):
    vmap(lambda x: x if x > 0 else -x)(np.ones(3, np.float32))
  assert vmap(lambda x, flag: x if flag > 0 else -x, in_axes=(0, None))(np.ones(2, np.float32), 1.0).tolist() == [1, 1]

def test_a_leaked_tracer_raises_after_vmap_returns():
  leaked = []
  vmap(lambda x: leaked.append(x) or x * 2.0)(np.ones((3, 2), np.float32))
  with pytest.raises(tinyjx.UnexpectedTracerError, match=r"vmap\(<lambda>\)"):
    np.asarray(leaked[0] + 1.0)

def test_in_axes_structure_mismatch_names_the_path():
  with pytest.raises(ValueError, match=r"in_axes\[0\]\['b'\].*tuple of 2 entries.*tuple of 3 entries"):
    vmap(lambda p: p['a'], in_axes=({'a': 0, 'b': (0, 0)},))({'a': np.ones(2), 'b': (np.ones(2),) * 3})
  with pytest.raises(ValueError, match=r"in_axes\[0\].*keys \('y',\).*keys \('x',\)"):
    vmap(lambda a: a['x'], in_axes=({'y': 0},))({'x': np.ones(3)})
  with pytest.raises(ValueError, match=r"len\(in_axes\)=1 for 2 positional"):
    vmap(lambda a, b: a + b, in_axes=(0,))(np.ones(3), np.ones(3))
  with pytest.raises(TypeError, match=r"in_axes\[0\].*0\.5"):
    vmap(lambda a: a, in_axes=(0.5,))(np.ones(3))

def test_inconsistent_sizes_name_the_arguments_and_sizes():
  with pytest.raises(ValueError, match=r"size 3: axis 0 of argument a\['p'\].*\n.*size 5: axis 0 of argument a\['q'\]"):
    vmap(lambda a, b: a['p'] + b)({'p': np.ones(3), 'q': np.ones(5)}, np.ones(3))
  with pytest.raises(ValueError, match=r"size 4: the axis_size argument"):
    vmap(lambda a: a, axis_size=4)(np.ones((3, 2)))
  with pytest.raises(ValueError, match=r"at least one non-None value in in_axes"):
    vmap(lambda a: a, in_axes=None)(np.ones(3))

def test_axis_out_of_range_for_the_argument_rank():
  with pytest.raises(ValueError, match=r"argument a along axis -3.*shape is \(3, 2\)"):
    vmap(lambda a: a, in_axes=-3)(np.ones((3, 2)))
  with pytest.raises(ValueError, match=r"argument a along axis 0.*shape is \(\)"):
    vmap(lambda a: a)(1.0)

def test_out_axes_none_for_a_batched_output():
  with pytest.raises(ValueError, match=r"out_axes\[0\] is None, but that output is batched"):
    vmap(lambda a, b: (a, b), in_axes=(0, None), out_axes=(None, 0))(np.ones(3), np.ones(4))
  with pytest.raises(ValueError, match=r"out_axes must be a pytree prefix of the outputs: at out_axes it is a tuple"):
    vmap(lambda a: a, out_axes=(0, 0))(np.ones(3))

# ---------------------------------------------------------------- indexing, .at[] updates, sorting, linear algebra

def softmax(x):
  from tinyjx import nn
  return nn.softmax(x, axis=-1)

def logsumexp(x):
  from tinyjx import nn
  return nn.logsumexp(x, axis=0)

NUMPY_CASES = {
  'getitem_int': (lambda x: x[1], [((3, 4), floats())]),
  'getitem_slices': (lambda x: x[::2, -3:], [((3, 4), floats())]),
  'getitem_none_ellipsis': (lambda x: x[None, ..., -1], [((2, 3, 4), floats())]),
  'getitem_advanced': (lambda x, i: x[i], [((4, 2), floats()), ((3,), ints(-4, 4))]),
  'getitem_mixed': (lambda x, i: x[1:, i], [((3, 4), floats()), ((2, 2), ints(-4, 4))]),
  'at_set': (lambda x, i, v: x.at[i].set(v), [((4, 2), floats()), ((3,), ints(0, 4)), ((3, 2), floats())]),
  'at_add_duplicates': (lambda x, i, v: x.at[i].add(v), [((3,), floats()), ((5,), ints(0, 3)), ((5,), floats())]),
  'at_mul': (lambda x, i, v: x.at[i].mul(v), [((3, 2), floats()), ((2,), ints(0, 3)), ((2, 2), floats())]),
  'at_min_max': (lambda x, i, v: x.at[i].min(v) + x.at[i].max(v), [((4,), floats()), ((3,), ints(0, 4)),
                                                                  ((3,), floats())]),
  'at_get': (lambda x, i: x.at[i].get(), [((4, 3), floats()), ((2,), ints(0, 4))]),
  'take': (lambda x, i: jnp.take(x, i, axis=1), [((2, 4), floats()), ((3,), ints(0, 4))]),
  'take_along_axis': (lambda x, i: jnp.take_along_axis(x, i, axis=1), [((2, 4), floats()), ((2, 3), ints(0, 4))]),
  'sort': (lambda x: jnp.sort(x, axis=-1), [((3, 4), lambda rng, s: rng.integers(0, 3, s).astype(np.float32))]),
  'argsort': (lambda x: jnp.argsort(x, axis=0), [((4, 2), lambda rng, s: rng.integers(0, 3, s).astype(np.float32))]),
  'matmul': (lambda a, b: a @ b, [((3, 4), floats()), ((4, 2), floats())]),
  'matvec': (lambda a, b: jnp.matmul(a, b), [((3, 4), floats()), ((4,), floats())]),
  'batched_matmul': (lambda a, b: a @ b, [((2, 3, 4), floats()), ((2, 4, 3), floats())]),
  'dot_vectors': (lambda a, b: jnp.dot(a, b), [((4,), floats()), ((4,), floats())]),
  'einsum_contract': (lambda a, b: jnp.einsum('ij,jk->ki', a, b), [((3, 4), floats()), ((4, 2), floats())]),
  'einsum_diagonal': (lambda a: jnp.einsum('ii->i', a), [((3, 3), floats())]),
  'tensordot': (lambda a, b: jnp.tensordot(a, b, axes=2), [((2, 3, 4), floats()), ((3, 4), floats())]),
  'outer': (lambda a, b: jnp.outer(a, b), [((3,), floats()), ((2,), floats())]),
  'concatenate': (lambda a, b: jnp.concatenate([a, b], axis=1), [((2, 3), floats()), ((2, 1), floats())]),
  'stack': (lambda a, b: jnp.stack([a, b], axis=-1), [((2, 3), floats()), ((2, 3), floats())]),
  'pad_reflect': (lambda x: jnp.pad(x, ((1, 2),), mode='reflect'), [((4,), floats())]),
  'pad_edge': (lambda x: jnp.pad(x, ((1, 0), (0, 2)), mode='edge'), [((2, 3), floats())]),
  'tile_repeat_roll': (lambda x: jnp.roll(jnp.repeat(jnp.tile(x, 2), 2), 3), [((3,), floats())]),
  'transpose_moveaxis': (lambda x: jnp.moveaxis(jnp.transpose(x), 0, -1) + 0.0, [((2, 3, 4), floats())]),
  'expand_squeeze_broadcast': (lambda x: jnp.broadcast_to(jnp.squeeze(jnp.expand_dims(x, 0), 0), (2, 3)),
                               [((3,), floats())]),
  'cumprod_argmin': (lambda x: jnp.cumprod(x, axis=0) + jnp.argmin(x, axis=0), [((3, 2), floats())]),
  'softmax': (softmax, [((3, 4), floats(-5, 5))]),
  'logsumexp': (logsumexp, [((4, 2), floats(-5, 5))]),
}

@pytest.mark.parametrize("name", sorted(NUMPY_CASES))
@FEW
@given(st.data())
def test_numpy_indexing_and_linalg(name, data):
  f, specs = NUMPY_CASES[name]
  check_case(data.draw, lambda *xs: f(*[arr(x) for x in xs]), specs)   # unmapped numpy arguments reach f as numpy
