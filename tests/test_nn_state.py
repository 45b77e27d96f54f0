"""nn.state: state dicts keyed by pytree paths, load_state_dict errors, safetensors round trips, and saves that
survive exceptions and SIGKILL. Hostile files and refused saves are in test_nn_state_hostile.py."""
import doctest, glob, json, os, select, signal, stat, struct, subprocess, sys, textwrap
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.random as random
import nn
import nn.state
from nn.state import (get_state_dict, get_parameters, load_state_dict, safe_save, safe_load, safe_load_metadata,
                      SafetensorsError, StateDictError, bf16_words, bf16_values)

class MLP(nn.Module):
  def __init__(self, key):
    k1, k2 = random.split(key)
    self.l1, self.l2 = nn.Linear(4, 3, key=k1), nn.Linear(3, 2, key=k2)
    self.layers = [nn.BatchNorm(3), tinyjx.numpy.tanh]

class TinygradStyle:   # a plain class, not a Module: walked through its attributes
  def __init__(self):
    self.w = jnp.ones((2, 2))
    self.blocks = [nn.LayerNorm(2), {'scale': jnp.full((2,), 3.0)}]
    self.name = 'plain'

def test_state_dict_keys_are_dotted_paths():
  m = MLP(random.PRNGKey(0))
  sd = get_state_dict(m)
  assert list(sd) == ['l1.weight', 'l1.bias', 'l2.weight', 'l2.bias', 'layers.0.weight', 'layers.0.bias',
                      'layers.0.running_mean', 'layers.0.running_var']
  assert sd['l1.weight'].shape == (3, 4)
  assert [p.shape for p in get_parameters(m)] == [v.shape for v in sd.values()]

def test_state_dict_of_plain_objects():
  obj = TinygradStyle()
  assert list(get_state_dict(obj)) == ['w', 'blocks.0.weight', 'blocks.0.bias', 'blocks.1.scale']
  new = {k: v * 0 + 7 for k, v in get_state_dict(obj).items()}
  assert load_state_dict(obj, new) is obj   # plain objects are updated in place
  assert np.asarray(obj.blocks[1]['scale']).tolist() == [7.0, 7.0]
  assert np.asarray(obj.blocks[0].weight).tolist() == [7.0, 7.0]

def test_load_state_dict_returns_new_module():
  a, b = MLP(random.PRNGKey(0)), MLP(random.PRNGKey(1))
  c = load_state_dict(b, get_state_dict(a))
  for k, v in get_state_dict(c).items(): np.testing.assert_array_equal(np.asarray(v), np.asarray(get_state_dict(a)[k]))
  assert not np.array_equal(np.asarray(b.l1.weight), np.asarray(a.l1.weight))   # b itself is unchanged
  assert c.layers[1] is tinyjx.numpy.tanh

def test_load_state_dict_names_missing_unexpected_and_misshaped():
  m = MLP(random.PRNGKey(0))
  sd = dict(get_state_dict(m))
  del sd['l2.bias']
  sd['extra.weight'] = jnp.ones(3)
  sd['l1.weight'] = jnp.ones((4, 3))
  with pytest.raises(StateDictError) as e: load_state_dict(m, sd)
  msg = str(e.value)
  assert "missing keys" in msg and "'l2.bias'" in msg
  assert "unexpected keys" in msg and "'extra.weight'" in msg
  assert "mis-shaped" in msg and "l1.weight: model (3, 4), state dict (4, 3)" in msg
  sd['l1.weight'] = jnp.ones((3, 4))
  out = load_state_dict(m, sd, strict=False)   # loads what both have
  assert np.asarray(out.l1.weight).tolist() == [[1.0] * 4] * 3
  np.testing.assert_array_equal(np.asarray(out.l2.bias), np.asarray(m.l2.bias))

def test_load_casts_to_model_dtype():
  m = nn.Linear(2, 2, key=random.PRNGKey(0))
  out = load_state_dict(m, {'weight': np.ones((2, 2), np.float64), 'bias': np.zeros(2, np.int32)})
  assert out.weight.dtype == jnp.float32 and out.bias.dtype == jnp.float32

ALL_DTYPES = [np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float16,
              np.float32, np.float64]

@pytest.mark.parametrize('dt', ALL_DTYPES)
def test_numpy_round_trip_every_dtype(tmp_path, dt):
  rng = np.random.default_rng(0)
  x = (rng.standard_normal((3, 5)) * 100).astype(dt)
  p = tmp_path / 'x.safetensors'
  safe_save({'x': x, 'scalar': np.asarray(dt(1)), 'empty': np.zeros((0, 2), dt)}, p)
  back = safe_load(p, as_numpy=True)
  assert back['x'].dtype == np.dtype(dt) and back['x'].shape == (3, 5)
  np.testing.assert_array_equal(back['x'], x)
  assert back['scalar'].shape == () and back['empty'].shape == (0, 2)

def test_array_round_trip_f16_bf16(tmp_path):
  x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
  tensors = {'f32': jnp.asarray(x), 'f16': jnp.asarray(x, dtype=jnp.float16),
             'bf16': jnp.asarray(x, dtype=jnp.bfloat16), 'i32': jnp.arange(5), 'b': jnp.asarray([True, False])}
  p = tmp_path / 'a.safetensors'
  safe_save(tensors, p, metadata={'format': 'pt', 'step': '3'})
  back = safe_load(p)
  for k, v in tensors.items():
    assert back[k].dtype == v.dtype, k
    np.testing.assert_array_equal(np.asarray(back[k]), np.asarray(v))
  assert safe_load_metadata(p) == {'format': 'pt', 'step': '3'}

def test_bf16_rounding_is_nearest_even():
  # 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to the even one (1.0);
  # 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: the even one is 1 + 2^-6
  x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -12, -2.5, np.inf, -np.inf], np.float32)
  want = np.array([1.0, 1.0, 1 + 2 ** -6, 1 + 2 ** -7, -2.5, np.inf, -np.inf], np.float32)
  np.testing.assert_array_equal(bf16_values(bf16_words(x)), want)
  assert np.isnan(bf16_values(bf16_words(np.array([np.nan], np.float32))))[0]

def test_layout_matches_the_format(tmp_path):
  p = tmp_path / 'l.safetensors'
  safe_save({'a': np.arange(3, dtype=np.int16), 'b': np.ones(2, np.float32)}, p, metadata={'k': 'v'})
  raw = p.read_bytes()
  (n,) = struct.unpack('<Q', raw[:8])
  assert (8 + n) % 8 == 0   # data starts 8-byte aligned
  head = json.loads(raw[8:8 + n])
  assert head['a'] == {'dtype': 'I16', 'shape': [3], 'data_offsets': [0, 6]}
  assert head['b'] == {'dtype': 'F32', 'shape': [2], 'data_offsets': [6, 14]}
  assert head['__metadata__'] == {'k': 'v'}
  assert raw[8 + n:8 + n + 6] == np.arange(3, dtype='<i2').tobytes()

def test_model_checkpoint_round_trip(tmp_path):
  m = MLP(random.PRNGKey(0))
  p = tmp_path / 'model.safetensors'
  safe_save(get_state_dict(m), p)
  m2 = load_state_dict(MLP(random.PRNGKey(5)), safe_load(p))
  for k, v in get_state_dict(m2).items(): np.testing.assert_array_equal(np.asarray(v), np.asarray(get_state_dict(m)[k]))

def test_save_is_atomic(tmp_path, monkeypatch):
  p = tmp_path / 'ckpt.safetensors'
  safe_save({'w': np.ones(3, np.float32)}, p)
  before = p.read_bytes()
  class Boom(Exception): pass
  def crash(*a, **k): raise Boom()
  monkeypatch.setattr(os, 'replace', crash)   # the process "dies" after writing the temporary file
  with pytest.raises(Boom): safe_save({'w': np.zeros(1000, np.float32)}, p)
  monkeypatch.undo()
  assert p.read_bytes() == before
  assert os.listdir(tmp_path) == ['ckpt.safetensors']   # no temporary file left behind
  np.testing.assert_array_equal(safe_load(p, as_numpy=True)['w'], np.ones(3))

def test_interop_with_safetensors_package(tmp_path):
  st = pytest.importorskip('safetensors.numpy', reason='the safetensors package (test extra) is not installed')
  x = {'a': np.arange(6, dtype=np.float32).reshape(2, 3), 'b': np.array([1, -2], np.int64),
       'c': np.array([True, False]), 'h': np.linspace(0, 1, 5).astype(np.float16)}
  ours, theirs = tmp_path / 'ours.safetensors', tmp_path / 'theirs.safetensors'
  safe_save(x, ours, metadata={'who': 'tinyjx'})
  got = st.load_file(str(ours))
  for k in x: np.testing.assert_array_equal(got[k], x[k])
  st.save_file(x, str(theirs), metadata={'who': 'safetensors'})
  back = safe_load(theirs, as_numpy=True)
  for k in x:
    assert back[k].dtype == x[k].dtype
    np.testing.assert_array_equal(back[k], x[k])
  assert safe_load_metadata(theirs) == {'who': 'safetensors'}

def test_interop_bf16_with_safetensors_package(tmp_path):
  pytest.importorskip('safetensors', reason='the safetensors package (test extra) is not installed')
  from safetensors import safe_open
  from safetensors.numpy import save_file
  p = tmp_path / 'bf.safetensors'
  values = np.array([1.0, -2.5, 3.140625, 0.0], np.float32)   # exact in bfloat16
  safe_save({'w': jnp.asarray(values, dtype=jnp.bfloat16)}, p)
  with safe_open(str(p), 'np') as f:   # the package parses our header (numpy cannot hold bf16 values)
    assert list(f.keys()) == ['w']
  raw = p.read_bytes()
  (n,) = struct.unpack('<Q', raw[:8])
  assert json.loads(raw[8:8 + n])['w']['dtype'] == 'BF16'
  np.testing.assert_array_equal(np.frombuffer(raw[8 + n:], '<u2'), (values.view(np.uint32) >> 16).astype(np.uint16))
  save_file({'w16': (values.view(np.uint32) >> 16).astype(np.uint16)}, str(tmp_path / 'u16.safetensors'))
  assert safe_load(tmp_path / 'u16.safetensors', as_numpy=True)['w16'].dtype == np.uint16

def test_interop_unicode_names_and_edge_shapes(tmp_path):
  st = pytest.importorskip('safetensors.numpy', reason='the safetensors package (test extra) is not installed')
  x = {'π.weight': np.arange(4, dtype=np.float32), 'scalar': np.asarray(2.5), 'empty': np.zeros((0, 3), np.int32),
       'a' * 300: np.ones((2, 1, 2), np.uint8), 'T': np.arange(6, dtype=np.int16).reshape(2, 3).T}
  ours, theirs = tmp_path / 'ours.safetensors', tmp_path / 'theirs.safetensors'
  safe_save(x, ours, metadata={'ключ': 'значение'})
  st.save_file({k: np.ascontiguousarray(v) for k, v in x.items()}, str(theirs))
  for got in st.load_file(str(ours)), safe_load(theirs, as_numpy=True):
    assert set(got) == set(x)
    for k in x: np.testing.assert_array_equal(got[k], x[k])
  assert safe_load_metadata(ours) == {'ключ': 'значение'}

def test_save_fsyncs_file_then_renames_then_fsyncs_directory(tmp_path, monkeypatch):
  events = []
  real_fsync, real_replace = os.fsync, os.replace
  def fsync(fd):
    events.append('fsync dir' if stat.S_ISDIR(os.fstat(fd).st_mode) else 'fsync file')
    real_fsync(fd)
  def replace(a, b):
    events.append('replace')
    real_replace(a, b)
  monkeypatch.setattr(os, 'fsync', fsync)
  monkeypatch.setattr(os, 'replace', replace)
  safe_save({'w': np.ones(3, np.float32)}, tmp_path / 'c.safetensors')
  assert events == ['fsync file', 'replace', 'fsync dir']

def test_saved_file_has_umask_permissions(tmp_path):
  umask = os.umask(0o022)   # read the umask (it can only be read by setting it) and restore it
  os.umask(umask)
  p = tmp_path / 'c.safetensors'
  safe_save({'w': np.ones(3, np.float32)}, p)
  assert stat.S_IMODE(os.stat(p).st_mode) == 0o666 & ~umask   # not mkstemp's 0o600

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The child saves 100 tensors of 16 KiB over the checkpoint and stops, printing 'paused', either inside the data
# (before the 50th tensor's bytes are handed to the file) or after everything is written and fsynced, just before
# the rename. The parent then kills it with SIGKILL: no handler, no cleanup, like a crash or the OOM killer.
_KILLED_SAVE = textwrap.dedent('''
  import os, sys, time, numpy as np, nn.state as st
  path, where = sys.argv[1], sys.argv[2]
  def pause(*args):
    print('paused', flush=True)
    time.sleep(600)
  if where == 'mid-data':
    real, seen = st._tensor_bytes, []
    def slow(value):
      seen.append(1)
      if len(seen) == 50: pause()
      return real(value)
    st._tensor_bytes = slow
  else:
    os.replace = pause
  st.safe_save({f't{i}': np.full(4096, -1.0, np.float32) for i in range(100)}, path)
''')

def _kill_when_paused(args: list) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=ROOT)
  with subprocess.Popen([sys.executable, '-c', _KILLED_SAVE, *args], cwd=ROOT, env=env, text=True,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
    try:
      ready, _, _ = select.select([child.stdout], [], [], 120)
      line = child.stdout.readline() if ready else ''
      os.kill(child.pid, signal.SIGKILL)
      _, err = child.communicate(timeout=60)
    finally:
      child.kill()
  assert line == 'paused\n', f"the child did not reach the pause point: {err}"
  assert child.returncode == -signal.SIGKILL
  return child

@pytest.mark.skipif(not hasattr(signal, 'SIGKILL') or sys.platform == 'win32', reason='needs POSIX SIGKILL')
@pytest.mark.parametrize('where', ['mid-data', 'before-rename'])
def test_killed_save_leaves_old_checkpoint(tmp_path, where):
  p = tmp_path / 'ckpt.safetensors'
  old = np.arange(10, dtype=np.float32)
  safe_save({'w': old}, p, metadata={'step': '1'})
  before = p.read_bytes()
  full = tmp_path / 'elsewhere'
  full.mkdir()
  safe_save({f't{i}': np.full(4096, -1.0, np.float32) for i in range(100)}, full / 'new.safetensors')
  full_size = os.path.getsize(full / 'new.safetensors')
  _kill_when_paused([str(p), where])
  assert p.read_bytes() == before
  np.testing.assert_array_equal(safe_load(p, as_numpy=True)['w'], old)
  assert safe_load_metadata(p) == {'step': '1'}
  # what remains: one hidden temporary file, never named like a checkpoint; it really was cut short mid-data
  stale = [n for n in os.listdir(tmp_path) if n not in ('ckpt.safetensors', 'elsewhere')]
  assert len(stale) == 1 and stale[0].startswith('.ckpt.safetensors.') and stale[0].endswith('.tmp'), stale
  size = os.path.getsize(tmp_path / stale[0])
  assert (0 < size < full_size) if where == 'mid-data' else size == full_size
  # a later save is not disturbed by it, and a glob for checkpoints does not pick it up
  safe_save({'w': old + 1}, p)
  np.testing.assert_array_equal(safe_load(p, as_numpy=True)['w'], old + 1)
  assert glob.glob(str(tmp_path / '*.safetensors')) == [str(p)]
  assert stale[0] in os.listdir(tmp_path)   # left alone: another process may still be writing it

def test_doctests():
  assert doctest.testmod(nn.state, optionflags=doctest.ELLIPSIS).failed == 0
