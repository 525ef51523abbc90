"""Which XLA ops a model needs, exactly: HLO captured from each front end, parsed, counted, tabulated.

- :mod:`~resnet_lab.hlo.parser`: HLO text → instructions → inventory (opcodes by role, fusions, custom
  calls, convolution and dot configurations), validated against the installed XLA's opcode list.
- :mod:`~resnet_lab.hlo.capture`: the HLO of a model's inference/training step from TensorFlow
  (``experimental_get_compiler_ir``) or JAX (``jax.jit``, in :mod:`~resnet_lab.hlo.jax_child`), as inventories.
- :mod:`~resnet_lab.hlo.origin`: each instruction's Keras layer and pass (forward, gradient, optimizer) from its
  metadata, its signature (element types, window, dimension labels, reducer, dot dimensions) and FLOPs.
- :mod:`~resnet_lab.hlo.coverage`: ``resnet-lab coverage SUPPORT.yaml``: what a backend that implements the listed
  ops still lacks for a model's step, how much of it depends on that, and which layers are blocked.
- :mod:`~resnet_lab.hlo.stablehlo`, :mod:`~resnet_lab.hlo.tflite`: the portable IRs beside HLO: StableHLO (counted from
  text and by the MLIR walk) and TFLite builtins (flatbuffer and interpreter); Core ATen comes from
  :mod:`~resnet_lab.hlo.torch_child` (``torch.export`` on Keras' torch backend), all three read by ``capture``.
- :mod:`~resnet_lab.hlo.inventory_text`: one inventory as text, CSV or Markdown (what the CLI prints) and each
  IR's ops named as HLO opcodes; the tables and plots of notebook 02 are :mod:`resnet_lab.report.ops`.
- :mod:`~resnet_lab.hlo.plan`: notebook 02's capture plan: every capture it runs, its records written.
- :mod:`~resnet_lab.hlo.dump`: the 2017 method on a real ``fit`` (XLA's dump, in
  :mod:`~resnet_lab.hlo.dump_child`), and its agreement with the captures.
- :mod:`~resnet_lab.hlo.legacy2017`: the 2017 note's op list, token by token, against today's opcodes.
- :mod:`~resnet_lab.hlo.cli`: ``resnet-lab ops``.

Modules ending in ``_child`` are entry points of child processes (``python -m ...``), not libraries.
"""
