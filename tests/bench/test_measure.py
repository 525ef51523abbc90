"""Tiny configurations through the real process isolation: one fresh TensorFlow process per row.

``tiny-resnet`` (a two-stage CIFAR ResNet of the zoo) on 32² images, 2 timed steps: each row costs a
TensorFlow import and seconds of work, so every test here is marked slow.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import fresh_env, native_bf16, reduced_precision, run_cli

from resnet_lab import models
from resnet_lab.bench import launcher
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig, slug

pytestmark = pytest.mark.slow

TINY = {"model": "tiny-resnet", "batch_size": 4, "image_size": 32, "steps": 2, "warmup": 1, "timeout_s": 300,
        "min_time_s": 0}
PEAK = {"peak_gflops": {"fp32": 100.0, "bf16": 400.0}}


def _run(**change) -> dict:
    return launcher.run_config(BenchConfig(**{**TINY, **change}), peak=PEAK)


def _assert_ok(row: dict) -> None:
    assert row["status"] == "ok", row["reason"]
    assert list(row) == list(bench_rows.ALL_FIELDS)
    for key in ("images_per_sec", "stderr", "jitter", "step_time_p50", "step_time_p90", "compile_s", "mfu",
                "cpu_util", "forward_macs"):
        assert row[key] is not None and row[key] >= 0, key
    assert row["images_per_sec"] > 0 and 0 < row["mfu"] < 1
    assert row["tf_version"] and row["keras_version"] and row["cpu_model"]


def test_train_row_plain_and_csv(tmp_path):
    rows = launcher.run_matrix([BenchConfig(**TINY)], out=tmp_path, peak=PEAK, progress=False)
    row = rows[0]
    _assert_ok(row)
    assert row["xla_ran"] is False and row["onednn_ran"] is True and row["emulated"] is False
    # stem 3→16 and two 16→16 3×3 convs at 32², 16→32 (stride 2) and 32→32 at 16², a 32→10 dense
    macs = 1024 * 16 * 27 + 2 * 1024 * 16 * 144 + 256 * 32 * 144 + 256 * 32 * 288 + 320
    assert row["forward_macs"] == macs == 8_700_224
    assert row["model_source"] == "resnet_lab" and row["flops_source"] == "models.describe"
    assert (tmp_path / "bench.csv").read_text().count("\n") == 2  # header and the row
    assert [r["status"] for r in json.loads((tmp_path / "bench.json").read_text())] == ["ok"]
    logs = list((tmp_path / "logs").iterdir())
    assert len(logs) == 1 and logs[0].name.endswith(f"-{slug(BenchConfig(**TINY))}.log")


def test_emulated_two_replicas_train():
    row = _run(replicas=2)
    _assert_ok(row)
    assert row["emulated"] is True and row["xla_ran"] is False and row["global_batch"] == 8


def test_emulated_replicas_with_xla_is_an_unsupported_row():
    """XLA compiles for one host device: variables on logical CPU:1 cannot be reached (an XLA known issue)."""
    row = _run(replicas=2, xla="jit")
    assert row["status"] == "unsupported" and "Trying to access resource" in row["reason"]


def test_xla_jit_bf16_onednn_off_threads():
    if not native_bf16():  # an emulated precision is never timed: the row says why, before any process starts
        row = _run(xla="jit", precision="bf16", onednn="off", intra_op=1, inter_op=1)
        assert row["status"] == "skipped" and "no bf16 instructions" in row["reason"], row["reason"]
    precision = reduced_precision()
    row = _run(xla="jit", precision=precision, onednn="off", intra_op=1, inter_op=1)
    _assert_ok(row)
    assert row["xla_ran"] is True and row["onednn_ran"] is False
    assert row["compute_dtype"] == {"bf16": "bfloat16", "fp32": "float32"}[precision]


def test_failures_become_rows():
    row = _run(timeout_s=0.5)
    assert row["status"] == "timeout" and "0.5 s" in row["reason"]
    row = _run(xla="jit", env={"XLA_FLAGS": "--no_such_xla_flag=1"})
    assert row["status"] == "error" and row["reason"]


def test_a_group_shares_one_process_and_a_timeout_starts_a_new_one(tmp_path):
    """Three configurations of one process key: the first measured, the second past its timeout (the worker
    killed), the third in a fresh worker; each row keeps its own part of the log."""
    cfgs = [BenchConfig(**TINY, label="a"),
            BenchConfig(**{**TINY, "timeout_s": 0.5, "min_time_s": 10}, label="b"),  # measures for 10 s at least
            BenchConfig(**{**TINY, "xla": "jit"}, label="c")]
    ended = []
    rows = launcher.run_group(cfgs, PEAK, tmp_path, on_row=lambda i, row: ended.append(i))
    assert [r["status"] for r in rows] == ["ok", "timeout", "ok"] and ended == [0, 1, 2]
    assert rows[1]["reason"] == "no result after 0.5 s (worker killed)"
    assert rows[0]["xla_ran"] is False and rows[2]["xla_ran"] is True  # read from each row's part of the log
    logs = sorted(p.name for p in tmp_path.iterdir())
    assert len(logs) == 2 and logs[0].endswith("+2.log") != logs[1].endswith("+2.log")


def test_overhead_check_runs():
    result = launcher.overhead(BenchConfig(**{**TINY, "steps": 3}), rounds=2)
    assert result["status"] == "ok" and len(result["harness_s"]) == len(result["bare_s"]) == 2
    assert 0.2 < result["ratio"] < 5  # the same step timed two ways: the same order of magnitude


def test_cli_json_row_resnet50_small_image():
    """The done-when command, on 32² images to stay cheap: one JSON row with the headline fields."""
    r = run_cli("bench", "--model", "resnet50", "--mode", "infer", "--batch-size", "2", "--image-size", "32",
                "--steps", "2", "--min-time", "0", "--warmup", "0", "--format", "json", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    row = json.loads(r.stdout)
    assert row["status"] == "ok" and row["image_size"] == 32 and row["images_per_sec"] > 0
    assert row["stderr"] >= 0 and row["jitter"] >= 0 and row["cpu_util"] > 0
    macs = models.describe("resnet50", input_shape=(32, 32, 3))["forward_macs"]
    assert row["forward_macs"] == macs and row["flops_per_image"] == 2 * macs  # inference: 2 FLOPs per MAC


@pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc are Linux's")
def test_worker_usage_error():
    r = subprocess.run([sys.executable, "-m", launcher.WORKER_MODULE], capture_output=True, text=True,
                       env=fresh_env(), timeout=60)
    assert r.returncode == 2 and "usage: python -m resnet_lab.bench.worker_child" in r.stderr
