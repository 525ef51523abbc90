"""ONNX as an IR (resnet_lab.hlo.onnx_ir): a small graph built with onnx's helpers, counted twice, in the op × IR
table beside the other IRs."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from resnet_lab.hlo.inventory_text import format_portable, hlo_name
from resnet_lab.report import ops as tables

pytestmark = pytest.mark.skipif(importlib.util.find_spec("onnx") is None,
                                reason="onnx is not installed (pip install '.[compilers]')")


def _model(path):
    """x (N,3,8,8) -> Conv 3x3 stride 2 -> Relu -> Reshape to (N, -1) with the batch read from Shape: what
    Keras' export does around its dynamic batch dimension."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Gather", ["s", "i0"], ["n"]),
        helper.make_node("Constant", [], ["m1"], value=numpy_helper.from_array(np.array([-1], np.int64))),
        helper.make_node("Concat", ["n", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["r", "shape"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_an_onnx_record_counts_ops_leaves_the_shape_arithmetic_out_and_counts_again(tmp_path):
    from resnet_lab.hlo import onnx_ir

    rec = onnx_ir.inventory(_model(tmp_path / "m.onnx"), model="toy", batch_size=2, image_size=8)
    assert rec["ops"] == {"Concat": 1, "Constant": 2, "Conv": 1, "Gather": 1, "Relu": 1, "Reshape": 1, "Shape": 1}
    assert rec["compute_ops"] == {"Conv": 1, "Relu": 1, "Reshape": 1}  # the Reshape of the images is work
    assert rec["shape_ops"] == {"Concat": 1, "Constant": 2, "Gather": 1, "Shape": 1}
    (conv,) = rec["convolutions"]
    assert (conv["weight"], conv["strides"], conv["pads"], conv["group"], conv["count"]) == (
        "[4, 3, 3, 3]", "[2, 2]", "[1, 1, 1, 1]", 1, 1)
    assert conv["input"] == "['N', 3, 8, 8]"
    if importlib.util.find_spec("onnxruntime"):  # ONNX Runtime's loader: the Constants become initializers
        assert rec["ops_runtime"]["Conv"] == 1 and "Constant" not in rec["ops_runtime"]
        assert rec["runtime_agrees"] is True
    text = format_portable(rec)
    assert "ONNX Runtime's loaded graph agrees" in text and "1 distinct convolutions" in text
    # beside the other IRs: a Conv is a convolution, a Relu a maximum, in the name map's onnx_op
    assert hlo_name("onnx", "Conv") == "convolution" and hlo_name("onnx", "Relu") == "maximum"
    hlo = {"model": "toy", "mode": "infer", "stage": "before", "platform": "cpu", "backend": "tensorflow",
           "opcodes": {"convolution": 1, "maximum": 1, "reshape": 1}}
    frame = tables.ir_table([hlo], [], "toy", portable=[rec])
    assert frame.loc["convolution", "ONNX torch infer"] == 1 and frame.loc["maximum", "onnx_op"] == "Relu"
    mapping = tables.ir_mapping(frame, [rec])
    assert mapping.loc["convolution", "irs"] == "HLO, ONNX"
    assert "ONNX toy infer: 3 distinct ops" in tables.describe_portable([rec])
