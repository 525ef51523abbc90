"""Notebook 03's rows planned against the report's budget on *this* host: what each would take here, which fit.

``make report`` must turn any host into its report in 20 minutes on a quiet 2-core machine, the install included,
whether it has AVX-512 and bf16 or only AVX2. So 03 does not run whatever its parameters list and hope: before any
worker starts it asks, for every row,

1. **native?** A row at a precision the CPU would emulate (:func:`resnet_lab.bench.config.emulation_reason`) is
   skipped with that reason: it would time emulation, and on an AVX2-only host it costs minutes (a bf16 training row
   of the AVX2 record took 931 s of wall for 0.32 img/s).
2. **how long here?** Its cost comes from a committed record (:func:`costs_for`; its ``timing/`` run, the newest
   fresh-clone ``make report`` of that host kind, where it has one): the measured seconds of the same
   configuration per process (start, import, build, first step, warm-up, timed steps, ``bench.csv``), with its
   compute (first step, warm-up, timed steps) scaled by the record's fp32 GEMM peak over this host's. A record of this
   host kind is used as measured; the closest kind by peak otherwise. A configuration the record lacks costs the
   median of the record's rows of its backend and mode.
3. **does it fit?** The report's budget less the install, the other notebooks (the record's times, scaled the same
   way) and 03's own time outside its rows (exports, the per-layer section, plots) is what 03's rows may take. Each
   section gets its share (``section_shares``); a row that does not fit its section's share waits, and is planned
   afterwards if what the other sections left over holds it (the larger shares first, then the sections without
   one in the notebook's order), else skipped "over budget (estimated N s)".

The estimates are the record's measurements moved by one ratio; they are a plan, and 03 prints them beside what
each row then took. Nothing here imports a framework: planning a report takes milliseconds.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity, launcher
from resnet_lab.bench.config import BenchConfig, config_key, emulation_reason
from resnet_lab.core import host
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import shown
from resnet_lab.runs import record

# The report's budget: `make report` from a fresh clone on a quiet 2-core host (the install, then every notebook).
REPORT_BUDGET_S = 1200.0
# The notebooks' order in a report (03's rows are planned; the others cost what the record's run measured).
BENCHMARKS = "03_benchmarks"
# A configuration that no record row resembles: one process of this long (the median row of the records).
UNKNOWN_ROW_S = 30.0


@dataclass(frozen=True)
class RowCost:
    """One measured row of a record, per process: what does not scale with the host's speed (process start,
    import, build) and what does (the first step, one timed step)."""

    fixed_s: float
    first_s: float
    step_s: float
    wall_s: float      # one process, as measured
    processes: int


@dataclass(frozen=True)
class Costs:
    """What a record measured, to plan another run by: its rows' costs, its notebooks' seconds, its peak."""

    source: str                          # the record's folder, relative where it can be
    kind: record.HostKind
    peak_fp32: float                     # the record's fp32 GEMM peak (GFLOP/s)
    rows: dict[tuple, RowCost]           # by identity.match_key
    by_family: dict[tuple, float]        # (backend, mode) -> median seconds per process
    notebooks: dict[str, float]          # notebook -> seconds of the record's run
    rows_s: float                        # 03's rows in that run (every process), for 03's time outside them
    same_kind: bool = True               # the record is of this host's kind (estimates not scaled)

    def ratio(self, peak_fp32: float | None) -> float:
        """How much longer compute takes here than on the record's host (1.0: same kind, or no peak here)."""
        if self.same_kind or not peak_fp32 or not self.peak_fp32:
            return 1.0
        return self.peak_fp32 / peak_fp32

    def estimate(self, cfg: BenchConfig, peak_fp32: float | None) -> tuple[float, str]:
        """(seconds, how): ``cfg``'s wall time here, every process of it."""
        k = self.ratio(peak_fp32)
        cost = self.rows.get(identity.match_key(cfg))
        if cost is None:
            per = self.by_family.get((cfg.backend, cfg.mode))
            how = f"median of the record's {cfg.backend} {cfg.mode} rows" if per else "no similar row in the record"
            return (per or UNKNOWN_ROW_S) * k * cfg.repeats, how
        timed = cfg.steps * cost.step_s
        if cfg.min_time_s:
            timed = max(timed, cfg.min_time_s / k)
        if cfg.max_time_s:
            timed = min(timed, cfg.max_time_s / k)
        per = cost.fixed_s + k * (cost.first_s + cfg.warmup * cost.step_s + timed)
        return per * cfg.repeats, "the record's row" + (f", compute × {k:.2f}" if k != 1.0 else "")

    def notebook_s(self, name: str, peak_fp32: float | None) -> float | None:
        """A notebook's seconds here: the record's, × the compute ratio (None: the record's run did not have it)."""
        s = self.notebooks.get(name)
        return None if s is None else s * self.ratio(peak_fp32)

    def outside_rows_s(self, peak_fp32: float | None) -> float:
        """03's time outside its rows here (exports, the per-layer section, tables and plots)."""
        return max(0.0, (self.notebooks.get(BENCHMARKS, 0.0) - self.rows_s)) * self.ratio(peak_fp32)


def _float(v: Any) -> float:
    try:
        return float(v) if v not in (None, "") else 0.0
    except (TypeError, ValueError):
        return 0.0


def _row_cost(row: Mapping[str, Any]) -> RowCost | None:
    wall = _float(row.get("wall_s"))
    if wall <= 0 or not identity.is_measured(row):
        return None
    steps = row.get("timed_steps") or row.get("steps") or 1
    step = _float(row.get("step_time_mean")) or _float(row.get("timed_s")) / max(float(steps), 1.0)
    fixed = sum(_float(row.get(k)) for k in ("startup_s", "import_s", "build_s"))
    first = _float(row.get("first_step_s"))
    if fixed + first <= 0:  # an older row without the parts: all of it scales
        fixed, first = 0.0, wall - float(steps) * step
    return RowCost(fixed, max(first, 0.0), step, wall, int(row.get("repeats") or 1))


def read_costs(folder: str | Path, here: record.HostKind | None = None) -> Costs:
    """The :class:`Costs` of a record (a committed ``outputs/reference/hosts/<kind>/`` or a run folder): its
    ``bench.csv`` (or 03's ``bench.csv``), its provenance's notebook seconds and its fp32 peak. ``here``: the host
    being planned for (the record is then of its kind or not). UsageError naming what is missing."""
    folder = Path(folder)
    csv = next((p for p in (folder / "bench.csv", folder / BENCHMARKS / "bench.csv") if p.is_file()), None)
    if csv is None:
        raise UsageError(f"{folder}: no bench.csv to plan from (a record keeps 03's bench.csv)")
    rows = identity.read_rows(csv)
    prov = record.read_provenance(folder)
    kind = record.kind_of(folder)
    peaks = dict(kind.peaks) or _peaks(folder)
    costs: dict[tuple, RowCost] = {}
    family: dict[tuple, list[float]] = {}
    rows_s = 0.0
    for row in rows:
        cost = _row_cost(row)
        if cost is None:
            continue
        if not row.get("same_run_as"):
            rows_s += cost.wall_s * cost.processes
        costs.setdefault(identity.match_key(row), cost)
        family.setdefault((row.get("backend"), row.get("mode")), []).append(cost.wall_s)
    notebooks = {n["name"]: float(n["seconds"]) for n in prov.get("notebooks") or []
                 if isinstance(n, dict) and n.get("seconds") is not None}
    return Costs(source=shown(folder), kind=kind, peak_fp32=float(peaks.get("fp32") or 0.0), rows=costs,
                 by_family={k: statistics.median(v) for k, v in family.items()}, notebooks=notebooks,
                 rows_s=rows_s, same_kind=here is not None and here == kind)


def _peaks(folder: Path) -> dict[str, float]:
    """The peaks of a record's peak.json whatever its size (the kind keeps only a full, quiet measurement's)."""
    for rel in record.PEAK_FILES:
        if (folder / rel).is_file():
            return {k: float(v) for k, v in (json.loads((folder / rel).read_text()).get("peak_gflops") or {}).items()}
    return {}


TIMING_DIR = "timing"  # a record's newest fresh-clone `make report` on its host kind, for planning (provenance,
                      # peak, bench.csv, wall_breakdown.csv): newer than the record's figures, which stay as they are


def timing_of(folder: Path) -> Path:
    """Where a record's planning costs come from: its ``timing/`` run where it has one, else the record itself."""
    t = Path(folder) / TIMING_DIR
    return t if (t / "bench.csv").is_file() and (t / "provenance.json").is_file() else Path(folder)


def planning_folders(root: Path) -> list[Path]:
    """What a report can be planned by under a reference root: each record's :func:`timing_of`, then each host kind
    known by its timing alone (``hosts/<slug>/timing/`` with no record around it: measured facts of a kind, e.g. an
    AVX2-only one, that ``compare`` and ``history`` do not read)."""
    if not root.is_dir():
        return []
    records = [timing_of(f) for f in record.reference_records(root)]
    alone = [t.parent for t in sorted(root.glob(f"{record.HOSTS_DIR}/*/{TIMING_DIR}/provenance.json"))
             if not (t.parent.parent / "provenance.json").is_file() and (t.parent / "bench.csv").is_file()]
    return records + alone


def costs_for(here: record.HostKind, peak_fp32: float | None, roots: Sequence[Path]) -> Costs | None:
    """The record to plan this host by: one of its kind among the records and timing-only kinds under ``roots``
    (committed ``outputs/reference``: :func:`planning_folders`), else the one whose fp32 peak is closest to
    ``peak_fp32``; None where none has rows to go by (then nothing is skipped for time)."""
    candidates = []
    for root in roots:
        for folder in planning_folders(Path(root)):
            try:
                costs = read_costs(folder, here)
            except (UsageError, OSError, ValueError):
                continue
            if costs.rows:
                candidates.append(costs)
    same = [c for c in candidates if c.same_kind]
    if same:
        return same[0]
    if not candidates or not peak_fp32:
        return candidates[0] if candidates else None
    return min(candidates, key=lambda c: abs(c.peak_fp32 - peak_fp32) if c.peak_fp32 else float("inf"))


# ------------------------------------------------------------------------------------------ the plan
@dataclass
class Planned:
    """One row of 03 as planned: run, or skipped with why, and what it was estimated to take here."""

    section: str
    index: int
    label: str
    estimate_s: float | None
    status: str = "run"     # run | shared (measured by an earlier section's row) | skipped
    reason: str = ""


@dataclass
class RowPlan:
    """Every row of 03's sections as planned on this host, and the report's estimate around them."""

    rows: list[Planned]
    budget_s: float | None               # what 03's rows may take here (None: no budget)
    shares: dict[str, float]             # section -> its share of that, seconds
    around_s: dict[str, float | None] = field(default_factory=dict)  # install, other notebooks, 03 outside rows
    costs: str | None = None             # which record the estimates come from, and how
    capabilities: str = ""

    def skips(self, section: str) -> dict[int, str]:
        """index -> reason, for :func:`resnet_lab.bench.launcher.run_matrix`'s ``skip``."""
        return {p.index: p.reason for p in self.rows if p.section == section and p.status == "skipped"}

    @property
    def rows_s(self) -> float:
        return sum(p.estimate_s or 0.0 for p in self.rows if p.status == "run")

    @property
    def total_s(self) -> float:
        """The report's estimated wall time here: the install, every notebook, 03's planned rows."""
        return self.rows_s + sum(v or 0.0 for v in self.around_s.values())

    def left_out(self) -> list[Planned]:
        return [p for p in self.rows if p.status == "skipped"]

    def summary(self) -> str:
        """What the plan keeps and leaves out, in one paragraph (03 prints it before its first row)."""
        out = self.left_out()
        emulated = [p for p in out if not p.reason.startswith("over budget")]
        over = [p for p in out if p.reason.startswith("over budget")]
        text = (f"Planned on this host ({self.capabilities}): {sum(p.status == 'run' for p in self.rows)} rows to "
                f"run, estimated {self.rows_s / 60:.1f} min")
        if self.budget_s is not None:
            text += f" of a {self.budget_s / 60:.1f}-min budget for 03's rows"
        if self.costs:
            text += f" (costs from {self.costs})"
        text += f"; the report, install included, {self.total_s / 60:.1f} min."
        if emulated:
            text += f" Left out as emulated here: {len(emulated)} ({', '.join(_names(emulated))})."
        if over:
            text += (f" Left out over budget: {len(over)} ({', '.join(_names(over))}), "
                     f"{sum(p.estimate_s or 0 for p in over) / 60:.1f} min estimated.")
        if not out:
            text += " Nothing left out."
        return text


def _names(planned: list[Planned]) -> list[str]:
    return [f"{p.label} ({p.estimate_s:.0f} s)" if p.estimate_s else p.label for p in planned]


def check_shares(shares: Mapping[str, Any], sections: Sequence[str]) -> dict[str, float]:
    """``section_shares`` as floats; UsageError naming the key or value that is wrong and what is allowed."""
    if not isinstance(shares, Mapping):
        raise UsageError(f"section_shares: expected a mapping of section -> share, got {type(shares).__name__}")
    out = {}
    for name, value in shares.items():
        if name not in sections:
            raise UsageError(f"section_shares: {name!r} is not a section; sections are: {', '.join(sections)}")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise UsageError(f"section_shares.{name}: {value!r} is not a number >= 0")
        out[name] = float(value)
    if out and not sum(out.values()) > 0:
        raise UsageError("section_shares: the shares add up to 0; give at least one section a share > 0")
    return out


def plan_rows(sections: Mapping[str, Sequence[BenchConfig]], costs: Costs | None, peak_fp32: float | None,
              budget_s: float | None = REPORT_BUDGET_S, install_s: float = 0.0,
              shares: Mapping[str, float] | None = None, notebooks: Sequence[str] = (),
              caps: host.Capabilities | None = None) -> RowPlan:
    """03's rows planned on this host (see the module's docstring). ``sections``: name -> configurations, in the
    notebook's order (:attr:`resnet_lab.bench.plan.Plan.sections`); ``budget_s``: the report's budget (None: no
    budget, only emulated rows are left out); ``notebooks``: the report's other notebooks, whose seconds the
    record gives; ``shares``: each section's share of 03's rows' budget (a section not named: none of its own)."""
    caps = caps or host.capabilities()
    weights = dict(shares or {})
    # a configuration in several sections is measured once (the first section to run it, the others reuse its
    # row) and charged to the one of them with the largest share: the quoted TF row is versus's, not the sweep's
    owner: dict[str, str] = {}
    for name, cfgs in sections.items():
        for cfg in cfgs:
            key = config_key(cfg)
            if key not in owner or weights.get(name, 0.0) > weights.get(owner[key], 0.0):
                owner[key] = name
    rows: list[Planned] = []
    seen: dict[str, Planned] = {}  # config_key -> the row it is charged to
    for name, cfgs in sections.items():
        for i, cfg in enumerate(cfgs):
            p = Planned(name, i, cfg.label or identity.describe(cfg), None)
            key = config_key(cfg)
            why = emulation_reason(cfg, caps)
            pre = None if why else launcher.precheck(cfg)  # no such device or backend: skips itself in milliseconds
            if why:
                p.status, p.reason = "skipped", why
            elif pre:
                p.status, p.estimate_s = "run", 0.0
            elif owner[key] != name or key in seen:
                p.status, p.estimate_s = "shared", 0.0
            else:
                p.estimate_s = costs.estimate(cfg, peak_fp32)[0] if costs else None
                seen[key] = p
            rows.append(p)
    around: dict[str, float | None] = {"install": install_s}
    for nb in notebooks:
        if nb != BENCHMARKS:
            around[nb] = costs.notebook_s(nb, peak_fp32) if costs else None
    around["03 outside its rows"] = costs.outside_rows_s(peak_fp32) if costs else None
    budget = None
    if budget_s is not None and costs is not None:
        budget = max(0.0, budget_s - sum(v or 0.0 for v in around.values()))
    plan = RowPlan(rows, budget, {}, around, _costs_words(costs, peak_fp32), caps.describe())
    if budget is None:
        return plan
    total_w = sum(weights.values()) or 1.0
    plan.shares = {name: budget * weights.get(name, 0.0) / total_w for name in sections}
    spent = dict.fromkeys(sections, 0.0)
    waiting: list[Planned] = []
    for p in rows:  # each section within its share, in order
        if p.status != "run" or not p.estimate_s:
            continue
        if spent[p.section] + (p.estimate_s or 0.0) <= plan.shares[p.section]:
            spent[p.section] += p.estimate_s or 0.0
        else:
            waiting.append(p)
    pool = budget - sum(spent.values())
    waiting.sort(key=lambda p: -weights.get(p.section, 0.0))  # stable: by share, then the notebook's order
    for p in waiting:  # then what the other sections left, the larger shares first
        if (p.estimate_s or 0.0) <= pool:
            pool -= p.estimate_s or 0.0
        else:
            p.status = "skipped"
            p.reason = (f"over budget (estimated {p.estimate_s:.0f} s here; {p.section}'s share of 03's "
                        f"{budget:.0f} s is {plan.shares[p.section]:.0f} s and {pool:.0f} s were left over)")
    for p in rows:  # a row measured with a skipped one (an earlier section's, same configuration) goes with it
        first = seen.get(config_key(sections[p.section][p.index]))
        if p.status == "shared" and first is not None and first.status == "skipped":
            p.status, p.reason = "skipped", f"{first.reason}: measured with {first.section}'s {first.label}"
    return plan


def _costs_words(costs: Costs | None, peak_fp32: float | None) -> str | None:
    if costs is None:
        return None
    if costs.same_kind:
        return f"the record of this host kind, {costs.source}"
    here = f"{peak_fp32:.0f}" if peak_fp32 else "unmeasured"
    return (f"{costs.source}, another host kind (fp32 peak {costs.peak_fp32:.0f} GFLOP/s, here {here}: "
            f"compute × {costs.ratio(peak_fp32):.2f})")


def as_records(plan: RowPlan) -> list[dict[str, Any]]:
    """The plan as rows of a table (03's "what was left out and why", and plan.csv)."""
    return [dataclasses.asdict(p) for p in plan.rows]



# The sections' shares of 03's rows' budget where the params file names none: the quoted rows first (TF against
# native PyTorch, the 2017 table's CPU rows), then the served rows, the other compilers, their knobs, the profile; what
# a section leaves goes to the rows still waiting, the larger shares first, then the sections without a share (the
# sweeps and the backends: rows nobody quotes) in the notebook's order.
DEFAULT_SHARES = {"versus": 0.5, "table_2017": 0.3, "mlperf": 0.08, "engines": 0.07, "knobs": 0.03, "profile": 0.02}


def this_host(peak_doc: Mapping[str, Any] | None) -> record.HostKind:
    """This host's kind: what provenance collects now, with 00's peaks where they are a full, quiet measurement."""
    from resnet_lab.ceilings import peak
    from resnet_lab.core import provenance

    peaks: tuple[tuple[str, float], ...] = ()
    if peak_doc and peak.is_full_measurement(dict(peak_doc)) and not peak.loaded_reasons(dict(peak_doc)):
        peaks = tuple(sorted((str(d), float(v)) for d, v in (peak_doc.get("peak_gflops") or {}).items() if v))
    return record.host_kind(provenance.collect(), peaks=peaks)


def plan_here(sections: Mapping[str, Sequence[BenchConfig]], peak_doc: Mapping[str, Any] | None,
              budget_s: float | None, install_s: float = 0.0, shares: Mapping[str, Any] | None = None,
              outputs: str | Path = "outputs") -> RowPlan:
    """:func:`plan_rows` on this host: its kind and 00's fp32 peak, the committed record closest to it
    (:func:`costs_for` over ``outputs/reference``), the record's notebooks as the report's."""
    fp32 = float(((peak_doc or {}).get("peak_gflops") or {}).get("fp32") or 0.0) or None
    root = record.reference_root(Path(outputs))
    costs = costs_for(this_host(peak_doc), fp32, [root] if root else []) if budget_s is not None else None
    weights = check_shares(DEFAULT_SHARES if shares is None else shares, list(sections))
    return plan_rows(sections, costs, fp32, budget_s, install_s, weights,
                     [n for n in (costs.notebooks if costs else {}) if n != BENCHMARKS])


# What 03 shows of the rows left out (workbook.display.table); plan.csv keeps every planned row.
VIEW_LEFT_OUT = {"section": ("section", ""), "label": ("row", ""), "estimate_s": ("estimated here", "s"),
                 "reason": ("why it was left out", "")}


def left_out_frame(plan: RowPlan) -> Any:
    """The rows the plan leaves out, as a table (None where it leaves none out: nothing to show)."""
    import pandas as pd

    rows = [r for r in as_records(plan) if r["status"] == "skipped"]
    return pd.DataFrame(rows) if rows else None


def against_measured(plan: RowPlan, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[Any, str]:
    """(table, line): each planned row's estimate beside the wall time it then took (every process of it), and one
    line saying how far the plan was off in all (``rows``: section -> the rows run_matrix returned)."""
    import pandas as pd

    out = []
    for p in plan.rows:
        got = list(rows.get(p.section) or [])
        if p.status != "run" or not p.estimate_s or p.index >= len(got):
            continue
        row = got[p.index]
        if row.get("same_run_as") or not row.get("wall_s"):
            continue
        processes = len(row.get("process_means") or [None])
        out.append({"section": p.section, "label": p.label, "estimate_s": p.estimate_s,
                    "measured_s": float(row["wall_s"]) * processes})
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame, "No planned row was measured: nothing to hold the estimates against."
    est, got = frame["estimate_s"].sum(), frame["measured_s"].sum()
    frame["ratio"] = frame["measured_s"] / frame["estimate_s"]
    worst = frame.iloc[(frame["ratio"] - 1).abs().argmax()]
    return frame, (f"The plan estimated {est / 60:.1f} min for the {len(frame)} rows measured; they took "
                   f"{got / 60:.1f} min ({got / est:.2f}×; the furthest off: {worst['label']}, {worst['ratio']:.2f}×).")
