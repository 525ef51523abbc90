"""Notebook 05's view of a comparison (:mod:`resnet_lab.runs.compare`) and ``resnet-lab compare``: the headline
sentence (the index and the notebook open with it), the Markdown document, the one-line-a-row table, the
deltas plot, what the notebook records, and the files written (``comparison.json``, ``comparison.md``,
``throughput.csv``, ``deltas.png``).

Each view takes a :class:`~resnet_lab.runs.compare.Comparison` or a ``comparison.json`` read back as a dict.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

from resnet_lab.bench import stats
from resnet_lab.core import artifacts, hostload, style
from resnet_lab.core.paths import check_path
from resnet_lab.runs import command
from resnet_lab.runs.compare import (  # noqa: F401  (NOTEBOOK, NO_BASELINE: the runner's index and notebook 05)
    MATCH_KEYS,
    NO_BASELINE,
    NOTEBOOK,
    Comparison,
    compare,
    exit_code,
    op_label,
    resolve_and_compare,
)


def report(out: str | Path, baseline_run: str = "", candidate_run: str = "", threshold_pct: float = 5.0,
           outputs: Path | None = None, strict: bool = False) -> Comparison:
    """What notebook 05 shows: resolve the runs, compare them (:func:`~resnet_lab.runs.compare.resolve_and_compare`:
    no baseline or nothing in common is an answer, not an error) and write the outputs into ``out`` (the
    notebook's folder)."""
    result = resolve_and_compare(baseline_run, candidate_run, threshold_pct, outputs, strict)
    write(out, result, fresh=False)
    return result


def _pct(v: Any) -> str:
    return "-" if v is None else f"{v:+.1f} %"


def headline(result: Comparison | dict[str, Any]) -> str:
    """One sentence: what the comparison found (the index and notebook 05 open with it)."""
    result = Comparison.of(result)
    if result.status == NO_BASELINE:
        reason = str(result.reason or NO_BASELINE)
        return reason[0].upper() + reason[1:] + "."
    b = result.baseline.name
    if str(result.baseline.why or "").startswith("the committed record"):
        b = f"the committed record ({b})"
    if not result.compared:
        return f"Nothing to compare with {b}: no benchmark row or op inventory matches this run's configuration."
    t = result.throughput
    n_slow = sum(m["verdict"] == "slower" for m in t["matched"])
    n_fast = sum(m["verdict"] == "faster" for m in t["matched"])
    n_open = sum(m["verdict"] == "inconclusive" for m in t["matched"])
    ops = ("op sets identical" if result.ops_identical else
           f"op sets differ in {sum(not o['identical'] for o in result.ops)} of {len(result.ops)} steps")
    if not result.same_kind:
        rows = f"{len(t['matched'])} rows matched" if t["matched"] else "no benchmark row in common"
        return (f"Against {b}: different host kinds ({kinds_apart(result.host_kinds)}), speeds shown, none judged; "
                f"{rows}; {ops}.")
    regress = (f"{len(result.regressions)} regression(s) beyond {result.threshold_pct:g} %"
               if result.regressions else f"no regression beyond {result.threshold_pct:g} %")
    if result.indicative_slowdowns:
        regress += f" ({len(result.indicative_slowdowns)} indicative slowdown(s), one process: not gated)"
    # comparison.json files written before host kinds were judged say so in a warning
    hosts = "; hosts differ" if any(w.startswith("the hosts differ") for w in result.warnings) else ""
    open_ = f", {n_open} inconclusive" if n_open else ""
    rows = (f"{len(t['matched'])} rows matched ({n_fast} faster, {n_slow} slower{open_})" if t["matched"] else
            "no benchmark row in common")
    return f"Against {b}: {regress}; {rows}; {ops}{hosts}."


def kinds_apart(kinds: dict[str, Any]) -> str:
    """What tells two host kinds apart, one phrase: the differing facts (a comparison.json written before they
    were kept: the two labels)."""
    return "; ".join(kinds.get("differences") or []) or f"{kinds['baseline']} vs {kinds['candidate']}"


def machine_share(kinds: dict[str, Any]) -> str:
    """Across two host kinds: the ratio of the machines' measured GEMM peaks beside the median ratio of the speeds
    (candidate / baseline): how much of the change the machine explains. Empty where neither is known."""
    peaks = kinds.get("peak_ratio") or {}
    speed = kinds.get("speed_ratio_median")
    parts = []
    if peaks:
        parts.append("GEMM peak ratio " + ", ".join(f"{d} {r:.2f}×" for d, r in peaks.items()))
    if speed is not None:
        parts.append(f"median speed ratio {speed:.2f}× over {kinds.get('speed_ratios')} rows")
    if not parts:
        return ""
    return ("Candidate / baseline: " + "; ".join(parts) + " (how much of the change the machine explains; "
            "informative, never gated).")


def noise_line(kinds: dict[str, Any] | None) -> str:
    """Which noise model judged the rows measured in one process, and what it rests on; empty where there was
    none (those rows are then indicative)."""
    model = (kinds or {}).get("noise")
    if not model:
        return ""
    return (f"Rows measured in one process are judged against this host kind's noise: a process moves by "
            f"{100 * model['sd_process']:.1f} % and a run by {100 * model['sd_run']:.1f} % (sd of log speed), "
            f"learned from {model['processes']} processes in {model['rows']} rows and {model['pairs']} pairs of "
            f"runs of `{model['source']}`; rows measured in several processes have the run's share added to the spread "
            "of their processes.")


def intro_markdown(result: Comparison | dict[str, Any]) -> str:
    """The headline in bold, then which runs were compared and why that baseline (notebook 05's opening)."""
    result = Comparison.of(result)
    if result.baseline.name is None:
        return f"**{headline(result)}**\n\nCandidate: `{result.candidate.name}`."
    return (f"**{headline(result)}**\n\nBaseline: `{result.baseline.name}`, {result.baseline.why}. "
            f"Candidate: `{result.candidate.name}`.")


def results_values(result: Comparison | dict[str, Any]) -> dict[str, Any]:
    """What notebook 05 records in ``results.json``."""
    result = Comparison.of(result)
    return {"status": result.status, "headline": headline(result), "baseline": result.baseline.name,
            "candidate": result.candidate.name, "regressions": len(result.regressions),
            "ops_identical": result.ops_identical}


def to_markdown(result: Comparison | dict[str, Any]) -> str:
    """The comparison as a document (``comparison.md``); a result without a comparison is its reason."""
    result = Comparison.of(result)
    if not result.compared:
        return result.reason + "\n"
    b, c, t = result.baseline.name, result.candidate.name, result.throughput
    same = result.same_kind
    count = {v: sum(m["verdict"] == v for m in t["matched"]) for v in (*stats.VERDICTS, "inconclusive")}
    lines = [f"# {c} against {b}", ""]
    op_sets = ("The op sets are identical." if result.ops_identical else
               f"The op sets differ in {sum(not o['identical'] for o in result.ops)} of "
               f"{len(result.ops)} steps.")
    if not same:
        kinds = result.host_kinds
        lines += [f"Different host kinds ({kinds_apart(kinds)}): {len(t['matched'])} matched benchmark rows, their "
                  "speeds shown and none judged (a change would be the machine's). " + op_sets, ""]
        if machine_share(kinds):
            lines += [machine_share(kinds), ""]
    else:
        verdict = (f"**{len(result.regressions)} regression(s)** beyond {result.threshold_pct:g} %: "
                   + "; ".join(result.regressions) + ".") if result.regressions else \
            f"No row significantly slower by more than {result.threshold_pct:g} %."
        if result.indicative_slowdowns:
            verdict += (" Slower beyond the threshold but measured in one process (indicative, not gated"
                        + ("" if result.strict else "; `--strict` gates them") + "): "
                        + "; ".join(result.indicative_slowdowns) + ".")
        lines += [f"{verdict} Of {len(t['matched'])} matched benchmark rows, {count['faster']} faster, "
                  f"{count['slower']} slower, {count['no significant change']} without significant change, "
                  f"{count['inconclusive']} inconclusive (the threshold is below the change they could detect) "
                  "at 95 % for the family (Holm). " + op_sets, ""]
    lines += [f"- warning: {w}" for w in result.warnings] + ([""] if result.warnings else [])
    lines += ["## Throughput", ""]
    kinds = result.host_kinds or {}
    if not same:
        lines += [f"different host kinds ({kinds_apart(kinds)}): speeds shown, no verdict gated", ""]
    if kinds.get("basis"):
        lines += [f"Host kinds told apart by: {kinds['basis']}.", ""]
    if noise_line(kinds):
        lines += [noise_line(kinds), ""]
    lines += ["Basis: *between processes* (each row measured in several fresh processes: "
              "its interval is their spread), *host noise model* (one process on a side, judged against how far an "
              "unchanged configuration moves between processes and runs on this host kind) or *indicative* (one "
              "process on a side and no noise model of the kind: its steps' interval, too narrow for what the next "
              "process would do; gated only with --strict). MDE: the smallest slowdown the row could have "
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
    for o in result.ops:
        name = op_label(o)
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
    if result.environment:
        lines += ["| fact | baseline | candidate |", "|---|---|---|"]
        lines += [f"| {e['fact']} | {e['baseline']} | {e['candidate']} |" for e in result.environment]
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


def to_table(result: Comparison | dict[str, Any]) -> str:
    """Each matched row on one line, the warnings and the gate (what ``resnet-lab compare`` prints)."""
    result = Comparison.of(result)
    if not result.compared:
        return result.reason + "\n"
    same = result.same_kind
    rows = [f"{m['config'][:48]:48}  {_pct(m['delta_pct']):>9}  {_basis(m):28}  mde {_mde(m):>8}  "
            f"holm p {_p(m.get('p_holm')):>7}  {m['verdict'] if same else 'not judged (other host kind)'}"
            for m in result.matched]
    ops = "identical" if result.ops_identical else "changed (see --format markdown)"
    gate = (f"regressions beyond {result.threshold_pct:g} %: {len(result.regressions)}" if same else
            "regressions: none counted across host kinds")
    return "\n".join([f"{result.candidate.name} vs {result.baseline.name}: ops {ops}", *rows,
                      *(f"warning: {w}" for w in result.warnings),
                      *(f"indicative (one process, not gated): slower beyond {result.threshold_pct:g} %: {c}"
                        for c in result.indicative_slowdowns or []), gate]) + "\n"


def write(out: str | Path, result: Comparison, fresh: bool = True) -> list[Path]:
    """comparison.json, comparison.md, throughput.csv and deltas.png in ``out`` (new or empty unless not
    ``fresh``: notebook 05's own folder). A result without a comparison writes comparison.json only."""
    out = artifacts.check_out(out) if fresh else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [artifacts.write_json(out / "comparison.json", result.to_dict())]
    if not result.compared:
        return paths
    (out / "comparison.md").write_text(to_markdown(result))
    paths.append(out / "comparison.md")
    matched = result.matched
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


def layer_changes(out: str | Path, result: Comparison) -> str:
    """Where a row regressed and both runs profiled layers (03's ``layers.json``, a record's ``layers/``): every
    engine both profiled, layer by layer (:func:`resnet_lab.layers.diff.diff`), into ``layer_diff.json``; the
    sentences 05 shows (one per engine). Across host kinds, or without a regression, one sentence saying why not."""
    from resnet_lab.core.errors import UsageError
    from resnet_lab.layers import diff

    if not result.compared or not result.regressions:
        return "No row regressed: no per-layer diff."
    if not result.same_kind:
        return "The hosts are of different kinds: layers are not compared across them."
    try:
        old = diff.load(result.baseline.path or "")
        new = diff.load(result.candidate.path or "")
        engines = diff.pick(old, new, None)
    except UsageError as e:
        return f"No per-layer diff: {e}."
    diffs = {e: diff.diff(old[e], new[e], result.threshold_pct) for e in engines}
    artifacts.write_json(Path(out) / "layer_diff.json", diffs)
    return "\n".join(f"- {diff.summary(e, d)}" for e, d in diffs.items())


STORE_GATE_FILE = "store_gate.json"  # 05's folder: this run against the last runs of its host kind in the store


def store_gate(out: str | Path, result: Comparison, outputs: Path | None = None) -> str:
    """This run against the last N runs of its host kind and params in the results store (:mod:`resnet_lab.runs.gate`:
    the rolling baseline; N and the rest from the run's params ``store:`` section), as 05 shows it: the verdict, the
    MDE the window reaches, the window's runs and commits, each row; into ``store_gate.json``. The run being made
    is not in the store yet (it is pushed when it finishes): it is judged from its folder. Without a store or a
    candidate, one sentence saying why not."""
    from resnet_lab.core.errors import UsageError
    from resnet_lab.runs import gate, record
    from resnet_lab.runs import store as st

    path = result.candidate.path
    if not path:
        return "No candidate run: nothing to judge against the store."
    outputs = outputs or artifacts.outputs_root()
    try:
        section = (record.read_provenance(Path(path)).get("params") or {}).get("store") or {}
        params = gate.GateParams(**{k: v for k, v in section.items() if k in gate.GateParams.__dataclass_fields__})
        opened = st.open_store(None, outputs, create=False)
    except (UsageError, TypeError) as e:
        return f"No store gate: {str(e).splitlines()[0]} (`make report` pushes every finished run into one)."
    try:
        try:
            judged = gate.gate(opened, path, params.check())
        except UsageError:  # not pushed yet: the run being made
            judged = gate.gate_folder(opened, path, params.check())
    finally:
        opened.close()
    artifacts.write_json(Path(out) / STORE_GATE_FILE, judged)
    return gate_markdown(judged)


def _size(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} %"


def gate_markdown(judged: dict[str, Any]) -> str:
    """The store gate's answer (:func:`resnet_lab.runs.gate.gate`) as Markdown: the line, the window, the rows."""
    from resnet_lab.runs import gate

    lines = [f"**{gate.summary(judged)}** (exit {gate.exit_code(judged)})", ""]
    if judged.get("window"):
        commits = ", ".join(f"`{(c or '?')[:8]}`" for c in judged["commits"])
        lines += [f"Window: {len(judged['window'])} run(s) of this host kind and params, commits {commits}.", ""]
    if judged.get("left_out_busy"):
        lines += [f"Left out as measured on a busy host: {', '.join(judged['left_out_busy'])}.", ""]
    if judged.get("rows"):
        lines += ["| row | verdict | change | beside its run | MDE | baseline runs |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['row']} | {r['verdict']} | {_pct(r.get('change_pct'))} | {_pct(r.get('relative_pct'))} | "
                  f"{_size(r.get('mde_pct'))} | {r['baseline_runs']} |"
                  for r in judged["rows"]]
    for side in ("only_candidate", "only_baseline"):
        if judged.get(side):
            lines += ["", f"{side.replace('_', ' ')} (not judged): {', '.join(judged[side])}"]
    return "\n".join(lines)


def plot_deltas(result: Comparison, path: Path) -> Path:
    """Each matched row's delta with its 95 % interval, the threshold marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = [m for m in result.matched if m["delta_pct"] is not None]
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
    ax.axvline(-result.threshold_pct, color="#b00020", lw=0.8, ls="--")
    ax.set_xlabel("images/sec, candidate vs baseline (%), 95 % interval")
    ax.set_title(f"{result.candidate.name} vs {result.baseline.name}"
                 + ("" if result.same_kind else " (different host kinds: not judged)"))
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
per-step times each row keeps, or a row's summary columns for older CSV records): against the host kind's
noise model where one exists (basis "host noise model": how far one process of an unchanged configuration
moves between processes and between runs on this kind, learned from the committed record of the kind, its
A/A runs and every row it measured in several processes), which gates like "between processes"; else marked
"indicative": its interval is too narrow, so it never fails the gate unless --strict. The p-values are corrected for
the number of rows compared (Holm); each row shows the smallest slowdown it could have detected at 80 %
power (mde); a row with no significant change whose mde exceeds --threshold is "inconclusive", not "no
change". Exit 1 only for a significant slowdown beyond --threshold.

Two runs of the same code also differ as a whole (the host's state that hour): where the host kind's committed
record has a noise model, that run-to-run shift is added to every row's spread, rows of several processes too,
so a pair of runs is judged against what an A/A pair of this kind really does (each row's mde says what it
could detect).

The gate: params/gate.yaml runs notebook 03's headline rows (TensorFlow with the fused batch norm and
native PyTorch eager, fp32 and bf16 training) in 20 fresh processes each, interleaved (~35 min on 2 cores;
its comments say why 20), then 05_compare against the newest earlier gate run of the same host kind. In
CI, keep a baseline gate run and compare each candidate with it, on the same host kind:

    resnet-lab run params/gate.yaml --out outputs     # once: the baseline (keep its run folder)
    resnet-lab run params/gate.yaml --out outputs     # each candidate
    resnet-lab compare outputs/runs/<baseline-run> outputs/runs/<new-run> --threshold 10 \\
      --out outputs/compare/<new-run> || {{ echo "significantly slower"; exit 1; }}

Against the committed record of the candidate's host kind, its one-process rows are judged against that
kind's noise model (a kind without one: indicative, --strict gates them anyway):

    resnet-lab run params/default.yaml --out outputs            # the candidate
    resnet-lab compare outputs/reference outputs/runs/<new-run> --threshold 5 \\
      --out outputs/compare/<new-run> || {{ echo "significantly slower than the reference"; exit 1; }}

Like with like: speeds are judged only between runs of one host kind: what the machine is (CPU name, CPUs,
GPUs, and where both records state them its vendor, family, model, stepping, ISA flags and caches) and what
it measured (notebook 00's GEMM peak per dtype, within 1.25x). Across two kinds the comparison names what
differs ("different host kinds (GEMM fp32 peak 215 vs 508 GFLOP/s; ...): speeds shown, no verdict gated"),
sets the ratio of the machines' peaks beside the ratio of the speeds,
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
    command.add_output_options(p, "write comparison.json/.md, throughput.csv and deltas.png into this new folder")
    p.add_argument("--threshold", type=float, default=5.0,
                   help="percent: exit 1 when a row is significantly slower by more than this (default 5)")
    p.add_argument("--strict", action="store_true",
                   help="rows measured in one process (basis indicative) gate too: exit 1 on their slowdowns")


VIEWS = {"table": to_table, "markdown": to_markdown, "json": lambda r: command.as_json(r.to_dict())}


def run(args: argparse.Namespace) -> int:
    check_path("BASELINE", args.baseline, "dir", optional=False)
    check_path("CANDIDATE", args.candidate, "dir", optional=False)
    return command.run(args, lambda: compare(args.baseline, args.candidate, args.threshold, args.strict), write,
                       VIEWS, exit_code)
