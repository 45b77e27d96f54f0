"""tree: the short names of `jax.tree` (`tinyjx.tree.map`, `tinyjx.tree.leaves`, ...) for the functions of tree_util.

Each name here is the tree_util function itself, with JAX's signature: `map(f, tree, *rest, is_leaf=None)`,
`reduce(function, tree, initializer=..., is_leaf=None)`, `transpose(outer_treedef, inner_treedef, pytree)`, ...

>>> import tinyjx as jax
>>> jax.tree.map(lambda x: x * 2, {'a': 1, 'b': (2, 3)})
{'a': 2, 'b': (4, 6)}
>>> jax.tree.reduce(lambda a, b: a + b, [1, 2, 3], initializer=10)
16
"""
from tinyjx.tree_util import (  # noqa: F401
  tree_all as all, tree_broadcast as broadcast, tree_flatten as flatten, tree_flatten_with_path as flatten_with_path,
  tree_leaves as leaves, tree_leaves_with_path as leaves_with_path, tree_map as map,
  tree_map_with_path as map_with_path, tree_reduce as reduce, tree_reduce_associative as reduce_associative,
  tree_structure as structure, tree_transpose as transpose, tree_unflatten as unflatten)

__all__ = ['all', 'broadcast', 'flatten', 'flatten_with_path', 'leaves', 'leaves_with_path', 'map', 'map_with_path',
           'reduce', 'reduce_associative', 'structure', 'transpose', 'unflatten']
