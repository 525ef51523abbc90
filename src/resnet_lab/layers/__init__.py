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
- :mod:`~resnet_lab.layers.engines`: one module per engine or framework, each profiling its row and reading its
  profiler's format into kernels, behind one registry; :mod:`~resnet_lab.layers.profile_child` runs one in its own
  process (a framework's row is the one ``bench`` would time, :func:`resnet_lab.bench.measure.setup`);
- :mod:`~resnet_lab.layers.run`: one backend or several profiled and attributed, and 03's section's plan;
- :mod:`~resnet_lab.layers.compare`: engines side by side per convolution unit, each engine's losers and weakest
  layer kind;
- :mod:`~resnet_lab.layers.diff`: two profiles of one engine judged layer by layer beyond the step's shift;
- :mod:`~resnet_lab.layers.trace`: the engines' steps as a Chrome/Perfetto trace;
- :mod:`~resnet_lab.layers.cli`, :mod:`~resnet_lab.layers.trace_cli`: ``resnet-lab layers``, ``layers trace``
  (``layers diff`` is :mod:`resnet_lab.report.layer_diff`: it reads the results store for a layer's own noise).

Covered: TensorFlow (the served graph, and under XLA), native PyTorch eager and compiled (TorchInductor), JAX, IREE,
ONNX Runtime and OpenVINO; inference, and the frameworks' training steps by pass (forward, input and weight
gradients). Not covered: a GPU's kernels (device events, which these CPU paths do not read).
"""
