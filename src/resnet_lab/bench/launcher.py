"""Runs configurations: each in fresh worker processes (:mod:`resnet_lab.bench.worker_child`), one row each.

Each configuration runs in its own Python process because oneDNN (``TF_ENABLE_ONEDNN_OPTS``), XLA flags,
thread pools and the Keras backend are fixed when a framework is imported. The parent builds the worker's
environment (:func:`worker_env`), decides in milliseconds what cannot run here (:func:`precheck`: a backend
not installed, no GPU), waits for the worker's JSON result within the configuration's timeout, and turns a
crash, a timeout or an OOM kill into a row with its ``status`` and ``reason``: the matrix goes on.

:func:`run_rounds` is the one loop over processes (interleaved rounds, an optional budget) that a matrix
(:func:`run_matrix`), one configuration (:func:`run_config`) and ``gpu-run`` share; what it tells as it goes
goes to a :class:`Listener`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.bench.config import (
    AUTO_JIT_FLAGS,
    XLA_COMPILED_MARKER,
    BenchConfig,
    config_key,
    emulation_reason,
    process_key,
    resolve_model,
    slug,
    validate,
)
from resnet_lab.bench.identity import is_measured
from resnet_lab.bench.rows import combine, make_row, save_rows, skipped_row, static_fields
from resnet_lab.ceilings import profile
from resnet_lab.core import artifacts, child, provenance, requirements
from resnet_lab.core.choices import ENGINES
from resnet_lab.scaleout import cluster

WORKER_MODULE = "resnet_lab.bench.worker_child"


def worker_env(cfg: BenchConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the worker process for ``cfg``: everything TensorFlow reads at import."""
    env = dict(os.environ if base is None else base)
    if cfg.backend in ENGINES:  # no Keras in an engine's worker: it reads the export
        env.pop("KERAS_BACKEND", None)
    else:
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
    """(number of GPUs, how we know), without importing a framework: the one GPU probe
    (:func:`resnet_lab.core.requirements.gpus`), then the backend's build.

    A CPU-only build (tensorflow-cpu, torch ``+cpu``) counts as none; whether JAX has its CUDA plugin is
    only known in the worker (which then writes a ``skipped`` row)."""
    gpus, how = requirements.gpus()
    if not gpus:
        return 0, how
    if backend == "tensorflow" and requirements.installed("tensorflow") is None:
        return 0, f"{len(gpus)} GPU(s) present but only tensorflow-cpu is installed (pip install '.[gpu]')"
    torch = requirements.installed("torch")
    if backend == "torch" and "+cpu" in (torch or ""):
        return 0, f"{len(gpus)} GPU(s) present but torch is a CPU build ({torch})"
    return len(gpus), how


def precheck(cfg: BenchConfig) -> tuple[str, str] | None:
    """(status, reason) when ``cfg`` cannot run on this host, decided in milliseconds; None if it may run."""
    missing = requirements.missing(cfg.backend)  # an engine: and what makes the export it reads
    if missing:
        return "skipped", missing
    emulated = emulation_reason(cfg)  # a precision this CPU would emulate: never timed as a result
    if emulated:
        return "skipped", emulated
    if cfg.device == "gpu":
        n, why = gpus_visible(cfg.backend)
        if n == 0:
            return "skipped", why
        if n < cfg.replicas:
            return "skipped", f"{cfg.replicas} GPU replicas asked for, {n} GPU(s) visible"
    return None


def prepare_export(cfg: BenchConfig, log_dir: str | Path | None = None) -> tuple[str, str] | None:
    """An engine's export (:func:`resnet_lab.export.ensure`: made once, then reused) before its worker starts;
    ("error", why) when it could not be made, None when it is there (or ``cfg`` is not an engine's)."""
    if cfg.backend not in ENGINES:
        return None
    size = cfg.image_size or resolve_model(cfg.model)["default_image_size"]
    try:
        export.ensure(cfg.export_dir, cfg.model, size, [cfg.batch_size], onnx=cfg.backend != "iree",
                      stablehlo=cfg.backend == "iree", timeout_s=cfg.timeout_s, log_dir=log_dir)
    except export.ExportError as exc:
        return "error", str(exc)
    return None


def prepare_exports(cfgs: Iterable[BenchConfig], log_dir: str | Path | None = None) -> None:
    """Every export the engines of ``cfgs`` read, made up front: one JAX process per model and folder for all
    their batch sizes (and one torch process for the ONNX model), instead of one per row. A failure is left
    for each row to report (:func:`prepare_export`)."""
    wanted: dict[tuple, dict[str, Any]] = {}
    for cfg in cfgs:
        if cfg.backend not in ENGINES or precheck(cfg):
            continue
        size = cfg.image_size or resolve_model(cfg.model)["default_image_size"]
        w = wanted.setdefault((cfg.export_dir, cfg.model, size), {"batches": set(), "lower": set(), "onnx": False,
                                                                  "timeout_s": cfg.timeout_s})
        w["batches"].add(cfg.batch_size)
        if cfg.backend == "iree":
            w["lower"].add(cfg.batch_size)
        w["onnx"] = w["onnx"] or cfg.backend != "iree"
    for (root, model, size), w in wanted.items():
        with contextlib.suppress(export.ExportError):
            export.ensure(root, model, size, w["batches"], onnx=w["onnx"], stablehlo=w["lower"],
                          timeout_s=w["timeout_s"], log_dir=log_dir)


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
        pre = precheck(cfg) or prepare_export(cfg, log_dir)
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
    result, _, _ = _run_worker(cfg, {"task": "overhead", "rounds": rounds, "config": cfg.to_dict()}, None, python)
    return result


# Worker processes running now, by the thread waiting for each (local_cluster.launch_local ends them early).
RUNNING: dict[int, subprocess.Popen] = {}


def _log_path(cfgs: list[BenchConfig], log_dir: str | Path | None) -> Path | None:
    """Where a worker's log is kept: ``log_dir/HHMMSS-PID-SLUG[+N].log`` (None: not kept)."""
    if not log_dir:
        return None
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%H%M%S")
    more = f"+{len(cfgs) - 1}" if len(cfgs) > 1 else ""
    return Path(log_dir) / f"{stamp}-{os.getpid()}-{slug(cfgs[0])}{more}.log"


@contextlib.contextmanager
def _worker(cfgs: list[BenchConfig], requests: list[dict[str, Any]], log_dir: str | Path | None,
            python: str | None) -> Iterator[child.Child]:
    """A worker process on ``requests`` in the environment of ``cfgs[0]``, known in :data:`RUNNING` while
    this thread waits for it; closed (its process group killed if it still runs) on the way out."""
    with child.Child(WORKER_MODULE, requests, env=worker_env(cfgs[0]), log_path=_log_path(cfgs, log_dir),
                     python=python) as run:
        RUNNING[threading.get_ident()] = run.proc
        try:
            yield run
        finally:
            RUNNING.pop(threading.get_ident(), None)


def _result(outcome: child.Outcome) -> dict[str, Any]:
    """A worker's reply, or what its end says as a row's ``status`` and ``reason``: ``timeout``; ``oom`` for a
    SIGKILL the launcher did not send (the kernel's OOM killer sends it); ``error`` for any other death."""
    if outcome.ok:
        return outcome.reply
    if outcome.status == child.FAILED:
        return {"status": "error", "reason": outcome.error}
    status = {child.TIMEOUT: "timeout"}.get(outcome.status, "error")
    if outcome.status == child.KILLED and outcome.signum == signal.SIGKILL:
        status = "oom"
    return {"status": status, "reason": outcome.reason("worker")}


def _run_worker(cfg: BenchConfig, request: dict[str, Any], log_dir: str | Path | None,
                python: str | None) -> tuple[dict[str, Any], str, float]:
    """(result dict, worker log text, wall seconds) of one request in its own worker; failures become results."""
    with _worker([cfg], [request], log_dir, python) as run:
        outcome = next(run.outcomes(cfg.timeout_s))
    return _result(outcome), outcome.log, outcome.wall_s


def _run_process(cfgs: list[BenchConfig], log_dir: str | Path | None, python: str | None,
                 ended: Callable[[int, dict[str, Any], str, float], None]) -> int:
    """One worker process over ``cfgs`` (one process key); returns how many configurations ended.

    ``ended(i, result, its part of the log, wall seconds)`` is called as each one ends, in order; the
    process stops at the first one it did not survive (a crash, an OOM kill, its ``timeout_s`` since the
    previous result), which ends with a failure result. Wall seconds of the first configuration include the
    process's start."""
    n = 0
    with _worker(cfgs, [{"task": "measure", "config": c.to_dict()} for c in cfgs], log_dir, python) as run:
        for n, outcome in enumerate(run.outcomes([c.timeout_s for c in cfgs]), 1):
            ended(n - 1, _result(outcome), outcome.log, outcome.wall_s)
    return n


# ------------------------------------------------------------------------------------------ rounds
class Listener:
    """What :func:`run_rounds` tells as it goes; here each method does nothing. :func:`run_matrix`'s rows
    (:class:`MatrixRows`) and ``gpu-run``'s printer say what they do with it."""

    def starting(self, i: int) -> None:
        """A process is about to start on configuration ``i`` (the first of its group)."""

    def process_ended(self, i: int, r: int, row: dict[str, Any]) -> None:
        """Configuration ``i``'s process of round ``r`` (from 0) ended with ``row``."""

    def finished(self, i: int, row: dict[str, Any]) -> None:
        """Configuration ``i`` has its one row: its processes all ran, one measured nothing, or the budget ran out."""


def run_rounds(configs: list[BenchConfig], groups: list[list[int]], peak: dict[str, Any] | None = None,
               log_dir: str | Path | None = None, python: str | None = None, budget_s: float | None = None,
               listener: Listener | None = None) -> list[dict[str, Any] | None]:
    """Measure ``configs[i]`` for every i of ``groups`` in its ``repeats`` fresh processes, in interleaved
    rounds, and return each one's row by index (None where i is in no group).

    Round r runs, group by group (:func:`run_group`, a new process each time), every configuration with more
    than r repeats, so a slow drift of the host (heat, a neighbour, caches, clocks) spreads over all of them
    instead of falling on the last one (a lent H200: one row's processes run back to back moved 25 % between
    batches). A configuration's row (:func:`~resnet_lab.bench.rows.combine`) is known after its last process;
    a process that measured nothing (skipped, failed, timed out) ends its configuration's repeats, since a
    failure that repeats costs its timeout each round. Once ``budget_s`` seconds have passed no process starts:
    a configuration keeps the processes it has (its reason says how many it lacks), one with none is a skipped
    row saying so (a lent GPU comes with minutes, not hours). ``listener`` hears each start, process and row."""
    listener = listener or Listener()
    processes: dict[int, list[dict[str, Any]]] = {i: [] for group in groups for i in group}
    rows: list[dict[str, Any] | None] = [None] * len(configs)
    t0 = time.perf_counter()

    def finish(i: int, row: dict[str, Any]) -> None:
        rows[i] = row
        listener.finished(i, row)

    for r in range(max((configs[i].repeats for i in processes), default=0)):
        for group in groups:
            members = [i for i in group if rows[i] is None and configs[i].repeats > r]
            if not members:
                continue
            spent = time.perf_counter() - t0
            if budget_s is not None and spent >= budget_s:
                for i in (i for i in processes if rows[i] is None):
                    finish(i, _budget_row(configs[i], processes[i], peak, budget_s, spent))
                return rows

            def on_row(k: int, row: dict[str, Any], members: list[int] = members, r: int = r) -> None:
                i = members[k]
                processes[i].append(row)
                listener.process_ended(i, r, row)
                if len(processes[i]) == configs[i].repeats or not is_measured(row):
                    finish(i, combine(configs[i], processes[i], peak))

            listener.starting(members[0])
            run_group([configs[i] for i in members], peak, log_dir, python, on_row=on_row)
    return rows


def _budget_row(cfg: BenchConfig, processes: list[dict[str, Any]], peak: dict[str, Any] | None, budget_s: float,
                spent: float) -> dict[str, Any]:
    """The row of a configuration the budget stopped: its processes so far, or a skipped row saying why."""
    if not processes:
        return skipped_row(cfg, "skipped", f"not run: the run's budget of {budget_s:g} s for benchmark rows was "
                                           f"spent ({spent:.0f} s)")
    row = combine(cfg, processes, peak)
    note = f"{len(processes)} of {cfg.repeats} processes: the run's budget of {budget_s:g} s was spent"
    row["reason"] = "; ".join(x for x in (row.get("reason"), note) if x)
    return row


def run_config(cfg: BenchConfig, peak: dict[str, Any] | None = None, log_dir: str | Path | None = None,
               python: str | None = None) -> dict[str, Any]:
    """Run one configuration in a fresh worker process (``cfg.repeats`` of them, one after another) and
    return its row (never raises for a failed run)."""
    return run_rounds([validate(cfg)], [[0]], peak, log_dir, python)[0]  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------ a matrix
@dataclass
class MatrixPlan:
    """What a matrix runs, decided before anything starts: which configurations are measured here, which stand
    for another one (the same :func:`~resnet_lab.bench.config.config_key`), and which share a process."""

    to_run: list[int]             # measured here, in order
    copies: dict[int, list[int]]  # measured here -> later configurations of this matrix with its key
    earlier: dict[int, dict[str, Any]]  # measured by an earlier matrix: its row, under this label
    groups: list[list[int]]       # to_run in runs that may share a worker process (_groups)


def plan_matrix(configs: list[BenchConfig], measured: dict[str, dict[str, Any]] | None = None,
                skip: Mapping[int, str] | None = None) -> MatrixPlan:
    """The :class:`MatrixPlan` of ``configs``; ``measured`` (by config_key) holds rows of earlier matrices;
    ``skip`` (index -> reason) the configurations the caller's plan leaves out (:mod:`resnet_lab.runs.budget`:
    emulated here, or over its section's budget): each a skipped row with its reason, no process started."""
    to_run: list[int] = []
    copies: dict[int, list[int]] = {}
    earlier: dict[int, dict[str, Any]] = {}
    first: dict[str, int] = {}
    for i, cfg in enumerate(configs):
        key = config_key(cfg)
        if skip and i in skip:
            earlier[i] = skipped_row(cfg, "skipped", skip[i], static=static_fields(cfg))
        elif measured is not None and key in measured:
            earlier[i] = _same_run(measured[key], cfg)
        elif measured is not None and key in first:
            copies[first[key]].append(i)
        else:
            first.setdefault(key, i)
            copies[i] = []
            to_run.append(i)
    return MatrixPlan(to_run, copies, earlier, _groups(configs, to_run))


def _same_run(earlier: dict[str, Any], cfg: BenchConfig) -> dict[str, Any]:
    """An earlier row standing for ``cfg`` (the same configuration under another label)."""
    return {**earlier, "label": cfg.label,
            "same_run_as": earlier.get("same_run_as") or earlier["label"] or slug(cfg)}


def _groups(configs: list[BenchConfig], to_run: list[int]) -> list[list[int]]:
    """The indices of ``to_run`` in runs that may share a worker process: neighbours among those to run
    (a row measured by an earlier matrix in between does not part them) with one process key, each
    configuration once."""
    groups: list[list[int]] = []
    for i in to_run:
        last = groups[-1] if groups else None
        pkey = process_key(configs[i])
        if (last and pkey is not None and process_key(configs[last[0]]) == pkey
                and config_key(configs[i]) not in {config_key(configs[j]) for j in last}):
            last.append(i)
        else:
            groups.append([i])
    return groups


@dataclass
class Progress:
    """How far a matrix is, in units: its processes where a configuration repeats (the runner's estimate of
    what is left), else its configurations. Each unit done is told to the runner (:func:`resnet_lab.core.
    artifacts.progress`) and moves the bar, where there is one."""

    name: str
    total: int
    per_process: bool
    bar: Any = None  # a tqdm bar, or None
    done: int = 0
    t0: float = field(default_factory=time.perf_counter)

    @classmethod
    def of(cls, name: str, configs: list[BenchConfig], plan: MatrixPlan, bar: bool) -> Progress:
        per_process = any(configs[i].repeats > 1 for i in plan.to_run)
        total = (sum(configs[i].repeats for i in plan.to_run) + len(configs) - len(plan.to_run) if per_process
                 else len(configs))
        shown = None
        if bar:
            from tqdm.auto import tqdm

            shown = tqdm(total=total, desc=name, unit="process" if per_process else "config")
        return cls(name, total, per_process, shown)

    def print(self, row: dict[str, Any], label: str | None) -> None:
        """One unit done: ``row`` (a process's or a configuration's), under ``label``."""
        self.done += 1
        fields = ("mode", "batch_size", "status", "images_per_sec", "wall_s", "same_run_as")
        artifacts.progress(matrix=self.name, i=self.done, n=self.total, elapsed_s=time.perf_counter() - self.t0,
                           label=label, **{k: row.get(k) for k in fields})
        if self.bar:
            self.bar.update(1)

    def skip(self, units: int) -> None:
        """Units that will not run (a configuration stopped early): the bar moves past them."""
        if self.bar:
            self.bar.update(units)

    def now(self, label: str) -> None:
        if self.bar:
            self.bar.set_postfix_str(label, refresh=True)

    def close(self) -> None:
        if self.bar:
            self.bar.close()


class MatrixRows(Listener):
    """A matrix's rows as the rounds give them: kept in the matrix's order (a row waits for those before it),
    each configuration of the same key given its run's row, written after each one (``out``), counted."""

    def __init__(self, configs: list[BenchConfig], plan: MatrixPlan, progress: Progress,
                 out: str | Path | None = None, name: str = "bench",
                 measured: dict[str, dict[str, Any]] | None = None) -> None:
        self.configs, self.plan, self.progress = configs, plan, progress
        self.out, self.name, self.measured = out, name, measured
        self.final: list[dict[str, Any] | None] = [plan.earlier.get(i) for i in range(len(configs))]
        self.rows: list[dict[str, Any]] = []
        self.ran = dict.fromkeys(plan.to_run, 0)

    def _name(self, i: int) -> str:
        return self.configs[i].label or slug(self.configs[i])

    def starting(self, i: int) -> None:
        self.progress.now(self._name(i))

    def process_ended(self, i: int, r: int, row: dict[str, Any]) -> None:
        self.ran[i] += 1
        if self.progress.per_process:
            self.progress.print(row, f"{self._name(i)} (process {r + 1} of {self.configs[i].repeats})")

    def finished(self, i: int, row: dict[str, Any]) -> None:
        if self.progress.per_process:  # a configuration stopped early: its processes that will not run
            self.progress.skip(self.configs[i].repeats - self.ran[i])
        if self.measured is not None:
            self.measured[config_key(self.configs[i])] = row
        self.final[i] = row
        for j in self.plan.copies[i]:
            self.final[j] = _same_run(row, self.configs[j])
        self.flush()

    def flush(self) -> None:
        """Every row known in order so far, written and counted (each process was counted as it ended)."""
        while len(self.rows) < len(self.configs) and self.final[len(self.rows)] is not None:
            row: dict[str, Any] = self.final[len(self.rows)]  # type: ignore[assignment]
            self.rows.append(row)
            if self.out:
                save_rows(self.out, self.rows, self.name)
            if not self.progress.per_process or row.get("same_run_as"):
                self.progress.print(row, row.get("label"))


def run_matrix(configs: Iterable[BenchConfig], out: str | Path | None = None,
               peak: dict[str, Any] | None = None, progress: bool = True,
               name: str = "bench", measured: dict[str, dict[str, Any]] | None = None,
               skip: Mapping[int, str] | None = None) -> list[dict[str, Any]]:
    """Run every configuration and return its rows, one per configuration, in order.

    A straight line: every configuration validated at the door (one that cannot run stops the matrix before
    anything starts), then the plan (:func:`plan_matrix`), the engines' exports, the rounds
    (:func:`run_rounds`: each configuration in ``repeats`` fresh processes, interleaved; neighbours that share
    a process key share each round's process), the rows (:class:`MatrixRows`). With ``out``, ``<name>.csv``
    and ``<name>.json`` are rewritten after every row (a crash keeps what was measured) and worker logs go to
    ``out/logs/``. ``measured`` (a dict the caller keeps across calls, by
    :func:`~resnet_lab.bench.config.config_key`) shares runs between matrices: a configuration measured
    before is not run again; its row is that run's, under this label, with ``same_run_as`` naming it.
    """
    configs = [validate(c) for c in configs]
    plan = plan_matrix(configs, measured, skip)
    log_dir = Path(out) / "logs" if out else None
    prepare_exports((configs[i] for i in plan.to_run), log_dir)  # the engines' exports, each made in one go
    rows = MatrixRows(configs, plan, Progress.of(name, configs, plan, bar=progress), out, name, measured)
    try:
        rows.flush()  # those measured by an earlier matrix, up to the first to run here
        run_rounds(configs, plan.groups, peak, log_dir, listener=rows)
    finally:
        rows.progress.close()
    return rows.rows


def running_process(thread_ident: int) -> subprocess.Popen | None:
    """The worker process that the thread ``thread_ident`` is waiting for right now, if any."""
    return RUNNING.get(thread_ident)
