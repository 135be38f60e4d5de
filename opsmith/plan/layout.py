"""Call-time layout rules: which tensors a kernel can address as they are, and what is copied or refused.

A kernel that declares no strides reads dense row-major tensors. One that takes the strides of some axes
(``Stride`` extras) addresses those axes at any stride and assumes the others row-major around them: for
``x[:, :n]`` of a wider tensor with its row stride passed, no copy is needed. The generated eager code,
the implementation torch.compile traces and the C++ op library all apply these rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import InputError
from .guards import shown

__all__ = ["addressable", "conform", "layout_error", "share_strides"]


def addressable(t: torch.Tensor, axes: Sequence[int]) -> bool:
    """Whether a kernel given the strides of ``axes`` addresses ``t`` correctly: every other axis of more
    than one element has the stride row-major order around the declared ones gives it."""
    if t.numel() == 0:  # zero elements: the kernel reads no address, whatever the strides (opcheck's (0, 0))
        return True
    nd = t.dim()
    if not axes:
        return t.is_contiguous()
    declared = {a % nd for a in axes if -nd <= a < nd}
    shape, stride = t.shape, t.stride()
    nxt = 1  # the stride the axis to the right implies for this one
    for a in range(nd - 1, -1, -1):
        if a in declared:
            s = stride[a]
        else:
            s = nxt
            if shape[a] > 1 and stride[a] != s:
                return False
        nxt = s * shape[a]
    return True


def layout_error(op: str, name: str, t: torch.Tensor, axes: Sequence[int] = ()) -> InputError:
    want = ("a contiguous tensor" if not axes else
            f"a tensor the kernel can address with the strides of axes {list(axes)} (the others row-major)")  # fmt: skip
    return InputError(op, name, f"{want} (declared contiguous='require')",
                      f"strides {shown(t.stride())} for shape {shown(t.shape)}", f"Fix: pass {name}.contiguous().")  # fmt: skip


def conform(op: str, name: str, t: torch.Tensor, axes: Sequence[int], policy: str) -> torch.Tensor:
    """``t`` as the kernel can address it: as is, copied to contiguous (``"make"``) or refused."""
    if addressable(t, axes):
        return t
    if policy == "require":
        raise layout_error(op, name, t, axes)
    return t.contiguous()


def share_strides(op: str, names: Sequence[str], tensors: list[torch.Tensor], inputs: Sequence[bool],
                  require: Sequence[bool], axis: int) -> list[torch.Tensor]:  # fmt: skip
    """Tensors that one stride parameter describes must agree on ``axis``. Where they do not, the inputs
    among them are made contiguous (or refused, where required); a disagreement left is an error."""

    def agree(ts: list[torch.Tensor]) -> bool:
        live = [t.stride(axis) for t in ts if t.dim() and t.shape[axis] > 1 and t.numel() != 0]  # empty: no address
        return all(s == live[0] for s in live)  # no set(): symbolic strides (torch.compile) do not hash

    if agree(tensors):
        return tensors
    fixed = list(tensors)
    for k, t in enumerate(tensors):
        if inputs[k] and not t.is_contiguous():
            if require[k]:
                raise InputError(op, names[k], "a contiguous tensor (declared contiguous='require'), since it shares "
                                 f"one stride parameter with {[n for n in names if n != names[k]]}",
                                 f"strides {shown(t.stride())} for shape {shown(t.shape)}", f"Fix: pass {names[k]}.contiguous().")  # fmt: skip
            fixed[k] = t.contiguous()
    if not agree(fixed):
        got = ", ".join(f"{n}: {shown(t.shape)} strides {shown(t.stride())}" for n, t in zip(names, fixed, strict=True))
        raise InputError(op, names[0], f"tensors {list(names)} with one stride on axis {axis} (the kernel takes a "
                         "single stride parameter for them)", got, "Fix: pass tensors of the same shape.")  # fmt: skip
    return fixed
