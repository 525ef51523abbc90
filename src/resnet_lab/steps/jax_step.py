"""The JAX step: the same inference and training step as :mod:`resnet_lab.steps.tf_step`, on Keras' JAX backend.

A pure function of the model's state (``model.stateless_call``, ``jax.value_and_grad``,
``optimizer.stateless_apply``), following Keras' "writing a training loop from scratch" guide for JAX.
``compile=True`` wraps it in ``jax.jit`` (one XLA module per step, the state donated); ``compile=False`` runs
it eagerly, primitive by primitive (each primitive is still an XLA computation, compiled once and cached:
JAX has no non-XLA executor).

Keras fixes its backend at import (``KERAS_BACKEND``): this runs in a process started for that backend
(the benchmark worker, :mod:`resnet_lab.hlo.jax_child`), never in the notebook's TensorFlow process.
"""

from __future__ import annotations

from typing import Any

from resnet_lab.steps.common import loss_fn


class JaxStep:
    """A JAX step and the state it threads through: ``out = step()`` runs one step on the fixed batch.

    The model's variables live in ``self.state`` (trainable, non-trainable, optimizer) between calls, as in
    a real JAX training loop.
    """

    def __init__(self, model: Any, optimizer: Any | None, mode: str, batch: tuple[Any, ...], compile: bool):
        import jax

        self.model, self.optimizer, self.mode, self.batch = model, optimizer, mode, batch
        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]
        if mode == "train":
            self.state: tuple = (trainable, non_trainable, [v.value for v in optimizer.variables])
            fn = self._train
        else:
            self.state = (trainable, non_trainable)
            fn = self._infer
        self.fn = fn
        # Donating the state lets XLA update the weights in place, as a real training loop would.
        self.compiled = jax.jit(fn, donate_argnums=0) if compile and mode == "train" else \
            jax.jit(fn) if compile else fn

    def _train(self, state: tuple, images: Any, labels: Any) -> tuple[Any, tuple]:
        import jax

        trainable, non_trainable, opt_vars = state

        def objective(tv, ntv):
            logits, ntv = self.model.stateless_call(tv, ntv, images, training=True)
            loss = loss_fn(labels, logits)
            return self.optimizer.scale_loss(loss), (loss, ntv)

        (_, (loss, non_trainable)), grads = jax.value_and_grad(objective, has_aux=True)(trainable, non_trainable)
        trainable, opt_vars = self.optimizer.stateless_apply(opt_vars, grads, trainable)
        return loss, (trainable, non_trainable, opt_vars)

    def _infer(self, state: tuple, images: Any) -> Any:
        trainable, non_trainable = state
        logits, _ = self.model.stateless_call(trainable, non_trainable, images, training=False)
        return logits

    def __call__(self) -> Any:
        if self.mode == "infer":  # the weights are read, not returned: no copy of them per step
            return self.compiled(self.state, *self.batch)
        out, self.state = self.compiled(self.state, *self.batch)
        return out

    def lower(self) -> Any:
        """``jax.jit(step).lower(state, *batch)``: the traced step, before XLA's passes (nothing runs)."""
        import jax

        return jax.jit(self.fn).lower(self.state, *self.batch)


def jax_batch(batch_size: int, input_shape: tuple[int, ...], num_classes: int, seed: int = 0,
              device: Any = None) -> tuple[Any, Any]:
    """Random float32 images and int32 labels, already on ``device`` (JAX's default device if None)."""
    import jax

    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    images = jax.random.uniform(k1, (batch_size, *input_shape), dtype="float32")
    labels = jax.random.randint(k2, (batch_size,), 0, num_classes, dtype="int32")
    if device is not None:
        images, labels = jax.device_put(images, device), jax.device_put(labels, device)
    return images, labels


def jax_sync(out: Any) -> float:
    """Wait for a step's result and read one number back (the loss, or the first logit)."""
    out.block_until_ready()
    return float(out if out.ndim == 0 else out[0, 0])
