"""The conformance section as make report's notebook 02 makes it (tiny-resnet's three kits on the four engines and
the bisection of an op planted wrong), made once per session for the tests that read it.

It is made by the first worker that needs it, while the quick run goes on (the quick run's 02 runs a one-kit section:
the notebook's code path), so these tests are not on the suite's tail. Its export is the quick run's own cache entry
(the same outputs root: whoever comes first makes it under the entry's lock, the other reuses it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from filelock import FileLock
from helpers import shared_tmp

from resnet_lab import export
from resnet_lab.core.choices import ENGINE_IRS

MODEL, SIZE = "tiny-resnet", 32
KITS = ["stablehlo:infer", "onnx:infer", "stablehlo:train"]
BISECT = "onnxruntime"
_DONE = "section.done"


def _outputs(shared: Path) -> Path:
    """The quick run's outputs root (tests/conftest.py): its export cache is shared."""
    return shared / "quick-outputs"


@pytest.fixture(scope="session")
def conformance_section(tmp_path_factory) -> Path:
    """A folder as 02's: ``conformance/<model>-<ir>-<mode>/`` kits and the ``conformance_{kits,runs,not_passed,
    bisect}.csv`` tables of the section's result (:func:`resnet_lab.report.conformance.frames`)."""
    from resnet_lab.conformance import suite
    from resnet_lab.report import conformance as report

    shared = shared_tmp(tmp_path_factory)
    where = shared / "conformance-section"
    with FileLock(str(shared / "conformance-section.lock")):
        if not (where / _DONE).exists():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("RESNET_LAB_OUTPUTS", str(_outputs(shared)))
                mp.delenv("RESNET_LAB_RUN_DIR", raising=False)
                export.ensure(None, MODEL, SIZE, [1], onnx=True, stablehlo=True)  # the module tests read too
                result = suite.run(suite.plan(MODEL, KITS, list(ENGINE_IRS), BISECT), where)
            for name, frame in report.frames(result).items():
                frame.to_csv(where / f"conformance_{name}.csv", index=False)
            (where / _DONE).write_text("")
    return where


@pytest.fixture(scope="session")
def tiny_export(conformance_section, tmp_path_factory) -> Path:
    """A root holding the section's export of tiny-resnet at 32² (its cache entry), as ``ensure`` looks for it."""
    with pytest.MonkeyPatch.context() as mp:  # the cache entry, named as export.folder names it
        mp.setenv("RESNET_LAB_OUTPUTS", str(_outputs(shared_tmp(tmp_path_factory))))
        entry = export.folder(None, MODEL, SIZE)
    assert entry.is_dir(), entry
    root = tmp_path_factory.mktemp("export")
    os.symlink(entry, export.folder(root, MODEL, SIZE))
    return root
