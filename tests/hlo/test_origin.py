"""resnet_lab.hlo.origin: an instruction's layer and pass from its metadata, its signature and FLOPs."""

from __future__ import annotations

import pytest

from resnet_lab.ceilings.conv import ConvProblem
from resnet_lab.hlo import origin, parser

LAYERS = ("conv1_conv", "conv1_bn", "conv2_block1_1_conv", "predictions")


@pytest.mark.parametrize("name, expected", [
    ("tiny-resnet_1/conv1_conv_1/convolution", (("conv1_conv",), "forward", "")),
    ("gradient_tape/tiny-resnet_1/conv2_block1_1_conv_1/convolution/Conv2DBackpropInput",
     (("conv2_block1_1_conv",), "gradient", "")),
    ("sgd/Mul", ((), "optimizer", "sgd")),
    ("sgd_1/Mul_3", ((), "optimizer", "sgd")),
    ("AddN_8", ((), "", "AddN")),
    ("state[0][3]", ((), "", "state")),
    ("XLA_Args", ((), "", "XLA_Args")),
    ("jit(_train)/jvp(conv1_bn)/mul", (("conv1_bn",), "forward", "")),
    ("jit(_train)/transpose(jvp(conv1_conv))/rev", (("conv1_conv",), "gradient", "")),
    ("jit(_train)/sgd/mul", ((), "optimizer", "sgd")),
    ("jit(_infer)/predictions/dot_general", (("predictions",), "forward", "")),
    ("", ((), "", "")),
])
def test_classify_reads_tensorflow_scopes_and_jax_name_stacks(name, expected):
    assert origin.classify(name, LAYERS) == expected


GRAD = 'metadata={op_name="gradient_tape/m_1/conv1_conv_1/Conv2DBackpropInput"}'
HLO = """HloModule m, entry_computation_layout={(f32[2,8,8,3]{3,2,1,0}, f32[3,3,3,4]{3,2,1,0})->f32[4]{0}}

%max_F32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(f32[] %a, f32[] %b)
}

ENTRY %main (x: f32[2,8,8,3], w: f32[3,3,3,4]) -> f32[4] {
  %x = f32[2,8,8,3]{3,2,1,0} parameter(0), metadata={op_name="XLA_Args"}
  %w = f32[3,3,3,4]{3,2,1,0} parameter(1), metadata={op_name="XLA_Args"}
  %r = f32[3,3,3,4]{3,2,1,0} reverse(f32[3,3,3,4]{3,2,1,0} %w), dimensions={0,1}, GRAD
  %c = f32[2,4,4,4]{3,2,1,0} convolution(f32[2,8,8,3]{3,2,1,0} %x, f32[3,3,3,4]{3,2,1,0} %r),
      window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f, GRAD
  %z = f32[] constant(0)
  ROOT %s = f32[4]{0} reduce(f32[2,4,4,4]{3,2,1,0} %c, f32[] %z), dimensions={0,1,2}, to_apply=%max_F32
}
""".replace("GRAD", GRAD)


def test_signature_flops_feeds_and_inherited_origin():
    rows = {o.name: o for o in origin.origins(parser.parse(HLO), LAYERS)}
    conv = rows["c"]
    assert conv.layers == ("conv1_conv",) and conv.pass_ == "gradient"
    assert dict(conv.attrs)["stride"] == "2x2" and dict(conv.attrs)["pad"] == "0_1x0_1"
    assert conv.types == "f32,f32->f32"
    assert conv.flops == ConvProblem(mb=2, ic=3, oc=4, ih=8, oh=4, kh=3, iw=8, ow=4, kw=3).flops == 2 * 2 * 16 * 4 * 27
    assert rows["r"].feeds == ("c",)  # the reverse feeds the gradient convolution of its layer
    assert dict(rows["s"].attrs) == {"reducer": "maximum"}  # the root of the applied computation
    assert rows["s"].layer == "(no metadata)" and rows["x"].layer == "(XLA_Args)"  # the remainder, named
    assert rows["m"].layer == "(no metadata)"  # its caller has no layer either
    agg = origin.aggregate(rows.values())
    assert sum(r["count"] for r in agg) == len(rows)  # nothing dropped
    assert origin.mapped_share(agg) == {"instructions": 9, "with_layer": 2, "unmapped": 7,
                                        "unmapped_scopes": {"(no metadata)": 5, "XLA_Args": 2}}


# Two fusions of two layers share one body (XLA deduplicates identical fusions); the body's instructions keep the
# first caller's op_name, as XLA leaves them.
SHARED = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%fused_relu (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %zero = f32[4]{0} constant({0, 0, 0, 0})
  ROOT %max = f32[4]{0} maximum(f32[4]{0} %p, f32[4]{0} %zero), metadata={op_name="m_1/conv1_bn_1/Relu"}
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), metadata={op_name="XLA_Args"}
  %f1 = f32[4]{0} fusion(f32[4]{0} %x), kind=kLoop, calls=%fused_relu, metadata={op_name="m_1/conv1_bn_1/Relu"}
  ROOT %f2 = f32[4]{0} fusion(f32[4]{0} %f1), kind=kLoop, calls=%fused_relu,
      metadata={op_name="m_1/predictions_1/Relu"}
}
"""


def test_a_shared_fusion_body_computes_each_caller_s_layers_in_02_and_in_the_profiles():
    """One rule (origin.shared_bodies): 02's origins give the shared body to both callers' layers, whatever op_name
    it keeps; the per-layer profile gives each fusion's time to its own layer only, never the body's first caller."""
    from resnet_lab.layers.engines.xla import xla_kernels

    module = parser.parse(SHARED)
    assert origin.shared_bodies(module) == {"fused_relu"}
    rows = {o.name: o for o in origin.origins(module, LAYERS)}
    assert rows["max"].layers == ("conv1_bn", "predictions") and rows["max"].pass_ == "forward"
    assert rows["f1"].layers == ("conv1_bn",) and rows["f2"].layers == ("predictions",)
    got = {k["name"]: k["layers"] for k in xla_kernels([("f1", 1.0), ("f2", 2.0)], SHARED, frozenset(LAYERS))}
    assert got == {"f1": ["conv1_bn"], "f2": ["predictions"]}
