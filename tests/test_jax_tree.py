"""The `jax.tree` namespace and pytrees with unhashable aux data (a dict from a custom flatten function) through
tree_util, jit's cache (equal aux data hits, different aux data retraces, mutation after the call is seen), grad,
vmap, jvp, control flow and pmap. Expected values are JAX 0.10's, written in as data."""
import inspect
import numpy as np
import pytest
import tinyjx
import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx import tree_util as tu, lax

pytestmark = pytest.mark.usefixtures('semantics_device')

# ---------------------------------------------------------------- jax.tree

def test_tree_namespace_has_jax_names_and_signatures():
  names = ['all', 'broadcast', 'flatten', 'flatten_with_path', 'leaves', 'leaves_with_path', 'map', 'map_with_path',
           'reduce', 'reduce_associative', 'structure', 'transpose', 'unflatten']
  for n in names: assert callable(getattr(jax.tree, n)), n
  params = lambda f: list(inspect.signature(f).parameters)
  assert params(jax.tree.map) == ['f', 'tree', 'rest', 'is_leaf']
  assert params(jax.tree.reduce) == ['function', 'tree', 'initializer', 'is_leaf']
  assert params(jax.tree.transpose) == ['outer_treedef', 'inner_treedef', 'pytree_to_transpose']
  assert params(jax.tree.broadcast) == ['prefix_tree', 'full_tree', 'is_leaf']
  assert params(jax.tree.flatten_with_path) == ['tree', 'is_leaf', 'is_leaf_takes_path']

def test_tree_functions_match_jax():
  tree = {'b': (1, 2), 'a': [3, None]}
  assert jax.tree.leaves(tree) == [3, 1, 2]
  leaves, td = jax.tree.flatten(tree)
  assert jax.tree.unflatten(td, [x * 10 for x in leaves]) == {'a': [30, None], 'b': (10, 20)}
  assert jax.tree.structure(tree) == td and repr(td) == "PyTreeDef({'a': [*, None], 'b': (*, *)})"
  assert jax.tree.map(lambda x, y: x + y, (1, [2]), (10, [20])) == (11, [22])
  assert jax.tree.map(lambda x: x, [(1, 2)], is_leaf=lambda x: isinstance(x, tuple)) == [(1, 2)]
  assert jax.tree.reduce(lambda a, b: a + b, tree) == 6
  assert jax.tree.reduce(lambda a, b: a + b, [], initializer=5) == 5
  assert jax.tree.reduce(lambda a, b: a + [b], [1, 2], [0]) == [0, 1, 2]
  assert jax.tree.all([1, True]) and not jax.tree.all([1, 0])
  assert jax.tree.all([]) is True
  assert jax.tree.broadcast([1, {'a': 2}], [(3, 4), {'a': [5, 6]}]) == [(1, 1), {'a': [2, 2]}]
  assert jax.tree.reduce_associative(lambda a, b: a + b, [1, 2, 3, 4, 5]) == 15
  assert jax.tree.reduce_associative(lambda a, b: a + b, [], identity=0) == 0
  with pytest.raises(TypeError, match='identity='):
    jax.tree.reduce_associative(lambda a, b: a + b, [])

def test_tree_transpose_both_ways():
  outer, inner = jax.tree.structure([0, 0]), jax.tree.structure({'a': 0, 'b': 0})
  tree = [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}]
  assert jax.tree.transpose(outer, inner, tree) == {'a': [1, 3], 'b': [2, 4]}
  assert jax.tree.transpose(outer, None, tree) == {'a': [1, 3], 'b': [2, 4]}
  back = jax.tree.transpose(inner, outer, {'a': [1, 3], 'b': [2, 4]})
  assert back == tree
  with pytest.raises(TypeError, match='tree_transpose'):
    jax.tree.transpose(outer, inner, [1, 2, 3])

def test_tree_paths():
  tree = {'w': [1, 2], 'b': 3}
  got = [(tu.keystr(p), x) for p, x in jax.tree.leaves_with_path(tree)]
  assert got == [("['b']", 3), ("['w'][0]", 1), ("['w'][1]", 2)]
  mapped = jax.tree.map_with_path(lambda p, x: tu.keystr(p), tree)
  assert mapped == {'b': "['b']", 'w': ["['w'][0]", "['w'][1]"]}
  pairs, td = jax.tree.flatten_with_path(tree, is_leaf=lambda p, x: tu.keystr(p) == "['w']", is_leaf_takes_path=True)
  assert [(tu.keystr(p), x) for p, x in pairs] == [("['b']", 3), ("['w']", [1, 2])] and td.num_leaves == 2

def test_tree_util_treedef_helpers():
  td = tu.tree_structure((1, [2, 3]))
  assert tu.treedef_children(td) == [tu.tree_structure(1), tu.tree_structure([1, 2])]
  assert tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure([1, 2])]) == td
  assert repr(tu.treedef_tuple(tu.treedef_children(td))) == 'PyTreeDef((*, [*, *]))'
  with pytest.raises(TypeError, match='element 1 is a list'):
    tu.treedef_tuple([td, [1]])
  assert tu.tree_broadcast is jax.tree.broadcast and tu.tree_transpose is jax.tree.transpose

# ---------------------------------------------------------------- unhashable aux data

class Meta:
  """A pytree whose aux data is a dict: JAX accepts this and compares such treedefs with ==."""
  def __init__(self, x, meta): self.x, self.meta = x, meta

tu.register_pytree_node(Meta, lambda m: ((m.x,), m.meta), lambda meta, kids: Meta(kids[0], meta))

def test_unhashable_aux_treedefs_hash_and_compare():
  a, b, c = (tu.tree_structure(Meta(1.0, {'k': v})) for v in (1, 1, 2))
  assert a == b and hash(a) == hash(b) and a != c
  assert len({a, b, c}) == 2
  assert repr(a) == "PyTreeDef(CustomNode(Meta[{'k': 1}], [*]))"
  assert tu.tree_map(lambda v: v + 1, Meta(1.0, {'k': [1]})).meta == {'k': [1]}
  # equal values of different hashability hash alike: a set and the equal frozenset
  s, f = tu.tree_structure(Meta(0, {1, 2})), tu.tree_structure(Meta(0, frozenset({1, 2})))
  assert s == f and hash(s) == hash(f)

def test_unhashable_aux_numpy_array_is_equal_only_to_itself():
  arr = np.arange(3)
  a, b = tu.tree_structure(Meta(1, arr)), tu.tree_structure(Meta(1, arr))
  assert a == b and hash(a) == hash(b)
  assert a != tu.tree_structure(Meta(1, np.arange(3)))

def test_detached_copies_only_unhashable_aux():
  td = tu.tree_structure((1, Meta(1, {'k': 1})))
  d = td.detached()
  assert d == td and d is not td and d.children()[1].node_data()[1] is not td.children()[1].node_data()[1]
  plain = tu.tree_structure({'a': (1, 2)})
  assert plain.detached() is plain

def test_jit_caches_on_unhashable_aux_by_value():
  traces = []
  @jax.jit
  def f(m):
    traces.append(1)
    return m.x * m.meta['a']
  assert float(f(Meta(jnp.float32(1.0), {'a': 2}))) == 2.0
  assert float(f(Meta(jnp.float32(3.0), {'a': 2}))) == 6.0   # an equal (new) dict: a hit
  assert len(traces) == 1
  assert float(f(Meta(jnp.float32(1.0), {'a': 3}))) == 3.0   # a different dict: a retrace
  assert len(traces) == 2
  meta = {'a': 4}
  assert float(f(Meta(jnp.float32(1.0), meta))) == 4.0
  meta['a'] = 5                                              # mutated in place after the call
  assert float(f(Meta(jnp.float32(1.0), meta))) == 5.0       # not the stale trace of {'a': 4}
  assert len(traces) == 4
  assert float(f(Meta(jnp.float32(2.0), {'a': 4}))) == 8.0   # {'a': 4} is still cached
  assert len(traces) == 4

def test_jit_returns_unhashable_aux_outputs():
  f = jax.jit(lambda m: Meta(m.x + 1, dict(m.meta, seen=True)))
  out = f(Meta(jnp.float32(1.0), {'a': 1}))
  assert out.meta == {'a': 1, 'seen': True} and float(out.x) == 2.0

def test_grad_vmap_jvp_with_unhashable_aux():
  loss = lambda m: m.x ** 2 * m.meta['scale']
  g = jax.grad(loss)(Meta(jnp.float32(3.0), {'scale': 2.0}))
  assert isinstance(g, Meta) and g.meta == {'scale': 2.0} and float(g.x) == 12.0
  ys = jax.vmap(loss)(Meta(jnp.arange(3.0), {'scale': 2.0}))
  assert np.asarray(ys).tolist() == [0.0, 2.0, 8.0]
  ys = jax.vmap(loss, in_axes=(Meta(0, {'scale': 2.0}),))(Meta(jnp.arange(3.0), {'scale': 2.0}))
  assert np.asarray(ys).tolist() == [0.0, 2.0, 8.0]
  primal, tangent = jax.jvp(loss, (Meta(jnp.float32(3.0), {'scale': 2.0}),), (Meta(jnp.float32(1.0), {'scale': 2.0}),))
  assert float(primal) == 18.0 and float(tangent) == 12.0
  jg = jax.jit(jax.grad(loss))(Meta(jnp.float32(1.0), {'scale': 3.0}))
  assert float(jg.x) == 6.0

def test_custom_vjp_checkpoint_and_jacfwd_with_unhashable_aux():
  @jax.custom_vjp
  def f(m): return m.x * m.meta['a']
  f.defvjp(lambda m: (f(m), m), lambda m, ct: (Meta(ct * m.meta['a'], m.meta),))
  assert float(jax.jit(jax.grad(f))(Meta(jnp.float32(2.0), {'a': 3.0})).x) == 3.0
  g = jax.grad(jax.checkpoint(lambda m: (m.x ** 2).sum() * m.meta['a']))(Meta(jnp.ones(2), {'a': 2.0}))
  assert np.asarray(g.x).tolist() == [4.0, 4.0]
  jac = jax.jacfwd(lambda m: m.x * m.meta['a'])(Meta(jnp.ones(2), {'a': 2.0}))
  assert np.asarray(jac.x).tolist() == [[2.0, 0.0], [0.0, 2.0]] and jac.meta == {'a': 2.0}

def test_control_flow_carry_with_unhashable_aux():
  def body(i, m): return Meta(m.x + m.meta['step'], m.meta)
  out = lax.fori_loop(0, 3, body, Meta(jnp.float32(0.0), {'step': 2.0}))
  assert float(out.x) == 6.0 and out.meta == {'step': 2.0}
  out = lax.cond(True, lambda m: m, lambda m: Meta(-m.x, m.meta), Meta(jnp.float32(1.0), {'k': [1]}))
  assert float(out.x) == 1.0 and out.meta == {'k': [1]}

@pytest.mark.usefixtures('eight_devices')
def test_pmap_with_unhashable_aux():
  n = tinyjx.device_count()
  f = jax.pmap(lambda m: m.x * m.meta['a'])
  out = f(Meta(jnp.arange(float(n)), {'a': 2.0}))
  assert np.asarray(out).tolist() == [2.0 * i for i in range(n)]
  out = f(Meta(jnp.arange(float(n)), {'a': 3.0}))
  assert np.asarray(out).tolist() == [3.0 * i for i in range(n)]
