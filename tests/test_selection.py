from __future__ import annotations

import math

import pytest

from resnet_lab import selection
from resnet_lab.core.errors import UsageError

MEASURED = {
    "v1_tf_benchmarks": {"depth": 50, "train_opcodes": 30, "train_mfu": 0.40},
    "v2_tf_models_cifar": {"depth": 110, "train_opcodes": 28, "train_mfu": 0.20},
    "v1_5_model_garden": {"depth": 50, "train_opcodes": 30, "train_mfu": 0.38},
}


@pytest.fixture(scope="module")
def scores():
    return selection.score_table(selection.load_candidates(), MEASURED)


def test_documented_candidates_have_sources_and_scores_in_range():
    cands = selection.load_candidates()
    assert set(cands) == {"v1_tf_benchmarks", "v2_tf_models_cifar", "v1_5_model_garden"}
    for doc in cands.values():
        assert doc["representative"] in doc["models"]
        assert doc["published_accuracy"]["source"] and doc["convergence_tested"]["source"]
        for crit, (kind, _) in selection.CRITERIA.items():
            if kind == "documented":
                assert 0 <= doc["scores"][crit]["value"] <= 1 and doc["scores"][crit]["why"]


def test_scores(scores):
    assert scores.loc["v2_tf_models_cifar", "is_resnet50"] == 0.0
    assert scores.loc["v1_5_model_garden", "is_resnet50"] == 1.0
    assert scores.loc["v2_tf_models_cifar", "backend_simplicity"] == 1.0
    assert math.isclose(scores.loc["v1_tf_benchmarks", "backend_simplicity"], 28 / 30)
    assert scores.loc["v1_tf_benchmarks", "efficiency"] == 1.0
    assert ((scores >= 0) & (scores <= 1)).all().all()


def test_default_weights_rank(scores):
    ranked = selection.rank(scores, selection.DEFAULT_WEIGHTS)
    assert list(ranked["rank"]) == [1, 2, 3]
    assert ranked.index[0] == "v1_5_model_garden"
    assert ranked["total"].is_monotonic_decreasing


def test_every_flip_in_the_sensitivity_table_really_flips(scores):
    weights = selection.DEFAULT_WEIGHTS
    winner = selection.rank(scores, weights).index[0]
    flips = selection.sensitivity(scores, weights)
    assert flips, "with these scores some weight change must flip the winner"
    for f in flips:
        up = f.direction == "raise above"
        past = f.threshold * (1.001 if up else 0.999)
        before = f.threshold * (0.999 if up else 1.001)
        assert selection.rank(scores, dict(weights, **{f.criterion: past})).index[0] == f.new_winner != winner
        assert selection.rank(scores, dict(weights, **{f.criterion: before})).index[0] == winner


def test_cleanliness_alone_can_flip_to_the_cifar_family(scores):
    flips = {(f.criterion, f.direction): f for f in selection.sensitivity(scores, selection.DEFAULT_WEIGHTS)}
    f = flips[("code_cleanliness", "raise above")]
    assert f.new_winner == "v2_tf_models_cifar"
    # v1.5 leads by 5 weighted points on the others; the CIFAR family gains 0.1 per unit of this weight.
    assert math.isclose(f.threshold, 50.0)


def test_no_flip_where_the_winner_dominates(scores):
    table = selection.sensitivity_table(scores, selection.DEFAULT_WEIGHTS)
    row = table[table.criterion == "benchmark_alignment"]
    assert list(row.change) == ["none flips the winner"]


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"beauty": 1.0}, "weights: unknown key"),
        ({"is_resnet50": -1.0}, "must be finite and >= 0"),
        ({"is_resnet50": 0.0}, "at least one criterion"),
    ],
)
def test_bad_weights(weights, message):
    with pytest.raises(UsageError, match=message):
        selection.validate_weights(weights)


def test_op_stages_need_before_and_know_only_the_two_stages():
    assert selection.validate_op_stages(["before"]) == ("before",)
    assert selection.validate_op_stages(["before", "after"]) == ("before", "after")
    with pytest.raises(UsageError, match=r"op_stages: 'before' is required .* got \['after'\]"):
        selection.validate_op_stages(["after"])
    with pytest.raises(UsageError, match="op_stages: 'optimized' is not one of: before, after"):
        selection.validate_op_stages(["before", "optimized"])


def test_unmeasured_criterion_with_weight_is_an_error():
    measured = {k: dict(v, train_mfu=None) for k, v in MEASURED.items()}
    scores = selection.score_table(selection.load_candidates(), measured)
    assert scores["efficiency"].isna().all()
    selection.rank(scores, selection.DEFAULT_WEIGHTS)  # efficiency has weight 0: fine
    with pytest.raises(UsageError, match="not measured"):
        selection.rank(scores, dict(selection.DEFAULT_WEIGHTS, efficiency=1.0))


def test_the_2017_candidates_alone_and_the_recorded_headline(scores, tmp_path):
    candidates = selection.load_candidates()
    ranked = selection.rank(scores, selection.DEFAULT_WEIGHTS)
    ranked_2017 = selection.rank_2017(scores, selection.DEFAULT_WEIGHTS)
    assert list(ranked_2017.index) == ["v1_tf_benchmarks", "v2_tf_models_cifar"]  # the 2017 decision
    sens = selection.sensitivity_table(scores, selection.DEFAULT_WEIGHTS)
    chosen = candidates[ranked.index[0]]["representative"]
    op_rows = [{"model": chosen, "mode": "train", "stage": "before", "opcodes": {"convolution": 3}},
               {"model": "cifar_resnet56", "mode": "train", "stage": "before", "opcodes": {"add": 1}}]
    record = selection.write_record(tmp_path, candidates, MEASURED, ranked, sens, selection.DEFAULT_WEIGHTS, op_rows)
    assert record["chosen"]["ops"] == {"train/before": {"convolution": 3}}  # the winner's opcodes only
    assert (tmp_path / "selection.md").read_text() == selection.render_markdown(record)
    head = selection.headline(record, ranked, sens, ranked_2017)
    assert head["chosen_candidate"] == ranked.index[0] and head["chosen_model"] == chosen
    assert head["winner_2017_candidates"] == "v1_tf_benchmarks"
    assert "code_cleanliness" in {f["criterion"] for f in head["flips"]}
    assert all(f["new_winner"] for f in head["flips"])  # only the weight changes that flip the winner
