"""Where a training step's peak memory is reached, per variant of benchmarks/bench_llama.py: the peak allocated
within the forward (and loss), the backward and the optimizer step of one step after 3 warm-up steps, what is
allocated after each, and the largest blocks alive at the step's overall peak (torch.cuda.memory snapshot).

    python benchmarks/probes/llama_memory_phases.py liger opsmith [--small]
"""

from __future__ import annotations

import sys

import torch

sys.path.insert(0, ".")
from benchmarks.bench_llama import build, config

GIB = 2**30


def phases(variant: str, small: bool) -> dict:
    c = config(small)
    model, loss_of = build(variant, c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device="cuda")
    for _ in range(3):
        loss_of(ids, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if variant.startswith("opsmith"):
        from opsmith import native

        native.wait(600)
    torch.cuda.synchronize()
    out = {"start": torch.cuda.memory_allocated() / GIB}
    torch.cuda.reset_peak_memory_stats()
    loss = loss_of(ids, ids)
    torch.cuda.synchronize()
    out["forward peak"], out["after forward"] = (
        torch.cuda.max_memory_allocated() / GIB,
        torch.cuda.memory_allocated() / GIB,
    )
    torch.cuda.reset_peak_memory_stats()
    loss.backward()
    torch.cuda.synchronize()
    out["backward peak"] = torch.cuda.max_memory_allocated() / GIB
    out["after backward"] = torch.cuda.memory_allocated() / GIB
    torch.cuda.reset_peak_memory_stats()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    out["optimizer peak"], out["end"] = torch.cuda.max_memory_allocated() / GIB, torch.cuda.memory_allocated() / GIB
    return out


def main() -> None:
    small = "--small" in sys.argv
    variants = [a for a in sys.argv[1:] if not a.startswith("--")]
    res = {}
    for v in variants:
        res[v] = phases(v, small)
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    print(f"\n{torch.cuda.get_device_name()}: GiB allocated, one training step")
    print(f"{'':16}" + "".join(f"{v:>14}" for v in variants) + ("" if len(variants) != 2 else f"{'MiB diff':>14}"))
    for k in res[variants[0]]:
        row = [res[v][k] for v in variants]
        diff = "" if len(row) != 2 else f"{(row[1] - row[0]) * 1024:14.1f}"
        print(f"{k:16}" + "".join(f"{x:14.3f}" for x in row) + diff)


if __name__ == "__main__":
    main()
