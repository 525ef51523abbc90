"""A per-primitive roofline of one training step: where each oneDNN primitive sits under the machine's two
measured ceilings, and which ones lose the most time against their bound.

Input: the ``primitives`` of :func:`resnet_lab.ceilings.profile.parse_onednn_verbose` (each distinct primitive
of the timed steps: kind, propagation, problem descriptor, tensor dtypes, calls and ms per step) and the peak
document of :mod:`resnet_lab.ceilings.peak` (GEMM GFLOP/s per dtype, triad GB/s). For each primitive, FLOPs and
bytes come from its descriptor (:func:`work`): a convolution moves its source, weights and destination once
and does 2·MACs (:class:`~resnet_lab.ceilings.conv.ConvProblem`, as the profile's conv GFLOP/s counts them); a
reorder moves its tensor in and out and does no arithmetic. Its bound is
``max(FLOPs / peak, bytes / bandwidth)`` (Williams, Waterman & Patterson's roofline), and the time it loses
is its measured time minus that bound. Bytes are the compulsory traffic (each tensor once): a primitive whose
tensors fit in cache can beat the memory roof, which then shows as efficiency above 100 %, and says so.

Notebook 03 draws it for the fused-batch-norm fp32 training step, profiled one op at a time (its profile
configuration says why), and shows the ten primitives that lose the most (:func:`summary`) with the plot
(``roofline.csv``/``.png``); time outside oneDNN (TensorFlow's own kernels) has no primitive and is one
remainder of the step's breakdown. Measured figures: ``outputs/reference/README.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from resnet_lab.ceilings.conv import ConvProblem

DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "s8": 1, "u8": 1, "s32": 4, "f64": 8}
# Precision whose GEMM peak bounds a primitive that computes in these source/weight dtypes.
PEAK_DTYPE = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}

_POOL = re.compile(r"mb(\d+)ic(\d+)_(?:id\d+od\d+kd\d+sd\d+dd\d+pd\d+_)?"
                   r"ih(\d+)oh(\d+)kh(\d+)\S*?_iw(\d+)ow(\d+)kw(\d+)")
_IP = re.compile(r"mb(\d+)ic(\d+)(?:id(\d+))?(?:ih(\d+))?(?:iw(\d+))?oc(\d+)")
_GEMM = re.compile(r"(\d+)x(\d+):(\d+)x(\d+)")
_DIMS = re.compile(r"\d+(?:x\d+)+")
_MBIC = re.compile(r"mb(\d+)ic(\d+)(?:id(\d+))?(?:ih(\d+))?(?:iw(\d+))?")
# Arithmetic per element of the element-wise kinds (forward; backward about twice): rough, and small
# beside their bytes, which is what bounds them.
_FLOPS_PER_ELEMENT = {"eltwise": 1, "binary": 1, "batch_normalization": 5, "layer_normalization": 5,
                      "softmax": 5, "sum": 1, "concat": 0, "shuffle": 0, "resampling": 4, "lrn": 10, "prelu": 1}


# What notebook 03 shows (workbook.display.table); roofline.csv keeps every column and primitive.
VIEW = {
    "primitive": ("primitive", ""), "problem": ("shape", ""), "dtype": ("dtype", ""),
    "calls_per_step": ("calls/step", "int"), "ms_per_step": ("per step", "ms"),
    "intensity": ("FLOP/byte", "×"), "achieved_gflops": ("achieved", "GFLOP/s"), "achieved_gbps": ("GB/s", "×"),
    "bound": ("bound by", ""), "lost_ms_per_step": ("lost", "ms"), "efficiency": ("of roofline", "%"),
}


def problem(p: dict[str, Any]) -> str:
    """A short, readable form of a primitive's shape: ``32×64×56² → 256, 1×1/1`` for a convolution (batch ×
    input channels × input size → output channels, kernel/stride), ``32×2048 · 2048×1000`` for a GEMM;
    oneDNN's descriptor where it is not understood."""
    desc = p.get("desc") or ""
    conv = _conv(p)
    if conv:
        return conv.label
    m = _IP.search(desc) if p["kind"] == "inner_product" else None
    if m:
        return f"{m.group(1)}×{m.group(2)} · {m.group(2)}×{m.group(6)}"
    m = _GEMM.search(desc) if p["kind"] in ("gemm_api", "matmul") else None
    if m:
        return f"{m.group(1)}×{m.group(2)} · {m.group(3)}×{m.group(4)}"
    m = _POOL.search(desc) if p["kind"] == "pooling" else None
    if m:
        mb, ic, ih, _oh, kh, _iw, _ow, kw = m.groups()
        return f"{mb}×{ic}×{ih}², {kh}×{kw}"
    return desc.replace("x", "×")


def _conv(p: dict[str, Any]) -> ConvProblem | None:
    if p["kind"] not in ("convolution", "deconvolution"):
        return None
    return ConvProblem.parse(p.get("desc") or "", transposed=p["kind"] == "deconvolution")


def _size(dt: str, default: str = "f32") -> int:
    return DTYPE_BYTES.get(dt or default, 4)


def work(p: dict[str, Any]) -> tuple[float, float] | None:
    """(FLOPs, bytes) of one call of primitive ``p`` (a ``primitives`` entry), or None where its descriptor
    is not understood."""
    kind, desc, prop = p["kind"], p.get("desc") or "", p.get("prop") or ""
    src, wei, dst = _size(p.get("src_dt")), _size(p.get("wei_dt") or p.get("src_dt")), _size(p.get("dst_dt"))
    if kind in ("convolution", "deconvolution"):
        conv = _conv(p)
        if not conv:
            return None
        return conv.flops, conv.bytes(src, wei, dst)
    if kind == "inner_product":
        m = _IP.search(desc)
        if not m:
            return None
        mb, ic, d, h, w, oc = (int(x) if x else 1 for x in m.groups())
        k = ic * d * h * w
        return 2.0 * mb * k * oc, float(mb * k * src + k * oc * wei + mb * oc * dst)
    if kind in ("gemm_api", "matmul"):
        m = _GEMM.search(desc)
        if not m:
            return None
        rows, k, _, cols = (int(x) for x in m.groups())
        return 2.0 * rows * k * cols, float(rows * k * src + k * cols * wei + rows * cols * dst)
    if kind == "pooling":
        m = _POOL.search(desc)
        if not m:
            return None
        mb, ic, ih, oh, kh, iw, ow, kw = (int(x) for x in m.groups())
        out = mb * ic * oh * ow
        return float(out * kh * kw), float(mb * ic * ih * iw * src + out * dst)
    n = _elements(desc)
    if n is None:
        return None
    if kind == "reorder":
        return 0.0, float(n * (src + dst))
    backward = prop.startswith("backward")
    flops = _FLOPS_PER_ELEMENT.get(kind, 1) * n * (2 if backward else 1)
    tensors = (3 if backward else 2) + (1 if kind == "binary" else 0)  # backward also reads diff_dst
    return float(flops), float(n * tensors * max(src, dst))


def _elements(desc: str) -> int | None:
    m = _MBIC.search(desc)
    if m:
        return math.prod(int(x) for x in m.groups() if x)
    m = _DIMS.search(desc)
    return math.prod(int(x) for x in m.group(0).split("x")) if m else None


def table(primitives: Iterable[dict[str, Any]], peak_doc: dict[str, Any] | None):
    """One row per distinct primitive: calls and ms per step, FLOPs, bytes, arithmetic intensity, achieved
    GFLOP/s and GB/s, the roofline's bound (compute or memory), the time at the bound, and the ms lost
    against it; sorted by ms lost. Empty bound columns where the peak or bandwidth was not measured."""
    import pandas as pd

    peaks = (peak_doc or {}).get("peak_gflops") or {}
    bw = (peak_doc or {}).get("bandwidth_gbps")
    out = []
    for p in primitives:
        w = work(p)
        calls, ms = float(p["calls_per_step"]), float(p["ms_per_step"])
        row = {"primitive": f"{p['kind']}:{p['prop']}" if p["kind"] != "reorder" else "reorder",
               "shape": p.get("desc") or "", "problem": problem(p), "dtype": p.get("src_dt") or "",
               "impl": p.get("impl") or "", "calls_per_step": calls, "ms_per_step": ms}
        if w is not None and ms > 0:
            flops, nbytes = w
            peak = peaks.get(PEAK_DTYPE.get(p.get("wei_dt") or p.get("src_dt") or "f32", "fp32")) or peaks.get("fp32")
            t_compute = flops / (peak * 1e9) if peak else None
            t_memory = nbytes / (bw * 1e9) if bw else None
            bound_s = max(t for t in (t_compute, t_memory, 0.0) if t is not None)
            row.update({
                "gflop_per_call": flops / 1e9, "mb_per_call": nbytes / 1e6,
                "intensity": flops / nbytes if nbytes else None,
                "achieved_gflops": flops * calls / (ms / 1e3) / 1e9,
                "achieved_gbps": nbytes * calls / (ms / 1e3) / 1e9,
                "bound": None if not (t_compute or t_memory) else
                ("compute" if (t_compute or 0) >= (t_memory or 0) else "memory"),
                "attainable_gflops": (min(peak, (flops / nbytes) * bw) if peak and bw and nbytes else peak),
                "bound_ms_per_step": 1e3 * bound_s * calls if bound_s else None,
            })
            if row["bound_ms_per_step"]:
                row["lost_ms_per_step"] = ms - row["bound_ms_per_step"]
                row["efficiency"] = row["bound_ms_per_step"] / ms
        out.append(row)
    columns = ["primitive", "problem", "shape", "dtype", "impl", "calls_per_step", "ms_per_step", "gflop_per_call",
               "mb_per_call", "intensity", "achieved_gflops", "achieved_gbps", "bound", "attainable_gflops",
               "bound_ms_per_step", "lost_ms_per_step", "efficiency"]
    df = pd.DataFrame(out).reindex(columns=columns)
    return df.sort_values("lost_ms_per_step", ascending=False, na_position="last").reset_index(drop=True)


def summary(df, peak_doc: dict[str, Any] | None, step_ms: float | None = None, top: int = 10) -> str:
    """A few sentences: what the step's oneDNN time would be at the roofline, and where the loss sits."""
    if df is None or df.empty:
        return "No oneDNN primitives were profiled: no roofline."
    if not (peak_doc or {}).get("bandwidth_gbps") or not (peak_doc or {}).get("peak_gflops"):
        return ("The roofline needs both ceilings of `00_environment` (GEMM peak and triad bandwidth); "
                "this host's peak file lacks one, so only the achieved rates are shown.")
    known = df[df["bound_ms_per_step"].notna()]
    total, bound = float(df["ms_per_step"].sum()), float(known["bound_ms_per_step"].sum())
    lost = known["lost_ms_per_step"].clip(lower=0)
    head = known.head(top)
    kinds = head.groupby("primitive")["lost_ms_per_step"].sum().sort_values(ascending=False)
    parts = ", ".join(f"{k} {_ms(v)}" for k, v in kinds.items())
    text = (f"oneDNN primitives take {_ms(total)} per step"
            + (f" of a {_ms(step_ms)} step" if step_ms else "")
            + f"; at their roofline bounds they would take {_ms(bound)}, so they lose {_ms(lost.sum())} "
            f"against the machine's ceilings ({100 * bound / total:.0f} % of roofline overall). "
            f"The {len(head)} largest losses: {parts}.")
    above = known[known["efficiency"] > 1.0]
    if (above["bound"] == "memory").any():
        text += (f" ⚠ {int((above['bound'] == 'memory').sum())} primitive(s) run faster than their memory bound: "
                 "their tensors stay in cache, so compulsory traffic to memory overstates their bytes.")
    if (above["bound"] == "compute").any():
        text += (f" ⚠ {int((above['bound'] == 'compute').sum())} primitive(s) run faster than the GEMM peak, which "
                 "is physically impossible: the peak is too low")
        loaded = (peak_doc or {}).get("loaded")
        text += (f" (it was measured on a busy host: {'; '.join(loaded)}), so every bound and share here is "
                 "overstated; re-measure the peak on a quiet machine." if loaded else
                 " (GEMMs of the sizes measured do not saturate this machine); measure larger sizes.")
    return text


def _ms(v: float) -> str:
    return f"{v:.0f} ms" if abs(v) >= 10 else f"{v:.1f} ms"


def plot(df, peak_doc: dict[str, Any] | None, ax=None, title: str = "Roofline of a training step"):
    """Achieved GFLOP/s against arithmetic intensity (log-log), one marker per primitive sized by its ms per
    step, under the compute roofs (fp32, bf16 where measured) and the triad bandwidth slope."""
    import matplotlib.pyplot as plt
    import numpy as np

    from resnet_lab.core import style

    style.apply()
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.6))
    peaks = (peak_doc or {}).get("peak_gflops") or {}
    bw = (peak_doc or {}).get("bandwidth_gbps")
    pts = df[(df["intensity"].fillna(0) > 0) & (df["achieved_gflops"].fillna(0) > 0)]
    lo = max(1e-2, float(pts["intensity"].min()) / 2) if len(pts) else 1e-2
    hi = max(1e3, float(pts["intensity"].max()) * 2) if len(pts) else 1e3
    xs = np.logspace(math.log10(lo), math.log10(hi), 200)
    for dtype, ls in (("fp32", "-"), ("bf16", "--")):
        if peaks.get(dtype):
            roof = np.minimum(peaks[dtype], xs * bw) if bw else np.full_like(xs, peaks[dtype])
            ax.plot(xs, roof, ls, color="black", lw=1.2, label=f"{dtype} roof {peaks[dtype]:,.0f} GFLOP/s"
                    + (f", {bw:.1f} GB/s" if bw and dtype == "fp32" else ""))
    for i, (kind, part) in enumerate(pts.groupby("primitive")):
        size = 12 + 300 * part["ms_per_step"] / df["ms_per_step"].max()
        ax.scatter(part["intensity"], part["achieved_gflops"], s=size,
                   alpha=0.6, color=plt.cm.tab10(i % 10), label=kind, edgecolor="white", linewidth=0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, compulsory traffic)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"{title}: one marker per oneDNN primitive (size: ms per step)")
    ax.legend(fontsize=7, loc="lower right")
    return ax
