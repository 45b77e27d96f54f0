"""Smoke tests of the training examples on synthetic data: the beautiful_mnist CNN's jitted step lowers the loss
and updates the BatchNorm statistics, and the functional MLP step does the same."""
import os, sys
import numpy as np
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.random as random
import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'examples'))
import mnist, mlp  # noqa: E402

def synthetic(n: int, seed: int = 0):
  """Images whose label says whether the top half is brighter than the bottom half."""
  rng = np.random.default_rng(seed)
  x = rng.integers(0, 256, (n, 1, 28, 28)).astype(np.uint8)
  y = (x[:, 0, :14].mean((1, 2)) > x[:, 0, 14:].mean((1, 2))).astype(np.int32)
  return x, y

def test_cnn_train_step_lowers_the_loss():
  x, y = synthetic(8)
  model = mnist.make_model(random.PRNGKey(0))
  assert [p.shape for p in nn.state.get_parameters(model)][:2] == [(32, 1, 5, 5), (32,)]
  opt = nn.optim.Adam(model, lr=1e-3)
  step = mnist.make_train_step()
  losses = []
  for _ in range(3):
    opt, loss, acc = step(opt, x, y)
    losses.append(float(loss))
  assert losses[-1] < 0.5 * losses[0], losses
  bn = opt.model[4]
  assert not np.allclose(np.asarray(bn.running_mean), 0.0)
  assert opt.state[0].count.item() == 3
  preds = np.asarray(mnist.predict(opt.model, x))
  assert preds.shape == (8,) and set(preds.tolist()) <= set(range(10))

def test_mlp_train_step_lowers_the_loss():
  x, y = synthetic(32, seed=1)
  params = mlp.init_params(random.PRNGKey(0), sizes=(784, 16, 10))
  tx = nn.optim.adam(3e-3)
  state = tx.init(params)
  step = mlp.make_train_step(tx)
  losses = []
  for _ in range(5):
    params, state, loss, acc = step(params, state, x, y)
    losses.append(float(loss))
  assert losses[-1] < losses[0], losses

def test_per_example_grads_example(capsys):
  import per_example_grads
  per_example_grads.main()   # asserts vmap(grad) against a loop and against grad of the mean loss
  out = capsys.readouterr().out
  assert out.rstrip().endswith('ok') and '(8, 32, 20)' in out
