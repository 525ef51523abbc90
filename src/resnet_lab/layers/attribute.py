"""Kernels to layers: an engine's profile (kernel name, time, the layers it computes) summed per Keras layer,
each beside its roofline on this host.

The rule for a kernel that computes several layers (a convolution with its batch norm, ReLU or add fused in):
its time is split over the layers by their share of its FLOPs (:func:`split`); layers without a FLOP count of
their own (batch norm, ReLU, add: their work is a few operations per element) get none of it and are listed in
``fused_with`` of the layer that took the time. A kernel that computes no layer of the model (a layout reorder,
the engine's own copies; in a training step the loss and the optimizer's update) is ``unattributed_ms``.

Where every kernel carries its time in each profiled step (``steps_ms``: ONNX Runtime, OpenVINO, PyTorch eager),
each layer carries its own series too: ``steps_ms`` (its time in each step, split as above), ``median_ms`` (their
median: one hiccup in one step does not outweigh a small layer, as it does a sum) and ``spread_ms`` (their robust
sd, 1.4826 × the median absolute deviation), what :mod:`resnet_lab.layers.diff` judges a change against.

A training step's kernels carry their pass (``forward``, ``input_grad``, ``weight_grad``, ``backward``, ``other``:
:mod:`resnet_lab.layers.engines`); each layer's ``passes`` and the record's split its time by them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from resnet_lab.core.choices import PASSES

UNATTRIBUTED_TOP = 5


def spread(values: Sequence[float]) -> float:
    """A robust sd of ``values``: 1.4826 × their median absolute deviation (one outlier does not move it)."""
    med = statistics.median(values)
    return 1.4826 * statistics.median([abs(v - med) for v in values])


def split(ms: float, layers: Sequence[str], flops: Mapping[str, float]) -> dict[str, float]:
    """``ms`` over ``layers`` by their FLOPs; all of it to the first where none has FLOPs."""
    weights = [float(flops.get(layer, 0.0)) for layer in layers]
    total = sum(weights)
    if total <= 0:
        return {layers[0]: ms} if layers else {}
    return {layer: ms * w / total for layer, w in zip(layers, weights, strict=True) if w > 0}


def roofline_ms(flops: float, moved: float, peak_gflops: float | None, bandwidth_gbs: float | None) -> float | None:
    """The layer's bound: its FLOPs at the GEMM peak or its bytes at the measured bandwidth, whichever is longer."""
    if not peak_gflops:
        return None
    bound = flops / (peak_gflops * 1e9)
    if bandwidth_gbs:
        bound = max(bound, moved / (bandwidth_gbs * 1e9))
    return 1e3 * bound


def attribute(kernels: Iterable[Mapping[str, Any]], costs: Sequence[Mapping[str, Any]], *, step_ms: float,
              steps: int, method: str, peak_gflops: float | None = None,
              bandwidth_gbs: float | None = None) -> dict[str, Any]:
    """The issue's record: ``step_ms`` (the unprofiled step), ``layers`` (one entry per Keras layer that took time,
    in the model's order: ``layer``, ``ms`` per step, ``kernels``, ``fused_with``, ``flops``, ``bytes``,
    ``roofline_ms``, ``of_roofline``), ``unattributed_ms``, ``profiled_ms`` (what the profile summed per step),
    ``method``, ``passes`` (ms per step by pass, unattributed kernels included), ``unattributed_top`` (the
    :data:`UNATTRIBUTED_TOP` kernels no layer claims that took longest: ``kernel``, ``ms``). ``kernels``:
    ``{"name", "ms" (over all ``steps``), "layers": [Keras names], "pass" (default forward), "steps_ms" (optional:
    its ms in each step)}``; where every kernel has ``steps_ms``, each layer has ``steps_ms``, ``median_ms`` and
    ``spread_ms`` too, and the record says ``per_step: true``."""
    kernels = list(kernels)
    flops = {c["layer"]: c["flops"] for c in costs}
    per_step = steps > 1 and all(len(k.get("steps_ms") or ()) == steps for k in kernels)
    by_layer: dict[str, dict[str, Any]] = {}
    passes: dict[str, float] = {}
    loose: dict[str, float] = {}
    unattributed = profiled = 0.0
    for k in kernels:
        ms = float(k["ms"]) / steps
        profiled += ms
        kind = k.get("pass", "forward")
        passes[kind] = passes.get(kind, 0.0) + ms
        layers = [layer for layer in k.get("layers") or []]
        if not layers:
            unattributed += ms
            loose[k["name"]] = loose.get(k["name"], 0.0) + ms
            continue
        for layer, share in split(ms, layers, flops).items():
            entry = by_layer.setdefault(layer, {"ms": 0.0, "kernels": set(), "fused_with": set(), "passes": {},
                                                "steps_ms": [0.0] * steps})
            entry["ms"] += share
            if per_step and ms > 0:
                for i, t in enumerate(k["steps_ms"]):
                    entry["steps_ms"][i] += float(t) * share / ms
            entry["passes"][kind] = entry["passes"].get(kind, 0.0) + share
            entry["kernels"].add(k["name"])
            entry["fused_with"].update(x for x in layers if x != layer)
    order = {c["layer"]: i for i, c in enumerate(costs)}
    cost = {c["layer"]: c for c in costs}
    rows = []
    for layer in sorted(by_layer, key=lambda x: (order.get(x, len(order)), x)):
        e, c = by_layer[layer], cost.get(layer, {})
        roof = roofline_ms(c.get("flops", 0.0), c.get("bytes", 0.0), peak_gflops, bandwidth_gbs) if c else None
        rows.append({"layer": layer, "ms": e["ms"], "kernels": len(e["kernels"]), "fused_with": sorted(e["fused_with"]),
                     "kind": c.get("kind"), "flops": c.get("flops"), "bytes": c.get("bytes"), "roofline_ms": roof,
                     "of_roofline": roof / e["ms"] if roof and e["ms"] > 0 else None, "passes": e["passes"]})
        if per_step:
            series = [round(t, 5) for t in e["steps_ms"]]
            rows[-1].update({"steps_ms": series, "median_ms": statistics.median(series), "spread_ms": spread(series)})
    return {"step_ms": step_ms, "profiled_ms": profiled, "per_step": per_step, "attributed_ms": profiled - unattributed,
            "unattributed_ms": unattributed, "layers": rows, "method": method, "passes": passes,
            "unattributed_top": [{"kernel": name, "ms": ms} for name, ms in
                                 sorted(loose.items(), key=lambda x: -x[1])[:UNATTRIBUTED_TOP]]}


def summary(record: Mapping[str, Any], top: int = 5) -> str:
    """Three lines: how much of the step the layers explain, and the layers furthest from their roofline."""
    step, layers = record["step_ms"], record["layers"]
    attributed = record["attributed_ms"]
    convs = [x for x in layers if x["layer"].endswith("_conv")]
    lines = [f"{len(convs)} convolution layers named; attributed {attributed:.1f} ms of a {step:.1f} ms step "
             f"({attributed / step:.0%}; the profile summed {record['profiled_ms']:.1f} ms, unattributed "
             f"{record['unattributed_ms']:.1f} ms) — {record['method']}"]
    passes = record.get("passes") or {}
    if set(passes) & {"input_grad", "weight_grad", "backward"}:
        lines.append("by pass: " + ", ".join(f"{PASSES.get(k, k)} {passes[k]:.1f} ms" for k in PASSES if k in passes))
    if record["unattributed_ms"] > 0.05 * step and record.get("unattributed_top"):
        lines.append("unattributed, longest: " + ", ".join(f"{k['kernel']} {k['ms']:.1f} ms"
                                                          for k in record["unattributed_top"][:3]))
    if record["profiled_ms"] > 1.05 * step:
        slowed = record.get("profiled_step_ms", 0.0)
        lines.append(f"the profile sums {record['profiled_ms'] / step:.2f}× the step: kernels overlap (an engine "
                     f"running independent ops at once: each layer's share stands, its ms overstate) or the profiler "
                     f"slowed them (the profiled step: {slowed:.1f} ms)")
    lost = sorted((x for x in layers if x.get("roofline_ms")), key=lambda x: x["roofline_ms"] - x["ms"])[:top]
    if lost:
        lines.append("furthest from their roofline: " + ", ".join(
            f"{x['layer']} {x['ms']:.2f} ms ({x['of_roofline']:.0%} of its bound)" for x in lost))
    over = [x for x in layers if (x.get("of_roofline") or 0) > 1.0]
    if over:
        lines.append(f"flagged: {len(over)} layer(s) above 100 % of their roofline (up to "
                     f"{max(x['of_roofline'] for x in over):.0%}): fewer FLOPs than the direct convolution (Winograd) "
                     "or a kernel faster than the GEMM the peak was measured with")
    return "\n".join(lines)
