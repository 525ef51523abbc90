"""StableHLO: the portable OpenXLA op set a PJRT plugin receives, counted twice, independently.

- :func:`count_text` reads the printed module (``jax.jit(step).lower(...).as_text()``) with a small parser of
  MLIR's assembly: every ``%x = dialect.op`` / ``dialect.op`` statement, the ``func`` ops the printer writes
  without their dialect inside a function (``call``, ``return``), and the ops MLIR's pretty printer
  folds into one line (``stablehlo.reduce(...) applies stablehlo.add`` stands for a region holding an
  ``stablehlo.add`` and a ``stablehlo.return``).
- :func:`from_hlo_proto` converts TensorFlow's HLO module to StableHLO (``hlo_to_stablehlo``), so both front
  ends can be read in the portable IR.
- :func:`count_walk` parses the same text with the MLIR Python bindings jaxlib ships and walks every
  operation of the module. The two must agree op by op (tests check it on CIFAR ResNets).

Counts are keyed by the full op name (``stablehlo.convolution``, ``func.call``, ``chlo.erf``); :func:`as_hlo_name`
maps a StableHLO op to the HLO opcode it usually becomes (``stablehlo.reduce_window`` → ``reduce-window``).
"""

from __future__ import annotations

import collections
import re
from typing import Any

# `%0 = stablehlo.add %a, %b`, `%0:2 = "stablehlo.while"(...)`, `stablehlo.return %x`, `func.func public @main(`
_OP = re.compile(r'^\s*(?:%[\w#:.$-]+(?:\s*,\s*%[\w#:.$-]+)*\s*=\s*)?"?([a-z_][\w$]*\.[a-z_][\w.$]*)"?[\s(<{"]')
# the pretty printer's one-line regions: `stablehlo.reduce(%x init: %c) applies stablehlo.add across ...`
_APPLIES = re.compile(r"\bapplies\s+([a-z_]+\.[a-z_][\w.]*)")
_MODULE = re.compile(r"^\s*module\b")
# inside a func.func body the printer drops the `func.` of its own dialect's ops: `%1 = call @relu(%0)`, `return %2`
_BARE = re.compile(r"^\s*(?:%[\w#:.$-]+(?:\s*,\s*%[\w#:.$-]+)*\s*=\s*)?(call|return|call_indirect)\b")
_CONV = re.compile(r"stablehlo\.convolution\((.*?)\)\s.*?:\s*\((tensor<[^>]*>),\s*(tensor<[^>]*>)\)\s*"
                   r"->\s*(tensor<[^>]*>)")
_WINDOW = re.compile(r"window\s*=\s*\{([^}]*)\}")


def count_text(text: str) -> dict[str, int]:
    """Ops per name, read from the printed module (see the module doc)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        if _MODULE.match(line):
            counts["builtin.module"] += 1
            continue
        m = _OP.match(line)
        if not m:
            bare = _BARE.match(line)
            if bare:
                counts["func." + bare.group(1)] += 1
            continue
        counts[m.group(1)] += 1
        for body in _APPLIES.findall(line):  # a folded region: its op and the region's terminator
            counts[body] += 1
            counts[body.split(".")[0] + ".return"] += 1
    return dict(sorted(counts.items()))


_LOC_ALIAS = re.compile(r"^\s*(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_LOC_NAME = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"')
_LOC_REF = re.compile(r"#loc\d*")


def op_locations(text: str) -> dict[tuple[str, str], int]:
    """``{(op, location name): count}`` of a module printed with its locations (``as_text(debug_info=True)``):
    each op statement's trailing ``loc(...)``, its ``#locN`` aliases followed (a ``callsite`` or ``fused`` location:
    the first part that has a name), e.g. ``("stablehlo.convolution", "jit(_train)/jvp(conv1_conv)/conv_general_
    dilated")``. Empty where the module has no locations; an op without a named location has name ''."""
    aliases = {m.group(1): m.group(2) for m in map(_LOC_ALIAS.match, text.splitlines()) if m}
    if not aliases and "loc(" not in text:
        return {}

    def name(body: str, depth: int = 0) -> str:
        m = _LOC_NAME.match(body)
        if m or depth > 32:
            return m.group(1) if m else ""
        for ref in _LOC_REF.findall(body):
            if got := name(aliases.get(ref, ""), depth + 1):
                return got
        return ""

    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in text.splitlines():
        m = _OP.match(line)
        if not m or _LOC_ALIAS.match(line):
            continue
        at = line.rfind("loc(")
        counts[(m.group(1), name(line[at + 4:line.rfind(")")]) if at >= 0 else "")] += 1
    return dict(counts)


def count_walk(text: str) -> dict[str, int]:
    """Ops per name from the MLIR bindings: parse ``text`` in JAX's MLIR context and walk every operation."""
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir

    counts: collections.Counter[str] = collections.Counter()

    def visit(op: Any) -> Any:
        counts[op.operation.name] += 1
        return ir.WalkResult.ADVANCE

    with jax_mlir.make_ir_context():
        ir.Module.parse(text).operation.walk(visit)
    return dict(sorted(counts.items()))


def from_hlo_proto(serialized: bytes) -> str:
    """A serialized ``HloModuleProto`` (TensorFlow's step before XLA's passes) as StableHLO text: converted with
    ``jax.extend.mlir.hlo_to_stablehlo`` (what ``jax2tf.call_tf`` does), then printed, so that TensorFlow's
    front end is read in the portable IR too."""
    import jax.extend.mlir as jax_ext_mlir
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir

    bytecode = jax_ext_mlir.hlo_to_stablehlo(serialized)
    with jax_mlir.make_ir_context():
        return str(ir.Module.parse(bytecode))


def compute_ops(counts: dict[str, int]) -> dict[str, int]:
    """The ops a backend implements: the ``stablehlo.*`` and ``chlo.*`` ones, without module and function
    plumbing (``builtin.module``, ``func.*``) or region terminators (``stablehlo.return``)."""
    return {k: v for k, v in counts.items()
            if k.split(".")[0] in ("stablehlo", "chlo") and k != "stablehlo.return"}


def as_hlo_name(op: str) -> str:
    """The HLO opcode a StableHLO op is named after: ``stablehlo.reduce_window`` → ``reduce-window``. Ops of
    other dialects (``chlo.square``, decomposed into stablehlo ops before HLO exists) keep their full name."""
    if not op.startswith("stablehlo."):
        return op
    name = op.split(".", 1)[-1]
    return {"broadcast_in_dim": "broadcast", "dot_general": "dot"}.get(name, name.replace("_", "-"))


def convolutions(text: str) -> list[dict[str, Any]]:
    """Each distinct ``stablehlo.convolution`` configuration: operand and result types and its window, with
    how often it occurs."""
    seen: collections.Counter[tuple[str, str, str, str]] = collections.Counter()
    for line in text.splitlines():
        m = _CONV.search(line)
        if m:
            w = _WINDOW.search(line)
            seen[(m.group(2), m.group(3), m.group(4), w.group(1).strip() if w else "")] += 1
    return [{"lhs": lhs, "rhs": rhs, "result": out, "window": win, "count": n}
            for (lhs, rhs, out, win), n in sorted(seen.items())]


def inventory(text: str) -> dict[str, Any]:
    """``{"ops": every op by name (text count), "compute_ops": :func:`compute_ops`, "convolutions"}``."""
    ops = count_text(text)
    return {"ops": ops, "compute_ops": compute_ops(ops), "convolutions": convolutions(text)}
