"""What a kernel's parameters are: types from the compiler, sizes from the binary, names from the source.

Types never come from reading the source text: NVRTC reports them (``flavors/cuda_cpp.py`` asks it for a
probe templated on the kernel's function type, decoded by ``mangling.py``), after the preprocessor,
typedefs, template defaults and namespaces. The cubin's own parameter sizes cross-check them
(``cubin.py``). The source text is read only for parameter *names* (binding by name): among the
definitions of the kernel's name in the text (an ``#ifdef`` may hold several), the one whose parameters
agree with the compiler's types gives them; when none or several disagreeing ones do, names are unknown
and binding is positional.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import torch

from .mangling import MangledType, probe_parameters

__all__ = [
    "DTYPE_OF_CTYPE",
    "SIZE_OF_CTYPE",
    "KernelParam",
    "kernel_base_name",
    "name_params",
    "params_from_probe",
    "parse_ptx_entry",
    "source_kernel_names",
]

# Canonical scalar type names used across opsmith: element types of pointers and by-value parameters.
DTYPE_OF_CTYPE: dict[str, torch.dtype] = {
    "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
    "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
    "bool": torch.bool, "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
}  # fmt: skip
SIZE_OF_CTYPE = {
    "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4,
    "i64": 8, "u64": 8, "bool": 1, "ptr": 8, "f8e4m3": 1, "f8e5m2": 1,
}  # fmt: skip

# Builtin types as the compiler spells them (x86-64 Linux: long is 64-bit, char is signed).
_BUILTIN = {
    "float": "f32", "double": "f64", "_Float16": "f16", "__bf16": "bf16", "int": "i32", "unsigned int": "u32",
    "long": "i64", "unsigned long": "u64", "long long": "i64", "unsigned long long": "u64", "short": "i16",
    "unsigned short": "u16", "char": "i8", "signed char": "i8", "unsigned char": "u8", "bool": "bool",
    "void": "void",
}  # fmt: skip
# CUDA's class types. As a pointee a vector type walks its scalar's data (a float4* reads float32 data four
# elements at a time); passed by value it is a struct, never a scalar.
_CLASS_ELEMENT = {
    "__half": "f16", "__nv_bfloat16": "bf16", "__nv_fp8_e4m3": "f8e4m3", "__nv_fp8_e5m2": "f8e5m2",
    "__half2": "f16", "__nv_bfloat162": "bf16", "float2": "f32", "float4": "f32", "double2": "f64",
    "int2": "i32", "int4": "i32", "uint2": "u32", "uint4": "u32", "char4": "i8", "uchar4": "u8",
}  # fmt: skip
_SCALAR_CLASS = {"__half": "f16", "__nv_bfloat16": "bf16"}  # classes a ScalarInput may fill by value
# What the source text spells, for choosing among several definitions (typedefs stay unknown: "?").
_TEXT_TYPES = {
    **_BUILTIN, "signed": "i32", "signed int": "i32", "unsigned": "u32", "long int": "i64",
    "long long int": "i64", "int32_t": "i32", "uint32_t": "u32", "int64_t": "i64", "uint64_t": "u64",
    "int16_t": "i16", "uint16_t": "u16", "int8_t": "i8", "uint8_t": "u8", "size_t": "u64", "ptrdiff_t": "i64",
    "half": "f16", "nv_bfloat16": "bf16", **{k: v for k, v in _CLASS_ELEMENT.items()},
}  # fmt: skip
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "__grid_constant__",
               "typename", "class"}  # fmt: skip
SLOT_PREFIX = "opsmith_T_"  # sentinel struct names that stand for {T_<input>} slots in the signature probe


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter as the compiler compiled it.

    ``name``: from the source text, "" when unknown. ``pointer``: passed as a device pointer. ``ctype``: the
    canonical element type of a pointer or the type of a by-value parameter (see ``DTYPE_OF_CTYPE``),
    ``"void"`` for ``void*``, ``"?"`` for a class by value or a pointee of unknown type. ``slot``: the
    ``{T_<input>}`` slot whose type this is (a generic kernel's ``const T* x``). ``size``: bytes in the
    parameter space (from the binary; 0 when it does not say). ``spelled``: the compiler's spelling."""

    name: str
    pointer: bool
    ctype: str
    spelled: str
    size: int = 0
    slot: str | None = None
    const: bool = False

    def describe(self) -> str:
        if not self.name or self.spelled == self.name:
            return self.spelled or self.name
        return f"{self.spelled} {self.name}"


def _scalar(t: MangledType, pointee: bool) -> tuple[str, str | None]:
    """(ctype, slot) of a pointee or by-value type."""
    if t.kind == "builtin":
        return _BUILTIN.get(t.name, "?"), None
    if t.kind == "class":
        if t.name.startswith(SLOT_PREFIX):
            return "?", t.name[len(SLOT_PREFIX) :]
        base = t.name.removeprefix("::")
        if pointee:
            return _CLASS_ELEMENT.get(base, "?"), None
        return _SCALAR_CLASS.get(base, "?"), None
    return "?", None


def params_from_probe(lowered: str) -> list[KernelParam]:
    """The parameters of the kernel whose function type instantiated ``opsmith_sig_probe`` (names empty)."""
    out = []
    for t in probe_parameters(lowered):
        if t.kind == "pointer" and t.inner is not None:
            ctype, slot = _scalar(t.inner, pointee=True)
            out.append(KernelParam("", True, ctype, t.spelled(), 8, slot, t.inner.const))
        elif t.kind == "reference":
            out.append(KernelParam("", False, "?", t.spelled()))  # a reference parameter cannot be filled
        else:
            ctype, slot = _scalar(t, pointee=False)
            size = SIZE_OF_CTYPE.get(ctype, 0) if ctype != "?" else 0
            out.append(KernelParam("", False, ctype, t.spelled(), size, slot))
    return out


def kernel_base_name(kernel_name: str) -> str:
    """The unqualified function name of ``mylib::axpy<float>`` or ``ov(const float*, int)``: ``axpy``, ``ov``."""
    name = kernel_name.split("(", 1)[0].split("<", 1)[0]
    return name.split("::")[-1].strip()


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


def _text_param(text: str) -> tuple[str, bool, str]:
    """(name, pointer, loosely read ctype) of one parameter as written; "?" where the text does not say."""
    text = re.sub(r"\s*=.*$", "", text.strip())  # default arguments
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", text)
    text = re.sub(r"\[\s*\d*\s*\]$", "*", text)
    pointer = "*" in text or "&" in text
    words = re.findall(r"[A-Za-z_]\w*(?:::\w+)*", text.replace("*", " ").replace("&", " "))
    words = [w for w in words if w not in _QUALIFIERS]
    name = words[-1] if len(words) >= 2 else ""
    spelled = " ".join(words[:-1] if len(words) >= 2 else words).replace("std::", "")
    return name, pointer, _TEXT_TYPES.get(spelled, "?")


_GLOBAL = r"__global__(?:[^;{(]|\((?:[^()]|\([^()]*\))*\))*?\b"  # attributes may nest parentheses two deep


def _definitions(source: str, base: str) -> list[list[tuple[str, bool, str]]]:
    """Every ``__global__`` declaration or definition of ``base`` in the text, as parameter lists."""
    src = _strip_comments(source)
    out = []
    for m in re.finditer(_GLOBAL + re.escape(base) + r"\s*\(", src):
        i, depth = m.end(), 1
        while i < len(src) and depth:
            depth += {"(": 1, ")": -1}.get(src[i], 0)
            i += 1
        if depth:
            continue
        body = src[m.end() : i - 1].strip()
        out.append([] if body in ("", "void") else [_text_param(p) for p in _split_top_level(body)])
    return out


def source_kernel_names(source: str) -> list[str]:
    """Names of the ``__global__`` functions the text defines (for error messages)."""
    src = _strip_comments(source)
    return sorted(set(re.findall(_GLOBAL + r"(\w+)\s*\(", src)) - {"opsmith_sig_probe"})


def name_params(source: str, kernel_name: str, params: list[KernelParam]) -> tuple[list[KernelParam], str]:
    """``params`` with names from the source text, and "" - or, when names cannot be known, ``params``
    unchanged and why (for the error a binding by name would give)."""
    base = kernel_base_name(kernel_name)
    agree: list[list[str]] = []
    for cand in _definitions(source, base):
        if len(cand) != len(params):
            continue
        if all(
            p.pointer == ptr and (t == "?" or p.ctype == "?" or t == p.ctype)
            for p, (_, ptr, t) in zip(params, cand, strict=True)
        ):
            agree.append([n for n, _, _ in cand])
    names = {tuple(a) for a in agree}
    if len(names) != 1:
        why = (f"no definition of '{base}' in the source text matches the compiled parameters "
               f"({', '.join(p.spelled for p in params)})" if not names else
               f"the source text has {len(names)} definitions of '{base}' with these parameter types and different names")  # fmt: skip
        return params, why
    (chosen,) = names
    if not all(chosen):
        return params, f"a parameter of '{base}' has no name in the source text"
    return [replace(p, name=n) for p, n in zip(params, chosen, strict=True)], ""


_PTX_TYPES = {"f16": "f16", "f32": "f32", "f64": "f64", "s8": "i8", "u8": "u8", "b8": "u8", "s16": "i16",
              "u16": "u16", "b16": "u16", "s32": "i32", "u32": "u32", "b32": "u32", "s64": "i64",
              "u64": "u64", "b64": "u64"}  # fmt: skip


def parse_ptx_entry(ptx: str, kernel_name: str) -> list[KernelParam] | None:
    """Parameters of ``.entry kernel_name`` in PTX text. PTX does not say what a 64-bit parameter points
    at, so pointers show as 8-byte ``u64`` values; callers check sizes, not element types. Names are not
    kept: PTX parameter names are the compiler's (``k_param_0``), not the source's."""
    m = re.search(r"\.entry\s+" + re.escape(kernel_name) + r"\s*\((?P<params>[^)]*)\)", ptx)
    if m is None:
        return None
    out = []
    for p in _split_top_level(m.group("params")):
        text = p.strip()
        types = [t[1:] for t in text.split() if t.startswith(".") and t[1:] in _PTX_TYPES]
        arr = re.search(r"\[(\d+)\]\s*$", text)
        ctype = _PTX_TYPES.get(types[0], "?") if types and not arr else "?"
        size = int(arr.group(1)) * SIZE_OF_CTYPE.get(_PTX_TYPES.get(types[0], "u8"), 1) if arr and types else \
            SIZE_OF_CTYPE.get(ctype, 0)  # fmt: skip
        out.append(KernelParam("", ".ptr" in text, ctype, text, size))
    return out
