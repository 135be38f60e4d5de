"""Where a training step's time goes, per variant of benchmarks/bench_llama.py: the CUDA kernels (total time,
calls) and the host time per step, from torch.profiler over 3 steps after 3 warm-up steps.

    python benchmarks/probes/llama_step_profile.py liger opsmith [--small]
"""

from __future__ import annotations

import sys
import time

import torch

sys.path.insert(0, ".")
from benchmarks.bench_llama import build, config


def profile(variant: str, small: bool) -> None:
    c = config(small)
    model, loss_of = build(variant, c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device="cuda")

    def step() -> None:
        loss_of(ids, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    ) as p:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / 3
    print(f"== {variant}: {wall * 1e3:.1f} ms per step (profiled)")
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=60))


if __name__ == "__main__":
    small = "--small" in sys.argv
    for v in [a for a in sys.argv[1:] if not a.startswith("--")]:
        profile(v, small)
