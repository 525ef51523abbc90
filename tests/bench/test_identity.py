"""What a row is: one set of identity fields, one name, one rule for "measured", one typed reader."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from resnet_lab import models
from resnet_lab.bench import identity, sections
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig, config_key, slug
from resnet_lab.report import native, speed
from resnet_lab.runs import compare

ROOT = Path(__file__).resolve().parents[2]
TINY = {"model": "tiny-resnet", "batch_size": 4, "steps": 4, "min_time_s": 0.0}


def _row(cfg: BenchConfig, status: str = "ok", speed_ips: float = 10.0, steps: int | None = None,
         seed: int = 0) -> dict:
    """A row as the launcher makes it: what the worker reported, through rows.make_row."""
    rng = np.random.default_rng(seed)
    n = cfg.steps if steps is None else steps
    times = [float(t) for t in rng.normal(cfg.global_batch / speed_ips, 0.01 * cfg.global_batch / speed_ips, n)]
    size = cfg.image_size or models.get_spec(cfg.model).input_size
    result = {"status": status, "step_times": times, "forward_macs": 1e9, "image_size": size,
              "xla_ran": False, "onednn_ran": True} if status == "ok" else {"status": status, "reason": "why"}
    return bench_rows.make_row(cfg, result, None)


# ------------------------------------------------------------------------------------------ the fields
def test_every_configuration_field_is_identity_protocol_or_the_label():
    fields = {f.name for f in dataclasses.fields(BenchConfig)}
    assert set(identity.IDENTITY).isdisjoint(identity.PROTOCOL)
    assert {*identity.IDENTITY, *identity.PROTOCOL, identity.LABEL} == fields
    assert set(identity.FUSED_BN_PAIR) == set(identity.IDENTITY) - {"fused_bn"}
    typed = [*identity.BOOL_FIELDS, *identity.INT_FIELDS, *identity.FLOAT_FIELDS, *identity.LIST_FIELDS]
    assert len(typed) == len(set(typed)) and set(typed) <= set(bench_rows.ALL_FIELDS)
    assert set(identity.IDENTITY) <= set(bench_rows.ROW_FIELDS)


def test_config_key_is_every_field_but_the_label():
    cfg = BenchConfig(**TINY, env={"KMP_BLOCKTIME": "0"}, workers=["a:1", "b:2"], task_index=1, label="x")
    d = cfg.to_dict()
    d.pop("label")
    assert config_key(cfg) == json.dumps(d, sort_keys=True)
    assert config_key(cfg) == config_key(dataclasses.replace(cfg, label="y"))
    assert config_key(cfg) != config_key(dataclasses.replace(cfg, steps=5))


# ------------------------------------------------------------------------------------------ reading
def test_an_old_csv_record_reads_with_the_values_of_its_time(tmp_path):
    path = tmp_path / "bench.csv"
    path.write_text("label,model,mode,batch_size,image_size,precision,xla,xla_ran,onednn,device,replicas,"
                    "intra_op,inter_op,data_format,status,reason,images_per_sec,stderr,mfu,dirty,env,tf_version\n"
                    "CPU,resnet50,train,32,224,fp32,off,False,on,cpu,1,,,channels_last,ok,,7.25,0.5,,True,,2.20\n")
    (row,) = identity.read_rows(path)
    assert row["impl"] == "keras" and row["fused_bn"] is False and row["backend"] == "tensorflow"
    assert row["batch_size"] == 32 and isinstance(row["batch_size"], int) and row["images_per_sec"] == 7.25
    assert row["xla_ran"] is False and row["dirty"] is True
    assert row["intra_op"] is None and row["reason"] is None and row["mfu"] is None and row["env"] is None
    assert row["tf_version"] == "2.20"  # text stays text: a version is not a number
    assert identity.is_measured(row)


def test_the_committed_record_reads_typed():
    rows = identity.read_rows(ROOT / "outputs" / "reference" / "bench.csv")
    assert rows and all(isinstance(r["batch_size"], int) and r["impl"] == "keras" and r["fused_bn"] is False
                        for r in rows)
    assert all(r["images_per_sec"] is None or isinstance(r["images_per_sec"], float) for r in rows)


def test_json_and_csv_of_one_row_read_alike(tmp_path):
    cfgs = [BenchConfig(**TINY, label="a"), BenchConfig(**TINY, fused_bn=True, intra_op=2, inter_op=1, label="b"),
            BenchConfig(**TINY, env={"KMP_BLOCKTIME": "0"}, label="c")]
    rows = [_row(c, seed=i) for i, c in enumerate(cfgs)] + [_row(cfgs[0], status="skipped")]
    bench_rows.save_rows(tmp_path, rows)
    from_csv, from_json = identity.read_rows(tmp_path / "bench.csv"), identity.read_rows(tmp_path / "bench.json")
    assert [{k: r[k] for k in bench_rows.ROW_FIELDS} for r in from_json] == from_csv
    assert from_json[0]["step_times"] == rows[0]["step_times"] and "step_times" not in from_csv[0]
    assert from_csv[1]["fused_bn"] is True and from_csv[1]["intra_op"] == 2
    with pytest.raises(ValueError, match="not a file of benchmark rows"):
        (tmp_path / "bad.json").write_text('{"rows": 1}')
        identity.read_rows(tmp_path / "bad.json")



@pytest.mark.parametrize(("cut", "message"), [
    (lambda text, lines: text[:40], r"cut short \(it ends inside a line\)"),  # inside the header: not "no rows"
    (lambda text, lines: lines[0] + lines[1][:30], r"cut short \(it ends inside a line\)"),
    (lambda text, lines: lines[0] + lines[1].replace(",", "", 3), "line 2 has"),  # a line of fewer cells
    (lambda text, lines: "", "empty"),
])
def test_a_csv_that_is_not_whole_is_an_error_naming_it(tmp_path, cut, message):
    bench_rows.save_rows(tmp_path, [_row(BenchConfig(**TINY, label=x), seed=i) for i, x in enumerate("ab")])
    path = tmp_path / "bench.csv"
    text = path.read_text()
    path.write_text(cut(text, text.splitlines(keepends=True)))
    with pytest.raises(ValueError, match=message) as info:
        identity.read_rows(path)
    assert str(info.value).startswith(str(path))
    (tmp_path / "bench.json").write_text((tmp_path / "bench.json").read_text()[:-20])
    with pytest.raises(ValueError, match="not a file of benchmark rows"):
        identity.read_rows(tmp_path / "bench.json")


# ------------------------------------------------------------------------------------------ matching
VARIANTS = [
    {}, {"image_size": 48}, {"backend": "jax"}, {"backend": "torch", "impl": "native", "model": "resnet50_v1.5"},
    {"env": {"ONEDNN_DEFAULT_FPMATH_MODE": "BF16"}}, {"fused_bn": True}, {"onednn_profile": True},
    {"mode": "infer"}, {"replicas": 2}, {"device": "gpu"}, {"intra_op": 1, "inter_op": 1},
    {"data_format": "channels_first"}, {"onednn": "off"}, {"xla": "jit"}, {"precision": "bf16"},
    {"workers": ["127.0.0.1:1", "127.0.0.1:2"], "task_index": 0},
]


@pytest.mark.parametrize("change", VARIANTS, ids=lambda c: ",".join(c) or "base")
def test_a_configuration_and_its_row_match_and_are_named_alike(tmp_path, change):
    cfg = BenchConfig(**{**TINY, **change})
    rows = [_row(cfg), _row(cfg, status="skipped")]
    if cfg.onednn_profile:  # the launcher puts the profile itself there; a run without one leaves it empty
        rows = [{**rows[0], "onednn_profile": json.dumps({"steps": 4})}]
    bench_rows.save_rows(tmp_path, rows)
    for row in [*rows, *identity.read_rows(tmp_path / "bench.csv"), *identity.read_rows(tmp_path / "bench.json")]:
        assert identity.match_key(row) == identity.match_key(cfg)
        assert identity.describe(row) == identity.describe(cfg)


def test_different_configurations_have_different_keys_and_names():
    cfgs = [BenchConfig(**{**TINY, **c}) for c in VARIANTS]
    assert len({identity.match_key(c) for c in cfgs}) == len(cfgs)
    assert len({identity.describe(c) for c in cfgs}) == len(cfgs)
    assert len({slug(c) for c in cfgs}) == len(cfgs)


def test_the_protocol_and_the_label_are_not_the_identity():
    cfg = BenchConfig(**TINY, label="a")
    again = dataclasses.replace(cfg, steps=20, warmup=5, max_time_s=300.0, gemm_check=True, label="b")
    assert identity.match_key(again) == identity.match_key(cfg) and config_key(again) != config_key(cfg)
    assert identity.match_key(cfg, identity.FUSED_BN_PAIR) == identity.match_key(
        dataclasses.replace(cfg, fused_bn=True), identity.FUSED_BN_PAIR)


# ------------------------------------------------------------------------------------------ names
def test_describe_is_stable():
    base = BenchConfig()
    assert identity.describe(base) == "fp32 · no XLA · oneDNN · b32"
    assert identity.describe(BenchConfig(precision="bf16", xla="jit", intra_op=2, inter_op=1)) == \
        "bf16 · XLA jit · oneDNN · b32 · 2/1 threads"
    assert identity.describe(BenchConfig(backend="jax", xla="jit", replicas=2)) == \
        "jax · fp32 · jax.jit · b32 · 2×cpu (emulated)"
    assert identity.describe(BenchConfig(backend="torch", impl="native", model="resnet50_v1.5", mode="infer",
                                         fused_bn=False, image_size=160)) == \
        "native torch · fp32 · eager · oneDNN · b32 · infer · resnet50_v1.5 · 160²"
    assert identity.describe(BenchConfig(fused_bn=True, device="gpu", data_format="channels_first")) == \
        "fp32 · no XLA · oneDNN · b32 · gpu · NCHW · fused BN"
    assert identity.describe({**bench_rows.static_fields(BenchConfig(label="CPU MKL"))}, labelled=True) == \
        "CPU MKL (fp32 · no XLA · oneDNN · b32)"
    assert speed.row_name is identity.describe


# ------------------------------------------------------------------------------------------ measured
def test_a_short_row_counts_the_same_for_the_headline_the_targets_and_compare(tmp_path):
    v15 = {"model": "resnet50_v1.5", "batch_size": 4, "steps": 10, "min_time_s": 0.0}
    tf = BenchConfig(**v15, fused_bn=True, label=sections.TF_LABEL)
    eager = BenchConfig(**v15, backend="torch", impl="native", label=sections.NATIVE_EAGER)
    short = _row(tf, speed_ips=20.0, steps=3)  # the time budget ran out after 3 of 10 steps
    assert short["status"] == "short" and short["ci95_low"] is not None
    rows = [short, _row(eager, speed_ips=10.0), _row(dataclasses.replace(eager, precision="bf16"), status="error")]
    assert [identity.is_measured(r) for r in rows] == [True, True, False]

    h = speed.headline(rows)
    assert h["n_ok"] == 2 and h["n_failed"] == 1 and h["best_images_per_sec"] == short["images_per_sec"]
    assert h["best_config"] == identity.describe(short)
    (fp32, _) = native.targets(rows)
    assert fp32["ratio"] == pytest.approx(short["images_per_sec"] / rows[1]["images_per_sec"])

    for name in ("base", "cand"):
        run = tmp_path / name
        bench_rows.save_rows(run / "03_benchmarks", rows, "bench_versus")
        (run / "provenance.json").write_text(json.dumps({"run": name}))
    matched = compare.compare(tmp_path / "base", tmp_path / "cand").matched
    compared = {m["config"]: m["method"] for m in matched}
    # on its steps, or against the noise model where this host kind has a committed record with one
    assert compared[identity.describe(short, labelled=True)] in ("step times", "1 vs 1 process(es), the kind's noise")
    assert [m["method"] is not None for m in matched] == [identity.is_measured(r) for r in rows]
