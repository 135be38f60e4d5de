"""Published kernels benchmark (issue: Published kernels, unchanged), side by side in one run, medians.

An ``@triton.autotune`` matmul written in the official tutorial's style (``catalog/kernels/published_triton.py``),
registered unchanged (``catalog/published.py``):

1. per shape, the config opsmith's tuner chose vs the best found by timing every config of the decorator by
   hand with ``triton.testing.do_bench`` (same op, decision forced), as a ratio (target <= 1.05);
2. the op's time next to Triton's own launch of the same decorated kernel (its autotuner, tuned on the
   same shape first) and torch.matmul (cuBLAS);
3. a second process: tuning runs made (target 0).

    python benchmarks/bench_published.py [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
from triton.testing import do_bench

from examples.catalog.kernels.published_triton import matmul_kernel
from examples.catalog.published import register_published

SHAPES = [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 1024, 4096)]


def tuned_vs_best(op, a: torch.Tensor, b: torch.Tensor) -> dict:
    op(a, b)  # tunes this key
    torch.cuda.synchronize()
    key = (a.dtype, b.dtype, a.shape[0], b.shape[1], a.shape[1])
    chosen = op.tuner.decisions[key]
    times = {}
    for c in range(len(op.record.configs)):
        op.tuner.decisions[key] = c
        times[c] = do_bench(lambda: op(a, b), warmup=25, rep=100, return_mode="median")
    op.tuner.decisions[key] = chosen
    best = min(times, key=times.__getitem__)
    return {"shape": [a.shape[0], a.shape[1], b.shape[1]], "chosen": chosen, "chosen_ms": times[chosen],
            "best": best, "best_ms": times[best], "ratio": times[chosen] / times[best],
            "config": op.record.configs[chosen]}  # fmt: skip


def side_by_side(op, a: torch.Tensor, b: torch.Tensor) -> dict:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)

    def triton_autotuned():
        grid = lambda meta: (triton_cdiv(m, meta["BLOCK_SIZE_M"]) * triton_cdiv(n, meta["BLOCK_SIZE_N"]),)  # noqa: E731
        matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                            c.stride(1), ACTIVATION="")  # fmt: skip

    triton_autotuned()  # Triton's own autotuner tunes this shape
    torch.testing.assert_close(c, a @ b, atol=2e-2, rtol=2e-2)
    return {name: do_bench(f, warmup=25, rep=100, return_mode="median")
            for name, f in (("opsmith", lambda: op(a, b)), ("triton autotune", triton_autotuned),
                            ("torch.matmul", lambda: a @ b))}  # fmt: skip


def triton_cdiv(x: int, y: int) -> int:
    return -(-x // y)


def second_process() -> dict:
    code = (
        "import torch, json\n"
        "from examples.catalog.published import register_published\n"
        "op = register_published('bench_pub')['matmul'].op\n"
        "a = torch.randn(1024, 1024, device='cuda', dtype=torch.float16)\n"
        "b = torch.randn(1024, 1024, device='cuda', dtype=torch.float16)\n"
        "op(a, b)\n"
        "print(json.dumps({'tuned_keys': op.tuner.tuned_keys, 'trial_runs': op.tuner.trial_runs}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    if proc.returncode:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    os.environ.setdefault("OPSMITH_CACHE_DIR", tempfile.mkdtemp(prefix="opsmith-bench-pub-"))
    torch.manual_seed(0)
    op = register_published("bench_pub")["matmul"].op
    res: dict = {"device": torch.cuda.get_device_name(), "tuned": [], "side_by_side": []}
    for m, k, n in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        torch.testing.assert_close(op(a, b), a @ b, atol=2e-2, rtol=2e-2)
        res["tuned"].append(tuned_vs_best(op, a, b))
        res["side_by_side"].append({"shape": [m, k, n], **side_by_side(op, a, b)})
    res["second_process"] = second_process()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    print(f"== published matmul benchmark on {res['device']} (medians) ==")
    worst = max(r["ratio"] for r in res["tuned"])
    print(
        f"chosen/best worst ratio {worst:.3f} (target <= 1.05): "
        + ", ".join(f"{tuple(r['shape'])}: {r['chosen_ms'] * 1e3:.1f}/{r['best_ms'] * 1e3:.1f}us" for r in res["tuned"])
    )
    for r in res["side_by_side"]:
        print(
            f"{tuple(r['shape'])}: opsmith {r['opsmith'] * 1e3:.1f}us, triton autotune "
            f"{r['triton autotune'] * 1e3:.1f}us, torch.matmul {r['torch.matmul'] * 1e3:.1f}us"
        )
    print(f"second process: {res['second_process']} (target: 0 tuned keys, 0 trial runs)")


if __name__ == "__main__":
    main()
