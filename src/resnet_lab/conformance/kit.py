"""A conformance kit on disk, and the tolerance rule, in one place.

A kit is a folder: ``kit.json`` (the model, IR, mode, how the cases were made, the case folders in order), a
generated ``README.md``, and one folder per case (``NNN_<op>``):

- the module: ``module.mlir`` (StableHLO, a ``main`` of the op alone), ``module.hlo`` (XLA's HLO text) or
  ``model.onnx`` (a one-node model, with ONNX's backend-test layout ``test_data_set_0/input_<i>.pb``,
  ``output_<i>.pb``);
- ``inputs/<i>.npy``: the values the op received when the reference model classified real photographs;
- ``expected/reference_<i>.npy`` (what the reference computed, fp32) and ``expected/float64_<i>.npy`` (the same op
  evaluated in float64 on the same inputs);
- ``case.json``: op, signature, layers, pass, how many times the model calls it, the tolerance and its reason, and a
  command that runs the case with the engine's own tool.

**The tolerance rule** (:func:`tolerance`). An output's error is ``max |out - float64| / max |float64|`` (the
tensor's largest magnitude sets its scale: activations near zero are not judged by their relative error). A case
passes when every output's error is at most ``max(FLOOR[kind], SAFETY × the reference's own error)``: an engine may
be a few times less exact than the fp32 reference, never less exact than fp32 arithmetic allows for the op's kind
(:func:`kind_of`): an op that moves or selects values must be exact; an elementwise op a few ulps; a transcendental
one more; a reduction or contraction (convolution, dot, sum) grows with its length, which the reference's own error
already shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from resnet_lab.core.choices import ENGINE_IRS, KIT_IRS
from resnet_lab.core.errors import UsageError

KIT = "kit.json"
CASE = "case.json"
README = "README.md"
MODULE = {"stablehlo": "module.mlir", "hlo": "module.hlo", "onnx": "model.onnx"}

# ops (JAX primitives, StableHLO ops, ONNX op types, lower case) whose outputs are some of their inputs' values
EXACT = frozenset({
    "reshape", "transpose", "broadcast_in_dim", "broadcast", "pad", "slice", "dynamic_slice", "concatenate",
    "squeeze", "expand_dims", "select_n", "select", "max", "min", "maximum", "minimum", "reduce_max", "reduce_min",
    "argmax", "argmin", "copy", "copy_p", "iota", "eq", "ne", "gt", "ge", "lt", "le", "compare", "stop_gradient",
    "relu", "maxpool", "flatten", "identity", "unsqueeze", "neg", "negate", "abs", "sign", "reduce_window_max",
    "gather", "scatter", "convert_element_type", "convert",
})
TRANSCENDENTAL = frozenset({
    "exp", "exp2", "log", "log1p", "expm1", "rsqrt", "sqrt", "tanh", "logistic", "sigmoid", "erf", "pow",
    "integer_pow", "reciprocal", "softmax", "logsoftmax", "log_softmax",
})
REDUCTION = frozenset({
    "conv_general_dilated", "convolution", "conv", "dot_general", "dot", "gemm", "matmul", "reduce_sum", "reduce",
    "reduce_window_sum", "reduce_window", "cumsum", "select_and_scatter_add", "select_and_scatter", "reducemean",
    "reducesum", "globalaveragepool", "averagepool", "reduce_precision", "batchnormalization",
})
FLOOR = {"exact": 0.0, "elementwise": 2.0 ** -21, "transcendental": 2.0 ** -19, "reduction": 2.0 ** -17}
SAFETY = 4.0


def kind_of(op: str) -> str:
    """exact, elementwise, transcendental or reduction (:data:`FLOOR`), from the op's name in any of the IRs."""
    name = op.lower().removeprefix("stablehlo.")
    if name in EXACT:
        return "exact"
    if name in TRANSCENDENTAL:
        return "transcendental"
    if name in REDUCTION:
        return "reduction"
    return "elementwise"


def error(out: Any, expected: Any) -> float:
    """``max |out - expected| / max |expected|`` (0 for equal tensors; the absolute error where expected is all
    zeros); booleans and integers: the share of elements that differ."""
    import numpy as np

    out, expected = np.asarray(out), np.asarray(expected)
    if out.shape != expected.shape:
        return float("inf")
    if expected.dtype.kind in "biu":
        return float(np.mean(out != expected)) if out.size else 0.0
    diff = np.abs(out.astype(np.float64) - expected.astype(np.float64))
    if not np.all(np.isfinite(diff)):
        return float("inf")
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    worst = float(np.max(diff)) if diff.size else 0.0
    return worst / scale if scale > 0 else worst


POLYGRAPHY = (1e-5, 1e-5)  # Polygraphy's default atol, rtol: an element fails only where it exceeds both
MEASURES = ("max_ulp", "max_abs", "max_rel", "atol_rtol", "rmse_ratio")  # beside each case's verdict


def _ordered(bits: Any) -> Any:
    """IEEE bit patterns as integers in the floats' order (negative floats mirrored), so that a difference of
    two is their distance in units in the last place."""
    import numpy as np

    signed = bits.astype(np.int64 if bits.dtype.itemsize < 8 else object)  # float64's patterns: Python integers
    top = 1 << (8 * bits.dtype.itemsize - 1)
    return np.where(signed < 0, -(signed + top), signed)


def ulp_distance(out: Any, expected: Any, dtype: Any = "float32") -> float:
    """The largest distance in ULPs of ``dtype`` (the case's) between ``out`` and ``expected`` rounded to it, as
    StableHLO's ``check.expect_close`` counts (``max_ulp_difference``); inf where a value is not finite."""
    import numpy as np

    dtype = np.dtype(dtype)
    ints = {2: np.int16, 4: np.int32, 8: np.int64}[dtype.itemsize]
    a = np.asarray(out).astype(dtype)
    b = np.asarray(expected).astype(dtype)
    if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("inf")
    if not a.size:
        return 0.0
    return float(np.max(np.abs(_ordered(a.view(ints)) - _ordered(b.view(ints)))))


def measures(out: Any, expected: Any, reference: Any = None, dtype: Any = "float32") -> dict[str, Any]:
    """The case's output in the three measures the anchors use, beside the kit's own rule (:func:`tolerance`):
    ``max_ulp`` (StableHLO's interpreter checks), ``max_abs`` and ``max_rel`` with ``atol_rtol``, pass or fail by
    Polygraphy's element-wise rule at its default tolerances (:data:`POLYGRAPHY`), and ``rmse_ratio``: the
    output's RMSE against float64 over the fp32 ``reference``'s own (TorchInductor's accuracy check passes a
    ratio up to its multiplier, 2 to 3). ``expected``: the float64 evaluation."""
    import numpy as np

    out, expected = np.asarray(out), np.asarray(expected)
    if out.shape != expected.shape or expected.dtype.kind in "biu":
        same = out.shape == expected.shape and bool(np.all(out == expected))
        return {"max_ulp": 0.0 if same else float("inf"), "max_abs": 0.0 if same else float("inf"),
                "max_rel": 0.0 if same else float("inf"), "atol_rtol": "pass" if same else "fail",
                "rmse_ratio": None}
    o, e = out.astype(np.float64), expected.astype(np.float64)
    diff = np.abs(o - e)
    atol, rtol = POLYGRAPHY
    rel = diff / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
    rmse = float(np.sqrt(np.mean(diff ** 2))) if diff.size else 0.0
    ratio = None
    if reference is not None:
        ref = float(np.sqrt(np.mean((np.asarray(reference).astype(np.float64) - e) ** 2))) if diff.size else 0.0
        ratio = rmse / ref if ref > 0 else (0.0 if rmse == 0 else float("inf"))
    finite = bool(np.all(np.isfinite(diff)))
    return {"max_ulp": ulp_distance(out, expected, dtype), "max_abs": float(np.max(diff)) if diff.size else 0.0,
            "max_rel": float(np.max(rel)) if diff.size else 0.0,
            "atol_rtol": "pass" if finite and not np.any((diff > atol) & (diff > rtol * np.abs(e))) else "fail",
            "rmse_ratio": ratio}


def worst(per_output: list[dict[str, Any]]) -> dict[str, Any]:
    """The measures of a case with several outputs: each the worst of its outputs."""
    if not per_output:
        return dict.fromkeys(MEASURES)
    ratios = [m["rmse_ratio"] for m in per_output if m["rmse_ratio"] is not None]
    return {"max_ulp": max(m["max_ulp"] for m in per_output), "max_abs": max(m["max_abs"] for m in per_output),
            "max_rel": max(m["max_rel"] for m in per_output),
            "atol_rtol": "fail" if any(m["atol_rtol"] == "fail" for m in per_output) else "pass",
            "rmse_ratio": max(ratios) if ratios else None}


def tolerance(kind: str, reference_error: float) -> float:
    """The largest error a case of ``kind`` may show (the module's docstring: the rule)."""
    return max(FLOOR[kind], SAFETY * reference_error)


RULE = (f"error = max|out - float64| / max|float64| per output; pass when error <= max(FLOOR[kind], {SAFETY:g} x "
        "the fp32 reference's own error); FLOOR: " + ", ".join(f"{k} {v:.2g}" for k, v in FLOOR.items()))


def read_kit(where: str | Path) -> dict[str, Any]:
    """``kit.json`` of the kit at ``where``, or one line saying why it is not a kit."""
    path = Path(where)
    if not path.is_dir():
        raise UsageError(f"{where}: no such folder (a kit is a folder made by `resnet-lab conformance export`)")
    if not (path / KIT).is_file():
        raise UsageError(f"{where}: not a conformance kit (no {KIT}; make one with `resnet-lab conformance export`)")
    try:
        kit = json.loads((path / KIT).read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}/{KIT}: not JSON ({exc})") from None
    if kit.get("ir") not in KIT_IRS or not isinstance(kit.get("cases"), list):
        raise UsageError(f"{where}/{KIT}: not a kit's (it names no IR of {', '.join(KIT_IRS)} or no cases)")
    return kit


def check_engine(kit: dict[str, Any], backend: str, where: str | Path) -> None:
    """One line where ``backend`` does not run the kit's IR."""
    if backend not in ENGINE_IRS:
        raise UsageError(f"--backend: {backend!r} is not one of: {', '.join(ENGINE_IRS)}")
    if ENGINE_IRS[backend] != kit["ir"]:
        takes = [e for e, ir in ENGINE_IRS.items() if ir == kit["ir"]]
        raise UsageError(f"{where} is a {kit['ir']} kit; {backend} takes {ENGINE_IRS[backend]} "
                         f"({'run it on ' + ', '.join(takes) if takes else 'XLA runs it: see its README'})")
