"""Host time per call on the default path (issue 26, item 5), side by side in one run, medians of
interleaved rounds:

- default: the op as registered, after ``opsmith.native.wait()`` (the native library built in the background);
- python: the same op registered with ``OPSMITH_NATIVE=off`` (the Python path);
- native: registered off, then ``opsmith.native.use`` (the explicit build of issue 22);
- aten: ``torch.relu`` / ``torch.nn.functional.rms_norm``.

Ops: relu on 1,024 floats in CUDA C++ and in Triton; RMSNorm (64, 4096) bf16 forward and forward+backward
(CUDA C++ and Triton kernels). A CuTe DSL op cannot be native (its launch is the DSL's host code), so its
default path is its Python path; it joins when CuTe DSL is importable. Then the backward at (8, 4096, 4096)
bf16 (item 2): forward+backward per step on each path, the Python path's backward on autograd's worker
thread and on the calling thread.

    python benchmarks/bench_host.py [--out bench-results/host.json] [--rounds 30]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F

import opsmith as ok
from examples.catalog.basic import RELU
from opsmith import native
from opsmith.ops.rmsnorm import rmsnorm_ops

EPS = 1e-6


@contextlib.contextmanager
def _native_mode(mode: str) -> Iterator[None]:
    old = os.environ.get("OPSMITH_NATIVE")
    os.environ["OPSMITH_NATIVE"] = mode
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("OPSMITH_NATIVE", None)
        else:
            os.environ["OPSMITH_NATIVE"] = old


def _relus(ns: str) -> dict:
    from examples.catalog.kernels import triton_kernels as tk

    ops = {"relu (CUDA C++)": ok.cuda_kernel_op(f"{ns}::relu", ok.KernelSpec(
        kernel_source=RELU, kernel_name="my_relu", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))], extras=[ok.Numel("x")],
        geometry=ok.Elementwise(block=(256,), layout="flat")))}  # fmt: skip
    ops["relu (Triton)"] = ok.triton_op(f"{ns}::relu_tt", tk.relu_kernel, inputs=[ok.InputDecl("x")],
                                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                                        geometry=ok.Elementwise(block=("BLOCK",)))  # fmt: skip
    return ops


def _paths() -> tuple[dict, dict, float]:
    """{path: {op name: op}} for default, python and native; and the seconds from the default path's first
    registration until ``wait()`` returned."""
    t0 = time.perf_counter()
    default = _relus("hdef")
    for impl in ("cuda", "triton"):
        default[f"rmsnorm {impl}"] = rmsnorm_ops(impl, "hdef")[0]
    with _native_mode("off"):
        python = _relus("hpy")
        explicit = _relus("hnat")
        for impl in ("cuda", "triton"):
            python[f"rmsnorm {impl}"] = rmsnorm_ops(impl, "hpy")[0]
            explicit[f"rmsnorm {impl}"] = rmsnorm_ops(impl, "hnat")[0]
    x = torch.randn(1024, device="cuda")
    h = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    hg, wg = h.clone().requires_grad_(), w.clone().requires_grad_()
    for ops in (default, python, explicit):  # the kernels each path needs, compiled (a library embeds them)
        for name, op in ops.items():
            if name.startswith("rmsnorm"):
                op(hg, wg, EPS).backward(torch.randn_like(h))  # the backward ops' kernels too
            else:
                op(x)
    native.use(list(explicit.values()))
    assert native.wait(900), "the default path's library did not finish in 900 s"
    waited = time.perf_counter() - t0
    return (
        {"default": default, "python": python, "native": explicit},
        {n: (op.serving, op.serving_why) for n, op in default.items()},
        waited,
    )


def _rounds(fns: dict[str, Callable[[], object]], calls: int, rounds: int) -> dict[str, list[float]]:
    """Mean microseconds per call in each round; the candidates alternate round by round."""
    for f in fns.values():
        for _ in range(200):
            f()
    torch.cuda.synchronize()
    res: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(calls):
                f()
            torch.cuda.synchronize()
            res[k].append((time.perf_counter() - t) / calls * 1e6)
    return res


def _fwd_bwd(fwd: Callable, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        fwd(x, w).backward(dy)

    return step


def host_table(paths: dict, rounds: int) -> dict:
    x = torch.randn(1024, device="cuda")
    h = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    hg = h.clone().requires_grad_()
    wg = w.clone().requires_grad_()
    dy = torch.randn_like(h)
    rows: dict[str, dict[str, Callable]] = {
        "relu (CUDA C++), 1,024 floats": {"aten": lambda: torch.relu(x)},
        "relu (Triton), 1,024 floats": {"aten": lambda: torch.relu(x)},
    }
    for impl in ("cuda", "triton"):
        rows[f"rmsnorm {impl} forward (64, 4096) bf16"] = {"aten": lambda: F.rms_norm(h, (4096,), w, EPS)}
        rows[f"rmsnorm {impl} forward+backward (64, 4096) bf16"] = {
            "aten": _fwd_bwd(lambda a, b: F.rms_norm(a, (4096,), b, EPS), hg, wg, dy)
        }
    for path, ops in paths.items():
        rows["relu (CUDA C++), 1,024 floats"][path] = lambda op=ops["relu (CUDA C++)"]: op(x)
        rows["relu (Triton), 1,024 floats"][path] = lambda op=ops["relu (Triton)"]: op(x)
        for impl in ("cuda", "triton"):
            op = ops[f"rmsnorm {impl}"]
            rows[f"rmsnorm {impl} forward (64, 4096) bf16"][path] = lambda op=op: op(h, w, EPS)
            rows[f"rmsnorm {impl} forward+backward (64, 4096) bf16"][path] = _fwd_bwd(
                lambda a, b, op=op: op(a, b, EPS), hg, wg, dy
            )
    out = {}
    for row, fns in rows.items():
        calls = 100 if "backward" in row else 1000
        res = _rounds(fns, calls, rounds)
        out[row] = {k: {"median_us": statistics.median(v), "quartiles": statistics.quantiles(v)[::2]}
                    for k, v in res.items()}  # fmt: skip
    return out


def backward_table(paths: dict, rounds: int) -> dict:
    """Forward+backward per step at (8, 4096, 4096) bf16, each path, the Python path's backward on autograd's
    worker thread (as always) and on the calling thread."""
    x = torch.randn(8, 4096, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(8, 4096, 4096, device="cuda", dtype=torch.bfloat16)
    fns: dict[str, Callable] = {"aten": _fwd_bwd(lambda a, b: F.rms_norm(a, (4096,), b, EPS), x, w, dy)}
    for impl in ("cuda", "triton"):
        for path, ops in paths.items():
            fns[f"{impl} {path}"] = _fwd_bwd(lambda a, b, op=ops[f"rmsnorm {impl}"]: op(a, b, EPS), x, w, dy)

        def caller(step: Callable = fns[f"{impl} python"]) -> None:
            with torch.autograd.set_multithreading_enabled(False):
                step()

        fns[f"{impl} python, calling thread"] = caller
    res = _rounds(fns, 10, rounds)
    return {k: {"median_us": statistics.median(v), "quartiles": statistics.quantiles(v)[::2]} for k, v in res.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-results/host.json")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    dev = torch.cuda.get_device_name()
    paths, serving, waited = _paths()
    results = {"device": dev, "torch": torch.__version__, "seconds_to_native": waited, "serving": serving,
               "host": host_table(paths, args.rounds), "backward_8x4096x4096": backward_table(paths, args.rounds)}  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(
        f"\n== host time per call on {dev} (torch {torch.__version__}), medians of {args.rounds} interleaved rounds =="
    )
    print(f"registration to native serving (cold cache): {waited:.1f} s; default path: "
          + ", ".join(f"{n}: {s}" for n, (s, _) in serving.items()))  # fmt: skip
    for row, r in results["host"].items():
        a = r["aten"]["median_us"]
        cells = ", ".join(
            f"{k} {v['median_us']:.2f} us ({v['median_us'] / a:.2f}x)" for k, v in r.items() if k != "aten"
        )
        print(f"  {row}: aten {a:.2f} us; {cells}")
    b = results["backward_8x4096x4096"]
    print("forward+backward (8, 4096, 4096) bf16 per step: " + ", ".join(f"{k} {v['median_us']:.1f} us"
                                                                      for k, v in b.items()))  # fmt: skip
    for impl in ("cuda", "triton"):
        print(f"  {impl}: default / native {b[f'{impl} default']['median_us'] / b[f'{impl} native']['median_us']:.3f}; "
              f"python / native {b[f'{impl} python']['median_us'] / b[f'{impl} native']['median_us']:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
