"""What a host *is* and what it *measures*: the facts that tell two machines apart when their CPU name does not.

A VM may show every EPYC generation as "AMD EPYC": the name and the CPU count cannot tell a Zen 4 host from a Zen 5
one whose GEMM peak is 2.3× higher. What does tell them apart:

- **what it is** (:func:`cpu_identity`): the CPU vendor, family, model and stepping (``/proc/cpuinfo``), the ISA
  flags that change which kernels run (AVX-512, VNNI, bf16, AMX), the L2 and L3 sizes (sysfs), the CPUs this process
  may use; the GPUs come from ``nvidia-smi`` (:func:`resnet_lab.core.provenance.gpu_info`).
- **what it measures**: notebook 00's GEMM peak per dtype (not the triad bandwidth: it moves too much between
  processes on one host to tell two apart, see :data:`PEAK_TOLERANCE`).

:func:`differences` compares two such descriptions: every identity fact that differs, and every measured peak
whose ratio lies outside :data:`PEAK_TOLERANCE`, each as a short phrase ("GEMM fp32 peak 215 vs 508 GFLOP/s",
"CPU family 25 vs 26", the baseline's first). No difference: one host kind. A fact missing on either side (an
older record) is not a difference: the caller says which rule it fell back to.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# The ISA flags that decide which kernels oneDNN, XLA and Inductor pick (and so the speed) on x86.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")

# Two measured peaks of one host kind differ by less than this ratio. Measured: five fresh `resnet-lab peak`
# processes on one quiet 2-core AMD EPYC VM (family 25 model 17, 2026-12-05; TensorFlow GEMMs n=2048/4096) gave
# fp32 222.5-223.4 GFLOP/s (max/min 1.004) and bf16 401.0-419.3 (1.046); the committed record of that host kind,
# measured a day earlier, 220.4 and 405.1 (1.014 and 1.046 from them). A change of CPU generation moves the peak by
# 1.5-2.5x (Zen 4 -> Zen 5: 2.3x; the Xeon's fp32 is 1.49x the Zen 4's). 1.25 is five times the widest spread seen
# on one host and below the smallest change of machine. The triad bandwidth is not used: it moved 34.0-38.9 GB/s
# between those five processes and 30.8 the day before (1.26x).
PEAK_TOLERANCE = 1.25

# identity facts compared, and how each is named in a difference
IDENTITY_NAMES = {"vendor": "CPU vendor", "family": "CPU family", "model_number": "CPU model number",
                  "stepping": "CPU stepping", "l2_kib": "L2 (KiB)", "l3_kib": "L3 (KiB)",
                  "available_cpus": "CPUs available", "isa": "ISA flags", "gpus": "GPUs"}


def _cpuinfo_first(text: str) -> dict[str, str]:
    """The fields of the first processor block of ``/proc/cpuinfo``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out


def _size_kib(text: str) -> int | None:
    """``32768K`` / ``1M`` (sysfs cache sizes) in KiB."""
    text = text.strip().upper()
    try:
        if text.endswith("K"):
            return int(text[:-1])
        if text.endswith("M"):
            return int(text[:-1]) * 1024
        return int(text) // 1024
    except ValueError:
        return None


def cache_sizes(cpu_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> dict[str, int | None]:
    """The L2 and L3 (unified or data) cache sizes of CPU 0 in KiB, from sysfs; None where sysfs does not say."""
    sizes: dict[str, int | None] = {"l2_kib": None, "l3_kib": None}
    for index in sorted(cpu_dir.glob("index*")) if cpu_dir.is_dir() else []:
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _size_kib((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if level in (2, 3) and kind in ("Unified", "Data"):
            sizes[f"l{level}_kib"] = size
    return sizes


def cpu_identity(cpuinfo: str | None = None, cache_dir: Path | None = None,
                 available_cpus: int | None = None) -> dict[str, Any]:
    """What this CPU is: vendor, family, model number, stepping, the speed-deciding ISA flags, L2/L3 sizes, the
    CPUs this process may use. Values are None where the system does not say (not Linux, no sysfs)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    first = _cpuinfo_first(cpuinfo)
    flags = set(first.get("flags", "").split())

    def _int(key: str) -> int | None:
        try:
            return int(first[key])
        except (KeyError, ValueError):
            return None

    if available_cpus is None and hasattr(os, "sched_getaffinity"):
        available_cpus = len(os.sched_getaffinity(0))
    return {"vendor": first.get("vendor_id"), "family": _int("cpu family"), "model_number": _int("model"),
            "stepping": _int("stepping"), "isa": sorted(f for f in ISA_FLAGS if f in flags) if flags else None,
            **cache_sizes(cache_dir or Path("/sys/devices/system/cpu/cpu0/cache")),
            "available_cpus": available_cpus}


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "+".join(map(str, value)) or "none"
    return str(value)


def differences(base: dict[str, Any], cand: dict[str, Any], base_peaks: dict[str, float] | None = None,
                cand_peaks: dict[str, float] | None = None, tolerance: float = PEAK_TOLERANCE) -> list[str]:
    """What tells the baseline's host from the candidate's, each as a phrase with the baseline's value first: each
    identity fact both state and that differs, then each GEMM peak (per dtype, GFLOP/s) both measured whose ratio
    exceeds ``tolerance``. Empty: one host kind, as far as the facts both sides have can tell."""
    out = []
    for key, name in IDENTITY_NAMES.items():
        va, vb = base.get(key), cand.get(key)
        if va is None or vb is None or va == vb:
            continue
        if key == "isa":
            only_a, only_b = sorted(set(va) - set(vb)), sorted(set(vb) - set(va))
            out.append("ISA flags differ: " + "; ".join(
                part for part in (f"only the baseline has {'+'.join(only_a)}" if only_a else "",
                                  f"only the candidate has {'+'.join(only_b)}" if only_b else "") if part))
        else:
            out.append(f"{name} {_show(va)} vs {_show(vb)}")
    for dtype in sorted(set(base_peaks or {}) & set(cand_peaks or {})):
        pa, pb = float(base_peaks[dtype]), float(cand_peaks[dtype])
        if pa > 0 and pb > 0 and max(pa, pb) / min(pa, pb) > tolerance:
            out.append(f"GEMM {dtype} peak {pa:.0f} vs {pb:.0f} GFLOP/s")
    return out
