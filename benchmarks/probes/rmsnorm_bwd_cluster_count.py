"""Probe (issue 39, item 4): the CUDA C++ RMSNorm backward kernel alone under each config (OVERLAP too), at hidden 65,536
and 16,384 bf16: how many persistent clusters of 4 and 8 this GPU holds (a config's SHORT launches that many
fewer than its blocks allow; a count the GPU cannot hold at once runs about twice as long), and which config
the tuner should find. Each config is forced in turn (tuning off, the Python path), then timed in interleaved
rounds of do_bench medians; "% copy" compares its bytes per second (dy and x read, dx written) with a copy of
x in the same round.

    PYTHONPATH=. python benchmarks/probes/rmsnorm_bwd_cluster_count.py [--shapes 2048x65536,8192x16384]
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ["OPSMITH_AUTOTUNE"] = "0"  # each config forced in turn
os.environ["OPSMITH_NATIVE"] = "0"  # the Python path launches the forced config
import torch
from triton.testing import do_bench

from opsmith.declare.expr import evaluate, parse_size
from opsmith.ops.rmsnorm import _partial_rows, rmsnorm_ops

EPS = 1e-6


def time_shape(bwd: object, shape: tuple[int, ...], rounds: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    w = (1 + 0.25 * torch.randn(shape[-1], device="cuda")).to(torch.bfloat16)
    dy = torch.randn_like(x)
    rows = evaluate(parse_size(_partial_rows("cuda"), {"x": "i0"}), {"i0": x})
    partial = torch.empty(rows, shape[-1], device="cuda", dtype=torch.float32)

    def call() -> torch.Tensor:
        return bwd(dy, x, w, EPS, partial)

    keep = [c for c, cfg in enumerate(bwd.record.configs)
            if cfg["params"]["CLUSTER"] > 1 or cfg["params"]["STAGED"] == 1]  # fmt: skip
    times: dict[int, list[float]] = {c: [] for c in keep}
    copies = []
    for _ in range(rounds):
        copies.append(do_bench(lambda: x.clone(), warmup=5, rep=50, return_mode="median"))
        for c in keep:
            bwd.tuner.default = c
            bwd.tuner.decisions.clear()
            call()  # compiles this config
            times[c].append(do_bench(call, warmup=5, rep=50, return_mode="median"))
    copy = statistics.median(copies)
    print(f"  {shape}: copy of x {copy * 1e3:.1f} us, {rows} partial rows")
    for c in sorted(keep, key=lambda c: statistics.median(times[c])):
        t, p = statistics.median(times[c]), bwd.record.configs[c]["params"]
        print(
            f"    {t * 1e3:8.1f} us  {1.5 * copy / t:6.1%} of copy  config {c}: "
            + " ".join(f"{k}={p[k]}" for k in ("THREADS", "MAXV", "MINB", "STAGED", "CLUSTER", "SHORT", "OVERLAP"))
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="2048x65536,8192x16384")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    _, bwd = rmsnorm_ops("cuda", ns="clustercount")
    print(f"{torch.cuda.get_device_name()}, {torch.cuda.get_device_properties(0).multi_processor_count} SMs: "
          f"CUDA C++ RMSNorm backward kernel per config, bf16, {args.rounds} interleaved rounds, median us")  # fmt: skip
    for text in args.shapes.split(","):
        time_shape(bwd, tuple(int(s) for s in text.split("x")), args.rounds)


if __name__ == "__main__":
    main()
