"""The ``sharding`` row of ``opsmith check``: the DTensor rule derived from an op's declaration, held to the kernel
it serves.

A derived rule follows the declaration, and a kernel may do more than its declaration says (a gather bounding
its table read by ``Numel(idx)`` uses that extra twice). So for every placement the derived rule offers for the
case's inputs, the real kernel runs once per simulated shard, on this one device, with 2 and 3 shards (uneven
where the axis does not divide: ``torch.tensor_split``): each sharded input split along its axis, each other
input whole. The shards' outputs are put back by their placements (concatenated along a ``Shard`` axis; summed,
maxed or mined for a ``Partial``) and compared with the unsharded call. A placement the rule applies that
disagrees fails the row, naming it and the fix; a placement held back because the declaration cannot justify it
(``distributed/sharding.py``) is reported either way: wrong (keep it so) or right (``sharding="derive"`` would
apply it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .case import CheckCase, _as_tuple, _clone, _Skip

__all__ = ["check_sharding"]

_FIX = ("tie the inputs' axes with named dimensions so the declaration says how the kernel reads them, pass "
        "sharding= a rule of the placements the kernel supports, or sharding='replicate'.")  # fmt: skip


def check_sharding(case: CheckCase, device: torch.device, solver: Any = None) -> str:
    """The derived DTensor rule against the kernel on simulated shards, at the largest example shape (fitted
    to the op's preconditions by ``solver``, a ``check_samples.ShapeSolver``)."""
    from ..distributed.sharding import derived
    from ..torchlib.registration import Op

    op = case.op
    if not isinstance(op, Op):
        raise _Skip("not an opsmith op: no rule derived from a declaration to check")
    plan = op.sharding_plan
    if plan.refusal:
        raise _Skip(f"no derived rule: {plan.refusal}")
    if plan.user is not None:
        raise _Skip("its sharding is given with sharding= (" + ("'replicate'" if plan.user == "replicate" else "a rule")
                    + "), not derived")  # fmt: skip
    dt = case.dtypes[0]
    shapes = [tuple(s) for s in case.shapes]
    if solver is not None:
        shapes = [f for f in (solver.fit(s, dt) for s in shapes) if f is not None]
        if not shapes:
            raise _Skip("no example shape satisfies the op's preconditions")
    shape = max(shapes, key=lambda s: (min(s, default=0), len(s)))
    args = case.inputs(shape, dt, device)
    strategies = derived(plan, *args)
    if not strategies:
        raise _Skip(f"the derived rule offers no sharded placement for inputs of shape {shape} (only replicate)")
    full = _as_tuple(op(*_clone(args)))
    tol = case.tolerance(dt)
    if dt not in (torch.float16, torch.bfloat16):  # a Partial's shards are summed in another order
        tol = {"atol": max(tol.get("atol", 1e-5), 1e-4), "rtol": max(tol.get("rtol", 1.3e-6), 1e-4)}
    applied, held, failures = 0, [], []
    for (outs_pl, ins_pl), is_applied in strategies:
        label = _label(ins_pl, outs_pl)
        wrong = [why for n in (2, 3) if (why := _disagrees(op, args, full, ins_pl, outs_pl, n, tol))]
        if is_applied:
            applied += 1
            if wrong:
                failures.append(f"placement {label}: {wrong[0]}")
        else:
            held.append(f"{label} ({'would be wrong: ' + wrong[0] if wrong else 'agrees'})")
    if failures:
        raise AssertionError("the derived rule disagrees with the kernel: " + "; ".join(failures) + f" Fix: {_FIX}")
    detail = (
        f"{applied} derived placement(s) x 2 and 3 simulated shards (uneven) match the unsharded call, shape {shape}"
    )
    if held:
        agree = all(h.endswith("(agrees)") for h in held)
        detail += ("; held back (the declaration cannot justify them), run replicated: " + "; ".join(held)
                   + (". They agree here: sharding='derive' would shard them" if agree else ""))  # fmt: skip
    return detail


def _label(ins_pl: Sequence[Any], outs_pl: Sequence[Any]) -> str:
    return f"inputs {[str(p) for p in ins_pl if p is not None]} -> outputs {[str(p) for p in outs_pl]}"


def _disagrees(op: Any, args: Sequence[Any], full: tuple, ins_pl: Sequence[Any], outs_pl: Sequence[Any], n: int,
               tol: dict) -> str:  # fmt: skip
    """Why ``n`` simulated shards of this placement differ from the unsharded call ("" when they agree, or when
    a sharded axis is shorter than ``n``)."""
    for a, p in zip(args, ins_pl, strict=True):
        if p is not None and p.is_shard() and a.shape[p.dim] < n:
            return ""
    parts = []
    for r in range(n):
        local = [a.detach().tensor_split(n, p.dim)[r].clone() if p is not None and p.is_shard() else _clone([a])[0]
                 for a, p in zip(args, ins_pl, strict=True)]  # fmt: skip
        try:
            parts.append(_as_tuple(op(*local)))
        except Exception as e:  # a shard the op refuses: the placement cannot run
            return f"{n} shards: shard {r} raised {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    for k, (pl, want) in enumerate(zip(outs_pl, full, strict=True)):
        pieces = [p[k] for p in parts]
        if pl.is_shard():
            got = torch.cat(pieces, pl.dim)
        elif pl.is_partial():
            how = pl.reduce_op
            got = pieces[0].clone()
            for t in pieces[1:]:
                got = got + t if how == "sum" else torch.maximum(got, t) if how == "max" else torch.minimum(got, t)
        else:
            got = pieces[0]
        if got.shape != want.shape:
            return f"{n} shards give output {k} the shape {tuple(got.shape)}, the unsharded call {tuple(want.shape)}"
        try:
            torch.testing.assert_close(got, want, **tol)
        except AssertionError as e:
            lines = [x for x in str(e).splitlines() if x.strip()]
            return f"{n} shards: output {k} differs ({'; '.join(lines[:2])})"
    return ""
