"""ONNX Runtime per layer: ``SessionOptions.enable_profiling`` on the row's session, its JSON's per-node
``*_kernel_time`` events of the runs after the warmup; the export's node names give the layers."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.layers.engines import base, export_graph
from resnet_lab.steps import engine_step

EXPORT = "onnx"
PROFILER = "ONNX Runtime's profiler (enable_profiling, per-node kernel time)"


def kernel_steps(events: list[dict[str, Any]], warmup: int) -> dict[str, list[float]]:
    """ONNX Runtime's profile (its JSON events) as ``{node: [ms in each run]}``, the runs after the first ``warmup``
    (a node's kernel events are given to the ``model_run`` that holds them; a run it took no time in counts 0)."""
    runs = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run")[warmup:]
    out: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        at = next((i for i, (start, end) in enumerate(runs) if start <= e["ts"] <= end), None)
        if at is None:
            continue  # a warmup run's kernel
        node = e["name"][: -len("_kernel_time")]
        out.setdefault(node, [0.0] * len(runs))[at] += e["dur"] / 1e3
    return out


def profile(request: dict[str, Any]) -> dict[str, Any]:
    x = base.engine_inputs(request)
    step_ms, compiler = base.row_step_ms("onnxruntime", x)
    path = x.folder / export.ONNX
    so = engine_step.ort_session_options(x.options, x.threads)  # the row's session, profiled
    so.enable_profiling = True
    so.profile_file_prefix = str(Path(tempfile.mkdtemp(prefix="resnet-lab-ort-")) / "profile")
    session = engine_step.open_onnxruntime(path, so)
    name = session.get_inputs()[0].name
    for _ in range(x.warmup):
        session.run(None, {name: x.images})
    profiled = base.timed(lambda: session.run(None, {name: x.images}), x.steps)
    trace = Path(session.end_profiling())
    events = json.loads(trace.read_text())
    trace.unlink(missing_ok=True)
    kernels = [{"name": n, "ms": sum(t), "steps_ms": t, "nodes": export_graph.nodes_of(path, n)}
               for n, t in kernel_steps(events, x.warmup).items()]
    return base.reply(step_ms, profiled, export_graph.with_layers(kernels, path), x.steps, compiler,
                      x.recipe)
