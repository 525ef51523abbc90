"""Native PyTorch per layer under ``torch.compile`` (TorchInductor, 03's served row with freezing):
``torch.profiler`` over Inductor's kernels (each generated C++ kernel a profiler range, :func:`inductor_hooks`),
mapped to modules by Inductor's provenance tracking (kernel to post-grad nodes, nodes to their ``nn_module_stack``:
:func:`inductor_layers`), each profiled call's events zipped to its graph's kernels (:func:`inductor_kernels`)."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from resnet_lab.layers.engines import base, torch_eager
from resnet_lab.layers.engines.torch_eager import profiled
from resnet_lab.layers.names import conv_fused_layers
from resnet_lab.models.names import keras_layer, relus_per_block

EXPORT = None


def row_fields(mode: str) -> dict[str, Any]:
    """Native PyTorch's row (:func:`resnet_lab.layers.engines.torch_eager.row_fields`) compiled: TorchInductor,
    with the served row's freezing."""
    return {**torch_eager.row_fields(mode), "xla": "jit"}


class GraphNode(NamedTuple):
    """A post-grad node of a compiled graph, as :func:`inductor_layers` reads it."""

    path: str  # its module's path as TorchDynamo names it (L['model'].layer1.0.conv1); a backward node's forward op's
    seq: int  # autograd's sequence number of its forward op (-1 where none: inference)
    order: int  # its place in its graph
    backward: bool  # a backward node (it carries its forward op's module)
    op: bool  # an operation (not a placeholder or an attribute)
    conv: str  # "mkldnn": a convolution Inductor fused under freezing, "conv": another convolution, "" otherwise
    source: str  # its first input's node


def inductor_hooks() -> dict[str, Any]:
    """Asks Inductor, before anything compiles, to record which post-grad nodes each kernel computes (its provenance
    tracking) and to wrap every generated C++ kernel in a profiler range; a post-grad pass that changes nothing keeps
    each graph's nodes' module paths (a backward node: its forward op's). Returns the record those fill, one entry a
    compiled graph: its kernels in call order, each with its post-grad nodes, and those nodes (:class:`GraphNode`)."""
    import torch._inductor.config as ic
    import torch._inductor.debug as debug

    ic.cpp.enable_kernel_profile = True
    ic.trace.provenance_tracking_level = 1
    got: dict[str, Any] = {"graphs": [], "nodes": {}, "table": None, "seen": set()}

    def keep_nodes(graph: Any) -> None:
        nodes = {}
        for order, n in enumerate(graph.nodes):
            stack = n.meta.get("nn_module_stack") or n.meta.get("fwd_nn_module_stack")
            target = repr(n.target)
            fused = "fusion_lowering" in target or ("mkldnn" in target and "convolution" in target)
            if stack:
                nodes[n.name] = GraphNode(list(stack.values())[-1][0], n.meta.get("seq_nr", -1), order,
                                          "fwd_nn_module_stack" in n.meta, n.op == "call_function",
                                          "mkldnn" if fused else "conv" if "convolution" in target else "",
                                          str(n.args[0]) if n.args else "")
        got["nodes"] = nodes

    ic.post_grad_custom_post_pass = keep_nodes
    dump = debug.dump_inductor_provenance_info

    def dump_and_keep() -> dict[str, Any]:
        # a graph compiled inside compile_fx's provenance context has a fresh table; one compiled later (autograd's
        # lazy backward, the optimizer's) adds to the module's own: its kernels are the keys not seen before
        table = debug._inductor_triton_kernel_to_post_grad_node_info
        if table is not got["table"]:
            got["table"], got["seen"] = table, set()
        new = {k: list(v) for k, v in table.items() if k not in got["seen"]}
        got["seen"].update(new)
        order = sorted(new, key=lambda k: int(k.rsplit(":", 1)[1]) if k.rsplit(":", 1)[-1].isdigit() else 0)
        got["graphs"].append({"kernels": [(k, new[k]) for k in order], "nodes": got["nodes"]})
        got["nodes"] = {}
        return dump()

    debug.dump_inductor_provenance_info = dump_and_keep
    return got


_MODULE_ROOT = re.compile(r"^L\[[^\]]*\]\.?")  # TorchDynamo's name of the compiled function's local: L['model']


def inductor_kernel_key(name: str) -> str:
    """A kernel's name as Inductor's provenance (``extern_kernels.convolution:3``,
    ``torch.ops.aten.convolution_backward.default:4``, ``cpp_fused_relu_0:2``) and the profiler
    (``aten::convolution``, ``graph_0_cpp_fused_relu_0``) both print it: ``convolution``, ``cpp_fused_relu_0``."""
    name = re.sub(r":\d+$", "", name)
    if m := re.match(r"^torch\.ops\.\w+\.(\w+)\.\w+$", name):  # an op's overload: ``.default``, ``.binary``
        return m.group(1)
    return re.sub(r"^(?:extern_kernels\.|graph_\d+_|\w+::)", "", name)


def inductor_layers(graphs: list[dict[str, Any]], relus: int = 3) -> list[list[tuple[str, list[str], str]]]:
    """Each compiled graph's kernels in call order as ``(key, Keras layers, pass)``: a kernel computes the layers of
    its post-grad nodes' modules (:func:`resnet_lab.models.names.keras_layer`; a module called several times, the
    block's ReLU, by the rank of the node's forward op among that module's calls; ``relus``: a block's ReLUs); a
    convolution fused with its batch norm, ReLU or add (Inductor's mkldnn fusions under freezing keep the last op's
    module) computes those too (:func:`resnet_lab.layers.names.conv_fused_layers`). A graph of mostly backward nodes
    is the backward pass, a graph of no module's nodes (the optimizer's) other.

    Inductor's provenance names a buffer that a later kernel mutates in place (the in-place fused convolution that
    adds a block's shortcut into it) after that later kernel's node: where two kernels name the same node, the
    earlier one is given, in order, the fused nodes no kernel names."""
    calls: dict[str, set[Any]] = {}
    for g in graphs:  # the forward ops of each module, by sequence number (else the node's order in its graph)
        for n in g["nodes"].values():
            if n.op and not n.backward:
                calls.setdefault(n.path, set()).add(n.seq if n.seq >= 0 else n.order)
    ranks = {p: {c: i for i, c in enumerate(sorted(cs))} for p, cs in calls.items()}
    out = []
    for g in graphs:
        nodes = g["nodes"]
        backward = 2 * sum(n.backward for n in nodes.values()) > len(nodes) > 0
        claims = [[n for n in names if n in nodes] for _, names in g["kernels"]]
        named = [n for c in claims for n in c]
        repeated = [i for i, c in enumerate(claims) if len(c) == 1 and named.count(c[0]) > 1 and
                    any(c == later for later in claims[i + 1:])]
        unclaimed = [n for n in sorted(nodes, key=lambda n: nodes[n].order) if nodes[n].conv and n not in named]
        for i, node in zip(repeated, unclaimed, strict=False):
            claims[i] = [node]
        kernels = []
        for (key, _), claim in zip(g["kernels"], claims, strict=True):
            layers: list[str] = []
            for node in claim:
                n = nodes[node]
                module = re.sub(r"\[(\d+)\]", r".\1", _MODULE_ROOT.sub("", n.path))
                layer = keras_layer(module, ranks.get(n.path, {}).get(n.seq if n.seq >= 0 else n.order, 0), relus)
                # a fused convolution named after its block's output computes the block's last convolution, or the
                # projection shortcut's where its input comes from outside the block
                block = n.path.rsplit(".", 1)[0] + "."
                inside = n.source in nodes and nodes[n.source].path.startswith(block)
                fused = conv_fused_layers(layer, relus, projection=not inside) if layer and n.conv == "mkldnn" else \
                    [layer] if layer else []
                layers += [x for x in fused if x not in layers]
            kernels.append((key, layers, ("backward" if backward else "forward") if layers else "other"))
        out.append(kernels)
    return out


def inductor_kernels(calls: list[list[tuple[str, float]]], graphs: list[list[tuple[str, list[str], str]]],
                     ) -> list[dict[str, Any]]:
    """The profiled calls of compiled graphs (each call's child events, ``(name, ms)`` in order) as kernels: each
    call is matched to the graph whose kernels, in order, its events follow most closely (:func:`inductor_kernel_key`),
    its events zipped to those kernels in order; an event no kernel matches (an allocation, a copy) is no layer's."""
    ms: dict[tuple[int, int], float] = {}
    loose: dict[str, float] = {}
    for events in calls:
        keys = [inductor_kernel_key(n) for n, _ in events]
        best, best_hits = None, -1
        for gi, graph in enumerate(graphs):
            hits, i = [], 0
            for ki, (key, _, _) in enumerate(graph):
                while i < len(keys) and keys[i] != inductor_kernel_key(key):
                    i += 1
                if i == len(keys):
                    break
                hits.append((i, ki))
                i += 1
            if len(hits) > best_hits and (len(hits) == len(graph) or not graph):
                best, best_hits, matched = gi, len(hits), dict(hits)
        for i, (name, t) in enumerate(events):
            if best is not None and i in matched:
                ms[(best, matched[i])] = ms.get((best, matched[i]), 0.0) + t
            else:
                loose[name] = loose.get(name, 0.0) + t
    out = [{"name": graphs[g][k][0], "ms": t, "layers": graphs[g][k][1], "pass": graphs[g][k][2]}
           for (g, k), t in ms.items()]
    return out + [{"name": n, "ms": t, "layers": [], "pass": "other"} for n, t in loose.items()]


def profile(request: dict[str, Any]) -> dict[str, Any]:
    hooks = inductor_hooks()  # before anything compiles (the step compiles at its first call)
    s, steps, step_ms = base.framework_setup(request)
    prof, times = profiled(s, steps)
    calls = [[(c.name, c.cpu_time_total / 1e3) for c in sorted(e.cpu_children, key=lambda c: c.time_range.start)]
             for e in prof.events() if e.name.startswith("## Call CompiledFxGraph")]
    relus = relus_per_block([name for name, _ in s["model"].named_modules()])
    kernels = inductor_kernels(calls, inductor_layers(hooks["graphs"], relus))
    return base.reply(step_ms, times, kernels, steps, "torch.profiler over TorchInductor's kernels (each generated "
                      "C++ kernel a profiler range), mapped to modules by Inductor's provenance tracking (kernel to "
                      "post-grad nodes, nodes to their nn_module_stack)")
