"""The one builder: turns a spec's layer plan (``specs.block_plans``) into a Keras 3 functional model.

Only Keras layers and ``keras.ops`` are used (no ``tf.*``), so the model runs on the TensorFlow, JAX and
PyTorch backends. Layer names follow keras.applications (``conv2_block1_1_conv``, ``conv2_block1_0_bn``,
``post_bn``, ``predictions``) so weights transfer between the two by name.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import layers

from resnet_lab.core.choices import check_choice
from resnet_lab.core.errors import UsageError
from resnet_lab.models.specs import (
    DATA_FORMATS,
    STEMS,
    BlockPlan,
    ConvPlan,
    ResNetSpec,
    _check_num_classes,
    block_plans,
    check_foldable,
    check_input_shape,
    get_spec,
    stem_plan,
)


@keras.saving.register_keras_serializable(package="resnet_lab")
class ChannelZeroPad(layers.Layer):
    """Appends zero channels: the parameter-free "option A" shortcut of He et al. 2015.

    Zeros go half before and half after the input channels, as in tensorflow/models research/resnet.
    """

    def __init__(self, filters_out: int, data_format: str = "channels_last", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.filters_out = filters_out
        self.data_format = data_format

    def call(self, x: Any) -> Any:
        axis = -1 if self.data_format == "channels_last" else 1
        extra = self.filters_out - x.shape[axis]
        pad = [[0, 0]] * 4
        pad[axis] = [extra // 2, extra - extra // 2]
        return keras.ops.pad(x, pad)

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        shape = list(input_shape)
        shape[-1 if self.data_format == "channels_last" else 1] = self.filters_out
        return tuple(shape)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "filters_out": self.filters_out, "data_format": self.data_format}


@keras.saving.register_keras_serializable(package="resnet_lab")
class FusedBatchNormalization(layers.BatchNormalization):
    """Keras' ``BatchNormalization`` (the same arguments, weights, names and moving statistics) that runs
    TensorFlow's fused kernel, ``FusedBatchNormV3`` and its gradient (oneDNN's on CPU, cuDNN's on GPU), on
    the TensorFlow backend.

    Keras 3 computes batch norm on TensorFlow from ``tf.nn.moments`` and element-wise ops (a dozen ops forward
    and more backward) after casting bf16 inputs to fp32; tf.keras used the fused op. Here a 4-D input with
    the channel axis last or first, no mask and no renorm goes through ``tf.compat.v1.nn.fused_batch_norm``
    in the input's dtype (fp32 statistics, as the op keeps them); everything else, and every other backend,
    is Keras' own layer. Differences to Keras' layer: the moving variance is updated with the biased batch
    variance as Keras does (the op's unbiased one is rescaled), and the op raises ``epsilon`` below 1.001e-5
    to that floor (cuDNN's minimum).
    """

    def _fused_axis(self, inputs: Any, mask: Any) -> int | None:
        """The channel axis (1 or 3) when the fused kernel applies, else None."""
        if keras.backend.backend() != "tensorflow" or mask is not None or self.renorm or len(inputs.shape) != 4:
            return None
        axis = self.axis % 4  # Keras keeps -1 as given
        return axis if axis in (1, 3) else None

    def call(self, inputs: Any, training: Any = None, mask: Any = None) -> Any:
        axis = self._fused_axis(inputs, mask)
        if axis is None:
            return super().call(inputs, training=training, mask=mask)
        import tensorflow as tf

        fmt = "NHWC" if axis == 3 else "NCHW"
        channels = inputs.shape[axis]
        gamma = self.gamma if self.scale else tf.ones([channels], tf.float32)
        beta = self.beta if self.center else tf.zeros([channels], tf.float32)
        gamma, beta = tf.cast(gamma, tf.float32), tf.cast(beta, tf.float32)
        if training and self.trainable:
            y, mean, unbiased = tf.compat.v1.nn.fused_batch_norm(inputs, gamma, beta, epsilon=self.epsilon,
                                                                 data_format=fmt, is_training=True)
            n = tf.cast(tf.size(inputs) // channels, tf.float32)
            variance = unbiased * tf.maximum(n - 1.0, 1.0) / n  # Keras keeps the biased variance
            m = self.momentum
            self.moving_mean.assign(self.moving_mean * m + tf.cast(mean, self.moving_mean.dtype) * (1.0 - m))
            self.moving_variance.assign(self.moving_variance * m
                                        + tf.cast(variance, self.moving_variance.dtype) * (1.0 - m))
        else:
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                inputs, gamma, beta, mean=tf.cast(self.moving_mean, tf.float32),
                variance=tf.cast(self.moving_variance, tf.float32), epsilon=self.epsilon, data_format=fmt,
                is_training=False)
        return tf.cast(y, self.compute_dtype)


class _Builder:
    """Layer factories that carry the per-model settings (data format, BN constants, dtype policy)."""

    def __init__(self, spec: ResNetSpec, data_format: str, dtype: Any, fused_bn: bool = False,
                 fold_bn: bool = False) -> None:
        self.spec = spec
        self.bn_layer = FusedBatchNormalization if fused_bn else layers.BatchNormalization
        self.fold_bn = fold_bn
        self.data_format = data_format
        self.dtype = dtype
        self.bn_axis = -1 if data_format == "channels_last" else 1

    @staticmethod
    def kernel_init() -> Any:
        """He et al. 2015 init (fan-out normal), as research/resnet and torchvision; Keras' applications use
        glorot_uniform, which only matters when training from scratch. A new initializer per layer: Keras 3
        gives an unseeded instance one seed when it is made, so a shared one drew the same kernel for every
        convolution of one shape (33 of ResNet-50's 53 were copies of another)."""
        return keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")

    def bn(self, x: Any, name: str) -> Any:
        return self.bn_layer(axis=self.bn_axis, epsilon=self.spec.bn_epsilon, momentum=self.spec.bn_momentum,
                             name=name, dtype=self.dtype)(x)

    def bn_relu(self, x: Any, name: str) -> Any:
        x = self.bn(x, f"{name}_bn")
        return layers.Activation("relu", name=f"{name}_relu", dtype=self.dtype)(x)

    def conv(self, x: Any, c: ConvPlan) -> Any:
        padding = "valid" if c.kernel == 1 else "same"
        if c.kernel > 1 and c.stride > 1 and self.spec.padding == "symmetric":
            # 'same' pads only bottom/right when the stride is 2 (TF's rule); Caffe, Keras' applications
            # and Model Garden's fixed_padding pad (k-1)/2 on every side, which shifts the sampling grid.
            before = (c.kernel - 1) // 2
            pad = (before, c.kernel - 1 - before)
            x = layers.ZeroPadding2D((pad, pad), data_format=self.data_format, name=f"{c.name}_pad",
                                     dtype=self.dtype)(x)
            padding = "valid"
        folded = self.fold_bn and c.bn  # the batch norm's affine map lives in the kernel and the bias
        x = layers.Conv2D(c.filters, c.kernel, strides=c.stride, padding=padding, use_bias=c.bias or folded,
                          data_format=self.data_format, kernel_initializer=self.kernel_init(),
                          name=f"{c.name}_conv", dtype=self.dtype)(x)
        if c.bn and not folded:
            x = self.bn(x, f"{c.name}_bn")
        if c.relu:
            x = layers.Activation("relu", name=f"{c.name}_relu", dtype=self.dtype)(x)
        return x

    def downsample(self, x: Any, stride: int, name: str) -> Any:
        if self.spec.downsample == "subsample":  # keep every stride-th pixel (Keras v2's 1×1 max pool)
            return layers.MaxPooling2D(1, strides=stride, data_format=self.data_format, name=name,
                                       dtype=self.dtype)(x)
        return layers.AveragePooling2D(stride, strides=stride, padding="valid", data_format=self.data_format,
                                       name=name, dtype=self.dtype)(x)

    def block(self, x: Any, b: BlockPlan) -> Any:
        branch_in = self.bn_relu(x, f"{b.name}_preact") if b.preact else x
        shortcut = branch_in if b.shortcut_preact else x
        if b.shortcut == "projection":
            shortcut = self.conv(shortcut, b.shortcut_conv)
        elif b.shortcut in ("pool", "zero_pad"):
            if b.stride > 1:
                shortcut = self.downsample(shortcut, b.stride, f"{b.name}_0_pool")
            if b.shortcut == "zero_pad":
                shortcut = ChannelZeroPad(b.filters_out, self.data_format, name=f"{b.name}_0_pad",
                                          dtype=self.dtype)(shortcut)
        y = branch_in
        for c in b.convs:
            y = self.conv(y, c)
        if b.relu_after_add:  # Keras v1 names: `_add`, then the ReLU `_out`; v2: the Add is `_out`
            y = layers.Add(name=f"{b.name}_add", dtype=self.dtype)([shortcut, y])
            return layers.Activation("relu", name=f"{b.name}_out", dtype=self.dtype)(y)
        return layers.Add(name=f"{b.name}_out", dtype=self.dtype)([shortcut, y])


def build_model(
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
    """See :func:`resnet_lab.models.build`."""
    spec = get_spec(name)
    check_foldable(name, fold_bn, fused_bn)
    data_format = data_format or keras.config.image_data_format()
    check_choice("data_format", data_format, DATA_FORMATS)
    input_shape = tuple(input_shape) if input_shape is not None else spec.default_input_shape(data_format)
    _, _, channels = check_input_shape(name, input_shape, data_format=data_format)
    num_classes = _check_num_classes(name, spec.num_classes if num_classes is None else num_classes)
    if dtype_policy is None:
        dtype_policy = keras.config.dtype_policy()
    try:
        policy = keras.dtype_policies.get(dtype_policy)
    except ValueError as e:
        raise UsageError(f"{name}: unknown dtype_policy {dtype_policy!r} (e.g. float32, mixed_bfloat16, "
                         f"mixed_float16)") from e

    if spec.builder == "keras.applications":
        if fused_bn:
            raise UsageError(f"{name}: fused_bn applies to the models resnet_lab builds, not keras.applications'")
        return _keras_application(spec, input_shape, num_classes, data_format, policy)
    make = _Builder(spec, data_format, policy, fused_bn, fold_bn)
    inputs = keras.Input(shape=input_shape, name="input")
    x = make.conv(inputs, stem_plan(spec, channels, use_bias))
    if STEMS[spec.stem][3]:
        # Keras' applications pad with zeros, not -inf: the same after a ReLU (v1), not before one (v2).
        x = layers.ZeroPadding2D(((1, 1), (1, 1)), data_format=data_format, name="pool1_pad", dtype=policy)(x)
        x = layers.MaxPooling2D(3, strides=2, data_format=data_format, name="pool1_pool", dtype=policy)(x)
    for b in block_plans(spec, use_bias):
        x = make.block(x, b)
    if spec.preact:
        x = make.bn_relu(x, "post")
    x = layers.GlobalAveragePooling2D(data_format=data_format, name="avg_pool", dtype=policy)(x)
    x = layers.Dense(num_classes, name="predictions", dtype=policy)(x)
    if x.dtype != "float32":
        # Mixed precision: the classifier's GEMM runs in the fast dtype, the logits leave in float32 (the
        # loss and softmax need the range; Keras' mixed-precision guide does the same).
        x = layers.Activation("linear", dtype="float32", name="logits")(x)
    return keras.Model(inputs, x, name=spec.name)


def fold_batch_norms(name: str, model: keras.Model) -> keras.Model:
    """An inference copy of ``model`` (built by :func:`build_model` as ``name``) whose convolutions carry
    their batch norms: kernel ``w * s`` and bias ``(b - mean) * s + beta`` with ``s = gamma / sqrt(var + eps)``
    from the moving statistics, what a frozen inference graph (TensorFlow's ``optimize_for_inference``, ONNX
    Runtime, OpenVINO) does before it runs. Same input, logits, names and dtype policy; no batch-norm layer
    after a convolution remains, so it is for inference only (training it would train another model)."""
    import numpy as np

    convs = [layer for layer in model.layers if isinstance(layer, layers.Conv2D)]
    # build_model checks that ``name`` can be folded (check_foldable) before it builds anything
    folded = build_model(name, input_shape=tuple(model.input_shape[1:]), num_classes=int(model.output_shape[-1]),
                         data_format=convs[0].data_format, use_bias=any(c.use_bias for c in convs),
                         dtype_policy=convs[0].dtype_policy, fold_bn=True)
    source = {layer.name: layer for layer in model.layers}
    for layer in folded.layers:
        if not layer.weights:
            continue
        bn = source.get(layer.name.removesuffix("_conv") + "_bn") if isinstance(layer, layers.Conv2D) else None
        if bn is None:
            layer.set_weights(source[layer.name].get_weights())
            continue
        conv = source[layer.name]
        kernel = np.asarray(conv.kernel.numpy(), np.float64)
        bias = np.asarray(conv.bias.numpy(), np.float64) if conv.use_bias else 0.0
        eps = bn.epsilon
        if isinstance(bn, FusedBatchNormalization) and keras.backend.backend() == "tensorflow":
            eps = max(eps, 1.001e-5)  # the fused op's floor (see FusedBatchNormalization)
        value = {w.path.rsplit("/", 1)[-1]: np.asarray(w.numpy(), np.float64) for w in bn.weights}
        gamma, beta = value.get("gamma", 1.0), value.get("beta", 0.0)
        scale = gamma / np.sqrt(value["moving_variance"] + eps)
        layer.set_weights([(kernel * scale).astype(np.float32),
                           ((bias - value["moving_mean"]) * scale + beta).astype(np.float32)])
    return folded


def _keras_application(spec: ResNetSpec, input_shape: tuple[int | None, ...], num_classes: int, data_format: str,
                       policy: Any) -> keras.Model:
    """Keras' own ``keras.applications.ResNet50`` (random init, float32 logits), under ``policy``."""
    previous_format, previous_policy = keras.config.image_data_format(), keras.config.dtype_policy()
    keras.config.set_image_data_format(data_format)
    keras.config.set_dtype_policy(policy)
    try:  # the applications read the global data format and dtype policy
        return keras.applications.ResNet50(weights=None, input_shape=input_shape, classes=num_classes,
                                           classifier_activation=None)
    finally:
        keras.config.set_image_data_format(previous_format)
        keras.config.set_dtype_policy(previous_policy)
