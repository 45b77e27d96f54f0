#!/usr/bin/env python3
"""Train tinygrad's beautiful_mnist CNN on Fashion-MNIST (or MNIST) with a jitted training step.

    python examples/mnist.py                      # Fashion-MNIST, the defaults reach 91% test accuracy
    python examples/mnist.py --dataset mnist --steps 200

The model: two 5x5 convolutions, batch norm, max pooling, two 3x3 convolutions, batch norm, max pooling and a
linear layer, as an `nn.Sequential`. One training step (forward, loss, `value_and_grad`, the Adam update and the
new BatchNorm statistics) is a single `tinyjx.jit`-compiled function of (optimizer, images, labels); the
optimizer is the tinygrad-style `nn.optim.Adam` wrapper, which holds the model and is itself a pytree, so the
step takes it in and returns it. Batches are sampled on the host from the uint8 images and scaled inside the
step. The script prints a progress bar (loss, accuracy, steps/s), the test accuracy with the running statistics,
saves a safetensors checkpoint, and ends with the line `test accuracy: NN.NN%`.

The data comes from `nn.datasets` (Debian's dataset-fashion-mnist package, TINYJX_DATA_DIR, or the cache).
"""
import argparse, os, sys, time
import numpy as np
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.nn as jnn
import tinyjx.random as random
import nn

def make_model(key):
  k = random.split(key, 5)
  return nn.Sequential(
    nn.Conv2d(1, 32, 5, key=k[0]), jnn.relu, nn.Conv2d(32, 32, 5, key=k[1]), jnn.relu, nn.BatchNorm(32),
    nn.max_pool2d,
    nn.Conv2d(32, 64, 3, key=k[2]), jnn.relu, nn.Conv2d(64, 64, 3, key=k[3]), jnn.relu, nn.BatchNorm(64),
    nn.max_pool2d,
    nn.flatten, nn.Linear(576, 10, key=k[4]))

def scaled(x): return x.astype(jnp.float32) * (1.0 / 255.0)

def make_train_step():
  @tinyjx.jit
  def train_step(opt, x, y):
    def loss_fn(model):
      logits, model = model(scaled(x), train=True)   # model comes back with new BatchNorm statistics
      return nn.cross_entropy(logits, y), (model, logits)
    (loss, (model, logits)), grads = tinyjx.value_and_grad(loss_fn, has_aux=True)(opt.model)
    opt.step(grads, model=model)
    accuracy = jnp.mean((jnp.argmax(logits, axis=-1) == y).astype(jnp.float32))
    return opt, loss, accuracy
  return train_step

@tinyjx.jit
def predict(model, x): return jnp.argmax(model(scaled(x)), axis=-1)

def evaluate(model, X, Y, batch: int = 1000) -> float:
  correct = sum(int(jnp.sum(predict(model, X[i:i + batch]) == Y[i:i + batch])) for i in range(0, len(X), batch))
  return correct / len(X)

def progress(step: int, total: int, loss: float, acc: float, rate: float, width: int = 30) -> str:
  done = int(width * step / total)
  return (f"\rstep {step:>5}/{total} [{'=' * done}{'>' if done < width else ''}{' ' * (width - done - 1)}] "
          f"loss {loss:.4f}  acc {acc * 100:5.1f}%  {rate:5.2f} steps/s")

def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument('--steps', type=int, default=1200, help='training steps (default 1200)')
  ap.add_argument('--batch-size', type=int, default=256, help='examples per step (default 256)')
  ap.add_argument('--lr', type=float, default=3e-3, help='peak learning rate of the warmup-cosine schedule')
  ap.add_argument('--dataset', choices=('fashion', 'mnist'), default='fashion')
  ap.add_argument('--seed', type=int, default=0)
  ap.add_argument('--checkpoint', default=None, help='where to save the weights (default: in ~/.cache/tinyjx)')
  args = ap.parse_args(argv)

  load = nn.datasets.fashion_mnist if args.dataset == 'fashion' else nn.datasets.mnist
  X_train, Y_train, X_test, Y_test = (np.asarray(a) for a in load())
  print(f"{args.dataset}: {len(X_train)} training and {len(X_test)} test images", flush=True)

  model = make_model(random.PRNGKey(args.seed))
  schedule = nn.optim.warmup_cosine_decay_schedule(0.0, args.lr, max(1, args.steps // 20), args.steps)
  opt = nn.optim.Adam(model, lr=schedule)
  train_step = make_train_step()
  rng = np.random.default_rng(args.seed)
  tty = sys.stderr.isatty()
  start = time.perf_counter()
  for step in range(1, args.steps + 1):
    idx = rng.integers(0, len(X_train), args.batch_size)
    opt, loss, acc = train_step(opt, X_train[idx], Y_train[idx])
    if step == 1: first = time.perf_counter()
    if tty or step % max(1, args.steps // 20) == 0 or step == args.steps:
      rate = (step - 1) / max(time.perf_counter() - first, 1e-9) if step > 1 else 0.0
      bar = progress(step, args.steps, float(loss), float(acc), rate)
      print(bar if tty else bar[1:], end='' if tty else '\n', file=sys.stderr, flush=True)
  if tty: print(file=sys.stderr)
  train_time = time.perf_counter() - start
  print(f"trained {args.steps} steps of {args.batch_size} in {train_time:.1f}s (first step, with compiling: "
        f"{first - start:.1f}s)", flush=True)

  test_acc = evaluate(opt.model, X_test, Y_test)
  path = args.checkpoint or os.path.join(os.path.expanduser('~'), '.cache', 'tinyjx', 'checkpoints',
                                         f"cnn_{args.dataset}.safetensors")
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  nn.state.safe_save(nn.state.get_state_dict(opt.model), path, metadata={'steps': str(args.steps),
                                                                        'test_accuracy': f"{test_acc:.4f}"})
  print(f"saved checkpoint to {path}")
  print(f"test accuracy: {test_acc * 100:.2f}%")
  return test_acc

if __name__ == '__main__':
  main()
