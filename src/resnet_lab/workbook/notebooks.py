"""Every notebook the runner knows, in one table: what checks its parameters, what says its answer, what it adds
to the list of runs.

The runner calls :func:`check` with a notebook's full parameters (its cell's defaults with the params file's
values over them) before any notebook starts: a negative batch size, an unknown model or a precision the
notebook does not know is one :class:`~resnet_lab.core.errors.UsageError` line, in milliseconds, before a run
folder exists. After it ran, its ``results.json`` becomes its summary (:func:`resnet_lab.workbook.summary.summarize`:
a few sentences at the top of its reports and on the run page) and the headline figures of a list of runs
(:func:`resnet_lab.workbook.summary.headline_figures`). A notebook not listed here gets the runner's type
checks only, and no summary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from resnet_lab import models
from resnet_lab.bench import plan
from resnet_lab.bench.config import load_2017_table
from resnet_lab.bench.timing import DEFAULT_TIMEOUT_S, check_timing
from resnet_lab.ceilings import peak
from resnet_lab.convergence import train
from resnet_lab.core.choices import IRS, check_choice, check_choices, check_int, check_positive
from resnet_lab.core.errors import UsageError
from resnet_lab.hlo import capture
from resnet_lab.report.speed_results import Key as K  # notebook 03's results.json keys
from resnet_lab.runs import budget, compare
from resnet_lab.selection import criteria
from resnet_lab.workbook import display


@dataclasses.dataclass(frozen=True)
class Notebook:
    """One notebook of ``notebooks/``, by what the runner asks of it."""

    name: str  # its file's stem, e.g. "00_environment"
    check: Callable[[dict[str, Any]], None]  # its full parameters -> UsageError (one line) where it cannot run
    summary: Callable[[dict[str, Any]], list[str]]  # its results.json -> the sentences of its answer
    figures: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # its results.json -> figures of a run list


# the tables' formats (workbook.display), with the unit written out and a word where a number is missing
def _gflops(v: Any) -> str:
    return "-" if display.missing(v) else f"{display.FORMATS['GFLOP/s'](v)} GFLOP/s"


def _pct(v: Any) -> str:
    return "not available" if display.missing(v) else display.percent(v)


def _ips(v: Any) -> str:
    return "-" if display.missing(v) else f"{display.FORMATS['img/s'](v)} img/s"


# ------------------------------------------------------------------------------ 00 environment
def _check_environment(p: dict[str, Any]) -> None:
    peak.validate(p["dtypes"], peak.LIBRARIES, p["gemm_sizes"], p["gemm_repeats"], p.get("triad_mib", 256))


def _summarize_environment(r: dict[str, Any]) -> list[str]:
    peaks = ", ".join(f"{k} {_gflops(v)}" for k, v in (r.get("peak_gflops") or {}).items())
    gpus = r.get("gpus") or 0
    return [f"Host: {r.get('cpu_model') or 'unknown CPU'}, {r.get('available_cpus')} CPUs available, "
            f"oneDNN {'on' if r.get('onednn_active') else 'off'}, {gpus} GPU{'s' if gpus != 1 else ''}.",
            f"Measured GEMM peak (what MFU divides by): {peaks or 'none'}."
            + (f" Memory bandwidth (triad): {r['bandwidth_gbps']:,.1f} GB/s." if r.get("bandwidth_gbps") else "")]


ENVIRONMENT = Notebook("00_environment", _check_environment, _summarize_environment)


# -------------------------------------------------------------------------- 01 model selection
def _check_selection(p: dict[str, Any]) -> None:
    criteria.validate_weights({c: p[f"weight_{c}"] for c in criteria.CRITERIA if f"weight_{c}" in p})
    criteria.validate_op_stages(p["op_stages"])
    for name in ("op_batch_size", "bench_batch_size", "bench_steps"):
        check_int(name, p[name], 1)
    for name in ("op_image_size", "bench_image_size"):
        check_int(name, p[name], 0)
    check_timing(p["bench_steps"], 1, p["bench_min_time_s"], max(120.0, p["bench_min_time_s"]), DEFAULT_TIMEOUT_S)


def _summarize_selection(r: dict[str, Any]) -> list[str]:
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


def _figures_selection(r: dict[str, Any]) -> dict[str, Any]:
    return {"selected model": r.get("chosen_model")}


SELECTION = Notebook("01_model_selection", _check_selection, _summarize_selection, _figures_selection)


# ---------------------------------------------------------------------------- 02 op extraction
def _check_ops(p: dict[str, Any]) -> None:
    image_size = p["image_size"] or None
    for backend in p["backends"]:
        for platform in p["platforms"]:
            for model in dict.fromkeys([p["focus_model"], *p["models"]]):
                capture.check_request(model, modes=p["modes"], stages=p["stages"], platform=platform,
                                      batch_size=p["batch_size"], image_size=image_size,
                                      precision=p["precision"], backend=backend)
    check_choices("irs", p["irs"], IRS)
    if "stablehlo" in p["irs"] and "jax" not in p["backends"]:
        raise UsageError("irs: stablehlo is read from the JAX steps' lowering; add 'jax' to backends")
    check_choice("model_2017", p["model_2017"], dict.fromkeys([p["focus_model"], *p["models"]]))
    check_int("dump_batch_size", p["dump_batch_size"], 1)
    models.check_input_shape(p["model_2017"], (p["dump_image_size"],) * 2 + (3,))  # the fit dump's model
    check_int("iree_train_image_size", p["iree_train_image_size"], 0)
    if p["iree_train_image_size"]:
        models.check_input_shape(p["focus_model"], (p["iree_train_image_size"],) * 2 + (3,))


def _summarize_ops(r: dict[str, Any]) -> list[str]:
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
    captured = sorted({label.split("/")[0] for label in distinct})
    lines.append(f"{len(distinct)} steps captured across {len(captured)} model(s)"
                 + (f"; {len(r['skipped'])} skipped ({_reasons(r['skipped'])})." if r.get("skipped") else "."))
    return lines


def _reasons(skipped: list[dict[str, Any]]) -> str:
    # the reason's first clause ("the 'gpu' platform needs a GPU"), its details stay in the tables
    reasons = sorted({str(s.get("skipped") or s.get("reason") or "skipped").split(":")[0] for s in skipped})
    return "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")


def _figures_ops(r: dict[str, Any]) -> dict[str, Any]:
    distinct = r.get("distinct_opcodes") or {}
    focus = next(iter(r.get("focus_opcodes") or {}), "")
    steps = [n for label, n in distinct.items() if label.startswith(focus.split("/")[0] + "/train/")] if focus else []
    return {"distinct ops (train)": (f"{min(steps)}–{max(steps)}" if len(set(steps)) > 1 else str(steps[0]))
            if steps else None}


OPS = Notebook("02_op_extraction", _check_ops, _summarize_ops, _figures_ops)


# ------------------------------------------------------------------------------- 03 benchmarks
def _check_benchmarks(p: dict[str, Any]) -> None:
    built = plan.plan(p)  # the notebook's own configurations, every one validated
    check_positive("report_budget_s", p.get("report_budget_s"), optional=True, unit="seconds")
    install = p.get("install_s")
    if install is not None and (isinstance(install, bool) or not isinstance(install, int | float) or install < 0):
        raise UsageError(f"install_s: {install!r} is not a number of seconds >= 0")
    if p.get("section_shares") is not None:
        budget.check_shares(p["section_shares"], list(built.sections))


def _summarize_benchmarks(r: dict[str, Any]) -> list[str]:
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
        lines.append("Engines served as documented (fp32, checked against Keras'), SingleStream p90: " + "; ".join(
            f"{k} {v:.1f} ms" + (f", Offline {offline[k]:,.1f} img/s" if isinstance(offline.get(k), int | float)
                                 else "") for k, v in engines.items()) + ".")
    failed = [k for k, v in (r.get(K.ENGINES_STATUSES) or {}).items() if v == "error"]
    if failed:
        lines.append(f"Engine rows failed (an output check or an error; not quoted): {', '.join(failed)}.")
    bf16 = {k: v for k, v in (r.get(K.BF16_SINGLE_STREAM_P90_MS) or {}).items() if isinstance(v, int | float)}
    if bf16:
        lines.append("bf16 (agreeing with fp32 on photographs), SingleStream p90: "
                     + "; ".join(f"{k} {v:.1f} ms" for k, v in bf16.items()) + ".")
    if isinstance(r.get(K.ROOFLINE_LOST_MS), int | float):
        lines.append(f"Roofline: the profiled step's oneDNN primitives lose {r[K.ROOFLINE_LOST_MS]:.1f} ms per "
                     f"step against the measured ceilings (GEMM peak, triad bandwidth).")
    lines.append(f"{r.get(K.N_OK, 0)} of {r.get(K.N_ROWS, 0)} rows measured, {r.get(K.N_SKIPPED, 0)} skipped "
                 f"(no such device or backend here, a precision this CPU would emulate, or over the budget: 03 says "
                 f"which), {r.get(K.N_FAILED, 0)} failed.")
    if r.get(K.SCALING_EFFICIENCY) is not None:
        lines.append(f"Scale-out: {_ips(r.get(K.MULTIWORKER_IMAGES_PER_SEC))}, scaling efficiency "
                     f"{r[K.SCALING_EFFICIENCY]:.2f}.")
    return lines


def _figures_benchmarks(r: dict[str, Any]) -> dict[str, Any]:
    return {"best img/s": _ips(r[K.BEST_IMAGES_PER_SEC]) if r.get(K.BEST_IMAGES_PER_SEC) else None,
            "MFU": _pct(r.get(K.BEST_FP32_MFU)) if r.get(K.BEST_FP32_MFU) is not None else None}


BENCHMARKS = Notebook("03_benchmarks", _check_benchmarks, _summarize_benchmarks, _figures_benchmarks)


# ------------------------------------------------------------------------------ 04 convergence
def _check_convergence(p: dict[str, Any]) -> None:
    train.validate(train.TrainConfig.from_params(p), download=True)


def _summarize_convergence(r: dict[str, Any]) -> list[str]:
    acc = r.get("test_accuracy")
    return [f"{r.get('model')} on {r.get('data')}, {r.get('steps')} steps: test accuracy "
            f"{_pct(acc)}; verdict **{r.get('verdict')}**.", str(r.get("verdict_text") or "")]


CONVERGENCE = Notebook("04_convergence", _check_convergence, _summarize_convergence)


# ---------------------------------------------------------------------------------- 05 compare
def _check_compare(p: dict[str, Any]) -> None:
    compare.check_threshold(p["threshold_pct"], "threshold_pct")


def _summarize_compare(r: dict[str, Any]) -> list[str]:
    return [str(r.get("headline") or "")]


COMPARE = Notebook(compare.NOTEBOOK, _check_compare, _summarize_compare)


# ------------------------------------------------------------------------------------ the registry
NOTEBOOKS: dict[str, Notebook] = {nb.name: nb for nb in (ENVIRONMENT, SELECTION, OPS, BENCHMARKS, CONVERGENCE, COMPARE)}


def check(notebook: str, params: dict[str, Any]) -> None:
    """Raise UsageError (one line) when ``params`` cannot run ``notebook``; notebooks not listed pass."""
    nb = NOTEBOOKS.get(notebook)
    if nb is not None:
        nb.check(params)
