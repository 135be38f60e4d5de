"""Size expressions: the one definition of what a launch size, an extra or a buffer size computes.

Written as text (``"cdiv(size(partial, -1), 32)"``, ``"min(size(p, 0), sm_count * MINB)"``) by ``Grid`` and
``Buffer``, or built by opsmith from ``Elementwise``/``Reduction``/extras, every expression is a small tree.
This module owns their semantics, so the paths that evaluate them cannot disagree:

- ``parse_size``: text -> tree (at registration);
- ``describe``: tree -> the declaration's own words, for error messages (``cdiv(numel(y), 256)``);
- ``bounds``: tree -> the interval its value lies in, from what the guards before it proved (sizes of at most
  2^31 - 1 for a 32-bit kernel, non-empty tensors); the call plan (``plan/steps.py``) uses it to emit a check only
  where a value can leave its range, and to find divisions that can divide by zero;
- ``to_python``: tree -> Python source (the eager code, fake implementations, backward-program buffers).
  ``native/cpp.py`` prints the same trees as C++.

Arithmetic is on mathematical integers: ``//`` floors (C++ ``/`` truncates, so the C++ printer calls
``opsmith::floordiv``), ``cdiv(a, b)`` is the ceiling of a / b for every sign, division by zero is an
``InputError`` naming the expression, and intermediate values must stay within 128 bits (the C++ path
computes in ``__int128``); where ``bounds`` cannot exclude passing 2^127, both printers check every step.

Tree forms (``ref`` is ``"i<k>"`` for tensor input k, ``"o<k>"`` for output k):
    int | float              a constant
    ["numel", ref]           number of elements
    ["size", ref, axis]      one dimension (negative axis allowed)
    ["stride", ref, axis]    the stride of one dimension, in elements
    ["lead", ref, k]         product of all dimensions but the last k (1 for rank <= k)
    ["prod", ref, [axes]]    product of the listed dimensions
    ["present", ref]         1 when an optional tensor input was given, 0 when the call passed None (the
                             lowering reads an absent tensor's sizes, strides and numel as 0)
    ["var", name]            a value the call plan computed already (a tensor's numel)
    ["sm_count"]             the multiprocessor count of the call's device
    ["pow2", a]              a rounded up to a power of two (1 for a <= 1)
    ["add"|"sub"|"mul"|"div"|"cdiv"|"min"|"max", a, b]
    ["mod", a, b]            a % b, floored as Python's (the sign of b)
    ["eq"|"ne"|"lt"|"le"|"gt"|"ge"|"and"|"or", a, b], ["not", a], ["where", c, a, b]
                             truth values (1 or 0) and a choice: what a Triton heuristic computes
                             (``symbolic.py`` traces them; no text spells them)

The text language (Python syntax, nothing else is accepted):
    integers; + - * // ; min(a, b, ...), max(a, b, ...), cdiv(a, b), pow2(a)
    numel(t), size(t, axis), stride(t, axis)   for a tensor input or output named t
    present(t)                                 1 or 0: whether the optional input t was given
    sm_count                                   the multiprocessor count of the call's device
    NAME                                       a named dimension of the inputs' shapes (``"M"``), or a
                                               tuning config's parameter (its value per config)
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EXPR_GLOBALS",
    "TRUTH",
    "ExprError",
    "Facts",
    "I64_MAX",
    "WIDE",
    "Where",
    "bounds",
    "describe",
    "evaluate",
    "first_tensor",
    "is_wide",
    "parse_size",
    "to_python",
    "unsafe_divisors",
]

Expr = Any  # int | float | list
I64_MAX = 2**63 - 1
WIDE = 2**127  # intermediate values of size arithmetic stay below this (C++ computes in __int128)
_SM_MAX = 1 << 16  # multiprocessors of any GPU: an H200 has 132

_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.FloorDiv: "div"}


class ExprError(ValueError):
    """The text is not a size expression; the message says what is wrong."""


# -- text -> tree --------------------------------------------------------------------------------------------


def parse_size(text: str | int, tensors: Mapping[str, str], params: Mapping[str, int] | None = None,
               dims: Mapping[str, object] | None = None) -> object:  # fmt: skip
    """The expression tree of ``text``. ``tensors``: name -> ref ("i0", "o1"); ``params``: a config's values;
    ``dims``: named dimensions -> the tree reading their size (``["size", "i0", 1]``)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str):
        raise ExprError(f"{text!r} is neither an int nor an expression string")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise ExprError(f"{text!r} does not parse ({e.msg})") from None
    return _lower(tree, text, tensors, params or {}, dims or {})


def _lower(node: ast.AST, text: str, tensors: Mapping[str, str], params: Mapping[str, int],
           dims: Mapping[str, object]) -> object:  # fmt: skip
    def sub(n: ast.AST) -> object:
        return _lower(n, text, tensors, params, dims)

    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = sub(node.operand)
        if isinstance(inner, int):
            return -inner
        raise ExprError(f"{text!r}: only a constant may be negated")
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        out = [_BIN[type(node.op)], sub(node.left), sub(node.right)]
        if out[0] == "div" and out[2] == 0:
            raise ExprError(f"{text!r}: divides by zero")
        return out
    if isinstance(node, ast.Name):
        if node.id == "sm_count":
            return ["sm_count"]
        if node.id in params:
            v = params[node.id]
            if isinstance(v, bool) or not isinstance(v, int):
                raise ExprError(f"{text!r}: config parameter {node.id} is {v!r}, not an int")
            return v
        if node.id in dims:
            return dims[node.id]
        known = f"named dimensions {sorted(dims)}, " if dims else ""
        raise ExprError(f"{text!r}: '{node.id}' is not sm_count, a named dimension or a parameter of the config "
                        f"({known}config parameters {sorted(params)})")  # fmt: skip
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        return _call(node, text, tensors, sub)
    raise ExprError(f"{text!r}: {ast.dump(node)[:60]} is not allowed in a size expression")


def _call(node: ast.Call, text: str, tensors: Mapping[str, str], sub: Callable[[ast.AST], object]) -> object:
    f, args = node.func.id, node.args  # type: ignore[attr-defined]
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
    if f == "present":
        if len(args) != 1 or not isinstance(args[0], ast.Name) or args[0].id not in tensors:
            raise ExprError(f"{text!r}: present() takes the name of a tensor input ({sorted(tensors)})")
        return ["present", tensors[args[0].id]]
    if f in ("min", "max") and len(args) >= 2:
        out = sub(args[0])
        for a in args[1:]:
            out = [f, out, sub(a)]
        return out
    if f == "cdiv" and len(args) == 2:
        out = ["cdiv", sub(args[0]), sub(args[1])]
        if out[2] == 0:
            raise ExprError(f"{text!r}: divides by zero")
        return out
    if f == "pow2" and len(args) == 1:
        return ["pow2", sub(args[0])]
    raise ExprError(f"{text!r}: {f}() is not a size function (numel, size, stride, present, min, max, cdiv, pow2)")


# -- tree -> words -------------------------------------------------------------------------------------------

_TEXT_OP = {"add": "+", "sub": "-", "mul": "*", "div": "//", "mod": "%"}
_LOGIC = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "and", "or": "or"}
#: The truth-valued forms, and Python's spelling of the comparisons.
TRUTH = frozenset([*_LOGIC, "not"])


def _group(x: Expr, text: str) -> str:
    return f"({text})" if isinstance(x, list) and x[0] in (*_LOGIC, "not", "where", "add", "sub", "mod") else text


def describe(expr: Expr, names: Mapping[str, str]) -> str:
    """The expression in the declaration's language, tensors by their declared names: ``cdiv(numel(y), 256)``,
    ``size(x, 0) * 1024``. A ``var`` reads as what it holds (the plan names it ``numel(x)``)."""
    if isinstance(expr, int | float):  # bool is an int
        return repr(expr)
    op, *args = expr
    if op in ("numel", "size", "stride"):
        return f"{op}({', '.join([names.get(args[0], args[0]), *map(str, args[1:])])})"
    if op == "var":
        return names.get(args[0], args[0])
    if op == "present":
        return f"present({names.get(args[0], args[0])})"
    if op == "sm_count":
        return "sm_count"
    if op == "lead":
        return f"the product of {names.get(args[0], args[0])}'s axes but the last {args[1]}"
    if op == "prod":
        t = names.get(args[0], args[0])
        return " * ".join(f"size({t}, {a})" for a in args[1]) or "1"
    if op in ("pow2",):
        return f"pow2({describe(args[0], names)})"
    if op == "not":
        return f"not {_group(args[0], describe(args[0], names))}"
    if op == "where":
        c, a, b = (_group(x, describe(x, names)) for x in args)
        return f"{a} if {c} else {b}"
    if op in _LOGIC:
        a, b = (_group(x, describe(x, names)) for x in args)
        return f"{a} {_LOGIC[op]} {b}"
    a, b = (describe(x, names) for x in args)
    if op in ("min", "max", "cdiv"):
        return f"{op}({a}, {b})"

    def group(x: Expr, text: str) -> str:
        return f"({text})" if isinstance(x, list) and x[0] in ("add", "sub") else text

    return f"{group(args[0], a)} {_TEXT_OP[op]} {group(args[1], b) if op != 'sub' else _sub_rhs(args[1], b)}"


def _sub_rhs(x: Expr, text: str) -> str:
    return f"({text})" if isinstance(x, list) and x[0] in ("add", "sub") else text


def first_tensor(expr: Expr) -> str | None:
    """The first tensor ref the expression reads (errors about the expression name that tensor)."""
    if not isinstance(expr, list):
        return None
    if expr[0] in ("numel", "size", "stride", "lead", "prod", "present"):
        return expr[1]
    if expr[0] in ("var", "sm_count"):
        return None
    for a in expr[1:]:
        r = first_tensor(a)
        if r is not None:
            return r
    return None


# -- tree -> bounds ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What is known about the tensors when an expression is evaluated.

    narrow: refs whose numel (and so every size) the guards bounded to 2^31 - 1 (a 32-bit kernel's tensors);
    nonempty: the guards proved every tensor non-empty (the zero-size return and the empty-input refusal ran);
    vars: bounds of the plan's own values (a numel read once)."""

    narrow: frozenset[str] = frozenset()
    nonempty: bool = False
    vars: tuple[tuple[str, tuple[int, int]], ...] = ()
    numel_vars: tuple[tuple[str, str], ...] = ()  # (var, ref): the var holds that tensor's numel
    maybe_empty: frozenset[str] = frozenset()  # refs ``nonempty`` does not cover (a meta_fn's outputs)

    def numel(self, ref: str) -> tuple[int, int]:
        return (1 if self.full(ref) else 0, 2**31 - 1 if ref in self.narrow else I64_MAX)

    def size(self, ref: str) -> tuple[int, int]:
        """A dimension is at most the numel only when no other dimension is 0."""
        return self.numel(ref) if self.full(ref) else (0, I64_MAX)

    def full(self, ref: str) -> bool:
        return self.nonempty and ref not in self.maybe_empty

    def var(self, name: str) -> tuple[int, int]:
        return dict(self.vars).get(name, (0, I64_MAX))

    def numel_ref(self, e: Expr) -> str | None:
        """The tensor whose numel ``e`` is, if it is one."""
        if isinstance(e, list) and e[0] == "numel":
            return e[1]
        if isinstance(e, list) and e[0] == "var":
            return dict(self.numel_vars).get(e[1])
        return None


def _mul(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    c = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(c), max(c)


def _floordiv(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    if b[0] > 0 or b[1] < 0:  # the divisor keeps its sign: the extremes are at the corners
        c = [x // y for x in a for y in b]
        return min(c), max(c)
    m = max(abs(a[0]), abs(a[1]))  # a divisor of either sign (zero is checked): |a // b| <= |a|
    return -m, m


def bounds(expr: Expr, facts: Facts, steps: list[tuple[int, int]] | None = None) -> tuple[int, int]:
    """An interval holding the value of ``expr`` whatever the sizes (within ``facts``). ``steps`` collects
    every intermediate interval (to see whether 128 bits could overflow)."""

    def rec(e: Expr) -> tuple[int, int]:
        if isinstance(e, bool) or not isinstance(e, list):
            v = int(e) if not isinstance(e, float) else math.floor(e)
            out = (v, v if not isinstance(e, float) else math.ceil(e))
        else:
            op, *args = e
            if op == "numel":
                out = facts.numel(args[0])
            elif op == "size":
                out = facts.size(args[0])
            elif op == "stride":
                out = (0, I64_MAX)
            elif op in ("lead", "prod"):
                out = (1, facts.numel(args[0])[1]) if facts.full(args[0]) else (0, I64_MAX**4)
            elif op == "var":
                out = facts.var(args[0])
            elif op == "sm_count":
                out = (1, _SM_MAX)
            elif op == "present":
                out = (0, 1)
            elif op == "pow2":
                lo, hi = rec(args[0])
                out = (_pow2(lo), _pow2(hi))
            elif op in TRUTH:
                out = (0, 1)
            elif op == "where":
                a, b = rec(args[1]), rec(args[2])
                out = (min(a[0], b[0]), max(a[1], b[1]))
            elif op == "mod":
                b = rec(args[1])
                m = max(abs(b[0]), abs(b[1]))
                out = (0 if b[0] > 0 else 1 - m, m - 1 if b[0] > 0 else max(m - 1, 0))
            else:
                a, b = rec(args[0]), rec(args[1])
                ref = facts.numel_ref(args[0]) if op == "div" else None
                if ref is not None and facts.full(ref) and isinstance(args[1], list) and args[1][0] == "prod" \
                        and args[1][1] == ref:  # fmt: skip
                    out = (1, a[1])  # a Reduction's rows: numel over some of its own axes, at least 1
                elif op == "add":
                    out = (a[0] + b[0], a[1] + b[1])
                elif op == "sub":
                    out = (a[0] - b[1], a[1] - b[0])
                elif op == "mul":
                    out = _mul(a, b)
                elif op == "div":
                    out = _floordiv(a, b)
                elif op == "cdiv":
                    lo, hi = _floordiv((-a[1], -a[0]), b)
                    out = (-hi, -lo)
                elif op == "min":
                    out = (min(a[0], b[0]), min(a[1], b[1]))
                elif op == "max":
                    out = (max(a[0], b[0]), max(a[1], b[1]))
                else:
                    raise ValueError(f"unknown size expression {e!r}")
        if steps is not None:
            steps.append(out)
        return out

    return rec(expr)


def unsafe_divisors(expr: Expr, facts: Facts) -> bool:
    """Whether some division of ``expr`` may divide by zero (its divisor's interval holds 0)."""
    if not isinstance(expr, list):
        return False
    if expr[0] in ("div", "cdiv", "mod"):
        lo, hi = bounds(expr[2], facts)
        if lo <= 0 <= hi:
            return True
    return any(unsafe_divisors(a, facts) for a in expr[1:] if isinstance(a, list))


def is_wide(expr: Expr, facts: Facts) -> bool:
    """Whether an intermediate value of ``expr`` may reach 2^127 (then every step is checked)."""
    steps: list[tuple[int, int]] = []
    bounds(expr, facts, steps)
    return any(lo <= -WIDE or hi >= WIDE for lo, hi in steps)


# -- tree -> Python ------------------------------------------------------------------------------------------


def to_python(expr: Expr, names: Mapping[str, str] | None = None, *, checked: str | None = None,
              wide: bool = False, facts: Facts | None = None) -> str:  # fmt: skip
    """Python source for ``expr``; a ref becomes ``names[ref]`` (default: the ref itself, ``i0``...).

    checked: the Python name of the ``Where`` that errors name (divisions whose divisor may be zero call
    ``_div``/``_cdiv`` with it; without it no division is checked). wide: check every step against 2^127.
    facts: what the guards proved (decides which divisions need the check; default: all)."""
    names = names or {}

    def div_checked(divisor: Expr) -> bool:
        if checked is None:
            return False
        if isinstance(divisor, int):
            return divisor == 0
        lo, hi = bounds(divisor, facts) if facts is not None else (0, 0)
        return lo <= 0 <= hi

    def rec(e: Expr) -> str:
        if isinstance(e, float) and not math.isfinite(e):
            return f"float({str(e)!r})"  # inf, -inf, nan: no Python literal spells them
        if isinstance(e, int | float):
            return repr(e)
        op, *args = e
        t = names.get(args[0], args[0]) if op in ("numel", "size", "stride", "lead", "prod", "present") else ""
        if op == "present":  # an int: a bool times a symbolic size is sympy's BooleanAtom, refused in arithmetic
            return f"(1 if {t} is not None else 0)"
        if op == "numel":
            return f"{t}.numel()"
        if op == "size":
            return f"{t}.shape[{args[1]}]"
        if op == "stride":
            return f"{t}.stride({args[1]})"
        if op == "var":
            return names.get(args[0], args[0])
        if op == "lead":
            return f"_prod({t}.shape[:-{args[1]}])"
        if op == "prod":
            return "(" + " * ".join(f"{t}.shape[{a}]" for a in args[1]) + ")" if args[1] else "1"
        if op == "sm_count":
            return names.get("sm_count", "_sms(i0)")
        if op == "pow2":
            return _wrap(f"_pow2({rec(args[0])})")
        if op == "not":
            return f"(not {rec(args[0])})"
        if op == "where":
            return f"({rec(args[1])} if {rec(args[0])} else {rec(args[2])})"
        a, b = rec(args[0]), rec(args[1])
        if op in ("and", "or"):
            return f"(bool({a}) {op} bool({b}))"
        if op in _LOGIC:
            return f"({a} {_LOGIC[op]} {b})"
        if op == "mod":
            return f"_mod({a}, {b}, {checked})" if div_checked(args[1]) else f"({a} % {b})"
        if op in ("min", "max"):  # sym_min / sym_max: symbolic sizes (tracing) without a guard
            return f"_{op}({a}, {b})"
        if op in ("div", "cdiv"):
            if div_checked(args[1]):
                return f"_{op}({a}, {b}, {checked})"
            if op == "div":
                return f"({a} // {b})"
            if isinstance(args[1], int) and args[1] > 0:
                return f"(({a} + {args[1] - 1}) // {b})"
            return f"-((-{a}) // {b})"
        return _wrap(f"({a} {'+' if op == 'add' else '-' if op == 'sub' else '*'} {b})")

    def _wrap(code: str) -> str:
        return f"_ck({code}, {checked})" if wide and checked is not None else code

    return rec(expr)


@dataclass(frozen=True)
class Where:
    """What a failing size computation names: the op, the argument and the expression in the user's words."""

    op: str
    arg: str
    what: str


def _div_error(where: Where, divisor: Any) -> Exception:
    from ..errors import InputError

    return InputError(where.op, where.arg, f"{where.what} to divide by a non-zero value", f"a division by {divisor}",
                      "Fix: pass tensors for which the expression's divisors are not zero, or correct the "
                      "expression.")  # fmt: skip


def _div(a: Any, b: Any, where: Where) -> Any:
    if b == 0:
        raise _div_error(where, b)
    return a // b


def _cdiv(a: Any, b: Any, where: Where) -> Any:
    if b == 0:
        raise _div_error(where, b)
    return -((-a) // b)


def _mod(a: Any, b: Any, where: Where) -> Any:
    if b == 0:
        raise _div_error(where, b)
    return a % b


def _ck(v: Any, where: Where) -> Any:
    """One step of a wide expression: within 128 bits, as the C++ path computes."""
    if isinstance(v, int) and not -WIDE < v < WIDE:
        from ..errors import InputError

        raise InputError(where.op, where.arg, f"{where.what} to stay within 128 bits at every step",
                         "an intermediate value beyond 2^127", "Fix: pass smaller tensors, or rewrite the expression "
                         "so no intermediate product is this large.")  # fmt: skip
    return v


def _pow2(n: Any) -> Any:
    """The next power of two >= n (1 for n <= 1): the default tuning bucket of a dimension."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _sms(t: Any) -> int:
    """Multiprocessors of the device ``t`` is on (one query per device)."""
    import torch

    return _sm_count(t.get_device() if t.is_cuda else -1) if isinstance(t, torch.Tensor) else _sm_count(int(t))


@functools.cache
def _sm_count(device: int) -> int:
    import torch

    if device < 0 or not torch.cuda.is_available():
        return 132  # no GPU (tracing on CPU, fake tensors): an H100/H200's count, so sizes stay realistic
    return torch.cuda.get_device_properties(device).multi_processor_count


def _sym(op: str) -> Any:
    def f(a: Any, b: Any) -> Any:
        import torch

        return (torch.sym_min if op == "min" else torch.sym_max)(a, b)

    return f


#: What printed expressions call (eager code, fake implementations, grids, buffers).
EXPR_GLOBALS: dict[str, Any] = {"_prod": math.prod, "_pow2": _pow2, "_sms": _sms, "_min": _sym("min"),
                                "_max": _sym("max"), "_div": _div, "_cdiv": _cdiv, "_mod": _mod, "_ck": _ck}  # fmt: skip


def evaluate(expr: Expr, tensors: dict[str, Any]) -> int:
    """Evaluate ``expr`` against tensors named by ref; the slow reference used by tests and tools."""
    return int(eval(to_python(expr), EXPR_GLOBALS, dict(tensors)))
