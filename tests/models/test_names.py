"""The model's layer names, read in one place (resnet_lab.models.names): each name of a zoo model parses, maps to
its native module and back, and the table lists what the Keras model builds."""

from __future__ import annotations

import pytest

from resnet_lab.models import names


@pytest.mark.parametrize("name, stage, block, index, kind, unit", [
    ("conv1_conv", 1, "", None, "conv", "conv1"),
    ("conv1_relu", 1, "", None, "relu", "conv1"),
    ("pool1_pool", 1, "", None, "pool", "pool1_pool"),
    ("conv3_block2_1_bn", 3, "conv3_block2", 1, "bn", "conv3_block2_1"),
    ("conv2_block1_0_conv", 2, "conv2_block1", 0, "conv", "conv2_block1_0"),
    ("conv4_block6_out", 4, "conv4_block6", None, "out", "conv4_block6_out"),
    ("conv2_block1_preact_bn", 2, "conv2_block1", None, "preact_bn", "conv2_block1_preact_bn"),
    ("predictions", 0, "", None, "dense", "predictions"),
])
def test_a_layer_name_reads_as_its_stage_block_unit_and_kind(name, stage, block, index, kind, unit):
    got = names.parse(name)
    assert (got.stage, got.block, got.index, got.kind, got.unit) == (stage, block, index, kind, unit)
    assert names.block_of(name) == block


@pytest.mark.parametrize("name", ["logits", "conv2_block1", "conv2_block1_1_dense", "layer1.0.conv1", ""])
def test_a_name_that_is_no_layer_of_the_model_reads_as_none(name):
    assert names.parse(name) is None


def test_every_keras_layer_with_weights_maps_to_its_module_and_back():
    from resnet_lab.layers import costs

    for model in ("resnet50_v1.5", "tiny-resnet"):
        for c in costs.layer_costs(model, 64):
            for keras in (c["layer"], c["layer"].replace("_conv", "_bn")):
                if keras.startswith("predictions") and keras != "predictions":
                    continue
                assert names.keras_layer(names.torch_path(keras)) == keras, keras
    assert names.keras_layer("layer1.0.relu", 0) == "conv2_block1_1_relu"
    assert names.keras_layer("layer1.0.relu", 2) == "conv2_block1_out"
    assert names.keras_layer("layer4.2") == "conv5_block3_add" and names.keras_layer("nope") is None
    with pytest.raises(KeyError):
        names.torch_path("avg_pool")


@pytest.mark.parametrize("modules, relus", [(["layer1.0.conv1", "layer1.0.conv2", "layer1.0.conv3"], 3),
                                            (["conv1", "layer1.0.conv1", "layer1.0.conv2"], 2)])
def test_a_block_has_as_many_relus_as_main_path_convolutions(modules, relus):
    assert names.relus_per_block(modules) == relus
    assert names.keras_layer("layer1.0.relu", relus - 1, relus) == "conv2_block1_out"
    # the export's nodes say it too: a basic block's second ReLU is its output, a bottleneck's its second ReLU
    nodes = [f"{m}/Conv" for m in modules] + ["layer1.0.relu/Relu_1"]
    assert names.node_layers("layer1.0.relu/Relu_1", names.graph_relus(nodes)) == \
        [{2: "conv2_block1_out", 3: "conv2_block1_2_relu"}[relus]]


def test_an_export_node_s_name_gives_its_layers():
    assert names.node_layers("layer1.0.conv2/Conv") == ["conv2_block1_2_conv", "conv2_block1_2_bn"]
    assert names.node_layers("layer2.1.relu/Relu_1") == ["conv3_block2_2_relu"]
    assert names.node_layers("node_Reshape_914") == []


def test_a_weight_gradient_is_looked_for_among_the_convolutions_that_read_the_layer_s_gradient():
    convs = ["conv2_block1_0_conv", "conv2_block1_1_conv", "conv2_block1_2_conv", "conv2_block1_3_conv"]
    assert names.gradient_convs("conv2_block1_2_bn", convs) == ["conv2_block1_2_conv"]
    assert names.gradient_convs("conv1_relu", convs) == ["conv1_conv"]
    assert names.gradient_convs("conv2_block1_out", convs) == ["conv2_block1_3_conv", "conv2_block1_0_conv"]
    assert names.gradient_convs("conv2_block1_1_conv", convs) == ["conv2_block1_1_conv"]
    assert names.gradient_convs("avg_pool", convs) == [] and names.gradient_convs("nope", convs) == []


@pytest.mark.parametrize("model", ["resnet50_v1.5", "tiny-resnet"])
def test_the_table_lists_the_layers_the_keras_model_builds(model):
    """Checked against the Keras model itself: every name of the table is one of its layers, every convolution and
    batch norm of it is in the table, and each module path is one of the native model's modules."""
    import keras

    from resnet_lab import models
    from resnet_lab.models import torch_builder

    keras.backend.clear_session()
    built = {layer.name: type(layer).__name__ for layer in models.build(model).layers}
    table = names.table(model)
    assert {r["layer"] for r in table} <= set(built), {r["layer"] for r in table} - set(built)
    weighted = {n for n, kind in built.items() if kind in ("Conv2D", "BatchNormalization", "Dense")}
    assert weighted <= {r["layer"] for r in table}, weighted - {r["layer"] for r in table}
    modules = {name for name, _ in torch_builder.build_native(model)[0].named_modules()}
    assert {r["torch"] for r in table if r["torch"]} <= modules
    assert {r["relus_per_block"] for r in table} == {names.relus_per_block(modules)}
    assert len([r for r in table if r["kind"] == "conv"]) == sum(kind == "Conv2D" for kind in built.values())
