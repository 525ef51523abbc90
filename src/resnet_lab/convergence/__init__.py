"""Does the chosen model learn: short real training runs on real (or shipped) data, per candidate.

- :mod:`~resnet_lab.convergence.datasets`: CIFAR-10 and ImageNet loaders, and scikit-learn's digits as the
  offline stand-in every test uses.
- :mod:`~resnet_lab.convergence.train`: ``resnet-lab train``: a run, its checkpoints, its curve.
"""
