"""Where a step's time goes, layer by layer: an engine's own profile attributed to the Keras model's layers.

Every engine times its own kernels in its own vocabulary (ONNX Runtime's profiling JSON names the ONNX nodes,
OpenVINO's performance counters its executed nodes); the export names every ONNX node after the module it comes
from (:func:`resnet_lab.export.name_nodes_by_module`), so each kernel maps back to the model's own layers without
guessing by order or shape:

- :mod:`~resnet_lab.layers.costs`: each convolution and the classifier of a zoo model at one input size, with its
  Keras name, FLOPs and bytes (from the layer plan, no framework);
- :mod:`~resnet_lab.layers.names`: a module path of the native model (``layer1.0.conv2``) as the Keras layer it
  computes (``conv2_block1_2_conv``);
- :mod:`~resnet_lab.layers.attribute`: kernels to layers (a kernel fused over several layers split by their FLOPs),
  each layer beside its roofline on this host;
- :mod:`~resnet_lab.layers.profile_child`: the engine profiled in its own process;
- :mod:`~resnet_lab.layers.cli`: ``resnet-lab layers``.

This round covers ONNX Runtime and OpenVINO inference (the engines whose profiles name the export's nodes);
TensorFlow, PyTorch, JAX and IREE, training, and 03's section are the next steps of the same design.
"""
