"""``resnet-lab cache``: the exported models' cache (``outputs/cache/export/``), listed and pruned.

Each entry is one model at one image size exported by one environment and commit's code (its folder name ends in
the content key, :func:`resnet_lab.export.cache_key`); runs, ``bench`` and ``ops`` reuse an entry and a run folder
names the ones it used in ``export.json``. Entries are never needed again once their key's inputs changed: pruning
removes the oldest (by their last write) and keeps what is asked.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.core import artifacts
from resnet_lab.core.choices import add_format_option, check_format, check_int, check_positive
from resnet_lab.core.paths import check_path
from resnet_lab.core.text import markdown_table

EPILOG = """\
Listing: each entry's folder, model, content key, size on disk and age (days since its last write).
Pruning: --older-than DAYS removes the entries not written for that long; --keep N keeps the N newest and
removes the rest; both together remove what either names. Nothing is removed without one of them.

  resnet-lab cache                       # what is there
  resnet-lab cache --keep 2              # the two newest entries stay
  resnet-lab cache --older-than 14       # entries untouched for two weeks go
  make clean-cache                       # the whole cache goes (the next run exports again, ~1-2 min)"""


ENTRY = re.compile(r"^(?P<model>.+)-(?P<size>\d+)px-seed\d+-(?P<key>[0-9a-f]+)$")  # export.folder's name


def entries(root: Path) -> list[dict[str, Any]]:
    """The cache's entries under ``root``, newest first: folder, model, key, bytes, age in days."""
    now = time.time()
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        files = [f for f in d.rglob("*") if f.is_file()]
        written = max((f.stat().st_mtime for f in files), default=d.stat().st_mtime)
        m = ENTRY.match(d.name)
        model, size, key = (m["model"], int(m["size"]), m["key"]) if m else (d.name, None, None)
        out.append({"folder": str(d), "model": model, "image_size": size, "key": key,
                    "bytes": sum(f.stat().st_size for f in files), "age_days": (now - written) / 86400})
    return sorted(out, key=lambda e: e["age_days"])


def prune(root: Path, older_than_days: float | None = None, keep: int | None = None) -> list[dict[str, Any]]:
    """Remove the entries older than ``older_than_days`` and those beyond the ``keep`` newest; return them."""
    found = entries(root)
    gone = [e for i, e in enumerate(found)
            if (older_than_days is not None and e["age_days"] > older_than_days) or (keep is not None and i >= keep)]
    for e in gone:
        shutil.rmtree(e["folder"])
    return gone


def _table(rows: list[dict[str, Any]], fmt: str) -> str:
    cells = [[e["model"], e["image_size"], e["key"], f"{e['bytes'] / 2**20:.1f}", f"{e['age_days']:.1f}",
              e["folder"]] for e in rows]
    head = ["model", "size", "key", "MiB", "age (days)", "folder"]
    if fmt == "markdown":
        return "\n".join(markdown_table(head, cells))
    widths = [max(len(str(c)) for c in col) for col in zip(head, *cells, strict=True)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in [head, *cells])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--outputs", default=None, metavar="DIR", help="the outputs root (default: ./outputs or "
                   "$RESNET_LAB_OUTPUTS); the cache is DIR/cache/export")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                   help="remove entries not written for this many days")
    p.add_argument("--keep", type=int, default=None, metavar="N", help="keep the N newest entries, remove the rest")
    add_format_option(p, ("table", "json", "markdown"))


def run(args: argparse.Namespace) -> int:
    fmt = check_format(args)
    check_positive("--older-than", args.older_than, optional=True, unit="days")
    check_int("--keep", args.keep, 0, optional=True)
    check_path("--outputs", args.outputs, "dir")
    root = export.cache_root(args.outputs or artifacts.outputs_root())
    removed = prune(root, args.older_than, args.keep) if args.older_than is not None or args.keep is not None else []
    kept = entries(root)
    if fmt == "json":
        print(json.dumps({"cache": str(root), "entries": kept, "removed": removed}, indent=1))
        return 0
    if removed:
        print(f"removed {len(removed)} entr{'y' if len(removed) == 1 else 'ies'} "
              f"({sum(e['bytes'] for e in removed) / 2**20:.0f} MiB)")
    print(_table(kept, fmt) if kept else f"{root}: no cached export")
    return 0
