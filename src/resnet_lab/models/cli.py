"""`resnet-lab models`: list the zoo with analytic parameter and MAC counts (no TensorFlow import)."""

from __future__ import annotations

import argparse
import csv
import io
import json

from resnet_lab.core.choices import add_format_option, check_format
from resnet_lab.core.text import markdown_table
from resnet_lab.models.specs import describe, get_spec, list_models

FORMATS = ("table", "json", "csv", "markdown")  # table, csv and markdown: the columns below; json: describe()

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
    add_format_option(parser, FORMATS)  # json: a list of describe() dicts, every fact


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row[key]
    if key in SCALE:
        value *= SCALE[key]
    elif key == "input_shape":
        value = "×".join(map(str, value))
    return fmt.format(value)


def _cells(rows: list[dict]) -> list[list[str]]:
    """The header and one line per row of :func:`describe`, formatted (params in millions, MACs in billions)."""
    return [[h for h, _, _ in COLUMNS]] + [[_cell(r, k, f) for _, k, f in COLUMNS] for r in rows]


def format_table(rows: list[dict]) -> str:
    """Rows of :func:`describe` as a fixed-width text table (params in millions, MACs in billions)."""
    cells = _cells(rows)
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)
    return "\n".join(lines)


def format_markdown(rows: list[dict]) -> str:
    """The columns of :func:`format_table` as a GitHub Markdown table."""
    head, *body = _cells(rows)
    return "\n".join(markdown_table(head, body))


def format_csv(rows: list[dict]) -> str:
    """The columns of :func:`format_table` as CSV."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(_cells(rows))
    return buf.getvalue()


def run(args: argparse.Namespace) -> int:
    fmt = check_format(args)
    names = args.names or list_models()
    for name in names:
        get_spec(name)  # every bad name fails before any output
    rows = [describe(name) for name in names]
    text = {"json": lambda: json.dumps(rows, indent=2), "csv": lambda: format_csv(rows).rstrip("\n"),
            "markdown": lambda: format_markdown(rows), "table": lambda: format_table(rows)}[fmt]()
    print(text)
    return 0
