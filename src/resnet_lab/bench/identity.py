"""What a benchmark row is: which configuration it measured, its name, whether it measured anything, and
its values read back from CSV or JSON.

Every reader of rows asks these questions (de-duplicating a matrix, notebook 03's tables and conclusion,
the speed targets, ``resnet-lab compare``); they all ask this module, so a row counts, matches and is
named the same way everywhere:

- :data:`IDENTITY`: the knobs that define a measurement. Two rows agree on them: they measured the same
  thing. :func:`match_key` is their values, from a row or from a configuration alike.
- :func:`describe`: the one human name of a row (or configuration).
- :func:`is_measured`: whether a row has a number. One rule: status ``ok`` or ``short`` (a ``short`` row
  ran out of its time budget before ``steps``, but its timed steps are real and its interval says how
  well they pin the speed), and images/sec above zero.
- :func:`read_rows`, :func:`read_row`: rows from a CSV or JSON file (older records included) as typed
  values, so no caller re-parses ``"True"`` or ``"32"``.

Plain Python: nothing here imports a framework.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from resnet_lab import models
from resnet_lab.bench import schema
from resnet_lab.core import artifacts
from resnet_lab.core.errors import UsageError

# The knobs that define a measurement, in the order reports list them (compare's throughput.csv columns).
IDENTITY = ("model", "mode", "batch_size", "image_size", "precision", "xla", "onednn", "backend", "impl",
            "intra_op", "inter_op", "replicas", "workers", "device", "data_format", "fused_bn", "fold_bn",
            "env", "onednn_profile", "recipe")
# What else a configuration sets, and why it is not part of what was measured:
# - how long and how often it is timed (warmup, steps, min/max time, timeout): they change how precisely
#   the speed is known, not which speed; two runs of one configuration may set them differently;
# - in how many fresh processes it is measured (repeats): each process runs the same configuration, so
#   more of them pin its speed down better (and give an interval from their spread) without changing it;
#   a row of one process and a row of five are the same measurement, compared;
# - the GEMM check, timed beside the steps, not in them;
# - a worker's place and settings in its cluster (task index, collective, peer timeout, the one-worker
#   baseline): every worker's row is the cluster's, and the row records the collective that ran, not the
#   one asked for;
# - the label, a name.
# - where an engine reads the exported model (export_dir): the same model and weights wherever they are kept.
PROTOCOL = ("warmup", "steps", "min_time_s", "max_time_s", "timeout_s", "repeats", "gemm_check", "task_index",
            "collective", "peer_timeout_s", "baseline_images_per_sec", "measure_baseline", "export_dir")
LABEL = "label"
# Within one run a configuration is measured once only when the protocol agrees too: a row timed for
# 2 steps does not stand in for one asked to be timed for 20 (bench.config.config_key).
SAME_RUN = (*IDENTITY, *PROTOCOL)
# Rows that compare a knob pair up on the identity less that knob (report.speed.fused_bn_gains).
FUSED_BN_PAIR = tuple(k for k in IDENTITY if k != "fused_bn")

MEASURED_STATUSES = ("ok", "short")
# What "jit" is called in a row's name, per backend (the other compilers: what they compiled for).
ENGINE_NAMES = {"jax": "jax.jit", "torch": "torch.compile", "iree": "llvm-cpu", "onnxruntime": "CPU EP",
                "openvino": "CPU plugin"}

# Columns written before a knob existed mean the knob's value of that time.
OLD_RECORD_DEFAULTS = {"backend": "tensorflow", "impl": "keras", "fused_bn": False, "fold_bn": False, "recipe": ""}

# The types of the row's fields that are not text (resnet_lab.bench.schema); a CSV cell holds them as text.
BOOL_FIELDS = schema.of_type("bool")
INT_FIELDS = schema.of_type("int")
FLOAT_FIELDS = schema.of_type("float")
LIST_FIELDS = schema.of_type("list[float]")  # JSON only: the per-step seconds, each process's mean step time
NESTED_LIST_FIELDS = schema.of_type("list[list[float]]")  # JSON only: each process's per-step seconds


# ------------------------------------------------------------------------------------------ reading
def _bool(v: Any) -> bool | None:
    if isinstance(v, bool) or v is None:
        return v
    text = str(v).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ValueError(f"{v!r} is not a boolean")


def _number(v: Any, integer: bool) -> int | float | None:
    x = float(v)
    if integer and math.isfinite(x) and x == int(x):
        return int(x)
    return x


def _value(key: str, v: Any) -> Any:
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    if key in BOOL_FIELDS:
        return _bool(v)
    if key in INT_FIELDS or key in FLOAT_FIELDS:
        return _number(v, key in INT_FIELDS)
    if key in LIST_FIELDS:
        return [float(t) for t in (json.loads(v) if isinstance(v, str) else v)]
    if key in NESTED_LIST_FIELDS:
        return [[float(t) for t in times] for times in (json.loads(v) if isinstance(v, str) else v)]
    return v


def read_row(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A row as typed values, from a CSV line (all text) or a JSON record alike: empty cells are None,
    booleans and numbers are parsed, the knobs an older record lacks take their value of that time
    (:data:`OLD_RECORD_DEFAULTS`). Columns this module does not know are kept as they are."""
    row = {}
    for k, v in raw.items():
        try:
            row[k] = _value(k, v)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"column {k}: {exc}") from exc
    for k, v in OLD_RECORD_DEFAULTS.items():
        if row.get(k) is None:
            row[k] = v
    return row


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The typed rows (:func:`read_row`) of a ``bench.csv`` or ``bench.json`` (a list of records).

    A file that is not whole is an error naming it, never fewer rows: a CSV cut inside its header would
    otherwise read as a file without rows, and a JSON list cut short does not parse
    (:func:`resnet_lab.core.artifacts.read_csv`)."""
    p = Path(path)
    try:
        # a CSV that is not whole raises its own ValueError, naming the file
        records = json.loads(p.read_text()) if p.suffix == ".json" else artifacts.read_csv(p)
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError("not a list of records")
        return [read_row(r) for r in records]
    except (AttributeError, TypeError, ValueError) as exc:  # OSError (no such file) is left as it is
        if str(exc).startswith(str(p)):
            raise
        raise ValueError(f"{p}: not a file of benchmark rows ({type(exc).__name__}: {exc})") from exc


# ------------------------------------------------------------------------------------------ identity
def as_row(cfg: Any) -> dict[str, Any]:
    """The identity fields of a configuration (:class:`~resnet_lab.bench.config.BenchConfig`) as its row
    records them: oneDNN is "n/a" on JAX (XLA:CPU has its own kernels), workers is their number, the extra
    environment is sorted JSON ("" when there is none)."""
    return {
        "model": cfg.model, "mode": cfg.mode, "batch_size": cfg.batch_size, "image_size": cfg.image_size,
        "precision": cfg.precision, "xla": cfg.xla,
        "onednn": cfg.onednn if cfg.backend in ("tensorflow", "torch") else "n/a",
        "backend": cfg.backend, "impl": cfg.impl, "intra_op": cfg.intra_op, "inter_op": cfg.inter_op,
        "replicas": cfg.replicas, "workers": len(cfg.workers) if cfg.workers else None, "device": cfg.device,
        "data_format": cfg.data_format, "fused_bn": cfg.fused_bn, "fold_bn": cfg.fold_bn,
        "env": json.dumps(cfg.env, sort_keys=True) if cfg.env else "", "onednn_profile": cfg.onednn_profile,
        "recipe": cfg.recipe,
    }


def _identity(row_or_config: Any) -> dict[str, Any]:
    """The identity fields as typed row values, whichever is given."""
    if isinstance(row_or_config, Mapping):
        return read_row({k: row_or_config.get(k) for k in IDENTITY})
    return read_row(as_row(row_or_config))


def _image_size(model: Any, size: Any) -> Any:
    """The input side a row ran at: a configuration leaves it None for the model's default, a measured row
    records the real one."""
    if size is not None:
        return size
    try:
        return models.get_spec(str(model)).input_size
    except UsageError:  # a model this checkout no longer has: its size stays unknown
        return None


def match_key(row_or_config: Any, fields: Iterable[str] = IDENTITY) -> tuple:
    """What two rows (or a configuration and its row) must agree on to be the same measurement: the values
    of ``fields`` (default :data:`IDENTITY`), normalised so that a CSV and a JSON record, and a
    configuration and the row it gave, read alike: the image size is the one run (the model's default
    where a configuration leaves it open), the oneDNN profile counts as on or off (a row holds the profile
    itself, so a profiled configuration whose run failed reads as one without)."""
    d = _identity(row_or_config)
    d["image_size"] = _image_size(d["model"], d["image_size"])
    d["onednn_profile"] = bool(d["onednn_profile"])
    return tuple(d[k] for k in fields)


def is_measured(row: Mapping[str, Any]) -> bool:
    """Whether a row has a speed: status ok or short (see the module's doc) and images/sec above zero."""
    ips = row.get("images_per_sec")
    try:
        return row.get("status") in MEASURED_STATUSES and ips is not None and float(ips) > 0
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------------------------------ names
def threads(v: Any) -> str:
    """A thread setting as a name shows it: the count, or "default" where it is left to the framework."""
    try:
        return "default" if v is None or v != v else str(int(v))
    except (TypeError, ValueError):
        return "default"


def describe(row_or_config: Any, labelled: bool = False) -> str:
    """The one human name of a row or configuration, e.g. "bf16 · XLA jit · oneDNN · b32 · 2/1 threads".

    Precision, compiler, oneDNN and batch are always named; every other identity field only where it is
    not its usual value (the Keras model on TensorFlow, training, CPU, one replica, the default threads,
    NHWC, Keras' batch norm, one worker, the model's default image size, resnet50), so two rows with
    different :func:`match_key` get different names. Rows of the jax and torch backends start with the
    backend and name their compiler ("jax · fp32 · jax.jit"). ``labelled``: "label (name)" when the row
    has a label."""
    d = _identity(row_or_config)
    backend = d["backend"]
    parts = [] if backend == "tensorflow" else ["native torch" if d["impl"] == "native" else backend]
    parts.append(str(d["precision"]))
    if backend == "tensorflow":
        parts.append("XLA " + str(d["xla"]) if d["xla"] != "off" else "no XLA")
    else:
        parts.append(ENGINE_NAMES.get(backend, "jit") if d["xla"] == "jit" else "eager")
    if d["onednn"] in ("on", "off"):
        parts.append("oneDNN" if d["onednn"] == "on" else "no oneDNN")
    parts.append(f"b{d['batch_size']}")
    replicas = d["replicas"] or 1
    if replicas > 1:
        parts.append(f"{replicas}×{d['device']}" + (" (emulated)" if d["device"] == "cpu" else ""))
    elif d["device"] not in (None, "cpu"):
        parts.append(str(d["device"]))
    if d["intra_op"] is not None or d["inter_op"] is not None:
        parts.append(f"{threads(d['intra_op'])}/{threads(d['inter_op'])} threads")
    if d["data_format"] == "channels_first":
        parts.append("NCHW")
    if d["fused_bn"]:
        parts.append("fused BN")
    if d["fold_bn"]:
        parts.append("BN folded")
    if d["workers"]:
        parts.append(f"{d['workers']} workers")
    if d["onednn_profile"]:
        parts.append("oneDNN profile")
    if d["recipe"]:
        parts.append(f"recipe {d['recipe']}")
    if d["env"]:
        parts.append(str(d["env"]))
    if d["mode"] not in (None, "train"):
        parts.append(str(d["mode"]))
    if d["model"] not in (None, "resnet50"):
        parts.append(str(d["model"]))
    if d["image_size"] is not None and d["image_size"] != _image_size(d["model"], None):
        parts.append(f"{d['image_size']}²")
    name = " · ".join(parts)
    label = row_or_config.get(LABEL) if isinstance(row_or_config, Mapping) else getattr(row_or_config, LABEL, "")
    return f"{label} ({name})" if labelled and label else name
