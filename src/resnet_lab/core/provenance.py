"""What made a number: commit, versions, machine. Collected without importing TensorFlow.

Every run folder and every notebook's artifact folder gets a ``provenance.json`` from :func:`collect`, so
each number in a report has its parameters, commit and environment stored beside it.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from resnet_lab.core import host

# Packages whose versions change the numbers. Missing ones are recorded as None, not skipped.
PACKAGES = (
    "resnet-lab", "tensorflow", "tensorflow-cpu", "keras", "numpy", "ml-dtypes", "jax", "jaxlib", "torch",
    "papermill", "nbconvert", "ipykernel", "pandas", "matplotlib",
)

# /proc/cpuinfo flags worth knowing for dense linear algebra on x86.
ISA_FLAGS = host.ISA_FLAGS  # the flags that decide which kernels run


def package_root() -> Path:
    """The folder that holds the ``resnet_lab`` package (``src/`` in a checkout): a child process started
    with it first on ``PYTHONPATH`` imports this very code, installed or not."""
    return Path(__file__).resolve().parents[2]


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


COMMIT_ENV = "RESNET_LAB_GIT_COMMIT"  # the commit a copied tree was made from (wins over git)
DIRTY_ENV = "RESNET_LAB_GIT_DIRTY"    # 1 or 0: whether that copy had uncommitted changes


def git_state(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Commit, branch and dirty flag of the checkout at ``path`` (default: this package's checkout)."""
    cwd = Path(path) if path else package_root()

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    # A copy of the tree (a lent GPU machine gets the working tree, and a .git that may be older than it) is
    # told the commit it was made from in the environment; that wins over whatever git finds, and says so.
    given = os.environ.get(COMMIT_ENV, "").strip()
    if given:
        dirty = os.environ.get(DIRTY_ENV, "").strip()
        return {"commit": given, "branch": None, "dirty": {"1": True, "0": False}.get(dirty), "root": None,
                "source": f"environment ({COMMIT_ENV})"}
    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "branch": None, "dirty": None, "root": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": bool(status),
        "root": git("rev-parse", "--show-toplevel"),
    }


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; every CPU where the OS has none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_info(cpuinfo_text: str | None = None) -> dict[str, Any]:
    """CPU model, logical/physical cores, ISA flags of interest, from /proc/cpuinfo (Linux), and what tells two
    CPUs of one name apart (:func:`resnet_lab.core.host.cpu_identity`: vendor, family, model number, stepping,
    L2/L3 in KiB)."""
    if cpuinfo_text is None:
        try:
            cpuinfo_text = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo_text = ""
    model, flags, cores = platform.processor() or None, set(), set()
    phys_id = core_id = None
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name":
            model = value
        elif key == "flags":
            flags.update(value.split())
        elif key == "physical id":
            phys_id = value
        elif key == "core id":
            core_id = value
            cores.add((phys_id, core_id))
    available = available_cpus()
    return {
        "model": model,
        "machine": platform.machine(),
        "logical_cpus": os.cpu_count(),
        "available_cpus": available,
        "physical_cores": len(cores) or None,
        "isa": {f: (f in flags) for f in ISA_FLAGS} if flags else {},
        **{k: v for k, v in host.cpu_identity(cpuinfo_text, available_cpus=available).items()
           if k not in ("isa", "available_cpus")},
    }


def gpu_info() -> list[dict[str, str]]:
    """NVIDIA GPUs seen by ``nvidia-smi`` (empty list where there is none)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        r = subprocess.run(
            [exe, "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in r.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            gpus.append(dict(zip(("index", "name", "memory_total", "driver"), parts, strict=True)))
    return gpus


def onednn_state(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """oneDNN as TensorFlow will set it up at import: TF_ENABLE_ONEDNN_OPTS where it reads as a boolean, else
    TensorFlow's default for this CPU (:func:`resnet_lab.core.host.onednn_enabled`: on for Linux x86 only with
    AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX). ``why`` says which decided."""
    return host.onednn_enabled(environ)


def threading_env(environ: dict[str, str] | None = None) -> dict[str, str | None]:
    env = os.environ if environ is None else environ
    keys = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "KMP_AFFINITY",
            "KMP_BLOCKTIME", "XLA_FLAGS", "TF_XLA_FLAGS", "KERAS_BACKEND", "CUDA_VISIBLE_DEVICES")
    return {k: env.get(k) for k in keys}


def collect(**extra: Any) -> dict[str, Any]:
    """Everything that made a number, as one JSON-ready dict. ``extra`` (e.g. params=...) is merged in."""
    info: dict[str, Any] = {
        "collected_at": now_iso(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "git": git_state(),
        "packages": package_versions(),
        "cpu": cpu_info(),
        "gpus": gpu_info(),
        "onednn": onednn_state(),
        "capabilities": host.capabilities().to_dict(),
        "env": threading_env(),
    }
    info.update(extra)
    return info


def onednn_active() -> bool | None:
    """Whether this process's TensorFlow runs oneDNN kernels (None when it cannot tell). Imports TensorFlow."""
    try:  # private, but the one switch that says whether oneDNN kernels are in use
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def tensorflow_view() -> dict[str, Any]:
    """What TensorFlow itself reports: version, oneDNN build, devices, thread pools, CUDA build.

    Imports TensorFlow (seconds); everything else in this module does not.
    """
    import tensorflow as tf

    build = dict(tf.sysconfig.get_build_info())
    return {
        "tensorflow": tf.__version__,
        "keras": __import__("keras").__version__,
        "onednn_active": onednn_active(),
        "devices": [f"{d.device_type}:{d.name}" for d in tf.config.list_physical_devices()],
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),  # 0 = TF picks
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),  # 0 = TF picks
        "is_cuda_build": bool(build.get("is_cuda_build")),
        "cuda_version": build.get("cuda_version"),
        "cudnn_version": build.get("cudnn_version"),
    }
