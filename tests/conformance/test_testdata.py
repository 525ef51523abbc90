"""StableHLO's testdata files of a kit's cases: hex constants that read back as the arrays, and every case of the
conformance section's StableHLO kits parsed by a real MLIR parser (jaxlib's, the StableHLO dialect registered)."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

from resnet_lab.conformance import testdata

CASE = """module @jit_alone attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32> {jax.result_info = ""}) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
"""


def _parse(text: str) -> None:
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        ir.Module.parse(text)


def test_a_constant_is_the_array_s_bytes_in_hex():
    a = np.array([[1.0, -2.5], [0.0, 3.0]], np.float32)
    line = testdata.constant(a)
    assert line.endswith(": tensor<2x2xf32>")
    raw = bytes.fromhex(re.search(r'"0x([0-9A-F]+)"', line).group(1))
    assert np.array_equal(np.frombuffer(raw, "<f4").reshape(2, 2), a)
    assert testdata.tensor_type(np.float32(1.0)) == "tensor<f32>" and "tensor<3xi1>" in testdata.constant(
        np.array([True, False, True]))
    with pytest.raises(ValueError, match="complex64"):
        testdata.tensor_type(np.zeros(2, np.complex64))


@pytest.mark.skipif(not importlib.util.find_spec("jax"), reason="jax is not installed")
def test_a_case_becomes_a_module_that_checks_itself_as_stablehlo_s_testdata_do():
    x, y = np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32)
    text = testdata.module_text(CASE, [x, y], [x + y])
    assert text.startswith(testdata.RUN_LINE) and "func.func private @case(" in text and "public @main()" in text
    assert "stablehlo.custom_call @check.expect_close(%got, %want) {has_side_effect = true}" in text
    _parse(text)
    pair = "tensor<2x3xf32>, tensor<2x3xf32>"
    twice = CASE.replace("-> (tensor<2x3xf32> {", f"-> ({pair} {{").replace("return %0 : tensor<2x3xf32>",
                                                                         f"return %0, %0 : {pair}")
    two = testdata.module_text(twice, [x, y], [x + y, x + y])
    assert two.count("@check.expect_close(") == 2 and "%got#1, %want#1" in two
    _parse(two)
    with pytest.raises(ValueError, match="no public @main"):
        testdata.module_text(CASE.replace("public @main", "private @other"), [x, y], [x + y])


@pytest.mark.slow
@pytest.mark.skipif(not importlib.util.find_spec("jax"), reason="jax is not installed")
def test_every_case_of_the_section_s_stablehlo_kits_parses_as_testdata(conformance_section):
    kits = sorted(conformance_section.rglob("*-stablehlo-*/kit.json"))
    assert kits, "the section wrote no StableHLO kit"
    seen = 0
    for kit in kits:
        for case in sorted(p for p in kit.parent.iterdir() if (p / "module.mlir").is_file()):
            ins = [np.load(f) for f in sorted((case / "inputs").glob("*.npy"), key=lambda f: int(f.stem))]
            outs = [np.load(f) for f in sorted((case / "expected").glob("reference_*.npy"),
                                               key=lambda f: int(f.stem.split("_")[1]))]
            if not ins and not outs:
                continue  # a kit kept without its arrays
            _parse(testdata.module_text((case / "module.mlir").read_text(), ins, outs))
            seen += 1
    assert seen >= 100, seen  # the inference kit's cases and the training step's
