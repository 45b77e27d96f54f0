"""Differential fuzzing in CI: a fixed number of random programs (fixed seed) under random transform stacks, each
run on the compiled CPU device and on the PYTHON reference device. `python bench/fuzz.py --count 5000` runs
thousands, on any device, and against JAX where it is installed. Also: the fuzzer catches a wrong rule and shrinks
the program to a few lines, and the printed program runs on its own."""
import os, random, subprocess, sys
import pytest
import tinyjx
from tinyjx.devices import python as reference
from tinyjx.uop import Ops

sys.path.insert(0, os.path.dirname(__file__))
import fuzz  # noqa: E402

COUNT = int(60 * float(os.environ.get('TINYJX_TEST_EXAMPLES', '1')))

def test_random_programs_agree_with_the_reference(cpu):
  stats = fuzz.fuzz(COUNT, seed=20261203, report=lambda text: print(text))
  print(f"{stats['programs']} programs, {stats['invalid']} refused alike, {len(stats['failures'])} failures")
  assert not stats['failures'], "\n\n".join(f"{why}\n{src}" for src, why in stats['failures'])
  assert stats['invalid'] <= stats['programs'] // 10      # the generator draws valid programs

def test_every_transform_and_op_family_is_drawn():
  r = random.Random(0)
  kinds, texts, dts, axes = set(), [], set(), set()
  for k in range(300):
    p = fuzz.generate(r, k)
    kinds.update(t[0] for t in p.transforms)
    texts += [s.text for s in p.stmts]
    dts.update(d for _, d in p.avals)
    if fuzz.shapes_through(p, p.transforms) is not None:
      axes.update(a if isinstance(t[1], tuple) else ('int', a) for t in p.transforms if t[0] == 'vmap'
                  for a in (t[1] if isinstance(t[1], tuple) else (t[1],)))
  assert kinds >= {'jit', 'grad', 'vmap', 'jvp', 'vjp', 'jacfwd', 'jacrev', 'pmap', 'checkpoint'}
  assert dts >= {'float32', 'float16', 'int32'}
  assert {None, 0, 1, -1, ('int', 0), ('int', -1)} <= axes  # in_axes of every form: per argument, None, one int
  blob = "\n".join(texts)
  for piece in ('lax.fori_loop', 'lax.cond', 'lax.scan', 'lax.while_loop', 'lax.switch', 'jax.random', '@',
                '.at[', 'jnp.sum', 'jnp.transpose', 'jnp.einsum', 'jnp.concatenate', '[jnp.array(',
                'lax.conv_general_dilated', 'feature_group_count=2', 'rhs_dilation=(2'):
    assert piece in blob, piece

def test_a_wrong_rule_is_caught_and_shrunk(monkeypatch, cpu):
  # make the reference's sin wrong: a program using sin must now differ, and shrink to the statement with sin
  monkeypatch.setitem(reference.python_rules, Ops.SIN, lambda n, x: reference.np.sin(x) + 0.5)
  p = fuzz.Program([((3,), 'float32'), ((2, 2), 'float32')],
                   [fuzz.Stmt('jnp.cos({0})', (0,), (3,), 'float32'), fuzz.Stmt('jnp.sin({0})', (2,), (3,), 'float32'),
                    fuzz.Stmt('{0} * {1}', (3, 2), (3,), 'float32'), fuzz.Stmt('jnp.sum({0}, axis=0, keepdims=False)',
                                                                               (4,), (), 'float32')],
                   5, [('jit',), ('vmap', (0, None), 0, 2)], seed=3)
  assert fuzz.check(p) is not None
  small = fuzz.shrink(p, lambda q: fuzz.check(q) is not None)
  assert len(small.stmts) <= 2 and any('sin' in s.text for s in small.stmts), fuzz.source(small)
  assert len(small.transforms) == 0

def test_a_printed_program_runs_on_its_own(tmp_path):
  p = fuzz.generate(random.Random(4), 4)
  path = tmp_path / "prog.py"
  path.write_text(fuzz.source(p))
  env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(tinyjx.__file__)),
             TINYJX_CPU_DEVICES=str(fuzz.DEVICES))
  out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, env=env)
  assert out.returncode == 0, out.stderr
  assert out.stdout.split()[0] in ('float32', 'float16', 'int32', 'bool')

# Programs the fuzzer found failing (shrunk), kept as regression tests: each must agree with the reference now.
FOUND = {
  # GCC 12 miscompiled the fused kernel (outer loop vectorized after the 3-long inner loop was unrolled): a row
  # came out zero. Fixed by TJX_KEEP_LOOP in the C prelude.
  'gcc_outer_loop_vectorization': fuzz.Program(
    [((5, 2, 5), 'float32'), ((5, 2), 'float32')],
    [fuzz.Stmt('jnp.hypot({0}, {0})', (1,), (5, 2), 'float32'),
     fuzz.Stmt('{0} / (jnp.abs({0}) + 1.0)', (2,), (5, 2), 'float32'),
     fuzz.Stmt('jnp.pad({0}, ((1, 0), (0, 1)))', (3,), (6, 3), 'float32'),
     fuzz.Stmt('jnp.where({0} > {0} + 0.25, {0}, {0} * 2.0)', (4,), (6, 3), 'float32')], 5, [], seed=700190),
  # GCC 12 again: the loop over a 1-wide convolution's two output channels (each a two-term sum in a loop of one) was
  # unrolled and the loop over the batch vectorized, wrongly: channel 1 came out wrong. TJX_KEEP_LOOP now goes before
  # a short loop around one-iteration loops too.
  'gcc_outer_loop_vectorization_around_a_loop_of_one': fuzz.Program(
    [((2, 1, 2), 'float32')],
    [fuzz.Stmt('{0} / (jnp.abs({0}) + 1.0)', (0,), (2, 1, 2), 'float32'),
     fuzz.Stmt('jnp.concatenate([{0}, {0} * 2.0], axis=0)', (1,), (4, 1, 2), 'float32'),
     fuzz.Stmt("lax.conv_general_dilated({0}, jnp.cos(jnp.arange(4, dtype=jnp.float32).reshape((2, 1, 2))) * "
               "jnp.mean({0}), (1,), 'VALID', rhs_dilation=(1,), feature_group_count=1)", (2,), (4, 2, 1), 'float32')],
    3, [], seed=5300190),
  # jit of the identity on a 0-d array returned shape (1,)
  'jit_identity_of_a_scalar': fuzz.Program([((), 'float32')], [], 0, [('jit',)], seed=200047),
  # pmap of a function returning a per-device scalar input returned shape (2, 1)
  'pmap_passes_a_scalar_through': fuzz.Program([((1, 2), 'float16'), ((2, 4), 'int32'), ((), 'float32')], [], 2,
                                               [('pmap', (0, 0, 0), 0, 2)], seed=200155),
}

@pytest.mark.parametrize("name", sorted(FOUND))
def test_programs_the_fuzzer_found(name, cpu):
  assert fuzz.check(FOUND[name]) is None, fuzz.source(FOUND[name])
