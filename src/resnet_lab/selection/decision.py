"""Notebook 01's decision: the winner with its exact definition, the ranking, the sensitivity and the facts behind
them, written as ``selection.json``; and what the notebook records in ``results.json``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from resnet_lab import models
from resnet_lab.core import artifacts, provenance
from resnet_lab.selection.criteria import CRITERIA


def build_decision(
    candidates: Mapping[str, Mapping[str, Any]],
    measured: Mapping[str, Mapping[str, Any]],
    ranked,
    sens,
    weights: Mapping[str, float],
    chosen_ops: Mapping[str, Any],
    provenance_info: Mapping[str, Any],
) -> dict[str, Any]:
    """The decision (``selection.json``): the choice, its exact definition, and why."""
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


def write_decision(out: Path, candidates: Mapping[str, Mapping[str, Any]],
                   measured: Mapping[str, Mapping[str, Any]], ranked, sens, weights: Mapping[str, float],
                   op_rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """:func:`build_decision` for the winner, with its opcodes per step from ``op_rows``, written as
    ``selection.json`` in ``out`` (its Markdown, ``selection.md``: :func:`resnet_lab.report.selection.write_markdown`);
    returns the decision."""
    chosen_model = candidates[ranked.index[0]]["representative"]
    chosen_ops = {f"{r['mode']}/{r['stage']}": r["opcodes"] for r in op_rows if r["model"] == chosen_model}
    decision = build_decision(candidates, measured, ranked, sens, weights, chosen_ops, provenance.collect())
    artifacts.write_json(Path(out) / "selection.json", decision)
    return decision


def headline(decision: Mapping[str, Any], ranked, sens, ranked_2017) -> dict[str, Any]:
    """What notebook 01 records in ``results.json``: the choice, the ranking with its totals, the 2017
    candidates' winner, every weight change that flips the winner, and the weights."""
    return {
        "chosen_candidate": decision["chosen"]["candidate"], "chosen_model": decision["chosen"]["model"],
        "ranking": list(ranked.index), "totals": {cid: float(t) for cid, t in ranked["total"].items()},
        "winner_2017_candidates": ranked_2017.index[0],
        "flips": sens[sens.new_winner != ""].to_dict(orient="records"), "weights": decision["weights"],
    }
