"""``resnet-lab bench``: the command-line face of :mod:`resnet_lab.bench`.

One configuration from the flags, a ``--matrix`` file laid over them, or a ``--preset``; each configuration
runs in its own worker process (:mod:`resnet_lab.bench.launcher`), one row each, printed as a table, JSON,
CSV or Markdown and, with ``--out``, written as ``bench.csv``/``bench.json`` beside the worker logs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from resnet_lab.bench import launcher, local_cluster, presets, sections
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig, expand, validate
from resnet_lab.bench.timing import DEFAULT as TIMING
from resnet_lab.ceilings import peak
from resnet_lab.core import artifacts
from resnet_lab.core.choices import (
    BACKENDS,
    DATA_FORMATS,
    DEVICES,
    ENGINES,
    MODES,
    OUTPUT_FORMATS,
    PRECISIONS,
    add_format_option,
    add_model_argument,
    check_format,
)
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path
from resnet_lab.scaleout import cluster


def _parse_env(items: list[str] | None) -> dict[str, str]:
    env = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env takes NAME=VALUE, got {item!r}")
        env[key] = value
    return env


EPILOG = """\
Each configuration runs in its own worker process: oneDNN, XLA and thread settings are read when a framework
is imported. Configurations that agree on those settings share one process, one after another.

Backends. One Keras model on three backends: TensorFlow (tf.function; --xla jit: jit_compile=True), JAX
(--xla jit: jax.jit; --xla off: eager JAX) and PyTorch (--xla jit: torch.compile; --xla off: eager). A backend
that is not installed gives skipped rows; knobs a backend lacks (auto-clustering on JAX and PyTorch, oneDNN
off or thread counts on JAX, replicas on PyTorch) are one-line errors. JAX replicas use Keras' DataParallel
(emulated XLA host devices on a CPU). --backend torch --impl native runs the model in plain torch.nn (no
Keras) with the step a PyTorch user writes (F.cross_entropy, torch.optim.SGD, channels_last, torch.autocast
for bf16). outputs/README.md says what a row holds.

Other compilers. --backend iree | onnxruntime | openvino times the Keras model exported once (resnet_lab.export,
into the cache outputs/cache/export/ or --export-dir: StableHLO from jax.jit with the weights closed over for
IREE; for ONNX Runtime and OpenVINO the native torch.nn model with the same weights through torch.onnx.export),
each engine configured by a documented --recipe (resnet_lab.steps.recipes, which cites every setting; default:
the engine's best for the batch; --preset engine-knobs tries them all). Before timing, each engine's logits on a
fixed batch are checked against Keras' (check_max_abs, check_max_rel, check_tol), after it against fp32 on 16
photographs (agree_*): a row that disagrees has status error and no speed. Inference on the CPU, fp32 or bf16
(ONNX Runtime, or a CPU without bf16 instructions: a skipped row that says why); compile_s is the engine's
compile; the compiler column states its flags.

Repeats. The same configuration moves more between fresh processes than within one (memory layout, thread
placement, the host's state): an interval from one process's steps says how well that process was timed.
--repeats N measures each configuration in N fresh processes, in interleaved rounds (every configuration
once, then again), so a slow drift of the host spreads over all of them; the row's images/sec is the
geometric mean of the processes' and its 95 % interval comes from their spread (ci_method "between
processes (N)"; var_within and var_between split the variance on the log scale). The speed of one row
settles with more processes, not with more steps, once var_between dominates.

Multi-worker (two hosts). One configuration runs data-parallel across machines with TensorFlow's
MultiWorkerMirroredStrategy (gRPC, collective ring all-reduce on CPU, NCCL on GPU). Every host runs the same
command with the same --workers list (the cluster, worker 0 first) and its own --task-index:

    # on hostA (10.0.0.1): worker 0, the chief
    resnet-lab bench --model resnet50 --batch-size 32 --steps 20 \\
        --workers 10.0.0.1:2222,10.0.0.2:2222 --task-index 0 --out outputs/bench/2hosts
    # on hostB (10.0.0.2): worker 1
    resnet-lab bench --model resnet50 --batch-size 32 --steps 20 \\
        --workers 10.0.0.1:2222,10.0.0.2:2222 --task-index 1

- Same everywhere: the same checkout (commit) and environment on every host, and the same options apart from
  --task-index: model, batch (per worker), steps, precision and the --workers list in the same order.
- Ports: each host listens on its own port of the list (gRPC). Open those ports between the hosts (nothing
  else is needed: no shared file system). Use addresses the other hosts can reach, not localhost.
- Order: start the workers in any order. Each waits up to --peer-timeout seconds (default 120) for all the
  others to join; a worker left alone stops with an error naming the worker that never came. Each host first
  measures its one-worker baseline (a one-process run of the same configuration, for scaling efficiency)
  unless you pass --baseline-images-per-sec or --no-baseline; start the hosts within a minute of each other
  so the baselines end close together.
- What is written: TF_CONFIG is built from the options for the worker process (do not set it yourself).
  After the timed steps, one all-gather hands every worker what each worker measured; the chief (task 0)
  writes the row (--out, and stdout), the other workers print the same row and write nothing. The row has the
  global images_per_sec (global batch / the slowest worker's mean step time), per_worker_images_per_sec,
  per_worker (each worker's address, images/sec, step time, CPU seconds, host utilisation, baseline),
  baseline_images_per_sec, scaling_efficiency (global / the sum of the workers' one-worker images/sec),
  collective (what ran: "ring (auto)" on CPU) and MFU against hosts x this host's peak.
- Failures: a worker that dies or hangs makes the others stop with an error that names it: at once when its
  connections reset, after --peer-timeout when it stops sending heartbeats or a step stays blocked. No ok row
  is written for an incomplete run. --timeout (per configuration) still kills a worker's process group as
  the last resort; keep it above the peer timeout and the first (compiling) step.
- Limits: one replica per worker (--replicas 1; on GPU hosts, one GPU per worker); --xla jit is refused on
  CPU (TensorFlow cannot compile the step's collectives with XLA for CPU devices); --xla auto works. Notebook
  03 does the same with its parameters workers and task_index (every host runs the notebook; the workers
  meet at its scale-out section, so set peer_timeout_s above the hosts' difference in reaching it, or use
  this command).

To try it on one machine: --model tiny-resnet --local-workers 2 starts two workers on 127.0.0.1 (free
ports), each through the same code path as a real host, after one baseline run, and prints the chief's row.
They share this host's cores, so the efficiency measures contention, not a cluster."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_argument(p, default="resnet50", help="model name (the zoo's, or tiny-resnet, keras-resnet50)")
    p.add_argument("--backend", default="tensorflow",
                   help=f"Keras backend or other compiler, one of {', '.join(BACKENDS)} (jax and torch: the "
                        f"[jax]/[torch] extras; {', '.join(ENGINES)}: the [compilers] extra)")
    p.add_argument("--impl", default="keras",
                   help="keras (one model, every backend) or native: the model in plain torch.nn, no Keras "
                        "(--backend torch; resnet50_v1.5 is torchvision's resnet50)")
    p.add_argument("--mode", default=None,
                   help=f"one of {', '.join(MODES)} (default: train; infer on {', '.join(ENGINES)})")
    p.add_argument("--batch-size", type=int, default=32, help="images per replica per step")
    p.add_argument("--image-size", type=int, default=None, help="square input side (default: the model's)")
    p.add_argument("--precision", default="fp32", help=f"one of {', '.join(PRECISIONS)}")
    p.add_argument("--xla", default=None,
                   help="off | jit (TF jit_compile=True, jax.jit, torch.compile) | auto (TF auto-clustering); "
                        f"default off (jit on {', '.join(ENGINES)}: they always compile)")
    p.add_argument("--onednn", default="on", help="on | off (TF_ENABLE_ONEDNN_OPTS)")
    p.add_argument("--device", default="cpu", help=f"one of {', '.join(DEVICES)}")
    p.add_argument("--replicas", type=int, default=1, help="MirroredStrategy replicas (batch is per replica)")
    p.add_argument("--intra-op", "--threads", dest="intra_op", type=int, default=None,
                   help="intra-op threads (default: TF's; --threads: the same, as every command spells it)")
    p.add_argument("--inter-op", type=int, default=None, help="inter-op threads (default: TF's)")
    p.add_argument("--data-format", default="channels_last", help=f"one of {', '.join(DATA_FORMATS)}")
    p.add_argument("--fused-bn", action="store_true",
                   help="batch norm through TensorFlow's fused kernel (FusedBatchNormV3), Keras' weights")
    p.add_argument("--fold-bn", action="store_true",
                   help="inference with each batch norm folded into its convolution (a frozen graph's model; "
                        "v1, v1.5); its logits are checked against the unfolded model's before timing")
    # the timing knobs' defaults: bench.timing.DEFAULT, the one every path reads
    p.add_argument("--warmup", type=int, default=TIMING.warmup,
                   help="untimed steps after the compiling first call (default %(default)s)")
    p.add_argument("--steps", type=int, default=TIMING.steps,
                   help="timed steps: at least this many (default %(default)s)")
    p.add_argument("--min-time", type=float, default=TIMING.min_time_s,
                   help="and at least this many seconds of timed steps (0: exactly --steps; default %(default)g)")
    p.add_argument("--max-time", type=float, default=TIMING.max_time_s,
                   help="but no more seconds than this; a row cut short of --steps says so (status short; "
                        "default %(default)g)")
    p.add_argument("--repeats", type=int, default=TIMING.repeats,
                   help="fresh processes per configuration, in interleaved rounds: one row whose 95 %% interval "
                        "comes from their spread (default %(default)s: the interval is within one process)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="extra worker environment (repeatable)")
    p.add_argument("--label", default="", help="a name for the row")
    p.add_argument("--gemm-check", action="store_true",
                   help="also time GEMMs in the worker: the peak available during the run (shared hosts)")
    p.add_argument("--onednn-profile", action="store_true",
                   help="ONEDNN_VERBOSE=1: split the timed steps into oneDNN primitives and the rest")
    p.add_argument("--timeout", type=float, default=TIMING.timeout_s,
                   help="seconds per configuration (default %(default)g)")
    mw = p.add_argument_group("multi-worker (tf.distribute.MultiWorkerMirroredStrategy; "
                              "see resnet_lab.scaleout.cluster)")
    mw.add_argument("--workers", default=None, metavar="HOST:PORT,HOST:PORT",
                    help="the cluster: every worker's host:port, the same list on every host")
    mw.add_argument("--task-index", type=int, default=None, help="this worker's index in --workers (0: chief)")
    mw.add_argument("--local-workers", type=int, default=0, metavar="N",
                    help="start N workers on 127.0.0.1 (one-host trial) and print the chief's row")
    mw.add_argument("--collective", default="auto", help="auto | ring | nccl (all-reduce implementation)")
    mw.add_argument("--peer-timeout", type=float, default=120.0,
                    help="seconds to wait for peers: to join, between heartbeats, per step")
    mw.add_argument("--baseline-images-per-sec", type=float, default=None,
                    help="one worker's images/sec for scaling efficiency (default: measure it first)")
    mw.add_argument("--no-baseline", action="store_true", help="measure no baseline: no scaling efficiency")
    p.add_argument("--matrix", default=None,
                   help="a sweep spec (JSON or YAML file, see resnet_lab.bench.config.expand) instead of one "
                        "configuration; "
                        "the options above are its base")
    p.add_argument("--preset", default=None,
                   help=f"a named matrix instead of one configuration: one of {', '.join(presets.PRESET_NAMES)} "
                        "(resnet_lab.bench.presets)")
    p.add_argument("--peak-file", default=None, help="GEMM peak JSON for MFU (default: this host's newest)")
    p.add_argument("--out", default=None, help="folder for bench.csv, bench.json and worker logs")
    p.add_argument("--recipe", default="",
                   help="IREE, ONNX Runtime, OpenVINO: a documented configuration by name (resnet_lab.steps.recipes; "
                        "default: the engine's documented best for the batch; `--preset engine-knobs` tries them all)")
    p.add_argument("--export-dir", default=None,
                   help=f"{', '.join(ENGINES)}: where the exported model is made once and reused "
                        "(default: the export cache, outputs/cache/export)")
    add_format_option(p, OUTPUT_FORMATS)  # markdown: the table's columns as a GitHub table
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    engine = args.backend in ENGINES
    return {
        "model": args.model, "backend": args.backend, "impl": args.impl,
        "mode": args.mode or ("infer" if engine else "train"),
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "precision": args.precision, "xla": args.xla or ("jit" if engine else "off"), "onednn": args.onednn,
        "device": args.device,
        "replicas": args.replicas, "intra_op": args.intra_op, "inter_op": args.inter_op,
        "data_format": args.data_format, "fused_bn": args.fused_bn, "fold_bn": args.fold_bn,
        "warmup": args.warmup, "steps": args.steps,
        "min_time_s": args.min_time, "max_time_s": args.max_time, "repeats": args.repeats,
        "env": _parse_env(args.env), "label": args.label, "timeout_s": args.timeout,
        "gemm_check": args.gemm_check, "onednn_profile": args.onednn_profile,
        "workers": cluster.parse_workers(args.workers), "task_index": args.task_index,
        "collective": args.collective, "peer_timeout_s": args.peer_timeout,
        "baseline_images_per_sec": args.baseline_images_per_sec, "measure_baseline": not args.no_baseline,
        "export_dir": args.export_dir, "recipe": args.recipe,
    }


def load_spec(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"matrix file {p} does not exist")
    text = p.read_text()
    if p.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(text) or {}
    return json.loads(text)


def configs_from_args(args: argparse.Namespace) -> list[BenchConfig]:
    base = _config_from_args(args)
    if args.preset and args.matrix:
        raise UsageError("give --preset or --matrix, not both")
    if args.preset and (base["workers"] or args.local_workers):
        raise UsageError("--workers and --local-workers run one configuration or a --matrix file, not a --preset")
    if args.preset == "2017":  # the 2017 rows keep the command line's run length
        return presets.preset_configs("2017", **{k: base[k] for k in ("steps", "warmup", "timeout_s", "repeats")})
    if args.preset == "engine-knobs":  # the sweep at the command line's image size (tiny: a quick look)
        return [validate(dataclasses.replace(c, repeats=base["repeats"]))
                for c in sections.knob_configs(image_size=base["image_size"], export_dir=base["export_dir"])]
    if args.preset:
        return presets.preset_configs(args.preset, repeats=base["repeats"])
    if args.matrix:  # a file's base sits over the command line's options
        spec = dict(load_spec(args.matrix))
        spec["base"] = {**base, **(spec.get("base") or {})}
        return expand(spec)
    return [validate(BenchConfig.from_dict(base))]


def run(args: argparse.Namespace) -> int:
    output = check_format(args)
    check_path("--peak-file", args.peak_file, "file")
    check_path("--out", args.out, "out-dir")
    check_path("--export-dir", args.export_dir, "out-dir")
    configs = configs_from_args(args)
    peak_doc = peak.load_peak(args.peak_file)
    local = args.local_workers
    if local:  # N workers on loopback: one combined row
        if len(configs) != 1:
            raise UsageError("--local-workers runs one configuration, not a matrix or preset")
        rows = local_cluster.scale_out(configs[0], local_workers=local, peak=peak_doc, out=args.out)
    elif any(c.task_index for c in configs):  # not the chief: it writes the row
        print("resnet-lab bench: not the chief (task index > 0): the row is printed, not written; "
              "worker 0 writes it", file=sys.stderr)
        rows = launcher.run_matrix(configs, out=None, peak=peak_doc,
                                   progress=not args.no_progress and len(configs) > 1)
    else:
        rows = launcher.run_matrix(configs, out=args.out, peak=peak_doc,
                                   progress=not args.no_progress and len(configs) > 1)
    if output == "json":
        print(json.dumps(artifacts.jsonable(rows[0] if len(rows) == 1 else rows), indent=2))
    elif output == "csv":
        print(bench_rows.rows_to_csv(rows), end="")
    elif output == "markdown":
        print(bench_rows.rows_to_markdown(rows))
    else:
        print(bench_rows.rows_to_table(rows))
    for r in rows:
        if r["status"] != "ok":
            print(f"resnet-lab bench: {r['status']}: {r.get('reason')}", file=sys.stderr)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


