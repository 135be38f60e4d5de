"""Samples an op accepts: the shapes ``opsmith check`` runs are solved against the op's declared preconditions.

A vectorized or tiled kernel without masks declares what it assumes (``Divisible("T", 4)``, ``OneOf("D", (64,
128))``, ``AtMost("C", 8192)``); a sample that breaks it is refused with the op's own ``InputError``, which is
the op being right, not a failure. So every shape check runs (the fixed ones, the drawn ones, those grown for
compile and export, the zero-size one) is first *fitted*: the nearest shape the op accepts.

How: the case's ``inputs`` builds one call at a candidate shape on the meta device (no data, no launch) and the
op's own fake implementation answers accept or refuse, so every precondition, tie, group and rank rule the
record holds is the judge, with no second copy of them here. The record's preconditions only propose candidates
per axis (multiples of the ``Divisible`` moduli, the ``OneOf`` values, the ``AtMost``/``AtLeast`` bounds);
candidates are tried nearest first, at most ``_BUDGET`` fake calls per shape (each ~0.2 ms on CPU).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ..errors import InputError

__all__ = ["ShapeSolver"]

Shape = tuple[int, ...]
_BUDGET = 300  # fake calls per shape: a rank-4 shape with 4 candidates an axis has 256 combinations
_PER_AXIS = 6  # candidates kept per axis, nearest first


class ShapeSolver:
    """Fits shapes for one case and device: ``fit(shape, dtype)`` is the nearest shape the op accepts (the
    shape itself when nothing is declared or the op cannot be asked), or None when no candidate passes."""

    def __init__(self, case: Any, device: torch.device) -> None:
        self.case, self.device = case, device
        self.hints = _hints(getattr(case.op, "record", None))
        self.memo: dict[tuple, Shape | None] = {}
        self.unknown = False  # the op could not be asked (not an opsmith op, or inputs() fails on meta)

    def accepts(self, shape: Shape, dtype: torch.dtype) -> bool | None:
        """Whether the op's fake implementation accepts a call at ``shape``; None when it cannot be asked."""
        try:
            args = _meta_args(self.case, shape, dtype, self.device)
        except Exception:
            return None
        try:
            self.case.op(*args)
        except InputError:
            return False
        except Exception:
            return None  # no fake kernel, or a failure the checks themselves will report
        return True

    def fit(self, shape: Sequence[int], dtype: torch.dtype) -> Shape | None:
        """The nearest accepted shape (``shape`` itself when accepted)."""
        shape = tuple(int(d) for d in shape)
        key = (shape, dtype)
        if key in self.memo:
            return self.memo[key]
        first = self.accepts(shape, dtype)
        if first is None:
            self.unknown = True
            result: Shape | None = shape
        elif first:
            result = shape
        else:
            result = self._search(shape, dtype)
        self.memo[key] = result
        return result

    def _search(self, shape: Shape, dtype: torch.dtype) -> Shape | None:
        per_axis = [_candidates(d, self.hints) for d in shape]
        tried = 0
        for combo in _nearest_first(per_axis):
            if combo == shape:
                continue
            tried += 1
            if tried > _BUDGET:
                return None
            if self.accepts(combo, dtype):
                return combo
        return None

    def grown(self, shape: Sequence[int], dtype: torch.dtype, n: int) -> list[Shape]:
        """``n`` accepted shapes of ``shape``'s rank, larger than ``shape`` and, where the preconditions
        allow, every axis new in each (compile and export rerun at new sizes: a dynamic graph must not be
        reused by accident, nor a size stay put and be specialized)."""
        out: list[Shape] = []
        seen = [{d} for d in shape]
        for strict in (True, False):
            step = 2
            while len(out) < n and step < 2 + 32 * n:
                got = self.fit(tuple(d + step for d in shape), dtype)
                step += 1
                if got is None or got in out or got == tuple(shape):
                    continue
                if strict and any(d in s for d, s in zip(got, seen, strict=True)):
                    continue
                out.append(got)
                for d, s in zip(got, seen, strict=True):
                    s.add(d)
        return out


def _meta_args(case: Any, shape: Shape, dtype: torch.dtype, device: torch.device) -> tuple:
    """One call's arguments at ``shape`` as meta tensors: built on meta directly, else built on ``device``
    and moved (a builder that reads values, ``.item()``, cannot run on meta)."""
    try:
        args = case.inputs(shape, dtype, torch.device("meta"))
        if all(not isinstance(a, torch.Tensor) or a.device.type == "meta" for a in args):
            return tuple(args)
    except Exception:
        pass
    args = case.inputs(shape, dtype, device)
    return tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)


def _hints(record: Any) -> dict[str, list[int]]:
    """What the record's preconditions suggest trying: moduli, exact values, upper and lower bounds."""
    hints: dict[str, list[int]] = {"mod": [], "one_of": [], "at_most": [], "at_least": []}
    for r in getattr(record, "requires", ()) or ():
        kind, value = r.get("kind"), r.get("value")
        if kind == "divisible" and isinstance(value, int) and value > 1:
            hints["mod"].append(value)
        elif kind == "one_of":
            hints["one_of"] += [int(v) for v in value]
        elif kind in ("at_most", "at_least") and isinstance(value, int):
            hints[kind].append(value)
    for a in getattr(record, "tensor_inputs", ()) or ():
        if a.align and a.dtype:  # an aligned pointer of a strided view: whole vectors per row
            size = torch.empty((), dtype=getattr(torch, a.dtype)).element_size()
            if a.align > size:
                hints["mod"].append(a.align // size)
    if len(hints["mod"]) > 1:
        hints["mod"].append(math.lcm(*hints["mod"]))
    return hints


def _candidates(d: int, hints: dict[str, list[int]]) -> list[int]:
    """Sizes to try for one axis of size ``d``, nearest first (``d`` itself first)."""
    lo = max(hints["at_least"], default=1)
    hi = min(hints["at_most"], default=None)
    c = {d}
    for m in hints["mod"]:
        c |= {-(-d // m) * m, (d // m) * m, -(-max(d, lo) // m) * m}
        if hi is not None:
            c.add((hi // m) * m)
    c |= set(hints["one_of"])
    c |= {max(d, lo)} | ({min(d, hi)} if hi is not None else set())
    keep = sorted((v for v in c if v >= 0 and (d == 0 or v > 0)), key=lambda v: (abs(v - d), v))
    return keep[:_PER_AXIS]


def _nearest_first(per_axis: list[list[int]]) -> Iterator[tuple[int, ...]]:
    """Combinations of per-axis candidates in order of the summed candidate ranks (the shape first)."""
    ranks = [range(len(c)) for c in per_axis]
    for combo in sorted(itertools.product(*ranks), key=sum):
        yield tuple(c[i] for c, i in zip(per_axis, combo, strict=True))
