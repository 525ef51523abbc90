"""The export's child process (:func:`resnet_lab.export.ensure`): ``python -m resnet_lab.export.export_child``.

Two kinds of request, each in a process started for its Keras backend (Keras picks it once, at import):

- ``{"part": "stablehlo", "batch_sizes": [...], "lower": [...]}`` with ``KERAS_BACKEND=jax``: the model built
  with ``keras.utils.set_random_seed(seed)`` (or the folder's weights, where an earlier request saved them),
  then per batch size one fixed batch (numpy's generator of ``seed``) and Keras' logits on it (``jax.jit`` of
  the inference-mode ``stateless_call``); for the sizes in ``lower``, the StableHLO of that same function with
  the weights closed over; and once, Keras' logits on the photographs (:data:`resnet_lab.export.PHOTOS`).
- ``{"part": "onnx"}`` with ``KERAS_BACKEND=torch``: the native ``torch.nn`` model with the folder's weights
  through ``torch.onnx.export``, its nodes named after their modules; its logits on the smallest reference batch
  against the JAX ones say that the weights arrived (``native_max_abs`` in the manifest). With
  ``keras_variant`` (or for a model without a native builder) also Keras' ``Model.export(format="onnx")`` of the
  model built channels_first (``keras_torch_max_abs``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from resnet_lab import export, models
from resnet_lab.core import child
from resnet_lab.export import photos as export_photos


def _build(request: dict[str, Any], where: Path | None, data_format: str = "channels_last") -> tuple[Any, bool]:
    """(the Keras model with the export's weights, whether they were loaded from the folder). The weights do not
    depend on the data format (Keras keeps HWIO kernels either way), so a channels_first model takes them."""
    import keras

    size = request["image_size"]
    keras.utils.set_random_seed(request["seed"])
    shape = (3, size, size) if data_format == "channels_first" else (size, size, 3)
    net = models.build(request["model"], input_shape=shape, dtype_policy="float32", data_format=data_format)
    weights = where / export.WEIGHTS if where else None
    if weights and weights.is_file():
        net.load_weights(str(weights))
        return net, True
    return net, False


def _update_manifest(where: Path, **change: Any) -> None:
    m = export.read_manifest(where)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(m.get(key), dict):
            m[key] = {**m[key], **value}
        else:
            m[key] = value
    (where / export.MANIFEST).write_text(json.dumps(m, indent=1, sort_keys=True))


def stablehlo(request: dict[str, Any]) -> dict[str, Any]:
    import jax
    import keras
    import numpy as np

    where = Path(request["folder"])
    size = request["image_size"]
    t0 = time.perf_counter()
    net, loaded = _build(request, where)
    if not loaded:
        net.save_weights(str(where / export.WEIGHTS))
    trainable = [v.value for v in net.trainable_variables]
    non_trainable = [v.value for v in net.non_trainable_variables]

    def resnet_infer(images):  # the weights are closed over: constants of the lowered module
        return net.stateless_call(trainable, non_trainable, images, training=False)[0]

    made, lowered = {}, {}
    for b in request["batch_sizes"]:
        images = np.random.default_rng(request["seed"]).random((b, size, size, 3), dtype=np.float32)
        fn = jax.jit(resnet_infer)
        np.savez(where / export.reference_file(b), images=images, logits=np.asarray(fn(images)))
        made[str(b)] = export.reference_file(b)
        if b in request.get("lower", request["batch_sizes"]):
            t1 = time.perf_counter()
            # with locations: every op keeps its name stack (``jit(resnet_infer)/conv2_block1_1_conv/...``), so an
            # engine's profile maps each kernel back to its Keras layer (resnet_lab.layers)
            text = fn.lower(images).as_text(debug_info=True)
            (where / export.stablehlo_file(b)).write_text(text)
            lowered[str(b)] = {"lower_s": round(time.perf_counter() - t1, 3), "bytes": len(text)}
    if not (where / export.PHOTOS).is_file():  # the reduced-precision reference: Keras' fp32 logits on photographs
        photos = export_photos.photographs(size)
        np.savez(where / export.PHOTOS, images=photos, logits=np.asarray(jax.jit(resnet_infer)(photos)))
    _update_manifest(
        where, model=request["model"], image_size=size, seed=request["seed"], weights=export.WEIGHTS,
        stablehlo={b: export.stablehlo_file(int(b)) for b in lowered}, reference=made,
        stablehlo_source="jax.jit(stateless_call, weights closed over).lower(images).as_text(debug_info=True)",
        versions_jax={"jax": jax.__version__, "keras": keras.__version__})
    return {"reference": sorted(made), "lowered": lowered, "seconds": round(time.perf_counter() - t0, 3)}


def onnx(request: dict[str, Any]) -> dict[str, Any]:
    """``model.onnx`` as a PyTorch user exports it (:data:`resnet_lab.export.EXPORTER`): the native ``torch.nn``
    model with the export's weights, in eval mode, through ``torch.onnx.export`` (its default, the
    ``torch.export``-based exporter, which folds each batch norm into its convolution), each node named after the
    module it comes from. Models without a native builder, and ``request["keras_variant"]``, also (or instead) get
    Keras' own export on its torch backend (:data:`resnet_lab.export.KERAS_EXPORTER`)."""
    import keras
    import numpy as np
    import torch

    where = Path(request["folder"])
    t0 = time.perf_counter()
    ref = np.load(where / export.reference_file(request["batch_size"]))
    versions = {"torch": torch.__version__, "keras": keras.__version__}
    try:
        import onnx as onnx_mod

        versions["onnx"] = onnx_mod.__version__
    except ImportError:
        pass
    made: dict[str, Any] = {"versions_onnx": versions}
    native = models.get_spec(request["model"]).builder == "resnet_lab"
    if native:
        t1 = time.perf_counter()
        made.update(_native_onnx(request, where, ref), onnx=export.ONNX, onnx_exporter=export.EXPORTER,
                    onnx_layout=export.ONNX_LAYOUT)
        made["onnx_export_s"] = round(time.perf_counter() - t1, 3)
    if request.get("keras_variant") or not native:
        net, loaded = _build(request, where, export.ONNX_LAYOUT)
        if not loaded:
            raise RuntimeError(f"no {export.WEIGHTS} in {where}: the StableHLO part makes the weights first")
        with torch.no_grad():
            out = net(torch.from_numpy(export.onnx_input(ref["images"])), training=False)
        target = export.ONNX if not native else export.ONNX_KERAS
        t1 = time.perf_counter()
        net.export(str(where / target), format="onnx", verbose=False)
        made.update({"keras_torch_max_abs": float(np.max(np.abs(np.asarray(out.detach().cpu()) - ref["logits"]))),
                     "onnx_keras": target, "onnx_keras_exporter": export.KERAS_EXPORTER,
                     "onnx_keras_export_s": round(time.perf_counter() - t1, 3)})
        if not native:
            made.update(onnx=export.ONNX, onnx_exporter=export.KERAS_EXPORTER, onnx_layout=export.ONNX_LAYOUT)
    _update_manifest(where, **made)
    return {k: v for k, v in made.items() if k.endswith(("_s", "_max_abs"))} | \
        {"seconds": round(time.perf_counter() - t0, 3)}


def _native_onnx(request: dict[str, Any], where: Path, ref: Any) -> dict[str, Any]:
    """The native model with the Keras weights (:func:`resnet_lab.models.torch_builder.load_keras_weights`)
    exported to ``model.onnx``, its nodes renamed after their modules; its logits on the reference batch against
    Keras' (``native_max_abs``)."""
    import numpy as np
    import onnx as onnx_mod
    import torch

    from resnet_lab.models.torch_builder import load_keras_weights

    net, loaded = _build(request, where)
    if not loaded:
        raise RuntimeError(f"no {export.WEIGHTS} in {where}: the StableHLO part makes the weights first")
    module, source = models.build_torch(request["model"], prefer_torchvision=False)
    load_keras_weights(module, net).eval()
    x = torch.from_numpy(export.onnx_input(ref["images"]))
    with torch.no_grad():
        got = module(x).numpy()
    path = where / export.ONNX
    batch = torch.export.Dim("batch", min=1, max=1024)
    torch.onnx.export(module, (x,), str(path), dynamo=True, input_names=["images"], output_names=["logits"],
                      dynamic_shapes=({0: batch},), verbose=False)
    proto = onnx_mod.load(str(path))
    renamed = export.name_nodes_by_module(proto)
    onnx_mod.save(proto, str(path))
    return {"native_max_abs": float(np.max(np.abs(got - ref["logits"]))), "onnx_model_source": source,
            "onnx_nodes_named": renamed, "onnx_nodes": len(proto.graph.node)}


def iree_train(request: dict[str, Any]) -> dict[str, Any]:
    """One training step of :mod:`resnet_lab.steps.jax_step` (forward, loss, gradients, SGD with momentum) run by
    JAX and by IREE from the same StableHLO module (``jax.jit(step).lower(state, images, labels)``, the state
    as arguments), on the same weights and batch: the loss and every updated variable compared. Where IREE cannot
    compile or run the module, the result says at which stage and the error's first line."""
    import jax
    import numpy as np

    from resnet_lab.steps import engine_step, jax_step
    from resnet_lab.steps.common import make_optimizer

    size, b = request["image_size"], request["batch_size"]
    net, _ = _build(request, Path(request["folder"]) if request.get("folder") else None)
    images, labels = jax_step.jax_batch(b, (size, size, 3), models.get_spec(request["model"]).num_classes,
                                        seed=request["seed"])
    step = jax_step.JaxStep(net, make_optimizer(net), "train", (images, labels), compile=True)
    text = step.lower().as_text()
    args = [np.asarray(x) for x in jax.tree_util.tree_leaves((step.state, images, labels))]
    out: dict[str, Any] = {"model": request["model"], "image_size": size, "batch_size": b,
                           "module_bytes": len(text), "arguments": len(args),
                           "flags": list(engine_step.IREE_FLAGS), "tolerance": export.TRAIN_TOLERANCE}
    try:  # IREE first: where it cannot compile the module, JAX's own step is not needed
        vmfb, seconds, fused = engine_step.iree_compile(text)
    except Exception as exc:
        return {**out, "status": "error", "stage": "compile", "reason": _first_line(exc)}
    out.update(compile_s=round(seconds, 3), **fused)
    loss, state = jax.jit(step.fn)(step.state, images, labels)
    want = [np.asarray(x) for x in jax.tree_util.tree_leaves((loss, state))]
    out["results"] = len(want)
    try:
        fn = engine_step.iree_function(vmfb, engine_step.module_name(text), engine_step.threads(None))
        got = fn(*args)
        got = [np.asarray(x) for x in (got if isinstance(got, tuple | list) else [got])]
    except Exception as exc:
        return {**out, "status": "error", "stage": "run", "reason": _first_line(exc)}
    if len(got) != len(want):
        return {**out, "status": "error", "stage": "compare",
                "reason": f"IREE returned {len(got)} results, JAX {len(want)}"}
    rel = [float(np.max(np.abs(g.astype(np.float64) - w)) / max(float(np.max(np.abs(w))), 1e-30))
           if w.size and np.issubdtype(w.dtype, np.floating) else float(np.any(g != w))
           for g, w in zip(got, want, strict=True)]
    worst = max(rel[1:], default=0.0)
    agrees = rel[0] <= export.TRAIN_TOLERANCE and worst <= export.TRAIN_TOLERANCE
    return {**out, "status": "ok" if agrees else "error", "stage": "compare",
            "reason": "" if agrees else f"IREE's step differs from JAX's: loss by {rel[0]:.3g}, weights by {worst:.3g}",
            "loss_jax": float(want[0]), "loss_iree": float(got[0]), "loss_rel_diff": rel[0],
            "state_max_rel_diff": worst, "agrees": agrees}


def _first_line(exc: BaseException) -> str:
    """The error's telling line: the compiler's first diagnostic (``<stdin>:338:12: error: failed to legalize
    operation 'stablehlo.select_and_scatter' ...``, without the op's text), else the first line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    telling = [ln for ln in lines if " error: " in ln]
    line = (telling or lines or [""])[0]
    line = line.split(": %", 1)[0] if telling else line  # the diagnostic, not the offending op printed after it
    return f"{type(exc).__name__}: {line}"[:400]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    return {"stablehlo": stablehlo, "onnx": onnx, "iree_train": iree_train}[request["part"]](request)


def main(argv: list[str] | None = None) -> int:
    return child.serve(export.CHILD, answer, argv)


if __name__ == "__main__":
    sys.exit(main())
