"""PYTHON device: the reference interpreter. It evaluates a graph op by op with numpy and is the
executable spec of every op's meaning; compiled devices are tested against it.

`python_rules[op](node, *source_values)` returns the node's value as a numpy array of the node's shape
and dtype; `evaluate_node(node, *source_values)` applies it and casts (and rounds bfloat16) to the node's
dtype, `evaluate(outs, env)` does that over a graph. bfloat16 values are kept in float32 storage and rounded
after each op. Ops with sub-jaxprs evaluate them recursively: custom rules and checkpoints their primal jaxpr,
COND/WHILE/SCAN through `run_loop`, the one statement of what the loops mean (node layouts in
`tinyjx.transforms.control_flow`), which the compiled devices' loop steps (`tinyjx.lower.steps`) share with
compiled sub-programs in place of this interpreter. Collectives exchange values with the other devices of a
running pmap through the runtime that the API layer registers as `tinyjx.array.collective_hook`.
"""
from __future__ import annotations
import ctypes, functools, math
import numpy as np
from tinyjx import dtypes, array, tracing
from tinyjx.uop import UOp, Ops, GroupOp, toposort
from tinyjx.devices import Backend

def address(a: np.ndarray) -> int:
  """Where `a`'s memory starts. Through ctypes' buffer export, a third of the cost of `a.ctypes.data` (which builds
  a helper object each time); read-only and empty arrays, which cannot be exported so, take the long way."""
  try:
    return ctypes.addressof(ctypes.c_char.from_buffer(a))
  except (TypeError, ValueError, BufferError):
    return a.ctypes.data

PAGE, PAGE_FROM = 4096, 1 << 16  # buffers of PAGE_FROM bytes or more start a page (see `host_empty`)
SPARE_FROM = 1 << 18             # buffers of this many bytes or more are reused once no array holds them
SPARE_BYTES = 64 << 20           # at most this much memory waits for reuse (more is freed)
_spare: dict = {}                # raw block size -> blocks no array holds now (`_give_back` puts them there)
_spare_total = [0]               # the bytes of those blocks
_lease_types: dict = {}          # bytes -> the ctypes array type of a lease of that many (`_lease`)
LEASE_TYPES = 1024               # at most this many kept (a program of many sizes makes a new one now and then)

def _give_back(lease) -> None:
  """A lease's last holder is gone: its block waits for the next buffer of its size. Over SPARE_BYTES, the blocks
  of the sizes given back longest ago are freed first (a program that moved on to other shapes leaves none)."""
  try:
    block, size = lease.block, lease.block.nbytes
    if size > SPARE_BYTES: return
    if _spare_total[0] + size > SPARE_BYTES:
      _spare_total[0] = sum(b.nbytes for blocks in _spare.values() for b in blocks)   # (recount: threads may race)
      for old in list(_spare):
        while _spare[old] and _spare_total[0] + size > SPARE_BYTES: _spare_total[0] -= _spare[old].pop(0).nbytes
        if not _spare[old]: del _spare[old]
    blocks = _spare.pop(size, [])
    blocks.append(block)
    _spare[size] = blocks       # (the sizes in the order they were last given back)
    _spare_total[0] += size
  except Exception:       # (at interpreter exit the module's globals may be gone; another thread's change): freed
    pass

def _lease(block: np.ndarray, start: int, nbytes: int):
  """A ctypes view of `nbytes` of `block` from `start` whose end (no array left using it: an array made on it
  and every view of that array hold it) hands `block` back to `_spare`."""
  kind = _lease_types.get(nbytes)
  if kind is None:
    if len(_lease_types) >= LEASE_TYPES: _lease_types.clear()   # (a lease keeps its own type alive)
    kind = _lease_types[nbytes] = type('HostLease', (ctypes.c_char * nbytes,), {'__del__': _give_back})
  lease = kind.from_buffer(block, start)
  lease.block = block
  return lease

def host_empty(shape: tuple, np_dt: np.dtype) -> tuple[np.ndarray, int]:
  """(an uninitialized C-contiguous array, its address) for a buffer kernels write; one of PAGE_FROM bytes or more
  starts a page. Where an output starts relative to the input a kernel reads beside it matters: on the Xeon with
  2 MiB pages (numpy asks for them for large arrays), an output 16 to 192 bytes past its input modulo 1 MiB doubles
  a streaming kernel's time (a layer norm of 4096 x 1024, 0.60 -> 1.47 ms; the core takes each load to wait on the
  store just before it, matching low address bits), while 0, 256 or more, or any distance behind, costs nothing.
  numpy's own allocations land anywhere (the sweep's layer norm got 80 bytes and ran 1.8 ms, 0.63 on a copy of its
  input); page-aligned buffers are 0 or a multiple of 4 KiB apart, never just past each other. A smaller buffer
  is numpy's own (aligning it costs a microsecond a call, a kernel's time at that size).

  A buffer of SPARE_FROM bytes or more reuses the memory of one of its size (in whole pages) that no array holds
  any more. Memory the C library hands out anew is mapped one page at a time as a kernel first writes it: a jitted
  training step whose new parameters and optimizer state came fresh each call took 440 page faults a step (bench W4's
  MLP step called on the same state again and again: 0.5-1 ms of its 10), the same step with reused buffers none."""
  nbytes = math.prod(shape) * np_dt.itemsize
  if nbytes < PAGE_FROM:
    a = np.empty(shape, np_dt)
    return a, address(a)
  size, raw = -(-nbytes // PAGE) * PAGE + PAGE, None
  if nbytes >= SPARE_FROM and (blocks := _spare.get(size)):
    try:
      raw = blocks.pop()
      _spare_total[0] -= size
    except IndexError:    # (another thread took the last one)
      pass
  if raw is None: raw = np.empty(size, np.uint8)
  base = address(raw)
  start = -base % PAGE
  if nbytes < SPARE_FROM: return np.ndarray(shape, np_dt, raw, start), base + start
  return np.ndarray(shape, np_dt, _lease(raw, start, size - PAGE)), base + start

class NumpyBuffer(array.Buffer):
  """A buffer whose memory is a numpy array on the host (PYTHON device; CPU devices reuse it). `data` never changes;
  `address` is where its memory starts, once the CPU device's hit path has looked (0: not C-contiguous). (The CPU
  device's `_output_maker` fills these fields without `__init__`: a new field is set there too.)"""
  address = None
  def __init__(self, device: str, data: np.ndarray, dtype):
    super().__init__(device, data.shape, dtype)
    self.data = data
  def numpy(self) -> np.ndarray: return self.data

def _np(d): return d.np

def _div(n: UOp, a, b):
  if dtypes.is_inexact(n.dtype): return a / b
  return _int_div(a, b, n.dtype)

def _int_div(a, b, dt):
  """C (toward zero) integer division with XLA's edge cases: x/0 is -1 (all ones), INT_MIN/-1 is INT_MIN."""
  safe = np.where(b == 0, 1, b).astype(a.dtype)
  if dtypes.is_unsigned(dt): q = a // safe
  else:
    mag = lambda v: np.where(v < 0, np.uint64(0) - v.astype(np.uint64), v.astype(np.uint64))  # |INT64_MIN| fits
    q = mag(a) // mag(safe)
    q = np.where((a < 0) != (safe < 0), np.uint64(0) - q, q).astype(a.dtype)
  return np.where(b == 0, np.array(-1).astype(a.dtype), q).astype(a.dtype)

def _rem(n: UOp, a, b):
  if dtypes.is_float(n.dtype): return np.fmod(a, b)
  safe = np.where(b == 0, 1, b).astype(a.dtype)
  return np.where(b == 0, a, np.fmod(a, safe)).astype(a.dtype)

def _shift(n: UOp, a, b, left: bool):
  bits = n.dtype.itemsize * 8
  bb = b.astype(np.int64)
  ok = (bb >= 0) & (bb < bits)
  sb = np.where(ok, bb, 0).astype(a.dtype)
  out = np.left_shift(a, sb) if left else np.right_shift(a, sb)
  overflow = np.zeros_like(a) if left or dtypes.is_unsigned(n.dtype) else np.where(a < 0, -1, 0).astype(a.dtype)
  return np.where(ok, out, overflow).astype(a.dtype)

def _pow(n: UOp, a, b):
  if dtypes.is_inexact(n.dtype): return np.power(a, b)
  res = np.power(a, np.maximum(b, 0))
  return np.where(b < 0, np.where(np.abs(a) == 1, np.where(b % 2 == 0, 1, a), 0), res).astype(a.dtype)

def _cast(n: UOp, x):
  to = n.dtype
  if to.kind == 'b': return x != 0
  if x.dtype.kind == 'c' and to.kind != 'c': x = x.real   # complex to a real type keeps the real part, as JAX
  if to.kind in 'iu' and x.dtype.kind == 'f':
    info = np.iinfo(to.np)
    clipped = np.trunc(np.clip(np.nan_to_num(x.astype(np.float64), nan=0.0), info.min, info.max))
    top = clipped >= float(info.max)   # for 64-bit types float(max) is 2**63 or 2**64: saturate explicitly
    return np.where(top, info.max, np.where(top, 0, clipped).astype(to.np)).astype(to.np)
  return x.astype(to.np)

def _complex(n: UOp, re, im):
  """x + iy with the parts set one by one (`x + 1j * y` would turn an infinite y into a NaN real part)."""
  out = np.empty(np.broadcast(re, im).shape, n.dtype.np)
  out.real, out.imag = re, im
  return out

_erf = np.frompyfunc(math.erf, 1, 1)
def _erf_rule(n, x): return np.asarray(_erf(x.astype(np.float64)), dtype=np.float64).astype(x.dtype)

UNARY = {
  Ops.NEG: lambda n, x: np.negative(x), Ops.EXP: lambda n, x: np.exp(x), Ops.LOG: lambda n, x: np.log(x),
  Ops.EXPM1: lambda n, x: np.expm1(x), Ops.LOG1P: lambda n, x: np.log1p(x), Ops.SIN: lambda n, x: np.sin(x),
  Ops.COS: lambda n, x: np.cos(x), Ops.TAN: lambda n, x: np.tan(x), Ops.ASIN: lambda n, x: np.arcsin(x),
  Ops.ACOS: lambda n, x: np.arccos(x), Ops.ATAN: lambda n, x: np.arctan(x), Ops.SINH: lambda n, x: np.sinh(x),
  Ops.COSH: lambda n, x: np.cosh(x), Ops.TANH: lambda n, x: np.tanh(x),
  # a complex -0.0 imaginary part counts as +0.0, as JAX's (numpy's sqrt(-4-0j) is -2j, JAX's 2j)
  Ops.SQRT: lambda n, x: np.sqrt(x + 0.0) if x.dtype.kind == 'c' else np.sqrt(x),
  Ops.RECIP: lambda n, x: np.reciprocal(x) if x.dtype.kind in 'fc' else _int_div(np.ones_like(x), x, n.dtype),
  Ops.ABS: lambda n, x: np.abs(x), Ops.SIGN: lambda n, x: np.sign(x), Ops.FLOOR: lambda n, x: np.floor(x),
  Ops.CEIL: lambda n, x: np.ceil(x), Ops.ROUND: lambda n, x: np.round(x), Ops.TRUNC: lambda n, x: np.trunc(x),
  Ops.ERF: _erf_rule, Ops.NOT: lambda n, x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x),
  Ops.CAST: _cast, Ops.BITCAST: lambda n, x: x.view(n.dtype.np),
}
BINARY = {
  Ops.ADD: lambda n, a, b: a + b, Ops.SUB: lambda n, a, b: a - b, Ops.MUL: lambda n, a, b: a * b,
  Ops.DIV: _div, Ops.REM: _rem, Ops.POW: _pow, Ops.MAX: lambda n, a, b: np.maximum(a, b),
  Ops.MIN: lambda n, a, b: np.minimum(a, b), Ops.ATAN2: lambda n, a, b: np.arctan2(a, b),
  Ops.AND: lambda n, a, b: a & b, Ops.OR: lambda n, a, b: a | b, Ops.XOR: lambda n, a, b: a ^ b,
  Ops.SHL: lambda n, a, b: _shift(n, a, b, True), Ops.SHR: lambda n, a, b: _shift(n, a, b, False),
  Ops.CMPLT: lambda n, a, b: a < b, Ops.CMPLE: lambda n, a, b: a <= b, Ops.CMPEQ: lambda n, a, b: a == b,
  Ops.CMPNE: lambda n, a, b: a != b,
}

def _acc_dtype(d):
  """Accumulate low-precision floats in float32, as XLA does on the CPU."""
  return np.float32 if d in (dtypes.float16, dtypes.bfloat16) else d.np

_IDENTITY = {Ops.ADD: lambda d: 0, Ops.MUL: lambda d: 1,
             Ops.MAX: lambda d: -np.inf if d.kind == 'f' else (False if d.kind == 'b' else np.iinfo(d.np).min),
             Ops.MIN: lambda d: np.inf if d.kind == 'f' else (True if d.kind == 'b' else np.iinfo(d.np).max)}
_UFUNC = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum, Ops.MIN: np.minimum}

def _sum_dtype(op: Ops, d):
  """What a reduction or running total of `op` accumulates in: float32 sums in float64, as the compiled C kernels
  do (render.py `wide_sums`), so a sum is as accurate along any axis and length as a pairwise one (numpy's own
  sum is pairwise only along a contiguous axis: a column sum of 1e6 float32 rows would be off by 1e-4)."""
  if op is Ops.ADD and d is dtypes.float32: return np.float64
  if op is Ops.ADD and d is dtypes.complex64: return np.complex128   # its parts are float32 sums
  return _acc_dtype(d)

def reduce_value(op: Ops, x: np.ndarray, axes: tuple, dt) -> np.ndarray:
  """A REDUCE of numpy value `x` over `axes` with ALU `op` (NaN propagates through max and min)."""
  out = _UFUNC[op].reduce(x, axis=axes, dtype=_sum_dtype(op, dt), initial=_IDENTITY[op](dt))
  return np.asarray(out).astype(dt.np)

def _cumulative(n, x):
  op, axis, reverse = n.arg
  if reverse: x = np.flip(x, axis)
  acc = _sum_dtype(op, n.dtype)
  out = _UFUNC[op].accumulate(x, axis=axis, dtype=acc).astype(n.dtype.np) if x.size else x
  return np.flip(out, axis) if reverse else out

def dot_general_value(a: np.ndarray, b: np.ndarray, arg, dt) -> np.ndarray:
  """lax.dot_general on numpy values: output dims are batch, then lhs free, then rhs free."""
  (lc, rc), (lb, rb) = arg
  lf = [i for i in range(a.ndim) if i not in lc and i not in lb]
  rf = [i for i in range(b.ndim) if i not in rc and i not in rb]
  acc = _acc_dtype(dt)
  a2 = np.transpose(a, list(lb) + lf + list(lc)).astype(acc)
  b2 = np.transpose(b, list(rb) + list(rc) + rf).astype(acc)
  bs, fa, fb = [a.shape[i] for i in lb], [a.shape[i] for i in lf], [b.shape[i] for i in rf]
  k = math.prod(a.shape[i] for i in lc)
  out = np.matmul(a2.reshape(bs + [math.prod(fa), k]), b2.reshape(bs + [k, math.prod(fb)]))
  return out.reshape(bs + fa + fb).astype(dt.np)

def _gather(n, x, idx):
  if x.shape[0] == 0: return np.zeros(n.shape, n.dtype.np)
  return np.take(x, np.clip(idx, 0, x.shape[0] - 1), axis=0)

_SCATTER_UFUNC = {'add': np.add, 'mul': np.multiply, 'min': np.minimum, 'max': np.maximum}
def _scatter(n, x, idx, upd):
  out = np.array(x, copy=True)
  ok = (idx >= 0) & (idx < x.shape[0])
  i, u = idx[ok], upd[ok]
  if n.arg == 'set': out[i] = u
  else: _SCATTER_UFUNC[n.arg].at(out, i, u)
  return out

def _argsort(n, x):
  axis, descending = n.arg
  if not descending: return np.argsort(x, axis=axis, kind='stable').astype(np.int32)
  size = x.shape[axis]
  asc = np.argsort(np.flip(x, axis), axis=axis, kind='stable')
  return (size - 1 - np.flip(asc, axis)).astype(np.int32)

def lu_factor(n, a: np.ndarray) -> tuple:
  """LU (lu, pivots, permutation) of float matrices (..., m, n), the reference for the CPU's `tjx_lu`: step j takes
  the first row r >= j of largest |a[r, j]| (the first NaN, if any), swaps it with row j, divides the entries below
  the pivot by it (by 1 where it is 0: a zero column is left as is) and subtracts their products with the pivot row
  from the rows below, right of column j."""
  a = np.array(a, copy=True, order='C')
  m, cols = a.shape[-2:]
  k, flat = min(m, cols), a.reshape((math.prod(a.shape[:-2]), m, cols))
  piv = np.zeros((flat.shape[0], k), np.int32)
  perm = np.tile(np.arange(m, dtype=np.int32), (flat.shape[0], 1))
  one = a.dtype.type(1)
  with np.errstate(all='ignore'):
    for b, x in enumerate(flat):
      for j in range(k):
        mag = np.abs(x[j:, j])
        nan = np.isnan(mag)
        p = j + int(np.argmax(nan) if nan.any() else np.argmax(mag))
        if p != j:
          x[[j, p]], perm[b, [j, p]] = x[[p, j]], perm[b, [p, j]]
        piv[b, j] = p
        d = x[j, j]
        x[j + 1:, j] /= d if d != 0 else one
        x[j + 1:, j + 1:] -= x[j + 1:, j, None] * x[j, None, j + 1:]
  return a, piv.reshape(a.shape[:-2] + (k,)), perm.reshape(a.shape[:-2] + (m,))

def lower_solve(n, l: np.ndarray, b: np.ndarray) -> np.ndarray:
  """X with tril(l) X = b (n.arg: the diagonal is taken as ones), the reference for the CPU's `tjx_trsm`: row i is
  b[i] less l[i, t] times row t of X for t = 0, 1, ... in order, then divided by l[i, i]."""
  x = np.empty(np.broadcast_shapes(l.shape, b.shape[:-2] + l.shape[-2:])[:-2] + b.shape[-2:], b.dtype)
  with np.errstate(all='ignore'):
    for i in range(l.shape[-1]):
      v = b[..., i, :].copy()
      for t in range(i): v = v - l[..., i, t, None] * x[..., t, :]
      x[..., i, :] = v if n.arg else v / l[..., i, i, None]
  return x

@functools.lru_cache(maxsize=64)
def fft_twiddles(n: int, dt) -> np.ndarray:
  """exp(-2 pi i k / n) for k < n as (2, n) planes of `dt` (real parts, imaginary parts): computed in float64 and
  rounded once, parts that are zero exactly (quarter turns) made exactly zero. Read-only: shared by every call."""
  w = np.exp(-2j * np.pi * np.arange(n) / n)
  w.real[np.abs(w.real) < 1e-12], w.imag[np.abs(w.imag) < 1e-12] = 0, 0
  planes = np.ascontiguousarray(np.stack([w.real, w.imag]).astype(dt))
  planes.flags.writeable = False
  return planes

FFT_PRIMES = (2, 3, 5, 7)    # the prime factors of the lengths an FFT node takes (tjx_fft's radices)

def fft_radices(n: int) -> list | None:
  """The radices of tjx_fft's Stockham stages for an n-point transform, in order: the power of two in n as radix 8s
  and one 4 or 2 where its log2 is not a multiple of 3, then each odd prime factor, smallest first; None where n has
  a prime factor past FFT_PRIMES (the C's `tjx_fft_radices`, the same)."""
  if n < 1: return None
  bits = (n & -n).bit_length() - 1
  radices, n = [8] * (bits // 3) + ([1 << bits % 3] if bits % 3 else []), n >> bits
  for p in FFT_PRIMES[1:]:
    while n % p == 0: radices, n = radices + [p], n // p
  return radices if n == 1 else None

def fft_packed(n, x: np.ndarray) -> np.ndarray:
  """The unnormalized DFT along axis n.arg[0] (counted from the end) of complex vectors whose length's prime factors
  are FFT_PRIMES: x complex, or (a compiled program's FFT step) float (..., 2), the parts interleaved as complex
  values are in memory; n.arg[1]: the inverse, which swaps the parts on the way in and out (z -> i conj z; DFT(i
  conj z) = i conj(IDFT z)); n.arg[2]: a factor on the results (a norm). The reference for the CPU's `tjx_fft`, the
  same operations in the same order: Stockham stages (decimation in frequency, the output in order) of the radices
  of `fft_radices`; the twiddles of p = 0 (ones) skipped."""
  axis, inverse, scale = n.arg
  if x.dtype.kind == 'c':
    parts = np.ascontiguousarray(x).view(x.real.dtype).reshape(x.shape + (2,))
    return fft_packed(n, parts).view(x.dtype).reshape(x.shape)
  shape = x.shape[:-1]
  length, ax = shape[axis], len(shape) + axis
  outer, inner = math.prod(shape[:ax]), math.prod(shape[ax + 1:])
  tw, radices = fft_twiddles(length, x.dtype), fft_radices(length)
  if radices is None: raise ValueError(f"fft node: a length of {length} has a prime factor past {FFT_PRIMES[-1]}")
  re, im = x[..., 0].reshape(outer, length, inner), x[..., 1].reshape(outer, length, inner)
  if inverse: re, im = im, re
  size, s = length, 1
  with np.errstate(all='ignore'):
    for radix in radices:
      m, step = size // radix, length // size
      split = [v.reshape(outer, radix, m, s, inner) for v in (re, im)]
      xs = [(split[0][:, k], split[1][:, k]) for k in range(radix)]
      if radix % 2:
        turns = np.arange(radix) * (length // radix)          # exp(-2 pi i j / radix) for j < radix
        outs = _fft_odd(xs, tw[0, turns], -tw[1, turns])
      else:
        outs = _fft_butterfly(xs, tw[0, length // 8] if length % 8 == 0 else None)
      yr, yi = np.empty((outer, m, radix, s, inner), x.dtype), np.empty((outer, m, radix, s, inner), x.dtype)
      for r, (tr, ti) in enumerate(outs):
        yr[:, :, r], yi[:, :, r] = tr, ti
        if r == 0 or m == 1: continue
        wr, wi = tw[:, r * step * np.arange(1, m)].reshape(2, -1, 1, 1)
        yr[:, 1:, r], yi[:, 1:, r] = wr * tr[:, 1:] - wi * ti[:, 1:], wr * ti[:, 1:] + wi * tr[:, 1:]
      re, im = yr.reshape(outer, length, inner), yi.reshape(outer, length, inner)
      size, s = m, s * radix
  if inverse: re, im = im, re
  if scale != 1: re, im = re * x.dtype.type(scale), im * x.dtype.type(scale)
  return np.stack([re.reshape(shape), im.reshape(shape)], -1)

def _dft4(u: list) -> list:
  """The radix-4 DFT of four (re, im) pairs, as tjx_fft's TJX_DFT4."""
  (u0r, u0i), (u1r, u1i), (u2r, u2i), (u3r, u3i) = u
  apcr, apci, amcr, amci = u0r + u2r, u0i + u2i, u0r - u2r, u0i - u2i
  bpdr, bpdi, bmdr, bmdi = u1r + u3r, u1i + u3i, u1r - u3r, u1i - u3i
  return [(apcr + bpdr, apci + bpdi), (amcr + bmdi, amci - bmdr), (apcr - bpdr, apci - bpdi),
          (amcr - bmdi, amci + bmdr)]

def _fft_butterfly(x: list, c8) -> list:
  """The DFT of 2, 4 or 8 (re, im) pairs, as tjx_fft's butterflies (radix 8: radix 2 with the eighth roots of unity
  c8 (1 - i), -i, -c8 (1 + i), then two radix-4 DFTs)."""
  if len(x) == 2: return [(x[0][0] + x[1][0], x[0][1] + x[1][1]), (x[0][0] - x[1][0], x[0][1] - x[1][1])]
  if len(x) == 4: return _dft4(x)
  a = [(x[k][0] + x[k + 4][0], x[k][1] + x[k + 4][1]) for k in range(4)]
  (b0r, b0i), (z1r, z1i), (z2r, z2i), (z3r, z3i) = [(x[k][0] - x[k + 4][0], x[k][1] - x[k + 4][1]) for k in range(4)]
  b = [(b0r, b0i), (c8 * (z1r + z1i), c8 * (z1i - z1r)), (z2i, -z2r), (c8 * (z3i - z3r), -(c8 * (z3r + z3i)))]
  even, odd = _dft4(a), _dft4(b)
  return [even[0], odd[0], even[1], odd[1], even[2], odd[2], even[3], odd[3]]

def _fft_odd(x: list, cs: np.ndarray, sn: np.ndarray) -> list:
  """The DFT of an odd prime number R of (re, im) pairs, as tjx_fft's TJX_BFLY_ODD: with the pairs' sums t_k = x_k +
  x_(R-k) and differences d_k for k = 1..R/2, output 0 is x_0 + the sums, outputs r and R - r are A -+ i B, A = x_0
  + sum_k cs[r k mod R] t_k, B = sum_k sn[r k mod R] d_k (cs, sn: cos and sin of 2 pi j / R)."""
  radix, half = len(x), len(x) // 2
  sums = [(x[k][0] + x[radix - k][0], x[k][1] + x[radix - k][1]) for k in range(1, half + 1)]
  diffs = [(x[k][0] - x[radix - k][0], x[k][1] - x[radix - k][1]) for k in range(1, half + 1)]
  y0r, y0i = x[0]
  for tr, ti in sums: y0r, y0i = y0r + tr, y0i + ti
  outs = [(y0r, y0i)] + [None] * (radix - 1)
  for r in range(1, half + 1):
    ar, ai = x[0][0] + cs[r] * sums[0][0], x[0][1] + cs[r] * sums[0][1]
    br, bi = sn[r] * diffs[0][0], sn[r] * diffs[0][1]
    for k in range(2, half + 1):
      j = r * k % radix
      ar, ai = ar + cs[j] * sums[k - 1][0], ai + cs[j] * sums[k - 1][1]
      br, bi = br + sn[j] * diffs[k - 1][0], bi + sn[j] * diffs[k - 1][1]
    outs[r], outs[radix - r] = (ar + bi, ai - br), (ar - bi, ai + br)
  return outs

def _iota(n):
  shape, axis = n.arg
  r = np.arange(shape[axis]).astype(n.dtype.np)
  return np.broadcast_to(r.reshape([-1 if i == axis else 1 for i in range(len(shape))]), shape)

def _pad(n, x):
  return np.pad(x, n.arg) if x.dtype.kind != 'b' else np.pad(x, n.arg, constant_values=False)

def _collective(n, *vals):
  """A collective is this device's share of an exchange with the other devices of a running pmap; that runtime
  lives above this layer (tinyjx.collectives) and registers itself as `array.collective_hook`."""
  if array.collective_hook is None:
    raise RuntimeError(f"{n.op.name.lower()} over axis {n.arg[0]!r} can only run inside pmap (import tinyjx)")
  return array.collective_hook(n, vals)

# ---------------------------------------------------------------- control flow: the one loop interpreter

def run_cond(a, call, args: list) -> tuple:
  """COND (index, *operands, *consts): branch `index` (clamped into range) on the rest."""
  i = min(max(int(args[0]), 0), len(a.jaxprs) - 1)
  return tuple(call(i, args[1:]))

def run_while(a, call, args: list) -> tuple:
  """WHILE (*carry, *cond_consts, *body_consts): `carry = body(carry)` while `cond(carry)`."""
  nc, ncc = a.n_carry, a.n_cond_consts
  carry, cconsts, bconsts = args[:nc], args[nc:nc + ncc], args[nc + ncc:]
  while bool(call(0, carry + cconsts)[0]): carry = list(call(1, carry + bconsts))
  return tuple(carry)

def run_scan(a, call, args: list) -> tuple:
  """SCAN (*carry, *xs, *consts): the body on each slice of xs in order (or reversed), threading the carry;
  returns the final carry and the ys stacked in xs' order."""
  nc, nx = a.n_carry, a.n_xs
  carry, xs, consts = args[:nc], args[nc:nc + nx], args[nc + nx:]
  ys = [np.empty(s, d.np) for s, d in a.out_avals[nc:]]
  for t in (reversed(range(a.length)) if a.reverse else range(a.length)):
    out = call(0, carry + [x[t] for x in xs] + consts)
    carry = list(out[:nc])
    for buf, y in zip(ys, out[nc:]): buf[t] = y
  return tuple(carry) + tuple(ys)

LOOPS = {Ops.COND: run_cond, Ops.WHILE: run_while, Ops.SCAN: run_scan}

def run_loop(node: UOp, call, args) -> tuple:
  """The outputs of a COND, WHILE or SCAN `node` from its sources' values `args`; `call(i, values) -> values`
  evaluates sub-jaxpr `i` of `node.arg.jaxprs` (numpy arrays in and out, one per param and output). The PYTHON
  device passes its interpreter (`Program`), a compiled device its compiled sub-programs.

  >>> import tinyjx
  >>> from tinyjx import lax
  >>> loop = tinyjx.make_jaxpr(lambda n: lax.while_loop(lambda i: i < n, lambda i: i + 1, 0))(5).outs[0].src[0]
  >>> [int(v) for v in run_loop(loop, lambda i, vals: program(loop.arg.jaxprs[i])(*vals), [0, 5])]
  [5]
  """
  return LOOPS[node.op](node.arg, call, list(args))

def _loop(n, *vals): return run_loop(n, lambda i, args: program(n.arg.jaxprs[i])(*args), vals)

python_rules: dict = {
  **{op: _collective for op in GroupOp.Collective},
  **{op: _loop for op in LOOPS},
  **{op: (lambda f: lambda n, x: f(n, x))(f) for op, f in UNARY.items()},
  **BINARY,
  Ops.WHERE: lambda n, c, a, b: np.where(c, a, b),
  Ops.REAL: lambda n, z: np.real(z), Ops.IMAG: lambda n, z: np.imag(z), Ops.COMPLEX: _complex,
  Ops.TAG: lambda n, x: x,
  Ops.REDUCE: lambda n, x: reduce_value(n.arg[0], x, n.arg[1], n.dtype),
  Ops.CUMULATIVE: _cumulative,
  Ops.RESHAPE: lambda n, x: x.reshape(n.arg), Ops.PERMUTE: lambda n, x: np.transpose(x, n.arg),
  Ops.EXPAND: lambda n, x: np.broadcast_to(x, n.arg), Ops.PAD: _pad,
  Ops.SHRINK: lambda n, x: x[tuple(slice(a, b) for a, b in n.arg)], Ops.FLIP: lambda n, x: np.flip(x, n.arg),
  Ops.DOT_GENERAL: lambda n, a, b: dot_general_value(a, b, n.arg, n.dtype),
  Ops.GATHER: _gather, Ops.SCATTER: _scatter, Ops.ARGSORT: _argsort, Ops.LU: lu_factor,
  Ops.TRIANGULAR_SOLVE: lower_solve, Ops.FFT: fft_packed,
  Ops.GETITEM: lambda n, tup: tup[n.arg],
  Ops.STOP_GRADIENT: lambda n, x: x,   # an identity on values
  Ops.DEBUG_CALLBACK: lambda n, *vals: (n.arg(list(vals)), np.bool_(False))[1],   # the record calls the host
  **{op: (lambda n, *vals: _call(n.arg.jaxpr, vals)) for op in (Ops.CUSTOM_JVP, Ops.CUSTOM_VJP, Ops.CHECKPOINT)},
}

def _call(jaxpr, vals) -> tuple:
  """Custom-rule and checkpoint nodes evaluate their primal sub-jaxpr (`arg.jaxpr`, one param per source)."""
  return tuple(evaluate(list(jaxpr.outs), dict(zip(jaxpr.params, vals))))

def _leaf(n: UOp, env: dict):
  if n.op is Ops.BUFFER: return array.buffers[n.arg[0]].numpy()
  if n.op is Ops.CONST: return np.full(n.arg[1], n.arg[0], dtype=n.dtype.np)
  if n.op is Ops.IOTA: return _iota(n)
  raise KeyError(f"PARAM {n.arg[0]} has no value bound (evaluating a jaxpr needs a value for every input)")

def evaluate(outs, env: dict | None = None, watch=None) -> list:
  """Values (numpy arrays, or tuples for multi-output nodes) of `outs`; `env` maps PARAM nodes to values.
  `watch(node, value)`, if given, sees each node's value as soon as it is computed (the NaN checker's hook)."""
  vals: dict = dict(env or {})
  with np.errstate(all='ignore'):
    for n in toposort(outs):
      if n in vals: continue
      if not n.src and n.op not in (Ops.AXIS_INDEX, Ops.DEBUG_CALLBACK): vals[n] = _leaf(n, env or {}); continue
      vals[n] = evaluate_node(n, *[vals[s] for s in n.src])
      if watch is not None: watch(n, vals[n])
  return [vals[o] for o in outs]

def evaluate_node(n: UOp, *vals):
  """The value of node `n` given its sources' values: its rule's result cast to `n`'s dtype (bfloat16 rounded),
  or a tuple for a multi-output node. Callers silence numpy's floating-point warnings around it
  (`np.errstate(all='ignore')`), as `evaluate` does: IEEE results (inf, nan) are the values wanted.

  >>> x = UOp.const(2.0, dtypes.float32, ())
  >>> evaluate_node(UOp(Ops.NEG, dtypes.float32, (x,)), np.float32(2.0))
  array(-2., dtype=float32)
  """
  rule = python_rules.get(n.op)
  if rule is None: raise NotImplementedError(f"the PYTHON device has no rule for {n.op.name}")
  return _finish(n, rule(n, *vals))

def _finish(n: UOp, out):
  if n.op in GroupOp.MultiOutput or isinstance(out, tuple): return out
  out = np.asarray(out)
  if out.dtype != n.dtype.np: out = out.astype(n.dtype.np)
  if n.dtype is dtypes.bfloat16 and n.op not in GroupOp.Movement: out = dtypes.round_bf16(out)
  return out

class Program:
  """A sub-jaxpr prepared for repeated evaluation (a loop body, a branch): sorted once, the part that does not
  depend on its params computed once."""
  def __init__(self, jaxpr):
    self.params, self.outs = jaxpr.params, list(jaxpr.outs)
    own, dep = set(jaxpr.params), {}
    order = toposort(list(jaxpr.roots))
    # an effect runs on every call, so it is a step even when it reads nothing of the params
    for n in order: dep[n] = n in own or tracing.has_effects(n) or any(dep[s] for s in n.src)
    self.steps = [n for n in order if dep[n] and n not in own]
    roots = list(dict.fromkeys([s for n in self.steps for s in n.src if not dep[s]] +
                               [o for o in self.outs if not dep[o]]))
    self.consts = dict(zip(roots, evaluate(roots)))

  def __call__(self, *args) -> list:
    vals = dict(self.consts)
    vals.update(zip(self.params, args))
    with np.errstate(all='ignore'):
      for n in self.steps: vals[n] = evaluate_node(n, *[vals[s] for s in n.src])
    return [vals[o] for o in self.outs]

_programs: dict = {}

def program(jaxpr) -> Program:
  """The prepared Program of a sub-jaxpr, kept per jaxpr object (sub-jaxprs live as long as their node)."""
  p = _programs.get(id(jaxpr))
  if p is None or p[0] is not jaxpr:
    if len(_programs) > 512: _programs.clear()
    p = _programs[id(jaxpr)] = (jaxpr, Program(jaxpr))
  return p[1]

class PythonDevice(Backend):
  """The reference interpreter as a device: buffers are numpy arrays, graphs run op by op."""
  kind = "PYTHON"
  def run_graph(self, roots):
    return [NumpyBuffer(self.name, np.ascontiguousarray(v).reshape(r.shape), r.dtype) for v, r in zip(evaluate(roots), roots)]
  def from_numpy(self, data: np.ndarray, dtype) -> NumpyBuffer: return NumpyBuffer(self.name, data, dtype)
  def compile_jaxpr(self, jaxpr) -> 'PythonExecutable': return PythonExecutable(jaxpr, self.name)

class PythonExecutable:
  """The PYTHON device's Executable (what jit caches): it interprets the jaxpr with `evaluate` on every run.

  `run(buffers)` binds one Buffer per jaxpr param and returns fresh NumpyBuffers (outputs are copied, so no
  output aliases an input, a closed-over constant or an earlier call's output). `kernels` lists the
  equations the interpreter steps through; `str(exe)` shows the jaxpr.
  """
  def __init__(self, jaxpr, device: str):
    self.jaxpr, self.device = jaxpr, device
    self.kernels = [line.strip() for line in str(jaxpr).splitlines()[1:-1]]
  def run(self, bufs: list) -> list[NumpyBuffer]:
    if len(bufs) != len(self.jaxpr.params):
      raise TypeError(f"{self.jaxpr.name} takes {len(self.jaxpr.params)} input buffers, got {len(bufs)}")
    vals = evaluate(list(self.jaxpr.roots), {p: b.numpy().reshape(p.shape) for p, b in zip(self.jaxpr.params, bufs)})
    vals = vals[len(self.jaxpr.effects):]   # effects ran first, in program order
    return [NumpyBuffer(self.device, np.array(v, order='C').reshape(o.shape), o.dtype)
            for v, o in zip(vals, self.jaxpr.outs)]
  def __str__(self): return f"PYTHON executable ({len(self.kernels)} interpreted equations):\n{self.jaxpr}"
  __repr__ = __str__

DEVICE_CLASS = PythonDevice
