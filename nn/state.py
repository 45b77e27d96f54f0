"""nn.state: state dicts keyed by pytree paths, and checkpoints in the safetensors format.

A state dict maps names like `l1.weight` or `layers.0.bias` to arrays. Names come from the pytree paths of a
`nn.Module` (attributes, list positions and dict keys joined by dots), and the same walk also covers plain Python
objects that hold arrays and modules in attributes, lists, tuples and dicts, as tinygrad does. Loading is
functional for modules (`load_state_dict` returns a new model) and assigns in place for plain objects.

`safe_save`/`safe_load` read and write safetensors files by hand with numpy: 8 bytes of little-endian header
length, a JSON header `{name: {dtype, shape, data_offsets}, "__metadata__": {...}}`, then the raw little-endian
row-major data, the tensors back to back. bfloat16 values, which tinyjx keeps in float32 storage on the host, are
written as 16-bit words rounded to nearest even. A save writes a temporary file in the target directory, fsyncs
it and renames it over the target, so a crash or a kill mid-save leaves the old checkpoint (or none), never a
broken one; a killed save may leave a hidden `.NAME.<random>.tmp` file, never a file named like a checkpoint.
Loading trusts nothing in the file and never unpickles: every malformed file gives a `SafetensorsError` naming
the file, the tensor and what is wrong, before more than the header has been read.
"""
from __future__ import annotations
import contextlib, functools, json, math, os, secrets, struct, types
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

def _brief(x, limit: int = 120) -> str:
  """repr(x), cut to `limit` characters: a hostile header must not turn into a 100 MB error message."""
  text = repr(x)
  return text if len(text) <= limit else text[:limit] + '...'

def _is_utf8(s) -> bool:
  """`s` is a str that UTF-8 can encode (JSON escapes can smuggle in lone surrogates, which it cannot)."""
  try:
    s.encode('utf-8')
  except (AttributeError, UnicodeEncodeError):
    return False
  return True

def _check_string(s, what: str) -> None:
  """Tensor names and metadata must be UTF-8 strings, or the file is invalid for every other reader."""
  if not isinstance(s, str):
    raise TypeError(f"safe_save: {what} must be str, got {type(s).__name__} {_brief(s)}; convert it with str()")
  if not _is_utf8(s):
    raise ValueError(f"safe_save: {what} {_brief(s)} is not valid UTF-8 (it holds a lone surrogate); "
                     "use a name that UTF-8 can encode")

def _check_name(name) -> str:
  _check_string(name, 'tensor names')
  if name == '__metadata__':
    raise ValueError("safe_save: '__metadata__' is reserved for the file's metadata; rename the tensor, or pass "
                     "the strings as metadata=")
  return name

def _check_metadata(metadata) -> dict:
  if not isinstance(metadata, dict):
    raise TypeError(f"safe_save: metadata must be a dict of str -> str, got {type(metadata).__name__}")
  for k, v in metadata.items():
    _check_string(k, 'metadata keys')
    _check_string(v, f"metadata[{_brief(k)}]")
  return dict(metadata)

MAX_HEADER_BYTES = 100_000_000   # the safetensors library's own limit; a longer header is refused unread

def _header(values: dict, metadata: dict | None) -> bytes:
  """The padded JSON header for `values` (name -> (array, code)), tensors laid out back to back in dict order."""
  head: dict = {'__metadata__': _check_metadata(metadata)} if metadata else {}
  offset = 0
  for name, (value, code) in values.items():
    head[name] = {'dtype': code, 'shape': list(value.shape), 'data_offsets': [offset, offset + value.nbytes]}
    offset += value.nbytes
  text = json.dumps(head, ensure_ascii=False, separators=(',', ':')).encode('utf-8')
  text += b' ' * (-len(text) % 8)   # pad with spaces so the data starts 8-byte aligned
  if len(text) > MAX_HEADER_BYTES:
    raise ValueError(f"safe_save: the header would be {len(text)} bytes, over the {MAX_HEADER_BYTES}-byte limit of "
                     "safetensors readers; use shorter names, fewer tensors or less metadata")
  return text

def _tensor_bytes(value: np.ndarray) -> memoryview:
  """The row-major bytes of one tensor, without a copy when it is already contiguous. The file is written one
  tensor at a time, so a save holds at most one extra copy of one tensor."""
  return memoryview(np.ascontiguousarray(value).reshape(-1).view(np.uint8))

def _chunks(header: bytes, values: dict):
  yield struct.pack('<Q', len(header))
  yield header
  for value, _ in values.values(): yield _tensor_bytes(value)

def safe_save(tensors: dict, path: str | os.PathLike, metadata: dict | None = None) -> None:
  """Write `tensors` (name -> array) to `path` in the safetensors format, atomically (see `_atomic_write`).

  Names and metadata must be UTF-8 strings (`__metadata__` is reserved); everything is checked before the file
  is touched.

  >>> import tempfile, os, tinyjx.numpy as jnp
  >>> p = os.path.join(tempfile.mkdtemp(), 'w.safetensors')
  >>> safe_save({'w': jnp.arange(3.0)}, p); safe_load(p)['w'].tolist()
  [0.0, 1.0, 2.0]
  """
  if not isinstance(tensors, dict):
    raise TypeError(f"safe_save takes a dict of name -> array, got {type(tensors).__name__}; for a model pass "
                    "nn.state.get_state_dict(model)")
  values = {_check_name(name): _host(x, name) for name, x in tensors.items()}
  header = _header(values, metadata)
  _atomic_write(os.fspath(path), _chunks(header, values))

def _atomic_write(path: str, chunks) -> None:
  """Write the byte chunks to `path` so that a crash at any moment leaves the old file or the new one, never a mix.

  The bytes go to a new hidden file `.NAME.<random>.tmp` beside the target (same filesystem, so the rename is
  atomic), are flushed and fsynced, renamed over the target with os.replace, and the directory is fsynced so that
  the rename itself survives a power cut. An exception removes the temporary file. A process killed mid-write
  leaves it behind: its name never ends like the target's, every save picks a fresh random name (so a stale one
  never gets in the way), and it is safe to delete whenever no save is running.
  """
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = _create_temp(directory, os.path.basename(path))
  try:
    with os.fdopen(fd, 'wb') as f:
      for c in chunks: f.write(c)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError): os.unlink(tmp)
    raise
  _fsync_dir(directory)

def _create_temp(directory: str, base: str) -> tuple[int, str]:
  """A new, exclusive file in `directory`, open for writing. Its mode is 0o666 less the umask, as open() would
  give the target (mkstemp's 0o600 would make a shared checkpoint unreadable to the group)."""
  tmp = os.path.join(directory, f".{base[:100]}.{secrets.token_hex(8)}.tmp")
  flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_BINARY', 0)
  return os.open(tmp, flags, 0o666), tmp

def _fsync_dir(directory: str) -> None:
  """Make a rename in `directory` durable. Windows cannot open a directory and some filesystems refuse to fsync
  one; the rename is still atomic there, only not yet durable, so those errors are ignored."""
  try:
    fd = os.open(directory, os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0))
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)

# Reading trusts nothing in the file: the 8-byte length is checked against the file size and MAX_HEADER_BYTES
# before the header is read, and the whole header (every entry, the layout, the metadata) is checked before any
# tensor data is read, so a hostile file costs at most its header in memory. Data is read one tensor at a time.

class _DuplicateKey(ValueError): pass

def _no_duplicates(pairs: list) -> dict:
  """json object hook: a key given twice makes a file mean different things to different readers."""
  out: dict = {}
  for k, v in pairs:
    if k in out: raise _DuplicateKey(f"the key {_brief(k)} appears twice")
    out[k] = v
  return out

def _no_constant(name: str):
  raise ValueError(f"{name} is not JSON")

def _parse_header(path: str, text: bytes) -> dict:
  try:
    s = text.decode('utf-8')
  except UnicodeDecodeError as e:
    raise SafetensorsError(f"{path}: the header is not UTF-8 ({e}); the file is corrupted or not a safetensors "
                           "file") from None
  try:
    head = json.loads(s, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
  except (ValueError, RecursionError) as e:
    raise SafetensorsError(f"{path}: the header is not valid JSON ({_brief(str(e), 200)}); the file is corrupted "
                           "or not a safetensors file") from None
  if not isinstance(head, dict):
    raise SafetensorsError(f"{path}: the header must be a JSON object, got {type(head).__name__}")
  return head

def _read_header(path: str, f, size: int) -> tuple[dict, int]:
  """The parsed JSON header of the open file `f` of `size` bytes, and where its data section starts."""
  first = f.read(8)
  if len(first) < 8:
    raise SafetensorsError(f"{path}: truncated file ({size} bytes); a safetensors file starts with an 8-byte "
                           "header length")
  (n,) = struct.unpack('<Q', first)
  if n > size - 8:
    raise SafetensorsError(f"{path}: the header length {n} goes beyond the end of the file ({size} bytes): the "
                           "file is truncated or not a safetensors file")
  if n > MAX_HEADER_BYTES:
    raise SafetensorsError(f"{path}: the header length {n} is over the {MAX_HEADER_BYTES}-byte limit; the file is "
                           "corrupted or not a safetensors file")
  return _parse_header(path, f.read(n)), 8 + n

def _is_index(x) -> bool: return type(x) is int and x >= 0   # bool is an int subclass, and not a size

def _entry(path: str, name: str, info, size: int) -> tuple[str, tuple, int, int]:
  """(dtype code, shape, begin, end) of one header entry, checked against the data section's `size`."""
  where = f"{path}: tensor {_brief(name)}"
  if not _is_utf8(name): raise SafetensorsError(f"{where}: the name is not valid UTF-8 (a lone surrogate)")
  if not isinstance(info, dict) or not {'dtype', 'shape', 'data_offsets'} <= set(info):
    raise SafetensorsError(f"{where}: the header entry must have dtype, shape and data_offsets; got {_brief(info)}")
  code, shape, offsets = info['dtype'], info['shape'], info['data_offsets']
  if not isinstance(code, str) or code not in _CODES:
    raise SafetensorsError(f"{where}: unknown dtype {_brief(code)}; tinyjx reads {', '.join(_CODES)}")
  if not isinstance(shape, list) or not all(_is_index(s) for s in shape):
    raise SafetensorsError(f"{where}: invalid shape {_brief(shape)}; a shape is a list of non-negative ints")
  if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_index(o) for o in offsets)):
    raise SafetensorsError(f"{where}: invalid data_offsets {_brief(offsets)}; expected [begin, end], two "
                           "non-negative ints")
  begin, end = offsets
  if begin > end: raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] are reversed (begin after end)")
  if end > size:
    raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] go outside the data section of {size} bytes: "
                           "the file is truncated or corrupted; save or download it again")
  want = math.prod(shape) * np.dtype(_CODES[code][0]).itemsize
  if end - begin != want:
    raise SafetensorsError(f"{where}: {code}{_brief(shape)} needs {want} bytes but its data_offsets "
                           f"[{begin}, {end}] span {end - begin}")
  return code, tuple(shape), begin, end

def _check_layout(path: str, entries: dict, size: int) -> None:
  """The tensors tile the data section, as the safetensors library requires: sorted by offset, each one starts
  where the previous one ends (no overlap, no gap), and the last one ends at the end of the file."""
  at, previous = 0, None
  for name, (_, _, begin, end) in sorted(entries.items(), key=lambda kv: kv[1][2:]):
    if begin < at:
      raise SafetensorsError(f"{path}: tensor {_brief(name)} at [{begin}, {end}] overlaps tensor "
                             f"{_brief(previous)}, which ends at {at}; the file is corrupted")
    if begin > at:
      raise SafetensorsError(f"{path}: tensor {_brief(name)} starts at {begin}, leaving a gap of {begin - at} "
                             "bytes that belong to no tensor; the file is corrupted")
    at, previous = end, name
  if at != size:
    raise SafetensorsError(f"{path}: {size - at} bytes after the last tensor belong to no tensor; the file is "
                           "corrupted or was written by a broken writer")

def _metadata(path: str, head: dict) -> dict:
  meta = head.get('__metadata__')   # absent and null both mean none, as in the safetensors library
  if meta is None: return {}
  if not isinstance(meta, dict):
    raise SafetensorsError(f"{path}: __metadata__ must be a JSON object of strings, got {type(meta).__name__}")
  bad = {k: v for k, v in meta.items() if not _is_utf8(k) or not _is_utf8(v)}
  if bad: raise SafetensorsError(f"{path}: __metadata__ must map strings to strings; these do not: {_brief(bad)}")
  return meta

def _checked_header(path: str, f) -> tuple[dict, int, dict]:
  """(name -> (code, shape, begin, end), start of the data section, metadata) of the open file `f`, every part of
  the header checked."""
  size = os.fstat(f.fileno()).st_size
  head, start = _read_header(path, f, size)
  meta = _metadata(path, head)
  entries = {name: _entry(path, name, info, size - start) for name, info in head.items() if name != '__metadata__'}
  _check_layout(path, entries, size - start)
  return entries, start, meta

def _read_tensor(path: str, f, name: str, at: int, entry: tuple) -> np.ndarray:
  code, shape, begin, end = entry
  buf = bytearray(end - begin)   # the header was checked against the file size: this is at most the file
  f.seek(at + begin)
  if f.readinto(buf) != len(buf):
    raise SafetensorsError(f"{path}: tensor {_brief(name)}: the file ended early (it shrank while being read)")
  storage = np.dtype(_CODES[code][0]).newbyteorder('<')
  value = np.frombuffer(buf, dtype=storage).reshape(shape)
  if code == 'BF16': return bf16_values(value)
  if code == 'BOOL': return value.view(np.uint8) != 0   # any nonzero byte is True, as a proper numpy bool
  return value.astype(storage.newbyteorder('='), copy=False)

def safe_load(path: str | os.PathLike, as_numpy: bool = False) -> dict:
  """The tensors of a safetensors file, name -> Array (or numpy arrays with `as_numpy`; bfloat16 as float32).

  64-bit tensors become 32-bit Arrays unless 64-bit mode is on (as every tinyjx array); `as_numpy` keeps them.
  A malformed file raises SafetensorsError before any tensor data is read.

  >>> import tempfile, os, numpy as np
  >>> p = os.path.join(tempfile.mkdtemp(), 'x.safetensors')
  >>> safe_save({'x': np.arange(4, dtype=np.int8)}, p); safe_load(p, as_numpy=True)['x'].dtype
  dtype('int8')
  """
  path = os.fspath(path)
  with open(path, 'rb') as f:
    entries, start, _ = _checked_header(path, f)
    values = {name: _read_tensor(path, f, name, start, e) for name, e in entries.items()}
  if as_numpy: return values
  return {name: jnp.asarray(v, dtype=_CODES[entries[name][0]][1]) for name, v in values.items()}

def safe_load_metadata(path: str | os.PathLike) -> dict:
  """The `__metadata__` (str -> str) of a safetensors file, {} when it has none; reads the header only (checked
  as safe_load checks it).

  >>> import tempfile, os, numpy as np
  >>> p = os.path.join(tempfile.mkdtemp(), 'm.safetensors')
  >>> safe_save({'x': np.zeros(2)}, p, metadata={'step': '7'}); safe_load_metadata(p)
  {'step': '7'}
  """
  path = os.fspath(path)
  with open(path, 'rb') as f: return _checked_header(path, f)[2]
