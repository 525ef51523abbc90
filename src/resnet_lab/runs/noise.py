"""A host kind's noise: how far one configuration's speed moves between processes, and between runs, when nothing
changed. Learned from the committed record of that kind (its A/A runs and every row measured in several processes),
it is what a row measured in a single process is judged against.

A row's speed in one process is ``log speed = mu + shift(run) + e(process)``: ``e`` ~ (0, ``sd_process``²) from the
spread of one run's processes, ``shift`` what moves a whole run (the host's state that hour: two A/A runs of one
commit on the AMD host differ by 4-6 % in every row). Two runs of ``kb`` and ``kc`` processes then differ by noise
alone with variance ``shift_var + sd_process² (1/kb + 1/kc)`` (:meth:`NoiseModel.se`), where ``shift_var`` is the
variance of the difference of two runs' shifts.

- ``sd_process``: per row of k >= :data:`MIN_PROCESSES` processes, the sd of its log process means (1.4826 × MAD
  from :data:`ROBUST_FROM` processes on, so one disturbed round does not widen it), pooled over rows with k - 1
  degrees of freedom each.
- ``shift_var``: per configuration measured in two runs of the record (two folders), the squared difference of
  their mean log speeds less what their processes explain; the mean over such pairs, never below 0. Rows measured
  in several processes on both sides are judged with it added too (:func:`with_run_shift`).

Its standard deviations are taken as known (normal quantiles in the verdicts): ``processes``, ``rows`` and ``pairs``
say how much they rest on, and the comparison states them beside each verdict that used them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity, stats
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import shown
from resnet_lab.runs import record

MIN_PROCESSES = 3  # a row measured in fewer processes says nothing about the spread between processes
ROBUST_FROM = 10  # from this many processes on, the MAD (times 1.4826) stands for the sd: one bad round is damped


@dataclasses.dataclass(frozen=True)
class NoiseModel:
    sd_process: float  # between-process sd of log speed within one run
    df: int  # the degrees of freedom sd_process rests on (sum of k - 1 over its rows)
    shift_var: float  # variance of the difference of two runs' shifts of log speed (log units squared)
    processes: int  # processes measured in the rows it was learned from
    rows: int  # rows (configurations × runs) with several processes
    pairs: int  # configurations measured in two runs, which shift_var rests on
    source: str  # the folder it was learned from, relative to the checkout (core.paths.shown)

    def se(self, kb: int = 1, kc: int = 1) -> float:
        """The standard error of a log speed ratio between two runs of ``kb`` and ``kc`` processes when nothing
        changed."""
        return math.sqrt(self.shift_var + self.sd_process ** 2 * (1 / max(kb, 1) + 1 / max(kc, 1)))

    @property
    def sd_run(self) -> float:
        """The sd of one run's shift (log speed): half the variance of the difference of two runs', rooted."""
        return math.sqrt(self.shift_var / 2)

    def describe(self) -> str:
        return (f"host noise model: a process {100 * self.sd_process:.1f} %, a run {100 * self.sd_run:.1f} %"
                f" (sd of log speed; from {self.processes} processes in {self.rows} rows, {self.pairs} pairs of runs,"
                f" {self.source})")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "sd_run": self.sd_run}


def _log_means(row: dict[str, Any]) -> list[float]:
    """The log of each process's mean step time (``process_means``, seconds) of a measured row."""
    return [math.log(float(m)) for m in row.get("process_means") or [] if m and float(m) > 0]


def row_spread(logs: list[float]) -> float:
    """The sd of one row's log process means: the MAD-based sd from :data:`ROBUST_FROM` processes, else the sample
    sd."""
    if len(logs) >= ROBUST_FROM:
        med = statistics.median(logs)
        return stats.MAD_SCALE * statistics.median(abs(x - med) for x in logs)
    return statistics.stdev(logs)


def _provenance_of(f: Path, top: Path) -> Path | None:
    """The nearest ``provenance.json`` at or above ``f``'s folder, up to ``top``."""
    for d in [f.parent, *f.parent.parents]:
        if (d / "provenance.json").is_file():
            return d / "provenance.json"
        if d == top:
            return None
    return None


def _files(folder: Path, own: Any) -> list[Path]:
    """The ``bench*.json`` of the record in ``folder`` (of host kind ``own``, or None) and of the runs kept under it
    on the same host kind: a subfolder with a provenance of another kind (a lent GPU's run) and ``hosts/`` (the
    other kinds' records) are left out."""
    files = []
    for f in sorted(folder.rglob("bench*.json")):
        rel = f.relative_to(folder).parts
        if rel[0] == record.HOSTS_DIR:
            continue
        prov = _provenance_of(f, folder)
        if own is not None and prov is not None and prov.parent != folder:
            try:
                if record.kind_of(prov.parent) != own:
                    continue
            except UsageError:
                continue
        files.append(f)
    return files


def _runs(folder: Path) -> dict[Path, dict[tuple, list[float]]]:
    """Per run folder of the record in ``folder`` (:func:`_files`), each configuration's log process means (one
    row per configuration and folder: a row shared by two of a run's matrices counts once). A row whose own
    ``cpu_model`` or ``available_cpus`` is not the record's (a folder kept without a provenance of its own, measured
    elsewhere) is left out."""
    own = record.kind_of(folder) if (folder / "provenance.json").is_file() else None
    out: dict[Path, dict[tuple, list[float]]] = {}
    for f in _files(folder, own):
        try:
            rows = identity.read_rows(f)
        except (OSError, ValueError, KeyError):
            continue
        run = out.setdefault(f.parent.parent if f.parent.name == "03_benchmarks" else f.parent, {})
        for r in rows:
            if own is not None and ((r.get("cpu_model") or own.cpu) != own.cpu
                                    or int(r.get("available_cpus") or own.cpus or 0) != (own.cpus or 0)):
                continue
            logs = _log_means(r)
            if identity.is_measured(r) and len(logs) >= MIN_PROCESSES:
                run.setdefault(identity.match_key(r), logs)
    return out


def learn(folder: str | Path) -> NoiseModel | None:
    """The noise model of the record in ``folder`` (a host kind's committed record and the runs kept under it),
    None where no row of it was measured in :data:`MIN_PROCESSES` processes or more."""
    folder = Path(folder)
    runs = _runs(folder)
    spreads = [(len(logs) - 1, row_spread(logs)) for run in runs.values() for logs in run.values()]
    df = sum(d for d, _ in spreads)
    if not df:
        return None
    sd = math.sqrt(sum(d * s * s for d, s in spreads) / df)
    shifts = []
    for a, b in itertools.combinations(runs.values(), 2):
        for key in a.keys() & b.keys():
            la, lb = a[key], b[key]
            d = statistics.fmean(la) - statistics.fmean(lb)
            shifts.append(d * d - sd * sd * (1 / len(la) + 1 / len(lb)))
    shift_var = max(0.0, statistics.fmean(shifts)) if shifts else 0.0
    return NoiseModel(sd, df, shift_var, sum(len(logs) for run in runs.values() for logs in run.values()),
                      len(spreads), len(shifts), shown(folder))  # a shared report prints it: no machine path


def compare(base_ips: float, cand_ips: float, kb: int, kc: int, model: NoiseModel,
            alpha: float = 0.05) -> dict[str, Any]:
    """The candidate's speed against the baseline's judged against the host kind's noise (what
    :func:`resnet_lab.bench.stats.compare_estimates` gives, with the model's standard error on normal quantiles)."""
    return stats.verdict(math.log(cand_ips / base_ips), model.se(kb, kc), math.inf, alpha)


def with_run_shift(compared: dict[str, Any], model: NoiseModel, alpha: float = 0.05) -> dict[str, Any]:
    """A between-process comparison (:func:`resnet_lab.bench.stats.compare_estimates`) with the host kind's
    run-to-run shift added to its variance: each run's processes say how that run varied, not how far the next run
    of the same code lands (the AMD A/A runs: 4-6 % apart in every row, with tight processes on both sides). The
    interval, p and verdict are recomputed; the degrees of freedom by Satterthwaite's rule, the shift's variance
    taken as known (so they grow with its share); ``se_run_shift`` says what was added."""
    log_r = math.log1p(compared["delta_pct"] / 100)
    v_proc = compared["se_log"] ** 2
    v = v_proc + model.shift_var
    df = compared["df"]
    df = math.inf if not v_proc or df is None else df * (v / v_proc) ** 2
    return {**stats.verdict(log_r, math.sqrt(v), df, alpha), "se_run_shift": math.sqrt(model.shift_var)}
