"""JAX per layer under ``jax.jit``: ``jax.profiler``'s trace (XSpace), XLA:CPU's thunk events of the step's module
(their ``hlo_op``), matched to that module's optimized HLO (XLA's own dump of it, asked for by ``XLA_FLAGS`` in this
process): each instruction's ``op_name`` metadata is the Keras layer's name stack
(:func:`resnet_lab.layers.engines.xla.xla_kernels`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from resnet_lab.layers.engines import base, xla

EXPORT = None


def row_fields(mode: str) -> dict[str, Any]:
    """JAX's row: the step under ``jax.jit``."""
    return {"backend": "jax", "xla": "jit"}


def profile(request: dict[str, Any]) -> dict[str, Any]:
    import jax

    s, steps, step_ms = base.framework_setup(request, xla_dump=True)
    logdir = tempfile.mkdtemp(prefix="resnet-lab-jax-")
    jax.profiler.start_trace(logdir)
    profiled = base.profiled_steps(s, steps)
    jax.profiler.stop_trace()
    module = f"jit_{s['step'].fn.__name__}"  # jit__infer, jit__train
    dumped = sorted(Path(s["xla_dump"]).glob(f"*.{module}.*after_optimizations.txt"))
    if not dumped:
        raise RuntimeError(f"XLA dumped no optimized module {module} under {s['xla_dump']}")
    model = s["model"]
    kernels = xla.xla_kernels(xla.xla_op_events(xla.xspace(logdir), module), dumped[-1].read_text(),
                              frozenset(x.name for x in model.layers), xla.kernel_sizes(model))
    return base.reply(step_ms, profiled, kernels, steps,
                      "jax.profiler's trace (XLA:CPU's thunk events, the optimized HLO's op_name metadata)")
