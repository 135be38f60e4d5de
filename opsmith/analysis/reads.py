"""What a kernel's body does with its parameters, as plain data: which it reads, and which parameters each
pointer's address is computed from. A flavor with source text has a reader (``readers.py``: ``python_body.py``,
``cpp_body.py``), which builds this data; the rules over the declaration (``diagnose.py``) see only
``KernelReads``. This module imports none of them, so the readers depend on it and not the other way round.

The readers are deliberately simple and flow-insensitive: a variable depends on every parameter any of its
assignments mentions, and an address on everything its expression depends on. That over-approximates (a
variable reused for two tensors' offsets looks like both), so the rules only act on what a kernel cannot
get right: a parameter never mentioned at all, or one tensor's stride inside another tensor's address.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["KernelReads", "addresses_of", "closure"]


@dataclass(frozen=True)
class KernelReads:
    """``params``: the kernel's parameter names in order; ``read``: those its body mentions; ``addresses``:
    per pointer parameter, the parameters the addresses it is accessed at are computed from; ``where``: how
    the body was read (for messages: "the Triton function's AST", "the CUDA C++ text")."""

    params: tuple[str, ...]
    read: frozenset[str]
    addresses: dict[str, frozenset[str]] = field(default_factory=dict)
    where: str = ""
    #: The part of ``addresses`` that holds on every path through the body: followed only through names assigned
    #: once (or accumulated, ``p += ...``). A name given two values (``offs = row * stride_x + c`` for the load,
    #: later ``offs = row * stride_y + c`` for the store) ties both strides to both pointers in ``addresses``
    #: but to neither here. None: the reader cannot tell, and nothing is certain.
    certain: dict[str, frozenset[str]] | None = None
    #: Sizes that reach only the bound of a loop stepping by a constant over one (the IR readers): parameter ->
    #: the step. ``for i in range(0, N, BLOCK)`` over blocks no mask bounds reads past N on the last step.
    loop_bounds: dict[str, int] = field(default_factory=dict)
    #: Where an access's address first depends on a parameter (the IR readers, from its locations): (pointer
    #: parameter, parameter) -> "line N: the kernel's text there", for a finding to quote; ("", size): the loop
    #: a ``loop_bounds`` size bounds.
    lines: dict[tuple[str, str], str] = field(default_factory=dict)


def closure(deps: dict[str, set[str]], names: Iterable[str], opaque: Iterable[str] = ()) -> set[str]:
    """Every name ``names`` depend on through ``deps`` (assignments), the names themselves included; the
    dependencies of ``opaque`` names (given several values) are not followed."""
    seen: set[str] = set()
    stop = set(opaque)
    todo = list(names)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in stop:
            todo += deps.get(n, ())
    return seen


def addresses_of(accesses: Iterable[set[str]], deps: dict[str, set[str]], params: set[str],
                 opaque: Iterable[str] = ()) -> dict[str, frozenset[str]]:  # fmt: skip
    """Per pointer parameter, the parameters its accesses' addresses are computed from (each access: the names
    its address expression reads)."""
    out: dict[str, set[str]] = {}
    for names in accesses:
        used = closure(deps, names, opaque) & params
        for p in used:
            out.setdefault(p, set()).update(used)
    return {p: frozenset(v) for p, v in out.items()}
