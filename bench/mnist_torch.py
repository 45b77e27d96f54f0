#!/usr/bin/env python3
"""The main job (examples/mnist.py) in PyTorch, for comparing wall time: the same CNN, steps, batch and schedule.

    python bench/mnist_torch.py                   # with a Python that has a CPU build of PyTorch
    python bench/mnist_torch.py --steps 200

Model: two 5x5 convolutions, batch norm, max pooling, two 3x3 convolutions, batch norm, max pooling and a linear
layer (tinygrad's beautiful_mnist, as examples/mnist.py builds it), trained with Adam on a warmup-cosine learning
rate (warmup over steps/20), batches sampled on the host from the uint8 images and scaled in the step, evaluated
in batches of 1000. The data comes from tinyjx's `nn.datasets` (the same files), so both runs see the same images.
Prints the training time (and the first step's), the test accuracy, and the whole wall time, like the example.
PyTorch is a peer here, never a dependency of tinyjx.
"""
import argparse, math, os, sys, time
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def make_model(torch):
  nn = torch.nn
  return nn.Sequential(
    nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(576, 10))

def warmup_cosine(step: int, warmup: int, total: int) -> float:
  """The factor on the peak learning rate: nn.optim.warmup_cosine_decay_schedule(0, 1, warmup, total)(step)."""
  if step < warmup: return step / warmup
  return 0.5 * (1 + math.cos(math.pi * min(step - warmup, total - warmup) / max(total - warmup, 1)))

def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument('--steps', type=int, default=1200)
  ap.add_argument('--batch-size', type=int, default=256)
  ap.add_argument('--lr', type=float, default=3e-3)
  ap.add_argument('--dataset', choices=('fashion', 'mnist'), default='fashion')
  ap.add_argument('--seed', type=int, default=0)
  args = ap.parse_args(argv)
  t_start = time.perf_counter()
  import torch
  sys.path.insert(0, ROOT)
  import nn as tjnn                                # only for its data loader
  load = tjnn.datasets.fashion_mnist if args.dataset == 'fashion' else tjnn.datasets.mnist
  X_train, Y_train, X_test, Y_test = (np.asarray(a) for a in load())
  torch.manual_seed(args.seed)
  model = make_model(torch)
  opt = torch.optim.Adam(model.parameters(), lr=args.lr)
  warmup = max(1, args.steps // 20)
  sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, warmup, args.steps))
  rng = np.random.default_rng(args.seed)
  loss_fn = torch.nn.CrossEntropyLoss()
  start = time.perf_counter()
  for step in range(1, args.steps + 1):
    idx = rng.integers(0, len(X_train), args.batch_size)
    x = torch.from_numpy(X_train[idx]).float() * (1.0 / 255.0)
    y = torch.from_numpy(np.asarray(Y_train[idx], np.int64))
    model.train()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
    if step == 1: first = time.perf_counter()
    if step % max(1, args.steps // 20) == 0 or step == args.steps:
      rate = (step - 1) / max(time.perf_counter() - first, 1e-9)
      print(f"step {step:>5}/{args.steps} loss {float(loss):.4f}  {rate:5.2f} steps/s", file=sys.stderr, flush=True)
  train_time = time.perf_counter() - start
  print(f"trained {args.steps} steps of {args.batch_size} in {train_time:.1f}s (first step: {first - start:.1f}s)")
  model.eval()
  correct = 0
  with torch.no_grad():
    for i in range(0, len(X_test), 1000):
      x = torch.from_numpy(X_test[i:i + 1000]).float() * (1.0 / 255.0)
      correct += int((model(x).argmax(-1).numpy() == np.asarray(Y_test[i:i + 1000])).sum())
  print(f"test accuracy: {100 * correct / len(X_test):.2f}%")
  print(f"wall time: {time.perf_counter() - t_start:.1f}s")

if __name__ == '__main__':
  main()
