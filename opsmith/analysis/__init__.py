"""The declaration checked against the kernel's own body at registration (``diagnose.py``), from what a reader
of the kernel says the body does with its parameters (``reads.py``): the compiler's IR where registration can
make it (Triton's TTIR, CUDA C++'s PTX: ``ssa_text.py``), else the source text. What it finds is warned about
and, where it would give wrong values, made safe in the record, so every path (eager, fake, native, DTensor,
JAX) applies it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import SpecError
from .diagnose import Finding, check_silence, foreign_strides, loop_only_sizes, single_dims, unread_extras, warn
from .readers import reads_of
from .reads import KernelReads

__all__ = ["KernelReads", "check_against_kernel", "check_silence", "reads_of"]


def check_against_kernel(op: str, sources: Sequence[Any], record: Any, decl: dict, silence: Sequence[str],
                         rebuild: Callable[[list], Any]) -> Any:  # fmt: skip
    """``record`` with the findings' changes applied (``rebuild(extras)`` re-resolves a declaration whose
    Stride tuples gained tensors), after warning about each finding not silenced. ``sources``: the kernel's
    compiled source per config."""
    reads = reads_of(sources[0], record, sources)
    if reads is None or not reads.read:  # no text, or a body that reads nothing at all (a stub, a probe)
        return record
    extras, shared = foreign_strides(record, reads, list(decl.get("extras") or ()), silence)
    if extras != list(decl.get("extras") or ()):
        try:
            record = rebuild(extras)
        except SpecError as e:  # the shared declaration is not one opsmith can take: said, not changed
            shared = [Finding(f.subject, f"{f.message} (Not applied here: {e})") for f in shared]
    record, unread = unread_extras(record, reads, silence)
    warn(op, [*shared, *unread, *loop_only_sizes(record, reads, decl), *single_dims(record, reads, decl)], silence)
    return record
