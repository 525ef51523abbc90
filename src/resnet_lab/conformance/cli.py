"""``resnet-lab conformance``: a model's op cases as a kit a backend team takes home, run on an engine, and the
first layer where an engine's whole-model run leaves tolerance.

- ``export MODEL --ir stablehlo|hlo|onnx --mode infer|train --out DIR``: one case per distinct op signature, with
  the inputs the op really receives on real photographs and its reference and float64 outputs
  (:mod:`resnet_lab.conformance.build`);
- ``run DIR --backend iree|jax|onnxruntime|openvino``: every case, pass / fail / unsupported; exit 0 when all pass,
  1 naming the others (:mod:`resnet_lab.conformance.run`);
- ``bisect MODEL --backend onnxruntime|openvino|iree|jax``: the first block, then the first layer inside it, whose
  output leaves tolerance, local or inherited, with that layer's cases as a repro (ONNX engines;
  :mod:`resnet_lab.conformance.bisect`).

Bad input (a folder that is not a kit, an engine that does not take the kit's IR) is one line, exit 2, before any
engine is imported.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from resnet_lab.conformance import kit as K
from resnet_lab.core.choices import ENGINE_IRS, KIT_IRS, add_format_option, add_model_argument, check_format
from resnet_lab.core.errors import UsageError
from resnet_lab.core.text import rows_as

EPILOG = """\
Examples:
  resnet-lab conformance export cifar_resnet20 --ir stablehlo --mode infer --out kits/r20-shlo
  resnet-lab conformance run kits/r20-shlo --backend iree
  resnet-lab conformance export resnet50_v1.5 --ir onnx --out kits/r50-onnx && \\
    resnet-lab conformance run kits/r50-onnx --backend openvino
  resnet-lab conformance bisect resnet50_v1.5 --backend openvino --precision bf16 --out repro/
Which engine takes which IR: iree and jax the StableHLO kit, onnxruntime and openvino the ONNX kit; the HLO kit is for
XLA's own runners (each case.json gives the command)."""

# the kit's verdict, then the anchors' measures beside it (kit.MEASURES)
COLUMNS = ("case", "op", "kind", "status", "error", "tolerance", "max_ulp", "atol_rtol", "rmse_ratio", "calls",
           "layers", "reason")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    e = sub.add_parser("export", help="write a model's op cases as a kit")
    add_model_argument(e, help="a zoo model (resnet_lab.models; e.g. cifar_resnet20, resnet50_v1.5)")
    e.add_argument("--ir", required=True, help=f"one of {', '.join(KIT_IRS)}")
    e.add_argument("--mode", default="infer", help="infer, or train (a training step; StableHLO or HLO)")
    e.add_argument("--batch-size", type=int, default=1, help="photographs the reference classifies (default 1)")
    e.add_argument("--image-size", type=int, default=None, help="square input side (default: the model's)")
    e.add_argument("--out", required=True, help="a new (or empty) folder for the kit")
    e.add_argument("--export-dir", default=None, help="where the exported model lives (default: the export cache)")
    e.add_argument("--testdata", action="store_true", help="stablehlo: each case also as StableHLO's testdata file "
                   "(testdata.mlir: inputs, expected outputs, check.expect_close), for stablehlo-translate --interpret")
    r = sub.add_parser("run", help="every case of a kit on one engine")
    r.add_argument("kit", help="a kit's folder")
    r.add_argument("--backend", required=True, help=f"one of {', '.join(ENGINE_IRS)}")
    r.add_argument("--precision", default="fp32", help="fp32; bf16 on openvino (its precision hint)")
    add_format_option(r)
    b = sub.add_parser("bisect", help="the first layer whose output leaves tolerance on an engine")
    add_model_argument(b, help="a zoo model")
    b.add_argument("--backend", required=True, help="onnxruntime or openvino (the ONNX export), iree or jax (the "
                   "model's StableHLO with every layer's output returned)")
    b.add_argument("--precision", default="fp32", help="fp32, or bf16 (openvino's precision hint)")
    b.add_argument("--image-size", type=int, default=None)
    b.add_argument("--onnx", default=None, help="an ONNX model of the same network to bisect instead of the export's")
    b.add_argument("--plant", default=None, metavar="NODE", help="compute this ONNX node as Abs (an op planted wrong, "
                   "e.g. layer3.2.relu/Relu) to see the bisection name its layer")
    b.add_argument("--tolerance", type=float, default=None, help="largest error a layer's output may show (default: "
                   "the logits' agreement rule for --precision)")
    b.add_argument("--out", default=None, help="a new folder for the repro: the first diverging layer's cases")
    b.add_argument("--export-dir", default=None)
    add_format_option(b)


def render(rows: list[dict[str, Any]], columns: tuple[str, ...], fmt: str, head: str = "") -> str:
    if fmt == "json":
        return json.dumps(rows, indent=1, default=str)
    return rows_as(fmt, columns, [[_cell(r.get(c)) for c in columns] for r in rows], head=head)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return "" if v is None else str(v)


def run(args: argparse.Namespace) -> int:
    if args.action == "export":
        from resnet_lab.conformance import build

        build.check(args.model, args.ir, args.mode, args.out, args.batch_size, args.image_size)
        if args.testdata and args.ir != "stablehlo":
            raise UsageError(f"--testdata: StableHLO's testdata files are for --ir stablehlo, not {args.ir}")
        doc = build.export_kit(args.model, args.ir, args.mode, args.out, batch_size=args.batch_size,
                               image_size=args.image_size, export_dir=args.export_dir, testdata=args.testdata)
        print(f"{len(doc['cases'])} cases ({doc['ir']}, {doc['mode']}) of {doc['model']} in {args.out} "
              f"({doc['seconds']:.0f} s); how to run them: {args.out}/{K.README}")
        return 0
    if args.action == "run":
        from resnet_lab.conformance import run as kit_run

        fmt = check_format(args)
        kit_run.check(args.kit, args.backend, args.precision)
        results = kit_run.run_kit(args.kit, args.backend, args.precision)
        line = kit_run.summary(results)
        print(render(results, COLUMNS, fmt, head=line if fmt in ("table", "markdown") else ""))
        return 0 if all(r["status"] == "pass" for r in results) else 1
    from resnet_lab.conformance import bisect

    fmt = check_format(args)
    size = bisect.check(args.model, args.backend, args.precision, args.image_size, args.onnx, args.out)
    if args.plant and args.backend in bisect.BISECT_STABLEHLO:
        raise UsageError(f"--plant: a node of the ONNX export; {args.backend} runs the model's StableHLO")
    if args.tolerance is not None and not args.tolerance > 0:
        raise UsageError(f"--tolerance: {args.tolerance} is not a positive number")
    onnx_path = args.onnx
    if args.plant:
        onnx_path = bisect.planted(args.model, size, args.plant, args.onnx, args.export_dir)
    found = bisect.bisect(args.model, args.backend, precision=args.precision, image_size=size, onnx_path=onnx_path,
                          out=args.out, export_dir=args.export_dir, tolerance=args.tolerance)
    print(render(found["steps"], bisect.COLUMNS, fmt, head=found["verdict"] if fmt in ("table", "markdown") else ""))
    return 1 if found["layer"] else 0
