"""Probe (issue 26, item 3): is the spread of the CuTe DSL RMSNorm backward at long rows (319-447 us at
(2048, 65536) bf16 on an H100, same kernel and decision) its persistent clusters not all fitting at launch?

The backward launches one persistent cluster per partial dweight row; ``_partial_rows`` asks for 7/8 of the
clusters of 4 and 8 CTAs that fit the GPU at two CTAs per SM (a cluster must fit one GPC). If a cluster that
does not fit at launch waits for a whole cluster's rows, fewer clusters should trade a little parallelism
for no such wait: a lower and tighter spread. Each fraction (8/8 .. 5/8) gets a copy of the ops under its
own namespace with that partial row count; rounds of do_bench medians are interleaved across the copies.

    PYTHONPATH=. python benchmarks/probes/rmsnorm_cluster_spread.py [--shape 2048x65536] [--rounds 8]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from triton.testing import do_bench

import opsmith.ops.rmsnorm as R

EPS = 1e-6


def copy_with(eighths: int) -> object:
    """The CuTe DSL forward op, registered under ``spread<eighths>`` with clusters past 2 cut to eighths/8."""
    original = R._partial_rows

    def rows(flavor: str) -> str:
        text = original(flavor)
        return text.replace("* (8 - min(1, ", f"* (8 - {8 - eighths} * min(1, ") if flavor == "cute" else text

    R._partial_rows = rows
    try:
        return R.rmsnorm_ops("cute", ns=f"spread{eighths}")[0]
    finally:
        R._partial_rows = original


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="2048x65536")
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    shape = tuple(int(s) for s in args.shape.split("x"))
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)
    ops = {e: copy_with(e) for e in (8, 7, 6, 5)}
    graphs = {}
    tuned = R.rmsnorm_ops("cute", ns="spread7")[1].tuner.decisions
    for e in (7, 8, 6, 5):  # 7/8 (today's count) tunes; the others take its decision: one kernel for all
        R.rmsnorm_ops("cute", ns=f"spread{e}")[1].tuner.decisions.update(tuned)
        torch.autograd.grad(ops[e](x, w, EPS), (x, w), dy)  # compiles (and for 7/8 tunes) first
        graphs[e] = ops[e](x, w, EPS)
    times: dict[int, list[float]] = {e: [] for e in ops}
    for _ in range(args.rounds):
        for e, y in graphs.items():
            ms = do_bench(lambda y=y: torch.autograd.grad(y, (x, w), dy, retain_graph=True), warmup=10, rep=100,
                          return_mode="median")  # fmt: skip
            times[e].append(ms * 1e3)
    print(f"{torch.cuda.get_device_name()}: CuTe DSL RMSNorm backward at {shape} bf16, {args.rounds} interleaved "
          "rounds of do_bench medians, us")  # fmt: skip
    device_and_host(graphs[7], x, w, dy)
    for e, t in times.items():
        op = ops[e]
        dec = {str(k[-2:]): c for k, c in R.rmsnorm_ops("cute", ns=f"spread{e}")[1].tuner.decisions.items()}
        print(f"  clusters {e}/8: min {min(t):.1f}  median {statistics.median(t):.1f}  max {max(t):.1f}  "
              f"(decision {dec}; {op.record.op_name})")  # fmt: skip


def device_and_host(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, calls: int = 30) -> None:
    """The same backward as do_bench runs it (an L2 flush, then the call), 30 times: each kernel's GPU time
    from the profiler, and the host's time to issue the call (perf_counter, no sync): if the host takes longer
    than the flush gives it, the GPU waits inside do_bench's events and the host's time is what is measured."""
    import time

    from torch.profiler import ProfilerActivity, profile

    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    host = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.zero_()
            t0 = time.perf_counter()
            torch.autograd.grad(y, (x, w), dy, retain_graph=True)
            host.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
    kernels: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "rmsnorm" in e.name.lower():
            kernels.setdefault(e.name[:60], []).append(e.device_time)
    print(f"  host time to issue one backward: median {statistics.median(host):.1f} us (min {min(host):.1f}, "
          f"max {max(host):.1f})")  # fmt: skip
    for name, t in kernels.items():
        print(f"  GPU time of {name}: median {statistics.median(t):.1f} us (min {min(t):.1f}, max {max(t):.1f}, "
              f"{len(t)} runs)")  # fmt: skip


if __name__ == "__main__":
    main()
