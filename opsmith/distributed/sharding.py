"""DTensor sharding rules derived from an op's declaration.

What a declaration proves about data flow. Every axis of every tensor has an *identity*: a named dimension
(``"M"``), one axis of a group (``"*B"``), the axes of the tensor the geometry iterates over when its shape is
undeclared, or an identity of its own (an int, None, a size expression, an undeclared input): an axis tied to
nothing. An ``Elementwise`` op computes each output element from the inputs at that element's position along
every identity they share with it; a ``Reduction`` op computes each row on its own and combines elements only
along its ``reduce_dims``. So the op may run on shards of identity X when

* every tensor that has X has it once, and is sharded along it; a tensor without X is replicated whole (a
  norm's weight; the table of a gather, whose axes are tied to nothing: every shard reads it anywhere);
* every output has X, or lost it in a ``ReduceDims`` that declares how partial results combine
  (``combine="sum"``, ``"max"``, ``"min"``): then it is a ``Partial``. A max or min whose op declares a backward
  is not split along the reduced axis: each shard's backward would send the gradient to its own maximum;
* X is not an axis a ``Reduction`` combines along, unless every output lost it that way.

Every rule also lists the all-``Replicate`` strategy. DTensor picks the listed strategy with the least
redistribution, and redistributes mismatched inputs to it, so inputs are never computed on the wrong shards.

What a declaration cannot prove: an input with an axis tied to nothing (a gather's table) beside an extra that
takes a size from a sharded axis (``Numel(idx)``). The kernel may use that size for more than the sharded
loop: a gather that bounds its table read by ``numel(idx)`` reads the wrong rows on a shard. Such axes are
not sharded unless the op says ``sharding="derive"``; the first DTensor call says so once (``ShardingWarning``),
pointing to ``opsmith check``'s sharding row, which runs the kernel on simulated shards to settle it.

Not derivable, so refused on DTensor input unless ``sharding=`` is given: ``Grid`` and ``Custom`` geometries
(the launch says nothing about which element reads what), ``eager_fn`` overrides, outputs allocated by a
``meta_fn``. Refused always: ops that write an input in place (DTensor would redistribute it into a copy and
the writes would be lost).
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..declare.record import KernelRecord, TensorArg
from ..declare.spec import Custom, Elementwise, Grid, Reduction
from ..errors import ShardingError, SpecError

__all__ = [
    "ShardingPlan",
    "attach",
    "derive_plan",
    "derived",
    "identities",
    "rule_for",
    "rule_of",
    "strategies",
    "unjustified",
]

_DTENSOR_MODULE = "torch.distributed.tensor"


@dataclass(frozen=True)
class ShardingPlan:
    """How an op's tensors shard, read from its declaration once at registration.

    refusal: why no rule can be derived ("" when one is). ``inputs``: per tensor input, the pattern of its
    axes' identities: entries ``("dim", name)``, ``("group", name)`` (any number of axes), ``("own",)`` (tied
    to nothing), or the whole pattern ``("ref",)`` (the geometry's reference tensor, shape undeclared: its axes
    are the op's) or ``("free",)`` (undeclared: tied to nothing). ``outputs``: ``("same", k)``, ``("reduce", k,
    dims, keepdim, combine)`` over tensor input k, or ``("shape", pattern)``. ``mixing``: the reference's axes a
    ``Reduction`` combines along. ``no_split``: combines that may not be split (max/min with a backward).
    ``bound``: dimensions bound on an axis of an input whose shape is undeclared (``DimSize("x", -1)`` in
    another input's shape): that axis has the dimension's identity. ``pinned``: the axes a precondition reads
    (``Divisible("C", 8)``: a shard of C need not be divisible by 8; ``AtMost`` holds for any shard), never
    sharded.
    """

    op_name: str
    n_args: int
    n_out: int
    tensor_pos: tuple[int, ...]
    refusal: str = ""
    user: Callable[..., Any] | str | None = None
    ref: int = 0
    inputs: tuple[tuple, ...] = ()
    mixing: tuple[int, ...] = ()
    outputs: tuple[tuple, ...] = ()
    no_split: tuple[str, ...] = ()
    bound: tuple[tuple[str, int, int], ...] = ()  # names bound on an undeclared tensor: (name, k, axis)
    pinned: tuple[tuple[int, int | None], ...] = ()  # axes a precondition reads: (k, axis), (k, None) = all
    mutates: bool = False  # writes an input in place: refused on DTensors whatever the rule
    #: Inputs with an axis tied to nothing, and the axes extras take sizes from (``(k, axis)``, ``(k, None)``:
    #: all): together, axes the declaration cannot justify sharding (module docstring) unless ``derive``.
    untied: tuple[str, ...] = ()
    sized: tuple[tuple[int, int | None], ...] = ()
    sized_by: tuple[str, ...] = ()  # the extras' labels, for the message
    derive: bool = False  # sharding="derive": the user vouches for the derived rule (opsmith check tests it)
    optional_pos: tuple[int, ...] = ()  # argument positions of optional tensor inputs (None: placement None)
    #: Optional outputs and their flags' argument positions, (k, p): left out by the call, no placement.
    requests: tuple[tuple[int, int], ...] = ()


def derive_plan(record: KernelRecord, geometry: object, *, eager_fn: Callable | None = None,
                sharding: Callable[..., Any] | str | None = None, has_backward: bool = False) -> ShardingPlan:  # fmt: skip
    """The op's ``ShardingPlan``; ``sharding`` is the user's rule (a function, or "replicate")."""
    op = record.op_name
    tensor_pos = tuple(k for k, a in enumerate(record.inputs) if isinstance(a, TensorArg))
    optional_pos = tuple(k for k, a in enumerate(record.inputs) if isinstance(a, TensorArg) and a.optional)
    requests = tuple((k, o.when) for k, o in enumerate(record.outputs) if o.when is not None)
    base = {"op_name": op, "n_args": len(record.inputs), "n_out": len(record.outputs), "tensor_pos": tensor_pos,
            "optional_pos": optional_pos, "requests": requests}  # fmt: skip
    written = [a.name for a in record.tensor_inputs if a.mutates]
    if written:
        if sharding is not None:
            raise SpecError(op, "sharding", f"the op writes {written} in place: DTensor would redistribute them into "
                            "copies, and the writes would be lost.",
                            "drop sharding=; call the op on local tensors (t.to_local()) where it meets DTensors.")  # fmt: skip
        return ShardingPlan(**base, mutates=True, refusal=f"it writes {written} in place, and DTensor would "
                            "redistribute them into copies that take the writes")  # fmt: skip
    if sharding is not None and sharding != "derive":
        if not (callable(sharding) or sharding == "replicate"):
            raise SpecError(op, "sharding", f"{sharding!r} is neither a rule, 'replicate' nor 'derive'.",
                            "pass a function taking the op's arguments (DTensorSpec for tensors) and returning "
                            "[(output placements, input placements), ...], 'replicate', or 'derive' (the rule "
                            "derived from the declaration, every axis of it).")  # fmt: skip
        return ShardingPlan(**base, user=sharding)
    why = _underivable(record, geometry, eager_fn)
    if why:
        if sharding == "derive":
            raise SpecError(op, "sharding", f"'derive' asks for the rule derived from the declaration, but none can "
                            f"be derived: {why}.", "pass a rule function, or 'replicate'.")  # fmt: skip
        return ShardingPlan(**base, refusal=why)
    if isinstance(geometry, Reduction):
        ref, mixing = 0, tuple(geometry.reduce_dims)
    else:  # Elementwise: the first output's shape source, if it has one
        first = record.outputs[0].shape if record.outputs else {}
        ref, mixing = first.get("same_as", first.get("reduce", 0)), ()
    inputs = [_pattern(a, k == ref) for k, a in enumerate(record.tensor_inputs)]
    for k, a in enumerate(record.tensor_inputs):  # SameAs of an undeclared input: its pattern
        if a.shape_like is not None:
            inputs[k] = inputs[a.shape_like] if inputs[a.shape_like] != ("free",) else ("like", a.shape_like)
    user_dims = {n for n, _, _ in record.dims if not n.startswith("size(")}
    outputs = []
    for o in record.outputs:
        if "same_as" in o.shape:
            outputs.append(("same", o.shape["same_as"]))
        elif "reduce" in o.shape:
            outputs.append(("reduce", o.shape["reduce"], tuple(o.shape["dims"]), o.shape["keepdim"],
                            o.shape.get("combine")))  # fmt: skip
        else:
            outputs.append(("shape", tuple(_out_entry(e, label, user_dims)
                                           for e, label in zip(o.shape["shape"], o.shape["labels"], strict=True))))  # fmt: skip
    no_split = ("max", "min") if has_backward else ()
    bound = tuple((n, k, a) for n, k, a in record.dims if record.tensor_inputs[k].shape is None)
    pinned = tuple(dict.fromkeys(p for r in record.requires if r["kind"] != "at_most" for p in _axes_read(r["expr"])))
    untied = _untied(record, inputs, outputs, ref, bound)
    reading = [e for e in record.extras if _axes_read(e.expr)]
    sized = tuple(dict.fromkeys(p for e in reading for p in _axes_read(e.expr)))
    return ShardingPlan(**base, ref=ref, inputs=tuple(inputs), mixing=mixing, outputs=tuple(outputs),
                        no_split=no_split, bound=bound, pinned=pinned, untied=untied, sized=sized,
                        sized_by=tuple(e.label for e in reading), derive=sharding == "derive")  # fmt: skip


def _untied(record: KernelRecord, inputs: list, outputs: list, ref: int, bound: tuple) -> tuple[str, ...]:
    """The inputs the kernel may read anywhere: besides the geometry's reference (what the launch iterates over),
    an input undeclared, or with an axis of its own (an int, None, an expression) or a dimension or group that
    neither the reference nor an output names (a table's "V")."""

    def ids(pat: tuple) -> set:
        return (
            {e for e in pat if e[0] in ("dim", "group")} if pat[:1] not in (("ref",), ("free",), ("like",)) else set()
        )

    tied = ids(inputs[ref]) | {("dim", n) for n, _, _ in bound}
    for o in outputs:
        tied |= {e for e in o[1] if e[0] in ("dim", "group")} if o[0] == "shape" else ids(inputs[o[1]])
    out = []
    for k, (a, pat) in enumerate(zip(record.tensor_inputs, inputs, strict=True)):
        pat = inputs[pat[1]] if pat[:1] == ("like",) else pat
        if k != ref and (
            pat == ("free",) or (pat[:1] != ("ref",) and any(e == ("own",) or e not in tied for e in pat))
        ):
            out.append(a.name)
    return tuple(out)


def _axes_read(e: Any) -> list[tuple[int, int | None]]:
    """The input axes a size expression reads: ``size(x, a)`` one axis, ``numel``/``stride`` every axis."""
    if not isinstance(e, list):
        return []
    here = []
    if e[0] in ("size", "numel", "stride") and isinstance(e[1], str) and e[1].startswith("i"):
        here = [(int(e[1][1:]), e[2] if e[0] == "size" else None)]
    return here + [p for a in e[1:] for p in _axes_read(a)]


def _underivable(record: KernelRecord, geometry: object, eager_fn: Callable | None) -> str:
    if eager_fn is not None:
        return "its launch is a Python eager_fn"
    if any("meta" in o.shape for o in record.outputs) or (not record.outputs and record.launch is None):
        return "its outputs come from a meta_fn"
    if isinstance(geometry, Custom):
        return "its geometry is Custom"
    if isinstance(geometry, Grid):
        return "its geometry is a Grid, which does not say which elements each program reads"
    if record.flavor == "cute":
        return "its CuTe DSL host function launches its own kernels, which no declaration describes"
    if not isinstance(geometry, Elementwise | Reduction):
        return "it declares no geometry"
    return ""


def _pattern(a: TensorArg, is_ref: bool) -> tuple:
    """The identities of an input's axes, from its declared shape (see ``ShardingPlan``)."""
    if a.shape is None:
        return ("ref",) if is_ref else ("free",)
    out: list[tuple] = []
    computed = {p for p, *_ in a.exprs}  # "2 * N": a shard of the axis is no shard of N; never split
    for p, e in enumerate(a.shape):
        if isinstance(e, str) and e.startswith("*"):
            out.append(("group", e[1:]))
        elif isinstance(e, str) and p not in computed:
            out.append(("dim", e))
        else:
            out.append(("own",))
    return tuple(out)


def _out_entry(e: Any, label: str, user_dims: set[str]) -> tuple:
    if isinstance(e, list) and e[0] == "group":
        return ("group", e[1])
    return ("dim", label) if label in user_dims else ("own",)


# -- the rule, evaluated by DTensor on each new combination of input specs --------------------------------


def identities(plan: ShardingPlan, shapes: list[tuple]) -> tuple[list[list], list[list], list[list]]:
    """At a call with tensor inputs of ``shapes``: (per input, its axes' identities; per output, its axes'
    identities; per output, the identities it reduced away). Groups expand to the length the call gives them."""
    group_len: dict[str, int] = {}
    for pat, shape in zip(plan.inputs, shapes, strict=True):
        if shape is None:  # an optional input passed as None: no axes
            continue
        for e in pat:
            if e[0] == "group":
                group_len.setdefault(e[1], len(shape) - (len(pat) - 1))

    def named(k: int, ids: list) -> list:  # an undeclared tensor's axes that bind a dimension have its identity
        nd = len(shapes[k])
        for n, j, a in plan.bound:
            if j == k and -nd <= a < nd:
                ids[a % nd] = ("dim", n)
        return ids

    def expand(pat: tuple, k: int, where: str) -> list:
        if pat == ("ref",):
            return named(k, [("ref", a) for a in range(len(shapes[k]))])
        if pat == ("free",):
            return named(k, [(where, "own", a) for a in range(len(shapes[k]))])
        if pat[0] == "like":
            return expand(plan.inputs[pat[1]], pat[1], where) if plan.inputs[pat[1]] != ("free",) else \
                [("like", pat[1], a) for a in range(len(shapes[k]))]  # fmt: skip
        out: list = []
        for p, e in enumerate(pat):
            if e[0] == "group":
                out += [("group", e[1], j) for j in range(group_len.get(e[1], 0))]
            elif e[0] == "dim":
                out.append(("dim", e[1]))
            else:
                out.append((where, "own", p))
        return out

    ins = [[] if shapes[k] is None else expand(pat, k, f"i{k}") for k, pat in enumerate(plan.inputs)]
    outs, lost = [], []
    for k, o in enumerate(plan.outputs):
        if o[0] == "same":
            outs.append(list(ins[o[1]]))
            lost.append([])
        elif o[0] == "reduce":
            src = ins[o[1]]
            nd = len(src)
            gone = {d % nd for d in o[2]} if nd else set()
            outs.append([(f"o{k}", "own", a) if a in gone else x for a, x in enumerate(src)
                         if a not in gone or o[3]])  # fmt: skip
            lost.append([x for a, x in enumerate(src) if a in gone])
        else:
            outs.append(expand(o[1], 0, f"o{k}"))
            lost.append([])
    return ins, outs, lost


def strategies(plan: ShardingPlan, *args: Any) -> list[tuple[list, list]]:
    """The acceptable placements on one mesh dimension: ``[(output placements, input placements), ...]``
    with None for non-tensor arguments (``register_sharding``'s format); sharded strategies first. Those the
    declaration cannot justify are left out (said once: ``_warn_held``) unless the op says ``sharding="derive"``."""
    from torch.distributed.tensor import Replicate

    replicate = (
        [Replicate()] * plan.n_out,
        [Replicate() if k in plan.tensor_pos and args[k] is not None else None for k in range(plan.n_args)],
    )
    if plan.user == "replicate":
        return _requested(plan, args, [replicate])
    got = derived(plan, *args)
    if not all(applied for _, applied in got):
        _warn_held(plan)
    return _requested(plan, args, [s for s, applied in got if applied] + [replicate])


def _requested(plan: ShardingPlan, args: tuple, found: list[tuple[list, list]]) -> list[tuple[list, list]]:
    """An optional output the call left out (its flag false, or left at its default: DTensor passes the call's
    arguments without trailing defaults) is None: no placement."""
    gone = {k for k, p in plan.requests if not (p < len(args) and args[p])}
    if not gone:
        return found
    return [([None if k in gone else x for k, x in enumerate(outs)], ins) for outs, ins in found]


def derived(plan: ShardingPlan, *args: Any) -> list[tuple[tuple[list, list], bool]]:
    """Every sharded strategy the declaration derives for these arguments (tensors, or anything with a
    ``shape``), each with whether the rule applies it: False for an axis the declaration cannot justify
    (``unjustified``), held back unless ``sharding="derive"``. ``opsmith check`` runs them all."""
    shapes = [None if args[k] is None else tuple(args[k].shape) for k in plan.tensor_pos]  # None: not given
    ins, outs, lost = identities(plan, shapes)
    ref = ins[plan.ref] if ins else []
    mixing = {ref[a % len(ref)] for a in plan.mixing} if ref else set()
    pinned = {x for k, a in plan.pinned for j, x in enumerate(ins[k]) if a is None or a % len(ins[k]) == j}
    held = set() if plan.derive else unjustified(plan, ins)
    candidates: list = []
    for ids in (*outs, *lost):
        for x in ids:
            if x not in candidates and x[1] != "own" and x not in pinned and any(x in i for i in ins):
                candidates.append(x)
    return [
        (s, x not in held) for x in candidates if (s := _sharded(plan, ins, outs, lost, x, x in mixing)) is not None
    ]


def unjustified(plan: ShardingPlan, ins: list) -> set:
    """The identities the declaration cannot justify sharding: those an extra takes a size from, where an input
    has an axis tied to nothing (module docstring)."""
    if not plan.untied:
        return set()
    return {x for k, a in plan.sized for j, x in enumerate(ins[k]) if a is None or a % max(len(ins[k]), 1) == j}


_WARNED: set[str] = set()


def _warn_held(plan: ShardingPlan) -> None:
    """Once per op: why an axis the derived rule could shard runs replicated, and how to settle it."""
    if plan.op_name in _WARNED:
        return
    _WARNED.add(plan.op_name)
    import warnings

    from ..errors import ShardingWarning

    warnings.warn(f"{plan.op_name}: runs replicated where its derived rule would shard: input(s) "
                  f"{list(plan.untied)} have axes tied to no other input, and extra(s) {list(plan.sized_by)} take a "
                  "size from a sharded axis, so the declaration cannot show the kernel reads them right on a shard "
                  "(a gather bounded by numel(idx) reads the wrong rows). Fix: run opsmith check on the op (its "
                  "sharding row runs the kernel on simulated shards of every placement) and, where it passes, "
                  "register with sharding='derive'; or tie the inputs' axes with named dimensions, or pass a rule.",
                  ShardingWarning, stacklevel=3)  # fmt: skip


def _sharded(plan: ShardingPlan, ins: list, outs: list, lost: list, x: tuple, mixing: bool) -> tuple | None:
    """The strategy that shards identity ``x``, or None when the declaration does not allow it."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    tensor_pl = []
    for ids in ins:
        hits = [j for j, y in enumerate(ids) if y == x]
        if len(hits) > 1:  # an input with the axis twice (a square of it): no consistent split
            return None
        tensor_pl.append(Shard(hits[0]) if hits else Replicate())
    out_pl = []
    for k, ids in enumerate(outs):
        hits = [j for j, y in enumerate(ids) if y == x]
        if len(hits) == 1 and not mixing:
            out_pl.append(Shard(hits[0]))
            continue
        o = plan.outputs[k]
        combine = o[4] if o[0] == "reduce" else None
        if hits or x not in lost[k] or combine is None or combine in plan.no_split:
            return None  # a split row with a same-shape output, an output that says nothing of x, no combine
        out_pl.append(Partial(combine))
    inputs: list = [None] * plan.n_args
    for pos, p, ids in zip(plan.tensor_pos, tensor_pl, ins, strict=True):
        inputs[pos] = p if ids or pos not in plan.optional_pos else None  # an optional input not given: None
    return out_pl, inputs


def _refuse(plan: ShardingPlan) -> Callable[..., Any]:
    def rule(*args: Any) -> Any:
        if plan.mutates:
            fix = "call it on the local tensors (t.to_local()) and wrap the result (DTensor.from_local)."
        else:
            fix = ("pass sharding= to its registration: a function returning the placements it accepts "
                   "(torch.distributed.tensor.experimental.register_sharding's format), or sharding='replicate' "
                   "to run it on whole tensors.")  # fmt: skip
        raise ShardingError(plan.op_name, f"DTensor inputs reached it, but its sharding cannot be derived: {plan.refusal}.",
                            fix)  # fmt: skip

    return rule


def rule_of(plan: ShardingPlan) -> Callable[..., Any]:
    """The function DTensor calls with the op's arguments (DTensorSpec for tensors)."""
    if plan.refusal:
        return _refuse(plan)
    if callable(plan.user):
        return plan.user
    return lambda *args: strategies(plan, *args)


# -- registration with DTensor, now or when torch.distributed.tensor is first imported ----------------------

_PENDING: list[tuple[Any, ShardingPlan]] = []
_RULES: dict[str, Callable[..., Any]] = {}
_LOCK = threading.Lock()
_HOOKED = False


def attach(overload: Any, plan: ShardingPlan) -> None:
    """Register the plan's rule for ``overload`` with DTensor: now if DTensor is loaded, else at its import."""
    global _HOOKED
    with _LOCK:
        _RULES[plan.op_name] = rule_of(plan)
        if _DTENSOR_MODULE in sys.modules:
            _register(overload, plan)
            return
        _PENDING.append((overload, plan))
        if not _HOOKED:
            sys.meta_path.insert(0, _AfterImport())
            _HOOKED = True


def rule_for(op_name: str) -> Callable[..., Any] | None:
    return _RULES.get(op_name)


def _register(overload: Any, plan: ShardingPlan) -> None:
    from torch.distributed.tensor.experimental import register_sharding

    register_sharding(overload)(_RULES[plan.op_name])
    if plan.requests:
        _hash_flags(overload, min(p for _, p in plan.requests))


def _hash_flags(overload: Any, first: int) -> None:
    """DTensor caches an op's sharding (and its outputs' metadata) by its tensors and the arguments from its first
    int on; a bool is not hashed, so a call leaving an optional output out would reuse the outputs of a call that
    asked for it. Hashing from the first flag on keeps them apart."""
    from ..compat.torch_private import resolve

    infos = resolve("torch.distributed.tensor._api", "DTensor._op_dispatcher.sharding_propagator.op_to_schema_info")
    info = infos[overload]
    infos[overload] = dataclasses.replace(info, static_argnum=min(info.static_argnum, first))


def _flush() -> None:
    with _LOCK:
        pending, _PENDING[:] = list(_PENDING), []
        for overload, plan in pending:
            _register(overload, plan)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Registers the pending rules once ``torch.distributed.tensor`` has finished importing."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _DTENSOR_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module: Any) -> None:
            exec_module(module)
            _flush()

        spec.loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec
