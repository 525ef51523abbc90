"""`resnet-lab models`: the zoo as a table or JSON, and bad names rejected before TensorFlow is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from resnet_lab import cli
from resnet_lab.models import describe, list_models

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(autouse=True)
def only_models_command(monkeypatch):
    # build_parser() imports every registered subcommand; test this one alone so that a sibling module
    # (runner, peak) that is missing or broken in this checkout does not fail these tests.
    assert cli.COMMANDS["models"][0] == "resnet_lab.models.cli"
    monkeypatch.setattr(cli, "COMMANDS", {"models": cli.COMMANDS["models"]})


def test_table_lists_every_model(capsys):
    assert cli.main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["name", "family", "version", "depth"]
    assert [line.split()[0] for line in lines[1:]] == list_models()
    assert "25.56" in lines[1 + list_models().index("resnet50")]


def test_json_is_the_describe_table(capsys):
    assert cli.main(["models", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == list_models()
    for key in ("name", "family", "version", "depth", "trainable_params", "forward_macs", "input_shape",
                "num_classes"):
        assert all(key in row for row in rows)
    assert rows[list_models().index("resnet50")] == describe("resnet50")


def test_json_for_chosen_names(capsys):
    assert cli.main(["models", "resnet50_v2", "cifar_resnet20", "--format", "json"]) == 0
    assert [row["name"] for row in json.loads(capsys.readouterr().out)] == ["resnet50_v2", "cifar_resnet20"]


def test_bad_name_is_a_one_line_usage_error(capsys):
    assert cli.main(["models", "resnet50", "resnet51"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing printed for the good name before the bad one is found
    assert captured.err.count("\n") == 1 and "unknown model 'resnet51'" in captured.err
    assert "cifar_resnet1001_v2" in captured.err


def test_listing_and_bad_names_never_import_tensorflow():
    code = (
        "import sys\n"
        "from resnet_lab import cli\n"
        "cli.COMMANDS = {'models': cli.COMMANDS['models']}\n"
        "assert cli.main(['models', '--format', 'json']) == 0\n"
        "assert cli.main(['models', 'resnet51']) == 2\n"
        "heavy = [m for m in ('tensorflow', 'keras', 'jax', 'torch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "unknown model 'resnet51'" in result.stderr
