"""diskcache: the per-user directory where devices keep what they compiled, and safe reads and writes in it.

The directory is `TINYJX_CACHE_DIR`, else `~/.cache/tinyjx`. It is created with mode 0700 and used only if the
current user owns it and nobody else can write to it: a library or program binary planted by someone else is
never loaded (a private temporary directory is used instead, with a warning). Every file is written to a
temporary name and renamed, so a crash never leaves a half-written entry under its final name. An entry is
`<key><suffix>` plus `<key>.sha256`, its checksum: `read_checked` returns None for an entry that is absent,
corrupt, or not safely owned, and the device then rebuilds it. Devices choose the key (a hash of everything
that changes the binary: source, compiler, flags, target) and the suffix (`.so` for the CPU device).
"""
from __future__ import annotations
import hashlib, os, tempfile, warnings
from tinyjx import settings as config

_private_dir: list = []

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
  """The file exists, belongs to this user, and nobody else can write to it."""
  try:
    st = os.stat(path)
  except OSError:
    return False
  return st.st_uid == os.getuid() and not st.st_mode & 0o022

def atomic_write(path: str, data: bytes) -> None:
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.tmp-')
  try:
    with os.fdopen(fd, 'wb') as f: f.write(data)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp): os.unlink(tmp)
    raise

def checksum_path(entry: str) -> str: return os.path.splitext(entry)[0] + '.sha256'

def read_checked(entry: str) -> bytes | None:
  """The bytes of cache entry `entry` if it and its checksum are safely owned and agree, else None."""
  sha = checksum_path(entry)
  if not (safe_file(entry) and safe_file(sha)): return None
  with open(entry, 'rb') as f: data = f.read()
  with open(sha) as f:
    return data if f.read().strip() == hashlib.sha256(data).hexdigest() else None

def write_checked(entry: str, data: bytes) -> None:
  """Store `data` as cache entry `entry` with its checksum (each written atomically, the checksum last)."""
  atomic_write(entry, data)
  atomic_write(checksum_path(entry), hashlib.sha256(data).hexdigest().encode())
