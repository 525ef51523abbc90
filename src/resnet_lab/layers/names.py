"""The native model's module paths (torchvision's names, which the ONNX export keeps) as the Keras layers they
compute: the inverse of :func:`resnet_lab.models.torch_builder.torch_name`, plus the modules with no weights.

``conv1`` → ``conv1_conv``, ``bn1`` → ``conv1_bn``, ``layer2.1.conv3`` → ``conv3_block2_3_conv``,
``layer1.0.downsample.0`` → ``conv2_block1_0_conv``, ``fc`` → ``predictions``. A ReLU module is called once per
activation of its block (``layer1.0.relu``, its n-th call): Keras names those ``conv2_block1_1_relu``,
``conv2_block1_2_relu`` and, after the add, ``conv2_block1_out``; the add itself is ``conv2_block1_add``.
"""

from __future__ import annotations

import re
from typing import Any

_TOP = {"conv1": "conv1_conv", "bn1": "conv1_bn", "relu": "conv1_relu", "maxpool": "pool1_pool", "fc": "predictions",
        "avgpool": "avg_pool"}
_BLOCK = re.compile(r"^layer(\d+)\.(\d+)(?:\.(.+))?$")


def keras_layer(module: str, call: int = 0, relus_per_block: int = 3) -> str | None:
    """The Keras layer that ``module`` (a module path; ``call``: which call of a module used several times)
    computes, or None where the path is not one of the model's."""
    if module in _TOP:
        return _TOP[module]
    m = _BLOCK.match(module)
    if not m:
        return None
    stage, block, rest = int(m.group(1)), int(m.group(2)), m.group(3) or ""
    prefix = f"conv{stage + 1}_block{block + 1}"
    if rest == "":
        return f"{prefix}_add"
    if rest == "relu":
        return f"{prefix}_out" if call >= relus_per_block - 1 else f"{prefix}_{call + 1}_relu"
    if rest.startswith("downsample."):
        return f"{prefix}_0_{'conv' if rest.endswith('.0') else 'bn'}"
    kind = re.match(r"^(conv|bn)(\d+)$", rest)
    if kind:
        return f"{prefix}_{kind.group(2)}_{kind.group(1)}"
    if rest == "preact_bn":
        return f"{prefix}_preact_bn"
    return None


def relus_per_block(module_names: list[str] | Any) -> int:
    """How many ReLUs a residual block of the native model applies (one after each of its main-path convolutions,
    the last after the add): 3 in a bottleneck block, 2 in a basic one; from the model's module paths."""
    convs = [int(m.group(1)) for name in module_names if (m := re.match(r"^layer\d+\.\d+\.conv(\d+)$", name))]
    return max(convs, default=3)


def graph_relus(node_names: Any) -> int:
    """A block's ReLUs in the model an export's nodes (``layer1.0.conv3/Conv``) come from (:func:`relus_per_block`)."""
    return relus_per_block([name.partition("/")[0] for name in node_names])


def conv_fused_layers(layer: str, relus: int = 3, projection: bool = False) -> list[str]:
    """The layers a convolution kernel that an engine names after ``layer`` computes, where the convolution's batch
    norm, ReLU and a block's add are folded into it (Inductor's mkldnn fusions under freezing keep one op's module):
    a convolution's, a ReLU's (``conv2_block1_2_relu``) or a batch norm's convolution and batch norm; a block's
    output (``conv2_block1_out``) its last convolution (``relus``: the block's ReLUs; ``projection``: the projection
    shortcut's convolution instead), batch norm, add and output."""
    if layer.endswith(("_relu", "_bn", "_conv")):
        unit = layer.rsplit("_", 1)[0]
        return [f"{unit}_conv", f"{unit}_bn", *([layer] if layer.endswith("_relu") else [])]
    if layer.endswith("_out"):
        block = layer[: -len("_out")]
        unit = f"{block}_0" if projection else f"{block}_{relus}"
        return [f"{unit}_conv", f"{unit}_bn", f"{block}_add", layer]
    return [layer]


def node_layers(node_name: str, relus: int = 3) -> list[str]:
    """The Keras layers an ONNX node of the export computes, from its name (``layer1.0.conv2/Conv``,
    ``layer1.0.relu/Relu_2``; ``relus``: a block's ReLUs, :func:`graph_relus`): a convolution with its batch norm
    folded in computes both."""
    module, _, op = node_name.partition("/")
    call = int(op.rsplit("_", 1)[1]) if re.search(r"_\d+$", op) else 0
    layer = keras_layer(module, call, relus)
    if layer is None:
        return []
    if layer.endswith("_conv") and op.startswith("Conv"):
        return [layer, layer[: -len("_conv")] + "_bn"]
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
