"""retrace: why a jitted function traced again, said the way a user can act on.

jit keeps, per function, the signatures it has traced (`Signature`: the cache key and the pytree path of each
dynamic leaf). On a miss, `explain_miss` compares the new signature with the *closest* earlier one (fewest
differences; the latest of equals), not merely the last, and names each difference by the argument's pytree path
(`params['w']`, `args[1][0]`) and its kind:

  shape        x: shape f32[3] -> f32[4]
  dtype        y['w']: dtype f32[2] -> i32[2]
  weak type    x: weak type f32[] -> ~f32[] (a Python scalar is weakly typed; an array is not)
  tree         tree structure: args[1] added / removed, or the container type changed
  static       static argument n: 3 -> 4
  setting      JAX_ENABLE_X64: False -> True, device: CPU:0 -> CPU:1

With DEBUG>=1 or `jax_explain_cache_misses` on, jit prints that line for each retrace and, the first time a
function has more than `MANY` signatures, warns once (`RetraceWarning`) with a hint for the kinds of change seen.
"""
from __future__ import annotations
import warnings

MANY = 4   # distinct signatures after which a function is said to retrace too often

class RetraceWarning(UserWarning):
  """A jitted function keeps retracing (a new shape, dtype or static value on most calls)."""

class Signature:
  """One traced signature: jit's cache key `(treedef, avals, statics, device, codegen)` and the leaves' paths."""
  __slots__ = ('key', 'paths')
  def __init__(self, key: tuple, paths: list): self.key, self.paths = key, list(paths)

def _aval(a) -> str:
  shape, dt, weak = a
  return f"{'~' if weak else ''}{dt.short}[{','.join(map(str, shape))}]"

def _leaf_differences(old: Signature, new: Signature) -> list[tuple]:
  before = dict(zip(old.paths, old.key[1]))
  out = []
  for p, a in zip(new.paths, new.key[1]):
    b = before.get(p)
    if b is None or b == a: continue
    if b[0] != a[0]: out.append(('shape', f"{p}: shape {_aval(b)} -> {_aval(a)}"))
    elif b[1] != a[1]: out.append(('dtype', f"{p}: dtype {_aval(b)} -> {_aval(a)}"))
    else: out.append(('weak type', f"{p}: weak type {_aval(b)} -> {_aval(a)} (a Python scalar is weakly typed; "
                                   "an array is not)"))
  return out

def _tree_differences(old: Signature, new: Signature, tree_text) -> list[tuple]:
  if old.key[0] == new.key[0]: return []
  added = [p for p in new.paths if p not in set(old.paths)]
  removed = [p for p in old.paths if p not in set(new.paths)]
  out = [('tree', f"tree structure: {p} added") for p in added] + \
        [('tree', f"tree structure: {p} removed") for p in removed]
  return out or [('tree', f"tree structure: {tree_text(old.key[0])} -> {tree_text(new.key[0])}")]

def _static_differences(old: Signature, new: Signature, label) -> list[tuple]:
  before, after = {k: v for k, _, v in old.key[2]}, {k: v for k, _, v in new.key[2]}
  out = []
  for k in sorted(set(before) | set(after), key=str):
    if k not in before or k not in after:
      out.append(('static', f"static argument {label(k)} {'added' if k not in before else 'removed'}"))
    elif (type(before[k]), before[k]) != (type(after[k]), after[k]):
      out.append(('static', f"static argument {label(k)}: {before[k]!r} -> {after[k]!r}"))
  return out

def differences(old: Signature, new: Signature, label, tree_text, knobs: tuple) -> list[tuple]:
  """(kind, text) for every way `new` differs from `old`."""
  out = [('setting', f"{k}: {a} -> {b}") for k, a, b in zip(knobs, old.key[4], new.key[4]) if a != b]
  if old.key[3] != new.key[3]: out.append(('setting', f"device: {old.key[3]} -> {new.key[3]}"))
  out += _static_differences(old, new, label) + _tree_differences(old, new, tree_text)
  return out + _leaf_differences(old, new)

def closest(history: list, new: Signature, diff) -> tuple:
  """(index, differences) of the earlier signature with the fewest differences from `new` (the latest of ties)."""
  best = None
  for i, old in enumerate(history):
    d = diff(old, new)
    if best is None or len(d) <= len(best[1]): best = (i, d)
  return best

HINTS = {
  'shape': "shapes change from call to call: pad or bucket the inputs to a few fixed shapes",
  'dtype': "dtypes change: cast the inputs to one dtype before the call",
  'weak type': "an argument flips between a Python scalar and an array: pass an array "
               "(jnp.asarray(x, dtype)) every time",
  'tree': "the argument structure changes: pass containers of the same type and keys every time",
  'static': "a static argument takes many values: if it is a number, pass it as a regular (traced) argument; "
            "if a Python value that selects the program changes, mark it static_argnums and keep its set small",
  'setting': "a setting or the device changes between calls",
}

def warn_many(name: str, count: int, kinds: set) -> None:
  """The one warning for a function that has traced `count` signatures, with a hint per kind of change."""
  hints = "; ".join(HINTS[k] for k in HINTS if k in kinds) or "the arguments' signatures keep changing"
  warnings.warn(f"{name} has been traced for {count} different signatures (each trace compiles again): {hints}. "
                "Set DEBUG=1 or jax_explain_cache_misses to see why each call retraced.", RetraceWarning,
                stacklevel=5)
