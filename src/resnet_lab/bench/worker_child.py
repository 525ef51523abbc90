"""Child-process entry point of a benchmark: configurations measured one after another, results as JSON.

``python -m resnet_lab.bench.worker_child CONFIGS.json RESULTS.jsonl`` measures each configuration of the
list (they share one :func:`~resnet_lab.bench.config.process_key`: what the framework reads at import) and
appends one JSON line per result as soon as it has it; ``--overhead CONFIG.json RESULT.json`` runs the
harness-overhead check of one configuration. Started by :mod:`resnet_lab.bench.launcher` in the environment
it built. Whatever happens to a configuration, its line says so: ``status`` is ``ok`` with the raw per-step
times, or a failure class and a one-line reason (:func:`resnet_lab.bench.measure.classify`). Before each
configuration a marker line on stdout lets the parent split the log. Statistics are computed by the parent.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import traceback
from pathlib import Path

from resnet_lab.bench import measure
from resnet_lab.bench.config import BenchConfig
from resnet_lab.ceilings.profile import CONFIG_MARK


def _one(task, cfg: BenchConfig) -> dict:
    try:
        return task(cfg)
    except Exception as exc:  # a failed configuration is a row, not a crash
        traceback.print_exc()
        return {"status": measure.classify(exc), "reason": measure.reason(exc)}


def _release() -> None:
    """Drop the last configuration's model and graphs before the next one is built."""
    if "keras" in sys.modules:
        sys.modules["keras"].backend.clear_session()
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    overhead = argv[:1] == ["--overhead"]
    argv = argv[1:] if overhead else argv
    if len(argv) != 2:
        print("usage: python -m resnet_lab.bench.worker_child [--overhead] CONFIG(S).json RESULT(S)",
              file=sys.stderr)
        return 2
    cfg_path, result_path = argv
    if overhead:
        rounds = int(os.environ.get("RESNET_LAB_OVERHEAD_ROUNDS", "3"))
        cfg = BenchConfig.from_dict(json.loads(Path(cfg_path).read_text()))
        result = _one(lambda c: measure.overhead(c, rounds), cfg)
        tmp = Path(result_path + ".tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(result_path)
    else:
        cfgs = [BenchConfig.from_dict(d) for d in json.loads(Path(cfg_path).read_text())]
        with open(result_path, "a") as out:
            for i, cfg in enumerate(cfgs):
                if i:
                    _release()
                print(f"{CONFIG_MARK} {i}", flush=True)
                result = _one(measure.measure, cfg)
                out.write(json.dumps(result) + "\n")
                out.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip the framework's slow (and occasionally crashing) teardown; the results are written


if __name__ == "__main__":
    sys.exit(main())
