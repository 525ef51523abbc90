"""Two runs' step times: the verdict of bench.stats.compare_speed on series with known distributions."""

from __future__ import annotations

import numpy as np
import pytest

from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench import stats
from resnet_lab.bench.config import BenchConfig


def _series(rng, mean, n=20, cv=0.02):
    return list(rng.normal(mean, cv * mean, n).clip(min=mean * 0.5))


def test_a_ten_percent_slowdown_is_called_slower():
    rng = np.random.default_rng(0)
    base, slow = _series(rng, 1.0), _series(rng, 1.0 / 0.9)  # 10 % fewer images/sec
    out = stats.compare_speed(stats.summary(base), stats.summary(slow), 32)
    assert out["verdict"] == "slower"
    assert -13 < out["delta_pct"] < -7
    assert out["ci_low_pct"] < out["delta_pct"] < out["ci_high_pct"] < 0
    assert out["p_value"] < 0.001
    faster = stats.compare_speed(stats.summary(slow), stats.summary(base), 32)
    assert faster["verdict"] == "faster" and faster["delta_pct"] > 7


def test_two_draws_of_one_distribution_are_no_significant_change():
    rng = np.random.default_rng(1)
    calls = [stats.compare_speed(stats.summary(_series(rng, 1.0, cv=0.05)),
                                 stats.summary(_series(rng, 1.0, cv=0.05)), 32)["verdict"] for _ in range(40)]
    # a 95 % interval: about 2 of 40 pairs may be called different, never most of them
    assert calls.count("no significant change") >= 34


def test_the_interval_narrows_with_more_steps():
    rng = np.random.default_rng(2)
    widths = []
    for n in (5, 20, 80):
        out = stats.compare_speed(stats.summary(_series(rng, 1.0, n)), stats.summary(_series(rng, 1.05, n)), 8)
        widths.append(out["ci_high_pct"] - out["ci_low_pct"])
    assert widths[0] > widths[1] > widths[2]


def test_one_step_has_no_interval_and_no_verdict():
    out = stats.compare_speed(stats.summary([1.0]), stats.summary([2.0, 2.1]), 4)
    assert out["ci_low_pct"] is None and out["verdict"] == "no significant change"
    assert out["delta_pct"] == pytest.approx(100 * (1 / 2.05 - 1))


def test_a_row_without_step_times_is_summarised_from_its_columns():
    rng = np.random.default_rng(3)
    times = _series(rng, 0.5, 10, cv=0.05)
    row = bench_rows.make_row(BenchConfig(model="tiny-resnet", batch_size=16, steps=10),
                            {"status": "ok", "step_times": times}, None,
                            static={"batch_size": 16, "global_batch": 16})
    assert row["step_times"] == times  # kept for `compare` (JSON only)
    exact, how = stats.summary_from_row(row)
    assert how == "step times"
    csv_like = {k: ("" if v is None else str(v)) for k, v in row.items() if k != "step_times"}
    approx, how = stats.summary_from_row(csv_like)
    assert how == "summary columns"
    assert approx[0] == pytest.approx(exact[0]) and approx[2] == exact[2]
    assert approx[1] == pytest.approx(exact[1], rel=0.1)  # the delta method: close, not exact
    assert stats.summary_from_row({"label": "x"}) == (None, "no step times")
