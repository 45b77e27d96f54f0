"""memory: liveness-based placement of intermediate buffers in one arena per run.

Input: for each step (kernel or runtime step) in order, the slots it reads and writes, and the byte size
of every intermediate slot. Output: an offset into the arena for each intermediate and the arena's size.
A buffer lives from the step that writes it to the last step that reads it; its bytes may be reused only
by buffers first written by a later step, so no kernel ever reads and writes the same memory through two
names (the kernels declare their pointers `restrict`). Inputs, outputs and constants are not planned
here: outputs are fresh on every run and the others belong to their owners.
"""
from __future__ import annotations

from tinyjx.devices.python import PAGE, PAGE_FROM   # a buffer this large starts a page, as the arena does

ALIGN = 64                                          # every offset is a multiple of a vector's bytes

def _align(n: int) -> int: return PAGE if n >= PAGE_FROM else ALIGN
def _up(off: int, a: int) -> int: return (off + a - 1) // a * a
def _round(n: int) -> int: return _up(max(n, 1), _align(n))

def plan(steps: list[tuple[set, set]], sizes: dict[int, int]) -> tuple[dict[int, int], int]:
  """Offsets for the slots in `sizes` given `steps` = [(reads, writes), ...]; returns (offsets, arena bytes).

  >>> plan([(set(), {0}), ({0}, {1}), ({1}, {2})], {0: 100, 1: 100, 2: 100})   # 2 reuses the memory of 0
  ({0: 0, 1: 128, 2: 0}, 256)
  >>> plan([(set(), {0}), ({0}, {1}), ({1}, {2})], {0: 100, 1: 70000, 2: 100})   # 1 starts a page
  ({0: 0, 1: 4096, 2: 0}, 77824)
  """
  last: dict[int, int] = {}
  for i, (reads, writes) in enumerate(steps):
    for s in reads | writes:
      if s in sizes: last[s] = i
  free: list[tuple[int, int]] = []          # (offset, size) blocks usable by the next step
  offsets: dict[int, int] = {}
  top = 0
  for i, (reads, writes) in enumerate(steps):
    for s in sorted(writes):
      if s not in sizes or s in offsets: continue
      need, a = _round(sizes[s]), _align(sizes[s])
      fit = min((b for b in free if _up(b[0], a) + need <= b[0] + b[1]), key=lambda b: b[1], default=None)
      if fit is None:
        start = _up(top, a)
        if start > top: free.append((top, start - top))
        offsets[s], top = start, start + need
        continue
      free.remove(fit)
      start = offsets[s] = _up(fit[0], a)
      if start > fit[0]: free.append((fit[0], start - fit[0]))
      if fit[0] + fit[1] > start + need: free.append((start + need, fit[0] + fit[1] - start - need))
    for s in sorted(reads | writes):
      if last.get(s) == i and s in offsets: free.append((offsets[s], _round(sizes[s])))
    free = _coalesce(free)
  return offsets, top

def _coalesce(blocks: list) -> list:
  out: list = []
  for off, size in sorted(blocks):
    if out and out[-1][0] + out[-1][1] == off: out[-1] = (out[-1][0], out[-1][1] + size)
    else: out.append((off, size))
  return out
