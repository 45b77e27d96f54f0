"""diskcache: the per-user directory where devices keep what they compiled, and safe reads and writes in it.

The directory is `TINYJX_CACHE_DIR`, else `~/.cache/tinyjx`. It is created with mode 0700 and used only if the
current user owns it and nobody else can write to it: a library or program binary planted by someone else is
never loaded (a private temporary directory is used instead, with a warning). Every file is written to a
temporary name and renamed, so a crash never leaves a half-written entry under its final name. An entry is
`<key><suffix>` plus `<key>.sha256`, its checksum: `read_checked` returns None for an entry that is absent,
corrupt, not a regular file, or not safely owned, and the device then rebuilds it. Devices choose the key (32
hex digits: a hash of everything that changes the binary) and the suffix (`.so` for the CPU device). Other
files of an entry share its key (`<key>.c`, the source the CPU device compiled).

Several processes share the directory. A writer holds `entry_lock(entry)` (an flock on `<key>.lock`, removed
when released) while it checks, builds and installs an entry, so two processes compiling the same program build
it once and the entry and its checksum always come from the same build. Readers take no lock: a reader whose entry
vanishes or changes under it gets None and rebuilds.

The cache is bounded by `TINYJX_CACHE_MAX_MB` (0: unbounded). Every successful `read_checked` sets the entry's
modification time to now, so the newest time among an entry's files is its last use. After a new entry is written,
`evict` removes whole entries (every `<key>.*` file), least recently used first, until the files with key names fit
in LOW_WATER of the bound. It skips the entries its caller names in `keep` (the CPU device keeps every library this
process has loaded: those are the hot ones, so the bound is exceeded when one process alone holds more than it) and
any entry whose lock another process or thread holds; removing a library that some process has mapped is safe on
Linux and macOS (the mapping stays until it is closed), so eviction never breaks a running process. Files without a
key name (`flags-*.txt`, subdirectories such as `datasets/`) are neither counted nor removed. Scanning a large cache
costs more than a small compile, so a process scans a directory when it first evicts there, then adds what it writes
to that size and scans again only when the sum passes the bound or the last scan is `RESCAN_S` seconds old (what
other processes wrote is seen by then). Evicting to LOW_WATER, not to the bound, is what keeps a full cache from
being scanned at every write: a scan of 30,000 entries takes 0.6 s.

>>> import tempfile, os
>>> d = tempfile.mkdtemp()
>>> write_checked(os.path.join(d, '0' * 32 + '.bin'), b'kernel')
>>> read_checked(os.path.join(d, '0' * 32 + '.bin'))
b'kernel'
"""
from __future__ import annotations
import contextlib, fcntl, hashlib, os, re, shutil, stat, tempfile, time, warnings
from tinyjx import settings as config

_private_dir: list = []
KEY = re.compile(r'[0-9a-f]{32}')
RESCAN_S = 60.0
LOW_WATER = 0.9   # an eviction frees the cache down to this share of the bound, so the writes after it do not rescan
_usage: dict = {}   # directory -> [bytes of its entries at the last scan plus what this process wrote since, scan time]

def cache_dir() -> str:
  """The per-user cache directory, created 0700; a private temporary one if the configured one is not safe."""
  d = os.path.abspath(os.path.expanduser(config.get('TINYJX_CACHE_DIR') or os.path.join('~', '.cache', 'tinyjx')))
  try:
    os.makedirs(d, mode=0o700, exist_ok=True)
    if safe_dir(d): return d
    why = "it is not owned by you or other users can write to it"
  except OSError as e:
    why = str(e)
  if not _private_dir:
    _private_dir.append(tempfile.mkdtemp(prefix='tinyjx-'))
    warnings.warn(f"tinyjx: not using the cache directory {d} ({why}); compiled kernels go to {_private_dir[0]} "
                  "for this process. Fix the directory's owner and permissions (chmod 700) or set TINYJX_CACHE_DIR.")
  return _private_dir[0]

def safe_dir(d: str) -> bool:
  st = os.stat(d)
  return st.st_uid == os.getuid() and not st.st_mode & 0o022

def safe_file(path: str) -> bool:
  """The file exists, is a regular file, belongs to this user, and nobody else can write to it."""
  try:
    st = os.stat(path)
  except OSError:
    return False
  return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022

def atomic_write(path: str, data: bytes) -> None:
  """Write `data` to a temporary file next to `path`, then rename it to `path`."""
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.tmp-')
  try:
    with os.fdopen(fd, 'wb') as f: f.write(data)
    replace(tmp, path)
    _wrote(path, len(data))
  finally:
    if os.path.exists(tmp): os.unlink(tmp)

def replace(tmp: str, path: str) -> None:
  """Rename `tmp` to `path`, removing a directory that stands where the file goes (a damaged cache)."""
  try:
    os.replace(tmp, path)
  except IsADirectoryError:
    try:
      shutil.rmtree(path)
    except OSError as e:
      raise OSError(f"tinyjx: the cache entry {path} is a directory that cannot be removed ({e}); remove it, or set "
                    "TINYJX_CACHE_DIR to another directory") from e
    os.replace(tmp, path)

def checksum_path(entry: str) -> str: return os.path.splitext(entry)[0] + '.sha256'

def read_checked(entry: str) -> bytes | None:
  """The bytes of cache entry `entry` if it and its checksum are safely owned and agree, else None. A hit counts
  as a use of the entry (its modification time becomes now)."""
  sha = checksum_path(entry)
  if not (safe_file(entry) and safe_file(sha)): return None
  try:   # another process may remove or replace the entry at any moment: that is a miss, not an error
    with open(entry, 'rb') as f: data = f.read()
    with open(sha) as f: digest = f.read().strip()
    if digest != hashlib.sha256(data).hexdigest(): return None
    os.utime(entry)
  except OSError:
    return None
  return data

def write_checked(entry: str, data: bytes) -> None:
  """Store `data` as cache entry `entry` with its checksum, then bring the cache under its bound."""
  with entry_lock(entry):
    atomic_write(entry, data)
    atomic_write(checksum_path(entry), hashlib.sha256(data).hexdigest().encode())
  evict(os.path.dirname(entry), keep={key_of(entry)})

def install(tmp: str, entry: str) -> None:
  """Move the finished file `tmp` to `entry` and write its checksum (the caller holds `entry_lock(entry)`)."""
  with open(tmp, 'rb') as f: data = f.read()
  replace(tmp, entry)
  _wrote(entry, len(data))
  digest = hashlib.sha256(data).hexdigest()
  atomic_write(checksum_path(entry), digest.encode())

def _wrote(path: str, nbytes: int) -> None:
  usage = _usage.get(os.path.dirname(os.path.abspath(path)))
  if usage is not None: usage[0] += nbytes

def key_of(path: str) -> str: return os.path.basename(path).split('.', 1)[0]

# --- locks and eviction ---
def _lock_path(entry: str) -> str: return os.path.join(os.path.dirname(entry), key_of(entry) + '.lock')

def _try_lock(path: str, blocking: bool) -> int | None:
  """A descriptor holding an exclusive flock on the file now at `path`, or None when `blocking` is False and it is
  held. The file is checked after locking: a holder removes it on release, so a lock won on a removed file is not
  a lock and is taken again on the new file."""
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
      if _same_file(fd, path): return fd
    except BlockingIOError:
      os.close(fd)
      return None
    except BaseException:
      os.close(fd)
      raise
    os.close(fd)

def _same_file(fd: int, path: str) -> bool:
  try:
    st = os.stat(path)
  except FileNotFoundError:
    return False
  return os.path.samestat(st, os.fstat(fd))

def _unlock(fd: int, path: str) -> None:
  """Remove the lock file (while still holding it: see `_try_lock`), then release it."""
  try:
    os.unlink(path)
  except FileNotFoundError:
    pass
  os.close(fd)

@contextlib.contextmanager
def entry_lock(entry: str):
  """Hold the cross-process lock of cache entry `entry` (not reentrant: one holder per thread and entry)."""
  path = _lock_path(entry)
  fd = _try_lock(path, blocking=True)
  try:
    yield
  finally:
    _unlock(fd, path)

def _entries(d: str) -> dict:
  """key -> [last use, total bytes, file names] for every entry in `d` (files named `<key>.<anything>`)."""
  found: dict = {}
  with os.scandir(d) as it:
    for e in it:
      key = e.name.split('.', 1)[0]
      if not KEY.fullmatch(key) or e.name.endswith('.lock'): continue
      try:
        st = e.stat(follow_symlinks=False)
      except FileNotFoundError:
        continue
      if not stat.S_ISREG(st.st_mode): continue
      entry = found.setdefault(key, [0.0, 0, []])
      entry[0], entry[1] = max(entry[0], st.st_mtime), entry[1] + st.st_size
      entry[2].append(e.name)
  return found

def evict(d: str, keep=frozenset()) -> list:
  """When the entries of directory `d` pass TINYJX_CACHE_MAX_MB, remove the least recently used until they fit in
  LOW_WATER of it, never one in `keep` (keys) or one whose lock is held. Returns the keys removed. Scans `d` only
  when this process's estimate of its size is over the bound or RESCAN_S old (see the module docstring)."""
  bound = config.get('TINYJX_CACHE_MAX_MB') * 2 ** 20
  d = os.path.abspath(d)
  usage = _usage.get(d)
  if bound <= 0 or usage and usage[0] <= bound and time.monotonic() - usage[1] < RESCAN_S: return []
  entries = _entries(d)
  total, removed = sum(size for _, size, _ in entries.values()), []
  target = bound * LOW_WATER if total > bound else bound
  for key, (_, size, names) in sorted(entries.items(), key=lambda kv: kv[1][0]):
    if total <= target: break
    if key not in keep and _remove(d, key, names):
      total -= size
      removed.append(key)
  _usage[d] = [min(total, target), time.monotonic()]   # (what `keep` or a lock held back waits for the next rescan)
  return removed

def _remove(d: str, key: str, names: list) -> bool:
  """Delete the files `names` of entry `key` under its lock; False, leaving them, when someone holds the lock."""
  path = os.path.join(d, key + '.lock')
  fd = _try_lock(path, blocking=False)
  if fd is None: return False
  try:
    for name in names:
      with contextlib.suppress(FileNotFoundError): os.unlink(os.path.join(d, name))
  finally:
    _unlock(fd, path)
  return True
