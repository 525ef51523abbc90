"""Scale out: one benchmark configuration across workers with ``tf.distribute.MultiWorkerMirroredStrategy``.

Every worker runs the same command with the same cluster list and its own index; worker 0 is the chief::

    resnet-lab bench --model resnet50 --workers hostA:2222,hostB:2222 --task-index 0   # on hostA
    resnet-lab bench --model resnet50 --workers hostA:2222,hostB:2222 --task-index 1   # on hostB
    resnet-lab bench --model tiny-resnet --local-workers 2 ...   # N workers on 127.0.0.1 (trials, tests)

How it works:

- **Cluster.** :func:`tf_config` turns ``workers`` and ``task_index`` into ``TF_CONFIG`` (``bench.worker_env``
  puts it in the worker process's environment, before TensorFlow is imported). TensorFlow's own runtime does
  the rest: gRPC servers, the coordination service (led by worker 0), collective all-reduce.
- **What is timed.** Data parallel, as one-process rows with ``replicas``: each worker runs the step on its
  own synthetic batch of ``batch_size`` (global batch = ``batch_size × workers``); a training step
  all-reduces the gradients and the loss, an inference step all-gathers the logits, so every step ends at
  the same moment on every worker. A barrier (an all-gather) starts the timed steps together.
- **How the numbers reach the chief.** Each worker times its own steps. After the timed steps one more
  collective, ``strategy.gather``, hands every worker every worker's step times, CPU seconds, host
  utilisation and one-worker baseline, so the chief's row holds what each worker measured, also across
  hosts that share no file system. Every worker could write the row; only the chief does (the CLI of a
  non-chief worker prints it and writes nothing under ``--out``).
- **Numbers.** Global images/sec = global batch ÷ mean over steps of the slowest worker's step time (the
  ``images_per_sec`` of the row; ``global_images_per_sec`` repeats it). Per-worker images/sec = that
  worker's batch ÷ its mean step time. Scaling efficiency = global images/sec ÷ the sum of the workers'
  one-worker images/sec (N × the baseline when the hosts are alike). The baseline is a one-process run of
  the same configuration without ``workers`` (same per-worker batch), measured on each host just before it
  joins (``run_config``), once for all of them by :func:`launch_local`, or given
  (``baseline_images_per_sec``). MFU is against the peak of one host × the number of distinct hosts.
- **Failures.** ``peer_timeout_s`` bounds every wait for a peer: all workers must register with the
  coordination service within it (a barrier), a worker that stops sending heartbeats for that long is
  declared dead by the service, which aborts every other worker's collectives; a dead process is usually
  noticed at once (its connections reset). A watchdog in each worker stops it (exit status 3, a
  ``PeerLostError`` line) when one collective step stays blocked longer than ``peer_timeout_s``. The
  parent's ``timeout_s`` remains the last resort and kills the worker's process group. Any of these gives
  a row with status ``error`` (or ``timeout``) whose reason names the worker that was lost; no ``ok`` row is
  written for an incomplete run. The first (compiling) step is left to TensorFlow's detection and the
  parent timeout, since its length is not known in advance.

This module never imports TensorFlow at import time: the checks, ``TF_CONFIG``, statistics and the launcher
are plain Python; the worker-side pieces (:class:`Worker`) import it inside their methods.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import signal
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from resnet_lab import bench
from resnet_lab.bench import BenchConfig
from resnet_lab.errors import UsageError

COLLECTIVES = ("auto", "ring", "nccl")
# A test hook: "TASK:CALL" makes worker TASK kill itself (SIGKILL, as a crash) at its CALL-th step call
# (1 = the compiling call). Deterministic, unlike killing a process from outside at the right moment.
FAULT_ENV = "RESNET_LAB_TEST_KILL"
WATCHDOG_EXIT = 3


# ------------------------------------------------------------------------------------------ config
def parse_address(addr: Any) -> tuple[str, int]:
    """(host, port) of ``host:port`` (``[v6]:port`` too); UsageError naming the entry otherwise."""
    if not isinstance(addr, str) or not addr.strip():
        raise UsageError(f"each worker is host:port, got {addr!r}")
    host, sep, port = addr.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or any(c.isspace() for c in host) or not port.isdigit() or \
            not 1 <= int(port) <= 65535:
        raise UsageError(f"each worker is host:port with a port in 1..65535, got {addr!r}")
    return host, int(port)


def parse_workers(text: str | None) -> list[str] | None:
    """``"a:1,b:2"`` → ``["a:1", "b:2"]`` (None for None or empty text); entries are checked by :func:`check`."""
    if text is None or not text.strip():
        return None
    return [w.strip() for w in text.split(",")]


def check(cfg: BenchConfig) -> None:
    """The multi-worker fields of ``cfg`` (called by ``bench.validate``): UsageError, one line, before TF."""
    bench._check_choice("collective", cfg.collective, COLLECTIVES)
    if isinstance(cfg.peer_timeout_s, bool) or not isinstance(cfg.peer_timeout_s, int | float) or \
            not cfg.peer_timeout_s > 0:
        raise UsageError(f"peer timeout must be > 0 seconds, got {cfg.peer_timeout_s!r}")
    b = cfg.baseline_images_per_sec
    if b is not None and (isinstance(b, bool) or not isinstance(b, int | float) or not b > 0):
        raise UsageError(f"baseline images/sec must be > 0 (or empty: measure it), got {b!r}")
    if not isinstance(cfg.measure_baseline, bool):
        raise UsageError(f"measure_baseline must be true or false, got {cfg.measure_baseline!r}")
    if cfg.workers is None:
        if cfg.task_index is not None:
            raise UsageError("--task-index needs --workers (the cluster's host:port list)")
        return
    if not isinstance(cfg.workers, list | tuple) or not cfg.workers:
        raise UsageError(f"workers is a non-empty list of host:port, got {cfg.workers!r}")
    seen: set[tuple[str, int]] = set()
    for w in cfg.workers:
        key = parse_address(w)
        if key in seen:
            raise UsageError(f"worker {w} is listed twice: every worker needs its own host:port")
        seen.add(key)
    n = len(cfg.workers)
    if cfg.task_index is None:
        raise UsageError(f"--workers needs --task-index: this worker's index, 0..{n - 1} (0 is the chief)")
    bench._check_int("task index", cfg.task_index, 0)
    if cfg.task_index >= n:
        raise UsageError(f"task index must be in 0..{n - 1} for {n} worker(s), got {cfg.task_index}")
    backend = getattr(cfg, "backend", "tensorflow")  # the field comes with the Keras-backends work
    if backend != "tensorflow":
        raise UsageError(f"--workers runs TensorFlow's MultiWorkerMirroredStrategy: backend must be tensorflow, "
                         f"got {backend!r}")
    if cfg.replicas != 1:
        raise UsageError("with --workers each worker runs one replica: --replicas must be 1")
    if cfg.collective == "nccl" and cfg.device != "gpu":
        raise UsageError("collective nccl needs GPUs (--device gpu); on CPU use ring or auto")
    if cfg.xla == "jit" and cfg.device == "cpu":
        raise UsageError("xla jit with --workers is not supported on CPU: TensorFlow cannot compile the step's "
                         "collectives with XLA for CPU devices (UNIMPLEMENTED); use xla off or auto")


def tf_config(cfg: BenchConfig) -> dict[str, Any]:
    """The ``TF_CONFIG`` of ``cfg``'s worker: the whole cluster, and which task this process is."""
    return {"cluster": {"worker": [w.strip() for w in cfg.workers]},
            "task": {"type": "worker", "index": int(cfg.task_index)}}


def collective_used(cfg: BenchConfig) -> str:
    """The all-reduce implementation the collective runtime picks for ``cfg``: ring on CPU, NCCL on GPU."""
    used = cfg.collective if cfg.collective != "auto" else ("nccl" if cfg.device == "gpu" else "ring")
    return used if cfg.collective != "auto" else f"{used} (auto)"


def distinct_hosts(workers: list[str]) -> int:
    """How many machines the cluster spans (addresses on loopback count as this one)."""
    hosts = set()
    for w in workers:
        host = parse_address(w)[0]
        hosts.add("localhost" if host in ("127.0.0.1", "localhost", "::1") else host)
    return len(hosts)


# -------------------------------------------------------------------------------------------- rows
def scaling_efficiency(global_ips: float | None, baselines: list[float | None]) -> float | None:
    """Global images/sec ÷ the sum of every worker's one-worker images/sec; None when any is unknown."""
    if not global_ips or not baselines or any(not b for b in baselines):
        return None
    return global_ips / sum(baselines)


def row_fields(cfg: BenchConfig, result: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The multi-worker fields of an ``ok`` row (``row`` already has the global statistics and MFU)."""
    measured = result.get("workers_measured") or []
    per_worker = []
    for m in measured:
        times = m["step_times"]
        per_worker.append({
            "task": m["task"], "address": m["address"],
            "images_per_sec": cfg.batch_size * cfg.replicas / statistics.fmean(times),
            "step_time_mean": statistics.fmean(times), "timed_s": m["timed_s"],
            "cpu_seconds": m["cpu_seconds"], "host_util": m["host_util"], "first_step_s": m["first_step_s"],
            "baseline_images_per_sec": m["baseline_images_per_sec"],
        })
    baselines = [p["baseline_images_per_sec"] for p in per_worker]
    out: dict[str, Any] = {
        "workers": len(cfg.workers), "task_index": cfg.task_index,
        "collective": result.get("collective") or collective_used(cfg),
        "global_images_per_sec": row["images_per_sec"],
        "per_worker_images_per_sec": json.dumps([round(p["images_per_sec"], 4) for p in per_worker]),
        "baseline_images_per_sec": statistics.fmean(baselines) if baselines and all(baselines) else None,
        "scaling_efficiency": scaling_efficiency(row["images_per_sec"], baselines),
        "per_worker": json.dumps(per_worker, sort_keys=True),
    }
    hosts = distinct_hosts(cfg.workers)
    if hosts > 1:  # the cluster's peak: this host's × the number of hosts (alike hosts assumed)
        for peak_key, mfu_key in (("peak_gflops", "mfu"), ("gemm_gflops_now", "mfu_vs_gemm_now")):
            if row.get(peak_key):
                out[peak_key] = row[peak_key] * hosts
                out[mfu_key] = bench.mfu(row["flops_per_image"], row["images_per_sec"], out[peak_key])
        if row.get("peak_gflops"):
            out["mfu_note"] = f"MFU against {hosts} hosts × this host's peak (alike hosts assumed)"
    return out


def combine_measurements(cfg: BenchConfig, rows: list[list[float]]) -> dict[str, Any]:
    """The gathered vectors (one per worker, see :meth:`Worker.gather`) as result fields."""
    measured = []
    for vec in sorted(rows, key=lambda v: v[0]):
        task = round(vec[0])
        opt = lambda x: None if x < 0 else float(x)  # noqa: E731
        measured.append({"task": task, "address": cfg.workers[task], "timed_s": float(vec[1]),
                         "cpu_seconds": float(vec[2]), "host_util": opt(vec[3]), "first_step_s": float(vec[4]),
                         "baseline_images_per_sec": opt(vec[5]), "step_times": [float(t) for t in vec[6:]]})
    # Every step ends together (it all-reduces); the slowest worker's clock is the cluster's.
    step_times = [max(ts) for ts in zip(*(m["step_times"] for m in measured), strict=True)]
    return {"workers_measured": measured, "step_times": step_times,
            "timed_s": max(m["timed_s"] for m in measured)}


# ------------------------------------------------------------------------------------- worker side
class PeerLostError(RuntimeError):
    """A worker lost (or never reached) its peers: the message says which worker and how."""


_TASK = re.compile(r"/job:worker/(?:replica:\d+/)?task:(\d+)")
_GIST = ("stopped sending heartbeats", "Barrier timed out", "Connection reset", "Connection refused",
         "Socket closed", "failed to connect", "Heartbeat", "Deadline Exceeded", "unhealthy", "UNAVAILABLE",
         "aborted")
_PEER_ERRORS = ("UnavailableError", "DeadlineExceededError", "AbortedError", "CancelledError")


def is_peer_error(exc: BaseException) -> bool:
    """Whether an exception of a collective means a peer is gone (not a bug of the step itself)."""
    text = str(exc)
    return type(exc).__name__ in _PEER_ERRORS or any(g in text for g in _GIST[:7]) or \
        "Collective ops is aborted" in text


def describe_peer_error(cfg: BenchConfig, exc: BaseException, joining: bool = False) -> str:
    """One line: which worker lost which peer(s), and TensorFlow's most telling words about it."""
    text = str(exc)
    me, n = int(cfg.task_index), len(cfg.workers)
    tasks = sorted({int(t) for t in _TASK.findall(text)} - {me})
    if not tasks and "Heartbeat" in text and me != 0:
        tasks = [0]  # heartbeats go to the coordination service on worker 0
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    gist = next((ln for g in _GIST for ln in lines if g in ln), lines[0] if lines else type(exc).__name__)
    gist = gist if len(gist) <= 200 else gist[:197] + "..."
    peers = ", ".join(f"worker {t} ({cfg.workers[t]})" for t in tasks if t < n) or "a peer worker"
    who = f"worker {me} of {n} ({cfg.workers[me]})"
    if joining:
        return (f"{who}: the cluster did not form within {cfg.peer_timeout_s:g} s "
                f"(missing or unreachable: {peers}): {gist}")[:600]
    return f"{who} lost {peers}: {gist}"[:600]


class Worker:
    """This process's part of the cluster: the strategy, a watchdog, the timed-region barrier and gather."""

    def __init__(self, cfg: BenchConfig):
        self.cfg = cfg
        self.index, self.n = int(cfg.task_index), len(cfg.workers)
        self.strategy = None
        self.calls = 0
        self.busy_since: float | None = None
        self.armed = False
        self.what = ""
        task, _, call = os.environ.get(FAULT_ENV, "").partition(":")
        self.die_at = int(call) if task.isdigit() and call.isdigit() and int(task) == self.index else None
        self._stop = threading.Event()

    def configure(self) -> dict[str, Any]:
        """Devices and the cluster, before TensorFlow's context exists: facts for ``bench_worker.setup``.

        One device per worker: the CPU, or one GPU (worker i takes GPU i mod the GPUs it sees, so local
        workers on a multi-GPU host get different ones). Returns ``{"devices", "multiworker"}`` or a skip.
        """
        import tensorflow as tf

        if self.cfg.device == "cpu":
            with contextlib.suppress(ValueError, RuntimeError):
                tf.config.set_visible_devices([], "GPU")
        else:
            gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                return {"skip": f"worker {self.index}: TensorFlow sees no GPU "
                                f"(built with CUDA: {tf.test.is_built_with_cuda()})"}
            gpu = gpus[self.index % len(gpus)]
            tf.config.set_visible_devices([gpu], "GPU")
            tf.config.experimental.set_memory_growth(gpu, True)
        self.join()
        return {"devices": self.devices, "multiworker": self}

    def join(self):
        """Configure the coordination service, create the strategy (waits for every peer), start the watchdog."""
        import tensorflow as tf
        from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
        from tensorflow.python.eager import context

        ms = int(self.cfg.peer_timeout_s * 1000)
        # What MultiWorkerMirroredStrategy configures by itself, plus our timeouts: register within the peer
        # timeout (a barrier: every worker or none goes on) and a heartbeat timeout of the same length.
        context.context().configure_coordination_service(
            service_type="standalone", service_leader="/job:worker/replica:0/task:0",
            cluster_register_timeout_in_ms=ms, heartbeat_timeout_in_ms=ms, shutdown_barrier_timeout_in_ms=ms,
            coordinated_jobs=[coordination_config_pb2.CoordinatedJob(name="worker", num_tasks=self.n)])
        context.context().coordination_service.cluster_register_with_barrier = True
        impl = tf.distribute.experimental.CommunicationImplementation[self.cfg.collective.upper()]
        options = tf.distribute.experimental.CommunicationOptions(implementation=impl)
        try:
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        except Exception as exc:
            if is_peer_error(exc):
                raise PeerLostError(describe_peer_error(self.cfg, exc, joining=True)) from exc
            raise
        print(f"resnet-lab multi-worker: worker {self.index} of {self.n} joined; replicas in sync: "
              f"{self.strategy.num_replicas_in_sync}; collective {collective_used(self.cfg)}", flush=True)
        self.start_watchdog()
        return self.strategy

    def start_watchdog(self) -> None:
        threading.Thread(target=self._watch, name="resnet-lab-watchdog", daemon=True).start()

    @property
    def devices(self) -> list[str]:
        return list(self.strategy.extended.worker_devices)

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            since = self.busy_since
            if self.armed and since is not None and time.monotonic() - since > self.cfg.peer_timeout_s:
                print(f"PeerLostError: worker {self.index} of {self.n} ({self.cfg.workers[self.index]}): "
                      f"{self.what} blocked for more than {self.cfg.peer_timeout_s:g} s: a peer worker is dead, "
                      f"stuck or unreachable; stopping", file=sys.stderr, flush=True)
                os._exit(WATCHDOG_EXIT)

    def guard(self, fn, what: str = "step", count: bool = False):
        """``fn`` under the watchdog (armed after the first, compiling, call), with peer errors explained."""

        def guarded(*args):
            if count:
                self.calls += 1
                if self.die_at is not None and self.calls == self.die_at:
                    print(f"resnet-lab multi-worker: {FAULT_ENV}: worker {self.index} dies at call "
                          f"{self.calls}", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
            self.what = f"{what} {self.calls}" if count else what
            self.busy_since = time.monotonic()
            try:
                return fn(*args)
            except Exception as exc:
                if is_peer_error(exc):
                    raise PeerLostError(describe_peer_error(self.cfg, exc)) from exc
                raise
            finally:
                self.busy_since = None
                if count and self.calls >= 1:
                    self.armed = True

        return guarded

    def _all_gather(self, vec: list[float]):
        import tensorflow as tf

        value = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant([vec], dtype=tf.float64))
        return self.strategy.gather(value, axis=0).numpy().tolist()

    def barrier(self) -> None:
        """Every worker reaches this point before any goes on (the start of the timed steps)."""
        self.guard(lambda: self._all_gather([float(self.index)]), "barrier before the timed steps")()

    def gather(self, timed: dict[str, Any], first_step_s: float) -> dict[str, Any]:
        """Every worker's measurements, on every worker (one all-gather); result fields for the row."""
        cfg = self.cfg
        b = cfg.baseline_images_per_sec
        host_util = timed.get("host_util")
        vec = [float(self.index), float(timed["timed_s"]), float(timed["cpu_seconds"]),
               -1.0 if host_util is None else float(host_util), float(first_step_s),
               -1.0 if b is None else float(b), *map(float, timed["step_times"])]
        rows = self.guard(lambda: self._all_gather(vec), "gathering the workers' step times")()
        self._stop.set()
        mine = {"own_step_times": list(timed["step_times"]), "own_timed_s": timed["timed_s"]}
        return {**timed, **mine, **combine_measurements(cfg, rows), "collective": collective_used(cfg),
                "task_index": self.index}


# ------------------------------------------------------------------------------------------ parent
def table(rows: list[dict[str, Any]]):
    """The multi-worker columns of ``rows`` as a DataFrame: throughput, efficiency, what each worker measured."""
    import pandas as pd

    cols = ["label", "model", "mode", "batch_size", "global_batch", "workers", "collective", "status",
            "global_images_per_sec", "per_worker_images_per_sec", "baseline_images_per_sec", "scaling_efficiency",
            "stderr", "step_time_p50", "wall_s", "reason"]
    return pd.DataFrame([{k: r.get(k) for k in cols} for r in rows], columns=cols)


def baseline_config(cfg: BenchConfig) -> BenchConfig:
    """The one-worker configuration whose images/sec is the scaling baseline: same knobs, no cluster."""
    return dataclasses.replace(cfg, workers=None, task_index=None, label=f"{cfg.label or 'baseline'} (1 worker)",
                               measure_baseline=False, baseline_images_per_sec=None)


def with_baseline(cfg: BenchConfig, peak: dict[str, Any] | None = None, log_dir: str | Path | None = None,
                  python: str | None = None) -> BenchConfig:
    """``cfg`` with ``baseline_images_per_sec`` measured here (a one-process run) when it is asked for."""
    if not cfg.workers or cfg.baseline_images_per_sec is not None or not cfg.measure_baseline:
        return cfg
    row = bench.run_config(baseline_config(cfg), peak, log_dir=log_dir, python=python)
    if row["status"] != "ok":
        print(f"resnet-lab bench: the one-worker baseline failed ({row['status']}: {row.get('reason')}); "
              f"no scaling efficiency", file=sys.stderr)
        return dataclasses.replace(cfg, measure_baseline=False)
    return dataclasses.replace(cfg, baseline_images_per_sec=row["images_per_sec"], measure_baseline=False)


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports free on ``host`` right now (the OS picks them)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _failure_order(task_rows: dict[int, dict[str, Any]], ended: dict[int, float]) -> list[int]:
    """Failed tasks, the likely cause first: not a lost-peer error, then by the time it ended."""
    failed = [t for t, r in task_rows.items() if r["status"] != "ok"]
    lost = lambda t: "PeerLostError" in (task_rows[t].get("reason") or "")  # noqa: E731
    return sorted(failed, key=lambda t: (lost(t), ended.get(t, math.inf)))


def launch_local(cfg: BenchConfig, n_workers: int, peak: dict[str, Any] | None = None,
                 log_dir: str | Path | None = None, python: str | None = None, host: str = "127.0.0.1",
                 grace_s: float = 15.0) -> dict[str, Any]:
    """Run ``cfg`` on ``n_workers`` workers on this host (loopback ports) and return the chief's row.

    Each worker goes through ``bench.run_config`` with ``workers``/``task_index`` set, exactly the path of
    ``resnet-lab bench --workers ... --task-index I`` on a real host, in a thread of this process. The
    baseline is measured once, before the workers start (so they do not compete with it), unless given.
    When a worker fails the others get ``peer_timeout_s + grace_s`` to stop by themselves, then their
    process groups are killed. A failed run returns an error row whose reason names the failed worker first,
    and whose ``per_worker`` lists every worker's status, reason and when it ended.
    """
    bench._check_int("local workers", n_workers, 1)
    if cfg.workers:
        raise UsageError("give --local-workers or --workers, not both")
    base = dataclasses.replace(cfg, workers=[f"{host}:{p}" for p in range(1, n_workers + 1)], task_index=0)
    bench.validate(base)  # every check of a worker's configuration, before anything starts
    cfg = with_baseline(dataclasses.replace(cfg, workers=[f"{host}:{p}" for p in free_ports(n_workers, host)],
                                            task_index=0), peak, log_dir, python)
    cfgs = [dataclasses.replace(cfg, task_index=i) for i in range(n_workers)]
    rows: dict[int, dict[str, Any]] = {}
    ended: dict[int, float] = {}
    idents: dict[int, int] = {}
    t0 = time.monotonic()

    def run_one(i: int) -> None:
        idents[i] = threading.get_ident()
        try:
            rows[i] = bench.run_config(cfgs[i], peak, log_dir=log_dir, python=python)
        except Exception as exc:  # a harness bug in one thread must not leave the others waiting
            rows[i] = bench.skipped_row(cfgs[i], "error", f"{type(exc).__name__}: {exc}")
        ended[i] = time.monotonic() - t0

    threads = [threading.Thread(target=run_one, args=(i,), name=f"resnet-lab-worker-{i}", daemon=True)
               for i in range(n_workers)]
    killed: set[int] = set()
    try:
        for th in threads:
            th.start()
        first_failure: float | None = None
        while any(th.is_alive() for th in threads):
            time.sleep(0.2)
            if first_failure is None and any(r["status"] != "ok" for r in rows.values()):
                first_failure = time.monotonic()
            if first_failure is not None and time.monotonic() - first_failure > cfg.peer_timeout_s + grace_s:
                killed |= _kill_running(idents, [i for i, th in enumerate(threads) if th.is_alive()])
                for th in threads:
                    th.join()
    except BaseException:
        _kill_running(idents, [i for i, th in enumerate(threads) if th.is_alive()])
        raise
    for i in killed:
        rows[i] = {**rows[i], "status": "error",
                   "reason": f"killed by the launcher: still running {cfg.peer_timeout_s + grace_s:g} s after "
                             f"another worker failed"}
    chief = dict(rows[0])
    chief["wall_s"] = time.monotonic() - t0
    summary = [{"task": i, "address": cfgs[i].workers[i], "status": rows[i]["status"],
                "reason": rows[i].get("reason") or "", "ended_s": round(ended.get(i, math.inf), 2)}
               for i in range(n_workers)]
    if all(r["status"] == "ok" for r in rows.values()):
        return chief
    order = _failure_order(rows, ended)
    first = order[0]
    parts = [f"worker {first} of {n_workers} ({cfgs[0].workers[first]}) failed first: {rows[first]['status']}: "
             f"{rows[first].get('reason')}"]
    parts += [f"worker {i}: {rows[i]['status']}: {rows[i].get('reason')}" for i in order[1:]]
    failed = bench.skipped_row(cfgs[0], rows[first]["status"], " | ".join(parts)[:1500])
    failed["per_worker"] = json.dumps(summary, sort_keys=True)
    failed["wall_s"] = chief["wall_s"]
    return failed


def _kill_running(idents: dict[int, int], tasks: list[int]) -> set[int]:
    """Kill the worker processes (and their groups) that the threads of ``tasks`` are waiting for."""
    done = set()
    for i in tasks:
        proc = bench.RUNNING.get(idents.get(i, -1))
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            done.add(i)
    return done
