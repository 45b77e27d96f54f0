"""Differential fuzzing at length (the release mode of tests/test_fuzz.py): draw random programs under random
transform stacks, run each on a compiled device and on the PYTHON reference device, and optionally on JAX.

    python bench/fuzz.py --count 5000 --seed 1                 # CPU against the reference
    python bench/fuzz.py --count 2000 --device CL              # the OpenCL device
    python bench/fuzz.py --count 500 --jax /path/to/venv/bin/python   # and against JAX, in its own process

Every failure is shrunk and printed as a runnable Python file. JAX runs in its own interpreter (it is never a
dependency of tinyjx): the programs are written out with `import jax` and their outputs read back from .npy files.
"""
from __future__ import annotations
import argparse, os, random, subprocess, sys, tempfile, time
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests'))
import fuzz  # noqa: E402

JAX_RUNNER = '''
import sys, traceback, numpy as np
import jax
jax.config.update('jax_platforms', 'cpu')
for path in sys.argv[1:]:
  try:
    ns = {'__name__': 'fuzzed'}
    exec(compile(open(path).read(), path, 'exec'), ns)
    np.save(path + '.npy', np.asarray(ns['out']))
  except Exception as e:
    open(path + '.err', 'w').write(type(e).__name__ + ': ' + str(e)[:500])
'''

def against_jax(programs: list, python: str) -> list:
  """JAX's outcome of each program, run in one `python` process with XLA_FLAGS for the pmap devices."""
  with tempfile.TemporaryDirectory() as d:
    paths = []
    for k, p in enumerate(programs):
      path = os.path.join(d, f"p{k}.py")
      with open(path, 'w') as f: f.write(fuzz.source(p, library='jax'))
      paths.append(path)
    runner = os.path.join(d, 'runner.py')
    with open(runner, 'w') as f: f.write(JAX_RUNNER)
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={fuzz.DEVICES}")
    subprocess.run([python, runner] + paths, env=env, timeout=3600, check=True)
    out = []
    for path in paths:
      if os.path.exists(path + '.npy'): out.append(fuzz.Outcome(np.load(path + '.npy')))
      else:
        with open(path + '.err') as f: out.append(fuzz.Outcome(error=RuntimeError(f.read())))
    return out

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument('--count', type=int, default=1000)
  ap.add_argument('--seed', type=int, default=0)
  ap.add_argument('--device', default='CPU')
  ap.add_argument('--jax', metavar='PYTHON', help="an interpreter with JAX installed, to compare against JAX too")
  args = ap.parse_args()
  t0 = time.time()
  stats = fuzz.fuzz(args.count, args.seed, args.device)
  print(f"{stats['programs']} programs on {args.device}: {len(stats['failures'])} failures, "
        f"{stats['invalid']} refused alike by both sides, {time.time() - t0:.0f} s")
  if args.jax:
    r = random.Random(args.seed)
    programs = [fuzz.generate(r, args.seed * 100_003 + k) for k in range(args.count)]
    programs = [p if fuzz.shapes_through(p, p.transforms) is not None else fuzz.Program(p.inputs, p.stmts, p.out, [], p.seed)
                for p in programs]
    jax_out = against_jax(programs, args.jax)
    bad = 0
    for p, theirs in zip(programs, jax_out):
      ours = fuzz.run(p, args.device)
      if theirs.error is not None and ours.error is not None: continue
      diff = fuzz.compare(p, theirs, ours)
      if diff is not None:
        bad += 1
        print(f"differs from JAX (seed {p.seed}): {diff}\n{fuzz.source(p, library='jax')}")
    print(f"{len(programs)} programs against JAX: {bad} differ")
  return 1 if stats['failures'] else 0

if __name__ == '__main__':
  sys.exit(main())
