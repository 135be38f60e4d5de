"""The fake (meta) implementation derived from output shape relations: shapes and dtypes only.

It also applies the dtype and rank rules, so a wrong input fails while torch.compile or torch.export
traces, not only when the kernel would launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .errors import InputError
from .record import KernelRecord, TensorArg, dtype_from_name

__all__ = ["INT32_MAX", "large_tensor_error", "make_fake", "out_shape"]

INT32_MAX = 2**31 - 1


def large_tensor_error(op_name: str, name: str, numel: int) -> InputError:
    return InputError(op_name, name, f"at most {INT32_MAX} elements (the kernel declares 32-bit indexing)",
                      f"{numel} elements", "Fix: index with 64 bits in the kernel (long long, or tl.int64 offsets in "
                      "Triton) and declare index_dtype='int64'.")  # fmt: skip


def out_shape(op_name: str, rel: dict, src: torch.Tensor, src_name: str) -> Sequence:
    """Shape of an output with relation ``rel`` to input ``src`` (works on symbolic shapes too)."""
    shape = list(src.shape)
    if "same_as" in rel:
        return shape
    nd = len(shape)
    dims = set()
    for d in rel["dims"]:
        if not -nd <= d < nd:
            raise InputError(
                op_name, src_name, f"a tensor with axis {d} to reduce", f"{nd} dims (shape {tuple(shape)})"
            )
        dims.add(d % nd)
    if rel["keepdim"]:
        return [1 if k in dims else s for k, s in enumerate(shape)]
    return [s for k, s in enumerate(shape) if k not in dims]


def check_tensor(op_name: str, arg: TensorArg, t: torch.Tensor, dtype: torch.dtype | None) -> None:
    if dtype is not None and t.dtype != dtype:
        raise InputError(op_name, arg.name, f"dtype {dtype}", f"{t.dtype}", f"Fix: pass {arg.name}.to({dtype}).")
    if arg.ndim is not None and t.dim() != arg.ndim:
        raise InputError(op_name, arg.name, f"{arg.ndim} dims", f"{t.dim()} dims (shape {tuple(t.shape)})")
    if t.dim() < arg.min_ndim:
        raise InputError(op_name, arg.name, f"at least {arg.min_ndim} dims (the launch geometry or a reduced "
                         "axis needs them)", f"{t.dim()} dims (shape {tuple(t.shape)})")  # fmt: skip


def make_fake(record: KernelRecord, refuse_grad: bool = False) -> Callable:
    op = record.op_name
    positions = [k for k, a in enumerate(record.inputs) if isinstance(a, TensorArg)]
    targs = record.tensor_inputs
    dtypes = [dtype_from_name(a.dtype) for a in targs]
    outs = [(o, dtype_from_name(o.dtype)) for o in record.outputs]
    narrow = record.index_dtype == "int32"

    def fake(*args):
        tensors = [args[k] for k in positions]
        for a, t, dt in zip(targs, tensors, dtypes, strict=True):
            check_tensor(op, a, t, dt)
        for a, t in zip(targs, tensors, strict=True):
            if a.shape is not None:
                want = tuple(e if isinstance(e, int) else tensors[e[0]].shape[e[1]] for e in a.shape)
                if t.dim() != len(want) or any(s != w for s, w in zip(t.shape, want, strict=True)):
                    raise InputError(op, a.name, f"shape {want}", f"shape {tuple(t.shape)}")
        if narrow:  # static sizes only: a symbolic one would add a guard (and a recompile) to every graph
            for a, t in zip(targs, tensors, strict=True):
                n = t.numel()
                if isinstance(n, int) and n > INT32_MAX:
                    raise large_tensor_error(op, a.name, n)
        if refuse_grad and torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            from .autograd import refuse_silent_backward

            refuse_silent_backward(op)  # tracing a graph through an op without backward: arm its error
        results = []
        for o, dt in outs:
            k = o.shape.get("same_as", o.shape.get("reduce"))
            shape = out_shape(op, o.shape, tensors[k], targs[k].name)
            results.append(tensors[k].new_empty(shape, dtype=dt or tensors[o.dtype_from].dtype))
        if not results:
            return None  # in-place only
        return results[0] if len(results) == 1 else tuple(results)

    return fake
