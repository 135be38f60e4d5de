"""Tuning benchmarks (issue: Triton + autotuning), side by side in one run, medians.

1. For an autotuned CUDA C++ row softmax and an autotuned Triton row softmax over several shapes: the
   config the tuner chose vs the best config found by timing every config by hand with
   ``triton.testing.do_bench`` (same op, decision forced; median), as a ratio (target <= 1.05).
2. Host time per eager call of a small Triton op (relu, 1,024 floats): opsmith vs torch.relu vs Triton's
   own JIT launch of the same kernel.
3. A second process: tuning runs made (target 0) and how long registering + the first call take, next
   to Triton's own load of the same compiled kernel.

    python benchmarks/bench_tuning.py [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_core import host_time
from triton.testing import do_bench

from examples.catalog.kernels.triton_kernels import relu_kernel
from examples.catalog.tuned import register_tuned

SHAPES = [(8192, 128), (4096, 1000), (2048, 4096), (512, 16384), (128, 65536)]


def tuned_vs_best(op, x: torch.Tensor) -> dict:
    op(x)  # tunes this key
    torch.cuda.synchronize()
    (key,) = [k for k in op.tuner.decisions if k[-1] == 1 << (x.shape[-1] - 1).bit_length() and k[0] == x.dtype]
    chosen = op.tuner.decisions[key]
    times = {}
    for c in range(len(op.record.configs)):
        op.tuner.decisions[key] = c
        times[c] = do_bench(lambda: op(x), warmup=25, rep=100, return_mode="median")
    op.tuner.decisions[key] = chosen
    best = min(times, key=times.__getitem__)
    return {"shape": list(x.shape), "chosen": chosen, "chosen_ms": times[chosen], "best": best,
            "best_ms": times[best], "ratio": times[chosen] / times[best],
            "config": op.record.configs[chosen]["params"], "num_warps": op.record.configs[chosen]["num_warps"]}  # fmt: skip


def second_process(cache: str, block: int, warps: int) -> dict:
    """Fresh processes with warm caches: (A) Triton alone launches the softmax kernel for the first time
    (Triton's own kernel load: its cache key, reading the cubin, loading the module); (B) opsmith
    registers the same kernel as a tuned op and makes its first call. B - A is opsmith's cost. (The
    CUDA C++ second-process figure is bench_core's warm registration.)"""
    shape = SHAPES[1]
    triton_alone = textwrap.dedent(f"""
        import json, time, torch
        torch.empty(1, device="cuda"); torch.cuda.synchronize()
        t = time.perf_counter()
        from examples.catalog.kernels.triton_kernels import softmax_kernel
        x = torch.randn({shape!r}, device="cuda"); y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, x.shape[1], y, BLOCK={block}, num_warps={warps}); torch.cuda.synchronize()
        print(json.dumps({{"triton_first_launch_ms": (time.perf_counter() - t) * 1e3}}))
    """)
    with_opsmith = textwrap.dedent(f"""
        import json, time, torch
        torch.empty(1, device="cuda"); torch.cuda.synchronize()
        t0 = time.perf_counter()
        from examples.catalog.tuned import register_tuned
        ex = register_tuned("bench_tuning", only=("softmax_tt",))
        out = {{"register_ms": (time.perf_counter() - t0) * 1e3, "ops": {{}}}}
        for n in ("softmax_tt",):
            x = torch.randn({shape!r}, device="cuda")
            t = time.perf_counter()
            ex[n].op(x); torch.cuda.synchronize()
            out["ops"][n] = {{"first_call_ms": (time.perf_counter() - t) * 1e3,
                              "tuning_runs": ex[n].op.tuner.trial_runs}}
        out["ready_ms"] = (time.perf_counter() - t0) * 1e3
        print(json.dumps(out))
    """)
    env = dict(os.environ, OPSMITH_CACHE_DIR=cache)

    def one(code: str) -> dict:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])

    one(triton_alone)  # fills Triton's cache for this exact launch if needed
    # Process start costs swing by ~100-200 ms between runs (the page cache, the host): alternate A and B
    # seven times and take medians.
    a, b = [], []
    for _ in range(7):
        a.append(one(triton_alone))
        b.append(one(with_opsmith))
    med = statistics.median
    return {"triton_first_launch_ms": med(r["triton_first_launch_ms"] for r in a),
            "register_ms": med(r["register_ms"] for r in b), "ready_ms": med(r["ready_ms"] for r in b),
            "ops": {"softmax_tt": {"first_call_ms": med(r["ops"]["softmax_tt"]["first_call_ms"] for r in b),
                                   "tuning_runs": max(r["ops"]["softmax_tt"]["tuning_runs"] for r in b)}},
            "runs": {"triton_alone": a, "with_opsmith": b}}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.manual_seed(0)
    ex = register_tuned("bench_tuning")
    res: dict = {"device": torch.cuda.get_device_name(), "tuned": {}}
    for name in ("softmax_tuned", "softmax_tt"):
        res["tuned"][name] = [tuned_vs_best(ex[name].op, torch.randn(s, device="cuda")) for s in SHAPES]
    x = torch.randn(1024, device="cuda")
    op = ex["relu_tt"].op
    y = torch.empty_like(x)

    def triton_jit(x):
        relu_kernel[(1,)](x, x.numel(), y)

    res["host_us"] = host_time(
        {"torch.relu": torch.relu, "opsmith triton relu": op, "triton jit launch": triton_jit}, x
    )
    sm = ex["softmax_tt"].op
    chosen = sm.record.configs[sm.tuner.decisions[(torch.float32, 1024)]]
    res["second_process"] = second_process(os.environ["OPSMITH_CACHE_DIR"], chosen["params"]["BLOCK"],
                                           chosen["num_warps"])  # fmt: skip
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    print(f"== tuning benchmark on {res['device']} ==")
    for name, rows in res["tuned"].items():
        worst = max(r["ratio"] for r in rows)
        desc = ", ".join(f"{tuple(r['shape'])}: {r['chosen_ms'] * 1e3:.1f}/{r['best_ms'] * 1e3:.1f}us" for r in rows)
        print(f"{name}: chosen/best worst ratio {worst:.3f} (target <= 1.05); chosen/best: {desc}")
    h = res["host_us"]
    print(f"host us/call 1024 floats: torch.relu {h['torch.relu']:.2f}, opsmith triton relu "
          f"{h['opsmith triton relu']:.2f} ({h['opsmith triton relu'] / h['torch.relu']:.2f}x, target <= 1.5x), "
          f"triton jit launch {h['triton jit launch']:.2f}")  # fmt: skip
    sp = res["second_process"]
    ops = "; ".join(f"{n}: {o['tuning_runs']} tuning runs, first call {o['first_call_ms']:.1f} ms"
                    for n, o in sp["ops"].items())  # fmt: skip
    print(f"second process (medians of 7 alternating runs): register the Triton softmax op {sp['register_ms']:.1f} ms; {ops}; ready after "
          f"{sp['ready_ms']:.1f} ms vs Triton alone loading the same kernel {sp['triton_first_launch_ms']:.1f} ms "
          f"-> {sp['ready_ms'] - sp['triton_first_launch_ms']:.1f} ms beyond Triton's own load (target <= 20 ms)")  # fmt: skip


if __name__ == "__main__":
    main()
