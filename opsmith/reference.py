"""An op's CPU reference (``reference=`` on every entry point): models that use the op run on CPU (tests, CI,
debugging) through the same op, under the same declaration.

The reference is the user's Python function of the op's arguments. Registered as the op's CPU kernel, it
runs after the declaration's guards, and its result is held to the declaration: each call first runs the op
on meta copies of its arguments (the op's own fake implementation: every dtype, rank, shape and
precondition check, and the output shapes), so a CPU call refuses what a GPU call refuses, and a reference
returning another shape or dtype than the op declares is an error naming both, not a silent divergence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .errors import SpecError

__all__ = ["cpu_reference"]


def _tensors(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, tuple | list) else [value]


def cpu_reference(op_name: str, overload: Any, reference: Callable) -> Callable:
    """The CPU kernel of ``op_name``: the declaration's guards and output shapes (on meta copies), then
    ``reference``, whose outputs must match them."""

    def cpu(*args: Any) -> Any:
        meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
        want = _tensors(overload(*meta))  # the op's fake: refuses what the GPU path refuses
        got = reference(*args)
        have = _tensors(got)
        shapes = [(tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__ for t in have]
        expected = [(tuple(t.shape), t.dtype) for t in want]
        if shapes != expected or any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in have):
            raise SpecError(op_name, "reference", f"the CPU reference returned {shapes}; the op declares {expected} "
                            "for these inputs (on CPU).", "return the op's outputs, with the declared shapes and "
                            "dtypes, as CPU tensors (write in-place arguments and return None for an op that "
                            "returns nothing).")  # fmt: skip
        if len(want) == 1 and isinstance(got, tuple | list):
            return got[0]
        return tuple(got) if isinstance(got, list) else got

    return cpu
