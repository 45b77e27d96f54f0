"""The program tests/test_mpi.py runs under `mpirun -n 2`; each process writes its report to OUT/rank<r>.json.

    mpirun -n 2 python tests/mpi_worker.py checks OUT   # collectives, a data-parallel run, inconsistent shapes
    mpirun -n 2 python tests/mpi_worker.py die OUT      # process 1 dies before a collective; process 0 must not hang
    mpirun -n 2 python tests/mpi_worker.py raise OUT    # process 1 raises before a collective; the job stops

The test compares the reported values with numpy; nothing here decides whether the run passed.
"""
import json, os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import tinyjx  # noqa: E402
from tinyjx import lax  # noqa: E402
from tinyjx.distributed import InconsistentProcessesError  # noqa: E402

def global_values(n: int) -> np.ndarray:
  """Device d's value is row d of an (n, n) table, the same on every process."""
  return (np.arange(n * n, dtype=np.float32).reshape(n, n) - 4) ** 2

def collectives(report: dict) -> None:
  n_local, n_all, me = tinyjx.local_device_count(), tinyjx.device_count(), tinyjx.process_index()
  mine = global_values(n_all)[me * n_local:(me + 1) * n_local]
  ring = [(d, (d + 1) % n_all) for d in range(n_all)]
  def f(x):
    return {'psum': lax.psum(x, 'i'), 'pmax': lax.pmax(x, 'i'), 'gather': lax.all_gather(x, 'i'),
            'index': lax.axis_index('i'), 'permute': lax.ppermute(x, 'i', ring),
            'scatter': lax.psum_scatter(x, 'i'),
            'grad': tinyjx.grad(lambda v: lax.psum(v * v, 'i').sum())(x)}
  out = tinyjx.pmap(f, axis_name='i')(mine)
  report.update({k: np.asarray(v).tolist() for k, v in out.items()})

SHAPES = {'scalar': (), 'vector': (4,), 'matrix': (4, 3)}   # per-device shapes; 4 = the devices of the job

def shaped_values(n: int, shape: tuple) -> np.ndarray:
  """Device d's value of `shape`, the same on every process: distinct per device and per element."""
  size = int(np.prod(shape, dtype=np.int64))
  return np.stack([(np.arange(size, dtype=np.float32) * (d + 1) + 3 * d - 5).reshape(shape) for d in range(n)])

def every_collective(x):
  """Every collective whose operand shape allows it (tiled both ways where it has the option)."""
  n = lax.axis_size('i')
  out = {'psum': lax.psum(x, 'i'), 'pmean': lax.pmean(x, 'i'), 'pmax': lax.pmax(x, 'i'), 'pmin': lax.pmin(x, 'i'),
         'gather': lax.all_gather(x, 'i'), 'gather_last': lax.all_gather(x, 'i', axis=x.ndim),
         'permute': lax.ppermute(x, 'i', [(d, (d + 1) % n) for d in range(n)]),
         'shuffle': lax.pshuffle(x, 'i', [(d + 2) % n for d in range(n)])}
  if x.ndim:
    out['gather_tiled'] = lax.all_gather(x, 'i', tiled=True)
    out['scatter'] = lax.psum_scatter(x, 'i')
    out['scatter_tiled'] = lax.psum_scatter(x, 'i', tiled=True)
    out['to_all'] = lax.all_to_all(x, 'i', 0, x.ndim - 1)
    out['to_all_tiled'] = lax.all_to_all(x, 'i', 0, 0, tiled=True)
  return out

def collectives_by_shape(report: dict) -> None:
  n_local, n_all, me = tinyjx.local_device_count(), tinyjx.device_count(), tinyjx.process_index()
  for name, shape in SHAPES.items():
    mine = shaped_values(n_all, shape)[me * n_local:(me + 1) * n_local]
    out = tinyjx.pmap(every_collective, axis_name='i')(mine)
    report[f'shaped_{name}'] = {k: np.asarray(v).tolist() for k, v in out.items()}

def data_parallel(report: dict) -> None:
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'examples'))
  import data_parallel as example
  report['losses_parallel'], report['losses_single'] = example.train(steps=4, batch=64, lr=0.1)

def inconsistent_shapes(report: dict) -> None:
  n_local = tinyjx.local_device_count()
  width = 3 + tinyjx.process_index()   # process 1 passes a different shape
  try:
    tinyjx.pmap(lambda x: lax.psum(x, 'i'), axis_name='i')(np.ones((n_local, width), np.float32))
    report['mismatch'] = None
  except InconsistentProcessesError as e:
    report['mismatch'] = str(e)

def main(mode: str, out_dir: str) -> None:
  tinyjx.distributed.initialize()
  report = {'rank': tinyjx.process_index(), 'count': tinyjx.process_count(), 'local': tinyjx.local_device_count(),
            'devices': [(d.id, d.process_index) for d in tinyjx.devices()],
            'local_devices': [d.id for d in tinyjx.local_devices()]}
  if mode == 'die':
    if tinyjx.process_index() == 1: os._exit(3)
    tinyjx.pmap(lambda x: lax.psum(x, 'i'), axis_name='i')(np.ones((report['local'], 2), np.float32))
    report['survived'] = True
  elif mode == 'raise':
    if tinyjx.process_index() == 1: raise RuntimeError("process one fails before the collective")
    tinyjx.pmap(lambda x: lax.psum(x, 'i'), axis_name='i')(np.ones((report['local'], 2), np.float32))
    report['survived'] = True
  else:
    collectives(report)
    collectives_by_shape(report)
    data_parallel(report)
    inconsistent_shapes(report)
  with open(os.path.join(out_dir, f"rank{report['rank']}.json"), 'w') as f: json.dump(report, f)

if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2])
