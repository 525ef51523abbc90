"""The process as the unit of repetition: bench.stats' between-process estimate, Holm's correction and the
smallest detectable change, on synthetic data with a known process effect and on recorded process means."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from resnet_lab.bench import stats

IMAGES = 32
STEP_S = 0.5  # the true median step time of a process: the true speed is IMAGES / STEP_S
SIMULATIONS = 400
FIXTURES = Path(__file__).parent / "fixtures"


def _processes(rng, counts, sd_between=0.08, sd_within=0.03, step_s=STEP_S):
    """One dataset: process i runs at step_s · exp(b_i), b_i ~ N(0, sd_between) (its memory layout, thread
    placement, the host's state); its steps scatter around that by sd_within (log-normal with mean 1)."""
    out = []
    for n in counts:
        mean = step_s * math.exp(rng.normal(0, sd_between))
        out.append(list(mean * np.exp(rng.normal(0, sd_within, n) - sd_within ** 2 / 2)))
    return out


def _flat(processes):
    return [t for times in processes for t in times]


def _covers(low, high, value):
    return low is not None and low <= value <= (math.inf if high is None else high)


# ------------------------------------------------------------------------------------------ one row
@pytest.mark.parametrize("counts", [[10] * 5, [3, 5, 8, 12, 20]], ids=["balanced", "unbalanced"])
def test_the_between_process_interval_covers_the_true_speed_and_steps_alone_do_not(counts):
    rng = np.random.default_rng(10)
    truth = IMAGES / STEP_S
    between = within = 0
    for _ in range(SIMULATIONS):
        data = _processes(rng, counts)
        fields = stats.process_fields(data, IMAGES)
        between += _covers(fields["ci95_low"], fields["ci95_high"], truth)
        within += _covers(*stats.ci95(_flat(data), IMAGES), truth)
    # 95 % nominal: 400 datasets put the observed rate within about ±2.2 % of it
    assert 0.90 <= between / SIMULATIONS <= 0.99, between / SIMULATIONS
    # the steps of the same processes, taken as one series, miss the truth most of the time: why a row of
    # one process says its interval is within that process only
    assert within / SIMULATIONS < 0.75, within / SIMULATIONS


def test_balanced_processes_are_a_t_interval_on_their_log_means():
    rng = np.random.default_rng(11)
    data = _processes(rng, [6] * 4)
    means = [float(np.mean(t)) for t in data]
    fields = stats.process_fields(data, IMAGES)
    logs = np.log(means)
    half = 3.182446305284263 * logs.std(ddof=1) / 2  # t(0.975, 3) × sd / sqrt(4)
    assert fields["images_per_sec"] == pytest.approx(IMAGES / math.exp(logs.mean()))  # geometric mean speed
    assert fields["ci95_low"] == pytest.approx(IMAGES / math.exp(logs.mean() + half))
    assert fields["ci95_high"] == pytest.approx(IMAGES / math.exp(logs.mean() - half))
    assert fields["ci_method"] == "between processes (4)" and fields["process_means"] == pytest.approx(means)
    one = stats.process_fields(data[:1], IMAGES)
    assert one["ci_method"] == "within one process" and one["var_between"] is None


def test_the_variance_split_recovers_the_process_effect():
    rng = np.random.default_rng(12)
    est = [stats.process_estimate(_processes(rng, [4, 6, 9, 15, 30, 8], sd_between=0.1, sd_within=0.05))
           for _ in range(SIMULATIONS)]
    # method-of-moments estimates: unbiased before truncation at zero, so their mean sits near the truth
    assert np.mean([e.var_between for e in est]) == pytest.approx(0.1 ** 2, rel=0.3)
    assert np.mean([e.var_within for e in est]) == pytest.approx(0.05 ** 2, rel=0.1)


def test_processes_with_one_step_fall_back_to_their_means():
    est = stats.process_estimate([[0.5], [0.52, 0.51], [0.49]])
    assert est.processes == 3 and est.df == 2 and est.se > 0
    with pytest.raises(ValueError, match="at least two"):
        stats.between_processes([0.5])


# ------------------------------------------------------------------------------------------ two runs
def test_the_comparison_of_processes_covers_the_true_ratio_and_steps_alone_do_not():
    rng = np.random.default_rng(13)
    ratio = 0.9  # the candidate really is 10 % slower
    between = within = 0
    for _ in range(SIMULATIONS):
        a = _processes(rng, [10] * 5)
        b = _processes(rng, [10] * 5, step_s=STEP_S / ratio)
        out = stats.compare_estimates(stats.process_estimate(a), stats.process_estimate(b), IMAGES)
        between += _covers(out["ci_low_pct"], out["ci_high_pct"], 100 * (ratio - 1))
        steps = stats.compare_speed(stats.summary(_flat(a)), stats.summary(_flat(b)), IMAGES)
        within += _covers(steps["ci_low_pct"], steps["ci_high_pct"], 100 * (ratio - 1))
    assert 0.90 <= between / SIMULATIONS <= 0.99, between / SIMULATIONS
    assert within / SIMULATIONS < 0.75, within / SIMULATIONS


def test_a_slowdown_the_size_of_the_mde_is_found_about_80_percent_of_the_time():
    rng = np.random.default_rng(14)
    k, alpha = 5, 0.05
    aa = [stats.compare_estimates(stats.process_estimate(_processes(rng, [10] * k)),
                                  stats.process_estimate(_processes(rng, [10] * k)), IMAGES)
          for _ in range(200)]
    mde = float(np.median([stats.mde_pct(o["se_log"], o["df"], alpha) for o in aa]))
    assert 5 < mde < 30  # 8 % between processes, five of them a side
    found = 0
    for _ in range(SIMULATIONS):
        a = _processes(rng, [10] * k)
        b = _processes(rng, [10] * k, step_s=STEP_S / (1 - mde / 100))
        out = stats.compare_estimates(stats.process_estimate(a), stats.process_estimate(b), IMAGES, alpha=alpha)
        found += out["verdict"] == "slower"
    assert 0.7 <= found / SIMULATIONS <= 0.9, (mde, found / SIMULATIONS)
    assert stats.mde_pct(None, None) is None and stats.mde_pct(0.0, None) == 0.0


def test_holm_adjusts_the_family_and_leaves_out_what_was_not_tested():
    assert stats.holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0] and stats.holm([]) == [] and stats.holm([None]) == [None]


def _aa_false_alarms(draws, rng, k, threshold_pct=5.0, rows=1):
    """How often a family of ``rows`` same-distribution rows (A against A) has a regression after Holm."""
    alarms = 0
    for _ in range(draws):
        outs = [stats.compare_estimates(stats.process_estimate(_processes(rng, [10] * k)),
                                        stats.process_estimate(_processes(rng, [10] * k)), IMAGES)
                for _ in range(rows)]
        adjusted = stats.holm([o["p_value"] for o in outs])
        alarms += any(p < 0.05 and o["delta_pct"] <= -threshold_pct for o, p in zip(outs, adjusted, strict=True))
    return alarms / draws


def test_many_rows_of_one_distribution_raise_no_more_alarms_than_alpha():
    rate = _aa_false_alarms(200, np.random.default_rng(15), k=3, rows=20)
    assert rate <= 0.05, rate


# ------------------------------------------------------------------------------------------ recorded
def _recorded():
    """Per-process mean step times recorded from real runs (fixtures/process_means.json says where)."""
    return json.loads((FIXTURES / "process_means.json").read_text())["sets"]


@pytest.mark.parametrize("name", [s["name"] for s in _recorded()])
def test_the_false_alarm_rate_on_recorded_process_means_is_at_most_five_percent(name):
    """A/A by resampling: the recorded processes of one configuration, split every way into two disjoint
    runs of k processes (or 2000 random splits where there are more), compared as a baseline and a
    candidate at a 5 % threshold; a split called a regression is a false alarm."""
    rec = next(s for s in _recorded() if s["name"] == name)
    means = rec["process_means"]
    k = len(means) // 2
    splits = [(a, [i for i in range(len(means)) if i not in a]) for a in itertools.combinations(range(len(means)), k)]
    rng = np.random.default_rng(16)
    if len(splits) > 2000:
        splits = [splits[i] for i in rng.choice(len(splits), 2000, replace=False)]
    alarms = 0
    for a, b in splits:
        b = b[:k]
        out = stats.compare_estimates(stats.between_processes([means[i] for i in a]),
                                      stats.between_processes([means[i] for i in b]), rec["images_per_step"])
        alarms += out["verdict"] == "slower" and out["delta_pct"] <= -5.0
    assert alarms / len(splits) <= 0.05, (alarms, len(splits))
