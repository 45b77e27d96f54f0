"""Tests of the DEBUG ladder's jit level (DEBUG=1: cache hits and misses with the reason of each miss, kernel counts)
and of tinyjx.counters. Levels 2 and up are printed by the lowering and are tested with it.
"""
import re
import numpy as np
import pytest

import tinyjx
import tinyjx.numpy as jnp
from tinyjx import counters

def arr(*shape, dtype=np.float32):
  return jnp.asarray(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))

def lines(capsys) -> list[str]:
  return [line for line in capsys.readouterr().out.splitlines() if line.startswith('jit(')]

# ---------------------------------------------------------------- DEBUG=1

def test_debug1_first_call_hit_and_kernel_count(capsys):
  def f(x): return x * 2 + 1
  g = tinyjx.jit(f)
  with tinyjx.Context(DEBUG=1):
    g(arr(3)); g(arr(3))
  out = lines(capsys)
  assert out[0] == "jit(f): miss (first call)"
  assert re.fullmatch(r"jit\(f\): compiled \d+ kernels? on \w+:\d+ in [\d.]+ ms", out[1])
  assert out[2] == "jit(f): hit"
  assert len(out) == 3

def test_debug1_names_the_changed_argument(capsys):
  def f(x, y): return x + y['w'].sum()
  g = tinyjx.jit(f)
  with tinyjx.Context(DEBUG=1):
    g(arr(3), {'w': arr(2)})
    g(arr(4), {'w': arr(2)})
    g(arr(4), {'w': arr(2, dtype=np.int32)})
    g(2.0, {'w': arr(2, dtype=np.int32)})
  misses = [line for line in lines(capsys) if 'miss' in line]
  assert misses == ["jit(f): miss (first call)",
                    "jit(f): miss (new: x f32[3] -> f32[4])",
                    "jit(f): miss (new: y['w'] f32[2] -> i32[2])",
                    "jit(f): miss (new: x f32[4] -> ~f32[])"]

def test_debug1_static_structure_and_settings_reasons(capsys):
  def f(x, n): return x * n
  g = tinyjx.jit(f, static_argnums=1)
  h = tinyjx.jit(lambda xs: xs[0])
  with tinyjx.Context(DEBUG=1):
    g(arr(2), 3); g(arr(2), 4)
    h((arr(2),)); h([arr(2)])
    h([arr(2)])
    with tinyjx.Context(JAX_ENABLE_X64=True):
      h([arr(2)])
  out = lines(capsys)
  assert "jit(f): miss (static arg n changed: 3 -> 4)" in out
  assert "jit(<lambda>): miss (new argument structure: ((*,),) -> ([*],))" in out
  assert "jit(<lambda>): miss (JAX_ENABLE_X64 changed: False -> True)" in out
  assert out.count("jit(<lambda>): hit") == 1

def test_debug0_prints_nothing(capsys):
  g = tinyjx.jit(lambda x: x - 1)
  g(arr(2)); g(arr(2))
  assert lines(capsys) == []

def test_debug_does_not_change_the_cache(capsys):
  def f(x): return jnp.sin(x)
  g = tinyjx.jit(f)
  g(arr(3))
  with tinyjx.Context(DEBUG=1):
    with counters.measure() as c: g(arr(3))
  assert c['traces'] == 0 and lines(capsys) == ["jit(f): hit"]

def test_debug1_inlined_call_under_a_transform(capsys):
  inner = tinyjx.jit(lambda x: x * 3)
  with tinyjx.Context(DEBUG=1):
    tinyjx.jit(lambda x: inner(x) + 1)(arr(2))
  out = lines(capsys)
  assert "jit(<lambda>): miss (first call)" in out
  assert sum('compiled' in line for line in out) == 1     # only the outer function is compiled

# ---------------------------------------------------------------- counters

def test_counters_add_snapshot_reset_measure():
  with counters.measure() as c:
    counters.add('kernels', 3); counters.add('flops', 10); counters.add('bytes')
  assert (c['kernels'], c['flops'], c['bytes'], c['traces']) == (3, 10, 1, 0)
  snap = counters.snapshot()
  counters.add('traces')
  assert counters.get('traces') == snap['traces'] + 1 and counters.diff(snap)['traces'] == 1
  snap['traces'] = -100                                  # a snapshot is a copy
  assert counters.get('traces') >= 0
  counters.reset()
  assert set(counters.snapshot().values()) == {0}

def test_counters_reject_unknown_names_and_accept_defined_ones():
  with pytest.raises(KeyError, match="unknown counter 'kernel'.*kernels"):
    counters.add('kernel')
  with pytest.raises(KeyError, match="define"):
    counters.get('no_such_counter')
  counters.define('test_debug_events', "events counted by test_debug")
  counters.add('test_debug_events', 2)
  assert counters.snapshot()['test_debug_events'] >= 2 and 'test_debug_events' in counters.NAMES

def test_counters_are_exported():
  assert tinyjx.counters is counters
  for name in ('kernels', 'flops', 'bytes', 'traces', 'compiles', 'cache_hits', 'cache_misses'):
    assert name in counters.snapshot()
