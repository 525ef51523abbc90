"""The same layer plan as :mod:`resnet_lab.models.keras_builder`, written in plain PyTorch (``torch.nn``).

"What a user of this CPU would pick instead": no Keras in the step, PyTorch's own modules, eager or under
``torch.compile``. For ``resnet50_v1.5`` this is torchvision's ``resnet50`` (stride on the 3×3, projection
shortcuts, zero-padded max pool, BN momentum 0.1 = 1 − 0.9, eps 1e-5), with torchvision's parameter names
(``conv1``, ``bn1``, ``layer1.0.conv2``, ``layer1.0.downsample.0``, ``fc``), so its weights load by name.
Where torchvision imports, :func:`build_native` takes torchvision's own function for that model. On a CPU-only
install it does not: its CPU wheel is served only from PyTorch's own index (which the development hosts cannot
reach), and PyPI's Linux wheel links against CUDA torch (``operator torchvision::nms does not exist`` beside the
CPU build), so torchvision is not in the ``[torch]`` extra and this module builds the model from the plan
(25,557,032 parameters for ``resnet50_v1.5``, as torchvision's). After :func:`load_keras_weights` it computes
the same logits as the Keras model (``tests/models/test_torch_builder.py``: ResNet-50 v1.5, a CIFAR v1 net and a
pre-activation CIFAR v2 net).

Every spec of the zoo builds here (v1, v1.5, v2, CIFAR with option-A shortcuts), from the same
:func:`~resnet_lab.models.specs.block_plans` as the Keras builder, so the two agree on every conv.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from resnet_lab.core.text import one_line
from resnet_lab.models.names import torch_path
from resnet_lab.models.specs import STEMS, BlockPlan, ConvPlan, ResNetSpec, block_plans, stem_plan, zoo_spec

TORCHVISION_EQUIVALENT = {"resnet50_v1.5": "resnet50", "resnet101_v1.5": "resnet101", "resnet152_v1.5": "resnet152"}


class SamePad(nn.Module):
    """TensorFlow's 'SAME' padding of a strided conv: the total pad that gives ceil(n / stride) outputs, the
    odd pixel at the bottom/right (it depends on the input size, so it is computed per call)."""

    def __init__(self, kernel: int, stride: int) -> None:
        super().__init__()
        self.kernel, self.stride = kernel, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pads = []
        for n in (x.shape[-1], x.shape[-2]):  # F.pad takes the last dimension first
            total = max((-(-n // self.stride) - 1) * self.stride + self.kernel - n, 0)
            pads += [total // 2, total - total // 2]
        return nn.functional.pad(x, pads)


def _conv(c: ConvPlan, spec: ResNetSpec) -> nn.Module:
    """A conv with the plan's padding: symmetric (k-1)/2 (torchvision, Caffe), or TF 'SAME' where a strided
    k>1 conv of a ``padding="same"`` spec pads bottom/right only."""
    conv = nn.Conv2d(c.filters_in, c.filters, c.kernel, stride=c.stride, padding=(c.kernel - 1) // 2,
                     bias=c.bias)
    nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")  # torchvision's init
    if spec.padding == "same" and c.kernel > 1 and c.stride > 1:
        conv.padding = (0, 0)
        return nn.Sequential(SamePad(c.kernel, c.stride), conv)
    return conv


def _bn(channels: int, spec: ResNetSpec) -> nn.BatchNorm2d:
    # Keras' momentum m weighs the old moving value; PyTorch's weighs the new batch: 1 - m.
    return nn.BatchNorm2d(channels, eps=spec.bn_epsilon, momentum=1.0 - spec.bn_momentum)


class _Shortcut(nn.Module):
    """Parameter-free shortcut: subsample (or s×s average) spatially, then zero channels (option A)."""

    def __init__(self, stride: int, pad_to: int | None, downsample: str) -> None:
        super().__init__()
        self.stride, self.pad_to, self.downsample = stride, pad_to, downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride > 1:
            s = self.stride
            x = x[:, :, ::s, ::s] if self.downsample == "subsample" else nn.functional.avg_pool2d(x, s, s)
        if self.pad_to is not None and self.pad_to > x.shape[1]:
            extra = self.pad_to - x.shape[1]
            x = nn.functional.pad(x, (0, 0, 0, 0, extra // 2, extra - extra // 2))
        return x


class Block(nn.Module):
    """One residual block of the plan: ``conv{i}``/``bn{i}`` as in torchvision's Bottleneck and BasicBlock."""

    def __init__(self, b: BlockPlan, spec: ResNetSpec) -> None:
        super().__init__()
        self.plan = b
        if b.preact:
            self.preact_bn = _bn(b.filters_in, spec)
        for i, c in enumerate(b.convs, start=1):
            setattr(self, f"conv{i}", _conv(c, spec))
            if c.bn:
                setattr(self, f"bn{i}", _bn(c.filters, spec))
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if b.shortcut == "projection":
            sc = b.shortcut_conv
            layers = [_conv(sc, spec)] + ([_bn(sc.filters, spec)] if sc.bn else [])
            self.downsample = nn.Sequential(*layers)
        elif b.shortcut in ("pool", "zero_pad"):
            self.downsample = _Shortcut(b.stride, b.filters_out if b.shortcut == "zero_pad" else None,
                                        spec.downsample)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.plan
        branch_in = self.relu(self.preact_bn(x)) if b.preact else x
        shortcut = branch_in if b.shortcut_preact else x
        if self.downsample is not None:
            shortcut = self.downsample(shortcut)
        y = branch_in
        for i, c in enumerate(b.convs, start=1):
            y = getattr(self, f"conv{i}")(y)
            if c.bn:
                y = getattr(self, f"bn{i}")(y)
            if c.relu:
                y = self.relu(y)
        y = y + shortcut
        return self.relu(y) if b.relu_after_add else y


class ResNet(nn.Module):
    """A zoo ResNet in ``torch.nn``; NCHW tensors in (any memory format), float32 logits out."""

    def __init__(self, spec: ResNetSpec, channels: int = 3, num_classes: int | None = None) -> None:
        super().__init__()
        self.spec = spec
        stem = stem_plan(spec, channels, use_bias=False)
        self.conv1 = _conv(stem, spec)
        self.bn1 = _bn(stem.filters, spec) if stem.bn else None
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, padding=1) if STEMS[spec.stem][3] else None
        stages: dict[int, list[Block]] = {}
        for b in block_plans(spec, use_bias=False):
            stages.setdefault(int(b.name[4]) - 1, []).append(Block(b, spec))  # conv2_block1 -> layer1
        for stage, blocks in sorted(stages.items()):
            setattr(self, f"layer{stage}", nn.Sequential(*blocks))
        self.stages = len(stages)
        features = block_plans(spec, use_bias=False)[-1].filters_out
        self.post_bn = _bn(features, spec) if spec.preact else None
        self.fc = nn.Linear(features, num_classes or spec.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        if self.bn1 is not None:
            x = self.relu(self.bn1(x))
        if self.maxpool is not None:
            x = self.maxpool(x)
        for i in range(1, self.stages + 1):
            x = getattr(self, f"layer{i}")(x)
        if self.post_bn is not None:
            x = self.relu(self.post_bn(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x).float()


def load_keras_weights(module: ResNet, keras_model: Any) -> ResNet:
    """Copy the weights and moving statistics of the Keras model of the same spec (``models.build``) into
    ``module``, by layer name (:func:`resnet_lab.models.names.torch_path`): the two then compute the same function."""
    import numpy as np

    named = dict(module.named_modules())
    with torch.no_grad():
        for layer in keras_model.layers:
            if not layer.weights:
                continue
            target = named[torch_path(layer.name)]
            if isinstance(target, nn.Sequential):  # SamePad, then the conv
                target = target[1]
            values = [np.asarray(w) for w in layer.get_weights()]
            if isinstance(target, nn.Conv2d):
                target.weight.copy_(torch.from_numpy(values[0].transpose(3, 2, 0, 1).copy()))  # HWIO -> OIHW
                if len(values) > 1:
                    target.bias.copy_(torch.from_numpy(values[1]))
            elif isinstance(target, nn.BatchNorm2d):
                for t, v in zip((target.weight, target.bias, target.running_mean, target.running_var), values,
                                strict=True):
                    t.copy_(torch.from_numpy(v))
            elif isinstance(target, nn.Linear):
                target.weight.copy_(torch.from_numpy(values[0].T.copy()))
                target.bias.copy_(torch.from_numpy(values[1]))
            else:
                raise TypeError(f"{layer.name}: no weights expected in {type(target).__name__}")
    return module


def torchvision_reason() -> str | None:
    """None where ``torchvision`` imports with this torch; else why not (one line)."""
    try:
        import torchvision  # noqa: F401
    except Exception as exc:  # ImportError, or the CUDA-only wheel failing to register its operators
        return one_line(exc, 200)
    return None


def build_native(name: str, *, input_channels: int = 3, num_classes: int | None = None,
                 prefer_torchvision: bool = True) -> tuple[nn.Module, str]:
    """(module, source): torchvision's function where it exists for ``name`` and imports, else the plan's.

    ``source`` names what was built: ``"torchvision.models.resnet50"`` or
    ``"resnet_lab.models.torch_builder (torchvision's layout)"``.
    """
    spec = zoo_spec(name, "the native PyTorch builder")
    tv = TORCHVISION_EQUIVALENT.get(name)
    if prefer_torchvision and tv and input_channels == 3 and torchvision_reason() is None:
        import torchvision

        return getattr(torchvision.models, tv)(num_classes=num_classes or spec.num_classes), f"torchvision.models.{tv}"
    layout = "torchvision's layout" if tv else "the zoo's layer plan"
    return ResNet(spec, input_channels, num_classes), f"{__name__} ({layout})"


def count_params(module: Any) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
