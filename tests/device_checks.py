"""Checks every device kind passes the same way (tests/test_cl_device.py, tests/test_cuda_device.py)."""
import numpy as np
import tinyjx
from tinyjx import devices

def results_stay_on_the_device(kind: str, repr_name: str) -> None:
  """Devices looked up by kind; a jitted result stays in device memory until read; arrays of two devices mix."""
  found = tinyjx.devices(kind)
  assert found and found[0].platform == kind and repr(found[0]) == f'{repr_name}(id=0)'
  x = tinyjx.device_put(np.arange(4, dtype=np.float32), found[0])
  y = tinyjx.jit(lambda v: v * 2)(x)
  assert x.device == found[0] and y.device == found[0]
  assert isinstance(tinyjx.array.buffers[y.uop.arg[0]], devices.DeviceBuffer)   # not copied back until read
  back = tinyjx.device_put(y, 'CPU')
  assert back.device.platform == 'cpu' and np.asarray(back).tolist() == [0, 2, 4, 6]
  assert np.asarray(x + back).tolist() == [0, 3, 6, 9]   # arrays of two devices in one computation: moved

def second_process_reuses_the_binary(tmp_path, kind: str, patch: str, suffixes: tuple) -> None:
  """Two fresh processes run one jitted program on device `kind`: the first builds it (counted by `patch`, a line of
  Python that wraps the device's build step to append to `builds`), the second loads the cached binary, builds
  nothing and gets the same value; the cache then holds files of every suffix in `suffixes`."""
  import os, subprocess, sys, textwrap
  script = textwrap.dedent(f"""
    import tinyjx, tinyjx.numpy as jnp
    builds = []
    {patch}
    with tinyjx.Context(TINYJX_DEVICE={kind!r}):
      print(float(tinyjx.jit(lambda x: jnp.sum(jnp.cos(x) * 3))(jnp.arange(5.0))), len(builds))
  """)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ, TINYJX_CACHE_DIR=str(tmp_path / 'cache'), PYTHONPATH=root)
  runs = [subprocess.run([sys.executable, '-c', script], env=env, capture_output=True, text=True, timeout=300)
          for _ in range(2)]
  for r in runs: assert r.returncode == 0, r.stderr
  (v1, n1), (v2, n2) = [r.stdout.split() for r in runs]
  assert v1 == v2 and int(n1) >= 1 and int(n2) == 0
  for suffix in suffixes: assert list((tmp_path / 'cache').glob(f'*{suffix}')), suffix
