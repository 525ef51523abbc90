"""Runs configurations: each in a fresh worker process (:mod:`resnet_lab.bench.worker_child`), one row each.

Each configuration runs in its own Python process because oneDNN (``TF_ENABLE_ONEDNN_OPTS``), XLA flags,
thread pools and the Keras backend are fixed when a framework is imported. The parent builds the worker's
environment (:func:`worker_env`), decides in milliseconds what cannot run here (:func:`precheck`: a backend
not installed, no GPU), waits for the worker's JSON result within the configuration's timeout, and turns a
crash, a timeout or an OOM kill into a row with its ``status`` and ``reason``: the matrix goes on.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from resnet_lab.bench.config import (
    AUTO_JIT_FLAGS,
    XLA_COMPILED_MARKER,
    BenchConfig,
    config_key,
    process_key,
    slug,
    validate,
)
from resnet_lab.bench.rows import backend_version, make_row, save_rows, skipped_row, static_fields
from resnet_lab.ceilings import profile
from resnet_lab.core import artifacts, provenance
from resnet_lab.scaleout import cluster

WORKER_MODULE = "resnet_lab.bench.worker_child"


def worker_env(cfg: BenchConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the worker process for ``cfg``: everything TensorFlow reads at import."""
    env = dict(os.environ if base is None else base)
    env["KERAS_BACKEND"] = cfg.backend
    if cfg.backend == "jax":
        if cfg.device == "cpu":
            env["JAX_PLATFORMS"] = "cpu"
        if cfg.device == "cpu" and cfg.replicas > 1:  # N XLA:CPU devices in one process (emulated replicas)
            flags = [f for f in env.get("XLA_FLAGS", "").split()
                     if not f.startswith("--xla_force_host_platform_device_count")]
            env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={cfg.replicas}"])
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # GPU: allocate as needed, as TF does
    env["TF_ENABLE_ONEDNN_OPTS"] = "1" if cfg.onednn == "on" else "0"
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"  # the XLA "Compiled cluster" INFO line tells what ran
    env["PYTHONUNBUFFERED"] = "1"
    flags = [f for f in env.get("TF_XLA_FLAGS", "").split() if not f.startswith(
        ("--tf_xla_auto_jit", "--tf_xla_cpu_global_jit"))]
    if cfg.xla == "auto":
        flags += AUTO_JIT_FLAGS.split()
    if flags:
        env["TF_XLA_FLAGS"] = " ".join(flags)
    else:
        env.pop("TF_XLA_FLAGS", None)
    if cfg.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU row must not touch (or be slowed by initialising) a GPU
    root = str(provenance.package_root())
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root, *rest])
    if cfg.onednn_profile:
        env["ONEDNN_VERBOSE"] = "1"
    env.pop("TF_CONFIG", None)
    if cfg.workers:  # the cluster and this task: what MultiWorkerMirroredStrategy reads
        env["TF_CONFIG"] = json.dumps(cluster.tf_config(cfg))
    env.update(cfg.env)
    return env


def gpus_visible(backend: str = "tensorflow") -> tuple[int, str]:
    """(number of GPUs, how we know), without importing a framework: nvidia-smi, then the backend's build.

    A CPU-only build (tensorflow-cpu, torch ``+cpu``) counts as none; whether JAX has its CUDA plugin is
    only known in the worker (which then writes a ``skipped`` row)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return 0, "CUDA_VISIBLE_DEVICES hides every GPU"
    gpus = provenance.gpu_info()
    if not gpus:
        return 0, "no GPU is visible on this host (nvidia-smi finds none)"
    if backend == "tensorflow":
        versions = provenance.package_versions(("tensorflow", "tensorflow-cpu"))
        if versions.get("tensorflow") is None:
            return 0, f"{len(gpus)} GPU(s) present but only tensorflow-cpu is installed (pip install '.[gpu]')"
    if backend == "torch" and "+cpu" in (backend_version("torch") or ""):
        return 0, f"{len(gpus)} GPU(s) present but torch is a CPU build ({backend_version('torch')})"
    return len(gpus), "nvidia-smi"


def precheck(cfg: BenchConfig) -> tuple[str, str] | None:
    """(status, reason) when ``cfg`` cannot run on this host, decided in milliseconds; None if it may run."""
    if backend_version(cfg.backend) is None:
        extra = "" if cfg.backend == "tensorflow" else f" (pip install '.[{cfg.backend}]')"
        return "skipped", f"backend {cfg.backend} is not installed{extra}"
    if cfg.device == "gpu":
        n, why = gpus_visible(cfg.backend)
        if n == 0:
            return "skipped", why
        if n < cfg.replicas:
            return "skipped", f"{cfg.replicas} GPU replicas asked for, {n} GPU(s) visible"
    return None


def _tail(text: str) -> str:
    """The line of a worker log that best says why it died: the last error-looking line, else the last."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for marker in ("Error", "error", "Illegal", "Check failed", "Killed"):
        hits = [ln for ln in lines if marker in ln]
        if hits:
            return hits[-1][:400]
    return (lines[-1] if lines else "(no output)")[:400]


def kill_group(proc: subprocess.Popen) -> None:
    """End the worker and the processes it started (its own session), by its process id."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def baseline_config(cfg: BenchConfig) -> BenchConfig:
    """The one-worker configuration whose images/sec is the scaling baseline: same knobs, no cluster."""
    return dataclasses.replace(cfg, workers=None, task_index=None, label=f"{cfg.label or 'baseline'} (1 worker)",
                               measure_baseline=False, baseline_images_per_sec=None)


def with_baseline(cfg: BenchConfig, peak: dict[str, Any] | None = None, log_dir: str | Path | None = None,
                  python: str | None = None) -> BenchConfig:
    """``cfg`` with ``baseline_images_per_sec`` measured here (a one-process run) when it is asked for."""
    if not cfg.workers or cfg.baseline_images_per_sec is not None or not cfg.measure_baseline:
        return cfg
    row = run_config(baseline_config(cfg), peak, log_dir=log_dir, python=python)
    if row["status"] != "ok":
        print(f"resnet-lab bench: the one-worker baseline failed ({row['status']}: {row.get('reason')}); "
              f"no scaling efficiency", file=sys.stderr)
        return dataclasses.replace(cfg, measure_baseline=False)
    return dataclasses.replace(cfg, baseline_images_per_sec=row["images_per_sec"], measure_baseline=False)


def run_config(cfg: BenchConfig, peak: dict[str, Any] | None = None, log_dir: str | Path | None = None,
               python: str | None = None) -> dict[str, Any]:
    """Run one configuration in a fresh worker process and return its row (never raises for a failed run)."""
    return run_group([cfg], peak, log_dir, python)[0]


def run_group(cfgs: list[BenchConfig], peak: dict[str, Any] | None = None, log_dir: str | Path | None = None,
              python: str | None = None,
              on_row: Callable[[int, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Rows of configurations that share a :func:`~resnet_lab.bench.config.process_key`, measured one after
    another in one worker process (a new one after a crash or a timeout), in order. ``on_row(i, row)`` is
    called as each row is known."""
    cfgs = [validate(c) for c in cfgs]
    if len({process_key(c) for c in cfgs}) > 1 or (len(cfgs) > 1 and process_key(cfgs[0]) is None):
        raise ValueError("run_group takes configurations of one process key")
    rows: list[dict[str, Any] | None] = [None] * len(cfgs)
    todo = []
    for i, cfg in enumerate(cfgs):
        if cfg.workers:  # the one-worker baseline of scaling efficiency, measured first unless given
            cfgs[i] = cfg = with_baseline(cfg, peak, log_dir, python)
        pre = precheck(cfg)
        if pre:
            rows[i] = skipped_row(cfg, *pre, static=static_fields(cfg))
            if on_row:
                on_row(i, rows[i])
        else:
            todo.append(i)
    while todo:
        batch = list(todo)

        def ended(k: int, result: dict[str, Any], log_text: str, wall: float, batch: list[int] = batch) -> None:
            i = batch[k]
            rows[i] = _row(cfgs[i], result, log_text, wall, peak)
            if on_row:
                on_row(i, rows[i])

        n = _run_process([cfgs[i] for i in batch], log_dir, python, ended)
        todo = batch[n:]
    return rows  # type: ignore[return-value]


def _row(cfg: BenchConfig, result: dict[str, Any], log_text: str, wall: float,
         peak: dict[str, Any] | None) -> dict[str, Any]:
    if cfg.backend == "tensorflow" and (result.get("status") == "ok" or result.get("xla_ran") is None):
        result["xla_ran"] = XLA_COMPILED_MARKER in log_text
    row = make_row(cfg, result, peak, static_fields(cfg))
    row["wall_s"] = wall
    if row.get("timed_s") is not None and result.get("setup_s") is not None:  # start, GEMM check, teardown
        row["startup_s"] = max(0.0, wall - result["setup_s"] - (result.get("first_step_s") or 0)
                               - (result.get("warmup_s") or 0) - row["timed_s"])
    if cfg.onednn_profile and row["status"] == "ok":
        prof = profile.parse_onednn_verbose(log_text)
        row["onednn_profile"] = json.dumps(prof, sort_keys=True)
        row["onednn_share"] = prof.get("onednn_share")
        row["conv_share"] = prof.get("conv_share")
        row["conv_gflops"] = prof.get("conv_gflops")
    return row


def overhead(cfg: BenchConfig, rounds: int = 3, python: str | None = None) -> dict[str, Any]:
    """Harness loop vs a bare loop over the same compiled step, in one worker (see measure.overhead)."""
    validate(cfg)
    pre = precheck(cfg)
    if pre:
        return {"status": pre[0], "reason": pre[1]}
    cfg = dataclasses.replace(cfg, env={**cfg.env, "RESNET_LAB_OVERHEAD_ROUNDS": str(rounds)})
    result, _, _ = _run_worker(cfg, ["--overhead"], None, python)
    return result


# Worker processes running now, by the thread waiting for each (local_cluster.launch_local ends them early).
RUNNING: dict[int, subprocess.Popen] = {}


def _run_worker(cfg: BenchConfig, extra_args: list[str], log_dir: str | Path | None,
                python: str | None) -> tuple[dict[str, Any], str, float]:
    """(result dict, worker log text, wall seconds) of one worker process; failures become results."""
    with tempfile.TemporaryDirectory(prefix="resnet-lab-bench-") as tmp:
        tmp_path = Path(tmp)
        cfg_path, result_path = tmp_path / "config.json", tmp_path / "result.json"
        cfg_path.write_text(json.dumps(cfg.to_dict()))
        log_path = tmp_path / "worker.log"
        if log_dir:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
            stamp = _dt.datetime.now().strftime("%H%M%S")
            log_path = Path(log_dir) / f"{stamp}-{os.getpid()}-{slug(cfg)}.log"
        t0 = time.perf_counter()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [python or sys.executable, "-m", WORKER_MODULE, *extra_args, str(cfg_path),
                 str(result_path)],
                env=worker_env(cfg), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            RUNNING[threading.get_ident()] = proc
            try:
                rc = proc.wait(timeout=cfg.timeout_s)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                rc = None
            except BaseException:  # KeyboardInterrupt: never leave a worker behind
                kill_group(proc)
                raise
            finally:
                RUNNING.pop(threading.get_ident(), None)
        wall = time.perf_counter() - t0
        log_text = log_path.read_text(errors="replace")
        if rc is None:
            result = {"status": "timeout", "reason": f"no result after {cfg.timeout_s:g} s (worker killed)"}
        elif result_path.exists():
            result = json.loads(result_path.read_text())
        elif rc < 0 and -rc == signal.SIGKILL:
            result = {"status": "oom",
                      "reason": f"worker killed by SIGKILL (out of memory?): {_tail(log_text)}"}
        else:
            result = {"status": "error", "reason": f"worker exited {rc} without a result: {_tail(log_text)}"}
    return result, log_text, wall


def _run_process(cfgs: list[BenchConfig], log_dir: str | Path | None, python: str | None,
                 ended: Callable[[int, dict[str, Any], str, float], None]) -> int:
    """One worker process over ``cfgs`` (one process key); returns how many configurations ended.

    ``ended(i, result, its part of the log, wall seconds)`` is called as each one ends, in order; the
    process stops at the first one it did not survive (a crash, an OOM kill, its ``timeout_s`` since the
    previous result), which ends with a failure result. Wall seconds of the first configuration include the
    process's start."""
    with tempfile.TemporaryDirectory(prefix="resnet-lab-bench-") as tmp:
        tmp_path = Path(tmp)
        cfg_path, result_path = tmp_path / "configs.json", tmp_path / "results.jsonl"
        cfg_path.write_text(json.dumps([c.to_dict() for c in cfgs]))
        result_path.touch()
        log_path = tmp_path / "worker.log"
        if log_dir:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
            stamp = _dt.datetime.now().strftime("%H%M%S")
            more = f"+{len(cfgs) - 1}" if len(cfgs) > 1 else ""
            log_path = Path(log_dir) / f"{stamp}-{os.getpid()}-{slug(cfgs[0])}{more}.log"
        results: list[dict[str, Any]] = []
        walls: list[float] = []
        failure: dict[str, Any] | None = None
        t_last = time.perf_counter()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [python or sys.executable, "-m", WORKER_MODULE, str(cfg_path), str(result_path)],
                env=worker_env(cfgs[0]), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            RUNNING[threading.get_ident()] = proc
            try:
                while len(results) < len(cfgs):
                    rc = proc.poll()
                    for line in result_path.read_text().splitlines()[len(results):]:
                        results.append(json.loads(line))
                        now = time.perf_counter()
                        walls.append(now - t_last)
                        t_last = now
                        log.flush()
                        part = profile.split_log(log_path.read_text(errors="replace")).get(len(results) - 1, "")
                        ended(len(results) - 1, results[-1], part, walls[-1])
                    if len(results) == len(cfgs):
                        break
                    current = cfgs[len(results)]
                    if rc is not None:
                        failure = {"rc": rc}
                        break
                    if time.perf_counter() - t_last > current.timeout_s:
                        kill_group(proc)
                        failure = {"timeout": current.timeout_s}
                        break
                    time.sleep(0.1)
                if failure is None:
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        kill_group(proc)
            except BaseException:  # KeyboardInterrupt: never leave a worker behind
                kill_group(proc)
                raise
            finally:
                RUNNING.pop(threading.get_ident(), None)
        parts = profile.split_log(log_path.read_text(errors="replace"))
        if failure is not None:
            text = parts.get(len(results), "")
            if "timeout" in failure:
                result = {"status": "timeout", "reason": f"no result after {failure['timeout']:g} s (worker killed)"}
            elif failure["rc"] < 0 and -failure["rc"] == signal.SIGKILL:
                result = {"status": "oom", "reason": f"worker killed by SIGKILL (out of memory?): {_tail(text)}"}
            else:
                result = {"status": "error",
                          "reason": f"worker exited {failure['rc']} without a result: {_tail(text)}"}
            results.append(result)
            ended(len(results) - 1, result, text, time.perf_counter() - t_last)
    return len(results)


def run_matrix(configs: Iterable[BenchConfig], out: str | Path | None = None,
               peak: dict[str, Any] | None = None, progress: bool = True,
               name: str = "bench", measured: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Run every configuration (one process each) and return the rows.

    With ``out``, ``<name>.csv`` and ``<name>.json`` are rewritten after every row (a crash keeps what was
    measured) and worker logs go to ``out/logs/``. ``measured`` (a dict the caller keeps across calls, by
    :func:`~resnet_lab.bench.config.config_key`) shares runs between matrices: a configuration measured
    before is not run again; its row is that run's, under this label, with ``same_run_as`` naming it.
    """
    configs = [validate(c) for c in configs]
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(configs), desc=name, unit="config")

    def done(row: dict[str, Any]) -> None:
        rows.append(row)
        if out:
            save_rows(out, rows, name)
        artifacts.progress(matrix=name, i=len(rows), n=len(configs), elapsed_s=time.perf_counter() - t0,
                           **{k: row.get(k) for k in ("label", "mode", "batch_size", "status", "images_per_sec",
                                                      "wall_s", "same_run_as")})
        if bar:
            bar.update(1)

    log_dir = Path(out) / "logs" if out else None
    try:
        i = 0
        while i < len(configs):
            cfg = configs[i]
            key = config_key(cfg)
            if measured is not None and key in measured:
                earlier = measured[key]
                done({**earlier, "label": cfg.label,
                      "same_run_as": earlier.get("same_run_as") or earlier["label"] or slug(cfg)})
                i += 1
                continue
            # The next configurations with this one's process key (and not measured yet) share its process.
            group = [cfg]
            pkey = process_key(cfg)
            while (pkey is not None and i + len(group) < len(configs)
                   and process_key(configs[i + len(group)]) == pkey
                   and (measured is None or config_key(configs[i + len(group)]) not in measured)
                   and config_key(configs[i + len(group)]) not in {config_key(g) for g in group}):
                group.append(configs[i + len(group)])
            if bar:
                bar.set_postfix_str(cfg.label or slug(cfg), refresh=True)
            pending: dict[int, dict[str, Any]] = {}

            def finished(k: int, row: dict[str, Any], group: list[BenchConfig] = group,
                         pending: dict[int, dict[str, Any]] = pending, start: int = i) -> None:
                if measured is not None:
                    measured[config_key(group[k])] = row
                pending[k] = row
                while len(rows) - start in pending:  # in the configurations' order
                    done(pending.pop(len(rows) - start))

            run_group(group, peak, log_dir, on_row=finished)
            i += len(group)
    finally:
        if bar:
            bar.close()
    return rows


def running_process(thread_ident: int) -> subprocess.Popen | None:
    """The worker process that the thread ``thread_ident`` is waiting for right now, if any."""
    return RUNNING.get(thread_ident)
