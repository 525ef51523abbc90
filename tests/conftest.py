"""Shared fixtures. The quick run executes every notebook once per session with params/quick.yaml;
each notebook's tests read what it recorded instead of executing it again."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    """One `resnet-lab run params/quick.yaml` into a temporary outputs root (all notebooks)."""
    from resnet_lab.workbook.runner import run_notebooks

    out = tmp_path_factory.mktemp("quick-outputs")
    return run_notebooks(ROOT / "params" / "quick.yaml", out=out, notebooks_dir=ROOT / "notebooks", progress=False)
