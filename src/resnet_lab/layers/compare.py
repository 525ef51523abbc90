"""Engines side by side, layer by layer: the per-layer records of :func:`resnet_lab.layers.cli.profile` joined on
the model's convolutions, each engine's loss against the best engine at each, and one sentence per engine naming
where it loses most.

Engines fuse differently (ONNX Runtime, OpenVINO and TensorFlow compute a convolution with its batch norm, ReLU
and residual add in one kernel; PyTorch eager runs each module on its own), so the comparison is per *unit*
(:func:`unit_of`): a convolution with the batch norm, ReLU and padding that belong to it (same Keras prefix:
``conv2_block1_1_conv``, ``_bn``, ``_relu``, ``conv3_block1_1_pad``), a block's residual add and output ReLU with
its last convolution. Every other layer (the pools, the classifier) is its own unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from resnet_lab.layers import attribute
from resnet_lab.models import names


def unit_of(layer: str, convs: Sequence[str]) -> str:
    """The convolution ``layer``'s time is compared under (``convs``: the model's convolution layers, in order)."""
    parsed = names.parse(layer)
    if parsed is None:
        return layer
    if parsed.kind in ("add", "out") and (last := [c for c in convs if names.block_of(c) == parsed.block]):
        return last[-1]
    return parsed.unit_conv if parsed.unit_conv in convs else layer


def group_of(unit: str, kind: str | None) -> str:
    """The layer kind a sentence names: ``the 3×3 convolutions of stage 4`` (Keras' ``conv5_*``: ResNet's 4th
    stage), ``the projection shortcuts of stage 2``, ``the stem convolution``, or the unit itself."""
    size = (kind or "").split(" ")[1].split("/")[0] if (kind or "").startswith("conv ") else ""
    if unit == "conv1_conv":
        return "the stem convolution"
    parsed = names.parse(unit)
    if parsed is not None and parsed.kind == "conv" and parsed.block:
        stage = parsed.stage - 1
        return f"the projection shortcuts of stage {stage}" if parsed.shortcut else \
            f"the {size} convolutions of stage {stage}"
    return unit


def units_frame(records: Mapping[str, Mapping[str, Any]], costs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (unit, engine): ``ms`` per step, ``roofline_ms``, ``of_roofline``, ``kind``, ``group``,
    ``layers`` (the layers summed), ``slowed`` (the engine's profiled step over its unprofiled one: the profiler's
    cost). ``records``: engine label → a :func:`resnet_lab.layers.attribute.attribute` record."""
    convs = [c["layer"] for c in costs if c["layer"].endswith("_conv")]
    cost = {c["layer"]: c for c in costs}
    order = {c["layer"]: i for i, c in enumerate(costs)}
    rows = []
    for engine, rec in records.items():
        slowed = rec["profiled_step_ms"] / rec["step_ms"] if rec.get("profiled_step_ms") and rec["step_ms"] else None
        sums: dict[str, dict[str, Any]] = {}
        for layer in rec["layers"]:
            unit = unit_of(layer["layer"], convs)
            entry = sums.setdefault(unit, {"ms": 0.0, "layers": []})
            entry["ms"] += layer["ms"]
            entry["layers"].append(layer["layer"])
        for unit, e in sums.items():
            c = cost.get(unit, {})
            roof = rec_roofline(rec, c)
            rows.append({"engine": engine, "unit": unit, "ms": e["ms"], "kind": c.get("kind"),
                         "group": group_of(unit, c.get("kind")), "roofline_ms": roof,
                         "of_roofline": roof / e["ms"] if roof and e["ms"] > 0 else None,
                         "layers": "+".join(e["layers"]), "order": order.get(unit, len(order)), "slowed": slowed})
    return pd.DataFrame(rows, columns=["engine", "unit", "ms", "kind", "group", "roofline_ms", "of_roofline",
                                       "layers", "order", "slowed"])


PASS_ORDER = ("forward", "input_grad", "weight_grad", "backward", "layout")


def passes_frame(records: Mapping[str, Mapping[str, Any]], costs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """A training step's time by layer kind (:func:`group_of`), engine and pass: one row per (group, engine) with
    ``forward``, ``input_grad``, ``weight_grad``, ``backward``, ``layout`` ms per step (NaN where the engine ran no
    such kernel: PyTorch's convolution_backward computes both gradients as one ``backward``), in the model's order."""
    convs = [c["layer"] for c in costs if c["layer"].endswith("_conv")]
    cost = {c["layer"]: c for c in costs}
    order = {c["layer"]: i for i, c in enumerate(costs)}
    rows = []
    for engine, rec in records.items():
        for layer in rec["layers"]:
            unit = unit_of(layer["layer"], convs)
            group = group_of(unit, cost.get(unit, {}).get("kind"))
            rows += [{"group": group, "engine": engine, "pass": kind, "ms": ms, "order": order.get(unit, len(order))}
                     for kind, ms in (layer.get("passes") or {"forward": layer["ms"]}).items()]
    columns = ["group", "engine", *PASS_ORDER]
    if not rows:
        return pd.DataFrame(columns=columns)
    df = pd.DataFrame(rows)
    first = df.groupby("group")["order"].min()
    wide = df.pivot_table(index=["group", "engine"], columns="pass", values="ms", aggfunc="sum").reset_index()
    wide = wide.reindex(columns=columns).rename_axis(columns=None)
    engines = {e: i for i, e in enumerate(records)}
    return wide.sort_values(["group", "engine"], key=lambda c: c.map(first) if c.name == "group" else c.map(engines),
                            ignore_index=True)


def rec_roofline(rec: Mapping[str, Any], cost: Mapping[str, Any]) -> float | None:
    """The unit's roofline from the record's own rows (the record carries each layer's bound on its host)."""
    for layer in rec["layers"]:
        if layer["layer"] == cost.get("layer"):
            return layer.get("roofline_ms")
    return None


def heatmap(units: pd.DataFrame, value: str = "ms") -> pd.DataFrame:
    """Units × engines (the model's order) of ``value``: ``ms`` or ``of_roofline``."""
    if units.empty:
        return pd.DataFrame()
    wide = units.pivot_table(index=["order", "unit"], columns="engine", values=value, aggfunc="sum", sort=True)
    return wide.droplevel("order")[list(dict.fromkeys(units["engine"]))]


def losers(units: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Per engine, the ``top`` units where it loses most time against the best engine at that unit: ``engine``,
    ``unit``, ``group``, ``ms``, ``best_ms``, ``best_engine``, ``lost_ms``, ``vs_best`` (×). Only units every
    engine has a time for."""
    if units.empty:
        return pd.DataFrame(columns=["engine", "unit", "group", "ms", "best_ms", "best_engine", "lost_ms", "vs_best"])
    engines = units["engine"].nunique()
    shared = units.groupby("unit")["engine"].transform("nunique") == engines
    df = units[shared].copy()
    best = df.loc[df.groupby("unit")["ms"].idxmin(), ["unit", "ms", "engine"]]
    df = df.merge(best.rename(columns={"ms": "best_ms", "engine": "best_engine"}), on="unit")
    df["lost_ms"] = df["ms"] - df["best_ms"]
    df["vs_best"] = df["ms"] / df["best_ms"]
    df = df[df["engine"] != df["best_engine"]].sort_values(["engine", "lost_ms"], ascending=[True, False])
    cols = ["engine", "unit", "group", "ms", "best_ms", "best_engine", "lost_ms", "vs_best"]
    return df.groupby("engine", sort=False).head(top)[cols].reset_index(drop=True)


# a profiled step this much slower than the unprofiled one: the layers' ms carry the profiler's cost, or the cost of
# profiling one request where the row keeps several in flight (OpenVINO's throughput hint, its streams idle)
SLOWED = 1.2


def weakest(units: pd.DataFrame) -> list[str]:
    """One sentence per engine: the layer kind (:func:`group_of`) where it loses most time against the engine
    fastest at that kind, e.g. ``IREE: the 3×3 convolutions of stage 4, 2.1× OpenVINO's (4.3 ms against 2.0)``;
    where the engine's profiled step ran :data:`SLOWED` × its unprofiled one or slower, the sentence says so."""
    if units.empty:
        return []
    engines = list(dict.fromkeys(units["engine"]))
    per = units.groupby(["group", "engine"])["ms"].sum().unstack("engine").dropna()
    lines = []
    for engine in engines:
        if engine not in per or len(engines) < 2:
            continue
        others = per.drop(columns=[engine])
        best_other, best_name = others.min(axis=1), others.idxmin(axis=1)
        lost = per[engine] - best_other
        g = lost.idxmax()
        if lost[g] <= 0:
            lead = (best_other / per[engine]).idxmin()
            lines.append(f"{engine}: fastest at every layer kind; its closest call is {lead}, "
                         f"{per[engine][lead]:.2f} ms against {best_name[lead]}'s {best_other[lead]:.2f}")
            continue
        lines.append(f"{engine}: {g}, {per[engine][g] / best_other[g]:.1f}× {best_name[g]}'s "
                     f"({per[engine][g]:.2f} ms against {best_other[g]:.2f}; {lost[g]:.2f} ms a step lost)"
                     + _slowed(units, engine))
    return lines


def _slowed(units: pd.DataFrame, engine: str) -> str:
    ratio = units.loc[units["engine"] == engine, "slowed"].dropna() if "slowed" in units else pd.Series([])
    if ratio.empty or ratio.iloc[0] < SLOWED:
        return ""
    return (f" — but its profiled step ran {ratio.iloc[0] - 1:+.0%} against the unprofiled one (the profiler's cost, "
            "or one request profiled where the row keeps several in flight): these milliseconds are the profiled "
            "step's")


def summary_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Per engine: how much of its step the layers explain, its profiling overhead, its method."""
    out = []
    for engine, rec in records.items():
        line = attribute.summary(rec, top=0).splitlines()[0]
        overhead = rec.get("profiled_step_ms", 0.0) / rec["step_ms"] - 1 if rec.get("profiled_step_ms") else None
        out.append(f"{engine}: {line}" + (f"; profiled step {overhead:+.0%} against unprofiled" if overhead is not None
                                          else ""))
    return out


def as_bullets(lines: Sequence[str], empty: str = "") -> str:
    """Markdown bullets, or ``empty`` where there are none."""
    return "\n".join(f"- {line}" for line in lines) or empty


# Why a unit can read above 100 % of its roofline: the bound divides the direct convolution's FLOPs by the GEMM
# peak 00 measured (a library GEMM on this host), not by the chip's nominal peak.
ABOVE_ROOFLINE = ("above 100 % of the roofline: the engine computes fewer FLOPs than the direct convolution counts "
                  "(e.g. Winograd for 3×3), or its convolution kernel outruns the library GEMM the peak was measured "
                  "with; the roofline is that GEMM's, not the chip's nominal peak")


def above_roofline(units: pd.DataFrame) -> str:
    """One sentence naming the units that read above their roofline, per engine, with :data:`ABOVE_ROOFLINE`;
    empty where none does."""
    if units.empty:
        return ""
    over = units[units["of_roofline"].fillna(0) > 1.0]
    if over.empty:
        return ""
    parts = [f"{engine} {len(g)} (up to {g['of_roofline'].max():.0%}: {g.loc[g['of_roofline'].idxmax(), 'unit']})"
             for engine, g in over.groupby("engine", sort=False)]
    return f"Flagged: {', '.join(parts)} {'unit reads' if len(over) == 1 else 'units read'} {ABOVE_ROOFLINE}."
