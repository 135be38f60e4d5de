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

__all__ = ["declaration_fingerprint", "describe"]

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


def declaration_fingerprint(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(describe(parts), sort_keys=True, default=str).encode()).hexdigest()
