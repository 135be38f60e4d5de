"""Size expressions written as text: ``"cdiv(size(partial, -1), 32)"``, ``"min(size(p, 0), sm_count * MINB)"``.

A ``Grid`` geometry and a ``Buffer`` of a backward program say their sizes this way, so a launch that needs
arithmetic is still plain data: parsed once at registration into the expression trees of ``geometry.py``,
then printed as Python (the eager code, the fake implementation) and as C++ (the native library).

The language (Python syntax, nothing else is accepted):
    integers; + - * // ; min(a, b, ...), max(a, b, ...), cdiv(a, b), pow2(a)
    numel(t), size(t, axis), stride(t, axis)   for a tensor input or output named t
    sm_count                                   the multiprocessor count of the call's device
    NAME                                       a tuning config's parameter (its value per config)
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

__all__ = ["ExprError", "parse_size"]

_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.FloorDiv: "div"}


class ExprError(ValueError):
    """The text is not a size expression; the message says what is wrong."""


def parse_size(text: str | int, tensors: Mapping[str, str], params: Mapping[str, int] | None = None) -> object:
    """The expression tree of ``text``. ``tensors``: name -> ref ("i0", "o1"); ``params``: a config's values."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str):
        raise ExprError(f"{text!r} is neither an int nor an expression string")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise ExprError(f"{text!r} does not parse ({e.msg})") from None
    return _lower(tree, text, tensors, params or {})


def _lower(node: ast.AST, text: str, tensors: Mapping[str, str], params: Mapping[str, int]) -> object:
    def sub(n: ast.AST) -> object:
        return _lower(n, text, tensors, params)

    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = sub(node.operand)
        if isinstance(inner, int):
            return -inner
        raise ExprError(f"{text!r}: only a constant may be negated")
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return [_BIN[type(node.op)], sub(node.left), sub(node.right)]
    if isinstance(node, ast.Name):
        if node.id == "sm_count":
            return ["sm_count"]
        if node.id in params:
            v = params[node.id]
            if isinstance(v, bool) or not isinstance(v, int):
                raise ExprError(f"{text!r}: config parameter {node.id} is {v!r}, not an int")
            return v
        raise ExprError(f"{text!r}: '{node.id}' is neither sm_count nor a parameter of the config ({sorted(params)})")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        f, args = node.func.id, node.args
        if f in ("numel", "size", "stride"):
            want = 1 if f == "numel" else 2
            if len(args) != want or not isinstance(args[0], ast.Name):
                raise ExprError(f"{text!r}: {f}() takes a tensor name{'' if f == 'numel' else ' and an axis'}")
            name = args[0].id
            if name not in tensors:
                raise ExprError(f"{text!r}: '{name}' is not a tensor of the op ({sorted(tensors)})")
            if f == "numel":
                return ["numel", tensors[name]]
            axis = sub(args[1])
            if not isinstance(axis, int):
                raise ExprError(f"{text!r}: the axis of {f}() must be a constant")
            return [f, tensors[name], axis]
        if f in ("min", "max") and len(args) >= 2:
            out = sub(args[0])
            for a in args[1:]:
                out = [f, out, sub(a)]
            return out
        if f == "cdiv" and len(args) == 2:
            return ["cdiv", sub(args[0]), sub(args[1])]
        if f == "pow2" and len(args) == 1:
            return ["pow2", sub(args[0])]
        raise ExprError(f"{text!r}: {f}() is not a size function (numel, size, stride, min, max, cdiv, pow2)")
    raise ExprError(f"{text!r}: {ast.dump(node)[:60]} is not allowed in a size expression")
