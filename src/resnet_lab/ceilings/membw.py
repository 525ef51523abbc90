"""The memory-bandwidth ceiling of the roofline: a STREAM-like triad ``a = b + s·c`` over arrays far larger
than the caches, measured with NumPy on every available core.

STREAM (McCalpin) times four kernels and reports bytes moved ÷ seconds, counting each array once per pass
(reads of ``b`` and ``c``, the write of ``a``: 24 bytes per float64 element for the triad). NumPy has no fused
triad, so each thread walks its slice in cache-sized chunks (``tmp = s·c`` stays in L2, then ``a = b + tmp``):
memory sees the three streams STREAM counts. NumPy's ufuncs release the GIL, so one thread per CPU runs in
parallel. Like STREAM, the best of the repeats is the figure; write-allocate traffic is not counted (so the
true bus rate is up to 4/3 of it). No framework: runs before TensorFlow is imported.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from resnet_lab.core.provenance import available_cpus

TRIAD_BYTES_PER_ELEMENT = 3 * 8  # STREAM's count for float64: read b, read c, write a
CHUNK = 32 * 1024  # elements per inner step: 256 KiB of float64, the scratch stays in L2


def _triad_slice(a: Any, b: Any, c: Any, scalar: float, lo: int, hi: int) -> None:
    import numpy as np

    tmp = np.empty(CHUNK, dtype=a.dtype)
    for i in range(lo, hi, CHUNK):
        j = min(i + CHUNK, hi)
        t = tmp[: j - i]
        np.multiply(c[i:j], scalar, out=t)
        np.add(b[i:j], t, out=a[i:j])


def triad(n_bytes: int = 256 * 2**20, repeats: int = 5, threads: int | None = None) -> dict[str, Any]:
    """Best and median GB/s of the triad over arrays of ``n_bytes`` each (three of them), on ``threads``
    threads (default: the CPUs this process may use), after one untimed pass that touches every page."""
    import numpy as np

    if n_bytes < 8 * CHUNK or repeats < 1:
        raise ValueError(f"triad: n_bytes >= {8 * CHUNK} and repeats >= 1, got {n_bytes}, {repeats}")
    threads = threads or available_cpus()
    n = n_bytes // 8
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    bounds = [(k * n // threads, (k + 1) * n // threads) for k in range(threads)]
    times = []
    with ThreadPoolExecutor(threads) as pool:
        for i in range(repeats + 1):
            t0 = time.perf_counter()
            list(pool.map(lambda lh: _triad_slice(a, b, c, 3.0, *lh), bounds))
            if i:  # the first pass faults the pages in
                times.append(time.perf_counter() - t0)
    if not np.all(a[:: max(1, n // 97)] == 7.0):  # 1 + 3·2: the kernel really ran over the arrays
        raise RuntimeError("triad: wrong result")
    moved = TRIAD_BYTES_PER_ELEMENT * n
    times.sort()
    return {"kernel": "triad a = b + s*c (float64, NumPy, chunked)", "array_mib": n_bytes / 2**20,
            "threads": threads, "repeats": repeats, "bytes_per_element": TRIAD_BYTES_PER_ELEMENT,
            "best_gbps": moved / times[0] / 1e9, "median_gbps": moved / times[len(times) // 2] / 1e9}
