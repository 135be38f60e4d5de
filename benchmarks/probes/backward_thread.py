"""Probe (issue 26, item 2): is the JIT RMSNorm backward slower on autograd's worker thread than on the calling
thread, and where does the time go?

At (64, 4096) bf16 the GPU work is a few microseconds, so the wall time per step is host time. Each row is the
median of interleaved rounds of ``--calls`` steps, one synchronize per round:

- fwd: the forward alone, inputs requiring grad (the autograd node is built);
- fwd+bwd (worker): ``y.backward(dy)``; the CUDA backward runs on autograd's device thread;
- fwd+bwd (caller): the same with ``torch.autograd.set_multithreading_enabled(False)``: on the calling thread;
- bwd program direct: the op's declared backward program (two buffers, two ops) run on this thread, no autograd;
- bwd program direct, other thread: the same from a fresh ``threading.Thread``.

    PYTHONPATH=. python benchmarks/probes/backward_thread.py [--calls 200] [--rounds 9] [--impls triton,cuda,cute]

Found (H100, docs/measurements/2026-11-24-backward-thread-probe*.txt): fwd+bwd 762-813 us on the worker
thread against 431-446 us on the calling thread in one run, 467-613 against 431-499 in the next; the program
alone 97-125 us on any Python thread, and no slower inside the worker's callback. The gap is outside the
program and not stable; ~100 us of self CPU time per step sits in the register_autograd backward node. Within
a round the gradients accumulate (an add_ per step for x and weight), as without zero_grad.
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
    from opsmith.ops.rmsnorm import _backward
    from opsmith.plan.backward_program import program_of as _program
    from opsmith.registry import _REGISTRY

    fwd, bwd = rmsnorm_ops(impl)
    decl = _backward(bwd, _REGISTRY[f"opsmith::rmsnorm_{impl}_dweight"], impl)
    program = _program(fwd.record, decl)
    env = dict(zip(decl.args, (dy, x, w, 1e-6), strict=True))
    return lambda: program.run(dict(env), (True, True))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--impls", default="triton,cuda", help="also cute, where CuTe DSL is installed")
    a = ap.parse_args()
    print(f"backward thread probe on {torch.cuda.get_device_name()} (torch {torch.__version__}), (64, 4096) bf16, "
          f"medians of {a.rounds} rounds x {a.calls} steps, us per step")  # fmt: skip
    for impl in a.impls.split(","):
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
        _attribute(impl, rows, a.calls)
    return 0


def _attribute(impl: str, rows: dict, calls: int) -> None:
    """Where the backward's time goes on each thread: the program's run (its two ops and two buffers) timed
    inside the autograd callback, against the whole step."""
    from opsmith.plan import backward_program

    inside: list[float] = []
    run = backward_program.Program.run

    def timed_run(self, env, needs):
        t0 = time.perf_counter()
        try:
            return run(self, env, needs)
        finally:
            inside.append(time.perf_counter() - t0)

    backward_program.Program.run = timed_run
    try:
        for name in ("fwd+bwd (worker)", "fwd+bwd (caller)"):
            inside.clear()
            step_us = _timed(rows[name][1], calls)
            print(f"    {impl} {name}: step {step_us:.1f} us, of which the program's run inside the callback "
                  f"{statistics.median(inside) * 1e6:.1f} us (median of {len(inside)})", flush=True)  # fmt: skip
    finally:
        backward_program.Program.run = run
    from torch.profiler import ProfilerActivity, profile

    for name in ("fwd+bwd (worker)", "fwd+bwd (caller)"):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            _timed(rows[name][1], 50)
        print(f"    {impl} {name}, torch.profiler over 50 steps (CPU events, by total time):")
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=14, max_name_column_width=60))


if __name__ == "__main__":
    raise SystemExit(main())
