"""nn.state: state dicts keyed by pytree paths, load_state_dict errors, safetensors round trips and bad files."""
import json, os, struct
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.random as random
import nn
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

def _write(path, header: dict | bytes, data: bytes = b'', length: int | None = None):
  text = header if isinstance(header, bytes) else json.dumps(header).encode()
  path.write_bytes(struct.pack('<Q', len(text) if length is None else length) + text + data)

@pytest.mark.parametrize('header, data, length, fragment', [
  (b'', b'', None, 'truncated'),
  ({'x': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}, b'', 10 ** 6, 'beyond the end of the file'),
  (b'{"x": ', b'', None, 'not valid JSON'),
  (b'[1, 2]', b'', None, 'must be a JSON object'),
  ({'x': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}}, b'\0' * 8, None, 'outside the data section'),
  ({'x': {'dtype': 'Q7', 'shape': [2], 'data_offsets': [0, 8]}}, b'\0' * 8, None, "unknown dtype 'Q7'"),
  ({'x': {'dtype': 'F32', 'shape': [3], 'data_offsets': [0, 8]}}, b'\0' * 8, None, 'needs 12 bytes'),
  ({'x': {'dtype': 'F32', 'shape': [-1], 'data_offsets': [0, 8]}}, b'\0' * 8, None, 'invalid shape'),
  ({'x': {'dtype': 'F32', 'shape': [2]}}, b'\0' * 8, None, 'must have dtype, shape and data_offsets'),
  ({'x': {'dtype': 'F32', 'shape': [2], 'data_offsets': [8, 0]}}, b'\0' * 8, None, 'outside the data section'),
])
def test_corrupted_files_give_clear_errors(tmp_path, header, data, length, fragment):
  p = tmp_path / 'bad.safetensors'
  if header == b'' and length is None: p.write_bytes(b'\x01\x02')
  else: _write(p, header, data, length)
  with pytest.raises(SafetensorsError, match=fragment) as e: safe_load(p)
  assert str(p) in str(e.value)

def test_truncated_real_file(tmp_path):
  p = tmp_path / 'ok.safetensors'
  safe_save({'w': np.arange(100, dtype=np.float32)}, p)
  p.write_bytes(p.read_bytes()[:-40])
  with pytest.raises(SafetensorsError, match='truncated'): safe_load(p)

def test_bad_inputs_to_save(tmp_path):
  with pytest.raises(TypeError, match='dict of name -> array'): safe_save([np.ones(2)], tmp_path / 'x')
  with pytest.raises(TypeError, match="'w' is a str"): safe_save({'w': 'hello'}, tmp_path / 'x')
  with pytest.raises(TypeError, match='metadata must map str to str'):
    safe_save({'w': np.ones(2)}, tmp_path / 'x', metadata={'step': 3})

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
