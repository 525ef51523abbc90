"""Notebook 03's plan (every section's configurations, from its parameters) and its record (results.json)."""

from __future__ import annotations

import json
import math

import pytest
from helpers import ROOT

from resnet_lab.bench import analysis, native, plan, record
from resnet_lab.bench.config import BenchConfig, validate
from resnet_lab.bench.record import Key
from resnet_lab.core import artifacts
from resnet_lab.core.errors import UsageError
from resnet_lab.workbook import checks, runner, summary


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
    everything = [c for cfgs in pl.sections.values() for c in cfgs] + [pl.scale_out]
    assert {c.timeout_s for c in everything} == {p["timeout_s"]}
    assert {c.warmup for c in everything if not c.label.startswith(native.SINGLE_STREAM)} == {p["warmup"]}
    assert {c.steps for c in pl.table_2017} == {p["steps_2017"]}
    budget = [*pl.table_2017, *pl.sweeps, *pl.backends, *pl.versus,
              *(c for c in pl.mlperf if c.label.startswith(native.OFFLINE)), pl.scale_out]
    assert {(c.min_time_s, c.max_time_s) for c in budget} == {(p["min_time_s"], p["max_time_s"])}
    assert {c.steps for c in budget if c not in pl.table_2017} == {p["sweep_steps"]}
    # the two that adapt it: the profile counts steps, SingleStream times every query
    (prof,) = pl.profile
    assert (prof.steps, prof.min_time_s, prof.max_time_s) == (p["profile_steps"], 0.0, p["max_time_s"])
    assert prof.onednn_profile and prof.fused_bn == p["profile_fused_bn"]
    single = [c for c in pl.mlperf if c.label.startswith(native.SINGLE_STREAM)]
    assert {(c.steps, c.min_time_s, c.batch_size) for c in single} == {(p["mlperf_queries"], 0.0, 1)}
    assert all(c.warmup >= 10 and c.max_time_s >= 600 for c in single)
    # the sections' shapes
    assert {c.model for c in pl.table_2017} == {p["model_2017"]}
    assert {c.model for c in everything if c not in pl.table_2017} == {p["model"]}
    assert [c.label for c in pl.table_2017][:4] == ["CPU", "CPU MKL", "XLA CPU", "XLA jit CPU (new)"]
    assert {c.mode for c in pl.backends} == set(p["backend_modes"])
    assert {c.precision for c in pl.versus} == set(p["native_precisions"])
    assert pl.scale_out.peer_timeout_s == p["peer_timeout_s"]
    checks.check("03_benchmarks", p)  # the runner's check is this plan


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
    ({"peer_timeout_s": 0}, "peer"),
])
def test_a_bad_value_is_one_line_before_anything_runs(change, message):
    p = {**_params("quick.yaml"), **change}
    with pytest.raises(UsageError, match=message):
        plan.plan(p)
    with pytest.raises(UsageError, match=message):
        checks.check("03_benchmarks", p)


# ------------------------------------------------------------------------------------------------ record
def _row(cfg: BenchConfig, ips: float | None, status: str = "ok", **extra) -> dict:
    return {**cfg.to_dict(), "status": status, "images_per_sec": ips, "mfu": None, "cpu_util": None, **extra}


def _measured_run():
    """Rows of every section of the quick plan, as if run: one of each way a row can fail to be measured."""
    pl = plan.plan(_params("quick.yaml"))
    t2017 = [_row(c, 10.0 + i) if c.device == "cpu" else _row(c, None, "skipped") for i, c in enumerate(pl.table_2017)]
    t2017[1] = _row(pl.table_2017[1], 3.0, "short")             # CPU MKL: cut short of its steps
    t2017[2] = _row(pl.table_2017[2], float("nan"))             # XLA CPU: ok, but no number
    sweeps = [_row(c, 20.0 + i) for i, c in enumerate(pl.sweeps)]
    backends = [_row(c, 5.0) for c in pl.backends]
    backends[-1] = _row(pl.backends[-1], None, "error")
    versus = [_row(c, 8.0 if c.backend == "tensorflow" else 4.0) for c in pl.versus]
    mlperf = []
    for c in pl.mlperf:
        if c.label.startswith(native.SINGLE_STREAM):
            tf = c.backend == "tensorflow"
            mlperf.append(_row(c, 50.0, "ok" if tf else "short", step_time_p90=0.02))  # PyTorch's is short
        else:
            mlperf.append(_row(c, 100.0 * c.batch_size))
    primitives = [{"kind": "reorder", "prop": "undef", "desc": "1000x1000", "src_dt": "f32", "dst_dt": "f32",
                   "calls_per_step": 1, "ms_per_step": 10.0}]
    profile = [_row(pl.profile[0], 2.0, conv_share=0.6, conv_gflops=50.0,
                    onednn_profile=json.dumps({"primitives": primitives}))]
    mw = [_row(pl.scale_out, 30.0, scaling_efficiency=0.8)]
    return {"table_2017": t2017, "sweeps": sweeps, "backends": backends, "versus": versus, "mlperf": mlperf,
            "profile": profile, "multiworker": mw}


PEAK = {"peak_gflops": {"fp32": 100.0}, "bandwidth_gbps": 8.0}


def test_the_record_has_every_key_and_figures_of_measured_rows_only(tmp_path):
    run = _measured_run()
    r = record.results(model="tiny-resnet", peak=PEAK, **run)
    assert list(r) == [k.value for k in Key] and all(type(k) is str for k in r)
    assert r[Key.STATUSES_2017]["CPU MKL"] == "short" and r[Key.IMAGES_PER_SEC_2017]["CPU MKL"] is None
    assert r[Key.IMAGES_PER_SEC_2017]["XLA CPU"] is None  # NaN: not a figure
    assert r[Key.IMAGES_PER_SEC_2017]["CPU"] == 10.0 and r[Key.IMAGES_PER_SEC_2017]["GPU"] is None
    last = run["backends"][-1]
    assert r[Key.STATUSES_BACKENDS][f"{last['label']} {last['mode']}"] == "error"
    assert r[Key.IMAGES_PER_SEC_BACKENDS][f"{last['label']} {last['mode']}"] is None
    assert r[Key.IMAGES_PER_SEC_NATIVE] == {"TensorFlow (Keras model, fused BN) fp32": 8.0,
                                            "native PyTorch eager fp32": 4.0}
    assert r[Key.TARGETS][0]["ratio"] == pytest.approx(2.0) and r[Key.TARGETS][1]["ratio"] is None
    assert r[Key.SINGLE_STREAM_P90_MS] == {"TensorFlow": pytest.approx(20.0)}  # the short one left out
    assert r[Key.OFFLINE_IMAGES_PER_SEC] == {"TensorFlow": 400.0, "native PyTorch": 400.0}
    assert r[Key.ROOFLINE_LOST_MS] == pytest.approx(9.0)  # 10 ms against 8 MB at 8 GB/s
    assert (r[Key.PROFILE_CONV_SHARE], r[Key.PROFILE_CONV_GFLOPS]) == (0.6, 50.0)
    assert (r[Key.MULTIWORKER_STATUS], r[Key.MULTIWORKER_IMAGES_PER_SEC], r[Key.SCALING_EFFICIENCY]) == (
        "ok", 30.0, 0.8)
    assert r[Key.PEAK_GFLOPS] == {"fp32": 100.0}
    # the headline: the best row overall is a sweep's; failed, skipped and short rows are counted as such
    assert r[Key.BEST_IMAGES_PER_SEC] == max(row["images_per_sec"] for row in run["sweeps"])
    assert r[Key.N_SKIPPED] == 4 and r[Key.N_FAILED] == 3  # the error row and the two short ones
    # what the runner's summary reads, after the JSON round trip
    artifacts.record(tmp_path, **r)
    text = summary.summarize("03_benchmarks", json.loads((tmp_path / artifacts.RESULTS_FILE).read_text()))
    assert "CPU MKL" not in text.split("The 2017 rows here")[1].split("img/s")[0]
    assert "SingleStream p90 latency, TensorFlow: 20.0 ms." in text and "lose 9.0 ms per step" in text
    assert "Scale-out: 30.0 img/s, scaling efficiency 0.80." in text


def test_the_record_of_a_run_with_nothing_measured():
    r = record.results(model="resnet50", peak=None, table_2017=[], sweeps=[], backends=[], versus=[], mlperf=[],
                       profile=[], multiworker=[])
    assert list(r) == [k.value for k in Key]
    assert r[Key.N_ROWS] == 0 and r[Key.BEST_CONFIG] is None and r[Key.PEAK_GFLOPS] is None
    assert r[Key.ROOFLINE_LOST_MS] is None and r[Key.MULTIWORKER_STATUS] is None
    assert all(t["ratio"] is None for t in r[Key.TARGETS])


def test_measured_is_one_rule():
    ok = {"status": "ok", "images_per_sec": 3.0}
    assert record.measured(ok) and record.measured({**ok, "onednn_profile": "{}"})
    for bad in ({**ok, "status": "short"}, {**ok, "images_per_sec": math.nan}, {**ok, "images_per_sec": None},
                {**ok, "images_per_sec": 0.0}, {"status": "error"}, {}):
        assert not record.measured(bad), bad
    # the headline's rule agrees, but for the profiled row it keeps out of "best"
    assert analysis._ok([ok]) and not analysis._ok([{**ok, "status": "short"}])
