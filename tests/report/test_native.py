"""Notebook 03's native-PyTorch comparison and MLPerf-style scenarios: configurations, tables, targets."""

from __future__ import annotations

import pytest

from resnet_lab.bench import presets, sections
from resnet_lab.bench.config import BenchConfig, compiler_name, expand, validate
from resnet_lab.bench.timing import Timing
from resnet_lab.core.errors import UsageError
from resnet_lab.report import native


def test_versus_configs_pair_tf_fused_with_native_pytorch():
    cfgs = sections.versus_configs(precisions=["fp32", "bf16"], compile=True)
    assert [(c.backend, c.impl, c.xla, c.fused_bn, c.precision) for c in cfgs] == [
        ("tensorflow", "keras", "off", True, "fp32"), ("torch", "native", "off", False, "fp32"),
        ("torch", "native", "jit", False, "fp32"), ("tensorflow", "keras", "off", True, "bf16"),
        ("torch", "native", "off", False, "bf16"), ("torch", "native", "jit", False, "bf16")]
    assert {c.model for c in cfgs} == {"resnet50_v1.5"} and {c.data_format for c in cfgs} == {"channels_last"}
    assert len(sections.versus_configs(precisions=["fp32"], compile=False)) == 2
    assert "TorchInductor" in compiler_name(cfgs[2]) and "native" in compiler_name(cfgs[1])


@pytest.mark.parametrize(("change", "message"), [
    ({"backend": "jax", "impl": "native"}, "impl 'native' is the model in plain PyTorch: backend torch, not jax"),
    ({"backend": "torch", "impl": "native", "model": "keras-resnet50"}, "Keras' own model"),
    ({"impl": "pytorch"}, "impl: 'pytorch' is not one of: keras, native"),
])
def test_native_impl_is_checked_before_anything_runs(change, message):
    with pytest.raises(UsageError, match=message):
        validate(BenchConfig(**change))


def test_preset_rows_are_found_by_what_they_ran():
    """The `make bench` preset and the notebook's rows are matched by backend, impl and fused BN, not label."""
    cfgs = expand(presets.PRESETS["tf-vs-native-pytorch"])
    speed = {("keras", "fp32"): 8.0, ("native", "fp32"): 5.0, ("keras", "bf16"): 16.0, ("native", "bf16"): 4.0}
    cfgs.sort(key=lambda c: (c.precision != "fp32", c.impl))  # TF fp32, native fp32, TF bf16, native bf16
    rows = [{**c.to_dict(), "status": "ok", "images_per_sec": speed[(c.impl, c.precision)],
             "ci95_low": speed[(c.impl, c.precision)] * 0.95, "ci95_high": speed[(c.impl, c.precision)] * 1.05,
             "math_dtype": c.precision} for c in cfgs]
    by = {t["target"]: t for t in native.targets(rows)}
    fp32 = by["TF fp32 train / native PyTorch eager fp32"]
    assert fp32["ratio"] == pytest.approx(8.0 / 5.0) and fp32["met"] is True
    assert fp32["ratio_ci_low"] == pytest.approx(8.0 * 0.95 / (5.0 * 1.05))
    bf16 = by["TF bf16 train / native PyTorch eager fp32"]
    assert bf16["ratio"] == pytest.approx(16.0 / 5.0) and bf16["met"] is True
    table = native.versus_table(rows)
    assert table["vs_native_fp32"].round(2).tolist() == [1.6, 1.0, 3.2, 0.8]
    text = native.versus_summary(rows)
    assert "**fp32 training**: TensorFlow 8.00 images/sec vs the best native PyTorch row" in text
    assert "TensorFlow is faster, **1.60×**" in text and "— met." in text


def test_targets_not_met_and_not_measured():
    rows = [{"backend": "tensorflow", "fused_bn": True, "impl": "keras", "xla": "off", "precision": "fp32",
             "mode": "train", "status": "ok", "images_per_sec": 5.0},
            {"backend": "torch", "impl": "native", "xla": "off", "precision": "fp32", "mode": "train",
             "status": "ok", "images_per_sec": 5.0}]
    fp32, bf16 = native.targets(rows)
    assert fp32["met"] is False and fp32["ratio"] == pytest.approx(1.0)
    assert bf16["ratio"] is None and bf16["met"] is None
    text = native.versus_summary(rows)
    assert "**not met**" in text and "not measured in this run." in text
    # a bf16 row left out as emulated: the target says why it was not judged
    rows.append({"backend": "tensorflow", "fused_bn": True, "impl": "keras", "xla": "off", "precision": "bf16",
                 "mode": "train", "status": "skipped", "reason": "this CPU has no bf16 instructions (…)"})
    assert "not measured in this run (this CPU has no bf16 instructions (…))." in native.versus_summary(rows)
    rows.pop()
    # a failed native row: no comparison, and the summary says which side is missing
    rows[1]["status"] = "error"
    assert "native PyTorch did not run" in native.versus_summary(rows)


def test_the_versus_rows_say_how_many_processes_and_where_the_spread_is():
    base = {"backend": "torch", "impl": "native", "xla": "off", "precision": "fp32", "mode": "train",
            "status": "ok", "images_per_sec": 5.0}
    tf = {**base, "backend": "tensorflow", "impl": "keras", "fused_bn": True, "images_per_sec": 6.0}
    one = [{**tf, "repeats": 1, "var_within": 0.0016}, {**base, "repeats": 1, "var_within": 0.0025}]
    assert "Each row is one process" in native.versus_summary(one)
    table = native.versus_table(one)
    assert table["sd_step"].round(2).tolist() == [0.04, 0.05] and table["sd_process"].isna().all()
    three = [{**r, "repeats": 3, "var_between": vb} for r, vb in zip(one, (0.0081, 0.0144), strict=True)]
    text = native.versus_summary(three)
    assert "spread between its 3 fresh processes" in text and "inside a process" in text
    assert "4–5 % inside a process, a process by 9–12 % beyond that" in text
    assert native.versus_table(three)["sd_process"].round(2).tolist() == [0.09, 0.12]


def test_native_rows_are_named_as_such():
    from resnet_lab.report import speed

    eager, compiled = sections.versus_configs(precisions=["bf16"])[1:]
    assert speed.row_name(eager.to_dict()).startswith("native torch · bf16 · eager")
    assert speed.row_name(compiled.to_dict()).startswith("native torch · bf16 · torch.compile")


def test_mlperf_configs_and_table():
    cfgs = sections.mlperf_configs(queries=300, offline_batch_sizes=[8, 32], timing=Timing(steps=3))
    single = [c for c in cfgs if c.label.startswith("SingleStream")]
    assert [(c.batch_size, c.steps, c.min_time_s, c.mode) for c in single] == [(1, 300, 0.0, "infer")] * 2
    assert all(c.warmup >= 10 for c in single)
    assert {c.label for c in cfgs} == {"SingleStream · TensorFlow", "Offline · TensorFlow",
                                       "SingleStream · native PyTorch", "Offline · native PyTorch"}
    # each framework served as its authors document: TensorFlow as a frozen graph, PyTorch through torch.compile
    # with Inductor's freezing on a channels_last model
    served = {(c.backend, c.fold_bn, c.inter_op, c.xla, c.data_format,
               c.env.get("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS") or c.env.get("TORCHINDUCTOR_FREEZING")) for c in cfgs}
    assert served == {("tensorflow", True, 1, "off", "channels_last", "1"),
                      ("torch", False, None, "jit", "channels_last", "1")}
    times = [0.010 + 0.001 * (i % 10) for i in range(300)]
    rows = [
        {"label": "SingleStream · TensorFlow", "batch_size": 1, "status": "ok", "images_per_sec": 70.0,
         "step_times": times, "step_time_p50": 0.0145, "step_time_p90": 0.019, "step_time_p99": 0.019},
        {"label": "Offline · TensorFlow", "batch_size": 8, "status": "ok", "images_per_sec": 90.0},
        {"label": "Offline · TensorFlow", "batch_size": 32, "status": "ok", "images_per_sec": 110.0},
        {"label": "SingleStream · native PyTorch", "batch_size": 1, "status": "ok", "images_per_sec": 40.0,
         "step_times": times, "step_time_p50": 0.025, "step_time_p90": 0.038, "step_time_p99": 0.040},
        {"label": "Offline · native PyTorch", "batch_size": 8, "status": "skipped", "reason": "no torch"},
    ]
    df = native.mlperf_table(rows)
    assert df.loc[0, "latency_p90_ms"] == pytest.approx(19.0) and df.loc[0, "queries"] == 300
    assert df["best_offline"].tolist() == [False, False, True, False, False]  # the best batch per implementation
    text = native.mlperf_summary(df)
    assert "p90 latency 19.0 ms" in text and "110.0 images/sec at batch 32" in text
    assert "At one image per query (fp32) TensorFlow answers 2.00× sooner (p90)" in text
    with pytest.raises(UsageError, match="queries: 0"):
        sections.mlperf_configs(queries=0)


def _served(label, precision, p90_ms, ips=None, batch=1, **extra):
    row = {"label": label, "batch_size": batch, "precision": precision, "status": "ok",
           "images_per_sec": ips or 1e3 / p90_ms, "step_times": [p90_ms / 1e3] * 4, "step_time_p50": p90_ms / 1e3,
           "step_time_p90": p90_ms / 1e3, "step_time_p99": p90_ms / 1e3, "compile_s": 1.0}
    return {**row, **extra}


def test_every_engine_served_is_one_table_per_precision_with_its_leader_and_agreement():
    rows = [_served("SingleStream · TensorFlow", "fp32", 47.0, fold_bn=True, backend="tensorflow", xla="off"),
            _served("SingleStream · OpenVINO", "fp32", 38.0, backend="openvino", check_ok=True, check_max_rel=1e-6,
                    check_tol=1e-4, agree_ok=True, agree_top1=1.0, agree_top5=1.0, agree_max_rel=1e-6, agree_tol=1e-4,
                    compile_stats='{"settings": "latency: PERFORMANCE_HINT=LATENCY"}'),
            _served("SingleStream · OpenVINO", "bf16", 19.0, backend="openvino", check_ok=True, agree_ok=True,
                    agree_top1=1.0, agree_top5=0.9375, agree_max_rel=0.008, agree_tol=0.031),
            _served("SingleStream · native PyTorch", "bf16", 34.0, impl="native", xla="jit", agree_ok=False,
                    agree_top1=0.5, agree_top5=0.5, agree_max_rel=0.3, agree_tol=0.031, status="error",
                    reason="agreement check failed"),
            {"label": "SingleStream · ONNX Runtime", "batch_size": 1, "precision": "bf16", "status": "skipped",
             "reason": "ONNX Runtime's CPU execution provider ... no bf16 kernels"}]
    df = native.compilers_table(rows)
    assert list(df["precision"]) == ["fp32", "fp32", "bf16", "bf16", "bf16"]
    assert df.loc[1, "configuration"] == "latency: PERFORMANCE_HINT=LATENCY"
    text = native.compilers_summary(df)
    assert "**fp32, batch 1 (SingleStream p90)**: OpenVINO leads with 38.0 ms (then TensorFlow 47.0)" in text
    assert "**bf16, batch 1 (SingleStream p90)**: OpenVINO leads with 19.0 ms." in text  # the failed row is not
    assert "(1 rows): top-1 agreement 100 %, top-5 94 %, largest relative logit difference 0.008" in text
    assert "native PyTorch, SingleStream b1 bf16: check failed** (agreement check failed)" in text
    assert "ONNX Runtime (bf16: SingleStream): skipped, ONNX Runtime's CPU execution provider" in text
    assert "**OpenVINO**: latency: PERFORMANCE_HINT=LATENCY. Sources: OpenVINO" in native.sources_lines(df)
    assert native.plot_compilers(df) is not None
    views = native.per_precision(df, lambda part, view, **kw: (list(part["precision"]), kw))
    assert [v for v in views if isinstance(v, tuple)] == [(["fp32", "fp32"], {}), (["bf16"] * 3, {})]


def test_the_knob_sweep_says_whether_the_documented_configuration_is_each_engine_s_fastest():
    rows = [_served("knobs · IREE · documented", "fp32", 52.0, recipe="documented"),
            _served("knobs · IREE · host", "fp32", 218.0, recipe="host"),
            _served("knobs · OpenVINO · latency (documented)", "fp32", 38.0),
            _served("knobs · OpenVINO · throughput", "fp32", 30.0),
            {"label": "knobs · ONNX Runtime · documented", "status": "error", "reason": "boom"}]
    df = native.knobs_table(rows)
    assert df.loc[1, "vs_documented"] == pytest.approx(218 / 52) and df.loc[0, "vs_documented"] == 1.0
    text = native.knobs_summary(df)
    assert "**IREE**: the documented configuration is the fastest tried here (52.0 ms p50; host 4.19×)" in text
    assert "**OpenVINO**: throughput answers in 30.0 ms p50, 0.79× the documented configuration's 38.0 ms" in text
    assert "**ONNX Runtime**: its documented configuration has no time (boom)" in text
    cfgs = sections.knob_configs(queries=8, skip=["knobs · native PyTorch · eager"])
    assert len(cfgs) == 15 and all(c.batch_size == 1 and c.steps == 8 and c.warmup >= 10 for c in cfgs)
    with pytest.raises(UsageError, match="knob_skip: 'knobs · nope' is not one of"):
        sections.knob_configs(skip=["knobs · nope"])
