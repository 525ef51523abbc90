"""The benchmark harness's pure parts: config checks, matrix, statistics, MFU, rows, the CLI's early errors."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from helpers import SRC, assert_usage_error, run_cli

from resnet_lab.bench import config, launcher, measure, presets, stats
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig
from resnet_lab.ceilings import profile
from resnet_lab.core.errors import UsageError


# ------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize("change, message", [
    ({"model": "resnet-9000"}, "model: 'resnet-9000' is not one of: resnet18, "),
    ({"batch_size": 0}, "batch size: 0 is not an integer >= 1"),
    ({"batch_size": -4}, "batch size: -4 is not an integer >= 1"),
    ({"mode": "eval"}, "mode: 'eval' is not one of: infer, train"),
    ({"precision": "fp8"}, "precision: 'fp8' is not one of: fp32, bf16, fp16"),
    ({"xla": "yes"}, "xla: 'yes' is not one of: off, jit, auto"),
    ({"onednn": "maybe"}, "onednn: 'maybe' is not one of: on, off"),
    ({"device": "tpu"}, "device: 'tpu' is not one of: cpu, gpu"),
    ({"replicas": 0}, "replicas: 0 is not an integer >= 1"),
    ({"intra_op": 0}, "intra-op threads: 0 is not an integer >= 1"),
    ({"steps": 0}, "steps: 0 is not an integer >= 1"),
    ({"data_format": "NHWC"}, "data_format: 'NHWC' is not one of: channels_last, channels_first"),
    ({"image_size": 4}, "image size: 4 is not an integer >= 8"),
])
def test_validate_rejects_bad_input(change, message):
    with pytest.raises(UsageError) as info:
        config.validate(BenchConfig(**change))
    assert str(info.value).startswith(message)


def test_validate_checks_zoo_input_size():
    with pytest.raises(UsageError):
        config.validate(BenchConfig(model="resnet50", image_size=16))
    assert config.validate(BenchConfig(model="resnet50", image_size=32)).image_size == 32
    assert config.resolve_model("cifar_resnet20")["default_image_size"] == 32


def test_validate_accepts_defaults_and_local_models():
    assert config.validate(BenchConfig()).model == "resnet50"
    assert config.validate(BenchConfig(model="tiny-resnet", replicas=2, intra_op=1)).global_batch == 64


def test_from_dict_rejects_unknown_fields():
    with pytest.raises(UsageError, match=r"benchmark configuration: unknown key.s. 'batch'; allowed: "):
        BenchConfig.from_dict({"batch": 3})


# ------------------------------------------------------------------------------------------ matrix
def test_expand_crosses_configs_with_sweep_in_order():
    spec = {
        "base": {"model": "tiny-resnet", "steps": 2, "env": {"A": "1"}},
        "configs": [{"label": "plain"}, {"label": "xla", "xla": "jit", "env": {"B": "2"}}],
        "sweep": {"batch_size": [8, 16], "precision": ["fp32", "bf16"]},
    }
    cfgs = config.expand(spec)
    assert len(cfgs) == 8
    assert [(c.label, c.batch_size, c.precision) for c in cfgs[:4]] == [
        ("plain", 8, "fp32"), ("plain", 8, "bf16"), ("plain", 16, "fp32"), ("plain", 16, "bf16")]
    assert cfgs[4].xla == "jit" and cfgs[4].env == {"A": "1", "B": "2"}
    assert all(c.steps == 2 and c.model == "tiny-resnet" for c in cfgs)


def test_expand_drops_duplicates_and_validates():
    assert len(config.expand({"sweep": {"batch_size": [8, 8]}})) == 1
    with pytest.raises(UsageError, match="batch size"):
        config.expand({"sweep": {"batch_size": [8, 0]}})
    with pytest.raises(UsageError, match=r"sweep spec: unknown key.s. 'grid'; allowed: base, configs, sweep"):
        config.expand({"grid": {}})
    with pytest.raises(UsageError, match="non-empty list"):
        config.expand({"sweep": {"batch_size": 8}})


def test_presets_expand():
    sizes = {name: len(presets.preset_configs(name)) for name in presets.PRESET_NAMES if name != "engine-knobs"}
    # backends: 6 rows x 2 modes; gpu-backends: 6 x 2 modes x 2 precisions; the 2017 table's seven rows;
    # tf-vs-native-pytorch: TF fused BN and native PyTorch eager x fp32, bf16
    assert sizes == {"backends": 12, "gpu-backends": 24, "fp32-train-levers": 10, "tf-vs-native-pytorch": 4,
                     "precision": 4, "2017": 7}
    assert {c.steps for c in presets.preset_configs("precision", steps=3)} == {3}
    with pytest.raises(UsageError, match="--preset: 'nope' is not one of: backends, "):
        presets.preset_configs("nope")
    # engine-knobs: 03's knob sweep, through the CLI (the documented configuration and the alternatives, batch 1)
    import argparse

    from resnet_lab.bench import cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["--preset", "engine-knobs", "--image-size", "32", "--repeats", "2"])
    knobs = cli.configs_from_args(args)
    assert len(knobs) == 16
    assert {(c.batch_size, c.image_size, c.repeats, c.mode) for c in knobs} == {(1, 32, 2, "infer")}
    assert {c.recipe for c in knobs if c.backend == "iree"} == {"documented", "data-tiling", "host", "ukernels"}


def test_2017_table_and_configs():
    table = config.load_2017_table()
    labels = ["CPU", "CPU MKL", "GPU", "2xGPU", "XLA CPU", "XLA GPU", "XLA 2xGPU"]
    assert [r["label"] for r in table] == labels
    assert {r["label"]: r["images_per_sec"] for r in table}["CPU MKL"] == 3.5
    cfgs = config.configs_2017(steps=3)
    assert len(cfgs) == 7 and all(c.batch_size == 32 and c.mode == "train" and c.steps == 3 for c in cfgs)
    two_gpu = cfgs[3]
    assert (two_gpu.device, two_gpu.replicas, two_gpu.global_batch) == ("gpu", 2, 64)


# ------------------------------------------------------------------------------------------- stats
def test_step_stats_follow_tf_cnn_benchmarks():
    times = [0.50, 0.52, 0.48, 0.55, 0.50, 0.90]
    batch = 32
    s = stats.step_stats(times, batch)
    speeds = batch / np.array(times)
    assert s["images_per_sec"] == pytest.approx(batch / np.mean(times))
    assert s["stderr"] == pytest.approx(np.std(speeds) / np.sqrt(len(speeds)))
    assert s["jitter"] == pytest.approx(1.4826 * np.median(np.abs(speeds - np.median(speeds))))
    assert s["step_time_p50"] == pytest.approx(np.percentile(times, 50))
    assert s["step_time_p90"] == pytest.approx(np.percentile(times, 90))
    assert s["n_steps"] == 6


def test_step_stats_single_step_and_bad_input():
    s = stats.step_stats([2.0], 4)
    assert (s["images_per_sec"], s["stderr"], s["jitter"]) == (2.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        stats.step_stats([], 4)
    with pytest.raises(ValueError):
        stats.step_stats([0.0], 4)


@pytest.mark.parametrize("q", [0, 10, 50, 90, 100])
def test_percentile_matches_numpy(q):
    xs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    assert stats.percentile(xs, q) == pytest.approx(np.percentile(xs, q))
    assert math.isnan(stats.percentile([], q))


def test_flops_and_mfu():
    macs = 4.1e9  # ResNet-50 at 224²
    assert stats.flops_per_image(macs, "infer") == pytest.approx(8.2e9)
    assert stats.flops_per_image(macs, "train") == pytest.approx(24.6e9)
    assert stats.flops_per_image(None, "train") is None
    # 10 images/s of a 24.6 GFLOP step on a 400 GFLOP/s machine: 61.5 %
    assert stats.mfu(24.6e9, 10.0, 400.0) == pytest.approx(0.615)
    assert stats.mfu(24.6e9, 10.0, None) is None
    assert stats.mfu(None, 10.0, 400.0) is None


def test_cpu_and_host_utilization():
    assert stats.cpu_utilization(3.0, 2.0, 2) == pytest.approx(75.0)
    assert stats.cpu_utilization(1.0, 0.0, 2) is None
    before = stats.parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n")
    after = stats.parse_proc_stat("cpu  200 0 100 850 50 0 0 0 0 0\n")
    assert before == (150, 1000) and after == (300, 1200)
    assert stats.host_utilization(before, after) == pytest.approx(75.0)
    with pytest.raises(ValueError):
        stats.parse_proc_stat("intr 1 2 3")


# -------------------------------------------------------------------------------------------- rows
OK_RESULT = {
    "status": "ok", "reason": "", "step_times": [0.5] * 5, "timed_s": 2.5, "cpu_seconds": 3.75,
    "forward_macs": 4.0e9, "image_size": 224, "xla_ran": False, "onednn_ran": True, "first_step_s": 9.0,
    "compile_s": 8.5, "host_util": 90.0, "flops_source": "test", "model_source": "test",
}
STATIC = {"available_cpus": 2, "label": "x"}


def _row(cfg, result=OK_RESULT, peak=None):
    static = {**bench_rows.static_fields(cfg), **STATIC}
    return bench_rows.make_row(cfg, dict(result), peak, static)


def test_make_row_ok_with_peak():
    cfg = BenchConfig(batch_size=32)
    row = _row(cfg, peak={"peak_gflops": {"fp32": 4000.0}})
    assert list(row) == list(bench_rows.ALL_FIELDS)  # every field, in the CSV's order, then step_times
    assert row["status"] == "ok" and row["images_per_sec"] == pytest.approx(64.0)
    assert row["flops_per_image"] == pytest.approx(24e9)
    assert row["model_gflops"] == pytest.approx(64 * 24.0)
    assert row["mfu"] == pytest.approx(64 * 24.0 / 4000.0) and not row["mfu_note"]
    assert row["cpu_util"] == pytest.approx(75.0)
    assert row["xla_ran"] is False and row["onednn_ran"] is True


def test_make_row_without_peak_says_why():
    row = _row(BenchConfig())
    assert row["mfu"] is None and "no GEMM peak" in row["mfu_note"]
    row = _row(BenchConfig(precision="bf16"), peak={"peak_gflops": {"fp32": 400.0}})
    assert row["mfu"] is None and "bf16" in row["mfu_note"]
    row = _row(BenchConfig(device="gpu"), peak={"peak_gflops": {"fp32": 400.0}})
    assert row["mfu"] is None and "cpu" in row["mfu_note"]


def test_make_row_failed_and_replicas():
    row = _row(BenchConfig(), {"status": "oom", "reason": "ResourceExhaustedError: big"})
    assert row["status"] == "oom" and row["reason"].startswith("Resource") and row["images_per_sec"] is None
    row = _row(BenchConfig(replicas=2, batch_size=16))
    assert row["emulated"] is True and row["global_batch"] == 32
    assert row["images_per_sec"] == pytest.approx(64.0)  # 32 images per 0.5 s step


def test_csv_json_table(tmp_path):
    rows = [_row(BenchConfig()), _row(BenchConfig(), {"status": "skipped", "reason": "no GPU"})]
    text = bench_rows.rows_to_csv(rows)
    assert text.splitlines()[0].split(",") == list(bench_rows.ROW_FIELDS)
    assert len(text.splitlines()) == 3
    csv_path, json_path = bench_rows.save_rows(tmp_path, rows)
    assert csv_path.read_text() == text
    assert [r["status"] for r in json.loads(json_path.read_text())] == ["ok", "skipped"]
    table = bench_rows.rows_to_table(rows)
    assert "images/sec" in table and "skipped: no GPU" in table
    markdown = bench_rows.rows_to_markdown(rows).splitlines()  # the table's columns, a GitHub table
    assert markdown[0].split(" | ")[1:3] == table.split()[1:3] and markdown[1].startswith("| --- |")
    assert len(markdown) == 4 and "skipped: no GPU" in markdown[-1]
    df = bench_rows.to_frame(rows)
    assert list(df.columns) == list(bench_rows.ROW_FIELDS) and len(df) == 2


# ------------------------------------------------------------------------------------- environment
def test_worker_env():
    base = {"TF_XLA_FLAGS": "--tf_xla_auto_jit=1 --tf_xla_min_cluster_size=4", "PYTHONPATH": "/x"}
    env = launcher.worker_env(BenchConfig(onednn="off", xla="auto", env={"KMP_BLOCKTIME": "1"}), base)
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0" and env["KERAS_BACKEND"] == "tensorflow"
    assert env["TF_XLA_FLAGS"].split() == ["--tf_xla_min_cluster_size=4", "--tf_xla_auto_jit=2",
                                           "--tf_xla_cpu_global_jit"]
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["KMP_BLOCKTIME"] == "1"
    assert env["PYTHONPATH"].split(":") == [str(SRC), "/x"]
    env = launcher.worker_env(BenchConfig(xla="jit", device="gpu"), {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"})
    assert "TF_XLA_FLAGS" not in env and "CUDA_VISIBLE_DEVICES" not in env
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "1"


def test_gpu_precheck_on_cpu_only_host(monkeypatch):
    monkeypatch.setattr(launcher.provenance, "gpu_info", lambda: [])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    row = launcher.run_config(BenchConfig(device="gpu", model="tiny-resnet"))
    assert row["status"] == "skipped" and "no GPU is visible" in row["reason"]
    monkeypatch.setattr(launcher.provenance, "gpu_info", lambda: [{"index": "0"}])
    monkeypatch.setattr(launcher.requirements, "installed", {"tensorflow": "2.21.0"}.get)
    reason = launcher.precheck(BenchConfig(device="gpu", replicas=2))[1]
    assert reason == "2 GPU replicas asked for, 1 GPU(s) visible"
    assert launcher.precheck(BenchConfig(device="cpu", replicas=2)) is None


# ------------------------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("args, message", [
    (["--model", "resnet-9000"], "model: 'resnet-9000' is not one of: resnet18,"),
    (["--batch-size", "0"], "batch size: 0 is not an integer >= 1"),
    (["--replicas", "0"], "replicas: 0 is not an integer >= 1"),
    (["--precision", "fp64"], "precision: 'fp64' is not one of: fp32, bf16, fp16"),
    (["--mode", "training"], "mode: 'training' is not one of: infer, train"),
    (["--format", "xml"], "--format: 'xml' is not one of: table, json, csv, markdown"),
    (["--preset", "nope"], "--preset: 'nope' is not one of: backends, "),
])
def test_cli_bad_input_exits_2_before_tensorflow(args, message):
    assert_usage_error(["bench", *args], message)


def test_cli_gpu_on_cpu_only_host_answers_in_seconds():
    if launcher.gpus_visible()[0]:
        pytest.skip("this host has a GPU")
    t0 = time.perf_counter()
    r = run_cli("bench", "--device", "gpu", "--model", "tiny-resnet", "--format", "json")
    assert time.perf_counter() - t0 < 15
    assert r.returncode == 1
    row = json.loads(r.stdout)
    assert row["status"] == "skipped" and "GPU" in row["reason"]
    assert r.heavy == []


_V = "onednn_verbose,v1,primitive,exec,cpu,"
_CONV = "src:f32::blocked:acdb::f0,attr-scratchpad:user,alg:convolution_direct,"
VERBOSE_LOG = "\n".join([
    "onednn_verbose,v1,info,oneDNN v3.x",
    _V + "convolution,brgconv_1x1:avx512_core,forward_training," + _CONV
    + "mb32_ic64oc64_ih56oh56kh1sh1dh0ph0_iw56ow56kw1sw1dw0pw0,99.0",  # before the timed steps: ignored
    "@@resnet-lab-step-start 10.0",
    _V + "convolution,brgconv_1x1:avx512_core,forward_training," + _CONV
    + "mb32_ic64oc64_ih56oh56kh1sh1dh0ph0_iw56ow56kw1sw1dw0pw0,20.0",
    _V + "convolution,jit_1x1:avx512_core,backward_weights," + _CONV
    + "mb32_g2_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1,60.0",
    _V + "reorder,jit:uni,undef,src:f32::blocked:abcd::f0 dst:f32::blocked:acdb::f0,,,32x64x56x56,5.0",
    "@@resnet-lab-step-end 10.1",
])


def test_parse_onednn_verbose():
    p = profile.parse_onednn_verbose(VERBOSE_LOG)
    assert p["steps"] == 1 and p["step_ms"] == pytest.approx(100.0)
    assert p["ms_per_step"] == {"convolution:backward_weights": 60.0, "convolution:forward_training": 20.0,
                                "reorder": 5.0}
    assert p["onednn_share"] == pytest.approx(0.85) and p["conv_share"] == pytest.approx(0.80)
    flops = 2 * 32 * 64 * 56 * 56 * 64 + 2 * 32 * 64 * 56 * 56 * 64 * 9 / 2
    assert p["conv_gflops"] == pytest.approx(flops / 80e-3 / 1e9)
    assert p["conv_impl_ms_per_step"]["backward_weights:jit_1x1:avx512_core"] == 60.0
    assert profile.parse_onednn_verbose("nothing")["steps"] == 0
    assert launcher.worker_env(BenchConfig(onednn_profile=True), {})["ONEDNN_VERBOSE"] == "1"


def test_fpmath_bf16_rows_are_not_fp32():
    cfg = BenchConfig(env={"TF_SET_ONEDNN_FPMATH_MODE": "BF16"})
    assert config.math_dtype(cfg) == "bf16" and config.math_dtype(BenchConfig()) == "fp32"
    assert config.math_dtype(BenchConfig(onednn="off", env={"ONEDNN_DEFAULT_FPMATH_MODE": "BF16"})) == "fp32"
    row = _row(cfg, peak={"peak_gflops": {"fp32": 400.0, "bf16": 1600.0}})
    assert row["math_dtype"] == "bf16" and row["peak_gflops"] == 1600.0 and "fpmath" in row["mfu_note"]


def test_failure_classes():
    assert measure.classify(MemoryError()) == "oom"
    assert measure.classify(RuntimeError("CUDA out of memory")) == "oom"
    assert measure.classify(RuntimeError("No registered kernel for Conv2D")) == "unsupported"
    assert measure.classify(ValueError("bad")) == "error"
    long = RuntimeError("context line\n  Trying to access resource on device CPU:1\nmore")
    assert measure.reason(long).startswith("RuntimeError: Trying to access resource on device CPU:1")


def test_run_matrix_measures_a_shared_configuration_once_and_groups_by_process(monkeypatch, tmp_path):
    groups = []

    def fake_group(cfgs, peak=None, log_dir=None, python=None, on_row=None):
        groups.append([c.label for c in cfgs])
        rows = []
        for k, cfg in reversed(list(enumerate(cfgs))):  # rows may end in any order: the matrix keeps its own
            row = {**bench_rows.skipped_row(cfg, "skipped", "fake"), "images_per_sec": 10.0 + k}
            rows.append(row)
            on_row(k, row)
        return rows[::-1]

    monkeypatch.setattr(launcher, "run_group", fake_group)
    measured: dict = {}
    first = launcher.run_matrix([BenchConfig(label="CPU MKL"), BenchConfig(label="XLA", xla="jit"),
                                 BenchConfig(label="CPU", onednn="off")],
                                out=tmp_path, progress=False, name="a", measured=measured)
    assert groups == [["CPU MKL", "XLA"], ["CPU"]]  # jit_compile is per function; oneDNN is read at import
    assert [r["label"] for r in first] == ["CPU MKL", "XLA", "CPU"]
    again = launcher.run_matrix([BenchConfig(label="batch"), BenchConfig(label="bf16", precision="bf16"),
                                 BenchConfig(label="auto", xla="auto")],
                                out=tmp_path, progress=False, name="b", measured=measured)
    assert groups[2:] == [["bf16"], ["auto"]]  # "batch" is CPU MKL's configuration: not run again
    assert again[0]["label"] == "batch" and again[0]["same_run_as"] == "CPU MKL"
    assert again[0]["images_per_sec"] == first[0]["images_per_sec"] == 10.0
    assert again[1]["same_run_as"] is None and first[0]["same_run_as"] is None
    assert [r["label"] for r in json.loads((tmp_path / "b.json").read_text())] == ["batch", "bf16", "auto"]
    # a row measured before does not part its neighbours: native fp32 and bf16 share a process around TF bf16
    launcher.run_matrix([BenchConfig(label="bf16 again", precision="bf16"),
                         BenchConfig(label="p", onednn="off", batch_size=4), BenchConfig(label="batch again"),
                         BenchConfig(label="q", onednn="off", batch_size=8)],
                        out=tmp_path, progress=False, name="c", measured=measured)
    assert groups[4:] == [["p", "q"]]
    assert config.process_key(BenchConfig(onednn_profile=True)) is None  # its own process: its own log


# ------------------------------------------------------------------------------- budget and honesty
def test_confidence_interval_narrows_as_steps_are_added():
    rng = np.random.default_rng(3)
    times = list(0.5 + 0.03 * rng.standard_normal(200))
    widths = []
    for n in (3, 10, 50, 200):
        s = stats.step_stats(times[:n], 32)
        assert s["ci95_low"] < s["images_per_sec"] < s["ci95_high"]
        widths.append(s["ci95_high"] - s["ci95_low"])
    assert widths == sorted(widths, reverse=True) and widths[-1] < widths[0] / 5
    assert stats.ci95([0.5], 32) == (None, None)
    assert stats.ci95([0.1, 10.0], 32)[1] is None  # two wildly different steps cannot bound the speed above


def test_a_row_cut_short_by_its_budget_is_marked_short():
    cfg = BenchConfig(steps=5, max_time_s=1.0, min_time_s=0.5)
    row = _row(cfg, {**OK_RESULT, "step_times": [0.6, 0.6]})
    assert row["status"] == "short" and row["timed_steps"] == 2
    assert row["reason"] == "max time 1 s ran out after 2 of the 5 timed steps asked for"
    assert row["images_per_sec"] == pytest.approx(32 / 0.6)  # the number is there, but not as a full result
    ok = _row(BenchConfig(steps=3), {**OK_RESULT, "step_times": [0.5] * 4})
    assert ok["status"] == "ok" and ok["timed_steps"] == 4


def test_time_steps_meets_count_and_duration_within_the_cap():
    ticks = []
    out = measure.time_steps(lambda: ticks.append(1), lambda _: time.sleep(0.01), steps=3, min_time_s=0.1)
    assert len(out["step_times"]) >= 8 and out["timed_s"] >= 0.1  # the duration, not the count, decided
    out = measure.time_steps(lambda: None, lambda _: time.sleep(0.05), steps=100, max_time_s=0.2)
    assert 3 <= len(out["step_times"]) <= 6  # the cap stops it short of the count
    out = measure.time_steps(lambda: None, lambda _: None, steps=7)
    assert len(out["step_times"]) == 7


def test_mfu_above_one_against_a_low_peak_is_flagged_not_reported():
    low = {"peak_gflops": {"fp32": 100.0}, "loaded": ["load average 3.1 on 2 CPUs when the GEMMs started"]}
    row = _row(BenchConfig(batch_size=32), peak=low)  # 64 images/s × 24 GFLOP = 1536 GFLOP/s vs 100
    assert row["mfu"] is None
    assert row["mfu_note"].startswith("not reported: the model ran at 1536 GFLOP/s, 15.36× the peak of 100")
    assert "load average 3.1" in row["mfu_note"]
    busy = _row(BenchConfig(batch_size=32), peak={**low, "peak_gflops": {"fp32": 4000.0}})
    assert busy["mfu"] == pytest.approx(1536 / 4000) and "busy host" in busy["mfu_note"]
