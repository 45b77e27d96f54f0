"""Threads and processes at once: one jitted function called from many Python threads, two processes compiling the
same new program into one cache directory, and pmap's per-device threads next to user threads (no deadlock).
Anything that could hang runs with a timeout, so a deadlock fails the test instead of stopping the suite."""
import os, subprocess, sys, textwrap, threading, uuid
import numpy as np
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax
from tinyjx.devices import diskcache

THREADS, CALLS = 8, 25

def in_threads(work, n: int = THREADS, timeout: float = 120.0) -> list:
  """Run work(i) in n threads started together; their results, or the first error. Fails if one is still running
  after `timeout` seconds (a deadlock)."""
  start, results, errors = threading.Barrier(n), [None] * n, []
  def body(i):
    try:
      start.wait()
      results[i] = work(i)
    except BaseException as e:
      errors.append(e)
  threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
  for t in threads: t.start()
  for t in threads: t.join(timeout)
  assert not any(t.is_alive() for t in threads), f"threads still running after {timeout} s: a deadlock"
  if errors: raise errors[0]
  return results

def test_one_jitted_function_from_many_threads(cpu):
  f = tinyjx.jit(lambda x, y: jnp.tanh(x) * y + x.sum())
  def work(i):
    rng = np.random.default_rng(i)
    for _ in range(CALLS):
      x, y = rng.standard_normal((2, 16, 8), dtype=np.float32)
      np.testing.assert_allclose(np.asarray(f(x, y)), np.tanh(x) * y + x.sum(), rtol=1e-5, atol=1e-5)
    return True
  assert all(in_threads(work))

def test_a_jitted_scan_from_many_threads(cpu):
  def cumulative(xs):
    return lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(xs.shape[1:]), xs)
  f = tinyjx.jit(cumulative)
  def reference(xs):
    c, ys = np.zeros(xs.shape[1:], np.float32), []
    for x in xs: ys, c = ys + [c], c * np.float32(0.5) + x
    return c, np.stack(ys)
  def work(i):
    rng = np.random.default_rng(100 + i)
    for _ in range(CALLS):
      xs = rng.standard_normal((6, 5), dtype=np.float32)
      for got, want in zip(f(xs), reference(xs)): np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    return True
  assert all(in_threads(work))

COMPILE = textwrap.dedent("""
  import os, sys, time
  from tinyjx.devices import cpu as comp
  barrier, me, source = sys.argv[1], sys.argv[2], sys.argv[3]
  builds = []
  build = comp._build
  comp._build = lambda *a: (builds.append(1), build(*a))[1]
  comp.compiler_flags(comp.find_compiler())          # probed before the barrier: both then go for the library
  open(os.path.join(barrier, me), 'w').close()
  deadline = time.time() + 60
  while len(os.listdir(barrier)) < 2 and time.time() < deadline: time.sleep(0.001)
  print(comp.load_library(source).tjx_unique(), len(builds))
""")

def test_two_processes_compiling_one_new_program_leave_one_entry(cpu, tmp_path):
  cache, barrier = tmp_path / "cache", tmp_path / "barrier"
  barrier.mkdir()
  tag = uuid.uuid4().int % 10 ** 9
  source = f"/* {uuid.uuid4()} */\nint tjx_unique(void) {{ return {tag}; }}\n"
  env = dict(os.environ, TINYJX_CACHE_DIR=str(cache), PYTHONPATH=os.getcwd())
  procs = [subprocess.Popen([sys.executable, '-c', COMPILE, str(barrier), str(i), source], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
  outs = [p.communicate(timeout=120) for p in procs]
  for p, (_, err) in zip(procs, outs): assert p.returncode == 0, err
  results = [out.split() for out, _ in outs]
  assert [int(r[0]) for r in results] == [tag, tag]
  assert sum(int(r[1]) for r in results) == 1              # the second waited for the first and loaded its build
  libraries = list(cache.glob('*.so'))
  assert len(libraries) == 1 and diskcache.read_checked(str(libraries[0])) is not None
  assert not list(cache.glob('.tmp-*')) and not list(cache.glob('*.lock'))

PMAP = textwrap.dedent("""
  import threading, numpy as np, tinyjx
  from tinyjx import lax
  f = tinyjx.pmap(lambda x: lax.psum(x * 2.0, 'i') + x, axis_name='i')
  errors, n = [], 6
  start = threading.Barrier(n)
  def work(t):
    try:
      with tinyjx.Context(TINYJX_CPU_DEVICES=4):
        start.wait()
        for k in range(10):
          x = np.arange(8, dtype=np.float32).reshape(4, 2) + 10 * t + k
          np.testing.assert_allclose(np.asarray(f(x)), 2 * x.sum(0) + x, rtol=1e-6)
    except BaseException as e:
      errors.append(repr(e))
  threads = [threading.Thread(target=work, args=(t,)) for t in range(n)]
  for t in threads: t.start()
  for t in threads: t.join()
  print(errors or 'ok')
""")

def test_pmap_from_many_user_threads_does_not_deadlock(cpu):
  """In a child process: a deadlock there is a timeout here, and the child is killed."""
  env = dict(os.environ, PYTHONPATH=os.getcwd(), TINYJX_COLLECTIVE_TIMEOUT='30')
  r = subprocess.run([sys.executable, '-c', PMAP], env=env, capture_output=True, text=True, timeout=90)
  assert r.returncode == 0 and r.stdout.strip() == 'ok', r.stdout + r.stderr

def test_pmap_worker_threads_see_the_callers_context(cpu, eight_devices, capsys):
  """The per-device threads act under the settings of the thread that called pmap (here DEBUG=2's kernel timing)."""
  f = tinyjx.pmap(lambda x: lax.psum(jnp.sin(x), 'i'), axis_name='i')
  x = np.ones((8, 3), np.float32)
  f(x)
  capsys.readouterr()
  with tinyjx.Context(DEBUG=2):
    np.testing.assert_allclose(np.asarray(f(x)), np.full((8, 3), 8 * np.sin(1.0)), rtol=1e-6)
  timed = [l for l in capsys.readouterr().out.splitlines() if l.startswith('***') and 'sin' in l]
  assert len(timed) >= 1, timed
  f(x)
  assert not [l for l in capsys.readouterr().out.splitlines() if l.startswith('***')]   # and not after the block
