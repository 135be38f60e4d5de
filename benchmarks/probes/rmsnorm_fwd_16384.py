"""Probe (issue 26, item 3): the RMSNorm forward at hidden 16,384, where torch.compile's led every opsmith
forward by 0.3-0.5% in two H100 sweeps. Times the forwards interleaved (do_bench medians, several rounds), then
runs each once inside ``torch.cuda.profiler`` start/stop, so that

    ncu --profile-from-start off --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
        python benchmarks/probes/rmsnorm_fwd_16384.py

gives each kernel's bytes, launch and occupancy.

    PYTHONPATH=. python benchmarks/probes/rmsnorm_fwd_16384.py [--shape 8192x16384] [--rounds 5]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from opsmith.ops.rmsnorm import rmsnorm_ops

EPS = 1e-6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="8192x16384")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    shape = tuple(int(s) for s in args.shape.split("x"))
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16)
    impls = {"opsmith triton": rmsnorm_ops("triton")[0], "opsmith cuda": rmsnorm_ops("cuda")[0],
             "torch.compile": torch.compile(lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps))}  # fmt: skip
    for fn in impls.values():
        fn(x, w, EPS)  # tune / compile
    src, dst = torch.empty_like(x), torch.empty_like(x)
    times: dict[str, list[float]] = {k: [] for k in ["copy", *impls]}
    for _ in range(args.rounds):
        times["copy"].append(do_bench(lambda: dst.copy_(src), warmup=25, rep=100, return_mode="median"))
        for name, fn in impls.items():
            times[name].append(do_bench(lambda fn=fn: fn(x, w, EPS), warmup=25, rep=100, return_mode="median"))
    copy = sorted(times["copy"])[len(times["copy"]) // 2]
    print(f"{torch.cuda.get_device_name()}: RMSNorm forward {shape} bf16, {args.rounds} interleaved rounds")
    for name, ts in times.items():
        med = sorted(ts)[len(ts) // 2]
        print(f"  {name:16s} median {med * 1e3:7.1f} us ({copy / med:6.1%} of copy); rounds "
              + " ".join(f"{t * 1e3:.1f}" for t in ts))  # fmt: skip
    for name, fn in impls.items():
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        fn(x, w, EPS)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(f"  profiled: {name}", flush=True)


if __name__ == "__main__":
    main()
