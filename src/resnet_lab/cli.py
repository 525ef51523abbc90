"""`resnet-lab`: a thin command-line face over the package's functions.

Each subcommand lives in the module that does the work, as two functions: ``add_arguments(parser)`` and
``run(args) -> int``, and optionally ``EPILOG``, the text its ``--help`` ends with (how to use it beyond
its options). Importing those modules is cheap (no TensorFlow), so argument errors and
:class:`~resnet_lab.core.errors.UsageError` are reported in milliseconds, before any heavy import.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from resnet_lab import __version__
from resnet_lab.core.choices import check_model_given
from resnet_lab.core.errors import UsageError

# name -> (module, one-line help). Order is the order of `resnet-lab --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("resnet_lab.workbook.runner", "execute the notebooks with a params file into a new run folder"),
    "peak": ("resnet_lab.ceilings.peak", "measure this machine's peak GEMM FLOP/s per dtype"),
    "bench": ("resnet_lab.bench.cli", "images/sec, MFU and CPU use of one configuration or a matrix"),
    "models": ("resnet_lab.models.cli", "list the model zoo with parameter and MAC counts"),
    "ops": ("resnet_lab.hlo.cli", "the XLA ops of a model's inference or training step, counted exactly"),
    "coverage": ("resnet_lab.hlo.coverage", "what a backend implementing the listed XLA ops still lacks for a model"),
    "gpu-run": ("resnet_lab.workbook.gpu_run", "the prepared GPU run: JAX/PyTorch rows, fp32/bf16, optimized GPU HLO"),
    "compare": ("resnet_lab.report.compare",
                "two runs side by side: op-set diff, speed deltas with significance, env diff"),
    "history": ("resnet_lab.report.history",
                "the headline speeds over every run, per host kind, with their change points"),
    "record": ("resnet_lab.runs.keep",
               "keep a finished make report as its host kind's committed record (or that record's timing/)"),
    "store": ("resnet_lab.runs.store_cli",
              "the results store (SQLite, PostgreSQL): push runs, list, export (LNT, asv, CSV), a rolling gate"),
    "layers": ("resnet_lab.layers.cli",
               "where a step's time goes, layer by layer, on each framework and engine"),
    "layers diff": ("resnet_lab.report.layer_diff",
                    "two per-layer profiles of one engine, layer by layer: which layers changed beyond noise"),
    "layers trace": ("resnet_lab.layers.trace_cli",
                     "per-layer profiles as a trace Perfetto and chrome://tracing open (an engine a process)"),
    "conformance": ("resnet_lab.conformance.cli",
                    "a model's op cases as a kit (StableHLO, HLO, ONNX), run on an engine, bisected to a layer"),
    "cache": ("resnet_lab.export.cli", "the exported models' cache (outputs/cache/export): list, prune old entries"),
    "train": ("resnet_lab.convergence.train", "train a CIFAR ResNet (paper recipe, resumable) vs published accuracy"),
}


EPILOG = """\
Each command's --help says what it does and how. Bad input (an unknown name, an impossible size, a GPU asked
for where there is none) is one line on stderr and exit status 2, before TensorFlow is imported."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="resnet-lab", description=__doc__.splitlines()[0], epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"resnet-lab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=getattr(module, "EPILOG", None),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _joined(argv: list[str]) -> list[str]:
    """``layers diff …`` as the one command ``"layers diff"`` (a command of two words, beside ``layers MODEL``)."""
    if len(argv) >= 2 and f"{argv[0]} {argv[1]}" in COMMANDS:
        return [f"{argv[0]} {argv[1]}", *argv[2:]]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = _joined(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    try:
        if getattr(args, "_model_required", False):
            check_model_given(args)
        return int(args._run(args) or 0)
    except UsageError as e:
        print(f"resnet-lab {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"resnet-lab {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
