"""Coverage of the per-op tables outside autodiff and batching: every array-level op has a reference rule on the
PYTHON device, every elementwise op renders in every C dialect, every transcendental op has a math function in
the renderer's tables, and every op prints under a name of its own. Each check is a function returning what is
missing, asserted empty; a second test deletes one entry and asserts the check names it, so a new op without
its rule fails here, not in a user's program."""
import re
import pytest
import tinyjx  # noqa: F401 - registers the control-flow and debug-callback rules
import tinyjx.numpy as jnp
from tinyjx.numpy import core
from tinyjx import dtypes
from tinyjx.uop import UOp, Ops, GroupOp, prim_name, jnp_name
from tinyjx.devices import python as pydev
from tinyjx.lower import render
from tinyjx.lower.index import build_kernel
from tinyjx.lower.dialects import RENDERERS, CL_PRELUDE, CUDA_PRELUDE
from tinyjx.lower.prelude import C_PRELUDE
from tinyjx.lower import complex as split_complex

ARRAY_LEVEL = set(Ops) - GroupOp.Kernel
# ops the reference interpreter evaluates without a rule: leaves have no sources, `_leaf` makes their values
NO_PYTHON_RULE = {Ops.PARAM: "a leaf: bound by the caller's env", Ops.BUFFER: "a leaf: the buffer's own data",
                  Ops.CONST: "a leaf: np.full of its value", Ops.IOTA: "a leaf: an arange broadcast along its axis"}
BITWISE = {Ops.NOT, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR}   # integer (and bool) operands only
# transcendental ops rendered without a math table entry, each with the reason
NO_MATH_ENTRY = {Ops.ERF: "rendered as C's double erf and rounded back (CRenderer.unary): float32 erff is not exact"}
NOT_JNP = {Ops.ERF: "tinyjx.scipy.special.erf", Ops.BITCAST: "lax.bitcast_convert_type only"}

def missing_python_rules(rules: dict | None = None) -> set:
  """Array-level ops the PYTHON device can not evaluate."""
  rules = pydev.python_rules if rules is None else rules
  return {op for op in ARRAY_LEVEL if op not in rules and op not in NO_PYTHON_RULE}

def operand_dtypes(op: Ops) -> list:
  """The dtypes an elementwise op must render for: floats unless bitwise, integers unless float-only."""
  floats = [] if op in BITWISE else [dtypes.float32, dtypes.float64]
  ints = [] if op in GroupOp.FloatOnly else [dtypes.int32, dtypes.uint8]
  return floats + ints

def sample_node(op: Ops, dt) -> tuple[UOp, list[UOp]]:
  """One `op` node over parameters of dtype `dt` (shape (4,)), and those parameters."""
  p = [UOp(Ops.PARAM, d, (), (i, (4,), 0)) for i, d in enumerate([dt, dt, dtypes.bool_])]
  if op in GroupOp.Unary: return UOp(op, dt, (p[0],)), p[:1]
  if op is Ops.CAST: return UOp(op, dtypes.int16 if dt.kind == 'f' else dtypes.float32, (p[0],)), p[:1]
  if op is Ops.BITCAST: return UOp(op, dtypes.int32 if dt.itemsize == 4 else dt, (p[0],)), p[:1]
  if op is Ops.WHERE: return UOp(op, dt, (p[2], p[0], p[1])), [p[2], p[0], p[1]]
  return UOp(op, dtypes.bool_ if op in GroupOp.Comparison else dt, (p[0], p[1])), p[:2]

def missing_c_rules(renderers: dict | None = None) -> set:
  """(dialect, op, dtype) for every elementwise op and operand dtype that a C dialect can not render."""
  missing = set()
  for name, cls in (RENDERERS if renderers is None else renderers).items():
    for op in GroupOp.Elementwise:
      for dt in operand_dtypes(op):
        out, params = sample_node(op, dt)
        slots = {**{q: i for i, q in enumerate(params)}, out: len(params)}
        try: cls().render([build_kernel("k0", [out], slots)], [[0]])
        except (KeyError, NotImplementedError): missing.add((name, op, dt))
  return missing

def missing_math_entries() -> set:
  """Transcendental ops with no libm function in the renderer's tables."""
  return GroupOp.Transcendental - set(render.UNARY_F) - set(render.BINARY_F) - set(NO_MATH_ENTRY)

def missing_dialect_names() -> set:
  """Math names the C renderer emits that a dialect's prelude does not define: OpenCL's f-suffixed names (its
  builtins are overloaded, unsuffixed) and the fast float32 helpers in every prelude."""
  names = sorted(set(render.UNARY_F.values()) | set(render.BINARY_F.values()))
  out = {f"OpenCL:{n}f" for n in names if not re.search(rf"#define {n}f {n}\b", CL_PRELUDE)}
  for dialect, prelude in (("C", C_PRELUDE), ("OpenCL", CL_PRELUDE), ("CUDA", CUDA_PRELUDE)):
    out |= {f"{dialect}:tjx_{n}_f32" for n in render.FAST_F32.values() if f"tjx_{n}_f32" not in prelude}
  return out

def missing_complex_rules(complex_rules: dict | None = None) -> set:
  """Ops a complex operand may reach (GroupOp.AcceptsComplex) that the compiled devices' complex split has no rule
  for: a complex result needs an entry in COMPLEX_RULES, a real result of complex operands one in FROM_COMPLEX_RULES."""
  made = split_complex.COMPLEX_RULES if complex_rules is None else complex_rules
  read = split_complex.FROM_COMPLEX_RULES
  return {op for op in GroupOp.AcceptsComplex if op not in made and op not in read}

def printed_names() -> dict:
  """The name each array-level op prints as (a reduction per ALU op), keyed by (op, ALU op or None)."""
  out = {}
  for op in ARRAY_LEVEL:
    alus = (Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN) if op in GroupOp.Reduce else (None,)
    for alu in alus: out[(op, alu)] = prim_name(UOp(op, dtypes.float32, (), (0, (), 0) if alu is None else (alu, (0,))))
  return out

def name_problems(names: dict) -> list:
  """Printed names that are not identifiers, or that two ops share."""
  bad = [f"{k[0].name}: {v!r} is not an identifier" for k, v in names.items() if not v.isidentifier()]
  seen: dict = {}
  for k, v in names.items(): seen.setdefault(v, []).append(k[0].name)
  return bad + [f"{v!r} printed by {sorted(ops)}" for v, ops in seen.items() if len(ops) > 1]

# ---------------------------------------------------------------- the tables are complete

def test_every_array_level_op_has_a_reference_rule():
  assert missing_python_rules() == set(), "add a rule to tinyjx/devices/python.py python_rules (or to NO_PYTHON_RULE)"
  assert not set(NO_PYTHON_RULE) & set(pydev.python_rules), "an exception that has a rule: drop it from the list"

def test_every_elementwise_op_renders_in_every_dialect():
  assert missing_c_rules() == set(), "add the op to render.py's tables (or CRenderer.unary/binary), or a dialect's"

def test_every_transcendental_op_has_a_math_function():
  assert missing_math_entries() == set(), "add the op to render.UNARY_F or render.BINARY_F"
  assert GroupOp.Transcendental <= GroupOp.Elementwise

def test_every_math_name_is_defined_in_every_dialect():
  assert missing_dialect_names() == set(), "define the name in the dialect's prelude (lower/dialects.py)"

def test_every_op_that_accepts_complex_operands_splits_into_float_parts():
  assert missing_complex_rules() == set(), "add a rule to tinyjx/lower/complex.py (COMPLEX_RULES or FROM_COMPLEX_RULES)"
  assert GroupOp.Complex <= GroupOp.AcceptsComplex and not GroupOp.Complex & GroupOp.Elementwise

def test_a_missing_complex_split_rule_is_reported(monkeypatch):
  rules = dict(split_complex.COMPLEX_RULES)
  del rules[Ops.SQRT]
  assert missing_complex_rules(rules) == {Ops.SQRT}

def test_every_op_prints_under_its_own_name():
  assert name_problems(printed_names()) == []

def test_jnp_names_are_jnp_functions():
  missing = {op: jnp_name(op) for op in GroupOp.Elementwise - set(NOT_JNP) if not hasattr(jnp, jnp_name(op))}
  assert missing == {}, "fix uop.JNP_NAMES (the tinyjx.numpy function that computes the op)"

def test_float_only_ops_promote_in_jnp_and_refuse_ints_in_c():
  assert GroupOp.FloatOnly <= GroupOp.Elementwise
  for op in GroupOp.FloatOnly & GroupOp.Unary:   # jnp.floor and its kin return integers whole before this
    assert dtypes.is_float(core.unary(op, jnp.arange(3) + jnp.ones(3, jnp.int32)).dtype), op
  assert core.unary(Ops.NEG, jnp.arange(3)).dtype is dtypes.int32
  assert {op for _, op, _ in missing_c_rules({'C': render.CRenderer}) if op in GroupOp.FloatOnly} == set()

# ---------------------------------------------------------------- the checks catch a missing entry

def test_a_missing_reference_rule_is_reported(monkeypatch):
  monkeypatch.delitem(pydev.python_rules, Ops.SIN)
  monkeypatch.delitem(pydev.python_rules, Ops.SCAN)
  assert missing_python_rules() == {Ops.SIN, Ops.SCAN}

def test_a_missing_c_rule_is_reported(monkeypatch):
  monkeypatch.delitem(render.UNARY_F, Ops.SIN)
  monkeypatch.delitem(render.BINARY_F, Ops.ATAN2)
  got = missing_c_rules({'C': render.CRenderer})
  assert got == {('C', Ops.SIN, dtypes.float32), ('C', Ops.SIN, dtypes.float64), ('C', Ops.ATAN2, dtypes.float32),
                 ('C', Ops.ATAN2, dtypes.float64)}
  assert missing_math_entries() == {Ops.SIN, Ops.ATAN2}

def test_a_new_op_without_rules_is_reported(monkeypatch):
  """A float op in the groups but in no table (SQRT taken out of the tables stands for a new op)."""
  monkeypatch.delitem(render.UNARY_F, Ops.SQRT)
  monkeypatch.setattr(GroupOp, 'Transcendental', GroupOp.Transcendental | {Ops.SQRT})
  assert ('C', Ops.SQRT, dtypes.float32) in missing_c_rules({'C': render.CRenderer})
  assert missing_math_entries() == {Ops.SQRT}

def test_a_missing_dialect_name_is_reported(monkeypatch):
  monkeypatch.setitem(render.UNARY_F, Ops.ERF, 'erf')
  assert missing_dialect_names() == {"OpenCL:erff"}

def test_a_shared_printed_name_is_reported():
  names = printed_names()
  names[(Ops.PMAX, None)] = 'max'
  assert name_problems(names) == ["'max' printed by ['MAX', 'PMAX']"]
  assert name_problems({(Ops.EXP, None): 'exp 2'}) == ["EXP: 'exp 2' is not an identifier"]
