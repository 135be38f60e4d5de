"""Binding a declaration to the kernel's own parameters: which declared item fills which parameter, and
whether each one fits.

Order: by name when the kernel's parameter names are known and every runtime parameter matches exactly
one declared name (``x`` also matches ``x_ptr``); by an explicit ``param_order``; otherwise by the default
calling convention (inputs and scalars as declared, extras, outputs), which must not contradict any name
that does match. Fit: a tensor fills a pointer whose element type is its dtype (or a template parameter
bound to it), a scalar or extra fills a by-value parameter of a C type it can be packed as, and every
size agrees with the binary's. Anything else is a ``SpecError`` naming the parameters and the fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from ..errors import InputError, SpecError
from .record import ExtraArg, OutputArg, Param
from .signature import DTYPE_OF_CTYPE, SIZE_OF_CTYPE, KernelParam

__all__ = ["Item", "Typing", "bind", "check_instantiation", "declared_items"]

_INT_CTYPES = {"i32", "u32", "i64", "u64"}
_SCALAR_CTYPES = {
    "float": {"f32", "f64", "f16", "bf16"},
    "int": {"i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"},
    "bool": {"bool", "u8", "i8", "i32"},
}


@dataclass(frozen=True)
class Item:
    """A declared thing that fills one kernel parameter."""

    role: str  # "input" | "extra" | "output"
    index: int  # among record.inputs / extras / outputs
    kind: str  # "tensor" | "scalar" | "extra" | "output"
    name: str | None  # None: an extra declared without a name
    label: str

    def matches(self, param_name: str) -> bool:
        return bool(self.name) and param_name in (self.name, f"{self.name}_ptr")


def declared_items(inputs: Sequence[tuple[str, str]], extras: Sequence[ExtraArg],
                   outputs: Sequence[OutputArg]) -> list[Item]:  # fmt: skip
    """The runtime items in the default calling convention's order (static extras are compiled in).
    ``inputs``: (kind, name) per input, kind "tensor" or "scalar"."""
    items = [Item("input", k, kind, name, f"{name} ({kind} input)") for k, (kind, name) in enumerate(inputs)]
    items += [Item("extra", k, "extra", e.name, f"{e.label} (extra{'' if e.name else ' without a name'})")
              for k, e in enumerate(extras) if not e.static]  # fmt: skip
    items += [Item("output", k, "output", o.name, f"{o.name} (output)") for k, o in enumerate(outputs)]
    return items


def _order_by_names(op: str, items: list[Item], names: list[str]) -> list[Item] | None:
    """The items in the kernel's order when every parameter name matches exactly one item; None when names
    match only in part; raises for an ambiguous match."""
    for n in names:
        hits = [d for d in items if d.matches(n)]
        if len(hits) > 1:
            raise SpecError(op, "kernel signature", f"the kernel's parameter '{n}' matches several declared names "
                            f"({', '.join(d.label for d in hits)}).", "give each input, output and extra its own name.")  # fmt: skip
    for d in items:
        taken = [n for n in names if d.matches(n)]
        if len(taken) > 1:
            raise SpecError(op, "kernel signature", f"'{d.name}' matches the kernel's parameters {taken}.",
                            "rename one of them, or declare param_order=[...] in the kernel's order.")  # fmt: skip
    order = [next((d for d in items if d.matches(n)), None) for n in names]
    if any(d is None for d in order) or len({id(d) for d in order}) != len(items) or len(order) != len(items):
        return None
    return order  # type: ignore[return-value]


def _explicit(op: str, items: list[Item], param_order: Sequence[str]) -> list[Item]:
    by_name = {d.name: d for d in items if d.name}
    order, unknown = [], []
    for n in param_order:
        if n in by_name:
            order.append(by_name[n])
        else:
            unknown.append(n)
    missing = [d.label for d in items if d not in order]
    if unknown or missing or len(set(param_order)) != len(param_order):
        raise SpecError(op, "param_order", f"{list(param_order)} must list every declared name once; unknown: "
                        f"{unknown or 'none'}; not listed: {missing or 'none'}.",
                        "list each input, output and named extra once, in the kernel's parameter order "
                        "(give extras name=...).")  # fmt: skip
    return order


def _count_error(op: str, items: list[Item], params: list[KernelParam]) -> SpecError:
    want = ", ".join(d.label for d in items)
    have = ", ".join(p.describe() for p in params)
    renames = _renames(items, params) if all(p.name for p in params) else []
    close = f" {' '.join(renames)}" if renames else ""
    return SpecError(op, "kernel signature", f"the kernel takes {len(params)} parameters ({have}) but the "
                     f"declaration implies {len(items)}: {want}.{close}",
                     "declare one input, scalar, extra or output per kernel parameter (name them like the kernel's "
                     "parameters to bind by name; otherwise the order is inputs and scalars as declared, then "
                     "extras, then outputs).")  # fmt: skip


def _closest(name: str, candidates: Sequence[str]) -> str | None:
    """The kernel parameter a declared name was probably meant for: equal but for case or a ``_ptr`` suffix,
    else difflib's closest at a ratio of 0.8 or more."""
    key = name.lower().removesuffix("_ptr")
    for c in candidates:
        if c.lower().removesuffix("_ptr") == key:
            return c
    hit = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.8)
    return hit[0] if hit else None


def _renames(items: list[Item], params: list[KernelParam]) -> list[str]:
    """'did you mean' lines: each declared name that matches no kernel parameter but is close to one that no
    declared name matches and that can take it (a pointer for a tensor, a value for a scalar or an extra, where
    the signature says which)."""
    typed = any(p.pointer for p in params)
    out = []
    for d in items:
        if not d.name or any(d.matches(p.name) for p in params):
            continue
        fits = [p.name for p in params if p.name and not any(x.matches(p.name) for x in items)
                and (not typed or p.pointer == (d.kind in ("tensor", "output")))]  # fmt: skip
        if hit := _closest(d.name, fits):
            out.append(f"{d.label} is named '{d.name}': did you mean '{hit}'?")
    return out


def _order_by_kind(items: list[Item], params: list[KernelParam]) -> list[str] | None:
    """A ``param_order`` that binds by what each parameter is (C++ signatures): a name match first; then a
    ``const`` pointer takes the next unmatched tensor input, another pointer the next output (else input), and
    a by-value parameter the next scalar or extra, in declaration order. None when a name is missing or the
    kinds do not pair up: the advice then names the two lists only."""
    if not all(d.name for d in items) or len(items) != len(params):
        return None
    named = {id(d) for p in params for d in items if d.matches(p.name)}
    if not any(p.pointer for p in params) and len(items) - len(named) > 1:
        return None  # a signature without types (Triton's) pairs one leftover, not several
    free = {k: [d for d in items if id(d) not in named and d.kind in kinds]
            for k, kinds in (("in", ("tensor",)), ("out", ("output",)), ("val", ("scalar", "extra")))}  # fmt: skip
    order = []
    for p in params:
        hit = next((d for d in items if d.matches(p.name)), None)
        if hit is None:
            pool = (free["in"] or free["out"]) if p.const else (free["out"] or free["in"])
            pool = pool if p.pointer else free["val"]
            if not pool:
                return None
            hit = pool.pop(0)
        order.append(hit.name)
    return order if len(set(order)) == len(items) else None  # type: ignore[arg-type]


def _names_advice(items: list[Item], params: list[KernelParam]) -> tuple[str, str]:
    """(what the names say, the fix) for an error in the default calling convention when the kernel's names are
    known: they did not bind the declaration, so name the items after the parameters or give param_order."""
    renames = _renames(items, params)
    order = _order_by_kind(items, params)
    said = (f" The kernel's parameter names ({', '.join(p.name for p in params)}) do not bind the declaration by "
            f"name{': ' + ' '.join(renames) if renames else '.'}")  # fmt: skip
    fix = ("name each input, output and extra after the kernel parameter it fills (Numel('x', name='n')) to bind "
           "by name, or give param_order=[...] listing the declared names in the kernel's order"
           f"{f' (here: param_order={order})' if order else ''}.")  # fmt: skip
    return said, fix


def order_items(op: str, items: list[Item], params: list[KernelParam], *, names_why: str = "",
                param_order: Sequence[str] | None = None) -> list[Item]:  # fmt: skip
    """The declared items in the kernel's parameter order (see the module docstring)."""
    if param_order is not None:
        order = _explicit(op, items, param_order)
        if len(order) != len(params):
            raise _count_error(op, items, params)
        return order
    names = [p.name for p in params]
    known = all(names) and not names_why
    if known:
        by_name = _order_by_names(op, items, names)
        if by_name is not None:
            return by_name
    if len(items) != len(params):
        raise _count_error(op, items, params)
    if not known:
        return items
    clashes = []
    for d, n in zip(items, names, strict=True):
        owner = next((x for x in items if x.matches(n)), None)
        if owner is not None and owner is not d:
            clashes.append(
                f"the default order passes {d.label} as the kernel's '{n}', which is the name of {owner.label}"
            )
    if clashes:
        unmatched_params = [p.describe() for p in params if not any(d.matches(p.name) for d in items)]
        unmatched_decl = [d.label for d in items if not any(d.matches(n) for n in names)]
        renames = _renames(items, params)
        order = _order_by_kind(items, params)
        raise SpecError(op, "kernel signature", f"the kernel's parameter names match the declaration only in part: "
                        f"{'; '.join(clashes)}. Kernel parameters no declared name matches: "
                        f"{', '.join(unmatched_params) or 'none'}; declared without a matching parameter: "
                        f"{', '.join(unmatched_decl) or 'none'}.{' ' + ' '.join(renames) if renames else ''}",
                        "name every input, output and extra after the kernel parameter it fills (Numel('x', "
                        "name='n')) to bind by name, or declare them in the kernel's order"
                        f"{f' (param_order={order})' if order else ''}.")  # fmt: skip
    return items


@dataclass
class Typing:
    """What the kernel's parameters say about the declaration, filled in by ``bind``."""

    dtypes: list[torch.dtype | None]  # per tensor input: the element type the kernel reads
    like: list[str | None]  # per tensor input: another input whose dtype it must have
    scalar_ctypes: dict[str, str]
    out_dtypes: list[torch.dtype | None]  # per output: fixed element type
    out_like: list[str | None]  # per output: the input whose dtype it takes (a template parameter)


def bind(op: str, items: list[Item], params: list[KernelParam], typing: Typing, extras: list[ExtraArg], *,
         typed: str, tensor_names: list[str], scalar_types: dict[str, str], names_why: str = "",
         param_order: Sequence[str] | None = None) -> tuple[Param, ...]:  # fmt: skip
    """Order the items after ``params`` and check each fit. ``typed``: "full" (C++: the compiler's types),
    "sizes" (PTX: sizes only), "none" (Triton: the declaration decides the types). Fills ``typing`` and the
    extras' C types; returns the record's ``params``."""
    order = order_items(op, items, params, names_why=names_why, param_order=param_order)
    defaulted = (param_order is None and not names_why and all(p.name for p in params)
                 and _order_by_names(op, items, [p.name for p in params]) is None)  # fmt: skip
    out: list[Param] = []
    for d, p in zip(order, params, strict=True):
        try:
            out.append(_fit(op, d, p, typing, extras, typed, tensor_names, scalar_types))
        except SpecError as e:
            # A pointer met by a value (or the reverse) where the names did not bind is the order's fault, not
            # the kernel's; a width or a dtype is the declaration's.
            if not defaulted or typed != "full" or (d.kind in ("tensor", "output")) == p.pointer:
                raise
            said, fix = _names_advice(items, params)
            raise SpecError(op, e.field, f"{e.problem}{said}", f"{fix[:-1]}; if the order is right, {e.fix}") from None
    return tuple(out)


def _fit(op: str, d: Item, p: KernelParam, typing: Typing, extras: list[ExtraArg], typed: str,
         tensor_names: list[str], scalar_types: dict[str, str]) -> Param:  # fmt: skip
    """One item in one parameter: its fit checked, its C type found (filling ``typing`` and ``extras``)."""
    where = f"parameter '{p.describe()}' (for {d.label})"
    if d.kind in ("tensor", "output"):
        _fit_pointer(op, d, p, where, typing, typed, tensor_names)
        return Param(p.name, d.role, d.index, "ptr", 8)  # type: ignore[arg-type]
    if typed == "full" and p.pointer:
        raise SpecError(op, "kernel signature", f"{where} is a pointer but {d.label} is passed by value.",
                        "declare it as an InputDecl/OutputDecl, or fix the kernel.")  # fmt: skip
    if d.kind == "scalar":
        # Untyped (Triton): the flavor's default, which resolve() put in ``typing``.
        ctype = (
            typing.scalar_ctypes[d.name]
            if typed == "none"
            else _fit_scalar(op, d, p, where, scalar_types[d.name], typed)
        )  # type: ignore[index]
        typing.scalar_ctypes[d.name] = ctype  # type: ignore[index]
    else:
        ctype = _fit_extra(op, d, p, where, extras[d.index], typed)
        extras[d.index] = replace(extras[d.index], ctype=ctype)
    if typed != "none" and p.size and SIZE_OF_CTYPE.get(ctype, 0) != p.size:
        raise SpecError(op, "kernel signature", f"{where} has {p.size} bytes in the binary, but {d.label} would "
                        f"be passed as {ctype} ({SIZE_OF_CTYPE.get(ctype)} bytes).", "make the declaration "
                        "match the kernel's parameter type.")  # fmt: skip
    return Param(p.name, d.role, d.index, ctype, SIZE_OF_CTYPE.get(ctype, 0))  # type: ignore[arg-type]


def _fit_pointer(op: str, d: Item, p: KernelParam, where: str, typing: Typing, typed: str,
                 tensor_names: list[str]) -> None:  # fmt: skip
    if typed == "none":
        return
    is_ptr = p.pointer if typed == "full" else p.size == 8
    if not is_ptr:
        raise SpecError(op, "kernel signature", f"{where} is not a pointer.",
                        f"pass '{d.name}' as a pointer, or declare it as a ScalarInput/extra instead.")  # fmt: skip
    if typed != "full":
        return
    if p.slot is not None and p.slot not in tensor_names:
        raise SpecError(op, "kernel_name", f"'{{T_{p.slot}}}' names no tensor input.",
                        f"use {{T_<input>}} with one of {tensor_names}.")  # fmt: skip
    elem = DTYPE_OF_CTYPE.get(p.ctype)
    if d.kind == "tensor":
        k = tensor_names.index(d.name)  # type: ignore[arg-type]
        declared = typing.dtypes[k]
        if elem is not None and declared is not None and elem != declared:
            raise SpecError(op, f"inputs '{d.name}'.dtype", f"declared {declared} but the kernel reads {p.describe()}.",
                            "make InputDecl.dtype match the kernel's pointer type.")  # fmt: skip
        if declared is None and elem is not None:
            typing.dtypes[k] = elem
        if p.slot is not None and p.slot != d.name:
            if typing.like[k] not in (None, p.slot):
                raise SpecError(op, f"inputs '{d.name}'.dtype", f"declared with the dtype of '{typing.like[k]}' but "
                                f"the kernel types it by the template parameter of '{p.slot}'.",
                                f"set dtype='{p.slot}' or drop it (the kernel decides).")  # fmt: skip
            typing.like[k] = p.slot
        return
    if elem is not None:
        typing.out_dtypes[d.index] = elem
    elif p.slot is not None:
        typing.out_like[d.index] = p.slot


def _fit_scalar(op: str, d: Item, p: KernelParam, where: str, py: str, typed: str) -> str:
    if typed == "sizes":  # PTX types its parameters; a cubin gives sizes only ("?"), which decide the width
        if p.ctype in _SCALAR_CTYPES[py]:
            return p.ctype
        guess = None if p.ctype != "?" else {("float", 4): "f32", ("float", 8): "f64", ("float", 2): "f16", ("int", 4): "i32",
                 ("int", 8): "i64", ("bool", 1): "bool"}.get((py, p.size))  # fmt: skip
        if guess is None:
            raise SpecError(op, f"ScalarInput '{d.name}'", f"py_type={py} cannot be passed as {where}.",
                            "make ScalarInput.py_type match the kernel's parameter.")  # fmt: skip
        return guess
    if p.ctype not in _SCALAR_CTYPES[py]:
        raise SpecError(op, f"ScalarInput '{d.name}'", f"py_type={py} cannot be passed as {where}.",
                        "make ScalarInput.py_type match the kernel's parameter type (a struct or vector type "
                        "such as float2 cannot be filled from a Python number).")  # fmt: skip
    return p.ctype


def _fit_extra(op: str, d: Item, p: KernelParam, where: str, e: ExtraArg, typed: str) -> str:
    floating = isinstance(e.expr, float)
    if typed == "none":
        return e.ctype or ("f32" if floating else "i32")
    ctype = p.ctype
    if typed == "sizes" and ctype not in _INT_CTYPES | {"f32", "f64"}:
        ctype = {4: "f32" if floating else "i32", 8: "f64" if floating else "i64"}.get(p.size, "?")
    allowed = {"f32", "f64"} if floating else _INT_CTYPES
    if isinstance(e.expr, list) and e.expr[0] == "present":  # a truth value: a bool parameter takes it too
        allowed = allowed | {"bool"}
    if ctype not in allowed:
        raise SpecError(op, f"extras '{e.label}'", f"{where} is not a {'float or double' if floating else '32- or 64-bit integer'}.",
                        "take integer extras as int, unsigned, long long or int64_t, and float constants as float "
                        "or double.")  # fmt: skip
    if e.ctype and SIZE_OF_CTYPE[e.ctype] != SIZE_OF_CTYPE[ctype]:
        raise SpecError(op, f"extras '{e.label}'.dtype", f"declared {e.ctype} but {where} has "
                        f"{SIZE_OF_CTYPE[ctype]} bytes.", "make the dtype match the parameter.")  # fmt: skip
    return ctype


def check_instantiation(op: str, record, params: list[KernelParam], dtypes: dict[str, torch.dtype],
                        out_dtypes: list[torch.dtype]) -> None:  # fmt: skip
    """One compiled instantiation of a generic kernel against the tensors a call passes: every pointer's
    element type, as the compiler compiled it, must be the dtype of the tensor that fills it."""
    if len(params) != len(record.params):
        raise SpecError(op, "kernel signature", f"this instantiation takes {len(params)} parameters, the op "
                        f"was registered with {len(record.params)}.", "keep the parameter list independent of "
                        "the template arguments.")  # fmt: skip
    for bound, p in zip(record.params, params, strict=True):
        if bound.ctype != "ptr":
            if p.pointer or (p.ctype != "?" and p.ctype != bound.ctype):
                raise SpecError(op, "kernel signature", f"in this instantiation parameter '{p.describe()}' is not "
                                f"the {bound.ctype} the op was registered with.", "keep by-value parameter types "
                                "independent of the template arguments.")  # fmt: skip
            continue
        if bound.role == "input":
            name = record.inputs[bound.index].name
            have = dtypes[name]
        else:
            name = record.outputs[bound.index].name
            have = out_dtypes[bound.index]
        elem = DTYPE_OF_CTYPE.get(p.ctype)
        if elem is not None and have is not None and elem != have:  # (None: an optional input passed as None)
            raise InputError(op, name, f"dtype {elem} (the kernel's parameter is {p.describe()} for this call's "
                             "dtypes)", f"{have}", f"Fix: pass {name} as {elem}, or fix the kernel's template "
                             "parameters.")  # fmt: skip
