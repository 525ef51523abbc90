"""What notebook 03 records in ``results.json``: its keys (:class:`Key`) and the one function that writes
them from the sections' rows (:func:`results`).

The runner's summaries (:mod:`resnet_lab.workbook.summary`), the run page and the tests read these keys;
they are named here only. Every figure in the record comes from a row with a speed
(:func:`resnet_lab.bench.identity.is_measured`: ok, or short with the steps it did time); a failed, skipped or
NaN row gives its status and no number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from resnet_lab.bench.identity import is_measured
from resnet_lab.bench.sections import OFFLINE, SINGLE_STREAM
from resnet_lab.report import native, speed

Rows = Sequence[dict[str, Any]]


class Key(StrEnum):
    """The keys of 03's ``results.json`` (a StrEnum: each is its own string, ``Key.N_OK == "n_ok"``)."""

    # speed.headline: counts over every measured section, the best configurations
    N_ROWS = "n_rows"
    N_OK = "n_ok"
    N_FAILED = "n_failed"
    N_SKIPPED = "n_skipped"
    BEST_CONFIG = "best_config"
    BEST_IMAGES_PER_SEC = "best_images_per_sec"
    BEST_MFU = "best_mfu"
    BEST_FP32_CONFIG = "best_fp32_config"
    BEST_FP32_IMAGES_PER_SEC = "best_fp32_images_per_sec"
    BEST_FP32_MFU = "best_fp32_mfu"
    BEST_FP32_CPU_UTIL = "best_fp32_cpu_util"
    # the 2017 rows, by label
    STATUSES_2017 = "statuses_2017"
    IMAGES_PER_SEC_2017 = "images_per_sec_2017"
    PEAK_GFLOPS = "peak_gflops"  # the GEMM peak MFU divides by, per dtype (None: not measured)
    # the backends, by "<label> <mode>"
    IMAGES_PER_SEC_BACKENDS = "images_per_sec_backends"
    STATUSES_BACKENDS = "statuses_backends"
    # TensorFlow against native PyTorch: the speed targets, images/sec by "<label> <precision>"
    TARGETS = "targets"
    IMAGES_PER_SEC_NATIVE = "images_per_sec_native"
    # the MLPerf scenarios, by implementation
    SINGLE_STREAM_P90_MS = "single_stream_p90_ms"
    OFFLINE_IMAGES_PER_SEC = "offline_images_per_sec"
    # the other compilers (IREE, ONNX Runtime, OpenVINO), by implementation: the same two figures, each engine's
    # compile at batch 1 (s) and its output check against Keras' (largest difference over the largest logit)
    ENGINES_SINGLE_STREAM_P90_MS = "engines_single_stream_p90_ms"
    ENGINES_OFFLINE_IMAGES_PER_SEC = "engines_offline_images_per_sec"
    ENGINES_COMPILE_S = "engines_compile_s"
    ENGINES_CHECK_MAX_REL = "engines_check_max_rel"
    ENGINES_STATUSES = "engines_statuses"
    # every served row at bf16 (frameworks and engines), by implementation; each reduced-precision or engine row's
    # agreement with fp32 on photographs (largest relative logit difference, top-1 agreement) by
    # "<label> <precision> b<batch>"; the knob sweep's p50 (ms) by its label
    BF16_SINGLE_STREAM_P90_MS = "bf16_single_stream_p90_ms"
    BF16_OFFLINE_IMAGES_PER_SEC = "bf16_offline_images_per_sec"
    AGREEMENT = "agreement"
    KNOBS_P50_MS = "knobs_p50_ms"
    # layertime: each engine's per-layer profile, batch 1
    LAYERS_ATTRIBUTED_MS = "layers_attributed_ms"
    LAYERS_WEAKEST = "layers_weakest"
    # the profiled step
    ROOFLINE_LOST_MS = "roofline_lost_ms"
    PROFILE_CONV_SHARE = "profile_conv_share"
    PROFILE_CONV_GFLOPS = "profile_conv_gflops"
    # the scale-out row
    MULTIWORKER_STATUS = "multiworker_status"
    MULTIWORKER_IMAGES_PER_SEC = "multiworker_images_per_sec"
    SCALING_EFFICIENCY = "scaling_efficiency"


def _figure(row: dict[str, Any], key: str) -> Any:
    return row.get(key) if is_measured(row) else None


def _first(rows: Rows) -> dict[str, Any]:
    return rows[0] if rows else {}


def _scenario(row: dict[str, Any]) -> tuple[str, str]:
    """(scenario, implementation) of an MLPerf row, from its label ("SingleStream · TensorFlow")."""
    scenario, _, impl = (row.get("label") or "").partition(" · ")
    return scenario, impl


def _single_stream_p90_ms(rows: Rows) -> dict[str, float]:
    out = {}
    for r in rows:
        scenario, impl = _scenario(r)
        p90 = r.get("step_time_p90")
        if scenario == SINGLE_STREAM and is_measured(r) and isinstance(p90, int | float) and math.isfinite(p90):
            out[impl] = 1e3 * p90
    return out


def _best_offline(rows: Rows) -> dict[str, float]:
    """The best Offline images/sec of each implementation (over its batch sizes)."""
    out: dict[str, float] = {}
    for r in rows:
        scenario, impl = _scenario(r)
        if scenario == OFFLINE and is_measured(r):
            out[impl] = max(out.get(impl, r["images_per_sec"]), r["images_per_sec"])
    return out


def _roofline_lost_ms(profile: Rows, peak: dict[str, Any] | None) -> float | None:
    roof = speed.profile_roofline(profile, peak)
    return None if roof is None else float(roof["lost_ms_per_step"].clip(lower=0).sum())


def results(*, model: str, peak: dict[str, Any] | None, table_2017: Rows, sweeps: Rows, backends: Rows,
            versus: Rows, mlperf: Rows, profile: Rows, multiworker: Rows, engines: Rows = (),
            knobs: Rows = (), layers: Mapping[str, Any] | None = None,
            layers_weakest: Sequence[str] = ()) -> dict[str, Any]:
    """Notebook 03's record, from each section's rows (the names of :class:`resnet_lab.bench.plan.Plan`,
    ``multiworker`` the scale-out rows) and the GEMM peak; ``model``: the model "best" is picked among;
    ``layers``: the per-layer records by engine (:func:`resnet_lab.layers.run.profile_many`), ``layers_weakest``
    the sentences :func:`resnet_lab.layers.compare.weakest` wrote of them.
    Keys are plain strings, in :class:`Key`'s order."""
    profiled = _first(profile)
    scale_out = _first(multiworker)
    every = [*table_2017, *sweeps, *backends, *versus, *mlperf, *engines, *profile]
    served_bf16 = [r for r in (*mlperf, *engines) if r.get("precision") == "bf16"]
    mlperf, engines = ([r for r in rows if (r.get("precision") or "fp32") == "fp32"] for rows in (mlperf, engines))
    batch1 = [r for r in engines if _scenario(r)[0] == SINGLE_STREAM]
    record = {
        **{Key(k): v for k, v in speed.headline(every, model=model).items()},  # Key names each
        Key.STATUSES_2017: {r["label"]: r["status"] for r in table_2017},
        Key.IMAGES_PER_SEC_2017: {r["label"]: _figure(r, "images_per_sec") for r in table_2017},
        Key.PEAK_GFLOPS: peak["peak_gflops"] if peak else None,
        Key.IMAGES_PER_SEC_BACKENDS: {f"{r['label']} {r['mode']}": _figure(r, "images_per_sec") for r in backends},
        Key.STATUSES_BACKENDS: {f"{r['label']} {r['mode']}": r["status"] for r in backends},
        Key.TARGETS: native.targets([r for r in versus if is_measured(r)]),
        Key.IMAGES_PER_SEC_NATIVE: {f"{r['label']} {r['precision']}": _figure(r, "images_per_sec") for r in versus},
        Key.SINGLE_STREAM_P90_MS: _single_stream_p90_ms(mlperf),
        Key.OFFLINE_IMAGES_PER_SEC: _best_offline(mlperf),
        Key.ENGINES_SINGLE_STREAM_P90_MS: _single_stream_p90_ms(engines),
        Key.ENGINES_OFFLINE_IMAGES_PER_SEC: _best_offline(engines),
        Key.ENGINES_COMPILE_S: {_scenario(r)[1]: r.get("compile_s") for r in batch1 if r.get("compile_s") is not None},
        Key.ENGINES_CHECK_MAX_REL: {f"{r['label']} b{r['batch_size']}": r.get("check_max_rel") for r in engines},
        Key.ENGINES_STATUSES: {f"{r['label']} b{r['batch_size']}": r["status"] for r in engines},
        Key.BF16_SINGLE_STREAM_P90_MS: _single_stream_p90_ms(served_bf16),
        Key.BF16_OFFLINE_IMAGES_PER_SEC: _best_offline(served_bf16),
        Key.AGREEMENT: {f"{r['label']} {r.get('precision')} b{r['batch_size']}":
                        {"max_rel": r.get("agree_max_rel"), "top1": r.get("agree_top1"), "ok": r.get("agree_ok")}
                        for r in (*served_bf16, *engines) if r.get("agree_ok") is not None},
        Key.KNOBS_P50_MS: {r["label"]: 1e3 * r["step_time_p50"] for r in knobs if is_measured(r)},
        Key.LAYERS_ATTRIBUTED_MS: {name: {"step": r["step_ms"], "attributed": r["attributed_ms"],
                                          "unattributed": r["unattributed_ms"]} for name, r in (layers or {}).items()},
        Key.LAYERS_WEAKEST: list(layers_weakest),
        Key.ROOFLINE_LOST_MS: _roofline_lost_ms(profile, peak),
        Key.PROFILE_CONV_SHARE: _figure(profiled, "conv_share"),
        Key.PROFILE_CONV_GFLOPS: _figure(profiled, "conv_gflops"),
        Key.MULTIWORKER_STATUS: scale_out.get("status"),
        Key.MULTIWORKER_IMAGES_PER_SEC: _figure(scale_out, "images_per_sec"),
        Key.SCALING_EFFICIENCY: _figure(scale_out, "scaling_efficiency"),
    }
    return {key.value: record[key] for key in Key}

