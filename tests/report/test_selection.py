"""Notebook 01's view: the facts as tables, the contributions as a plot, the decision as ``selection.md``."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from resnet_lab.report import selection as report
from resnet_lab.selection import criteria, decision, measure

MEASURED = {
    "v1_tf_benchmarks": {"model": "resnet50_v1", "depth": 50, "train_opcodes": 30, "train_mfu": 0.40,
                         "train_before_opcode_set": ["add", "convolution"]},
    "v2_tf_models_cifar": {"model": "cifar_resnet110_v2", "depth": 110, "train_opcodes": 28, "train_mfu": 0.20,
                           "train_before_opcode_set": ["convolution", "select"]},
    "v1_5_model_garden": {"model": "resnet50_v1.5", "depth": 50, "train_opcodes": 30, "train_mfu": 0.38,
                          "train_before_opcode_set": ["add", "convolution"]},
}


def test_the_decision_as_markdown(tmp_path):
    candidates = criteria.load_candidates()
    scores = criteria.score_table(candidates, MEASURED)
    ranked = criteria.rank(scores, criteria.DEFAULT_WEIGHTS)
    sens = criteria.sensitivity_table(scores, criteria.DEFAULT_WEIGHTS)
    chosen = candidates[ranked.index[0]]["representative"]
    choice = decision.build_decision(candidates, MEASURED, ranked, sens, criteria.DEFAULT_WEIGHTS,
                                     {"train/before": {"convolution": 3}},
                                     {"host": "h", "git": {"commit": "0123456789abc", "dirty": True}})
    md = report.write_markdown(tmp_path, choice)
    assert md == (tmp_path / "selection.md").read_text() == report.render_markdown(choice)
    assert md.startswith(f"# Selected model: `{chosen}`") and "commit `0123456789` dirty" in md
    assert "- code_cleanliness: raise above 50 (now 1) → v2_tf_models_cifar wins" in md
    assert "- train/before: convolution 3" in md and "## Reproduce" in md


def test_the_facts_as_tables_and_the_contributions_as_bars():
    candidates = criteria.load_candidates()
    documented = report.documented_frame(candidates)
    assert list(documented.index) == list(candidates) and "code_cleanliness score" in documented.columns
    measured = report.measured_frame(MEASURED)
    assert list(measured.columns) == list(report.MEASURED_COLUMNS.values())
    assert measured.loc["v2_tf_models_cifar", "depth"] == 110
    ranked = criteria.rank(criteria.score_table(candidates, MEASURED), criteria.DEFAULT_WEIGHTS)
    ax = report.plot_contributions(ranked, criteria.DEFAULT_WEIGHTS)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        c for c, w in criteria.DEFAULT_WEIGHTS.items() if w > 0]


def test_the_opcodes_of_one_candidate_alone_as_a_sentence():
    only = measure.unique_ops(MEASURED)
    assert only == {"v1_tf_benchmarks": [], "v2_tf_models_cifar": ["select"], "v1_5_model_garden": []}
    assert report.describe_unique_ops(only) == "v1_tf_benchmarks: none; v2_tf_models_cifar: `select`; " \
        "v1_5_model_garden: none."
