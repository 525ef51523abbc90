"""Two runs side by side (``resnet-lab compare BASELINE CANDIDATE``): did the op set change, did the speed
move, and is the move real or noise?

A run is a record (:mod:`resnet_lab.runs.record`): a run folder under ``outputs/runs/`` or a record of CSVs
(``outputs/reference/``), read whole or not at all (a damaged file is one line naming it, exit 2). Three parts:

- **ops**: per (model, backend, mode, stage, platform, precision), opcodes added and removed and count
  changes; convolution and dot configurations added and removed where both runs recorded them at one batch
  and image size.
- **throughput**: rows matched on what defines a measurement (:func:`resnet_lab.bench.identity.match_key`);
  the candidate's images/sec against the baseline's in %, with a 95 % interval: from the processes where
  both rows were measured in several (:func:`resnet_lab.bench.stats.compare_estimates`, basis "between
  processes"), else from the steps (:func:`resnet_lab.bench.stats.compare_speed`: per-step times when a row
  has them, else its summary columns; basis "indicative"); p-values Holm-corrected over the rows compared,
  the smallest detectable slowdown (``mde_pct``) and a verdict (faster, slower, no significant change,
  inconclusive); the MFU delta; rows present in one run only.
- **environment**: commit, packages, CPU and its ISA flags, cores, oneDNN, GPUs, other processes' share of
  the CPUs while measuring; warnings when the host kinds differ or a run was measured on a busy machine.

**Like with like.** Speeds are judged only between runs of one host kind (:class:`resnet_lab.runs.record.HostKind`:
CPU model, available CPUs, GPUs). Across two kinds the comparison says so, shows the speeds and counts no
regression: the machine, not the change, would be measured. The default baseline (:func:`default_baseline`)
is of the candidate's kind, or there is none.

:func:`exit_code` is what a CI job gates on: 1 when a matched row of one host kind is significantly slower
(after Holm) by more than the threshold on the between-process basis (any basis with ``strict``), else 0.
Reading and checking come before anything is written; a bad input is one
:class:`~resnet_lab.core.errors.UsageError` line (two runs with nothing in common: :class:`NothingInCommon`).

The answer is a :class:`Comparison` (``to_dict``: ``comparison.json``). Logic only: its Markdown, table and
plot, notebook 05's view and the command line are :mod:`resnet_lab.report.compare`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity, stats
from resnet_lab.core import artifacts, hostload, provenance
from resnet_lab.core.errors import UsageError
from resnet_lab.hlo import parser
from resnet_lab.runs import noise, record
from resnet_lab.runs.record import OP_KEYS, Run, load

NOTEBOOK = "05_compare"  # the notebook that compares each run with the one before it
MATCH_KEYS = identity.IDENTITY  # the columns of throughput.csv that say which configuration a line is
# A result's status: compared; no record of the candidate's host kind exists; the two runs share no configuration
COMPARED, NO_BASELINE, NOTHING_IN_COMMON = "compared", "no comparable baseline", "nothing in common"


class NothingInCommon(UsageError):
    """Two records of which no benchmark row and no op inventory match: nothing to compare (notebook 05
    answers so; ``resnet-lab compare`` exits 2)."""


@dataclasses.dataclass
class Side:
    """One of the two runs: its name, its folder (None: no baseline) and why it was chosen (notebook 05)."""

    name: str | None
    path: str | None
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, **({} if self.why is None else {"why": self.why})}


@dataclasses.dataclass
class Comparison:
    """What comparing two runs found (see module doc). ``status`` :data:`COMPARED`, or :data:`NO_BASELINE` /
    :data:`NOTHING_IN_COMMON` with the ``reason`` and nothing compared (no ops, throughput, environment).

    ``ops``: :func:`compare_ops`; ``throughput``: :func:`compare_throughput` (``matched``, ``only_in_baseline``,
    ``only_in_candidate``); ``environment`` and ``warnings``: :func:`compare_env`; ``regressions``: the
    configurations that gate (:func:`exit_code`); ``indicative_slowdowns``: slower beyond the threshold in
    one process, not gated."""

    status: str
    baseline: Side
    candidate: Side
    threshold_pct: float
    strict: bool = False
    reason: str | None = None
    host_kinds: dict[str, Any] | None = None  # {"baseline": label, "candidate": label, "same": bool}
    ops: list[dict[str, Any]] | None = None
    throughput: dict[str, Any] | None = None
    environment: list[dict[str, Any]] | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    regressions: list[str] = dataclasses.field(default_factory=list)
    indicative_slowdowns: list[str] = dataclasses.field(default_factory=list)
    created_at: str = dataclasses.field(default_factory=provenance.now_iso)

    @property
    def compared(self) -> bool:
        return self.status == COMPARED

    @property
    def ops_identical(self) -> bool | None:
        """Whether every op key both runs captured has the same op set (None: nothing compared)."""
        return None if self.ops is None else all(o["identical"] for o in self.ops)

    @property
    def same_kind(self) -> bool:
        """Whether the two runs are of one host kind (a comparison without host kinds: assumed so)."""
        return (self.host_kinds or {}).get("same", True)

    @property
    def matched(self) -> list[dict[str, Any]]:
        """The rows both runs measured, each compared (:func:`compare_throughput`)."""
        return (self.throughput or {}).get("matched") or []

    def to_dict(self) -> dict[str, Any]:
        """``comparison.json``: JSON-able, its keys in the order they were always written."""
        sides = {"baseline": self.baseline.to_dict(), "candidate": self.candidate.to_dict()}
        if not self.compared:
            return {"status": self.status, "reason": self.reason, **sides, "threshold_pct": self.threshold_pct,
                    "strict": self.strict, "regressions": self.regressions,
                    "indicative_slowdowns": self.indicative_slowdowns, "created_at": self.created_at}
        return {"status": self.status, **sides, "host_kinds": self.host_kinds, "threshold_pct": self.threshold_pct,
                "strict": self.strict, "indicative_slowdowns": self.indicative_slowdowns, "ops": self.ops,
                "ops_identical": self.ops_identical, "throughput": self.throughput, "environment": self.environment,
                "warnings": self.warnings, "regressions": self.regressions, "created_at": self.created_at}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Comparison:
        """A ``comparison.json`` read back (an older one too: what it lacks is None or empty)."""
        def side(x: Any) -> Side:
            x = x if isinstance(x, dict) else {}
            return Side(x.get("name"), x.get("path"), x.get("why"))

        return cls(status=d.get("status") or COMPARED, baseline=side(d.get("baseline")),
                   candidate=side(d.get("candidate")), threshold_pct=d.get("threshold_pct", 5.0),
                   strict=bool(d.get("strict")), reason=d.get("reason"), host_kinds=d.get("host_kinds"),
                   ops=d.get("ops"), throughput=d.get("throughput"), environment=d.get("environment"),
                   warnings=list(d.get("warnings") or []), regressions=list(d.get("regressions") or []),
                   indicative_slowdowns=list(d.get("indicative_slowdowns") or []),
                   created_at=d.get("created_at") or "")

    @classmethod
    def of(cls, result: Comparison | dict[str, Any]) -> Comparison:
        """``result`` itself, or the Comparison of a ``comparison.json`` read as a dict."""
        return result if isinstance(result, Comparison) else cls.from_dict(result)


# ------------------------------------------------------------------------------------------ comparing
def _by_config(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """One row per configuration: a measured row over a skipped one, the first measurement over a
    ``same_run_as`` copy of it."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = identity.match_key(r)
        old = out.get(key)
        if old is None or (not identity.is_measured(old) and identity.is_measured(r)):
            out[key] = r
    return out


def _describe(row: dict[str, Any]) -> str:
    return identity.describe(row, labelled=True)


# A compared row's basis: both rows in several processes; a row in one process judged against the host kind's
# noise model (runs.noise); in one process with no noise model of the kind (its steps only: not gated).
BETWEEN, NOISE, INDICATIVE = "between processes", "host noise model", "indicative"
GATED = (BETWEEN, NOISE)  # the bases a regression is called on without --strict
ALPHA = 0.05  # the family-wise error rate of the throughput verdicts (Holm over the compared rows)


def _processes(row: dict[str, Any]) -> int:
    return len(row.get("process_means") or [None])


def compare_throughput(base: Run, cand: Run, threshold_pct: float, strict: bool = False,
                       model: noise.NoiseModel | None = None) -> dict[str, Any]:
    """Matched rows, each compared; the verdicts corrected for their number.

    Per row: Welch's t on the log process means where both rows were measured in two processes or more (``basis``
    "between processes": :func:`resnet_lab.bench.stats.compare_estimates`; with a noise ``model``, the host kind's
    run-to-run shift added to its variance: :func:`resnet_lab.runs.noise.with_run_shift`), else a normal test of the
    log speed ratio against the host kind's noise ``model`` where a row was measured in one process (``basis`` "host
    noise model": :func:`resnet_lab.runs.noise.compare`: how far one process of an unchanged configuration moves
    between runs on this kind), else Welch's t on the log mean step time from each row's steps (``basis``
    "indicative": :func:`stats.compare_speed`; a process's steps say how well it was timed, not how the next process
    would run, so that interval is too narrow). The family is every row compared: its p-values are Holm-adjusted
    (``p_holm``), a verdict is faster or slower where ``p_holm`` < 0.05, and ``mde_pct`` is the smallest slowdown
    the row could have detected at 80 % power at Holm's first level (0.05 / rows compared). A row without a
    significant change is "inconclusive" where the threshold is below its MDE (it could not have seen a slowdown of
    the size that matters), else "no significant change". ``regression``: slower beyond the threshold, on the
    between-process or noise-model basis (any basis with ``strict``)."""
    b, c = _by_config(base.rows), _by_config(cand.rows)
    matched = []
    for key in [k for k in c if k in b]:
        rb, rc = b[key], c[key]
        entry: dict[str, Any] = {"config": _describe(rc), **dict(zip(MATCH_KEYS, key, strict=True)),
                                 "status_base": rb.get("status"), "status_cand": rc.get("status"),
                                 "images_per_sec_base": rb.get("images_per_sec"),
                                 "images_per_sec_cand": rc.get("images_per_sec"),
                                 "mfu_base": rb.get("mfu"), "mfu_cand": rc.get("mfu"),
                                 "processes_base": _processes(rb), "processes_cand": _processes(rc)}
        both = identity.is_measured(rb) and identity.is_measured(rc)
        eb, how_b = stats.estimate_from_row(rb) if both else (None, "")
        ec, how_c = stats.estimate_from_row(rc) if both else (None, "")
        sb, how_sb = stats.summary_from_row(rb) if identity.is_measured(rb) else (None, "not measured")
        sc, how_sc = stats.summary_from_row(rc) if identity.is_measured(rc) else (None, "not measured")
        if eb and ec:
            entry.update(stats.compare_estimates(eb, ec, record.images_per_step(rb), record.images_per_step(rc)))
            if model is not None and entry["se_log"] is not None:  # what moves a whole run, which one run's
                entry.update(noise.with_run_shift(entry, model))  # processes cannot show
            entry.update(basis=BETWEEN, method=how_b if how_b == how_c else f"{how_b} / {how_c}")
        elif model is not None and sb and sc and rb.get("images_per_sec") and rc.get("images_per_sec"):
            entry.update(noise.compare(float(rb["images_per_sec"]), float(rc["images_per_sec"]), _processes(rb),
                                       _processes(rc), model))
            entry.update(basis=NOISE, method=f"{_processes(rb)} vs {_processes(rc)} process(es), the kind's noise")
        elif sb and sc:
            entry.update(stats.compare_speed(sb, sc, record.images_per_step(rb), record.images_per_step(rc)))
            entry.update(basis=INDICATIVE, method=how_sb if how_sb == how_sc else f"{how_sb} / {how_sc}")
        else:
            entry.update(delta_pct=None, ci_low_pct=None, ci_high_pct=None, p_value=None, se_log=None, df=None,
                         verdict=f"not compared ({how_sb} / {how_sc})", method=None, basis=None)
        if entry["mfu_base"] is not None and entry["mfu_cand"] is not None:
            entry["mfu_delta_pp"] = 100 * (float(entry["mfu_cand"]) - float(entry["mfu_base"]))
        else:
            entry["mfu_delta_pp"] = None
        matched.append(entry)
    _judge(matched, threshold_pct, strict)
    return {"matched": matched,
            "only_in_baseline": [_describe(r) for k, r in b.items() if k not in c],
            "only_in_candidate": [_describe(r) for k, r in c.items() if k not in b]}


def _judge(matched: list[dict[str, Any]], threshold_pct: float, strict: bool) -> None:
    """Each compared row's Holm-adjusted p, MDE, verdict and whether it is a regression (in place)."""
    compared = [m for m in matched if m["basis"] is not None]
    family = len(compared)
    adjusted = stats.holm([m["p_value"] for m in compared])
    for m, p_holm in zip(compared, adjusted, strict=True):
        m["p_holm"] = p_holm
        m["mde_pct"] = stats.mde_pct(m["se_log"], m["df"], ALPHA / family)
        if p_holm is not None and p_holm < ALPHA and m["delta_pct"] != 0:
            m["verdict"] = stats.VERDICTS[0] if m["delta_pct"] > 0 else stats.VERDICTS[1]
        elif m["mde_pct"] is None or threshold_pct < m["mde_pct"]:
            m["verdict"] = "inconclusive"
        else:
            m["verdict"] = stats.VERDICTS[2]
        m["beyond_threshold"] = m["verdict"] == stats.VERDICTS[1] and m["delta_pct"] <= -threshold_pct
        m["regression"] = m["beyond_threshold"] and (m["basis"] in GATED or strict)
    for m in matched:
        if m["basis"] is None:
            m.update(p_holm=None, mde_pct=None, beyond_threshold=False, regression=False)


def _configs(rec: dict[str, Any], kind: str) -> dict[str, int]:
    out = {}
    for c in rec.get(kind) or []:
        desc = ", ".join(f"{k}={v}" for k, v in c.items() if k != "count")
        out[desc] = out.get(desc, 0) + int(c.get("count", 1))
    return out


def compare_ops(base: Run, cand: Run) -> list[dict[str, Any]]:
    """Per op key present in both runs: opcodes added, removed and changed in count; shape configurations."""
    diffs = []
    for key in [k for k in cand.ops if k in base.ops]:
        ob, oc = base.ops[key]["opcodes"], cand.ops[key]["opcodes"]
        entry: dict[str, Any] = dict(zip(OP_KEYS, key, strict=True))
        diff = parser.diff_opcodes(ob, oc)
        entry["added"], entry["removed"] = list(diff["added"]), list(diff["removed"])
        entry["changed"] = {op: list(counts) for op, counts in diff["changed"].items()}
        rb, rc = base.ops[key], cand.ops[key]
        same_shape = (rb.get("batch_size"), rb.get("image_size")) == (rc.get("batch_size"), rc.get("image_size"))
        entry["same_shapes"] = same_shape
        for kind in ("convolutions", "dots"):
            if rb.get(kind) is None or rc.get(kind) is None:
                entry[kind] = "not recorded in both runs"
            elif not same_shape:
                entry[kind] = (f"not compared: batch {rb.get('batch_size')} at {rb.get('image_size')}² vs "
                               f"{rc.get('batch_size')} at {rc.get('image_size')}²")
            else:
                cb, cc = _configs(rb, kind), _configs(rc, kind)
                entry[kind] = {"added": sorted(set(cc) - set(cb)), "removed": sorted(set(cb) - set(cc))}
        entry["identical"] = not (entry["added"] or entry["removed"] or entry["changed"]) and all(
            not isinstance(entry[k], dict) or not (entry[k]["added"] or entry[k]["removed"])
            for k in ("convolutions", "dots"))
        diffs.append(entry)
    return diffs


def _others(prov: dict[str, Any], rows: list[dict[str, Any]]) -> list[float]:
    """Other processes' share of the host's CPU time during each measured row's timed steps (%)."""
    logical = (prov.get("cpu") or {}).get("logical_cpus")
    shares = [hostload.row_others_pct(r, logical) for r in rows if identity.is_measured(r)]
    return [s for s in shares if s is not None]


def _env_facts(prov: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    git, cpu = prov.get("git") or {}, prov.get("cpu") or {}
    loads = [float(r["loadavg_1m"]) for r in rows if r.get("loadavg_1m") is not None]
    others = _others(prov, rows)
    facts = {"commit": git.get("commit"), "dirty": git.get("dirty"), "host": prov.get("host"),
             "host kind": record.host_kind(prov, rows).label(),
             "cpu model": cpu.get("model"), "available cpus": cpu.get("available_cpus"),
             "isa": ", ".join(k for k, v in sorted((cpu.get("isa") or {}).items()) if v) or None,
             "oneDNN": (prov.get("onednn") or {}).get("enabled"), "gpus": len(prov.get("gpus") or []),
             "max others' CPU share while measuring (%)": round(max(others), 1) if others else None,
             "max 1-min load while measuring": round(max(loads), 2) if loads else None}
    facts.update({f"package {k}": v for k, v in sorted((prov.get("packages") or {}).items())})
    return facts


def cross_kinds(base: Run, cand: Run) -> str | None:
    """The sentence that says two runs are of different host kinds and what tells them apart (None: like with
    like)."""
    kb, kc = base.kind, cand.kind
    diff = kb.differences(kc)
    if not diff:
        return None
    return f"different host kinds ({'; '.join(diff)}): speeds shown, no verdict gated"


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    n = len(values)
    return None if not n else values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def host_kinds(base: Run, cand: Run, matched: list[dict[str, Any]]) -> dict[str, Any]:
    """The two host kinds, whether they are one, what tells them apart (and by which rule), and across two kinds
    how much the machine explains: each measured GEMM peak's ratio (candidate / baseline) beside the median ratio
    of the matched rows' speeds."""
    kb, kc = base.kind, cand.kind
    diff = kb.differences(kc)
    out: dict[str, Any] = {"baseline": kb.label(), "candidate": kc.label(), "same": not diff,
                           "baseline_measured": kb.describe(), "candidate_measured": kc.describe(),
                           "differences": diff, "basis": kb.basis(kc)}
    if diff:
        pb, pc = dict(kb.peaks), dict(kc.peaks)
        out["peak_ratio"] = {d: pc[d] / pb[d] for d in sorted(pb.keys() & pc.keys()) if pb[d]}
        ratios = [float(m["images_per_sec_cand"]) / float(m["images_per_sec_base"]) for m in matched
                  if m.get("images_per_sec_base") and m.get("images_per_sec_cand")]
        out["speed_ratio_median"] = _median(ratios)
        out["speed_ratios"] = len(ratios)
    return out


def noise_model(base: Run, cand: Run, reference: Path | None = None) -> noise.NoiseModel | None:
    """The noise model the candidate's one-process rows are judged against: learned from the committed record of
    its host kind (:func:`resnet_lab.runs.record.reference_for` in ``reference``, default the outputs' committed
    record; its A/A runs say how far a run moves), else from the baseline's own folder; None where neither has a
    row measured in several processes, or the kinds differ."""
    if base.kind != cand.kind:
        return None
    root = reference or record.reference_root(artifacts.outputs_root())
    committed = record.reference_for(root, cand.kind) if root else None
    for folder in dict.fromkeys(f for f in (committed, base.path) if f is not None):
        model = noise.learn(folder)
        if model is not None:
            return model
    return None


def compare_env(base: Run, cand: Run) -> tuple[list[dict[str, Any]], list[str]]:
    fb, fc = _env_facts(base.provenance, base.rows), _env_facts(cand.provenance, cand.rows)
    diff = [{"fact": k, "baseline": fb.get(k), "candidate": fc.get(k)} for k in dict.fromkeys([*fb, *fc])
            if fb.get(k) != fc.get(k)]
    warnings = [w for w in [cross_kinds(base, cand)] if w]
    # Busy from what the CPUs did during the timed steps (host_util − the row's own cpu_util), not from the
    # load average: that still remembers whatever ran in the minute before (an install, a build).
    for role, run in (("baseline", base), ("candidate", cand)):
        others = _others(run.provenance, run.rows)
        busy = [s for s in others if hostload.is_busy(s)]
        if busy:
            warnings.append(f"the {role} was measured on a busy machine: other processes used up to "
                            f"{max(busy):.0f} % of the host's CPU time during the timed steps of {len(busy)} of "
                            f"{len(others)} rows")
    if fb.get("dirty") or fc.get("dirty"):
        warnings.append("a run was made from a tree with uncommitted changes: its commit does not say all")
    return diff, warnings


def check_threshold(threshold_pct: Any, name: str = "--threshold") -> None:
    if isinstance(threshold_pct, bool) or not (isinstance(threshold_pct, int | float) and threshold_pct >= 0):
        raise UsageError(f"{name}: {threshold_pct!r} is not a number >= 0 (percent)")


def op_label(op: dict[str, Any]) -> str:
    """``resnet50/tensorflow/train/after/cpu/fp32``: an op key (:data:`~resnet_lab.runs.record.OP_KEYS`), one label."""
    return "/".join(str(op[k]) for k in OP_KEYS)


def no_baseline(candidate: str | Path, why: str, threshold_pct: float, strict: bool = False) -> Comparison:
    """The answer where no record of the candidate's host kind exists to judge it against: nothing is
    compared, nothing gates (``status`` :data:`NO_BASELINE`, ``reason`` says what was looked for)."""
    cand = Path(candidate)
    try:
        name = record.read_provenance(cand).get("run") or cand.name
    except UsageError:
        name = cand.name
    return Comparison(NO_BASELINE, Side(None, None), Side(name, str(cand)), threshold_pct, strict, reason=why)


def _runs(baseline: str | Path, candidate: str | Path) -> tuple[Run | None, Run, str]:
    """The two records, read whole. A reference folder with per-host-kind records (``hosts/<slug>/``) is
    resolved to the record of the candidate's kind, else its own top-level record (another kind: the speeds
    are shown, not judged); None where it has neither, with why."""
    root = Path(baseline)
    if not record.is_reference_root(root):
        return load(baseline, "BASELINE"), load(candidate, "CANDIDATE"), ""
    cand = load(candidate, "CANDIDATE")
    chosen = record.reference_for(root, cand.kind)
    if chosen is None and not (root / "provenance.json").is_file():
        return None, cand, (f"{NO_BASELINE}: {root} has no record of this host kind ({cand.kind.label()}; it has "
                            f"{record.describe_kinds(record.reference_kinds(root))})")
    return load(chosen or root, "BASELINE"), cand, ""


def compare(baseline: str | Path, candidate: str | Path, threshold_pct: float = 5.0,
            strict: bool = False) -> Comparison:
    """The whole comparison (see module doc), ``status`` :data:`COMPARED`, or :data:`NO_BASELINE` where
    ``baseline`` is a reference folder without a record of the candidate's host kind. UsageError when the
    inputs are not runs or a file of one is damaged; :class:`NothingInCommon` (a UsageError) when they have
    nothing in common. ``strict``: rows
    measured in one process gate too (never across host kinds: nothing is judged there)."""
    check_threshold(threshold_pct)
    base, cand, why = _runs(baseline, candidate)
    if base is None:
        return no_baseline(candidate, why, threshold_pct, strict)
    model = noise_model(base, cand, Path(baseline) if record.is_reference_root(Path(baseline)) else None)
    throughput, ops = compare_throughput(base, cand, threshold_pct, strict, model), compare_ops(base, cand)
    if not throughput["matched"] and not ops:
        raise NothingInCommon(f"'{baseline}' and '{candidate}' have nothing in common: no benchmark row and no op "
                         "inventory of one matches the other's configuration")
    env, warnings = compare_env(base, cand)
    same_kind = cross_kinds(base, cand) is None
    if not same_kind:  # across host kinds a speed change is the machine's: shown, never a regression
        for m in throughput["matched"]:
            m["regression"] = False
    regressions = [m["config"] for m in throughput["matched"] if m["regression"]]
    indicative = ([m["config"] for m in throughput["matched"] if m["beyond_threshold"] and not m["regression"]]
                  if same_kind else [])  # across host kinds nothing is judged, indicatively or not
    kinds = {**host_kinds(base, cand, throughput["matched"]), "noise": model.to_dict() if model else None}
    return Comparison(COMPARED, Side(base.name, str(base.path)), Side(cand.name, str(cand.path)), threshold_pct,
                      strict, host_kinds=kinds, ops=ops, throughput=throughput, environment=env, warnings=warnings,
                      regressions=regressions, indicative_slowdowns=indicative)


# ------------------------------------------------------------------------------------------ which runs
def _data_notebooks(prov: dict[str, Any], ok_only: bool) -> set[str]:
    return {n["name"] for n in prov.get("notebooks", [])
            if n["name"] != NOTEBOOK and (not ok_only or n.get("status") == "ok")}


def _kind_or_none(folder: Path) -> record.HostKind | None:
    """A run's host kind, or None where one of its files is damaged (such a run is never a baseline)."""
    try:
        return record.kind_of(folder)
    except UsageError:
        return None


def default_baseline(candidate: Path, outputs: Path) -> tuple[Path | None, str]:
    """The run ``candidate`` is judged against when none is named, always of its host kind: the newest earlier
    run of the same params file name on that kind, in which every notebook the candidate ran finished ok;
    else the committed record of that kind (:func:`resnet_lab.runs.record.reference_for`); else None.
    Returns (folder or None, why)."""
    try:
        cand = artifacts.read_json(candidate / "provenance.json")
    except (OSError, ValueError):
        cand = {}
    name, started = (cand.get("params") or {}).get("name"), cand.get("started_at") or ""
    wanted = _data_notebooks(cand, ok_only=False)
    kind = record.kind_of(candidate)
    for when, folder, prov in reversed(artifacts.list_runs(outputs)):
        same_name = (prov.get("params") or {}).get("name") == name
        if (folder.resolve() != candidate.resolve() and when < started and same_name
                and wanted <= _data_notebooks(prov, ok_only=True) and _kind_or_none(folder) == kind):
            return folder, f"the newest earlier '{name}' run with the same notebooks on this host kind ({kind.label()})"
    root = record.reference_root(outputs)
    ref = record.reference_for(root, kind) if root else None
    if ref is not None:
        return ref, f"the committed record of this host kind (no earlier '{name}' run of it with the same notebooks)"
    kinds = record.describe_kinds(record.reference_kinds(root)) if root else "none"
    return None, (f"{NO_BASELINE}: no earlier '{name}' run with the same notebooks on this host kind "
                  f"({kind.describe()}) and no committed record of it in outputs/reference (its host kinds: {kinds}). "
                  f"To commit one: {record.commit_hint(candidate, kind)}")


def _find(text: str, outputs: Path, role: str) -> Path:
    p = Path(text).expanduser()
    for candidate in ([p] if p.is_absolute() else [outputs / p, outputs / "runs" / p, p]):
        if candidate.is_dir():
            return candidate
    raise UsageError(f"{role}: '{text}' is not a folder (give a run folder, a run name under outputs/runs/, "
                     "or 'reference')")


def resolve(baseline_run: str = "", candidate_run: str = "",
            outputs: Path | None = None) -> tuple[Path | None, Path, str]:
    """The two folders 05_compare compares, from its parameters: (baseline, candidate, why this baseline);
    the baseline is None where no record of the candidate's host kind exists (why says so).

    ``candidate_run`` empty: the run being made (``$RESNET_LAB_RUN_DIR``, set by ``resnet-lab run``), else the
    newest run under ``outputs/runs``. ``baseline_run`` empty: :func:`default_baseline`. A name may be a path,
    a run folder name, or one relative to the outputs root (``reference``)."""
    outputs = outputs or artifacts.outputs_root()
    if candidate_run:
        cand = _find(candidate_run, outputs, "candidate_run")
    elif os.environ.get("RESNET_LAB_RUN_DIR"):
        cand = Path(os.environ["RESNET_LAB_RUN_DIR"])
    else:
        runs = artifacts.list_runs(outputs)
        if not runs:
            raise UsageError(f"candidate_run: empty and there is no run under {outputs / 'runs'} to compare")
        cand = runs[-1][1]
    if baseline_run:
        return _find(baseline_run, outputs, "baseline_run"), cand, "named by baseline_run"
    base, why = default_baseline(cand, outputs)
    return base, cand, why


def resolve_and_compare(baseline_run: str = "", candidate_run: str = "", threshold_pct: float = 5.0,
                        outputs: Path | None = None, strict: bool = False) -> Comparison:
    """What notebook 05 compares: resolve the runs (:func:`resolve`) and compare them, the baseline saying why
    it was chosen. Runs with nothing in common, or no baseline of the candidate's host kind, are an answer
    here, not an error: ``status`` :data:`NOTHING_IN_COMMON` or :data:`NO_BASELINE` with the reason;
    otherwise :data:`COMPARED`."""
    check_threshold(threshold_pct)
    base, cand, why = resolve(baseline_run, candidate_run, outputs)
    if base is None:
        result = no_baseline(cand, why, threshold_pct, strict)
    else:
        try:
            result = compare(base, cand, threshold_pct, strict)
        except NothingInCommon as e:
            result = Comparison(NOTHING_IN_COMMON, Side(base.name, str(base)), Side(cand.name, str(cand)),
                                threshold_pct, strict, reason=str(e))
    result.baseline.why = why
    return result


def exit_code(result: Comparison) -> int:
    """1 when a matched row is significantly slower (after Holm) by more than the threshold, on the
    between-process basis (or any basis with ``strict``), else 0."""
    return 1 if result.regressions else 0

