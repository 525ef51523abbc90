"""``resnet-lab layers diff OLD NEW``: two per-layer profiles of one engine, layer by layer, judged beyond noise
(:mod:`resnet_lab.layers.diff`), each layer against its own run-to-run noise where the results store holds earlier
profiles (``--store-noise``). Exit 1 when a layer regressed, 4 when the two are not comparable, 2 on bad input.
Here, not in ``layers/``, because it reads the store (``runs/``, a sibling of ``layers/``)."""

from __future__ import annotations

import argparse
import json

from resnet_lab.core.choices import add_format_option, check_format
from resnet_lab.core.errors import UsageError
from resnet_lab.core.text import rows_as
from resnet_lab.layers import diff

COLUMNS = ("layer", "kind", "old_ms", "new_ms", "ratio", "vs_shift", "z", "step_z", "verdict")
EPILOG = """\
OLD and NEW: a layers JSON (resnet-lab layers --format json, 03's layers.json) or a folder holding one (a run,
its 03_benchmarks/, a host kind's record). Every engine both hold is compared, or --engine's.
Example: resnet-lab layers diff outputs/reference/hosts/amd-epyc-2cpus/layers outputs/runs/<run> --engine OpenVINO
A layer is called regressed when its change beyond the whole step's shift is an outlier among the layers (modified
z-score > 3.5 on the robust spread of their log ratios) and exceeds --threshold-pct; layers on one side only are
listed apart. Where both profiles hold each layer's steps, old_ms and new_ms are medians over them and the change
must also stand out from the layer's own steps (step_z > 3.5). --store-noise: each layer judged against its own
run-to-run noise instead, where the store holds three earlier profiles of this engine and configuration on
NEW's host kind or more."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("old", help="the baseline: a layers JSON or a folder holding one")
    p.add_argument("new", help="the candidate: a layers JSON or a folder holding one")
    p.add_argument("--engine", default=None, help="one engine's label (e.g. 'ONNX Runtime'; default: every engine "
                   "both sides hold)")
    p.add_argument("--threshold-pct", type=float, default=10.0, help="the least change of a layer that is called a "
                   "regression, beyond the step's shift (default 10)")
    p.add_argument("--store-noise", action="store_true", help="judge each layer against its own run-to-run noise: "
                   "the earlier profiles of this engine and configuration on NEW's host kind in the results store")
    p.add_argument("--store", default=None, help="the store's SQLAlchemy URL (default: $RESNET_LAB_STORE or "
                   "sqlite:///outputs/store.sqlite)")
    add_format_option(p)


def run(args: argparse.Namespace) -> int:
    fmt = check_format(args)
    if not 0 < args.threshold_pct < 1000:
        raise UsageError(f"--threshold-pct: {args.threshold_pct} is not in (0, 1000)")
    old, new = diff.load(args.old), diff.load(args.new)
    engines = diff.pick(old, new, args.engine)
    noise = _store_noise(args, old, new, engines) if args.store_noise else {}
    results = {e: diff.diff(old[e], new[e], args.threshold_pct, noise=noise.get(e)) for e in engines}
    if fmt == "json":
        print(json.dumps(results, indent=1))
        return diff.exit_code(results)
    for engine, result in results.items():
        cells = [[_cell(r[c]) for c in COLUMNS] for r in result["rows"]]
        cells += [[x["layer"], "", "" if k == "added" else _cell(x["ms"]), _cell(x["ms"]) if k == "added" else "",
                   "", "", "", "", k] for k in ("added", "gone") for x in result[k]]
        print(rows_as(fmt, COLUMNS, cells, head=diff.summary(engine, result)))
    return diff.exit_code(results)


def _store_noise(args: argparse.Namespace, old: dict, new: dict, engines: list[str]) -> dict[str, dict[str, float]]:
    """Engine → layer → its own noise, from the store's earlier profiles on NEW's host kind (its run's or record's
    measured facts), the two profiles being compared left out. One line where NEW has no host kind."""
    from pathlib import Path

    from resnet_lab.core import artifacts
    from resnet_lab.runs import record
    from resnet_lab.runs import store as st

    folder = Path(args.new)
    folder = folder if folder.is_dir() else folder.parent
    home = next((f for f in (folder, *folder.parents) if (f / "provenance.json").is_file()), None)
    if home is None:
        raise UsageError(f"--store-noise: '{args.new}' is in no run or record folder (no provenance.json above it): "
                         "its host kind is unknown")
    kind = record.kind_of(home)
    store = st.open_store(args.store, artifacts.outputs_root(), create=False)
    try:
        out = {}
        for e in engines:
            mine = [{x["layer"]: x.get("median_ms", x["ms"]) for x in side[e]["layers"]} for side in (old, new)]
            history = [p for p in st.layer_history(store, kind, new[e]) if p not in mine]
            out[e] = diff.layer_noise(history)
        return out
    finally:
        store.close()


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return "" if v is None else str(v)
