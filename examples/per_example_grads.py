#!/usr/bin/env python3
"""Per-example gradients with `vmap(grad(loss))`, and what they are for: per-example gradient norms and a
DP-SGD-style step that clips each example's gradient before averaging.

    python examples/per_example_grads.py

`grad(loss)(model, x, y)` is the gradient for one example; `vmap` over the examples (in_axes=(None, 0, 0): the
model is shared, x and y are batched) gives one gradient per example in a single jitted program, with the
same pytree structure as the model plus a leading batch axis. The script checks the result against a Python
loop over the examples and against `grad` of the mean loss.
"""
import numpy as np
import tinyjx
import tinyjx.numpy as jnp
import tinyjx.nn as jnn
import tinyjx.random as random
from tinyjx import tree_util
import nn

class MLP(nn.Module):
  def __init__(self, key):
    k1, k2 = random.split(key)
    self.l1, self.l2 = nn.Linear(20, 32, key=k1), nn.Linear(32, 3, key=k2)
  def __call__(self, x): return self.l2(jnn.relu(self.l1(x)))

def loss(model, x, y):
  """Cross-entropy of one example (x: (20,), y: an int)."""
  return nn.cross_entropy(model(x[None]), y[None])

per_example_grads = tinyjx.jit(tinyjx.vmap(tinyjx.grad(loss), in_axes=(None, 0, 0)))

@tinyjx.jit
def private_step(model, xs, ys, clip: float = 1.0, lr: float = 0.1):
  """Clip every example's gradient to norm <= clip, average, and take an SGD step (DP-SGD without the noise)."""
  grads = tinyjx.vmap(tinyjx.grad(loss), in_axes=(None, 0, 0))(model, xs, ys)
  norms = jnp.sqrt(sum(jnp.sum(jnp.square(g).reshape(g.shape[0], -1), axis=1) for g in tree_util.tree_leaves(grads)))
  factor = jnp.minimum(1.0, clip / (norms + 1e-12))
  mean = tree_util.tree_map(lambda g: jnp.mean(g * factor.reshape((-1,) + (1,) * (g.ndim - 1)), axis=0), grads)
  return tree_util.tree_map(lambda p, g: p - lr * g, model, mean), norms

def main():
  key_model, key_x, key_y = random.split(random.PRNGKey(0), 3)
  model = MLP(key_model)
  xs = random.normal(key_x, (8, 20))
  ys = random.randint(key_y, (8,), 0, 3)

  grads = per_example_grads(model, xs, ys)
  print("per-example gradient of l1.weight:", grads.l1.weight.shape, "(batch, out, in)")
  loop = [tinyjx.grad(loss)(model, xs[i], ys[i]) for i in range(len(xs))]
  diff = max(float(jnp.max(jnp.abs(g[i] - leaf)))
             for i, one in enumerate(loop)
             for g, leaf in zip(tree_util.tree_leaves(grads), tree_util.tree_leaves(one)))
  print(f"max |vmap(grad) - loop of grad|: {diff:.2e}")
  batch_grad = tinyjx.grad(lambda m: nn.cross_entropy(m(xs), ys))(model)
  mean_diff = max(float(jnp.max(jnp.abs(jnp.mean(g, axis=0) - b)))
                  for g, b in zip(tree_util.tree_leaves(grads), tree_util.tree_leaves(batch_grad)))
  print(f"max |mean of per-example grads - grad of mean loss|: {mean_diff:.2e}")

  for step in range(3):
    model, norms = private_step(model, xs, ys)
    print(f"step {step}: per-example gradient norms", ' '.join(f"{n:.3f}" for n in np.asarray(norms)))
  assert diff < 1e-5 and mean_diff < 1e-5, "per-example gradients disagree with the loop"
  print("ok")

if __name__ == '__main__':
  main()
