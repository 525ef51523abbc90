"""Every path a command is given, checked for being the right kind of thing before any work starts.

One line per mistake, in the vocabulary's style (:mod:`resnet_lab.core.choices`), naming the option, the path and
what it must be::

    --peak-file: 'peak.jsn' does not exist (a file to read)
    --out: 'bench.csv' is a file, not a folder (a folder to write into)
    --out: 'notes.txt/run' cannot be made: 'notes.txt' is a file

The kinds (:data:`KINDS`): ``file`` (exists, a file, readable), ``dir`` (exists, a folder), ``out-file`` (a file
to write: not a folder, its folder exists or can be made and written), ``out-dir`` (a folder to write into: a
folder or nothing yet, and its nearest existing ancestor a writable folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from resnet_lab.core.errors import UsageError

KINDS = {"file": "a file to read", "dir": "a folder to read", "out-file": "a file to write",
         "out-dir": "a folder to write into"}


def _writable_ancestor(name: str, value: Any, path: Path) -> None:
    """UsageError unless the nearest existing ancestor of ``path`` is a folder this process may write."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{name}: '{value}' cannot be made: '{parent}' is a file")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(f"{name}: '{value}' cannot be written: no write permission on '{parent}'")
            return


def check_path(name: str, value: Any, kind: str, *, optional: bool = True) -> Path | None:
    """``value`` as a Path if it is ``kind`` of thing (:data:`KINDS`); None for an empty value where ``optional``;
    else UsageError, one line."""
    if kind not in KINDS:
        raise ValueError(f"unknown path kind {kind!r}")
    if value is None or value == "":
        if optional:
            return None
        raise UsageError(f"{name}: a path is required ({KINDS[kind]})")
    path = Path(str(value)).expanduser()
    what = KINDS[kind]
    if kind in ("file", "dir"):
        if not path.exists():
            raise UsageError(f"{name}: '{value}' does not exist ({what})")
        if kind == "file" and path.is_dir():
            raise UsageError(f"{name}: '{value}' is a folder, not a file ({what})")
        if kind == "dir" and not path.is_dir():
            raise UsageError(f"{name}: '{value}' is a file, not a folder ({what})")
        if not os.access(path, os.R_OK):
            raise UsageError(f"{name}: '{value}' cannot be read (no read permission)")
        return path
    if kind == "out-file" and path.is_dir():
        raise UsageError(f"{name}: '{value}' is a folder, not a file ({what})")
    if kind == "out-dir" and path.exists() and not path.is_dir():
        raise UsageError(f"{name}: '{value}' is a file, not a folder ({what})")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{name}: '{value}' cannot be written (no write permission)")
        return path
    _writable_ancestor(name, value, path.absolute())
    return path


def shown(path: str | os.PathLike, base: str | os.PathLike | None = None) -> str:
    """``path`` as a report or a shared line prints it: relative to ``base`` (default: the working directory) where it
    lies inside it, else relative to the checkout (the folder of ``pyproject.toml`` above the package), else its
    last two parts. Never the machine's absolute path: a report is read on other machines."""
    p = Path(path)
    absolute = Path(os.path.abspath(p))
    checkout = Path(__file__).resolve().parents[3]  # src/resnet_lab/core/paths.py: the checkout above src/
    for b in (Path(base) if base is not None else Path.cwd(), checkout):
        try:
            rel = absolute.relative_to(os.path.abspath(b))
        except ValueError:
            continue
        return str(rel) if str(rel) != "." else "."
    if not p.is_absolute():
        return str(p)
    return str(Path(*absolute.parts[-2:])) if len(absolute.parts) > 2 else (absolute.name or str(absolute))


def here(path: str | os.PathLike) -> str:
    """``path`` as a terminal line prints it: relative to the working directory where it lies inside it, else
    absolute (the person at this machine can open it; a shared report uses :func:`shown`)."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
