"""IREE per layer: the row's module (the export's StableHLO, which keeps every op's name stack as its location)
compiled with the recipe's flags and IREE's HAL phase dumped; ``iree-benchmark-module`` runs it with
``--device_profiling_mode=host-execution`` and ``iree-profile`` lists every dispatch's time and its command index;
the HAL module's ``hal.command_buffer.dispatch`` ops, in the same order, give each call site's location
(:func:`iree_call_sites`), hence its Keras layers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.layers.engines import base
from resnet_lab.steps import engine_step

EXPORT = "stablehlo"
PROFILER = ("IREE's HAL profiling (iree-benchmark-module --device_profiling_mode=host-execution, iree-profile's "
            "dispatch events; each call site's location from the HAL phase)")

_LOOKUP = re.compile(r"(%[\w.]+) = hal\.executable\.lookup\.function .*?function\(@[\w$.-]+::@[\w$.-]+::@([\w$.-]+)\)")
_CALLEE = re.compile(r"\)\[(%[\w.]+)\]")
_LAYER = re.compile(r'"jit\([^)"]*\)/([^/"]+)/')  # a name stack's first scope under the jitted function: the layer


def iree_call_sites(hal: str) -> list[list[tuple[str, list[str]]]]:
    """Every command buffer a HAL-phase module records, in order: its dispatches as (the dispatch function, the
    Keras layers its location names). Needs locations printed inline (``--mlir-print-local-scope``)."""
    buffers: list[list[tuple[str, list[str]]]] = []
    functions: dict[str, str] = {}
    lines = hal.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "hal.command_buffer.create" in line:
            buffers.append([])
        if m := _LOOKUP.search(line):
            functions[m.group(1)] = m.group(2)
        if "hal.command_buffer.dispatch<" in line and buffers:
            callee = _CALLEE.search(line)
            while "flags(" not in lines[i] and i + 1 < len(lines):  # the op's last line carries its location
                i += 1
            buffers[-1].append((functions.get(callee.group(1), "") if callee else "",
                                list(dict.fromkeys(_LAYER.findall(lines[i])))))
        i += 1
    return buffers


def iree_kernels(commands: list[dict[str, Any]], events: list[dict[str, Any]],
                 buffers: list[list[tuple[str, list[str]]]]) -> tuple[list[dict[str, Any]], int]:
    """(kernels, executions): ``iree-profile``'s dispatch events summed per call site (``key@command index``), each
    with the layers of the matching dispatch op of the HAL module: the command buffer whose dispatch functions, in
    order, are the profile's."""
    ops = [c for c in commands if c.get("type") == "command_operation" and c.get("op") == "dispatch"]
    keys = [c["key"] for c in ops]
    match = next((b for b in buffers if [f for f, _ in b] == keys), None)
    sites = {c["command_index"]: match[k][1] for k, c in enumerate(ops)} if match else {}
    ms: dict[tuple[int, str], float] = {}
    for e in events:
        if e.get("type") == "host_dispatch_event":
            ms[(e["command_index"], e["key"])] = ms.get((e["command_index"], e["key"]), 0.0) + e["duration_ns"] / 1e6
    runs = next((c.get("host_executions", 0) for c in commands if c.get("type") == "command_summary"), 0)
    return [{"name": f"{key}@{index}", "ms": t, "layers": sites.get(index, [])}
            for (index, key), t in ms.items()], runs


def _profiled(text: str, images: Any, threads: int, opts: dict[str, Any], steps: int,
              warmup: int) -> tuple[list[dict[str, Any]], list[float], Any, str]:
    import iree.compiler as ic
    import numpy as np

    where = Path(tempfile.mkdtemp(prefix="resnet-lab-iree-"))
    dumps = ["--mlir-print-debuginfo", "--mlir-print-local-scope", "--mlir-elide-elementsattrs-if-larger=8",
             "--mlir-elide-resource-strings-if-larger=8", f"--dump-compilation-phases-to={where / 'phases'}"]
    vmfb = ic.compile_str(text, input_type="stablehlo", target_backends=["llvm-cpu"],
                          extra_args=[*opts["flags"], *dumps])
    (where / "m.vmfb").write_bytes(vmfb)
    np.save(where / "x.npy", images)
    tools = Path(sys.executable).parent
    bench = subprocess.run([str(tools / "iree-benchmark-module"), f"--device={engine_step.IREE_DEVICE}",
                            f"--module={where / 'm.vmfb'}", "--function=main", f"--input=@{where / 'x.npy'}",
                            f"--benchmark_min_time={steps}x", f"--task_topology_group_count={threads}",
                            "--device_profiling_mode=host-execution",
                            f"--device_profiling_output={where / 'p.ireeprof'}", "--benchmark_format=json"],
                           capture_output=True, text=True, check=True)
    profiled = [b["real_time"] for b in json.loads(bench.stdout)["benchmarks"] if b.get("time_unit") == "ms"]

    def jsonl(mode: str, *extra: str) -> list[dict[str, Any]]:
        out = subprocess.run([str(tools / "iree-profile"), mode, "--format=jsonl", *extra, str(where / "p.ireeprof")],
                             capture_output=True, text=True, check=True).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    hal = next((where / "phases").glob("*.hal.mlir")).read_text()
    kernels, runs = iree_kernels(jsonl("command"), jsonl("dispatch", "--dispatch_events"), iree_call_sites(hal))
    for k in kernels:  # per `steps` executions, as every engine's kernels are
        k["ms"] *= steps / max(1, runs)
    shutil.rmtree(where, ignore_errors=True)
    return kernels, profiled, vmfb, f"{runs} executions in iree-benchmark-module"


def profile(request: dict[str, Any]) -> dict[str, Any]:
    """The row's module compiled once, its HAL phase dumped: the row's step and its profile."""
    import numpy as np

    x = base.engine_inputs(request, layout="nhwc")
    text = (x.folder / export.stablehlo_file(x.batch_size)).read_text()
    kernels, profiled, vmfb, _ = _profiled(text, x.images, x.threads, x.options, x.steps, x.warmup)
    fn = engine_step.iree_function(vmfb, engine_step.module_name(text), x.threads)
    step_ms = base.p50_ms(lambda images: np.asarray(fn(images)), x.images, x.steps, x.warmup)
    compiler = (f"IREE llvm-cpu ({' '.join(x.options['flags'])}), {engine_step.IREE_DEVICE} device, "
                f"{x.threads} worker threads")
    return base.reply(step_ms, profiled, kernels, x.steps, compiler, x.recipe)
