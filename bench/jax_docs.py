"""jax_docs: run the code cells of JAX's own tutorials under JAX and under tinyjx (only the imports changed) and
count the cells that give JAX's results. This is how issue 15 ("real JAX programs run unchanged") is measured.

Usage: `python3 bench/jax_docs.py --jax-repo PATH --jax-python PYTHON [--only NAME] [--show N]`, where PATH is a
checkout of github.com/jax-ml/jax (the tutorials are read from it, never copied into this repository) and PYTHON is
an interpreter that has JAX installed (a scratch virtual environment; JAX is never a dependency of tinyjx). The
tinyjx side runs under this interpreter.

Each tutorial runs in two fresh processes, one per engine, its cells in order in one namespace, as a notebook runs
them. For each cell the runner records what a reader sees: what it printed, the repr of its last expression, and
the exception it raised, if any. `%timeit` lines run their statement once; `!shell` lines and other magics are
dropped. A cell matches when both engines raised or both did not, and the numbers in what each displayed agree
(rtol 1e-4, atol 1e-6) in count and value. A cell where JAX itself raised unexpectedly (a package this environment
lacks, such as matplotlib) is counted apart, not as a match.
"""
from __future__ import annotations
import argparse, ast, contextlib, io, json, math, os, re, subprocess, sys, tempfile

TUTORIALS = {
  'key-concepts': 'docs/key-concepts.md', 'jit-compilation': 'docs/jit-compilation.md',
  'automatic-vectorization': 'docs/automatic-vectorization.md',
  'automatic-differentiation': 'docs/automatic-differentiation.md',
  'autodiff_cookbook': 'docs/notebooks/autodiff_cookbook.md', 'pytrees': 'docs/pytrees.md',
  'custom_pytrees': 'docs/custom_pytrees.md', 'control-flow': 'docs/control-flow.md',
  'random-numbers': 'docs/random-numbers.md', 'stateful-computations': 'docs/stateful-computations.md',
  'Common_Gotchas': 'docs/notebooks/Common_Gotchas_in_JAX.md',
  'Custom_derivative_rules': 'docs/notebooks/Custom_derivative_rules_for_Python_code.md',
}
NUMBER = re.compile(r'[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|\bnan\b|[-+]?\binf\b')

def code_cells(markdown: str) -> list[dict]:
  """The `{code-cell}` blocks of a MyST notebook, with whether the notebook expects the cell to raise."""
  cells, lines, i = [], markdown.splitlines(), 0
  while i < len(lines):
    if not lines[i].startswith('```{code-cell}'):
      i += 1
      continue
    i, meta, body = i + 1, '', []
    while i < len(lines) and lines[i].startswith(':'):
      meta, i = meta + lines[i], i + 1
    while i < len(lines) and not lines[i].startswith('```'):
      body, i = body + [lines[i]], i + 1
    cells.append({'source': '\n'.join(body), 'raises': 'raises-exception' in meta})
  return cells

def strip_magics(source: str) -> str:
  """Notebook magics as plain Python: `%timeit [opts] stmt` runs stmt once; other magics and shell lines go."""
  out = []
  for line in source.splitlines():
    s = line.lstrip()
    if s.startswith('%timeit'):
      stmt = re.sub(r'^%timeit(\s+-\w+\s*\d*)*\s+', '', s)
      out.append(line[:len(line) - len(s)] + stmt)
    elif not s.startswith(('%', '!')):
      out.append(line)
  return '\n'.join(out)

def to_tinyjx(source: str) -> str:
  """Only the import lines change: `jax` becomes `tinyjx` (bound to the same names the cell uses)."""
  def one(m):
    indent, stmt = m.group(1), m.group(2)
    if (a := re.fullmatch(r'import jax((?:\.\w+)*)\s+as\s+(\w+)', stmt)):
      return f"{indent}import tinyjx{a.group(1)} as {a.group(2)}"
    if (a := re.fullmatch(r'import jax((?:\.\w+)*)', stmt)):
      return f"{indent}import tinyjx{a.group(1)}; import tinyjx as jax"
    return indent + re.sub(r'^from jax\b', 'from tinyjx', stmt)
  return re.sub(r'^([ \t]*)((?:import|from) jax\b[^\n;]*)', one, source, flags=re.M)

def run_cell(source: str, ns: dict) -> dict:
  """Run one cell as a notebook would; what it printed, its last expression's repr, its exception."""
  out, shown, error = io.StringIO(), '', None
  try:
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
      exec(compile(tree, '<cell>', 'exec'), ns)
      if last is not None:
        value = eval(compile(ast.Expression(last.value), '<cell>', 'eval'), ns)
        shown = '' if value is None else repr(value)
  except BaseException as e:  # a cell's failure is data here, never the runner's
    error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
  return {'printed': out.getvalue(), 'shown': shown, 'error': error}

def run_notebook(path: str, engine: str) -> list[dict]:
  """Child process: every cell of one tutorial in order, under `engine` ('jax' or 'tinyjx')."""
  cells = code_cells(open(path).read())
  ns: dict = {'__name__': '__main__'}
  results = []
  for c in cells:
    src = strip_magics(c['source'])
    results.append(run_cell(to_tinyjx(src) if engine == 'tinyjx' else src, ns) | {'raises': c['raises']})
  return results

def numbers(text: str) -> list[float]:
  text = re.sub(r'0x[0-9a-fA-F]+', '', text)   # object addresses differ between any two runs
  return [float(t) for t in NUMBER.findall(text)]

def same(a: dict, b: dict) -> bool:
  if (a['error'] is None) != (b['error'] is None): return False
  na, nb = numbers(a['printed'] + a['shown']), numbers(b['printed'] + b['shown'])
  return len(na) == len(nb) and all(math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-6) or (x != x and y != y)
                                    for x, y in zip(na, nb))

def in_child(python: str, path: str, engine: str) -> list[dict]:
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, PYTHONPATH=root, JAX_PLATFORMS='cpu', MPLBACKEND='Agg')
    cmd = [python, os.path.abspath(__file__), '--child', path, engine, os.path.join(d, 'out.json')]
    subprocess.run(cmd, env=env, cwd=d, timeout=1800, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, 'out.json')) as f: return json.load(f)

def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument('--jax-repo', required=True)
  ap.add_argument('--jax-python', required=True, help='an interpreter with JAX installed')
  ap.add_argument('--only', action='append', choices=sorted(TUTORIALS))
  ap.add_argument('--show', type=int, default=3, help='characters of each mismatch to print (in hundreds)')
  args = ap.parse_args()
  total = matched = jax_failed = 0
  for name in args.only or TUTORIALS:
    path = os.path.join(args.jax_repo, TUTORIALS[name])
    ref, got = in_child(args.jax_python, path, 'jax'), in_child(sys.executable, path, 'tinyjx')
    broken = [i for i, r in enumerate(ref) if r['error'] and not r['raises']]
    ok = [i for i, (r, g) in enumerate(zip(ref, got)) if i not in broken and same(r, g)]
    total, matched, jax_failed = total + len(ref), matched + len(ok), jax_failed + len(broken)
    print(f"{name:26s} {len(ok):3d}/{len(ref) - len(broken):3d} match" + (f"  ({len(broken)} fail under JAX here)"
                                                                         if broken else ''))
    for i, (r, g) in enumerate(zip(ref, got)):
      if i in ok or i in broken: continue
      w = args.show * 100
      print(f"  cell {i}: jax {(r['error'] or r['printed'] + r['shown'])[:w]!r}\n"
            f"          tinyjx {(g['error'] or g['printed'] + g['shown'])[:w]!r}")
  print(f"total: {matched} of {total - jax_failed} cells give JAX's results ({jax_failed} failed under JAX itself)")

if __name__ == '__main__':
  if sys.argv[1:2] == ['--child']:
    with open(sys.argv[4], 'w') as f: json.dump(run_notebook(sys.argv[2], sys.argv[3]), f)
  else:
    main()
