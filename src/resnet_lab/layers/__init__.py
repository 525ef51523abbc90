"""Where a step's time goes, layer by layer: an engine's own profile attributed to the Keras model's layers.

Every engine times its own kernels in its own vocabulary (ONNX Runtime's profiling JSON names the ONNX nodes,
OpenVINO's performance counters its executed nodes, IREE's HAL profile its dispatches' command indices); the export
names every ONNX node after the module it comes from (:func:`resnet_lab.export.name_nodes_by_module`) and keeps every
StableHLO op's name stack as its location, so each kernel maps back to the model's own layers without guessing by
order or shape:

- :mod:`~resnet_lab.layers.costs`: each convolution and the classifier of a zoo model at one input size, with its
  Keras name, FLOPs and bytes (from the layer plan, no framework);
- :mod:`~resnet_lab.layers.names`: a module path of the native model (``layer1.0.conv2``) as the Keras layer it
  computes (``conv2_block1_2_conv``); a TensorFlow node's scope as its layer, and the layers a fused kernel claims;
- :mod:`~resnet_lab.layers.attribute`: kernels to layers (a kernel fused over several layers split by their FLOPs),
  each layer beside its roofline on this host;
- :mod:`~resnet_lab.layers.profile_child`: the engine or framework profiled in its own process (TensorFlow builds
  the row ``bench`` would time, through :func:`resnet_lab.bench.measure.setup`);
- :mod:`~resnet_lab.layers.run`: one backend or several profiled and attributed, and 03's section's plan;
- :mod:`~resnet_lab.layers.compare`: engines side by side per convolution unit, each engine's losers and weakest
  layer kind;
- :mod:`~resnet_lab.layers.cli`: ``resnet-lab layers``.

Covered: TensorFlow (the served graph), native PyTorch eager, IREE (its dispatches' call sites, located in the
export's StableHLO, which keeps each op's name stack), ONNX Runtime and OpenVINO, inference. Next on the same
design: native PyTorch compiled (Inductor's kernels), JAX (its HLO's ``op_name`` metadata carries the layer),
training steps (weight and input gradients), and a lent GPU.
"""
