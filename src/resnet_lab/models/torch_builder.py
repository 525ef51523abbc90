"""A native PyTorch twin of the Keras builder: the same layer plan (``specs.block_plans``) as ``torch.nn`` modules.

Used where a Keras model on the torch backend cannot go through a PyTorch tool (``torch.export`` in
:mod:`resnet_lab.hlo.torch_child`): an equivalent model, NCHW, with the same convolutions, strides, padding rules,
shortcuts, batch-norm constants and classifier, and the same trainable parameter count. Random init; weights are
not transferred. Importing this module does not import torch; :func:`build_torch_model` does.
"""

from __future__ import annotations

from typing import Any

from resnet_lab.models.specs import (
    STEMS,
    ConvPlan,
    _check_num_classes,
    block_plans,
    check_input_shape,
    get_spec,
    stem_plan,
)


def build_torch_model(name: str, *, input_shape: tuple[int, int, int] | None = None,
                      num_classes: int | None = None) -> Any:
    """Model ``name`` as a ``torch.nn.Module`` taking NCHW float32 images (``input_shape`` is (C, H, W)) and
    returning logits. keras.applications' ResNet50 (``keras-resnet50``) is its plan with conv biases."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    spec = get_spec(name)
    shape = tuple(input_shape) if input_shape is not None else spec.default_input_shape("channels_first")
    _, _, channels = check_input_shape(name, shape, data_format="channels_first")
    num_classes = _check_num_classes(name, spec.num_classes if num_classes is None else num_classes)
    use_bias = spec.builder == "keras.applications"

    class Conv(nn.Module):
        """Conv (padding as the Keras builder: 'same', TF's bottom/right 'same' when strided, or symmetric),
        then BN and ReLU as planned."""

        def __init__(self, c: ConvPlan) -> None:
            super().__init__()
            self.c = c
            k, s = c.kernel, c.stride
            # symmetric padding (stride 1, or the 'symmetric' rule with an odd kernel) is the conv's own
            self.own_pad = k > 1 and k % 2 == 1 and (s == 1 or spec.padding == "symmetric")
            self.conv = nn.Conv2d(c.filters_in, c.filters, k, stride=s, bias=c.bias,
                                  padding=(k - 1) // 2 if self.own_pad else 0)
            self.bn = nn.BatchNorm2d(c.filters, eps=spec.bn_epsilon) if c.bn else None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            k, s = self.c.kernel, self.c.stride
            if k > 1 and not self.own_pad and spec.padding == "symmetric":
                before = (k - 1) // 2
                x = F.pad(x, (before, k - 1 - before, before, k - 1 - before))
            elif k > 1 and not self.own_pad:  # TF 'same' when strided: total max(k - s, 0) (or k - n % s), the
                pads = []  # odd pixel after
                for n in (x.shape[3], x.shape[2]):
                    total = max(k - (s if n % s == 0 else n % s), 0)
                    pads += [total // 2, total - total // 2]
                x = F.pad(x, pads)
            x = self.conv(x)
            if self.bn is not None:
                x = self.bn(x)
            return F.relu(x) if self.c.relu else x

    class Block(nn.Module):
        def __init__(self, b: Any) -> None:
            super().__init__()
            self.b = b
            self.preact = nn.BatchNorm2d(b.filters_in, eps=spec.bn_epsilon) if b.preact else None
            self.convs = nn.Sequential(*(Conv(c) for c in b.convs))
            self.projection = Conv(b.shortcut_conv) if b.shortcut == "projection" else None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b = self.b
            branch_in = F.relu(self.preact(x)) if self.preact is not None else x
            shortcut = branch_in if b.shortcut_preact else x
            if self.projection is not None:
                shortcut = self.projection(shortcut)
            elif b.shortcut in ("pool", "zero_pad"):
                if b.stride > 1:
                    shortcut = (F.max_pool2d(shortcut, 1, b.stride) if spec.downsample == "subsample"
                                else F.avg_pool2d(shortcut, b.stride, b.stride))
                if b.shortcut == "zero_pad":
                    extra = b.filters_out - shortcut.shape[1]
                    shortcut = F.pad(shortcut, (0, 0, 0, 0, extra // 2, extra - extra // 2))
            y = shortcut + self.convs(branch_in)
            return F.relu(y) if b.relu_after_add else y

    plans = block_plans(spec, use_bias)
    stem, pool = stem_plan(spec, channels, use_bias), STEMS[spec.stem][3]

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = Conv(stem)
            self.blocks = nn.Sequential(*(Block(b) for b in plans))
            self.post = nn.BatchNorm2d(plans[-1].filters_out, eps=spec.bn_epsilon) if spec.preact else None
            self.fc = nn.Linear(plans[-1].filters_out, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.stem(x)
            if pool:  # Keras pads with zeros, then a 3×3/2 max pool
                x = F.max_pool2d(F.pad(x, (1, 1, 1, 1)), 3, 2)
            x = self.blocks(x)
            if self.post is not None:
                x = F.relu(self.post(x))
            return self.fc(x.mean(dim=(2, 3)))

    return ResNet()
