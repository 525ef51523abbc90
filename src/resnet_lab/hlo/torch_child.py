"""Core ATen of the inference step, for :mod:`resnet_lab.hlo.capture`: its own process, ``KERAS_BACKEND=torch``.

``python -m resnet_lab.hlo.torch_child REQUESTS.json REPLIES.jsonl`` (:mod:`resnet_lab.core.child`): builds each
requested zoo model on Keras' torch backend (one torch import for all of them), exports its inference call with
``torch.export.export`` and lowers the exported program to Core ATen with ``run_decompositions()`` (the default
decomposition table), then counts the ``call_function`` nodes of its graph by target (``aten.convolution.default``)
and reads each convolution's configuration from its arguments and the ``val`` metadata of its operands. Nothing is
executed.

Where the Keras model cannot be exported, the result says where (``keras_export_error``: exception type and first
line) and the equivalent native PyTorch model (:mod:`resnet_lab.models.torch_builder`) is exported instead, its
``source`` saying so; ``export_error`` when neither exports. (The zoo's Keras models export on torch 2.13.)

A separate process because Keras picks its backend once, at import: the notebook's own is TensorFlow.
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Any

from resnet_lab import models
from resnet_lab.core import child
from resnet_lab.core.choices import DTYPE_POLICIES
from resnet_lab.core.text import one_line

SOURCE = "Keras model on the torch backend (torch.export.export, run_decompositions)"
NATIVE_SOURCE = ("native PyTorch model of the same plan (models.build_torch), exported because the Keras model "
                 "was not (torch.export.export, run_decompositions)")


def capture(request: dict[str, Any]) -> dict[str, Any]:
    """``{"models": {name: {"ops", "convolutions", "seconds", "source"[, "keras_export_error"]} or {"export_error"}},
    "versions"}``."""
    import keras
    import torch

    out = {name: _export(name, request) for name in request["models"]}
    return {"models": out, "versions": {"torch": torch.__version__, "keras": keras.__version__}}


def target_name(target: Any) -> str:
    """``aten.convolution.default`` for an OpOverload, ``getitem`` for ``operator.getitem``."""
    return str(target) if str(target).startswith(("aten.", "prims.")) else getattr(target, "__name__", str(target))


def _export(name: str, request: dict[str, Any]) -> dict[str, Any]:
    import torch

    size, batch_size = request["image_sizes"][name], request["batch_size"]
    net = models.build(name, input_shape=(size, size, 3), dtype_policy=DTYPE_POLICIES[request["precision"]])

    class Infer(torch.nn.Module):  # the inference step: Keras' call in inference mode (batch-norm moving stats)
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return self.net(images, training=False)

    images = torch.rand((batch_size, size, size, 3), generator=torch.Generator().manual_seed(0))
    t0 = time.perf_counter()
    try:
        if request.get("fail_keras_export"):  # tests: take the fallback path on purpose
            raise RuntimeError("asked to fail (fail_keras_export)")
        exported = torch.export.export(Infer().eval(), (images,))
    except Exception as exc:  # say exactly where, then export the equivalent native model
        return export_native(name, request, f"torch.export.export: {one_line(exc)}"[:500])
    return inventory(exported, SOURCE, time.perf_counter() - t0)


def export_native(name: str, request: dict[str, Any], keras_error: str) -> dict[str, Any]:
    """The fallback: export :func:`resnet_lab.models.build_torch` (the same plan in native ``torch.nn``, NCHW;
    torchvision's own function where it imports), with ``keras_error`` saying where the Keras model failed;
    ``export_error`` if this fails too."""
    import torch

    size, batch_size = request["image_sizes"][name], request["batch_size"]
    if request["precision"] != "fp32":
        return {"export_error": f"{keras_error}; no native fallback for {request['precision']}"}
    t0 = time.perf_counter()
    try:
        models.check_input_shape(name, (3, size, size), data_format="channels_first")
        net, _ = models.build_torch(name)
        net.eval()
        images = torch.rand((batch_size, 3, size, size), generator=torch.Generator().manual_seed(0))
        exported = torch.export.export(net, (images,))
    except Exception as exc:
        return {"export_error": f"{keras_error}; native model: {one_line(exc)}"[:800]}
    return {**inventory(exported, NATIVE_SOURCE, time.perf_counter() - t0), "keras_export_error": keras_error}


def inventory(exported: Any, source: str, export_s: float) -> dict[str, Any]:
    """``{"ops", "convolutions", "seconds", "source"}`` of an exported program, decomposed to Core ATen."""
    t1 = time.perf_counter()
    core = exported.run_decompositions()
    t2 = time.perf_counter()
    ops: collections.Counter[str] = collections.Counter()
    convs: collections.Counter[tuple[Any, ...]] = collections.Counter()
    for node in core.graph.nodes:
        if node.op != "call_function":
            continue
        op = target_name(node.target)
        ops[op] += 1
        if op.startswith("aten.convolution"):
            convs[_conv_config(node)] += 1
    keys = ("input", "weight", "result", "stride", "padding", "dilation", "transposed", "groups")
    return {"ops": dict(sorted(ops.items())), "source": source,
            "convolutions": [{**dict(zip(keys, c, strict=True)), "count": n} for c, n in sorted(convs.items())],
            "seconds": {"export": round(export_s, 3), "decompose": round(t2 - t1, 3)}}


def _conv_config(node: Any) -> tuple[Any, ...]:
    """(input shape, weight shape, result shape, stride, padding, dilation, transposed, groups) of an
    ``aten.convolution`` node: ``convolution(input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups)``."""

    def shape(x: Any) -> str:
        val = getattr(x, "meta", {}).get("val")
        return "x".join(map(str, val.shape)) if val is not None else ""

    a = list(node.args)
    return (shape(a[0]), shape(a[1]), shape(node), str(list(a[3])), str(list(a[4])), str(list(a[5])), bool(a[6]),
            int(a[8]))


def main(argv: list[str] | None = None) -> int:
    return child.serve("resnet_lab.hlo.torch_child", capture, argv)


if __name__ == "__main__":
    sys.exit(main())
