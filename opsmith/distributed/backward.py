"""A declared backward on DTensors: chosen placements, run on the local shards, gradients wrapped back.

A backward program allocates scratch buffers sized for one device (RMSNorm's per-SM partial sums of
dweight) and its steps write them in place, so it cannot be dispatched op by op through DTensor. Instead
the whole backward runs on local tensors, under placements derived from the forward's rule: for each
strategy the forward accepts (its outputs' and inputs' placements on one mesh dimension),

* the gradient arriving at an output takes the output's placement (a ``Partial`` output's gradient is
  replicated: every shard's part contributed to the whole with weight one);
* saved inputs and outputs take their forward placements;
* the gradient of a sharded input is sharded the same way; of a replicated input, when anything was
  sharded, a ``Partial`` sum (each shard's contribution to a weight used by every shard); of a ``Partial``
  input, replicated.

That holds for any strategy that is valid for the forward: the local forward computed the local outputs
from the local inputs alone, so the local backward is its exact derivative. Per mesh dimension the strategy
that moves the fewest bytes is taken (arguments already in place cost nothing).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .sharding import rule_for

__all__ = ["is_dtensor", "run_local", "specs_of"]

_DTENSOR: type | None = None


def is_dtensor(values: Sequence[Any]) -> bool:
    """Whether any of ``values`` is a DTensor (False without importing DTensor when it was never loaded)."""
    global _DTENSOR
    if _DTENSOR is None:
        mod = sys.modules.get("torch.distributed.tensor")
        if mod is None:
            return False
        _DTENSOR = mod.DTensor
    return any(isinstance(v, _DTENSOR) for v in values)


def specs_of(args: Sequence[Any]) -> tuple:
    """The forward's arguments as its sharding rule sees them: DTensorSpec for tensors, values otherwise."""
    return tuple(a._spec if isinstance(a, _DTENSOR) else a for a in args)


def _transpose(strategy: tuple[list, list], sources: Sequence[tuple[str, int]], grad_of: Sequence[int]) -> tuple:
    """The backward's argument and gradient placements for one forward strategy (see the module docstring)."""
    from torch.distributed.tensor import Partial, Replicate

    outs, ins = strategy
    sharded = any(p is not None and not p.is_replicate() for p in (*outs, *ins))
    args = []
    for kind, k in sources:
        if kind == "grad":
            args.append(Replicate() if outs[k].is_partial() else outs[k])
        else:
            args.append((ins if kind == "in" else outs)[k])
    grads = []
    for k in grad_of:
        p = ins[k]
        grads.append(p if p.is_shard() else Partial() if p.is_replicate() and sharded else Replicate())
    return args, grads


def _move(cur: Any, want: Any) -> float:
    """Relative bytes moved per element to turn placement ``cur`` into ``want`` on one mesh dimension."""
    if cur == want:
        return 0.0
    if want.is_partial():
        return math.inf  # a replicated or sharded value cannot become the partial one the forward saw
    if want.is_replicate():
        return 2.0 if cur.is_partial() else 1.0  # all-reduce / all-gather
    return 0.01 if cur.is_replicate() else 1.0  # a local slice / reduce-scatter or all-to-all


def run_local(op_name: str, fwd_specs: tuple, sources: Sequence[tuple[str, int]], grad_of: Sequence[int],
              args: list, compute: Callable[[list], Sequence[Any]]) -> list:  # fmt: skip
    """Run ``compute`` (the backward on plain tensors) on the local shards of ``args``; the gradients as
    DTensors of the forward inputs' global shapes."""
    from torch.distributed.tensor import DTensor, Replicate

    rule = rule_for(op_name)
    cands = [_transpose(s, sources, grad_of) for s in rule(*fwd_specs)]
    mesh = next(a.device_mesh for a in args if isinstance(a, DTensor))
    dts = [
        a if not isinstance(a, torch.Tensor) or isinstance(a, DTensor)
        else DTensor.from_local(a, mesh, [Replicate()] * mesh.ndim, run_check=False)  # a zero gradient
        for a in args
    ]  # fmt: skip

    def cost(c: tuple, m: int) -> float:
        return sum(_move(a.placements[m], w) * a.numel() for a, w in zip(dts, c[0], strict=True)
                   if isinstance(a, DTensor))  # fmt: skip

    choice = [min(cands, key=lambda c, m=m: cost(c, m)) for m in range(mesh.ndim)]
    if any(math.isinf(cost(c, m)) for m, c in enumerate(choice)):
        raise RuntimeError(f"{op_name}: no placement of the backward's arguments matches a strategy of the forward.")
    local = []
    for j, a in enumerate(dts):
        if isinstance(a, DTensor):
            want = tuple(c[0][j] for c in choice)
            if tuple(a.placements) != want:
                a = a.redistribute(mesh, want)
            a = a.to_local()
        local.append(a)
    got = list(compute(local))
    for j, (k, g) in enumerate(zip(grad_of, got, strict=False)):
        if isinstance(g, torch.Tensor):
            spec = fwd_specs[k]
            shape = tuple(spec.shape)
            got[j] = DTensor.from_local(g.contiguous(), mesh, tuple(c[1][j] for c in choice), run_check=False,
                                        shape=torch.Size(shape), stride=_contiguous_stride(shape))  # fmt: skip
    return got


def _contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(stride))
