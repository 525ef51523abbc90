from __future__ import annotations

import json
import os
import socket
import time

import pytest

from resnet_lab import cli
from resnet_lab.ceilings import gemm, peak
from resnet_lab.core.errors import UsageError


def doc(host: str, n: int, fp32: float) -> dict:
    return {
        "host": host,
        "measurements": [{"library": "numpy", "dtype": "fp32", "n": n, "best_gflops": fp32}],
        "peak_gflops": {"fp32": fp32},
        "peak_source": {"fp32": f"numpy n={n}"},
    }


@pytest.fixture
def outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("RESNET_LAB_OUTPUTS", str(tmp_path))
    monkeypatch.delenv("RESNET_LAB_RUN_DIR", raising=False)
    monkeypatch.delenv("RESNET_LAB_PEAK", raising=False)
    return tmp_path


def put(outputs, run: str, d: dict):
    p = outputs / "runs" / run / "00_environment" / "peak.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(d))
    time.sleep(0.01)  # distinct mtimes
    return p


def test_load_peak_prefers_newest_full_measurement_of_this_host(outputs):
    host = socket.gethostname()
    put(outputs, "a", doc(host, 4096, 300.0))
    put(outputs, "b", doc("elsewhere", 4096, 999.0))
    put(outputs, "c", doc(host, 512, 100.0))  # a smoke run's tiny GEMMs: not the machine's limit
    assert peak.peak_gflops("fp32", peak.load_peak()) == 300.0
    assert peak.peak_gflops("bf16", peak.load_peak()) is None


def test_the_current_runs_own_peak_wins_even_if_small(outputs, monkeypatch):
    host = socket.gethostname()
    put(outputs, "a", doc(host, 4096, 300.0))
    small = put(outputs, "c", doc(host, 512, 100.0))
    monkeypatch.setenv("RESNET_LAB_RUN_DIR", str(small.parent.parent))
    assert peak.peak_gflops("fp32", peak.load_peak()) == 100.0


def test_no_peak_measured(outputs):
    assert peak.load_peak() is None
    assert peak.peak_gflops("fp32", None) is None
    with pytest.raises(UsageError, match="does not exist"):
        peak.load_peak(outputs / "missing.json")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtypes": ["fp64"]}, "dtype: 'fp64' is not one of: fp32, bf16, fp16"),
        ({"libraries": ["mkl"]}, "library: 'mkl' is not one of: numpy, tensorflow"),
        ({"sizes": [8]}, "GEMM size: 8 is not an integer >= 16"),
        ({"sizes": []}, "GEMM sizes: give at least one size"),
        ({"repeats": 0}, "repeats: 0 is not an integer >= 1"),
        ({"triad_mib": 1}, "triad MiB (0 skips the bandwidth): 1 is not an integer >= 8"),
    ],
)
def test_validate(kwargs, message):
    args = dict(dtypes=["fp32"], libraries=["numpy"], sizes=[64], repeats=1) | kwargs
    with pytest.raises(UsageError) as info:
        peak.validate(**args)
    assert str(info.value) == message


def test_measure_small_gemms_for_real():
    d = peak.measure(sizes=[64, 128], dtypes=["fp32", "bf16"], libraries=["numpy", "tensorflow"], repeats=2,
                     triad_mib=16)
    pairs = {(r["library"], r["dtype"]) for r in d["measurements"]}
    assert pairs == {("numpy", "fp32"), ("tensorflow", "fp32"), ("tensorflow", "bf16")}
    assert all(r["best_gflops"] >= r["median_gflops"] > 0 for r in d["measurements"])
    assert set(d["peak_gflops"]) == {"fp32", "bf16"}
    assert not peak.is_full_measurement(d)
    assert d["bandwidth_gbps"] == d["bandwidth"]["best_gbps"] > 0 and d["bandwidth"]["array_mib"] == 16


def test_tf32_is_a_gpu_format_and_its_product_leaves_torch_as_it_found_it():
    with pytest.raises(ValueError, match="no tf32 GEMM on cpu"):
        gemm.time_gemm("torch", "tf32", 64, device="cpu")
    with pytest.raises(ValueError, match="no tf32 GEMM through numpy"):
        gemm.time_gemm("numpy", "tf32", 64, device="gpu")
    assert gemm.CHECK_SIZES["gpu"][-1] >= 8192 > gemm.CHECK_SIZES["cpu"][-1]
    torch = pytest.importorskip("torch")
    before = torch.backends.cuda.matmul.allow_tf32
    product = gemm._torch(32, "tf32", "cpu")  # the GPU's code path; on a CPU the flag changes nothing
    assert isinstance(product(), float) and torch.backends.cuda.matmul.allow_tf32 == before


def test_cli_never_overwrites(tmp_path, capsys):
    target = tmp_path / "p.json"
    target.write_text("{}")
    assert cli.main(["peak", "--out", str(target), "--sizes", "64"]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert target.read_text() == "{}"
    assert os.path.getsize(target) == 2


def test_a_peak_measured_under_load_says_so_and_a_quiet_one_wins(tmp_path, monkeypatch):
    quiet = {**doc(socket.gethostname(), 2048, 300.0), "load": {"before_1m": 0.2, "available_cpus": 2}}
    busy = {**doc(socket.gethostname(), 4096, 200.0), "load": {"before_1m": 3.5, "available_cpus": 2}}
    assert peak.loaded_reasons(quiet) == []
    assert peak.loaded_reasons(busy) == ["load average 3.5 on 2 CPUs when the GEMMs started"]
    spread = {**quiet, "measurements": [{"library": "numpy", "dtype": "fp32", "n": 2048, "best_gflops": 300.0,
                                         "median_gflops": 200.0}]}
    assert peak.loaded_reasons(spread) == ["fp32 repeats spread 33 % (best 300, median 200 GFLOP/s)"]
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("RESNET_LAB_OUTPUTS", str(outputs))
    monkeypatch.delenv("RESNET_LAB_RUN_DIR", raising=False)
    monkeypatch.delenv("RESNET_LAB_PEAK", raising=False)
    for name, d in (("a", quiet), ("b", busy)):  # the busy one is newer
        path = outputs / "runs" / name / "00_environment" / "peak.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(d))
        time.sleep(0.02)
    assert peak.load_peak()["peak_gflops"]["fp32"] == 300.0  # the quiet one, though older
    (outputs / "runs" / "a" / "00_environment" / "peak.json").unlink()
    only = peak.load_peak()
    assert only["peak_gflops"]["fp32"] == 200.0 and only["loaded"]  # the busy one, flagged, while alone


def _quiet_host(monkeypatch):
    """/proc/stat as on a host where only this process runs: its busy jiffies are our CPU time."""
    from resnet_lab.core import hostload

    t0 = time.perf_counter()
    cpus = os.cpu_count() or 1
    monkeypatch.setattr(hostload, "proc_stat", lambda: (100 * hostload.process_cpu_seconds(),
                                                        100 * cpus * (time.perf_counter() - t0)))


def test_a_burst_just_before_the_peak_is_not_a_busy_host(monkeypatch):
    """The 1-minute load average still carries a CPU-heavy burst that ended (make report's install); the
    GEMMs' own window was quiet: not flagged."""
    from resnet_lab.core import hostload

    _quiet_host(monkeypatch)
    monkeypatch.setattr(hostload, "MIN_WINDOW_S", 0.0)  # the simulated /proc/stat has no jiffy rounding
    monkeypatch.setattr(peak, "_loadavg", lambda: 3.9)  # what the load average remembers on 2 CPUs
    d = peak.measure(sizes=[512], dtypes=["fp32"], libraries=["numpy"], repeats=20, triad_mib=0, max_seconds=60)
    window = d["load"]["gemm_window"]
    assert d["load"]["before_1m"] == 3.9 and window["others_pct"] is not None, window
    assert window["others_pct"] < 10 and not [r for r in d["loaded"] if "other processes" in r or "load" in r]


@pytest.mark.serial
def test_a_peak_measured_beside_a_busy_loop_is_flagged():
    """One busy loop per CPU competes with the GEMMs for their whole window: flagged, whatever the load
    average said when they started."""
    import subprocess
    import sys

    from resnet_lab.ceilings import gemm

    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.2)
        one = gemm.time_gemm("numpy", "fp32", 1024, 3)["best_s"]  # as many GEMMs as fill a second or two
        repeats = min(2000, max(5, int(2.0 / one) + 1))
        d = peak.measure(sizes=[1024], dtypes=["fp32"], libraries=["numpy"], repeats=repeats, triad_mib=0,
                         max_seconds=60)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    window = d["load"]["gemm_window"]
    assert window["window_s"] >= 0.5 and window["others_pct"] > 30, window
    assert any(r.startswith("other processes used") for r in d["loaded"]), d["loaded"]


def test_a_peak_file_without_its_window_is_judged_by_its_load_average():
    old = {**doc("h", 2048, 300.0), "load": {"before_1m": 3.5, "available_cpus": 2}}
    assert peak.loaded_reasons(old) == ["load average 3.5 on 2 CPUs when the GEMMs started"]
    quiet_window = {"window_s": 4.0, "logical_cpus": 2, "host_busy_pct": 99.0, "own_pct": 95.0, "others_pct": 4.0}
    assert peak.loaded_reasons({**old, "load": {**old["load"], "gemm_window": quiet_window}}) == []
    busy_window = {**quiet_window, "own_pct": 50.0, "others_pct": 49.0}
    assert peak.loaded_reasons({**old, "load": {"before_1m": 0.1, "available_cpus": 2, "gemm_window": busy_window}}) \
        == ["other processes used 49 % of the host's CPU time during the GEMMs (whole host 99 %, this process 50 %)"]
