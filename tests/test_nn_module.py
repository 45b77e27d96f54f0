"""nn.Module as a pytree (field order, static fields, containers, masks), and the initializers."""
import dataclasses, math, pickle
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.random as random
from tinyjx import tree_util
import nn
from nn import init

class Block(nn.Module):
  def __init__(self, key):
    k1, k2 = random.split(key)
    self.proj = nn.Linear(2, 2, key=k1)
    self.scale = jnp.full((2,), 0.5)
    self.act = tinyjx.nn.relu
    self.stack = [nn.Linear(2, 2, key=k2), 'tag', math.tau]
    self.table = {'b': jnp.ones(1), 'a': jnp.zeros(1), 'name': 'static'}
    self.size = 2

def test_fields_in_assignment_order_with_paths():
  pairs = tree_util.tree_flatten_with_path(Block(random.PRNGKey(0)))[0]
  paths = [tree_util.keystr(p, simple=True, separator='.') for p, _ in pairs]
  assert paths == ['proj.weight', 'proj.bias', 'scale', 'stack.0.weight', 'stack.0.bias', 'table.a', 'table.b']

def test_static_entries_survive_round_trips():
  b = Block(random.PRNGKey(0))
  leaves, treedef = tree_util.tree_flatten(b)
  back = treedef.unflatten(leaves)
  assert type(back) is Block and back.act is tinyjx.nn.relu and back.size == 2
  assert back.stack[1:] == ['tag', math.tau] and back.table['name'] == 'static'
  assert back.proj.weight is b.proj.weight
  assert hash(treedef) == hash(tree_util.tree_structure(Block(random.PRNGKey(1))))
  assert treedef == tree_util.tree_structure(Block(random.PRNGKey(1)))

def test_static_values_are_part_of_the_structure():
  a, b = Block(random.PRNGKey(0)), Block(random.PRNGKey(0))
  b.size = 3
  assert tree_util.tree_structure(a) != tree_util.tree_structure(b)
  b.size = [2]   # unhashable static values are compared by value
  c = Block(random.PRNGKey(0)); c.size = [2]
  assert tree_util.tree_structure(b) == tree_util.tree_structure(c)

def test_static_fields_are_frozen_once_and_still_follow_their_values():
  # a fixed static (an int, a tuple of ints, a function) keeps its frozen aux data while the field holds the same
  # object, through flatten and unflatten; a static list mutated in place, or a field rebound, is seen again
  b = Block(random.PRNGKey(0))
  b.kernel, b.names = (3, 3), ['x']
  key = lambda m: tree_util.structure_key(m, [])
  k0 = key(b)
  back = tree_util.tree_unflatten(tree_util.tree_structure(b), tree_util.tree_leaves(b))
  assert key(back) == k0 and hash(key(back)) == hash(k0)
  aux = lambda k: {name: st for name, kind, st in k[1] if kind is None}
  assert aux(key(back))['kernel'] is aux(k0)['kernel'] and aux(key(b))['size'] is aux(k0)['size']
  b.names.append('y')                         # a static list changed in place: a new structure
  assert key(b) != k0
  b.names.pop()
  assert key(b) == k0
  b.__dict__['kernel'] = (5, 5)               # rebound without __setattr__ (as object.__setattr__ would)
  assert key(b) != k0 and aux(key(b))['kernel'].value == (5, 5)
  b.kernel = (3, 3)
  assert key(b) == k0
  calls = []
  @tinyjx.jit
  def f(m, x):
    calls.append(1)
    return m.proj(x) * m.kernel[0]
  x = jnp.ones(2)
  y = f(b, x)
  for _ in range(3): y = f(tree_util.tree_map(lambda a: a, b), x)
  assert len(calls) == 1
  b2 = b.replace(kernel=(4, 4))
  np.testing.assert_allclose(np.asarray(f(b2, x)), np.asarray(y) / 3 * 4, rtol=1e-6)
  assert len(calls) == 2

def test_any_leaves_keep_the_structure():
  b = Block(random.PRNGKey(0))
  td = tree_util.tree_structure(b)
  for fill in (0, None, object(), True):
    mapped = tree_util.tree_map(lambda _: fill, b)
    assert type(mapped) is Block and mapped.act is tinyjx.nn.relu and mapped.stack[1] == 'tag'
    if fill is not None: assert tree_util.tree_structure(mapped) == td
  assert nn.combine(*nn.partition(b)).proj.weight is b.proj.weight

def test_container_field_that_changed_shape_is_reclassified():
  b = Block(random.PRNGKey(0))
  tree_util.tree_leaves(b)
  b.stack.append(jnp.ones(3))   # mutated after it was assigned
  assert tree_util.tree_leaves(b)[-3].shape == (3,)

def test_setting_an_array_on_a_static_field_makes_it_a_child():
  b = Block(random.PRNGKey(0))
  b.size = jnp.ones(4)
  assert any(l.shape == (4,) for l in tree_util.tree_leaves(b))

def test_dataclass_modules():
  @dataclasses.dataclass
  class Affine(nn.Module):
    w: object
    b: object
    name: str = 'affine'
    def __call__(self, x): return x * self.w + self.b
  m = Affine(jnp.ones(2), jnp.zeros(2))
  g = tinyjx.grad(lambda m: jnp.sum(m(jnp.full((2,), 3.0))))(m)
  assert isinstance(g, Affine) and np.asarray(g.w).tolist() == [3.0, 3.0] and g.name == 'affine'

def test_pickle_round_trip():
  b = pickle.loads(pickle.dumps(Block(random.PRNGKey(0))))
  assert tree_util.tree_structure(b) == tree_util.tree_structure(Block(random.PRNGKey(0)))

def test_repr_breaks_long_lines():
  text = repr(Block(random.PRNGKey(0)))
  assert text.startswith('Block(\n  proj=Linear(weight=f32[2,2], bias=f32[2], in_features=2, out_features=2),\n')
  assert "act=relu" in text and "'name': 'static'" in text

def test_trainable_mask_partition_combine():
  model = nn.Sequential(nn.Linear(2, 3, key=random.PRNGKey(0)), nn.BatchNorm(3))
  mask = nn.trainable_mask(model)
  assert tree_util.tree_leaves(mask) == [True, True, True, True, False, False]
  params, state = nn.partition(model)
  assert params[1].running_mean is None and state[0].weight is None and state[1].running_var is not None
  assert len(tree_util.tree_leaves(params)) == 4 and len(tree_util.tree_leaves(state)) == 2
  both = nn.combine(params, state)
  assert tree_util.tree_structure(both) == tree_util.tree_structure(model)
  odd, _ = nn.partition(model, lambda x: x.ndim == 2)   # a predicate on leaves works as a mask too
  assert [l.shape for l in tree_util.tree_leaves(odd)] == [(3, 2)]

def test_grad_through_whole_model_with_state():
  model = nn.Sequential(nn.Linear(2, 3, key=random.PRNGKey(0)), nn.BatchNorm(3))
  def loss(m):
    y, m = m(jnp.asarray([[1.0, 2.0], [3.0, -1.0]]), train=True)
    return jnp.sum(y ** 2), m
  grads, new = tinyjx.grad(loss, has_aux=True)(model)
  assert np.all(np.asarray(grads[1].running_mean) == 0)   # statistics get no gradient
  assert not np.allclose(np.asarray(new[1].running_mean), 0)

# ---------------------------------------------------------------- initializers

def test_fans():
  assert init.fans((5,)) == (5, 5) and init.fans((4, 3)) == (3, 4) and init.fans((8, 2, 3, 3)) == (18, 72)

@pytest.mark.parametrize('make, var', [
  (lambda: init.kaiming_uniform(), lambda fi, fo: 1 / (3 * fi)),
  (lambda: init.kaiming_normal(), lambda fi, fo: 2 / fi),
  (lambda: init.glorot_uniform(), lambda fi, fo: 2 / (fi + fo)),
  (lambda: init.glorot_normal(), lambda fi, fo: 2 / (fi + fo)),
  (lambda: init.lecun_normal(), lambda fi, fo: 1 / fi),
  (lambda: init.he_uniform(), lambda fi, fo: 2 / fi),
  (lambda: init.normal(0.5), lambda fi, fo: 0.25),
  (lambda: init.uniform(2.0), lambda fi, fo: 4 / 12 + 1.0),   # second moment of U(0, 2)
])
def test_initializer_variance(make, var):
  shape = (200, 100, 3)
  w = np.asarray(make()(random.PRNGKey(0), shape))
  fi, fo = init.fans(shape)
  assert w.shape == shape and w.dtype == np.float32
  assert abs(np.mean(w ** 2) / var(fi, fo) - 1) < 0.05

def test_initializer_errors_and_constants():
  with pytest.raises(ValueError, match="mode must be 'fan_in'"): init.variance_scaling(1.0, 'fan', 'normal')
  with pytest.raises(ValueError, match='distribution must be'):
    init.variance_scaling(1.0, 'fan_in', 'cauchy')(random.PRNGKey(0), (2, 2))
  assert np.asarray(init.constant(0.25)(None, (2,))).tolist() == [0.25, 0.25]
  assert np.asarray(init.zeros(None, (2,), jnp.int32)).dtype == np.int32
