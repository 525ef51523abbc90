"""`resnet-lab ops` and resnet_lab.hlo.capture: capture, the text/proto cross-check, bad input before TensorFlow."""

from __future__ import annotations

import json

import pytest
from helpers import assert_usage_error

from resnet_lab import cli
from resnet_lab.core.choices import MODES, STAGES
from resnet_lab.hlo import capture as ops

TINY = dict(batch_size=2, image_size=8)  # tiny-resnet at 8×8: all of ResNet's op kinds (cifar_resnet20's set),
# compiled in a third of cifar_resnet20's time
TINY_ARGV = ["--batch-size", "2", "--image-size", "8"]


@pytest.mark.parametrize("argv, message", [
    (["resnet51"], "model: 'resnet51' is not one of: resnet18, "),
    (["resnet50", "--mode", "eval"], "mode: 'eval' is not one of: infer, train"),
    (["resnet50", "--stage", "middle"], "stage: 'middle' is not one of: before, after"),
    (["resnet50", "--precision", "int8"], "precision: 'int8' is not one of: fp32, bf16, fp16"),
    (["resnet50", "--platform", "tpu"], "platform: 'tpu' is not one of: cpu, gpu"),
    (["resnet50", "--format", "yaml"], "--format: 'yaml' is not one of: table, json, csv, markdown"),
    (["resnet50", "--batch-size", "0"], "batch size: 0 is not an integer >= 1"),
    (["resnet50", "--image-size", "16"], "resnet50"),
])
def test_bad_input_is_a_one_line_usage_error_before_tensorflow(argv, message):
    r = assert_usage_error(["ops", *argv], message)
    assert r.stdout == "" and r.stderr.startswith("resnet-lab ops: error: ") and r.stderr.count("\n") == 0


def _collapse_custom(kinds: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, n in kinds.items():
        out[k.split(":")[0]] = out.get(k.split(":")[0], 0) + n
    return out


def test_text_and_serialized_proto_agree_for_every_mode_and_stage():
    caps = ops.capture("tiny-resnet", serialized=True, **TINY)
    assert [(c.mode, c.stage) for c in caps] == [(m, s) for m in MODES for s in STAGES]
    for cap in caps:
        text, proto = ops.inventory(cap), ops.proto_inventory(cap.serialized)
        where = f"{cap.mode}/{cap.stage}"
        assert text["opcodes"] == proto["opcodes"], where
        assert text["num_computations"] == proto["num_computations"], where
        assert _collapse_custom(text["fusion_kinds"]) == proto["fusion_kinds"], where
        assert text["custom_call_targets"] == proto["custom_call_targets"], where
        assert text["compare_directions"] == proto["compare_directions"], where
    rows = {(c.mode, c.stage): ops.inventory(c) for c in caps}
    assert "fusion" in rows["train", "after"]["opcodes"]
    assert "fusion" not in rows["train", "before"]["opcodes"]
    assert "rsqrt" in rows["train", "before"]["opcodes"]  # batch norm
    train_only = set(rows["train", "before"]["opcodes"]) - set(rows["infer", "before"]["opcodes"])
    assert {"compare", "select", "reverse"} <= train_only  # ReLU gradient, conv input gradient


def test_table_and_csv_formats(capsys):
    assert cli.main(["ops", "tiny-resnet", "--mode", "train", "--format", "table", *TINY_ARGV]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny-resnet train before optimization (hlo), platform cpu, batch 2, 8²")
    assert "convolution" in out and "distinct convolutions" in out
    assert cli.main(["ops", "tiny-resnet", "--format", "csv", *TINY_ARGV]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "model,mode,stage,platform,precision,opcode,count,entry,control,fused,applied"
    assert any(line.startswith("tiny-resnet,infer,before,cpu,fp32,convolution,") for line in lines)


def test_gpu_platform_without_gpu_says_so(capsys):
    if ops.gpu_unavailable_reason() is None:
        pytest.skip("this host has a GPU")
    assert cli.main(["ops", "cifar_resnet20", "--platform", "gpu", "--image-size", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the 'gpu' platform needs a GPU" in err
    rows = ops.capture_matrix(["cifar_resnet20"], platforms=("gpu",), **TINY)
    assert len(rows) == 4 and all("needs a GPU" in r["skipped"] and r["opcodes"] == {} for r in rows)


@pytest.mark.slow
def test_cli_json_for_resnet50_equals_an_independent_count_of_the_proto(capsys):
    # the CLI's count is XLA's own: the serialized proto of the same step, at the CLI's defaults (batch 32, 224²)
    assert cli.main(["ops", "resnet50", "--mode", "infer", "--stage", "before", "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)
    for key in ("model", "mode", "stage", "platform", "opcodes", "batch_size", "image_size", "precision",
                "versions", "opcode_list"):
        assert key in row
    assert [row[k] for k in ("model", "mode", "stage", "platform")] == ["resnet50", "infer", "before", "cpu"]
    assert (row["batch_size"], row["image_size"], row["precision"]) == (32, 224, "fp32")
    (cap,) = ops.capture("resnet50", modes=("infer",), stages=("before",), serialized=True)
    proto = ops.proto_inventory(cap.serialized)["opcodes"]
    assert set(row["opcodes"]) == set(proto)
    for opcode, n in proto.items():
        assert row["opcodes"][opcode] == n, opcode
    assert row["opcodes"]["convolution"] == 53  # 49 in the residual blocks + 4 projection shortcuts
    assert row["opcodes"]["dot"] == 1


def test_jax_captures_start_before_tensorflows_and_are_read_after(monkeypatch):
    """capture_matrix starts JAX's child process (one per platform) before TensorFlow's captures run in this
    process, and reads its reply after them: on two cores both compile at once. A failed JAX child is rows that
    say why, as before."""
    events = []

    def start(sizes, *, platform, **kw):
        events.append(("jax started", platform))

        def finish():
            events.append(("jax read", platform))
            raise ops.UsageError(f"no JAX for {platform} here")
        return finish

    def tf_capture(name, **kw):
        events.append(("tf", kw["platform"]))
        return []

    monkeypatch.setattr(ops, "jax_unavailable_reason", lambda: None)
    monkeypatch.setattr(ops, "start_jax_models", start)
    monkeypatch.setattr(ops, "capture", tf_capture)
    rows = ops.capture_matrix(["cifar_resnet20"], modes=("infer",), stages=("before",), platforms=("cpu",),
                              backends=("tensorflow", "jax"), **TINY)
    assert events == [("jax started", "cpu"), ("tf", "cpu"), ("jax read", "cpu")]
    assert [(r["backend"], r["skipped"]) for r in rows] == [("jax", "no JAX for cpu here")]
