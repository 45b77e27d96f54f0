"""tinyjx: a small JAX with its own compiler. `import tinyjx as jax; import tinyjx.numpy as jnp`.

Layers, top to bottom: the public API (numpy, lax, random, nn activations, transforms), transforms,
lowering, devices, and the core IR (uop, rewrite, dtypes). See DESIGN.md in the project docs.
"""
from tinyjx.settings import Context, config  # noqa: F401
from tinyjx import dtypes  # noqa: F401
from tinyjx.array import Array, ConcretizationError, UnexpectedTracerError  # noqa: F401
from tinyjx import devices as _devices  # noqa: F401  (registers the realize hook)
from tinyjx import lower as _lower  # noqa: F401  (registers the lowering pipeline that compiled devices run on)
from tinyjx import tree_util  # noqa: F401
from tinyjx import tree  # noqa: F401
from tinyjx import numpy  # noqa: F401
from tinyjx import lax, nn  # noqa: F401
from tinyjx import random  # noqa: F401
from tinyjx import debug  # noqa: F401  (jax.debug.print and jax.debug.callback)
from tinyjx.tracing import make_jaxpr  # noqa: F401
from tinyjx import counters  # noqa: F401
from tinyjx.transforms.jit import jit, disable_jit, eval_shape, block_until_ready, device_put  # noqa: F401
from tinyjx.tracing import ShapeDtypeStruct  # noqa: F401
from tinyjx.transforms.batching import vmap  # noqa: F401
from tinyjx.transforms.ad import (grad, value_and_grad, vjp, jvp, linearize, jacfwd, jacrev, jacobian,  # noqa: F401
                                  hessian)
from tinyjx.transforms.custom import custom_vjp, custom_jvp, checkpoint, remat  # noqa: F401
from tinyjx.transforms.pmap import pmap  # noqa: F401
from tinyjx.explain import explain  # noqa: F401
from tinyjx import viz as _viz  # noqa: F401  (registers the VIZ recorder with the lowering)
from tinyjx import distributed  # noqa: F401
from tinyjx import scipy  # noqa: F401  (jax.scipy: special, stats, linalg)
from tinyjx.distributed import process_index, process_count  # noqa: F401
from tinyjx.devices_api import (local_devices, device_count, local_device_count, set_cpu_devices,  # noqa: F401
                                device_put_sharded, device_put_replicated)

__version__ = "0.1.0"
