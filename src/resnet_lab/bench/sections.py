"""The sections of notebook 03 as benchmark configurations: one builder per section, each taking the shared
:class:`~resnet_lab.bench.timing.Timing`. :mod:`resnet_lab.bench.plan` calls them with 03's parameters; the
report layer (:mod:`resnet_lab.report`) reads the rows they give by the labels defined here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from resnet_lab.bench.config import BenchConfig, configs_2017, unique, validate
from resnet_lab.bench.presets import BACKEND_ROWS
from resnet_lab.bench.timing import DEFAULT as DEFAULT_TIMING
from resnet_lab.bench.timing import Timing
from resnet_lab.core.choices import (
    ENGINES,
    KERAS_BACKENDS,
    MODES,
    PRECISIONS,
    TORCH_COMPILE_BACKEND_ENV,
    TORCH_COMPILE_BACKENDS,
    check_choice,
    check_choices,
    check_int,
)
from resnet_lab.core.errors import UsageError
from resnet_lab.steps import recipes

TF_LABEL = "TensorFlow (Keras model, fused BN)"
NATIVE_EAGER = "native PyTorch eager"
NATIVE_COMPILED = "native PyTorch torch.compile"
SINGLE_STREAM, OFFLINE = "SingleStream", "Offline"
# SingleStream queries: 256 (~17 s at 65 ms a query on 2 cores) leave 25 queries above the p90, MLPerf's
# metric; MLPerf's own minimum, 1024 queries and 600 s, would make one row last ten minutes.
MLPERF_MIN_QUERIES = 256
# The other compilers' names in 03's rows and tables ("SingleStream · IREE").
ENGINE_LABELS = {"iree": "IREE", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}


XLA_JIT_2017 = "XLA jit CPU (new)"


def configs_2017_today(model: str = "resnet50", image_size: int | None = None, batch_size: int = 32,
                       skip: Sequence[str] = (), timing: Timing = DEFAULT_TIMING) -> list[BenchConfig]:
    """The 2017 table's seven rows on this host, plus XLA jit_compile=True on CPU (not in 2017), less the
    labels in ``skip``."""
    common = {"model": model, "image_size": image_size, "batch_size": batch_size, **timing.fields()}
    rows = configs_2017(**common)
    extra = BenchConfig(**common, mode="train", xla="jit", onednn="on", label=XLA_JIT_2017)
    # after "XLA CPU": the CPU rows together, then the GPU ones
    cpu = [r for r in rows if r.device == "cpu"]
    gpu = [r for r in rows if r.device == "gpu"]
    table = [*cpu, validate(extra), *gpu]
    check_choices("skip_2017", skip, [r.label for r in table])
    return [r for r in table if r.label not in skip]


def sweep_configs(model: str = "resnet50", image_size: int | None = None, batch_size: int = 32,
                  batch_sizes: Sequence[int] = (16, 32, 64), precisions: Sequence[str] = ("fp32", "bf16"),
                  threads: Sequence[Sequence[int]] = ((1, 1), (2, 1), (2, 2)), fused_bn: Sequence[str] = (),
                  timing: Timing = DEFAULT_TIMING) -> list[BenchConfig]:
    """One-knob sweeps around (oneDNN, fp32, training, ``batch_size``): batch, precision, threads, and batch
    norm through TensorFlow's fused kernel at each precision of ``fused_bn`` (label "fused BN").

    Each config's ``label`` names its sweep ("batch", "precision", "threads"); a config shared by two
    sweeps is measured once and carries the first sweep's label (see :func:`sweep_view`).
    """
    base = {"model": model, "image_size": image_size, "mode": "train", "batch_size": batch_size, **timing.fields()}
    out: list[BenchConfig] = []

    def add(label: str, **change: Any) -> None:
        out.append(validate(BenchConfig(**{**base, **change, "label": label})))

    for b in batch_sizes:
        add("batch", batch_size=b)
    for p in precisions:
        add("precision", precision=p)
    for t in threads:
        if isinstance(t, str) or not isinstance(t, Sequence) or len(t) != 2:
            raise UsageError(f"threads: {t!r} is not an [intra-op, inter-op] pair")
        add("threads", intra_op=t[0], inter_op=t[1])
    for p in fused_bn:
        add("fused BN", precision=p, fused_bn=True)
    return unique(out)


def backend_configs(model: str = "resnet50", image_size: int | None = None, batch_size: int = 32,
                    backends: Sequence[str] = KERAS_BACKENDS, modes: Sequence[str] = ("train", "infer"),
                    precision: str = "fp32", skip: Sequence[str] = (), torch_compile_backend: str = "inductor",
                    timing: Timing = DEFAULT_TIMING) -> list[BenchConfig]:
    """The same step on each Keras backend, its compiler on and off (:data:`presets.BACKEND_ROWS`, less the
    labels in ``skip``), for each mode; torch.compile hands its graphs to ``torch_compile_backend``. A backend
    that is not installed still gets its rows: they come back ``skipped``."""
    check_choices("backends", backends, KERAS_BACKENDS)
    check_choices("modes", modes, MODES)
    check_choices("backend_skip", skip, [row["label"] for row in BACKEND_ROWS])
    base = {"model": model, "image_size": image_size, "batch_size": batch_size, "precision": precision,
            **timing.fields()}
    return [validate(BenchConfig(**{**base, **row, "mode": mode, "env": _compile_env(row, torch_compile_backend)}))
            for mode in modes for row in BACKEND_ROWS
            if row["backend"] in backends and row["label"] not in skip]


def _compile_env(row: dict[str, Any], torch_compile_backend: str) -> dict[str, str]:
    """The worker environment that makes torch.compile use ``torch_compile_backend`` (none for Inductor, the
    default, so the rows keep the identity of the records made before the choice existed)."""
    check_choice("torch_compile_backend", torch_compile_backend, TORCH_COMPILE_BACKENDS)
    if row.get("backend") == "torch" and row.get("xla") == "jit" and torch_compile_backend != "inductor":
        return {TORCH_COMPILE_BACKEND_ENV: torch_compile_backend}
    return {}


def profile_config(model: str = "resnet50", image_size: int | None = None, batch_size: int = 32,
                   precision: str = "fp32", fused_bn: bool = False,
                   timing: Timing = DEFAULT_TIMING) -> BenchConfig:
    """A training configuration with ONEDNN_VERBOSE on: where a step's time goes (exactly ``timing.steps``
    timed steps, its ``min_time_s`` ignored: verbose logging slows them, so a time budget would only add
    steps; one process whatever ``timing.repeats``: a split of the step, not a speed). ``fused_bn``: batch
    norm runs as oneDNN primitives too, so the roofline covers it. One op at a time (``inter_op=1``): on
    TensorFlow's default inter-op pool independent ops overlap, each primitive then shares the cores with
    another and its time is not its own (the summed primitive time exceeded the step by 40 % with the fused
    batch norm)."""
    return validate(BenchConfig(model=model, image_size=image_size, batch_size=batch_size,
                                **timing.replace(min_time_s=0.0, repeats=1).fields(), onednn_profile=True,
                                gemm_check=True, precision=precision, fused_bn=fused_bn, inter_op=1,
                                label="oneDNN profile"))


def versus_configs(model: str = "resnet50_v1.5", image_size: int | None = None, batch_size: int = 32,
                   precisions: Sequence[str] = ("fp32", "bf16"), compile: bool = True,
                   torch_compile_backend: str = "inductor", timing: Timing = DEFAULT_TIMING) -> list[BenchConfig]:
    """Training rows at ``batch_size``: TensorFlow with the fused batch norm, native PyTorch eager
    (channels_last), and native PyTorch under ``torch.compile`` where ``compile``, for each precision."""
    check_choices("precisions", precisions, PRECISIONS)
    base = {"model": model, "image_size": image_size, "batch_size": batch_size, "mode": "train",
            **timing.fields(), "data_format": "channels_last"}
    out = []
    for p in precisions:
        out.append(BenchConfig(**base, precision=p, fused_bn=True, label=TF_LABEL))
        out.append(BenchConfig(**base, precision=p, backend="torch", impl="native", label=NATIVE_EAGER))
        if compile:
            compiled = {"backend": "torch", "impl": "native", "xla": "jit"}
            out.append(BenchConfig(**base, precision=p, **compiled, env=_compile_env(compiled, torch_compile_backend),
                                   label=NATIVE_COMPILED))
    return [validate(c) for c in out]


# How the MLPerf rows serve the TensorFlow model: as an inference deployment does (a frozen graph; Intel's TF
# reference models set the same variable), not as a training script calls it. Measured on the 2-core AMD EPYC,
# SingleStream p90 of each of 3 processes, interleaved (2026-12-04): the plain graph 60.6-63.9 ms, with the three
# settings below 44.6-47.8 ms, native PyTorch eager 62.0-76.5 ms; Offline at batch 32 +13 %
# (outputs/reference/hosts/amd-epyc-2cpus/single-stream-served/, which also says what each setting gave).
TF_INFERENCE: dict[str, Any] = {
    "fold_bn": True,  # batch norms folded into the convolutions: bias + ReLU post-ops, not four binary ones
    # one op at a time (a batch-1 ResNet is a chain): no measurable effect here, p90 per process 43.7-48.3 ms
    # against 44.6-49.8 with the default pool (the record's ablation-inter-op/); kept as the rows' identity
    "inter_op": 1,
    "env": {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"},  # oneDNN reorders each weight once, not every query
}


# How native PyTorch serves the model: its documented CPU inference path, torch.compile (Inductor) with freezing
# (batch norm folded, oneDNN weights prepacked) on a channels_last model under no_grad; bf16 through autocast
# (resnet_lab.steps.recipes.FRAMEWORK_RECIPES["torch"] cites each).
TORCH_INFERENCE: dict[str, Any] = {"xla": "jit", "data_format": "channels_last", "env": dict(recipes.TORCH_SERVED_ENV)}


def served(who: str, torch_compile_backend: str = "inductor") -> dict[str, Any]:
    """The fields of ``who``'s served inference row ("TensorFlow" or "native PyTorch"), each row its own mapping;
    torch.compile hands its graphs to ``torch_compile_backend`` (Inductor's freezing applies to Inductor only)."""
    spec = TF_INFERENCE if who == "TensorFlow" else {"backend": "torch", "impl": "native", **TORCH_INFERENCE}
    out = {"backend": "tensorflow", **{k: dict(v) if isinstance(v, dict) else v for k, v in spec.items()}}
    out["env"] = {**out.get("env", {}), **_compile_env(out, torch_compile_backend)}
    return out


def mlperf_configs(model: str = "resnet50_v1.5", image_size: int | None = None, queries: int = MLPERF_MIN_QUERIES,
                   offline_batch_sizes: Sequence[int] = (32,), native: bool = True,
                   precisions: Sequence[str] = ("fp32",), torch_compile_backend: str = "inductor",
                   timing: Timing = DEFAULT_TIMING) -> list[BenchConfig]:
    """SingleStream (batch 1, ``queries`` timed steps = queries, at least 10 warmup queries, no minimum time,
    at least 600 s before it is cut short) and Offline (each of ``offline_batch_sizes``, ``timing`` as it is)
    inference rows at each of ``precisions``, for TensorFlow (Keras model, graph mode, served as
    :data:`TF_INFERENCE` says) and native PyTorch (served as :data:`TORCH_INFERENCE` says). A reduced-precision
    row is checked against fp32 on photographs after its timing (its ``agree_*`` fields)."""
    check_int("queries", queries, 1)
    check_choices("precisions", precisions, PRECISIONS)
    for b in offline_batch_sizes:
        check_int("offline batch size", b, 1)
    # one query per timed step, every query timed: no time budget, and room for the slowest host
    single = timing.replace(steps=queries, warmup=max(timing.warmup, 10), min_time_s=0.0,
                            max_time_s=max(timing.max_time_s, 600.0))
    names = ["TensorFlow", "native PyTorch"] if native else ["TensorFlow"]
    out = []
    for precision in precisions:
        for name in names:
            base = {"model": model, "image_size": image_size, "mode": "infer", "precision": precision,
                    **served(name, torch_compile_backend)}
            out.append(BenchConfig(**base, batch_size=1, **single.fields(), label=f"{SINGLE_STREAM} · {name}"))
            for b in offline_batch_sizes:
                out.append(BenchConfig(**base, batch_size=int(b), **timing.fields(), label=f"{OFFLINE} · {name}"))
    return [validate(c) for c in out]


def engine_configs(model: str = "resnet50_v1.5", image_size: int | None = None, engines: Sequence[str] = ENGINES,
                   queries: int = MLPERF_MIN_QUERIES, offline_batch_sizes: Sequence[int] = (32,),
                   skip: Sequence[str] = (), export_dir: str | None = None, precisions: Sequence[str] = ("fp32",),
                   timing: Timing = DEFAULT_TIMING) -> list[BenchConfig]:
    """The MLPerf scenarios of :func:`mlperf_configs` on the other compilers (``engines``): SingleStream
    (``queries`` timed queries of one image, at least 10 untimed) and Offline (each of ``offline_batch_sizes``),
    inference of the exported model (``export_dir``: where it is made once; None: the export cache) at each of
    ``precisions``, each engine by its documented recipe for that batch (:func:`resnet_lab.steps.recipes.default`),
    labelled "SingleStream · IREE" like the TensorFlow and PyTorch rows, so one table holds them all. An
    engine that is not installed still gets its rows: they come back ``skipped``, naming the pip install; so does
    a bf16 row where the engine or the CPU has no bf16 path (the reason says which).
    ``skip``: rows left out by label ("Offline · IREE")."""
    check_choices("engines", engines, ENGINES)
    check_choices("precisions", precisions, ("fp32", "bf16"))
    labels = [f"{s} · {ENGINE_LABELS[e]}" for e in ENGINES for s in (SINGLE_STREAM, OFFLINE)]
    check_choices("engine_skip", skip, labels)
    check_int("engine queries", queries, 1)
    for b in offline_batch_sizes:
        check_int("engine offline batch size", b, 1)
    single = timing.replace(steps=queries, warmup=max(timing.warmup, 10), min_time_s=0.0,
                            max_time_s=max(timing.max_time_s, 600.0))
    out = []
    for precision in precisions:
        for engine in engines:
            base = {"model": model, "image_size": image_size, "mode": "infer", "backend": engine, "xla": "jit",
                    "export_dir": export_dir, "precision": precision}
            name = ENGINE_LABELS[engine]
            out.append(BenchConfig(**base, batch_size=1, **single.fields(), label=f"{SINGLE_STREAM} · {name}"))
            for b in offline_batch_sizes:
                out.append(BenchConfig(**base, batch_size=int(b), **timing.fields(), label=f"{OFFLINE} · {name}"))
    return [validate(c) for c in out if c.label not in skip]


# The knob sweep: per engine, the documented configuration and the alternatives its documents offer, at batch 1.
# TensorFlow and native PyTorch vary their own fields; IREE, ONNX Runtime and OpenVINO their recipes.
KNOB_LABEL = "knobs"
FRAMEWORK_KNOBS: dict[str, dict[str, dict[str, Any]]] = {
    "TensorFlow": {
        "served (documented)": served("TensorFlow"),
        "graph, Keras model as built": {"backend": "tensorflow"},
        "XLA jit_compile": {"backend": "tensorflow", "xla": "jit"},
    },
    "native PyTorch": {
        "compile + freezing (documented)": served("native PyTorch"),
        "compile, no freezing": {"backend": "torch", "impl": "native", "xla": "jit"},
        "eager": {"backend": "torch", "impl": "native"},
        "compile + freezing + C++ wrapper": {**served("native PyTorch"),
                                             "env": {**recipes.TORCH_SERVED_ENV, **recipes.TORCH_CPP_WRAPPER_ENV}},
    },
}


def knob_configs(model: str = "resnet50_v1.5", image_size: int | None = None, engines: Sequence[str] = ENGINES,
                 frameworks: Sequence[str] = tuple(FRAMEWORK_KNOBS), batch_size: int = 1, queries: int = 32,
                 skip: Sequence[str] = (), export_dir: str | None = None, torch_compile_backend: str = "inductor",
                 timing: Timing = DEFAULT_TIMING) -> list[BenchConfig]:
    """Every knob of :data:`FRAMEWORK_KNOBS` and every recipe of each engine (:data:`resnet_lab.steps.recipes.RECIPES`)
    at ``batch_size``, fp32 inference, ``queries`` timed queries after at least 10 untimed: the table that shows the
    quoted row is each engine's best documented configuration here. Labels: "knobs · ENGINE · CONFIGURATION";
    ``skip``: labels left out."""
    check_choices("engines", engines, ENGINES)
    check_choices("frameworks", frameworks, list(FRAMEWORK_KNOBS))
    check_int("knob queries", queries, 1)
    single = timing.replace(steps=queries, warmup=max(timing.warmup, 10), min_time_s=0.0,
                            max_time_s=max(timing.max_time_s, 600.0))
    base = {"model": model, "image_size": image_size, "mode": "infer", "batch_size": batch_size, **single.fields()}
    out = []
    for who in frameworks:
        for knob, fields in FRAMEWORK_KNOBS[who].items():
            spec = {k: dict(v) if isinstance(v, dict) else v for k, v in fields.items()}
            spec["env"] = {**spec.get("env", {}), **_compile_env(spec, torch_compile_backend)}
            out.append(BenchConfig(**base, **spec, label=f"{KNOB_LABEL} · {who} · {knob}"))
    for engine in engines:
        documented = recipes.default(engine, batch_size)
        for name in recipes.names(engine):
            tag = f"{name} (documented)" if name == documented and name != "documented" else name
            out.append(BenchConfig(**base, backend=engine, xla="jit", export_dir=export_dir, recipe=name,
                                   label=f"{KNOB_LABEL} · {ENGINE_LABELS[engine]} · {tag}"))
    check_choices("knob_skip", skip, [c.label for c in out])
    return [validate(c) for c in out if c.label not in skip]
