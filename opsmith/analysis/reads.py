"""What a kernel's body does with its parameters, as plain data: which it reads, and which parameters each
pointer's address is computed from. A flavor with source text plugs in a reader (``READERS``); the rules over
the declaration (``diagnose.py``) see only ``KernelReads``.

The readers are deliberately simple and flow-insensitive: a variable depends on every parameter any of its
assignments mentions, and an address on everything its expression depends on. That over-approximates (a
variable reused for two tensors' offsets looks like both), so the rules only act on what a kernel cannot
get right: a parameter never mentioned at all, or one tensor's stride inside another tensor's address.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["READERS", "KernelReads", "closure", "reads_of"]


@dataclass(frozen=True)
class KernelReads:
    """``params``: the kernel's parameter names in order; ``read``: those its body mentions; ``addresses``:
    per pointer parameter, the parameters the addresses it is accessed at are computed from; ``where``: how
    the body was read (for messages: "the Triton function's AST", "the CUDA C++ text")."""

    params: tuple[str, ...]
    read: frozenset[str]
    addresses: dict[str, frozenset[str]] = field(default_factory=dict)
    where: str = ""


def closure(deps: dict[str, set[str]], names: Iterable[str]) -> set[str]:
    """Every name ``names`` depend on through ``deps`` (assignments), the names themselves included."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo += deps.get(n, ())
    return seen


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
    from dataclasses import replace

    from .python_body import python_reads, strings_of

    reads = python_reads(source.kernel)
    # A @triton.heuristics function reads the call's arguments by name (``args["n_rows"] % 2``): those count.
    named = set().union(*(strings_of(h.fn) for h in getattr(source, "heuristics", ()))) & set(reads.params)
    return replace(reads, read=reads.read | named) if named else reads


def _cuda(source: Any) -> KernelReads | None:
    from .cpp_body import cpp_reads

    return cpp_reads(source.source, source.kernel_name)


#: flavor -> reader. CuTe DSL host functions are Python too; their tensors are ``cute.Tensor`` layouts rather
#: than pointers, so a reader for them maps layouts to addresses before it plugs in here.
READERS: dict[str, Callable[[Any], KernelReads | None]] = {"triton": _triton, "cuda": _cuda}
