"""Named dimensions: the shapes a declaration states, turned once into what every call checks and allocates.

``InputDecl("a", shape=("M", "K"))``, ``InputDecl("b", shape=("K", "N"))``, ``OutputDecl("c", shape=("M", "N"))``:
a name is one size across every tensor of a call. ``"*B"`` is a group of any number of dims, the same sizes
wherever it is named. Ints fix an axis, None frees it, and ``DimSize(x, axis)`` (the older spelling) names
another input's axis. ``SameAs("x")`` on an input is the shape of ``x``, axis for axis (checked whole).

Each name is *bound* where it first appears among the inputs, in declaration order: a tensor input and an
axis (negative after a group, since the group's length is known only per call). Every other place naming it
is checked against that binding (``plan.Shape``), outputs are allocated from it, and ``Dim`` extras, ``Grid``
expressions and requirements read it. Output entries may be size expressions over the names (``"2 * N"``,
``"cdiv(N, 2)"``, ``"numel(x)"``). Preconditions (``Divisible``, ``AtMost``, ``AtLeast``, ``OneOf``) are size
expressions over the same names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError
from .expr import ExprError, parse_size
from .spec import AtLeast, AtMost, Dim, DimSize, Divisible, InputDecl, OneOf, SameAs
from .validate import ident, ref_index

__all__ = ["Shapes", "dim_extra", "input_shapes", "output_shape", "requirements"]

#: Names a dimension cannot take: the size language's own words.
_RESERVED = frozenset({"sm_count", "numel", "size", "stride", "min", "max", "cdiv", "pow2"})


@dataclass
class Shapes:
    """What the inputs' declared shapes say. Per tensor input: ``entries`` (record form: ints, None, dimension
    names, ``"*B"`` for a group; None when undeclared), ``like`` (the input whose whole shape it has, for
    ``SameAs`` of an undeclared one), ``exact``/``least`` (the rank). ``dims``: name -> (tensor, axis) of its
    binding; ``groups``: name -> (tensor, first axis, axes after it)."""

    entries: list[tuple | None] = field(default_factory=list)
    like: list[int | None] = field(default_factory=list)
    exact: list[int | None] = field(default_factory=list)
    least: list[int] = field(default_factory=list)
    dims: dict[str, tuple[int, int]] = field(default_factory=dict)
    groups: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    #: Names bound only inside a size expression (``("M", "2 * N")``): name -> (the tree computing it from the
    #: axis it was solved on, that tensor).
    solved: dict[str, tuple[Any, int]] = field(default_factory=dict)
    #: Per tensor input, its size-expression entries: (position, tree, ((name, tree, tensor), ...) for the
    #: names the expression reads, which the shape error states).
    exprs: list[list] = field(default_factory=list)
    pending: list[tuple[int, int, int, str]] = field(default_factory=list)

    def trees(self) -> dict[str, list]:
        """Each user-named dimension as the expression reading its size."""
        plain = {n: ["size", f"i{k}", a] for n, (k, a) in self.dims.items() if not n.startswith("size(")}
        return plain | {n: t for n, (t, _) in self.solved.items()}


def _own_entries(op: str, decls: list[InputDecl], tensors: list[str]) -> list[tuple | int | None]:
    """Each input's shape entries with ``SameAs`` followed to a declared shape; an int ``j``: the shape of
    undeclared input ``j``."""
    out: list[tuple | int | None] = []
    for k, d in enumerate(decls):
        seen = {k}
        s = d.shape
        while isinstance(s, SameAs):
            j = ref_index(op, f"inputs '{d.name}'.shape.input_idx", s.input_idx, tensors, [])
            if j in seen:
                raise SpecError(op, f"inputs '{d.name}'.shape", f"SameAs('{tensors[j]}') goes round in a circle.",
                                "give one of the inputs a shape of its own, e.g. shape=('*B', 'C').")  # fmt: skip
            seen.add(j)
            s = decls[j].shape
            if not isinstance(s, SameAs):  # the whole shape of that input, whatever it declares (None axes too)
                s = j
                break
        if s is not None and not isinstance(s, int) and not isinstance(s, tuple | list):
            raise SpecError(op, f"inputs '{d.name}'.shape", f"{s!r} is not a shape.",
                            "use a tuple such as ('M', 'K'), ('*B', 'C') or (8, None), or SameAs('x').")  # fmt: skip
        out.append(tuple(s) if isinstance(s, list) else s)
    return out


def input_shapes(op: str, decls: list[InputDecl], tensors: list[str], reserved: set[str]) -> Shapes:
    """Bind every name of the tensor inputs' shapes (``decls``, in order). ``reserved``: argument names, which
    a dimension may not take (``"x"`` would read as both)."""
    sh = Shapes()
    own = _own_entries(op, decls, tensors)
    # Required inputs bind the names first: an optional one (None in a call) only ties to them.
    order = sorted(range(len(decls)), key=lambda k: decls[k].optional)
    done: dict[int, tuple] = {}
    for k in order:
        done[k] = _bind(op, k, decls[k], own[k], sh, tensors, reserved)
    sh.exprs = [[] for _ in decls]
    _expressions(op, decls, tensors, sh)
    for k in range(len(decls)):
        entries, like, exact, least = done[k]
        sh.entries.append(entries)
        sh.like.append(like)
        sh.exact.append(exact)
        sh.least.append(least)
    for name, (k, *_) in [*sh.dims.items(), *sh.groups.items()]:
        if decls[k].optional:
            raise SpecError(op, f"inputs '{decls[k].name}'.shape", f"'{name}' is named only by optional inputs, so a "
                            "call that passes them as None has no size for it.", f"name '{name}' in a required input's "
                            "shape too, or use None (any size) there.")  # fmt: skip
    return sh


def _bind(op: str, k: int, d: InputDecl, s: Any, sh: Shapes, tensors: list[str], reserved: set[str]) -> tuple:
    """(entries, like, exact rank, least rank) of input ``k``'s shape ``s``, binding its new names in ``sh``."""
    if s is None or (isinstance(s, int) and not isinstance(s, bool)):
        return None, s, None, 0
    field_ = f"inputs '{d.name}'.shape"
    groups = [p for p, e in enumerate(s) if isinstance(e, str) and e.startswith("*")]
    if len(groups) > 1:
        raise SpecError(op, field_, f"{s!r} has {len(groups)} groups.",
                        "name at most one group ('*B') per shape; name the other axes one by one.")  # fmt: skip
    g = groups[0] if groups else None
    entries: list = []
    for p, e in enumerate(s):
        axis = p if g is None or p < g else p - len(s)
        entries.append(_input_entry(op, field_, e, k, axis, p, len(s), sh, tensors, reserved, d.name))
    return tuple(entries), None, None if g is not None else len(s), len(s) - 1 if g is not None else len(s)


def _input_entry(op: str, field_: str, e: object, k: int, axis: int, p: int, n: int, sh: Shapes,
                 tensors: list[str], reserved: set[str], own: str) -> object:  # fmt: skip
    if e is None or (isinstance(e, int) and not isinstance(e, bool) and e >= 0):
        return e
    if isinstance(e, DimSize):
        if e.input_name not in tensors or e.input_name == own:
            raise SpecError(op, field_, f"DimSize('{e.input_name}', ...) names no other tensor input.",
                            f"reference one of {[t for t in tensors if t != own]}, or name the dimension "
                            "(shape=('C',) here and in that input's shape).")  # fmt: skip
        if not isinstance(e.axis, int) or isinstance(e.axis, bool):
            raise SpecError(op, field_, f"DimSize('{e.input_name}', {e.axis!r}): the axis is not an int.",
                            "pass an int axis (negative allowed).")  # fmt: skip
        name = f"size({e.input_name}, {e.axis})"
        sh.dims.setdefault(name, (tensors.index(e.input_name), e.axis))
        return name
    if isinstance(e, str) and not e.strip().startswith("*") and not e.strip().isidentifier():
        sh.pending.append((k, p, axis, e.strip()))  # a size expression ("2 * N"): once every name is bound
        return e.strip()
    if isinstance(e, str):
        group = e.startswith("*")
        name = e[1:] if group else e
        _check_name(op, field_, e, name, reserved)
        if group:
            if name in sh.dims:
                raise SpecError(op, field_, f"'{name}' names a dimension elsewhere and a group ('*{name}') here.",
                                "use one name for one thing.")  # fmt: skip
            sh.groups.setdefault(name, (k, p, n - 1 - p))
        else:
            if name in sh.groups:
                raise SpecError(op, field_, f"'{name}' names a group elsewhere ('*{name}') and a dimension here.",
                                "use one name for one thing.")  # fmt: skip
            sh.dims.setdefault(name, (k, axis))
        return e
    raise SpecError(op, field_, f"{e!r} is not an entry of an input's shape.",
                    "use a dimension name ('M'), one group ('*B'), an int, None (any size), a size expression "
                    "('2 * N', 'B * S') or DimSize(input, axis).")  # fmt: skip


_WORDS = _RESERVED | {"present"}  # the size language's functions and constants, which no expression binds
_UNKNOWN = "__unknown"


def _expressions(op: str, decls: list[InputDecl], tensors: list[str], sh: Shapes) -> None:
    """The inputs' size-expression entries, in passes: one whose names are all bound is checked against them;
    one with a single unbound name, written once as ``a * N + b`` (any of + - * with bound terms), binds it,
    solved from that axis (``"2 * N"`` gives N = size // 2, and the check that 2 * N is the size refuses an
    odd one). A name only expressions read, in none that can solve it, is refused."""
    import ast

    pending = list(sh.pending)
    while pending:
        left = []
        for k, p, axis, text in pending:
            field_ = f"inputs '{decls[k].name}'.shape"
            try:
                names = sorted({n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
                               - _WORDS - set(tensors))  # fmt: skip
            except SyntaxError as e:
                raise SpecError(op, field_, f"{text!r} does not parse ({e.msg}).",
                                "write a size expression such as '2 * N' or 'B * S'.") from None  # fmt: skip
            unknown = [n for n in names if n not in sh.trees()]
            if len(unknown) > 1 or (unknown and decls[k].optional):
                left.append((k, p, axis, text))
                continue
            if unknown:
                tree = _parse(op, field_, text, sh, tensors, "input sizes", {unknown[0]: ["var", _UNKNOWN]})
                solved = _solve(tree, ["size", f"i{k}", axis])
                if solved is None:
                    raise SpecError(op, field_, f"{text!r} cannot be solved for '{unknown[0]}', which no input's shape "
                                    "names alone.", f"name '{unknown[0]}' as an axis of its own in an input's shape, "
                                    f"or write the expression as a * {unknown[0]} + b.")  # fmt: skip
                _check_name(op, field_, unknown[0], unknown[0], set())
                sh.solved[unknown[0]] = (solved, k)
            tree = _parse(op, field_, text, sh, tensors, "input sizes")
            told = tuple((n, sh.trees()[n], sh.solved[n][1] if n in sh.solved else sh.dims[n][0]) for n in names)
            sh.exprs[k].append((p, tree, told))
        if len(left) == len(pending):
            k, _, _, text = left[0]
            raise SpecError(op, f"inputs '{decls[k].name}'.shape", f"{text!r} reads dimensions no required input's "
                            "shape binds, and no expression can solve them one at a time.", "name each of them as "
                            "an axis of its own in a required input's shape (('B', 'S', 'H') beside ('B * S', 'H')), "
                            "or leave one per expression to be solved.")  # fmt: skip
        pending = left


def _solve(tree: Any, size: list) -> Any:
    """The unknown of ``tree`` (``["var", _UNKNOWN]``, read once) such that ``tree`` equals ``size``; None when
    ``tree`` is not built of + - * around it."""

    def has(t: Any) -> int:
        return (t == ["var", _UNKNOWN]) + sum(has(a) for a in t[1:]) if isinstance(t, list) else 0

    if has(tree) != 1:
        return None
    target = size
    while tree != ["var", _UNKNOWN]:
        if tree[0] not in ("add", "sub", "mul"):
            return None
        op, a, b = tree
        left = has(a) == 1
        if op == "add":
            target = ["sub", target, b if left else a]
        elif op == "sub":
            target = ["add", target, b] if left else ["sub", a, target]
        else:
            target = ["div", target, b if left else a]
        tree = a if left else b
    return target


def _check_name(op: str, field_: str, entry: str, name: str, reserved: set[str]) -> None:
    try:
        ident(op, field_, name)
    except SpecError:
        raise SpecError(op, field_, f"{entry!r} is not a dimension name.",
                        "use an identifier ('M', 'seq_len'), '*B' for a group, or an int.") from None  # fmt: skip
    if name in reserved or name in _RESERVED:
        raise SpecError(op, field_, f"the dimension '{name}' is named like an argument of the op or a word of the "
                        "size language.", f"rename the dimension, e.g. '{name.upper()}_DIM' or 'N'.")  # fmt: skip


def _parse(op: str, field_: str, text: str, sh: Shapes, tensors: list[str], what: str,
           more: dict | None = None) -> object:  # fmt: skip
    try:
        return parse_size(text, {n: f"i{k}" for k, n in enumerate(tensors)}, {}, sh.trees() | (more or {}))
    except ExprError as e:
        raise SpecError(op, field_, f"{e}.", f"write {what} over the inputs' named dimensions "
                        f"({sorted(sh.trees()) or 'none are declared'}) and numel/size/stride of the inputs.") from None  # fmt: skip


def output_shape(op: str, field_: str, entries: object, sh: Shapes, tensors: list[str]) -> dict:
    """An output's declared shape tuple as the record's ``{"shape": [...], "labels": [...]}``: per axis an int,
    ``["group", name]`` or an expression tree over the inputs (names resolved to their bindings)."""
    if not isinstance(entries, tuple | list):
        raise SpecError(op, field_, f"{entries!r} is not a shape.", "use SameAs(input), ReduceDims(input, dims) or "
                        "a tuple of names, ints and size expressions, e.g. ('M', 'N').")  # fmt: skip
    dims: list = []
    labels: list[str] = []
    for e in entries:
        if isinstance(e, int) and not isinstance(e, bool):
            if e < 0:
                raise SpecError(op, field_, f"{e} is a negative size.", "use sizes >= 0.")
            dims.append(e)
        elif isinstance(e, str) and e.strip().startswith("*"):
            name = e.strip()[1:]
            if name not in sh.groups:
                raise SpecError(op, field_, f"the group '{e}' is named by no input.",
                                f"name it in an input's shape first (groups: {sorted(sh.groups) or 'none'}).")  # fmt: skip
            if any(isinstance(x, list) and x[0] == "group" for x in dims):
                raise SpecError(op, field_, f"{tuple(entries)!r} has more than one group.", "name one group per shape.")
            dims.append(["group", name])
        elif isinstance(e, str):
            tree = _parse(op, field_, e, sh, tensors, "output sizes")
            if isinstance(tree, int) and tree < 0:
                raise SpecError(op, field_, f"{e!r} is a negative size.", "use sizes >= 0.")
            dims.append(tree)
        else:
            raise SpecError(op, field_, f"{e!r} is not an entry of an output's shape.",
                            "use a dimension name ('M'), a group ('*B'), an int or a size expression ('2 * N').")  # fmt: skip
        labels.append(e.strip() if isinstance(e, str) else str(e))
    return {"shape": dims, "labels": labels}


def dim_extra(op: str, field_: str, e: Dim, sh: Shapes) -> tuple[list, str]:
    """(the expression, the label) of a ``Dim`` extra."""
    if not isinstance(e.dim, str) or e.dim not in sh.trees():
        raise SpecError(op, field_ + ".dim", f"{e.dim!r} is not a named dimension of the inputs.",
                        f"use one of {sorted(sh.trees()) or 'none: name them in InputDecl(shape=...)'}.")  # fmt: skip
    return sh.trees()[e.dim], e.dim


_EXAMPLE = {"divisible": "Divisible('C', 8)", "at_most": "AtMost('C', 8192)", "at_least": "AtLeast('N', 1)",
            "one_of": "OneOf('D', (64, 128))"}  # fmt: skip
_KINDS = {Divisible: ("divisible", "by"), AtMost: ("at_most", "limit"), AtLeast: ("at_least", "limit"),
          OneOf: ("one_of", "values")}  # fmt: skip


def requirements(op: str, reqs: Sequence[object], sh: Shapes, tensors: list[str]) -> tuple[dict, ...]:
    """Each precondition as ``{"kind", "expr", "value", "label", "why"}``."""
    if isinstance(reqs, str) or not isinstance(reqs, Sequence):
        raise SpecError(op, "requires", f"{reqs!r} is not a list of requirements.",
                        "pass e.g. requires=[Divisible('C', 8)].")  # fmt: skip
    out = []
    for k, r in enumerate(reqs):
        field_ = f"requires[{k}]"
        if type(r) not in _KINDS:
            raise SpecError(op, field_, f"{r!r} is not a requirement.", "use Divisible, AtMost, AtLeast or OneOf.")
        kind, attr = _KINDS[type(r)]
        if not isinstance(r.size, str | int) or isinstance(r.size, bool):
            raise SpecError(op, field_ + ".size", f"{r.size!r} is not a size.",
                            "name a dimension ('C') or write a size expression ('numel(x)').")  # fmt: skip
        tree = _parse(op, field_ + ".size", str(r.size), sh, tensors, "requirements")
        if not isinstance(tree, list):
            raise SpecError(op, field_ + ".size", f"{r.size!r} is a constant, which every call meets or none does.",
                            "name a dimension or a size of an input.")  # fmt: skip
        value = getattr(r, attr)
        if kind == "one_of":
            ok = isinstance(value, tuple | list) and value and all(isinstance(v, int) and not isinstance(v, bool)
                                                                  for v in value)  # fmt: skip
            value = sorted(set(value)) if ok else value
        else:
            ok = isinstance(value, int) and not isinstance(value, bool) and (kind != "divisible" or value >= 1)
        if not ok:
            what = (
                "a non-empty tuple of ints" if kind == "one_of" else "an int >= 1" if kind == "divisible" else "an int"
            )
            raise SpecError(op, f"{field_}.{attr}", f"{value!r} is not {what}.", f"pass e.g. {_EXAMPLE[kind]}.")
        if not isinstance(r.why, str):
            raise SpecError(op, field_ + ".why", f"{r.why!r} is not text.", "pass the kernel's reason as a string.")
        out.append({"kind": kind, "expr": tree, "value": value, "label": str(r.size).strip(), "why": r.why})
    return tuple(out)


def check_axes(op: str, field: str, dims: Sequence[int], rank: int | None, tensor: str) -> None:
    """Reduced axes name each axis once and exist: checked exactly where the rank is declared; otherwise axes
    of one sign (``(1, -1)`` is one axis of a 2-D tensor and two of a 3-D one)."""
    if len(set(dims)) != len(dims):
        raise SpecError(op, field, f"{tuple(dims)} repeats an axis.", "list each axis once.")
    if rank is not None:
        bad = [d for d in dims if not -rank <= d < rank]
        if bad:
            raise SpecError(op, field, f"axes {bad} do not exist in '{tensor}', declared with {rank} dims.",
                            f"use axes in [{-rank}, {rank}).")  # fmt: skip
        if len({d % rank for d in dims}) != len(dims):
            raise SpecError(op, field, f"{tuple(dims)} names one axis of '{tensor}' ({rank} dims) twice.",
                            "list each axis once.")  # fmt: skip
    elif any(d < 0 for d in dims) and any(d >= 0 for d in dims):
        raise SpecError(op, field, f"{tuple(dims)} mixes axes counted from the front and from the back, which may be "
                        f"one axis or two depending on the rank of '{tensor}'.",
                        f"write every axis with one sign, or declare the rank of '{tensor}' (shape= or ndim=).")  # fmt: skip


def min_ranks(op: str, sh: Shapes, out_args: Sequence, extra_args: Sequence, exprs: Sequence, geometry: object,
              mutated: int) -> list[int]:  # fmt: skip
    """Per tensor input, the least rank the declaration needs: the axes named dimensions are bound to and the
    groups', the reduced axes, the geometry, and every axis a size expression reads (``exprs``: extras, grid,
    tuning key, requirements). An output's axis needs its source's rank (plus the axes a reduction drops),
    or, past an output's fixed entries, its group's length. An input with the shape of another needs its
    rank too."""
    from .geometry import min_rank

    min_nd = list(sh.least)

    def need(k: int, axis: int) -> None:
        min_nd[k] = max(min_nd[k], axis + 1 if axis >= 0 else -axis)

    def need_ref(ref: str, axis: int) -> None:
        if ref.startswith("i"):
            need(int(ref[1:]), axis)
            return
        if not out_args:  # an in-place op's o0 is its first written input
            need(mutated, axis)
            return
        o = out_args[int(ref[1:])]
        if "meta" in o.shape:
            return  # a meta_fn's output: its rank is not known here
        if "shape" in o.shape:
            _need_output_axis(op, o, axis, sh, min_nd)
            return
        src = o.shape.get("same_as", o.shape.get("reduce"))
        lost = 0 if "same_as" in o.shape or o.shape["keepdim"] else len(o.shape["dims"])
        min_nd[src] = max(min_nd[src], (axis + 1 if axis >= 0 else -axis) + lost)

    def walk(e: object) -> None:
        if isinstance(e, list):
            if e[0] in ("size", "stride"):
                need_ref(e[1], e[2])
            for a in e[1:]:
                walk(a)

    for k, a in sh.dims.values():
        need(k, a)
    for k, start, after in sh.groups.values():
        min_nd[k] = max(min_nd[k], start + after)
    for o in out_args:
        if "reduce" in o.shape:
            for d in o.shape["dims"]:
                need(o.shape["reduce"], d)
        for e in o.shape.get("shape", ()):
            walk(e)
    for e in extra_args:
        for r in e.same:
            if isinstance(e.expr, list) and e.expr[0] == "stride":
                need_ref(r, e.expr[2])
    for e in exprs:
        walk(e)
    if geometry is not None:
        ref, rank = min_rank(geometry)  # type: ignore[arg-type]
        if ref == "i0":
            min_nd[0] = max(min_nd[0], rank)
        elif rank:  # the output has at least `rank` dims: counted from the back, so a group counts its own
            need_ref("o0", -rank)
    for k, j in enumerate(sh.like):  # one shape: one rank
        if j is not None:
            min_nd[k] = min_nd[j] = max(min_nd[k], min_nd[j])
    return min_nd


def _need_output_axis(op: str, o: object, axis: int, sh: Shapes, min_nd: list[int]) -> None:
    """Output ``o`` (a declared shape tuple) must have ``axis``: within its fixed entries, or its group (bound
    in some input) must be long enough to reach it."""
    dims = o.shape["shape"]  # type: ignore[attr-defined]
    n = len(dims)
    g = next((p for p, e in enumerate(dims) if isinstance(e, list) and e[0] == "group"), None)
    if g is None:
        if not -n <= axis < n:
            raise SpecError(
                op,
                f"outputs '{o.name}'.shape",
                f"the launch or an extra reads axis {axis} of "  # type: ignore[attr-defined]
                f"'{o.name}', which is declared with {n} dims.",
                "fix the axis or the output's shape.",
            )  # type: ignore[attr-defined]
        return
    if axis >= 0:
        extra = axis - g + 1 if axis >= g else 0
    else:
        after = n - 1 - g
        extra = -axis - after if -axis > after else 0
    if extra:
        k, start, aft = sh.groups[dims[g][1]]
        min_nd[k] = max(min_nd[k], start + aft + extra)
