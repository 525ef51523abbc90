"""One convolution problem: oneDNN's descriptor parsed once, its FLOPs the same in the profile and the
roofline."""

from __future__ import annotations

import pytest

from resnet_lab.ceilings import profile, roofline
from resnet_lab.ceilings.conv import ConvProblem

# ResNet-50's conv2_x 3×3 layer at batch 32: 64 → 64 channels on 56², stride 1, pad 1.
RESNET_3X3 = "mb32_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1"
# A depthwise 3×3 (32 groups of one channel), as oneDNN 3 writes it (groups in front) and as DNNL 1 did.
GROUPED = "g32mb8_ic32oc32_ih28oh14kh3sh2dh0ph1_iw28ow14kw3sw2dw0pw1"
GROUPED_OLD = "mb8_g32ic32oc32_ih28oh14kh3sh2dh0ph1_iw28ow14kw3sw2dw0pw1"


def _line(desc: str, ms: float) -> str:
    return ("onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core,forward_training,"
            "src:f32::blocked:acdb::f0 wei:f32:a:blocked:Acdb64a::f0 bia:undef::undef::: dst:f32::blocked:acdb::f0,"
            f"attr-scratchpad:user,alg:convolution_direct,{desc},{ms}")


def _profile(desc: str, ms: float = 2.0) -> dict:
    text = "\n".join([f"{profile.STEP_START} 0.0", _line(desc, ms), f"{profile.STEP_END} 0.01"])
    return profile.parse_onednn_verbose(text)


def test_a_known_resnet_layer():
    p = ConvProblem.parse(RESNET_3X3)
    assert (p.mb, p.ic, p.oc, p.ih, p.oh, p.kh, p.sh, p.g) == (32, 64, 64, 56, 56, 3, 1, 1)
    n, oh, ow, oc, ic, g, kh, kw = 32, 56, 56, 64, 64, 1, 3, 3
    assert p.flops == 2 * n * oh * ow * oc * (ic / g) * kh * kw
    assert p.bytes(4, 4, 4) == 4 * (32 * 64 * 56 * 56 + 64 * 64 * 3 * 3 + 32 * 64 * 56 * 56)
    assert p.label == "32×64×56² → 64, 3×3/1"


@pytest.mark.parametrize("desc", [RESNET_3X3, GROUPED, GROUPED_OLD])
def test_the_profile_and_the_roofline_count_the_same_flops(desc):
    p = ConvProblem.parse(desc)
    prof = _profile(desc, ms=2.0)
    (prim,) = prof["primitives"]
    flops, _ = roofline.work(prim)
    assert flops == p.flops
    assert prof["conv_gflops"] == pytest.approx(p.flops / 2e-3 / 1e9)  # one call of 2 ms per step
    assert roofline.table([prim], None)["achieved_gflops"][0] == pytest.approx(prof["conv_gflops"])


def test_groups_in_either_place_divide_the_input_channels():
    new, old = ConvProblem.parse(GROUPED), ConvProblem.parse(GROUPED_OLD)
    assert new == old and new.g == 32
    assert new.flops == 2 * 8 * 14 * 14 * 32 * (32 // 32) * 3 * 3
    assert new.bytes(2, 2, 2) == 2 * (8 * 32 * 28 * 28 + 32 * 1 * 3 * 3 + 8 * 32 * 14 * 14)
    assert new.label == "8×32×28² → 32, 3×3/2, g32"


def test_a_3d_problem_and_a_transposed_one():
    p = ConvProblem.parse("mb2_ic4oc8_id10od8kd3sd1dd0pd0_ih10oh8kh3sh1dh0ph0_iw10ow8kw3sw1dw0pw0")
    assert p.flops == 2 * 2 * 8 * 8 * 8 * 8 * 4 * 3 * 3 * 3
    # a deconvolution from 8 channels at 7² to 4 at 14²: each input element meets the kernel once per
    # output channel, the work of the convolution it transposes
    d = ConvProblem.parse("mb1_ic8oc4_ih7oh14kh2sh2dh0ph0_iw7ow14kw2sw2dw0pw0", transposed=True)
    assert d.flops == 2 * 1 * 7 * 7 * 8 * 4 * 2 * 2
    assert ConvProblem.parse("mb4ic64_ih34oh16kh3sh2dh0ph0_iw34ow16kw3sw2dw0pw0") is None  # pooling
    assert ConvProblem.parse("nonsense") is None
