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
