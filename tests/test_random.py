"""Tests of tinyjx.random: threefry2x32 test vectors, bit-exact agreement with JAX, distributions, keys under
transforms, and errors.

The JAX values below were produced once with JAX 0.10.2 (default config: threefry2x32, partitionable key
derivation) by calls like `jax.random.uniform(jax.random.PRNGKey(5), (2, 3), 'float16', -2., 5.)`, the
arguments of each call being the ones the tests below make; JAX_X64 with `jax_enable_x64` on.
"""
import math
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import random, dtypes

K = random.PRNGKey

# ---------------------------------------------------------------- data from JAX

JAX = {'PRNGKey': {0: [0, 0],
             1: [0, 1],
             42: [0, 42],
             -1: [0, 4294967295],
             -5: [0, 4294967291],
             2147483653: [0, 2147483653],
             4294967299: [0, 3],
             1099511627783: [0, 7]},
 'split': {0: [[1797259609, 2579123966], [928981903, 3453687069], [4146024105, 2718843009]],
           42: [[1832780943, 270669613], [64467757, 2916123636], [2465931498, 255383827]]},
 'split_shape': [[[3625411723, 1954958720], [195045567, 4062205631]],
                 [[966301609, 1948237315], [276534068, 1641862660]]],
 'fold_in': {'0,0': [1797259609, 2579123966],
             '0,1': [928981903, 3453687069],
             '0,7': [2716826189, 292468403],
             '0,2147483648': [917456828, 636652529],
             '0,4294967295': [743310391, 3789761811],
             '42,0': [1832780943, 270669613],
             '42,1': [64467757, 2916123636],
             '42,7': [2547012911, 1371500959],
             '42,2147483648': [3181546281, 2228815013],
             '42,4294967295': [2398536845, 3890976714]},
 'bits': {'uint8': [126, 197, 222, 48, 174],
          'uint16': [7550, 15045, 3294, 19504, 50606],
          'uint32': [318053758, 4029299397, 2787249374, 4190260272, 1195623854]},
 'uniform': {'float16': [[2.71875, 4.0234375, -1.576171875], [-0.1748046875, 4.9453125, 2.6953125]],
             'bfloat16': [[1.65625, 0.734375, 1.9375], [3.375, -0.6875, 4.25]],
             'float32': [[1.2646591663360596, 4.4461669921875, 3.1506710052490234],
                         [-1.3344298601150513, 4.401427268981934, 2.7441048622131348]]},
 'normal': {'float16': [-0.447021484375, 0.1505126953125, -0.16162109375, 0.6123046875, -0.6044921875,
                        -1.5986328125],
            'bfloat16': [1.546875, -0.212890625, 0.44921875, 1.4921875, 1.125, -0.796875],
            'float32': [-0.8071751594543457, -2.080359697341919, 0.6050853133201599, -0.3986145555973053,
                        0.2788938283920288, -0.493477463722229]},
 'randint': {'int32_0_10': [6, 7, 0, 3, 8, 4, 8, 1],
             'int32_m5_5': [4, -3, -2, -2, 2, 1, -3, -4],
             'int32_big': [111646283, 179268212, 2065972637, 516233899, 1632807948, 600437352],
             'int8_full': [56, 18, 59, 57, -23, 76, 56, 36],
             'uint8_256': [1, 64, 247, 8, 60, 53, 155, 221],
             'empty_range': [3, 3, 3, 3],
             'int32_span_100000': [76952, 991, 60373, 41446, 59351, 91743]},
 'bernoulli': [True, True, False, False, True, True, True, False, True, True],
 'gumbel': [-1.163029432296753, 3.41198468208313, 0.1417323350906372, -0.8252516984939575, -0.4034111499786377],
 'exponential': [0.040166765451431274, 0.45590949058532715, 0.9841806888580322, 0.7314113974571228,
                 0.5013253688812256],
 'laplace': [0.8685356378555298, 3.2836124897003174, -0.6067450642585754, 0.37080681324005127,
             -0.24804310500621796],
 'logistic': [0.4087708592414856, 0.13264328241348267, 0.17958587408065796, -1.237013339996338,
              0.23302525281906128],
 'truncated_normal': [1.352756142616272, -0.1147041916847229, 1.2251468896865845, 1.4534714221954346,
                      0.18948093056678772, 0.8466538190841675],
 'categorical': {'axis-1': [1, 2, 0],
                 'axis0': [2, 0, 1, 2],
                 'shape': [[2, 0, 3], [1, 2, 3]],
                 'noreplace': [[0, 0, 1], [3, 2, 2]]},
 'permutation': {'int': [2, 7, 6, 9, 3, 8, 4, 0, 1, 5],
                 'axis1': [[2, 3, 1, 0], [6, 7, 5, 4], [10, 11, 9, 8]],
                 'independent': [[2, 0, 1, 3], [7, 6, 4, 5], [10, 9, 8, 11]],
                 'big': [75, 532, 613, 1652, 363, 597, 1564, 518, 1176, 909]},
 'choice': {'replace': [1, 4, 3, 7],
            'noreplace': [8, 9, 5, 1],
            'p': [2, 3, 2, 2, 3, 2],
            'p_noreplace': [3, 2, 0],
            'array_axis1': [[1, 2], [5, 6], [9, 10]]},
 'typed_split': [[3716834203, 3481239269], [1946498123, 2217676430]],
 'vmap_normal': [[1.004014253616333, -0.9063372015953064, -0.7481722235679626],
                 [-2.442455768585205, -2.0356805324554443, 0.20554423332214355],
                 [1.2956359386444092, 1.3550105094909668, -0.40960556268692017],
                 [-0.6219435930252075, 0.6248040795326233, 1.6820775270462036]],
 'typed_fold_uniform': [0.33684611320495605, 0.23633885383605957, 0.48709964752197266]}

JAX_CONTROL_FLOW = {  # samplers that run while_loops: jr.gamma(K(31), 2.5, (5,)), jr.gamma(K(32), [0.3, 1.0, 4.0]),
                      # jr.loggamma(K(33), 0.2, (3,)), jr.beta(K(34), 2.0, 3.0, (4,)),
                      # jr.multivariate_normal(K(35), [1.0, -1.0], [[2.0, 0.5], [0.5, 1.0]], (3,))
 'gamma': [0.537411630153656, 2.086883068084717, 0.5571417212486267, 3.1372296810150146, 0.7353449463844299],
 'gamma_array': [0.25530919432640076, 1.054918885231018, 1.6158638000488281],
 'loggamma': [-1.9032427072525024, -5.328523635864258, -8.091649055480957],
 'beta': [0.10672665387392044, 0.41950374841690063, 0.13101144134998322, 0.4509810209274292],
 'multivariate_normal': [[2.5126333236694336, -0.5320817232131958], [-0.812424898147583, -2.092897891998291],
                         [-0.1905750036239624, -0.5954432487487793]]}

JAX_X64 = {'PRNGKey': {-1: [4294967295, 4294967295],
             1099511627783: [256, 7],
             -2147483648: [4294967295, 2147483648],
             9223372036854775807: [2147483647, 4294967295]},
 'bits64': [15963681350020464357, 8360145782228061838, 4400243552688456428, 3767515194893970219],
 'uniform64': [0.634340617068121, 0.04716389088541528, 0.836893662441414, 0.6844151475737681],
 'normal64': [-0.11942891219697942, 1.3997924901050443, 0.8684239232585466, 0.7078687409646347],
 'randint64': [-713823050660, 493698938477, -304528141101, -604798788739, -38668376358]}


def same(got, want, rtol=0.0):
  got = np.asarray(got)
  want = np.asarray(want)
  assert got.shape == want.shape, (got.shape, want.shape)
  if rtol: np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)
  else: np.testing.assert_array_equal(got, want)

# ---------------------------------------------------------------- threefry2x32: the Random123 known answers

@pytest.mark.parametrize("key,count,want", [
  ((0, 0), (0, 0), (0x6b200159, 0x99ba4efe)),
  ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
  ((0x13198a2e, 0x03707344), (0x243f6a88, 0x85a308d3), (0xc4923a9c, 0x483df7a0)),
])
def test_threefry_random123_vectors(key, count, want):
  u = lambda v: jnp.asarray(np.uint32(v))
  out = random.threefry2x32(u(key[0]), u(key[1]), u(count[0]), u(count[1]))
  assert [int(w) for w in out] == list(want)

def test_threefry_is_elementwise_over_counter_arrays():
  x1 = jnp.asarray(np.array([0, 0x85a308d3], np.uint32))
  x0 = jnp.asarray(np.array([0, 0x243f6a88], np.uint32))
  k0, k1 = jnp.asarray(np.uint32(0x13198a2e)), jnp.asarray(np.uint32(0x03707344))
  y0, y1 = random.threefry2x32(k0, k1, x0, x1)
  assert int(y0.tolist()[1]) == 0xc4923a9c and int(y1.tolist()[1]) == 0x483df7a0
  z0, z1 = random.threefry2x32(k0, k1, jnp.asarray(np.uint32(0)), jnp.asarray(np.uint32(0)))
  assert (y0.tolist()[0], y1.tolist()[0]) == (int(z0), int(z1))

# ---------------------------------------------------------------- keys

@pytest.mark.parametrize("seed", list(JAX['PRNGKey']))
def test_prngkey_matches_jax(seed):
  k = K(seed)
  assert k.dtype is dtypes.uint32 and k.shape == (2,)
  same(k, JAX['PRNGKey'][seed])

@pytest.mark.parametrize("seed", list(JAX_X64['PRNGKey']))
def test_prngkey_matches_jax_x64(seed):
  with tinyjx.Context(JAX_ENABLE_X64=True):
    same(K(seed), JAX_X64['PRNGKey'][seed])

def test_prngkey_from_array_seeds():
  same(K(jnp.asarray(np.int32(-1))), [0, 0xffffffff])
  same(K(np.int8(-3)), [0, 4294967293])
  same(K(np.uint32(7)), [0, 7])
  with tinyjx.Context(JAX_ENABLE_X64=True):
    same(K(jnp.asarray(np.int64(2 ** 40 + 7))), [256, 7])
    same(K(jnp.asarray(np.array(-1, np.int32))), [0, 0xffffffff])

@pytest.mark.parametrize("seed", [0, 42])
def test_split_matches_jax(seed):
  same(random.split(K(seed), 3), JAX['split'][seed])

def test_split_default_is_two_and_shape_tuple():
  same(random.split(K(0)), JAX['split'][0][:2])
  same(random.split(K(7), (2, 2)), JAX['split_shape'])
  assert random.split(K(0), 0).shape == (0, 2)

@pytest.mark.parametrize("pair", list(JAX['fold_in']))
def test_fold_in_matches_jax(pair):
  seed, data = map(int, pair.split(','))
  same(random.fold_in(K(seed), data), JAX['fold_in'][pair])

def test_fold_in_with_traced_like_array_data():
  same(random.fold_in(K(42), jnp.asarray(7)), JAX['fold_in']['42,7'])
  same(random.fold_in(K(0), jnp.asarray(np.uint32(2 ** 31))), JAX['fold_in']['0,2147483648'])

def test_typed_keys_round_trip():
  k = random.key(3)
  assert k.shape == () and k.ndim == 0 and str(k.dtype) == 'key<fry>'
  same(random.key_data(k), K(3))
  ks = random.split(k, 2)
  assert isinstance(ks, random.PRNGKeyArray) and ks.shape == (2,) and len(ks) == 2
  same(random.key_data(ks), JAX['typed_split'])
  same(random.key_data(ks[1]), JAX['typed_split'][1])
  same(random.key_data(random.wrap_key_data(random.key_data(ks))), JAX['typed_split'])
  same(random.uniform(random.fold_in(random.key(5), 9), (3,)), JAX['typed_fold_uniform'])
  assert [random.key_data(x).tolist() for x in ks] == JAX['typed_split']
  assert 'key<fry>' in repr(ks)

def test_typed_keys_are_pytrees():
  ks = random.split(random.key(0), 3)
  leaves, tree = tinyjx.tree_util.tree_flatten({'k': ks})
  assert len(leaves) == 1 and leaves[0].shape == (3, 2)
  back = tinyjx.tree_util.tree_unflatten(tree, leaves)['k']
  same(random.key_data(back), random.key_data(ks))
  assert ks.reshape(3, 1).shape == (3, 1)

def test_split_of_key_array_and_typed_key_agree():
  same(random.key_data(random.split(random.key(42), 3)), random.split(K(42), 3))

# ---------------------------------------------------------------- samplers against JAX

@pytest.mark.parametrize("dtype", ['uint8', 'uint16', 'uint32'])
def test_bits_matches_jax(dtype):
  b = random.bits(K(3), (5,), dtype)
  assert b.dtype is dtypes.to_dtype(dtype)
  same(b, JAX['bits'][dtype])

def test_bits_default():
  same(random.bits(K(0), (3,)), [4070199207, 4202968722, 1427181096])

@pytest.mark.parametrize("dtype", ['float16', 'bfloat16', 'float32'])
def test_uniform_matches_jax_bits(dtype):
  u = random.uniform(K(5), (2, 3), dtype, -2., 5.)
  assert u.dtype is dtypes.to_dtype(dtype)
  same(np.asarray(u, np.float32), np.asarray(JAX['uniform'][dtype], np.float32))

@pytest.mark.parametrize("dtype,rtol", [('float16', 1e-3), ('bfloat16', 1e-2), ('float32', 2e-6)])
def test_normal_matches_jax(dtype, rtol):
  x = random.normal(K(11), (6,), dtype)
  assert x.dtype is dtypes.to_dtype(dtype)
  same(np.asarray(x, np.float32), JAX['normal'][dtype], rtol)

def test_x64_samplers_match_jax():
  with tinyjx.Context(JAX_ENABLE_X64=True):
    b = random.bits(K(3), (4,), 'uint64')
    assert b.dtype is dtypes.uint64 and b.tolist() == JAX_X64['bits64']
    same(random.uniform(K(5), (4,), 'float64'), JAX_X64['uniform64'], 1e-15)
    same(random.normal(K(11), (4,), 'float64'), JAX_X64['normal64'], 1e-12)
    same(random.randint(K(1), (5,), -10 ** 12, 10 ** 12, 'int64'), JAX_X64['randint64'])

@pytest.mark.parametrize("name,call", [
  ('int32_0_10', lambda: random.randint(K(1), (8,), 0, 10)),
  ('int32_m5_5', lambda: random.randint(K(2), (8,), -5, 5)),
  ('int32_big', lambda: random.randint(K(3), (6,), 0, 2 ** 31 - 1)),
  ('int8_full', lambda: random.randint(K(4), (8,), -128, 127, 'int8')),
  ('uint8_256', lambda: random.randint(K(5), (8,), 0, 256, 'uint8')),
  ('empty_range', lambda: random.randint(K(6), (4,), 3, 3)),
  ('int32_span_100000', lambda: random.randint(K(7), (6,), -7, 99993)),
])
def test_randint_matches_jax(name, call):
  same(call(), JAX['randint'][name])

@pytest.mark.parametrize("name,call", [
  ('gumbel', lambda: random.gumbel(K(9), (5,))),
  ('exponential', lambda: random.exponential(K(10), (5,))),
  ('laplace', lambda: random.laplace(K(11), (5,))),
  ('logistic', lambda: random.logistic(K(12), (5,))),
  ('truncated_normal', lambda: random.truncated_normal(K(13), -1.0, 2.0, (6,))),
])
def test_continuous_samplers_match_jax(name, call):
  same(call(), JAX[name], 2e-6)

def test_bernoulli_matches_jax():
  b = random.bernoulli(K(8), 0.3, (10,))
  assert b.dtype is dtypes.bool_
  same(b, JAX['bernoulli'])

LOGITS = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]], np.float32))

@pytest.mark.parametrize("name,call", [
  ('axis-1', lambda: random.categorical(K(14), LOGITS)),
  ('axis0', lambda: random.categorical(K(14), LOGITS, axis=0)),
  ('shape', lambda: random.categorical(K(15), LOGITS, shape=(2, 3))),
  ('noreplace', lambda: random.categorical(K(16), LOGITS, axis=1, shape=(2, 3), replace=False)),
])
def test_categorical_matches_jax(name, call):
  same(call(), JAX['categorical'][name])

@pytest.mark.parametrize("name,call", [
  ('int', lambda: random.permutation(K(17), 10)),
  ('axis1', lambda: random.permutation(K(18), np.arange(12).reshape(3, 4), axis=1)),
  ('independent', lambda: random.permutation(K(19), np.arange(12).reshape(3, 4), axis=1, independent=True)),
  ('big', lambda: np.asarray(random.permutation(K(20), 2000))[:10]),   # two sorting rounds
])
def test_permutation_matches_jax(name, call):
  same(call(), JAX['permutation'][name])

def test_shuffle_is_independent_permutation():
  x = np.arange(12).reshape(3, 4)
  same(random.shuffle(K(19), x, axis=1), JAX['permutation']['independent'])

P5 = np.array([.1, .2, .3, .2, .2], np.float32)

@pytest.mark.parametrize("name,call", [
  ('replace', lambda: random.choice(K(21), 10, (4,))),
  ('noreplace', lambda: random.choice(K(22), 10, (4,), replace=False)),
  ('p', lambda: random.choice(K(23), 5, (6,), p=P5)),
  ('p_noreplace', lambda: random.choice(K(24), 5, (3,), replace=False, p=P5)),
  ('array_axis1', lambda: random.choice(K(25), np.arange(12).reshape(3, 4), (2,), axis=1)),
])
def test_choice_matches_jax(name, call):
  same(call(), JAX['choice'][name])

COV = np.array([[2.0, 0.5], [0.5, 1.0]], np.float32)

@pytest.mark.parametrize("name,call", [
  ('gamma', lambda: random.gamma(K(31), 2.5, (5,))),
  ('gamma_array', lambda: random.gamma(K(32), np.array([0.3, 1.0, 4.0], np.float32))),
  ('loggamma', lambda: random.loggamma(K(33), 0.2, (3,))),
  ('beta', lambda: random.beta(K(34), 2.0, 3.0, (4,))),
  ('multivariate_normal', lambda: random.multivariate_normal(K(35), np.array([1.0, -1.0], np.float32), COV, (3,))),
])
def test_control_flow_samplers_match_jax(name, call):
  same(call(), JAX_CONTROL_FLOW[name], 1e-5)

def test_erf_inv_against_erf():
  y = np.linspace(-0.999, 0.999, 41)
  for dt, tol in [(jnp.float32, 3e-6), (jnp.float64, 1e-13)]:
    with tinyjx.Context(JAX_ENABLE_X64=dt is jnp.float64):
      x = np.asarray(random.erf_inv(jnp.asarray(y, dt)), np.float64)
      np.testing.assert_allclose([math.erf(v) for v in x], y, rtol=tol, atol=tol)
  inf = np.asarray(random.erf_inv(jnp.asarray([-1.0, 1.0])))
  assert inf.tolist() == [-math.inf, math.inf]

# ---------------------------------------------------------------- distributions: mean and variance of 100,000 samples

N = 100_000

def moments_ok(x, mean, var, name):
  x = np.asarray(x, np.float64).ravel()
  assert x.size == N, name
  se = math.sqrt(var / N)
  assert abs(x.mean() - mean) < 6 * se + 1e-12, f"{name}: mean {x.mean()} vs {mean}"
  assert abs(x.var() - var) < 0.03 * var, f"{name}: variance {x.var()} vs {var}"

def _truncnorm_moments(a, b):
  phi = lambda t: math.exp(-t * t / 2) / math.sqrt(2 * math.pi)
  Z = 0.5 * (math.erf(b / math.sqrt(2)) - math.erf(a / math.sqrt(2)))
  m = (phi(a) - phi(b)) / Z
  return m, 1 + (a * phi(a) - b * phi(b)) / Z - m * m

TN_MEAN, TN_VAR = _truncnorm_moments(-1.0, 2.0)
PROBS = np.array([0.1, 0.2, 0.3, 0.4])
CAT_MEAN = float((np.arange(4) * PROBS).sum())
CAT_VAR = float((np.arange(4) ** 2 * PROBS).sum() - CAT_MEAN ** 2)

DISTRIBUTIONS = [
  ('uniform', lambda k: random.uniform(k, (N,)), 0.5, 1 / 12),
  ('uniform_range', lambda k: random.uniform(k, (N,), minval=-2., maxval=5.), 1.5, 49 / 12),
  ('uniform_f16', lambda k: random.uniform(k, (N,), jnp.float16), 0.5, 1 / 12),
  ('uniform_bf16', lambda k: random.uniform(k, (N,), jnp.bfloat16), 0.5, 1 / 12),
  ('normal', lambda k: random.normal(k, (N,)), 0.0, 1.0),
  ('normal_2d', lambda k: random.normal(k, (250, 400)), 0.0, 1.0),
  ('truncated_normal', lambda k: random.truncated_normal(k, -1.0, 2.0, (N,)), TN_MEAN, TN_VAR),
  ('bernoulli', lambda k: random.bernoulli(k, 0.3, (N,)), 0.3, 0.21),
  ('randint', lambda k: random.randint(k, (N,), 0, 10), 4.5, 8.25),
  ('randint_neg', lambda k: random.randint(k, (N,), -3, 4, jnp.int8), 0.0, 4.0),
  ('bits', lambda k: random.bits(k, (N,)).astype(jnp.float32) / 2.0 ** 32, 0.5, 1 / 12),
  ('gumbel', lambda k: random.gumbel(k, (N,)), 0.5772156649015329, math.pi ** 2 / 6),
  ('exponential', lambda k: random.exponential(k, (N,)), 1.0, 1.0),
  ('laplace', lambda k: random.laplace(k, (N,)), 0.0, 2.0),
  ('logistic', lambda k: random.logistic(k, (N,)), 0.0, math.pi ** 2 / 3),
  ('categorical', lambda k: random.categorical(k, np.log(PROBS), shape=(N,)), CAT_MEAN, CAT_VAR),
  ('choice_p', lambda k: random.choice(k, 4, (N,), p=PROBS.astype(np.float32)), CAT_MEAN, CAT_VAR),
  ('choice', lambda k: random.choice(k, 10, (N,)), 4.5, 8.25),
  ('gamma', lambda k: random.gamma(k, 2.5, (N,)), 2.5, 2.5),
  ('beta', lambda k: random.beta(k, 2.0, 3.0, (N,)), 0.4, 0.04),
  ('multivariate_normal', lambda k: random.multivariate_normal(k, np.array([1.0, -1.0], np.float32), COV, (N,))
   @ np.array([1.0, 1.0], np.float32), 0.0, 4.0),   # x0 + x1: mean 0, variance 2 + 1 + 2 * 0.5
]

@pytest.mark.parametrize("name,sample,mean,var", DISTRIBUTIONS, ids=[d[0] for d in DISTRIBUTIONS])
def test_distribution_moments(name, sample, mean, var):
  moments_ok(sample(K(2024)), mean, var, name)

def test_uniform_respects_bounds_and_dtypes():
  for dt in (jnp.float16, jnp.bfloat16, jnp.float32):
    u = np.asarray(random.uniform(K(1), (N,), dt, 2.0, 3.0), np.float32)
    assert u.min() >= 2.0 and u.dtype == np.float32
    assert u.max() < 3.0 if dt is jnp.float32 else u.max() <= 3.0   # x * 1 + 2 may round up to 3 in 16 bits

def test_permutation_is_uniform_over_positions():
  rows = np.asarray(random.permutation(K(3), np.tile(np.arange(5), (20_000, 1)), axis=1, independent=True))
  assert (np.sort(rows, axis=1) == np.arange(5)).all()
  freq = np.bincount(rows[:, 0], minlength=5) / rows.shape[0]
  np.testing.assert_allclose(freq, 0.2, atol=0.015)

def test_large_permutation_is_a_permutation():
  p = np.asarray(random.permutation(K(4), N))
  assert (np.sort(p) == np.arange(N)).all() and (p != np.arange(N)).any()

def test_choice_without_replacement_is_distinct():
  c = np.asarray(random.choice(K(5), 1000, (500,), replace=False))
  assert len(set(c.tolist())) == 500 and c.min() >= 0 and c.max() < 1000

def test_dropout_mask():
  x = jnp.ones((N,))
  keep = random.bernoulli(K(6), 0.9, x.shape)
  y = np.asarray(jnp.where(keep, x / 0.9, 0.0))
  assert abs(y.mean() - 1.0) < 0.01 and abs((y == 0).mean() - 0.1) < 0.005

def test_keys_as_loop_carry_match_python_loop():
  def step(k, _):
    k, sub = random.split(k)
    return k, random.uniform(sub, (2,))
  _, ys = tinyjx.lax.scan(step, K(5), None, length=4)
  k, want = K(5), []
  for _ in range(4):
    k, sub = random.split(k)
    want.append(np.asarray(random.uniform(sub, (2,))))
  same(ys, np.stack(want))
  folded = tinyjx.lax.fori_loop(0, 3, lambda i, k: random.fold_in(k, i), K(0))
  same(folded, random.fold_in(random.fold_in(random.fold_in(K(0), 0), 1), 2))

def test_sampler_is_one_fused_kernel_under_jit():
  pytest.importorskip("tinyjx.lower")
  for fn in (lambda k: random.normal(k, (1000,)), lambda k: random.split(k, 8), lambda k: random.bits(k, (64,))):
    with tinyjx.Context(TINYJX_DEVICE='CPU'):
      exe = tinyjx.jit(fn).lower(K(0)).compile().executable
    assert len(exe.kernels) == 1

def test_different_keys_give_different_streams():
  a, b = random.split(K(0))
  assert not np.array_equal(np.asarray(random.normal(a, (8,))), np.asarray(random.normal(b, (8,))))
  same(random.normal(a, (8,)), random.normal(a, (8,)))

# ---------------------------------------------------------------- keys under transforms

def test_vmap_over_split_keys_matches_jax():
  keys = random.split(K(0), 4)
  same(tinyjx.vmap(lambda k: random.normal(k, (3,)))(keys), JAX['vmap_normal'], 2e-6)

def test_vmap_over_typed_keys():
  keys = random.split(random.key(0), 4)
  same(tinyjx.vmap(lambda k: random.normal(k, (3,)))(keys), JAX['vmap_normal'], 2e-6)
  split_all = tinyjx.vmap(random.split)(keys)
  assert isinstance(split_all, random.PRNGKeyArray) and split_all.shape == (4, 2)
  same(random.key_data(split_all)[1], random.split(random.split(K(0), 4)[1]))

def test_pmap_over_keys_matches_vmap():
  keys = random.split(K(0), tinyjx.device_count())
  f = lambda k: random.normal(k, (3,))
  same(tinyjx.pmap(f)(keys), tinyjx.vmap(f)(keys), 1e-7)

def test_jit_of_samplers_matches_eager():
  f = tinyjx.jit(lambda k: (random.uniform(k, (5,)), random.normal(random.fold_in(k, 1), (2, 2)),
                            random.randint(k, (4,), 0, 9), random.split(k, 3)))
  for got, want in zip(f(K(7)), (random.uniform(K(7), (5,)), random.normal(random.fold_in(K(7), 1), (2, 2)),
                                 random.randint(K(7), (4,), 0, 9), random.split(K(7), 3))):
    same(got, want, 1e-7)
  same(tinyjx.jit(random.PRNGKey)(jnp.asarray(np.int32(-1))), [0, 0xffffffff])
  same(random.key_data(tinyjx.jit(lambda k: random.split(k))(random.key(42))), random.split(K(42)))

def test_grad_does_not_flow_into_keys():
  def loss(w, k):
    noise = random.normal(k, (3,))
    return jnp.sum(w * noise) + jnp.sum(w * w)
  k = K(1)
  g = tinyjx.grad(loss)(jnp.ones(3), k)
  same(g, np.asarray(random.normal(k, (3,))) + 2.0, 1e-6)
  with pytest.raises(TypeError):
    tinyjx.grad(lambda k: jnp.sum(random.normal(k, (3,))))(k)

def test_grad_through_sampler_parameters():
  g = tinyjx.grad(lambda m: jnp.sum(random.uniform(K(2), (4,), minval=m, maxval=m + 2.0)))(1.0)
  assert abs(float(g) - 4.0) < 1e-5

# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("call,exc,words", [
  (lambda: K(1.5), TypeError, "integer"),
  (lambda: K(jnp.asarray([1, 2])), TypeError, "scalar seed"),
  (lambda: K(2 ** 64), OverflowError, "64 bits"),
  (lambda: random.split(random.split(K(0), 3)), ValueError, "single key"),
  (lambda: random.normal(jnp.zeros(2), (3,)), TypeError, "uint32"),
  (lambda: random.normal([0, 1], (3,)), TypeError, "PRNG key"),
  (lambda: random.bits(K(0), (2,), jnp.int32), ValueError, "unsigned"),
  (lambda: random.uniform(K(0), (2,), jnp.int32), ValueError, "float dtype"),
  (lambda: random.randint(K(0), (2,), 0, 5, jnp.float32), TypeError, "integer dtypes"),
  (lambda: random.bernoulli(K(0), 1, (2,)), TypeError, "floating"),
  (lambda: random.choice(K(0), 3, (5,), replace=False), ValueError, "larger sample"),
  (lambda: random.uniform(K(0), (3,), minval=jnp.zeros(4)), ValueError, "broadcast"),
  (lambda: random.fold_in(K(0), jnp.asarray([1, 2])), TypeError, "scalar"),
  (lambda: random.fold_in(K(0), -1), OverflowError, "uint32"),
  (lambda: random.multivariate_normal(K(0), jnp.zeros(2), jnp.eye(3)), ValueError, "cov"),
  (lambda: random.key(random.key(0)), TypeError, "PRNG key"),
  (lambda: random.wrap_key_data(jnp.zeros((3,), jnp.uint32)), TypeError, "size 2"),
  (lambda: random.categorical(K(0), jnp.zeros((3, 4)), shape=(2, 4)), ValueError, "batch shape"),
])
def test_errors(call, exc, words):
  with pytest.raises(exc, match=words):
    call()
