#!/usr/bin/env python3
"""Data-parallel training of an MLP (784-128-10) with pmap: each device gets an equal slice of the global batch,
computes the gradient of its slice, and `lax.pmean` averages the gradients over the devices, so every device
takes the same SGD step. Alongside, the same model is trained on one device on the same global batches, and the
script checks that the two loss trajectories agree (up to float rounding: the sums happen in another order).

    python examples/data_parallel.py --devices 8                  # 8 virtual CPU devices in one process
    mpirun -n 2 python examples/data_parallel.py --devices 2      # 2 processes x 2 devices = 4 devices

Under mpirun (as root add --allow-run-as-root, or set OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
each process feeds its own devices' slices; the global batch is the same everywhere. The data is synthetic by
default (Gaussian images labelled by a fixed random teacher), or Fashion-MNIST with --dataset fashion.
The last line is `max loss difference: ...` and the exit status is 1 if the trajectories disagree.
"""
import argparse, os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import tinyjx  # noqa: E402
import tinyjx.numpy as jnp  # noqa: E402
import tinyjx.nn as jnn  # noqa: E402
from tinyjx import lax, tree_util  # noqa: E402

def init_params(seed: int, sizes=(784, 128, 10)) -> list:
  """He-normal weights and zero biases, the same on every process (drawn with numpy from one seed)."""
  rng = np.random.default_rng(seed)
  return [{'w': (rng.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32), 'b': np.zeros(n, np.float32)}
          for m, n in zip(sizes[:-1], sizes[1:])]

def predict(params, x):
  *hidden, last = params
  for layer in hidden: x = jnn.relu(x @ layer['w'] + layer['b'])
  return x @ last['w'] + last['b']

def loss_fn(params, x, y):
  logp = jnn.log_softmax(predict(params, x))
  return -jnp.mean(jnp.sum(logp * jnn.one_hot(y, 10), axis=-1))

def sgd(params, grads, lr: float):
  return tree_util.tree_map(lambda p, g: p - lr * g, params, grads)

def parallel_step(lr: float):
  """One step on every device: local gradients, averaged over the 'batch' axis, then the same update."""
  def step(params, x, y):
    loss, grads = tinyjx.value_and_grad(loss_fn)(params, x, y)
    return sgd(params, lax.pmean(grads, 'batch'), lr), lax.pmean(loss, 'batch')
  return tinyjx.pmap(step, axis_name='batch')

def single_step(lr: float):
  @tinyjx.jit
  def step(params, x, y):
    loss, grads = tinyjx.value_and_grad(loss_fn)(params, x, y)
    return sgd(params, grads, lr), loss
  return step

def batches(dataset: str, batch: int, steps: int, seed: int):
  """`steps` global batches (x float32 (batch, 784), y int32 (batch,)), identical on every process."""
  rng = np.random.default_rng(seed + 1)
  if dataset == 'fashion':
    import nn
    X, Y = (np.asarray(a) for a in nn.datasets.fashion_mnist()[:2])
    X = X.reshape(len(X), -1).astype(np.float32) / 255.0
    for _ in range(steps):
      idx = rng.integers(0, len(X), batch)
      yield X[idx], Y[idx].astype(np.int32)
    return
  teacher = rng.standard_normal((784, 10)).astype(np.float32)
  for _ in range(steps):
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    yield x, np.argmax(x @ teacher, axis=1).astype(np.int32)

def train(steps: int = 10, batch: int = 256, lr: float = 0.1, dataset: str = 'synthetic', seed: int = 0,
          log=None) -> tuple[list, list]:
  """Train data-parallel and on one device side by side; returns both loss trajectories."""
  tinyjx.distributed.initialize()
  n_local, n_all, me = tinyjx.local_device_count(), tinyjx.device_count(), tinyjx.process_index()
  if batch % n_all:
    raise ValueError(f"the global batch {batch} must split evenly over {n_all} devices")
  per = batch // n_all
  mine = slice(me * n_local * per, (me + 1) * n_local * per)   # this process's devices' part of each batch
  params = init_params(seed)
  replicated = tinyjx.device_put_replicated(params, tinyjx.local_devices())   # a copy on each local device
  step_all, step_one = parallel_step(lr), single_step(lr)
  losses_all, losses_one = [], []
  for i, (x, y) in enumerate(batches(dataset, batch, steps, seed)):
    t0 = time.perf_counter()
    replicated, loss = step_all(replicated, x[mine].reshape(n_local, per, -1), y[mine].reshape(n_local, per))
    losses_all.append(float(loss[0]))
    t1 = time.perf_counter()
    params, loss = step_one(params, x, y)
    losses_one.append(float(loss))
    if log: log(f"step {i:3d}  loss on {n_all} devices {losses_all[-1]:.6f} ({(t1 - t0) * 1e3:6.1f} ms)  "
                f"on one device {losses_one[-1]:.6f}")
  return losses_all, losses_one

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument('--devices', type=int, default=None, help='virtual devices per process (default: TINYJX_CPU_DEVICES '
                  'or 8 when that is unset)')
  ap.add_argument('--steps', type=int, default=20)
  ap.add_argument('--batch-size', type=int, default=256, help='the global batch, split over all devices')
  ap.add_argument('--lr', type=float, default=0.1)
  ap.add_argument('--dataset', choices=('synthetic', 'fashion'), default='synthetic')
  ap.add_argument('--seed', type=int, default=0)
  args = ap.parse_args(argv)
  n = args.devices or (None if 'TINYJX_CPU_DEVICES' in os.environ else 8)
  if n: tinyjx.set_cpu_devices(n)
  tinyjx.distributed.initialize()
  talk = tinyjx.process_index() == 0
  if talk: print(f"{tinyjx.process_count()} process(es) x {tinyjx.local_device_count()} devices: {tinyjx.devices()}")
  losses_all, losses_one = train(args.steps, args.batch_size, args.lr, args.dataset, args.seed,
                                 log=print if talk else None)
  diff = float(np.max(np.abs(np.array(losses_all) - np.array(losses_one))))
  ok = np.allclose(losses_all, losses_one, rtol=1e-4, atol=1e-5)
  if talk:
    print(f"loss {losses_all[0]:.4f} -> {losses_all[-1]:.4f}; trajectories {'agree' if ok else 'DIFFER'}")
    print(f"max loss difference: {diff:.2e}")
  return 0 if ok else 1

if __name__ == '__main__':
  sys.exit(main())
