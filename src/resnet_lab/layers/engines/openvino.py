"""OpenVINO per layer: ``PERF_COUNT``, each executed node's ``real_time`` of every timed request, one request at a
time whatever the recipe (a profile of one inference); executed nodes keep the name of the export's node they end
with."""

from __future__ import annotations

from typing import Any

from resnet_lab import export
from resnet_lab.layers.engines import base, export_graph
from resnet_lab.steps import engine_step

EXPORT = "onnx"
PROFILER = "OpenVINO's performance counters (PERF_COUNT, per executed node)"


def profile(request: dict[str, Any]) -> dict[str, Any]:
    x = base.engine_inputs(request)
    step_ms, compiler = base.row_step_ms("openvino", x)
    path = x.folder / export.ONNX
    compiled = engine_step.open_openvino(path, {**x.options["config"], "INFERENCE_NUM_THREADS": x.threads,
                                                "PERF_COUNT": True}, x.images.shape)  # the row's, counting
    request_ = compiled.create_infer_request()
    for _ in range(x.warmup):
        request_.infer({0: x.images})
    ms: dict[str, list[float]] = {}
    profiled = []
    for step in range(x.steps):
        profiled += base.timed(lambda: request_.infer({0: x.images}), 1)
        for info in request_.get_profiling_info():
            if str(info.status).endswith("EXECUTED"):
                ms.setdefault(info.node_name, [0.0] * x.steps)[step] += info.real_time.total_seconds() * 1e3
    # a node OpenVINO renamed after its output tensor (the model's ``logits``) is that tensor's producer
    kernels = [{"name": n, "ms": sum(t), "steps_ms": t, "nodes": export_graph.nodes_of(path, n) or [n]}
               for n, t in ms.items()]
    return base.reply(step_ms, profiled, export_graph.with_layers(kernels, path), x.steps, compiler,
                      x.recipe)
