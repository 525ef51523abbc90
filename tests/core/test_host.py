"""Host identity from /proc/cpuinfo and sysfs, and the differences that tell two hosts apart."""

from __future__ import annotations

from resnet_lab.core import host

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 99
"""


def _caches(tmp_path, sizes):
    for i, (level, kind, size) in enumerate(sizes):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    return tmp_path


def test_identity_reads_the_first_processor_and_the_caches(tmp_path):
    caches = _caches(tmp_path, [(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "1024K"),
                                (3, "Unified", "32M")])
    ident = host.cpu_identity(ZEN4, caches, available_cpus=2)
    assert ident == {"vendor": "AuthenticAMD", "family": 25, "model_number": 17, "stepping": 1,
                     "isa": ["avx2", "avx512_bf16", "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "fma"],
                     "l2_kib": 1024, "l3_kib": 32768, "available_cpus": 2}


def test_identity_without_cpuinfo_or_sysfs_says_nothing_rather_than_guessing(tmp_path):
    ident = host.cpu_identity("", tmp_path / "absent", available_cpus=2)
    assert ident["family"] is None and ident["isa"] is None and ident["l3_kib"] is None


def test_same_name_other_generation_is_told_apart_by_family_and_peak(tmp_path):
    zen4 = host.cpu_identity(ZEN4, tmp_path, available_cpus=2)
    zen5 = dict(zen4, family=26, model_number=2)
    diff = host.differences(zen4, zen5, {"fp32": 215.0}, {"fp32": 508.0})
    assert diff == ["CPU family 25 vs 26", "CPU model number 17 vs 2", "GEMM fp32 peak 215 vs 508 GFLOP/s"]


def test_peaks_within_the_tolerance_and_missing_facts_are_no_difference():
    a = {"family": 25, "l3_kib": None, "isa": ["avx2"]}
    b = {"family": 25, "l3_kib": 32768, "isa": ["avx2"]}  # an older record without the cache size
    assert host.differences(a, b, {"fp32": 215.0}, {"fp32": 215.0 * 1.2}) == []
    assert host.differences(a, b, {"fp32": 215.0}, {"fp32": 215.0 * 1.3}) == ["GEMM fp32 peak 215 vs 280 GFLOP/s"]


def test_isa_difference_names_the_flags_each_side_alone_has():
    diff = host.differences({"isa": ["avx2", "amx_tile"]}, {"isa": ["avx2", "avx512_bf16"]})
    assert diff == ["ISA flags differ: only the baseline has amx_tile; only the candidate has avx512_bf16"]
