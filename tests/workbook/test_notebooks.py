"""Hygiene of the committed notebooks: clean, parametrizable by papermill, documented parameters."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import papermill
import pytest
from nblayout import assert_layout

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert [p.stem for p in NOTEBOOKS][:1] == ["00_environment"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_clean_and_parametrizable(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for c in code:
        assert not c.get("outputs") and c.get("execution_count") is None, "commit notebooks without outputs"
    assert nb["cells"][0]["cell_type"] == "markdown", "first cell says what question the notebook answers"
    tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    source = "".join(tagged[0]["source"])

    # Only typed literals: every statement is `name: type = <literal>` (after the import of Optional, which types a
    # parameter whose None means a default set elsewhere: papermill reads Optional[T], not T | None).
    names = []
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "typing" and [a.name for a in stmt.names] == [
                "Optional"]:
            continue
        assert isinstance(stmt, ast.AnnAssign), f"parameters cell holds only annotated assignments: {ast.unparse(stmt)}"
        ast.literal_eval(stmt.value)
        names.append(stmt.target.id)

    # papermill must see every one of them, with its type and a help comment (papermill --help-notebook).
    inspected = papermill.inspect_notebook(str(path))
    assert list(inspected) == names, "papermill could not parse some lines (no '=' inside comments)"
    for name, p in inspected.items():
        assert p["inferred_type_name"] != "None", f"{name} has no type annotation"
        assert p["help"], f"{name} has no comment explaining it"
    assert "output_dir" in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_layout(path):
    assert_layout(path.stem)
