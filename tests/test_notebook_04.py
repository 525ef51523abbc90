"""notebooks/04_convergence.ipynb: committed clean, and its digits smoke run converges (papermill)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks" / "04_convergence.ipynb"
PARAM_LINE = re.compile(r"^\w+: [\w\[\], |]+ = \S.*  # \S.*$")  # `name: type = literal  # comment`


def test_notebook_layout() -> None:
    nb = nbformat.read(NB, as_version=4)
    first, params, last = nb.cells[0], nb.cells[1], nb.cells[-1]
    assert first.cell_type == "markdown" and first.source.startswith("# ") and "Question" in first.source
    assert params.cell_type == "code" and params.metadata.get("tags") == ["parameters"]
    lines = params.source.splitlines()
    assert all(PARAM_LINE.match(line) for line in lines), [ln for ln in lines if not PARAM_LINE.match(ln)]
    assert any(line.startswith('output_dir: str = ""') for line in lines)
    assert 'report.prepare_output_dir(output_dir, "04_convergence"' in nb.cells[2].source
    assert last.cell_type == "code" and last.source.startswith("report.record(")
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "commit the notebook without outputs"


@pytest.mark.slow
def test_digits_smoke_run_reaches_95_percent(tmp_path: Path, monkeypatch) -> None:
    import papermill

    # the kernel is a subprocess: make it import this checkout's package (also when not pip-installed)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                                   os.environ.get("PYTHONPATH")])))
    out = tmp_path / "out"
    papermill.execute_notebook(
        str(NB), str(tmp_path / "04_convergence.ipynb"), kernel_name="python3", cwd=str(tmp_path),
        progress_bar=False,
        parameters=dict(steps=200, batch_size=64, log_every=10, eval_every=50, checkpoint_every=50,
                        output_dir=str(out)),
    )
    results = json.loads((out / "results.json").read_text())
    assert results["test_accuracy"] >= 0.95, results
    assert results["steps"] == results["optimizer_iterations"] == 200 and results["finished"]
    assert results["data"] == "digits" and results["model"] == "cifar_resnet20"
    assert results["published_accuracy"] is None and results["verdict"] == "no published figure"
    assert "no published figure exists" in results["verdict_text"]
    for name in ("history.csv", "learning_curves.png", "comparison.csv", "recipe.csv", "provenance.json"):
        assert (out / name).stat().st_size > 0, name
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert checkpoints == ["ckpt-00000150.npz", "ckpt-00000200.npz"]  # keep_checkpoints=2
