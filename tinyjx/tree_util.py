"""tree_util: pytrees, the nested containers that every transform flattens to a list of leaves and rebuilds.

A pytree is a leaf or a registered container node whose children are pytrees. This module owns the node registry
(exact type -> flatten/unflatten rules), `PyTreeDef` (the immutable, hashable structure of a tree together with its
static aux data), flatten/unflatten and what is built on them: maps, reductions, key paths (`tree_flatten_with_path`,
`keystr`) and the registration routes. Names and semantics follow `jax.tree_util`.

Invariants: `treedef.unflatten(leaves)` rebuilds the tree that `tree_flatten` took apart (dicts come back with sorted
keys, as in JAX); any object whose exact type is not a registered node is a leaf (tinyjx arrays included, and
subclasses of registered types unless registered themselves); `None` is a node with no children, not a leaf; leaves
come out in a fixed order (sequence order, sorted dict keys, namedtuple and dataclass field order). This module
imports nothing else of tinyjx.
"""
from __future__ import annotations
import collections, copy, dataclasses, functools
from typing import Any, Callable, Iterable

__all__ = [
  'PyTreeDef', 'SequenceKey', 'DictKey', 'GetAttrKey', 'FlattenedIndexKey', 'Partial', 'all_leaves', 'keystr',
  'register_dataclass', 'register_pytree_node', 'register_pytree_node_class', 'register_pytree_with_keys',
  'tree_all', 'tree_broadcast', 'tree_flatten', 'tree_flatten_with_path', 'tree_leaves', 'tree_leaves_with_path',
  'tree_map', 'tree_map_with_path', 'tree_reduce', 'tree_reduce_associative', 'tree_structure', 'tree_transpose',
  'tree_unflatten', 'treedef_children', 'treedef_is_leaf', 'treedef_tuple',
]

# ---------------------------------------------------------------- keys: one entry of a path from the root to a leaf

class _Key:
  """A path entry: one value, compared and hashed by key class and value."""
  __slots__ = ()
  _field = ''
  def _value(self): return getattr(self, self._field)
  def __eq__(self, other): return type(self) is type(other) and self._value() == other._value()
  def __hash__(self): return hash((type(self), self._value()))
  def __repr__(self): return f'{type(self).__name__}({self._field}={self._value()!r})'
  def _simple(self) -> str: return str(self._value())

class SequenceKey(_Key):
  """The position of a child in a tuple or list.

  >>> str(SequenceKey(0)), SequenceKey(0)
  ('[0]', SequenceKey(idx=0))
  """
  __slots__ = ('idx',)
  _field = 'idx'
  def __init__(self, idx: int): self.idx = idx
  def __str__(self): return f'[{self.idx!r}]'

class DictKey(_Key):
  """The key of a child in a dict, OrderedDict or defaultdict.

  >>> str(DictKey('a')), DictKey('a')
  ("['a']", DictKey(key='a'))
  """
  __slots__ = ('key',)
  _field = 'key'
  def __init__(self, key): self.key = key
  def __str__(self): return f'[{self.key!r}]'

class GetAttrKey(_Key):
  """The attribute name of a child: namedtuple fields, dataclass fields.

  >>> str(GetAttrKey('w')), GetAttrKey('w')
  ('.w', GetAttrKey(name='w'))
  """
  __slots__ = ('name',)
  _field = 'name'
  def __init__(self, name: str): self.name = name
  def __str__(self): return f'.{self.name}'

class FlattenedIndexKey(_Key):
  """The position of a child among the children of a custom node registered without keys.

  >>> str(FlattenedIndexKey(1)), FlattenedIndexKey(1)
  ('[<flat index 1>]', FlattenedIndexKey(key=1))
  """
  __slots__ = ('key',)
  _field = 'key'
  def __init__(self, key: int): self.key = key
  def __str__(self): return f'[<flat index {self.key}>]'

def keystr(keys: Iterable, *, simple: bool = False, separator: str = '') -> str:
  """The path `keys` (a tuple of key objects) as one string, in JAX's format.

  `simple=True` writes each key bare (`a`, `0`, `w`), which with a `separator` gives names like `a/0/w`.

  >>> keystr((DictKey('a'), SequenceKey(0), GetAttrKey('w')))
  "['a'][0].w"
  >>> keystr((DictKey('a'), SequenceKey(0), GetAttrKey('w')), simple=True, separator='/')
  'a/0/w'
  """
  if not simple: return separator.join(str(k) for k in keys)
  return separator.join(k._simple() if isinstance(k, _Key) else str(k) for k in keys)

# ---------------------------------------------------------------- the registry: exact type -> _Node

class _Node:
  """How one container type comes apart and goes back together.

  flatten(x) -> (children, aux); unflatten(aux, children) -> x; keyed(x) -> ([(key, child), ...], aux) with the same
  children and aux as flatten; show(aux, child_strings) -> str for PyTreeDef's repr. `kind` is the container type.
  """
  __slots__ = ('kind', 'flatten', 'unflatten', 'keyed', 'show')
  def __init__(self, kind: type, flatten: Callable, unflatten: Callable, keyed: Callable, show: Callable):
    self.kind, self.flatten, self.unflatten, self.keyed, self.show = kind, flatten, unflatten, keyed, show

_registry: dict[type, _Node] = {}          # what was registered, by exact type
_namedtuple_nodes: dict[type, _Node] = {}  # one node per namedtuple class, made when first seen
_resolved: dict[type, _Node | None] = {}   # cache of _resolve, leaf types included (None); cleared on registration
_MISS = object()

def _type_name(t: type) -> str:
  return t.__qualname__ if t.__module__ == 'builtins' else f'{t.__module__}.{t.__qualname__}'

def _resolve(t: type) -> _Node | None:
  node = _registry.get(t)
  if node is None and issubclass(t, tuple) and hasattr(t, '_fields'):
    node = _namedtuple_nodes.get(t) or _namedtuple_nodes.setdefault(t, _namedtuple_node(t))
  _resolved[t] = node
  return node

def _node_of(t: type) -> _Node | None:
  """The node rules for exact type `t`, or None when its objects are leaves."""
  node = _resolved.get(t, _MISS)
  return _resolve(t) if node is _MISS else node

def _register(kind: type, node: _Node) -> None:
  if not isinstance(kind, type):
    raise TypeError(f'pytree registration takes a class, got {kind!r}. Register the type of your objects.')
  if kind in _registry:
    raise ValueError(f'{_type_name(kind)} is already registered as a pytree node. Register each type once: guard '
                     f'code that may run twice, or register a subclass with its own rules.')
  _registry[kind] = node
  _resolved.clear()

def _show_custom(kind: type) -> Callable:
  return lambda aux, kids: f"CustomNode({kind.__name__}[{aux!r}], [{', '.join(kids)}])"

def _index_keyed(flatten: Callable) -> Callable:
  """keyed() for a node registered without keys: children are named by position, FlattenedIndexKey(i)."""
  def keyed(x):
    kids, aux = flatten(x)
    return [(FlattenedIndexKey(i), c) for i, c in enumerate(kids)], aux
  return keyed

def _checked(flatten: Callable, kind: type) -> Callable:
  """Wraps a user flatten function so that a wrong return value says what it should have been."""
  def flatten_checked(x):
    out = flatten(x)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
      raise TypeError(f'the flatten function registered for {_type_name(kind)} returned {out!r}; it must return a '
                      f'pair (children, aux_data), e.g. `return (self.w, self.b), None`.')
    return out
  return flatten_checked

# ---------------------------------------------------------------- built-in containers

def _seq_keyed(x): return [(SequenceKey(i), c) for i, c in enumerate(x)], None
def _show_tuple(aux, kids): return f"({', '.join(kids)}{',' if len(kids) == 1 else ''})"
def _show_list(aux, kids): return f"[{', '.join(kids)}]"

def _sorted_keys(d: dict) -> list:
  try: return sorted(d)
  except TypeError as e:   # a ValueError, as in JAX
    raise ValueError(f'pytree flattening sorts dict keys to fix the order of the children, and the keys {list(d)!r} '
                    f'cannot be sorted ({e}). Use keys of one comparable type (e.g. all str), or an OrderedDict, '
                    f'whose children keep insertion order.') from None

def _dict_flatten(x):
  keys = _sorted_keys(x)
  return [x[k] for k in keys], tuple(keys)

def _dict_keyed(x):
  kids, keys = _dict_flatten(x)
  return [(DictKey(k), c) for k, c in zip(keys, kids)], keys

def _show_dict(keys, kids): return '{' + ', '.join(f'{k!r}: {c}' for k, c in zip(keys, kids)) + '}'

def _ordered_flatten(x):
  keys = tuple(x)
  return [x[k] for k in keys], keys

def _ordered_keyed(x): return [(DictKey(k), c) for k, c in x.items()], tuple(x)

def _defaultdict_flatten(x):
  kids, keys = _dict_flatten(x)
  return kids, (x.default_factory, keys)

def _defaultdict_keyed(x):
  pairs, keys = _dict_keyed(x)
  return pairs, (x.default_factory, keys)

def _defaultdict_unflatten(aux, kids): return collections.defaultdict(aux[0], zip(aux[1], kids))

def _namedtuple_node(t: type) -> _Node:
  def keyed(x): return [(GetAttrKey(f), c) for f, c in zip(t._fields, x)], None
  def show(aux, kids): return f"{t.__name__}({', '.join(f'{f}={c}' for f, c in zip(t._fields, kids))})"
  return _Node(t, lambda x: (x, None), lambda aux, kids: t(*kids), keyed, show)

_registry[tuple] = _Node(tuple, lambda x: (x, None), lambda aux, kids: tuple(kids), _seq_keyed, _show_tuple)
_registry[list] = _Node(list, lambda x: (x, None), lambda aux, kids: list(kids), _seq_keyed, _show_list)
_registry[dict] = _Node(dict, _dict_flatten, lambda keys, kids: dict(zip(keys, kids)), _dict_keyed, _show_dict)
_registry[type(None)] = _Node(type(None), lambda x: ((), None), lambda aux, kids: None, lambda x: ([], None),
                              lambda aux, kids: 'None')
_registry[collections.OrderedDict] = _Node(collections.OrderedDict, _ordered_flatten,
                                           lambda keys, kids: collections.OrderedDict(zip(keys, kids)),
                                           _ordered_keyed, _show_custom(collections.OrderedDict))
_registry[collections.defaultdict] = _Node(collections.defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
                                           _defaultdict_keyed, _show_custom(collections.defaultdict))

# ---------------------------------------------------------------- PyTreeDef

class PyTreeDef:
  """The structure of a pytree: node types, static aux data (dict keys, custom metadata) and where the leaves go.

  Immutable, hashable and compared with `==` by structure and aux data, so it can key caches (jit keys on it). Aux
  data need not be hashable: an unhashable value (a dict, a list) is hashed through a frozen copy.
  Get one from `tree_flatten` or `tree_structure`, never by calling this class.

  >>> leaves, treedef = tree_flatten((1, {'a': 2}))
  >>> treedef, treedef.num_leaves, treedef.num_nodes
  (PyTreeDef((*, {'a': *})), 2, 4)
  >>> treedef.unflatten([10, 20])
  (10, {'a': 20})
  """
  __slots__ = ('_node', '_aux', '_kids', '_nleaves', '_nnodes', '_hash')

  def __init__(self, node: _Node | None, aux: Any, kids: tuple):
    self._node, self._aux, self._kids = node, aux, kids
    self._nleaves = self._nnodes = self._hash = None

  @property
  def num_leaves(self) -> int:
    """How many leaves a tree of this structure has."""
    if self._nleaves is None: self._nleaves = 1 if self._node is None else sum(k.num_leaves for k in self._kids)
    return self._nleaves

  @property
  def num_nodes(self) -> int:
    """How many nodes, leaves and None included, a tree of this structure has."""
    if self._nnodes is None: self._nnodes = 1 + sum(k.num_nodes for k in self._kids)
    return self._nnodes

  def unflatten(self, leaves: Iterable) -> Any:
    """The tree of this structure with `leaves` in order; see `tree_unflatten`."""
    leaves = list(leaves)
    if len(leaves) != self.num_leaves:
      raise ValueError(f'unflatten: {self} takes {self.num_leaves} leaves, got {len(leaves)}. Pass exactly one leaf '
                       f'per `*`, e.g. the leaves that tree_flatten returned with this treedef.')
    return _build(self, iter(leaves))

  def children(self) -> list:
    """The PyTreeDefs of the root's children (empty for a leaf or None)."""
    return list(self._kids)

  def node_data(self) -> tuple | None:
    """(node type, aux data) of the root, or None for a leaf."""
    return None if self._node is None else (self._node.kind, self._aux)

  def flatten_up_to(self, tree: Any) -> list:
    """The subtrees of `tree` at this structure's leaves; `tree` must have this structure as a prefix.

    >>> tree_structure((1, 2)).flatten_up_to(([1, 2], {'a': 3}))
    [[1, 2], {'a': 3}]
    """
    return _up_to_or_raise(self, tree, 'flatten_up_to: the tree', 'this treedef')

  def compose(self, inner: PyTreeDef) -> PyTreeDef:
    """The structure with `inner` in place of each leaf of this one.

    >>> tree_structure((1, 2)).compose(tree_structure([1]))
    PyTreeDef(([*], [*]))
    """
    if self._node is None: return inner
    return PyTreeDef(self._node, self._aux, tuple([k.compose(inner) for k in self._kids]))

  def __eq__(self, other):
    if self is other: return True
    if not isinstance(other, PyTreeDef): return NotImplemented
    return (self._node is other._node and len(self._kids) == len(other._kids) and _aux_equal(self._aux, other._aux)
            and self._kids == other._kids)

  def __hash__(self):
    if self._hash is None: self._hash = hash((self._node and self._node.kind, hash(self._kids), _aux_hash(self._aux)))
    return self._hash

  def detached(self) -> PyTreeDef:
    """tinyjx only: this structure with its unhashable aux data (dicts, lists, sets) deep-copied, for cache keys.

    A cache keyed on a treedef keeps it; if the aux data is a dict the caller later mutates in place, the stored key
    would change with it and match the wrong calls. Hashable aux data is shared (it is immutable by contract), so
    this returns `self` when every aux value is hashable.

    >>> td = tree_structure({'a': 1})
    >>> td.detached() is td
    True
    """
    kids = tuple([k.detached() for k in self._kids])
    aux = self._aux if _hashable(self._aux) else _deep_copy(self._aux)
    if aux is self._aux and all(a is b for a, b in zip(kids, self._kids)): return self
    return PyTreeDef(self._node, aux, kids)

  def __repr__(self): return f'PyTreeDef({_show(self)})'

_LEAF = PyTreeDef(None, None, ())  # every leaf position shares this one

# Aux data need not be hashable (JAX accepts a dict, say): treedefs compare aux data with `==` and hash a frozen copy
# of it, in which equal values hash alike (a set and the equal frozenset, a list and the equal tuple, a dict and the
# frozenset of its items). A value that cannot be frozen hashes by its type alone: still correct, since `==` decides.

def _hashable(x) -> bool:
  try: hash(x)
  except TypeError: return False
  return True

def _freeze(x):
  if _hashable(x): return x
  if isinstance(x, dict): return frozenset((k, _freeze(v)) for k, v in x.items())
  if isinstance(x, (set, frozenset)): return frozenset(x)
  if isinstance(x, (list, tuple)): return tuple([_freeze(v) for v in x])
  return type(x)

def _aux_hash(aux) -> int:
  try: return hash(aux)
  except TypeError: return hash(_freeze(aux))

def _aux_equal(a, b) -> bool:
  """`a == b` as a bool; aux data whose `==` is not a bool (numpy arrays) is equal only to itself."""
  try: return bool(a == b)
  except (TypeError, ValueError): return a is b

def _deep_copy(x):
  try: return copy.deepcopy(x)
  except Exception: return x   # an aux value that cannot be copied is shared, as JAX shares all of them

def _show(td: PyTreeDef) -> str:
  if td._node is None: return '*'
  return td._node.show(td._aux, [_show(k) for k in td._kids])

def _build(td: PyTreeDef, leaves) -> Any:
  node = td._node
  if node is None: return next(leaves)
  return node.unflatten(td._aux, tuple([_build(k, leaves) for k in td._kids]))

# ---------------------------------------------------------------- flatten and friends

def _flatten(x, leaves: list, is_leaf) -> PyTreeDef:
  node = None if is_leaf is not None and is_leaf(x) else _node_of(type(x))
  if node is None:
    leaves.append(x)
    return _LEAF
  kids, aux = node.flatten(x)
  return PyTreeDef(node, aux, tuple([_flatten(c, leaves, is_leaf) for c in kids]))

def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
  """The leaves of `tree` in order, and its structure. `is_leaf(x)` True makes subtree `x` a leaf.

  >>> tree_flatten({'b': [1, 2], 'a': None})
  ([1, 2], PyTreeDef({'a': None, 'b': [*, *]}))
  >>> tree_flatten([(1, 2), 3], is_leaf=lambda x: isinstance(x, tuple))
  ([(1, 2), 3], PyTreeDef([*, *]))
  """
  leaves: list = []
  treedef = _flatten(tree, leaves, is_leaf)
  return leaves, treedef

def structure_key(tree: Any, leaves: list):
  """tinyjx only: the structure of `tree` as plain tuples, `(node type, aux data, children)` per node and None per
  leaf, with the leaves appended to `leaves` in `tree_flatten`'s order. Equal keys are equal treedefs (a node's type
  fixes its rules), but building one makes no PyTreeDef, and hashing or comparing it runs in C: jit's hit path keys
  pytree calls on it. Unhashable aux data makes an unhashable key (the caller's `hash` raises TypeError).

  >>> leaves = []
  >>> structure_key({'a': [1, 2]}, leaves), leaves
  ((<class 'dict'>, ('a',), ((<class 'list'>, None, (None, None)),)), [1, 2])
  """
  node = _node_of(type(tree))
  if node is None:
    leaves.append(tree)
    return None
  kids, aux = node.flatten(tree)
  return (node.kind, aux, tuple([structure_key(c, leaves) for c in kids]))

def tree_unflatten(treedef: PyTreeDef, leaves: Iterable) -> Any:
  """The tree of structure `treedef` with `leaves` in order (the inverse of `tree_flatten`).

  >>> leaves, treedef = tree_flatten({'a': 1, 'b': (2, 3)})
  >>> tree_unflatten(treedef, [x * 10 for x in leaves])
  {'a': 10, 'b': (20, 30)}
  """
  if not isinstance(treedef, PyTreeDef):
    raise TypeError(f'tree_unflatten takes (treedef, leaves) in that order; the first argument is a '
                    f'{type(treedef).__name__}, not a PyTreeDef. Pass the treedef from tree_flatten first.')
  return treedef.unflatten(leaves)

def _leaves(x, out: list, is_leaf) -> None:
  node = None if is_leaf is not None and is_leaf(x) else _node_of(type(x))
  if node is None: out.append(x)
  else:
    for c in node.flatten(x)[0]: _leaves(c, out, is_leaf)

def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
  """The leaves of `tree` in flattening order.

  >>> tree_leaves({'b': 2, 'a': [1, None]})
  [1, 2]
  """
  out: list = []
  _leaves(tree, out, is_leaf)
  return out

def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
  """The PyTreeDef of `tree`.

  >>> tree_structure((1, [2, 3]))
  PyTreeDef((*, [*, *]))
  """
  return tree_flatten(tree, is_leaf)[1]

def treedef_is_leaf(treedef: PyTreeDef) -> bool:
  """Whether `treedef` has a single node: a leaf, or (as in JAX) a childless node such as None.

  >>> treedef_is_leaf(tree_structure(1)), treedef_is_leaf(tree_structure((1,)))
  (True, False)
  """
  return treedef.num_nodes == 1

def all_leaves(iterable: Iterable, is_leaf: Callable[[Any], bool] | None = None) -> bool:
  """Whether every element of `iterable` is a leaf (None is not).

  >>> all_leaves([1, 'a']), all_leaves([1, (2,)]), all_leaves([None])
  (True, False, False)
  """
  return all((is_leaf is not None and is_leaf(x)) or _node_of(type(x)) is None for x in iterable)

# ---------------------------------------------------------------- key paths

def _flatten_path(x, path: tuple, out: list, is_leaf, takes_path: bool) -> PyTreeDef:
  stop = is_leaf is not None and (is_leaf(path, x) if takes_path else is_leaf(x))
  node = None if stop else _node_of(type(x))
  if node is None:
    out.append((path, x))
    return _LEAF
  pairs, aux = node.keyed(x)
  return PyTreeDef(node, aux, tuple([_flatten_path(c, path + (k,), out, is_leaf, takes_path) for k, c in pairs]))

def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False) -> tuple[list, PyTreeDef]:
  """Like `tree_flatten`, but each leaf comes as (path, leaf); a path is a tuple of keys (see `keystr`).

  With `is_leaf_takes_path=True`, `is_leaf` is called as `is_leaf(path, x)`.

  >>> pairs, _ = tree_flatten_with_path({'a': [1, 2]})
  >>> [(keystr(p), x) for p, x in pairs]
  [("['a'][0]", 1), ("['a'][1]", 2)]
  """
  out: list = []
  treedef = _flatten_path(tree, (), out, is_leaf, is_leaf_takes_path)
  return out, treedef

def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False) -> list:
  """The (path, leaf) pairs of `tree_flatten_with_path`.

  >>> tree_leaves_with_path((1, {'b': 2}))
  [((SequenceKey(idx=0),), 1), ((SequenceKey(idx=1), DictKey(key='b')), 2)]
  """
  return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]

def treedef_children(treedef: PyTreeDef) -> list:
  """The PyTreeDefs of the root's children.

  >>> treedef_children(tree_structure((1, [2, 3])))
  [PyTreeDef(*), PyTreeDef([*, *])]
  """
  return treedef.children()

def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
  """The structure of a tuple whose children have the structures `treedefs`.

  >>> treedef_tuple([tree_structure(1), tree_structure([1, 2])])
  PyTreeDef((*, [*, *]))
  """
  treedefs = tuple(treedefs)
  for i, td in enumerate(treedefs):
    if not isinstance(td, PyTreeDef):
      raise TypeError(f'treedef_tuple: element {i} is a {type(td).__name__}, not a PyTreeDef; pass the treedefs that '
                      f'tree_structure returns.')
  return PyTreeDef(_registry[tuple], None, treedefs)

# ---------------------------------------------------------------- flatten_up_to, with errors that say where

class _Mismatch(Exception):
  """Raised inside _up_to; `path` collects child indices from the root to where the trees differ."""
  def __init__(self, reason: str):
    super().__init__(reason)
    self.reason, self.path = reason, []

def _describe(x) -> str:
  node = _node_of(type(x))
  try: text = repr(x)
  except Exception: text = '<no repr>'  # a tracer may refuse; the message must still come out
  text = text if len(text) <= 60 else text[:57] + '...'
  return f'{"" if node else "a leaf of type "}{type(x).__name__} {text}'

def _node_name(node: _Node) -> str:
  return 'None' if node.kind is type(None) else _type_name(node.kind)

def _up_to(td: PyTreeDef, x, out: list) -> None:
  node = td._node
  if node is None:
    out.append(x)
    return
  if _node_of(type(x)) is not node: raise _Mismatch(f'expected {_node_name(node)}, got {_describe(x)}')
  kids, aux = node.flatten(x)
  if not _aux_equal(aux, td._aux):
    data = 'keys' if node.kind in (dict, collections.OrderedDict) else 'aux data'
    raise _Mismatch(f'expected {_node_name(node)} with {data} {td._aux!r}, got {aux!r}')
  kids = list(kids)
  if len(kids) != len(td._kids):
    raise _Mismatch(f'expected {_node_name(node)} with {len(td._kids)} children, got {len(kids)}')
  for i, (k, c) in enumerate(zip(td._kids, kids)):
    try: _up_to(k, c, out)
    except _Mismatch as e:
      e.path.insert(0, i)
      raise

def _keys_along(x, indices: list) -> tuple:
  """The key path to child `indices` of `x` (whose nodes matched the treedef down to there)."""
  keys = []
  for i in indices:
    key, x = list(_node_of(type(x)).keyed(x)[0])[i]
    keys.append(key)
  return tuple(keys)

def _up_to_or_raise(td: PyTreeDef, tree, what: str, ref: str = 'the first tree') -> list:
  out: list = []
  try: _up_to(td, tree, out)
  except _Mismatch as e:
    where = keystr(_keys_along(tree, e.path)) or 'the root'
    raise ValueError(f'{what} does not have the structure of {ref} (nor continue it below its leaves): at {where}, '
                     f'{e.reason}.\n  expected: {td}\n  got:      {tree_structure(tree)}\nPass trees with one '
                     f'structure; the expected one may end in a leaf where the given one goes on.') from None
  return out

def _rest_leaves(td: PyTreeDef, rest: tuple, fname: str) -> list:
  return [_up_to_or_raise(td, r, f'{fname}: tree argument {i} (the first is 0)') for i, r in enumerate(rest, 1)]

# ---------------------------------------------------------------- maps and reductions

def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
  """`f` applied leafwise: a tree of `tree`'s structure with `f(x, *ys)` at each leaf `x` of `tree`.

  Each tree in `rest` has `tree`'s structure, or continues it: where `tree` has a leaf, `f` gets the whole subtree.

  >>> tree_map(lambda x: x + 1, {'a': 1, 'b': (2, 3)})
  {'a': 2, 'b': (3, 4)}
  >>> tree_map(lambda x, y: (x, y), [1, 2], [{'k': 0}, 5])
  [(1, {'k': 0}), (2, 5)]
  """
  leaves, treedef = tree_flatten(tree, is_leaf)
  if not rest: return _build(treedef, iter([f(x) for x in leaves]))
  others = _rest_leaves(treedef, rest, 'tree_map')
  return _build(treedef, iter([f(*xs) for xs in zip(leaves, *others)]))

def tree_map_with_path(f: Callable, tree: Any, *rest: Any, is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
  """Like `tree_map`, but calls `f(path, x, *ys)` with the key path of each leaf `x` of `tree`.

  >>> tree_map_with_path(lambda p, x: f'{keystr(p)}={x}', {'a': [1]})
  {'a': ["['a'][0]=1"]}
  """
  pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
  others = _rest_leaves(treedef, rest, 'tree_map_with_path')
  return _build(treedef, iter([f(p, x, *ys) for (p, x), *ys in zip(pairs, *others)]))

def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
  """`prefix_tree` (a prefix of `full_tree`'s structure) with each leaf repeated over the matching subtree.

  >>> tree_broadcast([1, {'a': 2}], [(3, 4), {'a': [5, 6]}])
  [(1, 1), {'a': [2, 2]}]
  """
  leaves, treedef = tree_flatten(prefix_tree, is_leaf)
  subtrees = _up_to_or_raise(treedef, full_tree, 'tree_broadcast: full_tree', 'prefix_tree')
  return _build(treedef, iter([tree_map(lambda _, x=x: x, sub, is_leaf=is_leaf) for x, sub in zip(leaves, subtrees)]))

_NO_INITIALIZER = object()

def tree_reduce(function: Callable, tree: Any, initializer: Any = _NO_INITIALIZER,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
  """`functools.reduce(function, tree_leaves(tree), initializer)`.

  >>> tree_reduce(lambda a, b: a + b, {'a': 1, 'b': (2, 3)}), tree_reduce(max, [], initializer=0)
  (6, 0)
  """
  leaves = tree_leaves(tree, is_leaf)
  if initializer is not _NO_INITIALIZER: return functools.reduce(function, leaves, initializer)
  if not leaves: raise TypeError('tree_reduce: the tree has no leaves and no initializer was given; pass initializer=.')
  return functools.reduce(function, leaves)

def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
  """Whether every leaf of `tree` is truthy.

  >>> tree_all({'a': True, 'b': [1, 2]}), tree_all((True, 0))
  (True, False)
  """
  return all(tree_leaves(tree, is_leaf))

def tree_reduce_associative(operation: Callable, tree: Any, *, identity: Any = _NO_INITIALIZER,
                            is_leaf: Callable[[Any], bool] | None = None) -> Any:
  """The leaves of `tree` combined with the associative `operation`, pairwise as a balanced tree (fewer sequential
  steps than `tree_reduce`); `identity` is the result for a tree without leaves.

  >>> tree_reduce_associative(lambda a, b: a + b, [1, 2, 3, 4]), tree_reduce_associative(max, [], identity=0)
  (10, 0)
  """
  leaves = tree_leaves(tree, is_leaf)
  if not leaves:
    if identity is _NO_INITIALIZER:
      raise TypeError('tree_reduce_associative: the tree has no leaves; pass identity= (the result for no leaves).')
    return identity
  while len(leaves) > 1:
    pairs = [operation(a, b) for a, b in zip(leaves[0::2], leaves[1::2])]
    leaves = pairs + leaves[len(pairs) * 2:]
  return leaves[0]

def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any) -> Any:
  """Turns a tree of structure outer(inner) into one of structure inner(outer).

  `inner_treedef=None` takes the inner structure from the first outer leaf's subtree.

  >>> outer, inner = tree_structure([0, 0]), tree_structure({'a': 0, 'b': 0})
  >>> tree_transpose(outer, inner, [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}])
  {'a': [1, 3], 'b': [2, 4]}
  """
  if inner_treedef is None: inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
  leaves, treedef = tree_flatten(pytree_to_transpose)
  n_in, n_out = inner_treedef.num_leaves, outer_treedef.num_leaves
  if treedef.num_leaves != n_in * n_out:
    raise TypeError(f'tree_transpose: the tree has structure {treedef} with {treedef.num_leaves} leaves, but outer '
                    f'{outer_treedef} around inner {inner_treedef} has {n_in * n_out}. Pass a tree of structure '
                    f'{outer_treedef.compose(inner_treedef)}.')
  columns = [[leaves[o * n_in + i] for o in range(n_out)] for i in range(n_in)]
  return inner_treedef.unflatten([outer_treedef.unflatten(col) for col in columns])

# ---------------------------------------------------------------- registration routes

def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
  """Makes `nodetype` a pytree node: `flatten_func(x) -> (children, aux_data)`, `unflatten_func(aux_data, children)`.

  aux_data is static (it goes in the PyTreeDef and is compared with `==`; as in JAX it need not be hashable, e.g. a
  dict); children are pytrees. Key
  paths name the children `FlattenedIndexKey(i)` unless `flatten_with_keys_func(x) -> ([(key, child), ...], aux)`.

  >>> class Pair:
  ...   def __init__(self, a, b): self.a, self.b = a, b
  >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda aux, kids: Pair(*kids))
  >>> tree_leaves(Pair(1, [2, 3]))
  [1, 2, 3]
  """
  flatten = _checked(flatten_func, nodetype)
  keyed = _index_keyed(flatten) if flatten_with_keys_func is None else _checked(flatten_with_keys_func, nodetype)
  _register(nodetype, _Node(nodetype, flatten, unflatten_func, keyed, _show_custom(nodetype)))

def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable, unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
  """Makes `nodetype` a pytree node whose children have keys: `flatten_with_keys(x) -> ([(key, child), ...], aux)`.

  `flatten_func` (without keys, for speed) defaults to `flatten_with_keys` with the keys dropped.

  >>> class Box:
  ...   def __init__(self, v): self.v = v
  >>> register_pytree_with_keys(Box, lambda b: ([(GetAttrKey('v'), b.v)], None), lambda aux, kids: Box(*kids))
  >>> [(keystr(p), x) for p, x in tree_leaves_with_path(Box(7))]
  [('.v', 7)]
  """
  keyed = _checked(flatten_with_keys, nodetype)
  def flatten_without_keys(x):
    pairs, aux = keyed(x)
    return [c for _, c in pairs], aux
  flatten = flatten_without_keys if flatten_func is None else _checked(flatten_func, nodetype)
  _register(nodetype, _Node(nodetype, flatten, unflatten_func, keyed, _show_custom(nodetype)))

def register_pytree_node_class(cls: type) -> type:
  """Class decorator: `cls` is a node flattened by `x.tree_flatten()` and rebuilt by `cls.tree_unflatten(aux, kids)`.

  >>> @register_pytree_node_class
  ... class Scale:
  ...   def __init__(self, w, name): self.w, self.name = w, name
  ...   def tree_flatten(self): return (self.w,), self.name
  ...   @classmethod
  ...   def tree_unflatten(cls, aux, children): return cls(*children, aux)
  >>> tree_map(lambda w: w * 2, Scale(3, 's')).w
  6
  """
  register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
  return cls

def _dataclass_fields(cls: type, data_fields, meta_fields, drop_fields) -> tuple[tuple, tuple]:
  if (data_fields is None) != (meta_fields is None):
    raise TypeError(f'register_dataclass({cls.__name__}): pass both data_fields and meta_fields, or neither (then '
                    f'fields marked field(metadata=dict(static=True)) are meta and the others data).')
  if data_fields is None and not dataclasses.is_dataclass(cls):
    raise TypeError(f'register_dataclass: {cls.__name__} is not a dataclass, so its fields cannot be inferred. '
                    f'Decorate it with @dataclasses.dataclass, or pass data_fields and meta_fields.')
  if data_fields is None:
    fields = [f for f in dataclasses.fields(cls) if f.init and f.name not in drop_fields]
    data_fields = [f.name for f in fields if not f.metadata.get('static', False)]
    meta_fields = [f.name for f in fields if f.metadata.get('static', False)]
  elif dataclasses.is_dataclass(cls): _check_covered(cls, data_fields, meta_fields, drop_fields)
  return tuple(data_fields), tuple(meta_fields)

def _check_covered(cls: type, data_fields, meta_fields, drop_fields) -> None:
  init = {f.name for f in dataclasses.fields(cls) if f.init} - set(drop_fields)
  given = set(data_fields) | set(meta_fields)
  if given != init:
    raise ValueError(f'register_dataclass({cls.__name__}): data_fields and meta_fields must name every __init__ field '
                     f'once; missing {sorted(init - given)}, unknown {sorted(given - init)}. Add the missing ones '
                     f'(or list them in drop_fields) and remove the unknown ones.')

def register_dataclass(nodetype: type, data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None, drop_fields: Iterable[str] = ()) -> type:
  """Makes a dataclass a node: data fields are children (paths `.name`), meta fields static aux data.

  With neither list given, a field is meta when declared `field(metadata=dict(static=True))`, data otherwise.
  Returns `nodetype`, so it also works as a class decorator.

  >>> @register_dataclass
  ... @dataclasses.dataclass
  ... class Layer:
  ...   w: Any
  ...   act: str = dataclasses.field(default='relu', metadata=dict(static=True))
  >>> tree_flatten(Layer(w=1.0))
  ([1.0], PyTreeDef(CustomNode(Layer[('relu',)], [*])))
  """
  data, meta = _dataclass_fields(nodetype, data_fields, meta_fields, drop_fields)
  def flatten(x): return [getattr(x, n) for n in data], tuple([getattr(x, n) for n in meta])
  def keyed(x): return [(GetAttrKey(n), getattr(x, n)) for n in data], tuple([getattr(x, n) for n in meta])
  def unflatten(aux, kids): return nodetype(**dict(zip(meta, aux)), **dict(zip(data, kids)))
  _register(nodetype, _Node(nodetype, flatten, unflatten, keyed, _show_custom(nodetype)))
  return nodetype

# ---------------------------------------------------------------- Partial

class _Boxed:
  """Wraps a functools.partial handed to Partial, so that functools.partial does not merge its arguments in (they
  would become leaves); the wrapped partial stays whole, in the static part of the treedef."""
  __slots__ = ('fn',)
  def __init__(self, fn: Callable): self.fn = fn
  def __call__(self, *args, **kwargs): return self.fn(*args, **kwargs)
  def __repr__(self): return repr(self.fn)

class Partial(functools.partial):
  """A functools.partial that is a pytree: the bound args and keywords are children, the function is static.

  So a Partial can be passed through jit, grad and vmap, and treedefs of two Partials of one function compare equal.

  >>> p = Partial(lambda x, y: x + y, 1)
  >>> p(2), tree_leaves(p), tree_map(lambda v: v * 10, p)(2)
  (3, [1], 12)
  """
  def __new__(cls, func: Callable, *args, **keywords):
    if isinstance(func, functools.partial): func = _Boxed(func)
    return super().__new__(cls, func, *args, **keywords)

  @property
  def func(self) -> Callable:
    f = super().func
    return f.fn if type(f) is _Boxed else f

register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, kids: Partial(func, *kids[0], **kids[1]))
