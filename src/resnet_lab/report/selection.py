"""Notebook 01's view: the documented and measured facts as tables, the weighted contributions as a plot, the
opcodes one candidate alone uses as a sentence, and the decision as ``selection.md``.

The decision itself (criteria, scores, ranking, sensitivity, ``selection.json``): :mod:`resnet_lab.selection`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from resnet_lab.selection import criteria


def render_markdown(decision: Mapping[str, Any]) -> str:
    """``selection.md``: the decision as a short document a reviewer reads without running anything."""
    ch = decision["chosen"]
    d = ch["definition"]
    prov = decision.get("provenance", {})
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
        "| rank | candidate | total | " + " | ".join(decision["criteria"]) + " |",
        "|---|---|---|" + "---|" * len(decision["criteria"]),
    ]
    for r in decision["ranking"]:
        cells = ["—" if v is None else f"{v:.2f}" for v in r["scores"].values()]
        lines.append(f"| {r['rank']} | {r['candidate']} | {r['total']:.3f} | " + " | ".join(cells) + " |")
    lines += ["", "Weights: " + ", ".join(f"{c} {w:g}" for c, w in decision["weights"].items()), "",
              "## What would change the decision", ""]
    for s in decision["sensitivity"]:
        if s["new_winner"]:
            lines.append(f"- {s['criterion']}: {s['change']} {s['threshold']:.3g} (now {s['weight']:g}) "
                         f"→ {s['new_winner']} wins")
    if not any(s["new_winner"] for s in decision["sensitivity"]):
        lines.append("- no single weight change flips the winner")
    lines += ["", "## Measured facts", "", "| candidate | model | params | GMACs | train opcodes (before/after) "
              "| StableHLO ops (infer/train) | train img/s | infer img/s | train MFU |",
              "|---|---|---|---|---|---|---|---|---|"]
    for cid, c in decision["candidates"].items():
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
    for cid, c in decision["candidates"].items():
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


def write_markdown(out: Path, decision: Mapping[str, Any]) -> str:
    """:func:`render_markdown` written as ``selection.md`` in ``out``; returns the Markdown."""
    text = render_markdown(decision)
    (Path(out) / "selection.md").write_text(text)
    return text


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
            **{f"{c} score": doc["scores"][c]["value"] for c, (kind, _) in criteria.CRITERIA.items()
               if kind == "documented"},
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

    w = criteria.validate_weights(weights)
    used = [c for c in criteria.CRITERIA if w[c] > 0]
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


def describe_unique_ops(only: Mapping[str, Sequence[str]]) -> str:
    """:func:`resnet_lab.selection.measure.unique_ops` as one sentence per candidate."""
    parts = [f"{cid}: {', '.join(f'`{op}`' for op in ops) if ops else 'none'}" for cid, ops in only.items()]
    return "; ".join(parts) + "."
