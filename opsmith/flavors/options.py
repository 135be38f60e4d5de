"""Compiler options of a CUDA C++ or PTX kernel (``KernelSpec(options=...)``, ``ptx_op(options=...)``).

Options are written as NVRTC and nvcc spell them (``-use_fast_math``, ``-lineinfo``, ``-maxrregcount=64``) and
checked at registration: an option opsmith does not pass through is refused with the declaration field that
does the job (``-D`` is ``defines=``), never silently dropped. They become ``CompileOptions``: what NVRTC
is given (``cuda.core.ProgramOptions`` fields), what the driver's PTX JIT is given (``cuModuleLoadDataEx``:
register limit, line info, debug info) and a canonical spelling that enters the compile cache key, the kernel
record and the native library, so a kernel compiled with other options is another kernel.

PTX is compiled already: options that change how source maps to instructions (fast math, flush to zero,
division and square-root precision, contraction) cannot apply and are refused; the register limit and line
info are the JIT's own options. A cubin is machine code: it takes none.

``-G`` (device debug) turns optimization off: kernels run many times slower (cuda-gdb's mode), and an op that
compiled that way in a shipped library would be a silent performance bug. It is refused unless
``OPSMITH_DEVICE_DEBUG=1`` is set for a debugging session, and ``opsmith build`` refuses it always.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .. import env
from ..errors import SpecError

__all__ = ["CompileOptions", "parse_options"]

# Spelling (after the leading dashes) -> (canonical option, ProgramOptions field), for flags without a value.
_FLAGS = {"use_fast_math": ("-use_fast_math", "use_fast_math"), "lineinfo": ("-lineinfo", "lineinfo"),
          "generate-line-info": ("-lineinfo", "lineinfo"), "G": ("-G", "debug"), "device-debug": ("-G", "debug"),
          "restrict": ("-restrict", "restrict"),
          "extra-device-vectorization": ("-extra-device-vectorization", "extra_device_vectorization")}  # fmt: skip
_BOOLS = {"ftz": "ftz", "prec-div": "prec_div", "prec-sqrt": "prec_sqrt", "fmad": "fma"}
# Options another declaration field already sets, and that field.
_ELSEWHERE = {"D": "defines={...}", "define-macro": "defines={...}", "I": "include_paths=[...]",
              "include-path": "include_paths=[...]", "arch": "arch_override='sm_90a'",
              "gpu-architecture": "arch_override='sm_90a'", "std": "compile_std='c++20'"}  # fmt: skip
_SOURCE_LEVEL = {"-use_fast_math", "-ftz", "-prec-div", "-prec-sqrt", "-fmad", "-restrict",
                 "-extra-device-vectorization"}  # fmt: skip
ACCEPTED = ("-use_fast_math", "-lineinfo", "-maxrregcount=N", "-ftz=true|false", "-prec-div=true|false",
            "-prec-sqrt=true|false", "-fmad=true|false", "-restrict", "-extra-device-vectorization",
            "-G (with OPSMITH_DEVICE_DEBUG=1)")  # fmt: skip


@dataclass(frozen=True)
class CompileOptions:
    """Checked compiler options. ``canonical``: one spelling per option, sorted (cache keys, the record)."""

    canonical: tuple[str, ...] = ()
    #: ``cuda.core.ProgramOptions`` fields for NVRTC.
    nvrtc: tuple[tuple[str, object], ...] = ()
    #: The driver JIT's options for a PTX image: ("max_registers", n), ("line_info", 1), ("debug", 1).
    jit: tuple[tuple[str, int], ...] = ()

    @property
    def debug(self) -> bool:
        return "-G" in self.canonical


def _one(op_name: str, field: str, raw: object) -> tuple[str, str, object]:
    """(canonical spelling, ProgramOptions field, value) of one option string."""
    if not isinstance(raw, str) or not raw.startswith("-"):
        raise SpecError(op_name, field, f"{raw!r} is not an option string.", "write options as NVRTC spells them, "
                        "e.g. options=['-use_fast_math', '-maxrregcount=64'].")  # fmt: skip
    body = raw.lstrip("-")
    name, _, value = body.partition("=")
    if name in _FLAGS and not value:
        canon, fld = _FLAGS[name]
        return canon, fld, True
    if name == "maxrregcount":
        if not re.fullmatch(r"\d+", value) or not 16 <= int(value) <= 255:
            raise SpecError(op_name, field, f"{raw!r} needs a register count from 16 to 255 (the hardware's range "
                            "per thread).", "write e.g. '-maxrregcount=64'.")  # fmt: skip
        return f"-maxrregcount={int(value)}", "max_register_count", int(value)
    if name in _BOOLS:
        if value not in ("true", "false"):
            raise SpecError(
                op_name, field, f"{raw!r} needs =true or =false.", f"write '-{name}=true' or '-{name}=false'."
            )
        return f"-{name}={value}", _BOOLS[name], value == "true"
    for prefix, instead in _ELSEWHERE.items():
        if name == prefix or (len(prefix) == 1 and name.startswith(prefix) and raw.startswith("-" + prefix)):
            raise SpecError(op_name, field, f"{raw!r} is set by another field of the declaration.",
                            f"use {instead} instead.")  # fmt: skip
    raise SpecError(op_name, field, f"{raw!r} is not an option opsmith passes to the compiler.",
                    f"use one of {', '.join(ACCEPTED)}; other settings belong to the source (#pragma unroll, "
                    "__launch_bounds__).")  # fmt: skip


def parse_options(op_name: str, options: Sequence[str] | None, flavor: str, field: str = "options") -> CompileOptions:
    """Check ``options`` for a ``flavor`` ("cuda", "ptx" or "cubin") kernel; raises SpecError naming the fix."""
    if not options:
        return CompileOptions()
    if isinstance(options, str):
        raise SpecError(op_name, field, f"{options!r} is one string, not a list of options.",
                        f"pass a list: options={options.split()!r}.")  # fmt: skip
    if flavor == "cubin":
        raise SpecError(op_name, field, "a cubin is machine code: no compiler runs on it, so it takes no options.",
                        "pass options when compiling it (nvcc -Xptxas ...), or register the PTX or the CUDA C++ "
                        "source instead.")  # fmt: skip
    seen: dict[str, tuple[str, object]] = {}
    for raw in options:
        canon, fld, value = _one(op_name, field, raw)
        key = canon.partition("=")[0]
        if key in seen and seen[key][0] != canon:
            raise SpecError(op_name, field, f"{seen[key][0]!r} and {canon!r} set one option twice.", "keep one.")
        if flavor == "ptx" and key in _SOURCE_LEVEL:
            raise SpecError(op_name, field, f"{raw!r} changes how source becomes instructions, and PTX is compiled "
                            "already: its math instructions are fixed.", "compile the source with it (nvcc -ptx "
                            f"{raw} ...), or register the CUDA C++ source with options=[{raw!r}].")  # fmt: skip
        seen[key] = (canon, (fld, value))
    canonical = tuple(sorted(c for c, _ in seen.values()))
    if "-G" in canonical and not env.DEVICE_DEBUG.get():
        raise SpecError(op_name, field, "'-G' compiles device code without optimization (kernels run many times "
                        "slower; cuda-gdb's mode), which is refused in release builds.",
                        "use '-lineinfo' for profilers and compute-sanitizer, or set OPSMITH_DEVICE_DEBUG=1 for a "
                        "debugging session.")  # fmt: skip
    nvrtc = tuple(sorted(fv for _, fv in seen.values()))  # type: ignore[misc]
    jit = []
    for c in canonical:
        if c.startswith("-maxrregcount="):
            jit.append(("max_registers", int(c.partition("=")[2])))
        elif c == "-lineinfo":
            jit.append(("line_info", 1))
        elif c == "-G":
            jit.append(("debug", 1))
    return CompileOptions(canonical, nvrtc, tuple(jit))
