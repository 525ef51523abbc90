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
    "agree_top1": ("top-1 agree", "%"), "agree_top5": ("top-5 agree", "%"), "agree_max_rel": ("max rel. diff", "sci"),
    "configuration": ("configuration", ""), "status": ("status", ""),
}
VIEW_KNOBS = {
    "engine": ("engine", ""), "configuration": ("configuration", ""), "latency_p50_ms": ("p50", "ms"),
    "latency_p90_ms": ("p90", "ms"), "vs_documented": ("p50 vs documented", "×"), "compile_s": ("compile", "s"),
    "check": ("output check", ""), "status": ("status", ""),
}
VIEW_SOURCES = {"engine": ("engine", ""), "recipe": ("recipe", ""), "setting": ("setting", ""),
                "value": ("value", ""), "does": ("what it does", ""), "source": ("source", "")}


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
    for t, (_, label, precision, _) in zip(targets(rows), TARGETS, strict=True):
        if t["ratio"] is None:
            why = next((r.get("reason") for r in rows if r.get("precision") == precision and r.get("status") ==
                        "skipped" and r.get("reason") and _KINDS[label](r)), None)
            lines.append(f"- Target *{t['target']} ≥ {t['minimum']}×*: not measured in this run"
                         + (f" ({why})." if why else "."))
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
            "scenario": scenario, "implementation": impl, "precision": r.get("precision") or "fp32",
            "batch_size": r.get("batch_size"), "status": r.get("status"),
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
    best = off.loc[off.groupby(["implementation", "precision"])["images_per_sec"].idxmax()] if len(off) else off
    df["best_offline"] = df.index.isin(best.index)
    return df


def mlperf_summary(df) -> str:
    """One sentence per scenario and precision, from :func:`mlperf_table`."""
    if df is None or df.empty:
        return "No inference scenario ran."
    lines = []
    ss = df[(df["scenario"] == SINGLE_STREAM) & df["latency_p90_ms"].notna()]
    for _, r in ss.iterrows():
        lines.append(f"- **SingleStream, {r['implementation']}, {r['precision']}**: p90 latency "
                     f"{r['latency_p90_ms']:.1f} ms (p50 {r['latency_p50_ms']:.1f}, p99 {_fmt(r['latency_p99_ms'])}) "
                     f"over {int(r['queries'])} queries of one image.")
    for _, r in df[df["best_offline"]].iterrows():
        lines.append(f"- **Offline, {r['implementation']}, {r['precision']}**: {r['images_per_sec']:.1f} images/sec "
                     f"at batch {int(r['batch_size'])}.")
    for precision, part in ss.groupby("precision", sort=False):
        if len(part) == 2:
            a, b = part.iloc[0], part.iloc[1]
            fast, slow = (a, b) if a["latency_p90_ms"] <= b["latency_p90_ms"] else (b, a)
            lines.append(f"- At one image per query ({precision}) {fast['implementation']} answers "
                         f"{slow['latency_p90_ms'] / fast['latency_p90_ms']:.2f}× sooner (p90).")
    return "\n".join(lines) or "No inference scenario ran; see the rows' reasons."


def _fmt(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


def configuration(row: dict[str, Any]) -> str:
    """A row's configuration in a few words: an engine's recipe and settings, or what served the framework."""
    stats = row.get("compile_stats")
    if isinstance(stats, str) and stats.startswith("{"):
        import json

        try:
            settings = json.loads(stats).get("settings")
        except ValueError:
            settings = None
        if settings:
            return settings
    parts = []
    if row.get("backend") == "tensorflow":
        parts.append("TF graph" if row.get("xla") == "off" else f"XLA {row.get('xla')}")
        if row.get("fold_bn"):
            parts.append("BN folded")
    elif row.get("impl") == "native":
        parts.append("torch.compile" if row.get("xla") == "jit" else "eager")
    env = row.get("env") or ""
    parts += [e for e in ("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "TORCHINDUCTOR_FREEZING", "TORCHINDUCTOR_CPP_WRAPPER")
              if e in str(env)]
    if row.get("data_format") == "channels_last" and row.get("impl") == "native":
        parts.append("channels_last")
    if (row.get("precision") or "fp32") != "fp32":
        parts.append(str(row.get("compute_dtype") or row.get("precision")))
    return ", ".join(parts)


def compilers_table(rows: Sequence[dict[str, Any]]):
    """:func:`mlperf_table` over TensorFlow's, PyTorch's and the other compilers' rows, with each row's
    compile time (an engine's own compile; a framework's first call beyond a steady step), its output check
    against Keras' logits (engines: ``check_max_rel``, ``check_ok``), its agreement with the fp32 reference on
    photographs (``agree_*``: engines and reduced-precision rows) and its configuration."""
    df = mlperf_table(rows)
    if df.empty:
        return df
    for key in ("backend", "compile_s", "check_max_abs", "check_max_rel", "check_tol", "check_ok", "agree_top1",
                "agree_top5", "agree_max_rel", "agree_tol", "agree_ok", "compiler", "recipe"):
        df[key] = [r.get(key) for r in rows]
    df["configuration"] = [configuration(r) for r in rows]
    return df


def _span(values) -> str:
    """``a–b`` of a column of shares in percent, or one number where they are equal."""
    lo, hi = 100 * values.min(), 100 * values.max()
    return f"{lo:.0f}" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}"


def _lead(part, column: str, ascending: bool, unit: str, fmt: str = ".1f") -> tuple[Any, str]:
    part = part.sort_values(column, ascending=ascending)
    lead = part.iloc[0]
    rest = ", ".join(f"{r['implementation']} {r[column]:{fmt}}" for _, r in part.iloc[1:].iterrows())
    return lead, (f"{lead['implementation']} leads with {lead[column]:{fmt}} {unit}"
                  + (f" (then {rest})" if rest else ""))


def compilers_summary(df) -> str:
    """Per precision, who leads at batch 1 (SingleStream p90) and at the best batch (Offline images/sec) among
    every implementation with a measured, checked row; the compile times; the agreement of the reduced-precision
    rows; any check that failed (such a row is never quoted); the rows skipped and why."""
    if df is None or df.empty:
        return "No row of this section ran."
    lines = []
    for precision in dict.fromkeys(df["precision"]):
        part = df[df["precision"] == precision]
        ss = part[(part["scenario"] == SINGLE_STREAM) & part["latency_p90_ms"].notna()]
        if len(ss):
            text = _lead(ss, "latency_p90_ms", True, "ms")[1]
            lines.append(f"- **{precision}, batch 1 (SingleStream p90)**: {text}.")
        off = part[part["best_offline"]]
        if len(off):
            lead, text = _lead(off, "images_per_sec", False, "images/sec")
            lines.append(f"- **{precision}, best batch (Offline)**: {text} (batch {int(lead['batch_size'])}).")
        agreed = part[part["agree_max_rel"].notna() & (part["agree_ok"] == True)]  # noqa: E712
        if precision != "fp32" and len(agreed):
            lines.append(f"- **{precision} against fp32, on photographs** ({len(agreed)} rows): top-1 agreement "
                         f"{_span(agreed['agree_top1'])} %, top-5 {_span(agreed['agree_top5'])} %, largest relative "
                         f"logit difference {agreed['agree_max_rel'].max():.2g} (tolerance "
                         f"{agreed['agree_tol'].max():.2g}).")
    compiled = df[df["compile_s"].notna() & (df["scenario"] == SINGLE_STREAM) & df["latency_p90_ms"].notna()]
    if len(compiled):
        lines.append("- **Compile time** (batch 1; an engine's own compile, a framework's first call beyond a "
                     "steady one): " + ", ".join(f"{r['implementation']} ({r['precision']}) {r['compile_s']:.1f} s"
                                                 for _, r in compiled.iterrows()) + ".")
    checked = df[(df["check_ok"] == True) & (df["precision"] == "fp32")]  # noqa: E712 (True/False/None)
    if len(checked):
        lines.append(f"- **Outputs**: every timed fp32 engine row agreed with Keras' logits within "
                     f"{checked['check_max_rel'].max():.1e} of the largest on the fixed batch (tolerance "
                     f"{checked['check_tol'].max():.2g}), and on the photographs.")
    for _, r in df[(df["check_ok"] == False) | (df["agree_ok"] == False)].iterrows():  # noqa: E712
        lines.append(f"- **{r['implementation']}, {r['scenario']} b{int(r['batch_size'])} {r['precision']}: check "
                     f"failed** ({r['reason']}); not quoted.")
    skipped = df[df["status"] == "skipped"]
    for (impl, precision, reason), part in skipped.groupby(["implementation", "precision", "reason"], sort=False):
        lines.append(f"- {impl} ({precision}: {', '.join(part['scenario'])}): skipped, {reason}")
    return "\n".join(dict.fromkeys(lines)) or "No row of this section has a speed; see the rows' reasons."


def per_precision(df, show: Any, **options: Any) -> list[Any]:
    """One table per precision of :func:`compilers_table`, in the order they ran, each after its heading: what
    ``IPython.display.display`` shows; ``show`` draws a table (``workbook.display.table``) with ``options``."""
    from IPython.display import Markdown

    if df is None or df.empty:
        return []
    return [view for p in dict.fromkeys(df["precision"])
            for view in (Markdown(f"**{p}**"), show(df[df["precision"] == p], VIEW_COMPILERS, **options))]


def sources_lines(df) -> str:
    """One line per implementation of ``df``: the configuration its row ran and the documents it comes from
    (:data:`resnet_lab.steps.recipes.RECIPES`, :data:`~resnet_lab.steps.recipes.FRAMEWORK_RECIPES`)."""
    from resnet_lab.steps import recipes

    engines = {"IREE": "iree", "ONNX Runtime": "onnxruntime", "OpenVINO": "openvino", "TensorFlow": "tensorflow",
               "native PyTorch": "torch"}
    lines = []
    for impl in dict.fromkeys(df["implementation"]) if df is not None and not df.empty else []:
        engine = engines.get(impl)
        rows = df[(df["implementation"] == impl) & (df["scenario"] == SINGLE_STREAM)]
        config = rows.iloc[0]["configuration"] if len(rows) else ""
        cited = sorted({s["source"].split(" (")[0] for s in recipes.table() if s["engine"] == engine})
        lines.append(f"- **{impl}**: {config}. Sources: {'; '.join(cited) or 'none recorded'}.")
    return "\n".join(lines)


def sources_table():
    """Every setting of every documented recipe with its source (:func:`resnet_lab.steps.recipes.table`)."""
    import pandas as pd

    from resnet_lab.steps import recipes

    return pd.DataFrame(recipes.table())


def knobs_table(rows: Sequence[dict[str, Any]]):
    """The knob sweep (:func:`resnet_lab.bench.sections.knob_configs`): one line per engine and configuration,
    its SingleStream p50/p90, the p50 over the documented configuration's (``vs_documented``; below 1: faster
    than the documented one), compile seconds and output check."""
    import pandas as pd

    out = []
    for r in rows:
        _, _, rest = (r.get("label") or "").partition(" · ")
        engine, _, config = rest.partition(" · ")
        ok = is_measured(r)
        check = "" if r.get("check_ok") is None and r.get("agree_ok") is None else \
            ("ok" if r.get("check_ok") is not False and r.get("agree_ok") is not False else "failed")
        out.append({"engine": engine, "configuration": config, "documented": "documented" in config,
                    "latency_p50_ms": 1e3 * r["step_time_p50"] if ok else None,
                    "latency_p90_ms": 1e3 * r["step_time_p90"] if ok else None,
                    "compile_s": r.get("compile_s"), "check": check, "status": r.get("status"),
                    "reason": r.get("reason") or "", "settings": configuration(r)})
    df = pd.DataFrame(out)
    if df.empty:
        return df
    ref = df[df["documented"]].set_index("engine")["latency_p50_ms"]
    df["vs_documented"] = [r["latency_p50_ms"] / ref[r["engine"]] if r["engine"] in ref.index and
                           r["latency_p50_ms"] is not None and ref[r["engine"]] else None for _, r in df.iterrows()]
    return df


def knobs_summary(df) -> str:
    """Per engine: whether its documented configuration is its fastest here, else which one beats it and by how
    much (the quoted rows stay the documented ones: a faster undocumented setting is a finding, not a row)."""
    if df is None or df.empty:
        return "The knob sweep did not run."
    lines = []
    for engine, part in df.groupby("engine", sort=False):
        timed = part[part["latency_p50_ms"].notna()]
        doc = timed[timed["documented"]]
        if doc.empty:
            lines.append(f"- **{engine}**: its documented configuration has no time ({part.iloc[0]['reason']}).")
            continue
        best = timed.sort_values("latency_p50_ms").iloc[0]
        others = ", ".join(f"{r['configuration']} {r['vs_documented']:.2f}×" for _, r in timed.iterrows()
                           if not r["documented"])
        if best["documented"] or best["vs_documented"] > 0.95:  # within a process's noise: not a finding
            lines.append(f"- **{engine}**: the documented configuration is the fastest tried here "
                         f"({doc.iloc[0]['latency_p50_ms']:.1f} ms p50" + (f"; {others}" if others else "") + ").")
        else:
            lines.append(f"- **{engine}**: {best['configuration']} answers in {best['latency_p50_ms']:.1f} ms p50, "
                         f"{best['vs_documented']:.2f}× the documented configuration's "
                         f"{doc.iloc[0]['latency_p50_ms']:.1f} ms ({others}): a finding for this host, one process "
                         f"each; the rows above stay the documented configuration.")
    return "\n".join(lines)


def plot_compilers(df):
    """SingleStream p90 latency and the best Offline images/sec, one bar per implementation and precision."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ss = df[(df["scenario"] == SINGLE_STREAM) & df["latency_p90_ms"].notna()] if not df.empty else df
    off = df[df["best_offline"]] if not df.empty else df
    colors = {"fp32": "tab:blue", "bf16": "tab:orange", "fp16": "tab:green"}
    for ax, part, column, title in ((axes[0], ss, "latency_p90_ms", "SingleStream p90 latency (ms, lower is better)"),
                                    (axes[1], off, "images_per_sec", "Offline images/sec at the best batch")):
        if len(part):
            names = [f"{r['implementation']} · {r['precision']}" for _, r in part.iterrows()]
            ax.barh(names, list(part[column]), color=[colors.get(p, "tab:gray") for p in part["precision"]])
            ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
