"""Speed targets run only when asked for (`make bench` = `pytest tests/benchmarks -m benchmark`).

`make test` collects tests/ too; without this, a benchmark-marked test would run there and take minutes.
"""

import pytest


def pytest_collection_modifyitems(config, items):
    if "benchmark" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="speed target: run with `make bench` (pytest -m benchmark)")
    for item in items:
        if "benchmark" in item.keywords:
            item.add_marker(skip)
