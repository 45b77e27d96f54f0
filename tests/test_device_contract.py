"""The device contract is the whole interface: a device whose memory is not the host's, defined in this one file,
runs eager code, jit, control flow and collectives through the same lowering, touching memory only through
its nine methods. `OpaqueDevice` reuses the CPU toolchain, but its handles are opaque objects (the runtime
cannot view them as numpy arrays), so anything that bypassed the contract would fail here."""
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import devices, lax
from tinyjx.devices import cpu

class Handle:
  """Device memory the host cannot address directly; only the device's methods look inside."""
  def __init__(self, nbytes: int): self._mem = np.zeros(max(nbytes, 1), np.uint8)

class OpaqueDevice(cpu.CPUDevice):
  kind = "OPAQUE"
  host_memory = False
  calls: dict = {}
  from_numpy, wrap = devices.Backend.from_numpy, devices.Backend.wrap   # DeviceBuffers, read with copy_out

  def _count(self, name): OpaqueDevice.calls[name] = OpaqueDevice.calls.get(name, 0) + 1
  def allocate(self, nbytes):
    self._count('allocate')
    return Handle(nbytes)
  def free(self, handle): self._count('free')
  def copy_in(self, handle, host, offset=0):
    self._count('copy_in')
    super().copy_in(handle._mem, host, offset)
  def copy_out(self, handle, host, offset=0):
    self._count('copy_out')
    super().copy_out(handle._mem, host, offset)
  def arguments(self, count, handles, base=None):
    self._count('arguments')
    raw = {s: (h[0]._mem, h[1]) if isinstance(h, tuple) else h._mem for s, h in handles.items()}
    return super().arguments(count, raw, base)
  def launch(self, program, args, global_size=None, local_size=None):
    self._count('launch')
    super().launch(program, args)
  def synchronize(self): self._count('synchronize')

DEVICE_CLASS = OpaqueDevice

@pytest.fixture
def opaque(cpu, monkeypatch):
  monkeypatch.setitem(devices.KINDS, 'OPAQUE', __name__)
  OpaqueDevice.calls.clear()
  with tinyjx.Context(TINYJX_DEVICE='OPAQUE', TINYJX_EAGER_COMPILE_MS=0):
    yield devices.get('OPAQUE')
  for name in [n for n in devices._instances if n.startswith('OPAQUE')]: del devices._instances[name]

def test_eager_and_jit_run_through_the_contract(opaque):
  x = jnp.asarray(np.arange(12.0, dtype=np.float32)).reshape(3, 4)
  assert devices.device_of(x.uop) == 'OPAQUE:0'
  np.testing.assert_allclose(np.asarray(jnp.exp(x).sum(axis=1)), np.exp(np.arange(12.0).reshape(3, 4)).sum(1),
                             rtol=1e-6)
  f = tinyjx.jit(lambda a, b: jnp.tanh(a @ b) + 1)
  a, b = np.ones((8, 16), np.float32), np.full((16, 4), 0.1, np.float32)
  np.testing.assert_allclose(np.asarray(f(jnp.asarray(a), jnp.asarray(b))), np.tanh(a @ b) + 1, rtol=1e-6)
  calls = OpaqueDevice.calls
  assert calls['launch'] >= 2 and calls['copy_in'] >= 2 and calls['copy_out'] >= 2 and calls['synchronize'] >= 2

def test_runtime_steps_read_and_write_back_device_memory(opaque):
  def f(xs):
    total, ys = lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3), xs)
    return lax.fori_loop(0, 3, lambda i, t: t * 2.0, total), ys
  xs = np.arange(12, dtype=np.float32).reshape(4, 3)
  total, ys = tinyjx.jit(f)(jnp.asarray(xs))
  cs = np.concatenate([np.zeros((1, 3), np.float32), np.cumsum(xs, 0)[:-1]])
  np.testing.assert_allclose(np.asarray(total), xs.sum(0) * 8)
  np.testing.assert_allclose(np.asarray(ys), cs * xs)

def test_collectives_run_on_devices_of_the_new_kind(opaque):
  with tinyjx.Context(TINYJX_CPU_DEVICES=2):
    out = tinyjx.pmap(lambda v: (lax.psum(v, 'i'), lax.all_gather(v, 'i')), axis_name='i')(jnp.arange(2.0))
    assert [d.name for d in tinyjx.local_devices(backend='opaque')] == ['OPAQUE:0', 'OPAQUE:1']
  assert np.asarray(out[0]).tolist() == [1.0, 1.0] and np.asarray(out[1]).tolist() == [[0.0, 1.0]] * 2

def test_the_contract_is_counted_in_the_base_class():
  doc = devices.Backend.__doc__
  methods = ['allocate', 'free', 'copy_in', 'copy_out', 'compile', 'load', 'arguments', 'launch', 'synchronize']
  assert 'nine methods' in doc and all(f"{m}(" in doc for m in methods)
  assert all(getattr(devices.Backend, m) is not getattr(cpu.CPUDevice, m) for m in methods if m != 'synchronize')

def test_the_new_device_walkthrough_in_the_docs_runs(cpu, tmp_path):
  import os, re, subprocess, sys
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with open(os.path.join(root, 'docs', 'devices.md')) as f: code = re.findall(r"```python\n(.*?)```", f.read(), re.S)
  assert len(code) == 1
  script = tmp_path / 'toy_device.py'
  script.write_text(code[0])
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                     env=dict(os.environ, PYTHONPATH=root))
  assert r.returncode == 0, r.stderr
  assert r.stdout.split()[0] == 'ToyDevice(id=0)' and abs(float(r.stdout.split()[1]) - np.exp(np.arange(4)).sum()) < 1e-4
