"""`resnet-lab compare`: two runs side by side, on run folders the test makes and on the committed record."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_usage_error, run_cli

from resnet_lab import compare
from resnet_lab.bench import rows as rows_mod
from resnet_lab.bench.config import BenchConfig

ROOT = Path(__file__).resolve().parents[1]


def _run(path: Path, speeds: dict[str, float], opcodes: dict[str, int], seed: int, cpu: str = "AMD EPYC",
         load: float = 0.1, busy: bool = False) -> Path:
    """A run folder: provenance, one 03_benchmarks row per label (20 steps around 32 / speed seconds), one
    op inventory. ``load``: the 1-minute load average the rows recorded; ``busy``: other processes took half
    the host's CPU time during their timed steps (else 2 %)."""
    rng = np.random.default_rng(seed)
    rows = []
    for label, speed in speeds.items():
        cfg = BenchConfig(model="tiny-resnet", batch_size=32, steps=20, label=label,
                          xla="jit" if "xla" in label else "off")
        times = list(rng.normal(32 / speed, 0.02 * 32 / speed, 20))
        static = {"label": label, "model": cfg.model, "mode": cfg.mode, "batch_size": 32, "global_batch": 32,
                  "image_size": 32, "precision": "fp32", "xla": cfg.xla, "onednn": "on", "backend": "tensorflow",
                  "device": "cpu", "replicas": 1, "data_format": "channels_last", "loadavg_1m": load}
        row = rows_mod.make_row(cfg, {"status": "ok", "step_times": times, "forward_macs": 1e9}, None, static)
        row["cpu_util"], row["host_util"] = (48.0, 98.0) if busy else (96.0, 98.0)
        rows.append(row)
    (path / "03_benchmarks").mkdir(parents=True)
    (path / "03_benchmarks" / "bench_2017.json").write_text(json.dumps(rows))
    (path / "02_op_extraction").mkdir()
    conv = [{"lhs": "f32[32,8,8,16]", "rhs": "f32[3,3,16,16]", "count": 4}]
    (path / "02_op_extraction" / "inventories.json").write_text(json.dumps([
        {"model": "tiny-resnet", "backend": "tensorflow", "mode": "train", "stage": "after", "platform": "cpu",
         "precision": "fp32", "batch_size": 32, "image_size": 32, "opcodes": opcodes, "convolutions": conv,
         "dots": []}]))
    (path / "provenance.json").write_text(json.dumps({
        "run": path.name, "host": "vm", "git": {"commit": f"c{seed}", "dirty": False},
        "packages": {"tensorflow-cpu": "2.21.0"}, "cpu": {"model": cpu, "available_cpus": 2, "isa": {"avx512f": True}},
        "onednn": {"enabled": True}, "gpus": []}))
    return path


OPS = {"convolution": 4, "add": 10, "fusion": 3}


def test_a_slower_candidate_is_a_regression_and_an_identical_op_set_is_said_plainly(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0, "xla": 3.0}, OPS, 0)
    cand = _run(tmp_path / "cand", {"CPU MKL": 5.4, "xla": 3.0}, OPS, 1)  # 10 % slower, XLA unchanged
    result = compare.compare(base, cand, threshold_pct=5)
    by = {m["config"].split()[0]: m for m in result["throughput"]["matched"]}
    assert by["CPU"]["verdict"] == "slower" and by["CPU"]["regression"]
    assert -13 < by["CPU"]["delta_pct"] < -7 and by["CPU"]["method"] == "step times"
    assert by["xla"]["verdict"] == "no significant change" and not by["xla"]["regression"]
    assert result["ops_identical"] and compare.exit_code(result) == 1
    md = compare.to_markdown(result)
    assert "1 regression(s)" in md and "identical" in md
    assert [e["fact"] for e in result["environment"]] == ["commit"] and not result["warnings"]


def test_op_changes_and_a_busy_machine_are_reported(tmp_path):
    # the baseline's load average still remembers a burst before it (5.0 on 2 CPUs), its timed steps were quiet
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0, load=5.0)
    cand = _run(tmp_path / "cand", {"CPU MKL": 6.0, "xla jit": 1.0},
                {"convolution": 4, "add": 12, "custom-call": 1}, 1, busy=True)
    result = compare.compare(base, cand)
    (ops,) = result["ops"]
    assert ops["added"] == ["custom-call"] and ops["removed"] == ["fusion"] and ops["changed"] == {"add": [10, 12]}
    assert not ops["identical"] and not result["ops_identical"]
    assert result["throughput"]["only_in_candidate"] and not result["throughput"]["only_in_baseline"]
    (busy,) = [w for w in result["warnings"] if "busy machine" in w]
    assert busy.startswith("the candidate was measured on a busy machine: other processes used up to 50 %")
    facts = {e["fact"]: e for e in result["environment"]}
    assert facts["max others' CPU share while measuring (%)"] == {
        "fact": "max others' CPU share while measuring (%)", "baseline": 2.0, "candidate": 50.0}
    assert compare.exit_code(result) == 0


def test_across_host_kinds_speeds_are_shown_and_no_regression_is_counted(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0, cpu="Intel Xeon")
    cand = _run(tmp_path / "cand", {"CPU MKL": 5.4}, {**OPS, "custom-call": 1}, 1)  # 10 % slower, on an AMD
    result = compare.compare(base, cand, threshold_pct=5)
    (m,) = result["throughput"]["matched"]
    assert m["verdict"] == "slower" and -13 < m["delta_pct"] < -7 and not m["regression"]  # shown, not counted
    assert result["regressions"] == [] and compare.exit_code(result) == 0
    assert result["host_kinds"] == {"baseline": "Intel Xeon, 2 CPUs", "candidate": "AMD EPYC, 2 CPUs", "same": False}
    sentence = "different host kinds: Intel Xeon, 2 CPUs vs AMD EPYC, 2 CPUs — speeds shown, no verdict gated"
    assert sentence in result["warnings"]
    md = compare.to_markdown(result)
    assert sentence in md.split("## Throughput", 1)[1] and "regression" not in md
    assert "not judged (other host kind)" in md and "added custom-call" in md  # op differences as ever
    assert compare.headline(result).startswith("Against base: different host kinds (Intel Xeon, 2 CPUs vs AMD EPYC")
    r = run_cli("compare", str(base), str(cand))
    assert r.returncode == 0 and "none counted across host kinds" in r.stdout, r.stdout + r.stderr


def test_cli_writes_every_output_and_gates_on_the_threshold(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0)
    cand = _run(tmp_path / "cand", {"CPU MKL": 5.4}, OPS, 1)
    r = run_cli("compare", str(base), str(cand), "--out", str(tmp_path / "cmp"), "--format", "json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["regressions"]
    assert sorted(p.name for p in (tmp_path / "cmp").iterdir()) == [
        "comparison.json", "comparison.md", "deltas.png", "throughput.csv"]
    assert run_cli("compare", str(base), str(cand), "--threshold", "20").returncode == 0  # 10 % < 20 %


def test_bad_inputs_are_one_line_exit_2_and_write_nothing(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0)
    (tmp_path / "empty").mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "provenance.json").write_text("{}")
    out = tmp_path / "cmp"
    assert_usage_error(["compare", str(tmp_path / "nope"), str(base), "--out", str(out)], "is not a folder")
    assert_usage_error(["compare", str(tmp_path / "empty"), str(base)], "has no provenance.json")
    assert_usage_error(["compare", str(other), str(base)], "has no benchmark rows")
    unrelated = _run(tmp_path / "unrelated", {}, {}, 2)
    (unrelated / "03_benchmarks" / "bench_2017.json").write_text(json.dumps([{"model": "resnet50", "mode": "infer"}]))
    assert_usage_error(["compare", str(unrelated), str(base), "--out", str(out)], "nothing in common")
    assert not out.exists()
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "comparison.md").write_text("an earlier result")
    assert_usage_error(["compare", str(base), str(base), "--out", str(earlier)], "is not an empty folder")
    assert (earlier / "comparison.md").read_text() == "an earlier result"


def test_the_committed_record_against_itself():
    ref = ROOT / "outputs" / "reference"
    result = compare.compare(ref, ref)
    assert result["throughput"]["matched"] and result["ops"]
    assert result["ops_identical"] and not result["environment"]
    assert {m["verdict"] for m in result["throughput"]["matched"]} <= {"no significant change"} | {
        m["verdict"] for m in result["throughput"]["matched"] if m["verdict"].startswith("not compared")}
    assert all(m["method"] in (None, "summary columns") for m in result["throughput"]["matched"])
    assert compare.exit_code(result) == 0


@pytest.mark.parametrize("value", [-1.0])
def test_negative_threshold_is_refused(tmp_path, value):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0)
    with pytest.raises(compare.UsageError, match="--threshold"):
        compare.compare(base, base, value)


def test_one_opcode_and_one_convolution_shape_apart(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0)
    cand = _run(tmp_path / "cand", {"CPU MKL": 6.0}, {**OPS, "reduce-window": 1}, 1)
    inv = json.loads((cand / "02_op_extraction" / "inventories.json").read_text())
    inv[0]["convolutions"] = [{"lhs": "f32[32,8,8,16]", "rhs": "f32[1,1,16,32]", "count": 4}]
    (cand / "02_op_extraction" / "inventories.json").write_text(json.dumps(inv))
    (ops,) = compare.compare(base, cand)["ops"]
    assert ops["added"] == ["reduce-window"] and not ops["removed"] and not ops["changed"]
    assert len(ops["convolutions"]["added"]) == len(ops["convolutions"]["removed"]) == 1
    assert "1,1,16,32" in json.dumps(ops["convolutions"]["added"]) and "3,3,16,16" in json.dumps(
        ops["convolutions"]["removed"])


def _as_run(run: Path, name: str, started: str, notebooks: dict[str, str]) -> Path:
    prov = json.loads((run / "provenance.json").read_text())
    prov.update(params={"name": name}, started_at=started,
                notebooks=[{"name": n, "status": s} for n, s in notebooks.items()])
    (run / "provenance.json").write_text(json.dumps(prov))
    return run


REFERENCE_CPU = "Intel(R) Xeon(R) Processor"  # the committed record's host kind: this CPU, 2 CPUs


def test_the_default_baseline_is_the_newest_earlier_run_like_this_one(tmp_path, monkeypatch):
    outputs = tmp_path / "outputs"
    runs = outputs / "runs"
    mk = lambda folder, seed, cpu="AMD EPYC": _run(runs / folder, {"CPU MKL": 6.0}, OPS, seed, cpu=cpu)  # noqa: E731
    ok = {"02_op_extraction": "ok", "03_benchmarks": "ok"}
    a = _as_run(mk("a-default", 0), "default", "2026-12-01T10:00", ok)
    _as_run(mk("b-default", 1), "default", "2026-12-01T11:00", {**ok, "03_benchmarks": "failed"})
    _as_run(mk("c-quick", 2), "quick", "2026-12-01T11:30", ok)
    _as_run(mk("g-default", 6, cpu="Intel Xeon"), "default", "2026-12-01T11:45", ok)  # another host kind
    _as_run(mk("e-default", 3), "default", "2026-12-01T13:00", ok)  # later than the candidate
    cand = _as_run(mk("d-default", 4), "default", "2026-12-01T12:00", {**ok, "05_compare": "running"})
    assert compare.default_baseline(cand, outputs)[0] == a
    monkeypatch.setenv("RESNET_LAB_RUN_DIR", str(cand))
    base, got, why = compare.resolve(outputs=outputs)
    assert (base, got) == (a, cand) and "newest earlier 'default' run" in why and "AMD EPYC, 2 CPUs" in why
    assert compare.resolve("c-quick", "", outputs)[0] == runs / "c-quick"
    with pytest.raises(compare.UsageError, match="baseline_run: 'nope' is not a folder"):
        compare.resolve("nope", "", outputs)
    # none like it: the committed record, where it was measured on this host kind
    lone = _as_run(mk("f-other", 5, cpu=REFERENCE_CPU), "other", "2026-12-01T12:00", ok)
    base, why = compare.default_baseline(lone, outputs)
    assert base == ROOT / "outputs" / "reference" and why.startswith("the committed record of this host kind")
    # ... and no baseline at all where it was not: said, compared with nothing, nothing gated
    alone = _as_run(mk("h-other", 7), "other", "2026-12-01T12:00", ok)
    base, why = compare.default_baseline(alone, outputs)
    assert base is None and why.startswith("no comparable baseline: no earlier 'other' run") and "AMD EPYC" in why
    result = compare.report(tmp_path / "cmp", "", str(alone), 5.0, outputs)
    assert result["status"] == compare.NO_BASELINE and result["regressions"] == [] and compare.exit_code(result) == 0
    assert compare.headline(result).startswith("No comparable baseline: ")
    assert compare.intro_markdown(result).endswith("Candidate: `h-other`.")
    assert [p.name for p in (tmp_path / "cmp").iterdir()] == ["comparison.json"]


def _csv_record(path: Path, cpu: str, speeds: dict[str, float], seed: int) -> Path:
    """A record of CSVs (the layout of outputs/reference): provenance.json and bench.csv."""
    _run(path, speeds, OPS, seed, cpu=cpu)
    rows = json.loads((path / "03_benchmarks" / "bench_2017.json").read_text())
    for sub in ("03_benchmarks", "02_op_extraction"):
        for f in (path / sub).iterdir():
            f.unlink()
        (path / sub).rmdir()
    (path / "bench.csv").write_text(rows_mod.rows_to_csv(rows))
    return path


def test_a_reference_keeps_one_record_per_host_kind(tmp_path):
    outputs = tmp_path / "outputs"
    ref = _csv_record(outputs / "reference", "Intel Xeon", {"CPU MKL": 6.0}, 0)  # the flat layout: its own kind
    amd = _csv_record(ref / "hosts" / "amd-epyc-2cpus", "AMD EPYC", {"CPU MKL": 6.0}, 1)
    assert compare.records.HostKind("AMD EPYC", 2).slug() == "amd-epyc-2cpus"
    h200 = compare.records.HostKind(REFERENCE_CPU, 16, ("NVIDIA H200",))
    assert h200.slug() == "intel-xeon-processor-16cpus-nvidia-h200"
    ok = {"03_benchmarks": "ok"}
    mk = lambda name, cpu, speed, seed: _as_run(  # noqa: E731
        _run(outputs / "runs" / name, {"CPU MKL": speed}, OPS, seed, cpu=cpu), "x", "2026-12-01T10:00", ok)
    on_amd, on_intel, on_arm = mk("a-x", "AMD EPYC", 5.4, 2), mk("b-x", "Intel Xeon", 6.0, 3), mk("c-x", "Arm", 6, 4)
    assert compare.default_baseline(on_amd, outputs)[0] == amd
    assert compare.default_baseline(on_intel, outputs)[0] == ref
    assert compare.default_baseline(on_arm, outputs)[0] is None
    # compare REFERENCE CANDIDATE: the record of the candidate's kind, judged as ever
    r = run_cli("compare", str(ref), str(on_amd), "--format", "json")
    assert r.returncode == 1 and json.loads(r.stdout)["baseline"]["path"] == str(amd), r.stdout + r.stderr
    # a kind it has no record of: its top-level record, another kind, speeds shown and not judged
    r = run_cli("compare", str(ref), str(on_arm))
    assert r.returncode == 0 and "different host kinds: Intel Xeon, 2 CPUs vs Arm, 2 CPUs" in r.stdout, r.stdout
    # a reference of per-kind folders only, none of this kind: no comparable baseline, exit 0
    (ref / "provenance.json").unlink()
    r = run_cli("compare", str(ref), str(on_arm))
    assert r.returncode == 0 and r.stdout.startswith("no comparable baseline: ") and "AMD EPYC, 2 CPUs" in r.stdout


def _cut(path: Path, at: str | int) -> None:
    """Truncate a file: just before the first occurrence of ``at`` (text), or to ``at`` bytes."""
    text = path.read_text()
    path.write_text(text[:text.index(at)] if isinstance(at, str) else text[:at])


@pytest.mark.parametrize("damage", ["csv mid-header", "csv mid-row", "csv between rows", "json", "provenance",
                                    "op inventory"])
def test_a_damaged_record_is_one_line_naming_the_file_and_exit_2(tmp_path, damage):
    """Never a verdict from what is left: a CSV cut inside its header would read as 'no rows', and another
    file's rows of the same configuration would stand in for it."""
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0)
    if damage.startswith("csv"):
        cand = _csv_record(tmp_path / "cand", "AMD EPYC", {"CPU MKL": 5.4, "xla": 3.0}, 1)
        # another file of the record with the same configuration, which must not stand in for bench.csv's
        (cand / "bench_backends.csv").write_text((cand / "bench.csv").read_text())
        bad = cand / "bench.csv"
        lines = bad.read_text().splitlines(keepends=True)
        if damage == "csv mid-header":
            _cut(bad, ",batch_size,")
        elif damage == "csv mid-row":
            _cut(bad, len(lines[0]) + len(lines[1]) + 20)
        else:  # a run folder's CSV cut exactly between two lines: its JSON twin has more rows
            cand = _run(tmp_path / "cand2", {"CPU MKL": 5.4, "xla": 3.0}, OPS, 1)
            rows = json.loads((cand / "03_benchmarks" / "bench_2017.json").read_text())
            bad = cand / "03_benchmarks" / "bench_2017.csv"
            bad.write_text(rows_mod.rows_to_csv(rows[:1]))
    else:
        cand = _run(tmp_path / "cand", {"CPU MKL": 5.4}, OPS, 1)
        bad = {"json": cand / "03_benchmarks" / "bench_2017.json", "provenance": cand / "provenance.json",
               "op inventory": cand / "02_op_extraction" / "inventories.json"}[damage]
        _cut(bad, len(bad.read_text()) // 2)
    r = assert_usage_error(["compare", str(base), str(cand)], str(bad))
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("resnet-lab compare: error: CANDIDATE: ")


def test_the_report_of_runs_with_nothing_in_common_is_an_answer_and_the_index_links_it(tmp_path):
    from resnet_lab.workbook import runner

    outputs = tmp_path / "outputs"
    base = _as_run(_run(outputs / "runs" / "a-x", {"CPU MKL": 6.0}, OPS, 0), "x", "2026-12-01T10:00", {})
    cand = _as_run(_run(outputs / "runs" / "b-x", {"CPU MKL": 5.4}, OPS, 1), "x", "2026-12-01T11:00", {})
    result = compare.report(cand / compare.NOTEBOOK, "", str(cand), 5.0, outputs)
    assert result["status"] == "compared" and result["baseline"]["name"] == "a-x" and result["regressions"]
    assert (cand / compare.NOTEBOOK / "deltas.png").exists()
    index = runner.write_index(outputs).read_text()
    assert f'href="runs/b-x/{compare.NOTEBOOK}.report.html">Against a-x: 1 regression(s) beyond 5 %' in index
    assert compare.intro_markdown(result).startswith(f"**{compare.headline(result)}**\n\nBaseline: `a-x`, ")
    assert compare.record_values(result) == {"status": "compared", "headline": compare.headline(result),
                                             "baseline": "a-x", "candidate": "b-x", "regressions": 1,
                                             "ops_identical": True}

    other = _run(tmp_path / "other", {"XLA": 6.0}, {}, 2)
    (other / "02_op_extraction" / "inventories.json").write_text("[]")
    (other / "03_benchmarks" / "bench_2017.json").write_text(json.dumps([{"model": "resnet50", "mode": "infer"}]))
    result = compare.report(tmp_path / "cmp", str(other), str(base), 5.0, outputs)
    assert result["status"] == "nothing in common" and "nothing in common" in result["reason"]
    assert compare.headline(result).startswith("Nothing to compare with other")
    assert compare.to_markdown(result) == result["reason"] + "\n"  # what notebook 05 shows: the reason
    assert compare.record_values(result)["regressions"] == 0 and compare.record_values(result)["ops_identical"] is None
    assert [p.name for p in (tmp_path / "cmp").iterdir()] == ["comparison.json"]


@pytest.mark.slow
def test_a_real_row_pinned_to_one_core_is_called_slower(tmp_path):
    """Two real measurements of one configuration, the second in a worker pinned to one core (taskset): the
    compare CLI calls it slower and exits 1; the first against itself is identical and exits 0."""
    import shutil
    import sys

    from resnet_lab.bench.launcher import run_config
    from resnet_lab.core import provenance

    if not shutil.which("taskset") or len(__import__("os").sched_getaffinity(0)) < 2:
        pytest.skip("needs taskset and two cores")
    one_core = tmp_path / "one-core-python"
    one_core.write_text(f'#!/bin/sh\nexec taskset -c 0 "{sys.executable}" "$@"\n')
    one_core.chmod(0o755)
    # 64² at batch 32: compute-bound on 2 cores (at 32², batch 16, the step is overhead and one core is faster)
    cfg = BenchConfig(model="tiny-resnet", batch_size=32, image_size=64, steps=12, min_time_s=0.0, warmup=1,
                      label="CPU MKL")
    for name, python in (("base", None), ("cand", str(one_core))):
        row = run_config(cfg, python=python)
        assert row["status"] == "ok" and len(row["step_times"]) == 12, row.get("reason")
        run = tmp_path / name
        rows_mod.save_rows(run / "03_benchmarks", [row], "bench_2017")
        (run / "provenance.json").write_text(json.dumps(provenance.collect(run=name), default=str))
    r = run_cli("compare", str(tmp_path / "base"), str(tmp_path / "cand"), "--format", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    (m,) = json.loads(r.stdout)["throughput"]["matched"]
    assert m["verdict"] == "slower" and m["delta_pct"] < -5 and m["method"] == "step times", m
    r = run_cli("compare", str(tmp_path / "base"), str(tmp_path / "base"))
    assert r.returncode == 0 and "no significant change" in r.stdout, r.stdout
