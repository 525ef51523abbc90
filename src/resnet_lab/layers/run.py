"""Profiling a model per layer on one backend or several, each in its own process (:mod:`resnet_lab.layers.engines`,
one module per engine), attributed to the Keras layers (:mod:`resnet_lab.layers.attribute`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from resnet_lab import export
from resnet_lab.bench import launcher
from resnet_lab.bench.config import BenchConfig, validate
from resnet_lab.bench.timing import DEFAULT_TIMEOUT_S, PROFILE_STEPS
from resnet_lab.core import child, requirements
from resnet_lab.core.choices import (
    COMPILED_ROWS,
    ENGINES,
    FRAMEWORKS,
    ROW_KEYS,
    ROW_NAMES,
    check_choices,
    check_int,
)
from resnet_lab.core.errors import UsageError
from resnet_lab.layers import attribute, costs, engines
from resnet_lab.layers.engines import CHILD
from resnet_lab.models import specs

TRAIN_ROWS = (*FRAMEWORKS, *COMPILED_ROWS)  # training: the frameworks' steps only (an export is an inference graph)


def row_config(model: str, backend: str, batch_size: int, image_size: int, precision: str,
               threads: int | None = None, mode: str = "infer") -> BenchConfig:
    """The row ``bench`` would time for a framework's row key (``torch:jit``: native PyTorch compiled;
    ``tensorflow:jit``: TensorFlow under ``jit_compile=True``), as its engine module says (``row_fields``):
    inference as 03 serves it, training as 03's training step."""
    return validate(BenchConfig(model=model, image_size=image_size, mode=mode, batch_size=batch_size,
                                precision=precision, intra_op=threads, **engines.module(backend).row_fields(mode)))


def profile(model: str, backend: str, batch_size: int = 1, image_size: int | None = None, *,
            precision: str = "fp32", recipe: str = "", steps: int | None = None, threads: int | None = None,
            peak_doc: dict[str, Any] | None = None, export_dir: str | None = None,
            timeout_s: float = DEFAULT_TIMEOUT_S, mode: str = "infer") -> dict[str, Any]:
    """The per-layer record of ``model``'s inference (or training step, on a framework) on ``backend``
    (:func:`resnet_lab.layers.attribute.attribute`), with the engine's compiler line and recipe."""
    size = image_size or specs.get_spec(model).input_size
    # as many untimed inferences as SingleStream runs first (10): 03's TensorFlow profile after 3 read a 51 ms step,
    # its SingleStream row (after 10) 43 ms. A training step: one, as 03's training rows
    steps = steps or PROFILE_STEPS[mode]
    request: dict[str, Any] = {"steps": steps, "warmup": max(10, steps // 4) if mode == "infer" else 1}
    if mode == "train" and backend in ENGINES:
        raise UsageError(f"--mode train profiles a framework's step ({', '.join(FRAMEWORKS)}); {backend} runs the "
                         "export, an inference graph")
    runs = engines.module(backend)
    if runs.EXPORT is None:  # a framework: the row bench would time
        cfg = row_config(model, backend, batch_size, size, precision, threads, mode)
        outcome = child.run(CHILD, {**request, "config": cfg.to_dict()}, timeout_s=timeout_s,
                            env=launcher.worker_env(cfg))
    else:
        where = export.ensure(export_dir, model, size, [batch_size], onnx=runs.EXPORT == "onnx",
                              stablehlo=[batch_size] if runs.EXPORT == "stablehlo" else False, timeout_s=timeout_s)
        request.update({"engine": backend, "folder": str(where), "batch_size": batch_size, "threads": threads,
                        "recipe": recipe, "precision": precision})
        outcome = child.run(CHILD, request, timeout_s=timeout_s, env=engines.engine_env())
    if not outcome.ok:
        raise RuntimeError(outcome.reason(f"profile of {model} on {backend}"))
    got = outcome.reply
    peak_value = (peak_doc or {}).get("peak_gflops", {}).get("bf16" if precision == "bf16" else "fp32")
    bandwidth = (peak_doc or {}).get("bandwidth_gbps")
    layer_costs = costs.layer_costs(model, size, batch_size, dtype_bytes=2 if precision == "bf16" else 4, mode=mode)
    what = "inferences" if mode == "infer" else "training steps"
    method = f"{getattr(runs, 'PROFILER', got['compiler'])}, {got['steps']} {what}"
    if runs.EXPORT is not None:  # an engine: how it compiled the export
        method += f"; {got['compiler']}"
    record = attribute.attribute(got["kernels"], layer_costs, step_ms=got["step_ms"], steps=got["steps"],
                                 peak_gflops=peak_value, bandwidth_gbs=bandwidth, method=method)
    return {"model": model, "backend": backend, "mode": mode, "batch_size": batch_size, "image_size": size,
            "precision": precision, "recipe": got["recipe"], "profiled_step_ms": got["profiled_step_ms"], **record}




def profile_many(model: str, backends: Sequence[str], batch_size: int = 1, image_size: int | None = None, *,
                 steps: int | None = None, peak_doc: dict[str, Any] | None = None, export_dir: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, mode: str = "infer",
                 ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each of ``backends`` profiled in turn: (``{display name: record}``, ``{display name: why it was skipped}``
    for a backend not installed or whose profile failed: its first error line)."""
    records: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for backend in backends:
        name = ROW_NAMES.get(backend, backend)
        if missing := requirements.missing(backend.partition(":")[0]):
            skipped[name] = missing
            continue
        t0 = time.perf_counter()
        try:
            records[name] = profile(model, backend, batch_size, image_size, steps=steps, peak_doc=peak_doc,
                                    export_dir=export_dir, timeout_s=timeout_s, mode=mode)
            records[name]["wall_s"] = time.perf_counter() - t0  # the whole profile: process, build, both phases
        except RuntimeError as exc:
            skipped[name] = str(exc).splitlines()[0]
    return records, skipped


@dataclass(frozen=True)
class LayerPlan:
    """Notebook 03's per-layer section: which backends, at which size, how many profiled steps; the frameworks whose
    training step is profiled too, at which batch (checked before any section runs; no backends: skipped)."""

    model: str
    image_size: int
    backends: tuple[str, ...]
    steps: int
    batch_size: int = 1
    train_backends: tuple[str, ...] = ()
    train_batch_size: int = 32
    train_steps: int = 2

    def run(self, peak_doc: dict[str, Any] | None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        return profile_many(self.model, self.backends, self.batch_size, self.image_size, steps=self.steps,
                            peak_doc=peak_doc)

    def run_train(self, peak_doc: dict[str, Any] | None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        return profile_many(self.model, self.train_backends, self.train_batch_size, self.image_size,
                            steps=self.train_steps, peak_doc=peak_doc, mode="train")

    def train_costs(self) -> list[dict[str, Any]]:
        return costs.layer_costs(self.model, self.image_size, self.train_batch_size, mode="train")


def plan(model: str, image_size: int | None, backends: Sequence[str], steps: int, train_backends: Sequence[str] = (),
         train_batch_size: int = 32, train_steps: int = 2, batch_size: int = 1) -> LayerPlan:
    """The section's plan (inference at ``batch_size``: 1, SingleStream's, or the Offline batch), or one line naming
    the bad value."""
    check_choices("layer_backends", backends, ROW_KEYS)
    check_int("layer_steps", steps, 1)
    check_int("layer_batch_size", batch_size, 1)
    check_choices("layer_train_backends", train_backends, TRAIN_ROWS)
    check_int("layer_train_batch_size", train_batch_size, 1)
    check_int("layer_train_steps", train_steps, 1)
    spec = specs.zoo_spec(model, "a per-layer profile") if backends or train_backends else specs.get_spec(model)
    return LayerPlan(model, image_size or spec.input_size, tuple(backends), steps, batch_size, tuple(train_backends),
                     train_batch_size, train_steps)
