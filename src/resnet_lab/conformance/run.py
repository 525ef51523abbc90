"""``conformance run``: every case of a kit on one engine, judged by the kit's tolerance rule.

Per case: ``pass`` or ``fail`` (the largest output error against the case's tolerance), or ``unsupported`` (the
engine could not compile or run it: its first error line, as data). The engines: IREE (``module.mlir``, compiled
for the host CPU), JAX (the same module as ``jax.export`` serialized it), ONNX Runtime and OpenVINO (the one-node
``model.onnx``; OpenVINO told to keep fp32, ``INFERENCE_PRECISION_HINT``, unless ``precision`` says otherwise).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resnet_lab.conformance import kit as K
from resnet_lab.core import requirements
from resnet_lab.core.errors import UsageError

STATUSES = ("pass", "fail", "unsupported")


def _first_error(exc: BaseException) -> str:
    """The line of an engine's error that says what went wrong (a compiler's ``error:`` line where it printed
    one), shortened."""
    text = str(exc)
    line = next((x.strip() for x in text.splitlines() if "error:" in x), "") or \
        next((x.strip() for x in text.splitlines() if x.strip()), type(exc).__name__)
    line = re.sub(r"^.*?error: ", "", line).split(": %")[0]  # the message, not the op it prints after it
    return f"{type(exc).__name__}: {line}"[:300]


class _Iree:
    """IREE on the kit's StableHLO modules, compiled for the host CPU. :meth:`prepare` compiles every case's
    ``main`` as one module (one compiler run for the kit instead of one per case: a third of a second each); where
    that fails, each half again, down to the cases that fail alone, whose error is theirs (:func:`_first_error`)."""

    def __init__(self) -> None:
        import iree.runtime as rt

        from resnet_lab.steps.engine_step import IREE_DEVICE

        self.config = rt.Config(IREE_DEVICE)
        self.functions: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    @staticmethod
    def _merged(cases: list[Path]) -> str:
        bodies = []
        for i, case in enumerate(cases):
            text = (case / K.MODULE["stablehlo"]).read_text()
            body = text[text.index("\n", text.index("module ")) + 1: text.rindex("}")]  # its header line dropped
            bodies.append(re.sub(r"@([A-Za-z_][\w$.]*)", lambda m, i=i: f"@c{i}_{m.group(1)}", body))
        return "module @kit {\n" + "\n".join(bodies) + "\n}\n"

    def _compile(self, cases: list[Path]) -> None:
        import iree.compiler as ic
        import iree.runtime as rt

        try:
            vmfb = ic.compile_str(self._merged(cases), input_type="stablehlo", target_backends=["llvm-cpu"],
                                  extra_args=["--iree-llvmcpu-target-cpu=host"])
        except Exception as exc:
            if len(cases) == 1:
                self.errors[cases[0].name] = _first_error(exc)
                return
            half = len(cases) // 2
            self._compile(cases[:half])
            self._compile(cases[half:])
            return
        ctx = rt.SystemContext(config=self.config)
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
        for i, case in enumerate(cases):
            self.functions[case.name] = ctx.modules.kit[f"c{i}_main"]

    def prepare(self, cases: list[Path]) -> None:
        self._compile(cases)

    def __call__(self, case: Path, inputs: list[Any]) -> list[Any]:
        if case.name in self.errors:
            raise RuntimeError(self.errors[case.name])
        out = self.functions[case.name](*inputs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        return [x.to_host() if hasattr(x, "to_host") else x for x in outs]


def _jax() -> Callable[[Path, list[Any]], list[Any]]:
    import jax

    def run(case: Path, inputs: list[Any]) -> list[Any]:
        exported = jax.export.deserialize(bytearray((case / "module.jaxexport").read_bytes()))
        out = exported.call(*inputs)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    return run


def _onnxruntime() -> Callable[[Path, list[Any]], list[Any]]:
    import onnxruntime as ort

    def run(case: Path, inputs: list[Any]) -> list[Any]:
        session = ort.InferenceSession(str(case / K.MODULE["onnx"]), providers=["CPUExecutionProvider"])
        return session.run(None, {i.name: x for i, x in zip(session.get_inputs(), inputs, strict=True)})

    return run


def _openvino(precision: str) -> Callable[[Path, list[Any]], list[Any]]:
    import openvino as ov

    core = ov.Core()
    hint = {"fp32": "f32", "bf16": "bf16"}[precision]

    def run(case: Path, inputs: list[Any]) -> list[Any]:
        compiled = core.compile_model(str(case / K.MODULE["onnx"]), "CPU", {"INFERENCE_PRECISION_HINT": hint})
        result = compiled.create_infer_request().infer(dict(enumerate(inputs)))
        return [result[o] for o in compiled.outputs]

    return run


def runner(backend: str, precision: str = "fp32") -> Callable[[Path, list[Any]], list[Any]]:
    """``run(case folder, inputs) -> outputs`` on ``backend`` (its imports happen here)."""
    if backend == "openvino":
        return _openvino(precision)
    return {"iree": _Iree, "jax": _jax, "onnxruntime": _onnxruntime}[backend]()


def _arrays(folder: Path, prefix: str) -> list[Any]:
    import numpy as np

    files = sorted(folder.glob(f"{prefix}*.npy"), key=lambda f: int(re.sub(r"\D", "", f.stem) or 0))
    return [np.load(f) for f in files]


def check(where: str | Path, backend: str, precision: str = "fp32") -> dict[str, Any]:
    """The kit's ``kit.json``, or one line naming what is wrong (before any engine is imported)."""
    kit = K.read_kit(where)
    K.check_engine(kit, backend, where)
    if precision not in ("fp32", "bf16") or (precision == "bf16" and backend != "openvino"):
        raise UsageError(f"--precision: {precision!r}: fp32 on every engine; bf16 on openvino (its precision hint)")
    if missing := requirements.missing(backend):
        raise UsageError(f"--backend {backend}: {missing}")
    return kit


def run_kit(where: str | Path, backend: str, precision: str = "fp32") -> list[dict[str, Any]]:
    """Every case of the kit at ``where`` on ``backend``: one result per case (``case``, ``op``, ``status``,
    ``error``: the largest output error, ``tolerance``, ``reason``: why it failed or is unsupported, ``layers``)."""
    kit = check(where, backend, precision)
    run = runner(backend, precision)
    if hasattr(run, "prepare"):
        run.prepare([Path(where) / name for name in kit["cases"]])
    results = []
    for name in kit["cases"]:
        case = Path(where) / name
        meta = json.loads((case / K.CASE).read_text())
        row = {"case": name, "op": meta["op"], "kind": meta["kind"], "tolerance": meta["tolerance"],
               "calls": meta.get("calls", 1), "layers": "+".join(meta.get("layers", [])[:3]), "error": None,
               "status": "unsupported", "reason": "", "seconds": 0.0}
        t0 = time.perf_counter()
        try:
            outs = run(case, _arrays(case / "inputs", ""))
        except Exception as exc:  # the engine's own error, kept as data
            row.update(reason=str(exc) if isinstance(exc, RuntimeError) and backend == "iree" else _first_error(exc),
                       seconds=time.perf_counter() - t0)
            results.append(row)
            continue
        expected = _arrays(case / "expected", "float64_")
        reference = _arrays(case / "expected", "reference_")
        errors = [K.error(o, e) for o, e in zip(outs, expected, strict=False)]
        row.update(K.worst([K.measures(o, e, r, getattr(r, "dtype", "float32"))
                            for o, e, r in zip(outs, expected, reference, strict=False)]))
        worst = max(errors, default=float("inf")) if len(outs) == len(expected) else float("inf")
        passed = worst <= meta["tolerance"]
        row.update(status="pass" if passed else "fail", error=worst, seconds=time.perf_counter() - t0,
                   reason="" if passed else f"error {worst:.3g} > tolerance {meta['tolerance']:.3g}"
                   + ("" if len(outs) == len(expected) else f" ({len(outs)} outputs, {len(expected)} expected)"))
        results.append(row)
    return results


def summary(results: list[dict[str, Any]]) -> str:
    """One line: how many cases passed, failed, are unsupported, and which failed."""
    counts = {s: sum(r["status"] == s for r in results) for s in STATUSES}
    line = f"{len(results)} cases: {counts['pass']} pass, {counts['fail']} fail, {counts['unsupported']} unsupported"
    failed = [f"{r['case']} ({r['reason']})" for r in results if r["status"] == "fail"]
    if failed:
        line += "; failed: " + ", ".join(failed[:10]) + (" ..." if len(failed) > 10 else "")
    return line
