"""The timing knobs every benchmark matrix of notebook 03 shares: one value, checked when it is made."""

from __future__ import annotations

import pytest

from resnet_lab.bench.config import BenchConfig
from resnet_lab.bench.timing import Timing
from resnet_lab.core.errors import UsageError


def test_timing_fields_are_benchconfig_fields_and_are_checked():
    t = Timing(steps=3, warmup=0, min_time_s=0.0, max_time_s=10.0, timeout_s=60.0)
    cfg = BenchConfig(**t.fields())
    assert (cfg.steps, cfg.warmup, cfg.min_time_s, cfg.max_time_s, cfg.timeout_s) == (3, 0, 0.0, 10.0, 60.0)
    assert t.replace(steps=7).steps == 7 and t.steps == 3  # frozen: a copy
    with pytest.raises(AttributeError):
        t.steps = 4  # type: ignore[misc]


@pytest.mark.parametrize(("change", "message"), [
    ({"steps": 0}, "steps: 0 is not an integer >= 1"),
    ({"steps": 2.5}, "steps: 2.5 is not an integer >= 1"),
    ({"warmup": -1}, "warmup: -1 is not an integer >= 0"),
    ({"min_time_s": -1.0}, "min time: -1.0 is not a number >= 0 seconds"),
    ({"min_time_s": True}, "min time: True is not a number"),
    ({"max_time_s": 0}, "max time: 0 is not a number > 0 seconds"),
    ({"min_time_s": 30.0, "max_time_s": 10.0}, r"max time: 10 s is below the min time \(30 s\)"),
    ({"timeout_s": -5}, "timeout: -5 is not a number > 0 seconds"),
])
def test_timing_rejects_what_cannot_run(change, message):
    with pytest.raises(UsageError, match=message):
        Timing(**change)
    with pytest.raises(UsageError, match=message):
        Timing().replace(**change)
