"""Statistics of a benchmark: tf_cnn_benchmarks' summary of step times, a confidence interval, FLOPs, MFU,
CPU utilisation.

No framework; SciPy for Student's t quantile. Unit-tested on synthetic series.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

MAD_SCALE = 1.4826  # MAD → standard deviation of a normal distribution; tf_cnn_benchmarks' jitter


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation (NumPy's default method)."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def ci95(step_times: Sequence[float], images_per_step: int) -> tuple[float | None, float | None]:
    """95 % confidence interval of images/sec: Student's t interval of the mean step time, inverted.

    ``(None, None)`` for fewer than two steps; the upper end is None when the interval of the mean step
    time reaches zero (too few, too noisy steps to bound the speed from above).
    """
    times = [float(t) for t in step_times]
    n = len(times)
    if n < 2:
        return None, None
    from scipy import stats as sps

    mean = statistics.fmean(times)
    half = float(sps.t.ppf(0.975, n - 1)) * statistics.stdev(times) / math.sqrt(n)
    low = images_per_step / (mean + half)
    high = images_per_step / (mean - half) if mean - half > 0 else None
    return low, high


def step_stats(step_times: Sequence[float], images_per_step: int) -> dict[str, float]:
    """tf_cnn_benchmarks' summary of per-step wall times, with a 95 % confidence interval.

    images_per_sec = images_per_step / mean(step time) (total images over total time); stderr = population
    standard deviation of per-step images/sec / sqrt(n); jitter = 1.4826 × median absolute deviation of
    per-step images/sec; ci95_low/high: :func:`ci95`. Step-time percentiles in seconds.
    """
    times = [float(t) for t in step_times]
    if not times or any(not (t > 0) for t in times):
        raise ValueError(f"step times must be positive, got {times!r}")
    speeds = [images_per_step / t for t in times]
    med = statistics.median(speeds)
    return {
        "images_per_sec": images_per_step / statistics.fmean(times),
        "stderr": statistics.pstdev(speeds) / math.sqrt(len(speeds)),
        "jitter": MAD_SCALE * statistics.median([abs(s - med) for s in speeds]),
        "step_time_mean": statistics.fmean(times),
        "step_time_p50": percentile(times, 50),
        "step_time_p90": percentile(times, 90),
        "n_steps": len(times),
        **dict(zip(("ci95_low", "ci95_high"), ci95(times, images_per_step), strict=True)),
    }


def flops_per_image(forward_macs: float | None, mode: str) -> float | None:
    """Model FLOPs per image: 2 × forward MACs, ×3 for a training step (backward ≈ 2 × forward)."""
    if not forward_macs:
        return None
    return 2.0 * float(forward_macs) * (3.0 if mode == "train" else 1.0)


def mfu(flops_image: float | None, images_per_sec: float | None, peak_gflops: float | None) -> float | None:
    """Model FLOPs utilisation: achieved model FLOP/s ÷ measured peak FLOP/s (a fraction, not %)."""
    if not flops_image or images_per_sec is None or not peak_gflops:
        return None
    return flops_image * images_per_sec / (peak_gflops * 1e9)


def cpu_utilization(cpu_seconds: float, wall_seconds: float, cores: int) -> float | None:
    """Process CPU time over wall time, as % of ``cores`` (100 = every available core busy throughout)."""
    if wall_seconds <= 0 or cores <= 0:
        return None
    return 100.0 * cpu_seconds / (wall_seconds * cores)


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


def host_utilization(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """Whole-host busy % between two :func:`parse_proc_stat` samples (every process, ours included)."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return 100.0 * busy / total if total > 0 else None
