"""The layout every report notebook follows, checked in one place (imported by the per-notebook tests)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
PARAM_LINE = re.compile(r"^\w+: [\w\[\], |]+ = \S.*  # \S.*$")  # `name: type = literal  # comment`


def assert_layout(name: str, last_starts_with: str = "artifacts.record(") -> None:
    """Question in markdown first, typed and commented parameters, output folder, results recorded last."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    first, params, last = nb.cells[0], nb.cells[1], nb.cells[-1]
    assert first.cell_type == "markdown" and first.source.startswith(f"# {name[:2]}") and "Question" in first.source
    assert params.cell_type == "code" and params.metadata.get("tags") == ["parameters"]
    lines = params.source.splitlines()
    assert all(PARAM_LINE.match(line) for line in lines), [ln for ln in lines if not PARAM_LINE.match(ln)]
    assert f'output_dir: str = ""  # artifact folder; empty means outputs/adhoc/<timestamp>-{name}' in lines
    assert f'artifacts.prepare_output_dir(output_dir, "{name}")' in nb.cells[2].source
    assert last.cell_type == "code" and last.source.startswith(last_starts_with) and "artifacts.record(" in last.source
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "commit the notebook without outputs"
