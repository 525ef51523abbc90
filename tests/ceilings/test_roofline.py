"""The roofline of a step: oneDNN's verbose lines per primitive, FLOPs and bytes from shapes, the two
ceilings (GEMM peak, triad bandwidth), and the time each primitive loses against its bound."""

from __future__ import annotations

import math

import pytest

from resnet_lab.ceilings import membw, profile, roofline

# Real lines of a TensorFlow training step (ResNet-50 at 64², batch 4, oneDNN 3.x on AVX-512), framed as
# the worker frames its timed steps; two steps.
CONV = ("onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core,forward_training,"
        "src:f32::blocked:acdb::f0 wei:f32:a:blocked:Acdb64a::f0 bia:undef::undef::: dst:f32::blocked:acdb::f0,"
        "attr-scratchpad:user,alg:convolution_direct,mb4_ic3oc64_ih70oh32kh7sh2dh0ph0_iw70ow32kw7sw2dw0pw0,{ms}")
REORDER = ("onednn_verbose,v1,primitive,exec,cpu,reorder,jit:uni,undef,src:f32::blocked:cdba::f0 "
           "dst:f32::blocked:Acdb64a::f0,,,64x3x7x7,{ms}")
IP = ("onednn_verbose,v1,primitive,exec,cpu,inner_product,x64:gemm:jit,forward_training,src:bf16::blocked:ab::f0 "
      "wei:bf16::blocked:ba::f0 bia:f32:a:blocked:a::f0 dst:bf16::blocked:ab::f0,attr-scratchpad:user,,"
      "mb4ic2048oc1000,{ms}")
POOL = ("onednn_verbose,v1,primitive,exec,cpu,pooling,jit:avx512_core,forward_training,src:f32::blocked:acdb::f0 "
        "dst:f32::blocked:acdb::f0 ws:u8::blocked:acdb::f0,,alg:pooling_max,"
        "mb4ic64_ih34oh16kh3sh2dh0ph0_iw34ow16kw3sw2dw0pw0,{ms}")
GEMM = ("onednn_verbose,v1,primitive,exec,cpu,gemm_api,,undef,src_f32::blocked:ab:f0 wei_f32::blocked:ba:f0 "
        "dst_f32::blocked:ab:f0,,,4x1000:1000x2048,{ms}")


def _log() -> str:
    lines = []
    for step in range(2):
        lines.append(f"{profile.STEP_START} {10.0 * step}")
        lines += [REORDER.format(ms=0.5), CONV.format(ms=2.0), CONV.format(ms=2.0), IP.format(ms=1.0),
                  POOL.format(ms=0.25), GEMM.format(ms=0.75)]
        lines.append(f"{profile.STEP_END} {10.0 * step + 0.01}")
    lines.append(CONV.format(ms=99.0))  # outside the timed steps: not counted
    return "\n".join(lines)


def test_primitives_per_step():
    prof = profile.parse_onednn_verbose(_log())
    prims = {(p["kind"], p["prop"]): p for p in prof["primitives"]}
    conv = prims[("convolution", "forward_training")]
    assert conv["calls_per_step"] == 2 and conv["ms_per_step"] == pytest.approx(4.0)
    assert conv["desc"].startswith("mb4_ic3oc64") and (conv["src_dt"], conv["wei_dt"], conv["dst_dt"]) == ("f32",) * 3
    assert prims[("inner_product", "forward_training")]["src_dt"] == "bf16"
    assert prims[("gemm_api", "undef")]["wei_dt"] == "f32"  # gemm_api writes src_f32, not src:f32
    assert sum(p["ms_per_step"] for p in prof["primitives"]) == pytest.approx(prof["onednn_ms"])
    assert prof["primitives"][0]["ms_per_step"] == max(p["ms_per_step"] for p in prof["primitives"])


def test_work_from_shapes():
    prims = {p["kind"]: p for p in profile.parse_onednn_verbose(_log())["primitives"]}
    flops, nbytes = roofline.work(prims["convolution"])
    assert flops == 2 * 4 * 64 * 32 * 32 * 3 * 7 * 7  # 2 · MACs
    assert nbytes == 4 * (4 * 3 * 70 * 70 + 64 * 3 * 7 * 7 + 4 * 64 * 32 * 32)
    flops, nbytes = roofline.work(prims["inner_product"])
    assert flops == 2 * 4 * 2048 * 1000 and nbytes == 2 * (4 * 2048 + 2048 * 1000 + 4 * 1000)  # bf16: 2 bytes
    assert roofline.work(prims["reorder"]) == (0.0, 2 * 4 * 64 * 3 * 7 * 7)
    assert roofline.work(prims["gemm_api"])[0] == 2 * 4 * 1000 * 2048
    flops, nbytes = roofline.work(prims["pooling"])
    assert flops == 4 * 64 * 16 * 16 * 9 and nbytes == 4 * (4 * 64 * 34 * 34 + 4 * 64 * 16 * 16)
    assert roofline.work({"kind": "convolution", "prop": "", "desc": "nonsense"}) is None
    flops, nbytes = roofline.work({"kind": "eltwise", "prop": "backward_data", "desc": "32x64x56x56",
                                   "src_dt": "bf16", "dst_dt": "bf16"})
    assert flops == 2 * 32 * 64 * 56 * 56 and nbytes == 3 * 2 * 32 * 64 * 56 * 56


def test_table_bounds_and_losses():
    prims = profile.parse_onednn_verbose(_log())["primitives"]
    peak = {"peak_gflops": {"fp32": 100.0, "bf16": 400.0}, "bandwidth_gbps": 10.0}
    df = roofline.table(prims, peak).set_index("primitive")
    conv = df.loc["convolution:forward_training"]
    flops, nbytes = roofline.work(next(p for p in prims if p["kind"] == "convolution"))
    bound_s = max(flops / 100e9, nbytes / 10e9)
    assert conv["bound_ms_per_step"] == pytest.approx(2 * 1e3 * bound_s)
    assert conv["lost_ms_per_step"] == pytest.approx(4.0 - 2 * 1e3 * bound_s)
    assert conv["bound"] == ("compute" if flops / 100e9 > nbytes / 10e9 else "memory")
    assert conv["attainable_gflops"] == pytest.approx(min(100.0, flops / nbytes * 10.0))
    ip = df.loc["inner_product:forward_training"]  # bf16 weights: bounded by the bf16 peak
    assert ip["attainable_gflops"] == pytest.approx(min(400.0, ip["intensity"] * 10.0))
    reorder = df.loc["reorder"]
    assert reorder["intensity"] == 0 and reorder["bound"] == "memory"
    lost = roofline.table(prims, peak)["lost_ms_per_step"].tolist()
    assert lost == sorted(lost, reverse=True)  # the biggest loss first
    text = roofline.summary(roofline.table(prims, peak), peak, step_ms=10.0)
    assert "of a 10 ms step" in text and "largest losses" in text
    # without the bandwidth the bound columns stay empty, and the summary says why
    no_bw = roofline.table(prims, {"peak_gflops": {"fp32": 100.0}})
    assert "lacks one" in roofline.summary(no_bw, {"peak_gflops": {"fp32": 100.0}})


def test_plot_draws_roofs_and_primitives():
    prims = profile.parse_onednn_verbose(_log())["primitives"]
    peak = {"peak_gflops": {"fp32": 100.0, "bf16": 400.0}, "bandwidth_gbps": 10.0}
    ax = roofline.plot(roofline.table(prims, peak), peak)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lab.startswith("fp32 roof") for lab in labels) and "convolution:forward_training" in labels
    assert ax.get_xscale() == "log"


def test_triad_measures_real_bandwidth():
    r = membw.triad(8 * 2**20, repeats=2, threads=2)
    assert r["threads"] == 2 and r["bytes_per_element"] == 24
    assert r["best_gbps"] >= r["median_gbps"] > 0.1 and math.isfinite(r["best_gbps"])
    with pytest.raises(ValueError, match="n_bytes"):
        membw.triad(1024)


def test_problem_names_are_short():
    prims = {p["kind"]: p for p in profile.parse_onednn_verbose(_log())["primitives"]}
    assert roofline.problem(prims["convolution"]) == "4×3×70² → 64, 7×7/2"
    assert roofline.problem(prims["inner_product"]) == "4×2048 · 2048×1000"
    assert roofline.problem(prims["gemm_api"]) == "4×1000 · 1000×2048"
    assert roofline.problem(prims["pooling"]) == "4×64×34², 3×3"
    assert roofline.problem(prims["reorder"]) == "64×3×7×7"


def test_faster_than_the_peak_is_flagged_with_the_reason():
    """A primitive above the compute roof means the peak is too low: said, with the busy-host reason if known."""
    prims = profile.parse_onednn_verbose(_log())["primitives"]
    low = {"peak_gflops": {"fp32": 0.05, "bf16": 0.05}, "bandwidth_gbps": 1e6,
           "loaded": ["load average 1.9 on 2 CPUs when the GEMMs started"]}
    text = roofline.summary(roofline.table(prims, low), low)
    assert "faster than the GEMM peak, which is physically impossible" in text
    assert "measured on a busy host: load average 1.9" in text and "overstated" in text
    quiet = {**low, "loaded": []}
    assert "do not saturate" in roofline.summary(roofline.table(prims, quiet), quiet)
    fine = {"peak_gflops": {"fp32": 1e6, "bf16": 1e6}, "bandwidth_gbps": 1e6}
    assert "⚠" not in roofline.summary(roofline.table(prims, fine), fine)


def test_batch_norm_primitives_carry_their_dtype_and_bytes():
    """oneDNN names batch norm's tensor `data`, not `src` (a real line of TF's fused batch norm, ReLU fused)."""
    line = ("onednn_verbose,v1,primitive,exec,cpu,batch_normalization,bnorm_tbb_jit:avx512_core,forward_training,"
            "data:f32::blocked:acdb::f0,,flags:CHR,mb32ic64ih112iw112,45.365")
    log = "\n".join([f"{profile.STEP_START} 0.0", line, f"{profile.STEP_END} 0.1"])
    (bn,) = profile.parse_onednn_verbose(log)["primitives"]
    assert bn["src_dt"] == "f32" and bn["ms_per_step"] == pytest.approx(45.365)
    n = 32 * 64 * 112 * 112
    assert roofline.work(bn) == (5.0 * n, 2.0 * 4 * n)
    assert roofline.problem(bn) == "mb32ic64ih112iw112"
