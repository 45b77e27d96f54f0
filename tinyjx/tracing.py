"""tracing: turning a Python function into a jaxpr, printing jaxprs, and inlining them.

A `Jaxpr` is a UOp subgraph: `params` are PARAM leaves (one per flat input), `outs` the output nodes.
Tracing calls the function on Arrays whose graphs are those PARAMs; anything else the function touches
(closed-over arrays, values of outer traces, grad tags) simply appears inside the graph. Inlining a
jaxpr substitutes the caller's nodes for the PARAMs, which is how jit, vmap and pmap hand results back
to an enclosing transform. `make_jaxpr(f)(*args)` prints the graph in JAX's let-binding style.

Effects (a `jax.debug.callback`, or a control-flow node whose body makes one) have no consumer, so the
graph alone would drop them. While a trace runs, `emit_effect` appends each effect node to it (outside any
trace it runs the effect at once, which is eager mode); the jaxpr keeps them in `effects`, in program order,
and every evaluator of a jaxpr (the executables, the control-flow steps) computes them before its outputs.
A jaxpr derived by a transform's rule (a jvp, vjp or residual body) is built without effects, so a callback
runs in the primal computation only; `emit_effects` re-emits them where a jaxpr is inlined (jit, vmap).
"""
from __future__ import annotations
import functools, inspect, hashlib
import numpy as np
from tinyjx import array, dtypes, tree_util
from tinyjx.array import Array, Trace, traces
from tinyjx.uop import UOp, Ops, GroupOp, toposort, substitute, fresh_id, arg_text, prim_name

class Jaxpr:
  """A traced function: PARAM leaves in, output nodes out, with the pytree structures of both sides."""
  __slots__ = ('params', 'outs', 'in_tree', 'out_tree', 'out_weak', 'name', 'effects', '_key')
  def __init__(self, params, outs, in_tree=None, out_tree=None, out_weak=None, name="jaxpr", effects=()):
    self.params, self.outs, self.effects = tuple(params), tuple(outs), tuple(effects)
    self.in_tree, self.out_tree, self.name = in_tree, out_tree, name
    self.out_weak = tuple(out_weak) if out_weak is not None else (False,) * len(self.outs)
    self._key = None

  @property
  def in_avals(self) -> tuple: return tuple((p.shape, p.dtype) for p in self.params)
  @property
  def out_avals(self) -> tuple: return tuple((o.shape, o.dtype) for o in self.outs)

  @property
  def key(self) -> str:
    """Content hash, independent of which trace made the PARAMs (so equal functions share caches)."""
    if self._key is None:
      canon = {p: UOp(Ops.PARAM, p.dtype, (), (p.arg[0], p.arg[1], 0)) for p in self.params}
      outs = substitute(list(self.effects) + list(self.outs), canon)
      text = "|".join([p.key for p in canon.values()] + [o.key for o in outs] + [str(self.out_weak)] +
                      [str(len(self.effects))])
      self._key = hashlib.sha256(text.encode()).hexdigest()[:32]
    return self._key

  def __call__(self, *args: UOp) -> list[UOp]:
    """Inline: the output nodes with `args` (UOps, one per param) in place of the PARAMs."""
    if len(args) != len(self.params):
      raise TypeError(f"{self.name} takes {len(self.params)} inputs, got {len(args)}")
    return substitute(list(self.outs), dict(zip(self.params, args)))

  @property
  def roots(self) -> tuple:
    """What an evaluator computes: the effects (in program order), then the outputs."""
    return self.effects + self.outs

  def emit_effects(self, *args: UOp) -> None:
    """Inline the effects with `args` for the PARAMs and emit them (into the enclosing trace, or run them now)."""
    if not self.effects: return
    for e in substitute(list(self.effects), dict(zip(self.params, args))): emit_effect(e)

  def __str__(self): return pretty(self)
  def __repr__(self): return pretty(self)
  def _repr_pretty_(self, p, cycle): p.text(pretty(self))

# --- effects ---
effect_stack: list = []   # one list per trace being built: the effect nodes made while it runs

def emit_effect(node: UOp) -> None:
  """Record effect `node` (DEBUG_CALLBACK, or GETITEM 0 of a control-flow node with effects) in the innermost trace
  being built, or run it now when nothing is traced. Each emission is a new effect: a callback's record is renewed
  so that two equal calls stay two nodes (hash-consing would merge them) and an eager run is never a cache hit."""
  renew = getattr(node.arg, 'renew', None)
  if renew is not None: node = node.replace(arg=renew())
  if effect_stack: effect_stack[-1].append(node)
  else: run_effect(node)

def run_effect(node: UOp) -> None:
  """Run an effect eagerly: a callback on its realized arguments, a control-flow node by realizing its outputs."""
  from tinyjx.array import realize_uops, buffers, realized_cache
  from tinyjx.uop import out_avals
  if node.op is Ops.DEBUG_CALLBACK:
    done = realize_uops(list(node.src), "a debug callback")
    node.arg([buffers[b.arg[0]].numpy().reshape(u.shape) for b, u in zip(done, node.src)])   # the host call
    return
  multi = node.src[0]
  outs = [UOp(Ops.GETITEM, d, (multi,), i) for i, (_, d) in enumerate(out_avals(multi))]
  # cached even when the graph holds no BUFFER: the callback's record makes this node unique, and reading an
  # output later must not run the loop (and its callbacks) again
  for u, b in zip(outs, realize_uops(outs, "a debug callback")): realized_cache[u] = b

def has_effects(node: UOp) -> bool:
  """Whether evaluating `node` runs effects: a callback, or a node holding sub-jaxprs that have effects."""
  if node.op is Ops.DEBUG_CALLBACK: return True
  subs = getattr(node.arg, 'jaxprs', None) or ()
  return any(getattr(j, 'effects', ()) for j in subs)

# --- avals of Python values ---
def aval_of(x, path: str = "argument") -> tuple:
  """(shape, dtype, weak) of an array-like argument, with a clear error for anything else."""
  if isinstance(x, Array): return x.aval
  if isinstance(x, (bool, int, float, complex, np.bool_)) and not isinstance(x, np.ndarray):
    if isinstance(x, (np.number, np.bool_)): return ((), dtypes.to_dtype(np.asarray(x).dtype), False)
    dt = dtypes.python_scalar_dtype(x)
    if type(x) is int and not (ii := dtypes.iinfo(dt)).min <= x <= ii.max:   # (it would wrap when copied in)
      fix = ("mark it static, or pass it as a float" if dt.itemsize >= 8 else
             "pass it as a numpy int64 array with 64-bit mode on (jax_enable_x64), or mark it static")
      raise OverflowError(f"{path}: Python int {x} is too large to convert to {dt}; {fix}")
    return ((), dt, not isinstance(x, bool))   # Python bool is not weak, as in JAX
  if isinstance(x, (np.ndarray, np.number)): return (tuple(x.shape), dtypes.to_dtype(x.dtype, path), False)
  raise TypeError(f"{path}: {type(x).__name__} is not a valid array argument; pass a tinyjx Array, a numpy array "
                  "or a Python scalar (or mark it static with static_argnums/static_argnames)")

def arg_paths(fun, args: tuple, kwargs: dict | None = None, skip=()) -> list[str]:
  """Readable names of the flat leaves of (args, kwargs) using `fun`'s parameter names; `skip` drops static args."""
  try:
    names = [n for n, p in inspect.signature(fun).parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
  except (TypeError, ValueError):
    names = []
  out = []
  for i, a in enumerate(args):
    if i in skip: continue
    head = names[i] if i < len(names) else f"args[{i}]"
    out += [head + tree_util.keystr(tuple(path)) for path, _ in tree_util.tree_flatten_with_path(a)[0]]
  for k in sorted(kwargs or {}):
    out += [k + tree_util.keystr(tuple(path)) for path, _ in tree_util.tree_flatten_with_path(kwargs[k])[0]]
  return out

# --- tracing ---
def new_params(avals, name: str, paths=None, fix: str | None = None) -> tuple[list[UOp], int]:
  """Fresh PARAM leaves for `avals` under a new trace; returns them and the trace id."""
  tid = fresh_id()
  traces[tid] = Trace(name, list(paths or [f"argument {i}" for i in range(len(avals))]))
  if fix: traces[tid].fix = fix
  return [UOp(Ops.PARAM, dt, (), (i, tuple(shape), tid)) for i, (shape, dt, *_) in enumerate(avals)], tid

def to_out_uop(x, path: str) -> tuple[UOp, bool]:
  """The node and weak flag of a function output (an Array, a numpy array or a Python scalar)."""
  if isinstance(x, Array): return x.uop, x.weak
  shape, dt, weak = aval_of(x, path)
  return array.api.asarray(x).uop, weak

def trace_flat(fun, avals, name: str, paths=None, fix: str | None = None) -> Jaxpr:
  """Trace `fun(*flat_arrays) -> pytree of arrays` at the given avals; the jaxpr records the output tree."""
  params, tid = new_params(avals, name, paths, fix)
  effects: list = []
  effect_stack.append(effects)
  try:
    out = fun(*[Array(p, a[2] if len(a) > 2 else False) for p, a in zip(params, avals)])
    leaves, out_tree = tree_util.tree_flatten(out)
    pairs = [to_out_uop(x, f"output {i} of {name}") for i, x in enumerate(leaves)]
  finally:
    traces[tid].alive = False
    effect_stack.pop()
  return Jaxpr(params, [p[0] for p in pairs], None, out_tree, [p[1] for p in pairs], name, effects)

def trace(fun, args: tuple, kwargs: dict | None = None, name: str | None = None, paths=None) -> Jaxpr:
  """Trace `fun(*args, **kwargs)` with a PARAM for each array leaf of the arguments."""
  kwargs = kwargs or {}
  name = name or f"trace({getattr(fun, '__name__', 'fun')})"
  leaves, in_tree = tree_util.tree_flatten((tuple(args), kwargs))
  paths = paths or arg_paths(fun, args, kwargs)
  avals = [aval_of(x, p) for x, p in zip(leaves, paths)]
  def flat_fun(*flat):
    a, kw = tree_util.tree_unflatten(in_tree, list(flat))
    return fun(*a, **kw)
  jaxpr = trace_flat(flat_fun, avals, name, paths)
  jaxpr.in_tree = in_tree
  return jaxpr

class ShapeDtypeStruct:
  """A shape and dtype without a value (what `jax.eval_shape` returns)."""
  def __init__(self, shape, dtype):
    self.shape, self.dtype = tuple(shape), dtypes.to_dtype(dtype)
  def __repr__(self): return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype})"
  def __eq__(self, o): return isinstance(o, ShapeDtypeStruct) and (o.shape, o.dtype) == (self.shape, self.dtype)
  def __hash__(self): return hash((self.shape, self.dtype))

def make_jaxpr(fun, static_argnums=(), return_shape=False):
  """`make_jaxpr(f)(*args)`: the jaxpr of `f` at the avals of `args`, printable in JAX's style.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> print(tinyjx.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(jnp.ones(3)))  # doctest: +SKIP
  { lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = mul b 2.0:f32[] ... }
  """
  static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
  @functools.wraps(fun)
  def make(*args, **kwargs):
    fixed = {i: args[i] for i in static}
    dyn = tuple(a for i, a in enumerate(args) if i not in fixed)
    def f(*dargs, **kw):
      it = iter(dargs)
      return fun(*[fixed[i] if i in fixed else next(it) for i in range(len(args))], **kw)
    paths = arg_paths(fun, args, kwargs, skip=fixed)
    jaxpr = trace(f, dyn, kwargs, name=f"make_jaxpr({getattr(fun, '__name__', 'fun')})", paths=paths)
    if return_shape:
      shapes = [ShapeDtypeStruct(o.shape, o.dtype) for o in jaxpr.outs]
      return jaxpr, tree_util.tree_unflatten(jaxpr.out_tree, shapes)
    return jaxpr
  return make

# --- printing ---
def aval_str(u: UOp) -> str:
  if u.op in GroupOp.MultiOutput: return "(" + ", ".join(f"{d.short}[{','.join(map(str, s))}]" for s, d in _avals(u)) + ")"
  return f"{u.dtype.short}[{','.join(map(str, u.shape))}]"

def _avals(u):
  from tinyjx.uop import out_avals
  return out_avals(u)

def params_text(u: UOp) -> str:
  if u.arg is None or u.op in (Ops.TAG,) or u.op in GroupOp.Leaf - {Ops.IOTA}: return ""
  if u.op is Ops.CAST: return f"[new_dtype={u.dtype}]"
  if u.op is Ops.REDUCE: return f"[axes={u.arg[1]}]"
  if u.op is Ops.CUMULATIVE: return f"[axis={u.arg[1]} reverse={u.arg[2]}]"
  names = {Ops.RESHAPE: 'new_sizes', Ops.PERMUTE: 'permutation', Ops.EXPAND: 'shape', Ops.PAD: 'padding_config',
           Ops.SHRINK: 'bounds', Ops.FLIP: 'dimensions', Ops.DOT_GENERAL: 'dimension_numbers', Ops.SCATTER: 'mode',
           Ops.GETITEM: 'index', Ops.TRIANGULAR_SOLVE: 'unit_diagonal'}
  if u.op in names: return f"[{names[u.op]}={u.arg}]"
  if u.op is Ops.FFT:
    return f"[axis={u.arg[0]} inverse={u.arg[1]}" + (f" scale={u.arg[2]:g}]" if u.arg[2] != 1 else "]")
  if u.op is Ops.IOTA: return f"[shape={u.arg[0]} dimension={u.arg[1]}]"
  if u.op is Ops.ARGSORT: return f"[dimension={u.arg[0]} descending={u.arg[1]}]"
  if hasattr(u.arg, 'pretty_params'): return u.arg.pretty_params()
  return f"[{arg_text(u.arg)}]"

def var_names():
  i = 0
  while True:
    n, s = i, ""
    while True:
      s = chr(ord('a') + n % 26) + s
      n = n // 26 - 1
      if n < 0: break
    yield s
    i += 1

def pretty(jaxpr: Jaxpr, indent: int = 0) -> str:
  """JAX-style text: `{ lambda consts ; params. let eqns in (outs) }`, one equation per line."""
  names: dict = {}
  gen = var_names()
  def name(u):
    if u.op is Ops.CONST and u.shape == (): return f"{u.arg[0]!r}:{u.dtype.short}[]"
    if u not in names: names[u] = next(gen)
    return names[u]
  nodes = toposort(list(jaxpr.roots))
  params_set, effects = set(jaxpr.params), set(jaxpr.effects)
  consts = [n for n in nodes if n.op is Ops.BUFFER or (n.op is Ops.PARAM and n not in params_set)]
  head = " ".join(f"{name(c)}:{aval_str(c)}" for c in consts)
  args = " ".join(f"{name(p)}:{aval_str(p)}" for p in jaxpr.params)
  pad = " " * indent
  lines = [f"{pad}{{ lambda {head}; {args}. let"]
  for n in nodes:
    if n in params_set or n in consts or (n.op is Ops.CONST and n.shape == ()): continue
    if n.op is Ops.CONST:
      lines.append(f"{pad}    {name(n)}:{aval_str(n)} = broadcast_in_dim[shape={n.shape}] {n.arg[0]!r}:{n.dtype.short}[]")
      continue
    rhs = " ".join(name(s) for s in n.src)
    if n in effects and n.op is Ops.DEBUG_CALLBACK:
      lines.append(f"{pad}    {prim_name(n)}{params_text(n)} {rhs}".rstrip())
      continue
    lines.append(f"{pad}    {name(n)}:{aval_str(n)} = {prim_name(n)}{params_text(n)} {rhs}".rstrip())
  outs = " ".join(name(o) for o in jaxpr.outs)
  lines.append(f"{pad}  in ({outs}{',' if len(jaxpr.outs) == 1 else ''}) }}")
  return "\n".join(lines)
