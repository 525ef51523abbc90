"""notebooks/04_convergence.ipynb: its layout, and its digits run under params/quick.yaml converges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from resnet_lab.convergence import train

ROOT = Path(__file__).resolve().parents[2]
NB = ROOT / "notebooks" / "04_convergence.ipynb"


@pytest.mark.slow
def test_digits_smoke_run_reaches_95_percent(quick_run) -> None:
    """The quick run (papermill, params/quick.yaml) trains ResNet-20 on digits past 95 % test accuracy."""
    assert quick_run.statuses["04_convergence"] == "ok", quick_run.errors.get("04_convergence")
    steps = yaml.safe_load((ROOT / "params" / "quick.yaml").read_text())["notebooks"]["04_convergence"]["steps"]
    out = quick_run.run_dir / "04_convergence"
    results = json.loads((out / "results.json").read_text())
    assert results["test_accuracy"] >= 0.95, results
    assert results["steps"] == results["optimizer_iterations"] == steps and results["finished"]
    assert results["data"] == "digits" and results["model"] == "cifar_resnet20"
    assert results["published_accuracy"] is None and results["verdict"] == "no published figure"
    assert "no published figure exists" in results["verdict_text"]
    for name in ("history.csv", "learning_curves.png", "comparison.csv", "recipe.csv", "provenance.json"):
        assert (out / name).stat().st_size > 0, name
    history = train.read_history(out)
    assert history["step"].iloc[-1] == steps and history["step"].is_monotonic_increasing
    assert len(train.list_checkpoints(out)) == 2  # keep_checkpoints
