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
        "step_time_p99": percentile(times, 99),  # MLPerf SingleStream's tail (batch 1: one query's latency)
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


# ------------------------------------------------------------------------------------------ two runs
VERDICTS = ("faster", "slower", "no significant change")


def summary(step_times: Sequence[float]) -> tuple[float, float, int]:
    """(mean, sample standard deviation, count) of per-step seconds: what :func:`compare_speed` needs."""
    times = [float(t) for t in step_times]
    if not times or any(not (t > 0) for t in times):
        raise ValueError(f"step times must be positive, got {times!r}")
    return statistics.fmean(times), (statistics.stdev(times) if len(times) > 1 else 0.0), len(times)


def compare_speed(base: tuple[float, float, int], cand: tuple[float, float, int], base_images: int,
                  cand_images: int | None = None, alpha: float = 0.05) -> dict[str, float | str | None]:
    """Candidate images/sec against baseline images/sec, from each run's step-time summary (mean, sd, n).

    The speed ratio r = (cand_images / mean_c) / (base_images / mean_b) is compared on the log scale, where
    the variance of log(mean) is sd² / (n mean²) (delta method) and the degrees of freedom are
    Welch–Satterthwaite's: ``delta_pct`` = 100 (r - 1), its (1 - alpha) interval ``ci_low_pct`` /
    ``ci_high_pct``, the two-sided ``p_value`` of "same speed", and the verdict: faster or slower when the
    interval excludes no change, else "no significant change". A run with one step has no spread: its
    verdict is "no significant change" unless both runs are exactly constant and differ.
    """
    from scipy import stats as sps

    (mb, sb, nb), (mc, sc, nc) = base, cand
    cand_images = base_images if cand_images is None else cand_images
    log_r = math.log((cand_images / mc) / (base_images / mb))
    vb = sb * sb / (nb * mb * mb) if nb > 1 else math.nan
    vc = sc * sc / (nc * mc * mc) if nc > 1 else math.nan
    out: dict[str, float | str | None] = {"delta_pct": 100 * math.expm1(log_r), "ci_low_pct": None,
                                          "ci_high_pct": None, "p_value": None, "verdict": VERDICTS[2]}
    if math.isnan(vb) or math.isnan(vc):
        return out
    se = math.sqrt(vb + vc)
    if se == 0:  # both series constant: any difference is exact
        out.update(ci_low_pct=out["delta_pct"], ci_high_pct=out["delta_pct"], p_value=0.0 if log_r else 1.0)
        out["verdict"] = VERDICTS[0] if log_r > 0 else VERDICTS[1] if log_r < 0 else VERDICTS[2]
        return out
    df = (vb + vc) ** 2 / ((vb * vb / (nb - 1) if vb else 0.0) + (vc * vc / (nc - 1) if vc else 0.0))
    q = float(sps.t.ppf(1 - alpha / 2, df))
    out["ci_low_pct"] = 100 * math.expm1(log_r - q * se)
    out["ci_high_pct"] = 100 * math.expm1(log_r + q * se)
    out["p_value"] = float(2 * sps.t.sf(abs(log_r) / se, df))
    if out["ci_low_pct"] > 0:
        out["verdict"] = VERDICTS[0]
    elif out["ci_high_pct"] < 0:
        out["verdict"] = VERDICTS[1]
    return out


def summary_from_row(row: dict) -> tuple[tuple[float, float, int] | None, str]:
    """A row's step-time summary and how it was obtained: from its ``step_times`` when it has them, else
    reconstructed from tf_cnn_benchmarks' summary columns (``step_time_mean``, ``stderr`` of images/sec
    and the step count: sd of time ≈ sd of speed × mean² / images, the delta method), else None."""
    times = row.get("step_times")
    if isinstance(times, list) and times:
        return summary(times), "step times"
    try:
        mean, stderr = float(row["step_time_mean"]), float(row["stderr"])
        n = int(float(row.get("timed_steps") or row["steps"]))
        images = float(row.get("global_batch") or row["batch_size"])
    except (KeyError, TypeError, ValueError):
        return None, "no step times"
    if not (mean > 0) or n < 1 or math.isnan(stderr):
        return None, "no step times"
    sd_speed = stderr * math.sqrt(n) * (math.sqrt(n / (n - 1)) if n > 1 else 0.0)
    return (mean, sd_speed * mean * mean / images, n), "summary columns"
