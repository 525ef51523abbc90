"""The model zoo: analytic counts, Keras builds, equivalence with keras.applications, formats, training.

Kept fast for a 2-core box: models are built symbolically (cheap at any input size) and only small ones
run forward, on inputs of 32×32 or smaller; the two Keras equivalences run at 64×64.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from resnet_lab.core import provenance
from resnet_lab.core.errors import UsageError
from resnet_lab.models import build, check_input_shape, describe, get_spec, list_models

keras = pytest.importorskip("keras")

IMAGENET_V1_PARAMS = {  # trainable, no conv bias, 1000 classes (the torchvision / paper counts)
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
}
PAPER_PARAMS_M = {  # He et al. 2015 Table 6, He et al. 2016 Tables 2-4: millions, as printed
    "cifar_resnet20": "0.27",
    "cifar_resnet32": "0.46",
    "cifar_resnet44": "0.66",
    "cifar_resnet56": "0.85",
    "cifar_resnet110": "1.7",
    "cifar_resnet32_v2": "0.46",
    "cifar_resnet110_v2": "1.7",
    "cifar_resnet164_v2": "1.7",
    "cifar_resnet1001_v2": "10.2",
}


def _trainable(model) -> int:
    return sum(math.prod(w.shape) for w in model.trainable_weights)


def _non_trainable(model) -> int:
    return sum(math.prod(w.shape) for w in model.non_trainable_weights)


def _keras_macs(model) -> int:
    """MACs read off the built Keras graph: every Conv2D's output size × kernel, and the Dense."""
    macs = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            kh, kw, c_in, c_out = layer.kernel.shape
            out = layer.output.shape
            hw = out[1] * out[2] if layer.data_format == "channels_last" else out[2] * out[3]
            macs += hw * kh * kw * c_in * c_out
        elif isinstance(layer, keras.layers.Dense):
            macs += math.prod(layer.kernel.shape)
    return macs


def _randomize(model, seed: int = 0) -> None:
    """Well-scaled random weights everywhere, BN statistics included, so equal logits mean equal functions."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        shape, path = tuple(w.shape), w.path
        if len(shape) > 1:  # kernels: variance 1/fan_in keeps activations O(1) through 50 layers
            v = rng.standard_normal(shape) / math.sqrt(math.prod(shape[:-1]))
        elif "variance" in path:
            v = rng.uniform(0.5, 1.5, shape)
        elif "gamma" in path:
            v = rng.uniform(0.5, 1.0, shape)
        else:  # beta, moving mean, biases
            v = 0.1 * rng.standard_normal(shape)
        w.assign(v.astype(w.dtype))


def _copy_by_name(src, dst) -> None:
    src_layers = {layer.name: layer for layer in src.layers if layer.weights}
    dst_layers = {layer.name: layer for layer in dst.layers if layer.weights}
    assert src_layers.keys() == dst_layers.keys()
    for name, layer in src_layers.items():
        dst_layers[name].set_weights(layer.get_weights())


# --- the table and its analytic counts (no Keras needed) -------------------------------------------------


def test_list_models_is_stable_family_then_depth():
    assert list_models() == [
        "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
        "resnet50_v1.5", "resnet101_v1.5", "resnet152_v1.5",
        "resnet50_v2", "resnet101_v2", "resnet152_v2",
        "cifar_resnet20", "cifar_resnet32", "cifar_resnet44", "cifar_resnet56", "cifar_resnet110",
        "cifar_resnet32_v2", "cifar_resnet110_v2", "cifar_resnet164_v2", "cifar_resnet1001_v2",
        "tiny-resnet", "keras-resnet50",  # the tests' two-stage net; keras.applications.ResNet50 itself
    ]  # fmt: skip


@pytest.mark.parametrize("name", [n for n in list_models() if n != "tiny-resnet"])
def test_depth_in_name_is_the_depth_of_the_table(name):
    digits = "".join(ch for ch in name.split("_v")[0] if ch.isdigit())
    assert describe(name)["depth"] == int(digits)


def test_tiny_resnet_is_a_six_layer_cifar_v1():
    d = describe("tiny-resnet")  # stem conv, two basic blocks (two convs each), the classifier
    assert (d["depth"], d["stage_blocks"], d["widths"], d["input_shape"]) == (6, [1, 1], [16, 32], [32, 32, 3])


@pytest.mark.parametrize(("name", "params"), IMAGENET_V1_PARAMS.items())
def test_imagenet_v1_params_exact(name, params):
    assert describe(name)["trainable_params"] == params
    # v1.5 moves a stride, v2 moves the BNs: v1.5 has the same parameters, v2 differs only in BN count.
    if name in ("resnet50", "resnet101", "resnet152"):
        assert describe(f"{name}_v1.5")["trainable_params"] == params


@pytest.mark.parametrize(("name", "millions"), PAPER_PARAMS_M.items())
def test_cifar_params_match_the_papers(name, millions):
    # Equal to the printed digits. ResNet-1001's 10.2 M counts its conv kernels only (10.19 M); with
    # BN and the classifier it has 10.33 M, so it gets 1.5 %.
    half_unit = 0.5 * 10 ** -len(millions.split(".")[1])
    tolerance = 0.015 * float(millions) if name == "cifar_resnet1001_v2" else half_unit
    assert abs(describe(name)["trainable_params"] / 1e6 - float(millions)) <= tolerance


def test_forward_macs_resnet50_v1_and_v1_5():
    v1, v1_5 = describe("resnet50")["forward_macs"], describe("resnet50_v1.5")["forward_macs"]
    assert v1 == pytest.approx(3.86e9, rel=0.01)
    assert v1_5 == pytest.approx(4.09e9, rel=0.01)
    assert describe("resnet50", input_shape=(112, 112, 3))["forward_macs"] < v1 / 3  # scales with pixels


def test_describe_has_the_promised_fields_and_defaults():
    d = describe("cifar_resnet56", num_classes=100, input_shape=(3, 32, 32), data_format="channels_first")
    for key in ("name", "family", "version", "depth", "block", "stride_on", "preact", "shortcut",
                "trainable_params", "forward_macs", "input_shape", "num_classes", "default_input_shape"):
        assert key in d
    assert d["num_classes"] == 100
    assert d["input_shape"] == d["default_input_shape"] == [3, 32, 32]
    assert describe("resnet50")["default_input_shape"] == [224, 224, 3]
    assert describe("resnet50_v2")["stride_block"] == "last"
    assert get_spec("resnet50").stride_on == "1x1" and get_spec("resnet50_v1.5").stride_on == "3x3"


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(UsageError) as e:
        describe("resnet51")
    message = str(e.value)
    assert "\n" not in message and "resnet51" in message
    assert all(name in message for name in list_models())
    with pytest.raises(UsageError):
        build("resnet51")


@pytest.mark.parametrize(
    ("name", "shape", "fmt", "needle"),
    [
        ("resnet50", (16, 16, 3), "channels_last", "minimum is 32×32"),
        ("resnet50", (224, 16, 3), "channels_last", "width 16 is too small"),
        ("cifar_resnet20", (3, 2, 32), "channels_first", "minimum is 4×4"),
        ("cifar_resnet32_v2", (30, 30, 3), "channels_last", "multiple of 4"),  # 2×2 avg-pool shortcuts
        ("resnet50", (224, 224), "channels_last", "three positive integers"),
        ("resnet50", (224, 224, 0), "channels_last", "three positive integers"),
        ("resnet50", (224, 224, 3), "NHWC", "channels_last, channels_first"),
    ],
)
def test_bad_input_shapes_name_the_rule(name, shape, fmt, needle):
    with pytest.raises(UsageError, match=needle):
        check_input_shape(name, shape, data_format=fmt)


def test_shapes_the_models_can_take():
    check_input_shape("resnet50", (224, 160, 3))  # non-square
    check_input_shape("resnet50", (225, 225, 3))  # odd: every path rounds up alike
    check_input_shape("cifar_resnet20", (30, 30, 3))  # subsampling shortcuts round up like the convs
    check_input_shape("resnet50", (None, None, 3))  # variable size: build() only
    with pytest.raises(UsageError, match="fixed height and width"):
        describe("resnet50", input_shape=(None, None, 3))
    with pytest.raises(UsageError, match="num_classes"):
        describe("resnet50", num_classes=0)


# --- Keras: the builder agrees with the table --------------------------------------------------------------


@pytest.mark.parametrize("name", list_models())
def test_keras_counts_match_the_analytic_ones(name):
    """Built at the default input (symbolic, no forward): params and MACs equal describe()'s."""
    with keras.StatelessScope():  # defers running the initializers: only shapes are needed, and 2× faster
        model = build(name)
    d = describe(name)
    assert _trainable(model) == d["trainable_params"]
    assert _non_trainable(model) == d["non_trainable_params"]
    assert _keras_macs(model) == d["forward_macs"]
    assert model.output.shape == (None, d["num_classes"])
    assert model.get_layer("predictions").activation is keras.activations.linear  # logits, no softmax


def test_use_bias_counts_match_keras_applications():
    assert describe("resnet50", use_bias=True)["trainable_params"] == 25_583_592  # ResNet50
    # keras-resnet50 *is* keras.applications.ResNet50: its counts are resnet50's with the biases
    assert describe("keras-resnet50")["trainable_params"] == 25_583_592
    assert get_spec("keras-resnet50").builder == "keras.applications" and get_spec("resnet50").builder == "resnet_lab"
    assert describe("resnet50_v2", use_bias=True)["trainable_params"] == 25_568_360  # ResNet50V2


@pytest.mark.parametrize(
    ("name", "reference"),
    [("resnet50", "ResNet50"), ("resnet50_v2", "ResNet50V2")],
)
def test_same_function_as_keras_applications(name, reference):
    shape = (64, 64, 3)
    ref = getattr(keras.applications, reference)(weights=None, input_shape=shape, classifier_activation=None)
    ours = build(name, input_shape=shape, use_bias=True)
    assert _trainable(ours) == _trainable(ref) == describe(name, use_bias=True)["trainable_params"]
    _randomize(ref)
    _copy_by_name(ref, ours)
    x = np.random.default_rng(1).standard_normal((2, *shape)).astype("float32")
    want = np.asarray(ref(x, training=False))
    got = np.asarray(ours(x, training=False))
    assert np.abs(want).max() > 1e-2  # the comparison is not between two zeros
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize(
    ("name", "size"),
    [("resnet18", 32), ("resnet50_v2", 32), ("cifar_resnet20", 16), ("cifar_resnet32_v2", 16)],
)
def test_channels_first_computes_the_same_as_channels_last(name, size):
    """Where TensorFlow runs oneDNN (on by default only on CPUs with VNNI, bf16 or AMX: the capability table), its
    CPU Conv2D takes NCHW and both layouts agree; where it runs Eigen (an AVX2-only host, TF_ENABLE_ONEDNN_OPTS=0),
    NCHW is refused with TensorFlow's documented error, which the model must not hide."""
    last = build(name, input_shape=(size, size, 3), data_format="channels_last")
    first = build(name, input_shape=(3, size, size), data_format="channels_first")
    _randomize(last)
    _copy_by_name(last, first)  # Keras kernels are (h, w, in, out) in both formats
    x = np.random.default_rng(2).standard_normal((2, size, size, 3)).astype("float32")
    want = np.asarray(last(x, training=False))
    if not provenance.onednn_state()["enabled"]:
        with pytest.raises(Exception, match="only supports the NHWC tensor format on the CPU"):
            first(np.transpose(x, (0, 3, 1, 2)), training=False)
        return
    got = np.asarray(first(np.transpose(x, (0, 3, 1, 2)), training=False))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize(
    "name",
    ["resnet18", "resnet50", "resnet50_v1.5", "resnet50_v2", "cifar_resnet20", "cifar_resnet32_v2",
     "cifar_resnet164_v2"],
)
def test_forward_backward_step_on_a_tiny_input(name):
    import tensorflow as tf  # the test drives the default backend's autodiff; the model itself is pure Keras

    size = 32 if get_spec(name).family == "imagenet" else 8
    model = build(name, input_shape=(size, size, 3), num_classes=5)
    x = np.random.default_rng(3).standard_normal((2, size, size, 3)).astype("float32")
    y = np.array([1, 3])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(y, logits)
    grads = tape.gradient(loss, model.trainable_weights)
    assert logits.dtype == "float32" and logits.shape == (2, 5)
    assert np.isfinite(float(loss))
    assert all(g is not None and np.isfinite(np.asarray(g)).all() for g in grads)
    before = np.asarray(model.get_layer("predictions").kernel).copy()
    keras.optimizers.SGD(0.1).apply_gradients(zip(grads, model.trainable_weights, strict=True))
    assert not np.allclose(before, np.asarray(model.get_layer("predictions").kernel))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_float32_logits(policy):
    model = build("cifar_resnet20", input_shape=(8, 8, 3), dtype_policy=policy)
    assert model.get_layer("conv2_block1_1_conv").compute_dtype == policy.split("_")[1]
    assert model.get_layer("conv2_block1_1_conv").kernel.dtype == "float32"
    logits = model(np.ones((2, 8, 8, 3), "float32"), training=False)
    assert logits.dtype == "float32" and np.isfinite(np.asarray(logits)).all()


def test_build_accepts_non_square_inputs_and_names_layers_like_keras():
    model = build("resnet18", input_shape=(32, 48, 3), num_classes=7)
    assert model.output.shape == (None, 7)
    for layer in ("conv1_conv", "conv2_block1_1_conv", "conv3_block1_0_conv", "conv5_block2_2_bn"):
        model.get_layer(layer)
    with pytest.raises(UsageError, match="channels_last, channels_first"):
        build("resnet18", data_format="NCHW")
    with pytest.raises(UsageError, match="dtype_policy"):
        build("resnet18", dtype_policy="float8")


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # inside Keras' saver
def test_saved_model_reloads_with_the_zero_pad_shortcut(tmp_path):
    model = build("cifar_resnet20", input_shape=(8, 8, 3))
    path = tmp_path / "m.keras"
    model.save(path)
    again = keras.saving.load_model(path)
    x = np.random.default_rng(4).standard_normal((2, 8, 8, 3)).astype("float32")
    np.testing.assert_allclose(np.asarray(again(x)), np.asarray(model(x)), rtol=0, atol=1e-6)


def test_every_convolution_starts_from_its_own_kernel():
    """He init drawn per layer: no two convolutions of one shape start equal (a shared unseeded Keras
    initializer gave every same-shaped convolution the same kernel), and a seeded build repeats itself."""

    def kernels():
        keras.utils.set_random_seed(0)
        model = build("cifar_resnet20", input_shape=(8, 8, 3))
        return [w.numpy() for w in model.weights if w.name == "kernel" and len(w.shape) == 4]

    first, again = kernels(), kernels()
    same_shape = [(a, b) for i, a in enumerate(first) for b in first[i + 1:] if a.shape == b.shape]
    assert len(same_shape) > 10 and not any(np.array_equal(a, b) for a, b in same_shape)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
