"""`resnet-lab ops`: which XLA ops a model's inference or training step compiles to, counted exactly.

:func:`capture` builds a zoo model, makes the step of :mod:`resnet_lab.steps.tf_step` with ``jit_compile=True``
and asks TensorFlow for its HLO before (``hlo``) and after (``optimized_hlo``) XLA's optimization passes
(``experimental_get_compiler_ir``); :func:`inventory` parses it with :mod:`resnet_lab.hlo.parser` into one JSON-ready
row (configuration, versions, opcode counts, fusions, custom calls, convolution and dot shapes).
:func:`proto_inventory` counts the serialized ``HloModuleProto`` independently, for the cross-check.

``backend="jax"`` asks the same of Keras' JAX backend: the step of :mod:`resnet_lab.steps.jax_step` under
``jax.jit``, lowered (before) and compiled (after), in a child process (:mod:`resnet_lab.hlo.jax_child`), and
parsed by the same parser, so the TensorFlow and JAX op sets of one model compare line by line.

Core ATen (:func:`capture_core_aten`: ``torch.export`` of the Keras model on the torch backend, in
:mod:`resnet_lab.hlo.torch_child`) and TFLite builtins (:func:`capture_tflite`, :mod:`resnet_lab.hlo.tflite`) are read
from the inference graph only; :func:`capture_portable` gives notebook 02 both, with skipped records for the
training step (:data:`NO_TRAINING`) and for a framework not installed.

Names, modes, sizes and precisions are checked by :func:`check_request` without importing TensorFlow.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from resnet_lab import export, models
from resnet_lab.core import child, provenance, requirements
from resnet_lab.core.choices import (
    DTYPE_POLICIES,
    HLO_BACKENDS,
    MODES,
    PLATFORMS,
    PRECISIONS,
    STAGES,
    check_choice,
    check_choices,
    check_int,
)
from resnet_lab.core.errors import UsageError
from resnet_lab.hlo import onnx_ir, origin, parser, stablehlo, tflite
from resnet_lab.steps import tf_step

# our stage name -> the name TensorFlow's experimental_get_compiler_ir, and jax.jit, give it
TF_STAGES: dict[str, str] = {"before": "hlo", "after": "optimized_hlo"}
JAX_STAGES: dict[str, str] = {"before": "jax.jit(step).lower().as_text('hlo', debug_info=True)",
                               "after": "jax.jit(step).lower().compile().as_text()"}
SERIALIZED: dict[str, str] = {"before": "hlo_serialized", "after": "optimized_hlo_serialized"}
VERSION_PACKAGES = ("tensorflow", "tensorflow-cpu", "keras", "resnet-lab")
JAX_TIMEOUT_S = 1800.0


def check_request(
    model: str,
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platform: str = "cpu",
    batch_size: int = 32,
    image_size: int | None = None,
    precision: str = "fp32",
    backend: str = "tensorflow",
) -> int:
    """Check a capture request without importing TensorFlow; return the image size to use.

    Raises:
        UsageError: unknown model, mode, stage, platform, precision or backend; a batch size below 1; an
            image size the model cannot take. ``image_size=None`` means the model's default (224 ImageNet,
            32 CIFAR).
    """
    spec = models.get_spec(model)
    check_choice("backend", backend, HLO_BACKENDS)
    check_choices("mode", modes, MODES)
    check_choices("stage", stages, STAGES)
    check_choice("platform", platform, PLATFORMS)
    check_choice("precision", precision, PRECISIONS)
    check_int("batch size", batch_size, 1)
    size = spec.input_size if image_size is None else image_size
    check_int("image size", size, 1)
    models.check_input_shape(model, (size, size, 3))
    return size


def gpu_unavailable_reason() -> str | None:
    """None where TensorFlow sees a GPU; else one line saying why GPU capture cannot run here.

    No GPU on the host (:func:`resnet_lab.core.requirements.gpus`) is answered without importing TensorFlow;
    where there is one, TensorFlow (imported anyway to capture on it) says whether its build can use it."""
    found, why = requirements.gpus()
    if not found:
        return f"the 'gpu' platform needs a GPU: {why}; the CPU stages run here"
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return None
    build = tf.sysconfig.get_build_info()
    why = "this TensorFlow build has no CUDA" if not build.get("is_cuda_build") else "TensorFlow sees no GPU"
    return (f"the 'gpu' platform needs a GPU: {why} on this host "
            "(on a CUDA host install the [gpu] extra); the CPU stages run here")


@dataclass
class Capture:
    """The HLO of one model/mode/stage/platform/size/precision, as XLA printed it."""

    model: str
    mode: str
    stage: str
    platform: str
    batch_size: int
    image_size: int
    precision: str
    text: str
    seconds: float  # wall time of the compiler-IR call (tracing and tf2xla included for the first stage)
    serialized: bytes | None = None  # the HloModuleProto of the same stage, when asked for
    backend: str = "tensorflow"  # the Keras backend whose step this is (tensorflow | jax)
    versions: dict[str, Any] | None = None  # the versions that produced it (None: this process's)
    layers: tuple[str, ...] = ()  # the Keras model's layer names: what instruction metadata is mapped to


def capture(
    model: str,
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platform: str = "cpu",
    batch_size: int = 32,
    image_size: int | None = None,
    precision: str = "fp32",
    serialized: bool | Sequence[str] = False,
    backend: str = "tensorflow",
) -> list[Capture]:
    """Compile ``model``'s steps and return their HLO text, one :class:`Capture` per (mode, stage).

    The model is built once (random weights, under the precision's Keras dtype policy); each mode's step is
    traced once and its HLO asked for at each stage. Inputs are synthetic, of the given batch and image
    size. Nothing is executed.

    ``backend="jax"``: the JAX step's HLO, from a child process (see :func:`capture_jax`). ``serialized``: also
    the ``HloModuleProto`` of every stage (True) or of the stages named (each costs another compiler call; the
    optimized one compiles again).

    Raises:
        UsageError: bad request (see :func:`check_request`), ``platform="gpu"`` on a host without GPU, JAX
            not installed, or ``serialized`` with JAX.
    """
    size = check_request(model, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                         image_size=image_size, precision=precision, backend=backend)
    if backend == "jax":
        if serialized:
            raise UsageError("serialized protos are captured from TensorFlow only; leave serialized off for jax")
        return capture_jax(model, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                           image_size=size, precision=precision)
    import tensorflow as tf

    if platform == "gpu" and (reason := gpu_unavailable_reason()):
        raise UsageError(reason)
    spec = models.get_spec(model)
    out = []
    with tf.device(f"/{platform.upper()}:0"):
        net = models.build(model, input_shape=(size, size, 3), dtype_policy=DTYPE_POLICIES[precision])
        images, labels = tf_step.synthetic_batch(batch_size, (size, size, 3), spec.num_classes)
        for mode in modes:
            step = tf_step.make_step(mode, net)
            t0 = time.perf_counter()
            ir = step.experimental_get_compiler_ir(*((images,) if mode == "infer" else (images, labels)))
            for stage in stages:
                text = ir(stage=TF_STAGES[stage], platform_name=platform.upper())
                wanted = serialized is True or (not isinstance(serialized, bool) and stage in serialized)
                proto = ir(stage=SERIALIZED[stage], platform_name=platform.upper()) if wanted else None
                t1 = time.perf_counter()
                out.append(Capture(model, mode, stage, platform, batch_size, size, precision, text,
                                   round(t1 - t0, 3), proto, layers=tuple(layer.name for layer in net.layers)))
                t0 = t1
    return out


def jax_unavailable_reason() -> str | None:
    """None where JAX is installed; else one line saying how to get it (:func:`resnet_lab.core.requirements.
    missing`). Does not import JAX."""
    return requirements.missing("jax")


def capture_jax(
    model: str,
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platform: str = "cpu",
    batch_size: int = 32,
    image_size: int | None = None,
    precision: str = "fp32",
    timeout_s: float = JAX_TIMEOUT_S,
) -> list[Capture]:
    """The HLO of the JAX steps (``jax.jit``: lowered = before, compiled = after), one :class:`Capture`
    per (mode, stage), computed by ``python -m resnet_lab.hlo.jax_child`` with ``KERAS_BACKEND=jax``.

    Raises:
        UsageError: bad request, JAX not installed, or no JAX device of ``platform`` on this host.
        RuntimeError: the child failed (its one-line reason), died, or ran past ``timeout_s`` (killed).
    """
    size = check_request(model, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                         image_size=image_size, precision=precision, backend="jax")
    return capture_jax_models({model: size}, modes=modes, stages=stages, platform=platform,
                              batch_size=batch_size, precision=precision, timeout_s=timeout_s)[model]


def capture_jax_models(
    image_sizes: dict[str, int],
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platform: str = "cpu",
    batch_size: int = 32,
    precision: str = "fp32",
    timeout_s: float = JAX_TIMEOUT_S,
    stablehlo: bool = False,
    locations: bool = False,
) -> dict[str, list[Capture]]:
    """:func:`capture_jax` for several models (name → checked image size) in one child process: JAX and
    Keras are imported once for all of them. ``timeout_s`` is per model. ``stablehlo``: also each mode's
    lowered module as StableHLO, a Capture of stage ``"stablehlo"`` (see :func:`stablehlo_inventory`), printed with its
    ``loc(...)`` locations where ``locations``."""
    return start_jax_models(image_sizes, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                            precision=precision, timeout_s=timeout_s, stablehlo=stablehlo, locations=locations)()


def start_jax_models(
    image_sizes: dict[str, int],
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platform: str = "cpu",
    batch_size: int = 32,
    precision: str = "fp32",
    timeout_s: float = JAX_TIMEOUT_S,
    stablehlo: bool = False,
    locations: bool = False,
) -> Callable[[], dict[str, list[Capture]]]:
    """:func:`capture_jax_models` with its child process started now: returns ``finish()``, which waits for its
    reply (``timeout_s`` per model from then) and gives the captures, or raises as :func:`capture_jax`. The
    caller captures TensorFlow's steps meanwhile (:func:`capture_matrix`): both compile mostly on one core."""
    if reason := jax_unavailable_reason():
        raise UsageError(reason)
    request = {"models": list(image_sizes), "image_sizes": image_sizes, "modes": list(modes),
               "stages": list(stages), "platform": platform, "batch_size": batch_size, "precision": precision,
               "stablehlo": stablehlo, "debug_info": locations}
    run = _start_child("resnet_lab.hlo.jax_child", request, _jax_env(platform))

    def finish() -> dict[str, list[Capture]]:
        result = _jax_result(_reply(run, timeout_s * len(image_sizes), "JAX HLO capture"), platform)
        versions_ = {**result["versions"], "resnet-lab": provenance.package_versions(("resnet-lab",))["resnet-lab"]}
        return {name: [Capture(name, c["mode"], c["stage"], platform, batch_size, image_sizes[name], precision,
                               c["text"], c["seconds"], backend="jax", versions=versions_,
                               layers=tuple(result.get("layers", {}).get(name, ()))) for c in caps]
                for name, caps in result["models"].items()}

    return finish


def capture_stablehlo(
    image_sizes: dict[str, int],
    *,
    modes: Sequence[str] = MODES,
    platform: str = "cpu",
    batch_size: int = 32,
    precision: str = "fp32",
    timeout_s: float = JAX_TIMEOUT_S,
    locations: bool = False,
) -> list[dict[str, Any]]:
    """The StableHLO of the JAX steps (``jax.jit(step).lower(...).as_text()``), per model and mode, in one
    JAX child process: one record each with the ops counted from the text (``ops``) and, independently, by
    the MLIR bindings' walk (``ops_walk``; ``walk_agrees``), the compute ops and convolution configurations
    (:mod:`resnet_lab.hlo.stablehlo`). Raises as :func:`capture_jax`."""
    by_model = capture_jax_models(image_sizes, modes=modes, stages=(), platform=platform, batch_size=batch_size,
                                  precision=precision, timeout_s=timeout_s, stablehlo=True, locations=locations)
    return [stablehlo_inventory(c) for caps in by_model.values() for c in caps]


def capture_stablehlo_step(model: str, mode: str, *, backend: str = "tensorflow", platform: str = "cpu",
                           batch_size: int = 32, image_size: int | None = None, precision: str = "fp32",
                           locations: bool = False) -> dict[str, Any]:
    """The StableHLO record of one step: JAX's lowering (``backend="jax"``; with ``locations`` printed with them),
    or TensorFlow's HLO before optimization converted (:func:`stablehlo_inventory`). Raises UsageError (bad request,
    JAX not installed)."""
    size = check_request(model, modes=(mode,), stages=("before",), platform=platform, batch_size=batch_size,
                         image_size=image_size, precision=precision, backend=backend)
    if reason := jax_unavailable_reason():  # JAX lowers the JAX step and converts TensorFlow's
        raise UsageError(f"--ir stablehlo needs jax: {reason}")
    if backend == "jax":
        (rec,) = capture_stablehlo({model: size}, modes=(mode,), platform=platform, batch_size=batch_size,
                                   precision=precision, locations=locations)
        return rec
    (cap,) = capture(model, modes=(mode,), stages=("before",), platform=platform, batch_size=batch_size,
                     image_size=size, precision=precision, serialized=True)
    return stablehlo_inventory(cap)


def stablehlo_inventory(cap: Capture) -> dict[str, Any]:
    """One JSON-ready StableHLO record: the configuration, the ops counted from the text and by the MLIR walk
    (``walk_agrees``), compute ops and convolutions (:func:`resnet_lab.hlo.stablehlo.inventory`).

    A JAX capture of stage ``"stablehlo"`` is read as it is; a TensorFlow capture of stage ``"before"`` with its
    serialized proto is first converted (:func:`resnet_lab.hlo.stablehlo.from_hlo_proto`), ``source`` says which."""
    text, source = cap.text, "jax.jit lowering"
    if cap.backend == "tensorflow":
        if cap.stage != "before" or cap.serialized is None:
            raise ValueError("TensorFlow's StableHLO comes from the serialized HLO before optimization")
        text, source = stablehlo.from_hlo_proto(cap.serialized), "TensorFlow HLO via hlo_to_stablehlo"
    inv, walk = stablehlo.inventory(text), stablehlo.count_walk(text)
    return {"model": cap.model, "backend": cap.backend, "ir": "stablehlo", "source": source, "mode": cap.mode,
            "platform": cap.platform,
            "batch_size": cap.batch_size, "image_size": cap.image_size, "precision": cap.precision,
            "capture_seconds": cap.seconds, **inv, "ops_walk": walk, "walk_agrees": walk == inv["ops"],
            "versions": cap.versions, **_locations(text, cap.layers)}


def _locations(text: str, layers: Sequence[str]) -> dict[str, Any]:
    """``locations`` [{op, name, count}] and the model's ``layers`` where the text has named locations; else {}."""
    found = stablehlo.op_locations(text)
    if not any(name for _, name in found):
        return {}
    return {"layers": list(layers), "locations": [{"op": op, "name": name, "count": n}
                                                  for (op, name), n in sorted(found.items())]}


def _jax_env(platform: str) -> dict[str, str]:
    return {"KERAS_BACKEND": "jax", **({"JAX_PLATFORMS": "cpu"} if platform == "cpu" else {})}


def _jax_result(result: dict[str, Any], platform: str) -> dict[str, Any]:
    if "skip" in result:
        raise UsageError(f"the '{platform}' platform needs a GPU that JAX can use: {result['skip']}")
    return result


def _start_child(module: str, request: dict[str, Any], env: dict[str, str]) -> child.Child:
    """``python -m MODULE`` on ``request`` (:mod:`resnet_lab.core.child`) with ``env`` added to this environment,
    started now, its reply read later (:func:`_reply`): the caller works meanwhile (notebook 02 exports Core ATen
    while XLA compiles)."""
    return child.Child(module, [request], env={**os.environ, **env})


def _reply(run: child.Child, timeout_s: float, what: str) -> dict[str, Any]:
    """Wait for ``run`` (its process group killed past ``timeout_s``): its reply, or RuntimeError saying in one
    line why there is none (the child's error, its timeout, or the telling line of its log)."""
    outcome = run.outcome(timeout_s)
    if not outcome.ok:
        raise RuntimeError(outcome.reason(what))
    return outcome.reply


# ------------------------------------------------------------------ Core ATen and TFLite: inference only
PORTABLE_IRS = ("core-aten", "tflite", "onnx")  # read from one inference graph, not from a compiled step
NO_TRAINING = {
    "core-aten": "core-aten has no training step: torch 2.13 has no public export of a joint forward+backward "
                 "graph (only the private torch.export.experimental._export_forward_backward); use --mode infer",
    "tflite": "tflite has no training step: the TFLite converter takes inference graphs; use --mode infer",
    "onnx": "onnx has no training step: the model is exported for inference engines; use --mode infer",
}


def check_ir_modes(ir: str, modes: Sequence[str]) -> None:
    """UsageError (:data:`NO_TRAINING`) when an inference-only IR is asked for a training step; no import."""
    if ir in NO_TRAINING and "train" in modes:
        raise UsageError(NO_TRAINING[ir])


def ir_unavailable_reason(ir: str) -> str | None:
    """None where what an IR is read with is installed; else one line naming the ``pip install``
    (:func:`resnet_lab.core.requirements.missing`; ONNX: the export's JAX and torch, and the onnx reader)."""
    return requirements.missing(ir)


def capture_onnx(model: str, *, batch_size: int = 32, image_size: int | None = None, precision: str = "fp32",
                 export_dir: str | os.PathLike | None = None, timeout_s: float = JAX_TIMEOUT_S) -> dict[str, Any]:
    """The ONNX record of ``model``'s inference (:func:`resnet_lab.hlo.onnx_ir.inventory`) from the export
    (:func:`resnet_lab.export.ensure`, made once in ``export_dir`` and reused by the engines' rows); fp32 only
    (the export's), another precision a skipped record."""
    size = check_request(model, modes=("infer",), stages=(), batch_size=batch_size, image_size=image_size,
                         precision=precision)
    if reason := ir_unavailable_reason("onnx"):
        raise UsageError(reason)
    config = {"model": model, "backend": "torch", "ir": "onnx", "mode": "infer", "platform": "cpu",
              "batch_size": batch_size, "image_size": size, "precision": precision}
    if precision != "fp32":
        return {**config, "skipped": "the ONNX export is fp32", "ops": {}, "compute_ops": {}}
    t0 = time.perf_counter()
    try:
        where = export.ensure(export_dir, model, size, [], onnx=True, timeout_s=timeout_s)
    except export.ExportError as exc:
        return {**config, "skipped": str(exc), "ops": {}, "compute_ops": {}}
    manifest = export.read_manifest(where)
    return onnx_ir.inventory(where / export.ONNX, model=model, batch_size=batch_size, image_size=size,
                          precision=precision, exporter=manifest.get("onnx_exporter", ""),
                          seconds=time.perf_counter() - t0)


def capture_core_aten(image_sizes: dict[str, int], *, batch_size: int = 32, precision: str = "fp32",
                      timeout_s: float = JAX_TIMEOUT_S) -> list[dict[str, Any]]:
    """The Core ATen of each model's inference (:mod:`resnet_lab.hlo.torch_child`, one torch process for all):
    one :func:`core_aten_inventory` per model. Raises UsageError (torch not installed) or RuntimeError."""
    return start_core_aten(image_sizes, batch_size=batch_size, precision=precision)(timeout_s)


def start_core_aten(image_sizes: dict[str, int], *, batch_size: int = 32,
                    precision: str = "fp32") -> Callable[[float], list[dict[str, Any]]]:
    """:func:`capture_core_aten` started in the background: returns ``finish(timeout_s)`` that waits for the records."""
    if reason := ir_unavailable_reason("core-aten"):
        raise UsageError(reason)
    request = {"models": list(image_sizes), "image_sizes": image_sizes, "batch_size": batch_size,
               "precision": precision}
    run = _start_child("resnet_lab.hlo.torch_child", request, {"KERAS_BACKEND": "torch"})

    def finish(timeout_s: float = JAX_TIMEOUT_S) -> list[dict[str, Any]]:
        result = _reply(run, timeout_s * len(image_sizes), "Core ATen export")
        versions_ = {**result["versions"],
                     "resnet-lab": provenance.package_versions(("resnet-lab",))["resnet-lab"]}
        return [core_aten_inventory(name, got, batch_size=batch_size, image_size=image_sizes[name],
                                 precision=precision, versions=versions_) for name, got in result["models"].items()]

    return finish


ATEN_PLUMBING = ("aten._assert", "getitem")  # graph bookkeeping, not ops a backend implements


def core_aten_inventory(model: str, got: dict[str, Any], *, batch_size: int, image_size: int, precision: str,
                     versions: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JSON-ready Core ATen record from the child's result for ``model``: ``ops`` (every ``call_function``
    target), ``compute_ops`` (without :data:`ATEN_PLUMBING`), ``convolutions``, and ``keras_export_error`` where
    the native model stood in (``source`` says so); or a skipped record saying where the export failed."""
    config = {"model": model, "backend": "torch", "ir": "core-aten", "mode": "infer", "platform": "cpu",
              "batch_size": batch_size, "image_size": image_size, "precision": precision}
    if "export_error" in got:
        return {**config, "skipped": got["export_error"], "ops": {}, "compute_ops": {}}
    compute = {op: n for op, n in got["ops"].items() if not op.startswith(ATEN_PLUMBING)}
    return {**config, "source": got["source"], "capture_seconds": round(sum(got["seconds"].values()), 3),
            "seconds": got["seconds"], "ops": got["ops"], "compute_ops": compute,
            "convolutions": got["convolutions"], "versions": versions,
            **({"keras_export_error": got["keras_export_error"]} if "keras_export_error" in got else {})}


def capture_tflite(model: str, *, batch_size: int = 32, image_size: int | None = None,
                   precision: str = "fp32") -> dict[str, Any]:
    """The TFLite builtins of ``model``'s inference, read in this (TensorFlow) process (:func:`tflite.inventory`)."""
    size = check_request(model, modes=("infer",), stages=(), batch_size=batch_size, image_size=image_size,
                         precision=precision)
    if reason := ir_unavailable_reason("tflite"):
        raise UsageError(reason)
    return tflite.inventory(model, batch_size=batch_size, image_size=size, precision=precision)


def capture_portable(model_names: Sequence[str], irs: Sequence[str], *, modes: Sequence[str] = MODES,
                     batch_size: int = 32, image_size: int | None = None, precision: str = "fp32",
                     export_dir: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Core ATen, TFLite and ONNX records (whichever of :data:`PORTABLE_IRS` ``irs`` names; ONNX from the export
    in ``export_dir``, :func:`capture_onnx`) for each model and mode: the
    inference graph captured, the training step a skipped record saying why, and a missing framework a skipped
    record naming its ``pip install``. Notebook 02's op × IR table reads them beside HLO and StableHLO."""
    return start_portable(model_names, irs, modes=modes, batch_size=batch_size, image_size=image_size,
                          precision=precision, export_dir=export_dir)()


def start_portable(model_names: Sequence[str], irs: Sequence[str], *, modes: Sequence[str] = MODES,
                   batch_size: int = 32, image_size: int | None = None, precision: str = "fp32",
                   export_dir: str | os.PathLike | None = None) -> Callable[[], list[dict[str, Any]]]:
    """:func:`capture_portable` with Core ATen's torch process and ONNX's export started now (the export's child
    processes waited for in a thread): returns ``finish()``, which converts to TFLite in this process and then
    collects Core ATen's and ONNX's records. Requests are checked here, before anything runs."""
    model_names, irs, modes = ([x] if isinstance(x, str) else list(x) for x in (model_names, irs, modes))
    sizes = {m: check_request(m, modes=modes, stages=(), batch_size=batch_size, image_size=image_size,
                              precision=precision) for m in model_names}
    wanted = [ir for ir in PORTABLE_IRS if ir in irs]

    def skipped(name: str, ir: str, mode: str, reason: str) -> dict[str, Any]:
        return {"model": name, "backend": "tensorflow" if ir == "tflite" else "torch", "ir": ir, "mode": mode,
                "platform": "cpu", "batch_size": batch_size, "image_size": sizes[name], "precision": precision,
                "skipped": reason, "ops": {}, "compute_ops": {}}

    reasons = {ir: ir_unavailable_reason(ir) for ir in wanted}
    aten = (start_core_aten(sizes, batch_size=batch_size, precision=precision)
            if "core-aten" in wanted and "infer" in modes and not reasons["core-aten"] else None)
    onnx_job = None
    if "onnx" in wanted and "infer" in modes and not reasons["onnx"]:  # its export's processes start now too
        onnx_job = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        onnx_recs = onnx_job.submit(lambda: [capture_onnx(m, batch_size=batch_size, image_size=sizes[m],
                                                          precision=precision, export_dir=export_dir)
                                             for m in model_names])

    def finish() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for ir in wanted:
            if "infer" in modes:
                if reasons[ir]:
                    out += [skipped(m, ir, "infer", reasons[ir]) for m in model_names]
                elif ir == "tflite":
                    out += [capture_tflite(m, batch_size=batch_size, image_size=sizes[m], precision=precision)
                            for m in model_names]
                elif ir == "onnx" and onnx_job is not None:
                    out += onnx_recs.result()
                    onnx_job.shutdown()
            if "train" in modes:
                out += [skipped(m, ir, "train", NO_TRAINING[ir]) for m in model_names]
        if aten is not None:  # in PORTABLE_IRS order: Core ATen first
            out = aten() + out
        return out

    return finish


def versions() -> dict[str, str | None]:
    """Installed versions of the packages that change the HLO (None where absent)."""
    return provenance.package_versions(VERSION_PACKAGES)


def opcode_list_info() -> dict[str, Any]:
    """Where the opcode list the parser validates against came from."""
    table = parser.known_opcodes()
    return {"source": table.source, "sha256": table.sha256, "count": len(table.names)}


def describe_opcode_list(info: dict[str, Any]) -> str:
    """Where the parser's opcode list came from, as a sentence (:func:`opcode_list_info`)."""
    return (f"The installed XLA defines {info['count']} HLO opcodes (`{info['source']}`, sha256 "
            f"{str(info['sha256'])[:12]}…); every opcode below is checked against that list.")


def inventory(cap: Capture, origins: bool = False) -> dict[str, Any]:
    """One JSON-ready inventory of a capture: the configuration, versions, :func:`resnet_lab.hlo.parser.inventory`
    of the text, and with ``origins`` every instruction's layer, pass and signature
    (:func:`resnet_lab.hlo.origin.aggregate`)."""
    module = parser.parse(cap.text)
    xla_stage = TF_STAGES[cap.stage] if cap.backend == "tensorflow" else JAX_STAGES[cap.stage]
    return {
        "model": cap.model, "backend": cap.backend, "mode": cap.mode, "stage": cap.stage,
        "platform": cap.platform,
        "batch_size": cap.batch_size, "image_size": cap.image_size, "precision": cap.precision,
        "dtype_policy": DTYPE_POLICIES[cap.precision], "xla_stage": xla_stage,
        "capture_seconds": cap.seconds, "versions": cap.versions or versions(), "opcode_list": opcode_list_info(),
        **parser.inventory(module),
        **({"origins": origin.aggregate(origin.origins(module, cap.layers))} if origins else {}),
    }


def skipped_inventory(model: str, mode: str, stage: str, platform: str, reason: str, **config: Any) -> dict:
    """A row for a configuration that cannot be captured on this host (e.g. GPU without a GPU)."""
    config.setdefault("backend", "tensorflow")
    return {"model": model, "mode": mode, "stage": stage, "platform": platform, **config,
            "skipped": reason, "opcodes": {}}


def capture_matrix(
    model_names: Sequence[str],
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platforms: Sequence[str] = ("cpu",),
    batch_size: int = 32,
    image_size: int | None = None,
    precision: str = "fp32",
    backends: Sequence[str] = ("tensorflow",),
    stablehlo_records: list[dict[str, Any]] | None = None,
    origins_for: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """:func:`inventory` rows for every backend × model × mode × stage × platform; a platform or backend this
    host lacks gives :func:`skipped_inventory` rows instead of an error. ``image_size=None``: each model's
    default. A single string is taken as a one-element list (papermill's ``-p models resnet50``).

    ``stablehlo_records``: a list to receive the StableHLO of the JAX steps (:func:`stablehlo_inventory`, one per
    model, mode and platform), read in the same JAX child process as their HLO. ``origins_for``: the models whose
    inventories also carry ``origins`` (see :func:`inventory`)."""
    model_names, modes, stages, platforms, backends = (
        [x] if isinstance(x, str) else list(x) for x in (model_names, modes, stages, platforms, backends))
    sizes = {m: check_request(m, modes=modes, stages=stages, platform=p, batch_size=batch_size,
                              image_size=image_size, precision=precision, backend=b)
             for m in model_names for p in platforms for b in backends}
    # JAX's steps compile in one child process per platform, started before TensorFlow's captures run here:
    # both compile mostly on one core, so on two cores they overlap (02: ~50 s less on the 2-core hosts)
    jax_jobs = {p: start_jax_models({m: sizes[m] for m in model_names}, modes=modes, stages=stages, platform=p,
                                    batch_size=batch_size, precision=precision,
                                    stablehlo=stablehlo_records is not None)
                for p in platforms if "jax" in backends and jax_unavailable_reason() is None}
    rows = []
    for backend in backends:
        for platform in platforms:
            reason = jax_unavailable_reason() if backend == "jax" else None
            if platform == "gpu" and backend == "tensorflow":
                reason = reason or gpu_unavailable_reason()
            by_model: dict[str, list[Capture]] = {}
            if not reason and backend == "jax":  # one child process for every model
                try:
                    by_model = jax_jobs[platform]()
                except UsageError as exc:  # e.g. JAX without a GPU device: rows that say so
                    reason = str(exc)
            for name in model_names:
                config = {"batch_size": batch_size, "image_size": sizes[name], "precision": precision,
                          "backend": backend}
                if reason:
                    rows += [skipped_inventory(name, mode, stage, platform, reason, **config)
                             for mode in modes for stage in stages]
                    continue
                tf_stable = (stablehlo_records is not None and backend == "tensorflow" and "before" in stages
                             and jax_unavailable_reason() is None)  # the conversion is jax's
                caps = by_model[name] if backend == "jax" else capture(
                    name, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                    image_size=sizes[name], precision=precision, backend=backend,
                    serialized=("before",) if tf_stable else False)
                rows += [inventory(c, origins=name in origins_for) for c in caps if c.stage != "stablehlo"]
                if stablehlo_records is not None:  # JAX's lowering; TensorFlow's module converted
                    stablehlo_records += [stablehlo_inventory(c) for c in caps if c.stage == "stablehlo"
                                          or (tf_stable and c.stage == "before")]
    return rows


def proto_inventory(serialized: bytes) -> dict[str, Any]:
    """Counts from a serialized ``HloModuleProto`` (XLA's own opcode strings, no text involved):
    ``opcodes``, ``fusion_kinds``, ``custom_call_targets``, ``compare_directions``, ``num_computations``."""
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo_pb2.HloModuleProto()
    proto.ParseFromString(serialized)
    counts: dict[str, collections.Counter[str]] = {
        k: collections.Counter() for k in ("opcodes", "fusion_kinds", "custom_call_targets",
                                           "compare_directions")
    }
    for comp in proto.computations:
        for ins in comp.instructions:
            counts["opcodes"][ins.opcode] += 1
            if ins.opcode == "fusion":
                counts["fusion_kinds"][ins.fusion_kind] += 1
            elif ins.opcode == "custom-call":
                counts["custom_call_targets"][ins.custom_call_target] += 1
            elif ins.opcode == "compare":
                counts["compare_directions"][ins.comparison_direction] += 1
    return {"module": proto.name, "num_computations": len(proto.computations),
            **{k: dict(sorted(c.items())) for k, c in counts.items()}}
