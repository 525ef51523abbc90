"""Tiny configurations through the real process isolation: one fresh TensorFlow process per row.

A 4-conv ResNet on 32² images, 2 timed steps: each row costs a TensorFlow import and seconds of work.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from resnet_lab import bench
from resnet_lab.bench import BenchConfig

TINY = {"model": "tiny-resnet", "batch_size": 4, "image_size": 32, "steps": 2, "warmup": 1, "timeout_s": 300}
PEAK = {"peak_gflops": {"fp32": 100.0, "bf16": 400.0}}


def _run(**change) -> dict:
    return bench.run_config(BenchConfig(**{**TINY, **change}), peak=PEAK)


def _assert_ok(row: dict) -> None:
    assert row["status"] == "ok", row["reason"]
    assert set(bench.ROW_FIELDS) <= set(row)
    for key in ("images_per_sec", "stderr", "jitter", "step_time_p50", "step_time_p90", "compile_s", "mfu",
                "cpu_util", "forward_macs"):
        assert row[key] is not None and row[key] >= 0, key
    assert row["images_per_sec"] > 0 and 0 < row["mfu"] < 1
    assert row["tf_version"] and row["keras_version"] and row["cpu_model"]


def test_train_row_plain_and_csv(tmp_path):
    rows = bench.run_matrix([BenchConfig(**TINY)], out=tmp_path, peak=PEAK, progress=False)
    row = rows[0]
    _assert_ok(row)
    assert row["xla_ran"] is False and row["onednn_ran"] is True and row["emulated"] is False
    assert row["forward_macs"] == 6_340_928  # 3 3×3 convs at 32², one strided, one 32→10 dense
    assert (tmp_path / "bench.csv").exists() and len(json.loads((tmp_path / "bench.json").read_text())) == 1
    assert list((tmp_path / "logs").iterdir())


def test_emulated_two_replicas_infer():
    row = _run(replicas=2, mode="infer")
    _assert_ok(row)
    assert row["emulated"] is True and row["global_batch"] == 8


def test_emulated_two_replicas_train():
    row = _run(replicas=2)
    _assert_ok(row)
    assert row["emulated"] is True and row["xla_ran"] is False


def test_emulated_replicas_with_xla_is_an_unsupported_row():
    """XLA compiles for one host device: variables on logical CPU:1 cannot be reached (an XLA known issue)."""
    row = _run(replicas=2, xla="jit")
    assert row["status"] == "unsupported" and "Trying to access resource" in row["reason"]


def test_xla_jit_bf16_onednn_off_threads():
    row = _run(xla="jit", precision="bf16", onednn="off", intra_op=1, inter_op=1)
    _assert_ok(row)
    assert row["xla_ran"] is True and row["onednn_ran"] is False and row["compute_dtype"] == "bfloat16"


def test_failures_become_rows():
    row = _run(timeout_s=0.5)
    assert row["status"] == "timeout" and "0.5 s" in row["reason"]
    row = _run(xla="jit", env={"XLA_FLAGS": "--no_such_xla_flag=1"})
    assert row["status"] == "error" and row["reason"]


def test_overhead_check_runs():
    result = bench.overhead(BenchConfig(**{**TINY, "steps": 3}), rounds=2)
    assert result["status"] == "ok" and len(result["harness_s"]) == 2 and result["ratio"] > 0


def test_cli_json_row_resnet50_small_image():
    """The done-when command, on 32² images to stay cheap: one JSON row with the headline fields."""
    code = "import sys; from resnet_lab import bench; sys.exit(bench.main(sys.argv[1:]))"
    r = subprocess.run(
        [sys.executable, "-c", code, "--model", "resnet50", "--mode", "infer", "--batch-size", "2",
         "--image-size", "32", "--steps", "2", "--warmup", "0", "--format", "json"],
        capture_output=True, text=True, timeout=300, env=bench.worker_env(BenchConfig(), None),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    row = json.loads(r.stdout)
    for key in ("images_per_sec", "stderr", "jitter", "mfu", "cpu_util", "status"):
        assert key in row
    assert row["status"] == "ok" and row["image_size"] == 32


@pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc are Linux's")
def test_worker_usage_error():
    r = subprocess.run([sys.executable, "-m", "resnet_lab.bench_worker"], capture_output=True, text=True,
                       env=bench.worker_env(BenchConfig(), None), timeout=60)
    assert r.returncode == 2 and "usage" in r.stderr


def test_zoo_model_row_uses_describe():
    from resnet_lab import models

    row = _run(model="cifar_resnet20", mode="infer")
    _assert_ok(row)
    assert row["model_source"] == "resnet_lab.models" and row["flops_source"] == "models.describe"
    assert row["forward_macs"] == models.describe("cifar_resnet20")["forward_macs"]
