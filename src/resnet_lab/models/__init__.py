"""The ResNet model zoo: ImageNet v1, v1.5, v2 and CIFAR v1, v2, as one table read by one builder.

Importing this package is cheap (no Keras, no TensorFlow): names, shapes and the analytic counts of
:func:`describe` are pure Python, so bad input is rejected in milliseconds. :func:`build` imports Keras.

    >>> from resnet_lab import models
    >>> models.describe("resnet50")["trainable_params"]
    25557032
    >>> model = models.build("cifar_resnet20")  # a keras.Model returning float32 logits
    >>> module, source = models.build_torch("resnet50_v1.5")  # the same plan in torch.nn (torchvision's names)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from resnet_lab.models.specs import (
    DATA_FORMATS,
    MODELS,
    ResNetSpec,
    check_foldable,
    check_input_shape,
    describe,
    get_spec,
    list_models,
)

if TYPE_CHECKING:
    import keras

__all__ = [
    "DATA_FORMATS",
    "MODELS",
    "ResNetSpec",
    "build",
    "build_torch",
    "check_foldable",
    "check_input_shape",
    "describe",
    "fold_batch_norms",
    "get_spec",
    "list_models",
]


def build(
    name: str,
    *,
    input_shape: tuple[int | None, ...] | None = None,
    num_classes: int | None = None,
    data_format: str | None = None,
    use_bias: bool = False,
    dtype_policy: Any = None,
    fused_bn: bool = False,
    fold_bn: bool = False,
) -> keras.Model:
    """Build model ``name`` (random init) as a Keras functional model that outputs float32 logits.

    Args:
        name: a name from :func:`list_models`.
        input_shape: in ``data_format`` order; defaults to the family's (224² ImageNet, 32² CIFAR, RGB).
        num_classes: defaults to the family's (1000 ImageNet, 10 CIFAR).
        data_format: ``"channels_last"`` or ``"channels_first"``; defaults to
            ``keras.config.image_data_format()``.
        use_bias: give convs a bias where the reference implementation has one (Keras applications), for
            weight transfer; the default builds the papers' bias-free convs.
        dtype_policy: a Keras dtype policy or its name (``"mixed_bfloat16"``, ...); defaults to the global
            one. Logits are float32 whatever the policy.
        fused_bn: batch norm through TensorFlow's fused kernel on the TensorFlow backend
            (:class:`~resnet_lab.models.keras_builder.FusedBatchNormalization`: Keras' layer, its weights and
            names, another kernel); Keras' own layer on the other backends.
        fold_bn: the inference architecture: each convolution with a bias and no batch norm after it (v1 and
            v1.5 only); :func:`fold_batch_norms` gives it a trained model's weights.

    Raises:
        UsageError: unknown name, bad data_format, or an input shape the model cannot take.
    """
    get_spec(name)  # fail on a bad name before paying for the Keras import
    check_foldable(name, fold_bn, fused_bn)
    from resnet_lab.models.keras_builder import build_model

    return build_model(name, input_shape=input_shape, num_classes=num_classes, data_format=data_format,
                       use_bias=use_bias, dtype_policy=dtype_policy, fused_bn=fused_bn, fold_bn=fold_bn)


def fold_batch_norms(name: str, model: keras.Model) -> keras.Model:
    """``model`` (built as ``name``) for inference with each batch norm folded into the convolution before it
    (:func:`resnet_lab.models.keras_builder.fold_batch_norms`)."""
    from resnet_lab.models.keras_builder import fold_batch_norms as fold

    return fold(name, model)


def build_torch(name: str, *, input_channels: int = 3, num_classes: int | None = None,
                prefer_torchvision: bool = True) -> tuple[Any, str]:
    """(``torch.nn.Module``, source): model ``name`` in plain PyTorch, no Keras (NCHW input, float32 logits).

    torchvision's own function where one exists for ``name`` and torchvision imports; else
    :class:`~resnet_lab.models.torch_builder.ResNet` built from the same layer plan as :func:`build`.
    """
    get_spec(name)  # fail on a bad name before paying for the torch import
    from resnet_lab.models.torch_builder import build_native

    return build_native(name, input_channels=input_channels, num_classes=num_classes,
                        prefer_torchvision=prefer_torchvision)
