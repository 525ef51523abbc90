"""Notebook 03's rows planned on a host: emulated precisions left out, the rest fitted into the report's budget.

Every test here plans for a host it names (a fixture's record, a capability table from given CPU text, or this host
under the AVX2-only mask), never for whatever host runs the suite: CI on an AVX-512 machine checks the AVX2 plan too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import native_bf16

from resnet_lab.bench import launcher
from resnet_lab.bench import plan as bench_plan
from resnet_lab.bench import rows as bench_rows
from resnet_lab.bench.config import BenchConfig, emulation_reason
from resnet_lab.core import host
from resnet_lab.core.errors import UsageError
from resnet_lab.runs import budget, record
from resnet_lab.workbook import runner

ZEN3 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nflags\t\t: fpu avx avx2 fma f16c\n"
ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nflags\t\t: fpu avx2 fma avx512f "
        "avx512bw avx512vl avx512_vnni avx512_bf16\n")

NATIVE = native_bf16()  # this host, unmasked: a mask that removes nothing is not named in a reason


def _caps(text: str) -> host.Capabilities:
    return host.capabilities(text, machine="x86_64", mask="", environ={}, system="linux")


@pytest.fixture(scope="module")
def report_03(repo_root) -> bench_plan.Plan:
    """03's configurations as `make report` (params/default.yaml) runs them."""
    resolved = runner.load_plan(repo_root / "params" / "default.yaml").resolved["03_benchmarks"]
    return bench_plan.plan(resolved), resolved


def _fixture_plan(avx2_host: Path, report_03, caps: host.Capabilities) -> budget.RowPlan:
    configs, resolved = report_03
    kind = record.kind_of(avx2_host)
    costs = budget.read_costs(avx2_host, kind)
    fp32 = json.loads((avx2_host / "peak.json").read_text())["peak_gflops"]["fp32"]
    return budget.plan_rows(configs.sections, costs, fp32, resolved["report_budget_s"], resolved["install_s"],
                            budget.DEFAULT_SHARES, [n for n in costs.notebooks if n != budget.BENCHMARKS], caps)


def test_the_report_planned_for_the_avx2_host_fits_20_minutes_and_times_no_bf16_row(avx2_host, report_03):
    plan = _fixture_plan(avx2_host, report_03, _caps(ZEN3))
    print(f"\nmake report planned for the AVX2 fixture host (fp32 peak 185 GFLOP/s, no bf16): "
          f"{plan.total_s / 60:.1f} min; {plan.summary()}")
    assert plan.total_s <= 20 * 60
    ran = [p for p in plan.rows if p.status != "skipped"]
    configs = report_03[0].sections
    assert all(configs[p.section][p.index].precision == "fp32" for p in ran)  # no bf16 row timed anywhere
    emulated = [p for p in plan.rows if "no bf16 instructions" in p.reason]
    assert len(emulated) >= 10 and all(p.status == "skipped" for p in emulated)
    # what was measured there: 58 min, 03 46.6 of it, 1929 s of it bf16 rows; now the rows fit their budget
    assert plan.rows_s <= plan.budget_s
    over = [p for p in plan.rows if p.reason.startswith("over budget (estimated")]
    assert over and "Left out over budget" in plan.summary() and "Left out as emulated here" in plan.summary()
    # the quoted rows stay: the 2017 CPU rows and TF (fused BN) against native PyTorch at fp32
    kept = {(p.section, p.label) for p in plan.rows if p.status == "run" and p.estimate_s}
    assert {("table_2017", "CPU"), ("table_2017", "CPU MKL"), ("versus", "TensorFlow (Keras model, fused BN)"),
            ("versus", "native PyTorch eager")} <= kept


def test_the_same_report_on_the_record_of_this_zen4_kind_runs_every_quoted_row_and_bf16(repo_root, report_03):
    configs, resolved = report_03
    folder = repo_root / "outputs" / "reference" / "hosts" / "amd-epyc-2cpus"
    assert budget.timing_of(folder) == folder / budget.TIMING_DIR  # its newest fresh-clone report plans it
    costs = budget.read_costs(budget.timing_of(folder), record.kind_of(folder))
    plan = budget.plan_rows(configs.sections, costs, costs.peak_fp32, resolved["report_budget_s"],
                            resolved["install_s"], budget.DEFAULT_SHARES,
                            [n for n in costs.notebooks if n != budget.BENCHMARKS], _caps(ZEN4))
    print(f"\nmake report planned for the Zen 4 record: {plan.total_s / 60:.1f} min; {plan.summary()}")
    assert plan.total_s <= 20 * 60 and plan.rows_s <= plan.budget_s
    # bf16 is native there: its rows run; fp16 is not, and no row asks for it
    assert not [p for p in plan.rows if p.status == "skipped" and "bf16" in p.reason]
    # what does not fit is a row nobody quotes (the sections without a share), never a quoted one
    over = [p for p in plan.rows if p.reason.startswith("over budget")]
    assert all(p.section not in budget.DEFAULT_SHARES for p in over)
    assert not [p for p in plan.rows if p.section in ("versus", "table_2017", "mlperf") and p.status == "skipped"]


def test_a_host_of_the_avx2_kind_is_planned_by_its_own_committed_timing_not_scaled_from_zen4(avx2_host, repo_root):
    """The AVX2 kind is known by its timing alone (no record around it): the planner finds it under the committed
    reference root, for a host of that kind and, by the nearest peak, for a Zen 3 whose peak differs; the record
    readers (compare, history, the store) never list it."""
    root = repo_root / "outputs" / "reference"
    assert avx2_host in budget.planning_folders(root)
    assert avx2_host.parent not in record.reference_records(root)
    same = budget.costs_for(record.kind_of(avx2_host), 185.0, [root])
    assert same is not None and same.same_kind and Path(same.source).parts[-2:] == ("amd-epyc-f25m1-avx2", "timing")
    nearest = budget.costs_for(record.HostKind("AMD EPYC", 2, (), (), (("fp32", 140.0),)), 140.0, [root])
    assert nearest is not None and "amd-epyc-f25m1-avx2" in nearest.source


def test_another_kind_s_record_is_scaled_by_the_peaks(avx2_host):
    costs = budget.read_costs(avx2_host, None)  # planned for a host of no known kind
    assert not costs.same_kind and costs.ratio(370.0) == pytest.approx(costs.peak_fp32 / 370.0)
    cfg = BenchConfig(label="CPU", model="resnet50", onednn="off", steps=2, warmup=1, min_time_s=3.0,
                      image_size=224)
    slow, how = costs.estimate(cfg, costs.peak_fp32)
    fast, how_fast = costs.estimate(cfg, costs.peak_fp32 * 2)
    assert how == "the record's row" and "compute × 0.50" in how_fast
    assert 0.5 * slow < fast < slow  # start, import and build do not get faster with the GEMM peak
    unknown, how = costs.estimate(BenchConfig(mode="infer", batch_size=3), costs.peak_fp32)
    assert unknown > 0 and "median" in how


def test_a_section_share_that_names_no_section_or_no_number_is_one_line():
    with pytest.raises(UsageError, match="'tabel' is not a section; sections are: table_2017"):
        budget.check_shares({"tabel": 1}, ["table_2017", "versus"])
    with pytest.raises(UsageError, match=r"section_shares.versus: -1 is not a number >= 0"):
        budget.check_shares({"versus": -1}, ["versus"])
    with pytest.raises(UsageError, match="add up to 0"):
        budget.check_shares({"versus": 0}, ["versus"])


def test_the_runner_checks_the_budget_parameters_before_anything_starts(tmp_path, repo_root):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nnotebooks:\n  03_benchmarks:\n    section_shares: {tabel: 1}\n")
    with pytest.raises(UsageError, match="'tabel' is not a section"):
        runner.load_plan(bad, repo_root / "notebooks")
    bad.write_text("name: bad\nnotebooks:\n  03_benchmarks:\n    report_budget_s: -5\n")
    with pytest.raises(UsageError, match="report_budget_s: -5 is not a number > 0"):
        runner.load_plan(bad, repo_root / "notebooks")


# ------------------------------------------------------------------------------------------ the masked AVX2 host
@pytest.fixture
def avx2_only(monkeypatch):
    """This host, whatever it is, planned as an AVX2-only CPU."""
    monkeypatch.setenv(host.MASK_ENV, host.AVX2_ONLY_MASK)


def test_under_the_avx2_mask_every_bf16_row_is_skipped_before_its_process_starts(avx2_only, monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(launcher, "_run_process", lambda cfgs, *a, **k: started.append(cfgs) or 0)
    cfgs = [BenchConfig(label="tf bf16", precision="bf16", mode="infer", batch_size=1, image_size=32,
                        model="tiny-resnet"),
            BenchConfig(label="torch bf16", backend="torch", impl="native", precision="bf16", image_size=32,
                        model="tiny-resnet"),
            BenchConfig(label="openvino bf16", backend="openvino", precision="bf16", mode="infer", batch_size=1),
            BenchConfig(label="fpmath", env={"ONEDNN_DEFAULT_FPMATH_MODE": "BF16"})]
    for cfg in cfgs:
        status, why = launcher.precheck(cfg) or (None, None)
        if cfg.backend == "openvino" and status and "bf16" not in why:  # not installed here: skipped for that
            continue
        assert status == "skipped" and "no bf16 instructions" in why and ("masked" in why) == NATIVE, (cfg.label, why)
    rows = [launcher.run_group([cfg], None)[0] for cfg in cfgs[:2] + cfgs[3:]]
    assert not started and all(r["status"] == "skipped" for r in rows)
    assert emulation_reason(BenchConfig(precision="bf16", device="gpu")) is None  # a GPU has bf16
    assert emulation_reason(BenchConfig()) is None


def test_under_the_avx2_mask_the_bench_worker_itself_refuses_an_emulated_row(avx2_only):
    from resnet_lab.bench import measure

    row = measure.measure(BenchConfig(precision="bf16", model="tiny-resnet", image_size=32, batch_size=2))
    assert row["status"] == "skipped" and "no bf16 instructions" in row["reason"]


def test_run_matrix_leaves_a_planned_skip_out_without_a_process(monkeypatch, tmp_path):
    groups = []

    def fake_group(cfgs, peak=None, log_dir=None, python=None, on_row=None):
        groups.append([c.label for c in cfgs])
        for k, cfg in enumerate(cfgs):
            on_row(k, {**bench_rows.skipped_row(cfg, "skipped", "fake"), "images_per_sec": 5.0})

    monkeypatch.setattr(launcher, "run_group", fake_group)
    rows = launcher.run_matrix([BenchConfig(label="a"), BenchConfig(label="b", batch_size=8),
                                BenchConfig(label="c", batch_size=4)], out=tmp_path, progress=False,
                               skip={1: "over budget (estimated 99 s here)"})
    assert groups == [["a", "c"]]
    assert rows[1]["status"] == "skipped" and rows[1]["reason"] == "over budget (estimated 99 s here)"
    assert [r["label"] for r in json.loads((tmp_path / "bench.json").read_text())] == ["a", "b", "c"]


def test_the_default_report_under_the_avx2_mask_plans_no_bf16_row_on_this_host(avx2_only, report_03):
    configs, _ = report_03
    plan = budget.plan_here(configs.sections, None, None)  # no budget: only what this CPU would emulate
    bf16 = [p for p in plan.rows if configs.sections[p.section][p.index].precision == "bf16"]
    assert bf16 and all(p.status == "skipped" and ("masked" in p.reason) == NATIVE for p in bf16)
    assert "emulated: bf16" in plan.summary()


def test_the_estimates_are_held_against_what_the_rows_then_took():
    plan = budget.RowPlan([budget.Planned("versus", 0, "TF", 100.0), budget.Planned("versus", 1, "torch", 50.0),
                           budget.Planned("versus", 2, "bf16", None, "skipped", "emulated")], 150.0, {})
    rows = {"versus": [{"wall_s": 40.0, "process_means": [1, 2, 3]}, {"wall_s": 25.0}, {"wall_s": 0.0}]}
    frame, line = budget.against_measured(plan, rows)
    assert list(frame["measured_s"]) == [120.0, 25.0] and list(frame["ratio"]) == [1.2, 0.5]
    assert "estimated 2.5 min for the 2 rows measured; they took 2.4 min (0.97×; the furthest off: torch, 0.50×)" \
        in line
    assert "nothing to hold" in budget.against_measured(plan, {})[1]
