"""ONNX as an IR: the operators of the model exported once for the other compilers (:mod:`resnet_lab.export`).

:func:`inventory` reads ``model.onnx`` with the ``onnx`` package and counts its nodes by op type (``ops``; the
shape arithmetic of the dynamic batch dimension, :data:`SHAPE_OPS` on integer tensors, left out of
``compute_ops``), lists its distinct convolutions with their attributes (kernel, strides, pads, dilations,
group, weight and input shapes from onnx's shape inference), and counts the nodes a second, independent way:
ONNX Runtime's own loader with every optimization off (``ops_runtime``; ``runtime_agrees`` compares every op
type but :data:`LOADER_FOLDS`, which that loader folds away however it is set). A record has the
same keys as the Core ATen and TFLite ones (:mod:`resnet_lab.hlo.capture`), so notebook 02's op × IR table reads
it beside them.
"""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path
from typing import Any

from resnet_lab.steps import engine_step

# Ops that, on int64 tensors, compute the shape of a Reshape from the dynamic batch dimension: no work a
# backend does on the images (a static-shape module has none of them).
SHAPE_OPS = ("Shape", "Gather", "Unsqueeze", "Concat", "Slice", "Squeeze", "Constant", "ConstantOfShape", "Cast",
             "Identity", "Range", "Reshape", "Equal", "Where", "Expand", "Mul", "Add", "Div", "Sub")


# What ONNX Runtime's loader removes even with every optimization off: Constant nodes become initializers, and
# a Cast of a constant is folded into it.
LOADER_FOLDS = ("Constant", "Cast")


def _op(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"


def _int_tensors(model: Any) -> set[str]:
    """Names of the graph's int64/int32 values (onnx shape inference): the shape arithmetic's."""
    import onnx

    ints = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
    inferred = onnx.shape_inference.infer_shapes(model)
    names = {v.name for v in [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]
             if v.type.tensor_type.elem_type in ints}
    names |= {i.name for i in inferred.graph.initializer if i.data_type in ints}
    for node in inferred.graph.node:
        if node.op_type in ("Shape", "Constant") and any(o in names for o in node.output):
            names.update(node.output)
    return names


def _shapes(model: Any) -> dict[str, list[Any]]:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    out = {}
    for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        dims = v.type.tensor_type.shape.dim
        out[v.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
    for i in inferred.graph.initializer:
        out[i.name] = list(i.dims)
    return out


def convolutions(model: Any) -> list[dict[str, Any]]:
    """Distinct ``Conv`` nodes: attributes, weight shape and input shape, with how many times each occurs."""
    import onnx

    shapes = _shapes(model)
    seen: collections.Counter[tuple] = collections.Counter()
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        key = (("input", str(shapes.get(node.input[0]))), ("weight", str(shapes.get(node.input[1]))),
               ("kernel_shape", str(list(attrs.get("kernel_shape", [])))),
               ("strides", str(list(attrs.get("strides", [1, 1])))), ("pads", str(list(attrs.get("pads", [0] * 4)))),
               ("dilations", str(list(attrs.get("dilations", [1, 1])))), ("group", int(attrs.get("group", 1))),
               ("bias", len(node.input) > 2))
        seen[key] += 1
    return [{**dict(k), "count": n} for k, n in seen.items()]


def runtime_ops(path: str | Path) -> dict[str, int] | None:
    """Node counts by op type of the graph as ONNX Runtime loads it (every optimization off, the graph it read
    written back): the second count. None where onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    import onnx

    with tempfile.TemporaryDirectory(prefix="resnet-lab-onnx-") as tmp:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.optimized_model_filepath = str(Path(tmp) / "loaded.onnx")
        engine_step.open_onnxruntime(path, opts)
        loaded = onnx.load(opts.optimized_model_filepath, load_external_data=False)
    return dict(sorted(collections.Counter(_op(n) for n in loaded.graph.node).items()))


def inventory(path: str | Path, *, model: str, batch_size: int, image_size: int, precision: str = "fp32",
           exporter: str = "", seconds: float = 0.0) -> dict[str, Any]:
    """The ONNX record of ``path`` (see the module's doc; backend torch: PyTorch's exporter wrote it):
    ``ops``, ``compute_ops``, ``convolutions``, ``ops_runtime``, ``runtime_agrees``, ``opset``."""
    import onnx

    m = onnx.load(str(path))
    ops = dict(sorted(collections.Counter(_op(n) for n in m.graph.node).items()))
    ints = _int_tensors(m)
    shape_nodes = collections.Counter(_op(n) for n in m.graph.node
                                      if n.op_type in SHAPE_OPS and all(o in ints for o in n.output))
    compute = {op: n - shape_nodes.get(op, 0) for op, n in ops.items() if n - shape_nodes.get(op, 0) > 0}
    second = runtime_ops(path)
    return {"model": model, "backend": "torch", "ir": "onnx", "mode": "infer", "platform": "cpu",
            "batch_size": batch_size, "image_size": image_size, "precision": precision,
            "source": exporter, "capture_seconds": round(seconds, 3), "seconds": {"export": round(seconds, 3)},
            "opset": {i.domain or "ai.onnx": i.version for i in m.opset_import},
            "ops": ops, "compute_ops": dict(sorted(compute.items())), "shape_ops": dict(sorted(shape_nodes.items())),
            "convolutions": convolutions(m), "ops_runtime": second,
            "runtime_agrees": None if second is None else (
                {k: n for k, n in second.items() if k not in LOADER_FOLDS}
                == {k: n for k, n in ops.items() if k not in LOADER_FOLDS}),
            "versions": {"onnx": onnx.__version__}}
