"""Notebook 00's view: the machine as tables, the GEMM measurements as a table and bars, the limit MFU divides by
as sentences.

What is collected (:mod:`resnet_lab.core.provenance`) and measured (:mod:`resnet_lab.ceilings.peak`) stays there.
"""

from __future__ import annotations

from typing import Any

# What 00_environment shows of each GEMM measurement (workbook.display.table); gemm.csv keeps every column.
GEMM_VIEW = {"library": ("library", ""), "dtype": ("dtype", ""), "n": ("n", "int"), "repeats": ("repeats", "int"),
             "best_s": ("best", "s"), "median_s": ("median", "s"), "best_gflops": ("best", "GFLOP/s"),
             "median_gflops": ("median", "GFLOP/s")}


def value_frame(values: dict[str, Any], name: str = "value") -> Any:
    """A mapping as a one-column table (one row per key)."""
    import pandas as pd

    return pd.Series(values, name=name).to_frame()


def machine_frame(info: dict[str, Any]) -> Any:
    """The machine of :func:`resnet_lab.core.provenance.collect`'s answer as a one-column table: host, CPU, CPUs,
    cores, GPUs, Python, commit, the oneDNN switch."""
    cpu, git = info["cpu"], info["git"]
    return value_frame({
        "host": info["host"],
        "CPU": cpu["model"],
        "logical CPUs (available)": f"{cpu['logical_cpus']} ({cpu['available_cpus']})",
        "physical cores": cpu["physical_cores"],
        "GPUs": ", ".join(g["name"] for g in info["gpus"]) or "none visible",
        "python": info["python"],
        "commit": f"{(git['commit'] or '?')[:10]}{' (dirty)' if git['dirty'] else ''}",
        "TF_ENABLE_ONEDNN_OPTS": info["onednn"]["TF_ENABLE_ONEDNN_OPTS"] or "unset (default)",
        "oneDNN at TensorFlow's import": onednn_words(info["onednn"]),
        "precisions": precision_words(info.get("capabilities")),
    })


def onednn_words(state: dict[str, Any]) -> str:
    """``on (why)`` / ``off (why)`` of :func:`resnet_lab.core.provenance.onednn_state`."""
    return f"{'on' if state.get('enabled') else 'off'} ({state.get('why') or 'TF_ENABLE_ONEDNN_OPTS'})"


def precision_words(caps: dict[str, Any] | None) -> str:
    """Which precisions the CPU computes natively and which it would emulate (the capability table's words)."""
    if not caps:
        return "not recorded"
    native = [f"{p} ({caps['native_via'][p]})" for p, ok in caps["native"].items() if ok]
    emulated = [p for p, ok in caps["native"].items() if not ok]
    masked = f"; planned with {', '.join(caps['masked'])} masked" if caps.get("masked") else ""
    return (f"native {', '.join(native)}; emulated {', '.join(emulated) or 'none'} (rows at an emulated precision "
            f"are skipped, not timed){masked}")


def onednn_check(state: dict[str, Any], active: bool | None) -> str:
    """One line comparing the recorded oneDNN state (decided before TensorFlow starts) with TensorFlow's own
    ``IsMklEnabled`` in this process: they must agree, or every record of this host says the wrong thing."""
    said = "on" if state.get("enabled") else "off"
    if active is None:
        return f"oneDNN {said} as recorded ({state.get('why')}); TensorFlow could not say (no IsMklEnabled)"
    if bool(active) == bool(state.get("enabled")):
        return f"oneDNN {said}: the record ({state.get('why')}) and TensorFlow's IsMklEnabled agree"
    return (f"**oneDNN: the record says {said} ({state.get('why')}) but TensorFlow's IsMklEnabled says "
            f"{'on' if active else 'off'}** — the capability table's rule (core.host.onednn_default) is out of date")


def isa_frame(info: dict[str, Any]) -> Any:
    """The CPU's ISA flags of :data:`resnet_lab.core.provenance.ISA_FLAGS` as one row (present or not)."""
    return value_frame(info["cpu"]["isa"], "present").T


def versions_frame(info: dict[str, Any]) -> Any:
    """The installed packages of :data:`resnet_lab.core.provenance.PACKAGES` as one row of versions (missing ones
    left out)."""
    return value_frame({k: v for k, v in info["packages"].items() if v}, "version").T


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """One sentence per dtype, written from the measured peak document (used by 00_environment)."""
    lines = []
    peaks = doc.get("peak_gflops", {})
    fp32 = peaks.get("fp32")
    by_lib: dict[tuple[str, str], float] = {}
    for row in doc.get("measurements", []):
        key = (row["library"], row["dtype"])
        by_lib[key] = max(by_lib.get(key, 0.0), row["best_gflops"])
    native = (doc.get("capabilities") or {}).get("native") or {}
    for dtype, value in peaks.items():
        line = f"{dtype}: peak {value:,.0f} GFLOP/s ({doc['peak_source'][dtype]})"
        if native.get(dtype) is False:
            line += (f" — EMULATED: this CPU has no {dtype} instructions, so this is the cost of emulation, not a "
                     f"ceiling; no {dtype} row is timed here")
        libs = {lib: v for (lib, d), v in by_lib.items() if d == dtype}
        if len(libs) > 1:
            line += "; " + ", ".join(f"{lib} {v:,.0f}" for lib, v in sorted(libs.items()))
        if fp32 and dtype != "fp32":
            line += f"; {value / fp32:.1f}× fp32"
        lines.append(line)
    if doc.get("bandwidth_gbps"):
        bw = doc["bandwidth"]
        line = (f"memory bandwidth: {doc['bandwidth_gbps']:,.1f} GB/s (STREAM-like triad, {bw['array_mib']:.0f} MiB "
                f"arrays, {bw['threads']} threads, best of {bw['repeats']})")
        if fp32:
            line += f"; the fp32 roofline's ridge at {fp32 / doc['bandwidth_gbps']:.0f} FLOP/byte"
        lines.append(line)
    return lines


def plot_gemm(doc: dict[str, Any], cpu: dict[str, Any]) -> Any:
    """Bars of the best GFLOP/s of each (dtype, library) at each size of a peak document; returns the figure."""
    import pandas as pd

    measurements = pd.DataFrame(doc["measurements"])
    pivot = measurements.pivot_table(index=["dtype", "library"], columns="n", values="best_gflops")
    ax = pivot.plot.barh(figsize=(8, 3.5), width=0.8)
    ax.set_xlabel("GFLOP/s (best of repeats)")
    ax.set_title(f"GEMM throughput on {cpu['model']} ({cpu['available_cpus']} CPUs)")
    return ax.figure
