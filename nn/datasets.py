"""nn.datasets: MNIST and Fashion-MNIST, read from gzipped IDX files.

`mnist()` and `fashion_mnist()` return `(X_train, Y_train, X_test, Y_test)` as tinyjx Arrays: images uint8 of
shape (N, 1, 28, 28) with values 0..255 (or float32 in [0, 1] with `as_float=True`), labels int32 of shape (N,).
Keeping images uint8 makes them 4x smaller; convert a batch with `x.astype(jnp.float32) / 255` inside the jitted
step.

Where the files come from, first found wins:
1. `data_dir` if given, else the `TINYJX_DATA_DIR` environment variable: a folder holding the four `.gz` files
   (directly or in a subfolder named after the data set);
2. the cache, `~/.cache/tinyjx/datasets/<name>/`;
3. for Fashion-MNIST, Debian's `dataset-fashion-mnist` package (`/usr/share/datasets/fashion-mnist/`);
4. a download into the cache, when the network allows.
A data set found nowhere raises `DatasetNotFoundError`, which says how to get it.

`read_idx` parses one IDX file (magic `00 00 <type> <ndim>`, big-endian int32 sizes, big-endian data).
"""
from __future__ import annotations
import gzip, os, struct, tempfile, urllib.request
import numpy as np
import tinyjx.numpy as jnp

__all__ = ['mnist', 'fashion_mnist', 'read_idx', 'DatasetNotFoundError', 'IDXError']

FILES = ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz', 't10k-images-idx3-ubyte.gz',
         't10k-labels-idx1-ubyte.gz')
DATASETS = {
  'mnist': {'urls': ['https://storage.googleapis.com/cvdf-datasets/mnist/'], 'system': []},
  'fashion-mnist': {'urls': ['http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/'],
                    'system': ['/usr/share/datasets/fashion-mnist']},
}
# IDX type byte -> big-endian numpy dtype
_IDX_TYPES = {0x08: '>u1', 0x09: '>i1', 0x0B: '>i2', 0x0C: '>i4', 0x0D: '>f4', 0x0E: '>f8'}

class DatasetNotFoundError(FileNotFoundError):
  """The files of a data set are in none of the places searched, and downloading failed."""

class IDXError(ValueError):
  """A file is not a valid IDX file (bad magic, unknown type, truncated data)."""

def read_idx(path: str) -> np.ndarray:
  """The array stored in an IDX file (gzipped when the name ends in `.gz`).

  >>> import tempfile, os
  >>> p = os.path.join(tempfile.mkdtemp(), 'x.idx')
  >>> open(p, 'wb').write(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9]))
  11
  >>> read_idx(p).tolist()
  [7, 8, 9]
  """
  opener = gzip.open if str(path).endswith('.gz') else open
  try:
    with opener(path, 'rb') as f: raw = f.read()
  except (OSError, EOFError) as e:
    raise IDXError(f"{path}: cannot be read as {'gzip' if opener is gzip.open else 'a file'} ({e}); "
                   "delete it so that it is fetched again") from None
  return parse_idx(raw, str(path))

def parse_idx(raw: bytes, name: str = 'IDX data') -> np.ndarray:
  """The array in the bytes of an (uncompressed) IDX file."""
  if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
    raise IDXError(f"{name}: not an IDX file (it must start with two zero bytes, a type byte and a rank byte)")
  if raw[2] not in _IDX_TYPES:
    raise IDXError(f"{name}: unknown IDX element type 0x{raw[2]:02x}; known: "
                   f"{', '.join(f'0x{t:02x}' for t in _IDX_TYPES)}")
  ndim = raw[3]
  if len(raw) < 4 + 4 * ndim: raise IDXError(f"{name}: truncated in the header ({ndim} sizes expected)")
  shape = struct.unpack(f'>{ndim}I', raw[4:4 + 4 * ndim])
  dt = np.dtype(_IDX_TYPES[raw[2]])
  count, start = int(np.prod(shape, dtype=np.int64)), 4 + 4 * ndim
  if len(raw) - start != count * dt.itemsize:
    raise IDXError(f"{name}: shape {shape} needs {count * dt.itemsize} bytes of data but the file has "
                   f"{len(raw) - start}: it is truncated or corrupted; delete it so that it is fetched again")
  return np.frombuffer(raw, dtype=dt, count=count, offset=start).reshape(shape).astype(dt.newbyteorder('='))

def cache_dir() -> str:
  """Where downloaded data sets are kept: ~/.cache/tinyjx/datasets (XDG_CACHE_HOME is honoured)."""
  base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(base, 'tinyjx', 'datasets')

def _candidates(name: str, data_dir: str | None) -> list[str]:
  user = data_dir or os.environ.get('TINYJX_DATA_DIR')
  dirs = [os.path.join(user, name), user] if user else []
  return dirs + [os.path.join(cache_dir(), name)] + DATASETS[name]['system']

def _has_all(d: str) -> bool: return all(os.path.isfile(os.path.join(d, f)) for f in FILES)

def _download(name: str) -> str:
  """Download the four files into the cache (each written to a temporary file, then renamed)."""
  target = os.path.join(cache_dir(), name)
  os.makedirs(target, exist_ok=True)
  errors = []
  for base in DATASETS[name]['urls']:
    try:
      for f in FILES:
        if os.path.isfile(os.path.join(target, f)): continue
        with urllib.request.urlopen(base + f, timeout=20) as r: data = r.read()
        fd, tmp = tempfile.mkstemp(dir=target, suffix='.tmp')
        with os.fdopen(fd, 'wb') as out: out.write(data)
        os.replace(tmp, os.path.join(target, f))
      return target
    except OSError as e:
      errors.append(f"{base}: {e}")
  raise DatasetNotFoundError(_missing_message(name, errors))

def _missing_message(name: str, errors: list) -> str:
  places = ", ".join(_candidates(name, None))
  how = (f"install Debian's package (`apt-get install dataset-fashion-mnist`), or put the four files "
         if name == 'fashion-mnist' else "put the four files ")
  return (f"the {name} data set was not found (looked in {places}) and could not be downloaded "
          f"({'; '.join(errors) or 'no network'}). To get it: {how}({', '.join(FILES)}) in a folder and set "
          f"TINYJX_DATA_DIR to it, or into {os.path.join(cache_dir(), name)}.")

def find_files(name: str, data_dir: str | None = None, download: bool = True) -> str:
  """The folder that holds the four IDX files of data set `name` ('mnist' or 'fashion-mnist')."""
  if name not in DATASETS: raise ValueError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}")
  for d in _candidates(name, data_dir):
    if _has_all(d): return d
  if not download: raise DatasetNotFoundError(_missing_message(name, ["downloading was switched off"]))
  return _download(name)

def load(name: str, data_dir: str | None = None, as_float: bool = False, download: bool = True):
  """(X_train, Y_train, X_test, Y_test) of an MNIST-like data set; see the module docstring."""
  folder = find_files(name, data_dir, download)
  x_train, y_train, x_test, y_test = (read_idx(os.path.join(folder, f)) for f in FILES)
  for x, y, part in ((x_train, y_train, 'train'), (x_test, y_test, 't10k')):
    if x.ndim != 3 or y.ndim != 1 or x.shape[0] != y.shape[0]:
      raise IDXError(f"{folder}: {part} images {x.shape} and labels {y.shape} do not match (want (N, H, W) and (N,))")
  return _images(x_train, as_float), jnp.asarray(y_train.astype(np.int32)), _images(x_test, as_float), \
    jnp.asarray(y_test.astype(np.int32))

def _images(x: np.ndarray, as_float: bool):
  x = x.reshape(x.shape[0], 1, *x.shape[1:])
  return jnp.asarray(x.astype(np.float32) / 255.0) if as_float else jnp.asarray(x.astype(np.uint8))

def mnist(data_dir: str | None = None, as_float: bool = False, download: bool = True):
  """MNIST digits: (X_train (60000,1,28,28) uint8, Y_train (60000,) int32, X_test, Y_test).

  >>> X_train, Y_train, X_test, Y_test = mnist()  # doctest: +SKIP
  """
  return load('mnist', data_dir, as_float, download)

def fashion_mnist(data_dir: str | None = None, as_float: bool = False, download: bool = True):
  """Fashion-MNIST: (X_train (60000,1,28,28) uint8, Y_train (60000,) int32, X_test, Y_test).

  >>> X_train, Y_train, X_test, Y_test = fashion_mnist()  # doctest: +SKIP
  >>> X_train.shape, Y_train.dtype                        # doctest: +SKIP
  ((60000, 1, 28, 28), dtypes.int32)
  """
  return load('fashion-mnist', data_dir, as_float, download)
