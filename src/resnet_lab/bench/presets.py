"""Named benchmark matrices: the reproducible one-command measurements (``resnet-lab bench --preset NAME``).

Each preset is a sweep spec for :func:`resnet_lab.bench.config.expand`, except ``2017``: today's versions of
the 2017 note's rows, built from ``data/bench_2017.json`` by :func:`resnet_lab.bench.config.configs_2017`, and
``engine-knobs``: every engine's documented configuration and the alternatives its documents offer
(:func:`resnet_lab.bench.sections.knob_configs`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from resnet_lab.bench.config import BenchConfig, configs_2017, expand, validate
from resnet_lab.core.choices import check_choice
from resnet_lab.core.errors import UsageError

# The same step on each Keras backend, compiled and not: the cross-backend table of 03_benchmarks.
BACKEND_ROWS: list[dict[str, Any]] = [
    {"label": "TF graph", "backend": "tensorflow", "xla": "off"},
    {"label": "TF XLA jit", "backend": "tensorflow", "xla": "jit"},
    {"label": "JAX jit", "backend": "jax", "xla": "jit"},
    {"label": "JAX eager", "backend": "jax", "xla": "off"},
    {"label": "torch eager", "backend": "torch", "xla": "off"},
    {"label": "torch.compile", "backend": "torch", "xla": "jit"},
]

# Named matrices: the reproducible one-command measurements. Each is a sweep spec (see expand).
PRESETS: dict[str, dict[str, Any]] = {
    # ResNet-50 on TF, JAX and PyTorch, training and inference, each with its compiler on and off.
    "backends": {
        "base": {"model": "resnet50", "batch_size": 32, "precision": "fp32", "steps": 5, "warmup": 1},
        "configs": BACKEND_ROWS,
        "sweep": {"mode": ["train", "infer"]},
    },
    # The lent-GPU run (JAX and PyTorch with CUDA, no TensorFlow there): fp32 and bf16, compiled and eager,
    # training and inference, each with a GEMM check in the same precision (MFU without a peak file); and the
    # same model in plain torch.nn, eager and under torch.compile (impl native: what Keras costs a PyTorch user
    # on a GPU, and XLA against TorchInductor on one network).
    "gpu-backends": {
        "base": {"model": "resnet50_v1.5", "device": "gpu", "batch_size": 128, "steps": 20, "warmup": 3,
                 "gemm_check": True, "timeout_s": 600.0},
        "configs": [r for r in BACKEND_ROWS if r["backend"] != "tensorflow"]
        + [{"label": "native PyTorch eager", "backend": "torch", "impl": "native"},
           {"label": "native torch.compile", "backend": "torch", "impl": "native", "xla": "jit"}],
        "sweep": {"mode": ["train", "infer"], "precision": ["fp32", "bf16"]},
    },
    # The configuration search behind the fp32 MFU figure: ResNet-50 v1 training, 224², on this CPU.
    # `resnet-lab bench --preset fp32-train-levers --out DIR` (or `make bench`) re-measures it.
    "fp32-train-levers": {
        "base": {"model": "resnet50", "mode": "train", "batch_size": 32, "precision": "fp32", "steps": 5,
                 "warmup": 1, "gemm_check": True},
        "configs": [
            {"label": "oneDNN (TF default)"},
            {"label": "oneDNN, batch 64", "batch_size": 64},
            {"label": "oneDNN, 2 intra / 1 inter threads", "intra_op": 2, "inter_op": 1},
            {"label": "oneDNN, NCHW", "data_format": "channels_first"},
            {"label": "oneDNN, system allocator", "env": {"TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1"}},
            {"label": "no oneDNN (Eigen)", "onednn": "off"},
            {"label": "XLA jit", "xla": "jit"},
            {"label": "XLA jit, oneDNN thunks", "xla": "jit",
             "env": {"XLA_FLAGS": "--xla_cpu_use_onednn=true"}},
            {"label": "XLA auto-clustering", "xla": "auto"},
            {"label": "oneDNN, profiled", "onednn_profile": True, "steps": 2},
        ],
    },
    # The speed targets of `make bench` (tests/benchmarks): ResNet-50 v1.5 training, TensorFlow as fast as its
    # stack allows (oneDNN, fused batch norm) against native PyTorch eager channels_last (torchvision's
    # layout), fp32 and bf16 (autocast), each with a GEMM check: one run, one host, ratios only.
    "tf-vs-native-pytorch": {
        "base": {"model": "resnet50_v1.5", "mode": "train", "batch_size": 32, "steps": 5, "warmup": 1,
                 "gemm_check": True, "data_format": "channels_last"},
        "configs": [
            {"label": "TensorFlow (Keras model, fused BN)", "fused_bn": True},
            {"label": "native PyTorch eager", "backend": "torch", "impl": "native"},
        ],
        "sweep": {"precision": ["fp32", "bf16"]},
    },
    # Precision on the same step: bf16/fp16 mixed policies, and fp32 whose oneDNN math is bf16 (not fp32).
    "precision": {
        "base": {"model": "resnet50", "mode": "train", "batch_size": 32, "steps": 5, "warmup": 1,
                 "gemm_check": True},
        "configs": [
            {"label": "fp32", "precision": "fp32"},
            {"label": "bf16 (mixed_bfloat16)", "precision": "bf16"},
            {"label": "fp16 (mixed_float16)", "precision": "fp16"},
            {"label": "fp32 API, oneDNN fpmath bf16", "precision": "fp32",
             "env": {"TF_SET_ONEDNN_FPMATH_MODE": "BF16"}},
        ],
    },
}


PRESET_NAMES = (*PRESETS, "2017", "engine-knobs")  # engine-knobs: the CLI builds it (bench.sections.knob_configs)


def preset_configs(name: str, **overrides: Any) -> list[BenchConfig]:
    """The configurations of preset ``name``; ``overrides`` (e.g. steps=3) apply to every one of them."""
    check_choice("--preset", name, PRESET_NAMES)
    if name == "2017":
        return configs_2017(**overrides)
    if name == "engine-knobs":
        raise UsageError("--preset engine-knobs is built from 03's sections: resnet_lab.bench.sections.knob_configs "
                         "(the bench CLI builds it)")
    return [validate(dataclasses.replace(c, **overrides)) for c in expand(PRESETS[name])]
