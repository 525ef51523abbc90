"""Engines side by side per layer: units, losers, the weakest layer kind, and a layer slowed on purpose."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from resnet_lab import export
from resnet_lab.layers import compare, costs
from resnet_lab.layers import run as layer_run

COSTS = costs.layer_costs("tiny-resnet", 32)
CONVS = [c["layer"] for c in COSTS if c["layer"].endswith("_conv")]


def record(ms: dict[str, float], step_ms: float = 10.0) -> dict:
    by = {c["layer"]: c for c in COSTS}
    layers = [{"layer": k, "ms": v, "kind": by.get(k, {}).get("kind"),
               "roofline_ms": 0.1 if k in by else None} for k, v in ms.items()]
    total = sum(ms.values())
    return {"step_ms": step_ms, "profiled_step_ms": 1.1 * step_ms, "attributed_ms": total, "unattributed_ms": 0.5,
            "profiled_ms": total + 0.5, "layers": layers, "method": "test"}


def test_a_convolution_unit_takes_its_batch_norm_relu_padding_and_its_block_s_add():
    assert CONVS[:3] == ["conv1_conv", "conv2_block1_1_conv", "conv2_block1_2_conv"]
    assert compare.unit_of("conv2_block1_1_bn", CONVS) == "conv2_block1_1_conv"
    assert compare.unit_of("conv2_block1_1_relu", CONVS) == "conv2_block1_1_conv"
    assert compare.unit_of("conv3_block1_1_pad", CONVS) == "conv3_block1_1_conv"
    assert compare.unit_of("conv2_block1_add", CONVS) == "conv2_block1_2_conv"  # the block's last convolution
    assert compare.unit_of("conv2_block1_out", CONVS) == "conv2_block1_2_conv"
    assert compare.unit_of("avg_pool", CONVS) == "avg_pool"
    assert compare.group_of("conv5_block3_2_conv", "conv 3×3/1") == "the 3×3 convolutions of stage 4"
    assert compare.group_of("conv3_block1_0_conv", "conv 1×1/2") == "the projection shortcuts of stage 2"
    assert compare.group_of("conv1_conv", "conv 7×7/2") == "the stem convolution"


def test_engines_fused_differently_compare_per_unit_and_the_loser_is_named():
    # eager: batch norm and ReLU on their own; fused: all in the convolution's kernel
    eager = record({"conv2_block1_1_conv": 1.0, "conv2_block1_1_bn": 0.5, "conv2_block1_1_relu": 0.5,
                    "conv2_block1_2_conv": 1.0, "conv2_block1_add": 0.2, "conv3_block1_1_conv": 1.0})
    fused = record({"conv2_block1_1_conv": 1.5, "conv2_block1_2_conv": 1.1, "conv3_block1_1_conv": 0.4})
    units = compare.units_frame({"eager": eager, "fused": fused}, COSTS)
    wide = compare.heatmap(units)
    assert list(wide.columns) == ["eager", "fused"]
    assert list(wide.index) == ["conv2_block1_1_conv", "conv2_block1_2_conv", "conv3_block1_1_conv"]
    assert wide.loc["conv2_block1_1_conv", "eager"] == pytest.approx(2.0)
    assert wide.loc["conv2_block1_2_conv", "eager"] == pytest.approx(1.2)
    lost = compare.losers(units, top=10)
    eager_lost = lost[lost["engine"] == "eager"]
    assert list(eager_lost["unit"]) == ["conv3_block1_1_conv", "conv2_block1_1_conv", "conv2_block1_2_conv"]
    assert eager_lost.iloc[0]["lost_ms"] == pytest.approx(0.6) and eager_lost.iloc[0]["vs_best"] == pytest.approx(2.5)
    assert lost[lost["engine"] == "fused"].empty  # best everywhere: it loses nowhere
    lines = compare.weakest(units)
    assert lines[0] == ("eager: the 3×3 convolutions of stage 1, 1.2× fused's (3.20 ms against 2.60; "
                        "0.60 ms a step lost)")
    # an engine whose profiled step ran 20 % slower or more: its sentence says so
    eager["profiled_step_ms"] = 2 * eager["step_ms"]
    slowed = compare.weakest(compare.units_frame({"eager": eager, "fused": fused}, COSTS))
    assert "its profiled step ran +100% against the unprofiled one" in slowed[0]
    assert lines[1].startswith("fused: fastest at every layer kind")
    assert compare.as_bullets(lines).startswith("- eager: ") and compare.as_bullets([], "none") == "none"


def test_the_section_s_plan_is_checked_before_anything_runs():
    from resnet_lab.core.errors import UsageError

    assert layer_run.plan("tiny-resnet", 32, ["torch"], 5).backends == ("torch",)
    assert layer_run.plan("tiny-resnet", None, [], 5).image_size == 32
    assert layer_run.plan("tiny-resnet", 32, ["torch:jit", "tensorflow:jit"], 5, batch_size=8).batch_size == 8
    with pytest.raises(UsageError, match="layer_backends: 'xla' is not one of"):
        layer_run.plan("tiny-resnet", 32, ["xla"], 5)
    with pytest.raises(UsageError, match="layer_steps"):
        layer_run.plan("tiny-resnet", 32, ["torch"], 0)
    with pytest.raises(UsageError, match="layer_batch_size"):
        layer_run.plan("tiny-resnet", 32, ["torch"], 5, batch_size=0)


def _slowed(src: Path, dst: Path, node_prefix: str, copies: int) -> None:
    """The export at ``src`` copied to ``dst`` with the convolution ``node_prefix`` (as many channels out as in)
    applied ``copies`` more times to its own output, each extra node named after the same module: that layer, and
    only it, made slower (a chain: no engine can merge the copies as one)."""
    import onnx
    from onnx import helper

    shutil.copytree(src, dst)
    proto = onnx.load(str(dst / export.ONNX))
    graph = proto.graph
    i, conv = next((i, n) for i, n in enumerate(graph.node) if n.name.startswith(node_prefix + "/Conv"))
    out = conv.output[0]
    conv.output[0] = f"{out}__slow0"
    attrs = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
    extra = [helper.make_node("Conv", [f"{out}__slow{k - 1}", *conv.input[1:]],
                              [out if k == copies else f"{out}__slow{k}"], name=f"{node_prefix}/Conv_slow{k}", **attrs)
             for k in range(1, copies + 1)]
    for node in reversed(extra):
        graph.node.insert(i + 1, node)
    onnx.save(proto, str(dst / export.ONNX))


def plain_and_slowed(quick_run, tmp_path: Path) -> None:
    """``tmp_path/plain`` (the quick run's tiny-resnet export) and ``tmp_path/slow`` (the same with its
    ``layer2.0.conv2`` computed 40 times over: ~1 ms more, beyond any one profiled hiccup, 0.4 ms seen)."""
    used = json.loads(next(quick_run.run_dir.rglob(export.USED)).read_text())
    entry = next(Path(e["path"]) for name, e in used.items() if name.startswith("tiny-resnet-32px"))
    plain, slow = (export.folder(tmp_path / name, "tiny-resnet", 32) for name in ("plain", "slow"))
    plain.parent.mkdir()
    os.symlink(entry, plain)  # the quick run's export, under the name ensure looks for
    _slowed(entry, slow, "layer2.0.conv2", copies=40)


@pytest.mark.slow
@pytest.mark.serial  # a timing test: a loaded core stretches any layer (make test's serial part reuses the quick run)
def test_a_layer_slowed_on_purpose_is_the_top_loser(quick_run, tmp_path):
    if not importlib.util.find_spec("onnxruntime"):
        pytest.skip("onnxruntime is not installed")
    plain_and_slowed(quick_run, tmp_path)
    records = {name: layer_run.profile("tiny-resnet", "onnxruntime", 1, 32, steps=10, export_dir=str(tmp_path / name),
                                       peak_doc={"peak_gflops": {"fp32": 200.0}})
               for name in ("plain", "slow")}
    units = compare.units_frame(records, COSTS)
    lost = compare.losers(units, top=3)
    top = lost[lost["engine"] == "slow"].iloc[0]
    assert top["unit"] == "conv3_block1_2_conv", lost.to_string()
    assert top["vs_best"] > 3, lost.to_string()
    assert compare.weakest(units)[1].startswith("slow: the 3×3 convolutions of stage 2"), compare.weakest(units)


def test_a_unit_above_its_roofline_is_flagged_with_the_reason():
    fast = record({"conv2_block1_1_conv": 0.05, "conv2_block1_2_conv": 0.2})  # rooflines 0.1 ms: 200 % and 50 %
    units = compare.units_frame({"fast": fast, "slow": record({"conv2_block1_1_conv": 0.3})}, COSTS)
    note = compare.above_roofline(units)
    assert note.startswith("Flagged: fast 1 (up to 200%: conv2_block1_1_conv) unit reads above 100 % of the roofline")
    assert "Winograd" in note and compare.above_roofline(units[units["engine"] == "slow"]) == ""
