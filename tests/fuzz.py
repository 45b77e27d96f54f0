"""fuzz: the differential fuzzer. Random programs under random stacks of transforms, run on a compiled device and
on the PYTHON reference device (and, from `bench/fuzz.py`, on JAX), compared value by value.

A `Program` is a list of statements over numbered variables (the inputs first), the variable it returns, and a
stack of transforms applied inside out (`jit`, `grad`, `vmap` with any in_axes/out_axes, `jvp`, `vjp`, `jacfwd`,
`jacrev`, `pmap`, `checkpoint`). `source(program)` is a runnable Python file: the same text runs on tinyjx or,
with `library='jax'`, on JAX, which is how a failure is reported and how JAX checks the same program.
`generate(rng)` draws one; `run(program, device)` gives its outputs (or the exception) on a device; `check`
compares a device with the reference; `shrink` makes a failing program as small as it still fails.

Statements are drawn so that every program is valid by construction: each op knows the shapes and dtypes it
accepts and the shape it makes, and ops a transform cannot take are left out of that program (no while_loop
under reverse mode, no integer or float16 values under a derivative). A program that still raises the same
error on both sides is counted as invalid, and the test keeps that count small.
"""
from __future__ import annotations
import dataclasses, math, random, traceback
import numpy as np

MAX_SIZE = 96          # elements per value, so jacobians and concatenations stay small
DEVICES = 2            # virtual devices for pmap

@dataclasses.dataclass
class Stmt:
  text: str            # a Python expression; {0}, {1} ... are the operands' names
  args: tuple          # operand variable numbers
  shape: tuple
  dtype: str           # 'float32', 'float16', 'int32' or 'bool'

@dataclasses.dataclass
class Program:
  inputs: list         # (shape, dtype) of each input of the inner function
  stmts: list
  out: int             # the variable returned
  transforms: list     # inside out: ('jit',), ('grad', k), ('vmap', in_axes, out_axes, size), ...
  seed: int = 0        # of the argument values

  @property
  def avals(self) -> list: return list(self.inputs) + [(s.shape, s.dtype) for s in self.stmts]

def name(p: Program, i: int) -> str: return f"x{i}" if i < len(p.inputs) else f"v{i - len(p.inputs)}"

# ---------------------------------------------------------------- drawing statements

DIFF = ('grad', 'jvp', 'vjp', 'jacfwd', 'jacrev')
REVERSE = ('grad', 'vjp', 'jacrev')

UNARY = ['jnp.sin({0})', 'jnp.cos({0})', 'jnp.tanh({0})', 'jnp.exp(jnp.clip({0}, -4.0, 4.0))',
         'jnp.log1p(jnp.abs({0}))', 'jnp.sqrt(jnp.abs({0}) + 0.5)', 'jax.nn.relu({0})', 'jax.nn.sigmoid({0})',
         'jax.nn.gelu({0})', 'jax.nn.softplus({0})', '-{0}', '{0} * {0}', '{0} * 0.5 + 1.0',
         'jnp.where({0} > 0, {0}, 0.1 * {0})', 'jax.nn.silu({0})', 'jnp.arctan({0})', 'jnp.square({0}) - {0}']
BINARY = ['{0} + {1}', '{0} - {1}', '{0} * {1}', '{0} / (jnp.abs({1}) + 1.0)', 'jnp.maximum({0}, {1} + 0.25)',
          'jnp.where({0} > {1} + 0.25, {0}, {1} * 2.0)', 'jnp.hypot({0}, {1})']
INT_OPS = ['{0} + {1}', '{0} * {1}', '{0} - 3', '{0} // 3', '{0} % 4', 'jnp.maximum({0}, {1})', '-{0}',
           'jnp.where({0} > {1}, {0}, {1})', 'jnp.abs({0})', '{0} * 2 + 1']

def floats(p: Program, dt=('float32',)) -> list[int]:
  return [i for i, (s, d) in enumerate(p.avals) if d in dt]

def arrays(p: Program, dt=('float32',), min_ndim=1) -> list[int]:
  return [i for i in floats(p, dt) if len(p.avals[i][0]) >= min_ndim]

def same_shape(p: Program, i: int) -> list[int]:
  shape, dt = p.avals[i]
  return [j for j, (s, d) in enumerate(p.avals) if s == shape and d == dt]

def op_unary(p, r, i):
  return Stmt(r.choice(UNARY), (i,), p.avals[i][0], p.avals[i][1])

def op_binary(p, r, i):
  shape, dt = p.avals[i]
  others = same_shape(p, i) + [j for j, (s, d) in enumerate(p.avals) if s == () and d == dt]
  return Stmt(r.choice(BINARY), (i, r.choice(others)), shape, dt)

def op_reduce(p, r, i):
  shape = p.avals[i][0]
  if not shape: return None
  ax, keep = r.randrange(len(shape)), r.random() < 0.3
  out = tuple(1 if k == ax else s for k, s in enumerate(shape)) if keep else shape[:ax] + shape[ax + 1:]
  kind = r.choice(['jnp.sum', 'jnp.max', 'jnp.mean', 'jnp.min', 'jax.nn.logsumexp'])
  return Stmt(f"{kind}({{0}}, axis={ax}, keepdims={keep})", (i,), out, 'float32')

def op_along(p, r, i):
  shape = p.avals[i][0]
  if not shape: return None
  ax = r.randrange(len(shape))
  kind = r.choice(['jax.nn.softmax({0}, axis=%d)', 'jnp.cumsum({0}, axis=%d)', 'jnp.flip({0}, axis=%d)',
                   'jnp.roll({0}, 1, axis=%d)', 'jax.nn.log_softmax({0}, axis=%d)', 'jnp.sort({0}, axis=%d)'])
  return Stmt(kind % ax, (i,), shape, p.avals[i][1])

def op_movement(p, r, i):
  shape, dt = p.avals[i]
  size = math.prod(shape)
  choices = []
  if len(shape) >= 2:
    perm = list(range(len(shape)))
    r.shuffle(perm)
    choices.append((f"jnp.transpose({{0}}, {tuple(perm)})", tuple(shape[k] for k in perm)))
  if shape: choices.append(("{0}.reshape(-1)", (size,)))
  if len(shape) == 1 and size % 2 == 0 and size > 2: choices.append((f"{{0}}.reshape(2, {size // 2})", (2, size // 2)))
  if shape and shape[0] > 1:
    choices.append(("{0}[1:]", (shape[0] - 1,) + shape[1:]))
    choices.append(("{0}[::-1]", shape))
    choices.append(("{0}[::2]", ((shape[0] + 1) // 2,) + shape[1:]))
  if size * 2 <= MAX_SIZE and shape:
    ax = r.randrange(len(shape))
    grown = tuple(s * 2 if k == ax else s for k, s in enumerate(shape))
    choices.append((f"jnp.concatenate([{{0}}, {{0}} * 2.0], axis={ax})", grown))
  if size * 3 <= MAX_SIZE:
    choices.append(("jnp.broadcast_to({0}, (3,) + %r)" % (shape,), (3,) + shape))
    if shape:
      pads = tuple((1, 0) if k == 0 else (0, 1) for k in range(len(shape)))
      padded = tuple(s + 1 for s in shape)
      if math.prod(padded) <= MAX_SIZE: choices.append((f"jnp.pad({{0}}, {pads})", padded))
  choices.append(("jnp.expand_dims({0}, 0)", (1,) + shape))
  text, out = r.choice(choices)
  return Stmt(text, (i,), out, dt)

def op_index(p, r, i):
  shape, dt = p.avals[i]
  if not shape: return None
  n = shape[0]
  idx = [r.randrange(n) for _ in range(r.randint(1, 4))]
  k = len(idx)
  kind = r.randrange(5)
  if kind == 0: return Stmt(f"{{0}}[jnp.array({idx})]", (i,), (k,) + shape[1:], dt)
  if kind == 1: return Stmt(f"{{0}}.at[jnp.array({idx})].add(1.5)", (i,), shape, dt)
  if kind == 2: return Stmt(f"{{0}}.at[jnp.array({idx})].set(0.5)", (i,), shape, dt)
  if kind == 3: return Stmt(f"{{0}}.at[jnp.array({idx})].multiply(-2.0)", (i,), shape, dt)
  return Stmt(f"{{0}}[{r.randrange(n)}]", (i,), shape[1:], dt)

def op_matmul(p, r, i):
  shape = p.avals[i][0]
  if len(shape) == 2:
    rhs = [j for j in arrays(p, min_ndim=2) if len(p.avals[j][0]) == 2 and p.avals[j][0][0] == shape[1]]
    if rhs and r.random() < 0.7:
      j = r.choice(rhs)
      return Stmt("{0} @ {1}", (i, j), (shape[0], p.avals[j][0][1]), 'float32')
    if r.random() < 0.5: return Stmt("{0} @ {0}.T", (i,), (shape[0], shape[0]), 'float32')
    j = r.choice(same_shape(p, i))
    return Stmt("jnp.einsum('ij,ij->i', {0}, {1})", (i, j), (shape[0],), 'float32')
  if len(shape) == 1:
    j = r.choice(same_shape(p, i))
    return Stmt("jnp.dot({0}, {1})", (i, j), (), 'float32')
  return None

def op_conv(p, r, i):
  """lax.conv_general_dilated (NCH.., OIH..) of a value read as a batch of 1-D or 2-D images (a 2-D value as one
  image of one channel or a 1-D image of its rows as channels), stride 1 or 2, 'SAME' or 'VALID', a dilation, a feature group; the kernel is a fixed
  pattern scaled by the mean of some float value, so gradients reach that value too."""
  shape = p.avals[i][0]
  if len(shape) == 1: img = (1, 1) + shape                                     # one 1-D image of one channel
  elif len(shape) == 2: img = r.choice([(1, 1) + shape, (1,) + shape])       # a 2-D image, or a 1-D one of channels
  elif len(shape) in (3, 4): img = shape
  else: return None
  text = "{0}" if img == shape else "{0}.reshape(%s)" % (img,)
  n, c, spatial = img[0], img[1], img[2:]
  if min(spatial) < 2: return None
  groups = 2 if c % 2 == 0 and r.random() < 0.3 else 1
  o = groups * r.randint(1, 2)
  ks = tuple(r.randint(1, min(3, s)) for s in spatial)
  strides, padding = tuple(r.choice([1, 1, 2]) for _ in spatial), r.choice(['SAME', 'VALID'])
  dil = tuple(2 if k >= 2 and 2 * k - 1 <= s and r.random() < 0.4 else 1 for k, s in zip(ks, spatial))
  window = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
  out = tuple(-(-s // st) if padding == 'SAME' else (s - w) // st + 1 for s, w, st in zip(spatial, window, strides))
  if min(out) < 1 or n * o * math.prod(out) > MAX_SIZE: return None
  kshape = (o, c // groups) + ks
  j = r.choice(floats(p))
  kernel = f"jnp.cos(jnp.arange({math.prod(kshape)}, dtype=jnp.float32).reshape({kshape})) * jnp.mean({{1}})"
  return Stmt(f"lax.conv_general_dilated({text}, {kernel}, {strides}, '{padding}', rhs_dilation={dil}, "
              f"feature_group_count={groups})", (i, j), (n, o) + out, 'float32')

def op_control(p, r, i, reverse: bool):
  shape, dt = p.avals[i]
  j = r.choice(same_shape(p, i))                        # a closed-over value
  kinds = ['fori', 'cond', 'checkpoint', 'switch']
  if shape: kinds.append('scan')
  if not reverse: kinds.append('while')
  kind = r.choice(kinds)
  if kind == 'fori':
    return Stmt("lax.fori_loop(0, 3, lambda i, c: c * 0.9 + jnp.sin({1}) * 0.1, {0})", (i, j), shape, dt)
  if kind == 'cond':
    return Stmt("lax.cond(jnp.sum({0}) > 0, lambda a: a * 2.0, lambda a: jnp.sin(a) + {1}, {0})", (i, j), shape, dt)
  if kind == 'switch':
    return Stmt("lax.switch(jnp.clip(jnp.sum({0}).astype(jnp.int32), 0, 2), [lambda a: a + 1.0, lambda a: a * {1}, "
                "lambda a: jnp.cos(a)], {0})", (i, j), shape, dt)
  if kind == 'checkpoint':
    return Stmt("jax.checkpoint(lambda a: jnp.sin(a) * {1})({0})", (i, j), shape, dt)
  if kind == 'while':
    return Stmt("lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 0.8 + {1}), (0, {0}))[1]",
                (i, j), shape, dt)
  inner = shape[1:]
  carry = [k for k, (s, d) in enumerate(p.avals) if s == inner and d == dt]
  if not carry: return Stmt("lax.scan(lambda c, x: (c, x * c), 1.5, {0})[1]", (i,), shape, dt)
  c = r.choice(carry)
  if r.random() < 0.5: return Stmt("lax.scan(lambda c, x: (c * 0.5 + x, c), {1}, {0})[0]", (i, c), inner, dt)
  return Stmt("lax.scan(lambda c, x: (c * 0.5 + x, jnp.sin(c) * x), {1}, {0})[1]", (i, c), shape, dt)

def op_random(p, r, i):
  shape, dt = p.avals[i]
  key = r.choice(['jax.random.PRNGKey(7)', 'jax.random.fold_in(jax.random.PRNGKey(3), 5)',
                  'jax.random.split(jax.random.PRNGKey(11))[1]'])
  kind = r.choice(['jax.random.normal({k}, {s}) * {{0}}', 'jax.random.uniform({k}, {s}) + {{0}}',
                   'jnp.where(jax.random.bernoulli({k}, 0.5, {s}), {{0}}, 0.0)'])
  return Stmt(kind.format(k=key, s=shape), (i,), shape, dt)

def op_int(p, r, i):
  shape = p.avals[i][0]
  if r.random() < 0.25: return Stmt("{0}.astype(jnp.float32) * 0.5", (i,), shape, 'float32')
  return Stmt(r.choice(INT_OPS), (i, r.choice(same_shape(p, i))), shape, 'int32')

def op_half(p, r, i):
  shape = p.avals[i][0]
  if r.random() < 0.3: return Stmt("{0}.astype(jnp.float32)", (i,), shape, 'float32')
  text = r.choice(UNARY[:6] + ['{0} * {1}', '{0} + {1}', 'jnp.maximum({0}, {1})'])
  return Stmt(text, (i, r.choice(same_shape(p, i))), shape, 'float16')

FLOAT_OPS = [(op_unary, 6), (op_binary, 6), (op_reduce, 3), (op_along, 2), (op_movement, 4), (op_index, 2),
             (op_matmul, 2), (op_conv, 3), (op_random, 1)]

def draw_stmt(p: Program, r: random.Random, reverse: bool) -> Stmt | None:
  kinds = [(f, w) for f, w in FLOAT_OPS] + [('control', 2)]
  ints, halves = floats(p, ('int32',)), floats(p, ('float16',))
  if ints: kinds.append(('int', 3))
  if halves: kinds.append(('half', 3))
  fn = r.choices([k for k, _ in kinds], weights=[w for _, w in kinds])[0]
  if fn == 'int': return op_int(p, r, r.choice(ints))
  if fn == 'half': return op_half(p, r, r.choice(halves))
  cand = floats(p)
  if not cand: return None
  i = r.choice(cand[-4:] if r.random() < 0.6 else cand)   # mostly build on recent values: deeper programs
  if fn == 'control': return op_control(p, r, i, reverse)
  return fn(p, r, i)

# ---------------------------------------------------------------- drawing a stack of transforms

def draw_transforms(r: random.Random) -> list:
  n = r.choices([0, 1, 2, 3], weights=[1, 4, 4, 2])[0]
  out = []
  for _ in range(n):
    kind = r.choice(['jit', 'jit', 'grad', 'vmap', 'vmap', 'jvp', 'vjp', 'jacfwd', 'jacrev', 'pmap', 'checkpoint'])
    if kind == 'pmap' and any(t[0] == 'pmap' for t in out): kind = 'vmap'
    out.append((kind,))
  return out

def shapes_through(p: Program, transforms: list) -> tuple[list, tuple] | None:
  """The outer input avals and output shape after `transforms`, or None if a transform cannot apply; fills in the
  drawn details (axes) of each transform in place."""
  ins = [s for s, _ in p.inputs]
  out = p.avals[p.out][0]
  r = random.Random(p.seed * 7919 + len(p.stmts))
  for t in range(len(transforms)):
    kind = transforms[t][0]
    if kind in ('grad', 'vjp') and p.avals[p.out][1] != 'float32': return None
    if kind == 'grad':
      k = transforms[t][1] if len(transforms[t]) > 1 else r.randrange(len(ins))
      transforms[t] = ('grad', k)
      out = ins[k]
    elif kind == 'vjp':
      out = ins[0]
    elif kind in ('jacfwd', 'jacrev'):
      if math.prod(out) * math.prod(ins[0]) > MAX_SIZE: return None
      out = out + ins[0]
    elif kind in ('vmap', 'pmap'):
      if len(transforms[t]) > 1:
        _, in_axes, out_axis, size = transforms[t]
      else:
        size = DEVICES if kind == 'pmap' else r.choice([1, 2, 3])
        in_axes = tuple(None if r.random() < 0.25 else (0 if kind == 'pmap' else r.randint(-len(s) - 1, len(s)))
                        for s in ins)
        if all(a is None for a in in_axes): in_axes = (0,) + in_axes[1:]
        if kind == 'vmap' and r.random() < 0.2: in_axes = r.choice([0, -1])   # one int for every argument
        out_axis = 0 if kind == 'pmap' else r.randint(-len(out) - 1, len(out))
        transforms[t] = (kind, in_axes, out_axis, size)
      if any(math.prod(s) * size > MAX_SIZE * 2 for s in ins): return None
      per_arg = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(ins)
      ins = [s if a is None else _insert(s, a, size) for s, a in zip(ins, per_arg)]
      out = _insert(out, out_axis, size)
  return ins, out

def _insert(shape: tuple, axis: int, size: int) -> tuple:
  axis = axis + len(shape) + 1 if axis < 0 else axis
  return shape[:axis] + (size,) + shape[axis:]

def generate(r: random.Random, seed: int) -> Program:
  """One random program (valid by construction) under a random stack of transforms."""
  transforms = draw_transforms(r)
  diff = any(t[0] in DIFF for t in transforms)
  reverse = any(t[0] in REVERSE for t in transforms)
  n_in = r.randint(1, 3)
  inputs = []
  for _ in range(n_in):
    shape = tuple(r.randint(1, 5) for _ in range(r.choice([0, 1, 1, 2, 2, 3])))
    dt = 'float32' if diff or r.random() < 0.7 else r.choice(['int32', 'float16'])
    inputs.append((shape, dt))
  if all(d != 'float32' for _, d in inputs): inputs[0] = (inputs[0][0], 'float32')
  p = Program(inputs, [], 0, transforms, seed)
  for _ in range(r.randint(1, 8)):
    st = draw_stmt(p, r, reverse)
    if st is not None and math.prod(st.shape) <= MAX_SIZE: p.stmts.append(st)
  fl = floats(p)
  p.out = fl[-1] if r.random() < 0.8 else r.choice(fl)
  if diff and p.avals[p.out][1] != 'float32': p.out = fl[-1]
  return prune(p)

def prune(p: Program) -> Program:
  """Drop the statements the output does not need (renumbering the rest)."""
  n = len(p.inputs)
  need, stack = set(), [p.out]
  while stack:
    i = stack.pop()
    if i in need: continue
    need.add(i)
    if i >= n: stack.extend(p.stmts[i - n].args)
  keep = [i for i in range(n + len(p.stmts)) if i < n or i in need]
  renum = {old: new for new, old in enumerate(keep)}
  stmts = [dataclasses.replace(p.stmts[i - n], args=tuple(renum[a] for a in p.stmts[i - n].args)) for i in keep[n:]]
  return Program(p.inputs, stmts, renum[p.out], [tuple(t) for t in p.transforms], p.seed)

# ---------------------------------------------------------------- as Python source

PRELUDE = {
  'tinyjx': "import numpy as np\nimport tinyjx as jax\nimport tinyjx.numpy as jnp\nfrom tinyjx import lax\n",
  'jax': "import numpy as np\nimport jax\nimport jax.numpy as jnp\nfrom jax import lax\n",
}
HELPERS = '''
def grad_of(h, k): return lambda *xs: jax.grad(lambda *ys: jnp.sum(h(*ys)), argnums=k)(*xs)
def jvp_of(h): return lambda *xs: jax.jvp(h, xs, tuple(jnp.full(jnp.shape(x), 0.5, jnp.result_type(x)) for x in xs))[1]
def vjp_of(h):
  def g(*xs):
    out, pullback = jax.vjp(h, *xs)
    return pullback(jnp.ones_like(out) * 0.75)[0]
  return g
def make_args(seed, avals):
  rng = np.random.default_rng(seed)
  def one(shape, dtype):
    if dtype == 'int32': return rng.integers(-5, 6, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(dtype)
  return [jnp.asarray(one(s, d)) for s, d in avals]
'''

def wrapper(t: tuple) -> str:
  kind = t[0]
  if kind == 'jit': return "jax.jit(g)"
  if kind == 'checkpoint': return "jax.checkpoint(g)"
  if kind == 'grad': return f"grad_of(g, {t[1]})"
  if kind == 'jvp': return "jvp_of(g)"
  if kind == 'vjp': return "vjp_of(g)"
  if kind in ('jacfwd', 'jacrev'): return f"jax.{kind}(g)"
  _, in_axes, out_axis, _ = t
  if kind == 'pmap': return f"jax.pmap(g, axis_name='i', in_axes={in_axes!r})"
  return f"jax.vmap(g, in_axes={in_axes!r}, out_axes={out_axis})"

def source(p: Program, library: str = 'tinyjx') -> str:
  """The program as a runnable Python file; it prints the output (and leaves it in `out`)."""
  ins, _ = shapes_through(p, p.transforms)
  lines = [PRELUDE[library] + HELPERS, f"def f({', '.join(name(p, i) for i in range(len(p.inputs)))}):"]
  for k, st in enumerate(p.stmts):
    lines.append(f"  {name(p, len(p.inputs) + k)} = " + st.text.format(*[name(p, a) for a in st.args]))
  lines.append(f"  return {name(p, p.out)}")
  lines.append("g = f")
  lines += [f"g = {wrapper(t)}" for t in p.transforms]
  avals = [(s, d) for s, (_, d) in zip(ins, p.inputs)]
  lines.append(f"args = make_args({p.seed}, {avals!r})")
  lines.append("out = np.asarray(g(*args))")
  lines.append("if __name__ == '__main__': print(out.dtype, out.shape); print(out)")
  return "\n".join(lines) + "\n"

# ---------------------------------------------------------------- running and comparing

class Outcome:
  """What one device made of a program: the output (a numpy array) or the exception."""
  def __init__(self, value=None, error=None):
    self.value, self.error = value, error
  def __repr__(self):
    if self.error is not None: return f"raised {type(self.error).__name__}: {str(self.error)[:300]}"
    return f"{self.value.dtype}{list(self.value.shape)}"

def run(p: Program, device: str) -> Outcome:
  """Execute `p` on tinyjx's `device` ('PYTHON', 'CPU', 'CL'); the CPU device compiles every eager graph at once."""
  import tinyjx
  knobs = dict(TINYJX_DEVICE=device, TINYJX_CPU_DEVICES=DEVICES)
  if device != 'PYTHON': knobs['TINYJX_EAGER_COMPILE_MS'] = 0
  ns: dict = {'__name__': 'fuzzed'}
  try:
    with tinyjx.Context(**knobs):
      exec(compile(source(p), f"<fuzz seed {p.seed}>", 'exec'), ns)
    if device != 'PYTHON' and p.transforms and p.transforms[-1][0] == 'jit':
      again = replayed(ns, knobs)
      if not (again.dtype == ns['out'].dtype and np.array_equal(again, ns['out'], equal_nan=True)):
        raise AssertionError(f"jit's hit path gave {again.dtype}{list(again.shape)} {again}, "
                             f"its first call {ns['out'].dtype}{list(ns['out'].shape)} {ns['out']}")
    return Outcome(ns['out'])
  except Exception as e:  # noqa: BLE001 - every failure is an outcome to compare
    e.trace = traceback.format_exc()
    return Outcome(error=e)

def replayed(ns: dict, knobs: dict) -> np.ndarray:
  """The executed program's jitted `g` called three more times on its `args` with `knobs` set for the process (jit
  learns its hit path only outside a Context: the last call replays); the knobs are put back after."""
  from tinyjx import settings
  saved = {k: settings.get(k) for k in knobs}
  try:
    for k, v in knobs.items(): settings.set(k, v)
    for _ in range(3): out = ns['g'](*ns['args'])
    return np.asarray(out)
  finally:
    for k, v in saved.items(): settings.set(k, v)

def tolerance(p: Program) -> tuple[float, float]:
  if any(d == 'float16' for _, d in p.avals): return 3e-2, 3e-2
  deep = sum(1 for t in p.transforms if t[0] in DIFF)
  return 2e-4 * (1 + deep), 2e-5 * (1 + deep)

def compare(p: Program, ref: Outcome, got: Outcome) -> str | None:
  """None where the two agree (or both refuse the program alike); else what differs."""
  if ref.error is not None and got.error is not None:
    if type(ref.error) is type(got.error): return None
    return f"different errors: reference {ref!r}, device {got!r}"
  if ref.error is not None: return f"the reference raised but the device did not: {ref!r}"
  if got.error is not None: return f"the device raised: {got!r}\n{got.error.trace}"
  a, b = ref.value, got.value
  if a.shape != b.shape or a.dtype != b.dtype: return f"aval differs: reference {ref!r}, device {got!r}"
  if a.dtype.kind in 'iub':
    return None if np.array_equal(a, b) else f"integer values differ:\nreference {a}\ndevice    {b}"
  rtol, atol = tolerance(p)
  if np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True): return None
  err = np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))
  return f"values differ (max abs error {err:.3g}, rtol {rtol}):\nreference {a}\ndevice    {b}"

def check(p: Program, device: str = 'CPU') -> str | None:
  """None if `device` agrees with the PYTHON reference on `p`, else the difference."""
  return compare(p, run(p, 'PYTHON'), run(p, device))

def invalid(p: Program) -> bool:
  """The reference refuses the program (the generator drew something the library rightly rejects)."""
  return run(p, 'PYTHON').error is not None

# ---------------------------------------------------------------- shrinking

def smaller(p: Program):
  """Candidate programs one step smaller than `p`, smallest first."""
  for t in range(len(p.transforms)):
    yield prune(dataclasses.replace(p, transforms=p.transforms[:t] + p.transforms[t + 1:]))
  n = len(p.inputs)
  for i in range(n, p.out):
    yield prune(dataclasses.replace(p, out=i))
  for k, st in enumerate(p.stmts):          # a statement replaced by one of its operands of the same aval
    for a in st.args:
      if p.avals[a] == (st.shape, st.dtype):
        stmts = list(p.stmts)
        stmts[k] = Stmt("{0}", (a,), st.shape, st.dtype)
        yield prune(dataclasses.replace(p, stmts=stmts))

def shrink(p: Program, fails, budget: int = 60) -> Program:
  """The smallest program found (by removing transforms and statements) for which `fails(program)` still holds."""
  improved = True
  while improved and budget > 0:
    improved = False
    for q in smaller(p):
      budget -= 1
      if shapes_through(q, [tuple(t) for t in q.transforms]) is not None and fails(q):
        p, improved = q, True
        break
      if budget <= 0: break
  return p

def fuzz(count: int, seed: int, device: str = 'CPU', report=print) -> dict:
  """Draw and check `count` programs; returns counts and the shrunk failures (as runnable source)."""
  r = random.Random(seed)
  stats = {'programs': 0, 'invalid': 0, 'failures': []}
  for k in range(count):
    p = generate(r, seed * 100_003 + k)
    if shapes_through(p, p.transforms) is None:
      p = dataclasses.replace(p, transforms=[])
    if device not in ('CPU', 'PYTHON'):   # (one device of its kind, where pmap maps DEVICES: the same axes vmapped)
      p = dataclasses.replace(p, transforms=[('vmap',) + t[1:] if t[0] == 'pmap' else t for t in p.transforms])
    ref, got = run(p, 'PYTHON'), run(p, device)
    stats['programs'] += 1
    if ref.error is not None and got.error is not None and type(ref.error) is type(got.error):
      stats['invalid'] += 1
      continue
    diff = compare(p, ref, got)
    if diff is None: continue
    small = shrink(p, lambda q: check(q, device) is not None)
    stats['failures'].append((source(small), check(small, device) or diff))
    report(f"program {k} (seed {p.seed}) fails on {device}:\n{stats['failures'][-1][1]}\n{source(small)}")
  return stats
