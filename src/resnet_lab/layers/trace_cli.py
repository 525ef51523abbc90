"""``resnet-lab layers trace LAYERS_JSON... --out trace.json``: per-layer profiles as a trace Perfetto and
``chrome://tracing`` open (:mod:`resnet_lab.layers.trace`): one process per engine, one thread per pass."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path, here
from resnet_lab.layers import diff, trace

EPILOG = """\
Each input: a layers JSON (resnet-lab layers --format json, 03's layers*.json) or a folder holding one. An engine
label found in two inputs is named with its file's folder. Open the output at https://ui.perfetto.dev (Open trace
file) or chrome://tracing. --conformance DIR: 02's conformance folder; each engine's layer slices then carry the
worst verdict (fail, unsupported, pass) of the inference cases that compute that layer on that engine.
Example: resnet-lab layers trace outputs/reference/hosts/amd-epyc-2cpus/layers --out t.json \
             --conformance outputs/reference/hosts/amd-epyc-2cpus/conformance"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", help="layers JSON files or folders holding one")
    p.add_argument("--out", required=True, help="the trace JSON to write (an existing file is not overwritten)")
    p.add_argument("--conformance", default=None, metavar="DIR",
                   help="a conformance folder (cases_*_infer_*.csv): each layer's verdict in its slices' args")


def run(args: argparse.Namespace) -> int:
    check_path("--out", args.out, "out-file")
    out = Path(args.out)
    if out.exists():
        raise UsageError(f"--out: '{args.out}' exists; give a new file (an earlier trace is never overwritten)")
    verdicts = None
    if args.conformance is not None:
        check_path("--conformance", args.conformance, "dir", optional=False)
        verdicts = trace.verdicts_of_cases(Path(args.conformance))
        if not verdicts:
            raise UsageError(f"--conformance: '{args.conformance}' holds no {trace.CASES_GLOB} of a profiled engine")
    records: dict[str, dict] = {}
    for source in args.inputs:
        for engine, record in diff.load(source).items():
            label = engine if engine not in records else f"{engine} ({Path(source).name})"
            records[label] = record
    doc = trace.trace(records, verdicts)
    out.write_text(json.dumps(doc))
    slices = sum(1 for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "layer")
    judged = sum(1 for e in doc["traceEvents"] if e.get("ph") == "X" and "conformance" in (e.get("args") or {}))
    with_verdicts = f", {judged} with a conformance verdict" if verdicts is not None else ""
    print(f"trace: {len(records)} engine(s), {slices} layer slices{with_verdicts} -> {here(out)} "
          "(open in ui.perfetto.dev)")
    return 0
