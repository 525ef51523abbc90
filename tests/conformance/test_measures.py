"""A case's output in the anchors' three error measures (ULP, Polygraphy's atol/rtol, TorchInductor's RMSE ratio)
beside the kit's own rule, on planted outputs and on the quick run's StableHLO kit."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from resnet_lab.conformance import kit as K
from resnet_lab.conformance import run as conformance_run


def planted(seed: int = 0):
    rng = np.random.default_rng(seed)
    exact = rng.normal(size=1000)  # the float64 evaluation
    reference = exact.astype(np.float32)  # fp32 rounding: at most half an ULP from it
    return exact, reference


def test_one_ulp_off_is_seen_in_the_ulp_column_only():
    exact, reference = planted()
    off = reference.copy()
    off[17] = np.nextafter(off[17], np.float32(np.inf))  # one element one ULP up
    m = K.measures(off, exact, reference)
    assert K.ulp_distance(reference, exact) == 0 and m["max_ulp"] == 1.0
    assert m["atol_rtol"] == "pass" and m["rmse_ratio"] < 1.1  # Polygraphy's rule and the RMSE ratio: unchanged
    assert K.error(off, exact) <= K.tolerance("elementwise", K.error(reference, exact))  # the kit's rule too
    assert K.ulp_distance(-reference, -exact) == 0 and K.ulp_distance(np.float32(-0.0), 0.0) == 0


def test_the_measures_fail_where_each_rule_does():
    exact, reference = planted(1)
    big = reference + np.float32(1e-3)  # beyond both atol and rtol for most elements
    m = K.measures(big, exact, reference)
    assert m["atol_rtol"] == "fail" and m["max_abs"] == pytest.approx(1e-3, rel=1e-3) and m["rmse_ratio"] > 100
    tiny = np.zeros(4, dtype=np.float32)
    tiny_exact = np.array([1e-9, -1e-9, 0.0, 2e-9])  # far off relatively, within atol: Polygraphy passes it
    assert K.measures(tiny, tiny_exact)["atol_rtol"] == "pass" and K.measures(tiny, tiny_exact)["max_rel"] >= 1.0
    assert K.measures(np.array([np.nan], np.float32), np.array([1.0]))["max_ulp"] == float("inf")
    assert K.worst([K.measures(reference, exact, reference), m])["atol_rtol"] == "fail"


@pytest.mark.slow
def test_every_case_of_the_section_s_stablehlo_kit_reports_the_three_measures(conformance_section):
    if not importlib.util.find_spec("jax"):
        pytest.skip("jax is not installed")
    kit = conformance_section / "conformance" / "tiny-resnet-stablehlo-infer"
    results = conformance_run.run_kit(kit, "jax")
    assert results and all(r["status"] == "pass" for r in results)
    for r in results:
        assert set(K.MEASURES) <= set(r), r
        assert r["max_ulp"] is not None and np.isfinite(r["max_ulp"]) and r["atol_rtol"] in ("pass", "fail")
    exact_ops = [r for r in results if r["kind"] == "exact"]
    assert exact_ops and all(r["max_ulp"] == 0 for r in exact_ops)  # a value moved is the value: 0 ULP
