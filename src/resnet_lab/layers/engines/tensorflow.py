"""TensorFlow per layer, as bench serves it (a graph, batch norms folded): ``tf.profiler``'s trace (XSpace), the
executor's op events ``scope/.../Op:OpType``; a fused convolution named after the activation or add that ends its
pattern is given the layers fused into it (:func:`resnet_lab.layers.names.fused_layers`, from the Keras model's
graph). A training step's kernel carries its pass (:func:`tf_pass`)."""

from __future__ import annotations

import re
import tempfile
from typing import Any

from resnet_lab.layers.engines import base
from resnet_lab.layers.engines.xla import xspace
from resnet_lab.layers.names import fused_layers, tf_op_layer

EXPORT = None


def row_fields(mode: str) -> dict[str, Any]:
    """The row's BenchConfig fields: inference served as 03 serves it (a graph, batch norms folded,
    :data:`resnet_lab.bench.sections.TF_INFERENCE`); training, 03's training step (the graph, oneDNN)."""
    from resnet_lab.bench.sections import served

    return {"backend": "tensorflow"} if mode == "train" else served("TensorFlow")


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


def _xspace_events(logdir: str) -> list[tuple[str, float]]:
    """Every event of the host plane of the trace ``tf.profiler`` wrote under ``logdir``: (name, ms)."""
    out = []
    for plane in xspace(logdir).planes:
        meta = plane.event_metadata
        out += [(meta[e.metadata_id].name, e.duration_ps / 1e9) for line in plane.lines for e in line.events]
    return out


def trace(s: dict[str, Any], steps: int) -> tuple[str, list[float]]:
    """``steps`` of the row's steps under ``tf.profiler``: (the trace's folder, the steps' ms)."""
    import tensorflow as tf

    logdir = tempfile.mkdtemp(prefix="resnet-lab-tf-")
    tf.profiler.experimental.start(logdir)
    profiled = base.profiled_steps(s, steps)
    tf.profiler.experimental.stop()
    return logdir, profiled


def profile(request: dict[str, Any]) -> dict[str, Any]:
    s, steps, step_ms = base.framework_setup(request)
    logdir, profiled = trace(s, steps)
    kernels = tf_kernels(_xspace_events(logdir), keras_graph(s["model"]))
    return base.reply(step_ms, profiled, kernels, steps, "tf.profiler's trace (the executor's op events)")
