"""Notebook 00's view: the machine as tables, the measured peak as sentences and bars."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from resnet_lab.core import provenance
from resnet_lab.report import environment

# a peak document as ceilings.peak.measure writes it (two libraries for fp32, bf16 through TensorFlow, a triad)
DOC = {
    "peak_gflops": {"fp32": 100.0, "bf16": 250.0},
    "peak_source": {"fp32": "tensorflow n=128", "bf16": "tensorflow n=128"},
    "measurements": [{"library": lib, "dtype": dtype, "n": n, "best_gflops": g}
                     for lib, dtype, n, g in [("numpy", "fp32", 64, 40.0), ("numpy", "fp32", 128, 80.0),
                                              ("tensorflow", "fp32", 64, 50.0), ("tensorflow", "fp32", 128, 100.0),
                                              ("tensorflow", "bf16", 64, 120.0), ("tensorflow", "bf16", 128, 250.0)]],
    "bandwidth_gbps": 20.0, "bandwidth": {"array_mib": 16, "threads": 2, "repeats": 3},
}


def test_the_machine_as_tables():
    info = provenance.collect()
    machine = environment.machine_frame(info)
    assert machine.loc["CPU", "value"] == info["cpu"]["model"] and list(machine.columns) == ["value"]
    assert list(environment.isa_frame(info).index) == ["present"]
    versions = environment.versions_frame(info)
    assert list(versions.index) == ["version"] and versions.loc["version", "resnet-lab"]


def test_the_limit_as_sentences_and_bars():
    assert environment.summary_lines(DOC) == [
        "fp32: peak 100 GFLOP/s (tensorflow n=128); numpy 80, tensorflow 100",
        "bf16: peak 250 GFLOP/s (tensorflow n=128); 2.5× fp32",
        "memory bandwidth: 20.0 GB/s (STREAM-like triad, 16 MiB arrays, 2 threads, best of 3); "
        "the fp32 roofline's ridge at 5 FLOP/byte",
    ]
    fig = environment.plot_gemm(DOC, {"model": "a CPU", "available_cpus": 2})
    ax = fig.axes[0]
    assert ax.get_title() == "GEMM throughput on a CPU (2 CPUs)" and len(ax.containers) == 2  # one per size
