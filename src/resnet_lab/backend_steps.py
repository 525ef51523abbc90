"""The same two steps as :mod:`resnet_lab.steps`, on Keras 3's JAX and PyTorch backends.

One Keras model definition runs on TensorFlow, JAX and PyTorch; what differs is how a training step is
written for each, and what compiles it. The steps here follow each backend's Keras guide ("writing a
training loop from scratch") and compute what :func:`resnet_lab.steps.make_train_step` computes: forward
in training mode (batch-norm updates its moving statistics), mean sparse softmax cross-entropy of float32
logits, gradients of all trainable variables, SGD-with-momentum update (a ``LossScaleOptimizer`` under
``mixed_float16``, see :func:`resnet_lab.steps.make_optimizer`).

- **JAX**: a pure function of the model's state (``model.stateless_call``, ``jax.value_and_grad``,
  ``optimizer.stateless_apply``). ``compile=True`` wraps it in ``jax.jit`` (one XLA module per step, the
  state donated); ``compile=False`` runs it eagerly, primitive by primitive (each primitive is still an
  XLA computation, compiled once and cached: JAX has no non-XLA executor).
- **PyTorch**: ``model(x, training=True)``, ``loss.backward()``, ``optimizer.apply`` under ``no_grad``.
  ``compile=True`` wraps the whole step in ``torch.compile`` (TorchInductor), as Keras' own
  ``jit_compile=True`` does for this backend; ``compile=False`` is eager PyTorch.

Keras fixes its backend at import (``KERAS_BACKEND``): these functions run in a process started for that
backend (the benchmark worker, :mod:`resnet_lab.jax_hlo`), never in the notebook's TensorFlow process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

STEP_SOURCE = "resnet_lab.backend_steps"


def _loss(labels: Any, logits: Any) -> Any:
    import keras

    logits = keras.ops.cast(logits, "float32")
    return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))


# ------------------------------------------------------------------------------------------------ JAX
class JaxStep:
    """A JAX step and the state it threads through: ``out = step()`` runs one step on the fixed batch.

    The model's variables live in ``self.state`` (trainable, non-trainable, optimizer) between calls, as in
    a real JAX training loop; :meth:`sync_to_model` writes them back into the Keras variables.
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

        def loss_fn(tv, ntv):
            logits, ntv = self.model.stateless_call(tv, ntv, images, training=True)
            loss = _loss(labels, logits)
            return self.optimizer.scale_loss(loss), (loss, ntv)

        (_, (loss, non_trainable)), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable, non_trainable)
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

    def sync_to_model(self) -> None:
        for value, var in zip(self.state[0], self.model.trainable_variables, strict=True):
            var.assign(value)
        for value, var in zip(self.state[1], self.model.non_trainable_variables, strict=True):
            var.assign(value)


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


# -------------------------------------------------------------------------------------------- PyTorch
def make_torch_step(model: Any, optimizer: Any | None, mode: str, batch: tuple[Any, ...],
                    compile: bool) -> tuple[Callable[[], Any], Callable[[], dict[str, int]]]:
    """(step, compile_stats): ``step()`` runs one step on the fixed batch; ``compile_stats()`` counts what
    ``torch.compile`` did (graphs, graph breaks, recompiles), empty for eager."""
    import torch

    variables = model.trainable_variables

    def train_step(images, labels):
        logits = model(images, training=True)
        loss = _loss(labels, logits)
        model.zero_grad()
        optimizer.scale_loss(loss).backward()
        grads = [v.value.grad for v in variables]
        with torch.no_grad():
            optimizer.apply(grads, variables)
        return loss.detach()

    def infer_step(images):
        with torch.no_grad():
            return model(images, training=False)

    fn = train_step if mode == "train" else infer_step
    if compile:
        torch._dynamo.reset()
        fn = torch.compile(fn)

    def step():
        return fn(*batch)

    return step, (dynamo_counters if compile else dict)


def dynamo_counters() -> dict[str, int]:
    """What TorchDynamo did so far in this process: graphs compiled, graph breaks, and frames it gave up on
    (left to eager Python, e.g. past ``torch._dynamo.config.recompile_limit``)."""
    from torch._dynamo.utils import counters

    frames = counters.get("frames", {})
    return {"graphs": int(counters.get("stats", {}).get("unique_graphs", 0)),
            "graph_breaks": int(sum(counters.get("graph_break", {}).values())),
            "frames": int(frames.get("total", 0)),
            "frames_eager": int(frames.get("total", 0)) - int(frames.get("ok", 0))}


def torch_batch(batch_size: int, input_shape: tuple[int, ...], num_classes: int, seed: int = 0,
                device: str = "cpu") -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(seed)
    images = torch.rand((batch_size, *input_shape), generator=g, dtype=torch.float32).to(device)
    labels = torch.randint(0, num_classes, (batch_size,), generator=g, dtype=torch.int32).to(device)
    return images, labels


def torch_sync(out: Any) -> float:
    """Read one number back (``.item()`` waits for the device)."""
    return float((out if out.ndim == 0 else out[0, 0]).item())
