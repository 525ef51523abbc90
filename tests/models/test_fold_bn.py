"""Batch norm folded into the convolutions for inference (models.fold_batch_norms): the same logits as the
model it came from, no batch norm after a convolution left, and one clear line where folding cannot apply."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from resnet_lab import models  # noqa: E402
from resnet_lab.core.errors import UsageError  # noqa: E402


def _randomize_batch_norms(model, seed: int = 0) -> None:
    """Moving statistics and affine weights far from their initial values (1, 0, 0, 1), so folding has work."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            n = layer.moving_mean.shape[0]
            layer.set_weights([rng.normal(1.0, 0.3, n), rng.normal(0.0, 0.3, n), rng.normal(0.0, 0.5, n),
                               rng.uniform(0.2, 3.0, n)])


def _logits(model, x):
    """Inference logits; NCHW on TensorFlow through XLA (its CPU kernels take NHWC only)."""
    if keras.backend.backend() == "tensorflow" and model.layers[1].data_format == "channels_first":
        import tensorflow as tf

        return tf.function(lambda t: model(t, training=False), jit_compile=True)(x).numpy()
    return keras.ops.convert_to_numpy(model(x, training=False))


@pytest.mark.parametrize("fused_bn", [False, True], ids=["keras_bn", "fused_bn"])
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_folded_model_gives_the_same_logits_with_no_batch_norm_left(fused_bn, data_format):
    if fused_bn and keras.backend.backend() != "tensorflow":
        pytest.skip("the fused kernel is TensorFlow's")
    # 24 pixels, not 16: Keras 3.15's Conv2D, channels_first on TensorFlow under XLA, adds its bias along the
    # last axis when the width equals the filter count (16 here), in the model before folding as after
    shape = (24, 24, 3) if data_format == "channels_last" else (3, 24, 24)
    model = models.build("tiny-resnet", input_shape=shape, data_format=data_format, use_bias=True,
                         fused_bn=fused_bn)
    x = np.random.default_rng(1).normal(size=(4, *shape)).astype("float32")
    initial = _logits(model, x)
    _randomize_batch_norms(model)
    folded = models.fold_batch_norms("tiny-resnet", model)

    assert not any(isinstance(layer, keras.layers.BatchNormalization) for layer in folded.layers)
    convs = [layer for layer in folded.layers if isinstance(layer, keras.layers.Conv2D)]
    assert convs and all(c.use_bias for c in convs)
    assert [c.name for c in convs] == [layer.name for layer in model.layers
                                       if isinstance(layer, keras.layers.Conv2D)]
    want, got = _logits(model, x), _logits(folded, x)
    # the statistics moved the logits far: a fold that ignored them (or used the initial ones) would fail
    assert np.abs(want - initial).max() > 0.2 * np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_folding_a_v1_5_model_keeps_its_shape_and_parameter_count_less_the_batch_norms():
    model = models.build("resnet50_v1.5", input_shape=(64, 64, 3))
    folded = models.fold_batch_norms("resnet50_v1.5", model)
    bn = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    assert len(bn) == 53
    # each batch norm's 4 vectors become its convolution's one bias vector
    assert folded.count_params() == model.count_params() - sum(3 * layer.moving_mean.shape[0] for layer in bn)
    assert folded.output_shape == model.output_shape


@pytest.mark.parametrize("name,kwargs,message", [
    ("resnet50_v2", {}, "pre-activation model puts BN and a ReLU before it"),
    ("cifar_resnet110_v2", {}, "nothing to fold into"),
    ("keras-resnet50", {}, "not keras.applications'"),
    ("resnet50_v1.5", {"fused_bn": True}, "give one of them"),
])
def test_fold_bn_where_it_cannot_apply_is_one_line(name, kwargs, message):
    with pytest.raises(UsageError, match=message):
        models.build(name, fold_bn=True, **kwargs)
