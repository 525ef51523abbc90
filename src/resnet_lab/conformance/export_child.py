"""A model's op cases, made in their own process: ``python -m resnet_lab.conformance.export_child``.

StableHLO and HLO (Keras on JAX): the step (inference, or a training step with its optimizer) is traced to a jaxpr
and evaluated one primitive at a time on real photographs (:func:`walk`), descending into the calls JAX nests
(``pjit``, ``custom_jvp_call``); each primitive application with its inputs' shapes and dtypes and its parameters is
one signature. The first application of each signature becomes a case: that primitive alone under ``jax.jit``,
lowered to StableHLO (``module.mlir``) or HLO (``module.hlo``), with the values it received, the value it produced
(the fp32 reference) and the same primitive evaluated in float64 on those values.

ONNX (the export's ``model.onnx``, ONNX Runtime for the activations): every node's inputs are captured by running
the model once with each intermediate tensor as an output; each distinct (op type, input shapes and types,
attributes) becomes a one-node model, evaluated by ONNX's reference evaluator in fp32 (the reference) and in float64.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resnet_lab.conformance import kit as K
from resnet_lab.conformance.engines import ONNX_REFERENCE_ENGINE
from resnet_lab.core import child
from resnet_lab.core.choices import PASS_OF_ORIGIN
from resnet_lab.hlo import origin, parser

CHILD = "resnet_lab.conformance.export_child"


def _layers(scope: str, known: frozenset[str]) -> list[str]:
    """The Keras layer of a primitive's name stack (``transpose(jvp(conv1_conv))/...``), by 02's rule."""
    return list(origin.classify(scope, known)[0])




def _sub_jaxpr(eqn: Any) -> Any:
    """The closed jaxpr a call-like equation evaluates (pjit, custom_jvp_call, closed_call, remat), or None."""
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = eqn.params.get(key)
        if sub is not None and hasattr(sub, "jaxpr") and hasattr(sub, "consts"):
            return sub
        if sub is not None and hasattr(sub, "eqns"):
            from jax.extend import core as jcore

            return jcore.ClosedJaxpr(sub, ())
    return None


def _param_text(value: Any) -> str:
    return re.sub(r"0x[0-9a-f]+", "", str(value))


def walk(closed: Any, args: list[Any], visit: Callable[[Any, list[Any], list[Any], str], None]) -> list[Any]:
    """Evaluate ``closed`` (a ClosedJaxpr) on ``args`` one primitive at a time; ``visit(eqn, inputs, outputs,
    scope)`` for every primitive that is not a call (``scope``: the name stack, outer first)."""
    import numpy as np
    from jax.extend import core as jcore

    def run(jaxpr: Any, consts: list[Any], values: list[Any], scope: str) -> list[Any]:
        env: dict[Any, Any] = {}

        def read(v: Any) -> Any:  # a literal as an array of its own type (0.0 of a ReLU's max: float32)
            return np.asarray(v.val, v.aval.dtype) if isinstance(v, jcore.Literal) else env[v]

        env.update(zip(jaxpr.constvars, consts, strict=True))
        env.update(zip(jaxpr.invars, values, strict=True))
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            here = "/".join(x for x in (scope, str(eqn.source_info.name_stack)) if x)
            sub = _sub_jaxpr(eqn)
            if sub is not None:
                outs = run(sub.jaxpr, list(sub.consts), ins[len(ins) - len(sub.jaxpr.invars):], here)
            else:
                outs = eqn.primitive.bind(*ins, **eqn.params)
                outs = list(outs) if eqn.primitive.multiple_results else [outs]
                visit(eqn, ins, outs, here)
            for v, o in zip(eqn.outvars, outs, strict=True):
                if not isinstance(v, jcore.DropVar):
                    env[v] = o
        return [read(v) for v in jaxpr.outvars]

    return run(closed.jaxpr, list(closed.consts), args, "")


def _float64(value: Any) -> Any:
    import numpy as np

    value = np.asarray(value)
    return value.astype(np.float64) if value.dtype.kind == "f" else value


def _params64(params: dict[str, Any]) -> dict[str, Any]:
    """The primitive's parameters with every float32 dtype made float64 (a convolution's preferred type, a
    conversion's target)."""
    import numpy as np

    return {k: (np.dtype(np.float64) if isinstance(v, np.dtype) and v == np.float32 else v) for k, v in params.items()}


_BUILT: dict[tuple[Any, ...], Any] = {}  # (model, size, seed, weights) -> the Keras model


def _step(request: dict[str, Any]) -> tuple[Callable[..., Any], list[Any], Any, frozenset[str]]:
    """(the function traced, its arguments, the Keras model, its layer names): inference or a training step of
    the model with the export's weights, on real photographs (their reference labels: the model's own top-1)."""
    import jax
    import keras
    import numpy as np

    from resnet_lab import models
    from resnet_lab.export import photos
    from resnet_lab.steps import common, jax_step

    size, batch = request["image_size"], request["batch_size"]
    keras.utils.set_random_seed(request["seed"])
    key = (request["model"], size, request["seed"], request.get("weights"))
    if key not in _BUILT:  # a child making several kits of one model builds it once (its weights are never changed)
        net = models.build(request["model"], input_shape=(size, size, 3), dtype_policy="float32")
        if request.get("weights"):
            net.load_weights(request["weights"])
        _BUILT[key] = net
    net = _BUILT[key]
    images = np.asarray(photos.photographs(size)[:batch], np.float32)
    known = frozenset(layer.name for layer in net.layers)
    trainable = [v.value for v in net.trainable_variables]
    non_trainable = [v.value for v in net.non_trainable_variables]
    if request["mode"] == "infer":
        def infer(tv: Any, ntv: Any, x: Any) -> Any:
            return net.stateless_call(tv, ntv, x, training=False)[0]

        return infer, [trainable, non_trainable, images], net, known
    logits = net.stateless_call(trainable, non_trainable, images, training=False)[0]
    labels = np.asarray(jax.numpy.argmax(logits, axis=-1), np.int32)
    step = jax_step.JaxStep(net, common.make_optimizer(net), "train", (images, labels), compile=False)
    return step.fn, [step.state, images, labels], net, known


def jax_cases(request: dict[str, Any]) -> dict[str, Any]:
    """StableHLO or HLO cases of the request's model and mode under ``request["out"]``."""
    import jax
    import numpy as np

    fn, args, _, known = _step(request)
    flat, tree = jax.tree_util.tree_flatten(args)
    closed = jax.make_jaxpr(lambda *xs: fn(*jax.tree_util.tree_unflatten(tree, xs)))(*flat)
    seen: dict[str, dict[str, Any]] = {}

    def visit(eqn: Any, ins: list[Any], outs: list[Any], scope: str) -> None:
        types = [[list(np.shape(x)), str(x.dtype)] for x in ins]
        params = {k: _param_text(v) for k, v in sorted(eqn.params.items())}
        key = json.dumps([eqn.primitive.name, types, params])
        if key in seen:
            seen[key]["calls"] += 1
            seen[key]["layers"] += [x for x in _layers(scope, known) if x not in seen[key]["layers"]]
            return
        seen[key] = {"eqn": eqn, "ins": [np.asarray(x) for x in ins], "outs": [np.asarray(x) for x in outs],
                     "scope": scope, "types": types, "params": params, "calls": 1, "layers": _layers(scope, known)}

    walk(closed, flat, visit)
    out = Path(request["out"])
    names = []
    for i, case in enumerate(seen.values()):
        name = f"{i:03d}_{case['eqn'].primitive.name}"
        _write_jax_case(out / name, case, request["ir"])
        names.append(name)
    return {"cases": names, "primitives": len(closed.jaxpr.eqns)}


def _write_jax_case(where: Path, case: dict[str, Any], ir: str) -> None:
    import jax
    import numpy as np

    eqn, ins = case["eqn"], case["ins"]
    prim, params = eqn.primitive, eqn.params

    def alone(*xs: Any) -> Any:
        out = prim.bind(*xs, **params)
        return tuple(out) if prim.multiple_results else out

    lowered = jax.jit(alone).lower(*ins)
    with jax.enable_x64(True):
        ref64 = prim.bind(*[_float64(x) for x in ins], **_params64(params))
    ref64 = [np.asarray(x) for x in (ref64 if prim.multiple_results else [ref64])]
    where.mkdir(parents=True)
    text = lowered.as_text() if ir == "stablehlo" else lowered.compiler_ir("hlo").as_hlo_text()
    (where / K.MODULE[ir]).write_text(text)
    if ir == "stablehlo":  # the same module as jax.export serializes it: what the jax runner calls
        exported = jax.export.export(jax.jit(alone))(*[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in ins])
        (where / "module.jaxexport").write_bytes(exported.serialize())
    _save_arrays(where, ins, case["outs"], ref64)
    ops = sorted(set(re.findall(r"(stablehlo\.[a-z_]+)", text))) if ir == "stablehlo" else \
        sorted({i.opcode for i in parser.parse(text, opcodes=False).instructions()})
    _write_case(where, prim.name, ops, case["layers"], case["scope"],
                PASS_OF_ORIGIN.get(origin.classify(case["scope"], ())[1], "forward"), case["calls"],
                {"inputs": case["types"], "params": case["params"]}, case["outs"], ref64, _command(ir, len(ins)))


def _write_case(where: Path, op: str, ir_ops: list[str], layers: list[str], scope: str, pass_: str, calls: int,
                signature: dict[str, Any], reference: list[Any], ref64: list[Any], command: str) -> None:
    """A case's ``case.json``: the op, its kind and tolerance (from the reference's own error against float64),
    the layers and pass it comes from, how many calls it stands for, its signature and the engine's command."""
    kind = K.kind_of(op)
    ref_error = max((K.error(r, e) for r, e in zip(reference, ref64, strict=True)), default=0.0)
    meta = {"op": op, "ir_ops": ir_ops, "kind": kind, "layers": layers, "scope": scope, "pass": pass_,
            "calls": calls, "signature": {**signature, "outputs": [[list(y.shape), str(y.dtype)] for y in reference]},
            "reference_error": ref_error, "tolerance": K.tolerance(kind, ref_error), "rule": K.RULE,
            "command": command}
    (where / K.CASE).write_text(json.dumps(meta, indent=1))


def _save_arrays(where: Path, ins: list[Any], refs: list[Any], ref64: list[Any]) -> None:
    import numpy as np

    (where / "inputs").mkdir()
    (where / "expected").mkdir()
    for i, x in enumerate(ins):
        np.save(where / "inputs" / f"{i}.npy", np.asarray(x))
    for i, (r, e) in enumerate(zip(refs, ref64, strict=True)):
        np.save(where / "expected" / f"reference_{i}.npy", np.asarray(r))
        np.save(where / "expected" / f"float64_{i}.npy", np.asarray(e))


def _command(ir: str, inputs: int) -> str:
    feeds = " ".join(f"--input=@inputs/{i}.npy" for i in range(inputs))
    if ir == "stablehlo":
        return ("iree-compile --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu "
                f"--iree-llvmcpu-target-cpu=host module.mlir -o module.vmfb && iree-run-module --device=local-task "
                f"--module=module.vmfb --function=main {feeds} --output=@out_0.npy")
    if ir == "hlo":
        return "run_hlo_module --platform=cpu --reference_platform=interpreter --input_format=hlo module.hlo"
    return ("python -c \"import onnx, onnx.numpy_helper as h, onnxruntime as ort, glob; s=ort.InferenceSession("
            "'model.onnx'); x=[h.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob('test_data_set_0/input_*.pb'))"
            "]; print(s.run(None, {i.name: v for i, v in zip(s.get_inputs(), x)}))\"")


def onnx_cases(request: dict[str, Any]) -> dict[str, Any]:
    """ONNX cases of the export's ``model.onnx`` (inference) under ``request["out"]``."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    from resnet_lab.export import onnx_input, photos
    from resnet_lab.models.names import graph_relus, node_layers
    from resnet_lab.steps.engine_step import onnx_outputs, with_every_output

    proto = onnx.shape_inference.infer_shapes(onnx.load(request["onnx"]))
    graph = proto.graph
    initial = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    images = onnx_input(np.asarray(photos.photographs(request["image_size"])[:request["batch_size"]], np.float32))
    # every node's inputs as the reference engine computes them on the photographs
    every = onnx_outputs(ONNX_REFERENCE_ENGINE, with_every_output(proto).SerializeToString())([images])
    values = {**initial, graph.input[0].name: images, **every}
    seen: dict[str, dict[str, Any]] = {}
    only = set(request.get("only_nodes") or [])
    relus = graph_relus(n.name for n in graph.node)
    for node in graph.node:
        if only and node.name not in only:
            continue
        ins = [values[n] for n in node.input if n]
        attrs = {a.name: _param_text(helper.get_attribute_value(a)) for a in node.attribute}
        sig = [[list(x.shape), str(x.dtype)] for x in ins]
        key = json.dumps([node.op_type, sig, sorted(attrs.items())])
        layers = node_layers(node.name, relus)
        if key in seen:
            seen[key]["calls"] += 1
            seen[key]["layers"] += [x for x in layers if x not in seen[key]["layers"]]
            continue
        seen[key] = {"node": node, "ins": ins, "sig": sig, "attrs": attrs, "calls": 1, "layers": list(layers)}
    out = Path(request["out"])
    cases = []
    for i, case in enumerate(seen.values()):
        node = case["node"]
        name = f"{i:03d}_{node.op_type.lower()}"
        where = out / name
        one = helper.make_node(node.op_type, [f"x{j}" for j in range(len(case["ins"]))],
                               [f"y{j}" for j in range(len(node.output))], name=node.name, domain=node.domain)
        one.attribute.extend(node.attribute)

        def alone(ins: list[Any], one: Any = one, name: str = name, outputs: int = len(node.output)) -> Any:
            """The node alone as a model of ``ins``' types, and what ONNX's reference evaluator computes of it."""
            model = helper.make_model(helper.make_graph([one], name, [
                helper.make_tensor_value_info(f"x{j}", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))
                for j, x in enumerate(ins)], [helper.make_tensor_value_info(f"y{j}", onnx.TensorProto.UNDEFINED, None)
                                              for j in range(outputs)]),
                opset_imports=proto.opset_import, ir_version=proto.ir_version)
            return model, [np.asarray(y) for y in ReferenceEvaluator(model).run(None, {
                f"x{j}": x for j, x in enumerate(ins)})]

        model, reference = alone(case["ins"])
        _, ref64 = alone([_float64(x) for x in case["ins"]])
        for j, y in enumerate(reference):
            model.graph.output[j].CopyFrom(helper.make_tensor_value_info(
                f"y{j}", helper.np_dtype_to_tensor_dtype(y.dtype), list(y.shape)))
        where.mkdir(parents=True)
        onnx.save(model, str(where / K.MODULE["onnx"]))
        data = where / "test_data_set_0"
        data.mkdir()
        for j, x in enumerate(case["ins"]):
            (data / f"input_{j}.pb").write_bytes(numpy_helper.from_array(x, f"x{j}").SerializeToString())
        for j, (y, e) in enumerate(zip(reference, ref64, strict=True)):
            (data / f"output_{j}.pb").write_bytes(numpy_helper.from_array(e.astype(y.dtype), f"y{j}")
                                                   .SerializeToString())
        _save_arrays(where, case["ins"], reference, ref64)
        _write_case(where, node.op_type, [node.op_type], case["layers"], node.name, "forward", case["calls"],
                    {"inputs": case["sig"], "params": case["attrs"]}, reference, ref64,
                    _command("onnx", len(case["ins"])))
        cases.append(name)
    return {"cases": cases, "primitives": len(graph.node)}


def _probe(request: dict[str, Any]) -> tuple[Any, list[Any], Any]:
    """(the Keras model with every layer's output as an output, those layers, the photographs): the model built with
    the export's weights, inference, on the photographs of ``request``'s size and batch."""
    import keras
    import numpy as np

    from resnet_lab import models
    from resnet_lab.export import photos

    size = request["image_size"]
    keras.utils.set_random_seed(request["seed"])
    net = models.build(request["model"], input_shape=(size, size, 3), dtype_policy="float32")
    net.load_weights(request["weights"])
    layers = [layer for layer in net.layers if not isinstance(layer, keras.layers.InputLayer)]
    probe = keras.Model(net.inputs, [layer.output for layer in layers])
    return probe, layers, np.asarray(photos.photographs(size)[:request["batch_size"]], np.float32)


def activations(request: dict[str, Any], made: tuple[Any, list[Any], Any] | None = None) -> dict[str, Any]:
    """Every layer's output of the Keras model (inference) on the photographs, saved as ``request["out"]`` (npz, by
    layer name): the reference a bisection compares an engine's node outputs with. ``made``: :func:`_probe`'s
    model, layers and photographs, where the caller built them already."""
    import numpy as np

    probe, layers, images = made or _probe(request)
    outs = probe.predict(images, verbose=0)
    np.savez(request["out"], **{layer.name: np.asarray(o) for layer, o in zip(layers, outs, strict=True)})
    return {"layers": len(layers)}


def every_layer(request: dict[str, Any]) -> dict[str, Any]:
    """The Keras model (inference, the export's weights closed over) with every layer's output returned, lowered to
    StableHLO (``request["out"]/every_layer.mlir``) and serialized by ``jax.export`` (``every_layer.jaxexport``),
    and the photographs it takes (``images.npy``): what a bisection runs on IREE and JAX. Reply: the layers, in the
    order of the module's results. With ``request["reference"]`` (a path) also :func:`activations` there, from the
    same model: a StableHLO bisection's two artifacts from one child."""
    import jax
    import numpy as np

    probe, layers, images = made = _probe(request)
    if request.get("reference"):
        activations({**request, "out": request["reference"]}, made)
    out = Path(request["out"])
    trainable = [v.value for v in probe.trainable_variables]
    non_trainable = [v.value for v in probe.non_trainable_variables]

    def every_layer(images: Any) -> Any:  # the weights closed over: constants of the module, as the export's
        return tuple(probe.stateless_call(trainable, non_trainable, images, training=False)[0])

    fn = jax.jit(every_layer)
    (out / "every_layer.mlir").write_text(fn.lower(images).as_text())
    exported = jax.export.export(fn)(jax.ShapeDtypeStruct(images.shape, images.dtype))
    (out / "every_layer.jaxexport").write_bytes(exported.serialize())
    np.save(out / "images.npy", images)
    return {"layers": [layer.name for layer in layers]}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("part") == "activations":
        return activations(request)
    if request.get("part") == "every_layer":
        return every_layer(request)
    return onnx_cases(request) if request["ir"] == "onnx" else jax_cases(request)


def main(argv: list[str] | None = None) -> int:
    return child.serve(CHILD, answer, argv)


if __name__ == "__main__":
    sys.exit(main())
