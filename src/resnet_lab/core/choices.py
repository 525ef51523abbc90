"""The workbook's vocabulary, defined once: every choice a command or notebook takes, and its checks.

Every bad value is reported the same way, in one line that names the option, the value and what is
allowed, before any framework is imported::

    --mode: 'training' is not one of: infer, train
    --batch-size: 0 is not an integer >= 1

``name`` is the option as the user typed it (``--batch-size`` on the command line, ``batch_size`` in a
params file or a Python call).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from resnet_lab.core.errors import UsageError

MODES = ("infer", "train")  # an inference forward pass, or one SGD training step
STAGES = ("before", "after")  # HLO before / after XLA's optimization passes
KERAS_BACKENDS = ("tensorflow", "jax", "torch")  # Keras 3 backends; one model definition runs on each
# Other compilers, fed the model the workbook exports (resnet_lab.export): IREE compiles its StableHLO module
# (llvm-cpu), ONNX Runtime and OpenVINO (CPU plugin) its ONNX model. Inference only, fp32.
ENGINES = ("iree", "onnxruntime", "openvino")
BACKENDS = (*KERAS_BACKENDS, *ENGINES)  # what a benchmark row runs on
# How the model is written: Keras (one definition, every backend) or native PyTorch (torch.nn, no Keras: what a
# PyTorch user would run instead; backend torch only).
IMPLS = ("keras", "native")
HLO_BACKENDS = ("tensorflow", "jax")  # the backends whose steps compile to XLA HLO
PRECISIONS = ("fp32", "bf16", "fp16")
# --precision -> Keras dtype policy (float32 variables, bf16/fp16 compute under the mixed policies)
DTYPE_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
XLA_MODES = ("off", "jit", "auto")  # auto: TensorFlow's auto-clustering
# Where torch.compile hands its graphs: TorchInductor (generated kernels: what a torch.compile row measures), or
# aot_eager (TorchDynamo and AOTAutograd as with Inductor, the graphs then run op by op: every code path of the
# row without a minute of C++ code generation; params/quick.yaml, whose numbers are not results). The worker
# reads it from this environment variable, so it is part of a row's identity (``env``).
TORCH_COMPILE_BACKENDS = ("inductor", "aot_eager")
TORCH_COMPILE_BACKEND_ENV = "RESNET_LAB_TORCH_COMPILE_BACKEND"
ONEDNN_MODES = ("on", "off")
DEVICES = ("cpu", "gpu")
PLATFORMS = DEVICES  # XLA's name for where a module is compiled for
DATA_FORMATS = ("channels_last", "channels_first")
# What a command prints or writes: an aligned text table, JSON, CSV, or GitHub Markdown. Every command with output
# takes --format with the subset that applies (add_format_option), checked by check_choice like any other choice.
OUTPUT_FORMATS = ("table", "json", "csv", "markdown")
# the IRs `resnet-lab ops` reads a step in: XLA's HLO; StableHLO (JAX's jax.jit lowering, TF's HLO converted);
# Core ATen (torch.export of the model on Keras' torch backend); TFLite builtins (the TFLite converter); ONNX
# operators (the model exported once for the other compilers, resnet_lab.export)
IRS = ("hlo", "stablehlo", "core-aten", "tflite", "onnx")
COLLECTIVES = ("auto", "ring", "nccl")  # the all-reduce of multi-worker runs
STATUSES = ("ok", "short", "skipped", "unsupported", "oom", "error", "timeout")  # how a benchmark row ended


def check_choice(name: str, value: Any, allowed: Iterable[str]) -> Any:
    """``value`` if it is one of ``allowed``; else UsageError ``name: 'value' is not one of: a, b``."""
    allowed = tuple(allowed)
    try:
        ok = value in allowed
    except TypeError:  # an unhashable or odd value: certainly not one of the choices
        ok = False
    if not ok:
        raise UsageError(f"{name}: {value!r} is not one of: {', '.join(allowed)}")
    return value


def check_choices(name: str, values: Any, allowed: Iterable[str]) -> list[Any]:
    """Every item of ``values`` (a single string counts as one item) checked by :func:`check_choice`."""
    values = [values] if isinstance(values, str) else list(values)
    for v in values:
        check_choice(name, v, allowed)
    return values


def check_keys(name: str, keys: Iterable[str], allowed: Iterable[str]) -> None:
    """UsageError ``name: unknown key(s) 'x'; allowed: a, b`` when ``keys`` holds one not in ``allowed``."""
    allowed = tuple(allowed)
    unknown = [k for k in keys if k not in allowed]
    if unknown:
        raise UsageError(f"{name}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}")


def check_int(name: str, value: Any, minimum: int, *, optional: bool = False) -> Any:
    """``value`` if it is an integer >= ``minimum`` (or None where ``optional``); else UsageError."""
    if value is None and optional:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{name}: {value!r} is not an integer >= {minimum}")
    return value


def check_positive(name: str, value: Any, *, optional: bool = False, unit: str = "") -> Any:
    """``value`` if it is a number > 0 (or None where ``optional``); else UsageError."""
    if value is None and optional:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"{name}: {value!r} is not a number > 0{' ' + unit if unit else ''}")
    return value


def add_format_option(parser: Any, allowed: Iterable[str] = OUTPUT_FORMATS, default: str = "table") -> None:
    """``--format`` on an argparse parser, one of ``allowed`` (a subset of :data:`OUTPUT_FORMATS`, in its order).

    No argparse ``choices=``: a wrong value is reported by :func:`check_format` in the one message every
    command gives (``--format: 'md' is not one of: table, json, csv, markdown``)."""
    allowed = tuple(allowed)
    unknown = [f for f in allowed if f not in OUTPUT_FORMATS]
    assert not unknown, f"formats outside the vocabulary: {unknown}"
    parser.add_argument("--format", default=default, metavar="FORMAT",
                        help=f"what to print: one of {', '.join(allowed)} (default: {default})")
    parser.set_defaults(_formats=allowed)


def check_format(args: Any) -> str:
    """The ``--format`` of parsed ``args`` (from :func:`add_format_option`), checked against its command's formats."""
    return check_choice("--format", args.format, getattr(args, "_formats", OUTPUT_FORMATS))


def check_bool(name: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise UsageError(f"{name}: {value!r} is not true or false")
    return value
