"""What several test modules share: running the CLI in a fresh interpreter and checking what it imported.

"Bad input gets one clear line before heavy work starts" is checked one way everywhere: the command runs
in a new Python process (so nothing this test session imported counts), and that process reports which
frameworks were in ``sys.modules`` when it ended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
HEAVY = ("tensorflow", "keras", "jax", "torch", "iree", "onnxruntime", "openvino")
_MARK = "@@heavy-imports "
_CODE = f"""import json, sys
from resnet_lab import cli
try:
    rc = cli.main(sys.argv[1:])
except SystemExit as e:  # argparse's own errors
    rc = e.code
print({_MARK!r} + json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)
sys.exit(rc)
"""


@dataclass
class Fresh:
    returncode: int
    stdout: str
    stderr: str  # without the marker line
    heavy: list[str]  # frameworks imported by the time the command ended


def conv_layers(model: str) -> int:
    """The model's convolution layers, from the zoo's plan: the stem, every block's convs and projections."""
    from resnet_lab.models import specs

    plans = specs.block_plans(specs.get_spec(model), use_bias=False)
    return 1 + sum(len(b.convs) + (b.shortcut_conv is not None) for b in plans)


def fresh_env(**extra: str) -> dict[str, str]:
    """This environment with the checkout's src first on PYTHONPATH and no GPU visible."""
    path = os.pathsep.join([str(SRC), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return {**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": "", **extra}


def run_cli(*args: str, timeout: float = 120, cwd: str | Path | None = None, **env: str) -> Fresh:
    """``resnet-lab ARGS`` in a fresh interpreter."""
    r = subprocess.run([sys.executable, "-c", _CODE, *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=fresh_env(**env), cwd=cwd)
    lines = r.stderr.splitlines()
    marks = [ln for ln in lines if ln.startswith(_MARK)]
    assert marks, f"the command died before reporting its imports:\n{r.stderr[-2000:]}"
    heavy = json.loads(marks[-1][len(_MARK):])
    return Fresh(r.returncode, r.stdout, "\n".join(ln for ln in lines if not ln.startswith(_MARK)), heavy)


def assert_usage_error(args: list[str], message: str, cwd: str | Path | None = None, **env: str) -> Fresh:
    """The command exits 2 with ``message`` in one ``error:`` line, before any framework is imported."""
    r = run_cli(*args, cwd=cwd, **env)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and message in errors[0], r.stderr[-2000:]
    assert r.heavy == [], f"imported {r.heavy} before rejecting the input"
    return r


# ---------------------------------------------------------------------------------------------- benchmarks
def bench_out(name: str) -> Path:
    """Where a speed target leaves its rows: outputs/bench/<timestamp>-<name>/."""
    import datetime

    from resnet_lab.core import artifacts

    return artifacts.outputs_root() / "bench" / f"{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}-{name}"


def load_line() -> str:
    """The host's load, printed beside every speed a benchmark measures."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def native_bf16() -> bool:
    """Whether this host computes bf16 natively, unmasked (whatever RESNET_LAB_MASK_ISA a test sets later): where it
    does not, a bf16 row is skipped with its reason (an AVX2-only host), and a mask removes nothing to say."""
    from resnet_lab.core import host

    saved = os.environ.pop(host.MASK_ENV, None)
    try:
        return host.capabilities().is_native("bf16")
    finally:
        if saved is not None:
            os.environ[host.MASK_ENV] = saved


def reduced_precision() -> str:
    """The reduced precision a timed row can run here: bf16 where the host has it, else fp32 (an emulated bf16 row
    is never timed)."""
    return "bf16" if native_bf16() else "fp32"


def shared_tmp(tmp_path_factory) -> Path:
    """The temporary folder every pytest-xdist worker of this session shares (their base temp folders' parent; a
    session without workers: its own base): where what the session makes once (the quick run, the conformance
    section) is made by the first worker to need it and found there by the others."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
