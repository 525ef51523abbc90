"""Two per-layer profiles of one engine, layer by layer: which layers got slower or faster beyond noise.

The input is two :func:`resnet_lab.layers.attribute.attribute` records of one model, mode, batch, image size and
precision on one engine (``resnet-lab layers``' JSON, 03's ``layers*.json``, or a run folder holding them). Per
Keras layer: old ms, new ms, their ratio, and a verdict.

The noise rule has two parts, and a layer is called changed only when it is beyond both. *Across layers*: between
two profiles of one commit every layer moves a little and the whole step moves too (the host's run-to-run shift).
The diff takes the median of the layers' log ratios as that shift of the whole (a host that is 4 % slower today
makes every layer 4 % slower: no layer is to blame), and the layers' spread about it (1.4826 × the median absolute
deviation, a robust sd that one slowed layer cannot inflate) as one layer's noise. A layer is ``regressed``
(``improved``) when its ratio beyond the shift is an outlier, a modified z-score above :data:`Z` (Iglewicz and
Hoaglin's 3.5), *and* moves by more than ``threshold_pct`` and by more than :data:`MIN_MS` of the step and
:data:`MIN_ABS_MS`: a large relative change of a layer that takes a few microseconds is the profiler's clock or a
thread pool's wake-up, not a finding. The whole step's change is reported beside (``shift_pct``), never attributed
to a layer.

*Across steps*, where both records carry each layer's time step by step (``per_step``: ONNX Runtime, OpenVINO,
PyTorch eager): a layer is compared by its median over the steps, not their sum (one hiccup in one step must not
outweigh a small layer), and its change beyond the shift must also stand out from its own steps' spread: a z-score
over the two medians' standard errors (1.2533 × the steps' robust sd over √steps, the sd never below the
profiler's resolution :data:`RESOLUTION_MS`) above :data:`Z` (``step_z``). Records without steps keep the first
part alone.

Where the store has earlier profiles of this engine and configuration on the host kind (``--store-noise``), a
layer's noise is its own: :func:`layer_noise` takes, over those runs, each layer's spread of log ms about its mean
once each run's shift (the median over its layers) is taken out, so a layer that always jitters by 20 % is judged
against 20 %, and a steady one against its own ±2 %; a layer with fewer than :data:`MIN_NOISE_RUNS` earlier runs
keeps the pair's rule. The whole is still taken out as the pair's shift.

Layers present on one side only (a fusion that changed which layers a kernel computes, or a layer that took
no time) are listed apart, as Holistic Trace Analysis lists ops added and removed, never compared.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from resnet_lab.core.errors import UsageError
from resnet_lab.layers.attribute import spread as robust_sd

Z = 3.5  # the modified z-score beyond which a layer's change is an outlier (Iglewicz & Hoaglin, 1993)
MIN_MS = 0.005  # a layer's change under this share of the step is never a finding (the profiler's resolution)
MIN_ABS_MS = 0.02  # nor one under 20 µs a step: a CPU thread pool's wake-up jitter (5-50 µs), whatever the model
RESOLUTION_MS = 0.001  # the profilers' clock (ONNX Runtime's and OpenVINO's counters are in µs): a step's sd floor
MATCH = ("model", "mode", "batch_size", "image_size", "precision")  # what two records must share to be compared
EXIT = {"regressed": 1, "improved": 0, "stable": 0}
RUN_FILES = ("03_benchmarks/layers.json", "layers.json", "layers/layers.json")  # where a folder holds its profiles


def load(path: str | Path) -> dict[str, dict[str, Any]]:
    """Engine label → record, from a records file (``{"records": {...}}``), one record (``resnet-lab layers
    --format json``: keyed by its backend) or a folder holding ``layers.json`` (a run, 03's folder, a host kind's
    record). One line when it holds none."""
    p = Path(path)
    if p.is_dir():
        found = [p / f for f in RUN_FILES if (p / f).is_file()]
        if not found:
            raise UsageError(f"{path}: no per-layer profile in this folder (looked for {', '.join(RUN_FILES)})")
        p = found[0]
    if not p.is_file():
        raise UsageError(f"{path}: no such file or folder (a layers JSON or a run folder)")
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not a per-layer profile ({e})") from None
    if isinstance(doc, dict) and isinstance(doc.get("records"), dict):
        records = doc["records"]
    elif isinstance(doc, dict) and isinstance(doc.get("layers"), list):
        records = {doc.get("engine") or doc.get("backend") or p.stem: doc}
    else:
        raise UsageError(f"{path}: not a per-layer profile (neither records nor one record with layers)")
    if not records:
        raise UsageError(f"{path}: holds no engine's per-layer profile")
    return records


def pick(old: Mapping[str, Any], new: Mapping[str, Any], engine: str | None) -> list[str]:
    """The engines to diff: ``engine`` (present on both sides), or every engine both sides hold."""
    if engine is not None:
        for side, records in (("OLD", old), ("NEW", new)):
            if engine not in records:
                raise UsageError(f"--engine '{engine}': not in {side} (it holds: {', '.join(records)})")
        return [engine]
    common = [e for e in new if e in old]
    if not common:
        raise UsageError(f"no engine on both sides (OLD: {', '.join(old)}; NEW: {', '.join(new)})")
    return common


MIN_NOISE_RUNS = 3  # earlier profiles a layer needs before its own run-to-run noise replaces the pair's rule
NOISE_FLOOR = 0.01  # a layer's own noise is never taken below 1 % (sd of log ms): a few runs can agree by chance


def layer_noise(profiles: list[Mapping[str, float]]) -> dict[str, float]:
    """Layer → its run-to-run sd of log ms over ``profiles`` (layer → ms, one per earlier run of the host kind:
    :func:`resnet_lab.runs.store.layer_history`), each run's shift (the median of its layers' deviations) taken
    out; only layers in :data:`MIN_NOISE_RUNS` profiles or more, never below :data:`NOISE_FLOOR`."""
    logs: dict[str, dict[int, float]] = {}
    for j, prof in enumerate(profiles):
        for layer, ms in prof.items():
            if ms and ms > 0:
                logs.setdefault(layer, {})[j] = math.log(ms)
    kept = {k: v for k, v in logs.items() if len(v) >= MIN_NOISE_RUNS}
    if not kept:
        return {}
    means = {k: statistics.fmean(v.values()) for k, v in kept.items()}
    shift = {j: statistics.median([v[j] - means[k] for k, v in kept.items() if j in v])
             for j in range(len(profiles)) if any(j in v for v in kept.values())}
    out = {}
    for k, v in kept.items():
        resid = [y - means[k] - shift[j] for j, y in v.items()]
        out[k] = max(math.sqrt(sum(r * r for r in resid) / (len(resid) - 1)), NOISE_FLOOR)
    return out


def _step_se(layer: Mapping[str, Any]) -> float:
    """The standard error of a layer's median over its steps, in log ms (1.2533 × sd / √n, for a normal sample)."""
    n, med = len(layer["steps_ms"]), layer["median_ms"]
    return 1.2533 * max(float(layer["spread_ms"]), RESOLUTION_MS) / med / math.sqrt(n)


def diff(old: Mapping[str, Any], new: Mapping[str, Any], threshold_pct: float = 10.0, z: float = Z,
         noise: Mapping[str, float] | None = None) -> dict[str, Any]:
    """One engine's two records layer by layer (see the module's noise rule): ``rows`` (``layer``, ``kind``,
    ``old_ms``, ``new_ms`` (medians over the steps where both records have them), ``ratio``, ``vs_shift`` (the ratio
    over the whole's shift), ``z``, ``step_z`` (None without steps), ``verdict``), worst
    first; ``added`` and ``gone`` (layers on one side only, with their ms); ``shift_pct``, ``noise_pct`` (one
    layer's robust sd, in %), ``verdict`` (regressed when any layer is) and ``not_comparable`` reasons (empty when
    the records match on :data:`MATCH`). ``noise``: layer → its own run-to-run sd of log ms (:func:`layer_noise`);
    such a layer's z is its change beyond the shift over √2 × that sd (two profiles, each that noisy), and its
    row says ``noise: "store"``."""
    mismatch = [f"{k}: {old.get(k)!r} vs {new.get(k)!r}" for k in MATCH if old.get(k) != new.get(k)]
    before = {x["layer"]: x for x in old["layers"]}
    after = {x["layer"]: x for x in new["layers"]}
    stepped = bool(old.get("per_step") and new.get("per_step"))
    key = "median_ms" if stepped else "ms"
    both = [name for name in after if name in before and before[name][key] > 0 and after[name][key] > 0]
    logs = {name: math.log(after[name][key] / before[name][key]) for name in both}
    shift = statistics.median(logs.values()) if logs else 0.0
    sd = robust_sd(list(logs.values())) if len(logs) >= 3 else 0.0
    floor = max(MIN_MS * max(float(old.get("step_ms") or 0.0), float(new.get("step_ms") or 0.0)), MIN_ABS_MS)
    rows = []
    for name in both:
        o, n = before[name][key], after[name][key]
        beyond = logs[name] - shift
        step_z = beyond / math.hypot(_step_se(before[name]), _step_se(after[name])) if stepped else None
        own = (noise or {}).get(name)
        spread = own * math.sqrt(2) if own else sd
        score = beyond / spread if spread > 0 else math.copysign(math.inf, beyond) if beyond else 0.0
        moved = abs(math.exp(beyond) - 1) * 100 > threshold_pct and abs(n - o * math.exp(shift)) > floor
        verdict = "stable"
        if moved and score > z and (step_z is None or step_z > z):
            verdict = "regressed"
        elif moved and score < -z and (step_z is None or step_z < -z):
            verdict = "improved"
        rows.append({"layer": name, "kind": after[name].get("kind") or before[name].get("kind"), "old_ms": o,
                     "new_ms": n, "ratio": n / o, "vs_shift": math.exp(beyond),
                     "z": None if math.isinf(score) else score, "step_z": step_z, "verdict": verdict,
                     "noise": "store" if own else "layers"})
    order = {"regressed": 0, "improved": 1, "stable": 2}
    rows.sort(key=lambda r: (order[r["verdict"]], -(r["new_ms"] - r["old_ms"] * math.exp(shift))))
    return {"rows": rows, "shift_pct": 100 * (math.exp(shift) - 1), "noise_pct": 100 * (math.exp(sd) - 1),
            "added": [{"layer": k, "ms": after[k]["ms"]} for k in after if k not in before],
            "gone": [{"layer": k, "ms": before[k]["ms"]} for k in before if k not in after],
            "old_step_ms": old.get("step_ms"), "new_step_ms": new.get("step_ms"), "threshold_pct": threshold_pct,
            "z": z, "per_step": stepped, "not_comparable": mismatch,
            "own_noise_layers": sum(1 for n in both if (noise or {}).get(n)),
            "verdict": "regressed" if any(r["verdict"] == "regressed" for r in rows) else
            "improved" if any(r["verdict"] == "improved" for r in rows) else "stable"}


def exit_code(results: Mapping[str, Mapping[str, Any]]) -> int:
    """1 when a layer of any engine regressed, 4 when a pair is not comparable (another model or size), else 0."""
    if any(r["not_comparable"] for r in results.values()):
        return 4
    return max((EXIT[r["verdict"]] for r in results.values()), default=0)


def summary(engine: str, result: Mapping[str, Any], top: int = 3) -> str:
    """One line per engine: its verdict, the whole step's shift, one layer's noise and the layers named."""
    if result["not_comparable"]:
        return f"{engine}: not comparable ({'; '.join(result['not_comparable'])})"
    named = [r for r in result["rows"] if r["verdict"] != "stable"][:top]
    layers = "; ".join(f"{r['layer']} {r['old_ms']:.3f} -> {r['new_ms']:.3f} ms ({r['vs_shift'] - 1:+.0%} beyond "
                       f"the step's shift, {r['verdict']})" for r in named)
    extra = "".join(f", {len(result[k])} layer(s) {k}" for k in ("added", "gone") if result[k])
    return (f"{engine}: {result['verdict']} — the whole {result['shift_pct']:+.1f} %, one layer's noise "
            f"±{result['noise_pct']:.1f} %, {len(result['rows'])} layers compared{extra}" + (f": {layers}" if layers
                                                                                        else ""))
