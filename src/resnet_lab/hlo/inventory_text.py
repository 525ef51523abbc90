"""One op inventory as text (a plain table, CSV or Markdown), and the names each IR gives an op: what
``resnet-lab ops`` prints.

The tables and plots over many inventories (notebook 02) are :mod:`resnet_lab.report.ops`; they name ops across
IRs with :func:`hlo_name`. :func:`opcode_lines` lays opcodes out long (02's ``opcodes_long.csv``, written by
:mod:`resnet_lab.hlo.plan`; 01's op inventory).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from resnet_lab.core.text import markdown_table
from resnet_lab.hlo import parser
from resnet_lab.hlo import stablehlo as shlo

OPCODE_COLUMNS = ("model", "mode", "stage", "platform", "precision", "opcode", "count", *parser.ROLES)


def opcode_lines(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per (model, mode, stage, platform, opcode) of ``rows``: the total and per-role counts."""
    out = []
    for r in rows:
        for op, n in r["opcodes"].items():
            roles = {role: r["opcodes_by_role"][role].get(op, 0) for role in parser.ROLES}
            config = {k: r[k] for k in ("model", "mode", "stage", "platform", "precision")}
            out.append({**config, "opcode": op, "count": n, **roles})
    return out


# The HLO opcode an op of another IR does the work of, where one is obvious (else the op keeps its own name). ReLU
# is a `maximum` with zero in HLO; a mean is a `reduce` (then a divide); max pooling is a `reduce-window`.
ATEN_TO_HLO = {
    "aten.convolution.default": "convolution", "aten.add.Tensor": "add", "aten.sub.Tensor": "subtract",
    "aten.mul.Tensor": "multiply", "aten.div.Tensor": "divide", "aten.rsqrt.default": "rsqrt",
    "aten.sqrt.default": "sqrt", "aten.relu.default": "maximum", "aten.maximum.default": "maximum",
    "aten.mean.dim": "reduce", "aten.sum.dim_IntList": "reduce", "aten.amax.default": "reduce",
    "aten.mm.default": "dot", "aten.addmm.default": "dot", "aten.bmm.default": "dot",
    "aten.max_pool2d_with_indices.default": "reduce-window", "aten.avg_pool2d.default": "reduce-window",
    "aten.constant_pad_nd.default": "pad", "aten.view.default": "reshape", "aten.permute.default": "transpose",
    "aten.clone.default": "copy", "aten.expand.default": "broadcast", "aten._to_copy.default": "convert",
    "aten.exp.default": "exponential", "aten.log.default": "log", "aten.neg.default": "negate",
    "aten._native_batch_norm_legit_no_training.default": "batch-norm-inference",  # the native model's BN
}
TFLITE_TO_HLO = {
    "CONV_2D": "convolution", "DEPTHWISE_CONV_2D": "convolution", "ADD": "add", "SUB": "subtract",
    "MUL": "multiply", "DIV": "divide", "RSQRT": "rsqrt", "SQRT": "sqrt", "RELU": "maximum", "MAXIMUM": "maximum",
    "MEAN": "reduce", "SUM": "reduce", "FULLY_CONNECTED": "dot", "BATCH_MATMUL": "dot", "MAX_POOL_2D": "reduce-window",
    "AVERAGE_POOL_2D": "reduce-window", "PAD": "pad", "RESHAPE": "reshape", "TRANSPOSE": "transpose", "CAST": "convert",
    "EXP": "exponential", "LOG": "log", "NEG": "negate",
}
# ONNX (the model exported for the other compilers): Keras' batch norm arrives as Sub/Mul/Add, a ReLU is Relu.
ONNX_TO_HLO = {
    "Conv": "convolution", "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Sqrt": "sqrt",
    "Reciprocal": "divide", "Relu": "maximum", "Max": "maximum", "ReduceMean": "reduce", "ReduceSum": "reduce",
    "GlobalAveragePool": "reduce", "Gemm": "dot", "MatMul": "dot", "MaxPool": "reduce-window",
    "AveragePool": "reduce-window", "Pad": "pad", "Reshape": "reshape", "Flatten": "reshape",
    "Transpose": "transpose", "Cast": "convert", "Exp": "exponential", "Log": "log", "Neg": "negate",
    "Identity": "copy", "BatchNormalization": "batch-norm-inference",
}
IR_COLUMNS = {"stablehlo": ("StableHLO", "stablehlo_op"), "core-aten": ("Core ATen", "core_aten_op"),
              "tflite": ("TFLite", "tflite_op"), "onnx": ("ONNX", "onnx_op")}


def hlo_name(ir: str, op: str) -> str:
    """The HLO opcode row an op of ``ir`` (stablehlo | core-aten | tflite) goes in: :func:`resnet_lab.hlo.stablehlo.
    as_hlo_name`, :data:`ATEN_TO_HLO`, :data:`TFLITE_TO_HLO`; an op with no obvious HLO opcode keeps its name."""
    if ir == "stablehlo":
        return shlo.as_hlo_name(op)
    return {"core-aten": ATEN_TO_HLO, "tflite": TFLITE_TO_HLO, "onnx": ONNX_TO_HLO}.get(ir, {}).get(op, op)


def _by_count(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def format_stablehlo(rec: dict[str, Any], markdown: bool = False) -> str:
    """A text report of one StableHLO record: ops by count (text count, MLIR walk), convolutions; with
    ``markdown``, the same as GitHub Markdown."""
    head = (f"{rec['model']} ({rec['backend']}) {rec['mode']} StableHLO, platform {rec['platform']}, batch "
            f"{rec['batch_size']}, {rec['image_size']}², {rec['precision']}")
    agree = "agree op by op" if rec["walk_agrees"] else "DISAGREE"
    summary = (f"{sum(rec['compute_ops'].values())} compute ops of {len(rec['compute_ops'])} kinds; the text "
               f"count and the MLIR walk {agree}")
    if markdown:
        ops = [(op, n, rec["ops_walk"].get(op, 0)) for op, n in _by_count(rec["ops"])]
        ops += [(op, 0, rec["ops_walk"][op]) for op in sorted(set(rec["ops_walk"]) - set(rec["ops"]))]
        lines = [f"**{head}**", "", summary, "", *markdown_table(("op", "text", "walk"), ops)]
        if rec["convolutions"]:
            lines += ["", f"{len(rec['convolutions'])} distinct convolutions:", "",
                      *markdown_table(("count", "lhs", "rhs", "result", "window"),
                                      [[c[k] for k in ("count", "lhs", "rhs", "result", "window")]
                                       for c in rec["convolutions"]])]
        return "\n".join(lines)
    lines = [head, summary, ""]
    width = max((len(op) for op in rec["ops"]), default=6)
    lines.append(f"{'op':<{width}}  {'text':>6}  {'walk':>6}")
    for op, n in sorted(rec["ops"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"{op:<{width}}  {n:>6}  {rec['ops_walk'].get(op, 0):>6}")
    for op in sorted(set(rec["ops_walk"]) - set(rec["ops"])):
        lines.append(f"{op:<{width}}  {0:>6}  {rec['ops_walk'][op]:>6}")
    if rec["convolutions"]:
        lines += ["", f"{len(rec['convolutions'])} distinct convolutions:"]
        lines += [f"  ×{c['count']:<3} {c['lhs']} * {c['rhs']} -> {c['result']}  {c['window']}"
                  for c in rec["convolutions"]]
    return "\n".join(lines)


def format_portable(rec: dict[str, Any], markdown: bool = False) -> str:
    """A text report of one Core ATen, TFLite or ONNX record: ops by count, fused activations, convolutions; with
    ``markdown``, the same as GitHub Markdown."""
    head = (f"{rec['model']} ({rec['backend']}) {rec['mode']} {IR_COLUMNS[rec['ir']][0]}, batch {rec['batch_size']}, "
            f"{rec['image_size']}², {rec['precision']}")
    if "skipped" in rec:
        return f"{head}: skipped ({rec['skipped']})"
    if markdown:
        return _portable_markdown(rec, head)
    lines = [head, f"source: {rec['source']}",
             *([f"the Keras model failed at {rec['keras_export_error']}"] if rec.get("keras_export_error") else []),
             f"{sum(rec['compute_ops'].values())} ops of {len(rec['compute_ops'])} kinds "
             f"({rec['capture_seconds']:.1f} s)", ""]
    agree = rec.get("ops_interpreter") or rec.get("ops_runtime")
    width = max((len(op) for op in rec["ops"]), default=6)
    second = "interpreter" if rec.get("ops_interpreter") else "onnxruntime"
    lines.append(f"{'op':<{width}}  {'count':>6}  {'HLO opcode':<14}" + (f"  {second:>11}" if agree else ""))
    for op, n in sorted(rec["ops"].items(), key=lambda kv: (-kv[1], kv[0])):
        mapped = hlo_name(rec["ir"], op) if op in rec["compute_ops"] else "(bookkeeping)"
        lines.append(f"{op:<{width}}  {n:>6}  {mapped if mapped != op else '':<14}"
                     + (f"  {agree.get(op, 0):>11}" if agree else ""))
    if rec.get("fused_activations"):
        lines += ["", "fused activations: " + ", ".join(f"{k} ×{v}" for k, v in rec["fused_activations"].items())]
    if rec.get("ops_interpreter") is not None:
        lines.append(f"the interpreter's op list {'agrees' if rec['interpreter_agrees'] else 'DISAGREES'}")
    if rec.get("ops_runtime") is not None:
        lines.append(f"ONNX Runtime's loaded graph {'agrees' if rec['runtime_agrees'] else 'DISAGREES'} "
                     f"(but for the Constant and Cast nodes its loader folds)")
    if rec["convolutions"]:
        lines += ["", f"{len(rec['convolutions'])} distinct convolutions:"]
        for c in rec["convolutions"]:
            shown = "  ".join(f"{k}={v}" for k, v in c.items() if k != "count")
            lines.append(f"  ×{c['count']:<3} {shown}")
    return "\n".join(lines)


def _portable_markdown(rec: dict[str, Any], head: str) -> str:
    second = ("interpreter", rec["ops_interpreter"]) if rec.get("ops_interpreter") else \
        ("onnxruntime", rec["ops_runtime"]) if rec.get("ops_runtime") else None
    lines = [f"**{head}**", "", f"source: {rec['source']}; {sum(rec['compute_ops'].values())} ops of "
             f"{len(rec['compute_ops'])} kinds ({rec['capture_seconds']:.1f} s)"]
    if rec.get("keras_export_error"):
        lines += ["", f"the Keras model failed at {rec['keras_export_error']}"]
    ops = [(op, n, (hlo_name(rec["ir"], op) if op in rec["compute_ops"] else "(bookkeeping)"),
            *([second[1].get(op, 0)] if second else [])) for op, n in _by_count(rec["ops"])]
    lines += ["", *markdown_table(("op", "count", "HLO opcode", *([second[0]] if second else [])), ops)]
    if rec.get("fused_activations"):
        lines += ["", "fused activations: " + ", ".join(f"{k} ×{v}" for k, v in rec["fused_activations"].items())]
    if rec["convolutions"]:
        keys = [k for k in rec["convolutions"][0] if k != "count"]
        lines += ["", f"{len(rec['convolutions'])} distinct convolutions:", "",
                  *markdown_table(("count", *keys), [[c["count"], *(c.get(k, "") for k in keys)]
                                                     for c in rec["convolutions"]])]
    return "\n".join(lines)


def format_table(row: dict[str, Any], markdown: bool = False) -> str:
    """A text report of one inventory: header, opcode counts by role, fusions, custom calls, conv/dot shapes;
    with ``markdown``, the same as GitHub Markdown."""
    backend = row.get("backend", "tensorflow")
    head = (f"{row['model']}{'' if backend == 'tensorflow' else f' ({backend})'} {row['mode']} {row['stage']} "
            f"optimization ({row['xla_stage']}), platform "
            f"{row['platform']}, batch {row['batch_size']}, {row['image_size']}², {row['precision']}")
    summary = (f"{row['num_instructions']} instructions in {row['num_computations']} computations, "
               f"{len(row['opcodes'])} distinct opcodes")
    if markdown:
        return _table_markdown(row, head, summary)
    lines = [head, summary, ""]
    width = max(len(op) for op in row["opcodes"]) if row["opcodes"] else 6
    lines.append(f"{'opcode':<{width}}  {'total':>6}  " + "  ".join(f"{r:>7}" for r in parser.ROLES))
    for op, n in sorted(row["opcodes"].items(), key=lambda kv: (-kv[1], kv[0])):
        by_role = "  ".join(f"{row['opcodes_by_role'][r].get(op, 0):>7}" for r in parser.ROLES)
        lines.append(f"{op:<{width}}  {n:>6}  {by_role}")
    lines += _kinds(row)
    for key, fields in (("convolutions", parser.CONV_FIELDS), ("dots", parser.DOT_FIELDS)):
        if row[key]:
            lines += ["", f"{len(row[key])} distinct {key}:"]
            for c in row[key]:
                shown = (f"{f}={c[f]}" for f in fields if c[f] not in ("", 1))  # omit empty dims, groups of 1
                lines.append(f"  ×{c['count']:<3} " + "  ".join(shown))
    return "\n".join(lines)


def _kinds(row: dict[str, Any]) -> list[str]:
    """The fusion kinds, custom-call targets and comparisons of an inventory, a line each (the text and the
    Markdown listing share them)."""
    lines = []
    for key, title in (("fusion_kinds", "fusion kinds"), ("custom_call_targets", "custom-call targets"),
                       ("comparisons", "compare (operand type, direction)")):
        if row[key]:
            lines += ["", f"{title}: " + ", ".join(f"{k} ×{v}" for k, v in row[key].items())]
    return lines


def _table_markdown(row: dict[str, Any], head: str, summary: str) -> str:
    lines = [f"**{head}**", "", summary, "",
             *markdown_table(("opcode", "total", *parser.ROLES),
                             [(op, n, *(row["opcodes_by_role"][r].get(op, 0) for r in parser.ROLES))
                              for op, n in _by_count(row["opcodes"])])]
    lines += _kinds(row)
    for key, fields in (("convolutions", parser.CONV_FIELDS), ("dots", parser.DOT_FIELDS)):
        if row[key]:
            lines += ["", f"{len(row[key])} distinct {key}:", "",
                      *markdown_table(("count", *fields), [(c["count"], *(c[f] for f in fields)) for c in row[key]])]
    return "\n".join(lines)


def format_csv(row: dict[str, Any]) -> str:
    """The opcode counts of one record as CSV (configuration columns repeated on each line)."""
    import pandas as pd

    buf = io.StringIO()
    pd.DataFrame(opcode_lines([row]), columns=list(OPCODE_COLUMNS)).to_csv(buf, index=False)
    return buf.getvalue()
