"""A StableHLO case as StableHLO's own testdata file: ``testdata.mlir``, what ``stablehlo-translate --interpret``
checks unchanged.

StableHLO's interpreter tests (``stablehlo/testdata/*.mlir``) are one module each: ``main`` takes nothing, calls
``@inputs()`` and ``@expected()`` (functions returning constants), computes the op, and ends with
``stablehlo.custom_call @check.expect_close(%result, %expected) {has_side_effect = true}``, the interpreter's check
by ULP distance. A case of the kit becomes that file: its module's ``main`` renamed ``@case`` (private), its inputs
and its fp32 reference outputs as hex dense constants (``dense<"0x…">``: the arrays' bytes, little-endian, as MLIR
reads them), one ``check.expect_close`` per output.

The interpreter's check is its own rule (a few ULPs by default), not the kit's (:data:`resnet_lab.conformance.kit.
RULE`): an op whose float32 result is not unique (a long reduction, a convolution) can fail it where the kit passes
it, and the case's ``max_ulp`` says by how much. The file holds the case's arrays as text (about twice their bytes),
so it is written on demand: ``resnet-lab conformance export --testdata``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from resnet_lab.conformance import kit as K

FILE = "testdata.mlir"
RUN_LINE = "// RUN: stablehlo-opt -inline %s | stablehlo-translate --interpret"
_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "int64": "i64",
           "int8": "i8", "uint8": "ui8", "bool": "i1"}
_MAIN = re.compile(r"func\.func public @main\((?P<args>.*?)\)\s*->\s*(?P<results>.+?)\s*\{\s*$", re.M)


def tensor_type(array: Any) -> str:
    """``tensor<1x32x32x16xf32>`` of a numpy array (a scalar: ``tensor<f32>``)."""
    dtype = _DTYPES.get(str(array.dtype))
    if dtype is None:
        raise ValueError(f"dtype {array.dtype} has no StableHLO element type here ({', '.join(_DTYPES)})")
    return "tensor<" + "".join(f"{d}x" for d in array.shape) + dtype + ">"


def constant(array: Any) -> str:
    """``stablehlo.constant dense<"0x…"> : tensor<…>``: the array's bytes, little-endian, in hex."""
    import numpy as np

    a = np.ascontiguousarray(array)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)  # i1 elements: one byte each in MLIR's hex form
    raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    return f'stablehlo.constant dense<"0x{raw.hex().upper()}"> : {tensor_type(array)}'


def module_text(case_module: str, inputs: list[Any], expected: list[Any]) -> str:
    """The testdata module of a case: its StableHLO ``case_module`` (a ``jax.jit`` lowering, public ``@main``), its
    ``inputs`` and ``expected`` outputs (arrays, in order)."""
    start = re.search(r"^module\b[^\n]*\{\s*$", case_module, re.M)  # the module's own line (its attributes on it)
    if start is None:
        raise ValueError("the case's text is no StableHLO module")
    body = case_module[start.end(): case_module.rindex("}")]
    if not _MAIN.search(body):
        raise ValueError("the case's module has no public @main")
    body = _MAIN.sub(lambda m: f"func.func private @case({m['args']}) -> {m['results']} {{", body, count=1)
    ins, outs = [tensor_type(x) for x in inputs], [tensor_type(y) for y in expected]
    many = len(outs) > 1
    lines = [RUN_LINE, "", "module @testcase {",
             f"  func.func public @main() -> ({', '.join(outs)}) {{"]
    if ins:
        lines.append(f"    %in{':' + str(len(ins)) if len(ins) > 1 else ''} = call @inputs() : () -> "
                     f"({', '.join(ins)})")
    lines.append(f"    %want{':' + str(len(outs)) if many else ''} = call @expected() : () -> ({', '.join(outs)})")
    args = ", ".join(f"%in#{i}" if len(ins) > 1 else "%in" for i in range(len(ins)))
    lines.append(f"    %got{':' + str(len(outs)) if many else ''} = call @case({args}) : ({', '.join(ins)}) -> "
                 f"({', '.join(outs)})")
    for i, t in enumerate(outs):
        got, want = (f"%got#{i}", f"%want#{i}") if many else ("%got", "%want")
        lines.append(f"    stablehlo.custom_call @check.expect_close({got}, {want}) {{has_side_effect = true}} : "
                     f"({t}, {t}) -> ()")
    results = ", ".join(f"%got#{i}" if many else "%got" for i in range(len(outs)))
    lines += [f"    return {results} : {', '.join(outs)}", "  }"]
    for name, arrays, types in (("inputs", inputs, ins), ("expected", expected, outs)):
        if not arrays:
            continue
        lines.append(f"  func.func private @{name}() -> ({', '.join(types)}) {{")
        lines += [f"    %c{i} = {constant(a)}" for i, a in enumerate(arrays)]
        lines += [f"    return {', '.join(f'%c{i}' for i in range(len(arrays)))} : {', '.join(types)}", "  }"]
    lines += [body.rstrip("\n").strip("\n"), "}", ""]
    return "\n".join(lines)


def write(case: Path) -> Path:
    """``case/testdata.mlir`` from the case's module and arrays (``inputs/``, ``expected/reference_*``)."""
    import numpy as np

    def arrays(folder: Path, prefix: str) -> list[Any]:
        files = sorted(folder.glob(f"{prefix}*.npy"), key=lambda p: int(p.stem[len(prefix):]))
        return [np.load(f) for f in files]

    text = module_text((case / K.MODULE["stablehlo"]).read_text(), arrays(case / "inputs", ""),
                       arrays(case / "expected", "reference_"))
    (case / FILE).write_text(text)
    return case / FILE


def write_kit(kit: Path, cases: list[str]) -> int:
    """Every case of a StableHLO kit with its testdata file; how many were written."""
    for name in cases:
        write(kit / name)
    return len(cases)
