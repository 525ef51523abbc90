"""The model's layer names: made once (the Keras builder names its layers after :func:`resnet_lab.models.specs.
block_plans`), read back here and nowhere else.

A Keras layer name of a zoo model is one of (:func:`parse`):

- the stem's ``conv1_pad``, ``conv1_conv``, ``conv1_bn``, ``conv1_relu``, ``pool1_pad``, ``pool1_pool``;
- a block's unit ``conv{stage}_block{b}_{index}_{kind}`` (``index`` 1.. on the main path, 0 the shortcut; ``kind``
  conv, bn, relu, pad or pool), its ``_preact_bn`` and ``_preact_relu`` (pre-activation nets), ``_add`` and ``_out``;
- the head's ``post_bn``, ``post_relu``, ``avg_pool``, ``predictions``.

The native PyTorch model names its modules as torchvision does; :func:`torch_path` maps a Keras layer to its module
(``conv3_block2_1_bn`` → ``layer2.1.bn1``), :func:`keras_layer` a module (and which of its calls: a block's one ReLU
module is called once per activation) back to the Keras layer, :func:`node_layers` a node of the ONNX export (named
after its module: ``layer1.0.conv2/Conv``). :func:`table` lists every layer of a model with both names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from resnet_lab.models import specs

_UNIT = re.compile(r"^(?P<block>conv(?P<stage>\d+)_block\d+)_(?:(?P<index>\d+)_(?P<kind>conv|bn|relu|pad|pool)|"
                   r"(?P<tail>add|out|preact_bn|preact_relu))$")
_STEM = re.compile(r"^(?P<unit>conv1|pool1)_(?P<kind>pad|conv|bn|relu|pool)$")
_HEAD = {"post_bn": "bn", "post_relu": "relu", "avg_pool": "pool", "predictions": "dense"}


@dataclass(frozen=True)
class LayerName:
    """A Keras layer name read (:func:`parse`)."""

    name: str
    stage: int  # Keras' stage: 1 the stem, N for conv{N}_blockM_... (ResNet's stage N - 1), 0 the head
    block: str  # conv3_block2; "" outside the blocks
    index: int | None  # the unit's place in its block: 1.. the main path, 0 the shortcut; None: no unit's
    kind: str  # conv, bn, relu, pad, pool, dense, add, out, preact_bn, preact_relu

    @property
    def unit(self) -> str:
        """The convolution unit the layer belongs to (``conv3_block2_1``, ``conv1``; a block's add or output, a
        head layer: its own name)."""
        if self.index is not None:
            return f"{self.block}_{self.index}"
        return "conv1" if self.stage == 1 and self.name.startswith("conv1_") else self.name

    @property
    def unit_conv(self) -> str:
        """The unit's convolution (``conv3_block2_1_conv``)."""
        return f"{self.unit}_conv"

    @property
    def shortcut(self) -> bool:
        return self.index == 0


def parse(name: str) -> LayerName | None:
    """``name`` read as a layer of a zoo model, or None where it is not one."""
    if m := _UNIT.match(name):
        index = m.group("index")
        return LayerName(name, int(m.group("stage")), m.group("block"), int(index) if index is not None else None,
                         m.group("kind") or m.group("tail"))
    if m := _STEM.match(name):
        return LayerName(name, 1, "", None, m.group("kind"))
    if name in _HEAD:
        return LayerName(name, 0, "", None, _HEAD[name])
    return None


def block_of(name: str) -> str:
    """The block a layer belongs to (``conv3_block2``), or ""."""
    parsed = parse(name)
    return parsed.block if parsed else ""


def gradient_convs(layer: str, convs: Any) -> list[str]:
    """The convolutions whose weight gradient reads the gradient at ``layer``'s output (``convs``: the model's
    convolution layers): a batch norm's or ReLU's, its unit's convolution; at a block's add or output, its last
    main-path convolution and its projection shortcut; a convolution itself."""
    parsed = parse(layer)
    if parsed is None:
        return []
    if (parsed.kind in ("bn", "relu") and parsed.index is not None) or parsed.name in ("conv1_bn", "conv1_relu"):
        return [parsed.unit_conv]
    if parsed.kind in ("add", "out"):
        main = sorted(c for c in convs if (p := parse(c)) and p.block == parsed.block and p.kind == "conv"
                      and (p.index or 0) > 0)
        return [*main[-1:], f"{parsed.block}_0_conv"]
    return [layer] if parsed.kind == "conv" else []


# ---------------------------------------------------------------------------------------- the native model's modules
_TOP = {"conv1": "conv1_conv", "bn1": "conv1_bn", "relu": "conv1_relu", "maxpool": "pool1_pool", "fc": "predictions",
        "avgpool": "avg_pool"}
_MODULE = re.compile(r"^layer(\d+)\.(\d+)(?:\.(.+))?$")
_MAIN = re.compile(r"^(conv|bn)(\d+)$")


def torch_path(keras_layer_name: str) -> str:
    """The module path of a Keras layer in :class:`resnet_lab.models.torch_builder.ResNet`: ``conv1_conv`` →
    ``conv1``, ``conv3_block2_1_bn`` → ``layer2.1.bn1``, ``conv2_block1_0_conv`` → ``layer1.0.downsample.0``,
    ``conv2_block1_preact_bn`` → ``layer1.0.preact_bn``, ``predictions`` → ``fc``."""
    top = {"conv1_conv": "conv1", "conv1_bn": "bn1", "predictions": "fc", "post_bn": "post_bn"}
    if keras_layer_name in top:
        return top[keras_layer_name]
    parsed = parse(keras_layer_name)
    if parsed is None or not parsed.block:
        raise KeyError(f"{keras_layer_name}: not a layer with a module of the native model")
    stage, block = parsed.block[len("conv"):].split("_block")
    prefix = f"layer{int(stage) - 1}.{int(block) - 1}"
    if parsed.kind == "preact_bn":
        return f"{prefix}.preact_bn"
    if parsed.index == 0:
        return f"{prefix}.downsample.{0 if parsed.kind == 'conv' else 1}"
    return f"{prefix}.{parsed.kind}{parsed.index}"


def keras_layer(module: str, call: int = 0, relus_per_block: int = 3) -> str | None:
    """The Keras layer that ``module`` (a module path; ``call``: which call of a module used several times)
    computes, or None where the path is not one of the model's. A block's ReLU module is called once per
    activation: Keras names those ``conv2_block1_1_relu``, ``conv2_block1_2_relu`` and, after the add,
    ``conv2_block1_out``; the block itself (its residual add) is ``conv2_block1_add``."""
    if module in _TOP:
        return _TOP[module]
    m = _MODULE.match(module)
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
    if kind := _MAIN.match(rest):
        return f"{prefix}_{kind.group(2)}_{kind.group(1)}"
    if rest == "preact_bn":
        return f"{prefix}_preact_bn"
    return None


def relus_per_block(module_names: Any) -> int:
    """How many ReLUs a residual block of the native model applies (one after each of its main-path convolutions,
    the last after the add): 3 in a bottleneck block, 2 in a basic one; from the model's module paths."""
    convs = []
    for name in module_names:
        if (m := _MODULE.match(name)) and (k := _MAIN.match(m.group(3) or "")) and k.group(1) == "conv":
            convs.append(int(k.group(2)))
    return max(convs, default=3)


def graph_relus(node_names: Any) -> int:
    """A block's ReLUs in the model an export's nodes (``layer1.0.conv3/Conv``) come from (:func:`relus_per_block`)."""
    return relus_per_block([name.partition("/")[0] for name in node_names])


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


def table(model: str) -> list[dict[str, Any]]:
    """The layers of a zoo model's convolution units, blocks and head, in order (paddings and poolings left out):
    the Keras name, the native model's module path (None where it has none: an activation, an add), the block, the
    unit, the kind, and the blocks' ReLUs (from :func:`resnet_lab.models.specs.block_plans`)."""
    spec = specs.get_spec(model)
    plans = specs.block_plans(spec, use_bias=False)
    relus = max((len(b.convs) for b in plans), default=3)
    stem = specs.stem_plan(spec, 3, use_bias=False)
    names = ["conv1_conv", *(["conv1_bn"] if stem.bn else []), *(["conv1_relu"] if stem.relu else [])]
    for b in plans:
        if b.preact:
            names += [f"{b.name}_preact_bn", f"{b.name}_preact_relu"]
        if b.shortcut_conv is not None:
            names += [f"{b.shortcut_conv.name}_conv", *([f"{b.shortcut_conv.name}_bn"] if b.shortcut_conv.bn else [])]
        for c in b.convs:
            names += [f"{c.name}_conv", *([f"{c.name}_bn"] if c.bn else []), *([f"{c.name}_relu"] if c.relu else [])]
        names += [f"{b.name}_add", f"{b.name}_out"] if b.relu_after_add else [f"{b.name}_out"]
    names += [*(["post_bn", "post_relu"] if spec.preact else []), "predictions"]
    rows = []
    for name in names:
        parsed = parse(name)
        assert parsed is not None, name
        try:
            path: str | None = torch_path(name)
        except KeyError:
            path = None
        if parsed.kind in ("relu", "out", "add", "preact_relu"):
            path = None
        rows.append({"layer": name, "torch": path, "block": parsed.block, "unit": parsed.unit, "kind": parsed.kind,
                     "relus_per_block": relus})
    return rows
