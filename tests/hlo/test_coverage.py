"""resnet_lab.hlo.coverage and `resnet-lab coverage`: a tiny model's training step, its layers, what a backend lacks."""

from __future__ import annotations

import re

import pytest
import yaml
from helpers import assert_usage_error

from resnet_lab import cli
from resnet_lab.core.errors import UsageError
from resnet_lab.hlo import capture, coverage, parser

TINY = dict(batch_size=2, image_size=16)  # tiny-resnet: five conv layers, a max pool, a dense layer
TINY_ARGV = ["--model", "tiny-resnet", "--mode", "train", "--batch-size", "2", "--image-size", "16"]


@pytest.fixture(scope="module")
def train_step():
    """tiny-resnet's TensorFlow training step before optimization: (its record, its parsed module)."""
    (cap,) = capture.capture("tiny-resnet", modes=("train",), stages=("before",), **TINY)
    return capture.inventory(cap, origins=True), parser.parse(cap.text), cap.layers


def test_every_convolution_and_its_two_gradient_convolutions_map_to_their_layer(train_step):
    rec, _, layers = train_step
    conv_layers = [name for name in layers if name.endswith("_conv")]
    assert len(conv_layers) == 5
    convs = [r for r in rec["origins"] if r["opcode"] == "convolution"]
    assert sum(r["count"] for r in convs) == 3 * len(conv_layers)  # none without a layer
    for layer in conv_layers:
        mine = [r for r in convs if r["layers"] == [layer]]
        assert sorted(r["pass"] for r in mine) == ["forward", "gradient", "gradient"], layer
        labels = {r["attrs"]["dim_labels"] for r in mine if r["pass"] == "gradient"}
        assert len(labels) == 2, (layer, labels)  # the input gradient and the filter gradient differ
    dots = [r for r in rec["origins"] if r["opcode"] == "dot"]
    assert sorted((r["layers"][0], r["pass"]) for r in dots) == [
        ("predictions", "forward"), ("predictions", "gradient"), ("predictions", "gradient")]
    update = [r for r in rec["origins"] if r["pass"] == "optimizer"]
    assert all(r["layers"] for r in update) and set(conv_layers) <= {x for r in update for x in r["layers"]}
    assert sum(r["count"] for r in rec["origins"]) == rec["num_instructions"]  # every instruction, mapped or named


def test_a_support_file_without_reverse_reports_exactly_the_gradient_convolutions_that_need_it(train_step):
    rec, module, _ = train_step
    support = coverage.support_from_ops(set(rec["opcodes"]) - {"reverse"})
    result = coverage.check(rec["origins"], support)
    assert not result["covered"] and [m["opcode"] for m in result["missing_ops"]] == ["reverse"]
    reverses = {i.name for i in module.instructions() if i.opcode == "reverse"}
    fed = {i.name for i in module.instructions() if i.opcode == "convolution" and set(i.operands) & reverses}
    assert len(fed) == 5 and {n["feeds"] for n in result["needed_by"]} == fed
    assert {n["pass"] for n in result["needed_by"]} == {"gradient"}
    assert {(b["pass"], b["missing"]) for b in result["layers_blocked"]} == {("gradient", "reverse")}
    assert result["instructions_missing"] == 5 and 0 < result["share_flops"] < 100


def test_constraints_name_the_unsupported_signatures(train_step):
    rec, _, _ = train_step
    ops = [op for op in rec["opcodes"] if op != "convolution"]
    support = coverage.parse_support({"ops": [*ops, {"convolution": {"types": ["f32"], "stride": ["1x1"]}}]})
    result = coverage.check(rec["origins"], support)
    assert result["missing_ops"] == [] and [s["why"] for s in result["missing_signatures"]] == ["stride=2x2"]
    assert coverage.check(rec["origins"], coverage.parse_support({"ops": [*ops, "convolution"]}))["covered"]


def test_a_complete_support_file_exits_0_and_a_missing_op_exits_1(train_step, tmp_path, capsys):
    rec, _, _ = train_step
    full, short = tmp_path / "full.yaml", tmp_path / "short.yaml"
    full.write_text(yaml.safe_dump({"ops": sorted(rec["opcodes"])}))
    short.write_text(yaml.safe_dump({"ops": [*sorted(set(rec["opcodes"]) - {"rsqrt"}), "reverze"]}))
    assert cli.main(["coverage", str(full), *TINY_ARGV]) == 0
    assert capsys.readouterr().out.startswith("Covered")
    assert cli.main(["coverage", str(short), *TINY_ARGV, "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert "missing ops rsqrt;" in out and "'reverze' is not an opcode (nearest: reverse)" in out


@pytest.mark.parametrize("text, message", [
    ("ops: [add, 3]\n", "ops entry 2 is 3: allowed: an opcode name, or one 'opcode: {constraints}' mapping"),
    ("ops:\n  - convolution: {strides: [1x1]}\n", "'convolution' has no constraint 'strides'; allowed: types, size"),
])
def test_a_malformed_support_file_is_one_line_and_exit_2(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert_usage_error(["coverage", str(bad)], message)


@pytest.mark.parametrize("text, message", [
    ("ops: [add\n", "not valid YAML at line 2"),
    ("opz: [add]\n", "expected a mapping with 'ops: [opcode, ...]'"),
    ("ops:\n  - add: {types: [float]}\n", "'add: types' has 'float', not an element type"),
    ("ops: {reduce: {reducer: []}}\n", "'reduce: reducer' must list one or more values"),
])
def test_what_is_wrong_in_a_support_file_is_named(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        coverage.load_support(bad)


def test_an_unknown_name_is_reported_with_the_nearest_opcode_and_covers_nothing():
    support = coverage.support_from_ops(["add", "get", "reverze"])
    assert support.unknown == {"get": "get-tuple-element", "reverze": "reverse"}
    assert set(support.ops) == {"add"}


def test_stablehlo_ops_are_checked_under_the_hlo_opcode_they_become():
    rec = {"compute_ops": {"stablehlo.convolution": 3, "stablehlo.dot_general": 1, "stablehlo.rsqrt": 2,
                           "chlo.erf": 1}}
    result = coverage.check(coverage.stablehlo_rows(rec), coverage.support_from_ops(["convolution", "dot"]))
    assert [m["opcode"] for m in result["missing_ops"]] == ["chlo.erf", "rsqrt"]
    assert result["instructions_missing"] == 3 and result["instructions"] == 7
    assert {b["layer"] for b in result["layers_blocked"]} == {"(chlo.erf)", "(stablehlo.rsqrt)"}
    assert "no convolution or dot FLOPs counted" in coverage.headline(result)


MLIR = """module @jit__train {
  func.func public @main(%arg0: tensor<3x3x3x4xf32> loc("state[0][0]"), %arg1: tensor<2x8x8x3xf32>) {
    %0 = stablehlo.reverse %arg0, dims = [0, 1] : tensor<3x3x3x4xf32> loc(#loc3)
    %1 = stablehlo.convolution(%arg1, %0) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f] loc(#loc4)
    %2 = stablehlo.rsqrt %1 : tensor<2x8x8x4xf32> loc(#loc5)
    return %2 : tensor<2x8x8x4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc1 = loc("/src/model.py":10:4)
#loc2 = loc("jit(_train)/transpose(jvp(conv1_conv))/rev"(#loc1))
#loc3 = loc(callsite(#loc2 at #loc1))
#loc4 = loc("jit(_train)/transpose(jvp(conv1_conv))/conv_general_dilated"(#loc1))
#loc5 = loc("jit(_train)/jvp(conv1_bn)/rsqrt"(#loc1))
"""


def test_stablehlo_locations_give_each_op_its_layer_and_pass():
    from resnet_lab.hlo import stablehlo

    found = stablehlo.op_locations(MLIR)
    assert found[("stablehlo.reverse", "jit(_train)/transpose(jvp(conv1_conv))/rev")] == 1  # through a callsite
    rec = {"compute_ops": stablehlo.compute_ops(stablehlo.count_text(MLIR)), "layers": ["conv1_conv", "conv1_bn"],
           "locations": [{"op": op, "name": name, "count": n} for (op, name), n in found.items()]}
    result = coverage.check(coverage.stablehlo_rows(rec), coverage.support_from_ops(["convolution", "rsqrt"]))
    assert [(b["layer"], b["pass"], b["missing"]) for b in result["layers_blocked"]] == [
        ("conv1_conv", "gradient", "reverse")]
