"""notebooks/05_compare.ipynb: its layout, and what the quick run's comparison says."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli
from nblayout import ROOT

from resnet_lab.report import compare
from resnet_lab.runs import record


@pytest.mark.slow
def test_quick_run_is_compared_with_the_record_and_with_itself(quick_run) -> None:
    assert quick_run.statuses["05_compare"] == "ok", quick_run.errors.get("05_compare")
    out = quick_run.run_dir / "05_compare"
    result = json.loads((out / "comparison.json").read_text())
    # a fresh outputs root has no earlier quick run: the baseline is the committed record where it was
    # measured on this host kind, else there is none to judge against
    reference = record.reference_for(ROOT / "outputs" / "reference", record.kind_of(quick_run.run_dir))
    if reference is not None:  # the folder itself (Intel Xeon) or hosts/<kind>/ (AMD EPYC)
        assert result["baseline"]["path"] == str(reference)
        assert "committed record" in result["baseline"]["why"]
    else:
        assert result["status"] == compare.NO_BASELINE and result["baseline"]["path"] is None
        assert not result["regressions"] and result["baseline"]["why"].startswith(compare.NO_BASELINE)
    assert result["candidate"]["name"] == quick_run.run_dir.name
    results = json.loads((out / "results.json").read_text())
    assert results["headline"] == compare.headline(result)
    index = (quick_run.run_dir.parent.parent / "index.html").read_text()
    assert f"{quick_run.run_dir.name}/05_compare.report.html" in index
    assert compare.headline(result).split(":")[0] in index
    # a shared report holds no path of the machine: not the checkout's, not the outputs root's (05's and every page)
    machine = {str(ROOT.resolve()), str(quick_run.run_dir.parent.parent.resolve())}
    for page in [*quick_run.run_dir.glob("*.html"), quick_run.run_dir.parent.parent / "index.html"]:
        text = page.read_text()
        assert not [m for m in machine if m in text], f"{page.name} holds an absolute path of this machine"
    # the run against itself: identical op sets, every row without a significant change, exit 0
    r = run_cli("compare", str(quick_run.run_dir), str(quick_run.run_dir), "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    same = json.loads(r.stdout)
    assert same["ops"] and same["ops_identical"] and same["throughput"]["matched"]
    assert not same["environment"] and not same["regressions"]
