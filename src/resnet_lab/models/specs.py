"""The ResNet zoo as data: one table of variant facts, the layer plan it implies, and analytic counts.

Every variant here (ImageNet v1, v1.5, v2; CIFAR v1, v2) differs from the others in a handful of facts:
block type, blocks per stage, which conv of a block and which block of a stage carries the stride,
pre- or post-activation, the kind of shortcut, how strided convs pad, and the batch-norm constants.
``FAMILIES`` holds the facts a family shares, ``MODELS`` adds one line per depth, and
:func:`block_plans` turns a spec into the list of convolutions that both the Keras builder
(``keras_builder.py``) and the analytic counts below read, so the two cannot drift apart silently.

Pure Python on purpose: the CLI lists the zoo, and rejects bad names or shapes, without importing Keras.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from resnet_lab.core.choices import DATA_FORMATS, check_choice
from resnet_lab.core.errors import UsageError

# Facts shared by every depth of a family. A model line in MODELS may override any of them.
FAMILIES: dict[str, dict[str, Any]] = {
    # He et al. 2015, as in tf_cnn_benchmarks' `resnet50` and keras.applications.ResNet50: the stride
    # sits on the first 1×1 of the first block of a stage. BN constants are Keras' (1.001e-5 is what the
    # Caffe-converted weights were exported with), so `resnet50` computes exactly Keras' function;
    # tf_cnn_benchmarks trains with momentum 0.9 / epsilon 1e-5.
    "imagenet_v1": dict(
        family="imagenet", version="v1", stem="imagenet", widths=(64, 128, 256, 512), strides=(1, 2, 2, 2),
        stride_on="1x1", stride_block="first", preact=False, shortcut="projection", shared_preact="none",
        downsample="subsample", padding="symmetric", bias_before_bn=True,
        bn_epsilon=1.001e-5, bn_momentum=0.99, num_classes=1000, input_size=224,
        reference="He et al. 2015; tf_cnn_benchmarks resnet v1; keras.applications.ResNet50",
    ),
    # "v1.5" (Model Garden, MLPerf, torchvision): the stride moves to the 3×3, which costs ~6 % more
    # MACs and gains ~0.5 % top-1. Strided 3×3s pad symmetrically (Model Garden's `fixed_padding`).
    "imagenet_v1.5": dict(
        family="imagenet", version="v1.5", stem="imagenet", widths=(64, 128, 256, 512), strides=(1, 2, 2, 2),
        stride_on="3x3", stride_block="first", preact=False, shortcut="projection", shared_preact="none",
        downsample="subsample", padding="symmetric", bias_before_bn=True,
        bn_epsilon=1e-5, bn_momentum=0.9, num_classes=1000, input_size=224,
        reference="Model Garden / MLPerf ResNet-50 v1.5",
    ),
    # He et al. 2016 pre-activation as written by TF-Slim resnet_v2 and keras.applications.ResNet50V2:
    # the stride sits on the 3×3 of the LAST block of a stage (stage 5 does not stride), the first block
    # of a stage projects the pre-activated input, strided identity shortcuts subsample with a 1×1 max
    # pool, and convs that feed a BN never have a bias (use_bias=True adds it to the others only).
    "imagenet_v2": dict(
        family="imagenet", version="v2", stem="imagenet", widths=(64, 128, 256, 512), strides=(2, 2, 2, 1),
        stride_on="3x3", stride_block="last", preact=True, shortcut="projection", shared_preact="all",
        downsample="subsample", padding="symmetric", bias_before_bn=False,
        bn_epsilon=1.001e-5, bn_momentum=0.99, num_classes=1000, input_size=224,
        reference="He et al. 2016; TF-Slim resnet_v2; keras.applications.ResNet50V2",
    ),
    # He et al. 2015 §4.2: 6n+2 layers, 16/32/64 filters, option-A shortcuts (subsample and zero-pad the
    # channels) so the residual net has exactly the parameters of its plain twin.
    "cifar_v1": dict(
        family="cifar", version="v1", stem="cifar", widths=(16, 32, 64), strides=(1, 2, 2),
        stride_on="3x3", stride_block="first", preact=False, shortcut="zero_pad", shared_preact="none",
        downsample="subsample", padding="symmetric", bias_before_bn=True,
        bn_epsilon=1e-5, bn_momentum=0.9, num_classes=10, input_size=32,
        reference="He et al. 2015 §4.2 (option A shortcuts)",
    ),
    # TensorFlow models' research/resnet: pre-activation; only the first block after the stem shares its
    # BN-ReLU with the shortcut (`activate_before_residual`), later shortcuts read the raw input; basic
    # blocks widen with a 2×2 average pool + zero channels, bottlenecks with an (un-normalized) 1×1
    # projection; the stride is on the block's first conv and pads like TF 'SAME' (bottom/right only).
    "cifar_v2": dict(
        family="cifar", version="v2", stem="cifar", widths=(16, 32, 64), strides=(1, 2, 2),
        stride_on="1x1", stride_block="first", preact=True, shortcut="zero_pad", shared_preact="first",
        downsample="avg", padding="same", bias_before_bn=False,
        bn_epsilon=1e-3, bn_momentum=0.9, num_classes=10, input_size=32,
        reference="He et al. 2016; tensorflow/models research/resnet",
    ),
}

# name, family, block, blocks per stage[, overrides]. Order is list_models() order: family, then depth.
MODELS: tuple[tuple[Any, ...], ...] = (
    ("resnet18", "imagenet_v1", "basic", (2, 2, 2, 2)),
    ("resnet34", "imagenet_v1", "basic", (3, 4, 6, 3)),
    ("resnet50", "imagenet_v1", "bottleneck", (3, 4, 6, 3)),
    ("resnet101", "imagenet_v1", "bottleneck", (3, 4, 23, 3)),
    ("resnet152", "imagenet_v1", "bottleneck", (3, 8, 36, 3)),
    ("resnet50_v1.5", "imagenet_v1.5", "bottleneck", (3, 4, 6, 3)),
    ("resnet101_v1.5", "imagenet_v1.5", "bottleneck", (3, 4, 23, 3)),
    ("resnet152_v1.5", "imagenet_v1.5", "bottleneck", (3, 8, 36, 3)),
    ("resnet50_v2", "imagenet_v2", "bottleneck", (3, 4, 6, 3)),
    ("resnet101_v2", "imagenet_v2", "bottleneck", (3, 4, 23, 3)),
    ("resnet152_v2", "imagenet_v2", "bottleneck", (3, 8, 36, 3)),
    ("cifar_resnet20", "cifar_v1", "basic", (3, 3, 3)),
    ("cifar_resnet32", "cifar_v1", "basic", (5, 5, 5)),
    ("cifar_resnet44", "cifar_v1", "basic", (7, 7, 7)),
    ("cifar_resnet56", "cifar_v1", "basic", (9, 9, 9)),
    ("cifar_resnet110", "cifar_v1", "basic", (18, 18, 18)),
    ("cifar_resnet32_v2", "cifar_v2", "basic", (5, 5, 5)),
    ("cifar_resnet110_v2", "cifar_v2", "basic", (18, 18, 18)),
    ("cifar_resnet164_v2", "cifar_v2", "bottleneck", (18, 18, 18), {"shortcut": "projection"}),
    ("cifar_resnet1001_v2", "cifar_v2", "bottleneck", (111, 111, 111), {"shortcut": "projection"}),
    # Two more that the harness and the tests use, registered like the rest:
    # a two-block CIFAR ResNet that compiles in seconds (tests, smoke runs; not a published model) ...
    ("tiny-resnet", "cifar_v1", "basic", (1, 1),
     {"widths": (16, 32), "strides": (1, 2), "reference": "a two-stage CIFAR v1 ResNet for tests (not published)"}),
    # ... and Keras' own ResNet50 (keras.applications, conv biases included): the "plain Keras model".
    ("keras-resnet50", "imagenet_v1", "bottleneck", (3, 4, 6, 3),
     {"builder": "keras.applications", "reference": "keras.applications.ResNet50 itself"}),
)

EXPANSION = {"basic": 1, "bottleneck": 4}  # block output channels / block width
STEMS = {  # kernel, stride, width of the first conv; whether a 3×3/2 max pool follows
    "imagenet": (7, 2, 64, True),
    "cifar": (3, 1, 16, False),
}


@dataclass(frozen=True)
class ResNetSpec:
    """All the facts that make one ResNet variant (one row of the table, resolved)."""

    name: str
    family: str  # "imagenet" | "cifar": default input size and classes
    version: str  # "v1" | "v1.5" | "v2"
    block: str  # "basic" (two 3×3) | "bottleneck" (1×1, 3×3, 1×1 with 4× expansion)
    stage_blocks: tuple[int, ...]  # blocks per stage
    widths: tuple[int, ...]  # per stage: width of the 3×3 convs (output is width × expansion)
    strides: tuple[int, ...]  # per stage
    stem: str  # "imagenet" (7×7/2 conv + 3×3/2 max pool) | "cifar" (3×3/1 conv)
    stride_on: str  # "1x1" | "3x3": which conv of a bottleneck strides (basic blocks: always the first 3×3)
    stride_block: str  # "first" | "last": which block of a stage strides
    preact: bool  # BN-ReLU before each conv (v2) instead of after (v1)
    shortcut: str  # "projection" (1×1 conv) | "zero_pad" (parameter-free, option A) when channels change
    shared_preact: str  # v2: shortcuts reading BN-ReLU(x): "all" projections | "first" block only | "none"
    downsample: str  # parameter-free spatial reduction of shortcuts: "subsample" (1×1/s pool) | "avg" (s×s)
    padding: str  # strided k>1 convs: "symmetric" (explicit pad, Caffe/Keras) | "same" (TF, bottom/right)
    bias_before_bn: bool  # with use_bias=True, also give a bias to convs that feed a BN (Keras v1 does)
    bn_epsilon: float
    bn_momentum: float
    num_classes: int
    input_size: int  # default square input side
    reference: str
    builder: str = "resnet_lab"  # "resnet_lab" (keras_builder.py) | "keras.applications" (Keras' own model)

    @property
    def expansion(self) -> int:
        return EXPANSION[self.block]

    @property
    def depth(self) -> int:
        """Weight layers on the longest path: stem conv + convs of every block + the classifier."""
        return 2 + (2 if self.block == "basic" else 3) * sum(self.stage_blocks)

    @property
    def output_stride(self) -> int:
        """Total downsampling from input to the last feature map."""
        _, stem_stride, _, stem_pool = STEMS[self.stem]
        return stem_stride * (2 if stem_pool else 1) * math.prod(self.strides)

    def default_input_shape(self, data_format: str = "channels_last") -> tuple[int, int, int]:
        s = self.input_size
        return (s, s, 3) if data_format == "channels_last" else (3, s, s)


def _resolve(row: tuple[Any, ...]) -> ResNetSpec:
    name, family_key, block, stage_blocks, *rest = row
    facts = {**FAMILIES[family_key], **(rest[0] if rest else {})}
    if block == "basic":
        facts["stride_on"] = "3x3"  # a basic block has no 1×1: its first 3×3 strides
    fields = {f.name for f in dataclasses.fields(ResNetSpec)}
    return ResNetSpec(name=name, block=block, stage_blocks=tuple(stage_blocks),
                      **{k: v for k, v in facts.items() if k in fields})


SPECS: dict[str, ResNetSpec] = {row[0]: _resolve(row) for row in MODELS}


def list_models() -> list[str]:
    """Names of every model, by family then depth."""
    return list(SPECS)


def get_spec(name: str) -> ResNetSpec:
    """The spec of ``name``.

    Raises:
        UsageError: unknown name (the message lists the valid ones).
    """
    try:
        return SPECS[name]
    except (KeyError, TypeError):
        raise UsageError(f"model: {name!r} is not one of: {', '.join(SPECS)}") from None


def zoo_spec(name: str, what: str) -> ResNetSpec:
    """The spec of ``name`` where it is one of the zoo's own models (a native PyTorch twin, the layer names of
    :mod:`resnet_lab.models.names`); else one line: ``keras-resnet50: <what> needs a zoo model's layers (resnet50_v1.5,
    ...); it is Keras' own``."""
    spec = get_spec(name)
    if spec.builder != "resnet_lab":
        zoo = [n for n, s in SPECS.items() if s.builder == "resnet_lab"]
        raise UsageError(f"{name}: {what} needs a zoo model's layers, and it is {spec.builder}'s model; take one of "
                         f"the zoo's ({', '.join(zoo[:4])}, ...)")
    return spec


def check_foldable(name: str, fold_bn: bool, fused_bn: bool = False) -> None:
    """One line (before Keras is imported) where ``fold_bn`` cannot apply to model ``name``."""
    if not fold_bn:
        return
    spec = get_spec(name)
    if spec.builder == "keras.applications":
        raise UsageError(f"{name}: fold_bn applies to the models resnet_lab builds, not keras.applications'")
    if spec.preact:
        raise UsageError(f"{name}: fold_bn needs batch norm right after each convolution (v1, v1.5); a "
                         f"pre-activation model puts BN and a ReLU before it, so there is nothing to fold into")
    if fused_bn:
        raise UsageError("fold_bn leaves no batch norm after a convolution for fused_bn to run; give one of them")


# ---------------------------------------------------------------------------------------------------
# The layer plan: what the builder builds and the counts count.


@dataclass(frozen=True)
class ConvPlan:
    """One conv and what follows it. ``name`` is the Keras prefix: ``{name}_conv``, ``_bn``, ``_relu``."""

    name: str
    kernel: int
    filters_in: int
    filters: int
    stride: int
    bias: bool
    bn: bool  # a BatchNormalization follows
    relu: bool  # a ReLU follows (after the BN if any)


@dataclass(frozen=True)
class BlockPlan:
    """One residual block: ``out = branch(x') + shortcut(x or x')``, with ``x' = BN-ReLU(x)`` if preact."""

    name: str  # "conv2_block1", Keras' naming, so weights transfer by layer name
    filters_in: int
    filters_out: int
    stride: int
    preact: bool  # BN-ReLU(x) precedes the branch (v2)
    convs: tuple[ConvPlan, ...]  # the residual branch
    shortcut: str  # "identity" | "pool" (parameter-free, strided) | "projection" | "zero_pad"
    shortcut_conv: ConvPlan | None  # for "projection"
    shortcut_preact: bool  # the shortcut reads BN-ReLU(x) rather than x
    relu_after_add: bool  # post-activation (v1) blocks end with a ReLU


def _has_bias(spec: ResNetSpec, use_bias: bool, feeds_bn: bool) -> bool:
    return use_bias and (spec.bias_before_bn or not feeds_bn)


def stem_plan(spec: ResNetSpec, channels: int, use_bias: bool) -> ConvPlan:
    """The first conv (pre-activation nets leave its BN-ReLU to the first block)."""
    kernel, stride, width, _ = STEMS[spec.stem]
    post = not spec.preact
    return ConvPlan("conv1", kernel, channels, width, stride, _has_bias(spec, use_bias, post), post, post)


def block_plans(spec: ResNetSpec, use_bias: bool) -> list[BlockPlan]:
    """Every residual block of ``spec``, in order, with its convs, stride and shortcut."""
    plans = []
    _, _, filters_in, _ = STEMS[spec.stem]
    post = not spec.preact  # post-activation: every branch conv feeds a BN; pre-activation: all but the last
    for stage, (n_blocks, width, stage_stride) in enumerate(
        zip(spec.stage_blocks, spec.widths, spec.strides, strict=True)
    ):
        filters_out = width * spec.expansion
        for b in range(n_blocks):
            name = f"conv{stage + 2}_block{b + 1}"
            stride_here = b == (0 if spec.stride_block == "first" else n_blocks - 1)
            stride = stage_stride if stride_here else 1
            if spec.block == "basic":
                shapes = [(3, filters_in, width), (3, width, width)]
                strided = 0
            else:
                shapes = [(1, filters_in, width), (3, width, width), (1, width, filters_out)]
                strided = 0 if spec.stride_on == "1x1" else 1
            last = len(shapes) - 1
            convs = tuple(
                ConvPlan(f"{name}_{i + 1}", k, c_in, c_out, stride if i == strided else 1,
                         bias=_has_bias(spec, use_bias, feeds_bn=post or i < last),
                         bn=post or i < last, relu=i < last)
                for i, (k, c_in, c_out) in enumerate(shapes)
            )
            shortcut_conv = None
            if filters_in != filters_out:
                shortcut = spec.shortcut
                if shortcut == "projection":
                    bias = _has_bias(spec, use_bias, feeds_bn=post)  # v2 projections feed the add directly
                    shortcut_conv = ConvPlan(f"{name}_0", 1, filters_in, filters_out, stride,
                                             bias=bias, bn=post, relu=False)
            else:
                shortcut = "pool" if stride > 1 else "identity"
            if spec.shared_preact == "all":
                shortcut_preact = shortcut == "projection"
            else:
                shortcut_preact = spec.shared_preact == "first" and not plans
            plans.append(BlockPlan(name, filters_in, filters_out, stride, spec.preact, convs, shortcut,
                                   shortcut_conv, shortcut_preact, relu_after_add=post))
            filters_in = filters_out
    return plans


# ---------------------------------------------------------------------------------------------------
# Shapes and analytic counts.


def _conv_out(n: int, stride: int) -> int:
    # Whatever the kernel: symmetric padding of (k-1)/2, TF 'SAME' and 1×1 'valid' all give ceil(n / stride).
    return -(-n // stride)


def _pool_out(n: int, stride: int, downsample: str) -> int:
    # "subsample" is a 1×1/s max pool (ceil); "avg" is an s×s/s 'valid' average pool (floor).
    return -(-n // stride) if downsample == "subsample" else n // stride


def _parse_input_shape(
    name: str, input_shape: Sequence[int | None], data_format: str
) -> tuple[int | None, int | None, int]:
    check_choice("data_format", data_format, DATA_FORMATS)
    is_seq = isinstance(input_shape, Sequence) and not isinstance(input_shape, str)
    dims = tuple(input_shape) if is_seq else ()
    ok = len(dims) == 3 and all(d is None or (_is_int(d) and d > 0) for d in dims)
    if ok:
        dims = tuple(None if d is None else int(d) for d in dims)
        h, w, c = dims if data_format == "channels_last" else (dims[1], dims[2], dims[0])
        ok = c is not None
    if not ok:
        order = "(height, width, channels)" if data_format == "channels_last" else "(channels, height, width)"
        raise UsageError(f"{name}: input_shape must be three positive integers {order} for {data_format}; "
                         f"got {input_shape!r}")
    return h, w, c


def _walk(spec: ResNetSpec, size: int, axis: str) -> None:
    """Follow one spatial side through the net; raise if it vanishes or the two paths of a block disagree."""
    minimum = spec.output_stride
    if size < minimum:
        raise UsageError(f"{spec.name}: input {axis} {size} is too small; the model downsamples by "
                         f"{minimum}, so the minimum is {minimum}×{minimum}")
    _, stride, _, pool = STEMS[spec.stem]
    n = _conv_out(size, stride)
    n = _conv_out(n, 2) if pool else n
    for block in block_plans(spec, use_bias=False):
        branch = n
        for conv in block.convs:
            branch = _conv_out(branch, conv.stride)
        if block.shortcut in ("pool", "zero_pad"):
            short = _pool_out(n, block.stride, spec.downsample)
        else:
            short = _conv_out(n, block.stride)
        if short != branch:
            raise UsageError(
                f"{spec.name}: input {axis} {size} does not fit: at {block.name} the shortcut has {short} "
                f"and the residual branch {branch}; use a multiple of {minimum} (minimum {minimum})")
        n = branch


def check_input_shape(
    name: str, input_shape: Sequence[int | None], *, data_format: str = "channels_last"
) -> tuple[int | None, int | None, int]:
    """Check that ``name`` can take ``input_shape`` (in ``data_format`` order); return (H, W, C).

    ``None`` height or width (variable size) passes unchecked.

    Raises:
        UsageError: unknown name, malformed shape, too small for the model's downsampling, or a size whose
            shortcut and residual paths disagree (e.g. odd sizes with average-pool shortcuts).
    """
    spec = get_spec(name)
    h, w, c = _parse_input_shape(name, input_shape, data_format)
    for size, axis in ((h, "height"), (w, "width")):
        if size is not None:
            _walk(spec, size, axis)
    return h, w, c


def count(
    spec: ResNetSpec, height: int, width: int, channels: int, num_classes: int, use_bias: bool = False
) -> dict[str, int]:
    """Parameters and forward multiply-accumulates of ``spec`` at one input size, from shapes alone.

    MACs count every conv (``H_out·W_out·k²·C_in·C_out``) and the classifier (``C·classes``); batch norm,
    pooling, additions and biases are left out, as in the papers' FLOP counts.
    """
    trainable = non_trainable = macs = 0
    hw = (height, width)

    def conv(c: ConvPlan, hw_in: tuple[int, int]) -> tuple[int, int]:
        nonlocal trainable, non_trainable, macs
        hw_out = (_conv_out(hw_in[0], c.stride), _conv_out(hw_in[1], c.stride))
        trainable += c.kernel * c.kernel * c.filters_in * c.filters + (c.filters if c.bias else 0)
        macs += hw_out[0] * hw_out[1] * c.kernel * c.kernel * c.filters_in * c.filters
        if c.bn:
            trainable += 2 * c.filters  # gamma, beta
            non_trainable += 2 * c.filters  # moving mean, variance
        return hw_out

    hw = conv(stem_plan(spec, channels, use_bias), hw)
    if STEMS[spec.stem][3]:
        hw = (_conv_out(hw[0], 2), _conv_out(hw[1], 2))
    blocks = block_plans(spec, use_bias)
    for block in blocks:
        if block.preact:
            trainable += 2 * block.filters_in
            non_trainable += 2 * block.filters_in
        if block.shortcut_conv is not None:
            conv(block.shortcut_conv, hw)
        for c in block.convs:
            hw = conv(c, hw)
    features = blocks[-1].filters_out
    if spec.preact:  # the final BN-ReLU before pooling
        trainable += 2 * features
        non_trainable += 2 * features
    trainable += features * num_classes + num_classes
    macs += features * num_classes
    return {"trainable_params": trainable, "non_trainable_params": non_trainable, "forward_macs": macs}


def describe(
    name: str,
    *,
    input_shape: Sequence[int] | None = None,
    num_classes: int | None = None,
    data_format: str = "channels_last",
    use_bias: bool = False,
) -> dict[str, Any]:
    """Facts and analytic counts of one model, without building it.

    Args:
        name: a name from :func:`list_models`.
        input_shape: in ``data_format`` order; defaults to the family's (224² ImageNet, 32² CIFAR, RGB).
        num_classes: defaults to the family's (1000 ImageNet, 10 CIFAR).
        data_format: the order of ``input_shape``.
        use_bias: count the conv biases ``build(..., use_bias=True)`` would add.

    Returns:
        A JSON-ready dict: ``name, family, version, depth, block, stage_blocks, widths, stride_on,
        stride_block, preact, shortcut, trainable_params, non_trainable_params, forward_macs (per image),
        input_shape, default_input_shape, num_classes, data_format, min_input_size, reference``.
    """
    spec = get_spec(name)
    check_choice("data_format", data_format, DATA_FORMATS)
    default = spec.default_input_shape(data_format)
    input_shape = tuple(input_shape) if input_shape is not None else default
    h, w, c = check_input_shape(name, input_shape, data_format=data_format)
    if h is None or w is None:
        raise UsageError(f"{name}: describe needs a fixed height and width to count MACs; "
                         f"got {input_shape!r}")
    num_classes = _check_num_classes(name, spec.num_classes if num_classes is None else num_classes)
    use_bias = use_bias or spec.builder == "keras.applications"  # Keras' own convs all have a bias
    counts = count(spec, h, w, c, num_classes, use_bias)
    return {
        "name": spec.name,
        "family": spec.family,
        "version": spec.version,
        "depth": spec.depth,
        "block": spec.block,
        "stage_blocks": list(spec.stage_blocks),
        "widths": list(spec.widths),
        "stride_on": spec.stride_on,
        "stride_block": spec.stride_block,
        "preact": spec.preact,
        "shortcut": spec.shortcut,
        **counts,
        "input_shape": list(input_shape),
        "default_input_shape": list(default),
        "num_classes": num_classes,
        "data_format": data_format,
        "min_input_size": spec.output_stride,
        "reference": spec.reference,
    }


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy ints welcome


def _check_num_classes(name: str, num_classes: Any) -> int:
    if not _is_int(num_classes) or num_classes < 1:
        raise UsageError(f"{name}: num_classes must be a positive integer; got {num_classes!r}")
    return int(num_classes)
