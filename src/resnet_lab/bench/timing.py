"""How long a benchmark row measures: the timing knobs every matrix of notebook 03 (and the GPU run) shares,
and in how many fresh processes (``repeats``).

:class:`Timing` is checked when it is made, with the messages :func:`resnet_lab.bench.config.validate` gives
for the same fields, so a bad value is one :class:`~resnet_lab.core.errors.UsageError` line before any
configuration is built. Plain Python: nothing here imports a framework.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from resnet_lab.bench.config import DEFAULT_TIMEOUT_S, check_timing
from resnet_lab.core.choices import check_int


@dataclass(frozen=True)
class Timing:
    """Timed steps, warmup, time budget and timeout of a row (the :class:`~resnet_lab.bench.config.BenchConfig`
    fields of the same names). The defaults are notebook 03's parameters cell."""

    steps: int = 5                  # timed steps: at least this many ...
    warmup: int = 1                 # (untimed steps after the first, compiling call)
    min_time_s: float = 5.0         # ... and at least this long (0: exactly `steps`) ...
    max_time_s: float = 120.0       # ... but no longer: a row cut short of `steps` has status "short"
    timeout_s: float = DEFAULT_TIMEOUT_S  # seconds before the row's process is stopped (a timeout row)
    repeats: int = 1                # fresh processes per row, in interleaved rounds; its interval from their spread

    def __post_init__(self) -> None:
        check_timing(self.steps, self.warmup, self.min_time_s, self.max_time_s, self.timeout_s)
        check_int("repeats", self.repeats, 1)

    def fields(self) -> dict[str, Any]:
        """The BenchConfig keyword arguments: ``BenchConfig(**timing.fields(), ...)``."""
        return dataclasses.asdict(self)

    def replace(self, **change: Any) -> Timing:
        """A copy with ``change`` (checked again)."""
        return dataclasses.replace(self, **change)


DEFAULT = Timing()
