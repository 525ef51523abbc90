"""One convolution problem as oneDNN's verbose log describes it: its FLOPs, its bytes, a short shape.

The oneDNN profile (:mod:`~resnet_lab.ceilings.profile`: the convolutions' GFLOP/s) and the roofline
(:mod:`~resnet_lab.ceilings.roofline`: each primitive's FLOPs and bytes) both read convolutions through
:class:`ConvProblem`, so a convolution's work is counted once, one way.

oneDNN writes the problem as ``mb32_ic64oc256_ih56oh56kh1sh1dh0ph0_iw56ow56kw1sw1dw0pw0``: batch, input and
output channels, then per spatial axis the input and output size, kernel, stride, dilation and padding
(depth ``id..`` only for 3D, height ``ih..`` from 2D up). A grouped convolution adds its groups: ``g32mb..``
in front (oneDNN 2 and later) or ``mb.._g32ic..`` (MKL-DNN and DNNL 1). Channels are the totals over all
groups, so each output channel sees ``ic / g`` input channels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_AXIS = r"i{a}(?P<i{a}>\d+)o{a}(?P<o{a}>\d+)k{a}(?P<k{a}>\d+)s{a}(?P<s{a}>\d+)d{a}\d+p{a}\d+"
DESCRIPTOR = re.compile(
    r"(?:g(?P<g_front>\d+))?mb(?P<mb>\d+)_(?:g(?P<g_after>\d+)_?)?ic(?P<ic>\d+)oc(?P<oc>\d+)_"
    rf"(?:{_AXIS.format(a='d')}_)?(?:{_AXIS.format(a='h')}_)?{_AXIS.format(a='w')}")


@dataclass(frozen=True)
class ConvProblem:
    """A convolution's shape: batch, groups, channels (totals), and the input, output, kernel and stride of
    each spatial axis (1 where the problem has no such axis)."""

    mb: int
    ic: int
    oc: int
    iw: int
    ow: int
    kw: int
    ih: int = 1
    oh: int = 1
    kh: int = 1
    id: int = 1
    od: int = 1
    kd: int = 1
    sw: int = 1
    sh: int = 1
    sd: int = 1
    g: int = 1
    transposed: bool = False  # a deconvolution: its input is the output of the convolution it transposes

    @classmethod
    def parse(cls, desc: str, transposed: bool = False) -> ConvProblem | None:
        """The problem in a oneDNN descriptor (or a whole verbose line), None where there is none."""
        m = DESCRIPTOR.search(desc or "")
        if not m:
            return None
        v = {k: int(x) for k, x in m.groupdict().items() if x is not None}
        g = v.pop("g_front", None) or v.pop("g_after", None) or 1
        v.pop("g_after", None)
        return cls(**v, g=g, transposed=transposed)

    @property
    def macs(self) -> int:
        """Multiply-adds: every output element of every output channel sums ``ic / g`` input channels over
        the kernel (a deconvolution: every input element, the roles of input and output swapped)."""
        out = self.mb * self.id * self.ih * self.iw if self.transposed else self.mb * self.od * self.oh * self.ow
        per_out = (self.ic if self.transposed else self.oc) * ((self.oc if self.transposed else self.ic) // self.g)
        return out * per_out * self.kd * self.kh * self.kw

    @property
    def flops(self) -> float:
        """2 · multiply-adds: 2·N·OH·OW·OC·(IC/g)·KH·KW for a 2D convolution."""
        return 2.0 * self.macs

    def bytes(self, src: int = 4, wei: int = 4, dst: int = 4) -> float:
        """Compulsory traffic of one call: source, weights and destination, each once, at ``src``, ``wei``
        and ``dst`` bytes per element."""
        return float(self.mb * self.ic * self.id * self.ih * self.iw * src
                     + self.oc * (self.ic // self.g) * self.kd * self.kh * self.kw * wei
                     + self.mb * self.oc * self.od * self.oh * self.ow * dst)

    @property
    def label(self) -> str:
        """A short shape: ``32×64×56² → 256, 1×1/1`` (batch × input channels × input size → output channels,
        kernel/stride), with ``, g32`` for groups."""
        size = f"{self.ih}²" if self.ih == self.iw else f"{self.ih}×{self.iw}"
        if self.id > 1:
            size = f"{self.id}×{size}"
        kernel = f"{self.kd}×" if self.kd > 1 else ""
        groups = f", g{self.g}" if self.g > 1 else ""
        return f"{self.mb}×{self.ic}×{size} → {self.oc}, {kernel}{self.kh}×{self.kw}/{self.sh}{groups}"
