"""What a benchmark worker process does: set one configuration up on its backend, time its steps.

Runs inside :mod:`resnet_lab.bench.worker_child` (a fresh process per configuration, started by
:mod:`resnet_lab.bench.launcher`). The parent has already set the environment a framework reads at import
(oneDNN, XLA flags, visible devices, ``KERAS_BACKEND``); thread pools and logical devices are set here,
before the framework runs its first op. The result is raw: per-step times and facts; the parent turns it
into a row (:mod:`resnet_lab.bench.rows`).

Every backend builds the model through :func:`resnet_lab.models.build`, counts its FLOPs with
:func:`resnet_lab.models.describe` and runs the step of :mod:`resnet_lab.steps` for that backend.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from resnet_lab import export, models
from resnet_lab.bench import stats
from resnet_lab.bench.config import BenchConfig, emulation_reason, math_dtype, min_warmup
from resnet_lab.ceilings import gemm, profile
from resnet_lab.core import hostload, provenance
from resnet_lab.core.choices import DTYPE_POLICIES, ENGINES
from resnet_lab.core.text import one_line
from resnet_lab.scaleout.cluster_worker import Worker
from resnet_lab.steps import common, engine_step, jax_step, recipes, tf_step, torch_step

# The module a backend's row imports first (its import time, ``import_s``): the framework, or the engine's runtime.
IMPORTS = {"iree": "iree.runtime"}


# ------------------------------------------------------------------------------------- measurement
def time_steps(step: Callable[[], Any], sync: Callable[[Any], Any], steps: int, markers: bool = False,
               min_time_s: float = 0.0, max_time_s: float = math.inf) -> dict[str, Any]:
    """Timed steps, each timed around the call and the read-back that waits for it: at least ``steps`` of
    them and at least ``min_time_s`` seconds, but stopping after ``max_time_s`` (even short of ``steps``).

    Returns the per-step wall times and, over the whole timed window, wall time, process CPU time and the
    host's busy share from /proc/stat (so the parent can tell our CPU use from everybody else's).
    ``markers`` frames each step in stdout for :func:`resnet_lab.ceilings.profile.parse_onednn_verbose`.
    """
    times: list[float] = []
    stat0, cpu0, w0 = hostload.proc_stat(), hostload.process_cpu_seconds(), time.perf_counter()
    while True:
        elapsed = time.perf_counter() - w0
        if times and elapsed >= max_time_s:
            break
        if len(times) >= steps and elapsed >= min_time_s:
            break
        if markers:
            print(f"{profile.STEP_START} {time.perf_counter()}", flush=True)
        t0 = time.perf_counter()
        sync(step())
        times.append(time.perf_counter() - t0)
        if markers:
            print(f"{profile.STEP_END} {time.perf_counter()}", flush=True)
    wall, cpu, stat1 = time.perf_counter() - w0, hostload.process_cpu_seconds() - cpu0, hostload.proc_stat()
    host = stats.host_utilization(stat0, stat1) if stat0 and stat1 else None
    return {"step_times": times, "timed_s": wall, "cpu_seconds": cpu, "host_util": host}


def bare_loop(step: Callable[[], Any], sync: Callable[[Any], Any], steps: int) -> float:
    """The reference the harness is checked against: ``steps`` calls, one read-back at the end; seconds."""
    t0 = time.perf_counter()
    out = None
    for _ in range(steps):
        out = step()
    sync(out)
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------ setup
def configure_tf(cfg: BenchConfig) -> dict[str, Any]:
    """Threads and devices, before TensorFlow runs anything. Returns facts for the row, or a skip reason.

    In a process that already ran a configuration (the same :func:`~resnet_lab.bench.config.process_key`,
    so the same threads and devices) TensorFlow's context exists and these settings are already in place.
    """
    import tensorflow as tf

    if cfg.intra_op is not None and tf.config.threading.get_intra_op_parallelism_threads() != cfg.intra_op:
        tf.config.threading.set_intra_op_parallelism_threads(cfg.intra_op)
    if cfg.inter_op is not None and tf.config.threading.get_inter_op_parallelism_threads() != cfg.inter_op:
        tf.config.threading.set_inter_op_parallelism_threads(cfg.inter_op)
    if cfg.workers:  # the cluster is part of TensorFlow's context: joined before anything initialises it
        return Worker(cfg).configure()
    facts: dict[str, Any] = {}
    if cfg.device == "cpu":
        with contextlib.suppress(ValueError, RuntimeError):
            tf.config.set_visible_devices([], "GPU")
        if cfg.replicas > 1 and tf.config.get_logical_device_configuration(
                tf.config.list_physical_devices("CPU")[0]) is None:  # N logical CPUs: MirroredStrategy emulated
            cpu = tf.config.list_physical_devices("CPU")[0]
            logical = [tf.config.LogicalDeviceConfiguration() for _ in range(cfg.replicas)]
            tf.config.set_logical_device_configuration(cpu, logical)
        devices = [d.name for d in tf.config.list_logical_devices("CPU")][: cfg.replicas]
    else:
        gpus = tf.config.list_physical_devices("GPU")
        if len(gpus) < cfg.replicas:
            return {"skip": f"{cfg.replicas} GPU(s) asked for, TensorFlow sees {len(gpus)} "
                            f"(built with CUDA: {tf.test.is_built_with_cuda()})"}
        for g in gpus:
            with contextlib.suppress(RuntimeError):  # already initialised: set by the process's first row
                tf.config.experimental.set_memory_growth(g, True)
        devices = [d.name for d in tf.config.list_logical_devices("GPU")][: cfg.replicas]
    facts["devices"] = devices
    return facts


def setup(cfg: BenchConfig) -> dict[str, Any]:
    """Build everything the timed loop needs: returns {"step": callable, "sync": callable, facts...}, or
    {"skip": reason} where this host cannot run ``cfg``. One function per Keras backend."""
    if cfg.backend in ENGINES:
        return setup_engine(cfg)
    return {"tensorflow": setup_tensorflow, "jax": setup_jax, "torch": setup_torch}[cfg.backend](cfg)


def _model_facts(cfg: BenchConfig) -> tuple[int, int, tuple[int, ...], int]:
    """(image size, classes, one image's shape in the configured data format, forward MACs per image)."""
    spec = models.get_spec(cfg.model)
    image_size = cfg.image_size or spec.input_size
    shape = (3, image_size, image_size) if cfg.data_format == "channels_first" else \
        (image_size, image_size, 3)
    macs = models.describe(cfg.model, input_shape=shape, num_classes=spec.num_classes,
                           data_format=cfg.data_format)["forward_macs"]
    return image_size, spec.num_classes, shape, int(macs)


def _build(cfg: BenchConfig, shape: tuple[int, ...], num_classes: int) -> tuple[Any, dict[str, Any]]:
    """The configuration's Keras model, and the check fields of its folding (none where ``fold_bn`` is off).

    With ``fold_bn`` the model is built as every row builds it, folded (:func:`resnet_lab.models.fold_batch_norms`),
    and the folded model's logits on one fixed batch are compared with the model's before any timing: a fold
    that changed the answer makes the row an error, never a speed."""
    model = models.build(cfg.model, input_shape=shape, num_classes=num_classes, data_format=cfg.data_format,
                         dtype_policy=DTYPE_POLICIES[cfg.precision], fused_bn=cfg.fused_bn)
    if not cfg.fold_bn:
        return model, {}
    import keras
    import numpy as np

    folded = models.fold_batch_norms(cfg.model, model)
    x = np.random.default_rng(0).uniform(size=(2, *shape)).astype("float32")

    def logits(m: Any) -> Any:  # TensorFlow: as a graph (eager calls and frozen oneDNN weights disagree, see agree)
        out = tf_step.make_infer_step(m, jit_compile=False)(x) if cfg.backend == "tensorflow" else m(x, training=False)
        return keras.ops.convert_to_numpy(out).astype("float32")

    check = export.compare(logits(folded), logits(model), cfg.precision)
    if not check["check_ok"]:
        check["fail"] = export.check_reason(check)
    return folded, check


def _facts(cfg: BenchConfig, image_size: int, macs: int, step_module: str) -> dict[str, Any]:
    return {"image_size": image_size, "forward_macs": macs, "flops_source": "models.describe",
            "model_source": models.get_spec(cfg.model).builder, "step_source": step_module}


def setup_jax(cfg: BenchConfig) -> dict[str, Any]:
    """The JAX step of :mod:`resnet_lab.steps.jax_step`; replicas > 1 through Keras' DataParallel
    distribution (emulated on CPU as XLA host devices, see :func:`resnet_lab.bench.launcher.worker_env`)."""
    image_size, num_classes, shape, macs = _model_facts(cfg)
    import jax
    import keras

    try:
        devices = jax.devices(cfg.device)
    except RuntimeError as exc:
        return {"skip": f"JAX sees no {cfg.device} device ({one_line(exc, 200)})"}
    if len(devices) < cfg.replicas:
        return {"skip": f"{cfg.replicas} {cfg.device} replicas asked for, JAX sees {len(devices)}"}
    devices = devices[: cfg.replicas]
    distribution = None
    if cfg.replicas > 1:
        distribution = keras.distribution.DataParallel(devices=devices)
        keras.distribution.set_distribution(distribution)
    with jax.default_device(devices[0]):
        model, check = _build(cfg, shape, num_classes)
        optimizer = common.make_optimizer(model) if cfg.mode == "train" else None
        images, labels = jax_step.jax_batch(cfg.global_batch, shape, num_classes,
                                            device=None if distribution else devices[0])
    if distribution is not None:  # the batch split across the replicas, as the data layout says
        images, labels = (keras.distribution.distribute_tensor(x, distribution.get_data_layout(x.shape))
                          for x in (images, labels))
    batch = (images, labels) if cfg.mode == "train" else (images,)
    step = jax_step.JaxStep(model, optimizer, cfg.mode, batch, compile=cfg.xla == "jit")
    return {"step": step, "sync": jax_step.jax_sync, "model": model, **_facts(cfg, image_size, macs, jax_step.__name__),
            "devices": [str(d) for d in devices], "compute_dtype": common.compute_dtype(model),
            "xla_ran": cfg.xla == "jit", "onednn_ran": None, "compile_stats": dict,
            "versions": {"jax": jax.__version__, "keras": keras.__version__}, **check}


def setup_torch(cfg: BenchConfig) -> dict[str, Any]:
    """The PyTorch step of :mod:`resnet_lab.steps.torch_step`, eager or under ``torch.compile``."""
    image_size, num_classes, shape, macs = _model_facts(cfg)
    import torch

    if cfg.intra_op is not None:
        torch.set_num_threads(cfg.intra_op)
    if cfg.inter_op is not None and torch.get_num_interop_threads() != cfg.inter_op:  # once per process
        torch.set_num_interop_threads(cfg.inter_op)
    torch.backends.mkldnn.enabled = cfg.onednn == "on"
    if cfg.device == "gpu" and not torch.cuda.is_available():
        return {"skip": f"torch {torch.__version__} sees no CUDA device"}
    if cfg.impl == "native":
        return setup_torch_native(cfg, image_size, num_classes, macs)
    import keras

    device = "cuda" if cfg.device == "gpu" else "cpu"
    model, check = _build(cfg, shape, num_classes)
    optimizer = common.make_optimizer(model) if cfg.mode == "train" else None
    images, labels = torch_step.torch_batch(cfg.batch_size, shape, num_classes, device=device)
    batch = (images, labels) if cfg.mode == "train" else (images,)
    step, compile_stats = torch_step.make_torch_step(model, optimizer, cfg.mode, batch, compile=cfg.xla == "jit")
    return {"step": step, "sync": torch_step.torch_sync, **_facts(cfg, image_size, macs, torch_step.__name__),
            "devices": [device], "compute_dtype": common.compute_dtype(model), "xla_ran": None,  # no XLA on torch
            "onednn_ran": bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled),
            "compile_stats": compile_stats,
            "versions": {"torch": torch.__version__, "keras": keras.__version__}, **check}


def setup_torch_native(cfg: BenchConfig, image_size: int, num_classes: int, macs: int) -> dict[str, Any]:
    """The model in plain ``torch.nn`` (:func:`resnet_lab.models.build_torch`: torchvision's function where it
    imports, else the same layer plan) and :func:`resnet_lab.steps.torch_step.make_native_step`; no Keras.
    ``channels_last`` is PyTorch's memory format (the tensors stay NCHW), as a PyTorch user sets it on CPU."""
    import torch

    device = "cuda" if cfg.device == "gpu" else "cpu"
    fmt = torch.channels_last if cfg.data_format == "channels_last" else torch.contiguous_format
    model, source = models.build_torch(cfg.model, num_classes=num_classes)
    model = model.to(device=device, memory_format=fmt)
    images, labels = torch_step.torch_batch(cfg.batch_size, (3, image_size, image_size), num_classes, device=device)
    images = images.contiguous(memory_format=fmt)
    batch = (images, labels) if cfg.mode == "train" else (images,)
    step, compile_stats = torch_step.make_native_step(model, cfg.mode, batch, compile=cfg.xla == "jit",
                                                      precision=cfg.precision)
    facts = _facts(cfg, image_size, macs, f"{torch_step.__name__}.make_native_step")
    facts["model_source"] = source
    dtype = torch_step.AUTOCAST[cfg.precision]
    if cfg.mode == "infer" and dtype:  # reduced precision: against the same module in fp32, on photographs
        def agree() -> dict[str, Any]:
            from resnet_lab.export.photos import photographs

            photos = torch.from_numpy(photographs(image_size, "channels_first")).to(device).contiguous(
                memory_format=fmt)
            with torch.no_grad():
                ref = model(photos).float().cpu().numpy()
            out = photos_run(lambda x: step.call(x.contiguous(memory_format=fmt)).float().cpu().numpy(), photos,
                             cfg.batch_size)
            return export.agreement(out, ref, cfg.precision)

        facts["agree"] = agree
    return {"step": step, "sync": torch_step.torch_sync, **facts, "devices": [device], "model": model,
            "compute_dtype": f"{dtype} (autocast)" if dtype else "float32", "xla_ran": None,
            "onednn_ran": bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled),
            "compile_stats": compile_stats, "versions": {"torch": torch.__version__}}


def setup_engine(cfg: BenchConfig) -> dict[str, Any]:
    """An engine's inference step (:mod:`resnet_lab.steps.engine_step`) on the export's reference batch, its
    output checked against Keras' logits before anything is timed (:func:`resnet_lab.export.compare`): a row
    that disagrees ends here with status ``error`` and its difference, never timed. The launcher made the
    export (:func:`resnet_lab.export.ensure`) before it started this process."""
    import numpy as np

    if cfg.precision != "fp32" and (why := recipes.bf16_reason(cfg.backend)):  # the host's part: emulation_reason
        return {"skip": why}
    image_size, _, _, macs = _model_facts(cfg)
    where = export.folder(cfg.export_dir, cfg.model, image_size)
    ref = np.load(where / export.reference_file(cfg.batch_size))
    layout = (lambda x: x) if cfg.backend == "iree" else export.onnx_input
    images = np.ascontiguousarray(layout(ref["images"]))
    step, facts = engine_step.make_engine_step(cfg.backend, where, images, cfg.intra_op, cfg.inter_op,
                                               stablehlo=export.stablehlo_file(cfg.batch_size), recipe=cfg.recipe,
                                               precision=cfg.precision)
    check = export.compare(step(), ref["logits"], cfg.precision)
    if cfg.precision != "fp32" and (check["check_max_rel"] or 0.0) < export.TOLERANCE["fp32"] / 10:
        return {"skip": f"{cfg.backend}'s {cfg.precision} settings changed nothing: its logits equal fp32's to "
                        f"{check['check_max_rel']:.1e} of the largest, so no value was rounded to {cfg.precision} and "
                        f"the row would time fp32 ({facts['compiler']})"}
    photos = np.load(where / export.PHOTOS)
    out = {"step": step, "sync": _engine_sync, **_facts(cfg, image_size, macs, engine_step.__name__),
           "model_source": f"export {where.name} ({export.read_manifest(where).get('onnx_exporter', '')})"
           if cfg.backend != "iree" else f"export {where.name} (StableHLO of jax.jit, weights closed over)",
           "devices": ["cpu"], "compute_dtype": "float32" if cfg.precision == "fp32" else f"{cfg.precision} (recipe)",
           "onednn_ran": None, "xla_ran": None,
           "engine_compile_s": facts["compile_s"], "compiler": facts["compiler"],
           "compile_stats": lambda: facts["engine_facts"], "versions": {}, **check,
           "agree": lambda: export.agreement(photos_run(step.call, layout(photos["images"]), cfg.batch_size),
                                             photos["logits"], cfg.precision)}
    if not check["check_ok"]:
        out["fail"] = export.check_reason(check)
    return out


def photos_run(call: Callable[[Any], Any], images: Any, batch_size: int) -> Any:
    """``call`` over the photographs ``batch_size`` at a time (:func:`resnet_lab.export.photos.run_in_batches`)."""
    from resnet_lab.export.photos import run_in_batches

    return run_in_batches(call, images, batch_size)


def _engine_sync(out: Any) -> float:
    """An engine's result is already host memory: read one logit."""
    return float(out[0, 0])


def setup_tensorflow(cfg: BenchConfig) -> dict[str, Any]:
    """The TensorFlow step of :mod:`resnet_lab.steps.tf_step`; replicas > 1 through MirroredStrategy."""
    image_size, num_classes, image_shape, macs = _model_facts(cfg)
    facts = configure_tf(cfg)
    if "skip" in facts:
        return facts
    import keras
    import tensorflow as tf

    devices = facts["devices"]
    mw = facts.get("multiworker")  # joined in configure_tf: MultiWorkerMirroredStrategy over TF_CONFIG
    strategy = tf.distribute.MirroredStrategy(devices) if cfg.replicas > 1 else None
    strategy = mw.strategy if mw else strategy
    scope = strategy.scope() if strategy else tf.device(devices[0])
    with scope:
        model, check = _build(cfg, image_shape, num_classes)
        optimizer = common.make_optimizer(model) if cfg.mode == "train" else None
    # jit_compile: True compiles the whole step with XLA; False forbids XLA; None leaves it to TF_XLA_FLAGS
    # (auto-clustering). Explicit in every mode: Keras 3 would otherwise pick XLA by itself on GPU.
    jit = {"off": False, "jit": True, "auto": None}[cfg.xla]
    step_fn = tf_step.make_train_step(model, optimizer, jit_compile=jit) if cfg.mode == "train" else \
        tf_step.make_infer_step(model, jit_compile=jit)

    def make_batch():
        return tf_step.synthetic_batch(cfg.batch_size, image_shape, num_classes)

    if strategy is None:
        with tf.device(devices[0]):
            images, labels = make_batch()
        compiled = step_fn
        args = (images, labels) if cfg.mode == "train" else (images,)
    else:  # one batch per replica, already on its device; the per-replica step compiled as asked
        dist = strategy.experimental_distribute_values_from_function(lambda ctx: make_batch())
        inner = step_fn

        @tf.function
        def compiled(batch):
            per_replica = strategy.run(inner, args=batch if cfg.mode == "train" else batch[:1])
            if cfg.mode == "train":
                return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)
            return strategy.gather(per_replica, axis=0)

        args = (dist,)

    def step():
        return compiled(*args)

    def sync(out):
        # A read-back waits for the step (a scalar: the loss, or one logit) without copying much. The
        # slice is taken on the host copy's device: one small op, the same in every configuration.
        return (out if out.shape.rank == 0 else out[0, 0]).numpy()

    if mw:  # under the peer watchdog; a lost peer becomes a PeerLostError that names it
        step, sync = mw.guard(step, count=True), mw.guard(sync, "reading a step's result")
    agree = None
    if cfg.mode == "infer" and cfg.precision != "fp32" and strategy is None:
        def agree() -> dict[str, Any]:
            """Against the same weights in fp32 (a float32 twin of the model), on photographs."""
            from resnet_lab.export.photos import photographs

            # The twin runs as a graph too: with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (the served rows' setting) its
            # eager call answered wrong (0.24 of the largest logit on ResNet-50 v1.5 at 64², 2026-12-05; oneDNN
            # caches a convolution's reordered weight once, assuming it never changes), as a graph it agrees.
            with tf.device(devices[0]):
                twin, _ = _build(dataclasses.replace(cfg, precision="fp32"), image_shape, num_classes)
                twin.set_weights(model.get_weights())
                twin_step = tf_step.make_infer_step(twin, jit_compile=False)
                photos = photographs(image_size, cfg.data_format)

                def numpy_of(fn: Any) -> Any:
                    return lambda x: keras.ops.convert_to_numpy(fn(tf.constant(x))).astype("float32")

                ref = photos_run(numpy_of(twin_step), photos, cfg.batch_size)
                out = photos_run(numpy_of(compiled), photos, cfg.batch_size)
            return export.agreement(out, ref, cfg.precision)

    return {"step": step, "sync": sync, **_facts(cfg, image_size, macs, tf_step.__name__), "multiworker": mw,
            "model": model,
            "agree": agree,
            "devices": devices, "compute_dtype": common.compute_dtype(model),
            "onednn_ran": provenance.onednn_active(), "compile_stats": dict,
            "versions": {"tensorflow": tf.__version__, "keras": keras.__version__}, **check}


# -------------------------------------------------------------------------------------------- run
def measure(cfg: BenchConfig) -> dict[str, Any]:
    """Import, set up, compile (first call, timed), warm up, then the timed steps (see :func:`time_steps`).

    Where the worker's time went is part of the result: ``import_s`` (the framework's import),
    ``build_s`` (devices, model, optimizer, batch), ``first_step_s``, ``warmup_s``, ``timed_s``.
    """
    if why := emulation_reason(cfg):  # the launcher skips such a row before its process; a worker started by hand
        return {"status": "skipped", "reason": why}
    t_setup = time.perf_counter()
    importlib.import_module(IMPORTS.get(cfg.backend, cfg.backend))  # TF's thread pools are set in setup, after it
    import_s = time.perf_counter() - t_setup
    s = setup(cfg)
    if "skip" in s:
        return {"status": "skipped", "reason": s["skip"]}
    check = {k: s[k] for k in ("check_ok", "check_max_abs", "check_max_rel", "check_tol") if k in s}
    if "fail" in s:  # an engine or a folded model whose logits are not Keras': its difference, no timing
        return {"status": "error", "reason": s["fail"], **check, "compile_s": s.get("engine_compile_s"),
                "compiler": s.get("compiler")}
    setup_s = time.perf_counter() - t_setup
    warmup = min_warmup(cfg)
    t0 = time.perf_counter()
    s["sync"](s["step"]())
    first = time.perf_counter() - t0
    for _ in range(warmup):
        s["sync"](s["step"]())
    untimed = time.perf_counter() - t0
    dtype = math_dtype(cfg)
    gemm_now = gemm.gemm_gflops_now(dtype, cfg.device, backend=cfg.backend) if cfg.gemm_check else None
    mw = s.get("multiworker")  # TensorFlow rows across workers only
    if mw:
        mw.barrier()  # the timed steps start together on every worker
    # Across workers every worker must run the same number of collective steps: a count, not a time.
    budget = {} if mw else {"min_time_s": cfg.min_time_s, "max_time_s": cfg.max_time_s}
    timed = time_steps(s["step"], s["sync"], cfg.steps, markers=cfg.onednn_profile, **budget)
    if mw:  # every worker's step times, on every worker (one all-gather)
        timed = mw.gather(timed, first)
    if cfg.gemm_check:  # before and after the steps: the better of the two
        gemm_now = max(gemm_now, gemm.gemm_gflops_now(dtype, cfg.device, backend=cfg.backend))
    p50 = sorted(timed["step_times"])[len(timed["step_times"]) // 2]
    # after the timed steps: the photographs neither compile nor warm anything the timing counts
    agree = s["agree"]() if s.get("agree") else {}
    status, why = ("ok", "") if agree.get("agree_ok", True) else \
        ("error", export.agreement_reason(agree, cfg.precision))
    return {
        "status": status, "reason": why, **agree, **timed, "warmup_steps": warmup, "gemm_gflops_now": gemm_now,
        # Compilation = what the first call and the warmup took beyond as many steady-state steps; an engine
        # compiles before its first call (its compile, timed on its own).
        "first_step_s": first, "compile_s": s.get("engine_compile_s", max(0.0, untimed - (1 + warmup) * p50)),
        "setup_s": setup_s, **check, **({"compiler": s["compiler"]} if "compiler" in s else {}),
        "import_s": import_s, "build_s": setup_s - import_s, "warmup_s": untimed - first, "process": os.getpid(),
        "image_size": s["image_size"], "forward_macs": s["forward_macs"], "flops_source": s["flops_source"],
        "model_source": s["model_source"], "step_source": s["step_source"], "devices": s["devices"],
        "compute_dtype": s["compute_dtype"], "onednn_ran": s["onednn_ran"],
        "backend_version": s["versions"].get(cfg.backend), "keras_version": s["versions"].get("keras"),
        "compile_stats": json.dumps(s["compile_stats"]()) if cfg.xla == "jit" else "",
        "emulated": cfg.device == "cpu" and cfg.replicas > 1,
        **({"xla_ran": s["xla_ran"]} if "xla_ran" in s else {}),
    }


def overhead(cfg: BenchConfig, rounds: int = 3) -> dict[str, Any]:
    """The harness's timed loop against a bare loop over the same compiled step, back to back.

    After compilation and warmup, ``rounds`` times: ``cfg.steps`` steps through :func:`time_steps` (per-step
    clock and read-back), then ``cfg.steps`` steps of :func:`bare_loop` (one read-back at the end),
    alternating which goes first so that drift in the machine's load hits both alike.
    """
    s = setup(cfg)
    if "skip" in s:
        return {"status": "skipped", "reason": s["skip"]}
    for _ in range(1 + min_warmup(cfg)):
        s["sync"](s["step"]())
    harness, bare = [], []
    for i in range(rounds):
        order = ("harness", "bare") if i % 2 == 0 else ("bare", "harness")
        for which in order:
            if which == "harness":
                harness.append(time_steps(s["step"], s["sync"], cfg.steps)["timed_s"])  # a count: as bare
            else:
                bare.append(bare_loop(s["step"], s["sync"], cfg.steps))
    images = cfg.global_batch * cfg.steps
    return {"status": "ok", "harness_s": harness, "bare_s": bare,
            "harness_images_per_sec": images / statistics.median(harness),
            "bare_images_per_sec": images / statistics.median(bare),
            "ratio": statistics.median(bare) / statistics.median(harness)}


# Words in a TensorFlow error that mark the line saying what went wrong, and those that mean "this
# configuration cannot run here" rather than a bug.
_TELLING = ("Trying to access", "OOM", "out of memory", "No registered", "not supported", "Unimplemented",
            "is not supported", "Could not", "could not")
_UNSUPPORTED = ("No registered", "not supported", "Trying to access resource", "Unimplemented")


def classify(exc: BaseException) -> str:
    """Failure class of an exception: oom, unsupported or error."""
    name = type(exc).__name__
    text = str(exc)
    if isinstance(exc, MemoryError) or name == "ResourceExhaustedError" or "out of memory" in text.lower():
        return "oom"
    if name in ("UnimplementedError", "NotFoundError") or any(m in text for m in _UNSUPPORTED):
        return "unsupported"
    return "error"


def reason(exc: BaseException) -> str:
    """One line saying why: the telling line of a long TensorFlow error, else its first line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    telling = [ln for ln in lines if any(m in ln for m in _TELLING)]
    line = (telling or lines or [""])[0]
    if "Trying to access resource" in line and "device" in line:
        line += (" (XLA runs on one CPU device: emulated replicas on logical CPUs cannot use it; "
                 "see the XLA known issue tfvariable_on_a_different_device)")
    return f"{type(exc).__name__}: {line}"[:500]


