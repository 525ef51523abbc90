"""The fold_bn knob: inference on a v1/v1.5 Keras model only, one line otherwise, part of a row's identity."""

from __future__ import annotations

import pytest

from resnet_lab.bench import identity
from resnet_lab.bench.config import BenchConfig, validate
from resnet_lab.core.errors import UsageError

INFER = {"model": "resnet50_v1.5", "mode": "infer", "batch_size": 1}


@pytest.mark.parametrize("override,message", [
    ({"mode": "train"}, "an inference model; mode infer, not 'train'"),
    ({"backend": "torch", "impl": "native"}, "native PyTorch runs its own model"),
    ({"backend": "onnxruntime", "xla": "jit"}, "onnxruntime runs its own model"),
    ({"model": "resnet50_v2"}, "nothing to fold into"),
    ({"fused_bn": True}, "give one of them"),
    ({"fold_bn": "yes"}, "fold_bn"),
])
def test_fold_bn_where_it_does_not_apply_is_one_line(override, message):
    with pytest.raises(UsageError, match=message):
        validate(BenchConfig(**{**INFER, "fold_bn": True, **override}))


def test_fold_bn_is_part_of_what_was_measured():
    plain, folded = BenchConfig(**INFER), validate(BenchConfig(**INFER, fold_bn=True))
    for backend in ("jax", "torch"):  # Keras' model on every backend
        assert validate(BenchConfig(**INFER, fold_bn=True, backend=backend)).fold_bn
    assert identity.match_key(identity.as_row(plain)) != identity.match_key(identity.as_row(folded))
    assert "BN folded" in identity.describe(folded) and "BN folded" not in identity.describe(plain)
    old = identity.read_row({k: v for k, v in identity.as_row(plain).items() if k != "fold_bn"})
    assert old["fold_bn"] is False  # a record written before the knob: not folded
    assert identity.match_key(old) == identity.match_key(identity.as_row(plain))
