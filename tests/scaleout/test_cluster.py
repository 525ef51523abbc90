"""Multi-worker benchmarks (tf.distribute.MultiWorkerMirroredStrategy): checks, TF_CONFIG, the numbers of a
combined row, error messages and the watchdog without TensorFlow; then real CPU workers on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import assert_usage_error, fresh_env, run_cli

from resnet_lab.bench import launcher, local_cluster
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig, slug, validate
from resnet_lab.core.errors import UsageError
from resnet_lab.scaleout import cluster

TWO = ["127.0.0.1:23456", "127.0.0.1:23457"]
TINY = {"model": "tiny-resnet", "batch_size": 4, "image_size": 32, "warmup": 1, "timeout_s": 300, "min_time_s": 0}


# ------------------------------------------------------------------------------------------ checks
@pytest.mark.parametrize("addr, ok", [
    ("10.0.0.7:2222", ("10.0.0.7", 2222)), ("hostA:1", ("hostA", 1)), ("[::1]:65535", ("::1", 65535)),
    (" b:80 ", ("b", 80)), ("hostA", None), ("hostA:0", None), ("hostA:65536", None), (":2222", None),
    ("host A:2222", None), ("hostA:22x", None), ("", None), (7, None),
])
def test_parse_address(addr, ok):
    if ok:
        assert cluster.parse_address(addr) == ok
    else:
        with pytest.raises(UsageError, match="host:port"):
            cluster.parse_address(addr)


def test_parse_workers():
    assert cluster.parse_workers("a:1, b:2") == ["a:1", "b:2"]
    assert cluster.parse_workers("") is None and cluster.parse_workers(None) is None


@pytest.mark.parametrize("change, message", [
    ({"workers": TWO}, "needs --task-index"),
    ({"task_index": 0}, "--task-index needs --workers"),
    ({"workers": TWO, "task_index": 2}, r"task index: 2 is not in 0\.\.1"),
    ({"workers": TWO, "task_index": -1}, "task index: -1 is not an integer >= 0"),
    ({"workers": [TWO[0], TWO[0]], "task_index": 0}, "listed twice"),
    ({"workers": ["a:1", "a:99999"], "task_index": 0}, "port in 1..65535"),
    ({"workers": [], "task_index": 0}, "non-empty list"),
    ({"workers": TWO, "task_index": 0, "replicas": 2}, "--replicas must be 1"),
    ({"workers": TWO, "task_index": 0, "collective": "nccl"}, "nccl needs GPUs"),
    ({"workers": TWO, "task_index": 0, "xla": "jit"}, "xla jit with --workers is not supported on CPU"),
    ({"collective": "mpi"}, "collective: 'mpi' is not one of: auto, ring, nccl"),
    ({"peer_timeout_s": 0}, "peer timeout: 0 is not a number > 0 seconds"),
    ({"baseline_images_per_sec": -3.0}, "baseline images/sec: -3.0 is not a number > 0"),
])
def test_validate_rejects_bad_clusters(change, message):
    with pytest.raises(UsageError, match=message):
        validate(BenchConfig(**{**TINY, **change}))


def test_validate_accepts_a_cluster_and_global_batch():
    cfg = validate(BenchConfig(**TINY, workers=TWO, task_index=1, collective="ring"))
    assert cfg.global_batch == 8
    assert validate(BenchConfig(**TINY, workers=TWO, task_index=0, xla="auto")).xla == "auto"
    assert validate(BenchConfig(**TINY, workers=TWO, task_index=0, device="gpu", collective="nccl"))


def test_cluster_needs_the_tensorflow_backend():
    cfg = BenchConfig(**TINY, workers=TWO, task_index=0, backend="jax")
    with pytest.raises(UsageError, match="backend must be tensorflow, got 'jax'"):
        cluster.check(cfg)


def test_from_dict_round_trip_keeps_the_cluster():
    cfg = BenchConfig(**TINY, workers=TWO, task_index=1, peer_timeout_s=9.0)
    assert BenchConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


# --------------------------------------------------------------------------------------- TF_CONFIG
def test_tf_config_and_worker_env():
    cfg = BenchConfig(**TINY, workers=TWO, task_index=1)
    expected = {"cluster": {"worker": TWO}, "task": {"type": "worker", "index": 1}}
    assert cluster.tf_config(cfg) == expected
    env = launcher.worker_env(cfg, {"TF_CONFIG": "stale"})
    assert json.loads(env["TF_CONFIG"]) == expected
    assert "TF_CONFIG" not in launcher.worker_env(BenchConfig(**TINY), {"TF_CONFIG": "stale"})


def test_slug_tells_tasks_apart_and_static_fields():
    a, b = (BenchConfig(**TINY, workers=TWO, task_index=i) for i in (0, 1))
    assert slug(a) != slug(b) and slug(a).endswith("w2t0")
    static = bench_rows.static_fields(b)
    assert (static["workers"], static["task_index"], static["collective"]) == (2, 1, "auto")
    assert bench_rows.static_fields(BenchConfig(**TINY))["workers"] is None


def test_collective_used_and_hosts():
    assert cluster.collective_used(BenchConfig(workers=TWO, task_index=0)) == "ring (auto)"
    assert cluster.collective_used(BenchConfig(workers=TWO, task_index=0, device="gpu")) == "nccl (auto)"
    assert cluster.collective_used(BenchConfig(workers=TWO, task_index=0, collective="ring")) == "ring"
    assert cluster.distinct_hosts(TWO) == 1
    assert cluster.distinct_hosts(["hostA:1", "hostB:1", "hostA:2"]) == 2


# ------------------------------------------------------------------------------------------- numbers
def test_scaling_efficiency_math():
    assert cluster.scaling_efficiency(150.0, [100.0, 100.0]) == pytest.approx(0.75)
    assert cluster.scaling_efficiency(150.0, [100.0, 50.0]) == pytest.approx(1.0)  # unlike hosts
    assert cluster.scaling_efficiency(150.0, [100.0, None]) is None
    assert cluster.scaling_efficiency(None, [100.0]) is None


def _gathered(step_times_by_task, baseline=50.0):
    # The vector each worker contributes to the all-gather (see Worker.gather), in any order.
    return [[float(t), sum(ts), 1.5, 80.0, 2.0, baseline, *ts] for t, ts in step_times_by_task.items()]


def test_combined_row_from_gathered_measurements():
    cfg = BenchConfig(**TINY, steps=2, workers=TWO, task_index=0, baseline_images_per_sec=50.0)
    result = cluster.combine_measurements(cfg, _gathered({1: [0.2, 0.1], 0: [0.1, 0.1]}))
    assert [m["task"] for m in result["workers_measured"]] == [0, 1]
    assert result["step_times"] == [0.2, 0.1] and result["timed_s"] == pytest.approx(0.3)  # slowest worker
    result.update({"status": "ok", "forward_macs": 1e6, "cpu_seconds": 0.2, "collective": "ring (auto)"})
    row = bench_rows.make_row(cfg, result, {"peak_gflops": {"fp32": 100.0}}, {**bench_rows.static_fields(cfg),
                                                                         "available_cpus": 2})
    assert row["status"] == "ok" and row["global_batch"] == 8
    assert row["images_per_sec"] == pytest.approx(8 / 0.15) == row["global_images_per_sec"]
    assert json.loads(row["per_worker_images_per_sec"]) == pytest.approx([40.0, 4 / 0.15], abs=1e-3)
    assert row["baseline_images_per_sec"] == 50.0
    assert row["scaling_efficiency"] == pytest.approx((8 / 0.15) / 100.0)
    per = json.loads(row["per_worker"])
    assert [p["address"] for p in per] == TWO and per[1]["host_util"] == 80.0 and per[0]["cpu_seconds"] == 1.5
    assert row["collective"] == "ring (auto)" and row["workers"] == 2
    assert row["peak_gflops"] == 100.0  # one host: its own peak
    assert "efficiency" in bench_rows.rows_to_table([row]) and list(row) == list(bench_rows.ALL_FIELDS)
    assert len(bench_rows.rows_to_csv([row]).splitlines()) == 2


def test_mfu_of_a_cluster_is_against_every_host():
    cfg = BenchConfig(**TINY, workers=["hostA:1", "hostB:1"], task_index=0)
    result = cluster.combine_measurements(cfg, _gathered({0: [0.1], 1: [0.1]}, baseline=-1.0))
    result.update({"status": "ok", "forward_macs": 1e6})
    row = bench_rows.make_row(cfg, result, {"peak_gflops": {"fp32": 100.0}}, bench_rows.static_fields(cfg))
    assert row["peak_gflops"] == 200.0 and "2 hosts" in row["mfu_note"]
    assert row["mfu"] == pytest.approx(6e6 * 80.0 / 200e9)
    assert row["scaling_efficiency"] is None and row["baseline_images_per_sec"] is None


# -------------------------------------------------------------------------------------------- errors
RESET = ("Graph execution error:\n\nCollective ops is aborted by: recvmsg:Connection reset by peer\n"
         "Additional GRPC error information from remote target /job:worker/replica:0/task:1 while calling "
         "/tensorflow.WorkerService/RecvBuf:\n:UNKNOWN:Error received from peer")
HEARTBEAT = ("Graph execution error:\n\nCollective ops is aborted by: Deadline Exceeded\n"
             "RPC: /tensorflow.CoordinationService/Heartbeat")
BARRIER = ("Barrier timed out. Id: [Init]Wait_for_all_tasks_to_register::0.\n"
           "The first task at the barrier: /job:worker/replica:0/task:0. Some timed out task names:\n"
           "/job:worker/replica:0/task:1\n")


def test_peer_errors_name_the_lost_worker():
    chief = BenchConfig(workers=TWO, task_index=0, peer_timeout_s=10)
    msg = cluster.describe_peer_error(chief, RuntimeError(RESET))
    assert msg == "worker 0 of 2 (127.0.0.1:23456) lost worker 1 (127.0.0.1:23457): Collective ops is aborted " \
                  "by: recvmsg:Connection reset by peer"
    other = BenchConfig(workers=TWO, task_index=1)
    assert "lost worker 0 (127.0.0.1:23456)" in cluster.describe_peer_error(other, RuntimeError(HEARTBEAT))
    msg = cluster.describe_peer_error(chief, RuntimeError(BARRIER), joining=True)
    assert "did not form within 10 s (missing or unreachable: worker 1 (127.0.0.1:23457))" in msg
    assert cluster.is_peer_error(RuntimeError(RESET)) and not cluster.is_peer_error(ValueError("shape"))


def test_failure_order_puts_the_cause_first():
    rows = {0: {"status": "error", "reason": "PeerLostError: worker 0 of 2 lost worker 1"},
            1: {"status": "oom", "reason": "worker killed by SIGKILL"}, 2: {"status": "ok"}}
    assert local_cluster._failure_order(rows, {0: 5.0, 1: 6.0, 2: 7.0}) == [1, 0]


def test_free_ports_are_distinct():
    ports = local_cluster.free_ports(3)
    low = local_cluster._ephemeral_range()[0]
    assert len(set(ports)) == 3 and all(1024 <= p < low for p in ports)  # never where outgoing connections go


@pytest.mark.serial
def test_watchdog_stops_a_worker_blocked_on_its_peers():
    """A collective step blocked longer than the peer timeout ends the process with a clear line (no TF)."""
    code = textwrap.dedent("""
        import time
        from resnet_lab.scaleout.cluster_worker import Worker
        from resnet_lab.bench.config import BenchConfig
        w = Worker(BenchConfig(workers=["127.0.0.1:1", "127.0.0.1:2"], task_index=0, peer_timeout_s=0.5))
        w.start_watchdog()
        step = w.guard(lambda: time.sleep(0.1), count=True)
        step()  # the first (compiling) call is not watched; later ones are
        w.guard(lambda: time.sleep(30), count=True)()
    """)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=fresh_env())
    assert r.returncode == cluster.WATCHDOG_EXIT, r.stderr
    assert time.perf_counter() - t0 < 20
    assert "PeerLostError: worker 0 of 2 (127.0.0.1:1): step 2 blocked for more than 0.5 s" in r.stderr


# ----------------------------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("args, message", [
    (["--workers", "a:1,a:1", "--task-index", "0"], "worker a:1 is listed twice"),
    (["--workers", "a:1,b:2", "--task-index", "2"], "task index: 2 is not in 0..1 (the 2 workers' indices)"),
    (["--workers", "a:1,b", "--task-index", "0"], "each worker is host:port"),
    (["--task-index", "1"], "--task-index needs --workers"),
    (["--local-workers", "2", "--replicas", "2"], "--replicas must be 1"),
    (["--local-workers", "-1"], "local workers: -1 is not an integer >= 1"),
    (["--local-workers", "2", "--workers", "a:1,b:2", "--task-index", "0"], "not both"),
    (["--local-workers", "2", "--collective", "nccl"], "nccl needs GPUs"),
    (["--local-workers", "2", "--peer-timeout", "0"], "peer timeout: 0.0 is not a number > 0 seconds"),
    (["--preset", "precision", "--workers", "a:1,b:2", "--task-index", "0"], "not a --preset"),
    (["--preset", "precision", "--local-workers", "2"], "not a --preset"),
])
def test_cli_bad_cluster_exits_2_before_tensorflow(args, message):
    assert_usage_error(["bench", "--model", "tiny-resnet", *args], message)


# ------------------------------------------------------------------------------- real workers (slow)
@pytest.mark.slow
def test_two_local_workers_give_one_combined_row(quick_run):
    """Done when: two CPU workers on 127.0.0.1, one combined row with scaling efficiency (notebook 03's
    scale-out section of the shared quick run: the path of `resnet-lab bench --local-workers 2`)."""
    out = quick_run.run_dir / "03_benchmarks"
    (row,) = json.loads((out / "bench_multiworker.json").read_text())
    assert row["status"] == "ok", row["reason"]
    assert (row["workers"], row["task_index"], row["global_batch"]) == (2, 0, 8)
    assert row["collective"] == "ring (auto)"
    assert row["images_per_sec"] > 0 and row["global_images_per_sec"] == row["images_per_sec"]
    per = json.loads(row["per_worker"])
    assert [p["task"] for p in per] == [0, 1] and all(p["address"].startswith("127.0.0.1:") for p in per)
    assert all(p["images_per_sec"] > 0 and p["baseline_images_per_sec"] > 0 for p in per)
    assert len(json.loads(row["per_worker_images_per_sec"])) == 2
    assert row["baseline_images_per_sec"] > 0
    # No upper bound: the workers share this host's cores, and on a busy host the baseline and the workers
    # meet different neighbours (a 2-worker infer run measured 115 % under load 5 on 2 cores). The formula is
    # what is checked.
    assert row["scaling_efficiency"] > 0
    assert row["scaling_efficiency"] == pytest.approx(row["images_per_sec"] / (2 * row["baseline_images_per_sec"]))
    workers = [p.name for p in (out / "logs").iterdir() if "-w2t" in p.name]
    assert sorted(w.rsplit("-", 1)[1] for w in workers) == ["w2t0.log", "w2t1.log"]  # a log's prefix: its start


@pytest.mark.serial
@pytest.mark.slow
def test_killed_worker_stops_the_others_with_a_clear_error(tmp_path):
    """Done when: worker 1 dies mid-run (SIGKILL at its 4th step); worker 0 stops by itself within the peer
    timeout with an error naming worker 1, and nothing is written as a complete result."""
    peer_timeout = 20
    r = run_cli("bench", "--model", "tiny-resnet", "--batch-size", "4", "--image-size", "32", "--steps", "500",
                "--warmup", "1",
             "--local-workers", "2", "--peer-timeout", str(peer_timeout), "--timeout", "300",
             "--baseline-images-per-sec", "100", "--env", f"{cluster.FAULT_ENV}=1:4", "--out", str(tmp_path),
             "--format", "json", timeout=600)
    assert r.returncode == 1, r.stderr[-3000:]
    row = json.loads(r.stdout)
    assert row["status"] != "ok" and row["images_per_sec"] is None and row["scaling_efficiency"] is None
    assert row["reason"].startswith("worker 1 of 2 (127.0.0.1:")
    assert "resnet-lab bench: " in r.stderr and "worker 1 of 2" in r.stderr
    per = {p["task"]: p for p in json.loads(row["per_worker"])}
    dead, survivor = per[1], per[0]
    assert dead["status"] != "ok"
    assert survivor["status"] == "error"
    assert "PeerLostError: worker 0 of 2" in survivor["reason"] and f"lost worker 1 ({dead['address']})" in \
        survivor["reason"]
    assert survivor["ended_s"] - dead["ended_s"] < peer_timeout + 5  # stopped by itself, not by the launcher
    assert "killed by the launcher" not in survivor["reason"]
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert [s["status"] for s in saved] == [row["status"]] and saved[0]["images_per_sec"] is None


@pytest.mark.serial
@pytest.mark.slow
def test_worker_whose_peers_never_come_gives_up_within_the_timeout():
    """A chief alone in a two-worker cluster: the cluster does not form within the peer timeout."""
    ports = local_cluster.free_ports(2)
    cfg = BenchConfig(**TINY, steps=2, workers=[f"127.0.0.1:{p}" for p in ports], task_index=0, peer_timeout_s=4,
                      measure_baseline=False)
    t0 = time.perf_counter()
    row = launcher.run_config(cfg)
    assert time.perf_counter() - t0 < 4 + 60  # the timeout, plus importing TensorFlow on a busy host
    assert row["status"] == "error" and row["images_per_sec"] is None
    assert "did not form within 4 s" in row["reason"] and f"worker 1 (127.0.0.1:{ports[1]})" in row["reason"]


def test_scale_out_without_a_cluster_runs_nothing(tmp_path):
    assert local_cluster.scale_out(BenchConfig(**TINY), out=tmp_path) == []
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UsageError, match="give --local-workers or --workers, not both"):
        local_cluster.scale_out(BenchConfig(**TINY), workers=TWO, local_workers=2)
