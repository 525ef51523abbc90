"""Shared fixtures. The quick run executes every notebook once per session with params/quick.yaml;
each test that needs a measured row, an HLO record or a notebook's results reads what that run wrote
instead of measuring again.

``RESNET_LAB_QUICK_RUN=<run folder>`` reuses a finished quick run (``make quick`` prints its folder) for a
faster loop while editing tests; ``make test`` always makes a fresh one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    """One `resnet-lab run params/quick.yaml` into a temporary outputs root (all notebooks)."""
    from resnet_lab.workbook.runner import RunResult, run_notebooks

    reuse = os.environ.get("RESNET_LAB_QUICK_RUN")
    if reuse:
        prov = json.loads((Path(reuse) / "provenance.json").read_text())
        notebooks = prov["notebooks"]
        return RunResult(Path(reuse), {n["name"]: n["status"] for n in notebooks},
                         {n["name"]: n["error"] for n in notebooks if n.get("error")})
    out = tmp_path_factory.mktemp("quick-outputs")
    return run_notebooks(ROOT / "params" / "quick.yaml", out=out, notebooks_dir=ROOT / "notebooks", progress=False)
