"""Child-process entry point of a benchmark: one configuration measured, its result written as JSON.

``python -m resnet_lab.bench.worker_child [--overhead] CONFIG.json RESULT.json``, started by
:mod:`resnet_lab.bench.launcher` in the environment it built. Whatever happens, RESULT.json says so:
``status`` is ``ok`` with the raw per-step times, or a failure class and a one-line reason
(:func:`resnet_lab.bench.measure.classify`). Statistics are computed by the parent.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from resnet_lab.bench import measure
from resnet_lab.bench.config import BenchConfig


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    task = measure.measure
    if argv[:1] == ["--overhead"]:
        rounds = int(os.environ.get("RESNET_LAB_OVERHEAD_ROUNDS", "3"))
        task, argv = (lambda c: measure.overhead(c, rounds)), argv[1:]
    if len(argv) != 2:
        print("usage: python -m resnet_lab.bench.worker_child [--overhead] CONFIG.json RESULT.json",
              file=sys.stderr)
        return 2
    cfg_path, result_path = argv
    cfg = BenchConfig.from_dict(json.loads(Path(cfg_path).read_text()))
    try:
        result = task(cfg)
    except Exception as exc:  # a failed configuration is a row, not a crash
        traceback.print_exc()
        result = {"status": measure.classify(exc), "reason": measure.reason(exc)}
    tmp = Path(result_path + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip the framework's slow (and occasionally crashing) teardown; the result is written


if __name__ == "__main__":
    sys.exit(main())
