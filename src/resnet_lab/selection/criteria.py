"""Model selection: a weighted decision matrix over the candidates, its sensitivity, and the written record.

The candidates and their documented facts (published accuracy, benchmark alignment, code quality, with
sources) live in ``data/candidates.yaml``. Measured facts (depth, parameters, MACs, HLO opcodes of a
training step, throughput) come from the rest of the package in the selection notebook. Every criterion is
a score in [0, 1]; the total is the weighted mean; the sensitivity table says which single weight change
would change the winner, and to whom.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from resnet_lab import models
from resnet_lab.bench import launcher
from resnet_lab.bench import rows as bench_rows_io
from resnet_lab.bench.config import BenchConfig
from resnet_lab.bench.identity import is_measured
from resnet_lab.core import artifacts, provenance
from resnet_lab.core.choices import STAGES, check_choices, check_keys
from resnet_lab.core.errors import UsageError
from resnet_lab.hlo import capture
from resnet_lab.report import ops

# criterion -> (kind, what it means). "documented" scores come from data/candidates.yaml.
CRITERIA: dict[str, tuple[str, str]] = {
    "is_resnet50": ("measured", "the representative model has 50 layers (the original requirement)"),
    "benchmark_alignment": ("documented", "what the benchmark suites (then TF benchmarks, now MLPerf) run"),
    "code_cleanliness": ("documented", "how much clean-up the reference code needs"),
    "published_accuracy": ("documented", "a published accuracy to check convergence against"),
    "backend_simplicity": ("measured", "fewest distinct HLO opcodes in a training step (min / own)"),
    "efficiency": ("measured", "training MFU on this host relative to the best candidate"),
}
# The 2017 reasoning: being ResNet-50 and matching the benchmark team came first, clean code and a
# published accuracy second; the measured criteria are shown but carry no weight unless asked.
DEFAULT_WEIGHTS: dict[str, float] = {
    "is_resnet50": 3.0, "benchmark_alignment": 2.0, "code_cleanliness": 1.0, "published_accuracy": 1.0,
    "backend_simplicity": 0.0, "efficiency": 0.0,
}
CANDIDATES_2017 = ("v1_tf_benchmarks", "v2_tf_models_cifar")  # the two the 2017 note chose between


def load_candidates() -> dict[str, dict[str, Any]]:
    """The documented candidates (``data/candidates.yaml``), keyed by candidate id."""
    import yaml

    text = resources.files("resnet_lab").joinpath("data/candidates.yaml").read_text()
    return yaml.safe_load(text)["candidates"]


def validate_op_stages(stages: Sequence[str]) -> tuple[str, ...]:
    """The HLO stages 01 captures per candidate: ``before`` always (the backend-simplicity criterion counts
    the training step's opcodes as the framework emits them), ``after`` (XLA's optimized module) optionally:
    its counts are shown beside, and compiling it costs more than the rest of the capture."""
    stages = tuple(check_choices("op_stages", stages, STAGES))
    if "before" not in stages:
        raise UsageError("op_stages: 'before' is required (the criterion counts the training step before "
                         f"optimization); got {list(stages)}")
    return stages


def validate_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Known criteria only, non-negative, not all zero. Missing criteria get weight 0."""
    check_keys("weights", weights, CRITERIA)
    out = {c: float(weights.get(c, 0.0)) for c in CRITERIA}
    bad = {c: w for c, w in out.items() if not math.isfinite(w) or w < 0}
    if bad:
        raise UsageError(f"weights must be finite and >= 0, got {bad}")
    if not any(out.values()):
        raise UsageError("at least one criterion needs a weight > 0")
    return out


def score_table(candidates: Mapping[str, Mapping[str, Any]], measured: Mapping[str, Mapping[str, Any]]):
    """Scores in [0, 1]: one row per candidate, one column per criterion.

    Args:
        candidates: documented facts (:func:`load_candidates`).
        measured: per candidate id, ``depth``, ``train_opcodes`` (distinct HLO opcodes of a training step)
            and ``train_mfu`` (may be None/NaN where it was not measured).
    """
    import pandas as pd

    rows = {}
    for cid, doc in candidates.items():
        m = measured.get(cid, {})
        rows[cid] = {
            "is_resnet50": 1.0 if m.get("depth") == 50 else 0.0,
            **{c: float(doc["scores"][c]["value"]) for c, (kind, _) in CRITERIA.items() if kind == "documented"},
        }
    table = pd.DataFrame.from_dict(rows, orient="index")

    def ratio(key: str, lower_is_better: bool) -> pd.Series:
        values = pd.Series({cid: _num(measured.get(cid, {}).get(key)) for cid in candidates}, dtype=float)
        if values.isna().all():
            return values
        best = values.min() if lower_is_better else values.max()
        return (best / values) if lower_is_better else (values / best)

    table["backend_simplicity"] = ratio("train_opcodes", lower_is_better=True)
    table["efficiency"] = ratio("train_mfu", lower_is_better=False)
    return table[list(CRITERIA)]


def _num(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def rank(scores, weights: Mapping[str, float]):
    """Weighted mean score per candidate, best first, with a 1-based ``rank`` column.

    A criterion with weight > 0 must be scored for every candidate (a missing measurement is an error,
    not a silent zero); criteria with weight 0 are ignored.
    """
    w = validate_weights(weights)
    used = [c for c in CRITERIA if w[c] > 0]
    missing = [c for c in used if scores[c].isna().any()]
    if missing:
        raise UsageError(f"criteria {missing} have weight > 0 but were not measured for every candidate")
    total = sum(scores[c] * w[c] for c in used) / sum(w[c] for c in used)
    out = scores.assign(total=total).sort_values("total", ascending=False, kind="stable")
    out["rank"] = range(1, len(out) + 1)
    return out


@dataclasses.dataclass(frozen=True)
class Flip:
    criterion: str
    weight: float                 # its current weight
    threshold: float              # the weight at which the winner changes
    direction: str                # "raise above" | "lower below"
    new_winner: str


def sensitivity(scores, weights: Mapping[str, float], rel_eps: float = 1e-6) -> list[Flip]:
    """For each criterion, the nearest single-weight change (up and down) that changes the winner.

    With the other weights fixed, candidate totals are linear in one weight over a common denominator, so
    the crossing point with each challenger is exact: w* = (S_a - S_b) / (s_b - s_a), where S is the
    weighted sum of the other criteria and s the score on this one. Each flip is verified by re-ranking
    just past w*; criteria whose change can never flip the winner are absent.
    """
    w = validate_weights(weights)
    ranked = rank(scores, w)
    winner = ranked.index[0]
    flips: list[Flip] = []
    for c in CRITERIA:
        if scores[c].isna().any():
            continue
        others = [k for k in CRITERIA if k != c and w[k] > 0]
        if any(scores[k].isna().any() for k in others):
            continue
        rest = {cid: sum(scores.loc[cid, k] * w[k] for k in others) for cid in scores.index}
        best: dict[str, tuple[float, str]] = {}
        for challenger in scores.index:
            if challenger == winner:
                continue
            slope = scores.loc[challenger, c] - scores.loc[winner, c]
            if slope == 0:
                continue
            threshold = (rest[winner] - rest[challenger]) / slope
            if threshold < 0 or math.isclose(threshold, w[c]):
                continue
            direction = "raise above" if threshold > w[c] else "lower below"
            if direction == "lower below" and slope > 0:
                continue
            if direction == "raise above" and slope < 0:
                continue
            distance = abs(threshold - w[c])
            if direction not in best or distance < abs(best[direction][0] - w[c]):
                best[direction] = (threshold, challenger)
        for direction, (threshold, _) in best.items():
            step = max(abs(threshold), 1.0) * rel_eps * 10
            probe = threshold + step if direction == "raise above" else max(threshold - step, 0.0)
            trial = dict(w, **{c: probe})
            if not any(trial.values()):
                continue
            new_winner = rank(scores, trial).index[0]
            if new_winner != winner:
                flips.append(Flip(c, w[c], threshold, direction, new_winner))
    return flips


def sensitivity_table(scores, weights: Mapping[str, float]):
    """:func:`sensitivity` as a DataFrame, one row per criterion and direction (all criteria listed)."""
    import pandas as pd

    flips = {(f.criterion, f.direction): f for f in sensitivity(scores, weights)}
    w = validate_weights(weights)
    rows = []
    for c in CRITERIA:
        found = [f for (crit, _), f in flips.items() if crit == c]
        if not found:
            rows.append({"criterion": c, "weight": w[c], "change": "none flips the winner",
                         "threshold": math.nan, "new_winner": ""})
        for f in found:
            rows.append({"criterion": c, "weight": f.weight, "change": f.direction,
                         "threshold": f.threshold, "new_winner": f.new_winner})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------- measurement
def measure_candidates(
    candidates: Mapping[str, Mapping[str, Any]],
    *,
    op_batch_size: int = 8,
    op_image_size: int | None = None,
    op_stages: tuple[str, ...] = ("before", "after"),
    bench_batch_size: int = 16,
    bench_steps: int = 3,
    bench_image_size: int | None = None,
    bench_min_time_s: float = 5.0,
    peak: dict[str, Any] | None = None,
    progress: bool = True,
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Measure each candidate's representative model on this host, with the package's own tools.

    Returns ``(measured, op_rows, bench_rows)``: per candidate the facts the score table reads (depth,
    parameters, MACs, distinct HLO opcodes of a training step, training MFU, images/sec), and the raw
    op-inventory and benchmark rows they came from (saved by the notebook beside the decision).
    """
    op_stages = validate_op_stages(op_stages)
    names = {cid: doc["representative"] for cid, doc in candidates.items()}
    for name in names.values():
        models.get_spec(name)  # a typo in candidates.yaml fails before any compilation
    # StableHLO (the portable IR a PJRT plugin receives) of the same steps: TensorFlow's HLO before
    # optimization converted with hlo_to_stablehlo (JAX's), no second compilation; skipped without JAX.
    stable: list[dict[str, Any]] | None = [] if "before" in op_stages and capture.jax_unavailable_reason() is None \
        else None
    op_rows = capture.capture_matrix(list(names.values()), modes=["infer", "train"], stages=list(op_stages),
                                     batch_size=op_batch_size, image_size=op_image_size, stablehlo_records=stable)
    configs = [
        BenchConfig(model=name, mode=mode, batch_size=bench_batch_size, image_size=bench_image_size,
                    steps=bench_steps, warmup=1, min_time_s=bench_min_time_s, label=f"{cid} {mode}")
        for cid, name in names.items() for mode in ("train", "infer")
    ]
    bench_rows = launcher.run_matrix(configs, peak=peak, progress=progress, name="selection")

    measured: dict[str, dict[str, Any]] = {}
    for cid, name in names.items():
        d = models.describe(name)
        facts: dict[str, Any] = {
            "model": name, "depth": d["depth"], "trainable_params": d["trainable_params"],
            "forward_macs": d["forward_macs"], "input_shape": d["input_shape"],
        }
        for row in op_rows:
            if row["model"] == name and not row.get("skipped"):
                facts[f"{row['mode']}_{row['stage']}_opcodes"] = len(row["opcodes"])
                facts[f"{row['mode']}_{row['stage']}_opcode_set"] = sorted(row["opcodes"])
        for rec in stable or []:
            if rec["model"] == name:  # compute ops, counted from the text and by the MLIR walk (they must agree)
                facts[f"{rec['mode']}_stablehlo_ops"] = len(rec["compute_ops"])
                facts[f"{rec['mode']}_stablehlo_walk_agrees"] = rec["walk_agrees"]
        # The criterion: what a backend must implement for the training step, as the framework emits it.
        facts["train_opcodes"] = facts.get("train_before_opcodes")
        for row in bench_rows:
            if row.get("model") == name:
                ok = is_measured(row)
                facts[f"{row['mode']}_images_per_sec"] = row.get("images_per_sec") if ok else None
                facts[f"{row['mode']}_mfu"] = row.get("mfu") if ok else None
                facts[f"{row['mode']}_status"] = row.get("status")
        measured[cid] = facts
    return measured, op_rows, bench_rows


def unique_ops(measured: Mapping[str, Mapping[str, Any]], key: str = "train_before_opcode_set") -> dict[str, list[str]]:
    """Per candidate, the opcodes its training step uses that no other candidate's does."""
    sets = {cid: set(m.get(key) or ()) for cid, m in measured.items()}
    return {cid: sorted(s - set().union(*(o for c, o in sets.items() if c != cid))) for cid, s in sets.items()}


def describe_unique_ops(only: Mapping[str, Sequence[str]]) -> str:
    """:func:`unique_ops` as one sentence per candidate."""
    parts = [f"{cid}: {', '.join(f'`{op}`' for op in ops) if ops else 'none'}" for cid, ops in only.items()]
    return "; ".join(parts) + "."


# ------------------------------------------------------------------------------------------ record
def build_record(
    candidates: Mapping[str, Mapping[str, Any]],
    measured: Mapping[str, Mapping[str, Any]],
    ranked,
    sens,
    weights: Mapping[str, float],
    chosen_ops: Mapping[str, Any],
    provenance_info: Mapping[str, Any],
) -> dict[str, Any]:
    """The selection record (``selection.json``): the choice, its exact definition, and why."""
    winner = ranked.index[0]
    name = candidates[winner]["representative"]
    spec = models.get_spec(name)
    d = models.describe(name)
    return {
        "chosen": {
            "candidate": winner,
            "title": candidates[winner]["title"],
            "model": name,
            "variant": f"{d['family']} {d['version']}",
            "definition": {
                "depth": d["depth"], "block": d["block"], "stage_blocks": d["stage_blocks"], "widths": d["widths"],
                "stride_on": d["stride_on"], "stride_block": d["stride_block"], "preact": d["preact"],
                "shortcut": d["shortcut"], "bn_epsilon": spec.bn_epsilon, "bn_momentum": spec.bn_momentum,
                "conv_bias": False, "input_shape": d["input_shape"], "data_format": d["data_format"],
                "num_classes": d["num_classes"], "reference": d["reference"],
            },
            "trainable_params": d["trainable_params"],
            "forward_macs": d["forward_macs"],
            "ops": dict(chosen_ops),
            "reproduce": {
                "model": f"resnet-lab models {name} --format json",
                "ops": [f"resnet-lab ops {name} --mode {mode} --stage {stage} --format csv"
                        for mode in ("infer", "train") for stage in ("before", "after")],
                "bench": [f"resnet-lab bench --model {name} --mode {mode} --batch-size 32 --format json"
                          for mode in ("train", "infer")],
                "selection": "resnet-lab run params/default.yaml --only 01_model_selection",
            },
        },
        "weights": dict(weights),
        "criteria": {c: {"kind": kind, "meaning": meaning} for c, (kind, meaning) in CRITERIA.items()},
        "ranking": [
            {"candidate": cid, "rank": int(r["rank"]), "total": float(r["total"]),
             "scores": {c: (None if math.isnan(r[c]) else float(r[c])) for c in CRITERIA}}
            for cid, r in ranked.iterrows()
        ],
        "sensitivity": [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in sens.to_dict(orient="records")
        ],
        "candidates": {
            cid: {"documented": dict(candidates[cid]), "measured": dict(measured.get(cid, {}))} for cid in candidates
        },
        "provenance": dict(provenance_info),
    }


def render_markdown(record: Mapping[str, Any]) -> str:
    """``selection.md``: the record as a short document a reviewer reads without running anything."""
    ch = record["chosen"]
    d = ch["definition"]
    prov = record.get("provenance", {})
    git = prov.get("git") or {}
    lines = [
        f"# Selected model: `{ch['model']}` ({ch['title']})",
        "",
        f"Decided by the weighted criteria below from facts measured by resnet-lab on `{prov.get('host', '?')}` "
        f"(commit `{(git.get('commit') or '?')[:10]}`{' dirty' if git.get('dirty') else ''}, "
        f"{prov.get('collected_at', '?')}) and documented facts with sources (`data/candidates.yaml`).",
        "",
        "## Definition",
        "",
        f"- {d['depth']} layers, {d['block']} blocks {d['stage_blocks']} with widths {d['widths']}",
        f"- stride 2 on the {d['stride_on']} convolution of the {d['stride_block']} block of a stage; "
        f"{'pre' if d['preact'] else 'post'}-activation; {d['shortcut']} shortcuts",
        f"- batch norm epsilon {d['bn_epsilon']}, momentum {d['bn_momentum']}; no conv bias",
        f"- input {'×'.join(map(str, d['input_shape']))} ({d['data_format']}), {d['num_classes']} classes",
        f"- {ch['trainable_params']:,} trainable parameters; {ch['forward_macs'] / 1e9:.3f} G multiply-accumulates "
        "per image (forward)",
        f"- reference: {d['reference']}",
        "",
        "## Ranking",
        "",
        "| rank | candidate | total | " + " | ".join(record["criteria"]) + " |",
        "|---|---|---|" + "---|" * len(record["criteria"]),
    ]
    for r in record["ranking"]:
        cells = ["—" if v is None else f"{v:.2f}" for v in r["scores"].values()]
        lines.append(f"| {r['rank']} | {r['candidate']} | {r['total']:.3f} | " + " | ".join(cells) + " |")
    lines += ["", "Weights: " + ", ".join(f"{c} {w:g}" for c, w in record["weights"].items()), "",
              "## What would change the decision", ""]
    for s in record["sensitivity"]:
        if s["new_winner"]:
            lines.append(f"- {s['criterion']}: {s['change']} {s['threshold']:.3g} (now {s['weight']:g}) "
                         f"→ {s['new_winner']} wins")
    if not any(s["new_winner"] for s in record["sensitivity"]):
        lines.append("- no single weight change flips the winner")
    lines += ["", "## Measured facts", "", "| candidate | model | params | GMACs | train opcodes (before/after) "
              "| StableHLO ops (infer/train) | train img/s | infer img/s | train MFU |",
              "|---|---|---|---|---|---|---|---|---|"]
    for cid, c in record["candidates"].items():
        m = c["measured"]

        def f(key: str, fmt: str = "{:.2f}", m: Mapping[str, Any] = m) -> str:
            v = m.get(key)
            return "—" if v is None else fmt.format(v)

        lines.append(
            f"| {cid} | {m.get('model', '?')} | {f('trainable_params', '{:,}')} | "
            f"{(m.get('forward_macs') or 0) / 1e9:.3f} | "
            f"{f('train_before_opcodes', '{}')}/{f('train_after_opcodes', '{}')} | "
            f"{f('infer_stablehlo_ops', '{}')}/{f('train_stablehlo_ops', '{}')} | "
            f"{f('train_images_per_sec')} | {f('infer_images_per_sec')} | {f('train_mfu', '{:.1%}')} |"
        )
    lines += ["", "## Documented facts", ""]
    for cid, c in record["candidates"].items():
        doc = c["documented"]
        acc = doc["published_accuracy"]
        value = acc["value"]
        if isinstance(value, Mapping):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        lines.append(f"- **{cid}** — {doc['title']}. Code: {doc['code']}. Published accuracy: {value} "
                     f"({acc['metric']}; {acc['source']}). Convergence tested: {doc['convergence_tested']['value']} "
                     f"({doc['convergence_tested']['source']}).")
    ops_ = ch.get("ops") or {}
    if ops_:
        lines += ["", f"## HLO opcodes of `{ch['model']}`", ""]
        for key, counts in ops_.items():
            lines.append(f"- {key}: " + ", ".join(f"{op} {n}" for op, n in sorted(counts.items())))
    lines += ["", "## Reproduce", "", "```bash", ch["reproduce"]["model"], *ch["reproduce"]["ops"],
              *ch["reproduce"]["bench"], ch["reproduce"]["selection"], "```", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ for the notebook
def documented_frame(candidates: Mapping[str, Mapping[str, Any]]):
    """The documented facts, one row per candidate (what the 2017 note argued from, with sources)."""
    import pandas as pd

    rows = []
    for cid, doc in candidates.items():
        acc = doc["published_accuracy"]
        value = acc["value"]
        if isinstance(value, Mapping):
            value = ", ".join(f"{k.removeprefix('cifar_resnet')}: {v}" for k, v in value.items())
        rows.append({
            "candidate": cid, "title": doc["title"], "models": ", ".join(doc["models"]),
            "representative": doc["representative"], "published accuracy": f"{value} ({acc['metric']})",
            "accuracy source": acc["source"], "convergence tested": doc["convergence_tested"]["value"],
            **{f"{c} score": doc["scores"][c]["value"] for c, (kind, _) in CRITERIA.items() if kind == "documented"},
        })
    return pd.DataFrame(rows).set_index("candidate")


MEASURED_COLUMNS = {
    "model": "model", "depth": "depth", "trainable_params": "params", "forward_macs": "forward MACs",
    "infer_before_opcodes": "infer opcodes (before)", "infer_after_opcodes": "infer opcodes (after)",
    "train_before_opcodes": "train opcodes (before)", "train_after_opcodes": "train opcodes (after)",
    "infer_stablehlo_ops": "infer StableHLO ops", "train_stablehlo_ops": "train StableHLO ops",
    "train_images_per_sec": "train img/s", "infer_images_per_sec": "infer img/s",
    "train_mfu": "train MFU", "infer_mfu": "infer MFU",
}


def measured_frame(measured: Mapping[str, Mapping[str, Any]]):
    """The measured facts, one row per candidate, readable column names."""
    import pandas as pd

    rows = {cid: {label: m.get(key) for key, label in MEASURED_COLUMNS.items()} for cid, m in measured.items()}
    return pd.DataFrame.from_dict(rows, orient="index")


def plot_contributions(ranked, weights: Mapping[str, float], ax=None,
                       title: str = "Weighted contribution of each criterion"):
    """Stacked bars: each criterion's weighted contribution to each candidate's total."""
    import matplotlib.pyplot as plt

    w = validate_weights(weights)
    used = [c for c in CRITERIA if w[c] > 0]
    total_w = sum(w[c] for c in used)
    contrib = ranked[used].mul([w[c] / total_w for c in used], axis=1)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.6 + 0.6 * len(ranked)))
    contrib.iloc[::-1].plot.barh(stacked=True, ax=ax, width=0.7)
    ax.set_xlim(0, 1)
    ax.set_xlabel("weighted score (1 = best on every weighted criterion)")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize="small")
    return ax


def rank_2017(scores, weights: Mapping[str, float]):
    """:func:`rank` of the two candidates of 2017 alone: does the method reproduce the 2017 decision?"""
    return rank(scores.loc[list(CANDIDATES_2017)], weights)


def save_measurements(out: Path, op_rows: Sequence[dict[str, Any]], bench_rows: Sequence[dict[str, Any]]) -> None:
    """What :func:`measure_candidates` measured, beside the decision: ``op_inventory.json`` and ``.csv`` (one
    line per opcode of each step) and the benchmark rows as ``selection_bench.csv``/``.json``."""
    artifacts.write_json(Path(out) / "op_inventory.json", op_rows)
    artifacts.save_table(out, "op_inventory", ops.opcode_frame(op_rows))
    bench_rows_io.save_rows(out, list(bench_rows), "selection_bench")


def write_record(out: Path, candidates: Mapping[str, Mapping[str, Any]], measured: Mapping[str, Mapping[str, Any]],
                 ranked, sens, weights: Mapping[str, float], op_rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """:func:`build_record` for the winner, with its opcodes per step from ``op_rows``, written as
    ``selection.json`` and ``selection.md`` in ``out``; returns the record."""
    chosen_model = candidates[ranked.index[0]]["representative"]
    chosen_ops = {f"{r['mode']}/{r['stage']}": r["opcodes"] for r in op_rows if r["model"] == chosen_model}
    record = build_record(candidates, measured, ranked, sens, weights, chosen_ops, provenance.collect())
    artifacts.write_json(Path(out) / "selection.json", record)
    (Path(out) / "selection.md").write_text(render_markdown(record))
    return record


def headline(record: Mapping[str, Any], ranked, sens, ranked_2017) -> dict[str, Any]:
    """What notebook 01 records in ``results.json``: the choice, the ranking with its totals, the 2017
    candidates' winner, every weight change that flips the winner, and the weights."""
    return {
        "chosen_candidate": record["chosen"]["candidate"], "chosen_model": record["chosen"]["model"],
        "ranking": list(ranked.index), "totals": {cid: float(t) for cid, t in ranked["total"].items()},
        "winner_2017_candidates": ranked_2017.index[0],
        "flips": sens[sens.new_winner != ""].to_dict(orient="records"), "weights": record["weights"],
    }
