"""Notebook 01's method: the criteria and their weights, each candidate's scores, the ranking and its sensitivity.

The candidates and their documented facts (published accuracy, benchmark alignment, code quality, with
sources) live in ``data/candidates.yaml``. Measured facts (depth, parameters, MACs, HLO opcodes of a
training step, throughput) come from :mod:`resnet_lab.selection.measure`. Every criterion is a score in
[0, 1]; the total is the weighted mean; the sensitivity table says which single weight change would change
the winner, and to whom.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from resnet_lab.core.choices import STAGES, check_choices, check_keys
from resnet_lab.core.errors import UsageError

# criterion -> (kind, what it means). "documented" scores come from data/candidates.yaml.
CRITERIA: dict[str, tuple[str, str]] = {
    "is_resnet50": ("measured", "the representative model has 50 layers (the original requirement)"),
    "benchmark_alignment": ("documented", "what the benchmark suites (then TF benchmarks, now MLPerf) run"),
    "code_cleanliness": ("documented", "how much clean-up the reference code needs"),
    "published_accuracy": ("documented", "a published accuracy to check convergence against"),
    "backend_simplicity": ("measured", "fewest distinct HLO opcodes in a training step (min / own)"),
    "efficiency": ("measured", "training MFU on this host relative to the best candidate"),
}
# The 2017 reasoning: being ResNet-50 and matching the benchmark team came first, clean code and a
# published accuracy second; the measured criteria are shown but carry no weight unless asked.
DEFAULT_WEIGHTS: dict[str, float] = {
    "is_resnet50": 3.0, "benchmark_alignment": 2.0, "code_cleanliness": 1.0, "published_accuracy": 1.0,
    "backend_simplicity": 0.0, "efficiency": 0.0,
}
CANDIDATES_2017 = ("v1_tf_benchmarks", "v2_tf_models_cifar")  # the two the 2017 note chose between


def load_candidates() -> dict[str, dict[str, Any]]:
    """The documented candidates (``data/candidates.yaml``), keyed by candidate id."""
    import yaml

    text = resources.files("resnet_lab").joinpath("data/candidates.yaml").read_text()
    return yaml.safe_load(text)["candidates"]


def validate_op_stages(stages: Sequence[str]) -> tuple[str, ...]:
    """The HLO stages 01 captures per candidate: ``before`` always (the backend-simplicity criterion counts
    the training step's opcodes as the framework emits them), ``after`` (XLA's optimized module) optionally:
    its counts are shown beside, and compiling it costs more than the rest of the capture."""
    stages = tuple(check_choices("op_stages", stages, STAGES))
    if "before" not in stages:
        raise UsageError("op_stages: 'before' is required (the criterion counts the training step before "
                         f"optimization); got {list(stages)}")
    return stages


def validate_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Known criteria only, non-negative, not all zero. Missing criteria get weight 0."""
    check_keys("weights", weights, CRITERIA)
    out = {c: float(weights.get(c, 0.0)) for c in CRITERIA}
    bad = {c: w for c, w in out.items() if not math.isfinite(w) or w < 0}
    if bad:
        raise UsageError(f"weights must be finite and >= 0, got {bad}")
    if not any(out.values()):
        raise UsageError("at least one criterion needs a weight > 0")
    return out


def score_table(candidates: Mapping[str, Mapping[str, Any]], measured: Mapping[str, Mapping[str, Any]]):
    """Scores in [0, 1]: one row per candidate, one column per criterion.

    Args:
        candidates: documented facts (:func:`load_candidates`).
        measured: per candidate id, ``depth``, ``train_opcodes`` (distinct HLO opcodes of a training step)
            and ``train_mfu`` (may be None/NaN where it was not measured).
    """
    import pandas as pd

    rows = {}
    for cid, doc in candidates.items():
        m = measured.get(cid, {})
        rows[cid] = {
            "is_resnet50": 1.0 if m.get("depth") == 50 else 0.0,
            **{c: float(doc["scores"][c]["value"]) for c, (kind, _) in CRITERIA.items() if kind == "documented"},
        }
    table = pd.DataFrame.from_dict(rows, orient="index")

    def ratio(key: str, lower_is_better: bool) -> pd.Series:
        values = pd.Series({cid: _num(measured.get(cid, {}).get(key)) for cid in candidates}, dtype=float)
        if values.isna().all():
            return values
        best = values.min() if lower_is_better else values.max()
        return (best / values) if lower_is_better else (values / best)

    table["backend_simplicity"] = ratio("train_opcodes", lower_is_better=True)
    table["efficiency"] = ratio("train_mfu", lower_is_better=False)
    return table[list(CRITERIA)]


def _num(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def rank(scores, weights: Mapping[str, float]):
    """Weighted mean score per candidate, best first, with a 1-based ``rank`` column.

    A criterion with weight > 0 must be scored for every candidate (a missing measurement is an error,
    not a silent zero); criteria with weight 0 are ignored.
    """
    w = validate_weights(weights)
    used = [c for c in CRITERIA if w[c] > 0]
    missing = [c for c in used if scores[c].isna().any()]
    if missing:
        raise UsageError(f"criteria {missing} have weight > 0 but were not measured for every candidate")
    total = sum(scores[c] * w[c] for c in used) / sum(w[c] for c in used)
    out = scores.assign(total=total).sort_values("total", ascending=False, kind="stable")
    out["rank"] = range(1, len(out) + 1)
    return out


@dataclasses.dataclass(frozen=True)
class Flip:
    criterion: str
    weight: float                 # its current weight
    threshold: float              # the weight at which the winner changes
    direction: str                # "raise above" | "lower below"
    new_winner: str


def sensitivity(scores, weights: Mapping[str, float], rel_eps: float = 1e-6) -> list[Flip]:
    """For each criterion, the nearest single-weight change (up and down) that changes the winner.

    With the other weights fixed, candidate totals are linear in one weight over a common denominator, so
    the crossing point with each challenger is exact: w* = (S_a - S_b) / (s_b - s_a), where S is the
    weighted sum of the other criteria and s the score on this one. Each flip is verified by re-ranking
    just past w*; criteria whose change can never flip the winner are absent.
    """
    w = validate_weights(weights)
    ranked = rank(scores, w)
    winner = ranked.index[0]
    flips: list[Flip] = []
    for c in CRITERIA:
        if scores[c].isna().any():
            continue
        others = [k for k in CRITERIA if k != c and w[k] > 0]
        if any(scores[k].isna().any() for k in others):
            continue
        rest = {cid: sum(scores.loc[cid, k] * w[k] for k in others) for cid in scores.index}
        best: dict[str, tuple[float, str]] = {}
        for challenger in scores.index:
            if challenger == winner:
                continue
            slope = scores.loc[challenger, c] - scores.loc[winner, c]
            if slope == 0:
                continue
            threshold = (rest[winner] - rest[challenger]) / slope
            if threshold < 0 or math.isclose(threshold, w[c]):
                continue
            direction = "raise above" if threshold > w[c] else "lower below"
            if direction == "lower below" and slope > 0:
                continue
            if direction == "raise above" and slope < 0:
                continue
            distance = abs(threshold - w[c])
            if direction not in best or distance < abs(best[direction][0] - w[c]):
                best[direction] = (threshold, challenger)
        for direction, (threshold, _) in best.items():
            step = max(abs(threshold), 1.0) * rel_eps * 10
            probe = threshold + step if direction == "raise above" else max(threshold - step, 0.0)
            trial = dict(w, **{c: probe})
            if not any(trial.values()):
                continue
            new_winner = rank(scores, trial).index[0]
            if new_winner != winner:
                flips.append(Flip(c, w[c], threshold, direction, new_winner))
    return flips


def sensitivity_table(scores, weights: Mapping[str, float]):
    """:func:`sensitivity` as a DataFrame, one row per criterion and direction (all criteria listed)."""
    import pandas as pd

    flips = {(f.criterion, f.direction): f for f in sensitivity(scores, weights)}
    w = validate_weights(weights)
    rows = []
    for c in CRITERIA:
        found = [f for (crit, _), f in flips.items() if crit == c]
        if not found:
            rows.append({"criterion": c, "weight": w[c], "change": "none flips the winner",
                         "threshold": math.nan, "new_winner": ""})
        for f in found:
            rows.append({"criterion": c, "weight": f.weight, "change": f.direction,
                         "threshold": f.threshold, "new_winner": f.new_winner})
    return pd.DataFrame(rows)


def rank_2017(scores, weights: Mapping[str, float]):
    """:func:`rank` of the two candidates of 2017 alone: does the method reproduce the 2017 decision?"""
    return rank(scores.loc[list(CANDIDATES_2017)], weights)
