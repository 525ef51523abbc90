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
- native PyTorch, eager: ``torch.profiler`` with one ``record_function`` range per module call (forward hooks),
  named after the Keras layer the call computes; each range's time outside its child ranges is its layer's (a
  block's own time is its residual add).
"""

from __future__ import annotations

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
    import onnx

    graph_proto = onnx.load(str(path), load_external_data=False)
    graph, nodes = producers(graph_proto), {n.name for n in graph_proto.graph.node}
    kernels = [{"name": n, "ms": t, "nodes": kernel_nodes(n, graph, nodes)} for n, t in ms.items()]
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
    return [{"name": n, "ms": t} for n, t in ms.items()], profiled


def engine_profile(request: dict[str, Any]) -> dict[str, Any]:
    """An engine's inference on the export's reference batch, as its recipe says."""
    import numpy as np

    engine, folder, batch = request["engine"], Path(request["folder"]), request["batch_size"]
    steps, warmup = request["steps"], request["warmup"]
    ref = np.load(folder / export.reference_file(batch))
    images = np.ascontiguousarray(export.onnx_input(ref["images"]))
    threads = engine_step.threads(request.get("threads"))
    recipe = recipes.resolve(engine, request.get("recipe", ""), batch)
    opts = recipes.options(engine, recipe.name, request.get("precision", "fp32"))
    if engine == "openvino":  # one request at a time, whatever the recipe: a profile of one inference
        opts = {**opts, "async": False}
    step, facts = engine_step.make_engine_step(engine, folder, images, threads, recipe=recipe.name,
                                               precision=request.get("precision", "fp32"))
    step_ms = _p50_ms(step.call, images, steps, warmup)
    run = {"onnxruntime": _onnxruntime, "openvino": _openvino}[engine]
    kernels, profiled = run(folder / export.ONNX, images, threads, opts, steps, warmup)
    for k in kernels:  # the export's nodes each kernel computes (OpenVINO names executed nodes after them)
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
