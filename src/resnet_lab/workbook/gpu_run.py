"""The one prepared GPU run: ResNet-50 on JAX and PyTorch, fp32 and bf16, compiled and eager, plus the HLO.

The GPU machine that is sometimes lent here has JAX and PyTorch with CUDA but no TensorFlow, little time
(minutes) and no network. This module is what runs there, in one command:

    resnet-lab gpu-run --out "$OUT/gpu-backends"      # or: python -m resnet_lab.cli gpu-run ... (no install)

It writes one run folder: ``provenance.json`` (host, GPUs, packages, commit), ``bench.csv``/``bench.json``
(the rows of :data:`resnet_lab.bench.presets.PRESETS` ``["gpu-backends"]``: training and inference, fp32 and bf16,
``jax.jit`` and eager JAX, ``torch.compile`` and eager PyTorch, native PyTorch (``torch.nn``, no Keras) eager
and under ``torch.compile``, each with a GEMM check in the row's math dtype, TF32 for fp32 rows on a GPU, so MFU
needs no peak file; ``--labels`` picks rows), ``hlo.json`` (the optimized HLO inventory
of the ``jax.jit`` steps on the GPU: opcodes, fusions, and the cuDNN/cuBLAS ``custom-call`` targets), and
``summary.md``. ``--repeats N`` runs each row in N fresh processes (in interleaved rounds), so its interval is
the spread between processes (one process gives a within-process interval only). Worker logs go to a sibling
folder (``--logs``), so the run folder stays a handful of files.

Every piece is the package's own (``bench.launcher.run_rounds``, ``hlo.capture.capture_jax``): on a CPU
host the same command runs with ``--device cpu`` and small sizes, which is how the tests check it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from resnet_lab.bench import launcher, presets
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig, expand
from resnet_lab.bench.timing import Timing
from resnet_lab.core import artifacts, provenance
from resnet_lab.core.choices import KERAS_BACKENDS, MODES, PRECISIONS, add_model_argument, check_choices
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path
from resnet_lab.hlo import capture

DEFAULT_TIMEOUT_S = 300.0
# A lent GPU's minutes are few: 20 steps and 2 s per row, a minute at most (more where --min-time asks for it).
TIMING = Timing(steps=20, warmup=3, min_time_s=2.0, max_time_s=60.0, timeout_s=DEFAULT_TIMEOUT_S)


def timing_of(args: argparse.Namespace) -> Timing:
    """The command line's timing: the time budget stretches to ``--min-time`` where it asks for more."""
    return Timing(steps=args.steps, warmup=args.warmup, min_time_s=args.min_time, timeout_s=args.timeout,
                  max_time_s=max(TIMING.max_time_s, args.min_time), repeats=args.repeats)


def configs(device: str = "gpu", model: str = "resnet50_v1.5", batch_size: int = 128, image_size: int | None = None,
            backends: list[str] | None = None, precisions: list[str] | None = None, modes: list[str] | None = None,
            timing: Timing = TIMING, labels: list[str] | None = None) -> list[BenchConfig]:
    """The ``gpu-backends`` preset with this run's sizes, filtered to ``backends``/``precisions``/``modes``
    and the preset's row ``labels``."""
    spec = dict(presets.PRESETS["gpu-backends"])
    spec["base"] = {**spec["base"], "device": device, "model": model, "batch_size": batch_size,
                    "image_size": image_size, **timing.fields()}
    rows = sorted(expand(spec), key=priority)
    all_labels = tuple(dict.fromkeys(c["label"] for c in spec["configs"]))
    for name, allowed, values in (("backend", KERAS_BACKENDS, backends), ("precision", PRECISIONS, precisions),
                                  ("mode", MODES, modes), ("label", all_labels, labels)):
        if values is None:
            continue
        check_choices(f"--{name}s", values, allowed)
        rows = [c for c in rows if getattr(c, name) in values]
    if not rows:
        raise UsageError("nothing to run: the filters leave no configuration (the preset has jax and torch rows)")
    return rows


# The order rows run in, most wanted first, so a run cut short by its budget keeps what matters most: bf16
# (what the GPU's matrix units are built for) before fp32, the training step before inference, and the whole-
# step compilers and native PyTorch before Keras' eager backends and torch.compile (minutes of compiling).
PRECISION_ORDER = ("bf16", "fp32", "fp16")
MODE_ORDER = ("train", "infer")
ENGINE_ORDER = (("jax", "keras", "jit"), ("torch", "native", "off"), ("torch", "native", "jit"),
                ("torch", "keras", "off"), ("torch", "keras", "jit"), ("jax", "keras", "off"))


def priority(cfg: BenchConfig) -> tuple[int, int, int]:
    engine = (cfg.backend, cfg.impl, cfg.xla)
    return (PRECISION_ORDER.index(cfg.precision), MODE_ORDER.index(cfg.mode),
            ENGINE_ORDER.index(engine) if engine in ENGINE_ORDER else len(ENGINE_ORDER))


class _Printer(launcher.Listener):
    """gpu-run's side of the rounds: each process's row printed as it ends, the files rewritten after it (each
    row over its processes so far)."""

    def __init__(self, cfgs: list[BenchConfig], out: Path) -> None:
        self.cfgs, self.out = cfgs, out
        self.processes: list[list[dict[str, Any]]] = [[] for _ in cfgs]

    def process_ended(self, i: int, r: int, row: dict[str, Any]) -> None:
        self.processes[i].append(row)
        so_far = [bench_rows.combine(c, p) for c, p in zip(self.cfgs, self.processes, strict=True) if p]
        bench_rows.save_rows(self.out, so_far, "bench")
        tag = f" (process {r + 1} of {self.cfgs[i].repeats})" if self.cfgs[i].repeats > 1 else ""
        print(bench_rows.rows_to_table([row]).splitlines()[-1] + tag, flush=True)


def run_rows(cfgs: list[BenchConfig], out: Path, logs: Path, budget_s: float | None) -> list[dict[str, Any]]:
    """Every row in its ``repeats`` fresh worker processes, in interleaved rounds in priority order, each process
    its own (:func:`resnet_lab.bench.launcher.run_rounds`: a drift of the machine spreads over all rows). The
    files are rewritten after every process. Once ``budget_s`` seconds have passed no process starts: a row
    keeps the processes it has (saying how many it lacks), a row with none is recorded as skipped."""
    rows = launcher.run_rounds(cfgs, [[i] for i in range(len(cfgs))], None, logs, budget_s=budget_s,
                               listener=_Printer(cfgs, out))
    bench_rows.save_rows(out, rows, "bench")  # type: ignore[arg-type]
    return rows  # type: ignore[return-value]


def hlo_records(model: str, device: str, batch_size: int, image_size: int | None,
                precisions: list[str]) -> list[dict[str, Any]]:
    """Optimized HLO of the ``jax.jit`` inference and training steps on ``device``, per precision; a row that
    could not be captured says why instead."""
    out = []
    for precision in precisions:
        try:
            caps = capture.capture_jax(model, modes=MODES, stages=("after",), platform=device,
                                   batch_size=batch_size, image_size=image_size, precision=precision)
            out += [capture.inventory(c) for c in caps]
        except (UsageError, RuntimeError) as exc:
            out += [capture.skipped_inventory(model, mode, "after", device, str(exc), backend="jax",
                                              precision=precision, batch_size=batch_size, image_size=image_size)
                    for mode in MODES]
    return out


def summary_markdown(rows: list[dict[str, Any]], records: list[dict[str, Any]], prov: dict[str, Any]) -> str:
    gpus = ", ".join(g.get("name", "?") for g in prov.get("gpus") or []) or "none"
    lines = [f"# GPU run: {len(rows)} benchmark rows, {len(records)} HLO records", "",
             f"host {prov['host']}, GPUs: {gpus}, commit {prov['git'].get('commit')}"
             f"{' (dirty)' if prov['git'].get('dirty') else ''}, started {prov['collected_at']}", "",
             "```", bench_rows.rows_to_table(rows), "```", ""]
    for r in records:
        head = f"- jax {r['mode']} {r.get('precision')} optimized HLO on {r['platform']}: "
        if "skipped" in r:
            lines.append(head + f"not captured ({r['skipped']})")
            continue
        targets = ", ".join(f"{k} ×{v}" for k, v in r["custom_call_targets"].items()) or "no custom calls"
        lines.append(head + f"{len(r['opcodes'])} distinct opcodes, {r['opcodes'].get('fusion', 0)} fusions; "
                            f"custom calls: {targets}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    check_path("--out", args.out, "out-dir", optional=False)
    check_path("--logs", args.logs, "out-dir")
    if args.budget is not None and not args.budget > 0:
        raise UsageError(f"--budget: {args.budget:g} is not a positive number of seconds")
    cfgs = configs(args.device, args.model, args.batch_size, args.image_size, args.backends, args.precisions,
                   args.modes, timing_of(args), args.labels)
    hlo_model = args.hlo_model or args.model
    if not args.no_hlo:
        capture.check_request(hlo_model, platform=args.device, batch_size=args.hlo_batch_size,
                          image_size=args.image_size, backend="jax")
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} already holds files: give a new folder (earlier results are never overwritten)")
    out.mkdir(parents=True, exist_ok=True)
    params = {k: v for k, v in vars(args).items() if not k.startswith("_")}  # the CLI's own entries are not params
    prov = provenance.collect(params=params, opcode_list=capture.opcode_list_info())
    artifacts.write_json(out / "provenance.json", prov)
    t0 = time.perf_counter()
    logs = Path(args.logs) if args.logs else out.parent / f"{out.name}-logs"
    rows = run_rows(cfgs, out, logs, args.budget)
    if any(c.repeats > 1 for c in cfgs):
        print(bench_rows.rows_to_table(rows), flush=True)  # each row over its processes
    records = [] if args.no_hlo else hlo_records(hlo_model, args.device, args.hlo_batch_size, args.image_size,
                                                 sorted({c.precision for c in cfgs}))
    artifacts.write_json(out / "hlo.json", [{k: v for k, v in r.items() if k != "opcodes_by_role"} for r in records])
    (out / "summary.md").write_text(summary_markdown(rows, records, prov))
    print(f"{len(rows)} rows ({sum(r['status'] == 'ok' for r in rows)} ok) and {len(records)} HLO records in "
          f"{time.perf_counter() - t0:.0f} s -> {out}" + (f" (worker logs: {logs})" if logs.exists() else ""))
    return 0 if all(r["status"] in ("ok", "skipped") for r in rows) else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="a new folder for the run (provenance, bench, hlo, summary)")
    p.add_argument("--logs", default=None, help="worker logs folder (default: <out>-logs beside it)")
    p.add_argument("--device", default="gpu", help="gpu (the point) or cpu (a smoke run)")
    add_model_argument(p, default="resnet50_v1.5", help="benchmark model (zoo name, or tiny-resnet; the selected "
                       "reference)")
    p.add_argument("--hlo-model", default=None, help="zoo model for the HLO capture (default: --model)")
    p.add_argument("--batch-size", type=int, default=128, help="images per step")
    p.add_argument("--hlo-batch-size", type=int, default=128, help="batch of the HLO capture")
    p.add_argument("--image-size", type=int, default=None, help="square input side (default: the model's)")
    p.add_argument("--steps", type=int, default=TIMING.steps, help="timed steps per row")
    p.add_argument("--warmup", type=int, default=TIMING.warmup, help="untimed steps after the compiling call")
    p.add_argument("--backends", nargs="+", default=None, help="subset of jax torch")
    p.add_argument("--precisions", nargs="+", default=None, help="subset of fp32 bf16")
    p.add_argument("--modes", nargs="+", default=None, help="subset of train infer")
    p.add_argument("--labels", nargs="+", default=None,
                   help="subset of the preset's rows by label, e.g. 'JAX jit' 'native PyTorch eager'")
    p.add_argument("--repeats", type=int, default=TIMING.repeats,
                   help="fresh processes per row (the row's interval then comes from their spread)")
    p.add_argument("--timeout", type=float, default=TIMING.timeout_s, help="seconds per process")
    p.add_argument("--min-time", type=float, default=TIMING.min_time_s,
                   help="timed seconds per row, at least (0: --steps only)")
    p.add_argument("--no-hlo", action="store_true", help="skip the HLO capture")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the benchmark rows: rows not started by then are recorded as skipped "
                        "(rows run most wanted first: bf16, training, jax.jit and native PyTorch)")

