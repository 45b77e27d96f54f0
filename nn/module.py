"""nn.module: `Module`, the base class whose instances are pytrees, and the helpers that split models.

Every subclass of `Module` is registered with `tinyjx.tree_util` when it is defined (`__init_subclass__`), so a
model passes straight through `jit`, `grad`, `vmap` and `pmap`. How an instance comes apart:

- Its fields are its attributes, in assignment order (the order `__init__` sets them), so the structure of a model
  is deterministic.
- A field holding an array (`tinyjx.Array` or numpy array) or a Module is a child. A field holding a list, tuple
  or dict is a child when it contains arrays or modules somewhere; the other entries of such a container
  (functions, ints, strings) stay static, so `[Conv2d(...), jnn.relu]` works. Any other field is static aux
  data (part of the treedef: hashed and compared by value, so a new value retraces a jitted function).
- Which fields are children is decided when a field is assigned and travels with the treedef, so a tree whose
  leaves were replaced by anything (tracers, None, ints for `in_axes`, booleans for a mask) has the same
  structure as the model it came from.

State that is not trained (BatchNorm's running statistics) lives in fields named by the class attribute
`state_fields`; `trainable_mask`, `partition` and `combine` use it to keep such leaves out of optimizer steps.
"""
from __future__ import annotations
import numpy as np
import tinyjx
from tinyjx import tree_util
from tinyjx.tree_util import GetAttrKey

__all__ = ['Module', 'static_field_value', 'trainable_mask', 'partition', 'combine', 'is_array']

_SPEC = '_nn_spec'   # instance attribute: field name -> how that field flattens (see _field_spec)
_LEAF = 'leaf'       # the field is one child: an array or a Module

def is_array(x) -> bool:
  """Whether `x` is an array leaf of a model (a tinyjx Array or a numpy array)."""
  return isinstance(x, (tinyjx.Array, np.ndarray))

def _is_module(x) -> bool: return isinstance(x, Module)
def _is_dynamic(x) -> bool: return is_array(x) or isinstance(x, Module)

class _Static:
  """A static value in a treedef's aux data: hashed and compared by value (lists as tuples, dicts by items).

  `fixed`: the value can never hold an array and its frozen form depends only on which object it is (anything but a
  list, dict or set, and tuples of such): a module keeps this `_Static` as its field's spec and reuses it while the
  field holds the same object, so flattening a model every step (jit's hit path keys each call on its structure)
  does not freeze its statics again."""
  __slots__ = ('value', '_frozen', '_hash', 'fixed')
  def __init__(self, value):
    self.value, self._frozen, self._hash, self.fixed = value, _freeze(value), None, _fixed(value)
  def __eq__(self, other): return self is other or isinstance(other, _Static) and _same(self._frozen, other._frozen)
  def __hash__(self):
    if self._hash is None: self._hash = hash(self._frozen)
    return self._hash
  def __repr__(self): return repr(self.value)

def _fixed(v) -> bool:
  if isinstance(v, tuple): return all(_fixed(x) for x in v)
  return not isinstance(v, (list, dict, set, frozenset))

def _same(a, b) -> bool:
  try: return bool(a == b)
  except Exception: return a is b

def _freeze(v):
  """A hashable stand-in for `v` that compares equal exactly when the values do."""
  if isinstance(v, (list, tuple)): return (type(v).__name__,) + tuple(_freeze(x) for x in v)
  if isinstance(v, dict): return ('dict',) + tuple(sorted(((repr(k), _freeze(x)) for k, x in v.items())))
  if isinstance(v, (set, frozenset)): return frozenset(_freeze(x) for x in v)
  try:
    hash(v)
    return v
  except TypeError:
    return ('id', id(v))

# ---------------------------------------------------------------- how one field flattens

def _field_spec(value):
  """None (static), _LEAF (one child) or (treedef, static_positions) for a container holding arrays."""
  if _is_dynamic(value): return _LEAF
  if not isinstance(value, (list, tuple, dict)): return None
  leaves, treedef = tree_util.tree_flatten(value, is_leaf=_is_module)
  if not any(_is_dynamic(x) for x in leaves): return None
  return treedef, tuple(i for i, x in enumerate(leaves) if not _is_dynamic(x))

def _hollow(value, spec):
  """The child for a container field: the container with its static entries replaced by None."""
  treedef, statics = spec
  subtrees = treedef.flatten_up_to(value)
  kept = tuple((i, _Static(subtrees[i])) for i in statics)
  for i in statics: subtrees[i] = None
  return treedef.unflatten(subtrees), kept

def _fields(m: 'Module') -> list:
  return [(k, v) for k, v in vars(m).items() if k != _SPEC]

def _spec_of(m: 'Module', name: str, value):
  specs = m.__dict__.setdefault(_SPEC, {})
  spec = specs.get(name, 'missing')
  if type(spec) is _Static:                  # a fixed static field: the same object, the same aux data
    if spec.value is value: return spec
    spec = 'missing'
  if spec == 'missing' or (spec is None and _is_dynamic_value(value)): spec = specs[name] = _field_spec(value)
  if spec is None and _fixed(value): spec = specs[name] = _Static(value)
  return spec

def _is_dynamic_value(value) -> bool: return _field_spec(value) is not None

def _children(m: 'Module') -> tuple[list, list, tuple]:
  """(the names of m's children, the children, the aux data): what both flattening rules return."""
  names, children, aux = [], [], []
  for name, value in _fields(m):
    spec = _spec_of(m, name, value)
    if spec is None or type(spec) is _Static:
      aux.append((name, None, _Static(value) if spec is None else spec))
    elif spec == _LEAF:
      names.append(name)
      children.append(value)
      aux.append((name, _LEAF, None))
    else:
      try:
        child, kept = _hollow(value, spec)
      except (ValueError, TypeError):   # the container changed shape since it was assigned: classify it again
        spec = m.__dict__[_SPEC][name] = _field_spec(value)
        if spec is None or spec == _LEAF: return _children(m)
        child, kept = _hollow(value, spec)
      names.append(name)
      children.append(child)
      aux.append((name, spec[0], kept))
  return names, children, tuple(aux)

def _flatten_with_keys(m: 'Module'):
  names, children, aux = _children(m)
  return [(GetAttrKey(n), c) for n, c in zip(names, children)], aux

def _flatten(m: 'Module'):
  _, children, aux = _children(m)
  return children, aux

def _unflatten(cls, aux, children):
  m = object.__new__(cls)
  kids, specs = iter(children), {}
  for name, kind, payload in aux:
    if kind is None: value, specs[name] = payload.value, (payload if payload.fixed else None)
    elif kind == _LEAF: value, specs[name] = next(kids), _LEAF
    else:
      subtrees = kind.flatten_up_to(next(kids))
      for i, static in payload: subtrees[i] = static.value
      value, specs[name] = kind.unflatten(subtrees), (kind, tuple(i for i, _ in payload))
    m.__dict__[name] = value
  m.__dict__[_SPEC] = specs
  return m

def _register(cls) -> None:
  tree_util.register_pytree_with_keys(cls, _flatten_with_keys, lambda aux, kids: _unflatten(cls, aux, kids), _flatten)

# ---------------------------------------------------------------- the base class

class Module:
  """Base class of layers and models; instances are pytrees (array fields are leaves, other fields static).

  Write `__init__` as plain Python that assigns fields, and `__call__` as a pure function of them. Treat a
  module as immutable once built: `m.replace(field=value)` returns a changed copy.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> class Scale(Module):
  ...   def __init__(self, n): self.w, self.name = jnp.ones(n), 'scale'
  ...   def __call__(self, x): return self.w * x
  >>> m = Scale(3)
  >>> m
  Scale(w=f32[3], name='scale')
  >>> tinyjx.tree_util.tree_leaves(m)[0].shape
  (3,)
  """
  state_fields: tuple = ()   # fields holding state that is not trained (e.g. running statistics)

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    _register(cls)

  def __setattr__(self, name: str, value) -> None:
    self.__dict__[name] = value
    self.__dict__.setdefault(_SPEC, {})[name] = _field_spec(value)

  def __delattr__(self, name: str) -> None:
    del self.__dict__[name]
    self.__dict__.get(_SPEC, {}).pop(name, None)

  def __getstate__(self): return {k: v for k, v in self.__dict__.items() if k != _SPEC}
  def __setstate__(self, state): self.__dict__.update(state)

  def replace(self, **changes) -> 'Module':
    """A copy with some fields changed (like `dataclasses.replace`); `self` is unchanged.

    >>> import tinyjx.numpy as jnp
    >>> class P(Module):
    ...   def __init__(self): self.w = jnp.zeros(2)
    >>> P().replace(w=jnp.ones(2)).w.tolist()
    [1.0, 1.0]
    """
    out = object.__new__(type(self))
    out.__dict__.update(self.__dict__)
    out.__dict__[_SPEC] = dict(self.__dict__.get(_SPEC, {}))
    for k, v in changes.items():
      if k not in self.__dict__:
        raise AttributeError(f"{type(self).__name__}.replace: no field {k!r}; fields are "
                             f"{[n for n, _ in _fields(self)]}")
      setattr(out, k, v)
    return out

  def __repr__(self) -> str: return _pformat(self, 0)

_register(Module)

def static_field_value(m: Module, name: str):
  """The value of field `name` of `m` (for code that walks modules generically)."""
  return vars(m)[name]

# ---------------------------------------------------------------- repr, as Equinox prints modules

def _short(x) -> str:
  if isinstance(x, tinyjx.Array): return f"{x.dtype.short}[{','.join(map(str, x.shape))}]"
  if isinstance(x, np.ndarray): return f"np.{x.dtype.name}[{','.join(map(str, x.shape))}]"
  if callable(x) and hasattr(x, '__name__') and not isinstance(x, type): return x.__name__
  return repr(x)

def _pformat(x, indent: int) -> str:
  """One line when it fits in 100 columns, else one field per line, indented."""
  if isinstance(x, Module):
    items = [(k, v) for k, v in _fields(x) if not k.startswith('_')]
    return _layout(type(x).__name__ + '(', [f"{k}={_pformat(v, indent + 2)}" for k, v in items], ')', indent)
  if isinstance(x, list): return _layout('[', [_pformat(v, indent + 2) for v in x], ']', indent)
  if isinstance(x, tuple) and not hasattr(x, '_fields') and any(_is_dynamic(v) for v in tree_util.tree_leaves(
      x, is_leaf=_is_module)):
    return _layout('(', [_pformat(v, indent + 2) for v in x], ')', indent)
  if isinstance(x, dict): return _layout('{', [f"{k!r}: {_pformat(v, indent + 2)}" for k, v in x.items()], '}', indent)
  return _short(x)

def _layout(open_: str, parts: list, close: str, indent: int) -> str:
  one = open_ + ', '.join(parts) + close
  if len(one) + indent <= 100 and '\n' not in one: return one
  pad = ' ' * (indent + 2)
  return open_ + '\n' + ''.join(f"{pad}{p},\n" for p in parts) + ' ' * indent + close

# ---------------------------------------------------------------- trainable leaves, partition and combine

def _map_leaves(f, tree, frozen: bool = False):
  """`tree` with each leaf x replaced by f(x, frozen), frozen telling whether x sits in a state field."""
  if isinstance(tree, Module):
    pairs, aux = _flatten_with_keys(tree)
    kids = [_map_leaves(f, c, frozen or k.name in type(tree).state_fields) for k, c in pairs]
    return _unflatten(type(tree), aux, kids)
  leaves, treedef = tree_util.tree_flatten(tree, is_leaf=_is_module)
  if len(leaves) == 1 and leaves[0] is tree: return f(tree, frozen)
  return treedef.unflatten([_map_leaves(f, x, frozen) for x in leaves])

def trainable_mask(tree):
  """A pytree like `tree` with True at the leaves an optimizer should update: floating-point arrays outside the
  `state_fields` of their module (so BatchNorm's running statistics and integer arrays are False).

  >>> import nn, tinyjx.random as random
  >>> m = nn.trainable_mask(nn.BatchNorm(2))
  >>> m.weight, m.running_mean
  (True, False)
  """
  def trainable(x, frozen): return not frozen and is_array(x) and np.dtype(_np_dtype(x)).kind == 'f'
  return _map_leaves(trainable, tree)

def _np_dtype(x):
  return x.dtype if isinstance(x, np.ndarray) else (np.float32 if x.dtype.kind == 'f' else x.dtype.np)

def partition(tree, mask=None):
  """(selected, rest): two trees like `tree`, each with None where the other has the leaf.

  `mask` is a pytree of bools like `tree` (default: `trainable_mask(tree)`), or a function of a leaf.

  >>> import nn
  >>> params, state = nn.partition(nn.BatchNorm(2))
  >>> params.running_mean is None, state.weight is None
  (True, True)
  """
  if mask is None: mask = trainable_mask(tree)
  elif callable(mask) and not isinstance(mask, Module): mask = tree_util.tree_map(mask, tree)
  flags = tree_util.tree_structure(tree).flatten_up_to(mask)
  leaves, treedef = tree_util.tree_flatten(tree)
  selected = treedef.unflatten([x if bool(m) else None for x, m in zip(leaves, flags)])
  rest = treedef.unflatten([None if bool(m) else x for x, m in zip(leaves, flags)])
  return selected, rest

def combine(*trees):
  """The inverse of `partition`: at each leaf position, the first of `trees` that is not None there.

  >>> import nn
  >>> bn = nn.BatchNorm(2)
  >>> nn.combine(*nn.partition(bn)).running_var.tolist()
  [1.0, 1.0]
  """
  def first(*xs): return next((x for x in xs if x is not None), None)
  return tree_util.tree_map(first, *trees, is_leaf=lambda x: x is None)
