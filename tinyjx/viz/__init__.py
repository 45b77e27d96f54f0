"""viz: one page that shows a jitted function's whole pipeline, in the browser, with nothing fetched from outside.

The page shows the jaxpr graph; the graph after each named lowering pass (`tinyjx.lower.PASSES`) with the nodes
it added highlighted and, per rewrite rule, how many nodes it added and removed; the kernels with their
generated source and the equations each fused; and a timeline of one run's kernels (each run alone and
synchronized, as DEBUG=2 times them). It is plain HTML, CSS and JavaScript from `static/`, with the program's
data (recording.py documents it) embedded as one JSON blob, so a written page works offline and can be mailed.

Two ways in:

- the knob: `VIZ=1` records every jitted function the process compiles (its first run gives the timeline) and
  serves the pages on localhost (`TINYJX_VIZ_PORT`, default a free port), printing `VIZ: http://127.0.0.1:PORT/`
  once (the server is a daemon thread: it lives as long as the process, so a script that ends at once wants
  `VIZ=file`, or an `input()` at its end); `VIZ=file` writes one HTML file per function into `TINYJX_VIZ_DIR` (default a new temporary directory)
  and prints its path. Where no port can be bound the page is written as a file instead. Recording never breaks
  the program: an error inside it is reported once as a warning and the function runs as usual. Functions
  compiled before VIZ was turned on (or an equal program compiled earlier) are not recorded again.
- the API, for tests, docs and notebooks:

  >>> import tinyjx, tinyjx.numpy as jnp, tinyjx.viz
  >>> data = tinyjx.viz.record(lambda x: jnp.exp(x) / jnp.exp(x).sum(), jnp.ones(8))   # doctest: +SKIP
  >>> [p['name'] for p in data['passes']]                                              # doctest: +SKIP
  ['simplify', 'split_complex', 'decompose', 'schedule+index', 'as_matmul', ..., 'estimate', 'render', 'compile']
  >>> path = tinyjx.viz.write(lambda x: jnp.tanh(x) * 2, jnp.ones(4))                 # doctest: +SKIP

  `page_for(f, *args)` returns the HTML instead of writing it. The arguments are arrays (or pytrees of
  them), as for a call of `jit(f)`; static arguments are not supported here: close over them instead.
"""
from __future__ import annotations
import json, os, re, tempfile, threading, warnings
from importlib import resources
import numpy as np
from tinyjx import settings as config
from tinyjx.viz.recording import Recording

__all__ = ['record', 'page_for', 'write', 'html', 'compile_recorded', 'stop']

MAX_PAGES = 100          # the server keeps the most recent pages of this many functions

# --- the page ---
def _static(name: str) -> str:
  return resources.files('tinyjx.viz').joinpath('static', name).read_text(encoding='utf-8')

def html(programs: list) -> str:
  """The self-contained page of the recorded `programs` (a list of `record` results)."""
  blob = json.dumps({'programs': programs}, separators=(',', ':'), default=str)
  blob = blob.replace('<', '\\u003c').replace('>', '\\u003e').replace('&', '\\u0026')   # inert inside <script>
  page = _static('viz.html').replace('/*VIZ-CSS*/', _static('viz.css')).replace('/*VIZ-JS*/', _static('viz.js'))
  return page.replace('/*VIZ-DATA*/', blob)

# --- recording ---
def _recorded_build(rec: Recording, device, jaxpr, build):
  """`build(device, jaxpr)` with `rec` watching the passes and the rewrites; the kernels noted after."""
  from tinyjx import lower as lowering, rewrite
  lowering.observer = rewrite.recorder = rec
  try:
    exe = build(device, jaxpr)
  finally:
    lowering.observer = rewrite.recorder = None
  if rec.broken is None:
    try:
      rec.lowered(exe.program)
    except Exception as e:   # noqa: BLE001 - recorded as the recording's failure
      rec.fail(e)
  return exe

def record(f, *args, device=None) -> dict:
  """The page data of `jit(f)(*args)`: lowered here with every pass recorded, then run once with each kernel timed.

  `device` is a device or its name (default: the one `jit(f)` would run on). Errors propagate (this is the API,
  not the knob).
  """
  from tinyjx import devices, tree_util
  from tinyjx.transforms.jit import jit, JitFunction
  jf = f if isinstance(f, JitFunction) else jit(f)
  jaxpr = jf.trace(*args).jaxpr
  dev = device if device is not None and not isinstance(device, str) else devices.get(device or jf.device)
  if getattr(dev, 'compile_jaxpr', None) is None:
    raise ValueError(f"VIZ shows the compiled pipeline, and device {dev.name} does not compile; pass device='CPU' "
                     "or run with TINYJX_DEVICE=CPU")
  from tinyjx.lower import build_executable
  rec = Recording(jaxpr.name, dev, jaxpr.params, jaxpr.roots)
  exe = _recorded_build(rec, dev, jaxpr, build_executable)
  if rec.broken is not None: raise rec.broken
  leaves = tree_util.tree_leaves((args, {}))
  bufs = [dev.from_numpy(np.array(np.asarray(x), dtype=p.dtype.np, order='C').reshape(p.shape), p.dtype)
          for x, p in zip(leaves, jaxpr.params)]
  exe.timing_hook = rec.timed
  exe.run(bufs)
  return rec.data()

def page_for(f, *args, device=None) -> str:
  """The HTML page of `jit(f)(*args)` (see `record`)."""
  return html([record(f, *args, device=device)])

def write(f, *args, path=None, device=None) -> str:
  """Write the page of `jit(f)(*args)` to `path` (default: a new file in TINYJX_VIZ_DIR or a temporary directory);
  returns the path."""
  data = record(f, *args, device=device)
  return _write_page(data, path)

def _write_page(data: dict, path=None) -> str:
  path = str(path) if path is not None else os.path.join(_page_dir(), _file_name(data['name']))
  with open(path, 'w', encoding='utf-8') as fh: fh.write(html([data]))
  return path

_dir: list = []
_count = [0]
def _page_dir() -> str:
  want = config.get('TINYJX_VIZ_DIR')
  if want:
    os.makedirs(want, exist_ok=True)
    return want
  if not _dir: _dir.append(tempfile.mkdtemp(prefix='tinyjx-viz-'))
  return _dir[0]

def _file_name(name: str) -> str:
  _count[0] += 1
  return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name).strip('_') or 'program'}-{os.getpid()}-{_count[0]}.html"

# --- the knob: VIZ=1 / VIZ=file ---
_lock = threading.RLock()
_pages: list = []
_server: list = []       # [(server, address)] once serving
_warned: list = []

def _warn(e: BaseException) -> None:
  if _warned: return
  _warned.append(e)
  warnings.warn(f"VIZ: recording failed ({type(e).__name__}: {e}); the program runs as usual, without its page",
                RuntimeWarning, stacklevel=3)

def compile_recorded(device, jaxpr, build):
  """`compile_jaxpr` under VIZ: `build(device, jaxpr)` recorded; the page follows the executable's first run."""
  try:
    rec = Recording(jaxpr.name, device, jaxpr.params, jaxpr.roots)
  except Exception as e:   # noqa: BLE001 - VIZ must never break the computation
    _warn(e)
    return build(device, jaxpr)
  exe = _recorded_build(rec, device, jaxpr, build)
  if rec.broken is not None: _warn(rec.broken)
  else: exe.timing_hook = lambda times: _after_first_run(rec, times)
  return exe

def _after_first_run(rec: Recording, times: list) -> None:
  try:
    rec.timed(times)
    publish(rec.data())
  except Exception as e:   # noqa: BLE001
    _warn(e)

def publish(data: dict) -> None:
  """Show one program's page the way the VIZ knob asks: served (VIZ=1) or written as a file (VIZ=file)."""
  if str(config.get('VIZ')).lower() == 'file':
    print(f"VIZ: {_write_page(data)}")
    return
  with _lock:
    _pages.append(data)
    del _pages[:-MAX_PAGES]
    if _server: return
    try:
      _server.append(_start_server(config.get('TINYJX_VIZ_PORT')))
    except Exception as e:   # noqa: BLE001 - no port, no sockets: the file is the fallback
      print(f"VIZ: cannot serve on localhost ({type(e).__name__}: {e}); wrote {_write_page(data)}")
      return
  print(f"VIZ: {_server[0][1]}")

def _make_server(port: int):
  import http.server   # here, not at import: `import tinyjx` imports this module to register the recorder

  class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):   # noqa: N802 - the http.server name
      with _lock: body = html(list(_pages)).encode('utf-8')
      if self.path.split('?')[0] not in ('/', '/index.html'):
        self.send_error(404, "the VIZ page is at /")
        return
      self.send_response(200)
      self.send_header('Content-Type', 'text/html; charset=utf-8')
      self.send_header('Content-Length', str(len(body)))
      self.end_headers()
      self.wfile.write(body)
    def log_message(self, *a): pass
  return http.server.ThreadingHTTPServer(('127.0.0.1', port), Handler)

def _start_server(port: int) -> tuple:
  server = _make_server(port)
  threading.Thread(target=server.serve_forever, name='tinyjx-viz', daemon=True).start()
  return server, f"http://127.0.0.1:{server.server_address[1]}/"

def stop() -> None:
  """Stop serving and forget the recorded pages (the next VIZ=1 page starts a new server)."""
  with _lock:
    for server, _ in _server:
      server.shutdown()
      server.server_close()
    _server.clear()
    _pages.clear()

from tinyjx import lower as _lowering
_lowering.viz_compile = compile_recorded   # the lowering hands jitted programs here while VIZ is on
