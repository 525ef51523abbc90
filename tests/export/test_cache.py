"""The exported model's content-addressed cache: one entry per model, size and environment, named in the run
folder, listed and pruned by `resnet-lab cache`."""

from __future__ import annotations

import json
import os
import time

from helpers import assert_usage_error, run_cli

from resnet_lab import export
from resnet_lab.core import requirements


def test_the_key_is_stable_and_moves_with_what_determines_the_files(monkeypatch):
    key = export.cache_key("tiny-resnet", 32)
    assert key == export.cache_key("tiny-resnet", 32) and len(key) == 16
    assert key != export.cache_key("tiny-resnet", 64) and key != export.cache_key("resnet50_v1.5", 32)
    real = requirements.installed
    monkeypatch.setattr(requirements, "installed", lambda d: "9.9" if d == "torch" else real(d))
    assert export.cache_key("tiny-resnet", 32) != key  # another exporter version: another entry


def test_by_default_the_export_is_a_cache_entry_and_a_run_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RESNET_LAB_OUTPUTS", str(tmp_path / "outputs"))
    where = export.folder(None, "tiny-resnet", 32)
    assert where.parent == tmp_path / "outputs" / "cache" / "export"
    assert where.name == f"tiny-resnet-32px-seed0-{export.cache_key('tiny-resnet', 32)}"
    assert export.folder(tmp_path / "mine", "tiny-resnet", 32) == tmp_path / "mine" / "tiny-resnet-32px-seed0"
    # a folder with every piece already there is reused, not made again, and the run records it
    where.mkdir(parents=True)
    for name in (export.reference_file(2), export.stablehlo_file(2), export.ONNX, export.PHOTOS):
        (where / name).write_text("x")
    (where / export.MANIFEST).write_text(json.dumps({"reference": {"2": {}}, "stablehlo": {"2": {}},
                                                         "onnx": {"made": True}}))
    run = tmp_path / "outputs" / "runs" / "r1"
    run.mkdir(parents=True)
    monkeypatch.setenv("RESNET_LAB_RUN_DIR", str(run))

    def make(*args, **kwargs):
        raise AssertionError(f"made again: {export.missing(where, [2], True)}")

    monkeypatch.setattr(export, "_make", make)
    assert export.ensure(None, "tiny-resnet", 32, [2]) == where
    assert (where / export.ONNX).read_text() == "x"  # kept as it was
    used = json.loads((run / export.USED).read_text())
    assert used[where.name]["key"] == export.cache_key("tiny-resnet", 32) and used[where.name]["path"] == str(where)


def _entry(root, name: str, days_old: float, size: int = 1000):
    d = root / "outputs" / "cache" / "export" / name
    d.mkdir(parents=True)
    f = d / "weights.weights.h5"
    f.write_bytes(b"0" * size)
    then = time.time() - days_old * 86400
    os.utime(f, (then, then))
    return d


def test_the_cli_lists_and_prunes_by_age_and_count(tmp_path):
    old = _entry(tmp_path, "tiny-resnet-32px-seed0-aaaaaaaaaaaaaaaa", 30)
    mid = _entry(tmp_path, "tiny-resnet-32px-seed0-bbbbbbbbbbbbbbbb", 5)
    new = _entry(tmp_path, "resnet50_v1.5-224px-seed0-cccccccccccccccc", 0)
    outputs = str(tmp_path / "outputs")
    r = run_cli("cache", "--outputs", outputs, "--format", "json")
    listed = json.loads(r.stdout)
    assert r.returncode == 0 and [e["key"] for e in listed["entries"]] == ["c" * 16, "b" * 16, "a" * 16]
    r = run_cli("cache", "--outputs", outputs, "--older-than", "14")
    assert r.returncode == 0 and r.stdout.startswith("removed 1 entry") and not old.exists() and mid.exists()
    r = run_cli("cache", "--outputs", outputs, "--keep", "1", "--format", "markdown")
    assert r.returncode == 0 and not mid.exists() and new.exists() and "| resnet50_v1.5 | 224 | " + "c" * 16 in r.stdout


def test_bad_cache_arguments_are_one_line(tmp_path):
    assert_usage_error(["cache", "--keep", "-1"], "--keep: -1 is not an integer >= 0")
    assert_usage_error(["cache", "--older-than", "0"], "--older-than: 0.0 is not a number > 0 days")
    assert_usage_error(["cache", "--outputs", str(tmp_path / "absent")], "does not exist (a folder to read)")
    assert_usage_error(["cache", "--format", "csv"], "--format: 'csv' is not one of: table, json, markdown")
