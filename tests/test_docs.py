"""The docs run: every ```python block of docs/*.md is executed, the blocks of one document in order in one namespace.

Each document runs in a subprocess of its own (a fresh interpreter, as a reader would start), with four virtual CPU
devices (`TINYJX_CPU_DEVICES=4`, for the pmap sections), the repository on `PYTHONPATH`, and a temporary working
directory (files a document writes, such as checkpoints or VIZ pages, land there). A failure names the document, the
block's number and line, and the traceback. Blocks fenced as ```text (output), ```bash or ```py are not run.

A block may be marked `<!-- doc-test: skip REASON -->` on the line before its fence: it is not run, and a test item
of its own is skipped with that reason (so skips are visible in the test report, never silent). docs/devices.md has
its one python block run by tests/test_device_contract.py, which checks its output; it is not run twice here.

    python -m pytest tests/test_docs.py -rs
    python tests/test_docs.py docs/tutorial.md      # run one document, printing each block's output
"""
from __future__ import annotations
import json, os, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / 'docs'
RUN_ELSEWHERE = {'devices.md': 'tests/test_device_contract.py runs its python block and checks the output'}
TIMEOUT_S = 240
FENCE = re.compile(r"^```(\S*)[ \t]*$")
SKIP = re.compile(r"^<!--\s*doc-test:\s*skip\s+(.*?)\s*-->\s*$")

def blocks(path: Path) -> list[dict]:
  """The ```python blocks of a markdown file: [{'n': 1-based number, 'line': fence line, 'code', 'skip': reason}]."""
  out, lines, i = [], path.read_text().splitlines(), 0
  while i < len(lines):
    m = FENCE.match(lines[i])
    if not m or not m.group(1):
      i += 1
      continue
    end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith('```')), None)
    if end is None: raise ValueError(f"{path.name}:{i + 1}: a ``` fence that is never closed")
    if m.group(1) == 'python':
      skip = SKIP.match(lines[i - 1]) if i else None
      out.append({'n': len(out) + 1, 'line': i + 1, 'code': "\n".join(lines[i + 1:end]) + "\n",
                  'skip': skip.group(1) if skip else None})
    i = end + 1
  return out

# The program each subprocess runs: the blocks in order, in one namespace; the first error ends it.
RUNNER = r'''
import json, sys, traceback
doc, blocks = json.load(sys.stdin)
ns = {'__name__': '__main__'}
for b in blocks:
  if b['skip']: continue
  print(f"--- {doc} block {b['n']} (line {b['line']})", flush=True)
  try:
    exec(compile(b['code'], f"{doc} block {b['n']} (line {b['line']})", 'exec'), ns)
  except BaseException:
    sys.stdout.flush()
    print(f"FAILED: {doc} block {b['n']} (line {b['line']}):\n{traceback.format_exc()}", file=sys.stderr)
    sys.exit(1)
  sys.stdout.flush()
'''

def run_document(path: Path, cwd: Path, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
  env = dict(os.environ, TINYJX_CPU_DEVICES='4', PYTHONPATH=os.pathsep.join(
    [str(ROOT)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]))
  env.pop('DEBUG', None)
  env.pop('VIZ', None)
  return subprocess.run([sys.executable, '-c', RUNNER], input=json.dumps([path.name, blocks(path)]), text=True,
                        capture_output=True, cwd=cwd, env=env, timeout=timeout)

DOC_FILES = sorted(DOCS.glob('*.md'))

@pytest.mark.parametrize('path', DOC_FILES, ids=[p.name for p in DOC_FILES])
def test_document_runs(path, tmp_path):
  if path.name in RUN_ELSEWHERE: pytest.skip(f"{path.name}: {RUN_ELSEWHERE[path.name]}")
  code = [b for b in blocks(path) if not b['skip']]
  if not code: pytest.skip(f"{path.name} has no python blocks")
  try:
    r = run_document(path, tmp_path)
  except subprocess.TimeoutExpired as e:
    pytest.fail(f"{path.name}: its blocks did not finish in {TIMEOUT_S} s; output so far:\n{e.stdout}")
  assert r.returncode == 0, f"{r.stderr}\n(output of {path.name} up to the failure:)\n{r.stdout[-4000:]}"

SKIPPED = [(p, b) for p in DOC_FILES if p.name not in RUN_ELSEWHERE for b in blocks(p) if b['skip']]

if SKIPPED:   # one skipped item per marked block, with its reason
  @pytest.mark.parametrize('path,block', SKIPPED, ids=[f"{p.name}-block{b['n']}" for p, b in SKIPPED])
  def test_skipped_block(path, block):
    pytest.skip(f"{path.name} block {block['n']} (line {block['line']}) is not run: {block['skip']}")

def test_the_extractor_finds_blocks_and_skips_others(tmp_path):
  doc = tmp_path / 'x.md'
  doc.write_text("a\n```python\nx = 1\n```\n```text\nnot run\n```\n<!-- doc-test: skip needs a GPU -->\n"
                 "```python\ny = 2\n```\n```bash\necho no\n```\n```python\nprint(x)\n```\n")
  found = blocks(doc)
  assert [(b['n'], b['line'], b['skip']) for b in found] == [(1, 2, None), (2, 9, 'needs a GPU'), (3, 15, None)]
  assert found[0]['code'] == "x = 1\n"

def test_a_failing_block_is_named(tmp_path):
  doc = tmp_path / 'bad.md'
  doc.write_text("```python\nx = 1\n```\n\n```python\nraise ValueError(f'boom {x}')\n```\n")
  r = run_document(doc, tmp_path, timeout=60)
  assert r.returncode == 1 and 'bad.md block 2 (line 5)' in r.stderr and 'ValueError: boom 1' in r.stderr

def test_the_device_doc_is_run_by_the_contract_test():
  # if this fails, docs/devices.md grew a second python block: run it here instead (drop it from RUN_ELSEWHERE)
  assert len(blocks(DOCS / 'devices.md')) == 1
  assert "docs', 'devices.md'" in (ROOT / 'tests' / 'test_device_contract.py').read_text()

if __name__ == '__main__':
  import tempfile
  for name in sys.argv[1:]:
    with tempfile.TemporaryDirectory() as d:
      r = run_document(Path(name).resolve(), Path(d), timeout=600)
      print(r.stdout, end='')
      print(r.stderr, end='', file=sys.stderr)
