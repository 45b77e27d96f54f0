"""pmap and the device API on eight virtual devices: arguments and results (in_axes, out_axes, pytrees, statics,
devices=, axis_size), results that stay on their devices, composition with jit, vmap and grad in both orders,
gradients against the unmapped computation, the runtime's failure modes (no hangs), and the errors."""
import threading
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import lax, counters, dtypes
from tinyjx.uop import UOp, Ops
from tinyjx.collectives import CollectiveError, Group, PeerFailed

pytestmark = pytest.mark.usefixtures('eight_devices')   # fixtures eight_devices, device: conftest.py

def close(a, b, tol=1e-5):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)

# ---------------------------------------------------------------- devices

def test_device_list(device):
  devs = tinyjx.devices()
  assert len(devs) == tinyjx.device_count() == tinyjx.local_device_count() == 8
  assert [d.id for d in devs] == list(range(8)) and tinyjx.local_devices() == devs
  assert all(d.process_index == 0 for d in devs) and tinyjx.process_index() == 0 and tinyjx.process_count() == 1
  kind = 'Cpu' if device == 'CPU' else 'Python'
  assert repr(devs[3]) == f"{kind}Device(id=3)" and devs[3].platform == device.lower()
  assert devs[3].name == f"{device}:3" and tinyjx.devices.get(f"{device}:3").name == f"{device}:3"

def test_device_put_and_array_device(device):
  devs = tinyjx.devices()
  x = tinyjx.device_put(jnp.arange(3.0), devs[5])
  assert x.device == devs[5] and x.devices() == {devs[5]}
  assert (x + 1).device == devs[5]                      # results of eager ops live where their inputs do
  assert jnp.ones(2).device == devs[0]                  # the default device
  assert np.asarray(x * 2).tolist() == [0.0, 2.0, 4.0]

def test_virtual_device_count_is_configurable():
  with tinyjx.Context(TINYJX_CPU_DEVICES=3):
    assert tinyjx.local_device_count() == 3 and len(tinyjx.devices()) == 3
  tinyjx.set_cpu_devices(5)
  try:
    assert tinyjx.local_device_count() == 8       # the test's Context wins over the process-wide setting
    assert tinyjx.settings._process['TINYJX_CPU_DEVICES'] == 5
  finally:
    tinyjx.settings._process.pop('TINYJX_CPU_DEVICES')   # back to the environment's value
  with pytest.raises(ValueError, match="positive integer"):
    tinyjx.set_cpu_devices(0)

# ---------------------------------------------------------------- arguments and results

def test_in_axes_out_axes_and_pytrees(device):
  xs, ys = np.arange(12.0, dtype=np.float32).reshape(4, 3), np.arange(4.0, dtype=np.float32)
  body = lambda t, c: {'sum': t['a'] + t['b'][0], 'scaled': (t['a'] * c,)}
  f = tinyjx.pmap(body, in_axes=({'a': 0, 'b': (1,)}, None))
  out = f({'a': xs, 'b': (xs.T,)}, 2.0)
  close(out['sum'], xs * 2)
  close(out['scaled'][0], xs * 2)
  g = tinyjx.pmap(lambda x, y: (x * y, y), in_axes=(1, 0), out_axes=(1, None))
  a, b = g(xs.T, ys)
  close(a, xs.T * ys)
  close(b, ys[0])                                      # out_axes None: the first device's value
  assert tinyjx.pmap(lambda x: x.sum(), in_axes=-1)(xs.T).shape == (4,)

def test_keyword_arguments_and_axis_size(device):
  out = tinyjx.pmap(lambda x, *, scale: x * scale)(jnp.arange(3.0), scale=jnp.ones(3) * 2)
  close(out, [0.0, 2.0, 4.0])
  idx = tinyjx.pmap(lambda c: c + lax.axis_index('i'), axis_name='i', in_axes=None, axis_size=5)(10)
  assert np.asarray(idx).tolist() == [10, 11, 12, 13, 14]

def test_static_broadcasted_argnums_retrace_on_new_value(device):
  f = tinyjx.pmap(lambda x, k, y: x * k + y, static_broadcasted_argnums=(1,))
  with counters.measure() as c:
    close(f(jnp.ones(2), 3, jnp.ones(2)), [4.0, 4.0])
    close(f(jnp.ones(2), 3, jnp.ones(2) * 2), [5.0, 5.0])
    close(f(jnp.ones(2), 5, jnp.ones(2)), [6.0, 6.0])
  assert c['pmap_traces'] == 2                          # the second call hit the cache
  with pytest.raises(TypeError, match="not hashable"):
    f(jnp.ones(2), [3], jnp.ones(2))

def test_devices_argument_orders_the_axis(device):
  devs = tinyjx.devices()
  pick = [devs[6], devs[2], devs[4]]
  out = tinyjx.pmap(lambda x: x + lax.axis_index('i'), axis_name='i', devices=pick)(jnp.zeros(3))
  assert out.devices() == set(pick) and np.asarray(out).tolist() == [0.0, 1.0, 2.0]

def test_results_stay_on_their_devices_until_read(device):
  f = tinyjx.pmap(lambda x: x * 2)
  y = f(jnp.arange(8.0))
  assert y.devices() == set(tinyjx.devices()) and y.uop.op is not Ops.BUFFER
  z = f(y)                                              # the pieces go straight back to their devices
  assert y.uop.op is not Ops.BUFFER          # ... y was never gathered to the host
  assert np.asarray(z).tolist() == [4.0 * i for i in range(8)]
  part = tinyjx.pmap(lambda x: x + 1)(jnp.arange(3.0))
  assert part.devices() == set(tinyjx.devices()[:3])

def test_device_put_replicated_and_sharded(device):
  devs = tinyjx.devices()[:4]
  params = tinyjx.device_put_replicated({'w': jnp.arange(3.0)}, devs)
  assert params['w'].shape == (4, 3) and params['w'].devices() == set(devs)
  shards = tinyjx.device_put_sharded([np.full(2, i, np.float32) for i in range(4)], devs)
  out = tinyjx.pmap(lambda p, s: p['w'].sum() * s, devices=devs)(params, shards)
  assert params['w'].uop.op is not Ops.BUFFER and shards.uop.op is not Ops.BUFFER   # used in place
  close(out, [[0, 0], [3, 3], [6, 6], [9, 9]])
  with pytest.raises(ValueError, match="2 shards for 4 devices"):
    tinyjx.device_put_sharded([1.0, 2.0], devs)

def test_one_compile_per_program_and_device_kind(device):
  f = tinyjx.pmap(lambda x: jnp.sin(x) + lax.psum(x, 'i'), axis_name='i')
  f(jnp.arange(4.0))
  with counters.measure() as c:
    out = f(jnp.arange(4.0) + 1)
  assert c['pmap_traces'] == 0 and c['pmap_compiles'] == 0
  close(out, np.sin(np.arange(4.0) + 1) + 10)

# ---------------------------------------------------------------- composition

def test_jit_inside_and_outside(device):
  body = lambda x: lax.psum(x * 2, 'i')
  xs = jnp.arange(4.0)
  close(tinyjx.pmap(tinyjx.jit(body), axis_name='i')(xs), [12.0] * 4)
  close(tinyjx.jit(tinyjx.pmap(body, axis_name='i'))(xs), [12.0] * 4)

def test_nested_with_vmap_both_ways(device):
  xs = np.arange(8.0, dtype=np.float32).reshape(4, 2)
  inner = lambda x: lax.psum(x, 'i') * 100 + lax.psum(x, 'j')
  want = xs.sum(0, keepdims=True) * 100 + xs.sum(1, keepdims=True)
  close(tinyjx.pmap(tinyjx.vmap(inner, axis_name='j'), axis_name='i')(xs), want)
  close(tinyjx.vmap(tinyjx.pmap(inner, axis_name='j'), axis_name='i')(xs), want)
  close(tinyjx.pmap(tinyjx.pmap(inner, axis_name='j'), axis_name='i')(xs), want)

def test_closing_over_a_traced_value_runs_as_vmap(device):
  xs = jnp.arange(4.0)
  assert tinyjx.grad(lambda w: tinyjx.pmap(lambda x: x * w)(xs).sum())(2.0).item() == 6.0
  close(tinyjx.jit(lambda w: tinyjx.pmap(lambda x: x * w)(xs))(2.0), [0.0, 2.0, 4.0, 6.0])

def test_control_flow_with_collectives_inside(device):
  f = tinyjx.pmap(lambda x: lax.fori_loop(0, 3, lambda i, v: lax.ppermute(v, 'i', [(0, 1), (1, 0)]) + 1, x),
                  axis_name='i')
  close(f(jnp.array([1.0, -1.0])), [2.0, 4.0])

# ---------------------------------------------------------------- gradients

def loss(w, x): return jnp.mean(jnp.tanh(x @ w) ** 2)

@pytest.fixture
def data():
  rng = np.random.default_rng(0)
  return rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal((8, 5, 3)).astype(np.float32)

def test_pmean_of_per_device_grads_equals_grad_on_the_whole_batch(device, data):
  w, xs = data
  step = tinyjx.pmap(lambda w, x: lax.pmean(tinyjx.grad(loss)(w, x), 'i'), axis_name='i', in_axes=(None, 0))
  want = tinyjx.grad(loss)(w, xs.reshape(40, 3))
  close(step(w, xs), np.broadcast_to(np.asarray(want), (8, 3, 2)))

def test_grad_of_a_pmapped_loss_equals_grad_of_the_unmapped_loss(device, data):
  w, xs = data
  mapped = lambda w: tinyjx.pmap(lambda w, x: lax.pmean(loss(w, x), 'i'), axis_name='i', in_axes=(None, 0))(w, xs)[0]
  close(tinyjx.grad(mapped)(w), tinyjx.grad(loss)(w, xs.reshape(40, 3)))
  close(tinyjx.value_and_grad(lambda w: tinyjx.pmap(loss, in_axes=(None, 0))(w, xs).mean())(w)[1],
        tinyjx.grad(loss)(w, xs.reshape(40, 3)))

def test_grad_through_collectives_inside_pmap(device):
  # JAX 0.10's answers: psum transposes to psum, all_gather to psum_scatter, ppermute to the inverse permutation
  close(tinyjx.pmap(tinyjx.grad(lambda x: lax.psum(x, 'i')), axis_name='i')(jnp.arange(4.0)), [4.0] * 4)
  close(tinyjx.pmap(tinyjx.grad(lambda x: lax.pmean(x, 'i')), axis_name='i')(jnp.arange(4.0)), [1.0] * 4)
  gather = lambda x: (lax.all_gather(x, 'i') * jnp.arange(4.0)[:, None]).sum()
  close(tinyjx.pmap(tinyjx.grad(gather), axis_name='i')(jnp.ones((4, 2))), [[0, 0], [4, 4], [8, 8], [12, 12]])
  permute = lambda x: (lax.ppermute(x, 'i', [(0, 1), (1, 2)]) * jnp.array([1.0, 2, 3, 4])).sum()
  close(tinyjx.pmap(tinyjx.grad(permute), axis_name='i')(jnp.ones((4, 4))), [[1, 2, 3, 4]] * 2 + [[0] * 4] * 2)

@pytest.mark.parametrize('name', ['psum', 'pmax', 'all_gather', 'psum_scatter', 'ppermute', 'all_to_all'])
def test_collective_grads_and_jvps_agree_under_pmap_and_vmap(device, name):
  """grad inside pmap uses the collectives' vjp rules; grad of vmap uses their batch rules: the same numbers."""
  rng = np.random.default_rng(1)
  xs = rng.standard_normal((4, 4, 3)).astype(np.float32)
  cs = rng.standard_normal((4, 4, 3)).astype(np.float32)
  op = {'psum': lambda x: lax.psum(x, 'i'), 'pmax': lambda x: lax.pmax(x, 'i'),
        'all_gather': lambda x: lax.all_gather(x, 'i', axis=1, tiled=True)[:, 2:8],
        'psum_scatter': lambda x: lax.psum_scatter(x, 'i'),
        'ppermute': lambda x: lax.ppermute(x, 'i', [(0, 2), (2, 3)]),
        'all_to_all': lambda x: lax.all_to_all(x, 'i', 0, 1)}[name]
  per_device = lambda x, c: jnp.sum(jnp.sin(op(x * c)) * c.sum())
  by_pmap = tinyjx.pmap(tinyjx.grad(per_device), axis_name='i')(xs, cs)
  total = lambda xs: tinyjx.vmap(per_device, axis_name='i')(xs, cs).sum()
  close(by_pmap, tinyjx.grad(total)(xs), 1e-4)
  tangent = rng.standard_normal(xs.shape).astype(np.float32)
  jvp_pmap = tinyjx.pmap(lambda x, t, c: tinyjx.jvp(lambda x: per_device(x, c), (x,), (t,))[1], axis_name='i')
  close(jvp_pmap(xs, tangent, cs), tinyjx.jvp(lambda x: tinyjx.vmap(per_device, axis_name='i')(x, cs), (xs,),
                                              (tangent,))[1], 1e-4)

# ---------------------------------------------------------------- the runtime: failures end in errors, not hangs

def test_a_device_that_fails_wakes_the_others():
  group, errors = Group('i', 2, 0, 2), []
  psum = UOp(Ops.PSUM, dtypes.float32, (UOp.const(1.0, dtypes.float32, ()),), ('i',))
  def waiting():
    try: group.run(0, psum, (np.float32(1.0),))
    except CollectiveError as e: errors.append(e)
  t = threading.Thread(target=waiting)
  t.start()
  group.abort(1, ValueError("device 1 broke"))
  t.join(10)
  assert not t.is_alive() and isinstance(errors[0], PeerFailed) and "device 1 broke" in str(errors[0])

def test_devices_that_diverge_raise_instead_of_hanging(device):
  with tinyjx.Context(TINYJX_COLLECTIVE_TIMEOUT=0.5):
    f = tinyjx.pmap(lambda x: lax.cond(x > 0, lambda v: lax.psum(v, 'i'), lambda v: v, x), axis_name='i')
    with pytest.raises(CollectiveError, match="TINYJX_COLLECTIVE_TIMEOUT"):
      f(jnp.array([1.0, -1.0]))
  g = tinyjx.pmap(lambda x: lax.cond(x > 0, lambda v: lax.psum(v, 'i'), lambda v: lax.pmax(v, 'i'), x), axis_name='i')
  with pytest.raises(CollectiveError, match="different collectives"):
    g(jnp.array([1.0, -1.0]))
  close(tinyjx.pmap(lambda x: lax.psum(x, 'i'), axis_name='i')(jnp.ones(2)), [2.0, 2.0])   # still usable

# ---------------------------------------------------------------- errors

def test_mapped_axis_size_and_device_count_must_agree():
  with pytest.raises(ValueError, match=r"size 9.*only 8 .*TINYJX_CPU_DEVICES=9"):
    tinyjx.pmap(lambda x: x)(jnp.ones(9))
  with pytest.raises(ValueError, match=r"size 3.*devices= lists 2"):
    tinyjx.pmap(lambda x: x, devices=tinyjx.devices()[:2])(jnp.ones(3))
  with pytest.raises(ValueError, match=r"(?s)inconsistent sizes.*size 2: axis 0 of x.*size 3: axis 0 of y"):
    tinyjx.pmap(lambda x, y: x)(jnp.ones(2), jnp.ones(3))
  with pytest.raises(ValueError, match="at least one mapped argument"):
    tinyjx.pmap(lambda x: x, in_axes=None)(1.0)
  with pytest.raises(ValueError, match=r"along axis 1, but its shape is \(4,\)"):
    tinyjx.pmap(lambda x: x, in_axes=1)(jnp.ones(4))

def test_branching_on_a_mapped_value_names_the_fix():
  with pytest.raises(tinyjx.ConcretizationError, match="lax.cond"):
    tinyjx.pmap(lambda x: x if x > 0 else -x)(jnp.ones(2))

def test_data_parallel_example_matches_single_device_training(device):
  import importlib.util, os
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'examples', 'data_parallel.py')
  spec = importlib.util.spec_from_file_location('data_parallel', path)
  example = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(example)
  parallel, single = example.train(steps=3, batch=64, lr=0.1)
  assert len(parallel) == 3 and parallel[0] != parallel[-1]
  np.testing.assert_allclose(parallel, single, rtol=1e-5)
