"""Train the opsmith Llama-style stack on several GPUs and check it against a one-GPU run of the same seed.

    torchrun --nproc-per-node 2 -m examples.distributed.train --mode fsdp   # FSDP2 (fully_shard)
    torchrun --nproc-per-node 2 -m examples.distributed.train --mode tp     # tensor + sequence parallel

Every rank first trains the unsharded model alone for ``--steps`` steps (the reference), then the
distributed one from the same initial weights on the same global batches, and compares the losses step by
step (bfloat16 tolerance). FSDP2 splits each global batch across ranks (gradients are averaged); tensor
parallelism gives every rank the whole batch. Blocks are compiled with ``torch.compile(fullgraph=True)``,
after one eager warm-up pass in which opsmith tunes its ops.
Afterwards the ranks compare their SwiGLU tuning decisions: one rank tuned each key, all launch the same
config. Prints one ``RESULT`` line on rank 0; exits 1 when the losses or the decisions disagree.

``--device cpu`` runs on the gloo backend with CPU tensors (Triton's interpreter, ``TRITON_INTERPRET=1``,
no compile): what CI runs on two processes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .model import Config, Transformer, tp_plan
from .ops import swiglu_op

#: Largest relative difference between the distributed and the one-GPU loss at any step: five bfloat16
#: ulps (2^-8 each). Summation order differs (gradients reduced across ranks, sharded matmuls), so bits do.
BF16_RTOL = 5 * 2**-8


def batches(c: Config, n: int, batch: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Sequences of an affine recurrence mod vocab (learnable, so the loss falls): inputs and next tokens."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        start = torch.randint(0, c.vocab, (batch, 1), generator=g)
        steps = torch.arange(c.seq + 1).unsqueeze(0)
        seqs = (start * 7 + steps * 13 + (steps * steps) % 5) % c.vocab
        out.append((seqs[:, :-1].contiguous(), seqs[:, 1:].contiguous()))
    return out


def build(c: Config, device: torch.device, dtype: torch.dtype) -> Transformer:
    torch.manual_seed(1234)
    return Transformer(c).to(device=device, dtype=dtype)


def train(model: torch.nn.Module, data: list, device: torch.device, reduce_loss: bool) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    losses = []
    for tokens, targets in data:
        logits = model(tokens.to(device))
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.to(device).flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.detach()
        if reduce_loss:  # data parallel: each rank's loss is over its part of the batch
            dist.all_reduce(value, op=dist.ReduceOp.AVG)
        losses.append(value.item())
    return losses


def probe_dtensor_inputs(model: Transformer, tokens: torch.Tensor) -> str:
    """One forward with hooks (before compiling): what reaches the first block's RMSNorm and SwiGLU."""
    from torch.distributed.tensor import DTensor

    seen: dict[str, str] = {}

    def describe(t: torch.Tensor) -> str:
        return f"DTensor{tuple(t.placements)}" if isinstance(t, DTensor) else "a plain tensor"

    def note(key: str, t: torch.Tensor) -> None:  # returns None: a hook's return value would replace the tensor
        seen.setdefault(key, describe(t))

    block = model.layers[0]
    hooks = [block.attention_norm.register_forward_pre_hook(lambda m, a: note("rmsnorm x", a[0])),
             block.feed_forward.w1.register_forward_hook(lambda m, a, o: note("swiglu gate", o))]  # fmt: skip
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    return ", ".join(f"{k}: {v}" for k, v in seen.items())


def warm_up(model: torch.nn.Module, tokens: torch.Tensor, targets: torch.Tensor) -> None:
    """One eager forward and backward, gradients dropped: opsmith tunes its ops on real inputs here (one rank
    per key, shared with the others), since a graph being compiled launches what is decided by then."""
    with torch.compiler.set_stance("force_eager"):
        F.cross_entropy(model(tokens).float().flatten(0, 1), targets.flatten()).backward()
    model.zero_grad(set_to_none=True)


def compile_blocks(model: Transformer) -> None:
    for block in model.layers:
        block.compile(fullgraph=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=("fsdp", "tp"), required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=8, help="global batch (sequences)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tiny", action="store_true", help="a small model (CPU runs)")
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args()

    cpu = a.device == "cpu"
    dist.init_process_group("gloo" if cpu else "nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu") if cpu else torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    if not cpu:
        torch.cuda.set_device(device)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (world,))
    c = Config(vocab=128, dim=64, n_layers=2, n_heads=4, hidden=160, seq=32) if a.tiny else Config()
    dtype = torch.float32 if cpu else torch.bfloat16
    compiled = not (a.no_compile or cpu)
    data = batches(c, a.steps, a.batch, seed=7)
    swiglu_op()

    t0 = time.perf_counter()
    ref = build(c, device, dtype)
    if compiled:
        compile_blocks(ref)
    warm_up(ref, data[0][0].to(device), data[0][1].to(device))
    ref_losses = train(ref, data, device, reduce_loss=False)
    t_ref = time.perf_counter() - t0

    model = build(c, device, dtype)
    if a.mode == "fsdp":
        from torch.distributed.fsdp import fully_shard

        if compiled:
            compile_blocks(model)
        for block in model.layers:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        per = a.batch // world
        mine = [(x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]) for x, y in data]
        warm_up(model, mine[0][0].to(device), mine[0][1].to(device))
        t0 = time.perf_counter()
        losses = train(model, mine, device, reduce_loss=True)
    else:
        tp_plan(model, mesh)
        seen = probe_dtensor_inputs(model, data[0][0].to(device))
        if rank == 0:
            print(f"opsmith ops under tensor parallelism see: {seen}")
        if compiled:
            compile_blocks(model)
        warm_up(model, data[0][0].to(device), data[0][1].to(device))
        t0 = time.perf_counter()
        losses = train(model, data, device, reduce_loss=False)
    t_dist = time.perf_counter() - t0

    worst = max(abs(d - r) / abs(r) for d, r in zip(losses, ref_losses, strict=True))
    ok_loss = worst <= BF16_RTOL if dtype == torch.bfloat16 else worst <= 1e-4
    agree, tuned_by, n_keys = _decisions_agree(world)
    if rank == 0:
        for k, (r, d) in enumerate(zip(ref_losses, losses, strict=True)):
            print(f"step {k:2d}  one-GPU {r:.5f}  {a.mode} x{world} {d:.5f}  rel diff {abs(d - r) / abs(r):.2e}")
        print(f"RESULT mode={a.mode} ranks={world} device={torch.cuda.get_device_name(device) if not cpu else 'cpu'} "
              f"dtype={str(dtype).removeprefix('torch.')} compiled={compiled} steps={a.steps} "
              f"loss {ref_losses[0]:.4f}->{ref_losses[-1]:.4f} max_rel_diff={worst:.2e} (tol "
              f"{BF16_RTOL if dtype == torch.bfloat16 else 1e-4:.2e}) losses={'match' if ok_loss else 'DIFFER'} "
              f"tuning={'agree' if agree else 'DISAGREE'} keys={n_keys} keys_tuned_by_rank={tuned_by} "
              f"time ref {t_ref:.1f}s dist {t_dist:.1f}s")  # fmt: skip
    dist.barrier()  # every rank done with the group before any tears it down (gloo aborts otherwise)
    dist.destroy_process_group()
    return 0 if ok_loss and agree else 1


def _decisions_agree(world: int) -> tuple[bool, list[int], int]:
    """Every rank's SwiGLU decisions, gathered: equal everywhere; how many keys each rank tuned itself; how
    many keys were decided (so one tuning per key shows as the per-rank counts summing to it)."""
    from .ops import _OPS

    mine = {name: (sorted(op.tuner.decisions.items(), key=str), op.tuner.tuned_keys)
            for name, op in _OPS.items() if op.tuner is not None}  # fmt: skip
    every: list = [None] * world
    dist.all_gather_object(every, mine)
    same = all({n: d for n, (d, _) in e.items()} == {n: d for n, (d, _) in every[0].items()} for e in every)
    tuned = [sum(t for _, t in e.values()) for e in every]
    return same, tuned, sum(len(d) for d, _ in every[0].values())


if __name__ == "__main__":
    sys.exit(main())
