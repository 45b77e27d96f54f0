"""debug: `jax.debug.print` and `jax.debug.callback`, host functions called on the runtime values of a program.

A call outside every trace runs at once (eager mode). Inside a trace (jit, vmap, a loop body, make_jaxpr) it
becomes a DEBUG_CALLBACK node over its array arguments, whose `arg` is a `DebugCallback` record, and an effect
of the jaxpr being traced (`tracing.emit_effect`): nothing reads its bool[] token, but every evaluator of the
jaxpr computes its effects, in program order, after the values they read. The compiled devices run it as a
host step between kernels (schedule.py's `STEP_OPS`; the step is runtime's `InterpretedStep`, so CL and CUDA
copy the values out first); the PYTHON device calls the rule below. So a jitted function calls back on every
run and tracing alone never does. Under `vmap` the callback runs once per example (the rule loops over the
batch axes, innermost vmap outermost, as JAX does); under `grad`/`jvp` it runs in the forward pass only (its
tangent and cotangent are nothing, and the jaxprs a derivative rule builds carry no effects); in a loop body
once per iteration; under `pmap` once per device. `ordered=True` is accepted: tinyjx always runs callbacks in
program order.
"""
from __future__ import annotations
import builtins, sys
import numpy as np
from tinyjx import tree_util
from tinyjx.array import Array
from tinyjx.uop import UOp, Ops, fresh_id
from tinyjx.dtypes import bool_
from tinyjx import tracing

class DebugCallbackError(RuntimeError):
  """A host function given to `tinyjx.debug.callback` (or the formatting of `debug.print`) raised."""

class DebugCallback:
  """What a DEBUG_CALLBACK node calls: `fn`, the tree of (args, kwargs) with the non-array leaves kept here
  (`static`: position -> value), and `batch`, the size of each vmap applied so far (innermost first). `uid`
  makes every call site and every emission its own node; `key` keys caches by it, so a program holding a
  callback is never shared with one holding another."""
  __slots__ = ('fn', 'in_tree', 'static', 'ordered', 'where', 'batch', 'uid')
  def __init__(self, fn, in_tree, static: tuple, ordered: bool, where: str, batch: tuple = (), uid=None):
    self.fn, self.in_tree, self.static, self.ordered, self.where = fn, in_tree, static, ordered, where
    self.batch, self.uid = tuple(batch), uid if uid is not None else fresh_id()

  @property
  def key(self) -> str: return f"debug_callback#{self.uid}{self.batch}"
  def __hash__(self): return hash(self.key)
  def __eq__(self, other): return type(other) is DebugCallback and other.key == self.key
  def renew(self) -> 'DebugCallback':
    return DebugCallback(self.fn, self.in_tree, self.static, self.ordered, self.where, self.batch)
  def with_batch(self, size: int) -> 'DebugCallback':
    return DebugCallback(self.fn, self.in_tree, self.static, self.ordered, self.where, self.batch + (size,))
  def pretty_params(self) -> str:
    name = getattr(self.fn, '__qualname__', type(self.fn).__name__)
    return f"[callback={name} ordered={self.ordered}{f' batch={self.batch}' if self.batch else ''}]"

  def __call__(self, values: list) -> None:
    """Call `fn` once per example: each value has the batch axes in front (the last vmap's first)."""
    for idx in np.ndindex(*self.batch):
      at = tuple(reversed(idx))
      self.call_one([np.asarray(v[at]) for v in values])

  def call_one(self, values: list) -> None:
    leaves, it = [], iter(values)
    for i in range(self.in_tree.num_leaves):
      leaves.append(self.static[i] if i in self.static else next(it))
    args, kwargs = tree_util.tree_unflatten(self.in_tree, leaves)
    try:
      self.fn(*args, **kwargs)
    except Exception as e:
      name = getattr(self.fn, '__qualname__', repr(self.fn))
      raise DebugCallbackError(f"the host function {name} passed to tinyjx.debug.callback (called at {self.where}) "
                               f"raised {type(e).__name__}: {e}") from e

def _call_site() -> str:
  """The user's line that called print or callback (the first frame outside this module)."""
  f = sys._getframe(1)
  while f is not None and f.f_code.co_filename == __file__: f = f.f_back
  return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"

def _is_array_like(x) -> bool:
  return isinstance(x, (Array, np.ndarray, np.generic, bool, int, float, complex))

def callback(fn, *args, ordered: bool = False, **kwargs) -> None:
  """Call `fn(*args, **kwargs)` on the host with the arguments' values as numpy arrays (pytrees allowed);
  returns None. Eagerly it runs at once; under `jit` on every run of the compiled function, in program order;
  under `vmap` once per example; under `grad` in the forward pass only. Leaves that are not arrays or numbers
  are passed through as they are.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> seen = []
  >>> f = tinyjx.jit(lambda x: (tinyjx.debug.callback(seen.append, x * 2), x)[1])
  >>> _ = f(jnp.float32(1.0)); _ = f(jnp.float32(2.0))
  >>> [float(v) for v in seen]
  [2.0, 4.0]
  """
  from tinyjx import numpy as jnp
  leaves, in_tree = tree_util.tree_flatten((args, kwargs))
  static = {i: x for i, x in enumerate(leaves) if not _is_array_like(x)}
  uops = [jnp.asarray(x).uop for i, x in enumerate(leaves) if i not in static]
  record = DebugCallback(fn, in_tree, static, bool(ordered), _call_site())
  tracing.emit_effect(UOp(Ops.DEBUG_CALLBACK, bool_, tuple(uops), record))
  return None

def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001 - jax.debug's name
  """Print `fmt.format(*args, **kwargs)` with the arguments' runtime values (numpy arrays), like `callback`:
  at once eagerly, on every run under `jit`, once per example under `vmap`.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> tinyjx.jit(lambda x: tinyjx.debug.print("x = {x:.2f}, {}", jnp.arange(3), x=x))(jnp.float32(3.14159))
  x = 3.14, [0 1 2]
  """
  def show(*values, **kw): builtins.print(fmt.format(*values, **kw) + "\n", end="")   # one write: pmap's devices race
  show.__qualname__ = f"print({fmt!r})"
  callback(show, *args, ordered=ordered, **kwargs)

# The rules live in their tables' homes: devices/python.py calls the record (`DebugCallback.__call__`) with the
# argument values, batching.py's rule gives the record one more batch size (`with_batch`). DEBUG_CALLBACK is in
# GroupOp.NonDifferentiable, so ad.py's family rules give its token no tangent and send no cotangent back; the
# callback sees primals only.
