"""Scale out: one benchmark configuration across workers with ``tf.distribute.MultiWorkerMirroredStrategy``.

Every worker runs the same command with the same cluster list and its own index; worker 0 is the chief::

    resnet-lab bench --model resnet50 --workers hostA:2222,hostB:2222 --task-index 0   # on hostA
    resnet-lab bench --model resnet50 --workers hostA:2222,hostB:2222 --task-index 1   # on hostB
    resnet-lab bench --model tiny-resnet --local-workers 2 ...   # N workers on 127.0.0.1 (trials, tests)

How it works:

- **Cluster.** :func:`tf_config` turns ``workers`` and ``task_index`` into ``TF_CONFIG`` (``launcher.worker_env``
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

The pieces live by side: this module (plain Python) has the checks, ``TF_CONFIG``, the row fields and the
peer-error wording; :mod:`~resnet_lab.scaleout.cluster_worker` the worker's side (TensorFlow);
:mod:`~resnet_lab.bench.local_cluster` the one-host launcher.
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Any, Protocol

from resnet_lab.core.choices import check_bool, check_int, check_positive
from resnet_lab.core.errors import UsageError


class ClusterConfig(Protocol):
    """What this package reads of a configuration. A :class:`~resnet_lab.bench.config.BenchConfig` is one:
    the benchmark layer sits above this one and hands its configurations down (its ``validate`` checks the
    cluster fields with :func:`check`); nothing here knows the benchmark's other knobs."""

    backend: str
    device: str
    xla: str
    replicas: int
    batch_size: int
    workers: list[str] | None
    task_index: int | None
    collective: str
    peer_timeout_s: float
    baseline_images_per_sec: float | None
    measure_baseline: bool

# A test hook: "TASK:CALL" makes worker TASK kill itself (SIGKILL, as a crash) at its CALL-th step call
# (1 = the compiling call). Deterministic, unlike killing a process from outside at the right moment.
FAULT_ENV = "RESNET_LAB_TEST_KILL"
WATCHDOG_EXIT = 3


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


def check(cfg: ClusterConfig) -> None:
    """The multi-worker fields of ``cfg`` (called by ``config.validate``): UsageError, one line, before TF."""
    check_positive("peer timeout", cfg.peer_timeout_s, unit="seconds")
    check_positive("baseline images/sec", cfg.baseline_images_per_sec, optional=True)
    check_bool("measure_baseline", cfg.measure_baseline)
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
    check_int("task index", cfg.task_index, 0)
    if cfg.task_index >= n:
        raise UsageError(f"task index: {cfg.task_index} is not in 0..{n - 1} (the {n} workers' indices)")
    if cfg.backend != "tensorflow":
        raise UsageError(f"--workers runs TensorFlow's MultiWorkerMirroredStrategy: backend must be tensorflow, "
                         f"got {cfg.backend!r}")
    if cfg.replicas != 1:
        raise UsageError("with --workers each worker runs one replica: --replicas must be 1")
    if cfg.collective == "nccl" and cfg.device != "gpu":
        raise UsageError("collective nccl needs GPUs (--device gpu); on CPU use ring or auto")
    if cfg.xla == "jit" and cfg.device == "cpu":
        raise UsageError("xla jit with --workers is not supported on CPU: TensorFlow cannot compile the step's "
                         "collectives with XLA for CPU devices (UNIMPLEMENTED); use xla off or auto")


def tf_config(cfg: ClusterConfig) -> dict[str, Any]:
    """The ``TF_CONFIG`` of ``cfg``'s worker: the whole cluster, and which task this process is."""
    return {"cluster": {"worker": [w.strip() for w in cfg.workers]},
            "task": {"type": "worker", "index": int(cfg.task_index)}}


def collective_used(cfg: ClusterConfig) -> str:
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


def scaling_efficiency(global_ips: float | None, baselines: list[float | None]) -> float | None:
    """Global images/sec ÷ the sum of every worker's one-worker images/sec; None when any is unknown."""
    if not global_ips or not baselines or any(not b for b in baselines):
        return None
    return global_ips / sum(baselines)


def row_fields(cfg: ClusterConfig, result: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The multi-worker fields of an ``ok`` row (``row`` already has the global statistics). MFU against
    the cluster's peak is the row's business (``bench.rows.make_row``): it knows the peaks."""
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
    return out


def combine_measurements(cfg: ClusterConfig, rows: list[list[float]]) -> dict[str, Any]:
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


def describe_peer_error(cfg: ClusterConfig, exc: BaseException, joining: bool = False) -> str:
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
