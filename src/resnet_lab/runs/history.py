"""How the headline speeds moved over every run (``resnet-lab history``): one series per configuration and
host kind, each with the change points found in it.

- **which configurations**: the rows notebook 03's summary quotes (its ``results.json``: the fastest
  training configuration, the fastest fp32 one, the 2017 rows, the backends; a record without that file: the
  fastest ones of its rows, :func:`resnet_lab.runs.headline.headline`), identified by
  :func:`resnet_lab.bench.identity.match_key`, and kept where at least two records measured them.
- **which records**: every run in the results store (:mod:`resnet_lab.runs.store`: ``outputs/store.sqlite``, or
  a team's ``$RESNET_LAB_STORE``), after this outputs root's run folders under ``outputs/runs/`` and committed
  records of ``outputs/reference/`` are pushed where it lacks them, each read whole
  (:func:`resnet_lab.runs.record.read`); a folder that cannot be read is skipped and named, never half-read.
  A team's store holds every developer's and lab host's runs: one history for all of them.
- **one series per host kind** (:class:`resnet_lab.runs.record.HostKind`): a change of CPU model is where one
  series ends and another starts, an annotation, never a step of either.
- **change points**: PELT (``ruptures``) on the log of images/sec, ``l2`` cost, segments of two runs at least,
  penalty :data:`PENALTY_FACTOR` × σ² × ln n, σ the noise of the series (see :func:`change_points`). A change
  point whose new level rests on fewer than :data:`TENTATIVE_AFTER` runs is marked **tentative**: the next run
  can move or remove it (what Otava's users met at a series' end), so it is shown, never gated on.

Logic only: the Markdown, table and plots (``--out DIR``: ``history.json``, ``history.md`` and one PNG per
configuration) and the command line are :mod:`resnet_lab.report.history`; ``outputs/index.html`` shows the
same as a compact table (``resnet_lab.workbook.runner.write_index``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import itertools
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity
from resnet_lab.core import provenance
from resnet_lab.core.errors import UsageError
from resnet_lab.runs import headline, record

# PELT's penalty per change point, in units of σ² ln n. BIC for one more segment (its mean and where it
# starts: two parameters) is 2σ² ln n; three times that, because σ is estimated from the series itself, and
# from ten-odd runs that estimate is often low: on 12 runs of flat Gaussian noise this keeps false change
# points to about 5 % of series, while a step of 7σ (-15 % at 2 % noise) is found every time.
PENALTY_FACTOR = 6.0
MIN_SEGMENT = 2  # runs on each side of a change point: one odd run is an outlier, not a new level
TENTATIVE_AFTER = 2 * MIN_SEGMENT  # runs at a new level before its change point is more than tentative
MIN_RUNS = 6  # fewer runs than this in a series: too few to tell a step from noise, no change point sought
NOISE_FLOOR = 0.0025  # σ of log speed never taken below 0.25 %: identical numbers are not infinitely precise
Z95 = 1.959964


@dataclasses.dataclass
class Point:
    """One record's measurement of one configuration."""

    run: str
    date: _dt.datetime
    commit: str | None
    kind: record.HostKind
    images_per_sec: float
    ci95_low: float | None
    ci95_high: float | None
    process_images_per_sec: list[float]  # each process's images/sec, where the row was measured in several
    started_at: str  # the row's own start: the same row copied into another record is one point
    name: str  # the row's name with its label, e.g. "CPU MKL (fp32 · no XLA · oneDNN · b32)"

    def as_json(self) -> dict[str, Any]:
        return {"run": self.run, "date": self.date.isoformat(), "commit": self.commit,
                "host_kind": self.kind.describe(), "images_per_sec": self.images_per_sec,
                "ci95_low": self.ci95_low, "ci95_high": self.ci95_high,
                "process_images_per_sec": self.process_images_per_sec}


# ------------------------------------------------------------------------------------------ reading
def _date(text: Any) -> _dt.datetime | None:
    try:
        d = _dt.datetime.fromisoformat(str(text))
    except (TypeError, ValueError):
        return None
    return d if d.tzinfo else d.replace(tzinfo=_dt.UTC)


def _points(run: dict[str, Any], kind: record.HostKind, rows: list[dict[str, Any]]) -> dict[tuple, list[Point]]:
    """Each measured row of a stored run as a point: dated by its run, or by the row itself in a committed
    record (``run["committed"]``: one gathers rows measured on different days, by different commits)."""
    committed = bool(run.get("committed"))
    commit_of_run = run.get("sha")
    out: dict[tuple, list[Point]] = defaultdict(list)
    for r in rows:
        if not identity.is_measured(r) or r.get("same_run_as"):
            continue
        dates = (r.get("started_at"), run.get("started_at")) if committed else (run.get("started_at"),
                                                                                r.get("started_at"))
        when = next((d for d in map(_date, (*dates, run.get("collected_at"))) if d is not None), None)
        if when is None:  # nowhere to put it in time
            continue
        commit = (r.get("commit") or commit_of_run) if committed else (commit_of_run or r.get("commit"))
        out[identity.match_key(r)].append(Point(
            run["name"], when, commit, kind, float(r["images_per_sec"]), r.get("ci95_low"), r.get("ci95_high"),
            record.process_images_per_sec(r), str(r.get("started_at") or ""), identity.describe(r, labelled=True)))
    return out


def read_store(outputs: Path, store_url: str | None = None) -> tuple[list[tuple], list[dict[str, str]], str]:
    """The store's runs (:func:`resnet_lab.runs.store.stored_runs`) after pushing what it lacks of this outputs
    root: the committed records of ``outputs/reference/`` and every run folder under ``outputs/runs/``
    (idempotent). A folder that cannot be read whole is skipped and named, never half-read: (runs, skipped, the
    store as a line may show it)."""
    from resnet_lab.runs import store as st

    store = st.open_store(store_url, outputs)
    try:
        skipped = [{"folder": d["record"], "reason": d["skipped"]} for d in st.push_records(store, outputs)
                   if "skipped" in d]
        for folder in sorted((outputs / "runs").glob("*")):
            if folder.is_dir():
                try:
                    st.push_new(store, folder)
                except UsageError as exc:
                    skipped.append({"folder": str(folder), "reason": str(exc)})
        return list(st.stored_runs(store)), skipped, store.shown
    finally:
        store.close()


# ------------------------------------------------------------------------------------------ change points
def noise(values: list[float], within: list[float]) -> float:
    """σ of log speed between runs: the median absolute deviation of successive differences (÷ √2, × 1.4826
    for a normal σ), which one step barely moves (it is one difference of many); never below the median
    interval of the runs themselves (what one run's own steps say about its precision) nor
    :data:`NOISE_FLOOR`."""
    y = [math.log(v) for v in values]
    diffs = [b - a for a, b in itertools.pairwise(y)]
    between = 0.0
    if len(diffs) >= 2:
        centre = statistics.median(diffs)
        between = 1.4826 * statistics.median(abs(d - centre) for d in diffs) / math.sqrt(2)
    return max(between, statistics.median(within) if within else 0.0, NOISE_FLOOR)


def change_points(values: list[float], within: list[float] | None = None) -> dict[str, Any]:
    """Where the level of a series of images/sec changes: PELT (``ruptures.Pelt``, ``l2`` cost: a change of
    mean) on log speed, segments of :data:`MIN_SEGMENT` runs at least, penalty :data:`PENALTY_FACTOR` × σ² ×
    ln n with σ from :func:`noise`. Log speed makes a step a ratio, the same whatever the speed.

    Returns ``{"indices": [i, ...]`` (the first run of each new level), ``"tentative"`` (per index: fewer than
    :data:`TENTATIVE_AFTER` runs from it to the series' end), ``"sigma_pct"``, ``"penalty"``, ``"levels"`` (each
    segment's geometric-mean images/sec)}; no indices for fewer than :data:`MIN_RUNS` runs."""
    n = len(values)
    sigma = noise(values, within or [])
    penalty = PENALTY_FACTOR * sigma**2 * math.log(max(n, 2))
    out: dict[str, Any] = {"indices": [], "tentative": [], "sigma_pct": 100 * sigma, "penalty": penalty,
                           "levels": [math.exp(statistics.fmean(math.log(v) for v in values))] if values else []}
    if n < MIN_RUNS:
        return out
    import numpy as np
    import ruptures as rpt

    y = np.log(np.asarray(values, dtype=float)).reshape(-1, 1)
    ends = rpt.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(y).predict(pen=penalty)
    out["indices"] = [int(i) for i in ends[:-1]]
    out["tentative"] = [n - i < TENTATIVE_AFTER for i in out["indices"]]
    bounds = [0, *out["indices"], n]
    out["levels"] = [math.exp(float(np.mean(y[a:b]))) for a, b in itertools.pairwise(bounds)]
    return out


def _within(p: Point) -> float | None:
    """σ of a run's own log speed from its 95 % interval, where it has one."""
    lo, hi = p.ci95_low, p.ci95_high
    if lo is None or hi is None or not (0 < lo <= p.images_per_sec <= hi):
        return None
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


# ------------------------------------------------------------------------------------------ the history
def machines(points: list[Point]) -> tuple[list[record.HostKind], list[record.HostKind]]:
    """The real machines among ``points``' host kinds, and each point's: a point joins the first machine (in
    time order) whose kind equals its own (measured facts and peaks: :class:`resnet_lab.runs.record.HostKind`),
    else starts a new one. One assignment per point, although an older record without facts equals more than
    one measured kind."""
    kinds: list[record.HostKind] = []
    of = []
    for p in points:
        k = next((k for k in kinds if k == p.kind), None)
        if k is None:
            kinds.append(p.kind)
            k = p.kind
        of.append(k)
    return kinds, of


def _series(config: str, kind: record.HostKind, points: list[Point]) -> dict[str, Any]:
    cp = change_points([p.images_per_sec for p in points], [w for p in points if (w := _within(p)) is not None])
    changes = []
    for idx, tentative, before, after in zip(cp["indices"], cp["tentative"], cp["levels"], cp["levels"][1:],
                                             strict=False):
        p, prev = points[idx], points[idx - 1]
        changes.append({"index": idx, "tentative": tentative, "runs_after": len(points) - idx,
                        "date": p.date.isoformat(), "run": p.run, "commit": p.commit,
                        "after_run": prev.run, "after_commit": prev.commit, "step_pct": 100 * (after / before - 1),
                        "level_before": before, "level_after": after})
    return {"config": config, "host_kind": kind.describe(), "runs": len(points),
            "points": [p.as_json() for p in points], "change_points": changes,
            "noise_pct": cp["sigma_pct"], "penalty": cp["penalty"],
            "last": points[-1].as_json() if points else None}


def history(outputs: str | Path, store_url: str | None = None) -> dict[str, Any]:
    """The whole history as JSON-able data (see module doc), read from the results store (``store_url``; default
    ``$RESNET_LAB_STORE`` or ``<outputs>/store.sqlite``) after this outputs root's runs are pushed into it.
    UsageError when ``outputs`` is not a folder or the store does not open."""
    outputs = Path(outputs)
    if not outputs.is_dir():
        raise UsageError(f"OUTPUTS_DIR: '{outputs}' is not a folder (the outputs root: runs/, reference/)")
    runs, skipped, shown = read_store(outputs, store_url)
    wanted: set[tuple] = set()
    by_key: dict[tuple, dict[tuple, Point]] = defaultdict(dict)
    for run, kind, rows, quoted in runs:
        wanted |= quoted if quoted is not None else headline.quoted_keys(rows, None)
        for key, points in _points(run, kind, rows).items():
            for p in points:
                # a row copied from a run folder into the committed record is the same measurement: once
                by_key[key].setdefault((p.started_at or f"{p.run}/{p.date}", p.images_per_sec), p)
    configs = []
    for key in wanted:
        points = sorted(by_key.get(key, {}).values(), key=lambda p: (p.date, p.run))
        if len({p.run for p in points}) < 2:
            continue
        name = points[-1].name  # as the newest run labels it
        kinds, of = machines(points)
        series = [_series(name, k, [p for p, k_p in zip(points, of, strict=True) if k_p is k]) for k in kinds]
        switches = [{"date": b.date.isoformat(), "run": b.run, "from": ka.describe(), "to": kb.describe()}
                    for (a, ka), (b, kb) in itertools.pairwise(zip(points, of, strict=True)) if ka is not kb]
        configs.append({"config": name, "key": dict(zip(identity.IDENTITY, key, strict=True)),
                        "series": series, "host_kind_changes": switches})
    configs.sort(key=lambda c: c["config"])
    return {"outputs": str(outputs), "store": shown, "records": len(runs), "configurations": configs,
            "skipped": skipped,
            "method": {"change_points": "ruptures.Pelt, l2 cost on log images/sec", "min_segment": MIN_SEGMENT,
                       "tentative": f"fewer than {TENTATIVE_AFTER} runs at the new level",
                       "min_runs": MIN_RUNS, "penalty": f"{PENALTY_FACTOR:g} × σ² × ln n",
                       "sigma": "MAD of successive differences / √2 × 1.4826, at least the runs' own median "
                                f"interval σ and {100 * NOISE_FLOOR:g} %"},
            "created_at": provenance.now_iso()}


