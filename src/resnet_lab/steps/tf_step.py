"""The TensorFlow steps every TensorFlow measurement in the workbook runs (benchmarks and op extraction).

The op extraction (:mod:`resnet_lab.hlo.capture`) compiles these and the benchmarks time them, so "the ops
of a training step" and "the speed of a training step" are about the same function. Plain Keras 3 on the
TensorFlow backend: ``model(x, training=...)``, ``tf.GradientTape``, ``optimizer.apply``; the loss and the
optimizer are :mod:`resnet_lab.steps.common`'s.

TensorFlow is imported inside the functions (see the package docstring).
"""

from __future__ import annotations

from typing import Any

from resnet_lab.core.choices import MODES, check_choice
from resnet_lab.steps.common import loss_fn, make_optimizer


def make_train_step(model: Any, optimizer: Any, *, jit_compile: bool | None = True) -> Any:
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


def make_infer_step(model: Any, *, jit_compile: bool | None = True) -> Any:
    """A ``tf.function`` ``images -> logits``: the forward pass in inference mode."""
    import tensorflow as tf

    def infer_step(images: Any) -> Any:
        return model(images, training=False)

    return tf.function(infer_step, jit_compile=jit_compile)


def make_step(mode: str, model: Any, *, jit_compile: bool | None = True) -> Any:
    """``make_infer_step(model)`` or ``make_train_step(model, make_optimizer(model))`` by ``mode``."""
    check_choice("mode", mode, MODES)
    if mode == "infer":
        return make_infer_step(model, jit_compile=jit_compile)
    return make_train_step(model, make_optimizer(model), jit_compile=jit_compile)


def synthetic_batch(batch_size: int, input_shape: tuple[int, ...], num_classes: int, seed: int = 0) -> Any:
    """Deterministic random ``(images, labels)``: float32 images of ``(batch_size, *input_shape)`` and
    int32 labels in ``[0, num_classes)``. The model's input layer casts images to its compute dtype."""
    import tensorflow as tf

    images = tf.random.stateless_uniform((batch_size, *input_shape), seed=(seed, 1), dtype=tf.float32)
    labels = tf.random.stateless_uniform(
        (batch_size,), seed=(seed, 2), minval=0, maxval=num_classes, dtype=tf.int32
    )
    return images, labels
