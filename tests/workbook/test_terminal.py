"""What a user sees in the terminal during `resnet-lab run`: progress lines, and no C++ log line."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.slow

# absl/TensorFlow/XLA C++ log lines, and Jupyter's transport warning: they belong in the notebook's log
NOISE = re.compile(r"^[IWEF]\d{4} |oneDNN custom operations|XLA service|StreamExecutor|MLIR crash reproducer|"
                   r"Kernel is running over TCP|TF_ENABLE_ONEDNN_OPTS")


def test_terminal_shows_progress_and_no_cpp_logs(quick_run):
    lines = quick_run.terminal.splitlines()
    assert not [ln for ln in lines if NOISE.search(ln)], "C++ or transport logs reached the terminal"
    started = [ln for ln in lines if re.match(r"^\[\d/6\] \d\d_\w+ \.\.\.", ln)]
    finished = [ln for ln in lines if re.match(r"^\[\d/6\] \d\d_\w+ ok in \d+\.\d min$", ln)]
    assert len(started) == len(finished) == 6, quick_run.terminal[-3000:]
    rows = [ln for ln in lines if re.match(r"^  03_benchmarks bench_2017 \[\d+/\d+\] ", ln)]
    assert rows and re.search(r"CPU MKL train b4: \d+\.\d\d img/s \(\d+ s\)", "\n".join(rows)), rows
    assert any("min left in bench_2017" in ln for ln in rows)
    assert any("same run as" in ln for ln in lines)  # a row two sections share is measured once
    assert lines[-1].startswith("index: ")


def test_cpp_logs_go_to_each_notebooks_log(quick_run):
    log = (quick_run.run_dir / "02_op_extraction.log").read_text()
    assert re.search(r"^[IWEF]\d{4} ", log, re.M)  # TensorFlow's C++ log lines (absl's prefix), on any CPU
    # TensorFlow says "oneDNN custom operations are on" exactly where the provenance says it enabled them (not on an
    # AVX2-only CPU, where its default is off)
    enabled = json.loads((quick_run.run_dir / "provenance.json").read_text())["onednn"]["enabled"]
    assert ("oneDNN custom operations are on" in log) is enabled
    assert "Kernel is running over TCP" in (quick_run.run_dir / "03_benchmarks.log").read_text()
    html = (quick_run.run_dir.parent.parent / "index.html").read_text()
    assert "03_benchmarks.log" in html and " min)" in html
