"""The fused batch-norm knob through the benchmark layer: config, sweep, row name, conclusion, matching."""

from __future__ import annotations

import pytest

from resnet_lab.bench import identity, sections
from resnet_lab.bench.config import BenchConfig, validate
from resnet_lab.core.errors import UsageError
from resnet_lab.report import speed


def test_fused_bn_is_a_tensorflow_knob():
    assert validate(BenchConfig(model="tiny-resnet", fused_bn=True)).fused_bn
    with pytest.raises(UsageError, match="fused_bn is TensorFlow's FusedBatchNormV3; on jax"):
        validate(BenchConfig(model="tiny-resnet", backend="jax", fused_bn=True))
    with pytest.raises(UsageError, match="fused_bn"):
        validate(BenchConfig(model="tiny-resnet", fused_bn="yes"))


def test_the_sweep_adds_one_fused_row_per_precision_and_the_views_keep_them_apart():
    import pandas as pd

    cfgs = sections.sweep_configs(model="tiny-resnet", batch_size=4, batch_sizes=[2, 4], precisions=["fp32", "bf16"],
                                  threads=[], fused_bn=["fp32", "bf16"])
    fused = [c for c in cfgs if c.fused_bn]
    assert [(c.label, c.precision) for c in fused] == [("fused BN", "fp32"), ("fused BN", "bf16")]
    rows = [{"label": c.label, "batch_size": c.batch_size, "precision": c.precision, "intra_op": None,
             "inter_op": None, "fused_bn": c.fused_bn, "status": "ok", "images_per_sec": 10.0 + i,
             "model": c.model, "mode": "train", "xla": "off", "onednn": "on", "backend": "tensorflow",
             "image_size": 32, "data_format": "channels_last"} for i, c in enumerate(cfgs)]
    df = pd.DataFrame(rows)
    assert list(speed.sweep_view(df, "batch_size")["fused_bn"]) == [False, False]
    assert not speed.sweep_view(df, "precision")["fused_bn"].any()
    assert list(speed.sweep_view(df, "fused_bn")["batch norm"]) == ["bf16 Keras", "bf16 fused", "fp32 Keras",
                                                                       "fp32 fused"]
    assert "· fused BN" in speed.row_name(rows[-1])
    gains = speed.fused_bn_gains(rows)
    assert len(gains) == 2 and "fp32 training 13.00 images/sec vs 11.00 with Keras' batch norm, **1.18×**" in gains[0]


def test_a_record_without_the_flag_matches_a_row_with_it_off():
    row = {"model": "resnet50", "mode": "train", "batch_size": 32, "fused_bn": False, "onednn_profile": False}
    old = {"model": "resnet50", "mode": "train", "batch_size": "32"}  # a CSV of before the knob
    assert identity.match_key(row) == identity.match_key(old)
    assert identity.match_key({**row, "fused_bn": "True"}) != identity.match_key(old)
