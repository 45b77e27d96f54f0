"""nn.state: state dicts keyed by pytree paths, and checkpoints in the safetensors format.

A state dict maps names like `l1.weight` or `layers.0.bias` to arrays. Names come from the pytree paths of a
`nn.Module` (attributes, list positions and dict keys joined by dots), and the same walk also covers plain Python
objects that hold arrays and modules in attributes, lists, tuples and dicts, as tinygrad does. Loading is
functional for modules (`load_state_dict` returns a new model) and assigns in place for plain objects.

`safe_save`/`safe_load` read and write safetensors files by hand with numpy: 8 bytes of little-endian header
length, a JSON header `{name: {dtype, shape, data_offsets}, "__metadata__": {...}}`, then the raw little-endian
data. bfloat16 values, which tinyjx keeps in float32 storage on the host, are written as 16-bit words rounded to
nearest even. A save writes a temporary file in the target directory and renames it over the target, so a crash
mid-save leaves the old checkpoint (or none), never a broken one. Every malformed file gives a `SafetensorsError`
that says what is wrong and where.
"""
from __future__ import annotations
import functools, json, math, os, struct, tempfile, types
import numpy as np
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import tree_util

__all__ = ['get_state_dict', 'get_parameters', 'load_state_dict', 'safe_save', 'safe_load', 'safe_load_metadata',
           'SafetensorsError', 'StateDictError']

def _is_array(x) -> bool: return isinstance(x, (tinyjx.Array, np.ndarray))

def _is_module(x) -> bool:
  from nn.module import Module
  return isinstance(x, Module)

_NOT_CONTAINERS = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
                   functools.partial)

def _is_plain_object(x) -> bool:
  """An object whose attributes may hold arrays (tinygrad-style models), not a function, class or module."""
  return hasattr(x, '__dict__') and not isinstance(x, _NOT_CONTAINERS)

def _join(prefix: str, name) -> str: return f"{prefix}.{name}" if prefix else str(name)

# ---------------------------------------------------------------- state dicts

def _path_name(path) -> str: return tree_util.keystr(tuple(path), simple=True, separator='.')

def _walk(obj, prefix: str, out: dict) -> None:
  """Collect (name -> array) from a module, a container or a plain object's attributes."""
  if _is_array(obj): out[prefix] = obj
  elif _is_module(obj):
    for path, leaf in tree_util.tree_flatten_with_path(obj)[0]: out[_join(prefix, _path_name(path))] = leaf
  elif isinstance(obj, dict):
    for k, v in obj.items(): _walk(v, _join(prefix, k), out)
  elif isinstance(obj, (list, tuple)):
    for i, v in enumerate(obj): _walk(v, _join(prefix, i), out)
  elif _is_plain_object(obj):
    for k, v in vars(obj).items():
      if not k.startswith('_'): _walk(v, _join(prefix, k), out)

def get_state_dict(obj, prefix: str = '') -> dict:
  """Every array in `obj` (a Module, or any object holding arrays and modules), keyed by its dotted path.

  >>> import nn, tinyjx.random as random
  >>> list(get_state_dict(nn.Linear(2, 3, key=random.PRNGKey(0))))
  ['weight', 'bias']
  """
  out: dict = {}
  _walk(obj, prefix, out)
  return out

def get_parameters(obj) -> list:
  """The arrays of `obj` in state-dict order (what a tinygrad-style optimizer steps).

  >>> import nn, tinyjx.random as random
  >>> [p.shape for p in get_parameters(nn.Linear(2, 3, key=random.PRNGKey(0)))]
  [(3, 2), (3,)]
  """
  return list(get_state_dict(obj).values())

class StateDictError(KeyError):
  """A state dict does not fit a model: names missing, unexpected, or of the wrong shape."""
  def __str__(self): return self.args[0]

def _shape_of(x) -> tuple: return tuple(np.shape(x))

def _check_fit(own: dict, state: dict, strict: bool) -> None:
  missing = [k for k in own if k not in state]
  unexpected = [k for k in state if k not in own]
  misshaped = [f"{k}: model {_shape_of(own[k])}, state dict {_shape_of(state[k])}"
               for k in own if k in state and _shape_of(own[k]) != _shape_of(state[k])]
  problems = []
  if strict and missing: problems.append(f"missing keys (in the model, not in the state dict): {missing}")
  if strict and unexpected: problems.append(f"unexpected keys (in the state dict, not in the model): {unexpected}")
  if misshaped: problems.append(f"mis-shaped keys: {misshaped}")
  if problems:
    fix = "check that the checkpoint was saved from the same architecture"
    if not misshaped: fix += ", or pass strict=False to load only the names both have"
    raise StateDictError("load_state_dict: the state dict does not fit the model; " + "; ".join(problems) +
                         f". Fix: {fix}.")

def _converted(new, old):
  """`new` as an array like `old` (same dtype; a numpy leaf stays numpy)."""
  if isinstance(old, np.ndarray): return np.asarray(new).astype(old.dtype)
  return jnp.asarray(new, dtype=old.dtype) if not isinstance(new, tinyjx.Array) or new.dtype != old.dtype else new

def load_state_dict(obj, state_dict: dict, strict: bool = True):
  """`obj` with its arrays replaced by the same-named arrays of `state_dict`, cast to the model's dtypes.

  A Module comes back as a new module (the old one is unchanged); a plain object is updated in place and returned.
  With `strict`, names missing from either side are an error; a shape mismatch is always an error.

  >>> import nn, tinyjx.random as random
  >>> a, b = nn.Linear(2, 3, key=random.PRNGKey(0)), nn.Linear(2, 3, key=random.PRNGKey(1))
  >>> bool((load_state_dict(b, get_state_dict(a)).weight == a.weight).all())
  True
  """
  own = get_state_dict(obj)
  _check_fit(own, state_dict, strict)
  return _load(obj, '', state_dict)

def _load(obj, prefix: str, state: dict):
  if _is_array(obj): return _converted(state[prefix], obj) if prefix in state else obj
  if _is_module(obj):
    pairs, treedef = tree_util.tree_flatten_with_path(obj)
    names = [_join(prefix, _path_name(p)) for p, _ in pairs]
    return treedef.unflatten([_converted(state[n], x) if n in state else x for n, (_, x) in zip(names, pairs)])
  if isinstance(obj, dict):
    for k in list(obj): obj[k] = _load(obj[k], _join(prefix, k), state)
  elif isinstance(obj, list):
    for i in range(len(obj)): obj[i] = _load(obj[i], _join(prefix, i), state)
  elif isinstance(obj, tuple):
    return type(obj)(*[_load(v, _join(prefix, i), state) for i, v in enumerate(obj)]) if hasattr(obj, '_fields') \
      else tuple(_load(v, _join(prefix, i), state) for i, v in enumerate(obj))
  elif _is_plain_object(obj):
    for k, v in list(vars(obj).items()):
      if not k.startswith('_'): setattr(obj, k, _load(v, _join(prefix, k), state))
  return obj

# ---------------------------------------------------------------- safetensors

class SafetensorsError(ValueError):
  """A safetensors file is malformed (truncated, bad JSON, offsets out of range, unknown dtype ...)."""

# safetensors dtype name <-> (numpy storage dtype, tinyjx dtype name). BF16 is stored as uint16 words.
_CODES = {
  'BOOL': (np.bool_, 'bool'), 'U8': (np.uint8, 'uint8'), 'I8': (np.int8, 'int8'), 'U16': (np.uint16, 'uint16'),
  'I16': (np.int16, 'int16'), 'U32': (np.uint32, 'uint32'), 'I32': (np.int32, 'int32'),
  'U64': (np.uint64, 'uint64'), 'I64': (np.int64, 'int64'), 'F16': (np.float16, 'float16'),
  'BF16': (np.uint16, 'bfloat16'), 'F32': (np.float32, 'float32'), 'F64': (np.float64, 'float64'),
}
_CODE_OF = {name: code for code, (_, name) in _CODES.items()}

def bf16_words(x: np.ndarray) -> np.ndarray:
  """float32 values as bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays a quiet NaN.

  >>> bf16_words(np.array([1.0, 1.00390625], np.float32)).tolist()   # 1 + 2**-8 is a tie: rounds to even
  [16256, 16256]
  """
  bits = np.array(x, dtype=np.float32).view(np.uint32)
  rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
  words = rounded.astype(np.uint16)
  return np.where(np.isnan(x), ((bits >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16), words)

def bf16_values(words: np.ndarray) -> np.ndarray:
  """bfloat16 bit patterns (uint16) as float32 values (exact)."""
  return (np.asarray(words, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)

def _host(x, name: str) -> tuple[np.ndarray, str]:
  """(little-endian bytes-ready numpy array, safetensors dtype code) of an array leaf."""
  if isinstance(x, tinyjx.Array):
    dname = x.dtype.name
    value = np.asarray(x)
  elif isinstance(x, np.ndarray):
    dname, value = x.dtype.name, x
  else:
    raise TypeError(f"safe_save: {name!r} is a {type(x).__name__}, not an array; pass a dict of arrays "
                    "(e.g. get_state_dict(model))")
  if dname not in _CODE_OF:
    raise TypeError(f"safe_save: {name!r} has dtype {dname}, which safetensors cannot hold here; supported: "
                    f"{', '.join(sorted(_CODE_OF))}")
  code = _CODE_OF[dname]
  if code == 'BF16': value = bf16_words(value)
  return np.asarray(value, dtype=np.dtype(_CODES[code][0]).newbyteorder('<')), code

def _header(entries: dict, metadata: dict | None) -> bytes:
  head: dict = {}
  if metadata:
    bad = {k: v for k, v in metadata.items() if not isinstance(k, str) or not isinstance(v, str)}
    if bad: raise TypeError(f"safe_save: metadata must map str to str; these entries do not: {bad}")
    head['__metadata__'] = dict(metadata)
  head.update(entries)
  text = json.dumps(head, separators=(',', ':')).encode()
  return text + b' ' * (-len(text) % 8)   # pad with spaces so the data starts 8-byte aligned

def safe_save(tensors: dict, path: str | os.PathLike, metadata: dict | None = None) -> None:
  """Write `tensors` (name -> array) to `path` in the safetensors format, atomically.

  >>> import tempfile, os, tinyjx.numpy as jnp
  >>> p = os.path.join(tempfile.mkdtemp(), 'w.safetensors')
  >>> safe_save({'w': jnp.arange(3.0)}, p); safe_load(p)['w'].tolist()
  [0.0, 1.0, 2.0]
  """
  if not isinstance(tensors, dict):
    raise TypeError(f"safe_save takes a dict of name -> array, got {type(tensors).__name__}; for a model pass "
                    "nn.state.get_state_dict(model)")
  entries, blobs, offset = {}, [], 0
  for name, x in tensors.items():
    if not isinstance(name, str): raise TypeError(f"safe_save: tensor names must be str, got {name!r}")
    value, code = _host(x, name)
    data = value.tobytes()
    entries[name] = {'dtype': code, 'shape': list(value.shape), 'data_offsets': [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
  header = _header(entries, metadata)
  _atomic_write(os.fspath(path), [struct.pack('<Q', len(header)), header, *blobs])

def _atomic_write(path: str, chunks: list) -> None:
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', suffix='.tmp', dir=directory)
  try:
    with os.fdopen(fd, 'wb') as f:
      for c in chunks: f.write(c)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp): os.unlink(tmp)
    raise

def _read_header(path: str, raw: bytes) -> tuple[dict, int]:
  """The parsed JSON header of the file bytes `raw`, and where the data section starts."""
  if len(raw) < 8:
    raise SafetensorsError(f"{path}: truncated file ({len(raw)} bytes); a safetensors file starts with an 8-byte "
                           "header length")
  (n,) = struct.unpack('<Q', raw[:8])
  if n > len(raw) - 8:
    raise SafetensorsError(f"{path}: the header length {n} goes beyond the end of the file ({len(raw)} bytes): the "
                           "file is truncated or not a safetensors file")
  try:
    head = json.loads(raw[8:8 + n].decode('utf-8'))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise SafetensorsError(f"{path}: the header is not valid JSON ({e}); the file is corrupted") from None
  if not isinstance(head, dict):
    raise SafetensorsError(f"{path}: the header must be a JSON object, got {type(head).__name__}")
  return head, 8 + n

def _entry(path: str, name: str, info, size: int) -> tuple[str, tuple, int, int]:
  """(dtype code, shape, begin, end) of one header entry, checked against the data section's `size`."""
  if not isinstance(info, dict) or not {'dtype', 'shape', 'data_offsets'} <= set(info):
    raise SafetensorsError(f"{path}: the header entry for {name!r} must have dtype, shape and data_offsets; "
                           f"got {info!r}")
  code, shape, offsets = info['dtype'], info['shape'], info['data_offsets']
  if code not in _CODES:
    raise SafetensorsError(f"{path}: tensor {name!r} has unknown dtype {code!r}; known: {', '.join(_CODES)}")
  if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
    raise SafetensorsError(f"{path}: tensor {name!r} has an invalid shape {shape!r}")
  if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
    raise SafetensorsError(f"{path}: tensor {name!r} has invalid data_offsets {offsets!r}")
  begin, end = offsets
  if not 0 <= begin <= end <= size:
    raise SafetensorsError(f"{path}: tensor {name!r} has data_offsets [{begin}, {end}] outside the data section "
                           f"of {size} bytes: the file is truncated or corrupted")
  want = math.prod(shape) * np.dtype(_CODES[code][0]).itemsize
  if end - begin != want:
    raise SafetensorsError(f"{path}: tensor {name!r} ({code}{shape}) needs {want} bytes but its data_offsets "
                           f"[{begin}, {end}] span {end - begin}")
  return code, tuple(shape), begin, end

def _decode(raw: bytes, start: int, code: str, shape: tuple, begin: int, end: int) -> np.ndarray:
  storage = np.dtype(_CODES[code][0]).newbyteorder('<')
  value = np.frombuffer(raw, dtype=storage, count=math.prod(shape), offset=start + begin).reshape(shape)
  return bf16_values(value) if code == 'BF16' else value.astype(storage.newbyteorder('='))

def _read(path) -> tuple[str, bytes]:
  path = os.fspath(path)
  with open(path, 'rb') as f: return path, f.read()

def safe_load(path: str | os.PathLike, as_numpy: bool = False) -> dict:
  """The tensors of a safetensors file, name -> Array (or numpy arrays with `as_numpy`; bfloat16 as float32).

  64-bit tensors become 32-bit Arrays unless 64-bit mode is on (as every tinyjx array); `as_numpy` keeps them.

  >>> import tempfile, os, numpy as np
  >>> p = os.path.join(tempfile.mkdtemp(), 'x.safetensors')
  >>> safe_save({'x': np.arange(4, dtype=np.int8)}, p); safe_load(p, as_numpy=True)['x'].dtype
  dtype('int8')
  """
  path, raw = _read(path)
  head, start = _read_header(path, raw)
  out = {}
  for name, info in head.items():
    if name == '__metadata__': continue
    code, shape, begin, end = _entry(path, name, info, len(raw) - start)
    value = _decode(raw, start, code, shape, begin, end)
    out[name] = value if as_numpy else jnp.asarray(value, dtype=_CODES[code][1])
  return out

def safe_load_metadata(path: str | os.PathLike) -> dict:
  """The `__metadata__` (str -> str) of a safetensors file; {} when it has none."""
  path, raw = _read(path)
  head, _ = _read_header(path, raw)
  meta = head.get('__metadata__', {})
  if not isinstance(meta, dict): raise SafetensorsError(f"{path}: __metadata__ must be a JSON object, got {meta!r}")
  return meta
