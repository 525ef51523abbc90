"""Notebook 01's measurements: each candidate's representative model on this host, with the package's own tools
(its description, the HLO opcodes of its steps, a short benchmark), and the raw rows they came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from resnet_lab import models
from resnet_lab.bench import launcher
from resnet_lab.bench.config import BenchConfig
from resnet_lab.bench.identity import is_measured
from resnet_lab.bench.rows import save_rows
from resnet_lab.core import artifacts
from resnet_lab.hlo import capture, inventory_text
from resnet_lab.selection.criteria import validate_op_stages


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


def save_measurements(out: Path, op_rows: Sequence[dict[str, Any]], bench_rows: Sequence[dict[str, Any]]) -> None:
    """What :func:`measure_candidates` measured, beside the decision: ``op_inventory.json`` and ``.csv`` (one
    line per opcode of each step) and the benchmark rows as ``selection_bench.csv``/``.json``."""
    import pandas as pd

    artifacts.write_json(Path(out) / "op_inventory.json", op_rows)
    lines = pd.DataFrame(inventory_text.opcode_lines(op_rows), columns=list(inventory_text.OPCODE_COLUMNS))
    artifacts.save_table(out, "op_inventory", lines)
    save_rows(out, list(bench_rows), "selection_bench")
