"""What every backend's step shares: the optimizer and the loss.

A training step, on any backend, is: forward in training mode (batch-norm uses batch statistics and
updates its moving mean/variance), loss = mean sparse softmax cross-entropy of the float32 logits, gradients
of all trainable variables, SGD-with-momentum update of all of them. Under ``mixed_float16`` the optimizer
is wrapped in a :class:`keras.optimizers.LossScaleOptimizer`, as ``Model.compile`` does.

Written with ``keras.ops``, so the same function serves TensorFlow, JAX and PyTorch. Keras is imported
inside the functions (see the package docstring).
"""

from __future__ import annotations

from typing import Any


def computes_in_float16(model: Any) -> bool:
    """True when the model or any of its layers computes in float16 (a ``mixed_float16`` policy).

    Looks at the layers too: a functional model built with per-layer policies can itself report float32.
    """
    owners = [model, *model.layers]
    return any(getattr(getattr(x, "dtype_policy", None), "compute_dtype", None) == "float16" for x in owners)


def compute_dtype(model: Any) -> str:
    """The dtype the model's layers compute in: that of its first layer with weights (the model object
    itself may report float32 when its layers were built with a mixed policy)."""
    for layer in model.layers:
        if layer.weights:
            return str(layer.compute_dtype)
    return str(model.compute_dtype)


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

    logits = keras.ops.cast(logits, "float32")
    return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
