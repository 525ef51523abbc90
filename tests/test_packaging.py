"""environment.yml (conda route) stays consistent with pyproject.toml (pip route); the README stays short and true."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    python = next(d for d in deps if isinstance(d, str) and d.startswith("python="))
    minimum = re.search(r">=\s*(\d+\.\d+)", project["requires-python"]).group(1)
    assert python.split("=", 1)[1].startswith(minimum.split(".")[0] + "."), python
    assert tuple(map(int, python.split("=", 1)[1].split("."))) >= tuple(map(int, minimum.split(".")))
    assert "pip" in deps
    pip_lines = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    (editable,) = [line for line in pip_lines if line.startswith("-e")]
    extras = re.search(r"\[(.*)\]", editable).group(1).split(",")
    for extra in extras:
        assert extra in project["optional-dependencies"], f"environment.yml asks for unknown extra {extra}"
    # Every dependency comes from pyproject through the editable install: nothing pinned twice.
    assert all(not isinstance(d, str) or d.split("=")[0] in ("python", "pip") for d in deps)


def test_console_script_and_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["resnet-lab"] == "resnet_lab.cli:main"
    assert {"gpu", "dev", "jax", "torch"} <= set(project["optional-dependencies"])
    assert any(d.startswith("tensorflow-cpu") for d in project["dependencies"])


def test_readme_is_short_and_names_files_of_the_checkout():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 8 * 1024, "the README is a first screen; details go next to what they document"
    paths = re.findall(r"`((?:src|params|outputs|notebooks|tests)/[^`*<>\s]*)`", text)
    assert "params/default.yaml" in paths and "outputs/README.md" in paths
    generated = ("outputs/index.html", "outputs/runs/", "outputs/adhoc/", "outputs/store.sqlite")  # what a run writes
    assert [p for p in paths if not (ROOT / p).exists() and not p.startswith(generated)] == []
    assert "../" not in text, "no paths outside the checkout"
