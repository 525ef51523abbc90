"""The 2017 method on a real run: dump the HLO modules XLA compiles during a short ``fit`` and read them.

XLA reads ``XLA_FLAGS`` once, when TensorFlow starts, so the run happens in a child process
(:mod:`resnet_lab.hlo.dump_child`) with ``--xla_dump_to=DIR --xla_dump_hlo_as_text``. The child builds a
zoo model, compiles it like a user would (``SGD(momentum=0.9)`` of :mod:`resnet_lab.steps.common`, sparse
cross-entropy from logits, ``jit_compile=True``) and fits a few synthetic batches. :func:`read_dump` then
parses every module text of the dump (before and after the backend's optimization) with :mod:`resnet_lab.hlo.parser`.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from resnet_lab.core import child
from resnet_lab.hlo import capture, parser

DUMP_FLAGS = "--xla_dump_to={dir} --xla_dump_hlo_as_text"
CHILD_MODULE = "resnet_lab.hlo.dump_child"


# module_0684.a_inference_one_step_on_data_7086__.99.before_optimizations.txt
# module_0684.a_inference_one_step_on_data_7086__.99.cpu_after_optimizations.txt
_HLO_FILE = re.compile(
    r"module_\d+\.(?P<module>.+)\.(?:(?P<backend>[a-z]+)_)?(?P<stage>before|after)_optimizations\.txt"
)


def run_fit_with_dump(
    model: str,
    dump_dir: str | os.PathLike,
    *,
    batch_size: int = 8,
    image_size: int | None = None,
    precision: str = "fp32",
    n_steps: int = 1,
    timeout: float = 900,
) -> dict[str, Any]:
    """Run ``fit`` for ``n_steps`` steps in a child process that dumps every XLA module into ``dump_dir``.

    Returns ``{"seconds", "dump_dir", "files", "hlo_files", "command", "request", "xla_flags"}``.

    Raises:
        UsageError: bad model/size/precision (checked here, before the child starts).
        RuntimeError: the child failed, died or ran past ``timeout`` seconds (its process group killed); the
            message says why in its first line, then holds the end of the child's log.
    """
    size = capture.check_request(model, modes=("train",), batch_size=batch_size, image_size=image_size,
                                 precision=precision)
    dump_dir = Path(dump_dir)
    dump_dir.mkdir(parents=True, exist_ok=True)
    flags = DUMP_FLAGS.format(dir=dump_dir.resolve())
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    request = {"model": model, "batch_size": batch_size, "image_size": size, "precision": precision,
               "steps": n_steps}
    t0 = time.perf_counter()
    outcome = child.run(CHILD_MODULE, request, timeout_s=timeout, env=env)
    seconds = time.perf_counter() - t0
    if not outcome.ok:
        tail = "\n".join(outcome.log.strip().splitlines()[-15:])
        raise RuntimeError(f"{outcome.reason('fit with XLA dump')}\n{tail}")
    files = sorted(p for p in dump_dir.iterdir() if p.is_file())
    return {"seconds": round(seconds, 1), "dump_dir": str(dump_dir), "files": len(files),
            "hlo_files": [p.name for p in hlo_dump_files(dump_dir)],
            "command": [sys.executable, "-m", CHILD_MODULE], "request": request, "xla_flags": flags}


def hlo_dump_files(dump_dir: str | os.PathLike) -> list[Path]:
    """The HLO module texts of a dump: ``*.before_optimizations.txt`` and
    ``*.<backend>_after_optimizations.txt``; buffer assignments, reports, LLVM IR and MLIR are left out."""
    return sorted(p for p in Path(dump_dir).iterdir() if _HLO_FILE.fullmatch(p.name))


def read_dump(dump_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """One row per HLO module text of a dump: ``file, module, stage (before|after), backend`` and its
    :func:`resnet_lab.hlo.parser.inventory`; also ``legacy_regex`` = what the 2017 ``%[a-z]+`` grep finds in it."""
    rows = []
    for path in hlo_dump_files(dump_dir):
        m = _HLO_FILE.fullmatch(path.name)
        assert m is not None
        text = path.read_text()
        rows.append({"file": path.name, "module": m["module"], "stage": m["stage"], "backend": m["backend"],
                     "legacy_regex": sorted(parser.legacy_regex_ops(text)), **parser.inventory(parser.parse(text))})
    return rows


def train_module_rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{"before": row, "after": row}`` for the training step's module (Keras names it one_step_on_data;
    else the module with the most instructions)."""
    out = {}
    for stage in ("before", "after"):
        candidates = [r for r in rows if r["stage"] == stage]
        if not candidates:
            continue
        named = [r for r in candidates if "one_step_on_data" in r["module"]]
        out[stage] = max(named or candidates, key=lambda r: r["num_instructions"])
    return out


def agreement(dump_rows: list[dict[str, Any]], capture_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per stage: does the dumped training module have the same opcode set as the in-process capture?

    ``capture_rows`` are :func:`resnet_lab.hlo.capture.inventory` rows of mode ``train``. Columns: ``stage, module,
    same_opcode_set, only_in_dump, only_in_capture, distinct_dump, distinct_capture, instructions_dump,
    instructions_capture`` and ``count_differences`` (opcodes whose counts differ, ``op: dump/capture``).
    """
    dumped = train_module_rows(dump_rows)
    out = []
    for stage, d in dumped.items():
        c = next((r for r in capture_rows if r["mode"] == "train" and r["stage"] == stage), None)
        if c is None:
            continue
        a, b = d["opcodes"], c["opcodes"]
        diffs = {op: f"{a.get(op, 0)}/{b.get(op, 0)}" for op in sorted(set(a) | set(b))
                 if a.get(op, 0) != b.get(op, 0)}
        out.append({"stage": stage, "module": d["module"], "same_opcode_set": set(a) == set(b),
                    "only_in_dump": ", ".join(sorted(set(a) - set(b))),
                    "only_in_capture": ", ".join(sorted(set(b) - set(a))),
                    "distinct_dump": len(a), "distinct_capture": len(b),
                    "instructions_dump": d["num_instructions"], "instructions_capture": c["num_instructions"],
                    "count_differences": ", ".join(f"{k} {v}" for k, v in diffs.items())})
    return out


def describe(dump: dict[str, Any]) -> str:
    """:func:`reproduce_2017_method`'s result as a sentence."""
    same = [a for a in dump["agreement"] if a.get("same_opcode_set")]
    return (f"The one-step `fit` dumped {dump['files_in_dump']} files in {dump['seconds']} s; the step's "
            f"{len(dump['hlo_files'])} module files (before and after optimization) are kept in `xla_dump/`. "
            f"Their opcode sets match the in-process capture in {len(same)} of {len(dump['agreement'])} stages. "
            f"The 2017 regex (`%[a-z]+`) on today's dump finds {len(dump['regex_2017_today'])} tokens, "
            "opcodes and instruction names alike: the reason the parser reads opcodes, not names.")


def reproduce_2017_method(
    model: str,
    out: str | os.PathLike,
    *,
    batch_size: int = 8,
    image_size: int | None = None,
    precision: str = "fp32",
) -> dict[str, Any]:
    """Dump a one-step ``fit`` of ``model``, parse its modules, compare with an in-process capture.

    The HLO texts of the dump are copied to ``out/xla_dump/`` (the dump's LLVM IR and MLIR files are
    dropped). Returns ``{"seconds", "files_in_dump", "hlo_files", "agreement"`` (:func:`agreement` rows),
    ``"regex_2017_today"`` (what ``%[a-z]+`` finds in the dump), ``"dump_rows"`` (:func:`read_dump`)}.
    """
    import shutil
    import tempfile

    target = Path(out) / "xla_dump"
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="xla_dump_") as tmp:
        info = run_fit_with_dump(model, tmp, batch_size=batch_size, image_size=image_size,
                                 precision=precision)
        rows = read_dump(tmp)
        for name in info["hlo_files"]:
            shutil.copy(Path(tmp) / name, target / name)
    reference = capture.capture_matrix([model], modes=("train",), batch_size=batch_size, image_size=image_size,
                                   precision=precision)
    return {"seconds": info["seconds"], "files_in_dump": info["files"], "hlo_files": info["hlo_files"],
            "agreement": agreement(rows, reference),
            "regex_2017_today": sorted(set().union(*(r["legacy_regex"] for r in rows))), "dump_rows": rows}
