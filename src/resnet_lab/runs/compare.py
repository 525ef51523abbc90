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

**Like with like.** Speeds are judged only between runs of one host kind (:class:`resnet_lab.record.HostKind`:
CPU model, available CPUs, GPUs). Across two kinds the comparison says so, shows the speeds and counts no
regression: the machine, not the change, would be measured. The default baseline (:func:`default_baseline`)
is of the candidate's kind, or there is none.

:func:`exit_code` is what a CI job gates on: 1 when a matched row of one host kind is significantly slower
(after Holm) by more than the threshold on the between-process basis (any basis with ``strict``), else 0.
Reading and checking come before anything is written; a bad input is one
:class:`~resnet_lab.core.errors.UsageError` line.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity, stats
from resnet_lab.core import artifacts, hostload, provenance, style
from resnet_lab.core.errors import UsageError
from resnet_lab.report.ops import config_label
from resnet_lab.runs import record
from resnet_lab.runs.record import OP_KEYS, Run, load  # what a record is lives there; compare.load still reads one

FORMATS = ("table", "md", "json")
NOTEBOOK = "05_compare"  # the notebook that compares each run with the one before it
MATCH_KEYS = identity.IDENTITY  # the columns of throughput.csv that say which configuration a line is
NO_BASELINE = "no comparable baseline"  # a result's status where no record of the candidate's host kind exists


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


BETWEEN, INDICATIVE = "between processes", "indicative"  # a compared row's basis
ALPHA = 0.05  # the family-wise error rate of the throughput verdicts (Holm over the compared rows)


def _images(row: dict[str, Any]) -> int:
    return int(row.get("global_batch") or row.get("batch_size") or 1)


def _processes(row: dict[str, Any]) -> int:
    return len(row.get("process_means") or [None])


def compare_throughput(base: Run, cand: Run, threshold_pct: float, strict: bool = False) -> dict[str, Any]:
    """Matched rows, each compared; the verdicts corrected for their number.

    Per row: Welch's t on the log process means where both rows were measured in two processes or more
    (``basis`` "between processes": :func:`resnet_lab.bench.stats.compare_estimates`), else Welch's t on
    the log mean step time from each row's steps (``basis`` "indicative": :func:`stats.compare_speed`; a
    process's steps say how well it was timed, not how the next process would run, so that interval is
    too narrow). The family is every row compared: its p-values are Holm-adjusted (``p_holm``), a verdict
    is faster or slower where ``p_holm`` < 0.05, and ``mde_pct`` is the smallest slowdown the row could
    have detected at 80 % power at Holm's first level (0.05 / rows compared). A row without a significant
    change is "inconclusive" where the threshold is below its MDE (it could not have seen a slowdown of
    the size that matters), else "no significant change". ``regression``: slower beyond the threshold, on
    the between-process basis (either basis with ``strict``)."""
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
            entry.update(stats.compare_estimates(eb, ec, _images(rb), _images(rc)))
            entry.update(basis=BETWEEN, method=how_b if how_b == how_c else f"{how_b} / {how_c}")
        elif sb and sc:
            entry.update(stats.compare_speed(sb, sc, _images(rb), _images(rc)))
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
        m["regression"] = m["beyond_threshold"] and (m["basis"] == BETWEEN or strict)
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
        entry["added"] = sorted(set(oc) - set(ob))
        entry["removed"] = sorted(set(ob) - set(oc))
        entry["changed"] = {op: [ob[op], oc[op]] for op in sorted(set(ob) & set(oc)) if ob[op] != oc[op]}
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
    """The sentence that says two runs are of different host kinds (None: like with like)."""
    kb, kc = base.kind, cand.kind
    if kb == kc:
        return None
    return f"different host kinds: {kb.label()} vs {kc.label()} — speeds shown, no verdict gated"


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


def no_baseline(candidate: str | Path, why: str, threshold_pct: float, strict: bool = False) -> dict[str, Any]:
    """The answer where no record of the candidate's host kind exists to judge it against: nothing is
    compared, nothing gates (``status`` :data:`NO_BASELINE`, ``reason`` says what was looked for)."""
    cand = Path(candidate)
    try:
        name = record.read_provenance(cand).get("run") or cand.name
    except UsageError:
        name = cand.name
    return {"status": NO_BASELINE, "reason": why, "baseline": {"name": None, "path": None},
            "candidate": {"name": name, "path": str(cand)}, "threshold_pct": threshold_pct, "strict": strict,
            "regressions": [], "indicative_slowdowns": [], "created_at": provenance.now_iso()}


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
            strict: bool = False) -> dict[str, Any]:
    """The whole comparison as JSON-able data (see module doc), ``status`` "compared", or :data:`NO_BASELINE`
    where ``baseline`` is a reference folder without a record of the candidate's host kind. UsageError when
    the inputs are not runs, a file of one is damaged, or they have nothing in common. ``strict``: rows
    measured in one process gate too (never across host kinds: nothing is judged there)."""
    check_threshold(threshold_pct)
    base, cand, why = _runs(baseline, candidate)
    if base is None:
        return no_baseline(candidate, why, threshold_pct, strict)
    throughput, ops = compare_throughput(base, cand, threshold_pct, strict), compare_ops(base, cand)
    if not throughput["matched"] and not ops:
        raise UsageError(f"'{baseline}' and '{candidate}' have nothing in common: no benchmark row and no op "
                         "inventory of one matches the other's configuration")
    env, warnings = compare_env(base, cand)
    same_kind = cross_kinds(base, cand) is None
    if not same_kind:  # across host kinds a speed change is the machine's: shown, never a regression
        for m in throughput["matched"]:
            m["regression"] = False
    regressions = [m["config"] for m in throughput["matched"] if m["regression"]]
    indicative = ([m["config"] for m in throughput["matched"] if m["beyond_threshold"] and not m["regression"]]
                  if same_kind else [])  # across host kinds nothing is judged, indicatively or not
    return {"status": "compared", "baseline": {"name": base.name, "path": str(base.path)},
            "candidate": {"name": cand.name, "path": str(cand.path)},
            "host_kinds": {"baseline": base.kind.label(), "candidate": cand.kind.label(), "same": same_kind},
            "threshold_pct": threshold_pct, "strict": strict, "indicative_slowdowns": indicative,
            "ops": ops, "ops_identical": all(o["identical"] for o in ops),
            "throughput": throughput, "environment": env, "warnings": warnings, "regressions": regressions,
            "created_at": provenance.now_iso()}


# ------------------------------------------------------------------------------------------ which runs
def _data_notebooks(prov: dict[str, Any], ok_only: bool) -> set[str]:
    return {n["name"] for n in prov.get("notebooks", [])
            if n["name"] != NOTEBOOK and (not ok_only or n.get("status") == "ok")}


def default_baseline(candidate: Path, outputs: Path) -> tuple[Path | None, str]:
    """The run ``candidate`` is judged against when none is named, always of its host kind: the newest earlier
    run of the same params file name on that kind, in which every notebook the candidate ran finished ok;
    else the committed record of that kind (:func:`resnet_lab.record.reference_for`); else None.
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
                and wanted <= _data_notebooks(prov, ok_only=True) and record.host_kind(prov) == kind):
            return folder, f"the newest earlier '{name}' run with the same notebooks on this host kind ({kind.label()})"
    root = record.reference_root(outputs)
    ref = record.reference_for(root, kind) if root else None
    if ref is not None:
        return ref, f"the committed record of this host kind (no earlier '{name}' run of it with the same notebooks)"
    kinds = record.describe_kinds(record.reference_kinds(root)) if root else "none"
    return None, (f"{NO_BASELINE}: no earlier '{name}' run with the same notebooks on this host kind "
                  f"({kind.label()}) and no committed record of it in outputs/reference (its host kinds: {kinds})")


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


def report(out: str | Path, baseline_run: str = "", candidate_run: str = "", threshold_pct: float = 5.0,
           outputs: Path | None = None, strict: bool = False) -> dict[str, Any]:
    """What notebook 05 shows: resolve the runs, compare them and write the outputs into ``out`` (the notebook's
    folder). Runs with nothing in common, or no baseline of the candidate's host kind, are an answer here, not
    an error: the result says why, with ``status`` "nothing in common" or :data:`NO_BASELINE`; otherwise
    ``status`` is "compared"."""
    check_threshold(threshold_pct)
    base, cand, why = resolve(baseline_run, candidate_run, outputs)
    if base is None:
        result = no_baseline(cand, why, threshold_pct, strict)
    else:
        try:
            result = compare(base, cand, threshold_pct, strict)
        except UsageError as e:
            if "nothing in common" not in str(e):
                raise
            result = {"status": "nothing in common", "reason": str(e),
                      "baseline": {"name": base.name, "path": str(base)},
                      "candidate": {"name": cand.name, "path": str(cand)}, "threshold_pct": threshold_pct,
                      "strict": strict, "regressions": [], "indicative_slowdowns": [],
                      "created_at": provenance.now_iso()}
    result["baseline"]["why"] = why
    write(out, result, fresh=False)
    return result


def exit_code(result: dict[str, Any]) -> int:
    """1 when a matched row is significantly slower (after Holm) by more than the threshold, on the
    between-process basis (or any basis with ``strict``), else 0."""
    return 1 if result["regressions"] else 0


# ------------------------------------------------------------------------------------------ output
def _pct(v: Any) -> str:
    return "-" if v is None else f"{v:+.1f} %"


def _same_kind(result: dict[str, Any]) -> bool:
    return (result.get("host_kinds") or {}).get("same", True)


def headline(result: dict[str, Any]) -> str:
    """One sentence: what the comparison found (the index and notebook 05 open with it)."""
    if result.get("status") == NO_BASELINE:
        reason = str(result.get("reason") or NO_BASELINE)
        return reason[0].upper() + reason[1:] + "."
    b = result["baseline"]["name"]
    if str(result["baseline"].get("why", "")).startswith("the committed record"):
        b = f"the committed record ({b})"
    if result.get("status", "compared") != "compared":
        return f"Nothing to compare with {b}: no benchmark row or op inventory matches this run's configuration."
    t = result["throughput"]
    n_slow = sum(m["verdict"] == "slower" for m in t["matched"])
    n_fast = sum(m["verdict"] == "faster" for m in t["matched"])
    n_open = sum(m["verdict"] == "inconclusive" for m in t["matched"])
    ops = ("op sets identical" if result["ops_identical"] else
           f"op sets differ in {sum(not o['identical'] for o in result['ops'])} of {len(result['ops'])} steps")
    if not _same_kind(result):
        kinds = result["host_kinds"]
        rows = f"{len(t['matched'])} rows matched" if t["matched"] else "no benchmark row in common"
        return (f"Against {b}: different host kinds ({kinds['baseline']} vs {kinds['candidate']}), speeds shown, "
                f"none judged; {rows}; {ops}.")
    regress = (f"{len(result['regressions'])} regression(s) beyond {result['threshold_pct']:g} %"
               if result["regressions"] else f"no regression beyond {result['threshold_pct']:g} %")
    if result.get("indicative_slowdowns"):
        regress += f" ({len(result['indicative_slowdowns'])} indicative slowdown(s), one process: not gated)"
    # comparison.json files written before host kinds were judged say so in a warning
    hosts = "; hosts differ" if any(w.startswith("the hosts differ") for w in result["warnings"]) else ""
    open_ = f", {n_open} inconclusive" if n_open else ""
    rows = (f"{len(t['matched'])} rows matched ({n_fast} faster, {n_slow} slower{open_})" if t["matched"] else
            "no benchmark row in common")
    return f"Against {b}: {regress}; {rows}; {ops}{hosts}."


def intro_markdown(result: dict[str, Any]) -> str:
    """The headline in bold, then which runs were compared and why that baseline (notebook 05's opening)."""
    if result["baseline"]["name"] is None:
        return f"**{headline(result)}**\n\nCandidate: `{result['candidate']['name']}`."
    return (f"**{headline(result)}**\n\nBaseline: `{result['baseline']['name']}`, {result['baseline']['why']}. "
            f"Candidate: `{result['candidate']['name']}`.")


def record_values(result: dict[str, Any]) -> dict[str, Any]:
    """What notebook 05 records in ``results.json``."""
    return {"status": result["status"], "headline": headline(result), "baseline": result["baseline"]["name"],
            "candidate": result["candidate"]["name"], "regressions": len(result["regressions"]),
            "ops_identical": result.get("ops_identical")}


def to_markdown(result: dict[str, Any]) -> str:
    """The comparison as a document (``comparison.md``); a result without a comparison is its reason."""
    if result.get("status", "compared") != "compared":
        return result["reason"] + "\n"
    b, c, t = result["baseline"]["name"], result["candidate"]["name"], result["throughput"]
    same = _same_kind(result)
    count = {v: sum(m["verdict"] == v for m in t["matched"]) for v in (*stats.VERDICTS, "inconclusive")}
    lines = [f"# {c} against {b}", ""]
    op_sets = ("The op sets are identical." if result["ops_identical"] else
               f"The op sets differ in {sum(not o['identical'] for o in result['ops'])} of "
               f"{len(result['ops'])} steps.")
    if not same:
        kinds = result["host_kinds"]
        lines += [f"Different host kinds ({kinds['baseline']} vs {kinds['candidate']}): {len(t['matched'])} matched "
                  "benchmark rows, their speeds shown and none judged (a change would be the machine's). "
                  + op_sets, ""]
    else:
        verdict = (f"**{len(result['regressions'])} regression(s)** beyond {result['threshold_pct']:g} %: "
                   + "; ".join(result["regressions"]) + ".") if result["regressions"] else \
            f"No row significantly slower by more than {result['threshold_pct']:g} %."
        if result.get("indicative_slowdowns"):
            verdict += (" Slower beyond the threshold but measured in one process (indicative, not gated"
                        + ("" if result.get("strict") else "; `--strict` gates them") + "): "
                        + "; ".join(result["indicative_slowdowns"]) + ".")
        lines += [f"{verdict} Of {len(t['matched'])} matched benchmark rows, {count['faster']} faster, "
                  f"{count['slower']} slower, {count['no significant change']} without significant change, "
                  f"{count['inconclusive']} inconclusive (the threshold is below the change they could detect) "
                  "at 95 % for the family (Holm). " + op_sets, ""]
    lines += [f"- warning: {w}" for w in result["warnings"]] + ([""] if result["warnings"] else [])
    lines += ["## Throughput", ""]
    if not same:
        kinds = result["host_kinds"]
        lines += [f"different host kinds: {kinds['baseline']} vs {kinds['candidate']} — speeds shown, no verdict "
                  "gated", ""]
    lines += ["Basis: *between processes* (each row measured in several fresh processes: "
              "its interval is their spread) or *indicative* (one process on a side: its steps' interval, too "
              "narrow for what the next process would do). MDE: the smallest slowdown the row could have "
              "detected (80 % power, Holm's first level). Holm p: the p-value corrected for the rows compared.",
              "", "| configuration | baseline img/s | candidate img/s | delta | 95 % interval | basis | MDE | "
              "Holm p | verdict | MFU delta |", "|---|---|---|---|---|---|---|---|---|---|"]
    for m in t["matched"]:
        ci = "-" if m["ci_low_pct"] is None else f"{m['ci_low_pct']:+.1f} … {m['ci_high_pct']:+.1f} %"
        ips = [("-" if v is None else f"{float(v):.2f}") for v in (m["images_per_sec_base"], m["images_per_sec_cand"])]
        mfu = "-" if m["mfu_delta_pp"] is None else f"{m['mfu_delta_pp']:+.1f} pp"
        verdict = m["verdict"] if same else "not judged (other host kind)"
        lines.append(f"| {m['config']} | {ips[0]} | {ips[1]} | {_pct(m['delta_pct'])} | {ci} | {_basis(m)} "
                     f"| {_mde(m)} | {_p(m.get('p_holm'))} | {verdict} | {mfu} |")
    for role, key in (("baseline", "only_in_baseline"), ("candidate", "only_in_candidate")):
        if t[key]:
            lines += ["", f"Only in the {role}: " + "; ".join(t[key])]
    lines += ["", "## Ops", ""]
    for o in result["ops"]:
        name = config_label(o, OP_KEYS)
        if o["identical"]:
            lines.append(f"- {name}: identical")
            continue
        bits = [f"added {', '.join(o['added'])}" if o["added"] else "",
                f"removed {', '.join(o['removed'])}" if o["removed"] else "",
                "counts " + ", ".join(f"{k} {v[0]}→{v[1]}" for k, v in o["changed"].items()) if o["changed"] else ""]
        for kind in ("convolutions", "dots"):
            if isinstance(o[kind], dict) and (o[kind]["added"] or o[kind]["removed"]):
                bits.append(f"{kind} +{len(o[kind]['added'])} −{len(o[kind]['removed'])} configurations")
        if not o.get("same_shapes", True):
            bits.append("captured at other batch and image sizes (" + o["convolutions"].split(": ", 1)[-1] + ")"
                        if isinstance(o["convolutions"], str) else "captured at other batch and image sizes")
        lines.append(f"- {name}: " + "; ".join(x for x in bits if x))
    lines += ["", "## Environment", ""]
    if result["environment"]:
        lines += ["| fact | baseline | candidate |", "|---|---|---|"]
        lines += [f"| {e['fact']} | {e['baseline']} | {e['candidate']} |" for e in result["environment"]]
    else:
        lines.append("Identical: same commit, packages, CPU, cores, oneDNN state and GPUs.")
    return "\n".join(lines) + "\n"


def _basis(m: dict[str, Any]) -> str:
    """A row's basis with its processes: "between processes (3 / 3)", "indicative (1 / 1)", "-"."""
    if m.get("basis") is None:
        return "-"
    return f"{m['basis']} ({m.get('processes_base')} / {m.get('processes_cand')})"


def _mde(m: dict[str, Any]) -> str:
    return "-" if m.get("mde_pct") is None else f"{m['mde_pct']:.1f} %"


def _p(p: Any) -> str:
    return "-" if p is None else f"{p:.3g}"


def to_table(result: dict[str, Any]) -> str:
    if result.get("status", "compared") != "compared":
        return result["reason"] + "\n"
    same = _same_kind(result)
    rows = [f"{m['config'][:48]:48}  {_pct(m['delta_pct']):>9}  {_basis(m):28}  mde {_mde(m):>8}  "
            f"holm p {_p(m.get('p_holm')):>7}  {m['verdict'] if same else 'not judged (other host kind)'}"
            for m in result["throughput"]["matched"]]
    ops = "identical" if result["ops_identical"] else "changed (see --format md)"
    gate = (f"regressions beyond {result['threshold_pct']:g} %: {len(result['regressions'])}" if same else
            "regressions: none counted across host kinds")
    return "\n".join([f"{result['candidate']['name']} vs {result['baseline']['name']}: ops {ops}", *rows,
                      *(f"warning: {w}" for w in result["warnings"]),
                      *(f"indicative (one process, not gated): slower beyond {result['threshold_pct']:g} %: {c}"
                        for c in result.get("indicative_slowdowns") or []), gate]) + "\n"


def write(out: str | Path, result: dict[str, Any], fresh: bool = True) -> list[Path]:
    """comparison.json, comparison.md, throughput.csv and deltas.png in ``out`` (new or empty unless not
    ``fresh``: notebook 05's own folder). A result without a comparison writes comparison.json only."""
    out = artifacts.check_out(out) if fresh else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [artifacts.write_json(out / "comparison.json", result)]
    if result.get("status", "compared") != "compared":
        return paths
    (out / "comparison.md").write_text(to_markdown(result))
    paths.append(out / "comparison.md")
    matched = result["throughput"]["matched"]
    with (out / "throughput.csv").open("w", newline="") as f:
        fields = ["config", *MATCH_KEYS, "images_per_sec_base", "images_per_sec_cand", "delta_pct", "ci_low_pct",
                  "ci_high_pct", "p_value", "p_holm", "mde_pct", "basis", "processes_base", "processes_cand",
                  "verdict", "regression", "method", "mfu_base", "mfu_cand", "mfu_delta_pp"]
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(matched)
    paths.append(out / "throughput.csv")
    if any(m["delta_pct"] is not None for m in matched):
        paths.append(plot_deltas(result, out / "deltas.png"))
    return paths


def plot_deltas(result: dict[str, Any], path: Path) -> Path:
    """Each matched row's delta with its 95 % interval, the threshold marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = [m for m in result["throughput"]["matched"] if m["delta_pct"] is not None]
    style.apply()
    colors = style.VERDICT_COLORS
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(ms) + 1.5))
    for i, m in enumerate(ms):
        lo = m["ci_low_pct"] if m["ci_low_pct"] is not None else m["delta_pct"]
        hi = m["ci_high_pct"] if m["ci_high_pct"] is not None else m["delta_pct"]
        ax.errorbar(m["delta_pct"], i, xerr=[[m["delta_pct"] - lo], [hi - m["delta_pct"]]], fmt="o",
                    color=colors.get(m["verdict"], "#555555"), capsize=3)
    ax.set_yticks(range(len(ms)), [m["config"][:50] for m in ms])
    ax.axvline(0, color="black", lw=0.8)
    ax.axvline(-result["threshold_pct"], color="#b00020", lw=0.8, ls="--")
    ax.set_xlabel("images/sec, candidate vs baseline (%), 95 % interval")
    ax.set_title(f"{result['candidate']['name']} vs {result['baseline']['name']}"
                 + ("" if _same_kind(result) else " (different host kinds: not judged)"))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------ CLI
EPILOG = f"""\
Gating a CI job on speed. Rows are matched on their configuration. The same configuration moves more
between fresh processes than within one, so a row measured in several processes (resnet-lab bench
--repeats, notebook 03's repeats) is compared on its processes: Welch's t on the log process means
(basis "between processes"). A row measured in one process on either side is compared on its steps (the
per-step times each row keeps, or a row's summary columns for older CSV records) and marked "indicative":
its interval is too narrow, so it never fails the gate unless --strict. The p-values are corrected for
the number of rows compared (Holm); each row shows the smallest slowdown it could have detected at 80 %
power (mde); a row with no significant change whose mde exceeds --threshold is "inconclusive", not "no
change". Exit 1 only for a significant slowdown beyond --threshold.

The gate: params/gate.yaml runs notebook 03's headline rows (TensorFlow with the fused batch norm and
native PyTorch eager, fp32 and bf16 training) in 20 fresh processes each, interleaved (~35 min on 2 cores;
its comments say why 20), then 05_compare against the newest earlier gate run of the same host kind. In
CI, keep a baseline gate run and compare each candidate with it, on the same host kind:

    resnet-lab run params/gate.yaml --out outputs     # once: the baseline (keep its run folder)
    resnet-lab run params/gate.yaml --out outputs     # each candidate
    resnet-lab compare outputs/runs/<baseline-run> outputs/runs/<new-run> --threshold 10 \\
      --out outputs/compare/<new-run> || {{ echo "significantly slower"; exit 1; }}

Against the committed record (outputs/reference: one process a row) every row is indicative: add --strict
to gate on it anyway, knowing the intervals understate the spread:

    resnet-lab run params/default.yaml --out outputs            # the candidate
    resnet-lab compare outputs/reference outputs/runs/<new-run> --threshold 5 --strict \\
      --out outputs/compare/<new-run> || {{ echo "significantly slower than the reference"; exit 1; }}

Like with like: speeds are judged only between runs of one host kind (CPU model, available CPUs, GPUs).
Across two kinds the comparison says "different host kinds: <a> vs <b> — speeds shown, no verdict gated",
counts no regression and exits 0 (op differences are reported as ever). A reference folder with one record
per host kind (outputs/reference/hosts/<slug>/: provenance.json and bench*.csv) stands for the record of the
candidate's kind; where it has none, the answer is "no comparable baseline" and exit 0.

A run is flagged as measured on a busy machine when other processes took more than \
{hostload.OTHERS_BUSY_PCT:g} % of the host's
CPU time during a row's timed steps (host_util − its own cpu_util, from /proc/stat; not the load average,
which remembers the minute before). A record with a truncated or unparseable file (bench CSV/JSON,
provenance.json, op inventory) is one line naming the file and exit 2: nothing is judged from what is left."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline", metavar="BASELINE",
                   help="a run folder (outputs/runs/<run>) or outputs/reference (its record of the candidate's "
                        "host kind)")
    p.add_argument("candidate", metavar="CANDIDATE", help="the run to judge against the baseline")
    p.add_argument("--out", help="write comparison.json/.md, throughput.csv and deltas.png into this new folder")
    p.add_argument("--threshold", type=float, default=5.0,
                   help="percent: exit 1 when a row is significantly slower by more than this (default 5)")
    p.add_argument("--format", choices=FORMATS, default="table", help="what to print (default table)")
    p.add_argument("--strict", action="store_true",
                   help="rows measured in one process (basis indicative) gate too: exit 1 on their slowdowns")


def run(args: argparse.Namespace) -> int:
    if args.out:
        artifacts.check_out(args.out)  # before reading anything
    result = compare(args.baseline, args.candidate, args.threshold, args.strict)
    if args.out:
        write(args.out, result)
    text = {"json": lambda r: json.dumps(r, indent=1, default=str) + "\n", "md": to_markdown,
            "table": to_table}[args.format](result)
    print(text, end="")
    return exit_code(result)
