"""The two steps every measurement in the workbook runs: one inference forward pass, one SGD training step.

The op extraction (:mod:`resnet_lab.ops`) compiles these and the benchmarks time them, so "the ops of a
training step" and "the speed of a training step" are about the same function. Plain Keras 3 on the
TensorFlow backend: ``model(x, training=...)``, ``tf.GradientTape``, ``optimizer.apply``.

A training step is: forward in training mode (batch-norm uses batch statistics and updates its moving
mean/variance), loss = mean sparse softmax cross-entropy from the float32 logits, gradients of all
trainable variables, SGD-with-momentum update of all of them. Under ``mixed_float16`` the optimizer is
wrapped in a :class:`keras.optimizers.LossScaleOptimizer`, as ``Model.compile`` does.

TensorFlow is imported inside the functions (see the package docstring).
"""

from __future__ import annotations

from typing import Any

PRECISIONS: dict[str, str] = {  # --precision value -> Keras dtype policy
    "fp32": "float32",
    "bf16": "mixed_bfloat16",
    "fp16": "mixed_float16",
}
MODES = ("infer", "train")


def computes_in_float16(model: Any) -> bool:
    """True when the model or any of its layers computes in float16 (a ``mixed_float16`` policy).

    Looks at the layers too: a functional model built with per-layer policies can itself report float32.
    """
    owners = [model, *model.layers]
    return any(getattr(getattr(x, "dtype_policy", None), "compute_dtype", None) == "float16" for x in owners)


def make_optimizer(model: Any, learning_rate: float = 0.1, momentum: float = 0.9) -> Any:
    """SGD with momentum for ``model``'s trainable variables, built (its slots exist before tracing).

    When the model computes in float16 it is wrapped in a dynamic ``LossScaleOptimizer``, as
    ``keras.Model.compile`` does for a ``mixed_float16`` model, so fp16 steps carry a real run's loss scaling.
    """
    import keras

    optimizer = keras.optimizers.SGD(learning_rate=learning_rate, momentum=momentum)
    if computes_in_float16(model):
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)
    return optimizer


def loss_fn(labels: Any, logits: Any) -> Any:
    """Mean sparse softmax cross-entropy of integer ``labels`` and ``logits`` (computed in float32)."""
    import keras
    import tensorflow as tf

    logits = tf.cast(logits, tf.float32)
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))


def make_train_step(model: Any, optimizer: Any, *, jit_compile: bool = True) -> Any:
    """A ``tf.function`` ``(images, labels) -> loss`` that performs one full training step.

    Forward in training mode (batch-norm moving statistics are updated), loss, gradients of
    ``model.trainable_variables``, ``optimizer.apply`` on all of them. ``jit_compile=True`` compiles the
    whole step into one XLA module.
    """
    import tensorflow as tf

    variables = model.trainable_variables

    def train_step(images: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = loss_fn(labels, logits)
            scaled = optimizer.scale_loss(loss)  # identity unless loss scaling is on
        grads = tape.gradient(scaled, variables)
        optimizer.apply(grads, variables)
        return loss

    return tf.function(train_step, jit_compile=jit_compile)


def make_infer_step(model: Any, *, jit_compile: bool = True) -> Any:
    """A ``tf.function`` ``images -> logits``: the forward pass in inference mode."""
    import tensorflow as tf

    def infer_step(images: Any) -> Any:
        return model(images, training=False)

    return tf.function(infer_step, jit_compile=jit_compile)


def make_step(mode: str, model: Any, *, jit_compile: bool = True) -> Any:
    """``make_infer_step(model)`` or ``make_train_step(model, make_optimizer(model))`` by ``mode``."""
    if mode == "infer":
        return make_infer_step(model, jit_compile=jit_compile)
    if mode == "train":
        return make_train_step(model, make_optimizer(model), jit_compile=jit_compile)
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def synthetic_batch(batch_size: int, input_shape: tuple[int, ...], num_classes: int, seed: int = 0) -> Any:
    """Deterministic random ``(images, labels)``: float32 images of ``(batch_size, *input_shape)`` and
    int32 labels in ``[0, num_classes)``. The model's input layer casts images to its compute dtype."""
    import tensorflow as tf

    images = tf.random.stateless_uniform((batch_size, *input_shape), seed=(seed, 1), dtype=tf.float32)
    labels = tf.random.stateless_uniform(
        (batch_size,), seed=(seed, 2), minval=0, maxval=num_classes, dtype=tf.int32
    )
    return images, labels
