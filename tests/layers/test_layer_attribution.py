"""Per-layer attribution: the module-to-Keras names, each layer's work, the FLOPs-share rule, and an engine's
profile of the quick run's export attributed to every convolution of tiny-resnet."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from helpers import assert_usage_error

from resnet_lab import export
from resnet_lab.layers import attribute, costs, names
from resnet_lab.models import specs


def test_an_onnx_runtime_kernel_s_export_nodes():
    # ONNX Runtime's NCHWc kernels are named after the tensor a fused chain outputs: walked back to its convolution
    graph = {"c": ("layer1.0.conv3/Conv", "Conv", ["x", "w"]), "s": ("layer1.0.downsample.0/Conv", "Conv", ["x"]),
             "a": ("layer1.0/Add", "Add", ["c", "s"]), "r": ("layer1.0.relu/Relu_2", "Relu", ["a"])}
    got = names.kernel_nodes("r_nchwc", graph, {"fc/Gemm"})
    assert got[:2] == ["layer1.0.relu/Relu_2", "layer1.0/Add"] and set(got[2:]) == {"layer1.0.conv3/Conv",
                                                                                   "layer1.0.downsample.0/Conv"}
    assert names.kernel_nodes("fc/Gemm", graph, {"fc/Gemm"}) == ["fc/Gemm"]
    assert names.kernel_nodes("ReorderOutput", graph, set()) == []


def test_the_layers_work_adds_up_to_the_model_s_count():
    spec = specs.get_spec("resnet50_v1.5")
    rows = costs.layer_costs("resnet50_v1.5", 224, batch_size=2)
    assert len([r for r in rows if r["layer"].endswith("_conv")]) == 53 and rows[-1]["layer"] == "predictions"
    macs = specs.count(spec, 224, 224, 3, spec.num_classes)["forward_macs"]
    assert sum(r["flops"] for r in rows) == 2 * 2 * macs
    first = rows[0]
    assert first["layer"] == "conv1_conv" and first["shape"] == "224²×3 → 112²×64" and first["kind"] == "conv 7×7/2"


def test_a_fused_kernel_is_split_by_flops_and_unclaimed_time_is_unattributed():
    cost = [{"layer": "a_conv", "kind": "conv", "flops": 3e9, "bytes": 1e6},
            {"layer": "b_conv", "kind": "conv", "flops": 1e9, "bytes": 1e6}]
    kernels = [{"name": "k1", "ms": 8.0, "layers": ["a_conv", "a_bn"]},
               {"name": "k2", "ms": 8.0, "layers": ["a_conv", "b_conv"]},
               {"name": "reorder", "ms": 4.0, "layers": []}]
    rec = attribute.attribute(kernels, cost, step_ms=11.0, steps=2, method="test", peak_gflops=1000.0,
                              bandwidth_gbs=10.0)
    by = {r["layer"]: r for r in rec["layers"]}
    assert by["a_conv"]["ms"] == pytest.approx(4.0 + 3.0) and by["b_conv"]["ms"] == pytest.approx(1.0)
    assert by["a_conv"]["fused_with"] == ["a_bn", "b_conv"] and by["a_conv"]["kernels"] == 2
    assert rec["unattributed_ms"] == 2.0 and rec["profiled_ms"] == 10.0 and rec["attributed_ms"] == 8.0
    assert by["a_conv"]["roofline_ms"] == pytest.approx(3.0)  # 3 GFLOP at 1 TFLOP/s; 1 MB at 10 GB/s is 0.1 ms
    assert "2 convolution layers named; attributed 8.0 ms of a 11.0 ms step" in attribute.summary(rec)


def test_a_training_step_s_time_is_split_by_pass_per_layer_and_in_all():
    cost = costs.layer_costs("tiny-resnet", 32, 4, mode="train")
    forward = costs.layer_costs("tiny-resnet", 32, 4)
    assert cost[0]["flops"] == 2 * forward[0]["flops"] and cost[1]["flops"] == 3 * forward[1]["flops"]  # no stem dx
    kernels = [{"name": "fwd", "ms": 2.0, "layers": ["conv1_conv", "conv1_bn"], "pass": "forward"},
               {"name": "dw", "ms": 4.0, "layers": ["conv1_conv"], "pass": "weight_grad"},
               {"name": "dx", "ms": 6.0, "layers": ["conv2_block1_1_conv"], "pass": "input_grad"},
               {"name": "sgd", "ms": 2.0, "layers": [], "pass": "other"}]
    rec = attribute.attribute(kernels, cost, step_ms=7.0, steps=2, method="test")
    by = {r["layer"]: r for r in rec["layers"]}
    assert by["conv1_conv"]["passes"] == {"forward": 1.0, "weight_grad": 2.0}
    assert rec["passes"] == {"forward": 1.0, "weight_grad": 2.0, "input_grad": 3.0, "other": 1.0}
    assert rec["unattributed_ms"] == 1.0
    assert "by pass: forward 1.0 ms, input gradients 3.0 ms, weight gradients 2.0 ms" in attribute.summary(rec)


@pytest.mark.parametrize("node, op, layer, expected", [
    ("m_1/conv1_conv_1/convolution", "_MklNativeConv2D", "conv1_conv", "forward"),
    ("gradient_tape/m_1/conv1_conv_1/convolution/Conv2DBackpropFilter", "_MklNativeConv2DBackpropFilter",
     "conv1_conv", "weight_grad"),
    ("gradient_tape/m_1/b1_1_conv_1/convolution/Conv2DBackpropInput", "Conv2DBackpropInput", "b1_1_conv",
     "input_grad"),
    ("gradient_tape/m_1/b1_1_bn_1/FusedBatchNormGradV3", "_MklFusedBatchNormGradV3", "b1_1_bn", "backward"),
    ("SGD/AssignSubVariableOp", "AssignSubVariableOp", None, "other"),
])
def test_a_tensorflow_kernel_s_pass_comes_from_the_tape_s_scope_and_the_gradient_op(node, op, layer, expected):
    from resnet_lab.layers.engines.tensorflow import tf_pass

    assert tf_pass(node, op, layer) == expected


# xla_train_step.hlo: XLA:CPU's optimized HLO of a JAX training step, as XLA dumps it (shortened): the forward
# convolution, a fusion of the batch norm and ReLU, and the convolution's two gradients (JAX names the backward pass
# transpose(jvp(layer))); the weight gradient's result has the kernel's 3·3·3·16 elements
XLA_HLO = (Path(__file__).parent / "xla_train_step.hlo").read_text()


def test_xla_thunks_map_to_their_instruction_s_layers_and_a_gradient_to_its_pass():
    from resnet_lab.layers.engines.xla import xla_kernels

    events = [("conv_general_dilated.5", 1.0), ("bn_relu_fusion", 0.5), ("bn_relu_fusion", 0.5),
              ("bn_grad_fusion", 0.1), ("ynn_fusion.1", 2.0), ("conv_general_dilated.8", 3.0), ("sgd", 0.1),
              ("dot.1", 0.2), ("ynn_fusion.2", 5.0), ("transpose_copy_fusion.2", 0.7)]
    known = frozenset({"conv1_conv", "conv1_bn", "conv1_relu", "conv2_block2_1_conv", "conv2_block2_1_bn",
                       "predictions", "conv2_block1_out", "conv2_block1_3_conv", "conv2_block1_0_conv"})
    events += [("wgrad.3", 0.3), ("wgrad.0", 0.4)]
    sizes = {"conv1_conv": 3 * 3 * 3 * 16, "conv2_block2_1_conv": 3 * 3 * 16 * 16, "conv2_block1_3_conv": 16 * 32,
             "conv2_block1_0_conv": 32 * 32}
    got = {k["name"]: k for k in xla_kernels(events, XLA_HLO, known, sizes)}
    assert (got["conv_general_dilated.5"]["layers"], got["conv_general_dilated.5"]["pass"]) == (["conv1_conv"],
                                                                                              "forward")
    # a fusion without a convolution or dot computes its root's layer (its body may recompute earlier layers' ops);
    # one with a convolution, its own layer first, then those of the instructions it calls
    assert got["bn_relu_fusion"]["layers"] == ["conv1_relu"] and got["bn_relu_fusion"]["ms"] == 1.0
    # a body several fusions share (XLA dedups identical ones) carries one layer's op_names: only the fusion's own
    assert got["bn_grad_fusion"]["layers"] == ["conv2_block2_1_bn"]
    assert (got["ynn_fusion.1"]["layers"], got["ynn_fusion.1"]["pass"]) == (["conv1_conv"], "weight_grad")
    assert (got["conv_general_dilated.8"]["layers"], got["conv_general_dilated.8"]["pass"]) == (["conv2_block2_1_conv"],
                                                                                              "input_grad")
    assert (got["sgd"]["layers"], got["sgd"]["pass"]) == ([], "other")
    # XLA's rewrite left the classifier's dot no op_name: it takes its user's (the bias add's) layer
    assert (got["dot.1"]["layers"], got["dot.1"]["pass"]) == (["predictions"], "forward")
    # a strided convolution's weight gradient rewritten without op_name: the nearby layer whose kernel has as many
    # elements as its result (conv2_block2_1_bn's backward feeds it: its convolution, conv2_block2_1_conv)
    assert (got["ynn_fusion.2"]["layers"], got["ynn_fusion.2"]["pass"]) == (["conv2_block2_1_conv"], "weight_grad")
    # weight gradients reading a block's output gradient: its last convolution's or its projection's, by size
    assert (got["wgrad.3"]["layers"], got["wgrad.3"]["pass"]) == (["conv2_block1_3_conv"], "weight_grad")
    assert (got["wgrad.0"]["layers"], got["wgrad.0"]["pass"]) == (["conv2_block1_0_conv"], "weight_grad")
    # a fusion of data movement only keeps its root's op_name (the ReLU's forward): its pass is a layout copy
    assert (got["transpose_copy_fusion.2"]["layers"][0], got["transpose_copy_fusion.2"]["pass"]) == ("conv1_relu",
                                                                                                      "layout")


ASYNC_HLO = """HloModule m, entry_computation_layout={...}

%f (a: f32[1,8,8,4], b: f32[1,8,8,4]) -> f32[1,8,8,4] {
  %a = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %b = f32[1,8,8,4]{3,2,1,0} parameter(1)
  ROOT %s = f32[1,8,8,4]{3,2,1,0} add(%a, %b)
}

ENTRY %main (x: f32[1,8,8,4], w: f32[3,3,4,4], v: f32[1,1,4,4]) -> f32[1,8,8,4] {
  %x = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %w = f32[3,3,4,4]{3,2,1,0} parameter(1)
  %v = f32[1,1,4,4]{3,2,1,0} parameter(2)
  %conv.1 = f32[1,8,8,4]{3,2,1,0} convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  %bitcast.1 = f32[1,8,8,4]{3,2,1,0} bitcast(%conv.1)
  %conv.2 = f32[1,8,8,4]{3,2,1,0} convolution(%x, %v), window={size=1x1}, dim_labels=b01f_01io->b01f
  ROOT %add_fusion = f32[1,8,8,4]{3,2,1,0} fusion(%bitcast.1, %conv.2), kind=kLoop, calls=%f
}
"""


def test_an_asynchronous_convolution_owns_the_idle_time_until_its_reader_starts_shared_by_flops():
    """XLA:CPU under TensorFlow: a convolution thunk's event ends at its launch. conv.1 (3x3, 18,432 FLOPs) and
    conv.2 (1x1, 2,048) are both read by add_fusion (through a bitcast, which runs no thunk); the idle time before
    add_fusion starts goes to whichever is open, split by FLOPs where both are."""
    from resnet_lab.layers.engines.xla import xla_async_events

    ms = 10 ** 9  # picoseconds
    spans = [("conv.1", 0, ms // 10), ("conv.2", 2 * ms // 10, ms // 10), ("add_fusion", 2 * ms, ms // 10)]
    got = dict(xla_async_events(spans, ASYNC_HLO))
    assert got["conv.1"] == pytest.approx(0.1 + 0.1 + 1.7 * 18432 / 20480)
    assert got["conv.2"] == pytest.approx(0.1 + 1.7 * 2048 / 20480)
    assert got["add_fusion"] == pytest.approx(0.1)
    # with no asynchronous opcode, every thunk is its event
    assert dict(xla_async_events(spans, ASYNC_HLO, opcodes=())) == pytest.approx({"conv.1": 0.1, "conv.2": 0.1,
                                                                                   "add_fusion": 0.1})


@pytest.mark.parametrize("argv, message", [
    (["tiny-resnet", "--backend", "xla"], "--backend: 'xla' is not one of: tensorflow, jax, torch, iree, "
                                          "onnxruntime, openvino"),
    (["tiny-resnet", "--backend", "tensorflow", "--recipe", "host"], "--recipe is an engine's"),
    (["tiny-resnet", "--backend", "openvino", "--mode", "train"], "--mode train profiles a framework's training "
                                                                  "step (tensorflow, torch, jax); openvino runs"),
    (["tiny-resnet", "--backend", "jax", "--mode", "backward"], "--mode: 'backward' is not one of: infer, train"),
    (["keras-resnet50", "--backend", "openvino"], "keras-resnet50: layers needs a zoo model's layers"),
    (["tiny-resnet", "--backend", "openvino", "--peak-file", "/nope.json"], "--peak-file"),
])
def test_layers_bad_input_is_one_line_before_any_engine(argv, message):
    assert_usage_error(["layers", *argv], message)


# TensorFlow's graph as the served row has it: batch norms folded, so the conv's kernel is named after its ReLU
TF_GRAPH = {"conv1_conv": ("Conv2D", ["input"]), "conv1_relu": ("Activation", ["conv1_conv"]),
            "b1_pad": ("ZeroPadding2D", ["conv1_relu"]), "b1_1_conv": ("Conv2D", ["b1_pad"]),
            "b1_0_conv": ("Conv2D", ["conv1_relu"]), "b1_add": ("Add", ["b1_0_conv", "b1_1_conv"]),
            "b1_out": ("Activation", ["b1_add"]), "b2_add": ("Add", ["b1_out", "b2_1_conv"]),
            "b2_1_conv": ("Conv2D", ["b1_out"]), "b2_out": ("Activation", ["b2_add"])}


def test_a_tensorflow_op_belongs_to_the_layer_its_scope_names_and_fused_convolutions_claim_their_producers():
    from resnet_lab.layers.engines.tensorflow import tf_kernels

    known = frozenset(TF_GRAPH)
    assert names.tf_op_layer("resnet50_1/conv1_relu_1/Relu", known) == "conv1_relu"
    assert names.tf_op_layer("resnet50_1/b1_add/add", known) == "b1_add"
    assert names.tf_op_layer("resnet50_1/unknown_7/Relu", known) is None
    events = [("m_1/conv1_relu_1/Relu:_MklNativeFusedConv2D", 2.0), ("m_1/b1_0_conv_1/BiasAdd:_FusedConv2D", 1.0),
              ("m_1/b1_out_1/Relu:_MklNativePadWithFusedConv2D", 3.0), ("m_1/b2_out_1/Relu:_FusedConv2D", 4.0),
              ("m_1/conv1_relu_1/Relu:_MklNativeFusedConv2D", 2.0), ("EagerLocalExecute: __inference_f", 99.0),
              ("m_1/b1_out_1/Relu/ReadVariableOp:ReadVariableOp", 0.5), ("ExecutorState::Process", 50.0)]
    got = {k["name"]: k for k in tf_kernels(events, TF_GRAPH)}
    assert set(got) == {"m_1/conv1_relu_1/Relu:_MklNativeFusedConv2D", "m_1/b1_0_conv_1/BiasAdd:_FusedConv2D",
                        "m_1/b1_out_1/Relu:_MklNativePadWithFusedConv2D", "m_1/b2_out_1/Relu:_FusedConv2D",
                        "m_1/b1_out_1/Relu/ReadVariableOp:ReadVariableOp"}
    assert got["m_1/conv1_relu_1/Relu:_MklNativeFusedConv2D"] == {
        "name": "m_1/conv1_relu_1/Relu:_MklNativeFusedConv2D", "ms": 4.0, "layers": ["conv1_relu", "conv1_conv"],
        "pass": "forward"}
    # the projection shortcut runs on its own (its kernel names it): the add's fused convolution is the other one,
    # with its padding; an identity shortcut (b2) is no producer of the fused kernel
    assert got["m_1/b1_out_1/Relu:_MklNativePadWithFusedConv2D"]["layers"] == ["b1_out", "b1_add", "b1_1_conv",
                                                                                "b1_pad"]
    assert got["m_1/b2_out_1/Relu:_FusedConv2D"]["layers"] == ["b2_out", "b2_add", "b2_1_conv"]
    assert got["m_1/b1_out_1/Relu/ReadVariableOp:ReadVariableOp"]["layers"] == ["b1_out"]  # not a convolution


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["tensorflow", "torch", "jax", "iree", "onnxruntime", "openvino"])
def test_every_convolution_of_tiny_resnet_is_named_in_the_engine_s_profile(quick_run, tmp_path, engine):
    """The quick run's 03 profiles five backends of tiny-resnet (its "Where the time goes"); their records are
    read from its layers.json. IREE, on demand in the report, is profiled here from the run's export."""
    if not importlib.util.find_spec(engine.split(":")[0]):
        pytest.skip(f"{engine} is not installed")
    from resnet_lab.layers import cli

    profiled = json.loads(next(quick_run.run_dir.rglob("layers.json")).read_text())["records"]
    rec = next((r for r in profiled.values() if r["backend"] == engine), None)
    if rec is None:
        # the quick run's export of tiny-resnet at 32² (a cache entry), under the name ensure looks for in a root
        used = json.loads(next(quick_run.run_dir.rglob(export.USED)).read_text())
        entry = next(Path(e["path"]) for name, e in used.items() if name.startswith("tiny-resnet-32px"))
        os.symlink(entry, tmp_path / "tiny-resnet-32px-seed0")
        rec = cli.profile("tiny-resnet", engine, 1, 32, steps=5, export_dir=str(tmp_path),
                          peak_doc={"peak_gflops": {"fp32": 200.0}, "bandwidth_gbps": 30.0})
    assert (rec["model"], rec["image_size"]) == ("tiny-resnet", 32)
    convs = {c["layer"] for c in costs.layer_costs("tiny-resnet", 32) if c["layer"].endswith("_conv")}
    got = {r["layer"]: r for r in rec["layers"]}
    assert convs <= set(got), convs - set(got)
    assert rec["step_ms"] > 0 and rec["attributed_ms"] > 0 and all(got[c]["roofline_ms"] > 0 for c in convs)
    method = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO", "tensorflow": "tf.profiler", "iree": "IREE's HAL",
              "torch": "torch.profiler, one range per module call", "jax": "jax.profiler"}[engine]
    assert method in rec["method"] and bool(rec["recipe"]) == (engine in cli.ENGINES)
    assert rec["profiled_step_ms"] > 0
    if engine in ("onnxruntime", "openvino", "torch"):  # their profilers give each layer its steps
        assert rec["per_step"] and all(len(got[c]["steps_ms"]) > 1 for c in convs)
        assert all(min(got[c]["steps_ms"]) <= got[c]["median_ms"] <= max(got[c]["steps_ms"]) for c in convs)


@pytest.mark.slow
@pytest.mark.serial  # it bounds a share of time (unattributed < 10 % of the step): a loaded core stretches one kernel
@pytest.mark.parametrize("row, method", [("torch:jit", "TorchInductor's kernels"),
                                         ("tensorflow:jit", "XLA:CPU's thunk events")])
def test_a_compiled_framework_row_names_every_convolution_of_tiny_resnet(row, method):
    """A framework's compiled row (03's served PyTorch under TorchInductor; TensorFlow under jit_compile), profiled
    here rather than in the quick run (which is make test's critical path): every convolution named, each with its
    one kernel, and the record says how it was profiled."""
    from resnet_lab.layers import run

    rec = run.profile("tiny-resnet", row, 1, 32, steps=3, peak_doc={"peak_gflops": {"fp32": 200.0},
                                                                     "bandwidth_gbps": 30.0})
    convs = {c["layer"] for c in costs.layer_costs("tiny-resnet", 32) if c["layer"].endswith("_conv")}
    got = {r["layer"]: r for r in rec["layers"]}
    assert convs <= set(got), convs - set(got)
    assert all(got[c]["kernels"] == 1 and got[c]["ms"] > 0 for c in convs), {c: got[c] for c in convs}
    assert rec["backend"] == row and method in rec["method"] and rec["unattributed_ms"] < 0.1 * rec["step_ms"]


@pytest.mark.slow
def test_a_training_step_names_every_convolution_s_gradients_on_each_framework(quick_run):
    """The quick run's 03 profiles the three frameworks' training steps of tiny-resnet (layers_train.json): every
    convolution has a forward and a backward; TensorFlow and JAX run its input and weight gradients as two kernels,
    and the stem's input gradient (of the images) is never computed."""
    got = json.loads(next(quick_run.run_dir.rglob("layers_train.json")).read_text())
    assert not got["skipped"], got["skipped"]
    records = {r["backend"]: r for r in got["records"].values()}
    assert set(records) == {"tensorflow", "torch", "jax"}
    convs = [c["layer"] for c in costs.layer_costs("tiny-resnet", 32) if c["layer"].endswith("_conv")]
    for backend, rec in records.items():
        assert rec["mode"] == "train" and "training steps" in rec["method"]
        passes = {r["layer"]: r["passes"] for r in rec["layers"]}
        assert set(convs) <= set(passes), (backend, set(convs) - set(passes))
        for conv in convs:
            assert passes[conv].get("forward", 0) > 0, (backend, conv, passes[conv])
            if backend == "torch":
                assert passes[conv].get("backward", 0) > 0, (conv, passes[conv])
                continue
            assert passes[conv].get("weight_grad", 0) > 0, (backend, conv, passes[conv])
            assert (passes[conv].get("input_grad", 0) > 0) == (conv != "conv1_conv"), (backend, conv, passes[conv])


# A HAL-phase module as IREE prints it with --mlir-print-local-scope: an initializer's command buffer (constants),
# then the step's, whose two call sites of one dispatch function carry their own locations.
HAL = '''
  %cmd = hal.command_buffer.create device(%d : !hal.device) mode(OneShot) loc("init")
  %f = hal.executable.lookup.function target(%e : !hal.executable) function(@m::@elf::@main_dispatch_9_pack) : i64
  hal.command_buffer.dispatch<%cmd : !hal.command_buffer> target(%e : !hal.executable)[%f] workgroups([%c1]) bindings([
  ]) flags("None") loc("jit(f)/conv1_conv/transpose"(callsite("x" at "y":1:1)))
  %c2 = hal.command_buffer.create device(%d : !hal.device) mode(OneShot) loc("main")
  %fid = hal.executable.lookup.function target(%e : !hal.executable) function(@m::@elf::@main_dispatch_1_conv) : i64
  hal.command_buffer.dispatch<%c2 : !hal.command_buffer> target(%e : !hal.executable)[%fid] workgroups([%c8]) bindings([
    (%c5 : index)[%c0, %c48]
  ]) flags("None") loc(fused["jit(f)/conv2_block1_1_conv/c"("k"), callsite("m" at "jit(f)/conv2_block1_1_relu/r"(""))])
  hal.command_buffer.execution_barrier<%c2 : !hal.command_buffer> flags("None") loc("jit(f)/conv9_conv/x"("k"))
  hal.command_buffer.dispatch<%c2 : !hal.command_buffer> target(%e : !hal.executable)[%fid] workgroups([%c8]) bindings([
  ]) flags("None") loc("jit(f)/conv2_block1_2_conv/conv_general_dilated"("k"))
'''


def test_iree_dispatches_map_to_the_layers_of_their_call_sites():
    from resnet_lab.layers.engines.iree import iree_call_sites, iree_kernels

    buffers = iree_call_sites(HAL)
    assert buffers == [[("main_dispatch_9_pack", ["conv1_conv"])],
                       [("main_dispatch_1_conv", ["conv2_block1_1_conv", "conv2_block1_1_relu"]),
                        ("main_dispatch_1_conv", ["conv2_block1_2_conv"])]]
    commands = [{"type": "command_summary", "host_executions": 2},
                {"type": "command_operation", "op": "fill", "command_index": 0, "key": "fill"},
                {"type": "command_operation", "op": "dispatch", "command_index": 1, "key": "main_dispatch_1_conv"},
                {"type": "command_operation", "op": "dispatch", "command_index": 3, "key": "main_dispatch_1_conv"}]
    events = [{"type": "host_dispatch_event", "command_index": i, "key": "main_dispatch_1_conv", "duration_ns": ns}
              for i, ns in ((1, 2e6), (3, 1e6), (1, 2e6), (3, 1e6))]
    kernels, runs = iree_kernels(commands, events, buffers)
    assert runs == 2
    assert kernels == [{"name": "main_dispatch_1_conv@1", "ms": 4.0,
                        "layers": ["conv2_block1_1_conv", "conv2_block1_1_relu"]},
                       {"name": "main_dispatch_1_conv@3", "ms": 2.0, "layers": ["conv2_block1_2_conv"]}]
    # a profile whose dispatch functions match no command buffer of the module names no layer (unattributed)
    assert all(not k["layers"] for k in iree_kernels(commands[:2] + commands[3:], events, buffers[:1])[0])


def test_inductor_kernel_names_match_the_profiler_s_and_calls_follow_their_graph():
    from resnet_lab.layers.engines.inductor import inductor_kernel_key, inductor_kernels

    assert inductor_kernel_key("torch.ops.mkldnn._convolution_pointwise_.binary:3") == "_convolution_pointwise_"
    assert inductor_kernel_key("mkldnn::_convolution_pointwise_") == "_convolution_pointwise_"
    assert inductor_kernel_key("torch.ops.aten.convolution_backward.default:4") == "convolution_backward"
    assert inductor_kernel_key("extern_kernels.addmm:11") == inductor_kernel_key("aten::addmm") == "addmm"
    assert inductor_kernel_key("cpp_fused_relu_0:2") == inductor_kernel_key("graph_0_cpp_fused_relu_0")
    graphs = [[("extern_kernels.convolution:1", ["conv1_conv"], "forward"), ("cpp_fused_relu_0:2", ["conv1_relu"],
                                                                             "forward")],
              [("cpp_fused_add_copy__mul_0:1", [], "other")]]
    # a call's events in order: an allocation between the kernels is no layer's; a call of the optimizer's graph
    calls = [[("aten::convolution", 2.0), ("aten::empty", 0.1), ("graph_0_cpp_fused_relu_0", 0.5)],
             [("aten::convolution", 2.0), ("graph_0_cpp_fused_relu_0", 0.5)],
             [("graph_3_cpp_fused_add_copy__mul_0", 0.2)]]
    got = {k["name"]: k for k in inductor_kernels(calls, graphs)}
    assert (got["extern_kernels.convolution:1"]["ms"], got["extern_kernels.convolution:1"]["layers"]) == \
        (4.0, ["conv1_conv"])
    assert got["cpp_fused_relu_0:2"]["ms"] == 1.0 and got["aten::empty"]["layers"] == []
    assert got["cpp_fused_add_copy__mul_0:1"]["pass"] == "other"


def _node(path, order, conv="", source="", seq=-1, backward=False):
    from resnet_lab.layers.engines.inductor import GraphNode

    return GraphNode(f"L['model'].{path}" if path else "L['model']", seq, order, backward, True, conv, source)


def test_inductor_s_frozen_convolutions_name_their_fused_layers_and_a_mutated_buffer_its_own_node():
    """A frozen bottleneck block as Inductor's mkldnn fusions leave it: each fused node keeps its ReLU's module (the
    block's ReLU called three times), the last convolution runs alone and the projection shortcut's convolution takes
    the add and the output ReLU; the stem's buffer, mutated in place by that fused add, is named after it."""
    from resnet_lab.layers.engines.inductor import inductor_layers

    nodes = {"fn_4": _node("relu", 1, "mkldnn", "x"), "pool": _node("maxpool", 2, "", "fn_4"),
             "fn_3": _node("layer1.0.relu", 3, "mkldnn", "pool"), "fn_2": _node("layer1.0.relu", 4, "mkldnn", "fn_3"),
             "conv_48": _node("layer1.0.conv3", 5, "mkldnn", "fn_2"),
             "fn_1": _node("layer1.0.relu", 6, "mkldnn", "pool"), "linear": _node("fc", 7, "", "fn_1")}
    kernels = [("torch.ops.mkldnn._convolution_pointwise.default:1", ["fn_1"]),  # the mutated buffer's producer
               ("cpp_fused_max_pool2d_0:2", ["pool"]),
               ("torch.ops.mkldnn._convolution_pointwise.default:3", ["fn_3"]),
               ("torch.ops.mkldnn._convolution_pointwise.default:4", ["fn_2"]),
               ("torch.ops.mkldnn._convolution_pointwise.default:5", ["conv_48"]),
               ("torch.ops.mkldnn._convolution_pointwise_.binary:6", ["fn_1"]),
               ("torch.ops.mkl._mkl_linear.default:7", ["linear", "view"])]
    got = [layers for _, layers, _ in inductor_layers([{"kernels": kernels, "nodes": nodes}], relus=3)[0]]
    assert got == [["conv1_conv", "conv1_bn", "conv1_relu"], ["pool1_pool"],
                   ["conv2_block1_1_conv", "conv2_block1_1_bn", "conv2_block1_1_relu"],
                   ["conv2_block1_2_conv", "conv2_block1_2_bn", "conv2_block1_2_relu"],
                   ["conv2_block1_3_conv", "conv2_block1_3_bn"],
                   ["conv2_block1_0_conv", "conv2_block1_0_bn", "conv2_block1_add", "conv2_block1_out"],
                   ["predictions"]]


def test_inductor_s_backward_kernels_take_their_forward_op_s_module_and_call():
    """A training step's graphs: the backward graph's nodes carry their forward op's module and sequence number, so
    a basic block's second ReLU (its output, after the add) is told from its first by that number."""
    from resnet_lab.layers.engines.inductor import inductor_layers

    forward = {"convolution": _node("conv1", 1, "conv", "x", seq=10), "relu": _node("relu", 2, "", "", seq=11),
               "relu_1": _node("layer1.0.relu", 3, "", "", seq=14), "relu_2": _node("layer1.0.relu", 4, "", "",
                                                                                     seq=17)}
    backward = {"threshold_backward": _node("layer1.0.relu", 1, "", "", seq=17, backward=True),
                "convolution_backward": _node("conv1", 2, "conv", "", seq=10, backward=True),
                "mul_9": _node("", 3, "", "", seq=30)}
    graphs = [{"kernels": [("extern_kernels.convolution:1", ["convolution"]), ("cpp_fused_relu_0:2", ["relu"])],
               "nodes": forward},
              {"kernels": [("cpp_fused_threshold_backward_0:1", ["threshold_backward"]),
                           ("torch.ops.aten.convolution_backward.default:2", ["convolution_backward"]),
                           ("cpp_fused_sum_1:3", ["sum_1"])], "nodes": backward}]
    fwd, bwd = inductor_layers(graphs, relus=2)
    assert fwd == [("extern_kernels.convolution:1", ["conv1_conv"], "forward"),
                   ("cpp_fused_relu_0:2", ["conv1_relu"], "forward")]
    assert bwd[0][1:] == (["conv2_block1_out"], "backward") and bwd[1][1:] == (["conv1_conv"], "backward")
    assert bwd[2][1:] == ([], "other")


def test_a_layer_s_steps_are_its_kernels_steps_split_like_their_sum():
    cost = [{"layer": "a_conv", "flops": 3e9, "bytes": 1e6}, {"layer": "b_conv", "flops": 1e9, "bytes": 1e6}]
    kernels = [{"name": "k1", "ms": 6.0, "steps_ms": [1.0, 1.0, 4.0], "layers": ["a_conv", "a_bn"]},
               {"name": "k2", "ms": 8.0, "steps_ms": [2.0, 2.0, 4.0], "layers": ["a_conv", "b_conv"]}]
    rec = attribute.attribute(kernels, cost, step_ms=5.0, steps=3, method="test")
    by = {x["layer"]: x for x in rec["layers"]}
    assert rec["per_step"] and by["a_conv"]["steps_ms"] == [2.5, 2.5, 7.0]  # k1 whole, k2's 3/4
    assert by["a_conv"]["median_ms"] == 2.5 and by["a_conv"]["spread_ms"] == 0.0  # the third step's hiccup: no weight
    assert by["a_conv"]["ms"] == pytest.approx(4.0)  # the mean stays what the step's accounting adds up
    assert by["b_conv"]["steps_ms"] == [0.5, 0.5, 1.0]
    kernels.append({"name": "reorder", "ms": 1.0, "layers": []})  # a kernel without steps: no layer has them
    assert not attribute.attribute(kernels, cost, step_ms=5.0, steps=3, method="test")["per_step"]


def test_onnx_runtime_s_events_are_given_to_the_run_that_holds_them():
    from resnet_lab.layers.engines.onnxruntime import kernel_steps

    run = {"cat": "Session", "name": "model_run"}
    node = {"cat": "Node", "name": "conv_kernel_time"}
    events = [{**run, "ts": 0, "dur": 100}, {**node, "ts": 10, "dur": 50_000},  # the warmup run, dropped
              {**run, "ts": 200, "dur": 100}, {**node, "ts": 210, "dur": 2_000}, {**node, "ts": 250, "dur": 1_000},
              {**run, "ts": 400, "dur": 100}, {"cat": "Node", "name": "relu_kernel_time", "ts": 410, "dur": 500}]
    assert kernel_steps(events, warmup=1) == {"conv": [3.0, 0.0], "relu": [0.0, 0.5]}
