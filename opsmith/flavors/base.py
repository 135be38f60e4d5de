"""What every flavor hands to the one registration path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ..signature import KernelParam
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
    #: The kernel's parameters as the compiler compiled them (C++: types and sizes; PTX: sizes).
    params: tuple[KernelParam, ...] = ()


class KernelSource(Protocol):
    kernel_name: str
    #: What the kernel's parameters say: "full" (C++: the compiler's types), "sizes" (PTX, cubins), "none"
    #: (Triton: the declaration decides the types it is compiled for).
    typed: str
    #: "cuda" | "ptx" | "cubin" | "triton"
    flavor: str

    def params(self, binary: Binary | None, arch: str) -> tuple[list[KernelParam] | None, str]:
        """The kernel's runtime parameters in order (names "" where unknown) and why names are unknown."""
        ...

    def static_names(self) -> frozenset[str]:
        """Names of compile-time parameters an extra may bind (Triton constexprs, C++ template placeholders)."""
        ...

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
