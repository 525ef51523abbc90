"""Child process of :func:`resnet_lab.hlo.dump.run_fit_with_dump`: a short ``fit`` while XLA dumps its modules.

``python -m resnet_lab.hlo.dump_child REQUESTS.json REPLIES.jsonl`` (:mod:`resnet_lab.core.child`), each request
``{"model", "image_size", "batch_size", "precision", "steps"}``, with ``XLA_FLAGS=--xla_dump_to=DIR
--xla_dump_hlo_as_text`` set by the parent (XLA reads it once, at import). The reply is empty: what counts is
the dump.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from resnet_lab import models
from resnet_lab.core import child
from resnet_lab.core.choices import DTYPE_POLICIES
from resnet_lab.steps.common import make_optimizer


def fit(request: dict[str, Any]) -> dict[str, Any]:
    """The child's work: compile like a user and fit ``steps`` synthetic batches."""
    import keras
    import numpy as np

    if "--xla_dump_to" not in os.environ.get("XLA_FLAGS", ""):
        print("warning: XLA_FLAGS has no --xla_dump_to; nothing will be dumped", file=sys.stderr)
    model, batch_size, image_size = request["model"], request.get("batch_size", 8), request["image_size"]
    n_steps = request.get("steps", 1)
    spec = models.get_spec(model)
    shape = (image_size, image_size, 3)
    net = models.build(model, input_shape=shape, dtype_policy=DTYPE_POLICIES[request.get("precision", "fp32")])
    # the optimizer of every step (resnet_lab.steps.common): SGD(0.1, momentum 0.9), loss-scaled in float16
    net.compile(optimizer=make_optimizer(net),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    rng = np.random.default_rng(0)
    x = rng.random((n_steps * batch_size, image_size, image_size, 3), dtype=np.float32)
    y = rng.integers(0, spec.num_classes, size=(n_steps * batch_size,))
    net.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False)
    return {}


def main(argv: list[str] | None = None) -> int:
    """The child process of :func:`run_fit_with_dump`."""
    child.skip_unused_imports()  # TensorFlow's optional imports (a dump runs on the TensorFlow backend)
    return child.serve("resnet_lab.hlo.dump_child", fit, argv)


if __name__ == "__main__":
    sys.exit(main())
