"""Why a numerics sample failed: ``opsmith check`` narrows a failure down before reporting it.

"value 0: Tensor-likes are not close" on a sample with a strided weight leaves the user to guess. The same
sample is rerun with one thing changed at a time, and the first change that makes it pass is the finding:

1. tensors of one shape given one layout (the first strided one's): a kernel that addresses K and V with Q's
   strides passes once they share Q's layout, so their strides should be declared as one ``Stride`` tuple;
2. each strided input made contiguous in turn: a kernel that ignores W's declared stride (Liger's unread
   ``W_row_stride``) passes once W is contiguous; then all of them at once: a kernel that writes its output with
   an input's strides (the attention's ``Out + qvk_offset``) passes only when the inputs have the outputs' layout;
3. each axis of the problem at a smaller size (fitted to the op's preconditions): a kernel that fails only
   from some size on (a bound, a block that does not cover a row) passes below it.

Each rerun is one call of the op and the reference on fresh copies of the sample's values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["explain", "mixed_layouts", "padded"]


def mixed_layouts(args: Sequence, written: set[int]) -> list[tuple]:
    """Samples where one tensor input is laid out otherwise and the rest are contiguous: its last axis at
    stride 2, and, for two or more dims, its rows padded (``x[:, :n]`` of a wider tensor: the layout a kernel
    given row strides takes as it is). A kernel that addresses several tensors with one tensor's strides is
    right when all share a layout and wrong here; a kernel with one input that ignores its declared row stride
    is right on dense rows and wrong on padded ones."""
    from .case import noncontiguous

    ks = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor) and a.dim() and a.numel() and k not in written]
    if not ks:
        return []
    out = []
    for k in ks:
        for view in (noncontiguous, padded):
            changed = view(args[k])
            if changed is not args[k]:
                out.append(tuple(changed if j == k else a for j, a in enumerate(args)))
    return out


def padded(a: Any) -> Any:
    """The same values in a tensor whose rows are 3 elements longer than its last axis (2 dims or more)."""
    if not isinstance(a, torch.Tensor) or a.dim() < 2 or a.numel() == 0:
        return a
    wide = torch.empty(*a.shape[:-1], a.shape[-1] + 3, dtype=a.dtype, device=a.device)
    view = wide[..., : a.shape[-1]]
    view.copy_(a)
    return view


def explain(case: Any, args: Sequence, dtype: torch.dtype, passes: Callable[[Sequence], bool],
            shape: tuple | None = None, solver: Any = None) -> str:  # fmt: skip
    """A sentence saying what makes the failing sample ``args`` pass, or "" when nothing tried does.
    ``passes(args)``: whether the op matches the reference on those arguments."""
    names = _arg_names(case, len(args))
    strided = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor) and a.numel() and not a.is_contiguous()]
    for k in strided:  # 1. one layout for the tensors of k's shape
        same = [j for j, a in enumerate(args) if j != k and isinstance(a, torch.Tensor) and a.shape == args[k].shape
                and a.stride() != args[k].stride()]  # fmt: skip
        if same and passes([_like(a, args[k]) if j in same else a for j, a in enumerate(args)]):
            group = [names[k], *(names[j] for j in same)]
            return (f"passes when {', '.join(group)} share one layout ({names[k]}'s strides): the kernel addresses "
                    f"them with one set of strides; declare their strides as one Stride tuple, e.g. "
                    f"Stride({tuple(group)!r}, axis)")  # fmt: skip
    for k in strided:  # 2. each strided input made contiguous
        if passes([a.contiguous() if j == k else a for j, a in enumerate(args)]):
            extras = _strides_declared(case, names[k])
            why = (f"the kernel does not honour {names[k]}'s declared stride ({', '.join(extras)}): it never reads "
                   "it, or addresses the tensor as dense") if extras else \
                  f"the kernel reads {names[k]} as dense, yet the declaration lets a strided {names[k]} through"  # fmt: skip
            return f"passes when {names[k]} is contiguous: {why}"
    if len(strided) > 1 and passes([a.contiguous() if j in strided else a for j, a in enumerate(args)]):
        # 2b. only all together: they shared a layout already, so what differed is the outputs' (contiguous)
        ins = ", ".join(names[k] for k in strided)
        outs = [o.name for o in getattr(getattr(case.op, "record", None), "outputs", ())]
        group = tuple([names[strided[0]], *outs[:1]]) if outs else tuple(names[k] for k in strided)
        return (f"passes when {ins} are all contiguous (the layout opsmith gives the outputs{f' {outs}' if outs else ''}):"
                " the kernel addresses an output with an input's strides, or reads the inputs as dense; declare the "
                f"strides an output shares with an input as one Stride tuple, e.g. Stride({group!r}, axis)")  # fmt: skip
    if shape is not None and solver is not None:  # 3. one axis smaller
        for i, d in enumerate(shape):
            for smaller in sorted({1, max(1, d // 4), max(1, d // 2)}):
                if smaller >= d:
                    continue
                fitted = solver.fit(tuple(smaller if j == i else e for j, e in enumerate(shape)), dtype)
                if fitted is None or fitted[i] >= d:
                    continue
                if passes(case.inputs(fitted, dtype, args_device(args))):
                    return (f"passes at shape {fitted} (axis {i} at {fitted[i]}, fails at {d}): the kernel is wrong "
                            f"only from some size of axis {i} on (a bound it does not check, a block that does not "
                            "cover the axis)")  # fmt: skip
    return ""


def args_device(args: Sequence) -> torch.device:
    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


def _like(a: torch.Tensor, model: torch.Tensor) -> torch.Tensor:
    """``a``'s values in a tensor with ``model``'s strides (same shape)."""
    wide = torch.empty(model.untyped_storage().nbytes() // model.element_size() + 1, dtype=a.dtype, device=a.device)
    out = wide.as_strided(model.shape, model.stride(), model.storage_offset())
    out.copy_(a)
    return out


def _arg_names(case: Any, n: int) -> list[str]:
    ov = case.overload
    if ov is not None:
        names = [a.name for a in ov._schema.arguments]
        if len(names) >= n:
            return names[:n]
    return [f"argument {k}" for k in range(n)]


def _strides_declared(case: Any, name: str) -> list[str]:
    """The extras that pass ``name``'s strides, as messages name them (``extra W_row_stride``)."""
    record = getattr(case.op, "record", None)
    if record is None:
        return []
    names = [a.name for a in record.tensor_inputs] + [o.name for o in record.outputs]
    refs = {n: (f"i{k}" if k < len(record.tensor_inputs) else f"o{k - len(record.tensor_inputs)}")
            for k, n in enumerate(names)}  # fmt: skip
    ref = refs.get(name)
    return [f"extra {e.name or e.label}" for e in record.extras
            if isinstance(e.expr, list) and e.expr[0] == "stride" and ref in (e.expr[1], *e.same)]  # fmt: skip
