"""One tidy row per configuration: the configuration, what ran, the statistics, MFU, utilisation, provenance.

:func:`make_row` turns a worker's raw result (per-step times and facts) into the row; every field that
made the number is in it (:mod:`resnet_lab.bench.schema`), so a DataFrame of many runs can be grouped and plotted
without looking anything up elsewhere. Also the row's outputs: CSV, JSON, a text table, a DataFrame.
"""

from __future__ import annotations

import csv
import io
import os
import socket
import sys
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity, schema, stats
from resnet_lab.bench.config import BenchConfig, compiler_name, math_dtype
from resnet_lab.ceilings import peak
from resnet_lab.core import artifacts, provenance, requirements
from resnet_lab.core.text import markdown_table
from resnet_lab.scaleout import cluster

NO_PEAK_NOTE = ("no GEMM peak measured on this host: run notebook 00_environment or `resnet-lab peak`, "
                "or pass --peak-file")


# The row's fields, defined in resnet_lab.bench.schema: the CSV's columns in order; the JSON-only lists (the
# per-step seconds, each process's mean step time, each process's steps: what `compare` tests on); what a row of
# several processes averages over its measured processes (the rest is the first process's, the load the
# largest: times stay per process, so a table reads them as a one-process row's; the row's cost is wall_s × its
# processes, report.speed.wall_breakdown).
ROW_FIELDS = schema.CSV_FIELDS
JSON_ONLY_FIELDS = schema.JSON_ONLY_FIELDS
PER_PROCESS_MEANS = schema.PER_PROCESS_MEANS
ALL_FIELDS = schema.ALL_FIELDS  # the keys of every row, in this order


def backend_version(backend: str) -> str | None:
    """The installed version of a backend's package, without importing it (None where absent): the first
    distribution :data:`resnet_lab.core.requirements.TABLE` names for it (TensorFlow's either build)."""
    req = requirements.TABLE[backend]
    return next((v for v in map(requirements.installed, (*req.any_of, *req.all_of[:1])) if v), None)


def static_fields(cfg: BenchConfig) -> dict[str, Any]:
    """Row fields known without running anything (the host's side of provenance included)."""
    cpu = provenance.cpu_info()
    git = provenance.git_state()
    versions = provenance.package_versions(("tensorflow", "tensorflow-cpu", "keras"))
    try:
        load1 = os.getloadavg()[0]
    except OSError:
        load1 = None
    ident = identity.as_row(cfg)
    ident.pop("onednn_profile")  # the run writes the profile itself there, not the flag
    return {
        **ident, "label": cfg.label, "global_batch": cfg.global_batch, "math_dtype": math_dtype(cfg),
        "xla_ran": None, "onednn_ran": None, "emulated": cfg.device == "cpu" and cfg.replicas > 1,
        "warmup": cfg.warmup, "steps": cfg.steps, "min_time_s": cfg.min_time_s, "max_time_s": cfg.max_time_s,
        "task_index": cfg.task_index, "collective": cfg.collective if cfg.workers else None,
        "available_cpus": cpu.get("available_cpus"), "loadavg_1m": load1,
        "backend_version": backend_version(cfg.backend), "compiler": compiler_name(cfg),
        "tf_version": versions.get("tensorflow") or versions.get("tensorflow-cpu"),
        "keras_version": versions.get("keras"), "python": sys.version.split()[0],
        "host": socket.gethostname(), "cpu_model": cpu.get("model"),
        "commit": git.get("commit"), "dirty": git.get("dirty"),
        "started_at": provenance.now_iso(),
    }


def make_row(cfg: BenchConfig, result: dict[str, Any], peak_doc: dict[str, Any] | None,
             static: dict[str, Any] | None = None) -> dict[str, Any]:
    """One tidy row: the configuration, what ran, the statistics, MFU, utilisation and provenance."""
    row = {k: None for k in ALL_FIELDS}
    row.update(static if static is not None else static_fields(cfg))
    for key in ("status", "reason", "xla_ran", "onednn_ran", "first_step_s", "compile_s", "timed_s",
                "forward_macs", "cpu_seconds", "host_util", "compute_dtype", "tf_version", "keras_version",
                "model_source", "flops_source", "image_size", "emulated", "gemm_gflops_now", "compiler",
                "compile_stats", "backend_version", "import_s", "build_s", "warmup_s", "process", "check_ok",
                "check_max_abs", "check_max_rel", "check_tol", "agree_top1", "agree_top5", "agree_max_rel",
                "agree_tol", "agree_ok"):
        if result.get(key) is not None:
            row[key] = result[key]
    row["status"] = result.get("status", "error")
    row["repeats"] = cfg.repeats
    if result.get("warmup_steps") is not None:  # raised for lazily compiling modes (see bench.config.min_warmup)
        row["warmup"] = result["warmup_steps"]
    if row["status"] != "ok":
        return row
    images_per_step = cfg.global_batch
    summary = stats.step_stats(result["step_times"], images_per_step)
    row["timed_steps"] = summary.pop("n_steps")
    row.update(summary)
    row["step_times"] = [float(t) for t in result["step_times"]]
    # one process: its interval says how well this process was timed (stats.WITHIN), not the next one
    within = stats.within_one(row["step_times"])
    row.update(ci_method=within.ci_method, var_within=within.var_within, var_between=None,
               process_means=[row["step_time_mean"]])
    if row["timed_steps"] < cfg.steps:  # the budget ran out first: a number, not a full result
        row["status"] = "short"
        row["reason"] = (f"max time {cfg.max_time_s:g} s ran out after {row['timed_steps']} of the "
                         f"{cfg.steps} timed steps asked for")
    row["timed_s"] = float(result.get("timed_s") or sum(result["step_times"]))
    return _derived(row, cfg, peak_doc, result)


def _derived(row: dict[str, Any], cfg: BenchConfig, peak_doc: dict[str, Any] | None,
             result: dict[str, Any]) -> dict[str, Any]:
    """What follows from a measured row's speed and times: CPU utilisation, FLOPs, MFU and its note, and a
    cluster's fields."""
    if row.get("cpu_seconds") is not None and row["available_cpus"] and row["timed_s"]:
        row["cpu_util"] = stats.cpu_utilization(float(row["cpu_seconds"]), row["timed_s"], int(row["available_cpus"]))
    row["flops_per_image"] = stats.flops_per_image(row["forward_macs"], cfg.mode)
    if row["flops_per_image"]:
        row["model_gflops"] = row["flops_per_image"] * row["images_per_sec"] / 1e9
    row["peak_gflops"], row["mfu_note"] = peak_for(cfg, peak_doc)
    row["mfu"] = stats.mfu(row["flops_per_image"], row["images_per_sec"], row["peak_gflops"])
    row["mfu_vs_gemm_now"] = stats.mfu(row["flops_per_image"], row["images_per_sec"], row["gemm_gflops_now"])
    if row["mfu"] is None and not row["mfu_note"]:
        row["mfu_note"] = "model FLOPs unknown"
    if row["mfu"] is not None and row["mfu"] > 1:  # above the physical limit: the peak is not the limit
        where = (peak_doc or {}).get("loaded") or []
        row["mfu_note"] = (f"not reported: the model ran at {row['model_gflops']:.0f} GFLOP/s, "
                           f"{row['mfu']:.2f}× the peak of {row['peak_gflops']:.0f} GFLOP/s, so that peak is "
                           f"not this machine's limit ({'; '.join(where) or 'measured in other conditions'}); "
                           f"see mfu_vs_gemm_now")
        row["mfu"] = None
    elif row["mfu"] is not None and (peak_doc or {}).get("loaded"):
        row["mfu_note"] = f"peak measured on a busy host ({'; '.join(peak_doc['loaded'])}): MFU overstated"
    for key in ("mfu_vs_gemm_now",):
        if row[key] is not None and row[key] > 1:
            row["mfu_note"] = (row["mfu_note"] + "; " if row["mfu_note"] else "") + \
                f"{key} {row[key]:.2f} > 1: the same-run GEMM check ran slower than the steps' kernels"
    if cfg.workers:  # global, per-worker and one-worker images/sec, scaling efficiency
        row.update(cluster.row_fields(cfg, result, row))
        hosts = cluster.distinct_hosts(cfg.workers)
        if hosts > 1:  # the cluster's peak: this host's × the number of hosts (alike hosts assumed)
            for peak_key, mfu_key in (("peak_gflops", "mfu"), ("gemm_gflops_now", "mfu_vs_gemm_now")):
                if row.get(peak_key):
                    row[peak_key] = row[peak_key] * hosts
                    row[mfu_key] = stats.mfu(row["flops_per_image"], row["images_per_sec"], row[peak_key])
            if row.get("peak_gflops"):
                row["mfu_note"] = f"MFU against {hosts} hosts × this host's peak (alike hosts assumed)"
    return row


def combine(cfg: BenchConfig, process_rows: list[dict[str, Any]],
            peak_doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """One row of a configuration measured in several fresh processes (``process_rows``: one
    :func:`make_row` each, in the order they ran).

    Its speed and 95 % interval come from the spread between the measured processes
    (:func:`resnet_lab.bench.stats.process_fields`: images/sec is the geometric mean of the processes'
    speeds where they timed equal step counts); ``step_times`` are every process's steps in order, with
    ``process_step_times`` and ``process_means`` beside them; stderr, jitter and the step-time percentiles
    describe those steps pooled. Times (:data:`PER_PROCESS_MEANS`) are the mean per process. Processes that
    measured nothing are named in ``reason``; with one measured process the row is that process's, its
    interval within it. Status ``short`` when a process ran out of its time budget."""
    if len(process_rows) == 1:
        return process_rows[0]
    ok = [identity.is_measured(r) and bool(r.get("step_times")) for r in process_rows]
    measured = [r for r, good in zip(process_rows, ok, strict=True) if good]
    lost = [f"process {i} {r['status']}: {r.get('reason') or ''}".rstrip(": ")
            for i, (r, good) in enumerate(zip(process_rows, ok, strict=True), 1) if not good]
    if len(measured) < 2:
        row = dict(measured[0] if measured else process_rows[0])
        if measured and lost:
            row["reason"] = "; ".join([*([row["reason"]] if row.get("reason") else []),
                                       f"{len(lost)} of {len(process_rows)} processes measured nothing", *lost])
        return row
    row = dict(measured[0])
    per = [[float(t) for t in r["step_times"]] for r in measured]
    images_per_step = cfg.global_batch
    pooled = stats.step_stats([t for times in per for t in times], images_per_step)
    row["timed_steps"] = pooled.pop("n_steps")
    row.update(pooled)
    row.update(stats.process_fields(per, images_per_step))
    row["step_times"] = [t for times in per for t in times]
    row["process_step_times"] = per
    for key in PER_PROCESS_MEANS:
        values = [float(r[key]) for r in measured if r.get(key) is not None]
        row[key] = sum(values) / len(values) if values else None
    loads = [float(r["loadavg_1m"]) for r in measured if r.get("loadavg_1m") is not None]
    row["loadavg_1m"] = max(loads) if loads else None  # the busiest moment is what a reader must know
    ran = [r.get("xla_ran") for r in measured]
    row["xla_ran"] = None if None in ran else all(ran)
    row["process"] = None  # several
    short = [r for r in measured if r["status"] == "short"]
    row["status"] = "short" if short else "ok"
    reasons = [f"{len(short)} of {len(measured)} processes short: {short[0]['reason']}"] if short else []
    if lost:
        reasons += [f"{len(lost)} of {len(process_rows)} processes measured nothing", *lost]
    row["reason"] = "; ".join(reasons) or None
    return _derived(row, cfg, peak_doc, {})


def peak_for(cfg: BenchConfig, peak_doc: dict[str, Any] | None) -> tuple[float | None, str]:
    """(peak GFLOP/s for this row's math dtype and device, note saying why it is missing)."""
    if not peak_doc:
        return None, NO_PEAK_NOTE
    if peak_doc.get("device", "cpu") != cfg.device:
        return None, f"the peak file measured {peak_doc.get('device', 'cpu')} GEMMs, not {cfg.device}"
    dtype = math_dtype(cfg)
    value = peak.peak_gflops(dtype, peak_doc)
    if value is None:
        return None, f"the peak file has no {dtype} measurement"
    if dtype != cfg.precision:
        how = "TF32 tensor cores" if dtype == "tf32" else f"oneDNN fpmath {dtype}"
        return value, f"{cfg.precision} with {how}: MFU against the {dtype} peak"
    return value, ""


def skipped_row(cfg: BenchConfig, status: str, reason: str, static: dict[str, Any] | None = None) -> dict:
    return make_row(cfg, {"status": status, "reason": reason}, None, static)


def save_rows(out: str | Path, rows: list[dict[str, Any]], name: str = "bench") -> tuple[Path, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = artifacts.write_json(out / f"{name}.json", rows)
    csv_path = out / f"{name}.csv"
    csv_path.write_text(rows_to_csv(rows))
    return csv_path, json_path


def rows_to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(ROW_FIELDS), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in ROW_FIELDS})
    return buf.getvalue()


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def rows_to_table(rows: list[dict[str, Any]]) -> str:
    """A short human table: the knobs that vary, images/sec ± stderr (jitter), MFU, CPU utilisation."""
    header, lines = _table_cells(rows)
    widths = [max([len(h), *(len(line[i]) for line in lines)]) for i, h in enumerate(header)]
    fmt_line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([fmt_line(header), *(fmt_line(line) for line in lines)])


def rows_to_markdown(rows: list[dict[str, Any]]) -> str:
    """:func:`rows_to_table`'s columns as a GitHub Markdown table."""
    header, lines = _table_cells(rows)
    return "\n".join(markdown_table(header, lines))


def _table_cells(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The short table's header and each row's cells, as text."""
    labelled = any(r.get("label") for r in rows)
    header = ["model", "backend", "mode", "batch", "prec", "xla", "onednn", "dev", "repl", "threads", "images/sec",
              "mfu", "cpu%", "status"]
    if labelled:
        header = ["label", *header]
    lines = []
    for r in rows:
        measured = identity.is_measured(r)
        ips = f"{r['images_per_sec']:.2f} ± {r['stderr']:.2f} (jitter {r['jitter']:.2f})" if measured else "-"
        processes = len(r.get("process_means") or [])
        if measured and processes > 1 and r.get("ci95_low") is not None:  # the interval is the processes'
            ips = f"{r['images_per_sec']:.2f} [{r['ci95_low']:.2f}, {r['ci95_high']:.2f}] ({processes} processes)"
        if r.get("workers") and measured:  # global images/sec of a cluster
            eff = r.get("scaling_efficiency")
            ips += f" [{r['workers']} workers" + ("" if eff is None else f", efficiency {100 * eff:.0f}%") + "]"
        xla = f"{r['xla']}" + ("" if r.get("xla_ran") is None else f"→{'on' if r['xla_ran'] else 'off'}")
        threads = f"{_fmt(r.get('intra_op'))}/{_fmt(r.get('inter_op'))}"
        mfu_s = "-" if r.get("mfu") is None else f"{100 * r['mfu']:.1f}%"
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('reason') or ''}"
        prec = r["precision"]
        if r.get("math_dtype") not in (None, prec):
            prec = f"{prec}/{r['math_dtype']}"  # fp32 API, bf16 math
        line = [r["model"], r.get("backend") or "tensorflow", r["mode"], str(r["batch_size"]), prec, xla,
                r["onednn"], r["device"],
                str(r["replicas"]) + ("e" if r.get("emulated") else ""), threads, ips, mfu_s,
                _fmt(r.get("cpu_util"), 0), status]
        lines.append([r.get("label") or "", *line] if labelled else line)
    return header, lines


def to_frame(rows: list[dict[str, Any]]):
    """The rows as a pandas DataFrame with the columns in :data:`ROW_FIELDS` order."""
    import pandas as pd

    return pd.DataFrame([{k: r.get(k) for k in ROW_FIELDS} for r in rows], columns=list(ROW_FIELDS))
