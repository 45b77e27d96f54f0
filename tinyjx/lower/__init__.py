"""lower: the lowering pipeline, from a concrete or traced graph to a compiled Executable.

The whole pipeline is `PASSES`, an ordered list of named passes; each takes and returns the `Lowering`
state (the graph, then the schedule, then the kernels, then the source). Its input is a jaxpr (params,
outputs); its output is an `Executable` (runtime.py) of the device. DEBUG=3 prints the kernels with the
jaxpr equations each one fused, DEBUG=4 the generated source, DEBUG>=5 the state after every pass. VIZ=1 (or
'file') hands each jitted program to `tinyjx.viz`, which watches the passes through `observer` (None otherwise).

Eager realization goes through the same pipeline: `realize(device, roots)` (registered with the device layer,
with `compile_jaxpr`, by `devices.register_pipeline` at the bottom of this file) runs the passes through
`simplify` (`passes(last='simplify')`), then turns the BUFFER leaves of the concrete graph into parameters and
lifts its scalar constants into parameters too, so a program is compiled once per graph *structure* (not per
buffer or per Python scalar) and cached in memory by that structure's key; the disk cache below it
makes a new process skip the compiler. Eager execution is tiered like a JIT: a C compiler call costs about
0.1 s, more than most one-off eager computations, so a structure runs on the reference interpreter until it
has spent `TINYJX_EAGER_COMPILE_MS` (default 50) milliseconds there, and is compiled then (0: compile at
once). A loop over big arrays compiles its body on the second iteration; one-off and tiny computations never
pay for the compiler. Results agree either way: the compiled kernels implement the interpreter's semantics,
which the differential tests check (up to the rounding of sums and transcendental functions).
"""
from __future__ import annotations
import math, threading, time
from dataclasses import dataclass, field
import numpy as np
from tinyjx import settings as config, array, devices
from tinyjx.memo import LRU
from tinyjx.uop import UOp, Ops, toposort, substitute, prim_name
from tinyjx.rewrite import graph_rewrite
from tinyjx.lower.simplify import pm_simplify, pm_decompose, fold_permutes, relu_masks
from tinyjx.lower.schedule import schedule, KernelItem
from tinyjx.lower.index import build_kernel, NeedsBuffer, Sort
from tinyjx.lower.memory import plan
from tinyjx.lower.optimize import (is_matmul, as_matmul, merge_nests, unroll_windows, as_column_reduction,
                                   as_column_scan, split_reductions, stash_shared, split_chains, tile_transposes,
                                   block_sums, pipeline_rows, reduce_in_memory_order, mark_parallel, stream_stores,
                                   defer_row_stores, block_transposes, split_guards, estimate)
from tinyjx.lower.optimize_gpu import as_grid, spread_reductions, spread_of
from tinyjx.lower.dialects import RENDERERS
from tinyjx.lower.runtime import Executable, Slot, KernelCall, InterpretedStep, step_rules
from tinyjx.lower import steps  # noqa: F401  (fills step_rules: control flow and collectives as runtime steps)
from tinyjx.lower.complex import has_complex, split as split_complex, SplitExecutable
from tinyjx.lower import plans

@dataclass
class Lowering:
  """Everything the passes know about one program; each pass fills in the next fields."""
  device: object
  params: list                      # PARAM leaves, one per input
  outs: list                        # output nodes
  roots: list = field(default_factory=list)
  items: list = field(default_factory=list)
  slots: list = field(default_factory=list)
  slot_of: dict = field(default_factory=dict)
  consts: dict = field(default_factory=dict)
  in_slots: list = field(default_factory=list)
  out_slots: list = field(default_factory=list)
  out_plan: list = field(default_factory=list)
  kernels: list = field(default_factory=list)
  steps: list = field(default_factory=list)
  offsets: dict = field(default_factory=dict)
  arena_bytes: int = 0
  source: str = ""
  binary: object = None            # what the device's compile returned
  @property
  def flops(self) -> int: return sum(k.flops for k in self.kernels)
  @property
  def nbytes(self) -> int: return sum(k.nbytes for k in self.kernels)

def do_simplify(st: Lowering) -> Lowering:
  st.roots = relu_masks(list(graph_rewrite(st.outs, pm_simplify, name="simplify")))
  return st

def do_split_complex(st: Lowering) -> Lowering:
  if has_complex(list(st.params) + st.roots):
    st.params, st.roots = split_complex(st.params, st.roots, f"the {st.device.name} device")
  return st

def do_decompose(st: Lowering) -> Lowering:
  st.roots = fold_permutes(list(graph_rewrite(st.roots, pm_decompose, name="decompose")))
  return st

def do_schedule_and_index(st: Lowering) -> Lowering:
  """Schedule, then build every kernel; a node a kernel cannot compute in place is materialized and we retry."""
  forced: set = set()
  while True:
    st.items = schedule(st.roots, forced)
    assign_slots(st)
    try:
      st.kernels = [build_kernel(f"k{i}_{_kernel_label(it.outs[0])}", it.outs, st.slot_of, it.inline)
                    for i, it in enumerate(x for x in st.items if isinstance(x, KernelItem))]
      # what each kernel reads that is a zero-padded array (a direct matmul skips the windows' padding)
      pads = {s: (n.shape, _zero_pads(n)) for n, s in st.slot_of.items() if n.op is Ops.PAD}
      for k in st.kernels: k.zero_pads = {g.arg: pads[g.arg] for g in k.args if g.arg in pads and g.arg not in k.outs}
      sorted_prefix(st)
      return st
    except NeedsBuffer as e:
      if e.node in forced: raise
      forced.add(e.node)

def sorted_prefix(st: Lowering) -> None:
  """Each argsort whose every reader slices a leading part of its axis (`lax.top_k`, `argsort(x)[..., :k]`) and
  that is not an output sets its `Sort.top` to the longest such part: a CPU kernel then selects those positions
  (render.py, `tjx_topk`) instead of sorting the whole axis. Positions past `top` are never written."""
  sorts = [s for k in st.kernels for s in k.body if isinstance(s, Sort)]
  if not sorts: return
  users: dict = {}
  for n in toposort(st.roots):
    for src in n.src: users.setdefault(src, []).append(n)
  node_of, roots = {slot: n for n, slot in st.slot_of.items()}, set(st.roots)
  for s in sorts:
    n = node_of[s.out.arg]
    readers = users.get(n, [])
    ends = [u.arg[s.axis][1] for u in readers if u.op is Ops.SHRINK and u.arg[s.axis][0] == 0]
    if n not in roots and readers and len(ends) == len(readers): s.top = max(ends)

def _zero_pads(n: UOp) -> tuple:
  """The zeros around a PAD node's data on each axis, (before, after), through a chain of PADs (one per axis, as
  an input gradient pads its output gradient)."""
  out = [(0, 0)] * len(n.shape)
  while n.op is Ops.PAD:
    out, n = [(a + lo, b + hi) for (a, b), (lo, hi) in zip(out, n.arg)], n.src[0]
  return tuple(out)

def assign_slots(st: Lowering) -> None:
  """One slot per buffer: inputs, constants (BUFFER leaves), outputs, intermediates; and how outputs come back."""
  st.slots, st.slot_of, st.consts, st.out_plan, st.out_slots = [], {}, {}, [], []
  def new(node, kind):
    st.slot_of[node] = len(st.slots)
    st.slots.append(Slot(kind, node.shape, node.dtype))
    return st.slot_of[node]
  st.in_slots = [new(p, 'in') for p in st.params]
  for n in toposort(st.roots):
    if n.op is Ops.BUFFER: st.consts[new(n, 'const')] = array.buffers[n.arg[0]]
  firsts: dict = {}
  for j, r in enumerate(st.roots):
    if r.op is Ops.PARAM: st.out_plan.append(('input', st.params.index(r), r.dtype))
    elif r.op is Ops.BUFFER: st.out_plan.append(('const', st.slot_of[r], r.dtype))
    elif r in firsts: st.out_plan.append(('dup', firsts[r], r.dtype))
    else:
      firsts[r] = j
      st.out_slots.append(new(r, 'out'))
      st.out_plan.append(('slot', st.slot_of[r], r.dtype))
  for it in st.items:
    for n in it.outs:
      if n is not None and n not in st.slot_of: new(n, 'tmp')

def _kernel_label(n: UOp) -> str:
  return prim_name(n).replace('convert_element_type', 'cast')

def on_kernels(rewrite, shape: str = 'loops'):
  """The pass that runs `rewrite(kernel, device)` (in place) on each kernel of a device of kernel shape `shape`:
  a CPU loop nest (optimize.py; kernels `as_matmul` made a Matmul are left alone) or a GPU grid (optimize_gpu.py)."""
  def run(st: Lowering) -> Lowering:
    if st.device.kernel_shape != shape: return st
    for k in st.kernels:
      if shape != 'loops' or not is_matmul(k): rewrite(k, st.device)
    return st
  run.__name__ = run.__qualname__ = rewrite.__name__
  return run

def do_spread_reductions(st: Lowering) -> Lowering:
  if st.device.kernel_shape == 'grid': spread_reductions(st)
  return st

def do_estimate(st: Lowering) -> Lowering:
  sizes = {i: s.nbytes for i, s in enumerate(st.slots)}
  for k in st.kernels:
    estimate(k, sizes)
    if k.strided: k.flops //= spread_of(k)   # a loop spread over many groups runs once in all
  return st

def do_steps_and_memory(st: Lowering) -> Lowering:
  """Group consecutive kernels into one foreign call (a grid device launches each kernel itself, over its grid);
  place intermediates in the arena by liveness."""
  st.steps, kernels, run = [], iter(range(len(st.kernels))), None
  grid = st.device.kernel_shape == 'grid'
  for it in st.items:
    if isinstance(it, KernelItem) and grid:
      k = st.kernels[i := next(kernels)]
      st.steps.append(KernelCall(k.name, [i], slots=[g.arg for g in k.args], global_size=k.global_size,
                                 local_size=k.local_size))
      continue
    if isinstance(it, KernelItem):
      if run is None:
        run = KernelCall(len([s for s in st.steps if isinstance(s, KernelCall)]), [])
        st.steps.append(run)
      run.kernels.append(next(kernels))
      continue
    run = None
    outs = [st.slot_of.get(o) for o in it.outs]
    rule = step_rules.get(it.node.op)
    if rule is None: st.steps.append(InterpretedStep(it.node, [st.slot_of[s] for s in it.node.src], outs))
    else: st.steps.append(rule(it.node, st, outs))
  accesses = []
  for s in st.steps:
    if isinstance(s, KernelCall):
      for i in s.kernels:
        k = st.kernels[i]
        accesses.append(({g.arg for g in k.args} - set(k.outs), set(k.outs)))
    else: accesses.append((set(s.reads), set(s.writes)))
  tmp = {i: s.nbytes for i, s in enumerate(st.slots) if s.kind == 'tmp'}
  st.offsets, st.arena_bytes = plan(accesses, tmp)
  return st

def do_render(st: Lowering) -> Lowering:
  entries = [s.kernels for s in st.steps if isinstance(s, KernelCall)]
  st.source = RENDERERS[st.device.renderer]().render(st.kernels, entries)
  return st

def do_compile(st: Lowering) -> Lowering:
  st.binary = st.device.compile(st.source)
  return st

PASSES = [
  ("simplify", do_simplify),            # constant folding and exact identities: less work for every later pass
  ("split_complex", do_split_complex),  # complex values as pairs of floats: no kernel or dialect needs a complex type
  ("decompose", do_decompose),          # dot_general and float16/bfloat16 math into ops the renderer runs natively
  ("schedule+index", do_schedule_and_index),  # which nodes get buffers; each kernel as loops over index arithmetic
  # optimize: speed, never results (but block_sums, for accuracy); on a CPU (loop nests) or a GPU (grids)
  ("as_matmul", on_kernels(as_matmul)),  # CPU: a big sum of products runs as packed panels and register tiles
  ("unroll_windows", on_kernels(unroll_windows)),  # CPU: a 2 x 2 pool's window written out: the outputs vectorize
  ("merge_nests", on_kernels(merge_nests)),  # CPU: a 20 x 20 image is one loop of 400 where every address allows it
  ("split_guards", on_kernels(split_guards)),  # CPU: a loop over a concatenation's pieces runs as one loop a piece
  ("as_column_reduction", on_kernels(as_column_reduction)),  # CPU: x.sum(0) keeps a row of sums, so it vectorizes
  ("as_column_scan", on_kernels(as_column_scan)),  # CPU: cumsum(x, 0) keeps a row of running values, so it vectorizes
  ("split_reductions", on_kernels(split_reductions)),  # CPU: a big full sum runs as parallel chunks (fixed in number)
  ("stash_shared", on_kernels(stash_shared)),  # CPU: an exp two sibling loops both compute (softmax) is computed once
  ("split_chains", on_kernels(split_chains)),  # CPU: a tanh of a long argument, a log1p of an exp: two loops, in blocks
  ("tile_transposes", on_kernels(tile_transposes)),  # CPU: a transposed read runs a cache line at a time
  ("block_sums", on_kernels(block_sums)),  # CPU: float32 sums add float32 blocks into a double total, as PYTHON does
  ("pipeline_rows", on_kernels(pipeline_rows)),  # CPU: a row's max runs in the last row's exp loop: loads overlap math
  ("reduce_in_memory_order", on_kernels(reduce_in_memory_order)),  # CPU: channel sums read images in order
  ("mark_parallel", on_kernels(mark_parallel)),  # CPU: the outermost independent loop with enough work gets threads
  ("stream_stores", on_kernels(stream_stores)),  # CPU: a kernel that stores far more than the caches hold bypasses them
  ("defer_row_stores", on_kernels(defer_row_stores)),  # CPU: a row's stores run in the next row's loop: divides overlap
  ("block_transposes", on_kernels(block_transposes)),  # CPU: a transpose moves square blocks through vector registers
  ("spread_reductions", do_spread_reductions),  # GPU: a long full reduction runs on many work groups, then one
  ("grid", on_kernels(as_grid, 'grid')),  # GPU: work items or work groups sharing reductions, matmul tiles
  ("estimate", do_estimate),            # each kernel's flops and bytes, for DEBUG=2, the counters and VIZ
  ("memory", do_steps_and_memory),      # kernels grouped into foreign calls; intermediates share an arena
  ("render", do_render),                # one C translation unit for the whole program
  ("compile", do_compile),              # the device's toolchain (for CPU the system C compiler), through its disk cache
]

viz_compile = None   # tinyjx.viz.compile_recorded, registered by tinyjx.viz when it is imported
def passes(first: str | None = None, last: str | None = None) -> list:
  """The entries of PASSES from the one named `first` through the one named `last` (by default from the first,
  through the last): a part of the pipeline is always a slice of the one list.

  >>> [name for name, _ in passes('mark_parallel', 'estimate')]
  ['mark_parallel', 'stream_stores', 'defer_row_stores', 'block_transposes', 'spread_reductions', 'grid', 'estimate']
  """
  names = [name for name, _ in PASSES]
  for n in (first, last):
    if n is not None and n not in names: raise KeyError(f"no lowering pass {n!r}; the passes are {names}")
  return PASSES[names.index(first) if first else 0:names.index(last) + 1 if last else len(PASSES)]

observer = None   # tinyjx.viz's recorder while it records a lowering: told .pass_start(name), .pass_done(name, st)

def lower(device, params: list, outs: list) -> Lowering:
  """Run every pass on the program `params -> outs`; returns the final state (kernels, source, binary).

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import devices
  >>> jaxpr = tinyjx.make_jaxpr(lambda x: jnp.exp(x * 2).sum())(jnp.ones(8))
  >>> st = lower(devices.get('CPU'), jaxpr.params, jaxpr.outs)
  >>> [k.name for k in st.kernels]
  ['k0_reduce_sum']
  """
  device.prepare()                    # (the CPU's compiler probe runs beside the passes)
  st = Lowering(device, list(params), list(outs))
  obs = observer
  for name, fn in PASSES:
    if obs is not None: obs.pass_start(name)
    st = fn(st)
    if obs is not None: obs.pass_done(name, st)
    if config.get('DEBUG') >= 5: print(f"*** after {name}:\n{_describe(st)}")
  if config.get('DEBUG') >= 3: print(kernel_report(st))
  if config.get('DEBUG') >= 4: print(st.source)
  return st

def compile_jaxpr(device, jaxpr) -> Executable:
  """`device.compile_jaxpr` for compiled devices: lower and compile `jaxpr` (params in, outs out).

  >>> import numpy as np, tinyjx, tinyjx.numpy as jnp
  >>> from tinyjx import devices, dtypes
  >>> cpu = devices.get('CPU')
  >>> exe = compile_jaxpr(cpu, tinyjx.make_jaxpr(lambda x: x * 2 + 1)(jnp.ones(3)))
  >>> exe.run([cpu.from_numpy(np.arange(3, dtype=np.float32), dtypes.float32)])[0].numpy()
  array([1., 3., 5.], dtype=float32)
  """
  if config.get('VIZ') and jaxpr.name != "eager" and observer is None and viz_compile is not None:
    return viz_compile(device, jaxpr, build_executable)   # a jitted program: record it for VIZ
  return build_executable(device, jaxpr)

def build_executable(device, jaxpr) -> Executable:
  """`compile_jaxpr` without VIZ's look: lower every pass and load the result, or, where a plan of the same program
  is in the disk cache (`plans`), load the library its source names and skip the passes. A program with complex
  values is lowered as one on their float parts (lower/complex.py) and bound and read back as the complex program."""
  key = plans.key_of(device, jaxpr, PASSES) if observer is None else None
  st = plans.load(key, Lowering(device, list(jaxpr.params), list(jaxpr.roots))) if key is not None else None
  if st is not None:
    st.binary = device.compile(st.source)
  else:
    st = lower(device, jaxpr.params, jaxpr.roots)   # effects first: they run in program order, then are dropped
    if key is not None: plans.save(key, st)
  return executable(device, st, jaxpr)

def executable(device, st: Lowering, jaxpr):
  """The Executable of `jaxpr` lowered to `st`; one whose inputs or outputs are complex binds and returns them as
  complex buffers (the lowered program takes their float parts)."""
  exe = Executable(device, st, st.binary, n_effects=len(jaxpr.effects))
  if not has_complex(list(jaxpr.params) + list(jaxpr.roots)): return exe
  return SplitExecutable(exe, jaxpr.params, jaxpr.roots[len(jaxpr.effects):])

def kernel_report(st: Lowering) -> str:
  """Each kernel with the jaxpr equations it fused (DEBUG=3)."""
  from tinyjx.tracing import aval_str
  lines = [f"*** {len(st.kernels)} kernels, {sum(1 for s in st.slots if s.kind == 'tmp')} intermediate buffers"]
  for k in st.kernels:
    eqns = [f"{prim_name(n)}:{aval_str(n)}" for n in k.nodes if n.op not in (Ops.CONST,)]
    lines.append(f"  {k.name}: writes slots {list(k.outs)}; fuses {', '.join(eqns)}")
  return "\n".join(lines)

def _describe(st: Lowering) -> str:
  """What a pass produced (DEBUG>=5): the graph as a jaxpr, then the kernels, then the source without its prelude."""
  from tinyjx.tracing import Jaxpr, pretty
  if st.source: return st.source[st.source.find("static void k"):]
  if st.kernels: return kernel_report(st)
  return pretty(Jaxpr(st.params, st.roots, name="lowering"))

# --- eager realization ---
KEEP_CONSTS = {0, 1, -1, 2, 0.5}
EAGER_CACHE_SIZE = 2048
_eager = LRU(EAGER_CACHE_SIZE)       # structure key -> Executable
_seen = LRU(4 * EAGER_CACHE_SIZE)    # structure key -> seconds it spent interpreted, while not compiled
_eager_lock = threading.Lock()       # guards both

def _liftable(n: UOp) -> bool:
  v = n.arg[0]
  return n.dtype.kind in 'iuf' and not (isinstance(v, float) and not math.isfinite(v)) and v not in KEEP_CONSTS

def normalize(roots: list, device) -> tuple[list, list, list]:
  """The graph with BUFFER leaves and scalar constants as PARAMs; returns (params, outs, input buffers)."""
  params, bufs, mapping = [], [], {}
  for n in toposort(roots):
    if n.op is Ops.BUFFER:
      mapping[n] = p = UOp(Ops.PARAM, n.dtype, (), (len(params), n.shape, 0))
      params.append(p); bufs.append(array.buffers[n.arg[0]])
    elif n.op is Ops.CONST and _liftable(n):
      p = UOp(Ops.PARAM, n.dtype, (), (len(params), (), 0))
      mapping[n] = p.reshape((1,) * len(n.shape)).expand(n.shape)
      params.append(p); bufs.append(device.from_numpy(np.array(n.arg[0], dtype=n.dtype.np), n.dtype))
  return params, substitute(roots, mapping), bufs

def realize(device, roots: list) -> list:
  """Compute the concrete graphs `roots` on a compiled device (see the module doc); returns one Buffer each."""
  st = Lowering(device, [], list(roots))
  for _, fn in passes(last='simplify'): st = fn(st)   # folded first, so only the scalars left are lifted to inputs
  params, outs, bufs = normalize(st.roots, device)
  key = (device.name, config.get('JAX_ENABLE_X64')) + tuple(o.key for o in outs)
  with _eager_lock:
    exe = _eager.get(key)
    spent = _seen.get(key, 0.0)
  if exe is None and spent * 1000 < config.get('TINYJX_EAGER_COMPILE_MS'):
    start = time.perf_counter()
    out = interpret(device, params, outs, bufs)
    with _eager_lock: _seen.put(key, _seen.get(key, 0.0) + time.perf_counter() - start)
    return out
  if exe is None:
    from tinyjx.tracing import Jaxpr
    exe = device.compile_jaxpr(Jaxpr(params, outs, name="eager"))
    with _eager_lock:
      _seen.pop(key)
      _eager.put(key, exe)
  return exe.run(bufs)

def interpret(device, params: list, outs: list, bufs: list) -> list:
  """The program run by the reference interpreter, with results as buffers of `device`."""
  from tinyjx.devices.python import evaluate
  values = evaluate(outs, {p: b.numpy() for p, b in zip(params, bufs)})
  return [device.from_numpy(np.ascontiguousarray(v, o.dtype.np).reshape(o.shape), o.dtype) for v, o in zip(values, outs)]

# The one registration of this layer: compiled devices lower and run programs through these two functions.
devices.register_pipeline(compile_jaxpr, realize)
