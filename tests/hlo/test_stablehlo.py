# ruff: noqa: E501  (the snippet is MLIR as printed, one op per line)
"""StableHLO of the JAX steps: counted from the text and by the MLIR bindings' walk, which must agree."""

from __future__ import annotations

import pytest
from helpers import assert_usage_error, conv_layers

from resnet_lab.hlo import capture, parser, stablehlo

SNIPPET = """module @jit_step attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2x8x8x3xf32>, %arg1: tensor<3x3x3x4xf32>) -> (tensor<f32>) {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<2x8x8x4xf32>
    %1 = call @relu(%0) : (tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [0, 1, 2, 3] : (tensor<2x8x8x4xf32>, tensor<f32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
  func.func private @relu(%arg0: tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x8x8x4xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<2x8x8x4xf32>
    return %1 : tensor<2x8x8x4xf32>
  }
}
"""


def test_the_text_count_reads_folded_regions():
    counts = stablehlo.count_text(SNIPPET)
    assert counts["stablehlo.add"] == 1 and counts["stablehlo.return"] == 1  # `applies stablehlo.add`
    assert counts["stablehlo.constant"] == 2 and counts["func.func"] == 2 and counts["builtin.module"] == 1
    ops = stablehlo.compute_ops(counts)
    assert "stablehlo.return" not in ops and "func.func" not in ops and ops["stablehlo.convolution"] == 1
    (conv,) = stablehlo.convolutions(SNIPPET)
    assert conv["lhs"] == "tensor<2x8x8x3xf32>" and conv["result"] == "tensor<2x8x8x4xf32>" and conv["count"] == 1
    assert stablehlo.as_hlo_name("stablehlo.reduce_window") == "reduce-window"
    assert stablehlo.as_hlo_name("stablehlo.broadcast_in_dim") == "broadcast"


def test_the_walk_agrees_with_the_text_on_the_snippet():
    pytest.importorskip("jax")
    walk = stablehlo.count_walk(SNIPPET)
    assert walk == stablehlo.count_text(SNIPPET), (walk, stablehlo.count_text(SNIPPET))


@pytest.mark.slow
def test_a_cifar_resnet_counted_twice_agrees_op_by_op():
    """tiny-resnet (a two-stage CIFAR v1 ResNet: cifar_resnet20's op kinds, a third of its compile time)."""
    if capture.jax_unavailable_reason():
        pytest.skip(capture.jax_unavailable_reason())
    recs = capture.capture_stablehlo({"tiny-resnet": 32}, modes=("infer", "train"), batch_size=2)
    assert [r["mode"] for r in recs] == ["infer", "train"]
    for r in recs:
        assert r["ops"] == r["ops_walk"] and r["walk_agrees"], r["mode"]
        assert r["compute_ops"]["stablehlo.convolution"] >= conv_layers("tiny-resnet") and r["convolutions"]
        portable = [op for op in r["compute_ops"] if op.startswith("stablehlo.")]
        unknown = {stablehlo.as_hlo_name(op) for op in portable} - parser.known_opcodes().names
        assert not unknown, unknown  # each stablehlo op names an HLO opcode (chlo ops are decomposed first)
    infer, train = recs
    assert set(infer["compute_ops"]) < set(train["compute_ops"])  # the training step adds ops


def test_bad_ir_requests_are_one_line():
    assert_usage_error(["ops", "tiny-resnet", "--ir", "mlir"],
                       "--ir: 'mlir' is not one of: hlo, stablehlo, core-aten, tflite")
    assert_usage_error(["ops", "tiny-resnet", "--ir", "stablehlo", "--backend", "torch"],
                       "--backend: 'torch' is not one of: tensorflow, jax")


@pytest.mark.slow
def test_tensorflows_module_converted_to_stablehlo_parses_and_both_counts_agree():
    if capture.jax_unavailable_reason():
        pytest.skip(capture.jax_unavailable_reason())
    (cap,) = capture.capture("cifar_resnet20", modes=("train",), stages=("before",), batch_size=2, serialized=True)
    rec = capture.stablehlo_inventory(cap)
    assert rec["backend"] == "tensorflow" and rec["source"] == "TensorFlow HLO via hlo_to_stablehlo"
    assert rec["ops"] == rec["ops_walk"] and rec["walk_agrees"]
    assert rec["compute_ops"]["stablehlo.convolution"] >= 19 and rec["convolutions"]
