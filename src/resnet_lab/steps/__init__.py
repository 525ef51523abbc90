"""One inference step and one training step per Keras backend: what every measurement runs.

- :mod:`~resnet_lab.steps.common`: the loss and the optimizer every backend's step shares.
- :mod:`~resnet_lab.steps.tf_step`: TensorFlow (``tf.function``; XLA with ``jit_compile=True``).
- :mod:`~resnet_lab.steps.jax_step`: JAX (``jax.jit``, or eager).
- :mod:`~resnet_lab.steps.torch_step`: PyTorch (``torch.compile``, or eager).

Importing any of these is cheap: the frameworks are imported inside the functions.
"""
