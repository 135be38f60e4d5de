"""Where a training step's GPU time goes, per variant of benchmarks/bench_llama.py, side by side: the CUDA kernels
grouped by what they are (GEMMs, attention, Liger's kernels, Inductor's generated kernels, copies, the optimizer,
other ATen kernels), in ms per step, from torch.profiler over 3 steps after 4 warm-up steps; then each variant's
step time (CUDA events, unprofiled) against the sum of its kernels (the rest is the GPU waiting on the host), and
its heaviest kernels.

    python benchmarks/probes/llama_step_profile.py opsmith opsmith-compile hf-compile [--small] [--json out.json]
    python benchmarks/probes/llama_step_profile.py --table out.json   # the table of a saved run
"""

from __future__ import annotations

import json
import sys

import torch

sys.path.insert(0, ".")
from benchmarks.bench_core import device_time
from benchmarks.bench_llama import build, config
from benchmarks.step_profile import group, kernel_times


def profile(variant: str, small: bool, steps: int = 3) -> dict:
    c = config(small)
    model, loss_of = build(variant, c)
    if variant.endswith("-compile"):
        loss_of = torch.compile(loss_of, fullgraph=variant.startswith("opsmith"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device="cuda")

    def step() -> None:
        loss_of(ids, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(4):
        step()
    if variant.startswith("opsmith"):
        from opsmith import native

        native.wait(600)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step_ms = device_time(step, warmup=0, reps=5)  # median of 5 steps, CUDA events
    peak = torch.cuda.max_memory_allocated() / 2**30
    kernels = kernel_times(step, steps)
    groups: dict[str, float] = {}
    for name, (ms, _) in kernels.items():
        groups[group(name)] = groups.get(group(name), 0.0) + ms
    return {"step_ms": step_ms, "peak_gib": peak, "kernels": kernels, "groups": groups, "steps": steps}


def main() -> None:
    small = "--small" in sys.argv
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    variants = [a for a in sys.argv[1:] if not a.startswith("--") and a != out]
    res = {}
    for v in variants:
        torch._dynamo.reset()
        res[v] = profile(v, small)
        torch.cuda.empty_cache()
        r = res[v]
        if v.startswith("opsmith") and v.endswith("-compile"):
            from opsmith.flavors.triton_traced import _WHOLE

            print(f"kept whole under compile: {_WHOLE}")
        print(
            f"\n== {v}: {r['step_ms']:.1f} ms a step (CUDA events), kernels {sum(r['groups'].values()):.1f} ms, "
            f"peak {r['peak_gib']:.2f} GiB"
        )
        top = sorted(r["kernels"].items(), key=lambda kv: -kv[1][0])[:14]
        for name, (ms, n) in top:
            print(f"  {ms:7.2f} ms {n // r['steps']:5d}x  [{group(name)}] {name[:110]}")
    table(res, torch.cuda.get_device_name())
    if out:
        with open(out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "variants": res}, f, indent=1)


def table(res: dict, device: str) -> None:
    """The kernel groups side by side (groups recomputed from the kernels, so a saved run can be re-read)."""
    variants = list(res)
    for r in res.values():
        r["groups"] = {}
        for name, (ms, _) in r["kernels"].items():
            r["groups"][group(name)] = r["groups"].get(group(name), 0.0) + ms
    names = sorted({g for r in res.values() for g in r["groups"]})
    print(f"\n{device}: ms per step by kernel group")
    print(f"{'group':12}" + "".join(f"{v:>18}" for v in variants))
    for g in [*names, "kernels", "step", "host-bound"]:
        row = []
        for v in variants:
            r = res[v]
            total = sum(r["groups"].values())
            val = {"kernels": total, "step": r["step_ms"], "host-bound": r["step_ms"] - total}.get(g)
            row.append(r["groups"].get(g, 0.0) if val is None else val)
        print(f"{g:12}" + "".join(f"{x:18.2f}" for x in row))


if __name__ == "__main__":
    if "--table" in sys.argv:  # re-read a saved run: --table run.json
        with open(sys.argv[sys.argv.index("--table") + 1]) as f:
            saved = json.load(f)
        table(saved["variants"], saved["device"])
    else:
        main()
