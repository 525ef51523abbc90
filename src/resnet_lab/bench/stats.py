"""Statistics of a benchmark: tf_cnn_benchmarks' summary of step times, a confidence interval, FLOPs, MFU,
CPU utilisation; a configuration measured in several processes (the process as the unit of repetition);
two runs compared (Welch's t on log speed, Holm's correction over the rows, the smallest detectable change).

No framework; SciPy for Student's t quantile. Unit-tested on synthetic series.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from resnet_lab.core import hostload

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


# One parser of /proc/stat's aggregate ``cpu`` line, the core's (bench may import core, not the reverse).
parse_proc_stat = hostload.parse_proc_stat


def host_utilization(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """Whole-host busy % between two :func:`parse_proc_stat` samples (every process, ours included)."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return 100.0 * busy / total if total > 0 else None


# ------------------------------------------------------------------------------------------ processes
# Why the process is the unit of repetition: a fresh process draws its own memory layout, thread placement,
# JIT decisions and host state, so the same configuration moves between processes far more than its steps
# move within one (20 % between four runs whose own intervals were ±5 %). Steps of one process are not
# independent draws of "the speed": an interval from them says how well that one process was timed. With
# several processes, the interval comes from their spread (and their within-process noise where the design
# is unbalanced); the split of the variance says where more measuring would help (Kalibera & Jones: more
# steps shrink only the within part, more processes both).
WITHIN, BETWEEN = "within one process", "between processes"


@dataclass(frozen=True)
class Estimate:
    """The mean log step time of a configuration and how well it is known.

    ``log_mean``: on the log scale, so a ratio of two speeds is a difference; ``se`` and ``df``: its standard
    error and the degrees of freedom of its t quantile (None where there is no spread to go on);
    ``processes``: how many processes it rests on; ``var_within``: the pooled variance of one step's log
    time inside a process (≈ its CV²); ``var_between``: the variance of the process effect on log speed
    beyond what the within-process noise explains (≈ CV² between processes; None from one process)."""

    log_mean: float
    se: float | None
    df: float | None
    processes: int
    var_within: float | None = None
    var_between: float | None = None

    @property
    def ci_method(self) -> str:
        return f"{BETWEEN} ({self.processes})" if self.processes > 1 else WITHIN

    def speed_interval(self, images: float, alpha: float = 0.05) -> tuple[float, float | None, float | None]:
        """(images/sec, its 1 - alpha interval low and high) for ``images`` per step."""
        ips = images / math.exp(self.log_mean)
        if self.se is None or self.df is None:
            return ips, None, None
        from scipy import stats as sps

        half = float(sps.t.ppf(1 - alpha / 2, self.df)) * self.se
        return ips, images / math.exp(self.log_mean + half), images / math.exp(self.log_mean - half)


def _positive(step_times: Sequence[float]) -> list[float]:
    times = [float(t) for t in step_times]
    if not times or any(not (t > 0) for t in times):
        raise ValueError(f"step times must be positive, got {times!r}")
    return times


def log_mean(step_times: Sequence[float]) -> tuple[float, float | None]:
    """One process: (log of its mean step time, the variance of that log by the delta method,
    sd² / (n mean²); None for a single step)."""
    times = _positive(step_times)
    m, n = statistics.fmean(times), len(times)
    return math.log(m), (statistics.variance(times) / (n * m * m) if n > 1 else None)


def within_one(step_times: Sequence[float]) -> Estimate:
    """The estimate of one process from its steps (what a row measured in one process has): the interval
    of its mean step time, i.e. how well that process was timed, not how the next process would run."""
    times = _positive(step_times)
    y, v = log_mean(times)
    var_within = statistics.variance(times) / statistics.fmean(times) ** 2 if len(times) > 1 else None
    return Estimate(y, None if v is None else math.sqrt(v), len(times) - 1 if v is not None else None, 1,
                    var_within, None)


def between_processes(means: Sequence[float], within_vars: Sequence[float | None] | None = None,
                      counts: Sequence[int] | None = None) -> Estimate:
    """The estimate from several processes' mean step times (seconds, at least two).

    Balanced (every process timed the same number of steps, or nothing known but the means): Student's t on
    the log means, ``se`` = their sd / sqrt(k), k - 1 degrees of freedom; each process counts once, its own
    noise included in the spread. Unbalanced, with each log mean's within-process variance
    (``within_vars``, :func:`log_mean`): a one-way random-effects model, log mean_i = mu + b_i + e_i with
    b_i ~ (0, tau²) the process effect and e_i ~ (0, v_i): tau² by DerSimonian–Laird's method of moments,
    mu weighted by 1 / (v_i + tau²), its standard error Hartung–Knapp's (the weighted spread about mu,
    never below the model's own: max(1, q)), on k - 1 degrees of freedom, which keeps the coverage near
    nominal with few processes where the normal quantile does not. Equal v_i make both the same interval
    but for that floor."""
    k = len(means)
    if k < 2:
        raise ValueError("between_processes needs at least two processes")
    y = [math.log(float(m)) for m in means]
    vs = list(within_vars) if within_vars is not None else [None] * k
    known = all(v is not None and v > 0 for v in vs)
    balanced = counts is None or len(set(counts)) == 1 or not known
    if balanced:
        mu, s2 = statistics.fmean(y), statistics.variance(y)
        tau2 = max(0.0, s2 - statistics.fmean(vs)) if known else None  # type: ignore[arg-type]
        return Estimate(mu, math.sqrt(s2 / k), k - 1, k, None, tau2)
    w = [1.0 / v for v in vs]  # type: ignore[operator]
    sw = sum(w)
    y_fixed = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sw
    q_stat = sum(wi * (yi - y_fixed) ** 2 for wi, yi in zip(w, y, strict=True))
    tau2 = max(0.0, (q_stat - (k - 1)) / (sw - sum(wi * wi for wi in w) / sw))
    ws = [1.0 / (v + tau2) for v in vs]  # type: ignore[operator]
    sws = sum(ws)
    mu = sum(wi * yi for wi, yi in zip(ws, y, strict=True)) / sws
    q = sum(wi * (yi - mu) ** 2 for wi, yi in zip(ws, y, strict=True)) / (k - 1)
    return Estimate(mu, math.sqrt(max(1.0, q) / sws), k - 1, k, None, tau2)


def process_estimate(process_step_times: Sequence[Sequence[float]]) -> Estimate:
    """The estimate of a configuration from each of its processes' step times: :func:`within_one` for one
    process, else :func:`between_processes` (balanced or not by the processes' step counts), with the
    pooled within-process variance of a step (``var_within``) beside the between-process one."""
    series = [_positive(t) for t in process_step_times]
    if len(series) == 1:
        return within_one(series[0])
    logs = [log_mean(t) for t in series]
    est = between_processes([statistics.fmean(t) for t in series], [v for _, v in logs], [len(t) for t in series])
    df = sum(len(t) - 1 for t in series)
    var_within = (sum((len(t) - 1) * statistics.variance(t) / statistics.fmean(t) ** 2 for t in series if len(t) > 1)
                  / df) if df else None
    return Estimate(est.log_mean, est.se, est.df, est.processes, var_within, est.var_between)


def process_fields(process_step_times: Sequence[Sequence[float]], images_per_step: float) -> dict[str, object]:
    """A row's speed fields from its processes' step times: images_per_sec and its 95 % interval
    (``ci95_low``/``ci95_high``, between processes where there are several), ``ci_method``, ``var_within``,
    ``var_between``, ``process_means`` (each process's mean step time, seconds)."""
    est = process_estimate(process_step_times)
    ips, low, high = est.speed_interval(images_per_step)
    return {"images_per_sec": ips, "ci95_low": low, "ci95_high": high, "ci_method": est.ci_method,
            "var_within": est.var_within, "var_between": est.var_between,
            "process_means": [statistics.fmean(_positive(t)) for t in process_step_times]}


# ------------------------------------------------------------------------------------------ two runs
VERDICTS = ("faster", "slower", "no significant change")
POWER = 0.8  # the power at which the smallest detectable change (mde_pct) is given


def summary(step_times: Sequence[float]) -> tuple[float, float, int]:
    """(mean, sample standard deviation, count) of per-step seconds: what :func:`compare_speed` needs."""
    times = _positive(step_times)
    return statistics.fmean(times), (statistics.stdev(times) if len(times) > 1 else 0.0), len(times)


def verdict(log_r: float, se: float, df: float | None, alpha: float) -> dict[str, float | str | None]:
    """Interval, two-sided p and verdict of a log speed ratio ``log_r`` with standard error ``se``."""
    from scipy import stats as sps

    out: dict[str, float | str | None] = {"delta_pct": 100 * math.expm1(log_r), "se_log": se, "df": df}
    if se == 0:  # both series constant: any difference is exact
        out.update(ci_low_pct=out["delta_pct"], ci_high_pct=out["delta_pct"], p_value=0.0 if log_r else 1.0)
        out["verdict"] = VERDICTS[0] if log_r > 0 else VERDICTS[1] if log_r < 0 else VERDICTS[2]
        return out
    q = float(sps.t.ppf(1 - alpha / 2, df))
    out["ci_low_pct"] = 100 * math.expm1(log_r - q * se)
    out["ci_high_pct"] = 100 * math.expm1(log_r + q * se)
    out["p_value"] = float(2 * sps.t.sf(abs(log_r) / se, df))
    out["verdict"] = VERDICTS[0] if out["ci_low_pct"] > 0 else VERDICTS[1] if out["ci_high_pct"] < 0 else VERDICTS[2]
    return out


def compare_speed(base: tuple[float, float, int], cand: tuple[float, float, int], base_images: int,
                  cand_images: int | None = None, alpha: float = 0.05) -> dict[str, float | str | None]:
    """Candidate images/sec against baseline images/sec, from each run's step-time summary (mean, sd, n).

    The speed ratio r = (cand_images / mean_c) / (base_images / mean_b) is compared on the log scale, where
    the variance of log(mean) is sd² / (n mean²) (delta method) and the degrees of freedom are
    Welch–Satterthwaite's: ``delta_pct`` = 100 (r - 1), its (1 - alpha) interval ``ci_low_pct`` /
    ``ci_high_pct``, the two-sided ``p_value`` of "same speed", and the verdict: faster or slower when the
    interval excludes no change, else "no significant change"; ``se_log`` and ``df`` for :func:`mde_pct`.
    A run with one step has no spread: its verdict is "no significant change" unless both runs are exactly
    constant and differ. Steps of one process each: the interval says how well those two processes were
    timed, not how the next two would run (see :func:`compare_estimates`).
    """
    (mb, sb, nb), (mc, sc, nc) = base, cand
    cand_images = base_images if cand_images is None else cand_images
    log_r = math.log((cand_images / mc) / (base_images / mb))
    if nb < 2 or nc < 2:
        return {"delta_pct": 100 * math.expm1(log_r), "ci_low_pct": None, "ci_high_pct": None, "p_value": None,
                "verdict": VERDICTS[2], "se_log": None, "df": None}
    vb, vc = sb * sb / (nb * mb * mb), sc * sc / (nc * mc * mc)
    if vb + vc == 0:
        return verdict(log_r, 0.0, None, alpha)
    df = (vb + vc) ** 2 / ((vb * vb / (nb - 1) if vb else 0.0) + (vc * vc / (nc - 1) if vc else 0.0))
    return verdict(log_r, math.sqrt(vb + vc), df, alpha)


def compare_estimates(base: Estimate, cand: Estimate, base_images: float, cand_images: float | None = None,
                      alpha: float = 0.05) -> dict[str, float | str | None]:
    """Candidate images/sec against baseline images/sec from each run's :class:`Estimate`: the same output
    as :func:`compare_speed`. With several processes a side this is Welch's t on the log process means
    (balanced designs; the random-effects mean and its standard error otherwise), the degrees of freedom
    Welch–Satterthwaite's from each side's k - 1."""
    cand_images = base_images if cand_images is None else cand_images
    log_r = math.log(cand_images / base_images) - (cand.log_mean - base.log_mean)
    if base.se is None or cand.se is None or base.df is None or cand.df is None:
        return {"delta_pct": 100 * math.expm1(log_r), "ci_low_pct": None, "ci_high_pct": None, "p_value": None,
                "verdict": VERDICTS[2], "se_log": None, "df": None}
    vb, vc = base.se ** 2, cand.se ** 2
    if vb + vc == 0:
        return verdict(log_r, 0.0, None, alpha)
    df = (vb + vc) ** 2 / ((vb * vb / base.df if vb else 0.0) + (vc * vc / cand.df if vc else 0.0))
    return verdict(log_r, math.sqrt(vb + vc), df, alpha)


def mde_pct(se_log: float | None, df: float | None, alpha: float = 0.05, power: float = POWER) -> float | None:
    """The smallest slowdown (percent, positive) that a two-sided level-``alpha`` test of a log speed ratio
    with standard error ``se_log`` on ``df`` degrees of freedom detects with probability ``power``:
    1 - exp(-(t_{1-alpha/2} + t_{power}) se). None where there is no standard error."""
    if se_log == 0:
        return 0.0
    if se_log is None or df is None:
        return None
    from scipy import stats as sps

    return 100 * -math.expm1(-(float(sps.t.ppf(1 - alpha / 2, df)) + float(sps.t.ppf(power, df))) * se_log)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (the family: the entries that are not None, in any order):
    the i-th smallest of m becomes max over j <= i of min(1, (m - j + 1) p_(j)). It keeps the chance of any
    false call among the family at alpha, whatever the dependence between the rows."""
    ranked = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(ranked)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for j, (p, i) in enumerate(ranked):
        running = max(running, min(1.0, (m - j) * p))
        out[i] = running
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


def estimate_from_row(row: dict) -> tuple[Estimate | None, str]:
    """A row's :class:`Estimate` from its processes, and how it was obtained: "processes" (each process's
    step times: balanced or random-effects), "process means" (a row that kept only the means), or None
    and why not where the row has fewer than two processes (:func:`summary_from_row` is its one-process
    summary)."""
    per = row.get("process_step_times")
    if isinstance(per, list) and len(per) > 1 and all(isinstance(t, list) and t for t in per):
        return process_estimate(per), "processes"
    means = row.get("process_means")
    if isinstance(means, list) and len(means) > 1:
        return between_processes([float(m) for m in means]), "process means"
    return None, "one process"
