"""The rolling-baseline gate: a run judged against the last N runs of its host kind and params in the store.

One pair of runs cannot tell a 10 % change on the AMD host kind: two runs of one commit differ as a whole by
3.4–3.9 % (sd of log speed, ``runs.noise``), so one baseline run leaves the difference an sd of ~5 % and the
smallest change found with 95 % power ~17–20 %. Averaging the baseline over N runs shrinks its half of that
variance by N (LNT judges a run against the previous runs of its machine; conbench a lookback window of one
hardware hash); the candidate's own shift stays, which is why one row is judged against the rest of its run.

For each row of the candidate (matched on :func:`resnet_lab.bench.identity.match_key`) and each baseline run
holding it, the row's log speed ``y`` is the mean of its processes' log images/sec, and ``m`` the baseline runs'
mean. A run moves as a whole (the host's state: every row of it by the same few %), so with three rows or more
(:data:`MIN_ROWS_RELATIVE`) the gate tells two questions apart:

- **one row against the rest** — each run's shift is the median of its rows' ``y − m``; a row's change is its
  ``y − m`` less its run's shift, judged against the residuals' sd ``s`` pooled over every row and run of the window
  (``df`` = Σ (runs − 1) − (N − 1)), standard error ``s·√(1 + 1/n)``. This is where a compiler change to one engine,
  precision or layer shows, free of the run-to-run shift, so a 10 % change of one row is found with 20 processes a
  row (``params/gate.yaml``);
- **the whole run** — the candidate's shift against the spread of the window's shifts (N − 1 degrees of freedom):
  a change of everything at once, whose minimum detectable effect is bounded by the host's run-to-run sd (~3.4 % on
  the AMD kind: ~14 % with N = 5), stated beside it.

With fewer rows each row is judged on ``y − m`` alone, against the pooled sd of the runs around their means.
A verdict per row and for the run:

- **regressed** / **improved**: beyond Student's t at ``alpha`` one-sided (Bonferroni over the rows), and beyond
  ``min_change_pct`` (a significant 0.3 % is not a change anyone acts on);
- **stable**: neither; its **minimum detectable effect** (``(t_crit + z_power)·se`` as a slowdown in %) is the change
  this window finds with ``power`` (95 %);
- **insufficient**: fewer than ``min_runs`` baseline runs hold the row;
- **not comparable**: the store has no earlier run of the candidate's host kind and params, but has runs of other
  kinds (never judged across kinds).

Rows in only one side are listed (``only_candidate``, ``only_baseline``), never averaged in. The run's verdict is
the worst found: :data:`EXIT` is what a CI job gates on.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from typing import Any

from scipy import stats as sps

from resnet_lab.runs import store as st

VERDICTS = ("regressed", "improved", "stable", "insufficient", "not comparable")
EXIT = {"stable": 0, "improved": 0, "regressed": 1, "insufficient": 3, "not comparable": 4}
ORDER = ("regressed", "not comparable", "insufficient", "improved", "stable")  # the run's verdict: the first found
MIN_ROWS_RELATIVE = 3  # rows a run needs for its own shift to be told from one row's change


@dataclasses.dataclass(frozen=True)
class GateParams:
    window: int = 5  # the last N runs of the host kind and params before the candidate
    min_runs: int = 3  # a row held by fewer baseline runs is "insufficient"
    alpha: float = 0.05  # one-sided, over all judged rows (Bonferroni)
    power: float = 0.95  # the minimum detectable effect's power
    min_change_pct: float = 2.0  # a significant change smaller than this is "stable"

    def check(self) -> GateParams:
        from resnet_lab.core.errors import UsageError

        if self.window < 1 or self.min_runs < 2 or self.min_runs > max(self.window, 2):
            raise UsageError(f"gate: window {self.window} and min_runs {self.min_runs}: need window >= min_runs >= 2")
        if not 0 < self.alpha < 0.5 or not 0.5 < self.power < 1:
            raise UsageError(f"gate: alpha {self.alpha} must lie in (0, 0.5) and power {self.power} in (0.5, 1)")
        return self


def _log_speed(samples: list[float], ips: float | None) -> float | None:
    vals = [s for s in samples if s and s > 0] or ([ips] if ips and ips > 0 else [])
    return statistics.fmean(math.log(v) for v in vals) if vals else None


def _key(row: dict[str, Any]) -> str:
    return row["identity_hash"]


def _pooled_sd(resid: list[float], df: int) -> float | None:
    return math.sqrt(sum(x * x for x in resid) / df) if df > 0 else None


def judge(candidate: dict[str, float], baseline: dict[str, dict[Any, float]], params: GateParams) -> dict[str, Any]:
    """The verdicts of ``candidate`` (row key -> log speed) against ``baseline`` (row key -> {baseline run -> log
    speed}), as in the module's text. Pure: the store is read by :func:`gate`."""
    judged = sorted(k for k in candidate if len(baseline.get(k, {})) >= params.min_runs)
    means = {k: statistics.fmean(baseline[k].values()) for k in judged}
    runs_ = sorted({j for k in judged for j in baseline[k]}, key=str)
    relative = len(judged) >= MIN_ROWS_RELATIVE
    # each run's shift: the median of its rows' deviations (0 where rows are too few to tell a shift from a row)
    shift = {j: statistics.median([baseline[k][j] - means[k] for k in judged if j in baseline[k]])
             if relative else 0.0 for j in runs_}
    c_shift = statistics.median([candidate[k] - means[k] for k in judged]) if relative else 0.0
    resid = [baseline[k][j] - means[k] - shift[j] for k in judged for j in baseline[k]]
    df = sum(len(baseline[k]) - 1 for k in judged) - ((len(runs_) - 1) if relative else 0)
    s = _pooled_sd(resid, df)
    t_crit = float(sps.t.ppf(1 - params.alpha / max(len(judged), 1), df)) if df > 0 else math.inf
    z_pow = float(sps.norm.ppf(params.power))
    rows = {}
    for k, y in candidate.items():
        n = len(baseline.get(k, {}))
        if k not in means or s is None:
            rows[k] = {"verdict": "insufficient", "baseline_runs": n, "change_pct": None, "relative_pct": None,
                       "mde_pct": None}
            continue
        total, d = y - means[k], y - means[k] - c_shift
        se = s * math.sqrt(1 + 1 / n)
        rows[k] = {"verdict": _verdict(d, se, t_crit, params), "baseline_runs": n,
                   "change_pct": 100 * math.expm1(total), "relative_pct": 100 * math.expm1(d),
                   "t": d / se if se > 0 else 0.0, "se_pct": 100 * se,
                   "mde_pct": _mde(se, t_crit, z_pow)}
    run = {"verdict": "insufficient", "change_pct": None, "mde_pct": None, "sd_pct": None, "runs": len(runs_)}
    if relative and len(runs_) >= params.min_runs:
        sd_shift = statistics.stdev(shift.values())  # the shifts' mean is 0 by construction: the window's spread
        se_shift = sd_shift * math.sqrt(1 + 1 / len(runs_))
        t_run = float(sps.t.ppf(1 - params.alpha, len(runs_) - 1))
        run = {"verdict": _verdict(c_shift, se_shift, t_run, params), "change_pct": 100 * math.expm1(c_shift),
               "mde_pct": _mde(se_shift, t_run, z_pow), "sd_pct": 100 * sd_shift, "runs": len(runs_)}
    found = {r["verdict"] for r in rows.values()} | ({run["verdict"]} if relative else set())
    verdict = next((v for v in ORDER if v in found), "insufficient")
    return {"verdict": verdict, "rows": rows, "run_shift": run, "relative": relative,
            "sd_row_pct": 100 * s if s is not None else None, "df": df, "t_crit": t_crit, "rows_judged": len(judged),
            "params": dataclasses.asdict(params)}


def _verdict(d: float, se: float, t_crit: float, params: GateParams) -> str:
    t = d / se if se > 0 else (math.copysign(math.inf, d) if d else 0.0)
    big = abs(math.expm1(d)) * 100 >= params.min_change_pct
    return "regressed" if t <= -t_crit and big else "improved" if t >= t_crit and big else "stable"


def _mde(se: float, t_crit: float, z_pow: float) -> float:
    """The slowdown (%) found with the gate's power: (t_crit + z_power) standard errors."""
    return 100 * -math.expm1(-(t_crit + z_pow) * se)


def gate(store: st.Store, candidate: str, params: GateParams = GateParams()) -> dict[str, Any]:
    """``candidate`` (a run in the store: :func:`resnet_lab.runs.store.find_run`) against the last
    ``params.window`` runs of its host kind and params name started before it."""
    params.check()
    cand = st.find_run(store, candidate)
    same = [r for r in st.runs(store, cand["host_kind_id"], cand["params_name"])
            if (r["started_at"] or "") < (cand["started_at"] or "") and r["id"] != cand["id"]]
    window = same[-params.window:]
    base = {"candidate": cand["run_key"], "window": [r["run_key"] for r in window],
            "commits": [r["sha"] for r in window], "params_name": cand["params_name"]}
    if not window:
        others = [r for r in st.runs(store, params_name=cand["params_name"])
                  if r["host_kind_id"] != cand["host_kind_id"]]
        verdict = "not comparable" if others else "insufficient"
        why = ("the store has runs of these params only on other host kinds" if others else
               "the store has no earlier run of these params")
        return {**base, "verdict": verdict, "why": why, "rows": [], "only_candidate": [], "only_baseline": []}
    cand_rows = st.rows_of(store, [cand["id"]])
    base_rows = st.rows_of(store, [r["id"] for r in window])
    labels = {}
    y_c: dict[str, float] = {}
    for r in cand_rows:
        y = _log_speed(r["samples"], r["images_per_sec"])
        if y is not None:
            y_c[_key(r)] = y
            labels[_key(r)] = r
    per_run: dict[str, dict[int, float]] = defaultdict(dict)
    for r in base_rows:
        y = _log_speed(r["samples"], r["images_per_sec"])
        if y is not None:
            per_run[_key(r)][r["run_id"]] = y
            labels.setdefault(_key(r), r)
    result = judge(y_c, dict(per_run), params)
    rows = [{"row": labels[k]["label"], "identity": labels[k]["identity"], **v} for k, v in result.pop("rows").items()]
    return {**base, **result, "rows": rows,
            "only_candidate": sorted(labels[k]["label"] or k for k in y_c if k not in per_run),
            "only_baseline": sorted(labels[k]["label"] or k for k in per_run if k not in y_c),
            "why": f"against the last {len(window)} run(s) of this host kind and params"}


def exit_code(result: dict[str, Any]) -> int:
    return EXIT[result["verdict"]]


def summary(result: dict[str, Any]) -> str:
    """One line: the verdict, the window, the run's shift and the MDE the rows reach."""
    rows = [r for r in result["rows"] if r.get("mde_pct") is not None]
    mde = f"; a row's MDE {min(r['mde_pct'] for r in rows):.1f}–{max(r['mde_pct'] for r in rows):.1f} %" if rows else ""
    shift = result.get("run_shift") or {}
    whole = (f"; the whole run {shift['change_pct']:+.1f} % ({shift['verdict']}, MDE {shift['mde_pct']:.1f} %)"
             if shift.get("change_pct") is not None else "")
    counts: dict[str, int] = defaultdict(int)
    for r in result["rows"]:
        counts[r["verdict"]] += 1
    parts = ", ".join(f"{n} {v}" for v, n in counts.items())
    return (f"{result['verdict']}: {result['candidate']} {result['why']} ({len(result['window'])} run(s){whole}{mde})"
            f"{': rows ' + parts if parts else ''}")
