"""The machine's limits, and where a step's time goes against them.

- :mod:`~resnet_lab.ceilings.gemm`: the one GEMM timer (NumPy, TensorFlow, JAX, PyTorch).
- :mod:`~resnet_lab.ceilings.membw`: the STREAM triad, memory bandwidth.
- :mod:`~resnet_lab.ceilings.peak`: the measured GEMM peak and bandwidth of this host (``resnet-lab peak``,
  notebook 00), the denominator of MFU.
- :mod:`~resnet_lab.ceilings.conv`: one convolution problem as oneDNN describes it: its FLOPs, bytes, shape.
- :mod:`~resnet_lab.ceilings.profile`: ``ONEDNN_VERBOSE`` output of the timed steps, parsed per primitive.
- :mod:`~resnet_lab.ceilings.roofline`: each profiled primitive under the two ceilings.

Plain Python at import: the frameworks are imported inside the timers that need them.
"""
