"""An engine's names for the model's work as the Keras layers it computes: an ONNX Runtime kernel's export nodes
(each node named after the native model's module, :func:`resnet_lab.models.names.node_layers`), a TensorFlow node's
name scope, and the layers a fused kernel computes."""

from __future__ import annotations

import re
from typing import Any

from resnet_lab.models.names import parse


def conv_fused_layers(layer: str, relus: int = 3, projection: bool = False) -> list[str]:
    """The layers a convolution kernel that an engine names after ``layer`` computes, where the convolution's batch
    norm, ReLU and a block's add are folded into it (Inductor's mkldnn fusions under freezing keep one op's module):
    a convolution's, a ReLU's (``conv2_block1_2_relu``) or a batch norm's convolution and batch norm; a block's
    output (``conv2_block1_out``) its last convolution (``relus``: the block's ReLUs; ``projection``: the projection
    shortcut's convolution instead), batch norm, add and output."""
    parsed = parse(layer)
    if parsed is None:
        return [layer]
    if parsed.kind in ("relu", "bn", "conv") and parsed.unit != layer:
        return [parsed.unit_conv, f"{parsed.unit}_bn", *([layer] if parsed.kind == "relu" else [])]
    if parsed.kind == "out":
        unit = f"{parsed.block}_0" if projection else f"{parsed.block}_{relus}"
        return [f"{unit}_conv", f"{unit}_bn", f"{parsed.block}_add", layer]
    return [layer]


def producers(proto: Any) -> dict[str, tuple[str, str, list[str]]]:
    """``{output tensor: (node name, op type, input tensors)}`` of an ONNX graph."""
    return {out: (n.name, n.op_type, list(n.input)) for n in proto.graph.node for out in n.output}


def kernel_nodes(kernel: str, graph: dict[str, tuple[str, str, list[str]]], names: set[str]) -> list[str]:
    """The export's nodes an ONNX Runtime kernel computes. A kernel named like a node is that node; its NCHWc layout
    transform names a fused node after the tensor it outputs (``relu_4_nchwc``): that tensor's producer, and where
    that is an activation or an add fused into a convolution, the convolutions feeding it (walked back through
    ``Relu`` and ``Add``). A layout reorder computes none."""
    if kernel in names:
        return [kernel]
    tensor = kernel[: -len("_nchwc")] if kernel.endswith("_nchwc") else kernel
    if tensor not in graph:
        return []
    found: list[str] = []
    todo = [tensor]
    while todo:
        node, op, inputs = graph.get(todo.pop(), ("", "", []))
        if not node:
            continue
        found.append(node)
        # an activation or an add is fused into the convolution that feeds it: a ReLU's input may be an add
        feeds = {"Relu": ("Conv", "Add"), "Add": ("Conv",)}.get(op, ())
        todo += [t for t in inputs if graph.get(t, ("", "", []))[1] in feeds]
    return found


def tf_op_layer(node: str, known: set[str] | frozenset[str]) -> str | None:
    """The Keras layer a TensorFlow graph node belongs to, from its name scope (``resnet50_v1.5_1/conv1_relu_1/Relu``:
    ``conv1_relu``; a layer called in a second graph gets a ``_1`` suffix on its scope), or None."""
    for part in node.split("/")[:-1]:
        for candidate in (part, re.sub(r"_\d+$", "", part)):
            if candidate in known:
                return candidate
    return None


# Which producers a kernel named after a layer of this kind has fused into it (TensorFlow's remapper names a fused
# convolution after the last node of its pattern: ``conv2_block1_out/Relu:_FusedConv2D`` is a convolution with its
# bias, the residual add and the ReLU).
_FUSES = {"Activation": ("Add", "Conv2D", "Dense", "BatchNormalization"), "ReLU": ("Add", "Conv2D", "Dense",
                                                                                  "BatchNormalization"),
          "Add": ("Conv2D", "BatchNormalization"), "BatchNormalization": ("Conv2D", "Dense")}


def fused_layers(layer: str, op_type: str, graph: dict[str, tuple[str, list[str]]], direct: set[str]) -> list[str]:
    """The Keras layers a TensorFlow kernel named after ``layer`` computes: ``layer`` and, where ``op_type`` is a
    fused convolution or matmul named after the activation, add or batch norm that ends its pattern, the producers
    fused into it (walked back through :data:`_FUSES`, a padding too where the op pads: ``_PadWithFusedConv2D``).
    ``graph``: ``{layer: (class name, inbound layers)}``; ``direct``: the layers some kernel is named after, which
    are that kernel's and never another's (the projection shortcut of a block's add runs on its own)."""
    if not any(k in op_type for k in ("Conv", "MatMul")):
        return [layer]
    out, todo = [layer], [layer]
    while todo:
        kind, inbound = graph.get(todo.pop(), ("", []))
        follows = _FUSES.get(kind, ())
        if kind in ("Conv2D", "DepthwiseConv2D") and "Pad" in op_type:
            follows = ("ZeroPadding2D",)
        for p in inbound:
            if graph.get(p, ("", []))[0] in follows and p not in out and p not in direct:
                out.append(p)
                todo.append(p)
    return out
