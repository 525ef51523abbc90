"""`conformance.bisect.alone`: the first layer beyond tolerance rerun alone on the reference's inputs, on a real
ONNX model made here (x -> Relu -> Mul by w), on ONNX Runtime: local, inherited, undetermined."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not importlib.util.find_spec("onnxruntime"), reason="onnxruntime is not installed")


def _model(tmp_path, w: float, through: str = "ya"):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3])
    y = helper.make_tensor_value_info("yb", TensorProto.FLOAT, [1, 2, 3, 3])
    nodes = [helper.make_node("Relu", ["x"], ["ya"], name="a"),
             helper.make_node("Identity", ["ya"], ["yi"], name="i"),
             helper.make_node("Mul", [through, "w"], ["yb"], name="b")]
    weight = numpy_helper.from_array(np.full((1, 2, 1, 1), w, np.float32), "w")
    graph = helper.make_graph(nodes, "g", [x], [y], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / f"m-{w}-{through}.onnx"
    onnx.save(model, str(path))
    return path, list(model.graph.node)


def _case(tmp_path, w: float, upstream_off: float, through: str = "ya"):
    from resnet_lab.conformance import bisect

    rng = np.random.default_rng(0)
    images = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    a = np.maximum(images, 0).transpose(0, 2, 3, 1)  # Keras' layers, NHWC
    reference = {"a_layer": a * (1 + upstream_off), "b_layer": a * (1 + upstream_off) * 2.0}
    path, nodes = _model(tmp_path, w, through)
    layer_of = {"a_layer": ("a", "ya"), "b_layer": ("b", "yb")}
    return bisect.alone(path, nodes, "b_layer", layer_of, reference, images, "onnxruntime", "fp32", 1e-4)


def test_a_layer_computed_wrong_is_local(tmp_path):
    got = _case(tmp_path, w=2.5, upstream_off=0.0)  # b multiplies by 2.5 where the reference's layer doubles
    assert got["cause"] == "local" and got["error"] > 0.1 and "leaves tolerance" in got["why"]


def test_a_layer_fed_a_wrong_input_but_right_itself_is_inherited(tmp_path):
    # the reference's a is 1 % off what this model's a computes (an upstream error): whole, b leaves tolerance;
    # alone on the reference's a, b computes exactly the reference's b
    got = _case(tmp_path, w=2.0, upstream_off=0.01)
    assert got["cause"] == "inherited" and got["error"] < 1e-6 and "from upstream" in got["why"]


def test_a_layer_fed_by_a_tensor_no_layer_gives_is_undetermined(tmp_path):
    got = _case(tmp_path, w=2.0, upstream_off=0.0, through="yi")  # b reads the Identity's output: no Keras layer's
    assert got["cause"] == "undetermined" and got["error"] is None and "yi" in got["why"]
