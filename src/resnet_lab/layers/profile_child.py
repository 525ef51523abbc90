"""An engine or a framework profiled in its own process: ``python -m resnet_lab.layers.profile_child``
(:func:`answer`).

The request names the engine, the export folder, the batch, the recipe and the precision (an engine), or the
``BenchConfig`` of the row ``bench`` would time (TensorFlow, native PyTorch): the child builds that row's step as
the bench worker does (:func:`resnet_lab.bench.measure.setup`). It times ``steps`` unprofiled steps first (the
row's step, p50), then the same number with the profiler on, each timed too (the profiler's overhead), and replies
with every kernel's name, its summed milliseconds and the Keras layers it computes:

- ONNX Runtime: ``SessionOptions.enable_profiling``, its JSON's per-node ``*_kernel_time`` events of the runs after
  the warmup; the export's node names (:func:`resnet_lab.layers.names.node_layers`);
- OpenVINO: ``PERF_COUNT``, each executed node's ``real_time`` of every timed request (executed nodes keep the name
  of the export's node they end with);
- TensorFlow: ``tf.profiler``'s trace (XSpace), the executor's op events ``scope/.../Op:OpType``; a fused
  convolution named after the activation or add that ends its pattern is given the layers fused into it
  (:func:`resnet_lab.layers.names.fused_layers`, from the Keras model's graph);
- IREE: the row's module (the export's StableHLO, which keeps every op's name stack as its location) compiled with
  the recipe's flags and IREE's HAL phase dumped; ``iree-benchmark-module`` runs it with
  ``--device_profiling_mode=host-execution`` and ``iree-profile`` lists every dispatch's time and its command
  index; the HAL module's ``hal.command_buffer.dispatch`` ops, in the same order, give each call site's location
  (:func:`iree_call_sites`), hence its Keras layers;
- native PyTorch, eager: ``torch.profiler`` with one ``record_function`` range per module call (forward hooks),
  named after the Keras layer the call computes; each range's time outside its child ranges is its layer's (a
  block's own time is its residual add);
- JAX, ``jax.jit``: ``jax.profiler``'s trace (XSpace), XLA:CPU's thunk events of the step's module (their
  ``hlo_op``), matched to that module's optimized HLO (XLA's own dump of it, asked for by ``XLA_FLAGS`` in this
  process): each instruction's ``op_name`` metadata is the Keras layer's name stack, and a fusion computes the
  layers of every instruction it calls (:func:`xla_kernels`).

A training step's kernels carry their pass (:func:`tf_pass`, :func:`xla_pass`): ``forward``, ``input_grad`` and
``weight_grad`` (a convolution's or the classifier's two gradients, where the engine runs them as two kernels),
``backward`` (the rest of the backward pass), ``layout`` (XLA's fusions of data movement only, a transpose or copy,
whichever layer's op_name they keep), ``other`` (no layer's: the loss, the optimizer's update).
"""

from __future__ import annotations

import functools
import glob
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from resnet_lab import export
from resnet_lab.core import child
from resnet_lab.hlo import origin, parser
from resnet_lab.layers.names import (
    conv_fused_layers,
    fused_layers,
    graph_relus,
    keras_layer,
    kernel_nodes,
    node_layers,
    producers,
    relus_per_block,
    tf_op_layer,
)
from resnet_lab.steps import engine_step, recipes

CHILD = "resnet_lab.layers.profile_child"
OUTSIDE = "(outside any layer)"  # a framework's time in the step but in no layer's range: unattributed
BACKWARD = "autograd::engine::evaluate_function: "  # torch.profiler's event of one backward function


def _timed(call: Callable[[], Any], steps: int) -> list[float]:
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        call()
        times.append(1e3 * (time.perf_counter() - t0))
    return times


def _p50_ms(call: Any, images: Any, steps: int, warmup: int) -> float:
    for _ in range(warmup):
        call(images)
    return statistics.median(_timed(lambda: call(images), steps))


@functools.cache
def _export_graph(path: Path) -> tuple[dict[str, tuple[str, str, list[str]]], frozenset[str]]:
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    return producers(proto), frozenset(n.name for n in proto.graph.node)


def _export_nodes(path: Path, kernel: str) -> list[str]:
    """The export's nodes an engine's kernel computes (:func:`resnet_lab.layers.names.kernel_nodes`)."""
    graph, nodes = _export_graph(path)
    return kernel_nodes(kernel, graph, set(nodes))


def _onnxruntime(path: Path, images: Any, threads: int, opts: dict[str, Any], steps: int,
                 warmup: int) -> tuple[list[dict[str, Any]], list[float]]:
    import onnxruntime as ort

    so = engine_step.ort_session_options(opts, threads)  # the row's session, profiled
    so.enable_profiling = True
    so.profile_file_prefix = str(Path(tempfile.mkdtemp(prefix="resnet-lab-ort-")) / "profile")
    session = ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for _ in range(warmup):
        session.run(None, {name: images})
    profiled = _timed(lambda: session.run(None, {name: images}), steps)
    trace = Path(session.end_profiling())
    events = json.loads(trace.read_text())
    trace.unlink(missing_ok=True)
    runs = sorted(e["ts"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    start = runs[warmup] if len(runs) > warmup else 0
    ms: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and e["ts"] >= start:
            node = e["name"][: -len("_kernel_time")]
            ms[node] = ms.get(node, 0.0) + e["dur"] / 1e3
    kernels = [{"name": n, "ms": t, "nodes": _export_nodes(path, n)} for n, t in ms.items()]
    return kernels, profiled


def _openvino(path: Path, images: Any, threads: int, opts: dict[str, Any], steps: int,
              warmup: int) -> tuple[list[dict[str, Any]], list[float]]:
    import openvino as ov

    core = ov.Core()
    model = core.read_model(str(path))
    model.reshape({model.inputs[0].get_any_name(): list(images.shape)})
    compiled = core.compile_model(model, "CPU", {**opts["config"], "INFERENCE_NUM_THREADS": threads,
                                                 "PERF_COUNT": True})
    request = compiled.create_infer_request()
    for _ in range(warmup):
        request.infer({0: images})
    ms: dict[str, float] = {}
    profiled = []
    for _ in range(steps):
        profiled += _timed(lambda: request.infer({0: images}), 1)
        for info in request.get_profiling_info():
            if str(info.status).endswith("EXECUTED"):
                ms[info.node_name] = ms.get(info.node_name, 0.0) + info.real_time.total_seconds() * 1e3
    # a node OpenVINO renamed after its output tensor (the model's ``logits``) is that tensor's producer
    return [{"name": n, "ms": t, "nodes": _export_nodes(path, n) or [n]} for n, t in ms.items()], profiled


_LOOKUP = re.compile(r"(%[\w.]+) = hal\.executable\.lookup\.function .*?function\(@[\w$.-]+::@[\w$.-]+::@([\w$.-]+)\)")
_CALLEE = re.compile(r"\)\[(%[\w.]+)\]")
_LAYER = re.compile(r'"jit\([^)"]*\)/([^/"]+)/')  # a name stack's first scope under the jitted function: the layer


def iree_call_sites(hal: str) -> list[list[tuple[str, list[str]]]]:
    """Every command buffer a HAL-phase module records, in order: its dispatches as (the dispatch function, the
    Keras layers its location names). Needs locations printed inline (``--mlir-print-local-scope``)."""
    buffers: list[list[tuple[str, list[str]]]] = []
    functions: dict[str, str] = {}
    lines = hal.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "hal.command_buffer.create" in line:
            buffers.append([])
        if m := _LOOKUP.search(line):
            functions[m.group(1)] = m.group(2)
        if "hal.command_buffer.dispatch<" in line and buffers:
            callee = _CALLEE.search(line)
            while "flags(" not in lines[i] and i + 1 < len(lines):  # the op's last line carries its location
                i += 1
            buffers[-1].append((functions.get(callee.group(1), "") if callee else "",
                                list(dict.fromkeys(_LAYER.findall(lines[i])))))
        i += 1
    return buffers


def iree_kernels(commands: list[dict[str, Any]], events: list[dict[str, Any]],
                 buffers: list[list[tuple[str, list[str]]]]) -> tuple[list[dict[str, Any]], int]:
    """(kernels, executions): ``iree-profile``'s dispatch events summed per call site (``key@command index``), each
    with the layers of the matching dispatch op of the HAL module: the command buffer whose dispatch functions, in
    order, are the profile's."""
    ops = [c for c in commands if c.get("type") == "command_operation" and c.get("op") == "dispatch"]
    keys = [c["key"] for c in ops]
    match = next((b for b in buffers if [f for f, _ in b] == keys), None)
    sites = {c["command_index"]: match[k][1] for k, c in enumerate(ops)} if match else {}
    ms: dict[tuple[int, str], float] = {}
    for e in events:
        if e.get("type") == "host_dispatch_event":
            ms[(e["command_index"], e["key"])] = ms.get((e["command_index"], e["key"]), 0.0) + e["duration_ns"] / 1e6
    runs = next((c.get("host_executions", 0) for c in commands if c.get("type") == "command_summary"), 0)
    return [{"name": f"{key}@{index}", "ms": t, "layers": sites.get(index, [])}
            for (index, key), t in ms.items()], runs


def _iree(text: str, images: Any, threads: int, opts: dict[str, Any], steps: int,
          warmup: int) -> tuple[list[dict[str, Any]], list[float], Any, str]:
    import subprocess

    import iree.compiler as ic
    import numpy as np

    where = Path(tempfile.mkdtemp(prefix="resnet-lab-iree-"))
    dumps = ["--mlir-print-debuginfo", "--mlir-print-local-scope", "--mlir-elide-elementsattrs-if-larger=8",
             "--mlir-elide-resource-strings-if-larger=8", f"--dump-compilation-phases-to={where / 'phases'}"]
    vmfb = ic.compile_str(text, input_type="stablehlo", target_backends=["llvm-cpu"],
                          extra_args=[*opts["flags"], *dumps])
    (where / "m.vmfb").write_bytes(vmfb)
    np.save(where / "x.npy", images)
    tools = Path(sys.executable).parent
    bench = subprocess.run([str(tools / "iree-benchmark-module"), f"--device={engine_step.IREE_DEVICE}",
                            f"--module={where / 'm.vmfb'}", "--function=main", f"--input=@{where / 'x.npy'}",
                            f"--benchmark_min_time={steps}x", f"--task_topology_group_count={threads}",
                            "--device_profiling_mode=host-execution",
                            f"--device_profiling_output={where / 'p.ireeprof'}", "--benchmark_format=json"],
                           capture_output=True, text=True, check=True)
    profiled = [b["real_time"] for b in json.loads(bench.stdout)["benchmarks"] if b.get("time_unit") == "ms"]

    def jsonl(mode: str, *extra: str) -> list[dict[str, Any]]:
        out = subprocess.run([str(tools / "iree-profile"), mode, "--format=jsonl", *extra, str(where / "p.ireeprof")],
                             capture_output=True, text=True, check=True).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    hal = next((where / "phases").glob("*.hal.mlir")).read_text()
    kernels, runs = iree_kernels(jsonl("command"), jsonl("dispatch", "--dispatch_events"), iree_call_sites(hal))
    for k in kernels:  # per `steps` executions, as every engine's kernels are
        k["ms"] *= steps / max(1, runs)
    import shutil

    shutil.rmtree(where, ignore_errors=True)
    return kernels, profiled, vmfb, f"{runs} executions in iree-benchmark-module"


def engine_profile(request: dict[str, Any]) -> dict[str, Any]:
    """An engine's inference on the export's reference batch, as its recipe says."""
    import numpy as np

    engine, folder, batch = request["engine"], Path(request["folder"]), request["batch_size"]
    steps, warmup = request["steps"], request["warmup"]
    ref = np.load(folder / export.reference_file(batch))
    images = np.ascontiguousarray(ref["images"] if engine == "iree" else export.onnx_input(ref["images"]))
    threads = engine_step.threads(request.get("threads"))
    recipe = recipes.resolve(engine, request.get("recipe", ""), batch)
    opts = recipes.options(engine, recipe.name, request.get("precision", "fp32"))
    if engine == "openvino":  # one request at a time, whatever the recipe: a profile of one inference
        opts = {**opts, "async": False}
    if engine == "iree":  # the row's module compiled once, its HAL phase dumped: the row's step and its profile
        text = (folder / export.stablehlo_file(batch)).read_text()
        kernels, profiled, vmfb, _ = _iree(text, images, threads, opts, steps, warmup)
        fn = engine_step.iree_function(vmfb, engine_step.module_name(text), threads)
        step_ms = _p50_ms(lambda x: np.asarray(fn(x)), images, steps, warmup)
        facts = {"compiler": f"IREE llvm-cpu ({' '.join(opts['flags'])}), {engine_step.IREE_DEVICE} device, "
                             f"{threads} worker threads"}
    else:
        step, facts = engine_step.make_engine_step(engine, folder, images, threads, recipe=recipe.name,
                                                   precision=request.get("precision", "fp32"))
        step_ms = _p50_ms(step.call, images, steps, warmup)
        run = {"onnxruntime": _onnxruntime, "openvino": _openvino}[engine]
        kernels, profiled = run(folder / export.ONNX, images, threads, opts, steps, warmup)
    relus = graph_relus(_export_graph(folder / export.ONNX)[1]) if engine != "iree" else 3
    for k in kernels:  # the export's nodes each kernel computes (OpenVINO names executed nodes after them)
        if "layers" not in k:
            k["layers"] = list(dict.fromkeys(x for node in k.get("nodes", [k["name"]]) for x in
                                             node_layers(node, relus)))
    return {"step_ms": step_ms, "profiled_step_ms": statistics.median(profiled), "kernels": kernels,
            "steps": steps, "compiler": facts["compiler"], "recipe": recipe.name}


def keras_graph(model: Any) -> dict[str, tuple[str, list[str]]]:
    """``{layer: (class name, inbound layers)}`` of a functional Keras model."""
    return {layer.name: (type(layer).__name__, [p.operation.name for node in layer._inbound_nodes
                                                for p in node.parent_nodes]) for layer in model.layers}


_TF_OP = re.compile(r"^([^:\s]+/[^:\s]+):(\w+)$")  # an executor's op event: node name, op type


def tf_kernels(events: list[tuple[str, float]], graph: dict[str, tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """TensorFlow's op events (``(name, ms)``, summed over the profiled steps) as kernels with their layers."""
    ms: dict[tuple[str, str], float] = {}
    for name, t in events:
        if m := _TF_OP.match(name):
            ms[(m.group(1), m.group(2))] = ms.get((m.group(1), m.group(2)), 0.0) + t
    known = frozenset(graph)
    # the layers a convolution or matmul is named after: each computed there and fused into no other kernel
    direct = {layer for node, op in ms if any(k in op for k in ("Conv", "MatMul")) and
              (layer := tf_op_layer(node, known))}
    out = []
    for (node, op), t in ms.items():
        layer = tf_op_layer(node, known)
        out.append({"name": f"{node}:{op}", "ms": t, "layers": fused_layers(layer, op, graph, direct) if layer else [],
                    "pass": tf_pass(node, op, layer)})
    return out


def tf_pass(node: str, op: str, layer: str | None) -> str:
    """A TensorFlow kernel's pass in a training step (see the module's docstring): the tape's gradient ops are
    under ``gradient_tape/``; ``Conv2DBackpropFilter`` is a convolution's weight gradient, ``Conv2DBackpropInput``
    its input gradient."""
    if "BackpropFilter" in op:
        return "weight_grad"
    if "BackpropInput" in op:
        return "input_grad"
    if node.startswith("gradient_tape/") or "/gradient_tape/" in node:
        return "backward"
    return "forward" if layer else "other"


def _xspace(logdir: str) -> Any:
    """The XSpace protobuf a profiler (TensorFlow's, JAX's) wrote under ``logdir``."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0]).read_bytes())
    return space


def _xspace_events(logdir: str) -> list[tuple[str, float]]:
    """Every event of the host plane of the trace ``tf.profiler`` wrote under ``logdir``: (name, ms)."""
    out = []
    for plane in _xspace(logdir).planes:
        meta = plane.event_metadata
        out += [(meta[e.metadata_id].name, e.duration_ps / 1e9) for line in plane.lines for e in line.events]
    return out


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
    users: dict[str, list[str]] = {}
    for ins in entry:
        for o in ins.operands:
            users.setdefault(o, []).append(ins.name)
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


def _gradient_convs(layer: str, weights: dict[str, int]) -> list[str]:
    """The convolutions whose weight gradient reads the gradient at ``layer``'s output: a batch norm's or ReLU's
    convolution; at a block's add or output, its last main-path convolution and its projection shortcut."""
    if re.search(r"_(bn|relu)$", layer):
        return [re.sub(r"_(bn|relu)$", "_conv", layer)]
    if m := re.match(r"^(.*_block\d+)_(out|add)$", layer):
        main = sorted(k for k in weights if re.fullmatch(rf"{re.escape(m.group(1))}_[1-9]_conv", k))
        return [*main[-1:], f"{m.group(1)}_0_conv"]
    return [layer] if layer.endswith("_conv") else []


def xla_kernels(events: list[tuple[str, float]], hlo: str, known: frozenset[str],
                weights: dict[str, int] | None = None, frontend: str = "jax") -> list[dict[str, Any]]:
    """XLA's thunk events (``(hlo_op, ms)``) as kernels of the optimized module ``hlo`` (:func:`resnet_lab.hlo.
    parser.parse`): each instruction's layers are those of its own ``op_name`` (or, where XLA's rewrites left it
    none, its neighbours': ``unnamed``) and, where it computes a convolution or a dot, of every instruction of the
    computations it alone calls (a fusion's; not a constant's or broadcast's, which XLA shares), its own first; its
    pass (:func:`xla_pass`; TensorFlow's front end: :func:`tf_pass` of the op_name, a graph node's name) is its own
    op_name's, its opcode a fusion's convolution or dot where it calls one."""
    module = parser.parse(hlo, opcodes=False)
    instructions = {i.name: i for i in module.instructions()}
    bodies = {c.name: c.instructions for c in module.computations}
    users: dict[str, list[str]] = {}
    for ins in instructions.values():
        for operand in ins.operands:
            users.setdefault(operand, []).append(ins.name)
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
        of a layer named nearby (:func:`_gradient_convs`), backward op_names first (the gradient it reads), else the
        nearest layer's."""
        around = [n for n in nearby(op) if xla_layer(n, known)]
        if heavy and training:  # the output gradient's op_name (the batch norm's backward) before the input's
            for n in sorted(around, key=lambda n: origin.classify(n, ())[1] != "gradient"):
                for conv in _gradient_convs(xla_layer(n, known) or "", weights or {}):
                    if weights and weights.get(conv) == elements:
                        return f"transpose(jvp({conv}))/conv_general_dilated", "weight_grad"
        return (around[0] if around else ""), None

    callers: dict[str, int] = {}
    for ins in instructions.values():
        for _, c in parser.callees(ins):
            callers[c] = callers.get(c, 0) + 1

    @functools.cache
    def inside(computation: str) -> tuple[tuple[str, ...], str]:
        """The op_names a computation's instructions (and theirs) carry, and its convolution or dot if any; none
        where several instructions call it (XLA shares one body among identical fusions of different layers: its
        op_names are one layer's)."""
        names: list[str] = []
        heavy = ""
        shared = callers.get(computation, 0) > 1
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
        if frontend == "tensorflow":
            kind = forced or tf_pass(op_name, op_name.rsplit("/", 1)[-1], own or (layers[0] if layers else None))
        else:
            kind = forced or xla_pass(op_name, opcode, elements, own or (layers[0] if layers else None), weights or {})
        if layers and opcode not in origin.COMPUTE and _LAYOUT.match(op):
            kind = "layout"
        out.append({"name": op, "ms": t, "layers": layers, "pass": kind})
    return out


def _kernel_sizes(model: Any) -> dict[str, int]:
    """Each Keras layer's kernel element count (how a weight gradient is told from an input gradient)."""
    return {layer.name: math.prod(layer.kernel.shape) for layer in model.layers if hasattr(layer, "kernel")}


def _tensorflow(s: dict[str, Any], steps: int) -> tuple[list[dict[str, Any]], list[float], str]:
    import tensorflow as tf

    logdir = tempfile.mkdtemp(prefix="resnet-lab-tf-")
    tf.profiler.experimental.start(logdir)
    profiled = _timed(lambda: s["sync"](s["step"]()), steps)
    tf.profiler.experimental.stop()
    if s["xla_dump"]:  # jit_compile=True: one XLA module, its thunks named by the optimized HLO
        space = _xspace(logdir)
        modules = {}
        for f in Path(s["xla_dump"]).glob("*after_optimizations.txt"):
            text = f.read_text()
            if m := re.match(r"HloModule (\S+?),?\s", text):
                modules[m.group(1)] = text
        timed = {m: sum(t for _, t in xla_op_events(space, m)) for m in modules}
        module = max(timed, key=timed.get) if timed else ""
        if not module or not timed[module]:
            raise RuntimeError(f"no XLA module of the step in the trace (dumped: {len(modules)})")
        events = xla_async_events(xla_op_spans(space, module), modules[module])
        kernels = xla_kernels(events, modules[module], frozenset(x.name for x in s["model"].layers),
                              _kernel_sizes(s["model"]), frontend="tensorflow")
        return kernels, profiled, "tf.profiler's trace (XLA:CPU's thunk events of the jit_compile module, its " \
            "op_names; an asynchronous convolution's work: until the first thunk reading it starts)"
    kernels = tf_kernels(_xspace_events(logdir), keras_graph(s["model"]))
    return kernels, profiled, "tf.profiler's trace (the executor's op events)"


def _torch_profiled(s: dict[str, Any], steps: int, before_step: Callable[[], Any] = lambda: None,
                    ) -> tuple[Any, list[float]]:
    """``steps`` steps under ``torch.profiler`` (CPU activity), each timed: (the profiler, the steps' ms). The
    profiler's own first steps are slow (its start): two warm steps are recorded and dropped."""
    import torch

    warm = 2
    schedule = torch.profiler.schedule(wait=0, warmup=warm, active=steps, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule) as prof:
        profiled = []
        for _ in range(warm + steps):
            before_step()
            profiled += _timed(lambda: s["sync"](s["step"]()), 1)
            prof.step()
    return prof, profiled[warm:]


def _torch(s: dict[str, Any], steps: int) -> tuple[list[dict[str, Any]], list[float], str]:
    import torch

    model = s["model"]
    stack: list[Any] = []
    calls: dict[str, int] = {}
    relus = relus_per_block([name for name, _ in model.named_modules()])

    def enter(name: str) -> Callable[..., None]:
        def hook(module: Any, args: Any) -> None:
            call = calls.get(name, 0)
            calls[name] = call + 1
            layer = keras_layer(name, call, relus) if name else OUTSIDE
            stack.append(torch.profiler.record_function(f"layer:{layer or OUTSIDE}"))
            stack[-1].__enter__()
        return hook

    def leave(module: Any, args: Any, out: Any) -> None:
        stack.pop().__exit__(None, None, None)

    handles = [h for name, m in model.named_modules()
               for h in (m.register_forward_pre_hook(enter(name)), m.register_forward_hook(leave))]
    prof, profiled = _torch_profiled(s, steps, before_step=calls.clear)
    for h in handles:
        h.remove()
    ms: dict[tuple[str, str], float] = {}
    kernels: dict[tuple[str, str], set[str]] = {}
    events = prof.events()
    for e in events:
        if not e.name.startswith("layer:"):
            continue
        ranges = [c for c in e.cpu_children if c.name.startswith("layer:")]
        own = (e.cpu_time_total - sum(c.cpu_time_total for c in ranges)) / 1e3
        key = (e.name[len("layer:"):], "forward")
        ms[key] = ms.get(key, 0.0) + own
        kernels.setdefault(key, set()).update(c.name for c in e.cpu_children if not c.name.startswith("layer:"))
    # a training step's backward: autograd runs each forward op's backward function, which carries that op's
    # sequence number; the forward op's enclosing range names the layer (one kernel for both gradients here)
    layer_of = {}
    for e in events:
        if e.name.startswith("layer:") or getattr(e, "sequence_nr", -1) < 0:
            continue
        up = e.cpu_parent
        while up is not None and not up.name.startswith("layer:"):
            up = up.cpu_parent
        if up is not None:
            layer_of.setdefault(e.sequence_nr, up.name[len("layer:"):])
    for e in events:
        if e.name.startswith(BACKWARD):
            key = (layer_of.get(e.sequence_nr, OUTSIDE), "backward")
            ms[key] = ms.get(key, 0.0) + e.cpu_time_total / 1e3
            kernels.setdefault(key, set()).add(e.name[len(BACKWARD):])
    out = [{"name": "+".join(sorted(kernels[key])) or key[0], "ms": t, "pass": kind if key[0] != OUTSIDE else "other",
            "layers": [] if key[0] == OUTSIDE else [key[0]]} for key, t in ms.items() for kind in [key[1]]]
    return out, profiled, "torch.profiler, one range per module call (forward hooks; backward by autograd's " \
        "sequence numbers), eager"


# --------------------------------------------------------------------------- native PyTorch compiled (Inductor)

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
    its post-grad nodes' modules (:func:`resnet_lab.layers.names.keras_layer`; a module called several times, the
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


def _torch_compiled(s: dict[str, Any], steps: int) -> tuple[list[dict[str, Any]], list[float], str]:

    prof, profiled = _torch_profiled(s, steps)
    calls = [[(c.name, c.cpu_time_total / 1e3) for c in sorted(e.cpu_children, key=lambda c: c.time_range.start)]
             for e in prof.events() if e.name.startswith("## Call CompiledFxGraph")]
    relus = relus_per_block([name for name, _ in s["model"].named_modules()])
    kernels = inductor_kernels(calls, inductor_layers(s["inductor"]["graphs"], relus))
    return kernels, profiled, "torch.profiler over TorchInductor's kernels (each generated C++ kernel a profiler " \
        "range), mapped to modules by Inductor's provenance tracking (kernel to post-grad nodes, nodes to their " \
        "nn_module_stack)"



def _jax(s: dict[str, Any], steps: int) -> tuple[list[dict[str, Any]], list[float], str]:
    import jax

    logdir = tempfile.mkdtemp(prefix="resnet-lab-jax-")
    jax.profiler.start_trace(logdir)
    profiled = _timed(lambda: s["sync"](s["step"]()), steps)
    jax.profiler.stop_trace()
    module = f"jit_{s['step'].fn.__name__}"  # jit__infer, jit__train
    dumped = sorted(Path(s["xla_dump"]).glob(f"*.{module}.*after_optimizations.txt"))
    if not dumped:
        raise RuntimeError(f"XLA dumped no optimized module {module} under {s['xla_dump']}")
    model = s["model"]
    kernels = xla_kernels(xla_op_events(_xspace(logdir), module), dumped[-1].read_text(),
                          frozenset(x.name for x in model.layers), _kernel_sizes(model))
    return kernels, profiled, "jax.profiler's trace (XLA:CPU's thunk events, the optimized HLO's op_name metadata)"


def framework_profile(request: dict[str, Any]) -> dict[str, Any]:
    """The row ``bench`` would time for ``request["config"]`` (a ``BenchConfig`` as a dict), profiled."""
    from resnet_lab.bench import measure
    from resnet_lab.bench.config import BenchConfig

    cfg = BenchConfig.from_dict(request["config"])
    steps, warmup = request["steps"], request["warmup"]
    under_xla = cfg.backend == "jax" or (cfg.backend, cfg.xla) == ("tensorflow", "jit")
    dump = tempfile.mkdtemp(prefix="resnet-lab-xla-") if under_xla else ""
    if dump:  # read when XLA's CPU client starts (in setup): every module as text, the step's picked by its name
        os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), f"--xla_dump_to={dump}",
                                            "--xla_dump_hlo_as_text"])
    compiled = cfg.backend == "torch" and cfg.xla == "jit"
    hooks = inductor_hooks() if compiled else {}  # before anything compiles (the step compiles at its first call)
    s = {**measure.setup(cfg), "xla_dump": dump, "inductor": hooks}
    if "skip" in s:
        raise RuntimeError(s["skip"])
    for _ in range(1 + warmup):
        s["sync"](s["step"]())
    step_ms = statistics.median(_timed(lambda: s["sync"](s["step"]()), steps))
    run = {"tensorflow": _tensorflow, "torch": _torch_compiled if compiled else _torch, "jax": _jax}[cfg.backend]
    kernels, profiled, method = run(s, steps)
    return {"step_ms": step_ms, "profiled_step_ms": statistics.median(profiled), "kernels": kernels, "steps": steps,
            "compiler": method, "recipe": ""}


def profile(request: dict[str, Any]) -> dict[str, Any]:
    return framework_profile(request) if "config" in request else engine_profile(request)


def answer(request: dict[str, Any]) -> dict[str, Any]:
    return profile(request)


def main(argv: list[str] | None = None) -> int:
    return child.serve(CHILD, answer, argv)


if __name__ == "__main__":
    sys.exit(main())
