"""transforms: the rule tables and the transforms that use them (ad: grad/vjp/jvp; batching: vmap; custom: custom
rules and checkpoint; control_flow: cond, while_loop, scan; jit and pmap, which run programs on devices).

`ad` and `batching` own the rule tables and the rules of the primitive ops. The rule modules below add the rules
of their own ops to those tables when imported; importing them here, in this order, makes every table complete
whichever module of tinyjx a user imports first (tests/test_ad_coverage.py and test_vmap_coverage.py check it).
"""
from tinyjx.transforms import ad, batching  # noqa: F401  (the tables)
from tinyjx.transforms import custom  # noqa: F401  (custom_jvp, custom_vjp, checkpoint)
from tinyjx.transforms import control_flow  # noqa: F401  (cond, while_loop, scan)
from tinyjx.transforms import collective_rules  # noqa: F401  (psum, all_gather, ppermute, ... under vmap and grad)
