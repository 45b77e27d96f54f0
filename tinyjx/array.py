"""array: `tinyjx.Array`, the lazy array users hold, and the trace registry that makes values traced.

An Array is a UOp (its graph) plus a weak-type flag. Operations build graphs; a value is computed only
when asked for (`np.asarray`, printing, `.item()`, `bool`, `block_until_ready`). Realizing runs the
graph on its device through `realize_hook` (registered by the device layer, so this module never
imports it) and caches the result: a graph with no grad tag in it is replaced by its BUFFER (the graph
is cut, memory is freed); a graph with a tag keeps its graph, so that grad still sees through it
(DESIGN section 3) while the value is served from `realized_cache`.

Traced values: a graph with a PARAM leaf belongs to a trace (jit, vmap, make_jaxpr ...). Asking for its
value raises `ConcretizationError` naming the operation, the traced argument and the fix.
"""
from __future__ import annotations
import weakref
from dataclasses import dataclass, field
import numpy as np
from tinyjx import dtypes
from tinyjx.dtypes import DType
from tinyjx.uop import UOp, Ops, toposort, substitute, fresh_id

# --- traces ---
@dataclass
class Trace:
  """What a set of PARAM leaves stands for: the transform that made them and each slot's argument path."""
  name: str
  arg_paths: list = field(default_factory=list)
  alive: bool = True
  fix: str = ("use jnp.where or lax.cond instead of a Python branch on the value, pass the argument with "
              "static_argnums/static_argnames, or move the check out of the transformed function")

traces: dict[int, Trace] = {}

class ConcretizationError(TypeError):
  """A traced array's value was needed (bool, int, .item(), np.asarray ...) where only its shape is known."""

class UnexpectedTracerError(ConcretizationError):
  """A traced array escaped the transform that made it and was used after that transform returned."""

def _traced_params(u: UOp) -> list[UOp]:
  return [n for n in toposort([u]) if n.op is Ops.PARAM]

def concretization_error(u: UOp, operation: str) -> ConcretizationError:
  params = _traced_params(u)
  p = params[0] if params else None
  tr = traces.get(p.arg[2]) if p is not None else None
  if tr is None:
    return ConcretizationError(f"{operation}: the value depends on a mapped axis or collective and is not concrete here")
  slot = p.arg[0]
  path = tr.arg_paths[slot] if slot < len(tr.arg_paths) else f"argument {slot}"
  aval = f"{p.dtype.short}[{','.join(map(str, p.shape))}]"
  if not tr.alive:
    return UnexpectedTracerError(f"{operation}: this array was traced inside {tr.name} (from {path}, {aval}) and used "
                                 f"after {tr.name} returned. Return it from the transformed function instead of "
                                 "storing it outside (a global, a list, an attribute).")
  return ConcretizationError(f"{operation} needs a concrete value, but the array is traced inside {tr.name}: it "
                             f"depends on {path} ({aval}). Fix: {tr.fix}.")

# --- buffers: device memory owned by a BUFFER node ---
class Buffer:
  """Device memory for one array. Subclasses per device; `numpy()` copies the value out to the host. `key` is what
  jit's hit path keys a call on (shape, device, dtype name), made when the device is set (pmap relabels the buffers
  of virtual host devices)."""
  def __init__(self, device: str, shape: tuple, dtype: DType):
    self.shape, self.dtype = tuple(shape), dtype
    self.device = device
  @property
  def device(self) -> str: return self._device
  @device.setter
  def device(self, name: str) -> None: self._device, self.key = name, (self.shape, name, self.dtype.name)
  def numpy(self) -> np.ndarray: raise NotImplementedError

buffers: dict[int, Buffer] = {}   # BUFFER uid -> Buffer, freed when the BUFFER node is collected

def buffer_uop(buf: Buffer) -> UOp:
  """A fresh BUFFER leaf owning `buf` (the buffer lives as long as some graph holds the node)."""
  uid = fresh_id()
  u = UOp(Ops.BUFFER, buf.dtype, (), (uid, buf.shape, buf.device))
  buffers[uid] = buf
  weakref.finalize(u, buffers.pop, uid, None)
  return u

# Registered by the device layer: realize_hook(list of concrete UOps, device name or None) -> list of Buffers.
realize_hook = None
# Set by tinyjx.devices.nans while jax_debug_nans/infs is on: nan_hook(graphs, buffers) raises on a bad value.
nan_hook = None
# Registered by tinyjx.collectives (the pmap runtime, a higher layer): collective_hook(node, values) -> this device's
# result of a collective node. The PYTHON device's rule and the compiled devices' collective steps call it.
collective_hook = None
realized_cache: 'weakref.WeakKeyDictionary[UOp, UOp]' = weakref.WeakKeyDictionary()

def strip_tags(roots: list[UOp]) -> list[UOp]:
  """The same graphs with grad tags (identities) removed and already-computed subgraphs replaced by buffers."""
  nodes = toposort(roots)
  mapping = {n: n.src[0] for n in nodes if n.op is Ops.TAG}
  mapping.update({n: b for n in nodes if (b := realized_cache.get(n)) is not None})
  return substitute(roots, mapping)

def realize_uops(uops: list[UOp], operation: str = "computing a value", device=None) -> list[UOp]:
  """BUFFER nodes holding the values of the concrete graphs `uops` (computed together, in one schedule)."""
  for u in uops:
    if not u.is_concrete: raise concretization_error(u, operation)
  todo = [i for i, u in enumerate(uops) if u.op is not Ops.BUFFER and u not in realized_cache]
  out = list(uops)
  for i, u in enumerate(uops):
    if u in realized_cache: out[i] = realized_cache[u]
  if todo:
    bufs = realize_hook(strip_tags([uops[i] for i in todo]), device)
    if nan_hook is not None: nan_hook([uops[i] for i in todo], bufs)
    for i, b in zip(todo, bufs):
      out[i] = buffer_uop(b)
      # a graph of constants only (arange, full) is computed on whatever device is the default then: caching it
      # would hand a later, structurally equal graph a buffer on another device
      if 'BUFFER' in uops[i].flags: realized_cache[uops[i]] = out[i]
  return out

# --- the Array ---
class Registered:
  """Functions of a floor above this one, filled in once by that floor when it is imported (DESIGN section 12:
  the core imports nothing above it). `api` forwards to tinyjx.numpy, which registers itself with
  `register_numpy`: Array's operators and methods, and the transforms below the numpy floor, call through it.
  `placement` holds `array_device` and `array_devices` of tinyjx.devices_api (`Array.device`, `Array.devices()`),
  registered with `register_placement`."""
  def __init__(self, what: str): self._what, self._module = what, None
  def __getattr__(self, name):
    if self._module is None: raise RuntimeError(f"{self._what} is not registered yet; import tinyjx first")
    return getattr(self._module, name)

api_proxy, placement = Registered("tinyjx.numpy"), Registered("tinyjx.devices_api")
api = api_proxy
def _unregistered(*args, **kwargs): raise RuntimeError("tinyjx.numpy is not registered yet; import tinyjx first")
getitem = index_update = _unregistered   # x[i] and x.at[i], registered by tinyjx.numpy
methods: dict = {}   # Array methods whose signature differs from the jnp function's (x.reshape(2, 3))

def register_numpy(module, getitem_fn, index_update_fn, method_fns: dict) -> None:
  """Binds tinyjx.numpy once: the proxy forwards to it for the modules that imported `api` by name, and `api`
  itself becomes the module, so Array's operators (which look `api` up here at each call) pay no forwarding.
  `getitem_fn(x, idx)` and `index_update_fn(x)` serve `x[idx]` and `x.at`; `method_fns` maps a method name to
  its function where that is not simply `jnp.<name>(x, ...)`."""
  global api, getitem, index_update
  api_proxy._module = module
  api, getitem, index_update = module, getitem_fn, index_update_fn
  methods.update(method_fns)
def register_placement(functions) -> None: placement._module = functions

class Array:
  """A lazy n-dimensional array: `jnp.asarray([1., 2.]) * 2`. `np.asarray(x)` computes and returns its value."""
  __slots__ = ('_uop', '_buffer', 'weak', '__weakref__')
  __array_priority__ = 100

  def __init__(self, uop: UOp, weak: bool = False):
    self._uop, self._buffer, self.weak = uop, None, weak

  @classmethod
  def of_buffer(cls, buf: Buffer, weak: bool = False) -> 'Array':
    """An Array holding the computed `buf`; its BUFFER node is made when something first asks for `.uop`. jit's hit
    path returns these: a result that only goes on to the next call never pays for a node."""
    self = object.__new__(cls)
    self._uop, self._buffer, self.weak = None, buf, weak
    return self

  @property
  def uop(self) -> UOp:
    """The graph of this array (a BUFFER leaf once it is computed)."""
    u = self._uop
    if u is None: u = self._uop = buffer_uop(self._buffer)
    return u
  @uop.setter
  def uop(self, u: UOp) -> None: self._uop, self._buffer = u, None

  def realized_buffer(self) -> Buffer | None:
    """The Buffer holding this array's value when it is computed and cut to it (a BUFFER leaf); None otherwise."""
    if self._uop is None: return self._buffer
    return buffers[self._uop.arg[0]] if self._uop.op is Ops.BUFFER else None

  # --- aval ---
  # (a hit-path result answers from its Buffer: reading its shape does not make its BUFFER node)
  @property
  def shape(self) -> tuple: return self._buffer.shape if self._uop is None else self._uop.shape
  @property
  def dtype(self) -> DType: return self._buffer.dtype if self._uop is None else self._uop.dtype
  @property
  def ndim(self) -> int: return len(self.shape)
  @property
  def size(self) -> int: return self.uop.size
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  @property
  def aval(self) -> tuple: return (self.shape, self.dtype, self.weak)
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d array (shape ()); use .item() or .shape")
    return self.shape[0]

  # --- values ---
  def realize(self, operation: str = "computing the value") -> 'Array':
    """Compute the value now (it is cached); returns self. Raises ConcretizationError on a traced array."""
    (b,) = realize_uops([self.uop], operation)
    if 'TAG' not in self.uop.flags: self.uop = b
    return self
  def block_until_ready(self) -> 'Array':
    if self._uop is None: return self      # a computed result of jit's hit path: its buffer holds the value already
    return self.realize("block_until_ready()")
  def concrete_numpy(self, operation: str) -> np.ndarray:
    if self._uop is None: return self._buffer.numpy()     # a computed result of jit's hit path
    (b,) = realize_uops([self.uop], operation)
    if 'TAG' not in self.uop.flags: self.uop = b
    return buffers[b.arg[0]].numpy()
  def __array__(self, dtype=None, copy=None):
    """The values as numpy: a read-only view of the array's own memory (as JAX's), so no write through it can change
    the Array; `np.array(x)` or `copy=True` gives a writable copy."""
    v = self.concrete_numpy("np.asarray(x)")
    if self.dtype is dtypes.bfloat16: v = v.astype(np.float32)
    elif dtype is None and not copy:
      v = v.view()
      v.flags.writeable = False
      return v
    return v.astype(dtype or v.dtype, copy=bool(copy) or dtype is not None)
  def item(self, *args):
    v = self.concrete_numpy("x.item()")
    return v.item(*args)
  def tolist(self): return self.concrete_numpy("x.tolist()").tolist()
  def __bool__(self):
    if self.size != 1:
      raise ValueError(f"the truth value of an array of shape {self.shape} is ambiguous; use .any() or .all()")
    return bool(self.concrete_numpy("bool(x) (a Python `if`/`while`/`and`/`or` on an array)"))
  def __int__(self): return int(self.concrete_numpy("int(x)") if self.ndim == 0 else self._scalar_error("int"))
  def __float__(self): return float(self.concrete_numpy("float(x)") if self.ndim == 0 else self._scalar_error("float"))
  def __complex__(self): return complex(self.concrete_numpy("complex(x)").reshape(()))
  def __index__(self):
    if not dtypes.is_int(self.dtype) and not dtypes.is_bool(self.dtype):
      raise TypeError(f"only integer arrays can be used as an index, got {self.dtype}")
    return int(self.concrete_numpy("operator.index(x) (using an array as a Python index)").reshape(()))
  def _scalar_error(self, kind):   # as JAX: a size-1 array of rank > 0 is not a scalar either
    raise TypeError(f"only scalar (0-d) arrays can be converted to Python {kind}, got shape {self.shape}; use "
                    f"{kind}(x.item()) or x.reshape(())")
  def __iter__(self):
    if not self.shape: raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.shape[0]))
  def __repr__(self):
    if not self.uop.is_concrete:
      return f"Traced<{self.dtype.short}[{','.join(map(str, self.shape))}]>"
    body = np.array2string(np.asarray(self), separator=', ', prefix='Array(')
    shape = f"shape={self.shape}, " if self.size == 0 else ""   # as JAX: Array([], shape=(2, 0), dtype=float32)
    return f"Array({body}, {shape}dtype={self.dtype}{', weak_type=True' if self.weak else ''})"
  def __str__(self):
    return repr(self) if not self.uop.is_concrete else str(np.asarray(self))
  def __format__(self, spec):   # as JAX: a 0-d array formats as the Python scalar it holds
    return format(self.item(), spec) if self.ndim == 0 or (self.size == 1 and spec) else format(str(self), spec)
  def __hash__(self): raise TypeError("tinyjx.Array is unhashable (as in JAX); use a tuple of Python values as a key")
  def __reduce__(self): return (_rebuild, (np.asarray(self), self.dtype.name, self.weak))
  def __copy__(self): return self
  def __deepcopy__(self, memo): return self

  @property
  def device(self):
    return placement.array_device(self)
  def devices(self) -> set:
    return placement.array_devices(self)

  # --- operators and methods (bodies live in tinyjx.numpy) ---
  def __neg__(self): return api.negative(self)
  def __pos__(self): return self
  def __abs__(self): return api.abs(self)
  def __invert__(self): return api.invert(self)
  def __add__(self, o): return api.add(self, o)
  def __radd__(self, o): return api.add(o, self)
  def __sub__(self, o): return api.subtract(self, o)
  def __rsub__(self, o): return api.subtract(o, self)
  def __mul__(self, o): return api.multiply(self, o)
  def __rmul__(self, o): return api.multiply(o, self)
  def __truediv__(self, o): return api.true_divide(self, o)
  def __rtruediv__(self, o): return api.true_divide(o, self)
  def __floordiv__(self, o): return api.floor_divide(self, o)
  def __rfloordiv__(self, o): return api.floor_divide(o, self)
  def __mod__(self, o): return api.mod(self, o)
  def __rmod__(self, o): return api.mod(o, self)
  def __divmod__(self, o): return api.divmod(self, o)
  def __rdivmod__(self, o): return api.divmod(o, self)
  def __pow__(self, o): return api.power(self, o)
  def __rpow__(self, o): return api.power(o, self)
  def __matmul__(self, o): return api.matmul(self, o)
  def __rmatmul__(self, o): return api.matmul(o, self)
  def __and__(self, o): return api.bitwise_and(self, o)
  def __rand__(self, o): return api.bitwise_and(o, self)
  def __or__(self, o): return api.bitwise_or(self, o)
  def __ror__(self, o): return api.bitwise_or(o, self)
  def __xor__(self, o): return api.bitwise_xor(self, o)
  def __rxor__(self, o): return api.bitwise_xor(o, self)
  def __lshift__(self, o): return api.left_shift(self, o)
  def __rlshift__(self, o): return api.left_shift(o, self)
  def __rshift__(self, o): return api.right_shift(self, o)
  def __rrshift__(self, o): return api.right_shift(o, self)
  def __lt__(self, o): return api.less(self, o)
  def __le__(self, o): return api.less_equal(self, o)
  def __gt__(self, o): return api.greater(self, o)
  def __ge__(self, o): return api.greater_equal(self, o)
  def __eq__(self, o): return api.equal(self, o)
  def __ne__(self, o): return api.not_equal(self, o)
  def __getitem__(self, idx): return getitem(self, idx)
  def __setitem__(self, idx, v):
    raise TypeError("tinyjx arrays are immutable; instead of x[idx] = y use x = x.at[idx].set(y)")

  @property
  def T(self) -> 'Array': return api.transpose(self)
  @property
  def mT(self) -> 'Array': return api.swapaxes(self, -1, -2)
  @property
  def at(self): return index_update(self)
  @property
  def real(self) -> 'Array': return api.real(self)
  @property
  def imag(self) -> 'Array': return api.imag(self)
  def conj(self) -> 'Array': return api.conj(self)
  def conjugate(self) -> 'Array': return api.conj(self)

def _rebuild(value, dtype_name, weak):
  return api.asarray(value, dtype=dtype_name) if not weak else Array(api.asarray(value, dtype=dtype_name).uop, True)

# numpy-style methods: x.sum(axis=0) is jnp.sum(x, axis=0), and so on for each name here.
METHOD_NAMES = ('sum', 'prod', 'max', 'min', 'mean', 'var', 'std', 'argmax', 'argmin', 'any', 'all', 'cumsum',
                'cumprod', 'reshape', 'ravel', 'flatten', 'transpose', 'swapaxes', 'squeeze', 'astype', 'clip',
                'round', 'dot', 'take', 'sort', 'argsort', 'repeat', 'nonzero', 'copy', 'diagonal', 'trace')

def _method(name):
  def method(self, *args, **kwargs): return (methods.get(name) or getattr(api, name))(self, *args, **kwargs)
  method.__name__ = name
  method.__doc__ = f"Same as `jnp.{name}(x, ...)`."
  return method

for _name in METHOD_NAMES: setattr(Array, _name, _method(_name))
