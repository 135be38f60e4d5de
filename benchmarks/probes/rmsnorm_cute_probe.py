"""Quick side-by-side of the CuTe DSL RMSNorm against the CUDA C++ one, quack and torch.compile at the sweep
shapes (bf16): forward and backward times and % of copy bandwidth, from ``benchmarks.bench_rmsnorm.measure``.
For iterating on the kernels; ``bench_rmsnorm.py`` is the full record.

    python benchmarks/rmsnorm_cute_probe.py [--shapes 2048x65536 8192x16384] [--reps 100]
"""

import argparse

import torch
import torch.nn.functional as F

from benchmarks.bench_rmsnorm import EPS, MAIN, SWEEP, measure, table
from opsmith.ops.rmsnorm import rms_norm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="*", default=None, help="ROWSxN, e.g. 2048x65536 (default: main + sweep)")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--no-peers", action="store_true", help="only the opsmith ops")
    ap.add_argument("--profile", action="store_true", help="also each opsmith kernel's device time (profiler)")
    ap.add_argument("--host", action="store_true", help="also host time per call at (64, 4096), then exit")
    ap.add_argument("--configs", action="store_true", help="each CuTe DSL config's kernel time at --shapes, then exit")
    ap.add_argument(
        "--prows", type=int, nargs="*", help="the CuTe DSL backward alone with these partial rows, then exit"
    )
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes] if args.shapes else [MAIN, *SWEEP]
    import torch._functorch.config as functorch_config

    functorch_config.donated_buffer = False
    if args.prows:
        for shape in shapes:
            partial_rows(shape, args.prows)
        return
    if args.configs:
        for shape in shapes:
            per_config(shape)
        return
    if args.host:
        from benchmarks.bench_rmsnorm import host_times

        impls = {f"opsmith {i}": lambda x, w, i=i: rms_norm(x, w, EPS, i) for i in ("cuda", "cute")}
        for name, t in host_times(impls).items():
            print(f"host us per call, {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in t.items()))
        return
    for shape in shapes:
        torch._dynamo.reset()
        impls = {"opsmith cuda": lambda x, w: rms_norm(x, w, EPS, "cuda"),
                 "opsmith cute": lambda x, w: rms_norm(x, w, EPS, "cute")}  # fmt: skip
        if not args.no_peers:
            impls["torch.compile(F.rms_norm)"] = torch.compile(
                lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS), dynamic=False)  # fmt: skip
            try:
                from quack.rmsnorm import rmsnorm as quack_rmsnorm

                impls["quack"] = lambda x, w: quack_rmsnorm(x, w, eps=EPS)
            except Exception as e:
                print(f"quack not available: {e}")
        print(table(measure(shape, torch.bfloat16, impls, args.reps)), flush=True)
        from opsmith.ops.rmsnorm import rmsnorm_ops

        for op in rmsnorm_ops("cute"):
            chosen = {k: op.record.configs[c]["params"] for k, c in op.tuner.decisions.items()}
            print(f"  {op.record.op_name} chose {chosen}")
        if args.profile:
            kernel_times(shape, {k: v for k, v in impls.items() if k.startswith("opsmith")})


def partial_rows(shape: tuple, prows: list[int]) -> None:
    """The CuTe DSL backward op alone (tuned per call shape) with ``p`` partial rows, i.e. ``p`` persistent
    clusters: whether they all fit on the GPU at once shows as time."""
    from triton.testing import do_bench

    from opsmith.ops.rmsnorm import rmsnorm_ops

    _, bwd = rmsnorm_ops("cute")
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    for p in prows:
        partial = torch.empty(p, shape[-1], device="cuda")
        us = do_bench(lambda partial=partial: bwd(dy, x, w, EPS, partial), warmup=20, rep=100) * 1e3
        print(f"{shape} backward kernel with {p} partial rows: {us:.1f} us", flush=True)


def per_config(shape: tuple) -> None:
    """Each forward and backward config of the CuTe DSL op forced in turn: its kernels' device times."""
    import os

    from opsmith.ops.rmsnorm import rmsnorm_ops

    os.environ["OPSMITH_AUTOTUNE"] = "0"
    fwd, bwd = rmsnorm_ops("cute")
    for c in range(max(len(fwd.record.configs), len(bwd.record.configs))):
        for op in (fwd, bwd):
            op.tuner.default = c % len(op.record.configs)
            op.tuner.decisions.clear()
        print(f"{shape} fwd {fwd.record.configs[c % len(fwd.record.configs)]['params']} "
              f"bwd {bwd.record.configs[c % len(bwd.record.configs)]['params']}")  # fmt: skip
        kernel_times(shape, {"opsmith cute": lambda x, w: rms_norm(x, w, EPS, "cute")})
    del os.environ["OPSMITH_AUTOTUNE"]


def kernel_times(shape: tuple, impls: dict, iters: int = 10) -> None:
    """Device time per kernel of forward + backward (mean of ``iters``), apart from the host's."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    for name, fn in impls.items():
        torch.autograd.grad(fn(x, w), (x, w), dy)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                torch.autograd.grad(fn(x, w), (x, w), dy)
            torch.cuda.synchronize()
        rows = [(e.key[:60], e.device_time_total / iters) for e in prof.key_averages() if e.device_time_total > 0]
        print(
            f"  {name} kernels (us per fwd+bwd): "
            + "; ".join(f"{k} {t:.1f}" for k, t in sorted(rows, key=lambda r: -r[1])[:5])
        )


if __name__ == "__main__":
    main()
