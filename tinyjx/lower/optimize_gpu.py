"""optimize_gpu: the kernel shape of devices that run a kernel as a grid of work items (`kernel_shape == 'grid'`:
OpenCL, CUDA). The CPU heuristics (matmul packing, OpenMP loops) are in optimize.py; these are the GPU ones.

A kernel's outermost perfect nest of independent loops (at most three, none `serial`) becomes its grid: each work
item runs the body for one point of it. The loops stay in the statement tree, listed in `k.grid` (outermost
first), and the renderer reads their variables from the work item's global id instead of looping; the innermost
loop is dimension 0, so neighbouring work items touch neighbouring memory. `k.global_size` is the grid (dimension
0 first). A kernel with no such loop (a full reduction to a scalar, a sort) runs as a single work item.
"""
from __future__ import annotations
from tinyjx.lower.index import Loop, Kernel

MAX_DIMS = 3

def grid_loops(stmts: list) -> list:
  """The outermost perfect nest of independent loops, outermost first."""
  loops: list = []
  while len(stmts) == 1 and isinstance(stmts[0], Loop) and not stmts[0].serial and len(loops) < MAX_DIMS:
    loops.append(stmts[0])
    stmts = stmts[0].body
  return loops

def as_grid(k: Kernel, device=None) -> None:
  """The grid of kernel `k` (in place): `k.grid` and `k.global_size`. A pass of `tinyjx.lower.PASSES` (`grid`).

  >>> from tinyjx import dtypes
  >>> from tinyjx.uop import UOp, Ops
  >>> from tinyjx.lower.index import build_kernel
  >>> x = UOp(Ops.PARAM, dtypes.float32, (), (0, (6, 4), 0))
  >>> y = UOp(Ops.EXP, dtypes.float32, (x,)).reduce(Ops.ADD, (1,))
  >>> k = build_kernel("k0", [y], {x: 0, y: 1})
  >>> as_grid(k); k.global_size
  (6,)
  """
  k.grid = grid_loops(k.body)
  k.global_size = tuple(l.size for l in reversed(k.grid)) or (1,)
