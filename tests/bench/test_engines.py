"""The other compilers (IREE, ONNX Runtime, OpenVINO) as benchmark backends, on the model exported once.

What each engine accepts is checked in milliseconds; what they measured is read from the quick run (its 03
exports tiny-resnet at 32² and times every engine on it), and the planted wrong modules are made from that
run's export: no export of their own (~20 s each).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_usage_error, native_bf16

from resnet_lab import export
from resnet_lab.bench import launcher
from resnet_lab.bench.config import BenchConfig, emulation_reason, validate
from resnet_lab.bench.sections import ENGINE_LABELS, OFFLINE, SINGLE_STREAM
from resnet_lab.core import host, requirements
from resnet_lab.core.choices import ENGINES
from resnet_lab.core.errors import UsageError
from resnet_lab.report.speed_results import Key

INSTALLED = {e: all(importlib.util.find_spec(m) for m in mods) for e, mods in
             {"iree": ("iree.compiler", "iree.runtime"), "onnxruntime": ("onnxruntime", "onnx"),
              "openvino": ("openvino", "onnx")}.items()}
needs = {e: pytest.mark.skipif(not ok, reason=f"{e} is not installed (pip install '.[compilers]')")
         for e, ok in INSTALLED.items()}


# ------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize("change, message", [
    ({"backend": "onnxruntime", "mode": "train"}, "mode 'train': onnxruntime runs the exported inference model"),
    ({"backend": "openvino", "precision": "fp16"}, "precision 'fp16': openvino runs the fp32 export"),
    ({"backend": "openvino", "recipe": "O3"}, "recipe 'O3' is not one of openvino's: latency, throughput"),
    ({"backend": "tensorflow", "recipe": "documented"}, "recipe 'documented': only iree, onnxruntime, openvino take"),
    ({"backend": "iree", "inter_op": 2}, "inter-op threads: ONNX Runtime's knob; iree takes intra-op threads"),
    ({"backend": "iree", "xla": "off"}, "xla 'off': iree always compiles the exported model"),
    ({"backend": "openvino", "replicas": 2}, "replicas 2: openvino runs one replica"),
    ({"backend": "onnxruntime", "device": "gpu"}, "device 'gpu': onnxruntime runs on the CPU here"),
])
def test_a_knob_an_engine_lacks_is_one_line(change, message):
    cfg = BenchConfig(model="tiny-resnet", **{"mode": "infer", "xla": "jit", **change})
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        validate(cfg)
    assert "\n" not in str(info.value)


def test_engine_rows_have_their_name_and_no_keras_in_their_worker():
    for engine in ENGINES:
        cfg = validate(BenchConfig(model="tiny-resnet", backend=engine, mode="infer", xla="jit", intra_op=2,
                                   inter_op=1 if engine == "onnxruntime" else None))
        env = launcher.worker_env(cfg, base={"KERAS_BACKEND": "jax"})
        assert "KERAS_BACKEND" not in env
    from resnet_lab.bench import identity

    cfg = BenchConfig(model="tiny-resnet", backend="iree", mode="infer", xla="jit", batch_size=1)
    assert identity.describe(validate(cfg)) == "iree · fp32 · llvm-cpu · b1 · recipe documented · infer · tiny-resnet"
    assert identity.as_row(cfg)["onednn"] == "n/a"


def test_cli_unknown_backend_and_training_on_an_engine_exit_2_before_any_import():
    assert_usage_error(["bench", "--backend", "tvm"], "resnet-lab bench: error: backend: 'tvm' is not one of")
    assert_usage_error(["bench", "--backend", "openvino", "--mode", "train"],
                       "resnet-lab bench: error: mode 'train': openvino runs the exported inference model")
    assert_usage_error(["ops", "tiny-resnet", "--ir", "onnx", "--iree"], "resnet-lab ops: error: --iree compiles")
    assert_usage_error(["ops", "tiny-resnet", "--ir", "stablehlo", "--iree"], "--iree runs the JAX training step")


def test_an_engine_not_installed_is_a_skipped_row_naming_the_pip_install(monkeypatch):
    real = requirements.installed
    monkeypatch.setattr(requirements, "installed", lambda dist: None if dist == "openvino" else real(dist))
    row = launcher.run_config(BenchConfig(model="tiny-resnet", backend="openvino", mode="infer", xla="jit"))
    assert row["status"] == "skipped"
    assert row["reason"] == f"openvino needs openvino, not installed ({requirements.TABLE['openvino'].install()})"


# ------------------------------------------------------------------------------------------ the check
NATIVE = native_bf16()  # this host, unmasked


@pytest.mark.parametrize("engine, mask, reason", [
    ("openvino", "avx512_bf16,amx*,avx_ne_convert", "this CPU has no bf16 instructions"),
    ("iree", host.AVX2_ONLY_MASK, "this CPU has no bf16 instructions"),
    ("onnxruntime", "", "ONNX Runtime's CPU execution provider computes the fp32 model"),
])
def test_a_bf16_row_without_a_bf16_path_is_skipped_with_its_reason_before_any_compile(monkeypatch, engine, mask,
                                                                                      reason):
    """The host's part (the capability table, masked here to a CPU without bf16) stops the row in the launcher and
    in the worker alike; the engine's own part (ONNX Runtime has no x86 bf16 kernels) in the engine's setup."""
    from resnet_lab.bench import measure

    monkeypatch.setenv(host.MASK_ENV, mask)
    cfg = validate(BenchConfig(model="tiny-resnet", backend=engine, mode="infer", xla="jit", precision="bf16",
                               export_dir="/nonexistent"))  # never read: the row stops first
    if mask:
        # the reason says the mask where it was the mask that took bf16 away (not on a CPU without bf16 anyway)
        assert emulation_reason(cfg).startswith(reason) and ("masked" in emulation_reason(cfg)) == NATIVE
        assert measure.measure(cfg) == {"status": "skipped", "reason": emulation_reason(cfg)}
    else:
        assert measure.setup_engine(cfg)["skip"].startswith(reason)


def test_compare_states_the_difference_and_the_tolerance():
    ref = np.array([[1.0, -4.0], [2.0, 0.5]])
    same = export.compare(ref + 1e-7, ref)
    assert same["check_ok"] and same["check_max_abs"] == pytest.approx(1e-7)
    assert same["check_max_rel"] == pytest.approx(1e-7 / 4) and same["check_tol"] == export.TOLERANCE["fp32"]
    off = export.compare(ref + np.array([[0, 0], [0, 0.01]]), ref)
    assert not off["check_ok"] and off["check_max_rel"] == pytest.approx(0.01 / 4)
    assert export.check_reason(off).startswith("output check failed: logits differ from Keras' by 0.0025")
    assert not export.compare(ref[:1], ref)["check_ok"]  # another shape
    assert not export.compare(ref * np.nan, ref)["check_ok"]


# ------------------------------------------------------------------------------------------ the quick run
def _quick_export(quick_run):
    """03's folder of the quick run, and its export of tiny-resnet at 32²: the cache entry its ``export.json``
    names (02 exported its focus model there too), which lies in the quick run's outputs root."""
    used = json.loads((quick_run.run_dir / export.USED).read_text())
    (where,) = [Path(e["path"]) for name, e in used.items() if name.startswith("tiny-resnet-32px-")]
    assert where.parent == quick_run.run_dir.parents[1] / "cache" / "export"
    return quick_run.run_dir / "03_benchmarks", where


@pytest.mark.slow
def test_every_engine_of_the_quick_run_agrees_with_keras_then_is_timed(quick_run):
    assert quick_run.statuses["03_benchmarks"] == "ok", quick_run.errors.get("03_benchmarks")
    out, where = _quick_export(quick_run)
    manifest = export.read_manifest(where)
    # the ONNX model a PyTorch user makes: the native module with the Keras weights, batch norm folded, every node
    # named after its module
    assert manifest["onnx_exporter"] == export.EXPORTER and manifest["native_max_abs"] < 1e-4
    assert manifest["onnx_layout"] == "channels_first" and manifest["onnx_nodes_named"] >= manifest["onnx_nodes"] - 2
    import onnx

    nodes = onnx.load(where / export.ONNX).graph.node
    assert not {"BatchNormalization", "Cast", "Identity"} & {n.op_type for n in nodes}
    assert "conv1/Conv" in {n.name for n in nodes}
    assert set(manifest["stablehlo"]) == {"1", "4"}  # SingleStream and Offline (quick.yaml: batch 4)
    assert "stablehlo.convolution" in (where / manifest["stablehlo"]["1"]).read_text()
    rows = json.loads((out / "bench_engines.json").read_text())
    labels = [f"{s} · {ENGINE_LABELS[e]}" for e in ENGINES for s in (SINGLE_STREAM, OFFLINE)]
    assert [r["label"] for r in rows if r["precision"] == "fp32"] == labels
    bf16 = [r for r in rows if r["precision"] == "bf16"]
    assert [r["label"] for r in bf16] == labels  # quick.yaml serves bf16 too
    for r in bf16:  # ONNX Runtime has no bf16 path on x86; the others agree with fp32 on photographs
        if r["backend"] == "onnxruntime" or not INSTALLED[r["backend"]] or not _has_bf16():
            assert r["status"] == "skipped" and r["reason"], r["label"]
            continue
        assert r["status"] == "ok", (r["label"], r["reason"])
        assert r["agree_ok"] and r["agree_max_rel"] <= r["agree_tol"] == export.AGREEMENT["bf16"]["max_rel"]
        assert r["agree_top1"] >= export.AGREEMENT["bf16"]["top1"] and r["recipe"]
    rows = [r for r in rows if r["precision"] == "fp32"]
    for r in rows:
        if not INSTALLED[r["backend"]]:
            assert r["status"] == "skipped" and "pip install" in r["reason"]
            continue
        assert r["agree_ok"] and r["agree_top1"] == 1.0 and r["agree_max_rel"] <= export.TOLERANCE["fp32"]
        assert r["status"] == "ok", (r["label"], r["reason"])
        assert r["check_ok"] and r["check_max_rel"] <= r["check_tol"] == export.TOLERANCE["fp32"]
        assert r["compile_s"] > 0 and r["images_per_sec"] > 0 and r["onednn"] == "n/a"
        assert json.loads(r["compile_stats"]) and "threads" in r["compiler"].lower()  # stated, with its flags
    results = json.loads((out / "results.json").read_text())
    installed = [ENGINE_LABELS[e] for e in ENGINES if INSTALLED[e]]
    assert sorted(results[Key.ENGINES_SINGLE_STREAM_P90_MS]) == sorted(installed)
    assert sorted(results[Key.ENGINES_OFFLINE_IMAGES_PER_SEC]) == sorted(installed)
    for name in ("compilers.csv", "compilers.png", "bench_engines.csv"):
        assert (out / name).stat().st_size > 0, name


def _has_bf16() -> bool:
    from resnet_lab.core import host

    return bool({"avx512_bf16", "amx_bf16"} & set(host.cpu_identity()["isa"] or []))


def _planted(quick_run, tmp_path):
    """A copy of the quick run's export with one op changed in each module: ReLU's max(x, 0) becomes min(x, 0)
    in the StableHLO, the ONNX model's first Relu a Neg."""
    _, where = _quick_export(quick_run)
    bad = export.folder(tmp_path, "tiny-resnet", 32)
    shutil.copytree(where, bad)
    for name in export.read_manifest(bad)["stablehlo"].values():
        text = (bad / name).read_text()
        assert "stablehlo.maximum" in text
        (bad / name).write_text(text.replace("stablehlo.maximum", "stablehlo.minimum", 1))
    if INSTALLED["onnxruntime"]:
        import onnx

        model = onnx.load(bad / export.ONNX)
        relu = next(n for n in model.graph.node if n.op_type == "Relu")
        relu.op_type = "Neg"
        onnx.save(model, bad / export.ONNX)
    return tmp_path


@pytest.mark.slow
@needs["iree"]
def test_a_planted_wrong_module_fails_the_check_and_is_never_timed(quick_run, tmp_path):
    root = _planted(quick_run, tmp_path)
    row = launcher.run_config(BenchConfig(model="tiny-resnet", image_size=32, batch_size=1, backend="iree",
                                          mode="infer", xla="jit", steps=2, min_time_s=0, export_dir=str(root)))
    assert row["status"] == "error" and row["reason"].startswith("output check failed: logits differ")
    assert row["check_ok"] is False and row["check_max_rel"] > row["check_tol"]
    assert row["images_per_sec"] is None and row["timed_steps"] is None and row["compile_s"] > 0
    if INSTALLED["onnxruntime"]:  # the ONNX model's planted op, checked in this process
        from resnet_lab.steps import engine_step

        ref = np.load(export.folder(root, "tiny-resnet", 32) / export.reference_file(1))
        step, _ = engine_step.make_engine_step("onnxruntime", export.folder(root, "tiny-resnet", 32),
                                               export.onnx_input(ref["images"]))
        assert not export.compare(step(), ref["logits"])["check_ok"]


# ------------------------------------------------------------------------------------------ a training step
@pytest.mark.slow
def test_iree_on_the_jax_training_step_agrees_with_jax_or_says_where_it_stops():
    """02's IREE training step (hlo.plan.iree_train) of the quick run's focus model (tiny-resnet at 8², batch 2;
    made here, beside the quick run, whose 02 leaves it out): the same loss and updated weights as JAX's own step,
    or the stage and the compiler's diagnostic, as data."""
    from resnet_lab.hlo import plan

    got = plan.iree_train("tiny-resnet", 8)
    if not INSTALLED["iree"] or importlib.util.find_spec("jax") is None:
        assert got["status"] == "skipped" and "pip install" in got["reason"]
        return
    assert (got["model"], got["image_size"], got["batch_size"]) == ("tiny-resnet", 8, 2)
    assert got["status"] in ("ok", "error") and got["stage"] in ("compile", "run", "compare"), got
    if got["status"] == "error":  # IREE 3.13: "failed to legalize operation 'stablehlo.select_and_scatter'"
        assert got["stage"] in ("compile", "run") and " error: " in got["reason"] and "\n" not in got["reason"]
        return
    assert got["agrees"] and got["loss_rel_diff"] <= export.TRAIN_TOLERANCE
    assert got["state_max_rel_diff"] <= export.TRAIN_TOLERANCE and got["compile_s"] > 0
