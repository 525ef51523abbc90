"""``conformance run``: every case of a kit on one engine, judged by the kit's tolerance rule.

Per case: ``pass`` or ``fail`` (the largest output error against the case's tolerance), or ``unsupported`` (the
engine could not compile or run it: its first error line, as data). The engines: IREE (``module.mlir``, compiled
for the host CPU), JAX (the same module as ``jax.export`` serialized it), ONNX Runtime and OpenVINO (the one-node
``model.onnx``; OpenVINO told to keep fp32, ``INFERENCE_PRECISION_HINT``, unless ``precision`` says otherwise).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from resnet_lab.conformance import engines
from resnet_lab.conformance import kit as K
from resnet_lab.core import requirements
from resnet_lab.core.choices import CASE_STATUSES
from resnet_lab.core.errors import UsageError


def _arrays(folder: Path, prefix: str) -> list[Any]:
    import numpy as np

    files = sorted(folder.glob(f"{prefix}*.npy"), key=lambda f: int(re.sub(r"\D", "", f.stem) or 0))
    return [np.load(f) for f in files]


def check(where: str | Path, backend: str, precision: str = "fp32") -> dict[str, Any]:
    """The kit's ``kit.json``, or one line naming what is wrong (before any engine is imported)."""
    kit = K.read_kit(where)
    K.check_engine(kit, backend, where)
    engines.check_precision(backend, precision)
    if missing := requirements.missing(backend):
        raise UsageError(f"--backend {backend}: {missing}")
    return kit


def run_kit(where: str | Path, backend: str, precision: str = "fp32") -> list[dict[str, Any]]:
    """Every case of the kit at ``where`` on ``backend``: one result per case (``case``, ``op``, ``status``,
    ``error``: the largest output error, ``tolerance``, ``reason``: why it failed or is unsupported, ``layers``)."""
    kit = check(where, backend, precision)
    run = engines.runner(backend, precision)
    if hasattr(run, "prepare"):
        run.prepare([Path(where) / name for name in kit["cases"]])
    results = []
    for name in kit["cases"]:
        case = Path(where) / name
        meta = json.loads((case / K.CASE).read_text())
        row = {"case": name, "op": meta["op"], "kind": meta["kind"], "tolerance": meta["tolerance"],
               "calls": meta.get("calls", 1), "layers": "+".join(meta.get("layers", [])[:3]), "error": None,
               "status": "unsupported", "reason": "", "seconds": 0.0}
        t0 = time.perf_counter()
        try:
            outs = run(case, _arrays(case / "inputs", ""))
        except Exception as exc:  # the engine's own error, kept as data
            row.update(reason=engines.reason(exc),
                       seconds=time.perf_counter() - t0)
            results.append(row)
            continue
        expected = _arrays(case / "expected", "float64_")
        reference = _arrays(case / "expected", "reference_")
        errors = [K.error(o, e) for o, e in zip(outs, expected, strict=False)]
        row.update(K.worst([K.measures(o, e, r, getattr(r, "dtype", "float32"))
                            for o, e, r in zip(outs, expected, reference, strict=False)]))
        worst = max(errors, default=float("inf")) if len(outs) == len(expected) else float("inf")
        passed = worst <= meta["tolerance"]
        row.update(status="pass" if passed else "fail", error=worst, seconds=time.perf_counter() - t0,
                   reason="" if passed else f"error {worst:.3g} > tolerance {meta['tolerance']:.3g}"
                   + ("" if len(outs) == len(expected) else f" ({len(outs)} outputs, {len(expected)} expected)"))
        results.append(row)
    return results


def summary(results: list[dict[str, Any]]) -> str:
    """One line: how many cases passed, failed, are unsupported, and which failed."""
    counts = {s: sum(r["status"] == s for r in results) for s in CASE_STATUSES}
    line = f"{len(results)} cases: {counts['pass']} pass, {counts['fail']} fail, {counts['unsupported']} unsupported"
    failed = [f"{r['case']} ({r['reason']})" for r in results if r["status"] == "fail"]
    if failed:
        line += "; failed: " + ", ".join(failed[:10]) + (" ..." if len(failed) > 10 else "")
    return line
