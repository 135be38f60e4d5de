"""Small pieces of C++ the generator writes: types, names, literals, comments, expressions.

Nothing a user wrote reaches the C++ source unchecked: op names and argument names are ASCII identifiers
(validated at registration) and are still mapped here so they can never meet a C++ keyword, a macro, a
reserved identifier or a local the generator declares; strings go through ``cpp_str``; comments through
``comment``, which keeps only characters that cannot end a comment or a line.

Expressions are the size-expression trees of ``expr.py``, printed for concrete sizes over ``__int128``
(``opsmith::i128``: every intermediate of ``expr.py``'s arithmetic fits unless the plan marked the expression
wide, when every step is checked), or for symbolic sizes over ``c10::SymInt`` (Meta kernels' allocations,
backward programs' buffers).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = [
    "AT_DTYPE",
    "CTYPE",
    "SCALAR_TYPE",
    "comment",
    "cpp_expr",
    "cpp_float",
    "cpp_locals",
    "cpp_str",
    "op_scope",
    "sym_expr",
]

AT_DTYPE = {
    torch.float32: "at::kFloat", torch.float64: "at::kDouble", torch.float16: "at::kHalf",
    torch.bfloat16: "at::kBFloat16", torch.int32: "at::kInt", torch.int64: "at::kLong", torch.int16: "at::kShort",
    torch.int8: "at::kChar", torch.uint8: "at::kByte", torch.bool: "at::kBool",
    torch.float8_e4m3fn: "at::kFloat8_e4m3fn", torch.float8_e5m2: "at::kFloat8_e5m2",
}  # fmt: skip
#: The same as the header-only enum, which both a stable-ABI library and ATen (whose at::ScalarType it is) know.
SCALAR_TYPE = {t: "c10::ScalarType::" + v.removeprefix("at::k") for t, v in AT_DTYPE.items()}
#: The C++ type a kernel parameter of each canonical ctype is passed as.
CTYPE = {"ptr": "void*", "f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t", "i32": "int32_t",
         "u32": "uint32_t", "i64": "int64_t", "u64": "uint64_t", "i16": "int16_t", "u16": "uint16_t",
         "i8": "int8_t", "u8": "uint8_t", "bool": "bool"}  # fmt: skip

_KEYWORDS = frozenset(["alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq"])  # fmt: skip
# Object-like macros of the headers a library includes, and names the generated code uses unqualified.
_MACROS = frozenset(["NULL", "EOF", "INFINITY", "NAN", "HUGE_VAL", "HUGE_VALF", "errno", "stdin", "stdout", "stderr", "CHAR_BIT", "INT8_MAX", "INT16_MAX", "INT32_MAX", "INT64_MAX", "INT8_MIN", "INT16_MIN", "INT32_MIN", "INT64_MIN", "UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX", "SIZE_MAX", "FLT_MAX", "DBL_MAX", "RAND_MAX", "EXIT_SUCCESS", "EXIT_FAILURE", "CUDA_VERSION", "TORCH_VERSION", "assert", "major", "minor", "linux", "unix", "at", "c10", "std", "torch", "opsmith"])  # fmt: skip
# Locals the generator declares (a user name matching one is renamed).
_GENERATED = re.compile(r"(op|dev|c|v|st|key|args|sizes|none|ctx|saved|grads|result|needs|outs|got|mask|run|plan|r"
                        r"|spec|found|served|miss|dtypes_held|find|variants|decisions|decided|learned_\w+|learn_\w+|python_path"
                        r"|[gnxoabsvu]\d+(_\w*)?|arg\d+|s\d+_\d+|[a-z]+_in)")  # fmt: skip


def cpp_locals(names: Sequence[str]) -> list[str]:
    """C++ locals for the op's arguments: the declared name where it is safe, else ``u<position>_<name>``
    (unique: the position is). Unsafe: a keyword, a macro or namespace of the headers, a reserved identifier
    (a leading underscore, two underscores), a generated local."""
    out = []
    for k, n in enumerate(names):
        unsafe = n in _KEYWORDS or n in _MACROS or n.startswith("_") or "__" in n or bool(_GENERATED.fullmatch(n))
        out.append(f"u{k}_{n.strip('_')}" if unsafe else n)
    return out


def op_scope(op_name: str) -> tuple[str, str]:
    """(namespace, op scope) of an op's C++: ``myns::relu`` -> ``("ns_myns", "op_relu")``. Two op names never
    share one (``a__b::c`` and ``a::b__c`` do not), and neither part can be a keyword."""
    ns, name = op_name.split("::")
    return f"ns_{ns}", f"op_{name}"


def cpp_str(text: str) -> str:
    """A C++ string literal (any text: quotes, backslashes, newlines and non-ASCII escaped)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif " " <= ch <= "~" and ch != "?":  # '?' escaped: no trigraph can form
            out.append(ch)
        else:
            out.append("".join(f'\\x{b:02x}""' for b in ch.encode()))
    return '"' + "".join(out) + '"'


def comment(text: str) -> str:
    """A ``//`` comment of ``text`` (only what cannot end the comment or the line survives)."""
    safe = re.sub(r"[^A-Za-z0-9_ ,.:()\[\]<>=+\-*'/]", "?", text).replace("*/", "* /")
    return f"// {safe}"


def cpp_float(v: float) -> str:
    """A double literal, infinities and NaN included."""
    if math.isnan(v):
        return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(v):
        return f"{'-' if v < 0 else ''}std::numeric_limits<double>::infinity()"
    return repr(float(v))


def _lit(v: int) -> str:
    """An integer literal (as i128 where it does not fit int64)."""
    if -(2**63) <= v < 2**63:
        return f"int64_t({v})" if not -(2**31) <= v < 2**31 else str(v)
    return f"opsmith::i128_of({cpp_str(str(v))})"


_CPP_LOGIC = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&&", "or": "||"}


def cpp_expr(expr: Any, refs: Mapping[str, str], *, where: str | None = None, wide: bool = False,
             checked_div: Any = None) -> str:  # fmt: skip
    """C++ (over ``opsmith::i128``) for a size expression; ``refs`` maps "i0"/"o1"/vars/"sm_count" to C++.
    ``where``: the C++ of the ``opsmith::Where`` a failing division or overflow names; ``checked_div(divisor)``
    says whether a division needs the zero check (the plan's facts decide, as for the Python printer)."""

    def rec(e: Any) -> str:
        if isinstance(e, bool):  # a heuristic's truth value
            return "opsmith::i128(1)" if e else "opsmith::i128(0)"
        if isinstance(e, int):
            return _lit(e)
        if isinstance(e, float):
            return cpp_float(e)
        op, *args = e
        if op == "not":
            return f"opsmith::i128(!({rec(args[0])}))"
        if op == "where":
            return f"(({rec(args[0])}) ? opsmith::i128({rec(args[1])}) : opsmith::i128({rec(args[2])}))"
        t = refs.get(args[0], args[0]) if op in ("numel", "size", "stride", "lead", "prod", "present") else ""
        if op == "present":
            return f"opsmith::i128({t}.defined())"
        if op == "numel":
            return f"{t}.numel()"
        if op == "size":
            return f"{t}.size({args[1]})"
        if op == "stride":
            return f"{t}.stride({args[1]})"
        if op == "var":
            return refs[args[0]]
        if op == "lead":
            return f"opsmith::lead({t}, {args[1]})"
        if op == "prod":
            return f"opsmith::prod({t}, {{{', '.join(map(str, args[1]))}}})"
        if op == "sm_count":
            return refs["sm_count"]
        if op == "pow2":
            return f"opsmith::pow2({rec(args[0])}{_w()})"
        a, b = rec(args[0]), rec(args[1])
        if op in _CPP_LOGIC:
            return f"opsmith::i128(({a}) {_CPP_LOGIC[op]} ({b}))"
        if op in ("div", "cdiv", "mod"):
            fn = {"div": "floordiv", "cdiv": "cdiv", "mod": "floormod"}[op]
            chk = where is not None and checked_div is not None and checked_div(args[1])
            return f"opsmith::{fn}({a}, {b}{', ' + where if chk else ''})"
        return f"opsmith::{op}({a}, {b}{_w() if op in ('add', 'sub', 'mul') else ''})"

    def _w() -> str:
        return f", {where}" if wide and where is not None else ""

    return rec(expr)


def sym_expr(expr: Any, refs: Mapping[str, str]) -> str:
    """C++ over ``c10::SymInt`` (symbolic sizes stay symbolic; concrete ones compute as ``cpp_expr`` does)."""
    if isinstance(expr, bool):
        raise ValueError(f"not a size: {expr!r}")
    if isinstance(expr, int):
        return f"c10::SymInt({_lit(expr)})"
    op, *args = expr
    if op == "where" and isinstance(args[0], list) and args[0][0] == "present":  # an optional tensor's size
        c = refs.get(args[0][1], args[0][1])
        return f"({c}.defined() ? {sym_expr(args[1], refs)} : {sym_expr(args[2], refs)})"
    t = refs.get(args[0], args[0]) if op in ("numel", "size", "stride") else ""
    if op == "numel":
        return f"{t}.sym_numel()"
    if op == "size":
        return f"{t}.sym_size({args[1]})"
    if op == "stride":
        return f"{t}.sym_stride({args[1]})"
    if op == "sm_count":
        return f"c10::SymInt({refs['sm_count']})"
    if op == "pow2":
        return f"opsmith::sym_pow2({sym_expr(args[0], refs)})"
    if op in ("lead", "prod", "var"):
        raise ValueError(f"{op}() is a launch expression only")
    a, b = sym_expr(args[0], refs), sym_expr(args[1], refs)
    fn = {"add": "sym_add", "sub": "sym_sub", "mul": "sym_mul", "div": "sym_floordiv", "cdiv": "sym_cdiv",
          "min": "sym_min", "max": "sym_max"}[op]  # fmt: skip
    return f"opsmith::{fn}({a}, {b})"
