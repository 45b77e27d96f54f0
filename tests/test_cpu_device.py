"""The CPU device: buffers, executables, the disk cache and its safety rules, compiler errors, DEBUG output."""
import os, re, stat, subprocess, sys, textwrap
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import dtypes, counters
from tinyjx.devices.python import NumpyBuffer
from tinyjx.devices import cpu as comp, diskcache

F32 = dtypes.float32

def buf(a): return NumpyBuffer('CPU:0', np.ascontiguousarray(a), dtypes.to_dtype(a.dtype))

def test_from_numpy_is_zero_copy_for_owned_contiguous_arrays(cpu):
  a = np.arange(6, dtype=np.float32)
  assert cpu.from_numpy(a, F32).numpy() is a
  view = np.arange(12, dtype=np.float32)[::2]
  b = cpu.from_numpy(view, F32).numpy()
  assert b is not view and b.flags.c_contiguous and np.array_equal(b, view)

def test_executable_outputs_are_fresh_on_every_run(cpu):
  const = jnp.asarray(np.array([10.0, 20.0], np.float32))
  jaxpr = tinyjx.make_jaxpr(lambda x: (x + const, x, x + const, const))(jnp.zeros(2))
  exe = cpu.compile_jaxpr(jaxpr)
  x = np.array([1.0, 2.0], np.float32)
  first = exe.run([buf(x)])
  second = exe.run([buf(x + 1)])
  assert [o.numpy().tolist() for o in first] == [[11, 22], [1, 2], [11, 22], [10, 20]]
  assert [o.numpy().tolist() for o in second] == [[12, 23], [2, 3], [12, 23], [10, 20]]
  arrays = [o.numpy() for o in first + second]
  assert len({a.ctypes.data for a in arrays}) == len(arrays)          # nothing aliases anything
  assert first[1].numpy() is not x

def test_executable_describes_its_kernels(cpu):
  exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda x: jnp.exp(x).sum())(jnp.zeros((4, 4))))
  assert len(exe.kernels) == 1 and exe.kernels[0].name in str(exe)
  assert 'tjx_run_0' in str(exe) and exe.flops > 0
  with pytest.raises(TypeError, match="takes 1 input"):
    exe.run([])

def test_runtime_steps_plug_in_through_step_rules(cpu, monkeypatch):
  """A node kind the runtime runs itself (here a stand-in collective) sits between two kernels."""
  from tinyjx.lower import runtime
  from tinyjx.uop import UOp, Ops, shape_rules
  class Double:
    def __init__(self, src, dst): self.src, self.dst, self.reads, self.writes = src, dst, {src}, {dst}
    def run(self, frame): np.copyto(frame.array(self.dst), 2 * frame.array(self.src))
  monkeypatch.setitem(shape_rules, Ops.PSUM, lambda u: u.src[0].shape)
  monkeypatch.setitem(runtime.step_rules, Ops.PSUM, lambda node, st, outs: Double(st.slot_of[node.src[0]], outs[0]))
  from tinyjx.tracing import Jaxpr
  p = UOp(Ops.PARAM, F32, (), (0, (4,), 0))
  out = UOp(Ops.EXP, F32, (UOp(Ops.PSUM, F32, (UOp(Ops.ADD, F32, (p, p)),), ('i',)),))
  exe = cpu.compile_jaxpr(Jaxpr([p], [out]))
  assert len(exe.kernels) == 2 and len(exe.steps) == 3
  np.testing.assert_allclose(exe.run([buf(np.arange(4, dtype=np.float32))])[0].numpy(), np.exp(4 * np.arange(4.0)),
                             rtol=1e-6)

def test_counters_count_kernels_flops_and_bytes(cpu):
  exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda x: (x * 2).sum(axis=1))(jnp.zeros((8, 16))))
  with counters.measure() as c:
    exe.run([buf(np.ones((8, 16), np.float32))])
    exe.run([buf(np.ones((8, 16), np.float32))])
  assert c['kernels'] == 2 and c['flops'] >= 2 * 8 * 16 * 2 and c['bytes'] >= 2 * (8 * 16 + 8) * 4

def test_debug_levels_print_timing_kernels_and_source(cpu, capsys):
  x = jnp.asarray(np.ones((4, 8), np.float32))
  with tinyjx.Context(DEBUG=4):
    exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda x: jnp.tanh(x).sum(axis=1) + 1)(x))
  out = capsys.readouterr().out
  assert 'fuses' in out and 'tanh' in out and 'reduce_sum' in out     # DEBUG=3: kernels and their equations
  assert 'static void k0_' in out                                     # DEBUG=4: the source
  with tinyjx.Context(DEBUG=2):
    exe.run([buf(np.ones((4, 8), np.float32))])
  assert 'GFLOP/s' in capsys.readouterr().out

def test_thread_count_is_configurable(cpu):
  exe = cpu.compile_jaxpr(tinyjx.make_jaxpr(lambda x: x + 1)(jnp.zeros(3)))
  assert exe.binary.tjx_set_threads(1) == 1
  with tinyjx.Context(TINYJX_THREADS=1):
    assert exe.run([buf(np.zeros(3, np.float32))])[0].numpy().tolist() == [1, 1, 1]

# --- the disk cache ---
SOURCE = "int tjx_answer(void) { return %d; }\n"

def test_cache_dir_is_created_private_and_used(cpu, fresh_cache):
  lib = comp.load_library(SOURCE % 41)
  assert lib.tjx_answer() == 41
  assert stat.S_IMODE(os.stat(fresh_cache).st_mode) == 0o700
  names = os.listdir(fresh_cache)
  assert any(n.endswith('.so') for n in names) and any(n.endswith('.sha256') for n in names)
  assert any(n.endswith('.c') for n in names)

def test_corrupt_or_truncated_entries_are_rebuilt(cpu, fresh_cache):
  comp.load_library(SOURCE % 1)
  so = next(fresh_cache.glob('*.so'))
  for damage in (lambda b: b[:len(b) // 2], lambda b: b'garbage' + b[7:]):
    good = so.read_bytes()
    tmp = fresh_cache / 'damaged'
    tmp.write_bytes(damage(good))
    os.replace(tmp, so)          # a new file: the library this process already mapped stays intact
    comp._loaded.clear()
    assert comp.load_library(SOURCE % 1).tjx_answer() == 1
    assert so.read_bytes() == good or comp._load_checked(str(so)) is not None
  (fresh_cache / (so.stem + '.sha256')).unlink()               # a missing checksum also means: rebuild
  comp._loaded.clear()
  assert comp.load_library(SOURCE % 1).tjx_answer() == 1 and (fresh_cache / (so.stem + '.sha256')).exists()

def test_an_unsafe_cache_dir_is_not_used(cpu, tmp_path):
  bad = tmp_path / "shared"
  bad.mkdir()
  os.chmod(bad, 0o777)
  diskcache._private_dir.clear()
  saved = dict(comp._loaded)
  comp._loaded.clear()
  try:
    with tinyjx.Context(TINYJX_CACHE_DIR=str(bad)), pytest.warns(UserWarning, match="not using the cache directory"):
      assert comp.load_library(SOURCE % 7).tjx_answer() == 7
    assert not list(bad.glob('*.so'))
  finally:
    comp._loaded.clear(); comp._loaded.update(saved); diskcache._private_dir.clear()

def test_libraries_of_other_users_are_never_loaded(cpu, fresh_cache):
  if os.getuid() != 0: pytest.skip("needs root to give a file to another user")
  comp.load_library(SOURCE % 3)
  so = next(fresh_cache.glob('*.so'))
  os.chown(so, 65534, 65534)
  assert comp._load_checked(str(so)) is None

def test_compiler_errors_show_the_message_and_the_source_path(cpu, fresh_cache):
  with pytest.raises(comp.CompileError) as e:
    comp.load_library("int broken( { return; }\n")
  msg = str(e.value)
  assert 'error' in msg and '.c' in msg
  path = msg.split('(')[1].split(')')[0]
  assert os.path.exists(path) and 'broken' in open(path).read()

def test_a_first_build_tries_the_best_flags_without_a_probe(cpu, fresh_cache, monkeypatch):
  """With no flags known (no memo on disk, none built with in this process) the first build uses the best set at
  once, without compiling the probe first, and a build that worked records its flags. Where that set fails, the
  probe finds the one that works and the build is made with it; where the probe finds that same set, the source is
  at fault and its error is raised."""
  cc = comp.find_compiler()
  real = comp._flag_sets(cc)
  compiled = []
  run = subprocess.run
  def counted(args, *a, **k):
    compiled.append(list(args))
    return run(args, *a, **k)
  monkeypatch.setattr(comp.subprocess, 'run', counted)
  monkeypatch.setattr(comp, '_good_flags', {})
  assert comp.load_library("int tjx_fifty(void) { return 50; }").tjx_fifty() == 50
  assert not any(any(str(x).endswith('p.c') for x in c) for c in compiled)          # no probe
  assert comp._good_flags[cc] == real[0] and open(comp._memo(cc)).read().split() == list(real[0])
  compiled.clear()
  assert comp.build_flags(cc) == (real[0], True)
  # the best set fails here (a flag no compiler knows): the probe moves on to the next, and the build uses it
  bad = (real[0] + ('-fno-such-flag-tinyjx',),) + tuple(real[1:])
  monkeypatch.setattr(comp, '_flag_sets', lambda cc: list(bad))
  monkeypatch.setattr(comp, '_good_flags', {})
  os.remove(comp._memo(cc))
  assert comp.load_library("int tjx_fiftyone(void) { return 51; }").tjx_fiftyone() == 51
  assert comp._good_flags[cc] == real[1] and any(str(x).endswith('p.c') for c in compiled for x in c)
  # a broken source with the best set unknown but good: the compiler's error, once probed
  monkeypatch.setattr(comp, '_flag_sets', lambda cc: list(real))
  monkeypatch.setattr(comp, '_good_flags', {})
  os.remove(comp._memo(cc))
  with pytest.raises(comp.CompileError, match='error'):
    comp.load_library("int broken_again( { return; }\n")
  assert comp._good_flags[cc] == real[0]

def test_missing_compiler_says_how_to_get_one(monkeypatch, tmp_path):
  monkeypatch.setenv('PATH', str(tmp_path))
  monkeypatch.delenv('CC', raising=False)
  with pytest.raises(comp.NoCompilerError, match="apt-get install gcc.*TINYJX_DEVICE=PYTHON"):
    comp.find_compiler()

def test_a_warm_cache_skips_the_compiler_in_a_new_process(cpu, tmp_path):
  script = textwrap.dedent("""
    import numpy as np, tinyjx, tinyjx.numpy as jnp
    from tinyjx.devices import cpu as comp
    calls = []
    build = comp._build
    comp._build = lambda *a: (calls.append(1), build(*a))[1]
    print(float(jnp.sum(jnp.exp(jnp.asarray(np.arange(5.0, dtype=np.float32))))), len(calls))
  """)
  env = dict(os.environ, TINYJX_CACHE_DIR=str(tmp_path / "c"), PYTHONPATH=os.getcwd(), TINYJX_EAGER_COMPILE_MS='0')
  runs = [subprocess.run([sys.executable, '-c', script], env=env, capture_output=True, text=True) for _ in range(2)]
  for r in runs: assert r.returncode == 0, r.stderr
  (v1, n1), (v2, n2) = [r.stdout.split() for r in runs]
  assert v1 == v2 and int(n1) >= 1 and int(n2) == 0

def test_without_a_compiler_the_interpreter_is_the_default(tmp_path):
  script = textwrap.dedent("""
    import numpy as np, tinyjx, tinyjx.numpy as jnp
    from tinyjx import devices
    from tinyjx.devices.cpu import NoCompilerError
    print(devices.default_name(), float(jnp.sum(jnp.arange(4.0) * 2)))
    try:
      devices.get('CPU').run_graph([(jnp.arange(3.0) + 1).uop])
    except NoCompilerError as e:
      print('error:', 'apt-get install gcc' in str(e))
  """)
  env = {k: v for k, v in os.environ.items() if k not in ('CC', 'TINYJX_DEVICE')}
  env.update(PATH=str(tmp_path), PYTHONPATH=os.getcwd())
  r = subprocess.run([sys.executable, '-c', script], env=env, capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  assert r.stdout.split() == ['PYTHON', '12.0', 'error:', 'True']

# --- parallel translation units and the quick tier ---
def many_kernels(x):
  """Several kernels (reductions over different axes feed elementwise work), so the program has many units."""
  a = jnp.exp(x).sum(0)
  b = (x * a).max(1)
  c = jnp.tanh(x - b[:, None]).sum(1)
  return a, b, c, (x.T @ x).sum(0)

def many_kernels_want(x):
  a = np.exp(x).sum(0); b = (x * a).max(1); c = np.tanh(x - b[:, None]).sum(1)
  return a, b, c, (x.T @ x).sum(0)

def test_split_units_keep_the_prelude_and_every_piece_once(cpu):
  from tinyjx import lower
  jaxpr = tinyjx.make_jaxpr(many_kernels)(jnp.ones((8, 8)))
  src = lower.lower(cpu, jaxpr.params, jaxpr.outs).source
  head, *pieces = src.split(comp.UNIT)
  assert len(pieces) >= 4
  saved = comp.SPLIT_MIN_CHARS
  comp.SPLIT_MIN_CHARS = 0
  try:
    units = comp.split_units(src, 3)
  finally:
    comp.SPLIT_MIN_CHARS = saved
  assert len(units) == 3 and all(u.startswith(head) for u in units)
  assert sorted(p for u in units for p in u[len(head):].split(comp.UNIT)[1:]) == sorted(pieces)
  assert comp.split_units(src, 1) == [src] and comp.split_units("int x;", 4) == ["int x;"]

def test_parallel_units_give_the_same_results(cpu, fresh_cache, monkeypatch):
  built = []
  monkeypatch.setattr(comp, 'SPLIT_MIN_CHARS', 0)
  monkeypatch.setattr(comp, 'TIER_MIN_CHARS', 10 ** 9)
  monkeypatch.setattr(comp, 'compile_jobs', lambda: 3)
  real = comp._build_units
  monkeypatch.setattr(comp, '_build_units', lambda *a: built.append(len(a[2])) or real(*a))
  x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = tinyjx.jit(many_kernels)(jnp.asarray(x))
  assert built == [3]
  for g, w in zip(got, many_kernels_want(x)): np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4)

def test_a_unit_that_fails_falls_back_to_one_unit_and_its_error(cpu, fresh_cache, monkeypatch):
  monkeypatch.setattr(comp, 'SPLIT_MIN_CHARS', 0)
  src = (f"int tjx_a(void) {{ return 1; }}\n{comp.UNIT}\nint tjx_b(void) {{ return 2; }}\n{comp.UNIT}\n"
         "int tjx_c(void) { syntax error }\n")
  with pytest.raises(comp.CompileError, match=r"\.c\)"):
    comp.load_library(src)
  ok = src.replace("syntax error", "return 3;")
  lib = comp.load_library(ok)
  assert (lib.tjx_a(), lib.tjx_b(), lib.tjx_c()) == (1, 2, 3)

def test_a_cold_big_program_runs_its_quick_build_until_it_runs_again(cpu, fresh_cache, monkeypatch):
  monkeypatch.setattr(comp, 'TIER_MIN_CHARS', 0)
  x = np.random.default_rng(1).standard_normal((12, 8)).astype(np.float32)   # a program no other test compiled
  f = tinyjx.jit(many_kernels)
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    got = f(jnp.asarray(x))
    exe = f.lower(jnp.asarray(x)).compile().executable
    assert not exe.binary.final and not comp._upgrades                  # run once: no optimized build started
    f(jnp.asarray(x))
    assert comp._upgrades or exe.binary.final                           # the second run starts it
    comp.finish_upgrades()
    assert exe.binary.final and len(list(fresh_cache.glob('*.so'))) == 2   # the -O1 and the -O3 build
    assert exe.steps[0].program.fn is getattr(exe.binary.cdll, exe.steps[0].name)   # runs the optimized build now
    again = f(jnp.asarray(x))
  for g, a, w in zip(got, again, many_kernels_want(x)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(a), w, rtol=1e-4, atol=1e-4)
  comp._loaded.clear()                                     # a new process: the optimized build comes from the cache
  monkeypatch.setattr(comp, '_build', lambda *a: pytest.fail("built again"))
  assert comp.load_library(exe.source).final

def test_a_build_never_waits_on_a_flag_probe_that_has_not_started(cpu, fresh_cache, monkeypatch):
  """`prepare` starts the compiler-flag probe in a thread that `load_library` joins. A thread that is slow to start
  is published only once it has started: a build in another thread meanwhile finds no probe (and asks for the flags
  itself) instead of joining a thread that has not started, which raises."""
  import threading, time
  monkeypatch.setattr(comp, '_probes', {})
  caller = threading.Thread(target=comp.prepare)        # (made before Thread is patched: it starts at once)
  class SlowToStart(threading.Thread):
    def start(self):
      time.sleep(0.3)
      super().start()
  monkeypatch.setattr(threading, 'Thread', SlowToStart)
  caller.start()
  time.sleep(0.1)                                       # the probe thread exists and has not started yet
  assert comp.load_library("int tjx_eleven(void) { return 11; }").tjx_eleven() == 11
  caller.join()
  assert comp._probes[comp.find_compiler()].ident is not None

def test_the_quick_build_computes_the_optimized_builds_bits(cpu, fresh_cache, monkeypatch):
  """The quick tier builds at -O1, and a matmul kernel's packing and stores at -Og (prelude `TJX_PACKING_FN`):
  neither reorders a sum (a vectorized reduction is still vectorized at -O1), so a program's first call computes
  the same bits as every later one on the optimized build: a chunked matmul with an epilogue, row sums, a full
  sum."""
  monkeypatch.setattr(comp, 'TIER_MIN_CHARS', 0)
  rng = np.random.default_rng(5)
  x, w = rng.standard_normal((70, 600)).astype(np.float32), rng.standard_normal((600, 90)).astype(np.float32)
  f = tinyjx.jit(lambda x, w: (jnp.tanh(x @ w / 20 + 0.5), jnp.exp(x / 4).sum(axis=1), (x * 2).sum()))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    quick = [np.asarray(o) for o in f(x, w)]
    exe = f.lower(x, w).compile().executable
    assert not exe.binary.final and "TJX_PACKING_FN static void" in exe.source
    f(x, w)
    comp.finish_upgrades()
    assert exe.binary.final
    optimized = [np.asarray(o) for o in f(x, w)]
  for q, o in zip(quick, optimized): assert np.array_equal(q, o)
  np.testing.assert_allclose(quick[0], np.tanh(x.astype(np.float64) @ w / 20 + 0.5), rtol=1e-5, atol=1e-5)

def test_a_quick_build_in_units_defines_each_micro_kernel_once(cpu, fresh_cache, monkeypatch):
  """A quick build cut into units defines the micro-kernels in its first unit only (the others compile with
  -DTJX_MICRO_ELSEWHERE and link to it); it links (no fallback to one unit), and it computes the optimized build's
  bits, whose units each keep a static copy."""
  monkeypatch.setattr(comp, 'TIER_MIN_CHARS', 0)
  monkeypatch.setattr(comp, 'SPLIT_MIN_CHARS', 0)
  monkeypatch.setattr(comp, 'compile_jobs', lambda: 3)
  builds, real = [], comp._build_units
  def recording(*args):
    linked = real(*args)
    builds.append((args[4] if len(args) > 4 else False, linked))
    return linked
  monkeypatch.setattr(comp, '_build_units', recording)
  rng = np.random.default_rng(6)
  x, w = rng.standard_normal((70, 300)).astype(np.float32), rng.standard_normal((300, 90)).astype(np.float32)
  f = tinyjx.jit(lambda x, w: (jnp.tanh(x @ w / 20), x.T @ (x * 2), (x @ w).sum(0)))
  with tinyjx.Context(TINYJX_DEVICE='CPU'):
    quick = [np.asarray(o) for o in f(x, w)]
    exe = f.lower(x, w).compile().executable
    assert not exe.binary.final and len(re.findall(r"^TJX_MICRO\w*\(", exe.source, re.M)) >= 2
    f(x, w)
    comp.finish_upgrades()
    optimized = [np.asarray(o) for o in f(x, w)]
  assert builds == [(True, True), (False, True)]                # the quick build's units shared, both linked
  for q, o in zip(quick, optimized): assert np.array_equal(q, o)
  np.testing.assert_allclose(quick[1], x.T.astype(np.float64) @ (x * 2), rtol=1e-4, atol=1e-3)

def test_compiler_facts_are_remembered_and_a_damaged_memo_is_asked_again(cpu, fresh_cache):
  cc = comp.find_compiler()
  facts = comp.compiler_facts.__wrapped__(cc)
  memo, = fresh_cache.glob('compiler-*.json')
  assert facts['version'] and '__STDC__' in facts['macros']
  memo.write_text('{"version": 3')
  assert comp.compiler_facts.__wrapped__(cc) == facts and memo.read_text().startswith('{"version": "')
