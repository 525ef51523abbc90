"""``resnet-lab ops MODEL ...``: one configuration's op inventory as a table, JSON, CSV or Markdown."""

from __future__ import annotations

import argparse
import json

from resnet_lab import export
from resnet_lab.core import requirements
from resnet_lab.core.choices import (
    HLO_BACKENDS,
    IRS,
    MODES,
    PRECISIONS,
    add_format_option,
    add_model_argument,
    check_choice,
    check_format,
)
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path
from resnet_lab.hlo.capture import (
    PORTABLE_IRS,
    capture,
    capture_core_aten,
    capture_onnx,
    capture_stablehlo_step,
    capture_tflite,
    check_ir_modes,
    check_request,
    inventory,
)
from resnet_lab.hlo.inventory_text import format_csv, format_portable, format_stablehlo, format_table

FORMATS = ("table", "json", "csv", "markdown")  # csv: the HLO opcode counts (--ir hlo) only

EPILOG = """\
What is counted: every instruction of every computation of the step's HLO module. TensorFlow's step is
compiled with jit_compile=True (its text count equals that of the serialized HloModuleProto, which
tests/hlo/test_capture.py checks); JAX's step is jax.jit lowered (before) or compiled (after).
--ir stablehlo exits 1 when the text count and the MLIR walk disagree. --ir core-aten and --ir tflite print
their ops with their convolutions (TFLite: and its fused activations), as a table, JSON or Markdown; --ir tflite
exits 1 when the interpreter's op list differs from the flatbuffer's. Both are inference only: --mode train is one
line, exit 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``resnet-lab ops`` (values are checked by :func:`check_request`, before TensorFlow)."""
    add_model_argument(parser)
    parser.add_argument("--mode", default="infer", help=f"one of {', '.join(MODES)} (default: infer)")
    parser.add_argument("--stage", default="before",
                        help="before or after XLA's optimization passes (default: before)")
    parser.add_argument("--platform", default="cpu", help="cpu or gpu (default: cpu)")
    parser.add_argument("--batch-size", type=int, default=32, help="images per step (default: 32)")
    parser.add_argument("--image-size", type=int, default=None,
                        help="square input side (default: the model's, 224 ImageNet / 32 CIFAR)")
    parser.add_argument("--precision", default="fp32", help=f"one of {', '.join(PRECISIONS)} (default: fp32)")
    add_format_option(parser, FORMATS)
    parser.add_argument("--backend", default="tensorflow",
                        help=f"Keras backend whose step is compiled: {', '.join(HLO_BACKENDS)} (default: tensorflow)")
    parser.add_argument("--out", "--save-hlo", dest="out", metavar="FILE", default=None,
                        help="also write the HLO text to FILE")
    parser.add_argument("--iree", action="store_true",
                        help="with --ir stablehlo --backend jax --mode train: compile the training step's StableHLO "
                             "with IREE (llvm-cpu), run one step and compare the loss and updated weights with "
                             "JAX's; where IREE cannot, the stage and its first error line (JSON)")
    parser.add_argument("--ir", default="hlo", help=f"one of {', '.join(IRS)} (default: hlo); stablehlo: the module "
                        "jax.jit lowers the JAX step to, or TensorFlow's HLO converted (hlo_to_stablehlo), counted "
                        "from its text and by the MLIR bindings' walk; core-aten: torch.export of the model on "
                        "Keras' torch backend, decomposed to Core ATen; tflite: the TFLite converter's builtins; "
                        "onnx: the ONNX model exported for the other compilers (the native torch.nn model with the "
                        "Keras weights through torch.onnx.export, in the export cache), its operators counted by onnx "
                        "and by ONNX Runtime's loader (the three inference only)")


def run(args: argparse.Namespace) -> int:
    """``resnet-lab ops``: capture one configuration and print its inventory as a table, JSON, CSV or Markdown."""
    check_format(args)
    check_path("--out", args.out, "out-file")
    check_choice("--ir", args.ir, IRS)
    if args.iree and args.ir != "stablehlo":
        raise UsageError("--iree compiles the StableHLO training step: --ir stablehlo --backend jax --mode train")
    if args.ir == "stablehlo":
        return _stablehlo(args)
    if args.ir in PORTABLE_IRS:
        return _portable(args)
    (cap,) = capture(args.model, modes=(args.mode,), stages=(args.stage,), platform=args.platform,
                     batch_size=args.batch_size, image_size=args.image_size, precision=args.precision,
                     backend=args.backend)
    if args.out:
        with open(args.out, "w") as f:
            f.write(cap.text)
    row = inventory(cap)
    if args.format == "json":
        print(json.dumps(row, indent=2))
    elif args.format == "csv":
        print(format_csv(row), end="")
    else:
        print(format_table(row, markdown=args.format == "markdown"))
    return 0


def _stablehlo(args: argparse.Namespace) -> int:
    check_choice("--backend", args.backend, HLO_BACKENDS)
    if args.iree:
        return _iree_train(args)
    if args.format == "csv":
        raise UsageError("--ir stablehlo: --format table, json or markdown")
    rec = capture_stablehlo_step(args.model, args.mode, backend=args.backend, platform=args.platform,
                                 batch_size=args.batch_size, image_size=args.image_size, precision=args.precision)
    print(json.dumps(rec, indent=2) if args.format == "json" else
          format_stablehlo(rec, markdown=args.format == "markdown"))
    return 0 if rec["walk_agrees"] else 1


def _iree_train(args: argparse.Namespace) -> int:
    """``--ir stablehlo --iree``: the JAX training step run by IREE against JAX (:func:`resnet_lab.export.
    iree_train_step`), as JSON; exit 0 when they agree, 1 when IREE could not or differed."""
    if args.backend != "jax" or args.mode != "train" or args.platform != "cpu" or args.precision != "fp32":
        raise UsageError("--iree runs the JAX training step: --backend jax --mode train, cpu, fp32")
    size = check_request(args.model, modes=("train",), stages=("before",), batch_size=args.batch_size,
                         image_size=args.image_size, precision=args.precision, backend="jax")
    if reason := requirements.missing("iree"):
        raise UsageError(f"--iree: {reason}")
    got = export.iree_train_step(args.model, size, args.batch_size)
    print(json.dumps(got, indent=2))
    return 0 if got["status"] == "ok" else 1


def _portable(args: argparse.Namespace) -> int:
    """``--ir core-aten | tflite | onnx``: the inference graph's ops; a training step or CSV is one line, exit 2."""
    check_choice("--mode", args.mode, MODES)
    check_ir_modes(args.ir, (args.mode,))
    if args.format == "csv":
        raise UsageError(f"--ir {args.ir}: --format table, json or markdown")
    if args.platform != "cpu":
        raise UsageError(f"--ir {args.ir}: the graph is read on the host; leave --platform cpu")
    size = check_request(args.model, modes=("infer",), stages=(), batch_size=args.batch_size,
                         image_size=args.image_size, precision=args.precision)
    if args.ir == "core-aten":
        (rec,) = capture_core_aten({args.model: size}, batch_size=args.batch_size, precision=args.precision)
    elif args.ir == "onnx":
        rec = capture_onnx(args.model, batch_size=args.batch_size, image_size=size, precision=args.precision)
    else:
        rec = capture_tflite(args.model, batch_size=args.batch_size, image_size=size, precision=args.precision)
    print(json.dumps(rec, indent=2) if args.format == "json" else
          format_portable(rec, markdown=args.format == "markdown"))
    if "skipped" in rec:
        return 1
    return 0 if rec.get("interpreter_agrees", True) and rec.get("runtime_agrees", True) is not False else 1
