"""uop: the one IR of tinyjx. Every array expression, jaxpr and kernel is a graph of `UOp`s.

A `UOp(op, dtype, src, arg)` is immutable and hash-consed: building the same node twice returns the
same object, so structural equality is identity, common subexpressions are shared, and `uop.key` (a
content hash) keys every cache. Array values go in `src`, static metadata in `arg` (always hashable).
Leaves carry their shape in `arg`; every other node's shape comes from `shape_rules`, one rule per op.

Invariants the rest of tinyjx relies on:
- elementwise ops take operands of one shape (the API layer broadcasts with RESHAPE/EXPAND first);
- binary ALU ops take operands of one dtype (the API layer promotes with CAST first), except WHERE's
  condition (bool) and the shifts;
- REDUCE removes its axes (as `lax.reduce`), and axes are sorted tuples of non-negative ints.

Per-op facts live here too, read by every other module: the op groups (`GroupOp`, including which ops are
transcendental and which float-only), the name a jaxpr prints for each op (`prim_name`) and the jnp function
that computes it (`jnp_name`); tests/test_op_coverage.py checks the tables that follow from them.

This module imports nothing else of tinyjx but dtypes.
"""
from __future__ import annotations
import enum, hashlib, itertools, math, operator, weakref
from typing import Callable
from tinyjx import dtypes
from tinyjx.dtypes import DType

class Ops(enum.Enum):
  # leaves: PARAM arg=(slot, shape, trace_id), BUFFER arg=(uid, shape, device), CONST arg=(value, shape),
  # IOTA arg=(shape, axis) counts 0.. along one axis
  PARAM = enum.auto(); BUFFER = enum.auto(); CONST = enum.auto(); IOTA = enum.auto()
  # identity with a unique arg: marks a differentiated input of grad/vjp/jvp (arg = tag id)
  TAG = enum.auto()
  # identity on values with a zero derivative (lax.stop_gradient); the lowering drops it
  STOP_GRADIENT = enum.auto()
  # unary ALU
  NEG = enum.auto(); NOT = enum.auto(); EXP = enum.auto(); LOG = enum.auto(); EXPM1 = enum.auto()
  LOG1P = enum.auto(); SIN = enum.auto(); COS = enum.auto(); TAN = enum.auto(); ASIN = enum.auto()
  ACOS = enum.auto(); ATAN = enum.auto(); SINH = enum.auto(); COSH = enum.auto(); TANH = enum.auto()
  SQRT = enum.auto(); RECIP = enum.auto(); ABS = enum.auto(); SIGN = enum.auto(); FLOOR = enum.auto()
  CEIL = enum.auto(); ROUND = enum.auto(); TRUNC = enum.auto(); ERF = enum.auto()
  CAST = enum.auto(); BITCAST = enum.auto()   # target dtype is the node's dtype
  # binary ALU (DIV: true division on floats, C division (toward zero) on ints; REM: C remainder)
  ADD = enum.auto(); SUB = enum.auto(); MUL = enum.auto(); DIV = enum.auto(); REM = enum.auto()
  POW = enum.auto(); MAX = enum.auto(); MIN = enum.auto(); ATAN2 = enum.auto()
  AND = enum.auto(); OR = enum.auto(); XOR = enum.auto(); SHL = enum.auto(); SHR = enum.auto()
  CMPLT = enum.auto(); CMPLE = enum.auto(); CMPEQ = enum.auto(); CMPNE = enum.auto()
  # ternary ALU: WHERE(cond, a, b)
  WHERE = enum.auto()
  # complex numbers: REAL(z) and IMAG(z) are the float parts of a complex z, COMPLEX(x, y) is x + iy (lax.complex);
  # every other op on complex operands means what numpy means. The compiled devices' lowering splits each complex
  # value into its two float parts (tinyjx/lower/complex.py), so no kernel ever sees a complex scalar.
  REAL = enum.auto(); IMAG = enum.auto(); COMPLEX = enum.auto()
  # reductions: REDUCE arg=(alu op ADD|MUL|MAX|MIN, axes); CUMULATIVE arg=(alu op, axis, reverse)
  REDUCE = enum.auto(); CUMULATIVE = enum.auto()
  # movement (views): RESHAPE arg=shape, PERMUTE arg=perm, EXPAND arg=shape (size-1 dims grow),
  # PAD arg=((lo, hi), ...) with zeros, SHRINK arg=((start, stop), ...), FLIP arg=axes
  RESHAPE = enum.auto(); PERMUTE = enum.auto(); EXPAND = enum.auto(); PAD = enum.auto()
  SHRINK = enum.auto(); FLIP = enum.auto()
  # array-level ops kept whole:
  # DOT_GENERAL arg=((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), output batch+lhs free+rhs free
  # GATHER(x, idx): x[idx] along axis 0, shape idx.shape + x.shape[1:], indices clamped into range
  # SCATTER(x, idx, upd) arg=mode ('add','set','mul','min','max'): x[idx] <mode>= upd, out-of-range dropped
  # ARGSORT arg=(axis, descending): a stable sort's permutation, int32
  DOT_GENERAL = enum.auto(); GATHER = enum.auto(); SCATTER = enum.auto(); ARGSORT = enum.auto()
  # an effect: DEBUG_CALLBACK(*args) arg=a callback record (tinyjx/debug.py) calls a host function on the values;
  # its value is a bool[] token nothing reads, kept alive as an effect of its jaxpr (tracing.Jaxpr.effects)
  DEBUG_CALLBACK = enum.auto()
  # multi-output nodes (arg holds their sub-jaxprs and output avals) and the node that picks one output
  COND = enum.auto(); WHILE = enum.auto(); SCAN = enum.auto(); GETITEM = enum.auto()
  CUSTOM_JVP = enum.auto(); CUSTOM_VJP = enum.auto(); CHECKPOINT = enum.auto()
  # LU(a) arg=lax.linalg.LuArg: partial-pivoting LU of float matrices (..., m, n), outputs the factors (..., m, n),
  # the pivots (..., min(m, n)) and the permutation (..., m), both int32; a runtime step (native on the CPU)
  LU = enum.auto()
  # TRIANGULAR_SOLVE(l, b) arg=unit_diagonal: X with tril(l) @ X = b, l (..., n, n), b (..., n, k) of one batch
  # shape (only the lower triangle of l is read; its strict lower one when unit); a runtime step, native on the CPU
  TRIANGULAR_SOLVE = enum.auto()
  # FFT(x) arg=(axis, inverse, scale): the DFT of complex x along axis (negative: from the end), of a length whose
  # prime factors are 2, 3, 5 and 7, times scale (JAX's fft primitive, with its norm); compiled programs carry it on
  # the float array of interleaved parts (..., 2) (the complex split); a runtime step, native on the CPU
  FFT = enum.auto()
  # collectives (arg starts with the axis name)
  PSUM = enum.auto(); PMAX = enum.auto(); PMIN = enum.auto(); ALL_GATHER = enum.auto(); PPERMUTE = enum.auto()
  ALL_TO_ALL = enum.auto(); PSUM_SCATTER = enum.auto(); AXIS_INDEX = enum.auto()
  # kernel level, only after lowering: leaves and loads of the scalar expressions in kernel statements (the statements
  # are the dataclasses of tinyjx/lower/index.py, which owns their meaning)
  DEFINE_GLOBAL = enum.auto(); DEFINE_ACC = enum.auto(); RANGE = enum.auto(); INDEX = enum.auto(); LOAD = enum.auto()
  SPECIAL = enum.auto()

  def __repr__(self): return f"Ops.{self.name}"

class GroupOp:
  Leaf = {Ops.PARAM, Ops.BUFFER, Ops.CONST, Ops.IOTA}
  Unary = {Ops.NEG, Ops.NOT, Ops.EXP, Ops.LOG, Ops.EXPM1, Ops.LOG1P, Ops.SIN, Ops.COS, Ops.TAN, Ops.ASIN,
           Ops.ACOS, Ops.ATAN, Ops.SINH, Ops.COSH, Ops.TANH, Ops.SQRT, Ops.RECIP, Ops.ABS, Ops.SIGN,
           Ops.FLOOR, Ops.CEIL, Ops.ROUND, Ops.TRUNC, Ops.ERF}
  Cast = {Ops.CAST, Ops.BITCAST}
  Comparison = {Ops.CMPLT, Ops.CMPLE, Ops.CMPEQ, Ops.CMPNE}
  Binary = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.REM, Ops.POW, Ops.MAX, Ops.MIN, Ops.ATAN2, Ops.AND, Ops.OR,
            Ops.XOR, Ops.SHL, Ops.SHR} | Comparison
  Ternary = {Ops.WHERE}
  Elementwise = Unary | Cast | Binary | Ternary
  # elementwise between complex and float types; the lowering splits them away, so no renderer meets them
  Complex = {Ops.REAL, Ops.IMAG, Ops.COMPLEX}
  # ops a complex operand may reach (lax refuses it elsewhere; jnp composes its complex functions from these)
  AcceptsComplex = {Ops.NEG, Ops.EXP, Ops.LOG, Ops.SIN, Ops.COS, Ops.SQRT, Ops.CAST, Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV,
               Ops.CMPEQ, Ops.CMPNE, Ops.WHERE} | Complex
  Movement = {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP}
  Reduce = {Ops.REDUCE, Ops.CUMULATIVE}
  MultiOutput = {Ops.COND, Ops.WHILE, Ops.SCAN, Ops.CUSTOM_JVP, Ops.CUSTOM_VJP, Ops.CHECKPOINT, Ops.LU}
  Collective = {Ops.PSUM, Ops.PMAX, Ops.PMIN, Ops.ALL_GATHER, Ops.PPERMUTE, Ops.ALL_TO_ALL, Ops.PSUM_SCATTER,
                Ops.AXIS_INDEX}
  Kernel = {Ops.DEFINE_GLOBAL, Ops.DEFINE_ACC, Ops.RANGE, Ops.INDEX, Ops.LOAD, Ops.SPECIAL}
  Commutative = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN, Ops.AND, Ops.OR, Ops.XOR, Ops.CMPEQ, Ops.CMPNE}
  # ops whose output is integral or boolean whatever the input: no gradient flows through them
  NonDifferentiable = Comparison | {Ops.NOT, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.SIGN, Ops.FLOOR,
                                    Ops.CEIL, Ops.ROUND, Ops.TRUNC, Ops.ARGSORT, Ops.IOTA, Ops.BITCAST,
                                    Ops.DEBUG_CALLBACK}   # a callback's bool[] token
  # a libm call per element, dear next to a load or an add: the scheduler materializes one that several kernels read
  # rather than recompute it in each, and the optimizer computes one that two sibling loops share once (stash_shared)
  Transcendental = {Ops.EXP, Ops.LOG, Ops.EXPM1, Ops.LOG1P, Ops.SIN, Ops.COS, Ops.TAN, Ops.ASIN, Ops.ACOS, Ops.ATAN,
                    Ops.SINH, Ops.COSH, Ops.TANH, Ops.ERF, Ops.POW, Ops.ATAN2}
  # elementwise ops defined on float operands only: jnp promotes int and bool inputs to the default float first,
  # lax refuses them, and the renderers have no integer form
  FloatOnly = {Ops.EXP, Ops.LOG, Ops.EXPM1, Ops.LOG1P, Ops.SIN, Ops.COS, Ops.TAN, Ops.ASIN, Ops.ACOS, Ops.ATAN,
               Ops.SINH, Ops.COSH, Ops.TANH, Ops.SQRT, Ops.RECIP, Ops.FLOOR, Ops.CEIL, Ops.ROUND, Ops.TRUNC, Ops.ERF,
               Ops.ATAN2}

# --- names: how a jaxpr prints each op (JAX's primitive names), and the jnp function that computes it ---
PRIM_NAMES = {   # ops not here print as their lower-case enum name (exp, sin, psum ...)
  Ops.ADD: 'add', Ops.SUB: 'sub', Ops.MUL: 'mul', Ops.DIV: 'div', Ops.REM: 'rem', Ops.POW: 'pow', Ops.MAX: 'max',
  Ops.MIN: 'min', Ops.ATAN2: 'atan2', Ops.AND: 'and', Ops.OR: 'or', Ops.XOR: 'xor', Ops.SHL: 'shift_left',
  Ops.SHR: 'shift_right', Ops.CMPLT: 'lt', Ops.CMPLE: 'le', Ops.CMPEQ: 'eq', Ops.CMPNE: 'ne', Ops.NEG: 'neg',
  Ops.NOT: 'not', Ops.RECIP: 'reciprocal', Ops.WHERE: 'select_n', Ops.CAST: 'convert_element_type',
  Ops.BITCAST: 'bitcast_convert_type', Ops.RESHAPE: 'reshape', Ops.PERMUTE: 'transpose', Ops.EXPAND: 'broadcast',
  Ops.PAD: 'pad', Ops.SHRINK: 'slice', Ops.FLIP: 'rev', Ops.DOT_GENERAL: 'dot_general', Ops.GATHER: 'gather',
  Ops.SCATTER: 'scatter', Ops.ARGSORT: 'argsort', Ops.IOTA: 'iota', Ops.TAG: 'tag', Ops.GETITEM: 'getitem',
}
_REDUCE_NAMES = {Ops.ADD: 'sum', Ops.MUL: 'prod', Ops.MAX: 'max', Ops.MIN: 'min'}   # REDUCE/CUMULATIVE by ALU op

def prim_name(u: 'UOp') -> str:
  """The primitive name a jaxpr prints for node `u` (a reduction is named by its ALU op).

  >>> prim_name(UOp(Ops.CAST, dtypes.int32, (UOp.const(1.5, dtypes.float32, ()),)))
  'convert_element_type'
  """
  if u.op is Ops.REDUCE: return 'reduce_' + _REDUCE_NAMES[u.arg[0]]
  if u.op is Ops.CUMULATIVE: return 'cum' + _REDUCE_NAMES[u.arg[0]]
  return PRIM_NAMES.get(u.op, u.op.name.lower())

JNP_NAMES = {   # the tinyjx.numpy function that is exactly the op (lax's tips and jnp's broadcast errors name it)
  Ops.ADD: 'add', Ops.SUB: 'subtract', Ops.MUL: 'multiply', Ops.DIV: 'divide', Ops.REM: 'fmod', Ops.POW: 'power',
  Ops.MAX: 'maximum', Ops.MIN: 'minimum', Ops.ATAN2: 'arctan2', Ops.CMPLT: 'less', Ops.CMPLE: 'less_equal',
  Ops.CMPEQ: 'equal', Ops.CMPNE: 'not_equal', Ops.AND: 'bitwise_and', Ops.OR: 'bitwise_or', Ops.XOR: 'bitwise_xor',
  Ops.SHL: 'left_shift', Ops.SHR: 'right_shift', Ops.WHERE: 'where', Ops.NEG: 'negative', Ops.NOT: 'invert',
  Ops.RECIP: 'reciprocal', Ops.CAST: 'astype',
}

def jnp_name(op: Ops) -> str:
  """The name of the jnp function computing `op` (the lower-case enum name where it has no other).

  >>> jnp_name(Ops.CMPLT)
  'less'
  """
  return JNP_NAMES.get(op, op.name.lower())

class ShapeError(ValueError):
  pass

_uid = itertools.count(1)
def fresh_id() -> int:
  """A process-unique int: the `arg` that gives a node identity (a grad target, a buffer, a trace)."""
  return next(_uid)

def _intern_key(op, dtype, src, arg):
  # floats that compare equal but differ (0.0 and -0.0) must not share a node; NaN compares unequal to
  # itself, so a NaN constant is keyed by its repr to stay hash-consed
  if op is Ops.CONST and isinstance(arg[0], (float, complex)): arg = (repr(arg[0]), arg[1], 'f')
  return (op, dtype, src, arg)

# Set by tinyjx.provenance while it records (explain, NaN/inf checking; None otherwise: one test per new node): its
# `new(node)` hears of every node made, `seen(node)` of each node hash-consing hands back (made before, perhaps by
# other code), and `derived(new, old)` of each node `substitute` rebuilt from another, so a rebuilt graph keeps the
# source lines of the one it came from.
watcher = None

class UOp:
  """One immutable, hash-consed IR node. Construct with `UOp(op, dtype, src, arg)`."""
  __slots__ = ('op', 'dtype', 'src', 'arg', '_shape', '_key', '_flags', '__weakref__')
  _cache: 'weakref.WeakValueDictionary' = weakref.WeakValueDictionary()

  def __new__(cls, op: Ops, dtype: DType, src: tuple = (), arg=None):
    src = tuple(src)
    k = _intern_key(op, dtype, src, arg)
    if (hit := UOp._cache.get(k)) is not None:
      if watcher is not None: watcher.seen(hit)
      return hit
    self = object.__new__(cls)
    object.__setattr__(self, 'op', op); object.__setattr__(self, 'dtype', dtype)
    object.__setattr__(self, 'src', src); object.__setattr__(self, 'arg', arg)
    for s in ('_shape', '_key', '_flags'): object.__setattr__(self, s, None)
    UOp._cache[k] = self
    if watcher is not None: watcher.new(self)
    return self

  def __setattr__(self, name, value): raise AttributeError(f"UOp is immutable; use .replace({name}=...)")
  def __reduce__(self): return (UOp, (self.op, self.dtype, self.src, self.arg))
  def replace(self, **kw) -> 'UOp':
    """A node like this one with some of op, dtype, src, arg changed."""
    return UOp(kw.get('op', self.op), kw.get('dtype', self.dtype), kw.get('src', self.src), kw.get('arg', self.arg))

  # --- derived facts, computed once per node (sources first, by a loop: deep graphs need no deep recursion) ---
  def _sources_first(self, slot: str, prop: str) -> None:
    order, seen, stack = [], set(), [(s, False) for s in self.src]
    while stack:
      node, expanded = stack.pop()
      if expanded: order.append(node); continue
      if node in seen or getattr(node, slot) is not None: continue
      if prop == 'shape' and node.op in GroupOp.MultiOutput: continue
      seen.add(node)
      stack.append((node, True))
      stack.extend((s, False) for s in node.src)
    for node in order: getattr(node, prop)

  @property
  def shape(self) -> tuple:
    if self._shape is None:
      self._sources_first('_shape', 'shape')
      object.__setattr__(self, '_shape', tuple(shape_rules[self.op](self)))
    return self._shape
  @property
  def ndim(self) -> int: return len(self.shape)
  @property
  def size(self) -> int: return math.prod(self.shape)

  @property
  def key(self) -> str:
    """Content hash of the whole graph below this node (hex sha256 prefix): the key for every cache."""
    if self._key is None:
      self._sources_first('_key', 'key')
      h = hashlib.sha256(f"{self.op.name}|{self.dtype}|{arg_text(self.arg)}".encode())
      for s in self.src: h.update(s.key.encode())
      object.__setattr__(self, '_key', h.hexdigest()[:32])
    return self._key

  @property
  def flags(self) -> frozenset:
    """Leaf kinds reachable from here ('PARAM', 'TAG', 'BUFFER' ...): concreteness and tag checks are O(1)."""
    if self._flags is None:
      self._sources_first('_flags', 'flags')
      own = {self.op.name} if self.op in (Ops.PARAM, Ops.TAG, Ops.BUFFER) or self.op in GroupOp.Collective else set()
      for s in self.src: own |= s.flags
      for sub in _sub_jaxpr_outs(self): own |= sub.flags - {'PARAM'}
      object.__setattr__(self, '_flags', frozenset(own))
    return self._flags
  @property
  def is_concrete(self) -> bool: return 'PARAM' not in self.flags and 'AXIS_INDEX' not in self.flags

  def toposort(self) -> list['UOp']: return toposort([self])
  def substitute(self, mapping: dict) -> 'UOp': return substitute([self], mapping)[0]

  def __repr__(self):
    shape = '' if self.op in GroupOp.MultiOutput else f" {self.shape}"
    return f"UOp({self.op.name}, {self.dtype}{shape}, arg={arg_text(self.arg)}, nsrc={len(self.src)})"

  # --- small constructors used everywhere ---
  @staticmethod
  def const(value, dtype: DType, shape: tuple = ()) -> 'UOp':
    return UOp(Ops.CONST, dtype, (), (normalize_scalar(value, dtype), tuple(shape)))
  def alu(self, op: Ops, *others: 'UOp') -> 'UOp':
    out = dtypes.bool_ if op in GroupOp.Comparison else self.dtype
    return UOp(op, out, (self,) + others)
  def cast(self, dtype: DType) -> 'UOp': return self if dtype is self.dtype else UOp(Ops.CAST, dtype, (self,))
  def reshape(self, shape) -> 'UOp': return self if tuple(shape) == self.shape else UOp(Ops.RESHAPE, self.dtype, (self,), tuple(shape))
  def permute(self, perm) -> 'UOp':
    return self if tuple(perm) == tuple(range(self.ndim)) else UOp(Ops.PERMUTE, self.dtype, (self,), tuple(perm))
  def expand(self, shape) -> 'UOp': return self if tuple(shape) == self.shape else UOp(Ops.EXPAND, self.dtype, (self,), tuple(shape))
  def pad(self, pads) -> 'UOp':
    pads = tuple((int(a), int(b)) for a, b in pads)
    return self if all(p == (0, 0) for p in pads) else UOp(Ops.PAD, self.dtype, (self,), pads)
  def shrink(self, bounds) -> 'UOp':
    bounds = tuple((int(a), int(b)) for a, b in bounds)
    return self if bounds == tuple((0, s) for s in self.shape) else UOp(Ops.SHRINK, self.dtype, (self,), bounds)
  def flip(self, axes) -> 'UOp': return self if not axes else UOp(Ops.FLIP, self.dtype, (self,), tuple(sorted(axes)))
  def concat(self, other: 'UOp', axis: int) -> 'UOp':
    """`self` then `other` along `axis`, as two zero-padded views added together."""
    n, m = self.shape[axis], other.shape[axis]
    pads = lambda lo, hi: tuple((lo, hi) if i == axis else (0, 0) for i in range(self.ndim))
    return UOp(Ops.ADD, self.dtype, (self.pad(pads(0, m)), other.pad(pads(n, 0))))
  def reduce(self, op: Ops, axes) -> 'UOp':
    axes = tuple(sorted(axes))
    return self if not axes else UOp(Ops.REDUCE, self.dtype, (self,), (op, axes))
  def broadcast_to(self, shape) -> 'UOp':
    """Numpy-style broadcast: prepend size-1 dims, then expand them."""
    shape = tuple(shape)
    x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape)
    return x.expand(shape)

def normalize_scalar(value, dtype: DType):
  """The Python scalar `value` becomes as stored in `dtype` (ints wrap; floats round, and into an integer type
  truncate and saturate with NaN as 0, XLA's conversion and the devices' casts), so args hash stably."""
  import numpy as np
  if dtype.kind == 'b': return bool(value)
  if dtype.kind in 'iu':
    if isinstance(value, float):
      ii = dtypes.iinfo(dtype)
      if value != value: return 0
      if value >= ii.max: return ii.max     # (float(max) may round up past max: 2**63 for int64)
      if value <= ii.min: return ii.min
      return math.trunc(value)
    bits = dtype.itemsize * 8
    v = int(value) & ((1 << bits) - 1)
    return v - (1 << bits) if dtype.kind == 'i' and v >= 1 << (bits - 1) else v
  if dtype is dtypes.bfloat16: return float(dtypes.round_bf16(np.array([value], np.float32))[0])
  if dtype.kind == 'c':
    with np.errstate(over='ignore'): return complex(dtype.np.type(value))
  if isinstance(value, complex): value = value.real   # a complex constant cast to a real type keeps its real part
  with np.errstate(over='ignore'):
    return float(dtype.np.type(value))

def arg_text(arg) -> str:
  """A node's `arg` as stable text: what `UOp.key` hashes and jaxprs print (a sub-jaxpr arg by its content key).

  >>> arg_text((Ops.ADD, (0, 1), 0.5))
  '(ADD,(0,1),0.5)'
  """
  if isinstance(arg, Ops): return arg.name
  if isinstance(arg, tuple): return "(" + ",".join(arg_text(a) for a in arg) + ")"
  if isinstance(arg, float): return repr(arg)
  key = getattr(arg, 'key', None)
  if isinstance(key, str): return key
  return repr(arg) if not callable(arg) else f"{getattr(arg, '__module__', '')}.{getattr(arg, '__qualname__', arg)}"

def _sub_jaxpr_outs(u: UOp) -> tuple:
  """Output nodes of the sub-jaxprs a control-flow or custom-rule node holds (found by duck typing in arg)."""
  if u.op not in GroupOp.MultiOutput: return ()
  subs = getattr(u.arg, 'jaxprs', None) or (u.arg if isinstance(u.arg, tuple) else (u.arg,))
  return tuple(o for a in subs if hasattr(a, 'outs') and hasattr(a, 'params') for o in a.outs)

def toposort(roots, extra: dict | None = None) -> list[UOp]:
  """All nodes reachable from `roots`, each after its sources and after the nodes `extra` lists for it (an order a
  rewrite needs beyond the graph's own; iterative, so deep graphs do not recurse)."""
  seen, order = set(), []
  for root in roots:
    stack = [(root, False)]
    while stack:
      node, expanded = stack.pop()
      if expanded: order.append(node); continue
      if node in seen: continue
      seen.add(node)
      stack.append((node, True))
      deps = (*reversed(node.src), *extra.get(node, ())) if extra else reversed(node.src)
      stack.extend((s, False) for s in deps if s not in seen)
  return order

def substitute(roots, mapping: dict) -> list[UOp]:
  """Rebuild `roots` with each key of `mapping` replaced by its value (sources first, shared nodes once)."""
  if not mapping: return list(roots)
  new: dict = dict(mapping)
  for node in toposort(roots):
    if node in new: continue
    src = tuple(new.get(s, s) for s in node.src)
    new[node] = node if src == node.src else node.replace(src=src)
    if watcher is not None and new[node] is not node: watcher.derived(new[node], node)
  return [new[r] for r in roots]

# --- shape rules: one per array-level op; they also validate what reaches the IR ---
def _same_shape(u: UOp) -> tuple:
  shapes = {s.shape for s in u.src}
  if len(shapes) != 1: raise ShapeError(f"{u.op.name}: operand shapes differ: {[s.shape for s in u.src]}")
  return u.src[0].shape

def _reshape_rule(u):
  if math.prod(u.arg) != u.src[0].size:
    raise ShapeError(f"cannot reshape array of shape {u.src[0].shape} (size {u.src[0].size}) "
                     f"into shape {u.arg} (size {math.prod(u.arg)})")
  return u.arg

def _expand_rule(u):
  s = u.src[0].shape
  if len(s) != len(u.arg) or any(a != b and a != 1 for a, b in zip(s, u.arg)):
    raise ShapeError(f"EXPAND: cannot expand shape {s} to {u.arg} (only size-1 dims grow, rank stays)")
  return u.arg

def _reduce_rule(u):
  axes = u.arg[1]
  return tuple(s for i, s in enumerate(u.src[0].shape) if i not in axes)

def _dot_general_rule(u):
  (lc, rc), (lb, rb) = u.arg
  a, b = u.src[0].shape, u.src[1].shape
  if [a[i] for i in lc] != [b[i] for i in rc] or [a[i] for i in lb] != [b[i] for i in rb]:
    raise ShapeError(f"dot_general: contracting or batch dims differ for shapes {a} and {b} (arg {u.arg})")
  free_a = [d for i, d in enumerate(a) if i not in lc and i not in lb]
  free_b = [d for i, d in enumerate(b) if i not in rc and i not in rb]
  return tuple([a[i] for i in lb] + free_a + free_b)

def _leaf_shape(u):
  if u.op is Ops.PARAM or u.op is Ops.BUFFER: return u.arg[1]
  if u.op is Ops.CONST: return u.arg[1]
  return u.arg[0]  # IOTA

def _getitem_rule(u):
  avals = out_avals(u.src[0])
  return avals[u.arg][0]

def out_avals(u: UOp) -> tuple:
  """The (shape, dtype) of each output of a multi-output node: its arg's `out_avals` attribute or entry."""
  arg = u.arg
  if hasattr(arg, 'out_avals'): return arg.out_avals
  for a in (arg if isinstance(arg, tuple) else ()):
    if hasattr(a, 'out_avals'): return a.out_avals
  raise TypeError(f"{u.op.name} node does not record its output avals")

# collectives: arg = (axis_name, ...) with the axis size last where the shape needs it (see tinyjx/collectives.py)
def _all_gather_rule(u):
  _, axis, tiled, n = u.arg
  s = u.src[0].shape
  return s[:axis] + (s[axis] * n,) + s[axis + 1:] if tiled else s[:axis] + (n,) + s[axis:]

def _psum_scatter_rule(u):
  _, dim, tiled, n = u.arg
  s = u.src[0].shape
  if (s[dim] % n if tiled else s[dim] != n):
    raise ShapeError(f"psum_scatter: dimension {dim} of shape {s} must {'be divisible by' if tiled else 'equal'} "
                     f"the axis size {n}")
  return s[:dim] + (s[dim] // n,) + s[dim + 1:] if tiled else s[:dim] + s[dim + 1:]

def _all_to_all_rule(u):
  _, split, concat, tiled, n = u.arg
  s = u.src[0].shape
  if (s[split] % n if tiled else s[split] != n):
    raise ShapeError(f"all_to_all: split axis {split} of shape {s} must {'be divisible by' if tiled else 'equal'} "
                     f"the axis size {n}")
  if tiled:
    out = list(s)
    out[split] //= n
    out[concat] *= n
    return tuple(out)
  rest = s[:split] + s[split + 1:]
  return rest[:concat] + (n,) + rest[concat:]

shape_rules: dict[Ops, Callable[[UOp], tuple]] = {
  **{op: (lambda u: u.src[0].shape) for op in (Ops.PSUM, Ops.PMAX, Ops.PMIN, Ops.PPERMUTE)},
  Ops.ALL_GATHER: _all_gather_rule, Ops.PSUM_SCATTER: _psum_scatter_rule, Ops.ALL_TO_ALL: _all_to_all_rule,
  Ops.AXIS_INDEX: lambda u: (),
  **{op: _leaf_shape for op in GroupOp.Leaf},
  Ops.TAG: lambda u: u.src[0].shape, Ops.STOP_GRADIENT: lambda u: u.src[0].shape,
  **{op: _same_shape for op in GroupOp.Elementwise | GroupOp.Complex},
  Ops.REDUCE: _reduce_rule,
  Ops.CUMULATIVE: lambda u: u.src[0].shape,
  Ops.RESHAPE: _reshape_rule,
  Ops.PERMUTE: lambda u: tuple(u.src[0].shape[i] for i in u.arg),
  Ops.EXPAND: _expand_rule,
  Ops.PAD: lambda u: tuple(s + lo + hi for s, (lo, hi) in zip(u.src[0].shape, u.arg)),
  Ops.SHRINK: lambda u: tuple(hi - lo for lo, hi in u.arg),
  Ops.FLIP: lambda u: u.src[0].shape,
  Ops.DOT_GENERAL: _dot_general_rule,
  Ops.GATHER: lambda u: u.src[1].shape + u.src[0].shape[1:],
  Ops.SCATTER: lambda u: u.src[0].shape,
  Ops.ARGSORT: lambda u: u.src[0].shape,
  Ops.TRIANGULAR_SOLVE: lambda u: u.src[1].shape,
  Ops.FFT: lambda u: u.src[0].shape,
  Ops.DEBUG_CALLBACK: lambda u: (),
  Ops.GETITEM: _getitem_rule,
  **{op: (lambda u: ()) for op in GroupOp.Kernel},   # kernel-level nodes are scalars
}

def normalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
  """A non-negative axis; the error names the axis and the array's ndim."""
  try:
    axis = operator.index(axis)
  except TypeError:
    raise TypeError(f"{name} must be an int, got {axis!r}") from None
  if not -ndim <= axis < ndim:
    valid = f"valid: {-ndim} to {ndim - 1}" if ndim else "a 0-d array has no axes"
    raise ValueError(f"{name} {axis} is out of bounds for an array of ndim {ndim} ({valid})")
  return axis % ndim
