"""`resnet-lab history`: the headline speeds over made-up runs, one series per host kind, change points."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli

from resnet_lab.bench import identity
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig
from resnet_lab.report import history as view
from resnet_lab.runs import history

START = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def _row(label: str, speed: float, rng: np.random.Generator, **extra) -> dict:
    """A measured row: 20 steps of 32 images around 32 / speed seconds (2 % step-to-step jitter)."""
    cfg = BenchConfig(model="tiny-resnet", batch_size=32, steps=20, label=label, xla="jit" if "XLA" in label else "off")
    static = {"label": label, "model": cfg.model, "mode": cfg.mode, "batch_size": 32, "global_batch": 32,
              "image_size": 32, "precision": "fp32", "xla": cfg.xla, "onednn": "on", "backend": "tensorflow",
              "device": "cpu", "replicas": 1, "data_format": "channels_last"}
    times = list(rng.normal(32 / speed, 0.02 * 32 / speed, 20))
    row = bench_rows.make_row(cfg, {"status": "ok", "step_times": times, "forward_macs": 1e9}, None, static)
    return {**row, **extra}


def _run(outputs: Path, i: int, speeds: dict[str, float], seed: int, cpu: str = "Intel Xeon", **extra) -> Path:
    """Run i of a made-up history (a day apart, commit c<i>): its 03 rows (``extra``: columns each row gets),
    and the results.json that names the fastest row, as notebook 03's summary quotes it."""
    when = START + dt.timedelta(days=i)
    run = outputs / "runs" / f"{when:%Y%m%d-%H%M%S}-default"
    rng = np.random.default_rng(seed)
    rows = [_row(label, speed, rng, **extra) for label, speed in speeds.items()]
    (run / "03_benchmarks").mkdir(parents=True)
    bench_rows.save_rows(run / "03_benchmarks", rows, "bench_2017")
    best = max(rows, key=lambda r: r["images_per_sec"])
    (run / "03_benchmarks" / "results.json").write_text(json.dumps({
        "best_config": identity.describe(best), "best_images_per_sec": best["images_per_sec"],
        "images_per_sec_2017": {r["label"]: r["images_per_sec"] for r in rows}}))
    (run / "provenance.json").write_text(json.dumps({
        "run": run.name, "started_at": when.isoformat(), "git": {"commit": f"c{i:02d}{'0' * 38}"},
        "params": {"name": "default"}, "cpu": {"model": cpu, "available_cpus": 2, "logical_cpus": 2}, "gpus": []}))
    return run


def _series(outputs: Path, levels: list[float], seed: int, noise: float = 0.02, cpus: list[str] | None = None):
    rng = np.random.default_rng(seed)
    for i, level in enumerate(levels):
        _run(outputs, i, {"CPU MKL": level * (1 + rng.normal(0, noise)), "XLA CPU": 3.0}, seed * 100 + i,
             cpu=(cpus or ["Intel Xeon"] * len(levels))[i])


def _only(result: dict, label: str = "CPU MKL") -> dict:
    (config,) = [c for c in result["configurations"] if c["config"].startswith(label + " (")]
    return config


def test_a_planted_step_is_found_where_it_was_planted(tmp_path):
    outputs = tmp_path / "outputs"
    _series(outputs, [6.0] * 5 + [6.0 * 0.85] * 7, seed=1)  # -15 % from run 6 of 12, 2 % noise
    config = _only(history.history(outputs))
    (series,) = config["series"]
    assert series["runs"] == 12 and series["host_kind"] == "Intel Xeon, 2 CPUs"
    (change,) = series["change_points"]
    assert change["index"] == 5 and change["run"].startswith("20261206") and change["commit"].startswith("c05")
    assert change["after_commit"].startswith("c04") and -19 < change["step_pct"] < -11, change
    assert not change["tentative"] and change["runs_after"] == 7 and "tentative" not in view.describe_change(change)
    assert 1 < series["noise_pct"] < 4  # the run-to-run noise, recovered from the series itself
    assert "-1" in view.describe_change(change) and "commit c050000" in view.describe_change(change)
    assert all(p["ci95_low"] < p["images_per_sec"] < p["ci95_high"] for p in series["points"])


def test_a_step_in_the_last_runs_is_tentative_until_enough_runs_confirm_it(tmp_path):
    """Otava #150: a change point at a series' end moves or vanishes as runs arrive; shown as tentative until
    its new level has TENTATIVE_AFTER runs, then the same change point is confirmed."""
    rng = np.random.default_rng(7)
    flat = list(6.0 * (1 + rng.normal(0, 0.01, 8)))
    seen = []
    for after in range(history.MIN_SEGMENT, history.TENTATIVE_AFTER + 2):
        cp = history.change_points(flat + [6.0 * 0.8] * after)
        seen.append((cp["indices"], cp["tentative"]))
    assert seen == [([8], [True])] * (history.TENTATIVE_AFTER - history.MIN_SEGMENT) + [([8], [False])] * 2, seen
    outputs = tmp_path / "outputs"
    _series(outputs, [6.0] * 8 + [6.0 * 0.8] * 2, seed=8)
    (change,) = _only(history.history(outputs))["series"][0]["change_points"]
    assert change["index"] == 8 and change["tentative"] and change["runs_after"] == 2
    assert "tentative: 2 runs at the new level" in view.describe_change(change)


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_flat_noise_has_no_change_point(tmp_path, seed):
    outputs = tmp_path / "outputs"
    _series(outputs, [6.0] * 12, seed=seed)
    result = history.history(outputs)
    ours = [c for c in result["configurations"] if c["config"].startswith(("CPU MKL (", "XLA CPU ("))]
    assert [s["change_points"] for c in ours for s in c["series"]] == [[], []]
    assert not result["skipped"]


def test_two_host_kinds_are_two_series_and_the_switch_is_no_change_point(tmp_path):
    outputs = tmp_path / "outputs"
    cpus = ["Intel Xeon"] * 6 + ["AMD EPYC"] * 6  # the same code, a slower machine from run 7
    _series(outputs, [6.0] * 6 + [4.5] * 6, seed=5, cpus=cpus)
    config = _only(history.history(outputs))
    assert [(s["host_kind"], s["runs"], s["change_points"]) for s in config["series"]] == [
        ("Intel Xeon, 2 CPUs", 6, []), ("AMD EPYC, 2 CPUs", 6, [])]
    (switch,) = config["host_kind_changes"]
    assert (switch["from"], switch["to"]) == ("Intel Xeon, 2 CPUs", "AMD EPYC, 2 CPUs")
    assert switch["run"].startswith("20261207")
    # the same twelve numbers as one series would have a step: the host kind, not the code
    values = [p["images_per_sec"] for s in config["series"] for p in s["points"]]
    assert history.change_points(values)["indices"] == [6]


def test_a_broken_run_folder_is_skipped_and_named(tmp_path):
    outputs = tmp_path / "outputs"
    _series(outputs, [6.0] * 4, seed=6)
    broken = sorted((outputs / "runs").iterdir())[1]
    bench = broken / "03_benchmarks" / "bench_2017.csv"
    bench.write_text(bench.read_text()[:40])  # cut inside its header
    result = history.history(outputs)
    (skipped,) = result["skipped"]
    assert skipped["folder"] == str(broken) and str(bench) in skipped["reason"]
    assert _only(result)["series"][0]["runs"] == 3
    r = run_cli("history", str(outputs), "--format", "markdown", "--out", str(tmp_path / "h"))
    assert r.returncode == 0, r.stderr
    assert f"- skipped {broken}: " in r.stdout and "| CPU MKL" in r.stdout
    written = sorted(p.name for p in (tmp_path / "h").iterdir())
    assert written[-2:] == ["history.json", "history.md"] and written[0].startswith("history-01-")
    assert all(p.stat().st_size > 1000 for p in (tmp_path / "h").glob("*.png"))


def test_the_committed_record_adds_its_points_once_and_the_index_shows_the_history(tmp_path):
    from resnet_lab.workbook import runner

    outputs = tmp_path / "outputs"
    _series(outputs, [6.0] * 3, seed=7)
    # the committed record: a copy of run 2's rows (the same measurement: counted once) and an older row
    first = sorted((outputs / "runs").iterdir())[1]
    rows = json.loads((first / "03_benchmarks" / "bench_2017.json").read_text())
    older = {**_row("CPU MKL", 5.0, np.random.default_rng(9)), "started_at": "2026-11-20T10:00:00+00:00",
             "commit": "b" * 40}
    ref = outputs / "reference"
    ref.mkdir()
    (ref / "bench.csv").write_text(bench_rows.rows_to_csv([*rows, older]))
    (ref / "provenance.json").write_text((first / "provenance.json").read_text())
    config = _only(history.history(outputs))
    (series,) = config["series"]
    assert series["runs"] == 4 and series["points"][0]["commit"] == "b" * 40
    index = runner.write_index(outputs).read_text()
    assert "Speed history" in index and 'href="history/history-01-' in index and "Intel Xeon, 2 CPUs" in index
    assert (outputs / "history" / "history.json").exists()


def test_bad_outputs_and_out_are_one_line(tmp_path):
    from helpers import assert_usage_error

    assert_usage_error(["history", str(tmp_path / "nope")], "does not exist (a folder to read)")
    assert_usage_error(["history", str(tmp_path), "--format", "md"],
                       "--format: 'md' is not one of: table, json, markdown")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("earlier")
    assert_usage_error(["history", str(tmp_path), "--out", str(tmp_path / "full")], "is not an empty folder")


def test_each_process_is_plotted_in_images_per_sec(tmp_path):
    """A row's process_means is each process's mean step time in seconds: the history shows each process
    as images/sec (32 images a step / its seconds), on the axis of the runs' images/sec."""
    outputs = tmp_path / "outputs"
    seconds = [32 / (6.0 * 0.98), 32 / (6.0 * 1.02)]  # two processes: 5.88 and 6.12 images/sec
    for i in range(3):
        _run(outputs, i, {"CPU MKL": 6.0}, seed=20 + i, process_means=seconds)
    config = _only(history.history(outputs))
    (series,) = config["series"]
    for p in series["points"]:
        assert p["process_images_per_sec"] == pytest.approx([5.88, 6.12])
        assert 5.5 < p["images_per_sec"] < 6.5
    fig = view.figure(config)
    dots = [line for line in fig.axes[0].get_lines() if line.get_marker() == "."]
    assert len(dots) == 3  # one per run, each with its two processes
    assert sorted(float(y) for line in dots for y in line.get_ydata()) == pytest.approx([5.88] * 3 + [6.12] * 3)
    assert fig.axes[0].get_ylabel().startswith("images/sec")


def test_one_cpu_name_two_machines_are_two_series_by_their_measured_facts(tmp_path):
    """Two VMs that both say "AMD EPYC" with 2 CPUs: a Zen 4 (family 25, GEMM fp32 215 GFLOP/s) and a Zen 5
    (family 26, 508): history tells them apart by what the provenance and notebook 00's peak measured."""
    outputs = tmp_path / "outputs"
    _series(outputs, [4.5] * 6 + [9.0] * 6, seed=7, cpus=["AMD EPYC"] * 12)
    for i, run in enumerate(sorted((outputs / "runs").iterdir())):
        family, fp32 = (25, 215.0) if i < 6 else (26, 508.0)
        prov = json.loads((run / "provenance.json").read_text())
        prov["cpu"].update(vendor="AuthenticAMD", family=family, model_number=17 if family == 25 else 2)
        (run / "provenance.json").write_text(json.dumps(prov))
        (run / "00_environment").mkdir()
        (run / "00_environment" / "peak.json").write_text(json.dumps(
            {"peak_gflops": {"fp32": fp32}, "measurements": [{"dtype": "fp32", "n": 4096, "best_gflops": fp32}]}))
    config = _only(history.history(outputs))
    assert [(s["host_kind"], s["runs"]) for s in config["series"]] == [
        ("AMD EPYC, 2 CPUs (family 25 model 17, GEMM fp32 215 GFLOP/s)", 6),
        ("AMD EPYC, 2 CPUs (family 26 model 2, GEMM fp32 508 GFLOP/s)", 6)]
    (switch,) = config["host_kind_changes"]
    assert "family 26" in switch["to"]
    import warnings

    with warnings.catch_warnings():  # a host kind's long name along the plot leaves the layout alone (it warned:
        warnings.simplefilter("error")  # "Tight layout not applied", seen in make report's terminal)
        fig = view.figure(config)
    (label,) = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("host: ")]
    assert len(label) <= len("host: ") + 48 and label.endswith("…"), label


def test_history_reads_the_store_so_two_machines_outputs_are_one_series(tmp_path):
    """A team's store: two developers' outputs roots, one host kind, pushed into one store: one series of both."""
    url = f"sqlite:///{tmp_path / 'team.sqlite'}"
    rng = np.random.default_rng(7)
    for i in range(12):
        _run(tmp_path / ("alice" if i < 6 else "bob"), i, {"CPU MKL": 6.0 * (1 + rng.normal(0, 0.02))}, 70 + i)
    history.history(tmp_path / "alice", url)  # alice's history pushes her six runs
    both = _only(history.history(tmp_path / "bob", url))
    (series,) = both["series"]
    assert series["runs"] == 12 and not series["change_points"]
    assert [p["commit"][:3] for p in series["points"]] == [f"c{i:02d}" for i in range(12)]
    alone = _only(history.history(tmp_path / "bob"))  # bob's own default store: his six
    assert alone["series"][0]["runs"] == 6


def test_a_store_of_schema_1_is_migrated_and_its_history_still_read(tmp_path):
    import sqlite3

    from resnet_lab.runs import store as st

    outputs = tmp_path / "outputs"
    _series(outputs, [6.0] * 6, seed=5)
    history.history(outputs)
    db = outputs / "store.sqlite"
    with sqlite3.connect(db) as conn:  # the store as schema 1 wrote it: no rows.quoted, no runs.committed
        conn.execute('ALTER TABLE "rows" DROP COLUMN quoted')
        conn.execute("ALTER TABLE runs DROP COLUMN committed")
        conn.execute("UPDATE store_meta SET value = '1' WHERE key = 'schema_version'")
    _run(outputs, 6, {"CPU MKL": 6.0, "XLA CPU": 3.0}, 56)
    config = _only(history.history(outputs))  # migrated on open; the old runs' quoted rows found as the fastest
    assert config["series"][0]["runs"] == 7
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM store_meta").fetchone() == (str(st.SCHEMA_VERSION),)
        quoted = conn.execute('SELECT quoted FROM "rows" ORDER BY id').fetchall()
    assert quoted[0] == (None,) and quoted[-1] in ((0,), (1,))  # old rows NULL, the new run's pushed with it
