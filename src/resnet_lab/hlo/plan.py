"""Notebook 02's capture plan: every capture the notebook asks for, run in one call each, its records written.

:func:`capture_all` is the inventories (every backend × model × mode × stage × platform, StableHLO, the focus
model's Core ATen, TFLite and ONNX, its instructions' origins); :func:`fit_dump` the 2017 method on a real
``fit``; :func:`iree_train` IREE on the JAX training step. Each runs captures or child processes and writes its
JSON into the notebook's folder; the tables, plots and sentences of what they found are
:mod:`resnet_lab.report.ops`. (Notebook 03's plan is :mod:`resnet_lab.bench.plan`.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from resnet_lab import export
from resnet_lab.core import artifacts, requirements
from resnet_lab.hlo import capture, inventory_text
from resnet_lab.hlo import dump as xla_dump


@dataclasses.dataclass
class Captures:
    """Notebook 02's inventories: every XLA record (skipped ones included, TensorFlow's and JAX's), the
    StableHLO records, and the focus model's Core ATen, TFLite and ONNX records."""

    rows: list[dict[str, Any]]
    stable: list[dict[str, Any]]
    portable: list[dict[str, Any]]

    @property
    def captured_all(self) -> list[dict[str, Any]]:
        """The records that were captured, every backend."""
        return [r for r in self.rows if "skipped" not in r]

    @property
    def captured(self) -> list[dict[str, Any]]:
        """TensorFlow's captured records: what the sections after the backend comparison read."""
        return [r for r in self.captured_all if r.get("backend", "tensorflow") == "tensorflow"]


def capture_all(out: Path, focus_model: str, models: Sequence[str], *, modes: Sequence[str],
                stages: Sequence[str], platforms: Sequence[str], backends: Sequence[str], irs: Sequence[str],
                batch_size: int, image_size: int, precision: str) -> Captures:
    """Capture every backend × model × mode × stage × platform (the focus model first), with StableHLO when
    ``irs`` asks for it, the focus model's Core ATen, TFLite and ONNX inference and its instructions' origins;
    write ``inventories.json``, ``origins_<focus_model>.json``, ``stablehlo.json``, ``portable_irs.json`` and
    ``opcodes_long.csv`` into ``out``.

    ``image_size`` 0 means each model's own default. Core ATen's torch process runs while XLA captures.
    """
    import pandas as pd

    sizes = image_size or None
    stable: list[dict[str, Any]] | None = [] if "stablehlo" in irs else None  # read in the same JAX process
    # ONNX: the export's cache entry (resnet_lab.export.folder), which 03's other compilers reuse
    portable_job = capture.start_portable([focus_model], irs, modes=modes, batch_size=batch_size,
                                          image_size=sizes, precision=precision, export_dir=None)
    rows = capture.capture_matrix(list(dict.fromkeys([focus_model, *models])), modes=modes, stages=stages,
                                  platforms=platforms, batch_size=batch_size, image_size=sizes,
                                  precision=precision, backends=backends, stablehlo_records=stable,
                                  origins_for=[focus_model])
    portable = portable_job()  # TFLite here, then Core ATen (inference; the training step is a skipped row)
    result = Captures(rows, stable or [], portable)
    artifacts.write_json(Path(out) / "inventories.json",  # origins: the focus model's, in origins_<model>.json
                         [{k: v for k, v in r.items() if k != "origins"} for r in rows])
    artifacts.write_json(Path(out) / f"origins_{focus_model}.json",
                         [r for r in rows if r["model"] == focus_model and "origins" in r])
    artifacts.write_json(Path(out) / "stablehlo.json", result.stable)
    artifacts.write_json(Path(out) / "portable_irs.json", portable)
    artifacts.save_table(out, "opcodes_long", pd.DataFrame(inventory_text.opcode_lines(result.captured_all),
                                                           columns=list(inventory_text.OPCODE_COLUMNS)))
    return result


def fit_dump(out: Path, model: str, *, run: bool, batch_size: int, image_size: int,
             precision: str) -> dict[str, Any] | None:
    """The 2017 method redone on a one-step ``fit`` (:func:`resnet_lab.hlo.dump.reproduce_2017_method`) when
    ``run``, its record written as ``xla_dump.json`` (without the per-module rows); None when not run."""
    if not run:
        return None
    dump = xla_dump.reproduce_2017_method(model, out, batch_size=batch_size, image_size=image_size,
                                          precision=precision)
    artifacts.write_json(Path(out) / "xla_dump.json", {k: v for k, v in dump.items() if k != "dump_rows"})
    return dump


IREE_TRAIN_BATCH = 2  # the training step IREE is asked to compile: the op set does not depend on the batch


def iree_train(model: str, image_size: int) -> dict[str, Any] | None:
    """The JAX training step of ``model`` at ``image_size``² (batch :data:`IREE_TRAIN_BATCH`) compiled and run by
    IREE against JAX (:func:`resnet_lab.export.iree_train_step`); a skipped record naming the pip install where
    jax or IREE is missing (:func:`resnet_lab.core.requirements.missing`); None where ``image_size`` is 0 (not
    asked)."""
    if not image_size:
        return None
    if reason := requirements.missing("iree"):
        return {"model": model, "status": "skipped", "reason": reason}
    return export.iree_train_step(model, image_size, IREE_TRAIN_BATCH)
