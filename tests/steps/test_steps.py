"""resnet_lab.steps.tf_step and .common: the steps that op extraction compiles and benchmarks time."""

from __future__ import annotations

import numpy as np
import pytest

from resnet_lab.core.errors import UsageError
from resnet_lab.steps import common, tf_step

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")


def tiny_model(dtype_policy: str = "float32") -> keras.Model:
    """conv -> batch norm -> relu -> pool -> dense: every kind of variable a ResNet has; compiles fast."""
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, padding="same", use_bias=False, dtype=dtype_policy)(inputs)
    x = keras.layers.BatchNormalization(dtype=dtype_policy)(x)
    x = keras.layers.ReLU(dtype=dtype_policy)(x)
    x = keras.layers.GlobalAveragePooling2D(dtype=dtype_policy)(x)
    outputs = keras.layers.Dense(5, dtype="float32")(x)
    model = keras.Model(inputs, outputs)
    model.dtype_policy = keras.DTypePolicy(dtype_policy)
    return model


def test_train_step_updates_every_trainable_variable_and_batch_norm_statistics():
    model = tiny_model()
    images, labels = tf_step.synthetic_batch(4, (8, 8, 3), 5)
    before = {v.path: v.numpy().copy() for v in model.variables}
    optimizer = common.make_optimizer(model, learning_rate=0.5)
    loss = tf_step.make_train_step(model, optimizer)(images, labels)
    assert loss.shape == () and np.isfinite(loss.numpy())
    changed = {v.path for v in model.variables if not np.array_equal(before[v.path], v.numpy())}
    assert {v.path for v in model.trainable_variables} <= changed
    moving = {v.path for v in model.non_trainable_variables if "moving" in v.path}
    assert moving and moving <= changed
    assert int(optimizer.iterations.numpy()) == 1
    assert any("momentum" in v.path for v in optimizer.variables)  # SGD with momentum slots


def test_loss_is_mean_sparse_softmax_cross_entropy():
    logits = tf.constant([[2.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
    labels = tf.constant([0, 2])
    expected = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    np.testing.assert_allclose(common.loss_fn(labels, logits).numpy(), expected.numpy(), rtol=1e-6)


def test_infer_step_returns_float32_logits_in_inference_mode():
    model = tiny_model()
    images, _ = tf_step.synthetic_batch(2, (8, 8, 3), 5)
    moving = [v.numpy().copy() for v in model.non_trainable_variables]
    logits = tf_step.make_infer_step(model)(images)
    assert logits.shape == (2, 5) and logits.dtype == tf.float32
    for old, v in zip(moving, model.non_trainable_variables, strict=True):
        np.testing.assert_array_equal(old, v.numpy())


def test_float16_policy_gets_loss_scaling_like_model_compile():
    assert isinstance(common.make_optimizer(tiny_model("mixed_float16")), keras.optimizers.LossScaleOptimizer)
    assert not isinstance(common.make_optimizer(tiny_model("mixed_bfloat16")),
                          keras.optimizers.LossScaleOptimizer)
    model = tiny_model("mixed_float16")
    model.dtype_policy = keras.DTypePolicy("float32")  # per-layer float16 policies under a float32 model
    assert common.computes_in_float16(model)
    assert isinstance(common.make_optimizer(model), keras.optimizers.LossScaleOptimizer)


def test_float16_train_step_compiles_loss_scaling_into_the_step():
    model = tiny_model("mixed_float16")
    step = tf_step.make_train_step(model, common.make_optimizer(model))
    images, labels = tf_step.synthetic_batch(2, (8, 8, 3), 5)
    text = step.experimental_get_compiler_ir(images, labels)(stage="hlo")
    assert " is-finite(" in text and " conditional(" in text  # finite check, apply-or-skip


def test_synthetic_batch_is_deterministic_and_in_range():
    (x1, y1), (x2, y2) = tf_step.synthetic_batch(3, (4, 4, 3), 7), tf_step.synthetic_batch(3, (4, 4, 3), 7)
    np.testing.assert_array_equal(x1.numpy(), x2.numpy())
    assert x1.shape == (3, 4, 4, 3) and y1.dtype == tf.int32
    assert int(tf.reduce_min(y2)) >= 0 and int(tf.reduce_max(y2)) < 7


def test_make_step_rejects_unknown_mode():
    with pytest.raises(UsageError, match="mode: 'eval' is not one of: infer, train"):
        tf_step.make_step("eval", tiny_model())
