"""random: functional pseudo-random numbers, bit-compatible with JAX's default `threefry2x32` generator.

A key is the state of the generator, passed explicitly: `PRNGKey(seed)` gives a raw key (a uint32[2] array),
`key(seed)` a typed key (`PRNGKeyArray`, a pytree over the same uint32[..., 2] data). Samplers never change a
key; `split` and `fold_in` derive new ones. Every sampler is a pure function of (key, shape, dtype, params), so
the same key always gives the same numbers, under jit, vmap and grad alike (keys are integers: no gradient
flows into them).

Bits follow JAX's current default (`jax_threefry_partitionable=True`): element i of a sample of `shape` is
threefry2x32(key, (hi(i), lo(i))) for the row-major flat index i, the two output words XOR-ed for 32-bit
samples; `split` keeps both words as the new key; `fold_in(key, d)` hashes the counter (0, d). Floats come
from the mantissa bits with the exponent of 1.0 (a value in [1, 2)) minus one, normals from `erf_inv` of a
uniform in (-1, 1). Threefry is a composition of uint32 ADD, XOR, SHL, SHR and OR on whole arrays, so a
sampler is one fused elementwise kernel over an iota of counters, never a host loop.
"""
from __future__ import annotations
import math
import numpy as np
from tinyjx import dtypes, tree_util
from tinyjx.array import Array
from tinyjx.dtypes import DType
from tinyjx.uop import UOp, Ops
import tinyjx.numpy as jnp
from tinyjx.numpy.core import from_parts

U32 = dtypes.uint32
UINT_OF_WIDTH = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}
MANTISSA_BITS = {dtypes.float16: 10, dtypes.bfloat16: 7, dtypes.float32: 23, dtypes.float64: 52}

# ---------------------------------------------------------------- the threefry2x32 hash (Salmon et al., 2011)

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
KEY_PARITY = 0x1BD11BDA   # the Threefish key-schedule constant

def _rotate_left(x: Array, r: int) -> Array: return (x << r) | (x >> (32 - r))

def threefry2x32(k0, k1, x0, x1) -> tuple[Array, Array]:
  """Threefry-2x32 with 20 rounds on uint32 arrays (broadcast together): the counter (x0, x1) under key (k0, k1).

  >>> [hex(int(w)) for w in threefry2x32(*[jnp.asarray(0, jnp.uint32)] * 4)]
  ['0x6b200159', '0x99ba4efe']
  """
  k0, k1, x0, x1 = (jnp.asarray(v, U32) for v in (k0, k1, x0, x1))
  ks = (k0, k1, k0 ^ k1 ^ KEY_PARITY)
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for i in range(5):
    for r in ROTATIONS[i % 2]:
      x0 = x0 + x1
      x1 = _rotate_left(x1, r) ^ x0
    x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + (i + 1)
  return x0, x1

# ---------------------------------------------------------------- keys

class KeyDType:
  """The dtype of typed keys (`key<fry>`): threefry2x32 keys of two uint32 words."""
  name, key_shape = 'key<fry>', (2,)
  def __repr__(self): return self.name
  def __str__(self): return self.name
  def __eq__(self, other): return isinstance(other, KeyDType)
  def __hash__(self): return hash(self.name)

KEY_DTYPE = KeyDType()

@tree_util.register_pytree_node_class
class PRNGKeyArray:
  """Typed keys, as `jax.random.key` makes: an array of keys of `.shape`, over uint32 data of shape + (2,).

  A pytree with the key data as its one leaf, so typed keys pass through jit, vmap and pmap (vmap maps the
  leading key axes). `key_data(k)` and `wrap_key_data(data)` convert to and from raw uint32 data.

  >>> k = key(0)
  >>> k.shape, split(k, 4).shape
  ((), (4,))
  """
  __slots__ = ('_data',)
  def __init__(self, data): self._data = data   # no checks: pytree machinery rebuilds it with placeholder leaves

  def tree_flatten(self): return (self._data,), None
  @classmethod
  def tree_unflatten(cls, aux, children): return cls(children[0])

  @property
  def shape(self) -> tuple: return tuple(self._data.shape[:-1])
  @property
  def ndim(self) -> int: return len(self.shape)
  @property
  def size(self) -> int: return math.prod(self.shape)
  @property
  def dtype(self) -> KeyDType: return KEY_DTYPE
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a single typed key (shape ()); split it to get several")
    return self.shape[0]
  def __iter__(self):
    if not self.shape: raise TypeError("iteration over a single typed key (shape ())")
    return (self[i] for i in range(self.shape[0]))
  def __getitem__(self, idx):
    # the key-data axis stays whole: it is always the last, whatever `idx` (Ellipsis included) selects before it
    idx = idx if isinstance(idx, tuple) else (idx,)
    return PRNGKeyArray(self._data[idx + (slice(None),)])
  def reshape(self, *shape) -> 'PRNGKeyArray':
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    shape = tuple(int(s) for s in shape)
    if -1 in shape: shape = tuple(self.size // max(1, -math.prod(shape)) if s == -1 else s for s in shape)
    return PRNGKeyArray(Array(_uop(self._data).reshape(shape + (2,))))
  def __repr__(self):
    return f"PRNGKeyArray(shape={self.shape}, dtype={self.dtype}) overlaying:\n{self._data}"

def _uop(x) -> UOp: return jnp.asarray(x).uop

def _check_seed(seed, name: str):
  if isinstance(seed, PRNGKeyArray): raise TypeError(f"{name} accepts a scalar integer seed, but was given a PRNG key")
  if isinstance(seed, bool) or isinstance(seed, float) or isinstance(seed, complex):
    raise TypeError(f"{name} seed must be an integer; got {type(seed).__name__} {seed!r}")
  if isinstance(seed, int): return
  shape, dt = tuple(np.shape(seed)), jnp.asarray(seed).dtype
  if shape:
    raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape {shape} != (); "
                    "use vmap to make a batch of keys from a batch of seeds")
  if not dtypes.is_int(dt): raise TypeError(f"{name} seed must be an integer; got an array of dtype {dt}")

def _python_seed_data(seed: int) -> Array:
  if not -2 ** 63 <= seed < 2 ** 64:
    raise OverflowError(f"seed {seed} does not fit in 64 bits; pass a seed in [-2**63, 2**64)")
  hi = (seed >> 32) & 0xFFFFFFFF if dtypes.x64_enabled() else 0   # with x64 off the seed is a 32-bit integer
  return jnp.asarray(np.array([hi, seed & 0xFFFFFFFF], np.uint32))

def _seed_data(seed, name: str) -> Array:
  """The raw key data of `seed`: (high word, low word) of the seed as a 64-bit (or 32-bit) integer."""
  _check_seed(seed, name)
  if isinstance(seed, int): return _python_seed_data(seed)
  s = jnp.asarray(seed)
  lo = jnp.astype(s, U32)
  hi = jnp.astype(s >> 32, U32) if s.dtype.itemsize == 8 else jnp.zeros((), U32)
  return jnp.stack([hi, lo])

def PRNGKey(seed) -> Array:
  """A raw key: uint32[2] data made from an integer seed (as `jax.random.PRNGKey`).

  With 64-bit mode off (the default) the seed counts as a 32-bit integer: `PRNGKey(-1)` is [0, 4294967295].

  >>> PRNGKey(42).tolist()
  [0, 42]
  """
  return _seed_data(seed, "PRNGKey")

def key(seed) -> PRNGKeyArray:
  """A typed key (`PRNGKeyArray` of shape ()) made from an integer seed (as `jax.random.key`).

  >>> key_data(key(42)).tolist()
  [0, 42]
  """
  return PRNGKeyArray(_seed_data(seed, "key"))

def key_data(keys) -> Array:
  """The uint32[..., 2] data under typed keys (raw keys are returned as they are).

  >>> key_data(split(key(0))).shape
  (2, 2)
  """
  data, _ = _unwrap(keys, "key_data", allow_batched=True)
  return data

def wrap_key_data(data, impl=None) -> PRNGKeyArray:
  """Typed keys over uint32 `data` of shape (..., 2) (as `jax.random.wrap_key_data`).

  >>> wrap_key_data(PRNGKey(0)).shape
  ()
  """
  if impl not in (None, 'threefry2x32'):
    raise ValueError(f"wrap_key_data: tinyjx implements only the 'threefry2x32' generator, got impl={impl!r}")
  data = jnp.asarray(data)
  if data.dtype is not U32 or not data.shape or data.shape[-1] != 2:
    raise TypeError(f"wrap_key_data needs uint32 data whose last axis has size 2, got {data.dtype}{list(data.shape)}")
  return PRNGKeyArray(data)

def _unwrap(k, name: str, allow_batched: bool = False) -> tuple[Array, bool]:
  """(uint32[..., 2] data, whether `k` was typed); the error names `name` and says what a key looks like."""
  typed = isinstance(k, PRNGKeyArray)
  data = k._data if typed else k
  if not typed and not isinstance(data, (Array, np.ndarray)):
    raise TypeError(f"{name}: expected a PRNG key (from random.key or random.PRNGKey), got {type(k).__name__}")
  data = jnp.asarray(data)
  if data.dtype is not U32 or not data.shape or data.shape[-1] != 2:
    raise TypeError(f"{name}: a PRNG key is uint32 data of shape (2,) (or typed, from random.key); got "
                    f"{data.dtype}{list(data.shape)}")
  if not allow_batched and data.ndim != 1:
    raise ValueError(f"{name} accepts a single key, but was given a key array of shape {data.shape[:-1]} != (); "
                     "use vmap to map over a batch of keys")
  return data, typed

def _rewrap(data: Array, typed: bool): return PRNGKeyArray(data) if typed else data

def _words(data: Array) -> tuple[Array, Array]:
  """The two uint32 words of a single key as scalars."""
  u = data.uop
  return Array(u.shrink(((0, 1),)).reshape(())), Array(u.shrink(((1, 2),)).reshape(()))

def _counters(shape: tuple) -> tuple[Array, Array]:
  """(high, low) words of the row-major flat index of each element of `shape` (JAX's iota_2x32_shape)."""
  n = math.prod(shape)
  if n > 2 ** 32:
    raise NotImplementedError(f"a random sample of {n} elements (shape {shape}) needs counters past 2**32")
  lo = Array(UOp(Ops.IOTA, U32, (), ((n,), 0)).reshape(shape))
  return jnp.zeros(shape, U32), lo

def _hash_shape(data: Array, shape: tuple) -> tuple[Array, Array]:
  k0, k1 = _words(data)
  return threefry2x32(k0, k1, *_counters(shape))

def _shape_arg(shape, name: str) -> tuple:
  if isinstance(shape, (int, np.integer)): shape = (int(shape),)
  try:
    shape = tuple(int(s) for s in shape)
  except TypeError:
    raise TypeError(f"{name}: shape must be a tuple of non-negative ints, got {shape!r}") from None
  if any(s < 0 for s in shape): raise ValueError(f"{name}: negative dimension in shape {shape}")
  return shape

def split(key, num=2):
  """`num` new keys (an int or a shape) derived from `key`, stacked along new leading axes.

  >>> split(PRNGKey(0)).tolist()
  [[1797259609, 2579123966], [928981903, 3453687069]]
  """
  data, typed = _unwrap(key, "split")
  shape = _shape_arg(num, "split")
  b0, b1 = _hash_shape(data, shape)
  return _rewrap(jnp.stack([b0, b1], axis=len(shape)), typed)

def fold_in(key, data):
  """A new key from `key` and 32-bit integer `data` (a step count, a device index ...).

  >>> fold_in(PRNGKey(0), 3).tolist()
  [2467461003, 3840466878]
  """
  kdata, typed = _unwrap(key, "fold_in")
  if np.ndim(data):
    raise TypeError(f"fold_in accepts scalar data, but was given an array of shape {np.shape(data)}; use vmap")
  python_int = isinstance(data, (int, np.integer)) and not isinstance(data, bool)
  if python_int and not 0 <= int(data) < 2 ** 32:
    raise OverflowError(f"fold_in: Python integer {data} is out of bounds for uint32 (0 to 2**32 - 1)")
  d = jnp.asarray(np.uint32(data)) if python_int else jnp.asarray(data)
  if not dtypes.is_int(d.dtype) and not dtypes.is_bool(d.dtype):
    raise TypeError(f"fold_in: data must be an integer, got {d.dtype}")
  k0, k1 = _words(kdata)
  y0, y1 = threefry2x32(k0, k1, jnp.zeros((), U32), jnp.astype(d, U32))
  return _rewrap(jnp.stack([y0, y1]), typed)

def _random_bits(data: Array, width: int, shape: tuple) -> Array:
  """Uniform unsigned integers of `width` bits (8, 16, 32 or 64) and `shape` from a single key's data."""
  b0, b1 = _hash_shape(data, shape)
  if width == 64:
    u64 = dtypes.uint64
    if not dtypes.x64_enabled(): raise TypeError("64-bit random bits need 64-bit mode (JAX_ENABLE_X64=1)")
    return (jnp.astype(b0, u64) << 32) | jnp.astype(b1, u64)
  return jnp.astype(b0 ^ b1, UINT_OF_WIDTH[width])

def bits(key, shape=(), dtype=None) -> Array:
  """Uniform random bits as unsigned integers of `dtype` (default uint32; uint64 in 64-bit mode).

  >>> bits(PRNGKey(0), (3,)).tolist()
  [4070199207, 4202968722, 1427181096]
  """
  data, _ = _unwrap(key, "bits")
  dt = dtypes.canonicalize(dtypes.uint64) if dtype is None else dtypes.to_dtype(dtype)
  if not dtypes.is_unsigned(dt): raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dt}")
  return _random_bits(data, dt.itemsize * 8, _shape_arg(shape, "bits"))

# ---------------------------------------------------------------- floats from bits

def _float_dtype(dtype, name: str) -> DType:
  dt = dtypes.default_float() if dtype is None else dtypes.to_dtype(dtype)
  if not dtypes.is_float(dt): raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dt}")
  return dt

def _check_param_shapes(name: str, shape, *params) -> tuple:
  """The sample shape: `shape` if given (parameters must broadcast to exactly it), else the parameters' broadcast."""
  pshapes = [tuple(np.shape(p)) if not isinstance(p, Array) else p.shape for p in params]
  if shape is None: return jnp.broadcast_shapes(*pshapes) if pshapes else ()
  shape = _shape_arg(shape, name)
  if not all(_broadcasts_to(p, shape) for p in pshapes):
    raise ValueError(f"{name}: parameter shapes {pshapes} must broadcast to the sample shape {shape} exactly")
  return shape

def _broadcasts_to(small: tuple, shape: tuple) -> bool:
  """Whether an array of shape `small` broadcasts to exactly `shape`."""
  return len(small) <= len(shape) and all(a in (1, b) for a, b in zip(small[::-1], shape[::-1]))

def _unit_floats(data: Array, shape: tuple, dt: DType) -> Array:
  """Uniform floats in [0, 1): random mantissa bits under the exponent of 1.0, minus 1 (JAX's construction)."""
  nmant, nbits = MANTISSA_BITS[dt], dt.itemsize * 8
  rng_bits = 8 if nmant < 8 else nbits
  word = _random_bits(data, rng_bits, shape)
  if dt is dtypes.bfloat16:
    # bfloat16 lives in float32 storage: build the float32 whose top half is the bfloat16 pattern (exact)
    half = (jnp.astype(word, U32) >> (rng_bits - nmant)) | 0x3F80
    return jnp.astype(_bitcast(half << 16, dtypes.float32), dt) - 1
  uint = UINT_OF_WIDTH[nbits]
  one_bits = int(np.array(1.0, dt.np).view(uint.np))
  mant = (jnp.astype(word, uint) >> (rng_bits - nmant)) | jnp.asarray(one_bits, uint)
  return _bitcast(mant, dt) - jnp.asarray(1, dt)

def _bitcast(x: Array, dt: DType) -> Array: return Array(UOp(Ops.BITCAST, dt, (x.uop,)))

def _as_float(x, dt: DType) -> Array:
  return jnp.astype(x, dt) if isinstance(x, Array) else jnp.asarray(np.asarray(x, np.float64), dt)

def _uniform(data: Array, shape: tuple, dt: DType, minval, maxval) -> Array:
  lo, hi = _as_float(minval, dt), _as_float(maxval, dt)
  floats = _unit_floats(data, shape, dt)
  return jnp.maximum(lo, floats * (hi - lo) + lo)

def uniform(key, shape=(), dtype=None, minval=0., maxval=1.) -> Array:
  """Uniform floats in [minval, maxval) of `shape` and float `dtype` (float16, bfloat16, float32, float64).

  >>> [round(v, 6) for v in uniform(PRNGKey(0), (3,)).tolist()]
  [0.947667, 0.97858, 0.332291]
  """
  data, _ = _unwrap(key, "uniform")
  shape = _check_param_shapes("uniform", () if shape is None else shape, minval, maxval)
  return _uniform(data, shape, _float_dtype(dtype, "uniform"), minval, maxval)

# --- erf_inv: Giles' single-precision polynomials, the approximation XLA uses for float32 ---
ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

def _erf_inv_f32(x: Array) -> Array:
  w = -jnp.log1p(-x * x)
  central = w < 5.0
  w = jnp.where(central, w - 2.5, jnp.sqrt(w) - 3.0)
  p = jnp.where(central, ERFINV_CENTRAL[0], ERFINV_TAIL[0])
  for c, t in zip(ERFINV_CENTRAL[1:], ERFINV_TAIL[1:]):
    p = jnp.where(central, c, t) + p * w
  return jnp.where(jnp.abs(x) == 1.0, x * math.inf, p * x)

def _erf(x: Array) -> Array: return Array(UOp(Ops.ERF, x.dtype, (x.uop,)))

def erf_inv(x) -> Array:
  """The inverse error function on (-1, 1) (±inf at ±1). float32 and narrower use Giles' polynomial in float32;
  float64 refines that start with two Newton steps on erf.

  >>> round(float(erf_inv(0.5)), 6)
  0.476936
  """
  x = jnp.asarray(x)
  if not dtypes.is_float(x.dtype): x = jnp.astype(x, dtypes.default_float())
  if x.dtype is not dtypes.float64: return jnp.astype(_erf_inv_f32(jnp.astype(x, dtypes.float32)), x.dtype)
  y = jnp.astype(_erf_inv_f32(jnp.astype(x, dtypes.float32)), dtypes.float64)
  finite = jnp.isfinite(y)
  for _ in range(2):
    step = (_erf(y) - x) / (2.0 / math.sqrt(math.pi) * jnp.exp(-y * y))
    y = jnp.where(finite, y - jnp.where(finite, step, 0.0), y)
  return y

def _neg_one_up(dt: DType) -> float:
  """The float just above -1 in `dt` (np.nextafter(-1, 0))."""
  return -1.0 + 2.0 ** -(MANTISSA_BITS[dt] + 1)

def _normal(data: Array, shape: tuple, dt: DType) -> Array:
  u = _uniform(data, shape, dt, _neg_one_up(dt), 1.0)
  return jnp.asarray(math.sqrt(2), dt) * erf_inv(u)

def normal(key, shape=(), dtype=None) -> Array:
  """Standard normal floats of `shape` and float `dtype`: sqrt(2) * erf_inv(uniform(-1, 1)). A complex `dtype`
  gives (x + iy) / sqrt(2) for normal x and y drawn from the two halves of `split(key)`, as JAX's (unit variance).

  >>> [round(v, 4) for v in normal(PRNGKey(0), (3,)).tolist()]
  [1.6226, 2.0253, -0.4336]
  """
  if dtype is not None and dtypes.is_complex(dtypes.to_dtype(dtype)):
    part = dtypes.real_dtype(dtypes.to_dtype(dtype))
    halves = split(key)
    re, im = (normal(halves[i], shape, part) for i in (0, 1))
    return jnp.divide(from_parts(re, im), np.sqrt(2).astype(part.np))
  data, _ = _unwrap(key, "normal")
  return _normal(data, _shape_arg(shape, "normal"), _float_dtype(dtype, "normal"))

def _nextafter(x: Array, up: bool) -> Array:
  """The next representable float after `x` toward +inf (`up`) or -inf."""
  return jnp.nextafter(x, math.inf if up else -math.inf)

def truncated_normal(key, lower, upper, shape=None, dtype=None) -> Array:
  """Normal floats truncated to the open interval (lower, upper), by inverting the CDF of a uniform.

  >>> x = truncated_normal(PRNGKey(0), -1.0, 1.0, (1000,))
  >>> bool((x > -1).all() and (x < 1).all())
  True
  """
  data, _ = _unwrap(key, "truncated_normal")
  dt = _float_dtype(dtype, "truncated_normal")
  shape = _check_param_shapes("truncated_normal", shape, lower, upper)
  lo, hi = _as_float(lower, dt), _as_float(upper, dt)
  sqrt2 = jnp.asarray(math.sqrt(2), dt)
  a, b = _erf(lo / sqrt2), _erf(hi / sqrt2)
  out = sqrt2 * erf_inv(_uniform(data, shape, dt, a, b))
  return jnp.clip(out, _nextafter(_stop(lo), True), _nextafter(_stop(hi), False))

def _stop(x: Array) -> Array:
  """x with no gradient (bounds of a clip only)."""
  try:
    from tinyjx.lax import stop_gradient
  except ImportError:   # lax arrives with the transforms; before it, nothing differentiates anyway
    return x
  return stop_gradient(x)

def bernoulli(key, p=0.5, shape=None) -> Array:
  """Booleans that are True with probability `p` (uniform < p): dropout masks are `bernoulli(k, keep, x.shape)`.

  >>> bernoulli(PRNGKey(0), 0.5, (4,)).dtype
  dtypes.bool
  """
  data, _ = _unwrap(key, "bernoulli")
  pa = jnp.asarray(p)
  if not dtypes.is_float(pa.dtype):
    raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {pa.dtype}")
  shape = _check_param_shapes("bernoulli", shape, pa)
  return _uniform(data, shape, pa.dtype, 0., 1.) < pa

def _finfo_tiny(dt: DType) -> float: return dtypes.finfo(dt).tiny

def gumbel(key, shape=(), dtype=None) -> Array:
  """Standard Gumbel floats: -log(-log(u)) for u uniform in [tiny, 1).

  >>> gumbel(PRNGKey(0), (2, 3)).shape
  (2, 3)
  """
  data, _ = _unwrap(key, "gumbel")
  dt = _float_dtype(dtype, "gumbel")
  return -jnp.log(-jnp.log(_uniform(data, _shape_arg(shape, "gumbel"), dt, _finfo_tiny(dt), 1.)))

def exponential(key, shape=(), dtype=None) -> Array:
  """Standard exponential floats: -log1p(-u) for u uniform in [0, 1).

  >>> exponential(PRNGKey(0), (3,)).shape
  (3,)
  """
  data, _ = _unwrap(key, "exponential")
  u = _uniform(data, _shape_arg(shape, "exponential"), _float_dtype(dtype, "exponential"), 0., 1.)
  return -jnp.log1p(-u)

def laplace(key, shape=(), dtype=None) -> Array:
  """Standard Laplace floats: sign(u) * log1p(-|u|) for u uniform in (-1, 1).

  >>> laplace(PRNGKey(0), (3,)).shape
  (3,)
  """
  data, _ = _unwrap(key, "laplace")
  dt = _float_dtype(dtype, "laplace")
  u = _uniform(data, _shape_arg(shape, "laplace"), dt, _neg_one_up(dt), 1.)
  return jnp.sign(u) * jnp.log1p(-jnp.abs(u))

def logistic(key, shape=(), dtype=None) -> Array:
  """Standard logistic floats: log(u) - log1p(-u) for u uniform in [tiny, 1).

  >>> logistic(PRNGKey(0), (3,)).shape
  (3,)
  """
  data, _ = _unwrap(key, "logistic")
  dt = _float_dtype(dtype, "logistic")
  u = _uniform(data, _shape_arg(shape, "logistic"), dt, _finfo_tiny(dt), 1.)
  return jnp.log(u) - jnp.log1p(-u)

# ---------------------------------------------------------------- integers

def _int_dtype(dtype, name: str) -> DType:
  dt = dtypes.default_int() if dtype is None else dtypes.to_dtype(dtype)
  if not dtypes.is_int(dt): raise TypeError(f"{name} only accepts integer dtypes, got {dt}")
  return dt

def _clip_convert(x: Array, dt: DType) -> Array:
  """Convert integer `x` to `dt`, clipping to the range both types share instead of wrapping."""
  lo = max(dtypes.iinfo(dt).min, dtypes.iinfo(x.dtype).min)
  hi = min(dtypes.iinfo(dt).max, dtypes.iinfo(x.dtype).max)
  return jnp.astype(jnp.clip(x, jnp.asarray(lo, x.dtype), jnp.asarray(hi, x.dtype)), dt)

def _int_bound(v) -> Array:
  a = jnp.asarray(v)
  return a if dtypes.is_int(a.dtype) else jnp.astype(a, dtypes.default_int())

def _randint(data: Array, shape: tuple, minval, maxval, dt: DType) -> Array:
  """JAX's modulus method on twice the bits (two independent words per value, combined mod the span)."""
  minval, maxval = _int_bound(minval), _int_bound(maxval)
  too_big = maxval > _clip_convert(jnp.asarray(dtypes.iinfo(dt).max, dt), maxval.dtype)
  lo, hi = _clip_convert(minval, dt), _clip_convert(maxval, dt)
  nbits = dt.itemsize * 8
  k1, k2 = _words_split(data)
  high_bits, low_bits = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
  uint = UINT_OF_WIDTH[nbits]
  span = jnp.astype(hi - lo, uint)
  span = jnp.where(hi <= lo, jnp.asarray(1, uint), span)
  span = jnp.where(too_big & (hi > lo), span + jnp.asarray(1, uint), span)
  mult = jnp.asarray(2 ** (nbits // 2), uint) % span
  mult = (mult * mult) % span
  offset = ((high_bits % span) * mult + (low_bits % span)) % span
  return lo + jnp.astype(offset, dt)

def randint(key, shape, minval, maxval, dtype=None) -> Array:
  """Uniform integers in [minval, maxval) (bounds clip to `dtype`'s range; maxval <= minval gives minval).

  >>> randint(PRNGKey(0), (5,), 0, 10).tolist()
  [9, 0, 2, 3, 1]
  """
  data, _ = _unwrap(key, "randint")
  dt = _int_dtype(dtype, "randint")
  shape = _check_param_shapes("randint", shape, minval, maxval)
  if dt.itemsize >= 4: return _randint(data, shape, minval, maxval, dt)
  ii = dtypes.iinfo(dt)   # narrow types sample in int32 to keep the modulus bias small, as JAX does
  lo = jnp.clip(jnp.astype(_int_bound(minval), dtypes.int32), ii.min, ii.max)
  hi = jnp.clip(jnp.astype(_int_bound(maxval), dtypes.int32), ii.min, ii.max + 1)
  return jnp.astype(_randint(data, shape, lo, hi, dtypes.int32), dt)

# ---------------------------------------------------------------- sorting-based samplers

def _move_last(x: Array, axis: int) -> Array:
  perm = [i for i in range(x.ndim) if i != axis] + [axis]
  return Array(x.uop.permute(perm), x.weak)

def _move_back(x: Array, axis: int) -> Array:
  perm = list(range(x.ndim - 1))
  perm.insert(axis, x.ndim - 1)
  return Array(x.uop.permute(perm), x.weak)

def _take_last(x: Array, idx: Array) -> Array:
  """x[..., idx[..., j]] row by row: x and idx of shape (..., n) and (..., m) with equal leading dims."""
  n, m = x.shape[-1], idx.shape[-1]
  rows = math.prod(x.shape[:-1])
  flat = x.uop.reshape((rows * n,))
  base = Array(UOp(Ops.IOTA, dtypes.int32, (), ((rows, m), 0))) * n
  pos = base + jnp.astype(Array(idx.uop.reshape((rows, m))), dtypes.int32)
  return Array(UOp(Ops.GATHER, x.dtype, (flat, pos.uop)).reshape(x.shape[:-1] + (m,)), x.weak)

def _argsort_last(x: Array, descending: bool = False) -> Array:
  return Array(UOp(Ops.ARGSORT, dtypes.int32, (x.uop,), (x.ndim - 1, descending)))

def _take(x: Array, idx: Array, axis: int) -> Array:
  """jnp.take(x, idx, axis) for in-range integer indices: idx's shape replaces axis `axis`."""
  front = Array(x.uop.permute([axis] + [i for i in range(x.ndim) if i != axis]))
  g = UOp(Ops.GATHER, x.dtype, (front.uop, jnp.astype(idx, dtypes.int32).uop))
  k = idx.ndim
  perm = list(range(k, k + axis)) + list(range(k)) + list(range(k + axis, g.ndim))
  return Array(g.permute(perm), x.weak)

def _shuffle(data: Array, x: Array, axis: int) -> Array:
  """Sort along `axis` by fresh random 32-bit keys, ceil(3 ln(size) / ln(2**32-1)) times (JAX's rounds)."""
  rounds = math.ceil(3 * math.log(max(1, x.size)) / math.log(2 ** 32 - 1))
  moved = _move_last(x, axis)
  for _ in range(rounds):
    data, sub = _words_split(data)
    sort_keys = _move_last(_random_bits(sub, 32, x.shape), axis)
    moved = _take_last(moved, _argsort_last(sort_keys))
  return _move_back(moved, axis)

def _words_split(data: Array) -> tuple[Array, Array]:
  both = split(data)
  return Array(both.uop.shrink(((0, 1), (0, 2))).reshape((2,))), Array(both.uop.shrink(((1, 2), (0, 2))).reshape((2,)))

def _axis(axis: int, ndim: int, name: str) -> int:
  if not -max(ndim, 1) <= axis < max(ndim, 1):
    raise ValueError(f"{name}: axis {axis} is out of bounds for an array of ndim {ndim}")
  return axis % max(ndim, 1)

def permutation(key, x, axis: int = 0, independent: bool = False) -> Array:
  """A random permutation of arange(x) (int `x`) or of `x` along `axis` (`independent`: each slice on its own).

  >>> sorted(permutation(PRNGKey(0), 5).tolist())
  [0, 1, 2, 3, 4]
  """
  data, _ = _unwrap(key, "permutation")
  if isinstance(x, (int, np.integer)) or (np.ndim(x) == 0 and not isinstance(x, float)):
    n = int(x)
    if isinstance(x, Array) and not dtypes.is_int(x.dtype): raise TypeError("x must be an integer or at least 1-D")
    return _shuffle(data, Array(UOp(Ops.IOTA, dtypes.default_int(), (), ((n,), 0))), 0)
  if isinstance(x, float): raise TypeError(f"permutation: x must be an integer or an array, got float {x}")
  x = jnp.asarray(x)
  ax = _axis(axis, x.ndim, "permutation")
  if independent or x.ndim == 1: return _shuffle(data, x, ax)
  order = _shuffle(data, Array(UOp(Ops.IOTA, dtypes.default_int(), (), ((x.shape[ax],), 0))), 0)
  return _take(x, order, ax)

def shuffle(key, x, axis: int = 0) -> Array:
  """`x` shuffled along `axis`, each slice independently (JAX's deprecated `shuffle`; prefer `permutation`).

  >>> sorted(shuffle(PRNGKey(1), jnp.asarray([3, 1, 2])).tolist())
  [1, 2, 3]
  """
  data, _ = _unwrap(key, "shuffle")
  x = jnp.asarray(x)
  return _shuffle(data, x, _axis(axis, x.ndim, "shuffle"))

def categorical(key, logits, axis: int = -1, shape=None, replace: bool = True) -> Array:
  """Indices drawn with probabilities softmax(logits) along `axis` (the Gumbel-max trick).

  `shape` (default: logits' shape without `axis`) may add leading sample axes. `replace=False` draws
  distinct indices (Gumbel top-k).

  >>> categorical(PRNGKey(0), jnp.zeros((2, 5)), shape=(3, 2)).shape
  (3, 2)
  """
  data, _ = _unwrap(key, "categorical")
  logits = jnp.asarray(logits)
  ax = _axis(axis, logits.ndim, "categorical")
  batch_shape = logits.shape[:ax] + logits.shape[ax + 1:]
  shape = batch_shape if shape is None else _shape_arg(shape, "categorical")
  if not _broadcasts_to(batch_shape, shape):
    raise ValueError(f"categorical: shape {shape} must end in the logits' batch shape {batch_shape} "
                     f"(logits {logits.shape} without axis {ax})")
  prefix = shape[:len(shape) - len(batch_shape)]
  dt = logits.dtype if dtypes.is_float(logits.dtype) else dtypes.default_float()
  if replace:
    g_shape = prefix + shape[len(prefix):len(prefix) + ax] + (logits.shape[ax],) + shape[len(prefix) + ax:]
    g = _gumbel(data, g_shape, dt)
    noisy = g + Array(jnp.astype(logits, dt).uop.reshape((1,) * len(prefix) + logits.shape))
    return jnp.argmax(noisy, axis=len(prefix) + ax)
  k = math.prod(prefix)
  if k > logits.shape[ax]:
    raise ValueError(f"categorical: cannot draw {k} samples without replacement from {logits.shape[ax]} categories")
  noisy = _move_last(jnp.astype(logits, dt) + _gumbel(data, logits.shape, dt), ax)
  top = Array(_argsort_last(noisy, descending=True).uop.shrink(tuple((0, s) for s in noisy.shape[:-1]) + ((0, k),)))
  top = Array(top.uop.permute([top.ndim - 1] + list(range(top.ndim - 1))).reshape(shape))
  return jnp.astype(top, dtypes.default_int())

def _gumbel(data: Array, shape: tuple, dt: DType) -> Array:
  return -jnp.log(-jnp.log(_uniform(data, shape, dt, _finfo_tiny(dt), 1.)))

def choice(key, a, shape=(), replace: bool = True, p=None, axis: int = 0) -> Array:
  """Samples from `a` (an array, along `axis`, or arange(a) for an int) with or without replacement,
  uniformly or with probabilities `p`.

  >>> choice(PRNGKey(0), 10, (3,), replace=False).shape
  (3,)
  """
  data, _ = _unwrap(key, "choice")
  if not isinstance(shape, (tuple, list)):
    raise TypeError(f"choice: shape must be a sequence, got {shape!r}")
  shape = _shape_arg(shape, "choice")
  arr = jnp.asarray(a)
  if arr.ndim == 0:
    n = int(a)
  else:
    axis = _axis(axis, arr.ndim, "choice")
    n = arr.shape[axis]
  draws = math.prod(shape)
  if draws == 0: return jnp.zeros(shape, arr.dtype)
  if n <= 0: raise ValueError("choice: `a` must be greater than 0 unless no samples are taken")
  if not replace and draws > n:
    raise ValueError(f"choice: cannot take a larger sample (size {draws}) than the population (size {n}) "
                     "when replace=False")
  if p is None and replace:
    ind = _randint(data, shape, 0, n, dtypes.default_int())
  elif p is None:
    perm = permutation(data, n if arr.ndim == 0 else arr, axis)
    out = Array(perm.uop.shrink(tuple((0, draws) if i == (0 if arr.ndim == 0 else axis) else (0, s)
                                      for i, s in enumerate(perm.shape))), perm.weak)
    return _reshape_choice(out, arr, shape, axis)
  else:
    ind = _choice_p(data, jnp.asarray(p), n, shape, draws, replace)
  out = ind if arr.ndim == 0 else _take(arr, ind, axis)
  return _reshape_choice(out, arr, shape, axis)

def _reshape_choice(out: Array, arr: Array, shape: tuple, axis: int) -> Array:
  target = shape if arr.ndim == 0 else arr.shape[:axis] + shape + arr.shape[axis + 1:]
  return Array(out.uop.reshape(target), out.weak)

def _choice_p(data: Array, p: Array, n: int, shape: tuple, draws: int, replace: bool) -> Array:
  if not dtypes.is_float(p.dtype): p = jnp.astype(p, dtypes.default_float())
  if p.shape != (n,):
    raise ValueError(f"choice: p must be None or a 1-D vector of the size of a.shape[axis] ({n}); got shape {p.shape}")
  if replace:
    cum = jnp.cumsum(p)
    total = Array(cum.uop.shrink(((n - 1, n),)).reshape(()))
    r = total * (1 - _uniform(data, shape, p.dtype, 0., 1.))
    below = Array(cum.uop.reshape((1,) * len(shape) + (n,))) < Array(r.uop.reshape(shape + (1,)))
    return jnp.sum(below, axis=-1)                       # searchsorted(cum, r, side='left')
  g = _gumbel(data, (n,), p.dtype) + jnp.log(p)
  top = Array(_argsort_last(g, descending=True).uop.shrink(((0, draws),)))
  return jnp.astype(top, dtypes.default_int())

# ---------------------------------------------------------------- samplers built on control flow

def _gamma_one(data: Array, alpha: Array, log_space: bool) -> Array:
  """One Gamma(alpha) sample by Marsaglia and Tsang's rejection method (JAX's algorithm and key use, so the same
  key gives the same sample); alpha < 1 samples Gamma(alpha + 1) and scales by a uniform power."""
  from tinyjx import lax
  dt = alpha.dtype
  zero, one = jnp.zeros((), dt), jnp.ones((), dt)
  boosted = alpha >= one
  a = jnp.where(boosted, alpha, alpha + one)
  d = a - 1.0 / 3.0
  c = (1.0 / 3.0) / jnp.sqrt(d)
  def normal_v(state):
    k, sub = _words_split(state[0])
    x = _normal(sub, (), dt)
    return k, x, one + x * c
  def propose(state):
    k, x_key, u_key = (_row(split(state[0], 3), i) for i in range(3))
    _, x, v = lax.while_loop(lambda s: s[2] <= zero, normal_v, (x_key, zero, -one))
    return k, x * x, v * v * v, _uniform(u_key, (), dt, 0., 1.)
  def rejected(state):
    _, X, V, U = state
    return (U >= one - 0.0331 * (X * X)) & (jnp.log(U) >= X * 0.5 + d * (one - V + jnp.log(V)))
  k, sub = _words_split(data)
  V = lax.while_loop(rejected, propose, (k, zero, one, one + one))[2]
  if log_space:
    log_u = -(-jnp.log1p(-_uniform(sub, (), dt, 0., 1.)))
    log_boost = jnp.where(boosted | (log_u == 0), zero, log_u * (one / alpha))
    return jnp.log(d) + jnp.log(V) + log_boost
  u = one - _uniform(sub, (), dt, 0., 1.)
  return d * V * jnp.where(boosted, one, u ** (one / alpha))

def _row(keys: Array, i: int) -> Array: return Array(keys.uop.shrink(((i, i + 1), (0, 2))).reshape((2,)))

def _gamma(data: Array, a, shape, dt: DType, log_space: bool, name: str) -> Array:
  from tinyjx.transforms.batching import vmap
  shape = _check_param_shapes(name, shape, a)
  alphas = jnp.astype(jnp.asarray(a), dt)
  n = math.prod(shape)
  if n == 0: return jnp.zeros(shape, dt)
  flat = Array(alphas.uop.broadcast_to(shape).reshape((n,)))
  samples = vmap(lambda k, x: _gamma_one(k, x, log_space))(split(data, n), flat)
  return Array(samples.uop.reshape(shape))

def gamma(key, a, shape=None, dtype=None) -> Array:
  """Gamma(a, 1) floats (Marsaglia-Tsang rejection, run as a while_loop over all elements at once).

  Not differentiable with respect to `a`: reverse mode through the rejection loop raises.

  >>> gamma(PRNGKey(0), 2.0, (3,)).shape
  (3,)
  """
  data, _ = _unwrap(key, "gamma")
  return _gamma(data, a, shape, _float_dtype(dtype, "gamma"), False, "gamma")

def loggamma(key, a, shape=None, dtype=None) -> Array:
  """log of Gamma(a, 1) samples, computed in log space (accurate for small `a`).

  >>> loggamma(PRNGKey(0), 0.1, (2,)).shape
  (2,)
  """
  data, _ = _unwrap(key, "loggamma")
  return _gamma(data, a, shape, _float_dtype(dtype, "loggamma"), True, "loggamma")

def beta(key, a, b, shape=None, dtype=None) -> Array:
  """Beta(a, b) floats, as Gamma(a) / (Gamma(a) + Gamma(b)) from log-space gamma samples.

  >>> x = beta(PRNGKey(0), 2.0, 3.0, (4,))
  >>> bool(((x > 0) & (x < 1)).all())
  True
  """
  data, _ = _unwrap(key, "beta")
  dt = _float_dtype(dtype, "beta")
  shape = _check_param_shapes("beta", shape, a, b)
  ka, kb = _words_split(data)
  la = _gamma(ka, jnp.broadcast_to(jnp.astype(jnp.asarray(a), dt), shape), shape, dt, True, "beta")
  lb = _gamma(kb, jnp.broadcast_to(jnp.astype(jnp.asarray(b), dt), shape), shape, dt, True, "beta")
  top = jnp.maximum(la, lb)
  ga, gb = jnp.exp(la - top), jnp.exp(lb - top)
  return ga / (ga + gb)

def _cholesky(a: Array) -> Array:
  """The lower Cholesky factor of a symmetric positive definite matrix, one column per step of a fori_loop."""
  from tinyjx import lax
  n = a.shape[-1]
  rows = jnp.arange(n)
  def column(j, L):
    row_j = lax.dynamic_index_in_dim(L, j, 0, keepdims=False)          # L[j, :j] (zeros from column j on)
    v = lax.dynamic_index_in_dim(a, j, 1, keepdims=False) - L @ row_j   # A[:, j] - L[:, :j] L[j, :j]
    diag = jnp.sqrt(lax.dynamic_index_in_dim(v, j, 0, keepdims=False))
    col = jnp.where(rows >= j, v / diag, 0.0)
    return lax.dynamic_update_index_in_dim(L, col, j, 1)
  return lax.fori_loop(0, n, column, jnp.zeros_like(a))

def multivariate_normal(key, mean, cov, shape=None, dtype=None, method: str = 'cholesky') -> Array:
  """Normal vectors with mean `mean` (..., n) and covariance `cov` (n, n): mean + L z with L the Cholesky factor.

  Only method='cholesky' (JAX's default) is implemented; `cov` is one matrix shared by every sample.

  >>> multivariate_normal(PRNGKey(0), jnp.zeros(2), jnp.eye(2), (5,)).shape
  (5, 2)
  """
  data, _ = _unwrap(key, "multivariate_normal")
  if method != 'cholesky':
    raise NotImplementedError(f"multivariate_normal: method={method!r} is not implemented; use method='cholesky'")
  mean, cov = jnp.asarray(mean), jnp.asarray(cov)
  dt = _float_dtype(dtype if dtype is not None else jnp.result_type(mean, cov, 0.0), "multivariate_normal")
  n = mean.shape[-1] if mean.ndim else 0
  if mean.ndim < 1 or cov.shape != (n, n):
    raise ValueError(f"multivariate_normal: mean must be (..., n) and cov (n, n); got mean {mean.shape} and cov "
                     f"{cov.shape} (batched covariances are not supported)")
  shape = mean.shape[:-1] if shape is None else _check_param_shapes("multivariate_normal", shape, mean[..., 0])
  z = _normal(data, tuple(shape) + (n,), dt)
  factor = _cholesky(jnp.astype(cov, dt))
  return jnp.astype(mean, dt) + jnp.einsum('ij,...j->...i', factor, z)

__all__ = ['PRNGKey', 'key', 'key_data', 'wrap_key_data', 'PRNGKeyArray', 'split', 'fold_in', 'bits', 'uniform',
           'normal', 'truncated_normal', 'bernoulli', 'randint', 'categorical', 'choice', 'permutation', 'shuffle',
           'gumbel', 'exponential', 'laplace', 'logistic', 'gamma', 'loggamma', 'beta', 'multivariate_normal',
           'threefry2x32', 'erf_inv']
