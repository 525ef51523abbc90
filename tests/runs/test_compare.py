"""`resnet-lab compare`: two runs side by side, on run folders the test makes and on the committed record."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_usage_error, fresh_env, run_cli

from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig
from resnet_lab.report import compare as view
from resnet_lab.runs import compare

ROOT = Path(__file__).resolve().parents[2]


def _run(path: Path, speeds: dict[str, float], opcodes: dict[str, int], seed: int, cpu: str = "Test CPU",
         load: float = 0.1, processes: int = 1, busy: bool = False) -> Path:
    """A run folder on a host kind without a committed record (so no noise model of its kind: see
    test_noise.py): provenance, one 03_benchmarks row per label (20 steps around 32 / speed seconds, in
    ``processes`` processes, each off by a 1.5 % process effect), one op inventory. ``load``: the 1-minute
    load average the rows recorded; ``busy``: other processes took half the host's CPU time during their
    timed steps (else 2 %)."""
    rng = np.random.default_rng(seed)
    rows = []
    for label, speed in speeds.items():
        cfg = BenchConfig(model="tiny-resnet", batch_size=32, steps=20, label=label,
                          xla="jit" if "xla" in label else "off", repeats=processes)
        static = {"label": label, "model": cfg.model, "mode": cfg.mode, "batch_size": 32, "global_batch": 32,
                  "image_size": 32, "precision": "fp32", "xla": cfg.xla, "onednn": "on", "backend": "tensorflow",
                  "device": "cpu", "replicas": 1, "data_format": "channels_last", "loadavg_1m": load}
        per = []
        for _ in range(processes):
            mean = 32 / speed * (np.exp(rng.normal(0, 0.015)) if processes > 1 else 1.0)
            times = list(rng.normal(mean, 0.02 * mean, 20))
            per.append(bench_rows.make_row(cfg, {"status": "ok", "step_times": times, "forward_macs": 1e9}, None,
                                         static))
        row = bench_rows.combine(cfg, per)
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
    base = _run(tmp_path / "base", {"CPU MKL": 6.0, "xla": 3.0}, OPS, 0, processes=5)
    cand = _run(tmp_path / "cand", {"CPU MKL": 5.4, "xla": 3.0}, OPS, 1, processes=5)  # 10 % slower, XLA same
    result = compare.compare(base, cand, threshold_pct=5)
    by = {m["config"].split()[0]: m for m in result.matched}
    assert by["CPU"]["verdict"] == "slower" and by["CPU"]["regression"]
    assert -13 < by["CPU"]["delta_pct"] < -7 and by["CPU"]["method"] == "processes"
    assert by["CPU"]["basis"] == compare.BETWEEN and by["CPU"]["processes_cand"] == 5
    assert by["CPU"]["p_holm"] >= by["CPU"]["p_value"] and by["CPU"]["mde_pct"] < 5
    assert by["xla"]["verdict"] == "no significant change" and not by["xla"]["regression"]
    assert result.ops_identical and compare.exit_code(result) == 1
    md = view.to_markdown(result)
    assert "1 regression(s)" in md and "identical" in md and "between processes (5 / 5)" in md
    assert [e["fact"] for e in result.environment] == ["commit"] and not result.warnings


def test_rows_of_one_process_are_indicative_and_gate_only_when_strict(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0, "xla": 3.0}, OPS, 0)
    cand = _run(tmp_path / "cand", {"CPU MKL": 5.4, "xla": 3.0}, OPS, 1)  # 10 % slower, in one process each
    result = compare.compare(base, cand, threshold_pct=5)
    by = {m["config"].split()[0]: m for m in result.matched}
    assert by["CPU"]["verdict"] == "slower" and by["CPU"]["basis"] == compare.INDICATIVE
    assert by["CPU"]["method"] == "step times" and -13 < by["CPU"]["delta_pct"] < -7
    assert by["CPU"]["beyond_threshold"] and not by["CPU"]["regression"]
    assert compare.exit_code(result) == 0 and result.indicative_slowdowns == [by["CPU"]["config"]]
    assert "indicative slowdown" in view.headline(result) and "not gated" in view.to_table(result)
    strict = compare.compare(base, cand, threshold_pct=5, strict=True)
    assert strict.regressions == [by["CPU"]["config"]] and compare.exit_code(strict) == 1
    # a row of several processes against one of one: still indicative (one side has no spread to go on)
    many = _run(tmp_path / "many", {"CPU MKL": 5.4}, OPS, 2, processes=5)
    (m,) = compare.compare(base, many, threshold_pct=5).matched
    assert m["basis"] == compare.INDICATIVE and (m["processes_base"], m["processes_cand"]) == (1, 5)


def _many_rows(path: Path, seed: int, rows: int = 30, processes: int = 5, spread: float = 0.05) -> Path:
    """A run of ``rows`` configurations (batch 1..rows), each in ``processes`` processes whose speed moves
    by ``spread`` (sd of log speed) between processes and 2 % between steps: the same distribution for any
    seed."""
    rng = np.random.default_rng(seed)
    out = []
    for batch in range(1, rows + 1):
        cfg = BenchConfig(model="tiny-resnet", batch_size=batch, steps=10, repeats=processes)
        static = {"label": f"b{batch}", "model": cfg.model, "mode": "train", "batch_size": batch,
                  "global_batch": batch, "image_size": 32, "precision": "fp32", "xla": "off", "onednn": "on",
                  "backend": "tensorflow", "device": "cpu", "replicas": 1, "data_format": "channels_last"}
        per = []
        for _ in range(processes):
            mean = 0.01 * batch * np.exp(rng.normal(0, spread))
            per.append(bench_rows.make_row(cfg, {"status": "ok", "step_times": list(rng.normal(mean, 0.02 * mean, 10))},
                                         None, static))
        out.append(bench_rows.combine(cfg, per))
    bench_rows.save_rows(path / "03_benchmarks", out, "bench_sweeps")
    (path / "provenance.json").write_text(json.dumps({"run": path.name, "git": {"commit": f"c{seed}"}}))
    return path


def test_two_runs_of_one_distribution_with_many_rows_have_no_regression(tmp_path):
    """A/A: 30 rows, five processes each, 5 % between processes: Holm keeps the chance of any false call
    at 5 % for the whole family; each row's verdict is no change or inconclusive, and none gates."""
    result = compare.compare(_many_rows(tmp_path / "a", 0), _many_rows(tmp_path / "b", 1), threshold_pct=10)
    matched = result.matched
    assert len(matched) == 30 and {m["basis"] for m in matched} == {compare.BETWEEN}
    assert {m["verdict"] for m in matched} <= {"no significant change", "inconclusive"}
    assert compare.exit_code(result) == 0 and not result.regressions
    assert all(m["p_holm"] >= m["p_value"] for m in matched)  # corrected for the 30 rows: never smaller
    # the same 30 rows with one really 30 % slower: that one is called, the others are not
    slow = _many_rows(tmp_path / "c", 1)
    rows = json.loads((slow / "03_benchmarks" / "bench_sweeps.json").read_text())
    rows[4]["process_step_times"] = [[t / 0.7 for t in times] for times in rows[4]["process_step_times"]]
    rows[4]["process_means"] = [m / 0.7 for m in rows[4]["process_means"]]
    (slow / "03_benchmarks" / "bench_sweeps.json").write_text(json.dumps(rows))
    result = compare.compare(tmp_path / "a", slow, threshold_pct=10)
    assert [m["config"] for m in result.matched if m["verdict"] == "slower"] == result.regressions
    assert len(result.regressions) == 1 and "b5" in result.regressions[0] and compare.exit_code(result) == 1


def test_a_threshold_below_what_the_rows_could_detect_is_inconclusive(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0, processes=3)
    cand = _run(tmp_path / "cand", {"CPU MKL": 6.0}, OPS, 1, processes=3)
    (m,) = compare.compare(base, cand, threshold_pct=1).matched
    assert m["mde_pct"] > 1 and m["verdict"] == "inconclusive" and not m["regression"]
    (m,) = compare.compare(base, cand, threshold_pct=m["mde_pct"] + 1).matched
    assert m["verdict"] == "no significant change"


def test_op_changes_and_a_busy_machine_are_reported(tmp_path):
    # the baseline's load average still remembers a burst before it (5.0 on 2 CPUs), its timed steps were quiet
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0, load=5.0)
    cand = _run(tmp_path / "cand", {"CPU MKL": 6.0, "xla jit": 1.0},
                {"convolution": 4, "add": 12, "custom-call": 1}, 1, busy=True)
    result = compare.compare(base, cand)
    (ops,) = result.ops
    assert ops["added"] == ["custom-call"] and ops["removed"] == ["fusion"] and ops["changed"] == {"add": [10, 12]}
    assert not ops["identical"] and not result.ops_identical
    assert result.throughput["only_in_candidate"] and not result.throughput["only_in_baseline"]
    (busy,) = [w for w in result.warnings if "busy machine" in w]
    assert busy.startswith("the candidate was measured on a busy machine: other processes used up to 50 %")
    facts = {e["fact"]: e for e in result.environment}
    assert facts["max others' CPU share while measuring (%)"] == {
        "fact": "max others' CPU share while measuring (%)", "baseline": 2.0, "candidate": 50.0}
    assert compare.exit_code(result) == 0


def test_across_host_kinds_speeds_are_shown_and_no_regression_is_counted(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0, cpu="Intel Xeon")
    cand = _run(tmp_path / "cand", {"CPU MKL": 5.4}, {**OPS, "custom-call": 1}, 1, cpu="AMD EPYC")  # 10 % slower
    result = compare.compare(base, cand, threshold_pct=5)
    (m,) = result.matched
    assert m["verdict"] == "slower" and -13 < m["delta_pct"] < -7 and not m["regression"]  # shown, not counted
    assert result.regressions == [] and compare.exit_code(result) == 0
    kinds = result.host_kinds
    assert (kinds["baseline"], kinds["candidate"], kinds["same"]) == ("Intel Xeon, 2 CPUs", "AMD EPYC, 2 CPUs", False)
    assert kinds["differences"] == ["CPU Intel Xeon vs AMD EPYC"] and kinds["speed_ratio_median"] < 1
    assert "no measured host facts" in kinds["basis"] and kinds["noise"] is None
    sentence = "different host kinds (CPU Intel Xeon vs AMD EPYC): speeds shown, no verdict gated"
    assert sentence in result.warnings
    md = view.to_markdown(result)
    assert sentence in md.split("## Throughput", 1)[1] and "regression" not in md
    assert "not judged (other host kind)" in md and "added custom-call" in md  # op differences as ever
    assert view.headline(result).startswith("Against base: different host kinds (CPU Intel Xeon vs AMD EPYC)")
    r = run_cli("compare", str(base), str(cand))
    assert r.returncode == 0 and "none counted across host kinds" in r.stdout, r.stdout + r.stderr


def test_cli_writes_every_output_and_gates_on_the_threshold(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0)
    cand = _run(tmp_path / "cand", {"CPU MKL": 5.4}, OPS, 1)
    r = run_cli("compare", str(base), str(cand), "--out", str(tmp_path / "cmp"), "--format", "json", "--strict")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["regressions"]
    assert sorted(p.name for p in (tmp_path / "cmp").iterdir()) == [
        "comparison.json", "comparison.md", "deltas.png", "throughput.csv"]
    header = (tmp_path / "cmp" / "throughput.csv").read_text().splitlines()[0].split(",")
    assert {"basis", "mde_pct", "p_holm", "processes_base", "processes_cand"} <= set(header)
    assert run_cli("compare", str(base), str(cand), "--threshold", "20", "--strict").returncode == 0  # 10 % < 20 %
    assert run_cli("compare", str(base), str(cand)).returncode == 0  # one process a row: indicative


def test_bad_inputs_are_one_line_exit_2_and_write_nothing(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0)
    (tmp_path / "empty").mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "provenance.json").write_text("{}")
    out = tmp_path / "cmp"
    assert_usage_error(["compare", str(tmp_path / "nope"), str(base), "--out", str(out)], "does not exist")
    assert_usage_error(["compare", str(tmp_path / "empty"), str(base)], "has no provenance.json")
    assert_usage_error(["compare", str(other), str(base)], "has no benchmark rows")
    unrelated = _run(tmp_path / "unrelated", {}, {}, 2)
    (unrelated / "03_benchmarks" / "bench_2017.json").write_text(json.dumps([{"model": "resnet50", "mode": "infer"}]))
    assert_usage_error(["compare", str(unrelated), str(base), "--out", str(out)], "nothing in common")
    with pytest.raises(compare.NothingInCommon):  # a UsageError of its own kind: notebook 05 answers it
        compare.compare(unrelated, base)
    assert_usage_error(["compare", str(base), str(base), "--format", "md", "--out", str(out)],
                       "--format: 'md' is not one of: table, json, markdown")
    assert not out.exists()
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "comparison.md").write_text("an earlier result")
    assert_usage_error(["compare", str(base), str(base), "--out", str(earlier)], "is not an empty folder")
    assert (earlier / "comparison.md").read_text() == "an earlier result"


def test_the_result_is_one_dataclass_written_as_comparison_json_always_was(tmp_path):
    base = _run(tmp_path / "base", {"CPU MKL": 6.0}, OPS, 0)
    cand = _run(tmp_path / "cand", {"CPU MKL": 5.4}, OPS, 1)
    result = compare.compare(base, cand)
    data = result.to_dict()
    assert list(data) == ["status", "baseline", "candidate", "host_kinds", "threshold_pct", "strict",
                          "indicative_slowdowns", "ops", "ops_identical", "throughput", "environment", "warnings",
                          "regressions", "created_at"]
    assert data["baseline"] == {"name": "base", "path": str(base)} and data["ops_identical"] is True
    again = compare.Comparison.from_dict(json.loads(json.dumps(data)))
    assert again.to_dict() == data and view.headline(data) == view.headline(result)
    alone = compare.no_baseline(cand, "no comparable baseline: none of this kind", 5.0)
    assert list(alone.to_dict()) == ["status", "reason", "baseline", "candidate", "threshold_pct", "strict",
                                     "regressions", "indicative_slowdowns", "created_at"]
    assert alone.to_dict()["baseline"] == {"name": None, "path": None} and alone.ops_identical is None
    r = run_cli("compare", str(base), str(cand), "--format", "markdown")
    assert r.returncode == 0 and r.stdout == view.to_markdown(result), r.stderr


def test_runs_imports_neither_pandas_nor_matplotlib():
    code = ("import sys, resnet_lab.runs.compare, resnet_lab.runs.history, resnet_lab.runs.command; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'matplotlib'}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=fresh_env(), check=True)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_the_committed_record_against_itself():
    ref = ROOT / "outputs" / "reference"
    result = compare.compare(ref, ref)
    assert result.matched and result.ops
    assert result.ops_identical and not result.environment
    # one process a row: indicative; a row whose own interval is wider than 5 % cannot say "no change"
    assert {m["verdict"] for m in result.matched} <= {"no significant change", "inconclusive"} | {
        m["verdict"] for m in result.matched if m["verdict"].startswith("not compared")}
    assert {m["basis"] for m in result.matched} <= {compare.INDICATIVE, None}
    assert all(m["method"] in (None, "summary columns") for m in result.matched)
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
    (ops,) = compare.compare(base, cand).ops
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
    # (an AMD EPYC's too: outputs/reference/hosts/amd-epyc-2cpus/)
    amd = _as_run(mk("i-other", 8), "other", "2026-12-01T12:00", ok)
    base, why = compare.default_baseline(amd, outputs)
    assert base == ROOT / "outputs" / "reference" / "hosts" / "amd-epyc-2cpus", why
    # ... and no baseline at all where it was not: said, compared with nothing, nothing gated
    alone = _as_run(mk("h-other", 7, cpu="Neoverse-V2"), "other", "2026-12-01T12:00", ok)
    base, why = compare.default_baseline(alone, outputs)
    assert base is None and why.startswith("no comparable baseline: no earlier 'other' run") and "Neoverse" in why
    result = view.report(tmp_path / "cmp", "", str(alone), 5.0, outputs)
    assert result.status == compare.NO_BASELINE and result.regressions == [] and compare.exit_code(result) == 0
    assert view.headline(result).startswith("No comparable baseline: ")
    assert view.intro_markdown(result).endswith("Candidate: `h-other`.")
    assert [p.name for p in (tmp_path / "cmp").iterdir()] == ["comparison.json"]


def _csv_record(path: Path, cpu: str, speeds: dict[str, float], seed: int) -> Path:
    """A record of CSVs (the layout of outputs/reference): provenance.json and bench.csv."""
    _run(path, speeds, OPS, seed, cpu=cpu)
    rows = json.loads((path / "03_benchmarks" / "bench_2017.json").read_text())
    for sub in ("03_benchmarks", "02_op_extraction"):
        for f in (path / sub).iterdir():
            f.unlink()
        (path / sub).rmdir()
    (path / "bench.csv").write_text(bench_rows.rows_to_csv(rows))
    return path


def test_a_reference_keeps_one_record_per_host_kind(tmp_path):
    outputs = tmp_path / "outputs"
    ref = _csv_record(outputs / "reference", "Intel Xeon", {"CPU MKL": 6.0}, 0)  # the flat layout: its own kind
    amd = _csv_record(ref / "hosts" / "amd-epyc-2cpus", "AMD EPYC", {"CPU MKL": 6.0}, 1)
    assert compare.record.HostKind("AMD EPYC", 2).slug() == "amd-epyc-2cpus"
    h200 = compare.record.HostKind(REFERENCE_CPU, 16, ("NVIDIA H200",))
    assert h200.slug() == "intel-xeon-processor-16cpus-nvidia-h200"
    ok = {"03_benchmarks": "ok"}
    mk = lambda name, cpu, speed, seed: _as_run(  # noqa: E731
        _run(outputs / "runs" / name, {"CPU MKL": speed}, OPS, seed, cpu=cpu), "x", "2026-12-01T10:00", ok)
    on_amd, on_intel, on_arm = mk("a-x", "AMD EPYC", 5.4, 2), mk("b-x", "Intel Xeon", 6.0, 3), mk("c-x", "Arm", 6, 4)
    assert compare.default_baseline(on_amd, outputs)[0] == amd
    assert compare.default_baseline(on_intel, outputs)[0] == ref
    assert compare.default_baseline(on_arm, outputs)[0] is None
    # compare REFERENCE CANDIDATE: the record of the candidate's kind, judged as ever (one process a row:
    # indicative, so gating on it takes --strict)
    r = run_cli("compare", str(ref), str(on_amd), "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["indicative_slowdowns"], r.stdout + r.stderr
    r = run_cli("compare", str(ref), str(on_amd), "--format", "json", "--strict")
    assert r.returncode == 1 and json.loads(r.stdout)["baseline"]["path"] == str(amd), r.stdout + r.stderr
    # a kind it has no record of: its top-level record, another kind, speeds shown and not judged
    r = run_cli("compare", str(ref), str(on_arm))
    assert r.returncode == 0 and "different host kinds (CPU Intel Xeon vs Arm)" in r.stdout, r.stdout
    # a reference of per-kind folders only, none of this kind: no comparable baseline, exit 0
    (ref / "provenance.json").unlink()
    r = run_cli("compare", str(ref), str(on_arm))
    assert r.returncode == 0 and r.stdout.startswith("no comparable baseline: ") and "AMD EPYC, 2 CPUs" in r.stdout


def test_a_reference_that_keeps_the_matrices_json_is_compared_between_processes(tmp_path):
    """outputs/reference keeps 03's bench_*.json where a row ran in several processes: a run of the same host
    kind is then compared on the per-process means (and gates), not on the CSV's summary columns."""
    ref = _run(tmp_path / "reference" / "hosts" / "amd-epyc-2cpus", {"CPU MKL": 6.0}, OPS, 0, processes=5)
    kept = ref / "bench_versus.json"
    (ref / "03_benchmarks" / "bench_2017.json").rename(kept)
    (ref / "bench.csv").write_text(bench_rows.rows_to_csv(json.loads(kept.read_text())))  # the CSV twin
    for sub in ("03_benchmarks", "02_op_extraction"):
        for f in (ref / sub).iterdir():
            f.unlink()
        (ref / sub).rmdir()
    same = _run(tmp_path / "runs" / "a", {"CPU MKL": 6.0}, OPS, 1, processes=5)
    slow = _run(tmp_path / "runs" / "b", {"CPU MKL": 4.5}, OPS, 2, processes=5)
    (row,) = compare.compare(ref, same).matched
    assert row["basis"] == compare.BETWEEN and row["verdict"] != "slower", row
    result = compare.compare(ref, slow)
    (row,) = result.matched
    assert row["basis"] == compare.BETWEEN and row["verdict"] == "slower" and result.regressions, row
    kept.unlink()  # the CSV alone: one process a row as far as compare can tell
    (row,) = compare.compare(ref, slow).matched
    assert row["basis"] == compare.INDICATIVE and not compare.compare(ref, slow).regressions



def test_a_bench_or_gpu_run_folder_is_compared_on_its_processes_and_its_csv_twin_is_checked(tmp_path):
    """``resnet-lab bench --repeats`` and ``gpu-run --repeats`` write bench.json/bench.csv into one folder: the
    JSON's per-process means are what is compared; a CSV twin cut short keeps the folder from being judged."""
    folders = []
    for name, speed, seed in (("a", 6.0, 1), ("b", 4.5, 2)):
        run = _run(tmp_path / name, {"CPU MKL": speed}, OPS, seed, processes=5)
        (run / "03_benchmarks" / "bench_2017.json").rename(run / "bench.json")
        (run / "bench.csv").write_text(bench_rows.rows_to_csv(json.loads((run / "bench.json").read_text())))
        shutil.rmtree(run / "03_benchmarks")
        folders.append(run)
    result = compare.compare(*folders)
    (row,) = result.matched
    assert row["basis"] == compare.BETWEEN and row["verdict"] == "slower" and result.regressions, row
    (folders[1] / "bench.csv").write_text(bench_rows.rows_to_csv([]))
    with pytest.raises(ValueError, match=r"bench.csv: 0 rows, but bench.json beside it has 1"):
        compare.compare(*folders)

def _cut(path: Path, at: str | int) -> None:
    """Truncate a file: just before the first occurrence of ``at`` (text), or to ``at`` bytes."""
    text = path.read_text()
    path.write_text(text[:text.index(at)] if isinstance(at, str) else text[:at])


@pytest.mark.parametrize("damage", ["csv mid-header", "csv mid-row", "csv between rows", "json", "provenance",
                                    "op inventory", "peak", "peak values"])
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
            bad.write_text(bench_rows.rows_to_csv(rows[:1]))
    elif damage.startswith("peak"):  # notebook 00's peak: what tells the host kind apart
        cand = _run(tmp_path / "cand", {"CPU MKL": 5.4}, OPS, 1)
        bad = cand / "00_environment" / "peak.json"
        bad.parent.mkdir()
        doc = {"peak_gflops": {"fp32": "fast" if damage == "peak values" else 215.0},
               "measurements": [{"dtype": "fp32", "n": 4096, "best_gflops": 215.0}]}
        bad.write_text(json.dumps(doc))
        if damage == "peak":
            _cut(bad, len(bad.read_text()) // 2)
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
    base = _as_run(_run(outputs / "runs" / "a-x", {"CPU MKL": 6.0}, OPS, 0, processes=3), "x", "2026-12-01T10:00", {})
    cand = _as_run(_run(outputs / "runs" / "b-x", {"CPU MKL": 5.4}, OPS, 1, processes=3), "x", "2026-12-01T11:00", {})
    result = view.report(cand / compare.NOTEBOOK, "", str(cand), 5.0, outputs)
    assert result.status == "compared" and result.baseline.name == "a-x" and result.regressions
    assert (cand / compare.NOTEBOOK / "deltas.png").exists()
    index = runner.write_index(outputs).read_text()
    assert f'href="runs/b-x/{compare.NOTEBOOK}.report.html">Against a-x: 1 regression(s) beyond 5 %' in index
    assert view.intro_markdown(result).startswith(f"**{view.headline(result)}**\n\nBaseline: `a-x`, ")
    assert view.results_values(result) == {"status": "compared", "headline": view.headline(result),
                                             "baseline": "a-x", "candidate": "b-x", "regressions": 1,
                                             "ops_identical": True}

    other = _run(tmp_path / "other", {"XLA": 6.0}, {}, 2)
    (other / "02_op_extraction" / "inventories.json").write_text("[]")
    (other / "03_benchmarks" / "bench_2017.json").write_text(json.dumps([{"model": "resnet50", "mode": "infer"}]))
    result = view.report(tmp_path / "cmp", str(other), str(base), 5.0, outputs)
    assert result.status == "nothing in common" and "nothing in common" in result.reason
    assert view.headline(result).startswith("Nothing to compare with other")
    assert view.to_markdown(result) == result.reason + "\n"  # what notebook 05 shows: the reason
    assert view.results_values(result)["regressions"] == 0 and view.results_values(result)["ops_identical"] is None
    assert [p.name for p in (tmp_path / "cmp").iterdir()] == ["comparison.json"]


def _one_busy_core_python(tmp_path: Path) -> Path:
    """A python that runs on core 0 only, beside a busy loop pinned there too. Pinned alone, a worker loses
    little on a host whose other work already holds a core; beside a busy loop on its one core it gets at
    most half of it, busy host or not. The loop starts 2.5 s in: the import and the model build, which no
    row times, run at full speed (the timed steps start after ~4 s: TensorFlow's import alone takes ~3)."""
    import sys

    path = tmp_path / "one-core-python"
    path.write_text(f"""#!/bin/sh
taskset -c 0 "{sys.executable}" -c "import time
time.sleep(2.5)
end = time.time() + 600
while time.time() < end: pass" &
spin=$!
taskset -c 0 "{sys.executable}" "$@"
rc=$?
kill $spin
exit $rc
""")
    path.chmod(0o755)
    return path


@pytest.mark.serial
@pytest.mark.slow
def test_a_real_configuration_made_slower_fails_the_gate_on_its_processes(tmp_path):
    """A/B with real workers: one configuration in three fresh processes a side, the candidate's pinned to
    one core that a busy loop shares (taskset): compared on the processes (basis between processes),
    slower, exit 1 without --strict; the baseline against itself: no regression, exit 0."""
    import shutil

    from resnet_lab.bench.launcher import run_config
    from resnet_lab.core import provenance

    if not shutil.which("taskset") or len(__import__("os").sched_getaffinity(0)) < 2:
        pytest.skip("needs taskset and two cores")
    one_core = _one_busy_core_python(tmp_path)
    # compute-bound at 64² (see the test above); native PyTorch: a worker starts in 3 s, TensorFlow's in 7 (Ice Lake)
    cfg = BenchConfig(model="tiny-resnet", backend="torch", impl="native", batch_size=32, image_size=64, steps=8,
                      min_time_s=0.0, warmup=1, repeats=3, label="native PyTorch eager")
    for name, python in (("base", None), ("cand", str(one_core))):
        row = run_config(cfg, python=python)
        assert row["status"] == "ok" and len(row["process_means"]) == 3, row.get("reason")
        assert row["ci_method"] == "between processes (3)" and len(row["step_times"]) == 24
        run = tmp_path / name
        bench_rows.save_rows(run / "03_benchmarks", [row], "bench_2017")
        (run / "provenance.json").write_text(json.dumps(provenance.collect(run=name), default=str))
    r = run_cli("compare", str(tmp_path / "base"), str(tmp_path / "cand"), "--format", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    (m,) = json.loads(r.stdout)["throughput"]["matched"]
    assert m["basis"] == "between processes" and m["method"] == "processes", m
    assert m["verdict"] == "slower" and m["delta_pct"] < -5 and m["regression"], m
    r = run_cli("compare", str(tmp_path / "base"), str(tmp_path / "base"))
    assert r.returncode == 0 and "between processes (3 / 3)" in r.stdout, r.stdout
