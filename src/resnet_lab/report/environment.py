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
    })


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
    for dtype, value in peaks.items():
        line = f"{dtype}: peak {value:,.0f} GFLOP/s ({doc['peak_source'][dtype]})"
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
