"""resnet_lab.steps.torch_step.make_native_step: the training and inference step a PyTorch user writes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from resnet_lab import models  # noqa: E402
from resnet_lab.steps import torch_step  # noqa: E402


def _setup(mode: str, precision: str = "fp32"):
    module, _ = models.build_torch("tiny-resnet", prefer_torchvision=False)
    module = module.to(memory_format=torch.channels_last)
    images, labels = torch_step.torch_batch(8, (3, 16, 16), 10)
    images = images.contiguous(memory_format=torch.channels_last)
    batch = (images, labels) if mode == "train" else (images,)
    step, stats = torch_step.make_native_step(module, mode, batch, compile=False, precision=precision)
    return module, step, stats


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_train_step_updates_weights_and_batch_norm_statistics(precision):
    module, step, stats = _setup("train", precision)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    losses = [float(step()) for _ in range(6)]
    after = module.state_dict()
    assert module.training
    assert all(not torch.equal(before[k], after[k]) for k in before if k.endswith(("weight", "running_mean")))
    assert int(after["bn1.num_batches_tracked"]) == 6
    assert losses[-1] < losses[0]  # SGD with momentum on one fixed batch: it learns it
    assert stats() == {}  # eager: nothing compiled


def test_infer_step_is_eval_mode_float32_and_changes_nothing():
    module, step, _ = _setup("infer", "bf16")
    before = {k: v.clone() for k, v in module.state_dict().items()}
    logits = step()
    assert not module.training and logits.dtype == torch.float32 and tuple(logits.shape) == (8, 10)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    assert torch_step.torch_sync(logits) == pytest.approx(float(logits[0, 0]))
