"""What every flavor hands to the one registration path."""

from __future__ import annotations

import inspect
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..declare.record import KernelRecord, TensorArg
from ..declare.signature import KernelParam
from ..declare.spec import Config
from ..errors import SpecError

__all__ = [
    "UNIT",
    "Binary",
    "KernelSource",
    "constexpr_values",
    "likely_spec",
    "param_roles",
    "scalar_from_key",
    "scalar_key",
]


def constexpr_values(op_name: str, defaults: dict[str, Any], config: Config, static: frozenset[str],
                     what: str) -> dict[str, Any]:  # fmt: skip
    """The compile-time parameters' values under ``config`` (Triton constexprs, CuTe DSL Constexprs): the
    config's, else the parameter's default. ``static`` ones are bound by extras and come per call."""
    out: dict[str, Any] = {}
    for name, default in defaults.items():
        if name in static:
            continue
        if name in config.params:
            out[name] = config.params[name]
        elif default is not inspect.Parameter.empty:
            out[name] = default
        else:
            raise SpecError(op_name, "autotune.configs", f"{what} '{name}' has no value.",
                            f"give every Config params={{'{name}': ...}}, a default in the kernel, or bind it to "
                            f"a size with a named extra (DimSize('x', -1, name='{name}')).")  # fmt: skip
    return out


def param_roles(record: KernelRecord) -> list[tuple[str, Any]]:
    """Each runtime parameter's role in the kernel's order (``binding.py`` ordered them): ("tensor" | "scalar",
    the input), ("extra", the extra) or ("output", the output). For flavors that build arguments per parameter."""
    roles: list[tuple[str, Any]] = []
    for p in record.params:
        if p.role == "input":
            a = record.inputs[p.index]
            roles.append(("tensor" if isinstance(a, TensorArg) else "scalar", a))
        else:
            roles.append((p.role, record.extras[p.index] if p.role == "extra" else record.outputs[p.index]))
    return roles


#: The ("int", p) specialization value of an integer parameter equal to 1 (Triton compiles it in); otherwise
#: the value is whether it is divisible by 16.
UNIT = 2


def likely_spec(layout: Sequence[tuple[str, int]], dtype: Any) -> tuple:
    """The specialization most calls bring, compiled before any call does (at registration, in a library built
    ahead): every open dtype ``dtype``, pointers aligned, sizes divisible by 16, int scalars within int32."""
    return tuple(dtype if kind == "dtype" else kind != "wide" for kind, _ in layout)


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
    #: Positions among the user's parameters that the kernel does not take: values compiled in (Triton: an
    #: integer equal to 1). Every launch path leaves them out of the argument buffer.
    dropped: tuple[int, ...] = ()
    #: The driver JIT's options for a PTX image (``options.CompileOptions.jit``): applied where it is loaded.
    jit: tuple[tuple[str, int], ...] = ()
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


def scalar_key(py_type: str, v: Any) -> int:
    """A scalar compiled into the kernel, as its specialization value: a float by its IEEE bits (so -0.0 and
    0.0, or two NaNs, are distinct kernels, and the native library's int64 key holds it exactly), an int or bool
    as itself."""
    if py_type == "float":
        return struct.unpack("<q", struct.pack("<d", float(v)))[0]
    return int(v)


def scalar_from_key(py_type: str, v: int) -> Any:
    """The constexpr value a specialization's ``scalar_key`` stands for."""
    if py_type == "float":
        return struct.unpack("<d", struct.pack("<q", v))[0]
    return bool(v) if py_type == "bool" else int(v)
