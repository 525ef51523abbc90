"""notebooks/02_op_extraction.ipynb: its layout, and what its run under params/quick.yaml records."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import conv_layers

ROOT = Path(__file__).resolve().parents[2]
NB = ROOT / "notebooks" / "02_op_extraction.ipynb"


@pytest.mark.slow
def test_quick_run_records_the_inventory(quick_run) -> None:
    """The quick run (papermill, params/quick.yaml) inventories the focus model in every mode and stage,
    skips the GPU with a reason on a CPU-only host, and finds the fit dump's opcode sets equal."""
    assert quick_run.statuses["02_op_extraction"] == "ok", quick_run.errors.get("02_op_extraction")
    quick = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())["notebooks"]["02_op_extraction"]
    model = quick["focus_model"]
    out = quick_run.run_dir / "02_op_extraction"
    results = json.loads((out / "results.json").read_text())
    distinct = results["distinct_opcodes"]
    cpu = {f"{model}/{m}/{s}/cpu" for m in ("infer", "train") for s in ("before", "after")}
    assert cpu <= set(distinct)
    assert distinct[f"{model}/train/before/cpu"] > distinct[f"{model}/infer/before/cpu"]
    gpu_rows = [k for k in distinct if k.endswith("/gpu")]
    gpu_skipped = [s["skipped"] for s in results["skipped"] if s["platform"] == "gpu"]
    assert gpu_rows or (gpu_skipped and all("needs a GPU" in reason for reason in gpu_skipped))
    assert results["opcode_list"]["count"] > 100
    assert results["legacy_2017"]["not_opcodes_2017"] == ["arg", "equal", "get", "greater", "less", "logical"]
    assert results["dump"]["same_opcode_set"] == {"before": True, "after": True}
    assert "arg" in results["dump"]["regex_2017_today"]  # the 2017 regex still finds parameter names
    for name in ("summary.csv", "opcode_table.csv", "inventories.json", "legacy_2017_side_by_side.csv",
                 "heatmap_train.png", f"convolutions_train_before_{model}.csv", "provenance.json"):
        assert (out / name).exists(), name
    assert len(list((out / "xla_dump").glob("*optimizations.txt"))) == 2


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_quick_run_shows_tensorflow_and_jax_side_by_side(quick_run) -> None:
    """The focus model's steps compiled from both front ends, through the same parser."""
    assert quick_run.statuses["02_op_extraction"] == "ok", quick_run.errors.get("02_op_extraction")
    model = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())["notebooks"]["02_op_extraction"][
        "focus_model"]
    out = quick_run.run_dir / "02_op_extraction"
    results = json.loads((out / "results.json").read_text())
    distinct = results["backend_distinct_opcodes"]
    for backend in ("tensorflow", "jax"):
        for mode in ("infer", "train"):
            assert distinct[f"{backend}/{model}/{mode}/after/cpu"] > 10
    side_frame = pd.read_csv(out / f"backends_{model}.csv", keep_default_na=False)
    only_in = {r["opcode"]: r["only_in"] for _, r in side_frame.iterrows() if r["only_in"]}
    assert results["backend_only_in"] == only_in and set(only_in.values()) <= {"tensorflow", "jax"}
    side = (out / f"backends_{model}.csv").read_text().splitlines()
    assert side[0].startswith("opcode,") and "jax/train/after" in side[0] and "only_in" in side[0]
    assert any(line.startswith("convolution,") for line in side)


@pytest.mark.slow
def test_quick_run_reads_the_focus_model_in_core_aten_and_tflite(quick_run) -> None:
    """The focus model's inference in Core ATen (torch.export on Keras' torch backend) and TFLite builtins: one
    convolution per conv layer of the zoo's plan, ReLU and batch norm's rsqrt (Core ATen; TFLite folds batch norm
    and fuses the ReLUs), and the training step skipped with its reason."""
    assert quick_run.statuses["02_op_extraction"] == "ok", quick_run.errors.get("02_op_extraction")
    model = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())["notebooks"]["02_op_extraction"][
        "focus_model"]
    n_convs = conv_layers(model)
    out = quick_run.run_dir / "02_op_extraction"
    results = json.loads((out / "results.json").read_text())
    distinct, convs, ops = results["ir_distinct_ops"], results["ir_convolutions"], results["ir_ops"]
    if importlib.util.find_spec("torch") is not None:
        assert convs["core-aten/torch/infer"] == n_convs
        assert {"aten.relu.default", "aten.rsqrt.default", "aten.add.Tensor"} <= set(ops["core-aten/torch/infer"])
        assert distinct["core-aten/torch/infer"] >= 8
    assert convs["tflite/tensorflow/infer"] == n_convs
    assert {"CONV_2D", "ADD", "MEAN", "FULLY_CONNECTED"} <= set(ops["tflite/tensorflow/infer"])
    assert results["ir_fused_activations"]["tflite/tensorflow/infer"]["CONV_2D+RELU"] > 0
    assert convs["hlo/tensorflow/infer"] == n_convs  # the same count in every IR
    if importlib.util.find_spec("jax") is not None:
        assert convs["stablehlo/jax/infer"] == n_convs and distinct["stablehlo/jax/infer"] > 5
    assert results["ir_skipped"]["tflite/tensorflow/train"].startswith("tflite has no training step")
    names = (out / f"ir_names_{model}.csv").read_text().splitlines()
    conv_line = next(line for line in names if line.startswith("convolution,"))
    assert "aten.convolution.default" in conv_line and "CONV_2D" in conv_line and "convolution" in conv_line


@pytest.mark.slow
def test_quick_run_shows_origins_and_the_2017_list_as_a_support_file(quick_run) -> None:
    """The focus model's instructions per opcode and pass, and the 2017 list checked as a backend's support file:
    read as written its non-opcodes are unknown names; read as today's opcodes it still lacks batch norm's rsqrt."""
    assert quick_run.statuses["02_op_extraction"] == "ok", quick_run.errors.get("02_op_extraction")
    model = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())["notebooks"]["02_op_extraction"][
        "focus_model"]
    out = quick_run.run_dir / "02_op_extraction"
    by_opcode = pd.read_csv(out / f"origins_by_opcode_{model}.csv", keep_default_na=False)
    conv = by_opcode[by_opcode.opcode == "convolution"].set_index("pass")
    assert conv.loc["gradient", "instructions"] == 2 * conv.loc["forward", "instructions"]
    assert conv["unmapped"].sum() == 0
    cov = json.loads((out / "results.json").read_text())["coverage_2017"]
    assert {"as written/infer", "as written/train", "as today's opcodes/infer", "as today's opcodes/train"} == set(cov)
    assert set(cov["as written/train"]["unknown"]) == {"arg", "equal", "get", "greater", "less", "logical"}
    today = cov["as today's opcodes/train"]
    assert "rsqrt" in today["missing_ops"] and today["unknown"] == [] and not today["covered"]
    assert yaml.safe_load((out / "support_2017.yaml").read_text())["ops"][:2] == ["add", "arg"]
