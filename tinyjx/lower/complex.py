"""complex: compiled devices run complex programs as programs on pairs of floats.

A complex value z becomes its two float parts (re, im), each a UOp of the part type (float32 for complex64), and
every op on complex operands becomes the ops of its textbook formula on the parts: a product is four multiplies and
two adds, exp(z) is exp(re) (cos im, sin im), a complex dot_general is two real ones (`dot`). What comes out has no
complex node left, so fusion, the matmul tiling, vectorization and every renderer (C, OpenCL, CUDA) apply as they
are; no dialect needs a complex type of its own (OpenCL C has none). In memory a complex array stays as numpy and
C99 store it, the parts interleaved: a complex input of shape S is read as a float array of shape S + (2,) (a view
on the CPU, a copy through the host on a device whose memory is not the host's), and a complex output is written
the same way, its parts side by side (`packed`: the kernel that computes them stores both, a pair at a time), so
`SplitExecutable` hands the float array over as the complex result's buffer: no copy, no pass on the host.

Contract: `split(params, roots, device)` maps a jaxpr whose params and roots may be complex to one with none (a complex
param of shape S becomes a float one of shape S + (2,), a complex root one float root of shape S + (2,), its real
and imaginary parts interleaved). Ops a complex operand can reach are those of
`GroupOp.AcceptsComplex`, the movement ops, sums, dot_general, gather, scatter (add, set) and the linear collectives;
a COND, WHILE or SCAN takes and gives its complex values packed the same way, its sub-jaxprs wrapped to unpack them
(each is compiled, and split, as a program of its own). Anything else on complex operands raises
`ComplexLoweringError` (a `NotImplementedError`) naming the op, the dtype, the device and the fix.
"""
from __future__ import annotations
import dataclasses
import numpy as np
from tinyjx import dtypes, array
from tinyjx.uop import UOp, Ops, GroupOp, toposort, substitute

def has_complex(roots) -> bool:
  """Whether any node of the graphs `roots` (or an output of a multi-output node) is complex."""
  return any(dtypes.is_complex(n.dtype) for n in toposort(list(roots)))

# ---------------------------------------------------------------- the formulas, on (re, im) pairs of float UOps

def alu(op: Ops, *srcs: UOp) -> UOp:
  return UOp(op, dtypes.bool_ if op in GroupOp.Comparison else srcs[-1].dtype, srcs)

def const(v, like: UOp) -> UOp: return UOp.const(v, like.dtype, like.shape)

def mul(a, b) -> tuple:
  (ar, ai), (br, bi) = a, b
  re = alu(Ops.SUB, alu(Ops.MUL, ar, br), alu(Ops.MUL, ai, bi))
  return re, alu(Ops.ADD, alu(Ops.MUL, ar, bi), alu(Ops.MUL, ai, br))

def div(a, b) -> tuple:
  """(a / b) by Smith's rule: the larger part of b divides first, so |b|^2 never overflows or underflows."""
  (ar, ai), (br, bi) = a, b
  wide = alu(Ops.CMPLE, alu(Ops.ABS, bi), alu(Ops.ABS, br))          # |br| >= |bi|
  big, small = alu(Ops.WHERE, wide, br, bi), alu(Ops.WHERE, wide, bi, br)
  safe = alu(Ops.WHERE, alu(Ops.CMPEQ, big, const(0, big)), const(1, big), big)
  r = alu(Ops.DIV, small, safe)                                       # bi/br (or br/bi)
  d = alu(Ops.ADD, big, alu(Ops.MUL, r, small))
  # wide: ((ar + ai r) + i(ai - ar r)) / d ; else: ((ar r + ai) + i(ai r - ar)) / d
  re = alu(Ops.WHERE, wide, alu(Ops.ADD, ar, alu(Ops.MUL, ai, r)), alu(Ops.ADD, alu(Ops.MUL, ar, r), ai))
  im = alu(Ops.WHERE, wide, alu(Ops.SUB, ai, alu(Ops.MUL, ar, r)), alu(Ops.SUB, alu(Ops.MUL, ai, r), ar))
  return alu(Ops.DIV, re, d), alu(Ops.DIV, im, d)

def modulus(re: UOp, im: UOp) -> UOp:
  """|z| scaled by its larger part, so re^2 + im^2 neither overflows (|z| > 1.8e19 in float32) nor underflows."""
  m = alu(Ops.MAX, alu(Ops.ABS, re), alu(Ops.ABS, im))
  zero = alu(Ops.CMPEQ, m, const(0, m))
  safe = alu(Ops.WHERE, zero, const(1, m), m)
  x, y = alu(Ops.DIV, re, safe), alu(Ops.DIV, im, safe)
  return alu(Ops.MUL, m, alu(Ops.SQRT, alu(Ops.ADD, alu(Ops.MUL, x, x), alu(Ops.MUL, y, y))))

def exp(z) -> tuple:
  re, im = z
  e = alu(Ops.EXP, re)
  return alu(Ops.MUL, e, alu(Ops.COS, im)), alu(Ops.MUL, e, alu(Ops.SIN, im))

def log(z) -> tuple:
  re, im = z
  return alu(Ops.LOG, modulus(re, im)), alu(Ops.ATAN2, im, re)

def sqrt(z) -> tuple:
  """The principal root: t = sqrt((|z| + |re|) / 2) is one part, |im| / 2t the other, the sign of im on the imaginary
  one (numpy's branch cut, but -0.0 counts as +0.0)."""
  re, im = z
  t = alu(Ops.SQRT, alu(Ops.MUL, const(0.5, re), alu(Ops.ADD, modulus(re, im), alu(Ops.ABS, re))))
  zero = alu(Ops.CMPEQ, t, const(0, t))
  other = alu(Ops.WHERE, zero, const(0, t), alu(Ops.DIV, alu(Ops.ABS, im), alu(Ops.MUL, const(2, t), t)))
  right = alu(Ops.CMPLE, const(0, re), re)
  negative_im = alu(Ops.CMPLT, im, const(0, im))
  signed = lambda v: alu(Ops.WHERE, negative_im, alu(Ops.NEG, v), v)
  return alu(Ops.WHERE, right, t, other), signed(alu(Ops.WHERE, right, other, t))

def sin(z) -> tuple:
  re, im = z
  return alu(Ops.MUL, alu(Ops.SIN, re), alu(Ops.COSH, im)), alu(Ops.MUL, alu(Ops.COS, re), alu(Ops.SINH, im))

def cos(z) -> tuple:
  re, im = z
  im_out = alu(Ops.NEG, alu(Ops.MUL, alu(Ops.SIN, re), alu(Ops.SINH, im)))
  return alu(Ops.MUL, alu(Ops.COS, re), alu(Ops.COSH, im)), im_out

def pairwise(op: Ops):
  """A linear op (add, a view, a sum) applies to each part alone."""
  return lambda n, *srcs: tuple(UOp(op, p[0].dtype if op is Ops.WHERE else p.dtype, q, n.arg)
                                for p, q in _parts_of(op, srcs))

def _parts_of(op, srcs):
  """For each part (re, then im), the part's sources: complex sources give that part, real ones themselves."""
  for k in (0, 1):
    q = tuple(s[k] if isinstance(s, tuple) else s for s in srcs)
    yield (q[1:] if op is Ops.WHERE else q[0]), q

def dot(n, a, b) -> tuple:
  """A complex dot_general as two real ones, the parts joined along the first contracting axis:
  re = [ar, ai] . [br, -bi] and im = [ar, ai] . [bi, br], each one sum of products, so each is one matmul (the
  textbook four products, subtracted and added, fused into one kernel that no matmul plan fits). Without a
  contracting axis (an outer product), the four products."""
  (ar, ai), (br, bi) = a, b
  (lc, rc), _ = n.arg
  d = lambda x, y: UOp(Ops.DOT_GENERAL, x.dtype, (x, y), n.arg)
  if not lc: return alu(Ops.SUB, d(ar, br), d(ai, bi)), alu(Ops.ADD, d(ar, bi), d(ai, br))
  x = ar.concat(ai, lc[0])
  return d(x, br.concat(alu(Ops.NEG, bi), rc[0])), d(x, bi.concat(br, rc[0]))

def cast_to_complex(n, x) -> tuple:
  f = dtypes.real_dtype(n.dtype)
  if isinstance(x, tuple): return x[0].cast(f), x[1].cast(f)
  return x.cast(f), UOp.const(0, f, n.shape)

def const_parts(n) -> tuple:
  f, (v, shape) = dtypes.real_dtype(n.dtype), n.arg
  return UOp.const(v.real, f, shape), UOp.const(v.imag, f, shape)

def scatter(n, x, idx, upd) -> tuple:
  if n.arg not in ('add', 'set'): _refuse(n, f"scatter mode {n.arg!r}")
  return tuple(UOp(Ops.SCATTER, x[k].dtype, (x[k], idx, upd[k]), n.arg) for k in (0, 1))

# complex-valued nodes: node, sources (a pair for a complex source, the rebuilt node for a real one) -> (re, im)
COMPLEX_RULES = {
  Ops.CONST: lambda n: const_parts(n),
  Ops.NEG: lambda n, z: (alu(Ops.NEG, z[0]), alu(Ops.NEG, z[1])),
  Ops.ADD: pairwise(Ops.ADD), Ops.SUB: pairwise(Ops.SUB), Ops.WHERE: pairwise(Ops.WHERE),
  Ops.MUL: lambda n, a, b: mul(a, b), Ops.DIV: lambda n, a, b: div(a, b),
  Ops.EXP: lambda n, z: exp(z), Ops.LOG: lambda n, z: log(z), Ops.SQRT: lambda n, z: sqrt(z),
  Ops.SIN: lambda n, z: sin(z), Ops.COS: lambda n, z: cos(z),
  Ops.COMPLEX: lambda n, x, y: (x.cast(dtypes.real_dtype(n.dtype)), y.cast(dtypes.real_dtype(n.dtype))),
  Ops.CAST: cast_to_complex,
  **{op: pairwise(op) for op in GroupOp.Movement | {Ops.GATHER, Ops.STOP_GRADIENT, Ops.TAG}},
  Ops.REDUCE: lambda n, z: sums(Ops.REDUCE, n, z, "a product reduction (jnp.prod multiplies pairs instead)"),
  Ops.CUMULATIVE: lambda n, z: sums(Ops.CUMULATIVE, n, z, "a running product (cumprod)"),
  Ops.DOT_GENERAL: dot, Ops.SCATTER: scatter,
  # the linear collectives exchange each part alone (pmax and pmin have no meaning on complex values)
  **{op: pairwise(op) for op in (Ops.PSUM, Ops.ALL_GATHER, Ops.PPERMUTE, Ops.ALL_TO_ALL, Ops.PSUM_SCATTER)},
  Ops.GETITEM: lambda n, node: as_parts(n, UOp(Ops.GETITEM, dtypes.real_dtype(n.dtype), (node,), n.arg)),
  # an FFT step reads and writes the parts interleaved, as complex values lie in memory
  Ops.FFT: lambda n, z: as_parts(n, UOp(Ops.FFT, dtypes.real_dtype(n.dtype), (packed(z),), n.arg)),
}

def cast_from_complex(n, z) -> UOp:
  re, im = z
  if dtypes.is_bool(n.dtype): return alu(Ops.OR, alu(Ops.CMPNE, re, const(0, re)), alu(Ops.CMPNE, im, const(0, im)))
  return re.cast(n.dtype)

# real-valued nodes with a complex source
FROM_COMPLEX_RULES = {
  Ops.REAL: lambda n, z: z[0], Ops.IMAG: lambda n, z: z[1], Ops.CAST: cast_from_complex,
  Ops.CMPEQ: lambda n, a, b: alu(Ops.AND, alu(Ops.CMPEQ, a[0], b[0]), alu(Ops.CMPEQ, a[1], b[1])),
  Ops.CMPNE: lambda n, a, b: alu(Ops.OR, alu(Ops.CMPNE, a[0], b[0]), alu(Ops.CMPNE, a[1], b[1])),
}

class ComplexLoweringError(NotImplementedError):
  pass

def unsplittable(n: UOp, what: str | None = None, device: str = "a compiled device") -> ComplexLoweringError:
  dt = next((d for d in [n.dtype] + [s.dtype for s in n.src] if dtypes.is_complex(d)), n.dtype)
  return ComplexLoweringError(
    f"{what or n.op.name.lower()} with {dt} operands does not run on {device} yet: compiled programs carry complex "
    "values as pairs of floats, and this op has no rule for them. Run the program on the reference device "
    "(TINYJX_DEVICE=PYTHON, or `with tinyjx.Context(TINYJX_DEVICE='PYTHON'):`), or carry the real and imaginary "
    "parts (jnp.real, jnp.imag) through it as float arrays")

class NoRule(Exception):
  """A rule's way to say it cannot split this node (`split` turns it into the error naming the device)."""

def _refuse(n, what):
  raise NoRule(what)

def sums(op: Ops, n: UOp, z: tuple, other: str) -> tuple:
  """A sum (reduction or running) of complex values is the sums of the parts; a product is not."""
  if n.arg[0] is not Ops.ADD: _refuse(n, other)
  return pairwise(op)(n, z)

# ---------------------------------------------------------------- the program rewrite

def as_parts(p: UOp, packed: UOp) -> tuple:
  """The (re, im) views of a float array of shape S + (2,) holding complex values of shape S."""
  whole = [(0, s) for s in p.shape]
  return tuple(packed.shrink(whole + [(k, k + 1)]).reshape(p.shape) for k in (0, 1))

def packed_source(z: tuple) -> UOp | None:
  """The float array of shape S + (2,) whose views (`as_parts`) the parts (re, im) are, if they are."""
  re, im = z
  if re.op is not Ops.RESHAPE or im.op is not Ops.RESHAPE: return None
  (a,), (b,) = re.src, im.src
  if a.op is not Ops.SHRINK or b.op is not Ops.SHRINK or a.src[0] is not b.src[0]: return None
  whole = [(0, s) for s in re.shape]
  return a.src[0] if a.arg == tuple(whole + [(0, 1)]) and b.arg == tuple(whole + [(1, 2)]) else None

def packed(z: tuple) -> UOp:
  """(re, im) of shape S laid out as one float array of shape S + (2,), parts interleaved as in memory: the array
  they are views of where they are (a complex input, an FFT's result), else made by a select (not summed with zero
  padding: -0.0 + 0.0 would lose the sign of a zero part)."""
  if (whole := packed_source(z)) is not None: return whole
  re, im = (part.reshape(part.shape + (1,)) for part in z)
  shape = re.shape[:-1] + (2,)
  first = UOp(Ops.CMPEQ, dtypes.bool_, (UOp(Ops.IOTA, dtypes.int32, (), (shape, len(shape) - 1)),
                                        UOp.const(0, dtypes.int32, shape)))
  return alu(Ops.WHERE, first, re.expand(shape), im.expand(shape))

def parts_array(host: np.ndarray, dt) -> np.ndarray:
  """A complex numpy array's bytes as a float array with a trailing axis of 2 (a view when it is contiguous)."""
  host = np.ascontiguousarray(host, dt.np)
  return host.reshape(-1).view(dtypes.real_dtype(dt).np).reshape(host.shape + (2,))

def buffer_parts(n: UOp) -> tuple:
  """A complex BUFFER leaf (a constant of the program) as a float BUFFER of its parts."""
  from tinyjx.devices.python import NumpyBuffer
  buf = array.buffers[n.arg[0]]
  flat = NumpyBuffer(buf.device, parts_array(buf.numpy(), n.dtype), dtypes.real_dtype(n.dtype))
  return as_parts(n, array.buffer_uop(flat))

# ---------------------------------------------------------------- control flow: complex values cross as packed floats

def packed_aval(shape: tuple, dt) -> tuple:
  return (tuple(shape) + (2,), dtypes.real_dtype(dt)) if dtypes.is_complex(dt) else (tuple(shape), dt)

def packed_sub_jaxpr(j):
  """A sub-jaxpr of a loop or cond whose complex params and outputs are float arrays with a trailing axis of 2:
  inside, the complex values are rebuilt from them (the sub-program is compiled, and split, on its own)."""
  from tinyjx.tracing import Jaxpr
  params, mapping = [], {}
  for p in j.params:
    if not dtypes.is_complex(p.dtype): params.append(p); continue
    slot, shape, trace = p.arg
    q = UOp(Ops.PARAM, dtypes.real_dtype(p.dtype), (), (slot, shape + (2,), trace))
    mapping[p] = UOp(Ops.COMPLEX, p.dtype, as_parts(p, q))
    params.append(q)
  roots = substitute(list(j.effects) + list(j.outs), mapping)
  effects, outs = roots[:len(j.effects)], roots[len(j.effects):]
  outs = [packed((UOp(Ops.REAL, dtypes.real_dtype(o.dtype), (o,)), UOp(Ops.IMAG, dtypes.real_dtype(o.dtype), (o,))))
          if dtypes.is_complex(o.dtype) else o for o in outs]
  return Jaxpr(params, outs, j.in_tree, j.out_tree, j.out_weak, j.name, effects)

def packed_loop(n: UOp, srcs: tuple, device: str) -> UOp:
  """A COND, WHILE or SCAN node with complex operands or results, on packed floats (its sub-jaxprs wrapped)."""
  if not dataclasses.is_dataclass(n.arg) or not hasattr(n.arg, 'jaxprs'): raise unsplittable(n, device=device)
  arg = dataclasses.replace(n.arg, jaxprs=tuple(packed_sub_jaxpr(j) for j in n.arg.jaxprs),
                            out_avals=tuple(packed_aval(s, d) for s, d in n.arg.out_avals))
  return UOp(n.op, n.dtype, tuple(packed(s) if isinstance(s, tuple) else s for s in srcs), arg)

def has_complex_avals(n: UOp) -> bool:
  return n.op in GroupOp.MultiOutput and any(dtypes.is_complex(d) for _, d in getattr(n.arg, 'out_avals', ()))

def split(params: list, roots: list, device: str = "a compiled device") -> tuple[list, list]:
  """The program `params -> roots` with every complex value carried as two float parts (see the module doc);
  `device` names the device in the error for an op with no rule."""
  new, parts = {}, {}
  for i, p in enumerate(params):
    if not dtypes.is_complex(p.dtype): continue
    slot, shape, trace = p.arg
    new[p] = UOp(Ops.PARAM, dtypes.real_dtype(p.dtype), (), (slot, shape + (2,), trace))
    parts[p] = as_parts(p, new[p])
  for n in toposort(list(roots)):
    if n in new: continue
    srcs = tuple(parts.get(s, new.get(s, s)) for s in n.src)
    complex_src = any(isinstance(s, tuple) for s in srcs)
    if n.op in GroupOp.MultiOutput and (complex_src or has_complex_avals(n)):
      new[n] = packed_loop(n, srcs, device)
    elif dtypes.is_complex(n.dtype):
      if n.op is Ops.BUFFER: parts[n] = buffer_parts(n); continue
      rule = COMPLEX_RULES.get(n.op)
      if rule is None: raise unsplittable(n, device=device)
      try:
        parts[n] = rule(n, *srcs)
      except NoRule as e:
        raise unsplittable(n, str(e), device) from None
    elif complex_src:
      rule = FROM_COMPLEX_RULES.get(n.op)
      if rule is None: raise unsplittable(n, device=device)
      new[n] = rule(n, *srcs)
    else:
      new[n] = n if srcs == n.src else n.replace(src=srcs)
  outs = [o for r in roots for o in (root_parts(parts[r]) if r in parts else (new.get(r, r),))]
  return [new.get(p, p) for p in params], outs

def root_parts(z: tuple) -> tuple:
  """The output that carries a complex root: one float array of its parts interleaved, the complex result's bytes
  (`SplitExecutable` views it as that result: no copy, no interleaving on the host), which an FFT step writes as it
  is and a kernel writes as pairs of stores (`optimize.split_guards` writes out its select between the parts)."""
  return (packed(z),)

class SplitExecutable:
  """The executable of a split program, bound and read as the complex program: complex input Buffers are handed
  over as their interleaved float parts, and a complex result's interleaved float parts come back as its Buffer.
  Everything else is the inner executable's (`kernels`, `source`, printing)."""
  def __init__(self, exe, params: list, outs: list):
    self.exe, self.in_dtypes, self.out_dtypes = exe, [p.dtype for p in params], [o.dtype for o in outs]
    self.out_shapes = [tuple(o.shape) for o in outs]

  def run(self, inputs: list) -> list: return self._packed(self.exe.run(self._parts(inputs)))

  def direct_runner(self, counts: tuple = ()):
    """jit's hit path (`Executable.direct_runner`) for the split program: the inner executable's runner, with the
    inputs and outputs converted as `run` converts them; None where the inner executable has none. (Without this
    the inner runner would be found through `__getattr__` and hand back a complex result's real part alone.)"""
    inner = getattr(self.exe, 'direct_runner', None)
    runner = None if inner is None else inner(counts)
    if runner is None: return None
    def run(inputs: list):
      outs = runner(self._parts(inputs))
      return None if outs is None else self._packed(outs)
    return run

  def _parts(self, inputs: list) -> list:
    """The inner program's inputs: each complex Buffer as a float Buffer of its interleaved parts."""
    dev = self.exe.device
    return [dev.from_numpy(parts_array(b.numpy(), dt), dtypes.real_dtype(dt)) if dtypes.is_complex(dt) else b
            for b, dt in zip(inputs, self.in_dtypes)]

  def _packed(self, outs: list) -> list:
    """The complex program's outputs from the inner one's: a complex result's float pairs viewed as complex values."""
    dev = self.exe.device
    return [dev.from_numpy(b.numpy().view(dt.np).reshape(shape), dt) if dtypes.is_complex(dt) else b
            for b, dt, shape in zip(outs, self.out_dtypes, self.out_shapes)]

  @property
  def timing_hook(self): return self.exe.timing_hook
  @timing_hook.setter
  def timing_hook(self, hook) -> None: self.exe.timing_hook = hook   # DEBUG=2, explain and VIZ time the kernels
  def __getattr__(self, name): return getattr(self.exe, name)
  def __str__(self): return str(self.exe)
  __repr__ = __str__
