"""nn.optim against hand-written numpy versions of Optax's published update equations, against known answers
computed with Optax 0.2.8 (written here as data), schedules, and both optimizer styles inside jit."""
import numpy as np
import pytest
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.random as random
import nn
from nn import optim

P = {'w': np.array([[1.0, -2.0], [0.5, 0.3], [0.1, 0.2]], np.float32), 'b': np.array([0.1, -0.2], np.float32)}
G = {'w': np.array([[0.3, 0.1], [-0.2, 0.4], [0.05, -0.1]], np.float32), 'b': np.array([1.0, -0.5], np.float32)}

def run(tx, steps=3, grads=None):
  """Params after `steps` updates of `tx` with constant gradients G (or grads(params) when given)."""
  params = {k: jnp.asarray(v) for k, v in P.items()}
  state = tx.init(params)
  for _ in range(steps):
    g = {k: jnp.asarray(v) for k, v in G.items()} if grads is None else grads(params)
    updates, state = tx.update(g, state, params)
    params = optim.apply_updates(params, updates)
  return {k: np.asarray(v) for k, v in params.items()}

# ---------------------------------------------------------------- numpy references (Optax's equations)

def np_sgd(p, g, lr, momentum=0.0, nesterov=False, wd=0.0, steps=3):
  t = 0.0
  for _ in range(steps):
    u = g + wd * p
    t = u + momentum * t
    p = p - lr * ((u + momentum * t) if nesterov else t)
  return p

def np_adam(p, g, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, steps=3):
  m = v = 0.0
  for t in range(1, steps + 1):
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    p = p - lr * (u + wd * p)
  return p

def np_trust(u, p, coeff=1.0):
  pn, un = np.linalg.norm(p), np.linalg.norm(u)
  return u * (1.0 if pn == 0 or un == 0 else coeff * pn / un)

def np_lamb(p, g, lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.0, steps=3):
  m = v = 0.0
  for t in range(1, steps + 1):
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wd * p
    p = p - lr * np_trust(u, p)
  return p

def np_lars(p, g, lr, wd=0.0, coeff=0.001, momentum=0.9, steps=3):
  t = 0.0
  for _ in range(steps):
    u = -lr * np_trust(g + wd * p, p, coeff)
    t = u + momentum * t
    p = p + t
  return p

def np_newton_schulz(x, steps=5, eps=1e-8):
  a, b, c = 3.4445, -4.7750, 2.0315
  tall = x.shape[0] > x.shape[1]
  x = x.T if tall else x
  x = x / (np.linalg.norm(x) + eps)
  for _ in range(steps):
    s = x @ x.T
    x = a * x + (b * s + c * s @ s) @ x
  return x.T if tall else x

def np_muon_matrix(p, g, lr, beta=0.95, steps=3):
  m = 0.0
  for t in range(1, steps + 1):
    m = beta * m + (1 - beta) * g
    mu_hat = beta * m / (1 - beta ** (t + 1)) + (1 - beta) * g / (1 - beta ** t)
    p = p - lr * np_newton_schulz(mu_hat) * np.sqrt(max(1.0, p.shape[0] / p.shape[1]))
  return p

@pytest.mark.parametrize('name, tx, ref', [
  ('sgd', optim.sgd(0.1), lambda p, g: np_sgd(p, g, 0.1)),
  ('momentum', optim.sgd(0.1, 0.9), lambda p, g: np_sgd(p, g, 0.1, 0.9)),
  ('nesterov+wd', optim.sgd(0.1, 0.9, True, 0.01), lambda p, g: np_sgd(p, g, 0.1, 0.9, True, 0.01)),
  ('adam', optim.adam(0.1), lambda p, g: np_adam(p, g, 0.1)),
  ('adamw', optim.adamw(0.1, weight_decay=0.1), lambda p, g: np_adam(p, g, 0.1, wd=0.1)),
  ('lamb', optim.lamb(0.1, weight_decay=0.01), lambda p, g: np_lamb(p, g, 0.1, wd=0.01)),
  ('lars', optim.lars(0.1, weight_decay=0.01), lambda p, g: np_lars(p, g, 0.1, wd=0.01)),
])
def test_against_numpy_equations(name, tx, ref):
  got = run(tx)
  for k in P: np.testing.assert_allclose(got[k], ref(P[k].astype(np.float64), G[k]), rtol=1e-5, atol=1e-5)

def test_muon_against_numpy():
  got = run(optim.muon(0.1))
  np.testing.assert_allclose(got['w'], np_muon_matrix(P['w'].astype(np.float64), G['w'], 0.1), rtol=1e-4, atol=1e-5)
  # 1-D leaves fall back to Adam with Nesterov's look-ahead (NAdam), as optax.contrib.muon
  b, m, v = P['b'].astype(np.float64), 0.0, 0.0
  for t in range(1, 4):
    m, v = 0.9 * m + 0.1 * G['b'], 0.999 * v + 0.001 * G['b'] ** 2
    mu_hat = 0.9 * m / (1 - 0.9 ** (t + 1)) + 0.1 * G['b'] / (1 - 0.9 ** t)
    b = b - 0.1 * mu_hat / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
  np.testing.assert_allclose(got['b'], b, rtol=1e-5, atol=1e-5)

def test_orthogonalize_makes_singular_values_near_one():
  x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
  s = np.linalg.svd(np.asarray(optim.orthogonalize(jnp.asarray(x))), compute_uv=False)
  assert np.all((s > 0.6) & (s < 1.25)), s   # Muon's quintic iteration lands in about [0.7, 1.2]

# Params after 3 steps from P with constant gradients G, computed with Optax 0.2.8 (sgd+wd is
# chain(add_decayed_weights(0.01), sgd(0.1, 0.9, nesterov=True)); muon was run on transposed weights, since
# optax lays 2-D weights out as (in, out)).
OPTAX = {
  'sgd': ([[0.750912, -2.06428], [0.656684, -0.023814], [0.059021, 0.278744]], [-0.704313, 0.203362]),
  'adam': ([[0.700002, -2.299998], [0.799998, 2e-06], [-0.199998, 0.499998]], [-0.199998, 0.099998]),
  'adamw': ([[0.673291, -2.237606], [0.782157, -0.005918], [-0.199978, 0.491068]], [-0.199978, 0.102948]),
  'lars': ([[0.999281, -2.000186], [0.500452, 0.299065], [0.099882, 0.200227]], [0.099888, -0.199944]),
  'lamb': ([[0.703602, -2.287592], [0.791996, 0.005656], [-0.193752, 0.492875]], [0.056903, -0.15686]),
  'clip': ([[0.64, -2.12], [0.74, -0.18], [0.04, 0.32]], [-1.1, 0.4]),
  'muon': ([[0.754378, -2.075576], [0.68005, -0.051208], [0.054988, 0.287802]], [-0.270919, 0.170919]),
}
TXS = {'sgd': lambda: optim.sgd(0.1, 0.9, True, 0.01), 'adam': lambda: optim.adam(0.1),
       'adamw': lambda: optim.adamw(0.1, weight_decay=0.1), 'lars': lambda: optim.lars(0.1, weight_decay=0.01),
       'lamb': lambda: optim.lamb(0.1, weight_decay=0.01), 'muon': lambda: optim.muon(0.1),
       'clip': lambda: optim.chain(optim.clip_by_global_norm(0.5), optim.sgd(1.0))}

@pytest.mark.parametrize('name', sorted(OPTAX))
def test_against_optax_known_answers(name):
  got = run(TXS[name]())
  w, b = OPTAX[name]
  np.testing.assert_allclose(got['w'], w, atol=2e-6)
  np.testing.assert_allclose(got['b'], b, atol=2e-6)

def test_clip_by_global_norm_leaves_small_updates():
  tx = optim.clip_by_global_norm(10.0)
  u, _ = tx.update({k: jnp.asarray(v) for k, v in G.items()}, tx.init(P))
  for k in G: np.testing.assert_allclose(np.asarray(u[k]), G[k])
  norm = float(optim.global_norm({k: jnp.asarray(v) for k, v in G.items()}))
  assert abs(norm - np.sqrt(sum((v ** 2).sum() for v in G.values()))) < 1e-6

def test_weight_decay_mask():
  tx = optim.adamw(0.1, weight_decay=0.1, mask={'w': True, 'b': False})
  got = run(tx)
  np.testing.assert_allclose(got['b'], np_adam(P['b'].astype(np.float64), G['b'], 0.1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got['w'], np_adam(P['w'].astype(np.float64), G['w'], 0.1, wd=0.1), rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match='needs params'): tx.update(G, tx.init(P))

def test_learning_rate_schedule_in_optimizer():
  sched = optim.piecewise_constant_schedule(0.1, {1: 0.5, 2: 0.0})
  got = run(optim.sgd(sched))
  np.testing.assert_allclose(got['b'], P['b'] - 0.1 * G['b'] - 0.05 * G['b'], rtol=1e-6)

STEPS = [0, 1, 5, 10, 37, 100, 150]
@pytest.mark.parametrize('sched, want', [   # optax 0.2.8's values at STEPS
  (optim.linear_schedule(1.0, 0.1, 100, 5), [1.0, 1.0, 1.0, 0.955, 0.712, 0.145, 0.1]),
  (optim.cosine_decay_schedule(2.0, 100, 0.1, 2.0), [2.0, 1.999112, 1.977907, 1.91298, 1.07841, 0.2, 0.2]),
  (optim.warmup_cosine_decay_schedule(0.1, 1.0, 10, 100, 0.05), [0.1, 0.19, 0.55, 1.0, 0.804198, 0.05, 0.05]),
  (optim.piecewise_constant_schedule(1.0, {10: 0.5, 37: 0.1}), [1.0, 1.0, 1.0, 0.5, 0.05, 0.05, 0.05]),
  (optim.constant_schedule(0.3), [0.3] * 7),
])
def test_schedules(sched, want):
  np.testing.assert_allclose([float(sched(t)) for t in STEPS], want, atol=1e-5)
  np.testing.assert_allclose(float(sched(jnp.asarray(37))), want[4], atol=1e-5)   # array step counts too

# ---------------------------------------------------------------- both styles inside jit

def loss_fn(model, x, y):
  return jnp.mean((model(x) - y) ** 2)

def data():
  rng = np.random.default_rng(1)
  x = rng.standard_normal((16, 3)).astype(np.float32)
  return jnp.asarray(x), jnp.asarray(x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3)

def test_functional_style_in_jit_matches_eager():
  model = nn.Linear(3, 1, key=random.PRNGKey(0))
  tx = optim.adam(0.05)
  x, y = data()
  def step(model, opt_state):
    loss, grads = tinyjx.value_and_grad(loss_fn)(model, x, y)
    updates, opt_state = tx.update(grads, opt_state, model)
    return optim.apply_updates(model, updates), opt_state, loss
  jstep = tinyjx.jit(step)
  m1, s1 = model, tx.init(model)
  m2, s2 = model, tx.init(model)
  losses = []
  for _ in range(5):
    m1, s1, l1 = jstep(m1, s1)
    m2, s2, l2 = step(m2, s2)
    losses.append(float(l1))
    np.testing.assert_allclose(float(l1), float(l2), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(m1.weight), np.asarray(m2.weight), rtol=1e-5, atol=1e-5)
  assert losses[-1] < losses[0]

def test_stateful_wrapper_in_jit_skips_batchnorm_statistics():
  keys = random.split(random.PRNGKey(0), 2)
  model = nn.Sequential(nn.Linear(3, 4, key=keys[0]), nn.BatchNorm(4), nn.Linear(4, 1, key=keys[1]))
  opt = optim.AdamW(model, lr=0.05, weight_decay=0.5)
  x, y = data()
  @tinyjx.jit
  def step(opt):
    def loss(m):
      out, m = m(x, train=True)
      return jnp.mean((out - y) ** 2), m
    (l, new_model), grads = tinyjx.value_and_grad(loss, has_aux=True)(opt.model)
    opt.step(grads, model=new_model)
    return opt, l
  losses = []
  for _ in range(4):
    opt, l = step(opt)
    losses.append(float(l))
  assert losses[-1] < losses[0]
  bn = opt.model[1]
  h = np.asarray(x) @ np.asarray(model[0].weight).T + np.asarray(model[0].bias)
  # the first step's statistics are the batch's, moved by momentum (weight decay never touches them)
  assert not np.allclose(np.asarray(bn.running_mean), 0) and np.all(np.asarray(bn.running_var) > 0)
  assert opt.state[0].count.item() == 4
  assert np.abs(np.asarray(opt.model[0].weight) - np.asarray(model[0].weight)).max() > 1e-3
  assert h.shape == (16, 4)

def test_stateful_wrapper_eager():
  model = nn.Linear(3, 1, key=random.PRNGKey(0))
  x, y = data()
  for make in (optim.SGD, optim.Adam, optim.LAMB, optim.LARS):
    opt = make(model, lr=0.05) if make is not optim.LARS else make(model, lr=1.0, trust_coefficient=0.1)
    first = float(loss_fn(opt.model, x, y))
    for _ in range(5):
      grads = tinyjx.grad(loss_fn)(opt.model, x, y)
      new = opt.step(grads)
    assert new is opt.model and float(loss_fn(new, x, y)) < first, make.__name__
  two_layers = nn.Sequential(nn.Linear(3, 4, key=random.PRNGKey(0)), nn.Linear(4, 1, key=random.PRNGKey(1)))
  opt = optim.Muon(two_layers, lr=0.02)
  first = float(loss_fn(opt.model, x, y))
  for _ in range(5): opt.step(tinyjx.grad(loss_fn)(opt.model, x, y))
  assert float(loss_fn(opt.model, x, y)) < first

def test_wrapper_never_decays_running_statistics():
  bn = nn.BatchNorm(3)
  bn = bn.replace(running_mean=jnp.full((3,), 2.0), running_var=jnp.full((3,), 4.0))
  opt = optim.AdamW(bn, lr=0.1, weight_decay=0.5)
  zeros = tinyjx.tree_util.tree_map(jnp.zeros_like, bn)
  new = opt.step(zeros)
  np.testing.assert_array_equal(np.asarray(new.running_mean), [2.0] * 3)
  np.testing.assert_array_equal(np.asarray(new.running_var), [4.0] * 3)
  np.testing.assert_allclose(np.asarray(new.weight), [1 - 0.1 * 0.5] * 3, rtol=1e-6)   # decayed: it is trained
  assert opt.state[0].mu.running_mean is None   # no optimizer state is kept for the statistics
