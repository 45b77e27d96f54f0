"""Tests of the one bounded memo (tinyjx/memo.py) and of the caches built on it: autodiff's transformed jaxprs,
vmap's batched graphs and the eager programs keep their sizes and forget the least recently used entry first."""
import doctest
from tinyjx import memo, lower
from tinyjx.memo import LRU
from tinyjx.transforms import ad, batching

def test_the_least_recently_used_entry_goes_first():
  c = LRU(3)
  for k in 'abc': c.put(k, k.upper())
  assert c.get('a') == 'A'                     # a read makes 'a' the most recent: 'b' is now the oldest
  c.put('d', 'D')
  assert 'b' not in c and [k in c for k in 'acd'] == [True, True, True] and len(c) == 3
  c.put('c', 'C2')                             # a write refreshes too: 'a' is the oldest
  c.put('e', 'E')
  assert 'a' not in c and c.get('c') == 'C2' and c.pop('zz', 0) == 0

def test_memo_counts_hits_and_misses_and_rebuilds_when_not_reusing():
  c, built = LRU(2), []
  build = lambda: built.append(1) or len(built)
  assert [c.memo('k', build), c.memo('k', build), c.memo('k', build, reuse=False), c.memo('k', build)] == [1, 1, 2, 2]
  assert c.stats == {'hits': 2, 'misses': 2}

def test_the_three_caches_are_lrus_of_their_old_sizes():
  assert (ad._jaxpr_cache.size, batching._cache.size) == (ad.JAXPR_CACHE_SIZE, batching.CACHE_SIZE) == (256, 256)
  assert (lower._eager.size, lower._seen.size) == (lower.EAGER_CACHE_SIZE, 4 * lower.EAGER_CACHE_SIZE)
  assert all(isinstance(c, LRU) for c in (ad._jaxpr_cache, batching._cache, lower._eager, lower._seen))
  assert ad.jaxpr_cache_stats is ad._jaxpr_cache.stats and batching.cache_stats is batching._cache.stats

def test_docstring_examples_run():
  assert doctest.testmod(memo).failed == 0
