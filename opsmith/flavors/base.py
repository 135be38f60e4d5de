"""What every flavor hands to the one registration path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ..signature import CParam
from ..spec import Config

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
    #: Set when the compiler fixes the launch (Triton: 32 * num_warps threads, its shared memory); None: the
    #: declaration's geometry decides.
    block: tuple[int, int, int] | None = None
    shared_mem: int = 0
    trailing_params: int = 0  # pointer parameters after the user's ones, passed as NULL (Triton's scratch)


class KernelSource(Protocol):
    kernel_name: str
    #: True when the signature says what pointers point at (C++), False when it only gives sizes (PTX).
    pointers_typed: bool
    #: "cuda" | "ptx" | "cubin" | "triton"
    flavor: str

    def signature(self) -> list[CParam] | None: ...

    def for_config(self, config: Config) -> KernelSource:
        """The same kernel with one tuning config's compile-time parameters applied."""
        ...

    def build(self, arch: str, spec: tuple = ()) -> Binary:
        """A binary loadable on a device of ``arch``; ``spec`` is the call's specialization (Triton only).
        Raises CompileError / SpecError / LaunchError."""
        ...

    def fingerprint(self) -> str:
        """Stable across processes: identifies the source and every compile option."""
        ...
