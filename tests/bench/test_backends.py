"""Keras' JAX and PyTorch backends in the benchmark and op-extraction paths (resnet_lab.steps.*_step).

The pure parts (what each backend accepts, the worker environment, the tables) run everywhere; the slow
ones run a tiny model on each *installed* backend through the same worker and parser as TensorFlow's.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math

import pytest
from helpers import assert_usage_error, conv_layers, reduced_precision

from resnet_lab import cli
from resnet_lab.bench import launcher, presets, sections
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import COMPILERS, BenchConfig, compiler_name, expand, math_dtype, validate
from resnet_lab.bench.timing import Timing
from resnet_lab.core import requirements
from resnet_lab.core.errors import UsageError
from resnet_lab.hlo import capture
from resnet_lab.report import ops as tables
from resnet_lab.report import speed
from resnet_lab.workbook import gpu_run

HAS = {b: importlib.util.find_spec(b) is not None for b in ("jax", "torch")}
needs = {b: pytest.mark.skipif(not HAS[b], reason=f"{b} is not installed (pip install '.[{b}]')")
         for b in HAS}


# ------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize("change, message", [
    ({"backend": "mxnet"}, "backend: 'mxnet' is not one of: tensorflow, jax, torch"),
    ({"backend": "jax", "xla": "auto"}, "xla 'auto' is TensorFlow's auto-clustering; on jax xla is off or jit"),
    ({"backend": "torch", "xla": "auto"}, "on torch xla is off or jit"),
    ({"backend": "jax", "onednn": "off"}, "onednn 'off' is not available on jax"),
    ({"backend": "jax", "intra_op": 2}, "on jax leave them unset"),
    ({"backend": "jax", "onednn_profile": True}, "onednn_profile needs oneDNN primitives"),
    ({"backend": "torch", "replicas": 2}, "replicas > 1 on torch"),
])
def test_backend_knobs_are_checked_in_one_line(change, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        validate(BenchConfig(model="tiny-resnet", **change))
    assert "\n" not in str(info.value)


def test_backend_knobs_that_exist_are_accepted():
    for cfg in (BenchConfig(backend="jax", replicas=2), BenchConfig(backend="torch", intra_op=1, onednn="off"),
                BenchConfig(backend="torch", xla="jit", onednn_profile=True)):
        assert validate(cfg) is cfg


def test_cli_bad_backend_exits_2_before_any_framework_import():
    assert_usage_error(["bench", "--backend", "jax", "--xla", "auto"],
                       "resnet-lab bench: error: xla 'auto' is TensorFlow's auto-clustering")


def test_worker_env_selects_the_keras_backend_and_jax_devices():
    env = launcher.worker_env(BenchConfig(backend="jax", replicas=4), base={"XLA_FLAGS": "--xla_dump_to=/x"})
    assert env["KERAS_BACKEND"] == "jax" and env["JAX_PLATFORMS"] == "cpu"
    assert env["XLA_FLAGS"].split() == ["--xla_dump_to=/x", "--xla_force_host_platform_device_count=4"]
    env = launcher.worker_env(BenchConfig(backend="jax", device="gpu"), base={})
    assert "JAX_PLATFORMS" not in env and "XLA_FLAGS" not in env
    assert launcher.worker_env(BenchConfig(backend="torch"), base={})["KERAS_BACKEND"] == "torch"
    assert launcher.worker_env(BenchConfig(), base={})["KERAS_BACKEND"] == "tensorflow"


def test_a_missing_backend_is_a_skipped_row_that_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(requirements, "installed", lambda dist: None)
    row = launcher.run_config(BenchConfig(backend="jax", model="tiny-resnet"))
    assert row["status"] == "skipped"
    assert row["reason"] == "jax needs jax, not installed (pip install -e '.[jax]')"  # core.requirements' line
    assert row["backend"] == "jax" and row["compiler"] == COMPILERS[("jax", "off")]


def test_gpu_precheck_knows_a_cpu_build_of_torch(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(launcher.provenance, "gpu_info", lambda: [{"index": "0"}])
    monkeypatch.setattr(requirements, "installed", {"torch": "2.13.0+cpu"}.get)
    assert launcher.precheck(BenchConfig(backend="torch", device="gpu")) == (
        "skipped", "1 GPU(s) present but torch is a CPU build (2.13.0+cpu)")
    monkeypatch.setattr(requirements, "installed", {"jax": "0.10.2"}.get)
    assert launcher.precheck(BenchConfig(backend="jax", device="gpu")) is None  # the worker decides


def test_presets_expand_on_every_backend():
    rows = expand(presets.PRESETS["backends"])
    assert {(c.backend, c.xla, c.mode) for c in rows} == {
        (b, x, m) for b, x in (("tensorflow", "off"), ("tensorflow", "jit"), ("jax", "jit"), ("jax", "off"),
                               ("torch", "off"), ("torch", "jit")) for m in ("train", "infer")}
    gpu = expand(presets.PRESETS["gpu-backends"])
    assert len(gpu) == 24 and {c.device for c in gpu} == {"gpu"} and all(c.gemm_check for c in gpu)
    assert sum(c.impl == "native" for c in gpu) == 8 and sum(c.impl == "native" and c.xla == "jit" for c in gpu) == 4
    assert {c.backend for c in gpu} == {"jax", "torch"} and {c.precision for c in gpu} == {"fp32", "bf16"}


def test_backend_configs_and_table():
    cfgs = sections.backend_configs(model="tiny-resnet", backends=["jax", "tensorflow"], modes=["train"],
                                    timing=Timing(steps=2, min_time_s=0.0))  # the two step times below
    assert [c.label for c in cfgs] == ["TF graph", "TF XLA jit", "JAX jit", "JAX eager"]
    with pytest.raises(UsageError, match=r"backends: .mxnet. is not one of: tensorflow, jax, torch"):
        sections.backend_configs(backends=["mxnet"])
    times = {"tensorflow": [0.5, 0.5], "jax": [0.25, 0.25]}
    rows = [bench_rows.make_row(c, {"status": "ok", "step_times": times[c.backend]},
                           None) for c in cfgs[:3]]
    rows.append(bench_rows.skipped_row(cfgs[3], "skipped", "backend jax is not installed"))
    table = speed.backend_table(rows)
    assert list(table["vs_tf_graph"][:3]) == [1.0, 1.0, 2.0] and math.isnan(table["vs_tf_graph"][3])
    assert table["compiler"][2] == "XLA (jax.jit of the whole step)"
    assert speed.row_name(rows[2]).startswith("jax · fp32 · jax.jit · b32")
    assert "oneDNN" not in speed.row_name(rows[2])  # not a JAX knob: the row says n/a


# ------------------------------------------------------------------------------------- real backends
def _row(**kw) -> dict:
    cfg = BenchConfig(model="tiny-resnet", batch_size=4, steps=3, warmup=1, timeout_s=300, min_time_s=0, **kw)
    row = launcher.run_config(validate(cfg))
    assert row["status"] == "ok", row["reason"]
    assert row["images_per_sec"] > 0 and row["backend"] == cfg.backend and row["backend_version"]
    assert row["compiler"] == COMPILERS[(cfg.backend, cfg.xla)]
    return row


@pytest.mark.slow
def test_the_quick_runs_backend_rows(quick_run):
    """Notebook 03's backend section of the shared quick run: the same tiny training step on every backend,
    compiler off and on, each in its own worker (TF's rows: tests/bench/test_measure.py), less torch.compile's
    (params/quick.yaml's backend_skip: :func:`test_torch_compile_row_with_aot_eager` makes it beside the run)."""
    rows = json.loads((quick_run.run_dir / "03_benchmarks" / "bench_backends.json").read_text())
    by = {(r["backend"], r["xla"]): r for r in rows}
    assert set(by) == {("tensorflow", "off"), ("tensorflow", "jit"), ("jax", "jit"), ("jax", "off"),
                       ("torch", "off")}
    for (backend, xla), row in by.items():
        if backend != "tensorflow" and not HAS[backend]:
            assert row["status"] == "skipped" and "not installed" in row["reason"]
            continue
        assert row["status"] == "ok", row["reason"]
        assert row["images_per_sec"] > 0 and row["backend_version"] and row["forward_macs"] > 0
        assert row["compiler"] == compiler_name(BenchConfig(model=row["model"], backend=backend, xla=xla,
                                                            env=json.loads(row["env"] or "{}")))
        assert row["compute_dtype"] == "float32"
    if HAS["jax"]:
        for xla in ("jit", "off"):
            row = by["jax", xla]
            assert row["xla_ran"] is (xla == "jit") and row["onednn"] == "n/a" and row["onednn_ran"] is None
    if HAS["torch"]:
        assert by["torch", "off"]["xla_ran"] is None and by["torch", "off"]["onednn_ran"] is True
        assert by["torch", "off"]["compile_stats"] in (None, "")


@pytest.mark.slow
@needs["torch"]
def test_torch_compile_row_with_aot_eager():
    """The Keras torch.compile training row as params/quick.yaml configures it (Dynamo and AOTAutograd, no
    Inductor code generation), in its worker: its compiler named with the backend, its graphs counted, its warmup
    raised (the first calls compile)."""
    (cfg,) = sections.backend_configs("tiny-resnet", 32, 4, backends=["torch"], modes=["train"],
                                      skip=["torch eager"], torch_compile_backend="aot_eager",
                                      timing=Timing(steps=2, warmup=1, min_time_s=0.0, timeout_s=300.0))
    row = launcher.run_config(cfg)
    assert row["status"] == "ok", row["reason"]
    assert row["images_per_sec"] > 0 and row["backend_version"] and row["compute_dtype"] == "float32"
    assert row["compiler"] == compiler_name(cfg)
    assert row["compiler"].endswith(", backend aot_eager (no Inductor code generation)")
    stats = json.loads(row["compile_stats"])
    assert stats["graphs"] >= 1 and row["warmup"] >= 3  # torch.compile's warmup is raised


@pytest.mark.slow
@needs["jax"]
def test_jax_data_parallel_replicas_on_emulated_cpu_devices():
    precision = reduced_precision()  # bf16 where this CPU has it
    row = _row(backend="jax", xla="jit", replicas=2, precision=precision)
    assert row["emulated"] and row["global_batch"] == 8
    assert row["compute_dtype"] == {"bf16": "bfloat16", "fp32": "float32"}[precision]


@pytest.mark.slow
@needs["torch"]
def test_torch_inference_step_runs_in_the_worker():
    row = _row(backend="torch", xla="off", mode="infer")
    assert row["xla_ran"] is None and row["onednn_ran"] is True and row["compile_stats"] in (None, "")


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("jax", marks=needs["jax"]),
                                     pytest.param("torch", marks=needs["torch"])])
def test_gpu_rows_on_a_host_without_gpu_say_so_from_the_worker(backend, monkeypatch):
    """The worker's own GPU check (the precheck passes on a host whose nvidia-smi lists a GPU)."""
    monkeypatch.setattr(launcher, "precheck", lambda cfg: None)
    cfg = BenchConfig(model="tiny-resnet", backend=backend, device="gpu", batch_size=2, steps=1, timeout_s=120)
    row = launcher.run_config(cfg)
    assert row["status"] == "skipped", row["reason"]
    assert {"jax": "JAX sees no gpu device", "torch": "sees no CUDA device"}[backend] in row["reason"]


@pytest.mark.slow
@needs["jax"]
def test_jax_hlo_goes_through_the_same_parser_as_tensorflow(quick_run):
    """Notebook 02's records of the shared quick run (its focus model at 8×8, batch 2, TF and JAX)."""
    model = json.loads((quick_run.run_dir / "02_op_extraction" / "parameters.json").read_text())["focus_model"]
    convs = conv_layers(model)
    records = json.loads((quick_run.run_dir / "02_op_extraction" / "inventories.json").read_text())
    rows = [r for r in records if r["platform"] == "cpu"]
    assert len(rows) == 8 and not [r for r in rows if "skipped" in r]
    jax_rows = {(r["mode"], r["stage"]): r for r in rows if r["backend"] == "jax"}
    assert jax_rows[("train", "before")]["xla_stage"].startswith("jax.jit(step).lower()")
    assert jax_rows[("train", "after")]["versions"]["jax"]
    for (mode, stage), r in jax_rows.items():
        # every conv layer and 1×1 projection; training adds input and filter gradients
        assert r["opcodes"].get("convolution", 0) >= convs, (mode, stage)
        if stage == "after":
            assert r["opcodes"].get("fusion", 0) > 0
    assert "select-and-scatter" not in jax_rows[("infer", "before")]["opcodes"]
    frame = tables.backend_frame(rows, model)
    assert {"tensorflow/train/after", "jax/train/after", "only_in"} <= set(frame.columns)
    assert frame.loc["convolution", "only_in"] == ""
    tf_infer = tables.find_record(rows, model, "infer", "before")
    jax_infer = tables.find_record(rows, model, "infer", "before", backend="jax")
    assert tf_infer["backend"] == "tensorflow" and jax_infer["backend"] == "jax"


def test_jax_capture_checks_before_it_starts_a_process():
    with pytest.raises(UsageError, match=r"backend: .torch. is not one of: tensorflow, jax"):
        capture.capture("cifar_resnet20", backend="torch")
    with pytest.raises(UsageError, match="serialized protos are captured from TensorFlow only"):
        capture.capture("cifar_resnet20", backend="jax", serialized=True)


def test_missing_jax_gives_skipped_op_records(monkeypatch):
    monkeypatch.setattr(capture, "jax_unavailable_reason", lambda: "the jax backend is not installed")
    rows = capture.capture_matrix(["cifar_resnet20"], modes=["infer"], stages=["before"], backends=["jax"],
                              batch_size=2, image_size=8)
    assert rows == [{"model": "cifar_resnet20", "mode": "infer", "stage": "before", "platform": "cpu",
                     "batch_size": 2, "image_size": 8, "precision": "fp32", "backend": "jax",
                     "skipped": "the jax backend is not installed", "opcodes": {}}]


# ---------------------------------------------------------------------------------------- the GPU run
def test_gpu_run_checks_its_arguments_before_running_anything(tmp_path):
    with pytest.raises(UsageError, match=r"--precisions: .fp64. is not one of: fp32, bf16, fp16"):
        gpu_run.configs(precisions=["fp64"])
    with pytest.raises(UsageError, match="nothing to run"):
        gpu_run.configs(backends=["tensorflow"])
    assert len(gpu_run.configs()) == 24  # 6 rows (JAX, PyTorch, native PyTorch) x 2 modes x 2 precisions
    with pytest.raises(UsageError, match=r"--labels: .XLA. is not one of: TF graph|JAX jit"):
        gpu_run.configs(labels=["XLA"])
    picked = gpu_run.configs(labels=["JAX jit", "native torch.compile"], precisions=["fp32"])
    assert [(c.backend, c.impl, c.xla, c.mode) for c in picked] == [
        ("jax", "keras", "jit", "train"), ("torch", "native", "jit", "train"),
        ("jax", "keras", "jit", "infer"), ("torch", "native", "jit", "infer")]
    # fp32 on a GPU multiplies in TF32 (cuDNN's and XLA's default): the GEMM check and MFU say so
    assert {math_dtype(c) for c in picked} == {"tf32"}
    assert math_dtype(BenchConfig(device="cpu", backend="jax", precision="fp32")) == "fp32"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "bench.csv").write_text("earlier results\n")
    assert cli.main(["gpu-run", "--out", str(tmp_path / "old"), "--device", "cpu", "--model", "tiny-resnet",
                     "--hlo-model", "cifar_resnet20"]) == 2
    assert (tmp_path / "old" / "bench.csv").read_text() == "earlier results\n"


def test_gpu_run_runs_the_most_wanted_rows_first_and_records_the_rest_when_its_budget_is_spent(tmp_path,
                                                                                            monkeypatch):
    cfgs = gpu_run.configs(device="cpu", model="tiny-resnet")
    assert [(c.precision, c.mode) for c in cfgs[:2]] == [("bf16", "train"), ("bf16", "train")]
    assert (cfgs[0].backend, cfgs[0].xla, cfgs[1].impl, cfgs[1].xla, cfgs[2].xla) == ("jax", "jit", "native",
                                                                                      "off", "jit")
    assert [c.precision for c in cfgs] == sorted((c.precision for c in cfgs), key=gpu_run.PRECISION_ORDER.index)
    ran = []

    def fake_run(cfgs, peak, log_dir=None, python=None, on_row=None):
        (cfg,) = cfgs
        ran.append(cfg)
        clock[0] += 10.0  # each process "takes" 10 s
        row = {**bench_rows.skipped_row(cfg, "skipped", ""), "status": "ok", "images_per_sec": 1.0, "stderr": 0.1,
               "jitter": 0.1, "step_times": [0.5 + 0.01 * len(ran), 0.5]}
        on_row(0, row)
        return [row]

    clock = [0.0]
    monkeypatch.setattr(launcher.time, "perf_counter", lambda: clock[0])  # the rounds' clock (bench.launcher)
    monkeypatch.setattr(launcher, "run_group", fake_run)
    rows = gpu_run.run_rows(cfgs[:5], tmp_path, tmp_path / "logs", budget_s=25.0)
    assert ran == cfgs[:3]  # started at 0, 10 and 20 s; at 30 s the budget is spent
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "skipped", "skipped"]
    assert "budget of 25 s" in rows[-1]["reason"]
    assert len(json.loads((tmp_path / "bench.json").read_text())) == 5
    # With repeats the rows' processes interleave (round by round), and the budget stops a round midway: a row
    # keeps the processes it has and says what it lacks
    two = [dataclasses.replace(c, repeats=2) for c in cfgs[:2]]
    ran.clear()
    clock[0] = 0.0
    rows = gpu_run.run_rows(two, tmp_path / "r", tmp_path / "logs", budget_s=25.0)
    assert ran == [two[0], two[1], two[0]]
    assert rows[0]["process_means"] and len(rows[0]["process_means"]) == 2 and rows[0]["repeats"] == 2
    assert rows[1]["status"] == "ok" and "1 of 2 processes: the run's budget of 25 s was spent" in rows[1]["reason"]
    assert cli.main(["gpu-run", "--out", str(tmp_path / "new"), "--device", "cpu", "--budget", "-1"]) == 2
    assert cli.main(["gpu-run", "--out", str(tmp_path / "new"), "--device", "cpu", "--repeats", "0"]) == 2
    assert not (tmp_path / "new").exists()


def test_gpu_run_repeats_give_every_row_its_processes():
    args = cli.build_parser().parse_args(["gpu-run", "--out", "x", "--repeats", "3", "--steps", "4"])
    assert {(c.repeats, c.steps) for c in gpu_run.configs(timing=gpu_run.timing_of(args))} == {(3, 4)}
    assert {c.repeats for c in gpu_run.configs()} == {1}


@pytest.mark.slow
@needs["jax"]
def test_gpu_run_end_to_end_on_cpu(tmp_path):
    """The prepared GPU script, run as a CPU smoke test: rows, HLO records, summary, provenance (native PyTorch
    rows, the quickest to start: the JAX rows take the same path and are exercised above). A budget spent
    after the first row leaves the second recorded as skipped, as on a lent GPU."""
    out = tmp_path / "gpu-backends"
    precision = reduced_precision()  # bf16 where this CPU has it: an emulated row is skipped (tests/runs/test_budget)
    rc = cli.main(["gpu-run", "--out", str(out), "--device", "cpu", "--model", "tiny-resnet", "--batch-size", "4",
                   "--steps", "2", "--min-time", "0", "--warmup", "1", "--precisions", precision, "--modes", "infer",
                   "--labels", "native PyTorch eager", "native torch.compile", "--budget", "0.001",
                   "--hlo-model", "tiny-resnet", "--hlo-batch-size", "2", "--image-size", "32"])
    assert rc == 0
    rows = json.loads((out / "bench.json").read_text())
    assert [(r["impl"], r["xla"], r["status"]) for r in rows] == [("native", "off", "ok"), ("native", "jit", "skipped")]
    assert rows[0]["gemm_gflops_now"] > 0 and rows[0]["mfu_vs_gemm_now"] > 0 and rows[0]["precision"] == precision
    assert "budget of 0.001 s" in rows[1]["reason"]
    records = json.loads((out / "hlo.json").read_text())
    assert [(r["mode"], r["stage"], r["precision"]) for r in records] == [("infer", "after", precision),
                                                                          ("train", "after", precision)]
    assert all(r["opcodes"]["convolution"] > 0 for r in records)
    summary = (out / "summary.md").read_text()
    assert "custom calls:" in summary and "jax" in summary
    assert json.loads((out / "provenance.json").read_text())["params"]["device"] == "cpu"
    assert sorted(p.name for p in out.iterdir()) == ["bench.csv", "bench.json", "hlo.json", "provenance.json",
                                                      "summary.md"]
    assert len(list((tmp_path / "gpu-backends-logs").iterdir())) == 1
