"""What every profile shares: its steps timed by the bench's own loop, an engine's inputs as its recipe says, and a
framework row's setup (the row ``bench`` would time, :func:`resnet_lab.bench.measure.setup`).

A profile times ``steps`` unprofiled steps first (the row's step, p50), then the same number with the profiler on,
each timed too (the profiler's overhead). Its reply: ``step_ms``, ``profiled_step_ms``, ``kernels`` (name, ms
summed over the profiled steps, layers, pass), ``steps``, ``compiler`` (how it was compiled or profiled) and
``recipe``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from resnet_lab import export
from resnet_lab.steps import engine_step, recipes

OUTSIDE = "(outside any layer)"  # a framework's time in the step but in no layer's range: unattributed
# What an engine's module states, read by the parent before any child starts (a module imports its engine only
# inside its functions): ``EXPORT``, the export an engine runs ("onnx" or "stablehlo"; a framework: None, it builds
# the row bench would time, ``row_fields(mode)``); ``PROFILER``, how an engine is profiled (a framework's child says).


def timed(call: Callable[[], Any], steps: int) -> list[float]:
    """``steps`` calls, each timed (ms), by the bench's loop (:func:`resnet_lab.bench.measure.time_steps`)."""
    from resnet_lab.bench import measure

    return [1e3 * t for t in measure.time_steps(call, lambda _: None, steps)["step_times"]]


def p50_ms(call: Callable[[Any], Any], images: Any, steps: int, warmup: int) -> float:
    """The median of ``steps`` timed calls on ``images``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call(images)
    return statistics.median(timed(lambda: call(images), steps))


def reply(step_ms: float, profiled: list[float], kernels: list[dict[str, Any]], steps: int, compiler: str,
          recipe: str = "") -> dict[str, Any]:
    return {"step_ms": step_ms, "profiled_step_ms": statistics.median(profiled), "kernels": kernels, "steps": steps,
            "compiler": compiler, "recipe": recipe}


class EngineInputs(NamedTuple):
    """An engine's request read: the export folder, the reference batch as the engine takes it, its threads, the
    recipe and its options (for ``precision``)."""

    folder: Path
    batch_size: int
    images: Any
    threads: int
    recipe: str
    options: dict[str, Any]
    precision: str
    steps: int
    warmup: int


def engine_inputs(request: dict[str, Any], layout: str = "onnx") -> EngineInputs:
    """``layout``: ``onnx`` (NCHW, as the ONNX export takes it) or ``nhwc`` (the StableHLO module's)."""
    import numpy as np

    engine, folder, batch = request["engine"], Path(request["folder"]), request["batch_size"]
    ref = np.load(folder / export.reference_file(batch))
    images = np.ascontiguousarray(export.onnx_input(ref["images"]) if layout == "onnx" else ref["images"])
    recipe = recipes.resolve(engine, request.get("recipe", ""), batch)
    precision = request.get("precision", "fp32")
    return EngineInputs(folder, batch, images, engine_step.threads(request.get("threads")), recipe.name,
                        recipes.options(engine, recipe.name, precision), precision, request["steps"],
                        request["warmup"])


def row_step_ms(engine: str, x: EngineInputs) -> tuple[float, str]:
    """(the p50 ms of the row's own step on ``engine``, as ``bench`` times it, unprofiled; its compiler line)."""
    step, facts = engine_step.make_engine_step(engine, x.folder, x.images, x.threads, recipe=x.recipe,
                                               precision=x.precision)
    return p50_ms(step.call, x.images, x.steps, x.warmup), facts["compiler"]


def framework_setup(request: dict[str, Any], xla_dump: bool = False) -> tuple[dict[str, Any], int, float]:
    """(the row's setup, its steps, its p50 step ms) for a framework's request: the row ``bench`` would time for
    ``request["config"]``, warmed up and timed. ``xla_dump``: XLA dumps every module as text into ``setup["xla_dump"]``
    (read when XLA's CPU client starts, in the setup). Whatever must be in place before the step compiles (its first
    call) is the caller's, before this."""
    from resnet_lab.bench import measure
    from resnet_lab.bench.config import BenchConfig

    cfg = BenchConfig.from_dict(request["config"])
    dump = tempfile.mkdtemp(prefix="resnet-lab-xla-") if xla_dump else ""
    if dump:
        os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), f"--xla_dump_to={dump}",
                                            "--xla_dump_hlo_as_text"])
    s = {**measure.setup(cfg), "xla_dump": dump}
    if "skip" in s:
        raise RuntimeError(s["skip"])
    steps, warmup = request["steps"], request["warmup"]
    for _ in range(1 + warmup):
        s["sync"](s["step"]())
    return s, steps, statistics.median(timed(lambda: s["sync"](s["step"]()), steps))


def profiled_steps(s: dict[str, Any], steps: int) -> list[float]:
    """``steps`` of a framework row's steps, each timed (ms; the profiler is the caller's)."""
    return timed(lambda: s["sync"](s["step"]()), steps)
