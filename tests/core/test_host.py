"""Host identity from /proc/cpuinfo and sysfs, and the differences that tell two hosts apart."""

from __future__ import annotations

import json

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


# ------------------------------------------------------------------------------------------ capabilities
def _x86(flags: str, family: int = 25, model: int = 1) -> str:
    return (f"processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
            f"flags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\nflags\t\t: fpu\n")


ZEN3 = _x86("avx avx2 fma f16c")  # family 25 model 1: AVX2 only
ZEN4_X86 = _x86("avx avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni avx512_bf16", model=17)
SPR = _x86("avx2 fma avx_vnni avx512f avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_bf16 amx_int8", 6, 143)
# /proc/cpuinfo of an AWS Graviton3 (Arm Neoverse V1) and a Graviton2 (Neoverse N1)
GRAVITON3 = ("processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics "
             "fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat "
             "ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng\nCPU implementer\t: 0x41\n"
             "CPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd40\nCPU revision\t: 1\n")
GRAVITON2 = ("processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics "
             "fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
             "CPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n")


def _caps(text, machine="x86_64", mask="", system="linux"):
    return host.capabilities(text, machine=machine, mask=mask, environ={}, system=system)


def test_an_avx2_only_cpu_computes_fp32_natively_and_emulates_bf16_fp16_int8_and_tensorflow_leaves_onednn_off():
    caps = _caps(ZEN3)
    assert caps.is_native("fp32") and not any(caps.is_native(p) for p in ("bf16", "fp16", "int8"))
    assert "no bf16 instructions" in caps.emulation_reason("bf16") and "avx512_bf16 or amx_bf16" in \
        caps.emulation_reason("bf16")
    assert caps.emulation_reason("fp32") is None
    assert caps.onednn_default is False and "none of avx512_vnni" in caps.onednn_default_why


def test_zen4_has_bf16_and_int8_natively_not_fp16_and_oneDNN_is_on_by_default():
    caps = _caps(ZEN4_X86)
    assert caps.native == {"fp32": "always", "bf16": "avx512_bf16", "fp16": None, "int8": "avx512_vnni"}
    assert caps.onednn_default and "avx512_vnni+avx512_bf16" in caps.onednn_default_why


def test_sapphire_rapids_has_every_precision_and_amx_turns_onednn_on():
    caps = _caps(SPR)
    assert all(caps.is_native(p) for p in ("fp32", "bf16", "fp16", "int8")) and caps.onednn_default
    assert caps.native["fp16"] == "avx512_fp16"


def test_avx_vnni_alone_turns_onednn_on_as_tensorflow_tests_it():
    assert _caps(_x86("avx2 fma avx_vnni")).onednn_default  # an Alder Lake without AVX-512
    assert not _caps(_x86("avx2 fma avx512f avx512bw")).onednn_default  # Skylake-SP: AVX-512 without VNNI


def test_aarch64_rows_come_from_the_features_line_and_neoverse_v1_turns_onednn_on():
    g3, g2 = _caps(GRAVITON3, "aarch64"), _caps(GRAVITON2, "aarch64")
    assert g3.native["bf16"] == "bf16" and g3.is_native("int8") and g3.is_native("fp16") and g3.onednn_default
    assert not g2.is_native("bf16") and g2.is_native("fp16") and g2.is_native("int8")
    assert not g2.onednn_default and "0xd0c" in g2.onednn_default_why
    assert _caps(GRAVITON3, "arm64").machine == "aarch64"


def test_tensorflow_enables_onednn_by_default_on_linux_and_windows_x86_only():
    assert not _caps(ZEN4_X86, system="darwin").onednn_default
    assert _caps(ZEN3, system="win32").onednn_default


def test_the_mask_makes_an_avx512_host_plan_as_an_avx2_only_one_and_says_so():
    caps = _caps(SPR, mask=host.AVX2_ONLY_MASK)
    assert not any(caps.is_native(p) for p in ("bf16", "fp16", "int8"))
    assert "amx_bf16" in caps.masked and "avx512f" in caps.masked and "avx_vnni" in caps.masked
    assert "masked: " in caps.emulation_reason("bf16") and "masked" in caps.describe()
    # what TensorFlow does is not masked: it reads CPUID
    assert caps.onednn_default
    assert _caps(ZEN4_X86, mask="avx512_bf16").native["int8"] == "avx512_vnni"  # one flag, by name


def test_the_mask_is_read_from_the_environment():
    caps = host.capabilities(ZEN4_X86, machine="x86_64", environ={host.MASK_ENV: "avx512*"}, system="linux")
    assert not caps.is_native("bf16") and caps.masked == ("avx512_bf16", "avx512_vnni", "avx512bw", "avx512f",
                                                          "avx512vl")


def test_onednn_state_reads_tf_enable_onednn_opts_as_tensorflow_does():
    caps = _caps(ZEN3)  # default off
    on = host.onednn_enabled({"TF_ENABLE_ONEDNN_OPTS": "TRUE"}, caps)
    assert on["enabled"] is True and on["why"] == "TF_ENABLE_ONEDNN_OPTS=TRUE"
    assert host.onednn_enabled({"TF_ENABLE_ONEDNN_OPTS": "0"}, _caps(ZEN4_X86))["enabled"] is False
    # "yes" is not a value ReadBoolFromEnvVar takes: TensorFlow warns and keeps its default
    odd = host.onednn_enabled({"TF_ENABLE_ONEDNN_OPTS": "yes"}, caps)
    assert odd["enabled"] is False and "keeps its default" in odd["why"]
    unset = host.onednn_enabled({}, caps)
    assert unset["enabled"] is False and unset["TF_ENABLE_ONEDNN_OPTS"] is None


def test_the_recorded_avx2_host_of_the_fixture_reads_as_avx2_only(avx2_host):
    prov = json.loads((avx2_host / "provenance.json").read_text())
    flags = " ".join(f for f, on in prov["cpu"]["isa"].items() if on)
    caps = _caps(_x86(flags))
    assert not caps.is_native("bf16") and not caps.onednn_default  # the fixture's record said enabled: true
