"""The engines a conformance kit runs on, one registry: how each opens a case and which precisions it takes.

IREE compiles the kit's StableHLO modules for the host CPU (every case's ``main`` as one module), JAX calls the same
module as ``jax.export`` serialized it, ONNX Runtime and OpenVINO run the one-node ``model.onnx`` the way every
command opens them (:func:`resnet_lab.steps.engine_step.onnx_outputs`; OpenVINO told to keep ``precision``). The kit's
reference is Keras on :data:`REFERENCE_BACKEND`; the engines a bisection compares layer by layer are those that run
the whole ONNX export (:data:`BISECT_ENGINES`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resnet_lab.conformance import kit as K
from resnet_lab.core.choices import ENGINE_IRS
from resnet_lab.core.errors import UsageError

REFERENCE_BACKEND = "jax"  # Keras' backend that computes a kit's reference, its float64 twin and its activations
ONNX_REFERENCE_ENGINE = "onnxruntime"  # what computes every node's inputs of the ONNX export on the photographs
PRECISIONS_BY_ENGINE = {"iree": ("fp32",), "jax": ("fp32",), "onnxruntime": ("fp32",),
                        "openvino": ("fp32", "bf16")}  # bf16: OpenVINO's precision hint
BISECT_ENGINES = tuple(e for e, ir in ENGINE_IRS.items() if ir == "onnx")  # they run the whole export
# they run the model's StableHLO with every layer's output returned (resnet_lab.conformance.bisect)
BISECT_STABLEHLO = tuple(e for e, ir in ENGINE_IRS.items() if ir == "stablehlo")


class CaseError(RuntimeError):
    """A case's error already said in one line (where the engine compiled the kit at once)."""


def check_precision(backend: str, precision: str) -> None:
    """One line where ``backend`` does not take ``precision``."""
    if precision not in PRECISIONS_BY_ENGINE[backend]:
        bf16 = ", ".join(e for e, p in PRECISIONS_BY_ENGINE.items() if "bf16" in p)
        raise UsageError(f"--precision: {precision!r}: fp32 on every engine; bf16 on {bf16} (its precision hint)")


def reason(exc: BaseException) -> str:
    """Why a case could not run, in one line."""
    return str(exc) if isinstance(exc, CaseError) else first_error(exc)


def first_error(exc: BaseException) -> str:
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
    that fails, each half again, down to the cases that fail alone, whose error is theirs (:func:`first_error`)."""

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
                self.errors[cases[0].name] = first_error(exc)
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
            raise CaseError(self.errors[case.name])
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


def _onnx(engine: str, precision: str) -> Callable[[Path, list[Any]], list[Any]]:
    import onnx

    from resnet_lab.steps.engine_step import onnx_outputs

    def run(case: Path, inputs: list[Any]) -> list[Any]:
        path = case / K.MODULE["onnx"]
        outs = onnx_outputs(engine, path, precision)(inputs)
        return [outs[o.name] for o in onnx.load(str(path), load_external_data=False).graph.output]

    return run


def runner(backend: str, precision: str = "fp32") -> Callable[[Path, list[Any]], list[Any]]:
    """``run(case folder, inputs) -> outputs`` on ``backend`` (its imports happen here)."""
    if ENGINE_IRS[backend] == "onnx":
        return _onnx(backend, precision)
    return {"iree": _Iree, "jax": _jax}[backend]()


def every_layer_outputs(backend: str, folder: Path, images: Any, edit: Callable[[str], str] | None = None
                        ) -> list[Any]:
    """The every-layer StableHLO module in ``folder`` (``every_layer.mlir``, ``every_layer.jaxexport``:
    :func:`resnet_lab.conformance.export_child.every_layer`) on ``backend`` (one of :data:`BISECT_STABLEHLO`), on
    ``images``: its results in order. IREE compiles the text for the host CPU (``edit``: the text it compiles
    instead, an op planted wrong); JAX calls the serialized module (no ``edit``)."""
    import numpy as np

    if backend == "iree":
        from resnet_lab.steps import engine_step

        text = (folder / "every_layer.mlir").read_text()
        text = edit(text) if edit else text
        vmfb, _, _ = engine_step.iree_compile(text)
        out = engine_step.iree_function(vmfb, engine_step.module_name(text), engine_step.threads(None))(images)
        return [x.to_host() if hasattr(x, "to_host") else np.asarray(x) for x in out]
    if backend == "jax":
        import jax

        if edit:
            raise UsageError("a planted edit is for IREE's compile of the module's text; JAX calls the serialized one")
        exported = jax.export.deserialize(bytearray((folder / "every_layer.jaxexport").read_bytes()))
        return [np.asarray(x) for x in exported.call(images)]
    raise ValueError(f"{backend}: not an engine that runs the every-layer StableHLO ({', '.join(BISECT_STABLEHLO)})")
