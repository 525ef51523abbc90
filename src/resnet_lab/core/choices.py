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

# ---- per-layer profiles (resnet_lab.layers) and conformance kits (resnet_lab.conformance)
# The frameworks whose steps a per-layer profile reads by the model's own layer names, in the order of its tables.
FRAMEWORKS = ("tensorflow", "torch", "jax")
# A row key names one profiled row: a framework, a framework's compiled row (``framework:jit``: native PyTorch under
# torch.compile, TensorFlow under jit_compile; JAX is always jitted), or an engine (row_key).
COMPILED_ROWS = ("torch:jit", "tensorflow:jit")
ROW_KEYS = (*FRAMEWORKS, *COMPILED_ROWS, *ENGINES)
ROW_NAMES = {"tensorflow": "TensorFlow", "tensorflow:jit": "TensorFlow (XLA)", "torch": "native PyTorch (eager)",
             "torch:jit": "native PyTorch (Inductor)", "jax": "JAX (jit)", "iree": "IREE",
             "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}  # a row key as tables and reports print it
FRAMEWORK_XLA = {"torch": ("off", "jit"), "tensorflow": ("off", "jit"), "jax": ("jit",)}  # each one's compilers
# The IRs a conformance kit is written in (a case's module), and the IR each engine runs a kit in (HLO: XLA's own
# runners, the command in each case's case.json).
KIT_IRS = ("stablehlo", "hlo", "onnx")
ENGINE_IRS = {"iree": "stablehlo", "jax": "stablehlo", "onnxruntime": "onnx", "openvino": "onnx"}
CASE_STATUSES = ("pass", "fail", "unsupported")  # how one conformance case ended on an engine
# Passes, one set. A training step's kernel in a per-layer profile is one of forward, input_grad, weight_grad
# (a convolution's or the classifier's two gradients, where the engine runs them as two kernels), backward (the rest
# of the backward pass), layout (XLA's fusions of data movement only) or other (no layer's: the loss, the optimizer);
# a conformance case's op is forward, backward or optimizer. 02's origins (resnet_lab.hlo.origin) name a name
# stack's pass in three words, ORIGIN_PASSES, which PASS_OF_ORIGIN maps onto this set.
PASSES = {"forward": "forward", "input_grad": "input gradients", "weight_grad": "weight gradients",
          "backward": "rest of backward", "layout": "layout copies (transposes)", "optimizer": "the optimizer's update",
          "other": "outside the layers (loss, optimizer)"}
ORIGIN_PASSES = ("forward", "gradient", "optimizer")
PASS_OF_ORIGIN = {"forward": "forward", "gradient": "backward", "optimizer": "optimizer"}


def row_key(backend: str, xla: str | None = None) -> str:
    """The row key of ``--backend backend --xla xla``: ``torch:jit`` for compiled PyTorch, ``tensorflow:jit`` for
    TensorFlow under XLA, else the backend."""
    return f"{backend}:jit" if xla == "jit" and f"{backend}:jit" in COMPILED_ROWS else backend


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


def add_model_argument(parser: Any, default: str | None = None,
                       help: str = "a model of the zoo (see `resnet-lab models`)") -> None:
    """The model, spelled alike on every command: first (``resnet-lab ops resnet50_v1.5``) or as ``--model``
    (``resnet-lab bench --model resnet50_v1.5``); either lands in ``args.model``. With no ``default`` it is required:
    :func:`check_model_given` says so in one line."""
    import argparse

    parser.add_argument("model", nargs="?", default=argparse.SUPPRESS, metavar="MODEL",
                        help=f"{help}" + (f" (default: {default})" if default else "") + "; or --model MODEL")
    parser.add_argument("--model", dest="model", default=default, metavar="MODEL", help=argparse.SUPPRESS)
    if default is None:
        parser.set_defaults(_model_required=True)


def check_model_given(args: Any) -> str:
    """``args.model`` (from :func:`add_model_argument`), or UsageError where none was given."""
    if getattr(args, "model", None) is None:
        raise UsageError("MODEL: give a model of the zoo, first or as --model (see `resnet-lab models`)")
    return args.model


def add_threads_option(parser: Any, help: str) -> None:
    """``--threads N`` (the engine's or framework's intra-op threads), also spelled ``--intra-op``; in
    ``args.threads``."""
    parser.add_argument("--threads", "--intra-op", dest="threads", type=int, default=None, metavar="N", help=help)


def check_format(args: Any) -> str:
    """The ``--format`` of parsed ``args`` (from :func:`add_format_option`), checked against its command's formats."""
    return check_choice("--format", args.format, getattr(args, "_formats", OUTPUT_FORMATS))


def check_bool(name: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise UsageError(f"{name}: {value!r} is not true or false")
    return value
