"""Notebook 02's "Conformance" section: a model's kits (IR × mode) exported, each run on every engine that takes
its IR, and a bisection shown on an op planted wrong. Checked before anything runs (:func:`plan`)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resnet_lab.conformance import bisect as kit_bisect
from resnet_lab.conformance import build
from resnet_lab.conformance import run as kit_run
from resnet_lab.conformance.engines import BISECT_ENGINES
from resnet_lab.core import requirements
from resnet_lab.core.choices import CASE_STATUSES, ENGINE_IRS, KIT_IRS, MODES, check_choices
from resnet_lab.core.errors import UsageError
from resnet_lab.models import specs

# The node planted wrong in the demonstration: the first ReLU of stage 2's first block (a CIFAR ResNet's and a
# ResNet-50's alike: torchvision's module names), computed as Abs (negative values let through)
PLANT_NODE = "layer2.0.relu/Relu"


@dataclass(frozen=True)
class SuitePlan:
    model: str
    kits: tuple[tuple[str, str], ...]  # (ir, mode)
    engines: tuple[str, ...]
    bisect_backend: str  # "" : no bisection
    batch_size: int = 1
    keep_kits: bool = True  # False: once run, each kit keeps its modules and case.json, not its arrays


def plan(model: str, kits: list[str], engines: list[str], bisect_backend: str, keep_kits: bool = True) -> SuitePlan:
    """The section's plan from 02's parameters (``kits``: ``"ir:mode"`` strings), or one line naming the bad value."""
    pairs = []
    for k in kits:
        ir, _, mode = str(k).partition(":")
        if ir not in KIT_IRS or mode not in MODES or (ir == "onnx" and mode == "train"):
            raise UsageError(f"conformance_kits: {k!r} is not one of ir:mode with ir in {', '.join(KIT_IRS)}, mode in "
                             f"{', '.join(MODES)} (onnx: infer only)")
        pairs.append((ir, mode))
    check_choices("conformance_engines", engines, tuple(ENGINE_IRS))
    if bisect_backend and bisect_backend not in BISECT_ENGINES:
        raise UsageError(f"conformance_bisect: {bisect_backend!r} is not one of: {', '.join(BISECT_ENGINES)} "
                         "(or empty: none)")
    if pairs or bisect_backend:
        specs.zoo_spec(model, "a conformance kit")
    return SuitePlan(model, tuple(pairs), tuple(engines), bisect_backend, 1, bool(keep_kits))


def _size_mb(where: Path) -> float:
    return sum(f.stat().st_size for f in where.rglob("*") if f.is_file()) / 1e6


def run(p: SuitePlan, out: str | Path) -> dict[str, Any]:
    """Every kit of ``p`` under ``out/conformance/``, run on every engine of ``p`` that takes its IR (an engine not
    installed: skipped, with why), and the bisection. ``{"kits": rows, "runs": rows, "results": {(engine, kit):
    per-case results}, "bisect": the bisection's result or None}``."""
    root = Path(out) / "conformance"
    kits, runs, results = [], [], {}
    wheres = [root / f"{p.model}-{ir}-{mode}" for ir, mode in p.kits]
    # every kit made in one child (one import, the model built once); each doc's seconds are its own
    docs = build.export_kits(p.model, [(ir, mode, w) for (ir, mode), w in zip(p.kits, wheres, strict=True)],
                             batch_size=p.batch_size) if p.kits else []
    for (ir, mode), where, doc in zip(p.kits, wheres, docs, strict=True):
        kits.append({"model": p.model, "ir": ir, "mode": mode, "cases": len(doc["cases"]),
                     "ops_in_model": doc["ops_in_model"], "size_mb": _size_mb(where),
                     "seconds": doc["seconds"], "folder": str(where)})
        for engine in p.engines:
            if ENGINE_IRS[engine] != ir:
                continue
            row: dict[str, Any] = {"engine": engine, "kit": f"{ir}:{mode}", "cases": len(doc["cases"])}
            if missing := requirements.missing(engine):
                runs.append({**row, "note": f"skipped: {missing}"})
                continue
            t0 = time.perf_counter()
            got = kit_run.run_kit(where, engine)
            results[(engine, f"{ir}:{mode}")] = got
            counts = Counter(r["status"] for r in got)
            bad = Counter(r["op"] for r in got if r["status"] != "pass")
            why = {r["op"]: r["reason"] for r in reversed(got) if r["status"] != "pass"}  # each op's first reason
            runs.append({**row, **{s: counts.get(s, 0) for s in CASE_STATUSES},
                         "seconds": time.perf_counter() - t0,
                         "note": "; ".join(f"{op} ×{n}: {why[op]}" for op, n in bad.items())})
        if not p.keep_kits:  # the arrays are most of a kit (a ResNet-50 one: ~0.4 GB); the CLI makes it again
            for arrays in [*where.glob("*/inputs"), *where.glob("*/expected"), *where.glob("*/test_data_set_0")]:
                shutil.rmtree(arrays)
            kits[-1]["kept"] = "modules and case.json"
    found = None
    if p.bisect_backend:
        found = _planted(p, root)
    return {"kits": kits, "runs": runs, "results": results, "bisect": found}


def _planted(p: SuitePlan, root: Path) -> dict[str, Any]:
    """The bisection on the export's ONNX model with :data:`PLANT_NODE` computed as Abs: it must name that node's
    layer (``planted`` in the result)."""
    from resnet_lab import export

    size = specs.get_spec(p.model).input_size
    where = export.ensure(None, p.model, size, [1], onnx=True, stablehlo=False)
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="resnet-lab-planted-"))  # a whole model's copy: not kept in the run
    try:
        layer = kit_bisect.plant(where / export.ONNX, scratch / "planted.onnx", PLANT_NODE)
        found = kit_bisect.bisect(p.model, p.bisect_backend, image_size=size, onnx_path=str(scratch / "planted.onnx"),
                                  out=str(root / f"{p.model}-bisect-repro"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {**found, "planted": layer, "planted_node": PLANT_NODE}
