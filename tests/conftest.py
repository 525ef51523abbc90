"""Shared fixtures. The quick run executes every notebook once per session with params/quick.yaml;
each test that needs a measured row, an HLO record or a notebook's results reads what that run wrote
instead of measuring again.

``RESNET_LAB_QUICK_RUN=<run folder>`` reuses a finished quick run (``make quick`` prints its folder) for a
faster loop while editing tests; ``make test`` always makes a fresh one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock
from helpers import fresh_env

from resnet_lab.workbook.runner import RunResult

ROOT = Path(__file__).resolve().parents[1]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test` runs two workers), every test of the quick run goes to one worker,
    so the run happens once while the other worker takes the rest of the suite."""
    for item in items:
        if "quick_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("quick_run"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@dataclasses.dataclass
class QuickRun(RunResult):
    terminal: str = ""  # what `resnet-lab run` printed (stdout and stderr), as a user sees it


def _finished(run_dir: Path, terminal: str) -> QuickRun:
    notebooks = json.loads((run_dir / "provenance.json").read_text())["notebooks"]
    return QuickRun(run_dir, {n["name"]: n["status"] for n in notebooks},
                    {n["name"]: n["error"] for n in notebooks if n.get("error")}, terminal)


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory) -> QuickRun:
    """One `resnet-lab run params/quick.yaml` (all notebooks), as a user runs it: the CLI in its own
    process, its terminal output kept, into a temporary outputs root."""
    reuse = os.environ.get("RESNET_LAB_QUICK_RUN")
    if reuse:
        log = Path(reuse) / "terminal.txt"
        return _finished(Path(reuse), log.read_text() if log.exists() else "")
    # pytest-xdist workers of one session share the base temp folder's parent: the first worker runs the
    # quick run, the others wait for it on the lock and read what it wrote (one run per session).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with FileLock(str(shared / "quick-run.lock")):
        marker = shared / "quick-run.json"
        if marker.exists():
            run_dir = Path(json.loads(marker.read_text())["run_dir"])
            return _finished(run_dir, (run_dir / "terminal.txt").read_text())
        result = _quick_run(shared / "quick-outputs")
        marker.write_text(json.dumps({"run_dir": str(result.run_dir)}))
        return result


def _quick_run(out: Path) -> QuickRun:
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "resnet_lab.cli", "run", str(ROOT / "params" / "quick.yaml"),
                        "--out", str(out), "--notebooks", str(ROOT / "notebooks")],
                       capture_output=True, text=True, env=fresh_env(), timeout=3600)
    (run_dir,) = (out / "runs").iterdir()
    terminal = r.stdout + r.stderr
    (run_dir / "terminal.txt").write_text(terminal)
    return _finished(run_dir, terminal)
