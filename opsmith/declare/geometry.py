"""Launch geometry as data: grid and block as small expressions over tensor shapes.

A declarative geometry (Elementwise, Reduction) is lowered once, at registration, into a ``LaunchPlan``
whose grid entries are JSON-able expression trees. The same plan is compiled to a Python function here
and can be printed as C++ by a native backend, so no launch lives only in a Python closure.

The expression trees, their semantics and their printing as Python are ``expr.py``'s; the call plan
(``plan/steps.py``) decides which of them are checked per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .spec import Custom, Elementwise, Grid, Reduction

__all__ = ["LaunchPlan", "lower_geometry", "min_rank"]

Expr = Any  # int | list


_INDEX_SPAN = 2**31  # thread indices a 32-bit kernel can form along one axis: 0 .. 2^31 - 1


@dataclass(frozen=True)
class LaunchPlan:
    """``limits``: [expr, n] pairs a kernel with 32-bit indexing needs to hold (expr <= n): an
    ``Elementwise`` launch covers an axis of ``size`` elements with ``cdiv(size, b) * b`` threads, whose
    top index ``int i = blockIdx.x * blockDim.x + threadIdx.x`` must not wrap."""

    grid: tuple[Expr, Expr, Expr]
    block: tuple[int, int, int]
    shared_mem: Expr = 0  # bytes, or a size expression (a Grid's) computed per call
    limits: tuple = ()

    def to_json(self) -> dict:
        return {"grid": list(self.grid), "block": list(self.block), "shared_mem": self.shared_mem,
                "limits": [list(x) for x in self.limits]}  # fmt: skip

    @staticmethod
    def from_json(d: dict) -> LaunchPlan:
        return LaunchPlan(tuple(d["grid"]), tuple(d["block"]), d.get("shared_mem", 0),
                          tuple(tuple(x) for x in d.get("limits", ())))  # fmt: skip


def _limit(block: int) -> int:
    """The most elements along one axis that ``block``-sized blocks cover with indices below 2^31."""
    return _INDEX_SPAN // block * block


def lower_geometry(geometry: Elementwise | Reduction | Grid | Custom, params: dict | None = None,
                   tensors: dict[str, str] | None = None, dims: dict | None = None) -> LaunchPlan | None:  # fmt: skip
    """The plan for a declarative geometry; ``None`` for ``Custom`` (its launch is Python code).

    Block entries that name a config parameter take its value from ``params``; a ``Grid``'s expressions
    name tensors by ``tensors`` (name -> ref) and named dimensions by ``dims`` (name -> expression)."""
    params = params or {}

    def num(v: int | str) -> int:
        return int(params[v]) if isinstance(v, str) else v

    if isinstance(geometry, Elementwise):
        b = tuple(num(v) for v in geometry.block)
        if geometry.layout == "flat":
            n = ["numel", "o0"]
            return LaunchPlan((["cdiv", n, b[0]], 1, 1), (b[0], 1, 1), 0, ((n, _limit(b[0])),))
        k = len(b)
        gx = ["cdiv", ["size", "o0", -1], b[0]]
        gy = ["cdiv", ["size", "o0", -2], b[1]] if k >= 2 else 1
        gz: Expr = ["lead", "o0", k]
        if k == 3:
            gz = ["mul", ["cdiv", ["size", "o0", -3], b[2]], gz]
        # x and y index one output axis each; z folds the leading axes, which kernels index their own way.
        limits = tuple((["size", "o0", -(i + 1)], _limit(b[i])) for i in range(min(k, 2)))
        return LaunchPlan((gx, gy, gz), (*b, *(1,) * (3 - k)), 0, limits)
    if isinstance(geometry, Reduction):
        k = len(geometry.reduce_dims)
        if sorted(geometry.reduce_dims) == list(range(-k, 0)):  # the trailing axes: rows are the leading ones,
            rows: Expr = ["lead", "i0", k]  # counted even where a reduced axis is empty (0 / 0 otherwise)
        else:  # an empty reduced axis divides by zero: refused per call, never a launch over too few rows
            rows = ["div", ["numel", "i0"], ["prod", "i0", list(geometry.reduce_dims)]]
        return LaunchPlan((rows, 1, 1), (num(geometry.block_size), 1, 1), geometry.shared_mem)
    if isinstance(geometry, Grid):
        from .expr import ExprError, parse_size

        grid = [parse_size(g, tensors or {}, params, dims) for g in geometry.grid]
        block = tuple(num(b) for b in geometry.block) or (0,)
        try:
            smem = parse_size(geometry.shared_mem, tensors or {}, params, dims)
        except ExprError as e:
            e.field = "geometry.shared_mem"
            raise
        # The x axis's threads, for a 32-bit kernel's `blockIdx.x * blockDim.x + threadIdx.x` (Triton: unknown).
        limits = ((["mul", grid[0], block[0]], _INDEX_SPAN),) if block[0] else ()
        return LaunchPlan(tuple((*grid, 1, 1)[:3]), tuple((*block, 1, 1)[:3]), smem, limits)  # type: ignore[arg-type]
    return None


def min_rank(geometry: Elementwise | Reduction | Grid | Custom) -> tuple[str, int]:
    """(``"i0"`` or ``"o0"``, the least rank the referenced tensor needs for the plan to make sense)."""
    if isinstance(geometry, Elementwise) and geometry.layout == "nd":
        return "o0", len(geometry.block)
    if isinstance(geometry, Reduction):
        return "i0", max(d + 1 if d >= 0 else -d for d in geometry.reduce_dims)
    return "o0", 0
