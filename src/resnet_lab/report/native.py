"""Notebook 03's answers to "would a user on this CPU pick PyTorch instead?" and "how does it serve?".

- the rows of :func:`resnet_lab.bench.sections.versus_configs`: the reference model trained by TensorFlow
  as fast as its stack allows (TF's fused batch-norm kernel, oneDNN, fp32 and bf16) beside native PyTorch
  (``torch.nn``, torchvision's ResNet-50 v1.5 layout, ``channels_last``, eager and ``torch.compile``, fp32 and
  bf16 autocast): same batch, same timing protocol, each in its own worker process. :func:`versus_table` and
  :func:`targets` give the ratios the speed targets of ``tests/benchmarks`` assert.
- the rows of :func:`resnet_lab.bench.sections.mlperf_configs`: inference the MLPerf way. SingleStream: one
  image per query, queries issued one after another, latency percentiles over at least 256 queries (MLPerf's
  metric is the 90th percentile); Offline: all images available at once, throughput at the best of a few
  batch sizes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from resnet_lab.bench.identity import is_measured
from resnet_lab.bench.sections import (
    NATIVE_COMPILED,
    NATIVE_EAGER,
    OFFLINE,
    SINGLE_STREAM,
    TF_LABEL,
)

# What notebook 03 shows of each table (workbook.display.table); the CSVs keep every column.
VIEW_VERSUS = {
    "label": ("row", ""), "precision": ("precision", ""), "images_per_sec": ("img/s", "img/s"), "stderr": ("±", "±"),
    "ci95_low": ("95 % CI low", "img/s"), "ci95_high": ("high", "img/s"), "vs_native_fp32": ("vs native fp32", "×"),
    "repeats": ("processes", "int"), "sd_step": ("sd a step", "%"), "sd_process": ("sd between processes", "%"),
    "mfu": ("MFU", "%"), "first_step_s": ("first step", "s"), "status": ("status", ""),
}
VIEW_MLPERF = {
    "scenario": ("scenario", ""), "implementation": ("implementation", ""), "batch_size": ("batch", "int"),
    "queries": ("queries", "int"), "latency_p50_ms": ("p50", "ms"), "latency_p90_ms": ("p90", "ms"),
    "latency_p99_ms": ("p99", "ms"), "images_per_sec": ("img/s", "img/s"), "status": ("status", ""),
}
VIEW_COMPILERS = {
    "scenario": ("scenario", ""), "implementation": ("implementation", ""), "batch_size": ("batch", "int"),
    "latency_p50_ms": ("p50", "ms"), "latency_p90_ms": ("p90", "ms"), "latency_p99_ms": ("p99", "ms"),
    "images_per_sec": ("img/s", "img/s"), "compile_s": ("compile", "s"),
    "check_max_rel": ("vs Keras (rel.)", "sci"), "status": ("status", ""),
}


# Which row is which, by what it ran (not by its label, so preset rows and notebook rows match alike).
_KINDS = {
    TF_LABEL: lambda r: r.get("backend") == "tensorflow" and bool(r.get("fused_bn")),
    NATIVE_EAGER: lambda r: r.get("impl") == "native" and r.get("xla") == "off",
    NATIVE_COMPILED: lambda r: r.get("impl") == "native" and r.get("xla") == "jit",
}


def _find(rows: Sequence[dict[str, Any]], kind: str, precision: str) -> dict[str, Any] | None:
    """The best measured training row of ``kind`` (TF_LABEL, NATIVE_EAGER, NATIVE_COMPILED) at ``precision``."""
    match = [r for r in rows if r.get("mode", "train") == "train" and r.get("precision") == precision and is_measured(r)
             and (r.get("math_dtype") or precision) == precision and _KINDS[kind](r)]
    return max(match, key=lambda r: r["images_per_sec"], default=None)


def versus_table(rows: Sequence[dict[str, Any]]):
    """One line per row: implementation, precision, images/sec ± stderr, 95 % interval, MFU, the ratio to
    native PyTorch eager fp32 (the baseline of the speed targets), and the processes the interval rests on
    with the variance split: the relative sd of one step inside a process, and of the process effect
    (empty from one process: its interval is within-process only)."""
    import pandas as pd

    base = _find(rows, NATIVE_EAGER, "fp32")
    df = pd.DataFrame([{k: r.get(k) for k in (
        "label", "precision", "compiler", "model_source", "images_per_sec", "stderr", "ci95_low", "ci95_high",
        "repeats", "ci_method", "mfu", "first_step_s", "cpu_util", "status", "reason", "compute_dtype")}
        for r in rows])
    df["vs_native_fp32"] = [r["images_per_sec"] / base["images_per_sec"] if base and is_measured(r) else None
                            for r in rows]
    df["sd_step"] = [_sd(r.get("var_within")) for r in rows]
    df["sd_process"] = [_sd(r.get("var_between")) for r in rows]
    return df


def _sd(variance: float | None) -> float | None:
    """A variance of log time as a relative sd (0.0081 -> 0.09: ~9 %)."""
    return None if variance is None else math.sqrt(max(variance, 0.0))


# The speed targets `make bench` asserts (tests/benchmarks), as (name, numerator label, its precision, minimum ratio).
TARGETS = (
    ("TF fp32 train / native PyTorch eager fp32", TF_LABEL, "fp32", 1.1),
    ("TF bf16 train / native PyTorch eager fp32", TF_LABEL, "bf16", 1.5),
)


def targets(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target's measured ratio (with the ratio of the 95 % interval ends), minimum and verdict; None
    where a row is missing. The baseline is native PyTorch eager fp32 of the same run."""
    base = _find(rows, NATIVE_EAGER, "fp32")
    out = []
    for name, label, precision, minimum in TARGETS:
        r = _find(rows, label, precision)
        ratio = r["images_per_sec"] / base["images_per_sec"] if r and base else None
        low = (r["ci95_low"] / base["ci95_high"]) if ratio and r.get("ci95_low") and base.get("ci95_high") else None
        out.append({"target": name, "minimum": minimum, "ratio": ratio, "ratio_ci_low": low,
                    "met": None if ratio is None else ratio >= minimum,
                    "numerator": r.get("images_per_sec") if r else None,
                    "baseline": base.get("images_per_sec") if base else None})
    return out


def versus_summary(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown sentences written from the rows: who is faster at each precision, and the targets."""
    lines = []
    for p in dict.fromkeys(r.get("precision") for r in rows):
        tf, eager, compiled = (_find(rows, lab, p) for lab in (TF_LABEL, NATIVE_EAGER, NATIVE_COMPILED))
        torch_best = max((r for r in (eager, compiled) if r), key=lambda r: r["images_per_sec"], default=None)
        if tf and torch_best:
            ratio = tf["images_per_sec"] / torch_best["images_per_sec"]
            who = "TensorFlow is faster" if ratio >= 1 else "native PyTorch is faster"
            which = NATIVE_COMPILED if torch_best is compiled else NATIVE_EAGER
            lines.append(f"- **{p} training**: TensorFlow {tf['images_per_sec']:.2f} images/sec vs the best native "
                         f"PyTorch row ({which}) {torch_best['images_per_sec']:.2f}: {who}, "
                         f"**{max(ratio, 1 / ratio):.2f}×**.")
        elif tf or torch_best:
            missing = [lab for lab, r in ((TF_LABEL, tf), ("native PyTorch", torch_best)) if not r]
            lines.append(f"- **{p} training**: no comparison ({', '.join(missing)} did not run; see its row).")
    for t in targets(rows):
        if t["ratio"] is None:
            lines.append(f"- Target *{t['target']} ≥ {t['minimum']}×*: not measured in this run.")
        else:
            verdict = "met" if t["met"] else "**not met**"
            lines.append(f"- Target *{t['target']} ≥ {t['minimum']}×*: {t['ratio']:.2f}× — {verdict}.")
    lines += _spread_sentence(rows)
    return "\n".join(lines) or "No training row of this section ran."


def _spread_sentence(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Where the rows' uncertainty lies: how many processes each rests on, and the spread of a step inside
    one against the spread between them (the larger one is what the intervals above are made of)."""
    measured = [r for r in rows if is_measured(r)]
    processes = sorted({int(r.get("repeats") or 1) for r in measured})
    if not processes:
        return []
    if processes == [1]:
        return ["- Each row is one process: its interval is the spread of its steps only, which understates "
                "how much a fresh process moves (`versus_repeats` ≥ 3 gives the between-process interval)."]
    within = [_sd(r.get("var_within")) for r in measured if r.get("var_within") is not None]
    between = [_sd(r.get("var_between")) for r in measured if r.get("var_between") is not None]
    text = (f"- Each row's interval comes from the spread between its {'/'.join(map(str, processes))} fresh "
            f"processes (interleaved rounds)")
    if within and between:
        text += (f"; a step varies by {100 * min(within):.0f}–{100 * max(within):.0f} % inside a process, "
                 f"a process by {100 * min(between):.0f}–{100 * max(between):.0f} % beyond that")
    return [text + "."]


def mlperf_table(rows: Sequence[dict[str, Any]]):
    """One line per implementation and scenario: SingleStream latency p50/p90/p99 (ms) over its queries,
    Offline throughput at the best batch (the others in the CSV)."""
    import pandas as pd

    out = []
    for r in rows:
        scenario, _, impl = (r.get("label") or "").partition(" · ")
        ok = is_measured(r)
        times = r.get("step_times") or []
        out.append({
            "scenario": scenario, "implementation": impl, "batch_size": r.get("batch_size"), "status": r.get("status"),
            "queries": len(times) if scenario == SINGLE_STREAM and ok else None,
            "latency_p50_ms": 1e3 * r["step_time_p50"] if ok and scenario == SINGLE_STREAM else None,
            "latency_p90_ms": 1e3 * r["step_time_p90"] if ok and scenario == SINGLE_STREAM else None,
            "latency_p99_ms": 1e3 * r["step_time_p99"] if ok and scenario == SINGLE_STREAM and
            r.get("step_time_p99") is not None else None,
            "images_per_sec": r.get("images_per_sec") if ok else None, "stderr": r.get("stderr") if ok else None,
            "mfu": r.get("mfu") if ok else None, "reason": r.get("reason") or "",
        })
    df = pd.DataFrame(out)
    if df.empty:
        return df
    off = df[(df["scenario"] == OFFLINE) & df["images_per_sec"].notna()]
    best = off.loc[off.groupby("implementation")["images_per_sec"].idxmax()] if len(off) else off
    df["best_offline"] = df.index.isin(best.index)
    return df


def mlperf_summary(df) -> str:
    """One sentence per scenario, from :func:`mlperf_table`."""
    if df is None or df.empty:
        return "No inference scenario ran."
    lines = []
    ss = df[(df["scenario"] == SINGLE_STREAM) & df["latency_p90_ms"].notna()]
    for _, r in ss.iterrows():
        lines.append(f"- **SingleStream, {r['implementation']}**: p90 latency {r['latency_p90_ms']:.1f} ms "
                     f"(p50 {r['latency_p50_ms']:.1f}, p99 {_fmt(r['latency_p99_ms'])}) over {int(r['queries'])} "
                     f"queries of one image.")
    for _, r in df[df["best_offline"]].iterrows():
        lines.append(f"- **Offline, {r['implementation']}**: {r['images_per_sec']:.1f} images/sec at batch "
                     f"{int(r['batch_size'])}.")
    if len(ss) == 2:
        a, b = ss.iloc[0], ss.iloc[1]
        fast, slow = (a, b) if a["latency_p90_ms"] <= b["latency_p90_ms"] else (b, a)
        lines.append(f"- At one image per query {fast['implementation']} answers "
                     f"{slow['latency_p90_ms'] / fast['latency_p90_ms']:.2f}× sooner (p90).")
    return "\n".join(lines) or "No inference scenario ran; see the rows' reasons."


def _fmt(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


def compilers_table(rows: Sequence[dict[str, Any]]):
    """:func:`mlperf_table` over TensorFlow's, PyTorch's and the other compilers' rows, with each row's
    compile time (an engine's own compile; a framework's first call beyond a steady step) and its output
    check against Keras' logits (engines only: ``check_max_rel``, ``check_ok``)."""
    df = mlperf_table(rows)
    if df.empty:
        return df
    df["backend"] = [r.get("backend") for r in rows]
    df["compile_s"] = [r.get("compile_s") for r in rows]
    df["check_max_abs"] = [r.get("check_max_abs") for r in rows]
    df["check_max_rel"] = [r.get("check_max_rel") for r in rows]
    df["check_tol"] = [r.get("check_tol") for r in rows]
    df["check_ok"] = [r.get("check_ok") for r in rows]
    df["compiler"] = [r.get("compiler") for r in rows]
    return df


def compilers_summary(df) -> str:
    """Who leads at batch 1 (SingleStream p90) and at the best batch (Offline images/sec) among every
    implementation with a measured, checked row; the engines' compile times; any output check that failed
    (such a row is never quoted)."""
    if df is None or df.empty:
        return "No row of this section ran."
    lines = []
    ss = df[(df["scenario"] == SINGLE_STREAM) & df["latency_p90_ms"].notna()].sort_values("latency_p90_ms")
    if len(ss):
        lead = ss.iloc[0]
        rest = ", ".join(f"{r['implementation']} {r['latency_p90_ms']:.1f}" for _, r in ss.iloc[1:].iterrows())
        lines.append(f"- **Batch 1 (SingleStream p90)**: {lead['implementation']} leads with "
                     f"{lead['latency_p90_ms']:.1f} ms" + (f" (then {rest} ms)." if rest else "."))
    off = df[df["best_offline"]].sort_values("images_per_sec", ascending=False)
    if len(off):
        lead = off.iloc[0]
        rest = ", ".join(f"{r['implementation']} {r['images_per_sec']:.1f} (b{int(r['batch_size'])})"
                         for _, r in off.iloc[1:].iterrows())
        lines.append(f"- **Best batch (Offline)**: {lead['implementation']} leads with "
                     f"{lead['images_per_sec']:.1f} images/sec at batch {int(lead['batch_size'])}"
                     + (f" (then {rest})." if rest else "."))
    engines = df[df["check_ok"].notna()]
    compiled = engines[engines["compile_s"].notna() & (engines["scenario"] == SINGLE_STREAM)]
    if len(compiled):
        lines.append("- **Compile time** (batch 1, the engine's own compile): " + ", ".join(
            f"{r['implementation']} {r['compile_s']:.1f} s" for _, r in compiled.iterrows()) + ".")
    checked = engines[engines["check_ok"] == True]  # noqa: E712 (a column of True/False/None)
    if len(checked):
        lines.append(f"- **Outputs**: every engine row timed agreed with Keras' logits within "
                     f"{checked['check_max_rel'].max():.1e} of the largest (tolerance "
                     f"{checked['check_tol'].max():g}, fp32).")
    for _, r in engines[engines["check_ok"] == False].iterrows():  # noqa: E712
        lines.append(f"- **{r['implementation']}, {r['scenario']} b{int(r['batch_size'])}: output check failed**"
                     f" ({r['reason']}); not timed, not quoted.")
    for _, r in df[(df["status"] == "skipped")].iterrows():
        lines.append(f"- {r['implementation']} ({r['scenario']}): skipped, {r['reason']}")
    return "\n".join(dict.fromkeys(lines)) or "No row of this section has a speed; see the rows' reasons."


def plot_compilers(df):
    """SingleStream p90 latency and the best Offline images/sec, one bar per implementation."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    ss = df[(df["scenario"] == SINGLE_STREAM) & df["latency_p90_ms"].notna()] if not df.empty else df
    off = df[df["best_offline"]] if not df.empty else df
    for ax, part, column, title in ((axes[0], ss, "latency_p90_ms", "SingleStream p90 latency (ms, lower is better)"),
                                    (axes[1], off, "images_per_sec", "Offline images/sec at the best batch")):
        if len(part):
            ax.barh(list(part["implementation"]), list(part[column]), color="tab:blue")
            ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
