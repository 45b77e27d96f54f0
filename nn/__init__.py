"""nn: layers, optimizers, checkpoints and data sets on tinyjx's public API (as Equinox and Optax sit beside JAX).

>>> import nn, tinyjx.random as random
>>> nn.Linear(3, 2, key=random.PRNGKey(0))
Linear(weight=f32[2,3], bias=f32[2], in_features=3, out_features=2)

Modules: `module` (Module, trainable_mask, partition, combine), `layers` (Linear, Conv2d, BatchNorm ...),
`functional` (conv, pooling, normalization, cross_entropy), `init` (initializers), `optim` (optimizers and
schedules), `state` (state dicts, safetensors), `datasets` (MNIST, Fashion-MNIST).
"""
from nn.module import Module, trainable_mask, partition, combine, is_array  # noqa: F401
from nn.layers import (Linear, Conv1d, Conv2d, ConvTranspose2d, BatchNorm, BatchNorm1d, BatchNorm2d,  # noqa: F401
                       LayerNorm, RMSNorm, GroupNorm, Embedding, Dropout, LSTMCell, MultiHeadAttention, Sequential,
                       scaled_dot_product_attention)
from nn.functional import (conv, conv_transpose, max_pool2d, avg_pool2d, max_pool1d, avg_pool1d,  # noqa: F401
                           flatten, cross_entropy, dropout)
from nn import functional, init, optim, state, datasets  # noqa: F401
