"""Tables for people: what a notebook shows of a frame it saved as CSV.

A report shows a compact view of each table (a few columns, numbers with units and sensible precision, MFU in
%), says in one line which rows were skipped and why instead of showing them as rows of NaN, folds long
tables, and links the full CSV beside it. The notebooks call :func:`saved_table` (save a frame as CSV in the
notebook's folder and show its view, the name written once) or :func:`table` (show a frame saved elsewhere);
the CSVs keep every column.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from resnet_lab.core import artifacts

MAX_ROWS_OPEN = 15  # longer tables are folded (<details>, the row count in its title)


def missing(v: Any) -> bool:
    """None, NaN or an empty CSV cell: shown as a dash."""
    return v is None or (isinstance(v, float) and v != v) or v == ""


def _fmt_float(spec: str) -> Callable[[Any], str]:
    def f(v: Any) -> str:
        if missing(v):
            return "–"
        try:
            return format(float(v), spec)
        except (TypeError, ValueError):
            return str(v)
    return f


def percent(v: Any) -> str:
    """A fraction as a percentage (0.123 → 12.3 %); empty stays a dash."""
    if missing(v):
        return "–"
    return f"{100 * float(v):.1f} %"


def plain_percent(v: Any) -> str:
    """A number that already is a percentage (CPU utilisation 66.3 → 66 %)."""
    return "–" if missing(v) else f"{float(v):.0f} %"


def seconds(v: Any) -> str:
    """Seconds with the precision their size wants: 123 · 4.56 · 0.0123."""
    if missing(v):
        return "–"
    v = float(v)
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}"


FORMATS: dict[str, Callable[[Any], str]] = {
    "img/s": _fmt_float(",.1f"), "±": _fmt_float(",.1f"), "GFLOP/s": _fmt_float(",.0f"), "s": seconds,
    "ms": _fmt_float(".1f"), "×": _fmt_float(".2f"), "%": percent, "CPU %": plain_percent, "int": _fmt_float(",.0f"),
    "sci": _fmt_float(".1e"), "MB": _fmt_float(",.1f"),
}


def skipped_line(df: Any, status: str = "status", reason: str = "reason", label: str = "label") -> str:
    """One sentence for the rows with status ``skipped``: how many, which, and why (distinct reasons)."""
    if df is None or status not in df or not (df[status] == "skipped").any():
        return ""
    sk = df[df[status] == "skipped"]
    names = (": " + ", ".join(str(x) for x in sk[label])) if label in sk and len(sk) <= 6 else ""
    reasons = "; ".join(dict.fromkeys(str(r) for r in sk[reason] if str(r) not in ("", "nan"))) if reason in sk else ""
    return f"Skipped on this host, {len(sk)} row(s){names}" + (f" — {reasons}" if reasons else "") + "."


def table(df: Any, columns: dict[str, tuple[str, str]] | Sequence[str] | None = None, csv: str | None = None,
          drop_skipped: bool = False, status: str = "status", reason: str = "reason", label: str = "label",
          max_rows_open: int = MAX_ROWS_OPEN, index: bool = False, full: Any = None) -> Any:
    """An HTML view of ``df`` for the report (an ``IPython.display.HTML``).

    Args:
        columns: ``{source column: (shown name, format)}`` where format is a key of :data:`FORMATS` or ""
            (as is); a sequence keeps those columns as they are. None: every column.
        csv: the CSV holding everything (a path relative to the report, e.g. ``03_benchmarks/bench.csv``),
            linked under the table.
        drop_skipped: leave rows with ``status == "skipped"`` out and say in one line which and why.
        max_rows_open: a table with more rows is folded, with its size in the fold's title.
        full: the frame the CSV holds, when ``df`` is a part of it (the link states the CSV's size).

    Returns None for ``df`` None, so that ``table(frames.get(name))`` shows nothing when there is none.
    """
    from IPython.display import HTML

    if df is None:  # a section with nothing to show (e.g. one backend only): no output at all
        return None
    note = skipped_line(df, status, reason, label) if drop_skipped else ""
    view = df[df[status] != "skipped"] if drop_skipped and status in df else df
    if columns is None:
        columns = {c: (str(c), "") for c in view.columns}
    elif not isinstance(columns, dict):
        columns = {c: (str(c), "") for c in columns}
    present = {c: spec for c, spec in columns.items() if c in view.columns}
    shown = view[list(present)].copy()
    for c, (_, fmt) in present.items():
        if fmt:
            shown[c] = [FORMATS[fmt](v) for v in shown[c]]
    shown.columns = [name + (f" ({fmt})" if fmt in ("img/s", "GFLOP/s", "s", "ms", "MB") else "")
                     for name, fmt in present.values()]
    body = shown.to_html(index=index, na_rep="–", border=0, classes="resnet-lab-table", escape=True)
    full = df if full is None else full
    link = (f'<p><small>Full data: <a href="{html.escape(csv)}">{html.escape(csv.rsplit("/", 1)[-1])}</a> '
            f"({len(full)} rows × {len(full.columns)} columns)</small></p>") if csv else ""
    note_html = f"<p>{html.escape(note)}</p>" if note else ""
    if len(shown) > max_rows_open:
        body = (f"<details><summary>{len(shown)} rows (click to open)</summary>{body}</details>")
    return HTML(note_html + body + link)


def saved_table(out: Path, name: str, df: Any, *, view: Any = None, index: bool | str = False, **shown: Any) -> Any:
    """Save ``df`` as ``<out>/<name>.csv`` and return :func:`table` of it, linked to that CSV.

    Args:
        df: a DataFrame or a list of row dicts; None saves and shows nothing (a section this run has no data
            for).
        view: what to show instead of ``df`` (a part of it, or a compact form); the CSV holds ``df``.
        index: keep the frame's index as the CSV's first column (a string names that column) and show it.
        shown: the rest of :func:`table`'s arguments (columns, drop_skipped, max_rows_open, ...).
    """
    if df is None:
        return None
    import pandas as pd

    frame = df if isinstance(df, pd.DataFrame) else pd.DataFrame(df)
    saved = frame.reset_index(names=index if isinstance(index, str) else None) if index else frame
    path = artifacts.save_table(out, name, saved)
    return table(frame if view is None else view, csv=f"{Path(out).name}/{path.name}", index=bool(index),
                 full=saved, **shown)


def saved_tables(out: Path, frames: Mapping[str, Any], name: str, show: Sequence[str] = (), *,
                 index: bool | str = False, **shown: Any) -> Any:
    """Save every frame of ``frames`` as ``name.format(key)`` (spaces in the key as ``_``), and return the
    views of the keys in ``show``, one after another, each linked to its CSV (None when none is there)."""
    from IPython.display import HTML

    views = {key: saved_table(out, name.format(key.replace(" ", "_")), frame, index=index, **shown)
             for key, frame in frames.items()}
    parts = [views[key].data for key in show if views.get(key) is not None]
    return HTML("".join(parts)) if parts else None


def figure_file(path: Path, missing: str) -> Any:
    """The PNG at ``path`` to show, or the sentence ``missing`` where the run drew none."""
    from IPython.display import Image, Markdown

    return Image(filename=str(path)) if Path(path).is_file() else Markdown(missing)
