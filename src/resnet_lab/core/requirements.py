"""What each part of the workbook needs installed, in one table, and the one question "is it there?".

A backend (Keras 3's tensorflow, jax, torch), an engine (IREE, ONNX Runtime, OpenVINO: each runs the model the
workbook exports, so it needs what makes that export too) or an IR (what ``resnet-lab ops`` reads a step in)
needs a set of distributions; :func:`missing` answers without importing any of them (package metadata only),
as one line that names what is absent and the ``pip install`` that brings it. Every "is X installed?" in the
package asks here, so the extra named is the same wherever the question is asked.

:func:`gpus` is the one GPU probe: ``nvidia-smi``'s list, read without importing a framework.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os

from resnet_lab.core import provenance


@dataclasses.dataclass(frozen=True)
class Requirement:
    """``all_of``: every one of these distributions; ``any_of``: at least one (a framework with two builds)."""

    all_of: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    extras: str = ""  # the project's extras that bring them: pip install -e ".[<extras>]"

    def install(self) -> str:
        return f"pip install -e '.[{self.extras}]'" if self.extras else "pip install -e ."


_TF = ("tensorflow", "tensorflow-cpu")  # either build installs the same module
_EXPORT = ("jax", "torch", "onnx")  # the export: JAX for StableHLO and reference logits, torch+onnx for ONNX

# name -> what it needs. Backends, engines and IRs share one namespace (their names do not collide).
TABLE: dict[str, Requirement] = {
    # Keras 3 backends
    "tensorflow": Requirement(any_of=_TF),
    "jax": Requirement(all_of=("jax",), extras="jax"),
    "torch": Requirement(all_of=("torch",), extras="torch"),
    # engines fed the exported model (resnet_lab.export): the engine, and what makes the export it reads
    "iree": Requirement(all_of=("iree-base-compiler", "iree-base-runtime", "jax"), extras="jax,compilers"),
    "onnxruntime": Requirement(all_of=("onnxruntime", *_EXPORT), extras="jax,torch,compilers"),
    "openvino": Requirement(all_of=("openvino", *_EXPORT), extras="jax,torch,compilers"),
    # IRs read by `resnet-lab ops` besides HLO (TensorFlow's or JAX's)
    "hlo": Requirement(any_of=_TF),
    "stablehlo": Requirement(all_of=("jax",), extras="jax"),
    "core-aten": Requirement(all_of=("torch",), extras="torch"),
    "tflite": Requirement(any_of=_TF),
    "onnx": Requirement(all_of=_EXPORT, extras="jax,torch,compilers"),
}


def installed(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None. Reads package metadata; imports nothing."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def absent(name: str) -> list[str]:
    """The distributions :data:`TABLE` ``[name]`` lacks here (``a or b`` for an any-of group)."""
    req = TABLE[name]
    out = [d for d in req.all_of if installed(d) is None]
    if req.any_of and not any(installed(d) for d in req.any_of):
        out.append(" or ".join(req.any_of))
    return out


def missing(name: str) -> str | None:
    """None where everything ``name`` needs is installed; else one line: what is absent, how to install it."""
    lacking = absent(name)
    if not lacking:
        return None
    return f"{name} needs {', '.join(lacking)}, not installed ({TABLE[name].install()})"


def gpus() -> tuple[list[dict[str, str]], str]:
    """(the NVIDIA GPUs this process may use, how we know), without importing a framework.

    ``CUDA_VISIBLE_DEVICES`` empty or -1 hides every one; else ``nvidia-smi``'s list
    (:func:`resnet_lab.core.provenance.gpu_info`). Whether a framework's build can use them is the caller's
    question (a CPU build of TensorFlow or torch sees none)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return [], "CUDA_VISIBLE_DEVICES hides every GPU"
    found = provenance.gpu_info()
    return found, "nvidia-smi" if found else "no GPU is visible on this host (nvidia-smi finds none)"
