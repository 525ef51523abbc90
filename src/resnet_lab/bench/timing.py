"""How long a benchmark row measures, and in how many fresh processes: the one default of every path.

:data:`DEFAULT` (a :class:`Timing`) is where the timing knobs' defaults live: :class:`~resnet_lab.bench.config.
BenchConfig`'s fields, ``resnet-lab bench``'s options and notebook 03's parameters (a parameter left None takes
the value here, :func:`Timing.of`) all read it. A path that times otherwise says so where it is set: the lent
GPU's run (:data:`resnet_lab.workbook.gpu_run.TIMING`), a preset's base, a params file.

:class:`Timing` is checked when it is made, with the messages :func:`resnet_lab.bench.config.validate` gives
for the same fields (:func:`check_timing`), so a bad value is one :class:`~resnet_lab.core.errors.UsageError`
line before any configuration is built. Plain Python: nothing here imports a framework.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from resnet_lab.core.choices import check_int, check_positive
from resnet_lab.core.errors import UsageError

DEFAULT_TIMEOUT_S = 900.0  # a row's process, or any child that builds one model's step
# a child that makes a whole model's artifacts in one go: a conformance kit, every layer's reference activations
ARTIFACT_TIMEOUT_S = 1800.0
# profiled steps of a per-layer profile (`resnet-lab layers`), after as many unprofiled ones, by mode
PROFILE_STEPS = {"infer": 20, "train": 3}


def check_timing(steps: Any, warmup: Any, min_time_s: Any, max_time_s: Any, timeout_s: Any) -> None:
    """The timing knobs of a row (a configuration's, or a :class:`Timing`)."""
    check_int("warmup", warmup, 0)
    check_int("steps", steps, 1)
    if isinstance(min_time_s, bool) or not isinstance(min_time_s, int | float) or min_time_s < 0:
        raise UsageError(f"min time: {min_time_s!r} is not a number >= 0 seconds")
    check_positive("max time", max_time_s, unit="seconds")
    if max_time_s < min_time_s:
        raise UsageError(f"max time: {max_time_s:g} s is below the min time ({min_time_s:g} s)")
    check_positive("timeout", timeout_s, unit="seconds")


@dataclass(frozen=True)
class Timing:
    """Timed steps, warmup, time budget, timeout and processes of a row (the
    :class:`~resnet_lab.bench.config.BenchConfig` fields of the same names)."""

    steps: int = 5                  # timed steps: at least this many ...
    warmup: int = 2                 # untimed steps after the first (compiling) call
    min_time_s: float = 5.0         # ... and at least this long (0: exactly `steps`) ...
    max_time_s: float = 120.0       # ... but no longer: a row cut short of `steps` has status "short"
    timeout_s: float = DEFAULT_TIMEOUT_S  # seconds before the row's process is stopped (a timeout row)
    repeats: int = 1                # fresh processes per row, in interleaved rounds; its interval from their spread

    def __post_init__(self) -> None:
        check_timing(self.steps, self.warmup, self.min_time_s, self.max_time_s, self.timeout_s)
        check_int("repeats", self.repeats, 1)

    @classmethod
    def of(cls, **values: Any) -> Timing:
        """The default with ``values`` over it; a value None keeps the default (notebook 03's parameters)."""
        return cls(**{k: v for k, v in values.items() if v is not None})

    def fields(self) -> dict[str, Any]:
        """The BenchConfig keyword arguments: ``BenchConfig(**timing.fields(), ...)``."""
        return dataclasses.asdict(self)

    def replace(self, **change: Any) -> Timing:
        """A copy with ``change`` (checked again)."""
        return dataclasses.replace(self, **change)


DEFAULT = Timing()
