"""``resnet-lab coverage SUPPORT.yaml``: what a backend that implements the listed ops still lacks for a model.

A **support file** says what a backend implements, as HLO opcodes (the names in the installed XLA's list)::

    ops: [add, convolution, reverse, ...]          # at its simplest: the op, with any types and attributes
    ops:
      - add
      - convolution: {types: [f32, bf16], feature_group_count: [1], lhs_dilate: [1x1]}
      - reduce: {reducer: [add, maximum]}

A constraint lists the values the backend handles: ``types`` (element types of operands and result) and, per
op, the attributes of its signature (:data:`resnet_lab.hlo.origin.SIGNATURE_KEYS`: a convolution's window fields
``size stride pad lhs_dilate rhs_dilate rhs_reversal`` (``x``-joined per spatial dimension), ``dim_labels``,
``feature_group_count``, ``batch_group_count``; the ``reducer`` of a reduce or reduce-window, i.e. the root
opcode of the computation it applies; a dot's ``lhs_contracting_dims`` ...; a compare's ``direction``).

:func:`check` reads a capture's ``origins`` (:func:`resnet_lab.hlo.origin.aggregate`) and answers: the ops and
signatures missing, the share of instructions that are missing and the share of the step's FLOPs (convolutions
and dots, 2 x multiply-adds) that depend on them — a missing convolution or dot itself, or one that a missing
instruction of the same layer and pass feeds (``reverse`` → the input-gradient convolution) — and the layers
blocked, per pass. A name not in the opcode list is reported as unknown with the nearest real name, and covers
nothing.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resnet_lab import models
from resnet_lab.core.choices import (
    HLO_BACKENDS,
    IRS,
    MODES,
    PRECISIONS,
    STAGES,
    add_format_option,
    check_choice,
    check_format,
)
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path
from resnet_lab.core.text import markdown_table
from resnet_lab.hlo import capture, origin, parser, stablehlo

FORMATS = ("table", "json", "markdown")  # what `resnet-lab coverage` prints (its several tables: no csv)
TOP_KEYS = ("ops", "name", "note")
_ELEMENT_TYPE = re.compile(r"pred|token|bf16|[suf]\d+|c\d+|f8\w*|f4\w*")
DEFAULT_MODEL = "resnet50_v1.5"  # the selected reference (notebook 01)


@dataclass
class Support:
    """What a backend implements: opcode -> constraints (key -> allowed values; empty = any), and the names
    that are not opcodes (-> the nearest opcode)."""

    ops: dict[str, dict[str, list[str]]]
    unknown: dict[str, str] = field(default_factory=dict)
    name: str = ""


def nearest(name: str, known: Iterable[str]) -> str:
    """The real opcode nearest to ``name``: one it begins (a name cut at a dash: ``get`` → ``get-tuple-element``),
    else the closest spelling (``reverze`` → ``reverse``)."""
    known = sorted(known)
    prefixed = [k for k in known if k.startswith(name + "-") or k.startswith(name)]
    if prefixed:
        return min(prefixed, key=len)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.0)
    return close[0] if close else ""


def _constraints(op: str, value: Any, where: str) -> dict[str, list[str]]:
    if value is None:
        return {}
    allowed = ("types", *origin.SIGNATURE_KEYS.get(op, ()))
    if not isinstance(value, Mapping):
        raise UsageError(f"{where}: the constraints of '{op}' must be a mapping of {', '.join(allowed)} "
                         f"to lists of allowed values, not {type(value).__name__}")
    out = {}
    for key, vals in value.items():
        if key not in allowed:
            raise UsageError(f"{where}: '{op}' has no constraint '{key}'; allowed: {', '.join(allowed)}")
        vals = vals if isinstance(vals, list) else [vals]
        if not vals or any(isinstance(v, (list, dict)) or v is None for v in vals):
            raise UsageError(f"{where}: '{op}: {key}' must list one or more values (strings or numbers)")
        vals = [str(v) for v in vals]
        if key == "types" and (bad := [v for v in vals if not _ELEMENT_TYPE.fullmatch(v)]):
            raise UsageError(f"{where}: '{op}: types' has {bad[0]!r}, not an element type (f32, bf16, s32, pred ...)")
        out[key] = vals
    return out


def parse_support(data: Any, where: str = "support file") -> Support:
    """A :class:`Support` from the YAML's data. Raises UsageError (one line: which entry, what is allowed)."""
    if not isinstance(data, Mapping) or "ops" not in data:
        raise UsageError(f"{where}: expected a mapping with 'ops: [opcode, ...]' (optional: name, note)")
    if extra := [k for k in data if k not in TOP_KEYS]:
        raise UsageError(f"{where}: unknown key '{extra[0]}'; allowed: {', '.join(TOP_KEYS)}")
    raw = data["ops"]
    entries: list[tuple[str, Any, str]] = []
    if isinstance(raw, Mapping):
        entries = [(str(k), v, f"{where}: ops entry '{k}'") for k, v in raw.items()]
    elif isinstance(raw, list):
        for i, e in enumerate(raw, 1):
            here = f"{where}: ops entry {i}"
            if isinstance(e, str):
                entries.append((e, None, here))
            elif isinstance(e, Mapping) and len(e) == 1:
                (k, v), = e.items()
                entries.append((str(k), v, f"{here} ('{k}')"))
            else:
                raise UsageError(f"{here} is {e!r}: allowed: an opcode name, or one 'opcode: {{constraints}}' mapping")
    else:
        raise UsageError(f"{where}: 'ops' must be a list of opcodes (or a mapping opcode: constraints), "
                         f"not {type(raw).__name__}")
    known = parser.known_opcodes().names
    support = Support({}, {}, str(data.get("name") or where))
    for name, value, here in entries:
        if not re.fullmatch(r"[a-z][a-z0-9\-]*", name):
            raise UsageError(f"{here}: {name!r} is not an opcode name (lower case, digits and '-')")
        if name not in known:
            support.unknown[name] = nearest(name, known)
            continue
        support.ops.setdefault(name, {}).update(_constraints(name, value, here))
    return support


def load_support(path: str | Path) -> Support:
    """:func:`parse_support` of a YAML file. Raises UsageError for a missing, unreadable or malformed file."""
    import yaml

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read the support file {p}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise UsageError(f"{p}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    return parse_support(data, str(p))


def support_from_ops(names: Iterable[str], name: str = "") -> Support:
    """A :class:`Support` of bare names (no constraints): e.g. the 2017 note's list."""
    return parse_support({"ops": list(names), "name": name or "ops"}, name or "ops")


def _why_missing(row: Mapping[str, Any], support: Support) -> str | None:
    """None where ``support`` covers the row; else what is missing: 'op', or the first constraint it fails."""
    constraints = support.ops.get(row["opcode"])
    if constraints is None:
        return "op"
    for key, allowed in constraints.items():
        if key == "types":
            used = set(re.findall(r"[a-z0-9]+", row["types"])) - {"tuple"}
            if bad := sorted(used - set(allowed)):
                return f"types: {', '.join(bad)}"
        elif (value := row["attrs"].get(key)) is not None and value not in allowed:
            return f"{key}={value}"
    return None


def check(rows: Sequence[Mapping[str, Any]], support: Support) -> dict[str, Any]:
    """What ``support`` lacks for one capture (its ``origins`` rows): JSON-ready (see the module doc).

    Keys: ``covered``; ``unknown`` [{name, nearest}]; ``instructions``, ``instructions_missing``,
    ``share_instructions`` (%); ``gflops``; ``gflops_depending`` and ``share_flops`` (%): the convolutions and dots
    of the blocked layers' passes (a layer's gradient cannot run without all of its gradient's instructions);
    ``gflops_fed`` and ``share_flops_fed``: only those missing or fed by a missing instruction; ``missing_ops``
    [{opcode, instructions, passes, layers}]; ``missing_signatures`` [{opcode, signature, why, count}] (listed
    ops, constraint failed); ``needed_by`` [{opcode, why, feeds, layer, pass, gflops}]: the convolutions and dots
    a missing instruction feeds; ``layers_blocked`` [{layer, pass, missing}] (no layer: the scope in brackets).
    """
    compute = {r["name"]: r for r in rows if r["opcode"] in origin.COMPUTE and r["name"]}
    total = sum(r["count"] for r in rows)
    total_flops = sum(r["flops"] for r in rows)
    missing_ops: dict[str, dict[str, Any]] = {}
    missing_sigs: dict[tuple[str, str, str], int] = {}
    blocked: dict[tuple[str, str], set[str]] = {}
    depending: dict[str, str] = {}  # compute instruction -> why it depends on something missing
    n_missing = 0
    needed: dict[tuple[str, str, str], None] = {}
    for r in rows:
        why = _why_missing(r, support)
        if why is None:
            continue
        n_missing += r["count"]
        if why == "op":
            m = missing_ops.setdefault(r["opcode"], {"instructions": 0, "passes": set(), "layers": set()})
            m["instructions"] += r["count"]
            m["passes"].add(r["pass"] or "?")
            m["layers"].update(r["layers"])
        else:
            key = (r["opcode"], origin.signature_label(r), why)
            missing_sigs[key] = missing_sigs.get(key, 0) + r["count"]
        blocked.setdefault((origin.layer_label(r), r["pass"] or "?"), set()).add(r["opcode"])
        if r["name"] in compute:
            depending.setdefault(r["name"], r["opcode"])
        for name in r["feeds"]:
            depending.setdefault(name, r["opcode"])
            needed[(r["opcode"], why, name)] = None
    flops_fed = sum(compute[n]["flops"] for n in depending if n in compute)
    flops_blocked = sum(r["flops"] for r in compute.values()
                        if (origin.layer_label(r), r["pass"] or "?") in blocked or r["name"] in depending)
    return {
        "support": support.name, "covered": n_missing == 0,
        "unknown": [{"name": k, "nearest": v} for k, v in sorted(support.unknown.items())],
        "instructions": total, "instructions_missing": n_missing,
        "share_instructions": round(100.0 * n_missing / total, 2) if total else 0.0,
        "gflops": round(total_flops / 1e9, 3), "gflops_depending": round(flops_blocked / 1e9, 3),
        "share_flops": round(100.0 * flops_blocked / total_flops, 2) if total_flops else 0.0,
        "gflops_fed": round(flops_fed / 1e9, 3),
        "share_flops_fed": round(100.0 * flops_fed / total_flops, 2) if total_flops else 0.0,
        "missing_ops": [{"opcode": op, "instructions": m["instructions"], "passes": ", ".join(sorted(m["passes"])),
                         "layers": len(m["layers"])} for op, m in sorted(missing_ops.items())],
        "missing_signatures": [{"opcode": k[0], "signature": k[1], "why": k[2], "count": n}
                               for k, n in sorted(missing_sigs.items())],
        "needed_by": [{"opcode": op, "why": why, "feeds": name, "feeds_opcode": compute[name]["opcode"],
                       "layer": origin.layer_label(compute[name]), "pass": compute[name]["pass"],
                       "gflops": round(compute[name]["flops"] / 1e9, 4)}
                      for op, why, name in needed if name in compute],
        "layers_blocked": [{"layer": layer, "pass": p, "missing": ", ".join(sorted(ops))}
                           for (layer, p), ops in sorted(blocked.items())],
    }


def stablehlo_rows(rec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A StableHLO record's compute ops as :func:`check`'s rows, op by op: each under the HLO opcode it becomes
    (:func:`resnet_lab.hlo.stablehlo.as_hlo_name`; another dialect's op keeps its full name, which no support file
    lists); its layer and pass from its location where the record has them (JAX's name stack, read as
    :func:`resnet_lab.hlo.origin.classify` reads HLO metadata), else the StableHLO op as its scope. No signatures,
    no FLOPs."""
    left = dict(rec["compute_ops"])
    rows = []

    def row(op: str, name: str, n: int) -> dict[str, Any]:
        layers, pass_, scope = origin.classify(name, rec.get("layers", ()))
        return {"opcode": stablehlo.as_hlo_name(op), "types": "", "attrs": {}, "layers": list(layers),
                "pass": pass_, "scope": "" if layers else (scope or op), "feeds": [], "name": "", "count": n,
                "flops": 0.0}

    for loc in rec.get("locations", ()):
        if left.get(loc["op"], 0) > 0:
            n = min(loc["count"], left[loc["op"]])
            left[loc["op"]] -= n
            rows.append(row(loc["op"], loc["name"], n))
    rows += [row(op, "", n) for op, n in sorted(left.items()) if n > 0]  # ops without a location line
    return rows


def headline(result: Mapping[str, Any]) -> str:
    """One sentence: covered, or what is missing and what depends on it."""
    unknown = "; ".join(f"'{u['name']}' is not an opcode (nearest: {u['nearest']})" for u in result["unknown"])
    unknown = f" Unknown names: {unknown}." if unknown else ""
    if result["covered"]:
        return f"Covered: every one of the {result['instructions']} instructions is supported.{unknown}"
    ops = ", ".join(m["opcode"] for m in result["missing_ops"]) or "none"
    real_layers = {b["layer"] for b in result["layers_blocked"] if not b["layer"].startswith("(")}
    sigs = len(result["missing_signatures"])
    flops = (f"{result['gflops_depending']} of {result['gflops']} GFLOP ({result['share_flops']} %) are in blocked "
             f"passes, {result['gflops_fed']} ({result['share_flops_fed']} %) fed by a missing instruction"
             if result["gflops"] else "no convolution or dot FLOPs counted (op level)")
    return (f"Not covered: missing ops {ops}; {sigs} unsupported signatures of listed ops. "
            f"{result['instructions_missing']} of {result['instructions']} instructions "
            f"({result['share_instructions']} %) are missing; {len(real_layers)} layers blocked; {flops}.{unknown}")


def _lines(title: str, rows: Sequence[Mapping[str, Any]], markdown: bool) -> list[str]:
    if not rows:
        return []
    cols = list(rows[0])
    if markdown:
        return [f"\n**{title}**\n", *markdown_table(cols, [[r[c] for c in cols] for r in rows])]
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    return [f"\n{title}:", "  ".join(c.ljust(width[c]) for c in cols),
            *("  ".join(str(r[c]).ljust(width[c]) for c in cols) for r in rows)]


def format_result(result: Mapping[str, Any], fmt: str = "table") -> str:
    """``table`` (plain text), ``markdown`` or ``json``."""
    if fmt == "json":
        return json.dumps(result, indent=2)
    md = fmt == "markdown"
    out = [headline(result)]
    out += _lines("Missing ops", result["missing_ops"], md)
    out += _lines("Unsupported signatures of listed ops", result["missing_signatures"], md)
    out += _lines("Convolutions and dots that need a missing instruction", result["needed_by"], md)
    out += _lines("Layers blocked (per pass; a scope in brackets where no layer is known)", result["layers_blocked"],
                  md)
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ the CLI

EPILOG = """\
SUPPORT.yaml lists HLO opcodes, each bare or with the values it handles ("types" and, per op, its signature's
attributes; a wrong key is an error naming the allowed ones):
  ops: [add, broadcast, constant, {convolution: {types: [f32], feature_group_count: [1]}}, {reduce: {reducer: [add]}}]
A name that is no opcode is reported with the nearest one and covers nothing. The step is compiled as
`resnet-lab ops` does and read before XLA's passes by default: the module a backend receives. Layers blocked: a
layer's forward or gradient holding a missing instruction; FLOPs: its convolutions and dots. Exit status: 0
covered, 1 something missing, 2 bad input (one line), before anything is compiled. Three lines:

  printf 'ops: [add, broadcast, constant, convolution, dot, maximum, reduce]\\n' > mybackend.yaml
  resnet-lab coverage mybackend.yaml --mode train   # missing ops, their share, layers blocked
  resnet-lab coverage mybackend.yaml --format json > gap.json"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``resnet-lab coverage``."""
    p.add_argument("support", metavar="SUPPORT.yaml", help="what the backend implements: 'ops: [add, ...]' (see below)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"a model of the zoo (default: {DEFAULT_MODEL})")
    p.add_argument("--mode", default="infer", help=f"one of {', '.join(MODES)} (default: infer)")
    p.add_argument("--stage", default="before", help="before or after XLA's optimization passes (default: before)")
    p.add_argument("--backend", default="tensorflow", help=f"{', '.join(HLO_BACKENDS)} (default: tensorflow)")
    p.add_argument("--ir", default="hlo", help="hlo (default): every instruction with its layer, pass, signature and "
                   "FLOPs; stablehlo: the module a PJRT plugin receives, op by op (named by the HLO opcode each "
                   "becomes; layers from its locations where present; no signatures or FLOPs)")
    p.add_argument("--batch-size", type=int, default=32, help="images per step (default: 32)")
    p.add_argument("--image-size", type=int, default=None, help="square input side (default: the model's)")
    p.add_argument("--precision", default="fp32", help=f"one of {', '.join(PRECISIONS)} (default: fp32)")
    add_format_option(p, FORMATS)


def run(args: argparse.Namespace) -> int:
    """Check everything, read the support file, then capture one step and print what it lacks."""
    check_format(args)
    check_path("SUPPORT.yaml", args.support, "file", optional=False)
    check_choice("--ir", args.ir, IRS)
    if args.ir not in ("hlo", "stablehlo"):
        raise UsageError(f"--ir {args.ir}: coverage reads hlo or stablehlo")
    check_choice("--stage", args.stage, STAGES)
    if args.ir == "stablehlo" and args.stage != "before":
        raise UsageError("--ir stablehlo is the module before XLA's passes: leave --stage before")
    models.get_spec(args.model)
    capture.check_request(args.model, modes=(args.mode,), stages=(args.stage,), batch_size=args.batch_size,
                          image_size=args.image_size, precision=args.precision, backend=args.backend)
    support = load_support(args.support)
    if args.ir == "stablehlo":
        rows = stablehlo_rows(capture.capture_stablehlo_step(
            args.model, args.mode, backend=args.backend, batch_size=args.batch_size, image_size=args.image_size,
            precision=args.precision, locations=True))
    else:
        (cap,) = capture.capture(args.model, modes=(args.mode,), stages=(args.stage,), batch_size=args.batch_size,
                                 image_size=args.image_size, precision=args.precision, backend=args.backend)
        rows = capture.inventory(cap, origins=True)["origins"]
    result = check(rows, support)
    print(format_result({"model": args.model, "mode": args.mode, "stage": args.stage, "backend": args.backend,
                         "ir": args.ir, **result} if args.format == "json" else result, args.format))
    return 0 if result["covered"] else 1
