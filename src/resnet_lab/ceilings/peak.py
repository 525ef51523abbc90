"""The machine's measured limit: peak FLOP/s of large square GEMMs, per dtype.

MFU in the benchmarks is measured model FLOP/s divided by this peak. It is *measured*, not a data-sheet
number, because what a 2-core slice of a shared server delivers is what our benchmarks compete with.
fp32 is measured through NumPy's BLAS and TensorFlow and the better one is the limit; bf16 and fp16 through
TensorFlow (oneDNN; AMX on CPUs that have it).

Peak files are JSON (see :func:`measure`); the GEMMs are timed by :mod:`resnet_lab.ceilings.gemm`;
:func:`load_peak` finds the one that applies to this host.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from resnet_lab.ceilings import gemm, membw
from resnet_lab.core import artifacts, host, hostload, provenance
from resnet_lab.core.choices import PRECISIONS, check_choices, check_int
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path

DTYPES = PRECISIONS
LIBRARIES = ("numpy", "tensorflow")  # the peak of the TensorFlow process: its BLAS and oneDNN
PEAK_FILE = "peak.json"


def validate(dtypes: Iterable[str], libraries: Iterable[str], sizes: Iterable[int], repeats: int,
             triad_mib: int = 256) -> None:
    """The peak measurement's options, checked before anything is timed (one line, UsageError)."""
    if triad_mib != 0:
        check_int("triad MiB (0 skips the bandwidth)", triad_mib, 8)
    check_choices("dtype", dtypes, DTYPES)
    check_choices("library", libraries, LIBRARIES)
    sizes = list(sizes)
    if not sizes:
        raise UsageError("GEMM sizes: give at least one size")
    for n in sizes:
        check_int("GEMM size", n, 16)
    check_int("repeats", repeats, 1)


def measure(
    sizes: Iterable[int] = (1024, 2048, 4096),
    dtypes: Iterable[str] = DTYPES,
    libraries: Iterable[str] = LIBRARIES,
    repeats: int = 5,
    max_seconds: float = 2.0,
    progress: bool = False,
    triad_mib: int = 256,
) -> dict[str, Any]:
    """Measure GEMM throughput for each supported (library, dtype) over ascending sizes, and the memory
    bandwidth (:func:`resnet_lab.ceilings.membw.triad` over arrays of ``triad_mib`` MiB; 0 skips it).

    A size whose single GEMM took longer than ``max_seconds`` ends that (library, dtype): the larger
    sizes would cost minutes without changing the peak. Returns the peak document (see module doc):
    ``peak_gflops`` per dtype and ``bandwidth_gbps``, the two ceilings of the roofline.
    """
    dtypes, libraries, sizes = list(dtypes), list(libraries), sorted(int(n) for n in sizes)
    validate(dtypes, libraries, sizes, repeats)
    load_before = _loadavg()
    window = hostload.Window.start()  # what the CPUs do while the GEMMs run: ours and everybody else's
    pairs = [(lib, d) for d in dtypes for lib in libraries if (lib, d) in gemm.SUPPORTED]
    rows: list[dict[str, Any]] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pairs) * len(sizes), desc="GEMM peak", unit="gemm")
    for lib, d in pairs:
        for n in sizes:
            row = gemm.time_gemm(lib, d, n, repeats)
            rows.append(row)
            if bar:
                bar.update(1)
            if row["best_s"] > max_seconds:
                if bar:
                    bar.update(len(sizes) - sizes.index(n) - 1)
                break
    gemm_window = window.stop()
    if bar:
        bar.close()
    peak: dict[str, float] = {}
    source: dict[str, str] = {}
    for row in rows:
        if row["best_gflops"] > peak.get(row["dtype"], 0.0):
            peak[row["dtype"]] = row["best_gflops"]
            source[row["dtype"]] = f"{row['library']} n={row['n']}"
    doc = {
        "schema": 1,
        "measured_at": provenance.now_iso(),
        "host": socket.gethostname(),
        "cpu": provenance.cpu_info(),
        "onednn": provenance.onednn_state(),
        "capabilities": host.capabilities().to_dict(),
        "packages": provenance.package_versions(),
        "env": provenance.threading_env(),
        "method": "best of `repeats` timed n×n×n GEMMs after one warm-up; GFLOP/s = 2n³ / seconds / 1e9",
        "measurements": rows,
        "peak_gflops": peak,
        "peak_source": source,
        # the load average is kept for the record; whether the host was busy is judged from the window
        "load": {"before_1m": load_before, "after_1m": _loadavg(),
                 "available_cpus": provenance.cpu_info().get("available_cpus"), "gemm_window": gemm_window},
    }
    if triad_mib:  # after the GEMMs: the same quiet (or busy) host, the arrays freed again afterwards
        doc["bandwidth"] = membw.triad(int(triad_mib) * 2**20, repeats=max(3, repeats))
        doc["bandwidth_gbps"] = doc["bandwidth"]["best_gbps"]
    doc["loaded"] = loaded_reasons(doc)
    return doc


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


# Peak files written before the GEMMs' window was recorded: the 1-minute load average per available CPU
# when they started, above which the host is taken to have been busy (all such a file can tell).
LOADED_FRACTION = 0.5
SPREAD = 0.10  # best and median repeat of the peak's GEMM more than this apart: the machine was not steady


def loaded_reasons(doc: dict[str, Any]) -> list[str]:
    """Why this peak document may not be the machine's limit: other processes took a large share of the CPUs
    while the GEMMs ran (:mod:`resnet_lab.core.hostload`; a file without that record: the load average when
    they started), or the repeats of the GEMM that set a dtype's peak disagree. Empty: a quiet measurement.

    The load average alone is not the judge where the window was recorded: it still carries whatever ran in
    the minute before (``make report``'s install), while the window says what the CPUs did during the GEMMs."""
    reasons = []
    load = doc.get("load") or {}
    window = load.get("gemm_window") or {}
    if window.get("others_pct") is not None:
        if hostload.is_busy(window["others_pct"]):
            reasons.append(f"other processes used {window['others_pct']:g} % of the host's CPU time during the "
                           f"GEMMs (whole host {window['host_busy_pct']:g} %, this process {window['own_pct']:g} %)")
    else:
        before, cpus = load.get("before_1m"), load.get("available_cpus")
        if before is not None and cpus and before > LOADED_FRACTION * cpus:
            reasons.append(f"load average {before:g} on {cpus} CPUs when the GEMMs started")
    for dtype, src in (doc.get("peak_source") or {}).items():
        rows = [r for r in doc.get("measurements", []) if r["dtype"] == dtype
                and f"{r['library']} n={r['n']}" == src]
        for r in rows:
            spread = 1 - r["median_gflops"] / r["best_gflops"] if r.get("median_gflops") else 0.0
            if spread > SPREAD:
                reasons.append(f"{dtype} repeats spread {100 * spread:.0f} % (best {r['best_gflops']:.0f}, "
                               f"median {r['median_gflops']:.0f} GFLOP/s)")
    return reasons


def candidate_paths(run_dir: str | None = None) -> list[Path]:
    """Where a peak file may be, most specific first: this run, then every earlier run (newest first)."""
    paths: list[Path] = []
    run_dir = run_dir or os.environ.get("RESNET_LAB_RUN_DIR")
    if run_dir:
        paths.append(Path(run_dir) / "00_environment" / PEAK_FILE)
    root = artifacts.outputs_root()
    found = list(root.glob(f"runs/*/00_environment/{PEAK_FILE}")) + list(root.glob(f"adhoc/*/{PEAK_FILE}"))
    found += list(root.glob(f"peak/*{PEAK_FILE}"))
    paths += sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)
    return paths


def load_peak(path: str | os.PathLike | None = None, host: str | None = None) -> dict[str, Any] | None:
    """The peak document for this host: ``path`` if given, else ``$RESNET_LAB_PEAK``, else the newest
    one measured on this host (see :func:`candidate_paths`). None when nothing was ever measured here."""
    explicit = path or os.environ.get("RESNET_LAB_PEAK")
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise UsageError(f"peak file {p} does not exist; measure one with `resnet-lab peak --out {p}`")
        return artifacts.read_json(p)
    host = host or socket.gethostname()
    paths = candidate_paths()
    this_run = Path(os.environ["RESNET_LAB_RUN_DIR"]) if os.environ.get("RESNET_LAB_RUN_DIR") else None
    fallback = None
    for p in paths:
        try:
            doc = artifacts.read_json(p)
        except (OSError, ValueError):
            continue
        if doc.get("host") != host or not doc.get("peak_gflops"):
            continue
        # A smoke run's tiny GEMMs understate the peak; only this run's own file may be one of those.
        if not is_full_measurement(doc) and (this_run is None or this_run not in p.parents):
            continue
        doc["_path"] = str(p)
        doc["loaded"] = loaded_reasons(doc)
        if not doc["loaded"]:
            return doc
        fallback = fallback or doc  # measured on a busy host: the limit only while no quiet one exists
    return fallback


FULL_N = 2048  # GEMMs smaller than this do not saturate even 2 AVX-512 cores


def is_full_measurement(doc: dict[str, Any]) -> bool:
    """Did this peak document time GEMMs large enough (n >= FULL_N) to stand as the machine's limit?"""
    return max((row.get("n", 0) for row in doc.get("measurements", [])), default=0) >= FULL_N


def peak_gflops(dtype: str, peak: dict[str, Any] | None) -> float | None:
    """Measured peak GFLOP/s for ``dtype`` ('fp32', 'bf16', 'fp16'), or None if not measured."""
    if not peak:
        return None
    value = peak.get("peak_gflops", {}).get(dtype)
    return float(value) if value else None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096], help="square GEMM sizes")
    p.add_argument("--dtypes", nargs="+", default=list(DTYPES), help=f"any of {', '.join(DTYPES)}")
    p.add_argument("--libraries", nargs="+", default=list(LIBRARIES), help=f"any of {', '.join(LIBRARIES)}")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--triad-mib", type=int, default=256,
                   help="MiB per array of the memory-bandwidth triad (0 skips it; default 256)")
    p.add_argument("--out", default=None,
                   help="peak JSON to write (default: outputs/peak/<timestamp>-peak.json); never overwritten")


def run(args: argparse.Namespace) -> int:
    check_path("--out", args.out, "out-file")
    validate(args.dtypes, args.libraries, args.sizes, args.repeats, args.triad_mib)
    if args.out:
        out = Path(args.out)
    else:
        out = artifacts.outputs_root() / "peak" / f"{time.strftime('%Y%m%d-%H%M%S')}-{PEAK_FILE}"
    if out.exists():
        raise UsageError(f"{out} exists; peak files are never overwritten: choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = measure(args.sizes, args.dtypes, args.libraries, args.repeats, progress=True, triad_mib=args.triad_mib)
    artifacts.write_json(out, doc)
    for dtype, value in doc["peak_gflops"].items():
        print(f"{dtype}: {value:8.1f} GFLOP/s  ({doc['peak_source'][dtype]})")
    if doc.get("bandwidth_gbps"):
        print(f"memory: {doc['bandwidth_gbps']:8.1f} GB/s  (triad)")
    print(f"wrote {out}")
    return 0


def describe(doc: dict[str, Any] | None) -> str:
    """The peak notebook 03 divides by, as a sentence (or why MFU will be empty)."""
    if not doc:
        return "No GEMM peak has been measured on this host: the MFU columns stay empty (run 00_environment first)."
    peaks = ", ".join(f"{k} {v:,.0f} GFLOP/s" for k, v in (doc.get("peak_gflops") or {}).items())
    loaded = doc.get("loaded") or []
    return (f"MFU divides by the GEMM peak measured on this host: {peaks}"
            + (f" (measured while the host was busy: {'; '.join(loaded)}; MFU is overstated)." if loaded else "."))
