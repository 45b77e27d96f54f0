"""nn.datasets: IDX parsing on small files the tests write, the search order, and the missing-data error."""
import gzip, struct
import numpy as np
import pytest
import tinyjx.numpy as jnp
from nn import datasets
from nn.datasets import read_idx, parse_idx, IDXError, DatasetNotFoundError, FILES

def idx_bytes(a: np.ndarray, code: int) -> bytes:
  be = a.astype(a.dtype.newbyteorder('>'))
  return bytes([0, 0, code, a.ndim]) + struct.pack(f'>{a.ndim}I', *a.shape) + be.tobytes()

@pytest.mark.parametrize('dt, code', [(np.uint8, 0x08), (np.int8, 0x09), (np.int16, 0x0B), (np.int32, 0x0C),
                                      (np.float32, 0x0D), (np.float64, 0x0E)])
def test_parse_every_idx_type(tmp_path, dt, code):
  a = (np.arange(24).reshape(2, 3, 4) * 3 - 20).astype(dt)
  if dt == np.uint8: a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
  p = tmp_path / 'a.idx'
  p.write_bytes(idx_bytes(a, code))
  got = read_idx(str(p))
  assert got.dtype == np.dtype(dt) and got.shape == (2, 3, 4)
  np.testing.assert_array_equal(got, a)
  gz = tmp_path / 'a.idx.gz'
  gz.write_bytes(gzip.compress(idx_bytes(a, code)))
  np.testing.assert_array_equal(read_idx(str(gz)), a)

@pytest.mark.parametrize('raw, fragment', [
  (b'\x01\x00\x08\x01', 'not an IDX file'),
  (b'\x00\x00\x07\x01\x00\x00\x00\x01\x05', 'unknown IDX element type 0x07'),
  (b'\x00\x00\x08\x02\x00\x00\x00\x01', 'truncated in the header'),
  (b'\x00\x00\x08\x01\x00\x00\x00\x05\x01\x02', 'needs 5 bytes of data but the file has 2'),
])
def test_bad_idx_files(raw, fragment):
  with pytest.raises(IDXError, match=fragment): parse_idx(raw)

def test_bad_gzip(tmp_path):
  p = tmp_path / 'x.gz'
  p.write_bytes(b'not gzip at all')
  with pytest.raises(IDXError, match='cannot be read as gzip'): read_idx(str(p))

def write_fake_dataset(folder, n_train=6, n_test=4, seed=0):
  rng = np.random.default_rng(seed)
  folder.mkdir(parents=True, exist_ok=True)
  arrays = [rng.integers(0, 256, (n_train, 28, 28)).astype(np.uint8), rng.integers(0, 10, n_train).astype(np.uint8),
            rng.integers(0, 256, (n_test, 28, 28)).astype(np.uint8), rng.integers(0, 10, n_test).astype(np.uint8)]
  for name, a in zip(FILES, arrays): (folder / name).write_bytes(gzip.compress(idx_bytes(a, 0x08)))
  return arrays

def test_fashion_mnist_from_data_dir(tmp_path, monkeypatch):
  arrays = write_fake_dataset(tmp_path / 'fashion-mnist')
  monkeypatch.setenv('TINYJX_DATA_DIR', str(tmp_path))
  X_train, Y_train, X_test, Y_test = datasets.fashion_mnist(download=False)
  assert X_train.shape == (6, 1, 28, 28) and X_train.dtype == jnp.uint8
  assert Y_train.shape == (6,) and Y_train.dtype == jnp.int32
  assert X_test.shape == (4, 1, 28, 28) and Y_test.shape == (4,)
  np.testing.assert_array_equal(np.asarray(X_train)[:, 0], arrays[0])
  np.testing.assert_array_equal(np.asarray(Y_test), arrays[3])
  Xf = datasets.fashion_mnist(as_float=True, download=False)[0]
  assert Xf.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(Xf)[:, 0], arrays[0] / 255.0, rtol=1e-6)

def test_files_directly_in_data_dir_and_argument(tmp_path):
  arrays = write_fake_dataset(tmp_path / 'flat')
  X_train, Y_train, _, _ = datasets.mnist(data_dir=str(tmp_path / 'flat'), download=False)
  np.testing.assert_array_equal(np.asarray(Y_train), arrays[1])

def test_cache_dir_is_searched(tmp_path, monkeypatch):
  monkeypatch.delenv('TINYJX_DATA_DIR', raising=False)
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  arrays = write_fake_dataset(tmp_path / 'tinyjx' / 'datasets' / 'mnist', n_train=3)
  assert datasets.find_files('mnist', download=False) == str(tmp_path / 'tinyjx' / 'datasets' / 'mnist')
  assert datasets.mnist(download=False)[0].shape == (3, 1, 28, 28)

def test_mismatched_images_and_labels(tmp_path):
  folder = tmp_path / 'mnist'
  write_fake_dataset(folder)
  (folder / FILES[1]).write_bytes(gzip.compress(idx_bytes(np.zeros(5, np.uint8), 0x08)))
  with pytest.raises(IDXError, match=r'do not match'): datasets.mnist(data_dir=str(folder), download=False)

def test_missing_dataset_says_how_to_get_it(tmp_path, monkeypatch):
  monkeypatch.setenv('TINYJX_DATA_DIR', str(tmp_path / 'nothing'))
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
  monkeypatch.setitem(datasets.DATASETS, 'fashion-mnist', {'urls': [], 'system': [str(tmp_path / 'no-debian')]})
  with pytest.raises(DatasetNotFoundError) as e: datasets.fashion_mnist(download=False)
  msg = str(e.value)
  assert 'apt-get install dataset-fashion-mnist' in msg and 'TINYJX_DATA_DIR' in msg
  assert str(tmp_path / 'nothing') in msg

def test_failed_download_is_reported(tmp_path, monkeypatch):
  monkeypatch.setenv('TINYJX_DATA_DIR', str(tmp_path / 'nothing'))
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
  monkeypatch.setitem(datasets.DATASETS, 'mnist', {'urls': ['file:///nonexistent/dir/'], 'system': []})
  with pytest.raises(DatasetNotFoundError, match='could not be downloaded') as e: datasets.mnist()
  assert 'file:///nonexistent/dir/' in str(e.value)

def test_download_writes_into_cache(tmp_path, monkeypatch):
  source = tmp_path / 'mirror'
  arrays = write_fake_dataset(source)
  monkeypatch.setenv('TINYJX_DATA_DIR', str(tmp_path / 'nothing'))
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
  monkeypatch.setitem(datasets.DATASETS, 'mnist', {'urls': [source.as_uri() + '/'], 'system': []})
  _, Y_train, _, _ = datasets.mnist()
  np.testing.assert_array_equal(np.asarray(Y_train), arrays[1])
  assert sorted(p.name for p in (tmp_path / 'cache' / 'tinyjx' / 'datasets' / 'mnist').iterdir()) == sorted(FILES)

def test_unknown_dataset():
  with pytest.raises(ValueError, match="unknown data set 'cifar'"): datasets.find_files('cifar')
