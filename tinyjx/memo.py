"""memo: the bounded memo of tinyjx, a map that keeps the `size` most recently used entries.

Its users: the transformed jaxprs of autodiff (transforms/ad.py), the batched graphs of vmap (transforms/batching.py)
and the eager programs with their interpreted time (lower/__init__.py). Keys are content keys (`uop.key`, jaxpr keys,
settings), never `id()`s; values are whatever the caller built. Reading an entry makes it the most recently used;
storing one past `size` drops the least recently used. `stats` counts the hits and misses of `memo`. Not locked:
a cache shared between threads is guarded by its user. This module imports nothing of tinyjx.
"""
from __future__ import annotations
from collections import OrderedDict

class LRU:
  """A dict of at most `size` entries that forgets the least recently used one first.

  >>> c = LRU(2)
  >>> c.put('a', 1); c.put('b', 2); c.get('a'); c.put('c', 3)
  1
  >>> 'b' in c, c.get('b', 0), len(c)
  (False, 0, 2)
  >>> c.memo('d', lambda: 4), c.memo('d', lambda: 5), c.stats
  (4, 4, {'hits': 1, 'misses': 1})
  """
  def __init__(self, size: int):
    self.size, self.stats, self._items = size, {'hits': 0, 'misses': 0}, OrderedDict()

  def __len__(self) -> int: return len(self._items)
  def __contains__(self, key) -> bool: return key in self._items

  def get(self, key, default=None):
    """The value under `key`, now the most recently used; `default` if there is none."""
    if key not in self._items: return default
    self._items.move_to_end(key)
    return self._items[key]

  def put(self, key, value) -> None:
    """Store `value` under `key` as the most recently used entry; past `size` entries the oldest goes."""
    self._items[key] = value
    self._items.move_to_end(key)
    if len(self._items) > self.size: self._items.popitem(last=False)

  def pop(self, key, default=None): return self._items.pop(key, default)
  def clear(self) -> None: self._items.clear()

  def memo(self, key, build, reuse: bool = True):
    """The value under `key` if there is one and `reuse`; else `build()`'s, stored under `key` (a hit or a miss)."""
    if reuse and key in self._items:
      self.stats['hits'] += 1
      return self.get(key)
    self.stats['misses'] += 1
    value = build()
    self.put(key, value)
    return value
