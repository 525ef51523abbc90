"""The photographs reduced-precision rows are checked on, and the agreement rule."""

from __future__ import annotations

import numpy as np
import pytest

from resnet_lab import export
from resnet_lab.export import photos


def test_the_photographs_are_real_images_cropped_and_resized_the_same_way_every_time():
    a = photos.photographs(24)
    assert a.shape == (photos.COUNT, 24, 24, 3) and a.dtype == np.float32
    assert a.min() >= 0.0 and a.max() <= 1.0 and 0.2 < a.mean() < 0.8
    assert np.array_equal(a, photos.photographs(24))
    assert photos.photographs(24, "channels_first").shape == (photos.COUNT, 3, 24, 24)
    assert len({float(x.std()) for x in a}) == photos.COUNT  # sixteen different crops, not one image repeated
    # natural images: neighbouring pixels correlate (noise would not)
    assert np.corrcoef(a[:, :, :-1].ravel(), a[:, :, 1:].ravel())[0, 1] > 0.8


def test_run_in_batches_fills_the_last_batch_and_returns_the_photographs_logits_only():
    x = np.arange(5, dtype=np.float32)[:, None]
    calls = []

    def call(chunk):
        calls.append(len(chunk))
        return chunk * 2

    out = photos.run_in_batches(call, x, 2)
    assert calls == [2, 2, 2] and np.array_equal(out, x * 2)


def _logits(n=16, classes=10, seed=0):
    return np.random.default_rng(seed).normal(size=(n, classes)) * 5


def test_agreement_passes_within_the_precision_s_tolerance_and_fails_beyond_it():
    ref = _logits()
    assert export.agreement(ref, ref, "fp32")["agree_ok"]
    small = ref + np.abs(ref).max() * 5e-3 * np.random.default_rng(1).uniform(-1, 1, ref.shape)
    got = export.agreement(small, ref, "bf16")
    assert got["agree_ok"] and got["agree_max_rel"] < got["agree_tol"] == export.AGREEMENT["bf16"]["max_rel"]
    assert not export.agreement(small, ref, "fp32")["agree_ok"]  # fp32 asks for far less
    wrong = ref.copy()
    wrong[:, [0, 1]] = wrong[:, [1, 0]]  # two classes swapped: top-1 changes on many photographs
    bad = export.agreement(wrong, ref, "bf16")
    assert not bad["agree_ok"] and bad["agree_top1"] < 1.0
    assert "agreement check failed (bf16 against fp32" in export.agreement_reason(bad, "bf16")
    shape = export.agreement(ref[:, :5], ref, "bf16")
    assert not shape["agree_ok"] and shape["agree_max_rel"] is None


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_non_finite_logit_never_agrees(precision):
    ref = _logits()
    bad = ref.copy()
    bad[3, 2] = np.nan
    assert not export.agreement(bad, ref, precision)["agree_ok"]
