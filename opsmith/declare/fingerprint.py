"""The registration fingerprint: a description of a declaration that is equal exactly when the declaration
is, in this process or another.

Registering a name again with an equal fingerprint returns the existing op (re-running a notebook cell);
with another it is refused. So functions in the declaration (a ``Custom`` geometry, a backward, a
``meta_fn``) are described by what they compute: their bytecode, constants (nested code objects
described the same way, never by address), default arguments, closure values and the globals they read.
A value that cannot be described stably (an object whose repr is an address) is described by its
identity: the same object is equal, a re-created one is not, so a change is never mistaken for a rerun.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import types
from typing import Any

import torch

__all__ = ["declaration_fingerprint", "describe", "differences"]

_MAX_DEPTH = 8  # functions calling functions: deep enough for real helpers, bounded for recursion


def _code(code: types.CodeType, seen: set[int], depth: int) -> dict:
    consts = [
        _code(c, seen, depth) if isinstance(c, types.CodeType) else describe(c, seen, depth) for c in code.co_consts
    ]
    return {"bytecode": hashlib.sha256(code.co_code).hexdigest(), "consts": consts, "names": list(code.co_names),
            "args": code.co_argcount, "kwonly": code.co_kwonlyargcount, "vars": list(code.co_varnames)}  # fmt: skip


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def _function(fn: types.FunctionType, seen: set[int], depth: int) -> dict:
    inner = getattr(fn, "__wrapped__", None)
    if isinstance(inner, types.FunctionType):
        # A decorated function (functools.wraps; CuTe DSL's @cute.jit and @cute.kernel): the function written,
        # and where the decorator lives. The wrapper's closure holds the decorator's runtime state (CuTe DSL:
        # a ContextVar), which is neither stable across processes nor part of what was written.
        return {"decorated": f"{fn.__module__}.{fn.__qualname__}", "wrapped": _function(inner, seen, depth)}
    d: dict[str, Any] = {"fn": f"{fn.__module__}.{fn.__qualname__}"}
    if depth > _MAX_DEPTH:
        return {**d, "bytecode": hashlib.sha256(fn.__code__.co_code).hexdigest()}
    d["code"] = _code(fn.__code__, seen, depth + 1)
    d["defaults"] = describe(fn.__defaults__, seen, depth + 1)
    d["kwdefaults"] = describe(fn.__kwdefaults__, seen, depth + 1)
    cells = []
    for cell in fn.__closure__ or ():
        try:
            cells.append(describe(cell.cell_contents, seen, depth + 1))
        except ValueError:  # an empty cell (a name assigned later in the enclosing scope)
            cells.append("empty-cell")
    d["closure"] = cells
    g = fn.__globals__
    d["globals"] = {n: describe(g[n], seen, depth + 1) for n in sorted(_names(fn.__code__)) if n in g}
    return d


def describe(obj: Any, seen: set[int] | None = None, depth: int = 0) -> Any:
    """A JSON-able description of ``obj`` that is stable across processes where ``obj`` is (see the module
    docstring)."""
    seen = set() if seen is None else seen
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, torch.dtype | torch.device):
        return str(obj)
    if isinstance(obj, types.ModuleType):
        return f"module:{obj.__name__}"
    if isinstance(obj, type):
        return f"type:{obj.__module__}.{obj.__qualname__}"
    own = getattr(obj, "fingerprint", None)
    if isinstance(own, str) and hasattr(obj, "record"):  # an opsmith op: its own declaration
        return f"op:{obj.qualname}:{own}"
    if isinstance(obj, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return f"torch-op:{obj}"
    if id(obj) in seen:
        return "cycle"
    seen = seen | {id(obj)}
    if dataclasses.is_dataclass(obj):
        return {
            type(obj).__name__: {f.name: describe(getattr(obj, f.name), seen, depth) for f in dataclasses.fields(obj)}
        }
    if isinstance(obj, list | tuple):
        return [describe(v, seen, depth) for v in obj]
    if isinstance(obj, dict):
        return {str(k): describe(v, seen, depth) for k, v in obj.items()}
    if isinstance(obj, set | frozenset):
        return sorted((describe(v, seen, depth) for v in obj), key=repr)
    if isinstance(obj, types.FunctionType):
        return _function(obj, seen, depth)
    if isinstance(obj, functools.partial):
        return {"partial": describe(obj.func, seen, depth), "args": describe(obj.args, seen, depth),
                "keywords": describe(obj.keywords, seen, depth)}  # fmt: skip
    if isinstance(obj, types.MethodType):
        return {"method": describe(obj.__func__, seen, depth), "self": describe(obj.__self__, seen, depth)}
    if isinstance(obj, types.BuiltinFunctionType | types.BuiltinMethodType):
        return f"builtin:{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', obj.__name__)}"
    text = repr(obj)
    if " at 0x" in text or len(text) > 4096:
        return f"object:{type(obj).__module__}.{type(obj).__qualname__}@{id(obj)}"
    return f"repr:{type(obj).__qualname__}:{text}"


def declaration_fingerprint(parts: dict[str, Any]) -> tuple[str, Any]:
    """(the fingerprint, the description it hashes): the description stays with the op so that a refused
    re-registration can name what changed (``differences``)."""
    described = describe(parts)
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest(), described


def differences(old: Any, new: Any, path: str = "", limit: int = 6) -> list[str]:
    """Where two descriptions differ, as paths a reader recognises: ``inputs[0].InputDecl.dtype``,
    ``backward.Backward.fn.code`` (the function's code), ``geometry.Elementwise.block``. The deepest differing
    place of each branch, at most ``limit`` of them."""
    if old == new:
        return []
    if path.endswith(".code"):  # a function's code changed: its constants' places say nothing more
        return [path]
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in [*old, *(k for k in new if k not in old)]:
            if old.get(k, _ABSENT) != new.get(k, _ABSENT):
                # A dataclass is described as {TypeName: fields}: the path names its fields, not the type.
                same_type = len(old) == len(new) == 1 and k in new and k[:1].isupper()
                where = path if same_type else _join(path, k)
                out += differences(old.get(k, _ABSENT), new.get(k, _ABSENT), where, limit - len(out))
            if len(out) >= limit:
                break
        return list(dict.fromkeys(out))[:limit] or [path]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for k, (a, b) in enumerate(zip(old, new, strict=True)):
            out += differences(a, b, f"{path}[{k}]", limit - len(out))
            if len(out) >= limit:
                break
        return out[:limit] or [path]
    return [path or "the declaration"]


_ABSENT = "<absent>"
_FUNCTION_PARTS = {"bytecode": "code", "consts": "code", "names": "code", "vars": "code", "args": "signature",
                   "kwonly": "signature"}  # fmt: skip


def _join(path: str, key: str) -> str:
    key = _FUNCTION_PARTS.get(key, key)  # a function's code is one thing to a reader, not its bytecode's parts
    if key == "code" and path.endswith(".code"):
        return path
    return f"{path}.{key}" if path else key
