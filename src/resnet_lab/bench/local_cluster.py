"""N benchmark workers on this host (loopback ports): the trial and test path of scale-out.

``resnet-lab bench --local-workers N`` and notebook 03 use :func:`launch_local`; each worker goes through
:func:`resnet_lab.bench.launcher.run_config` with ``workers``/``task_index`` set, exactly the path of
``resnet-lab bench --workers ... --task-index I`` on a real host (see :mod:`resnet_lab.scaleout.cluster`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

from resnet_lab.bench import launcher
from resnet_lab.bench.config import BenchConfig, validate
from resnet_lab.bench.rows import save_rows, skipped_row
from resnet_lab.core import child
from resnet_lab.core.choices import check_int
from resnet_lab.core.errors import UsageError


def table(rows: list[dict[str, Any]]):
    """The multi-worker columns of ``rows`` as a DataFrame: throughput, efficiency, what each worker measured."""
    import pandas as pd

    cols = ["label", "model", "mode", "batch_size", "global_batch", "workers", "collective", "status",
            "global_images_per_sec", "per_worker_images_per_sec", "baseline_images_per_sec", "scaling_efficiency",
            "stderr", "step_time_p50", "wall_s", "reason"]
    return pd.DataFrame([{k: r.get(k) for k in cols} for r in rows], columns=cols)


def scale_out(cfg: BenchConfig, workers: list[str] | None = None, task_index: int = 0, local_workers: int = 0,
              peak: dict[str, Any] | None = None, out: str | Path | None = None,
              name: str = "bench") -> list[dict[str, Any]]:
    """The multi-worker row of ``cfg``: as one worker of a real cluster (``workers``, ``task_index``), or
    ``local_workers`` workers on this host; ``[]`` when neither is asked for.

    With ``out``, worker logs go to ``out/logs`` and the chief (task 0, or the launcher of local workers)
    writes ``<name>.csv``/``.json``; another task's row is returned, not written (the chief has it too).
    """
    if workers and local_workers:
        raise UsageError("give --local-workers or --workers, not both")
    log_dir = Path(out) / "logs" if out else None
    if workers:
        cfg = dataclasses.replace(cfg, workers=list(workers), task_index=task_index,
                                  label=cfg.label or f"{len(workers)} workers")
        rows = [launcher.run_config(validate(cfg), peak, log_dir=log_dir)]
    elif local_workers:
        cfg = dataclasses.replace(cfg, label=cfg.label or f"{local_workers} local workers")
        rows = [launch_local(cfg, local_workers, peak=peak, log_dir=log_dir)]
    else:
        return []
    if out and (not workers or task_index == 0):
        save_rows(out, rows, name)
    return rows


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports free on ``host`` right now, drawn at random below the kernel's ephemeral range.

    Not the OS's ``bind(0)`` choice: that one comes from the ephemeral range, where every outgoing connection
    of any process (gRPC clients of another local cluster included) may take it before our worker binds it.
    """
    low = max(1024, min(_ephemeral_range()[0], 32768) - 12000)
    high = _ephemeral_range()[0] - 1
    rng = random.SystemRandom()
    socks: list[socket.socket] = []
    try:
        for _ in range(200 * n):
            if len(socks) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, rng.randint(low, high)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        if len(socks) < n:
            raise RuntimeError(f"no {n} free ports in {low}-{high} on {host}")
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

    Each worker goes through ``launcher.run_config`` with ``workers``/``task_index`` set, exactly the path of
    ``resnet-lab bench --workers ... --task-index I`` on a real host, in a thread of this process. The
    baseline is measured once, before the workers start (so they do not compete with it), unless given.
    When a worker fails the others get ``peer_timeout_s + grace_s`` to stop by themselves, then their
    process groups are killed. A failed run returns an error row whose reason names the failed worker first,
    and whose ``per_worker`` lists every worker's status, reason and when it ended.
    """
    check_int("local workers", n_workers, 1)
    if cfg.workers:
        raise UsageError("give --local-workers or --workers, not both")
    base = dataclasses.replace(cfg, workers=[f"{host}:{p}" for p in range(1, n_workers + 1)], task_index=0)
    validate(base)  # every check of a worker's configuration, before anything starts
    cfg = launcher.with_baseline(base, peak, log_dir, python)
    # the ports last, right before the workers bind them: a baseline takes seconds, time enough for another
    # process to take a port chosen before it
    cfg = dataclasses.replace(cfg, workers=[f"{host}:{p}" for p in free_ports(n_workers, host)])
    cfgs = [dataclasses.replace(cfg, task_index=i) for i in range(n_workers)]
    rows: dict[int, dict[str, Any]] = {}
    ended: dict[int, float] = {}
    idents: dict[int, int] = {}
    t0 = time.monotonic()

    def run_one(i: int) -> None:
        idents[i] = threading.get_ident()
        try:
            rows[i] = launcher.run_config(cfgs[i], peak, log_dir=log_dir, python=python)
        except Exception as exc:  # a harness bug in one thread must not leave the others waiting
            rows[i] = skipped_row(cfgs[i], "error", f"{type(exc).__name__}: {exc}")
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
    failed = skipped_row(cfgs[0], rows[first]["status"], " | ".join(parts)[:1500])
    failed["per_worker"] = json.dumps(summary, sort_keys=True)
    failed["wall_s"] = chief["wall_s"]
    return failed


def _kill_running(idents: dict[int, int], tasks: list[int]) -> set[int]:
    """Kill the worker processes (and their groups) that the threads of ``tasks`` are waiting for."""
    done = set()
    for i in tasks:
        proc = launcher.running_process(idents.get(i, -1))
        if proc is not None and proc.poll() is None:
            child.kill_group(proc)
            done.add(i)
    return done
