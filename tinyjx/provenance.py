"""provenance: where each node came from, the user's source line and the transforms that made it.

Recording is off unless someone asks for it, and costs one `is None` test per new node then. It is on while
`record()` is open (tinyjx.explain traces inside one) or while `keep(True)` holds it (the NaN checker, for as
long as its knob is on); `uop.watcher` is the `Recorder` then and None otherwise. The recorder hears of:
- every new node: its site is the innermost stack frame outside tinyjx and nn/, with no transform;
- each node `substitute` rebuilds from another (inlining a jaxpr, removing grad tags): the copy keeps the site;
- the nodes a transform's rule makes: `transforms/ad` (backward and forward passes) and `transforms/batching`
  run each rule through `recorder.attributed(node, phase, rule, *args, transform=...)`, so those nodes get the
  site of the node being transformed, the pass named in `phase` (for NaN messages) and `transform` put in front
  of the node's own transforms.

The transform convention reads as JAX users compose functions, outermost first: a node that vmap's batching
rule made inside grad's backward pass is `('grad', 'vmap')`, shown as `grad of vmap` (what `grad(vmap(f))`
makes), and vmap batching a gradient node is `vmap of grad` (`vmap(grad(f))`). Reverse mode (grad, vjp,
value_and_grad, jacrev) is named `grad`, forward mode (jvp, jacfwd, linearize) `jvp`, batching `vmap` (also for
a pmap under an outer transform, which is a vmap with an axis name). A rule that runs another walk inside
itself (a derivative computed by composition, a control-flow body transformed by its rule) keeps the
attribution of the outer rule: those nodes are part of the one equation being transformed. jit and pmap add no
name: what they trace is the user's own code, inlined.

Sites are held weakly (a node's site dies with the node). This module imports only the core IR.
"""
from __future__ import annotations
import contextlib, linecache, os, sys, threading, weakref
from tinyjx import uop as uop_module
from tinyjx.uop import UOp

_HERE = os.path.dirname(os.path.abspath(__file__))          # the tinyjx package
_LIBRARY = (_HERE + os.sep, os.path.join(os.path.dirname(_HERE), 'nn') + os.sep)

class Site:
  """A user source line (file, line, function), the derivative pass that made the node (if any) and the
  transforms that made it, outermost first (`()` for the user's own op)."""
  __slots__ = ('file', 'line', 'func', 'phase', 'transforms')
  def __init__(self, file, line, func, phase=None, transforms=()):
    self.file, self.line, self.func, self.phase, self.transforms = file, line, func, phase, tuple(transforms)
  def derived(self, phase, transform) -> 'Site':
    """The site of a node a rule made from a node of this site."""
    return Site(self.file, self.line, self.func, phase, ((transform,) if transform else ()) + self.transforms)
  @property
  def code(self) -> str: return linecache.getline(self.file, self.line).strip()
  @property
  def transform(self) -> str:
    """The transforms as JAX users say them: 'grad of vmap' ('' for the user's own op)."""
    return " of ".join(self.transforms)
  def __str__(self):
    code = self.code
    where = f"{self.file}:{self.line} in {self.func}" + (f": {code}" if code else "")
    return where + (f" (in {self.phase})" if self.phase else "")

def user_site(depth: int = 2) -> Site | None:
  """The innermost frame of the caller's stack whose file is not part of tinyjx or nn/."""
  f = sys._getframe(depth)
  while f is not None:
    path = f.f_code.co_filename
    if not path.startswith(_LIBRARY) and not path.startswith('<frozen'):
      return Site(path, f.f_lineno, f.f_code.co_name)
    f = f.f_back
  return None

class Recorder:
  """The `uop.watcher` while recording: node -> Site, held weakly."""
  def __init__(self):
    self.sites: 'weakref.WeakKeyDictionary[UOp, Site]' = weakref.WeakKeyDictionary()
    self.stamps: 'weakref.WeakKeyDictionary[UOp, int]' = weakref.WeakKeyDictionary()   # the session of each site
    self.session = 0                # bumped when recording starts: sites from before are stale
    self.attribution: list = []     # innermost last: the Site new nodes get while a transform's rule runs
  def new(self, node: UOp) -> None:
    site = self.attribution[-1] if self.attribution else user_site()
    if site is not None:
      self.sites[node], self.stamps[node] = site, self.session
  def seen(self, node: UOp) -> None:
    """A node hash-consing handed back (made before, maybe by other code): it gets this session's site once."""
    if self.stamps.get(node, -1) < self.session: self.new(node)
  def derived(self, new: UOp, old: UOp) -> None:
    if (site := self.sites.get(old)) is not None:
      self.sites[new], self.stamps[new] = site, self.session
  def attributed(self, node: UOp, phase: str | None, rule, *args, transform: str | None = None):
    """Run `rule(*args)` with the nodes it makes attributed to `node`'s site: in `phase` of `node`'s op (a
    derivative pass; None keeps `node`'s own phase, as a batching rule rewrites the node) and made by
    `transform` on top of `node`'s transforms. Inside another rule the outer attribution stays."""
    if self.attribution:
      return rule(*args)
    base = self.sites.get(node) or user_site() or Site('<unknown>', 0, '?')
    self.attribution.append(base.derived(base.phase if phase is None else f"{phase} of {node.op.name.lower()}",
                                         transform))
    try:
      return rule(*args)
    finally:
      self.attribution.pop()

recorder = Recorder()
_lock = threading.Lock()
_open = 0          # record() blocks open now
_kept = False      # a knob (jax_debug_nans) keeps recording on

def _sync() -> None:
  was = uop_module.watcher
  uop_module.watcher = recorder if (_open or _kept) else None
  if was is None and uop_module.watcher is not None: recorder.session += 1

def keep(on: bool) -> None:
  """Keep recording on (or stop keeping it), whether or not a `record()` block is open."""
  global _kept
  with _lock:
    _kept = bool(on)
    _sync()

@contextlib.contextmanager
def record():
  """Record the provenance of every node made inside the block; read it with `site_of(node)`.

  >>> import tinyjx, tinyjx.numpy as jnp
  >>> with record():
  ...   y = jnp.sin(jnp.ones(3))
  >>> site_of(y.uop).line > 0
  True
  """
  global _open
  with _lock:
    _open += 1
    _sync()
  try:
    yield recorder
  finally:
    with _lock:
      _open -= 1
      _sync()

def site_of(node: UOp) -> Site | None:
  """The recorded Site of `node`, or None (made while nothing recorded, or before)."""
  return recorder.sites.get(node)
