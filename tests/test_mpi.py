"""The same program on two MPI processes with two virtual devices each (`mpirun -n 2 tests/mpi_worker.py`):
the global device list, psum, pmax, all_gather, psum_scatter, ppermute, axis_index and a gradient through psum
across processes, the data-parallel example against single-device training, an inconsistent shape that every
process reports, and a process that dies without the others hanging. Skipped where mpirun or mpi4py is absent."""
import json, os, re, shutil, subprocess, sys, time
import numpy as np
import pytest

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'mpi_worker.py')
LOCAL, PROCS = 2, 2

def mpi_missing() -> str:
  if shutil.which('mpirun') is None: return "mpirun is not installed (apt install openmpi-bin)"
  try:
    import mpi4py  # noqa: F401
  except ImportError:
    return "mpi4py is not installed (pip install mpi4py)"
  return ""

pytestmark = pytest.mark.skipif(bool(mpi_missing()), reason=mpi_missing() or "MPI available")

def mpirun(mode: str, out_dir, timeout: float, **env) -> tuple[subprocess.CompletedProcess, dict]:
  """Run the worker on PROCS processes; returns the completed process and the report of each rank that wrote one."""
  full = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
              TINYJX_CPU_DEVICES=str(LOCAL), PYTHONPATH=os.path.dirname(os.path.dirname(WORKER)), **env)
  cmd = ['mpirun', '-n', str(PROCS), '--oversubscribe', sys.executable, WORKER, mode, str(out_dir)]
  done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full)
  reports = {}
  for rank in range(PROCS):
    path = os.path.join(out_dir, f"rank{rank}.json")
    if os.path.exists(path):
      with open(path) as f: reports[rank] = json.load(f)
  return done, reports

@pytest.fixture(scope='module')
def checks(tmp_path_factory):
  done, reports = mpirun('checks', tmp_path_factory.mktemp('mpi'), timeout=300)
  assert done.returncode == 0 and sorted(reports) == [0, 1], done.stdout[-3000:] + done.stderr[-3000:]
  return reports

def table(n):   # the worker's global values: device d holds row d
  return (np.arange(n * n, dtype=np.float32).reshape(n, n) - 4) ** 2

def test_devices_span_both_processes(checks):
  for rank, r in checks.items():
    assert r['count'] == PROCS and r['local'] == LOCAL
    assert r['devices'] == [[d, d // LOCAL] for d in range(PROCS * LOCAL)]   # global ids, owning process
    assert r['local_devices'] == [rank * LOCAL + i for i in range(LOCAL)]

def test_collectives_across_processes(checks):
  n = PROCS * LOCAL
  xs = table(n)
  for rank, r in checks.items():
    mine = range(rank * LOCAL, (rank + 1) * LOCAL)
    np.testing.assert_allclose(r['psum'], [xs.sum(0)] * LOCAL)
    np.testing.assert_allclose(r['pmax'], [xs.max(0)] * LOCAL)
    np.testing.assert_allclose(r['gather'], [xs] * LOCAL)
    np.testing.assert_allclose(r['scatter'], [xs.sum(0)[d] for d in mine])
    np.testing.assert_allclose(r['permute'], [xs[(d - 1) % n] for d in mine])
    np.testing.assert_allclose(r['grad'], [2 * n * xs[d] for d in mine])   # psum's transpose is psum
    assert r['index'] == list(mine)

def expected_collectives(xs: np.ndarray) -> dict:
  """What each device gets from every collective of `mpi_worker.every_collective`, from numpy: one list per device."""
  n = len(xs)
  total = xs.sum(0)
  same = lambda v: [v] * n
  out = {'psum': same(total), 'pmean': same(total / n), 'pmax': same(xs.max(0)), 'pmin': same(xs.min(0)),
         'gather': same(xs), 'gather_last': same(np.stack(list(xs), axis=xs.ndim - 1)),
         'permute': [xs[(d - 1) % n] for d in range(n)], 'shuffle': [xs[(d + 2) % n] for d in range(n)]}
  if xs.ndim > 1:
    m = xs.shape[1] // n
    out['gather_tiled'] = same(np.concatenate(list(xs), axis=0))
    out['scatter'] = [total[d] for d in range(n)]
    out['scatter_tiled'] = [total[d * m:(d + 1) * m] for d in range(n)]
    out['to_all'] = [np.stack([xs[k][d] for k in range(n)], axis=xs.ndim - 2) for d in range(n)]
    out['to_all_tiled'] = [np.concatenate([xs[k][d * m:(d + 1) * m] for k in range(n)], axis=0) for d in range(n)]
  return out

@pytest.mark.parametrize('kind', ['scalar', 'vector', 'matrix'])
def test_every_collective_across_processes_for_each_operand_rank(checks, kind):
  sys.path.insert(0, os.path.dirname(WORKER))
  import mpi_worker
  n = PROCS * LOCAL
  expected = expected_collectives(mpi_worker.shaped_values(n, mpi_worker.SHAPES[kind]))
  for rank, r in checks.items():
    got = r[f'shaped_{kind}']
    assert sorted(got) == sorted(expected), (kind, sorted(got))
    for name, per_device in expected.items():
      want = np.stack(per_device[rank * LOCAL:(rank + 1) * LOCAL])
      np.testing.assert_allclose(np.asarray(got[name]), want, rtol=1e-6, err_msg=f"{name} of a {kind} on rank {rank}")

def test_data_parallel_step_across_processes_matches_one_device(checks):
  for r in checks.values():
    np.testing.assert_allclose(r['losses_parallel'], r['losses_single'], rtol=1e-5)
  assert checks[0]['losses_parallel'] == checks[1]['losses_parallel']   # every process saw the same steps

def test_inconsistent_shapes_fail_on_every_process(checks):
  for r in checks.values():
    assert r['mismatch'] is not None
    assert "process 0: " in r['mismatch'] and "x: f32[3]" in r['mismatch'] and "x: f32[4]" in r['mismatch']

def test_a_dead_process_stops_the_job(tmp_path):
  t0 = time.monotonic()
  done, reports = mpirun('die', tmp_path, timeout=120, TINYJX_COLLECTIVE_TIMEOUT='30', TINYJX_DEVICE='PYTHON')
  assert done.returncode != 0 and reports == {}
  out = done.stdout + done.stderr
  # the launcher stops process 0 and names the one that died: OpenMPI writes its name as [[job,1],rank]
  assert re.search(r"rank 1\b|\[\[\d+,\d+\],1\]", out), out[-2000:]
  assert time.monotonic() - t0 < 60   # well before the collective's own timeout would have fired twice

def test_a_process_that_raises_stops_every_process(tmp_path):
  t0 = time.monotonic()
  done, reports = mpirun('raise', tmp_path, timeout=120, TINYJX_COLLECTIVE_TIMEOUT='30', TINYJX_DEVICE='PYTHON')
  out = done.stdout + done.stderr
  assert done.returncode != 0 and reports == {}, out[-3000:]
  assert "process 1 raised RuntimeError; aborting the MPI job" in out, out[-3000:]
  assert "process one fails before the collective" in out
  assert time.monotonic() - t0 < 60
