"""Child-process entry point of a benchmark: configurations measured one after another, results as JSON.

``python -m resnet_lab.bench.worker_child REQUESTS.json REPLIES.jsonl`` (:mod:`resnet_lab.core.child`): each
request is ``{"task": "measure", "config": {...}}``, or ``{"task": "overhead", "rounds": N, "config": {...}}``
for the harness-overhead check of one configuration. The configurations of one process share one
:func:`~resnet_lab.bench.config.process_key` (what the framework reads at import); each is answered as soon as
it is measured. Started by :mod:`resnet_lab.bench.launcher` in the environment it built. Whatever happens to a
configuration, its reply says so: ``status`` is ``ok`` with the raw per-step times, or a failure class and a
one-line reason (:func:`resnet_lab.bench.measure.classify`). Statistics are computed by the parent.
"""

from __future__ import annotations

import gc
import sys
import traceback
from typing import Any

from resnet_lab.bench import measure
from resnet_lab.bench.config import BenchConfig
from resnet_lab.core import child


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """One configuration's result; a failed configuration is a row with its class and reason, not a crash."""
    _release()
    try:
        cfg = BenchConfig.from_dict(request["config"])
        if request.get("task") == "overhead":
            return measure.overhead(cfg, int(request.get("rounds", 3)))
        return measure.measure(cfg)
    except Exception as exc:
        traceback.print_exc()
        return {"status": measure.classify(exc), "reason": measure.reason(exc)}


def _release() -> None:
    """Drop the last configuration's model and graphs before the next one is built."""
    if "keras" in sys.modules:
        sys.modules["keras"].backend.clear_session()
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    return child.serve("resnet_lab.bench.worker_child", answer, argv)


if __name__ == "__main__":
    sys.exit(main())
