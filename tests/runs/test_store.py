"""The results store on SQLite and on a real PostgreSQL: push (idempotent, concurrent), list, export, the gate."""

from __future__ import annotations

import html
import json
import math
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import fresh_env

from resnet_lab import cli
from resnet_lab.core.errors import UsageError
from resnet_lab.runs import gate, interchange, record
from resnet_lab.runs import store as st

ROWS = [("TensorFlow (Keras model, fused BN)", "tensorflow", "fp32", 32, 6.6),
        ("native PyTorch eager", "torch", "fp32", 32, 4.9),
        ("SingleStream · OpenVINO", "openvino", "fp32", 1, 25.0),
        ("Offline · ONNX Runtime", "onnxruntime", "fp32", 8, 25.2)]


def make_run(root: Path, avx2_host: Path, i: int, *, commit: str | None = None, slow: dict[str, float] | None = None,
             rng: random.Random | None = None, processes: int = 3, sd_run: float = 0.02, sd_proc: float = 0.03,
             params: str = "default", cpu_model: str | None = None, others: float | None = None) -> Path:
    """A run folder of the AVX2 fixture's host kind: its provenance, peak, and four rows measured in ``processes``
    processes whose speeds move by a run-wide shift (``sd_run``) and per process (``sd_proc``), log-normal;
    ``others``: the share of the CPUs other processes took during its rows (%)."""
    rng = rng or random.Random(i)
    name = f"20261206-{100000 + i:06d}-{params}"
    run = root / "runs" / name
    (run / "00_environment").mkdir(parents=True)
    (run / "03_benchmarks").mkdir()
    prov = json.loads((avx2_host / "provenance.json").read_text())
    prov.update(run=name, started_at=f"2026-12-06T{i // 60:02d}:{i % 60:02d}:00+00:00",
                finished_at=f"2026-12-06T{i // 60:02d}:{i % 60:02d}:30+00:00", status="ok", params={"name": params})
    prov["git"] = {"commit": commit or f"{i:040x}", "branch": "main", "dirty": False, "root": "."}
    if cpu_model:
        prov["cpu"] = {**prov["cpu"], "model": cpu_model}
    (run / "provenance.json").write_text(json.dumps(prov))
    (run / "00_environment" / "peak.json").write_text((avx2_host / "peak.json").read_text())
    shift = rng.gauss(0, sd_run)
    rows = []
    for label, backend, precision, batch, ips in ROWS:
        ips *= (slow or {}).get(label, 1.0) * math.exp(shift)
        speeds = [ips * math.exp(rng.gauss(0, sd_proc)) for _ in range(processes)]
        rows.append({"label": label, "model": "resnet50_v1.5", "mode": "train" if batch == 32 else "infer",
                     "batch_size": batch, "image_size": 224, "precision": precision, "backend": backend,
                     "status": "ok", "images_per_sec": sum(speeds) / processes,
                     "process_means": [batch / s for s in speeds],
                     **({"host_util": 99.0, "cpu_util": 99.0 - others} if others is not None else {})})
    (run / "03_benchmarks" / "bench_versus.json").write_text(json.dumps(rows))
    return run


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    return request.getfixturevalue("pg_store")


def test_a_pushed_run_is_there_once_with_its_kind_rows_and_samples(url, tmp_path, avx2_host):
    run = make_run(tmp_path, avx2_host, 1)
    store = st.open_store(url, tmp_path)
    try:
        first = st.push(store, run)
        again = st.push(store, run)
        assert first["added"] and first["rows"] == 4 and not again["added"]  # idempotent
        (kind,) = st.kinds(store)
        assert kind["runs"] == 1 and "family 25 model 1" in kind["description"]
        assert kind["facts_hash"] == st.kind_hash(record.kind_of(run))
        (r,) = st.runs(store)
        rows = st.rows_of(store, [r["id"]])
        assert len(rows) == 4 and all(len(x["samples"]) == 3 for x in rows) and r["ordinal"] == 1
        # the per-layer profiles of a run (03's layers.json, as the committed record holds one) go in with it
        layered = make_run(tmp_path, avx2_host, 3)
        shutil.copy(Path(__file__).resolve().parents[2] / "outputs/reference/hosts/amd-epyc-2cpus/layers/layers.json",
                    layered / "03_benchmarks" / "layers.json")
        # and its conformance verdicts: 02's per engine and kit, the committed record's per case
        record_dir = Path(__file__).resolve().parents[2] / "outputs/reference/hosts/amd-epyc-2cpus/conformance"
        shutil.copytree(record_dir, layered / "conformance")
        (layered / "02_op_extraction").mkdir()
        (layered / "02_op_extraction" / "conformance_runs.csv").write_text(
            "engine,kit,cases,pass,fail,unsupported,note\niree,stablehlo:infer,40,39,1,0,dot ×1: wrong\n"
            "openvino,onnx:infer,43,0,0,0,skipped: openvino is not installed\n")
        pushed = st.push(store, layered)
        assert pushed["layers"] > 5 * 50  # five engines, every Keras layer of ResNet-50
        import sqlalchemy as sa

        with store.engine.connect() as conn:
            t = store.t("conformance")
            got = {(r.source, r.engine, r.case): r.status for r in conn.execute(sa.select(t))}
        assert pushed["conformance"] == len(got) > 6 * 40  # six engine-kit pairs of the record, every case
        assert got[("conformance_runs.csv", "iree", "stablehlo:infer *")] == "fail"
        assert got[("conformance_runs.csv", "openvino", "onnx:infer *")] == "skipped"
        assert got[("runs.csv", "onnxruntime", "onnx:infer *")] == "pass"
        assert got[("cases_onnx_infer_onnxruntime.csv", "onnxruntime", "onnx:infer 000_conv")] == "pass"
        # another kind (one fact differs) is another row of host_kinds, never the same
        other = make_run(tmp_path, avx2_host, 2, cpu_model="AMD EPYC 7B13")
        st.push(store, other)
        assert len(st.kinds(store)) == 2
    finally:
        store.close()


def test_a_new_store_starts_with_every_committed_record_once(url, tmp_path):
    """The committed records (one per host kind) go into a store on its first use, not by hand: the Xeon record
    and the AMD one with its per-layer profiles and conformance cases; a second use adds nothing."""
    store = st.open_store(url, tmp_path)
    try:
        first = st.push_records(store, tmp_path)  # tmp_path has no reference/: the checkout's committed records
        assert len(first) == len(record.reference_records(record.reference_root(tmp_path))) >= 2
        assert all(r["added"] for r in first), first
        amd = next(r for r in first if r["record"].endswith("amd-epyc-2cpus"))
        assert amd["rows"] > 30 and amd["layers"] > 5 * 50 and amd["conformance"] > 1000 and amd["ops"] > 0
        assert not any(r["added"] for r in st.push_records(store, tmp_path))
        assert len(st.kinds(store)) == len(first) and len(st.runs(store)) == len(first)
    finally:
        store.close()


def test_two_processes_pushing_at_once_lose_nothing(url, tmp_path, avx2_host):
    runs = [make_run(tmp_path, avx2_host, i) for i in range(8)]
    st.open_store(url, tmp_path).close()  # the tables exist before the race (creating them is a push too)
    both = [str(r) for r in runs[:5]], [str(r) for r in runs[3:]]  # runs 3 and 4 pushed by both
    procs = [subprocess.Popen([sys.executable, "-m", "resnet_lab.cli", "store", "push", *side, "--store", url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=fresh_env())
             for side in both]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    store = st.open_store(url, tmp_path)
    try:
        keys = [r["run_key"] for r in st.runs(store)]
        made = {st.run_key(record.read_provenance(r), r) for r in runs}
        records = len(record.reference_records(record.reference_root(tmp_path)))  # each process pushes them too
        assert len(keys) == len(set(keys)) == 8 + records and made <= set(keys)
        assert len(st.rows_of(store, [r["id"] for r in st.runs(store) if r["run_key"] in made])) == 32
    finally:
        store.close()
    said = "".join(o for o, _ in outs)
    assert said.count("added, 4 rows") == 8 and said.count("already in the store") == 2


def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, avx2_host, capsys):
    run = make_run(tmp_path, avx2_host, 1)
    cases = [
        (["store", "push", str(run), "--store", "mysql://x/y"], "is not a store URL"),
        (["store", "push", str(run), "--store", "postgresql://nobody@/none?host=/nonexistent"], "cannot open"),
        (["store", "push", str(tmp_path / "nope"), "--store", f"sqlite:///{tmp_path / 's.sqlite'}"],
         "does not exist"),
        (["store", "export", "--format", "parquet", "--out", str(tmp_path / "e"), "--store",
          f"sqlite:///{tmp_path / 's.sqlite'}"], "is not an export format"),
    ]
    for argv, says in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and says in err, err
    assert not (tmp_path / "s.sqlite").exists()
    # a run folder cut short: nothing of it enters the store
    (run / "03_benchmarks" / "bench_versus.json").write_text('[{"label": "x", "images_per')
    path = tmp_path / "cut.sqlite"
    assert cli.main(["store", "push", str(run), "--store", f"sqlite:///{path}"]) == 2
    assert "not a file of benchmark rows" in capsys.readouterr().err
    assert not path.exists()  # nothing written: not even the committed records a new store starts with


def test_a_store_of_a_newer_schema_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.sqlite'}"
    st.open_store(url, tmp_path).close()
    con = sqlite3.connect(tmp_path / "new.sqlite")
    con.execute("update store_meta set value = ? where key = 'schema_version'", (str(st.SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    newer = rf"is a store of schema {st.SCHEMA_VERSION + 1}; this resnet-lab reads up to {st.SCHEMA_VERSION}"
    with pytest.raises(UsageError, match=newer):
        st.open_store(url, tmp_path)


def test_lnt_asv_csv_exports(url, tmp_path, avx2_host):
    store = st.open_store(url, tmp_path)
    try:
        for i in range(3):
            st.push(store, make_run(tmp_path, avx2_host, i))
        run = st.runs(store)[-1]
        report = interchange.lnt_report(store, run)
        assert report["format_version"] == "2" and report["machine"]["name"] == "amd-epyc-f25m1-2cpus"
        assert report["run"]["llvm_project_revision"] == "3" and report["run"]["start_time"] == "2026-12-06T00:02:00"
        assert len(report["tests"]) == 4 and all(len(t["score"]) == 3 and t["name"] for t in report["tests"])
        files = interchange.write_asv(store, tmp_path / "asv")
        assert len(files) == 3 and (tmp_path / "asv" / "amd-epyc-f25m1-2cpus" / "machine.json").is_file()
        doc = json.loads(files[0].read_text())
        assert doc["version"] == 2 and len(doc["results"]) == 4
        assert all(len(v) == 12 for v in doc["results"].values())  # result .. samples, as asv writes them
        lines = (interchange.write_csv(store, tmp_path / "csv")[0]).read_text().splitlines()
        assert len(lines) == 1 + 3 * 4 * 3  # a header, then every sample
        (wide,) = interchange.write_otava(store, tmp_path / "otava")
        assert len(wide.read_text().splitlines()) == 4
    finally:
        store.close()
    try:
        from asv.results import Results
    except ImportError:
        return
    assert len(Results.load(str(files[0])).get_all_result_keys()) == 4  # asv's own reader, where asv is installed


def _gated(url: str, tmp_path: Path, avx2_host: Path, n: int, slow: dict[str, float] | None, seed: int,
           **noise) -> dict:
    rng = random.Random(seed)
    root = tmp_path / f"s{seed}"
    store = st.open_store(url, root)
    try:
        for i in range(n):
            st.push(store, make_run(root, avx2_host, i, rng=rng, **noise))
        cand = make_run(root, avx2_host, n, rng=rng, slow=slow, **noise)
        st.push(store, cand)
        return gate.gate(store, str(cand), gate.GateParams(window=n, min_runs=3))
    finally:
        store.close()


# The AMD host kind's measured noise (runs.noise, outputs/reference/hosts/amd-epyc-2cpus): a process 4.5 %, a run
# 3.4 % (sd of log speed); params/gate.yaml's 20 processes a row.
AMD_NOISE = {"sd_proc": 0.045, "sd_run": 0.034, "processes": 20}


def test_the_rolling_gate_on_the_amd_kind_s_noise_finds_a_10_percent_row_and_cries_no_wolf(tmp_path, avx2_host):
    trials = 12
    aa = [_gated(f"sqlite:///{tmp_path / f'aa{s}.sqlite'}", tmp_path, avx2_host, 5, None, s, **AMD_NOISE)
          for s in range(trials)]
    assert [r["verdict"] for r in aa].count("regressed") == 0, [gate.summary(r) for r in aa]
    slow = [_gated(f"sqlite:///{tmp_path / f'b{s}.sqlite'}", tmp_path, avx2_host, 5,
                   {"native PyTorch eager": 0.9}, 100 + s, **AMD_NOISE) for s in range(trials)]
    found = [r for r in slow if any(x["verdict"] == "regressed" and x["row"] == "native PyTorch eager · fp32"
                                    for x in r["rows"])]
    assert len(found) >= trials - 1, [gate.summary(r) for r in slow]
    assert all(gate.exit_code(r) == 1 for r in found)
    row = next(x for x in found[0]["rows"] if x["row"] == "native PyTorch eager · fp32")
    assert -16 < row["relative_pct"] < -4 and row["mde_pct"] < 10  # beside its run: the shift taken out
    # the whole run moving: its own verdict, with the MDE the host's run-to-run sd allows (stated, > 10 %)
    assert statistics.median(r["run_shift"]["mde_pct"] for r in aa) > 8


def test_too_few_runs_are_insufficient_and_another_kind_is_not_comparable(tmp_path, avx2_host):
    url = f"sqlite:///{tmp_path / 'g.sqlite'}"
    store = st.open_store(url, tmp_path)
    try:
        st.push(store, make_run(tmp_path, avx2_host, 0))
        cand = make_run(tmp_path, avx2_host, 1)
        st.push(store, cand)
        few = gate.gate(store, str(cand))
        assert few["verdict"] == "insufficient" and gate.exit_code(few) == 3
        other = make_run(tmp_path, avx2_host, 2, cpu_model="AMD EPYC 9B14")
        st.push(store, other)
        apart = gate.gate(store, str(other))
        assert apart["verdict"] == "not comparable" and gate.exit_code(apart) == 4
    finally:
        store.close()


def test_judge_lists_rows_of_one_side_and_takes_the_run_s_shift_out():
    runs = ["r1", "r2", "r3", "r4", "r5"]
    shifts = [0.03, -0.03, 0.0, 0.01, -0.01]
    base = {k: {j: m + s + e for j, s, e in zip(runs, shifts, noise, strict=True)}
            for k, m, noise in (("a", 0.0, [0.001, -0.002, 0.0, 0.001, 0.0]),
                                ("b", 1.0, [0.0, 0.001, -0.001, 0.0, 0.0]),
                                ("d", 2.0, [-0.001, 0.0, 0.001, -0.001, 0.001]))}
    # the candidate run 5 % slower as a whole, row b 10 % slower beside it
    cand = {"a": -0.05, "b": 1.0 - 0.05 + math.log(0.9), "d": 2.0 - 0.05, "c": 3.0}
    out = gate.judge(cand, base, gate.GateParams(window=5))
    assert out["relative"] and out["rows"]["c"]["verdict"] == "insufficient"
    assert out["rows"]["b"]["verdict"] == "regressed" and out["rows"]["b"]["relative_pct"] == pytest.approx(-10, abs=1)
    assert out["rows"]["a"]["verdict"] == "stable" and out["rows"]["d"]["verdict"] == "stable"
    assert out["run_shift"]["change_pct"] == pytest.approx(-4.9, abs=0.3)
    assert out["run_shift"]["verdict"] == "stable" and out["run_shift"]["mde_pct"] > 5  # shifts of ±3 % in the window


def test_a_finished_run_is_pushed_and_judged_against_its_kind_s_last_runs(tmp_path, avx2_host, monkeypatch):
    """What `resnet-lab run` does at the end: the run into the default store (the committed records first),
    judged there against the last runs of its host kind and params; the verdict in store_gate.json and the
    index's cell, with the window's commits."""
    from resnet_lab.workbook import runner

    outputs = tmp_path
    first, first_gate = runner.push_to_store(make_run(outputs, avx2_host, 0), outputs)
    # the committed records are of other host kinds: nothing of this kind to judge it against yet
    assert "store.sqlite (4 rows)" in first and str(tmp_path) not in first  # no path of the machine: it is shared
    assert first_gate.startswith("store gate: not comparable"), first_gate
    for i in range(1, 4):
        runner.push_to_store(make_run(outputs, avx2_host, i, commit=f"{i}{'a' * 39}"), outputs,
                             {"window": 3, "min_runs": 3})
    last = make_run(outputs, avx2_host, 4, slow={"native PyTorch eager": 0.5})
    line, verdict = runner.push_to_store(last, outputs, {"window": 3, "min_runs": 3})
    assert verdict.startswith("store gate: regressed") and verdict.endswith("(exit 1)"), verdict
    saved = json.loads((last / runner.STORE_GATE).read_text())
    assert saved["verdict"] == "regressed" and len(saved["window"]) == 3 and saved["summary"] == verdict
    from resnet_lab.workbook import summary

    prov = {**json.loads((last / "provenance.json").read_text()), "store": line, "store_gate": verdict}
    assert html.escape(verdict) in summary.write_run_page(last, prov).read_text()  # the run's page says it too
    cell = runner._store_cell(last, "runs/" + last.name)
    assert 'class="failed"' in cell and "window commits: 1aaaaaa, 2aaaaaa, 3aaaaaa" in cell, cell
    # a store that cannot be opened costs the run nothing: one line saying how to push it later
    monkeypatch.setenv("RESNET_LAB_STORE", "mysql://nowhere/x")
    line, verdict = runner.push_to_store(last, outputs)
    assert line.startswith("store: not pushed") and "resnet-lab store push" in line and verdict is None
    assert str(tmp_path) not in line  # the line goes on the run's page: no path of the machine


def _aa_store(tmp_path: Path, avx2_host: Path, n: int, seed: int, slow_run: int | None = None, **noise) -> str:
    """A SQLite store with ``n`` runs of one commit ('aa' params); run ``slow_run`` has native eager 30 % slower."""
    url = f"sqlite:///{tmp_path / f'aa{seed}.sqlite'}"
    rng = random.Random(seed)
    store = st.open_store(url, tmp_path)
    try:
        for i in range(n):
            slow = {"native PyTorch eager": 0.7} if i == slow_run else None
            st.push(store, make_run(tmp_path / f"r{seed}", avx2_host, i, commit="c" * 40, rng=rng, params="aa",
                                    slow=slow, **noise))
    finally:
        store.close()
    return url


def test_the_gate_s_aa_counts_every_pairing_its_false_alarms_and_the_planted_slowdowns(tmp_path, avx2_host):
    url = _aa_store(tmp_path, avx2_host, 7, 1, **AMD_NOISE)
    store = st.open_store(url, tmp_path)
    try:
        quiet = gate.aa(store, "aa", gate.GateParams(window=5, min_runs=3))
        assert quiet["pairings"] == 7 * 6 and quiet["pairings_possible"] == 42  # each run, each 5 of the other 6
        assert quiet["rolling"]["pairings"] == 2  # runs 6 and 7 against the 5 before them: what a real gate does
        assert quiet["planted"] == 42 * 4 and quiet["false_alarms"] == 0, quiet["alarms"]
        assert quiet["detected"] >= 0.95 and quiet["held"], gate.aa_summary(quiet)
        assert all(r["mde_pct_median"] < 10 for r in quiet["rows"]) and quiet["commits"] == ["c" * 40]
        assert gate.aa(store, "aa", gate.GateParams(window=7, min_runs=3))["pairings"] == 0  # 8 runs needed
    finally:
        store.close()
    # a host too noisy for the window: the planted 10 % is missed often, and the A/A says it did not hold
    noisy = st.open_store(_aa_store(tmp_path, avx2_host, 6, 2, sd_proc=0.15, sd_run=0.03, processes=3), tmp_path)
    try:
        loud = gate.aa(noisy, "aa", gate.GateParams(window=5, min_runs=3))
        assert loud["detected"] < 0.95 and not loud["held"]
        assert all(r["mde_pct_median"] > 10 for r in loud["rows"])
    finally:
        noisy.close()
    # a run that really differs (one row 30 % slower) is a false alarm of the A/A: it says which run, which row
    odd = st.open_store(_aa_store(tmp_path, avx2_host, 6, 3, slow_run=2, **AMD_NOISE), tmp_path)
    try:
        wolf = gate.aa(odd, "aa", gate.GateParams(window=5, min_runs=3))
        assert wolf["false_alarms"] >= 1 and not wolf["held"]
        assert any(a["candidate"].startswith("20261206-100002") and a["rows"] == ["native PyTorch eager · fp32"]
                   for a in wolf["alarms"]), wolf["alarms"]
    finally:
        odd.close()


def test_store_aa_on_the_command_line_exit_codes_and_its_files(tmp_path, avx2_host, capsys):
    url = _aa_store(tmp_path, avx2_host, 6, 4, **AMD_NOISE)
    out = tmp_path / "aa-out"
    code = cli.main(["store", "aa", "--store", url, "--outputs", str(tmp_path), "--params", "aa", "--window", "5",
                     "--out", str(out)])
    said = capsys.readouterr().out
    assert code == 0 and said.startswith("A/A held: 6 runs, each against every window of 5 others"), said
    assert json.loads((out / "aa.json").read_text())["pairings"] == 6 and "planted found" in (out / "aa.md").read_text()
    before = (out / "aa.json").read_text()
    for argv, why in ((["--slowdown", "120"], "--slowdown: 120.0 must lie in (0, 100)"),
                      (["--out", str(out)], "--out"), (["--window", "0"], "gate: window 0")):
        assert cli.main(["store", "aa", "--store", url, "--outputs", str(tmp_path), "--params", "aa",
                         *argv]) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1, err
    assert (out / "aa.json").read_text() == before  # bad input overwrote nothing


def test_a_run_still_running_is_not_pushed_so_its_rows_are_not_lost(tmp_path, avx2_host):
    """History and the index push every run folder they see; one still being written is left for later: the store
    keeps a run as first pushed, and a half-written one would keep no rows."""
    from resnet_lab.runs import history

    run = make_run(tmp_path, avx2_host, 0)
    prov = json.loads((run / "provenance.json").read_text())
    (run / "provenance.json").write_text(json.dumps({**prov, "status": "running", "finished_at": None}))
    store = st.open_store(f"sqlite:///{tmp_path / 's.sqlite'}", tmp_path)
    try:
        with pytest.raises(UsageError, match="is running"):
            st.push(store, run)
        skipped = history.read_store(tmp_path, store.url)[1]
        assert any("is running" in s["reason"] for s in skipped)
        (run / "provenance.json").write_text(json.dumps(prov))  # it finished
        assert st.push_new(store, run)["added"] and st.rows_of(store, [st.find_run(store, str(run))["id"]])
    finally:
        store.close()


def test_a_run_measured_on_a_busy_host_is_not_judged_and_leaves_every_window(tmp_path, avx2_host):
    """The A/A on this host met it: a run made while a test suite ran beside it had native eager at half speed. Its
    rows say so (others took 28–48 % of the CPUs): it is not judged, and no window or A/A pairing holds it."""
    store = st.open_store(f"sqlite:///{tmp_path / 'b.sqlite'}", tmp_path)
    rng = random.Random(5)
    try:
        for i in range(6):
            busy = 40.0 if i == 2 else 3.0
            st.push(store, make_run(tmp_path, avx2_host, i, rng=rng, others=busy, params="aa",
                                    slow={"native PyTorch eager": 0.5} if i == 2 else None, **AMD_NOISE))
        loaded = make_run(tmp_path, avx2_host, 6, rng=rng, others=45.0, params="aa", **AMD_NOISE)
        st.push(store, loaded)
        judged = gate.gate(store, str(loaded), gate.GateParams(window=4, min_runs=3))
        assert judged["verdict"] == "not comparable" and "busy host" in judged["why"] and gate.exit_code(judged) == 4
        quiet = make_run(tmp_path, avx2_host, 7, rng=rng, others=2.0, params="aa", **AMD_NOISE)
        st.push(store, quiet)
        ok = gate.gate(store, str(quiet), gate.GateParams(window=4, min_runs=3))
        assert ok["verdict"] == "stable" and len(ok["window"]) == 4, gate.summary(ok)
        assert not any("100002" in w or "100006" in w for w in ok["window"])  # the busy runs left out
        assert any("100006" in w for w in ok["left_out_busy"])
        study = gate.aa(store, "aa", gate.GateParams(window=4, min_runs=3))
        assert {b["run"][:15] for b in study["busy_runs"]} == {"20261206-100002", "20261206-100006"}
        assert study["false_alarms"] == 0 and "2 busy run(s) left out" in study["why"]
    finally:
        store.close()


def test_05_judges_the_run_being_made_against_the_store_from_its_folder(tmp_path, avx2_host):
    """Notebook 05 runs before its run is pushed: the run is judged from its folder against the store's last runs of
    its host kind, the window's commits shown; with no store, one sentence."""
    from resnet_lab.report import compare as report_compare
    from resnet_lab.runs import compare as runs_compare

    rng = random.Random(9)
    outputs = tmp_path / "outputs"
    folder = make_run(outputs, avx2_host, 9, rng=rng, **AMD_NOISE)
    result = runs_compare.no_baseline(folder, "no earlier run", 10.0)
    assert report_compare.store_gate(tmp_path, result, outputs).startswith("No store gate:")
    store = st.open_store(None, outputs)
    try:
        for i in range(4):
            st.push(store, make_run(outputs, avx2_host, i, rng=rng, commit=f"{i}{'b' * 39}", **AMD_NOISE))
    finally:
        store.close()
    slow = make_run(outputs, avx2_host, 10, rng=rng, slow={"native PyTorch eager": 0.6}, **AMD_NOISE)
    md = report_compare.store_gate(tmp_path, runs_compare.no_baseline(slow, "x", 10.0), outputs)
    assert md.startswith("**regressed:") and "(exit 1)" in md and "`0bbbbbbb`" in md, md
    assert "| native PyTorch eager · fp32 | regressed |" in md
    saved = json.loads((tmp_path / report_compare.STORE_GATE_FILE).read_text())
    assert saved["verdict"] == "regressed" and len(saved["window"]) == 4
    store = st.open_store(None, outputs)
    try:  # judged from its folder: nothing was pushed
        assert not any(r["name"] == slow.name for r in st.runs(store))
    finally:
        store.close()


def _with_layers(run: Path, ms: dict[str, float]) -> Path:
    """``run`` with a per-layer profile of one engine (03's layers.json), layer -> ms."""
    rec = {"engine": "OpenVINO", "backend": "openvino", "model": "resnet50_v1.5", "mode": "infer", "batch_size": 1,
           "image_size": 224, "precision": "fp32", "recipe": "latency", "step_ms": sum(ms.values()),
           "layers": [{"layer": k, "ms": v, "kind": "conv"} for k, v in ms.items()]}
    (run / "03_benchmarks" / "layers.json").write_text(json.dumps({"records": {"OpenVINO": rec}}))
    return run


def test_layers_diff_judges_each_layer_against_its_own_noise_in_the_store(tmp_path, avx2_host, capsys, monkeypatch):
    """Twelve layers jitter by ~2 % a run and one ('jumpy') by ~25 %: across one pair, jumpy's +30 % looks like a
    regression and a steady layer's +15 % as well. Against the store's six earlier profiles of the host kind, jumpy's
    move is its noise and the steady layer's is not."""
    rng = random.Random(11)
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("RESNET_LAB_OUTPUTS", str(outputs))
    base = {f"conv{i}_conv": 1.0 + 0.1 * i for i in range(12)} | {"jumpy_conv": 2.0}

    def profile(i: int, move: dict[str, float] | None = None) -> Path:
        shift = rng.gauss(0, 0.02)
        ms = {k: v * math.exp(shift + rng.gauss(0, 0.25 if k == "jumpy_conv" else 0.02)) * (move or {}).get(k, 1.0)
              for k, v in base.items()}
        return _with_layers(make_run(outputs, avx2_host, i, rng=rng), ms)

    store = st.open_store(None, outputs)
    try:
        for i in range(6):
            st.push(store, profile(i))
    finally:
        store.close()
    old = profile(6)
    new = _with_layers(make_run(outputs, avx2_host, 7, rng=rng), {
        k: {x["layer"]: x["ms"] for x in json.loads((old / "03_benchmarks" / "layers.json").read_text())
            ["records"]["OpenVINO"]["layers"]}[k] * {"jumpy_conv": 1.3, "conv3_conv": 1.15}.get(k, 1.0)
        for k in base})
    assert cli.main(["layers", "diff", str(old), str(new), "--format", "json"]) == 1
    pair = json.loads(capsys.readouterr().out)["OpenVINO"]
    flagged = {r["layer"] for r in pair["rows"] if r["verdict"] == "regressed"}
    assert flagged == {"jumpy_conv", "conv3_conv"}  # the pair alone cannot tell jumpy's noise from a change
    assert cli.main(["layers", "diff", str(old), str(new), "--format", "json", "--store-noise"]) == 1
    own = json.loads(capsys.readouterr().out)["OpenVINO"]
    rows = {r["layer"]: r for r in own["rows"]}
    assert rows["conv3_conv"]["verdict"] == "regressed" and rows["jumpy_conv"]["verdict"] == "stable"
    assert own["own_noise_layers"] == 13 and rows["jumpy_conv"]["noise"] == "store"
    lone = tmp_path / "lone.json"
    lone.write_text((new / "03_benchmarks" / "layers.json").read_text())
    assert cli.main(["layers", "diff", str(old), str(lone), "--store-noise"]) == 2  # no host kind for a bare file
    assert "host kind is unknown" in capsys.readouterr().err


def test_a_row_measured_while_busy_is_left_out_and_named_the_rest_judged(tmp_path, avx2_host):
    store = st.open_store(f"sqlite:///{tmp_path / 'r.sqlite'}", tmp_path)
    rng = random.Random(6)
    try:
        for i in range(5):
            st.push(store, make_run(tmp_path, avx2_host, i, rng=rng, others=2.0, **AMD_NOISE))
        cand = make_run(tmp_path, avx2_host, 5, rng=rng, others=2.0, slow={"native PyTorch eager": 0.6}, **AMD_NOISE)
        rows = json.loads((cand / "03_benchmarks" / "bench_versus.json").read_text())
        rows[1]["cpu_util"] = 50.0  # native eager's row: others took half the CPUs while it ran
        (cand / "03_benchmarks" / "bench_versus.json").write_text(json.dumps(rows))
        st.push(store, cand)
        judged = gate.gate(store, str(cand), gate.GateParams(window=5, min_runs=3))
    finally:
        store.close()
    by = {r["row"]: r for r in judged["rows"]}
    assert by["native PyTorch eager · fp32"]["verdict"] == "not comparable"  # its 40 % slowdown: the load's
    assert by["native PyTorch eager · fp32"]["why"] == "measured on a busy host"
    assert judged["verdict"] == "stable" and "native PyTorch eager · fp32" not in judged["only_baseline"]
