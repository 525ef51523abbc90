"""One convolution's weight gradient in bf16 and fp32, TensorFlow against PyTorch, same oneDNN underneath.

    python repro.py tf      # or: torch; ONEDNN_VERBOSE=1 python repro.py tf 2>&1 | grep onednn_verbose
    THREADS=1 python repro.py tf     # one thread in both stacks (default: the cores the process may use)

Shapes are ResNet-50's (batch 32, NHWC / channels_last): a 3x3 of stage 1, a 1x1 of stage 3, a 3x3 of stage 4.
Each line: framework, dtype, shape, best and median ms of 10 calls after 3 warm-ups (inputs made once).
"""
import os
import statistics
import sys
import time

THREADS = int(os.environ.get("THREADS", "0"))  # 0: each framework's default (the cores this process may use)

SHAPES = [  # (name, N, H, W, C_in, C_out, k, stride)
    ("s1 3x3 64->64 56x56", 32, 56, 56, 64, 64, 3, 1),
    ("s3 1x1 1024->256 14x14", 32, 14, 14, 1024, 256, 1, 1),
    ("s4 3x3 512->512 7x7", 32, 7, 7, 512, 512, 3, 1),
]


def timed(fn, reps=10, warm=3):
    for _ in range(warm):
        fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return 1e3 * min(t), 1e3 * statistics.median(t)


def tf_case(dtype, n, h, w, ci, co, k, s):
    import tensorflow as tf
    if THREADS and tf.config.threading.get_intra_op_parallelism_threads() != THREADS:
        tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    dt = {"bf16": tf.bfloat16, "fp32": tf.float32}[dtype]
    x = tf.cast(tf.random.stateless_normal((n, h, w, ci), seed=(1, 2)), dt)
    dy = tf.cast(tf.random.stateless_normal((n, h // s, w // s, co), seed=(3, 4)), dt)
    shape = tf.constant([k, k, ci, co])
    f = tf.function(lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=shape, out_backprop=dy, strides=[1, s, s, 1], padding="SAME", data_format="NHWC"))
    return lambda: f(x, dy).numpy()


def torch_case(dtype, n, h, w, ci, co, k, s):
    import torch
    if THREADS:
        torch.set_num_threads(THREADS)
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, ci, h, w, generator=g).to(dt).contiguous(memory_format=torch.channels_last)
    dy = torch.randn(n, co, h // s, w // s, generator=g).to(dt).contiguous(memory_format=torch.channels_last)
    wt = torch.empty(co, ci, k, k, dtype=dt).contiguous(memory_format=torch.channels_last)

    def grad_w():
        with torch.no_grad():
            return torch.ops.aten.convolution_backward(dy, x, wt, None, [s, s], [k // 2, k // 2], [1, 1], False,
                                                       [0, 0], 1, [False, True, False])[1]
    return grad_w


if __name__ == "__main__":
    which = sys.argv[1]
    make = {"tf": tf_case, "torch": torch_case}[which]
    for dtype in ("fp32", "bf16"):
        for name, *shape in SHAPES:
            best, med = timed(make(dtype, *shape))
            print(f"{which:5s} {dtype} {name:24s} best {best:8.2f} ms  median {med:8.2f} ms", flush=True)
