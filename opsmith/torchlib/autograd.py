"""Autograd for opsmith ops: a declared ``Backward`` is registered with ``torch.library.register_autograd``.

That is PyTorch's own mechanism, so eager autograd and AOTAutograd (``torch.compile``) both use it and the
op stays one node in the graph. It costs ~5 us of Python per call of the forward (measured on an H200
host: 15.0 us vs 10.4 us for relu), so only ops that declare a backward get it.

An op without a backward gets an Autograd-key entry generated with its eager body (``eager.py``): a call
outside a graph runs the body directly, at the cost of the plain CUDA-key call it replaces; a call whose
inputs require grad goes through ``_NoBackward``, a node whose backward raises ``DifferentiationError``.
PyTorch's default for such ops only *warns* during backward and returns zero gradients, which a
``warnings`` filter (``simplefilter("ignore")``, ``catch_warnings``) silences.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ..declare.record import KernelRecord
from ..declare.spec import Backward
from ..distributed.backward import is_dtensor, run_local, specs_of
from ..errors import DifferentiationError
from ..plan.backward_program import check_backward, program_of

__all__ = ["check_backward", "generic_no_backward", "no_backward_globals", "refuse_inplace_grad", "register_backward"]


#: Where a kept value was saved with save_for_backward (None is an optional input the call passed as None).
_SAVED = object()


def refuse_inplace_grad(op_name: str) -> None:
    raise DifferentiationError(
        op_name,
        "it writes an input in place and declares no backward, and an input "
        "requires grad: gradients through it would be silently wrong.",
        "call it under torch.no_grad() (as optimizer steps do), or declare backward=.",
    )


class _NoBackward(torch.autograd.Function):
    """The graph node of a call to an op without a backward: the forward is the op itself, the backward
    refuses."""

    @staticmethod
    def forward(ctx: Any, op_name: str, overload: Any, *args: Any) -> Any:
        ctx.op_name = op_name
        out = overload(*args)
        outs = out if isinstance(out, tuple) else (out,)
        frozen = [o for o in outs if isinstance(o, torch.Tensor) and not (o.is_floating_point() or o.is_complex())]
        if frozen:
            ctx.mark_non_differentiable(*frozen)
        return out

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise DifferentiationError(ctx.op_name, "a gradient reached it, but it declares no backward.",
                                   "declare backward=Backward(...) for the op, or detach its inputs (x.detach()) where "
                                   "no gradient should flow.")  # fmt: skip


def no_backward_globals(op_name: str, overload: Any) -> dict:
    """What the generated Autograd-key entry of an op without a backward calls (``eager.make_eager``)."""
    after = torch._C._after_autograd_keyset

    def below(keyset: Any, *args: Any) -> Any:
        return overload.redispatch(keyset & after, *args)

    def nograd(*args: Any) -> Any:
        return _NoBackward.apply(op_name, overload, *args)

    return {"_grad_on": torch.is_grad_enabled, "_refuse_inplace": refuse_inplace_grad, "_nograd": nograd,
            "_below": below, "_PY": torch._C.DispatchKey.Python, "_CUDA": torch._C.DispatchKey.CUDA}  # fmt: skip


def generic_no_backward(op_name: str, overload: Any) -> Callable:
    """The Autograd-key refusal for an op whose implementation is a user's ``eager_fn`` (no generated body)."""
    g = no_backward_globals(op_name, overload)
    below, nograd, grad_on = g["_below"], g["_nograd"], torch.is_grad_enabled
    mutable = any(a.alias_info is not None and a.alias_info.is_write for a in overload._schema.arguments)

    def kernel(keyset: Any, *args: Any) -> Any:
        if grad_on() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            if mutable:
                refuse_inplace_grad(op_name)
            return nograd(*args)
        return below(keyset, *args)

    return kernel


def _takes_needs(fn: Callable) -> bool:
    try:
        return "needs_input_grad" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def register_backward(lib: torch.library.Library, record: KernelRecord, backward: Backward) -> None:
    """Register ``backward`` as the op's autograd formula (``torch.library.register_autograd``)."""
    op = record.op_name
    sources, grad_of = check_backward(op, record, backward)
    n_in, n_out = len(record.inputs), len(record.outputs)
    fn, double = backward.fn, backward.double_backward
    program = program_of(record, backward)
    pass_needs = program is None and _takes_needs(fn)
    kept_in = sorted({k for kind, k in sources if kind == "in"})
    kept_out = sorted({k for kind, k in sources if kind == "out"})
    graded_out = {k for kind, k in sources if kind == "grad"}
    nondiff = [k for k in range(n_out) if k not in graded_out]

    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        outs = output if isinstance(output, tuple) else (output,)
        kept = [inputs[k] for k in kept_in] + [outs[k] for k in kept_out]
        tensors = [v for v in kept if isinstance(v, torch.Tensor)]
        ctx.save_for_backward(*tensors)
        # An optional input passed as None is kept as None; its gradient is None (needs_input_grad is False).
        ctx.scalars = [_SAVED if isinstance(v, torch.Tensor) else v for v in kept]
        ctx.out_meta = [None if o is None else (o.shape, o.dtype, o.device) for o in outs]  # None: not asked for
        # DTensor inputs: the backward runs on local shards under placements derived from the forward's rule.
        ctx.dt_specs = specs_of(inputs) if is_dtensor(inputs) else None
        frozen = [outs[k] for k in nondiff if outs[k] is not None]  # an optional output left out is None
        if frozen:  # outputs no gradient flows back through (a saved rstd, an index)
            ctx.mark_non_differentiable(*frozen)

    def backward_fn(ctx: Any, *grads: Any) -> tuple:
        needs = tuple(ctx.needs_input_grad[k] for k in grad_of)
        result: list[Any] = [None] * n_in
        if not any(needs):
            return tuple(result)
        if torch.is_grad_enabled() and not double:
            raise DifferentiationError(op, "double backward (create_graph=True) reached its backward, which is not "
                                       "declared differentiable.", "declare Backward(..., double_backward=True) if "
                                       "fn is differentiable, or call backward without create_graph.")  # fmt: skip
        saved = iter(ctx.saved_tensors)
        kept = [next(saved) if s is _SAVED else s for s in ctx.scalars]
        where = {("in", k): v for k, v in zip(kept_in, kept[: len(kept_in)], strict=True)}
        where.update({("out", k): v for k, v in zip(kept_out, kept[len(kept_in) :], strict=True)})
        args = []
        for kind, k in sources:
            if kind == "grad":
                g = grads[k]
                if g is None:  # the output was unused: its gradient is zero
                    shape, dtype, device = ctx.out_meta[k]
                    g = torch.zeros(shape, dtype=dtype, device=device)
                args.append(g.contiguous())
            else:
                args.append(where[(kind, k)])

        def compute(args: list) -> tuple:
            if program is not None:
                got = program.run(dict(zip(backward.args, args, strict=True)), needs)
            else:
                got = fn(*args, needs_input_grad=needs) if pass_needs else fn(*args)
            return got if isinstance(got, tuple | list) else (got,)

        if ctx.dt_specs is not None:
            got = run_local(op, ctx.dt_specs, sources, grad_of, args, compute)
        else:
            got = compute(args)
        if len(got) != len(grad_of):
            raise DifferentiationError(op, f"the backward returned {len(got)} gradients, the declaration names "
                                       f"{len(grad_of)} ({list(backward.grads)}).",
                                       "return one gradient per name in Backward.grads, in that order.")  # fmt: skip
        for k, need, g in zip(grad_of, needs, got, strict=True):
            result[k] = g if need else None
        return tuple(result)

    torch.library.register_autograd(op, backward_fn, setup_context=setup_context, lib=lib)
