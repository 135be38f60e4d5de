"""An op's CPU reference (``reference=`` on every entry point): models that use the op run on CPU (tests, CI,
debugging) through the same op, under the same declaration.

The reference is the user's Python function of the op's arguments. Registered as the op's CPU kernel, it
runs after the declaration's guards, and its result is held to the declaration: each call first runs the op's
call plan up to the launch on the call's own CPU tensors (``eager.make_checks``: every dtype, rank, shape,
layout, alignment and precondition check, the launch grid's bounds, and the outputs' shapes), so a CPU call
refuses what a GPU call refuses, with the same error, and a reference returning another shape or dtype than the
op declares is an error naming both, not a silent divergence. Ops without a call plan (an ``eager_fn``, a
``meta_fn``) run their fake implementation on meta copies instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..errors import SpecError

__all__ = ["cpu_reference"]


def _tensors(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, tuple | list) else [value]


def cpu_reference(op_name: str, overload: Any, reference: Callable, checks: Callable | None = None) -> Callable:
    """The CPU kernel of ``op_name``: the declaration's checks and output shapes (``checks``, the call plan up to
    the launch; else the op's fake on meta copies), then ``reference``, whose outputs must match them."""

    def planned(*args: Any) -> Any:
        return overload(*[a.to("meta") if isinstance(a, torch.Tensor) else a for a in args])

    run_checks = checks or planned

    def cpu(*args: Any) -> Any:
        want = _tensors(run_checks(*args))  # refuses what the GPU path refuses, with the same error
        got = reference(*args)
        have = _tensors(got)
        shapes = [(tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__ for t in have]
        expected = [(tuple(t.shape), t.dtype) for t in want]
        if shapes != expected or any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in have):
            raise SpecError(op_name, "reference", f"the CPU reference returned {shapes}; the op declares {expected} "
                            "for these inputs (on CPU).", "return the op's outputs, with the declared shapes and "
                            "dtypes, as CPU tensors (write in-place arguments and return None for an op that "
                            "returns nothing).")  # fmt: skip
        got = _fresh(got, args)
        if len(want) == 1 and isinstance(got, tuple | list):
            return got[0]
        return tuple(got) if isinstance(got, list) else got

    return cpu


def _fresh(got: Any, args: tuple) -> Any:
    """The reference's outputs as an op's outputs must be: fresh and contiguous. ``x.float()`` of a float32
    ``x`` returns ``x`` itself and ``x.t()`` a transposed view; served as they are, the op's output would alias
    its input (opcheck fails, an in-place write later changes the caller's tensor) or break the contiguous
    strides the op's fake promises (torch.compile's stride assertion)."""
    storages = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor) and a.numel()}

    def one(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if t.numel() and t.untyped_storage().data_ptr() in storages:
            return t.clone(memory_format=torch.contiguous_format)
        return t if t.is_contiguous() else t.contiguous()

    if isinstance(got, tuple | list):
        return type(got)(one(t) for t in got)
    return one(got)
