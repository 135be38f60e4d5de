"""What a kernel's own code says about its parameters: C++ signatures, PTX entries and cubin symbols.

opsmith knows every pointer's element type, declared or read here, so a bf16 tensor never reaches a
``float*`` kernel (the bug of the reference implementation, where ``dtype=None`` meant "no check").
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import torch

__all__ = [
    "CParam",
    "DTYPE_OF_CTYPE",
    "SIZE_OF_CTYPE",
    "cubin_symbols",
    "parse_cuda_signature",
    "parse_ptx_entry",
]

# Canonical scalar type names used across opsmith: element types of pointers and by-value parameters.
DTYPE_OF_CTYPE: dict[str, torch.dtype] = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i8": torch.int8,
    "u8": torch.uint8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "bool": torch.bool,
}
SIZE_OF_CTYPE = {
    "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2,
    "i32": 4, "u32": 4, "i64": 8, "u64": 8, "bool": 1, "ptr": 8,
}  # fmt: skip

_C_TYPES = {
    "float": "f32", "double": "f64", "__half": "f16", "half": "f16", "__nv_bfloat16": "bf16",
    "nv_bfloat16": "bf16", "int": "i32", "signed": "i32", "signed int": "i32", "int32_t": "i32",
    "unsigned": "u32", "unsigned int": "u32", "uint32_t": "u32", "long long": "i64",
    "long long int": "i64", "int64_t": "i64", "long": "i64", "ptrdiff_t": "i64", "ssize_t": "i64",
    "unsigned long long": "u64", "unsigned long": "u64", "size_t": "u64", "uint64_t": "u64",
    "short": "i16", "int16_t": "i16", "unsigned short": "u16", "uint16_t": "u16", "char": "i8",
    "signed char": "i8", "int8_t": "i8", "unsigned char": "u8", "uint8_t": "u8", "bool": "bool",
    "void": "void",
    # Vector types: a float4* walks float32 data four elements at a time.
    "float2": "f32", "float4": "f32", "double2": "f64", "__half2": "f16", "half2": "f16",
    "__nv_bfloat162": "bf16", "int2": "i32", "int4": "i32",
}  # fmt: skip
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "__grid_constant__"}


@dataclass(frozen=True)
class CParam:
    """One kernel parameter. ``pointer``: passed as a device pointer. ``ctype``: canonical element or value
    type (see DTYPE_OF_CTYPE), ``"void"`` for ``void*``, or ``"?"`` when the type is unknown (a struct)."""

    name: str
    pointer: bool
    ctype: str
    spelled: str


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _parse_param(text: str, subst: dict[str, str]) -> CParam:
    text = re.sub(r"\s*=.*$", "", text.strip())  # default arguments
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", text)
    text = re.sub(r"\[\s*\]$", "*", text)
    stars = text.count("*") + text.count("&")
    words = re.findall(r"[A-Za-z_]\w*(?:::\w+)*", text.replace("*", " ").replace("&", " "))
    words = [w for w in words if w not in _QUALIFIERS]
    name = words[-1] if len(words) >= 2 else ""
    type_words = words[:-1] if len(words) >= 2 else words
    type_words = [subst.get(w, w) for w in type_words]
    spelled = " ".join(type_words).replace("std::", "")
    ctype = _C_TYPES.get(spelled, "?")
    return CParam(name=name, pointer=stars > 0, ctype=ctype, spelled=text.strip())


def parse_cuda_signature(source: str, kernel_name: str) -> list[CParam] | None:
    """Parameters of ``__global__`` kernel ``kernel_name`` (``"name"`` or ``"name<float, 4>"``) in
    ``source``, or ``None`` when no such definition is found (macros, generated code)."""
    base, _, targs = kernel_name.partition("<")
    base = base.strip()
    src = _strip_comments(source)
    # Attributes between __global__ and the name may nest parentheses two deep: __launch_bounds__(T, (a / b)).
    pat = re.compile(r"(template\s*<(?P<tparams>[^{;]*?)>\s*)?(?:[\w\"\s()]*?)__global__(?:[^;{(]|\((?:[^()]|\([^()]*\))*\))*?\b"
                     + re.escape(base) + r"\s*\(")  # fmt: skip
    m = pat.search(src)
    if m is None:
        return None
    start, depth = m.end(), 1
    i = start
    while i < len(src) and depth:
        depth += {"(": 1, ")": -1}.get(src[i], 0)
        i += 1
    if depth:
        return None
    subst: dict[str, str] = {}
    if m.group("tparams") and targs:
        names = [re.findall(r"\w+", p)[-1] for p in _split_top_level(m.group("tparams")) if p.strip()]
        values = [v.strip() for v in _split_top_level(targs.rstrip().removesuffix(">"))]
        subst = dict(zip(names, values, strict=False))
    body = src[start : i - 1].strip()
    if body in ("", "void"):
        return []
    return [_parse_param(p, subst) for p in _split_top_level(body)]


_PTX_TYPES = {"f16": "f16", "f32": "f32", "f64": "f64", "s8": "i8", "u8": "u8", "b8": "u8", "s16": "i16",
              "u16": "u16", "b16": "u16", "s32": "i32", "u32": "u32", "b32": "u32", "s64": "i64",
              "u64": "u64", "b64": "u64"}  # fmt: skip


def parse_ptx_entry(ptx: str, kernel_name: str) -> list[CParam] | None:
    """Parameters of ``.entry kernel_name`` in PTX text. PTX does not say what a 64-bit parameter points
    at, so pointers show as ``u64`` values with ``ctype="u64"``; callers check sizes, not element types."""
    m = re.search(r"\.entry\s+" + re.escape(kernel_name) + r"\s*\((?P<params>[^)]*)\)", ptx)
    if m is None:
        return None
    out = []
    for p in _split_top_level(m.group("params")):
        text = p.strip()
        types = [t[1:] for t in text.split() if t.startswith(".") and t[1:] in _PTX_TYPES]
        nm = re.search(r"([A-Za-z_$%][\w$]*)\s*(\[\d+\])?$", text)
        is_array = bool(nm and nm.group(2))
        ctype = types[0] if types and not is_array else "?"
        out.append(
            CParam(
                name=nm.group(1) if nm else text, pointer=".ptr" in text, ctype=_PTX_TYPES.get(ctype, "?"), spelled=text
            )
        )
    return out


def cubin_symbols(cubin: bytes) -> set[str]:
    """Names of the function symbols in an ELF64 cubin (read from its symbol table; no driver needed)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return set()
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names: set[str] = set()
    for _sh_name, sh_type, _f, _a, off, size, link, _i, _al, entsize in sections:
        if sh_type != 2 or not entsize:  # SHT_SYMTAB
            continue
        stroff = sections[link][4]
        for k in range(size // entsize):
            st_name, st_info = struct.unpack_from("<IB", cubin, off + k * entsize)
            if st_info & 0xF == 2:  # STT_FUNC
                end = cubin.index(b"\0", stroff + st_name)
                names.add(cubin[stroff + st_name : end].decode("utf-8", "replace"))
    return names
