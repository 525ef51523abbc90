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
from resnet_lab.steps import recipes

# The engines' settings come from their documented recipes (resnet_lab.steps.recipes): IREE's flags, ONNX Runtime's
# graph optimization level and session options, OpenVINO's hints. IREE_FLAGS: the documented recipe's flags (the
# training-step check of resnet_lab.export compiles with them too).
IREE_FLAGS = tuple(recipes.RECIPES["iree"]["documented"].options["flags"])
IREE_DEVICE = "local-task"


def threads(intra_op: int | None) -> int:
    """The engine's thread count: ``intra_op``, else every CPU this process may run on (as TensorFlow's default)."""
    return intra_op if intra_op is not None else available_cpus()


def make_engine_step(engine: str, folder: str | os.PathLike, images: Any, intra_op: int | None = None,
                     inter_op: int | None = None, stablehlo: str | None = None, recipe: str = "",
                     precision: str = "fp32") -> tuple[Any, dict[str, Any]]:
    """``(step, facts)`` of ``engine`` on ``images`` (a numpy batch, NHWC float32 for IREE, NCHW for the ONNX
    engines), from the export ``folder``: its ONNX model, or for IREE the StableHLO module ``stablehlo`` (a file
    name in ``folder``), configured by its ``recipe`` (:mod:`resnet_lab.steps.recipes`; "": the documented one) at
    ``precision``. ``step.call(x)`` runs the compiled model on another batch of the same shape (the photograph
    check). ``facts["engine_facts"]`` names the recipe, its settings and their sources."""
    folder = Path(folder)
    n = threads(intra_op)
    r = recipes.resolve(engine, recipe, int(images.shape[0]))
    opts = recipes.options(engine, r.name, precision)
    if engine == "iree":
        step, facts = _iree(folder / str(stablehlo), images, n, opts["flags"], precision)
    elif engine == "onnxruntime":
        step, facts = _onnxruntime(folder / "model.onnx", images, n, inter_op or 1, opts)
    elif engine == "openvino":
        step, facts = _openvino(folder / "model.onnx", images, n, opts)
    else:
        raise ValueError(f"engine {engine!r} is not one of: iree, onnxruntime, openvino")
    facts["compiler"] = f"{facts['compiler']} [recipe {r.name}]"
    facts["engine_facts"] = {"recipe": r.name, "settings": r.describe(precision), **facts["engine_facts"],
                             "sources": sorted({s["source"] for s in r.sources(precision)})}
    return step, facts


def _bound(call: Any, images: Any) -> Any:
    """``step()``: ``call`` on the fixed batch; ``step.call``: ``call`` itself, for another batch of that shape."""
    def step() -> Any:
        return call(images)

    step.call = call
    return step


def iree_compile(text: str, flags: tuple[str, ...] | list[str] = IREE_FLAGS) -> tuple[bytes, float, dict[str, int]]:
    """(the VM flatbuffer, seconds, what IREE fused) of a StableHLO module compiled for llvm-cpu with ``flags``.
    Compiled in two legs, to IREE's flow phase and on from there (the same work as one call), so the flow-level
    module tells how many dispatch regions IREE formed (``dispatches``: the calls; ``dispatch_executables``: the
    distinct kernels they call; fewer means more fused)."""
    import iree.compiler as ic

    flags = list(flags)
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


def _iree(path: Path, images: Any, n: int, flags: list[str], precision: str = "fp32") -> tuple[Any, dict[str, Any]]:
    import numpy as np

    text = path.read_text()
    vmfb, seconds, fused = iree_compile(text, flags)
    fn = iree_function(vmfb, module_name(text), n)
    return _bound(lambda x: np.asarray(fn(x)), images), {
        "compile_s": seconds, "threads": n,
        "compiler": f"IREE llvm-cpu ({' '.join(flags)}), {IREE_DEVICE} device, {n} worker threads",
        "engine_facts": {"flags": flags, "device": IREE_DEVICE, "threads": n, **fused, "vmfb_bytes": len(vmfb)}}


# OpenVINO's INFERENCE_PRECISION_HINT per precision (the recipes' settings)
OV_PRECISION_HINTS = {"fp32": recipes.OV_F32.value, "bf16": recipes.OV_BF16.value}


def with_every_output(proto: Any) -> Any:
    """A copy of an ONNX model (shapes inferred) whose outputs are every node's output of known type: what an engine
    runs to show each intermediate tensor."""
    import onnx
    from onnx import helper

    probe = onnx.ModelProto()
    probe.CopyFrom(onnx.shape_inference.infer_shapes(proto))
    graph = probe.graph
    types = {v.name: v.type for v in [*graph.value_info, *graph.input, *graph.output]}
    have = {o.name for o in graph.output}
    graph.output.extend([helper.make_value_info(n, types[n]) for node in graph.node for n in node.output
                         if n in types and n not in have])
    return probe


def onnx_outputs(engine: str, model: str | os.PathLike | bytes, precision: str = "fp32",
                 threads: int | None = None) -> Any:
    """``run(inputs) -> {tensor name: array}``: every output of an ONNX model (a path, or the model's bytes) on
    ``engine``'s CPU path as it is (ONNX Runtime's CPU execution provider; OpenVINO's CPU plugin told to compute in
    ``precision``), inputs in the graph's order. ``threads``: the engine's threads (default: its own choice). How a
    conformance case and a bisection open an engine; a benchmark row's recipe is :func:`make_engine_step`'s."""
    if engine == "onnxruntime":
        import onnxruntime as ort

        so = ort.SessionOptions()
        if threads:
            so.intra_op_num_threads = threads
        session = open_onnxruntime(model, so)
        names = [o.name for o in session.get_outputs()]

        def run_ort(inputs: list[Any]) -> dict[str, Any]:
            feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs, strict=True)}
            return dict(zip(names, session.run(None, feeds), strict=True))

        return run_ort
    if engine == "openvino":
        compiled = open_openvino(model, {"INFERENCE_PRECISION_HINT": OV_PRECISION_HINTS[precision],
                                         **({"INFERENCE_NUM_THREADS": threads} if threads else {})})

        def run_ov(inputs: list[Any]) -> dict[str, Any]:
            result = compiled.create_infer_request().infer(dict(enumerate(inputs)))
            return {name: result[port] for port in compiled.outputs for name in port.get_names()}

        return run_ov
    raise ValueError(f"{engine}: not an engine that runs ONNX (onnxruntime, openvino)")


def open_onnxruntime(model: str | os.PathLike | bytes, so: Any) -> Any:
    """ONNX Runtime's CPU execution provider on an ONNX model (a path or its bytes) with session options ``so``
    (:func:`ort_session_options`' for a row, a profile prefix set where profiled): how every ONNX Runtime session of
    the workbook is opened."""
    import onnxruntime as ort

    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, sess_options=so, providers=["CPUExecutionProvider"])


def open_openvino(model: str | os.PathLike | bytes, config: dict[str, Any], shape: Any = None) -> Any:
    """OpenVINO's CPU plugin on an ONNX model (a path or its bytes) compiled with ``config``; ``shape``: the input
    reshaped to it first (one static shape), None: as the model has it. How every OpenVINO model of the workbook is
    compiled."""
    import openvino as ov

    core = ov.Core()
    read = core.read_model(model, b"") if isinstance(model, bytes) else core.read_model(str(model))
    if shape is not None:
        read.reshape({read.inputs[0].get_any_name(): list(shape)})
    return core.compile_model(read, "CPU", config)


def ort_session_options(opts: dict[str, Any], n: int, inter: int = 1) -> Any:
    """ONNX Runtime's session options of a recipe's ``opts``: its graph optimization level and session config,
    ``n`` intra-op and ``inter`` inter-op threads, sequential execution."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, opts["level"])
    so.intra_op_num_threads = n
    so.inter_op_num_threads = inter
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    for key, value in opts.get("config", {}).items():
        so.add_session_config_entry(key, value)
    return so


def _onnxruntime(path: Path, images: Any, n: int, inter: int, opts: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    import onnxruntime as ort

    level = opts["level"]
    so = ort_session_options(opts, n, inter)
    with tempfile.TemporaryDirectory(prefix="resnet-lab-ort-") as tmp:
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        t0 = time.perf_counter()
        session = open_onnxruntime(path, so)
        seconds = time.perf_counter() - t0
        nodes = optimized_nodes(so.optimized_model_filepath)
    name = session.get_inputs()[0].name
    extra = "".join(f", {k}={v}" for k, v in opts.get("config", {}).items())
    return _bound(lambda x: session.run(None, {name: x})[0], images), {
        "compile_s": seconds, "threads": n, "version": ort.__version__,
        "compiler": f"ONNX Runtime CPU EP ({level}{extra}), {n} intra-op / {inter} inter-op threads",
        "engine_facts": {"graph_optimization_level": level, "intra_op": n, "inter_op": inter,
                         "session_config": opts.get("config", {}), "providers": session.get_providers(),
                         "optimized_nodes": nodes}}


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


def _openvino(path: Path, images: Any, n: int, opts: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """OpenVINO's CPU plugin with the recipe's hints. With the throughput hint (``opts["async"]``) the batch is
    split over the compiled model's optimal number of infer requests, run asynchronously and gathered, as the
    throughput guide has an application keep every stream busy; the latency hint runs one request."""
    import numpy as np
    import openvino as ov

    config = {**opts["config"], "INFERENCE_NUM_THREADS": n}
    batch = int(images.shape[0])
    t0 = time.perf_counter()
    compiled = open_openvino(path, config, images.shape)  # static batch: one compiled shape
    requests = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")) if opts.get("async") else 1
    parts = requests if requests > 1 and batch % requests == 0 else 1
    if parts > 1:  # each request takes batch/parts images: compiled again at that shape
        compiled = open_openvino(path, config, [batch // parts, *images.shape[1:]])
    seconds = time.perf_counter() - t0
    output = compiled.outputs[0]
    if parts > 1:
        queue = ov.AsyncInferQueue(compiled, parts)
        results: list[Any] = [None] * parts

        def done(request: Any, i: int) -> None:
            results[i] = request.get_output_tensor(0).data.copy()

        queue.set_callback(done)

        def call(x: Any) -> Any:
            for i, chunk in enumerate(np.split(x, parts)):
                queue.start_async({0: chunk}, i)
            queue.wait_all()
            return np.concatenate(results)
    else:
        request = compiled.create_infer_request()

        def call(x: Any) -> Any:
            return request.infer({0: x})[output]

    runtime_ops: dict[str, int] = {}
    for op in compiled.get_runtime_model().get_ops():
        kind = op.get_rt_info()["layerType"].astype(str) if "layerType" in op.get_rt_info() else op.get_type_name()
        runtime_ops[kind] = runtime_ops.get(kind, 0) + 1
    precision = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
    hints = ", ".join(f"{k}={v}" for k, v in config.items())
    return _bound(call, images), {
        "compile_s": seconds, "threads": n, "version": ov.__version__,
        "compiler": f"OpenVINO CPU plugin ({hints}; {parts} request(s) per batch)",
        "engine_facts": {"config": {k: str(v) for k, v in config.items()}, "inference_precision": precision,
                         "requests_per_batch": parts, "runtime_ops": dict(sorted(runtime_ops.items())),
                         "runtime_op_count": sum(runtime_ops.values())}}
