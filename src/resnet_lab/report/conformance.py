"""Notebook 02's "Conformance" section: the kits' sizes, the engines × cases table, the cases that did not pass
and the bisection of an op planted wrong (:mod:`resnet_lab.conformance.suite` made them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

VIEW_KITS = {"model": ("model", ""), "ir": ("IR", ""), "mode": ("mode", ""), "cases": ("cases", "int"),
             "ops_in_model": ("ops in the traced step", "int"), "size_mb": ("size", "MB"), "seconds": ("made in", "s")}
VIEW_RUNS = {"engine": ("engine", ""), "kit": ("kit", ""), "cases": ("cases", "int"), "pass": ("pass", "int"),
             "fail": ("fail", "int"), "unsupported": ("unsupported", "int"), "seconds": ("ran in", "s"),
             "note": ("what did not pass (the engine's first error line)", "")}
VIEW_NOT_PASSED = {"engine": ("engine", ""), "kit": ("kit", ""), "case": ("case", ""), "status": ("status", ""),
                   "layers": ("layers", ""), "reason": ("reason", "")}
VIEW_BISECT = {"stage": ("stage", ""), "layer": ("layer", ""), "node": ("ONNX node", ""), "error": ("error", "sci"),
               "tolerance": ("tolerance", "sci"), "verdict": ("verdict", "")}


def frames(suite: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """``kits``, ``runs``, ``not_passed`` (every case that failed or is unsupported, per engine and kit) and
    ``bisect`` (its steps) as frames."""
    not_passed = [{"engine": engine, "kit": kit, **r} for (engine, kit), rows in suite["results"].items()
                  for r in rows if r["status"] != "pass"]
    found = suite.get("bisect") or {}
    return {"kits": pd.DataFrame(suite["kits"], columns=[*VIEW_KITS, "folder", "kept"]),
            "runs": pd.DataFrame(suite["runs"], columns=list(VIEW_RUNS)),
            "not_passed": pd.DataFrame(not_passed, columns=["engine", "kit", "case", "op", "status", "error",
                                                            "tolerance", "layers", "reason"]),
            "bisect": pd.DataFrame(found.get("steps", []), columns=list(VIEW_BISECT))}


def verdict(suite: dict[str, Any]) -> str:
    """The bisection in one Markdown line: which node was planted, which layer was named, whether they agree."""
    found = suite.get("bisect")
    if not found:
        return "No bisection asked for (`conformance_bisect`)."
    ok = found["layer"] == found["planted"]
    named = f"`{found['layer']}`" if found["layer"] else "no layer (every block within tolerance)"
    repro = f"; its cases: `conformance/{Path(found['repro']).name}/`" if found.get("repro") else ""
    return (f"Planted: node `{found['planted_node']}` (Keras layer `{found['planted']}`) computed as `Abs`. The "
            f"first layer beyond tolerance ({found['tolerance']:.2g}): {named}{repro}. The bisection "
            f"{'names the planted layer' if ok else 'MISSES the planted layer'}.")


def headline(suite: dict[str, Any]) -> dict[str, Any]:
    """results.json's ``conformance``: cases per kit, each engine's counts per kit, the bisection's layer."""
    found = suite.get("bisect") or {}
    return {"kits": {f"{k['model']} {k['ir']}:{k['mode']}": k["cases"] for k in suite["kits"]},
            "runs": {f"{r['engine']} {r['kit']}": {s: r.get(s) for s in ("pass", "fail", "unsupported")}
                     for r in suite["runs"]},
            "bisected_layer": found.get("layer"), "planted_layer": found.get("planted")}


def not_passed_line(not_passed: pd.DataFrame) -> str:
    """One line above the table of the cases that did not pass: none, or how many per engine and kit."""
    if not_passed.empty:
        return "Every case passed on every engine that ran it."
    counts = not_passed.groupby(["engine", "kit"]).size()
    return "Did not pass: " + ", ".join(f"{engine} {kit} {n}" for (engine, kit), n in counts.items()) + "."
