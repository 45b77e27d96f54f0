"""nn.optim: optimizers as pure (init, update) pairs over pytrees, in Optax's shape, plus a thin stateful wrapper.

A `GradientTransformation` is a pair of pure functions: `init(params) -> state` and
`update(updates, state, params=None) -> (updates, state)`. Transformations compose with `chain`; `apply_updates`
adds the final updates to the params. Everything is plain tinyjx array math over pytrees (leaves that are None
are skipped), so a whole optimizer step runs inside `jit` and the states are pytrees that `jit` carries. Jit the
step: eagerly, tinyjx arrays are lazy, and a loop that never computes its params and state builds a longer graph
every step (call `tinyjx.block_until_ready((params, state))` each step if you must run eagerly).

The equations are Optax's (the aliases `sgd`, `adam`, `adamw`, `lars`, `lamb`, `muon` build the same chains);
learning rates are floats or schedules (functions of the step count, see `constant_schedule` ...).

The tinygrad-style wrapper: `opt = nn.optim.Adam(model, lr=1e-3)`; `model = opt.step(grads)` updates the
trainable leaves of `opt.model` (floating-point arrays outside `state_fields`, see `nn.trainable_mask`) and
the optimizer state in place, and returns the new model. An optimizer is itself a pytree, so inside a jitted
step pass it in and return it:

    @tinyjx.jit
    def train_step(opt, x, y):
      loss, grads = tinyjx.value_and_grad(loss_fn)(opt.model, x, y)
      opt.step(grads)
      return opt, loss
"""
from __future__ import annotations
import functools, math
from typing import Callable, NamedTuple
import tinyjx
import tinyjx.numpy as jnp
from tinyjx import tree_util
from nn.module import Module, trainable_mask, partition, combine

__all__ = ['GradientTransformation', 'chain', 'identity', 'scale', 'scale_by_schedule', 'scale_by_learning_rate',
           'scale_by_adam', 'scale_by_trust_ratio', 'scale_by_muon', 'trace', 'add_decayed_weights',
           'clip_by_global_norm', 'global_norm', 'multi_transform', 'apply_updates', 'sgd', 'adam', 'adamw',
           'lars', 'lamb', 'muon', 'orthogonalize', 'constant_schedule', 'linear_schedule', 'cosine_decay_schedule',
           'warmup_cosine_decay_schedule', 'piecewise_constant_schedule', 'Optimizer', 'SGD', 'Adam', 'AdamW',
           'LARS', 'LAMB', 'Muon']

class GradientTransformation(NamedTuple):
  """A pure optimizer piece: `init(params) -> state`, `update(updates, state, params=None) -> (updates, state)`."""
  init: Callable
  update: Callable

class EmptyState(NamedTuple):
  """The state of a transformation that keeps none."""

class ScaleByScheduleState(NamedTuple):
  count: tinyjx.Array

class ScaleByAdamState(NamedTuple):
  count: tinyjx.Array
  mu: object
  nu: object

class TraceState(NamedTuple):
  trace: object

class MuonState(NamedTuple):
  count: tinyjx.Array
  mu: object

def _tree_map(f, tree, *rest): return tree_util.tree_map(f, tree, *rest)
def _zeros_like(params): return _tree_map(jnp.zeros_like, params)
def _count0(): return jnp.zeros((), jnp.int32)

# ---------------------------------------------------------------- combinators and the small pieces

def chain(*transforms: GradientTransformation) -> GradientTransformation:
  """Apply `transforms` one after the other; the state is the tuple of their states.

  >>> import tinyjx.numpy as jnp
  >>> tx = chain(scale(2.0), scale(-0.5))
  >>> float(tx.update(jnp.ones(()), tx.init(jnp.ones(())))[0])
  -1.0
  """
  def init(params): return tuple(t.init(params) for t in transforms)
  def update(updates, state, params=None):
    new_state = []
    for t, s in zip(transforms, state):
      updates, s = t.update(updates, s, params)
      new_state.append(s)
    return updates, tuple(new_state)
  return GradientTransformation(init, update)

def identity() -> GradientTransformation:
  """Leaves updates unchanged."""
  return GradientTransformation(lambda params: EmptyState(), lambda u, s, p=None: (u, s))

def scale(step_size: float) -> GradientTransformation:
  """Multiply updates by `step_size`."""
  return GradientTransformation(lambda params: EmptyState(),
                                lambda u, s, p=None: (_tree_map(lambda g: g * step_size, u), s))

def scale_by_schedule(schedule: Callable) -> GradientTransformation:
  """Multiply updates by `schedule(count)`, count = the number of updates done before this one."""
  def update(updates, state, params=None):
    factor = schedule(state.count)
    return _tree_map(lambda g: (g * factor).astype(g.dtype), updates), ScaleByScheduleState(state.count + 1)
  return GradientTransformation(lambda params: ScaleByScheduleState(_count0()), update)

def scale_by_learning_rate(learning_rate, flip_sign: bool = True) -> GradientTransformation:
  """Multiply by -learning_rate (a float or a schedule): the last piece of every alias."""
  m = -1 if flip_sign else 1
  if callable(learning_rate): return scale_by_schedule(lambda count: m * learning_rate(count))
  return scale(m * learning_rate)

def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
  """Momentum: t = g + decay * t; the update is t, or g + decay * t with `nesterov`."""
  def update(updates, state, params=None):
    new = _tree_map(lambda g, t: g + decay * t, updates, state.trace)
    out = _tree_map(lambda g, t: g + decay * t, updates, new) if nesterov else new
    return out, TraceState(new)
  return GradientTransformation(lambda params: TraceState(_zeros_like(params)), update)

def _mask_tree(mask, params):
  if mask is None: return _tree_map(lambda p: True, params)
  return mask(params) if callable(mask) and not isinstance(mask, Module) else mask

def add_decayed_weights(weight_decay: float = 0.0, mask=None) -> GradientTransformation:
  """Add `weight_decay * param` to each update (decoupled weight decay). `mask` (a pytree of bools like the
  params, or a function of the params that returns one) picks the leaves to decay."""
  def update(updates, state, params=None):
    if params is None: raise ValueError("add_decayed_weights needs params: call update(updates, state, params)")
    if weight_decay == 0.0: return updates, state
    flags = tree_util.tree_structure(updates).flatten_up_to(_mask_tree(mask, params))
    leaves, treedef = tree_util.tree_flatten(updates)
    ps = tree_util.tree_structure(updates).flatten_up_to(params)
    return treedef.unflatten([g + weight_decay * p if m else g for g, p, m in zip(leaves, ps, flags)]), state
  return GradientTransformation(lambda params: EmptyState(), update)

def global_norm(tree) -> tinyjx.Array:
  """sqrt of the sum of squares of every leaf of `tree`."""
  return jnp.sqrt(sum((jnp.sum(jnp.square(x)) for x in tree_util.tree_leaves(tree)), jnp.zeros(())))

def clip_by_global_norm(max_norm: float) -> GradientTransformation:
  """Scale all updates by max_norm / global_norm when the global norm exceeds `max_norm`."""
  def update(updates, state, params=None):
    norm = global_norm(updates)
    factor = jnp.where(norm < max_norm, 1.0, max_norm / jnp.maximum(norm, 1e-30))
    return _tree_map(lambda g: (g * factor).astype(g.dtype), updates), state
  return GradientTransformation(lambda params: EmptyState(), update)

def _bias_correction(m, decay: float, count):
  return _tree_map(lambda x: x / (1 - decay ** count.astype(x.dtype)).astype(x.dtype), m)

def _nesterov_moment(mu, updates, decay: float, count):
  """Nesterov's look-ahead with bias correction (Optax):
  decay * mu / (1 - decay^(t+1)) + (1 - decay) * g / (1 - decay^t)."""
  return _tree_map(lambda m, g: decay * m + (1 - decay) * g, _bias_correction(mu, decay, count + 1),
                   _bias_correction(updates, decay, count))

def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0,
                  nesterov: bool = False) -> GradientTransformation:
  """Adam's scaling: mu = b1 mu + (1-b1) g, nu = b2 nu + (1-b2) g^2, update = mu_hat / (sqrt(nu_hat + eps_root) + eps)
  with the bias-corrected mu_hat = mu / (1 - b1^t), nu_hat = nu / (1 - b2^t) (NAdam's look-ahead mu_hat with
  `nesterov`)."""
  def init(params): return ScaleByAdamState(_count0(), _zeros_like(params), _zeros_like(params))
  def update(updates, state, params=None):
    mu = _tree_map(lambda g, m: (1 - b1) * g + b1 * m, updates, state.mu)
    nu = _tree_map(lambda g, v: (1 - b2) * jnp.square(g) + b2 * v, updates, state.nu)
    count = state.count + 1
    mu_hat = _nesterov_moment(mu, updates, b1, count) if nesterov else _bias_correction(mu, b1, count)
    nu_hat = _bias_correction(nu, b2, count)
    out = _tree_map(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_hat)
    return out, ScaleByAdamState(count, mu, nu)
  return GradientTransformation(init, update)

def scale_by_trust_ratio(min_norm: float = 0.0, trust_coefficient: float = 1.0,
                         eps: float = 0.0) -> GradientTransformation:
  """Layer-wise trust ratio (LARS, LAMB): each leaf's update times trust_coefficient * |param| / (|update| + eps),
  or times 1 where either norm is zero."""
  def ratio(u, p):
    p_norm = jnp.maximum(jnp.sqrt(jnp.sum(jnp.square(p))), min_norm)
    u_norm = jnp.maximum(jnp.sqrt(jnp.sum(jnp.square(u))), min_norm)
    r = trust_coefficient * p_norm / (u_norm + eps)
    return u * jnp.where((p_norm == 0.0) | (u_norm == 0.0), 1.0, r).astype(u.dtype)
  def update(updates, state, params=None):
    if params is None: raise ValueError("scale_by_trust_ratio needs params: call update(updates, state, params)")
    return _tree_map(ratio, updates, params), state
  return GradientTransformation(lambda params: EmptyState(), update)

def multi_transform(transforms: dict, labels) -> GradientTransformation:
  """A different transformation per group of leaves: `labels` (a pytree of labels like the params, or a function
  of the params returning one) names the key of `transforms` for each leaf."""
  def split(tree, label_tree, key):
    leaves, treedef = tree_util.tree_flatten(tree)
    names = tree_util.tree_structure(tree).flatten_up_to(label_tree)
    return treedef.unflatten([x if n == key else None for x, n in zip(leaves, names)])
  def label_tree(params): return labels(params) if callable(labels) and not isinstance(labels, Module) else labels
  def init(params):
    lt = label_tree(params)
    return {k: t.init(split(params, lt, k)) for k, t in transforms.items()}
  def update(updates, state, params=None):
    lt = label_tree(updates if params is None else params)
    parts, new_state = [], {}
    for k, t in transforms.items():
      u, new_state[k] = t.update(split(updates, lt, k), state[k], None if params is None else split(params, lt, k))
      parts.append(u)
    return combine(*parts), new_state
  return GradientTransformation(init, update)

# ---------------------------------------------------------------- Muon

NS_COEFFS = (3.4445, -4.7750, 2.0315)

def orthogonalize(x, steps: int = 5, eps: float = 1e-8, coeffs=NS_COEFFS):
  """The nearest semi-orthogonal matrix to `x` (2-D), approximately, by `steps` quintic Newton-Schulz iterations
  X <- a X + (b A + c A A) X with A = X X^T, starting from X = x / (|x|_F + eps) (Muon's iteration)."""
  a, b, c = coeffs
  tall = x.shape[0] > x.shape[1]
  if tall: x = x.T
  x = x / (jnp.sqrt(jnp.sum(jnp.square(x))) + eps)
  for _ in range(steps):
    s = x @ x.T
    x = a * x + (b * s + c * (s @ s)) @ x
  return x.T if tall else x

def scale_by_muon(beta: float = 0.95, steps: int = 5, eps: float = 1e-8,
                  nesterov: bool = True) -> GradientTransformation:
  """Muon's direction for 2-D leaves: bias-corrected momentum (Nesterov by default), orthogonalized by
  Newton-Schulz, scaled by sqrt(max(1, rows / cols)) (weights in (out, in) layout, as `nn.Linear` keeps them)."""
  def init(params): return MuonState(_count0(), _zeros_like(params))
  def update(updates, state, params=None):
    mu = _tree_map(lambda g, m: (1 - beta) * g + beta * m, updates, state.mu)
    count = state.count + 1
    mu_hat = _nesterov_moment(mu, updates, beta, count) if nesterov else _bias_correction(mu, beta, count)
    def direction(m): return orthogonalize(m, steps, eps) * math.sqrt(max(1.0, m.shape[0] / m.shape[1]))
    return _tree_map(direction, mu_hat), MuonState(count, mu)
  return GradientTransformation(init, update)

# ---------------------------------------------------------------- the aliases

def sgd(learning_rate, momentum: float | None = None, nesterov: bool = False, weight_decay: float = 0.0,
        mask=None) -> GradientTransformation:
  """SGD: params -= lr * (momentum trace of (g + weight_decay * p)).

  >>> import tinyjx.numpy as jnp
  >>> tx = sgd(0.1); p = jnp.ones(2)
  >>> apply_updates(p, tx.update(jnp.ones(2), tx.init(p), p)[0]).tolist()
  [0.8999999761581421, 0.8999999761581421]
  """
  parts = [add_decayed_weights(weight_decay, mask)] if weight_decay else []
  if momentum: parts.append(trace(momentum, nesterov))
  return chain(*parts, scale_by_learning_rate(learning_rate))

def adam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0,
         nesterov: bool = False) -> GradientTransformation:
  """Adam (Kingma and Ba): `scale_by_adam` then -learning_rate (NAdam with `nesterov`)."""
  return chain(scale_by_adam(b1, b2, eps, eps_root, nesterov), scale_by_learning_rate(learning_rate))

def adamw(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0,
          weight_decay: float = 1e-4, mask=None, nesterov: bool = False) -> GradientTransformation:
  """AdamW (Loshchilov and Hutter): Adam's direction plus decoupled weight decay, times -learning_rate."""
  return chain(scale_by_adam(b1, b2, eps, eps_root, nesterov), add_decayed_weights(weight_decay, mask),
               scale_by_learning_rate(learning_rate))

def lars(learning_rate, weight_decay: float = 0.0, mask=None, trust_coefficient: float = 0.001, eps: float = 0.0,
         momentum: float = 0.9, nesterov: bool = False) -> GradientTransformation:
  """LARS (You et al.): weight decay, the layer-wise trust ratio, -learning_rate, then momentum."""
  return chain(add_decayed_weights(weight_decay, mask), scale_by_trust_ratio(0.0, trust_coefficient, eps),
               scale_by_learning_rate(learning_rate), trace(momentum, nesterov))

def lamb(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6, eps_root: float = 0.0,
         weight_decay: float = 0.0, mask=None) -> GradientTransformation:
  """LAMB (You et al.): Adam's direction, weight decay, the layer-wise trust ratio, then -learning_rate."""
  return chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask), scale_by_trust_ratio(),
               scale_by_learning_rate(learning_rate))

def muon(learning_rate, beta: float = 0.95, steps: int = 5, eps: float = 1e-8, nesterov: bool = True,
         weight_decay: float = 0.0, adam_b1: float = 0.9, adam_b2: float = 0.999, adam_learning_rate=None,
         adam_weight_decay: float = 0.0) -> GradientTransformation:
  """Muon (Jordan et al.) for 2-D leaves, AdamW (NAdam's look-ahead when `nesterov`) for every other leaf (biases,
  norms, convolution kernels), as `optax.contrib.muon` (but with weights in (out, in) layout)."""
  def labels(params): return _tree_map(lambda p: 'muon' if p.ndim == 2 else 'adam', params)
  lr_adam = learning_rate if adam_learning_rate is None else adam_learning_rate
  return multi_transform({
    'muon': chain(scale_by_muon(beta, steps, eps, nesterov), add_decayed_weights(weight_decay),
                  scale_by_learning_rate(learning_rate)),
    'adam': adamw(lr_adam, adam_b1, adam_b2, eps, 0.0, adam_weight_decay, nesterov=nesterov)}, labels)

def apply_updates(params, updates):
  """params + updates, leaf by leaf, keeping each param's dtype (a None update leaves the param as it is).

  >>> import tinyjx.numpy as jnp
  >>> apply_updates({'w': jnp.ones(2)}, {'w': jnp.full(2, 0.5)})['w'].tolist()
  [1.5, 1.5]
  """
  def add(p, u): return p if u is None or p is None else (p + u).astype(p.dtype)
  return tree_util.tree_map(add, params, updates, is_leaf=lambda x: x is None)

# ---------------------------------------------------------------- schedules: step count -> value

def constant_schedule(value: float) -> Callable:
  """The same value at every step."""
  return lambda count: jnp.full((), value, jnp.float32)

def linear_schedule(init_value: float, end_value: float, transition_steps: int, transition_begin: int = 0) -> Callable:
  """From `init_value` to `end_value` linearly over `transition_steps` steps, starting at `transition_begin`.

  >>> float(linear_schedule(1.0, 0.0, 10)(5))
  0.5
  """
  if transition_steps <= 0: return constant_schedule(init_value)
  def schedule(count):
    done = jnp.clip(jnp.asarray(count).astype(jnp.float32) - transition_begin, 0, transition_steps)
    return (init_value - end_value) * (1 - done / transition_steps) + end_value
  return schedule

def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0, exponent: float = 1.0) -> Callable:
  """init_value * ((1 - alpha) * (0.5 (1 + cos(pi t / decay_steps)))^exponent + alpha), t capped at decay_steps."""
  if decay_steps <= 0: raise ValueError(f"cosine_decay_schedule needs decay_steps > 0, got {decay_steps}")
  def schedule(count):
    t = jnp.minimum(jnp.asarray(count).astype(jnp.float32), float(decay_steps))
    cosine = 0.5 * (1 + jnp.cos(math.pi * t / decay_steps))
    return init_value * ((1 - alpha) * cosine ** exponent + alpha)
  return schedule

def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int, decay_steps: int,
                                 end_value: float = 0.0, exponent: float = 1.0) -> Callable:
  """Linear warmup from `init_value` to `peak_value` over `warmup_steps`, then cosine decay to `end_value` at
  `decay_steps` (which counts the warmup too).

  >>> s = warmup_cosine_decay_schedule(0.0, 1.0, 10, 110)
  >>> [round(float(s(t)), 3) for t in (0, 5, 10, 60, 110)]
  [0.0, 0.5, 1.0, 0.5, 0.0]
  """
  alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
  warm = linear_schedule(init_value, peak_value, warmup_steps)
  decay = cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)
  def schedule(count):
    count = jnp.asarray(count)
    return jnp.where(count < warmup_steps, warm(count), decay(count - warmup_steps))
  return schedule

def piecewise_constant_schedule(init_value: float, boundaries_and_scales: dict | None = None) -> Callable:
  """`init_value`, multiplied by each scale from its boundary step on.

  >>> s = piecewise_constant_schedule(1.0, {100: 0.1, 200: 0.1})
  >>> [round(float(s(t)), 4) for t in (99, 100, 250)]
  [1.0, 0.1, 0.01]
  """
  items = sorted((boundaries_and_scales or {}).items())
  if any(s < 0 for _, s in items): raise ValueError(f"piecewise_constant_schedule needs scales >= 0, got {items}")
  def schedule(count):
    count, v = jnp.asarray(count), jnp.full((), init_value, jnp.float32)
    for boundary, factor in items: v = jnp.where(count < boundary, v, v * factor)
    return v
  return schedule

# ---------------------------------------------------------------- the stateful wrapper

class Optimizer(Module):
  """A model and the state of a `GradientTransformation` that trains it, for the `opt.step(grads)` style.

  Only the trainable leaves (`nn.trainable_mask`) are stepped; BatchNorm statistics and integer arrays are
  carried along unchanged. `step` changes this object (inside `jit`, return it) and returns the new model. The update
  itself is a jitted function, so an eager loop compiles it once and gets computed values back at every step (as
  tinygrad's `opt.step()` realizes them).

  >>> import nn, tinyjx, tinyjx.random as random
  >>> opt = nn.optim.SGD(nn.Linear(2, 1, key=random.PRNGKey(0)), lr=0.1)
  >>> grads = tinyjx.tree_util.tree_map(tinyjx.numpy.ones_like, opt.model)
  >>> before = opt.model.bias.item(); after = opt.step(grads).bias.item()
  >>> round(before - after, 6)
  0.1
  """
  def __init__(self, model, tx: GradientTransformation):
    self.model, self.tx = model, tx
    self.state = tx.init(partition(model)[0])

  def step(self, grads, model=None):
    """Apply one update from `grads` (a tree like the model) to `model` (default: `self.model`; pass the model
    returned by a training-mode forward pass to keep its new BatchNorm statistics). Returns the new model."""
    model = self.model if model is None else model
    self.model, self.state = _wrapped_step(self.tx, model, self.state, grads)
    return self.model

@functools.partial(tinyjx.jit, static_argnums=0)
def _wrapped_step(tx: GradientTransformation, model, state, grads):
  """One step of `tx` on the trainable leaves of `model`; jitted so that an eager loop compiles it once (inside an
  outer jit it is inlined)."""
  mask = trainable_mask(model)
  params, rest = partition(model, mask)
  updates, state = tx.update(partition(grads, mask)[0], state, params)
  return combine(apply_updates(params, updates), rest), state

def SGD(model, lr: float = 0.01, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0) -> Optimizer:
  """Stateful SGD over the trainable leaves of `model` (see `sgd`)."""
  return Optimizer(model, sgd(lr, momentum or None, nesterov, weight_decay))

def Adam(model, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
  """Stateful Adam over the trainable leaves of `model` (see `adam`)."""
  return Optimizer(model, adam(lr, b1, b2, eps))

def AdamW(model, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.01) -> Optimizer:
  """Stateful AdamW over the trainable leaves of `model` (see `adamw`)."""
  return Optimizer(model, adamw(lr, b1, b2, eps, weight_decay=weight_decay))

def LARS(model, lr: float = 0.1, momentum: float = 0.9, weight_decay: float = 0.0, trust_coefficient: float = 0.001,
         nesterov: bool = False) -> Optimizer:
  """Stateful LARS over the trainable leaves of `model` (see `lars`)."""
  return Optimizer(model, lars(lr, weight_decay, None, trust_coefficient, 0.0, momentum, nesterov))

def LAMB(model, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
         weight_decay: float = 0.0) -> Optimizer:
  """Stateful LAMB over the trainable leaves of `model` (see `lamb`)."""
  return Optimizer(model, lamb(lr, b1, b2, eps, weight_decay=weight_decay))

def Muon(model, lr: float = 0.02, beta: float = 0.95, steps: int = 5, weight_decay: float = 0.0,
         adam_lr: float | None = None) -> Optimizer:
  """Stateful Muon over the trainable leaves of `model` (see `muon`)."""
  return Optimizer(model, muon(lr, beta, steps, weight_decay=weight_decay, adam_learning_rate=adam_lr))
