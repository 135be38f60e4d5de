"""Probe (issue 26, item 3): why the RMSNorm backward misses at hidden 65,536, and whether the sweep's figure
differs from a run of that shape alone.

For each opsmith kernel at (2048, 65536) bf16: the backward alone (autograd, one graph differentiated again
and again, as bench_rmsnorm times it) and forward+backward, medians of do_bench, in a process that runs only
this shape. Then one backward inside ``torch.cuda.profiler`` start/stop, so that

    ncu --profile-from-start off --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        python benchmarks/probes/rmsnorm_long_rows.py

gives each kernel's DRAM bytes: what a backward must move is x and dy read and dx written (6 bytes an element
in bf16); the figure past that is the cause.

    PYTHONPATH=. python benchmarks/probes/rmsnorm_long_rows.py [--impls cuda,triton,cute,quack] [--shapes 2048x65536]
"""

from __future__ import annotations

import argparse

import torch
from triton.testing import do_bench

from opsmith.native import wait
from opsmith.ops.rmsnorm import rmsnorm_ops

EPS = 1e-6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impls", default="cuda,triton")
    ap.add_argument(
        "--shapes", default="2048x65536", help="measured in turn in this process, e.g. 8192x16384,2048x65536"
    )
    args = ap.parse_args()
    for text in args.shapes.split(","):
        measure(tuple(int(s) for s in text.split("x")), args.impls.split(","))


def measure(shape: tuple, impls: list) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    nbytes = x.numel() * x.element_size()
    src, dst = torch.empty_like(x), torch.empty_like(x)
    copy_ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    copy = 2 * nbytes / (copy_ms * 1e-3)
    print(f"{torch.cuda.get_device_name()}: RMSNorm {shape} bf16; copy {copy / 1e9:.0f} GB/s; a backward "
          f"moves {3 * nbytes / 1e6:.0f} MB (x, dy read; dx written): {3 * nbytes / copy * 1e6:.1f} us at copy speed")  # fmt: skip
    for impl in impls:
        if impl == "quack":  # the peer (CuTe DSL), where installed
            from quack.rmsnorm import rmsnorm as quack_rmsnorm

            def fwd(x, w, eps, f=quack_rmsnorm):
                return f(x, w, eps=eps)
        else:
            fwd, _ = rmsnorm_ops(impl)
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        torch.autograd.grad(fwd(xg, wg, EPS), (xg, wg), dy)  # tunes (or reads the decisions) first
        wait(900)  # the native rebuild that holds this shape's decisions: time that path, not the Python one
        both = do_bench(lambda fwd=fwd, xg=xg, wg=wg: torch.autograd.grad(fwd(xg, wg, EPS), (xg, wg), dy), warmup=25, rep=200,
                        return_mode="median")  # fmt: skip
        y = fwd(xg, wg, EPS)
        bwd = do_bench(lambda y=y, xg=xg, wg=wg: torch.autograd.grad(y, (xg, wg), dy, retain_graph=True), warmup=25, rep=200,
                       return_mode="median")  # fmt: skip
        frac = 3 * nbytes / (bwd * 1e-3) / copy
        fwd_ms = do_bench(lambda fwd=fwd: fwd(x, w, EPS), warmup=25, rep=200, return_mode="median")
        print(f"  {impl}: fwd {fwd_ms * 1e3:.1f} us ({2 * nbytes / (fwd_ms * 1e-3) / copy:.1%} of copy), bwd "
              f"{bwd * 1e3:.1f} us ({frac:.1%}), fwd+bwd {both * 1e3:.1f} us; backward decisions "
              f"{_decisions(impl) if impl != 'quack' else '-'}")  # fmt: skip
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def _decisions(impl: str) -> dict:
    _, bwd = rmsnorm_ops(impl)
    return {str(k): bwd.record.configs[c]["params"] for k, c in bwd.tuner.decisions.items()}


if __name__ == "__main__":
    main()
