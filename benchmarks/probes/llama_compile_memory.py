"""Where the compiled opsmith Llama's extra peak memory comes from (benchmarks/bench_llama.py: 22.2 GiB compiled
against 12.6 eager, H200): the peak of a training step with the whole forward and loss compiled, with only the
decoder (model.model) compiled and the fused linear cross-entropy eager, and with nothing compiled.

    python benchmarks/probes/llama_compile_memory.py [opsmith|hf]
"""

from __future__ import annotations

import gc
import sys

import torch

sys.path.insert(0, ".")
from benchmarks.bench_llama import build, config


def peak(variant: str, mode: str) -> float:
    c = config(False)
    model, loss_of = build(variant, c)
    if mode == "whole":
        loss_of = torch.compile(loss_of)
    elif mode == "decoder":
        model.model = torch.compile(model.model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device="cuda")
    for k in range(4):
        if k == 2:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        loss_of(ids, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    out = torch.cuda.max_memory_allocated() / 2**30
    del model, loss_of, opt
    gc.collect()
    torch.cuda.empty_cache()
    torch._dynamo.reset()
    return out


if __name__ == "__main__":
    for v in sys.argv[1:] or ["opsmith"]:
        for mode in ("eager", "decoder", "whole"):
            print(f"{v} {mode}: peak {peak(v, mode):.1f} GiB", flush=True)
