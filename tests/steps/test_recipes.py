"""The engines' documented recipes: every setting cited, the documented one first, bad names one line, bf16 where
the engine and the CPU have it."""

from __future__ import annotations

import pytest

from resnet_lab.core.errors import UsageError
from resnet_lab.steps import recipes


def test_every_setting_of_every_recipe_names_its_source():
    rows = recipes.table()
    assert {r["engine"] for r in rows} == {"iree", "onnxruntime", "openvino", "tensorflow", "torch", "jax"}
    for r in rows:
        assert r["setting"] and r["does"] and len(r["source"]) > 20, r
    for engine, named in recipes.RECIPES.items():
        assert all(r.engine == engine and r.settings for r in named.values())
        assert recipes.resolve(engine).name == recipes.default(engine)  # "" is the documented one


def test_iree_s_documented_recipe_puts_convolutions_on_the_data_tiled_matmul_path():
    flags = recipes.options("iree", "documented", "fp32")["flags"]
    assert flags == ["--iree-llvmcpu-target-cpu=host", "--iree-opt-level=O3", "--iree-opt-data-tiling=true",
                     "--iree-global-opt-use-im2col-for-convs"]
    # bf16: the demotion needs named matmuls on the GlobalOptimization data-tiling path (IREE 3.13)
    bf16 = recipes.options("iree", "documented", "bf16")["flags"]
    assert "--iree-opt-data-tiling=true" not in bf16 and "--iree-global-opt-data-tiling" in bf16
    assert {"--iree-global-opt-demote-contraction-inputs-type=bf16", "--iree-opt-generalize-matmul=false",
            "--iree-global-opt-use-im2col-for-convs"} <= set(bf16)
    assert recipes.options("iree", "documented", "fp32")["flags"] == flags  # the recipe itself is not changed


def test_openvino_serves_one_image_by_latency_and_a_batch_by_throughput_and_bf16_by_its_hint():
    assert recipes.default("openvino", 1) == "latency" and recipes.default("openvino", 32) == "throughput"
    opts = recipes.options("openvino", "throughput", "bf16")
    assert opts["config"] == {"PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_PRECISION_HINT": "bf16"} and opts["async"]
    assert recipes.options("openvino", "latency", "fp32")["config"]["INFERENCE_PRECISION_HINT"] == "f32"
    assert "INFERENCE_PRECISION_HINT=bf16" in recipes.RECIPES["openvino"]["latency"].describe("bf16")


@pytest.mark.parametrize("engine, name, message", [
    ("openvino", "O3", "recipe 'O3' is not one of openvino's: latency, throughput"),
    ("tensorflow", "", "recipe: tensorflow takes no recipe"),
])
def test_a_recipe_that_does_not_exist_is_one_line(engine, name, message):
    with pytest.raises(UsageError, match=message) as info:
        recipes.resolve(engine, name)
    assert "\n" not in str(info.value)


def test_bf16_needs_an_engine_path_and_the_cpu_s_instructions():
    assert recipes.bf16_reason("openvino", ["avx2", "avx512f", "avx512_bf16"]) is None
    assert recipes.bf16_reason("iree", ["amx_bf16", "amx_tile"]) is None
    assert "no bf16 instructions" in recipes.bf16_reason("openvino", ["avx2", "avx512f"])
    assert "no bf16 kernels" in recipes.bf16_reason("onnxruntime", ["avx512_bf16"])
    assert recipes.bf16_reason("openvino", None) is None  # a host that does not say: the engine decides
