"""Probe (issue 26, item 2): is the JIT RMSNorm backward slower on autograd's worker thread than on the calling
thread, and where does the time go?

At (64, 4096) bf16 the GPU work is a few microseconds, so the wall time per step is host time. Each row is the
median of interleaved rounds of ``--calls`` steps, one synchronize per round:

- fwd: the forward alone, inputs requiring grad (the autograd node is built);
- fwd+bwd (worker): ``y.backward(dy)``; the CUDA backward runs on autograd's device thread;
- fwd+bwd (caller): the same with ``torch.autograd.set_multithreading_enabled(False)``: on the calling thread;
- bwd program direct: the op's declared backward program (two buffers, two ops) run on this thread, no autograd;
- bwd program direct, other thread: the same from a fresh ``threading.Thread``.

    PYTHONPATH=. python benchmarks/probes/backward_thread.py [--calls 200] [--rounds 9]

Found (H100, docs/measurements/2026-11-24-backward-thread-probe-h100.txt): fwd+bwd 762-813 us on the worker
thread, 431-446 us on the calling thread, the program alone 112-125 us on either thread. A fresh Python thread
is not what is slow; the cost is in autograd's path around the program, and doubles on its worker thread.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

from opsmith.ops.rmsnorm import rms_norm, rmsnorm_ops


def _timed(step, calls: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def _in_thread(step, calls: int) -> float:
    box: list[float] = []
    t = threading.Thread(target=lambda: box.append(_timed(step, calls)))
    t.start()
    t.join()
    return box[0]


def _program_step(impl: str, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor):
    """The op's declared backward program, run directly (no autograd): the two ops and two allocations."""
    from opsmith.autograd import _program
    from opsmith.ops.rmsnorm import _backward
    from opsmith.registration import _REGISTRY

    fwd, bwd = rmsnorm_ops(impl)
    decl = _backward(bwd, _REGISTRY[f"opsmith::rmsnorm_{impl}_dweight"], impl)
    program = _program(fwd.record, decl)
    env = dict(zip(decl.args, (dy, x, w, 1e-6), strict=True))
    return lambda: program.run(dict(env), (True, True))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    print(f"backward thread probe on {torch.cuda.get_device_name()} (torch {torch.__version__}), (64, 4096) bf16, "
          f"medians of {a.rounds} rounds x {a.calls} steps, us per step")  # fmt: skip
    for impl in ("triton", "cuda"):
        x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        dy = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)

        def fb_caller(x=x, w=w, dy=dy, impl=impl):
            with torch.autograd.set_multithreading_enabled(False):
                rms_norm(x, w, 1e-6, impl).backward(dy)

        direct = _program_step(impl, x.detach(), w.detach(), dy)
        rows = {
            "fwd": (False, lambda x=x, w=w, impl=impl: rms_norm(x, w, 1e-6, impl)),
            "fwd+bwd (worker)": (False, lambda x=x, w=w, dy=dy, impl=impl: rms_norm(x, w, 1e-6, impl).backward(dy)),
            "fwd+bwd (caller)": (False, fb_caller),
            "bwd program direct": (False, direct),
            "bwd program direct, other thread": (True, direct),
        }
        for _, step in rows.values():  # warm up: compile, tune, build the nodes
            step()
        got: dict[str, list[float]] = {k: [] for k in rows}
        for _ in range(a.rounds):
            for k, (threaded, step) in rows.items():
                got[k].append(_in_thread(step, a.calls) if threaded else _timed(step, a.calls))
                x.grad = w.grad = None
        print(f"  {impl}: " + "; ".join(f"{k} {statistics.median(v):.1f}" for k, v in got.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
