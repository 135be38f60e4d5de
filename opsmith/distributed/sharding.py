"""DTensor sharding rules derived from an op's declaration.

What a declaration proves about data flow: an ``Elementwise`` op computes each output element from its
inputs at that element's position; a ``Reduction`` op computes each row independently of the others and
combines elements only along its ``reduce_dims``. Outputs state their shape relation to an input
(``SameAs``, ``ReduceDims``), and inputs may state theirs (``InputDecl.shape`` with ``DimSize``: an RMSNorm
weight is ``x``'s last axis). From these, for every axis of the op's reference input (the input its
geometry iterates over), each tensor's placement when the op runs on shards of that axis:

* an input that has the axis is sharded along it; one that does not (a norm's weight, when rows are
  sharded) is replicated whole, which is correct because every shard reads it the same way;
* an output follows the input it is shaped after; a ``ReduceDims`` output of a sharded reduced axis is a
  ``Partial`` when the output declares how partial results combine (``combine="sum"``), otherwise that
  axis cannot be sharded;
* an axis a ``Reduction`` combines along cannot be sharded for a same-shape output (a softmax row).

Every rule also lists the all-``Replicate`` strategy. DTensor picks the listed strategy with the least
redistribution, and redistributes mismatched inputs to it, so inputs are never computed on the wrong
shards. An input whose relation to the reference is not declared joins the sharded strategies only when
its shape equals the reference's at call time (then it is read at the same positions); otherwise only the
replicated strategy is offered.

Not derivable, so refused on DTensor input unless ``sharding=`` is given: ``Grid`` and ``Custom``
geometries (the launch says nothing about which element reads what), ``eager_fn`` overrides, outputs
allocated by a ``meta_fn``. Refused always: ops that write an input in place (DTensor would redistribute
it into a copy and the writes would be lost).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ShardingError, SpecError
from ..record import KernelRecord, TensorArg
from ..spec import Custom, Elementwise, Grid, Reduction

__all__ = ["ShardingPlan", "attach", "derive_plan", "rule_for", "rule_of", "strategies"]

_DTENSOR_MODULE = "torch.distributed.tensor"


@dataclass(frozen=True)
class ShardingPlan:
    """How an op's tensors shard, read from its declaration once at registration.

    refusal: why no rule can be derived ("" when one is). ``ref``: the tensor input whose axes the op
    iterates over. ``in_maps``: per tensor input, for each of its axes the reference axis it is (an int,
    possibly negative), "const" for a fixed size, or the whole entry None when the declaration does not say
    (then decided by comparing shapes at call time). ``mixing``: reference axes the kernel combines along.
    ``outputs``: ("same", k) or ("reduce", k, dims, keepdim, combine) over tensor input k.
    """

    op_name: str
    n_args: int
    n_out: int
    tensor_pos: tuple[int, ...]
    refusal: str = ""
    user: Callable[..., Any] | str | None = None
    ref: int = 0
    in_maps: tuple[tuple[int | str, ...] | None, ...] = ()
    mixing: tuple[int, ...] = ()
    outputs: tuple[tuple, ...] = ()
    mutates: bool = False  # writes an input in place: refused on DTensors whatever the rule


def derive_plan(record: KernelRecord, geometry: object, *, eager_fn: Callable | None = None,
                sharding: Callable[..., Any] | str | None = None) -> ShardingPlan:  # fmt: skip
    """The op's ``ShardingPlan``; ``sharding`` is the user's rule (a function, or "replicate")."""
    op = record.op_name
    tensor_pos = tuple(k for k, a in enumerate(record.inputs) if isinstance(a, TensorArg))
    base = {"op_name": op, "n_args": len(record.inputs), "n_out": len(record.outputs), "tensor_pos": tensor_pos}
    written = [a.name for a in record.tensor_inputs if a.mutates]
    if written:
        if sharding is not None:
            raise SpecError(op, "sharding", f"the op writes {written} in place: DTensor would redistribute them into "
                            "copies, and the writes would be lost.",
                            "drop sharding=; call the op on local tensors (t.to_local()) where it meets DTensors.")  # fmt: skip
        return ShardingPlan(**base, mutates=True, refusal=f"it writes {written} in place, and DTensor would "
                            "redistribute them into copies that take the writes")  # fmt: skip
    if sharding is not None:
        if not (callable(sharding) or sharding == "replicate"):
            raise SpecError(op, "sharding", f"{sharding!r} is neither a rule nor 'replicate'.",
                            "pass a function taking the op's arguments (DTensorSpec for tensors) and returning "
                            "[(output placements, input placements), ...], or 'replicate'.")  # fmt: skip
        return ShardingPlan(**base, user=sharding)
    why = _underivable(record, geometry, eager_fn)
    if why:
        return ShardingPlan(**base, refusal=why)
    outputs = tuple(
        ("same", o.shape["same_as"]) if "same_as" in o.shape
        else ("reduce", o.shape["reduce"], tuple(o.shape["dims"]), o.shape["keepdim"], o.shape.get("combine"))
        for o in record.outputs
    )  # fmt: skip
    if isinstance(geometry, Reduction):
        ref, mixing = 0, tuple(geometry.reduce_dims)
    else:  # Elementwise: the first output's shape source
        ref, mixing = outputs[0][1] if outputs else 0, ()
    in_maps = tuple(_in_map(a, ref) if k != ref else None for k, a in enumerate(record.tensor_inputs))
    return ShardingPlan(**base, ref=ref, in_maps=in_maps, mixing=mixing, outputs=outputs)


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


def _in_map(a: TensorArg, ref: int) -> tuple[int | str, ...] | None:
    """Each axis of input ``a`` as a reference axis or "const", from its declared shape; None if undeclared."""
    if a.shape is None:
        return None
    out: list[int | str] = []
    for e in a.shape:
        if isinstance(e, int):
            out.append("const")
        elif e is not None and e[0] == ref:
            out.append(e[1])
        else:
            return None  # any size, or another input's size: say nothing, compare shapes at call time
    return tuple(out)


# -- the rule, evaluated by DTensor on each new combination of input specs --------------------------------


def strategies(plan: ShardingPlan, *args: Any) -> list[tuple[list, list]]:
    """The acceptable placements on one mesh dimension: ``[(output placements, input placements), ...]``
    with None for non-tensor arguments (``register_sharding``'s format); sharded strategies first."""
    from torch.distributed.tensor import Replicate

    replicate = (
        [Replicate()] * plan.n_out,
        [Replicate() if k in plan.tensor_pos else None for k in range(plan.n_args)],
    )
    if plan.user == "replicate":
        return [replicate]
    shapes = [tuple(args[k].shape) for k in plan.tensor_pos]
    maps = _maps(plan, shapes)
    found = []
    if maps is not None:
        nd = len(shapes[plan.ref])
        mixing = {a % nd for a in plan.mixing} if nd else set()
        for axis in range(nd):
            s = _sharded(plan, maps, shapes, axis, axis in mixing)
            if s is not None:
                found.append(s)
    return [*found, replicate]


def _maps(plan: ShardingPlan, shapes: list[tuple]) -> list[list[int | None]] | None:
    """Per tensor input, the normalized reference axis of each of its axes (None: not a reference axis);
    None when some input's relation to the reference is unknown."""
    ref_shape = shapes[plan.ref]
    nd = len(ref_shape)
    out: list[list[int | None]] = []
    for k, shape in enumerate(shapes):
        m = plan.in_maps[k] if k < len(plan.in_maps) else None
        if k == plan.ref or (m is None and shape == ref_shape):
            out.append(list(range(nd)))
        elif m is None or len(m) != len(shape) or not nd:
            return None
        else:
            out.append([None if e == "const" else int(e) % nd for e in m])
    return out


def _sharded(plan: ShardingPlan, maps: list, shapes: list, axis: int, mixing: bool) -> tuple[list, list] | None:
    """The strategy that shards reference ``axis``, or None when the declaration does not allow it."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    tensor_pl = []
    for m in maps:
        hits = [j for j, r in enumerate(m) if r == axis]
        if len(hits) > 1:  # an input with the axis twice (a square of it): no consistent split
            return None
        tensor_pl.append(Shard(hits[0]) if hits else Replicate())
    outs = []
    for o in plan.outputs:
        src = tensor_pl[o[1]]
        if o[0] == "same":
            outs.append(src)
            continue
        _, k, dims, keepdim, combine = o
        nd = len(shapes[k])
        reduced = sorted(d % nd for d in dims) if nd else []
        if not src.is_shard():
            outs.append(Replicate())
        elif src.dim in reduced:
            if combine is None:
                return None
            outs.append(Partial(combine))
        else:
            outs.append(Shard(src.dim if keepdim else src.dim - sum(d < src.dim for d in reduced)))
    if mixing and not all(p.is_partial() for p in outs):
        return None  # a split row with a same-shape output (a norm, a softmax), or no declared combine
    if all(p.is_replicate() for p in tensor_pl):
        return None  # the reference does not have the axis (cannot happen for ref's own axes) - nothing sharded
    inputs: list = [None] * plan.n_args
    for pos, p in zip(plan.tensor_pos, tensor_pl, strict=True):
        inputs[pos] = p
    return outs, inputs


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
