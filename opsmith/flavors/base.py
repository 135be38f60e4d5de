"""What every flavor hands to the one registration path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ..signature import CParam

__all__ = ["Binary", "KernelSource"]


@dataclass(frozen=True)
class Binary:
    """A compiled kernel for one architecture."""

    data: bytes
    fmt: Literal["cubin", "ptx"]
    arch: str  # "sm_90"; "any" for PTX, which the driver compiles for whatever device loads it
    symbol: str  # the entry's name in the binary
    from_cache: bool = False
    seconds: float = 0.0


class KernelSource(Protocol):
    kernel_name: str
    #: True when the signature says what pointers point at (C++), False when it only gives sizes (PTX).
    pointers_typed: bool

    def signature(self) -> list[CParam] | None: ...

    def build(self, arch: str) -> Binary:
        """A binary loadable on a device of ``arch``; raises CompileError / SpecError / LaunchError."""
        ...

    def fingerprint(self) -> str:
        """Stable across processes: identifies the source and every compile option."""
        ...
