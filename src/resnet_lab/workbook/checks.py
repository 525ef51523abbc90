"""Each notebook's parameters checked with the package's own validators, before any notebook starts.

The runner calls :func:`check` with a notebook's full parameters (its cell's defaults with the params file's
values over them): a negative batch size, an unknown model or a precision the notebook does not know is one
:class:`~resnet_lab.core.errors.UsageError` line, in milliseconds, before a run folder exists. A notebook
without an entry here gets the runner's type checks only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from resnet_lab import models
from resnet_lab.bench import plan
from resnet_lab.bench.timing import DEFAULT_TIMEOUT_S, check_timing
from resnet_lab.ceilings import peak
from resnet_lab.convergence import train
from resnet_lab.core.choices import IRS, check_choice, check_choices, check_int
from resnet_lab.core.errors import UsageError
from resnet_lab.hlo import capture
from resnet_lab.runs import compare
from resnet_lab.selection import criteria


def _environment(p: dict[str, Any]) -> None:
    peak.validate(p["dtypes"], peak.LIBRARIES, p["gemm_sizes"], p["gemm_repeats"], p.get("triad_mib", 256))


def _selection(p: dict[str, Any]) -> None:
    criteria.validate_weights({c: p[f"weight_{c}"] for c in criteria.CRITERIA if f"weight_{c}" in p})
    criteria.validate_op_stages(p["op_stages"])
    for name in ("op_batch_size", "bench_batch_size", "bench_steps"):
        check_int(name, p[name], 1)
    for name in ("op_image_size", "bench_image_size"):
        check_int(name, p[name], 0)
    check_timing(p["bench_steps"], 1, p["bench_min_time_s"], max(120.0, p["bench_min_time_s"]), DEFAULT_TIMEOUT_S)


def _op_extraction(p: dict[str, Any]) -> None:
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


def _benchmarks(p: dict[str, Any]) -> None:
    plan.plan(p)  # the notebook's own configurations, every one validated


def _convergence(p: dict[str, Any]) -> None:
    train.validate(train.TrainConfig.from_params(p), download=True)


def _compare(p: dict[str, Any]) -> None:
    compare.check_threshold(p["threshold_pct"], "threshold_pct")


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "00_environment": _environment,
    "01_model_selection": _selection,
    "02_op_extraction": _op_extraction,
    "03_benchmarks": _benchmarks,
    "04_convergence": _convergence,
    "05_compare": _compare,
}


def check(notebook: str, params: dict[str, Any]) -> None:
    """Raise UsageError (one line) when ``params`` cannot run ``notebook``; notebooks not listed pass."""
    fn = CHECKS.get(notebook)
    if fn is not None:
        fn(params)
