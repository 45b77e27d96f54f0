"""Coverage of `batch_rules`: every op either has a batching rule or is on the allow-list below, with the reason.
A new op, or a rule added elsewhere (control flow, collectives, custom rules), makes this test say which entry
to add or remove."""
import tinyjx  # noqa: F401  (imports every module that registers batch rules)
import tinyjx.transforms.ad  # noqa: F401  (custom rules and checkpoint register theirs when ad loads)
from tinyjx.uop import Ops, GroupOp
from tinyjx.transforms.batching import batch_rules

ALLOWED_MISSING = {
  # leaves have no sources, so no batch dim can reach them: vmap keeps them as they are
  Ops.PARAM: "a leaf: the mapped PARAMs are replaced by the caller's arrays, other PARAMs belong to outer traces",
  Ops.BUFFER: "a leaf: a concrete value closed over by the function, the same for every example",
  Ops.CONST: "a leaf: a filled constant, the same for every example",
  Ops.IOTA: "a leaf: an index ramp that depends only on its static shape",
  # kernel-level ops exist only after lowering, below every transform
  **{op: "kernel level: created by the lowering, after every transform has run" for op in GroupOp.Kernel},
}

def test_ops_without_batch_rule_are_exactly_the_allow_list():
  missing = {op for op in Ops if op not in batch_rules}
  new = missing - set(ALLOWED_MISSING)
  assert new == set(), f"add a batch rule (or an allow-list entry with its reason) for {new}"
  assert set(ALLOWED_MISSING) - missing == set(), f"these now have a batch rule; drop them from ALLOWED_MISSING: " \
                                                  f"{set(ALLOWED_MISSING) - missing}"

def test_every_array_level_op_of_the_core_has_a_rule():
  core = (GroupOp.Elementwise | GroupOp.Movement | GroupOp.Reduce |
          {Ops.DOT_GENERAL, Ops.GATHER, Ops.SCATTER, Ops.ARGSORT, Ops.TAG, Ops.GETITEM, Ops.STOP_GRADIENT})
  assert core <= set(batch_rules)
