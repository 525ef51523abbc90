"""notebooks/03_benchmarks.ipynb: its layout, and its quick run (params/quick.yaml, tiny configurations)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from resnet_lab.bench import launcher
from resnet_lab.bench import rows as bench_rows
from resnet_lab.core.choices import BACKENDS
from resnet_lab.report.speed_results import Key

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "03_benchmarks.ipynb"


@pytest.mark.slow
def test_quick_run_results(quick_run):
    """The quick run executes every 2017 row (GPU ones skipped here), the sweeps and the profile, tiny."""
    assert quick_run.statuses["03_benchmarks"] == "ok", quick_run.errors.get("03_benchmarks")
    out = quick_run.run_dir / "03_benchmarks"
    results = json.loads((out / "results.json").read_text())
    statuses = results[Key.STATUSES_2017]
    for label in ("CPU", "CPU MKL", "XLA CPU", "XLA jit CPU (new)"):
        assert statuses[label] == "ok", (label, statuses)
    if not launcher.gpus_visible()[0]:
        assert {statuses[k] for k in ("GPU", "2xGPU", "XLA GPU", "XLA 2xGPU")} == {"skipped"}
    assert results[Key.N_FAILED] == 0 and results[Key.N_OK] >= 7
    assert results[Key.BEST_IMAGES_PER_SEC] > 0
    if results[Key.PEAK_GFLOPS]:  # 00_environment measured a peak in the same run: MFU is known
        assert 0 < results[Key.BEST_FP32_MFU] < 1
    assert 0 < results[Key.PROFILE_CONV_SHARE] < 1 and results[Key.PROFILE_CONV_GFLOPS] > 0
    for name in ("bench.csv", "bench_2017.csv", "profile.csv", "bench_sweeps.json", "compare_2017.csv",
                 "compare_2017.png", "sweeps.png", "mfu_cpu_util.png", "provenance.json"):
        assert (out / name).stat().st_size > 0, name
    backends = results[Key.STATUSES_BACKENDS]  # TF, JAX and PyTorch, compiler off and on (train, quick)
    installed = {b for b in BACKENDS if bench_rows.backend_version(b)}
    for label, backend in (("TF graph", "tensorflow"), ("TF XLA jit", "tensorflow"), ("JAX jit", "jax"),
                           ("JAX eager", "jax"), ("torch eager", "torch")):
        assert backends[f"{label} train"] == ("ok" if backend in installed else "skipped"), (label, backends)
    assert "torch.compile train" not in backends  # quick.yaml's backend_skip (tests/bench/test_backends.py has it)
    assert (out / "backends.csv").stat().st_size > 0 and (out / "backends.png").stat().st_size > 0
    # TF fused BN vs native PyTorch (eager and torch.compile), the MLPerf scenarios, the roofline
    native_ok = "torch" in installed
    assert {t["target"] for t in results[Key.TARGETS]} == {"TF fp32 train / native PyTorch eager fp32",
                                                           "TF bf16 train / native PyTorch eager fp32"}
    fp32_target = results[Key.TARGETS][0]
    assert fp32_target["ratio"] > 0 if native_ok else fp32_target["ratio"] is None
    native_rows = json.loads((out / "bench_native.json").read_text())
    # (quick.yaml leaves out the native torch.compile row: it shares the Keras torch.compile row's wrapper)
    assert {(r["impl"], r["xla"], r["status"]) for r in native_rows} == (
        {("keras", "off", "ok"), ("native", "off", "ok")} if native_ok else
        {("keras", "off", "ok"), ("native", "off", "skipped")})
    if native_ok:
        eager = next(r for r in native_rows if r["impl"] == "native")
        assert eager["model_source"].startswith(("resnet_lab.models.torch_builder", "torchvision.models"))
        assert eager["compiler"] == "PyTorch eager (native)" and eager["forward_macs"] > 0
    p90 = results[Key.SINGLE_STREAM_P90_MS]
    assert p90["TensorFlow"] > 0 and (p90.get("native PyTorch", 0) > 0) == native_ok
    scenarios = json.loads((out / "bench_mlperf.json").read_text())
    single = [r for r in scenarios if r["label"].startswith("SingleStream") and r["status"] == "ok"]
    assert single and all(r["batch_size"] == 1 and len(r["step_times"]) == r["steps"] for r in single)
    assert set(results[Key.OFFLINE_IMAGES_PER_SEC]) >= {"TensorFlow"}
    # the headline is the sum of roofline.csv's losses, each clipped at 0; a tiny model on a shared host
    # never runs every primitive at its bound, so some time is lost
    roof = pd.read_csv(out / "roofline.csv")
    assert results[Key.ROOFLINE_LOST_MS] == pytest.approx(roof["lost_ms_per_step"].clip(lower=0).sum())
    assert results[Key.ROOFLINE_LOST_MS] > 0
    for name in ("native_pytorch.csv", "mlperf_scenarios.csv", "roofline.csv", "roofline.png"):
        assert (out / name).stat().st_size > 0, name
    rows = json.loads((out / "bench_2017.json").read_text())
    assert all(list(r) == list(bench_rows.ALL_FIELDS) for r in rows)
    # The scale-out section: 2 tiny workers on 127.0.0.1, one combined row with scaling efficiency.
    assert results[Key.MULTIWORKER_STATUS] == "ok" and results[Key.MULTIWORKER_IMAGES_PER_SEC] > 0
    assert results[Key.SCALING_EFFICIENCY] > 0
    (mw,) = json.loads((out / "bench_multiworker.json").read_text())
    assert mw["workers"] == 2 and len(json.loads(mw["per_worker"])) == 2
