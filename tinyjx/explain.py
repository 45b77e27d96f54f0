"""explain: where each line of a jitted function went, one row per jaxpr equation.

`explain(f)(*args)` (or `jit(f).lower(*args).explain()`) traces `f` as jit does, with provenance recorded
(tinyjx.provenance), lowers and compiles the jaxpr for the device, runs the executable a few times timing each
kernel, and returns an `Explanation`: per equation its text, the user's source line, the transforms that made
it, the kernel it fused into and that kernel's flops, bytes and median time; then the kernels with their
generated source. `str()` is a text table, `.rows` / `.kernels` / `.to_records()` are plain data for tools.

Which kernel an equation went to. The lowering rewrites the graph before it schedules (simplify, decompose, then
`fold_permutes` in `lower/__init__.py`), so the nodes a `Kernel` lists (`Kernel.nodes`, what DEBUG=3 prints) are
the equations' *images*, not the equations. The rule used here:
1. the image of an equation is what the same two local rewrites (`pm_simplify`, then `pm_decompose`) make of
   it; they rewrite bottom-up, so an equation's image is the same whether it is rewritten alone or inside the
   whole program. `fold_permutes` rebuilds whole subgraphs; it runs again here with the rebuilt nodes recorded,
   and an image it rebuilt is replaced by its copy (a node it dropped maps where its rebuilt reader maps);
2. the kernel of an equation is the kernel whose `nodes` hold its image (the one that writes it, if several
   compute it);
3. an image that a runtime step computes (control flow, a collective, a callback) is `host step: <primitive>`;
4. an image that is a leaf (a constant, an input), the image of one of the equation's operands (`x * 1`), or
   absent from the lowered program (an inlined checkpoint call) is `folded`; anything else that no kernel lists
   (a view of an input returned as it is, index arithmetic) is `view`.
Time is measured on the call's arguments; where they are abstract (ShapeDtypeStructs) on zeros.
"""
from __future__ import annotations
import json, os, statistics
import numpy as np
from tinyjx import provenance, tracing, uop as uop_module
from tinyjx.uop import Ops, GroupOp, toposort, prim_name

FOLDED, VIEW, STEP = 'folded', 'view', 'host step: '
TIMED_RUNS = 5

# ---------------------------------------------------------------- the data

class Explanation:
  """What `explain` found: `rows` (one dict per jaxpr equation) and `kernels` (one dict per kernel).

  Row keys: index, eqn, primitive, aval, file, line, source ('file:line'), code, transform ('' for the user's own
  op, else e.g. 'grad of vmap'), kernel (a kernel name, 'host step: scan', 'folded' or 'view'), flops, bytes,
  time_us (the kernel's; None where the row has no kernel). Kernel keys: index, name, flops, bytes, time_us,
  eqns (the row indices it computes), source (its generated code).
  """
  def __init__(self, name: str, device: str, rows: list, kernels: list, steps: list):
    self.name, self.device, self.rows, self.kernels, self.steps = name, device, rows, kernels, steps

  def to_records(self) -> dict:
    """{'rows': [...], 'kernels': [...]}: plain JSON-serializable data."""
    return {'rows': [dict(r) for r in self.rows], 'kernels': [dict(k) for k in self.kernels]}

  def to_json(self, **kw) -> str: return json.dumps(self.to_records(), **kw)

  def __str__(self) -> str: return render(self)
  def __repr__(self) -> str:
    return f"<Explanation of {self.name}: {len(self.rows)} equations, {len(self.kernels)} kernels>"
  def _repr_pretty_(self, p, cycle): p.text(str(self))

# ---------------------------------------------------------------- the entry points

def explain(fun, **jit_kwargs):
  """`explain(f, **jit_kwargs)(*args)`: an `Explanation` of `jit(f, **jit_kwargs)` at these arguments.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> e = tinyjx.explain(lambda x: jnp.sum(jnp.tanh(x * 2.0)))(jnp.ones(8))
  >>> [r['primitive'] for r in e.rows], [k['name'] for k in e.kernels]
  (['broadcast_in_dim', 'mul', 'tanh', 'reduce_sum'], ['k0_reduce_sum'])
  >>> print(e)  # doctest: +SKIP
  """
  from tinyjx.transforms.jit import JitFunction, jit, spec_aval
  jf = fun if isinstance(fun, JitFunction) and not jit_kwargs else jit(getattr(fun, 'fun', fun), **jit_kwargs)
  def explained(*args, **kwargs):
    return explain_call(jf, jf.bind(args, kwargs, spec_aval))
  return explained

def explain_call(fn, call, runs: int = TIMED_RUNS) -> Explanation:
  """The Explanation of jitted function `fn` for the bound call `call` (jit's `_Call`)."""
  from tinyjx.lower import lower, executable
  dev = call.device
  if not hasattr(dev, 'renderer'):
    raise NotImplementedError(f"explain: device {dev.name} runs programs without kernels, so there is nothing to "
                              "explain; run with TINYJX_DEVICE=CPU (or jit(f, device='CPU'))")
  with provenance.record():
    entry = fn.trace_call(call)
  if entry.inline:
    raise ValueError(f"explain: {fn.label} closes over a value of an enclosing transform and cannot be compiled on "
                     "its own; explain the enclosing function instead")
  jaxpr = entry.jaxpr
  st = lower(dev, jaxpr.params, jaxpr.roots)
  exe = executable(dev, st, jaxpr)
  eqns = equations(jaxpr)
  where = assign([n for n, _ in eqns], list(jaxpr.roots), st)
  times = measure(exe, _inputs(call, dev), runs)
  return build(fn.label, dev.name, eqns, where, st, times)

# ---------------------------------------------------------------- equations, as make_jaxpr prints them

def equations(jaxpr) -> list[tuple]:
  """(node, text) per equation, in the order and with the variable names of `make_jaxpr`'s printout."""
  names, gen = {}, tracing.var_names()
  def name(u):
    if u.op is Ops.CONST and u.shape == (): return f"{u.arg[0]!r}:{u.dtype.short}[]"
    if u not in names: names[u] = next(gen)
    return names[u]
  nodes = toposort(list(jaxpr.roots))
  params = set(jaxpr.params)
  consts = [n for n in nodes if n.op is Ops.BUFFER or (n.op is Ops.PARAM and n not in params)]
  for u in consts + list(jaxpr.params): name(u)
  out = []
  for n in nodes:
    if n in params or n.op in (Ops.BUFFER, Ops.PARAM) or (n.op is Ops.CONST and n.shape == ()): continue
    if n.op is Ops.CONST:
      out.append((n, f"{name(n)}:{tracing.aval_str(n)} = broadcast_in_dim {n.arg[0]!r}"))
      continue
    rhs = " ".join(name(s) for s in n.src)
    out.append((n, f"{name(n)}:{tracing.aval_str(n)} = {prim_name(n)}{tracing.params_text(n)} {rhs}".rstrip()))
  return out

# ---------------------------------------------------------------- kernel assignment (the rule in the module doc)

class _Rebuilt:
  """A watcher for one `fold_permutes` run: old node -> the node it was rebuilt as (passes others on)."""
  def __init__(self, prev):
    self.prev, self.map = prev, {}
  def new(self, node):
    if self.prev is not None: self.prev.new(node)
  def seen(self, node):
    if self.prev is not None: self.prev.seen(node)
  def derived(self, new, old):
    self.map[old] = new
    for a, b in zip(old.src, new.src):
      if a is not b: self.map.setdefault(a, b)     # a replaced source: a key of fold_permutes' mapping
    if self.prev is not None: self.prev.derived(new, old)
  def attributed(self, node, phase, rule, *args, **kw): return rule(*args)

def images(nodes: list, roots: list, final_roots: list) -> dict:
  """node -> the node the lowering turned it into (see the module doc)."""
  from tinyjx.rewrite import graph_rewrite
  from tinyjx.lower.simplify import pm_simplify, pm_decompose, fold_permutes
  todo = list(roots) + [n for n in nodes if n not in set(roots)]
  dec = list(graph_rewrite(list(graph_rewrite(todo, pm_simplify, name="explain")), pm_decompose, name="explain"))
  prev, watch = uop_module.watcher, _Rebuilt(uop_module.watcher)
  uop_module.watcher = watch
  try:
    folded = fold_permutes(dec[:len(roots)])
  finally:
    uop_module.watcher = prev
  for a, b in zip(dec, folded):
    if a is not b: watch.map.setdefault(a, b)   # a root fold_permutes replaced (substitute tells no one of those)
  fold = watch.map if [id(r) for r in folded] == [id(r) for r in final_roots] else {}
  alive = set(toposort(list(final_roots)))
  readers: dict = {}
  for n in toposort(dec[:len(roots)]):
    for s in n.src: readers.setdefault(s, []).append(n)
  def final(d):
    if d in fold: return fold[d]
    if d in alive: return d
    for r in readers.get(d, ()):
      if r in fold: return fold[r]
    return d
  return {n: final(d) for n, d in zip(todo, dec)}

def assign(eqns: list, roots: list, st) -> dict:
  """eqn node -> ('kernel', index) | ('step', primitive) | (FOLDED,) | (VIEW,)."""
  from tinyjx.lower.schedule import StepItem
  srcs = {s for n in eqns for s in n.src}
  img = images(list(eqns) + [s for s in srcs if s not in set(eqns)], roots, st.roots)
  computed: dict = {}
  for i, k in enumerate(st.kernels):
    for n in k.nodes: computed.setdefault(n, []).append(i)
  writer = {st.slot_of[n]: n for n in st.slot_of}
  steps = {}
  for it in st.items:
    if isinstance(it, StepItem):
      for n in [it.node] + [o for o in it.outs if o is not None]: steps[n] = prim_name(it.node)
  alive = set(toposort(list(st.roots)))
  out = {}
  for e in eqns:
    d = img[e]
    if d in computed:
      ks = computed[d]
      writers = [i for i in ks if any(writer.get(s) is d for s in st.kernels[i].outs)]
      out[e] = ('kernel', (writers or ks)[0])
    elif d in steps: out[e] = ('step', steps[d])
    elif d.op in GroupOp.Leaf or d not in alive or any(img.get(s) is d for s in e.src): out[e] = (FOLDED,)
    else: out[e] = (VIEW,)
  return out

# ---------------------------------------------------------------- timing

def _inputs(call, dev) -> list:
  """One device buffer per dynamic leaf: the call's arguments, or zeros where they are abstract."""
  from tinyjx.transforms.jit import input_buffers, host_buffer
  from tinyjx.array import Array
  avals = call.key[1]
  concrete = all(isinstance(x, (Array, np.ndarray, np.generic, bool, int, float)) for x in call.leaves)
  if concrete: return input_buffers(list(call.leaves), avals, dev)
  return [host_buffer(np.zeros(shape, dt.np), dt, dev) for shape, dt, _ in avals]

def measure(exe, inputs: list, runs: int) -> dict:
  """kernel index -> median seconds over `runs` runs timed kernel by kernel (the executable's `timing_hook`,
    the timing DEBUG=2 prints), after one untimed run."""
  exe.run(inputs)
  seconds: dict = {}
  def keep(times):
    for name, kind, _, dt in times:
      if kind == 'kernel': seconds.setdefault(name, []).append(dt)
  for _ in range(runs):
    exe.timing_hook = keep
    exe.run(inputs)
  index = {k.name: i for i, k in enumerate(exe.kernels)}
  return {index[n]: statistics.median(ts) for n, ts in seconds.items() if n in index}

# ---------------------------------------------------------------- records

def build(name: str, device: str, eqns: list, where: dict, st, times: dict) -> Explanation:
  rows, per_kernel = [], {i: [] for i in range(len(st.kernels))}
  for i, (node, text) in enumerate(eqns):
    site = provenance.site_of(node)
    place = where[node]
    k = st.kernels[place[1]] if place[0] == 'kernel' else None
    if k is not None: per_kernel[place[1]].append(i)
    t = times.get(place[1]) if k is not None else None
    rows.append({
      'index': i, 'eqn': " ".join(text.split()), 'primitive': _primitive(node), 'aval': tracing.aval_str(node),
      'file': site.file if site else None, 'line': site.line if site else None,
      'source': f"{os.path.basename(site.file)}:{site.line}" if site else '', 'code': site.code if site else '',
      'transform': site.transform if site else '',
      'kernel': k.name if k is not None else (STEP + place[1] if place[0] == 'step' else place[0]),
      'flops': int(k.flops) if k is not None else None, 'bytes': int(k.nbytes) if k is not None else None,
      'time_us': round(t * 1e6, 3) if t is not None else None})
  sources = _kernel_sources(st)
  kernels = [{'index': i, 'name': k.name, 'flops': int(k.flops), 'bytes': int(k.nbytes),
              'time_us': round(times[i] * 1e6, 3) if i in times else None, 'eqns': per_kernel[i],
              'source': sources.get(k.name, '')} for i, k in enumerate(st.kernels)]
  steps = sorted({r['kernel'] for r in rows if r['kernel'].startswith(STEP)})
  return Explanation(name, device, rows, kernels, steps)

def _primitive(node) -> str:
  return 'broadcast_in_dim' if node.op is Ops.CONST else prim_name(node)   # as make_jaxpr prints a constant

def _kernel_sources(st) -> dict:
  """kernel name -> its function in the generated translation unit (from its signature to the next kernel's)."""
  src, out = st.source, {}
  starts = sorted((src.find(f" {k.name}("), k.name) for k in st.kernels)
  starts = [(p, n) for p, n in starts if p >= 0]
  for j, (p, n) in enumerate(starts):
    begin = src.rfind("\n", 0, p) + 1
    end = src.rfind("\n", 0, starts[j + 1][0]) + 1 if j + 1 < len(starts) else _end_of_function(src, p)
    out[n] = src[begin:end].rstrip()
  return out

def _end_of_function(src: str, start: int) -> int:
  """The end of the brace-balanced function that opens after `start`."""
  depth, i = 0, src.find("{", start)
  while 0 <= i < len(src):
    depth += {'{': 1, '}': -1}.get(src[i], 0)
    if depth == 0: return i + 1
    i += 1
  return len(src)

# ---------------------------------------------------------------- text

COLUMNS = [('#', 'index', 3), ('equation', 'eqn', 30), ('source', 'where', 26), ('transform', 'transform', 12),
           ('kernel', 'kernel', 16), ('flops', 'flops', 6), ('bytes', 'bytes', 6), ('us', 'time_us', 7)]
WIDTH = sum(w for _, _, w in COLUMNS) + 2 * (len(COLUMNS) - 1)   # 120

def _cell(v, width: int) -> str:
  s = '' if v is None else (_short(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v))
  return s if len(s) <= width else s[:width - 1] + '…'

def _short(v) -> str:
  if isinstance(v, float): return f"{v:.1f}"
  for unit, div in (('G', 1e9), ('M', 1e6), ('k', 1e3)):
    if abs(v) >= div * 10: return f"{v / div:.0f}{unit}"
  return str(v)

def _line(cells: list) -> str:
  """Cells padded to their column's width: text columns left-aligned, the numbers right-aligned."""
  parts = [c.ljust(w) if i < 5 else c.rjust(w) for i, (c, (_, _, w)) in enumerate(zip(cells, COLUMNS))]
  return "  ".join(parts).rstrip()

def _row_cells(r: dict) -> list:
  where = f"{r['source']} {r['code']}".strip()
  return [_cell(where if key == 'where' else r[key], w) for _, key, w in COLUMNS]

def render(e: Explanation) -> str:
  """The table (one line per equation, at most 120 columns), then every kernel with its source."""
  head = f"explain {e.name} on {e.device}: {len(e.rows)} equations, {len(e.kernels)} kernels"
  if e.steps: head += f", host steps: {', '.join(s[len(STEP):] for s in e.steps)}"
  lines = [head, _line([h for h, _, _ in COLUMNS])] + [_line(_row_cells(r)) for r in e.rows] + [""]
  for k in e.kernels:
    t = f", {k['time_us']:.1f} us" if k['time_us'] is not None else ""
    lines += [f"--- {k['name']}: {k['flops']} flops, {k['bytes']} bytes{t}; equations {k['eqns']}", k['source'], ""]
  return "\n".join(lines).rstrip() + "\n"

from tinyjx.transforms import jit as _jit
_jit.explainer = explain_call   # `jit(f).lower(x).explain()` calls here
