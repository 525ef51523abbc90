"""Profiling a model per layer on one backend or several, each in its own process
(:mod:`resnet_lab.layers.profile_child`), attributed to the Keras layers (:mod:`resnet_lab.layers.attribute`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from resnet_lab import export
from resnet_lab.bench import launcher
from resnet_lab.bench.config import BenchConfig, validate
from resnet_lab.bench.sections import served
from resnet_lab.core import child, requirements
from resnet_lab.core.choices import check_choices, check_int
from resnet_lab.core.errors import UsageError
from resnet_lab.layers import attribute, costs
from resnet_lab.layers.profile_child import CHILD
from resnet_lab.models import specs

ENGINES = ("iree", "onnxruntime", "openvino")  # the engines whose profiles name the export's nodes or locations
FRAMEWORKS = ("tensorflow", "torch", "jax")  # the frameworks whose profiles name the model's own layers
BACKENDS = (*FRAMEWORKS, *ENGINES)
COMPILED = "torch:jit"  # native PyTorch under torch.compile (TorchInductor): `--backend torch --xla jit`
TF_XLA = "tensorflow:jit"  # TensorFlow's step under jit_compile=True (XLA:CPU): `--backend tensorflow --xla jit`
ROWS = (*FRAMEWORKS, COMPILED, TF_XLA, *ENGINES)  # what a plan may list: a backend, or a framework's compiled row
PROFILERS = {"iree": "IREE's HAL profiling (iree-benchmark-module --device_profiling_mode=host-execution, "
                     "iree-profile's dispatch events; each call site's location from the HAL phase)",
             "onnxruntime": "ONNX Runtime's profiler (enable_profiling, per-node kernel time)",
             "openvino": "OpenVINO's performance counters (PERF_COUNT, per executed node)"}
NAMES = {"tensorflow": "TensorFlow", TF_XLA: "TensorFlow (XLA)", "torch": "native PyTorch (eager)",
         COMPILED: "native PyTorch (Inductor)",
         "jax": "JAX (jit)", "iree": "IREE",
         "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}
MODES = ("infer", "train")  # training: the frameworks' steps only (an engine's export is an inference graph)


IMPL = {"torch": "native", "tensorflow": "keras", "jax": "keras"}
XLA = {"torch": ("off", "jit"), "tensorflow": ("off", "jit"), "jax": ("jit",)}  # each framework's compilers


def row_key(backend: str, xla: str | None = None) -> str:
    """A plan's name of the row ``--backend backend --xla xla`` profiles: ``torch:jit`` for compiled PyTorch,
    ``tensorflow:jit`` for TensorFlow under XLA."""
    return f"{backend}:jit" if xla == "jit" and backend in ("torch", "tensorflow") else backend


def row_config(model: str, backend: str, batch_size: int, image_size: int, precision: str,
               threads: int | None = None, mode: str = "infer") -> BenchConfig:
    """The row ``bench`` would time for a framework (``torch:jit``: native PyTorch compiled; ``tensorflow:jit``:
    TensorFlow under ``jit_compile=True``). Inference: TensorFlow served as 03 serves it (a graph, batch norms
    folded, :data:`resnet_lab.bench.sections.TF_INFERENCE`; under XLA, that row's other fields kept); native
    PyTorch as 03's served row (``torch:jit``: TorchInductor with freezing) or that row eager; JAX under
    ``jax.jit``. Training: 03's training step on each (TensorFlow's graph with oneDNN, native PyTorch eager or
    compiled, JAX jit)."""
    framework, _, compiled = backend.partition(":")  # torch:jit -> torch, compiled
    if mode == "train":
        fields: dict[str, Any] = {"tensorflow": {"backend": "tensorflow"}, "jax": {"backend": "jax", "xla": "jit"},
                                  "torch": {"backend": "torch", "impl": "native"}}[framework]
    elif framework == "jax":
        fields = {"backend": "jax", "xla": "jit"}
    elif framework == "tensorflow":
        fields = served("TensorFlow")
    else:
        fields = {**served("native PyTorch"), "xla": "off"}
    if compiled:  # the row's other fields kept (PyTorch's served row: its freezing)
        fields = {**fields, "xla": "jit"}
    return validate(BenchConfig(model=model, image_size=image_size, mode=mode, batch_size=batch_size,
                                precision=precision, intra_op=threads, **fields))


def profile(model: str, backend: str, batch_size: int = 1, image_size: int | None = None, *,
            precision: str = "fp32", recipe: str = "", steps: int = 20, threads: int | None = None,
            peak_doc: dict[str, Any] | None = None, export_dir: str | None = None,
            timeout_s: float = 900.0, mode: str = "infer") -> dict[str, Any]:
    """The per-layer record of ``model``'s inference (or training step, on a framework) on ``backend``
    (:func:`resnet_lab.layers.attribute.attribute`), with the engine's compiler line and recipe."""
    size = image_size or specs.get_spec(model).input_size
    # as many untimed inferences as SingleStream runs first (10): 03's TensorFlow profile after 3 read a 51 ms step,
    # its SingleStream row (after 10) 43 ms. A training step: one, as 03's training rows
    request: dict[str, Any] = {"steps": steps, "warmup": max(10, steps // 4) if mode == "infer" else 1}
    if mode == "train" and backend in ENGINES:
        raise UsageError(f"--mode train profiles a framework's step ({', '.join(FRAMEWORKS)}); {backend} runs the "
                         "export, an inference graph")
    if backend.partition(":")[0] in FRAMEWORKS:
        cfg = row_config(model, backend, batch_size, size, precision, threads, mode)
        outcome = child.run(CHILD, {**request, "config": cfg.to_dict()}, timeout_s=timeout_s,
                            env=launcher.worker_env(cfg))
    else:
        where = export.ensure(export_dir, model, size, [batch_size], onnx=backend != "iree",
                              stablehlo=[batch_size] if backend == "iree" else False, timeout_s=timeout_s)
        request.update({"engine": backend, "folder": str(where), "batch_size": batch_size, "threads": threads,
                        "recipe": recipe, "precision": precision})
        outcome = child.run(CHILD, request, timeout_s=timeout_s, env=export.child_env("torch"))
    if not outcome.ok:
        raise RuntimeError(outcome.reason(f"profile of {model} on {backend}"))
    got = outcome.reply
    peak_value = (peak_doc or {}).get("peak_gflops", {}).get("bf16" if precision == "bf16" else "fp32")
    bandwidth = (peak_doc or {}).get("bandwidth_gbps")
    layer_costs = costs.layer_costs(model, size, batch_size, dtype_bytes=2 if precision == "bf16" else 4, mode=mode)
    what = "inferences" if mode == "infer" else "training steps"
    method = f"{PROFILERS.get(backend, got['compiler'])}, {got['steps']} {what}"
    if backend in ENGINES:
        method += f"; {got['compiler']}"
    record = attribute.attribute(got["kernels"], layer_costs, step_ms=got["step_ms"], steps=got["steps"],
                                 peak_gflops=peak_value, bandwidth_gbs=bandwidth, method=method)
    return {"model": model, "backend": backend, "mode": mode, "batch_size": batch_size, "image_size": size,
            "precision": precision, "recipe": got["recipe"], "profiled_step_ms": got["profiled_step_ms"], **record}




def profile_many(model: str, backends: Sequence[str], batch_size: int = 1, image_size: int | None = None, *,
                 steps: int = 10, peak_doc: dict[str, Any] | None = None, export_dir: str | None = None,
                 timeout_s: float = 900.0, mode: str = "infer") -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each of ``backends`` profiled in turn: (``{display name: record}``, ``{display name: why it was skipped}``
    for a backend not installed or whose profile failed: its first error line)."""
    records: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for backend in backends:
        name = NAMES.get(backend, backend)
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
    check_choices("layer_backends", backends, ROWS)
    check_int("layer_steps", steps, 1)
    check_int("layer_batch_size", batch_size, 1)
    check_choices("layer_train_backends", train_backends, (*FRAMEWORKS, COMPILED, TF_XLA))
    check_int("layer_train_batch_size", train_batch_size, 1)
    check_int("layer_train_steps", train_steps, 1)
    spec = specs.get_spec(model)
    if (backends or train_backends) and spec.builder != "resnet_lab":
        raise UsageError(f"{model}: per-layer profiles map the native model's modules; take a zoo model")
    return LayerPlan(model, image_size or spec.input_size, tuple(backends), steps, batch_size, tuple(train_backends),
                     train_batch_size, train_steps)
