"""Was the host busy while we measured? Judged from what the CPUs did during the measured window, never from
the load average.

The 1-minute load average decays over minutes: a ``pip install`` that ended 30 s before a measurement still
reads as load, and a competitor that started during it barely shows. /proc/stat says what every CPU did
between two instants; this process's CPU time (``getrusage``) says how much of that was ours. The rest is
everybody else's share, and only that share slows a measurement down:

    others' share (% of the host) = whole-host busy % − our CPU time ÷ (wall time × the CPUs /proc/stat counts)

One rule, :data:`OTHERS_BUSY_PCT`, for the GEMM peak (:mod:`resnet_lab.ceilings.peak`, its own window), for
benchmark rows (``host_util`` and ``cpu_util`` over their timed steps) and for ``resnet-lab compare``.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
from pathlib import Path
from typing import Any

# Above this share of the host's CPU time spent by other processes, a measurement was taken on a busy
# machine. Background daemons, the notebook kernel and the runner polling stay within a few %; one competing
# busy thread on the 2-core VM is 50 %.
OTHERS_BUSY_PCT = 20.0
# A window shorter than this is a handful of jiffies (10 ms each per CPU): its shares are not judged.
MIN_WINDOW_S = 0.5


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(busy, total) jiffies of the aggregate ``cpu`` line of /proc/stat (busy excludes idle and iowait)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:]]
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            total = sum(values[:8])  # guest time is already inside user/nice
            return total - idle, total
    raise ValueError("no aggregate 'cpu' line in /proc/stat text")


def proc_stat() -> tuple[int, int] | None:
    """The host's (busy, total) jiffies now, or None where /proc/stat cannot be read (not Linux)."""
    try:
        return parse_proc_stat(Path("/proc/stat").read_text())
    except (OSError, ValueError):
        return None


def process_cpu_seconds() -> float:
    """User + system CPU time of this process, all its threads (BLAS and framework pools included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def others_pct(host_pct: float | None, own_pct_of_host: float | None) -> float | None:
    """Everybody else's share of the host's CPU time (%), never below 0 (jiffy rounding)."""
    if host_pct is None or own_pct_of_host is None:
        return None
    return max(0.0, host_pct - own_pct_of_host)


def row_others_pct(row: dict[str, Any], logical_cpus: int | None = None) -> float | None:
    """Others' share during a benchmark row's timed steps: ``host_util`` (whole host, every CPU /proc/stat
    counts) less ``cpu_util`` (the worker's CPU time as % of its ``available_cpus``), both over the same
    window. ``logical_cpus``: the CPUs /proc/stat counted (the provenance's ``logical_cpus``); where it is
    unknown, the worker saw every CPU. None where the row has no such figures (older records)."""
    host, own = row.get("host_util"), row.get("cpu_util")
    if host is None or own is None:
        return None
    available = row.get("available_cpus")
    scale = available / logical_cpus if available and logical_cpus else 1.0
    return others_pct(float(host), float(own) * scale)


def is_busy(others: float | None) -> bool:
    return others is not None and others > OTHERS_BUSY_PCT


@dataclasses.dataclass
class Window:
    """What the CPUs did between :meth:`start` and :meth:`stop`: the whole host's busy share, this process's
    share and the others' (all as % of the host's CPU time)."""

    stat: tuple[int, int] | None
    cpu_s: float
    wall: float

    @classmethod
    def start(cls) -> Window:
        return cls(proc_stat(), process_cpu_seconds(), time.perf_counter())

    def stop(self) -> dict[str, Any]:
        wall, cpu_s, stat = time.perf_counter() - self.wall, process_cpu_seconds() - self.cpu_s, proc_stat()
        logical = os.cpu_count() or 1  # what the aggregate line of /proc/stat adds up
        out: dict[str, Any] = {"window_s": round(wall, 3), "logical_cpus": logical, "host_busy_pct": None,
                               "own_pct": None, "others_pct": None}
        if self.stat is None or stat is None or wall < MIN_WINDOW_S:
            return out
        busy, total = stat[0] - self.stat[0], stat[1] - self.stat[1]
        if total <= 0:
            return out
        host = 100.0 * busy / total
        own = 100.0 * cpu_s / (wall * logical)
        out.update(host_busy_pct=round(host, 1), own_pct=round(own, 1), others_pct=round(others_pct(host, own), 1))
        return out
