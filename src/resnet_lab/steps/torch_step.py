"""The PyTorch step: the same inference and training step as :mod:`resnet_lab.steps.tf_step`, on Keras' torch backend.

``model(x, training=True)``, ``loss.backward()``, ``optimizer.apply`` under ``no_grad``. ``compile=True``
wraps the whole step in ``torch.compile`` (TorchInductor), as Keras' own ``jit_compile=True`` does for this
backend; ``compile=False`` is eager PyTorch. Runs in a process started with ``KERAS_BACKEND=torch``.

:func:`make_native_step` is the same step with no Keras at all, on a ``torch.nn`` model
(:func:`resnet_lab.models.build_torch`): what a PyTorch user writes — ``F.cross_entropy``, ``torch.optim.SGD``
(the same learning rate and momentum as :func:`resnet_lab.steps.common.make_optimizer`), ``channels_last``
memory format, and ``torch.autocast`` for bf16/fp16 (weights stay float32, as Keras' mixed policies keep them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from resnet_lab.core.choices import TORCH_COMPILE_BACKEND_ENV
from resnet_lab.steps.common import loss_fn


def make_torch_step(model: Any, optimizer: Any | None, mode: str, batch: tuple[Any, ...],
                    compile: bool) -> tuple[Callable[[], Any], Callable[[], dict[str, int]]]:
    """(step, compile_stats): ``step()`` runs one step on the fixed batch; ``compile_stats()`` counts what
    ``torch.compile`` did (graphs, graph breaks, recompiles), empty for eager."""
    import torch

    variables = model.trainable_variables

    def train_step(images, labels):
        logits = model(images, training=True)
        loss = loss_fn(labels, logits)
        model.zero_grad()
        optimizer.scale_loss(loss).backward()
        grads = [v.value.grad for v in variables]
        with torch.no_grad():
            optimizer.apply(grads, variables)
        return loss.detach()

    def infer_step(images):
        with torch.no_grad():
            return model(images, training=False)

    return _bind(train_step if mode == "train" else infer_step, batch, compile)


def _bind(fn: Callable[..., Any], batch: tuple[Any, ...], compile: bool, no_grad: bool = False,
          ) -> tuple[Callable[[], Any], Callable[[], dict[str, int]]]:
    """(step, compile_stats): ``fn`` on the fixed batch, under ``torch.compile`` (its graphs reset) or eager;
    ``no_grad``: every call under ``torch.no_grad()`` from outside, as PyTorch's inference recipes call a
    compiled model (Inductor's freezing applies only where gradients are off when it compiles)."""
    import torch

    if compile:
        torch._dynamo.reset()
        fn = torch.compile(fn, backend=compile_backend())
    if no_grad:
        inner = fn

        def fn(*args):
            with torch.no_grad():
                return inner(*args)

    def step():
        return fn(*batch)

    step.call = fn  # the same (compiled) function on another batch of the same shape
    return step, (dynamo_counters if compile else dict)


AUTOCAST = {"fp32": None, "bf16": "bfloat16", "fp16": "float16"}


def make_native_step(model: Any, mode: str, batch: tuple[Any, ...], compile: bool, precision: str = "fp32",
                     learning_rate: float = 0.1, momentum: float = 0.9,
                     ) -> tuple[Callable[[], Any], Callable[[], dict[str, int]]]:
    """(step, compile_stats) for a native ``torch.nn`` model: a training step (forward in train mode,
    mean cross-entropy of float32 logits, backward, SGD with momentum) or an inference forward pass in
    eval mode under ``torch.inference_mode``; bf16/fp16 through ``torch.autocast`` on the batch's device."""
    import torch

    device_type = batch[0].device.type
    dtype = AUTOCAST[precision]
    autocast = (lambda: torch.autocast(device_type, dtype=getattr(torch, dtype))) if dtype else None
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=momentum) if mode == "train" else None
    model.train(mode == "train")

    def train_step(images, labels):
        optimizer.zero_grad(set_to_none=True)
        if autocast:
            with autocast():
                logits = model(images)
        else:
            logits = model(images)
        loss = torch.nn.functional.cross_entropy(logits.float(), labels.long())
        loss.backward()
        optimizer.step()
        return loss.detach()

    def infer_step(images):  # called under no_grad (not inference_mode, which compiled graphs do not need)
        if autocast:
            with autocast():
                return model(images).float()
        return model(images)

    return _bind(train_step if mode == "train" else infer_step, batch, compile, no_grad=mode != "train")


def compile_backend() -> str:
    """The torch.compile backend of this process: ``$RESNET_LAB_TORCH_COMPILE_BACKEND``, else ``inductor``
    (:data:`resnet_lab.core.choices.TORCH_COMPILE_BACKENDS`)."""
    import os

    return os.environ.get(TORCH_COMPILE_BACKEND_ENV) or "inductor"


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
