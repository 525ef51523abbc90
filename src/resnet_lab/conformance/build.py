"""``conformance export``: a model's op cases as a kit (:mod:`resnet_lab.conformance.kit`), made in a child process
(:mod:`resnet_lab.conformance.export_child`) from the export's weights (and its ONNX model, for an ONNX kit)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.bench.timing import ARTIFACT_TIMEOUT_S
from resnet_lab.conformance import kit as K
from resnet_lab.conformance.engines import REFERENCE_BACKEND
from resnet_lab.conformance.export_child import CHILD
from resnet_lab.core import child, provenance
from resnet_lab.core.choices import KIT_IRS, MODES, check_choice, check_int
from resnet_lab.core.errors import UsageError
from resnet_lab.models import specs

REFERENCE_PRECISION = "fp32"  # Keras' fp32 model; a reduced precision is an engine's, judged against it


def check(model: str, ir: str, mode: str, out: str | Path, batch_size: int = 1,
          image_size: int | None = None) -> int:
    """The image size, or one line naming what is wrong (before anything is imported or made)."""
    check_choice("--ir", ir, KIT_IRS)
    check_choice("--mode", mode, MODES)
    check_int("--batch-size", batch_size, 1)
    spec = specs.zoo_spec(model, "a conformance kit")
    if ir == "onnx" and mode == "train":
        raise UsageError("--ir onnx --mode train: the export's ONNX model is an inference graph; a training kit is "
                         "StableHLO or HLO")
    size = image_size or spec.input_size
    specs.check_input_shape(model, (size, size, 3))
    where = Path(out)
    if where.exists() and (not where.is_dir() or any(where.iterdir())):
        raise UsageError(f"--out {out}: exists and is not empty (a kit is written into a new folder; nothing is "
                         "overwritten)")
    return size


def export_kit(model: str, ir: str, mode: str, out: str | Path, *, batch_size: int = 1,
               image_size: int | None = None, export_dir: str | None = None, timeout_s: float = ARTIFACT_TIMEOUT_S,
               testdata: bool = False) -> dict[str, Any]:
    """Write the kit of ``model``'s ``mode`` step in ``ir`` into ``out`` (new or empty); its ``kit.json``.
    ``testdata``: each StableHLO case also as StableHLO's testdata file (:mod:`resnet_lab.conformance.testdata`)."""
    return export_kits(model, [(ir, mode, out)], batch_size=batch_size, image_size=image_size,
                       export_dir=export_dir, timeout_s=timeout_s, testdata=testdata)[0]


def export_kits(model: str, kits: list[tuple[str, str, str | Path]], *, batch_size: int = 1,
                image_size: int | None = None, export_dir: str | None = None, timeout_s: float = ARTIFACT_TIMEOUT_S,
                testdata: bool = False) -> list[dict[str, Any]]:
    """:func:`export_kit` for each ``(ir, mode, out)`` of ``kits``, all made in one child process (one import, the
    model built once): their ``kit.json`` documents, in order, each with its own ``seconds``. Every kit is checked
    before anything is made."""
    sizes = {check(model, ir, mode, out, batch_size, image_size) for ir, mode, out in kits}
    (size,) = sizes
    onnx = any(ir == "onnx" for ir, _, _ in kits)
    t0 = time.perf_counter()
    where = export.ensure(export_dir, model, size, [batch_size], onnx=onnx, stablehlo=False, timeout_s=timeout_s)
    requests = []
    for ir, mode, out in kits:
        Path(out).mkdir(parents=True, exist_ok=True)
        requests.append({"model": model, "ir": ir, "mode": mode, "image_size": size, "batch_size": batch_size,
                         "seed": export.SEED, "weights": str(where / export.WEIGHTS), "onnx": str(where / export.ONNX),
                         "out": str(out)})
    docs = []
    with child.Child(CHILD, requests, env=export.child_env(REFERENCE_BACKEND)) as kid:
        for (ir, mode, out), outcome in zip(kits, kid.outcomes(timeout_s), strict=False):
            if not outcome.ok:
                raise RuntimeError(outcome.reason(f"the {ir} kit of {model}"))
            docs.append(_write_doc(model, ir, mode, Path(out), size, batch_size, outcome.reply, testdata,
                                   time.perf_counter() - t0))
            t0 = time.perf_counter()
    return docs


def _write_doc(model: str, ir: str, mode: str, out: Path, size: int, batch_size: int, made: dict[str, Any],
               testdata: bool, seconds: float) -> dict[str, Any]:
    if testdata and ir == "stablehlo":
        from resnet_lab.conformance import testdata as td

        td.write_kit(out, made["cases"])
    doc = {"model": model, "ir": ir, "mode": mode, "precision": REFERENCE_PRECISION, "image_size": size,
           "batch_size": batch_size, "cases": made["cases"], "ops_in_model": made["primitives"],
           "inputs": f"{batch_size} of scikit-learn's sample photographs (resnet_lab.export.photos), the export's "
                     f"weights (seed {export.SEED})",
           "made_by": _made_by(ir), "rule": K.RULE, "seconds": seconds,
           "testdata": bool(testdata and ir == "stablehlo"),
           "provenance": provenance.collect()}
    (out / K.KIT).write_text(json.dumps(doc, indent=1, default=str))
    (out / K.README).write_text(readme(doc))
    return doc


def _made_by(ir: str) -> str:
    if ir == "onnx":
        return ("every node of the export's model.onnx (torch.onnx.export of the native model, the Keras weights); "
                "inputs from ONNX Runtime running it whole; reference and float64 outputs from onnx.reference")
    return ("jax.make_jaxpr of the Keras step (JAX backend), evaluated one primitive at a time; each distinct "
            f"primitive signature alone under jax.jit, lowered to {'StableHLO' if ir == 'stablehlo' else 'HLO'}; "
            "float64 outputs from the same primitive with jax x64 on")


def readme(doc: dict[str, Any]) -> str:
    """The kit's README: what is in it and how a backend team runs it without this package."""
    ir = doc["ir"]
    how = {
        "stablehlo": "Each case's `module.mlir` is a `main` of one op. Compile and run it with your stack, feed "
                     "`inputs/<i>.npy` in order, compare output i with `expected/float64_<i>.npy`. With IREE: "
                     "the `command` in `case.json`. With JAX: `jax.export.deserialize(open('module.jaxexport', "
                     "'rb').read()).call(*inputs)`.",
        "hlo": "Each case's `module.hlo` is XLA's HLO text of one op: `run_hlo_module` (XLA's tool) runs it against "
               "XLA's interpreter (`command` in `case.json`), or feed `inputs/<i>.npy` to your own HLO runner.",
        "onnx": "Each case is a one-node model in ONNX's backend-test layout: `model.onnx` and "
                "`test_data_set_0/input_<i>.pb`, `output_<i>.pb` (the float64 result, in the output's type). Any "
                "ONNX backend-test runner takes the folder.",
    }[ir]
    if doc.get("testdata"):
        how += (" With StableHLO's interpreter: each case's `testdata.mlir` holds its inputs and expected (fp32 "
                "reference) outputs and ends in `check.expect_close`, as StableHLO's own testdata files do: "
                "`stablehlo-opt -inline testdata.mlir | stablehlo-translate --interpret`.")
    return f"""# Conformance kit: {doc['model']}, {doc['mode']}, {ir}

{len(doc['cases'])} cases, one per distinct op signature (op, input shapes and types, attributes) of the model's
{'inference' if doc['mode'] == 'infer' else 'training step'} ({doc['ops_in_model']} ops in the traced step).
Inputs: {doc['inputs']}. Made by: {doc['made_by']}.

## Running it

{how}

## Passing

{doc['rule']}. Each case's `case.json` states its `kind`, `reference_error` and `tolerance`, the layers it comes from
and how many times the model calls it (`calls`).

With resnet-lab installed: `resnet-lab conformance run <this folder> --backend <engine>`.
"""
