"""Speed target of the op extraction: ResNet-50's four captures (infer/train × before/after) in ≤ 60 s."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.benchmark


@pytest.fixture(autouse=True)
def only_on_request(request):
    # `make test` collects tests/ too: run only under `-m benchmark` (`make bench`)
    if "benchmark" not in (request.config.getoption("-m") or ""):
        pytest.skip("speed target: run with `make bench`")


def test_resnet50_both_modes_both_stages_within_60_seconds():
    from resnet_lab.hlo import capture as ops

    ops.capture("cifar_resnet20", modes=("infer",), stages=("before",), batch_size=2, image_size=8)  # warm-up
    t0 = time.perf_counter()
    caps = ops.capture("resnet50", batch_size=32, image_size=224)
    rows = [ops.inventory(c) for c in caps]
    seconds = time.perf_counter() - t0
    print(f"resnet50 224², batch 32: 4 captures parsed in {seconds:.1f} s "
          f"({', '.join(f'{c.mode}/{c.stage} {c.seconds:.1f} s' for c in caps)})")
    assert len(rows) == 4 and all(len(r["opcodes"]) > 10 for r in rows) and seconds <= 60  # 15-34 distinct each
