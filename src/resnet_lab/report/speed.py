"""What notebook 03_benchmarks shows: the 2017 rows today, sweeps, plots and a conclusion from the numbers.

The notebook narrates; the matrices, the joins with the 2017 table, the plots and the sentences of the
conclusion are built here from measured rows (see :mod:`resnet_lab.bench`), so they are tested and the
conclusion can never disagree with the table above it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from resnet_lab.bench.config import load_2017_table
from resnet_lab.bench.identity import FUSED_BN_PAIR, describe, is_measured, match_key
from resnet_lab.bench.identity import threads as _int_or_default
from resnet_lab.ceilings import roofline
from resnet_lab.core import hostload, style
from resnet_lab.runs.headline import candidates as _ok
from resnet_lab.runs.headline import headline

RESNET50_NAMES = ("resnet50", "keras-resnet50")
# Whole-host minus our own CPU use above which the conclusion says the machine was shared (%): the one rule
# of the peak, the rows and `resnet-lab compare`.
OTHERS_BUSY_PCT = hostload.OTHERS_BUSY_PCT


# What notebook 03 shows of each table (workbook.display.table): {column: (shown name, format)}; the CSVs keep all
VIEW_2017 = {
    "label": ("2017 row", ""), "xla": ("XLA", ""), "onednn": ("oneDNN", ""), "images_per_sec_2017": ("2017", "img/s"),
    "images_per_sec": ("today", "img/s"), "stderr": ("±", "±"), "speedup_vs_2017": ("vs 2017", "×"),
    "mfu": ("MFU", "%"), "cpu_util": ("CPU util", "CPU %"), "status": ("status", ""),
}
VIEW_ROWS = {
    "label": ("row", ""), "batch_size": ("batch", ""), "precision": ("precision", ""), "intra_op": ("intra", "int"),
    "inter_op": ("inter", "int"), "images_per_sec": ("img/s", "img/s"), "stderr": ("±", "±"),
    "step_time_p50": ("median step", "s"), "mfu": ("MFU", "%"), "cpu_util": ("CPU util", "CPU %"),
    "status": ("status", ""),
}
VIEW_BACKENDS = {
    "label": ("row", ""), "mode": ("mode", ""), "compiler": ("compiler", ""), "images_per_sec": ("img/s", "img/s"),
    "stderr": ("±", "±"), "vs_tf_graph": ("vs TF graph", "×"), "first_step_s": ("first step", "s"),
    "mfu": ("MFU", "%"), "cpu_util": ("CPU util", "CPU %"), "status": ("status", ""),
}


def backend_table(rows: Sequence[dict[str, Any]]):
    """One line per backend row: what compiled the step, images/sec ± stderr, time to first step, MFU,
    and the ratio to the TensorFlow graph row of the same mode (the workbook's reference)."""
    import pandas as pd

    df = pd.DataFrame([{k: r.get(k) for k in (
        "label", "backend", "backend_version", "mode", "compiler", "status", "images_per_sec", "stderr",
        "jitter", "first_step_s", "mfu", "cpu_util", "compile_stats", "reason")} for r in rows])
    ref = {r["mode"]: r["images_per_sec"] for r in rows
           if r.get("backend") == "tensorflow" and r.get("xla") == "off" and is_measured(r)}
    df["vs_tf_graph"] = [r["images_per_sec"] / ref[r["mode"]] if r["mode"] in ref and is_measured(r) else None
                         for r in rows]
    return df


def _nothing(ax, text: str):
    """An empty plot that says why it is empty."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return ax


def plot_backends(df, ax=None):
    """Grouped bars: images/sec of each backend row (x: label), coloured by backend (core.style), hatched by
    mode, ± stderr."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch

    style.apply()

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.4))
    if df.empty:  # the section was not run (03's `sections`)
        return _nothing(ax, "No backend row in this run.")
    labels = list(dict.fromkeys(df["label"]))
    modes = list(dict.fromkeys(df["mode"]))
    width = 0.8 / max(1, len(modes))
    x = np.arange(len(labels))
    for i, mode in enumerate(modes):
        part = df[(df["mode"] == mode)].set_index("label").reindex(labels)
        ok = _measured(part)
        values = np.where(ok, part["images_per_sec"].astype(float), 0.0)
        errors = np.where(ok, part["stderr"].astype(float), 0.0)
        colors = [style.color(b) for b in part["backend"].fillna("tensorflow")]
        ax.bar(x + (i - (len(modes) - 1) / 2) * width, values, width, yerr=errors, capsize=3, color=colors,
               hatch=style.MODE_HATCH.get(mode, ""), edgecolor="white")
        for xi, (okay, status) in enumerate(zip(ok, part["status"], strict=True)):
            if not okay:
                ax.text(x[xi] + (i - (len(modes) - 1) / 2) * width, 0, str(status), rotation=90, fontsize=7,
                        ha="center", va="bottom")
    ax.set_xticks(x, labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("images/sec (log scale)")
    ax.set_yscale("log")
    ax.set_title("One Keras model on each backend: images/sec ± stderr")
    backends = list(dict.fromkeys(df["backend"].fillna("tensorflow")))
    ax.legend(handles=[Patch(color=style.color(b), label=b) for b in backends]
              + [Patch(facecolor="white", edgecolor="black", hatch=style.MODE_HATCH.get(m, ""), label=m)
                 for m in modes], fontsize=7)
    return ax


def sweep_view(df, knob: str):
    """The rows of a sweep over ``knob`` ("batch_size", "precision", "threads" or "fused_bn"), base row
    included."""
    ok = df[~df["fused_bn"].fillna(False).astype(bool)] if "fused_bn" in df else df
    if df.empty:  # the section was not run (03's `sections`): no base row to sweep around
        return df.assign(**{"threads": [], "batch norm": []}) if knob in ("threads", "fused_bn") else df
    if knob == "fused_bn":
        sub = df[(df["batch_size"] == _base_batch(df)) & df["intra_op"].isna()].copy()
        fused = sub["fused_bn"].fillna(False).astype(bool)
        sub["batch norm"] = [f"{p} {'fused' if f else 'Keras'}" for p, f in zip(sub["precision"], fused, strict=True)]
        sub = sub[sub["precision"].isin(set(sub.loc[fused, "precision"]))]  # precisions with a fused row
        return sub.sort_values(["precision", "batch norm"])
    if knob == "threads":
        sub = ok[(ok["precision"] == "fp32") & (ok["batch_size"] == _base_batch(ok))].copy()
        pairs = zip(sub["intra_op"], sub["inter_op"], strict=True)
        sub["threads"] = [f"{_int_or_default(a)}/{_int_or_default(b)}" for a, b in pairs]
        return sub
    if knob == "batch_size":
        return ok[(ok["precision"] == "fp32") & ok["intra_op"].isna()].sort_values("batch_size")
    if knob == "precision":
        return ok[(ok["batch_size"] == _base_batch(ok)) & ok["intra_op"].isna()]
    raise ValueError(f"unknown sweep knob {knob!r}")


def _base_batch(df) -> int:
    prec = df[df["label"] == "precision"]
    return int(prec["batch_size"].iloc[0]) if len(prec) else int(df["batch_size"].mode().iloc[0])


def comparable_to_2017(row: dict[str, Any]) -> bool:
    """Whether a row measured what the 2017 table did: ResNet-50 training at 224², batch 32 per replica."""
    return (row.get("model") in RESNET50_NAMES and row.get("mode") == "train"
            and row.get("image_size") in (224, None) and row.get("batch_size") == 32)


def compare_2017(rows: Iterable[dict[str, Any]]):
    """Today's 2017 rows beside the 2017 numbers: label, config, 2017 and today's images/sec, speedup.

    The speedup is left empty for rows that did not measure what 2017 did (another model, size or batch).
    """
    import pandas as pd

    then = {r["label"]: r for r in load_2017_table()}
    out = []
    for r in rows:
        old = then.get(r.get("label")) if comparable_to_2017(r) else None
        ips = r.get("images_per_sec") if is_measured(r) else None
        out.append({
            "label": r.get("label"), "model": r.get("model"), "image_size": r.get("image_size"),
            "device": r.get("device"), "replicas": r.get("replicas"),
            "xla": r.get("xla"), "xla_ran": r.get("xla_ran"), "onednn": r.get("onednn"),
            "images_per_sec_2017": then[r["label"]]["images_per_sec"] if r.get("label") in then else None,
            "images_per_sec": ips, "stderr": r.get("stderr") if ips is not None else None,
            "speedup_vs_2017": (ips / old["images_per_sec"]) if (ips is not None and old) else None,
            "mfu": r.get("mfu"), "cpu_util": r.get("cpu_util"), "status": r.get("status"),
            "reason": r.get("reason") or "",
        })
    return pd.DataFrame(out)


# The name of a row's configuration in every table, plot and sentence here.
row_name = describe


def _measured(df) -> list[bool]:
    """Which rows of a DataFrame have a speed (:func:`~resnet_lab.bench.identity.is_measured`)."""
    return [is_measured(r) for r in df.to_dict("records")]


def fused_bn_gains(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What TensorFlow's fused batch-norm kernel buys over Keras' batch norm: one sentence per precision
    where both rows of the same configuration ran."""
    ok = _ok(rows)
    plain = {match_key(r, FUSED_BN_PAIR): r for r in ok if not r.get("fused_bn")}
    out = []
    for r in ok:
        base = plain.get(match_key(r, FUSED_BN_PAIR)) if r.get("fused_bn") else None
        if base:
            out.append(f"{r['precision']} training {r['images_per_sec']:.2f} images/sec vs "
                       f"{base['images_per_sec']:.2f} with Keras' batch norm, "
                       f"**{r['images_per_sec'] / base['images_per_sec']:.2f}×** ({row_name(r)}).")
    return out


def conclusion(rows_2017: Sequence[dict[str, Any]], sweep_rows: Sequence[dict[str, Any]]) -> str:
    """A few sentences in Markdown, written from the measured rows (nothing here is typed by hand)."""
    all_rows = [r for r in [*rows_2017, *sweep_rows] if not r.get("same_run_as")]
    ok = _ok(all_rows)
    if not ok:
        return "No configuration ran successfully on this host; the table above says why for each."
    by_label = {r.get("label"): r for r in _ok(rows_2017)}
    then = {r["label"]: r["images_per_sec"] for r in load_2017_table()}
    comparable = all(comparable_to_2017(r) for r in ok if r in rows_2017)
    best_cpu_2017 = max(then[k] for k in ("CPU", "CPU MKL", "XLA CPU")) if comparable else None
    return "\n".join([
        *_shared_host(ok),
        *_onednn_gain(by_label, then),
        *_xla_gains(by_label),
        *_gpu_rows(rows_2017, then),
        *([] if comparable else [_NOT_COMPARABLE]),
        *_best_cpu(ok, best_cpu_2017),
        *_best_fp32_mfu(all_rows),
        *(f"- **Fused batch norm**: {line}" for line in fused_bn_gains(sweep_rows)),
        *_what_bounds_mfu(all_rows),
        *_cpu_utilisation(ok),
    ])


_NOT_COMPARABLE = ("- These rows are not ResNet-50 training at 224², batch 32: the 2017 numbers are shown for "
                   "reference only, without speedups.")


def _shared_host(ok: Sequence[dict[str, Any]]) -> list[str]:
    """A warning first, where other processes kept the host busy during some rows' timed steps."""
    busy = [r for r in ok if r.get("host_util") is not None and r.get("cpu_util") is not None
            and r["host_util"] - r["cpu_util"] > OTHERS_BUSY_PCT]
    if not busy:
        return []
    worst = max(r["host_util"] - r["cpu_util"] for r in busy)
    names = ", ".join(r.get("label") or row_name(r) for r in busy[:6]) + (" …" if len(busy) > 6 else "")
    return [f"- ⚠ **Shared host**: other processes used up to {worst:.0f} % of the cores during the timed "
            f"steps of {len(busy)} of {len(ok)} rows ({names}); those rows are slowed by an unknown amount, "
            f"so ratios between them and quiet rows mean little. Re-run on a quiet machine."]


def _onednn_gain(by_label: dict[Any, dict[str, Any]], then: dict[str, float]) -> list[str]:
    """oneDNN against TensorFlow's own kernels, today and in 2017."""
    plain, mkl = by_label.get("CPU"), by_label.get("CPU MKL")
    if not (plain and mkl):
        return []
    return [f"- **oneDNN** (the 2017 \"MKL\" build, today on by default): {mkl['images_per_sec']:.2f} vs "
            f"{plain['images_per_sec']:.2f} images/sec without it, "
            f"**{mkl['images_per_sec'] / plain['images_per_sec']:.2f}×** "
            f"(2017: {then['CPU MKL'] / then['CPU']:.2f}×)."]


def _xla_gains(by_label: dict[Any, dict[str, Any]]) -> list[str]:
    """Each XLA CPU row against the same build without XLA."""
    lines = []
    for label, ref_label in (("XLA CPU", "CPU"), ("XLA jit CPU (new)", "CPU MKL")):
        r, ref = by_label.get(label), by_label.get(ref_label)
        if r and ref:
            what = "auto-clustering (2017's global jit)" if r["xla"] == "auto" else "jit_compile=True"
            ran = "" if r.get("xla_ran") else " — but no XLA cluster was compiled"
            lines.append(f"- **XLA on CPU**, {what}{ran}: {r['images_per_sec']:.2f} images/sec, "
                         f"{r['images_per_sec'] / ref['images_per_sec']:.2f}× the same build without XLA "
                         f"(`{ref['label']}`).")
    return lines


def _gpu_rows(rows_2017: Sequence[dict[str, Any]], then: dict[str, float]) -> list[str]:
    """Why the GPU rows were skipped, or what each measured (with 2017's figure)."""
    gpu_rows = [r for r in rows_2017 if r.get("device") == "gpu"]
    if gpu_rows and all(r.get("status") == "skipped" for r in gpu_rows):
        return [f"- **GPU rows** skipped: {gpu_rows[0].get('reason')}."]
    lines = []
    for r in _ok(gpu_rows):
        old = then.get(r.get("label"))
        lines.append(f"- **{r['label']}**: {r['images_per_sec']:.1f} images/sec"
                     f"{f' (2017: {old:.1f})' if old else ''}.")
    return lines


def _best_cpu(ok: Sequence[dict[str, Any]], cpu_then: float | None) -> list[str]:
    """The fastest CPU training row: MFU, CPU utilisation, and its speedup over 2017's best CPU row where
    the rows measured what 2017 did (``cpu_then``)."""
    best = max((r for r in ok if r.get("device") == "cpu" and r.get("mode") == "train"),
               key=lambda r: r["images_per_sec"], default=None)
    if not best:
        return []
    mfu_s = f", MFU {100 * best['mfu']:.0f} %" if best.get("mfu") is not None else ""
    util_s = f", CPU utilisation {best['cpu_util']:.0f} %" if best.get("cpu_util") is not None else ""
    vs_2017 = (f"; {best['images_per_sec'] / cpu_then:.1f}× the best 2017 CPU row "
               f"({cpu_then} images/sec on a 6-core i7)") if cpu_then else ""
    return [f"- **Best CPU training configuration**: {row_name(best)} — "
            f"{best['images_per_sec']:.2f} images/sec{mfu_s}{util_s}{vs_2017}."]


def _best_fp32_mfu(rows: Sequence[dict[str, Any]]) -> list[str]:
    h = headline(rows)
    if not (h["best_fp32_config"] and h["best_fp32_mfu"] is not None):
        return []
    return [f"- **Best fp32 MFU**: {100 * h['best_fp32_mfu']:.0f} % ({h['best_fp32_config']})."]


def _what_bounds_mfu(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The first profiled row's split of the step (:func:`profile_summary`)."""
    profiled = [r for r in rows if is_measured(r) and r.get("conv_share") is not None]
    return [f"- **What bounds fp32 MFU**: {profile_summary(profiled[0])}"] if profiled else []


def _cpu_utilisation(ok: Sequence[dict[str, Any]]) -> list[str]:
    utils = [r["cpu_util"] for r in ok if r.get("cpu_util") is not None and r.get("device") == "cpu"]
    if not utils:
        return []
    return [f"- **CPU utilisation** of the benchmark process during the timed steps ranged "
            f"{min(utils):.0f}–{max(utils):.0f} % of the available cores "
            f"(2017 saw ~30 % and never found out why)."]


def profile_table(row: dict[str, Any]):
    """Milliseconds per timed step by oneDNN primitive kind, plus everything outside oneDNN."""
    import json

    import pandas as pd

    if not is_measured(row) or not row.get("onednn_profile"):
        return pd.DataFrame(columns=["part", "ms_per_step", "share"])
    prof = json.loads(row["onednn_profile"])
    parts = dict(prof.get("ms_per_step", {}))
    outside = "ReLU, adds, optimizer" if row.get("fused_bn") else \
        "batch-norm math, ReLU, adds, optimizer"
    parts[f"outside oneDNN (TF kernels: {outside}; framework)"] = prof["other_ms"]
    df = pd.DataFrame({"part": list(parts), "ms_per_step": list(parts.values())})
    df["share"] = df["ms_per_step"] / prof["step_ms"]
    return df.sort_values("ms_per_step", ascending=False).reset_index(drop=True)


def profile_summary(row: dict[str, Any]) -> str:
    """One paragraph from a profiled row: conv share, conv GFLOP/s against the GEMM rates, what is left."""
    if not is_measured(row) or row.get("conv_share") is None:
        return "No oneDNN profile (the profiled configuration did not run, or oneDNN was off)."
    gemm_now, peak_g = row.get("gemm_gflops_now"), row.get("peak_gflops")
    vs = []
    if gemm_now:
        vs.append(f"{100 * row['conv_gflops'] / gemm_now:.0f} % of the GEMM rate measured during the run "
                  f"({gemm_now:.0f} GFLOP/s)")
    if peak_g:
        vs.append(f"{100 * row['conv_gflops'] / peak_g:.0f} % of the peak file's {peak_g:.0f} GFLOP/s")
    text = (f"In a {row['precision']} training step of {row['model']} (batch {row['batch_size']}), "
            f"{100 * row['conv_share']:.0f} % of the time is inside oneDNN convolutions and "
            f"{100 * max(0.0, 1 - row['onednn_share']):.0f} % outside oneDNN. The convolutions themselves run at "
            f"{row['conv_gflops']:.0f} GFLOP/s: {' and '.join(vs) or 'no GEMM reference'}. MFU can be no "
            f"higher than conv efficiency × conv share of the FLOPs' time, so ")
    text += ("the convolution kernels, not the framework around them, bound MFU here." if row["conv_share"] >= 0.5
             else "the time outside the convolution kernels (the framework and the other ops) bounds MFU here.")
    if row["onednn_share"] > 1.0:
        text += (f" ⚠ The primitives' summed time is {100 * row['onednn_share']:.0f} % of the step: they overlapped "
                 "(independent ops ran at once on TensorFlow's inter-op threads), so these shares are of the "
                 "summed primitive time, not of the wall clock.")
    return text


def profile_roofline(rows: Sequence[dict[str, Any]], peak: dict[str, Any] | None):
    """The per-primitive roofline (:func:`resnet_lab.bench.roofline.table`) of the first profiled row of
    ``rows``; None where no oneDNN primitive was profiled (no profile row, or it did not run)."""
    import json

    row = next((r for r in rows if r.get("onednn_profile")), None)
    if row is None:
        return None
    roof = roofline.table(json.loads(row["onednn_profile"]).get("primitives", []), peak)
    return None if roof.empty else roof


def median_step_ms(row: dict[str, Any]) -> float | None:
    """A row's median step time in milliseconds (None where it did not run)."""
    p50 = row.get("step_time_p50")
    return 1e3 * p50 if p50 else None


# -------------------------------------------------------------------------------------------- plots
def plot_throughput(df, x: str, title: str, ax=None, hue: str | None = None):
    """Bars of images/sec with ±stderr error bars (and jitter as a thin second bar) over ``x``."""
    import matplotlib.pyplot as plt

    style.apply()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.2))
    ok = df.loc[_measured(df)]
    labels = [str(v) for v in ok[x]]
    ax.bar(labels, ok["images_per_sec"], yerr=ok["stderr"], capsize=4, color=style.color("tensorflow"),
           label="mean ± stderr")
    ax.errorbar(labels, ok["images_per_sec"], yerr=ok["jitter"], fmt="none", ecolor="#999999", capsize=8,
                elinewidth=0.8, label="± jitter")
    ax.set_xlabel(x)
    ax.set_ylabel("images/sec")
    ax.set_title(f"{title}: images/sec")
    ax.legend(fontsize=7)
    return ax


def plot_2017(cmp_df, ax=None):
    """Today's images/sec beside 2017's for each row of the 2017 table (log scale; skipped rows marked)."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    if cmp_df.empty:  # the section was not run (03's `sections`)
        return _nothing(ax, "No 2017 row in this run.")
    labels = list(cmp_df["label"])
    xs = np.arange(len(labels))
    old = cmp_df["images_per_sec_2017"].astype(float)
    new = cmp_df["images_per_sec"].astype(float)
    style.apply()
    ax.bar(xs - 0.2, old, 0.4, label="2017 (i7-6850K, 1080 Ti)", color=style.OTHER_COLOR)
    ax.bar(xs + 0.2, new.fillna(0), 0.4, yerr=cmp_df["stderr"].astype(float).fillna(0), capsize=3,
           label="today, this host (± stderr)", color=style.color("tensorflow"))
    for x, (n, status) in enumerate(zip(new, cmp_df["status"], strict=True)):
        if n != n:  # NaN: not measured
            ax.text(x + 0.2, 1, status, rotation=90, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(xs, labels, rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("images/sec (log scale)")
    model = next(iter(cmp_df["model"].dropna()), "ResNet-50") if "model" in cmp_df else "ResNet-50"
    ax.set_title(f"The 2017 rows: {model} training, synthetic data, images/sec")
    ax.legend(fontsize=7)
    return ax


def plot_mfu_util(df, ax=None):
    """MFU and CPU utilisation (%) per configuration: how much of the machine each configuration uses."""
    import matplotlib.pyplot as plt
    import numpy as np

    style.apply()
    ok = df.loc[_measured(df)]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    names = [row_name(r) for r in ok.to_dict("records")]
    xs = np.arange(len(names))
    ax.bar(xs - 0.2, 100 * ok["mfu"].astype(float).fillna(0), 0.4, label="MFU % (of measured GEMM peak)",
           color="#DD8452")
    ax.bar(xs + 0.2, ok["cpu_util"].astype(float).fillna(0), 0.4, label="process CPU % of cores",
           color="#55A868")
    ax.set_xticks(xs, names, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7)
    ax.set_title("Model FLOPs utilisation and CPU utilisation (%)")
    return ax


WALL_PARTS = (("startup_s", "process start, GEMM check, exit"), ("import_s", "framework import"),
              ("build_s", "model, optimizer, batch"), ("first_step_s", "first step (compile)"),
              ("warmup_s", "warmup"), ("timed_s", "timed steps"))


def wall_breakdown(rows: Sequence[dict[str, Any]]):
    """Where each measured configuration's wall time went (seconds per part of :data:`WALL_PARTS`), and
    the share of it spent on the timed steps; rows repeated from an earlier run are left out."""
    import pandas as pd

    measured = [r for r in rows if r.get("timed_s") is not None and not r.get("same_run_as")]
    # a row of several processes keeps its times per process (bench.rows.combine): it cost that many times
    processes = [len(r.get("process_means") or [None]) for r in measured]
    frame = pd.DataFrame([{"config": r.get("label") or row_name(r), "mode": r.get("mode"),
                           **{k: n * float(r.get(k) or 0.0) for k, _ in WALL_PARTS},
                           "wall_s": n * float(r.get("wall_s") or 0.0)}
                          for r, n in zip(measured, processes, strict=True)])
    if not frame.empty:
        frame["timed_share"] = frame["timed_s"] / frame["wall_s"].where(frame["wall_s"] > 0)
    return frame


def wall_summary(frame) -> str:
    """One line from :func:`wall_breakdown`: the timed steps' share of the measuring, and how long it took."""
    if frame.empty:
        return "No configuration was measured."
    wall = frame["wall_s"].sum()
    return f"timed steps: {frame['timed_s'].sum() / wall:.0%} of {wall / 60:.1f} min of measuring"


def plot_wall_breakdown(frame, ax=None):
    """Stacked horizontal bars of :func:`wall_breakdown`: one bar per configuration, one colour per part."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.3 * max(len(frame), 4) + 1))
    labels = [f"{c} ({m})" for c, m in zip(frame["config"], frame["mode"], strict=True)]
    left = [0.0] * len(frame)
    for key, name in WALL_PARTS:
        ax.barh(labels, frame[key], left=left, label=name)
        left = [a + b for a, b in zip(left, frame[key], strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("seconds of wall time")
    ax.set_title("Where each configuration's wall time went")
    ax.legend(fontsize=7, loc="lower right")
    return ax
