"""Notebook 01's decision: ``selection.json`` names the winner with its opcodes, ``results.json`` the headline."""

from __future__ import annotations

import json

from resnet_lab.selection import criteria, decision


def test_the_decision_and_the_recorded_headline(measured, scores, tmp_path):
    candidates = criteria.load_candidates()
    ranked = criteria.rank(scores, criteria.DEFAULT_WEIGHTS)
    ranked_2017 = criteria.rank_2017(scores, criteria.DEFAULT_WEIGHTS)
    sens = criteria.sensitivity_table(scores, criteria.DEFAULT_WEIGHTS)
    chosen = candidates[ranked.index[0]]["representative"]
    op_rows = [{"model": chosen, "mode": "train", "stage": "before", "opcodes": {"convolution": 3}},
               {"model": "cifar_resnet56", "mode": "train", "stage": "before", "opcodes": {"add": 1}}]
    choice = decision.write_decision(tmp_path, candidates, measured, ranked, sens, criteria.DEFAULT_WEIGHTS, op_rows)
    assert choice["chosen"]["ops"] == {"train/before": {"convolution": 3}}  # the winner's opcodes only
    assert json.loads((tmp_path / "selection.json").read_text()) == json.loads(json.dumps(choice))
    head = decision.headline(choice, ranked, sens, ranked_2017)
    assert head["chosen_candidate"] == ranked.index[0] and head["chosen_model"] == chosen
    assert head["winner_2017_candidates"] == "v1_tf_benchmarks"
    assert "code_cleanliness" in {f["criterion"] for f in head["flips"]}
    assert all(f["new_winner"] for f in head["flips"])  # only the weight changes that flip the winner
