"""The HLO of the JAX steps, for :mod:`resnet_lab.hlo.capture`: run as its own process with ``KERAS_BACKEND=jax``.

``python -m resnet_lab.hlo.jax_child REQUESTS.json REPLIES.jsonl`` (:mod:`resnet_lab.core.child`): builds each
requested zoo model on Keras' JAX backend (one JAX import for all of them), makes the steps of
:mod:`resnet_lab.steps.jax_step`, and replies for each mode with the HLO text of ``jax.jit(step)`` before XLA's
passes (``lowered.as_text(dialect="hlo", debug_info=True)``: the name stack kept as metadata) and after them
(``lowered.compile().as_text()``), and the model's layer names: the two stages
:mod:`resnet_lab.hlo.capture` asks TensorFlow for; with ``"stablehlo": true`` in the request, also the lowered
module as StableHLO (``lowered.as_text()``), stage ``"stablehlo"``. Nothing is executed. The parent
(:func:`resnet_lab.hlo.capture.capture`) parses the text with the same parser as TensorFlow's.

A separate process because Keras picks its backend once, at import: the notebook's own is TensorFlow.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from resnet_lab import models
from resnet_lab.core import child
from resnet_lab.core.choices import DTYPE_POLICIES
from resnet_lab.core.text import one_line
from resnet_lab.steps import jax_step
from resnet_lab.steps.common import make_optimizer


def capture(request: dict[str, Any]) -> dict[str, Any]:
    """``{"models": {name: [{"mode", "stage", "text", "seconds"}]}, "versions": {...}}`` for every model of
    ``request["models"]`` (one process, one JAX import for all of them), or ``{"skip": reason}``."""
    import jax
    import jaxlib
    import keras

    platform = request["platform"]
    try:
        device = jax.devices(platform)[0]
    except RuntimeError as exc:
        return {"skip": f"JAX sees no {platform} device ({one_line(exc, 200)})"}
    with jax.default_device(device):
        captures, layers = {}, {}
        for name in request["models"]:
            captures[name], layers[name] = _model_captures(name, request)
    return {"models": captures, "layers": layers, "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                                             "keras": keras.__version__, "device": str(device)}}


def _model_captures(name: str, request: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    size, batch_size = request["image_sizes"][name], request["batch_size"]
    spec = models.get_spec(name)
    net = models.build(name, input_shape=(size, size, 3), dtype_policy=DTYPE_POLICIES[request["precision"]])
    images, labels = jax_step.jax_batch(batch_size, (size, size, 3), spec.num_classes)
    out = []
    for mode in request["modes"]:
        optimizer = make_optimizer(net) if mode == "train" else None
        batch = (images, labels) if mode == "train" else (images,)
        step = jax_step.JaxStep(net, optimizer, mode, batch, compile=True)
        t0 = time.perf_counter()
        lowered = step.lower()
        t_low = time.perf_counter()
        if request.get("stablehlo"):  # the portable IR: what jax.jit hands to XLA (and a PJRT plugin receives)
            out.append({"mode": mode, "stage": "stablehlo",
                        "text": lowered.as_text(debug_info=bool(request.get("debug_info"))),  # locations
                        "seconds": round(t_low - t0, 3)})
        # debug_info: each instruction's metadata keeps the name stack (its Keras layer, jvp/transpose)
        texts = {"before": lowered.as_text(dialect="hlo", debug_info=True)} if request["stages"] else {}
        t1 = time.perf_counter()
        if "after" in request["stages"]:
            texts["after"] = lowered.compile().as_text()
        t2 = time.perf_counter()
        seconds = {"before": t1 - t0, "after": t2 - t1}
        out += [{"mode": mode, "stage": stage, "text": texts[stage], "seconds": round(seconds[stage], 3)}
                for stage in request["stages"]]
    return out, [layer.name for layer in net.layers]


def main(argv: list[str] | None = None) -> int:
    return child.serve("resnet_lab.hlo.jax_child", capture, argv)


if __name__ == "__main__":
    sys.exit(main())
