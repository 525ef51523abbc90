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
# Keras' own exporter on its torch backend: Model.export(format="onnx") runs torch.onnx on the Keras model
# (the TorchScript exporter, since the batch dimension is dynamic; onnx and torch only). Checked on these
# versions (torch 2.13, Keras 3.15): it reproduces the JAX logits of the same weights to ~1e-7 on tiny-resnet.
# The alternatives need another package each: tf2onnx (the TensorFlow backend's route; it pins an older
# protobuf and numpy than TensorFlow 2.21 brings) or jax2onnx (the JAX backend's).
EXPORTER = "keras Model.export(format='onnx') on Keras' torch backend (torch.onnx)"
# The ONNX model is exported from the model built channels_first: Keras on torch runs a channels_last model's
# convolutions through a transpose to NCHW and back, which the export would keep (two Transpose nodes around
# each of ResNet-50's 53 convolutions; OpenVINO's runtime model kept 102 of them). The engines are given the
# reference batch transposed to NCHW once, outside the timed loop (onnx_input).
ONNX_LAYOUT = "channels_first"
# An engine agrees with Keras when max |engine - Keras| / max |Keras| over the logits of the reference batch
# is at most this (per precision; the engines run fp32 here). fp32 engines agree to ~1e-6 on ResNet-50
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
KEY_SOURCES = ("export/__init__.py", "export/export_child.py", "models/specs.py", "models/keras_builder.py")


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


def read_manifest(where: str | os.PathLike) -> dict[str, Any]:
    """The folder's ``manifest.json`` (an empty manifest where there is none yet)."""
    p = Path(where) / MANIFEST
    return json.loads(p.read_text()) if p.is_file() else {"stablehlo": {}, "reference": {}, "onnx": None}


def missing(where: str | os.PathLike, batch_sizes: Iterable[int], onnx: bool,
            stablehlo: bool | Iterable[int] = True) -> dict[str, Any]:
    """What :func:`ensure` must still make: ``{"reference": [...], "stablehlo": [...], "onnx": bool}`` (the
    batch sizes whose reference batch or StableHLO module is not there yet; ``stablehlo``: for every batch
    size, none, or those listed)."""
    m, where = read_manifest(where), Path(where)
    sizes = sorted(set(batch_sizes))
    modules = sizes if stablehlo is True else [] if stablehlo is False else sorted(set(stablehlo))
    refs = [b for b in sizes if str(b) not in m.get("reference", {}) or not (where / reference_file(b)).is_file()]
    lower = [b for b in modules if str(b) not in m.get("stablehlo", {}) or not (where / stablehlo_file(b)).is_file()]
    return {"reference": refs, "stablehlo": lower,
            "onnx": onnx and not (m.get("onnx") and (where / ONNX).is_file())}


def child_env(backend: str) -> dict[str, str]:
    """The export child's environment: Keras on ``backend`` (jax or torch), on the CPU."""
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def ensure(root: str | os.PathLike | None, model: str, image_size: int, batch_sizes: Iterable[int], *,
           onnx: bool = True, stablehlo: bool | Iterable[int] = True, timeout_s: float = 900.0,
           log_dir: str | os.PathLike | None = None) -> Path:
    """The export folder of ``model`` at ``image_size`` with the reference batch of every size in ``batch_sizes``,
    its StableHLO module where ``stablehlo`` (True: every size; or the sizes listed) and the ONNX model where
    ``onnx``: what is already there is kept,
    the rest made in child processes (one on Keras' JAX backend for all the batch sizes, one on its torch
    backend for the ONNX model). Raises :class:`ExportError` (one line) when a step fails."""
    where = folder(root, model, image_size)
    if not any(missing(where, batch_sizes, onnx, stablehlo).values()):
        note_use(where)
        return where
    where.mkdir(parents=True, exist_ok=True)
    with open(where / ".lock", "w") as lock:  # one maker at a time: two runs may share a cache entry
        fcntl.flock(lock, fcntl.LOCK_EX)
        _make(where, model, image_size, batch_sizes, onnx, stablehlo, timeout_s, log_dir)
    note_use(where)
    return where


def _make(where: Path, model: str, image_size: int, batch_sizes: Iterable[int], onnx: bool,
          stablehlo: bool | Iterable[int], timeout_s: float, log_dir: str | os.PathLike | None) -> None:
    """:func:`ensure`'s work in ``where``, under its lock: what is still missing, in child processes."""
    todo = missing(where, batch_sizes, onnx, stablehlo)
    refs = sorted({*todo["reference"], *todo["stablehlo"]})
    if todo["onnx"] and not (where / WEIGHTS).is_file() and not refs:  # the ONNX model takes the JAX weights
        refs = [min(batch_sizes, default=1)]
    steps = []
    if refs:
        steps.append(("jax", {"part": "stablehlo", "batch_sizes": refs, "lower": todo["stablehlo"]}))
    if todo["onnx"]:
        have = [int(b) for b in read_manifest(where).get("reference", {})]
        steps.append(("torch", {"part": "onnx", "batch_size": min([*have, *refs])}))
    for backend, request in steps:
        request = {**request, "model": model, "image_size": image_size, "folder": str(where), "seed": SEED}
        log = Path(log_dir) / f"export-{model}-{request['part']}.log" if log_dir else None
        if log:
            log.parent.mkdir(parents=True, exist_ok=True)
        outcome = child.run(CHILD, request, timeout_s=timeout_s, env=child_env(backend), log_path=log)
        if not outcome.ok:
            raise ExportError(outcome.reason(f"export of {model} ({request['part']}, Keras on {backend})"))


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
    tol = TOLERANCE[precision]
    if out.shape != ref.shape:
        return {"check_max_abs": None, "check_max_rel": None, "check_tol": tol, "check_ok": False,
                "check_note": f"logits of shape {out.shape}, Keras' are {ref.shape}"}
    diff = float(np.max(np.abs(out - ref))) if out.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    rel = diff / scale if scale > 0 else diff
    ok = bool(np.all(np.isfinite(out)) and rel <= tol)
    return {"check_max_abs": diff, "check_max_rel": rel, "check_tol": tol, "check_ok": ok, "check_note": ""}


def check_reason(check: dict[str, Any]) -> str:
    """The one-line reason of a row whose output check failed."""
    if check.get("check_note"):
        return f"output check failed: {check['check_note']}"
    return (f"output check failed: logits differ from Keras' by {check['check_max_rel']:.3g} of the largest "
            f"(max abs {check['check_max_abs']:.3g}); tolerance {check['check_tol']:g}")
