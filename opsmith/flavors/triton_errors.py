"""A Triton kernel that does not compile, as the op's ``CompileError``: the compiler's message, the kernel's lines
around the one it names, and the fix where a declaration causes the error. One constructor for the GPU compile
(``triton.TritonSource.build``) and the interpreter (``triton_traced``), so both say the same."""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import CompileError

__all__ = ["compile_error", "compile_fix"]


def compile_error(op_name: str, kernel: Any, err: Exception) -> CompileError:
    """``err`` (Triton's CompilationError, or the interpreter's error) raised compiling or running ``kernel``."""
    fn = getattr(kernel, "fn", kernel)
    excerpt = _kernel_excerpt(kernel, err) if hasattr(kernel, "fn") else ""
    return CompileError(op_name, getattr(fn, "__name__", "kernel"), str(err), excerpt, compile_fix(str(err)))


def compile_fix(log: str) -> str:
    """The fix for a Triton compile error a declaration causes, where the log names one ("" otherwise)."""
    if "arange's range must be a power of 2" in log:
        return ("Fix: a tl.arange's length must be a power of two, and the block size here comes from a size that "
                "is not one: bind it rounded up, DimSize('x', -1, name='BLOCK', bucket='pow2') or "
                "Size('pow2(N)', name='BLOCK'), as host code calls triton.next_power_of_2, and mask the loads and "
                "stores past the size.")  # fmt: skip
    return ""


def _kernel_excerpt(kernel: Any, err: Exception) -> str:
    try:
        lines, start = inspect.getsourcelines(kernel.fn)
    except (OSError, TypeError):
        return ""
    src = getattr(err, "src", None)
    node = getattr(err, "node", None)
    lineno = getattr(node, "lineno", None)
    if src is None or lineno is None:
        return "".join(f"   {start + k:4d} | {line}" for k, line in enumerate(lines[:12]))
    # Triton numbers the lines of the function from its ``def`` (decorators stripped).
    first = next((k for k, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)
    n = first + lineno - 1
    lo, hi = max(0, n - 2), min(len(lines), n + 3)
    return "".join(f"{'>>' if k == n else '  '} {start + k:4d} | {lines[k]}" for k in range(lo, hi))
