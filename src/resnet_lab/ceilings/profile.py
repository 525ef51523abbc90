"""Where a step's time goes inside oneDNN: ``ONEDNN_VERBOSE=1`` output of the timed steps, parsed.

The worker (:mod:`resnet_lab.bench.measure`) frames each timed step with :data:`STEP_START` /
:data:`STEP_END` lines on stdout; :func:`parse_onednn_verbose` reads the worker's log between them.
"""

from __future__ import annotations

import re
from typing import Any

from resnet_lab.ceilings.conv import ConvProblem

# oneDNN verbose lines of the timed steps sit between these markers (printed by the worker when profiling).
STEP_START, STEP_END = "@@resnet-lab-step-start", "@@resnet-lab-step-end"


_DTYPE = re.compile(r"\b(src|wei|dst|diff_src|diff_wei|diff_dst|data|diff)[:_](f32|bf16|f16|s8|u8|s32|f64)\b")


def parse_onednn_verbose(text: str) -> dict[str, Any]:
    """Where the timed steps' time went, from ONEDNN_VERBOSE=1 output framed by step markers.

    Returns per-step milliseconds by ``kind:propagation`` (convolution:backward_weights, reorder, ...),
    by convolution implementation, the step wall time between markers, the share of it spent inside oneDNN
    primitives (the rest is TensorFlow's own kernels: batch-norm arithmetic, ReLU, adds, the optimizer,
    and framework overhead), and the convolutions' own GFLOP/s (the FLOPs of each convolution's
    :class:`~resnet_lab.ceilings.conv.ConvProblem` over its time, the roofline's count).
    ``primitives`` lists every distinct primitive (kind, propagation, implementation, problem descriptor,
    tensor dtypes) with its calls and milliseconds per step, for the roofline (:mod:`resnet_lab.ceilings.roofline`).
    """
    steps, walls = 0, []
    by_kind: dict[str, float] = {}
    by_impl: dict[str, float] = {}
    prims: dict[tuple[str, ...], list[float]] = {}
    conv_ms = conv_flops = 0.0
    inside, t0 = False, 0.0
    for line in text.splitlines():
        if line.startswith(STEP_START):
            inside, t0, steps = True, float(line.split()[1]), steps + 1
            continue
        if line.startswith(STEP_END):
            inside = False
            walls.append(float(line.split()[1]) - t0)
            continue
        if not (inside and line.startswith("onednn_verbose") and ",exec," in line):
            continue
        f = line.split(",")
        i = f.index("exec")
        try:
            kind, impl, prop, ms = f[i + 2], f[i + 3], f[i + 4], float(f[-1])
        except (IndexError, ValueError):
            continue
        key = "reorder" if kind == "reorder" else f"{kind}:{prop}"
        by_kind[key] = by_kind.get(key, 0.0) + ms
        dtypes = dict(_DTYPE.findall(f[i + 5] if len(f) > i + 5 else ""))
        pkey = (kind, prop, impl, f[-2], dtypes.get("src") or dtypes.get("diff_src") or dtypes.get("data") or "",
                dtypes.get("wei") or dtypes.get("diff_wei") or "", dtypes.get("dst") or dtypes.get("diff_dst") or "")
        acc = prims.setdefault(pkey, [0.0, 0.0])
        acc[0] += 1
        acc[1] += ms
        if kind == "convolution":
            by_impl[f"{prop}:{impl}"] = by_impl.get(f"{prop}:{impl}", 0.0) + ms
            problem = ConvProblem.parse(f[-2])
            if problem:
                conv_ms += ms
                conv_flops += problem.flops
    if not steps or not walls:
        return {"steps": 0}
    wall_ms = 1000.0 * sum(walls) / len(walls)
    per_step = {k: v / steps for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])}
    onednn_ms = sum(per_step.values())
    conv_total = sum(v for k, v in per_step.items() if k.startswith("convolution"))
    return {
        "steps": steps, "step_ms": wall_ms, "onednn_ms": onednn_ms, "other_ms": wall_ms - onednn_ms,
        "onednn_share": onednn_ms / wall_ms if wall_ms else None,
        "conv_share": conv_total / wall_ms if wall_ms else None,
        "conv_gflops": conv_flops / conv_ms / 1e6 if conv_ms else None,
        "ms_per_step": per_step,
        "conv_impl_ms_per_step": {k: v / steps for k, v in sorted(by_impl.items(), key=lambda kv: -kv[1])},
        "primitives": [
            {"kind": k[0], "prop": k[1], "impl": k[2], "desc": k[3], "src_dt": k[4], "wei_dt": k[5], "dst_dt": k[6],
             "calls_per_step": v[0] / steps, "ms_per_step": v[1] / steps}
            for k, v in sorted(prims.items(), key=lambda kv: -kv[1][1])],
    }
