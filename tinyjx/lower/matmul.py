"""matmul: writes out a `Matmul` statement's `MatmulPlan` (chosen in lower/optimize.py) as C, for the CPU renderer.

The emitted code packs one operand whole (x, or y when the plan says `x_panels`) into panels of the plan's mr rows
or nr columns, zero-padded at the edges; then, in the parallel loop over the other operand's blocks, packs one
panel of it and runs the micro-kernel (an mr x nr tile of results in vector registers, `TJX_MICRO` in prelude.py,
instantiated once per plan as `tjx_mm_<dtype>_<mr>x<nr>`) against every block of the first, and the kernel's
epilogue (bias, activation, a transposed store) on each result tile. A chunked plan runs the contraction in chunks
of its outermost variable, summing into a per-thread row of tiles; a split plan makes the chunks the parallel
work, in a fixed number of groups added in order, so results do not depend on the thread count. Packing walks
the kernel's own loop variables, so a view's index arithmetic stays affine. A direct plan (x a sliding window,
a convolution's) never packs x: the micro-kernel `TJX_MICRO_DIRECT` reads it in place at roff[row] + koff[k],
two tables of the row and contraction parts of its affine index; with `Matmul.skip` (x a zero-padded array) each
block runs only the contraction rows where one of its rows reads data, not padding. A rows plan (`x_rows`: an x
whose rows are contiguous along the contraction) never packs x either: `TJX_MICRO_ROWS` reads row r at
roff[r] + k (from x + k0 in a chunk). A lane_rows plan (a direct plan of a short contraction) runs a block as one
run of x in the vector lanes against nr broadcast columns of y (`TJX_MICRO_LANES`), its tile already by columns.
Every number is the plan's: nothing here decides a size.
"""
from __future__ import annotations
import math
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops
from tinyjx.lower import symbolic as sym
from tinyjx.lower.index import Matmul, Store, Transpose
from tinyjx.lower.optimize import LINE

def _flat(vars_: list) -> UOp:
  """The flat (row-major) index over loop variables `vars_`: affine, sum of var * stride."""
  out, stride = sym.const(0), 1
  for v in reversed(vars_):
    out, stride = sym.add(out, sym.mul(v, stride)), stride * v.arg[1]
  return out

def _contraction(s: Matmul) -> tuple[int, int]:
  """(values of the outermost contraction variable, contraction rows per value): a chunk's unit."""
  return s.kvars[0].arg[1], s.k // s.kvars[0].arg[1]

def _chunk_bounds(p: str, per: int, outer: int, inner: int) -> list:
  """Inside a loop over chunk `cc` of `per` values of the outermost contraction variable: the chunk's values
  [c0, c1) and its contraction rows, kn of them from k0."""
  return [f"{p}const int64_t c0 = cc * {per}, c1 = c0 + {per} < {outer} ? c0 + {per} : {outer};",
          f"{p}const int64_t k0 = c0 * {inner}, kn = (c1 - c0) * {inner};"]

WORK_CHUNKS = 64        # big parallel work (a matmul's, a Loop.dynamic) goes in about this many pieces to free threads
def dynamic_schedule(items: int) -> str:
  """OpenMP's schedule clause that hands `items` iterations to free threads in about WORK_CHUNKS pieces."""
  return f"schedule(dynamic, {max(1, items // WORK_CHUNKS)})"

OVERLAP_EPILOGUE = True   # `MatmulEmitter.overlapped_tiles` where the compiler has a vector multiply-add
STAGE_PANEL = 1 << 15   # bytes of a panel packed row by row above which its rows are staged first (pack_panel)
STAGE_BLOCK = 16        # contraction rows a staged panel moves at a time: the panel's rows' lines stay in L1
_IO, _JO = sym.special('io', 1 << 62), sym.special('jo', 1 << 62)   # a tile store's row and column parts of the index

def _split_index(idx: UOp) -> tuple[UOp, UOp] | None:
  """A tile store's index as (row part, column part): terms in the template variable i (and batch loops) and terms
  in j; None where some term needs both."""
  terms, const = sym.linear(idx)
  parts = [sym.const(const), sym.const(0)]
  for atom, c in terms.items():
    names = {v.arg[0] for v in sym.loop_vars(atom) if v.op is Ops.SPECIAL}
    if names >= {'i', 'j'}: return None
    parts['j' in names] = sym.add(parts['j' in names], sym.mul(atom, c))
  return parts[0], parts[1]

def _unit_stride(part: UOp, name: str) -> bool:
  """`part` (a column part of a store's index) moves by one element when template variable `name` does."""
  return any(a.op is Ops.SPECIAL and a.arg[0] == name and c == 1 for a, c in sym.linear(part)[0].items())

def _index_parts(s: Matmul) -> tuple[UOp, UOp]:
  """x's affine index as (contraction part, row part): the terms in the contraction variables, and the rest."""
  terms, const = sym.linear(s.x.src[1])
  kpart, rpart = sym.const(0), sym.const(const)
  for v, c in terms.items():
    if v in s.kvars: kpart = sym.add(kpart, sym.mul(v, c))
    else: rpart = sym.add(rpart, sym.mul(v, c))
  return kpart, rpart

def block_transpose_fn(name: str, t: str, vec: str, mask: str, lanes: int) -> str:
  """C of `tjx_trb_<name>(src, lds, dst, ldd, rows)`: the first `rows` rows (lds apart) of a lanes x lanes block of src,
  transposed into dst (lanes rows of `lanes` elements, ldd apart; the columns of rows past `rows` are zeros), through
  vector registers: log2(lanes) rounds, a round of distance d swapping the off-diagonal d x d blocks of every 2d x 2d
  block (two shuffles per pair of rows d apart, TJX_SHUFFLE), then stored one vector a row."""
  out = [f"static inline void tjx_trb_{name}(const {t}* restrict src, int64_t lds, {t}* restrict dst, int64_t ldd, "
         "int rows) {",
         f"  {vec} v[{lanes}];",
         f"  for (int r = 0; r < {lanes}; r++) {{",
         f"    if (r < rows) memcpy(&v[r], src + r * lds, sizeof v[r]);",
         f"    else v[r] = ({vec}){{0}}; }}"]
  d = lanes // 2
  while d:
    lo = ", ".join(str(lanes + l - d if l & d else l) for l in range(lanes))
    hi = ", ".join(str(lanes + l if l & d else l + d) for l in range(lanes))
    for i in (i for i in range(lanes) if not i & d):
      out += [f"  {{ const {vec} x = v[{i}], y = v[{i + d}];",
              f"    v[{i}] = TJX_SHUFFLE({mask}, x, y, {lo}); v[{i + d}] = TJX_SHUFFLE({mask}, x, y, {hi}); }}"]
    d //= 2
  out += [f"  for (int q = 0; q < {lanes}; q++) memcpy(dst + q * ldd, &v[q], sizeof v[q]);", "}"]
  return "\n".join(out)

def transpose_fn(name: str, block: str, t: str, lanes: int, mr: int, nr: int) -> str:
  """C of `tjx_tr_<name>(c, ct)`: an mr x nr tile c (row-major) as ct[q * mrp + r], mrp = mr rounded up to whole
  vectors, one lanes x lanes block at a time (`block_transpose_fn` `block`; rows past mr zeros). A tile stored
  column by column then reads each column as a run where it read one element a row, strided (scalar loads and
  inserts, which cost more than the tile's products in a short contraction: the first convolution's K = 25)."""
  mrp = -(-mr // lanes) * lanes
  return "\n".join([
    f"static inline void tjx_tr_{name}(const {t}* restrict c, {t}* restrict ct) {{",
    f"  for (int jb = 0; jb < {nr // lanes}; jb++) for (int rb = 0; rb < {mrp // lanes}; rb++)",
    f"    tjx_trb_{block}(c + rb * {lanes * nr} + jb * {lanes}, {nr}, ct + jb * {lanes * mrp} + rb * {lanes}, {mrp}, "
    f"{mr} - rb * {lanes} < {lanes} ? {mr} - rb * {lanes} : {lanes});",
    "}"])

class MatmulEmitter:
  """Mixed into the C renderer: `matmul(stmt, lines, pad)` and its parts. Uses the renderer's `expr`, `name`,
  `stmt`, `scoped`, `push_scope`/`scopes` and `type_names`; records micro-kernel instantiations in `self.micro`."""
  def pack_panel(self, s: Matmul, which: str, lines: list, pad: str, chunk: bool = False, group: tuple = ()) -> None:
    """Pack one panel (block `bb` of MR rows of x, or NR columns of y) at `dst`: dst[k * MR + r] = x(row, k),
    zeros past the last row. Row-outer (each row's loop variables recovered once, then the kernel's own
    contraction loops, so a view's index arithmetic stays affine) unless the operand runs along its single row
    variable: then contraction-outer, so both the reads and the writes stay in order. With `chunk`, only the
    contraction rows of the current chunk: the outermost contraction variable runs over [c0, c1) and k counts
    from k0 (C variables of the chunk loop). With `group` (panels, elements of one panel), contraction-outer packing
    packs all the group's panels (`gn` of them from block bg * panels, panel g at dst + g * size) in one pass: each
    row of the operand is then read along the whole group's columns, not a panel's 64 bytes a page. Contraction-outer,
    whole panels take a loop nest with no bound check in it (`omp simd`), and only a last, partial one checks."""
    x, rows, n, blk = (s.x, s.ivars, s.m, s.plan.mr) if which == 'a' else (s.y, s.jvars, s.n, s.plan.nr)
    klen = "kn" if chunk else "K"
    n_rows = s.plan.chunk * _contraction(s)[1] if chunk else s.k    # contraction rows packed, at most
    flat_k = lambda: self.expr(_flat(s.kvars)) + (" - k0" if chunk else "")
    nest = lambda p, body: self.loop_nest(s.kvars, lines, p, body, ("c0", "c1") if chunk else None)
    if self.packs_rows(s, which):
      sizes, t = [v.arg[1] for v in rows], self.type_names[s.dtype]
      # a panel bigger than L1 written a row at a time (stores a panel's width apart) evicts its own lines before the
      # next row comes back to them: its rows are staged in order, then moved in blocks of STAGE_BLOCK contraction
      # rows (a weight gradient's 32 x 576 panel packed 4x faster), or of a vector's lanes square through vector
      # registers where the vectors allow (the first convolution's weight gradient 1.55 -> 1.27 ms at batch 128)
      staged = blk * n_rows * s.dtype.itemsize > STAGE_PANEL
      put = (lambda k: f"stage[q * {n_rows} + {k}]") if staged else (lambda k: f"dst[{k} * {blk} + q]")
      if staged: lines.append(f"{pad}{t}* stage = tjx_alloc({blk * n_rows} * sizeof({t}));")
      lines += [f"{pad}for (int64_t q = 0; q < {blk}; q++) {{", f"{pad}  const int64_t r = bb * {blk} + q;"]
      if n % blk:   # (only the last panel has padding rows, and only where the panels do not divide the operand)
        lines.append(f"{pad}  if (r >= {n}) {{ for (int64_t k = 0; k < {klen}; k++) {put('k')} = 0; continue; }}")
      for d, v in enumerate(rows):
        stride, part = math.prod(sizes[d + 1:]), "r"
        if stride > 1: part = f"(r / {stride})"
        if d > 0: part = f"({part} % {sizes[d]})"
        lines.append(f"{pad}  const int64_t {self.name(v)} = {part};")
      self.push_scope(lines, pad + "  ", set(rows))
      nest(pad + "  ", lambda p: lines.append(f"{p}{put(f'({flat_k()})')} = {self.expr(x)};"))
      self.scopes.pop()
      lines.append(f"{pad}}}")
      block, lanes = self.block_transpose(s) if staged else ('', 0)
      if block and blk % lanes == 0:   # whole blocks of lanes x lanes through vector registers, the rest one by one
        lines += [f"{pad}{{",
                  f"{pad}  int64_t kb = 0;",
                  f"{pad}  for (; kb + {lanes} <= {klen}; kb += {lanes})",
                  f"{pad}    for (int64_t qb = 0; qb < {blk}; qb += {lanes})",
                  f"{pad}      tjx_trb_{block}(stage + qb * {n_rows} + kb, {n_rows}, dst + kb * {blk} + qb, {blk}, "
                  f"{lanes});",
                  f"{pad}  for (; kb < {klen}; kb++)",
                  f"{pad}    for (int64_t q = 0; q < {blk}; q++) dst[kb * {blk} + q] = stage[q * {n_rows} + kb];",
                  f"{pad}}}",
                  f"{pad}free(stage);"]
      elif staged:
        lines += [f"{pad}for (int64_t kb = 0; kb < {klen}; kb += {STAGE_BLOCK})",
                  f"{pad}  for (int64_t q = 0; q < {blk}; q++)",
                  f"{pad}    for (int64_t k = kb; k < (kb + {STAGE_BLOCK} < {klen} ? kb + {STAGE_BLOCK} : {klen}); "
                  "k++)",
                  f"{pad}      dst[k * {blk} + q] = stage[q * {n_rows} + k];",
                  f"{pad}free(stage);"]
      return
    def body(p, guard):
      k = f"({flat_k()})"
      if group:
        lines.extend([f"{p}for (int64_t g = 0; g < gn; g++) {{", f"{p}  const int64_t bb = bg * {group[0]} + g;"])
        p += "  "
      out = f"dst[{k} * {blk} + q]" if not group else f"dst[g * {group[1]} + {k} * {blk} + q]"
      # (in OpenMP's outlined function the kernel's pointers have lost `restrict`: without `omp simd` GCC packs a
      # 12-row panel element by element)
      if not guard: lines.append("#pragma omp simd")
      lines.append(f"{p}for (int64_t q = 0; q < {blk}; q++) {{")
      lines.append(f"{p}  const int64_t {self.name(rows[0])} = bb * {blk} + q;")
      # the guard comes before the scope opens: a read the operand hoists into a temporary stays behind it (a
      # padding row past the last one must read nothing, or it reads past the end of the operand's buffer)
      if guard: lines.append(f"{p}  if ({self.name(rows[0])} >= {n}) {{ {out} = 0; continue; }}")
      self.push_scope(lines, p + "  ", set(rows))
      lines.append(f"{p}  {out} = {self.expr(x)};")
      self.scopes.pop()
      lines.append(f"{p}}}")
      if group: lines.append(f"{p[:-2]}}}")
    if n % blk:   # only panels past the operand's end have padding rows: the whole ones are packed by a loop nest
      # with no guard in it, which the compiler vectorizes
      whole = f"(bg * {group[0]} + gn) * {blk} <= {n}" if group else f"bb * {blk} + {blk} <= {n}"
      lines.append(f"{pad}if ({whole}) {{")
      nest(pad + "  ", lambda p: body(p, False))
      lines.append(f"{pad}}} else {{")
      nest(pad + "  ", lambda p: body(p, True))
      lines.append(f"{pad}}}")
    else: nest(pad, lambda p: body(p, False))

  def work_loop(self, items: int) -> str:
    """The pragma of a matmul's parallel loop over `items` big pieces of work (panels, blocks of rows, groups): they
    go to whichever thread is free (`dynamic`), in pieces of about items / WORK_CHUNKS. Each piece's results are
    its own, whichever thread computes it, so results do not change; but a thread slowed by a busy core (another
    process, a neighbour on a shared host) no longer holds up the other: with one core of two busy, the 1024 matmul
    took 15.1-15.8 ms handed out so, 21.2-22.0 split in halves (`static`), like OpenBLAS; alone, the same."""
    return f"#pragma omp for {dynamic_schedule(items)}"

  def packs_rows(self, s: Matmul, which: str) -> bool:
    """pack_panel packs `which` row by row (its rows run along the contraction, or it has several row variables)."""
    return s.x_k_inner or len(s.ivars) > 1 if which == 'a' else s.y_k_inner or len(s.jvars) > 1

  def matmul(self, s: Matmul, lines: list, pad: str) -> None:
    """One side is packed whole first; the other is packed a panel at a time inside the parallel loop over its
    blocks, right before the micro-kernel runs that panel against every block of the first (the panel stays
    in cache, and no buffer the size of the big operand is ever written). A chunked contraction runs groups of
    panels (`grouped_chunks`). With `x_rows` x is read in place through a table of its rows' offsets
    (`TJX_MICRO_ROWS`): as the whole side, nothing is packed before the panels' loop (no pass, no barrier); as the
    streamed side (`x_panels`), no panel of x is packed. Every decision is the plan's."""
    if s.plan.direct: return self.matmul_direct(s, lines, pad)
    plan, t = s.plan, self.type_names[s.dtype]
    mr, nr, micro = plan.mr, plan.nr, self.micro_kernel(s)
    panels_of_x, chunked = plan.x_panels, plan.chunked
    whole, part = ('b', 'a') if panels_of_x else ('a', 'b')
    wbuf, wblk, pblk = ('pb', nr, mr) if panels_of_x else ('pa', mr, nr)
    p2, p3 = pad + "    ", pad + "      "
    nblocks, other = ('MB', 'NB') if panels_of_x else ('NB', 'MB')
    outer, inner = _contraction(s)
    ib, jb = ("bb", "sb") if panels_of_x else ("sb", "bb")
    wptr = f"{wbuf} + sb * {wblk} * K" + (f" + k0 * {wblk}" if chunked else "")
    if plan.x_rows and not panels_of_x: wbuf, wptr = 'roff', self.rows_ptr(s, "sb")
    a_ptr, b_ptr = ("panel", wptr) if panels_of_x else (wptr, "panel")
    if plan.x_rows and panels_of_x: a_ptr = self.rows_ptr(s, "bb")      # (x streams in place, y is packed whole)
    frees = [wbuf] + (['roff'] if plan.x_rows and panels_of_x else [])
    lines += [f"{pad}{{",
              f"{pad}  const int64_t M = {s.m}, N = {s.n}, K = {s.k};",
              f"{pad}  const int64_t NB = (N + {nr - 1}) / {nr}, MB = (M + {mr - 1}) / {mr};"]
    if plan.x_rows:
      lines += [f"{pad}  int64_t* roff = tjx_alloc(MB * {mr} * sizeof(int64_t));",
                f"{pad}  for (int64_t q = 0; q < MB * {mr}; q++) {{"]
      self.row_offset(s, _index_parts(s)[1], lines, pad + "    ", "q")
      lines.append(f"{pad}  }}")
    if wbuf != 'roff':
      lines.append(f"{pad}  {t}* {wbuf} = tjx_alloc({'MB' if wbuf == 'pa' else 'NB'} * {wblk} * K * sizeof({t}));")
    if plan.by_rows:
      lines.append(f"{pad}  {t}* panels = tjx_alloc(NB * {nr} * K * sizeof({t}));")
      frees.append('panels')
    lines += [*([f"{pad}  {t}* parts = tjx_alloc({plan.split_groups} * MB * NB * {mr * nr} * sizeof({t}));"]
                if plan.split_groups else []),
              f"#pragma omp parallel if({int(s.parallel)})",
              f"{pad}  {{"]
    if wbuf != 'roff':                                                    # the whole side, packed first
      lines += ["#pragma omp for schedule(static)", f"{pad}  for (int64_t bb = 0; bb < {other}; bb++) {{",
                f"{p2}{t}* dst = {wbuf} + bb * {wblk} * K;"]
      self.pack_panel(s, whole, lines, p2)
      lines.append(f"{pad}  }}")
    if plan.by_rows: return self.by_rows(s, lines, pad, part, a_ptr, t, frees)
    alloc = "NULL" if self.in_place(s, part) else f"tjx_alloc({plan.group * pblk} * {plan.chunk * inner} * sizeof({t}))"
    lines.append(f"{pad}  {t}* panel = {alloc};")               # (x streaming in place packs no panel)
    chunk = (outer, plan.chunk, inner)
    if plan.split_groups:
      self.split_k(s, lines, pad, part, a_ptr, b_ptr, t, chunk, ib, jb, frees)
      return
    if chunked:
      self.grouped_chunks(s, lines, pad, part, (a_ptr, b_ptr), chunk, (ib, jb), frees)
      return
    lines += [self.work_loop(self.blocks(s, panels_of_x)),
              f"{pad}  for (int64_t bb = 0; bb < {nblocks}; bb++) {{", f"{p2}{t}* dst = panel;"]
    if not self.in_place(s, part): self.pack_panel(s, part, lines, p2)
    lines += [f"{p2}for (int64_t sb = 0; sb < {other}; sb++) {{",
              f"{p3}{t} c[{mr * nr}] __attribute__((aligned(64)));",
              f"{p3}{micro}(K, {a_ptr}, {b_ptr}, c, 0);"]
    self.tile_store(s, lines, p3, ib, jb, t)
    lines += [f"{p2}}}", f"{pad}  }}", f"{pad}  free(panel);", f"{pad}  }}", *(f"{pad}  free({b});" for b in frees),
              f"{pad}}}"]

  def by_rows(self, s: Matmul, lines: list, pad: str, part: str, a_ptr: str, t: str, frees: list) -> None:
    """`MatmulPlan.by_rows`: every panel of y is packed first, then each thread runs blocks of rows against all of
    them, so the tiles it stores (and an epilogue's loads) follow each other along the output's rows, not a column
    of tiles that jumps a whole row between them. With `MatmulPlan.prefetch` the micro-kernel fetches the next
    tile's epilogue lines as it runs (`prefetch_table`); where the compiler has an explicit vector multiply-add,
    an optimized build overlaps each tile's epilogue with the next tile's arithmetic instead (`overlapped_tiles`)."""
    plan, p2, p3 = s.plan, pad + "    ", pad + "      "
    size = f"{plan.nr} * K"
    lines += ["#pragma omp for schedule(static)",
              f"{pad}  for (int64_t bb = 0; bb < NB; bb++) {{", f"{p2}{t}* dst = panels + bb * {size};"]
    self.pack_panel(s, part, lines, p2)
    lines.append(f"{pad}  }}")
    table = self.prefetch_table(s, p3) if plan.prefetch else None
    if table and OVERLAP_EPILOGUE:
      fma = f"TJX_VFMA_{self.vector_type(s)[0]}_{plan.vector_bytes}"
      lines.append(f"#ifdef {fma}")
      self.overlapped_tiles(s, lines, pad, a_ptr, t, fma)
      lines.append("#else")
    call = f"(K, {a_ptr}, panels + bb * {size}, c, 0" + (", pf, nin, npf)" if table else ")")
    lines += [self.work_loop(self.blocks(s, True)), f"{pad}  for (int64_t sb = 0; sb < MB; sb++) {{",
              f"{p2}for (int64_t bb = 0; bb < NB; bb++) {{",
              *(table or []), f"{p3}{t} c[{plan.mr * plan.nr}] __attribute__((aligned(64)));",
              f"{p3}{self.micro_kernel(s, bool(table))}{call};"]
    self.tile_store(s, lines, p3, "sb", "bb", t)
    lines += [f"{p2}}}", f"{pad}  }}"]
    if table and OVERLAP_EPILOGUE: lines.append("#endif")
    lines += [f"{pad}  }}", *(f"{pad}  free({b});" for b in frees), f"{pad}}}"]

  def overlapped_tiles(self, s: Matmul, lines: list, pad: str, a_ptr: str, t: str, fma: str) -> None:
    """`by_rows`' loop over tiles with each whole tile's epilogue (an optimizer's update: three arrays loaded and
    three stored at each result, three divisions and a square root) done one vector at a time between the next
    tile's contraction rows, so its loads, stores and divisions overlap that tile's multiply-adds instead of
    leaving the multiply-add units idle (the MLP step's first weight gradient with its Adam update, 784 x 512 x 512:
    2.16 -> 2.08 ms alone, 3.09 -> 2.71 on a busy machine, the plain gradient 1.97 and 2.63). The tile's
    contraction runs inline here, its multiply-adds through `fma` (prelude.py TJX_VFMA_*, defined only in an
    optimized build whose compiler has one): the kernel is compiled without contraction, which keeps the epilogue's
    rounding exactly the other path's, and the explicit multiply-adds round as the micro-kernel's contracted ones
    do, so the results are the same bits. A tile at an edge (or a store whose columns are not one run) runs its
    epilogue right away; a thread's last deferred tile runs after its loop. Each tile's lines are prefetched while
    it is computed, for its epilogue during the next."""
    plan, p2, p3, p4 = s.plan, pad + "    ", pad + "      ", pad + "        "
    mr, nr, lanes = plan.mr, plan.nr, plan.vector_bytes // s.dtype.itemsize
    nv, vec, ne = nr // lanes, self.vector_type(s)[1], plan.mr * plan.nr // lanes
    lines += [f"{pad}  {t} cb[2][{mr * nr}] __attribute__((aligned(64)));",
              f"{pad}  int64_t pioff[{mr}], pjo = 0, psb = 0, pbb = 0;",
              f"{pad}  int pend = 0, cur = 0;",
              f"{pad}  const int64_t KS = K / {ne} > 4 ? K / {ne} : 4;    /* contraction rows between two vectors */",
              self.work_loop(self.blocks(s, True)) + " nowait", f"{pad}  for (int64_t sb = 0; sb < MB; sb++) {{",
              f"{p2}for (int64_t bb = 0; bb < NB; bb++) {{",
              *self.prefetch_table(s, p3, ahead=False),
              f"{p3}{t}* restrict c = cb[cur];",
              f"{p3}{{",
              f"{p4}const {t}* restrict xa = {a_ptr};",
              f"{p4}const {t}* restrict b = panels + bb * {nr} * K;    /* (TJX_MICRO_ROW's name for y's panel) */",
              f"{p4}{vec} acc[{mr}][{nv}];",
              f"{p4}for (int r = 0; r < {mr}; r++) for (int j = 0; j < {nv}; j++) acc[r][j] = ({vec}){{0}};",
              f"{p4}const int64_t ne = pend ? {ne} : 0;",
              f"{p4}int64_t e = 0;",
              f"{p4}int pq = 0;",
              f"{p4}for (int64_t k0 = 0; ; k0 += KS) {{",
              f"{p4}  const int64_t k1 = k0 + KS < K ? k0 + KS : K;",
              f"{p4}  TJX_UNROLL4 for (int64_t k = k0; k < k1; k++) {{",
              f"{p4}    TJX_PREFETCH_STEP",
              f"{p4}    TJX_MICRO_ROW({vec}, {mr}, {nr}, {nv}, xa[k * {mr} + r], {fma}) }}",
              f"{p4}  if (e < ne) {{"]
    self.epilogue_vector(s, lines, p4 + "    ", t, "cb[cur ^ 1]")
    lines += [f"{p4}    e++;", f"{p4}  }} else if (k1 >= K) break;", f"{p4}}}",
              f"{p4}memcpy(c, acc, sizeof acc);",
              f"{p3}}}",
              f"{p3}pend = 0;"]
    defer = [f"{p3}  memcpy(pioff, ioff, sizeof pioff);", f"{p3}  pjo = joff[0], psb = sb, pbb = bb, pend = 1;",
             f"{p3}  cur ^= 1;"]
    self.tile_store(s, lines, p3, "sb", "bb", t, defer)
    lines += [f"{p2}}}", f"{pad}  }}", f"{pad}  if (pend) for (int64_t e = 0; e < {ne}; e++) {{"]
    self.epilogue_vector(s, lines, p2, t, "cb[cur ^ 1]")
    lines.append(f"{pad}  }}")

  def epilogue_vector(self, s: Matmul, lines: list, p: str, t: str, tile: str) -> None:
    """Vector e of the deferred tile (`overlapped_tiles`: block psb of rows, pbb of columns, its row offsets in pioff
    and its first column's in pjo) in `tile`: the epilogue of lanes consecutive results of one row."""
    lanes, nr = s.plan.vector_bytes // s.dtype.itemsize, s.plan.nr
    lines += [f"{p}const int64_t r = e / {nr // lanes}, q0 = e % {nr // lanes} * {lanes};",
              "#pragma omp simd",
              f"{p}for (int64_t qq = 0; qq < {lanes}; qq++) {{",
              f"{p}  const int64_t q = q0 + qq;",
              f"{p}  const int64_t i = psb * {s.plan.mr} + r;", f"{p}  const int64_t j = pbb * {nr} + q;",
              f"{p}  const int64_t io = pioff[r], jo = pjo + q;",
              f"{p}  const {t} cv = {tile}[r * {nr} + q];", *self.epilogue(s, p), f"{p}}}"]

  def prefetch_table(self, s: Matmul, p: str, ahead: bool = True) -> list | None:
    """Inside `by_rows`' loop over tile (sb, bb): lines that fill pf with the addresses of the lines the next tile's
    (without `ahead`, this tile's) epilogue reads (nin of them) and then writes (npf in all): for each row of that
    tile, the cache lines of its nr columns in every array loaded at the store's own index (an optimizer's parameter
    and moments) and in every output. None where the store's index is not a row part plus a column part that moves
    one element a column."""
    split, plan = _split_index(s.store.idx), s.plan
    if split is None or not _unit_stride(split[1], 'j'): return None
    loads = {u.src[0].arg for st in s.stores for u in st.value.toposort()
             if u.op is Ops.LOAD and len(u.src) == 2 and u.src[1] is s.store.idx}
    sides = [sorted(loads), sorted({st.buf.arg for st in s.stores})]
    lines_per_row = max(1, plan.nr * s.dtype.itemsize // LINE)
    mr, nr = plan.mr, plan.nr
    out = [f"{p}const char* pf[{mr * lines_per_row * (len(sides[0]) + len(sides[1]))}];",
           f"{p}int nin = 0, npf = 0;",
           f"{p}{{",
           f"{p}  const int64_t ns = bb + 1 < NB ? sb : sb + 1, j = (bb + 1 < NB ? bb + 1 : 0) * {nr};" if ahead else
           f"{p}  const int64_t ns = sb, j = bb * {nr};",
           f"{p}  if (ns < MB) {{"]
    out += self.scoped(lambda o: o.append(f"{p}    const int64_t jo = {self.expr(split[1])};"), p + "    ")
    for n, bufs in enumerate(sides):
      out += [f"{p}    for (int64_t i = ns * {mr}; i < ns * {mr} + {mr} && i < M; i++) {{"]
      out += self.scoped(lambda o: o.append(f"{p}      const int64_t io = {self.expr(split[0])};"), p + "      ")
      out += [f"{p}      pf[npf++] = (const char*)(b{b} + io + jo) + {LINE * q};"
              for b in bufs for q in range(lines_per_row)]
      out.append(f"{p}    }}")
      if n == 0: out.append(f"{p}    nin = npf;")
    out += [f"{p}  }}", f"{p}}}"]
    return out

  def blocks(self, s: Matmul, rows: bool) -> int:
    """How many blocks of rows (`rows`) or panels of columns the plan's tiles make of the result."""
    return -(-s.m // s.plan.mr) if rows else -(-s.n // s.plan.nr)

  def in_place(self, s: Matmul, part: str) -> bool:
    """The streamed side `part` is x read in place (`x_rows` with `x_panels`): no panel of it is packed."""
    return part == 'a' and s.plan.x_rows

  def rows_ptr(self, s: Matmul, block: str) -> str:
    """`TJX_MICRO_ROWS`'s x arguments for block `block` (a C expression) of x read in place: x (from the chunk's first
    contraction row k0) and the block's rows in the table of row offsets."""
    return f"b{s.x.src[0].arg}" + (" + k0" if s.plan.chunked else "") + f", roff + {block} * {s.plan.mr}"

  def grouped_chunks(self, s: Matmul, lines: list, pad: str, part: str, ptrs: tuple, chunk: tuple, ids: tuple,
                     frees: list):
    """The chunked packed path: the parallel work is a group of `plan.group` panels of the streamed side; per chunk
    each panel of the group is packed, then every block of the whole side runs against the group's panels (the
    block's chunk is read once from cache for all of them), summing into the group's rows of tiles; in the last
    chunk each tile is stored as soon as it is complete. Every tile adds the same chunks in the same order whatever
    the grouping."""
    plan, t, micro = s.plan, self.type_names[s.dtype], self.micro_kernel(s)
    tile, g, p2, p3 = plan.mr * plan.nr, plan.group, pad + "    ", pad + "      "
    nblocks, other = ('MB', 'NB') if part == 'a' else ('NB', 'MB')
    outer, per, inner = chunk
    size = per * inner * (plan.mr if part == 'a' else plan.nr)      # elements of one packed panel of a chunk
    a_ptr, b_ptr = (f"{p} + g * {size}" if p == "panel" else p for p in ptrs)
    if self.in_place(s, part): a_ptr = self.rows_ptr(s, f"(bg * {g} + g)")
    lines += [f"{pad}  {t}* cl = tjx_alloc({g} * {other} * {tile} * sizeof({t}));",
              self.work_loop(-(-self.blocks(s, part == 'a') // g)),
              f"{pad}  for (int64_t bg = 0; bg < ({nblocks} + {g - 1}) / {g}; bg++) {{",
              f"{p2}const int64_t gn = {nblocks} - bg * {g} < {g} ? {nblocks} - bg * {g} : {g};",
              f"{p2}for (int64_t cc = 0; cc < {plan.chunks}; cc++) {{",
              *_chunk_bounds(p3, per, outer, inner)]
    if self.in_place(s, part): pass                                 # (x read in place: nothing to pack)
    elif self.packs_rows(s, part):
      lines += [f"{p3}for (int64_t g = 0; g < gn; g++) {{", f"{p3}  const int64_t bb = bg * {g} + g;",
                f"{p3}  {t}* dst = panel + g * {size};"]
      self.pack_panel(s, part, lines, p3 + "  ", chunk=True)
      lines.append(f"{p3}}}")
    else:
      lines.append(f"{p3}{t}* dst = panel;")
      self.pack_panel(s, part, lines, p3, chunk=True, group=(g, size))
    # the tiles of one block of the whole side are adjacent (sb * g + g'), in the order the micro-kernels run and
    # the stores write them: a row of the output is written along the whole group's columns at once. The last
    # chunk stores each tile right after its micro-kernel, while the tile is in L1 (a pass of its own after the
    # chunks read the whole row of tiles back from L3: a 1024 matmul's is 0.5 MB a thread)
    p4 = p3 + "  "
    lines += [f"{p3}for (int64_t sb = 0; sb < {other}; sb++) for (int64_t g = 0; g < gn; g++) {{",
              f"{p4}{micro}(kn, {a_ptr}, {b_ptr}, cl + (sb * {g} + g) * {tile}, cc > 0);",
              f"{p4}if (cc < {plan.chunks - 1}) continue;",
              f"{p4}const int64_t bb = bg * {g} + g;",
              f"{p4}const {t}* c = cl + (sb * {g} + g) * {tile};"]
    self.tile_store(s, lines, p4, *ids, t)
    lines += [f"{p3}}}", f"{p2}}}", f"{pad}  }}", f"{pad}  free(panel);", f"{pad}  free(cl);", f"{pad}  }}",
              *(f"{pad}  free({b});" for b in frees), f"{pad}}}"]

  def matmul_direct(self, s: Matmul, lines: list, pad: str) -> None:
    """x is one load at an index affine in the loop variables (a convolution's windows), read in place: its address
    is roff[r] + koff[k], row part and contraction part, two small tables; only y is packed. Unchunked, y is packed
    whole and each block of x runs the whole contraction against every panel of it; chunked, the chunks are
    outermost: each chunk of y is packed (in parallel over its panels), then each block of x adds the chunk into
    its row of result tiles (in chunk order: results do not depend on the thread count)."""
    plan, t = s.plan, self.type_names[s.dtype]
    mr, nr = plan.mr, plan.nr
    p2 = pad + "    "
    kpart, rpart = _index_parts(s)
    rows = plan.chunk * _contraction(s)[1]                    # contraction rows of y packed at a time
    groups = max(plan.split_groups, 1)                         # a split plan packs and sums each group on its own
    lines += [f"{pad}{{",
              f"{pad}  const int64_t M = {s.m}, N = {s.n}, K = {s.k};",
              f"{pad}  const int64_t NB = (N + {nr - 1}) / {nr}, MB = (M + {mr - 1}) / {mr};",
              f"{pad}  {t}* pb = tjx_alloc({groups} * NB * {nr * rows} * sizeof({t}));",
              f"{pad}  int64_t* koff = tjx_alloc(K * sizeof(int64_t));",
              *([f"{pad}  {t}* tiles = tjx_alloc({groups} * MB * NB * {mr * nr} * sizeof({t}));"]
                if plan.chunked else [])]
    self.loop_nest(s.kvars, lines, pad + "  ", lambda p: lines.append(
      f"{p}koff[{self.expr(_flat(s.kvars))}] = {self.expr(kpart)};"))
    lines += [f"#pragma omp parallel if({int(s.parallel)})", f"{pad}  {{"]
    emit = self.direct_split if plan.split_groups else self.direct_chunks if plan.chunked else \
      self.direct_lanes if plan.lane_rows else self.direct_whole
    emit(s, lines, pad + "  ", rpart, rows)
    lines += [f"{pad}  }}", f"{pad}  free(pb);", f"{pad}  free(koff);",
              *([f"{pad}  free(tiles);"] if plan.chunked else []), f"{pad}}}"]

  def direct_pack(self, s: Matmul, lines: list, p: str, rows: int, chunk: bool) -> None:
    """Every panel of y (or of the current chunk of y) packed at pb, in parallel over the panels."""
    lines += ["#pragma omp for schedule(static)", f"{p}for (int64_t bb = 0; bb < NB; bb++) {{",
              f"{p}  {self.type_names[s.dtype]}* dst = pb + bb * {s.plan.nr * rows};"]
    self.pack_panel(s, 'b', lines, p + "  ", chunk=chunk)
    lines.append(f"{p}}}")

  def direct_blocks(self, s: Matmul, lines: list, p: str, rpart: UOp, body: list, same: bool = False) -> None:
    """The parallel loop over blocks ib of x, each with its row offsets, around `body`. With `same` (a loop run
    once per chunk, adding into the blocks' tiles) each thread keeps the same blocks every time, and their tiles
    stay in its cache (`static`)."""
    pragma = "#pragma omp for schedule(static)" if same else self.work_loop(self.blocks(s, True))
    lines += [pragma, f"{p}for (int64_t ib = 0; ib < MB; ib++) {{"]
    self.row_offsets(s, rpart, lines, p + "  ")
    lines += [f"{p}  {b}" for b in body] + [f"{p}}}"]

  def direct_whole(self, s: Matmul, lines: list, p: str, rpart: UOp, rows: int) -> None:
    """y packed whole; each block of x, against every panel, over the whole contraction, then the tile's store.
    With `s.skip`, over the run of the contraction where some row of the block reads x's data, not its padding."""
    mr, nr, t = s.plan.mr, s.plan.nr, self.type_names[s.dtype]
    self.direct_pack(s, lines, p, rows, False)
    run = "kn, {x}, roff, koff + k0, pb + (sb * K + k0) * {nr}" if s.skip else "K, {x}, roff, koff, pb + sb * {nr} * K"
    tile = [f"  {t} c[{mr * nr}] __attribute__((aligned(64)));",
            f"  {self.micro_kernel(s)}({run.format(x=f'b{s.x.src[0].arg}', nr=nr)}, c, 0);"]
    store = self.scoped(lambda out: self.tile_store(s, out, "  ", "ib", "sb", t), p)
    self.direct_blocks(s, lines, p, rpart, ["for (int64_t sb = 0; sb < NB; sb++) {", *tile, *store, "}"])

  def direct_lanes(self, s: Matmul, lines: list, p: str, rpart: UOp, rows: int) -> None:
    """A lane_rows plan: y packed whole; a block is one run of mr consecutive rows of x (from roff[0]), and each
    panel of y gives a tile of its nr columns by the run in vectors (`TJX_MICRO_LANES`), already by columns."""
    mr, nr, t = s.plan.mr, s.plan.nr, self.type_names[s.dtype]
    sfx, vec = self.vector_type(s)
    lanes, vb = s.plan.vector_bytes // s.dtype.itemsize, s.plan.vector_bytes
    name = f"{sfx}_{mr}x{nr}"
    unaligned = f"__attribute__((vector_size({vb}), aligned({s.dtype.itemsize})))"
    self.micro.setdefault(f"{vec}u", f"typedef {t} {vec}u {unaligned};")
    self.micro.setdefault(f"lanes {name}", f"TJX_MICRO_LANES({t}, {vec}, {vec}u, {name}, {mr}, {nr}, {lanes})")
    self.direct_pack(s, lines, p, rows, False)
    lines += [self.work_loop(self.blocks(s, True)), f"{p}for (int64_t ib = 0; ib < MB; ib++) {{",
              f"{p}  int64_t roff[1];", f"{p}  for (int64_t q = 0; q < 1; q++) {{"]   # (row_offset fills roff[q])
    self.row_offset(s, rpart, lines, p + "    ", f"ib * {mr}")
    lines.append(f"{p}  }}")
    if (split := _split_index(s.store.idx)) is not None:     # (the same rows for every panel: tile_store's by_columns)
      lines.append(f"{p}  const int64_t rows = {mr};")
      self.offsets(lines, p + "  ", ("r", "rows", "i", "ib", mr), split[0])
    lines += [f"{p}  for (int64_t sb = 0; sb < NB; sb++) {{",
              f"{p}    {t} ct[{mr * nr}] __attribute__((aligned(64)));",
              f"{p}    tjx_mml_{name}(K, b{s.x.src[0].arg} + roff[0], koff, pb + sb * {nr} * K, ct);"]
    store = self.scoped(lambda out: self.tile_store(s, out, p + "    ", "ib", "sb", t, by_columns=True), p + "    ")
    lines += store + [f"{p}  }}", f"{p}}}"]

  def direct_chunks(self, s: Matmul, lines: list, p: str, rpart: UOp, rows: int) -> None:
    """Chunks outermost: pack the chunk of y, add it into every block's row of tiles; then the tiles' stores."""
    mr, nr, t, plan = s.plan.mr, s.plan.nr, self.type_names[s.dtype], s.plan
    tiles = f"tiles + (ib * NB + sb) * {mr * nr}"
    lines += [f"{p}for (int64_t cc = 0; cc < {plan.chunks}; cc++) {{",
              *_chunk_bounds(p + "  ", plan.chunk, *_contraction(s))]
    self.direct_pack(s, lines, p + "  ", rows, True)
    self.direct_blocks(s, lines, p + "  ", rpart, [
      "for (int64_t sb = 0; sb < NB; sb++)",
      f"  {self.micro_kernel(s)}(kn, b{s.x.src[0].arg}, roff, koff + k0, pb + sb * {nr * rows}, {tiles}, cc > 0);"],
      same=True)
    lines += [f"{p}}}", "#pragma omp for schedule(static)",
              f"{p}for (int64_t ib = 0; ib < MB; ib++) for (int64_t sb = 0; sb < NB; sb++) {{",
              f"{p}  const {t}* c = {tiles};"]
    self.tile_store(s, lines, p + "  ", "ib", "sb", t)
    lines.append(f"{p}}}")

  def direct_split(self, s: Matmul, lines: list, p: str, rpart: UOp, rows: int) -> None:
    """Few panels of y and many chunks (a weight gradient: a small result, a contraction over the batch and the
    positions): the chunks are the parallel work, in the plan's fixed groups. Each group packs its own chunks of y
    and adds them into its own row of tiles, with no barrier between chunks (the chunked form packs a chunk's one
    or two panels on as many threads and waits for them, every chunk); then the groups' tiles are added in order,
    so the result does not depend on the thread count."""
    mr, nr, t, plan = s.plan.mr, s.plan.nr, self.type_names[s.dtype], s.plan
    tile, g = mr * nr, plan.split_groups
    lines += [self.work_loop(g), f"{p}for (int64_t g = 0; g < {g}; g++) {{",
              f"{p}  {t}* pg = pb + g * NB * {nr * rows};",
              f"{p}  {t}* tg = tiles + g * MB * NB * {tile};",
              f"{p}  const int64_t g0 = g * {plan.chunks} / {g}, g1 = (g + 1) * {plan.chunks} / {g};",
              f"{p}  for (int64_t cc = g0; cc < g1; cc++) {{",
              *_chunk_bounds(p + "    ", plan.chunk, *_contraction(s)),
              f"{p}    for (int64_t bb = 0; bb < NB; bb++) {{", f"{p}      {t}* dst = pg + bb * {nr * rows};"]
    self.pack_panel(s, 'b', lines, p + "      ", chunk=True)
    lines += [f"{p}    }}", f"{p}    for (int64_t ib = 0; ib < MB; ib++) {{"]
    self.row_offsets(s, rpart, lines, p + "      ")
    lines += [f"{p}      for (int64_t sb = 0; sb < NB; sb++)",
              f"{p}        {self.micro_kernel(s)}(kn, b{s.x.src[0].arg}, roff, koff + k0, pg + sb * {nr * rows}, "
              f"tg + (ib * NB + sb) * {tile}, cc > g0);",
              f"{p}    }}", f"{p}  }}", f"{p}}}",
              "#pragma omp for schedule(static)",
              f"{p}for (int64_t bs = 0; bs < MB * NB; bs++) {{",
              f"{p}  const int64_t ib = bs / NB, sb = bs % NB;",
              *self.groups_sum(p + "  ", 'tiles', g, "MB * NB", tile, t)]
    self.tile_store(s, lines, p + "  ", "ib", "sb", t)
    lines.append(f"{p}}}")

  def groups_sum(self, p: str, buf: str, groups: int, count: str, tile: int, t: str) -> list:
    """Lines that set tile `c` to result tile `bs` summed over the groups of a split plan, in group order: `buf`
    holds each group's `count` tiles of `tile` elements one group after another."""
    return [f"{p}{t} c[{tile}] __attribute__((aligned(64)));", f"{p}memcpy(c, {buf} + bs * {tile}, sizeof c);",
            f"{p}for (int64_t g = 1; g < {groups}; g++) for (int64_t z = 0; z < {tile}; z++) "
            f"c[z] += {buf}[(g * {count} + bs) * {tile} + z];"]

  def row_offsets(self, s: Matmul, rpart: UOp, lines: list, p: str) -> None:
    """`roff`: the row part of x's address for each row of block ib. With `s.skip` (v, part, lo, hi), also the
    block's run of the contraction, kn rows from k0: the values of v where part + v is in [lo, hi) for some row."""
    lines.append(f"{p}int64_t roff[{s.plan.mr}];")
    if s.skip: lines.append(f"{p}int64_t plo = INT64_MAX, phi = INT64_MIN;")
    lines.append(f"{p}for (int64_t q = 0; q < {s.plan.mr}; q++) {{")
    self.row_offset(s, rpart, lines, p + "  ", f"ib * {s.plan.mr} + q", s.skip[1] if s.skip else None)
    lines.append(f"{p}}}")
    if s.skip:
      (_, _, lo, hi), (values, inner) = s.skip, _contraction(s)
      lines += [f"{p}const int64_t va = {lo} - phi > 0 ? {lo} - phi : 0;",
                f"{p}const int64_t vb = {hi} - plo < {values} ? {hi} - plo : {values};",
                f"{p}const int64_t k0 = va * {inner}, kn = vb > va ? (vb - va) * {inner} : 0;"]

  def row_offset(self, s: Matmul, rpart: UOp, lines: list, p: str, row: str, span: UOp | None = None) -> None:
    """roff[q] = the row part of x's address at row `row` (a C expression); a padding row past the last one reads
    the last row (its results are never stored). With `span`, its least and greatest value in plo and phi."""
    sizes = [v.arg[1] for v in s.ivars]
    lines.append(f"{p}const int64_t r = {row} < M ? {row} : M - 1;")
    for d, v in enumerate(s.ivars):
      stride, part = math.prod(sizes[d + 1:]), "r"
      if stride > 1: part = f"(r / {stride})"
      if d > 0: part = f"({part} % {sizes[d]})"
      lines.append(f"{p}const int64_t {self.name(v)} = {part};")
    self.push_scope(lines, p, set(s.ivars))
    lines.append(f"{p}roff[q] = {self.expr(rpart)};")
    if span is not None:
      lines += [f"{p}const int64_t pq = {self.expr(span)};", f"{p}plo = pq < plo ? pq : plo;",
                f"{p}phi = pq > phi ? pq : phi;"]
    self.scopes.pop()

  def loop_nest(self, vars_: list, lines: list, p: str, body, first: tuple | None = None) -> None:
    """C loops over `vars_` (outermost first) around `body(pad)`, each loop a scope of its own; `first` (C bounds
    lo, hi) limits the outermost loop (a chunk of the contraction)."""
    for d, v in enumerate(vars_):
      lo, hi = first if first and d == 0 else ("0", v.arg[1])
      lines.append(f"{p}for (int64_t {self.name(v)} = {lo}; {self.name(v)} < {hi}; {self.name(v)}++) {{")
      p += "  "
      self.push_scope(lines, p, {v})
    body(p)
    for _ in vars_:
      self.scopes.pop()
      p = p[:-2]
      lines.append(f"{p}}}")

  def chunk_panel(self, s: Matmul, part: str, lines: list, p: str, chunk: tuple, pack: bool = True) -> None:
    """Inside a loop over chunk `cc`: its bounds (outer contraction variable in [c0, c1), k from k0, kn rows)
    and, with `pack`, its panel."""
    outer, per, inner = chunk
    lines += _chunk_bounds(p, per, outer, inner)
    if pack: self.pack_panel(s, part, lines, p, chunk=True)

  def epilogue(self, s: Matmul, p: str) -> list:
    """The epilogue's statements for one result, cv at io + jo (the row and column parts of the store's index) where
    `_split_index` splits it, else at the kernel's own index of result (i, j)."""
    # (an epilogue that loads another array at the store's own index, the mask of a ReLU's gradient, reads it at
    # io + jo too: through the kernel's index it would divide per element)
    at = {s.store.idx: sym.add(_IO, _JO)}
    sts = s.stores if _split_index(s.store.idx) is None else [
      Store(st.buf, at[s.store.idx], st.value.substitute(at), st.valid) for st in s.stores]
    return self.scoped(lambda out: [self.stmt(st, out, len(p) // 2 + 3) for st in sts], p + "    ")

  def tile_store(self, s: Matmul, lines: list, p: str, ib: str, jb: str, t: str, defer: list | None = None,
                 by_columns: bool = False) -> None:
    """The epilogue of one result tile `c` (block ib of rows, jb of columns): the store for each element in range.
    Where the store's index is a row part plus a column part (`_split_index`), both parts of the tile are tables
    (no index division per element), and the tile is stored column by column unless the output is contiguous
    along its columns (a convolution's output is contiguous along positions, the rows of a direct matmul); a block
    whose rows are consecutive in the output then stores each column as one run of MR elements. `defer`: lines
    that take a whole tile stored row by row in one run a row instead (`overlapped_tiles`). `by_columns`: the tile is
    `ct` already, column q at ct[q * mr] (a lane_rows plan's), read as such wherever it is stored."""
    mr, nr = s.plan.mr, s.plan.nr
    split, store = _split_index(s.store.idx), self.epilogue(s, p)
    # a whole tile where the tiles divide the output (constant bounds: the store loops unroll and vectorize)
    lines += [f"{p}const int64_t rows = " + (f"M - {ib} * {mr} < {mr} ? M - {ib} * {mr} : {mr};" if s.m % mr else
                                             f"{mr};"),
              f"{p}const int64_t cols = " + (f"N - {jb} * {nr} < {nr} ? N - {jb} * {nr} : {nr};" if s.n % nr else
                                             f"{nr};")]
    loops = [("r", "rows", "i", ib, mr), ("q", "cols", "j", jb, nr)]
    if split is not None:
      for which, part in zip(loops, split):
        if not (by_columns and which[2] == 'i'): self.offsets(lines, p, which, part)
      if not _unit_stride(split[1], 'j'): loops.reverse()
    (v0, n0, *_), (v1, n1, *_) = loops

    tile = f"ct[q * {mr} + r]" if by_columns else f"c[r * {nr} + q]"
    def nest(p: str, n1: str, io: str, jo: str = "joff[q]", cv: str = tile) -> list:
      # a run (jo or io one more each step) is vectorized (in OpenMP's outlined function the kernel's pointers have
      # lost `restrict`: an epilogue that loads other arrays, an optimizer's update, ran scalar without `omp simd`)
      return [f"{p}for (int64_t {v0} = 0; {v0} < {n0}; {v0}++) {{",
              *(["#pragma omp simd"] if "+" in (jo if v1 == "q" else io) else []),
              f"{p}  for (int64_t {v1} = 0; {v1} < {n1}; {v1}++) {{",
              f"{p}    const int64_t i = {ib} * {mr} + r;", f"{p}    const int64_t j = {jb} * {nr} + q;",
              *([f"{p}    const int64_t io = {io}, jo = {jo};"] if split is not None else []),
              f"{p}    const {t} cv = {cv};", *store,
              f"{p}  }}", f"{p}}}"]
    if split is None:
      lines += nest(p, n1, "ioff[r]")
      return
    if v1 != "r":
      # stored row by row: where the block's columns are consecutive in the output (a row-major result), each row is
      # one run of nr elements from joff[0]
      if defer: lines += [f"{p}if (rows == {mr} && cols == {nr} && tjx_consecutive(joff, {nr})) {{", *defer,
                          f"{p}}} else"]
      lines += [f"{p}if (cols == {nr} && tjx_consecutive(joff, {nr})) {{",
                *nest(p + "  ", str(nr), "ioff[r]", "joff[0] + q"), f"{p}}} else {{",
                *nest(p + "  ", n1, "ioff[r]"), f"{p}}}"]
      return
    # stored column by column: the tile transposed first (`transpose_fn`), so a column is a run of ct; where the
    # block's rows are consecutive in the output (a convolution's block within one image), each column is one run of
    # mr elements from ioff[0], a vector store instead of mr scattered ones
    tr, mrp = ('', mr) if by_columns else self.tile_transpose(s)
    cv = f"ct[q * {mrp} + r]" if tr or by_columns else f"c[r * {nr} + q]"
    if tr: lines += [f"{p}{t} ct[{nr * mrp}] __attribute__((aligned(64)));", f"{p}{tr}(c, ct);"]
    lines += [f"{p}if (rows == {mr} && tjx_consecutive(ioff, {mr})) {{",
              *nest(p + "  ", str(mr), "ioff[0] + r", cv=cv), f"{p}}} else {{",
              *nest(p + "  ", n1, "ioff[r]", cv=cv), f"{p}}}"]

  def offsets(self, lines: list, p: str, which: tuple, part: UOp) -> None:
    """`ioff` or `joff` (`which`: its loop variable, count, template variable, block and size): a tile's row or
    column part of the store's index, one entry a row or column."""
    v, n, name, blk, size = which
    lines += [f"{p}int64_t {name}off[{size}];", f"{p}for (int64_t {v} = 0; {v} < {n}; {v}++) {{",
              f"{p}  const int64_t {name} = {blk} * {size} + {v};"]
    lines += self.scoped(lambda out: out.append(f"{p}  {name}off[{v}] = {self.expr(part)};"), p + "  ")
    lines.append(f"{p}}}")

  def vector_type(self, s: Matmul, lanes_of: str = '') -> tuple[str, str]:
    """(the suffix of the matmul's dtype, the name of the plan's vector type): `vector_type_of` its dtype and width."""
    return self.vector_type_of(s.dtype, s.plan.vector_bytes, lanes_of)

  def vector_type_of(self, dtype, vb: int, lanes_of: str = '') -> tuple[str, str]:
    """(the suffix of `dtype`, the name of its vector type of `vb` bytes), its typedef recorded in `self.micro` for
    `render`; with `lanes_of` an integer C type, the vector of that type with as many lanes (shuffle masks)."""
    sfx = 'f64' if dtype is dtypes.float64 else 'f32'
    t, vec = ((lanes_of, f"tjx_vi{8 * dtype.itemsize}_{vb}") if lanes_of else
              (self.type_names[dtype], f"tjx_v{sfx}_{vb}"))
    self.micro.setdefault(vec, f"typedef {t} {vec} __attribute__((vector_size({vb})));")
    return sfx, vec

  def block_transpose(self, s: Matmul) -> tuple[str, int]:
    """`block_transpose_of` the matmul's dtype and vector width."""
    return self.block_transpose_of(s.dtype, s.plan.vector_bytes)

  def block_transpose_of(self, dtype, vb: int) -> tuple[str, int]:
    """(the name of the `block_transpose_fn` of `dtype` in vectors of `vb` bytes, recorded in `self.micro` for
    `render`, without its prefix; its lanes), or ('', 0) where such vectors do not hold a power of two lanes."""
    lanes = vb // dtype.itemsize
    if lanes < 2 or lanes & (lanes - 1): return '', 0
    (sfx, vec), (_, mask) = self.vector_type_of(dtype, vb), self.vector_type_of(dtype, vb, f"int{8 * dtype.itemsize}_t")
    name = f"{sfx}_{vb}"
    self.micro.setdefault(f"trb {name}", block_transpose_fn(name, self.type_names[dtype], vec, mask, lanes))
    return name, lanes

  def transpose(self, s: Transpose, lines: list, pad: str) -> None:
    """A `Transpose` statement: its lanes x lanes blocks through `block_transpose_fn` straight into the destination,
    or with `stream` into a block on the stack whose rows are then streamed (tjx_stream) to theirs."""
    name, lanes = self.block_transpose_of(s.src.dtype, s.lanes * s.src.dtype.itemsize)
    src, dst, rows = f"b{s.src.arg} + {self.expr(s.src_base)}", f"b{s.dst.arg} + {self.expr(s.dst_base)}", s.rows
    each = f"for (int r0 = 0; r0 < {rows}; r0 += {lanes}) tjx_trb_{name}({src} + r0 * {s.src_stride}LL, "
    if not s.stream:
      lines.append(f"{pad}{each}{s.src_stride}, {dst} + r0, {s.dst_stride}, {lanes});")
      return
    t, sfx = self.type_names[s.src.dtype], self.vector_type_of(s.src.dtype, s.lanes * s.src.dtype.itemsize)[0]
    lines += [f"{pad}{{",
              f"{pad}  {t} tb[{lanes * rows}] __attribute__((aligned(64)));",
              f"{pad}  {each}{s.src_stride}, tb + r0, {rows}, {lanes});",
              f"{pad}  for (int c = 0; c < {lanes}; c++)",
              f"{pad}    tjx_stream_{sfx}({dst} + c * {s.dst_stride}LL, tb + c * {rows}, {rows});",
              f"{pad}}}"]

  def tile_transpose(self, s: Matmul) -> tuple[str, int]:
    """(the name of the plan's tile transpose, `transpose_fn`, recorded in `self.micro` for `render`; the rows of its
    output's columns), or ('', 0) where the plan's vectors do not divide its tile's columns in a power of two lanes."""
    block, lanes = self.block_transpose(s)
    if not block or s.plan.nr % lanes: return '', 0
    name = f"{self.vector_type(s)[0]}_{s.plan.mr}x{s.plan.nr}"
    self.micro.setdefault(f"tr {name}", transpose_fn(name, block, self.type_names[s.dtype], lanes, s.plan.mr,
                                                     s.plan.nr))
    return f"tjx_tr_{name}", -(-s.plan.mr // lanes) * lanes

  def split_k(self, s: Matmul, lines, pad, part, a_ptr, b_ptr, t, chunk, ib, jb, frees) -> None:
    """The split-contraction matmul: the plan's fixed groups of chunks run in parallel, each into its own row of
    tiles; the groups are then added in order, so the result does not depend on the thread count."""
    p2, plan, micro = pad + "    ", s.plan, self.micro_kernel(s)
    tile_size = plan.mr * plan.nr
    nblocks, other = ('MB', 'NB') if part == 'a' else ('NB', 'MB')
    g = plan.split_groups
    lines += [self.work_loop(g),
              f"{pad}  for (int64_t g = 0; g < {g}; g++) {{",
              f"{p2}{t}* dst = panel;",
              f"{p2}const int64_t nc = {plan.chunks}, g0 = g * nc / {g}, g1 = (g + 1) * nc / {g};",
              f"{p2}for (int64_t bb = 0; bb < {nblocks}; bb++) for (int64_t cc = g0; cc < g1; cc++) {{"]
    self.chunk_panel(s, part, lines, p2 + "  ", chunk, pack=not self.in_place(s, part))
    tile = f"parts + ((g * {nblocks} + bb) * {other} + sb) * {tile_size}"
    lines += [f"{p2}  for (int64_t sb = 0; sb < {other}; sb++)",
              f"{p2}    {micro}(kn, {a_ptr}, {b_ptr}, {tile}, cc > g0);",
              f"{p2}}}",
              f"{pad}  }}",
              "#pragma omp for schedule(static)",
              f"{pad}  for (int64_t bs = 0; bs < {nblocks} * {other}; bs++) {{",
              f"{p2}const int64_t bb = bs / {other}, sb = bs % {other};",
              *self.groups_sum(p2, 'parts', g, f"{nblocks} * {other}", tile_size, t)]
    self.tile_store(s, lines, p2, ib, jb, t)
    lines += [f"{pad}  }}", f"{pad}  free(panel);", f"{pad}  }}", f"{pad}  free(parts);",
              *(f"{pad}  free({b});" for b in frees)]
    lines.append(f"{pad}}}")

  def micro_kernel(self, s: Matmul, prefetch: bool = False) -> str:
    """The name of the plan's micro-kernel (`prefetch`: its prefetching form, whose extra arguments are a table of
    line addresses, `prefetch_table`); its instantiation is recorded in `self.micro` for `render`."""
    plan, (sfx, vec), t = s.plan, self.vector_type(s), self.type_names[s.dtype]
    letter = 'd' if plan.direct else 'r' if plan.x_rows else 'p' if prefetch else ''
    kinds = {'d': "TJX_MICRO_DIRECT", 'r': "TJX_MICRO_ROWS", 'p': "TJX_MICRO_PF"}
    name, kind = f"{sfx}_{plan.mr}x{plan.nr}", kinds.get(letter, "TJX_MICRO")
    self.micro.setdefault(f"{kind} {name}", f"{kind}({t}, {vec}, {name}, {plan.mr}, {plan.nr})")
    return f"tjx_mm{letter}_{name}"
