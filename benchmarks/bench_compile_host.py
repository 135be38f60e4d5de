"""Host time per call of an opsmith op inside a compiled function (issue: Fast under torch.compile, item 2): the op
handed to Inductor (its Triton kernel launched from Inductor's generated code) against the op kept whole (an
opaque call through the dispatcher, served by the op's native library), side by side in one process, medians of
interleaved rounds.

Each compiled function calls the op ``K`` times on distinct small inputs (so the function's own cost, its guards
and wrapper, is shared by K calls) and the host time of a call is the function's wall time over K, with the GPU
kept ahead: the kernels are a few microseconds each and the timed loop issues fewer launches than CUDA's queue
holds. The GPU time per call, measured after, shows when a figure is the GPU's instead of the host's (flagged).

Ops: the Llama recipe's RMSNorm (a float ``eps``: through the fp32 entry) and SwiGLU (examples/llama/kernels.py,
Liger-Kernel's Triton kernels), and opsmith's own CUDA C++ RMSNorm (always opaque: Inductor cannot take a CUDA C++
kernel). "kept whole" is torch's switch for triton ops, ``torch._functorch.config.decompose_custom_triton_ops``
(False while the function traces), which opsmith honours as ``torch.library.triton_op`` does; eager is the
op called from Python on its default (native) path.

    python benchmarks/bench_compile_host.py [--rounds 15] [--out bench-results/compile_host.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

K = 16  # op calls per compiled function
CALLS = 20  # function calls per timed round: K * CALLS = 320 launches, under CUDA's ~1,024-entry queue
ROWS, HIDDEN, MLP = 8, 2048, 5632  # a few microseconds of GPU work per call: the host is what is timed
SLEEP_CYCLES = 200_000_000  # ~100 ms at 1.98 GHz: more than a round's 320 calls take the host at 300 us each


def _ops() -> dict[str, tuple[Callable, Callable, list, object]]:
    """{name: (one call of the op on one input set, its plain-torch reference, K input sets, the op whose serving
    counts show what ran)}."""
    import torch.nn.functional as F

    from examples.llama.kernels import _rms_norm_ref, _swiglu_ref, llama_kernels
    from opsmith.ops.rmsnorm import rms_norm, rmsnorm_ops

    ops = llama_kernels("bench_compile_host")
    cuda_fwd, _ = rmsnorm_ops("cuda")
    g = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g)

    w = rand(HIDDEN)
    norm_in = [(rand(ROWS, HIDDEN), w) for _ in range(K)]
    glu_in = [(rand(ROWS, MLP), rand(ROWS, MLP)) for _ in range(K)]
    return {
        "rms_norm (Liger, Triton)": (lambda x, w: ops["rms_norm"](x, w, 1e-6)[0],
                                     lambda x, w: _rms_norm_ref(x, w, 1e-6)[0], norm_in, ops["rms_norm"]),
        "swiglu (Liger, Triton)": (lambda a, b: ops["swiglu"](a, b), _swiglu_ref, glu_in, ops["swiglu"]),
        "rms_norm (opsmith CUDA C++)": (lambda x, w: rms_norm(x, w, 1e-6, impl="cuda"),
                                        lambda x, w: F.rms_norm(x, (HIDDEN,), w, 1e-6), norm_in, cuda_fwd),
    }  # fmt: skip


def _forms(call: Callable, reference: Callable) -> dict[str, Callable]:
    """The op K times per function: eager; compiled with the op handed over; compiled with it kept whole, with
    and without Inductor's size and stride checks of an opaque call's inputs and outputs (``size_asserts``); and
    the op's reference compiled, Inductor's own kernel (the launch an op handed over is held to)."""

    # One function per compiled form, not one compiled several times: Dynamo caches by code object, and the
    # switches below are not guards (only a form's first call traces, under its switch).
    def k_calls(inputs: list) -> list:
        return [call(*args) for args in inputs]

    def k_calls_whole(inputs: list) -> list:
        return [call(*args) for args in inputs]

    def k_calls_unchecked(inputs: list) -> list:
        return [call(*args) for args in inputs]

    def k_refs(inputs: list) -> list:
        return [reference(*args) for args in inputs]

    def switched(fn: Callable, **functorch: bool) -> Callable:
        compiled = torch.compile(fn, fullgraph=True, dynamic=False)
        inductor = {"size_asserts": functorch.pop("size_asserts", True)}

        def run(inputs: list) -> list:
            with torch._functorch.config.patch(**functorch), torch._inductor.config.patch(**inductor):
                return compiled(inputs)

        return run

    return {"eager": k_calls, "handed over": torch.compile(k_calls, fullgraph=True, dynamic=False),
            "kept whole": switched(k_calls_whole, decompose_custom_triton_ops=False),
            "whole, unchecked": switched(k_calls_unchecked, decompose_custom_triton_ops=False, size_asserts=False),
            "Inductor's own": torch.compile(k_refs, fullgraph=True, dynamic=False)}  # fmt: skip


def _host_us(fn: Callable, inputs: list) -> tuple[float, float]:
    """(host us per op call, GPU us per op call) of one round of CALLS calls of ``fn``. The GPU first sleeps
    longer than the host takes to issue the round, so the host never waits for it and the events around the
    round then time the GPU's work alone (without the sleep they would time the host's issue as well)."""
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(SLEEP_CYCLES)
    s.record()
    t = time.perf_counter()
    for _ in range(CALLS):
        fn(inputs)
    host = time.perf_counter() - t
    e.record()
    e.synchronize()
    return host / (CALLS * K) * 1e6, s.elapsed_time(e) * 1e3 / (CALLS * K)


def measure(rounds: int) -> dict:
    from opsmith import native

    rows: dict = {}
    for name, (call, reference, inputs, op) in _ops().items():
        forms = _forms(call, reference)
        for fn in forms.values():  # compile, and the first calls' native builds
            fn(inputs)
        native.wait(600)
        for fn in forms.values():
            fn(inputs)
        before: dict = {f: None for f in forms}
        why: dict = {f: {} for f in forms}  # the Python path's calls of the form's last round, by reason
        times: dict[str, list] = {f: [] for f in forms}
        for _ in range(rounds):  # interleaved: a slow moment of the host hits every form alike
            for f, fn in forms.items():
                c0 = op.serving_counts()
                times[f].append(_host_us(fn, inputs))
                c1 = op.serving_counts()
                before[f] = c1.native - c0.native  # native calls of this form's last round
                why[f] = {k: n - c0.python.get(k, 0) for k, n in c1.python.items() if n > c0.python.get(k, 0)}
        rows[name] = {f: {"host_us": statistics.median(h for h, _ in ts), "gpu_us": statistics.median(g for _, g in ts),
                          "native_calls_per_round": before[f], "python_path": why[f]} for f, ts in times.items()}  # fmt: skip
    return rows


def report(rows: dict, device: str) -> str:
    print(f"\n{device}: host us per op call inside a compiled function ({K} calls each; median of rounds), "
          "GPU us per call beside it")  # fmt: skip
    print(f"{'op':30} {'form':17} {'host us':>8} {'GPU us':>7} {'served natively':>16}")
    parts = []
    for name, forms in rows.items():
        for f, r in forms.items():
            flag = "  (GPU-bound)" if r["gpu_us"] >= 0.9 * r["host_us"] else ""
            native = f"{r['native_calls_per_round']}/{CALLS * K}"
            flag += f"  Python path: {r['python_path']}" if r["python_path"] else ""
            print(f"{name:30} {f:17} {r['host_us']:>8.2f} {r['gpu_us']:>7.2f} {native:>16}{flag}")
        if "Triton" in name:
            ratio = forms["kept whole"]["host_us"] / forms["handed over"]["host_us"]
            parts.append(f"{name.split()[0]} kept whole/handed over {ratio:.2f}x")
        if "Inductor's own" in forms:
            own = forms["Inductor's own"]["host_us"]
            parts.append(f"{name.split()[0]}{' (CUDA C++)' if 'CUDA' in name else ''} handed over/whole/Inductor's own "
                         f"{forms['handed over']['host_us'] / own:.2f}x/{forms['kept whole']['host_us'] / own:.2f}x")  # fmt: skip
    cuda = rows.get("rms_norm (opsmith CUDA C++)")
    triton = rows.get("rms_norm (Liger, Triton)")
    if cuda and triton:
        ratio = cuda["kept whole"]["host_us"] / triton["handed over"]["host_us"]
        parts.append(f"CUDA C++ rms_norm (opaque)/Liger's handed over {ratio:.2f}x")
    return "SUMMARY " + "; ".join(parts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    rows = measure(a.rounds)
    device = torch.cuda.get_device_name()
    if a.out:
        Path(a.out).write_text(json.dumps({"device": device, "k": K, "calls": CALLS, "rows": rows}, indent=1))
    print(report(rows, device))


if __name__ == "__main__":
    main()
