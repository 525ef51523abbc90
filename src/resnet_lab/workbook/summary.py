"""Each report's answer in a few sentences, and the run's one page: written from the numbers a notebook
recorded in ``results.json``, never typed by hand.

:func:`summarize` turns one notebook's results into Markdown; the runner puts it at the top of that
notebook's HTML reports and on the run page. :func:`headline_figures` picks the figures a list of runs shows
(selected model, distinct ops, best images/sec and MFU). :func:`write_run_page` writes ``<run>/index.html``:
the host, every notebook's summary and status, links to the full reports and the files beside them.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resnet_lab.bench.config import load_2017_table
from resnet_lab.core import artifacts
from resnet_lab.report.record import Key as K  # notebook 03's results.json keys
from resnet_lab.runs import compare
from resnet_lab.workbook import display

SUMMARY_HEADING = "## Summary"


# the tables' formats (workbook.display), with the unit written out and a word where a number is missing
def _gflops(v: Any) -> str:
    return "-" if display.missing(v) else f"{display.FORMATS['GFLOP/s'](v)} GFLOP/s"


def _pct(v: Any) -> str:
    return "not available" if display.missing(v) else display.percent(v)


def _ips(v: Any) -> str:
    return "-" if display.missing(v) else f"{display.FORMATS['img/s'](v)} img/s"


def _environment(r: dict[str, Any]) -> list[str]:
    peaks = ", ".join(f"{k} {_gflops(v)}" for k, v in (r.get("peak_gflops") or {}).items())
    gpus = r.get("gpus") or 0
    return [f"Host: {r.get('cpu_model') or 'unknown CPU'}, {r.get('available_cpus')} CPUs available, "
            f"oneDNN {'on' if r.get('onednn_active') else 'off'}, {gpus} GPU{'s' if gpus != 1 else ''}.",
            f"Measured GEMM peak (what MFU divides by): {peaks or 'none'}."
            + (f" Memory bandwidth (triad): {r['bandwidth_gbps']:,.1f} GB/s." if r.get("bandwidth_gbps") else "")]


def _selection(r: dict[str, Any]) -> list[str]:
    totals = sorted((r.get("totals") or {}).items(), key=lambda kv: -kv[1])
    lines = [f"Chosen: **{r.get('chosen_model')}** (candidate {r.get('chosen_candidate')})."]
    if len(totals) >= 2:
        (_, t1), (second, t2) = totals[0], totals[1]
        lines.append(f"Weighted score {t1:.2f} against {t2:.2f} for the runner-up {second}, a margin of "
                     f"{t1 - t2:.2f}.")
    flips = r.get("flips") or []
    lines.append(f"{len(flips)} single-weight change(s) in the sensitivity table flip the decision."
                 if flips else "No single-weight change in the sensitivity table flips the decision.")
    return lines


def _ops(r: dict[str, Any]) -> list[str]:
    distinct = r.get("distinct_opcodes") or {}
    focus = next(iter(r.get("focus_opcodes") or {}), None)
    model = focus.split("/")[0] if focus else None
    lines = []
    if model:
        per = [f"{label.split('/', 1)[1]} {n}" for label, n in distinct.items() if label.startswith(model + "/")]
        lines.append(f"Distinct HLO opcodes of **{model}** (TensorFlow, per mode/stage/platform): {'; '.join(per)}.")
    backends = r.get("backend_distinct_opcodes") or {}
    other = {k: v for k, v in backends.items() if not k.startswith("tensorflow/")}
    if other:
        lines.append("Other backends, same model: " + "; ".join(f"{k.replace('/' + (model or ''), '')} {v}"
                                                                 for k, v in other.items()) + ".")
    shlo = r.get("stablehlo_distinct") or {}
    if shlo:
        agree = {True: "the text count and the MLIR walk agree op by op", False: "the text count and the MLIR walk "
                 "DISAGREE"}.get(r.get("stablehlo_walk_agrees"), "")
        groups: dict[str, dict[str, int]] = {}  # "backend mode" -> model -> count
        for key, n in shlo.items():
            backend, model, mode = [*key.split("/"), "", ""][:3]
            groups.setdefault(f"{backend} {mode}", {})[model] = n
        per = "; ".join(f"{g} {next(iter(c.values()))}" if len(set(c.values())) == 1 else
                        f"{g} " + ", ".join(f"{m} {n}" for m, n in c.items()) for g, c in groups.items())
        lines.append("Distinct StableHLO compute ops (JAX: its lowering; TensorFlow: its HLO converted with "
                     f"hlo_to_stablehlo), every model alike unless named: {per}" + (f" ({agree})." if agree else "."))
    across = r.get("ir_distinct_ops") or {}
    if across:  # the focus model's inference in every IR read ("hlo/tensorflow/infer": n, "tflite/...": n)
        names = {"hlo": "HLO", "stablehlo": "StableHLO", "core-aten": "Core ATen", "tflite": "TFLite"}
        per = [f"{names.get(ir, ir)} ({backend}) {n}" for key, n in across.items()
               for ir, backend, mode in [[*key.split("/"), "", ""][:3]] if mode == "infer"]
        fused = sum(sum(f.values()) for f in (r.get("ir_fused_activations") or {}).values())
        lines.append(f"Distinct ops of the focus model's inference across IRs: {'; '.join(per)}"
                     + (f" (TFLite fuses {fused} activations into the ops before them)." if fused else "."))
    cov = (r.get("coverage_2017") or {}).get("as today's opcodes/train")
    if cov:  # the 2017 list as a backend's support file, against the focus model's training step
        lacks = ", ".join(cov["missing_ops"]) or "nothing"
        lines.append(f"The 2017 list, read as today's opcodes, lacks for the training step: {lacks} "
                     f"({cov['share_instructions']} % of its instructions; {cov['layers_blocked']} layers blocked, "
                     f"{cov['share_flops']} % of its convolution and dot FLOPs in blocked passes).")
    only = r.get("backend_only_in") or {}
    if only:
        lines.append("Opcodes of one backend only: " + ", ".join(f"{op} ({b})" for op, b in sorted(only.items()))
                     + ".")
    models = sorted({label.split("/")[0] for label in distinct})
    lines.append(f"{len(distinct)} steps captured across {len(models)} model(s)"
                 + (f"; {len(r['skipped'])} skipped ({_reasons(r['skipped'])})." if r.get("skipped") else "."))
    return lines


def _reasons(skipped: list[dict[str, Any]]) -> str:
    # the reason's first clause ("the 'gpu' platform needs a GPU"), its details stay in the tables
    reasons = sorted({str(s.get("skipped") or s.get("reason") or "skipped").split(":")[0] for s in skipped})
    return "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")


def _benchmarks(r: dict[str, Any]) -> list[str]:
    lines = []
    if r.get(K.BEST_CONFIG):
        lines.append(f"Fastest training configuration: **{r[K.BEST_CONFIG]}**, {_ips(r[K.BEST_IMAGES_PER_SEC])}"
                     f" (MFU {_pct(r.get(K.BEST_MFU))}).")
    if r.get(K.BEST_FP32_CONFIG) and r.get(K.BEST_FP32_CONFIG) != r.get(K.BEST_CONFIG):
        lines.append(f"Fastest fp32 training: {r[K.BEST_FP32_CONFIG]}, {_ips(r[K.BEST_FP32_IMAGES_PER_SEC])} "
                     f"(MFU {_pct(r.get(K.BEST_FP32_MFU))}).")
    then = {row["label"]: row["images_per_sec"] for row in load_2017_table()}
    now = {k: v for k, v in (r.get(K.IMAGES_PER_SEC_2017) or {}).items() if isinstance(v, int | float)}
    if now:
        lines.append("The 2017 rows here (2017's figure in brackets): " + "; ".join(
            f"{k} {v:,.1f} ({then[k]:g})" if isinstance(then.get(k), int | float) else f"{k} {v:,.1f}"
            for k, v in now.items()) + " img/s.")
    backends = {k: v for k, v in (r.get(K.IMAGES_PER_SEC_BACKENDS) or {}).items() if isinstance(v, int | float)}
    if backends:
        lines.append("Backends: " + "; ".join(f"{k} {v:,.1f}" for k, v in backends.items()) + " img/s.")
    for t in r.get(K.TARGETS) or []:
        if isinstance(t.get("ratio"), int | float):
            lines.append(f"{t['target']}: {t['ratio']:.2f}× (target ≥ {t['minimum']}×, "
                         f"{'met' if t.get('met') else 'not met'}).")
    for impl, p90 in (r.get(K.SINGLE_STREAM_P90_MS) or {}).items():
        if isinstance(p90, int | float):
            lines.append(f"SingleStream p90 latency, {impl}: {p90:.1f} ms.")
    engines = {k: v for k, v in (r.get(K.ENGINES_SINGLE_STREAM_P90_MS) or {}).items() if isinstance(v, int | float)}
    if engines:
        offline = r.get(K.ENGINES_OFFLINE_IMAGES_PER_SEC) or {}
        lines.append("Other compilers (outputs checked against Keras'), SingleStream p90: " + "; ".join(
            f"{k} {v:.1f} ms" + (f", Offline {offline[k]:,.1f} img/s" if isinstance(offline.get(k), int | float)
                                 else "") for k, v in engines.items()) + ".")
    failed = [k for k, v in (r.get(K.ENGINES_STATUSES) or {}).items() if v == "error"]
    if failed:
        lines.append(f"Other compilers failed (an output check or an error; not quoted): {', '.join(failed)}.")
    if isinstance(r.get(K.ROOFLINE_LOST_MS), int | float):
        lines.append(f"Roofline: the profiled step's oneDNN primitives lose {r[K.ROOFLINE_LOST_MS]:.1f} ms per "
                     f"step against the measured ceilings (GEMM peak, triad bandwidth).")
    lines.append(f"{r.get(K.N_OK, 0)} of {r.get(K.N_ROWS, 0)} rows measured, {r.get(K.N_SKIPPED, 0)} skipped "
                 f"(no such device or backend here), {r.get(K.N_FAILED, 0)} failed.")
    if r.get(K.SCALING_EFFICIENCY) is not None:
        lines.append(f"Scale-out: {_ips(r.get(K.MULTIWORKER_IMAGES_PER_SEC))}, scaling efficiency "
                     f"{r[K.SCALING_EFFICIENCY]:.2f}.")
    return lines


def _convergence(r: dict[str, Any]) -> list[str]:
    acc = r.get("test_accuracy")
    return [f"{r.get('model')} on {r.get('data')}, {r.get('steps')} steps: test accuracy "
            f"{_pct(acc)}; verdict **{r.get('verdict')}**.", str(r.get("verdict_text") or "")]


def _compare(r: dict[str, Any]) -> list[str]:
    return [str(r.get("headline") or "")]


SUMMARIES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "00_environment": _environment, "01_model_selection": _selection, "02_op_extraction": _ops,
    "03_benchmarks": _benchmarks, "04_convergence": _convergence, compare.NOTEBOOK: _compare,
}


def summarize(notebook: str, results: dict[str, Any]) -> str | None:
    """The notebook's answer as Markdown sentences, or None for a notebook without a summary."""
    fn = SUMMARIES.get(notebook)
    if fn is None or not results:
        return None
    return " ".join(line for line in fn(results) if line)


def read_results(run_dir: Path, notebook: str) -> dict[str, Any]:
    try:
        return artifacts.read_json(run_dir / notebook / "results.json")
    except (OSError, ValueError):
        return {}


def headline_figures(run_dir: Path) -> dict[str, Any]:
    """The figures a list of runs shows: selected model, distinct ops of its training step, best img/s, MFU."""
    sel, ops, bench = (read_results(run_dir, n) for n in ("01_model_selection", "02_op_extraction", "03_benchmarks"))
    distinct = ops.get("distinct_opcodes") or {}
    focus = next(iter(ops.get("focus_opcodes") or {}), "")
    train = [n for label, n in distinct.items() if label.startswith(focus.split("/")[0] + "/train/")] if focus else []
    return {"selected model": sel.get("chosen_model"),
            "distinct ops (train)": (f"{min(train)}–{max(train)}" if len(set(train)) > 1 else str(train[0]))
            if train else None,
            "best img/s": _ips(bench[K.BEST_IMAGES_PER_SEC]) if bench.get(K.BEST_IMAGES_PER_SEC) else None,
            "MFU": _pct(bench.get(K.BEST_FP32_MFU)) if bench.get(K.BEST_FP32_MFU) is not None else None}


def write_run_page(run_dir: Path, prov: dict[str, Any]) -> Path:
    """``<run>/index.html``: the host, each notebook's summary and status, links to its reports and files."""
    cpu = prov.get("cpu") or {}
    git = prov.get("git") or {}
    sections = []
    for nb in prov.get("notebooks", []):
        name = nb["name"]
        text = summarize(name, read_results(run_dir, name)) or ""
        status = nb.get("status") or "?"
        took = f", {nb['seconds'] / 60:.1f} min" if nb.get("seconds") is not None else ""
        links = " · ".join(f'<a href="{href}">{label}</a>' for label, href in (
            ("report", f"{name}.report.html"), ("with code", f"{name}.html"), ("files", f"{name}/"),
            ("log", f"{name}.log")) if (run_dir / href).exists())
        error = f'<p class="failed">{html.escape(nb.get("error") or "")}</p>' if nb.get("error") else ""
        sections.append(f'<section><h2>{html.escape(name)} <small class="{html.escape(status)}">'
                        f"{html.escape(status)}{took}</small></h2>{error}<p>{_md_inline(text)}</p>"
                        f"<p><small>{links}</small></p></section>")
    figures = headline_figures(run_dir)
    facts = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                    for k, v in figures.items() if v is not None)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(run_dir.name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; line-height: 1.45; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: .3em .6em; text-align: left; }}
.ok {{ color: #17692b; }} .failed, .interrupted {{ color: #b00020; font-weight: bold; }}
.running, .pending {{ color: #8a6d00; }} h2 small {{ font-weight: normal; font-size: .7em; }}
</style></head><body>
<h1>Run {html.escape(run_dir.name)}</h1>
<p>{html.escape(prov.get("description") or "")} · status <b class="{html.escape(prov.get("status") or "")}">
{html.escape(prov.get("status") or "?")}</b> · commit <code>{html.escape((git.get("commit") or "?")[:10])}
{"+dirty" if git.get("dirty") else ""}</code> · started {html.escape(prov.get("started_at") or "?")} UTC</p>
<p>Host {html.escape(prov.get("host") or "?")}: {html.escape(cpu.get("model") or "?")},
{html.escape(str(cpu.get("available_cpus") or "?"))} CPUs available, {len(prov.get("gpus") or [])} GPU(s).
<a href="provenance.json">provenance</a> · <a href="params.yaml">params</a></p>
{"<table>" + facts + "</table>" if facts else ""}
{"".join(sections)}
</body></html>
"""
    path = run_dir / "index.html"
    path.write_text(page)
    return path


def _md_inline(text: str) -> str:
    """The summaries' little Markdown (``**bold**``, ``code``) as HTML, everything else escaped."""
    import re

    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)
