"""Notebook 03's "Where the time goes, layer by layer": the engines' per-layer profiles (:mod:`resnet_lab.layers`)
as a heatmap (each convolution unit × engine: its milliseconds, coloured by how close it runs to its roofline), the
layers each engine loses most on, and the sentences that name each engine's weakest layer kind."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from resnet_lab.layers import compare, trace

VIEW_LOSERS = {"engine": ("engine", ""), "unit": ("layer", ""), "group": ("kind", ""), "ms": ("ms", "ms"),
               "best_engine": ("best engine", ""), "best_ms": ("best", "ms"), "lost_ms": ("lost", "ms"),
               "vs_best": ("vs best", "×")}
VIEW_ATTRIBUTION = {"engine": ("engine", ""), "step_ms": ("step", "ms"), "profiled_step_ms": ("profiled step", "ms"),
                    "attributed_ms": ("attributed", "ms"), "unattributed_ms": ("unattributed", "ms"),
                    "convolutions": ("convolutions named", "int"), "wall_s": ("profile took", "s"),
                    "method": ("how it was profiled", "")}


VIEW_PASSES = {"group": ("layer kind", ""), "engine": ("engine", ""), "forward": ("forward", "ms"),
               "input_grad": ("input gradient", "ms"), "weight_grad": ("weight gradient", "ms"),
               "backward": ("rest of backward", "ms"), "layout": ("layout copies", "ms")}


def attribution_table(records: Mapping[str, Mapping[str, Any]], skipped: Mapping[str, str]) -> pd.DataFrame:
    """One row per engine: its step, the profiled step, what the layers explain, how it was profiled; a skipped
    engine with its reason."""
    rows = [{"engine": name, "step_ms": r["step_ms"], "profiled_step_ms": r.get("profiled_step_ms"),
             "attributed_ms": r["attributed_ms"], "unattributed_ms": r["unattributed_ms"],
             "convolutions": sum(x["layer"].endswith("_conv") for x in r["layers"]), "wall_s": r.get("wall_s"),
             "method": r["method"]}
            for name, r in records.items()]
    rows += [{"engine": name, "method": f"skipped: {why}"} for name, why in skipped.items()]
    return pd.DataFrame(rows, columns=list(VIEW_ATTRIBUTION))


def save(out: Any, records: Mapping[str, Any], skipped: Mapping[str, str], name: str = "layers") -> str:
    """Every record as the run's ``<name>.json`` (the CLI's JSON per engine, and what was skipped) and the engines'
    steps side by side as ``trace_<name>.json`` (:mod:`resnet_lab.layers.trace`, what ``resnet-lab layers trace``
    writes); the sentence that links the trace (empty when no engine was profiled)."""
    (out / f"{name}.json").write_text(json.dumps({"records": records, "skipped": skipped}, indent=1))
    if not records:
        return ""
    (out / f"trace_{name}.json").write_text(json.dumps(trace.trace(records)))
    return (f"The steps of the {len(records)} engines side by side, a layer a slice on a thread per pass: "
            f"[trace_{name}.json]({out.name}/trace_{name}.json) (open it in ui.perfetto.dev or chrome://tracing).")


def plot_heatmap(units: pd.DataFrame):
    """Units (rows, the model's order) × engines: each cell its milliseconds a step, coloured by the share of its
    roofline it reaches (darker: closer to the machine's bound)."""
    import matplotlib.pyplot as plt

    ms, roof = compare.heatmap(units, "ms"), compare.heatmap(units, "of_roofline")
    roof = roof.reindex(index=ms.index, columns=ms.columns)
    fig, ax = plt.subplots(figsize=(2.0 + 1.5 * max(1, len(ms.columns)), 0.22 * max(4, len(ms)) + 1.2))
    if ms.empty:
        ax.set_axis_off()
        return fig
    import numpy as np

    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("0.88")  # no roofline (a pool, the classifier on some engines) or no time: grey, not "0 %"
    values = np.ma.masked_invalid(roof.astype(float).to_numpy())
    image = ax.imshow(values, aspect="auto", cmap=cmap, vmin=0.0, vmax=max(0.05, float(roof.max().max() or 0.0)))
    for i in range(len(ms)):
        for j in range(len(ms.columns)):
            v, r = ms.iat[i, j], roof.iat[i, j]
            if pd.notna(v):  # † above the roofline (compare.ABOVE_ROOFLINE says why it can be)
                mark = "†" if pd.notna(r) and r > 1.0 else ""
                ax.text(j, i, f"{v:.2f}{mark}", ha="center", va="center", fontsize=6.5,
                        color="white" if pd.notna(r) else "black")
    # an engine's configuration on a second line: "native PyTorch (eager)" and "(Inductor)" side by side fit
    ax.set_xticks(range(len(ms.columns)), [str(c).replace(" (", "\n(") for c in ms.columns], fontsize=8)
    ax.set_yticks(range(len(ms)), list(ms.index), fontsize=6.5)
    ax.xaxis.tick_top()
    fig.colorbar(image, ax=ax, label="share of the layer's roofline reached", shrink=0.5)
    ax.set_title("ms a step per layer (text; †: above its roofline) and share of its roofline (colour)",
                 fontsize=9, pad=18)
    fig.tight_layout()
    return fig
