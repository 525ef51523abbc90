"""Notebook 03's plan (every section's configurations, from its parameters) and its record (results.json)."""

from __future__ import annotations

import pytest
from helpers import ROOT

from resnet_lab.bench import plan
from resnet_lab.bench.config import BenchConfig, compiler_name, config_key, validate
from resnet_lab.bench.identity import match_key
from resnet_lab.bench.sections import KNOB_LABEL, NATIVE_EAGER, OFFLINE, SINGLE_STREAM, TF_LABEL, XLA_JIT_2017
from resnet_lab.bench.timing import DEFAULT as timing_default
from resnet_lab.bench.timing import Timing
from resnet_lab.core.choices import TORCH_COMPILE_BACKEND_ENV
from resnet_lab.core.errors import UsageError
from resnet_lab.workbook import notebooks, runner


def _params(params_file: str) -> dict:
    """03's parameters as the runner resolves them from ``params_file`` (the cell's defaults under it)."""
    run = runner.load_plan(ROOT / "params" / params_file, ROOT / "notebooks", only=["03_benchmarks"])
    return run.resolved["03_benchmarks"]


# -------------------------------------------------------------------------------------------------- plan
@pytest.mark.parametrize("params_file", ["default.yaml", "quick.yaml"])
def test_the_plan_of_each_params_file(params_file):
    p = _params(params_file)
    pl = plan.plan(p)
    assert list(pl.sections) == list(plan.SECTIONS)
    for name, cfgs in pl.sections.items():
        assert cfgs, name
        assert all(validate(c) is c for c in cfgs), name
    # one timing: the notebook's warmup and timeout everywhere, its steps and time budget by section
    t = pl.timing
    everything = [c for cfgs in pl.sections.values() for c in cfgs] + [pl.scale_out]
    assert {c.timeout_s for c in everything} == {t.timeout_s}
    quoted = {match_key(c) for c in pl.versus}
    assert {c.warmup for c in everything if not c.label.startswith((SINGLE_STREAM, KNOB_LABEL))
            and match_key(c) not in quoted} == {t.warmup}
    assert {c.steps for c in pl.table_2017} == {p["steps_2017"] or t.steps}
    # the quoted rows (TF vs native PyTorch): versus_repeats processes of versus_steps steps, no time budget;
    # the sweep's fused batch-norm rows are the versus section's TF rows, timed as those and measured once
    assert {(c.repeats, c.steps, c.min_time_s, c.warmup) for c in pl.versus} == {
        (p["versus_repeats"], p["versus_steps"], 0.0, t.warmup if p["versus_warmup"] is None else p["versus_warmup"])}
    shared = [c for c in pl.sweeps if match_key(c) in quoted]
    assert {(c.label, c.precision) for c in shared} == {("fused BN", q) for q in p["sweep_fused_bn"]}
    assert all(config_key(c) in {config_key(v) for v in pl.versus} for c in shared)
    budget = [*pl.table_2017, *(c for c in pl.sweeps if c not in shared), *pl.backends,
              *(c for c in pl.mlperf if c.label.startswith(OFFLINE)), pl.scale_out]
    assert {(c.min_time_s, c.max_time_s) for c in budget} == {(t.min_time_s, t.max_time_s)}
    assert {c.steps for c in budget if c not in pl.table_2017} == {t.steps}
    assert {c.repeats for c in budget} == {t.repeats}
    # the two that adapt it: the profile counts steps, SingleStream times every query
    (prof,) = pl.profile
    assert (prof.steps, prof.min_time_s, prof.max_time_s) == (p["profile_steps"], 0.0, t.max_time_s)
    assert prof.onednn_profile and prof.fused_bn == p["profile_fused_bn"]
    single = [c for c in pl.mlperf if c.label.startswith(SINGLE_STREAM)]
    assert {(c.steps, c.min_time_s, c.batch_size) for c in single} == {(p["mlperf_queries"], 0.0, 1)}
    assert all(c.warmup >= 10 and c.max_time_s >= 600 for c in single)
    # the knob sweep: batch-1 queries; its documented configurations are the SingleStream rows, measured once
    assert all(c.warmup >= 10 and c.batch_size == 1 and c.precision == "fp32" for c in pl.knobs)
    singles = {config_key(c) for c in [*pl.mlperf, *pl.engines] if c.batch_size == 1}
    documented = [c for c in pl.knobs if "documented" in c.label]
    assert documented and all(config_key(c) in singles for c in documented)
    assert {c.precision for c in [*pl.mlperf, *pl.engines]} == set(p["serve_precisions"])
    # the sections' shapes
    assert {c.model for c in pl.table_2017} == {p["model_2017"]}
    assert {c.model for c in everything if c not in pl.table_2017} == {p["model"]}
    assert [c.label for c in pl.table_2017][:3] == ["CPU", "CPU MKL", "XLA CPU"]
    assert (XLA_JIT_2017 in [c.label for c in pl.table_2017]) == (XLA_JIT_2017 not in p["skip_2017"])
    assert {c.mode for c in pl.backends} == set(p["backend_modes"])
    assert {c.precision for c in pl.versus} == set(p["native_precisions"])
    assert pl.scale_out.peer_timeout_s == p["peer_timeout_s"]
    # torch.compile's backend: only its rows carry it, and their compiler says which ran
    every = plan.plan({**p, "backend_skip": []})  # default.yaml skips the Keras torch.compile row
    compiled = [c for c in [*every.backends, *every.versus, *every.mlperf, *every.knobs]
                if c.backend == "torch" and c.xla == "jit"]
    assert compiled and all(c.env.get(TORCH_COMPILE_BACKEND_ENV, "inductor") == p["torch_compile_backend"]
                            for c in compiled)
    assert all(TORCH_COMPILE_BACKEND_ENV not in c.env for c in everything if c not in compiled)
    assert all(("TorchInductor" in compiler_name(c)) == (p["torch_compile_backend"] == "inductor") for c in compiled)
    notebooks.check("03_benchmarks", p)  # the runner's check is this plan


# What the report runs measured with before the timing default became bench.timing's one (03's cell had warmup 1,
# min 5 s, max 120 s, timeout 900 s, one process; `resnet-lab bench` and BenchConfig warmup 2): the same settings.
REPORT_TIMING = {
    "default.yaml": (Timing(steps=3, warmup=1, min_time_s=3.0, max_time_s=120.0, timeout_s=900.0, repeats=1), 2),
    "quick.yaml": (Timing(steps=2, warmup=1, min_time_s=0.0, max_time_s=120.0, timeout_s=300.0, repeats=1), 2),
}


@pytest.mark.parametrize("params_file", sorted(REPORT_TIMING))
def test_the_report_runs_keep_their_timing_and_a_parameter_left_none_is_the_bench_default(params_file):
    p = _params(params_file)
    timing, steps_2017 = REPORT_TIMING[params_file]
    pl = plan.plan(p)
    assert pl.timing == timing and pl.timing_2017 == timing.replace(steps=steps_2017)
    names = ("sweep_steps", "warmup", "min_time_s", "max_time_s", "timeout_s", "repeats", "steps_2017")
    unset = plan.plan({**p, **dict.fromkeys(names)})
    assert unset.timing == unset.timing_2017 == timing_default
    assert timing_default == Timing() and BenchConfig().warmup == timing_default.warmup  # one default
    assert plan.plan({**p, "warmup": 0}).timing.warmup == 0  # the notebook may override a value


def test_an_unknown_torch_compile_backend_is_one_line():
    with pytest.raises(UsageError, match="torch_compile_backend: 'cudagraphs' is not one of: inductor, aot_eager"):
        plan.plan({**_params("quick.yaml"), "torch_compile_backend": "cudagraphs"})


def test_repeats_reach_every_row_but_the_profile_and_the_cluster_and_sections_choose_what_runs():
    p = _params("quick.yaml")
    assert plan.plan(p).timing.repeats == 1 and list(p["sections"]) == list(plan.SECTIONS)  # the report: 1 process
    assert _params("default.yaml")["versus_repeats"] >= 3  # ... but the quoted rows, in the main job
    pl = plan.plan({**p, "repeats": 3, "versus_repeats": 4})
    assert pl.timing.repeats == 3 and pl.timing_2017.repeats == 3 and pl.timing_versus.repeats == 4
    quoted = {config_key(c) for c in pl.versus}
    rows = [c for name, cfgs in pl.sections.items() if name != "profile" for c in cfgs]
    assert {c.repeats for c in rows if config_key(c) not in quoted} == {3}
    assert {c.repeats for c in rows if config_key(c) in quoted} == {4}
    assert [c.repeats for c in pl.profile] == [1] and pl.scale_out.repeats == 1
    only = plan.plan({**p, "sections": ["versus", "mlperf"]})
    assert [name for name, cfgs in only.sections.items() if cfgs] == ["versus", "mlperf"]
    assert [c.label for c in only.versus] == [c.label for c in pl.versus]
    with pytest.raises(UsageError, match="sections: 'gpu' is not one of"):
        plan.plan({**p, "sections": ["gpu"]})
    with pytest.raises(UsageError, match="repeats: 0 is not an integer >= 1"):
        plan.plan({**p, "repeats": 0})


def test_the_gate_runs_the_headline_rows_in_many_processes():
    p = _params("gate.yaml")
    pl = plan.plan(p)
    assert [name for name, cfgs in pl.sections.items() if cfgs] == ["versus"]
    assert {c.repeats for c in pl.versus} == {p["versus_repeats"]} and p["versus_repeats"] >= 3
    # every row report.native.TARGETS divides, and the bf16 row README's answers quote
    assert {(c.label, c.precision) for c in pl.versus} == {
        (TF_LABEL, "fp32"), (TF_LABEL, "bf16"), (NATIVE_EAGER, "fp32"), (NATIVE_EAGER, "bf16")}
    notebooks.check("03_benchmarks", p)
    run = runner.load_plan(ROOT / "params" / "gate.yaml", ROOT / "notebooks")
    assert sorted(run.resolved) == ["03_benchmarks", "05_compare"] and run.resolved["05_compare"]["threshold_pct"] == 10


def test_the_plan_takes_a_notebooks_globals_and_says_what_is_missing():
    p = _params("quick.yaml")
    names = {**p, "plt": object(), "__name__": "__main__"}  # a notebook's globals: more than parameters
    assert plan.plan(names).sections == plan.plan(p).sections
    assert plan.plan({**p, "profile": False}).profile == []
    with pytest.raises(UsageError, match="parameters lack sweep_steps, profile"):
        plan.plan({k: v for k, v in p.items() if k not in ("sweep_steps", "profile")})


@pytest.mark.parametrize(("change", "message"), [
    ({"sweep_steps": 0}, "sweep_steps: 0 is not an integer >= 1"),
    ({"steps_2017": 0}, "steps: 0 is not an integer >= 1"),
    ({"min_time_s": 50.0, "max_time_s": 10.0}, "max time: 10 s is below the min time"),
    ({"sweep_threads": [[1]]}, r"threads: \[1\] is not an \[intra-op, inter-op\] pair"),
    ({"sweep_threads": [[1, 0]]}, "inter-op threads: 0 is not an integer >= 1"),
    ({"sweep_batch_sizes": [2.5]}, "batch size: 2.5 is not an integer >= 1"),
    ({"sweep_precisions": ["fp8"]}, "sweep_precisions: 'fp8' is not one of"),
    ({"backend_modes": ["serve"]}, "backend_modes: 'serve' is not one of"),
    ({"local_workers": -1}, "local_workers: -1 is not an integer >= 0"),
    ({"versus_repeats": 0}, "versus_repeats: 0 is not an integer >= 1"),
    ({"versus_steps": 1.5}, "versus_steps: 1.5 is not an integer >= 1"),
    ({"skip_2017": ["GPU 9"]}, "skip_2017: 'GPU 9' is not one of"),
    ({"peer_timeout_s": 0}, "peer"),
])
def test_a_bad_value_is_one_line_before_anything_runs(change, message):
    p = {**_params("quick.yaml"), **change}
    with pytest.raises(UsageError, match=message):
        plan.plan(p)
    with pytest.raises(UsageError, match=message):
        notebooks.check("03_benchmarks", p)
