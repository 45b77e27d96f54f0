"""transforms: the rule tables and the transforms that use them (ad: grad/vjp/jvp; custom: custom rules and
checkpoint; batching: vmap; jit). Import the modules directly; this package only groups them."""
