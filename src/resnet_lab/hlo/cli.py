"""``resnet-lab ops MODEL ...``: one configuration's op inventory as a table, JSON or CSV."""

from __future__ import annotations

import argparse
import json

from resnet_lab.core.choices import HLO_BACKENDS, MODES, OUTPUT_FORMATS, PRECISIONS, check_choice
from resnet_lab.hlo.capture import capture, record
from resnet_lab.hlo.tables import format_csv, format_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``resnet-lab ops`` (values are checked by :func:`check_request`, before TensorFlow)."""
    parser.add_argument("model", metavar="MODEL", help="a model of the zoo (see `resnet-lab models`)")
    parser.add_argument("--mode", default="infer", help=f"one of {', '.join(MODES)} (default: infer)")
    parser.add_argument("--stage", default="before",
                        help="before or after XLA's optimization passes (default: before)")
    parser.add_argument("--platform", default="cpu", help="cpu or gpu (default: cpu)")
    parser.add_argument("--batch-size", type=int, default=32, help="images per step (default: 32)")
    parser.add_argument("--image-size", type=int, default=None,
                        help="square input side (default: the model's, 224 ImageNet / 32 CIFAR)")
    parser.add_argument("--precision", default="fp32", help=f"one of {', '.join(PRECISIONS)} (default: fp32)")
    parser.add_argument("--format", default="table", help=f"one of {', '.join(OUTPUT_FORMATS)} (default: table)")
    parser.add_argument("--backend", default="tensorflow",
                        help=f"Keras backend whose step is compiled: {', '.join(HLO_BACKENDS)} (default: tensorflow)")
    parser.add_argument("--save-hlo", metavar="FILE", default=None, help="also write the HLO text to FILE")


def run(args: argparse.Namespace) -> int:
    """``resnet-lab ops``: capture one configuration and print its inventory as a table, JSON or CSV."""
    check_choice("--format", args.format, OUTPUT_FORMATS)
    (cap,) = capture(args.model, modes=(args.mode,), stages=(args.stage,), platform=args.platform,
                     batch_size=args.batch_size, image_size=args.image_size, precision=args.precision,
                     backend=args.backend)
    if args.save_hlo:
        with open(args.save_hlo, "w") as f:
            f.write(cap.text)
    row = record(cap)
    if args.format == "json":
        print(json.dumps(row, indent=2))
    elif args.format == "csv":
        print(format_csv(row), end="")
    else:
        print(format_table(row))
    return 0
