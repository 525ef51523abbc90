"""Native PyTorch per layer, eager: ``torch.profiler`` with one ``record_function`` range per module call (forward
hooks), named after the Keras layer the call computes; each range's time outside its child ranges is its layer's (a
block's own time is its residual add). A training step's backward: autograd runs each forward op's backward function,
which carries that op's sequence number; the forward op's enclosing range names the layer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from resnet_lab.layers.engines import base
from resnet_lab.layers.engines.base import OUTSIDE
from resnet_lab.models.names import keras_layer, relus_per_block

EXPORT = None
BACKWARD = "autograd::engine::evaluate_function: "  # torch.profiler's event of one backward function


def profiled(s: dict[str, Any], steps: int, before_step: Callable[[], Any] = lambda: None,
                    ) -> tuple[Any, list[float]]:
    """``steps`` steps under ``torch.profiler`` (CPU activity), each timed: (the profiler, the steps' ms). The
    profiler's own first steps are slow (its start): two warm steps are recorded and dropped."""
    import torch

    warm = 2
    schedule = torch.profiler.schedule(wait=0, warmup=warm, active=steps, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule) as prof:
        profiled = []
        for _ in range(warm + steps):
            before_step()
            profiled += base.profiled_steps(s, 1)
            prof.step()
    return prof, profiled[warm:]


def kernels_of(s: dict[str, Any], steps: int) -> tuple[list[dict[str, Any]], list[float], str]:
    import torch

    model = s["model"]
    stack: list[Any] = []
    calls: dict[str, int] = {}
    relus = relus_per_block([name for name, _ in model.named_modules()])

    def enter(name: str) -> Callable[..., None]:
        def hook(module: Any, args: Any) -> None:
            call = calls.get(name, 0)
            calls[name] = call + 1
            layer = keras_layer(name, call, relus) if name else OUTSIDE
            stack.append(torch.profiler.record_function(f"layer:{layer or OUTSIDE}"))
            stack[-1].__enter__()
        return hook

    def leave(module: Any, args: Any, out: Any) -> None:
        stack.pop().__exit__(None, None, None)

    handles = [h for name, m in model.named_modules()
               for h in (m.register_forward_pre_hook(enter(name)), m.register_forward_hook(leave))]
    prof, times = profiled(s, steps, before_step=calls.clear)
    for h in handles:
        h.remove()
    ms: dict[tuple[str, str], list[float]] = {}
    kernels: dict[tuple[str, str], set[str]] = {}
    events = prof.events()
    marks = sorted((e.time_range.start, e.time_range.end) for e in events if e.name.startswith("ProfilerStep"))
    stepped = len(marks) == steps  # each event's time in its step, where the profiler marked every step

    def add(key: tuple[str, str], e: Any, t: float) -> None:
        series = ms.setdefault(key, [0.0] * (steps if stepped else 1))
        at = next((i for i, (a, b) in enumerate(marks) if a <= e.time_range.start <= b), 0) if stepped else 0
        series[at] += t

    for e in events:
        if not e.name.startswith("layer:"):
            continue
        ranges = [c for c in e.cpu_children if c.name.startswith("layer:")]
        own = (e.cpu_time_total - sum(c.cpu_time_total for c in ranges)) / 1e3
        key = (e.name[len("layer:"):], "forward")
        add(key, e, own)
        kernels.setdefault(key, set()).update(c.name for c in e.cpu_children if not c.name.startswith("layer:"))
    # a training step's backward: autograd runs each forward op's backward function, which carries that op's
    # sequence number; the forward op's enclosing range names the layer (one kernel for both gradients here)
    layer_of = {}
    for e in events:
        if e.name.startswith("layer:") or getattr(e, "sequence_nr", -1) < 0:
            continue
        up = e.cpu_parent
        while up is not None and not up.name.startswith("layer:"):
            up = up.cpu_parent
        if up is not None:
            layer_of.setdefault(e.sequence_nr, up.name[len("layer:"):])
    for e in events:
        if e.name.startswith(BACKWARD):
            key = (layer_of.get(e.sequence_nr, OUTSIDE), "backward")
            add(key, e, e.cpu_time_total / 1e3)
            kernels.setdefault(key, set()).add(e.name[len(BACKWARD):])
    out = [{"name": "+".join(sorted(kernels[key])) or key[0], "ms": sum(t), "pass": kind if key[0] != OUTSIDE else
            "other", "layers": [] if key[0] == OUTSIDE else [key[0]], **({"steps_ms": t} if stepped else {})}
           for key, t in ms.items() for kind in [key[1]]]
    return out, times, "torch.profiler, one range per module call (forward hooks; backward by autograd's " \
        "sequence numbers), eager"


def row_fields(mode: str) -> dict[str, Any]:
    """Native PyTorch's row: inference as 03's served row, eager; training, 03's native training step."""
    from resnet_lab.bench.sections import served

    return {"backend": "torch", "impl": "native"} if mode == "train" else {**served("native PyTorch"), "xla": "off"}


def profile(request: dict[str, Any]) -> dict[str, Any]:
    s, steps, step_ms = base.framework_setup(request)
    kernels, times, method = kernels_of(s, steps)
    return base.reply(step_ms, times, kernels, steps, method)
