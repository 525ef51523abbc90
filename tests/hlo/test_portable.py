"""Core ATen and TFLite builtins beside HLO and StableHLO: requests, records, the op × IR table and its name map."""

from __future__ import annotations

import pytest
from helpers import assert_usage_error, conv_layers

from resnet_lab.core import requirements
from resnet_lab.hlo import capture
from resnet_lab.hlo.inventory_text import format_portable
from resnet_lab.report import ops as tables

HLO = {"model": "r20", "mode": "infer", "stage": "before", "platform": "cpu", "backend": "tensorflow",
       "opcodes": {"convolution": 3, "maximum": 3, "add": 4, "custom-call": 1}}
STABLE = {"model": "r20", "mode": "infer", "platform": "cpu", "backend": "jax", "ir": "stablehlo",
          "compute_ops": {"stablehlo.convolution": 3, "stablehlo.maximum": 3, "chlo.square": 1}}
CONFIG = {"batch_size": 2, "image_size": 8, "precision": "fp32"}
ATEN = {**CONFIG, "model": "r20", "mode": "infer", "platform": "cpu", "backend": "torch", "ir": "core-aten",
        "source": "Keras", "capture_seconds": 2.0, "convolutions": [{"count": 3}],
        "ops": {"aten.convolution.default": 3, "aten.relu.default": 3, "aten.view.default": 2, "getitem": 1},
        "compute_ops": {"aten.convolution.default": 3, "aten.relu.default": 3, "aten.view.default": 2}}
TFL = {**CONFIG, "model": "r20", "mode": "infer", "platform": "cpu", "backend": "tensorflow", "ir": "tflite",
       "source": "converter", "capture_seconds": 1.0, "convolutions": [{"count": 3}],
       "ops": {"CONV_2D": 3, "ADD": 1}, "compute_ops": {"CONV_2D": 3, "ADD": 1}, "ops_interpreter":
       {"CONV_2D": 3, "ADD": 1}, "interpreter_agrees": True, "fused_activations": {"CONV_2D+RELU": 3}}
TRAIN = {"model": "r20", "mode": "train", "platform": "cpu", "backend": "tensorflow", "ir": "tflite",
         "skipped": capture.NO_TRAINING["tflite"], "ops": {}, "compute_ops": {}}


def test_the_ir_table_puts_each_op_in_the_row_of_its_hlo_opcode():
    frame = tables.ir_table([HLO], [STABLE], "r20", portable=[ATEN, TFL, TRAIN])
    assert list(frame.columns[:3]) == ["stablehlo_op", "core_aten_op", "tflite_op"]
    conv = frame.loc["convolution"]
    assert (conv["HLO tensorflow infer"], conv["StableHLO jax infer"], conv["Core ATen torch infer"],
            conv["TFLite tensorflow infer"]) == (3, 3, 3, 3)
    assert conv["core_aten_op"] == "aten.convolution.default" and conv["tflite_op"] == "CONV_2D"
    assert frame.loc["maximum", "core_aten_op"] == "aten.relu.default"  # ReLU is a maximum with zero in HLO
    assert "TFLite tensorflow train" not in frame.columns  # the skipped training record adds nothing
    assert tables.ir_table([HLO], [], "r20") is None


def test_the_name_map_says_which_ops_exist_in_one_ir_only():
    frame = tables.ir_table([HLO], [STABLE], "r20", portable=[ATEN, TFL])
    mapping = tables.ir_mapping(frame, [ATEN, TFL])
    assert mapping.loc["convolution", "irs"] == "HLO, StableHLO, Core ATen, TFLite"
    assert mapping.loc["custom-call", "only_in"] == "HLO" and mapping.loc["chlo.square", "only_in"] == "StableHLO"
    assert mapping.loc["reshape", "only_in"] == "Core ATen"  # Keras' layout permutes and views on torch
    fused = mapping.loc["fused:CONV_2D+RELU"]
    assert fused["only_in"] == "TFLite" and fused["TFLite tensorflow infer"] == 3


def test_portable_records_are_described_and_counted():
    text = tables.describe_portable([ATEN, TFL, TRAIN])
    assert "Core ATen r20 infer: 3 distinct ops" in text and "CONV_2D+RELU ×3" in text
    assert "TFLite r20 train: skipped (tflite has no training step" in text
    report = format_portable(ATEN)
    assert any(line.startswith("getitem") and "(bookkeeping)" in line for line in report.splitlines())
    assert "interpreter's op list agrees" in format_portable(TFL)


def test_a_missing_framework_names_its_pip_install(monkeypatch):
    monkeypatch.setattr(requirements, "installed", lambda dist: None)
    assert capture.ir_unavailable_reason("core-aten") == "core-aten needs torch, not installed " \
                                                         "(pip install -e '.[torch]')"
    (rec, train) = capture.capture_portable(["tiny-resnet"], ["core-aten"], batch_size=2, image_size=8)
    assert "pip install" in rec["skipped"] and train["skipped"].startswith("core-aten has no training step")


@pytest.mark.parametrize("ir", ["core-aten", "tflite", "onnx"])
def test_a_training_step_on_an_inference_only_ir_is_one_line(ir):
    assert_usage_error(["ops", "tiny-resnet", "--ir", ir, "--mode", "train"], f"{ir} has no training step: ")


def test_a_bad_mode_on_an_inference_only_ir_is_one_line():
    assert_usage_error(["ops", "tiny-resnet", "--ir", "tflite", "--mode", "training"],
                       "--mode: 'training' is not one of: infer, train")


def test_the_zoo_plan_counts_the_convolutions():
    assert conv_layers("cifar_resnet20") == 19 and conv_layers("resnet50_v1.5") == 53


def test_the_ir_headline_counts_distinct_ops_and_convolutions_per_ir():
    head = tables.ir_headline([HLO], [STABLE], [ATEN, TFL, TRAIN], "r20")
    assert head["ir_distinct_ops"] == {"stablehlo/jax/infer": 3, "core-aten/torch/infer": 3,
                                       "tflite/tensorflow/infer": 2, "hlo/tensorflow/infer": 4}
    assert set(head["ir_convolutions"].values()) == {3}
    assert head["ir_fused_activations"] == {"tflite/tensorflow/infer": {"CONV_2D+RELU": 3}}
    assert head["ir_skipped"] == {"tflite/tensorflow/train": capture.NO_TRAINING["tflite"]}


@pytest.mark.slow
def test_the_native_fallback_exports_the_same_plan_to_core_aten():
    """Where the Keras model fails to export, the native PyTorch model of the same plan is read instead, and the
    record says where the Keras export failed (in-process: torch only, no Keras backend switch)."""
    if capture.ir_unavailable_reason("core-aten"):
        pytest.skip(capture.ir_unavailable_reason("core-aten"))
    from resnet_lab.hlo import torch_child

    request = {"image_sizes": {"cifar_resnet20": 8}, "batch_size": 2, "precision": "fp32"}
    got = torch_child.export_native("cifar_resnet20", request, "torch.export.export: RuntimeError: here")
    rec = capture.core_aten_inventory("cifar_resnet20", got, batch_size=2, image_size=8, precision="fp32")
    assert rec["source"] == torch_child.NATIVE_SOURCE and rec["keras_export_error"].endswith("RuntimeError: here")
    assert rec["compute_ops"]["aten.convolution.default"] == conv_layers("cifar_resnet20") == 19
    assert rec["compute_ops"]["aten.relu.default"] == 19 and rec["compute_ops"]["aten.addmm.default"] == 1
    assert any("batch_norm" in op for op in rec["compute_ops"]), rec["compute_ops"]
    strided = [c for c in rec["convolutions"] if c["stride"] == "[2, 2]"]
    assert strided and all(c["input"].startswith("2x") for c in rec["convolutions"])
    assert "stood in for the Keras model" in tables.describe_portable([rec])
    # the module's parameter count and names: tests/models/test_torch_builder.py
