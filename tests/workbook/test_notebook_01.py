"""01_model_selection under params/quick.yaml: a decision, its selection.json, and a sensitivity table that holds."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from resnet_lab import models
from resnet_lab.hlo import capture
from resnet_lab.selection import criteria


@pytest.fixture(scope="module")
def out(quick_run):
    assert quick_run.statuses["01_model_selection"] == "ok", quick_run.errors.get("01_model_selection")
    return quick_run.run_dir / "01_model_selection"


def test_the_decision_names_a_zoo_model_with_measured_facts(out):
    choice = json.loads((out / "selection.json").read_text())
    chosen = choice["chosen"]
    models.get_spec(chosen["model"])  # a model of the zoo
    assert chosen["trainable_params"] == models.describe(chosen["model"])["trainable_params"]
    assert set(choice["candidates"]) == set(criteria.load_candidates())
    stages = json.loads((out / "parameters.json").read_text())["op_stages"]  # quick.yaml: before only
    for cid, c in choice["candidates"].items():
        m = c["measured"]
        assert m["depth"] > 0 and m["trainable_params"] > 0 and m["forward_macs"] > 0, cid
        assert m["train_before_opcodes"] > 0, cid
        assert (m.get("train_after_opcodes", 0) > 0) == ("after" in stages), cid
        if capture.jax_unavailable_reason() is None:  # StableHLO of the same steps, counted twice, in agreement
            assert 0 < m["infer_stablehlo_ops"] < m["train_stablehlo_ops"], cid
            assert m["infer_stablehlo_walk_agrees"] and m["train_stablehlo_walk_agrees"], cid
        assert m["train_status"] == "ok" and m["train_images_per_sec"] > 0, cid
        assert m["infer_status"] == "ok" and m["infer_images_per_sec"] > 0, cid
    assert "convolution" in chosen["ops"]["train/before"]
    md = (out / "selection.md").read_text()
    assert "StableHLO ops (infer/train)" in md
    assert chosen["model"] in md and "## Reproduce" in md and choice["provenance"]["git"]["commit"][:10] in md


def test_2017_candidates_alone_reproduce_the_2017_decision(out):
    assert json.loads((out / "results.json").read_text())["winner_2017_candidates"] == "v1_tf_benchmarks"


def test_changing_a_weight_flips_where_the_sensitivity_table_says(out):
    results = json.loads((out / "results.json").read_text())
    matrix = pd.read_csv(out / "decision_matrix.csv").set_index("candidate")
    scores = matrix[list(criteria.CRITERIA)]
    weights = results["weights"]
    assert criteria.rank(scores, weights).index[0] == results["chosen_candidate"]
    assert results["flips"], "the default weights have at least one flip (code_cleanliness → CIFAR v2)"
    for flip in results["flips"]:
        factor = 1.01 if flip["change"] == "raise above" else 0.99
        changed = dict(weights, **{flip["criterion"]: flip["threshold"] * factor})
        assert criteria.rank(scores, changed).index[0] == flip["new_winner"]
