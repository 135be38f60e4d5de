"""Run by test_published_cpu.py with TRITON_INTERPRET=1: every published kernel on CPU tensors, checked against
its reference (the tuned ops run their default config: tracing and the interpreter never tune)."""

import os
import sys
import tempfile

import torch

from examples.catalog.published import register_published
from opsmith.tuning.autotune import Tuner


def tuning() -> None:
    """The sum kernel accumulates into ``out``; a timer runs each config four times, restoring between runs."""
    from triton.runtime.interpreter import InterpretedFunction

    from examples.catalog.kernels.published_triton import sum_kernel

    kern = InterpretedFunction(sum_kernel.fn.fn.fn)
    x, out = torch.randn(1000), torch.zeros(1)
    blocks = (128, 512, 2048)

    def run(c):
        kern[(-(-1000 // blocks[c]),)](x, out, 1000, BLOCK=blocks[c], EVEN=1000 % blocks[c] == 0)

    def timer(run_once, restore):
        for _ in range(4):
            restore()
            run_once()
        return [1.0] * 4

    configs = [{"params": {"BLOCK": b}, "num_warps": 4, "num_stages": 3} for b in blocks]
    t = Tuner("t_pubinterp::acc", {"op": "acc"}, configs, 0, timer=timer)
    with tempfile.TemporaryDirectory() as d:
        os.environ["OPSMITH_CACHE_DIR"] = d  # a fresh cache: this process decides by tuning
        t.decide((torch.float32, 1000), None, run, mutated=(out,), outputs=(out,))
    assert t.trial_runs >= 12, t.trial_runs
    assert torch.equal(out, torch.zeros(1)), out  # restored after the last timed run
    run(t.decisions[(torch.float32, 1000)])
    torch.testing.assert_close(out, x.sum().reshape(1), atol=1e-4, rtol=1e-5)
    print("tuning restored")


if sys.argv[1:] == ["tuning"]:
    tuning()
    raise SystemExit(0)

bad = []
for name, case in register_published("t_pubinterp").items():
    for shape in case.shapes:
        for dtype in case.dtypes:
            args = case.inputs(shape, dtype, torch.device("cpu"))
            got, want = case.op(*args), case.reference(*args)
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
            for g, w in zip(got, want, strict=True):
                if not torch.allclose(g.float(), w.float(), **case.tolerance(dtype) or {"atol": 1e-5, "rtol": 1e-4}):
                    bad.append(f"{name} {shape} {dtype}: max diff {(g.float() - w.float()).abs().max().item()}")
print("\n".join(bad) or "all ok")
raise SystemExit(1 if bad else 0)
