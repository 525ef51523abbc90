"""The bottom layer every other part of the package stands on.

- :mod:`~resnet_lab.core.errors`: :class:`UsageError`, the one exception that means "bad input".
- :mod:`~resnet_lab.core.choices`: the vocabulary (modes, stages, backends, precisions, ...) and the checks
  that every command and notebook uses, with one message style.
- :mod:`~resnet_lab.core.provenance`: what made a number (commit, packages, CPU, GPUs, oneDNN state).
- :mod:`~resnet_lab.core.artifacts`: where a notebook writes its CSV/JSON/PNG and its ``results.json``.
- :mod:`~resnet_lab.core.text`: small text helpers (top-level comma splitting, one-line error messages).
- :mod:`~resnet_lab.core.child`: the one way work runs in a child process (its own process group, one
  request/reply format, a timeout, one classification of how it ended).

Nothing here imports TensorFlow, Keras, JAX or PyTorch.
"""
