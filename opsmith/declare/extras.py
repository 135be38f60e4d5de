"""Extras: the integers (and constants) a call passes besides its tensors and scalars, resolved from their
declarations (``Numel``, ``DimSize``, ``Dim``, ``Stride``, ``Const``, ``Present``, ``Size``) into the record's
``ExtraArg``s: each a size expression over the op's tensors (``expr.py``), a label messages use, the kernel
parameter it fills and whether it is compiled in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from ..errors import SpecError
from .dims import Shapes, dim_extra
from .record import ExtraArg
from .spec import Const, Dim, DimSize, Numel, Present, Size, Stride, index_type_name
from .validate import ident, ref_index

__all__ = ["INDEX_CTYPE", "axis_of", "resolve_extras", "size_extra"]

#: An extra's declared index type as the record's C type ("" : read it from the kernel's parameter).
INDEX_CTYPE = {"int32": "i32", "int64": "i64", None: ""}


def axis_of(op: str, field: str, axis: object) -> int:
    """``axis`` when it is an int (negative allowed), else a SpecError naming the field."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise SpecError(op, field + ".axis", f"{axis!r} is not an axis.", "pass an int (negative allowed).")
    return axis


def resolve_extras(op: str, extras: Sequence, tensors: list[str], scalars: list[str], out_names: list[str],
            static_names: frozenset[str], taken: set[str], sh: Shapes,
            optional: frozenset[int] = frozenset(), asked: dict[str, int] | None = None) -> list[ExtraArg]:  # fmt: skip
    """Integers (and constants) computed per call, as geometry expressions over tensor refs. ``asked``: each
    optional output's name -> its flag's position among the inputs (``Present`` of it reads the flag)."""
    out: list[ExtraArg] = []
    for k, e in enumerate(extras):
        field = f"extras[{k}]"
        if not isinstance(e, Numel | DimSize | Dim | Stride | Const | Present | Size):
            raise SpecError(op, field, f"{e!r} is not Numel, DimSize, Dim, Stride, Const, Present or Size.",
                            "use Numel(name), DimSize(name, axis), Dim('K'), Stride(name, axis), Const(value), "
                            "Present(name) or Size('expression').")  # fmt: skip
        if isinstance(e.dtype, torch.dtype):  # torch.int64 and "int64" are one convention
            e = dataclasses.replace(e, dtype=index_type_name(e.dtype))
        if e.dtype not in (None, "int32", "int64"):
            raise SpecError(op, field + ".dtype", f"{e.dtype!r} is not an index type.",
                            "use torch.int32 or torch.int64 (or 'int32' / 'int64').")  # fmt: skip
        pname = e.param if isinstance(e, Dim) else e.name
        if pname is not None:
            ident(op, field + ".name", pname)
            if pname in taken:
                raise SpecError(op, field + ".name", f"'{pname}' is already the name of an input, output or extra.",
                                "name each extra after the one kernel parameter it fills"
                                f"{' (Dim(..., name=...))' if isinstance(e, Dim) else ''}.")  # fmt: skip
            taken.add(pname)
        same: tuple[str, ...] = ()
        if isinstance(e, Dim):
            expr, label = dim_extra(op, field, e, sh)
        elif isinstance(e, Numel):
            idx = ref_index(op, field + ".input_name", e.input_name, tensors, scalars)
            expr, label = ["numel", f"i{idx}"], f"numel({e.input_name})"
        elif isinstance(e, Size):
            expr, label = size_extra(op, field, e.expr, tensors, out_names, sh), str(e.expr)
        elif isinstance(e, Present) and e.input_name in (asked or {}):  # an optional output: whether it was asked
            expr, label = ["var", f"s{asked[e.input_name]}"], f"asked({e.input_name})"  # type: ignore[index]
        elif isinstance(e, Present):
            idx = ref_index(op, field + ".input_name", e.input_name, tensors, scalars)
            if idx not in optional:
                raise SpecError(op, field + ".input_name", f"'{e.input_name}' is not an optional input, so it is "
                                "always present.", f"declare InputDecl('{e.input_name}', optional=True), or pass "
                                "Const(1).")  # fmt: skip
            expr, label = ["present", f"i{idx}"], f"present({e.input_name})"
        elif isinstance(e, DimSize):
            idx = ref_index(op, field + ".input_name", e.input_name, tensors, scalars)
            expr, label = ["size", f"i{idx}", axis_of(op, field, e.axis)], f"size({e.input_name}, {e.axis})"
            if e.bucket not in ("exact", "pow2"):
                raise SpecError(op, field + ".bucket", f"{e.bucket!r} is not a bucket.", "use 'exact' or 'pow2'.")
            if e.bucket == "pow2":
                expr, label = ["pow2", expr], f"pow2({label})"
        elif isinstance(e, Stride):
            names = (e.tensor,) if isinstance(e.tensor, str) else tuple(e.tensor)
            if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
                raise SpecError(op, field + ".tensor", f"{e.tensor!r} is not a tensor name or a tuple of distinct "
                                "names.", "pass Stride('x', axis) or Stride(('a', 'b'), axis).")  # fmt: skip
            refs = []
            for n in names:
                if n in out_names:
                    refs.append(f"o{out_names.index(n)}")
                else:
                    refs.append(f"i{ref_index(op, field + '.tensor', n, tensors, scalars)}")
            expr = ["stride", refs[0], axis_of(op, field, e.axis)]
            label, same = f"stride({'/'.join(names)}, {e.axis})", tuple(refs[1:])
            gone = [n for n, r in zip(names, refs, strict=True) if r[0] == "i" and int(r[1:]) in optional]
            if same and gone:
                raise SpecError(op, field + ".tensor", f"the optional input {gone[0]!r} shares one stride with "
                                f"{[n for n in names if n not in gone]}; when it is None there is no stride to share.",
                                "give the optional tensor a Stride of its own.")  # fmt: skip
        else:
            if isinstance(e.value, bool) or not isinstance(e.value, int | float):
                raise SpecError(op, field + ".value", f"{e.value!r} is not a number.", "pass an int or a float.")
            if isinstance(e.value, float) and e.dtype is not None:
                raise SpecError(op, field + ".dtype", "a float constant takes its type from the kernel's parameter.",
                                "drop dtype=, or pass an int value.")  # fmt: skip
            expr, label = e.value, f"const {e.value!r}"
        static = pname is not None and pname in static_names
        out.append(ExtraArg(label, expr, INDEX_CTYPE[e.dtype], pname, static, same))
    return out


def size_extra(op: str, field: str, text: object, tensors: list[str], out_names: list[str], sh: Shapes) -> object:
    """A ``Size`` extra's expression tree, over the op's tensors and named dimensions."""
    from .expr import ExprError, parse_size

    refs = {**{n: f"i{k}" for k, n in enumerate(tensors)}, **{n: f"o{k}" for k, n in enumerate(out_names)}}
    try:
        tree = parse_size(text, refs, dims=sh.trees())  # type: ignore[arg-type]
    except ExprError as e:
        raise SpecError(op, field + ".expr", str(e), "write a size expression over numel/size/stride of the op's "
                        "tensors, its named dimensions and sm_count (as Grid takes), e.g. 'cdiv(numel(x), sm_count)'.") from None  # fmt: skip
    if not isinstance(tree, list):
        raise SpecError(op, field + ".expr", f"{text!r} is a constant.", "pass Const(value) for a fixed number.")
    return tree
