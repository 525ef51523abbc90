"""Speed targets of the benchmark harness (issue #5). Minutes each; want a quiet machine.

Every test prints what it measured, with the host's load, and leaves its rows under
outputs/bench/<timestamp>-<test>/ (CSV + JSON + worker logs), so a failure can be read, not just seen.
Reproduce one by hand with the command in its docstring.
"""

from __future__ import annotations

import datetime as _dt
import os

import pytest

from resnet_lab.bench import launcher, peak, presets
from resnet_lab.bench import rows as rows_mod
from resnet_lab.bench.config import BenchConfig, expand
from resnet_lab.core import artifacts, provenance

pytestmark = pytest.mark.benchmark


def _out(name: str):
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return artifacts.outputs_root() / "bench" / f"{stamp}-{name}"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def test_harness_overhead_within_2_percent():
    """Harness loop (per-step clock + read-back) vs a bare loop over the same compiled step, alternated.

    By hand: python -c "from resnet_lab.bench import launcher, config; print(launcher.overhead(config.BenchConfig(
        model='resnet50', mode='infer', batch_size=8, steps=10), rounds=5))"
    """
    cfg = BenchConfig(model="resnet50", mode="infer", batch_size=8, steps=10, warmup=2)
    result = launcher.overhead(cfg, rounds=5)
    print(f"\n[{_load()}] overhead: {result}")
    assert result["status"] == "ok", result
    assert result["ratio"] >= 0.98, (
        f"harness {result['harness_images_per_sec']:.2f} vs bare "
        f"{result['bare_images_per_sec']:.2f} images/sec")


def _best(rows, **match):
    ok = [r for r in rows if r["status"] == "ok" and all(r.get(k) == v for k, v in match.items())]
    return max(ok, key=lambda r: r["images_per_sec"], default=None)


def test_best_fp32_training_mfu_at_least_50_percent():
    """The fp32 lever search for ResNet-50 v1 training at 224², batch >= 32, on this CPU.

    By hand: resnet-lab bench --preset fp32-train-levers --out outputs/bench/fp32-levers
    """
    gemm_peak = peak.load_peak()
    if not peak.peak_gflops("fp32", gemm_peak):
        pytest.skip("no fp32 GEMM peak measured on this host: run `resnet-lab peak` first")
    out = _out("fp32-train-levers")
    rows = launcher.run_matrix(expand(presets.PRESETS["fp32-train-levers"]), out=out, peak=gemm_peak)
    print(f"\n[{_load()}] peak fp32 {gemm_peak['peak_gflops']['fp32']:.0f} GFLOP/s "
          f"({gemm_peak.get('_path', '')})\n{rows_mod.rows_to_table(rows)}\nrows: {out}")
    best = _best(rows, precision="fp32", mode="train")
    assert best is not None, "no fp32 training configuration ran"
    assert best["batch_size"] >= 32 and best["image_size"] == 224
    assert best["mfu"] >= 0.50, (
        f"best fp32 MFU {100 * best['mfu']:.1f} % ({best['label']}, {best['images_per_sec']:.2f} images/sec; "
        f"{100 * (best.get('mfu_vs_gemm_now') or 0):.1f} % of the GEMM rate measured during the run)")


def test_bf16_far_above_fp32_on_amx():
    """bf16 (AMX) against fp32, ResNet-50 training at 224², batch 32, oneDNN.

    By hand: resnet-lab bench --preset precision --out outputs/bench/precision
    """
    if not provenance.cpu_info().get("isa", {}).get("amx_bf16"):
        pytest.skip("no AMX-BF16 on this CPU")
    out = _out("precision")
    spec = {**presets.PRESETS["precision"], "sweep": {"precision": ["fp32", "bf16"]}}
    rows = launcher.run_matrix(expand(spec), out=out, peak=peak.load_peak())
    print(f"\n[{_load()}]\n{rows_mod.rows_to_table(rows)}\nrows: {out}")
    fp32, bf16 = _best(rows, precision="fp32"), _best(rows, precision="bf16")
    assert fp32 and bf16
    assert bf16["images_per_sec"] >= 2.0 * fp32["images_per_sec"]
