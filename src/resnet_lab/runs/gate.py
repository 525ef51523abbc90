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
  the AMD kind: ~14 % with N = 5), stated beside it. Called only beyond ``run_min_change_pct`` (10 %, the size the
  gate is for): the host alone moves a run by 5 % now and then, and at 5 % the A/A on simulated AMD noise cried
  wolf on the whole run in one of 42 pairings.

With fewer rows each row is judged on ``y − m`` alone, against the pooled sd of the runs around their means.
A verdict per row and for the run:

- **regressed** / **improved**: beyond Student's t at ``alpha`` one-sided (Bonferroni over the rows), and beyond
  ``min_change_pct``, 5 %: half the 10 % the gate is sized for. Significance alone cries wolf: at ``alpha`` 0.05
  over 4 rows about one candidate in twenty has a row past ``t_crit`` by chance (the A/A on simulated AMD noise
  met one in six pairings), and a CI job that reads a run of one commit as slower is switched off. A 10 % slowdown
  seen at an MDE below 10 % is estimated below -5 % nearly always, so the planted ones are still found
  (:func:`aa` measures both on a host's real runs);
- **stable**: neither; its **minimum detectable effect** (``(t_crit + z_power)·se`` as a slowdown in %) is the change
  this window finds with ``power`` (95 %);
- **insufficient**: fewer than ``min_runs`` baseline runs hold the row;
- **not comparable**: the store has no earlier run of the candidate's host kind and params, but has runs of other
  kinds (never judged across kinds); or the candidate was measured on a **busy host** — other processes took more
  than :data:`QUIET_OTHERS_PCT` of the CPUs during its rows (the median over its rows of ``host_util`` less
  ``cpu_util``): the load, not the change, would be judged. A single row measured so is left out the same way
  (named). A busy run is left out of every window too (the window is the last N quiet runs), and out of the
  A/A's pairings (named there).

Rows in only one side are listed (``only_candidate``, ``only_baseline``), never averaged in. The run's verdict is
the worst found: :data:`EXIT` is what a CI job gates on.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from resnet_lab.runs import store as st

VERDICTS = ("regressed", "improved", "stable", "insufficient", "not comparable")
EXIT = {"stable": 0, "improved": 0, "regressed": 1, "insufficient": 3, "not comparable": 4}
ORDER = ("regressed", "not comparable", "insufficient", "improved", "stable")  # the run's verdict: the first found
MIN_ROWS_RELATIVE = 3  # rows a run needs for its own shift to be told from one row's change
# Stricter than core.hostload's 20 % (where a measurement is flagged): the gate judges a row only where others took at
# most 10 % of the CPUs. On the quiet 2-core host rows see 0.7–5 % (daemons, the runner); the A/A's rows at 13.5 and
# 15.4 % (a test file and a pip install beside them) had three and four of eight processes 30–60 % slow.
QUIET_OTHERS_PCT = 10.0
BUSY_LOOKBACK = 4  # a window is sought among the last 4 N runs before the candidate (busy ones left out)


@dataclasses.dataclass(frozen=True)
class GateParams:
    window: int = 5  # the last N runs of the host kind and params before the candidate
    min_runs: int = 3  # a row held by fewer baseline runs is "insufficient"
    alpha: float = 0.05  # one-sided, over all judged rows (Bonferroni)
    power: float = 0.95  # the minimum detectable effect's power
    min_change_pct: float = 5.0  # a significant change smaller than this is "stable" (half the gate's 10 %)
    run_min_change_pct: float = 10.0  # the whole run's shift: called only beyond this (the host moves it by a few %)

    def check(self) -> GateParams:
        from resnet_lab.core.errors import UsageError

        if self.window < 1 or self.min_runs < 2 or self.min_runs > max(self.window, 2):
            raise UsageError(f"gate: window {self.window} and min_runs {self.min_runs}: need window >= min_runs >= 2")
        if not 0 < self.alpha < 0.5 or not 0.5 < self.power < 1:
            raise UsageError(f"gate: alpha {self.alpha} must lie in (0, 0.5) and power {self.power} in (0.5, 1)")
        return self


def _log_speed(samples: list[float], ips: float | None) -> float | None:
    """A row's log speed: the median of its processes' log images/sec (asv's statistic). Not their mean: a process
    that another program slowed is an outlier on one side only, and the A/A on this project's 2-core host met three
    of eight processes of a row at 60 % speed in an otherwise quiet run; the median ignores them, at the cost of
    ~1.25× the mean's standard error on clean data."""
    vals = [s for s in samples if s and s > 0] or ([ips] if ips and ips > 0 else [])
    return statistics.median(math.log(v) for v in vals) if vals else None


def _key(row: dict[str, Any]) -> str:
    return row["identity_hash"]


def _pooled_sd(resid: list[float], df: int) -> float | None:
    return math.sqrt(sum(x * x for x in resid) / df) if df > 0 else None


def judge(candidate: dict[str, float], baseline: dict[str, dict[Any, float]], params: GateParams) -> dict[str, Any]:
    """The verdicts of ``candidate`` (row key -> log speed) against ``baseline`` (row key -> {baseline run -> log
    speed}), as in the module's text. Pure: the store is read by :func:`gate`."""
    from scipy import stats as sps  # here, not at import: every command's line check loads this module (0.5 s)

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
        run = {"verdict": _verdict(c_shift, se_shift, t_run, params, params.run_min_change_pct),
               "change_pct": 100 * math.expm1(c_shift),
               "mde_pct": _mde(se_shift, t_run, z_pow), "sd_pct": 100 * sd_shift, "runs": len(runs_)}
    found = {r["verdict"] for r in rows.values()} | ({run["verdict"]} if relative else set())
    verdict = next((v for v in ORDER if v in found), "insufficient")
    return {"verdict": verdict, "rows": rows, "run_shift": run, "relative": relative,
            "sd_row_pct": 100 * s if s is not None else None, "df": df, "t_crit": t_crit, "rows_judged": len(judged),
            "params": dataclasses.asdict(params)}


def _verdict(d: float, se: float, t_crit: float, params: GateParams, min_change_pct: float | None = None) -> str:
    t = d / se if se > 0 else (math.copysign(math.inf, d) if d else 0.0)
    big = abs(math.expm1(d)) * 100 >= (params.min_change_pct if min_change_pct is None else min_change_pct)
    return "regressed" if t <= -t_crit and big else "improved" if t >= t_crit and big else "stable"


def _mde(se: float, t_crit: float, z_pow: float) -> float:
    """The slowdown (%) found with the gate's power: (t_crit + z_power) standard errors."""
    return 100 * -math.expm1(-(t_crit + z_pow) * se)


def others_pct(rows: list[dict[str, Any]]) -> dict[int, float | None]:
    """Run id → the median share of the CPUs other processes took during its measured rows' timed steps (%; None
    where its rows do not say: older records), from the rows as pushed (:func:`store.rows_of`)."""
    per: dict[int, list[float]] = defaultdict(list)
    for r, share in zip(rows, _row_others(rows), strict=True):
        per[r["run_id"]] += [share] if share is not None else []
    return {j: (statistics.median(v) if v else None) for j, v in per.items()}


def _name(row: dict[str, Any]) -> str:
    """A row as the gate's tables name it: its label and precision (one label is timed at fp32 and bf16)."""
    return " · ".join(str(v) for v in (row.get("label"), row.get("precision")) if v)


def _busy(share: float | None) -> bool:
    return share is not None and share > QUIET_OTHERS_PCT


def _log_speeds(rows: list[dict[str, Any]]) -> tuple[dict[int, dict[str, float]], dict[str, dict[str, Any]]]:
    """{run id: {row key: log speed}} and each key's first row (its label), from :func:`store.rows_of`. A row measured
    while other processes took more than :data:`QUIET_OTHERS_PCT` of the CPUs is left out (a busy row)."""
    per_run: dict[int, dict[str, float]] = defaultdict(dict)
    labels: dict[str, dict[str, Any]] = {}
    shares = _row_others(rows)
    for r, share in zip(rows, shares, strict=True):
        labels.setdefault(_key(r), r)
        if _busy(share):
            continue
        y = _log_speed(r["samples"], r["images_per_sec"])
        if y is not None:
            per_run[r["run_id"]][_key(r)] = y
    return dict(per_run), labels


def _row_others(rows: list[dict[str, Any]]) -> list[float | None]:
    """Each row's share of the CPUs that other processes took during its timed steps (%), None where unknown."""
    from resnet_lab.core import hostload

    out = []
    for r in rows:
        row = json.loads(r["row"]) if isinstance(r.get("row"), str) else (r.get("row") or {})
        out.append(hostload.row_others_pct(row) if r.get("status") == "ok" else None)
    return out


def busy_rows(rows: list[dict[str, Any]], run_id: int) -> list[str]:
    """The rows of run ``run_id`` measured on a busy host (left out of the judgement), by name."""
    return [_name(r) for r, share in zip(rows, _row_others(rows), strict=True)
            if r["run_id"] == run_id and _busy(share)]


def gate(store: st.Store, candidate: str, params: GateParams = GateParams()) -> dict[str, Any]:
    """``candidate`` (a run in the store: :func:`resnet_lab.runs.store.find_run`) against the last
    ``params.window`` runs of its host kind and params name started before it."""
    params.check()
    cand = st.find_run(store, candidate)
    return _gate(store, cand, st.rows_of(store, [cand["id"]]), params)


def gate_folder(store: st.Store, folder: str | Path, params: GateParams = GateParams()) -> dict[str, Any]:
    """A run folder not (yet) in the store — the run being made, as notebook 05 sees it — against the last
    ``params.window`` runs of its host kind and params name in the store. UsageError for a folder that is not a
    run; "not comparable" where the store has no run of its host kind."""
    from resnet_lab.runs import record

    params.check()
    folder = Path(folder)
    run = record.read(folder)
    prov = run.provenance
    cand = {"id": -1, "run_key": st.run_key(prov, folder), "name": folder.name,
            "params_name": (prov.get("params") or {}).get("name"), "started_at": prov.get("started_at"),
            "host_kind_id": st.kind_id(store, run.kind)}
    rows = []
    for row in run.rows:
        values, samples = st.row_values(row)
        rows.append({**values, "run_id": -1, "samples": samples})
    if cand["host_kind_id"] is None:
        others = bool(st.runs(store, params_name=cand["params_name"]))
        return {"candidate": cand["run_key"], "window": [], "commits": [], "params_name": cand["params_name"],
                "verdict": "not comparable" if others else "insufficient", "rows": [], "only_candidate": [],
                "only_baseline": [], "left_out_busy": [],
                "why": ("the store has runs of these params only on other host kinds" if others else
                        "the store has no earlier run of these params")}
    return _gate(store, cand, rows, params)


def _gate(store: st.Store, cand: dict[str, Any], cand_rows: list[dict[str, Any]], params: GateParams) -> dict[str, Any]:
    same = [r for r in st.runs(store, cand["host_kind_id"], cand["params_name"])
            if (r["started_at"] or "") < (cand["started_at"] or "") and r["id"] != cand["id"]]
    recent = same[-BUSY_LOOKBACK * params.window:]
    fetched = cand_rows + st.rows_of(store, [r["id"] for r in recent])
    shares = others_pct(fetched)
    quiet = [r for r in recent if not _busy(shares.get(r["id"]))]
    window = quiet[-params.window:]
    oldest = (window[0]["started_at"] or "") if window else ""
    left_out = [r["run_key"] for r in recent if _busy(shares.get(r["id"])) and (r["started_at"] or "") >= oldest]
    base = {"candidate": cand["run_key"], "window": [r["run_key"] for r in window],
            "commits": [r["sha"] for r in window], "params_name": cand["params_name"],
            "candidate_others_pct": shares.get(cand["id"]), "left_out_busy": left_out}
    if _busy(shares.get(cand["id"])):
        return {**base, "verdict": "not comparable", "rows": [], "only_candidate": [], "only_baseline": [],
                "why": f"measured on a busy host: other processes took {shares[cand['id']]:.0f} % of the CPUs during "
                       "its rows (the load, not the change, would be judged)"}
    if not window:
        others = [r for r in st.runs(store, params_name=cand["params_name"])
                  if r["host_kind_id"] != cand["host_kind_id"]]
        verdict = "not comparable" if others else "insufficient"
        why = ("the store has runs of these params only on other host kinds" if others else
               "the store has no earlier run of these params")
        return {**base, "verdict": verdict, "why": why, "rows": [], "only_candidate": [], "only_baseline": []}
    keep = {cand["id"], *(r["id"] for r in window)}
    by_run, labels = _log_speeds([r for r in fetched if r["run_id"] in keep])
    y_c = by_run.get(cand["id"], {})
    per_run = _by_row({j: by_run.get(r["id"], {}) for j, r in enumerate(window)})
    result = judge(y_c, per_run, params)
    rows = [{"row": _name(labels[k]), "identity": labels[k]["identity"], **v} for k, v in result.pop("rows").items()]
    busy = busy_rows(cand_rows, cand["id"])
    rows += [{"row": name, "verdict": "not comparable", "why": "measured on a busy host", "baseline_runs": 0,
              "change_pct": None, "relative_pct": None, "mde_pct": None} for name in busy]
    return {**base, **result, "rows": rows,
            "only_candidate": sorted(_name(labels[k]) or k for k in y_c if k not in per_run),
            "only_baseline": sorted(_name(labels[k]) or k for k in per_run if k not in y_c
                                    and _name(labels[k]) not in busy),
            "why": f"against the last {len(window)} run(s) of this host kind and params"}


def _by_row(runs_: dict[Any, dict[str, float]]) -> dict[str, dict[Any, float]]:
    """{run: {row: y}} turned to {row: {run: y}}, as :func:`judge` takes the baseline."""
    out: dict[str, dict[Any, float]] = defaultdict(dict)
    for j, ys in runs_.items():
        for k, y in ys.items():
            out[k][j] = y
    return dict(out)


# ------------------------------------------------------------------------------------------ the gate's A/A
AA_MAX_PAIRINGS = 5000  # beyond this many (candidate, window) pairings, a fixed-seed sample of them
AA_DETECT = 0.95  # the share of planted slowdowns the gate must find to hold (with no false alarm)


def aa(store: st.Store, params_name: str, params: GateParams = GateParams(), slowdown_pct: float = 10.0,
       kind_id: int | None = None, seed: int = 0) -> dict[str, Any]:
    """The gate's A/A from the store: the runs of one commit's params ``params_name`` on one host kind (``kind_id``;
    default the kind with most of them), each judged against every window of ``params.window`` others
    (every pairing, or a :data:`AA_MAX_PAIRINGS` sample), as measured and with each of its rows in turn slowed by
    ``slowdown_pct`` (its log speed less ``-log(1 - slowdown)``: every process of it that much slower).

    Counts what a CI job would meet: false alarms (a "regressed" verdict, for a row or the whole run, on an
    unchanged commit), the planted slowdowns found ("regressed" on that row), and the MDE each window reaches.
    The "rolling" pairings are those a real gate makes: the candidate against the ``window`` runs before it."""
    import itertools
    import random

    params.check()
    if not 0 < slowdown_pct < 100:
        from resnet_lab.core.errors import UsageError

        raise UsageError(f"--slowdown: {slowdown_pct} must lie in (0, 100) (a slowdown in %)")
    all_runs = st.runs(store, params_name=params_name)
    if kind_id is None and all_runs:
        counts: dict[int, int] = defaultdict(int)
        for r in all_runs:
            counts[r["host_kind_id"]] += 1
        kind_id = max(counts, key=lambda k: (counts[k], k))
    of_kind = [r for r in all_runs if r["host_kind_id"] == kind_id]
    fetched = st.rows_of(store, [r["id"] for r in of_kind])
    shares = others_pct(fetched)
    chosen = [r for r in of_kind if not _busy(shares.get(r["id"]))]
    busy = [{"run": r["name"], "others_pct": shares.get(r["id"])} for r in of_kind if _busy(shares.get(r["id"]))]
    kind = next((k for k in st.kinds(store) if k["id"] == kind_id), None)
    out: dict[str, Any] = {"params_name": params_name, "host_kind": kind["description"] if kind else None,
                           "runs": [{"run": r["run_key"], "commit": r["sha"], "started_at": r["started_at"]}
                                    for r in chosen],
                           "commits": sorted({r["sha"] for r in chosen if r["sha"]}), "busy_runs": busy,
                           "others_pct": {r["name"]: shares.get(r["id"]) for r in chosen},
                           "window": params.window, "slowdown_pct": slowdown_pct,
                           "params": dataclasses.asdict(params)}
    if len(chosen) < params.window + 1:
        return {**out, "held": False, "pairings": 0,
                "why": f"{len(chosen)} run(s) of '{params_name}' on this host kind: an A/A with a window of "
                       f"{params.window} needs {params.window + 1} at least"}
    ids = [r["id"] for r in chosen]
    by_run, labels = _log_speeds([r for r in fetched if r["run_id"] in set(ids)])
    pairings = [(c, w) for c in ids for w in itertools.combinations([i for i in ids if i != c], params.window)]
    total = len(pairings)
    if total > AA_MAX_PAIRINGS:
        pairings = random.Random(seed).sample(pairings, AA_MAX_PAIRINGS)
    position = {i: n for n, i in enumerate(ids)}
    rolling = {(c, tuple(ids[position[c] - params.window:position[c]])) for c in ids[params.window:]}
    drop = math.log1p(-slowdown_pct / 100)
    tally = {"pairings": len(pairings), "false_alarms": 0, "false_alarm_rows": 0, "false_alarm_run": 0,
             "planted": 0, "found": 0, "planted_collateral": 0}
    rolling_tally = {"pairings": 0, "false_alarms": 0, "planted": 0, "found": 0}
    row_mde: dict[str, list[float]] = defaultdict(list)
    run_mde: list[float] = []
    per_row: dict[str, dict[str, int]] = defaultdict(lambda: {"planted": 0, "found": 0, "false_alarms": 0})
    alarms = []
    for c, w in pairings:
        base = _by_row({j: by_run.get(j, {}) for j in w})
        cand = by_run.get(c, {})
        res = judge(cand, base, params)
        flagged = [k for k, v in res["rows"].items() if v["verdict"] == "regressed"]
        run_flag = res["relative"] and res["run_shift"]["verdict"] == "regressed"
        is_rolling = (c, tuple(w)) in rolling
        if flagged or run_flag:
            tally["false_alarms"] += 1
            alarms.append({"candidate": _run_name(chosen, c), "window": [_run_name(chosen, j) for j in w],
                           "rows": [_name(labels[k]) for k in flagged], "whole_run": run_flag,
                           "run_change_pct": res["run_shift"]["change_pct"]})
        tally["false_alarm_rows"] += len(flagged)
        tally["false_alarm_run"] += int(run_flag)
        for k in flagged:
            per_row[k]["false_alarms"] += 1
        for k, v in res["rows"].items():
            if v["mde_pct"] is not None:
                row_mde[k].append(v["mde_pct"])
        if res["run_shift"]["mde_pct"] is not None:
            run_mde.append(res["run_shift"]["mde_pct"])
        if is_rolling:
            rolling_tally["pairings"] += 1
            rolling_tally["false_alarms"] += int(bool(flagged or run_flag))
        for k in res["rows"]:
            if res["rows"][k]["verdict"] == "insufficient":
                continue
            slowed = {**cand, k: cand[k] + drop}
            got = judge(slowed, base, params)["rows"]
            hit = got[k]["verdict"] == "regressed"
            tally["planted"] += 1
            tally["found"] += int(hit)
            tally["planted_collateral"] += sum(1 for j, v in got.items() if j != k and v["verdict"] == "regressed")
            per_row[k]["planted"] += 1
            per_row[k]["found"] += int(hit)
            if is_rolling:
                rolling_tally["planted"] += 1
                rolling_tally["found"] += int(hit)
    detect = tally["found"] / tally["planted"] if tally["planted"] else 0.0
    rows = [{"row": _name(labels[k]), **per_row[k],
             "detected": per_row[k]["found"] / per_row[k]["planted"] if per_row[k]["planted"] else None,
             "mde_pct_median": statistics.median(row_mde[k]) if row_mde[k] else None,
             "mde_pct_max": max(row_mde[k]) if row_mde[k] else None} for k in sorted(per_row, key=str)]
    held = tally["false_alarms"] == 0 and tally["planted"] > 0 and detect >= AA_DETECT
    return {**out, **tally, "pairings_possible": total, "detected": detect, "held": held, "rows": rows,
            "rolling": rolling_tally, "alarms": alarms[:20],
            "run_mde_pct_median": statistics.median(run_mde) if run_mde else None,
            "why": (f"{len(chosen)} runs, each against every window of {params.window} others"
                    + (f" ({len(busy)} busy run(s) left out)" if busy else "")
                    + (f" ({len(pairings)} of {total} pairings, seed {seed})" if total > len(pairings) else ""))}


def _run_name(chosen: list[dict[str, Any]], run_id: int) -> str:
    return next(r["name"] for r in chosen if r["id"] == run_id)


def aa_summary(result: dict[str, Any]) -> str:
    """One line: held or not, the pairings, the false alarms, the planted slowdowns found, the MDE."""
    if not result.get("pairings"):
        return f"A/A not run: {result['why']}"
    mdes = [r["mde_pct_median"] for r in result["rows"] if r["mde_pct_median"] is not None]
    mde = f"; a row's MDE (median over pairings) {min(mdes):.1f}–{max(mdes):.1f} %" if mdes else ""
    return (f"A/A {'held' if result['held'] else 'did not hold'}: {result['why']}: "
            f"{result['false_alarms']} false alarm(s) in {result['pairings']} pairings, "
            f"a planted {result['slowdown_pct']:g} % slowdown of one row found in {result['found']} of "
            f"{result['planted']} ({100 * result['detected']:.1f} %){mde}")


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
