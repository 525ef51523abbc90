"""Notebook 04's view: the recipe beside the paper's, the published figures, this run against them."""

from __future__ import annotations

from pathlib import Path

import pytest

from resnet_lab.convergence import train
from resnet_lab.report import convergence


def test_published_table():
    table = convergence.published_table()
    assert len(table) == 9 and table["source"].notna().all()
    row = table.set_index("model").loc["cifar_resnet56"]
    assert row["published_accuracy_pct"] == pytest.approx(93.03) and row["error_pct"] == pytest.approx(6.97)


def test_recipe_table_marks_what_departs_from_the_paper():
    recipe = convergence.recipe_table(train.TrainConfig(model="cifar_resnet20", data="digits", steps=300))
    same = recipe.set_index("setting")["same"]
    assert not same["data"] and not same["steps"] and same["momentum"] and same["weight_decay"]
    assert list(recipe.columns) == ["setting", "this run", "paper", "same", "note"]


def test_comparison_table_holds_the_run_against_the_published_figure():
    cfg = train.TrainConfig()  # the paper's recipe, ResNet-56 on CIFAR-10
    result = train.TrainResult(
        config=cfg, out=Path("."), step=cfg.steps, finished=True, optimizer_iterations=cfg.steps,
        test_accuracy=0.9290, test_loss=0.3, evaluated_at=cfg.steps, resumed_from=None, train_seconds=1.0,
        images_per_second=None, history_path=Path("history.csv"), checkpoint=None, data={}, parameters=1)
    row = convergence.comparison_table(result).iloc[0]
    assert (row["test_accuracy_pct"], row["published_accuracy_pct"]) == (92.9, 93.03)
    assert row["status"] == "reproduced" and row["delta_pp"] == pytest.approx(-0.13)
