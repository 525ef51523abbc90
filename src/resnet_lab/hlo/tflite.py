"""TFLite builtins: the op set a TFLite runtime (or delegate) needs for a model's inference, counted twice.

:func:`convert` turns a Keras model into a TFLite flatbuffer (``tf.lite.TFLiteConverter.from_keras_model``, float32,
no quantization: batch norm is folded into the convolutions, ReLUs are fused into the ops before them).
:func:`read_flatbuffer` reads every operator of every subgraph from the flatbuffer with the schema TensorFlow ships
(``tensorflow.lite.python.schema_py_generated``): its builtin name (``CONV_2D``), its fused activation (``RELU``)
and, for convolutions, stride, padding, dilation and the input and filter shapes. :func:`interpreter_ops` counts the
same operators independently with the interpreter (``tf.lite.Interpreter(...)._get_ops_details()``, the op name per
node); the two must agree. TensorFlow is imported inside the functions only.
"""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import time
import warnings
from typing import Any

from resnet_lab import models
from resnet_lab.core.choices import DTYPE_POLICIES

SOURCE = "tf.lite.TFLiteConverter.from_keras_model (float32, builtin ops)"


def convert(net: Any) -> bytes:
    """The TFLite flatbuffer of a Keras model (builtin ops only). Keras' export prints to stdout and
    TensorFlow's logger says "Assets written to: /tmp/..." at INFO on stderr: both are kept out of a report."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(net)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return converter.convert()
    finally:
        logger.setLevel(level)


def read_flatbuffer(content: bytes) -> dict[str, Any]:
    """``{"ops": builtin name → count, "fused_activations": "CONV_2D+RELU" → count, "convolutions": [...]}``
    from the flatbuffer's operators (custom ops are named ``CUSTOM:<name>``)."""
    from tensorflow.lite.python import schema_py_generated as fb

    model = fb.ModelT.InitFromPackedBuf(content, 0)
    builtin = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    activation = {v: k for k, v in vars(fb.ActivationFunctionType).items() if not k.startswith("_")}
    padding = {v: k for k, v in vars(fb.Padding).items() if not k.startswith("_")}
    ops: collections.Counter[str] = collections.Counter()
    fused: collections.Counter[str] = collections.Counter()
    convs: collections.Counter[tuple[Any, ...]] = collections.Counter()
    for graph in model.subgraphs:
        for op in graph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            # builtin codes above 127 live in builtinCode; older files keep the small ones in the deprecated field
            name = builtin[max(code.builtinCode, code.deprecatedBuiltinCode)]
            if name == "CUSTOM":
                name = f"CUSTOM:{code.customCode.decode() if isinstance(code.customCode, bytes) else code.customCode}"
            ops[name] += 1
            options = op.builtinOptions
            act = activation.get(getattr(options, "fusedActivationFunction", None))
            if act and act != "NONE":
                fused[f"{name}+{act}"] += 1
            if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                shapes = ["x".join(map(str, graph.tensors[i].shape)) for i in op.inputs[:2]]
                convs[(name, *shapes, f"{options.strideH}x{options.strideW}", padding.get(options.padding, ""),
                       f"{options.dilationHFactor}x{options.dilationWFactor}", act or "NONE")] += 1
    keys = ("op", "input", "filter", "stride", "padding", "dilation", "fused_activation")
    return {"ops": dict(sorted(ops.items())), "fused_activations": dict(sorted(fused.items())),
            "convolutions": [{**dict(zip(keys, c, strict=True)), "count": n} for c, n in sorted(convs.items())]}


def interpreter_ops(content: bytes) -> dict[str, int]:
    """Op name → count, from the interpreter's view of the same flatbuffer (one entry per node)."""
    import tensorflow as tf

    with warnings.catch_warnings():  # the interpreter's deprecation notice (LiteRT), once per process
        warnings.simplefilter("ignore")
        interpreter = tf.lite.Interpreter(model_content=content)
    return dict(sorted(collections.Counter(d["op_name"] for d in interpreter._get_ops_details()).items()))


def inventory(model: str, *, batch_size: int, image_size: int, precision: str = "fp32") -> dict[str, Any]:
    """One JSON-ready TFLite record of ``model``'s inference: configuration, ops (flatbuffer and interpreter,
    ``interpreter_agrees``), fused activations, convolutions, seconds and versions. ``batch_size`` is recorded
    only: the converted model takes any batch."""
    import tensorflow as tf

    net = models.build(model, input_shape=(image_size, image_size, 3), dtype_policy=DTYPE_POLICIES[precision])
    t0 = time.perf_counter()
    content = convert(net)
    seconds = round(time.perf_counter() - t0, 3)
    inv, seen = read_flatbuffer(content), interpreter_ops(content)
    return {"model": model, "backend": "tensorflow", "ir": "tflite", "source": SOURCE, "mode": "infer",
            "platform": "cpu", "batch_size": batch_size, "image_size": image_size, "precision": precision,
            "capture_seconds": seconds, "bytes": len(content), **inv, "compute_ops": dict(inv["ops"]),
            "ops_interpreter": seen, "interpreter_agrees": seen == inv["ops"],
            "versions": {"tensorflow": tf.__version__}}
