"""Shared fixtures. The quick run executes every notebook once per session with params/quick.yaml;
each test that needs a measured row, an HLO record or a notebook's results reads what that run wrote
instead of measuring again.

It starts in the background as soon as collection ends and the tests that read it run last, so the rest of
the suite runs meanwhile. ``RESNET_LAB_QUICK_RUN=<run folder>`` reuses a finished quick run (``make quick``
prints its folder) for a faster loop while editing tests; ``make test`` makes a fresh one in its first part and
its serial part reuses that one (``RESNET_LAB_QUICK_RUN_RECORD``: where the first part notes the folder).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock
from helpers import fresh_env, shared_tmp

from resnet_lab.workbook.runner import RunResult

ROOT = Path(__file__).resolve().parents[1]
# the runs the tests make go into their own outputs' store, never into a team's store this shell may name
os.environ.pop("RESNET_LAB_STORE", None)


def _needs_quick_run(item: pytest.Item) -> bool:
    return "quick_run" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The tests that read the quick run go last (in their order): the run starts in the background when
    collection ends (:func:`pytest_collection_finish`), and every worker takes the rest of the suite
    meanwhile instead of waiting for it."""
    items.sort(key=_needs_quick_run)
    _note_serial_modules(items)


def _note_serial_modules(items) -> None:
    """Where ``RESNET_LAB_SERIAL_RECORD`` names a file, write there the test modules that hold a serial test (one
    path a line): ``make test``'s serial part collects just those, not the whole suite again (10 s). Written by
    one process (the first xdist worker, or the only one) before the marks deselect anything."""
    record = os.environ.get("RESNET_LAB_SERIAL_RECORD")
    if not record or os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    paths = sorted({str(item.path) for item in items
                    if item.get_closest_marker("serial") and not item.get_closest_marker("benchmark")})
    Path(record).parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no .pytest_cache yet
    Path(record).write_text("".join(f"{p}\n" for p in paths))


EARLY_ENV = "RESNET_LAB_QUICK_RUN_EARLY"  # make test's first part: start the quick run before collection


@pytest.hookimpl(trylast=True)  # after the temporary-path plugin's own configure
def pytest_configure(config):
    """With ``RESNET_LAB_QUICK_RUN_EARLY=1`` (make test) and the whole suite selected (its testpaths, no ``-k``),
    start the quick run now, in the process that spawns the xdist workers: before they start and collect (13-17
    s on 2 cores), since the run is the suite's longest path. The workers find it started (their shared folder
    is this process's base temp folder) and a session that ends first stops it (:func:`pytest_sessionfinish`)."""
    if (os.environ.get(EARLY_ENV) == "1" and not os.environ.get("RESNET_LAB_QUICK_RUN")
            and not os.environ.get("PYTEST_XDIST_WORKER") and not config.option.keyword
            and config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.collectonly):
        _start_quick_run(config._tmp_path_factory.getbasetemp())


def pytest_collection_finish(session):
    """Start the quick run now if a selected test reads it. Under xdist each worker then lowers its own
    priority (nice 5; the run keeps the one it started with): the session ends when the quick run and the
    tests reading it do, so the run gets the cores first and the rest of the suite takes what it leaves."""
    if not any(_needs_quick_run(item) for item in session.items):
        return
    if not os.environ.get("RESNET_LAB_QUICK_RUN"):
        _start_quick_run(_shared(session.config._tmp_path_factory))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.nice(5)


def pytest_sessionfinish(session):
    """A quick run still going when the session ends (stopped early, -x) is stopped with it."""
    if _STARTED and _STARTED[0].poll() is None:
        os.killpg(_STARTED[0].pid, signal.SIGTERM)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def avx2_host() -> Path:
    """The measured facts of an AVX2-only host kind (``outputs/reference/hosts/amd-epyc-f25m1-avx2/timing/``: a
    fresh clone's `make report` there, 2026-12-05): provenance.json, 00's peak.json, 03's bench.csv and
    wall_breakdown.csv."""
    return ROOT / "outputs" / "reference" / "hosts" / "amd-epyc-f25m1-avx2" / "timing"


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
    process, its terminal output kept, into a temporary outputs root. Started when collection ends; this
    waits for it to finish."""
    reuse = os.environ.get("RESNET_LAB_QUICK_RUN")
    if reuse:
        log = Path(reuse) / "terminal.txt"
        return _finished(Path(reuse), log.read_text() if log.exists() else "")
    shared = _shared(tmp_path_factory)
    _start_quick_run(shared)  # started at collection already, unless this test was not collected then
    done = shared / "quick-run.rc"
    deadline = time.monotonic() + 3600
    while not done.exists():
        assert time.monotonic() < deadline, "the quick run took more than an hour"
        time.sleep(0.5)
    (run_dir,) = (shared / "quick-outputs" / "runs").iterdir()
    if record := os.environ.get("RESNET_LAB_QUICK_RUN_RECORD"):  # make test's serial part reuses it
        Path(record).parent.mkdir(parents=True, exist_ok=True)
        Path(record).write_text(str(run_dir))
    return _finished(run_dir, (run_dir / "terminal.txt").read_text())


# pytest-xdist workers of one session share the base temp folder's parent: the first to get there starts the
# quick run, the others find it started (one run per session).
_shared = shared_tmp


_STARTED: list[subprocess.Popen] = []  # the quick run this process started
# Runs the CLI, then keeps what it printed (stdout, then stderr) as terminal.txt in its run folder and writes
# its exit status last: the file the waiting fixture looks for.
_WRAPPER = """import subprocess, sys
from pathlib import Path
done, out, cmd = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
rc = "not started"
try:
    r = subprocess.run(cmd, capture_output=True, text=True)
    rc = str(r.returncode)
    for run_dir in (out / "runs").iterdir():
        (run_dir / "terminal.txt").write_text(r.stdout + r.stderr)
finally:
    done.write_text(rc)
"""


def _start_quick_run(shared: Path) -> None:
    with FileLock(str(shared / "quick-run.lock")):
        started = shared / "quick-run.started"
        if started.exists():
            return
        out = shared / "quick-outputs"
        out.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "resnet_lab.cli", "run", str(ROOT / "params" / "quick.yaml"), "--out", str(out),
               "--notebooks", str(ROOT / "notebooks")]
        _STARTED.append(subprocess.Popen([sys.executable, "-c", _WRAPPER, str(shared / "quick-run.rc"), str(out), *cmd],
                                         env=fresh_env(), stdin=subprocess.DEVNULL, start_new_session=True))
        started.write_text(str(_STARTED[0].pid))
