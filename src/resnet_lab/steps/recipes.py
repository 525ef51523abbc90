"""How each engine and framework is run for CPU inference: the settings its own authors document, each with its
source, so a row of 03 is the engine configured as its authors say, not left at its defaults.

:data:`RECIPES` holds, per engine, named recipes (a recipe: the settings that make one configuration). The first
recipe of an engine is its documented best CPU configuration (:func:`default`); the others are the knobs the knob
sweep (``resnet-lab bench --preset engine-knobs``) tries beside it, so a reader sees by how much they differ on
this host. Every :class:`Setting` names the document or source file that describes it: a setting nobody
documents is not in this table.

IREE, ONNX Runtime and OpenVINO take their recipe by name (``BenchConfig.recipe``, applied in
:mod:`resnet_lab.steps.engine_step`). TensorFlow, native PyTorch and JAX are configured through the row's own
fields and environment (:data:`FRAMEWORK_RECIPES`: the fields each recipe sets), so their rows keep the identity
they always had.

Plain Python: nothing here imports an engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from resnet_lab.core import host
from resnet_lab.core.errors import UsageError

# The documents cited below, once each.
IREE_CPU = "IREE, Deployment configurations > CPU (iree.dev/guides/deployment-configurations/cpu)"
IREE_OPT = "IREE, Reference > Optimization options (iree.dev/reference/optimization-options)"
IREE_OPTIONS_SRC = "iree-org/iree compiler/src/iree/compiler/GlobalOptimization/Passes.cpp (demote-contraction-inputs)"
IREE_PIPELINE_SRC = "iree-org/iree compiler/src/iree/compiler/Pipelines/Options.cpp"
IREE_IM2COL = "iree-org/iree compiler/src/iree/compiler/Pipelines/Options.cpp (use-im2col-for-convs) and IREE blog, " \
              "RISC-V pipeline usage > im2col for convolutions (convolutions onto the data-tiled matmul path; paired " \
              "with --iree-opt-data-tiling there and in the maintainers' advice, iree-org/iree#22674)"
ORT_GRAPH = "ONNX Runtime, Performance > Graph optimizations (onnxruntime.ai/docs/performance/model-optimizations/" \
            "graph-optimizations.html)"
ORT_THREADS = "ONNX Runtime, Performance > Tune performance > Thread management (onnxruntime.ai/docs/performance/" \
              "tune-performance/threading.html)"
ORT_CPU_EP = "ONNX Runtime, Execution providers > CPU (onnxruntime.ai/docs/execution-providers/CPU-ExecutionProvider)"
OV_HINTS = "OpenVINO, Optimize inference > High-level performance hints (docs.openvino.ai, performance-hints)"
OV_PRECISION = "OpenVINO, Inference devices > CPU > Supported inference data types / precision control " \
               "(docs.openvino.ai, cpu-device; precision-control)"
OV_THREADS = "OpenVINO, CPU device > Multi-threading optimization (INFERENCE_NUM_THREADS)"
TORCH_FREEZING = "PyTorch tutorials, Inductor CPU backend debugging and profiling > freezing " \
                 "(intermediate/inductor_debug_cpu); torch/_inductor/config.py freezing (TORCHINDUCTOR_FREEZING)"
TORCH_TUNING = "PyTorch recipes, Performance Tuning Guide > CPU specific optimizations: channels_last, " \
               "torch.inference_mode / no_grad (recipes/recipes/tuning_guide)"
TORCH_AMX = "PyTorch recipes, Leverage Intel AMX > torch.autocast('cpu', dtype=torch.bfloat16) (recipes/amx)"
TORCH_CPP_WRAPPER = "PyTorch tutorials, Inductor C++ wrapper (prototype/inductor_cpp_wrapper_tutorial; " \
                    "TORCHINDUCTOR_CPP_WRAPPER)"
TF_ONEDNN = "TensorFlow, oneDNN optimizations (TF_ENABLE_ONEDNN_OPTS, on by default on x86 since 2.9) and " \
            "Intel, Maximize TensorFlow performance on CPU (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS, inter-op threads)"
TF_FREEZE = "TensorFlow, Grappler remapper: Conv2D + BiasAdd + Relu fusion of a frozen inference graph; " \
            "here by folding batch norm into the convolutions (resnet_lab.models.fold_batch_norms)"
TF_MIXED = "Keras, Mixed precision > mixed_bfloat16 policy (keras.io/api/mixed_precision/policy)"
JAX_JIT = "JAX, Just-in-time compilation (jax.readthedocs.io/en/latest/jit-compilation.html)"


@dataclass(frozen=True)
class Setting:
    """One documented setting: its name as the engine spells it, the value used, what it does, and its source."""

    name: str
    value: str
    does: str
    source: str


@dataclass(frozen=True)
class Recipe:
    """A named configuration of one engine: its settings (``options``: what the engine step applies) and, for bf16,
    the settings it adds (``bf16``); ``note``: what it is for."""

    engine: str
    name: str
    settings: tuple[Setting, ...]
    options: dict[str, Any] = field(default_factory=dict)
    bf16: tuple[Setting, ...] = ()
    bf16_options: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def at(self, precision: str = "fp32") -> tuple[Setting, ...]:
        """The settings at ``precision``: bf16 adds its own, or replaces them all (``bf16_options["replace"]``)."""
        if precision != "bf16":
            return self.settings
        return self.bf16 if self.bf16_options.get("replace") else self.settings + self.bf16

    def describe(self, precision: str = "fp32") -> str:
        """``name: setting=value, ...`` at ``precision``."""
        return f"{self.name}: " + ", ".join(f"{s.name}={s.value}" if s.value else s.name for s in self.at(precision))

    def sources(self, precision: str = "fp32") -> list[dict[str, str]]:
        return [{"setting": s.name, "value": s.value, "does": s.does, "source": s.source} for s in self.at(precision)]


def _flags(settings: tuple[Setting, ...]) -> list[str]:
    return [f"{s.name}={s.value}" if s.value else s.name for s in settings]


def _iree(name: str, flags: tuple[Setting, ...], note: str = "") -> Recipe:
    """An IREE recipe; at bf16 its data tiling moves to the GlobalOptimization path and matmuls stay named, where
    the demotion pass finds them (measured on IREE 3.13: with the default path or generalized matmuls it demotes
    nothing, or the compile fails)."""
    demote = (Setting("--iree-global-opt-demote-contraction-inputs-type", "bf16",
                      "contraction (matmul, convolution) inputs rounded to bf16, accumulated in f32", IREE_OPTIONS_SRC),
              Setting("--iree-global-opt-demote-contraction-inputs-operations", "all",
                      "every contraction, convolutions included (the default demotes matmuls only)", IREE_OPTIONS_SRC),
              Setting("--iree-opt-generalize-matmul", "false", "matmuls stay named ops, which the demotion pass "
                      "matches (O2 and up generalize them first)", IREE_PIPELINE_SRC))
    bf16 = tuple(IREE_GLOBAL_DATA_TILING if s is IREE_DATA_TILING else s for s in flags) + demote
    return Recipe("iree", name, flags, {"flags": _flags(flags)}, bf16=bf16,
                  bf16_options={"flags": _flags(bf16), "replace": True}, note=note)


IREE_HOST = Setting("--iree-llvmcpu-target-cpu", "host", "code for this CPU's ISA (LLVM's host detection); "
                    "the default is a generic x86-64", IREE_CPU)
IREE_O3 = Setting("--iree-opt-level", "O3", "every optimization of the whole flow (the default is O0)", IREE_OPT)
IREE_DATA_TILING = Setting("--iree-opt-data-tiling", "true", "matmul operands packed into the target's tile "
                           "layout (mmt4d, with microkernels on x86)", IREE_OPT)
IREE_GLOBAL_DATA_TILING = Setting("--iree-global-opt-data-tiling", "", "data tiling from the GlobalOptimization "
                                  "phase (with constant evaluation of the packed weights)", IREE_OPT)
IREE_IM2COL_SET = Setting("--iree-global-opt-use-im2col-for-convs", "", "each convolution as im2col + matmul, so "
                          "it takes the data-tiled matmul path (native data tiling of convolutions is experimental)",
                          IREE_IM2COL)
IREE_UKERNELS = Setting("--iree-llvmcpu-enable-ukernels", "all", "IREE's hand-written microkernels for every op "
                        "that has one", IREE_OPT)

ORT_ALL = Setting("graph_optimization_level", "ORT_ENABLE_ALL", "basic + extended fusions (Conv+Add+Relu, ...) + "
                  "layout optimizations (NCHWc)", ORT_GRAPH)
ORT_EXTENDED = Setting("graph_optimization_level", "ORT_ENABLE_EXTENDED", "fusions without the NCHWc layout "
                       "transform", ORT_GRAPH)
ORT_INTRA = Setting("intra_op_num_threads", "the row's threads (every available CPU)", "one worker per core; set "
                    "explicitly: the default counts physical cores", ORT_THREADS)
ORT_SEQ = Setting("execution_mode", "ORT_SEQUENTIAL", "operators one after another (parallel mode helps only "
                  "branchy graphs)", ORT_THREADS)
ORT_NO_SPIN = Setting("session.intra_op.allow_spinning", "0", "worker threads sleep instead of spinning between "
                      "ops", ORT_THREADS)

OV_LATENCY = Setting("PERFORMANCE_HINT", "LATENCY", "one stream, all threads on one request", OV_HINTS)
OV_THROUGHPUT = Setting("PERFORMANCE_HINT", "THROUGHPUT", "several streams, each request on its own; the batch "
                        "is split over the compiled model's optimal number of requests, run asynchronously", OV_HINTS)
OV_F32 = Setting("INFERENCE_PRECISION_HINT", "f32", "compute in f32 (the plugin's default is bf16 where the CPU "
                 "has bf16 instructions)", OV_PRECISION)
OV_BF16 = Setting("INFERENCE_PRECISION_HINT", "bf16", "compute in bf16 (AVX-512 bf16 / AMX)", OV_PRECISION)
OV_THREADS_SET = Setting("INFERENCE_NUM_THREADS", "the row's threads", "the CPU plugin's thread pool", OV_THREADS)

RECIPES: dict[str, dict[str, Recipe]] = {
    "iree": {r.name: r for r in (
        _iree("documented", (IREE_HOST, IREE_O3, IREE_DATA_TILING, IREE_IM2COL_SET),
              "the CPU guide's host target, the optimization reference's O3 and data tiling, convolutions as im2col "
              "+ matmul so that data tiling reaches them"),
        _iree("data-tiling", (IREE_HOST, IREE_O3, IREE_DATA_TILING), "O3 and data tiling without im2col: the "
              "convolutions keep IREE's direct convolution codegen"),
        _iree("host", (IREE_HOST,), "the host target alone (this workbook's row until 2026-12)"),
        _iree("ukernels", (IREE_HOST, IREE_O3, IREE_DATA_TILING, IREE_IM2COL_SET, IREE_UKERNELS),
              "documented + every microkernel"),
    )},
    "onnxruntime": {r.name: r for r in (
        Recipe("onnxruntime", "documented", (ORT_ALL, ORT_INTRA, ORT_SEQ), {"level": "ORT_ENABLE_ALL"},
               note="every graph optimization, one thread per core, sequential"),
        Recipe("onnxruntime", "extended", (ORT_EXTENDED, ORT_INTRA, ORT_SEQ), {"level": "ORT_ENABLE_EXTENDED"},
               note="without the NCHWc layout transform"),
        Recipe("onnxruntime", "no-spin", (ORT_ALL, ORT_INTRA, ORT_SEQ, ORT_NO_SPIN),
               {"level": "ORT_ENABLE_ALL", "config": {"session.intra_op.allow_spinning": "0"}},
               note="threads sleep between ops"),
    )},
    "openvino": {r.name: r for r in (
        Recipe("openvino", "latency", (OV_LATENCY, OV_F32, OV_THREADS_SET),
               {"config": {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}},
               bf16=(OV_BF16,), bf16_options={"config": {"INFERENCE_PRECISION_HINT": "bf16"}},
               note="the hint for one request at a time (SingleStream)"),
        Recipe("openvino", "throughput", (OV_THROUGHPUT, OV_F32, OV_THREADS_SET),
               {"config": {"PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_PRECISION_HINT": "f32"}, "async": True},
               bf16=(OV_BF16,), bf16_options={"config": {"INFERENCE_PRECISION_HINT": "bf16"}},
               note="the hint for many images at once (Offline)"),
    )},
}

# The engines with no bf16 path here, and why (a bf16 row of theirs is skipped with this reason).
NO_BF16 = {"onnxruntime": "ONNX Runtime's CPU execution provider computes the fp32 model in fp32 on x86: it has no "
                          "bf16 kernels for Conv/Gemm there (its bf16 fast-math option is arm64 only), and a bf16 "
                          "model would run as casts around fp32 kernels"}

# Why no engine serves int8 here: every documented int8 path quantizes with calibration data, a few hundred images of
# the deployment's own distribution (OpenVINO: NNCF's nncf.quantize(model, calibration_dataset); ONNX Runtime:
# quantize_static with a CalibrationDataReader; PyTorch: PT2E prepare/convert with calibration batches; TensorFlow
# Lite: a representative dataset). This workbook's weights are random and its photographs are sixteen crops of two
# images: a calibration on them would measure a model nobody deploys.
NO_INT8 = ("every documented int8 path (NNCF, ONNX Runtime's quantize_static, PyTorch's PT2E, TFLite) calibrates on "
           "images of the deployment's distribution, which a model with random weights and two sample photographs "
           "does not have")

# TensorFlow, native PyTorch and JAX: the documented inference configuration as the row's own fields and
# environment, with the sources of each (bench.sections applies them; the knob sweep tries the alternatives).
FRAMEWORK_RECIPES: dict[str, tuple[Setting, ...]] = {
    "tensorflow": (
        Setting("TF_ENABLE_ONEDNN_OPTS", "1", "oneDNN kernels (the default on x86)", TF_ONEDNN),
        Setting("fold_bn", "true", "batch norm folded into the convolutions: oneDNN's conv + bias + ReLU", TF_FREEZE),
        Setting("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "1", "oneDNN reorders each weight once, not per query", TF_ONEDNN),
        Setting("inter_op_parallelism_threads", "1", "one op at a time: a batch-1 ResNet is a chain", TF_ONEDNN),
        Setting("dtype policy (bf16 rows)", "mixed_bfloat16", "bf16 compute, float32 variables", TF_MIXED),
    ),
    "torch": (
        Setting("torch.compile", "backend inductor", "the whole forward pass compiled (C++/OpenMP kernels, oneDNN "
                "convolutions)", TORCH_FREEZING),
        Setting("TORCHINDUCTOR_FREEZING", "1", "weights as constants: batch norm folded into the convolutions, "
                "oneDNN weights prepacked", TORCH_FREEZING),
        Setting("memory_format", "channels_last", "NHWC activations, oneDNN's layout", TORCH_TUNING),
        Setting("torch.no_grad", "on", "no autograd bookkeeping (no_grad, which torch.compile traces without a break)",
                TORCH_TUNING),
        Setting("torch.autocast (bf16 rows)", "cpu, torch.bfloat16", "bf16 convolutions and matmuls, fp32 weights",
                TORCH_AMX),
    ),
    "jax": (
        Setting("jax.jit", "the whole forward pass", "one XLA:CPU module", JAX_JIT),
    ),
}
# The environment of native PyTorch's documented inference row (torch.compile with Inductor's freezing).
TORCH_SERVED_ENV = {"TORCHINDUCTOR_FREEZING": "1"}
TORCH_CPP_WRAPPER_ENV = {"TORCHINDUCTOR_CPP_WRAPPER": "1"}


def names(engine: str) -> list[str]:
    """The recipes of ``engine``, its documented one first."""
    return list(RECIPES.get(engine, {}))


def default(engine: str, batch_size: int = 1) -> str:
    """The documented recipe of ``engine`` for a row of ``batch_size`` (OpenVINO: the latency hint for one image,
    the throughput hint for a batch, as its performance-hints guide says)."""
    if engine == "openvino":
        return "latency" if batch_size == 1 else "throughput"
    return names(engine)[0]


def resolve(engine: str, name: str = "", batch_size: int = 1) -> Recipe:
    """The recipe ``name`` of ``engine`` ("" : its documented one); one line naming the allowed ones otherwise."""
    if engine not in RECIPES:
        raise UsageError(f"recipe: {engine} takes no recipe (only {', '.join(RECIPES)} do); leave it empty")
    name = name or default(engine, batch_size)
    if name not in RECIPES[engine]:
        raise UsageError(f"recipe {name!r} is not one of {engine}'s: {', '.join(RECIPES[engine])}")
    return RECIPES[engine][name]


def options(engine: str, name: str, precision: str) -> dict[str, Any]:
    """What the engine step applies for recipe ``name`` at ``precision``: the recipe's options with its bf16
    ones merged (flags appended, config keys replaced)."""
    recipe = RECIPES[engine][name]
    out: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
                           for k, v in recipe.options.items()}
    if precision == "bf16":
        replace = recipe.bf16_options.get("replace", False)
        for k, v in recipe.bf16_options.items():
            if k == "replace":
                continue
            if isinstance(v, list) and replace:
                out[k] = list(v)
            elif isinstance(v, list):
                out[k] = [*out.get(k, []), *v]
            elif isinstance(v, dict):
                out[k] = {**out.get(k, {}), **v}
            else:
                out[k] = v
    return out


def bf16_reason(engine: str, isa: list[str] | None = None) -> str | None:
    """None where ``engine`` can run bf16 (on a CPU with the ISA flags ``isa``, where given); else why not (one
    line). The host's part is the capability table's (:meth:`resnet_lab.core.host.Capabilities.emulation_reason`,
    the mask of RESNET_LAB_MASK_ISA included), the rule every benchmark row follows."""
    if engine in NO_BF16:
        return NO_BF16[engine]
    if isa is not None:
        return host.capabilities("flags\t: " + " ".join(isa), machine="x86_64").emulation_reason("bf16")
    return None


def table() -> list[dict[str, str]]:
    """Every setting of every recipe and framework, with its source: the citations table of 03."""
    rows = []
    for engine, recipes in RECIPES.items():
        for recipe in recipes.values():
            for s in (*recipe.settings, *recipe.bf16):
                rows.append({"engine": engine, "recipe": recipe.name, "setting": s.name, "value": s.value,
                             "does": s.does, "source": s.source})
    for engine, settings in FRAMEWORK_RECIPES.items():
        for s in settings:
            rows.append({"engine": engine, "recipe": "documented", "setting": s.name, "value": s.value,
                         "does": s.does, "source": s.source})
    return rows
