"""An engine or a framework profiled in its own process: ``python -m resnet_lab.layers.profile_child``.

The request names a row key's engine (the export folder, the batch, the recipe, the precision) or the
``BenchConfig`` of the row ``bench`` would time (a framework); the row's module in
:mod:`resnet_lab.layers.engines` profiles it (one module per engine, each with its parsers) and the child replies with
every kernel's name, its summed milliseconds and the Keras layers it computes.
"""

from __future__ import annotations

import sys
from typing import Any

from resnet_lab.core import child
from resnet_lab.layers.engines import CHILD, profile


def answer(request: dict[str, Any]) -> dict[str, Any]:
    return profile(request)


def main(argv: list[str] | None = None) -> int:
    return child.serve(CHILD, answer, argv)


if __name__ == "__main__":
    sys.exit(main())
