from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, assert_usage_error, fresh_env

from resnet_lab import cli
from resnet_lab.core.errors import UsageError
from resnet_lab.workbook import runner

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"


@pytest.mark.parametrize(
    ("value", "annotation", "ok"),
    [
        (3, "int", True), (True, "int", False), (3.5, "int", False), (3, "float", True), ("3", "float", False),
        ("x", "str", True), (1, "str", False), (False, "bool", True), (0, "bool", False),
        ([1, 2], "list[int]", True), ([1, "2"], "list[int]", False), ("ab", "list[str]", False),
        ({"a": 1.0}, "dict[str, float]", True), ({"a": "b"}, "dict[str, float]", False), ([1], "dict", False),
        ([[1, 2]], "list[list[int]]", True), ([[1, "x"]], "list[list[int]]", False),
        ([1, "a"], "tuple[int, str]", True), ([1, 2], "tuple[int, str]", False), ([1, 2, 3], "tuple[int, ...]", True),
        ("anything", "None", True),
    ],
)
def test_check_type(value, annotation, ok):
    assert runner.check_type(value, annotation) is ok


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "params.yaml"
    p.write_text(text)
    return p


def test_plan_only_from_file_and_command_line(tmp_path):
    p = write(tmp_path, "name: t\nonly: [20_fails]\n")
    assert list(runner.load_plan(p, FIXTURES).notebooks) == ["20_fails"]
    assert list(runner.load_plan(p, FIXTURES, only=["10_ok"]).notebooks) == ["10_ok"]
    with pytest.raises(UsageError, match="unknown notebook '30_x'"):
        runner.load_plan(write(tmp_path, "name: t\nonly: [30_x]\n"), FIXTURES)


def test_plan_merges_defaults_and_overrides(tmp_path):
    p = write(tmp_path, "name: t\ndefaults:\n  steps: 5\nnotebooks:\n  10_ok:\n    scale: 2\n")
    plan = runner.load_plan(p, FIXTURES)
    assert list(plan.notebooks) == ["10_ok", "20_fails"]
    assert plan.parameters["10_ok"] == {"steps": 5, "scale": 2}
    assert plan.parameters["20_fails"] == {}  # it does not declare steps


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: t\nnotebooks: [unclosed\n", "invalid YAML at line"),
        ("name: t\nnotebooks:\n  99_missing: {}\n", "unknown notebook '99_missing'"),
        ("name: t\nnotebooks:\n  10_ok:\n    stepz: 3\n", "notebooks.10_ok.stepz: unknown parameter; 10_ok takes: st"),
        ("name: t\nnotebooks:\n  10_ok:\n    steps: many\n", "notebooks.10_ok.steps: expected int, got str 'many'"),
        ("name: t\ndefaults:\n  names: [1, 2]\n", "defaults.names: expected list[str]"),
        ("name: t\nnotebooks:\n  10_ok:\n    output_dir: /tmp/x\n", "'output_dir' is set by the runner"),
        ("name: t\ndefaults:\n  nobody_takes_this: 1\n", "defaults ['nobody_takes_this'] are not a parameter"),
        ("name: has space\n", "'name' must be a short name"),
        ("name: t\nextra: 1\n", "unknown key(s) 'extra'; allowed: defaults, description, name, notebooks, only"),
        ("- a\n- b\n", "expected a mapping"),
    ],
)
def test_bad_params_are_one_clear_line(tmp_path, text, message):
    with pytest.raises(UsageError) as e:
        runner.load_plan(write(tmp_path, text), FIXTURES)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_params_cli_exits_2_before_anything_is_written(tmp_path, capsys):
    p = write(tmp_path, "name: t\nnotebooks:\n  10_ok:\n    steps: many\n")
    out = tmp_path / "outputs"
    code = cli.main(["run", str(p), "--out", str(out), "--notebooks", str(FIXTURES), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "expected int" in err
    assert not out.exists()


def test_bad_params_fail_without_importing_tensorflow(tmp_path):
    p = write(tmp_path, "name: t\nnotebooks:\n  10_ok:\n    nope: 1\n")
    assert_usage_error(["run", str(p), "--notebooks", str(FIXTURES)], "10_ok.nope: unknown parameter")


def test_run_records_failure_and_keeps_going(tmp_path, capsys):
    p = write(tmp_path, "name: fixture\ndescription: runner test\nnotebooks:\n  10_ok:\n    steps: 3\n")
    out = tmp_path / "outputs"
    args = ["run", str(p), "--out", str(out), "--notebooks", str(FIXTURES), "--no-progress"]
    assert cli.main(args) == 1
    assert "1 notebook(s) failed: 20_fails" in capsys.readouterr().err

    (run_dir,) = (out / "runs").iterdir()
    assert run_dir.name.endswith("-fixture")
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert prov["status"] == "failed"
    assert [(n["name"], n["status"]) for n in prov["notebooks"]] == [("10_ok", "ok"), ("20_fails", "failed")]
    assert "deliberate failure" in prov["notebooks"][1]["error"]
    assert prov["params"]["notebooks"]["10_ok"]["steps"] == 3
    assert prov["packages"]["papermill"] and prov["cpu"]["logical_cpus"] >= 1
    assert prov["started_at"] <= prov["finished_at"]

    # every parameter the notebook ran with, from the runner's record: the cell's defaults, the file's 3
    # output_dir relative to the outputs root (the kernel's $RESNET_LAB_OUTPUTS): the HTML shows no machine path
    rel = f"runs/{run_dir.name}/10_ok"
    expected = {"steps": 3, "names": ["a", "b"], "scale": 1.5, "output_dir": rel}
    assert prov["notebooks"][0]["parameters"] == expected and not Path(rel).is_absolute()
    assert prov["notebooks"][0]["injected"] == {"steps": 3, "output_dir": rel}
    nb_prov = json.loads((run_dir / "10_ok" / "provenance.json").read_text())
    assert nb_prov["params"] == expected and nb_prov["params_source"] == "resnet-lab run"
    results = json.loads((run_dir / "10_ok" / "results.json").read_text())
    assert results["steps"] == 3 and results["names"] == ["a", "b"]
    assert (run_dir / "10_ok" / "line.png").stat().st_size > 0
    for nb in ("10_ok", "20_fails"):
        for suffix in (".ipynb", ".html", ".report.html"):
            assert (run_dir / f"{nb}{suffix}").exists(), f"{nb}{suffix}"
    failed_html = (run_dir / "20_fails.html").read_text()
    assert "deliberate failure" in failed_html
    ok_html = (run_dir / "10_ok.html").read_text()
    assert "data:image/png;base64" in ok_html  # plots inline: the HTML is self-contained
    hidden = (run_dir / "10_ok.report.html").read_text()
    assert "prepare_output_dir" in ok_html and "prepare_output_dir" not in hidden
    assert str(tmp_path.resolve()) not in ok_html and str(tmp_path.resolve()) not in hidden

    index = (out / "index.html").read_text()
    assert run_dir.name in index and "failed" in index and "10_ok.report.html" in index

    # A second run never touches the first one; the index lists both, newest first.
    before = {f: f.stat().st_mtime_ns for f in run_dir.rglob("*")}
    assert cli.main([*args[:-1], "--only", "10_ok", "--no-progress"]) == 0
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 2
    assert before == {f: f.stat().st_mtime_ns for f in run_dir.rglob("*")}
    index = (out / "index.html").read_text()
    assert index.index(runs[1].name) < index.index(runs[0].name)


def test_run_folder_names_never_collide(tmp_path):
    a = runner.new_run_dir(tmp_path, "x")
    b = runner.new_run_dir(tmp_path, "x")
    assert a != b and a.is_dir() and b.is_dir()


def test_kernel_env_is_restored(tmp_path):
    os.environ.pop("RESNET_LAB_RUN_DIR", None)
    p = write(tmp_path, "name: t\n")
    runner.run_notebooks(p, out=tmp_path / "o", only=["10_ok"], notebooks_dir=FIXTURES, progress=False)
    assert "RESNET_LAB_RUN_DIR" not in os.environ


def test_the_parameters_cell_is_read_as_papermill_reads_it(tmp_path):
    """The runner reads parameters cells itself (papermill's import takes 2 s); papermill's reading is the spec."""
    import papermill

    cell = ('steps: int = 3  # timed steps\nname = "a"  # no annotation\nsizes: list = [\n    16,  # small\n'
            '    32,\n]  # the sweep\nscale: float = 1.5\n')
    nb = json.loads((FIXTURES / "10_ok.ipynb").read_text())
    next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))["source"] = cell
    made = tmp_path / "made.ipynb"
    made.write_text(json.dumps(nb))
    for path in [made, *sorted((ROOT / "notebooks").glob("*.ipynb")), *sorted(FIXTURES.glob("*.ipynb"))]:
        assert runner.declared_parameters(path) == papermill.inspect_notebook(str(path)), path.name
    assert runner.declared_parameters(made)["sizes"]["default"] == "[16,32,]"


def test_resolved_parameters_are_the_cell_with_the_file_over_it():
    declared = runner.declared_parameters(FIXTURES / "10_ok.ipynb")
    assert runner.resolved_parameters(declared, {"steps": 7}) == {
        "steps": 7, "names": ["a", "b"], "scale": 1.5, "output_dir": ""}


@pytest.mark.serial
@pytest.mark.parametrize("override, message", [
    ("03_benchmarks:\n    batch_size: -4", "notebooks.03_benchmarks: batch size: -4 is not an integer >= 1"),
    ("02_op_extraction:\n    models: [resnet9000]", "notebooks.02_op_extraction: model: 'resnet9000' is not one of"),
    ("02_op_extraction:\n    precision: fp8", "notebooks.02_op_extraction: precision: 'fp8' is not one of: fp32"),
    ("02_op_extraction:\n    model_2017: resnet18", "model_2017: 'resnet18' is not one of: resnet50_v1.5, resnet50,"),
    ("03_benchmarks:\n    image_size: 16", "resnet50_v1.5: input height 16 is too small"),
    ("03_benchmarks:\n    mlperf_queries: 0", "notebooks.03_benchmarks: queries: 0 is not an integer >= 1"),
    ("03_benchmarks:\n    native_precisions: [fp8]", "precisions: 'fp8' is not one of: fp32, bf16, fp16"),
    ("03_benchmarks:\n    model_2017: resnet9000", "model: 'resnet9000' is not one of"),
    ("04_convergence:\n    model: resnet50", "resnet50 is not a CIFAR ResNet"),
])
def test_values_are_checked_by_the_package_before_anything_runs(tmp_path, override, message):
    p = write(tmp_path, f"name: bad\nnotebooks:\n  {override}\n")
    t0 = time.perf_counter()
    r = assert_usage_error(["run", str(p), "--out", str(tmp_path / "outputs"), "--notebooks", str(ROOT / "notebooks")],
                           message)
    assert time.perf_counter() - t0 < 5
    assert r.stdout == "" and not (tmp_path / "outputs").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="/proc and process sessions")
def test_sigint_stops_the_run_keeps_what_finished_and_leaves_no_process(tmp_path):
    p = write(tmp_path, "name: stop\n")
    out = tmp_path / "outputs"
    proc = subprocess.Popen([sys.executable, "-m", "resnet_lab.cli", "run", str(p), "--out", str(out),
                             "--notebooks", str(FIXTURES.parent / "interrupt")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=fresh_env())
    deadline = time.monotonic() + 120
    pid_file = None
    while time.monotonic() < deadline:  # until 30_sleeps has started its child
        found = list(out.glob("runs/*/30_sleeps/child.pid"))
        if found and found[0].read_text():
            pid_file = found[0]
            break
        time.sleep(0.5)
    assert pid_file is not None, "the sleeping notebook never started"
    child = int(pid_file.read_text())
    proc.send_signal(signal.SIGINT)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, text
    run_dir = pid_file.parent.parent
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert prov["status"] == "interrupted"
    assert [(n["name"], n["status"]) for n in prov["notebooks"]] == [("10_ok", "ok"),
                                                                     ("30_sleeps", "interrupted")]
    assert json.loads((run_dir / "10_ok" / "results.json").read_text())["steps"] == 2  # kept, intact
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    assert "interrupted" in (out / "index.html").read_text()
    assert "interrupted:" in text


def test_progress_line():
    event = {"matrix": "bench_2017", "i": 2, "n": 8, "label": "CPU MKL", "mode": "train", "batch_size": 32,
             "status": "ok", "images_per_sec": 5.951, "wall_s": 41.2, "elapsed_s": 80.0}
    assert runner.progress_line("03_benchmarks", event) == (
        "  03_benchmarks bench_2017 [2/8] CPU MKL train b32: 5.95 img/s (41 s); ~4.0 min left in bench_2017")
    shared = {**event, "i": 8, "label": "batch", "same_run_as": "CPU MKL", "images_per_sec": None,
              "status": "skipped"}
    assert runner.progress_line("03_benchmarks", shared).endswith(": skipped (same run as CPU MKL) (41 s)")
    assert "infer infer" not in runner.progress_line("01", {**event, "label": "v1 infer", "mode": "infer"})


def test_c_level_logs_warnings_and_progress_bars_go_to_the_log_not_the_report(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [
        nbformat.v4.new_markdown_cell("# noisy"),
        nbformat.v4.new_code_cell('steps: int = 1  # unused\noutput_dir: str = ""  # unused',
                                  metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import os, warnings\n"
            "os.write(2, b'I0000 00:00:00.000000 1 cpu_feature_guard.cc] C-level log line\\n')\n"
            "warnings.warn('a library warning')\n"
            "from tqdm.auto import tqdm\n"
            "for _ in tqdm(range(3), desc='a bar'):\n    pass\n"
            "print('what the reader should see')"),
    ]
    (tmp_path / "nbs").mkdir()
    nbformat.write(nb, tmp_path / "nbs" / "10_noisy.ipynb")
    result = runner.run_notebooks(write(tmp_path, "name: noisy\n"), out=tmp_path / "o",
                                  notebooks_dir=tmp_path / "nbs", progress=False)
    assert result.ok, result.errors
    executed = nbformat.read(result.run_dir / "10_noisy.ipynb", as_version=4)
    shown = json.dumps(executed.cells[-1].outputs)
    assert "what the reader should see" in shown
    for noise in ("C-level log line", "a library warning", "a bar"):
        assert noise not in shown, noise
    log = (result.run_dir / "10_noisy.log").read_text()
    assert "C-level log line" in log and "UserWarning: a library warning" in log
    assert "TQDM_DISABLE" not in os.environ
