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
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
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


# ------------------------------------------------------------------------------------------ capabilities
# What a host computes natively, per precision, and whether TensorFlow turns oneDNN on by default there: decided
# from the CPU's flags before anything starts (a row the host would emulate is never timed as a result).
#
# x86 (``flags`` of /proc/cpuinfo):
# - bf16: AVX512_BF16 (Cooper Lake, Zen 4 and later) or AMX-BF16 (Sapphire Rapids); AVX-NE-CONVERT too, the bf16/fp16
#   conversions of oneDNN's ``avx2_vnni_2`` ISA (Sierra Forest, Arrow Lake: its "CPU dispatcher control" guide lists
#   it as AVX2 with bf16 and f16 support).
# - fp16: AVX512_FP16 (Sapphire Rapids) or AMX-FP16 (Granite Rapids), or AVX-NE-CONVERT as above. F16C alone only
#   converts: every product would be an fp32 one, so fp16 is emulated there (Zen 4 has F16C and no AVX512_FP16).
# - int8: AVX512_VNNI, AVX_VNNI or AMX-INT8 (the dot-product instructions oneDNN's int8 kernels need).
# aarch64 (``Features`` of /proc/cpuinfo): bf16 with ``bf16`` (FEAT_BF16) or ``svebf16``; fp16 with ``fphp`` and
# ``asimdhp``; int8 with ``asimddp`` (SDOT) or ``i8mm``.
NATIVE_FLAGS = {
    "x86_64": {"fp32": (), "bf16": ("avx512_bf16", "amx_bf16", "avx_ne_convert"),
               "fp16": ("avx512_fp16", "amx_fp16", "avx_ne_convert"),
               "int8": ("avx512_vnni", "avx_vnni", "amx_int8")},
    "aarch64": {"fp32": (), "bf16": ("bf16", "svebf16"), "fp16": ("fphp", "asimdhp"), "int8": ("asimddp", "i8mm")},
}
# aarch64 names fp16 by two flags that must both be there (scalar and vector half precision); the others: any one.
ALL_OF = {("aarch64", "fp16")}
# TensorFlow's DefaultOneDnnPolicy (tensorflow/core/util/util.cc, TF 2.9 and later) on Linux: oneDNN on by default
# where the CPU has one of these (TestCPUFeature), or is an Arm Neoverse V1 (TestAarch64CPU: implementer 0x41,
# part 0xd40). Everywhere else off, unless TF_ENABLE_ONEDNN_OPTS says otherwise.
ONEDNN_DEFAULT_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
NEOVERSE_V1 = ("0x41", "0xd40")  # (CPU implementer, CPU part) in /proc/cpuinfo
# The flags to treat as absent (comma- or space-separated; a trailing * masks every flag with that prefix), so that
# one host can plan as another: RESNET_LAB_MASK_ISA="avx512*,amx*,avx_vnni,avx_ne_convert" plans as an AVX2-only
# CPU. It changes what the workbook plans, never what a framework does: TensorFlow reads CPUID, not this.
MASK_ENV = "RESNET_LAB_MASK_ISA"
AVX2_ONLY_MASK = "avx512*,amx*,avx_vnni,avx_ne_convert"  # plans as an AVX2-only CPU (Zen 3: family 25 model 1)
MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def cpu_flags(cpuinfo: str) -> set[str]:
    """The flags of the first processor block: x86's ``flags``, aarch64's ``Features``."""
    first = _cpuinfo_first(cpuinfo)
    return set((first.get("flags") or first.get("Features") or "").split())


def parse_mask(text: str | None) -> tuple[str, ...]:
    """The entries of a mask (:data:`MASK_ENV`), lower-cased, in order, each once."""
    return tuple(dict.fromkeys(t.strip().lower() for t in (text or "").replace(",", " ").split() if t.strip()))


def _masked(flags: set[str], mask: tuple[str, ...]) -> set[str]:
    """The flags of ``flags`` that ``mask`` removes."""
    return {f for f in flags for m in mask if f == m or (m.endswith("*") and f.startswith(m[:-1]))}


def _env_bool(raw: str | None) -> bool | None:
    """TensorFlow's ReadBoolFromEnvVar: "1"/"true" on, "0"/"false" off (any case); anything else (or unset) is
    not read, and the default stands (TensorFlow logs a warning)."""
    value = (raw or "").strip().lower()
    return True if value in ("1", "true") else False if value in ("0", "false") else None


@dataclass(frozen=True)
class Capabilities:
    """What this host computes natively and how TensorFlow sets oneDNN up on it (:func:`capabilities`)."""

    machine: str                      # x86_64 | aarch64 | what platform.machine() said
    flags: frozenset[str]             # the CPU's flags as planned with (the mask removed)
    masked: tuple[str, ...]           # the flags the mask removed (none: the real host)
    native: dict[str, str | None]     # precision -> the flag that makes it native, or None (emulated)
    onednn_default: bool              # TensorFlow's oneDNN default here (before TF_ENABLE_ONEDNN_OPTS)
    onednn_default_why: str           # which rule decided it

    def is_native(self, precision: str) -> bool:
        """Whether ``precision`` ("fp32", "bf16", "fp16", "int8"; "tf32" is a GPU's) runs in its own instructions."""
        return precision == "fp32" or bool(self.native.get(precision))

    def emulation_reason(self, precision: str) -> str | None:
        """None where ``precision`` is native; else one line saying why a row at it would time emulation."""
        if self.is_native(precision):
            return None
        wanted = NATIVE_FLAGS.get(self.machine, {}).get(precision, ())
        need = (" and " if (self.machine, precision) in ALL_OF else " or ").join(wanted) or "no known instructions"
        took = [f for f in self.masked if f in wanted]  # the mask named where it took the precision away, not
        masked = f" (masked: {', '.join(took)})" if took else ""  # on a CPU that lacked it anyway
        return (f"this CPU has no {precision} instructions (it would need {need}){masked}: a {precision} row would "
                f"time emulation, not the hardware")

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "masked": list(self.masked),
                "native": {p: bool(self.is_native(p)) for p in self.native},
                "native_via": dict(self.native), "onednn_default": self.onednn_default,
                "onednn_default_why": self.onednn_default_why}

    def describe(self) -> str:
        """One line: the precisions native here, those emulated, oneDNN's default and why."""
        native = [p for p in self.native if self.is_native(p)]
        emulated = [p for p in self.native if not self.is_native(p)]
        masked = f"; planned with {len(self.masked)} flags masked ({MASK_ENV})" if self.masked else ""
        return (f"native: {', '.join(native)}; emulated: {', '.join(emulated) or 'none'}; TensorFlow's oneDNN "
                f"default: {'on' if self.onednn_default else 'off'} ({self.onednn_default_why}){masked}")


def capabilities(cpuinfo: str | None = None, machine: str | None = None, mask: str | None = None,
                 environ: Mapping[str, str] | None = None, system: str | None = None) -> Capabilities:
    """The capability table of this host (or of ``cpuinfo`` text, on ``machine``): per precision whether it is
    native, and TensorFlow's oneDNN default. ``mask`` (default: :data:`MASK_ENV` of ``environ``) names flags to treat
    as absent; TensorFlow's own default is computed from the real flags all the same (:func:`onednn_default`)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    env = os.environ if environ is None else environ
    arch = MACHINES.get((machine or platform.machine()).lower(), (machine or platform.machine()).lower())
    real = cpu_flags(cpuinfo)
    entries = parse_mask(env.get(MASK_ENV) if mask is None else mask)
    removed = _masked(real, entries)
    flags = real - removed
    native: dict[str, str | None] = {}
    for precision, wanted in NATIVE_FLAGS.get(arch, {"fp32": ()}).items():
        if precision == "fp32":
            native[precision] = "always"
        elif (arch, precision) in ALL_OF:
            native[precision] = "+".join(wanted) if all(f in flags for f in wanted) else None
        else:
            native[precision] = next((f for f in wanted if f in flags), None)
    on, why = onednn_default(cpuinfo, arch, system)
    return Capabilities(arch, frozenset(flags), tuple(sorted(removed)), native, on, why)


def onednn_default(cpuinfo: str, machine: str, system: str | None = None) -> tuple[bool, str]:
    """(on, why): TensorFlow's oneDNN default on this CPU, as its DefaultOneDnnPolicy decides (the real flags)."""
    system = system or sys.platform
    if system.startswith("win") and machine == "x86_64":
        return True, "TensorFlow's Windows x86 builds enable it"
    if not system.startswith("linux"):
        return False, f"TensorFlow enables oneDNN by default on Linux and Windows x86 only, not {system}"
    if machine == "x86_64":
        found = [f for f in ONEDNN_DEFAULT_FLAGS if f in cpu_flags(cpuinfo)]
        if found:
            return True, f"the CPU has {'+'.join(found)}"
        return False, f"the CPU has none of {', '.join(ONEDNN_DEFAULT_FLAGS)}"
    if machine == "aarch64":
        first = _cpuinfo_first(cpuinfo)
        part = (first.get("CPU implementer", "").lower(), first.get("CPU part", "").lower())
        if part == NEOVERSE_V1:
            return True, "an Arm Neoverse V1 (CPU part 0xd40)"
        return False, f"on aarch64 only an Arm Neoverse V1 (CPU part 0xd40); this one's part is {part[1] or 'unknown'}"
    return False, f"TensorFlow's oneDNN default covers x86_64 and aarch64, not {machine}"


def onednn_enabled(environ: Mapping[str, str] | None = None, caps: Capabilities | None = None) -> dict[str, Any]:
    """oneDNN as TensorFlow will set it up at import in a process with ``environ``: TF_ENABLE_ONEDNN_OPTS where it
    reads as a boolean ("1"/"true"/"0"/"false"), else the CPU's default (:func:`onednn_default`)."""
    env = os.environ if environ is None else environ
    caps = caps or capabilities(environ=env)
    raw = env.get("TF_ENABLE_ONEDNN_OPTS")
    told = _env_bool(raw)
    if told is None:
        why = (f"TensorFlow's default: {caps.onednn_default_why}" if raw is None else
               f"TF_ENABLE_ONEDNN_OPTS={raw!r} is not 0/1/true/false, so TensorFlow keeps its default: "
               f"{caps.onednn_default_why}")
        return {"TF_ENABLE_ONEDNN_OPTS": raw, "enabled": caps.onednn_default, "why": why}
    return {"TF_ENABLE_ONEDNN_OPTS": raw, "enabled": told, "why": f"TF_ENABLE_ONEDNN_OPTS={raw}"}
