"""The child process of :mod:`resnet_lab.bench`: one configuration, measured, written as JSON.

``python -m resnet_lab.bench_worker CONFIG.json RESULT.json``. The parent has already set the environment
TensorFlow reads at import (oneDNN, XLA flags, visible devices); thread pools and logical devices are set
here, before TensorFlow runs its first op. Whatever happens, RESULT.json says so: ``status`` is ``ok`` with
the raw per-step times, or a failure class and a one-line reason. Statistics are computed by the parent.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resnet_lab.bench import (
    LOCAL_MODELS,
    STEP_END,
    STEP_START,
    BenchConfig,
    math_dtype,
    parse_proc_stat,
    resolve_model,
)

# Auto-clustering compiles clusters lazily (per signature, after repeated requests) and may run them as
# TF kernels meanwhile: its warmup is at least this long.
AUTO_MIN_WARMUP = 2
# torch.compile keeps compiling (recompiles, resumed frames) for the first few calls of a Keras model.
TORCH_COMPILE_MIN_WARMUP = 3
POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def min_warmup(cfg: BenchConfig) -> int:
    """The configured warmup, raised to what a lazily compiling mode needs before its steady state."""
    if cfg.xla == "auto":
        return max(cfg.warmup, AUTO_MIN_WARMUP)
    if cfg.backend == "torch" and cfg.xla == "jit":
        return max(cfg.warmup, TORCH_COMPILE_MIN_WARMUP)
    return cfg.warmup


# ------------------------------------------------------------------------------------- measurement
def cpu_seconds() -> float:
    """User + system CPU time of this process, all its threads (TensorFlow's pools included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def proc_stat() -> tuple[int, int] | None:
    try:
        return parse_proc_stat(Path("/proc/stat").read_text())
    except (OSError, ValueError):
        return None


def time_steps(step: Callable[[], Any], sync: Callable[[Any], Any], steps: int,
               markers: bool = False) -> dict[str, Any]:
    """Run ``steps`` timed steps; each is timed around the call and the read-back that waits for it.

    Returns the per-step wall times and, over the whole timed window, wall time, process CPU time and the
    host's /proc/stat samples (so the parent can tell our CPU use from everybody else's). ``markers``
    frames each step in stdout for :func:`resnet_lab.bench.parse_onednn_verbose`.
    """
    times = []
    stat0, cpu0, w0 = proc_stat(), cpu_seconds(), time.perf_counter()
    for _ in range(steps):
        if markers:
            print(f"{STEP_START} {time.perf_counter()}", flush=True)
        t0 = time.perf_counter()
        sync(step())
        times.append(time.perf_counter() - t0)
        if markers:
            print(f"{STEP_END} {time.perf_counter()}", flush=True)
    wall, cpu, stat1 = time.perf_counter() - w0, cpu_seconds() - cpu0, proc_stat()
    out: dict[str, Any] = {"step_times": times, "timed_s": wall, "cpu_seconds": cpu, "host_util": None}
    if stat0 and stat1:
        busy, total = stat1[0] - stat0[0], stat1[1] - stat0[1]
        out["host_util"] = 100.0 * busy / total if total > 0 else None
    return out


def gemm_gflops_now(precision: str, device: str, sizes=(2048, 4096), repeats: int = 3,
                    backend: str = "tensorflow") -> float:
    """Best GFLOP/s of square GEMMs in ``precision`` on ``device``, timed now, in this process.

    On a shared host the GEMM peak of the peak file (measured on a quiet machine, ideally) overstates what
    this process could get while its neighbours ran; this is the same measurement taken in the same
    conditions as the steps, so model GFLOP/s over it is an MFU that the load cancels out of (roughly).
    """
    if backend == "jax":
        return _jax_gemm_gflops(precision, device, sizes, repeats)
    if backend == "torch":
        return _torch_gemm_gflops(precision, device, sizes, repeats)
    import tensorflow as tf

    dtype = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}[precision]
    best = 0.0
    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        for n in sizes:
            a = tf.cast(tf.random.stateless_normal((n, n), seed=(0, 1)), dtype)
            b = tf.cast(tf.random.stateless_normal((n, n), seed=(2, 3)), dtype)
            matmul = tf.function(lambda x, y: tf.linalg.matmul(x, y))
            matmul(a, b)[0, 0].numpy()
            for _ in range(repeats):
                t0 = time.perf_counter()
                matmul(a, b)[0, 0].numpy()
                best = max(best, 2.0 * n**3 / (time.perf_counter() - t0) / 1e9)
    return best


def _jax_gemm_gflops(precision: str, device: str, sizes, repeats: int) -> float:
    import jax
    import jax.numpy as jnp

    dtype = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}[precision]
    dev = jax.devices(device)[0]
    matmul = jax.jit(lambda x, y: jnp.matmul(x, y, precision="highest" if precision == "fp32" else None))
    best = 0.0
    for n in sizes:
        a = jax.device_put(jax.random.normal(jax.random.PRNGKey(0), (n, n)).astype(dtype), dev)
        b = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (n, n)).astype(dtype), dev)
        matmul(a, b).block_until_ready()
        for _ in range(repeats):
            t0 = time.perf_counter()
            matmul(a, b).block_until_ready()
            best = max(best, 2.0 * n**3 / (time.perf_counter() - t0) / 1e9)
    return best


def _torch_gemm_gflops(precision: str, device: str, sizes, repeats: int) -> float:
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    dev = "cuda" if device == "gpu" else "cpu"
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device=dev).to(dtype)
        b = torch.randn(n, n, device=dev).to(dtype)
        (a @ b)[0, 0].item()
        for _ in range(repeats):
            t0 = time.perf_counter()
            (a @ b)[0, 0].item()
            best = max(best, 2.0 * n**3 / (time.perf_counter() - t0) / 1e9)
    return best


def bare_loop(step: Callable[[], Any], sync: Callable[[Any], Any], steps: int) -> float:
    """The reference the harness is checked against: ``steps`` calls, one read-back at the end; seconds."""
    t0 = time.perf_counter()
    out = None
    for _ in range(steps):
        out = step()
    sync(out)
    return time.perf_counter() - t0


# ----------------------------------------------------------------------------------------- models
def count_forward_macs(model) -> int:
    """Multiply-accumulates of one image's forward pass: Conv (incl. depthwise) and Dense layers."""
    import keras

    total = 0
    for layer in _all_layers(model):
        try:
            out_shape = tuple(layer.output.shape)
            in_shape = tuple(layer.input.shape)
        except (AttributeError, ValueError):
            continue
        if isinstance(layer, keras.layers.DepthwiseConv2D):
            kh, kw = layer.kernel_size
            total += _prod(out_shape[1:]) * kh * kw
        elif isinstance(layer, keras.layers.Conv2D | keras.layers.Conv1D | keras.layers.Conv3D):
            channels_first = layer.data_format == "channels_first"
            in_ch = in_shape[1] if channels_first else in_shape[-1]
            kernel = _prod(layer.kernel_size)
            total += _prod(out_shape[1:]) * kernel * in_ch // layer.groups
        elif isinstance(layer, keras.layers.Dense):
            total += _prod(out_shape[1:]) * in_shape[-1]
    return int(total)


def _all_layers(model):
    for layer in model.layers:
        if hasattr(layer, "layers") and layer.layers:
            yield from _all_layers(layer)
        else:
            yield layer


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


def tiny_resnet(input_shape, num_classes: int, data_format: str):
    """A 4-conv residual network for tests: conv-BN-ReLU stem, one identity block, one strided block."""
    import keras
    from keras import layers

    axis = 1 if data_format == "channels_first" else -1

    def conv_bn(x, filters, strides=1, relu=True):
        x = layers.Conv2D(filters, 3, strides=strides, padding="same", use_bias=False,
                          data_format=data_format)(x)
        x = layers.BatchNormalization(axis=axis)(x)
        return layers.ReLU()(x) if relu else x

    inputs = keras.Input(input_shape)
    x = conv_bn(inputs, 16)
    y = conv_bn(conv_bn(x, 16), 16, relu=False)
    x = layers.ReLU()(layers.Add()([x, y]))
    x = conv_bn(x, 32, strides=2)
    x = layers.GlobalAveragePooling2D(data_format=data_format)(x)
    outputs = layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs, name="tiny_resnet")


def build_model(cfg: BenchConfig, image_size: int, num_classes: int, source: str):
    """(model, forward MACs per image, where the MAC count came from)."""
    import keras

    channels_first = cfg.data_format == "channels_first"
    shape = (3, image_size, image_size) if channels_first else (image_size, image_size, 3)
    if source == "resnet_lab.models":
        from resnet_lab import models

        model = models.build(cfg.model, input_shape=shape, num_classes=num_classes,
                             data_format=cfg.data_format, dtype_policy=POLICIES[cfg.precision])
        macs = models.describe(cfg.model, input_shape=shape, num_classes=num_classes,
                               data_format=cfg.data_format)["forward_macs"]
        return model, int(macs), "models.describe"
    name = cfg.model if cfg.model in LOCAL_MODELS else "keras-resnet50"
    if name == "tiny-resnet":
        model = tiny_resnet(shape, num_classes, cfg.data_format)
    else:
        keras.config.set_image_data_format(cfg.data_format)
        model = keras.applications.ResNet50(weights=None, input_shape=shape, classes=num_classes,
                                            classifier_activation=None)
    return model, count_forward_macs(model), "keras layer count"


# ------------------------------------------------------------------------------------------ steps
def load_steps() -> tuple[Callable, Callable, Callable, str]:
    """(make_train_step, make_infer_step, make_optimizer, source): the shared steps of
    :mod:`resnet_lab.steps` (the op extraction compiles the same functions) when that module is there,
    else this module's stand-ins, which follow the same contract."""
    try:
        from resnet_lab import steps

        return steps.make_train_step, steps.make_infer_step, steps.make_optimizer, "resnet_lab.steps"
    except (ImportError, AttributeError):
        return make_train_step, make_infer_step, make_optimizer, "resnet_lab.bench_worker"


# Stand-ins for resnet_lab.steps (written in parallel on the ops branch), with the same signatures and
# semantics, so that rows measured before and after the merge time the same step.
def make_optimizer(model, learning_rate: float = 0.1, momentum: float = 0.9):
    """SGD with momentum, built; wrapped in a LossScaleOptimizer when the model computes in float16."""
    import keras

    optimizer = keras.optimizers.SGD(learning_rate=learning_rate, momentum=momentum)
    if any(getattr(getattr(x, "dtype_policy", None), "compute_dtype", None) == "float16"
           for x in [model, *model.layers]):
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)
    return optimizer


def make_train_step(model, optimizer, *, jit_compile: bool | None = True):
    """A tf.function ``(images, labels) -> loss``: forward (training mode), mean sparse softmax
    cross-entropy of the float32 logits, gradients of all trainable variables, ``optimizer.apply``."""
    import keras
    import tensorflow as tf

    variables = model.trainable_variables

    def train_step(images, labels):
        with tf.GradientTape() as tape:
            logits = tf.cast(model(images, training=True), tf.float32)
            per_image = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            loss = tf.reduce_mean(per_image)
            scaled = optimizer.scale_loss(loss)  # identity unless loss scaling is on
        grads = tape.gradient(scaled, variables)
        optimizer.apply(grads, variables)
        return loss

    return tf.function(train_step, jit_compile=jit_compile)


def make_infer_step(model, *, jit_compile: bool | None = True):
    """A tf.function ``images -> logits``: the forward pass in inference mode."""
    import tensorflow as tf

    def infer_step(images):
        return model(images, training=False)

    return tf.function(infer_step, jit_compile=jit_compile)


# -------------------------------------------------------------------------------------------- run
def configure_tf(cfg: BenchConfig) -> dict[str, Any]:
    """Threads and devices, before TensorFlow runs anything. Returns facts for the row, or a skip reason."""
    import tensorflow as tf

    if cfg.intra_op is not None:
        tf.config.threading.set_intra_op_parallelism_threads(cfg.intra_op)
    if cfg.inter_op is not None:
        tf.config.threading.set_inter_op_parallelism_threads(cfg.inter_op)
    if cfg.workers:  # the cluster is part of TensorFlow's context: joined before anything initialises it
        from resnet_lab.multiworker import Worker

        return Worker(cfg).configure()
    facts: dict[str, Any] = {}
    if cfg.device == "cpu":
        with contextlib.suppress(ValueError, RuntimeError):
            tf.config.set_visible_devices([], "GPU")
        if cfg.replicas > 1:  # N logical CPUs: the MirroredStrategy code path without GPUs (emulated)
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
            tf.config.experimental.set_memory_growth(g, True)
        devices = [d.name for d in tf.config.list_logical_devices("GPU")][: cfg.replicas]
    facts["devices"] = devices
    return facts


def onednn_enabled() -> bool | None:
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def setup(cfg: BenchConfig) -> dict[str, Any]:
    """Build everything the timed loop needs: returns {"step": callable, "sync": callable, facts...}, or
    {"skip": reason} where this host cannot run ``cfg``. One function per Keras backend."""
    return {"tensorflow": setup_tensorflow, "jax": setup_jax, "torch": setup_torch}[cfg.backend](cfg)


def _model_facts(cfg: BenchConfig) -> tuple[dict[str, Any], int, int, tuple[int, ...]]:
    """(model info, image size, classes, one image's shape in the configured data format)."""
    info = resolve_model(cfg.model)
    image_size = cfg.image_size or int(info.get("default_image_size") or 224)
    num_classes = int(info.get("num_classes") or 1000)
    shape = (3, image_size, image_size) if cfg.data_format == "channels_first" else \
        (image_size, image_size, 3)
    return info, image_size, num_classes, shape


def setup_jax(cfg: BenchConfig) -> dict[str, Any]:
    """The JAX step of :mod:`resnet_lab.backend_steps`; replicas > 1 through Keras' DataParallel
    distribution (emulated on CPU as XLA host devices, see :func:`resnet_lab.bench.worker_env`)."""
    info, image_size, num_classes, shape = _model_facts(cfg)
    import jax
    import keras

    from resnet_lab import backend_steps, steps

    try:
        devices = jax.devices(cfg.device)
    except RuntimeError as exc:
        return {"skip": f"JAX sees no {cfg.device} device ({str(exc).splitlines()[0][:200]})"}
    if len(devices) < cfg.replicas:
        return {"skip": f"{cfg.replicas} {cfg.device} replicas asked for, JAX sees {len(devices)}"}
    devices = devices[: cfg.replicas]
    keras.config.set_dtype_policy(POLICIES[cfg.precision])
    distribution = None
    if cfg.replicas > 1:
        distribution = keras.distribution.DataParallel(devices=devices)
        keras.distribution.set_distribution(distribution)
    with jax.default_device(devices[0]):
        model, macs, flops_source = build_model(cfg, image_size, num_classes, info["source"])
        optimizer = steps.make_optimizer(model) if cfg.mode == "train" else None
        images, labels = backend_steps.jax_batch(cfg.global_batch, shape, num_classes,
                                                 device=None if distribution else devices[0])
    if distribution is not None:  # the batch split across the replicas, as the data layout says
        images, labels = (keras.distribution.distribute_tensor(x, distribution.get_data_layout(x.shape))
                          for x in (images, labels))
    batch = (images, labels) if cfg.mode == "train" else (images,)
    step = backend_steps.JaxStep(model, optimizer, cfg.mode, batch, compile=cfg.xla == "jit")
    return {"step": step, "sync": backend_steps.jax_sync, "image_size": image_size, "forward_macs": macs,
            "flops_source": flops_source, "model_source": info["source"], "step_source": backend_steps.STEP_SOURCE,
            "devices": [str(d) for d in devices], "compute_dtype": model.compute_dtype,
            "xla_ran": cfg.xla == "jit", "onednn_ran": None, "compile_stats": dict,
            "versions": {"jax": jax.__version__, "keras": keras.__version__}}


def setup_torch(cfg: BenchConfig) -> dict[str, Any]:
    """The PyTorch step of :mod:`resnet_lab.backend_steps`, eager or under ``torch.compile``."""
    info, image_size, num_classes, shape = _model_facts(cfg)
    import torch

    if cfg.intra_op is not None:
        torch.set_num_threads(cfg.intra_op)
    if cfg.inter_op is not None:
        torch.set_num_interop_threads(cfg.inter_op)
    torch.backends.mkldnn.enabled = cfg.onednn == "on"
    if cfg.device == "gpu" and not torch.cuda.is_available():
        return {"skip": f"torch {torch.__version__} sees no CUDA device"}
    import keras

    from resnet_lab import backend_steps, steps

    keras.config.set_dtype_policy(POLICIES[cfg.precision])
    device = "cuda" if cfg.device == "gpu" else "cpu"
    model, macs, flops_source = build_model(cfg, image_size, num_classes, info["source"])
    optimizer = steps.make_optimizer(model) if cfg.mode == "train" else None
    images, labels = backend_steps.torch_batch(cfg.batch_size, shape, num_classes, device=device)
    batch = (images, labels) if cfg.mode == "train" else (images,)
    step, stats = backend_steps.make_torch_step(model, optimizer, cfg.mode, batch, compile=cfg.xla == "jit")
    return {"step": step, "sync": backend_steps.torch_sync, "image_size": image_size, "forward_macs": macs,
            "flops_source": flops_source, "model_source": info["source"], "step_source": backend_steps.STEP_SOURCE,
            "devices": [device], "compute_dtype": model.compute_dtype, "xla_ran": None,  # no XLA on torch
            "onednn_ran": bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled),
            "compile_stats": stats,
            "versions": {"torch": torch.__version__, "keras": keras.__version__}}


def setup_tensorflow(cfg: BenchConfig) -> dict[str, Any]:
    """The TensorFlow step of :mod:`resnet_lab.steps`; replicas > 1 through MirroredStrategy."""
    info, image_size, num_classes, image_shape = _model_facts(cfg)
    facts = configure_tf(cfg)
    if "skip" in facts:
        return facts
    import keras
    import tensorflow as tf

    keras.config.set_dtype_policy(POLICIES[cfg.precision])
    devices = facts["devices"]
    mw = facts.get("multiworker")  # joined in configure_tf: MultiWorkerMirroredStrategy over TF_CONFIG
    strategy = tf.distribute.MirroredStrategy(devices) if cfg.replicas > 1 else None
    strategy = mw.strategy if mw else strategy
    scope = strategy.scope() if strategy else tf.device(devices[0])
    make_train, make_infer, make_opt, step_source = load_steps()
    with scope:
        model, macs, flops_source = build_model(cfg, image_size, num_classes, info["source"])
        optimizer = make_opt(model) if cfg.mode == "train" else None
    # jit_compile: True compiles the whole step with XLA; False forbids XLA; None leaves it to TF_XLA_FLAGS
    # (auto-clustering). Explicit in every mode: Keras 3 would otherwise pick XLA by itself on GPU.
    jit = {"off": False, "jit": True, "auto": None}[cfg.xla]
    step_fn = make_train(model, optimizer, jit_compile=jit) if cfg.mode == "train" else \
        make_infer(model, jit_compile=jit)
    shape = (cfg.batch_size, *image_shape)

    def make_batch():
        images = tf.random.uniform(shape, dtype=tf.float32)
        labels = tf.random.uniform((cfg.batch_size,), 0, num_classes, dtype=tf.int32)
        return images, labels

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
    return {"step": step, "sync": sync, "image_size": image_size, "forward_macs": macs, "multiworker": mw,
            "flops_source": flops_source, "model_source": info["source"], "step_source": step_source,
            "devices": devices, "compute_dtype": getattr(model, "compute_dtype", None),
            "onednn_ran": onednn_enabled(), "compile_stats": dict,
            "versions": {"tensorflow": tf.__version__, "keras": keras.__version__}}


def measure(cfg: BenchConfig) -> dict[str, Any]:
    """Set up, compile (first call, timed), warm up, then time ``cfg.steps`` steps."""
    t_setup = time.perf_counter()
    s = setup(cfg)
    if "skip" in s:
        return {"status": "skipped", "reason": s["skip"]}
    setup_s = time.perf_counter() - t_setup
    warmup = min_warmup(cfg)
    t0 = time.perf_counter()
    s["sync"](s["step"]())
    first = time.perf_counter() - t0
    for _ in range(warmup):
        s["sync"](s["step"]())
    untimed = time.perf_counter() - t0
    dtype = math_dtype(cfg)
    gemm = gemm_gflops_now(dtype, cfg.device, backend=cfg.backend) if cfg.gemm_check else None
    mw = s.get("multiworker")  # TensorFlow rows across workers only
    if mw:
        mw.barrier()  # the timed steps start together on every worker
    timed = time_steps(s["step"], s["sync"], cfg.steps, markers=cfg.onednn_profile)
    if mw:  # every worker's step times, on every worker (one all-gather)
        timed = mw.gather(timed, first)
    if cfg.gemm_check:  # before and after the steps: the better of the two
        gemm = max(gemm, gemm_gflops_now(dtype, cfg.device, backend=cfg.backend))
    p50 = sorted(timed["step_times"])[len(timed["step_times"]) // 2]
    return {
        "status": "ok", "reason": "", **timed, "warmup_steps": warmup, "gemm_gflops_now": gemm,
        # Compilation = what the first call and the warmup took beyond as many steady-state steps.
        "first_step_s": first, "compile_s": max(0.0, untimed - (1 + warmup) * p50), "setup_s": setup_s,
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
                harness.append(time_steps(s["step"], s["sync"], cfg.steps)["timed_s"])
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    task = measure
    if argv[:1] == ["--overhead"]:
        rounds = int(os.environ.get("RESNET_LAB_OVERHEAD_ROUNDS", "3"))
        task, argv = (lambda c: overhead(c, rounds)), argv[1:]
    if len(argv) != 2:
        print("usage: python -m resnet_lab.bench_worker [--overhead] CONFIG.json RESULT.json",
              file=sys.stderr)
        return 2
    cfg_path, result_path = argv
    cfg = BenchConfig.from_dict(json.loads(Path(cfg_path).read_text()))
    try:
        result = task(cfg)
    except Exception as exc:  # a failed configuration is a row, not a crash
        traceback.print_exc()
        result = {"status": classify(exc), "reason": reason(exc)}
    tmp = Path(result_path + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip TensorFlow's slow (and occasionally crashing) teardown; the result is written


if __name__ == "__main__":
    sys.exit(main())
