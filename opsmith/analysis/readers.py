"""The reader of each flavor's kernel (``READERS``), giving ``reads.KernelReads``: what the compiler reads where it
can be had at registration (Triton's TTIR, made on CPU; the PTX NVRTC makes of CUDA C++: ``ssa_text.py``), else
the source text (the Triton function's AST, ``python_body.py``; the CUDA C++ text, ``cpp_body.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .cpp_body import cpp_reads
from .python_body import python_reads, strings_of
from .reads import KernelReads
from .ssa_text import ptx_flows, ttir_flows

__all__ = ["READERS", "reads_of"]

log = logging.getLogger("opsmith.analysis")


def reads_of(source: Any, record: Any = None, sources: Sequence[Any] = ()) -> KernelReads | None:
    """The reads of a compiled source's kernel (``sources``: one per config, ``record`` the op's record, for the
    compiler's IR), or None where its flavor has no reader or nothing can be read (a kernel built from a string,
    a PTX image)."""
    reader = READERS.get(getattr(source, "flavor", ""))
    if reader is None:
        return None
    try:
        text = reader(source)
    except (OSError, TypeError, SyntaxError, ValueError):  # no source text: the IR alone, where there is one
        text = None
    if record is None:
        return text
    try:
        compiled = IR_READERS[source.flavor](list(sources) or [source], record, text)
    except Exception as e:  # a kernel the front end cannot compile here (a Triton it does not know): the text's
        log.debug("%s: the analysis reads the source text, not the IR: %s", record.op_name, e)
        return text
    return compiled if compiled is not None else text


def _merge(reads: Sequence[KernelReads]) -> KernelReads:
    """One reading of several compiles (configs): what any of them reads, every flow any of them has."""
    first = reads[0]
    addresses: dict[str, set[str]] = {}
    for r in reads:
        for p, v in r.addresses.items():
            addresses.setdefault(p, set()).update(v)
    flows = {p: frozenset(v) for p, v in addresses.items()}
    # A size bounds only a loop where it does in every compile (a config that masks by it is bounded).
    loops = {p: k for p, k in first.loop_bounds.items() if all(p in r.loop_bounds for r in reads)}
    lines: dict[tuple[str, str], str] = {}
    for r in reads:
        lines = r.lines | lines
    return KernelReads(first.params, frozenset().union(*(r.read for r in reads)), flows, first.where, flows, loops,
                       lines)  # fmt: skip


def _triton(source: Any) -> KernelReads | None:
    reads = python_reads(source.kernel)
    # A @triton.heuristics function reads the call's arguments by name (``args["n_rows"] % 2``): those count.
    named = set().union(*(strings_of(h.fn) for h in getattr(source, "heuristics", ()))) & set(reads.params)
    return replace(reads, read=reads.read | named) if named else reads


def _triton_ir(sources: list[Any], record: Any, text: KernelReads | None) -> KernelReads | None:
    from ..flavors.triton_ir import sample_ttir

    sampled = sample_ttir(sources, record)
    reads = _merge([ttir_flows(t, list(names)) for t, names in sampled.texts])
    if text is None:
        return reads
    # A parameter the IR does not take (a constexpr, compiled in) is read where the text names it; so is every
    # parameter where a sampled value (a heuristic's, a constexpr extra's) may leave out code another call
    # compiles: never dropping a stride some call reads.
    compiled_in = set(text.params) - set(reads.params)
    more = text.read if not sampled.complete else text.read & compiled_in
    return replace(reads, params=text.params, read=reads.read | more)


def _cuda(source: Any) -> KernelReads | None:
    return cpp_reads(source.source, source.kernel_name)


def _cuda_ir(sources: list[Any], record: Any, text: KernelReads | None) -> KernelReads | None:
    from ..flavors.cuda_ir import PROGRAM, analysis_ptx

    ptx, entry, names, exact = analysis_ptx(sources[0], record)
    reads = ptx_flows(ptx, entry, names, sources[0].source, PROGRAM)
    # A template size chosen for the compile may leave out code another call compiles: what the text names
    # counts as read too (never dropping a stride some call reads).
    return reads if exact or text is None else replace(reads, read=reads.read | text.read)


#: flavor -> reader of its source text. CuTe DSL host functions are Python too; their tensors are ``cute.Tensor``
#: layouts rather than pointers, so a reader for them maps layouts to addresses before it plugs in here.
READERS: dict[str, Callable[[Any], KernelReads | None]] = {"triton": _triton, "cuda": _cuda}
#: flavor -> reader of what its compiler makes at registration (sources per config, the record, the text's reads).
IR_READERS: dict[str, Callable[[list[Any], Any, KernelReads | None], KernelReads | None]] = {
    "triton": _triton_ir, "cuda": _cuda_ir}  # fmt: skip
