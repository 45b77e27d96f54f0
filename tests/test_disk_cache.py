"""The kernel cache on disk: the TINYJX_CACHE_MAX_MB bound and its least-recently-used eviction, damaged entries
that are rebuilt, and files others can write to that are never loaded. (tests/test_cpu_device.py has the first
cases of each: a private directory, truncated and corrupted libraries, a missing checksum, an unsafe directory.)"""
import os, time
import pytest
import tinyjx
from tinyjx.devices import cpu as comp, diskcache

SOURCE = "int tjx_answer(void) { return %d; }\n"

def key(i: int) -> str:
  cc = comp.find_compiler()
  return comp.cache_key(SOURCE % i, cc, comp.compiler_flags(cc))

def answer(i: int, forget: bool = True) -> int:
  """Load library i (from disk, or built now; from memory only when `forget` is False) and call it."""
  if forget: comp._loaded.clear()
  return comp.load_library(SOURCE % i).tjx_answer()

def keys_on_disk(d) -> set:
  return {n.split('.')[0] for n in os.listdir(d) if diskcache.KEY.fullmatch(n.split('.')[0])}

def entry_bytes(d, k: str) -> int: return sum(p.stat().st_size for p in d.glob(k + '.*'))

def age(d, k: str, seconds_ago: float) -> None:
  for p in d.glob(k + '.*'): os.utime(p, (time.time() - seconds_ago,) * 2)

@pytest.fixture
def builds(monkeypatch):
  """The number of compiler runs since the test began."""
  calls = []
  build = comp._build
  monkeypatch.setattr(comp, '_build', lambda *a: (calls.append(a[-1]), build(*a))[1])
  return calls

# --- the bound ---
def test_least_recently_used_entries_go_first(cpu, fresh_cache, builds):
  for i in (10, 11, 12): assert answer(i) == i
  for i, ago in ((10, 300), (11, 200), (12, 100)): age(fresh_cache, key(i), ago)
  (fresh_cache / 'datasets').mkdir()
  (fresh_cache / 'datasets' / 'big').write_bytes(b'x' * 200_000)     # not entries: never counted, never removed
  (fresh_cache / 'flags-0123.txt').write_bytes(b'-O3' * 100_000)
  bound = 2.5 * entry_bytes(fresh_cache, key(10)) / 2 ** 20
  with tinyjx.Context(TINYJX_CACHE_MAX_MB=bound):
    assert answer(10) == 10             # a use from disk: 10 becomes the most recently used of the three
    assert answer(13) == 13             # a new entry: the two least recently used (11, 12) go
  assert keys_on_disk(fresh_cache) == {key(10), key(13)}
  assert not list(fresh_cache.glob(key(11) + '*')) and not list(fresh_cache.glob('*.lock'))
  assert (fresh_cache / 'datasets' / 'big').exists() and (fresh_cache / 'flags-0123.txt').exists()
  assert len(builds) == 4 and answer(10) == 10 and answer(13) == 13 and len(builds) == 4   # the kept ones load
  assert answer(11) == 11 and len(builds) == 5                                             # an evicted one rebuilds

def test_libraries_this_process_loaded_are_kept(cpu, fresh_cache):
  with tinyjx.Context(TINYJX_CACHE_MAX_MB=1e-6):         # smaller than any library
    for i in (20, 21, 22): assert answer(i, forget=False) == i
    assert keys_on_disk(fresh_cache) == {key(20), key(21), key(22)}
    assert answer(23) == 23                                 # forgets them: now only the newest entry stays
    assert keys_on_disk(fresh_cache) == {key(23)}

def test_zero_means_unbounded_and_held_entries_are_skipped(cpu, fresh_cache):
  for i in (30, 31): answer(i)
  with tinyjx.Context(TINYJX_CACHE_MAX_MB=0):
    assert diskcache.evict(str(fresh_cache)) == []
  with tinyjx.Context(TINYJX_CACHE_MAX_MB=1e-6), diskcache.entry_lock(str(fresh_cache / (key(30) + '.so'))):
    assert diskcache.evict(str(fresh_cache)) == [key(31)]   # 30's lock is held: someone is building or removing it
  assert keys_on_disk(fresh_cache) == {key(30)}

def test_write_checked_entries_are_bounded_too(tmp_path):
  entries = [str(tmp_path / f"{i:032x}.bin") for i in range(3)]
  with tinyjx.Context(TINYJX_CACHE_MAX_MB=2.5 * 1064 / 2 ** 20):   # 1000 bytes and a 64-byte checksum each
    for i, e in enumerate(entries):
      diskcache.write_checked(e, b'k' * 1000)
      os.utime(e, (time.time() - 100 + i,) * 2)
  assert [diskcache.read_checked(e) is not None for e in entries] == [False, True, True]

def test_a_full_cache_is_not_scanned_at_every_write(tmp_path, monkeypatch):
  """An eviction frees the cache to LOW_WATER of the bound, so the writes that follow add to the estimate and do not
  scan the directory again until they pass the bound (a full cache was scanned at every compile)."""
  entries = [str(tmp_path / f"{i:032x}.bin") for i in range(14)]
  scans, scan = [], diskcache._entries
  monkeypatch.setattr(diskcache, '_entries', lambda d: (scans.append(d), scan(d))[1])
  with tinyjx.Context(TINYJX_CACHE_MAX_MB=10 * 1064 / 2 ** 20):   # ten entries of 1000 bytes and a checksum
    for i, e in enumerate(entries):
      diskcache.write_checked(e, b'k' * 1000)
      os.utime(e, (time.time() - 100 + i,) * 2)
      if i == 10: assert len(scans) == 2           # the first write scans (no estimate yet), the eleventh is over
  on_disk = [diskcache.read_checked(e) is not None for e in entries]
  assert len(scans) == 3                            # then two more writes fit under the bound: one scan, at the last
  assert sum(on_disk) <= 10 and on_disk[-1] and not on_disk[0]

def test_a_reader_that_loses_its_entry_rebuilds_it(cpu, fresh_cache, builds, monkeypatch):
  cc = comp.find_compiler()
  so = os.path.join(diskcache.cache_dir(), key(41) + '.so')
  comp._build(cc, comp.compiler_flags(cc), SOURCE % 41, so)     # on disk, never loaded by this process
  read = diskcache.read_checked
  def evicted_meanwhile(entry):   # another process evicts the entry between the checksum test and dlopen
    monkeypatch.setattr(diskcache, 'read_checked', read)
    data = read(entry)
    for p in fresh_cache.glob(key(41) + '.*'): p.unlink()
    return data
  monkeypatch.setattr(diskcache, 'read_checked', evicted_meanwhile)
  assert answer(41) == 41 and len(builds) == 2 and diskcache.read_checked(so) is not None

# --- damaged entries ---
def damage_and_reload(cache, i: int, name: str, damage) -> None:
  """Damage file `name` of entry i, then load the entry: it must be rebuilt, whole and valid."""
  answer(i)
  path = cache / (key(i) + name)
  moved = cache / 'moved'
  os.replace(path, moved)            # a new file or directory: the library this process mapped stays intact
  damage(path, moved.read_bytes())
  assert answer(i) == i
  so = cache / (key(i) + '.so')
  assert so.is_file() and diskcache.read_checked(str(so)) is not None

def directory(path, _):
  path.mkdir()
  (path / 'inside').write_text('x')

def test_a_truncated_checksum_is_rebuilt(cpu, fresh_cache, builds):
  damage_and_reload(fresh_cache, 50, '.sha256', lambda p, b: p.write_bytes(b[:10]))
  assert len(builds) == 2

@pytest.mark.parametrize('name', ['.so', '.sha256', '.c'])
def test_a_directory_in_place_of_a_file_is_rebuilt(cpu, fresh_cache, name):
  damage_and_reload(fresh_cache, 51, name, directory)

# --- files others can write to ---
def test_a_library_others_can_write_to_is_not_loaded(cpu, fresh_cache, builds):
  answer(60)
  so = fresh_cache / (key(60) + '.so')
  os.chmod(so, 0o666)
  assert comp._load_checked(str(so)) is None and diskcache.read_checked(str(so)) is None
  assert answer(60) == 60 and len(builds) == 2 and not so.stat().st_mode & 0o022   # rebuilt, privately

def test_an_unsafe_directory_says_why_and_how_to_fix_it(cpu, tmp_path):
  bad = tmp_path / "shared"
  bad.mkdir()
  os.chmod(bad, 0o775)
  diskcache._private_dir.clear()
  try:
    with tinyjx.Context(TINYJX_CACHE_DIR=str(bad)), pytest.warns(UserWarning) as w:
      d = diskcache.cache_dir()
    assert d != str(bad) and diskcache.safe_dir(d)
    assert "other users can write to it" in str(w[0].message) and "chmod 700" in str(w[0].message)
  finally:
    diskcache._private_dir.clear()

# --- plans: a jitted program's lowering on disk ---
import json
import numpy as np
import tinyjx.numpy as jnp
from tinyjx import lower
from tinyjx.lower import plans

def program(x):   # a few kernels (plans are written from plans.MIN_KERNELS up)
  a = jnp.exp(x).sum(0)
  return a, (x * a).max(1), jnp.tanh(x @ x.T).sum(0) + x.max(), (x.T @ x).sum(0)

def want(x):
  a = np.exp(x).sum(0)
  return a, (x * a).max(1), np.tanh(x @ x.T).sum(0) + x.max(), (x.T @ x).sum(0)

def build(cpu, x):
  """What a new process does for a jitted `program`: trace, then compile_jaxpr (no in-memory executable)."""
  comp._loaded.clear()
  jaxpr = tinyjx.jit(program).trace(x).jaxpr
  return jaxpr, lower.build_executable(cpu, jaxpr)

def check(cpu, exe, x):
  got = exe.run([cpu.from_numpy(np.asarray(x), tinyjx.dtypes.float32)])
  for g, w in zip(got, want(x)): np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-4)

def test_a_second_process_runs_the_plan_without_lowering(cpu, fresh_cache, monkeypatch):
  x = np.random.default_rng(0).standard_normal((24, 16)).astype(np.float32)
  jaxpr, first = build(cpu, x)
  assert len(list(fresh_cache.glob('*.plan'))) == 1
  monkeypatch.setattr(lower, 'lower', lambda *a: pytest.fail("lowered again"))
  _, second = build(cpu, x)
  check(cpu, second, x)
  assert second.source == first.source and [k.name for k in second.kernels] == [k.name for k in first.kernels]
  assert second.flops == first.flops and 'kernel 0' in str(second)

@pytest.mark.parametrize('damage', ['not json', 'other program', 'wrong form'])
def test_a_damaged_or_foreign_plan_is_lowered_again_and_rewritten(cpu, fresh_cache, damage):
  x = np.random.default_rng(1).standard_normal((20, 12)).astype(np.float32)
  jaxpr, _ = build(cpu, x)
  path = next(fresh_cache.glob('*.plan'))
  plan = json.loads(path.read_bytes())
  if damage == 'other program':   # a real plan of another program, filed under this key (checksum and all)
    other = tinyjx.jit(lambda v: program(v * 2)).trace(x).jaxpr
    lower.build_executable(cpu, other)
    other_path = fresh_cache / (plans.key_of(cpu, other, lower.PASSES) + '.plan')
    bad = other_path.read_bytes()
  else:
    bad = b'{"format": 1, "key"' if damage == 'not json' else json.dumps({**plan, 'slots': 7}).encode()
  diskcache.write_checked(str(path), bad)
  lowered = []
  real = lower.lower
  def counting(*a):
    lowered.append(1)
    return real(*a)
  try:
    lower.lower = counting
    _, exe = build(cpu, x)
  finally:
    lower.lower = real
  assert lowered == [1]
  check(cpu, exe, x)
  assert json.loads(path.read_bytes()) == plan                       # written anew

def test_plans_are_not_used_where_the_lowering_is_watched_or_has_steps(cpu, fresh_cache):
  x = np.ones((8, 8), np.float32)
  jaxpr = tinyjx.jit(program).trace(x).jaxpr
  assert plans.key_of(cpu, jaxpr, lower.PASSES) is not None
  with tinyjx.Context(DEBUG=3):
    assert plans.key_of(cpu, jaxpr, lower.PASSES) is None
  swapped = [(name, (lambda st: fn(st)) if name == 'render' else fn) for name, fn in lower.PASSES]
  assert plans.key_of(cpu, jaxpr, swapped) != plans.key_of(cpu, jaxpr, lower.PASSES)
  looped = tinyjx.jit(lambda v: (tinyjx.lax.fori_loop(0, 3, lambda i, c: c * 2, v), *program(v))).trace(x).jaxpr
  assert len(lower.lower(cpu, looped.params, looped.roots).kernels) >= plans.MIN_KERNELS
  lower.build_executable(cpu, looped)                                # kernels and a runtime step: no plan written
  assert not list(fresh_cache.glob('*.plan'))
