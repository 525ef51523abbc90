"""Every path argument of every command is checked for its kind first: one line, exit 2, before any framework."""

from __future__ import annotations

import pytest
from helpers import assert_usage_error

from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path


@pytest.fixture
def places(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "folder").mkdir()
    return tmp_path


def test_each_kind_accepts_the_right_thing(places):
    assert check_path("--x", places / "a.json", "file") == places / "a.json"
    assert check_path("--x", places / "folder", "dir") == places / "folder"
    assert check_path("--x", places / "new" / "deeper", "out-dir") == places / "new" / "deeper"
    assert check_path("--x", places / "folder" / "out.txt", "out-file") == places / "folder" / "out.txt"
    assert check_path("--x", None, "file") is None and check_path("--x", "", "dir") is None


@pytest.mark.parametrize("rel, kind, message", [
    ("absent.json", "file", "--x: '{p}' does not exist (a file to read)"),
    ("folder", "file", "--x: '{p}' is a folder, not a file (a file to read)"),
    ("a.json", "dir", "--x: '{p}' is a file, not a folder (a folder to read)"),
    ("absent", "dir", "--x: '{p}' does not exist (a folder to read)"),
    ("a.json", "out-dir", "--x: '{p}' is a file, not a folder (a folder to write into)"),
    ("folder", "out-file", "--x: '{p}' is a folder, not a file (a file to write)"),
    ("a.json/run", "out-dir", "--x: '{p}' cannot be made: '{base}/a.json' is a file"),
    ("a.json/deeper/f.csv", "out-file", "--x: '{p}' cannot be made: '{base}/a.json' is a file"),
])
def test_each_mistake_is_one_line_naming_option_path_and_kind(places, rel, kind, message):
    p = places / rel
    with pytest.raises(UsageError) as e:
        check_path("--x", p, kind)
    assert str(e.value) == message.format(p=p, base=places)


def test_a_required_path_left_empty():
    with pytest.raises(UsageError, match=r"--out: a path is required \(a folder to write into\)"):
        check_path("--out", None, "out-dir", optional=False)


def test_every_command_checks_its_paths_first(places):
    """One mistake per path argument, through the command line: exit 2, one line, no framework imported."""
    f, d = str(places / "a.json"), str(places / "folder")
    under_file = str(places / "a.json" / "x")
    absent = str(places / "absent")
    cases = [
        (["run", absent], "params: '" + absent + "' does not exist (a file to read)"),
        (["run", f, "--out", under_file], "cannot be made"),
        (["run", f, "--notebooks", f], "--notebooks: '" + f + "' is a file, not a folder"),
        (["bench", "--peak-file", d], "--peak-file: '" + d + "' is a folder, not a file"),
        (["bench", "--out", f], "--out: '" + f + "' is a file, not a folder"),
        (["bench", "--export-dir", under_file], "--export-dir: '" + under_file + "' cannot be made"),
        (["peak", "--out", d], "--out: '" + d + "' is a folder, not a file"),
        (["ops", "tiny-resnet", "--out", d], "--out: '" + d + "' is a folder, not a file"),
        (["coverage", absent], "SUPPORT.yaml: '" + absent + "' does not exist"),
        (["compare", absent, d], "BASELINE: '" + absent + "' does not exist"),
        (["compare", d, f], "CANDIDATE: '" + f + "' is a file, not a folder"),
        (["compare", d, d, "--out", f], "--out: '" + f + "' is a file, not a folder"),
        (["history", f], "OUTPUTS_DIR: '" + f + "' is a file, not a folder"),
        (["cache", "--outputs", absent], "--outputs: '" + absent + "' does not exist"),
        (["train", "--out", f], "--out: '" + f + "' is a file, not a folder"),
        (["gpu-run", "--out", under_file], "cannot be made"),
        (["gpu-run", "--out", d, "--logs", f], "--logs: '" + f + "' is a file, not a folder"),
    ]
    for args, message in cases:
        assert_usage_error(args, message)
