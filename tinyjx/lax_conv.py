"""lax_conv: JAX's convolutions and windowed reductions (`lax.conv_general_dilated`, `lax.conv`,
`lax.conv_transpose`, `lax.reduce_window`, ...), re-exported by `tinyjx.lax`.

Inputs are arrays in any layout named by dimension numbers; outputs are ordinary Arrays built from
tinyjx.numpy and lax ops, so jit, grad and vmap come from the transforms. A convolution becomes one
canonical form: the input is moved to (N, C, *spatial), dilated and padded by one `lax.pad` (interior
padding is the lhs dilation, negative padding crops), the kernel to (O, I, *kernel), and the core
`_conv_core(strides, rhs_dilation, groups)` contracts the sliding windows of the input (one view, no copy)
with the kernel by one einsum. The core is a custom_vjp function whose input gradient is itself a core
convolution (of the dilated, padded output gradient with the flipped kernel) and whose kernel gradient is
one einsum, so the backward pass never materializes the windows; forward mode differentiates the core's
einsum. Batch groups are feature groups of a reshaped input. `reduce_window` pads with the monoid's identity and
combines strided slices (one per window offset) with the monoid, or reshapes once when the windows tile
the input.
"""
from __future__ import annotations
import collections, functools, itertools, math, operator
from tinyjx.numpy import base as jnp
from tinyjx import lax_primitives as lax
from tinyjx.transforms.custom import custom_vjp

__all__ = ['ConvDimensionNumbers', 'conv_dimension_numbers', 'conv_general_dilated', 'conv',
           'conv_with_general_padding', 'conv_transpose', 'padtype_to_pads', 'reduce_window']

ConvDimensionNumbers = collections.namedtuple('ConvDimensionNumbers', ['lhs_spec', 'rhs_spec', 'out_spec'])
ConvDimensionNumbers.__doc__ = """Axis numbers of a convolution: lhs_spec = (batch, feature, *spatial),
rhs_spec = (out feature, in feature, *spatial), out_spec = (batch, feature, *spatial)."""

# ---------------------------------------------------------------- dimension numbers and padding

def _spec_of(s: str, role: str, first: str, second: str, spatial: str) -> tuple:
  """Axis numbers (first, second, *spatial in `spatial`'s order) of one layout string such as 'NHWC'."""
  if sorted(s) != sorted(first + second + spatial):
    raise ValueError(f"conv_dimension_numbers: the {role} layout {s!r} must hold {first!r}, {second!r} and the "
                     f"spatial dimensions {spatial!r} of the kernel layout exactly once each")
  return (s.index(first), s.index(second)) + tuple(s.index(c) for c in spatial)

def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
  """`ConvDimensionNumbers` from None (NC..., OI..., NC...), a tuple of three layout strings such as
  ('NHWC', 'HWIO', 'NHWC'), or ConvDimensionNumbers itself. Spatial axes follow the kernel string's order.

  >>> from tinyjx import lax
  >>> lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ('NHWC', 'HWIO', 'NHWC'))
  ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
  """
  nd = len(lhs_shape)
  if len(rhs_shape) != nd or nd < 2:
    raise TypeError(f"conv: lhs of shape {tuple(lhs_shape)} and rhs of shape {tuple(rhs_shape)} need one rank, at "
                    "least 2 (batch and feature axes plus the spatial ones)")
  if dimension_numbers is None:
    default = tuple(range(nd))
    return ConvDimensionNumbers(default, default, default)
  if isinstance(dimension_numbers, ConvDimensionNumbers) or not isinstance(dimension_numbers[0], str):
    specs = ConvDimensionNumbers(*(tuple(operator.index(i) for i in s) for s in dimension_numbers))
    for name, s in zip(specs._fields, specs):
      if sorted(s) != list(range(nd)):
        raise ValueError(f"conv: {name}={s} must be a permutation of the {nd} axes of lhs {tuple(lhs_shape)}")
    return specs
  lhs, rhs, out = dimension_numbers
  for role, s in (('lhs', lhs), ('rhs', rhs), ('out', out)):
    if len(s) != nd:
      raise ValueError(f"conv: the {role} layout {s!r} has {len(s)} letters but the operands have rank {nd} "
                       f"(lhs {tuple(lhs_shape)}, rhs {tuple(rhs_shape)}); give one letter per axis, e.g. "
                       f"{('N' + 'HWD'[:nd - 2] + 'C', 'HWD'[:nd - 2] + 'IO', 'N' + 'HWD'[:nd - 2] + 'C')}")
  spatial = ''.join(c for c in rhs if c not in 'OI')
  return ConvDimensionNumbers(_spec_of(lhs, 'lhs', 'N', 'C', spatial), _spec_of(rhs, 'rhs', 'O', 'I', spatial),
                              _spec_of(out, 'out', 'N', 'C', spatial))

def padtype_to_pads(in_shape, window_shape, window_strides, padding) -> list:
  """(low, high) per spatial axis for 'VALID', 'SAME' (output size ceil(in / stride), extra padding high) or
  'SAME_LOWER' (extra padding low); a sequence of pairs is returned as it is.

  >>> from tinyjx import lax
  >>> lax.padtype_to_pads((5,), (2,), (1,), 'SAME')
  [(0, 1)]
  """
  n = len(window_shape)
  if not isinstance(padding, str):
    pads = [tuple(operator.index(v) for v in p) for p in padding]
    if len(pads) != n or any(len(p) != 2 for p in pads):
      raise ValueError(f"padding must be 'SAME', 'VALID', 'SAME_LOWER' or {n} (low, high) pairs, got {padding!r}")
    return pads
  mode = padding.upper()
  if mode == 'VALID': return [(0, 0)] * n
  if mode not in ('SAME', 'SAME_LOWER'):
    raise ValueError(f"padding must be 'SAME', 'VALID', 'SAME_LOWER' or a sequence of (low, high) pairs, "
                     f"got {padding!r}")
  pads = []
  for i, k, s in zip(in_shape, window_shape, window_strides):
    total = max((-(-i // s) - 1) * s + k - i, 0)
    small, big = total // 2, total - total // 2
    pads.append((small, big) if mode == 'SAME' else (big, small))
  return pads

def _ints(v, n: int, name: str, what: str) -> tuple:
  if v is None: return (1,) * n
  v = (v,) * n if isinstance(v, int) else tuple(v)
  if len(v) != n or any(not isinstance(i, int) or i < 1 for i in v):
    raise ValueError(f"{what}: {name} must be {n} positive ints (one per spatial axis), got {v!r}")
  return v

def _dilated(size: int, d: int) -> int: return 0 if size == 0 else (size - 1) * d + 1

# ---------------------------------------------------------------- the core: (N, C, *S) x (O, C / groups, *K)

def window_axis(x, axis: int, k: int, s: int, d: int, o: int):
  """Axis `axis` (length i) of x split into two axes (k, o) holding x[a*d + b*s] at [a, b], by views only.
  Tiling x `rep` times along the axis and reading it with row length i + d makes row a start at a*d; the
  positions a*d + b*s stay below i for every window, so no row wraps."""
  i, lead, rest = x.shape[axis], x.shape[:axis], x.shape[axis + 1:]
  keep = (slice(None),) * axis
  if k == 1: return jnp.expand_dims(x[keep + (slice(0, (o - 1) * s + 1, s),)], axis)
  rep = -(-k * (i + d) // i)
  tiled = jnp.broadcast_to(jnp.expand_dims(x, axis), lead + (rep, i) + rest).reshape(lead + (rep * i,) + rest)
  rows = tiled[keep + (slice(0, k * (i + d)),)].reshape(lead + (k, i + d) + rest)
  return rows[keep + (slice(None), slice(0, (o - 1) * s + 1, s))]

def window_view(x, kernel: tuple, strides: tuple, dilation: tuple, out: tuple):
  """The sliding windows of x (N, C, *S) as one view (N, C, *kernel, *out) (nn.functional's convolutions too)."""
  n = len(kernel)
  for j, (k, s, d, o) in enumerate(zip(kernel, strides, dilation, out)):
    x = window_axis(x, 2 + 2 * j, k, s, d, o)                     # (N, C, K0, O0, ..., Kj, Oj, S(j+1), ...)
  return x.transpose((0, 1) + tuple(range(2, 2 + 2 * n, 2)) + tuple(range(3, 3 + 2 * n, 2)))

def _out_shape(x_shape, kernel, strides, dilation) -> tuple:
  return tuple((i - _dilated(k, d)) // s + 1 for i, k, s, d in zip(x_shape[2:], kernel, strides, dilation))

def _grouped(u, groups: int, axis: int):
  """Axis `axis` of u split into (groups, size / groups)."""
  return u.reshape(u.shape[:axis] + (groups, u.shape[axis] // groups) + u.shape[axis + 1:])

def _contract(x, w, strides: tuple, dilation: tuple, groups: int):
  kernel = tuple(w.shape[2:])
  out = _out_shape(x.shape, kernel, strides, dilation)
  cols = window_view(x, kernel, strides, dilation, out)
  ks, os_ = 'hijk'[:len(kernel)], 'pqrs'[:len(kernel)]
  if groups == 1: return jnp.einsum(f'nc{ks}{os_},oc{ks}->no{os_}', cols, w)
  y = jnp.einsum(f'ngc{ks}{os_},goc{ks}->ngo{os_}', _grouped(cols, groups, 1), _grouped(w, groups, 0))
  return y.reshape((x.shape[0], w.shape[0]) + out)

def _flip_kernel(w, groups: int):
  """(O, I, *K) -> (groups * I, O / groups, *K), kernel axes reversed: the kernel of the transposed convolution."""
  g = _grouped(w, groups, 0)                                          # (G, O/G, I, *K)
  g = jnp.flip(jnp.swapaxes(g, 1, 2), axis=tuple(range(3, g.ndim)))
  return g.reshape((groups * w.shape[1], w.shape[0] // groups) + tuple(w.shape[2:]))

def _lhs_grad(g, w, x_shape, strides, dilation, groups):
  """Cotangent of the input: the output cotangent dilated by the strides and padded by the kernel's reach
  (plus the input rows past the last window), convolved at stride 1 with the flipped kernel."""
  kernel = tuple(w.shape[2:])
  config = [(0, 0, 0), (0, 0, 0)]
  for i, k, s, d in zip(x_shape[2:], kernel, strides, dilation):
    reach, extra = _dilated(k, d) - 1, (i - _dilated(k, d)) % s
    config.append((reach, reach + extra, s - 1))
  gp = lax.pad(g, jnp.zeros((), g.dtype), config)
  return _conv_core((1,) * len(kernel), dilation, groups)(gp, _flip_kernel(w, groups))

def _rhs_grad(x, g, w_shape, strides, dilation, groups):
  """Cotangent of the kernel: the input's windows contracted with the output cotangent over batch and positions."""
  kernel = tuple(w_shape[2:])
  cols = window_view(x, kernel, strides, dilation, tuple(g.shape[2:]))
  ks, os_ = 'hijk'[:len(kernel)], 'pqrs'[:len(kernel)]
  if groups == 1: return jnp.einsum(f'nc{ks}{os_},no{os_}->oc{ks}', cols, g)
  y = jnp.einsum(f'ngc{ks}{os_},ngo{os_}->goc{ks}', _grouped(cols, groups, 1), _grouped(g, groups, 1))
  return y.reshape(tuple(w_shape))

@functools.lru_cache(maxsize=None)
def _conv_core(strides: tuple, dilation: tuple, groups: int):
  """The convolution of a padded (N, C, *S) input with an (O, C / groups, *K) kernel, with its gradients given."""
  def core(x, w): return _contract(x, w, strides, dilation, groups)
  def core_fwd(x, w): return core(x, w), (x, w)
  def core_bwd(res, g):
    x, w = res
    return (_lhs_grad(g, w, x.shape, strides, dilation, groups).astype(x.dtype),
            _rhs_grad(x, g, w.shape, strides, dilation, groups).astype(w.dtype))
  op = custom_vjp(core)
  op.defvjp(core_fwd, core_bwd)
  op.forward_mode_differentiates_fun = True
  return op

# ---------------------------------------------------------------- the public convolutions

def _operands(lhs, rhs, preferred_element_type):
  x, w = jnp.asarray(lhs), jnp.asarray(rhs)
  if preferred_element_type is not None:
    x, w = x.astype(preferred_element_type), w.astype(preferred_element_type)
  if x.dtype != w.dtype:
    raise TypeError(f"lax.conv_general_dilated requires lhs and rhs of one dtype, got {x.dtype} and {w.dtype}; "
                    "pass preferred_element_type= or convert one with lax.convert_element_type")
  return x, w

def _check_features(x_shape, w_shape, fgc: int, bgc: int):
  """Feature and batch group counts against the canonical (N, C, *S) and (O, I, *K) shapes."""
  (n, c), (o, i) = x_shape[:2], w_shape[:2]
  if fgc < 1 or bgc < 1 or (fgc > 1 and bgc > 1):
    raise ValueError(f"lax.conv_general_dilated: feature_group_count={fgc} and batch_group_count={bgc} must be "
                     "positive and at most one of them above 1")
  if c != i * fgc or o % fgc:
    raise ValueError(f"lax.conv_general_dilated: lhs has {c} input features but rhs has {i} per group and "
                     f"feature_group_count={fgc} (want lhs features = rhs in-features * feature_group_count, and "
                     f"{o} out features divisible by it); lhs {tuple(x_shape)}, rhs {tuple(w_shape)} in NC.../OI... "
                     "order")
  if bgc > 1 and (n % bgc or o % bgc or c != i):
    raise ValueError(f"lax.conv_general_dilated: batch_group_count={bgc} must divide the batch {n} and the {o} out "
                     f"features, and lhs features {c} must equal rhs in-features {i}")

def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision=None, preferred_element_type=None):
  """General N-d convolution (cross-correlation), as `jax.lax.conv_general_dilated`.

  `dimension_numbers` names the layouts (None: NC..., OI..., NC...; or strings like ('NHWC', 'HWIO', 'NHWC'));
  `padding` is 'SAME', 'VALID', 'SAME_LOWER' or one (low, high) pair per spatial axis (negative crops);
  `lhs_dilation` puts zeros between input elements (transposed convolution), `rhs_dilation` between kernel
  taps (atrous); `feature_group_count` makes grouped and depthwise convolutions. `precision` is ignored.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.conv_general_dilated(jnp.ones((1, 4, 4, 1)), jnp.ones((3, 3, 1, 2)), (1, 1), 'SAME',
  ...                          dimension_numbers=('NHWC', 'HWIO', 'NHWC')).shape
  (1, 4, 4, 2)
  """
  x, w = _operands(lhs, rhs, preferred_element_type)
  dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
  x, w = x.transpose(dn.lhs_spec), w.transpose(dn.rhs_spec)
  n = x.ndim - 2
  strides = _ints(window_strides, n, 'window_strides', 'lax.conv_general_dilated')
  ld = _ints(lhs_dilation, n, 'lhs_dilation', 'lax.conv_general_dilated')
  rd = _ints(rhs_dilation, n, 'rhs_dilation', 'lax.conv_general_dilated')
  _check_features(x.shape, w.shape, feature_group_count, batch_group_count)
  if isinstance(padding, str) and any(d > 1 for d in ld):
    raise ValueError(f"lax.conv_general_dilated: string padding {padding!r} with lhs_dilation={ld} is ambiguous (as in "
                     "JAX); give (low, high) pairs, or use lax.conv_transpose, which computes them")
  kernel = tuple(w.shape[2:])
  in_sizes = tuple(_dilated(i, d) for i, d in zip(x.shape[2:], ld))
  pads = padtype_to_pads(in_sizes, tuple(map(_dilated, kernel, rd)), strides, padding)
  x = lax.pad(x, jnp.zeros((), x.dtype), [(0, 0, 0)] * 2 + [(lo, hi, d - 1) for (lo, hi), d in zip(pads, ld)])
  if batch_group_count > 1:          # batch groups side by side on the feature axis: a grouped convolution
    b = batch_group_count
    x = jnp.swapaxes(_grouped(x, b, 0).reshape((b, x.shape[0] // b) + x.shape[1:]), 0, 1)
    x = x.reshape((x.shape[0], b * x.shape[2]) + x.shape[3:])
  out = _out_shape(x.shape, kernel, strides, rd)
  if any(o < 1 for o in out):
    raise ValueError(f"lax.conv_general_dilated: the padded input {tuple(x.shape)} (N, C, *spatial) is smaller than "
                     f"the dilated kernel {tuple(map(_dilated, kernel, rd))}; pad more, or use a smaller kernel or "
                     "dilation")
  y = _conv_core(strides, rd, feature_group_count * batch_group_count)(x, w)
  return y.transpose(tuple(sorted(range(y.ndim), key=lambda a: dn.out_spec[a])))

def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
  """Convolution of lhs (N, C, *spatial) with rhs (O, I, *kernel), as `jax.lax.conv`.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.conv(jnp.ones((1, 1, 4, 4)), jnp.ones((1, 1, 3, 3)), (1, 1), 'VALID').tolist()
  [[[[9.0, 9.0], [9.0, 9.0]]]]
  """
  return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                              preferred_element_type=preferred_element_type)

def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=None,
                              preferred_element_type=None):
  """`conv` with explicit (low, high) padding and lhs/rhs dilation, as `jax.lax.conv_with_general_padding`.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.conv_with_general_padding(jnp.ones((1, 1, 3)), jnp.ones((1, 1, 2)), (1,), [(1, 1)], (2,), None).tolist()
  [[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]
  """
  return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=precision,
                              preferred_element_type=preferred_element_type)

_TRANSPOSE_LAYOUTS = {2: ('NC', 'IO', 'NC'), 3: ('NHC', 'HIO', 'NHC'), 4: ('NHWC', 'HWIO', 'NHWC'),
                      5: ('NHWDC', 'HWDIO', 'NHWDC')}

def _transpose_pads(k: int, s: int, padding: str) -> tuple:
  """Padding of the stride-dilated input for `conv_transpose`: 'SAME' gives in * s outputs, 'VALID' gives
  (in - 1) * s + k (at least in * s)."""
  if padding == 'VALID': return k - 1, max(k, s) - 1
  total = k + s - 2
  lo = k - 1 if s > k - 1 else -(-total // 2)
  return lo, total - lo

def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None, transpose_kernel=False,
                   precision=None, preferred_element_type=None):
  """Transposed convolution, as `jax.lax.conv_transpose`: the input dilated by `strides` and convolved at stride 1.

  Layout defaults to channels-last ('NHWC', 'HWIO', 'NHWC' for 2-D). `padding` is 'SAME' (output = input *
  stride), 'VALID' or (low, high) pairs for the dilated input. `transpose_kernel=True` flips the kernel's
  spatial axes and swaps its I and O axes: then this is the gradient of `conv_general_dilated` with that kernel.

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> lax.conv_transpose(jnp.ones((1, 3, 1)), jnp.ones((2, 1, 1)), (2,), 'SAME').shape
  (1, 6, 1)
  """
  x, w = jnp.asarray(lhs), jnp.asarray(rhs)
  if dimension_numbers is None:
    if x.ndim not in _TRANSPOSE_LAYOUTS:
      raise ValueError(f"lax.conv_transpose: no default layout for rank {x.ndim} (lhs {x.shape}); pass "
                       "dimension_numbers")
    dimension_numbers = _TRANSPOSE_LAYOUTS[x.ndim]
  dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
  n = x.ndim - 2
  strides = _ints(strides, n, 'strides', 'lax.conv_transpose')
  rd = _ints(rhs_dilation, n, 'rhs_dilation', 'lax.conv_transpose')
  kernel = tuple(w.shape[a] for a in dn.rhs_spec[2:])
  if isinstance(padding, str):
    if padding.upper() not in ('SAME', 'VALID'):
      raise ValueError(f"lax.conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}")
    padding = [_transpose_pads(_dilated(k, d), s, padding.upper()) for k, d, s in zip(kernel, rd, strides)]
  if transpose_kernel:
    w = jnp.swapaxes(jnp.flip(w, axis=dn.rhs_spec[2:]), dn.rhs_spec[0], dn.rhs_spec[1])
  return conv_general_dilated(x, w, (1,) * n, padding, strides, rd, dn, precision=precision,
                              preferred_element_type=preferred_element_type)

# ---------------------------------------------------------------- reduce_window

# name -> (elementwise combine, reduction over axes, identity for floats, identity for an integer dtype's iinfo)
_MONOIDS = {
  'add': (jnp.add, jnp.sum, 0.0, lambda info: 0),
  'mul': (jnp.multiply, jnp.prod, 1.0, lambda info: 1),
  'max': (jnp.maximum, jnp.max, -math.inf, lambda info: info.min),
  'min': (jnp.minimum, jnp.min, math.inf, lambda info: info.max),
}
_KNOWN = {lax.add: 'add', jnp.add: 'add', operator.add: 'add', lax.mul: 'mul', jnp.multiply: 'mul',
          operator.mul: 'mul', lax.max: 'max', jnp.maximum: 'max', max: 'max', lax.min: 'min', jnp.minimum: 'min',
          min: 'min'}

def _monoid(computation) -> str:
  """Which of add, mul, max, min `computation` is: by identity, else by its values on two probe pairs."""
  try:
    if computation in _KNOWN: return _KNOWN[computation]
  except TypeError: pass            # an unhashable callable
  try:
    probe = [float(computation(jnp.asarray(a), jnp.asarray(b))) for a, b in ((2.0, 3.0), (-1.0, 4.0))]
  except Exception as e:
    raise TypeError(f"lax.reduce_window: could not evaluate computation {computation!r} on scalars ({e}); tinyjx "
                    "supports lax.add, lax.mul, lax.max and lax.min (or jnp.add, jnp.maximum, ...)") from None
  for name, want in (('add', [5.0, 3.0]), ('mul', [6.0, -4.0]), ('max', [3.0, 4.0]), ('min', [2.0, -1.0])):
    if probe == want: return name
  raise TypeError(f"lax.reduce_window: computation {computation!r} is none of add, mul, max, min; tinyjx reduces "
                  "windows only with these monoids (write other reductions from strided slices)")

def _init_scalar(x, init_value, name: str):
  """The init value as a 0-d array of x's dtype, and the monoid's identity for that dtype."""
  v = jnp.asarray(init_value)
  if v.ndim: raise TypeError(f"lax.reduce_window: init_value must be a scalar, got shape {v.shape}")
  if v.dtype != x.dtype and not v.weak:
    raise TypeError(f"lax.reduce_window: init_value of dtype {v.dtype} does not match the operand's {x.dtype}; "
                    "pass a Python scalar or an array of the operand's dtype")
  integer = not jnp.issubdtype(x.dtype, jnp.floating)
  if integer and isinstance(init_value, float) and math.isinf(init_value):
    raise TypeError(f"lax.reduce_window: init_value {init_value} does not fit the integer operand dtype {x.dtype}; "
                    f"use jnp.iinfo({x.dtype}).min or .max")
  identity = _MONOIDS[name][3](jnp.iinfo(x.dtype)) if integer else _MONOIDS[name][2]
  return v.astype(x.dtype), identity

def _is_value(v, value) -> bool:
  """Whether the 0-d array v holds `value` (False when v is traced)."""
  try: return bool(v == value)
  except Exception: return False

def reduce_window(operand, init_value, computation, window_dimensions, window_strides, padding, base_dilation=None,
                  window_dilation=None):
  """Reduce every window of `operand` with `computation` (lax.add, lax.mul, lax.max, lax.min or their jnp
  forms), starting from `init_value`, as `jax.lax.reduce_window`. Padding and base-dilation holes are skipped
  (they hold the monoid's identity), and `init_value` enters each window once, as in JAX. Windows are given
  for every axis (use 1 for axes that are not pooled).

  >>> import tinyjx.numpy as jnp; from tinyjx import lax
  >>> x = jnp.arange(16.0).reshape(1, 4, 4, 1)
  >>> lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID').reshape(2, 2).tolist()
  [[5.0, 7.0], [13.0, 15.0]]
  """
  x = jnp.asarray(operand)
  r, name = x.ndim, _monoid(computation)
  window = _ints(window_dimensions, r, 'window_dimensions', 'lax.reduce_window')
  strides = _ints(window_strides, r, 'window_strides', 'lax.reduce_window')
  bd = _ints(base_dilation, r, 'base_dilation', 'lax.reduce_window')
  wd = _ints(window_dilation, r, 'window_dilation', 'lax.reduce_window')
  init, identity = _init_scalar(x, init_value, name)
  sizes = tuple(map(_dilated, x.shape, bd))
  pads = padtype_to_pads(sizes, tuple(map(_dilated, window, wd)), strides, padding)
  if len(pads) != r: raise ValueError(f"lax.reduce_window: padding needs {r} (low, high) pairs, got {padding!r}")
  if any(p != (0, 0) for p in pads) or any(d > 1 for d in bd):
    x = lax.pad(x, jnp.asarray(identity, x.dtype), [(lo, hi, d - 1) for (lo, hi), d in zip(pads, bd)])
  combine, reduce = _MONOIDS[name][:2]
  out = tuple((i - _dilated(k, d)) // s + 1 for i, k, s, d in zip(x.shape, window, strides, wd))
  if any(o < 0 for o in out):
    raise ValueError(f"lax.reduce_window: the window {window} (dilation {wd}) is larger than the padded operand "
                     f"{x.shape}; pad the operand or use a smaller window")
  y = _reduce_windows(x, window, strides, wd, out, combine, reduce)
  return y if _is_value(init, identity) else combine(y, init).astype(x.dtype)

def _reduce_windows(x, window, strides, dilation, out, combine, reduce):
  if window == strides and all(d == 1 for d in dilation) and all(o * k == i for o, k, i in zip(out, window, x.shape)):
    split = sum(((o, k) for o, k in zip(out, window)), ())       # windows tile the operand: one reshape
    return reduce(x.reshape(split), axis=tuple(range(1, 2 * x.ndim, 2))).astype(x.dtype)
  views = [x[tuple(slice(a * d, a * d + (o - 1) * s + 1, s) for a, d, o, s in zip(offset, dilation, out, strides))]
           for offset in itertools.product(*[range(k) for k in window])]
  return functools.reduce(combine, views).astype(x.dtype)

# ---------------------------------------------------------------- output shapes (what stax's layers ask for)

def _shape_of(fn, *shapes) -> tuple:
  """The output shape of `fn` on float32 arrays of `shapes`, found by tracing it (nothing runs)."""
  from tinyjx.transforms.jit import eval_shape
  return tuple(eval_shape(fn, *[jnp.ShapeDtypeStruct(tuple(s), jnp.float32) for s in shapes]).shape)

def _batch_kept(fn_shape, lhs_shape, rhs_shape, dimension_numbers) -> tuple:
  """The output shape of a convolution whose lhs batch size may be unknown (-1, as stax's layers pass it): the
  shape is found for a batch of 1, and the output's batch axis gets the given size back."""
  dn = conv_dimension_numbers(tuple(lhs_shape), tuple(rhs_shape), dimension_numbers)
  batch = lhs_shape[dn.lhs_spec[0]]
  known = [1 if i == dn.lhs_spec[0] and batch < 0 else s for i, s in enumerate(lhs_shape)]
  out = list(fn_shape(dn, known))
  if batch < 0: out[dn.out_spec[0]] = batch
  return tuple(out)

def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers) -> tuple:
  """The output shape of `conv_general_dilated(lhs, rhs, window_strides, padding, dimension_numbers=...)`; a batch
  size of -1 (unknown) stays -1.

  >>> lax.conv_general_shape_tuple((-1, 8, 8, 3), (3, 3, 3, 16), (1, 1), 'SAME', ('NHWC', 'HWIO', 'NHWC'))
  (-1, 8, 8, 16)
  """
  def shape(dn, lhs):
    return _shape_of(lambda a, b: conv_general_dilated(a, b, window_strides, padding, dimension_numbers=dn),
                     lhs, rhs_shape)
  return _batch_kept(shape, lhs_shape, rhs_shape, dimension_numbers)

def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers) -> tuple:
  """The output shape of `conv_transpose(lhs, rhs, window_strides, padding, dimension_numbers=...)`; a batch size
  of -1 (unknown) stays -1.

  >>> lax.conv_transpose_shape_tuple((1, 4, 4, 3), (3, 3, 3, 8), (2, 2), 'SAME', ('NHWC', 'HWIO', 'NHWC'))
  (1, 8, 8, 8)
  """
  def shape(dn, lhs):
    return _shape_of(lambda a, b: conv_transpose(a, b, window_strides, padding, dimension_numbers=dn), lhs, rhs_shape)
  return _batch_kept(shape, lhs_shape, rhs_shape, dimension_numbers)

def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding, base_dilation=None,
                              window_dilation=None) -> tuple:
  """The output shape of `reduce_window` over `operand_shape` (padding as (lo, hi) pairs or a padding string); an
  unknown size (-1) stays -1 on an axis the window does not reduce.

  >>> lax.reduce_window_shape_tuple((-1, 8, 8, 3), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4)
  (-1, 4, 4, 3)
  """
  known = [1 if s < 0 else s for s in operand_shape]
  out = list(_shape_of(lambda a: reduce_window(a, 0.0, lax.add, window_dimensions, window_strides, padding,
                                               base_dilation, window_dilation), known))
  for i, s in enumerate(operand_shape):
    if s < 0: out[i] = s
  return tuple(out)

__all__ += ['conv_general_shape_tuple', 'conv_transpose_shape_tuple', 'reduce_window_shape_tuple']
