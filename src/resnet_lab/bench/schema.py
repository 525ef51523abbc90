"""What a benchmark row holds, field by field, in one place: its name, type, unit, where it is written (CSV and
JSON, or JSON only), whether a row of several processes averages it over them, and what it means.

Every reader and writer of rows derives its lists from :data:`FIELDS`: the CSV's columns and their order
(:mod:`resnet_lab.bench.rows`), the values a CSV cell is parsed back into (:mod:`resnet_lab.bench.identity`),
what several processes average (:func:`resnet_lab.bench.rows.combine`). A new field is one line here.
The order is the CSV's (the committed records' ``bench*.csv`` headers), then the JSON-only lists.

Plain Python, no imports from the package: the bottom of :mod:`resnet_lab.bench`.
"""

from __future__ import annotations

from dataclasses import dataclass

# A field's type, as a CSV cell is read back (resnet_lab.bench.identity.read_row): "str", "json" (JSON text, kept
# as text) and "dict" (kept as read) are not parsed; the others are.
TYPES = ("str", "bool", "int", "float", "json", "dict", "list[float]", "list[list[float]]")


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    unit: str = ""              # "s", "images/s", "GFLOP/s", "%", ... ("" where none)
    csv: bool = True            # a CSV column (and JSON); False: JSON only (a list)
    per_process: bool = False   # a row of several processes holds the mean over its measured processes
    meaning: str = ""


def _f(name: str, type_: str, unit: str, meaning: str, *, per_process: bool = False, csv: bool = True) -> Field:
    return Field(name, type_, unit, csv, per_process, meaning)


FIELDS: tuple[Field, ...] = (
    # what was asked for (the configuration, resnet_lab.bench.config.BenchConfig)
    _f("label", "str", "", "the configuration's name in its matrix ('CPU MKL', 'TF graph')"),
    _f("model", "str", "", "the zoo model (resnet_lab.models)"),
    _f("mode", "str", "", "infer (a forward pass) or train (one SGD step)"),
    _f("batch_size", "int", "images", "images per replica per step"),
    _f("global_batch", "int", "images", "images per step over every replica and worker"),
    _f("image_size", "int", "pixels", "the square input side the row ran at"),
    _f("precision", "str", "", "fp32, bf16 or fp16 (Keras' mixed policies; float32 variables)"),
    _f("math_dtype", "str", "", "what the matrix units multiply in (bf16 under oneDNN's fpmath, tf32 on a GPU)"),
    _f("xla", "str", "", "the compiler asked for: off, jit (jit_compile, jax.jit, torch.compile) or auto"),
    _f("xla_ran", "bool", "", "whether XLA compiled the step (TensorFlow: its log says so)"),
    _f("onednn", "str", "", "oneDNN on or off (TF_ENABLE_ONEDNN_OPTS, torch's mkldnn); n/a on JAX and engines"),
    _f("onednn_ran", "bool", "", "whether oneDNN ran, as the worker found it"),
    _f("device", "str", "", "cpu or gpu"),
    _f("replicas", "int", "", "data-parallel replicas in one process"),
    _f("emulated", "bool", "", "CPU replicas: emulated devices on one CPU's cores"),
    _f("intra_op", "int", "threads", "intra-op threads (empty: the framework's default)"),
    _f("inter_op", "int", "threads", "inter-op threads (empty: the framework's default)"),
    _f("data_format", "str", "", "channels_last (NHWC) or channels_first (NCHW)"),
    _f("fused_bn", "bool", "", "batch norm through TensorFlow's fused kernel"),
    _f("fold_bn", "bool", "", "inference with each batch norm folded into its convolution"),
    _f("recipe", "str", "", "an engine's documented configuration by name (resnet_lab.steps.recipes)"),
    _f("warmup", "int", "steps", "untimed steps after the first (raised for lazily compiling modes)"),
    _f("steps", "int", "steps", "timed steps asked for, at least"),
    _f("min_time_s", "float", "s", "timed seconds asked for, at least"),
    _f("max_time_s", "float", "s", "timed seconds at most: a row cut short of its steps is status short"),
    # how it ended, and its speed
    _f("status", "str", "", "ok, short, skipped, unsupported, oom, error or timeout"),
    _f("reason", "str", "", "why a row is not ok (and processes that measured nothing)"),
    _f("images_per_sec", "float", "images/s", "global batch / mean step time (several processes: their "
                                              "geometric mean)"),
    _f("ci95_low", "float", "images/s", "95 % interval of images_per_sec, low end"),
    _f("ci95_high", "float", "images/s", "95 % interval of images_per_sec, high end"),
    _f("ci_method", "str", "", "where the interval comes from: within one process, or between processes (N)"),
    _f("repeats", "int", "processes", "fresh processes asked for"),
    _f("var_within", "float", "log² s", "variance of one step's log time within its process"),
    _f("var_between", "float", "log² s", "variance of the process effect beyond var_within (several processes)"),
    _f("timed_steps", "int", "steps", "steps timed (every process's)"),
    _f("stderr", "float", "images/s", "tf_cnn_benchmarks' standard error of the per-step speeds"),
    _f("jitter", "float", "images/s", "1.4826 × the median absolute deviation of the per-step speeds"),
    _f("step_time_mean", "float", "s", "mean step time (every process's steps pooled)"),
    _f("step_time_p50", "float", "s", "median step time"),
    _f("step_time_p90", "float", "s", "90th percentile step time (MLPerf SingleStream's metric)"),
    _f("step_time_p99", "float", "s", "99th percentile step time"),
    # where the process's time went
    _f("first_step_s", "float", "s", "the first (compiling) call", per_process=True),
    _f("compile_s", "float", "s", "compiling, where it is apart from the first call (engines)", per_process=True),
    _f("timed_s", "float", "s", "the timed steps' wall time", per_process=True),
    _f("wall_s", "float", "s", "the process's wall time for this row, its start included", per_process=True),
    _f("startup_s", "float", "s", "process start, GEMM check and teardown: wall_s less the rest",
       per_process=True),
    _f("import_s", "float", "s", "the framework's import", per_process=True),
    _f("build_s", "float", "s", "devices, model, optimizer and batch", per_process=True),
    _f("warmup_s", "float", "s", "the untimed steps after the first", per_process=True),
    _f("process", "int", "", "the worker's process id (empty for a row of several processes)"),
    # a cluster (resnet_lab.scaleout.cluster)
    _f("workers", "int", "", "workers of a multi-worker run (empty: one process)"),
    _f("task_index", "int", "", "this worker's index in the cluster (0: the chief)"),
    _f("collective", "str", "", "the all-reduce that ran ('ring (auto)')"),
    _f("global_images_per_sec", "float", "images/s", "global batch / the slowest worker's mean step time"),
    _f("per_worker_images_per_sec", "json", "images/s", "each worker's images/sec (a JSON list)"),
    _f("baseline_images_per_sec", "float", "images/s", "one worker's images/sec, the scaling baseline"),
    _f("scaling_efficiency", "float", "", "global / the sum of the workers' one-worker images/sec"),
    _f("per_worker", "json", "", "each worker's address, speed, step time, CPU seconds, baseline (JSON)"),
    # FLOPs and MFU (resnet_lab.ceilings)
    _f("forward_macs", "int", "MACs", "multiply-accumulates of one image's forward pass"),
    _f("flops_per_image", "float", "FLOP", "FLOPs per image of the step (training: 3 × forward)"),
    _f("model_gflops", "float", "GFLOP/s", "flops_per_image × images_per_sec"),
    _f("peak_gflops", "float", "GFLOP/s", "the GEMM peak of this math dtype and device (the peak file)"),
    _f("mfu", "float", "fraction", "model_gflops / peak_gflops (never above 1: mfu_note says why)"),
    _f("mfu_note", "str", "", "why MFU is missing, or what it is against"),
    _f("gemm_gflops_now", "float", "GFLOP/s", "the GEMM check timed in the worker, beside the steps",
       per_process=True),
    _f("mfu_vs_gemm_now", "float", "fraction", "model_gflops / gemm_gflops_now"),
    _f("onednn_share", "float", "fraction", "the timed steps' share in oneDNN primitives (ONEDNN_VERBOSE)"),
    _f("conv_share", "float", "fraction", "the timed steps' share in oneDNN convolutions"),
    _f("conv_gflops", "float", "GFLOP/s", "oneDNN convolutions' own speed"),
    _f("onednn_profile", "json", "", "the oneDNN primitives' split of the timed steps (JSON; empty: not profiled)"),
    # the host while it ran
    _f("cpu_util", "float", "%", "process CPU time / (timed wall time × available CPUs)"),
    _f("host_util", "float", "%", "the whole host's busy share during the timed steps", per_process=True),
    _f("cpu_seconds", "float", "s", "the process's CPU time over the timed steps", per_process=True),
    _f("available_cpus", "int", "", "CPUs this process may run on"),
    _f("loadavg_1m", "float", "", "the host's 1-minute load average (several processes: the largest)"),
    # what ran, and provenance
    _f("compute_dtype", "str", "", "the dtype the model's layers compute in, as the framework reports it"),
    _f("backend", "str", "", "tensorflow, jax, torch, or an engine (iree, onnxruntime, openvino)"),
    _f("impl", "str", "", "keras (one model, every backend) or native (plain torch.nn)"),
    _f("backend_version", "str", "", "the backend's installed version"),
    _f("compiler", "str", "", "what compiled or ran the step, with its flags"),
    _f("compile_stats", "dict", "", "what the compiler made (torch.compile's graphs and breaks, engines' nodes)"),
    _f("check_ok", "bool", "", "an engine's or folded model's logits agree with Keras' within check_tol"),
    _f("check_max_abs", "float", "", "the largest absolute logit difference"),
    _f("check_max_rel", "float", "", "the largest difference over the largest logit"),
    _f("check_tol", "float", "", "the precision's tolerance for check_max_rel"),
    _f("agree_top1", "float", "", "reduced precision and engines: share of the photographs whose top-1 class is "
       "the fp32 reference's"),
    _f("agree_top5", "float", "", "share of the photographs whose top-5 classes are the fp32 reference's (as a set)"),
    _f("agree_max_rel", "float", "", "on the photographs: the largest logit difference over the largest "
       "reference logit"),
    _f("agree_tol", "float", "", "the tolerance agree_max_rel passes (resnet_lab.export.AGREEMENT)"),
    _f("agree_ok", "bool", "", "agree_max_rel within agree_tol and top-1 agreement at least its floor"),
    _f("tf_version", "str", "", "TensorFlow's installed version"),
    _f("keras_version", "str", "", "Keras' installed version"),
    _f("python", "str", "", "Python's version"),
    _f("host", "str", "", "the host's name"),
    _f("cpu_model", "str", "", "the CPU's model name"),
    _f("commit", "str", "", "the checkout's git commit"),
    _f("dirty", "bool", "", "the checkout had uncommitted changes"),
    _f("env", "json", "", "the extra worker environment, sorted JSON (empty: none)"),
    _f("model_source", "str", "", "who built the model (resnet_lab, keras.applications, an export)"),
    _f("flops_source", "str", "", "where forward_macs comes from"),
    _f("started_at", "str", "", "when the row started (ISO 8601)"),
    _f("same_run_as", "str", "", "the label of the row measured once for this one (another matrix, same key)"),
    # JSON only: lists
    _f("step_times", "list[float]", "s", "every timed step's seconds, every process's in order", csv=False),
    _f("process_means", "list[float]", "s", "each measured process's mean step time", csv=False),
    _f("process_step_times", "list[list[float]]", "s", "each process's step times (several processes)",
       csv=False),
)

BY_NAME = {f.name: f for f in FIELDS}
CSV_FIELDS = tuple(f.name for f in FIELDS if f.csv)  # the CSV's columns, in order
JSON_ONLY_FIELDS = tuple(f.name for f in FIELDS if not f.csv)
ALL_FIELDS = tuple(f.name for f in FIELDS)  # the keys of every row, in this order
PER_PROCESS_MEANS = tuple(f.name for f in FIELDS if f.per_process)


def of_type(*types: str) -> tuple[str, ...]:
    """The fields of ``types``, in row order."""
    return tuple(f.name for f in FIELDS if f.type in types)
