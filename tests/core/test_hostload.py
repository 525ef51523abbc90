"""core.hostload: whether the host was busy, from what the CPUs did in the measured window."""

from __future__ import annotations

import pytest

from resnet_lab.core import hostload


def test_proc_stat_text_is_read_as_busy_and_total_jiffies():
    text = "cpu  100 5 50 800 40 0 5 0 0 0\ncpu0 50 2 25 400 20 0 2 0 0 0\n"
    assert hostload.parse_proc_stat(text) == (160, 1000)
    with pytest.raises(ValueError, match="no aggregate 'cpu' line"):
        hostload.parse_proc_stat("intr 1 2 3\n")


@pytest.mark.parametrize(("row", "logical", "others"), [
    ({"host_util": 98.0, "cpu_util": 96.0, "available_cpus": 2}, 2, 2.0),  # the worker had the host to itself
    ({"host_util": 99.0, "cpu_util": 49.0, "available_cpus": 2}, None, 50.0),  # a competitor took one of 2 CPUs
    # a container with 2 of the host's 8 CPUs, kept busy by the worker: 25 % of the host is ours
    ({"host_util": 30.0, "cpu_util": 100.0, "available_cpus": 2}, 8, 5.0),
    ({"host_util": 90.0, "cpu_util": 95.0, "available_cpus": 2}, 2, 0.0),  # jiffy rounding: never below 0
    ({"host_util": None, "cpu_util": 95.0, "available_cpus": 2}, 2, None),  # an older record: not judged
])
def test_a_rows_others_share_is_the_host_less_its_own_use(row, logical, others):
    got = hostload.row_others_pct(row, logical)
    assert got == pytest.approx(others) if others is not None else got is None
    assert hostload.is_busy(got) == (others is not None and others > hostload.OTHERS_BUSY_PCT)
