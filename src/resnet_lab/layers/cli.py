"""``resnet-lab layers``: where a step's time goes, layer by layer, on one engine.

Profiles ``--steps`` inferences (or training steps, on a framework) of the row ``bench`` would time (the engine's
documented recipe, the export's reference batch) in its own process and attributes every kernel to the Keras
layers it computes, by pass in a training step (forward, input and weight gradients)
(:mod:`resnet_lab.layers.attribute`), each beside its roofline on this host (the newest measured GEMM peak and
triad bandwidth, or ``--peak-file``). Bad input is one line before any engine is imported.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from resnet_lab.bench.timing import PROFILE_STEPS
from resnet_lab.ceilings import peak as peaks
from resnet_lab.core import requirements
from resnet_lab.core.choices import (
    BACKENDS,
    ENGINES,
    FRAMEWORK_XLA,
    FRAMEWORKS,
    MODES,
    add_format_option,
    add_model_argument,
    add_threads_option,
    check_choice,
    check_format,
    check_int,
    row_key,
)
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path
from resnet_lab.core.text import rows_as
from resnet_lab.layers import attribute
from resnet_lab.layers.run import profile
from resnet_lab.models import specs
from resnet_lab.steps import recipes

COLUMNS = ("layer", "kind", "ms", "roofline_ms", "of_roofline", "kernels", "fused_with")
PASS_COLUMNS = ("forward_ms", "input_grad_ms", "weight_grad_ms", "backward_ms", "layout_ms")  # a training step's
EPILOG = """\
Examples: resnet-lab layers resnet50_v1.5 --backend openvino --batch-size 1 --format markdown
          resnet-lab layers resnet50_v1.5 --backend jax --mode train --batch-size 32 --steps 3
TensorFlow is profiled as bench serves it (a graph, batch norms folded; --xla jit: under jit_compile, XLA:CPU's
thunks by the optimized HLO's op_names, a convolution's asynchronous work until the first thunk reading it starts);
native PyTorch eager, or compiled (--xla jit: TorchInductor, each kernel's modules from Inductor's provenance
tracking); JAX under jax.jit (the optimized HLO's name stacks); IREE through its HAL profiling (each dispatch's call
site located in the export's StableHLO). Training (--mode train): TensorFlow, native PyTorch and JAX; a layer's time
by pass, input and weight gradients apart where the engine runs them as two kernels (TensorFlow, JAX; PyTorch's
convolution_backward computes both at once)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_argument(p, help="a zoo model with a native PyTorch builder (resnet_lab.models; e.g. resnet50_v1.5)")
    p.add_argument("--backend", required=True, help=f"one of {', '.join(BACKENDS)}")
    p.add_argument("--xla", default=None, help="torch: off (eager, the default) or jit (torch.compile, TorchInductor: "
                   "03's served row); tensorflow: off (the served graph) or jit (jit_compile=True); jax: jit")
    p.add_argument("--mode", default="infer", help="infer, or train (a framework's training step: "
                   f"{', '.join(FRAMEWORKS)})")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--image-size", type=int, default=None, help="square input side (default: the model's)")
    p.add_argument("--precision", default="fp32", help="fp32 or bf16 (the engine's recipe)")
    p.add_argument("--recipe", default="", help="the engine's documented configuration by name (default: its best)")
    p.add_argument("--steps", type=int, default=None, help="profiled steps, after as many unprofiled ones (default: "
                   f"{PROFILE_STEPS['infer']} inferences, {PROFILE_STEPS['train']} training steps)")
    add_threads_option(p, "the engine's threads (default: every available CPU)")
    p.add_argument("--peak-file", default=None, help="GEMM peak JSON for the rooflines (default: this host's newest)")
    p.add_argument("--export-dir", default=None, help="where the exported model lives (default: the export cache)")
    add_format_option(p)


def check(args: argparse.Namespace) -> tuple[str, int]:
    """(the format, the image size), or one line naming what is wrong (before any engine is imported)."""
    fmt = check_format(args)
    check_choice("--backend", args.backend, BACKENDS)
    if args.backend in ENGINES and args.xla:
        raise UsageError(f"--xla is a framework's ({', '.join(FRAMEWORKS)}); {args.backend} always compiles")
    if args.backend in FRAMEWORKS:
        check_choice("--xla", args.xla or FRAMEWORK_XLA[args.backend][0], FRAMEWORK_XLA[args.backend])
    check_choice("--mode", args.mode, MODES)
    if args.mode == "train" and args.backend not in FRAMEWORKS:
        raise UsageError(f"--mode train profiles a framework's training step ({', '.join(FRAMEWORKS)}); "
                         f"{args.backend} runs the export, an inference graph")
    check_choice("--precision", args.precision, ("fp32", "bf16"))
    spec = specs.zoo_spec(args.model, "layers")
    check_int("--batch-size", args.batch_size, 1)
    check_int("--steps", args.steps, 1, optional=True)
    check_int("--threads", args.threads, 1, optional=True)
    size = args.image_size or spec.input_size
    specs.check_input_shape(args.model, (size, size, 3))
    if args.backend in ENGINES:
        recipes.resolve(args.backend, args.recipe, args.batch_size)
    elif args.recipe:
        raise UsageError(f"--recipe is an engine's (one of {', '.join(ENGINES)}); {args.backend} runs as bench "
                         "serves it")
    check_path("--peak-file", args.peak_file, "file")
    check_path("--export-dir", args.export_dir, "dir")
    if missing := requirements.missing(args.backend):
        raise UsageError(f"--backend {args.backend}: {missing}")
    return fmt, size


def render(record: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(record, indent=1)
    columns = (*COLUMNS[:3], *PASS_COLUMNS, *COLUMNS[3:]) if record.get("mode") == "train" else COLUMNS
    rows = [[_cell(r.get(c, r.get("passes", {}).get(c[: -len("_ms")]))) for c in columns] for r in record["layers"]]
    return rows_as(fmt, columns, rows, head=attribute.summary(record))


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, list):
        return "+".join(v)
    return "" if v is None else str(v)


def run(args: argparse.Namespace) -> int:
    fmt, size = check(args)
    doc = peaks.load_peak(args.peak_file) if args.peak_file else peaks.load_peak()
    record = profile(args.model, row_key(args.backend, args.xla), args.batch_size, size, precision=args.precision,
                     recipe=args.recipe, steps=args.steps, threads=args.threads, peak_doc=doc,
                     export_dir=args.export_dir, mode=args.mode)
    print(render(record, fmt))
    return 0
