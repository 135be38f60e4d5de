"""Small pieces of C++ the generator writes: types, names, literals, expressions.

Expressions are the record's launch-geometry trees (``geometry.py``), printed for real tensors (int64
arithmetic) or for the Meta kernel and backward programs (``c10::SymInt``, so symbolic sizes stay symbolic).
"""

from __future__ import annotations

import re
from typing import Any

import torch

__all__ = ["AT_DTYPE", "CTYPE", "cpp_expr", "cpp_str", "ident"]

AT_DTYPE = {
    torch.float32: "at::kFloat", torch.float64: "at::kDouble", torch.float16: "at::kHalf",
    torch.bfloat16: "at::kBFloat16", torch.int32: "at::kInt", torch.int64: "at::kLong", torch.int16: "at::kShort",
    torch.int8: "at::kChar", torch.uint8: "at::kByte", torch.bool: "at::kBool",
    torch.float8_e4m3fn: "at::kFloat8_e4m3fn", torch.float8_e5m2: "at::kFloat8_e5m2",
}  # fmt: skip
#: The C++ type a kernel parameter of each canonical ctype is passed as.
CTYPE = {"ptr": "void*", "f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t", "i32": "int32_t",
         "u32": "uint32_t", "i64": "int64_t", "u64": "uint64_t", "i16": "int16_t", "u16": "uint16_t",
         "i8": "int8_t", "u8": "uint8_t", "bool": "bool"}  # fmt: skip


def ident(text: str) -> str:
    """A C++ identifier from an op name or label: ``myns::relu`` -> ``myns_relu``."""
    return re.sub(r"\W", "_", text)


def cpp_str(text: str) -> str:
    """A C++ string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def cpp_expr(expr: Any, refs: dict[str, str], sym: bool = False) -> str:
    """C++ for a geometry expression tree; ``refs`` maps "i0"/"o1" (and "sm_count", "dev") to C++.
    ``sym``: over ``c10::SymInt`` (sym_size / sym_numel), else int64_t."""
    if isinstance(expr, bool):
        raise ValueError(f"not a size: {expr!r}")
    if isinstance(expr, int):
        return f"c10::SymInt({expr})" if sym else f"int64_t({expr})"
    if isinstance(expr, float):
        return repr(expr)
    op, *args = expr
    t = refs.get(args[0], args[0]) if op in ("numel", "size", "stride", "lead", "prod") else ""
    if op == "numel":
        return f"{t}.sym_numel()" if sym else f"{t}.numel()"
    if op == "size":
        return f"{t}.sym_size({args[1]})" if sym else f"{t}.size({args[1]})"
    if op == "stride":
        return f"{t}.sym_stride({args[1]})" if sym else f"{t}.stride({args[1]})"
    if op == "lead":
        if sym:
            raise ValueError("lead() is a launch expression only")
        return f"opsmith::lead({t}, {args[1]})"
    if op == "prod":
        size = "sym_size" if sym else "size"
        return "(" + " * ".join(f"{t}.{size}({a})" for a in args[1]) + ")" if args[1] else cpp_expr(1, refs, sym)
    if op == "sm_count":
        n = refs["sm_count"]
        return f"c10::SymInt({n})" if sym else n
    if op == "pow2":
        inner = cpp_expr(args[0], refs, sym)
        return (
            f"c10::SymInt(opsmith::pow2(({inner}).guard_int(__FILE__, __LINE__)))" if sym else f"opsmith::pow2({inner})"
        )
    a, b = (cpp_expr(x, refs, sym) for x in args)
    if op == "cdiv":
        return f"(({a} + {b} - 1) / {b})"
    if op == "div":
        return f"({a} / {b})"
    if op == "mul":
        return f"({a} * {b})"
    if op == "add":
        return f"({a} + {b})"
    if op == "sub":
        return f"({a} - {b})"
    if op in ("min", "max"):
        return f"({a}).{op}({b})" if sym else f"std::{op}<int64_t>({a}, {b})"
    raise ValueError(f"unknown launch expression {expr!r}")
