"""Measured facts of the three candidates, as notebook 01's measurement would give them, and their scores."""

from __future__ import annotations

import pytest

from resnet_lab.selection import criteria

MEASURED = {
    "v1_tf_benchmarks": {"depth": 50, "train_opcodes": 30, "train_mfu": 0.40},
    "v2_tf_models_cifar": {"depth": 110, "train_opcodes": 28, "train_mfu": 0.20},
    "v1_5_model_garden": {"depth": 50, "train_opcodes": 30, "train_mfu": 0.38},
}


@pytest.fixture(scope="session")
def measured():
    return MEASURED


@pytest.fixture(scope="session")
def scores():
    return criteria.score_table(criteria.load_candidates(), MEASURED)
