"""The reader of each flavor's source text (``READERS``): the Triton function's AST (``python_body.py``), the CUDA
C++ text (``cpp_body.py``), each giving ``reads.KernelReads``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .cpp_body import cpp_reads
from .python_body import python_reads, strings_of
from .reads import KernelReads

__all__ = ["READERS", "reads_of"]


def reads_of(source: Any) -> KernelReads | None:
    """The reads of a compiled source's kernel, or None where its flavor has no reader or the text cannot be
    read (a kernel built from a string, a PTX image)."""
    reader = READERS.get(getattr(source, "flavor", ""))
    if reader is None:
        return None
    try:
        return reader(source)
    except (OSError, TypeError, SyntaxError, ValueError):  # no source text: nothing to say, nothing to act on
        return None


def _triton(source: Any) -> KernelReads | None:
    reads = python_reads(source.kernel)
    # A @triton.heuristics function reads the call's arguments by name (``args["n_rows"] % 2``): those count.
    named = set().union(*(strings_of(h.fn) for h in getattr(source, "heuristics", ()))) & set(reads.params)
    return replace(reads, read=reads.read | named) if named else reads


def _cuda(source: Any) -> KernelReads | None:
    return cpp_reads(source.source, source.kernel_name)


#: flavor -> reader. CuTe DSL host functions are Python too; their tensors are ``cute.Tensor`` layouts rather
#: than pointers, so a reader for them maps layouts to addresses before it plugs in here.
READERS: dict[str, Callable[[Any], KernelReads | None]] = {"triton": _triton, "cuda": _cuda}
