"""The model exported once for the other compilers, and the check that an engine's logits are Keras'.

One folder per (model, image size, weights seed) holds, written by :mod:`resnet_lab.export.export_child` and
reused by every later row (``manifest.json`` says what is there). By default the folder is an entry of a
content-addressed cache, ``outputs/cache/export/<model>-<size>px-seed<S>-<key>/`` (:func:`cache_key`: what
determines the files: the model, seed and image size, the exporting packages' versions and the code that builds
and exports the model), shared by every run, ``bench`` and ``ops`` of one commit and environment: a run folder
keeps ``export.json``, which entry it used (:func:`note_use`), not a copy of ~400 MB. ``resnet-lab cache`` lists
and prunes the entries. The folder holds:

- ``weights.weights.h5``: the Keras model's weights, built once on Keras' JAX backend with
  ``keras.utils.set_random_seed(SEED)``; every other piece is made from these weights.
- ``stablehlo_infer_b{B}.mlir``: the inference step at batch B, ``jax.jit(f).lower(x).as_text()`` with the
  weights closed over (constants of the module), what IREE compiles. One module per batch size: its shapes
  are static, as JAX lowers them.
- ``model.onnx``: the same network and weights (batch dimension dynamic, NCHW input: :data:`ONNX_LAYOUT`),
  what ONNX Runtime and OpenVINO read. Exporter: :data:`EXPORTER` (why: see there).
- ``reference_b{B}.npz``: one fixed batch (``images``) and Keras' logits on it (``logits``, Keras on JAX,
  inference mode), the reference every engine is checked against before it is timed (:func:`compare`).

Plain Python here (numpy only in :func:`compare`): :func:`ensure` starts the child processes (JAX, then
Keras' torch backend for the ONNX model) for the pieces a folder lacks.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from resnet_lab.core import artifacts, child, requirements

CHILD = "resnet_lab.export.export_child"
SEED = 0  # keras.utils.set_random_seed of the exported weights; the reference batch's numpy seed too
MANIFEST = "manifest.json"
WEIGHTS = "weights.weights.h5"
ONNX = "model.onnx"
# The ONNX model as a PyTorch user makes it: the native torch.nn model (resnet_lab.models.build_torch, torchvision's
# layout) with the Keras weights, in eval mode, through torch.onnx.export with its default exporter (torch.export;
# PyTorch's ONNX docs call it the recommended way), which folds each batch norm into its convolution: ResNet-50 v1.5
# is 122 nodes (53 Conv, 49 Relu, 16 Add, MaxPool, ReduceMean, Reshape, Gemm), each renamed after the module it comes
# from (name_nodes_by_module: "layer1.0.conv1/Conv"). Keras' own export on its torch backend (KERAS_EXPORTER; 757
# nodes: a Cast around every op, batch norm as Sub/Mul/Add, anonymous names) measured the engines' cleanup of that
# artifact, not the network; it stays a named variant (model_keras.onnx, `ensure(keras_variant=True)`) and the
# export of models that have no native builder (Keras' own ResNet50).
EXPORTER = "torch.onnx.export (torch.export-based, default) of the native torch.nn model with the Keras weights"
KERAS_EXPORTER = "keras Model.export(format='onnx') on Keras' torch backend (torch.onnx)"
ONNX_KERAS = "model_keras.onnx"
# The ONNX model takes NCHW images, as PyTorch's modules do (and Keras' variant, built channels_first so that no
# transposes surround its convolutions). The engines are given the reference batch transposed to NCHW once, outside
# the timed loop (onnx_input).
ONNX_LAYOUT = "channels_first"
# An engine agrees with Keras when max |engine - Keras| / max |Keras| over the logits of the reference batch
# is at most this (fp32; a reduced precision: AGREEMENT's max_rel). fp32 engines agree to ~1e-6 on ResNet-50
# (their own convolution algorithms and summation orders); one changed op moves the logits by far more.
TOLERANCE = {"fp32": 1e-4}
# IREE's training step agrees with JAX's when the loss and every updated variable differ by at most this, over
# each tensor's largest value (fp32; one step of SGD with momentum from the same weights and batch).
TRAIN_TOLERANCE = 1e-4


class ExportError(RuntimeError):
    """An export step failed: the message is one line saying which and why."""


CACHE_DIR = ("cache", "export")  # under the outputs root: the cache's entries
USED = "export.json"  # in a run folder: the cache entries its rows and captures read
# What the exported files depend on besides model, seed and size: these packages' versions and this code.
KEY_PACKAGES = ("keras", "jax", "jaxlib", "torch", "onnx", "onnxscript", "numpy", "ml-dtypes")
KEY_SOURCES = ("export/__init__.py", "export/export_child.py", "export/photos.py", "models/specs.py",
               "models/keras_builder.py", "models/torch_builder.py")


def cache_key(model: str, image_size: int) -> str:
    """The content address of an export: a SHA-256 prefix over the model, image size, seed, the versions of
    :data:`KEY_PACKAGES` and the text of :data:`KEY_SOURCES`. Another version or another line of that code is
    another entry; the same inputs always find the same one."""
    h = hashlib.sha256(json.dumps({"model": model, "image_size": image_size, "seed": SEED,
                                   "packages": {p: requirements.installed(p) for p in KEY_PACKAGES}},
                                  sort_keys=True).encode())
    pkg = Path(__file__).resolve().parents[1]
    for rel in KEY_SOURCES:
        h.update((pkg / rel).read_bytes())
    return h.hexdigest()[:16]


def cache_root(outputs: str | os.PathLike | None = None) -> Path:
    return Path(outputs or artifacts.outputs_root()).joinpath(*CACHE_DIR)


def folder(root: str | os.PathLike | None, model: str, image_size: int) -> Path:
    """Where the export of ``model`` at ``image_size`` lives: under ``root`` where one is given (its
    ``<model>-<size>px-seed<S>``), else the cache's entry (:func:`cache_root`, :func:`cache_key`)."""
    name = f"{model}-{image_size}px-seed{SEED}"
    if root:
        return Path(root) / name
    return cache_root() / f"{name}-{cache_key(model, image_size)}"


def note_use(where: Path, run_dir: str | os.PathLike | None = None) -> None:
    """Write into the run folder (``run_dir``, default ``$RESNET_LAB_RUN_DIR``; nothing outside a run) that it
    used the export in ``where``: ``export.json``, one entry per folder with its path, key and manifest."""
    run_dir = run_dir or os.environ.get("RESNET_LAB_RUN_DIR")
    if not run_dir or not Path(run_dir).is_dir():
        return
    path = Path(run_dir) / USED
    try:
        used = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        used = {}
    entry = {"path": str(where), "key": where.name.rsplit("-", 1)[-1], "manifest": read_manifest(where)}
    used[where.name] = entry
    artifacts.write_json(path, used)


def stablehlo_file(batch_size: int) -> str:
    return f"stablehlo_infer_b{batch_size}.mlir"


def reference_file(batch_size: int) -> str:
    return f"reference_b{batch_size}.npz"


PHOTOS = "photos.npz"  # the photographs (NHWC) and Keras' fp32 logits on them: the reduced-precision reference


def read_manifest(where: str | os.PathLike) -> dict[str, Any]:
    """The folder's ``manifest.json`` (an empty manifest where there is none yet)."""
    p = Path(where) / MANIFEST
    return json.loads(p.read_text()) if p.is_file() else {"stablehlo": {}, "reference": {}, "onnx": None}


def missing(where: str | os.PathLike, batch_sizes: Iterable[int], onnx: bool,
            stablehlo: bool | Iterable[int] = True, keras_variant: bool = False) -> dict[str, Any]:
    """What :func:`ensure` must still make: ``{"reference": [...], "stablehlo": [...], "onnx": bool}`` (the
    batch sizes whose reference batch or StableHLO module is not there yet; ``stablehlo``: for every batch
    size, none, or those listed)."""
    m, where = read_manifest(where), Path(where)
    sizes = sorted(set(batch_sizes))
    modules = sizes if stablehlo is True else [] if stablehlo is False else sorted(set(stablehlo))
    refs = [b for b in sizes if str(b) not in m.get("reference", {}) or not (where / reference_file(b)).is_file()]
    lower = [b for b in modules if str(b) not in m.get("stablehlo", {}) or not (where / stablehlo_file(b)).is_file()]
    return {"reference": refs, "stablehlo": lower, "photos": not (where / PHOTOS).is_file(),
            "onnx": onnx and not (m.get("onnx") and (where / ONNX).is_file()),
            "keras_variant": keras_variant and not (m.get("onnx_keras") and (where / ONNX_KERAS).is_file())}


def child_env(backend: str) -> dict[str, str]:
    """The export child's environment: Keras on ``backend`` (jax or torch), on the CPU."""
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def ensure(root: str | os.PathLike | None, model: str, image_size: int, batch_sizes: Iterable[int], *,
           onnx: bool = True, stablehlo: bool | Iterable[int] = True, timeout_s: float = 900.0,
           log_dir: str | os.PathLike | None = None, keras_variant: bool = False) -> Path:
    """The export folder of ``model`` at ``image_size`` with the reference batch of every size in ``batch_sizes``,
    its StableHLO module where ``stablehlo`` (True: every size; or the sizes listed) and the ONNX model where
    ``onnx``: what is already there is kept,
    the rest made in child processes (one on Keras' JAX backend for all the batch sizes, one on its torch
    backend for the ONNX model). Raises :class:`ExportError` (one line) when a step fails."""
    where = folder(root, model, image_size)
    if not any(missing(where, batch_sizes, onnx, stablehlo, keras_variant).values()):
        note_use(where)
        return where
    where.mkdir(parents=True, exist_ok=True)
    with open(where / ".lock", "w") as lock:  # one maker at a time: two runs may share a cache entry
        fcntl.flock(lock, fcntl.LOCK_EX)
        _make(where, model, image_size, batch_sizes, onnx, stablehlo, timeout_s, log_dir, keras_variant)
    note_use(where)
    return where


def _make(where: Path, model: str, image_size: int, batch_sizes: Iterable[int], onnx: bool,
          stablehlo: bool | Iterable[int], timeout_s: float, log_dir: str | os.PathLike | None,
          keras_variant: bool = False) -> None:
    """:func:`ensure`'s work in ``where``, under its lock: what is still missing, in child processes."""
    todo = missing(where, batch_sizes, onnx, stablehlo, keras_variant)
    refs = sorted({*todo["reference"], *todo["stablehlo"]})
    onnx_todo = todo["onnx"] or todo["keras_variant"]
    # the ONNX model takes the JAX weights; the photographs' logits come with any reference
    if ((onnx_todo and not (where / WEIGHTS).is_file()) or todo["photos"]) and not refs:
        refs = [min(batch_sizes, default=1)]
    steps = []
    if refs:
        steps.append(("jax", {"part": "stablehlo", "batch_sizes": refs, "lower": todo["stablehlo"]}))
    if onnx_todo:
        have = [int(b) for b in read_manifest(where).get("reference", {})]
        steps.append(("torch", {"part": "onnx", "batch_size": min([*have, *refs]),
                                "keras_variant": todo["keras_variant"]}))
    for backend, request in steps:
        request = {**request, "model": model, "image_size": image_size, "folder": str(where), "seed": SEED}
        log = Path(log_dir) / f"export-{model}-{request['part']}.log" if log_dir else None
        if log:
            log.parent.mkdir(parents=True, exist_ok=True)
        outcome = child.run(CHILD, request, timeout_s=timeout_s, env=child_env(backend), log_path=log)
        if not outcome.ok:
            raise ExportError(outcome.reason(f"export of {model} ({request['part']}, Keras on {backend})"))


def name_nodes_by_module(proto: Any) -> int:
    """Rename the nodes of a ``torch.onnx.export`` (torch.export) model after the module each comes from, as its
    ``pkg.torch.onnx.name_scopes`` metadata records it (the module scopes, then the FX node): ``node_Conv_12``
    becomes ``layer1.0.conv1/Conv`` (a module called twice: ``layer1.0.relu/Relu``, ``layer1.0.relu/Relu_1``), so an
    engine's profile names the layer. A convolution with its batch norm folded in comes out of the batch norm's
    scope: it is named after the convolution before it (``bn2`` → ``conv2``, ``downsample.1`` → ``downsample.0``)
    and its ``layers`` metadata names both. Returns how many nodes were renamed (one without scopes keeps its
    name)."""
    import ast
    import re

    seen: dict[str, int] = {}
    renamed = 0
    for node in proto.graph.node:
        meta = {p.key: p.value for p in node.metadata_props}
        try:
            scopes = [s for s in ast.literal_eval(meta.get("pkg.torch.onnx.name_scopes", "[]")) if s]
        except (ValueError, SyntaxError):
            scopes = []
        if len(scopes) < 2:
            continue
        module = scopes[-2]
        layers = [module]
        if node.op_type == "Conv":
            conv = re.sub(r"(^|\.)bn(\d+)$", r"\1conv\2", module)
            conv = re.sub(r"downsample\.1$", "downsample.0", conv)
            if conv != module:
                layers = [conv, module]
                module = conv
        base = f"{module}/{node.op_type}"
        count = seen.get(base, 0)
        seen[base] = count + 1
        node.name = base if count == 0 else f"{base}_{count}"
        prop = node.metadata_props.add()
        prop.key, prop.value = "layers", "+".join(layers)
        renamed += 1
    return renamed


def onnx_input(images: Any) -> Any:
    """The NHWC reference batch as the ONNX model takes it (:data:`ONNX_LAYOUT`): NCHW, contiguous."""
    import numpy as np

    return np.ascontiguousarray(np.transpose(images, (0, 3, 1, 2))) if ONNX_LAYOUT == "channels_first" else images


def iree_train_step(model: str, image_size: int, batch_size: int = 2, *,
                    timeout_s: float = 900.0) -> dict[str, Any]:
    """The JAX training step's StableHLO compiled and run by IREE, compared with JAX's own step (see
    :func:`resnet_lab.export.export_child.iree_train`), in a child process on Keras' JAX backend. Always a dict:
    ``status`` ok (the loss and the updated weights agree within :data:`TRAIN_TOLERANCE`) or error, ``stage``
    (compile, run, compare) and ``reason`` (the error's first line) where it did not get through."""
    request = {"part": "iree_train", "model": model, "image_size": image_size, "batch_size": batch_size,
               "seed": SEED}
    outcome = child.run(CHILD, request, timeout_s=timeout_s, env=child_env("jax"))
    if not outcome.ok:
        return {"model": model, "image_size": image_size, "batch_size": batch_size, "status": "error",
                "stage": "child", "reason": outcome.reason("IREE training step")}
    return outcome.reply


def compare(out: Any, ref: Any, precision: str = "fp32") -> dict[str, Any]:
    """An engine's logits ``out`` against Keras' ``ref`` on the same batch: the row's check fields.

    ``check_max_abs`` (max |out - ref|), ``check_max_rel`` (that over max |ref|), ``check_tol`` (the
    tolerance of :data:`TOLERANCE` for ``precision``) and ``check_ok`` (shape equal, all finite, within it)."""
    import numpy as np

    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    tol = TOLERANCE.get(precision, AGREEMENT[precision]["max_rel"])
    if out.shape != ref.shape:
        return {"check_max_abs": None, "check_max_rel": None, "check_tol": tol, "check_ok": False,
                "check_note": f"logits of shape {out.shape}, Keras' are {ref.shape}"}
    diff = float(np.max(np.abs(out - ref))) if out.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    rel = diff / scale if scale > 0 else diff
    ok = bool(np.all(np.isfinite(out)) and rel <= tol)
    return {"check_max_abs": diff, "check_max_rel": rel, "check_tol": tol, "check_ok": ok, "check_note": ""}


# The agreement of a row with the fp32 reference on the photographs (:mod:`resnet_lab.export.photos`), per precision:
# the largest logit difference over the largest reference logit at most ``max_rel``, and at least ``top1`` of the
# photographs keeping the reference's top-1 class. fp32: the engines' tolerance above, every class kept. bf16: its
# unit roundoff is u = 2^-8 (8 significant bits); a ResNet-50 rounds each convolution's inputs once and sums in fp32,
# so the logit error grows with depth to a few u of the largest logit: measured on the AMD EPYC (family 25, 2026-12-05,
# ResNet-50 v1.5 at 224², the export's weights, 16 photographs) OpenVINO 0.0079, native PyTorch autocast under
# torch.compile 0.0059-0.0063, TensorFlow mixed_bfloat16 0.0047-0.0062, IREE's demotion 0.0060; top-1 kept on every
# photograph, top-5 on 15-16 of 16. 8u = 0.031 leaves a factor of four; one wrong op moves the logits by far more.
# A top-1 class may change where two classes are within that error of each other, so bf16 asks for 7 of 8.
AGREEMENT = {"fp32": {"max_rel": 1e-4, "top1": 1.0}, "bf16": {"max_rel": 8 * 2.0 ** -8, "top1": 0.875},
             "fp16": {"max_rel": 8 * 2.0 ** -11, "top1": 0.875}}


def agreement(out: Any, ref: Any, precision: str = "fp32") -> dict[str, Any]:
    """A row's logits ``out`` on the photographs against the fp32 reference's ``ref``: the row's ``agree_*``
    fields (top-1 and top-5 agreement, the largest relative logit difference, its tolerance, and whether both
    pass :data:`AGREEMENT` of ``precision``)."""
    import numpy as np

    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    rule = AGREEMENT[precision]
    if out.shape != ref.shape or out.ndim != 2:
        return {"agree_top1": None, "agree_top5": None, "agree_max_rel": None, "agree_tol": rule["max_rel"],
                "agree_ok": False}
    k = min(5, ref.shape[1])
    top1 = float(np.mean(np.argmax(out, 1) == np.argmax(ref, 1)))
    top5 = float(np.mean([set(a) == set(b) for a, b in zip(np.argsort(-out, 1)[:, :k], np.argsort(-ref, 1)[:, :k],
                                                            strict=True)]))
    scale = float(np.max(np.abs(ref))) or 1.0
    rel = float(np.max(np.abs(out - ref))) / scale
    ok = bool(np.all(np.isfinite(out)) and rel <= rule["max_rel"] and top1 >= rule["top1"])
    return {"agree_top1": top1, "agree_top5": top5, "agree_max_rel": rel, "agree_tol": rule["max_rel"], "agree_ok": ok}


def agreement_reason(agree: dict[str, Any], precision: str) -> str:
    """The one-line reason of a row that failed its photograph agreement."""
    if agree.get("agree_max_rel") is None:
        return "agreement check failed: the logits on the photographs have another shape than the reference's"
    return (f"agreement check failed ({precision} against fp32 on the photographs): top-1 "
            f"{agree['agree_top1']:.0%}, max relative logit difference {agree['agree_max_rel']:.3g} "
            f"(tolerance {agree['agree_tol']:.3g}, top-1 at least {AGREEMENT[precision]['top1']:.0%})")


def check_reason(check: dict[str, Any]) -> str:
    """The one-line reason of a row whose output check failed."""
    if check.get("check_note"):
        return f"output check failed: {check['check_note']}"
    return (f"output check failed: logits differ from Keras' by {check['check_max_rel']:.3g} of the largest "
            f"(max abs {check['check_max_abs']:.3g}); tolerance {check['check_tol']:g}")
