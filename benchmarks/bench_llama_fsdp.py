"""The Llama of benchmarks/bench_llama.py trained with FSDP2 on several GPUs of one host (issue: Fast under
torch.compile, item 5), every variant in its own ``torchrun``, side by side with one-GPU eager.

Each GPU trains bench_llama's model (same config, seed and kernels per variant) on its own ``--batch`` rows of
the global batch: ``fully_shard`` on every decoder layer and on the model (parameters, gradients and AdamW state
sharded; gradients averaged). A ``-compile`` variant compiles each decoder layer, then shards it, as torchtitan
does: FSDP2's hooks stay outside the compiled code, which is the layer alone (``fullgraph=True`` for opsmith's,
whose layer must compile whole). The head and loss run eagerly in every variant.

    hf, hf-compile, liger, liger-compile, opsmith, opsmith-compile (bench_llama.py says what each is)

Per variant: tokens per second per GPU (median over the timed steps on rank 0; every step ends in collectives, so
the ranks keep pace), peak memory on rank 0, and every step's loss (the mean over the ranks) against one-GPU
eager: Hugging Face eager on one GPU over the whole global batch (the same tokens and, with averaged gradients,
the same updates; agreement: within 2% at every step). A device-to-device copy on rank 0 measures the GPU's
bandwidth in the same run, so a throttled device shows.

    python benchmarks/bench_llama_fsdp.py [--gpus 2] [--variants hf-compile,opsmith-compile] [--steps 10]
        [--warmup 3] [--small] [--out fsdp.json]

NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 are set
for every process unless already set): the shared machines this was measured on require it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_llama import LOSS_RTOL, build, config, copy_bandwidth, timed_steps
from benchmarks.step_profile import profile_steps

VARIANTS = ["hf", "hf-compile", "liger", "opsmith", "opsmith-compile"]
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def shard(model: torch.nn.Module, compiled: bool, fullgraph: bool) -> None:
    """FSDP2 over ``model``: each decoder layer (compiled first when ``compiled``), then the rest."""
    from torch.distributed.fsdp import fully_shard

    layers = model.model.layers
    for i, layer in enumerate(list(layers)):
        if compiled:  # torchtitan's order: the compiled layer is what FSDP2 wraps, its hooks outside the graph
            layer = torch.compile(layer, fullgraph=fullgraph)
            layers.register_module(str(i), layer)
        fully_shard(layer)
    fully_shard(model)


def batches(c: dict, steps: int, rows: slice) -> list[torch.Tensor]:
    """Every step's global batch (``c["global_batch"]`` rows, one seed), this process's ``rows`` of each."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    return [torch.randint(0, c["vocab"], (c["global_batch"], c["seq"]), device="cuda", generator=gen)[rows]
            for _ in range(steps)]  # fmt: skip


def train(model: torch.nn.Module, loss_of: object, data: list[torch.Tensor], warmup: int) -> tuple[list, list, dict]:
    """(losses, ms per timed step, notes): AdamW steps over ``data``, the first ``warmup`` untimed (bench_llama's
    steps); the notes hold the step profile (bench_llama's: kernel groups, copies, the GPU's wait) of this process."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    losses, step_ms, notes = timed_steps(loss_of, opt, data, warmup, _opsmith_ops())
    notes["profile"] = profile_steps(loss_of, opt, data[0], statistics.median(step_ms))  # every rank: collectives
    return losses, step_ms, notes


def _opsmith_ops() -> bool:
    """Whether this process registered opsmith ops (its timed steps then wait for their native libraries)."""
    if "opsmith" not in sys.modules:
        return False
    from opsmith.torchlib.registration import registered_ops

    return bool(registered_ops())


def run_rank(variant: str, c: dict, steps: int, warmup: int) -> dict | None:
    """This torchrun process's part of ``variant``; rank 0 returns the result, the others None."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    try:
        model, loss_of = build(variant, c)
        compiled = variant.endswith("-compile")
        shard(model, compiled, fullgraph=compiled and variant.startswith("opsmith"))
        data = batches(c, warmup + steps, slice(rank * c["batch"], (rank + 1) * c["batch"]))
        losses, step_ms, notes = train(model, loss_of, data, warmup)
        mean = torch.stack(losses).float()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)  # the global batch's loss: equal tokens on every rank
        peak = torch.cuda.max_memory_allocated() / 2**30
        tokens = c["batch"] * c["seq"]
        out = {"variant": variant, "gpus": world, "losses": mean.tolist(), "step_ms": step_ms,
               "tokens_per_s_per_gpu": tokens / (statistics.median(step_ms) * 1e-3), "peak_gib": peak, **notes}  # fmt: skip
        if rank == 0:
            out["copy_gbs"] = copy_bandwidth()
        dist.barrier()
        return out if rank == 0 else None
    finally:
        dist.destroy_process_group()


def run_single(c: dict, steps: int, warmup: int) -> dict:
    """Hugging Face eager on one GPU over the whole global batch: the losses the sharded runs should reproduce."""
    model, loss_of = build("hf", {**c, "batch": c["global_batch"]})
    losses, step_ms, notes = train(model, loss_of, batches(c, warmup + steps, slice(None)), warmup)
    tokens = c["global_batch"] * c["seq"]
    return {"variant": "hf, 1 GPU", "gpus": 1, "losses": [float(x) for x in losses], "step_ms": step_ms,
            "tokens_per_s_per_gpu": tokens / (statistics.median(step_ms) * 1e-3),
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "copy_gbs": copy_bandwidth(), **notes}  # fmt: skip


def launch(args: list[str], gpus: int | None) -> tuple[dict | None, str]:
    """Run this script as a child (under torchrun when ``gpus``); (its RESULT, the error text when none)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    for k, v in NO_MULTICAST.items():
        env.setdefault(k, v)
    head = [sys.executable]
    if gpus:
        head += ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}"]
    proc = subprocess.run([*head, __file__, *args], capture_output=True, text=True, env=env)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        lines = [x for x in (proc.stderr + proc.stdout).strip().splitlines() if x.strip()]
        err = next((x for x in reversed(lines) if "Error" in x), (lines or ["no output"])[-1])
        return None, err[:400] + "\n" + "\n".join(lines[-30:])
    return json.loads(line[len("RESULT ") :]), ""


def deviation(r: dict, base: dict) -> float:
    return max(abs(x - y) / abs(y) for x, y in zip(r["losses"], base["losses"], strict=True))


def report(results: list[dict], c: dict, steps: int, device: str) -> str:
    """The table, then the issue's FSDP2 target on the SUMMARY line."""
    base = next((r for r in results if r.get("gpus") == 1 and "losses" in r), None)
    print(f"\n{device}: Llama {c['layers']} layers, hidden {c['hidden']}, seq {c['seq']}, {c['batch']} rows per GPU "
          f"(global batch {c['global_batch']}), bf16, AdamW, FSDP2; {steps} timed steps (median)")  # fmt: skip
    print(f"{'variant':20} {'GPUs':>4} {'tokens/s/GPU':>13} {'peak GiB':>9} {'copy GB/s':>10} {'max loss dev':>13}")
    for r in results:
        if "error" in r:
            print(f"{r['variant']:20} FAILED: {r['error'].splitlines()[0]}")
            continue
        dev = "" if base is None or r is base else f"{deviation(r, base):.2%}"
        print(f"{r['variant']:20} {r['gpus']:>4} {r['tokens_per_s_per_gpu']:>13,.0f} {r['peak_gib']:>9.2f} "
              f"{r.get('copy_gbs', 0):>10,.0f} {dev:>13}")  # fmt: skip
    prof = [(r["variant"], r["profile"]) for r in results if "profile" in r]
    if prof:
        print(
            "\nstep profile on rank 0, ms per step (torch.profiler, 3 steps; comm: NCCL kernels, on their own streams; "
            "waiting = median step - the other kernels: the host, or a collective the compute stream waits for)"
        )
        print(f"{'':16}" + "".join(f"{v[:15]:>16}" for v, _ in prof))
        for g in sorted({g for _, p in prof for g in p["groups"]}):
            print(f"{g:16}" + "".join(f"{p['groups'].get(g, 0.0):16.2f}" for _, p in prof))
        for label, key in (("kernels", "kernels_ms"), ("waiting", "host_wait_ms")):
            print(f"{label:16}" + "".join(f"{p[key]:16.2f}" for _, p in prof))
    ok = {r["variant"]: r for r in results if "losses" in r}
    parts = []
    if "opsmith-compile" in ok and "hf-compile" in ok:
        ratio = ok["opsmith-compile"]["tokens_per_s_per_gpu"] / ok["hf-compile"]["tokens_per_s_per_gpu"]
        parts.append(f"fsdp2 opsmith compiled/hf compiled per GPU {ratio:.3f}x ({'met' if ratio >= 1 else 'MISSED'})")
    if "opsmith" in ok and "liger" in ok:
        parts.append(
            f"fsdp2 eager opsmith/liger {ok['opsmith']['tokens_per_s_per_gpu'] / ok['liger']['tokens_per_s_per_gpu']:.3f}x"
        )
    if base is not None:
        devs = [(deviation(r, base), v) for v, r in ok.items() if r is not base]
        if devs:
            worst = max(devs)
            parts.append(f"losses within {LOSS_RTOL:.0%} of one-GPU eager: {'yes' if worst[0] <= LOSS_RTOL else 'NO'} "
                         f"(worst {worst[0]:.2%}, {worst[1]})")  # fmt: skip
    return "SUMMARY " + "; ".join(parts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=None, help="rows per GPU (default: bench_llama's batch)")
    p.add_argument("--small", action="store_true")
    p.add_argument("--out", default=None)
    p.add_argument("--rank-of", default=None, help=argparse.SUPPRESS)  # a torchrun child: this variant
    p.add_argument("--single", action="store_true", help=argparse.SUPPRESS)  # the one-GPU child
    a = p.parse_args()
    c = config(a.small)
    c["batch"] = a.batch or c["batch"]
    c["global_batch"] = c["batch"] * a.gpus
    if a.rank_of or a.single:
        r = run_rank(a.rank_of, c, a.steps, a.warmup) if a.rank_of else run_single(c, a.steps, a.warmup)
        if r is not None:
            print("RESULT " + json.dumps(r), flush=True)
        return
    common = ["--gpus", str(a.gpus), "--steps", str(a.steps), "--warmup", str(a.warmup), "--batch", str(c["batch"])]
    common += ["--small"] if a.small else []
    results = []
    for v in ["single", *a.variants.split(",")]:
        t = time.perf_counter()
        r, err = launch(["--single", *common] if v == "single" else ["--rank-of", v, *common],
                        None if v == "single" else a.gpus)  # fmt: skip
        if r is None:
            r = {"variant": v, "error": err}
            print(f"{v}: FAILED {err}", flush=True)
        else:
            r["wall_s"] = time.perf_counter() - t
            print(f"{r['variant']}: {r['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, peak {r['peak_gib']:.2f} GiB, "
                  f"{r['wall_s']:.0f} s", flush=True)  # fmt: skip
        results.append(r)
        if a.out:  # after every variant: a run stopped by a time limit keeps what it measured
            Path(a.out).write_text(json.dumps({"config": c, "device": torch.cuda.get_device_name(),
                                               "results": results}, indent=1))  # fmt: skip
    print(report(results, c, a.steps, f"{a.gpus} x {torch.cuda.get_device_name()}"))


if __name__ == "__main__":
    main()
