"""notebooks/02_op_extraction.ipynb: committed clean, and executed with tiny parameters by papermill."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "02_op_extraction.ipynb"
TINY = dict(models=["cifar_resnet20"], focus_model="cifar_resnet20", batch_size=2, image_size=8,
            platforms=["cpu", "gpu"], dump_batch_size=2, dump_image_size=8)


def test_committed_without_outputs_and_with_a_typed_parameters_cell():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# 02")
    params = nb.cells[1]
    assert params.cell_type == "code" and "parameters" in params.metadata.get("tags", [])
    lines = params.source.splitlines()
    assert all(": " in line.split("=")[0] and "  # " in line for line in lines)  # typed, commented literals
    assert any(line.startswith('output_dir: str = ""') for line in lines)
    assert "report.prepare_output_dir(output_dir, \"02_op_extraction\"" in nb.cells[2].source
    assert "report.record(" in nb.cells[-1].source
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.slow
def test_executes_with_tiny_parameters(tmp_path, monkeypatch):
    papermill = pytest.importorskip("papermill")
    # the kernel is a child process: let it import this checkout's package
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                                     os.environ.get("PYTHONPATH")])))
    out = tmp_path / "out"
    papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "executed.ipynb"), kernel_name="python3",
                               parameters={**TINY, "output_dir": str(out)}, progress_bar=False)
    results = json.loads((out / "results.json").read_text())
    distinct = results["distinct_opcodes"]
    assert set(distinct) == {f"cifar_resnet20/{m}/{s}/cpu" for m in ("infer", "train")
                             for s in ("before", "after")}
    assert distinct["cifar_resnet20/train/before/cpu"] > distinct["cifar_resnet20/infer/before/cpu"]
    assert all(s["platform"] == "gpu" and "needs a GPU" in s["skipped"] for s in results["skipped"]) \
        or results["skipped"] == []
    assert results["opcode_list"]["count"] > 100
    assert results["legacy_2017"]["not_opcodes_2017"] == ["arg", "equal", "get", "greater", "less", "logical"]
    assert results["dump"]["same_opcode_set"] == {"before": True, "after": True}
    assert "arg" in results["dump"]["regex_2017_today"]
    for name in ("summary.csv", "opcode_table.csv", "inventories.json", "legacy_2017_side_by_side.csv",
                 "heatmap_train.png", "convolutions_train_before_cifar_resnet20.csv", "provenance.json"):
        assert (out / name).exists(), name
    assert len(list((out / "xla_dump").glob("*optimizations.txt"))) == 2
