"""resnet_lab.hlo.legacy2017 and resnet_lab.hlo.dump's pure parts: the 2017 list and reading an XLA dump."""

from __future__ import annotations

from resnet_lab.hlo import dump as xla_dump
from resnet_lab.hlo import legacy2017
from resnet_lab.hlo import parser as hlo

# The note's "List of XLA ops needed", copied as printed there (the note is not part of the checkout).
LIST_2017 = ["add", "arg", "bitcast", "broadcast", "concatenate", "constant", "convolution", "copy", "divide",
             "dot", "equal", "exponential", "fusion", "get", "greater", "less", "log", "logical", "map",
             "maximum", "multiply", "negate", "pad", "reduce", "reshape", "reverse", "select", "subtract",
             "transpose", "tuple"]


def test_data_file_holds_the_2017_list_and_an_explanation_for_each_token():
    assert legacy2017.tokens_2017() == LIST_2017  # every token, in the note's (sorted) order
    source = legacy2017.load()["source"]
    assert "Select ResNet-50 model for 2017-Q3" in source and "/" not in source  # the note by its title, no path
    for t in legacy2017.load()["tokens"]:
        assert t["why"] and t["kind"] in legacy2017.KINDS
        assert set(t["today"]) <= hlo.known_opcodes().names, t["token"]
        # whole-opcode kinds name themselves; the others are not (only) what they say
        if t["kind"] in ("opcode", "backend"):
            assert t["today"] == [t["token"]]


def test_which_2017_tokens_are_opcodes_of_the_installed_xla():
    s = legacy2017.summary({"add", "compare", "get-tuple-element", "parameter", "rsqrt", "map"})
    assert s["not_opcodes_2017"] == ["arg", "equal", "get", "greater", "less", "logical"]
    assert "reduce" in s["opcodes_2017"] and "reduce" in s["truncated_2017"]
    assert s["missing_from_2017"] == ["compare", "get-tuple-element", "parameter", "rsqrt"]
    assert "map" not in s["not_in_today"] and "convolution" in s["not_in_today"]


def test_side_by_side_rows():
    rows = {r["token_2017"] or r["opcodes_today"]: r for r in legacy2017.side_by_side(
        {"compare", "get-tuple-element", "rsqrt", "add", "frobnicate"})}
    assert rows["equal"]["opcodes_today"] == "compare" and rows["equal"]["kind"] == "renamed"
    assert rows["get"]["opcodes_today"] == "get-tuple-element" and rows["get"]["in_today"]
    assert rows["map"]["in_today"] is False
    assert rows["compare"]["kind"] == "hidden" and rows["rsqrt"]["kind"] == "new"
    assert "2017 list" in rows["frobnicate"]["why"]  # generic line for an opcode without a note
    assert "add" in rows and rows["add"]["token_2017"] == "add"  # exact tokens are not repeated


TRAIN_BEFORE = """HloModule a_inference_one_step_on_data_7__.9
ENTRY %main (arg0.1: f32[2]) -> f32[2] {
  %arg0.1 = f32[2]{0} parameter(0)
  %greater = pred[2]{0} compare(%arg0.1, %arg0.1), direction=GT
  ROOT %sel = f32[2]{0} select(%greater, %arg0.1, %arg0.1)
}
"""


def test_read_dump_keeps_hlo_texts_and_compares_with_a_capture(tmp_path):
    (tmp_path / "module_0001.a_inference_one_step_on_data_7__.9.before_optimizations.txt").write_text(
        TRAIN_BEFORE)
    (tmp_path / "module_0001.a_inference_one_step_on_data_7__.9.cpu_after_optimizations.txt").write_text(
        TRAIN_BEFORE.replace("select(", "add(").replace("%greater, ", ""))
    for junk in ("module_0001.x.cpu_after_optimizations-buffer-assignment.txt", "module_0001.x.ir-no-opt.ll"):
        (tmp_path / junk).write_text("not hlo")
    rows = xla_dump.read_dump(tmp_path)
    assert [(r["stage"], r["backend"]) for r in rows] == [("before", None), ("after", "cpu")]
    assert rows[0]["opcodes"] == {"compare": 1, "parameter": 1, "select": 1}
    assert {"arg", "greater", "sel"} <= set(rows[0]["legacy_regex"])  # names, the 2017 way
    capture = [{"mode": "train", "stage": "before", "opcodes": {"compare": 2, "parameter": 1, "select": 1},
                "num_instructions": 4},
               {"mode": "train", "stage": "after", "opcodes": {"add": 1, "parameter": 1, "fusion": 1},
                "num_instructions": 3}]
    agree = {a["stage"]: a for a in xla_dump.agreement(rows, capture)}
    assert agree["before"]["same_opcode_set"] and agree["before"]["count_differences"] == "compare 1/2"
    assert not agree["after"]["same_opcode_set"] and agree["after"]["only_in_capture"] == "fusion"
