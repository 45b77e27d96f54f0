"""distributed: the same program on several processes, with MPI (mpi4py) as the engine (DESIGN section 8).

`initialize()` joins the job that `mpirun` started: rank and size come from mpi4py's COMM_WORLD, every process
must have the same number of local devices, and from then on `process_index()`, `process_count()`,
`tinyjx.devices()` (every process's devices) and `local_devices()` answer as in JAX, and pmap maps over the devices
of all processes. Without an MPI launcher in the environment `initialize()` only records one process, so the same
program runs alone, on virtual devices.

Exchanges between processes (`allgather_array`, `allgather_bytes`, `check_same`) run on a private duplicate of
COMM_WORLD as non-blocking MPI requests polled against a deadline (TINYJX_COLLECTIVE_TIMEOUT), so a process that
died or runs a different program makes the others raise CollectiveError instead of waiting forever. An MPI
collective that never completes cannot be cancelled and MPI_Finalize would wait for it, so a process left in that
state ends the job with MPI_Abort when it exits (an error exit on every process). An exception that nothing
catches aborts the job the same way, as `python -m mpi4py` does, so the other processes stop at once.
"""
from __future__ import annotations
import atexit, hashlib, os, sys, time
import numpy as np
from tinyjx import settings

LAUNCHER_VARS = ('OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_RANK', 'MPI_LOCALNRANKS')

class InconsistentProcessesError(ValueError):
  """The processes of an MPI job called a collective with different programs or shapes."""

class _State:
  initialized = False
  comm = None          # private duplicate of COMM_WORLD (None: one process)
  rank, size = 0, 1
  local_count = None   # local devices per process, fixed at initialize in a multi-process job
  stuck = False        # an MPI request was left incomplete: MPI_Finalize would hang, so exit through MPI_Abort

def launched_by_mpi() -> bool:
  return any(v in os.environ for v in LAUNCHER_VARS)

def initialize(coordinator_address=None, num_processes=None, process_id=None, local_device_ids=None) -> None:
  """Join the MPI job this process belongs to (idempotent). Run the program with `mpirun -n N python prog.py`;
  without mpirun this records a single process. The arguments exist for JAX compatibility: MPI supplies the
  process count and index, and when given they must agree with it.

  >>> import tinyjx
  >>> tinyjx.distributed.initialize(); tinyjx.process_count() >= 1
  True
  """
  if _State.initialized: return
  if launched_by_mpi():
    try:
      from mpi4py import MPI
    except ImportError as e:
      raise RuntimeError("tinyjx.distributed.initialize() runs under an MPI launcher but cannot import mpi4py "
                         f"({e}); install it with `pip install mpi4py` (and Open MPI, e.g. apt install "
                         "openmpi-bin libopenmpi-dev)") from None
    _State.comm = MPI.COMM_WORLD.Dup()
    _State.rank, _State.size = _State.comm.Get_rank(), _State.comm.Get_size()
  _check_given(num_processes, process_id)
  _State.initialized = True
  if _State.size > 1: _join()

def _check_given(num_processes, process_id) -> None:
  for given, real, what in ((num_processes, _State.size, 'num_processes'), (process_id, _State.rank, 'process_id')):
    if given is not None and int(given) != real:
      raise ValueError(f"initialize({what}={given}) disagrees with the MPI job, where it is {real}; leave it unset")

# this process's device count, `tinyjx.devices_api.local_device_count`, which registers it here when imported
count_local_devices = None

def _join() -> None:
  """Fix the local device count (the same on every process) and make errors end the whole job."""
  n = count_local_devices()
  counts = [int(b) for b in allgather_bytes(str(n).encode(), "tinyjx.distributed.initialize()")]
  if len(set(counts)) != 1:
    raise InconsistentProcessesError(f"the processes have different numbers of local devices {counts} (by process); "
                                     "give every process the same TINYJX_CPU_DEVICES")
  _State.local_count = n
  atexit.register(_abort_if_stuck)
  sys.excepthook = _aborting_excepthook(sys.excepthook)

def _aborting_excepthook(previous):
  def hook(kind, value, tb):
    previous(kind, value, tb)
    sys.stderr.write(f"tinyjx.distributed: process {_State.rank} raised {kind.__name__}; aborting the MPI job\n")
    sys.stderr.flush()
    _abort()
  return hook

def _abort_if_stuck() -> None:
  if _State.stuck:
    sys.stderr.write(f"tinyjx.distributed: process {_State.rank} has an unfinished MPI exchange; aborting the job\n")
    sys.stderr.flush()
    _abort()

def _abort() -> None:
  from mpi4py import MPI
  MPI.COMM_WORLD.Abort(1)

def is_initialized() -> bool: return _State.initialized

def process_index() -> int:
  """This process's index in the job (0 without MPI).

  >>> import tinyjx
  >>> tinyjx.process_index() < tinyjx.process_count()
  True
  """
  return _State.rank

def process_count() -> int:
  """The number of processes in the job (1 without MPI, or before `initialize()`).

  >>> import tinyjx
  >>> tinyjx.process_count() >= 1
  True
  """
  return _State.size

def fixed_local_count() -> int | None:
  """The local device count fixed by `initialize()` in a multi-process job, else None (read from settings)."""
  return _State.local_count

# ---------------------------------------------------------------- exchanges, each bounded by the deadline

def _wait(request, what: str) -> None:
  """Poll `request` until it completes, or raise CollectiveError after TINYJX_COLLECTIVE_TIMEOUT seconds."""
  timeout = float(settings.get('TINYJX_COLLECTIVE_TIMEOUT'))
  deadline, pause = time.monotonic() + timeout, 0.0
  while not request.Test():
    if time.monotonic() > deadline:
      _State.stuck = True
      from tinyjx.collectives import CollectiveError
      raise CollectiveError(f"{what}: process {_State.rank} waited {timeout:g} s for the other processes, which did "
                            "not join (one died, failed, or runs a different program). Set "
                            "TINYJX_COLLECTIVE_TIMEOUT to wait longer.")
    time.sleep(pause)
    pause = min(pause * 2 or 1e-5, 1e-3)

def _bytes_of(a: np.ndarray):
  from mpi4py import MPI
  return [a.reshape(-1).view(np.uint8), MPI.BYTE]

def allgather_array(a: np.ndarray, what: str) -> np.ndarray:
  """Every process's `a` (same shape and dtype on all), stacked along a new leading axis, in process order."""
  a = np.ascontiguousarray(a)
  out = np.empty((_State.size,) + a.shape, a.dtype)
  if a.nbytes == 0: return out
  _wait(_State.comm.Iallgather(_bytes_of(a), _bytes_of(out)), what)
  return out

def allgather_bytes(data: bytes, what: str) -> list[bytes]:
  """Every process's `data` (of any length), in process order."""
  from mpi4py import MPI
  sizes = allgather_array(np.array([len(data)], np.int64), what)[:, 0]
  out = np.empty(int(sizes.sum()), np.uint8)
  starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
  send = np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8)
  _wait(_State.comm.Iallgatherv([send, MPI.BYTE], [out, (sizes, starts), MPI.BYTE]), what)
  return [out[s:s + n].tobytes() for s, n in zip(starts, sizes)]

def check_same(text: str, what: str) -> None:
  """Raise InconsistentProcessesError on every process unless all processes pass the same `text` (a signature)."""
  digest = np.frombuffer(hashlib.sha256(text.encode()).digest(), np.uint8)
  if (allgather_array(digest, what) == digest).all(): return
  texts = [t.decode() for t in allgather_bytes(text.encode(), what)]
  lines = "\n".join(f"  process {i}: {t}" for i, t in enumerate(texts))
  raise InconsistentProcessesError(f"{what}: the processes disagree on the program or its shapes:\n{lines}\nEvery "
                                   "process must call it with the same per-device shapes, dtypes and static "
                                   "arguments (each passing its local shard, one entry per local device).")

def shutdown() -> None:
  """Leave the job: later calls see one process again (MPI itself is finalized when the program exits)."""
  if _State.comm is not None: _State.comm.Free()
  _State.initialized, _State.comm, _State.rank, _State.size, _State.local_count = False, None, 0, 1, None

__all__ = ['initialize', 'shutdown', 'is_initialized', 'process_index', 'process_count']
