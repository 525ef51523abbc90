"""The engines a kit runs on (resnet_lab.conformance.engines): the precisions each takes, and IREE's one module for
a whole kit, whose case functions must not collide."""

from __future__ import annotations

import re

import pytest

from resnet_lab.conformance import engines
from resnet_lab.conformance import kit as K
from resnet_lab.core.choices import ENGINE_IRS
from resnet_lab.core.errors import UsageError

CASE = """module @jit_alone attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>) {
    %0 = call @relu(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @relu(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    return %arg0 : tensor<2xf32>
  }
}
"""


def test_every_kit_engine_has_its_precisions_and_bf16_is_openvino_s_alone():
    assert set(engines.PRECISIONS_BY_ENGINE) == set(ENGINE_IRS)
    engines.check_precision("openvino", "bf16")
    for backend in ("iree", "jax", "onnxruntime"):
        with pytest.raises(UsageError, match=r"--precision: 'bf16': fp32 on every engine; bf16 on openvino"):
            engines.check_precision(backend, "bf16")
    assert engines.BISECT_ENGINES == ("onnxruntime", "openvino")


def test_iree_s_kit_module_renames_each_case_s_functions_apart(tmp_path):
    cases = []
    for name in ("000_max", "001_add"):
        (tmp_path / name).mkdir()
        (tmp_path / name / K.MODULE["stablehlo"]).write_text(CASE)
        cases.append(tmp_path / name)
    merged = engines._Iree._merged(cases)
    assert merged.startswith("module @kit {")
    defined = re.findall(r"func\.func (?:public|private) @([\w$.]+)", merged)
    assert defined == ["c0_main", "c0_relu", "c1_main", "c1_relu"]  # each case's symbols under its own prefix
    assert "call @c0_relu" in merged and "call @c1_relu" in merged and "@jit_alone" not in merged


def test_a_case_s_error_keeps_its_line_and_an_engine_s_error_is_cut_to_its_first():
    assert engines.reason(engines.CaseError("compiled alone: 'stablehlo.foo' failed")) == \
        "compiled alone: 'stablehlo.foo' failed"
    long = RuntimeError("while compiling\n<stdin>:3:5: error: failed to legalize operation 'x': %0 = foo\nmore")
    assert engines.reason(long) == "RuntimeError: failed to legalize operation 'x'"
