#!/usr/bin/env python3
"""Train an MLP on Fashion-MNIST (or MNIST) in the functional Optax style: params are a dict of arrays, the
optimizer is a pure (init, update) pair, and one jitted function does forward, gradient and update.

    python examples/mlp.py                       # Fashion-MNIST, the defaults reach 88% test accuracy
    python examples/mlp.py --dataset mnist

Nothing here is stateful: `train_step(params, opt_state, x, y) -> (params, opt_state, loss, accuracy)` is a pure
function, compiled once by `tinyjx.jit` and called with new batches. The last line is `test accuracy: NN.NN%`.
"""
import argparse, os, sys, time
import numpy as np
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.nn as jnn
import tinyjx.random as random
import nn

def init_params(key, sizes=(784, 512, 512, 10)) -> dict:
  """{'layers': [{'w': (in, out), 'b': (out,)}, ...]} with LeCun-normal weights and zero biases."""
  keys = random.split(key, len(sizes) - 1)
  return {'layers': [{'w': nn.init.lecun_normal()(k, (n_out, n_in)).T, 'b': jnp.zeros((n_out,))}
                     for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:])]}

def mlp(params, x):
  x = x.reshape(x.shape[0], -1).astype(jnp.float32) * (1.0 / 255.0)
  *hidden, last = params['layers']
  for layer in hidden: x = jnn.relu(x @ layer['w'] + layer['b'])
  return x @ last['w'] + last['b']

def loss_fn(params, x, y):
  logits = mlp(params, x)
  return nn.cross_entropy(logits, y), logits

def make_train_step(tx):
  @tinyjx.jit
  def train_step(params, opt_state, x, y):
    (loss, logits), grads = tinyjx.value_and_grad(loss_fn, has_aux=True)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    accuracy = jnp.mean((jnp.argmax(logits, axis=-1) == y).astype(jnp.float32))
    return nn.optim.apply_updates(params, updates), opt_state, loss, accuracy
  return train_step

@tinyjx.jit
def predict(params, x): return jnp.argmax(mlp(params, x), axis=-1)

def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument('--steps', type=int, default=1000)
  ap.add_argument('--batch-size', type=int, default=256)
  ap.add_argument('--lr', type=float, default=2e-3, help='peak learning rate of the warmup-cosine schedule')
  ap.add_argument('--dataset', choices=('fashion', 'mnist'), default='fashion')
  ap.add_argument('--seed', type=int, default=0)
  ap.add_argument('--checkpoint', default=None, help='where to save the weights (default: in ~/.cache/tinyjx)')
  args = ap.parse_args(argv)

  load = nn.datasets.fashion_mnist if args.dataset == 'fashion' else nn.datasets.mnist
  X_train, Y_train, X_test, Y_test = (np.asarray(a) for a in load())
  params = init_params(random.PRNGKey(args.seed))
  tx = nn.optim.chain(nn.optim.clip_by_global_norm(1.0), nn.optim.adamw(
    nn.optim.warmup_cosine_decay_schedule(0.0, args.lr, max(1, args.steps // 20), args.steps), weight_decay=1e-4))
  opt_state = tx.init(params)
  train_step = make_train_step(tx)
  rng = np.random.default_rng(args.seed)
  start = time.perf_counter()
  for step in range(1, args.steps + 1):
    idx = rng.integers(0, len(X_train), args.batch_size)
    params, opt_state, loss, acc = train_step(params, opt_state, X_train[idx], Y_train[idx])
    if step == 1: first = time.perf_counter()
    if step % max(1, args.steps // 10) == 0 or step == args.steps:
      rate = (step - 1) / max(time.perf_counter() - first, 1e-9)
      print(f"step {step:>5}/{args.steps}  loss {float(loss):.4f}  acc {float(acc) * 100:5.1f}%  {rate:6.1f} steps/s",
            file=sys.stderr, flush=True)
  print(f"trained {args.steps} steps of {args.batch_size} in {time.perf_counter() - start:.1f}s", flush=True)

  correct = sum(int(jnp.sum(predict(params, X_test[i:i + 2000]) == Y_test[i:i + 2000]))
                for i in range(0, len(X_test), 2000))
  path = args.checkpoint or os.path.join(os.path.expanduser('~'), '.cache', 'tinyjx', 'checkpoints',
                                         f"mlp_{args.dataset}.safetensors")
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  nn.state.safe_save(nn.state.get_state_dict(params), path)
  print(f"saved checkpoint to {path}")
  print(f"test accuracy: {correct / len(X_test) * 100:.2f}%")
  return correct / len(X_test)

if __name__ == '__main__':
  main()
