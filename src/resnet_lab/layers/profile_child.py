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
  block's own time is its residual add).
"""

from __future__ import annotations

import functools
import glob
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.core import child
from resnet_lab.layers.names import fused_layers, keras_layer, kernel_nodes, node_layers, producers, tf_op_layer
from resnet_lab.steps import engine_step, recipes

CHILD = "resnet_lab.layers.profile_child"
OUTSIDE = "(outside any layer)"  # a framework's time in the step but in no layer's range: unattributed


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
    for k in kernels:  # the export's nodes each kernel computes (OpenVINO names executed nodes after them)
        if "layers" not in k:
            k["layers"] = list(dict.fromkeys(x for node in k.get("nodes", [k["name"]]) for x in node_layers(node)))
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
        out.append({"name": f"{node}:{op}", "ms": t, "layers": fused_layers(layer, op, graph, direct) if layer else []})
    return out


def _xspace_events(logdir: str) -> list[tuple[str, float]]:
    """Every event of the host plane of the trace ``tf.profiler`` wrote under ``logdir``: (name, ms)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0]).read_bytes())
    out = []
    for plane in space.planes:
        meta = plane.event_metadata
        out += [(meta[e.metadata_id].name, e.duration_ps / 1e9) for line in plane.lines for e in line.events]
    return out


def _tensorflow(s: dict[str, Any], steps: int) -> tuple[list[dict[str, Any]], list[float], str]:
    import tensorflow as tf

    logdir = tempfile.mkdtemp(prefix="resnet-lab-tf-")
    tf.profiler.experimental.start(logdir)
    profiled = _timed(lambda: s["sync"](s["step"]()), steps)
    tf.profiler.experimental.stop()
    kernels = tf_kernels(_xspace_events(logdir), keras_graph(s["model"]))
    return kernels, profiled, "tf.profiler's trace (the executor's op events)"


def _torch(s: dict[str, Any], steps: int) -> tuple[list[dict[str, Any]], list[float], str]:
    import torch

    model = s["model"]
    stack: list[Any] = []
    calls: dict[str, int] = {}

    def enter(name: str) -> Callable[..., None]:
        def hook(module: Any, args: Any) -> None:
            call = calls.get(name, 0)
            calls[name] = call + 1
            layer = keras_layer(name, call) if name else OUTSIDE
            stack.append(torch.profiler.record_function(f"layer:{layer or OUTSIDE}"))
            stack[-1].__enter__()
        return hook

    def leave(module: Any, args: Any, out: Any) -> None:
        stack.pop().__exit__(None, None, None)

    handles = [h for name, m in model.named_modules()
               for h in (m.register_forward_pre_hook(enter(name)), m.register_forward_hook(leave))]
    # the profiler's own first steps are slow (its start): two warm steps recorded and dropped
    warm = 2
    schedule = torch.profiler.schedule(wait=0, warmup=warm, active=steps, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule) as prof:
        profiled = []
        for _ in range(warm + steps):
            calls.clear()
            profiled += _timed(lambda: s["sync"](s["step"]()), 1)
            prof.step()
        profiled = profiled[warm:]
    for h in handles:
        h.remove()
    ms: dict[str, float] = {}
    kernels: dict[str, set[str]] = {}
    for e in prof.events():
        if not e.name.startswith("layer:"):
            continue
        ranges = [c for c in e.cpu_children if c.name.startswith("layer:")]
        own = (e.cpu_time_total - sum(c.cpu_time_total for c in ranges)) / 1e3
        layer = e.name[len("layer:"):]
        ms[layer] = ms.get(layer, 0.0) + own
        kernels.setdefault(layer, set()).update(c.name for c in e.cpu_children if not c.name.startswith("layer:"))
    out = [{"name": "+".join(sorted(kernels[layer])) or layer, "ms": t,
            "layers": [] if layer == OUTSIDE else [layer]} for layer, t in ms.items()]
    return out, profiled, "torch.profiler, one range per module call (forward hooks), eager"


def framework_profile(request: dict[str, Any]) -> dict[str, Any]:
    """The row ``bench`` would time for ``request["config"]`` (a ``BenchConfig`` as a dict), profiled."""
    from resnet_lab.bench import measure
    from resnet_lab.bench.config import BenchConfig

    cfg = BenchConfig.from_dict(request["config"])
    steps, warmup = request["steps"], request["warmup"]
    s = measure.setup(cfg)
    if "skip" in s:
        raise RuntimeError(s["skip"])
    for _ in range(1 + warmup):
        s["sync"](s["step"]())
    step_ms = statistics.median(_timed(lambda: s["sync"](s["step"]()), steps))
    run = {"tensorflow": _tensorflow, "torch": _torch}[cfg.backend]
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
