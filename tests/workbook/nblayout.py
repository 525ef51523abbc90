"""The layout every report notebook follows, checked in one place (tests/workbook/test_notebooks.py runs it on
every notebook in notebooks/)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
# `name: type = literal  # comment`, a group's `# -- heading`, or the import of Optional (a type papermill reads) and
# the blank line after it
PARAM_LINE = re.compile(r"^(?:\w+: [\w\[\], |]+ = \S.*  # \S.*|# -- \S.*|from typing import Optional  # \S.*|)$")
# What makes a cell compute rather than narrate: that code belongs in the package, with a test.
COMPUTING = (ast.For, ast.While, ast.FunctionDef, ast.ClassDef, ast.ListComp, ast.DictComp, ast.SetComp,
             ast.GeneratorExp, ast.Lambda)


def computing_code(source: str) -> list[str]:
    """The loops, definitions and comprehensions in one code cell's source."""
    tree = ast.parse(source)
    return [ast.get_source_segment(source, node) or type(node).__name__ for node in ast.walk(tree)
            if isinstance(node, COMPUTING)]


def assert_layout(name: str) -> None:
    """Question in markdown first, typed and commented parameters, output folder, cells that call the installed
    package rather than compute, results recorded last, no outputs."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    first, params, last = nb.cells[0], nb.cells[1], nb.cells[-1]
    assert first.cell_type == "markdown" and first.source.startswith(f"# {name[:2]}") and "Question" in first.source
    assert params.cell_type == "code" and params.metadata.get("tags") == ["parameters"]
    lines = params.source.splitlines()
    assert all(PARAM_LINE.match(line) for line in lines), [ln for ln in lines if not PARAM_LINE.match(ln)]
    output_dir = 'output_dir: str = ""  # artifact folder (relative: under outputs/); empty: outputs/adhoc/<timestamp>-'
    assert output_dir + name in lines
    assert f'artifacts.prepare_output_dir(output_dir, "{name}")' in nb.cells[2].source
    assert last.cell_type == "code" and "artifacts.save_results(" in last.source
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "commit the notebook without outputs"
            assert "sys.path" not in cell.source, "import the installed package"
    computing = [seg for cell in nb.cells[2:] if cell.cell_type == "code" for seg in computing_code(cell.source)]
    assert not computing, f"cells compute (move it into the package): {computing}"
