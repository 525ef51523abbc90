"""``conformance bisect``: the first layer whose output leaves tolerance when an engine runs the whole model.

The engine (ONNX Runtime or OpenVINO) runs the export's ``model.onnx`` (or another ONNX model of the same network:
``onnx_path``, e.g. one with an op planted wrong, :func:`plant`) on real photographs with every node's output
exposed; the reference is Keras' fp32 model (JAX backend, the export's weights) on the same photographs, every
layer's output (a child process). An ONNX node computes the Keras layers its name says
(:func:`resnet_lab.models.names.node_layers`; a convolution with its batch norm folded: the batch norm's output),
so each node output is compared with that layer's, NCHW against NHWC transposed.

First each group's last output, in order: the stem, every block (``convN_blockM_*``), the head (pool, logits); the
first group beyond tolerance is opened and every layer inside it compared, in order; the first layer beyond
tolerance is named, and its nodes written as a kit of cases (:mod:`resnet_lab.conformance.build`) under ``out``.
The error is :func:`resnet_lab.conformance.kit.error` (largest difference over the tensor's largest value); the
tolerance is the logits' agreement rule for the precision (:data:`resnet_lab.export.AGREEMENT`).

IREE and JAX run the model's StableHLO instead: the Keras model (the export's weights closed over) with every
layer's output returned, lowered by ``jax.jit`` (:func:`stablehlo_outputs`; IREE compiles it for the host CPU,
JAX calls it as ``jax.export`` serialized it), each result compared with the same layer's reference, NHWC both.

Local or inherited (:func:`alone`). A layer can leave tolerance because the engine computes it wrong, or because
its input was already a little off and the layer made that larger. So the named layer's node is run again alone
(ONNX's extractor cuts it out of the model, its weights with it), on the *reference's* inputs (Keras' outputs of
the layers that feed it, NHWC to NCHW), on the same engine and precision, and its output compared with Keras' own:
**local** where it still leaves tolerance (the engine computes this layer wrong, or at a precision the rule
does not allow), **inherited** where it is within
(the error came in from upstream and grew here). A node fed by a tensor no compared layer gives (a reshape, a
transpose) is **undetermined**, said so; so is a layer of the StableHLO path (a layer alone is cut from the ONNX
export only).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.bench.timing import ARTIFACT_TIMEOUT_S
from resnet_lab.conformance import kit as K
from resnet_lab.conformance.engines import (
    BISECT_ENGINES,
    BISECT_STABLEHLO,
    REFERENCE_BACKEND,
    check_precision,
    every_layer_outputs,
)
from resnet_lab.conformance.export_child import CHILD
from resnet_lab.core import child, requirements
from resnet_lab.core.choices import check_choice, check_int
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path
from resnet_lab.models import specs
from resnet_lab.models.names import block_of, graph_relus, node_layers
from resnet_lab.steps.engine_step import onnx_outputs, with_every_output

COLUMNS = ("stage", "layer", "node", "error", "tolerance", "verdict")
BISECTABLE = (*BISECT_ENGINES, *BISECT_STABLEHLO)


def check(model: str, backend: str, precision: str, image_size: int | None, onnx_path: str | None,
          out: str | None) -> int:
    """The image size, or one line naming what is wrong."""
    check_choice("--backend", backend, BISECTABLE)
    check_precision(backend, precision)
    if onnx_path and backend in BISECT_STABLEHLO:
        raise UsageError(f"--onnx: {backend} runs the model's StableHLO, not an ONNX model (--onnx and --plant are "
                         f"for {', '.join(BISECT_ENGINES)})")
    check_int("--image-size", image_size, 1, optional=True)
    spec = specs.zoo_spec(model, "a bisection")
    size = image_size or spec.input_size
    specs.check_input_shape(model, (size, size, 3))
    check_path("--onnx", onnx_path, "file")
    if out and Path(out).exists() and any(Path(out).iterdir()):
        raise UsageError(f"--out {out}: exists and is not empty (nothing is overwritten)")
    if missing := requirements.missing(backend):
        raise UsageError(f"--backend {backend}: {missing}")
    return size


def plant(src: str | Path, dst: str | Path, node: str, op_type: str = "Abs") -> str:
    """A copy of the ONNX model ``src`` at ``dst`` whose node ``node`` computes ``op_type`` instead (an op planted
    wrong: a ReLU as ``Abs`` lets negative values through); the Keras layer that node computes."""
    import onnx

    proto = onnx.load(str(src))
    found = [n for n in proto.graph.node if n.name == node]
    if not found:
        raise UsageError(f"plant: no node {node!r} in {src}")
    found[0].op_type = op_type
    del found[0].attribute[:]
    onnx.save(proto, str(dst))
    layers = node_layers(node, graph_relus(n.name for n in proto.graph.node))
    return layers[-1] if layers else node


def planted(model: str, size: int, node: str, onnx_path: str | None = None, export_dir: str | None = None) -> str:
    """A temporary copy of the export's ONNX model (or ``onnx_path``) with ``node`` planted wrong (:func:`plant`)."""
    src = Path(onnx_path) if onnx_path else export.ensure(export_dir, model, size, [1], onnx=True,
                                                          stablehlo=False) / export.ONNX
    dst = Path(tempfile.mkdtemp(prefix="resnet-lab-planted-")) / "planted.onnx"
    plant(src, dst, node)
    return str(dst)


def _engine_outputs(onnx_path: Path, images: Any, backend: str, precision: str) -> tuple[dict[str, Any], list[Any]]:
    """Every node output of the model on the engine (by tensor name), and the graph's nodes."""
    import onnx

    proto = with_every_output(onnx.load(str(onnx_path)))
    names = [o.name for o in proto.graph.output]
    by_name = onnx_outputs(backend, proto.SerializeToString(), precision)([images])
    values = [by_name.get(n) for n in names]
    return dict(zip(names, values, strict=True)), list(proto.graph.node)


# What a bisection asks of the Keras children, by (model, size, weights file and its mtime, photographs): the
# reference activations and, for IREE and JAX, the every-layer StableHLO's folder and layers. Bisections of the same
# export in one process (the CLI's engines one after another, the tests' clean and planted runs) make them once.
_MADE: dict[tuple[Any, ...], tuple[dict[str, Any], tuple[Path, list[str]] | None]] = {}


def _artifacts(model: str, size: int, where: Path, photos: int, stablehlo: bool
               ) -> tuple[dict[str, Any], tuple[Path, list[str]] | None]:
    """(Keras' every layer output on the photographs by layer name, and where ``stablehlo``: the every-layer
    module's folder and its results' layers), made by one child on the JAX backend, or found made by an earlier
    bisection of the same export in this process."""
    import numpy as np

    weights = where / export.WEIGHTS
    key = (model, size, str(weights.resolve()), weights.stat().st_mtime_ns, photos)
    made = _MADE.get(key)
    if made and (made[1] or not stablehlo):
        return made
    folder = Path(tempfile.mkdtemp(prefix="resnet-lab-bisect-"))
    npz = folder / "reference.npz"
    request = {"model": model, "image_size": size, "batch_size": photos, "seed": export.SEED,
               "weights": str(weights), "ir": "stablehlo"}
    if stablehlo:
        request.update(part="every_layer", out=str(folder), reference=str(npz))
        what = f"the reference activations and every-layer StableHLO of {model}"
    else:
        request.update(part="activations", out=str(npz))
        what = f"the reference activations of {model}"
    outcome = child.run(CHILD, request, timeout_s=ARTIFACT_TIMEOUT_S, env=export.child_env(REFERENCE_BACKEND))
    if not outcome.ok:
        raise RuntimeError(outcome.reason(what))
    with np.load(npz) as data:
        reference = {k: data[k] for k in data.files}
    _MADE[key] = made = (reference, (folder, outcome.reply["layers"]) if stablehlo else None)
    return made


def stablehlo_outputs(model: str, size: int, where: Path, photos: int, backend: str, edit: Any = None
                      ) -> dict[str, Any]:
    """Every layer's output (by Keras layer name, NHWC) of the model's StableHLO on ``backend`` (one of
    :data:`BISECT_STABLEHLO`) on the photographs: the module made by a child on the JAX backend
    (:func:`_artifacts`), then run here (:func:`resnet_lab.conformance.engines.every_layer_outputs`; ``edit``: the
    text compiled instead)."""
    import numpy as np

    _, made = _artifacts(model, size, where, photos, stablehlo=True)
    assert made is not None
    folder, layers = made
    outs = every_layer_outputs(backend, folder, np.load(folder / "images.npy"), edit)
    return dict(zip(layers, outs, strict=True))


def _as_nhwc(value: Any) -> Any:
    import numpy as np

    return np.transpose(value, (0, 2, 3, 1)) if np.ndim(value) == 4 else value


def bisect(model: str, backend: str, *, precision: str = "fp32", image_size: int | None = None,
           onnx_path: str | None = None, out: str | None = None, export_dir: str | None = None,
           photos: int = 2, tolerance: float | None = None, edit: Any = None) -> dict[str, Any]:
    """``{"steps": [rows of COLUMNS], "layer": the first layer beyond tolerance or None, "verdict": one line,
    "repro": the repro kit's folder or None, "cause", "error", "why"}``. ``edit``: IREE and JAX, a function of
    the every-layer module's text that returns the text run instead (an op planted wrong)."""
    import numpy as np

    from resnet_lab.export import photos as photographs

    size = image_size or specs.get_spec(model).input_size
    stablehlo = backend in BISECT_STABLEHLO
    where = export.ensure(export_dir, model, size, [1], onnx=not stablehlo, stablehlo=False)
    path = Path(onnx_path) if onnx_path else where / export.ONNX
    tol = tolerance if tolerance is not None else export.AGREEMENT[precision]["max_rel"]
    reference, _ = _artifacts(model, size, where, photos, stablehlo)
    layer_of: dict[str, tuple[str, str]] = {}  # each compared layer: (what computes it, the value compared)
    nodes: list[Any] = []
    if stablehlo:
        values = stablehlo_outputs(model, size, where, photos, backend, edit)
        layer_of = {layer: (f"result {i}", layer) for i, layer in enumerate(values) if layer in reference}
    else:
        images = export.onnx_input(np.asarray(photographs.photographs(size)[:photos], np.float32))
        values, nodes = _engine_outputs(path, images, backend, precision)
        # the node output that computes a layer last (a folded convolution: its batch norm's output)
        relus = graph_relus(n.name for n in nodes)
        for node in nodes:
            layers = node_layers(node.name, relus)
            if layers and layers[-1] in reference and node.output[0] in values:
                layer_of[layers[-1]] = (node.name, node.output[0])
    order = [layer for layer in reference if layer in layer_of]
    steps: list[dict[str, Any]] = []

    def compare(stage: str, layer: str) -> bool:
        node, tensor = layer_of[layer]
        err = K.error(_as_nhwc(values[tensor]) if not stablehlo else values[tensor], reference[layer])
        bad = err > tol
        steps.append({"stage": stage, "layer": layer, "node": node, "error": err, "tolerance": tol,
                      "verdict": "beyond tolerance" if bad else "within"})
        return bad

    # the stem, each block, the head: each group's last layer first, then the layers of the first group beyond
    groups: dict[str, list[str]] = {}
    for x in order:
        groups.setdefault(block_of(x) or ("head" if len(groups) > 1 else "stem"), []).append(x)
    first = next((g for g, layers in groups.items() if compare("blocks", layers[-1])), None)
    found = next((x for x in groups[first] if compare("layers", x)), groups[first][-1]) if first else None
    repro = None
    cause: dict[str, Any] = {"cause": None, "why": ""}
    if found and stablehlo:
        cause = {"cause": "undetermined", "error": None, "why": "a layer alone is cut from the ONNX export only"}
    elif found:
        cause = alone(path, nodes, found, layer_of, reference, images, backend, precision, tol)
        if cause["error"] is not None:
            steps.append({"stage": "alone", "layer": found, "node": layer_of[found][0], "error": cause["error"],
                          "tolerance": tol, "verdict": cause["cause"]})
    if found and out and not stablehlo:
        repro = _repro(found, layer_of, path, size, photos, out, model)
    engine = f"{backend}{' ' + precision if precision != 'fp32' else ''}"
    verdict = (f"{engine}: first layer beyond tolerance ({tol:.2g}): {found} (node {layer_of[found][0]}), "
               f"{cause['cause']}: {cause['why']}" + (f"; its cases: {repro}" if repro else "")) if found else \
        f"{engine}: every block and the logits within tolerance ({tol:.2g})"
    return {"steps": steps, "layer": found, "verdict": verdict, "repro": repro, "tolerance": tol, **cause}


def alone(onnx_path: Path, nodes: list[Any], layer: str, layer_of: dict[str, tuple[str, str]],
          reference: dict[str, Any], images: Any, backend: str, precision: str, tol: float) -> dict[str, Any]:
    """``layer``'s node run alone on the reference's inputs (see the module's docstring): ``cause`` (local,
    inherited or undetermined), ``error`` (its output's, alone; None where undetermined) and ``why`` (one line)."""
    import numpy as np
    import onnx
    import onnx.utils

    name, tensor = layer_of[layer]
    node = next(n for n in nodes if n.name == name)
    proto = onnx.shape_inference.infer_shapes(onnx.load(str(onnx_path)))
    weights = {t.name for t in proto.graph.initializer}
    given = {out: lay for lay, (_, out) in layer_of.items()}  # a tensor -> the Keras layer whose output it is
    feeds, names = [], []
    for t in node.input:
        if not t or t in weights:
            continue
        if t == proto.graph.input[0].name:
            feeds.append(images)
        elif t in given and given[t] in reference:
            value = np.asarray(reference[given[t]], np.float32)
            feeds.append(np.ascontiguousarray(np.transpose(value, (0, 3, 1, 2)) if value.ndim == 4 else value))
        else:
            return {"cause": "undetermined", "error": None,
                    "why": f"its input {t} is no compared layer's output: it cannot be fed the reference's"}
        names.append(t)
    cut = onnx.utils.Extractor(proto).extract_model(names, [tensor])
    out = onnx_outputs(backend, cut.SerializeToString(), precision)(feeds)[tensor]
    err = K.error(_as_nhwc(out), reference[layer])
    if err > tol:
        return {"cause": "local", "error": err, "why": f"alone on the reference's inputs it still leaves tolerance "
                f"(error {err:.3g}): the engine's own computation of this layer leaves the rule (an op computed "
                f"wrong, or at a precision the rule does not allow)"}
    return {"cause": "inherited", "error": err, "why": f"alone on the reference's inputs it is within tolerance "
            f"(error {err:.3g}): the error came in from upstream and grew here"}


def _repro(layer: str, layer_of: dict[str, tuple[str, str]], onnx_path: Path, size: int, photos: int, out: str,
           model: str) -> str:
    """The first diverging layer's nodes as a kit of ONNX cases under ``out``."""
    from resnet_lab.conformance import build

    nodes = [node for name, (node, _) in layer_of.items() if name == layer]
    Path(out).mkdir(parents=True, exist_ok=True)
    request = {"model": model, "ir": "onnx", "mode": "infer", "image_size": size, "batch_size": photos,
               "seed": export.SEED, "onnx": str(onnx_path), "out": out, "only_nodes": nodes}
    outcome = child.run(CHILD, request, timeout_s=ARTIFACT_TIMEOUT_S, env=export.child_env(REFERENCE_BACKEND))
    if not outcome.ok:
        raise RuntimeError(outcome.reason(f"the repro of {layer}"))
    doc = {"model": model, "ir": "onnx", "mode": "infer", "precision": "fp32", "image_size": size,
           "batch_size": photos, "cases": outcome.reply["cases"], "ops_in_model": outcome.reply["primitives"],
           "inputs": f"{photos} of scikit-learn's sample photographs", "made_by": build._made_by("onnx"),
           "rule": K.RULE, "bisected_layer": layer, "nodes": nodes}
    (Path(out) / K.KIT).write_text(json.dumps(doc, indent=1))
    (Path(out) / K.README).write_text(build.readme(doc))
    return out
