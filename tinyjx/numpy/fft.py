"""numpy.fft: `jnp.fft`, discrete Fourier transforms.

A transform along one axis whose length's prime factors are 2, 3, 5 and 7 (1000, 360, 28, every power of two) is
an FFT node (JAX's fft primitive; `fft_node`), a runtime step the CPU runs in C (devices/cpu.py `FFT`: Stockham
stages of radix 8 (then 4 or 2) and of each odd prime factor on a vector register's worth of transforms at once, 16
float32 or 8 float64 with AVX-512, the complex values read and written where they lie, parts interleaved) and other
devices through the PYTHON device's `fft_packed` (numpy, the same operations in the same order, the same bits). Past
`FOUR_STEP` points, or from 256 points in fewer vectors than a node takes at once, the four-step split n = n1 n2
makes it two levels of nodes with one twiddle multiply and one transpose between (`_nodes`). A real input of an even
length n whose half is such a length is read as n/2 complex values, transformed, and separated into the n/2 + 1
frequencies (`_rfft_half`), and irfft is the reverse (`_irfft_half`): half the work, and no zero imaginary parts.
The node is linear: its jvp is the node on the tangent, its transpose the node itself (the DFT matrix is
symmetric), its vmap moves the batch axis in front.

Other lengths (a prime factor of 11 or more) are compositions of jnp ops, a mixed-radix Cooley-Tukey recursion
written with reshapes, transposes, twiddle-factor multiplies, small DFT matmuls and nodes, so `jit` compiles them
into ordinary kernels (complex values as pairs of floats, see tinyjx/lower/complex.py) and `grad`, `jvp` and `vmap`
differentiate and batch them with the rules the ops already have. A length n = n1 * n2 is split into n1 transforms
of length n2 and n2 of length n1, with the twiddles exp(-2 pi i j2 k1 / n) in between (n1 the part of n made of 2,
3, 5 and 7 where that is past `DIRECT`, one node, else the largest factor up to sqrt(n)); a length of at most `DIRECT`
(or a prime up to `DIRECT_PRIME`) is one matmul with its DFT matrix; a larger prime goes through Bluestein's chirp-z
transform, a convolution computed with power-of-two transforms. Twiddles and DFT matrices are computed in float64 by
numpy and rounded once to the transform's type, so results match numpy.fft to float32 rounding.

Speed (512 x 512 complex64 `fft2`, 2 cores): 0.34-0.37 ms, JAX 0.54, PyTorch 0.49 (the matmul recursion took 2.7).

Conventions are numpy's and JAX's: `n` (or `s`) crops or zero-pads the input along each transformed axis, `norm`
is 'backward' (1/n on the inverse), 'ortho' (1/sqrt(n) both ways) or 'forward' (1/n on the forward transform),
real inputs give complex64 (complex128 with 64-bit mode), and `irfft` reads only the first n//2 + 1 frequencies.
"""
from __future__ import annotations
import functools, math, operator
import numpy as np
from tinyjx import dtypes
from tinyjx.array import Array
from tinyjx.numpy import base as jnp
from tinyjx.numpy.core import promote_inexact, from_parts
from tinyjx.transforms import ad, batching
from tinyjx.devices.python import fft_radices, FFT_PRIMES
from tinyjx.uop import UOp, Ops, normalize_axis

__all__ = ['fft', 'ifft', 'rfft', 'irfft', 'hfft', 'ihfft', 'fft2', 'ifft2', 'fftn', 'ifftn', 'rfft2', 'irfft2',
           'rfftn', 'irfftn', 'fftfreq', 'rfftfreq', 'fftshift', 'ifftshift']

FOUR_STEP = 4096     # node lengths up to this are one FFT node; longer ones (and ones of 256 or more in fewer
LANES = 16           # than LANES vectors: a node transforms that many at once) split into two levels of nodes
DIRECT = 32          # in a recursion, lengths up to this are one DFT matmul
DIRECT_PRIME = 128   # primes up to this too (n^2 work); larger primes use Bluestein's algorithm
NORMS = ('backward', 'ortho', 'forward')

# ---------------------------------------------------------------- constants, in float64, rounded once

@functools.lru_cache(maxsize=256)
def _roots(n: int, m: int, sign: int, rows: int | None = None) -> np.ndarray:
  """exp(sign 2 pi i j k / n) for j < rows (default m), k < m, as complex128 (the exponent reduced mod n first;
  parts that are zero exactly, at quarter turns, are made exactly zero: fft([1, 2, 3, 4])[2] is -2, not -2 - 5e-16j)."""
  j = np.arange(m if rows is None else rows).reshape(-1, 1)
  k = np.arange(m).reshape(1, -1)
  w = np.exp(sign * 2j * np.pi * ((j * k) % n) / n)
  w.real[np.abs(w.real) < 1e-12], w.imag[np.abs(w.imag) < 1e-12] = 0, 0
  return w

def _const(values: np.ndarray, dt) -> Array:
  return jnp.asarray(values.astype(dt.np))

def _smallest_factor(n: int) -> int:
  for p in range(2, math.isqrt(n) + 1):
    if n % p == 0: return p
  return n

def _smooth_part(n: int) -> int:
  """The largest factor of n whose prime factors are FFT_PRIMES (a length FFT nodes take)."""
  part = 1
  for p in FFT_PRIMES:
    while n % p == 0: n, part = n // p, part * p
  return part

def _split_factor(n: int) -> int:
  """The largest factor of composite n up to sqrt(n), so both halves of the recursion stay small."""
  return next(p for p in range(math.isqrt(n), 1, -1) if n % p == 0)

# ---------------------------------------------------------------- the FFT node: lengths of 2, 3, 5 and 7

def _native(n: int, dt) -> bool:
  """Whether a transform of length n of values of `dt` (complex, or a real first stage) goes to FFT nodes: n >= 2
  whose prime factors are FFT_PRIMES (2, 3, 5, 7)."""
  return n >= 2 and fft_radices(n) is not None and dtypes.real_dtype(dt) in (dtypes.float32, dtypes.float64)

def _halves(n: int, dt) -> bool:
  """Whether a real transform of length n goes through an n/2-point transform of FFT nodes (`_rfft_half`)."""
  return n >= 4 and n % 2 == 0 and _native(n // 2, dt)

def _nodes(x: Array, axis: int, inverse: bool, scale: float = 1.0) -> Array:
  """The DFT of complex `x` along `axis` (negative) times `scale`, of a length n that `_native` takes: one FFT
  node, or the four-step split n = n1 n2 (n1 the largest factor up to sqrt(n); x[n2 j1 + j2] -> nodes over j1,
  twiddles exp(-+2 pi i j2 k1 / n), nodes over j2 -> X[k1 + n1 k2], one transpose) where n > FOUR_STEP (a node's
  scratch, 256 n bytes a thread, would leave the L2 cache) or where fewer than LANES vectors of n >= 256 points would
  leave most of a node's lanes empty."""
  n, ax = x.shape[axis], x.ndim + axis
  if n <= FOUR_STEP and (n < 256 or x.size // n >= LANES): return fft_node(x, axis, inverse, scale)
  n1 = _split_factor(n)
  n2 = n // n1
  y = _nodes(x.reshape(x.shape[:ax] + (n1, n2) + x.shape[ax + 1:]), axis - 1, inverse)     # [..., k1, j2, ...]
  twiddles = _roots(n, n2, 1 if inverse else -1, rows=n1).reshape((n1, n2) + (1,) * (-axis - 1))
  y = _nodes(y * _const(twiddles, y.dtype), axis, inverse, scale)                         # [..., k1, k2, ...]
  return jnp.swapaxes(y, ax, ax + 1).reshape(x.shape)                                     # k = k1 + n1 k2

def fft_node(x: Array, axis: int, inverse: bool, scale: float = 1.0) -> Array:
  """The DFT (exp(-2 pi i ...), or exp(+2 pi i ...) when `inverse`) of complex64 or complex128 `x` along `axis`
  (negative: counted from the end), of a length whose prime factors are 2, 3, 5 and 7, times `scale` (a norm,
  applied as the results are written: no pass of its own): one FFT node (JAX's fft primitive), a runtime step the
  CPU runs in C (`tjx_fft`: Stockham stages of radix 8, 4 or 2 and of each odd prime factor on a vector register's
  worth of transforms at once, reading and writing the parts interleaved as they lie in memory) and other devices
  through the PYTHON device's `fft_packed`, in the same order."""
  return Array(UOp(Ops.FFT, x.dtype, (x.uop,), (axis, bool(inverse), float(scale))))

def fft_jvp(node, ts):
  """The transform is linear: the tangent's transform."""
  return fft_node(Array(ts[0]), *node.arg).uop

def fft_vjp(ct, node):
  """The transpose (unconjugated, as JAX transposes complex-linear maps) of the DFT is the DFT itself: its matrix is
  symmetric."""
  return (fft_node(Array(ct), *node.arg).uop,)

def fft_batch(node, srcs, bdims):
  """vmap of an FFT node: the batch axis goes in front (the transformed axis counts from the end)."""
  return node.replace(src=(batching.moveaxis(srcs[0], bdims[0], 0),)), 0

ad.jvp_rules[Ops.FFT], ad.vjp_rules[Ops.FFT], batching.batch_rules[Ops.FFT] = fft_jvp, fft_vjp, fft_batch

# ---------------------------------------------------------------- one axis, the last one

def _dft_matmul(x: Array, sign: int) -> Array:
  """The DFT of the last axis as a matmul with the n x n matrix w of roots of unity. A complex `x` is one real
  matmul: [re x, im x] @ [[re w, im w], [-im w, re w]] gives [re y, im y] (each part one sum of 2n products), one
  kernel where the split's complex matmul is two; a real `x` (the first stage of a real input's
  transform) takes two real matmuls."""
  n = x.shape[-1]
  w = _roots(n, n, sign)
  if dtypes.is_complex(x.dtype):
    block = np.block([[w.real, w.imag], [-w.imag, w.real]])
    y = jnp.matmul(jnp.concatenate([jnp.real(x), jnp.imag(x)], -1), _const(block, dtypes.real_dtype(x.dtype)))
    return from_parts(y[..., :n], y[..., n:])
  return from_parts(jnp.matmul(x, _const(w.real, x.dtype)), jnp.matmul(x, _const(w.imag, x.dtype)))

def _cooley_tukey(x: Array, n1: int, sign: int) -> Array:
  """n = n1 * n2: x[n2 j1 + j2] -> transforms over j1, twiddles, transforms over j2 -> X[k1 + n1 k2]."""
  lead, n = x.shape[:-1], x.shape[-1]
  n2 = n // n1
  y = jnp.swapaxes(x.reshape(lead + (n1, n2)), -1, -2)                  # [..., j2, j1]
  y = _transform(y, sign)                                               # [..., j2, k1]
  y = y * _const(_roots(n, n1, sign, rows=n2), y.dtype)                 # exp(sign 2 pi i j2 k1 / n)
  y = _transform(jnp.swapaxes(y, -1, -2), sign)                         # [..., k1, k2]
  return jnp.swapaxes(y, -1, -2).reshape(lead + (n,))                   # k = k1 + n1 k2

def _bluestein(x: Array, sign: int) -> Array:
  """A prime length n as a convolution with the chirp exp(sign pi i j^2 / n), done with power-of-two transforms:
  X[k] = w[k] sum_j (x[j] w[j]) conj(w[k - j]), w[j] = exp(sign pi i j^2 / n)."""
  n = x.shape[-1]
  m = 1 << (2 * n - 2).bit_length()
  j = np.arange(n)
  w = np.exp(sign * 1j * np.pi * ((j * j) % (2 * n)) / n)
  kernel = np.zeros(m, np.complex128)
  kernel[:n], kernel[m - n + 1:] = np.conj(w), np.conj(w[1:][::-1])
  spectrum = np.fft.fft(kernel)                                        # a constant: computed once, on the host
  cdt = dtypes.complex_dtype(x.dtype)
  a = jnp.pad(x * _const(w, cdt), [(0, 0)] * (x.ndim - 1) + [(0, m - n)])
  conv = _transform(_transform(a, -1) * _const(spectrum, cdt), 1) / m   # inverse of the power-of-two length
  return conv[..., :n] * _const(w, cdt)

def _transform(x: Array, sign: int) -> Array:
  """The unnormalized DFT of `x` (complex, or float for a real input) along its last axis (sign -1 forward, +1
  inverse); the result is complex."""
  n = x.shape[-1]
  if n <= 1: return x if dtypes.is_complex(x.dtype) else x.astype(dtypes.complex_dtype(x.dtype))
  if n > DIRECT and _native(n, x.dtype): return _nodes(_as_complex(x), -1, sign > 0)  # (a smaller one: a matmul,
  # which fuses with the recursion's other stages where a node would be a step of its own between kernels)
  if n <= DIRECT: return _dft_matmul(x, sign)
  p = _smallest_factor(n)
  if p == n: return _dft_matmul(x, sign) if n <= DIRECT_PRIME else _bluestein(x, sign)
  smooth = _smooth_part(n)          # (a node's length: one step, where the split's halves would each recurse)
  return _cooley_tukey(x, smooth if smooth > DIRECT else _split_factor(n), sign)

# ---------------------------------------------------------------- the public transforms

def _check_norm(norm) -> str:
  norm = 'backward' if norm is None else norm
  if norm not in NORMS: raise ValueError(f"Invalid norm value {norm!r}; should be one of {', '.join(map(repr, NORMS))}")
  return norm

def _scale(norm: str, n: int, inverse: bool) -> float:
  if norm == 'ortho': return 1 / math.sqrt(n)
  return 1 / n if (norm == 'forward') != inverse else 1.0

def _scaled(x: Array, scale: float) -> Array: return x if scale == 1.0 else x * scale

def _length(n, name: str) -> int:
  try:
    n = operator.index(n)
  except TypeError:
    raise TypeError(f"jnp.fft.{name}: n must be an int, got {n!r}") from None
  if n < 1: raise ValueError(f"jnp.fft.{name}: invalid number of FFT data points ({n}); n must be at least 1")
  return n

def _fit(x: Array, n: int, axis: int = -1) -> Array:
  """`x` cropped or zero-padded to length `n` along `axis`."""
  ax = axis % x.ndim
  m = x.shape[ax]
  if n == m: return x
  if n < m: return x[(slice(None),) * ax + (slice(0, n),)]
  return jnp.pad(x, [(0, 0)] * ax + [(0, n - m)] + [(0, 0)] * (x.ndim - ax - 1))

def _as_complex(x) -> Array:
  x = jnp.asarray(x)
  if dtypes.is_complex(x.dtype): return x
  return x.astype(dtypes.complex_dtype(promote_inexact(x)[0].dtype))

def _inexact(x) -> Array:
  """A complex `x` as it is, a real one as floats (its first transform stage multiplies real by complex)."""
  x = jnp.asarray(x)
  if dtypes.is_complex(x.dtype): return x
  x = promote_inexact(x)[0]
  return x if x.dtype.itemsize >= 4 else x.astype(dtypes.float32)

def _along(x: Array, axis: int, name: str, f) -> Array:
  """`f` applied to `x` with `axis` moved last, and moved back after."""
  if x.ndim == 0: raise ValueError(f"jnp.fft.{name} needs an array of at least one dimension, got a 0-d array")
  ax = normalize_axis(axis, x.ndim, "axis")
  return jnp.moveaxis(f(jnp.moveaxis(x, ax, -1)), -1, ax)

def _c2c(a, n, axis: int, norm, inverse: bool, name: str) -> Array:
  return _transform_axes(_inexact(a), [axis], [n], norm, inverse, name)

def _transform_axes(x: Array, axes, sizes, norm, inverse: bool, name: str) -> Array:
  """`x` (complex, or float) transformed along each of `axes` (the last first, as numpy), each cropped or padded to
  its size in `sizes` (None: as it is) and scaled by `norm`. Power-of-two lengths are FFT nodes along their axis;
  other lengths move their axis last and recurse."""
  norm = _check_norm(norm)
  if x.ndim == 0: raise ValueError(f"jnp.fft.{name} needs an array of at least one dimension, got a 0-d array")
  for axis, n in reversed(list(zip(axes, sizes))):
    ax = normalize_axis(axis, x.ndim, "axis")
    size = x.shape[ax] if n is None else _length(n, name)
    if size == 0: raise ValueError(f"jnp.fft.{name}: invalid number of FFT data points (0); the axis is empty")
    scale = _scale(norm, size, inverse)
    if _native(size, x.dtype):
      x = _nodes(_as_complex(_fit(x, size, ax)), ax - x.ndim, inverse, scale)
    else:
      x = _along(x, ax, name, lambda v: _scaled(_transform(_fit(v, size), 1 if inverse else -1), scale))
  return x

def fft(a, n=None, axis: int = -1, norm=None) -> Array:
  """The discrete Fourier transform along `axis`, cropped or zero-padded to `n` points (numpy.fft.fft).

  >>> import tinyjx.numpy as jnp
  >>> print(jnp.fft.fft(jnp.array([1.0, 2.0, 3.0, 4.0])))
  [10.+0.j -2.+2.j -2.+0.j -2.-2.j]
  """
  return _c2c(a, n, axis, norm, False, 'fft')

def ifft(a, n=None, axis: int = -1, norm=None) -> Array:
  """The inverse discrete Fourier transform along `axis` (numpy.fft.ifft)."""
  return _c2c(a, n, axis, norm, True, 'ifft')

def rfft(a, n=None, axis: int = -1, norm=None) -> Array:
  """The transform of a real input: its first n//2 + 1 frequencies, the rest being their conjugates.

  >>> import tinyjx.numpy as jnp
  >>> print(jnp.fft.rfft(jnp.array([1.0, 2.0, 3.0, 4.0])))
  [10.+0.j -2.+2.j -2.+0.j]
  """
  a = jnp.asarray(a)
  if dtypes.is_complex(a.dtype):
    raise TypeError(f"jnp.fft.rfft takes a real input, got {a.dtype}; use jnp.fft.fft for complex inputs")
  norm, x = _check_norm(norm), _inexact(a)
  def one(v):
    size = v.shape[-1] if n is None else _length(n, 'rfft')
    if size == 0: raise ValueError("jnp.fft.rfft: invalid number of FFT data points (0); the axis is empty")
    v = _fit(v, size)
    y = _rfft_half(v) if _halves(size, v.dtype) else _transform(v, -1)[..., :size // 2 + 1]
    return _scaled(y, _scale(norm, size, False))
  return _along(x, axis, 'rfft', one)

def _rfft_half(x: Array) -> Array:
  """The first n/2 + 1 frequencies of real `x` (..., n), n even: the n/2-point transform Z (`_nodes`) of z[j] =
  x[2j] + i x[2j + 1] (x's memory read as complex values), then X[k] = (Z[k] + conj Z[m - k]) / 2 - i w^k (Z[k] -
  conj Z[m - k]) / 2 for k = 0..m (m = n/2, Z[m] = Z[0], w = exp(-2 pi i / n)): half the transform's work, and no
  zero imaginary parts written."""
  n = x.shape[-1]
  m = n // 2
  pairs = x.reshape(x.shape[:-1] + (m, 2))
  z = _nodes(from_parts(pairs[..., 0], pairs[..., 1]), -1, False)
  mid, rev = z[..., 1:], jnp.conj(jnp.flip(z[..., 1:], -1))    # Z[k], conj Z[m - k] for k = 1..m-1
  w = _roots(n, m, -1, rows=2)[1, 1:]                         # exp(-2 pi i k / n)
  mid = (mid + rev) * 0.5 + (mid - rev) * _const(-0.5j * w, mid.dtype)
  re0, im0 = jnp.real(z[..., :1]), jnp.imag(z[..., :1])       # X[0] and X[m] are real
  return jnp.concatenate([(re0 + im0).astype(z.dtype), mid, (re0 - im0).astype(z.dtype)], -1)

def _irfft_half(half: Array, n: int) -> Array:
  """n real points (n even, unnormalized: n times numpy's irfft) from the frequencies 0..n/2 of `half`,
  by one n/2-point inverse transform: with m = n/2, E[k] + i O[k] (the transforms of the even and the odd points)
  is (X[k] + conj X[m - k]) / 2 + i exp(2 pi i k / n) (X[k] - conj X[m - k]) / 2, whose inverse transform holds
  x[2j] + i x[2j + 1]. The imaginary parts of X[0] and X[m] are ignored, as numpy's."""
  m = n // 2
  k = jnp.arange(m + 1)                                        # (an iota: the kernel's loop splits at its ends)
  x = jnp.where((k == 0) | (k == m), jnp.real(half).astype(half.dtype), half)
  rev = jnp.conj(jnp.flip(x, -1))                              # conj X[m - k]
  w = _roots(n, m, 1, rows=2)[1]                              # exp(2 pi i k / n)
  z = _nodes((x + rev)[..., :m] + (x - rev)[..., :m] * _const(1j * w, x.dtype), -1, True)
  return jnp.stack([jnp.real(z), jnp.imag(z)], -1).reshape(half.shape[:-1] + (n,))

def irfft(a, n=None, axis: int = -1, norm=None) -> Array:
  """The real inverse of `rfft`: `n` real points (default 2 (m - 1) for m input frequencies) from the first
  n//2 + 1 frequencies, the others taken as their conjugates; the imaginary parts of the zero (and, for even n,
  the Nyquist) frequency are ignored, as numpy's."""
  norm, x = _check_norm(norm), _as_complex(a)
  def one(v):
    size = 2 * (v.shape[-1] - 1) if n is None else _length(n, 'irfft')
    if size < 1: raise ValueError(f"jnp.fft.irfft: invalid number of FFT data points ({size}); pass n >= 1")
    half = _fit(v, size // 2 + 1)
    if _halves(size, half.dtype): return _scaled(_irfft_half(half, size), _scale(norm, size, True))
    mirror = jnp.conj(jnp.flip(half[..., 1:(size + 1) // 2], -1))
    full = jnp.concatenate([half, mirror], -1)
    return _scaled(jnp.real(_transform(full, 1)), _scale(norm, size, True))
  return _along(x, axis, 'irfft', one)

def hfft(a, n=None, axis: int = -1, norm=None) -> Array:
  """The transform of a Hermitian-symmetric signal given by its first half: a real spectrum (numpy.fft.hfft)."""
  norm = _check_norm(norm)
  swapped = {'backward': 'forward', 'forward': 'backward', 'ortho': 'ortho'}[norm]
  return irfft(jnp.conj(_as_complex(a)), n, axis, swapped)

def ihfft(a, n=None, axis: int = -1, norm=None) -> Array:
  """The inverse of `hfft`: the first half of the spectrum of a real signal (numpy.fft.ihfft)."""
  norm = _check_norm(norm)
  swapped = {'backward': 'forward', 'forward': 'backward', 'ortho': 'ortho'}[norm]
  return jnp.conj(rfft(a, n, axis, swapped))

def _axes_and_sizes(x: Array, s, axes, name: str) -> tuple[list, list]:
  """numpy's rule: axes default to the last len(s) axes (all axes without s); s defaults to their lengths."""
  if s is not None and axes is not None and len(s) != len(axes):
    raise ValueError(f"jnp.fft.{name}: s and axes must have one length, got s={tuple(s)} and axes={tuple(axes)}")
  if axes is None: axes = list(range(x.ndim - len(s), x.ndim)) if s is not None else list(range(x.ndim))
  axes = [normalize_axis(a, x.ndim, "axes") for a in axes]
  if len(set(axes)) != len(axes): raise ValueError(f"jnp.fft.{name}: repeated axis in axes={tuple(axes)}")
  return axes, list(s) if s is not None else [None] * len(axes)

def fftn(a, s=None, axes=None, norm=None) -> Array:
  """The transform over several axes (all by default): one 1-D transform per axis, the last axis first, as
  numpy.fft.fftn runs them (its rounding; and the last axis is the contiguous one)."""
  x = _inexact(a)
  return _transform_axes(x, *_axes_and_sizes(x, s, axes, 'fftn'), norm, False, 'fftn')

def ifftn(a, s=None, axes=None, norm=None) -> Array:
  """The inverse transform over several axes, the last axis first (numpy.fft.ifftn)."""
  x = _inexact(a)
  return _transform_axes(x, *_axes_and_sizes(x, s, axes, 'ifftn'), norm, True, 'ifftn')

def fft2(a, s=None, axes=(-2, -1), norm=None) -> Array:
  """`fftn` over the last two axes by default."""
  return fftn(a, s, axes, norm)

def ifft2(a, s=None, axes=(-2, -1), norm=None) -> Array:
  """`ifftn` over the last two axes by default."""
  return ifftn(a, s, axes, norm)

def rfftn(a, s=None, axes=None, norm=None) -> Array:
  """`rfft` over the last of `axes`, then `fft` over the others (numpy.fft.rfftn)."""
  x = jnp.asarray(a)
  axes, sizes = _axes_and_sizes(x, s, axes, 'rfftn')
  return _transform_axes(rfft(x, sizes[-1], axes[-1], norm), axes[:-1], sizes[:-1], norm, False, 'rfftn')

def irfftn(a, s=None, axes=None, norm=None) -> Array:
  """`ifft` over all but the last of `axes`, then `irfft` over the last (numpy.fft.irfftn); the last length is
  2 (m - 1) unless `s` gives it."""
  x = _as_complex(a)
  axes, sizes = _axes_and_sizes(x, s, axes, 'irfftn')
  return irfft(_transform_axes(x, axes[:-1], sizes[:-1], norm, True, 'irfftn'), sizes[-1], axes[-1], norm)

def rfft2(a, s=None, axes=(-2, -1), norm=None) -> Array:
  """`rfftn` over the last two axes by default."""
  return rfftn(a, s, axes, norm)

def irfft2(a, s=None, axes=(-2, -1), norm=None) -> Array:
  """`irfftn` over the last two axes by default."""
  return irfftn(a, s, axes, norm)

# ---------------------------------------------------------------- frequencies and shifts

def fftfreq(n: int, d=1.0, *, dtype=None) -> Array:
  """The sample frequencies of an `n`-point transform with sample spacing `d`: 0, 1, ..., -(n//2), ..., -1 over d n.

  >>> import tinyjx.numpy as jnp
  >>> jnp.fft.fftfreq(4).tolist()
  [0.0, 0.25, -0.5, -0.25]
  """
  n = _length(n, 'fftfreq')
  k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)])
  return jnp.divide(jnp.asarray(k, dtype or dtypes.default_float()), jnp.multiply(d, n))

def rfftfreq(n: int, d=1.0, *, dtype=None) -> Array:
  """The sample frequencies of `rfft`: 0, 1, ..., n//2 over d n."""
  n = _length(n, 'rfftfreq')
  return jnp.divide(jnp.asarray(np.arange(n // 2 + 1), dtype or dtypes.default_float()), jnp.multiply(d, n))

def _shift_axes(x: Array, axes) -> list:
  if axes is None: return list(range(x.ndim))
  return [axes] if isinstance(axes, int) else list(axes)

def fftshift(x, axes=None) -> Array:
  """The zero frequency moved to the middle: a roll by n//2 along each of `axes` (all by default)."""
  x = jnp.asarray(x)
  axes = _shift_axes(x, axes)
  return jnp.roll(x, [x.shape[a] // 2 for a in axes], axes) if axes else x

def ifftshift(x, axes=None) -> Array:
  """The inverse of `fftshift`: a roll by -(n//2) along each of `axes`."""
  x = jnp.asarray(x)
  axes = _shift_axes(x, axes)
  return jnp.roll(x, [-(x.shape[a] // 2) for a in axes], axes) if axes else x
