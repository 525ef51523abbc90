"""The one GEMM timer: n×n×n matrix products in a dtype, on a device, through one library.

It serves the machine's peak (:mod:`resnet_lab.ceilings.peak`, notebook 00) and the same-run check of every
benchmark row that asks for one (``gemm_check``: the GEMM rate available *now*, in the worker process,
under the same load as the steps). Each library's product is timed the same way: one untimed call
(thread pools, primitive creation, tracing), then ``repeats`` calls, each waited for by reading one element
back (no copy of n² values to the host).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

LIBRARIES = ("numpy", "tensorflow", "jax", "torch")
# NumPy has no bfloat16/float16 GEMM worth measuring (fp16 is emulated, bf16 absent): fp32 only there.
# tf32 (fp32 storage, a 10-bit mantissa in the tensor cores) exists on NVIDIA GPUs only, through JAX and PyTorch.
SUPPORTED = {("numpy", "fp32"), *((lib, d) for lib in LIBRARIES[1:] for d in ("fp32", "bf16", "fp16")),
             ("jax", "tf32"), ("torch", "tf32")}
GPU_ONLY = {"tf32"}
# The sizes of the same-run check: a GPU's tensor cores need 8192² to approach their peak (4096² reaches about
# half of it in bf16 on an H200); 2048² and 4096² already fill two CPU cores.
CHECK_SIZES = {"cpu": (2048, 4096), "gpu": (4096, 8192)}


def gemm_flops(n: int) -> float:
    """FLOPs of an n×n by n×n matrix product (one multiply + one add per MAC)."""
    return 2.0 * n**3


def _numpy(n: int, dtype: str, device: str) -> Callable[[], Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    return lambda: a @ b


def _tensorflow(n: int, dtype: str, device: str) -> Callable[[], Any]:
    import tensorflow as tf

    tf_dtype = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}[dtype]
    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        a = tf.cast(tf.random.stateless_normal((n, n), seed=(0, 1)), tf_dtype)
        b = tf.cast(tf.random.stateless_normal((n, n), seed=(2, 3)), tf_dtype)
    matmul = tf.function(lambda x, y: tf.linalg.matmul(x, y))
    return lambda: matmul(a, b)[0, 0].numpy()


def _jax(n: int, dtype: str, device: str) -> Callable[[], Any]:
    import jax
    import jax.numpy as jnp

    jdtype = {"fp32": jnp.float32, "tf32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}[dtype]
    dev = jax.devices(device)[0]
    # fp32 at full precision ("highest"); tf32 is XLA's default precision for fp32 on a GPU (TF32 tensor cores)
    matmul = jax.jit(lambda x, y: jnp.matmul(x, y, precision="highest" if dtype == "fp32" else None))
    a = jax.device_put(jax.random.normal(jax.random.PRNGKey(0), (n, n)).astype(jdtype), dev)
    b = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (n, n)).astype(jdtype), dev)
    return lambda: matmul(a, b).block_until_ready()


def _torch(n: int, dtype: str, device: str) -> Callable[[], Any]:
    import torch

    tdtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    dev = "cuda" if device == "gpu" else "cpu"
    a = torch.randn(n, n, device=dev).to(tdtype)
    b = torch.randn(n, n, device=dev).to(tdtype)
    if dtype != "tf32":
        return lambda: (a @ b)[0, 0].item()

    def product() -> float:
        # TF32 for this product only: the flag is process-wide, and the model's own matmuls keep their setting
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return (a @ b)[0, 0].item()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    return product


_MAKERS = {"numpy": _numpy, "tensorflow": _tensorflow, "jax": _jax, "torch": _torch}


def time_gemm(library: str, dtype: str, n: int, repeats: int = 5, device: str = "cpu") -> dict[str, Any]:
    """Time ``repeats`` n×n GEMMs after one warm-up; returns best and median seconds and GFLOP/s."""
    if (library, dtype) not in SUPPORTED:
        raise ValueError(f"no {dtype} GEMM through {library}")
    if dtype in GPU_ONLY and device != "gpu":
        raise ValueError(f"no {dtype} GEMM on {device}: {dtype} is a GPU tensor-core format")
    fn = _MAKERS[library](n, dtype, device)
    fn()  # warm-up: thread pools, oneDNN primitive creation, tracing
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    flops = gemm_flops(n)
    return {
        "library": library, "dtype": dtype, "n": n, "repeats": repeats, "device": device,
        "best_s": min(times), "median_s": statistics.median(times),
        "best_gflops": flops / min(times) / 1e9, "median_gflops": flops / statistics.median(times) / 1e9,
    }


def gemm_gflops_now(precision: str, device: str, sizes: Iterable[int] | None = None, repeats: int = 3,
                    backend: str = "tensorflow") -> float:
    """Best GFLOP/s of square GEMMs in ``precision`` on ``device`` through ``backend``, timed now.

    On a shared host the peak file's GEMM rate (measured on a quiet machine, ideally) overstates what this
    process could get while its neighbours ran; this is the same measurement taken in the same conditions as
    the steps, so model GFLOP/s over it is an MFU that the load cancels out of (roughly).
    """
    sizes = CHECK_SIZES.get(device, CHECK_SIZES["cpu"]) if sizes is None else sizes
    return max(time_gemm(backend, precision, int(n), repeats, device)["best_gflops"] for n in sizes)
