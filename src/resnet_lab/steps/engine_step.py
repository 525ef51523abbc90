"""The inference step on the other compilers: IREE (the StableHLO module), ONNX Runtime and OpenVINO (the ONNX
model), each compiled once for this CPU and called on one fixed batch.

:func:`make_engine_step` returns ``(step, facts)``: ``step()`` runs one inference on the batch and returns the
logits as a numpy array (the read-back is the call's own: every engine returns host memory), ``facts`` says
what was compiled and how: ``compile_s`` (the engine's compile: IREE's ``compile_str``, ORT's session, OpenVINO's
``compile_model``), ``compiler`` (the flags and hints, stated), ``threads`` and what the engine made of the
module where it tells (IREE's dispatch regions, ORT's optimized-graph nodes, OpenVINO's runtime-model ops).

Runs in the benchmark worker (:mod:`resnet_lab.bench.measure`), one engine per process: IREE's task-system
flags are global to the process and read when its first device is made.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from resnet_lab.core.provenance import available_cpus

# IREE: llvm-cpu for this host's CPU and its features (LLVM's host detection), embedded ELF, run on the
# multithreaded local-task device. On the AMD EPYC host (ResNet-50 v1.5, 224², batch 1) the host target is
# what matters (636 ms with the generic x86-64 target, ~470 ms with the host's); microkernels
# (--iree-llvmcpu-enable-ukernels=all) and data-tiled convolutions
# (--iree-dispatch-creation-experimental-set-data-tiling-ops=convolution) did not help there (480 and 560 ms).
IREE_FLAGS = ("--iree-llvmcpu-target-cpu=host",)
IREE_DEVICE = "local-task"
# ONNX Runtime: the CPU execution provider, every graph optimization (ORT_ENABLE_ALL: constant folding,
# Conv+BN+ReLU fusions, NCHWc layout transforms), sequential execution.
ORT_LEVEL = "ORT_ENABLE_ALL"
# OpenVINO: the CPU plugin, latency hint (one inference request at a time, as the timed loop calls it), f32
# inference precision stated (on CPUs with bf16/AMX the plugin would otherwise compute in bf16).
OPENVINO_CONFIG = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}


def threads(intra_op: int | None) -> int:
    """The engine's thread count: ``intra_op``, else every CPU this process may run on (as TensorFlow's default)."""
    return intra_op if intra_op is not None else available_cpus()


def make_engine_step(engine: str, folder: str | os.PathLike, images: Any, intra_op: int | None = None,
                     inter_op: int | None = None, stablehlo: str | None = None) -> tuple[Any, dict[str, Any]]:
    """``(step, facts)`` of ``engine`` on ``images`` (a numpy batch, NHWC float32), from the export ``folder``:
    its ONNX model, or for IREE the StableHLO module ``stablehlo`` (a file name in ``folder``)."""
    folder = Path(folder)
    n = threads(intra_op)
    if engine == "iree":
        return _iree(folder / str(stablehlo), images, n)
    if engine == "onnxruntime":
        return _onnxruntime(folder / "model.onnx", images, n, inter_op or 1)
    if engine == "openvino":
        return _openvino(folder / "model.onnx", images, n)
    raise ValueError(f"engine {engine!r} is not one of: iree, onnxruntime, openvino")


def iree_compile(text: str, extra: tuple[str, ...] = ()) -> tuple[bytes, float, dict[str, int]]:
    """(the VM flatbuffer, seconds, what IREE fused) of a StableHLO module compiled for llvm-cpu with
    :data:`IREE_FLAGS`. Compiled in two legs, to IREE's flow phase and on from there (the same work as one
    call), so the flow-level module tells how many dispatch regions IREE formed (``dispatches``: the calls;
    ``dispatch_executables``: the distinct kernels they call; fewer means more fused)."""
    import iree.compiler as ic

    flags = [*IREE_FLAGS, *extra]
    t0 = time.perf_counter()
    flow = ic.compile_str(text, input_type="stablehlo", target_backends=["llvm-cpu"],
                          extra_args=[*flags, "--compile-to=flow"])
    flow = flow.decode() if isinstance(flow, bytes) else flow
    vmfb = ic.compile_str(flow, target_backends=["llvm-cpu"], extra_args=[*flags, "--compile-from=flow"])
    fused = {"dispatches": len(re.findall(r"flow\.dispatch @", flow)),
             "dispatch_executables": len(re.findall(r"flow\.executable\.export", flow))}
    return vmfb, time.perf_counter() - t0, fused


def iree_function(vmfb: bytes, module_name: str, n_threads: int, function: str = "main") -> Any:
    """The exported function of a compiled module on the local-task device with ``n_threads`` workers."""
    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_group_count={n_threads}")  # before the process's first device
    ctx = rt.SystemContext(config=rt.Config(IREE_DEVICE))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    return getattr(ctx.modules, module_name)[function]


def module_name(text: str) -> str:
    """The name of an MLIR module (``module @jit_f``): what IREE's context calls the compiled module."""
    m = re.search(r"^module @([\w$.-]+)", text, re.M)
    return m.group(1) if m else "module"


def _iree(path: Path, images: Any, n: int) -> tuple[Any, dict[str, Any]]:
    import numpy as np

    text = path.read_text()
    vmfb, seconds, fused = iree_compile(text)
    fn = iree_function(vmfb, module_name(text), n)

    def step() -> Any:
        return np.asarray(fn(images))

    flags = " ".join(IREE_FLAGS)
    return step, {"compile_s": seconds, "threads": n,
                  "compiler": f"IREE llvm-cpu ({flags}), {IREE_DEVICE} device, {n} worker threads",
                  "engine_facts": {"flags": list(IREE_FLAGS), "device": IREE_DEVICE, "threads": n,
                                   **fused, "vmfb_bytes": len(vmfb)}}


def _onnxruntime(path: Path, images: Any, n: int, inter: int) -> tuple[Any, dict[str, Any]]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVEL)
    opts.intra_op_num_threads = n
    opts.inter_op_num_threads = inter
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    with tempfile.TemporaryDirectory(prefix="resnet-lab-ort-") as tmp:
        opts.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        t0 = time.perf_counter()
        session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        seconds = time.perf_counter() - t0
        nodes = optimized_nodes(opts.optimized_model_filepath)
    name = session.get_inputs()[0].name

    def step() -> Any:
        return session.run(None, {name: images})[0]

    return step, {"compile_s": seconds, "threads": n, "version": ort.__version__,
                  "compiler": f"ONNX Runtime CPU EP ({ORT_LEVEL}), {n} intra-op / {inter} inter-op threads",
                  "engine_facts": {"graph_optimization_level": ORT_LEVEL, "intra_op": n, "inter_op": inter,
                                   "providers": session.get_providers(), "optimized_nodes": nodes}}


def optimized_nodes(path: str) -> dict[str, int] | None:
    """Node count by op type of ORT's optimized graph (what its fusions left), None where it was not written."""
    if not Path(path).is_file():
        return None
    import onnx

    counts: dict[str, int] = {}
    for node in onnx.load(path, load_external_data=False).graph.node:
        key = f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _openvino(path: Path, images: Any, n: int) -> tuple[Any, dict[str, Any]]:
    import openvino as ov

    core = ov.Core()
    config = {**OPENVINO_CONFIG, "INFERENCE_NUM_THREADS": n}
    t0 = time.perf_counter()
    model = core.read_model(str(path))
    model.reshape({model.inputs[0].get_any_name(): list(images.shape)})  # static batch: one compiled shape
    compiled = core.compile_model(model, "CPU", config)
    seconds = time.perf_counter() - t0
    request = compiled.create_infer_request()
    output = compiled.outputs[0]

    def step() -> Any:
        return request.infer({0: images})[output]

    runtime_ops: dict[str, int] = {}
    for op in compiled.get_runtime_model().get_ops():
        kind = op.get_rt_info()["layerType"].astype(str) if "layerType" in op.get_rt_info() else op.get_type_name()
        runtime_ops[kind] = runtime_ops.get(kind, 0) + 1
    hints = ", ".join(f"{k}={v}" for k, v in config.items())
    return step, {"compile_s": seconds, "threads": n, "version": ov.__version__,
                  "compiler": f"OpenVINO CPU plugin ({hints})",
                  "engine_facts": {"config": {k: str(v) for k, v in config.items()},
                                   "runtime_ops": dict(sorted(runtime_ops.items())),
                                   "runtime_op_count": sum(runtime_ops.values())}}
