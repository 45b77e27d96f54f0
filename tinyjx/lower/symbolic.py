"""symbolic: integer index arithmetic inside kernels, simplified while it is built.

Index expressions are scalar UOps of dtype `IDX` (int64) over loop variables (`Ops.RANGE`, arg
`(n, size)`, numbered per kernel so generated source is the same in every process) and C variables of a
code template (`Ops.SPECIAL`, arg `(name, size)`). The constructors here (`add`, `mul`, `floordiv`,
`mod`, `lt`) keep a canonical linear form (a sum of coefficient * atom plus a constant, atoms in a fixed
order) and use value bounds to drop divisions and remainders that cannot change anything. That is what
makes a chain of views cheap: `(i // B) * B + i % B` is `i`, and a reshape that only adds a size-1 axis
costs no arithmetic at all. `resimplify` rebuilds an expression after loop variables were substituted;
`given` rebuilds a masked load's index for the narrower range its mask allows (a pad's or a concatenation's).

Invariant: `floordiv` and `mod` are C's `/` and `%`; they equal floor division only where the dividend is
non-negative, which holds for every in-bounds index (padding masks guard the rest).

>>> i = loop_var(0, 60)
>>> add(mul(floordiv(i, 5), 5), mod(i, 5)) is i
True
>>> pretty(floordiv(add(mul(loop_var(1, 4), 25), loop_var(2, 17), const(3)), 5))
'((i1*5)+((i2+3)/5))'
>>> a, b = loop_var(3, 5), loop_var(4, 20)       # a sliding-window view: (a*(24+1) + b) % 24 is a + b
>>> pretty(mod(add(mul(a, 25), b), 24)), pretty(floordiv(add(mul(a, 25), b), 24))
('(i3+i4)', 'i3')
"""
from __future__ import annotations
import math, weakref
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops, toposort, substitute

IDX = dtypes.int64
_BIG = 1 << 62

def const(v: int) -> UOp: return UOp(Ops.CONST, IDX, (), (int(v), ()))
def loop_var(n: int, size: int) -> UOp: return UOp(Ops.RANGE, IDX, (), (n, size))
def special(name: str, size: int) -> UOp: return UOp(Ops.SPECIAL, IDX, (), (name, size))
def is_const(x: UOp, v=None) -> bool: return x.op is Ops.CONST and (v is None or x.arg[0] == v)

_bounds: 'weakref.WeakKeyDictionary[UOp, tuple]' = weakref.WeakKeyDictionary()

def bounds(x: UOp) -> tuple[int, int]:
  """Inclusive (min, max) of the values `x` can take."""
  got = _bounds.get(x)
  if got is None: _bounds[x] = got = _compute_bounds(x)
  return got

def dtype_bounds(d) -> tuple[int, int]:
  """The range of values of an integer or bool dtype (floats: a large symmetric range).

  >>> from tinyjx import dtypes
  >>> dtype_bounds(dtypes.int8)
  (-128, 127)
  """
  if d.kind == 'b': return (0, 1)
  bits = 8 * d.itemsize
  if d.kind == 'u': return (0, (1 << bits) - 1)
  if d.kind == 'i': return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
  return (-_BIG, _BIG)

def _compute_bounds(x: UOp) -> tuple[int, int]:
  if x.op is Ops.CONST: return (int(x.arg[0]), int(x.arg[0]))
  if x.op in (Ops.RANGE, Ops.SPECIAL): return (0, x.arg[1] - 1)
  b = [bounds(s) for s in x.src]
  if x.op is Ops.ADD: return (b[0][0] + b[1][0], b[0][1] + b[1][1])
  if x.op is Ops.MUL:
    corners = [p * q for p in b[0] for q in b[1]]
    return (min(corners), max(corners))
  if x.op is Ops.DIV and is_const(x.src[1]) and b[0][0] >= 0:
    d = x.src[1].arg[0]
    return (b[0][0] // d, b[0][1] // d)
  if x.op is Ops.REM and is_const(x.src[1]) and b[0][0] >= 0: return (0, min(b[0][1], x.src[1].arg[0] - 1))
  if x.op is Ops.MAX: return (max(b[0][0], b[1][0]), max(b[0][1], b[1][1]))
  if x.op is Ops.MIN: return (min(b[0][0], b[1][0]), min(b[0][1], b[1][1]))
  if x.op is Ops.WHERE: return (min(b[1][0], b[2][0]), max(b[1][1], b[2][1]))
  if x.op is Ops.CAST and x.src[0].dtype.kind in 'iub': return b[0]
  return dtype_bounds(x.dtype)

# --- the linear form: {atom: coefficient}, constant ---
def linear(x: UOp) -> tuple[dict, int]:
  if x.op is Ops.CONST: return {}, int(x.arg[0])
  if x.op is Ops.ADD:
    (ta, ca), (tb, cb) = linear(x.src[0]), linear(x.src[1])
    out = dict(ta)
    for a, c in tb.items(): out[a] = out.get(a, 0) + c
    return {a: c for a, c in out.items() if c}, ca + cb
  if x.op is Ops.MUL and is_const(x.src[1]):
    t, c = linear(x.src[0])
    k = x.src[1].arg[0]
    return ({a: v * k for a, v in t.items()} if k else {}), c * k
  return {x: 1}, 0

def _atom_order(a: UOp):
  return (0, a.arg[0]) if a.op is Ops.RANGE else (1, str(a.arg[0])) if a.op is Ops.SPECIAL else (2, a.key)

def from_linear(terms: dict, c: int) -> UOp:
  terms, extra = _merge_div_mod({a: v for a, v in terms.items() if v})
  c += extra
  out = None
  for a in sorted(terms, key=_atom_order):
    t = a if terms[a] == 1 else UOp(Ops.MUL, IDX, (a, const(terms[a])))
    out = t if out is None else UOp(Ops.ADD, IDX, (out, t))
  if out is None: return const(c)
  return out if c == 0 else UOp(Ops.ADD, IDX, (out, const(c)))

def _merge_div_mod(terms: dict) -> tuple[dict, int]:
  """k*d*(y // d) + k*(y % d) == k*y for y >= 0: undoes a split of an axis followed by a merge. y // d is matched
  as written and in its canonical form (`(i // 3) // 3` is `i // 9`), and a merge can make another: a split in
  three, `i % 3 + ((i // 3) % 3) * 3 + (i // 9) * 9` (a 3 x 3 kernel's taps flattened), is `i`."""
  extra, merged = 0, True
  while merged:
    merged = False
    for a in list(terms):
      if a.op is not Ops.REM or a not in terms or bounds(a.src[0])[0] < 0: continue
      d, want = a.src[1].arg[0], terms[a] * a.src[1].arg[0]
      q = UOp(Ops.DIV, IDX, (a.src[0], a.src[1]))
      if terms.get(q) != want:
        if not any(t.op is Ops.DIV for t in terms): continue      # (no quotient to match: skip building one)
        q = floordiv(a.src[0], d)
        if terms.get(q) != want: continue
      k = terms.pop(a)
      terms.pop(q)
      inner, c0 = linear(a.src[0])
      for t, v in inner.items(): terms[t] = terms.get(t, 0) + k * v
      extra += k * c0
      merged = True
  return {a: v for a, v in terms.items() if v}, extra

def _nonneg_atoms(terms: dict) -> bool:
  """Every atom is >= 0, so reducing coefficients modulo d keeps the remainder's sum non-negative (C's `/`
  and `%` are then floor division, and `(a*(d+1) + b) % d` may become `(a + b) % d`)."""
  return all(bounds(a)[0] >= 0 for a in terms)

def _small_part(terms: dict, c: int, d: int) -> tuple[UOp, UOp, int] | None:
  """A non-negative x = g * q + s (terms, constant c) with g > 1 dividing d and 0 <= s < g: (q, s, g), else None.
  Then x / d is q / (d / g) and x % d is g * (q % (d / g)) + s: `(i*20 + j) / 40` with j < 20 is `i / 2`, so a
  row-major index split by a reshape and merged back folds to the plain index."""
  for g in sorted({math.gcd(d, v) for v in terms.values()} - {1}, reverse=True):
    small = from_linear({a: v for a, v in terms.items() if v % g}, c % g)
    lo, hi = bounds(small)
    if lo >= 0 and hi < g: return from_linear({a: v // g for a, v in terms.items() if v % g == 0}, c // g), small, g
  return None

def _split(terms: dict, c: int, d: int) -> tuple[UOp, UOp]:
  """x (terms, constant c) as d * base + rest: (base, rest), x / d being base and x % d rest where 0 <= rest < d.
  Non-negative atoms let every coefficient split into a multiple of d and a remainder in [0, d) (`(a*(d+1) + b) % d`
  is `(a + b) % d`). Where that rest can leave [0, d) and the coefficients d does not divide kept as they are
  cannot, or a coefficient is negative, they are kept: a reversed axis' 512 i + 512 - j stays itself, and under a
  mask 1 <= j <= 511 (`given`) its rest is 512 - j, where reduced it would be (511 j) % 512 for good."""
  keep = from_linear({a: v for a, v in terms.items() if v % d}, c % d)
  kept = (from_linear({a: v // d for a, v in terms.items() if v % d == 0}, c // d), keep)
  if not _nonneg_atoms(terms): return kept
  reduced = from_linear({a: v % d for a, v in terms.items() if v % d}, c % d)
  lo, hi = bounds(reduced)
  klo, khi = bounds(keep)
  if (lo < 0 or hi >= d) and ((klo >= 0 and khi < d) or any(v < 0 for v in terms.values())): return kept
  return from_linear({a: v // d for a, v in terms.items()}, c // d), reduced

# --- constructors ---
def add(*xs: UOp) -> UOp:
  terms, c = {}, 0
  for x in xs:
    t, k = linear(x)
    for a, v in t.items(): terms[a] = terms.get(a, 0) + v
    c += k
  return from_linear(terms, c)

def mul(x: UOp, k: int) -> UOp:
  t, c = linear(x)
  return from_linear({a: v * k for a, v in t.items()} if k else {}, c * k)

def floordiv(x: UOp, d: int) -> UOp:
  """x / d (C division) for a positive constant d."""
  if d == 1: return x
  lo, hi = bounds(x)
  if lo >= 0 and hi < d: return const(0)
  if lo < 0: return UOp(Ops.DIV, IDX, (x, const(d)))
  terms, c = linear(x)
  g = math.gcd(d, c, *terms.values())
  if g > 1: return floordiv(from_linear({a: v // g for a, v in terms.items()}, c // g), d // g)
  if (parts := _small_part(terms, c, d)) is not None: return floordiv(parts[0], d // parts[2])
  base, rest = _split(terms, c, d)
  rlo, rhi = bounds(rest)
  if rlo >= 0 and rhi < d: return base
  if rlo < 0: return UOp(Ops.DIV, IDX, (x, const(d)))
  if rest.op is Ops.DIV and is_const(rest.src[1]): inner = floordiv(rest.src[0], rest.src[1].arg[0] * d)
  else: inner = UOp(Ops.DIV, IDX, (rest, const(d)))
  return add(base, inner)

def mod(x: UOp, d: int) -> UOp:
  """x % d (C remainder) for a positive constant d."""
  if d == 1: return const(0)
  lo, hi = bounds(x)
  if lo >= 0 and hi < d: return x
  if lo < 0: return UOp(Ops.REM, IDX, (x, const(d)))
  terms, c = linear(x)
  if (parts := _small_part(terms, c, d)) is not None: return add(mul(mod(parts[0], d // parts[2]), parts[2]), parts[1])
  rest = _split(terms, c, d)[1]
  rlo, rhi = bounds(rest)
  if rlo >= 0 and rhi < d: return rest
  if rest.op is Ops.REM and is_const(rest.src[1]) and rest.src[1].arg[0] % d == 0: return mod(rest.src[0], d)
  return UOp(Ops.REM, IDX, (rest if rlo >= 0 else x, const(d)))

TRUE = UOp(Ops.CONST, dtypes.bool_, (), (True, ()))

def lt(x: UOp, k: int) -> UOp:
  """The bool x < k, folded to a constant where the bounds decide it."""
  lo, hi = bounds(x)
  if hi < k: return TRUE
  if lo >= k: return UOp(Ops.CONST, dtypes.bool_, (), (False, ()))
  return UOp(Ops.CMPLT, dtypes.bool_, (x, const(k)))

def ge(x: UOp, k: int) -> UOp:
  lo, hi = bounds(x)
  if lo >= k: return TRUE
  if hi < k: return UOp(Ops.CONST, dtypes.bool_, (), (False, ()))
  return UOp(Ops.NOT, dtypes.bool_, (UOp(Ops.CMPLT, dtypes.bool_, (x, const(k))),))

def and_(a: UOp, b: UOp) -> UOp:
  if a is TRUE: return b
  if b is TRUE: return a
  if is_const(a) or is_const(b): return a if is_const(a) else b   # one side is False
  return UOp(Ops.AND, dtypes.bool_, (a, b))

def in_range(x: UOp, size: int) -> UOp: return and_(ge(x, 0), lt(x, size))

def clamp(x: UOp, size: int) -> UOp:
  """x limited to [0, size-1] (gather indices)."""
  lo, hi = bounds(x)
  if hi > size - 1: x = UOp(Ops.MIN, IDX, (x, const(size - 1)))
  if lo < 0: x = UOp(Ops.MAX, IDX, (x, const(0)))
  return x

def rebuilt(n: UOp, src: tuple) -> UOp:
  """Node `n` on the sources `src`, its index arithmetic rebuilt through the constructors (resimplify's step)."""
  if n.dtype is IDX and n.op is Ops.ADD: return add(*src)
  if n.dtype is IDX and n.op is Ops.MUL and is_const(src[1]): return mul(src[0], src[1].arg[0])
  if n.dtype is IDX and n.op is Ops.DIV and is_const(src[1]): return floordiv(src[0], src[1].arg[0])
  if n.dtype is IDX and n.op is Ops.REM and is_const(src[1]): return mod(src[0], src[1].arg[0])
  return n if src == n.src else n.replace(src=src)

def resimplify(x: UOp) -> UOp:
  """Rebuild index arithmetic bottom-up through the constructors (after loop variables were substituted)."""
  done: dict = {}
  for n in toposort([x]): done[n] = rebuilt(n, tuple(done[s] for s in n.src))
  return done[x]

def _conjuncts(c: UOp) -> list:
  return _conjuncts(c.src[0]) + _conjuncts(c.src[1]) if c.op is Ops.AND else [c]

def given(x: UOp, valid: UOp) -> UOp:
  """Index `x` as it may be written where `valid` holds (a masked load reads nothing elsewhere): each conjunct
  `v + c < k` or `not (v + c < k)` on one loop or template variable v narrows v's range to [lo, hi]; `x` is rebuilt
  with v = lo + w, w a variable of that narrower range, so divisions and remainders that it decides fold away,
  then with w = v - lo. A concatenation's second part, `x[(i - 16) / 16 ...]` under `i >= 16`, becomes affine.

  >>> i = loop_var(7, 32)
  >>> pretty(given(floordiv(i, 16), lt(i, 16))), pretty(given(mod(i, 16), ge(i, 16)))
  ('0', '(i7+-16)')
  """
  ranges: dict = {}
  for c in _conjuncts(valid):
    neg = c.op is Ops.NOT
    cmp = c.src[0] if neg else c
    if cmp.op is not Ops.CMPLT or not is_const(cmp.src[1]) or cmp.src[0].dtype is not IDX: continue
    terms, c0 = linear(cmp.src[0])
    if len(terms) != 1: continue
    (v, coef), = terms.items()
    if coef != 1 or v.op not in (Ops.RANGE, Ops.SPECIAL): continue
    lo, hi = ranges.get(v, (0, v.arg[1] - 1))
    k = cmp.src[1].arg[0] - c0                      # v < k, or v >= k where negated
    ranges[v] = (max(lo, k), hi) if neg else (lo, min(hi, k - 1))
  for v, (lo, hi) in ranges.items():
    if hi < lo or (lo, hi) == (0, v.arg[1] - 1) or v not in loop_vars(x): continue
    w = special(f"given:{v.op.name}:{v.arg[0]}:{lo}", hi - lo + 1)
    narrowed = resimplify(substitute([x], {v: add(w, const(lo))})[0])
    x = resimplify(substitute([narrowed], {w: add(v, const(-lo))})[0])
  return x

def loop_vars(x: UOp) -> set:
  """The loop variables and template variables `x` depends on."""
  return {n for n in toposort([x]) if n.op in (Ops.RANGE, Ops.SPECIAL)}

_SYM = {Ops.ADD: '+', Ops.MUL: '*', Ops.DIV: '/', Ops.REM: '%', Ops.CMPLT: '<', Ops.AND: '&&'}
def pretty(x: UOp) -> str:
  """Index arithmetic as readable text: `(i0*25+i1+28)/5%5`."""
  if x.op is Ops.CONST: return str(x.arg[0])
  if x.op is Ops.RANGE: return f"i{x.arg[0]}"
  if x.op is Ops.SPECIAL: return str(x.arg[0])
  if x.op in _SYM and len(x.src) == 2: return f"({pretty(x.src[0])}{_SYM[x.op]}{pretty(x.src[1])})"
  return f"{x.op.name.lower()}({', '.join(pretty(s) for s in x.src)})"
