"""TensorFlow per layer under ``jit_compile=True``: one XLA module, its thunks named by the optimized HLO that XLA
dumps (:mod:`resnet_lab.layers.engines.xla`); its op_names are the graph's node names, whose pass TensorFlow's rule
reads (:func:`resnet_lab.layers.engines.tensorflow.tf_pass`). Under TensorFlow 2.21 a convolution's thunk is
asynchronous: its work runs until the first thunk reading it starts (:func:`resnet_lab.layers.engines.xla.
xla_async_events`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from resnet_lab.layers.engines import base, tensorflow, xla
from resnet_lab.layers.engines.tensorflow import tf_pass, trace

EXPORT = None


def row_fields(mode: str) -> dict[str, Any]:
    """TensorFlow's row (:func:`resnet_lab.layers.engines.tensorflow.row_fields`) under ``jit_compile=True``, its other
    fields kept."""
    return {**tensorflow.row_fields(mode), "xla": "jit"}


def node_pass(op_name: str, opcode: str, elements: int, layer: str | None, weights: dict[str, int]) -> str:
    """A kernel's pass from its op_name, a graph node's name (its last scope: the op)."""
    return tf_pass(op_name, op_name.rsplit("/", 1)[-1], layer)


def profile(request: dict[str, Any]) -> dict[str, Any]:
    s, steps, step_ms = base.framework_setup(request, xla_dump=True)
    logdir, profiled = trace(s, steps)
    space = xla.xspace(logdir)
    modules = {}
    for f in Path(s["xla_dump"]).glob("*after_optimizations.txt"):
        text = f.read_text()
        if m := re.match(r"HloModule (\S+?),?\s", text):
            modules[m.group(1)] = text
    timed = {m: sum(t for _, t in xla.xla_op_events(space, m)) for m in modules}
    module = max(timed, key=timed.get) if timed else ""
    if not module or not timed[module]:
        raise RuntimeError(f"no XLA module of the step in the trace (dumped: {len(modules)})")
    events = xla.xla_async_events(xla.xla_op_spans(space, module), modules[module])
    kernels = xla.xla_kernels(events, modules[module], frozenset(x.name for x in s["model"].layers),
                              xla.kernel_sizes(s["model"]), pass_of=node_pass)
    return base.reply(step_ms, profiled, kernels, steps, "tf.profiler's trace (XLA:CPU's thunk events of the "
                      "jit_compile module, its op_names; an asynchronous convolution's work: until the first thunk "
                      "reading it starts)")
