"""The conformance kit: the tolerance rule, its bad input, and (slow) tiny-resnet's kits exported from the quick
run's export and run on every engine, an op planted wrong failing by name, and a bisection to the planted layer."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_usage_error, run_cli

from resnet_lab import export
from resnet_lab.conformance import kit as K


def test_the_tolerance_rule_judges_by_the_op_s_kind_and_the_reference_s_own_error():
    assert [K.kind_of(op) for op in ("max", "stablehlo.maximum", "Relu", "add", "rsqrt", "conv_general_dilated",
                                     "Conv", "reduce_sum")] == \
        ["exact", "exact", "exact", "elementwise", "transcendental", "reduction", "reduction", "reduction"]
    expected = np.array([[0.0, 2.0], [-4.0, 1.0]])
    assert K.error(expected.astype(np.float32), expected) == 0.0
    assert K.error(expected + np.array([[0.0, 0.0], [0.0, 0.4]]), expected) == pytest.approx(0.1)  # 0.4 of a scale of 4
    assert K.error(np.zeros((2, 1)), expected) == float("inf")  # another shape
    assert K.error(np.array([1, 2, 3]), np.array([1, 2, 4])) == pytest.approx(1 / 3)
    # an op that selects values must be exact; a reduction may be a few times less exact than the reference
    assert K.tolerance("exact", 0.0) == 0.0
    assert K.tolerance("reduction", 1e-6) == pytest.approx(K.FLOOR["reduction"])
    assert K.tolerance("reduction", 1e-4) == pytest.approx(4e-4)


def _fake_kit(where: Path, ir: str) -> Path:
    where.mkdir()
    (where / K.KIT).write_text(json.dumps({"ir": ir, "cases": []}))
    return where


@pytest.mark.parametrize("argv, message", [
    (["run", "/nonexistent/kit", "--backend", "iree"], "/nonexistent/kit: no such folder"),
    (["run", "{tmp}", "--backend", "iree"], "not a conformance kit (no kit.json"),
    (["run", "{shlo}", "--backend", "onnxruntime"], "is a stablehlo kit; onnxruntime takes onnx (run it on iree, jax)"),
    (["run", "{shlo}", "--backend", "tvm"], "--backend: 'tvm' is not one of: iree, jax, onnxruntime, openvino"),
    (["export", "tiny-resnet", "--ir", "onnx", "--mode", "train", "--out", "{new}"], "the export's ONNX model is an "
                                                                                      "inference graph"),
    (["export", "tiny-resnet", "--ir", "mlir", "--out", "{new}"], "--ir: 'mlir' is not one of: stablehlo, hlo, onnx"),
    (["export", "tiny-resnet", "--ir", "stablehlo", "--out", "{shlo}"], "exists and is not empty"),
    (["bisect", "tiny-resnet", "--backend", "iree"], "--backend: 'iree' is not one of: onnxruntime, openvino"),
])
def test_conformance_bad_input_is_one_line_before_any_engine(tmp_path, argv, message):
    shlo = _fake_kit(tmp_path / "shlo", "stablehlo")
    argv = [a.format(tmp=tmp_path, shlo=shlo, new=tmp_path / "new") for a in argv]
    assert_usage_error(["conformance", *argv], message)


@pytest.fixture(scope="module")
def tiny_export(quick_run, tmp_path_factory) -> Path:
    """A root holding the quick run's export of tiny-resnet at 32² (its cache entry), as ensure looks for it."""
    used = json.loads(next(quick_run.run_dir.rglob(export.USED)).read_text())
    entry = next(Path(e["path"]) for name, e in used.items() if name.startswith("tiny-resnet-32px"))
    root = tmp_path_factory.mktemp("export")
    os.symlink(entry, root / "tiny-resnet-32px-seed0")
    return root


def _cli(*args: str) -> tuple[int, str]:
    r = run_cli("conformance", *args, timeout=900)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.slow
def test_the_stablehlo_kit_covers_every_op_of_the_inference_module_and_passes_on_iree_and_jax(tiny_export, tmp_path):
    for engine in ("iree", "jax"):
        if not importlib.util.find_spec(engine):
            pytest.skip(f"{engine} is not installed")
    kit = tmp_path / "shlo"
    rc, out = _cli("export", "tiny-resnet", "--ir", "stablehlo", "--out", str(kit), "--export-dir", str(tiny_export))
    assert rc == 0, out
    doc = json.loads((kit / K.KIT).read_text())
    cases = [json.loads((kit / c / K.CASE).read_text()) for c in doc["cases"]]
    # every op of the whole inference module (its weights' constants aside) is some case's op
    module = (tiny_export / "tiny-resnet-32px-seed0" / export.stablehlo_file(1)).read_text()
    whole = set(re.findall(r"(stablehlo\.[a-z_]+)", module)) - {"stablehlo.constant"}
    assert whole <= {op for c in cases for op in c["ir_ops"]}, whole - {op for c in cases for op in c["ir_ops"]}
    convs = [c for c in cases if c["op"] == "conv_general_dilated"]
    assert convs and all(c["layers"] and c["layers"][0].endswith("_conv") for c in convs)
    assert sum(c["calls"] for c in convs) == 5  # tiny-resnet's five convolutions, deduplicated by signature
    assert all(c["kind"] != "exact" or c["tolerance"] == 0.0 for c in cases)
    for engine in ("iree", "jax"):
        rc, out = _cli("run", str(kit), "--backend", engine, "--format", "json")
        assert rc == 0, out
        assert {r["status"] for r in json.loads(out)} == {"pass"}
    # a case whose module computes minimum where it should compute maximum fails, and is named
    relu = next(c for c, m in zip(doc["cases"], cases, strict=True) if m["op"] == "max")
    module = kit / relu / K.MODULE["stablehlo"]
    module.write_text(module.read_text().replace("stablehlo.maximum", "stablehlo.minimum"))
    rc, out = _cli("run", str(kit), "--backend", "iree")
    assert rc == 1 and "1 fail" in out and f"failed: {relu} (error" in out, out


@pytest.mark.slow
def test_the_onnx_kit_passes_on_onnx_runtime_and_openvino(tiny_export, tmp_path):
    kit = tmp_path / "onnx"
    rc, out = _cli("export", "tiny-resnet", "--ir", "onnx", "--out", str(kit), "--export-dir", str(tiny_export))
    assert rc == 0, out
    doc = json.loads((kit / K.KIT).read_text())
    ops = {json.loads((kit / c / K.CASE).read_text())["op"] for c in doc["cases"]}
    assert {"Conv", "Relu", "Add", "Gemm"} <= ops, ops
    first = kit / doc["cases"][0]
    assert (first / "model.onnx").is_file() and (first / "test_data_set_0" / "input_0.pb").is_file()
    for engine in ("onnxruntime", "openvino"):
        if importlib.util.find_spec(engine):
            rc, out = _cli("run", str(kit), "--backend", engine)
            assert rc == 0, out


@pytest.mark.slow
def test_bisection_names_the_layer_whose_op_was_planted_wrong(tiny_export, tmp_path):
    from resnet_lab.conformance import bisect

    onnx_model = tiny_export / "tiny-resnet-32px-seed0" / export.ONNX
    planted = tmp_path / "planted.onnx"
    layer = bisect.plant(onnx_model, planted, "layer2.0.relu/Relu")  # conv3_block1_1_relu lets negatives through
    assert layer == "conv3_block1_1_relu"
    found = bisect.bisect("tiny-resnet", "onnxruntime", image_size=32, onnx_path=str(planted),
                          out=str(tmp_path / "repro"), export_dir=str(tiny_export))
    assert found["layer"] == "conv3_block1_1_relu", found["steps"]
    blocks = [s for s in found["steps"] if s["stage"] == "blocks"]
    assert blocks[-1]["layer"] == "conv3_block1_add" and blocks[-1]["verdict"] == "beyond tolerance"
    assert all(s["verdict"] == "within" for s in blocks[:-1])
    repro = json.loads((tmp_path / "repro" / K.KIT).read_text())
    assert repro["bisected_layer"] == "conv3_block1_1_relu" and repro["cases"]
    assert bisect.bisect("tiny-resnet", "onnxruntime", image_size=32, export_dir=str(tiny_export))["layer"] is None
