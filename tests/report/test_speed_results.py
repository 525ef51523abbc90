"""Notebook 03's results.json (report.speed_results): its keys, and figures only from rows with a speed."""

from __future__ import annotations

import json

import pytest
from helpers import ROOT

from resnet_lab.bench import plan
from resnet_lab.bench.config import BenchConfig
from resnet_lab.bench.sections import SINGLE_STREAM
from resnet_lab.core import artifacts
from resnet_lab.report import speed_results
from resnet_lab.report.speed_results import Key
from resnet_lab.workbook import runner, summary


def _params(params_file: str) -> dict:
    run = runner.load_plan(ROOT / "params" / params_file, ROOT / "notebooks", only=["03_benchmarks"])
    return run.resolved["03_benchmarks"]


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
        if c.label.startswith(SINGLE_STREAM):
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
    r = speed_results.results(model="tiny-resnet", peak=PEAK, **run)
    assert list(r) == [k.value for k in Key] and all(type(k) is str for k in r)
    # a short row timed fewer steps than asked, all real: its figure is recorded beside its status
    assert r[Key.STATUSES_2017]["CPU MKL"] == "short" and r[Key.IMAGES_PER_SEC_2017]["CPU MKL"] == 3.0
    assert r[Key.IMAGES_PER_SEC_2017]["XLA CPU"] is None  # NaN: not a figure
    assert r[Key.IMAGES_PER_SEC_2017]["CPU"] == 10.0 and r[Key.IMAGES_PER_SEC_2017]["GPU"] is None
    last = run["backends"][-1]
    assert r[Key.STATUSES_BACKENDS][f"{last['label']} {last['mode']}"] == "error"
    assert r[Key.IMAGES_PER_SEC_BACKENDS][f"{last['label']} {last['mode']}"] is None
    assert r[Key.IMAGES_PER_SEC_NATIVE] == {"TensorFlow (Keras model, fused BN) fp32": 8.0,
                                            "native PyTorch eager fp32": 4.0}
    assert r[Key.TARGETS][0]["ratio"] == pytest.approx(2.0) and r[Key.TARGETS][1]["ratio"] is None
    assert r[Key.SINGLE_STREAM_P90_MS] == {"TensorFlow": pytest.approx(20.0), "native PyTorch": pytest.approx(20.0)}
    assert r[Key.OFFLINE_IMAGES_PER_SEC] == {"TensorFlow": 400.0, "native PyTorch": 400.0}
    assert r[Key.ROOFLINE_LOST_MS] == pytest.approx(9.0)  # 10 ms against 8 MB at 8 GB/s
    assert (r[Key.PROFILE_CONV_SHARE], r[Key.PROFILE_CONV_GFLOPS]) == (0.6, 50.0)
    assert (r[Key.MULTIWORKER_STATUS], r[Key.MULTIWORKER_IMAGES_PER_SEC], r[Key.SCALING_EFFICIENCY]) == (
        "ok", 30.0, 0.8)
    assert r[Key.PEAK_GFLOPS] == {"fp32": 100.0}
    # the headline: the best row overall is a sweep's; failed and skipped rows are counted as such
    assert r[Key.BEST_IMAGES_PER_SEC] == max(row["images_per_sec"] for row in run["sweeps"])
    assert r[Key.N_SKIPPED] == 4 and r[Key.N_FAILED] == 2  # the error row and the NaN one
    # what the runner's summary reads, after the JSON round trip
    artifacts.save_results(tmp_path, **r)
    text = summary.summarize("03_benchmarks", json.loads((tmp_path / artifacts.RESULTS_FILE).read_text()))
    assert "XLA CPU" not in text.split("The 2017 rows here")[1].split("img/s")[0]
    assert "SingleStream p90 latency, TensorFlow: 20.0 ms." in text and "lose 9.0 ms per step" in text
    assert "Scale-out: 30.0 img/s, scaling efficiency 0.80." in text


def test_the_record_of_a_run_with_nothing_measured():
    r = speed_results.results(model="resnet50", peak=None, table_2017=[], sweeps=[], backends=[], versus=[], mlperf=[],
                       profile=[], multiworker=[])
    assert list(r) == [k.value for k in Key]
    assert r[Key.N_ROWS] == 0 and r[Key.BEST_CONFIG] is None and r[Key.PEAK_GFLOPS] is None
    assert r[Key.ROOFLINE_LOST_MS] is None and r[Key.MULTIWORKER_STATUS] is None
    assert all(t["ratio"] is None for t in r[Key.TARGETS])
