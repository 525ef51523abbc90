"""Each layer's work at one input size, from the layer plan alone: what a layer's roofline divides.

:func:`layer_costs` walks :func:`resnet_lab.models.specs.block_plans` like :func:`resnet_lab.models.specs.count`
and lists every convolution (``{plan name}_conv``) and the classifier (``predictions``) with its shapes, FLOPs
(2 × multiply-accumulates × batch) and the bytes it must move at least once: its input and output activations and
its weights, at ``dtype_bytes`` each (the batch norm, ReLU and add that follow a convolution fuse into it on every
engine here, so they move no bytes of their own in this count).

A training step (``mode="train"``) does each layer's work three times, its input gradient and its weight gradient
being each as large as its forward pass (the stem's input gradient is never needed: twice); it moves the forward's
bytes in each pass too (:data:`TRAIN_PASSES`).
"""

from __future__ import annotations

from typing import Any

from resnet_lab.models.specs import STEMS, ConvPlan, block_plans, get_spec, stem_plan


def _out(n: int, stride: int) -> int:
    return -(-n // stride)


TRAIN_PASSES = 3  # forward, input gradient, weight gradient


def layer_costs(model: str, image_size: int, batch_size: int = 1, dtype_bytes: int = 4,
                mode: str = "infer") -> list[dict[str, Any]]:
    """Every convolution and the classifier of ``model`` at ``image_size``² and ``batch_size``, in order (a
    training step's work where ``mode`` is train)."""
    out = _forward_costs(model, image_size, batch_size, dtype_bytes)
    if mode == "train":
        for i, c in enumerate(out):
            passes = TRAIN_PASSES - 1 if i == 0 else TRAIN_PASSES
            c.update(flops=c["flops"] * passes, bytes=c["bytes"] * passes)
    return out


def _forward_costs(model: str, image_size: int, batch_size: int, dtype_bytes: int) -> list[dict[str, Any]]:
    spec = get_spec(model)
    out: list[dict[str, Any]] = []
    hw = image_size

    def conv(c: ConvPlan, n_in: int) -> int:
        n_out = _out(n_in, c.stride)
        macs = n_out * n_out * c.kernel * c.kernel * c.filters_in * c.filters
        moved = batch_size * (n_in * n_in * c.filters_in + n_out * n_out * c.filters) + \
            c.kernel * c.kernel * c.filters_in * c.filters
        out.append({"layer": f"{c.name}_conv", "kind": f"conv {c.kernel}×{c.kernel}/{c.stride}",
                    "shape": f"{n_in}²×{c.filters_in} → {n_out}²×{c.filters}", "flops": 2 * macs * batch_size,
                    "bytes": moved * dtype_bytes})
        return n_out

    hw = conv(stem_plan(spec, 3, use_bias=False), hw)
    if STEMS[spec.stem][3]:
        hw = _out(hw, 2)
    blocks = block_plans(spec, use_bias=False)
    for block in blocks:
        if block.shortcut_conv is not None:
            conv(block.shortcut_conv, hw)
        for c in block.convs:
            hw = conv(c, hw)
    features, classes = blocks[-1].filters_out, spec.num_classes
    out.append({"layer": "predictions", "kind": "dense", "shape": f"{features} → {classes}",
                "flops": 2 * features * classes * batch_size,
                "bytes": (batch_size * (features + classes) + features * classes) * dtype_bytes})
    return out
