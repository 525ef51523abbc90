"""What notebook 03 measures, from its parameters: every section's configurations, built in one place.

:func:`plan` turns 03's parameters (its cell's names) into a :class:`Plan`: the 2017 rows, the sweeps, the
backends, TensorFlow against native PyTorch, the MLPerf scenarios, the profiled row and the scale-out row,
each built by its section's builder with one :class:`~resnet_lab.bench.timing.Timing` (its ``repeats``: the
fresh processes of every row but the profiled and the scale-out one), except the rows the summary quotes: TF
(fused BN) against native PyTorch run with their own timing (``versus_repeats`` processes of ``versus_steps``
steps, ``Plan.timing_versus``), and the sweep's rows of the same configuration share it, measured once.
``sections`` leaves the others empty (the gate runs the headline rows only, ``params/gate.yaml``). The
notebook calls it once and runs the sections; the runner's parameter check (:mod:`resnet_lab.workbook.notebooks`)
calls the same function, so what is checked before a run starts is exactly what the notebook will run. Plain
Python: building and checking every configuration imports no framework and takes milliseconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from resnet_lab.bench import sections
from resnet_lab.bench.config import BenchConfig, validate
from resnet_lab.bench.identity import match_key
from resnet_lab.bench.timing import Timing
from resnet_lab.core.choices import ENGINES, KERAS_BACKENDS, MODES, PRECISIONS, check_bool, check_choices, check_int
from resnet_lab.core.errors import UsageError

__all__ = ["PARAMETERS", "SECTIONS", "Plan", "Timing", "plan"]

# The names of 03's parameters cell that shape its configurations (the others: where outputs and peaks
# live, and which cluster this host joins, are read where they are used).
PARAMETERS = (
    "model", "model_2017", "image_size", "batch_size", "steps_2017", "sweep_steps", "warmup", "min_time_s",
    "max_time_s", "timeout_s", "sweep_batch_sizes", "sweep_precisions", "sweep_threads", "sweep_fused_bn",
    "backends", "backend_modes", "backend_skip", "torch_compile_backend", "native_precisions", "native_compile",
    "mlperf_queries", "offline_batch_sizes", "profile", "profile_steps", "profile_fused_bn", "local_workers",
    "peer_timeout_s", "repeats", "sections", "engines", "engine_queries", "engine_offline_batch_sizes",
    "engine_skip", "skip_2017", "versus_repeats", "versus_steps", "versus_warmup", "serve_precisions", "knob_queries",
    "knob_skip",
)
# The sections that run as benchmark matrices, in the notebook's order (the scale-out row runs on its own).
SECTIONS = ("table_2017", "sweeps", "backends", "versus", "mlperf", "engines", "knobs", "profile")


@dataclass(frozen=True)
class Plan:
    """Notebook 03's configurations, section by section (each list validated, in the order it runs)."""

    timing_2017: Timing            # the 2017 rows (steps_2017)
    timing: Timing                 # every other section (sweep_steps); the profile and SingleStream adapt it
    timing_versus: Timing          # TF against native PyTorch: the rows the summary and the targets quote
    table_2017: list[BenchConfig]  # the 2017 table's rows on this host, plus XLA jit on CPU
    sweeps: list[BenchConfig]      # batch, precision, threads, fused batch norm around the base row
    backends: list[BenchConfig]    # one Keras model on TensorFlow, JAX and PyTorch, compiler off and on
    versus: list[BenchConfig]      # TensorFlow (fused BN) against native PyTorch
    mlperf: list[BenchConfig]      # SingleStream and Offline inference
    engines: list[BenchConfig]     # the same scenarios on the other compilers (IREE, ONNX Runtime, OpenVINO)
    knobs: list[BenchConfig]       # each engine's documented configuration and its alternatives, batch 1
    profile: list[BenchConfig]     # the ONEDNN_VERBOSE row, or none
    scale_out: BenchConfig         # the multi-worker row's configuration (local_cluster.scale_out adds workers)


    @property
    def sections(self) -> dict[str, list[BenchConfig]]:
        """The benchmark matrices by name (:data:`SECTIONS`), in the notebook's order."""
        return {name: getattr(self, name) for name in SECTIONS}


def plan(params: Mapping[str, Any]) -> Plan:
    """Every configuration notebook 03 runs with ``params`` (its parameters by name; other names are
    ignored, so the notebook passes ``globals()``). A value that cannot run raises UsageError, one line."""
    missing = [name for name in PARAMETERS if name not in params]
    if missing:
        raise UsageError(f"notebook 03's parameters lack {', '.join(missing)}")
    p = {name: params[name] for name in PARAMETERS}
    check_int("sweep_steps", p["sweep_steps"], 1, optional=True)
    check_int("profile_steps", p["profile_steps"], 1)
    check_choices("sweep_precisions", p["sweep_precisions"], PRECISIONS)
    check_choices("sweep_fused_bn", p["sweep_fused_bn"], PRECISIONS)
    check_choices("backends", p["backends"], KERAS_BACKENDS)
    check_choices("engines", p["engines"], ENGINES)
    check_choices("backend_modes", p["backend_modes"], MODES)
    check_bool("profile", p["profile"])
    check_int("local_workers", p["local_workers"], 0)
    check_int("versus_repeats", p["versus_repeats"], 1)
    check_int("versus_steps", p["versus_steps"], 1)
    check_int("versus_warmup", p["versus_warmup"], 0, optional=True)
    chosen = check_choices("sections", p["sections"], SECTIONS)
    # the bench's one timing default (bench.timing.DEFAULT) with the values 03 sets over it (None: not set)
    timing = Timing.of(steps=p["sweep_steps"], warmup=p["warmup"], min_time_s=p["min_time_s"],
                       max_time_s=p["max_time_s"], timeout_s=p["timeout_s"], repeats=p["repeats"])
    timing_2017 = timing.replace(steps=timing.steps if p["steps_2017"] is None else p["steps_2017"])
    # The quoted rows: their speed moves more between processes than within one (sd ~9-12 % against ~4 % a
    # step), so they are timed in versus_repeats processes of versus_steps steps each, no time budget.
    # versus_warmup (None: warmup) sets their untimed steps after the compiling one.
    timing_versus = timing.replace(repeats=p["versus_repeats"], steps=p["versus_steps"], min_time_s=0.0,
                                   warmup=timing.warmup if p["versus_warmup"] is None else p["versus_warmup"])
    shape = {"model": p["model"], "image_size": p["image_size"], "batch_size": p["batch_size"]}
    # built first: a size `model` cannot take is reported against it, the notebook's subject, not model_2017.
    # The workers time a count of steps (they must agree on it); the time budget is the one-worker baseline's.
    # One run of the cluster: its workers are the processes (repeats is for one-process rows).
    scale_out = validate(BenchConfig(**shape, **timing.replace(repeats=1).fields(),
                                     peer_timeout_s=p["peer_timeout_s"]))
    versus = sections.versus_configs(**shape, precisions=p["native_precisions"], compile=p["native_compile"],
                                     torch_compile_backend=p["torch_compile_backend"], timing=timing_versus)
    check_choices("serve_precisions", p["serve_precisions"], ("fp32", "bf16"))
    mlperf = sections.mlperf_configs(model=p["model"], image_size=p["image_size"], queries=p["mlperf_queries"],
                                     offline_batch_sizes=p["offline_batch_sizes"], precisions=p["serve_precisions"],
                                     torch_compile_backend=p["torch_compile_backend"], timing=timing)
    engines = sections.engine_configs(model=p["model"], image_size=p["image_size"], engines=p["engines"],
                                      queries=p["engine_queries"], offline_batch_sizes=p["engine_offline_batch_sizes"],
                                      skip=p["engine_skip"], precisions=p["serve_precisions"], timing=timing)
    built = Plan(
        timing_2017=timing_2017,
        timing=timing,
        timing_versus=timing_versus,
        table_2017=sections.configs_2017_today(model=p["model_2017"], image_size=p["image_size"],
                                               batch_size=p["batch_size"], skip=p["skip_2017"], timing=timing_2017),
        sweeps=_timed_as(sections.sweep_configs(**shape, batch_sizes=p["sweep_batch_sizes"],
                                                precisions=p["sweep_precisions"], threads=p["sweep_threads"],
                                                fused_bn=p["sweep_fused_bn"], timing=timing), versus),
        backends=sections.backend_configs(**shape, backends=p["backends"], modes=p["backend_modes"],
                                          skip=p["backend_skip"], torch_compile_backend=p["torch_compile_backend"],
                                          timing=timing),
        versus=versus,
        mlperf=mlperf,
        engines=engines,
        # the documented configurations are the SingleStream rows: timed as those, measured once
        knobs=_timed_as(sections.knob_configs(model=p["model"], image_size=p["image_size"], engines=p["engines"],
                                              queries=p["knob_queries"], skip=p["knob_skip"],
                                              torch_compile_backend=p["torch_compile_backend"], timing=timing),
                        [c for c in (*mlperf, *engines) if c.batch_size == 1]),
        profile=[sections.profile_config(**shape, fused_bn=p["profile_fused_bn"],
                                         timing=timing.replace(steps=p["profile_steps"]))]
        if p["profile"] else [],
        scale_out=scale_out,
    )
    # every section is built (and checked) whichever run: a bad value fails the same way in any selection
    return dataclasses.replace(built, **{name: [] for name in SECTIONS if name not in chosen})


def _timed_as(configs: list[BenchConfig], quoted: list[BenchConfig]) -> list[BenchConfig]:
    """``configs`` with the timing of the quoted row each one is (the sweep's fused batch-norm rows are the
    versus section's TensorFlow rows): measured once, in the quoted rows' processes, and shared."""
    timing_of = {match_key(q): {k: getattr(q, k) for k in Timing().fields()} for q in quoted}
    return [validate(dataclasses.replace(c, **timing_of[match_key(c)])) if match_key(c) in timing_of else c
            for c in configs]
