"""Speed targets of the served rows ("fair peers"): each engine run as its authors document, measured in one run
on one host, ratios only (`make bench`; a quiet machine, a few minutes on 2 cores).

- native PyTorch's served row (the workbook's ``torch.nn`` model under ``torch.compile`` with Inductor's freezing)
  within 15 % of a hand-written ResNet-50 served the same way, the two timed in alternating fresh processes;
- IREE's documented recipe within 1.25× of the fastest IREE configuration its documents describe that was tried
  (the knob sweep's IREE rows);
- OpenVINO at bf16 and batch 1 runs and agrees with fp32 on photographs where the CPU has bf16 instructions.

Each test prints what it measured and leaves its rows under outputs/bench/<timestamp>-<test>/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import bench_out, load_line

from resnet_lab.bench import launcher, sections
from resnet_lab.bench.config import BenchConfig
from resnet_lab.core import host
from resnet_lab.steps import recipes

pytestmark = pytest.mark.benchmark

# A ResNet-50 v1.5 written by hand as a PyTorch user would (torchvision's layout), served as PyTorch documents:
# eval, channels_last, no_grad, torch.compile with TORCHINDUCTOR_FREEZING=1. Prints the p50 of QUERIES queries.
HAND_WRITTEN = r'''
import os, sys, time, statistics, torch
from torch import nn
os.environ.setdefault("TORCHINDUCTOR_FREEZING", "1")
torch.set_num_threads(int(sys.argv[2]))
class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.down is None else self.down(x)))
def resnet50():
    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                   nn.MaxPool2d(3, 2, 1)], 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))
model = resnet50().eval().to(memory_format=torch.channels_last)
x = torch.rand(1, 3, 224, 224).contiguous(memory_format=torch.channels_last)
fn = torch.compile(model)
with torch.no_grad():
    for _ in range(10):
        fn(x)
    times = []
    for _ in range(int(sys.argv[1])):
        t = time.perf_counter(); fn(x)[0, 0].item(); times.append(time.perf_counter() - t)
print(statistics.median(times))
'''
QUERIES = 64



def test_native_pytorch_served_within_15_percent_of_a_hand_written_resnet50_served_alike():
    """By hand: resnet-lab bench --model resnet50_v1.5 --backend torch --impl native --xla jit --mode infer
    --batch-size 1 --env TORCHINDUCTOR_FREEZING=1 --steps 64 --min-time 0, beside this file's HAND_WRITTEN."""
    out = bench_out("served-native-torch")
    threads = len(os.sched_getaffinity(0))
    cfg = BenchConfig(model="resnet50_v1.5", mode="infer", batch_size=1, steps=QUERIES, warmup=10, min_time_s=0.0,
                      **sections.served("native PyTorch"), label="served native PyTorch")
    ours, theirs = [], []
    for _ in range(3):  # alternating fresh processes: drift hits both alike
        row = launcher.run_config(cfg, log_dir=out)
        assert row["status"] == "ok", row["reason"]
        ours.append(row["step_time_p50"])
        done = subprocess.run([sys.executable, "-c", HAND_WRITTEN, str(QUERIES), str(threads)], capture_output=True,
                              text=True, timeout=900, env={**os.environ, "TORCHINDUCTOR_FREEZING": "1"})
        assert done.returncode == 0, done.stderr[-2000:]
        theirs.append(float(done.stdout.split()[-1]))
    ratio = min(ours) / min(theirs)
    print(f"\n[{load_line()}] served native PyTorch p50 {[round(1e3 * t, 1) for t in ours]} ms, hand-written "
          f"{[round(1e3 * t, 1) for t in theirs]} ms: {ratio:.3f}×")
    out.mkdir(parents=True, exist_ok=True)
    (out / "ratio.json").write_text(json.dumps({"ours_s": ours, "hand_written_s": theirs, "ratio": ratio}))
    assert ratio <= 1.15


def test_iree_s_documented_recipe_is_within_1_25x_of_its_fastest_documented_configuration():
    """By hand: resnet-lab bench --preset engine-knobs (the IREE rows)."""
    out = bench_out("iree-recipes")
    rows = launcher.run_matrix(sections.knob_configs(engines=["iree"], frameworks=[]), out=out, name="bench_knobs",
                               progress=False)
    p50 = {r["recipe"]: r["step_time_p50"] for r in rows if r["status"] == "ok"}
    print(f"\n[{load_line()}] IREE p50 by recipe (ms): { {k: round(1e3 * v, 1) for k, v in p50.items()} }")
    assert "documented" in p50 and p50["documented"] <= 1.25 * min(p50.values())


def test_openvino_bf16_at_batch_1_runs_and_agrees_with_fp32_where_the_cpu_has_bf16():
    """By hand: resnet-lab bench --model resnet50_v1.5 --backend openvino --precision bf16 --batch-size 1."""
    why = recipes.bf16_reason("openvino", host.cpu_identity()["isa"])
    cfg = BenchConfig(model="resnet50_v1.5", mode="infer", backend="openvino", xla="jit", batch_size=1,
                      precision="bf16", steps=QUERIES, warmup=10, min_time_s=0.0)
    (row,) = launcher.run_matrix([cfg], out=bench_out("openvino-bf16"), name="bench_openvino_bf16", progress=False)
    print(f"\n[{load_line()}] OpenVINO bf16 b1: {row['status']} p50 {row.get('step_time_p50')} s, agreement "
          f"top-1 {row.get('agree_top1')} max rel {row.get('agree_max_rel')} ({row.get('reason')})")
    if why:
        assert row["status"] == "skipped" and row["reason"] == why
        return
    assert row["status"] == "ok" and row["agree_ok"], row["reason"]
