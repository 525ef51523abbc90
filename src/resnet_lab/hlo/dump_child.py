"""Child process of :func:`resnet_lab.hlo.dump.run_fit_with_dump`: a short ``fit`` while XLA dumps its modules.

``python -m resnet_lab.hlo.dump_child MODEL --image-size N [--batch-size B] [--precision P] [--steps S]``, with
``XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text`` set by the parent (XLA reads it once, at import).
"""

from __future__ import annotations

import argparse
import os
import sys

from resnet_lab import models
from resnet_lab.core.choices import DTYPE_POLICIES
from resnet_lab.steps.common import make_optimizer


def _fit(model: str, batch_size: int, image_size: int, precision: str, n_steps: int) -> None:
    """The child's work: compile like a user and fit ``n_steps`` synthetic batches."""
    import keras
    import numpy as np

    spec = models.get_spec(model)
    shape = (image_size, image_size, 3)
    net = models.build(model, input_shape=shape, dtype_policy=DTYPE_POLICIES[precision])
    # the optimizer of every step (resnet_lab.steps.common): SGD(0.1, momentum 0.9), loss-scaled in float16
    net.compile(optimizer=make_optimizer(net),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    rng = np.random.default_rng(0)
    x = rng.random((n_steps * batch_size, image_size, image_size, 3), dtype=np.float32)
    y = rng.integers(0, spec.num_classes, size=(n_steps * batch_size,))
    net.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False)


def main(argv: list[str] | None = None) -> int:
    """The child process of :func:`run_fit_with_dump`."""
    parser = argparse.ArgumentParser(prog="python -m resnet_lab.hlo.dump_child", description=_fit.__doc__)
    parser.add_argument("model")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, required=True)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args(argv)
    if "--xla_dump_to" not in os.environ.get("XLA_FLAGS", ""):
        print("warning: XLA_FLAGS has no --xla_dump_to; nothing will be dumped", file=sys.stderr)
    _fit(args.model, args.batch_size, args.image_size, args.precision, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
