"""custom: `custom_vjp`, `custom_jvp` and `checkpoint` (`remat`): functions whose derivative the user gives, or
whose forward pass the backward pass recomputes. Each call is staged as one multi-output node holding its
sub-jaxprs, with rules in every table.

Node layout (CUSTOM_VJP, CUSTOM_JVP, CHECKPOINT):
- `src`: the flat differentiable inputs (`arg.num_diff` of them), then the values the function closed over
  (grad tags and PARAMs of enclosing transforms it used), lifted out of its jaxprs ("closure conversion"), so
  sub-jaxprs never hide a tag or an outer trace. Constants and buffers stay inside.
- `arg`: a `CallSpec`. `arg.jaxpr` is what the node evaluates: one param per src, outputs = the node's outputs
  (`arg.out_avals`). `arg.rules` holds the rules by name, each a jaxpr or a `Rule` (the user's function, run
  or traced only when a transform needs it):
  - custom_jvp: `jvp(primals..., tangents of the primals..., closed-over...) -> (outs..., tangent outs...)`;
  - custom_vjp: `fwd(srcs...) -> (outs..., residuals...)` and
    `bwd(residuals..., output cts..., closed-over...) -> one ct per differentiable input`;
  - checkpoint: no rules; its vjp is a new CHECKPOINT node of the memoized vjp jaxpr, so the backward pass runs
    the forward again from the inputs instead of keeping intermediates.

When the user's functions run, as in JAX (tests/test_custom_rules_semantics.py counts them against JAX):
- A call whose inputs are all concrete and untagged runs the function directly (plain eager code); a value it
  closes over is then differentiated through its body, not through the custom rule.
- A call differentiated where it happens (a differentiable input carries a grad tag: grad, jvp, vjp, also
  inside jit or vmap) runs the rule instead of the function, on the actual inputs, so under eager grad they
  are concrete and the rule may branch on them: custom_jvp's rule is traced there into `jvp`, and the node
  evaluates its primal part; custom_vjp's fwd is traced there and *is* `arg.jaxpr` (the node also outputs the
  residuals, from index `arg.num_out` on), and bwd is a `Rule` run when the pullback is. Inside a rule, a
  call sees one differentiation fewer (JAX's rules see primals a level down): `differentiated_here`.
- Any other call (jit, vmap, a call inside a rule whose differentiations are used up) traces the function
  into `arg.jaxpr` and keeps every rule a `Rule`: differentiating the node later (grad of jit) runs them then.
- A custom rule's function closing over a value being differentiated is an error (as JAX's
  CustomVJPException): pass such values as arguments. Policies of checkpoint are accepted and ignored
  (everything is recomputed).

Every jaxpr has all inputs first in the order above, so a transform can map each of them the same way
(`CallSpec.map_jaxprs`): vmap batches them all with every input and output batched on axis 0.
"""
from __future__ import annotations
import contextlib, contextvars, functools, hashlib, inspect
from tinyjx import dtypes, tree_util, tracing
from tinyjx.array import Array
from tinyjx.tracing import Jaxpr
from tinyjx.uop import UOp, Ops, substitute, fresh_id, toposort
from tinyjx.transforms import ad, batching

class CallSpec:
  """The static half of a custom-rule or checkpoint node: the jaxpr it evaluates and its rule jaxprs."""
  __slots__ = ('kind', 'jaxpr', 'num_out', 'num_diff', 'rules', '_key')
  def __init__(self, kind: str, jaxpr: Jaxpr, num_out: int, num_diff: int, rules: tuple = ()):
    self.kind, self.jaxpr, self.num_out, self.num_diff, self.rules = kind, jaxpr, num_out, num_diff, tuple(rules)
    self._key = None

  @property
  def out_avals(self) -> tuple: return self.jaxpr.out_avals
  @property
  def params(self): return self.jaxpr.params
  @property
  def outs(self): return self.jaxpr.outs
  def rule(self, name: str) -> Jaxpr: return dict(self.rules)[name]
  def has_residual_outputs(self) -> bool:
    """A custom_vjp node whose fwd ran at the call evaluates fwd (it has no 'fwd' rule): its outputs past
    `num_out` are the residuals (possibly none)."""
    return self.kind.startswith('custom_vjp') and 'fwd' not in dict(self.rules)

  @property
  def key(self) -> str:
    if self._key is None:
      parts = [self.kind, self.jaxpr.key, str(self.num_out), str(self.num_diff)]
      parts += [f"{n}={j.key}" for n, j in self.rules]
      self._key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
    return self._key
  def __eq__(self, other): return isinstance(other, CallSpec) and other.key == self.key
  def __hash__(self): return hash(self.key)

  def map_jaxprs(self, fn, key: str) -> 'CallSpec':
    """The same spec with `fn(jaxpr)` applied to the evaluated jaxpr and to every rule jaxpr (to a rule not yet
    traced, when it is); `key` names `fn` in the spec's key."""
    def one(r): return r.mapped(fn, key) if isinstance(r, Rule) else fn(r)
    return CallSpec(self.kind, fn(self.jaxpr), self.num_out, self.num_diff, tuple((n, one(r)) for n, r in self.rules))

  def pretty_params(self) -> str:
    def text(r):
      return tracing.pretty(r, 6).lstrip() if isinstance(r, Jaxpr) else f"<{r.name}, run when differentiated>"
    body = "\n".join(f"      {n}={text(r)}" for n, r in [('jaxpr', self.jaxpr)] + list(self.rules))
    return f"[\n{body}\n      num_out={self.num_out}\n    ]"

# ---------------------------------------------------------------- staging a call as a node

def is_plain(arrays) -> bool:
  """Concrete, untagged inputs: nothing to stage, the function can simply run."""
  return all(a.uop.is_concrete and 'TAG' not in a.uop.flags for a in arrays)

def foreign_leaves(jaxpr: Jaxpr) -> list[UOp]:
  """Grad tags and PARAMs of other traces that `jaxpr` uses (not what is below them), in a stable order."""
  own, found, seen = set(jaxpr.params), [], set()
  stack = list(reversed(jaxpr.outs))
  while stack:
    n = stack.pop()
    if n in seen: continue
    seen.add(n)
    if n.op is Ops.TAG or (n.op is Ops.PARAM and n not in own): found.append(n); continue
    if 'TAG' in n.flags or 'PARAM' in n.flags: stack.extend(reversed(n.src))
  return found

def close_over(jaxprs: list[Jaxpr]) -> tuple[list[Jaxpr], list[UOp]]:
  """Closure conversion: the values the jaxprs closed over become extra trailing params of each of them."""
  consts = list(dict.fromkeys(n for j in jaxprs for n in foreign_leaves(j)))
  if not consts: return jaxprs, []
  out = []
  for j in jaxprs:
    tid = j.params[0].arg[2] if j.params else fresh_id()
    extra = [UOp(Ops.PARAM, c.dtype, (), (len(j.params) + k, c.shape, tid)) for k, c in enumerate(consts)]
    outs = substitute(list(j.outs), dict(zip(consts, extra)))
    out.append(Jaxpr(list(j.params) + extra, outs, j.in_tree, j.out_tree, j.out_weak, j.name))
  return out, consts

def node_outputs(op: Ops, srcs: list, spec: CallSpec) -> list[UOp]:
  """The node and one GETITEM per user-visible output."""
  avals = spec.out_avals
  node = UOp(op, avals[0][1] if avals else dtypes.bool_, tuple(srcs), spec)
  return [UOp(Ops.GETITEM, dt, (node,), i) for i, (_, dt) in enumerate(avals[:spec.num_out])]

def resolve_kwargs(fun, args: tuple, kwargs: dict, what: str) -> tuple:
  """Keyword arguments bound to their positions (custom rules see positional arguments only, as in JAX)."""
  if not kwargs: return tuple(args)
  bound = inspect.signature(fun).bind(*args, **kwargs)
  bound.apply_defaults()
  if bound.kwargs:
    raise TypeError(f"{what} does not support keyword-only arguments ({', '.join(bound.kwargs)}); "
                    "pass them positionally")
  return tuple(bound.args)

def fun_name(f) -> str: return getattr(f, '__name__', type(f).__name__)

class Call:
  """One call of a custom-rule function: static (nondiff) args kept as Python values, the rest flattened."""
  def __init__(self, fun, args: tuple, nondiff_argnums: tuple):
    self.args, self.nondiff = args, tuple(i % len(args) for i in nondiff_argnums) if args else ()
    self.diff = tuple(a for i, a in enumerate(args) if i not in self.nondiff)
    leaves, self.in_tree = tree_util.tree_flatten(self.diff)
    paths = tracing.arg_paths(fun, args, None, skip=set(self.nondiff))
    self.arrays = [ad.as_array(x, p) for x, p in zip(leaves, paths)]
    self.avals, self.paths = [a.aval for a in self.arrays], paths

  def full_args(self, flat) -> list:
    """The original argument list with the differentiable ones rebuilt from `flat` leaves."""
    it = iter(tree_util.tree_unflatten(self.in_tree, list(flat)))
    return [a if i in self.nondiff else next(it) for i, a in enumerate(self.args)]
  def static(self) -> list: return [self.args[i] for i in self.nondiff]
  def diff_tree(self, flat): return tree_util.tree_unflatten(self.in_tree, list(flat))

def trace(fun, avals, name: str, paths=None) -> Jaxpr: return tracing.trace_flat(fun, avals, name, paths)

def emit_effects(j: Jaxpr, srcs: list) -> Jaxpr:
  """Emit `j`'s effects (debug callbacks) where the node is made, with `srcs` for its params, and return `j`
  without them: a custom-rule or checkpoint node computes values only, and its callbacks run once, in program
  order, in the trace that called the function (vmap batches them, grad sees primals), as JAX runs them."""
  if not j.effects: return j
  j.emit_effects(*srcs)
  return Jaxpr(j.params, j.outs, j.in_tree, j.out_tree, j.out_weak, j.name)

def out_avals_text(tree, avals) -> str:
  leaves = ", ".join(f"{d.short}[{','.join(map(str, s))}]" for s, d in avals)
  return f"{tree} with leaves {leaves}"

# ---------------------------------------------------------------- rules that run when a transform needs them

# How many custom rules (jvp, fwd, bwd of any custom function) are running right now, one inside the other.
rule_depth: contextvars.ContextVar = contextvars.ContextVar('tinyjx_custom_rule_depth', default=0)

@contextlib.contextmanager
def running_rule():
  """While a user's rule runs, calls of custom functions inside it see one differentiation fewer (see
  `differentiated_here`), as JAX's rules see primals one level down."""
  token = rule_depth.set(rule_depth.get() + 1)
  try: yield
  finally: rule_depth.reset(token)

def tag_depth(roots) -> int:
  """The most grad tags nested on one path below `roots`: how many differentiations (grad of grad ...) see them."""
  memo: dict = {}
  for root in roots:
    stack = [(root, False)]
    while stack:
      u, done = stack.pop()
      if u in memo or 'TAG' not in u.flags: continue
      if done:
        memo[u] = (u.op is Ops.TAG) + max((memo.get(x, 0) for x in u.src), default=0)
        continue
      stack.append((u, True))
      stack.extend((x, False) for x in u.src if x not in memo and 'TAG' in x.flags)
  return max((memo.get(r, 0) for r in roots), default=0)

def differentiated_here(arrays) -> bool:
  """Whether a call is differentiated at the current rule depth: then its rule runs now, on the actual primals
  (concrete under eager grad, so a Python `if` on them works), and the function itself does not run. A call
  inside a rule is differentiated here only by the differentiations the enclosing rules have not used up."""
  uops = [a.uop for a in arrays if 'TAG' in a.uop.flags]
  if not uops: return False
  depth = rule_depth.get()
  return depth == 0 or tag_depth(uops) > depth

class Rule:
  """A user's rule (custom_jvp's jvp, custom_vjp's fwd or bwd) that runs only when a transform needs it, as in
  JAX. `fun(*arrays) -> list of Arrays` takes the rule's inputs (node layout above) without the closed-over
  values, which it reaches through its own Python closure; `consts` are those values as they were when the
  node was made, replaced by the rule's trailing inputs at every use (jit and vmap inline the node with new
  ones). Applied to UOps, a rule runs `fun` there and then (once per use, as JAX calls it); `jaxpr()` traces it
  once, at `avals()`, then applies the jaxpr transforms recorded by `mapped` (vmap of the node)."""
  __slots__ = ('name', 'fun', 'avals', 'consts', 'token', 'maps', 'base')
  def __init__(self, name: str, fun, avals, consts, token: str, maps: tuple = (), base=None):
    self.name, self.fun, self.avals, self.consts, self.token, self.maps = name, fun, avals, tuple(consts), token, maps
    self.base = base if base is not None else [None]      # the traced, unmapped jaxpr, shared with mapped copies

  @property
  def key(self) -> str:
    return hashlib.sha256("|".join([self.token] + [k for _, k in self.maps]).encode()).hexdigest()[:32]
  def mapped(self, fn, key: str) -> 'Rule':
    return Rule(self.name, self.fun, self.avals, self.consts, self.token, self.maps + ((fn, key),), self.base)

  def base_jaxpr(self) -> Jaxpr:
    if self.base[0] is None:
      n, const_avals = len(self.avals()), [(c.shape, c.dtype, False) for c in self.consts]
      with running_rule():
        j = trace(lambda *xs: self.fun(*xs[:n]), list(self.avals()) + const_avals, self.name)
      moved = dict(zip(self.consts, j.params[n:]))
      self.base[0] = Jaxpr(j.params, substitute(list(j.outs), moved), j.in_tree, j.out_tree, j.out_weak, j.name,
                           substitute(list(j.effects), moved))
    return self.base[0]

  def jaxpr(self) -> Jaxpr: return functools.reduce(lambda j, m: m[0](j), self.maps, self.base_jaxpr())

  def __call__(self, *args: UOp) -> list[UOp]:
    if self.maps:   # a transformed rule runs as its jaxpr; its callbacks run where it is applied
      j = self.jaxpr()
      j.emit_effects(*args)
      return j(*args)
    own, consts = args[:len(args) - len(self.consts)], args[len(args) - len(self.consts):]
    with running_rule():
      outs = [to_uop(x, self.name) for x in self.fun(*[Array(u) for u in own])]
    moved = {c: n for c, n in zip(self.consts, consts) if c is not n}
    return substitute(outs, moved) if moved else outs

def to_uop(x, name: str) -> UOp: return ad.as_array(x, f"output of {name}").uop

def as_jaxpr(rule) -> Jaxpr: return rule.jaxpr() if isinstance(rule, Rule) else rule

def trace_at(fun, arrays: list, extra_avals: list, name: str) -> Jaxpr:
  """Trace `fun(*arrays, *extra)` with `arrays` given as they are (concrete ones stay concrete, so the function
  can branch on them) and `extra` as fresh params; the jaxpr then takes `arrays` as params too."""
  n = len(arrays)
  j = trace(lambda *xs: fun(*arrays, *xs[n:]), [a.aval for a in arrays] + list(extra_avals), name)
  if j.effects:   # callbacks of the rule run here, on the primals (the tangents do not exist yet)
    effects = substitute(list(j.effects), dict(zip(j.params[:n], [a.uop for a in arrays])))
    if set(j.params[n:]) & set(toposort(effects)):
      raise NotImplementedError(f"{name}: a debug callback in this rule reads the tangents, which tinyjx does not "
                                "have when it runs the rule; print the primals only, or print the tangents "
                                "outside the rule")
    for e in effects: tracing.emit_effect(e)
  outs = substitute(list(j.outs), {a.uop: p for a, p in zip(arrays, j.params[:n])})
  return Jaxpr(j.params, outs, j.in_tree, j.out_tree, j.out_weak, j.name)

def sub_jaxpr(j: Jaxpr, params: list, outs: list, name: str) -> Jaxpr:
  """The jaxpr of some of `j`'s params (renumbered from 0) to some of its outputs; the outputs must not use
  the other params."""
  tid = fresh_id()
  new = [UOp(Ops.PARAM, p.dtype, (), (i, p.shape, tid)) for i, p in enumerate(params)]
  out_nodes = substitute([j.outs[i] for i in outs], dict(zip(params, new)))
  left = set(j.params) - set(params)
  if left and any(leaf in left for leaf in foreign_leaves(Jaxpr(new, out_nodes))):
    raise TypeError(f"{name}: its primal output depends on the tangents; compute the primal output from the "
                    "primals only")
  return Jaxpr(new, out_nodes, None, j.out_tree, [j.out_weak[i] for i in outs], name)

# ---------------------------------------------------------------- custom_jvp

class custom_jvp:
  """A function with a user-defined forward-mode derivative (reverse mode transposes it).

  As in JAX, the rule runs only where the function is differentiated, and then the function itself does not
  run: a plain call, `jit` and `vmap` call the function; `grad`, `jvp` and `vjp` call the rule (once, at that
  call, on concrete primals under eager differentiation, so a Python `if` on them works); a function
  differentiated only later (grad of jit) gets its rule traced when the derivative is taken.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> @tinyjx.custom_jvp
  ... def f(x): return jnp.sin(x)
  >>> @f.defjvp
  ... def f_jvp(primals, tangents): return f(primals[0]), 2.0 * tangents[0]
  >>> tinyjx.grad(f)(0.0).item()
  2.0
  """
  def __init__(self, fun, nondiff_argnums=()):
    functools.update_wrapper(self, fun)
    self.fun, self.nondiff_argnums, self.jvp = fun, tuple(nondiff_argnums), None

  def defjvp(self, jvp, symbolic_zeros=False):
    """Set the rule `jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)`; returns `jvp`."""
    self.jvp = jvp
    return jvp

  def defjvps(self, *jvps):
    """One rule per argument, `jvp_i(g_i, primal_out, *primals) -> tangent contribution` (None: no dependence)."""
    if self.nondiff_argnums: raise TypeError("defjvps cannot be used with nondiff_argnums; use defjvp instead")
    def jvp(primals, tangents):
      out = self.fun(*primals)
      parts = [rule(t, out, *primals) for rule, t in zip(jvps, tangents) if rule is not None]
      if not parts: return out, tree_util.tree_map(lambda o: o * 0, out)
      return out, functools.reduce(lambda a, b: tree_util.tree_map(lambda x, y: x + y, a, b), parts)
    self.jvp = jvp

  def __call__(self, *args, **kwargs):
    name = fun_name(self.fun)
    if self.jvp is None: raise AttributeError(f"No JVP defined for custom_jvp function {name}; use defjvp or defjvps")
    args = resolve_kwargs(self.fun, args, kwargs, "custom_jvp")
    call = Call(self.fun, args, self.nondiff_argnums)
    if is_plain(call.arrays): return self.fun(*args)
    if differentiated_here(call.arrays): return self.rule_now(call, name)
    # inside a rule, on primals whose differentiations the enclosing rules have used up: JAX runs the function on
    # them (concrete under eager grad, so it may branch on them in Python)
    if rule_depth.get() and all(a.uop.is_concrete for a in call.arrays): return self.fun(*args)
    prim = trace(lambda *xs: self.fun(*call.full_args(xs)), call.avals, f"custom_jvp({name})", call.paths)
    prim = emit_effects(prim, [a.uop for a in call.arrays])
    (prim,), consts = close_over([prim])
    n = len(call.arrays)
    def rule(*xs):
      out = self.jvp(*call.static(), tuple(call.diff_tree(xs[:n])), tuple(call.diff_tree(xs[n:])))
      return check_jvp_output(out, (prim.out_tree, prim.out_avals), name, fun_name(self.jvp))
    jvp = Rule(f"custom_jvp_rule({name})", rule, lambda: tangent_avals(call.avals), consts, fresh_token())
    spec = CallSpec('custom_jvp', prim, len(prim.outs), n, (('jvp', jvp),))
    return staged(Ops.CUSTOM_JVP, [a.uop for a in call.arrays] + consts, spec, prim)

  def rule_now(self, call: Call, name: str):
    """Differentiated at this call: run the rule on the actual primals; the node evaluates its primal output."""
    n, expected = len(call.arrays), []
    def rule(*xs):
      out = self.jvp(*call.static(), tuple(call.diff_tree(xs[:n])), tuple(call.diff_tree(xs[n:])))
      expected.append(primal_structure(out, name, fun_name(self.jvp)))
      return check_jvp_output(out, expected[0], name, fun_name(self.jvp))
    with running_rule():
      jv = trace_at(rule, call.arrays, [(s, d, False) for s, d, _ in call.avals], f"custom_jvp_rule({name})")
    jv.out_tree = expected[0][0]
    (jv,), consts = close_over([jv])
    num_out = len(jv.outs) // 2
    prim = sub_jaxpr(jv, jv.params[:n] + jv.params[2 * n:], list(range(num_out)), f"custom_jvp({name})")
    spec = CallSpec('custom_jvp', prim, num_out, n, (('jvp', jv),))
    return staged(Ops.CUSTOM_JVP, [a.uop for a in call.arrays] + consts, spec, prim)

def tangent_avals(avals) -> list: return list(avals) + [(s, d, False) for s, d, _ in avals]
def fresh_token() -> str: return f"rule{fresh_id()}"

def staged(op: Ops, srcs: list, spec: CallSpec, prim: Jaxpr):
  """The node's user-visible outputs as the function's output pytree."""
  outs = node_outputs(op, srcs, spec)
  return tree_util.tree_unflatten(prim.out_tree, [Array(u, w) for u, w in zip(outs, prim.out_weak)])

def primal_structure(out, name: str, rule_name: str) -> tuple:
  """(tree, avals) of a custom_jvp rule's primal output, which the tangent output must match."""
  if not isinstance(out, (tuple, list)) or len(out) != 2:
    raise TypeError(f"custom_jvp rule {rule_name} for {name} must return a pair (primal_out, tangent_out), "
                    f"got {type(out).__name__}")
  flat, tree = tree_util.tree_flatten(out[0])
  return tree, tuple(ad.as_array(x, "primal output").aval[:2] for x in flat)

def check_jvp_output(out, expected: tuple, name: str, rule_name: str) -> list:
  """The flat (primal outs + tangent outs) of a custom_jvp rule, checked against the (tree, avals) expected."""
  if not isinstance(out, (tuple, list)) or len(out) != 2:
    raise TypeError(f"custom_jvp rule {rule_name} for {name} must return a pair (primal_out, tangent_out), "
                    f"got {type(out).__name__}")
  tree, avals = expected
  leaves = []
  for part, what in zip(out, ("primal output", "tangent output")):
    flat, got_tree = tree_util.tree_flatten(part)
    arrs = [ad.as_array(x, what) for x in flat]
    if got_tree != tree or [(a.shape, a.dtype) for a in arrs] != list(avals):
      raise TypeError(f"custom_jvp rule {rule_name} for {name}: its {what} must match the function's output, "
                      f"expected {out_avals_text(tree, avals)}, got "
                      f"{out_avals_text(got_tree, [(a.shape, a.dtype) for a in arrs])}")
    leaves += arrs
  return leaves

def closure_error(kind: str, name: str) -> Exception:
  return TypeError(f"{kind} function {name} closed over a value that is being differentiated; its custom rule only "
                   "covers its explicit arguments. Pass that value as an argument instead (or use nondiff_argnums "
                   "if it must not be differentiated)")

def custom_jvp_jvp(node, ts):
  spec = node.arg
  nd = spec.num_diff
  if any(t is not None for t in ts[nd:]): raise closure_error("custom_jvp", spec.jaxpr.name)
  tangents = [t if t is not None else ad.zeros(s.shape, s.dtype) for t, s in zip(ts[:nd], node.src[:nd])]
  outs = spec.rule('jvp')(*node.src[:nd], *tangents, *node.src[nd:])
  return tuple(outs[spec.num_out:])

def custom_jvp_vjp(cts, node):
  """Transpose of the jvp rule in its tangents (it is linear in them), at the node's primal inputs."""
  spec = node.arg
  nd, nc, n = spec.num_diff, len(node.src) - spec.num_diff, spec.num_out
  wrt = (False,) * nd + (True,) * nd + (False,) * nc
  mask = (False,) * n + tuple(c is not None for c in cts[:n])
  back = ad.vjp_jaxpr(as_jaxpr(spec.rule('jvp')), wrt, mask)
  tangent_slots = [ad.zeros(s.shape, s.dtype) for s in node.src[:nd]]
  grads = back(*node.src[:nd], *tangent_slots, *node.src[nd:], *[c for c in cts[:n] if c is not None])
  return tuple(grads) + (closure_error("custom_jvp", spec.jaxpr.name),) * nc

# ---------------------------------------------------------------- custom_vjp

class custom_vjp:
  """A function with a user-defined reverse-mode derivative: `f.defvjp(fwd, bwd)` with
  `fwd(*args) -> (out, residuals)` and `bwd(*nondiff_args, residuals, out_ct) -> one ct per differentiable arg`.

  As in JAX, a plain call, `jit` and `vmap` call only the function; differentiating it calls `fwd` at the call
  (instead of the function) and `bwd` when the pullback runs, once each; a function differentiated only later
  (grad of jit) runs `fwd` and `bwd` when the gradient is taken.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> @tinyjx.custom_vjp
  ... def f(x): return jnp.sin(x)
  >>> f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda cos_x, g: (3.0 * g,))
  >>> tinyjx.grad(f)(0.0).item()
  3.0
  """
  def __init__(self, fun, nondiff_argnums=()):
    functools.update_wrapper(self, fun)
    self.fun, self.nondiff_argnums, self.fwd, self.bwd = fun, tuple(nondiff_argnums), None, None

  def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
    """Set the forward (`fwd(*args) -> (out, residuals)`) and backward (`bwd(*nondiff, res, ct) -> cts`) rules."""
    self.fwd, self.bwd = fwd, bwd

  def __call__(self, *args, **kwargs):
    name = fun_name(self.fun)
    if self.fwd is None: raise AttributeError(f"No VJP defined for custom_vjp function {name}; use defvjp")
    args = resolve_kwargs(self.fun, args, kwargs, "custom_vjp")
    call = Call(self.fun, args, self.nondiff_argnums)
    if is_plain(call.arrays): return self.fun(*args)
    kind = 'custom_vjp+jvp' if getattr(self, 'forward_mode_differentiates_fun', False) else 'custom_vjp'
    if differentiated_here(call.arrays): return self.fwd_now(call, name, kind)
    prim = trace(lambda *xs: self.fun(*call.full_args(xs)), call.avals, f"custom_vjp({name})", call.paths)
    prim = emit_effects(prim, [a.uop for a in call.arrays])
    (prim,), consts = close_over([prim])
    residuals = []                          # (tree, avals) of the residuals, once fwd has run
    def fwd(*xs):
      leaves, res, tree = check_fwd_output(self.fwd(*call.full_args(xs)), prim, name, fun_name(self.fwd))
      residuals[:] = [(tree, [r.aval for r in res])]
      return leaves + res
    fwd_rule = Rule(f"custom_vjp_fwd({name})", fwd, lambda: call.avals, consts, fresh_token())
    def bwd_avals():
      if not residuals: fwd_rule.base_jaxpr()
      return residuals[0][1] + [(s, d, False) for s, d in prim.out_avals]
    bwd = self.bwd_rule(call, prim, lambda: residuals[0][0], bwd_avals, consts, name)
    spec = CallSpec(kind, prim, len(prim.outs), len(call.arrays), (('fwd', fwd_rule), ('bwd', bwd)))
    return staged(Ops.CUSTOM_VJP, [a.uop for a in call.arrays] + consts, spec, prim)

  def fwd_now(self, call: Call, name: str, kind: str):
    """Differentiated at this call: run fwd on the actual inputs; the node evaluates fwd (outputs, then the
    residuals the backward pass reads), and bwd runs when the pullback does."""
    found = []
    def fwd(*xs):
      out = self.fwd(*call.full_args(xs))
      ref = fwd_structure(out, name, fun_name(self.fwd))
      leaves, res, tree = check_fwd_output(out, ref, name, fun_name(self.fwd))
      found.append((ref, tree, [r.aval for r in res]))
      return leaves + res
    with running_rule():
      fj = trace_at(fwd, call.arrays, [], f"custom_vjp_fwd({name})")
    (ref, res_tree, res_avals) = found[0]
    (fj,), consts = close_over([fj])
    n_out = len(ref.outs)
    bwd = self.bwd_rule(call, ref, lambda: res_tree, lambda: res_avals + [(s, d, False) for s, d in ref.out_avals],
                        consts, name)
    fj = Jaxpr(fj.params, fj.outs, None, ref.out_tree, tuple(ref.out_weak) + (False,) * (len(fj.outs) - n_out), fj.name)
    spec = CallSpec(kind, fj, n_out, len(call.arrays), (('bwd', bwd),))
    return staged(Ops.CUSTOM_VJP, [a.uop for a in call.arrays] + consts, spec, ref)

  def bwd_rule(self, call: Call, prim, res_tree, avals, consts, name: str) -> Rule:
    """`bwd(*nondiff, residuals, out_ct)` as a rule from flat residuals and cts to flat input cts."""
    expected = tree_util.tree_structure(call.diff)
    def body(*xs):
      n_res = len(avals()) - len(prim.outs)
      res = tree_util.tree_unflatten(res_tree(), list(xs[:n_res]))
      ct = tree_util.tree_unflatten(prim.out_tree, list(xs[n_res:]))
      return bwd_leaves(self.bwd(*call.static(), res, ct), call, expected, name, fun_name(self.bwd))
    return Rule(f"custom_vjp_bwd({name})", body, avals, consts, fresh_token())

class Shape:
  """What the checks need of a function's output when only fwd ran: its tree, avals and weak flags."""
  def __init__(self, tree, arrays):
    self.out_tree, self.outs, self.out_weak = tree, [a.uop for a in arrays], [a.weak for a in arrays]
  @property
  def out_avals(self) -> tuple: return tuple((o.shape, o.dtype) for o in self.outs)

def fwd_structure(out, name: str, fwd_name: str) -> Shape:
  if not isinstance(out, (tuple, list)) or len(out) != 2:
    raise TypeError(f"custom_vjp fwd function {fwd_name} for {name} must return a pair (output, residuals), "
                    f"got {type(out).__name__}")
  flat, tree = tree_util.tree_flatten(out[0])
  return Shape(tree, [ad.as_array(x, "fwd output") for x in flat])

def check_fwd_output(out, prim, name: str, fwd_name: str) -> tuple:
  if not isinstance(out, (tuple, list)) or len(out) != 2:
    raise TypeError(f"custom_vjp fwd function {fwd_name} for {name} must return a pair (output, residuals), "
                    f"got {type(out).__name__}")
  flat, tree = tree_util.tree_flatten(out[0])
  arrs = [ad.as_array(x, "fwd output") for x in flat]
  if tree != prim.out_tree or [(a.shape, a.dtype) for a in arrs] != list(prim.out_avals):
    raise TypeError(f"custom_vjp fwd function {fwd_name} for {name} must return the function's output first: "
                    f"expected {out_avals_text(prim.out_tree, prim.out_avals)}, got "
                    f"{out_avals_text(tree, [(a.shape, a.dtype) for a in arrs])}")
  res, res_tree = tree_util.tree_flatten(out[1])
  return arrs, [ad.as_array(x, "residual") for x in res], res_tree

def bwd_leaves(got, call: Call, expected, name: str, bwd_name: str) -> list:
  """Flat cotangents of the differentiable inputs from what bwd returned (None entries mean zero)."""
  n = len(call.diff)
  if not isinstance(got, (tuple, list)) or len(got) != n:
    shown = f"a {type(got).__name__} of length {len(got)}" if isinstance(got, (tuple, list)) else type(got).__name__
    raise TypeError(f"custom_vjp bwd function {bwd_name} for {name} must return a tuple with one cotangent per "
                    f"differentiable argument: expected structure {expected}, got {shown} "
                    f"({tree_util.tree_structure(got, is_leaf=lambda x: x is None)})")
  leaves = []
  for i, (g, arg) in enumerate(zip(got, call.diff)):
    arg_leaves, arg_tree = tree_util.tree_flatten(arg)
    if g is None: g = tree_util.tree_unflatten(arg_tree, [None] * len(arg_leaves))
    g_leaves, g_tree = tree_util.tree_flatten(g, is_leaf=lambda x: x is None)
    if g_tree != arg_tree:
      raise TypeError(f"custom_vjp bwd function {bwd_name} for {name}: cotangent {i} must have the structure of "
                      f"argument {i}, expected {arg_tree}, got {g_tree}")
    for a, c in zip(arg_leaves, g_leaves):
      leaves.append(bwd_leaf(c, ad.as_array(a, "argument"), i, name, bwd_name))
  return leaves

def bwd_leaf(c, a: Array, i: int, name: str, bwd_name: str) -> Array:
  if c is None: return Array(ad.zeros(a.shape, a.dtype))
  c = ad.as_array(c, "cotangent")
  if c.shape != a.shape:
    raise TypeError(f"custom_vjp bwd function {bwd_name} for {name}: cotangent {i} has shape {c.shape} but the "
                    f"argument has shape {a.shape}; return a cotangent of the argument's shape and dtype")
  return Array(c.uop.cast(a.dtype))

def custom_vjp_vjp(cts, node):
  """bwd at the residuals (the node's extra outputs, or fwd run now for a node staged before differentiation),
  only where an output cotangent arrives; cotangents of the residuals themselves (grad of grad) flow back
  through fwd's own derivative."""
  spec = node.arg
  n, nd, nc = spec.num_out, spec.num_diff, len(node.src) - spec.num_diff
  out = [None] * nd
  if any(c is not None for c in cts[:n]):
    if spec.has_residual_outputs():
      res = [UOp(Ops.GETITEM, dt, (node,), n + k) for k, (_, dt) in enumerate(spec.out_avals[n:])]
    else:
      res = spec.rule('fwd')(*node.src)[n:]
    out_cts = [c if c is not None else ad.zeros(s, d) for c, (s, d) in zip(cts[:n], spec.out_avals[:n])]
    out = list(spec.rule('bwd')(*res, *out_cts, *node.src[nd:]))
  out += [closure_error("custom_vjp", spec.jaxpr.name)] * nc
  res_cts = tuple(cts[n:]) if spec.has_residual_outputs() else ()
  if any(c is not None for c in res_cts):
    back = ad.vjp_jaxpr(spec.jaxpr, (True,) * len(node.src), (False,) * n + tuple(c is not None for c in res_cts))
    extra = back(*node.src, *[c for c in res_cts if c is not None])
    out = [e if g is None else g if isinstance(g, Exception) else ad.add(g, e) for g, e in zip(out, extra)]
  return tuple(out)

def custom_vjp_jvp(node, ts):
  """JAX has no forward mode for custom_vjp functions. tinyjx extension: with
  `f.forward_mode_differentiates_fun = True` (nn's convolution sets it), forward mode differentiates the
  function itself (for fwd, the same function with its residuals as extra outputs)."""
  spec = node.arg
  if spec.kind == 'custom_vjp+jvp':
    mask = tuple(t is not None for t in ts)
    return tuple(ad.jvp_jaxpr(spec.jaxpr, mask)(*node.src, *[t for t in ts if t is not None])[len(spec.jaxpr.outs):])
  raise TypeError(f"can't apply forward-mode autodiff (jvp, jacfwd, hessian) to the custom_vjp function "
                  f"{node.arg.jaxpr.name}; use reverse mode (grad, vjp, jacrev), or define it with custom_jvp")

# ---------------------------------------------------------------- checkpoint / remat

def checkpoint(fun=None, *, prevent_cse=True, policy=None, static_argnums=()):
  """`checkpoint(f)` (alias `remat`): the same function, but its backward pass recomputes f's forward pass
  from the inputs instead of keeping f's intermediates, trading compute for memory. Every intermediate is
  recomputed (`policy` is accepted and ignored: nothing is saved). `static_argnums` are passed through as
  Python values.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.grad(tinyjx.checkpoint(lambda x: jnp.sin(jnp.sin(x))))(0.0).item()
  1.0
  """
  if fun is None:
    return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums)
  static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
  name = fun_name(fun)
  @functools.wraps(fun)
  def remat_f(*args, **kwargs):
    args = resolve_kwargs(fun, args, kwargs, "checkpoint")
    call = Call(fun, args, static)
    if is_plain(call.arrays): return fun(*args)
    jaxpr = trace(lambda *xs: fun(*call.full_args(xs)), call.avals, f"checkpoint({name})", call.paths)
    jaxpr = emit_effects(jaxpr, [a.uop for a in call.arrays])
    (jaxpr,), consts = close_over([jaxpr])
    spec = CallSpec('checkpoint', jaxpr, len(jaxpr.outs), len(call.arrays))
    outs = node_outputs(Ops.CHECKPOINT, [a.uop for a in call.arrays] + consts, spec)
    return tree_util.tree_unflatten(jaxpr.out_tree, [Array(u, w) for u, w in zip(outs, jaxpr.out_weak)])
  return remat_f

remat = checkpoint

def checkpoint_vjp(cts, node):
  """A new CHECKPOINT node of the vjp jaxpr: it reruns the forward from the inputs, then goes backward."""
  spec = node.arg
  wrt = tuple(ad.is_float(s.dtype) for s in node.src)
  mask = tuple(c is not None for c in cts)
  back = ad.vjp_jaxpr(spec.jaxpr, wrt, mask)
  srcs = list(node.src) + [c for c in cts if c is not None]
  outs = node_outputs(Ops.CHECKPOINT, srcs, CallSpec('checkpoint', back, len(back.outs), len(srcs)))
  it = iter(outs)
  return tuple(next(it) if w else None for w in wrt)

def checkpoint_jvp(node, ts):
  spec = node.arg
  mask = tuple(t is not None for t in ts)
  fwd = ad.jvp_jaxpr(spec.jaxpr, mask)
  return tuple(fwd(*node.src, *[t for t in ts if t is not None])[spec.num_out:])

ad.vjp_rules.update({Ops.CUSTOM_JVP: custom_jvp_vjp, Ops.CUSTOM_VJP: custom_vjp_vjp, Ops.CHECKPOINT: checkpoint_vjp})
ad.jvp_rules.update({Ops.CUSTOM_JVP: custom_jvp_jvp, Ops.CUSTOM_VJP: custom_vjp_jvp, Ops.CHECKPOINT: checkpoint_jvp})

# ---------------------------------------------------------------- batching

def custom_batch(node, srcs, bdims):
  """vmap of a custom-rule or checkpoint node: every source moves its batch axis to 0 (unbatched ones are
  broadcast), and every jaxpr of the spec is batched with all inputs and all outputs at axis 0. Rule jaxprs
  take the node's inputs first, so this one mapping keeps the primal and its rules consistent."""
  size = batching.batch_size(srcs, bdims)
  moved = tuple(batching.match_axis(s, b, 0, size) for s, b in zip(srcs, bdims))
  def batch_all(j):
    return batching.batch_sub(j, [0] * len(j.params), size, [True] * len(j.outs))[0]
  spec = node.arg.map_jaxprs(batch_all, f"batch{size}")
  return node.replace(src=moved, arg=spec), tuple(0 for _ in spec.out_avals)

batching.batch_rules.update({Ops.CUSTOM_JVP: custom_batch, Ops.CUSTOM_VJP: custom_batch, Ops.CHECKPOINT: custom_batch})
