from __future__ import annotations

import json
import os
import socket
import time

import pytest

from resnet_lab import cli
from resnet_lab.ceilings import peak
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
    lines = peak.summary_lines(d)
    assert lines[0].startswith("fp32: peak") and "× fp32" in lines[1]
    assert d["bandwidth_gbps"] == d["bandwidth"]["best_gbps"] > 0 and d["bandwidth"]["array_mib"] == 16
    assert lines[-1].startswith("memory bandwidth:") and "FLOP/byte" in lines[-1]


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
