"""An engine profiled in its own process: ``python -m resnet_lab.layers.profile_child`` (:func:`answer`).

The request names the engine, the export folder, the batch, the recipe and the precision. The child times
``steps`` unprofiled steps first (the row's step, p50), then the same number with the engine's own profiler on
(ONNX Runtime: ``SessionOptions.enable_profiling``, its JSON's per-node ``*_kernel_time`` events of the runs after
the warmup; OpenVINO: ``PERF_COUNT``, each executed node's ``real_time`` of every timed request), and replies with
every kernel's name, its summed milliseconds and the Keras layers its node computes
(:func:`resnet_lab.layers.names.node_layers`).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.core import child
from resnet_lab.layers.names import kernel_nodes, node_layers, producers
from resnet_lab.steps import engine_step, recipes

CHILD = "resnet_lab.layers.profile_child"


def _p50_ms(call: Any, images: Any, steps: int, warmup: int) -> float:
    for _ in range(warmup):
        call(images)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        call(images)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _onnxruntime(path: Path, images: Any, threads: int, opts: dict[str, Any], steps: int,
                 warmup: int) -> list[dict[str, Any]]:
    import onnxruntime as ort

    so = engine_step.ort_session_options(opts, threads)  # the row's session, profiled
    so.enable_profiling = True
    so.profile_file_prefix = str(Path(tempfile.mkdtemp(prefix="resnet-lab-ort-")) / "profile")
    session = ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for _ in range(warmup + steps):
        session.run(None, {name: images})
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
    return [{"name": n, "ms": t, "nodes": kernel_nodes(n, graph, nodes)} for n, t in ms.items()]


def _openvino(path: Path, images: Any, threads: int, opts: dict[str, Any], steps: int,
              warmup: int) -> list[dict[str, Any]]:
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
    for _ in range(steps):
        request.infer({0: images})
        for info in request.get_profiling_info():
            if str(info.status).endswith("EXECUTED"):
                ms[info.node_name] = ms.get(info.node_name, 0.0) + info.real_time.total_seconds() * 1e3
    return [{"name": n, "ms": t} for n, t in ms.items()]


def profile(request: dict[str, Any]) -> dict[str, Any]:
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
    kernels = run(folder / export.ONNX, images, threads, opts, steps, warmup)
    for k in kernels:  # the export's nodes each kernel computes (OpenVINO names executed nodes after them)
        k["layers"] = list(dict.fromkeys(x for node in k.get("nodes", [k["name"]]) for x in node_layers(node)))
    return {"step_ms": step_ms, "kernels": kernels, "steps": steps, "compiler": facts["compiler"],
            "recipe": recipe.name}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    return profile(request)


def main(argv: list[str] | None = None) -> int:
    return child.serve(CHILD, answer, argv)


if __name__ == "__main__":
    sys.exit(main())
