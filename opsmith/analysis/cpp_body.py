"""Reads of a CUDA C++ kernel body from its text (comments and string literals stripped).

The body is the brace-balanced block after the ``__global__`` definition of the kernel's name. A parameter is
read where an identifier token equals it. Dependencies come from assignments (``T* row = x + r * stride;``,
``i += stride``); addresses from subscripts (``row[c]``: ``row``'s and ``c``'s dependencies). Pointer arithmetic
read through ``*`` or passed to a helper is not followed: such a kernel's findings are fewer, never wrong.
"""

from __future__ import annotations

import re

from ..declare.signature import _split_top_level, _strip_comments, _text_param, kernel_base_name
from .reads import KernelReads, addresses_of

__all__ = ["cpp_reads"]

_GLOBAL = re.compile(r"__global__\s+(?:[\w:<>,\s\*&]*?\s)?(\w+)\s*\(")
_IDENT = re.compile(r"(?<![\w.])(?<!->)[A-Za-z_]\w*")  # not a member: blockIdx.x is no parameter x
_SUBSCRIPT = re.compile(r"([A-Za-z_]\w*)\s*\[")


def _strip_strings(src: str) -> str:
    return re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', src)


def _balanced(src: str, i: int, open_: str, close: str) -> int:
    """The index just past the bracket that closes the one at ``i``."""
    depth = 0
    for j in range(i, len(src)):
        depth += {open_: 1, close: -1}.get(src[j], 0)
        if depth == 0:
            return j + 1
    raise ValueError("unbalanced")


def _definition(src: str, base: str) -> tuple[list[str], str] | None:
    """Parameter names and body of the (last) ``__global__`` definition of ``base``."""
    found = None
    for m in _GLOBAL.finditer(src):
        if m.group(1) != base:
            continue
        end = _balanced(src, m.end() - 1, "(", ")")
        rest = src[end:].lstrip()
        if not rest.startswith("{"):
            continue  # a declaration
        start = end + (len(src[end:]) - len(rest))
        body = src[start : _balanced(src, start, "{", "}")]
        text = src[m.end() : end - 1].strip()
        names = [] if text in ("", "void") else [_text_param(p)[0] for p in _split_top_level(text)]
        found = (names, body)
    return found


def _assignments(s: str) -> list[tuple[str, str, bool]]:
    """``(name, value, compound)`` of each assignment in a statement (``name = v``, ``name += v``, in a ``for`` header
    too). The value ends at an unmatched ``)`` or a top-level ``,``. A store through a subscript or a pointer
    (``y[i] = x[i]``, ``*p = v``) moves values, not addresses, and is left out."""
    out = []
    for m in re.finditer(r"(?<![=!<>])=(?!=)", s):
        k = m.start()
        compound = bool(k and s[k - 1] in "+-*/%&|^")
        if compound:
            k -= 1
        if k >= 2 and s[k - 2 : k] in ("<<", ">>"):
            k, compound = k - 2, True
        left = s[:k].rstrip()
        name = re.search(r"([A-Za-z_]\w*)$", left)
        if not name or left[: name.start()].rstrip().endswith(("]", ".", "->")) or left.endswith("]"):
            continue
        depth, end = 0, len(s)
        for j in range(m.end(), len(s)):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(s[j], 0)
            if depth < 0 or (depth == 0 and s[j] == ","):
                end = j
                break
        out.append((name.group(1), s[m.end() : end], compound))
    return out


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\(([^)]*)\))?[ \t]*(.*)$", re.M)


def _macros(src: str) -> dict[str, tuple[list[str] | None, str]]:
    """The source's ``#define``s: name -> (parameters, or None for an object-like macro; replacement)."""
    joined = re.sub(r"\\\n", " ", src)
    return {m.group(1): (None if m.group(2) is None else [p.strip() for p in m.group(3).split(",") if p.strip()],
                         m.group(4).strip()) for m in _DEFINE.finditer(joined)}  # fmt: skip


def _expand(body: str, macros: dict[str, tuple[list[str] | None, str]]) -> str:
    """``body`` with the macros it uses replaced, as the preprocessor does (nested ones too, 8 levels deep), so a
    stride read inside ``#define AT(p, r, c) (p)[(r) * ld + (c)]`` is read where ``AT`` is used; parentheses
    around a single name dropped, so ``(p)[i]`` reads as the subscript ``p[i]``."""
    for _ in range(8):
        before = body
        for name, (params, text) in macros.items():
            if params is None:
                body = re.sub(rf"\b{name}\b", lambda _m, t=text: f"({t})", body)
                continue
            out, i = [], 0
            for m in re.finditer(rf"\b{name}\s*\(", body):
                if m.start() < i:
                    continue
                end = _balanced(body, m.end() - 1, "(", ")")
                args = _split_top_level(body[m.end() : end - 1])
                text_k = text
                for p, a in zip(params, args, strict=False):
                    text_k = re.sub(rf"\b{p}\b", lambda _m, a=a: f"({a})", text_k)
                out += [body[i : m.start()], f"({text_k})"]
                i = end
            body = "".join(out) + body[i:]
        if body == before:
            break
    while (bare := re.sub(r"\(\s*([A-Za-z_]\w*)\s*\)", r" \1 ", body)) != body:  # ((p)) -> p; (float)x -> float x
        body = bare
    return body


def cpp_reads(source: str, kernel_name: str) -> KernelReads | None:
    src = _strip_strings(_strip_comments(source))
    got = _definition(src, kernel_base_name(kernel_name))
    if got is None or not all(got[0]):
        return None
    params, body = got
    body = _expand(body, _macros(src))
    tokens = set(_IDENT.findall(body))
    deps: dict[str, set[str]] = {}
    given: dict[str, int] = {}  # how many assignments replace each name's value (``p += d`` accumulates)
    pset = set(params)
    statements = [s for s in re.split(r"[;{}]", body) if s.strip()]
    for s in statements:
        for name, value, compound in _assignments(s):
            names = set(_IDENT.findall(value))
            deps.setdefault(name, set()).update(names)
            if not compound and name not in names:
                given[name] = given.get(name, 0) + 1
    accesses = []
    for s in statements:
        for m in _SUBSCRIPT.finditer(s):
            close = _balanced(s, m.end() - 1, "[", "]") if s.count("[") == s.count("]") else len(s)
            accesses.append({m.group(1), *_IDENT.findall(s[m.end() : close])})
    several = {n for n, c in given.items() if c > 1}
    return KernelReads(tuple(params), frozenset(tokens & pset), addresses_of(accesses, deps, pset), "the CUDA C++ text",
                       addresses_of(accesses, deps, pset, several))  # fmt: skip
