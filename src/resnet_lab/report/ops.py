"""Tables and plots of op inventories: what notebook 02 shows (the text of one inventory that ``resnet-lab
ops`` prints is :mod:`resnet_lab.hlo.inventory_text`; the captures themselves, notebook 02's plan, are
:mod:`resnet_lab.hlo.plan`).

Every function takes the JSON-ready inventories of :func:`resnet_lab.hlo.capture.inventory` (skipped ones
are left out where a table needs captured ones) and returns a pandas DataFrame, a figure or text.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from resnet_lab.core import artifacts
from resnet_lab.core.choices import MODES, STAGES
from resnet_lab.hlo import coverage, legacy2017, origin, parser
from resnet_lab.hlo import dump as xla_dump
from resnet_lab.hlo.inventory_text import IR_COLUMNS, hlo_name


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


def backend_comparison(rows: Sequence[dict[str, Any]], model: str, platform: str = "cpu") -> Any:
    """:func:`backend_frame` of ``model`` when at least two backends captured it on ``platform``; else None."""
    backends = {r["backend"] for r in rows if r["model"] == model and r["platform"] == platform
                and "skipped" not in r}
    return backend_frame(rows, model, platform) if len(backends) > 1 else None


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


def ir_table(rows: Sequence[dict[str, Any]], stable: Sequence[dict[str, Any]], model: str,
             platform: str = "cpu", portable: Sequence[dict[str, Any]] = ()) -> Any:
    """The op × IR table of ``model``: one row per op, a column per IR, backend and mode, with counts.

    HLO columns are the steps' opcodes before XLA's passes (``HLO tensorflow train``); StableHLO columns hold the
    compute ops of each module (``StableHLO jax train``), Core ATen and TFLite columns those of the inference graph
    (``Core ATen torch infer``, ``TFLite tensorflow infer``; ``portable``: :func:`resnet_lab.hlo.capture.
    capture_portable`'s records). Each op sits in the row of the HLO opcode it does the work of (:func:`hlo_name`),
    its own name in the IR's name column (``stablehlo_op``, ``core_aten_op``, ``tflite_op``; several joined by
    ``, ``). None when nothing of ``model`` was captured in another IR than HLO."""
    import pandas as pd

    mine = [s for s in [*stable, *portable] if s["model"] == model and s["platform"] == platform
            and "skipped" not in s]
    if not mine:
        return None
    cols: dict[str, dict[str, int]] = {}
    for r in rows:
        if "skipped" not in r and r["model"] == model and r["platform"] == platform and r["stage"] == "before":
            cols[f"HLO {r.get('backend', 'tensorflow')} {r['mode']}"] = dict(r["opcodes"])
    names: dict[str, dict[str, set[str]]] = {ir: {} for ir in IR_COLUMNS}
    for s in mine:
        ir = s.get("ir", "stablehlo")
        col = cols.setdefault(f"{IR_COLUMNS[ir][0]} {s['backend']} {s['mode']}", {})
        for op, n in s["compute_ops"].items():
            row = hlo_name(ir, op)
            names[ir].setdefault(row, set()).add(op)
            col[row] = col.get(row, 0) + n
    frame = pd.DataFrame(cols).fillna(0).astype(int).sort_index()
    for i, ir in enumerate(ir for ir in IR_COLUMNS if names[ir]):
        frame.insert(i, IR_COLUMNS[ir][1], [", ".join(sorted(names[ir].get(op, ()))) for op in frame.index])
    frame.index.name = "opcode"
    return frame


IR_FAMILIES = ("HLO", "StableHLO", "Core ATen", "TFLite", "ONNX")  # the column prefixes of ir_table


def ir_mapping(frame: Any, portable: Sequence[dict[str, Any]] = ()) -> Any:
    """The name map of :func:`ir_table`'s frame: per HLO opcode row, its name in each IR (``stablehlo_op``,
    ``core_aten_op``, ``tflite_op``), ``irs`` (the IR families that have it) and ``only_in`` (the one IR that has
    it, else empty: a custom call, a ``chlo`` op, a bookkeeping copy). TFLite's fused activations, which no row
    shows (a ReLU fused into CONV_2D/ADD is no op of its own), come as rows ``fused:CONV_2D+RELU`` with their count
    in the TFLite columns. The count columns follow. None for ``frame`` None (no IR table)."""
    import pandas as pd

    if frame is None:
        return None

    name_cols = [c for c in ("stablehlo_op", "core_aten_op", "tflite_op", "onnx_op") if c in frame.columns]
    count_cols = [c for c in frame.columns if c not in name_cols]
    present = {fam: [c for c in count_cols if str(c).startswith(fam + " ")] for fam in IR_FAMILIES}
    fams = [[fam for fam, cols in present.items() if cols and (frame.loc[op, cols] != 0).any()]
            for op in frame.index]
    out = frame.copy()
    out["irs"] = [", ".join(f) for f in fams]
    out["only_in"] = [f[0] if len(f) == 1 and sum(bool(c) for c in present.values()) > 1 else "" for f in fams]
    fused: collections.Counter[str] = collections.Counter()
    for r in portable:
        if r.get("ir") == "tflite" and "skipped" not in r:
            fused.update(r["fused_activations"])
    if fused:
        extra = pd.DataFrame([{"tflite_op": k, "irs": "TFLite", "only_in": "TFLite",
                               **dict.fromkeys(present["TFLite"], n)} for k, n in sorted(fused.items())],
                             index=[f"fused:{k}" for k in sorted(fused)])
        out = pd.concat([out, extra])
    text_cols = [*name_cols, "irs", "only_in"]
    out[text_cols] = out[text_cols].fillna("")
    out[count_cols] = out[count_cols].fillna(0).astype(int)
    out.index.name = "opcode"
    return out[[*text_cols, *count_cols]]


def describe_portable(portable: Sequence[dict[str, Any]]) -> str:
    """What the Core ATen and TFLite records say, as sentences: distinct ops per IR and model, fused activations,
    the interpreter's agreement, and why a record was skipped."""
    if not portable:
        return "Core ATen and TFLite were not read (irs without 'core-aten' or 'tflite')."
    lines = []
    for r in portable:
        label = f"{IR_COLUMNS[r['ir']][0]} {r['model']} {r['mode']}"
        if "skipped" in r:
            lines.append(f"{label}: skipped ({r['skipped']}).")
            continue
        extra = ""
        if r["ir"] == "tflite":
            fused = ", ".join(f"{k} ×{v}" for k, v in r["fused_activations"].items()) or "none"
            agree = "agrees" if r["interpreter_agrees"] else "DISAGREES"
            extra = f"; fused activations: {fused}; the interpreter's op list {agree} with the flatbuffer's"
        if r["ir"] == "onnx":
            agree = {True: "agrees", False: "DISAGREES", None: "was not read (no onnxruntime)"}[r["runtime_agrees"]]
            extra = (f"; {sum(r['shape_ops'].values())} nodes computing shapes from the dynamic batch dimension left "
                     f"out; ONNX Runtime's loaded graph {agree} with the count")
        if r.get("keras_export_error"):
            extra += f"; the native PyTorch model stood in for the Keras model ({r['keras_export_error']})"
        lines.append(f"{label}: {len(r['compute_ops'])} distinct ops, {sum(r['compute_ops'].values())} in all, "
                     f"{len(r['convolutions'])} distinct convolutions{extra} ({r['capture_seconds']:.1f} s).")
    return " ".join(lines)


CONV_OPS = ("convolution", "stablehlo.convolution", "aten.convolution.default", "CONV_2D", "DEPTHWISE_CONV_2D", "Conv")


def ir_headline(rows: Sequence[dict[str, Any]], stable: Sequence[dict[str, Any]],
                portable: Sequence[dict[str, Any]], model: str, platform: str = "cpu") -> dict[str, Any]:
    """What notebook 02 records about ``model`` across IRs, keyed ``ir/backend/mode``: ``ir_distinct_ops`` (HLO
    before optimization, StableHLO, Core ATen and TFLite compute ops), ``ir_convolutions`` (convolution ops in
    each), ``ir_ops`` (the Core ATen and TFLite op names), ``ir_fused_activations`` (TFLite) and ``ir_skipped``."""
    mine = [("hlo", r) for r in rows if r["model"] == model and r["platform"] == platform
            and r.get("stage") == "before"]
    mine += [(r.get("ir", "stablehlo"), r) for r in [*stable, *portable] if r["model"] == model
             and r["platform"] == platform]
    done = [(ir, r) for ir, r in mine if "skipped" not in r]

    def ops(ir: str, r: dict[str, Any]) -> dict[str, int]:
        return r["opcodes"] if ir == "hlo" else r["compute_ops"]

    def key(ir: str, r: dict[str, Any]) -> str:
        return f"{ir}/{r.get('backend', 'tensorflow')}/{r['mode']}"

    return {
        "ir_distinct_ops": {key(ir, r): len(ops(ir, r)) for ir, r in done},
        "ir_convolutions": {key(ir, r): sum(n for op, n in ops(ir, r).items() if op in CONV_OPS) for ir, r in done},
        "ir_ops": {key(ir, r): sorted(r["compute_ops"]) for ir, r in done if ir in ("core-aten", "tflite", "onnx")},
        "ir_fused_activations": {key(ir, r): r["fused_activations"] for ir, r in done if ir == "tflite"},
        "ir_skipped": {key(ir, r): r["skipped"] for ir, r in mine if "skipped" in r and ir != "hlo"},
    }


def describe_stablehlo(stable: Sequence[dict[str, Any]]) -> str:
    """What the StableHLO captures say, as sentences: distinct compute ops per model and mode, and whether the
    text count and the MLIR walk agreed."""
    if not stable:
        return "No StableHLO was captured (irs without 'stablehlo', or JAX not installed)."
    per = "; ".join(f"{s['backend']} {s['model']} {s['mode']} {len(s['compute_ops'])}" for s in stable)
    agree = sum(bool(s["walk_agrees"]) for s in stable)
    return (f"Distinct StableHLO compute ops (JAX: its lowering; TensorFlow: its HLO converted with "
            f"hlo_to_stablehlo): {per}. The text count and the MLIR bindings' walk agree op by op in {agree} of "
            f"{len(stable)} modules.")


def model_columns(pivot: Any, model: str) -> Any:
    """The columns of :func:`opcode_pivot`'s table that belong to ``model`` (labels ``model/...``), the opcodes
    it uses: the view a report shows, the full table going to CSV."""
    cols = [c for c in pivot.columns if str(c).split("/")[0] == model]
    view = pivot[cols]
    return view[(view != 0).any(axis=1)]


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


CAPTURE_VIEW = {  # what notebook 02 shows of summary_frame (via workbook.display.table); the CSV has it all
    "backend": ("backend", ""), "model": ("model", ""), "mode": ("mode", ""), "stage": ("stage", ""),
    "platform": ("platform", ""), "distinct_opcodes": ("distinct opcodes", "int"),
    "instructions": ("instructions", "int"), "fusions": ("fusions", "int"), "conv_configs": ("conv shapes", "int"),
    "capture_seconds": ("capture", "s"),
}


def capture_view(summary: Any, model: str | None = None) -> Any:
    """:func:`summary_frame` (of ``model`` alone, if given) with ``status`` (ok | skipped), ``reason`` and
    ``label`` columns, for a view that folds the skipped captures into one line."""
    view = (summary if model is None else summary[summary["model"] == model]).copy()
    skipped = view["skipped"].fillna("").astype(str) if "skipped" in view else None
    view["status"] = ["skipped" if s else "ok" for s in skipped] if skipped is not None else "ok"
    view["reason"] = skipped if skipped is not None else ""
    view["label"] = [f"{b} {m} {mo}/{st}/{p}" for b, m, mo, st, p in
                     zip(view["backend"], view["model"], view["mode"], view["stage"], view["platform"], strict=True)]
    return view


def diff_frame(a: dict[str, Any], b: dict[str, Any], top: int = 3) -> Any:
    """How opcode counts change from record ``a`` to ``b`` (e.g. infer -> train, before -> after).

    Columns: ``opcode, change`` (added | removed | more | fewer), ``count_a, count_b``, ``from_tf_ops`` (the
    TF ops the instructions came from, most frequent first, in whichever record has them).
    """
    import pandas as pd

    diff = parser.diff_opcodes(a["opcodes"], b["opcodes"])
    counts = {**{op: (0, n) for op, n in diff["added"].items()}, **{op: (n, 0) for op, n in diff["removed"].items()},
              **diff["changed"]}
    out = []
    for op, (na, nb) in counts.items():
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

    frame = pd.DataFrame(row["convolutions"], columns=[*parser.CONV_FIELDS, "count"])
    window = pd.DataFrame([parser.parse_window(w) for w in frame["window"]], columns=list(parser.WINDOW_FIELDS))
    return pd.concat([frame, window], axis=1)


def stablehlo_conv_frame(records: Sequence[dict[str, Any]] | None, model: str, mode: str = "infer",
                         backend: str = "jax") -> Any:
    """The distinct ``stablehlo.convolution`` configurations of one StableHLO record (operand and result
    types, window, count), most frequent first; None where there is no such record."""
    import pandas as pd

    rec = next((r for r in records or [] if r.get("model") == model and r.get("mode") == mode
                and r.get("backend") == backend and r.get("convolutions") is not None), None)
    if rec is None:
        return None
    frame = pd.DataFrame(rec["convolutions"], columns=["lhs", "rhs", "result", "window", "count"])
    return frame.sort_values("count", ascending=False, kind="stable").reset_index(drop=True)


def dot_frame(row: dict[str, Any]) -> Any:
    """The distinct dots of one record, most frequent first."""
    import pandas as pd

    return pd.DataFrame(row["dots"], columns=[*parser.DOT_FIELDS, "count"])


# ------------------------------------------------------------------------------------ notebook 02
CONFIG = ("model", "mode", "stage", "platform")  # what one TensorFlow record of notebook 02 is keyed by


def opcode_union(rows: Sequence[dict[str, Any]], model: str, mode: str = "train", platform: str = "cpu",
                 backend: str = "tensorflow") -> set[str]:
    """Every opcode of ``model``'s ``mode`` step on ``platform`` at any stage (the set the 2017 list is read
    against); empty when nothing of it was captured."""
    return set().union(*(set(r["opcodes"]) for r in rows if "skipped" not in r and r["model"] == model
                         and r["mode"] == mode and r["platform"] == platform
                         and r.get("backend", "tensorflow") == backend))


def headline(rows: Sequence[dict[str, Any]], focus_model: str, opcode_list: dict[str, Any] | None = None,
             backend_ops: Any = None, legacy: dict[str, Any] | None = None,
             dump: dict[str, Any] | None = None) -> dict[str, Any]:
    """What notebook 02 records in ``results.json``, from its records (captured and skipped alike).

    Keyed by :func:`config_label` of :data:`CONFIG` (TensorFlow's records), and of ``backend`` + CONFIG for
    the focus model on every backend. ``backend_ops`` is :func:`backend_frame`'s table (or None),
    ``legacy`` :func:`resnet_lab.hlo.legacy2017.summary`'s, ``dump`` the 2017 method's result.
    """
    captured_all = [r for r in rows if "skipped" not in r]
    captured = [r for r in captured_all if r.get("backend", "tensorflow") == "tensorflow"]
    focus = [r for r in captured if r["model"] == focus_model]

    def by_label(records: Sequence[dict[str, Any]], value, keys: Sequence[str] = CONFIG) -> dict[str, Any]:
        return {config_label(r, keys): value(r) for r in records}

    return {
        "opcode_list": opcode_list,
        "distinct_opcodes": by_label(captured, lambda r: len(r["opcodes"])),
        "instructions": by_label(captured, lambda r: r["num_instructions"]),
        "capture_seconds": by_label(captured, lambda r: r["capture_seconds"]),
        "focus_opcodes": by_label(focus, lambda r: sorted(r["opcodes"])),
        "focus_conv_configs": by_label(focus, lambda r: len(r["convolutions"])),
        "custom_call_targets": by_label(captured, lambda r: r["custom_call_targets"]),
        "backend_distinct_opcodes": by_label([r for r in captured_all if r["model"] == focus_model],
                                             lambda r: len(r["opcodes"]), ("backend", *CONFIG)),
        "backend_only_in": (None if backend_ops is None else
                            {op: b for op, b in backend_ops["only_in"].items() if b}),
        "skipped": [{k: r[k] for k in ("backend", *CONFIG, "skipped")} for r in rows if "skipped" in r],
        "legacy_2017": legacy,
        "dump": None if dump is None else {
            "same_opcode_set": {a["stage"]: a["same_opcode_set"] for a in dump["agreement"]},
            "seconds": dump["seconds"], "regex_2017_today": dump["regex_2017_today"]},
    }


def save_heatmaps(out: Path, rows: Sequence[dict[str, Any]], modes: Sequence[str], stages: Sequence[str]) -> None:
    """:func:`plot_opcode_heatmap` of each mode that has captured records, saved as ``heatmap_<mode>.png``
    (the figures stay open: a notebook shows them below the cell)."""
    for mode in modes:
        if any(r["mode"] == mode and "skipped" not in r for r in rows):
            artifacts.save_figure(out, f"heatmap_{mode}", plot_opcode_heatmap(rows, mode=mode, stages=stages))


def describe_dump(dump: dict[str, Any] | None) -> str:
    """:func:`resnet_lab.hlo.dump.describe` of a :func:`resnet_lab.hlo.plan.fit_dump` record, or why there is none."""
    return xla_dump.describe(dump) if dump else "The 2017 method was not redone (`dump_fit` is off)."


def dump_agreement(dump: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """Per stage, how the dump's opcode sets and counts agree with the in-process capture; None without a dump."""
    return dump["agreement"] if dump else None


def stablehlo_headline(stable: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What notebook 02 records of its StableHLO modules: distinct compute ops per ``backend/model/mode``, and
    whether the text count and the MLIR walk agreed in every module (None without StableHLO)."""
    return {"stablehlo_distinct": {f"{s['backend']}/{s['model']}/{s['mode']}": len(s["compute_ops"])
                                   for s in stable},
            "stablehlo_walk_agrees": all(s["walk_agrees"] for s in stable) if stable else None}


# ------------------------------------------------------------------ where each op comes from, and coverage

BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}


def origin_tables(rows: Sequence[dict[str, Any]], model: str, mode: str = "train", stage: str = "before",
                  backend: str = "tensorflow", platform: str = "cpu") -> dict[str, Any] | None:
    """``{"by_opcode": ..., "signatures": ...}`` of one record (:func:`resnet_lab.hlo.origin.by_opcode` and
    :func:`~resnet_lab.hlo.origin.signatures` as DataFrames), or None where it was not captured."""
    import pandas as pd

    r = find_record(rows, model, mode, stage, platform, backend)
    if r is None or "origins" not in r:
        return None
    return {"by_opcode": pd.DataFrame(origin.by_opcode(r["origins"])),
            "signatures": pd.DataFrame(origin.signatures(r["origins"]))}


def describe_origins(rows: Sequence[dict[str, Any]], model: str, mode: str = "train", stage: str = "before",
                     platform: str = "cpu") -> str:
    """One sentence per backend: how many instructions map to a layer, and where the remainder comes from."""
    parts = []
    for backend, label in BACKEND_NAMES.items():
        r = find_record(rows, model, mode, stage, platform, backend)
        if r is None or "origins" not in r:
            continue
        m = origin.mapped_share(r["origins"])
        top = ", ".join(f"`{k}` {n}" for k, n in list(m["unmapped_scopes"].items())[:6])
        layers = len({x for row in r["origins"] for x in row["layers"]})
        parts.append(f"{label}: {m['with_layer']} of {m['instructions']} instructions "
                     f"({100 * m['with_layer'] / m['instructions']:.0f} %) map to one of {layers} Keras layers; "
                     f"the other {m['unmapped']} are named by their scope ({top}, …).")
    return " ".join(parts) or "No record of this configuration was captured."


SUPPORT_2017 = {"as written": "support_2017.yaml", "as today's opcodes": "support_2017_today.yaml"}


def coverage_2017(out: Path, rows: Sequence[dict[str, Any]], model: str, modes: Sequence[str] = MODES,
                  stage: str = "before", platform: str = "cpu") -> dict[str, Any]:
    """The 2017 note's list as a support file (written as ``support_2017.yaml``; also read as today's opcodes,
    :func:`resnet_lab.hlo.legacy2017.today_opcodes`, ``support_2017_today.yaml``) checked against ``model``'s
    TensorFlow steps: ``{"summary": DataFrame, "results": {"<reading>/<mode>": coverage.check(...)}}``."""
    import pandas as pd
    import yaml

    lists = {"as written": legacy2017.tokens_2017(), "as today's opcodes": legacy2017.today_opcodes()}
    results, lines = {}, []
    for reading, names in lists.items():
        (Path(out) / SUPPORT_2017[reading]).write_text(yaml.safe_dump(
            {"name": f"the 2017 note's XLA op list, {reading}", "ops": names}, default_flow_style=None, width=100))
        support = coverage.support_from_ops(names, f"2017 list {reading}")
        for mode in modes:
            r = find_record(rows, model, mode, stage, platform)
            if r is None or "origins" not in r:
                continue
            res = results[f"{reading}/{mode}"] = coverage.check(r["origins"], support)
            lines.append({"support": f"2017 list {reading}", "mode": mode, "covered": res["covered"],
                          "missing_ops": ", ".join(m["opcode"] for m in res["missing_ops"]),
                          "instructions_missing_pct": res["share_instructions"],
                          "flops_blocked_pct": res["share_flops"], "flops_fed_pct": res["share_flops_fed"],
                          "layers_blocked": len({b["layer"] for b in res["layers_blocked"]
                                                 if not b["layer"].startswith("(")}),
                          "unknown_names": ", ".join(f"{u['name']}→{u['nearest']}" for u in res["unknown"])})
    return {"summary": pd.DataFrame(lines), "results": results}


def coverage_detail(cov: dict[str, Any], key: str) -> dict[str, Any]:
    """The missing ops, the convolutions/dots that need them and the layers blocked of one :func:`coverage_2017`
    result (``"as today's opcodes/train"``), as DataFrames (empty where nothing is missing)."""
    import pandas as pd

    res = cov["results"].get(key)
    if res is None:
        return {}
    return {k: pd.DataFrame(res[k]) for k in ("missing_ops", "missing_signatures", "needed_by", "layers_blocked")}


def describe_coverage(cov: dict[str, Any]) -> str:
    """:func:`coverage_2017`'s answer as Markdown: one line per reading and mode
    (:func:`resnet_lab.hlo.coverage.headline`)."""
    if not cov["results"]:
        return "No step of the focus model was captured before optimization: no coverage to report."
    return "\n".join(f"- **2017 list {key.replace('/', ', ')}:** {coverage.headline(r)}"
                     for key, r in cov["results"].items())


def coverage_headline(cov: dict[str, Any]) -> dict[str, Any]:
    """What notebook 02 records of :func:`coverage_2017`: per reading and mode, the missing ops, the shares of
    instructions and FLOPs and the layers blocked."""
    return {key: {"covered": r["covered"], "missing_ops": [m["opcode"] for m in r["missing_ops"]],
                  "share_instructions": r["share_instructions"], "share_flops": r["share_flops"],
                  "share_flops_fed": r["share_flops_fed"],
                  "layers_blocked": len({b["layer"] for b in r["layers_blocked"] if not b["layer"].startswith("(")}),
                  "unknown": [u["name"] for u in r["unknown"]]}
            for key, r in cov["results"].items()}


def describe_iree_train(rec: dict[str, Any] | None) -> str:
    """One sentence: whether IREE ran the training step with JAX's loss and weights, or where and why not."""
    if rec is None:
        return "IREE was not asked to compile the training step (iree_train_image_size 0)."
    where = f"{rec['model']}'s JAX training step ({rec.get('image_size')}², batch {rec.get('batch_size')})"
    if rec["status"] == "skipped":
        return f"IREE and {where}: skipped, {rec['reason']}."
    if rec["status"] == "ok":
        return (f"IREE compiled {where} in {rec['compile_s']:.1f} s ({rec['dispatches']} dispatches) and ran one "
                f"step: loss {rec['loss_iree']:.5f} against JAX's {rec['loss_jax']:.5f}, every updated variable "
                f"within {rec['state_max_rel_diff']:.1e} of JAX's (tolerance {rec['tolerance']:g}).")
    return (f"IREE did not get through {where}: at **{rec['stage']}**, `{rec['reason']}`. The inference "
            f"module compiles and runs (03's other compilers); the training step is where IREE stops.")
