"""Python functions of a call's sizes, traced into size expressions (``expr.py``) that every path evaluates.

A Triton heuristic (``@triton.heuristics(values={"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})``)
is a Python function that Triton's launcher calls on every launch. opsmith's generated code, and a native
library without Python, compute the same value from the declaration instead: the function is called once at
registration with stand-ins (``Sym``) for the values that vary per call, and the operations it applies to them
become an expression tree. Arithmetic, ``//``, ``%``, comparisons, ``min``/``max``, ``abs``,
``triton.next_power_of_2`` and ``triton.cdiv`` trace directly, and so do the bitwise operators with Python's
semantics (``&``, ``|``, ``^`` logical between truth values and expanded with a constant; ``~x`` is ``-x - 1``;
shifts by a constant; constant powers); a branch on a traced value (``if``, ``and``,
``or``, ``a if c else b``) is followed both ways (the function is called again per path, at most
``_MAX_PATHS``), and the results join as ``where(c, a, b)``. What cannot become an expression (``int()`` of a
size, a dtype, a float division) is refused with the reason.
"""

from __future__ import annotations

import builtins
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Sym", "SymTensor", "Untraceable", "trace"]

_MAX_PATHS = 64  # 6 independent branches; real heuristics take one or two
_STATE = threading.local()


class Untraceable(Exception):
    """The function does something that has no size expression; the message says what."""


class _NewBranch(BaseException):  # a BaseException: a heuristic's ``except Exception`` must not swallow it
    def __init__(self, cond: Any) -> None:
        self.cond = cond


def _tree(v: Any) -> Any:
    if isinstance(v, Sym):
        return v.tree
    if isinstance(v, bool | int):
        return v
    raise Untraceable(f"it combines a size with {v!r} ({type(v).__name__}), which is not an integer")


def _op(name: str, *args: Any) -> Sym:
    return Sym([name, *(_tree(a) for a in args)])


_MAX_POWER = 8  # the largest constant power traced (as repeated products)
_MAX_MASK_BITS = 32  # the most set bits a constant mask may have (each a term of the expansion)


def _truth(v: Any) -> bool:
    """Whether ``v`` is 0 or 1 on every call: a bool, or a comparison or logical value."""
    from .expr import TRUTH

    return isinstance(v, bool) or (isinstance(v, Sym) and isinstance(v.tree, list) and v.tree[0] in TRUTH)


def _masked(x: Sym, m: int, sign: str) -> Sym:
    """``x & m`` for a constant mask m >= 0: the low bits of a mask 2^k - 1 are ``x % 2^k``, otherwise each set bit j
    adds ``(x // 2^j) % 2 * 2^j`` (floored division and modulo are Python's two's-complement bits)."""
    if m < 0 or bin(m).count("1") > _MAX_MASK_BITS:
        raise Untraceable(f"it applies '{sign}' with the mask {m!r}; a size expression holds masks from 0 with at "
                          f"most {_MAX_MASK_BITS} set bits")  # fmt: skip
    if m & (m + 1) == 0:  # 0, 1, 3, 7, ...: the low bits
        return _op("mod", x, m + 1) if m else Sym(0)
    out: Any = None
    for j in range(m.bit_length()):
        if m >> j & 1:
            term = _op("mul", _op("mod", _op("div", x, 2**j), 2), 2**j)
            out = term if out is None else _op("add", out, term)
    return out


def _bitwise(sign: str, a: Any, b: Any) -> Sym:
    """``a <sign> b`` for '&', '|', '^' with Python's semantics: logical between truth values, expanded with a
    constant, refused between two values that vary per call."""
    if _truth(a) and _truth(b):
        return _op({"&": "and", "|": "or", "^": "ne"}[sign], a, b)
    x, m = (a, b) if isinstance(a, Sym) else (b, a)
    if isinstance(m, Sym):
        raise Untraceable(f"it applies '{sign}' to two values that vary per call, a bitwise operation no size "
                          "expression holds")  # fmt: skip
    if not isinstance(m, int):
        raise Untraceable(f"it applies '{sign}' to {m!r}, which is not an integer")
    both = _masked(x, m, sign)
    if sign == "&":
        return both
    if sign == "|":  # x | m == x + m - (x & m)
        return _op("sub", _op("add", x, m), both)
    return _op("sub", _op("add", x, m), _op("mul", both, 2))  # x ^ m == x + m - 2 (x & m)


def _shift(sign: str, k: Any) -> int:
    if isinstance(k, Sym) or not isinstance(k, int) or not 0 <= k < 63:
        what = "a value that varies per call" if isinstance(k, Sym) else repr(k)
        raise Untraceable(f"it shifts by {what} ('{sign}'); a size expression holds shifts by a constant from 0 to 62")
    return k


class Sym:
    """A value that varies per call, standing for its expression ``tree``."""

    __slots__ = ("tree",)

    def __init__(self, tree: Any) -> None:
        self.tree = tree

    def __add__(self, o: Any) -> Sym:
        return _op("add", self, o)

    def __radd__(self, o: Any) -> Sym:
        return _op("add", o, self)

    def __sub__(self, o: Any) -> Sym:
        return _op("sub", self, o)

    def __rsub__(self, o: Any) -> Sym:
        return _op("sub", o, self)

    def __mul__(self, o: Any) -> Sym:
        return _op("mul", self, o)

    def __rmul__(self, o: Any) -> Sym:
        return _op("mul", o, self)

    def __floordiv__(self, o: Any) -> Sym:
        return _op("div", self, o)

    def __rfloordiv__(self, o: Any) -> Sym:
        return _op("div", o, self)

    def __mod__(self, o: Any) -> Sym:
        return _op("mod", self, o)

    def __rmod__(self, o: Any) -> Sym:
        return _op("mod", o, self)

    def __neg__(self) -> Sym:
        return _op("sub", 0, self)

    def __pos__(self) -> Sym:
        return self

    def __eq__(self, o: Any) -> Sym:  # type: ignore[override]
        return _op("eq", self, o)

    def __ne__(self, o: Any) -> Sym:  # type: ignore[override]
        return _op("ne", self, o)

    def __lt__(self, o: Any) -> Sym:
        return _op("lt", self, o)

    def __le__(self, o: Any) -> Sym:
        return _op("le", self, o)

    def __gt__(self, o: Any) -> Sym:
        return _op("gt", self, o)

    def __ge__(self, o: Any) -> Sym:
        return _op("ge", self, o)

    # Bitwise operators, with Python's semantics on ints (bools are the ints 0 and 1), written with the tree's own
    # floored arithmetic so that every path evaluates them alike. Between two truth values they are the logical
    # operators; with a constant they expand bit by bit; between two values that vary per call they are refused.
    def __and__(self, o: Any) -> Sym:  # (a == 0) & (b == 0), flags & 2
        return _bitwise("&", self, o)

    def __rand__(self, o: Any) -> Sym:
        return _bitwise("&", o, self)

    def __or__(self, o: Any) -> Sym:
        return _bitwise("|", self, o)

    def __ror__(self, o: Any) -> Sym:
        return _bitwise("|", o, self)

    def __xor__(self, o: Any) -> Sym:
        return _bitwise("^", self, o)

    def __rxor__(self, o: Any) -> Sym:
        return _bitwise("^", o, self)

    def __invert__(self) -> Sym:  # ~x == -x - 1 (~True is -2, truthy: not a logical not)
        return _op("sub", _op("sub", 0, self), 1)

    def __lshift__(self, o: Any) -> Sym:
        return _op("mul", self, 2 ** _shift("<<", o))

    def __rshift__(self, o: Any) -> Sym:  # floored, as Python's >> of a negative int
        return _op("div", self, 2 ** _shift(">>", o))

    def __rlshift__(self, o: Any) -> Any:
        raise Untraceable("it shifts by a value that varies per call ('<<'), which no size expression holds")

    __rrshift__ = __rlshift__

    def __pow__(self, o: Any) -> Sym:
        if isinstance(o, Sym) or not isinstance(o, int) or not 0 <= o <= _MAX_POWER:
            raise Untraceable(f"it raises a size to the power {o!r} ('**'); a size expression holds constant "
                              f"integer powers from 0 to {_MAX_POWER}")  # fmt: skip
        out: Any = Sym(1)
        for k in range(o):
            out = self if k == 0 else _op("mul", out, self)
        return out

    def __rpow__(self, o: Any) -> Any:
        raise Untraceable("it raises to a power that varies per call ('**'), which no size expression holds")

    def __abs__(self) -> Sym:
        return Sym(["where", ["lt", self.tree, 0], ["sub", 0, self.tree], self.tree])

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        return _STATE.path.decide(self.tree)

    def __truediv__(self, o: Any) -> Any:
        raise Untraceable("it divides a size with '/' (a float); use '//'")

    __rtruediv__ = __truediv__

    def _refuse(self, *a: Any) -> Any:
        raise Untraceable("it converts a size to a Python number (int(), float(), an index)")

    __int__ = __float__ = __index__ = _refuse


class SymTensor:
    """A tensor argument: its sizes and strides trace; its data, dtype and device do not."""

    def __init__(self, ref: str, name: str) -> None:
        self._ref, self._name = ref, name

    @property
    def shape(self) -> _Shape:
        return _Shape(self._ref)

    def size(self, axis: int | None = None) -> Any:
        return self.shape if axis is None else Sym(["size", self._ref, int(axis)])

    def stride(self, axis: int) -> Sym:
        return Sym(["stride", self._ref, int(axis)])

    def numel(self) -> Sym:
        return Sym(["numel", self._ref])

    def __getattr__(self, attr: str) -> Any:
        raise Untraceable(f"it reads '{self._name}.{attr}'; only sizes, strides and numel() become expressions")


class _Shape:
    def __init__(self, ref: str) -> None:
        self._ref = ref

    def __getitem__(self, axis: int) -> Sym:
        return Sym(["size", self._ref, int(axis)])


class _Opaque:
    """An argument whose value no expression can read (a float scalar)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        raise Untraceable(f"it reads the float argument '{self._name}', which no size expression holds (a heuristic "
                          "may read int and bool scalars)")  # fmt: skip

    def _refuse(self, *a: Any) -> Any:
        raise Untraceable(f"it reads the float argument '{self._name}', which no size expression holds (a heuristic "
                          "may read int and bool scalars)")  # fmt: skip

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __mod__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __truediv__ = _refuse  # type: ignore[assignment]
    __hash__ = object.__hash__


class _Path:
    def __init__(self, prefix: list[bool]) -> None:
        self.prefix, self.at = prefix, 0

    def decide(self, cond: Any) -> bool:
        if self.at < len(self.prefix):
            self.at += 1
            return self.prefix[self.at - 1]
        raise _NewBranch(cond)


def _sym_minmax(real: Callable) -> Callable:
    def f(*args: Any, **kw: Any) -> Any:
        items = args[0] if len(args) == 1 else args
        items = list(items)
        if kw or not any(isinstance(v, Sym) for v in items):
            return real(*args, **kw)
        out = items[0]
        for v in items[1:]:
            out = _op(real.__name__, out, v)
        return out

    return f


def _sym_pow2(n: Any) -> Any:
    import triton

    return _op("pow2", n) if isinstance(n, Sym) else triton.next_power_of_2(n)


def _sym_cdiv(a: Any, b: Any) -> Any:
    return _op("cdiv", a, b) if isinstance(a, Sym) or isinstance(b, Sym) else -(-a // b)


class _TritonModule(types.ModuleType):
    """``triton`` as a heuristic sees it: its size helpers trace, everything else is the real module."""

    def __init__(self) -> None:
        super().__init__("triton")
        self.next_power_of_2, self.cdiv = _sym_pow2, _sym_cdiv

    def __getattr__(self, name: str) -> Any:
        import triton

        return getattr(triton, name)


def _rebind(fn: Callable) -> Callable:
    """``fn`` with builtins min/max and triton's helpers replaced by their tracing versions."""
    if not isinstance(fn, types.FunctionType):
        return fn
    try:
        import triton

        helpers = {id(triton.next_power_of_2): _sym_pow2, id(triton.cdiv): _sym_cdiv}
        module: Any = _TritonModule()
    except ImportError:
        triton, helpers, module = None, {}, None
    g = dict(fn.__globals__)
    for name in fn.__code__.co_names:
        v = g.get(name)
        if v is not None and id(v) in helpers:
            g[name] = helpers[id(v)]
        elif triton is not None and v is triton:
            g[name] = module
    g["min"], g["max"] = _sym_minmax(builtins.min), _sym_minmax(builtins.max)

    def swap(cell: types.CellType) -> types.CellType:
        """A heuristic written inside a function reads ``triton`` (imported there) through its closure."""
        try:
            v = cell.cell_contents
        except ValueError:  # not yet bound
            return cell
        if id(v) in helpers:
            return types.CellType(helpers[id(v)])
        return types.CellType(module) if triton is not None and v is triton else cell

    closure = tuple(swap(c) for c in fn.__closure__) if fn.__closure__ else fn.__closure__
    out = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, closure)
    out.__kwdefaults__ = fn.__kwdefaults__
    return out


def trace(fn: Callable, args: Mapping[str, Any]) -> Any:
    """The expression ``fn(args)`` computes: a tree, or a constant when nothing it reads varies per call.

    ``args`` holds ``Sym``/``SymTensor`` stand-ins and constants. Raises ``Untraceable`` with the reason,
    ``KeyError`` when ``fn`` reads a name ``args`` lacks."""
    f = _rebind(fn)
    count = [0]

    def explore(prefix: list[bool]) -> Any:
        count[0] += 1
        if count[0] > _MAX_PATHS:
            raise Untraceable(f"it branches on sizes along more than {_MAX_PATHS} paths")
        _STATE.path = _Path(prefix)
        try:
            out = f(dict(args))
        except _NewBranch as b:
            return ["where", b.cond, explore([*prefix, True]), explore([*prefix, False])]
        finally:
            _STATE.path = None
        if isinstance(out, Sym):
            return out.tree
        if prefix and not isinstance(out, bool | int):
            raise Untraceable(f"it returns {out!r} on one path of a branch on sizes; only numbers can be chosen")
        return out

    return explore([])
