"""The tensors a Triton kernel writes, as its declaration says, in place of Inductor's analysis of the kernel.

When an op hands its kernel to Inductor (``wrap_triton``), functionalization asks which of the kernel's tensor
arguments it writes (``torch._higher_order_ops.triton_kernel_wrap.get_mutated_tensors``), and answers by analysing
the kernel's TTIR. Where that analysis fails it assumes every argument is written, and functionalization then
copies each "write" back into its tensor: a parameter included, which autograd refuses ("a leaf Variable that
requires grad is being used in an in-place operation"), and a clone of every input in any case. It fails on
Liger-Kernel's kernels with torch 2.11 (pytorch#170049: runtime scalars inlined as constants, then ``.to()`` on a
float parameter), which kept three of the Llama recipe's ops whole (docs/llama.md).

opsmith knows the answer without analysing anything: the outputs, and the inputs declared ``mutates=True``. While
an op's traced implementation launches its kernel, ``declared_writes`` answers the question for that kernel (and
only for it) from the declaration; every other kernel still gets Inductor's analysis. Inductor's later uses of the
analysis (scheduling dependencies) only over-approximate, and stay as they are.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from .donated import _jit_function

__all__ = ["declared_writes"]

_LOCAL = threading.local()  # the kernels being launched by this thread's traced implementations: fn id -> names


def _answer(original: Any) -> Any:
    def get_mutated_tensors(kernel_idx: int, constant_args_idx: int, kwargs: dict, *rest: Any) -> list[str]:
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

        declared = getattr(_LOCAL, "kernels", {}).get(id(_jit_function(kernel_side_table.get_kernel(kernel_idx))))
        if declared is None:
            return original(kernel_idx, constant_args_idx, kwargs, *rest)
        return [name for name in declared if isinstance(kwargs.get(name), torch.Tensor)]

    get_mutated_tensors.opsmith_declared = True  # type: ignore[attr-defined]
    return get_mutated_tensors


_PATCH_LOCK = threading.Lock()


@contextlib.contextmanager
def declared_writes(kernel: Any, written: Sequence[str]) -> Iterator[None]:
    """While tracing a launch of ``kernel``, functionalization takes ``written`` (kernel parameter names) as the
    tensors it writes."""
    from torch._higher_order_ops import triton_kernel_wrap as tkw

    with _PATCH_LOCK:  # installed once for the process; it answers only inside this context, per thread
        if not getattr(tkw.get_mutated_tensors, "opsmith_declared", False):
            tkw.get_mutated_tensors = _answer(tkw.get_mutated_tensors)
    kernels = _LOCAL.__dict__.setdefault("kernels", {})
    key = id(_jit_function(kernel))
    previous = kernels.get(key)
    kernels[key] = tuple(written)
    try:
        yield
    finally:
        if previous is None:
            kernels.pop(key, None)
        else:
            kernels[key] = previous
