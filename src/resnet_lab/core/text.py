"""Small text helpers shared by the parsers and the runner."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_STRING = r'"(?:[^"\\]|\\.)*"'
_BRACKETS_OR_COMMA = re.compile(rf"{_STRING}|[(){{}}\[\],]")
OPEN, CLOSE = "({[", ")}]"


def split_top_level(s: str) -> list[str]:
    """Split ``s`` at commas outside brackets ((), {}, []) and double-quoted strings.

    Parts are stripped and empty parts dropped: ``"a, f(b, c), [d, e]"`` → ``["a", "f(b, c)", "[d, e]"]``.
    Used for HLO operand lists and attributes and for type annotations (``dict[str, list[int]]``).
    """
    parts, depth, last = [], 0, 0
    for m in _BRACKETS_OR_COMMA.finditer(s):
        c = m.group()
        if c in OPEN:
            depth += 1
        elif c in CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(s[last:m.start()].strip())
            last = m.end()
    parts.append(s[last:].strip())
    return [p for p in parts if p]


def one_line(exc: BaseException, limit: int = 500) -> str:
    """``TypeName: first line of the message`` (at most ``limit`` characters)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:limit] if first else type(exc).__name__


def markdown_table(columns: Sequence[Any], rows: Iterable[Sequence[Any]]) -> list[str]:
    """GitHub Markdown table lines: a header of ``columns``, one line per row; a ``|`` inside a cell is escaped."""
    cell = lambda c: str(c).replace("|", "\\|")  # noqa: E731
    return ["| " + " | ".join(map(cell, columns)) + " |", "|" + " --- |" * len(columns),
            *("| " + " | ".join(map(cell, row)) + " |" for row in rows)]


def rows_as(fmt: str, columns: Sequence[str], cells: Sequence[Sequence[str]], head: str = "") -> str:
    """Rows of text cells as a command prints them: ``table`` (aligned columns), ``csv`` or ``markdown``, with
    ``head`` (a summary line or more) above the table and the Markdown, never in the CSV."""
    if fmt == "csv":
        import csv
        import io

        out = io.StringIO()
        w = csv.writer(out)
        w.writerow(columns)
        w.writerows(cells)
        return out.getvalue().rstrip("\n")
    if fmt == "markdown":
        return "\n".join([head, "", *markdown_table(list(columns), cells)]).strip()
    widths = [max(len(str(c)) for c in col) for col in zip(columns, *cells, strict=True)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
             for line in [columns, *cells]]
    return "\n".join([head, *lines]).strip()
