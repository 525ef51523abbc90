"""resnet_lab.hlo.parser: the HLO text parser and inventory, on small handwritten modules (no TensorFlow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from resnet_lab.hlo import parser as hlo

SRC = Path(__file__).resolve().parents[2] / "src"

# Everything the printer does that a line regex gets wrong: names with and without %, ROOT, tuple and
# nested tuple shapes, layouts, /*index=N*/ comments, operands printed with and without shapes, literals
# with braces, attributes holding parentheses, braces, commas and escaped quotes inside strings.
MODULE = r'''
HloModule test_module.7, is_scheduled=true, entry_computation_layout={(f32[2,3]{1,0}, (s32[], (f32[4]{0}, pred[])))->(f32[2,3]{1,0}, f32[])}

%add_f32 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %x, f32[] %y)
}

fused_computation (p0: f32[2,3], p1: f32[]) -> f32[2,3] {
  p0 = f32[2,3]{1,0} parameter(0)
  p1 = f32[] parameter(1)
  b = f32[2,3]{1,0} broadcast(p1), dimensions={}
  ROOT m = f32[2,3]{1,0} multiply(p0, b)
}

%cond.1 (s: (s32[], (f32[4], pred[]))) -> pred[] {
  %s = (s32[], (f32[4]{0}, pred[])) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body.2 (s.1: (s32[], (f32[4], pred[]))) -> (s32[], (f32[4], pred[])) {
  %s.1 = (s32[], (f32[4]{0}, pred[])) parameter(0)
  %i.1 = s32[] get-tuple-element(%s.1), index=0
  %one = s32[] constant(1)
  %next = s32[] add(s32[] %i.1, s32[] %one)
  %inner = (f32[4]{0}, pred[]) get-tuple-element(%s.1), index=1
  ROOT %t = (s32[], (f32[4]{0}, pred[])) tuple(%next, %inner)
}

ENTRY %main.7 (a: f32[2,3], t: (s32[], (f32[4], pred[]))) -> (f32[2,3], f32[]) {
  %a = f32[2,3]{1,0} parameter(0), metadata={op_name="XLA_Args" source_file="f(x).py"}
  %t = (s32[], (f32[4]{0}, /*index=1*/pred[])) parameter(1)
  %zero = f32[] constant(0)
  %c = f32[2,2]{1,0} constant({ {1, 2}, {3, 4} })
  %cc = f32[2,3]{1,0} custom-call(f32[2,3]{1,0} %a), custom_call_target="__cublas$gemm", backend_config={"alpha_real":1,"note":"a (b) {c}, d \"e\""}, api_version=API_VERSION_STATUS_RETURNING
  %f = f32[2,3]{1,0} fusion(%cc, %zero), kind=kLoop, calls=fused_computation, metadata={op_type="Mul" op_name="model/mul(1)"}
  %r = f32[] reduce(%f, %zero), dimensions={0,1}, to_apply=%add_f32
  %cmp = pred[2,3]{1,0} compare(f32[2,3]{1,0} %a, f32[2,3]{1,0} %f), direction=GT, metadata={op_type="ReluGrad"}
  %w = (s32[], (f32[4]{0}, pred[])) while(%t), condition=%cond.1, body=%body.2
  ROOT %out = (f32[2,3]{1,0}, /*index=1*/f32[]) tuple(%f, %r)
}
'''  # noqa: E501


def test_counts_every_instruction_of_every_computation():
    inv = hlo.inventory(hlo.parse(MODULE))
    assert inv["module"] == "test_module.7"
    assert inv["num_computations"] == 5
    assert inv["opcodes"] == {
        "add": 2, "broadcast": 1, "compare": 2, "constant": 4, "custom-call": 1, "fusion": 1,
        "get-tuple-element": 3, "multiply": 1, "parameter": 8, "reduce": 1, "tuple": 2, "while": 1,
    }
    assert inv["num_instructions"] == 27
    assert inv["computations_by_role"] == {"applied": 1, "control": 2, "entry": 1, "fused": 1}
    assert inv["opcodes_by_role"]["fused"] == {"broadcast": 1, "multiply": 1, "parameter": 2}
    assert inv["opcodes_by_role"]["applied"] == {"add": 1, "parameter": 2}
    assert inv["opcodes_by_role"]["entry"]["while"] == 1
    assert inv["fusion_kinds"] == {"kLoop": 1}
    assert inv["custom_call_targets"] == {"__cublas$gemm": 1}
    assert inv["compare_directions"] == {"GT": 1, "LT": 1}
    assert inv["comparisons"] == {"f32 GT": 1, "s32 LT": 1}
    assert inv["tf_op_types"] == {"compare": {"ReluGrad": 1}, "fusion": {"Mul": 1}}
    assert inv["element_types"]["tuple"] == {"tuple": 2}
    json.dumps(inv)  # JSON-ready


def test_instruction_fields():
    module = hlo.parse(MODULE)
    entry = module.entry
    assert entry.name == "main.7" and entry.is_entry and entry.root.name == "out"
    by_name = {i.name: i for i in module.instructions()}
    cc = by_name["cc"]
    assert cc.operands == ("a",) and str(cc.operand_shapes[0]) == "f32[2,3]"
    assert cc.attributes["backend_config"] == r'{"alpha_real":1,"note":"a (b) {c}, d \"e\""}'
    assert cc.attributes["api_version"] == "API_VERSION_STATUS_RETURNING"
    assert by_name["f"].attributes["metadata"] == '{op_type="Mul" op_name="model/mul(1)"}'
    assert by_name["c"].literal == "{ {1, 2}, {3, 4} }" and by_name["c"].operands == ()
    assert by_name["a"].literal == "0" and by_name["t"].literal == "1"
    t = by_name["t"].shape
    assert t.is_tuple and str(t) == "(s32[], (f32[4], pred[]))"
    assert t.tuple_shapes[1].tuple_shapes[1].dims == ()
    assert by_name["m"].operands == ("p0", "b") and by_name["m"].computation == "fused_computation"
    assert by_name["out"].is_root and by_name["out"].operands == ("f", "r")


@pytest.mark.parametrize("text, expected", [
    ("f32[32,224,224,3]{3,2,1,0}", ("f32", (32, 224, 224, 3), "{3,2,1,0}")),
    ("pred[]", ("pred", (), None)),
    ("bf16[8,<=16]", ("bf16", (8, 16), None)),
    ("f32[1,2]{1,0:T(8,128)}", ("f32", (1, 2), "{1,0:T(8,128)}")),
    ("token[]", ("token", (), None)),
])
def test_array_shapes(text, expected):
    s = hlo.parse_shape(text)
    assert (s.element_type, s.dims, s.layout) == expected


def test_shapes_print_without_layout_and_keep_dynamic_bounds():
    assert str(hlo.parse_shape("(f32[2]{0}, (s8[], u32[<=4]))")) == "(f32[2], (s8[], u32[<=4]))"
    assert str(hlo.parse_shape("()")) == "()"
    assert str(hlo.parse_shape("f32[?,3]")) == "f32[?,3]"


def test_convolutions_and_dots_resolve_operand_shapes_by_name():
    text = """
HloModule m
ENTRY e {
  img = f32[8,32,32,16]{3,2,1,0} parameter(0)
  k = f32[3,3,16,32]{3,2,1,0} parameter(1)
  k2 = f32[3,3,16,32]{3,2,1,0} parameter(2)
  c1 = f32[8,16,16,32]{3,2,1,0} convolution(img, k), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f
  c2 = f32[8,16,16,32]{3,2,1,0} convolution(img, k2), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f
  g = f32[8,32,32,16]{3,2,1,0} convolution(img, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=16
  x = f32[8,2048]{1,0} parameter(3)
  w = f32[2048,1000]{1,0} parameter(4)
  ROOT d = f32[8,1000]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""  # noqa: E501
    inv = hlo.inventory(hlo.parse(text))
    assert inv["convolutions"][0] == {
        "lhs": "f32[8,32,32,16]", "rhs": "f32[3,3,16,32]", "result": "f32[8,16,16,32]",
        "window": "size=3x3 stride=2x2 pad=0_1x0_1", "dim_labels": "b01f_01io->b01f",
        "feature_group_count": 1, "batch_group_count": 1, "count": 2,
    }
    assert inv["convolutions"][1]["feature_group_count"] == 16 and inv["convolutions"][1]["count"] == 1
    assert inv["dots"] == [{
        "lhs": "f32[8,2048]", "rhs": "f32[2048,1000]", "result": "f32[8,1000]", "lhs_batch_dims": "",
        "lhs_contracting_dims": "1", "rhs_batch_dims": "", "rhs_contracting_dims": "0", "count": 1,
    }]


def test_window_fields_with_defaults():
    assert hlo.parse_window("size=3x3 stride=2x2 pad=0_1x0_1") == {
        "size": "3x3", "stride": "2x2", "pad": "0_1x0_1", "lhs_dilate": "1x1", "rhs_dilate": "1x1",
        "rhs_reversal": "0x0"}
    assert hlo.parse_window("size=1x1 pad=0_1x0_1 lhs_dilate=2x2")["lhs_dilate"] == "2x2"
    assert hlo.parse_window("") == {"size": "", "stride": "", "pad": "", "lhs_dilate": "", "rhs_dilate": "",
                                    "rhs_reversal": ""}


def test_statement_continued_over_lines_and_trailing_computation_attributes():
    text = """HloModule m

%wrapped (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %cc = f32[4]{0} custom-call(%p), custom_call_target="host_fn", backend_config={
    "a": [1, 2],
    "b": "}"
  }
}, execution_thread="host"

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %start = ((f32[4]{0}), f32[4]{0}, u32[]) custom-call-start(%x), async_execution_thread="host", custom_call_target="host_fn"
  ROOT %done = f32[4]{0} custom-call-done(%start)
}
"""  # noqa: E501
    module = hlo.parse(text)
    assert module.computations[0].attributes == {"execution_thread": '"host"'}
    inv = hlo.inventory(module)
    assert inv["opcodes"] == {"async-done": 1, "async-start": 1, "custom-call": 1, "parameter": 2}
    assert inv["async_wrapped"] == {"custom-call": 2}
    assert inv["custom_call_targets"] == {"host_fn": 1}


def test_custom_fusion_kind_from_backend_config():
    text = """HloModule m
%f (p: f32[4]) -> f32[] {
  %p = f32[4]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add
}
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (x: f32[4]) -> f32[] {
  %x = f32[4]{0} parameter(0)
  ROOT %y = f32[] fusion(%x), kind=kCustom, calls=%f, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
}
"""
    inv = hlo.inventory(hlo.parse(text))
    assert inv["fusion_kinds"] == {"kCustom:__ynn_fusion": 1}
    # the reducer is called from inside the fusion: it is 'applied', and the fusion body is 'fused'
    assert inv["computations_by_role"] == {"applied": 1, "entry": 1, "fused": 1}


def test_unknown_opcode_is_an_error_not_silence():
    text = "HloModule m\nENTRY %e (x: f32[]) -> f32[] {\n  ROOT %x = f32[] frobnicate(f32[] %y)\n}\n"
    with pytest.raises(hlo.HloParseError, match="unknown HLO opcode 'frobnicate' at line 3"):
        hlo.parse(text)
    assert hlo.parse(text, opcodes=False).computations[0].instructions[0].opcode == "frobnicate"


@pytest.mark.parametrize("text, message", [
    ("HloModule m\nENTRY %e {\n  %x = f32[] parameter(0)\n", "not closed"),
    ("HloModule m\nENTRY %e {\n  %x = f32[ parameter(0)\n}\n", "never closes|expected a shape"),
    ("HloModule m\nENTRY %e {\n  %x = f32[] parameter(0) junk\n}\n", "unexpected text"),
    ("just words\n", "expected a computation header"),
    ("HloModule m\n}\n", "outside a computation"),
])
def test_malformed_text(text, message):
    with pytest.raises(hlo.HloParseError, match=message):
        hlo.parse(text)


def test_regex_of_2017_finds_names_not_opcodes():
    # what the 2017 grep reports for MODULE: instruction names cut at the first non-letter
    found = hlo.legacy_regex_ops(MODULE)
    assert {"cc", "cmp", "out", "zero", "add", "cond", "body"} <= found
    assert "get" not in found  # our names are not opcode-derived; 2017's %get-tuple-element.3 gave 'get'
    assert "get" in hlo.legacy_regex_ops("%get-tuple-element.3 = f32[] get-tuple-element(%t), index=0")


def test_diff_opcodes():
    d = hlo.diff_opcodes({"add": 2, "dot": 1}, {"add": 3, "fusion": 4})
    assert d == {"added": {"fusion": 4}, "removed": {"dot": 1}, "changed": {"add": (2, 3)}}


# ---------------------------------------------------------------------------- the installed XLA's opcodes

HEADER_SNIPPET = r"""
#define HLO_OPCODE_LIST(V)                                                     \
  /* go/keep-sorted start */                                                   \
  V(kAbs, "abs", 1)                                                            \
  V(kAfterAll, "after-all", kHloOpcodeIsVariadic)                              \
  V(kGetTupleElement, "get-tuple-element", 1)                                  \
  /* go/keep-sorted end */
// LINT.ThenChange(../../mlir_hlo/mhlo/IR/hlo_ops.td)
#define NOT_THIS V(kFoo, "foo", 1)
"""


def test_parse_opcode_header():
    assert hlo.parse_opcode_header(HEADER_SNIPPET) == {"abs": 1, "after-all": None, "get-tuple-element": 1}
    with pytest.raises(hlo.HloParseError):
        hlo.parse_opcode_header("nothing here")


def test_opcode_list_comes_from_the_installed_header_and_matches_the_snapshot():
    header = hlo.installed_opcode_header()
    if header is None:
        pytest.skip("tensorflow is not installed: the packaged snapshot is all there is")
    table = hlo.known_opcodes()
    assert table.source == "tensorflow/include/xla/hlo/ir/hlo_opcode.h" and str(header).endswith(table.source)
    assert {"convolution", "get-tuple-element", "reduce-window", "custom-call", "compare"} <= table.names
    assert not {"get", "arg", "equal", "greater", "less", "logical"} & table.names  # the 2017 tokens
    snap = hlo.snapshot_opcodes()
    assert dict(snap.arity) == dict(table.arity), "data/hlo_opcodes.json is stale: regenerate it"
    assert snap.sha256 == table.sha256


def test_finding_the_opcode_list_does_not_import_tensorflow():
    code = ("import sys\nfrom resnet_lab.hlo import parser\nt = parser.known_opcodes()\nassert len(t.names) > 100\n"
            "assert 'tensorflow' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(SRC), "PATH": ""},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_every_opcode_name_is_compiled_into_the_tensorflow_library():
    if hlo.tensorflow_dir() is None:
        pytest.skip("tensorflow is not installed")
    names = sorted(hlo.known_opcodes().names)
    assert hlo.opcodes_in_library([*names, "no-such-opcode-xyz"]) == ["no-such-opcode-xyz"]


def test_stack_frame_tables_of_newer_xla_are_skipped():
    """JAX's compiled text carries FileNames/FunctionNames/FileLocations/StackFrames tables (metadata's
    stack_frame_id points into them) between the module header and the first computation."""
    text = "\n".join([
        "HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]{0}}",
        "",
        "FileNames",
        '1 "/tmp/step.py"',
        "",
        "FunctionNames",
        '1 "<module>"',
        "",
        "FileLocations",
        "1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}",
        "",
        "StackFrames",
        "1 {file_location_id=1 parent_frame_id=1}",
        "",
        "ENTRY %main (x: f32[2]) -> f32[2] {",
        "  %x = f32[2]{0} parameter(0)",
        "  ROOT %n = f32[2]{0} negate(%x), metadata={op_name=\"jit(step)/neg\" stack_frame_id=1}",
        "}",
    ])
    module = hlo.parse(text)
    assert hlo.inventory(module)["opcodes"] == {"negate": 1, "parameter": 1}
