"""rewrite: `UPat` patterns, `PatternMatcher` rule lists and `graph_rewrite`, the one way to write a
structural pass over UOp graphs.

A `UPat` matches a node by op (one or a set), dtype, arg and source patterns, and may capture the node
under a `name`. A `PatternMatcher` holds `(UPat, fn)` pairs; `fn(**captures)` returns a replacement
node or None (no change). `graph_rewrite` rewrites bottom-up: sources first, then the node, repeating
the rules on a node until none applies, so a pass reaches its fixed point in one call.

`recorder` is None except while `tinyjx.viz` records a lowering (VIZ): then each `graph_rewrite` call asks it,
once, for a `note(rule_fn, node, replacement)` to call whenever a rule fires, and reports the roots it rewrote.
With no recorder a rewrite costs one global read per call, not per node.
"""
from __future__ import annotations
import itertools
from typing import Callable
from tinyjx import settings as config
from tinyjx.uop import UOp, Ops, toposort

recorder = None   # tinyjx.viz's recorder while it records a lowering: .noter(name), .rewrote(name, roots, outs)

class UPat:
  """A pattern: `UPat(Ops.ADD, src=(UPat.var('x'), UPat.cvar('c')))`; `name` captures the matched node."""
  __slots__ = ('ops', 'dtypes', 'src', 'arg', 'name', 'commutative')
  def __init__(self, op=None, dtype=None, src=None, arg=None, name=None, commutative=False):
    self.ops = None if op is None else (frozenset(op) if isinstance(op, (set, frozenset, tuple, list)) else frozenset({op}))
    self.dtypes = None if dtype is None else (frozenset(dtype) if isinstance(dtype, (set, frozenset, tuple)) else frozenset({dtype}))
    self.src, self.arg, self.name, self.commutative = src, arg, name, commutative

  @staticmethod
  def var(name=None, dtype=None) -> 'UPat': return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name=None, dtype=None) -> 'UPat': return UPat(Ops.CONST, dtype=dtype, name=name)

  def match(self, u: UOp, captured: dict) -> bool:
    if self.ops is not None and u.op not in self.ops: return False
    if self.dtypes is not None and u.dtype not in self.dtypes: return False
    if self.arg is not None and u.arg != self.arg: return False
    if self.name is not None:
      if self.name in captured and captured[self.name] is not u: return False
      captured[self.name] = u
    if self.src is None: return True
    if len(self.src) != len(u.src): return False
    orders = itertools.permutations(u.src) if self.commutative else (u.src,)
    for order in orders:
      trial = dict(captured)
      if all(p.match(s, trial) for p, s in zip(self.src, order)):
        captured.update(trial)
        return True
    return False

  def __repr__(self): return f"UPat({set(self.ops) if self.ops else '*'}, name={self.name})"

class PatternMatcher:
  """An ordered list of (pattern, rewrite function); rules are indexed by op so a node tries only its own."""
  def __init__(self, rules: list[tuple[UPat, Callable]]):
    self.rules = rules
    self.by_op: dict = {}
    self.any_op: list = []
    for pat, fn in rules:
      if pat.ops is None: self.any_op.append((pat, fn))
      else:
        for op in pat.ops: self.by_op.setdefault(op, []).append((pat, fn))

  def __add__(self, other: 'PatternMatcher') -> 'PatternMatcher': return PatternMatcher(self.rules + other.rules)

  def rewrite(self, u: UOp, ctx=None, note=None) -> UOp | None:
    """The first rule's replacement for `u`, or None if no rule applies (or every rule declined); `note(fn, u, out)`
    hears of the rule that fired (what VIZ records)."""
    for pat, fn in self.by_op.get(u.op, []) + self.any_op:
      captured: dict = {}
      if not pat.match(u, captured): continue
      out = fn(ctx, **captured) if ctx is not None else fn(**captured)
      if out is not None and out is not u:
        if note is not None: note(fn, u, out)
        return out
    return None

def graph_rewrite(roots, pm: PatternMatcher, ctx=None, name: str = "rewrite"):
  """Rewrite the graph(s) under `roots` bottom-up to a fixed point; returns the new root (or tuple of roots)."""
  single = isinstance(roots, UOp)
  todo = [roots] if single else list(roots)
  done: dict = {}
  rec = recorder
  note = None if rec is None else rec.noter(name)
  def visit(u: UOp) -> UOp:
    for node in toposort([u]):
      if node in done: continue
      src = tuple(done[s] for s in node.src)
      new = node if src == node.src else node.replace(src=src)
      for _ in range(1000):
        out = pm.rewrite(new, ctx, note)
        if out is None: break
        new = visit(out) if any(s not in done for s in out.src) else out
      done[node] = new
    return done[u]
  out = [visit(r) for r in todo]
  if note is not None: rec.rewrote(name, todo, out)
  if config.get('DEBUG') >= 5: print(f"*** pass {name}: {sum(len(toposort([o])) for o in out)} nodes")
  return out[0] if single else tuple(out)
