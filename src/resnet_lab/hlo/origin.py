"""Where each HLO instruction comes from, and what exactly a backend must do for it.

Pure Python over a :class:`~resnet_lab.hlo.parser.Module`. For every instruction of every computation,
:func:`origins` gives its **origin** — the Keras layer it was lowered from and the pass it belongs to
(``forward``, ``gradient`` or ``optimizer``) — and its **signature**: the element types of its operands and
result and the attributes a kernel must honour (a convolution's window, dimension labels and groups; the kind
of a ``reduce`` / ``reduce-window`` / ``select-and-scatter``, i.e. the root opcode of the computation it
applies; a dot's dimension numbers; a compare's direction).

The origin is read from the instruction's ``metadata={... op_name="..."}``, which both front ends keep:

- TensorFlow (tf2xla) writes the TF op's name scope: ``tiny-resnet_1/conv1_conv_1/convolution`` (forward),
  ``gradient_tape/tiny-resnet_1/conv1_conv_1/convolution/Conv2DBackpropFilter`` (gradient),
  ``sgd/Mul`` (the optimizer); TensorFlow uniquifies scopes, so ``conv1_conv_1`` is layer ``conv1_conv``.
- JAX writes the name stack of the traced step (``Lowered.as_text(dialect="hlo", debug_info=True)``):
  ``jit(_train)/jvp(conv1_conv)/conv_general_dilated`` (forward under differentiation),
  ``jit(_train)/transpose(jvp(conv1_conv))/conv_general_dilated`` (its transpose: the gradient),
  ``jit(_train)/sgd/mul`` (the optimizer); inference has no ``jvp``.

A token of the name that is one of the model's layer names (or one plus TensorFlow's ``_N`` suffix) is the
layer. An instruction without metadata inside a called computation (a fusion body, a reducer, a JAX helper
``call``) takes the origin of the instructions that call it; a computation called by several instructions (JAX
shares one ``relu`` body, XLA one fusion body among identical fusions) belongs to all their layers, whatever
``op_name`` its instructions keep (one caller's: :func:`shared_bodies`). What still has no layer keeps the scope
its name starts with (``XLA_Args``, ``SparseSoftmaxCrossEntropyWithLogits``) or :data:`NO_METADATA`: the remainder
is named, never dropped. StableHLO printed with its locations carries the same JAX names
(``loc("jit(_train)/jvp(...)/...")``, read by :func:`resnet_lab.hlo.stablehlo.op_locations`); :func:`classify` reads
them alike.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resnet_lab.ceilings.conv import ConvProblem
from resnet_lab.core.choices import ORIGIN_PASSES
from resnet_lab.hlo import parser

OPTIMIZER_SCOPES = frozenset({"sgd", "SGD", "adam", "adamw", "rmsprop", "momentum", "loss_scale_optimizer"})
NO_METADATA = "(no metadata)"
COMPUTE = ("convolution", "dot")  # the opcodes whose FLOPs are counted (2 x multiply-adds)

_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_TOKEN = re.compile(r"[^/()]+")
_JIT = re.compile(r"jit\([^()]*\)/?")
_INDEX = re.compile(r"(_\d+|\[\d+\])+$")
_TF_SUFFIX = re.compile(r"(.+)_\d+")

# Per opcode, the attributes of its signature beyond the element types (also the constraint keys a support file
# may give it, with "types"). Window fields are parser.WINDOW_FIELDS, XLA's defaults filled in.
WINDOWED = parser.WINDOW_FIELDS
SIGNATURE_KEYS: dict[str, tuple[str, ...]] = {
    "convolution": (*WINDOWED, "dim_labels", "feature_group_count", "batch_group_count"),
    "reduce-window": (*WINDOWED, "reducer"),
    "select-and-scatter": (*WINDOWED, "select", "scatter"),
    "reduce": ("reducer",),
    "scatter": ("reducer",),
    "all-reduce": ("reducer",),
    "dot": parser.DOT_FIELDS[3:],
    "compare": ("direction",),
    "custom-call": ("custom_call_target",),
    "fusion": ("kind",),
}
_APPLIED = {"reducer": "to_apply", "select": "select", "scatter": "scatter"}  # signature key -> attribute


@dataclass(frozen=True)
class Origin:
    """One instruction: where it comes from, its signature, its FLOPs and the convolutions/dots it feeds."""

    name: str
    computation: str
    opcode: str
    layers: tuple[str, ...]  # () = no layer (see scope); several = a computation shared by layers
    pass_: str  # forward | gradient | optimizer | "" (unknown); "a+b" for a computation shared across passes
    scope: str  # where the name starts when no layer is found ("sgd", "XLA_Args", NO_METADATA); "" otherwise
    types: str  # "f32,f32->f32": operand element types -> result element type(s)
    attrs: tuple[tuple[str, str], ...]  # (key, value) of SIGNATURE_KEYS[opcode]
    flops: float  # convolution and dot only: 2 x multiply-adds; 0 otherwise
    feeds: tuple[str, ...] = ()  # nearest convolution/dot users of the same layer and pass (names)

    @property
    def layer(self) -> str:
        """The layer(s) as one string: ``conv1_conv``, ``a|b`` when shared, ``(scope)`` when none."""
        return layer_label({"layers": self.layers, "scope": self.scope})


def op_name(ins: parser.Instruction) -> str:
    """The ``op_name`` of the instruction's metadata ('' where it has none)."""
    m = _OP_NAME.search(ins.attributes.get("metadata", ""))
    return m.group(1) if m else ""


def classify(name: str, layer_names: Iterable[str]) -> tuple[tuple[str, ...], str, str]:
    """``(layers, pass, scope)`` of one ``op_name`` (see the module doc); pass '' where the name says nothing."""
    if not name:
        return (), "", ""
    known = set(layer_names)
    name = _JIT.sub("", name)  # JAX's jit(fn) wrappers name functions, not layers
    tokens = _TOKEN.findall(name) or ["jit"]
    layer = None
    for tok in tokens:
        base = tok if tok in known else (m.group(1) if (m := _TF_SUFFIX.fullmatch(tok)) else None)
        if base in known:
            layer = base  # the innermost layer wins (a nested model's layer over the model)
    if "gradient_tape" in tokens or "transpose(" in name:
        pass_ = "gradient"
    elif _INDEX.sub("", tokens[0]) in OPTIMIZER_SCOPES:  # sgd, or sgd_1 for a second optimizer in one process
        pass_ = "optimizer"
    elif layer is not None or "jvp(" in name:
        pass_ = "forward"
    else:
        pass_ = ""
    scope = "" if layer else _INDEX.sub("", tokens[0])  # AddN_8 -> AddN, state[0][3] -> state
    return ((layer,) if layer else ()), pass_, scope


def _root_kind(module_comps: Mapping[str, parser.Computation], callee: str) -> str:
    comp = module_comps.get(callee.lstrip("%"))
    root = comp.root if comp else None
    if root is None:
        return "?"
    if root.opcode == "compare":
        return f"compare {root.attributes.get('direction', '?')}"
    if root.opcode == "tuple":  # a variadic reducer: the opcodes of the tuple's elements
        ops = {i.name: i.opcode for i in comp.instructions}
        return ",".join(ops.get(o, "?") for o in root.operands)
    return root.opcode


def signature(ins: parser.Instruction, shapes: Mapping[str, parser.Shape],
              comps: Mapping[str, parser.Computation]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``(types, attrs)`` of one instruction (see :class:`Origin`)."""
    def etype(s: parser.Shape | None) -> str:
        if s is None:
            return "?"
        return "(" + ",".join(etype(t) for t in s.tuple_shapes or ()) + ")" if s.is_tuple else str(s.element_type)

    operands = [etype(parser.operand_shape(ins, i, shapes)) for i in range(len(ins.operands))]
    types = ",".join(operands) + "->" + etype(ins.shape)
    keys, a, out = SIGNATURE_KEYS.get(ins.opcode, ()), ins.attributes, []
    window = parser.parse_window(parser.unbrace(a.get("window", ""))) if "size" in keys else {}
    for key in keys:
        if key in window:
            value = window[key]
        elif key in _APPLIED:
            value = _root_kind(comps, a[_APPLIED[key]]) if _APPLIED[key] in a else "?"
        elif key in ("feature_group_count", "batch_group_count"):
            value = a.get(key, "1")
        elif key in parser.DOT_FIELDS:
            value = parser.unbrace(a.get(key, "{}"))
        else:
            value = parser.unquote(a.get(key, ""))
        out.append((key, str(value)))
    return types, tuple(out)


def flops(ins: parser.Instruction, shapes: Mapping[str, parser.Shape]) -> float:
    """2 x multiply-adds of a convolution (:class:`~resnet_lab.ceilings.conv.ConvProblem`) or a dot; 0 otherwise."""
    out = ins.shape
    if ins.opcode not in COMPUTE or out.is_tuple:
        return 0.0
    lhs, rhs = parser.operand_shape(ins, 0, shapes), parser.operand_shape(ins, 1, shapes)
    if lhs is None or rhs is None:
        return 0.0
    if ins.opcode == "dot":
        contracting = parser.unbrace(ins.attributes.get("lhs_contracting_dims", "{}"))
        k = 1
        for d in (int(x) for x in contracting.split(",") if x.strip()):
            k *= lhs.dims[d]
        size = 1
        for d in out.dims:
            size *= d
        return 2.0 * size * k
    return conv_problem(ins, lhs, rhs).flops


def conv_problem(ins: parser.Instruction, lhs: parser.Shape, rhs: parser.Shape) -> ConvProblem:
    """A convolution instruction as one :class:`~resnet_lab.ceilings.conv.ConvProblem` (forward or gradient:
    the batch, features and spatial axes are read from its ``dim_labels``, e.g. ``b01f_01io->b01f``)."""
    labels = ins.attributes.get("dim_labels", "b01f_01io->b01f")
    lhs_l, rest = labels.split("_", 1)
    rhs_l, out_l = rest.split("->")
    out = ins.shape
    groups = int(ins.attributes.get("feature_group_count", "1"))
    spatial = sorted(c for c in out_l if c.isdigit())
    axes = {}
    for name, digit in zip(("d", "h", "w")[3 - len(spatial):], spatial, strict=True):
        axes.update({f"i{name}": lhs.dims[lhs_l.index(digit)], f"o{name}": out.dims[out_l.index(digit)],
                     f"k{name}": rhs.dims[rhs_l.index(digit)]})
    axes.setdefault("iw", 1)
    axes.setdefault("ow", 1)
    axes.setdefault("kw", 1)
    return ConvProblem(mb=out.dims[out_l.index("b")], ic=rhs.dims[rhs_l.index("i")] * groups,
                       oc=out.dims[out_l.index("f")], g=groups, **axes)


def callers(module: parser.Module) -> dict[str, list[tuple[str, str]]]:
    """Every called computation's callers: ``{callee: [(computation, instruction), ...]}``."""
    comps = {c.name for c in module.computations}
    out: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for c in module.computations:
        for ins in c.instructions:
            for _, callee in parser.callees(ins):
                if callee in comps:
                    out[callee].append((c.name, ins.name))
    return out


def shared_bodies(module: parser.Module) -> frozenset[str]:
    """The computations called by more than one instruction: XLA shares one fusion body among identical fusions of
    different layers, JAX one helper (``relu``) among its calls. The one rule for them, 02's origins' and the
    per-layer profiles' (:mod:`resnet_lab.layers.engines.xla`) alike: a shared body computes, for each caller, that
    caller's layers; the ``op_name`` its instructions keep is one caller's (the first, deduplicated), so it names no
    layer by itself."""
    return frozenset(c for c, calls in callers(module).items() if len(calls) > 1)


def origins(module: parser.Module, layer_names: Iterable[str] = ()) -> list[Origin]:
    """One :class:`Origin` per instruction of ``module``, in printed order (see the module doc)."""
    layer_names = frozenset(layer_names)
    comps = {c.name: c for c in module.computations}
    shared = shared_bodies(module)
    own = {}
    for c in module.computations:
        for i in c.instructions:
            layers, pass_, scope = classify(op_name(i), layer_names)
            own[(c.name, i.name)] = ((), pass_, "") if c.name in shared and layers else (layers, pass_, scope)
    callers_ = callers(module)

    resolved: dict[str, tuple[tuple[str, ...], str, str]] = {}  # computation -> inherited origin

    def inherited(comp: str, seen: frozenset[str] = frozenset()) -> tuple[tuple[str, ...], str, str]:
        if comp in resolved:
            return resolved[comp]
        if comp in seen or not callers_.get(comp):
            return (), "", ""
        got = [resolve(c, i, seen | {comp}) for c, i in callers_[comp]]
        layers = tuple(sorted({x for g in got for x in g[0]}))
        passes = "+".join(sorted({g[1] for g in got if g[1]}))
        scopes = sorted({g[2] for g in got if g[2]})
        resolved[comp] = (layers, passes, "" if layers else (scopes[0] if len(scopes) == 1 else "|".join(scopes)))
        return resolved[comp]

    def resolve(comp: str, name: str, seen: frozenset[str] = frozenset()) -> tuple[tuple[str, ...], str, str]:
        layers, pass_, scope = own[(comp, name)]
        if layers or comp == module.entry.name:
            return layers, pass_, scope
        up = inherited(comp, seen)
        if up[0]:
            return up[0], pass_ or up[1], ""
        return (), pass_ or up[1], scope or up[2]

    out: list[Origin] = []
    for c in module.computations:
        shapes = {i.name: i.shape for i in c.instructions}
        users = parser.users(c.instructions)
        rows = {}
        for ins in c.instructions:
            layers, pass_, scope = resolve(c.name, ins.name)
            types, attrs = signature(ins, shapes, comps)
            scope = scope or ("" if layers else NO_METADATA)
            rows[ins.name] = Origin(ins.name, c.name, ins.opcode, layers, pass_, scope, types, attrs,
                                    flops(ins, shapes))
        _attribute_updates(c, rows)
        for ins in c.instructions:
            o = rows[ins.name]
            if ins.opcode not in COMPUTE:
                o = Origin(**{**o.__dict__, "feeds": _feeds(ins, users, rows)})
            out.append(o)
    return out


def _attribute_updates(comp: parser.Computation, rows: dict[str, Origin]) -> None:
    """Optimizer instructions without a layer (``sgd/Mul``) take the layer whose gradient their update reads: the
    connected optimizer instructions of one variable's update and the gradient instructions they read, where those
    belong to exactly one layer."""
    opt = [i for i in comp.instructions if rows[i.name].pass_ == "optimizer" and not rows[i.name].layers]
    parent = {i.name: i.name for i in opt}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i in opt:
        for o in i.operands:
            if o in parent:
                parent[find(o)] = find(i.name)
    read: dict[str, set[str]] = collections.defaultdict(set)
    for i in opt:
        for o in i.operands:
            r = rows.get(o)
            if r is not None and r.pass_ == "gradient" and r.layers:
                read[find(i.name)].update(r.layers)
    for i in opt:
        layers = read.get(find(i.name), set())
        if len(layers) == 1:
            rows[i.name] = dataclasses.replace(rows[i.name], layers=tuple(layers), scope="")


def _feeds(ins: parser.Instruction, users: Mapping[str, list[parser.Instruction]],
           rows: Mapping[str, Origin], max_steps: int = 6) -> tuple[str, ...]:
    """The convolutions/dots that ``ins`` reaches through users of the same layer and pass (a few steps)."""
    me = rows[ins.name]
    if not me.layers:
        return ()
    found, frontier, seen = set(), [ins.name], {ins.name}
    for _ in range(max_steps):
        nxt = []
        for name in frontier:
            for u in users.get(name, ()):
                r = rows[u.name]
                if u.name in seen or r.layers != me.layers or r.pass_ != me.pass_:
                    continue
                seen.add(u.name)
                (found.add if u.opcode in COMPUTE else nxt.append)(u.name)
        frontier = nxt
        if not frontier:
            break
    return tuple(sorted(found))


# ------------------------------------------------------------------------------------------ JSON-ready rows

def aggregate(rows: Iterable[Origin]) -> list[dict[str, Any]]:
    """:func:`origins` as JSON-ready rows, identical instructions merged: ``opcode``, ``types``, ``attrs`` (dict),
    ``layers`` (list), ``pass``, ``scope``, ``feeds`` (list of convolution/dot names), ``name`` (a convolution's
    or dot's own name, '' for the rest), ``count`` and ``flops`` (their sum)."""
    counts: dict[tuple, list[float]] = {}
    for o in rows:
        key = (o.opcode, o.types, o.attrs, o.layers, o.pass_, o.scope, o.feeds, o.name if o.opcode in COMPUTE else "")
        c = counts.setdefault(key, [0, 0.0])
        c[0] += 1
        c[1] += o.flops
    return [{"opcode": k[0], "types": k[1], "attrs": dict(k[2]), "layers": list(k[3]), "pass": k[4], "scope": k[5],
             "feeds": list(k[6]), "name": k[7], "count": n, "flops": f} for k, (n, f) in counts.items()]


def layer_label(row: Mapping[str, Any]) -> str:
    """A row's layer(s) as one string, or its scope in brackets when it has none (the unmapped remainder)."""
    scope = row["scope"] or NO_METADATA
    return "|".join(row["layers"]) if row["layers"] else scope if scope.startswith("(") else f"({scope})"


def signature_label(row: Mapping[str, Any]) -> str:
    """``f32,f32->f32 size=3x3 stride=2x2 ...``: the types and the attributes that differ from XLA's defaults."""
    default = {"stride": "1", "lhs_dilate": "1", "rhs_dilate": "1", "pad": "0", "rhs_reversal": "0",
               "feature_group_count": "1", "batch_group_count": "1"}
    parts = [f"{k}={v}" for k, v in row["attrs"].items()
             if v != "" and not (k in default and set(re.split(r"[x_]", v)) == {default[k]})]
    return " ".join([row["types"], *parts])


def by_opcode(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per opcode and pass: the instructions, the layers that need it (how many, and their names), and the
    instructions no layer accounts for (``unmapped``, with the scopes they come from)."""
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        t = table.setdefault((r["opcode"], r["pass"] or "?"), {"layers": set(), "scopes": set(), "n": 0, "un": 0})
        t["n"] += r["count"]
        if r["layers"]:
            t["layers"].update(r["layers"])
        else:
            t["un"] += r["count"]
            t["scopes"].add(r["scope"])
    order = {p: i for i, p in enumerate((*ORIGIN_PASSES, "?"))}
    return [{"opcode": op, "pass": p, "instructions": t["n"], "layers": len(t["layers"]),
             "layer_names": _short(sorted(t["layers"])), "unmapped": t["un"],
             "unmapped_from": _short(sorted(t["scopes"]), 4)}
            for (op, p), t in sorted(table.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9), kv[0][1]))]


def _short(names: list[str], keep: int = 6) -> str:
    return ", ".join(names) if len(names) <= keep else ", ".join(names[:keep]) + f", … (+{len(names) - keep})"


def signatures(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The distinct signatures (opcode, element types, attributes) with their instruction counts, FLOPs and passes."""
    table: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["opcode"], r["types"], json.dumps(r["attrs"], sort_keys=True))
        t = table.setdefault(key, {"count": 0, "flops": 0.0, "passes": set(), "row": r})
        t["count"] += r["count"]
        t["flops"] += r["flops"]
        t["passes"].add(r["pass"] or "?")
    return [{"opcode": k[0], "signature": signature_label(t["row"]), "count": t["count"], "gflops": t["flops"] / 1e9,
             "passes": ", ".join(sorted(t["passes"]))}
            for k, t in sorted(table.items(), key=lambda kv: (kv[0][0], -kv[1]["count"], kv[0][1:]))]


def mapped_share(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many instructions have a layer, and the scopes of those that do not (with counts)."""
    total = sum(r["count"] for r in rows)
    scopes: collections.Counter[str] = collections.Counter()
    for r in rows:
        if not r["layers"]:
            scopes[r["scope"]] += r["count"]
    unmapped = sum(scopes.values())
    return {"instructions": total, "with_layer": total - unmapped, "unmapped": unmapped,
            "unmapped_scopes": dict(scopes.most_common())}
