"""The reports' summaries and table views, on results the test writes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from resnet_lab.report.speed_results import Key as K
from resnet_lab.workbook import display, notebooks, summary

BENCH = {K.BEST_CONFIG: "bf16 · no XLA · oneDNN · b32", K.BEST_IMAGES_PER_SEC: 12.345, K.BEST_MFU: 0.4567,
         K.BEST_FP32_CONFIG: "fp32 · no XLA · oneDNN · b32", K.BEST_FP32_IMAGES_PER_SEC: 8.0, K.BEST_FP32_MFU: 0.3,
         K.IMAGES_PER_SEC_2017: {"CPU": 2.5, "CPU MKL": 7.25, "GPU": None}, K.N_ROWS: 9, K.N_OK: 7,
         K.N_SKIPPED: 2, K.N_FAILED: 0, K.IMAGES_PER_SEC_BACKENDS: {"JAX jit train": 6.5}}


def test_the_benchmark_summary_is_written_from_the_numbers():
    text = summary.summarize("03_benchmarks", BENCH)
    assert "**bf16 · no XLA · oneDNN · b32**, 12.3 img/s (MFU 45.7 %)" in text
    assert "fp32 · no XLA · oneDNN · b32, 8.0 img/s (MFU 30.0 %)" in text
    assert "CPU 2.5 (1.8); CPU MKL 7.2 (3.5) img/s" in text  # the 2017 note's figures in brackets
    assert "GPU" not in text.split("2017 rows here")[1].split("img/s")[0]  # a skipped row has no number
    assert "7 of 9 rows measured, 2 skipped" in text and "JAX jit train 6.5" in text
    assert summary.summarize("99_unknown", BENCH) is None and summary.summarize("03_benchmarks", {}) is None
    more = {**BENCH, K.TARGETS: [{"target": "TF fp32 train / native PyTorch eager fp32", "minimum": 1.1,
                                  "ratio": 1.234, "met": True},
                                 {"target": "TF bf16 train / native PyTorch eager fp32", "minimum": 1.5,
                                  "ratio": None, "met": None}],
            K.SINGLE_STREAM_P90_MS: {"TensorFlow": 21.25, "native PyTorch": None}, K.ROOFLINE_LOST_MS: 123.45}
    text = summary.summarize("03_benchmarks", more)
    assert "TF fp32 train / native PyTorch eager fp32: 1.23× (target ≥ 1.1×, met)." in text
    assert "bf16 train" not in text  # not measured: no sentence
    assert "SingleStream p90 latency, TensorFlow: 21.2 ms." in text and "native PyTorch:" not in text
    assert "lose 123.5 ms per step" in text


def test_selection_and_op_summaries():
    sel = summary.summarize("01_model_selection", {
        "chosen_model": "resnet50_v1.5", "chosen_candidate": "v1_5", "totals": {"v1": 0.5, "v1_5": 0.8, "v2": 0.1},
        "flips": []})
    assert "**resnet50_v1.5**" in sel and "0.80 against 0.50 for the runner-up v1, a margin of 0.30" in sel
    ops = summary.summarize("02_op_extraction", {
        "distinct_opcodes": {"r50/infer/after/cpu": 20, "r50/train/after/cpu": 31, "c20/train/after/cpu": 30},
        "focus_opcodes": {"r50/infer/after/cpu": []}, "backend_distinct_opcodes": {"jax/r50/train/after/cpu": 28},
        "skipped": [{"skipped": "no GPU visible"}] * 4})
    assert "**r50** (TensorFlow, per mode/stage/platform): infer/after/cpu 20; train/after/cpu 31" in ops
    assert "3 steps captured across 2 model(s); 4 skipped (no GPU visible)" in ops


def test_headline_figures_and_the_run_page(tmp_path):
    for nb, res in {"01_model_selection": {"chosen_model": "resnet50_v1.5"}, "03_benchmarks": BENCH,
                    "02_op_extraction": {"focus_opcodes": {"r50/train/before/cpu": []},
                                         "distinct_opcodes": {"r50/train/before/cpu": 25, "r50/train/after/cpu": 31,
                                                              "r50/infer/after/cpu": 20}}}.items():
        (tmp_path / nb).mkdir()
        (tmp_path / nb / "results.json").write_text(json.dumps(res))
    figures = summary.headline_figures(tmp_path)
    assert figures == {"selected model": "resnet50_v1.5", "distinct ops (train)": "25–31", "best img/s": "12.3 img/s",
                       "MFU": "30.0 %"}
    (tmp_path / "03_benchmarks.report.html").write_text("<html></html>")
    prov = {"status": "ok", "cpu": {"model": "Xeon", "available_cpus": 2}, "notebooks": [
        {"name": "03_benchmarks", "status": "ok", "seconds": 90}, {"name": "04_convergence", "status": "failed",
                                                                   "error": "ValueError: <bad>"}]}
    page = summary.write_run_page(tmp_path, prov).read_text()
    assert "<b>bf16 · no XLA · oneDNN · b32</b>" in page and '<a href="03_benchmarks.report.html">' in page
    assert "04_convergence.report.html" not in page  # only links to files that exist
    assert "ValueError: &lt;bad&gt;" in page and "1.5 min" in page


def test_a_table_view_formats_folds_and_says_what_was_skipped():
    df = pd.DataFrame({"label": ["CPU", "GPU", "XLA"], "images_per_sec": [2.345, None, 3.0],
                       "mfu": [0.1234, None, 0.2], "status": ["ok", "skipped", "ok"],
                       "reason": ["", "no GPU visible", ""], "extra": [1, 2, 3]})
    view = display.table(df, {"label": ("row", ""), "images_per_sec": ("speed", "img/s"), "mfu": ("MFU", "%")},
                         csv="03_benchmarks/bench.csv", drop_skipped=True).data
    assert "Skipped on this host, 1 row(s): GPU — no GPU visible." in view
    assert "<th>speed (img/s)</th>" in view and "2.3" in view and "12.3 %" in view and "extra" not in view
    assert "NaN" not in view and '<a href="03_benchmarks/bench.csv">bench.csv</a> (3 rows × 6 columns)' in view
    assert "<details>" not in view
    long = display.table(pd.DataFrame({"x": range(40)})).data
    assert long.startswith("<details><summary>40 rows")
    assert display.table(None) is None


def test_stablehlo_counts_are_grouped_by_backend_and_mode():
    text = summary.summarize("02_op_extraction", {
        "distinct_opcodes": {}, "stablehlo_walk_agrees": True,
        "stablehlo_distinct": {"tensorflow/a/infer": 16, "tensorflow/b/infer": 16, "jax/a/train": 26,
                               "jax/b/train": 25}})
    assert "every model alike unless named: tensorflow infer 16; jax train a 26, b 25" in text
    assert "(the text count and the MLIR walk agree op by op)" in text


def test_distinct_ops_across_irs_are_one_line_of_inference_counts():
    text = summary.summarize("02_op_extraction", {
        "distinct_opcodes": {}, "ir_distinct_ops": {"hlo/tensorflow/infer": 19, "stablehlo/jax/infer": 15,
                                                   "core-aten/torch/infer": 13, "tflite/tensorflow/infer": 6,
                                                   "hlo/tensorflow/train": 30},
        "ir_fused_activations": {"tflite/tensorflow/infer": {"CONV_2D+RELU": 33, "ADD+RELU": 16}}})
    assert ("across IRs: HLO (tensorflow) 19; StableHLO (jax) 15; Core ATen (torch) 13; TFLite (tensorflow) 6 "
            "(TFLite fuses 49 activations") in text


def test_a_saved_table_is_written_once_and_shown_linked_to_its_csv(tmp_path):
    out = tmp_path / "02_op_extraction"
    out.mkdir()
    df = pd.DataFrame({"model/infer": [3, 0], "other/infer": [1, 2]}, index=pd.Index(["add", "dot"], name="opcode"))
    view = display.saved_table(out, "opcode_table", df, index=True, view=df[["model/infer"]]).data
    assert (out / "opcode_table.csv").read_text().splitlines() == ["opcode,model/infer,other/infer", "add,3,1",
                                                                   "dot,0,2"]
    assert "other/infer" not in view and "<th>add</th>" in view  # the view, with its index
    assert '<a href="02_op_extraction/opcode_table.csv">opcode_table.csv</a> (2 rows × 3 columns)' in view
    rows = display.saved_table(out, "agreement", [{"stage": "before", "same": True}]).data
    assert "before" in rows and (out / "agreement.csv").read_text().startswith("stage,same")
    assert display.saved_table(out, "nothing", None) is None and not (out / "nothing.csv").exists()


def test_saved_tables_writes_every_frame_and_shows_the_ones_asked_for(tmp_path):
    frames = {"convolutions train before": pd.DataFrame({"n": [1]}), "dots train after": pd.DataFrame({"n": [2]}),
              "dots infer after": pd.DataFrame({"n": [3]})}
    view = display.saved_tables(tmp_path, frames, "{}_r20", show=["dots train after", "convolutions train before"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "convolutions_train_before_r20.csv", "dots_infer_after_r20.csv", "dots_train_after_r20.csv"]
    html = view.data
    assert html.index("dots_train_after_r20.csv") < html.index("convolutions_train_before_r20.csv")
    assert "dots_infer_after_r20.csv" not in html
    assert display.saved_tables(tmp_path, {}, "{}", show=["x"]) is None


def test_a_missing_figure_is_one_sentence(tmp_path):
    assert display.figure_file(tmp_path / "deltas.png", "nothing to plot").data == "nothing to plot"


def test_the_2017_lists_coverage_is_one_line():
    text = summary.summarize("02_op_extraction", {
        "distinct_opcodes": {}, "coverage_2017": {"as today's opcodes/train": {
            "missing_ops": ["convert", "rsqrt"], "share_instructions": 10.85, "share_flops": 72.45,
            "layers_blocked": 111}}})
    assert ("The 2017 list, read as today's opcodes, lacks for the training step: convert, rsqrt (10.85 % of its "
            "instructions; 111 layers blocked, 72.45 % of its convolution and dot FLOPs in blocked passes).") in text


def test_one_registry_entry_per_notebook():
    names = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
    assert sorted(notebooks.NOTEBOOKS) == names
    assert all(name == nb.name for name, nb in notebooks.NOTEBOOKS.items())
    notebooks.check("99_unknown", {"anything": -1})  # a notebook not listed gets the runner's type checks only
