"""Notebook 03's package side: the 2017 join, sweeps, headline and the conclusion written from rows."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest

from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench import sections
from resnet_lab.bench.config import BenchConfig
from resnet_lab.bench.timing import Timing
from resnet_lab.report import speed


def _row(cfg: BenchConfig, ips: float | None, status: str = "ok", **extra):
    static = {**bench_rows.static_fields(cfg), "available_cpus": 2}
    if status != "ok":
        return bench_rows.make_row(cfg, {"status": status, "reason": extra.get("reason", "why")}, None, static)
    t = cfg.global_batch / ips
    times = [t, t * 1.01, t * 0.99] + [t] * max(0, cfg.steps - 3)  # every step asked for: no short rows
    result = {"status": "ok", "step_times": times, "timed_s": sum(times), "cpu_seconds": sum(times),
              "forward_macs": 4e9, "xla_ran": cfg.xla != "off", "host_util": 60.0, **extra}
    return bench_rows.make_row(cfg, result, {"peak_gflops": {"fp32": 400.0, "bf16": 1600.0}}, static)


def _rows_2017():
    rows = []
    speeds = {"CPU": 2.0, "CPU MKL": 5.0, "XLA CPU": 2.5, "XLA jit CPU (new)": 4.0}
    for cfg in sections.configs_2017_today(timing=Timing(steps=2)):
        if cfg.device == "gpu":
            rows.append(_row(cfg, None, "skipped", reason="no GPU is visible on this host"))
        else:
            rows.append(_row(cfg, speeds[cfg.label]))
    return rows


def test_configs_2017_today_order():
    cfgs = sections.configs_2017_today(model="tiny-resnet", image_size=32, batch_size=4, timing=Timing(steps=2))
    assert [c.label for c in cfgs] == ["CPU", "CPU MKL", "XLA CPU", "XLA jit CPU (new)", "GPU", "2xGPU",
                                       "XLA GPU", "XLA 2xGPU"]
    assert all(c.model == "tiny-resnet" and c.batch_size == 4 and c.steps == 2 for c in cfgs)


def test_sweep_configs_share_the_base_row():
    cfgs = sections.sweep_configs(batch_sizes=[16, 32], precisions=["fp32", "bf16"],
                                      threads=[[1, 1], [2, 1]], batch_size=32)
    assert [(c.label, c.batch_size, c.precision, c.intra_op) for c in cfgs] == [
        ("batch", 16, "fp32", None), ("batch", 32, "fp32", None), ("precision", 32, "bf16", None),
        ("threads", 32, "fp32", 1), ("threads", 32, "fp32", 2)]


def test_compare_2017_and_conclusion():
    rows = _rows_2017()
    cmp = speed.compare_2017(rows)
    mkl = cmp[cmp["label"] == "CPU MKL"].iloc[0]
    assert mkl["images_per_sec_2017"] == 3.5 and mkl["speedup_vs_2017"] == pytest.approx(5.0 / 3.5, rel=1e-3)
    gpu = cmp[cmp["label"] == "GPU"].iloc[0]
    assert gpu["status"] == "skipped" and gpu["images_per_sec"] != gpu["images_per_sec"]  # NaN
    sweep = [_row(BenchConfig(batch_size=64, label="batch"), 6.0),
             _row(BenchConfig(precision="bf16", label="precision"), 15.0)]
    text = speed.conclusion(rows, sweep)
    assert "2.50×" in text  # oneDNN speedup 5.0 / 2.0, from the rows
    assert "Shared host" not in text  # host 60 % vs our 50 %: nobody else to speak of
    busy = [{**r, "host_util": 100.0} if r.get("label") == "CPU" else r for r in rows]
    assert speed.conclusion(busy, sweep).startswith("- ⚠ **Shared host**: other processes used up to 50 %")
    assert "GPU rows** skipped: no GPU is visible" in text
    assert "bf16" in text.split("Best CPU training configuration")[1].splitlines()[0]
    h = speed.headline([*rows, *sweep])
    assert h["best_images_per_sec"] == pytest.approx(15.0, rel=1e-3)
    assert h["best_fp32_images_per_sec"] == pytest.approx(6.0, rel=1e-3)
    assert h["best_fp32_mfu"] == pytest.approx(6.0 * 24e9 / 400e9, rel=1e-3)
    assert h["n_skipped"] == 4 and h["n_failed"] == 0


def test_conclusion_when_nothing_ran():
    rows = [_row(BenchConfig(), None, "error", reason="boom")]
    assert "No configuration ran" in speed.conclusion(rows, [])


def test_sweep_view_and_plots():
    sweep = [_row(c, 3.0 + i) for i, c in enumerate(sections.sweep_configs(timing=Timing(steps=2)))]
    df = bench_rows.to_frame(sweep)
    assert list(speed.sweep_view(df, "batch_size")["batch_size"]) == [16, 32, 64]
    assert set(speed.sweep_view(df, "precision")["precision"]) == {"fp32", "bf16"}
    assert "1/1" in set(speed.sweep_view(df, "threads")["threads"])
    ax = speed.plot_throughput(speed.sweep_view(df, "batch_size"), "batch_size", "t")
    bars = ax.patches
    assert [b.get_height() for b in bars] == pytest.approx(list(speed.sweep_view(df, "batch_size")
                                                               ["images_per_sec"]))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "32", "64"]
    ax = speed.plot_mfu_util(df)
    ok = df[df["status"] == "ok"]
    heights = [b.get_height() for b in ax.patches]
    assert len(heights) == 2 * len(ok)  # an MFU bar and a CPU bar per configuration
    assert heights[: len(ok)] == pytest.approx(list(100 * ok["mfu"])) and max(heights) <= 105
    cmp = speed.compare_2017(_rows_2017())
    ax = speed.plot_2017(cmp)
    assert [b.get_height() for b in ax.patches[: len(cmp)]] == pytest.approx(list(cmp["images_per_sec_2017"]),
                                                                          nan_ok=True)
    assert ax.get_yscale() == "log"


def test_other_models_are_not_compared_with_2017():
    cfgs = sections.configs_2017_today(model="tiny-resnet", image_size=32, batch_size=4, timing=Timing(steps=2))
    rows = [_row(c, 100.0) if c.device == "cpu" else _row(c, None, "skipped") for c in cfgs]
    cmp = speed.compare_2017(rows)
    assert cmp["speedup_vs_2017"].isna().all() and cmp["images_per_sec_2017"].notna().sum() == 7
    assert "for reference only" in speed.conclusion(rows, [])


def test_profile_table_and_summary():
    import json

    cfg = sections.profile_config(timing=Timing(steps=2))
    assert cfg.onednn_profile and cfg.gemm_check and cfg.precision == "fp32" and cfg.inter_op == 1
    row = _row(cfg, 3.0, gemm_gflops_now=200.0)
    row.update(onednn_profile=json.dumps({"step_ms": 1000.0, "other_ms": 150.0, "ms_per_step": {
        "convolution:backward_weights": 500.0, "convolution:forward_training": 300.0, "reorder": 50.0}}),
        onednn_share=0.85, conv_share=0.8, conv_gflops=100.0)
    df = speed.profile_table(row)
    assert list(df["ms_per_step"]) == [500.0, 300.0, 150.0, 50.0]
    assert df["share"].sum() == pytest.approx(1.0)
    text = speed.profile_summary(row)
    assert "80 % of the time is inside oneDNN convolutions" in text and "50 % of the GEMM rate" in text
    conclusion = speed.conclusion(_rows_2017(), [row])
    assert "What bounds fp32 MFU" in conclusion
    h = speed.headline([row])  # a profiled row is measured, and never "best" (verbose logging slows it)
    assert h["n_ok"] == 1 and h["best_config"] is None
    assert "No oneDNN profile" in speed.profile_summary({"status": "error"})
    assert "the convolution kernels, not the framework around them, bound MFU" in text and "⚠" not in text
    # primitives that overlapped in time (inter-op parallelism): said, and no negative "outside" share
    row.update(onednn_share=1.13, conv_share=0.4)
    text = speed.profile_summary(row)
    assert "0 % outside oneDNN" in text and "summed time is 113 % of the step: they overlapped" in text
    assert "the time outside the convolution kernels" in text


def test_wall_breakdown_accounts_for_each_part_and_skips_repeats():
    rows = [{"label": "a", "mode": "train", "startup_s": 2.0, "import_s": 5.0, "build_s": 1.0,
             "first_step_s": 10.0, "warmup_s": 3.0, "timed_s": 9.0, "wall_s": 30.0},
            {"label": "b", "mode": "train", "timed_s": 9.0, "wall_s": 30.0, "same_run_as": "a"},
            {"label": "c", "mode": "infer", "status": "skipped", "timed_s": None}]
    frame = speed.wall_breakdown(rows)
    assert list(frame["config"]) == ["a"] and frame.loc[0, "timed_share"] == pytest.approx(0.3)
    assert speed.wall_summary(frame) == "timed steps: 30% of 0.5 min of measuring"
    assert speed.wall_summary(speed.wall_breakdown([])) == "No configuration was measured."
    ax = speed.plot_wall_breakdown(frame)
    assert [p.get_width() for p in ax.patches] == [2.0, 5.0, 1.0, 10.0, 3.0, 9.0]
    assert [p.get_x() for p in ax.patches] == [0.0, 2.0, 7.0, 8.0, 18.0, 21.0]  # stacked, in order


def test_a_section_left_out_gives_empty_tables_and_plots_that_say_so():
    """03's `sections` (the gate runs one): every table and plot of a section that did not run takes no rows."""
    empty = bench_rows.to_frame([])
    for knob in ("batch_size", "precision", "threads", "fused_bn"):
        assert speed.sweep_view(empty, knob).empty
        speed.plot_throughput(speed.sweep_view(empty, knob), knob, knob)
    ax = speed.plot_2017(speed.compare_2017([]))
    assert [t.get_text() for t in ax.texts] == ["No 2017 row in this run."]
    ax = speed.plot_backends(speed.backend_table([]))
    assert [t.get_text() for t in ax.texts] == ["No backend row in this run."]
    assert speed.wall_breakdown([]).empty and speed.conclusion([], [])


def test_a_row_of_several_processes_costs_its_time_per_process_times_the_processes():
    row = {"label": "x", "mode": "train", "timed_s": 2.0, "import_s": 1.0, "wall_s": 4.0, "process_means": [1, 1, 1]}
    frame = speed.wall_breakdown([row, {**row, "label": "y", "process_means": [1]}])
    assert list(frame["wall_s"]) == [12.0, 4.0] and list(frame["timed_s"]) == [6.0, 2.0]
    assert list(frame["timed_share"]) == [0.5, 0.5]


def test_the_headline_counts_every_row_and_picks_the_best_among_the_models_rows():
    """Rows of the 2017 model (v1) and the reference (v1.5), a profiled row, a skipped and a failed one: the
    counts add up to the rows, "best" is the reference's."""
    def row(model, ips, status="ok", **extra):
        return {"model": model, "mode": "train", "precision": "fp32", "status": status, "images_per_sec": ips,
                "device": "cpu", "backend": "tensorflow", "batch_size": 32, **extra}
    rows = [row("resnet50", 9.0), row("resnet50_v1.5", 6.0), row("resnet50_v1.5", 5.0, onednn_profile="{}"),
            row("resnet50", None, "skipped"), row("resnet50_v1.5", None, "error")]
    h = speed.headline(rows, model="resnet50_v1.5")
    assert (h["n_rows"], h["n_ok"], h["n_skipped"], h["n_failed"]) == (5, 3, 1, 1)
    assert h["best_images_per_sec"] == 6.0  # not v1's 9.0, nor the profiled row
