"""Benchmark harness: images/sec of a training step or a forward pass, one fresh process per configuration.

What is timed follows tf_cnn_benchmarks: synthetic data already on the device, warmup steps excluded, each
step timed around the call that waits for its result, and ``images/sec: mean +/- stderr (jitter = 1.4826 ×
MAD)``. Each configuration runs in its own Python process (:mod:`resnet_lab.bench_worker`), because oneDNN
(``TF_ENABLE_ONEDNN_OPTS``), XLA flags, thread pools and the Keras backend are fixed when TensorFlow is
imported. A configuration that fails (OOM, unsupported, no GPU, timeout) becomes a row with its ``status``
and ``reason``, and the matrix goes on.

This module never imports TensorFlow: configuration checks, matrix expansion, statistics, MFU and the row
layout are plain Python and are unit-tested without it. The CLI is ``resnet-lab bench``:

    resnet-lab bench --model resnet50 --mode infer --batch-size 8 --steps 10 --format json   # one row
    resnet-lab bench --preset fp32-train-levers --out outputs/bench/fp32-levers   # the fp32 MFU search
    resnet-lab bench --preset precision --out outputs/bench/precision              # fp32 / bf16 / fp16
    resnet-lab bench --onednn-profile --gemm-check ...   # where a step's time goes; GEMM rate right now
    make bench                                           # the speed targets (tests/benchmarks)
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as _dt
import io
import itertools
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from resnet_lab import peak as peak_mod
from resnet_lab import provenance, report
from resnet_lab.errors import UsageError

MODES = ("train", "infer")
BACKENDS = ("tensorflow", "jax", "torch")  # Keras 3 backends; the model definition is the same on each
# The distributions that make a backend importable (any one of them), and the extra that installs it.
BACKEND_PACKAGES = {"tensorflow": ("tensorflow", "tensorflow-cpu"), "jax": ("jax",), "torch": ("torch",)}
# What "xla" means on each backend: the compiler that ran the step (the row's `compiler` field).
COMPILERS = {
    ("tensorflow", "off"): "TensorFlow graph (tf.function, jit_compile=False)",
    ("tensorflow", "jit"): "XLA (tf.function, jit_compile=True)",
    ("tensorflow", "auto"): "TensorFlow graph + XLA auto-clustering",
    ("jax", "jit"): "XLA (jax.jit of the whole step)",
    ("jax", "off"): "JAX eager (op by op; each primitive a cached XLA computation)",
    ("torch", "jit"): "TorchInductor (torch.compile of the whole step)",
    ("torch", "off"): "PyTorch eager",
}
PRECISIONS = ("fp32", "bf16", "fp16")
XLA_MODES = ("off", "jit", "auto")
ONEDNN_MODES = ("on", "off")
DEVICES = ("cpu", "gpu")
DATA_FORMATS = ("channels_last", "channels_first")
OUTPUT_FORMATS = ("table", "json", "csv")
STATUSES = ("ok", "skipped", "unsupported", "oom", "error", "timeout")

# Models the harness builds itself, always available without the zoo: a tiny ResNet for tests (32² images,
# compiles in seconds) and Keras' own ResNet50 as the "plain Keras model" reference.
LOCAL_MODELS = {
    "tiny-resnet": {"default_image_size": 32, "num_classes": 10, "source": "resnet_lab.bench_worker"},
    "keras-resnet50": {"default_image_size": 224, "num_classes": 1000, "source": "keras.applications"},
}
# Used only while resnet_lab.models is not there (it is written in parallel): resnet50 means Keras' ResNet50.
FALLBACK_ALIASES = {"resnet50": "keras-resnet50"}

# The TF_XLA_FLAGS of the 2017 "global jit" method: auto-clustering of every tf.function graph, on CPU too.
AUTO_JIT_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
# TensorFlow logs this line (INFO, once per process) the first time an XLA cluster is compiled: with
# jit_compile=True and with auto-clustering alike. The worker's stderr is searched for it: "what ran".
XLA_COMPILED_MARKER = "Compiled cluster using XLA"

DEFAULT_TIMEOUT_S = 900.0
MAD_SCALE = 1.4826  # MAD → standard deviation of a normal distribution; tf_cnn_benchmarks' jitter
# Environment variables that let oneDNN compute fp32 primitives in a lower precision.
FPMATH_ENV = ("ONEDNN_DEFAULT_FPMATH_MODE", "TF_SET_ONEDNN_FPMATH_MODE")
NO_PEAK_NOTE = ("no GEMM peak measured on this host: run notebook 00_environment or `resnet-lab peak`, "
                "or pass --peak-file")


# ------------------------------------------------------------------------------------------ config
@dataclass
class BenchConfig:
    """One benchmark configuration: every knob that changes the number. Batch size is per replica."""

    model: str = "resnet50"
    backend: str = "tensorflow"         # Keras backend: tensorflow | jax | torch
    mode: str = "train"
    batch_size: int = 32                # images per replica per step
    image_size: int | None = None       # None = the model's default (224 for ResNet-50)
    precision: str = "fp32"             # fp32 | bf16 | fp16 (Keras mixed_* policies; float32 variables)
    xla: str = "off"                    # off | jit (TF jit_compile, jax.jit, torch.compile) | auto (TF only)
    onednn: str = "on"                  # TF_ENABLE_ONEDNN_OPTS=1/0; torch.backends.mkldnn; JAX: on only
    device: str = "cpu"                 # cpu | gpu
    replicas: int = 1                   # TF MirroredStrategy / JAX DataParallel replicas (emulated on CPU)
    intra_op: int | None = None         # None = TensorFlow's default (all available cores)
    inter_op: int | None = None
    data_format: str = "channels_last"
    warmup: int = 2                     # untimed steps after the first (compiling) call
    steps: int = 10                     # timed steps
    env: dict[str, str] = field(default_factory=dict)  # extra environment (TF_ONEDNN_*, KMP_*, XLA_FLAGS)
    gemm_check: bool = False            # also time GEMMs in the worker: the peak available right now
    onednn_profile: bool = False        # ONEDNN_VERBOSE: timed steps split into oneDNN primitives + rest
    label: str = ""                     # a name for the row, e.g. "2017: CPU MKL"
    timeout_s: float = DEFAULT_TIMEOUT_S
    # Multi-worker: MultiWorkerMirroredStrategy over TF_CONFIG (see resnet_lab.multiworker); off when None.
    workers: list[str] | None = None    # host:port of every worker, the same list on every host
    task_index: int | None = None       # this process's index in workers; 0 is the chief (writes the row)
    collective: str = "auto"            # auto | ring | nccl (CommunicationOptions implementation)
    peer_timeout_s: float = 120.0       # peers must join, heartbeat and end each step within this
    baseline_images_per_sec: float | None = None  # one worker's images/sec for scaling efficiency
    measure_baseline: bool = True       # no baseline given: measure it (one-process run) before joining

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.replicas * (len(self.workers) if self.workers else 1)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise UsageError(f"unknown benchmark field(s) {', '.join(unknown)}; "
                             f"allowed: {', '.join(sorted(names))}")
        d = dict(d)
        if "env" in d:
            d["env"] = {str(k): str(v) for k, v in (d["env"] or {}).items()}
        return cls(**d)


def _check_choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise UsageError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def _check_int(name: str, value: Any, minimum: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, got {value!r}")


def resolve_model(name: str) -> dict[str, Any]:
    """What builds ``name``: the harness's own models, the zoo (:mod:`resnet_lab.models`), or the fallback.

    Returns ``{"name", "source", "default_image_size", "num_classes"}``; unknown names raise UsageError
    listing the valid ones. Never imports TensorFlow.
    """
    if name in LOCAL_MODELS:
        return {"name": name, **LOCAL_MODELS[name]}
    try:
        from resnet_lab import models  # written in parallel; may not be there yet
    except ImportError:
        models = None
    if models is not None and hasattr(models, "get_spec"):
        try:
            models.get_spec(name)
        except UsageError:
            valid = [*models.list_models(), *LOCAL_MODELS]
            raise UsageError(f"unknown model {name!r}; valid: {', '.join(valid)}") from None
        d = models.describe(name)
        shape = d.get("default_input_shape") or (224, 224, 3)
        return {"name": name, "source": "resnet_lab.models", "default_image_size": int(shape[0]),
                "num_classes": d.get("num_classes")}
    if name in FALLBACK_ALIASES:
        return {"name": name, **LOCAL_MODELS[FALLBACK_ALIASES[name]]}
    valid = sorted([*LOCAL_MODELS, *FALLBACK_ALIASES])
    raise UsageError(f"unknown model {name!r}; valid: {', '.join(valid)}")


def validate(cfg: BenchConfig) -> BenchConfig:
    """Raise UsageError (one line, before any TensorFlow import) if ``cfg`` cannot be run as asked."""
    info = resolve_model(cfg.model)
    _check_choice("backend", cfg.backend, BACKENDS)
    _check_choice("mode", cfg.mode, MODES)
    _check_choice("precision", cfg.precision, PRECISIONS)
    _check_choice("xla", cfg.xla, XLA_MODES)
    _check_choice("onednn", cfg.onednn, ONEDNN_MODES)
    _check_choice("device", cfg.device, DEVICES)
    _check_choice("data_format", cfg.data_format, DATA_FORMATS)
    _check_int("batch size", cfg.batch_size, 1)
    _check_int("image size", cfg.image_size, 8, optional=True)
    _check_int("replicas", cfg.replicas, 1)
    _check_int("intra-op threads", cfg.intra_op, 1, optional=True)
    _check_int("inter-op threads", cfg.inter_op, 1, optional=True)
    _check_int("warmup", cfg.warmup, 0)
    _check_int("steps", cfg.steps, 1)
    if not (isinstance(cfg.timeout_s, int | float) and cfg.timeout_s > 0):
        raise UsageError(f"timeout must be > 0 seconds, got {cfg.timeout_s!r}")
    for flag in ("gemm_check", "onednn_profile"):
        if not isinstance(getattr(cfg, flag), bool):
            raise UsageError(f"{flag} must be true or false, got {getattr(cfg, flag)!r}")
    if not isinstance(cfg.env, dict):
        raise UsageError(f"env must be a mapping of NAME to value, got {cfg.env!r}")
    _check_backend(cfg)
    if info["source"] == "resnet_lab.models" and cfg.image_size is not None:
        from resnet_lab import models

        models.check_input_shape(cfg.model, (cfg.image_size, cfg.image_size, 3))  # too small, odd sizes
    from resnet_lab import multiworker

    multiworker.check(cfg)  # workers, task index, collective, peer timeout, baseline
    return cfg


def _check_backend(cfg: BenchConfig) -> None:
    """The knobs that exist only on some backends (one line saying which, before anything is imported)."""
    if cfg.backend == "tensorflow":
        return
    who = cfg.backend
    if cfg.xla == "auto":
        raise UsageError(f"xla 'auto' is TensorFlow's auto-clustering; on {who} xla is off or jit "
                         f"({COMPILERS[(who, 'jit')]})")
    if who == "jax":
        if cfg.onednn != "on":
            raise UsageError("onednn 'off' is not available on jax: XLA:CPU uses its own kernels "
                             "(leave onednn at 'on', which the row reports as n/a)")
        if cfg.intra_op is not None or cfg.inter_op is not None:
            raise UsageError("intra-op/inter-op threads are TensorFlow/PyTorch settings; "
                             "on jax leave them unset (XLA:CPU sizes its own pool)")
        if cfg.onednn_profile:
            raise UsageError("onednn_profile needs oneDNN primitives: tensorflow or torch, not jax")
    if who == "torch" and cfg.replicas > 1:
        raise UsageError("replicas > 1 on torch: Keras' distribution API is JAX-only and DDP is not wired "
                         "here; use backend jax or tensorflow for replicas")


# ------------------------------------------------------------------------------------------ matrix
def expand(spec: dict[str, Any]) -> list[BenchConfig]:
    """Configurations of a sweep spec, validated, in a stable order, duplicates dropped.

    ``spec = {"base": {...}, "configs": [{...}, ...], "sweep": {"field": [v1, v2], ...}}``: each entry
    of ``configs`` (default: one empty override) is laid over ``base``, then crossed with the cartesian
    product of ``sweep`` (first key varies slowest). Values are BenchConfig fields; ``env`` dicts merge.
    """
    if not isinstance(spec, dict):
        raise UsageError("a sweep spec is a mapping with keys base, configs, sweep")
    extra = sorted(set(spec) - {"base", "configs", "sweep"})
    if extra:
        raise UsageError(f"unknown sweep spec key(s) {', '.join(extra)}; allowed: base, configs, sweep")
    base = dict(spec.get("base") or {})
    overrides = list(spec.get("configs") or [{}])
    sweep = dict(spec.get("sweep") or {})
    for key, values in sweep.items():
        if not isinstance(values, list | tuple) or not values:
            raise UsageError(f"sweep values for {key!r} must be a non-empty list, got {values!r}")
    keys = list(sweep)
    out: list[BenchConfig] = []
    seen: set[str] = set()
    for override in overrides:
        for combo in itertools.product(*(sweep[k] for k in keys)):
            d = {**base, **override, **dict(zip(keys, combo, strict=True))}
            d["env"] = {**(base.get("env") or {}), **(override.get("env") or {}),
                        **(dict(zip(keys, combo, strict=True)).get("env") or {})}
            cfg = validate(BenchConfig.from_dict(d))
            key = json.dumps(cfg.to_dict(), sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(cfg)
    return out


def load_2017_table() -> list[dict[str, Any]]:
    """The 2017 note's table (tf_cnn_benchmarks, ResNet-50, batch 32, training, synthetic data)."""
    text = resources.files("resnet_lab").joinpath("data/bench_2017.json").read_text()
    return json.loads(text)["rows"]


def configs_2017(**overrides: Any) -> list[BenchConfig]:
    """Today's versions of the 2017 rows (ResNet-50, batch 32 per replica, training, NHWC, synthetic data).

    ``overrides`` (e.g. steps=3, model="tiny-resnet") apply to every row. The GPU rows are kept on a host
    without GPUs: they run as fast ``skipped`` rows that say so.
    """
    rows = []
    for r in load_2017_table():
        d = {"model": "resnet50", "mode": "train", "batch_size": 32, "data_format": "channels_last",
             **r["config"], "label": r["label"], **overrides}
        rows.append(validate(BenchConfig.from_dict(d)))
    return rows


# ------------------------------------------------------------------------------------------- stats
def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation (NumPy's default method)."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def step_stats(step_times: Sequence[float], images_per_step: int) -> dict[str, float]:
    """tf_cnn_benchmarks' summary of per-step wall times.

    images_per_sec = images_per_step / mean(step time) (total images over total time); stderr = population
    standard deviation of per-step images/sec / sqrt(n); jitter = 1.4826 × median absolute deviation of
    per-step images/sec. Step-time percentiles in seconds.
    """
    times = [float(t) for t in step_times]
    if not times or any(not (t > 0) for t in times):
        raise ValueError(f"step times must be positive, got {times!r}")
    speeds = [images_per_step / t for t in times]
    med = statistics.median(speeds)
    return {
        "images_per_sec": images_per_step / statistics.fmean(times),
        "stderr": statistics.pstdev(speeds) / math.sqrt(len(speeds)),
        "jitter": MAD_SCALE * statistics.median([abs(s - med) for s in speeds]),
        "step_time_mean": statistics.fmean(times),
        "step_time_p50": percentile(times, 50),
        "step_time_p90": percentile(times, 90),
        "n_steps": len(times),
    }


def flops_per_image(forward_macs: float | None, mode: str) -> float | None:
    """Model FLOPs per image: 2 × forward MACs, ×3 for a training step (backward ≈ 2 × forward)."""
    if not forward_macs:
        return None
    return 2.0 * float(forward_macs) * (3.0 if mode == "train" else 1.0)


def mfu(flops_image: float | None, images_per_sec: float | None, peak_gflops: float | None) -> float | None:
    """Model FLOPs utilisation: achieved model FLOP/s ÷ measured peak FLOP/s (a fraction, not %)."""
    if not flops_image or images_per_sec is None or not peak_gflops:
        return None
    return flops_image * images_per_sec / (peak_gflops * 1e9)


def cpu_utilization(cpu_seconds: float, wall_seconds: float, cores: int) -> float | None:
    """Process CPU time over wall time, as % of ``cores`` (100 = every available core busy throughout)."""
    if wall_seconds <= 0 or cores <= 0:
        return None
    return 100.0 * cpu_seconds / (wall_seconds * cores)


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(busy, total) jiffies of the aggregate ``cpu`` line of /proc/stat (busy excludes idle and iowait)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:]]
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            total = sum(values[:8])  # guest time is already inside user/nice
            return total - idle, total
    raise ValueError("no aggregate 'cpu' line in /proc/stat text")


def host_utilization(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """Whole-host busy % between two :func:`parse_proc_stat` samples (every process, ours included)."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return 100.0 * busy / total if total > 0 else None


# oneDNN verbose lines of the timed steps sit between these markers (printed by the worker when profiling).
STEP_START, STEP_END = "@@resnet-lab-step-start", "@@resnet-lab-step-end"
_CONV_DESC = re.compile(r"mb(\d+)(?:_g(\d+))?_ic(\d+)oc(\d+)_(?:id\d+od\d+kd\d+sd\d+dd\d+pd\d+_)?"
                        r"ih(\d+)oh(\d+)kh(\d+)sh\d+dh\d+ph\d+_iw(\d+)ow(\d+)kw(\d+)")


def parse_onednn_verbose(text: str) -> dict[str, Any]:
    """Where the timed steps' time went, from ONEDNN_VERBOSE=1 output framed by step markers.

    Returns per-step milliseconds by ``kind:propagation`` (convolution:backward_weights, reorder, ...),
    by convolution implementation, the step wall time between markers, the share of it spent inside oneDNN
    primitives (the rest is TensorFlow's own kernels: batch-norm arithmetic, ReLU, adds, the optimizer,
    and framework overhead), and the convolutions' own GFLOP/s (2·MACs of each conv problem / its time).
    """
    steps, walls = 0, []
    by_kind: dict[str, float] = {}
    by_impl: dict[str, float] = {}
    conv_ms = conv_flops = 0.0
    inside, t0 = False, 0.0
    for line in text.splitlines():
        if line.startswith(STEP_START):
            inside, t0, steps = True, float(line.split()[1]), steps + 1
            continue
        if line.startswith(STEP_END):
            inside = False
            walls.append(float(line.split()[1]) - t0)
            continue
        if not (inside and line.startswith("onednn_verbose") and ",exec," in line):
            continue
        f = line.split(",")
        i = f.index("exec")
        try:
            kind, impl, prop, ms = f[i + 2], f[i + 3], f[i + 4], float(f[-1])
        except (IndexError, ValueError):
            continue
        key = "reorder" if kind == "reorder" else f"{kind}:{prop}"
        by_kind[key] = by_kind.get(key, 0.0) + ms
        if kind == "convolution":
            by_impl[f"{prop}:{impl}"] = by_impl.get(f"{prop}:{impl}", 0.0) + ms
            m = _CONV_DESC.search(line)
            if m:
                mb, g, ic, oc, _ih, oh, kh, _iw, ow, kw = (int(x) if x else 1 for x in m.groups())
                conv_ms += ms
                conv_flops += 2.0 * mb * oc * oh * ow * ic * kh * kw / g
    if not steps or not walls:
        return {"steps": 0}
    wall_ms = 1000.0 * sum(walls) / len(walls)
    per_step = {k: v / steps for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])}
    onednn_ms = sum(per_step.values())
    conv_total = sum(v for k, v in per_step.items() if k.startswith("convolution"))
    return {
        "steps": steps, "step_ms": wall_ms, "onednn_ms": onednn_ms, "other_ms": wall_ms - onednn_ms,
        "onednn_share": onednn_ms / wall_ms if wall_ms else None,
        "conv_share": conv_total / wall_ms if wall_ms else None,
        "conv_gflops": conv_flops / conv_ms / 1e6 if conv_ms else None,
        "ms_per_step": per_step,
        "conv_impl_ms_per_step": {k: v / steps for k, v in sorted(by_impl.items(), key=lambda kv: -kv[1])},
    }


# -------------------------------------------------------------------------------------------- rows
ROW_FIELDS = (
    "label", "model", "mode", "batch_size", "global_batch", "image_size", "precision", "math_dtype", "xla",
    "xla_ran",
    "onednn", "onednn_ran", "device", "replicas", "emulated", "intra_op", "inter_op", "data_format",
    "warmup", "steps", "status", "reason",
    "images_per_sec", "stderr", "jitter", "step_time_mean", "step_time_p50", "step_time_p90",
    "first_step_s", "compile_s", "timed_s", "wall_s",
    "workers", "task_index", "collective", "global_images_per_sec", "per_worker_images_per_sec",
    "baseline_images_per_sec", "scaling_efficiency", "per_worker",
    "forward_macs", "flops_per_image", "model_gflops", "peak_gflops", "mfu", "mfu_note",
    "gemm_gflops_now", "mfu_vs_gemm_now", "onednn_share", "conv_share", "conv_gflops", "onednn_profile",
    "cpu_util", "host_util", "cpu_seconds", "available_cpus", "loadavg_1m",
    "compute_dtype", "backend", "backend_version", "compiler", "compile_stats",
    "tf_version", "keras_version", "python", "host", "cpu_model",
    "commit", "dirty", "env", "model_source", "flops_source", "started_at",
)


def _static_fields(cfg: BenchConfig) -> dict[str, Any]:
    """Row fields known without running anything (the host's side of provenance included)."""
    cpu = provenance.cpu_info()
    git = provenance.git_state()
    versions = provenance.package_versions(("tensorflow", "tensorflow-cpu", "keras"))
    try:
        load1 = os.getloadavg()[0]
    except OSError:
        load1 = None
    return {
        "label": cfg.label, "model": cfg.model, "mode": cfg.mode, "batch_size": cfg.batch_size,
        "global_batch": cfg.global_batch, "image_size": cfg.image_size, "precision": cfg.precision,
        "math_dtype": math_dtype(cfg),
        "xla": cfg.xla, "xla_ran": None, "onednn": cfg.onednn if cfg.backend != "jax" else "n/a",
        "onednn_ran": None, "device": cfg.device,
        "replicas": cfg.replicas, "emulated": cfg.device == "cpu" and cfg.replicas > 1,
        "intra_op": cfg.intra_op, "inter_op": cfg.inter_op, "data_format": cfg.data_format,
        "warmup": cfg.warmup, "steps": cfg.steps,
        "workers": len(cfg.workers) if cfg.workers else None, "task_index": cfg.task_index,
        "collective": cfg.collective if cfg.workers else None,
        "available_cpus": cpu.get("available_cpus"), "loadavg_1m": load1,
        "backend": cfg.backend, "backend_version": backend_version(cfg.backend),
        "compiler": COMPILERS[(cfg.backend, cfg.xla)],
        "tf_version": versions.get("tensorflow") or versions.get("tensorflow-cpu"),
        "keras_version": versions.get("keras"), "python": sys.version.split()[0],
        "host": socket.gethostname(), "cpu_model": cpu.get("model"),
        "commit": git.get("commit"), "dirty": git.get("dirty"),
        "env": json.dumps(cfg.env, sort_keys=True) if cfg.env else "",
        "started_at": provenance.now_iso(),
    }


def make_row(cfg: BenchConfig, result: dict[str, Any], peak: dict[str, Any] | None,
             static: dict[str, Any] | None = None) -> dict[str, Any]:
    """One tidy row: the configuration, what ran, the statistics, MFU, utilisation and provenance."""
    row = {k: None for k in ROW_FIELDS}
    row.update(static if static is not None else _static_fields(cfg))
    for key in ("status", "reason", "xla_ran", "onednn_ran", "first_step_s", "compile_s", "timed_s",
                "forward_macs", "cpu_seconds", "host_util", "compute_dtype", "tf_version", "keras_version",
                "model_source", "flops_source", "image_size", "emulated", "gemm_gflops_now", "compiler",
                "compile_stats", "backend_version"):
        if result.get(key) is not None:
            row[key] = result[key]
    row["status"] = result.get("status", "error")
    if result.get("warmup_steps") is not None:  # raised for lazily compiling modes (see bench_worker)
        row["warmup"] = result["warmup_steps"]
    if row["status"] != "ok":
        return row
    images_per_step = cfg.global_batch
    row.update({k: v for k, v in step_stats(result["step_times"], images_per_step).items() if k != "n_steps"})
    timed_s = float(result.get("timed_s") or sum(result["step_times"]))
    row["timed_s"] = timed_s
    if result.get("cpu_seconds") is not None and row["available_cpus"]:
        row["cpu_util"] = cpu_utilization(float(result["cpu_seconds"]), timed_s, int(row["available_cpus"]))
    row["flops_per_image"] = flops_per_image(row["forward_macs"], cfg.mode)
    if row["flops_per_image"]:
        row["model_gflops"] = row["flops_per_image"] * row["images_per_sec"] / 1e9
    row["peak_gflops"], row["mfu_note"] = peak_for(cfg, peak)
    row["mfu"] = mfu(row["flops_per_image"], row["images_per_sec"], row["peak_gflops"])
    row["mfu_vs_gemm_now"] = mfu(row["flops_per_image"], row["images_per_sec"], row["gemm_gflops_now"])
    if row["mfu"] is None and not row["mfu_note"]:
        row["mfu_note"] = "model FLOPs unknown"
    if cfg.workers:  # global, per-worker and one-worker images/sec, scaling efficiency
        from resnet_lab import multiworker

        row.update(multiworker.row_fields(cfg, result, row))
    return row


def math_dtype(cfg: BenchConfig) -> str:
    """The dtype the matrix units really multiply in: the precision, unless an fp32 row lets oneDNN do its
    fp32 convolutions and matmuls in bf16 (``ONEDNN_DEFAULT_FPMATH_MODE``/``TF_SET_ONEDNN_FPMATH_MODE``
    = BF16): then it is bf16, and MFU is against the bf16 peak. Such a row is not an fp32 result."""
    modes = {cfg.env.get(k, "").strip().upper() for k in FPMATH_ENV}
    if cfg.precision == "fp32" and cfg.onednn == "on" and modes & {"BF16", "ANY"}:
        return "bf16"
    return cfg.precision


def peak_for(cfg: BenchConfig, peak: dict[str, Any] | None) -> tuple[float | None, str]:
    """(peak GFLOP/s for this row's math dtype and device, note saying why it is missing)."""
    if not peak:
        return None, NO_PEAK_NOTE
    if peak.get("device", "cpu") != cfg.device:
        return None, f"the peak file measured {peak.get('device', 'cpu')} GEMMs, not {cfg.device}"
    dtype = math_dtype(cfg)
    value = peak_mod.peak_gflops(dtype, peak)
    if value is None:
        return None, f"the peak file has no {dtype} measurement"
    if dtype != cfg.precision:
        return value, f"{cfg.precision} with oneDNN fpmath {dtype}: MFU against the {dtype} peak"
    return value, ""


def skipped_row(cfg: BenchConfig, status: str, reason: str, static: dict[str, Any] | None = None) -> dict:
    return make_row(cfg, {"status": status, "reason": reason}, None, static)


# ---------------------------------------------------------------------------------------- process
def package_root() -> Path:
    """The folder holding the ``resnet_lab`` package (put on the worker's PYTHONPATH)."""
    return Path(__file__).resolve().parent.parent


def worker_env(cfg: BenchConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the worker process for ``cfg``: everything TensorFlow reads at import."""
    env = dict(os.environ if base is None else base)
    env["KERAS_BACKEND"] = cfg.backend
    if cfg.backend == "jax":
        if cfg.device == "cpu":
            env["JAX_PLATFORMS"] = "cpu"
        if cfg.device == "cpu" and cfg.replicas > 1:  # N XLA:CPU devices in one process (emulated replicas)
            flags = [f for f in env.get("XLA_FLAGS", "").split()
                     if not f.startswith("--xla_force_host_platform_device_count")]
            env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={cfg.replicas}"])
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # GPU: allocate as needed, as TF does
    env["TF_ENABLE_ONEDNN_OPTS"] = "1" if cfg.onednn == "on" else "0"
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"  # the XLA "Compiled cluster" INFO line tells what ran
    env["PYTHONUNBUFFERED"] = "1"
    flags = [f for f in env.get("TF_XLA_FLAGS", "").split() if not f.startswith(
        ("--tf_xla_auto_jit", "--tf_xla_cpu_global_jit"))]
    if cfg.xla == "auto":
        flags += AUTO_JIT_FLAGS.split()
    if flags:
        env["TF_XLA_FLAGS"] = " ".join(flags)
    else:
        env.pop("TF_XLA_FLAGS", None)
    if cfg.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU row must not touch (or be slowed by initialising) a GPU
    root = str(package_root())
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root, *rest])
    if cfg.onednn_profile:
        env["ONEDNN_VERBOSE"] = "1"
    env.pop("TF_CONFIG", None)
    if cfg.workers:  # the cluster and this task: what MultiWorkerMirroredStrategy reads
        from resnet_lab import multiworker

        env["TF_CONFIG"] = json.dumps(multiworker.tf_config(cfg))
    env.update(cfg.env)
    return env


def backend_version(backend: str) -> str | None:
    """The installed version of a backend's package, without importing it (None where absent)."""
    versions = provenance.package_versions(BACKEND_PACKAGES[backend])
    return next((v for v in versions.values() if v), None)


def gpus_visible(backend: str = "tensorflow") -> tuple[int, str]:
    """(number of GPUs, how we know), without importing a framework: nvidia-smi, then the backend's build.

    A CPU-only build (tensorflow-cpu, torch ``+cpu``) counts as none; whether JAX has its CUDA plugin is
    only known in the worker (which then writes a ``skipped`` row)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return 0, "CUDA_VISIBLE_DEVICES hides every GPU"
    gpus = provenance.gpu_info()
    if not gpus:
        return 0, "no GPU is visible on this host (nvidia-smi finds none)"
    if backend == "tensorflow":
        versions = provenance.package_versions(("tensorflow", "tensorflow-cpu"))
        if versions.get("tensorflow") is None:
            return 0, f"{len(gpus)} GPU(s) present but only tensorflow-cpu is installed (pip install '.[gpu]')"
    if backend == "torch" and "+cpu" in (backend_version("torch") or ""):
        return 0, f"{len(gpus)} GPU(s) present but torch is a CPU build ({backend_version('torch')})"
    return len(gpus), "nvidia-smi"


def precheck(cfg: BenchConfig) -> tuple[str, str] | None:
    """(status, reason) when ``cfg`` cannot run on this host, decided in milliseconds; None if it may run."""
    if backend_version(cfg.backend) is None:
        extra = "" if cfg.backend == "tensorflow" else f" (pip install '.[{cfg.backend}]')"
        return "skipped", f"backend {cfg.backend} is not installed{extra}"
    if cfg.device == "gpu":
        n, why = gpus_visible(cfg.backend)
        if n == 0:
            return "skipped", why
        if n < cfg.replicas:
            return "skipped", f"{cfg.replicas} GPU replicas asked for, {n} GPU(s) visible"
    return None


def _tail(text: str) -> str:
    """The line of a worker log that best says why it died: the last error-looking line, else the last."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for marker in ("Error", "error", "Illegal", "Check failed", "Killed"):
        hits = [ln for ln in lines if marker in ln]
        if hits:
            return hits[-1][:400]
    return (lines[-1] if lines else "(no output)")[:400]


def _kill_group(proc: subprocess.Popen) -> None:
    """End the worker and the processes it started (its own session), by its process id."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def run_config(cfg: BenchConfig, peak: dict[str, Any] | None = None, log_dir: str | Path | None = None,
               python: str | None = None) -> dict[str, Any]:
    """Run one configuration in a fresh worker process and return its row (never raises for a failed run)."""
    validate(cfg)
    if cfg.workers:  # the one-worker baseline of scaling efficiency, measured first unless given
        from resnet_lab import multiworker

        cfg = multiworker.with_baseline(cfg, peak, log_dir, python)
    static = _static_fields(cfg)
    pre = precheck(cfg)
    if pre:
        return skipped_row(cfg, *pre, static=static)
    result, log_text, wall = _run_worker(cfg, [], log_dir, python)
    if cfg.backend == "tensorflow" and (result.get("status") == "ok" or result.get("xla_ran") is None):
        result["xla_ran"] = XLA_COMPILED_MARKER in log_text
    row = make_row(cfg, result, peak, static)
    row["wall_s"] = wall
    if cfg.onednn_profile and row["status"] == "ok":
        prof = parse_onednn_verbose(log_text)
        row["onednn_profile"] = json.dumps(prof, sort_keys=True)
        row["onednn_share"] = prof.get("onednn_share")
        row["conv_share"] = prof.get("conv_share")
        row["conv_gflops"] = prof.get("conv_gflops")
    return row


def overhead(cfg: BenchConfig, rounds: int = 3, python: str | None = None) -> dict[str, Any]:
    """Harness loop vs a bare loop over the same compiled step, in one worker (see bench_worker.overhead)."""
    validate(cfg)
    pre = precheck(cfg)
    if pre:
        return {"status": pre[0], "reason": pre[1]}
    cfg = dataclasses.replace(cfg, env={**cfg.env, "RESNET_LAB_OVERHEAD_ROUNDS": str(rounds)})
    result, _, _ = _run_worker(cfg, ["--overhead"], None, python)
    return result


# Worker processes running now, by the thread waiting for each (multiworker.launch_local ends them early).
RUNNING: dict[int, subprocess.Popen] = {}


def _run_worker(cfg: BenchConfig, extra_args: list[str], log_dir: str | Path | None,
                python: str | None) -> tuple[dict[str, Any], str, float]:
    """(result dict, worker log text, wall seconds) of one worker process; failures become results."""
    with tempfile.TemporaryDirectory(prefix="resnet-lab-bench-") as tmp:
        tmp_path = Path(tmp)
        cfg_path, result_path = tmp_path / "config.json", tmp_path / "result.json"
        cfg_path.write_text(json.dumps(cfg.to_dict()))
        log_path = tmp_path / "worker.log"
        if log_dir:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
            stamp = _dt.datetime.now().strftime("%H%M%S")
            log_path = Path(log_dir) / f"{stamp}-{os.getpid()}-{slug(cfg)}.log"
        t0 = time.perf_counter()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [python or sys.executable, "-m", "resnet_lab.bench_worker", *extra_args, str(cfg_path),
                 str(result_path)],
                env=worker_env(cfg), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            RUNNING[threading.get_ident()] = proc
            try:
                rc = proc.wait(timeout=cfg.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                rc = None
            except BaseException:  # KeyboardInterrupt: never leave a worker behind
                _kill_group(proc)
                raise
            finally:
                RUNNING.pop(threading.get_ident(), None)
        wall = time.perf_counter() - t0
        log_text = log_path.read_text(errors="replace")
        if rc is None:
            result = {"status": "timeout", "reason": f"no result after {cfg.timeout_s:g} s (worker killed)"}
        elif result_path.exists():
            result = json.loads(result_path.read_text())
        elif rc < 0 and -rc == signal.SIGKILL:
            result = {"status": "oom",
                      "reason": f"worker killed by SIGKILL (out of memory?): {_tail(log_text)}"}
        else:
            result = {"status": "error", "reason": f"worker exited {rc} without a result: {_tail(log_text)}"}
    return result, log_text, wall


def slug(cfg: BenchConfig) -> str:
    parts = [cfg.model, cfg.backend, cfg.mode, f"b{cfg.batch_size}", cfg.precision, f"xla-{cfg.xla}",
             f"onednn-{cfg.onednn}", cfg.device, f"r{cfg.replicas}"]
    if cfg.workers:
        parts.append(f"w{len(cfg.workers)}t{cfg.task_index}")
    return "-".join(str(p) for p in parts)


def run_matrix(configs: Iterable[BenchConfig], out: str | Path | None = None,
               peak: dict[str, Any] | None = None, progress: bool = True,
               name: str = "bench") -> list[dict[str, Any]]:
    """Run every configuration (one process each) and return the rows.

    With ``out``, ``<name>.csv`` and ``<name>.json`` are rewritten after every row (a crash keeps what was
    measured) and worker logs go to ``out/logs/``.
    """
    configs = [validate(c) for c in configs]
    rows: list[dict[str, Any]] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(configs), desc="bench", unit="config")
    try:
        for cfg in configs:
            if bar:
                bar.set_postfix_str(cfg.label or slug(cfg), refresh=True)
            rows.append(run_config(cfg, peak, log_dir=Path(out) / "logs" if out else None))
            if out:
                save_rows(out, rows, name)
            if bar:
                bar.update(1)
    finally:
        if bar:
            bar.close()
    return rows


# ------------------------------------------------------------------------------------------ output
def save_rows(out: str | Path, rows: list[dict[str, Any]], name: str = "bench") -> tuple[Path, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = report.write_json(out / f"{name}.json", rows)
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
    labelled = any(r.get("label") for r in rows)
    header = ["model", "backend", "mode", "batch", "prec", "xla", "onednn", "dev", "repl", "threads", "images/sec",
              "mfu", "cpu%", "status"]
    if labelled:
        header = ["label", *header]
    lines = []
    for r in rows:
        if r.get("status") == "ok":
            ips = f"{r['images_per_sec']:.2f} ± {r['stderr']:.2f} (jitter {r['jitter']:.2f})"
        else:
            ips = "-"
        if r.get("workers") and r.get("status") == "ok":  # global images/sec of a cluster
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
    widths = [max([len(h), *(len(line[i]) for line in lines)]) for i, h in enumerate(header)]
    fmt_line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([fmt_line(header), *(fmt_line(line) for line in lines)])


def to_frame(rows: list[dict[str, Any]]):
    """The rows as a pandas DataFrame with the columns in :data:`ROW_FIELDS` order."""
    import pandas as pd

    return pd.DataFrame([{k: r.get(k) for k in ROW_FIELDS} for r in rows], columns=list(ROW_FIELDS))


# --------------------------------------------------------------------------------------------- CLI
def _parse_env(items: list[str] | None) -> dict[str, str]:
    env = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env takes NAME=VALUE, got {item!r}")
        env[key] = value
    return env


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="resnet50",
                   help="model name (the zoo's, or tiny-resnet, keras-resnet50)")
    p.add_argument("--backend", default="tensorflow",
                   help=f"Keras backend, one of {', '.join(BACKENDS)} (jax and torch: the [jax]/[torch] extras)")
    p.add_argument("--mode", default="train", help=f"one of {', '.join(MODES)}")
    p.add_argument("--batch-size", type=int, default=32, help="images per replica per step")
    p.add_argument("--image-size", type=int, default=None, help="square input side (default: the model's)")
    p.add_argument("--precision", default="fp32", help=f"one of {', '.join(PRECISIONS)}")
    p.add_argument("--xla", default="off",
                   help="off | jit (TF jit_compile=True, jax.jit, torch.compile) | auto (TF auto-clustering)")
    p.add_argument("--onednn", default="on", help="on | off (TF_ENABLE_ONEDNN_OPTS)")
    p.add_argument("--device", default="cpu", help=f"one of {', '.join(DEVICES)}")
    p.add_argument("--replicas", type=int, default=1, help="MirroredStrategy replicas (batch is per replica)")
    p.add_argument("--intra-op", type=int, default=None, help="intra-op threads (default: TF's)")
    p.add_argument("--inter-op", type=int, default=None, help="inter-op threads (default: TF's)")
    p.add_argument("--data-format", default="channels_last", help=f"one of {', '.join(DATA_FORMATS)}")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps after the compiling first call")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="extra worker environment (repeatable)")
    p.add_argument("--label", default="", help="a name for the row")
    p.add_argument("--gemm-check", action="store_true",
                   help="also time GEMMs in the worker: the peak available during the run (shared hosts)")
    p.add_argument("--onednn-profile", action="store_true",
                   help="ONEDNN_VERBOSE=1: split the timed steps into oneDNN primitives and the rest")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per configuration")
    mw = p.add_argument_group("multi-worker (tf.distribute.MultiWorkerMirroredStrategy; see resnet_lab.multiworker)")
    mw.add_argument("--workers", default=None, metavar="HOST:PORT,HOST:PORT",
                    help="the cluster: every worker's host:port, the same list on every host")
    mw.add_argument("--task-index", type=int, default=None, help="this worker's index in --workers (0: chief)")
    mw.add_argument("--local-workers", type=int, default=0, metavar="N",
                    help="start N workers on 127.0.0.1 (one-host trial) and print the chief's row")
    mw.add_argument("--collective", default="auto", help="auto | ring | nccl (all-reduce implementation)")
    mw.add_argument("--peer-timeout", type=float, default=120.0,
                    help="seconds to wait for peers: to join, between heartbeats, per step")
    mw.add_argument("--baseline-images-per-sec", type=float, default=None,
                    help="one worker's images/sec for scaling efficiency (default: measure it first)")
    mw.add_argument("--no-baseline", action="store_true", help="measure no baseline: no scaling efficiency")
    p.add_argument("--matrix", default=None,
                   help="a sweep spec (JSON or YAML file, see bench.expand) instead of one configuration; "
                        "the options above are its base")
    p.add_argument("--preset", default=None, choices=sorted(PRESETS),
                   help="a named matrix (see bench.PRESETS) instead of one configuration")
    p.add_argument("--peak-file", default=None, help="GEMM peak JSON for MFU (default: this host's newest)")
    p.add_argument("--out", default=None, help="folder for bench.csv, bench.json and worker logs")
    p.add_argument("--format", default="table", help=f"one of {', '.join(OUTPUT_FORMATS)}")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "model": args.model, "backend": args.backend, "mode": args.mode, "batch_size": args.batch_size,
        "image_size": args.image_size,
        "precision": args.precision, "xla": args.xla, "onednn": args.onednn, "device": args.device,
        "replicas": args.replicas, "intra_op": args.intra_op, "inter_op": args.inter_op,
        "data_format": args.data_format, "warmup": args.warmup, "steps": args.steps,
        "env": _parse_env(args.env), "label": args.label, "timeout_s": args.timeout,
        "gemm_check": args.gemm_check, "onednn_profile": args.onednn_profile,
        **_multiworker_from_args(args),
    }


def _multiworker_from_args(args: argparse.Namespace) -> dict[str, Any]:
    from resnet_lab import multiworker

    return {"workers": multiworker.parse_workers(getattr(args, "workers", None)),
            "task_index": getattr(args, "task_index", None), "collective": getattr(args, "collective", "auto"),
            "peer_timeout_s": getattr(args, "peer_timeout", 120.0),
            "baseline_images_per_sec": getattr(args, "baseline_images_per_sec", None),
            "measure_baseline": not getattr(args, "no_baseline", False)}


def load_spec(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"matrix file {p} does not exist")
    text = p.read_text()
    if p.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(text) or {}
    return json.loads(text)


# The same step on each Keras backend, compiled and not: the cross-backend table of 03_benchmarks.
BACKEND_ROWS: list[dict[str, Any]] = [
    {"label": "TF graph", "backend": "tensorflow", "xla": "off"},
    {"label": "TF XLA jit", "backend": "tensorflow", "xla": "jit"},
    {"label": "JAX jit", "backend": "jax", "xla": "jit"},
    {"label": "JAX eager", "backend": "jax", "xla": "off"},
    {"label": "torch eager", "backend": "torch", "xla": "off"},
    {"label": "torch.compile", "backend": "torch", "xla": "jit"},
]

# Named matrices: the reproducible one-command measurements. Each is a sweep spec (see expand).
PRESETS: dict[str, dict[str, Any]] = {
    # ResNet-50 on TF, JAX and PyTorch, training and inference, each with its compiler on and off.
    "backends": {
        "base": {"model": "resnet50", "batch_size": 32, "precision": "fp32", "steps": 5, "warmup": 1},
        "configs": BACKEND_ROWS,
        "sweep": {"mode": ["train", "infer"]},
    },
    # The lent-GPU run (JAX and PyTorch with CUDA, no TensorFlow there): fp32 and bf16, compiled and eager,
    # training and inference, each with a GEMM check in the same precision (MFU without a peak file).
    "gpu-backends": {
        "base": {"model": "resnet50", "device": "gpu", "batch_size": 128, "steps": 20, "warmup": 3,
                 "gemm_check": True, "timeout_s": 600.0},
        "configs": [r for r in BACKEND_ROWS if r["backend"] != "tensorflow"],
        "sweep": {"mode": ["train", "infer"], "precision": ["fp32", "bf16"]},
    },
    # The configuration search behind the fp32 MFU figure: ResNet-50 v1 training, 224², on this CPU.
    # `resnet-lab bench --preset fp32-train-levers --out DIR` (or `make bench`) re-measures it.
    "fp32-train-levers": {
        "base": {"model": "resnet50", "mode": "train", "batch_size": 32, "precision": "fp32", "steps": 5,
                 "warmup": 1, "gemm_check": True},
        "configs": [
            {"label": "oneDNN (TF default)"},
            {"label": "oneDNN, batch 64", "batch_size": 64},
            {"label": "oneDNN, 2 intra / 1 inter threads", "intra_op": 2, "inter_op": 1},
            {"label": "oneDNN, NCHW", "data_format": "channels_first"},
            {"label": "oneDNN, system allocator", "env": {"TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1"}},
            {"label": "no oneDNN (Eigen)", "onednn": "off"},
            {"label": "XLA jit", "xla": "jit"},
            {"label": "XLA jit, oneDNN thunks", "xla": "jit",
             "env": {"XLA_FLAGS": "--xla_cpu_use_onednn=true"}},
            {"label": "XLA auto-clustering", "xla": "auto"},
            {"label": "oneDNN, profiled", "onednn_profile": True, "steps": 2},
        ],
    },
    # Precision on the same step: bf16/fp16 mixed policies, and fp32 whose oneDNN math is bf16 (not fp32).
    "precision": {
        "base": {"model": "resnet50", "mode": "train", "batch_size": 32, "steps": 5, "warmup": 1,
                 "gemm_check": True},
        "configs": [
            {"label": "fp32", "precision": "fp32"},
            {"label": "bf16 (mixed_bfloat16)", "precision": "bf16"},
            {"label": "fp16 (mixed_float16)", "precision": "fp16"},
            {"label": "fp32 API, oneDNN fpmath bf16", "precision": "fp32",
             "env": {"TF_SET_ONEDNN_FPMATH_MODE": "BF16"}},
        ],
    },
}


def configs_from_args(args: argparse.Namespace) -> list[BenchConfig]:
    base = _config_from_args(args)
    if args.preset and args.matrix:
        raise UsageError("give --preset or --matrix, not both")
    if args.preset and (base["workers"] or getattr(args, "local_workers", 0)):
        raise UsageError("--workers and --local-workers run one configuration or a --matrix file, not a --preset")
    if args.preset == "2017":
        overrides = {k: base[k] for k in ("steps", "warmup", "timeout_s")}
        return configs_2017(**overrides)
    if args.preset or args.matrix:
        spec = PRESETS[args.preset] if args.preset else load_spec(args.matrix)
        spec = dict(spec)
        if args.matrix:  # a file's base sits over the command line's options
            spec["base"] = {**base, **(spec.get("base") or {})}
        return expand(spec)
    return [validate(BenchConfig.from_dict(base))]


PRESETS["2017"] = {}  # built by configs_2017 from data/bench_2017.json


def run(args: argparse.Namespace) -> int:
    _check_choice("format", args.format, OUTPUT_FORMATS)
    configs = configs_from_args(args)
    peak = peak_mod.load_peak(args.peak_file)
    local = getattr(args, "local_workers", 0)
    if local:  # N workers on loopback: one combined row
        from resnet_lab import multiworker

        if len(configs) != 1:
            raise UsageError("--local-workers runs one configuration, not a matrix or preset")
        rows = [multiworker.launch_local(configs[0], local, peak=peak,
                                         log_dir=Path(args.out) / "logs" if args.out else None)]
        if args.out:
            save_rows(args.out, rows)
    elif any(c.task_index for c in configs):  # not the chief: it writes the row
        print("resnet-lab bench: not the chief (task index > 0): the row is printed, not written; "
              "worker 0 writes it", file=sys.stderr)
        rows = run_matrix(configs, out=None, peak=peak, progress=not args.no_progress and len(configs) > 1)
    else:
        rows = run_matrix(configs, out=args.out, peak=peak, progress=not args.no_progress and len(configs) > 1)
    if args.format == "json":
        print(json.dumps(report._jsonable(rows[0] if len(rows) == 1 else rows), indent=2))
    elif args.format == "csv":
        print(rows_to_csv(rows), end="")
    else:
        print(rows_to_table(rows))
    for r in rows:
        if r["status"] != "ok":
            print(f"resnet-lab bench: {r['status']}: {r.get('reason')}", file=sys.stderr)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m resnet_lab.bench ...``: the same as ``resnet-lab bench ...``."""
    parser = argparse.ArgumentParser(prog="resnet-lab bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UsageError as e:
        print(f"resnet-lab bench: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
