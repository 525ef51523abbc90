"""Per-layer profiles as a trace that Perfetto (ui.perfetto.dev) and ``chrome://tracing`` open.

The Trace Event Format's JSON object form (``{"traceEvents": [...], "displayTimeUnit": "ms"}``): one process per
engine (named by a ``process_name`` metadata event), one thread per pass (forward, input gradients, weight
gradients, other: :data:`THREADS`), on each thread one ``X`` slice for the step and inside it one ``X`` slice per
Keras layer. Every engine's step starts at 0, so the engines stand side by side at one time scale.

What the slices are. A record (:func:`resnet_lab.layers.attribute.attribute`) keeps each layer's time per step,
summed over its kernels, not the kernels' start times; so a thread's layers are laid end to end in the model's
order (the gradients in reverse order, as backpropagation runs them), followed by the pass's time no layer
claims (``unattributed``), and the step slice spans the longer of the measured step and that sum (the profile can
sum more than the step when an engine runs kernels at once: :func:`resnet_lab.layers.attribute.summary` says so).
Slices on a thread never overlap and always nest in their step. ``args`` carry the layer, its kind, FLOPs,
bytes, roofline ms and share of the roofline, its median and spread over the profiled steps where the profile has
them, and the layer's conformance verdict where one is given.

Read back how. Perfetto's trace processor would be the real reader, but the ``perfetto`` wheel fetches its
``trace_processor_shell`` binary from Google's storage at first use, which cannot work without the internet (this
project's machines: curl exit 6, 2026-12-07). So :func:`check_nesting` holds a trace to the format's own rules
(``X`` slices of one thread nest or are disjoint), and ``tests/layers/test_layer_diff.py`` loads the trace into
the trace processor too where a binary is present (``$PERFETTO_TRACE_PROCESSOR``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

THREADS = {"forward": (1, "forward"), "input_grad": (2, "input gradients"), "weight_grad": (3, "weight gradients"),
           "other": (4, "other (rest of backward, layout copies, loss, optimizer)")}
OTHER = {"backward", "layout", "other"}  # the passes of core.choices.PASSES drawn on the "other" thread


def _thread(kind: str) -> str:
    return kind if kind in THREADS else "other"


def _ns(ms: float) -> int:
    return round(ms * 1e6)


def _slice(name: str, cat: str, start_ns: int, dur_ns: int, pid: int, tid: int, args: dict[str, Any]) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "ts": start_ns / 1e3, "dur": dur_ns / 1e3, "pid": pid, "tid": tid,
            "args": args}


def events(engine: str, record: Mapping[str, Any], pid: int,
           verdicts: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One engine's events (see the module): metadata, then per thread the step and its layers."""
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": engine}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}},
    ]
    per_thread: dict[str, list[tuple[str, float, Mapping[str, Any]]]] = {}
    for layer in record["layers"]:
        passes = layer.get("passes") or {"forward": layer["ms"]}
        for kind, ms in passes.items():
            if ms > 0:
                per_thread.setdefault(_thread(kind), []).append((layer["layer"], ms, layer))
    passes = record.get("passes") or {"forward": record.get("profiled_ms", 0.0)}
    step_ms = float(record.get("step_ms") or 0.0)
    for thread in THREADS:
        layers = per_thread.get(thread, [])
        total = sum(ms for kind, ms in passes.items() if _thread(kind) == thread)
        if not layers and total <= 0:
            continue
        if thread != "forward":
            layers = layers[::-1]  # backpropagation runs the layers from the last to the first
        tid, label = THREADS[thread]
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}})
        starts, at = [], 0
        for _, ms, _ in layers:
            starts.append((at, _ns(ms)))
            at += _ns(ms)
        loose = max(0, _ns(total) - at)
        step = max(_ns(step_ms), at + loose)
        out.append(_slice("step", "step", 0, step, pid, tid, {
            "engine": engine, "model": record.get("model"), "mode": record.get("mode"),
            "batch_size": record.get("batch_size"), "precision": record.get("precision"), "step_ms": step_ms,
            "pass_ms": total, "method": record.get("method")}))
        for (name, ms, layer), (start, dur) in zip(layers, starts, strict=True):
            args = {"layer": name, "kind": layer.get("kind"), "ms": ms, "flops": layer.get("flops"),
                    "bytes": layer.get("bytes"), "roofline_ms": layer.get("roofline_ms"),
                    "of_roofline": layer.get("of_roofline"), "fused_with": layer.get("fused_with") or []}
            if "median_ms" in layer:  # the profile's steps: a slice's length is the mean, these say how it varied
                args.update(median_ms=layer["median_ms"], spread_ms=layer["spread_ms"])
            if verdicts and name in verdicts:
                args["conformance"] = verdicts[name]
            out.append(_slice(name, "layer", start, dur, pid, tid, args))
        if loose:
            out.append(_slice("unattributed", "unattributed", at, loose, pid, tid, {
                "ms": loose / 1e6, "longest": record.get("unattributed_top") or []}))
    return out


def trace(records: Mapping[str, Mapping[str, Any]],
          verdicts: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """The trace of several engines' records (label → record), one process each in the given order;
    ``verdicts``: label → layer → conformance verdict, where a kit ran."""
    out: list[dict[str, Any]] = []
    for pid, (engine, record) in enumerate(records.items(), start=1):
        out.extend(events(engine, record, pid, (verdicts or {}).get(engine)))
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"source": "resnet-lab layers trace", "engines": list(records)}}


def check_nesting(doc: Mapping[str, Any]) -> list[str]:
    """The format's own rules for complete events on one track, as a reader applies them: every ``X`` event has
    ``ts`` and ``dur`` ≥ 0, and two slices of one (pid, tid) either nest or do not overlap. What breaks them."""
    problems = []
    tracks: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if e.get("dur", -1) < 0 or "ts" not in e:
            problems.append(f"{e.get('name')}: no ts or a negative dur")
            continue
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    eps = 1e-6
    for track, slices in tracks.items():
        open_: list[tuple[float, float, str]] = []
        for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ and open_[-1][1] <= start + eps:
                open_.pop()
            problems += [f"track {track}: {name} [{start}, {end}] crosses {a_name} [{a_start}, {a_end}]"
                         for a_start, a_end, a_name in open_ if end > a_end + eps]
            open_.append((start, end, name))
    return problems


VERDICT_ORDER = ("fail", "unsupported", "pass")  # a layer's verdict: the worst of the cases that touch it
CASES_GLOB = "cases_*_infer_*.csv"  # 02's per-engine case tables (conformance/): the batch-1 profiles' mode


def verdicts_of_cases(folder: Path) -> dict[str, dict[str, str]]:
    """Engine label (:data:`resnet_lab.core.choices.ROW_NAMES`) → Keras layer → the worst status (fail,
    unsupported, pass) of its inference conformance cases, from a conformance folder's ``cases_<ir>_infer_<engine>.csv``
    (each case names the layers it computes, ``+``-joined). A file of an engine no profile names is left out."""
    import csv

    from resnet_lab.core.choices import ROW_NAMES

    out: dict[str, dict[str, str]] = {}
    for path in sorted(Path(folder).glob(CASES_GLOB)):
        engine = path.stem.rsplit("_infer_", 1)[1]
        label = ROW_NAMES.get(engine)
        if label is None:
            continue
        layers = out.setdefault(label, {})
        with path.open(newline="") as f:
            for case in csv.DictReader(f):
                status = case.get("status") or ""
                if status not in VERDICT_ORDER:
                    continue
                for layer in filter(None, (case.get("layers") or "").split("+")):
                    had = layers.get(layer)
                    if had is None or VERDICT_ORDER.index(status) < VERDICT_ORDER.index(had):
                        layers[layer] = status
    return out
