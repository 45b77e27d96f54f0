"""nn.state against hostile safetensors files and bad saves: every malformed file fails with a SafetensorsError that
names the file, the tensor and what is wrong, before any tensor data is allocated; nothing is ever unpickled; and
safe_save refuses names and metadata that would make an invalid file. Where the safetensors package is installed,
each file we reject is checked to be rejected by it too, so our rules are the format's and not stricter ones."""
import ast, json, os, struct, tracemalloc
import numpy as np
import pytest
import nn.state
from nn.state import safe_save, safe_load, safe_load_metadata, SafetensorsError, MAX_HEADER_BYTES

def _write(path, header, data: bytes = b'') -> None:
  """A safetensors file from a header (a dict, raw bytes, or (lying length, header)) and a data section."""
  length, header = header if isinstance(header, tuple) else (None, header)
  text = header if isinstance(header, bytes) else json.dumps(header).encode()
  path.write_bytes(struct.pack('<Q', len(text) if length is None else length) + text + data)

def _e(offsets, shape=(2,), dtype='F32') -> dict:
  return {'dtype': dtype, 'shape': list(shape), 'data_offsets': list(offsets)}

Z8 = b'\0' * 8
GOOD = _e([0, 8])

# (id, header, data, message fragment, tensor named in the message or None, the safetensors package rejects it too)
HOSTILE = [
  ('length beyond file', (10 ** 6, {'x': GOOD}), Z8, 'beyond the end of the file', None, True),
  ('length 2**63', (2 ** 63, b'{}'), b'', 'header length 9223372036854775808 goes beyond', None, True),
  ('length 2**64-1', (2 ** 64 - 1, b'{}'), b'', 'header length 18446744073709551615 goes beyond', None, True),
  ('header not utf-8', b'{"\xff\xfe": 1}', b'', 'not UTF-8', None, True),
  ('header not json', b'{"x": ', b'', 'not valid JSON', None, True),
  ('NaN in header', b'{"x": NaN}', b'', 'not valid JSON', None, True),
  ('deeply nested', b'[' * 100_000, b'', 'not valid JSON', None, True),
  ('header an array', b'[1, 2]', b'', 'must be a JSON object', None, True),
  ('duplicate tensor', ('{"x": %s, "x": %s}' % (json.dumps(GOOD), json.dumps(GOOD))).encode(), Z8, "'x' appears twice",
   None, False),   # the package keeps the last one; two readers could see two different tensors
  ('lone surrogate name', ('{"\\udc80": %s}' % json.dumps(GOOD)).encode(), Z8, 'not valid UTF-8', "'\\udc80'", True),
  ('entry not a dict', {'x': [1, 2]}, Z8, 'must have dtype, shape and data_offsets', "'x'", True),
  ('entry lacks offsets', {'x': {'dtype': 'F32', 'shape': [2]}}, Z8, 'must have dtype, shape and data_offsets', "'x'",
   True),
  ('unknown dtype', {'x': _e([0, 8], dtype='Q7')}, Z8, "unknown dtype 'Q7'", "'x'", True),
  ('dtype not a string', {'x': _e([0, 8], dtype=['F32'])}, Z8, 'unknown dtype', "'x'", True),
  ('fp8 dtype', {'x': _e([0, 2], dtype='F8_E4M3')}, b'\0' * 2, "unknown dtype 'F8_E4M3'", "'x'", False),
  ('negative dim', {'x': _e([0, 8], shape=[-1])}, Z8, 'invalid shape', "'x'", True),
  ('float dim', {'x': _e([0, 8], shape=[2.0])}, Z8, 'invalid shape', "'x'", True),
  ('bool dim', {'x': _e([0, 8], shape=[True, 2])}, Z8, 'invalid shape', "'x'", True),
  ('shape a string', {'x': {'dtype': 'F32', 'shape': '2', 'data_offsets': [0, 8]}}, Z8, 'invalid shape', "'x'", True),
  ('shape null', {'x': {'dtype': 'F32', 'shape': None, 'data_offsets': [0, 8]}}, Z8, 'invalid shape', "'x'", True),
  ('three offsets', {'x': _e([0, 4, 8])}, Z8, 'invalid data_offsets', "'x'", True),
  ('float offsets', {'x': _e([0, 8.0])}, Z8, 'invalid data_offsets', "'x'", True),
  ('negative offset', {'x': _e([-8, 0])}, Z8, 'invalid data_offsets', "'x'", True),
  ('reversed offsets', {'x': _e([8, 0])}, Z8, 'reversed', "'x'", True),
  ('offsets out of range', {'x': _e([0, 16], shape=[4])}, Z8, 'outside the data section', "'x'", True),
  ('size mismatch', {'x': _e([0, 8], shape=[3])}, Z8, 'needs 12 bytes', "'x'", True),
  ('overlap', {'a': _e([0, 8]), 'b': _e([4, 12])}, b'\0' * 12, "'b' at [4, 12] overlaps tensor 'a'", None, True),
  ('same bytes twice', {'a': _e([0, 8]), 'b': _e([0, 8])}, Z8, 'overlaps', None, True),
  ('gap', {'a': _e([0, 8]), 'b': _e([12, 20])}, b'\0' * 20, "'b' starts at 12, leaving a gap of 4", None, True),
  ('not from zero', {'a': _e([4, 12])}, b'\0' * 12, "'a' starts at 4", None, True),
  ('trailing bytes', {'a': GOOD}, b'\0' * 12, '4 bytes after the last tensor', None, True),
  ('truncated data', {'a': GOOD, 'b': _e([8, 16])}, b'\0' * 12, "tensor 'b': data_offsets [8, 16] go outside", None,
   True),
  ('metadata a list', {'__metadata__': [1], 'x': GOOD}, Z8, '__metadata__ must be a JSON object', None, True),
  ('metadata int value', {'__metadata__': {'k': 1}, 'x': GOOD}, Z8, "map strings to strings; these do not: {'k': 1}",
   None, True),
  ('metadata null value', {'__metadata__': {'k': None}, 'x': GOOD}, Z8, 'map strings to strings', None, True),
  ('metadata nested', {'__metadata__': {'k': {'a': 'b'}}, 'x': GOOD}, Z8, 'map strings to strings', None, True),
]

@pytest.mark.parametrize('header, data, fragment, tensor, lib_rejects',
                         [pytest.param(*case[1:], id=case[0]) for case in HOSTILE])
def test_hostile_file_gives_clear_error(tmp_path, header, data, fragment, tensor, lib_rejects):
  p = tmp_path / 'bad.safetensors'
  _write(p, header, data)
  for load in safe_load, safe_load_metadata:   # metadata is only returned from a file that checks out
    with pytest.raises(SafetensorsError) as e: load(p)
    msg = str(e.value)
    assert fragment in msg and msg.startswith(f"{p}: ")
    if tensor: assert f"tensor {tensor}" in msg
    assert len(msg) < 600
  st = pytest.importorskip('safetensors.numpy', reason='the safetensors package (test extra) is not installed')
  if lib_rejects:
    with pytest.raises(Exception): st.load_file(str(p))

def test_truncated_real_file(tmp_path):
  p = tmp_path / 'ok.safetensors'
  safe_save({'w': np.arange(100, dtype=np.float32)}, p)
  p.write_bytes(p.read_bytes()[:-40])
  with pytest.raises(SafetensorsError, match="tensor 'w'.*truncated"): safe_load(p)

def test_file_shorter_than_the_length_field(tmp_path):
  p = tmp_path / 'short.safetensors'
  p.write_bytes(b'\x01\x02')
  with pytest.raises(SafetensorsError, match=r'truncated file \(2 bytes\)'): safe_load(p)

def test_null_metadata_is_none(tmp_path):
  p = tmp_path / 'n.safetensors'
  _write(p, {'__metadata__': None, 'x': GOOD}, np.array([1, 2], '<f4').tobytes())   # the package accepts it too
  assert safe_load_metadata(p) == {}
  assert safe_load(p, as_numpy=True)['x'].tolist() == [1.0, 2.0]

def test_bool_bytes_other_than_0_and_1_load_as_true(tmp_path):
  p = tmp_path / 'b.safetensors'
  _write(p, {'m': _e([0, 3], shape=[3], dtype='BOOL')}, b'\x00\x02\xff')
  m = safe_load(p, as_numpy=True)['m']
  assert m.tolist() == [False, True, True] and m.view(np.uint8).tolist() == [0, 1, 1]

# ---------------------------------------------------------------- memory: refuse before allocating

def _peak_bytes(fn) -> int:
  """Peak traced allocation while `fn` runs (numpy data buffers are traced too); fn must raise SafetensorsError."""
  tracemalloc.start()
  try:
    with pytest.raises(SafetensorsError) as e: fn()
    return tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()

TB = 2 ** 40

@pytest.mark.parametrize('entry, fragment', [
  (_e([0, TB], shape=[TB // 4]), 'outside the data section'),     # the offsets agree with the shape: 1 TiB
  (_e([0, 8], shape=[TB // 4]), f'needs {TB} bytes'),              # the shape alone claims 1 TiB
  (_e([0, 8], shape=[2 ** 62, 2 ** 62]), 'needs'),                  # 2**124 elements, no overflow either
])
def test_terabyte_tensor_claim_fails_without_allocating(tmp_path, entry, fragment):
  p = tmp_path / 'tb.safetensors'
  _write(p, {'huge': entry}, Z8)
  peak = _peak_bytes(lambda: safe_load(p))
  assert peak < 2 ** 20, f"peak {peak} bytes for an 8-byte data section"
  with pytest.raises(SafetensorsError, match=fragment): safe_load(p)

def test_header_over_the_limit_is_refused_unread(tmp_path):
  p = tmp_path / 'big.safetensors'
  n = MAX_HEADER_BYTES + 8
  with open(p, 'wb') as f:   # a sparse file: the claimed header really fits in it, but is never read
    f.write(struct.pack('<Q', n))
    f.truncate(8 + n)
  peak = _peak_bytes(lambda: safe_load(p))
  assert peak < 2 ** 20
  with pytest.raises(SafetensorsError, match=f'header length {n} is over the {MAX_HEADER_BYTES}-byte limit'):
    safe_load_metadata(p)

def test_metadata_reads_only_the_header(tmp_path):
  p = tmp_path / 'sparse.safetensors'
  n = 256 * 2 ** 20
  text = json.dumps({'__metadata__': {'step': '9'}, 'x': _e([0, n], shape=[n], dtype='U8')}).encode()
  with open(p, 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text)
    f.truncate(8 + len(text) + n)
  tracemalloc.start()
  try:
    assert safe_load_metadata(p) == {'step': '9'}
    assert tracemalloc.get_traced_memory()[1] < 2 ** 20
  finally:
    tracemalloc.stop()

# ---------------------------------------------------------------- no pickle, ever

PICKLERS = {'pickle', '_pickle', 'cPickle', 'cloudpickle', 'dill', 'joblib', 'marshal', 'shelve', 'torch'}

def test_module_never_unpickles():
  tree = ast.parse(open(nn.state.__file__, encoding='utf-8').read())
  imported = {a.name.split('.')[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
  imported |= {node.module.split('.')[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
  assert not imported & PICKLERS, imported & PICKLERS
  loads = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == 'load'
           and isinstance(node.value, ast.Name) and node.value.id in ('np', 'numpy')]
  assert not loads, f"np.load used at lines {loads}"
  names = {n.arg for n in ast.walk(tree) if isinstance(n, ast.keyword)} | \
          {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
  assert 'allow_pickle' not in names

def test_loading_calls_no_unpickler(tmp_path, monkeypatch):
  import pickle
  def forbidden(*args, **kwargs): raise AssertionError('safe_load must not unpickle')
  p = tmp_path / 'ok.safetensors'
  safe_save({'w': np.arange(4, dtype=np.float32), 'b': np.array([True])}, p, metadata={'k': 'v'})
  for target, name in (pickle, 'load'), (pickle, 'loads'), (pickle, 'Unpickler'), (np, 'load'):
    monkeypatch.setattr(target, name, forbidden)
  assert safe_load(p, as_numpy=True)['w'].tolist() == [0, 1, 2, 3]
  assert safe_load_metadata(p) == {'k': 'v'}

# ---------------------------------------------------------------- saves that would make an invalid file

@pytest.mark.parametrize('tensors, metadata, error, fragment', [
  ([np.ones(2)], None, TypeError, 'dict of name -> array'),
  ({'w': 'hello'}, None, TypeError, "'w' is a str, not an array"),
  ({'w': np.array([object()])}, None, TypeError, "'w' has dtype object"),
  ({3: np.ones(2)}, None, TypeError, 'tensor names must be str, got int 3'),
  ({b'w': np.ones(2)}, None, TypeError, "tensor names must be str, got bytes b'w'"),
  ({('a', 0): np.ones(2)}, None, TypeError, 'tensor names must be str, got tuple'),
  ({'\udc80': np.ones(2)}, None, ValueError, 'not valid UTF-8'),
  ({'__metadata__': np.ones(2)}, None, ValueError, "'__metadata__' is reserved"),
  ({'w': np.ones(2)}, [('k', 'v')], TypeError, 'metadata must be a dict of str -> str, got list'),
  ({'w': np.ones(2)}, {'step': 3}, TypeError, "metadata['step'] must be str, got int 3; convert it with str()"),
  ({'w': np.ones(2)}, {1: 'v'}, TypeError, 'metadata keys must be str, got int 1'),
  ({'w': np.ones(2)}, {'k': None}, TypeError, "metadata['k'] must be str, got NoneType"),
  ({'w': np.ones(2)}, {'k': 'bad \udcff'}, ValueError, 'not valid UTF-8'),
])
def test_save_refuses_what_would_make_an_invalid_file(tmp_path, tensors, metadata, error, fragment):
  p = tmp_path / 'x.safetensors'
  with pytest.raises(error) as e: safe_save(tensors, p, metadata=metadata)
  assert fragment in str(e.value) and str(e.value).startswith('safe_save')
  assert os.listdir(tmp_path) == []   # refused before the file (or a temporary one) was created

def test_save_refuses_a_header_over_the_limit(tmp_path, monkeypatch):
  monkeypatch.setattr(nn.state, 'MAX_HEADER_BYTES', 200)   # stands in for 100 MB of names
  with pytest.raises(ValueError, match='over the 200-byte limit of safetensors readers; use shorter names'):
    safe_save({f'layer{i}.weight': np.ones(1) for i in range(10)}, tmp_path / 'x.safetensors')
  assert os.listdir(tmp_path) == []

def test_saved_unicode_names_are_plain_utf8(tmp_path):
  p = tmp_path / 'u.safetensors'
  safe_save({'ψ': np.ones(1, np.float32)}, p, metadata={'note': 'é'})
  raw = p.read_bytes()
  (n,) = struct.unpack('<Q', raw[:8])
  head = raw[8:8 + n].decode('utf-8')
  assert '"ψ"' in head and '"é"' in head   # UTF-8, as the safetensors library writes, not \u escapes
