"""The VIZ page: its data for known programs, its self-containment, the VIZ knob (serve, file, fallbacks), and
its rendering in headless Chromium (skipped, with the reason, where Debian's `chromium` is not installed)."""
import os, re, shutil, subprocess, urllib.request, warnings
import numpy as np
import pytest
import tinyjx as jax
import tinyjx.numpy as jnp
from tinyjx import viz
from tinyjx.lower import PASSES

CHROMIUM = shutil.which('chromium') or ('/usr/bin/chromium' if os.path.exists('/usr/bin/chromium') else None)

def softmax(x):
  e = jnp.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

def mlp_loss(p, x):
  h = jnp.tanh(x @ p['w1'] + p['b1'])
  return ((h @ p['w2']) ** 2).mean()

def mlp_args():
  rng = np.random.default_rng(0)
  p = {'w1': jnp.asarray(rng.normal(size=(3, 5)).astype(np.float32)), 'b1': jnp.zeros(5),
       'w2': jnp.asarray(rng.normal(size=(5, 2)).astype(np.float32))}
  return p, jnp.asarray(rng.normal(size=(4, 3)).astype(np.float32))

@pytest.fixture(scope="module")
def pages():
  from tinyjx.devices.cpu import find_compiler, NoCompilerError
  try:
    find_compiler()
  except NoCompilerError as e:
    pytest.skip(str(e))
  x = jnp.asarray(np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32))
  return {'softmax': (viz.record(softmax, x, device='CPU'), jax.make_jaxpr(softmax)(x)),
          'grad': (viz.record(jax.grad(mlp_loss), *mlp_args(), device='CPU'),
                   jax.make_jaxpr(jax.grad(mlp_loss))(*mlp_args()))}

def n_equations(jaxpr) -> int:
  return len(str(jaxpr).splitlines()) - 2      # the printer: a header line, one line per equation, a footer

@pytest.mark.parametrize('which', ['softmax', 'grad'])
def test_page_data_has_every_stage(pages, which):
  data, jaxpr = pages[which]
  assert data['n_eqns'] == n_equations(jaxpr)
  assert sum(data['nodes'][str(i)]['kind'] == 'eqn' for i in data['jaxpr']['nodes']) == data['n_eqns']
  assert [p['name'] for p in data['passes']] == [name for name, _ in PASSES]
  for p in data['passes']:
    assert set(p['added']) <= set(p['graph']['nodes'])
    for rw in p['rewrites']:     # each rule's added/removed counts add up to the call's whole change
      assert sum(r['added'] - r['removed'] for r in rw['rules']) == rw['after'] - rw['before']
  assert [rw['name'] for p in data['passes'][:3] for rw in p['rewrites']] == ['simplify', 'decompose']
  assert data['kernels']
  for k in data['kernels']:
    assert k['eqns'] and k['nodes'] and f" {k['name']}(" in k['source'] and k['source'].rstrip().endswith('}')
  timed = [t for t in data['timeline'] if t['kind'] == 'kernel']
  assert sorted(t['kernel'] for t in timed) == list(range(len(data['kernels'])))
  assert all(t['dur_us'] > 0 and t['start_us'] >= 0 for t in timed)

def test_rule_counts_of_the_decompose_pass(pages):
  data, _ = pages['grad']
  decompose = next(p for p in data['passes'] if p['name'] == 'decompose')
  rules = {r['rule']: r for rw in decompose['rewrites'] for r in rw['rules']}
  assert rules['dot_general']['fires'] > 0 and rules['dot_general']['added'] > 0   # matmuls become mul + sum
  assert decompose['added'] and len(decompose['graph']['nodes']) > len(data['jaxpr']['nodes'])
  assert len(data['kernels']) > 1

def test_page_is_self_contained(pages):
  page = viz.html([pages['softmax'][0], pages['grad'][0]])
  assert re.findall(r'https?://', page) == []
  assert not re.search(r'<(link|img|iframe)\b|<script[^>]+src=|@import|url\(', page)
  assert '</script>' not in page.split('id="viz-data">', 1)[1].split('</script>', 1)[0]

def _knob_program(scale):
  x = jnp.asarray(np.arange(6, dtype=np.float32))
  return jax.jit(lambda v: jnp.tanh(v * scale) + scale), x, np.tanh(np.arange(6, dtype=np.float32) * scale) + scale

def test_viz_file_writes_a_page_per_function(tmp_path, capsys, cpu):
  f, x, want = _knob_program(1.625)
  with jax.Context(VIZ='file', TINYJX_VIZ_DIR=str(tmp_path), TINYJX_DEVICE='CPU'):
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-6)
    f(x)                                      # a cache hit: no second page
  paths = re.findall(r'VIZ: (\S+\.html)', capsys.readouterr().out)
  assert len(paths) == 1 and os.path.dirname(paths[0]) == str(tmp_path)
  assert 'viz-data' in open(paths[0]).read()

def test_viz_serves_on_localhost(capsys, cpu):
  viz.stop()
  f, x, want = _knob_program(2.375)
  try:
    with jax.Context(VIZ='1', TINYJX_DEVICE='CPU'):
      np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-6)
    address = re.findall(r'VIZ: (http://127\.0\.0\.1:\d+/)', capsys.readouterr().out)
    assert len(address) == 1
    page = urllib.request.urlopen(address[0], timeout=10).read().decode()
    assert '"programs":[{"name":"jit(' in page and 'id="viz-data"' in page
  finally:
    viz.stop()

def test_viz_without_a_port_writes_the_file(tmp_path, capsys, monkeypatch, cpu):
  viz.stop()
  def no_port(port): raise OSError("no port for you")
  monkeypatch.setattr(viz, '_make_server', no_port)
  f, x, want = _knob_program(3.125)
  with jax.Context(VIZ='1', TINYJX_VIZ_DIR=str(tmp_path), TINYJX_DEVICE='CPU'):
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-6)
  out = capsys.readouterr().out
  assert 'cannot serve' in out and 'http' not in out
  assert os.path.exists(re.findall(r'wrote (\S+\.html)', out)[0])
  viz.stop()

def test_a_failing_recording_warns_once_and_computes(tmp_path, monkeypatch, cpu):
  from tinyjx.viz.recording import Recording
  def broken(self, st): raise RuntimeError("recorder bug")
  monkeypatch.setattr(Recording, 'finish_pass', broken)
  monkeypatch.setattr(viz, '_warned', [])
  f, x, want = _knob_program(4.875)
  g, _, want_g = _knob_program(5.5)
  with warnings.catch_warnings(record=True) as caught, jax.Context(VIZ='file', TINYJX_VIZ_DIR=str(tmp_path),
                                                                  TINYJX_DEVICE='CPU'):
    warnings.simplefilter('always')
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g(x)), want_g, rtol=1e-6)
  assert [str(w.message) for w in caught if 'VIZ' in str(w.message)] == [
    "VIZ: recording failed (RuntimeError: recorder bug); the program runs as usual, without its page"]
  assert os.listdir(tmp_path) == []

def _chromium(tmp_path, url, *flags):
  base = [CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
          '--disable-component-update', '--disable-sync', '--no-first-run', f'--user-data-dir={tmp_path / "profile"}']
  return subprocess.run(base + list(flags) + [url], capture_output=True, text=True, timeout=90)

def _rendered(tmp_path, url) -> str:
  """The DOM Chromium built from the page, without the script's own text (which names the same classes)."""
  dom = _chromium(tmp_path, url, '--dump-dom').stdout
  return re.sub(r'<script\b.*?</script>', '', dom, flags=re.S)

@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_page_renders_in_chromium(pages, tmp_path):
  data, _ = pages['grad']
  path = tmp_path / 'grad.html'
  path.write_text(viz.html([data]), encoding='utf-8')
  dom = _rendered(tmp_path, f'file://{path}')
  assert len(re.findall(r'<g class="node\b', dom)) == len(data['jaxpr']['nodes'])
  assert len(re.findall(r'class="pass-entry\b', dom)) == len(data['passes']) + 1
  for p in data['passes']: assert f'data-pass="{data["passes"].index(p)}">{p["name"]}' in dom.replace('&amp;', '&')
  assert len(re.findall(r'<details class="kernel"', dom)) == len(data['kernels'])
  assert len(re.findall(r'class="tl-bar tl-kernel"', dom)) == len(data['kernels'])
  assert len(re.findall(r'class="kernel-src"', dom)) == len(data['kernels'])
  after = _rendered(tmp_path, f'file://{path}#pass=decompose')   # the pass selector's view
  assert 'class="rule-row"><td>dot_general</td>' in after
  decompose = next(p for p in data['passes'] if p['name'] == 'decompose')
  assert len(re.findall(r'<g class="node[^"]*\badded\b', after)) == len(decompose['added'])
  png = tmp_path / 'viz.png'
  _chromium(tmp_path, f'file://{path}', f'--screenshot={png}', '--window-size=1400,1000')
  assert png.exists() and png.stat().st_size > 20_000
  assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
