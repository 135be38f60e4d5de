"""The LM head's GEMMs of benchmarks/bench_llama.py's step, whole (as Hugging Face compiled runs them) against in
the fused linear cross-entropy's chunks (examples/llama/model.py: per chunk the logits, the chunk's grad_x and the
accumulation into grad_w), ms per step on this GPU, with the peak memory each way. It measures the "gemm" row of
the step profile's difference between opsmith compiled and Hugging Face compiled.

    python benchmarks/probes/flce_chunk_gemms.py [--rows 8192] [--hidden 2048] [--vocab 32000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.bench_core import device_time
from examples.llama.model import flce_chunk


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=32000)
    a = p.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(a.rows, a.hidden, device="cuda", generator=g).bfloat16()
    w = (torch.randn(a.vocab, a.hidden, device="cuda", generator=g) * 0.02).bfloat16()
    grad_x, grad_w = torch.empty_like(x), torch.empty_like(w)

    def whole() -> None:
        logits = x @ w.t()
        torch.mm(logits, w, out=grad_x)
        torch.mm(logits.t(), x, out=grad_w)

    def chunked(chunk: int) -> None:
        for start in range(0, a.rows, chunk):
            xc = x[start : start + chunk]
            logits = xc @ w.t()
            torch.mm(logits, w, out=grad_x[start : start + chunk])
            if start:
                grad_w.addmm_(logits.t(), xc)
            else:
                torch.mm(logits.t(), xc, out=grad_w)

    liger = flce_chunk(a.rows, a.hidden, a.vocab)
    flop = 3 * 2 * a.rows * a.hidden * a.vocab
    print(
        f"{torch.cuda.get_device_name()}: LM head GEMMs, {a.rows} rows, hidden {a.hidden}, vocabulary {a.vocab}, bf16"
    )
    print(f"{'way':28} {'ms':>8} {'TFLOP/s':>8} {'peak MiB over inputs':>21}")
    ways = [("whole (3 GEMMs)", whole)] + [
        (f"chunks of {c}{' (Liger)' if c == liger else ''} ({a.rows // c}x3)", lambda c=c: chunked(c))
        for c in sorted({liger, 1024, 2048, 4096} - {a.rows})
        if c <= a.rows
    ]
    for label, fn in ways:
        fn()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        ms = device_time(fn, warmup=5, reps=30)
        extra = (torch.cuda.max_memory_allocated() - base) / 2**20
        print(f"{label:28} {ms:8.3f} {flop / ms / 1e9:8.0f} {extra:21.0f}")


if __name__ == "__main__":
    main()
