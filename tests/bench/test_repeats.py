"""A configuration measured in several fresh processes: the knob, interleaved rounds, the one row they give."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import assert_usage_error

from resnet_lab.bench import config, identity, launcher
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig
from resnet_lab.core.errors import UsageError

STATIC = {"label": "x", "model": "tiny-resnet", "mode": "train", "batch_size": 8, "global_batch": 8,
          "image_size": 32, "precision": "fp32", "xla": "off", "onednn": "on", "backend": "tensorflow",
          "device": "cpu", "replicas": 1, "data_format": "channels_last", "available_cpus": 2}


def _process_row(cfg, times, **result):
    return bench_rows.make_row(cfg, {"status": "ok", "step_times": times, "forward_macs": 1e8, "timed_s": sum(times),
                                   "cpu_seconds": 1.5 * sum(times), "first_step_s": 2.0, "import_s": 3.0,
                                   **result}, None, {**STATIC, "loadavg_1m": result.pop("load", 0.5)})


# ------------------------------------------------------------------------------------------ the knob
@pytest.mark.parametrize(("change", "message"), [
    ({"repeats": 0}, "repeats: 0 is not an integer >= 1"),
    ({"repeats": 2.5}, "repeats: 2.5 is not an integer >= 1"),
    ({"repeats": 2, "onednn_profile": True}, "repeats > 1 with onednn_profile"),
    ({"repeats": 2, "workers": ["127.0.0.1:1", "127.0.0.1:2"], "task_index": 0}, "repeats > 1 with workers"),
])
def test_repeats_is_checked(change, message):
    with pytest.raises(UsageError, match=message):
        config.validate(BenchConfig(**change))


def test_repeats_is_protocol_not_identity():
    assert "repeats" in identity.PROTOCOL and "repeats" not in identity.IDENTITY
    one, three = BenchConfig(), BenchConfig(repeats=3)
    assert identity.match_key(one) == identity.match_key(three)  # the same measurement, compared
    assert config.config_key(one) != config.config_key(three)  # but one process does not stand in for three
    assert config.process_key(one) == config.process_key(three)
    spec = config.expand({"base": {"model": "tiny-resnet", "repeats": 3}, "sweep": {"batch_size": [2, 4]}})
    assert {c.repeats for c in spec} == {3}


def test_the_cli_takes_repeats_and_refuses_zero():
    assert_usage_error(["bench", "--model", "tiny-resnet", "--repeats", "0"], "repeats: 0 is not an integer >= 1")


# ------------------------------------------------------------------------------------------ the row
def test_processes_combine_into_one_row_with_the_interval_from_their_spread():
    cfg = BenchConfig(model="tiny-resnet", batch_size=8, steps=4, repeats=3)
    rng = np.random.default_rng(0)
    per = [list(m * (1 + 0.01 * rng.standard_normal(4))) for m in (0.10, 0.12, 0.11)]
    procs = [_process_row(cfg, t, load=load) for t, load in zip(per, (0.5, 2.5, 1.0), strict=True)]
    assert procs[0]["ci_method"] == "within one process"
    assert procs[0]["process_means"] == pytest.approx([np.mean(per[0])])
    row = bench_rows.combine(cfg, procs)
    assert row["status"] == "ok" and row["repeats"] == 3 and row["ci_method"] == "between processes (3)"
    assert row["process_means"] == pytest.approx([np.mean(t) for t in per])
    assert row["process_step_times"] == per and row["timed_steps"] == 12
    assert row["step_times"] == [t for times in per for t in times]
    geo = float(np.exp(np.mean(np.log([np.mean(t) for t in per]))))
    assert row["images_per_sec"] == pytest.approx(8 / geo)
    assert row["ci95_low"] < 8 / 0.12 < 8 / 0.10 < row["ci95_high"]  # the processes' spread, not their steps'
    assert row["var_between"] > row["var_within"] > 0
    assert row["first_step_s"] == 2.0 and row["timed_s"] == pytest.approx(np.mean([sum(t) for t in per]))
    assert row["loadavg_1m"] == 2.5 and row["cpu_util"] == pytest.approx(75.0)
    # written and read back: CSV columns, JSON lists
    csv_row = identity.read_row({k: ("" if v is None else str(v)) for k, v in row.items()
                                 if k in bench_rows.ROW_FIELDS})
    assert csv_row["repeats"] == 3 and csv_row["var_between"] == pytest.approx(row["var_between"])
    assert csv_row["ci_method"] == "between processes (3)"
    json_row = identity.read_row(json.loads(json.dumps(row)))
    assert json_row["process_step_times"] == per and json_row["process_means"] == pytest.approx(row["process_means"])
    assert "(3 processes)" in bench_rows.rows_to_table([row])


def test_a_process_that_measured_nothing_is_named_and_one_left_is_within_its_process():
    cfg = BenchConfig(model="tiny-resnet", batch_size=8, steps=4, repeats=3)
    ok = [_process_row(cfg, [0.1, 0.11, 0.1, 0.1]), _process_row(cfg, [0.12, 0.12, 0.13, 0.12])]
    lost = bench_rows.make_row(cfg, {"status": "timeout", "reason": "worker ran past 900 s"}, None, STATIC)
    row = bench_rows.combine(cfg, [*ok, lost])
    assert row["ci_method"] == "between processes (2)" and "process 3 timeout: worker ran past 900 s" in row["reason"]
    single = bench_rows.combine(cfg, [ok[0], lost])
    assert single["ci_method"] == "within one process" and "1 of 2 processes measured nothing" in single["reason"]
    assert bench_rows.combine(cfg, [lost])["status"] == "timeout"


# ------------------------------------------------------------------------------------------ the rounds
def _fake_group(calls, fail=()):
    def fake_group(cfgs, peak=None, log_dir=None, python=None, on_row=None):
        calls.append([c.label for c in cfgs])
        rows = []
        for k, cfg in enumerate(cfgs):
            n = sum(c == cfg.label for call in calls for c in call)
            if (cfg.label, n) in fail:
                row = bench_rows.make_row(cfg, {"status": "error", "reason": "boom"}, None,
                                        {**STATIC, "label": cfg.label})
            else:
                row = _process_row(cfg, [0.1 * n, 0.1 * n + 0.001], label=cfg.label)
                row["label"] = cfg.label
            rows.append(row)
            on_row(k, row)
        return rows
    return fake_group


def test_repeats_run_in_interleaved_rounds_one_fresh_process_each(monkeypatch, tmp_path):
    calls: list = []
    monkeypatch.setattr(launcher, "run_group", _fake_group(calls))
    cfgs = [BenchConfig(label="a", repeats=2), BenchConfig(label="b", xla="jit", repeats=3),
            BenchConfig(label="c", onednn="off", repeats=3)]
    rows = launcher.run_matrix(cfgs, out=tmp_path, progress=False, name="m")
    # a and b share a process key: one process a round; c its own; every round a new process
    assert calls == [["a", "b"], ["c"], ["a", "b"], ["c"], ["b"], ["c"]]
    assert [r["label"] for r in rows] == ["a", "b", "c"]
    assert [len(r["process_means"]) for r in rows] == [2, 3, 3]
    assert rows[1]["process_means"] == pytest.approx([0.1005, 0.2005, 0.3005])
    assert [r["label"] for r in json.loads((tmp_path / "m.json").read_text())] == ["a", "b", "c"]


def test_a_configuration_that_fails_is_not_repeated(monkeypatch):
    calls: list = []
    monkeypatch.setattr(launcher, "run_group", _fake_group(calls, fail={("a", 2)}))
    rows = launcher.run_matrix([BenchConfig(label="a", steps=2, repeats=4)], progress=False)
    assert calls == [["a"], ["a"]]
    (row,) = rows
    assert row["status"] == "ok" and row["ci_method"] == "within one process" and "process 2 error" in row["reason"]


def test_run_config_repeats_one_configuration(monkeypatch):
    calls: list = []
    monkeypatch.setattr(launcher, "run_group", _fake_group(calls))
    row = launcher.run_config(BenchConfig(label="a", repeats=3))
    assert calls == [["a"]] * 3 and row["ci_method"] == "between processes (3)"
