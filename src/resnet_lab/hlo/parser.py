"""HLO text parsed exactly: the opcode of every instruction of every computation, and what kernels need.

Pure Python, no TensorFlow import. :func:`parse` reads the text XLA prints for an ``HloModule`` (what
``experimental_get_compiler_ir(...)(stage="hlo")`` returns and ``--xla_dump_hlo_as_text`` writes) and
:func:`inventory` counts it: opcodes (per computation role: entry, control flow, fused, applied reducers),
fusion kinds, custom-call targets, compare directions, element types, and the distinct convolution and dot
configurations with their counts.

Opcodes are validated against the opcode list of the installed XLA, read from the ``HLO_OPCODE_LIST`` macro
of ``xla/hlo/ir/hlo_opcode.h`` that the TensorFlow wheel ships in ``tensorflow/include`` (the header its
``libtensorflow_cc.so.2`` was compiled from; :func:`opcodes_in_library` checks the library holds every
name). An unknown opcode is an error, never silently counted.

Why not a regex: the 2017 method, ``%[a-z]+`` over dumps (:func:`legacy_regex_ops`), matches instruction
*names*, not opcodes, and stops at the first dash (``get`` for ``get-tuple-element``).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import importlib.util
import json
import mmap
import re
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from resnet_lab.core.text import CLOSE, OPEN, split_top_level

HEADER_RELPATH = "include/xla/hlo/ir/hlo_opcode.h"  # inside the installed `tensorflow` package
LIBRARY_NAME = "libtensorflow_cc.so.2"  # the TensorFlow library that holds XLA
SNAPSHOT = "hlo_opcodes.json"  # packaged copy of the opcode list, used where TensorFlow is not installed

ROLES = ("entry", "control", "fused", "applied")
# Attributes that name called computations, and the role the callee plays. `calls` depends on the caller.
_CALLEE_ROLES = {
    "to_apply": "applied", "select": "applied", "scatter": "applied", "comparator": "applied",
    "body": "control", "condition": "control", "branch_computations": "control",
    "true_computation": "control", "false_computation": "control", "called_computations": "control",
}
_ROLE_PRIORITY = {"fused": 0, "applied": 1, "control": 2, "entry": 3}

_NAME = r"[^\s=(){}\[\],]+"
_INSTRUCTION_START = re.compile(rf"(ROOT\s+)?%?({_NAME})\s*=\s*")
_OPCODE = re.compile(r"([a-z][a-z0-9\-]*)\(")
_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_OPCODE_ENTRY = re.compile(r'V\(\s*(k\w+)\s*,\s*"([^"]+)"\s*,\s*([^)]+?)\s*\)')
_ASYNC_SUGAR = re.compile(r"(.+)-(start|update|done)")
_OP_TYPE = re.compile(r'op_type="([^"]*)"')


class HloParseError(ValueError):
    """The text is not HLO this parser understands, or it holds an opcode the installed XLA does not know."""


# --------------------------------------------------------------------------------------------- opcodes


@dataclass(frozen=True)
class OpcodeTable:
    """The opcodes of one XLA build: name -> arity (None = variadic), and where the list came from."""

    arity: Mapping[str, int | None]
    source: str
    sha256: str

    @property
    def names(self) -> frozenset[str]:
        """The opcode names."""
        return frozenset(self.arity)

    def __contains__(self, opcode: object) -> bool:
        return opcode in self.arity


def parse_opcode_header(text: str) -> dict[str, int | None]:
    """``{opcode name: arity}`` from the ``HLO_OPCODE_LIST(V)`` macro of ``hlo_opcode.h``."""
    start = text.find("#define HLO_OPCODE_LIST")
    if start < 0:
        raise HloParseError("no '#define HLO_OPCODE_LIST' in the opcode header")
    lines = []
    for line in text[start:].splitlines():
        lines.append(line)
        if not line.rstrip().endswith("\\"):
            break
    out: dict[str, int | None] = {}
    for _, name, arity in _OPCODE_ENTRY.findall("\n".join(lines)):
        out[name] = None if arity == "kHloOpcodeIsVariadic" else int(arity)
    if not out:
        raise HloParseError("HLO_OPCODE_LIST in the opcode header has no entries")
    return out


def tensorflow_dir() -> Path | None:
    """The installed ``tensorflow`` package folder, found without importing it."""
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        if (Path(loc) / "__init__.py").exists():
            return Path(loc)
    return None


def installed_opcode_header() -> Path | None:
    """``tensorflow/include/xla/hlo/ir/hlo_opcode.h`` of the installed wheel, if there is one."""
    tf_dir = tensorflow_dir()
    path = tf_dir / HEADER_RELPATH if tf_dir else None
    return path if path and path.is_file() else None


def snapshot_opcodes() -> OpcodeTable:
    """The opcode list packaged with resnet-lab (a copy of the TensorFlow 2.21 wheel's header list)."""
    data = json.loads(resources.files("resnet_lab").joinpath("data", SNAPSHOT).read_text())
    return OpcodeTable(arity=data["opcodes"], source=f"resnet_lab/data/{SNAPSHOT} ({data['source']})",
                       sha256=data["sha256"])


@functools.lru_cache(maxsize=1)
def known_opcodes() -> OpcodeTable:
    """The installed XLA's opcodes (from its header); the packaged snapshot where TensorFlow is absent."""
    header = installed_opcode_header()
    if header is None:
        return snapshot_opcodes()
    raw = header.read_bytes()
    return OpcodeTable(arity=parse_opcode_header(raw.decode()), source=installed_source(header),
                       sha256=hashlib.sha256(raw).hexdigest())


def installed_source(header: Path) -> str:
    """The header's path from its package down (``tensorflow/include/xla/hlo/ir/hlo_opcode.h``): where it is in
    any installation, not where this machine keeps its virtual environment."""
    parts = header.parts
    top = max((i for i, p in enumerate(parts) if p == "tensorflow"), default=len(parts) - 1)
    return "/".join(parts[top:])


def _elf_section(data: mmap.mmap | bytes, wanted: str) -> tuple[int, int] | None:
    """(offset, size) of a section of a little-endian ELF64 file, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        name, = struct.unpack_from("<I", data, shoff + i * shentsize)
        offset, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 0x18)
        return name, offset, size

    _, str_off, _ = header(shstrndx)
    for i in range(shnum):
        name_off, offset, size = header(i)
        end = data.find(b"\0", str_off + name_off)
        if data[str_off + name_off:end].decode() == wanted:
            return offset, size
    return None


def opcodes_in_library(names: Iterable[str], library: str | Path | None = None) -> list[str]:
    """The ``names`` that are *not* NUL-terminated strings in the library's ``.rodata`` (empty = all there).

    An independent check that the header list and the compiled XLA agree: the opcode strings are
    compiled into ``HloOpcodeString``. Reads ~70 MB of ``libtensorflow_cc.so.2`` (about a second).
    """
    if library is None:
        tf_dir = tensorflow_dir()
        if tf_dir is None:
            raise FileNotFoundError("tensorflow is not installed")
        library = tf_dir / LIBRARY_NAME
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        section = _elf_section(mm, ".rodata")
        blob = mm[section[0]:section[0] + section[1]] if section else mm[:]
    tokens = set(re.findall(rb"[a-z0-9-]+(?=\x00)", blob))
    missing = []
    for name in names:
        enc = name.encode()
        # the linker may keep "not" only as the tail of a longer string ("...not\0")
        if enc not in tokens and not any(t.endswith(enc) for t in tokens):
            missing.append(name)
    return missing


# ----------------------------------------------------------------------------------------------- shapes


@dataclass(frozen=True)
class Shape:
    """An HLO shape: an array ``f32[32,224,224,3]{3,2,1,0}`` or a tuple ``(f32[], s32[4])``."""

    element_type: str | None  # "f32", "pred", "token"; None for a tuple
    dims: tuple[int, ...] = ()  # -1 for an unknown dynamic dimension ("?")
    layout: str | None = None  # "{3,2,1,0}" as printed, or None
    tuple_shapes: tuple[Shape, ...] | None = None
    dynamic: tuple[bool, ...] = ()  # per dimension: printed as "<=N" or "?"

    @property
    def is_tuple(self) -> bool:
        """True for a tuple shape."""
        return self.tuple_shapes is not None

    def __str__(self) -> str:  # without layout: what a kernel's interface depends on
        if self.tuple_shapes is not None:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        dims = ",".join(
            "?" if d < 0 else (f"<={d}" if dyn else str(d))
            for d, dyn in zip(self.dims, self.dynamic or (False,) * len(self.dims), strict=True)
        )
        return f"{self.element_type}[{dims}]"


def parse_shape(text: str) -> Shape:
    """Parse one shape; the whole ``text`` must be the shape."""
    shape, rest = _read_shape(text.strip())
    if rest.strip():
        raise HloParseError(f"trailing text after shape: {text!r}")
    return shape


def _read_shape(s: str) -> tuple[Shape, str]:
    """Read a shape at the start of ``s``; return it and the rest of ``s``."""
    if s.startswith("("):
        end = _matching(s, 0)
        inner = s[1:end].strip()
        parts = [parse_shape(p) for p in split_top_level(inner)] if inner else []
        return Shape(None, tuple_shapes=tuple(parts)), s[end + 1:]
    m = _ARRAY_SHAPE.match(s)
    if not m:
        raise HloParseError(f"expected a shape at {s[:60]!r}")
    dims: list[int] = []
    dynamic: list[bool] = []
    for d in (x.strip() for x in m.group(2).split(",") if x.strip()):
        if d == "?":
            dims.append(-1)
            dynamic.append(True)
        elif d.startswith("<="):
            dims.append(int(d[2:]))
            dynamic.append(True)
        else:
            dims.append(int(d))
            dynamic.append(False)
    rest, layout = s[m.end():], None
    if rest.startswith("{"):
        end = _matching(rest, 0)
        layout, rest = rest[:end + 1], rest[end + 1:]
    return Shape(m.group(1), tuple(dims), layout, None, tuple(dynamic) if any(dynamic) else ()), rest


# ---------------------------------------------------------------------------------------- text scanning

_STRING = r'"(?:[^"\\]|\\.)*"'
_BRACKETS_OR_COMMA = re.compile(rf"{_STRING}|[(){{}}\[\],]")
_BRACKETS_OR_SPACE = re.compile(rf"{_STRING}|[(){{}}\[\]]|\s")
_COMMENT = re.compile(rf"({_STRING})|/\*.*?\*/")
_STRINGS = re.compile(_STRING)


def _strip_comments(s: str) -> str:
    """Remove ``/* ... */`` comments (e.g. ``/*index=5*/``) outside strings."""
    return _COMMENT.sub(lambda m: m.group(1) or "", s) if "/*" in s else s


def _depth_delta(s: str) -> int:
    """Net bracket depth change over ``s`` (all of (), {}, []), ignoring strings."""
    if '"' in s:
        s = _STRINGS.sub("", s)
    return sum(s.count(c) for c in OPEN) - sum(s.count(c) for c in CLOSE)


def _matching(s: str, start: int) -> int:
    """Index of the bracket closing the one at ``s[start]``."""
    depth = 0
    for m in _BRACKETS_OR_COMMA.finditer(s, start):
        c = m.group()
        if c in OPEN:
            depth += 1
        elif c in CLOSE:
            depth -= 1
            if depth == 0:
                return m.start()
    raise HloParseError(f"unbalanced brackets in {s[start:start + 80]!r}")


def _last_top_level_space(s: str) -> int:
    """Index of the last whitespace outside brackets and strings, or -1."""
    depth, last = 0, -1
    for m in _BRACKETS_OR_SPACE.finditer(s):
        c = m.group()
        if c in OPEN:
            depth += 1
        elif c in CLOSE:
            depth -= 1
        elif c.isspace() and depth == 0:
            last = m.start()
    return last


def _parse_attributes(s: str) -> dict[str, str]:
    """``key=value, key={...}, key="..."`` -> {key: value as printed}."""
    attrs: dict[str, str] = {}
    for item in split_top_level(s):
        key, eq, value = item.partition("=")
        attrs[key.strip()] = value.strip() if eq else ""
    return attrs


def unquote(value: str) -> str:
    """An attribute value without its quotes and escapes (``"__cudnn$conv"`` -> ``__cudnn$conv``)."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return bytes(value[1:-1], "utf-8").decode("unicode_escape")
    return value


def unbrace(value: str) -> str:
    """An attribute value without its braces (``{0,1}`` -> ``0,1``)."""
    return value[1:-1].strip() if value.startswith("{") and value.endswith("}") else value


# ------------------------------------------------------------------------------------------ the module


@dataclass
class Instruction:
    """One HLO instruction as printed: ``[ROOT] %name = shape opcode(operands), attributes``."""

    name: str
    opcode: str  # validated, canonical (async sugar "custom-call-start" -> "async-start")
    shape: Shape
    operands: tuple[str, ...]
    operand_shapes: tuple[Shape | None, ...]  # shapes printed inline with the operands, if any
    attributes: dict[str, str]
    computation: str
    is_root: bool = False
    literal: str | None = None  # a constant's literal, a parameter's number
    async_wrapped: str | None = None  # the wrapped opcode of async sugar, e.g. "custom-call"
    line: int = 0


@dataclass
class Computation:
    """One computation: its instructions in printed order, and attributes printed after its ``}``."""

    name: str
    is_entry: bool
    instructions: list[Instruction] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)  # after the closing brace

    @property
    def root(self) -> Instruction | None:
        """The ``ROOT`` instruction (None if none is marked)."""
        return next((i for i in self.instructions if i.is_root), None)


@dataclass
class Module:
    """One ``HloModule``: header attributes and computations in printed order (the entry usually last)."""

    name: str
    attributes: dict[str, str]
    computations: list[Computation]

    @property
    def entry(self) -> Computation:
        """The ``ENTRY`` computation (the last one where none is marked)."""
        entries = [c for c in self.computations if c.is_entry]
        if entries:
            return entries[0]
        if not self.computations:
            raise HloParseError(f"module {self.name} has no computations")
        return self.computations[-1]  # XLA prints the entry last

    def instructions(self) -> Iterator[Instruction]:
        """Every instruction of every computation."""
        for c in self.computations:
            yield from c.instructions

    def roles(self) -> dict[str, str]:
        """Computation name -> ``entry`` | ``control`` (while/conditional/call bodies) | ``fused`` (fusion
        bodies) | ``applied`` (reducers, comparators, scatter/select functions), by how it is called."""
        names = {c.name for c in self.computations}
        found: dict[str, str] = {self.entry.name: "entry"}
        for ins in self.instructions():
            for key, callee in callees(ins):
                role = ("fused" if ins.opcode == "fusion" else "control") if key == "calls" else _CALLEE_ROLES[key]
                if callee in names:
                    old = found.get(callee)
                    if old is None or _ROLE_PRIORITY[role] < _ROLE_PRIORITY[old]:
                        found[callee] = role
        for c in self.computations:
            found.setdefault(c.name, "control")  # not called by anything printed: count it as top level
        return found


def users(instructions: Iterable[Instruction]) -> dict[str, list[Instruction]]:
    """``{instruction name: the instructions that read it, in order}`` among ``instructions`` (one computation's, or
    a module's): the operand-to-users map every reader of a dataflow builds from."""
    out: dict[str, list[Instruction]] = collections.defaultdict(list)
    for ins in instructions:
        for o in ins.operands:
            out[o].append(ins)
    return out


def callees(ins: Instruction) -> Iterator[tuple[str, str]]:
    """``(attribute, computation name)`` of every computation ``ins`` calls (``calls``, ``to_apply``, ``body``, ...)."""
    for key, value in ins.attributes.items():
        if key == "calls" or key in _CALLEE_ROLES:
            for callee in re.findall(_NAME, value.replace("%", " ")):
                yield key, callee


def _canonical_opcode(opcode: str, table: OpcodeTable, where: str) -> tuple[str, str | None]:
    if opcode in table:
        return opcode, None
    m = _ASYNC_SUGAR.fullmatch(opcode)
    if m and m.group(1) in table:  # e.g. "custom-call-start" prints async-start wrapping a custom-call
        return f"async-{m.group(2)}", m.group(1)
    raise HloParseError(
        f"unknown HLO opcode {opcode!r} at {where}: not in the installed XLA's list ({table.source})"
    )


def _parse_instruction(stmt: str, computation: str, line: int, table: OpcodeTable | None) -> Instruction:
    m = _INSTRUCTION_START.match(stmt)
    if not m:
        raise HloParseError(f"line {line}: not an instruction: {stmt[:80]!r}")
    is_root, name = bool(m.group(1)), m.group(2)
    shape, rest = _read_shape(stmt[m.end():])
    rest = rest.lstrip()
    om = _OPCODE.match(rest)
    if not om:
        raise HloParseError(f"line {line}: expected 'opcode(' after the shape of {name}: {rest[:60]!r}")
    opcode = om.group(1)
    close = _matching(rest, om.end() - 1)
    inside, after = rest[om.end():close], rest[close + 1:].strip()
    if after and not after.startswith(","):
        raise HloParseError(f"line {line}: unexpected text after the operands of {name}: {after[:60]!r}")
    async_wrapped = None
    if table is not None:
        opcode, async_wrapped = _canonical_opcode(opcode, table, f"line {line} ({name})")
    operands: list[str] = []
    operand_shapes: list[Shape | None] = []
    literal = None
    if opcode in ("constant", "parameter"):
        literal = inside.strip()
    else:
        for item in split_top_level(inside):
            split = _last_top_level_space(item)
            if split < 0:
                operands.append(item.lstrip("%"))
                operand_shapes.append(None)
            else:
                operand_shapes.append(parse_shape(item[:split]))
                operands.append(item[split + 1:].strip().lstrip("%"))
    return Instruction(
        name=name, opcode=opcode, shape=shape, operands=tuple(operands), operand_shapes=tuple(operand_shapes),
        attributes=_parse_attributes(after[1:]) if after else {}, computation=computation,
        is_root=is_root, literal=literal, async_wrapped=async_wrapped, line=line,
    )


# Tables that newer XLA prints between the module header and the first computation (the stack frames
# that instruction metadata points at, e.g. in JAX's compiled text): a name line, numbered rows, a blank.
_DEBUG_TABLES = frozenset({"FileNames", "FunctionNames", "FileLocations", "StackFrames"})


def _statements(text: str) -> Iterator[tuple[int, str]]:
    """Logical statements of a module text: (first line number, text), ``/* */`` comments removed.

    The stack-frame tables (:data:`_DEBUG_TABLES`) are skipped.

    A statement spans lines until its brackets balance, except a computation header, which ends with the
    ``{`` that opens its body. A line starting with ``}`` closes a computation.
    """
    buf: list[str] = []
    depth = start = 0
    in_table = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _strip_comments(raw.strip())
        if not buf:
            if in_table or line in _DEBUG_TABLES:  # a stack-frame table runs to the next blank line
                in_table = bool(line)
                continue
            if not line or line.startswith("//"):
                continue
            start = lineno
        buf.append(line)
        depth += _depth_delta(line)
        if buf[0].startswith("}"):
            if depth <= -1:  # the closing brace of a computation (and maybe its attributes)
                yield start, " ".join(buf)
                buf, depth = [], 0
            continue
        if depth == 0 and not line.endswith(","):  # a trailing comma continues on the next line
            yield start, " ".join(buf)
            buf = []
        elif depth == 1 and line.endswith("{"):
            stmt = " ".join(buf)
            if not _INSTRUCTION_START.match(stmt) and not stmt.startswith("HloModule"):
                yield start, stmt  # a computation header
                buf, depth = [], 0
    if buf:
        raise HloParseError(f"line {start}: statement never closes: {' '.join(buf)[:80]!r}")


def parse(text: str, opcodes: OpcodeTable | bool | None = True) -> Module:
    """Parse the text of one ``HloModule``.

    Args:
        text: HLO module text as XLA prints it.
        opcodes: the table to validate opcodes against; ``True`` (default) = :func:`known_opcodes`,
            ``False``/``None`` = no validation (the async ``x-start`` sugar is then kept as printed).

    Raises:
        HloParseError: malformed text, or an opcode the installed XLA does not have.
    """
    table = known_opcodes() if opcodes is True else (opcodes or None)
    module_name, module_attrs = "", {}
    computations: list[Computation] = []
    current: Computation | None = None
    for line, stmt in _statements(text):
        if stmt.startswith("HloModule"):
            head, _, attrs = stmt[len("HloModule"):].strip().partition(",")
            module_name, module_attrs = head.strip(), _parse_attributes(attrs)
        elif stmt.startswith("}"):
            if current is None:
                raise HloParseError(f"line {line}: '}}' outside a computation")
            current.attributes = _parse_attributes(stmt[1:].lstrip(", "))
            computations.append(current)
            current = None
        elif current is None:  # a computation header: [ENTRY] %name (params) -> shape {
            is_entry = stmt.startswith("ENTRY")
            head = stmt[len("ENTRY"):].lstrip() if is_entry else stmt
            m = re.match(rf"%?({_NAME})", head)
            if not m or not stmt.endswith("{"):
                raise HloParseError(f"line {line}: expected a computation header: {stmt[:80]!r}")
            current = Computation(m.group(1), is_entry)
        else:
            current.instructions.append(_parse_instruction(stmt, current.name, line, table))
    if current is not None:
        raise HloParseError(f"computation {current.name} is not closed")
    if not computations:
        raise HloParseError("no computations found: is this HLO module text?")
    return Module(module_name, module_attrs, computations)


# ------------------------------------------------------------------------------------------- inventory


def operand_shape(ins: Instruction, i: int, shapes: Mapping[str, Shape]) -> Shape | None:
    if i < len(ins.operand_shapes) and ins.operand_shapes[i] is not None:
        return ins.operand_shapes[i]
    return shapes.get(ins.operands[i]) if i < len(ins.operands) else None


def _counted(counter: collections.Counter, key_names: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = [dict(zip(key_names, key, strict=True), count=n) for key, n in counter.items()]
    return sorted(rows, key=lambda r: (-r["count"], [str(r[k]) for k in key_names]))


CONV_FIELDS = ("lhs", "rhs", "result", "window", "dim_labels", "feature_group_count", "batch_group_count")
DOT_FIELDS = ("lhs", "rhs", "result", "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
              "rhs_contracting_dims")


def inventory(module: Module) -> dict[str, Any]:
    """Everything countable about ``module``, as a JSON-ready dict.

    Keys: ``opcodes`` {opcode: count} over all computations; ``opcodes_by_role`` {role: {opcode: count}}
    (see :meth:`Module.roles`); ``num_instructions``, ``num_computations``; ``fusion_kinds`` (custom fusions
    as ``kCustom:<kind>`` from their backend_config); ``custom_call_targets``; ``async_wrapped``;
    ``compare_directions`` {"EQ": n}; ``comparisons`` {"f32 GT": n}; ``element_types`` {opcode: {type: n}};
    ``tf_op_types`` {opcode: {TensorFlow op type from the metadata: n}}, the TF ops each opcode came from;
    ``convolutions`` and ``dots``: the distinct configurations (operand/result shapes without layout,
    window, dim labels, groups; contracting/batch dims) with counts, most frequent first.
    """
    roles = module.roles()
    opcodes: collections.Counter[str] = collections.Counter()
    by_role: dict[str, collections.Counter[str]] = {r: collections.Counter() for r in ROLES}
    fusion_kinds: collections.Counter[str] = collections.Counter()
    targets: collections.Counter[str] = collections.Counter()
    wrapped: collections.Counter[str] = collections.Counter()
    directions: collections.Counter[str] = collections.Counter()
    comparisons: collections.Counter[str] = collections.Counter()
    types: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    tf_ops: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    convs: collections.Counter[tuple] = collections.Counter()
    dots: collections.Counter[tuple] = collections.Counter()
    for comp in module.computations:
        shapes = {i.name: i.shape for i in comp.instructions}
        role = roles[comp.name]
        for ins in comp.instructions:
            opcodes[ins.opcode] += 1
            by_role[role][ins.opcode] += 1
            types[ins.opcode]["tuple" if ins.shape.is_tuple else str(ins.shape.element_type)] += 1
            a = ins.attributes
            if "op_type=" in a.get("metadata", ""):
                m = _OP_TYPE.search(a["metadata"])
                if m:
                    tf_ops[ins.opcode][m.group(1)] += 1
            if ins.async_wrapped:
                wrapped[ins.async_wrapped] += 1
            if ins.opcode == "fusion":
                kind = a.get("kind", "?")
                if kind == "kCustom":
                    m = re.search(r'\\?"kind\\?"\s*:\s*\\?"([^"\\]+)', a.get("backend_config", ""))
                    kind = f"kCustom:{m.group(1)}" if m else kind
                fusion_kinds[kind] += 1
            elif ins.opcode == "custom-call":
                targets[unquote(a.get("custom_call_target", '"?"'))] += 1
            elif ins.opcode == "compare":
                direction = a.get("direction", "?")
                directions[direction] += 1
                lhs = operand_shape(ins, 0, shapes)
                dtype = lhs.element_type if lhs is not None else "?"
                comparisons[f"{dtype} {direction}" + (f" {a['type']}" if "type" in a else "")] += 1
            elif ins.opcode == "convolution":
                convs[(
                    str(operand_shape(ins, 0, shapes)), str(operand_shape(ins, 1, shapes)), str(ins.shape),
                    unbrace(a.get("window", "")), a.get("dim_labels", ""),
                    int(a.get("feature_group_count", 1)), int(a.get("batch_group_count", 1)),
                )] += 1
            elif ins.opcode == "dot":
                dots[(
                    str(operand_shape(ins, 0, shapes)), str(operand_shape(ins, 1, shapes)), str(ins.shape),
                    *(unbrace(a.get(k, "{}")) for k in DOT_FIELDS[3:]),
                )] += 1
    return {
        "module": module.name,
        "num_instructions": sum(opcodes.values()),
        "num_computations": len(module.computations),
        "computations_by_role": dict(sorted(collections.Counter(roles.values()).items())),
        "opcodes": dict(sorted(opcodes.items())),
        "opcodes_by_role": {r: dict(sorted(c.items())) for r, c in by_role.items()},
        "fusion_kinds": dict(sorted(fusion_kinds.items())),
        "custom_call_targets": dict(sorted(targets.items())),
        "async_wrapped": dict(sorted(wrapped.items())),
        "compare_directions": dict(sorted(directions.items())),
        "comparisons": dict(sorted(comparisons.items())),
        "element_types": {op: dict(sorted(c.items())) for op, c in sorted(types.items())},
        "tf_op_types": {op: dict(sorted(c.items())) for op, c in sorted(tf_ops.items())},
        "convolutions": _counted(convs, CONV_FIELDS),
        "dots": _counted(dots, DOT_FIELDS),
    }


WINDOW_FIELDS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")


def parse_window(window: str) -> dict[str, str]:
    """``"size=3x3 stride=2x2 pad=0_1x0_1"`` -> one entry per field of :data:`WINDOW_FIELDS`, XLA's
    defaults filled in (stride and dilations 1, padding 0_0, no reversal), per spatial dimension ``x``-joined."""
    given = dict(item.split("=", 1) for item in window.split() if "=" in item)
    rank = len(given.get("size", "").split("x")) if given.get("size") else 0
    defaults = {"stride": "1", "pad": "0_0", "lhs_dilate": "1", "rhs_dilate": "1", "rhs_reversal": "0"}
    out = {"size": given.get("size", "")}
    for key, default in defaults.items():
        out[key] = given.get(key, "x".join([default] * rank))
    return out


def diff_opcodes(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """How opcode counts go from ``a`` to ``b``: ``added`` / ``removed`` opcodes and ``changed`` counts."""
    return {
        "added": {op: b[op] for op in sorted(set(b) - set(a))},
        "removed": {op: a[op] for op in sorted(set(a) - set(b))},
        "changed": {op: (a[op], b[op]) for op in sorted(set(a) & set(b)) if a[op] != b[op]},
    }


def legacy_regex_ops(text: str) -> set[str]:
    """The 2017 method: every ``%[a-z]+`` match, ``%`` dropped. Finds names, not opcodes (see module doc)."""
    return {m[1:] for m in re.findall(r"%[a-z]+", text)}
