"""lax: JAX's low-level operations: strict dtypes, explicit shapes, `make_jaxpr` shows one equation each.

The operations themselves are in `lax_primitives`; this namespace gathers them with the families built on them:
control flow and dynamic slicing (transforms/control_flow.py), `stop_gradient` (transforms/ad.py), the
collectives (collectives.py), convolutions and reduce_window (lax_conv.py) and `lax.linalg` (lax/linalg.py).

>>> import tinyjx.numpy as jnp
>>> from tinyjx import lax
>>> lax.add(jnp.float32(1), 2.0).item(), lax.cond(True, lambda: 1, lambda: 2).item()
(3.0, 1)
"""
from tinyjx.lax_primitives import *  # noqa: F401,F403
from tinyjx.lax_primitives import max, min  # noqa: F401,A004
from tinyjx.transforms.ad import stop_gradient  # noqa: F401
from tinyjx.transforms.control_flow import (  # noqa: F401
  cond, switch, while_loop, fori_loop, scan, map, dynamic_slice, dynamic_update_slice, dynamic_index_in_dim,  # noqa: A004
  dynamic_slice_in_dim, dynamic_update_index_in_dim, dynamic_update_slice_in_dim)
from tinyjx.collectives import (  # noqa: F401
  psum, pmean, pmax, pmin, all_gather, psum_scatter, ppermute, pshuffle, all_to_all, axis_index, axis_size)
from tinyjx.lax_conv import *  # noqa: F401,F403  (convolutions and reduce_window)
from tinyjx.lax_conv import window_view  # noqa: F401  (a tinyjx extra: the sliding windows as one view, for nn)
from tinyjx.lax import linalg  # noqa: F401  (lax.linalg: the factorizations, built on the loops above)
