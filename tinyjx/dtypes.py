"""dtypes: the scalar types of tinyjx and JAX's type promotion lattice.

A `DType` is an immutable singleton (compare with `is` or `==`). Promotion follows JAX: Python scalars
are *weak* (they adopt the other operand's type where the lattice allows), and with 64-bit mode off
(the default, like `jax_enable_x64=False`) int64/uint64/float64 canonicalize to their 32-bit kin.
This module imports nothing else of tinyjx.
"""
from __future__ import annotations
import functools
import numpy as np
from tinyjx import settings as config

class _DTypeMeta(type):
  """`jnp.dtype(x)` (this class called with one argument) converts `x` to a DType, like `np.dtype`: unsupported
  types are an error and 64-bit types are kept (canonicalization happens where a dtype is used)."""
  def __call__(cls, *args, **kwargs):
    if len(args) == 1 and not kwargs: return _exact_dtype(args[0], 'dtype')[0]
    return super().__call__(*args, **kwargs)

# `jnp.float32(x)` calls the DType: the numpy layer registers how it makes the array, since this module may not
# import it. `(value, DType) -> Array`.
_scalar_constructor = None

def register_scalar_constructor(fn) -> None:
  """Called once by tinyjx.numpy: `fn(value, dtype)` is what `jnp.float32(value)` returns."""
  global _scalar_constructor
  _scalar_constructor = fn

class DType(metaclass=_DTypeMeta):
  """One scalar type. `name` is numpy's name; `kind` is 'b', 'i', 'u', 'f' or 'c' (complex).

  A DType is also the scalar type of JAX's numpy: calling it converts a value to an array of that type (0-d for a
  scalar), so `jnp.float32(1)`, `jnp.int32(x)` and `jnp.float32([1, 2])` work, and it remains a dtype everywhere.

  >>> import tinyjx.numpy as jnp
  >>> jnp.int32(3.7), jnp.float32([1, 2]).shape, jnp.dtype('float32') is jnp.float32
  (Array(3, dtype=int32), (2,), True)
  """
  __slots__ = ('name', 'itemsize', 'kind', 'np', 'short')
  def __init__(self, name: str, itemsize: int, kind: str, npdt, short: str):
    self.name, self.itemsize, self.kind, self.np, self.short = name, itemsize, kind, np.dtype(npdt), short
  def __repr__(self): return f"dtypes.{self.name}"
  def __str__(self): return self.name
  def __eq__(self, other):
    """Equal to itself and, as JAX's dtypes are, to numpy's spelling of the same type: `x.dtype == np.float32`,
    `== 'float32'`, `== np.dtype('float32')` (bfloat16 equals only itself: numpy has no such type)."""
    if self is other: return True
    if isinstance(other, DType) or other is None or self is bfloat16: return False
    try:
      return np.dtype(other) == self.np
    except (TypeError, ValueError):
      return NotImplemented
  def __ne__(self, other):
    eq = self.__eq__(other)
    return eq if eq is NotImplemented else not eq
  def __hash__(self): return hash(self.name)
  def __reduce__(self): return (_by_name, (self.name,))
  @property
  def dtype(self): return self.np
  @property
  def type(self): return self.np.type
  def __call__(self, x):
    if _scalar_constructor is None: raise RuntimeError(f"import tinyjx.numpy before calling {self.name}(...)")
    return _scalar_constructor(x, self)

def _by_name(name): return NAMES[name]

bool_ = DType('bool', 1, 'b', np.bool_, 'bool')
int8 = DType('int8', 1, 'i', np.int8, 'i8')
int16 = DType('int16', 2, 'i', np.int16, 'i16')
int32 = DType('int32', 4, 'i', np.int32, 'i32')
int64 = DType('int64', 8, 'i', np.int64, 'i64')
uint8 = DType('uint8', 1, 'u', np.uint8, 'u8')
uint16 = DType('uint16', 2, 'u', np.uint16, 'u16')
uint32 = DType('uint32', 4, 'u', np.uint32, 'u32')
uint64 = DType('uint64', 8, 'u', np.uint64, 'u64')
float16 = DType('float16', 2, 'f', np.float16, 'f16')
float32 = DType('float32', 4, 'f', np.float32, 'f32')
float64 = DType('float64', 8, 'f', np.float64, 'f64')
# numpy has no bfloat16: its values live in float32 storage on the host, rounded to bfloat16 after every op
# (`round_bf16`), and become 16-bit words only on disk (safetensors) and in device kernels.
bfloat16 = DType('bfloat16', 2, 'f', np.float32, 'bf16')
# complex numbers: a pair of floats (real, imaginary) stored interleaved, as numpy and C99 store them
complex64 = DType('complex64', 8, 'c', np.complex64, 'c64')
complex128 = DType('complex128', 16, 'c', np.complex128, 'c128')

def round_bf16(x: np.ndarray) -> np.ndarray:
  """Round float32 values to the nearest bfloat16 (ties to even), kept in float32 storage; NaN stays NaN."""
  x = np.asarray(x, dtype=np.float32)
  bits = np.ascontiguousarray(x).reshape(x.shape).view(np.uint32)   # (ascontiguousarray makes 0-d arrays 1-d)
  rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
  out = rounded.view(np.float32)
  return np.where(np.isnan(x), np.float32(np.nan), out).astype(np.float32)

ALL = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64, complex64,
       complex128)
NAMES = {d.name: d for d in ALL}
NAMES['bool_'] = bool_
NAMES['float'] = float32
NAMES['int'] = int32
NAMES['complex'] = complex64
_FROM_NP = {d.np: d for d in ALL if d is not bfloat16}

def is_float(d: DType) -> bool: return d.kind == 'f'
def is_int(d: DType) -> bool: return d.kind in 'iu'
def is_unsigned(d: DType) -> bool: return d.kind == 'u'
def is_bool(d: DType) -> bool: return d.kind == 'b'
def is_complex(d: DType) -> bool: return d.kind == 'c'
def is_inexact(d: DType) -> bool: return d.kind in 'fc'

_PARTS = {}   # filled below: the float type of a complex type's parts, and back
def real_dtype(d: DType) -> DType:
  """The float type of the parts of complex `d` (`d` itself when it is not complex): complex64 -> float32."""
  return _PARTS.get(d, d)
def complex_dtype(d: DType) -> DType:
  """The complex type whose parts are float `d`: float32 (and narrower floats) -> complex64, float64 -> complex128."""
  if d.kind == 'c': return d
  return complex128 if d is float64 else complex64

class DTypeError(TypeError):
  pass

def x64_enabled() -> bool: return bool(config.get('JAX_ENABLE_X64'))

_CANON32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}
_PARTS.update({complex64: float32, complex128: float64})
def canonicalize(d: DType) -> DType:
  """Map a 64-bit type to its 32-bit kin unless 64-bit mode is on (JAX's canonicalize_dtype)."""
  return d if x64_enabled() else _CANON32.get(d, d)

def default_int() -> DType: return int64 if x64_enabled() else int32
def default_float() -> DType: return float64 if x64_enabled() else float32
def default_complex() -> DType: return complex128 if x64_enabled() else complex64

def to_dtype(x, name: str = "dtype") -> DType:
  """Convert anything dtype-like (DType, numpy dtype or type, string, Python type) to a DType, canonicalized."""
  if isinstance(x, DType): return canonicalize(x)
  if x is bool: return bool_
  if x is int: return default_int()
  if x is float: return default_float()
  if x is complex: return default_complex()
  if hasattr(x, 'dtype') and isinstance(getattr(x, 'dtype'), DType): return canonicalize(x.dtype)
  try:
    npd = np.dtype(x)
  except TypeError:
    npd = None
  if npd is not None and npd in _FROM_NP: return canonicalize(_FROM_NP[npd])
  if isinstance(x, str) and x in NAMES: return canonicalize(NAMES[x])
  supported = ", ".join(d.name for d in ALL)
  shown = npd.name if npd is not None else repr(x)
  raise DTypeError(f"{name}={shown} is not a supported dtype; tinyjx supports {supported} "
                   "(string and object types are not supported)")

# --- the promotion lattice (JAX's "type promotion semantics") ---
# Nodes: concrete dtypes plus the weak kinds 'i*' (Python int), 'f*' (Python float) and 'c*' (Python complex).
# Edges go to the
# next wider types. With 64-bit mode off, uint32 climbs to int32 instead of int64, as in JAX: no promotion
# may form a 64-bit type from 32-bit inputs.
_UP: dict = {
  'b': ['i*'], 'i*': ['u8', 'i8'], 'u8': ['i16', 'u16'], 'u16': ['i32', 'u32'], 'u32': ['i64', 'u64'],
  'u64': ['f*'], 'i8': ['i16'], 'i16': ['i32'], 'i32': ['i64'], 'i64': ['f*'],
  'f*': ['bf16', 'f16', 'c*'], 'bf16': ['f32'], 'f16': ['f32'], 'f32': ['f64', 'c64'], 'f64': ['c128'],
  'c*': ['c64'], 'c64': ['c128'], 'c128': [],
}
_UP_X32 = {**_UP, 'u32': ['i32', 'u64']}
_NODE = {bool_: 'b', int8: 'i8', int16: 'i16', int32: 'i32', int64: 'i64', uint8: 'u8', uint16: 'u16',
         uint32: 'u32', uint64: 'u64', float16: 'f16', bfloat16: 'bf16', float32: 'f32', float64: 'f64',
         complex64: 'c64', complex128: 'c128'}
_FROM_NODE = {v: k for k, v in _NODE.items()}

@functools.lru_cache(None)
def _ancestors(n: str, x64: bool) -> frozenset:
  out = {n}
  for u in (_UP if x64 else _UP_X32)[n]: out |= _ancestors(u, x64)
  return frozenset(out)

@functools.lru_cache(None)
def _join(a: str, b: str, x64: bool) -> str:
  """The least upper bound of two lattice nodes: the common ancestor below every other common ancestor."""
  common = _ancestors(a, x64) & _ancestors(b, x64)
  return next(c for c in common if all(o in _ancestors(c, x64) for o in common))

def _node(d: DType, weak: bool) -> str:
  if weak and d.kind in 'iu': return 'i*'
  if weak and d.kind == 'f': return 'f*'
  if weak and d.kind == 'c': return 'c*'
  return _NODE[d]

def _join_all(typed) -> str:
  x64 = x64_enabled()
  node = _node(*typed[0])
  for d, w in typed[1:]: node = _join(node, _node(d, w), x64)
  return node

def promote(*typed: tuple[DType, bool]) -> tuple[DType, bool]:
  """Join (dtype, weak) pairs on JAX's lattice; returns the result dtype (canonical) and whether it is weak.

  >>> promote((int8, False), (float32, True))   # int8 array + Python float
  (dtypes.float32, True)
  """
  node = _join_all(typed)
  if node == 'i*': return default_int(), True
  if node == 'f*': return default_float(), True
  if node == 'c*': return default_complex(), True
  return canonicalize(_FROM_NODE[node]), False

def _exact_dtype(x, name: str) -> tuple[DType, bool]:
  """(dtype, weak) of a promote_types argument without canonicalizing; Python int and float are weak."""
  if x is int: return int64, True
  if x is float: return float64, True
  if x is complex: return complex128, True
  if x is bool: return bool_, False
  if isinstance(x, DType): return x, False
  try:
    npd = np.dtype(x)
  except TypeError:
    npd = None
  if npd is not None and npd in _FROM_NP: return _FROM_NP[npd], False
  if isinstance(x, str) and x in NAMES: return NAMES[x], False
  return to_dtype(x, name), False

def promote_types(a, b) -> DType:
  """`jnp.promote_types`: the dtype both inputs promote to. As in JAX, the result is not canonicalized (64-bit
  inputs give 64-bit results even with 64-bit mode off) and Python `int`/`float` count as weak types.

  >>> promote_types('uint8', 'int8')
  dtypes.int16
  """
  node = _join_all([_exact_dtype(a, 'a'), _exact_dtype(b, 'b')])
  return {'i*': int64, 'f*': float64, 'c*': complex128}.get(node) or _FROM_NODE[node]

def python_scalar_dtype(x) -> DType:
  """The weak dtype a Python scalar gets: bool, the default int, or the default float."""
  if isinstance(x, (bool, np.bool_)): return bool_
  if isinstance(x, int): return default_int()
  if isinstance(x, float): return default_float()
  if isinstance(x, complex): return default_complex()
  raise DTypeError(f"{type(x).__name__} {x!r} is not an array or a Python scalar")

class finfo:
  """Machine limits of a float dtype, as `jnp.finfo`: bits, eps, max, min, tiny, resolution (a complex dtype gives
  those of its parts, as numpy's)."""
  def __init__(self, dtype):
    self.dtype = real_dtype(to_dtype(dtype))
    if not is_float(self.dtype):
      raise DTypeError(f"finfo needs a float dtype, got {self.dtype}; use iinfo for integers")
    if self.dtype is bfloat16:
      self.bits, self.eps, self.max, self.tiny = 16, 2.0 ** -7, 3.3895313892515355e38, 2.0 ** -126
      self.min, self.resolution, self.smallest_normal = -self.max, 0.010009765625, self.tiny
      return
    fi = np.finfo(self.dtype.np)
    self.bits, self.eps, self.max, self.min = fi.bits, float(fi.eps), float(fi.max), float(fi.min)
    self.tiny = float(fi.tiny)
    self.resolution, self.smallest_normal = float(fi.resolution), float(fi.smallest_normal)
  def __repr__(self): return f"finfo(dtype={self.dtype}, eps={self.eps}, max={self.max}, tiny={self.tiny})"

class iinfo:
  """Limits of an integer dtype, as `jnp.iinfo`: bits, min, max."""
  def __init__(self, dtype):
    self.dtype = to_dtype(dtype)
    if not is_int(self.dtype): raise DTypeError(f"iinfo needs an integer dtype, got {self.dtype}; use finfo for floats")
    ii = np.iinfo(self.dtype.np)
    self.bits, self.min, self.max = ii.bits, int(ii.min), int(ii.max)
  def __repr__(self): return f"iinfo(dtype={self.dtype}, min={self.min}, max={self.max})"
