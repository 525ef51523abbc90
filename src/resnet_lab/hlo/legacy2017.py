"""The 2017 XLA op list for ResNet-50 beside today's exact inventory (data: ``data/xla_ops_2017.yaml``)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from importlib import resources
from typing import Any

from resnet_lab.hlo import parser

DATA_FILE = "xla_ops_2017.yaml"
KINDS = ("opcode", "truncated", "renamed", "name", "backend", "unexplained")


@functools.lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    """The data file: ``source``, ``context``, ``method``, ``tokens`` (list of dicts), ``today_only``."""
    import yaml

    data = yaml.safe_load(resources.files("resnet_lab").joinpath("data", DATA_FILE).read_text())
    for t in data["tokens"]:
        if t["kind"] not in KINDS:
            raise ValueError(f"{DATA_FILE}: token {t['token']!r} has unknown kind {t['kind']!r}")
    return data


def tokens_2017() -> list[str]:
    """The 2017 list, as printed in the note (sorted)."""
    return [t["token"] for t in load()["tokens"]]


def today_opcodes() -> list[str]:
    """The 2017 list read as today's opcodes: each token replaced by the opcodes it stands for (``today``):
    ``arg`` → ``parameter``, ``get`` → ``get-tuple-element``, ``reduce`` → ``reduce`` and ``reduce-window``, ..."""
    return sorted({op for t in load()["tokens"] for op in t["today"]})


def side_by_side(today: Iterable[str]) -> list[dict[str, Any]]:
    """One row per 2017 token and per opcode of ``today`` that no token accounts for.

    Columns: ``token_2017`` ('' for today-only rows), ``kind``, ``opcodes_today`` (the opcodes the token
    stands for that ``today`` has, comma-joined), ``in_today`` (bool), ``why``.
    """
    today = set(today)
    rows, covered = [], set()
    for t in load()["tokens"]:
        present = [op for op in t["today"] if op in today]
        covered.update(t["today"])
        rows.append({"token_2017": t["token"], "kind": t["kind"], "opcodes_today": ", ".join(present),
                     "in_today": bool(present), "why": t["why"]})
    notes = load()["today_only"]
    for op in sorted(today):
        exact = any(op == t["token"] for t in load()["tokens"])
        if exact:
            continue
        kind = "hidden" if op in covered else "new"
        why = notes.get(op, "Not in the 2017 list: an opcode of today's lowering or passes that the 2017 "
                            "clusters did not produce (or produced under another name).")
        rows.append({"token_2017": "", "kind": kind, "opcodes_today": op, "in_today": True, "why": why})
    return rows


def describe(s: dict[str, Any]) -> str:
    """:func:`summary` as Markdown sentences."""
    def ops(xs: Iterable[str]) -> str:
        return ", ".join(f"`{x}`" for x in xs) or "none"

    return (f"Of the 2017 list's {s['tokens_2017']} tokens, {len(s['opcodes_2017'])} are opcodes of today's XLA; "
            f"{len(s['not_opcodes_2017'])} are not ({ops(s['not_opcodes_2017'])}), and {ops(s['truncated_2017'])} "
            f"also stand for longer opcodes the regex cut short. Today's training step uses "
            f"{len(s['missing_from_2017'])} opcodes the 2017 list lacks: {ops(s['missing_from_2017'])}. "
            f"2017 tokens no opcode of today's step accounts for: {ops(s['not_in_today'])}.")


def summary(today: Iterable[str]) -> dict[str, Any]:
    """The headline of the comparison with ``today``'s opcodes.

    ``opcodes_2017``: tokens that are opcodes of the installed XLA; ``not_opcodes_2017``: tokens that are
    not; ``truncated_2017``: tokens that (also) stand for a longer opcode; ``missing_from_2017``: today's
    opcodes that are not a 2017 token; ``not_in_today``: tokens no opcode of ``today`` accounts for.
    """
    today, known = set(today), parser.known_opcodes()
    tokens = load()["tokens"]
    return {
        "tokens_2017": len(tokens),
        "opcodes_2017": sorted(t["token"] for t in tokens if t["token"] in known),
        "not_opcodes_2017": sorted(t["token"] for t in tokens if t["token"] not in known),
        "truncated_2017": sorted(t["token"] for t in tokens if t["kind"] == "truncated"),
        "missing_from_2017": sorted(today - {t["token"] for t in tokens}),
        "not_in_today": sorted(t["token"] for t in tokens if not set(t["today"]) & today),
    }
