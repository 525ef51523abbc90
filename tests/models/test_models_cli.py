"""`resnet-lab models`: the zoo as a table or JSON, and bad names rejected before TensorFlow is imported."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import assert_usage_error, run_cli

from resnet_lab import cli
from resnet_lab.models import describe, list_models

SRC = Path(__file__).resolve().parents[2] / "src"


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


def test_bad_name_is_a_one_line_usage_error_before_any_framework():
    r = assert_usage_error(["models", "resnet50", "resnet51"], "model: 'resnet51' is not one of: resnet18, ")
    assert r.stdout == ""  # nothing printed for the good name before the bad one is found
    assert "cifar_resnet1001_v2" in r.stderr


def test_listing_never_imports_a_framework():
    r = run_cli("models", "--format", "json")
    assert r.returncode == 0 and r.heavy == []
    assert [row["name"] for row in json.loads(r.stdout)] == list_models()


def test_markdown_and_csv_are_the_table_s_columns(capsys):
    assert cli.main(["models", "tiny-resnet", "resnet50", "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| name | family | version | depth |") and lines[1].startswith("| --- | --- |")
    assert lines[2].startswith("| tiny-resnet | ") and "| 25.56 |" in lines[3] and len(lines) == 4
    assert cli.main(["models", "tiny-resnet", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("name,family,version,depth,") and lines[1].startswith("tiny-resnet,") and len(lines) == 2
