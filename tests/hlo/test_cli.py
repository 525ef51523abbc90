"""`resnet-lab ops` and `resnet-lab coverage` speak the one --format vocabulary: a wrong value is the same one
line everywhere, and Markdown prints a table."""

from __future__ import annotations

import pytest
from helpers import assert_usage_error

from resnet_lab import cli

TINY_ARGV = ["--batch-size", "2", "--image-size", "8"]


@pytest.mark.parametrize("argv, allowed", [
    (["ops", "tiny-resnet"], "table, json, csv, markdown"),
    (["coverage", "support.yaml"], "table, json, markdown"),
    (["models"], "table, json, csv, markdown"),
])
def test_a_wrong_format_is_one_line_naming_the_allowed_ones(argv, allowed):
    r = assert_usage_error([*argv, "--format", "x"], f"--format: 'x' is not one of: {allowed}")
    assert r.stdout == ""


def test_ops_prints_markdown(capsys, tmp_path):
    hlo = tmp_path / "step.hlo"
    assert cli.main(["ops", "tiny-resnet", "--format", "markdown", "--out", str(hlo), *TINY_ARGV]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("**tiny-resnet infer before optimization (hlo), platform cpu, batch 2, 8²")
    header = lines.index("| opcode | total | entry | control | fused | applied |")
    assert lines[header + 1] == "| --- | --- | --- | --- | --- | --- |"
    assert any(line.startswith("| convolution | ") for line in lines)
    assert hlo.read_text().startswith("HloModule ")  # --out: the module's text


def test_coverage_prints_markdown(capsys, tmp_path):
    support = tmp_path / "support.yaml"
    support.write_text("ops: [add, convolution, parameter]\n")
    assert cli.main(["coverage", str(support), "--model", "tiny-resnet", "--format", "markdown", *TINY_ARGV]) == 1
    out = capsys.readouterr().out
    assert out.startswith("Not covered: missing ops ") and "\n**Missing ops**\n" in out
    assert "| opcode |" in out and "|" + " --- |" in out
