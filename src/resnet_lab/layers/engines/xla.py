"""XLA:CPU's thunk events and the optimized HLO, as TensorFlow under XLA and JAX both profile a step: a profiler's
trace (XSpace) names each thunk's ``hlo_op`` and ``hlo_module``; the module XLA dumps (``--xla_dump_to``) gives each
instruction's ``op_name`` metadata (the Keras layer's name stack; a graph node's name under TensorFlow), and a fusion
computes the layers of every instruction it calls (:func:`xla_kernels`). A kernel's pass is read from its op_name by
02's rule (:func:`xla_pass`) unless the caller names another (``pass_of``)."""

from __future__ import annotations

import functools
import glob
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resnet_lab.hlo import origin, parser
from resnet_lab.models.names import gradient_convs

# (op_name, opcode, result elements, layer, the layers' kernel sizes) -> the kernel's pass
PassOf = Callable[[str, str, int, "str | None", dict[str, int]], str]


def xspace(logdir: str) -> Any:
    """The XSpace protobuf a profiler (TensorFlow's, JAX's) wrote under ``logdir``."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0]).read_bytes())
    return space


def xla_op_spans(space: Any, module: str) -> list[tuple[str, int, int]]:
    """XLA:CPU's thunk events of the HLO module ``module`` in an XSpace: (``hlo_op``, start ps, duration ps)."""
    out = []
    for plane in space.planes:
        stat = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for e in line.events:
                tags = {stat.get(x.metadata_id): x.str_value or (stat.get(x.ref_value) if x.ref_value else "")
                        for x in e.stats}
                if tags.get("hlo_module") == module and tags.get("hlo_op"):
                    out.append((tags["hlo_op"], line.timestamp_ns * 1000 + e.offset_ps, e.duration_ps))
    return out


def xla_op_events(space: Any, module: str) -> list[tuple[str, float]]:
    """XLA:CPU's thunk events of the HLO module ``module`` in an XSpace: (``hlo_op``, ms)."""
    return [(op, duration / 1e9) for op, _, duration in xla_op_spans(space, module)]


def xla_async_events(spans: list[tuple[str, int, int]], hlo: str, opcodes: tuple[str, ...] = ("convolution",),
                     ) -> list[tuple[str, float]]:
    """XLA:CPU's thunk spans (:func:`xla_op_spans`) as ``(hlo_op, ms)`` where thunks of ``opcodes`` run
    asynchronously: their event ends when the work is handed to the thread pool (under TensorFlow 2.21 a 3×3
    convolution's event is ~0.1 ms of its ~1.3 ms). Such a thunk's work lies between its start and the first start
    of a thunk that reads its result (through instructions that run no thunk: a bitcast); every interval of that
    window in which no other thunk's event runs goes to the asynchronous thunks open then, split by their FLOPs
    (:func:`resnet_lab.hlo.origin.flops`). Every thunk keeps its own event's time too."""
    import bisect

    module = parser.parse(hlo, opcodes=False)
    entry = module.entry.instructions
    shapes = {i.name: i.shape for i in entry}
    opcode = {i.name: i.opcode for i in entry}
    users = {name: [u.name for u in read] for name, read in parser.users(entry).items()}
    timed = {op for op, _, _ in spans}

    @functools.cache
    def readers(op: str) -> tuple[str, ...]:
        out, todo, seen = [], list(users.get(op, [])), set()
        while todo:
            u = todo.pop()
            if u in seen:
                continue
            seen.add(u)
            if u in timed:
                out.append(u)
            else:
                todo += users.get(u, [])
        return tuple(out)

    starts: dict[str, list[int]] = {}
    for op, start, _ in spans:
        starts.setdefault(op, []).append(start)
    for v in starts.values():
        v.sort()
    weight = {i.name: origin.flops(i, shapes) or 1.0 for i in entry if i.opcode in opcodes}
    ms: dict[str, float] = {}
    edges: list[tuple[int, int, int]] = []  # (time, +1 opens / -1 closes, index): events, then async windows
    windows = []
    for op, start, duration in spans:
        ms[op] = ms.get(op, 0.0) + duration / 1e9
        edges += [(start, 1, -1), (start + duration, -1, -1)]
        if opcode.get(op) in opcodes:
            later = [v[i] for r in readers(op) if (v := starts.get(r)) and (i := bisect.bisect_left(v, start)) < len(v)]
            end = max(start + duration, min(later, default=start + duration))
            edges += [(start, 1, len(windows)), (end, -1, len(windows))]
            windows.append(op)
    edges.sort()
    running, open_ = 0, set()
    for (t, delta, k), nxt in zip(edges, [*edges[1:], None], strict=True):
        if k < 0:
            running += delta
        elif delta > 0:
            open_.add(k)
        else:
            open_.discard(k)
        if nxt is not None and nxt[0] > t and running == 0 and open_:
            total = sum(weight.get(windows[w], 1.0) for w in open_)
            for w in open_:
                ms[windows[w]] += (nxt[0] - t) / 1e9 * weight.get(windows[w], 1.0) / total
    return list(ms.items())


# a fusion XLA names after data movement only (transpose_copy_fusion.89): a layout change, whatever op_name it keeps
_LAYOUT = re.compile(r"^(?:(?:transpose|copy|bitcast|reshape)_)*(?:transpose|copy)(?:_fusion)?(?:\.\d+)?$")


def _elements(shape: parser.Shape) -> int:
    """An array's element count (a tuple's first array's: a multi-output fusion's main result)."""
    while shape.tuple_shapes:
        shape = shape.tuple_shapes[0]
    return math.prod(shape.dims)


def xla_layer(op_name: str, known: frozenset[str]) -> str | None:
    """The Keras layer of an XLA instruction's ``op_name`` (``jit(_train)/transpose(jvp(conv1_conv))/conv...``), by
    the rule 02's origins read it with (:func:`resnet_lab.hlo.origin.classify`)."""
    layers, _, _ = origin.classify(op_name, known)
    return layers[0] if layers else None


def xla_pass(op_name: str, opcode: str, elements: int, layer: str | None, weights: dict[str, int]) -> str:
    """A JAX kernel's pass: JAX names the backward pass ``transpose(jvp(layer))`` (02's ``gradient``); of a
    convolution's (or matmul's) two gradients, the one whose result has as many elements as the layer's kernel is its
    weight gradient."""
    if origin.classify(op_name, ())[1] != "gradient":
        return "forward" if layer else "other"
    if opcode in origin.COMPUTE and layer:
        return "weight_grad" if elements == weights.get(layer) else "input_grad"
    return "backward"


def xla_kernels(events: list[tuple[str, float]], hlo: str, known: frozenset[str],
                weights: dict[str, int] | None = None, pass_of: PassOf | None = None) -> list[dict[str, Any]]:
    """XLA's thunk events (``(hlo_op, ms)``) as kernels of the optimized module ``hlo`` (:func:`resnet_lab.hlo.
    parser.parse`): each instruction's layers are those of its own ``op_name`` (or, where XLA's rewrites left it
    none, its neighbours': ``unnamed``) and, where it computes a convolution or a dot, of every instruction of the
    computations it alone calls (a fusion's; not a constant's or broadcast's, which XLA shares), its own first; its
    pass (``pass_of``, the front end's naming; default :func:`xla_pass`, JAX's) is its own op_name's, its opcode a
    fusion's convolution or dot where it calls one."""
    module = parser.parse(hlo, opcodes=False)
    instructions = {i.name: i for i in module.instructions()}
    bodies = {c.name: c.instructions for c in module.computations}
    users = {name: [u.name for u in read] for name, read in parser.users(instructions.values()).items()}
    training = "transpose(" in hlo or "gradient_tape/" in hlo  # a backward pass is in the module

    def name_of(op: str) -> str:
        return origin.op_name(instructions[op]) if op in instructions else ""

    def nearby(op: str, depth: int = 4) -> list[str]:
        """The op_names of the instructions around ``op`` (its users and operands, then theirs), nearest first."""
        seen, frontier, found = {op}, [op], []
        for _ in range(depth):
            step = [y for x in frontier for y in [*users.get(x, []), *getattr(instructions.get(x), "operands", ())]
                    if y not in seen]
            seen.update(step)
            found += [n for y in step if (n := name_of(y))]
            frontier = step
        return found

    def unnamed(op: str, heavy: bool, elements: int) -> tuple[str, str | None]:
        """(op_name, pass) for an instruction XLA's rewrites left without one (the classifier's dot; in a training
        step, a strided convolution's weight gradient rewritten as a window-dilated convolution, a 1x1's as one over
        transposed operands): a weight gradient is the convolution whose result has the element count of the kernel
        of a layer named nearby (:func:`resnet_lab.models.names.gradient_convs`), backward op_names first (the
        gradient it reads), else the
        nearest layer's."""
        around = [n for n in nearby(op) if xla_layer(n, known)]
        if heavy and training:  # the output gradient's op_name (the batch norm's backward) before the input's
            for n in sorted(around, key=lambda n: origin.classify(n, ())[1] != "gradient"):
                for conv in gradient_convs(xla_layer(n, known) or "", weights or {}):
                    if weights and weights.get(conv) == elements:
                        return f"transpose(jvp({conv}))/conv_general_dilated", "weight_grad"
        return (around[0] if around else ""), None

    shared_bodies = origin.shared_bodies(module)

    @functools.cache
    def inside(computation: str) -> tuple[tuple[str, ...], str]:
        """The op_names a computation's instructions (and theirs) carry, and its convolution or dot if any; none
        where several instructions call it (:func:`resnet_lab.hlo.origin.shared_bodies`: it computes each caller's
        own layers)."""
        names: list[str] = []
        heavy = ""
        shared = computation in shared_bodies
        for ins in bodies.get(computation, []):
            if not shared and ins.opcode not in ("constant", "broadcast"):  # CSE'd: the first layer's op_name
                names.append(origin.op_name(ins))
            heavy = heavy or (ins.opcode if ins.opcode in origin.COMPUTE else "")
            for _, c in parser.callees(ins):
                more, h = inside(c)
                names += more
                heavy = heavy or h
        return tuple(names), heavy

    ms: dict[str, float] = {}
    for op, t in events:
        ms[op] = ms.get(op, 0.0) + t
    out = []
    for op, t in ms.items():
        ins = instructions.get(op)
        opcode, op_name = (ins.opcode, origin.op_name(ins)) if ins else ("", "")
        elements = _elements(ins.shape) if ins else 0
        names: list[str] = []
        for _, c in parser.callees(ins) if ins else ():
            more, heavy = inside(c)
            names += more
            opcode = heavy or opcode
        forced = None
        if not op_name:
            op_name, forced = unnamed(op, opcode in origin.COMPUTE, elements)
        own = xla_layer(op_name, known)
        if opcode in origin.COMPUTE or not own:
            layers = list(dict.fromkeys(x for n in [op_name, *names] if (x := xla_layer(n, known))))
        else:  # no convolution or dot in it: its root's layer (a fusion may recompute earlier layers' bias adds)
            layers = [own]
        kind = forced or (pass_of or xla_pass)(op_name, opcode, elements, own or (layers[0] if layers else None),
                                               weights or {})
        if layers and opcode not in origin.COMPUTE and _LAYOUT.match(op):
            kind = "layout"
        out.append({"name": op, "ms": t, "layers": layers, "pass": kind})
    return out


def kernel_sizes(model: Any) -> dict[str, int]:
    """Each Keras layer's kernel element count (how a weight gradient is told from an input gradient)."""
    return {layer.name: math.prod(layer.kernel.shape) for layer in model.layers if hasattr(layer, "kernel")}


