"""recording: what the VIZ page shows of one program, gathered while it is lowered and run once.

A `Recording` is installed as `tinyjx.rewrite.recorder` and `tinyjx.lower.observer` for one lowering (in the
thread that lowers; other threads and programs lowered inside it, such as control-flow branches, are not
recorded). It sees each pass start and finish, and each rule that fires inside a `graph_rewrite`; after the
first run it is handed the step times. `data()` is the page's JSON for the program:

  name, device, n_eqns               the jitted function and the jaxpr's equation count
  nodes: {id: {op, aval, kind, text}}  every node any graph below shows (ids are stable across passes: UOps are
                                     hash-consed, so an unchanged node keeps its id); kind is input, const or eqn
  jaxpr: graph                       graph = {nodes: [id], edges: [[src, dst]], outs: [id]}, nodes in
                                     topological order; scalar constants are folded into their users' text
  passes: [{name, ms, summary, detail, graph, added, removed, kernel_of, rewrites}]
                                     added/removed: node ids against the previous pass's graph; rewrites: one per
                                     graph_rewrite call, {name, before, after, rules: [{rule, fires, added, removed}]}
  kernels: [{name, flops, bytes, eqns, nodes, source}]   eqns as `prim:aval` (DEBUG=3's list), nodes as ids
  timeline: [{name, kind, start_us, dur_us, kernel}]     kernel is its index in kernels, -1 for a runtime step

A rule's `added` counts the nodes its replacements brought that are in the rewritten graph and were not in the
input; `removed` the input nodes it replaced that are gone (scalar constants are not counted: they are not
drawn). The rest of the change (nodes rebuilt because a source changed) is the row `(rebuilt over new
sources)`, so each column sums to the call's whole change.
"""
from __future__ import annotations
import os, threading, time
from tinyjx.uop import UOp, Ops, toposort, prim_name

def _rule_name(fn) -> str:
  """A rule by its function name, or `file.py:line` for a lambda."""
  name = getattr(fn, '__name__', type(fn).__name__)
  code = getattr(fn, '__code__', None)
  if name != '<lambda>' or code is None: return name
  return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"

def _is_folded(u: UOp) -> bool:
  """Scalar constants are shown inside their users, as the jaxpr printer shows them."""
  return u.op is Ops.CONST and u.shape == ()

class Recording:
  """The hooks of one recorded lowering; every hook catches its own errors (see `broken`)."""
  def __init__(self, name: str, device, params, roots, n_effects: int = 0):
    self.name, self.device, self.thread = name, device, threading.get_ident()
    self.params = set(params)
    self.ids: dict = {}
    self.nodes: dict = {}
    self.passes: list = []
    self.kernels: list = []
    self.timeline: list = []
    self.depth, self.current, self.t0 = 0, None, 0.0
    self.broken: BaseException | None = None
    self.fired: list = []         # per open graph_rewrite call: the (rule, node, replacement) that fired
    self.jaxpr = self.graph(list(roots))
    self.n_eqns = sum(1 for i in self.jaxpr['nodes'] if self.nodes[i]['kind'] == 'eqn')
    self.last = self.jaxpr

  # --- graphs ---
  def node_id(self, u: UOp) -> int:
    i = self.ids.get(u)
    if i is None:
      i = self.ids[u] = len(self.ids)
      self.nodes[i] = self.describe(u)
    return i

  def describe(self, u: UOp) -> dict:
    from tinyjx.tracing import aval_str
    if u.op is Ops.PARAM and u in self.params: kind = 'input'
    elif u.op in (Ops.PARAM, Ops.BUFFER): kind = 'const'
    else: kind = 'eqn'
    op = 'broadcast_in_dim' if u.op is Ops.CONST else prim_name(u)
    args = [repr(s.arg[0]) if _is_folded(s) else f"%{self.node_id(s)}" for s in u.src]
    return {'op': op, 'aval': aval_str(u), 'kind': kind, 'text': f"{op}{_params(u)} {' '.join(args)}".rstrip()}

  def graph(self, roots: list) -> dict:
    nodes = [u for u in toposort(roots) if not _is_folded(u)]
    ids = [self.node_id(u) for u in nodes]
    edges = [[self.ids[s], self.ids[u]] for u in nodes for s in u.src if not _is_folded(s)]
    return {'nodes': ids, 'edges': edges, 'outs': [self.node_id(r) for r in roots if not _is_folded(r)]}

  def mine(self) -> bool:
    """Whether a hook call belongs to this recording: its thread, at the top level, and not broken."""
    return self.broken is None and self.depth == 1 and threading.get_ident() == self.thread

  def fail(self, e: BaseException) -> None:
    self.broken = self.broken or e

  # --- tinyjx.lower.observer ---
  def pass_start(self, name: str) -> None:
    if threading.get_ident() != self.thread: return
    self.depth += 1
    if self.depth == 1: self.current, self.t0 = {'name': name, 'rewrites': []}, time.perf_counter()

  def pass_done(self, name: str, st) -> None:
    if threading.get_ident() != self.thread: return
    try:
      if self.mine(): self.finish_pass(st)
    except Exception as e:   # noqa: BLE001 - VIZ must never break the computation
      self.fail(e)
    finally:
      self.depth -= 1

  def finish_pass(self, st) -> None:
    p = self.current
    p['ms'] = (time.perf_counter() - self.t0) * 1e3
    p['graph'] = g = self.graph(list(st.roots or st.outs))
    before, after = set(self.last['nodes']), set(g['nodes'])
    p['added'], p['removed'] = [i for i in g['nodes'] if i not in before], sorted(before - after)
    p['kernel_of'] = {self.ids[n]: k for k, kern in enumerate(st.kernels) for n in kern.nodes if n in self.ids}
    p['summary'], p['detail'] = _summary(p['name'], st, len(before), len(after))
    self.passes.append(p)
    self.last = g

  # --- tinyjx.rewrite.recorder ---
  def noter(self, name: str):
    """The `note(fn, node, replacement)` for one graph_rewrite call, or None to leave the call unrecorded."""
    if not self.mine(): return None
    fired: list = []
    self.fired.append(fired)      # a stack: a rule may run a graph_rewrite of its own
    return lambda fn, u, out: fired.append((fn, u, out))

  def rewrote(self, name: str, roots, outs) -> None:
    try:
      if self.mine(): self.current['rewrites'].append(self.rule_counts(name, list(roots), list(outs)))
    except Exception as e:   # noqa: BLE001
      self.fail(e)

  def rule_counts(self, name: str, roots: list, outs: list) -> dict:
    before = {n for n in toposort(roots) if not _is_folded(n)}   # counted as the graphs are drawn
    after = {n for n in toposort(outs) if not _is_folded(n)}
    rows: dict = {}
    seen, gone = set(before), before - after
    for fn, u, out in self.fired.pop():
      row = rows.setdefault(_rule_name(fn), {'rule': _rule_name(fn), 'fires': 0, 'added': 0, 'removed': 0})
      row['fires'] += 1
      row['added'] += sum(1 for n in _new_nodes(out, seen) if n in after)
      if u in gone:
        row['removed'] += 1
        gone.discard(u)
    added = len(after - before) - sum(r['added'] for r in rows.values())
    if added or gone:
      rows['(rebuilt)'] = {'rule': '(rebuilt over new sources)', 'fires': 0, 'added': added, 'removed': len(gone)}
    return {'name': name, 'before': len(before), 'after': len(after), 'rules': list(rows.values())}

  # --- after lowering and the first run ---
  def lowered(self, st) -> None:
    for k in st.kernels:
      from tinyjx.tracing import aval_str
      self.kernels.append({'name': k.name, 'flops': int(k.flops), 'bytes': int(k.nbytes),
                           'eqns': [f"{prim_name(n)}:{aval_str(n)}" for n in k.nodes if n.op is not Ops.CONST],
                           'nodes': [self.ids[n] for n in k.nodes if n in self.ids],
                           'source': kernel_source(st.source, k.name)})

  def timed(self, times: list) -> None:
    index = {k['name']: i for i, k in enumerate(self.kernels)}
    self.timeline = [{'name': name, 'kind': kind, 'start_us': start * 1e6, 'dur_us': dur * 1e6,
                      'kernel': index.get(name, -1) if kind == 'kernel' else -1} for name, kind, start, dur in times]

  def data(self) -> dict:
    return {'name': self.name, 'device': self.device.name, 'n_eqns': self.n_eqns,
            'nodes': {str(i): d for i, d in self.nodes.items()}, 'jaxpr': self.jaxpr, 'passes': self.passes,
            'kernels': self.kernels, 'timeline': self.timeline}

def _new_nodes(out: UOp, seen: set) -> list:
  """The nodes under `out` not in `seen` (added to it); the walk stops at known nodes."""
  todo, new = [out], []
  while todo:
    n = todo.pop()
    if n in seen: continue
    seen.add(n)
    new.append(n)
    todo.extend(n.src)
  return new

def _params(u: UOp) -> str:
  from tinyjx import tracing
  try:   # the jaxpr printer's [axes=...] part
    return tracing.params_text(u) if u.op is not Ops.CONST else ""
  except Exception:   # noqa: BLE001 - a label is not worth an error
    return ""

def _summary(name: str, st, before: int, after: int) -> tuple[str, str]:
  """One line on what pass `name` made of the program, and a longer text (kernel report, schedule) or ''."""
  from tinyjx.lower import kernel_report
  if name in ('simplify', 'split_complex', 'decompose'): return f"{before} -> {after} graph nodes", ""
  if name == 'schedule+index':
    tmp = sum(1 for s in st.slots if s.kind == 'tmp')
    return f"{len(st.items)} scheduled items, {len(st.kernels)} kernels, {tmp} intermediate buffers", kernel_report(st)
  if name == 'estimate':
    return f"{st.flops} flops, {st.nbytes} bytes over {len(st.kernels)} kernels", kernel_report(st)
  if name == 'memory': return f"{len(st.steps)} runtime steps, an arena of {st.arena_bytes} bytes", ""
  if name == 'render': return f"{st.source.count(chr(10)) + 1} lines of source", ""
  if name == 'compile': return f"compiled for {st.device.name}", ""
  return "", ""

def kernel_source(source: str, name: str) -> str:
  """The definition of kernel `name` in a rendered program: from its signature line to the closing brace."""
  lines = source.split("\n")
  start = next((i for i, ln in enumerate(lines) if f" {name}(" in ln and not ln.startswith(" ")), None)
  if start is None: return source
  end = next((i for i in range(start, len(lines)) if lines[i] == "}"), len(lines) - 1)
  return "\n".join(lines[start:end + 1])
