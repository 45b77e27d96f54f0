"""control_flow: `lax.cond`, `switch`, `while_loop`, `fori_loop`, `scan`, `map`, and the dynamic slices loop bodies
need, with the rules of COND, WHILE and SCAN in the transforms' tables (jvp, vjp, batching).

Each construct traces its functions once, at the avals of their operands, into closed sub-jaxprs and emits one
multi-output node; `GETITEM(node, i)` reads output i. Values a function closes over (arrays, values of an
enclosing trace, grad tags) are hoisted out of its jaxpr into extra operands of the node, so every transform
sees them as ordinary sources. Node layouts (sources, then what `arg` holds):

- COND  (index, *operands, *consts)          `CondArg`: one jaxpr per branch, each taking operands + consts
- WHILE (*carry, *cond_consts, *body_consts) `WhileArg`: cond (carry + cond_consts -> bool[]) and body
                                             (carry + body_consts -> carry)
- SCAN  (*carry, *xs, *consts)               `ScanArg`: body (carry + x slices + consts -> carry + ys), the length
                                             and direction; outputs are the final carry then the stacked ys

The index of a COND is int32 and already clamped into range. Loops run as loops wherever they execute, with
their meaning written once, below this layer: `run_loop` of the PYTHON device (tinyjx.devices.python), which
steps through the sub-jaxprs with its interpreter, and which the compiled devices' `LoopStep`
(tinyjx.lower.steps) runs with the sub-jaxprs compiled once, when the enclosing program is lowered; nothing is
unrolled at trace time. Reverse mode works for COND and SCAN (a forward scan stacks the carries, a reverse scan
runs the body's vjp over them); WHILE has forward mode only, as in JAX.
"""
from __future__ import annotations
import functools, hashlib
from dataclasses import dataclass
import numpy as np
from tinyjx import dtypes, tree_util, tracing
from tinyjx.array import Array
from tinyjx.tracing import Jaxpr
from tinyjx.uop import UOp, Ops, toposort, substitute, fresh_id, normalize_axis
from tinyjx.transforms import ad, batching
from tinyjx.array import api as jnp   # tinyjx.numpy, registered with the array layer

LOOP_FIX = ("inside lax.cond / while_loop / scan the operands and carry are traced; branch with lax.cond or "
            "jnp.where instead of Python control flow, or pass fixed values in from outside the construct")

# ---------------------------------------------------------------- node args: sub-jaxprs hashed by content

class SubJaxprs:
  """Base of the args of COND, WHILE and SCAN: closed sub-jaxprs plus static facts, hashed by content.

  Subclasses are frozen dataclasses with `out_avals` (a tuple of (shape, dtype), one per output) and a
  `jaxprs` tuple; `uop._sub_jaxpr_outs` finds the sub-graphs through `jaxprs`."""
  @functools.cached_property
  def key(self) -> str:
    facts = [f"{n}={getattr(self, n)!r}" for n in self.__dataclass_fields__ if n not in ('jaxprs', 'out_avals')]
    avals = [f"{d.short}{list(s)}" for s, d in self.out_avals]
    text = "|".join([type(self).__name__] + [j.key for j in self.jaxprs] + facts + avals)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
  def __hash__(self): return hash(self.key)
  def __eq__(self, other): return type(other) is type(self) and other.key == self.key

  def pretty_params(self) -> str:
    facts = [f"{n}={getattr(self, n)}" for n in self.__dataclass_fields__ if n not in ('jaxprs', 'out_avals')]
    subs = "\n".join(tracing.pretty(j, indent=8) for j in self.jaxprs)
    return "[\n      " + "\n      ".join(facts + [f"{self.names}=(\n{subs}\n      )"]) + "\n    ]"

@dataclass(frozen=True, eq=False)
class CondArg(SubJaxprs):
  jaxprs: tuple        # one closed jaxpr per branch: operands + consts -> outputs
  out_avals: tuple
  names = 'branches'

@dataclass(frozen=True, eq=False)
class WhileArg(SubJaxprs):
  jaxprs: tuple        # (cond, body)
  out_avals: tuple
  n_carry: int
  n_cond_consts: int
  names = 'cond_jaxpr, body_jaxpr'
  @property
  def cond(self) -> Jaxpr: return self.jaxprs[0]
  @property
  def body(self) -> Jaxpr: return self.jaxprs[1]

@dataclass(frozen=True, eq=False)
class ScanArg(SubJaxprs):
  jaxprs: tuple        # (body,)
  out_avals: tuple
  length: int
  reverse: bool
  n_carry: int
  n_xs: int
  names = 'jaxpr'
  @property
  def body(self) -> Jaxpr: return self.jaxprs[0]

def bind(op: Ops, arg: SubJaxprs, srcs) -> list[UOp]:
  """A multi-output node and one GETITEM per output."""
  dt = arg.out_avals[0][1] if arg.out_avals else dtypes.bool_
  node = UOp(op, dt, tuple(srcs), arg)
  outs = [UOp(Ops.GETITEM, d, (node,), i) for i, (_, d) in enumerate(arg.out_avals)]
  if outs and tracing.has_effects(node): tracing.emit_effect(outs[0])   # runs even if no output is used
  return outs

# ---------------------------------------------------------------- closing sub-jaxprs over what they capture

def free_values(jaxpr: Jaxpr) -> list[UOp]:
  """The largest subgraphs of `jaxpr` that do not depend on its params but hold a leaf from outside: a PARAM
  of an enclosing trace, a BUFFER, a grad TAG, a collective. Constants (CONST, IOTA) stay inside."""
  own, dep, free = set(jaxpr.params), {}, []
  order = toposort(list(jaxpr.roots))
  for n in order: dep[n] = n in own or tracing.has_effects(n) or any(dep[s] for s in n.src)
  def consider(n):
    if not dep[n] and n.flags and n not in free: free.append(n)
  for n in order:
    if dep[n]:
      for s in n.src: consider(s)
  for o in jaxpr.outs: consider(o)
  return free

def close(jaxpr: Jaxpr, consts: list) -> Jaxpr:
  """`jaxpr` with each of `consts` (outer nodes, a superset of its free values) replaced by a trailing param."""
  tid, n = fresh_id(), len(jaxpr.params)
  extra = [UOp(Ops.PARAM, c.dtype, (), (n + i, c.shape, tid)) for i, c in enumerate(consts)]
  roots = substitute(list(jaxpr.roots), dict(zip(consts, extra)))
  n = len(jaxpr.effects)
  return Jaxpr(jaxpr.params + tuple(extra), roots[n:], jaxpr.in_tree, jaxpr.out_tree, jaxpr.out_weak, jaxpr.name,
               roots[:n])

def with_params(params, outs, name: str, weak=None) -> Jaxpr:
  """A jaxpr over fresh params (slots in order) standing for `params` (nodes of some graph) in `outs`."""
  tid = fresh_id()
  fresh = [UOp(Ops.PARAM, p.dtype, (), (i, p.shape, tid)) for i, p in enumerate(params)]
  return Jaxpr(fresh, substitute(list(outs), dict(zip(params, fresh))), out_weak=weak, name=name)

# ---------------------------------------------------------------- operands, tracing and type checks

def flat_operands(tree, root: str) -> tuple[list[Array], object, list[str], list[tuple]]:
  """Arrays for the leaves of an operand pytree, its treedef, the leaves' paths and avals."""
  pairs, treedef = tree_util.tree_flatten_with_path(tree)
  paths = [root + tree_util.keystr(tuple(p)) for p, _ in pairs]
  avals = [tracing.aval_of(x, path) for (_, x), path in zip(pairs, paths)]
  arrs = [x if isinstance(x, Array) else Array(jnp.asarray(x).uop, av[2]) for (_, x), av in zip(pairs, avals)]
  return arrs, treedef, paths, avals

def aval_text(aval) -> str:
  shape, dt = aval[0], aval[1]
  return f"{dt.short}[{','.join(str(s) for s in shape)}]" + (" (weak)" if len(aval) > 2 and aval[2] else "")

def out_avals_of(jaxpr: Jaxpr) -> list[tuple]:
  return [(o.shape, o.dtype, w) for o, w in zip(jaxpr.outs, jaxpr.out_weak)]

def trace(fun, avals, name: str, paths) -> Jaxpr:
  return tracing.trace_flat(fun, avals, name, paths, fix=LOOP_FIX)

def carry_promotions(what: str, paths, before: list, after: list) -> dict:
  """Compare a carry's avals before and after one iteration. Returns {leaf index: aval to retrace with} for weakly
  typed leaves that the body promotes (as JAX does); any other change raises, naming the leaf and both types."""
  fix = {}
  for i, (path, a, b) in enumerate(zip(paths, before, after)):
    if (a[0], a[1]) == (b[0], b[1]):   # weak type is not part of the match; a strong carry stays strong
      if a[2] and not b[2]: fix[i] = (a[0], a[1], False)
      continue
    if a[2] and a[0] == b[0] and dtypes.promote((a[1], True), (b[1], b[2]))[0] is b[1]:
      fix[i] = (b[0], b[1], b[2])
      continue
    raise TypeError(f"{what}: the carry changes type across iterations at {path}: it goes in as {aval_text(a)} "
                    f"and comes out as {aval_text(b)}. A loop carry must keep its shape and dtype; cast the "
                    "initial value or the body's result (x.astype(...)), or fix the shape.")
  return fix

def check_tree(what: str, expected, got) -> None:
  if expected != got:
    raise TypeError(f"{what} must return a carry with the same pytree structure as its input: the input is "
                    f"{expected} but the output is {got}")

# ---------------------------------------------------------------- cond and switch

def index_operand(x, name: str, what: str) -> Array:
  """The predicate or index as a scalar Array, with the error JAX gives for anything else."""
  a = jnp.asarray(x)
  if a.shape != ():
    raise TypeError(f"{name}: the {what} must be a scalar, got an array of shape {a.shape}; reduce it (jnp.any, "
                    "jnp.all) or use jnp.where to choose elementwise")
  return a

def switch(index, branches, *operands):
  """Apply `branches[index](*operands)`; `index` is clamped into range (as `jax.lax.switch`).

  Every branch is traced once; the chosen one runs. Branches must return the same pytree structure, shapes and
  dtypes.

  >>> import tinyjx.numpy as jnp
  >>> float(switch(1, [jnp.sin, jnp.cos, jnp.tan], 0.0))
  1.0
  """
  branches = tuple(branches)
  if not branches: raise ValueError("switch: branches must be a non-empty sequence of functions")
  for i, b in enumerate(branches):
    if not callable(b): raise TypeError(f"switch: branches[{i}] must be callable, got {type(b).__name__}")
  idx = index_operand(index, "switch", "index")
  if not dtypes.is_int(idx.dtype) and not dtypes.is_bool(idx.dtype):
    raise TypeError(f"switch: the index must be an integer scalar, got {idx.dtype}; use lax.cond for a boolean")
  if len(branches) == 1: return branches[0](*operands)
  idx = jnp.clip(jnp.astype(idx, dtypes.int32), 0, len(branches) - 1)
  return cond_of(idx, branches, operands, [f"branches[{i}]" for i in range(len(branches))], "switch")

def cond(pred, true_fun, false_fun, *operands):
  """`true_fun(*operands)` if `pred` else `false_fun(*operands)`, on traced values too (as `jax.lax.cond`).

  `pred` is a scalar bool (or number, nonzero meaning true). Both branches are traced; the chosen one runs;
  under vmap with a batched `pred`, both run and the results are selected per example.

  >>> import tinyjx.numpy as jnp
  >>> float(cond(jnp.asarray(2.0) > 1, lambda x: x * 10, lambda x: x, 3.0))
  30.0
  """
  p = index_operand(pred, "cond", "predicate")
  if not (dtypes.is_bool(p.dtype) or dtypes.is_int(p.dtype) or dtypes.is_inexact(p.dtype)):
    raise TypeError(f"cond: the predicate must be a boolean or number scalar, got {p.dtype}")
  if not dtypes.is_bool(p.dtype): p = p != 0
  idx = jnp.astype(p, dtypes.int32)
  return cond_of(idx, (false_fun, true_fun), operands, ["false_fun", "true_fun"], "cond")

def branch_mismatch(name: str, labels, jaxprs) -> None:
  """Raise if the branches' outputs differ in structure, shape or dtype, naming both branches and the leaf."""
  first = jaxprs[0]
  for label, j in zip(labels[1:], jaxprs[1:]):
    if j.out_tree != first.out_tree:
      raise TypeError(f"{name}: branches must return the same pytree structure, but {labels[0]} returned "
                      f"{first.out_tree} and {label} returned {j.out_tree}")
    skeleton = tree_util.tree_unflatten(first.out_tree, [0] * len(first.outs))
    paths = ["output" + tree_util.keystr(tuple(p)) for p, _ in tree_util.tree_flatten_with_path(skeleton)[0]]
    for path, a, b in zip(paths, first.outs, j.outs):
      if (a.shape, a.dtype) != (b.shape, b.dtype):
        raise TypeError(f"{name}: branches must return the same shapes and dtypes, but at {path} {labels[0]} "
                        f"returned {aval_text((a.shape, a.dtype))} and {label} returned "
                        f"{aval_text((b.shape, b.dtype))}")

def cond_of(index: Array, funs, operands, labels, name: str):
  arrs, treedef, paths, avals = flat_operands(operands, "operands")
  def branch(f):
    return lambda *xs: f(*tree_util.tree_unflatten(treedef, list(xs)))
  jaxprs = [trace(branch(f), avals, f"{name} {label}", paths) for f, label in zip(funs, labels)]
  branch_mismatch(name, labels, jaxprs)
  consts = list(dict.fromkeys(c for j in jaxprs for c in free_values(j)))
  closed = tuple(close(j, consts) for j in jaxprs)
  if not jaxprs[0].outs and any(j.effects for j in closed):   # branches that only print: an output to run them by
    closed = tuple(with_token(j) for j in closed)
  arg = CondArg(closed, tuple((o.shape, o.dtype) for o in closed[0].outs))
  outs = bind(Ops.COND, arg, [index.uop] + [a.uop for a in arrs] + consts)[:len(jaxprs[0].outs)]
  weak = [all(j.out_weak[i] for j in jaxprs) for i in range(len(outs))]
  return tree_util.tree_unflatten(jaxprs[0].out_tree, [Array(u, w) for u, w in zip(outs, weak)])

def with_token(j: Jaxpr) -> Jaxpr:
  """`j` with one more output, a constant: the handle by which its effects are emitted when it has no output."""
  return Jaxpr(j.params, j.outs + (UOp.const(False, dtypes.bool_, ()),), j.in_tree, j.out_tree,
               j.out_weak + (False,), j.name, j.effects)

# ---------------------------------------------------------------- while_loop and fori_loop

def trace_carry(fun, treedef, avals, paths, name: str, extra_avals=(), extra_paths=(), split_out=None):
  """Trace a loop body whose first outputs are the new carry, promoting weakly typed carries it widens (one
  retrace at most, as JAX). Returns the jaxpr, the carry avals it was traced at, and the out trees."""
  n = len(avals)
  for _ in range(3):
    trees = []
    def flat(*xs):
      out = fun(tree_util.tree_unflatten(treedef, list(xs[:n])), *xs[n:])
      carry, rest = split_out(out) if split_out else (out, None)
      cleaves, ctree = tree_util.tree_flatten(carry)
      rleaves, rtree = tree_util.tree_flatten(rest)
      trees[:] = [ctree, rtree]
      return cleaves + rleaves
    jaxpr = trace(flat, list(avals) + list(extra_avals), name, list(paths) + list(extra_paths))
    check_tree(name, treedef, trees[0])
    fix = carry_promotions(name, paths, avals, out_avals_of(jaxpr)[:n])
    if not fix: return jaxpr, list(avals), tuple(trees)
    avals = [fix.get(i, a) for i, a in enumerate(avals)]
  raise TypeError(f"{name}: the carry's types did not settle after promoting weakly typed values; give the initial "
                  "value explicit dtypes")

def cast_to(arrs: list[Array], avals: list) -> list[Array]:
  return [a if (a.dtype, a.weak) == (av[1], av[2]) else Array(jnp.astype(a, av[1]).uop, av[2])
          for a, av in zip(arrs, avals)]

def while_loop(cond_fun, body_fun, init_val):
  """Repeat `val = body_fun(val)` while `cond_fun(val)` is true; returns the final `val` (as `jax.lax.while_loop`).

  The carry keeps its pytree structure, shapes and dtypes. Forward-mode differentiation works; reverse mode
  does not (use `scan`, or `fori_loop` with static bounds).

  >>> int(while_loop(lambda i: i < 10, lambda i: i * 2, 1))
  16
  """
  arrs, treedef, paths, avals = flat_operands(init_val, "init_val")
  body, avals, _ = trace_carry(body_fun, treedef, avals, paths, "while_loop body_fun")
  arrs = cast_to(arrs, avals)
  condj = trace(lambda *xs: cond_fun(tree_util.tree_unflatten(treedef, list(xs))), avals, "while_loop cond_fun", paths)
  if len(condj.outs) != 1 or condj.outs[0].shape != () or condj.outs[0].dtype is not dtypes.bool_:
    got = ", ".join(aval_text((o.shape, o.dtype)) for o in condj.outs) or "nothing"
    raise TypeError(f"while_loop: cond_fun must return a boolean scalar, but it returned {got}; compare with "
                    "<, == ... and reduce arrays with jnp.any/jnp.all")
  cconsts, bconsts = free_values(condj), free_values(body)
  arg = WhileArg((close(condj, cconsts), close(body, bconsts)), tuple((o.shape, o.dtype) for o in body.outs),
                 len(avals), len(cconsts))
  outs = bind(Ops.WHILE, arg, [a.uop for a in arrs] + cconsts + bconsts)
  weak = [av[2] and w for av, w in zip(avals, body.out_weak)]
  return tree_util.tree_unflatten(treedef, [Array(u, w) for u, w in zip(outs, weak)])

def static_int(x):
  """The value of a concrete integer scalar (Python int or concrete Array), else None."""
  if isinstance(x, (int, np.integer)) and not isinstance(x, bool): return int(x)
  concrete = isinstance(x, Array) and x.uop.is_concrete and 'TAG' not in x.uop.flags
  if concrete and x.shape == () and dtypes.is_int(x.dtype): return int(x)
  return None

def fori_loop(lower, upper, body_fun, init_val, unroll=None):
  """`val = body_fun(i, val)` for i in [lower, upper) (as `jax.lax.fori_loop`).

  With static bounds (Python ints or concrete arrays) the loop is a `scan`, so it is reverse-differentiable;
  traced bounds make it a `while_loop`.

  >>> int(fori_loop(0, 5, lambda i, s: s + i, 0))
  10
  """
  lo, hi = jnp.asarray(lower), jnp.asarray(upper)
  for name, v in (("lower", lo), ("upper", hi)):
    if v.shape != () or not dtypes.is_int(v.dtype):
      raise TypeError(f"fori_loop: {name} must be an integer scalar, got {aval_text((v.shape, v.dtype))}")
  dt, weak = dtypes.promote((lo.dtype, lo.weak), (hi.dtype, hi.weak))
  start = Array(jnp.astype(lo, dt).uop, weak)
  slo, shi = static_int(lower), static_int(upper)
  if slo is not None and shi is not None:
    def step(carry, _):
      i, val = carry
      return (i + 1, body_fun(i, val)), None
    (_, out), _ = scan(step, (start, init_val), None, length=max(0, shi - slo))
    return out
  stop = Array(jnp.astype(hi, dt).uop, weak)
  def body(carry):
    i, n, val = carry
    return i + 1, n, body_fun(i, val)
  return while_loop(lambda c: c[0] < c[1], body, (start, stop, init_val))[2]

# ---------------------------------------------------------------- scan and map

def split_pair(out):
  if not isinstance(out, (tuple, list)) or len(out) != 2:
    raise TypeError(f"scan: the body must return a pair (carry, y), got {type(out).__name__}"
                    + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""))
  return out[0], out[1]

def scan_length(xs_arrs, xs_paths, length) -> int:
  sizes = {}
  for a, p in zip(xs_arrs, xs_paths):
    if a.ndim == 0:
      raise ValueError(f"scan: {p} is a scalar ({aval_text((a.shape, a.dtype))}); xs leaves need a leading axis "
                       "to scan over")
    sizes.setdefault(a.shape[0], p)
  if length is not None:
    length = int(length)
    if length < 0: raise ValueError(f"scan: length must be non-negative, got {length}")
    sizes.setdefault(length, "length")
  if len(sizes) > 1:
    raise ValueError("scan: every leaf of xs (and length, if given) must have the same leading size, got "
                     + ", ".join(f"{s} for {p}" for s, p in sizes.items()))
  if not sizes: raise ValueError("scan: with xs=None (or no array leaves in xs) pass length=")
  return next(iter(sizes))

def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
  """Loop `carry, y = f(carry, x)` over the leading axis of `xs`, returning the final carry and the stacked ys
  (as `jax.lax.scan`). `xs` may be a pytree or None (then `length` is needed); `reverse` scans from the end
  (ys keep xs' order); `unroll` is accepted and ignored (the loop always runs as a loop).

  >>> import tinyjx.numpy as jnp
  >>> total, partial = scan(lambda c, x: (c + x, c + x), 0.0, jnp.arange(4.0))
  >>> float(total), partial.tolist()
  (6.0, [0.0, 1.0, 3.0, 6.0])
  """
  if not isinstance(unroll, (bool, int)) or (not isinstance(unroll, bool) and unroll < 1):
    raise ValueError(f"scan: unroll must be a positive int or a bool, got {unroll!r}")
  carry, ctree, cpaths, cavals = flat_operands(init, "init")
  xarrs, xtree, xpaths, xavals = flat_operands(xs, "xs")
  n = scan_length(xarrs, xpaths, length)
  x_avals = [(av[0][1:], av[1], av[2]) for av in xavals]
  def body_fun(c, *x): return f(c, tree_util.tree_unflatten(xtree, list(x)))
  body, cavals, (_, ytree) = trace_carry(body_fun, ctree, cavals, cpaths, "scan body", x_avals,
                                         [p + "[i]" for p in xpaths], split_pair)
  carry = cast_to(carry, cavals)
  consts = free_values(body)
  nc, n_out = len(cavals), len(body.outs)
  closed = close(body, consts)
  if not n_out and closed.effects: closed = with_token(closed)   # a body that only prints: a y to run it by
  ys_avals = [((n,) + o.shape, o.dtype) for o in closed.outs[nc:]]
  arg = ScanArg((closed,), tuple((o.shape, o.dtype) for o in closed.outs[:nc]) + tuple(ys_avals),
                n, bool(reverse), nc, len(xarrs))
  outs = bind(Ops.SCAN, arg, [a.uop for a in carry] + [a.uop for a in xarrs] + consts)[:n_out]
  cweak = [av[2] and w for av, w in zip(cavals, body.out_weak)]
  carry_out = tree_util.tree_unflatten(ctree, [Array(u, w) for u, w in zip(outs[:nc], cweak)])
  ys = tree_util.tree_unflatten(ytree, [Array(u, w) for u, w in zip(outs[nc:], body.out_weak[nc:])])
  return carry_out, ys

def map(f, xs, batch_size=None):  # noqa: A001 - lax's name
  """`f` applied to each slice of `xs` along its leading axis, stacked (as `jax.lax.map`): a scan without carry.
  With `batch_size`, each step applies `vmap(f)` to that many slices (the remainder in one last vmap).

  >>> import tinyjx.numpy as jnp
  >>> map(lambda x: x * 2, jnp.arange(3.0)).tolist()
  [0.0, 2.0, 4.0]
  """
  if batch_size is None: return scan(lambda c, x: (c, f(x)), (), xs)[1]
  arrs, tree, paths, _ = flat_operands(xs, "xs")
  n, b = scan_length(arrs, paths, None), int(batch_size)
  if b < 1: raise ValueError(f"map: batch_size must be a positive int, got {batch_size!r}")
  steps, rest = divmod(n, b)
  head = [Array(a.uop.shrink(((0, steps * b),) + tuple((0, s) for s in a.shape[1:]))
                .reshape((steps, b) + a.shape[1:]), a.weak) for a in arrs]
  ys = scan(lambda c, x: (c, batching.vmap(f)(tree_util.tree_unflatten(tree, x))), (), head)[1]
  ys = tree_util.tree_map(lambda y: Array(y.uop.reshape((steps * b,) + y.shape[2:]), y.weak), ys)
  if not rest: return ys
  tail = [Array(a.uop.shrink(((steps * b, n),) + tuple((0, s) for s in a.shape[1:])), a.weak) for a in arrs]
  last = batching.vmap(f)(tree_util.tree_unflatten(tree, tail))
  return tree_util.tree_map(lambda y, z: jnp.concatenate([y, z]), ys, last)

# ---------------------------------------------------------------- the dynamic slices

def start_indices(operand: Array, starts, sizes, name: str) -> list:
  """Per-axis start indices wrapped (negative count from the end) and clamped so the window fits, as XLA."""
  if isinstance(starts, Array) or isinstance(starts, np.ndarray):
    starts = [Array(jnp.asarray(starts).uop.shrink(((i, i + 1),)).reshape(())) for i in range(len(starts))]
  starts = list(starts)
  if len(starts) != operand.ndim:
    raise ValueError(f"{name}: got {len(starts)} start indices for an operand of rank {operand.ndim} (shape "
                     f"{operand.shape}); give one per axis")
  out = []
  for axis, (s, size, dim) in enumerate(zip(starts, sizes, operand.shape)):
    if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
      s = int(s) + dim if int(s) < 0 else int(s)
      out.append(min(max(s, 0), dim - size))
      continue
    a = jnp.asarray(s)
    if a.shape != () or not dtypes.is_int(a.dtype):
      raise TypeError(f"{name}: start index {axis} must be an integer scalar, got {aval_text((a.shape, a.dtype))}")
    a = jnp.astype(a, dtypes.int32)
    out.append(jnp.clip(jnp.where(a < 0, a + dim, a), 0, dim - size))
  return out

def check_sizes(operand: Array, sizes, name: str) -> tuple:
  sizes = tuple(int(s) for s in sizes)
  if len(sizes) != operand.ndim or any(not 0 <= s <= d for s, d in zip(sizes, operand.shape)):
    raise ValueError(f"{name}: slice sizes {sizes} do not fit the operand of shape {operand.shape}; give one size "
                     "per axis, each between 0 and that axis' size")
  return sizes

def take_window(u: UOp, axis: int, start: Array, size: int) -> UOp:
  """`size` entries of `u` along `axis` from a traced `start` (GATHER reads axis 0, so move the axis there)."""
  front = batching.moveaxis(u, axis, 0)
  idx = (jnp.arange(size, dtype=jnp.int32) + start).uop
  return batching.moveaxis(UOp(Ops.GATHER, u.dtype, (front, idx)), 0, axis)

def dynamic_slice(operand, start_indices_, slice_sizes):
  """`operand[s0:s0+n0, s1:s1+n1, ...]` with traced starts (clamped so the window fits, as `lax.dynamic_slice`).

  >>> import tinyjx.numpy as jnp
  >>> dynamic_slice(jnp.arange(10), (jnp.asarray(8),), (3,)).tolist()
  [7, 8, 9]
  """
  x = jnp.asarray(operand)
  sizes = check_sizes(x, slice_sizes, "dynamic_slice")
  starts = start_indices(x, start_indices_, sizes, "dynamic_slice")
  u = x.uop.shrink(tuple((s, s + n) if isinstance(s, int) else (0, d) for s, n, d in zip(starts, sizes, x.shape)))
  for axis, (s, n) in enumerate(zip(starts, sizes)):
    if not isinstance(s, int): u = take_window(u, axis, s, n)
  return Array(u, x.weak)

def dynamic_update_slice(operand, update, start_indices_):
  """`operand` with `update` written at the (traced, clamped) start indices (as `lax.dynamic_update_slice`).

  >>> import tinyjx.numpy as jnp
  >>> dynamic_update_slice(jnp.zeros(5), jnp.ones(2), (jnp.asarray(3),)).tolist()
  [0.0, 0.0, 0.0, 1.0, 1.0]
  """
  x, upd = jnp.asarray(operand), jnp.asarray(update)
  if upd.ndim != x.ndim or any(a > b for a, b in zip(upd.shape, x.shape)):
    raise ValueError(f"dynamic_update_slice: update of shape {upd.shape} does not fit in operand of shape {x.shape}")
  if upd.dtype is not x.dtype: upd = jnp.astype(upd, x.dtype)
  starts = start_indices(x, start_indices_, upd.shape, "dynamic_update_slice")
  if all(isinstance(s, int) for s in starts):
    pads = tuple((s, d - s - n) for s, n, d in zip(starts, upd.shape, x.shape))
    mask = UOp.const(True, dtypes.bool_, upd.shape).pad(pads)
    return Array(UOp(Ops.WHERE, x.dtype, (mask, upd.uop.pad(pads), x.uop)), x.weak)
  placed, mask = upd.uop, None
  for axis, (s, n, d) in enumerate(zip(starts, upd.shape, x.shape)):
    placed, m = place_along(placed, axis, s, n, d)
    shape = tuple(d if i == axis else 1 for i in range(x.ndim))
    m = m.reshape(shape).expand(x.shape)
    mask = m if mask is None else UOp(Ops.AND, dtypes.bool_, (mask, m))
  return Array(UOp(Ops.WHERE, x.dtype, (mask, placed, x.uop)), x.weak)

def place_along(u: UOp, axis: int, start, n: int, dim: int) -> tuple[UOp, UOp]:
  """`u` (size n along `axis`) spread to size `dim` with entry j reading u[j - start], and the mask of j in the
  window [start, start + n)."""
  pos = jnp.arange(dim, dtype=jnp.int32)
  rel = pos - start
  inside = (rel >= 0) & (rel < n)
  if n == 0: return UOp.const(0, u.dtype, u.shape[:axis] + (dim,) + u.shape[axis + 1:]), inside.uop
  idx = jnp.clip(rel, 0, n - 1).uop
  front = batching.moveaxis(u, axis, 0)
  return batching.moveaxis(UOp(Ops.GATHER, u.dtype, (front, idx)), 0, axis), inside.uop

def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0):
  """`dynamic_slice` along one axis; the others are taken whole."""
  x = jnp.asarray(operand)
  axis = normalize_axis(axis, x.ndim)
  starts = [0] * x.ndim
  starts[axis] = start_index
  return dynamic_slice(x, starts, tuple(slice_size if i == axis else d for i, d in enumerate(x.shape)))

def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
  """Entry `index` (traced) along `axis`, keeping that axis (size 1) unless `keepdims=False`.

  >>> import tinyjx.numpy as jnp
  >>> dynamic_index_in_dim(jnp.arange(6).reshape(2, 3), jnp.asarray(1), keepdims=False).tolist()
  [3, 4, 5]
  """
  x = jnp.asarray(operand)
  out = dynamic_slice_in_dim(x, index, 1, axis)
  if keepdims: return out
  axis = normalize_axis(axis, x.ndim)
  return Array(out.uop.reshape(out.shape[:axis] + out.shape[axis + 1:]), out.weak)

def dynamic_update_slice_in_dim(operand, update, start_index, axis: int = 0):
  """`dynamic_update_slice` with the start given along one axis (0 on the others)."""
  x = jnp.asarray(operand)
  axis = normalize_axis(axis, x.ndim)
  starts = [0] * x.ndim
  starts[axis] = start_index
  return dynamic_update_slice(x, update, starts)

def dynamic_update_index_in_dim(operand, update, index, axis: int = 0):
  """Write `update` as entry `index` (traced) along `axis`; `update` may lack that axis."""
  x, upd = jnp.asarray(operand), jnp.asarray(update)
  axis = normalize_axis(axis, x.ndim)
  if upd.ndim == x.ndim - 1: upd = Array(upd.uop.reshape(upd.shape[:axis] + (1,) + upd.shape[axis:]), upd.weak)
  return dynamic_update_slice_in_dim(x, upd, index, axis)

# ================================================================ rules

# ---------------------------------------------------------------- jvp: carried tangents

def float_mask(srcs, ts) -> tuple:
  return tuple(t is not None and dtypes.is_inexact(s.dtype) for s, t in zip(srcs, ts))

def tangent_or_zero(t, s: UOp) -> UOp: return t if t is not None else UOp.const(0, s.dtype, s.shape)

def cond_jvp(node, ts):
  ops, t_ops = node.src[1:], ts[1:]
  mask = float_mask(ops, t_ops)
  if not any(mask): return None
  nout = len(node.arg.out_avals)
  branches = tuple(Jaxpr(j.params, j.outs[nout:], name=f"jvp({j.name})")   # tangents only: primals come from node
                   for j in (ad.jvp_jaxpr(b, mask) for b in node.arg.jaxprs))
  tavals = node.arg.out_avals
  outs = bind(Ops.COND, CondArg(branches, tavals), (node.src[0],) + ops + tuple(t for t, m in zip(t_ops, mask) if m))
  return tuple(o if dtypes.is_inexact(o.dtype) else None for o in outs)

def carried_jvp(body: Jaxpr, groups: tuple, mask: tuple, n_out_carry: int) -> Jaxpr:
  """The jvp of a loop body with each group of inputs (sizes `groups`: carry, then xs or consts ...) followed by
  the tangents of its inputs where `mask`; outputs are [carry, carry tangents, other outputs, their float
  tangents]. A loop carries (value, tangent) pairs this way and still reads its carry first."""
  j = ad.jvp_jaxpr(body, mask)
  n_in = len(mask)
  tan_pos = {i: n_in + k for k, i in enumerate(i for i in range(n_in) if mask[i])}
  order, start = [], 0
  for size in groups:
    ids = range(start, start + size)
    order += list(ids) + [tan_pos[i] for i in ids if mask[i]]
    start += size
  nout = len(body.outs)
  prim, tans = j.outs[:nout], j.outs[nout:]
  outs = list(prim[:n_out_carry]) + [tans[i] for i in range(n_out_carry) if mask[i]] + list(prim[n_out_carry:]) + \
         [tans[i] for i in range(n_out_carry, nout) if dtypes.is_inexact(prim[i].dtype)]
  return with_params([j.params[i] for i in order], outs, f"jvp({body.name})")

def while_jvp(node, ts):
  a = node.arg
  nc, ncc = a.n_carry, a.n_cond_consts
  carry, cconsts, bconsts = node.src[:nc], node.src[nc:nc + ncc], node.src[nc + ncc:]
  t_carry, t_b = ts[:nc], ts[nc + ncc:]
  if not any(float_mask(carry, t_carry) + float_mask(bconsts, t_b)): return None
  cmask = tuple(dtypes.is_inexact(s.dtype) for s in carry)      # every float carry carries a tangent
  bmask = float_mask(bconsts, t_b)
  body = carried_jvp(a.body, (nc, len(bconsts)), cmask + bmask, nc)
  ntc = sum(cmask)
  cond_params = list(a.cond.params)
  ignored = [UOp(Ops.PARAM, s.dtype, (), (0, s.shape, fresh_id())) for s, m in zip(carry, cmask) if m]
  condj = with_params(cond_params[:nc] + ignored + cond_params[nc:], a.cond.outs, a.cond.name)
  t_init = [tangent_or_zero(t, s) for s, t, m in zip(carry, t_carry, cmask) if m]
  t_consts = [t for t, m in zip(t_b, bmask) if m]
  avals = a.out_avals + tuple(av for av, m in zip(a.out_avals, cmask) if m)
  outs = bind(Ops.WHILE, WhileArg((condj, body), avals, nc + ntc, ncc),
              list(carry) + t_init + list(cconsts) + list(bconsts) + t_consts)
  tangents = iter(outs[nc:])
  return tuple(next(tangents) if m else None for m in cmask)

def scan_jvp(node, ts):
  a = node.arg
  nc, nx = a.n_carry, a.n_xs
  carry, xs, consts = node.src[:nc], node.src[nc:nc + nx], node.src[nc + nx:]
  t_carry, t_xs, t_k = ts[:nc], ts[nc:nc + nx], ts[nc + nx:]
  xmask, kmask = float_mask(xs, t_xs), float_mask(consts, t_k)
  if not any(float_mask(carry, t_carry) + xmask + kmask): return None
  cmask = tuple(dtypes.is_inexact(s.dtype) for s in carry)
  body = carried_jvp(a.body, (nc, nx, len(consts)), cmask + xmask + kmask, nc)
  ntc, ntx = sum(cmask), sum(xmask)
  y_avals = a.out_avals[nc:]
  ty_avals = tuple(av for av in y_avals if dtypes.is_inexact(av[1]))
  avals = a.out_avals[:nc] + tuple(av for av, m in zip(a.out_avals[:nc], cmask) if m) + y_avals + ty_avals
  srcs = list(carry) + [tangent_or_zero(t, s) for s, t, m in zip(carry, t_carry, cmask) if m] + list(xs) + \
         [t for t, m in zip(t_xs, xmask) if m] + list(consts) + [t for t, m in zip(t_k, kmask) if m]
  outs = bind(Ops.SCAN, ScanArg((body,), avals, a.length, a.reverse, nc + ntc, nx + ntx), srcs)
  t_c, t_y = iter(outs[nc:nc + ntc]), iter(outs[nc + ntc + len(y_avals):])
  return tuple(next(t_c) if m else None for m in cmask) + \
         tuple(next(t_y) if dtypes.is_inexact(av[1]) else None for av in y_avals)

# ---------------------------------------------------------------- vjp

def cond_vjp(ct, node):
  ops = node.src[1:]
  wrt = tuple(dtypes.is_inexact(s.dtype) for s in ops)
  ct_mask = tuple(c is not None for c in ct)
  if not any(wrt) or not any(ct_mask): return (None,) * len(node.src)
  branches = tuple(ad.vjp_jaxpr(b, wrt, ct_mask) for b in node.arg.jaxprs)
  avals = tuple((s.shape, s.dtype) for s, w in zip(ops, wrt) if w)
  outs = iter(bind(Ops.COND, CondArg(branches, avals), (node.src[0],) + ops + tuple(c for c in ct if c is not None)))
  return (None,) + tuple(next(outs) if w else None for w in wrt)

WHILE_VJP_ERROR = ("reverse-mode differentiation (grad, vjp) does not work through lax.while_loop: its trip count "
                   "is only known at run time, so the values each iteration needs are not kept. Use lax.scan, or "
                   "lax.fori_loop with static (Python int) bounds, which becomes a scan; forward mode (jvp, "
                   "jacfwd) does work through while_loop.")

def while_vjp(ct, node):
  return tuple(ValueError(WHILE_VJP_ERROR) if dtypes.is_inexact(s.dtype) else None for s in node.src)

def scan_residuals(node) -> list[UOp]:
  """The carry going into each iteration, stacked (what the backward scan recomputes each step from)."""
  a = node.arg
  nc = a.n_carry
  body = a.body
  stacked = Jaxpr(body.params, tuple(body.outs) + tuple(body.params[:nc]), name=body.name)
  avals = a.out_avals + tuple(((a.length,) + s.shape, s.dtype) for s in node.src[:nc])
  return bind(Ops.SCAN, ScanArg((stacked,), avals, a.length, a.reverse, nc, a.n_xs), node.src)[len(a.out_avals):]

def scan_vjp(ct, node):
  """Reverse scan over the stacked carries: each step runs the body's vjp, passing the carry's cotangent back,
  emitting the x slice's cotangent and adding up the consts' cotangents."""
  a = node.arg
  nc, nx = a.n_carry, a.n_xs
  carry, xs, consts = node.src[:nc], node.src[nc:nc + nx], node.src[nc + nx:]
  fc = [dtypes.is_inexact(s.dtype) for s in carry]
  fx = [dtypes.is_inexact(s.dtype) for s in xs]
  fk = [dtypes.is_inexact(s.dtype) for s in consts]
  ct_y = list(ct[nc:])
  if not any(fc + fx + fk) or all(c is None for c in ct): return (None,) * len(node.src)
  ymask = [c is not None for c in ct_y]
  vj = ad.vjp_jaxpr(a.body, tuple(fc + fx + fk), tuple(fc + ymask))
  res = scan_residuals(node)
  ct_c0 = [tangent_or_zero(c, s) for c, s, f in zip(ct[:nc], carry, fc) if f]
  acc0 = [UOp.const(0, s.dtype, s.shape) for s, f in zip(consts, fk) if f]
  nfc, nfk, nfx = len(ct_c0), len(acc0), sum(fx)

  def step(*args):
    ct_c, acc = args[:nfc], args[nfc:nfc + nfk]
    rest = args[nfc + nfk:]
    c_i, x_i, cty_i, k = rest[:nc], rest[nc:nc + nx], rest[nc + nx:nc + nx + sum(ymask)], rest[nc + nx + sum(ymask):]
    cts = vj(*[v.uop for v in (*c_i, *x_i, *k, *ct_c, *cty_i)])
    g_c, g_x, g_k = cts[:nfc], cts[nfc:nfc + nfx], cts[nfc + nfx:]
    return [Array(u) for u in g_c] + [Array(UOp(Ops.ADD, s.dtype, (s.uop, g))) for s, g in zip(acc, g_k)] + \
           [Array(u) for u in g_x]
  xs_in = list(res) + list(xs) + [c for c in ct_y if c is not None]
  slice_avals = [(u.shape[1:], u.dtype) for u in xs_in]
  avals = [(u.shape, u.dtype) for u in ct_c0 + acc0] + slice_avals + [(u.shape, u.dtype) for u in consts]
  bwd = tracing.trace_flat(step, avals, f"scan_vjp({a.body.name})")
  out_avals = tuple((u.shape, u.dtype) for u in ct_c0 + acc0) + \
              tuple((s.shape, s.dtype) for s, f in zip(xs, fx) if f)
  outs = bind(Ops.SCAN, ScanArg((bwd,), out_avals, a.length, not a.reverse, nfc + nfk, len(xs_in)),
              ct_c0 + acc0 + xs_in + list(consts))
  g_c, g_k, g_x = iter(outs[:nfc]), iter(outs[nfc:nfc + nfk]), iter(outs[nfc + nfk:])
  return tuple(next(g_c) if f else None for f in fc) + tuple(next(g_x) if f else None for f in fx) + \
         tuple(next(g_k) if f else None for f in fk)

ad.jvp_rules.update({Ops.COND: cond_jvp, Ops.WHILE: while_jvp, Ops.SCAN: scan_jvp})
ad.vjp_rules.update({Ops.COND: cond_vjp, Ops.WHILE: while_vjp, Ops.SCAN: scan_vjp})

# ---------------------------------------------------------------- batching

def batched_avals(avals, batched, size: int, axis: int = 0) -> tuple:
  return tuple((s[:axis] + (size,) + s[axis:] if b else s, d) for (s, d), b in zip(avals, batched))

def cond_batch(node, srcs, bdims):
  size = batching.batch_size(srcs, bdims)
  index, ops, ib, obd = srcs[0], srcs[1:], bdims[0], bdims[1:]
  branches = node.arg.jaxprs
  if ib is not None: return select_branches(node, index, ib, ops, obd, size)
  force = [any(f) for f in zip(*[batching.batch_sub(b, obd, size)[1] for b in branches])]
  new = tuple(batching.batch_sub(b, obd, size, force)[0] for b in branches)
  outs = UOp(Ops.COND, node.dtype, (index,) + tuple(ops), CondArg(new, batched_avals(node.arg.out_avals, force, size)))
  return outs, tuple(0 if f else None for f in force)

def select_branches(node, index, ib, ops, obd, size):
  """A batched index: every branch runs on every example, and each example's index picks its results. Where a
  branch has effects (debug callbacks), they run too, for every example and in branch order, as JAX runs them:
  the selection then becomes the one branch of a COND on a constant index, whose effects are all branches'."""
  if not any(b.effects for b in node.arg.jaxprs):
    picked, _ = selected(node, index, ib, ops, obd, size)
    return tuple(picked), tuple(0 for _ in picked)
  tid = fresh_id()
  params = [UOp(Ops.PARAM, u.dtype, (), (i, u.shape, tid)) for i, u in enumerate((index,) + tuple(ops))]
  picked, effects = selected(node, params[0], ib, params[1:], obd, size)
  both = Jaxpr(params, picked, out_weak=node.arg.jaxprs[0].out_weak, name="vmap(cond)", effects=effects)
  avals = tuple(((size,) + s, d) for s, d in node.arg.out_avals)
  first = UOp.const(0, dtypes.int32, ())
  return UOp(Ops.COND, node.dtype, (first, index) + tuple(ops), CondArg((both,), avals)), tuple(0 for _ in picked)

def selected(node, index, ib, ops, obd, size) -> tuple[list, list]:
  """(each output picked by the batched index, the batched effects of every branch in order)."""
  results, effects = [], []
  for b in node.arg.jaxprs:
    roots, bd = batching.batch_graph(b.roots, b.params, list(ops), list(obd))
    n = len(b.effects)
    effects += roots[:n]
    results.append([batching.match_axis(u, d, 0, size) for u, d in zip(roots[n:], bd[n:])])
  idx = batching.moveaxis(index, ib, 0)
  picked = []
  for i, (shape, dt) in enumerate(node.arg.out_avals):
    full = (size,) + shape
    which = idx.reshape((size,) + (1,) * len(shape)).expand(full)
    out = results[0][i]
    for k in range(1, len(results)):
      hit = UOp(Ops.CMPEQ, dtypes.bool_, (which, UOp.const(k, idx.dtype, full)))
      out = UOp(Ops.WHERE, dt, (hit, results[k][i], out))
    picked.append(out)
  return picked, effects

def settle_carry(body: Jaxpr, carry_b: list, rest_dims: list, size: int) -> list:
  """Which carries must be batched: those batched going in, plus any the body makes batched, to a fixed point."""
  while True:
    _, out_b = batching.batch_sub(body, [0 if b else None for b in carry_b] + rest_dims, size)
    new = [b or o for b, o in zip(carry_b, out_b[:len(carry_b)])]
    if new == carry_b: return carry_b
    carry_b = new

def while_batch(node, srcs, bdims):
  a = node.arg
  nc, ncc = a.n_carry, a.n_cond_consts
  size = batching.batch_size(srcs, bdims)
  cc_dims, bc_dims = list(bdims[nc:nc + ncc]), list(bdims[nc + ncc:])
  carry_b = settle_carry(a.body, [b is not None for b in bdims[:nc]], bc_dims, size)
  _, pred_b = batching.batch_sub(a.cond, [0 if b else None for b in carry_b] + cc_dims, size)
  if pred_b[0]: carry_b = [True] * nc     # lanes finish at different steps: every carry needs its own lane
  cdims = [0 if b else None for b in carry_b]
  condj, _ = batching.batch_sub(a.cond, cdims + cc_dims, size)
  body, _ = batching.batch_sub(a.body, cdims + bc_dims, size, carry_b)
  carry = [batching.match_axis(s, d, 0, size) if b else s for s, d, b in zip(srcs[:nc], bdims[:nc], carry_b)]
  consts = list(srcs[nc:])
  if pred_b[0]: condj, body, consts, ncc = lanewise_loop(condj, body, nc, ncc, consts)
  arg = WhileArg((condj, body), batched_avals(a.out_avals, carry_b, size), nc, ncc)
  return UOp(Ops.WHILE, node.dtype, tuple(carry + consts), arg), tuple(cdims)

def lanewise_loop(condj: Jaxpr, body: Jaxpr, nc: int, ncc: int, consts: list):
  """A loop whose predicate differs per lane: keep going while any lane is running, and leave the carry of
  finished lanes unchanged. The new body also needs the cond's consts, so they are passed to it twice."""
  carry_p, cc_p, bc_p = condj.params[:nc], condj.params[nc:], body.params[nc:]
  pred = condj.outs[0]
  anyp = pred.reduce(Ops.MAX, (0,))
  new_cond = with_params(list(carry_p) + list(cc_p), [anyp], condj.name)
  stepped = body(*carry_p, *bc_p)
  kept = []
  for c, s in zip(carry_p, stepped):
    lane = pred.reshape((pred.shape[0],) + (1,) * (c.ndim - 1)).expand(c.shape)
    kept.append(UOp(Ops.WHERE, c.dtype, (lane, s, c)))
  new_body = with_params(list(carry_p) + list(cc_p) + list(bc_p), kept, body.name)
  return new_cond, new_body, consts[:ncc] + consts[:ncc] + consts[ncc:], ncc

def scan_batch(node, srcs, bdims):
  a = node.arg
  nc, nx = a.n_carry, a.n_xs
  size = batching.batch_size(srcs, bdims)
  x_dims = [None if b is None else 0 for b in bdims[nc:nc + nx]]     # slices of xs batched at axis 1 of xs
  k_dims = list(bdims[nc + nx:])
  carry_b = settle_carry(a.body, [b is not None for b in bdims[:nc]], x_dims + k_dims, size)
  cdims = [0 if b else None for b in carry_b]
  body, out_b = batching.batch_sub(a.body, cdims + x_dims + k_dims, size, carry_b + [False] * (len(a.body.outs) - nc))
  carry = [batching.match_axis(s, d, 0, size) if b else s for s, d, b in zip(srcs[:nc], bdims[:nc], carry_b)]
  xs = [s if d is None else batching.moveaxis(s, d, 1) for s, d in zip(srcs[nc:nc + nx], bdims[nc:nc + nx])]
  y_b = out_b[nc:]
  avals = batched_avals(a.out_avals[:nc], carry_b, size) + batched_avals(a.out_avals[nc:], y_b, size, axis=1)
  arg = ScanArg((body,), avals, a.length, a.reverse, nc, nx)
  node = UOp(Ops.SCAN, node.dtype, tuple(carry + xs + list(srcs[nc + nx:])), arg)
  return node, tuple(cdims) + tuple(1 if b else None for b in y_b)

batching.batch_rules.update({Ops.COND: cond_batch, Ops.WHILE: while_batch, Ops.SCAN: scan_batch})

__all__ = ['cond', 'switch', 'while_loop', 'fori_loop', 'scan', 'map', 'dynamic_slice',
           'dynamic_update_slice', 'dynamic_index_in_dim', 'dynamic_slice_in_dim', 'dynamic_update_index_in_dim',
           'dynamic_update_slice_in_dim']
