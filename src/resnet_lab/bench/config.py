"""What one benchmark configuration is, and whether it can run: every knob that changes the number.

:class:`BenchConfig` is one row's configuration; :func:`validate` checks it in milliseconds, before any
framework is imported (one line, :class:`~resnet_lab.core.errors.UsageError`); :func:`expand` turns a sweep
spec (base, configs, sweep) into configurations; :func:`configs_2017` gives today's versions of the 2017
note's rows. Plain Python: nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from resnet_lab import models
from resnet_lab.bench import identity
from resnet_lab.bench.timing import DEFAULT as TIMING
from resnet_lab.bench.timing import check_timing
from resnet_lab.core import host
from resnet_lab.core.choices import (
    BACKENDS,
    COLLECTIVES,
    DATA_FORMATS,
    DEVICES,
    ENGINES,
    IMPLS,
    MODES,
    ONEDNN_MODES,
    PRECISIONS,
    TORCH_COMPILE_BACKEND_ENV,
    TORCH_COMPILE_BACKENDS,
    XLA_MODES,
    check_bool,
    check_choice,
    check_int,
    check_keys,
)
from resnet_lab.core.errors import UsageError
from resnet_lab.scaleout import cluster
from resnet_lab.steps import recipes

# What "xla" means on each backend: the compiler that ran the step (the row's `compiler` field).
COMPILERS = {
    ("tensorflow", "off"): "TensorFlow graph (tf.function, jit_compile=False)",
    ("tensorflow", "jit"): "XLA (tf.function, jit_compile=True)",
    ("tensorflow", "auto"): "TensorFlow graph + XLA auto-clustering",
    ("jax", "jit"): "XLA (jax.jit of the whole step)",
    ("jax", "off"): "JAX eager (op by op; each primitive a cached XLA computation)",
    ("torch", "jit"): "TorchInductor (torch.compile of the whole step)",
    ("torch", "off"): "PyTorch eager",
    # The other compilers always compile (xla "jit"); the row's compiler field states their flags and hints
    # (resnet_lab.steps.engine_step), these are the names before a worker ran.
    ("iree", "jit"): "IREE llvm-cpu (the exported StableHLO module)",
    ("onnxruntime", "jit"): "ONNX Runtime CPU EP (the exported ONNX model)",
    ("openvino", "jit"): "OpenVINO CPU plugin (the exported ONNX model)",
}
# The native PyTorch model (impl "native") runs with the same compilers as Keras' torch backend, without Keras.
NATIVE_COMPILERS = {"jit": "TorchInductor (torch.compile of the native step)", "off": "PyTorch eager (native)"}

# The TF_XLA_FLAGS of the 2017 "global jit" method: auto-clustering of every tf.function graph, on CPU too.
AUTO_JIT_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"

# TensorFlow logs this line (INFO, once per process) the first time an XLA cluster is compiled: with
# jit_compile=True and with auto-clustering alike. The worker's stderr is searched for it: "what ran".
XLA_COMPILED_MARKER = "Compiled cluster using XLA"

# Environment variables that let oneDNN compute fp32 primitives in a lower precision.
FPMATH_ENV = ("ONEDNN_DEFAULT_FPMATH_MODE", "TF_SET_ONEDNN_FPMATH_MODE")
# Auto-clustering compiles clusters lazily (per signature, after repeated requests) and may run them as
# TF kernels meanwhile: its warmup is at least this long.
AUTO_MIN_WARMUP = 2
# torch.compile keeps compiling (recompiles, resumed frames) for the first few calls of a Keras model.
TORCH_COMPILE_MIN_WARMUP = 3


@dataclass
class BenchConfig:
    """One benchmark configuration: every knob that changes the number. Batch size is per replica."""

    model: str = "resnet50"
    backend: str = "tensorflow"         # Keras backend: tensorflow | jax | torch
    impl: str = "keras"                 # keras | native: the model in plain torch.nn, no Keras (backend torch)
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
    fused_bn: bool = False              # batch norm through TF's fused kernel (models.build(fused_bn=True))
    fold_bn: bool = False               # inference: BN folded into the convolutions (models.fold_batch_norms)
    # how long and in how many processes it is timed: bench.timing's one default
    warmup: int = TIMING.warmup         # untimed steps after the first (compiling) call
    steps: int = TIMING.steps           # timed steps: at least this many ...
    min_time_s: float = TIMING.min_time_s  # ... and at least this long (0: exactly `steps`) ...
    max_time_s: float = TIMING.max_time_s  # ... but no longer: a row cut short of `steps` has status "short"
    repeats: int = TIMING.repeats       # fresh processes, in interleaved rounds; one row, interval from their spread
    env: dict[str, str] = field(default_factory=dict)  # extra environment (TF_ONEDNN_*, KMP_*, XLA_FLAGS)
    gemm_check: bool = False            # also time GEMMs in the worker: the peak available right now
    onednn_profile: bool = False        # ONEDNN_VERBOSE: timed steps split into oneDNN primitives + rest
    label: str = ""                     # a name for the row, e.g. "2017: CPU MKL"
    timeout_s: float = TIMING.timeout_s  # seconds before the row's process is stopped (a timeout row)
    # Multi-worker: MultiWorkerMirroredStrategy over TF_CONFIG (see resnet_lab.scaleout.cluster); off when None.
    workers: list[str] | None = None    # host:port of every worker, the same list on every host
    task_index: int | None = None       # this process's index in workers; 0 is the chief (writes the row)
    collective: str = "auto"            # auto | ring | nccl (CommunicationOptions implementation)
    peer_timeout_s: float = 120.0       # peers must join, heartbeat and end each step within this
    baseline_images_per_sec: float | None = None  # one worker's images/sec for scaling efficiency
    measure_baseline: bool = True       # no baseline given: measure it (one-process run) before joining
    export_dir: str | None = None       # engines: where the exported model lives (None: the export cache)
    recipe: str = ""                    # engines: a documented recipe of resnet_lab.steps.recipes ("": the default)

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.replicas * (len(self.workers) if self.workers else 1)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        check_keys("benchmark configuration", d, sorted(names))
        d = dict(d)
        if "env" in d:
            d["env"] = {str(k): str(v) for k, v in (d["env"] or {}).items()}
        return cls(**d)


def config_key(cfg: BenchConfig) -> str:
    """Configurations with the same key are measured once in a run: the same identity and protocol
    (:data:`~resnet_lab.bench.identity.SAME_RUN`: every field but the label)."""
    return json.dumps({k: getattr(cfg, k) for k in identity.SAME_RUN}, sort_keys=True)


def unique(cfgs: Iterable[BenchConfig]) -> list[BenchConfig]:
    """``cfgs`` in order, each :func:`config_key` once: the first label is kept."""
    seen: set[str] = set()
    out = []
    for cfg in cfgs:
        key = config_key(cfg)
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out


# What a framework reads when it is imported or first initialises (environment, thread pools, devices):
# configurations that agree on these may run one after another in one worker process.
PROCESS_FIELDS = ("backend", "device", "onednn", "replicas", "intra_op", "inter_op", "env", "onednn_profile",
                  "workers", "task_index", "collective", "peer_timeout_s")


def process_key(cfg: BenchConfig) -> str | None:
    """Configurations with the same key may share a worker process; None: this one needs its own (a
    multi-worker run; oneDNN's verbose log, read per process). TensorFlow's auto-clustering is an import-time
    flag, so ``xla`` is part of the key where it is ``auto``."""
    if cfg.workers or cfg.onednn_profile:
        return None
    d = {k: getattr(cfg, k) for k in PROCESS_FIELDS}
    d["xla_auto"] = cfg.xla == "auto"
    return json.dumps(d, sort_keys=True)


def resolve_model(name: str) -> dict[str, Any]:
    """``{"name", "default_image_size", "num_classes"}`` of a zoo model (:mod:`resnet_lab.models`).

    Unknown names raise UsageError listing the valid ones. Never imports a framework.
    """
    spec = models.get_spec(name)
    return {"name": name, "default_image_size": spec.input_size, "num_classes": spec.num_classes}


def validate(cfg: BenchConfig) -> BenchConfig:
    """Raise UsageError (one line, before any TensorFlow import) if ``cfg`` cannot be run as asked."""
    resolve_model(cfg.model)
    check_choice("backend", cfg.backend, BACKENDS)
    check_choice("impl", cfg.impl, IMPLS)
    check_choice("mode", cfg.mode, MODES)
    check_choice("precision", cfg.precision, PRECISIONS)
    check_choice("xla", cfg.xla, XLA_MODES)
    check_choice("onednn", cfg.onednn, ONEDNN_MODES)
    check_choice("device", cfg.device, DEVICES)
    check_choice("data_format", cfg.data_format, DATA_FORMATS)
    check_choice("collective", cfg.collective, COLLECTIVES)
    check_int("batch size", cfg.batch_size, 1)
    check_int("image size", cfg.image_size, 8, optional=True)
    check_int("replicas", cfg.replicas, 1)
    check_int("intra-op threads", cfg.intra_op, 1, optional=True)
    check_int("inter-op threads", cfg.inter_op, 1, optional=True)
    check_timing(cfg.steps, cfg.warmup, cfg.min_time_s, cfg.max_time_s, cfg.timeout_s)
    check_int("repeats", cfg.repeats, 1)
    if cfg.repeats > 1 and cfg.workers:
        raise UsageError("repeats > 1 with workers: a multi-worker row is one run of the whole cluster; "
                         "repeat the command on every host instead")
    if cfg.repeats > 1 and cfg.onednn_profile:
        raise UsageError("repeats > 1 with onednn_profile: the profile splits one process's steps "
                         "(a split, not a speed); profile once")
    check_bool("gemm_check", cfg.gemm_check)
    check_bool("onednn_profile", cfg.onednn_profile)
    check_bool("fused_bn", cfg.fused_bn)
    check_bool("fold_bn", cfg.fold_bn)
    if cfg.fold_bn:
        if cfg.mode != "infer":
            raise UsageError(f"fold_bn: a model with its batch norms folded into the convolutions is an inference "
                             f"model; mode infer, not {cfg.mode!r}")
        if cfg.impl != "keras" or cfg.backend in ENGINES:
            raise UsageError(f"fold_bn folds the Keras model's batch norms (impl keras on tensorflow, jax, torch); "
                             f"{cfg.backend if cfg.backend in ENGINES else 'native PyTorch'} runs its own model")
        models.check_foldable(cfg.model, cfg.fold_bn, cfg.fused_bn)
    if not isinstance(cfg.env, dict):
        raise UsageError(f"env: {cfg.env!r} is not a mapping of NAME to value")
    if TORCH_COMPILE_BACKEND_ENV in cfg.env:
        check_choice(TORCH_COMPILE_BACKEND_ENV, cfg.env[TORCH_COMPILE_BACKEND_ENV], TORCH_COMPILE_BACKENDS)
    _check_backend(cfg)
    if cfg.backend in recipes.RECIPES:  # the recipe by name, so a row says which configuration it measured
        cfg.recipe = recipes.resolve(cfg.backend, cfg.recipe, cfg.batch_size).name
    elif cfg.recipe:
        raise UsageError(f"recipe {cfg.recipe!r}: only {', '.join(recipes.RECIPES)} take a recipe; {cfg.backend} "
                         f"is configured by the row's own fields")
    if cfg.image_size is not None:
        models.check_input_shape(cfg.model, (cfg.image_size, cfg.image_size, 3))  # too small, odd sizes
    cluster.check(cfg)  # workers, task index, collective, peer timeout, baseline
    return cfg


def _check_backend(cfg: BenchConfig) -> None:
    """The knobs that exist only on some backends (one line saying which, before anything is imported)."""
    if cfg.impl == "native":
        if cfg.backend != "torch":
            raise UsageError(f"impl 'native' is the model in plain PyTorch: backend torch, not {cfg.backend}")
        if models.get_spec(cfg.model).builder != "resnet_lab":
            raise UsageError(f"impl 'native': {cfg.model} is Keras' own model; take a zoo model "
                             f"(resnet50_v1.5 is torchvision's resnet50)")
    if cfg.backend == "tensorflow":
        return
    if cfg.backend in ENGINES:
        _check_engine(cfg)
        return
    who = cfg.backend
    if cfg.fused_bn:
        raise UsageError(f"fused_bn is TensorFlow's FusedBatchNormV3; on {who} Keras' batch norm is the only one")
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


def _check_engine(cfg: BenchConfig) -> None:
    """What the other compilers run here: the exported fp32 inference model, compiled, on one CPU process."""
    who = cfg.backend
    lacks = [(cfg.mode != "infer", f"mode {cfg.mode!r}: {who} runs the exported inference model; mode infer "
                                   ),
             (cfg.precision not in ("fp32", "bf16"), f"precision {cfg.precision!r}: {who} runs the fp32 export, "
                                                     f"in fp32 or as its recipe's bf16; precision fp32 or bf16"),
             (cfg.xla != "jit", f"xla {cfg.xla!r}: {who} always compiles the exported model; xla jit"),
             (cfg.onednn != "on", f"onednn {cfg.onednn!r}: not a knob of {who}; leave onednn at 'on' (row: n/a)"),
             (cfg.device != "cpu", f"device {cfg.device!r}: {who} runs on the CPU here; device cpu"),
             (cfg.replicas != 1, f"replicas {cfg.replicas}: {who} runs one replica"),
             (cfg.impl != "keras", f"impl {cfg.impl!r}: {who} runs the Keras model's export; impl keras"),
             (cfg.data_format != "channels_last", f"data_format {cfg.data_format!r}: the export is NHWC; "
                                                  f"channels_last"),
             (cfg.fused_bn, f"fused_bn: TensorFlow's kernel, not a knob of {who}"),
             (cfg.onednn_profile, f"onednn_profile: not a knob of {who}"),
             (bool(cfg.workers), f"workers: {who} rows run on one host"),
             (cfg.inter_op is not None and who != "onnxruntime",
              f"inter-op threads: ONNX Runtime's knob; {who} takes intra-op threads only")]
    for bad, message in lacks:
        if bad:
            raise UsageError(message)


def expand(spec: dict[str, Any]) -> list[BenchConfig]:
    """Configurations of a sweep spec, validated, in a stable order, duplicates dropped.

    ``spec = {"base": {...}, "configs": [{...}, ...], "sweep": {"field": [v1, v2], ...}}``: each entry
    of ``configs`` (default: one empty override) is laid over ``base``, then crossed with the cartesian
    product of ``sweep`` (first key varies slowest). Values are BenchConfig fields; ``env`` dicts merge.
    Configurations that differ only in their label are measured once (the first label is kept).
    """
    if not isinstance(spec, dict):
        raise UsageError("a sweep spec is a mapping with keys base, configs, sweep")
    check_keys("sweep spec", spec, ("base", "configs", "sweep"))
    base = dict(spec.get("base") or {})
    overrides = list(spec.get("configs") or [{}])
    sweep = dict(spec.get("sweep") or {})
    for key, values in sweep.items():
        if not isinstance(values, list | tuple) or not values:
            raise UsageError(f"sweep values for {key!r} must be a non-empty list, got {values!r}")
    keys = list(sweep)
    out: list[BenchConfig] = []
    for override in overrides:
        for combo in itertools.product(*(sweep[k] for k in keys)):
            d = {**base, **override, **dict(zip(keys, combo, strict=True))}
            d["env"] = {**(base.get("env") or {}), **(override.get("env") or {}),
                        **(dict(zip(keys, combo, strict=True)).get("env") or {})}
            out.append(validate(BenchConfig.from_dict(d)))
    return unique(out)


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


def compiler_name(cfg: BenchConfig) -> str:
    """What compiles (or runs) the step of ``cfg``: the row's ``compiler`` field."""
    name = NATIVE_COMPILERS[cfg.xla] if cfg.impl == "native" else COMPILERS[(cfg.backend, cfg.xla)]
    backend = cfg.env.get(TORCH_COMPILE_BACKEND_ENV, "inductor")
    if cfg.backend == "torch" and cfg.xla == "jit" and backend != "inductor":
        # "torch.compile of the whole step, backend aot_eager (no Inductor code generation)"
        name = name.removeprefix("TorchInductor (").removesuffix(")")
        name = f"{name}, backend {backend} (no Inductor code generation)"
    return name


def math_dtype(cfg: BenchConfig) -> str:
    """The dtype the matrix units really multiply in: the precision, unless an fp32 row lets oneDNN do its
    fp32 convolutions and matmuls in bf16 (``ONEDNN_DEFAULT_FPMATH_MODE``/``TF_SET_ONEDNN_FPMATH_MODE``
    = BF16): then it is bf16, and MFU is against the bf16 peak. Such a row is not an fp32 result.

    On a GPU an fp32 row's convolutions run on TF32 tensor cores: cuDNN under PyTorch
    (``torch.backends.cudnn.allow_tf32`` is on by default) and XLA's default precision under JAX both allow
    it. Its math dtype is tf32, and its GEMM check times TF32 products, not true fp32 (7x slower on an H200)."""
    modes = {cfg.env.get(k, "").strip().upper() for k in FPMATH_ENV}
    if cfg.precision == "fp32" and cfg.onednn == "on" and modes & {"BF16", "ANY"}:
        return "bf16"
    if cfg.precision == "fp32" and cfg.device == "gpu" and cfg.backend in ("jax", "torch"):
        return "tf32"
    return cfg.precision


def emulation_reason(cfg: BenchConfig, caps: host.Capabilities | None = None) -> str | None:
    """None where this host computes ``cfg``'s math (:func:`math_dtype`) in its own instructions; else one line
    saying why its row would time emulation (:meth:`resnet_lab.core.host.Capabilities.emulation_reason`). Every row
    asks this, framework or engine, before its process starts: such a row is skipped with the reason, never timed
    as a result. A GPU row is not asked: the GPUs this workbook runs on (an H100, an H200) have every precision."""
    if cfg.device != "cpu":
        return None
    return (caps or host.capabilities()).emulation_reason(math_dtype(cfg))


def min_warmup(cfg: BenchConfig) -> int:
    """The configured warmup, raised to what a lazily compiling mode needs before its steady state."""
    if cfg.xla == "auto":
        return max(cfg.warmup, AUTO_MIN_WARMUP)
    if cfg.backend == "torch" and cfg.xla == "jit":
        return max(cfg.warmup, TORCH_COMPILE_MIN_WARMUP)
    return cfg.warmup


def slug(cfg: BenchConfig) -> str:
    """``cfg``'s name (:func:`~resnet_lab.bench.identity.describe`) as a file name, with which worker of a
    cluster it is (every worker of one configuration writes its own log)."""
    name = re.sub(r"[^0-9a-z.]+", "-", identity.describe(cfg).lower()).strip("-")[:120]
    return name + (f"-w{len(cfg.workers)}t{cfg.task_index}" if cfg.workers else "")
