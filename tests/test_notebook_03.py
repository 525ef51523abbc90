"""Notebook 03_benchmarks executed with papermill on tiny parameters; asserts on its results.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from resnet_lab import bench

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "03_benchmarks.ipynb"

TINY = {
    "model": "tiny-resnet", "image_size": 32, "batch_size": 4, "steps_2017": 2, "sweep_steps": 2, "warmup": 1,
    "sweep_batch_sizes": [2, 4], "sweep_precisions": ["fp32", "bf16"], "sweep_threads": [[1, 1]],
    "profile": True, "timeout_s": 300.0,
}


def test_notebook_is_committed_clean():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# 03")
    params = nb.cells[1]
    assert params.cell_type == "code" and "parameters" in params.metadata.get("tags", [])
    expected = 'output_dir: str = ""  # artifact folder; empty = outputs/adhoc/<timestamp>-03_benchmarks'
    assert expected in params.source
    for line in params.source.splitlines():  # typed, commented literals only
        assert ": " in line and "  # " in line, line
    assert "report.record(" in nb.cells[-1].source
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None


@pytest.mark.slow
def test_notebook_runs_tiny(tmp_path, monkeypatch):
    papermill = pytest.importorskip("papermill")
    peak_file = tmp_path / "peak.json"
    peak_file.write_text(json.dumps({"host": "test", "peak_gflops": {"fp32": 100.0, "bf16": 400.0}}))
    out = tmp_path / "out"
    src = str(bench.package_root())
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("RESNET_LAB_OUTPUTS", str(tmp_path / "outputs"))
    papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "03_benchmarks.ipynb"), kernel_name="python3", cwd=str(ROOT),
        parameters={**TINY, "peak_file": str(peak_file), "output_dir": str(out)}, progress_bar=False,
    )
    results = json.loads((out / "results.json").read_text())
    statuses = results["statuses_2017"]
    assert statuses["CPU"] == statuses["CPU MKL"] == statuses["XLA CPU"] == "ok"
    assert statuses["XLA jit CPU (new)"] == "ok"
    if not bench.gpus_visible()[0]:
        assert statuses["GPU"] == statuses["2xGPU"] == statuses["XLA 2xGPU"] == "skipped"
    assert results["n_failed"] == 0 and results["n_ok"] >= 7
    assert results["best_images_per_sec"] > 0 and 0 < results["best_fp32_mfu"] < 1
    assert results["peak_gflops"]["fp32"] == 100.0
    assert 0 < results["profile_conv_share"] < 1 and results["profile_conv_gflops"] > 0
    for name in ("bench.csv", "bench_2017.csv", "profile.csv", "bench_sweeps.json", "compare_2017.csv",
                 "compare_2017.png", "sweeps.png", "mfu_cpu_util.png", "provenance.json"):
        assert (out / name).exists(), name
