"""Tests of tinyjx.tree_util: round trips, registration routes, key paths, maps over several trees, errors."""
import collections, dataclasses, doctest, functools, pickle
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings, strategies as st

import tinyjx.tree_util as tu
from conftest import examples

class Point(NamedTuple):
  x: Any
  y: Any

Pair = collections.namedtuple('Pair', ['first', 'second'])

class Opaque:
  """An unregistered class: a leaf."""

# ---------------------------------------------------------------- round trips

ROUND_TRIP_CASES = [
  1, 'text', None, (), [], {}, (1,), [1, 2], {'b': 1, 'a': 2}, (1, [2, (3, None)], {'k': [4]}),
  Point(1, (2, 3)), Pair([1], {'z': 2}), collections.OrderedDict([('b', 1), ('a', [2, 3])]),
  collections.defaultdict(list, {'b': 1, 'a': (2,)}), [(), [], {}, None], {'a': {}, 'b': [None, ()]},
  Point(None, Point(1, 2)), ((((1,),),),),
]

@pytest.mark.parametrize('tree', ROUND_TRIP_CASES, ids=repr)
def test_round_trip(tree):
  leaves, treedef = tu.tree_flatten(tree)
  back = tu.tree_unflatten(treedef, leaves)
  assert back == tree and type(back) is type(tree)
  assert treedef.num_leaves == len(leaves) == len(tu.tree_leaves(tree))
  assert tu.tree_structure(back) == treedef

def test_leaf_order_follows_sorted_dict_keys_and_field_order():
  assert tu.tree_leaves({'b': 1, 'a': 2, 'c': (3, 4)}) == [2, 1, 3, 4]
  assert tu.tree_leaves(Point(y=2, x=1)) == [1, 2]
  assert tu.tree_leaves(collections.OrderedDict([('b', 1), ('a', 2)])) == [1, 2]
  assert tu.tree_leaves(collections.defaultdict(int, {'b': 1, 'a': 2})) == [2, 1]

def test_dict_comes_back_with_sorted_keys():
  back = tu.tree_map(lambda x: x, {'b': 1, 'a': 2})
  assert list(back) == ['a', 'b']

def test_ordered_dict_keeps_insertion_order_and_order_is_structure():
  od1 = collections.OrderedDict([('b', 1), ('a', 2)])
  od2 = collections.OrderedDict([('a', 2), ('b', 1)])
  assert list(tu.tree_map(lambda x: x, od1)) == ['b', 'a']
  assert tu.tree_structure(od1) != tu.tree_structure(od2)
  assert tu.tree_structure(od1) != tu.tree_structure(dict(od1))

def test_defaultdict_keeps_its_factory():
  dd = tu.tree_map(lambda x: x * 2, collections.defaultdict(list, {'a': 1}))
  assert type(dd) is collections.defaultdict and dd.default_factory is list and dd == {'a': 2}
  assert tu.tree_structure(collections.defaultdict(list, {'a': 1})) != tu.tree_structure(
    collections.defaultdict(set, {'a': 1}))

def test_none_is_an_empty_node_not_a_leaf():
  assert tu.tree_leaves(None) == []
  assert tu.tree_leaves([None, 1, None]) == [1]
  leaves, treedef = tu.tree_flatten(None)
  assert treedef.num_leaves == 0 and treedef.num_nodes == 1 and tu.tree_unflatten(treedef, []) is None
  assert tu.tree_structure(None) != tu.tree_structure(1)
  assert tu.tree_map(lambda x: x + 1, {'a': None, 'b': 1}) == {'a': None, 'b': 2}

def test_unregistered_objects_and_subclasses_are_leaves():
  class MyDict(dict): pass
  class MyTuple(tuple): pass
  o, md, mt = Opaque(), MyDict(a=1), MyTuple((1, 2))
  assert tu.tree_leaves([o, md, mt]) == [o, md, mt]
  assert tu.tree_leaves(Point(md, mt)) == [md, mt]

def test_namedtuple_structure_depends_on_the_class():
  Other = collections.namedtuple('Point', ['x', 'y'])
  assert tu.tree_structure(Point(1, 2)) == tu.tree_structure(Point(3, 4))
  assert tu.tree_structure(Point(1, 2)) != tu.tree_structure(Other(1, 2))
  assert tu.tree_structure(Point(1, 2)) != tu.tree_structure((1, 2))

# hypothesis: random nests of every built-in container
leaf_values = st.one_of(st.integers(), st.text(max_size=3), st.floats(allow_nan=False))
def _extend(children):
  keys = st.text(alphabet='abcde', min_size=1, max_size=2)
  return st.one_of(
    st.lists(children, max_size=4), st.lists(children, max_size=4).map(tuple),
    st.dictionaries(keys, children, max_size=4), st.tuples(children, children).map(lambda t: Point(*t)),
    st.dictionaries(keys, children, max_size=4).map(collections.OrderedDict), st.just(None))
trees = st.recursive(leaf_values, _extend, max_leaves=20)

@settings(max_examples=examples(200), deadline=None)
@given(trees)
def test_round_trip_random_trees(tree):
  leaves, treedef = tu.tree_flatten(tree)
  assert tu.tree_unflatten(treedef, leaves) == tree
  assert tu.tree_structure(tu.tree_unflatten(treedef, leaves)) == treedef
  assert hash(tu.tree_structure(pickle.loads(pickle.dumps(tree)))) == hash(treedef)
  pairs, treedef2 = tu.tree_flatten_with_path(tree)
  assert treedef2 == treedef and [x for _, x in pairs] == leaves
  assert len({tu.keystr(p) for p, _ in pairs}) == len(pairs)
  assert tu.tree_map(lambda x: x, tree) == tree
  assert treedef.num_nodes >= treedef.num_leaves

def _follow(node, key):
  if isinstance(key, tu.GetAttrKey): return getattr(node, key.name)
  return node[key.idx if isinstance(key, tu.SequenceKey) else key.key]

@settings(max_examples=examples(100), deadline=None)
@given(trees)
def test_paths_lead_to_their_leaves(tree):
  for path, leaf in tu.tree_leaves_with_path(tree):
    assert functools.reduce(_follow, path, tree) is leaf

# ---------------------------------------------------------------- is_leaf

def test_is_leaf_stops_descent():
  tree = [(1, 2), {'a': (3,)}, None]
  leaves, treedef = tu.tree_flatten(tree, is_leaf=lambda x: isinstance(x, tuple))
  assert leaves == [(1, 2), (3,)]
  assert tu.tree_unflatten(treedef, ['x', 'y']) == ['x', {'a': 'y'}, None]
  assert tu.tree_leaves(tree, is_leaf=lambda x: x is None) == [1, 2, 3, None]
  assert tu.tree_map(len, tree, is_leaf=lambda x: isinstance(x, tuple)) == [2, {'a': 1}, None]
  assert tu.tree_leaves_with_path(tree, is_leaf=lambda x: isinstance(x, dict))[-1] == ((tu.SequenceKey(1),),
                                                                                       {'a': (3,)})

def test_all_leaves_and_treedef_is_leaf():
  assert tu.all_leaves([1, 'a', Opaque()]) and not tu.all_leaves([1, [2]]) and not tu.all_leaves([None])
  assert tu.all_leaves([(1,), 2], is_leaf=lambda x: isinstance(x, tuple))
  assert tu.treedef_is_leaf(tu.tree_structure(1)) and not tu.treedef_is_leaf(tu.tree_structure([1]))
  assert tu.treedef_is_leaf(tu.tree_structure(None))  # as JAX: a single node

# ---------------------------------------------------------------- PyTreeDef

def test_treedef_repr_matches_jax_format():
  assert repr(tu.tree_structure((1, {'a': 2}))) == "PyTreeDef((*, {'a': *}))"
  assert repr(tu.tree_structure((1,))) == 'PyTreeDef((*,))'
  assert repr(tu.tree_structure([None, ()])) == 'PyTreeDef([None, ()])'
  assert repr(tu.tree_structure(Point(1, [2]))) == 'PyTreeDef(Point(x=*, y=[*]))'
  assert repr(tu.tree_structure(7)) == 'PyTreeDef(*)'
  assert repr(tu.tree_structure(collections.OrderedDict(b=1))) == "PyTreeDef(CustomNode(OrderedDict[('b',)], [*]))"

def test_treedef_equality_and_hash():
  a, b = tu.tree_structure({'a': (1, 2), 'b': None}), tu.tree_structure({'b': None, 'a': ('x', 'y')})
  assert a == b and hash(a) == hash(b) and len({a, b}) == 1
  assert a != tu.tree_structure({'a': [1, 2], 'b': None})
  assert a != tu.tree_structure({'a': (1, 2), 'c': None})
  assert tu.tree_structure((1, 2)) != tu.tree_structure((1, 2, 3))
  assert tu.tree_structure([1]) != tu.tree_structure((1,))
  assert (tu.tree_structure(1) == 'x') is False

def test_treedef_counts_children_compose():
  treedef = tu.tree_structure((1, [2, None], {'a': 3}))
  assert (treedef.num_leaves, treedef.num_nodes) == (3, 7)
  assert treedef.children() == [tu.tree_structure(1), tu.tree_structure([2, None]), tu.tree_structure({'a': 3})]
  assert tu.tree_structure(1).children() == []
  assert treedef.node_data() == (tuple, None) and tu.tree_structure(1).node_data() is None
  assert tu.tree_structure((1, 2)).compose(tu.tree_structure([1, 1])) == tu.tree_structure(([1, 1], [1, 1]))
  assert treedef.unflatten(iter('xyz')) == ('x', ['y', None], {'a': 'z'})

def test_flatten_up_to():
  treedef = tu.tree_structure({'a': 1, 'b': (2, 3)})
  assert treedef.flatten_up_to({'a': [9], 'b': ({'k': 1}, None)}) == [[9], {'k': 1}, None]
  with pytest.raises(ValueError, match=r"at \['b'\]"):
    treedef.flatten_up_to({'a': 1, 'b': [2, 3]})

# ---------------------------------------------------------------- paths and keys

def test_paths_of_each_container():
  tree = {'a': [1, (2,)], 'p': Point(3, None), 'o': collections.OrderedDict(z=4)}
  paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)]
  assert paths == ["['a'][0]", "['a'][1][0]", "['o']['z']", "['p'].x"]

def test_keystr_formats():
  path = (tu.DictKey('a'), tu.SequenceKey(0), tu.GetAttrKey('w'), tu.FlattenedIndexKey(2))
  assert tu.keystr(path) == "['a'][0].w[<flat index 2>]"
  assert tu.keystr(path, simple=True, separator='/') == 'a/0/w/2'
  assert tu.keystr(()) == ''
  assert tu.keystr((tu.DictKey(3),)) == '[3]'

def test_keys_compare_hash_and_repr():
  assert tu.SequenceKey(0) == tu.SequenceKey(0) and tu.SequenceKey(0) != tu.FlattenedIndexKey(0)
  assert hash(tu.DictKey('a')) == hash(tu.DictKey('a')) and tu.DictKey('a') != tu.DictKey('b')
  assert repr(tu.GetAttrKey('w')) == "GetAttrKey(name='w')" and repr(tu.DictKey(1)) == 'DictKey(key=1)'
  assert (tu.SequenceKey(1).idx, tu.DictKey('k').key, tu.GetAttrKey('n').name, tu.FlattenedIndexKey(4).key) == (
    1, 'k', 'n', 4)

def test_tree_map_with_path():
  out = tu.tree_map_with_path(lambda p, x, y: (tu.keystr(p), x + y), {'a': [1, 2]}, {'a': [10, 20]})
  assert out == {'a': [("['a'][0]", 11), ("['a'][1]", 22)]}

# ---------------------------------------------------------------- tree_map over several trees

def test_tree_map_several_trees():
  assert tu.tree_map(lambda a, b, c: a + b + c, (1, {'k': 2}), (10, {'k': 20}), (100, {'k': 200})) == (
    111, {'k': 222})

def test_tree_map_prefix_gives_whole_subtrees():
  out = tu.tree_map(lambda axis, x: (axis, x), {'a': 0, 'b': None}, {'a': [1, (2, 3)], 'b': None})
  assert out == {'a': (0, [1, (2, 3)]), 'b': None}
  assert tu.tree_map(lambda a, b: tu.tree_leaves(b), [1], [{'x': 1, 'y': 2}]) == [[1, 2]]

def test_tree_map_on_bare_leaf_and_empty():
  assert tu.tree_map(lambda x: x * 2, 3) == 6
  assert tu.tree_map(lambda x: x * 2, ()) == ()
  assert tu.tree_map(lambda x: 1 / 0, [None, {}]) == [None, {}]

def test_reduce_all_transpose():
  assert tu.tree_reduce(lambda a, b: a + b, [1, (2, {'a': 3})]) == 6
  assert tu.tree_reduce(lambda a, b: a + b, [], initializer=5) == 5
  with pytest.raises(TypeError, match='initializer'):
    tu.tree_reduce(lambda a, b: a + b, [None])
  assert tu.tree_all([True, {'a': 1}]) and not tu.tree_all([True, (0,)]) and tu.tree_all(None)
  outer, inner = tu.tree_structure([0, 0, 0]), tu.tree_structure((0, 0))
  assert tu.tree_transpose(outer, inner, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
  assert tu.tree_transpose(outer, None, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
  with pytest.raises(TypeError, match='leaves'):
    tu.tree_transpose(outer, inner, [(1, 2), (3, 4)])

# ---------------------------------------------------------------- custom nodes

def test_register_pytree_node():
  class Box:
    def __init__(self, a, b, tag): self.a, self.b, self.tag = a, b, tag
  tu.register_pytree_node(Box, lambda x: ((x.a, x.b), x.tag), lambda tag, kids: Box(*kids, tag))
  leaves, treedef = tu.tree_flatten([Box(1, (2, 3), 't')])
  assert leaves == [1, 2, 3]
  back = tu.tree_unflatten(treedef, [4, 5, 6])[0]
  assert (back.a, back.b, back.tag) == (4, (5, 6), 't')
  assert treedef != tu.tree_structure([Box(1, (2, 3), 'other')])
  assert repr(tu.tree_structure(Box(1, 2, 't'))) == "PyTreeDef(CustomNode(Box['t'], [*, *]))"
  assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Box(1, 2, 't'))] == ['[<flat index 0>]',
                                                                                  '[<flat index 1>]']

def test_register_pytree_node_with_keys_func():
  class Named:
    def __init__(self, w): self.w = w
  tu.register_pytree_node(Named, lambda x: ((x.w,), None), lambda aux, kids: Named(*kids),
                          lambda x: (((tu.GetAttrKey('w'), x.w),), None))
  assert tu.keystr(tu.tree_leaves_with_path([Named(1)])[0][0]) == '[0].w'

def test_register_pytree_with_keys():
  class KV:
    def __init__(self, d): self.d = d
  def flatten_with_keys(x): return [(tu.DictKey(k), v) for k, v in sorted(x.d.items())], tuple(sorted(x.d))
  tu.register_pytree_with_keys(KV, flatten_with_keys, lambda keys, kids: KV(dict(zip(keys, kids))))
  tree = KV({'b': 1, 'a': [2]})
  assert [(tu.keystr(p), x) for p, x in tu.tree_leaves_with_path(tree)] == [("['a'][0]", 2), ("['b']", 1)]
  assert tu.tree_map(lambda x: x * 10, tree).d == {'a': [20], 'b': 10}

def test_register_pytree_with_keys_separate_flatten():
  class Two:
    def __init__(self, a, b): self.a, self.b = a, b
  calls = []
  def flatten(x):
    calls.append('fast')
    return (x.a, x.b), None
  tu.register_pytree_with_keys(Two, lambda x: ([(tu.GetAttrKey('a'), x.a), (tu.GetAttrKey('b'), x.b)], None),
                               lambda aux, kids: Two(*kids), flatten)
  assert tu.tree_leaves(Two(1, 2)) == [1, 2] and calls == ['fast']
  assert tu.keystr(tu.tree_leaves_with_path(Two(1, 2))[1][0]) == '.b'

def test_register_pytree_node_class():
  @tu.register_pytree_node_class
  class Linear:
    def __init__(self, w, b, name): self.w, self.b, self.name = w, b, name
    def tree_flatten(self): return (self.w, self.b), self.name
    @classmethod
    def tree_unflatten(cls, aux, children): return cls(*children, aux)
  out = tu.tree_map(lambda x, y: x + y, Linear(1, 2, 'l'), Linear(10, 20, 'l'))
  assert isinstance(out, Linear) and (out.w, out.b, out.name) == (11, 22, 'l')
  with pytest.raises(ValueError, match="aux data 'l', got 'm'"):
    tu.tree_map(lambda x, y: x + y, Linear(1, 2, 'l'), Linear(10, 20, 'm'))

def test_register_dataclass_inferred():
  @tu.register_dataclass
  @dataclasses.dataclass
  class Layer:
    w: Any
    b: Any
    act: str = dataclasses.field(default='relu', metadata=dict(static=True))
  leaves, treedef = tu.tree_flatten(Layer(1, (2,), 'tanh'))
  assert leaves == [1, 2]
  back = treedef.unflatten([3, 4])
  assert back == Layer(3, (4,), 'tanh')
  assert treedef != tu.tree_structure(Layer(1, (2,), 'relu'))
  assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Layer(1, 2))] == ['.w', '.b']

def test_register_dataclass_explicit_and_plain_class():
  @dataclasses.dataclass(frozen=True)
  class Cfg:
    x: Any
    n: int
  tu.register_dataclass(Cfg, data_fields=['x'], meta_fields=['n'])
  assert tu.tree_map(lambda v: v + 1, Cfg(1, 5)) == Cfg(2, 5)
  class Plain:
    def __init__(self, x, n): self.x, self.n = x, n
  tu.register_dataclass(Plain, data_fields=['x'], meta_fields=['n'])
  assert tu.tree_leaves(Plain([1, 2], 3)) == [1, 2]

def test_register_dataclass_errors():
  @dataclasses.dataclass
  class D:
    x: Any
    y: Any
  with pytest.raises(TypeError, match='both data_fields and meta_fields'):
    tu.register_dataclass(D, data_fields=['x'])
  with pytest.raises(ValueError, match=r"missing \['y'\]"):
    tu.register_dataclass(D, data_fields=['x'], meta_fields=[])
  class NotDC: pass
  with pytest.raises(TypeError, match='not a dataclass'):
    tu.register_dataclass(NotDC)

# ---------------------------------------------------------------- errors

def test_registering_twice_names_the_type():
  class Once: pass
  tu.register_pytree_node(Once, lambda x: ((), None), lambda aux, kids: Once())
  with pytest.raises(ValueError, match='Once is already registered as a pytree node'):
    tu.register_pytree_node(Once, lambda x: ((), None), lambda aux, kids: Once())
  for builtin in (tuple, list, dict, type(None), collections.OrderedDict):
    with pytest.raises(ValueError, match='already registered'):
      tu.register_pytree_node(builtin, lambda x: ((), None), lambda aux, kids: None)

def test_registering_a_non_type():
  with pytest.raises(TypeError, match='takes a class'):
    tu.register_pytree_node('Foo', lambda x: ((), None), lambda aux, kids: None)

def test_registration_after_first_use_takes_effect():
  class Late:
    def __init__(self, v): self.v = v
  obj = Late(1)
  assert tu.tree_leaves(obj) == [obj]
  tu.register_pytree_node(Late, lambda x: ((x.v,), None), lambda aux, kids: Late(*kids))
  assert tu.tree_leaves(obj) == [1]

def test_bad_flatten_return_says_what_to_return():
  class Bad: pass
  tu.register_pytree_node(Bad, lambda x: [1, 2, 3], lambda aux, kids: Bad())
  with pytest.raises(TypeError, match=r'pair \(children, aux_data\)'):
    tu.tree_leaves(Bad())

def test_tree_map_structure_mismatch_shows_both_structures_and_where():
  with pytest.raises(ValueError) as info:
    tu.tree_map(lambda x, y: x, {'a': (1, 2), 'b': 3}, {'a': [1, 2], 'b': 3})
  msg = str(info.value)
  assert "PyTreeDef({'a': (*, *), 'b': *})" in msg and "PyTreeDef({'a': [*, *], 'b': *})" in msg
  assert "at ['a']" in msg and 'expected tuple, got list' in msg and 'tree argument 1' in msg

@pytest.mark.parametrize('first, other, fragment', [
  ((1, 2), (1, 2, 3), 'tuple with 2 children, got 3'),
  ({'a': 1}, {'b': 1}, "keys ('a',), got ('b',)"),
  ([None], [1], "at [0], expected None, got a leaf of type int"),
  ([1, [2]], [1, 2], 'at [1], expected list, got a leaf of type int'),
  (Point(1, 2), (1, 2), 'expected test_tree_util.Point, got tuple'),
])
def test_tree_map_mismatch_reasons(first, other, fragment):
  with pytest.raises(ValueError) as info:
    tu.tree_map(lambda *xs: xs, first, other)
  assert fragment in str(info.value)

def test_mismatch_in_third_tree_is_named():
  with pytest.raises(ValueError, match='tree argument 2'):
    tu.tree_map(lambda *xs: xs, [1], [2], (3,))

def test_unsortable_dict_keys():
  with pytest.raises(ValueError, match=r"keys \[1, 'a'\] cannot be sorted.*OrderedDict"):   # a ValueError, as JAX
    tu.tree_flatten({1: 'x', 'a': 'y'})
  assert tu.tree_leaves(collections.OrderedDict([(1, 'x'), ('a', 'y')])) == ['x', 'y']

def test_unflatten_wrong_count():
  treedef = tu.tree_structure((1, [2, 3]))
  with pytest.raises(ValueError, match='takes 3 leaves, got 2'):
    treedef.unflatten([1, 2])
  with pytest.raises(ValueError, match='takes 3 leaves, got 4'):
    tu.tree_unflatten(treedef, [1, 2, 3, 4])

def test_tree_unflatten_argument_order():
  with pytest.raises(TypeError, match=r'\(treedef, leaves\)'):
    tu.tree_unflatten([1, 2], tu.tree_structure((1, 2)))

def test_unhashable_aux_data():
  class Listy:
    def __init__(self, v, meta): self.v, self.meta = v, meta
  tu.register_pytree_node(Listy, lambda x: ((x.v,), x.meta), lambda meta, kids: Listy(kids[0], meta))
  treedef = tu.tree_structure(Listy(1, [1, 2]))
  assert treedef == tu.tree_structure(Listy(2, [1, 2]))
  assert hash(treedef) == hash(tu.tree_structure(Listy(2, [1, 2])))   # as in JAX, unhashable aux data is allowed
  assert treedef != tu.tree_structure(Listy(1, [1, 3]))

# ---------------------------------------------------------------- Partial

def add3(x, y, z=0): return x + y + z

def test_partial_is_a_pytree_with_static_function():
  p = tu.Partial(add3, 1, z=100)
  assert isinstance(p, functools.partial) and p(2) == 103
  leaves, treedef = tu.tree_flatten(p)
  assert leaves == [1, 100]
  q = tu.tree_unflatten(treedef, [10, 1000])
  assert isinstance(q, tu.Partial) and q.func is add3 and q(2) == 1012
  assert treedef == tu.tree_structure(tu.Partial(add3, 5, z=6))
  assert treedef != tu.tree_structure(tu.Partial(add3, 5))
  assert treedef != tu.tree_structure(tu.Partial(lambda x, y, z=0: 0, 5, z=6))
  assert tu.tree_map(lambda v: v * 2, p)(0) == 202

def test_partial_of_partial_keeps_the_inner_one_static():
  inner = functools.partial(add3, 1)
  p = tu.Partial(inner, 2)
  assert p.func is inner and p.args == (2,) and p() == 3
  assert tu.tree_leaves(p) == [2]
  nested = tu.Partial(tu.Partial(add3, 1), 2)
  assert tu.tree_leaves(nested) == [2] and nested() == 3
  assert tu.tree_map(lambda v: v * 10, nested)() == 21

def test_partial_paths():
  paths = [tu.keystr(k) for k, _ in tu.tree_leaves_with_path(tu.Partial(add3, 1, z=2))]
  assert paths == ['[<flat index 0>][0]', "[<flat index 1>]['z']"]

# ---------------------------------------------------------------- docs

def test_docstring_examples_run():
  result = doctest.testmod(tu, optionflags=doctest.ELLIPSIS)
  assert result.attempted > 20 and result.failed == 0
