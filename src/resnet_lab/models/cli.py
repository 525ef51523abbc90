"""`resnet-lab models`: list the zoo with analytic parameter and MAC counts (no TensorFlow import)."""

from __future__ import annotations

import argparse
import json

from resnet_lab.models.specs import describe, get_spec, list_models

COLUMNS = (  # header, key, format
    ("name", "name", "{}"),
    ("family", "family", "{}"),
    ("version", "version", "{}"),
    ("depth", "depth", "{}"),
    ("block", "block", "{}"),
    ("stride on", "stride_on", "{}"),
    ("stride block", "stride_block", "{}"),
    ("preact", "preact", "{}"),
    ("shortcut", "shortcut", "{}"),
    ("params (M)", "trainable_params", "{:.2f}"),
    ("GMACs", "forward_macs", "{:.3f}"),
    ("input", "input_shape", "{}"),
    ("classes", "num_classes", "{}"),
)
SCALE = {"trainable_params": 1e-6, "forward_macs": 1e-9}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME", help="models to show (default: all)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="a text table, or a JSON list of describe() dicts (default: table)")


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row[key]
    if key in SCALE:
        value *= SCALE[key]
    elif key == "input_shape":
        value = "×".join(map(str, value))
    return fmt.format(value)


def format_table(rows: list[dict]) -> str:
    """Rows of :func:`describe` as a fixed-width text table (params in millions, MACs in billions)."""
    cells = [[h for h, _, _ in COLUMNS]] + [[_cell(r, k, f) for _, k, f in COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    names = args.names or list_models()
    for name in names:
        get_spec(name)  # every bad name fails before any output
    rows = [describe(name) for name in names]
    print(json.dumps(rows, indent=2) if args.format == "json" else format_table(rows))
    return 0
