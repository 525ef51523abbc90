"""FusedBatchNormalization against Keras' BatchNormalization: outputs, gradients and moving statistics, in
training and inference, fp32 and bf16, channels last and first; and a whole model built with it."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

from resnet_lab import models  # noqa: E402
from resnet_lab.core.errors import UsageError  # noqa: E402
from resnet_lab.models.keras_builder import FusedBatchNormalization  # noqa: E402

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the fused kernel is TensorFlow's")

# fp32: the two compute the same sums in another order; bf16: both round the output to bf16 (8 bits of
# mantissa), the fused kernel also reads its input in bf16, so a few bf16 ulps
TOL = {"float32": dict(rtol=1e-4, atol=1e-4), "mixed_bfloat16": dict(rtol=3e-2, atol=3e-2)}


def _pair(policy: str, axis: int, channels: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    kw = dict(axis=-1 if axis == 3 else 1, epsilon=1.001e-5, momentum=0.9, dtype=policy)
    plain, fused = keras.layers.BatchNormalization(**kw), FusedBatchNormalization(**kw)
    shape = (4, 6, 6, channels) if axis == 3 else (4, channels, 6, 6)
    for layer in (plain, fused):
        layer.build(shape)
    weights = [rng.normal(1, 0.2, channels), rng.normal(0, 0.2, channels), rng.normal(0, 0.5, channels),
               rng.uniform(0.5, 2.0, channels)]  # gamma, beta, moving mean, moving variance
    for layer in (plain, fused):
        layer.set_weights([w.astype("float32") for w in weights])
    x = tf.constant(rng.normal(0.3, 1.5, shape).astype("float32"))
    return plain, fused, x


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("axis", [3, 1], ids=["channels_last", "channels_first"])
def test_training_outputs_gradients_and_moving_statistics_match(policy, axis):
    plain, fused, x = _pair(policy, axis, 8)
    start = plain.moving_mean.numpy().copy()
    upstream = tf.constant(np.random.default_rng(7).normal(size=x.shape).astype("float32"))  # a loss's dL/dy
    results = []
    for layer in (plain, fused):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        grads = tape.gradient(loss, [x, layer.gamma, layer.beta])
        results.append((y, grads, [v.numpy() for v in (layer.moving_mean, layer.moving_variance)]))
    (y0, g0, m0), (y1, g1, m1) = results
    for layer, kernel in ((fused, "FusedBatchNormV3"), (plain, "SquaredDifference")):  # each took its own path
        graph = tf.function(lambda t, layer=layer: layer(t, training=True)).get_concrete_function(x).graph
        assert kernel in {op.type for op in graph.get_operations()}
    assert y0.dtype == y1.dtype == ("bfloat16" if policy == "mixed_bfloat16" else "float32")
    np.testing.assert_allclose(np.float32(y1), np.float32(y0), **TOL[policy])
    for a, b, name in zip(g0, g1, ("x", "gamma", "beta"), strict=True):
        scale = float(np.abs(np.float32(a)).max()) or 1.0
        np.testing.assert_allclose(np.float32(b) / scale, np.float32(a) / scale, **TOL[policy], err_msg=name)
    for a, b in zip(m0, m1, strict=True):  # the moving statistics: Keras' update, biased variance
        np.testing.assert_allclose(b, a, rtol=1e-5 if policy == "float32" else 1e-2, atol=1e-6)
    assert not np.allclose(m1[0], start)  # the step did update them


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("axis", [3, 1], ids=["channels_last", "channels_first"])
def test_inference_uses_the_moving_statistics_as_keras_does(policy, axis):
    plain, fused, x = _pair(policy, axis, 5, seed=1)
    np.testing.assert_allclose(np.float32(fused(x, training=False)), np.float32(plain(x, training=False)),
                               **TOL[policy])
    before = fused.moving_mean.numpy().copy()
    fused(x, training=False)
    np.testing.assert_array_equal(fused.moving_mean.numpy(), before)  # inference updates nothing


def test_a_model_built_with_it_has_keras_weights_and_the_same_step():
    plain = models.build("cifar_resnet20", input_shape=(16, 16, 3))
    fused = models.build("cifar_resnet20", input_shape=(16, 16, 3), fused_bn=True)
    assert [w.path for w in fused.weights] == [w.path for w in plain.weights]  # checkpoints transfer by name
    assert sum(isinstance(layer, FusedBatchNormalization) for layer in fused.layers) == 19
    fused.set_weights(plain.get_weights())
    x = tf.random.stateless_normal((4, 16, 16, 3), seed=(1, 2))
    np.testing.assert_allclose(fused(x, training=True).numpy(), plain(x, training=True).numpy(), rtol=1e-3,
                               atol=1e-3)
    graph = tf.function(lambda t: fused(t, training=True)).get_concrete_function(x).graph
    ops = [op.type for op in graph.get_operations()]
    assert ops.count("FusedBatchNormV3") == 19 and "SquaredDifference" not in ops  # the fused kernel, not moments
    with pytest.raises(UsageError, match="fused_bn"):
        models.build("keras-resnet50", fused_bn=True)
