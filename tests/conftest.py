"""Shared fixtures: the compiled CPU device (skipped where no C compiler exists) and a private kernel cache."""
import pytest
import tinyjx
from tinyjx import devices

@pytest.fixture
def cpu():
  """The CPU device; tests that need it skip, with the reason, on a machine without a C compiler."""
  from tinyjx.lower.compile import find_compiler, NoCompilerError
  try:
    find_compiler()
  except NoCompilerError as e:
    pytest.skip(str(e))
  return devices.get('CPU')

@pytest.fixture
def fresh_cache(tmp_path):
  """A private, empty kernel cache directory (TINYJX_CACHE_DIR) and an empty in-memory library table."""
  from tinyjx.lower import compile as comp
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
