"""resnet_lab.report.ops on handwritten records: notebook 02's headline, op unions, backend comparison."""

from __future__ import annotations

import pytest

from resnet_lab.report import ops


def _rec(model: str, mode: str, stage: str, opcodes: dict[str, int], backend: str = "tensorflow",
         platform: str = "cpu") -> dict:
    return {"model": model, "mode": mode, "stage": stage, "platform": platform, "backend": backend,
            "opcodes": opcodes, "num_instructions": sum(opcodes.values()), "capture_seconds": 1.5,
            "convolutions": [{"n": 1}] * opcodes.get("convolution", 0), "custom_call_targets": {}}


ROWS = [
    _rec("r20", "infer", "before", {"convolution": 3, "add": 2}),
    _rec("r20", "train", "before", {"convolution": 9, "add": 4, "select": 2}),
    _rec("r20", "train", "after", {"fusion": 5, "convolution": 9}),
    _rec("r20", "train", "before", {"convolution": 9, "add": 4, "while": 1}, backend="jax"),
    _rec("r56", "train", "before", {"convolution": 27, "rsqrt": 3}),
    {"model": "r20", "mode": "infer", "stage": "before", "platform": "gpu", "backend": "tensorflow",
     "skipped": "the 'gpu' platform needs a GPU", "opcodes": {}},
]


def test_opcode_union_is_every_stage_of_one_step():
    assert ops.opcode_union(ROWS, "r20") == {"convolution", "add", "select", "fusion"}
    assert ops.opcode_union(ROWS, "r20", backend="jax") == {"convolution", "add", "while"}
    assert ops.opcode_union(ROWS, "r20", platform="gpu") == set()  # skipped records count for nothing


def test_backend_comparison_needs_two_backends():
    frame = ops.backend_comparison(ROWS, "r20")
    assert frame.loc["while", "only_in"] == "jax" and frame.loc["select", "only_in"] == "tensorflow"
    assert frame.loc["convolution", "only_in"] == ""
    assert ops.backend_comparison(ROWS, "r56") is None


def test_headline_is_keyed_by_configuration_and_lists_what_was_skipped():
    h = ops.headline(ROWS, "r20", opcode_list={"source": "x"}, legacy={"n": 1},
                        dump={"agreement": [{"stage": "before", "same_opcode_set": True}], "seconds": 2.0,
                              "regex_2017_today": ["add"]})
    assert h["distinct_opcodes"] == {"r20/infer/before/cpu": 2, "r20/train/before/cpu": 3,
                                     "r20/train/after/cpu": 2, "r56/train/before/cpu": 2}  # TensorFlow only
    assert h["instructions"]["r56/train/before/cpu"] == 30
    assert h["focus_opcodes"]["r20/train/after/cpu"] == ["convolution", "fusion"]
    assert "r56/train/before/cpu" not in h["focus_opcodes"]
    assert h["focus_conv_configs"] == {"r20/infer/before/cpu": 3, "r20/train/before/cpu": 9,
                                       "r20/train/after/cpu": 9}
    assert h["backend_distinct_opcodes"]["jax/r20/train/before/cpu"] == 3
    assert h["skipped"] == [{"backend": "tensorflow", "model": "r20", "mode": "infer", "stage": "before",
                             "platform": "gpu", "skipped": "the 'gpu' platform needs a GPU"}]
    assert h["backend_only_in"] is None and h["legacy_2017"] == {"n": 1} and h["opcode_list"] == {"source": "x"}
    assert h["dump"] == {"same_opcode_set": {"before": True}, "seconds": 2.0, "regex_2017_today": ["add"]}
    with_backends = ops.headline(ROWS, "r20", backend_ops=ops.backend_comparison(ROWS, "r20"))
    assert with_backends["backend_only_in"] == {"while": "jax", "select": "tensorflow", "fusion": "tensorflow"}


@pytest.mark.parametrize("keys, label", [(("model", "mode", "stage"), "r20/infer/before"),
                                         (("backend", *ops.CONFIG), "tensorflow/r20/infer/before/cpu")])
def test_config_label(keys, label):
    assert ops.config_label(ROWS[0], keys) == label


def test_model_columns_keep_one_model_and_the_opcodes_it_uses():
    import pandas as pd

    pivot = pd.DataFrame({"r20/train/after/cpu": [3, 0, 0], "r20/infer/after/cpu": [1, 0, 0],
                          "r50/train/after/cpu": [2, 5, 0]}, index=["add", "dot", "iota"])
    view = ops.model_columns(pivot, "r20")
    assert list(view.columns) == ["r20/train/after/cpu", "r20/infer/after/cpu"] and list(view.index) == ["add"]


def test_stablehlo_convolutions_of_one_record():
    records = [{"model": "m", "mode": "infer", "backend": "jax", "convolutions": [
        {"lhs": "tensor<2x8x8x3xf32>", "rhs": "tensor<3x3x3x16xf32>", "result": "tensor<2x8x8x16xf32>",
         "window": "stride = [1, 1], pad = [[1, 1], [1, 1]]", "count": 1},
        {"lhs": "tensor<2x8x8x16xf32>", "rhs": "tensor<3x3x16x16xf32>", "result": "tensor<2x8x8x16xf32>",
         "window": "stride = [1, 1], pad = [[1, 1], [1, 1]]", "count": 6}]},
        {"model": "m", "mode": "train", "backend": "jax", "convolutions": []}]
    frame = ops.stablehlo_conv_frame(records, "m")
    assert frame["count"].tolist() == [6, 1] and list(frame.columns) == ["lhs", "rhs", "result", "window", "count"]
    assert ops.stablehlo_conv_frame(records, "m", backend="tensorflow") is None
    assert ops.stablehlo_conv_frame(None, "m") is None


def test_notebook_02_views_of_one_model_and_of_no_ir_table():
    summary = ops.summary_frame([{**r, "num_computations": 1, "dots": []} if "skipped" not in r else r
                                    for r in ROWS])
    view = ops.capture_view(summary, model="r56")
    assert list(view["label"]) == ["tensorflow r56 train/before/cpu"] and list(view["status"]) == ["ok"]
    assert set(ops.capture_view(summary)["status"]) == {"ok", "skipped"}
    assert ops.ir_mapping(None) is None  # no IR table (one IR asked for): no name map


def test_stablehlo_headline_counts_compute_ops_and_the_walk():
    stable = [{"backend": "jax", "model": "r20", "mode": "infer", "compute_ops": {"add": 2, "convolution": 3},
               "walk_agrees": True},
              {"backend": "tensorflow", "model": "r20", "mode": "infer", "compute_ops": {"add": 1},
               "walk_agrees": False}]
    assert ops.stablehlo_headline(stable) == {
        "stablehlo_distinct": {"jax/r20/infer": 2, "tensorflow/r20/infer": 1}, "stablehlo_walk_agrees": False}
    assert ops.stablehlo_headline([]) == {"stablehlo_distinct": {}, "stablehlo_walk_agrees": None}


def test_no_fit_dump_says_why():
    assert "dump_fit" in ops.describe_dump(None) and ops.dump_agreement(None) is None
