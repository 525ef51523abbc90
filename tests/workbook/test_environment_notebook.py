"""00_environment under params/quick.yaml: it runs, and records a peak per dtype that later MFU uses."""

from __future__ import annotations

import json


def test_environment_notebook_records_peak(quick_run):
    assert quick_run.statuses["00_environment"] == "ok", quick_run.errors
    out = quick_run.run_dir / "00_environment"
    results = json.loads((out / "results.json").read_text())
    assert results["peak_gflops"]["fp32"] > 1 and results["peak_gflops"]["bf16"] > 1
    assert results["available_cpus"] >= 1
    assert results["bandwidth_gbps"] > 0  # the roofline's memory ceiling (triad), beside the GEMM peak
    doc = json.loads((out / "peak.json").read_text())
    assert {r["library"] for r in doc["measurements"] if r["dtype"] == "fp32"} == {"numpy", "tensorflow"}
    assert (out / "gemm.png").stat().st_size > 0 and (out / "gemm.csv").exists()
    prov = json.loads((quick_run.run_dir / "provenance.json").read_text())
    entry = next(n for n in prov["notebooks"] if n["name"] == "00_environment")  # the run's record of it
    assert entry["status"] == "ok" and entry["seconds"] > 0 and prov["git"]["commit"]
    assert "Measured GEMM peak" in entry["summary"]
