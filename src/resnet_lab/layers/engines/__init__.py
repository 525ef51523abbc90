"""Each engine and framework profiled per layer, one module each, behind one registry.

A profile runs in its own process (:mod:`resnet_lab.layers.profile_child`, the child that dispatches here); the
request names a row key (:data:`resnet_lab.core.choices.ROW_KEYS`): an engine's request carries ``engine`` (the
export folder, the batch, the recipe, the precision), a framework's the ``config`` of the row ``bench`` would time.
:func:`profile` hands it to the row's module, whose ``profile(request)`` replies with the step's time, the profiled
steps' time, and every kernel (its name, its summed milliseconds, the Keras layers it computes; in a training step,
its pass). The parsers each module uses (an engine's trace or profile format to kernels) are plain functions,
importable without being a child:

- :mod:`.onnxruntime`, :mod:`.openvino`: the ONNX export's engines (:mod:`.export_graph`: a kernel's export nodes);
- :mod:`.iree`: the export's StableHLO under IREE's HAL profiling;
- :mod:`.tensorflow`: TensorFlow's graph (the executor's op events); :mod:`.tensorflow_xla`: under ``jit_compile``;
- :mod:`.torch_eager`, :mod:`.inductor`: native PyTorch eager and under TorchInductor;
- :mod:`.jax`: JAX under ``jax.jit``;
- :mod:`.xla`: XLA:CPU's thunk events and the optimized HLO, shared by TensorFlow under XLA and JAX;
- :mod:`.base`: the timing and the framework row's setup every module shares.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from resnet_lab.core.choices import row_key

CHILD = "resnet_lab.layers.profile_child"
# row key -> the module that profiles it
MODULES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "iree": "iree", "tensorflow": "tensorflow",
           "tensorflow:jit": "tensorflow_xla", "torch": "torch_eager", "torch:jit": "inductor", "jax": "jax"}


def module(key: str) -> ModuleType:
    """The module that profiles the row key ``key``."""
    return importlib.import_module(f"{__name__}.{MODULES[key]}")


def engine_env() -> dict[str, str]:
    """An engine's child's environment: Keras on torch (the export's reference batch is read with numpy; no
    TensorFlow is imported), on the CPU."""
    from resnet_lab import export

    return export.child_env("torch")


def key_of(request: dict[str, Any]) -> str:
    """The row key a child's request profiles: its engine, or its framework row's (``config``)."""
    if "config" in request:
        return row_key(request["config"]["backend"], request["config"].get("xla"))
    return request["engine"]


def profile(request: dict[str, Any]) -> dict[str, Any]:
    """The request's row profiled by its module (in this process: the child's)."""
    return module(key_of(request)).profile(request)
