"""One vocabulary: every word core.choices defines is defined there only, and the per-layer and conformance packages
name an engine only in the engine's own module and the registries (resnet_lab.layers.engines,
resnet_lab.conformance.engines)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from resnet_lab.core import choices

SRC = Path(choices.__file__).resolve().parents[1]
# words of the vocabulary that were once defined a second time, each under its own name somewhere (kept as a list so
# that a new module that brings one back under the old name is caught too)
FORKED = ("ENGINES", "FRAMEWORKS", "BACKENDS", "MODES", "IRS", "STATUSES", "PASSES", "ROWS", "NAMES", "IMPL", "XLA")
ENGINE_WORDS = re.compile(r"""["'](?:onnxruntime|openvino|iree|jax|torch|tensorflow)(?::jit)?["']""")


def _module_names(path: Path) -> set[str]:
    """The names a module assigns at its top level."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.resolve() != Path(choices.__file__).resolve())


def test_the_vocabulary_is_defined_once():
    words = {n for n in _module_names(Path(choices.__file__)) if n.isupper()} | set(FORKED)
    again = {f"{p.relative_to(SRC)}: {n}" for p in _modules() for n in _module_names(p) & words}
    assert not again, f"defined again outside core/choices.py: {sorted(again)}"


def test_the_check_finds_a_second_definition(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('ENGINES = ("iree",)\nx: int = 1\n')
    assert _module_names(planted) & set(FORKED) == {"ENGINES"}


def test_layers_and_conformance_name_an_engine_only_in_its_own_module():
    registries = (SRC / "layers" / "engines", SRC / "conformance" / "engines.py")
    named = {}
    for folder in ("layers", "conformance"):
        for p in (SRC / folder).rglob("*.py"):
            if any(p == r or p.is_relative_to(r) for r in registries):
                continue
            hits = ENGINE_WORDS.findall(p.read_text())
            if hits:
                named[str(p.relative_to(SRC))] = sorted(set(hits))
    assert not named, f"an engine named outside its engine module: {named}"
