"""The program tests/test_mpi.py runs under `mpirun -n 2`; each process writes its report to OUT/rank<r>.json.

    mpirun -n 2 python tests/mpi_worker.py checks OUT   # collectives, a data-parallel run, inconsistent shapes
    mpirun -n 2 python tests/mpi_worker.py die OUT      # process 1 dies before a collective; process 0 must not hang

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
  else:
    collectives(report)
    data_parallel(report)
    inconsistent_shapes(report)
  with open(os.path.join(out_dir, f"rank{report['rank']}.json"), 'w') as f: json.dump(report, f)

if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2])
