"""`resnet-lab ops`: which XLA ops a model's inference or training step compiles to, counted exactly.

:func:`capture` builds a zoo model, makes the step of :mod:`resnet_lab.steps` with ``jit_compile=True``
and asks TensorFlow for its HLO before (``hlo``) and after (``optimized_hlo``) XLA's optimization passes
(``experimental_get_compiler_ir``); :func:`record` parses it with :mod:`resnet_lab.hlo` into one JSON-ready
row (configuration, versions, opcode counts, fusions, custom calls, convolution and dot shapes).
:func:`proto_inventory` counts the serialized ``HloModuleProto`` independently, for the cross-check.

``backend="jax"`` asks the same of Keras' JAX backend: the step of :mod:`resnet_lab.backend_steps` under
``jax.jit``, lowered (before) and compiled (after), in a child process (:mod:`resnet_lab.jax_hlo`), and
parsed by the same parser, so the TensorFlow and JAX op sets of one model compare line by line.

Names, modes, sizes and precisions are checked by :func:`check_request` without importing TensorFlow.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from resnet_lab import hlo, models, provenance, steps
from resnet_lab.errors import UsageError

MODES = steps.MODES
STAGES: dict[str, str] = {"before": "hlo", "after": "optimized_hlo"}  # ours -> experimental_get_compiler_ir
JAX_STAGES: dict[str, str] = {"before": "jax.jit(step).lower().as_text('hlo')",
                               "after": "jax.jit(step).lower().compile().as_text()"}
SERIALIZED: dict[str, str] = {"before": "hlo_serialized", "after": "optimized_hlo_serialized"}
PLATFORMS = ("cpu", "gpu")
PRECISIONS = tuple(steps.PRECISIONS)
FORMATS = ("table", "json", "csv")
VERSION_PACKAGES = ("tensorflow", "tensorflow-cpu", "keras", "resnet-lab")
BACKENDS = ("tensorflow", "jax")  # the Keras backends whose steps compile to XLA HLO
BACKEND_VERSION_PACKAGES = {"tensorflow": VERSION_PACKAGES, "jax": ("jax", "jaxlib", "keras", "resnet-lab")}
JAX_TIMEOUT_S = 1800.0


def _choose(kind: str, value: str, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if value not in allowed:
        raise UsageError(f"unknown {kind} {value!r}; choose one of: {', '.join(allowed)}")
    return value


def check_request(
    model: str,
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platform: str = "cpu",
    batch_size: int = 32,
    image_size: int | None = None,
    precision: str = "fp32",
    backend: str = "tensorflow",
) -> int:
    """Check a capture request without importing TensorFlow; return the image size to use.

    Raises:
        UsageError: unknown model, mode, stage, platform, precision or backend; a batch size below 1; an
            image size the model cannot take. ``image_size=None`` means the model's default (224 ImageNet,
            32 CIFAR).
    """
    spec = models.get_spec(model)
    _choose("backend", backend, BACKENDS)
    for mode in modes:
        _choose("mode", mode, MODES)
    for stage in stages:
        _choose("stage", stage, STAGES)
    _choose("platform", platform, PLATFORMS)
    _choose("precision", precision, PRECISIONS)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise UsageError(f"batch size must be a positive integer, got {batch_size!r}")
    size = spec.input_size if image_size is None else image_size
    if not isinstance(size, int) or size < 1:
        raise UsageError(f"image size must be a positive integer, got {size!r}")
    models.check_input_shape(model, (size, size, 3))
    return size


def gpu_unavailable_reason() -> str | None:
    """None where TensorFlow sees a GPU; else one line saying why GPU capture cannot run here."""
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return None
    build = tf.sysconfig.get_build_info()
    why = "this TensorFlow build has no CUDA" if not build.get("is_cuda_build") else "TensorFlow sees no GPU"
    return (f"the 'gpu' platform needs a GPU: {why} on this host "
            "(on a CUDA host install the [gpu] extra); the CPU stages run here")


@dataclass
class Capture:
    """The HLO of one model/mode/stage/platform/size/precision, as XLA printed it."""

    model: str
    mode: str
    stage: str
    platform: str
    batch_size: int
    image_size: int
    precision: str
    text: str
    seconds: float  # wall time of the compiler-IR call (tracing and tf2xla included for the first stage)
    serialized: bytes | None = None  # the HloModuleProto of the same stage, when asked for
    backend: str = "tensorflow"  # the Keras backend whose step this is (tensorflow | jax)
    versions: dict[str, Any] | None = None  # the versions that produced it (None: this process's)


def capture(
    model: str,
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platform: str = "cpu",
    batch_size: int = 32,
    image_size: int | None = None,
    precision: str = "fp32",
    serialized: bool = False,
    backend: str = "tensorflow",
) -> list[Capture]:
    """Compile ``model``'s steps and return their HLO text, one :class:`Capture` per (mode, stage).

    The model is built once (random weights, under the precision's Keras dtype policy); each mode's step is
    traced once and its HLO asked for at each stage. Inputs are synthetic, of the given batch and image
    size. Nothing is executed.

    ``backend="jax"``: the JAX step's HLO, from a child process (see :func:`capture_jax`).

    Raises:
        UsageError: bad request (see :func:`check_request`), ``platform="gpu"`` on a host without GPU, JAX
            not installed, or ``serialized`` with JAX.
    """
    size = check_request(model, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                         image_size=image_size, precision=precision, backend=backend)
    if backend == "jax":
        if serialized:
            raise UsageError("serialized protos are captured from TensorFlow only; leave serialized off for jax")
        return capture_jax(model, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                           image_size=size, precision=precision)
    import tensorflow as tf

    if platform == "gpu" and (reason := gpu_unavailable_reason()):
        raise UsageError(reason)
    spec = models.get_spec(model)
    out = []
    with tf.device(f"/{platform.upper()}:0"):
        net = models.build(model, input_shape=(size, size, 3), dtype_policy=steps.PRECISIONS[precision])
        images, labels = steps.synthetic_batch(batch_size, (size, size, 3), spec.num_classes)
        for mode in modes:
            step = steps.make_step(mode, net)
            t0 = time.perf_counter()
            ir = step.experimental_get_compiler_ir(*((images,) if mode == "infer" else (images, labels)))
            for stage in stages:
                text = ir(stage=STAGES[stage], platform_name=platform.upper())
                proto = ir(stage=SERIALIZED[stage], platform_name=platform.upper()) if serialized else None
                t1 = time.perf_counter()
                out.append(Capture(model, mode, stage, platform, batch_size, size, precision, text,
                                   round(t1 - t0, 3), proto))
                t0 = t1
    return out


def jax_unavailable_reason() -> str | None:
    """None where JAX is installed; else one line saying how to get it. Does not import JAX."""
    if provenance.package_versions(("jax",)).get("jax") is None:
        return "the jax backend is not installed (pip install '.[jax]')"
    return None


def capture_jax(
    model: str,
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platform: str = "cpu",
    batch_size: int = 32,
    image_size: int | None = None,
    precision: str = "fp32",
    timeout_s: float = JAX_TIMEOUT_S,
) -> list[Capture]:
    """The HLO of the JAX steps (``jax.jit``: lowered = before, compiled = after), one :class:`Capture`
    per (mode, stage), computed by ``python -m resnet_lab.jax_hlo`` with ``KERAS_BACKEND=jax``.

    Raises:
        UsageError: bad request, JAX not installed, or no JAX device of ``platform`` on this host.
        RuntimeError: the child failed (its one-line reason) or ran past ``timeout_s``.
    """
    size = check_request(model, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                         image_size=image_size, precision=precision, backend="jax")
    if reason := jax_unavailable_reason():
        raise UsageError(reason)
    request = {"model": model, "modes": list(modes), "stages": list(stages), "platform": platform,
               "batch_size": batch_size, "image_size": size, "precision": precision}
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONUNBUFFERED": "1"}
    if platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    with tempfile.TemporaryDirectory(prefix="resnet-lab-jax-hlo-") as tmp:
        req, res = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(req, "w") as f:
            json.dump(request, f)
        proc = subprocess.run([sys.executable, "-m", "resnet_lab.jax_hlo", req, res], env=env,
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        if not os.path.exists(res):
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"JAX HLO capture exited {proc.returncode} without a result: {tail[:300]}")
        with open(res) as f:
            result = json.load(f)
    if "skip" in result:
        raise UsageError(f"the '{platform}' platform needs a GPU that JAX can use: {result['skip']}")
    if "error" in result:
        raise RuntimeError(f"JAX HLO capture failed: {result['error']}")
    versions_ = {**result["versions"], "resnet-lab": provenance.package_versions(("resnet-lab",))["resnet-lab"]}
    return [Capture(model, c["mode"], c["stage"], platform, batch_size, size, precision, c["text"], c["seconds"],
                    backend="jax", versions=versions_) for c in result["captures"]]


def versions() -> dict[str, str | None]:
    """Installed versions of the packages that change the HLO (None where absent)."""
    return provenance.package_versions(VERSION_PACKAGES)


def opcode_list_info() -> dict[str, Any]:
    """Where the opcode list the parser validates against came from."""
    table = hlo.known_opcodes()
    return {"source": table.source, "sha256": table.sha256, "count": len(table.names)}


def record(cap: Capture) -> dict[str, Any]:
    """One JSON-ready row: the configuration, versions, and :func:`resnet_lab.hlo.inventory` of the text."""
    xla_stage = STAGES[cap.stage] if cap.backend == "tensorflow" else JAX_STAGES[cap.stage]
    return {
        "model": cap.model, "backend": cap.backend, "mode": cap.mode, "stage": cap.stage,
        "platform": cap.platform,
        "batch_size": cap.batch_size, "image_size": cap.image_size, "precision": cap.precision,
        "dtype_policy": steps.PRECISIONS[cap.precision], "xla_stage": xla_stage,
        "capture_seconds": cap.seconds, "versions": cap.versions or versions(), "opcode_list": opcode_list_info(),
        **hlo.inventory(hlo.parse(cap.text)),
    }


def skipped_record(model: str, mode: str, stage: str, platform: str, reason: str, **config: Any) -> dict:
    """A row for a configuration that cannot be captured on this host (e.g. GPU without a GPU)."""
    config.setdefault("backend", "tensorflow")
    return {"model": model, "mode": mode, "stage": stage, "platform": platform, **config,
            "skipped": reason, "opcodes": {}}


def capture_matrix(
    model_names: Sequence[str],
    *,
    modes: Sequence[str] = MODES,
    stages: Sequence[str] = tuple(STAGES),
    platforms: Sequence[str] = ("cpu",),
    batch_size: int = 32,
    image_size: int | None = None,
    precision: str = "fp32",
    backends: Sequence[str] = ("tensorflow",),
) -> list[dict[str, Any]]:
    """:func:`record` rows for every backend × model × mode × stage × platform; a platform or backend this
    host lacks gives :func:`skipped_record` rows instead of an error. ``image_size=None``: each model's
    default. A single string is taken as a one-element list (papermill's ``-p models resnet50``)."""
    model_names, modes, stages, platforms, backends = (
        [x] if isinstance(x, str) else list(x) for x in (model_names, modes, stages, platforms, backends))
    sizes = {m: check_request(m, modes=modes, stages=stages, platform=p, batch_size=batch_size,
                              image_size=image_size, precision=precision, backend=b)
             for m in model_names for p in platforms for b in backends}
    rows = []
    for backend in backends:
        for platform in platforms:
            reason = jax_unavailable_reason() if backend == "jax" else None
            if platform == "gpu" and backend == "tensorflow":
                reason = reason or gpu_unavailable_reason()
            for name in model_names:
                config = {"batch_size": batch_size, "image_size": sizes[name], "precision": precision,
                          "backend": backend}
                if not reason:
                    try:
                        caps = capture(name, modes=modes, stages=stages, platform=platform, batch_size=batch_size,
                                       image_size=sizes[name], precision=precision, backend=backend)
                    except UsageError as exc:  # e.g. JAX without a GPU device: a row that says so
                        if backend != "jax":
                            raise
                        reason = str(exc)
                    else:
                        rows += [record(c) for c in caps]
                        continue
                rows += [skipped_record(name, mode, stage, platform, reason, **config)
                         for mode in modes for stage in stages]
    return rows


# ------------------------------------------------------------------------------- the proto, independently


def proto_inventory(serialized: bytes) -> dict[str, Any]:
    """Counts from a serialized ``HloModuleProto`` (XLA's own opcode strings, no text involved):
    ``opcodes``, ``fusion_kinds``, ``custom_call_targets``, ``compare_directions``, ``num_computations``."""
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo_pb2.HloModuleProto()
    proto.ParseFromString(serialized)
    counts: dict[str, collections.Counter[str]] = {
        k: collections.Counter() for k in ("opcodes", "fusion_kinds", "custom_call_targets",
                                           "compare_directions")
    }
    for comp in proto.computations:
        for ins in comp.instructions:
            counts["opcodes"][ins.opcode] += 1
            if ins.opcode == "fusion":
                counts["fusion_kinds"][ins.fusion_kind] += 1
            elif ins.opcode == "custom-call":
                counts["custom_call_targets"][ins.custom_call_target] += 1
            elif ins.opcode == "compare":
                counts["compare_directions"][ins.comparison_direction] += 1
    return {"module": proto.name, "num_computations": len(proto.computations),
            **{k: dict(sorted(c.items())) for k, c in counts.items()}}


# ------------------------------------------------------------------------------------------ tables


def opcode_frame(rows: Sequence[dict[str, Any]]) -> Any:
    """Long table: one row per (model, mode, stage, platform, opcode) with the total and per-role counts."""
    import pandas as pd

    out = []
    for r in rows:
        for op, n in r["opcodes"].items():
            roles = {role: r["opcodes_by_role"][role].get(op, 0) for role in hlo.ROLES}
            config = {k: r[k] for k in ("model", "mode", "stage", "platform", "precision")}
            out.append({**config, "opcode": op, "count": n, **roles})
    return pd.DataFrame(out, columns=["model", "mode", "stage", "platform", "precision", "opcode", "count",
                                      *hlo.ROLES])


def find_record(rows: Sequence[dict[str, Any]], model: str, mode: str, stage: str,
                platform: str = "cpu", backend: str = "tensorflow") -> dict[str, Any] | None:
    """The captured (not skipped) record of one configuration, or None."""
    for r in rows:
        if (r["model"], r["mode"], r["stage"], r["platform"]) == (model, mode, stage, platform) \
                and r.get("backend", "tensorflow") == backend and "skipped" not in r:
            return r
    return None


def backend_frame(rows: Sequence[dict[str, Any]], model: str, platform: str = "cpu") -> Any:
    """The op sets of one model side by side across backends: one row per opcode, one column per
    ``backend/mode/stage`` (0 = absent), plus ``only_in``: the backend that alone emits the opcode."""
    chosen = [r for r in rows if r["model"] == model and r["platform"] == platform and "skipped" not in r]
    if not chosen:
        raise ValueError(f"no captured records of {model!r} on {platform}")
    frame = opcode_pivot(chosen, keys=("backend", "mode", "stage"))
    backends = sorted({r.get("backend", "tensorflow") for r in chosen})

    def only_in(row: Any) -> str:
        present = {b for b in backends if any(row[c] for c in frame.columns if c.startswith(b + "/"))}
        return next(iter(present)) if len(present) == 1 and len(backends) > 1 else ""

    frame["only_in"] = frame.apply(only_in, axis=1)
    return frame


def diff_tables(rows: Sequence[dict[str, Any]], model: str, across: str,
                platform: str = "cpu") -> dict[str, Any]:
    """:func:`diff_frame` tables for one model: ``across="mode"`` gives {stage: infer -> train},
    ``across="stage"`` gives {mode: before -> after}; configurations not captured are left out."""
    pairs = {"mode": [(s, ("infer", s), ("train", s)) for s in STAGES],
             "stage": [(m, (m, "before"), (m, "after")) for m in MODES]}[across]
    out = {}
    for label, (mode_a, stage_a), (mode_b, stage_b) in pairs:
        a = find_record(rows, model, mode_a, stage_a, platform)
        b = find_record(rows, model, mode_b, stage_b, platform)
        if a and b:
            out[label] = diff_frame(a, b)
    return out


def shape_tables(rows: Sequence[dict[str, Any]], model: str, platform: str = "cpu") -> dict[str, Any]:
    """``{"convolutions <mode> <stage>": frame, "dots <mode> <stage>": frame}`` for one model's records."""
    out = {}
    for mode in MODES:
        for stage in STAGES:
            r = find_record(rows, model, mode, stage, platform)
            if r:
                out[f"convolutions {mode} {stage}"] = conv_frame(r)
                out[f"dots {mode} {stage}"] = dot_frame(r)
    return out


def config_label(row: dict[str, Any], keys: Sequence[str] = ("model", "mode", "stage")) -> str:
    """``resnet50/train/after``: the configuration of a record as one column label."""
    return "/".join(str(row[k]) for k in keys)


def opcode_pivot(rows: Sequence[dict[str, Any]], keys: Sequence[str] = ("model", "mode", "stage")) -> Any:
    """Wide table: one row per opcode, one column per configuration (``config_label``), 0 where absent."""
    import pandas as pd

    columns = {config_label(r, keys): r["opcodes"] for r in rows}
    frame = pd.DataFrame(columns).fillna(0).astype(int).sort_index()
    frame.index.name = "opcode"
    return frame


def summary_frame(rows: Sequence[dict[str, Any]]) -> Any:
    """One line per record: configuration, distinct opcodes, instructions, computations, fusions, convolution
    and dot configurations, capture seconds (or why it was skipped)."""
    import pandas as pd

    out = []
    for r in rows:
        line = {k: r.get(k) for k in ("model", "mode", "stage", "platform", "batch_size", "image_size",
                                      "precision")}
        line["backend"] = r.get("backend", "tensorflow")
        if "skipped" in r:
            out.append({**line, "skipped": r["skipped"]})
            continue
        out.append({**line, "distinct_opcodes": len(r["opcodes"]), "instructions": r["num_instructions"],
                    "computations": r["num_computations"], "fusions": r["opcodes"].get("fusion", 0),
                    "custom_calls": r["opcodes"].get("custom-call", 0),
                    "conv_configs": len(r["convolutions"]), "dot_configs": len(r["dots"]),
                    "capture_seconds": r["capture_seconds"], "skipped": ""})
    return pd.DataFrame(out)


def diff_frame(a: dict[str, Any], b: dict[str, Any], top: int = 3) -> Any:
    """How opcode counts change from record ``a`` to ``b`` (e.g. infer -> train, before -> after).

    Columns: ``opcode, change`` (added | removed | more | fewer), ``count_a, count_b``, ``from_tf_ops`` (the
    TF ops the instructions came from, most frequent first, in whichever record has them).
    """
    import pandas as pd

    out = []
    for op in sorted(set(a["opcodes"]) | set(b["opcodes"])):
        na, nb = a["opcodes"].get(op, 0), b["opcodes"].get(op, 0)
        if na == nb:
            continue
        change = "added" if na == 0 else "removed" if nb == 0 else "more" if nb > na else "fewer"
        tf_ops = (b if nb else a).get("tf_op_types", {}).get(op, {})
        names = sorted(tf_ops, key=lambda k: -tf_ops[k])[:top]
        out.append({"opcode": op, "change": change, "count_a": na, "count_b": nb,
                    "from_tf_ops": ", ".join(names)})
    order = {"added": 0, "removed": 1, "more": 2, "fewer": 3}
    frame = pd.DataFrame(out, columns=["opcode", "change", "count_a", "count_b", "from_tf_ops"])
    return frame.sort_values(["change", "opcode"], key=lambda s: s.map(order) if s.name == "change" else s,
                             ignore_index=True)


def plot_opcode_heatmap(rows: Sequence[dict[str, Any]], mode: str = "train",
                        stages: Sequence[str] = ("before", "after")) -> Any:
    """Heatmap of opcode counts (log colour scale, blank = absent), one panel per stage, models as columns."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LogNorm

    captured = [r for r in rows if r["mode"] == mode and "skipped" not in r]
    panels = [(s, [r for r in captured if r["stage"] == s]) for s in stages]
    panels = [(s, p) for s, p in panels if p]
    if not panels:
        raise ValueError(f"no captured records with mode {mode!r} and stages {list(stages)}")
    opcodes = sorted(set().union(*(r["opcodes"] for _, p in panels for r in p)))
    width = 2.5 + 1.2 * sum(len(p) for _, p in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(max(width, 5), 0.28 * len(opcodes) + 1.5), sharey=True,
                             squeeze=False, width_ratios=[len(p) for _, p in panels])
    vmax = max(max(r["opcodes"].values()) for _, p in panels for r in p)
    for ax, (stage, panel) in zip(axes[0], panels, strict=True):
        data = np.array([[r["opcodes"].get(op, 0) for r in panel] for op in opcodes], dtype=float)
        image = ax.imshow(np.ma.masked_equal(data, 0), aspect="auto", cmap="viridis",
                          norm=LogNorm(vmin=1, vmax=vmax))
        for (i, j), n in np.ndenumerate(data):
            if n:
                ax.text(j, i, f"{int(n)}", ha="center", va="center", fontsize=6,
                        color="white" if n < vmax ** 0.5 else "black")
        ax.set_xticks(range(len(panel)), [f"{r['model']}\n{r['platform']}" for r in panel], fontsize=7,
                      rotation=30, ha="right")
        ax.set_yticks(range(len(opcodes)), opcodes, fontsize=7)
        ax.tick_params(axis="y", labelleft=ax is axes[0][0])
        ax.set_title(f"{mode}\n{stage} optimization", fontsize=9)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.6, label="instructions (log scale)")
    return fig


def conv_frame(row: dict[str, Any]) -> Any:
    """The distinct convolutions of one record, most frequent first; the window is also split into columns
    (size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal)."""
    import pandas as pd

    frame = pd.DataFrame(row["convolutions"], columns=[*hlo.CONV_FIELDS, "count"])
    window = pd.DataFrame([hlo.parse_window(w) for w in frame["window"]], columns=list(hlo.WINDOW_FIELDS))
    return pd.concat([frame, window], axis=1)


def dot_frame(row: dict[str, Any]) -> Any:
    """The distinct dots of one record, most frequent first."""
    import pandas as pd

    return pd.DataFrame(row["dots"], columns=[*hlo.DOT_FIELDS, "count"])


def format_table(row: dict[str, Any]) -> str:
    """A text report of one record: header, opcode counts by role, fusions, custom calls, conv/dot shapes."""
    backend = row.get("backend", "tensorflow")
    head = (f"{row['model']}{'' if backend == 'tensorflow' else f' ({backend})'} {row['mode']} {row['stage']} "
            f"optimization ({row['xla_stage']}), platform "
            f"{row['platform']}, batch {row['batch_size']}, {row['image_size']}², {row['precision']}")
    lines = [head, f"{row['num_instructions']} instructions in {row['num_computations']} computations, "
             f"{len(row['opcodes'])} distinct opcodes", ""]
    width = max(len(op) for op in row["opcodes"]) if row["opcodes"] else 6
    lines.append(f"{'opcode':<{width}}  {'total':>6}  " + "  ".join(f"{r:>7}" for r in hlo.ROLES))
    for op, n in sorted(row["opcodes"].items(), key=lambda kv: (-kv[1], kv[0])):
        by_role = "  ".join(f"{row['opcodes_by_role'][r].get(op, 0):>7}" for r in hlo.ROLES)
        lines.append(f"{op:<{width}}  {n:>6}  {by_role}")
    for key, title in (("fusion_kinds", "fusion kinds"), ("custom_call_targets", "custom-call targets"),
                       ("comparisons", "compare (operand type, direction)")):
        if row[key]:
            lines += ["", f"{title}: " + ", ".join(f"{k} ×{v}" for k, v in row[key].items())]
    for key, fields in (("convolutions", hlo.CONV_FIELDS), ("dots", hlo.DOT_FIELDS)):
        if row[key]:
            lines += ["", f"{len(row[key])} distinct {key}:"]
            for c in row[key]:
                shown = (f"{f}={c[f]}" for f in fields if c[f] not in ("", 1))  # omit empty dims, groups of 1
                lines.append(f"  ×{c['count']:<3} " + "  ".join(shown))
    return "\n".join(lines)


def format_csv(row: dict[str, Any]) -> str:
    """The opcode counts of one record as CSV (configuration columns repeated on each line)."""
    buf = io.StringIO()
    opcode_frame([row]).to_csv(buf, index=False)
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------- CLI


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
    parser.add_argument("--format", default="table", help=f"one of {', '.join(FORMATS)} (default: table)")
    parser.add_argument("--backend", default="tensorflow",
                        help=f"Keras backend whose step is compiled: {', '.join(BACKENDS)} (default: tensorflow)")
    parser.add_argument("--save-hlo", metavar="FILE", default=None, help="also write the HLO text to FILE")


def run(args: argparse.Namespace) -> int:
    """``resnet-lab ops``: capture one configuration and print its inventory as a table, JSON or CSV."""
    _choose("format", args.format, FORMATS)
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
