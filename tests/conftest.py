"""Shared fixtures: the compiled CPU device (skipped where no C compiler exists) and a private kernel cache.

SEMANTICS_DEVICE is the device the semantics suites pin (numpy/JAX behaviour, properties over thousands of
small graphs): the PYTHON reference interpreter by default, since compiling each graph would cost a compiler
call. `TINYJX_TEST_DEVICE=CPU TINYJX_EAGER_COMPILE_MS=0` runs the same suites compiled, every graph through
the lowering pipeline and the C compiler; `.ci/run` does that as its second pass (with fewer hypothesis
examples: `examples` below).
"""
import os
import pytest
import tinyjx
from tinyjx import devices

SEMANTICS_DEVICE = os.environ.get('TINYJX_TEST_DEVICE', 'PYTHON')

def examples(n: int) -> int:
  """Hypothesis examples for a property test: n, scaled by TINYJX_TEST_EXAMPLES (a fraction; the compiled pass
  of `.ci/run` uses fewer, since every example there is a compiler call)."""
  return max(1, round(n * float(os.environ.get('TINYJX_TEST_EXAMPLES', '1'))))

@pytest.fixture(scope="module")
def semantics_device():
  """Pins SEMANTICS_DEVICE for a whole module (`pytestmark = pytest.mark.usefixtures('semantics_device')`): the
  suites that check numpy/JAX semantics; compiled devices are compared with the reference elsewhere."""
  with tinyjx.Context(TINYJX_DEVICE=SEMANTICS_DEVICE):
    yield

@pytest.fixture
def cpu():
  """The CPU device; tests that need it skip, with the reason, on a machine without a C compiler."""
  from tinyjx.devices.cpu import find_compiler, NoCompilerError
  try:
    find_compiler()
  except NoCompilerError as e:
    pytest.skip(str(e))
  return devices.get('CPU')

@pytest.fixture
def fresh_cache(tmp_path):
  """A private, empty kernel cache directory (TINYJX_CACHE_DIR) and an empty in-memory library table."""
  from tinyjx.devices import cpu as comp
  saved = dict(comp._loaded)
  comp._loaded.clear()
  d = tmp_path / "cache"
  with tinyjx.Context(TINYJX_CACHE_DIR=str(d)):
    yield d
  comp._loaded.clear()
  comp._loaded.update(saved)

@pytest.fixture
def eight_devices():
  """Eight virtual CPU devices for pmap and collective tests."""
  with tinyjx.Context(TINYJX_CPU_DEVICES=8):
    yield

@pytest.fixture(params=['CPU', 'PYTHON'])
def device(request):
  """Runs a test once on the compiled CPU device and once on the PYTHON reference device."""
  with tinyjx.Context(TINYJX_DEVICE=request.param):
    yield request.param
