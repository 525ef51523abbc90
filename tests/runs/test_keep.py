"""`resnet-lab record RUN_DIR`: a finished report kept as its host kind's record, refused in one line otherwise."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from resnet_lab import cli
from resnet_lab.core.errors import UsageError
from resnet_lab.runs import budget, compare, keep, record


def _run_folder(tmp_path: Path, avx2_host: Path, name: str = "20261206-050043-default") -> Path:
    """A finished `make report` run folder of the AVX2 fixture host, as the runner lays it out, with the machine's
    absolute paths in its provenance (as a real run's are)."""
    run = tmp_path / "outputs" / "runs" / name
    for sub in ("00_environment", "01_model_selection", "03_benchmarks"):
        (run / sub).mkdir(parents=True)
    prov = json.loads((avx2_host / "provenance.json").read_text())
    root = str(tmp_path / "checkout")
    prov["git"]["root"], prov["executable"] = root, f"{root}/.venv/bin/python"
    prov["notebooks"][0]["parameters"] = {"output_dir": f"{root}/outputs/runs/{name}/00_environment"}
    (run / "provenance.json").write_text(json.dumps(prov))
    shutil.copy(avx2_host / "peak.json", run / "00_environment" / "peak.json")
    for f in ("bench.csv", "wall_breakdown.csv"):
        shutil.copy(avx2_host / f, run / "03_benchmarks" / f)
    (run / "03_benchmarks" / "bench_2017.json").write_text("[]")
    (run / "03_benchmarks" / "plan.csv").write_text("section,index,label,estimate_s,status,reason\n")
    (run / "01_model_selection" / "op_inventory.csv").write_text("model,opcode,count\n")
    return run


def test_a_host_kind_without_a_record_gets_one_with_its_timing_and_a_readme(tmp_path, avx2_host, capsys,
                                                                          monkeypatch):
    run = _run_folder(tmp_path, avx2_host)
    outputs = tmp_path / "outputs"
    monkeypatch.chdir(tmp_path)  # a checkout's root, as `make report` leaves it
    assert cli.main(["record", "outputs/runs/20261206-050043-default", "--outputs", "outputs"]) == 0
    dest = outputs / "reference" / "hosts" / "amd-epyc-f25m1-2cpus"
    said = capsys.readouterr().out
    assert "into outputs/reference/hosts/amd-epyc-f25m1-2cpus, the record of AMD EPYC" in said
    assert "git add outputs/reference/hosts/amd-epyc-f25m1-2cpus" in said
    for f in ("provenance.json", "peak.json", "bench.csv", "bench_2017.json", "op_inventory.csv", "README.md",
              "timing/provenance.json", "timing/bench.csv", "timing/wall_breakdown.csv", "timing/plan.csv"):
        assert (dest / f).is_file(), f
    # the record is found as its kind's, and plans that kind from its timing/
    assert record.reference_for(outputs / "reference", record.kind_of(run)) == dest
    assert budget.timing_of(dest) == dest / "timing"
    kept = (dest / "provenance.json").read_text()
    assert str(tmp_path) not in kept and json.loads(kept)["executable"] == ".venv/bin/python"
    assert "20261206-050043-default" in (dest / "README.md").read_text()


def test_a_kind_that_has_a_record_gets_the_run_as_its_timing_and_keeps_its_figures(tmp_path, avx2_host):
    outputs = tmp_path / "outputs"
    first = _run_folder(tmp_path, avx2_host)
    keep.keep(first, outputs)
    dest = outputs / "reference" / "hosts" / "amd-epyc-f25m1-2cpus"
    figures = (dest / "bench.csv").read_bytes()
    second = _run_folder(tmp_path, avx2_host, "20261207-090000-default")
    with pytest.raises(UsageError, match=r"already holds a timing of this host kind .*--force"):
        keep.keep(second, outputs)  # timing/ is there (from the first): refused before anything is copied
    done = keep.keep(second, outputs, force=True)
    assert done["as"] == "timing" and done["destination"].endswith("amd-epyc-f25m1-2cpus/timing")
    assert (dest / "bench.csv").read_bytes() == figures
    assert sorted(p.name for p in (dest / "timing").iterdir()) == sorted(
        ["provenance.json", "peak.json", "bench.csv", "wall_breakdown.csv", "plan.csv"])


@pytest.mark.parametrize("spoil, says", [
    (lambda run: (run / "provenance.json").unlink(), "not a run folder"),
    (lambda run: _edit(run, status="failed"), "did not finish ok"),
    (lambda run: _edit(run, notebooks=[{"name": "03_benchmarks", "status": "failed"}]), "03_benchmarks failed"),
    (lambda run: _edit(run, params={"name": "quick"}), "ran params 'quick'"),
    (lambda run: (run / "03_benchmarks" / "wall_breakdown.csv").unlink(), "lacks 03_benchmarks/wall_breakdown.csv"),
    (lambda run: _peak(run, load={"gemm_window": {"others_pct": 40.0, "host_busy_pct": 99.0, "own_pct": 59.0}}),
     "not a full measurement on a quiet"),
])
def test_a_run_that_cannot_be_a_record_is_one_line_and_nothing_is_written(tmp_path, avx2_host, capsys, spoil, says):
    run = _run_folder(tmp_path, avx2_host)
    spoil(run)
    outputs = tmp_path / "outputs"
    assert cli.main(["record", str(run), "--outputs", str(outputs)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err and "cannot be kept as a record" in err
    assert not (outputs / "reference").exists()


def test_a_dry_run_names_the_files_and_copies_none(tmp_path, avx2_host):
    run = _run_folder(tmp_path, avx2_host)
    done = keep.keep(run, tmp_path / "outputs", dry_run=True)
    assert "timing/wall_breakdown.csv" in " ".join(done["files"]) and not (tmp_path / "outputs" / "reference").exists()


def test_05_s_hint_for_a_kind_without_a_record_is_the_command_with_a_relative_path(tmp_path, avx2_host, monkeypatch):
    run = _run_folder(tmp_path, avx2_host)
    monkeypatch.chdir(tmp_path)
    hint = record.commit_hint(run.resolve(), record.kind_of(run))
    assert hint.startswith("`resnet-lab record outputs/runs/20261206-050043-default`") and str(tmp_path) not in hint
    # the line compare (05) prints where no baseline of the kind exists carries it, and no absolute path
    found, why = compare.default_baseline(run.resolve(), (tmp_path / "outputs").resolve())
    assert found is None and compare.NO_BASELINE in why and "resnet-lab record outputs/runs/" in why
    assert str(tmp_path) not in why


def _edit(run: Path, **changes) -> None:
    prov = json.loads((run / "provenance.json").read_text())
    prov.update(changes)
    (run / "provenance.json").write_text(json.dumps(prov))


def _peak(run: Path, **changes) -> None:
    path = run / "00_environment" / "peak.json"
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))
