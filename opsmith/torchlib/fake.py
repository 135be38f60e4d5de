"""The fake (meta) implementation: the call plan printed for fake and meta tensors, shapes and dtypes only.

It applies the plan's steps that need no data and no device: dtypes, ranks, declared shapes and dtype ties
always, and the size checks (32-bit limits, empty inputs, extras' ranges, launch extents) where every size
they read is a plain integer. So a wrong input fails while torch.compile or torch.export traces, not only when
the kernel would launch, and a symbolic size is never compared (which would add a guard to the graph).
A native library's Meta kernel prints the same plan in C++ (``native/codegen.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..declare.record import KernelRecord
from ..plan import steps as P
from ..plan.guards import check_symbolic, check_ties, misalign, static_int, sym_one_of
from ..plan.lowering import lower
from .eager import _Printer

__all__ = ["make_fake", "meta_source"]


def known(cond: Any) -> bool:
    """Whether ``cond`` holds for every value of its symbols, decided without adding a guard (False when it
    depends on them)."""
    if isinstance(cond, torch.SymBool):
        from torch.fx.experimental.symbolic_shapes import statically_known_true

        return statically_known_true(cond)
    return bool(cond)


def _static_tensors(*ts: Any) -> bool:
    """Every size and stride of these tensors is a plain int."""
    return all(static_int(*t.shape, *t.stride()) for t in ts if t is not None)


class _MetaPrinter(_Printer):
    """The plan's meta semantics: what needs a device or data is skipped, size checks need static sizes."""

    def __init__(self, plan: P.CallPlan, record: KernelRecord) -> None:
        super().__init__(plan, record, dry=False)
        self.g.update({"_static": static_int, "_static_t": _static_tensors, "_ties": check_ties, "_known": known,
                       "_sym_check": check_symbolic, "_one_of": sym_one_of, "_misalign": misalign})  # fmt: skip
        self.refs["sm_count"] = f"_sms({self.t[0]})"  # no device here: the tensor's (132 SMs without a GPU)
        self.allocated = False

    def device(self, s: P.Device) -> list[str]:
        return []

    def layout(self, s: P.Layout) -> list[str]:
        """A layout ``require`` refuses is refused while tracing too, symbolic strides included (a transposed
        input's are decided without a guard; an undecided one guards, as a stride comparison in the eager code
        would): a traced reference (``compile="reference"``, or "auto" where it won) checks no layout itself.
        The copy ``make`` would make needs no check."""
        if s.policy == "make":
            return []
        return super().layout(s)

    def numel(self, s: P.Numel) -> list[str]:
        n = self.tn[s.k]
        check = [f"if _static(_n{s.k}) and _n{s.k} > {P.INT32_MAX}: raise _E.large({n!r}, _n{s.k})"] if s.narrow else []
        return [f"_n{s.k} = {self.numel_of(s.k)}", *check]

    def span(self, s: P.Span) -> list[str]:
        """Where the real call would copy the tensor (not addressable) its span is its numel, checked."""
        t, n = self.t[s.k], self.tn[s.k]
        return [f"if _static_t({t}) and _fits({t}, {s.axes!r}):",
                f"    _s = _span({t})",
                f"    if _s > {P.INT32_MAX}: raise _E.span({n!r}, {t}, _s)"]  # fmt: skip

    def align(self, s: P.Align) -> list[str]:
        """A view the real call would copy needs nothing; one it would refuse is refused here too, from its
        storage offset (``guards.misalign``)."""
        if s.policy == "make":
            return []
        t, n = self.t[s.k], self.tn[s.k]
        return [f"if _misalign({t}, {s.bytes}): raise _E.align({n!r}, {t}, {s.bytes})"]

    def shape(self, s: P.Shape) -> list[str]:
        pairs = ", ".join(f"(tuple({a}), tuple({b}))" if isinstance(axis, tuple) else f"({a}, {b})"
                          for (a, b), (axis, _) in zip(self._ties(s), s.ties, strict=True))  # fmt: skip
        return [f"_ties(lambda: {self._shape_error(s)}, [{pairs}])"]

    def shapeof(self, s: P.ShapeOf) -> list[str]:
        t, n, o, on = self.t[s.k], self.tn[s.k], self.t[s.other], self.tn[s.other]
        return [f"_ties(lambda: _E.shape_of({n!r}, {t}, {on!r}, {o}), [(tuple({t}.shape), tuple({o}.shape))])"]

    def require(self, s: P.Require) -> list[str]:
        from .eager import _refused, _require_error

        ok = f"_one_of(_r, {tuple(s.value)!r})" if s.kind == "one_of" else f"not ({_refused('_r', s.kind, s.value)})"
        return [f"_r = {self.expr(s.expr, s.where, s.wide, early=True)}",
                "if _static(_r):",
                f"    if {_refused('_r', s.kind, s.value)}: raise {_require_error(s)}",
                f"else: _sym_check(lambda: {_require_error(s)}, {ok})"]  # fmt: skip

    def scalar(self, s: P.Scalar) -> list[str]:
        line = super().scalar(s)[0]
        return [line.replace("if ", f"if _static({self.args[s.pos]}) and ", 1)] if s.ctype in P.INT_LIMITS else [line]

    def alloc(self, s: P.Alloc) -> list[str]:
        last = self._all_static() if s.k == len(self.plan.outputs) - 1 else []
        if s.rule == "meta":  # the op's meta_fn allocates; every guard before it ran all the same
            outs = [f"_o{k}" for k in range(len(self.plan.outputs))]
            one = len(outs) == 1
            call = [
                f"_r = _meta({', '.join(self.args)})",
                f"{', '.join(outs)}{',' if one else ''} = {'(_r,)' if one else '_r'}",
            ]
            return [*(call if s.k == 0 else []), *last]
        if s.rule == "shape":
            L = [f"_s{s.k} = {self.out_shape(s)}"]
            if s.narrow:
                L.append(f"if _static(*_s{s.k}) and _prod(_s{s.k}) > {P.INT32_MAX}: "
                         f"raise _E.large_out({self.plan.outputs[s.k]!r}, _s{s.k})")  # fmt: skip
            from ..declare.record import dtype_from_name

            if s.dtype is not None:
                self.g[f"_odt{s.k}"] = dtype_from_name(s.dtype)
            dt = f"_odt{s.k}" if s.dtype is not None else f"{self.t[s.dtype_from]}.dtype"
            if s.wide_bytes:
                L.append(f"if _static(*_s{s.k}) and _prod(_s{s.k}) * {dt}.itemsize > 9223372036854775807: "
                         f"raise _E.huge_out({self.plan.outputs[s.k]!r}, _s{s.k}, {dt})")  # fmt: skip
            L = [*L, f"_o{s.k} = {self.t[s.src]}.new_empty(_s{s.k}, dtype={dt})", *self.init_check(s)]
            return [*self.requested(s, L), *last]
        src = self.t[s.src]
        if s.dtype is not None:
            from ..declare.record import dtype_from_name

            self.g[f"_odt{s.k}"] = dtype_from_name(s.dtype)
        dt = f"_odt{s.k}" if s.dtype is not None else f"{self.t[s.dtype_from]}.dtype"
        shape = f"{src}.shape" if s.rule == "same" else \
            f"_out_shape(_op, {s.dims!r}, {s.keepdim}, {src}, {self.tn[s.src]!r})"  # fmt: skip
        return [*self.requested(s, [f"_o{s.k} = {src}.new_empty({shape}, dtype={dt})", *self.init_check(s)]), *last]

    def _all_static(self) -> list[str]:
        self.allocated = True
        ts = [*self.t, *(f"_o{k}" for k in range(len(self.plan.outputs)))]
        return [f"_st = _static_t({', '.join(ts)})"]

    def returnifempty(self, s: P.ReturnIfEmpty) -> list[str]:
        pre = [] if self.allocated else self._all_static()
        # Sizes known to be 0 without a guard: under dynamic shapes the axis at 0 is a constant (torch never
        # marks a size of 0 or 1 dynamic), so an empty input is refused while tracing even beside symbolic axes.
        return [*pre, f"if {' and '.join(f'_known({self.expr(w)} == 0)' for w in s.written)}: return {self.ret()}"]

    def refuseempty(self, s: P.RefuseEmpty) -> list[str]:
        written = [f"_o{k}" for k in range(len(self.plan.outputs))] + [self.t[k] for k in self.plan.mutated]
        names = [self.tn[k] for k in s.tensors]
        ns = [f"_n{k}" for k in s.tensors]
        conds = [f"({self.t[k]} is not None and _known(_n{k} == 0))" if k in self.plan.optional else
                 f"_known(_n{k} == 0)" for k in s.tensors]  # fmt: skip
        return [f"if {' or '.join(conds)}: raise _E.empty({names!r}, [{', '.join(ns)}], [{', '.join(written)}])"]

    def extra(self, s: P.Extra) -> list[str]:
        if s.check is None and not s.wide and not _divides(s.expr):
            return []  # nothing to check, and the value is not needed without a launch
        return ["if _st:", *("    " + x for x in super().extra(s))]

    def extent(self, s: P.Extent) -> list[str]:
        return ["if _st:", *("    " + x for x in super().extent(s))]


def _divides(e: Any) -> bool:
    return isinstance(e, list) and (e[0] in ("div", "cdiv") or any(_divides(a) for a in e[1:]))


def meta_source(plan: P.CallPlan, record: KernelRecord) -> tuple[str, dict]:
    """(the fake implementation's source, its globals)."""
    pr = _MetaPrinter(plan, record)
    body = [*pr.steps(), f"return {pr.ret()}"]
    text = "\n".join([f"def fake({pr.signature()}):", *("    " + x for x in body)]) + "\n"
    return text, pr.g


def make_fake(record: KernelRecord, plan: P.CallPlan | None = None, meta_fn: Callable | None = None) -> Callable:
    """The fake implementation of ``record`` (its plan lowered here when not given); ``meta_fn``: what
    allocates the outputs of an op that declares none (after every guard of the plan)."""
    if plan is None:
        plan = lower(record)
    text, g = meta_source(plan, record)
    g["_meta"] = meta_fn
    scope: dict[str, Any] = {}
    exec(compile(text, f"<opsmith fake {record.op_name}>", "exec"), g, scope)
    fn = scope["fake"]
    fn.source = text
    return fn
