"""The one shape of ``resnet-lab compare`` and ``resnet-lab history``: check ``--format`` and ``--out`` before
reading anything, compute the answer, write it into ``--out``, print it in the format asked, exit with what
the answer says. Each command (:mod:`resnet_lab.report.compare`, :mod:`resnet_lab.report.history`) passes
its own computation, views and exit code.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from resnet_lab.core import artifacts, choices
from resnet_lab.core.paths import check_path

FORMATS = ("table", "json", "markdown")  # what compare and history print

R = TypeVar("R")


def add_output_options(p: argparse.ArgumentParser, out_help: str) -> None:
    """``--format`` (:data:`FORMATS`, default table) and ``--out DIR``."""
    choices.add_format_option(p, FORMATS)
    p.add_argument("--out", help=out_help)


def as_json(data: Any) -> str:
    """The ``--format json`` text of an answer's JSON-able data."""
    return json.dumps(data, indent=1, default=str) + "\n"


def run(args: argparse.Namespace, compute: Callable[[], R], write: Callable[[str | Path, R], Any],
        views: Mapping[str, Callable[[R], str]], exit_code: Callable[[R], int] = lambda _: 0) -> int:
    """Check ``args.format`` and ``args.out`` (a new or empty folder) first, then ``compute()``, ``write`` it into
    ``args.out`` where given, print ``views[format]`` of it and return ``exit_code`` of it."""
    fmt = choices.check_format(args)
    if args.out:
        check_path("--out", args.out, "out-dir")
        artifacts.check_out(args.out)  # before reading anything
    result = compute()
    if args.out:
        write(args.out, result)
    print(views[fmt](result), end="")
    return exit_code(result)
