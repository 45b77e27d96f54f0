"""The house is one-way (DESIGN section 12, docs/internals.md): no import circles, and no import up the floors.

Imports are read with `ast` from every module of `tinyjx/` and `nn/`, at module level and inside functions alike
(a function-level import is still an edge of the house; it only runs later). Each module belongs to one floor;
a module may import its own floor (as long as no circle forms) and any floor below. Two floors share a level
and may not import each other: the graph transforms (rules on jaxprs) and the backend (lowering and devices).
A lower floor that needs a higher one at run time gets a function registered with it, in one visible place.
And no module uses another module's private names (`_x`, by `from m import _x` or `m._x`), except a package's
own modules using its private members: what one module offers another is public.
"""
import ast, os
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (level, floor name, module prefixes), top to bottom; a prefix matches the module and its submodules
FLOORS = [
  (6, 'nn', ['nn']),
  (5, 'tools', ['tinyjx', 'tinyjx.explain', 'tinyjx.viz', 'tinyjx.debug', 'tinyjx.test_util', 'tinyjx.scipy',
                'tinyjx.nn', 'tinyjx.nn.initializers']),
  (4, 'api', ['tinyjx.numpy', 'tinyjx.lax', 'tinyjx.lax_primitives', 'tinyjx.lax_conv', 'tinyjx.lax.linalg', 'tinyjx.random',
              'tinyjx.collectives', 'tinyjx.devices_api', 'tinyjx.distributed', 'tinyjx.transforms.jit',
              'tinyjx.transforms.pmap']),
  (3, 'transforms', ['tinyjx.transforms']),
  (3, 'backend', ['tinyjx.lower', 'tinyjx.devices']),
  (2, 'core', ['tinyjx.array', 'tinyjx.tracing']),
  (1, 'ir', ['tinyjx.uop', 'tinyjx.dtypes', 'tinyjx.rewrite', 'tinyjx.settings', 'tinyjx.counters',
             'tinyjx.provenance', 'tinyjx.memo', 'tinyjx.tree_util', 'tinyjx.tree']),
]
# what nn/ may use: tinyjx's public API, the modules a JAX user imports
PUBLIC = {'tinyjx', 'tinyjx.numpy', 'tinyjx.lax', 'tinyjx.lax.linalg', 'tinyjx.random', 'tinyjx.nn', 'tinyjx.nn.initializers',
          'tinyjx.tree_util', 'tinyjx.tree',
          'tinyjx.scipy', 'tinyjx.debug', 'tinyjx.dtypes', 'tinyjx.test_util'}

def module_files() -> dict:
  mods = {}
  for top in ('tinyjx', 'nn'):
    for d, _, files in os.walk(os.path.join(ROOT, top)):
      for f in files:
        if f.endswith('.py'):
          rel = os.path.relpath(os.path.join(d, f), ROOT)[:-3].replace(os.sep, '.')
          mods[rel[:-len('.__init__')] if rel.endswith('.__init__') else rel] = os.path.join(d, f)
  return mods

def imports_of(mod: str, path: str, mods: dict) -> dict:
  """{imported module of the house: first line number}, module-level and function-level imports alike."""
  out, is_pkg = {}, path.endswith('__init__.py')
  for node in ast.walk(ast.parse(open(path).read())):
    if isinstance(node, ast.Import): names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        parts = mod.split('.')[:len(mod.split('.')) - node.level + (1 if is_pkg else 0)]
        base = '.'.join(parts + ([node.module] if node.module else []))
      names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    else: continue
    for name in names:
      while name and name not in mods: name = name.rpartition('.')[0]
      if name and name != mod: out.setdefault(name, node.lineno)
  return out

def private_uses(mod: str, path: str, mods: dict) -> list:
  """'mod:line uses owner._name' for each private name of another module of the house that `mod` reads."""
  tree, out = ast.parse(open(path).read()), []
  def foreign(owner: str) -> bool: return owner != mod and not mod.startswith(owner + '.')
  aliases = {}   # local name -> module of the house it is bound to
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
      for a in node.names:
        if f"{node.module}.{a.name}" in mods: aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif a.name.startswith('_') and not a.name.startswith('__') and node.module in mods and foreign(node.module):
          out.append(f"{mod}:{node.lineno} uses {node.module}.{a.name}")
    elif isinstance(node, ast.Import):
      for a in node.names:
        if a.asname and a.name in mods: aliases[a.asname] = a.name
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and node.attr.startswith('_') and not node.attr.startswith('__') \
       and isinstance(node.value, ast.Name) and node.value.id in aliases and foreign(aliases[node.value.id]):
      out.append(f"{mod}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
  return out

def floor_of(mod: str):
  best = None
  for level, name, prefixes in FLOORS:
    for p in prefixes:
      if (mod == p or mod.startswith(p + '.')) and (best is None or len(p) > best[0]): best = (len(p), level, name)
  return None if best is None else best[1:]

def import_graph() -> dict:
  mods = module_files()
  return {m: imports_of(m, p, mods) for m, p in mods.items()}

def circles(graph: dict) -> list:
  """The strongly connected components of more than one module (Tarjan), each a sorted list."""
  index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
  def visit(v):
    index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); on.add(v)
    for w in graph.get(v, ()):
      if w not in index: visit(w); low[v] = min(low[v], low[w])
      elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop(); on.discard(w); comp.append(w)
        if w == v: break
      if len(comp) > 1: found.append(sorted(comp))
  for v in sorted(graph):
    if v not in index: visit(v)
  return found

def upward(graph: dict) -> list:
  """Every import that runs up the floors (or across to the sibling floor), as readable lines."""
  bad = []
  for mod, targets in sorted(graph.items()):
    level, name = floor_of(mod)
    for t, line in sorted(targets.items()):
      tl, tn = floor_of(t)
      if name == 'nn' and tn != 'nn' and t not in PUBLIC:
        bad.append(f"{mod}:{line} imports {t}, which is not tinyjx's public API")
      elif tl > level or (tl == level and tn != name):
        bad.append(f"{mod}:{line} ({name}) imports {t} ({tn})")
  return bad

def test_every_module_has_a_floor():
  assert [m for m in module_files() if floor_of(m) is None] == []

def test_no_import_circles():
  found = circles(import_graph())
  assert found == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)

def test_no_import_runs_up_the_floors():
  bad = upward(import_graph())
  assert bad == [], "imports that run up the floors:\n" + "\n".join(bad)

def test_no_private_name_is_used_across_modules():
  mods = module_files()
  bad = [u for m, p in mods.items() for u in private_uses(m, p, mods)]
  assert bad == [], "private names used across modules (make them public or keep them home):\n" + "\n".join(bad)

def test_the_private_name_check_catches_both_forms(tmp_path):
  (tmp_path / 'm.py').write_text("from tinyjx.tracing import _helper\nfrom tinyjx import tracing as t\n"
                                 "def f(): return t._other() + _helper()\n")
  mods = {'tinyjx.tracing': '', 'tinyjx.explain': ''}
  assert private_uses('tinyjx.explain', str(tmp_path / 'm.py'), mods) == [
    "tinyjx.explain:1 uses tinyjx.tracing._helper", "tinyjx.explain:3 uses tinyjx.tracing._other"]
  # a package's own modules may share its private members
  assert private_uses('tinyjx.tracing.sub', str(tmp_path / 'm.py'), mods) == []

def test_the_checks_catch_a_circle_and_an_upward_import():
  graph = {'tinyjx.uop': {'tinyjx.array': 1}, 'tinyjx.array': {'tinyjx.uop': 1},
           'tinyjx.transforms.ad': {'tinyjx.lower': 3}, 'tinyjx.lower': {}, 'nn.optim': {'tinyjx.array': 2}}
  assert circles(graph) == [['tinyjx.array', 'tinyjx.uop']]
  assert upward(graph) == ["nn.optim:2 imports tinyjx.array, which is not tinyjx's public API",
                           "tinyjx.transforms.ad:3 (transforms) imports tinyjx.lower (backend)",
                           "tinyjx.uop:1 (ir) imports tinyjx.array (core)"]

def test_function_level_imports_count(tmp_path):
  (tmp_path / 'm.py').write_text("def f():\n  from tinyjx import numpy as jnp\n  return jnp\n")
  assert imports_of('tinyjx.uop', str(tmp_path / 'm.py'), {'tinyjx.numpy': '', 'tinyjx.uop': ''}) == {'tinyjx.numpy': 2}
