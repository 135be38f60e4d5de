"""Lowering: an op's record turned, once at registration, into its call plan (``plan/steps.py``'s steps).

The order of the steps is the order of a call: per tensor input its device, dtype, rank, element count, layout,
alignment and span; then the relations between inputs (dtypes alike, named dimensions, whole shapes), scalar
ranges, preconditions, output allocation, empty-tensor handling, extras, launch extents, per-config grid
checks and the packed launch. Checks that interval bounds (``expr.bounds``) prove unnecessary are left out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..declare.expr import I64_MAX, Facts, bounds, describe, first_tensor, is_wide, unsafe_divisors
from ..declare.limits import init_fits
from ..declare.record import KernelRecord, ScalarArg, TensorArg, dtype_from_name
from ..errors import SpecError
from .steps import (
    _AXES,
    FLOAT_MAX,
    GRID_MAX,
    INT32_MAX,
    INT_LIMITS,
    SMEM_AXIS,
    SMEM_MAX,
    Align,
    Alloc,
    CallPlan,
    Device,
    Dtype,
    Extent,
    Extra,
    Given,
    GridCheck,
    Launch,
    Layout,
    Like,
    Numel,
    Param,
    Rank,
    RefuseEmpty,
    Require,
    ReturnIfEmpty,
    Scalar,
    Shape,
    ShapeOf,
    ShareStrides,
    Span,
)

__all__ = ["absent_zero", "lower", "shape_text"]


def lower(record: KernelRecord, spec_layout: list[tuple[str, int]] | tuple = ()) -> CallPlan:
    """The call plan of ``record``. ``spec_layout``: what its variants specialize on (``Variants``)."""
    targs = record.tensor_inputs
    tnames = [a.name for a in targs]
    narrow = record.index_dtype == "int32"
    mutated = tuple(k for k, a in enumerate(targs) if a.mutates)
    absent = frozenset(f"i{k}" for k in record.optional)
    labels = {f"i{k}": n for k, n in enumerate(tnames)} | {f"o{k}": o.name for k, o in enumerate(record.outputs)}
    alias = {} if record.outputs else {"o0": f"i{mutated[0]}"} if mutated else {}
    steps: list[Any] = [Given(k) for k in range(len(targs)) if k not in record.optional]
    for k, a in enumerate(targs):
        steps.append(Device(k))
        if a.dtype or a.dtypes:
            steps.append(Dtype(k, a.dtype or tuple(a.dtypes)))
        if a.ndim is not None or a.min_ndim:
            shaped = a.shape is not None and (a.ndim is not None or a.min_ndim == len(a.shape) - 1)
            steps.append(Rank(k, a.ndim, a.min_ndim, shape_text(a.shape) if shaped else ""))
        steps.append(Numel(k, narrow))
        steps.append(Layout(k, tuple(a.strided), a.contiguous))
        if a.align > (dtype_from_name(a.dtype).itemsize if a.dtype else 1):
            steps.append(Align(k, a.align, a.contiguous))
        if narrow and a.strided:
            steps.append(Span(k, tuple(a.strided)))
    steps += [Like(k, tnames.index(a.dtype_like)) for k, a in enumerate(targs) if a.dtype_like]
    early = Facts(frozenset(f"i{k}" for k in range(len(targs))) if narrow else frozenset())
    steps += _shapes(record, early)
    for p, a in enumerate(record.inputs):
        if isinstance(a, ScalarArg) and a.ctype in INT_LIMITS:
            lo, hi = INT_LIMITS[a.ctype]
            steps.append(Scalar(p, a.ctype, a.py_type, max(lo, -(2**63)), min(hi, I64_MAX)))
        elif isinstance(a, ScalarArg) and a.ctype in FLOAT_MAX and a.py_type == "float":
            steps.append(Scalar(p, a.ctype, a.py_type))
    steps += _requirements(record, early, labels, absent)
    steps += _allocations(record, early, labels, narrow, absent)
    numel_var = {f"i{k}": f"n{k}" for k in range(len(targs))}
    for k, o in enumerate(record.outputs):
        if "same_as" in o.shape:
            numel_var[f"o{k}"] = f"n{o.shape['same_as']}"

    def sub(expr: Any) -> Any:
        """Refs resolved (an in-place op's o0 is its written input) and numels read from their vars."""
        if not isinstance(expr, list):
            return expr
        if expr[0] in ("numel", "size", "stride", "lead", "prod"):
            ref = alias.get(expr[1], expr[1])
            if expr[0] == "numel" and ref in numel_var:
                return ["var", numel_var[ref]]  # an absent tensor's numel var holds 0
            return absent_zero([expr[0], ref, *expr[2:]], absent)
        if expr[0] == "present":
            return expr
        return [expr[0], *(sub(a) for a in expr[1:])]

    # An optional output the call left out writes nothing: its numel reads 0 (``["var", "s<p>"]`` is its flag).
    written = tuple(sub(["numel", f"o{k}"]) if o.when is None else ["where", ["var", f"s{o.when}"],
                    sub(["numel", f"o{k}"]), 0] for k, o in enumerate(record.outputs)) + \
        tuple(["var", f"n{k}"] for k in mutated)  # fmt: skip
    steps.append(ReturnIfEmpty(_dedupe(written)))
    # Every output declares an init: it holds that value before the launch, so an empty input is no data, not
    # a mistake. The kernel runs (a split-K row sum over K = 0 still adds its bias); only an empty grid, which
    # provably writes nothing, skips the launch (``Launch.empty_ok``).
    filled = bool(record.outputs) and all(o.init is not None for o in record.outputs)
    # Unreachable, so not emitted, when one input's numel decides everything written (relu, softmax).
    single = len(targs) == 1 and all(w == ["var", "n0"] for w in written)
    if record.outputs and not single:
        # An input whose numel is the one thing written was refused by the return above already.
        alone = [k for k in range(len(targs)) if _dedupe(written) == (["var", f"n{k}"],)]
        if not filled:  # filled: an empty input is read as no data, and the kernel still runs (a bias added)
            steps.append(RefuseEmpty(tuple(k for k in range(len(targs)) if k not in alone)))
    for e in record.extras:
        if e.same:
            steps.append(ShareStrides((alias.get(e.expr[1], e.expr[1]), *(alias.get(r, r) for r in e.same)),
                                      e.expr[2]))  # fmt: skip
    # From here every tensor is non-empty when the op has outputs (an in-place op may read an empty input: a
    # sum over no rows); a 32-bit kernel's tensors hold at most 2^31 - 1 elements.
    narrow_refs = set()
    if narrow:
        narrow_refs = {f"i{k}" for k in range(len(targs))}
        narrow_refs |= {f"o{k}" for k, o in enumerate(record.outputs) if "meta" not in o.shape}
    var_bounds = tuple((f"n{k}", (1, INT32_MAX if narrow else I64_MAX)) for k in range(len(targs)))
    maybe_empty = {f"o{k}" for k, o in enumerate(record.outputs) if "meta" in o.shape or _may_be_empty(o, targs)}
    if not record.outputs:  # an in-place op: its one written input is non-empty here, the others may be empty
        maybe_empty |= {f"i{k}" for k in range(len(targs)) if k not in mutated or len(mutated) > 1}
    maybe_empty |= absent  # an absent optional tensor reads as empty
    if filled:  # no RefuseEmpty above: any input may be empty from here
        maybe_empty |= {f"i{k}" for k in range(len(targs))}
    var_bounds = tuple((f"n{k}", (0 if f"i{k}" in maybe_empty else 1, hi)) for k, (_, (_, hi)) in enumerate(var_bounds))
    var_bounds += tuple((f"s{p}", _scalar_bounds(record.inputs[p])) for p in record.int_scalars)
    facts = Facts(frozenset(narrow_refs), nonempty=True, vars=var_bounds,
                  numel_vars=tuple((f"n{k}", f"i{k}") for k in range(len(targs))),
                  maybe_empty=frozenset(maybe_empty))  # fmt: skip
    steps += _extras(record, sub, facts, labels)
    plans = record.launches or (record.launch,)
    if narrow:
        steps += _extents(plans, sub, facts, labels)
    launch = _launch(record, spec_layout, sub, facts, labels, filled)
    return CallPlan(record.op_name, tuple(a.name for a in record.inputs),
                    tuple(p for p, a in enumerate(record.inputs) if isinstance(a, TensorArg)),
                    tuple(o.name for o in record.outputs), tuple(steps), launch, labels, mutated, facts, early,
                    record.optional)  # fmt: skip


def _scalar_bounds(a: ScalarArg) -> tuple[int, int]:
    """The values an int or bool scalar input can take (what its C type holds, within a schema int's int64)."""
    if a.py_type == "bool":
        return 0, 1
    lo, hi = INT_LIMITS.get(a.ctype, (-(2**63), I64_MAX))
    return max(lo, -(2**63)), min(hi, I64_MAX)


def absent_zero(expr: Any, absent: frozenset[str]) -> Any:
    """``expr`` with each size, stride or product of an optional tensor (``absent``: their refs) read as 0 when
    the call passed None: ``["where", ["present", ref], e, 0]`` (every printer evaluates the branch it takes)."""
    if not isinstance(expr, list):
        return expr
    if expr[0] in ("numel", "size", "stride", "lead", "prod"):
        return ["where", ["present", expr[1]], expr, 0] if expr[1] in absent else expr
    if expr[0] in ("present", "var", "sm_count"):
        return expr
    return [expr[0], *(absent_zero(a, absent) for a in expr[1:])]


def _key(e: Any) -> str:
    return repr(e)


def _dedupe(exprs: tuple) -> tuple:
    seen: dict[str, Any] = {}
    for e in exprs:
        seen.setdefault(_key(e), e)
    return tuple(seen.values())


def shape_text(entries: tuple | None) -> str:
    """A declared shape as the declaration writes it: ``(*B, C)``, ``(N,)``, ``(8, None)``."""
    items = ["None" if e is None else str(e) for e in entries or ()]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _shapes(record: KernelRecord, early: Facts) -> list[Any]:
    """Per tensor input with a declared shape, the checks of its named axes against their bindings (the
    binding itself is not checked: it defines the name); ``ShapeOf`` for ``SameAs`` of an undeclared input."""
    dims = {n: (k, a) for n, k, a in record.dims}
    groups = {n: (k, s, a) for n, k, s, a in record.groups}
    tn = [a.name for a in record.tensor_inputs]
    out: list[Any] = []
    for k, a in enumerate(record.tensor_inputs):
        if a.shape_like is not None:
            out.append(ShapeOf(k, a.shape_like))
        if a.shape is None:
            continue
        n = len(a.shape)
        exprs = {p: (tree, told) for p, tree, told in a.exprs}
        g = next((p for p, e in enumerate(a.shape) if isinstance(e, str) and e.startswith("*")), None)
        ties: list[tuple] = []
        names: dict[str, tuple] = {}
        for p, e in enumerate(a.shape):
            axis = p if g is None or p < g else p - n
            if e is None:
                continue
            if isinstance(e, int):
                ties.append((axis, e))
            elif e.startswith("*"):
                j, s, after = groups[e[1:]]
                if (j, s, after) != (k, p, n - 1 - p):
                    want = ("group", j, s, after)
                    ties.append((("group", p, n - 1 - p), want))
                    names.setdefault(e[1:], (e[1:], want, tn[j]))
            elif e not in dims:  # a size expression ("2 * N")
                tree, told = exprs[p]
                ties.append((axis, ("expr", tree, (tn[k], e), is_wide(tree, early))))
                for name, t, j in told:
                    names.setdefault(name, (name, ("expr", t, (tn[k], name), False), tn[j]))  # one size: int64
            else:
                j, aj = dims[e]
                if (j, aj) != (k, axis):
                    want = ("size", j, aj)
                    ties.append((axis, want))
                    names.setdefault(e, (e, want, tn[j]))
        if ties:
            out.append(Shape(k, tuple(ties), shape_text(a.shape), tuple(names.values())))
    return out


def _requirements(record: KernelRecord, facts: Facts, labels: dict[str, str],
                  absent: frozenset[str] = frozenset()) -> list[Require]:  # fmt: skip
    """The declared preconditions, then the sizes of declared output shapes that could be negative or pass
    int64 (``"N - 2"``, a product of three sizes)."""
    out = []
    for r in record.requires:
        e = absent_zero(r["expr"], absent)
        arg = _where(e, labels, r["label"])[0]
        out.append(Require(r["kind"], e, tuple(r["value"]) if isinstance(r["value"], list) else r["value"],
                           r["label"], arg, r["why"], (arg, r["label"]), is_wide(e, facts)))  # fmt: skip
    for o in record.outputs:
        for i, (e, label) in enumerate(zip(o.shape.get("shape", ()), o.shape.get("labels", ()), strict=True)):
            if not isinstance(e, list) or e[0] == "group":
                continue
            e = absent_zero(e, absent)  # an absent optional input's sizes read 0
            if o.when is not None:  # an optional output left out has no size to check
                e = ["where", ["var", f"s{o.when}"], e, 0]
            lo, hi = bounds(e, facts)
            arg = _where(e, labels, label)[0]
            why = f"the size of output '{o.name}' along axis {i}"
            if lo < 0:
                out.append(Require("at_least", e, 0, label, arg, why, (arg, label), is_wide(e, facts)))
            if hi > I64_MAX:
                out.append(Require("at_most", e, I64_MAX, label, arg, why, (arg, label), is_wide(e, facts)))
    return out


def _may_be_empty(o: Any, targs: tuple) -> bool:
    """Whether a declared output shape can have no elements although every input has some."""
    if "shape" not in o.shape:
        return False
    facts = Facts(nonempty=True)
    return any((isinstance(e, int) and e == 0) or (isinstance(e, list) and e[0] != "group" and bounds(e, facts)[0] < 1)
               for e in o.shape["shape"])  # fmt: skip


def _allocations(record: KernelRecord, facts: Facts, labels: dict[str, str], narrow: bool,
                 absent: frozenset[str] = frozenset()) -> list[Alloc]:  # fmt: skip
    groups = {n: (k, s, a) for n, k, s, a in record.groups}
    out = [_allocation(record, k, o, facts, labels, narrow, absent, groups) for k, o in enumerate(record.outputs)]
    return [dataclasses.replace(a, when=o.when) if o.when is not None else a
            for a, o in zip(out, record.outputs, strict=True)]  # fmt: skip


def _allocation(record: KernelRecord, k: int, o: Any, facts: Facts, labels: dict[str, str], narrow: bool,
                absent: frozenset[str], groups: dict) -> Alloc:  # fmt: skip
    if "meta" in o.shape:
        return Alloc(k, "meta", 0, o.dtype, o.dtype_from)
    check = o.init is not None and _init_per_call(record, k, o)
    if "same_as" in o.shape:
        return Alloc(k, "same", o.shape["same_as"], o.dtype, o.dtype_from, init=o.init, check_init=check)
    if "reduce" in o.shape:
        return Alloc(k, "reduce", o.shape["reduce"], o.dtype, o.dtype_from, tuple(o.shape["dims"]),
                     bool(o.shape["keepdim"]), init=o.init, check_init=check)  # fmt: skip
    entries: list[Any] = []
    total = 1
    for e, label in zip(o.shape["shape"], o.shape["labels"], strict=True):
        if isinstance(e, list) and e[0] == "group":
            j, s, after = groups[e[1]]
            entries.append(("group", j, s, after))
            total *= facts.numel(f"i{j}")[1]
        elif isinstance(e, list):
            e = absent_zero(e, absent)
            arg = _where(e, labels, label)[0]
            entries.append(("expr", e, (arg, label), is_wide(e, facts)))
            total *= min(bounds(e, facts)[1], I64_MAX)
        else:
            entries.append(("int", e))
            total *= e
    src = next((e[1] for e in entries if e[0] == "group"), o.dtype_from)
    item = dtype_from_name(o.dtype).itemsize if o.dtype else 16  # type: ignore[union-attr]
    return Alloc(k, "shape", src, o.dtype, o.dtype_from, entries=tuple(entries), narrow=narrow and total > INT32_MAX,
                 init=o.init, check_init=check, wide_bytes=total * item > I64_MAX)  # fmt: skip


def _init_per_call(record: KernelRecord, k: int, o: Any) -> bool:
    """Whether output ``k``'s init is checked against its dtype per call: the dtype is open (it follows an
    input of any dtype) and the init is not 0 or 1, which every dtype holds. A known dtype (fixed, or an input's
    declared dtype or set) that cannot hold it is a declaration mistake."""
    src = record.tensor_inputs[o.dtype_from]
    if src.dtype_like is not None:  # typed alike with another input: that one's dtype or set
        src = next(t for t in record.tensor_inputs if t.name == src.dtype_like)
    dtypes = [o.dtype] if o.dtype else [src.dtype] if src.dtype else list(src.dtypes or ())
    if not dtypes:
        return o.init not in (0, 1)
    bad = [d for d in dtypes if not init_fits(o.init, d)]
    if bad:
        raise SpecError(record.op_name, f"outputs[{k}].init", f"init={o.init!r} does not fit output '{o.name}' of "
                        f"dtype {', '.join('torch.' + d for d in bad)} (it would be truncated, wrapped or overflow).",
                        "declare a value the dtype holds (-inf needs a float dtype; an integer max starts from the "
                        "dtype's least value), or a float output dtype with OutputDecl(dtype=...).")  # fmt: skip
    return False


def _where(expr: Any, labels: dict[str, str], words: str) -> tuple[str, str]:
    ref = first_tensor(expr)
    return (labels.get(ref, ref) if ref else next(iter(labels.values()), "launch")), words


def _constant(op: str, k: int, e: Any) -> None:
    """A ``Const`` must fit the kernel parameter it fills (struct would refuse it, C++ would wrap it)."""
    v = e.expr
    if isinstance(v, int) and e.ctype in INT_LIMITS and not INT_LIMITS[e.ctype][0] <= v <= INT_LIMITS[e.ctype][1]:
        lo, hi = INT_LIMITS[e.ctype]
        raise SpecError(op, f"extras[{k}].value", f"{v} does not fit the kernel's {e.ctype} parameter ({lo} to {hi}).",
                        "pass a value in that range, or take the parameter as a wider type.")  # fmt: skip
    if isinstance(v, float) and e.ctype == "f32" and abs(v) > FLOAT_MAX["f32"] and v == v and abs(v) != float("inf"):
        raise SpecError(op, f"extras[{k}].value", f"{v!r} is beyond a float's range (the parameter is float).",
                        "take the parameter as double, or pass a smaller value.")  # fmt: skip


def _extras(record: KernelRecord, sub: Any, facts: Facts, labels: dict[str, str]) -> list[Extra]:
    out = []
    for k, e in enumerate(record.extras):
        if not isinstance(e.expr, list):
            _constant(record.op_name, k, e)
        expr = sub(e.expr) if isinstance(e.expr, list) else e.expr
        check = None
        hint = ""
        if not e.static and e.ctype in INT_LIMITS and isinstance(expr, list):
            lo, hi = INT_LIMITS[e.ctype]
            blo, bhi = bounds(expr, facts)
            if blo < lo or bhi > hi:
                check = (lo, hi)
            if e.ctype in ("i32", "u32"):
                hint = "Fix: declare the extra with dtype='int64' and take it as long long / int64_t in the kernel."
        wide = isinstance(expr, list) and is_wide(expr, facts)
        where = _where(expr, labels, e.label)
        out.append(Extra(k, expr, e.ctype, e.label, check, hint, e.static, wide, where))
    return out


def _extents(plans: tuple, sub: Any, facts: Facts, labels: dict[str, str]) -> list[Extent]:
    """A 32-bit kernel's launch extents, the tightest limit over the configs (tuning launches every one)."""
    seen: dict[str, tuple[Any, int]] = {}
    for plan in plans:
        for expr, limit in plan.limits if plan is not None else ():
            e = sub(expr)
            key = _key(e)
            seen[key] = (e, min(limit, seen.get(key, (e, limit))[1]))
    out = []
    for e, limit in seen.values():
        if bounds(e, facts)[1] <= limit:
            continue  # proved: e.g. a numel of at most 2^31 - 1 in blocks that divide 2^31
        label = describe(e, _var_labels(labels, e))
        arg = _where(e, labels, label)[0]
        out.append(Extent(e, limit, label, arg, is_wide(e, facts)))
    return out


def _var_labels(labels: dict[str, str], expr: Any) -> dict[str, str]:
    """Labels for ``describe``: a numel var reads as ``numel(<tensor>)``."""
    out = dict(labels)
    for ref, name in labels.items():
        if ref.startswith("i"):
            out[f"n{ref[1:]}"] = f"numel({name})"
    return out


def _grid_checks(op: str, plans: tuple, sub: Any, facts: Facts, labels: dict[str, str]) -> tuple:
    """Per config, the checks its grid needs (none where ``bounds`` proves every axis in range)."""
    per_config = []
    for c, plan in enumerate(plans):
        out: list[GridCheck] = []
        per_config.append(tuple(out))
        if plan is None:
            continue
        for axis, g in enumerate(plan.grid):
            e = sub(g)
            if isinstance(e, int):
                if not 1 <= e <= GRID_MAX[axis]:
                    raise SpecError(op, "geometry.grid", f"config {c}'s grid along {_AXES[axis]} is {e}.",
                                    f"launch between 1 and {GRID_MAX[axis]} blocks along {_AXES[axis]}.")  # fmt: skip
                continue
            lo, hi = bounds(e, facts)
            low, high = lo < 1, hi > GRID_MAX[axis]
            if low or high or unsafe_divisors(e, facts):
                label = describe(e, _var_labels(labels, e))
                out.append(GridCheck(c, axis, e, label, _where(e, labels, label)[0], low, high, is_wide(e, facts)))
        if not isinstance(plan.shared_mem, int):  # a size expression: checked per call like an axis
            e = sub(plan.shared_mem)
            lo, hi = bounds(e, facts)
            label = describe(e, _var_labels(labels, e))
            if hi < 0 or lo > SMEM_MAX:
                raise SpecError(op, "geometry.shared_mem", f"config {c}'s shared memory {label} is always outside "
                                f"0 to {SMEM_MAX} bytes.", f"give 0 to {SMEM_MAX} bytes.")  # fmt: skip
            out.append(GridCheck(c, SMEM_AXIS, e, label, _where(e, labels, label)[0], lo < 0, hi > SMEM_MAX,
                                 is_wide(e, facts)))  # fmt: skip
        per_config[-1] = tuple(out)
    return tuple(per_config)


def _launch(record: KernelRecord, spec_layout: Any, sub: Any, facts: Facts, labels: dict[str, str],
            empty_ok: bool = False) -> Launch:  # fmt: skip
    plans = record.launches or (record.launch,)
    checks = _grid_checks(record.op_name, plans, sub, facts, labels)
    grids = tuple(tuple(sub(g) for g in p.grid) if p is not None else None for p in plans)
    blocks = tuple(tuple(p.block) if p is not None else (0, 0, 0) for p in plans)
    smem = tuple(sub(p.shared_mem) if p is not None and not isinstance(p.shared_mem, int) else
                 p.shared_mem if p is not None else 0 for p in plans)  # fmt: skip
    params = []
    for p in record.params:
        if p.role == "input":
            a = record.inputs[p.index]
            if isinstance(a, TensorArg):
                params.append(Param(("in", record.tensor_inputs.index(a)), "ptr"))
            else:
                params.append(Param(("scalar", p.index), p.ctype))
        elif p.role == "extra":
            params.append(Param(("extra", p.index), p.ctype))
        else:
            params.append(Param(("out", p.index), "ptr"))
    key = tuple(_key_entry(e, sub, record) for e in record.tune_key) if record.tuned else ()
    heuristics = tuple(tuple(sub(e) for e in h["exprs"]) for h in record.heuristics)
    return Launch(grids, checks, blocks, smem, record.tuned, key, record.tune_default, tuple(spec_layout),
                  tuple(params), heuristics, empty_ok)  # fmt: skip


def _key_entry(entry: list, sub: Any, record: KernelRecord) -> tuple[Any, bool]:
    """(the value's expression, whether it is rounded up to a power of two)."""
    if entry[0] == "extra":
        return sub(record.extras[entry[1]].expr), False
    if entry[0] == "numel":
        return sub(["numel", entry[1]]), entry[2] == "pow2"
    return sub(["size", entry[1], entry[2]]), entry[3] == "pow2"
