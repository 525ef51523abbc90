"""resnet_lab.hlo.plan: notebook 02's captures run in one call each and their records written."""

from __future__ import annotations

import json

import pandas as pd

from resnet_lab.core import requirements
from resnet_lab.hlo import capture, plan

ROW = {"model": "r20", "backend": "tensorflow", "mode": "infer", "stage": "before", "platform": "cpu",
       "precision": "fp32", "opcodes": {"add": 2, "convolution": 3},
       "opcodes_by_role": {"entry": {"add": 2, "convolution": 3}, "control": {}, "fused": {}, "applied": {}},
       "origins": [{"opcode": "add"}]}
SKIPPED = {"model": "r20", "backend": "jax", "mode": "infer", "stage": "before", "platform": "cpu",
           "skipped": "no JAX here", "opcodes": {}}


def test_capture_all_runs_the_captures_and_writes_their_records(tmp_path, monkeypatch):
    calls = []

    def start_portable(models, irs, **kw):
        calls.append(("portable started", list(models), kw["export_dir"]))
        return lambda: calls.append(("portable read",)) or [{"model": "r20", "ir": "tflite", "skipped": "x"}]

    def capture_matrix(models, **kw):
        calls.append(("matrix", models, kw["origins_for"]))
        kw["stablehlo_records"].append({"model": "r20", "ir": "stablehlo"})
        return [ROW, SKIPPED]

    monkeypatch.setattr(capture, "start_portable", start_portable)
    monkeypatch.setattr(capture, "capture_matrix", capture_matrix)
    out = tmp_path / "02"
    out.mkdir()
    got = plan.capture_all(out, "r20", ["r56", "r20"], modes=["infer"], stages=["before"], platforms=["cpu"],
                           backends=["tensorflow", "jax"], irs=["hlo", "stablehlo", "tflite"], batch_size=2,
                           image_size=0, precision="fp32")
    assert calls == [("portable started", ["r20"], None), ("matrix", ["r20", "r56"], ["r20"]),
                     ("portable read",)]  # the focus model first, once; Core ATen's process beside XLA's
    assert got.captured_all == [ROW] and got.captured == [ROW] and got.stable == [{"model": "r20", "ir": "stablehlo"}]
    inventories = json.loads((out / "inventories.json").read_text())
    assert [r.get("skipped") for r in inventories] == [None, "no JAX here"] and "origins" not in inventories[0]
    assert json.loads((out / "origins_r20.json").read_text())[0]["origins"] == ROW["origins"]
    assert json.loads((out / "portable_irs.json").read_text())[0]["ir"] == "tflite"
    long = pd.read_csv(out / "opcodes_long.csv")
    assert list(long["opcode"]) == ["add", "convolution"] and list(long["entry"]) == [2, 3]


def test_no_fit_dump_when_not_asked():
    assert plan.fit_dump(None, "r20", run=False, batch_size=2, image_size=8, precision="fp32") is None


def test_iree_train_not_asked_or_not_installed(monkeypatch):
    assert plan.iree_train("r20", 0) is None
    monkeypatch.setattr(requirements, "installed", lambda dist: None)
    rec = plan.iree_train("r20", 8)
    assert rec["status"] == "skipped" and "pip install -e '.[jax,compilers]'" in rec["reason"]
