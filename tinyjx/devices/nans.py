"""nans: `jax_debug_nans` and `jax_debug_infs`, finding the first equation that made a NaN (or an inf).

With `tinyjx.config.update('jax_debug_nans', True)` (or `JAX_DEBUG_NANS=1`, or `Context(JAX_DEBUG_NANS=True)`)
every value that is computed is checked: an eager array when it is realized, a jitted function's outputs when
the call returns. A float value holding a NaN raises `FloatingPointError`, naming the first equation that made
one and the user's source line of it, found by running the program again op by op on the reference
interpreter (the PYTHON device), as JAX re-runs a jitted function de-optimized:

    >>> tinyjx.config.update('jax_debug_nans', True)
    >>> jnp.log(jnp.array([-1.])) + 1          # doctest: +SKIP
    FloatingPointError: invalid value (nan) encountered in log (f32[1]) at demo.py:3 in <module>: ...

Source lines come from `tinyjx.provenance`, whose recording this checker keeps on only while a check is on (the
knob's watchers), so with it off nothing is recorded and nothing is checked: one `is None` test per new node
and per realization.
- nodes a derivative rule makes get the site of the node being differentiated, with the pass named
  ('the backward pass (vjp) of sin'), as provenance records them;
- `array.nan_hook` checks what `realize_uops` computed; `jit` calls `check_jit` on its outputs.
Eager arrays are lazy, so an eager NaN is reported when its value is computed, not when the op is written; the
equation and line named are still the ones that made it.
"""
from __future__ import annotations
import numpy as np
from tinyjx import array, dtypes, provenance, settings
from tinyjx.uop import UOp, Ops, GroupOp

def enabled() -> tuple[bool, bool]:
  """(check NaNs, check infs) in this thread now."""
  return bool(settings.get('JAX_DEBUG_NANS')), bool(settings.get('JAX_DEBUG_INFS'))

# Where each node came from is tinyjx.provenance's job; this checker keeps its recording on while a knob is.
def _sync_hooks() -> None:
  """Install the hooks while either knob is on (in the thread that changed it); remove them when both are off."""
  on = any(enabled())
  provenance.keep(on)
  array.nan_hook = check_realized if on else None

for _knob in ('JAX_DEBUG_NANS', 'JAX_DEBUG_INFS'):
  settings.watchers.setdefault(_knob, []).append(_sync_hooks)

# ---------------------------------------------------------------- checking values and finding the culprit

def _bad_kind(value, dtype, nans: bool, infs: bool) -> str | None:
  if not dtypes.is_inexact(dtype): return None
  v = np.asarray(value)
  if v.dtype.kind not in 'fc' or v.size == 0: return None
  if nans and np.isnan(v).any(): return 'nan'
  if infs and np.isinf(v).any(): return 'inf'
  return None

def _node_bad(node: UOp, value, nans: bool, infs: bool) -> str | None:
  if node.op in GroupOp.MultiOutput or isinstance(value, tuple): return None   # its GETITEMs are checked
  return _bad_kind(value, node.dtype, nans, infs)

def locate(outs: list[UOp], env: dict, nans: bool, infs: bool) -> tuple[UOp, str] | None:
  """The first node (sources first) whose value has a NaN (or inf) when `outs` run op by op; None if none does."""
  from tinyjx.devices import python
  found: list = []
  def watch(node, value):
    if found or not node.src: return
    kind = _node_bad(node, value, nans, infs)
    if kind is not None:
      found.append((node, kind))
      raise _Found()
  try:
    python.evaluate(outs, env, watch=watch)
  except _Found:
    pass
  return found[0] if found else None

class _Found(Exception):
  """Stops the op-by-op run at the first bad value."""

def _aval(u: UOp) -> str: return f"{u.dtype.short}[{','.join(map(str, u.shape))}]"

def error_for(node: UOp, kind: str, where: str = "") -> FloatingPointError:
  site = provenance.site_of(node)
  line = f" at {site}" if site is not None else " (no source line was recorded for it)"
  return FloatingPointError(f"invalid value ({kind}) encountered in {node.op.name.lower()} ({_aval(node)}){line}"
                            f"{where}. Turn the check off with tinyjx.config.update('jax_debug_{kind}s', False).")

# ---------------------------------------------------------------- the two places values are computed

NOT_REPRODUCED = ("but running it op by op on the PYTHON reference device gives none: the compiled kernels differ from "
                  "the reference here (please report it, with the DEBUG=4 output)")

def _bad_buffers(buffers: list, dts: list) -> list[tuple[int, str]]:
  """(index, 'nan' or 'inf') of the buffers holding a bad value, for the knobs on now ([] when both are off); only
  float and complex buffers are read."""
  nans, infs = enabled()
  if not (nans or infs): return []
  kinds = [_bad_kind(b.numpy(), d, nans, infs) if dtypes.is_inexact(d) else None for b, d in zip(buffers, dts)]
  return [(i, k) for i, k in enumerate(kinds) if k is not None]

def check_realized(roots: list[UOp], buffers: list) -> None:
  """`array.nan_hook`: raise if what `realize_uops` computed for `roots` holds a NaN (or inf)."""
  bad = _bad_buffers(buffers, [r.dtype for r in roots])
  if not bad: return
  hit = locate([roots[i] for i, _ in bad], {}, *enabled())
  if hit is None:
    i, kind = bad[0]
    raise FloatingPointError(f"invalid value ({kind}) in a computed {_aval(roots[i])} array, {NOT_REPRODUCED}")
  raise error_for(*hit)

def outputs_bad(buffers: list) -> list[int]:
  """Indices of the jitted outputs holding a NaN (or inf), when a check is on."""
  return [i for i, _ in _bad_buffers(buffers, [b.dtype for b in buffers])]

def hunt(jaxpr, inputs: list, name: str, first_bad: int) -> FloatingPointError:
  """The error for a jitted call whose output `first_bad` was bad: `jaxpr` (traced again with sites recorded)
  runs op by op on `inputs` (numpy values, one per param)."""
  env = {p: np.asarray(v).reshape(p.shape).astype(p.dtype.np) for p, v in zip(jaxpr.params, inputs)}
  hit = locate(list(jaxpr.outs), env, *enabled())
  if hit is None: return FloatingPointError(f"{name}: output {first_bad} holds an invalid value, {NOT_REPRODUCED}")
  return error_for(*hit, where=f", inside {name}")

_sync_hooks()
