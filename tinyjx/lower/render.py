"""render: kernel statements to C source. One C-style renderer; a dialect changes only what differs.

`CRenderer.render(kernels, entries)` returns one translation unit: the C runtime prelude (prelude.py: the exact
semantics of the PYTHON device for integer division, shifts, saturating casts, NaN-propagating max/min, bfloat16
rounding, float16 conversion, stable argsort, the matmul micro-kernel macro), the micro-kernel instantiations
the kernels' matmul plans need (each vector typedef and each MR x NR kernel once), one function per kernel, and
one exported entry per run of consecutive kernels, `void tjx_run_N(void **args)`, which casts buffer pointers out
of the slot table and calls its kernels in order (one foreign call runs many kernels). Each kernel also gets an
entry `tjx_kernel_N(void **args)` for per-kernel timing at DEBUG=2. A `Matmul` statement is written out by
matmul.py (`MatmulEmitter`, mixed in here) exactly as its `MatmulPlan` says: no tiling is decided here.

Dialect hooks (dialects.py overrides these): `kernel_prefix`, `buffer_qualifier`, `kernel_params`,
`kernel_prologue`, `parallel_for`/`loop_open` (how a loop, and the outermost parallel one, is expressed),
`type_names`, `prelude_extra`.
Expressions: a node read more than once, or one that does not depend on the innermost loop, becomes a
`const` temporary in the outermost block where everything it reads is defined (loop-invariant code motion:
a `powf` of a scalar runs once per kernel, not once per element); everything else is rendered inline. Names
come from per-kernel numbers, so the same program renders to the same text in every process (the disk
cache is keyed by that text).
"""
from __future__ import annotations
import math
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops, toposort
from tinyjx.lower.index import (Loop, Decl, Update, Store, Sort, Matmul, Kernel, Local, Assign, Stream, Transpose,
                                identity, walk)
from tinyjx.lower import symbolic as sym
from tinyjx.lower.prelude import C_PRELUDE, SET_THREADS, FAST_F32
from tinyjx.lower.matmul import MatmulEmitter, dynamic_schedule
from tinyjx.lower.optimize import is_matmul

TYPES = {dtypes.bool_: '_Bool', dtypes.int8: 'int8_t', dtypes.int16: 'int16_t', dtypes.int32: 'int32_t',
         dtypes.int64: 'int64_t', dtypes.uint8: 'uint8_t', dtypes.uint16: 'uint16_t', dtypes.uint32: 'uint32_t',
         dtypes.uint64: 'uint64_t', dtypes.float16: 'half', dtypes.bfloat16: 'float', dtypes.float32: 'float',
         dtypes.float64: 'double'}
SUFFIX = {dtypes.int8: 'i8', dtypes.int16: 'i16', dtypes.int32: 'i32', dtypes.int64: 'i64', dtypes.uint8: 'u8',
          dtypes.uint16: 'u16', dtypes.uint32: 'u32', dtypes.uint64: 'u64', dtypes.float32: 'f32',
          dtypes.bfloat16: 'f32', dtypes.float64: 'f64', dtypes.bool_: 'b'}

UNARY_F = {Ops.EXP: 'exp', Ops.LOG: 'log', Ops.EXPM1: 'expm1', Ops.LOG1P: 'log1p', Ops.SIN: 'sin', Ops.COS: 'cos',
           Ops.TAN: 'tan', Ops.ASIN: 'asin', Ops.ACOS: 'acos', Ops.ATAN: 'atan', Ops.SINH: 'sinh', Ops.COSH: 'cosh',
           Ops.TANH: 'tanh', Ops.SQRT: 'sqrt', Ops.FLOOR: 'floor', Ops.CEIL: 'ceil', Ops.ROUND: 'rint',
           Ops.TRUNC: 'trunc', Ops.ABS: 'fabs'}
BINARY_F = {Ops.REM: 'fmod', Ops.POW: 'pow', Ops.ATAN2: 'atan2'}   # float operands; ints have prelude helpers
INFIX = {Ops.ADD: '+', Ops.SUB: '-', Ops.MUL: '*', Ops.AND: '&', Ops.OR: '|', Ops.XOR: '^', Ops.CMPLT: '<',
         Ops.CMPLE: '<=', Ops.CMPEQ: '==', Ops.CMPNE: '!='}
NARROW = {dtypes.bool_, dtypes.int8, dtypes.int16, dtypes.uint8, dtypes.uint16}
SHORT_LOOP = 16   # GCC unrolls loops of up to this many iterations completely (its max-completely-peel-times)
TOPK_FRACTION = 8 # an argsort read only in its first top positions selects them (tjx_topk) where top <= n / this
TOPK_MAX = 512    # and top <= this (a row sorted the other way moves top indices for each element)

def c_float(v: float, dt) -> str:
  if math.isnan(v): return 'NAN'
  if math.isinf(v): return 'INFINITY' if v > 0 else '(-INFINITY)'
  return repr(float(v)) + ('' if dt is dtypes.float64 else 'f')

def c_int(v: int, dt) -> str:
  lo = -(1 << (8 * dt.itemsize - 1))
  if dt.kind == 'i' and v == lo: return f"({TYPES[dt]})({v + 1}LL-1)"
  if dt.itemsize == 8: return f"{v}{'ULL' if dt.kind == 'u' else 'LL'}"
  if dt.kind == 'u' and dt.itemsize == 4: return f"{v}u"
  return str(v)

class Scope:
  """A C block being rendered: its lines, where hoisted temporaries go, and what it defines."""
  def __init__(self, lines: list, pad: str, defines: set | None = None):
    self.lines, self.pad, self.defines, self.cache, self.hoist = lines, pad, set(defines or ()), {}, len(lines)

UNIT = "/* tjx:unit */"   # where CRenderer.render's text may be cut into translation units (after the prelude)

def _streams(stmts: list) -> bool:
  return any(isinstance(s, Stream) or isinstance(s, Transpose) and s.stream for s in walk(stmts))

def _loops_inside(stmts: list) -> bool:
  """Whether `stmts` hold a loop that runs more than once, or holds one (a one-iteration loop is no loop to GCC)."""
  return any(isinstance(s, Loop) and (s.size > 1 or _loops_inside(s.body)) for s in stmts)

class CRenderer(MatmulEmitter):
  """C for the CPU device (OpenMP for the parallel loop)."""
  kernel_prefix = "static void"
  matmul_prefix = "TJX_PACKING_FN "    # before a matmul kernel's prefix (C only: prelude.py MATMUL)
  buffer_qualifier = "restrict"
  type_names = TYPES
  prelude_extra = ""
  # float32 sums accumulate in double, as the PYTHON device's do: as accurate as a pairwise sum for every length
  # and layout (a column sum, a long row, the chunks of a split sum), and the adds are not what bounds a
  # memory-bound reduction. Only reads of the finished sum round to float32.
  wide_sums = {dtypes.float32: 'double'}
  short_loop_guard = "TJX_KEEP_LOOP"   # emitted before a short elementwise loop nested in another (C only)
  index_barrier = "tjx_opaque_index"   # around an index holding a bool made 0 or 1 (C only: the prelude's GCC note)
  loops_open = 0

  def parallel_for(self, loop: Loop) -> str:
    """The pragma of a parallel loop: fixed shares, or (`Loop.dynamic`) pieces handed to free threads."""
    return f"#pragma omp parallel for {dynamic_schedule(loop.size) if loop.dynamic else 'schedule(static)'}"

  # --- program ---
  def render(self, kernels: list[Kernel], entries: list[list[int]]) -> str:
    """One translation unit: the prelude, each kernel with `tjx_kernel_<i>` (its entry alone), and a `tjx_run_<e>`
    entry per group of kernel indices, which calls those. A `UNIT` comment opens each kernel and the entries: a
    compiler may cut the text there into translation units that all start with the prelude and build them in
    parallel (devices/cpu.py), since a kernel is reached only through its `tjx_kernel_<i>`.

    >>> from tinyjx.lower.index import build_kernel
    >>> x = UOp(Ops.PARAM, dtypes.float32, (), (0, (4,), 0))
    >>> y = UOp(Ops.SQRT, dtypes.float32, (x,))
    >>> src = CRenderer().render([build_kernel("k0", [y], {x: 0, y: 1})], [[0]])
    >>> print(src[src.index("static void k0"):src.index("void tjx_kernel_0")].strip())
    static void k0(const float* restrict b0, float* restrict b1) {
      for (int64_t i0 = 0; i0 < 4; i0++) {
        b1[i0] = sqrtf(b0[i0]);
      }
    }
    """
    self.micro: dict = {}
    bodies = [self.kernel(k) for k in kernels]
    parts = [C_PRELUDE, self.prelude_extra, "\n".join(self.micro.values())]
    for i, (k, body) in enumerate(zip(kernels, bodies)):
      parts.append(f"{UNIT}\n{body}\nvoid tjx_kernel_{i}(void **a) {{ {k.name}({self.call_args(k)}); }}\n")
    parts.append(UNIT + "".join(f"\nvoid tjx_kernel_{i}(void **a);" for i in range(len(kernels))) + "\n")
    for e, group in enumerate(entries):
      calls = "".join(f"  tjx_kernel_{i}(a);\n" for i in group)
      parts.append(f"void tjx_run_{e}(void **a) {{\n{calls}}}\n")
    parts.append(SET_THREADS)
    return "\n".join(parts)

  def call_args(self, k: Kernel) -> str:
    return ", ".join(f"({self.ptr_type(g, g.arg in k.outs)})a[{g.arg}]" for g in k.args)

  def ptr_type(self, g: UOp, written: bool) -> str:
    return f"{'' if written else 'const '}{self.type_names[g.dtype]}*"

  # --- kernels ---
  def kernel(self, k: Kernel) -> str:
    self.uses = _count_uses(k.body)
    self.nan_flags: set = set()    # accumulators whose NaN is kept in a flag, `<acc>_nan` (simd_reduction)
    self.narrow_sums = k.narrow_sums
    self.written = {g.arg for g in k.args if g.arg in k.outs}
    self.deps: dict = {}
    self.depth: dict = {}
    self.ntmp = 0
    self.bool_valued: dict = {}   # index -> whether guarded_index puts it behind the barrier
    self.grid = {id(l): d for d, l in enumerate(reversed(getattr(k, 'grid', [])))}   # loop -> work item dimension
    prefix = (self.matmul_prefix if is_matmul(k) else "") + self.kernel_prefix
    lines = [f"{prefix} {k.name}({self.kernel_params(k)}) {{", *self.kernel_prologue(k)]
    self.scopes: list[Scope] = [Scope(lines, "  ")]
    self.block(k.body, lines, 1)
    if _streams(k.body): lines.append("  tjx_sfence();")
    lines.append("}")
    return "\n".join(lines) + "\n"

  def kernel_params(self, k: Kernel) -> str:
    return ", ".join(f"{self.ptr_type(g, g.arg in k.outs)} {self.buffer_qualifier} b{g.arg}" for g in k.args)

  def kernel_prologue(self, k: Kernel) -> list:
    """Lines at the top of a kernel's body (a dialect's buffer setup)."""
    return []

  def loop_open(self, s: Loop, pad: str) -> list:
    """The lines that open loop `s` (closed by one `}`): a C for loop, with the OpenMP pragma it needs."""
    pragma = self.parallel_for(s) if s.parallel else (self.simd_reduction(s) if s.acc is not None else "")
    # a reduction the enclosing loop carries on (its accumulator declared further out): unrolled, its updates are a
    # chain of in-order sums in that loop, which GCC 12 vectorizes wrongly where the terms read strided and select
    # (a padded, strided convolution's ReLU gradient summed over its positions; tests/test_contraction_fuzz.py)
    carried = s.acc is not None and s.acc not in self.scopes[-1].defines
    # A loop that only fills a local block (a transposed read's line before it is streamed, `stream_stores`) is
    # no elementwise loop over outputs: with the block reused each time round, the enclosing loop cannot vectorize
    # across it, and unrolled its loads run side by side (`x.T + y` of 2048 x 2048: 6.4 -> 3.4 ms, kernel alone).
    fills = all(isinstance(b, Assign) and b.at is not None for b in s.body)
    if not pragma and self.short_loop_guard and self.loops_open and (s.acc is None or carried) and \
       s.size <= SHORT_LOOP and not _loops_inside(s.body) and not fills:
      # see TJX_KEEP_LOOP in the prelude: a compiler bug kept away. Only an elementwise loop or a carried sum: a
      # short loop around other loops (a size-1 loop around a matvec's row sum) kept so stops GCC vectorizing the
      # loops inside it, and a sum per output (its accumulator declared in the enclosing loop) vectorizes across
      # the outputs, correctly. A loop around one-iteration loops only is elementwise all the same (a 1-wide
      # convolution's output channels, each a two-term sum in a loop of one: GCC unrolled them and vectorized the
      # loop over the batch wrongly; found by bench/fuzz.py)
      pragma = pad + self.short_loop_guard
    v = self.name(s.var)
    flag = [f"{pad}int {self.name(a)}_nan = {self.name(a)} != {self.name(a)};" for a in (s.acc, *s.extra)
            if pragma and a in self.nan_flags]
    if s.parallel and _streams(s.body):   # each thread fences its streaming stores before the region ends (STREAM)
      pragma = f"#pragma omp parallel\n{pad}{{\n{pragma.replace('omp parallel for', 'omp for')}"
    return flag + ([pragma] if pragma else []) + [f"{pad}for (int64_t {v} = 0; {v} < {s.size}; {v}++) {{"]

  def block(self, stmts: list, lines: list, depth: int) -> None:
    for s in stmts:
      self.scopes[-1].hoist = len(self.scopes[-1].lines)   # invariant temporaries of inner loops go here
      self.stmt(s, lines, depth)

  def stmt(self, s, lines: list, depth: int) -> None:
    pad = "  " * depth
    if isinstance(s, Loop):
      lines += self.loop_open(s, pad)
      accs = [a for a in (s.acc, *s.extra) if a is not None]
      self.scopes.append(Scope(lines, pad + "  ", {s.var, *accs}))
      self.loops_open += 1
      self.block(s.body, lines, depth + 1)
      self.loops_open -= 1
      self.scopes.pop()
      lines.append(f"{pad}}}")
      if s.parallel and _streams(s.body): lines += [f"{pad}tjx_sfence();", f"{pad}}}"]
      lines += [f"{pad}if ({self.name(a)}_nan) {self.name(a)} = NAN;" for a in accs if a in self.nan_flags]
    elif isinstance(s, Decl):
      self.scopes[-1].defines.add(s.acc)
      t, name = self.acc_type(s.acc), self.name(s.acc)
      init = self.const(identity(s.acc.arg[1], s.acc.dtype), s.acc.dtype)
      if not s.size: lines.append(f"{pad}{t} {name} = {init};")
      else: lines.append(f"{pad}{t} {name}[{s.size}]; for (int64_t z = 0; z < {s.size}; z++) {name}[z] = {init};")
    elif isinstance(s, Update):
      v = self.expr(s.value)
      ref = self.name(s.acc) if s.at is None else f"{self.name(s.acc)}[{self.expr(s.at)}]"
      if s.acc in self.nan_flags:    # a max or min that keeps its NaN in a flag (simd_reduction)
        cmp = '>' if s.acc.arg[1] is Ops.MAX else '<'
        lines.append(f"{pad}{{ const {self.type_names[s.acc.dtype]} v = {v}; {ref} = {ref} {cmp} v ? {ref} : v; "
                     f"{ref}_nan |= v != v; }}")
      else: lines.append(f"{pad}{ref} = {self.binary(s.acc.arg[1], s.acc.dtype, ref, v)};")
    elif isinstance(s, Store):
      idx, v = self.expr(s.idx), self.expr(s.value)
      if s.valid.op is Ops.CONST and not s.valid.arg[0]: return      # a store that never happens
      idx = self.guarded_index(s.idx, idx)
      if s.valid.op is Ops.CONST: lines.append(f"{pad}b{s.buf.arg}[{idx}] = {v};")
      else: lines.append(f"{pad}if ({self.expr(s.valid)}) b{s.buf.arg}[{idx}] = {v};")
    elif isinstance(s, Local):
      self.scopes[-1].defines.add(s.acc)
      lines.append(f"{pad}{self.type_names[s.acc.dtype]} {self.name(s.acc)}[{s.size}];")
    elif isinstance(s, Assign):
      v = self.expr(s.value)
      lines.append(f"{pad}{self.name(s.acc)}{'' if s.at is None else f'[{self.expr(s.at)}]'} = {v};")
    elif isinstance(s, Stream):
      to = f"b{s.buf.arg} + {self.expr(s.base)}"
      lines.append(f"{pad}tjx_stream_{SUFFIX[s.acc.dtype]}({to}, {self.name(s.acc)}, {s.size});")
    elif isinstance(s, Sort): self.sort(s, lines, pad)
    elif isinstance(s, Matmul): self.matmul(s, lines, pad)
    elif isinstance(s, Transpose): self.transpose(s, lines, pad)
    else: self.custom(s, lines, depth)

  def acc_type(self, acc: UOp) -> str:
    """The C type of an accumulator: its dtype's, but wider for sums of the types in `wide_sums`."""
    if acc.arg[1] is Ops.ADD and acc.dtype in self.wide_sums and acc not in self.narrow_sums:
      return self.wide_sums[acc.dtype]
    return self.type_names[acc.dtype]

  def custom(self, s, lines: list, depth: int) -> None:
    raise NotImplementedError(f"no C rendering for statement {type(s).__name__}")

  def simd_reduction(self, loop: Loop) -> str:
    """Lets the compiler reorder a float reduction into vector lanes (numpy's own sums are not sequential either);
    one clause per accumulator the loop updates (`loop.acc`, `loop.extra`)."""
    accs = (loop.acc, *loop.extra)
    if any(a.dtype not in (dtypes.float32, dtypes.float64) for a in accs) or \
       not all(isinstance(s, (Update, Assign)) for s in loop.body): return ""
    clauses = []
    for acc in accs:
      name = self.name(acc)
      if acc.arg[1] in (Ops.ADD, Ops.MUL): clauses.append(f"reduction({'+' if acc.arg[1] is Ops.ADD else '*'}:{name})")
      elif acc.arg[1] in (Ops.MAX, Ops.MIN) and all(s.at is None for s in loop.body if isinstance(s, Update)):
        # a max (min) that lets a NaN fall out, and an int flag that remembers one: the loop's dependent chain is
        # one compare-and-select, not the three of a NaN-propagating max; the flag sets the result after the loop
        self.nan_flags.add(acc)
        clauses.append(f"reduction(tjx_f{acc.arg[1].name.lower()}_{SUFFIX[acc.dtype]}:{name}) reduction(|:{name}_nan)")
      else: clauses.append(f"reduction(tjx_{acc.arg[1].name.lower()}_{SUFFIX[acc.dtype]}:{name})")
    return "#pragma omp simd " + " ".join(clauses)

  def sort(self, s: Sort, lines: list, pad: str) -> None:
    shape, ax = s.shape, s.axis
    n, inner = shape[ax], math.prod(shape[ax + 1:])
    rows = math.prod(shape) // max(n, 1)
    kind = 'd' if s.src.dtype.kind == 'f' else ('u' if s.src.dtype.kind == 'u' else 'i')
    key_t = {'d': 'double', 'u': 'uint64_t', 'i': 'int64_t'}[kind]
    val = f"b{s.src.arg}[base + j * {inner}]"
    if s.src.dtype is dtypes.float16: val = f"TJX_H2F({val})"
    # only the first `top` positions are read (lower.sorted_prefix): selected, where that is much less than the row
    top = s.top if 0 < s.top <= min(n // TOPK_FRACTION, TOPK_MAX) else n
    order = f"tjx_sort_{kind}(key, idx, idx + {n}, {n}, {int(s.descending)});"
    if top < n:   # (a row that lets in more than its budget, about three times a random row's count, is sorted)
      budget = top * (1 + 2 * math.ceil(math.log2(n / top)))
      order = (f"if (!tjx_topk_{kind}(key, idx, {n}, {top}, {int(s.descending)}, {budget})) {{ "
               f"for (int64_t j = 0; j < {n}; j++) idx[j] = (int32_t)j; {order} }}")
    lines += [f"{pad}if ({n} > 0) {{",
              f"#pragma omp parallel if({int(rows > 1 and rows * n > 4096)})",
              f"{pad}{{",
              f"{pad}  {key_t}* key = malloc({n} * sizeof({key_t}));",
              f"{pad}  int32_t* idx = malloc({2 * n} * sizeof(int32_t));",
              "#pragma omp for",
              f"{pad}  for (int64_t r = 0; r < {rows}; r++) {{",
              f"{pad}    int64_t base = (r / {inner}) * {n * inner} + r % {inner};",
              f"{pad}    for (int64_t j = 0; j < {n}; j++) {{ key[j] = ({key_t}){val}; idx[j] = (int32_t)j; }}",
              f"{pad}    {order}",
              f"{pad}    for (int64_t j = 0; j < {top}; j++) b{s.out.arg}[base + j * {inner}] = idx[j];",
              f"{pad}  }}",
              f"{pad}  free(key); free(idx);",
              f"{pad}}}}}"]

  def push_scope(self, lines: list, pad: str, defines=None) -> None: self.scopes.append(Scope(lines, pad, defines))

  def scoped(self, fn, pad: str) -> list:
    """Lines rendered by `fn(lines)` in a scope of their own (its temporaries do not leak out)."""
    out: list = []
    self.scopes.append(Scope(out, pad))
    fn(out)
    self.scopes.pop()
    return out

  # --- expressions ---
  def name(self, u: UOp) -> str:
    if u.op is Ops.RANGE: return f"i{u.arg[0]}"
    if u.op is Ops.DEFINE_ACC: return f"acc{u.arg[0]}"
    if u.op is Ops.SPECIAL: return u.arg[0]
    raise ValueError(f"{u.op} has no name")

  def cached(self, u: UOp) -> str | None:
    for scope in reversed(self.scopes):
      if u in scope.cache: return scope.cache[u]
    return None

  def expr(self, u: UOp) -> str:
    """C text for `u`; a node used twice, or invariant in the current loop, becomes a temporary in the
    outermost scope where everything it reads is defined (loop-invariant code motion). Sources are rendered
    first, by a loop, so deep expressions need no deep recursion; every 32 levels of inline text a
    temporary keeps the C expressions short."""
    if (text := self.cached(u)) is not None: return text
    for n in toposort([u]):
      if n.op is not Ops.DEFINE_GLOBAL and self.cached(n) is None: self.render_one(n)
    return self.cached(u)

  def render_one(self, u: UOp) -> None:
    home = self.home(u)
    text = self.render_node(u)
    self.depth[u] = 1 + max((self.depth.get(s, 0) for s in u.src), default=0)
    inner = home < len(self.scopes) - 1
    if (self.uses.get(u, 0) > 1 or inner or self.depth[u] > 32) and \
       u.op not in (Ops.CONST, Ops.RANGE, Ops.DEFINE_ACC, Ops.SPECIAL, Ops.DEFINE_GLOBAL):
      tmp = f"t{self.ntmp}"
      self.ntmp += 1
      self.emit(home, f"const {self.type_names.get(u.dtype, 'int64_t')} {tmp} = {text};")
      text = tmp
      self.depth[u] = 0
    self.scopes[home].cache[u] = text

  def emit(self, home: int, line: str) -> None:
    sc = self.scopes[home]
    if home == len(self.scopes) - 1:
      # where the scope's hoisting point is its end, it moves past this temporary: a temporary hoisted here later,
      # out of a loop opened after it, may read it (a matmul's packing: the flat contraction index, then a load at it)
      if sc.hoist == len(sc.lines): sc.hoist += 1
      sc.lines.append(sc.pad + line)
      return
    sc.lines.insert(sc.hoist, sc.pad + line)
    for deeper in self.scopes[home:]:
      if deeper.lines is sc.lines and deeper.hoist >= sc.hoist and deeper is not sc: deeper.hoist += 1
    sc.hoist += 1

  def home(self, u: UOp) -> int:
    """The index of the innermost scope that defines something `u` reads."""
    deps = self.dependencies(u)
    for i in range(len(self.scopes) - 1, -1, -1):
      if deps & self.scopes[i].defines or None in deps and i == len(self.scopes) - 1: return i
    return 0

  def dependencies(self, u: UOp) -> frozenset:
    """Loop variables and accumulators below `u`; None stands for what must stay where it is used (template
    variables, loads from a buffer this kernel writes)."""
    if u in self.deps: return self.deps[u]
    for n in (toposort([u]) if any(s not in self.deps for s in u.src) else [u]):
      if n in self.deps: continue
      if n.op in (Ops.RANGE, Ops.DEFINE_ACC): d = frozenset({n})
      elif n.op is Ops.SPECIAL or (n.op is Ops.LOAD and n.src[0].arg in self.written): d = frozenset({None})
      else: d = frozenset().union(*[self.deps[s] for s in n.src])
      self.deps[n] = d
    return self.deps[u]

  def render_node(self, u: UOp) -> str:
    if u.op is Ops.DEFINE_ACC and self.acc_type(u) != self.type_names[u.dtype]:
      return f"(({self.type_names[u.dtype]}){self.name(u)})"      # a wide sum's reads round to its dtype
    if u.op in (Ops.RANGE, Ops.DEFINE_ACC, Ops.SPECIAL): return self.name(u)
    if u.op is Ops.CONST: return self.const(u.arg[0], u.dtype)
    if u.op is Ops.INDEX: return f"{self.name(u.src[0])}[{self.expr(u.src[1])}]"
    if u.op is Ops.LOAD:
      src = [self.expr(s) for s in u.src[1:]]
      ref = f"b{u.src[0].arg}[{self.guarded_index(u.src[1], src[0])}]"
      return ref if len(src) == 1 else self.masked_load(ref, src[1], u.src[0].dtype)
    src = [self.expr(s) for s in u.src]
    if u.op is Ops.WHERE: return f"({src[0]} ? {src[1]} : {src[2]})"
    if u.op is Ops.CAST: return self.cast(u.src[0].dtype, u.dtype, src[0])
    if u.op is Ops.BITCAST:
      return f"((union {{ {self.type_names[u.src[0].dtype]} a; {self.type_names[u.dtype]} b; }}){{ .a = {src[0]} }}).b"
    if len(src) == 1: return self.unary(u.op, u.dtype, src[0])
    if u.op in (Ops.SHL, Ops.SHR): return f"tjx_{u.op.name.lower()}_{SUFFIX[u.dtype]}({src[0]}, (int64_t)({src[1]}))"
    return self.binary(u.op, u.src[0].dtype if u.op in INFIX and u.dtype is dtypes.bool_ else u.dtype, *src, u=u)

  def guarded_index(self, idx: UOp, text: str) -> str:
    """`text` (the rendered `idx`) through the dialect's `index_barrier` where `idx` holds a bool made 0 or 1 (a cast
    from bool, a select of the constants 0 and 1): see the prelude's note on GCC 12."""
    if not self.index_barrier: return text
    flag = self.bool_valued.get(idx)
    if flag is None:
      flag = self.bool_valued[idx] = any(
        (n.op is Ops.CAST and n.src[0].dtype is dtypes.bool_) or
        (n.op is Ops.WHERE and all(s.op is Ops.CONST for s in n.src[1:]) and {s.arg[0] for s in n.src[1:]} == {0, 1})
        for n in toposort([idx]))
    return f"{self.index_barrier}({text})" if flag else text

  def masked_load(self, ref: str, valid: str, dt) -> str:
    """A load that reads the element where `valid`, else zero. In C it reads either the element or a static zero,
    always: as `c ? b[i] : 0` GCC 12 if-converts it into a masked AVX load and, in short rows, gives it its
    neighbour's mask (found by the random graph test with padding)."""
    return f"(*({valid} ? &{ref} : (const {self.type_names[dt]}*)tjx_zero))"

  def const(self, v, dt) -> str:
    if dt.kind == 'b': return '1' if v else '0'
    if dt is dtypes.float16: return f"TJX_F2H({c_float(float(v), dtypes.float32)})"
    if dt.kind == 'f': return c_float(float(v), dt)
    return c_int(int(v), dt)

  def cast(self, src, dst, x: str) -> str:
    if dst.kind == 'b': return f"({x} != 0)"
    if src is dtypes.float16: x, src = f"TJX_H2F({x})", dtypes.float32
    if dst is dtypes.float16: return f"TJX_F2H({x})"
    if dst is dtypes.bfloat16: return f"tjx_bf16((float)({x}))"
    if src is dtypes.float32 and dst.kind in 'iu': return f"tjx_f32_to_{SUFFIX[dst]}({x})"
    if src.kind == 'f' and dst.kind in 'iu': return f"tjx_f2i_{SUFFIX[dst]}({x})"
    return f"(({self.type_names[dst]})({x}))"

  def unary(self, op: Ops, dt, x: str) -> str:
    t, sfx = self.type_names[dt], SUFFIX.get(dt, '')
    if dt.kind == 'f':
      f = 'f' if dt is not dtypes.float64 else ''
      if op is Ops.NEG: return f"(-{x})"
      if op is Ops.RECIP: return f"({self.const(1, dt)} / {x})"
      if op is Ops.SIGN: return f"tjx_sign_{sfx}({x})"
      if op in FAST_F32 and dt is dtypes.float32: return f"tjx_{FAST_F32[op]}_f32({x})"
      if op is Ops.ERF: return f"(({t})erf((double)({x})))"
      return f"{UNARY_F[op]}{f}({x})"
    if op is Ops.NEG: return f"(({t})(0 - {x}))" if dt.kind == 'u' else f"(({t})(-{x}))"
    if op is Ops.NOT: return f"(!{x})" if dt.kind == 'b' else f"(({t})(~{x}))"
    if op is Ops.ABS: return x if dt.kind in 'ub' else f"tjx_abs_{sfx}({x})"
    if op is Ops.SIGN: return f"(({t})(({x}) > 0) - ({t})(({x}) < 0))" if dt.kind == 'i' else f"(({t})(({x}) > 0))"
    raise NotImplementedError(f"no C rendering for {op.name} on {dt}")

  def binary(self, op: Ops, dt, a: str, b: str, u: UOp | None = None) -> str:
    t, sfx = self.type_names[dt], SUFFIX.get(dt, '')
    if dt is dtypes.bool_ and op in (Ops.ADD, Ops.MAX): op = Ops.OR
    if dt is dtypes.bool_ and op in (Ops.MUL, Ops.MIN): op = Ops.AND
    if op in INFIX:
      out = f"({a} {INFIX[op]} {b})"
      return f"(({t})({a} {INFIX[op]} {b}))" if dt in NARROW and u is not None and u.dtype is not dtypes.bool_ else out
    if op in (Ops.MAX, Ops.MIN):
      if dt.kind == 'f' and u is not None and _nonzero_number(u.src[1]): a, b = b, a   # see _nonzero_number
      return f"tjx_{op.name.lower()}_{sfx}({a}, {b})"
    if dt.kind == 'f':
      f = '' if dt is dtypes.float64 else 'f'
      if op is Ops.DIV: return f"({a} / {b})"
      if op in BINARY_F: return f"{BINARY_F[op]}{f}({a}, {b})"
    if op in (Ops.DIV, Ops.REM) and u is not None and _positive_const(u.src[1]):
      return f"({a} {'/' if op is Ops.DIV else '%'} {b})"
    if op in (Ops.DIV, Ops.REM, Ops.POW): return f"tjx_{op.name.lower()}_{sfx}({a}, {b})"
    raise NotImplementedError(f"no C rendering for {op.name} on {dt}")

def _positive_const(u: UOp) -> bool: return u.op is Ops.CONST and u.arg[0] > 0

def _nonzero_number(u: UOp) -> bool:
  """A constant that is neither NaN nor zero: a clamp's bound. `tjx_max(c, x)` is then `c > x ? c : x` (its NaN
  test of c folds away), one vector max instruction, where `tjx_max(x, c)` tests x for NaN and blends: the same
  value for every x (NaN passes, and x equal to c is c bit for bit, which zero's two signs would not be)."""
  return u.op is Ops.CONST and u.arg[0] == u.arg[0] and u.arg[0] != 0

def _count_uses(stmts: list) -> dict:
  """How many parents each expression node has across a kernel (a node used twice becomes a temporary)."""
  roots = []
  def walk(ss):
    for s in ss:
      if isinstance(s, Loop): walk(s.body)
      elif isinstance(s, Update): roots.extend([s.value] + ([s.at] if s.at is not None else []))
      elif isinstance(s, Assign): roots.extend([s.value] + ([s.at] if s.at is not None else []))
      elif isinstance(s, Store): roots.extend([s.idx, s.value, s.valid])
      elif isinstance(s, Matmul):
        roots.extend([s.x, s.y, *(u for st in s.stores for u in (st.idx, st.value, st.valid))])
  walk(stmts)
  uses: dict = {}
  for r in roots: uses[r] = uses.get(r, 0) + 1          # a statement reading a node is a use too
  for n in toposort(roots):
    for s in n.src: uses[s] = uses.get(s, 0) + 1
  # A load inside an arm of a select becomes a temporary, read whatever the condition (an unmasked load is in
  # bounds, a masked one reads a static zero when masked off): in the arm, GCC 12 if-converts it into a
  # masked AVX load and, in short unrolled rows, gives it the mask of its neighbour (`c ? 0.0 : b[i]` over
  # rows of 3 doubles read zeros; found by the compiled pass of the suites and the random graph test).
  in_arm: set = set()
  for n in reversed(toposort(roots)):          # users before their sources: one pass marks every arm's nodes
    if n.op is Ops.WHERE: in_arm.update(n.src[1:])
    if n in in_arm: in_arm.update(n.src)
  for n in in_arm:
    if n.op is Ops.LOAD: uses[n] = uses.get(n, 0) + 1
  return uses

RENDERERS = {'C': CRenderer}   # a device names its dialect (`Backend.renderer`); the lowering looks it up here
