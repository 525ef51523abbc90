"""The zoo in plain PyTorch (models.build_torch): the same plan, the same counts, the same function as Keras'."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from resnet_lab import models  # noqa: E402
from resnet_lab.core.errors import UsageError  # noqa: E402
from resnet_lab.models import torch_builder  # noqa: E402


@pytest.mark.parametrize("name", ["resnet50_v1.5", "resnet50", "resnet50_v2", "cifar_resnet20",
                                  "cifar_resnet32_v2", "cifar_resnet164_v2", "tiny-resnet"])
def test_parameters_match_the_zoo(name):
    module, _ = models.build_torch(name, prefer_torchvision=False)
    assert torch_builder.count_params(module) == models.describe(name)["trainable_params"]


def test_resnet50_v15_has_torchvisions_names_and_count():
    """torchvision's resnet50: 25,557,032 parameters (its weights' documented num_params), 320 state keys."""
    module, source = models.build_torch("resnet50_v1.5", prefer_torchvision=False)
    state = module.state_dict()
    assert torch_builder.count_params(module) == 25_557_032
    assert len(state) == 320
    for key, shape in (("conv1.weight", (64, 3, 7, 7)), ("layer1.0.downsample.0.weight", (256, 64, 1, 1)),
                       ("layer2.0.conv2.weight", (128, 128, 3, 3)), ("layer4.2.bn3.running_var", (2048,)),
                       ("fc.weight", (1000, 2048))):
        assert tuple(state[key].shape) == shape, key
    # v1.5: the 3×3 strides, the 1×1 does not
    assert module.layer2[0].conv2.stride == (2, 2) and module.layer2[0].conv1.stride == (1, 1)
    assert "torchvision" in source


def test_keras_applications_model_is_refused():
    with pytest.raises(UsageError, match=r"keras\.applications"):
        models.build_torch("keras-resnet50")


@pytest.mark.parametrize("name,size", [("tiny-resnet", 16), ("cifar_resnet32_v2", 16), ("resnet50_v1.5", 64)])
def test_same_function_as_the_keras_model(name, size):
    """Keras' model (TensorFlow backend) and the torch module with its weights compute the same logits."""
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the Keras side runs on TensorFlow here")
    kmodel = models.build(name, input_shape=(size, size, 3), data_format="channels_last")
    # moving statistics away from 0/1, so that inference really uses them
    rng = np.random.default_rng(0)
    for layer in kmodel.layers:
        if layer.__class__.__name__.endswith("BatchNormalization"):
            g, b, m, v = layer.get_weights()
            layer.set_weights([g * rng.uniform(0.5, 1.5, g.shape), rng.normal(0, 0.1, b.shape),
                               rng.normal(0, 0.1, m.shape), rng.uniform(0.5, 2.0, v.shape)])
    module, _ = models.build_torch(name, prefer_torchvision=False)
    torch_builder.load_keras_weights(module, kmodel).eval()
    x = rng.uniform(0, 1, (2, size, size, 3)).astype("float32")
    expected = np.asarray(kmodel(x, training=False))
    with torch.no_grad():
        got = module(torch.from_numpy(x.transpose(0, 3, 1, 2).copy())).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * float(np.abs(expected).max()))
